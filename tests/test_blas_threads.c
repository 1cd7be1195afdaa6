/* test_blas_threads.c - sdnpu runs its prefill GEMMs on each context's own pool, one
 * single-threaded OpenBLAS call per pool thread, and sets OpenBLAS's process-wide thread count
 * to 1 (engine/forward.h). This test defines openblas_set_num_threads itself (the
 * executable's definition takes the place of OpenBLAS's for the static library's calls) and
 * counts the calls and their arguments:
 *   - forward passes of contexts with 2 and 1 threads, alternating, call it exactly once,
 *     with 1 (OpenBLAS's own threads are never started, so they never spin beside the pool);
 *     when the program sets another count in between, the next forward pass sets 1 again;
 *   - a prefill's hidden state and logits are bit-identical with 1 and 2 threads (each output
 *     column's GEMM is the same single-threaded call however the columns are split), for an
 *     F32 model and a quantized one (weights dequantized tile by tile). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "engine/forward.h"
#include "modelfile/model.h"
#include "support/test_util.h"

static int g_calls, g_last = -1, g_repeat;

/* OpenBLAS's count as this stand-in holds it: 2 (the machine's cores) until set */
static int g_count = 2;

void openblas_set_num_threads(int n);
void openblas_set_num_threads(int n) {
    g_repeat += n == g_last;
    g_last = n;
    g_count = n;
    g_calls++;
}

int openblas_get_num_threads(void);
int openblas_get_num_threads(void) { return g_count; }

/* A prefill-sized batch (more than SDN_INVARIANT_MAX_ROWS rows: the SGEMM path). */
static void prefill(sdn_ctx *c, int n) {
    int32_t tok[128];
    for (int i = 0; i < n; i++) tok[i] = 1 + (i * 37) % 500;
    sdn_batch b = {.n = n, .tokens = tok, .n_logits = 0};
    sdn_err e = {0};
    sdn_kv_truncate(c, 0);
    if (sdn_forward(c, &b, NULL, &e)) fail_msg("%s", e.msg);
}

static void test_set_to_one(void **state) {
    (void)state;
    sdn_model *m = tu_load(tu_model("tiny-llama", "F32", 3), NULL);
    sdn_ctx *a = tu_ctx(m, 256, 2, 128), *b = tu_ctx(m, 256, 1, 128);
    g_calls = 0;
    g_last = -1;
    for (int i = 0; i < 20; i++) prefill(a, 100);
    for (int i = 0; i < 10; i++) {
        prefill(b, 100);
        prefill(b, 80);
        prefill(a, 100);
    }
    assert_int_equal(g_calls, 1);
    assert_int_equal(g_last, 1);
    assert_int_equal(g_repeat, 0);
    openblas_set_num_threads(4); /* the embedding program's own setting */
    prefill(a, 100);
    assert_int_equal(g_calls, 3);
    assert_int_equal(g_last, 1);
    sdn_ctx_free(a);
    sdn_ctx_free(b);
    sdn_model_free(m);
}

/* logits of every row of a 100-token prefill with a context of `threads` threads */
static float *prefill_logits(sdn_model *m, int threads) {
    sdn_ctx *c = tu_ctx(m, 256, threads, 128);
    int V = sdn_model_cfg(m)->vocab, n = 100;
    int32_t tok[128], rows[128];
    for (int i = 0; i < n; i++) tok[i] = 1 + (i * 37) % 500, rows[i] = i;
    float *lg = malloc((size_t)n * V * sizeof(float));
    assert_non_null(lg);
    sdn_batch bt = {.n = n, .tokens = tok, .logit_rows = rows, .n_logits = n};
    sdn_err e = {0};
    if (sdn_forward(c, &bt, lg, &e)) fail_msg("%s", e.msg);
    sdn_ctx_free(c);
    return lg;
}

static void test_threads_agree(void **state) {
    (void)state;
    const char *types[] = {"F32", "Q8_0", "Q4_K"};
    for (int t = 0; t < 3; t++) {
        sdn_model *m = tu_load(tu_model("tiny-llama", types[t], 3), NULL);
        int V = sdn_model_cfg(m)->vocab;
        float *one = prefill_logits(m, 1), *two = prefill_logits(m, 2);
        size_t bad = 0;
        for (size_t i = 0; i < (size_t)100 * V; i++) bad += memcmp(&one[i], &two[i], sizeof(float)) != 0;
        if (bad) fail_msg("%s: %zu of %zu prefill logits differ between 1 and 2 threads", types[t], bad, (size_t)100 * V);
        free(one);
        free(two);
        sdn_model_free(m);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_set_to_one), cmocka_unit_test(test_threads_agree)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
