/* test_schedule.c - the graph-switch scheduling problem (graph_sched/schedule.h):
 *   - the plan simulator against hand-computed timelines;
 *   - sync against its closed form (all G1 compute + every load);
 *   - the exact optimum (search with memoization) against plain enumeration of every
 *     order and window sequence on random small instances, and its plan re-simulated;
 *   - known optima: free loads (optimum = all-G1 compute), loads that fit each block's own
 *     last task (optimum = all-G1 compute, reached by the greedy too), and the 2-partition
 *     construction of docs/graphs.md (optimum = 2B + L iff the items split into two halves
 *     of sum B; otherwise >= 2B + L + 1);
 *   - the greedy: valid plans, never better than the optimum, windows on a hand example. */
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
#include "graph_sched/schedule.h"

static void mk(sdn_sched_inst *in, int N, int C) {
    sdn_err e = {0};
    if (sdn_sched_inst_init(in, N, C, &e)) fail_msg("%s", e.msg);
}

/* integer-valued random instance (exact comparisons) */
static void random_inst(sdn_sched_inst *in, int N, int C, sdn_rng *r) {
    mk(in, N, C);
    for (int p = 0; p < N * C; p++) {
        in->g1[p] = (double)(1 + sdn_rng_below(r, 6));
        in->g2[p] = in->g1[p] + (double)sdn_rng_below(r, 5);
    }
    for (int j = 0; j < N; j++) in->load[j] = (double)sdn_rng_below(r, 12);
}

static double sum_g1(const sdn_sched_inst *in) {
    double s = 0;
    for (int p = 0; p < in->n_blocks * in->n_chunks; p++) s += in->g1[p];
    return s;
}

static void test_simulate_hand(void **state) {
    /* N=2, C=2: tasks (0,0)=4 (0,1)=3 (1,0)=4 (1,1)=3 on G1; G2 costs 6,5,6,5. loads 5, 2. */
    sdn_sched_inst in;
    mk(&in, 2, 2);
    double g1[] = {4, 3, 4, 3}, g2[] = {6, 5, 6, 5};
    memcpy(in.g1, g1, sizeof g1);
    memcpy(in.g2, g2, sizeof g2);
    in.load[0] = 5;
    in.load[1] = 2;
    sdn_err e = {0};
    /* block 0: issued at 1 (t=4), loads 4..9, switches at 2 (t=7: waits to 9); task (1,0) on G2 = 6 -> 15;
       block 1: issued at 3 (t=15), loads 15..17, switch at 4 after task (1,1)=3 -> t=18, load done at 17. */
    sdn_sched_plan p = {.n = 2, .item = {{0, 1, 2}, {1, 3, 4}}};
    assert_int_equal(sdn_sched_plan_check(&in, &p, &e), SDN_OK);
    sdn_sched_result r;
    sdn_sched_simulate(&in, &p, &r);
    assert_true(fabs(r.makespan - 18) < 1e-12);
    assert_true(fabs(r.stall - 2) < 1e-12);
    assert_int_equal(r.g2_tasks, 1);
    assert_true(fabs(r.compute - 16) < 1e-12);
    /* two loads issued together at 0: FIFO 0..5, 5..7; switches at the end */
    sdn_sched_plan q = {.n = 2, .item = {{1, 0, 4}, {0, 0, 4}}};
    sdn_sched_simulate(&in, &q, &r);
    assert_true(fabs(r.makespan - 14) < 1e-12 && r.stall == 0 && r.g2_tasks == 0);
    /* async: block 0 issued at 3 (t=11) 11..16, block 1 issued at 4 (t=14) 16..18: makespan 18 */
    sdn_sched_async(&in, &q);
    sdn_sched_simulate(&in, &q, &r);
    assert_true(fabs(r.makespan - 18) < 1e-12);
    sdn_sched_inst_free(&in);
}

