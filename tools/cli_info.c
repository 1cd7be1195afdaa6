/* cli_info.c - the work of `sdnpu info` (see tools.h): a model file described through the
 * engine (sdn_model_describe), a vocabulary-only GGUF through its tokenizer, and the
 * machine's kernel path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdnpu.h"
#include "tools/tools.h"
#include "kernels/kernel_path.h"
#include "modelfile/gguf.h"
#include "modelfile/model.h"
#include "modelfile/model_registry.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

/* A GGUF file with a tokenizer but no usable weights: describe its vocabulary. */
static int describe_vocab_only(const char *path) {
    sdn_err err = {0};
    sdn_tokenizer *t = NULL;
    sdn_gguf *g = NULL;
    char resolved[1300];
    int rc = sdn_model_resolve(path, resolved, sizeof resolved, &err);
    if (!rc) rc = sdn_gguf_open(resolved, &g, &err);
    /* a file with tensors is a model whose loading failed: its error is the answer */
    if (!rc && sdn_gguf_n_tensors(g) > 0) rc = -1;
    if (!rc) rc = sdn_tokenizer_from_gguf(g, &t, &err);
    sdn_gguf_close(g);
    if (rc) return -1;
    const char *tmpl = sdn_tokenizer_chat_template(t);
    printf("%s: vocabulary only (no model weights: `sdnpu tokenize` can use it, `sdnpu run` cannot)\n"
           "tokenizer: %s%s%s, %d tokens, longest piece %d bytes, BOS %s\n"
           "chat template: %s\n",
           resolved, sdn_tokenizer_kind_of(t) == SDN_TOKENIZER_SPM ? "SentencePiece" : "BPE", sdn_tokenizer_pre(t)[0] ? ", pre-tokenizer " : "",
           sdn_tokenizer_pre(t), sdn_tokenizer_n_vocab(t), sdn_tokenizer_max_text_bytes(t), sdn_tokenizer_add_bos(t) ? "added" : "not added",
           tmpl ? sdn_chat_kind_name(sdn_chat_detect(tmpl)) : "none");
    if (sdn_tokenizer_warnings(t)[0]) printf("tokenizer notes:\n%s\n", sdn_tokenizer_warnings(t));
    sdn_tokenizer_free(t);
    return 0;
}

int sdn_tool_info_describe(const char *path, const char *tok, int n_ctx_opt) {
    sdn_err err = {0};
    sdn_model *m;
    sdn_model_load_opts o = {.tokenizer_path = tok, .no_tokenizer = 0};
    if (sdn_model_load(path, &o, &m, &err)) {
        /* a llama2.c checkpoint without --tokenizer can still be described */
        sdn_err e2 = {0};
        o.no_tokenizer = 1;
        if (err.code != SDN_EINVAL || sdn_model_load(path, &o, &m, &e2)) {
            if (!describe_vocab_only(path)) return 0;
            fprintf(stderr, "sdnpu info: %s\n", err.msg);
            return 1;
        }
    }
    int trained = sdn_model_cfg(m)->ctx_len, n_ctx = n_ctx_opt;
    if (n_ctx == 0) n_ctx = trained < SDNPU_DEFAULT_N_CTX ? trained : SDNPU_DEFAULT_N_CTX;
    if (n_ctx > trained)
        fprintf(stderr, "sdnpu info: warning: --ctx %d is past %s's trained context length of %d tokens\n", n_ctx, path, trained);
    char *d = sdn_model_describe(m, n_ctx);
    if (d) fputs(d, stdout);
    else fprintf(stderr, "sdnpu info: %s: out of memory describing the model\n", path);
    free(d);
    sdn_model_free(m);
    return d ? 0 : 1;
}

void sdn_tool_info_machine(void) {
    printf("kernel path: %s; CPU features: %s\nprefill matmul: %s (--prefill-matmul)\n", sdn_kpath_describe(), sdn_cpu_features(),
           sdn_prefill_mm_name(sdn_prefill_mm_get()));
}
