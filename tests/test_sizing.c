/* test_sizing.c - draft size from evidence (draft/sizing.h) against brute force: on random
 * trees with random path scores, factors and cost curves, the kept set's expected tokens per
 * millisecond equals the best over every parent-closed subset of the tree (enumerated), the
 * kept nodes form a valid tree (parents first, depths and tokens kept, calibrated paths
 * non-increasing); the calibration counts exactly the judged nodes (children of the root or of
 * accepted nodes) per source and depth, computed independently here. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/sdn_util.h"
#include "draft/sizing.h"

/* a random tree of n nodes: scores are path estimates (a child's score = parent's x a factor) */
static void random_tree(sdn_tree *t, sdn_rng *g, int n) {
    sdn_tree_clear(t);
    for (int i = 0; i < n; i++) {
        int parent = i == 0 || sdn_rng_below(g, 3) == 0 ? -1 : (int)sdn_rng_below(g, (uint64_t)i);
        float ps = parent < 0 ? 1.0f : t->score[parent];
        float c = (float)(sdn_rng_below(g, 1000) + 1) / 1001.0f;
        int idx = sdn_tree_add(t, parent, (int32_t)(100 + i), ps * c, NULL);
        assert_true(idx == i);
        t->source[i] = (uint8_t)sdn_rng_below(g, 8);
    }
}

/* calibrated paths as the header states them */
static void ref_paths(const sdn_draft_calib *c, const sdn_tree *t, double *path) {
    for (int i = 0; i < t->n; i++) {
        double ps = t->parent[i] < 0 ? 1.0 : t->score[t->parent[i]];
        double q = t->score[i] / ps;
        if (q > 1) q = 1;
        int b = (int)(q * 5);
        q *= (c->hits[t->source[i]][t->depth[i] <= 1 ? 0 : t->depth[i] == 2 ? 1 : 2][b > 4 ? 4 : b] + 1.0) /
             (c->expect[t->source[i]][t->depth[i] <= 1 ? 0 : t->depth[i] == 2 ? 1 : 2][b > 4 ? 4 : b] + 1.0);
        if (q > 0.95) q = 0.95f;
        path[i] = (t->parent[i] < 0 ? 1.0 : path[t->parent[i]]) * q;
    }
}

static void test_select_brute_force(void **state) {
    (void)state;
    sdn_err e = {0};
    sdn_tree t, keep;
    assert_int_equal(sdn_tree_init(&t, 16, &e), SDN_OK);
    assert_int_equal(sdn_tree_init(&keep, 16, &e), SDN_OK);
    sdn_rng g;
    sdn_rng_seed(&g, 11);
    int zero = 0, some = 0;
    for (int it = 0; it < 400; it++) {
        int n = 1 + (int)sdn_rng_below(&g, 12);
        random_tree(&t, &g, n);
        sdn_draft_calib c;
        sdn_draft_calib_init(&c);
        for (int s = 0; s < SDN_CALIB_SOURCES; s++) /* random evidence */
            for (int d = 0; d < SDN_CALIB_DEPTHS; d++)
                for (int b = 0; b < SDN_CALIB_BINS; b++) {
                    c.expect[s][d][b] = (double)sdn_rng_below(&g, 20);
                    c.hits[s][d][b] = (double)sdn_rng_below(&g, 20);
                }
        double ms[64];
        ms[0] = 5.0;
        for (int k = 1; k < 64; k++) ms[k] = ms[k - 1] + 0.2 + 0.1 * (double)sdn_rng_below(&g, 20); /* increasing */
        double path[16];
        ref_paths(&c, &t, path);
        /* brute force over parent-closed subsets */
        double best = 1.0 / ms[0];
        int max_n = 1 + (int)sdn_rng_below(&g, 12);
        for (uint32_t m = 1; m < (1u << n); m++) {
            int ok = 1, cnt = 0;
            double sum = 1;
            for (int i = 0; i < n && ok; i++)
                if (m >> i & 1) {
                    if (t.parent[i] >= 0 && !(m >> t.parent[i] & 1)) ok = 0;
                    cnt++;
                    sum += path[i];
                }
            if (ok && cnt <= max_n && sum / ms[cnt] > best) best = sum / ms[cnt];
        }
        /* the selection */
        keep.n = t.n;
        memcpy(keep.token, t.token, sizeof(int32_t) * (size_t)n);
        memcpy(keep.parent, t.parent, sizeof(int32_t) * (size_t)n);
        memcpy(keep.depth, t.depth, sizeof(int32_t) * (size_t)n);
        memcpy(keep.score, t.score, sizeof(float) * (size_t)n);
        memcpy(keep.source, t.source, (size_t)n);
        int k = sdn_draft_select(&c, &keep, ms, max_n, 0);
        assert_int_equal(k, keep.n);
        assert_true(k <= max_n);
        assert_int_equal(sdn_tree_validate(&keep, &e), SDN_OK);
        double sum = 1;
        for (int j = 0; j < k; j++) {
            int orig = keep.token[j] - 100; /* tokens name the original node */
            assert_true(orig >= 0 && orig < n);
            assert_int_equal(keep.depth[j], t.depth[orig]);
            assert_int_equal(keep.source[j], t.source[orig]);
            int op = t.parent[orig];
            assert_int_equal(keep.parent[j] < 0 ? -1 : keep.token[keep.parent[j]] - 100, op);
            assert_true(fabs(keep.score[j] - path[orig]) < 1e-6);
            if (j) assert_true(keep.score[j] <= keep.score[j - 1]);
            sum += path[orig];
        }
        double got = sum / ms[k];
        if (fabs(got - best) > 1e-9 * best) fail_msg("iteration %d: rate %.9g, brute force %.9g", it, got, best);
        zero += k == 0;
        some += k > 0;
        /* min_n = 1 keeps a node even when none pays */
        if (k == 0) {
            random_tree(&t, &g, n);
            assert_true(sdn_draft_select(&c, &t, ms, max_n, 1) >= 1);
        }
    }
    assert_true(zero > 10 && some > 10); /* both outcomes were exercised */
    sdn_tree_free(&t);
    sdn_tree_free(&keep);
}