static void test_plan_check(void **state) {
    sdn_sched_inst in;
    mk(&in, 3, 2);
    sdn_err e = {0};
    sdn_sched_plan p = {.n = 2, .item = {{0, 1, 2}, {0, 2, 3}}};
    assert_int_equal(sdn_sched_plan_check(&in, &p, &e), SDN_EINVAL); /* repeated block */
    p = (sdn_sched_plan){.n = 1, .item = {{1, 4, 3}}};
    assert_int_equal(sdn_sched_plan_check(&in, &p, &e), SDN_EINVAL); /* switch before issue */
    p = (sdn_sched_plan){.n = 1, .item = {{1, 0, 7}}};
    assert_int_equal(sdn_sched_plan_check(&in, &p, &e), SDN_EINVAL); /* beyond P = 6 */
    p = (sdn_sched_plan){.n = 2, .item = {{1, 3, 4}, {2, 2, 5}}};
    assert_int_equal(sdn_sched_plan_check(&in, &p, &e), SDN_EINVAL); /* issue order */
    p = (sdn_sched_plan){.n = 2, .item = {{1, 3, 4}, {2, 3, 6}}};
    assert_int_equal(sdn_sched_plan_check(&in, &p, &e), SDN_OK);
    sdn_sched_inst_free(&in);
}

static void test_sync_closed_form(void **state) {
    sdn_rng r;
    sdn_rng_seed(&r, 3);
    for (int it = 0; it < 50; it++) {
        sdn_sched_inst in;
        random_inst(&in, 1 + (int)sdn_rng_below(&r, 8), 1 + (int)sdn_rng_below(&r, 6), &r);
        sdn_sched_plan p;
        sdn_sched_sync(&in, &p);
        sdn_sched_result res;
        sdn_sched_simulate(&in, &p, &res);
        double L = 0;
        for (int j = 0; j < in.n_blocks; j++) L += in.load[j];
        assert_true(fabs(res.makespan - (sum_g1(&in) + L)) < 1e-9);
        assert_int_equal(res.g2_tasks, 0);
        sdn_sched_inst_free(&in);
    }
}

static void test_optimal_vs_enumeration(void **state) {
    sdn_rng r;
    sdn_rng_seed(&r, 11);
    sdn_err e = {0};
    int cases = 0;
    for (int it = 0; it < 60; it++) {
        int N = 1 + (int)sdn_rng_below(&r, 3), C = 1 + (int)sdn_rng_below(&r, N == 3 ? 3 : 4);
        if (it % 10 == 9) { N = 4; C = 2; }
        sdn_sched_inst in;
        random_inst(&in, N, C, &r);
        sdn_sched_plan po, pe;
        double vo, ve;
        assert_int_equal(sdn_sched_optimal(&in, &po, &vo, &e), SDN_OK);
        assert_int_equal(sdn_sched_enumerate(&in, &pe, &ve, &e), SDN_OK);
        if (fabs(vo - ve) > 1e-9) fail_msg("instance %d (N=%d C=%d): optimum %g, enumeration %g", it, N, C, vo, ve);
        assert_int_equal(sdn_sched_plan_check(&in, &po, &e), SDN_OK);
        assert_int_equal(po.n, N);
        sdn_sched_result res;
        sdn_sched_simulate(&in, &po, &res);
        assert_true(fabs(res.makespan - vo) < 1e-9);
        /* the optimum bounds the window plans */
        sdn_sched_plan g;
        sdn_sched_progressive(&in, &g);
        sdn_sched_simulate(&in, &g, &res);
        assert_true(res.makespan >= vo - 1e-9);
        sdn_sched_sync(&in, &g);
        sdn_sched_simulate(&in, &g, &res);
        assert_true(res.makespan >= vo - 1e-9);
        cases++;
        sdn_sched_inst_free(&in);
    }
    assert_int_equal(cases, 60);
}

