/* fuzz_tok_tekken.c — libFuzzer target for the tokenizer loader on Mistral's
 * tekken.json (core/text/tok_tekken.c: config, base64 vocab, special tokens, turned
 * into a byte-level BPE tokenizer.json):
 * each input is the file <folder>/tekken.json, loaded with ork_tokenizer_load
 * (core/text/tokenizer.c) as a real folder's is.
 * Contract checked (fuzz_tok_common.h): ORK_OK gives a tokenizer with no error
 * line, which then encodes fixed strings (invalid UTF-8 among them) with every
 * id in its vocabulary; a refusal is ORK_E_IO / ORK_E_FORMAT / ORK_E_UNSUPPORTED /
 * ORK_E_NOMEM with exactly one error line.
 * Built by tests/fuzz/CMakeLists.txt with -DORAKUL_FUZZ=ON (clang). */
#include "fuzz_common.h"
#include "fuzz_train_common.h"
#include "fuzz_tok_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fz_init("fuzz_tok_tekken");
    fz_make_dir("fuzz-tok-tekken");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_tok_load_file("tekken.json", data, size);
    return 0;
}
