/* orakul/text_encoder.h — the text-encoder component (kind
 * ORK_KIND_TEXT_ENCODER, ABI 1.3): token ids -> embeddings, forward only.
 *
 * Shaped like the model (orakul/model.h) so the core can drive an encoder
 * block by block and stream its weights within the same VRAM budget as the
 * denoiser: the encoder declares every block's weights (ork_weight_decl with
 * ORK_WEIGHT_* flags; block indices 0 .. n_blocks-1), begin() builds the
 * carry from host token ids WITHOUT reading weights, block(i) runs block i
 * (reading only block i's weights through tensor_api->weight), and end()
 * turns the final carry into the outputs, again without weights. The core
 * owns the graph, the weight store and where weights live; the encoder knows
 * nothing about quantization, streaming or LoRA.
 *
 * Carry slots are the encoder's own (they may hold I32 tensors such as the
 * token ids: a text encoder's carry is never checkpointed for a backward).
 * Tokenization is not the encoder's business (the tokenizer service is).
 *
 * Everything here is [control-thread]; graph work is [stream-ordered] on the
 * graph's stream. A graph with grad enabled works as long as nothing requires
 * grad (an encoder's ops may have no backward and then fail when recorded). */
#ifndef ORAKUL_TEXT_ENCODER_H
#define ORAKUL_TEXT_ENCODER_H

#include <orakul/abi.h>
#include <orakul/model.h>  /* ork_carry, ork_weight_decl, ork_weight_sink, ORK_WEIGHT_* */
#include <orakul/plugin.h>
#include <orakul/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ork_text_encoder_info {
    ork_abi abi;
    const char *family;               /* "t5", "clip", ... */
    const char *variant;              /* "t5-v1_1-xxl", "clip-vit-large-patch14", "custom" */
    int n_blocks;
    const char *const *block_names;   /* n_blocks names, e.g. "encoder.block.3" */
    int n_weights;
    const ork_weight_decl *weights;   /* owned by the encoder instance; block in [0, n_blocks) */
    int hidden_dim;                   /* D of outputs.hidden (4096 T5-XXL, 768 CLIP-L) */
    int pooled_dim;                   /* width of outputs.pooled, or 0 when the encoder has none */
    int max_length;                   /* the longest input it takes (CLIP: 77 positions); 0: no limit */
    int default_length;               /* the length its users pad to (T5 for FLUX.1-dev: 512, CLIP: 77) */
    int vocab_size;                   /* ids must lie in [0, vocab_size) */
    int32_t pad_id, eos_id, bos_id;   /* special ids, -1 when the encoder has none */
} ork_text_encoder_info;

typedef struct ork_text_encoder_inputs {
    ork_abi abi;
    int batch, length;                /* B, L */
    const int32_t *ids;               /* (B, L) token ids, host memory, read during begin() */
    const int32_t *mask;              /* (B, L) host, 1 = a real token, 0 = padding; NULL: all real */
} ork_text_encoder_inputs;

typedef struct ork_text_encoder_outputs {
    ork_abi abi;
    ork_tensor *hidden;               /* (B, L, hidden_dim), the graph's activation dtype */
    ork_tensor *pooled;               /* (B, pooled_dim), or NULL (pooled_dim 0) */
} ork_text_encoder_outputs;

typedef struct ork_text_encoder_vtable {
    ork_abi abi;
    /* Required. params: the component's params buffer (valid during the call). */
    ork_status (*create)(const ork_host *host, const void *params, void **self);
    void (*destroy)(void *self);
    /* Required. Resolve the source (a .safetensors file, a sharded index, a
     * folder holding one; a config.json beside it is read when present), detect
     * the shapes, declare blocks and weights. info stays valid until destroy. */
    ork_status (*open)(void *self, const char *name_or_path, ork_text_encoder_info *info);
    /* Required. Put every declared weight into the sink. */
    ork_status (*load)(void *self, const ork_weight_sink *sink);
    /* Required. Upload the inputs (ids checked against vocab_size and
     * max_length: one line and ORK_E_INVALID otherwise) and build the initial
     * carry. Reads no weight. */
    ork_status (*begin)(void *self, ork_graph *g, const ork_text_encoder_inputs *in, ork_carry *carry);
    /* Required. Run block i (0 <= i < n_blocks), reading only block i's weights. */
    ork_status (*block)(void *self, ork_graph *g, int i, ork_carry *carry);
    /* Required. After the last block: the outputs (graph tensors). Reads no weight. */
    ork_status (*end)(void *self, ork_graph *g, ork_carry *carry, ork_text_encoder_outputs *out);
    /* Appended, optional (ORK_TEXT_ENCODER_HAS_SELECT): before open, which of
     * the encoder's hidden states the outputs stack, in order (a model's text
     * slot names them: ork_text_slot.hidden_states): transformers'
     * output_hidden_states indices, 0 the embeddings, k layer k's output,
     * negative from the end (-1 the last, -2 the one before: Z-Image's).
     * Replaces the encoder's default; hidden_dim becomes n x the width. An
     * index the model lacks is refused by open (one line). */
    ork_status (*select_hidden)(void *self, int n, const int32_t *hidden_states);
} ork_text_encoder_vtable;

/* Whether a vtable (of any 1.x minor) has select_hidden. */
#define ORK_TEXT_ENCODER_HAS_SELECT(vt) \
    ((vt)->abi.struct_size >= offsetof(ork_text_encoder_vtable, select_hidden) + sizeof(void (*)(void)) && \
     (vt)->select_hidden != NULL)

#ifdef __cplusplus
}
#endif
#endif /* ORAKUL_TEXT_ENCODER_H */
