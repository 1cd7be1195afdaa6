/* test_kv_reuse.c - reuse of a context's KV cache for the common prompt prefix of the next
 * request (sdn_gen_params.reuse_kv, sdn_kv_common_prefix): the reused prefix is exactly the
 * tokens the context holds at their positions (prefill, accepted draft tokens after
 * compaction; not rejected tree rows), the output equals a fresh context's bit for bit
 * (prompts under 64 tokens run on the batch-invariant kernels whatever the chunking), and
 * the statistics report how many tokens were reused. Reference: the same request on a new
 * context. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/sdn_util.h"
#include "draft/methods.h"
#include "engine/forward.h"
#include "modelfile/model.h"
#include "runtime/decode.h"
#include "support/test_util.h"

static int32_t *gen(sdn_ctx *c, const char *method, const int32_t *prompt, int n, int reuse, int *n_out, sdn_gen_stats *st) {
    sdn_method_config mc;
    sdn_method_defaults(&mc);
    sdn_drafter d;
    sdn_err e = {0};
    if (sdn_method_create(method, &mc, &d, &e)) fail_msg("%s", e.msg);
    sdn_gen_params gp = {.max_tokens = 24, .drafter = d.ops ? &d : NULL, .ignore_eog = 1, .reuse_kv = reuse};
    int32_t *out;
    if (sdn_generate_tokens(c, prompt, n, &gp, &out, n_out, st, &e)) fail_msg("%s", e.msg);
    sdn_drafter_destroy(&d);
    return out;
}

static void test_reuse_matches_fresh(void **state) {
    (void)state;
    sdn_model *m = tu_load(tu_model("tiny-llama", "Q8_0", 3), NULL);
    int V = sdn_model_cfg(m)->vocab;
    sdn_ctx *warm = tu_ctx(m, 512, 2, 256);
    sdn_rng r;
    sdn_rng_seed(&r, 11);
    int32_t base[64];
    for (int i = 0; i < 40; i++) base[i] = (int32_t)sdn_rng_below(&r, (uint64_t)V);
    for (int i = 20; i < 30; i++) base[i] = base[i - 12]; /* something for the drafters to find */
    const char *methods[] = {"none", "pld", "sam", "sdnpu"};
    for (int k = 0; k < 4; k++) {
        /* request 1: a prompt; request 2: the same prompt; request 3: it extended (a second
         * turn); request 4: a prompt that differs at token 5 */
        int32_t p3[64], p4[64];
        memcpy(p3, base, sizeof(int32_t) * 40);
        for (int i = 40; i < 56; i++) p3[i] = (int32_t)sdn_rng_below(&r, (uint64_t)V);
        memcpy(p4, base, sizeof(int32_t) * 40);
        p4[5] = (p4[5] + 1) % V;
        struct { const int32_t *p; int n, want_reused; } rq[] = {{base, 40, 0}, {base, 40, 39}, {p3, 56, 40}, {p4, 40, 5}};
        sdn_kv_truncate(warm, 0);
        for (int q = 0; q < 4; q++) {
            sdn_ctx *fresh = tu_ctx(m, 512, 2, 256);
            int nf, nw;
            sdn_gen_stats sf, sw;
            int32_t *a = gen(fresh, methods[k], rq[q].p, rq[q].n, 0, &nf, &sf);
            int32_t *b = gen(warm, methods[k], rq[q].p, rq[q].n, 1, &nw, &sw);
            assert_int_equal(nf, nw);
            if (memcmp(a, b, sizeof(int32_t) * (size_t)nf)) fail_msg("method %s, request %d: output with reuse differs from a fresh context", methods[k], q);
            assert_int_equal(sf.n_reused, 0);
            /* request 3 reuses the first prompt and the first generated token whose KV entry
             * was committed (the last prompt token and the root of step 1), at least */
            if (q == 2) assert_true(sw.n_reused >= rq[q].want_reused);
            else assert_int_equal(sw.n_reused, rq[q].want_reused);
            free(a);
            free(b);
            sdn_ctx_free(fresh);
        }
    }
    /* prefill predictions need the whole prompt: no reuse then */
    sdn_method_config mc;
    sdn_method_defaults(&mc);
    sdn_drafter d;
    sdn_err e = {0};
    assert_int_equal(sdn_method_create("sam+cal", &mc, &d, &e), SDN_OK);
    sdn_gen_params gp = {.max_tokens = 8, .drafter = &d, .prefill_topk = 3, .reuse_kv = 1, .ignore_eog = 1};
    sdn_gen_stats st;
    int32_t *out;
    int n_out;
    assert_int_equal(sdn_generate_tokens(warm, base, 40, &gp, &out, &n_out, &st, &e), SDN_OK);
    assert_int_equal(st.n_reused, 0);
    free(out);
    sdn_drafter_destroy(&d);
    sdn_ctx_free(warm);
    sdn_model_free(m);
}

/* sdn_kv_common_prefix against brute force over tokens committed by plain forwards. */
static void test_common_prefix(void **state) {
    (void)state;
    sdn_model *m = tu_load(tu_model("tiny-llama", "Q8_0", 3), NULL);
    sdn_ctx *c = tu_ctx(m, 128, 1, 64);
    int32_t t[20] = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24};
    sdn_batch b = {.n = 10, .tokens = t, .n_logits = 0};
    sdn_err e = {0};
    assert_int_equal(sdn_forward(c, &b, NULL, &e), SDN_OK);
    assert_int_equal(sdn_kv_common_prefix(c, t, 20), 10);
    assert_int_equal(sdn_kv_common_prefix(c, t, 4), 4);
    int32_t u[10];
    memcpy(u, t, sizeof u);
    u[7] = 99;
    assert_int_equal(sdn_kv_common_prefix(c, u, 10), 7);
    /* a tree batch with explicit positions: rows off their slot's position are not reusable */
    int32_t tk[3] = {30, 31, 32}, pos[3] = {10, 11, 11};
    uint8_t mask[9] = {1, 0, 0, 1, 1, 0, 1, 0, 1};
    sdn_batch tb = {.n = 3, .tokens = tk, .pos = pos, .mask = mask, .n_logits = 0, .invariant = 1};
    assert_int_equal(sdn_forward(c, &tb, NULL, &e), SDN_OK);
    int32_t v[13];
    memcpy(v, t, sizeof(int32_t) * 10);
    v[10] = 30, v[11] = 31, v[12] = 32;
    assert_int_equal(sdn_kv_common_prefix(c, v, 13), 12);
    /* keep row 2 (token 32 at position 11) as the accepted path's second entry */
    int32_t keep[2] = {0, 2};
    assert_int_equal(sdn_kv_keep(c, 10, keep, 2, &e), SDN_OK);
    v[11] = 32;
    assert_int_equal(sdn_kv_common_prefix(c, v, 12), 12);
    sdn_kv_commit(c, 1); /* block API: token unknown */
    v[12] = 40;
    assert_int_equal(sdn_kv_common_prefix(c, v, 13), 12);
    sdn_ctx_free(c);
    sdn_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_common_prefix),
        cmocka_unit_test(test_reuse_matches_fresh),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
