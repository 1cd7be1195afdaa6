/* test_util.c - see test_util.h. */
#include "support/test_util.h"

#include <errno.h>
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "engine/forward.h"
#include "tools/make_model.h"
#include "modelfile/model.h"
#include "modelfile/model_registry.h"
#include "tokenizer/tokenizer.h"
#include "draft/methods.h"
#include "runtime/decode.h"

static char *rot(void) {
    static char bufs[8][1024];
    static int k;
    return bufs[k++ & 7];
}

const char *tu_shared(void) {
    static int done;
    static char path[1024];
    static const char *res;
    if (!done) {
        done = 1;
        /* only $SDN_SHARED and ../shared beside the source tree: a folder found further up
         * could be an unrelated one */
        const char *e = getenv("SDN_SHARED"), *src = getenv("SDN_SOURCE");
        char beside[1024] = "";
        if (src) snprintf(beside, sizeof beside, "%s/../shared", src);
        const char *cands[] = {e, src ? beside : NULL};
        for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
            if (!cands[i]) continue;
            snprintf(path, sizeof path, "%s/DESIGN.md", cands[i]);
            if (access(path, R_OK) == 0) {
                snprintf(path, sizeof path, "%s", cands[i]);
                res = path;
                break;
            }
        }
    }
    if (!res) {
        const char *ci = getenv("CI");
        if (ci && !strcmp(ci, "true")) fail_msg("../shared is missing but CI=true: shared test data must be present");
    }
    return res;
}

const char *tu_source_path(const char *rel) {
    char *b = rot();
    const char *s = getenv("SDN_SOURCE");
    snprintf(b, 1024, "%s/%s", s ? s : "..", rel);
    return b;
}

const char *tu_known_model(const char *name) {
    static char path[1300], checked[64];
    static int ok;
    if (strcmp(checked, name) != 0) {
        snprintf(checked, sizeof checked, "%s", name);
        ok = 0;
        const sdn_known_model *km = sdn_known_model_find(name);
        sdn_err e = {0};
        if (km && !sdn_known_model_check(km, &e)) {
            sdn_known_model_path(km, path, sizeof path);
            ok = 1;
        } else {
            print_message("%s\n", km ? e.msg : "not a known model");
        }
    }
    if (!ok) {
        const char *ci = getenv("CI");
        if (ci && !strcmp(ci, "true")) fail_msg("%s is not in the model cache but CI=true: .ci/run must pull it (./sdnpu test does)", name);
        return NULL;
    }
    return path;
}

const char *tu_smollm2(void) { return tu_known_model("smollm2-135m-instruct"); }

const char *tu_shared_path(const char *rel) {
    char *b = rot();
    snprintf(b, 1024, "%s/%s", tu_shared() ? tu_shared() : "../shared", rel);
    return b;
}

const char *tu_tmpdir(void) {
    static char dir[512];
    if (!dir[0]) {
        /* a new directory every run (mkdtemp): the folder an earlier process of the same pid left
         * would hand this one its files (a history store with answers in it, a server log naming
         * another port); pids repeat (pid_max is 32768 here) and the folders are kept */
        const char *b = getenv("SDN_BUILD");
        snprintf(dir, sizeof dir, "%s/test-tmp-%d-XXXXXX", b ? b : "/tmp", (int)getpid());
        if (!mkdtemp(dir)) {
            fail_msg("cannot create a scratch directory %s: %s", dir, strerror(errno));
        }
    }
    return dir;
}

const char *tu_tmp(const char *name) {
    char *b = rot();
    snprintf(b, 1024, "%s/%s", tu_tmpdir(), name);
    return b;
}

