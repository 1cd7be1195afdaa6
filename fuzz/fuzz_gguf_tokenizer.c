/* fuzz_gguf_tokenizer.c - libFuzzer target: the input is a GGUF file (usually vocabulary
 * only); its tokenizer section is loaded and fixed texts (plain, control tokens, invalid
 * UTF-8) are tokenized with and without special-token parsing and decoded back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "modelfile/gguf.h"
#include "tokenizer/tokenizer.h"

static const char *texts[] = {
    "Hello world! 123 4567 don't  \t\n\n  tabs\tand spaces   ",
    "<s>[INST] hi [/INST]</s><|im_start|>user\nq<|im_end|><|eot_id|><unk>",
    "\xe2\x96\x81 \xc3\xa9t\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80 \xff\xfe\xc3 bad utf8 \xed\xa0\x80",
    "",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sdn_gguf *g = NULL;
    if (sdn_gguf_open_memory(data, size, "fuzz.gguf", &g, NULL) != SDN_OK) return 0;
    sdn_tokenizer *t = NULL;
    sdn_err err = {0};
    if (sdn_tokenizer_from_gguf(g, &t, &err) == SDN_OK) {
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
            for (int special = 0; special < 2; special++) {
                int32_t *ids = NULL;
                int n = 0;
                if (sdn_tokenize(t, texts[i], strlen(texts[i]), 1, special, &ids, &n, NULL) == SDN_OK) {
                    char *back = NULL;
                    if (sdn_detokenize(t, ids, n, &back, NULL) == SDN_OK) free(back);
                }
                free(ids);
            }
        for (int32_t id = -1; id < 40; id++) {
            char buf[64];
            size_t len;
            (void)sdn_tokenizer_piece(t, id, &len);
            (void)sdn_tokenizer_token_bytes(t, id, buf, sizeof buf);
        }
        sdn_tokenizer_free(t);
    }
    sdn_gguf_close(g);
    return 0;
}
