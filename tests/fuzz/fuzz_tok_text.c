/* fuzz_tok_text.c — libFuzzer target for the tokenizers' encode path
 * (core/text/tokenizer.c and the tok_*.c it runs, core/text/prompt_format.c):
 * each input is a caption, arbitrary bytes (invalid UTF-8, NULs, added tokens'
 * spellings), encoded by small real tokenizers loaded once from
 * tests/fixtures/text: byte-level BPE (tok/bbpe), T5's spiece.model (tok/t5spm),
 * a Whitespace BPE and a Metaspace Unigram (cond/tokenizer, cond/tokenizer_2),
 * Mistral's and Qwen3's FLUX.2 tokenizers (tok_flux2/mistral, tok_flux2/qwen3).
 * Contract checked (fuzz_tok_common.h): encode succeeds with every id in the
 * vocabulary, truncation and padding hold, nothing is logged; Mistral's and
 * Qwen3's FLUX.2 prompt formats give their 96 ids.
 * Built by tests/fuzz/CMakeLists.txt with -DORAKUL_FUZZ=ON (clang), which sets
 * ORK_FUZZ_TOK_FIXTURES to the source tree's tests/fixtures/text. */
#include "fuzz_common.h"
#include "fuzz_tok_common.h"

#ifndef ORK_FUZZ_TOK_FIXTURES
#define ORK_FUZZ_TOK_FIXTURES "tests/fixtures/text"
#endif

static const char *const fz_tok_dirs[] = {"tok/bbpe", "tok/t5spm", "cond/tokenizer", "cond/tokenizer_2",
                                          "tok_flux2/mistral", "tok_flux2/qwen3"};
#define FZ_NTOK (sizeof fz_tok_dirs / sizeof fz_tok_dirs[0])
static ork_tokenizer *fz_toks[FZ_NTOK];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fz_init("fuzz_tok_text");
    for (size_t i = 0; i < FZ_NTOK; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", ORK_FUZZ_TOK_FIXTURES, fz_tok_dirs[i]);
        fz_errors = 0;
        if (ork_tokenizer_load(path, &fz_toks[i]) != ORK_OK) {
            fprintf(stderr, "fuzz_tok_text: %s does not load (ORK_FUZZ_VERBOSE=1 says why)\n", path);
            exit(1);
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    fz_errors = 0;
    for (size_t i = 0; i < FZ_NTOK; i++) {
        fz_tok_encode(fz_toks[i], text, size, 0, 0);
        fz_tok_encode(fz_toks[i], text, size, 77, ORK_TOK_TRUNCATE | ORK_TOK_PAD);
        fz_tok_encode(fz_toks[i], text, size, 0, ORK_TOK_NO_SPECIAL);
    }
    fz_tok_prompt(fz_toks[4], ORK_PROMPT_MISTRAL3_FLUX2, text, size);
    fz_tok_prompt(fz_toks[5], ORK_PROMPT_QWEN3_KLEIN, text, size);
    return 0;
}