const char *tu_model_layers(const char *shape, const char *type, uint64_t seed, int layers, const char *vocab_from) {
    const char *b = getenv("SDN_BUILD");
    char dir[600];
    if (!b) mkdir("/tmp/sdnpu-test", 0755); /* run outside CTest: no SDN_BUILD */
    snprintf(dir, sizeof dir, "%s/test-models", b ? b : "/tmp/sdnpu-test");
    mkdir(dir, 0755);
    char *path = rot();
    const char *vb = vocab_from ? strrchr(vocab_from, '/') : NULL;
    snprintf(path, 1024, "%s/%s-%s-s%llu-l%d%s%s.gguf", dir, shape, type, (unsigned long long)seed, layers, vb ? "-" : "",
             vb ? vb + 1 : "");
    if (access(path, R_OK) == 0) return path;
    sdn_make_model_opts o = {.shape = shape, .out_path = path, .type = type, .seed = seed, .n_layers = layers,
                             .vocab_from = vocab_from, .quiet = 1};
    sdn_err err = {0};
    if (sdn_make_model(&o, &err)) fail_msg("make-model %s %s: %s", shape, type, err.msg);
    return path;
}

const char *tu_model(const char *shape, const char *type, uint64_t seed) { return tu_model_layers(shape, type, seed, 0, NULL); }

int tu_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

size_t tu_gguf_u32_at(const unsigned char *b, size_t n, const char *key) {
    const size_t l = strlen(key);
    for (size_t i = 8; i + l + 8 < n; i++) {
        uint64_t len;
        uint32_t ty;
        memcpy(&len, b + i - 8, 8);
        memcpy(&ty, b + i + l, 4);
        if (len == l && !memcmp(b + i, key, l) && ty == 4 /* UINT32 */) return i + l + 4;
    }
    return 0;
}

sdn_model *tu_load(const char *path, const char *tokenizer) {
    sdn_model *m;
    sdn_err e = {0};
    sdn_model_load_opts o = {.tokenizer_path = tokenizer && *tokenizer ? tokenizer : NULL, .no_tokenizer = tokenizer == NULL};
    if (sdn_model_load(path, &o, &m, &e)) fail_msg("%s", e.msg);
    return m;
}

sdn_model *tu_load_stories(void) {
    return tu_load(tu_shared_path("models/stories260K/stories260K.bin"), tu_shared_path("models/stories260K/tok512.bin"));
}

sdn_ctx *tu_ctx(sdn_model *m, int n_ctx, int threads, int max_batch) { return tu_ctx_kv(m, n_ctx, threads, max_batch, SDN_KV_AUTO, SDN_KV_AUTO); }

sdn_ctx *tu_ctx_kv(sdn_model *m, int n_ctx, int threads, int max_batch, int type_k, int type_v) {
    sdn_ctx *c;
    sdn_err e = {0};
    sdn_ctx_params p = {.n_ctx = n_ctx, .n_threads = threads, .max_batch = max_batch, .type_k = (sdn_kv_type)type_k, .type_v = (sdn_kv_type)type_v};
    if (sdn_ctx_new(m, &p, &c, &e)) fail_msg("%s", e.msg);
    return c;
}

static int tu_eog(void *ud, int32_t t) { return sdn_tokenizer_is_eog((const sdn_tokenizer *)ud, t); }

int32_t *tu_gen_method(sdn_ctx *c, const char *method, const int32_t *prompt, int n, int max_new, int *n_out, sdn_gen_stats *st) {
    sdn_method_config mc;
    sdn_method_defaults(&mc);
    sdn_drafter d;
    sdn_err e = {0};
    if (sdn_method_create(method, &mc, &d, &e)) fail_msg("%s", e.msg);
    sdn_gen_params gp = {.max_tokens = max_new,
                         .drafter = d.ops ? &d : NULL,
                         .caps = {.max_nodes = SDN_DEFAULT_DRAFT_TOKENS, .max_depth = SDN_DEFAULT_DRAFT_TOKENS, .max_branch = SDN_DEFAULT_BRANCH},
                         .prefill_topk = sdn_method_uses_prefill_preds(method) ? 4 : 0,
                         .reuse_kv = strcmp(method, "none") != 0,
                         .eog = tu_eog,
                         .eog_ud = (void *)sdn_model_tokenizer(sdn_ctx_model(c))};
    int32_t *out;
    if (sdn_generate_tokens(c, prompt, n, &gp, &out, n_out, st, &e)) fail_msg("%s: %s", method, e.msg);
    sdn_drafter_destroy(&d);
    return out;
}
