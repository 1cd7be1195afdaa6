/* test_pld.c - the PLD drafter against a naive transcription of Spec-Bench's
 * find_candidate_pred_tokens (scan every window of every n-gram size at every step), over
 * simulated decoding runs with random acceptance, several configurations, caps and
 * alphabets. Also the rule's corner cases on hand-made sequences. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/sdn_util.h"
#include "draft/pld.h"

/* Spec-Bench's loop, literally: returns the number of draft tokens (0 or num_pred). */
static int naive_pld(const int32_t *x, int L, int max_ngram, int min_ngram, int num_pred, int32_t *out, int *ngram) {
    for (int n = max_ngram; n >= min_ngram; n--) {
        if (n > L) continue;
        const int32_t *g = x + L - n;
        for (int idx = 0; idx + n <= L; idx++) {
            if (memcmp(x + idx, g, sizeof(int32_t) * n) != 0) continue;
            int start = idx + n, end = start + num_pred;
            if (end <= L && start < L - n) {
                memcpy(out, x + start, sizeof(int32_t) * num_pred);
                *ngram = n;
                return num_pred;
            }
        }
    }
    return 0;
}

static void check_step(sdn_drafter *d, sdn_tree *t, const int32_t *x, int L, const sdn_pld_config *c,
                       const sdn_draft_caps *caps) {
    int32_t want[4096];
    int ngram = 0;
    int nw = naive_pld(x, L, c->max_ngram, c->min_ngram, c->num_pred, want, &ngram);
    sdn_tree_clear(t);
    assert_int_equal(sdn_drafter_propose(d, t, caps, NULL), SDN_OK);
    int limit = nw;
    if (caps && caps->max_nodes < limit) limit = caps->max_nodes;
    if (caps && caps->max_depth < limit) limit = caps->max_depth;
    if (t->cap < limit) limit = t->cap;
    if (limit < 0) limit = 0;
    if (t->n != limit) fail_msg("L=%d: drafted %d tokens, reference %d (caps %d)", L, t->n, nw, limit);
    for (int i = 0; i < t->n; i++) {
        if (t->token[i] != want[i] || t->parent[i] != i - 1)
            fail_msg("L=%d: draft token %d is %d (parent %d), reference %d", L, i, t->token[i], t->parent[i], want[i]);
        if (i > 0 && !(t->score[i] < t->score[i - 1])) fail_msg("scores must fall with depth");
        if (!(t->score[i] > 0 && t->score[i] < 1)) fail_msg("score out of (0,1)");
    }
    assert_int_equal(sdn_tree_validate(t, NULL), SDN_OK);
}

/* Decode a "true output" that copies pieces of the context, accepting drafts against it. */
static void run(const sdn_pld_config *c, int V, int n_ctx, int n_out, uint64_t seed, int use_caps) {
    sdn_rng rng;
    sdn_rng_seed(&rng, seed);
    int total = n_ctx + n_out;
    int32_t *x = malloc(sizeof(int32_t) * total);
    for (int i = 0; i < n_ctx; i++) x[i] = (int32_t)sdn_rng_below(&rng, V);
    for (int i = n_ctx; i < total;) {
        if (sdn_rng_below(&rng, 3)) {
            int a = (int)sdn_rng_below(&rng, i), L = 1 + (int)sdn_rng_below(&rng, 15);
            for (int j = 0; j < L && i < total && a + j < i; j++) x[i++] = x[a + j];
        } else {
            x[i++] = (int32_t)sdn_rng_below(&rng, V);
        }
    }
    sdn_drafter d;
    sdn_err e = {0};
    assert_int_equal(sdn_pld_create(c, &d, &e), SDN_OK);
    assert_string_equal(d.ops->name, "pld");
    sdn_tree t;
    assert_int_equal(sdn_tree_init(&t, 32, NULL), SDN_OK);
    assert_int_equal(sdn_drafter_begin(&d, x, n_ctx, NULL, &e), SDN_OK);
    int L = n_ctx, drafted = 0;
    while (L < total) {
        sdn_draft_caps caps = {32, 32, 1};
        if (use_caps) caps = (sdn_draft_caps){(int)sdn_rng_below(&rng, 14), (int)sdn_rng_below(&rng, 14), 1};
        check_step(&d, &t, x, L, c, use_caps ? &caps : NULL);
        drafted += t.n;
        /* verify against the true output: accept the matching prefix plus one bonus token */
        int a = 0;
        while (a < t.n && L + a < total && t.token[a] == x[L + a]) a++;
        int n_acc = a + 1;
        if (L + n_acc > total) n_acc = total - L;
        sdn_draft_feedback fb = {x + L, n_acc, &t, NULL, -1, NULL, 0};
        assert_int_equal(sdn_drafter_feedback(&d, &fb, &e), SDN_OK);
        L += n_acc;
    }
    check_step(&d, &t, x, L, c, NULL);
    assert_true(drafted > 0);
    sdn_tree_free(&t);
    sdn_drafter_destroy(&d);
    free(x);
}

static void test_defaults_vs_naive(void **st) {
    (void)st;
    sdn_pld_config c;
    sdn_pld_defaults(&c);
    assert_int_equal(c.max_ngram, 3), assert_int_equal(c.min_ngram, 1), assert_int_equal(c.num_pred, 10);
    for (int s = 0; s < 24; s++) run(&c, s % 3 == 0 ? 2 : s % 3 == 1 ? 8 : 1000, 1 + 80 * s, 1500, 100 + s, s % 2);
}

