/* fuzz_llama2c.c - libFuzzer target for the llama2.c formats. The first byte chooses:
 * even - the rest is a checkpoint (legacy v0 or "ak42" v1 export), loaded without a
 * tokenizer; odd - the rest is a tokenizer.bin, loaded for a vocabulary of
 * 1 + (second byte * 4) tokens, then fixed texts are tokenized and decoded. */
#include <stdlib.h>
#include <string.h>

#include "modelfile/model.h"
#include "tokenizer/tokenizer.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    int which = data[0] & 1, vocab = 1 + data[1] * 4;
    char path[64];
    int fd = fz_memfile(data + 1, size - 1, path);
    if (fd < 0) return 0;
    sdn_err err = {0};
    if (which == 0) {
        sdn_model *m = NULL;
        sdn_model_load_opts o = {.no_tokenizer = 1};
        if (sdn_model_load(path, &o, &m, &err) == SDN_OK) {
            volatile size_t s = sdn_model_weight_bytes(m);
            (void)s;
            sdn_model_free(m);
        }
    } else {
        sdn_tokenizer *t = NULL;
        if (sdn_tokenizer_from_llama2c(path, vocab, &t, &err) == SDN_OK) {
            static const char *texts[] = {"Once upon a time, there was a little girl.", "\xc3\xa9\xff<0x41> \n\t  x", ""};
            for (size_t i = 0; i < 3; i++) {
                int32_t *ids = NULL;
                int n = 0;
                if (sdn_tokenize(t, texts[i], strlen(texts[i]), 1, 0, &ids, &n, NULL) == SDN_OK) {
                    char *back = NULL;
                    if (sdn_detokenize(t, ids, n, &back, NULL) == SDN_OK) free(back);
                }
                free(ids);
            }
            sdn_tokenizer_free(t);
        }
    }
    if (err.code && !err.msg[0]) abort();
    close(fd);
    return 0;
}
