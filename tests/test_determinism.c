/* test_determinism.c - the same greedy request gives the same bytes whatever the engine did
 * before or how it ran the request, on the real SmolLM2-135M-Instruct through the
 * public API (sdnpu.h), with the request as a user sends it (document and prompt in one user
 * message):
 *
 *   - specbench-242 (a summary request once answered three ways: ~700 prompt
 *     tokens): plain decoding on a fresh context is the reference; speculative decoding
 *     (sdnpu), the prefill graph in chunks of 64 rows (graphs single, g1 64) and of 128 rows
 *     (graphs sync), 1 thread instead of 2, and the request after another request on the same
 *     context (reusing the chat template's shared first tokens, as a server slot does) all
 *     give its answer byte for byte, for each KV cache type (f16, q8, f32, bf16);
 *   - a long document (longdoc federalist-68, ~2.5K tokens: five 512-position super-tiles):
 *     fresh, speculative, in 64-row chunks and after another request, with the default cache;
 *   - the real Gemma 3 270M (Q4_K_M: Q5_0, Q8_0, Q4_K and Q6_K layers, the types that
 *     once prefilled on OpenBLAS SGEMM) on the request that exposed it: the first 6,000
 *     characters of the first long document, a new line and "Summary:", which under
 *     OPENBLAS_CORETYPE=Haswell was answered differently on 1 and 2 threads: fresh on 2
 *     threads, on 1 thread, speculative, in 64-row chunks and after a request on the same document
 *     (its prefix reused). CI runs
 *     this file under several OPENBLAS_CORETYPE values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sdnpu.h"
#include "sdnpu_experimental.h" /* the graph runs */
#include "datasets/dataset.h"
#include "support/test_util.h"

#define MAX_TOKENS 40

typedef struct run_cfg {
    const char *what;
    const char *graphs; /* NULL: none */
    int g1, threads;
    const char *method;
    int after_other; /* 1: another request first on the same context */
} run_cfg;

static char *answer(sdnpu_model *m, const run_cfg *rc, const char *cache, const sdn_task_row *row, const sdn_task_row *other) {
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.n_ctx = 4096;
    cp.n_threads = rc->threads;
    cp.cache_type_k = cp.cache_type_v = cache;
    sdnpu_graph_params gp;
    sdnpu_graph_params_init(&gp);
    gp.graphs = rc->graphs;
    gp.g1 = rc->g1;
    gp.g2 = 16;
    sdnpu_context *c;
    sdnpu_error e;
    if (sdnpu_context_new_graphs(m, &cp, &gp, &c, &e)) fail_msg("%s: %s", rc->what, e.message);
    for (int k = rc->after_other ? 0 : 1; k < 2; k++) {
        const sdn_task_row *q = k == 0 ? other : row;
        const char *docs[1] = {q->context};
        sdnpu_request r;
        sdnpu_request_init(&r);
        r.prompt = q->prompt;
        r.documents = docs;
        r.n_documents = q->context[0] ? 1 : 0;
        r.max_tokens = MAX_TOKENS;
        r.method = rc->method;
        r.draft_max = rc->graphs ? 8 : 0; /* a fixed draft: the graph runtime then needs no profile */
        sdnpu_result res;
        sdnpu_result_init(&res);
        if (sdnpu_generate(c, &r, &res, &e)) fail_msg("%s, %s: %s", rc->what, q->id, e.message);
        if (k == 1) {
            char *text = strdup(res.text);
            if (rc->after_other && res.stats.reused_tokens < 8)
                fail_msg("%s: only %d prompt tokens were reused from the request before", rc->what, res.stats.reused_tokens);
            sdnpu_result_free(&res);
            sdnpu_context_free(c);
            return text;
        }
        sdnpu_result_free(&res);
    }
    sdnpu_context_free(c);
    return NULL;
}

static void check(sdnpu_model *m, const char *cache, const sdn_task_row *row, const sdn_task_row *other, const run_cfg *cfgs, int n) {
    char *ref = answer(m, &cfgs[0], cache, row, other);
    assert_true(strlen(ref) > 20);
    for (int i = 1; i < n; i++) {
        char *got = answer(m, &cfgs[i], cache, row, other);
        if (strcmp(ref, got) != 0)
            fail_msg("%s, cache %s: '%s' differs from plain decoding on a fresh context:\n  '%s'\n  '%s'", row->id, cache, cfgs[i].what, got, ref);
        free(got);
    }
    print_message("%-13s cache %s: %d ways, the same %zu bytes: \"%.60s...\"\n", row->id, cache, n, strlen(ref), ref);
    free(ref);
}

