/* fuzz_gguf_model.c - libFuzzer target: the input is a model file (GGUF, or anything else,
 * which the loader then reads as a llama2.c checkpoint); loaded as `sdnpu info` would,
 * then its size queries. Finding = any sanitizer report or crash. */
#include <stdlib.h>

#include "modelfile/model.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    int fd = fz_memfile(data, size, path);
    if (fd < 0) return 0;
    sdn_model *m = NULL;
    sdn_err err = {0};
    sdn_model_load_opts o = {.no_tokenizer = 1};
    if (sdn_model_load(path, &o, &m, &err) == SDN_OK) {
        const sdn_model_config *c = sdn_model_cfg(m);
        volatile size_t s = sdn_model_weight_bytes(m) + sdn_model_bytes_per_token(m) + sdn_model_kv_bytes(m, c->ctx_len < 4096 ? c->ctx_len : 4096);
        (void)s;
        sdn_model_free(m);
    } else if (!err.msg[0]) {
        abort(); /* every refusal carries a message */
    }
    close(fd);
    return 0;
}