static void test_observe(void **state) {
    (void)state;
    sdn_err e = {0};
    sdn_tree t;
    assert_int_equal(sdn_tree_init(&t, 8, &e), SDN_OK);
    /* root -> a(0.8) -> b(0.4) -> c(0.1); root -> d(0.5) -> e(0.25) */
    int a = sdn_tree_add(&t, -1, 1, 0.8f, NULL), b = sdn_tree_add(&t, a, 2, 0.4f, NULL), c = sdn_tree_add(&t, b, 3, 0.1f, NULL);
    int d = sdn_tree_add(&t, -1, 4, 0.5f, NULL), x = sdn_tree_add(&t, d, 5, 0.25f, NULL);
    t.source[a] = 1, t.source[b] = 1, t.source[c] = 7, t.source[d] = 7, t.source[x] = 7;
    sdn_draft_calib cal;
    sdn_draft_calib_init(&cal);
    int32_t acc[1] = {a}; /* a accepted, b rejected: judged a, b (child of accepted a), d; not c, e */
    sdn_draft_calib_observe(&cal, &t, acc, 1, NULL);
    /* cells: (source, depth bucket, conditional in fifths): a 0.8 at depth 1, b 0.5 at depth 2, d 0.5 at depth 1 */
    assert_true(fabs(cal.expect[1][0][4] - 0.8) < 1e-6 && cal.hits[1][0][4] == 1);
    assert_true(fabs(cal.expect[1][1][2] - 0.5) < 1e-6 && cal.hits[1][1][2] == 0);
    assert_true(fabs(cal.expect[7][0][2] - 0.5) < 1e-6 && cal.hits[7][0][2] == 0);
    double total = 0;
    for (int s = 0; s < SDN_CALIB_SOURCES; s++)
        for (int d = 0; d < SDN_CALIB_DEPTHS; d++)
            for (int b = 0; b < SDN_CALIB_BINS; b++) total += cal.expect[s][d][b];
    assert_true(fabs(total - 1.8) < 1e-6); /* nothing else counted (c, e: below a rejected node) */
    assert_true(fabs(sdn_draft_calib_factor(&cal, 1, 1, 0.85) - 2.0 / 1.8) < 1e-6);
    assert_true(fabs(sdn_draft_calib_factor(&cal, 7, 1, 0.5) - 1.0 / 1.5) < 1e-6);
    assert_true(sdn_draft_calib_factor(&cal, 7, 1, 0.9) == 1.0);
    assert_true(sdn_draft_calib_factor(&cal, 3, 5, 0.5) == 1.0);
    /* judge: node d not counted */
    uint8_t judge[5] = {1, 1, 1, 0, 1};
    sdn_draft_calib_init(&cal);
    sdn_draft_calib_observe(&cal, &t, acc, 1, judge);
    assert_true(cal.expect[7][0][2] == 0);
    sdn_tree_free(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_select_brute_force),
        cmocka_unit_test(test_observe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