static void test_free_loads(void **state) {
    sdn_rng r;
    sdn_rng_seed(&r, 5);
    sdn_err e = {0};
    for (int it = 0; it < 20; it++) {
        sdn_sched_inst in;
        random_inst(&in, 2 + (int)sdn_rng_below(&r, 7), 2 + (int)sdn_rng_below(&r, 6), &r);
        for (int j = 0; j < in.n_blocks; j++) in.load[j] = 0;
        sdn_sched_plan p;
        double v;
        assert_int_equal(sdn_sched_optimal(&in, &p, &v, &e), SDN_OK);
        assert_true(fabs(v - sum_g1(&in)) < 1e-9);
        sdn_sched_progressive(&in, &p);
        sdn_sched_result res;
        sdn_sched_simulate(&in, &p, &res);
        assert_true(fabs(res.makespan - sum_g1(&in)) < 1e-9);
        sdn_sched_inst_free(&in);
    }
}

/* Loads no longer than the block's own last G1 task: each block can load while it runs its
 * last chunk, so nothing is exposed and nothing runs on G2. The greedy finds exactly that;
 * sync exposes every load, async the last block's. */
static void test_short_loads(void **state) {
    sdn_rng r;
    sdn_rng_seed(&r, 6);
    sdn_err e = {0};
    for (int it = 0; it < 20; it++) {
        int N = 2 + (int)sdn_rng_below(&r, 8), C = 2 + (int)sdn_rng_below(&r, 6);
        sdn_sched_inst in;
        random_inst(&in, N, C, &r);
        for (int j = 0; j < N; j++) in.load[j] = 1 + (double)sdn_rng_below(&r, (uint64_t)in.g1[(C - 1) * N + j]);
        sdn_sched_plan p;
        double v;
        assert_int_equal(sdn_sched_optimal(&in, &p, &v, &e), SDN_OK);
        assert_true(fabs(v - sum_g1(&in)) < 1e-9);
        sdn_sched_progressive(&in, &p);
        sdn_sched_result res;
        sdn_sched_simulate(&in, &p, &res);
        assert_true(fabs(res.makespan - sum_g1(&in)) < 1e-9);
        assert_int_equal(res.g2_tasks, 0);
        for (int j = 0; j < N; j++) { /* window = the block's own last task */
            assert_int_equal(p.item[j].block, j);
            assert_int_equal(p.item[j].sw, (C - 1) * N + j + 1);
        }
        sdn_sched_async(&in, &p);
        sdn_sched_simulate(&in, &p, &res);
        assert_true(res.makespan >= sum_g1(&in) + in.load[N - 1] - 1e-9); /* the last block's load is exposed */
        sdn_sched_inst_free(&in);
    }
}

static void test_greedy_hand(void **state) {
    /* N=3, C=2 (P=6), G1 = 2 and G2 = 3 per task, loads 3, 3, 5. Backwards from P:
     *   block 2 (5): task 5 (b2, G1 2) + task 4 (b1, switched: G2 3) = 5 -> window [4,6];
     *   block 1 (3): task 3 (b0, switched: G2 3) -> window [3,4];
     *   block 0 (3): task 2 (b2, G1 2) + task 1 (b1, G1 2) -> window [1,3].
     * Timeline: task 0 0..2; b0 loads 2..5 during tasks 1, 2 (2..6); b1 loads 6..9 during task 3 (b0 on G2,
     * 6..9); b2 loads 9..14 during tasks 4 (b1 on G2, 9..12) and 5 (12..14): makespan 14, no stall. */
    sdn_sched_inst in;
    mk(&in, 3, 2);
    for (int p = 0; p < 6; p++) { in.g1[p] = 2; in.g2[p] = 3; }
    in.load[0] = 3; in.load[1] = 3; in.load[2] = 5;
    sdn_sched_plan p;
    sdn_sched_progressive(&in, &p);
    assert_int_equal(p.n, 3);
    int want[3][3] = {{0, 1, 3}, {1, 3, 4}, {2, 4, 6}};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(p.item[i].block, want[i][0]);
        assert_int_equal(p.item[i].issue, want[i][1]);
        assert_int_equal(p.item[i].sw, want[i][2]);
    }
    sdn_sched_result res;
    sdn_sched_simulate(&in, &p, &res);
    assert_true(fabs(res.makespan - 14) < 1e-12);
    assert_true(res.stall == 0);
    assert_int_equal(res.g2_tasks, 2);
    sdn_sched_inst_free(&in);
}