static void test_configs_vs_naive(void **st) {
    (void)st;
    static const sdn_pld_config cs[] = {{5, 2, 4}, {1, 1, 1}, {2, 2, 20}, {4, 1, 3}, {8, 3, 10}};
    for (int i = 0; i < 5; i++)
        for (int s = 0; s < 6; s++) run(&cs[i], s % 2 ? 3 : 30, 50 + 40 * s, 300, 200 + 10 * i + s, s % 3 == 0);
}

/* A long context: the index must keep the earliest occurrence, the scan must agree. */
static void test_long_context(void **st) {
    (void)st;
    sdn_pld_config c;
    sdn_pld_defaults(&c);
    run(&c, 50, 20000, 300, 7, 0);
}

static void test_rule_corners(void **st) {
    (void)st;
    sdn_drafter d;
    sdn_tree t;
    assert_int_equal(sdn_tree_init(&t, 16, NULL), SDN_OK);
    sdn_pld_config c = {3, 1, 3};
    assert_int_equal(sdn_pld_create(&c, &d, NULL), SDN_OK);
    /* the final trigram 7 8 9 occurred at 0; its continuation 1 7 8 is complete (ends at
     * position 6 <= L = 7) and starts before the final trigram: it is the draft */
    const int32_t x[] = {7, 8, 9, 1, 7, 8, 9};
    assert_int_equal(sdn_drafter_begin(&d, x, 7, NULL, NULL), SDN_OK);
    sdn_draft_caps caps = {16, 16, 1};
    assert_int_equal(sdn_drafter_propose(&d, &t, &caps, NULL), SDN_OK);
    int32_t want[8];
    int ng;
    int nw = naive_pld(x, 7, 3, 1, 3, want, &ng);
    assert_int_equal(t.n, nw);
    for (int i = 0; i < nw; i++) assert_int_equal(t.token[i], want[i]);
    assert_int_equal(nw, 3);
    assert_int_equal(want[0], 1), assert_int_equal(want[1], 7), assert_int_equal(want[2], 8);
    assert_int_equal(ng, 3);
    /* num_pred < n: for 5 5 5 5 5 every trigram continuation starts inside the final
     * trigram (idx + 3 < L - 3 fails), so the bigram at 0 gives the one-token draft */
    {
        sdn_drafter d1;
        sdn_pld_config c1 = {3, 1, 1};
        const int32_t f[] = {5, 5, 5, 5, 5};
        assert_int_equal(sdn_pld_create(&c1, &d1, NULL), SDN_OK);
        assert_int_equal(sdn_drafter_begin(&d1, f, 5, NULL, NULL), SDN_OK);
        sdn_tree_clear(&t);
        assert_int_equal(sdn_drafter_propose(&d1, &t, &caps, NULL), SDN_OK);
        nw = naive_pld(f, 5, 3, 1, 1, want, &ng);
        assert_int_equal(nw, 1), assert_int_equal(ng, 2);
        assert_int_equal(t.n, 1), assert_int_equal(t.token[0], 5);
        assert_true(t.score[0] > 0.66f && t.score[0] < 0.67f); /* (2/3)^1: matched a bigram */
        sdn_drafter_destroy(&d1);
    }
    /* no earlier occurrence at all: no draft */
    const int32_t y[] = {1, 2, 3, 4};
    assert_int_equal(sdn_drafter_begin(&d, y, 4, NULL, NULL), SDN_OK);
    sdn_tree_clear(&t);
    assert_int_equal(sdn_drafter_propose(&d, &t, &caps, NULL), SDN_OK);
    assert_int_equal(t.n, 0);
    /* shorter than max_ngram, empty context */
    assert_int_equal(sdn_drafter_begin(&d, y, 1, NULL, NULL), SDN_OK);
    assert_int_equal(sdn_drafter_propose(&d, &t, &caps, NULL), SDN_OK);
    assert_int_equal(t.n, 0);
    assert_int_equal(sdn_drafter_begin(&d, NULL, 0, NULL, NULL), SDN_OK);
    assert_int_equal(sdn_drafter_propose(&d, &t, &caps, NULL), SDN_OK);
    assert_int_equal(t.n, 0);
    sdn_drafter_destroy(&d);
    sdn_tree_free(&t);
}

static void test_bad_config(void **st) {
    (void)st;
    sdn_drafter d;
    sdn_err e = {0};
    sdn_pld_config c = {2, 3, 10};
    assert_int_equal(sdn_pld_create(&c, &d, &e), SDN_EINVAL);
    assert_non_null(strstr(e.msg, "max_ngram"));
    c = (sdn_pld_config){3, 0, 10};
    sdn_err_clear(&e);
    assert_int_equal(sdn_pld_create(&c, &d, &e), SDN_EINVAL);
    assert_non_null(strstr(e.msg, "min_ngram"));
    c = (sdn_pld_config){3, 1, 0};
    sdn_err_clear(&e);
    assert_int_equal(sdn_pld_create(&c, &d, &e), SDN_EINVAL);
    assert_non_null(strstr(e.msg, "num_pred"));
    assert_int_equal(sdn_pld_create(NULL, &d, &e), SDN_OK);
    sdn_drafter_destroy(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule_corners),
        cmocka_unit_test(test_defaults_vs_naive),
        cmocka_unit_test(test_configs_vs_naive),
        cmocka_unit_test(test_long_context),
        cmocka_unit_test(test_bad_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