/* the model at path, with default parameters */
static sdnpu_model *load(const char *path) {
    sdnpu_model_params mp;
    sdnpu_model_params_init(&mp);
    sdnpu_model *m;
    sdnpu_error e;
    if (sdnpu_model_load(path, &mp, &m, &e)) fail_msg("%s", e.message);
    return m;
}

/* the first n bytes of doc followed by suffix (malloc'd) */
static char *doc_then(const char *doc, size_t n, const char *suffix) {
    char *s = malloc(n + strlen(suffix) + 1);
    assert_non_null(s);
    memcpy(s, doc, n);
    strcpy(s + n, suffix);
    return s;
}

static void test_same_bytes(void **state) {
    (void)state;
    const char *path;
    TU_REQUIRE_SMOLLM2(path);
    TU_REQUIRE_SHARED();
    sdn_dataset sum = {0}, lng = {0};
    sdn_err err = {0};
    if (sdn_dataset_load_file(&sum, tu_shared_path("datasets/summary/summary_specbench.jsonl"), &err) ||
        sdn_dataset_load_file(&lng, tu_shared_path("datasets/longdoc/longdoc.jsonl"), &err))
        fail_msg("%s", err.msg);
    const int i242 = sdn_dataset_find(&sum, "specbench-242"), i241 = sdn_dataset_find(&sum, "specbench-241"),
              ifed = sdn_dataset_find(&lng, "federalist-68");
    assert_true(i242 >= 0 && i241 >= 0 && ifed >= 0);
    sdnpu_model *m = load(path);
    const run_cfg cfgs[] = {
        {"plain, fresh context", NULL, 0, 2, "none", 0},
        {"speculative (sdnpu)", NULL, 0, 2, "sdnpu", 0},
        {"graphs single, g1 64", "single", 64, 2, "sdnpu", 0},
        {"graphs sync, g1 128", "sync", 128, 2, "sdnpu", 0},
        {"1 thread", NULL, 0, 1, "none", 0},
        {"after another request on the context", NULL, 0, 2, "sdnpu", 1},
    };
    const char *caches[] = {"f16", "q8", "f32", "bf16"};
    for (int k = 0; k < 4; k++) check(m, caches[k], &sum.rows[i242], &sum.rows[i241], cfgs, (int)(sizeof cfgs / sizeof cfgs[0]));
    const run_cfg lcfgs[] = {cfgs[0], cfgs[1], cfgs[2], cfgs[5]};
    check(m, "f16", &lng.rows[ifed], &sum.rows[i241], lcfgs, 4);
    sdnpu_model_free(m);
    sdn_dataset_free(&sum);
    sdn_dataset_free(&lng);
}

static void test_gemma3_same_bytes(void **state) {
    (void)state;
    const char *path;
    TU_REQUIRE_GEMMA3(path);
    TU_REQUIRE_SHARED();
    sdn_dataset lng = {0};
    sdn_err err = {0};
    if (sdn_dataset_load_file(&lng, tu_shared_path("datasets/longdoc/longdoc.jsonl"), &err)) fail_msg("%s", err.msg);
    assert_true(lng.n > 0);
    /* the prompt: the first 6,000 characters of the first document, a new line, "Summary:" */
    const char *doc = lng.rows[0].context;
    size_t n = strlen(doc) < 6000 ? strlen(doc) : 6000;
    char *prompt = doc_then(doc, n, "\nSummary:");
    /* the request before it on the same context: the same document, another question (its
     * tokens up to the question are reused) */
    char *before = doc_then(doc, n, "\nTitle:");
    static char empty[1];
    sdn_task_row row = lng.rows[0], other = lng.rows[0];
    row.context = other.context = empty;
    row.prompt = prompt;
    other.prompt = before;
    sdnpu_model *m = load(path);
    const run_cfg cfgs[] = {
        {"plain, fresh context, 2 threads", NULL, 0, 2, "none", 0},
        {"1 thread", NULL, 0, 1, "none", 0},
        {"speculative (sdnpu)", NULL, 0, 2, "sdnpu", 0},
        {"graphs single, g1 64", "single", 64, 2, "sdnpu", 0},
        {"after another request on the context", NULL, 0, 2, "sdnpu", 1},
    };
    check(m, "f16", &row, &other, cfgs, (int)(sizeof cfgs / sizeof cfgs[0]));
    free(prompt);
    free(before);
    sdnpu_model_free(m);
    sdn_dataset_free(&lng);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_bytes),
        cmocka_unit_test(test_gemma3_same_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
