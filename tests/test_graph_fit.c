/* test_graph_fit.c - the latency model fit (graph_sched/latency.h) and the verification
 * budget (graph_sched/budget.h):
 *   - least squares recovers exact parameters from noise-free data (R^2 = 1, zero error),
 *     matches the closed-form simple regression on noisy data, refuses rank-deficient data;
 *   - the fit of t = (b + S)/a predicts held-out lengths of synthetic saturating data;
 *   - the budget: the geometric model against its sum, and the chosen (shape, draft)
 *     against a brute-force scan written independently. */
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
#include "graph_sched/budget.h"
#include "graph_sched/latency.h"

static void test_exact_recovery(void **state) {
    double S[12], B[12], T[12];
    for (int i = 0; i < 12; i++) {
        S[i] = 16 << (i % 5);
        B[i] = 256.0 * (i % 3);
        T[i] = 0.002 + 3e-5 * S[i] + 4e-9 * S[i] * B[i];
    }
    sdn_lat_model m;
    sdn_err e = {0};
    assert_int_equal(sdn_lat_fit(S, B, T, 12, 1, &m, &e), SDN_OK);
    assert_true(fabs(m.alpha - 0.002) < 1e-12);
    assert_true(fabs(m.beta - 3e-5) < 1e-15);
    assert_true(fabs(m.kappa - 4e-9) < 1e-18);
    assert_true(fabs(m.r2 - 1) < 1e-12);
    assert_true(m.max_rel_err < 1e-9);
    assert_int_equal(m.n_points, 12);
    assert_true(fabs(sdn_lat_eval(&m, 100, 512) - (0.002 + 3e-3 + 4e-9 * 51200)) < 1e-12);
}

static void test_noisy_vs_closed_form(void **state) {
    enum { N = 40 };
    double x[N], y[N], B[N] = {0};
    sdn_rng r;
    sdn_rng_seed(&r, 4);
    double mx = 0, my = 0;
    for (int i = 0; i < N; i++) {
        x[i] = 8 + (double)sdn_rng_below(&r, 250);
        y[i] = 0.01 + 0.001 * x[i] + 0.002 * sdn_rng_normal(&r);
        mx += x[i] / N;
        my += y[i] / N;
    }
    double sxy = 0, sxx = 0, syy = 0;
    for (int i = 0; i < N; i++) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
    }
    double beta = sxy / sxx, alpha = my - beta * mx, r2 = sxy * sxy / (sxx * syy);
    sdn_lat_model m;
    sdn_err e = {0};
    assert_int_equal(sdn_lat_fit(x, B, y, N, 0, &m, &e), SDN_OK);
    assert_true(fabs(m.beta - beta) < 1e-12);
    assert_true(fabs(m.alpha - alpha) < 1e-12);
    assert_true(fabs(m.r2 - r2) < 1e-9);
    assert_true(m.kappa == 0);
}

static void test_rank_deficient(void **state) {
    double S[4] = {64, 64, 64, 64}, B[4] = {0}, T[4] = {1, 2, 3, 4};
    sdn_lat_model m;
    sdn_err e = {0};
    assert_int_equal(sdn_lat_fit(S, B, T, 4, 0, &m, &e), SDN_EINVAL);
    double X[2] = {1, 2}, y[1] = {3}, p[2];
    assert_int_equal(sdn_lsq(X, y, 1, 2, p, &e), SDN_EINVAL); /* fewer points than parameters */
}

/* Saturating throughput a*S/(b+S) is exactly linear in time: held-out lengths predicted. */
static void test_saturating_heldout(void **state) {
    double a = 2000, b = 40, S[4] = {32, 64, 128, 256}, T[4], B[4] = {0};
    for (int i = 0; i < 4; i++) T[i] = (b + S[i]) / a * (1 + 0.01 * (i % 2 ? 1 : -1)); /* +-1% noise */
    sdn_lat_model m;
    sdn_err e = {0};
    assert_int_equal(sdn_lat_fit(S, B, T, 4, 0, &m, &e), SDN_OK);
    double held[3] = {48, 96, 192};
    for (int i = 0; i < 3; i++) {
        double want = (b + held[i]) / a, got = sdn_lat_eval(&m, held[i], 0);
        assert_true(fabs(got - want) / want < 0.03);
    }
    assert_true(fabs(1 / m.beta - a) / a < 0.05);
}

static void test_geometric(void **state) {
    double a = 0.7;
    for (int d = 0; d < 20; d++) {
        double s = 0;
        for (int i = 0; i <= d; i++) s += pow(a, i);
        assert_true(fabs(sdn_accept_geometric(&a, d) - s) < 1e-12);
    }
    double one = 1;
    assert_true(sdn_accept_geometric(&one, 5) == 6);
    assert_true(fabs(sdn_accept_geometric(NULL, 0) - 1) < 1e-15);
}

/* step cost: flat layers up to 16 rows then linear, plus a per-logit-row head cost */
static double cost(void *ud, int S, int k) { return 0.020 + (S > 16 ? 0.001 * (S - 16) : 0) + 0.0004 * k; }
/* acceptance read from a table (e.g. an offline study's histogram) */
static double table_acc(void *ud, int d) {
    static const double e[8] = {1, 1.9, 2.6, 3.0, 3.2, 3.3, 3.35, 3.37};
    return d < 8 ? e[d] : 3.37;
}

static void test_budget_brute_force(void **state) {
    int shapes[] = {1, 4, 8, 16, 32, 64};
    double accs[] = {0.0, 0.3, 0.6, 0.8, 0.95};
    sdn_err e = {0};
    for (int ai = 0; ai < 5; ai++) {
        sdn_budget b;
        assert_int_equal(sdn_budget_choose(shapes, 6, cost, NULL, sdn_accept_geometric, &accs[ai], &b, &e), SDN_OK);
        double best = -1;
        int bs = 0, bd = 0;
        for (int i = 0; i < 6; i++)
            for (int d = 0; d < shapes[i]; d++) {
                double ex = (1 - pow(accs[ai], d + 1)) / (1 - accs[ai]);
                double v = ex / (0.020 + (shapes[i] > 16 ? 0.001 * (shapes[i] - 16) : 0) + 0.0004 * (d + 1));
                if (v > best * (1 + 1e-12)) { best = v; bs = shapes[i]; bd = d; }
            }
        assert_int_equal(b.shape, bs);
        assert_int_equal(b.draft, bd);
        assert_true(fabs(b.tok_per_s - best) < 1e-9 * best);
        assert_true(b.draft < b.shape);
    }
    sdn_budget b;
    assert_int_equal(sdn_budget_choose(shapes, 6, cost, NULL, table_acc, NULL, &b, &e), SDN_OK);
    assert_true(b.draft >= 2 && b.draft <= 7); /* the table saturates: no point drafting 63 */
    int bad = 65;
    assert_int_equal(sdn_budget_choose(&bad, 1, cost, NULL, NULL, NULL, &b, &e), SDN_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_recovery),    cmocka_unit_test(test_noisy_vs_closed_form), cmocka_unit_test(test_rank_deficient),
        cmocka_unit_test(test_saturating_heldout), cmocka_unit_test(test_geometric),           cmocka_unit_test(test_budget_brute_force),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