/* The 2-partition construction (docs/graphs.md): items a_1..a_n with sum 2B.
 * Blocks: F (0) costs 1 per chunk except chunk c* (0), free load; X (1) must switch between
 * its tasks of chunks c*-1 (G1 0, G2 M) and c* (G1 M, G2 0), load L; items (2..) cost
 * nothing, load a_i. C = 2B + L + 1 chunks, c* = B + L. Optimum = 2B + L iff partition. */
static void partition_inst(sdn_sched_inst *in, const int *a, int n, int L) {
    int B2 = 0;
    for (int i = 0; i < n; i++) B2 += a[i];
    int B = B2 / 2, C = 2 * B + L + 1, cs = B + L, N = n + 2;
    double M = 10.0 * (B2 + L + 1);
    mk(in, N, C);
    for (int c = 0; c < C; c++) {
        in->g1[c * N + 0] = in->g2[c * N + 0] = c == cs ? 0 : 1;
        in->g1[c * N + 1] = c == cs ? M : 0;
        in->g2[c * N + 1] = c == cs - 1 ? M : 0;
    }
    in->load[0] = 0;
    in->load[1] = L;
    for (int i = 0; i < n; i++) in->load[2 + i] = a[i];
}

static void test_partition_instances(void **state) {
    struct { int a[8], n, L, yes; } cases[] = {
        {{1, 1, 2}, 3, 1, 1},       {{1, 2, 3, 4}, 4, 2, 1}, {{3, 3, 2, 2, 2}, 5, 1, 1},
        {{1, 1, 4}, 3, 1, 0},       {{2, 2, 3, 5}, 4, 1, 0}, {{1, 3}, 2, 2, 0},
    };
    sdn_err e = {0};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        sdn_sched_inst in;
        partition_inst(&in, cases[k].a, cases[k].n, cases[k].L);
        int B2 = 0;
        for (int i = 0; i < cases[k].n; i++) B2 += cases[k].a[i];
        double target = B2 + cases[k].L;
        sdn_sched_plan p;
        double v;
        assert_int_equal(sdn_sched_optimal(&in, &p, &v, &e), SDN_OK);
        if (cases[k].yes) {
            if (fabs(v - target) > 1e-9) fail_msg("case %zu: optimum %g, expected %g", k, v, target);
        } else if (v < target + 1 - 1e-9) fail_msg("case %zu (no partition): optimum %g below %g", k, v, target + 1);
        sdn_sched_result res;
        sdn_sched_simulate(&in, &p, &res);
        assert_true(fabs(res.makespan - v) < 1e-9);
        sdn_sched_progressive(&in, &p);
        sdn_sched_simulate(&in, &p, &res);
        assert_true(res.makespan >= v - 1e-9);
        sdn_sched_inst_free(&in);
    }
}

static void test_limits(void **state) {
    sdn_sched_inst in;
    sdn_err e = {0};
    assert_int_equal(sdn_sched_inst_init(&in, 0, 3, &e), SDN_EINVAL);
    mk(&in, SDN_SCHED_OPT_MAX_BLOCKS + 1, 2);
    sdn_sched_plan p;
    double v;
    assert_int_equal(sdn_sched_optimal(&in, &p, &v, &e), SDN_EINVAL);
    assert_int_equal(sdn_sched_enumerate(&in, &p, &v, &e), SDN_EINVAL);
    sdn_sched_inst_free(&in);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simulate_hand),     cmocka_unit_test(test_plan_check),
        cmocka_unit_test(test_sync_closed_form),  cmocka_unit_test(test_optimal_vs_enumeration),
        cmocka_unit_test(test_free_loads),        cmocka_unit_test(test_short_loads),
        cmocka_unit_test(test_greedy_hand),       cmocka_unit_test(test_partition_instances),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
