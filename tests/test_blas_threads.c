/* test_blas_threads.c - sdnpu's prefill does not depend on the BLAS library. OpenBLAS's SGEMM
 * computes an output column with other operations depending on the call's shape (measured
 * with OpenBLAS 0.3.21: with its Haswell and Zen kernels the last 8 columns of a call are
 * summed in another order, so a column's bits change with the thread split and the chunk;
 * docs/engine.md, "Same bits however the prompt is cut"). So under the default
 * prefill-matmul setting (auto) no weight type calls SGEMM at all; only an explicit `sgemm`
 * does, on the context's own pool with OpenBLAS set to one thread. This test defines
 * openblas_set_num_threads, openblas_get_num_threads and cblas_sgemm itself (the executable's
 * definitions take the place of OpenBLAS's for the static library's calls; its cblas_sgemm is
 * a naive loop) and checks:
 *   - under auto, prefills of every weight type the engine loads call SGEMM zero times, and
 *     their hidden states and logits are bit-identical with 1, 2 and 3 threads and in one
 *     chunk or three - whatever OPENBLAS_CORETYPE the machine runs (CI runs it under several);
 *   - under sgemm, forward passes of contexts with 2 and 1 threads, alternating, set
 *     OpenBLAS's thread count exactly once, to 1 (its own threads are never started, so they
 *     never spin beside the pool); when the program sets another count in between, the next
 *     forward pass sets 1 again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <cblas.h>

#include "engine/forward.h"
#include "kernels/kernel_path.h"
#include "modelfile/model.h"
#include "support/test_util.h"

static int g_calls, g_last = -1, g_repeat;
static long g_sgemm_calls;

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

/* The one SGEMM shape forward.c calls (row-major C = A B^T, alpha 1, beta 0), as a counted
 * naive loop; anything else fails the test. */
void cblas_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta, const enum CBLAS_TRANSPOSE tb, const int M,
                 const int N, const int K, const float alpha, const float *A, const int lda, const float *B, const int ldb,
                 const float beta, float *C, const int ldc) {
    __atomic_add_fetch(&g_sgemm_calls, 1, __ATOMIC_RELAXED);
    if (order != CblasRowMajor || ta != CblasNoTrans || tb != CblasTrans || alpha != 1.0f || beta != 0.0f) abort();
    for (int r = 0; r < M; r++)
        for (int c = 0; c < N; c++) {
            float s = 0;
            for (int k = 0; k < K; k++) s += A[(size_t)r * lda + k] * B[(size_t)c * ldb + k];
            C[(size_t)r * ldc + c] = s;
        }
}

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
    sdn_prefill_mm_set(SDN_PREFILL_MM_SGEMM);
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
    assert_true(g_sgemm_calls > 0);
    sdn_ctx_free(a);
    sdn_ctx_free(b);
    sdn_model_free(m);
    sdn_prefill_mm_set(SDN_PREFILL_MM_AUTO);
}

/* logits of every row of a 100-token prefill with a context of `threads` threads, in one
 * chunk or in chunks of 70 and 30 rows (each more than SDN_INVARIANT_MAX_ROWS or not) */
static float *prefill_logits(sdn_model *m, int threads, int chunked) {
    sdn_ctx *c = tu_ctx(m, 256, threads, 128);
    int V = sdn_model_cfg(m)->vocab, n = 100;
    int32_t tok[128], rows[128];
    for (int i = 0; i < n; i++) tok[i] = 1 + (i * 37) % 500, rows[i] = i;
    float *lg = malloc((size_t)n * V * sizeof(float));
    assert_non_null(lg);
    sdn_err e = {0};
    const int cuts[][3] = {{0, 100, 100}, {0, 70, 100}};
    for (int k = 0; k < 2; k++) {
        const int b0 = cuts[chunked][k], b1 = cuts[chunked][k + 1];
        if (b1 <= b0) continue;
        sdn_batch bt = {.n = b1 - b0, .tokens = tok + b0, .logit_rows = rows, .n_logits = b1 - b0};
        if (sdn_forward(c, &bt, lg + (size_t)b0 * V, &e)) fail_msg("%s", e.msg);
    }
    sdn_ctx_free(c);
    return lg;
}

static void test_threads_agree(void **state) {
    (void)state;
    const char *types[] = {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M"};
    sdn_prefill_mm_set(SDN_PREFILL_MM_AUTO);
    g_sgemm_calls = 0;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        sdn_model *m = tu_load(tu_model("tiny-llama", types[t], 3), NULL);
        int V = sdn_model_cfg(m)->vocab;
        float *one = prefill_logits(m, 1, 0);
        static const int runs[][2] = {{2, 0}, {3, 0}, {2, 1}};
        for (int k = 0; k < 3; k++) {
            float *other = prefill_logits(m, runs[k][0], runs[k][1]);
            size_t bad = 0;
            for (size_t i = 0; i < (size_t)100 * V; i++) bad += memcmp(&one[i], &other[i], sizeof(float)) != 0;
            if (bad)
                fail_msg("%s: %zu of %zu prefill logits differ between 1 thread in one chunk and %d threads%s", types[t], bad,
                         (size_t)100 * V, runs[k][0], runs[k][1] ? " in chunks of 70 and 30" : "");
            free(other);
        }
        free(one);
        sdn_model_free(m);
        if (g_sgemm_calls) fail_msg("%s: the default prefill called SGEMM %ld times", types[t], g_sgemm_calls);
    }
    print_message("%zu weight types: prefill logits bit-identical on 1, 2 and 3 threads and in two chunkings, no SGEMM call\n",
                  sizeof types / sizeof types[0]);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_set_to_one), cmocka_unit_test(test_threads_agree)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
