/* orakul/abi.h — the frozen first member of every ABI struct, the version rule,
 * and the status codes every fallible call returns.
 *
 * Owns: nothing at run time. This header is the promise to third parties:
 * the layout of ork_abi never changes; ABI growth is by appending fields and
 * bumping ORK_ABI_MINOR; a breaking change bumps ORK_ABI_MAJOR.
 *
 * Compatibility rule (checked by the core's loader):
 *   plugin.major == core.major, plugin.minor <= core.minor,
 *   struct_size >= the size of the struct's x.0 layout.
 * The core copies every plugin struct into a zero-filled struct of its own
 * size, so fields a plugin's build does not know read as NULL / 0. */
#ifndef ORAKUL_ABI_H
#define ORAKUL_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ORK_ABI_MAJOR 1
#define ORK_ABI_MINOR 4 /* 1.1: ork_opt_step.param_ids; 1.2: ork_tensor_api.drop;
                          1.3: ORK_KIND_TEXT_ENCODER (orakul/text_encoder.h) and the ops
                          embedding, attention_bias, quick_gelu, layernorm_affine;
                          ork_optimizer_vtable.state_check (optional); ork_model_info's
                          text slots, then blocks, lora_targets, lora_prefix, schedule
                          (ork_model_info_has_blocks) and ORK_WEIGHT_ATTN / _TOKENS;
                          1.4: the ops gated_add, layernorm_modulate (ork_ops_has_fused);
                          qkv_rope, attn_merge (ork_ops_has_qkv) */

/* Frozen forever: {struct_size, major, minor}. */
typedef struct ork_abi {
    uint32_t struct_size; /* sizeof the whole struct this header starts */
    uint16_t major;
    uint16_t minor;
} ork_abi;

/* Fill the header of a struct of type T from sizeof: never by hand. */
#define ORK_ABI_INIT(T) { (uint32_t)sizeof(T), ORK_ABI_MAJOR, ORK_ABI_MINOR }

typedef enum ork_status {
    ORK_OK = 0,
    ORK_E_INVALID = 1,     /* bad argument or bad input data */
    ORK_E_NOMEM = 2,       /* host allocation failed */
    ORK_E_BUDGET = 3,      /* device allocation refused: past the VRAM budget */
    ORK_E_IO = 4,          /* file or OS error */
    ORK_E_FORMAT = 5,      /* malformed file (safetensors, image, json, ...) */
    ORK_E_UNSUPPORTED = 6, /* feature, dtype or device not supported */
    ORK_E_CUDA = 7,        /* CUDA / cuBLASLt / cuDNN error */
    ORK_E_ABI = 8,         /* plugin ABI mismatch */
    ORK_E_CONFIG = 9,      /* configuration error */
    ORK_E_NUMERIC = 10,    /* NaN / Inf where finite values are required */
    ORK_E_INTERNAL = 11,   /* a bug: an invariant did not hold */
} ork_status;

/* Propagate a non-OK status to the caller. */
#define ORK_TRY(expr) do { ork_status ork_try_s_ = (expr); \
    if (ork_try_s_ != ORK_OK) return ork_try_s_; } while (0)

/* Symbol visibility for the one exported plugin entry: exported from a DLL on
 * Windows (MinGW and MSVC), default visibility elsewhere. */
#if defined(_WIN32)
#define ORK_EXPORT __declspec(dllexport)
#elif defined(__GNUC__)
#define ORK_EXPORT __attribute__((visibility("default")))
#else
#define ORK_EXPORT
#endif

#ifdef __cplusplus
}
#endif
#endif /* ORAKUL_ABI_H */
