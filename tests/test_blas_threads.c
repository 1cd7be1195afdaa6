/* test_blas_threads.c - OpenBLAS's thread count is process-wide; the forward pass sets it
 * only when it differs from the value it last set (engine/forward.h). This test defines
 * openblas_set_num_threads itself (the executable's definition takes the place of
 * OpenBLAS's for the static library's calls) and counts the calls and their arguments:
 *   - many forward passes of one context call it once, with that context's thread count;
 *   - alternating between two contexts with different counts calls it at every change, each
 *     time with the count of the context about to run (so a pass never runs its GEMMs with
 *     the other context's count), and never twice in a row with the same value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "engine/forward.h"
#include "engine/model.h"
#include "support/test_util.h"

static int g_calls, g_last = -1, g_repeat;

void openblas_set_num_threads(int n);
void openblas_set_num_threads(int n) {
    g_repeat += n == g_last;
    g_last = n;
    g_calls++;
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

static void test_set_only_on_change(void **state) {
    (void)state;
    sdn_model *m = tu_load(tu_model("tiny-llama", "F32", 3), NULL);
    sdn_ctx *a = tu_ctx(m, 256, 2, 128), *b = tu_ctx(m, 256, 1, 128);
    g_calls = 0;
    g_last = -1;
    for (int i = 0; i < 20; i++) prefill(a, 100);
    assert_int_equal(g_calls, 1);
    assert_int_equal(g_last, 2);
    for (int i = 0; i < 10; i++) {
        prefill(b, 100);
        assert_int_equal(g_last, 1);
        prefill(b, 80);
        prefill(a, 100);
        assert_int_equal(g_last, 2);
    }
    assert_int_equal(g_calls, 1 + 2 * 10);
    assert_int_equal(g_repeat, 0);
    sdn_ctx_free(a);
    sdn_ctx_free(b);
    sdn_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_set_only_on_change)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
