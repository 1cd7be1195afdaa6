/* test_sampler.c - sampling distributions against a brute-force reference (full softmax in
 * double, full sort, top-k then top-p, renormalize), a chi-square test of drawn token
 * frequencies, distribution editing used by speculative sampling, and greedy tie-breaking. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/sdn_util.h"
#include "engine/sampler.h"

typedef struct { int tok; double p; } tp;
static int cmp_tp(const void *a, const void *b) {
    const tp *x = a, *y = b;
    if (x->p > y->p) return -1;
    if (x->p < y->p) return 1;
    return x->tok - y->tok;
}

/* brute force: returns the number of kept tokens, fills out[] */
static int reference(const float *lg, int V, float temp, int top_k, float top_p, tp *out) {
    double mx = -1e300, sum = 0;
    for (int i = 0; i < V; i++) mx = fmax(mx, lg[i]);
    for (int i = 0; i < V; i++) { out[i].tok = i; out[i].p = exp((lg[i] - mx) / temp); sum += out[i].p; }
    for (int i = 0; i < V; i++) out[i].p /= sum;
    qsort(out, (size_t)V, sizeof *out, cmp_tp);
    int n = V;
    if (top_k > 0 && top_k < n) n = top_k;
    double s = 0;
    for (int i = 0; i < n; i++) s += out[i].p;
    if (top_p < 1) {
        double acc = 0;
        for (int i = 0; i < n; i++) {
            acc += out[i].p / s;
            if (acc >= top_p) { n = i + 1; break; }
        }
        s = 0;
        for (int i = 0; i < n; i++) s += out[i].p;
    }
    for (int i = 0; i < n; i++) out[i].p /= s;
    return n;
}

static void test_dist_vs_bruteforce(void **state) {
    sdn_rng r;
    sdn_rng_seed(&r, 1);
    enum { V = 2000 };
    float *lg = malloc(V * sizeof(float));
    tp *ref = malloc(V * sizeof(tp));
    sdn_dist d = {0};
    for (int trial = 0; trial < 200; trial++) {
        for (int i = 0; i < V; i++) lg[i] = 3.0f * sdn_rng_normal(&r);
        sdn_sampling s = {.temp = 0.2f + 1.5f * sdn_rng_float(&r), .top_k = (int)sdn_rng_below(&r, 60), .top_p = trial % 3 ? 0.5f + 0.5f * sdn_rng_float(&r) : 1.0f};
        assert_int_equal(sdn_dist_from_logits(&s, lg, V, &d, NULL), SDN_OK);
        int n = reference(lg, V, s.temp, s.top_k, s.top_p, ref);
        /* tokens with probability below e^-40 of the max may be dropped by the engine */
        int n_sig = 0;
        for (int i = 0; i < n; i++) n_sig += ref[i].p > 1e-15;
        assert_true(d.n >= n_sig && d.n <= n);
        for (int i = 0; i < d.n; i++) {
            assert_int_equal(d.tok[i], ref[i].tok);
            assert_true(fabs(d.p[i] - ref[i].p) < 1e-6);
        }
    }
    sdn_dist_free(&d);
    free(lg);
    free(ref);
}

static void test_chi_square(void **state) {
    /* 8 tokens with known probabilities; 40,000 draws; chi-square with 7 degrees of freedom:
     * the 0.001 critical value is 24.32. */
    float lg[8] = {0.0f, 0.5f, 1.0f, -1.0f, 2.0f, 0.2f, -0.5f, 1.5f};
    sdn_sampling s = {.temp = 1.0f, .top_k = 0, .top_p = 1.0f};
    sdn_dist d = {0};
    assert_int_equal(sdn_dist_from_logits(&s, lg, 8, &d, NULL), SDN_OK);
    double p[8] = {0}, sum = 0;
    for (int i = 0; i < 8; i++) { p[i] = exp(lg[i]); sum += p[i]; }
    sdn_rng r;
    sdn_rng_seed(&r, 42);
    enum { N = 40000 };
    int cnt[8] = {0};
    for (int i = 0; i < N; i++) cnt[sdn_sample(&s, &r, lg, 8, &d)]++;
    double chi = 0;
    for (int i = 0; i < 8; i++) {
        double e = N * p[i] / sum;
        chi += (cnt[i] - e) * (cnt[i] - e) / e;
    }
    print_message("chi-square %.2f (critical 24.32 at alpha 0.001, 7 dof)\n", chi);
    assert_true(chi < 24.32);
    /* the same test catches a broken sampler: drawing from logits with temp 0.8 instead */
    sdn_sampling wrong = {.temp = 0.8f, .top_p = 1.0f};
    memset(cnt, 0, sizeof cnt);
    for (int i = 0; i < N; i++) cnt[sdn_sample(&wrong, &r, lg, 8, &d)]++;
    chi = 0;
    for (int i = 0; i < 8; i++) {
        double e = N * p[i] / sum;
        chi += (cnt[i] - e) * (cnt[i] - e) / e;
    }
    assert_true(chi > 24.32);
    sdn_dist_free(&d);
}

static void test_dist_edit(void **state) {
    float lg[5] = {1, 2, 3, 4, 5};
    sdn_sampling s = {.temp = 1.0f, .top_p = 1.0f};
    sdn_dist d = {0};
    assert_int_equal(sdn_dist_from_logits(&s, lg, 5, &d, NULL), SDN_OK);
    assert_int_equal(d.tok[0], 4);
    float p3 = sdn_dist_prob(&d, 3), p1 = sdn_dist_prob(&d, 1);
    assert_int_equal(sdn_dist_remove(&d, 4), 0);
    assert_true(sdn_dist_prob(&d, 4) == 0.0f);
    double z = 1.0 - (exp(5.0) / (exp(1.0) + exp(2.0) + exp(3.0) + exp(4.0) + exp(5.0)));
    assert_true(fabs(sdn_dist_prob(&d, 3) - p3 / z) < 1e-6);
    assert_true(fabs(sdn_dist_prob(&d, 1) - p1 / z) < 1e-6);
    for (int t = 0; t < 4; t++) {
        int rc = sdn_dist_remove(&d, t);
        assert_int_equal(rc, t < 3 ? 0 : -1);
    }
    assert_int_equal(d.n, 0);
    sdn_dist_free(&d);
}

static void test_greedy_ties(void **state) {
    float lg[6] = {0, 3, 1, 3, -2, 3};
    assert_int_equal(sdn_argmax(lg, 6), 1);
    sdn_sampling g = {.temp = 0};
    sdn_rng r;
    sdn_rng_seed(&r, 0);
    sdn_dist d = {0};
    assert_int_equal(sdn_sample(&g, &r, lg, 6, &d), 1);
    sdn_dist_free(&d);
}

/* min-p against a brute-force filter: the kept tokens are exactly those whose probability
 * (after top-k/top-p) is at least min_p times the largest, renormalized. */
static void test_min_p(void **state) {
    (void)state;
    enum { V = 40 };
    float lg[V];
    sdn_rng rng;
    sdn_rng_seed(&rng, 7);
    for (int i = 0; i < V; i++) lg[i] = (float)(sdn_rng_double(&rng) * 6 - 3);
    const float mps[] = {0.0f, 0.05f, 0.2f, 0.5f, 1.0f};
    for (int k = 0; k < 5; k++) {
        sdn_sampling s = {.temp = 0.8f, .top_p = 1.0f, .min_p = mps[k]};
        sdn_dist d = {0};
        assert_int_equal(sdn_dist_from_logits(&s, lg, V, &d, NULL), SDN_OK);
        double mx = -1e30, z = 0;
        for (int i = 0; i < V; i++) mx = lg[i] > mx ? lg[i] : mx;
        for (int i = 0; i < V; i++) {
            double w = exp((lg[i] - mx) / 0.8);
            if (w >= mps[k] || mps[k] == 0) z += w;
        }
        int kept = 0;
        for (int i = 0; i < V; i++) {
            double w = exp((lg[i] - mx) / 0.8);
            int keep = mps[k] == 0 || w >= mps[k];
            kept += keep;
            assert_true(fabs(sdn_dist_prob(&d, i) - (keep ? w / z : 0)) < 1e-5);
        }
        assert_int_equal(d.n, kept);
        sdn_dist_free(&d);
    }
}

/* The repetition penalty: each distinct token of the window once, sign-dependent, others and
 * the scratch untouched. */
static void test_repeat_penalty(void **state) {
    (void)state;
    float lg[8] = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 0.0f, 1.0f, -0.5f};
    const float orig[8] = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 0.0f, 1.0f, -0.5f};
    uint8_t seen[8] = {0};
    const int32_t win[] = {0, 1, 0, 4, 0, 99, -3};
    sdn_repeat_penalty(lg, 8, win, 7, 2.0f, seen);
    assert_float_equal(lg[0], 1.0f, 0);   /* positive: divided, once although it occurs three times */
    assert_float_equal(lg[1], -2.0f, 0);  /* negative: multiplied */
    assert_float_equal(lg[4], -4.0f, 0);
    for (int i = 0; i < 8; i++) {
        if (i != 0 && i != 1 && i != 4) assert_float_equal(lg[i], orig[i], 0);
        assert_int_equal(seen[i], 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dist_vs_bruteforce),
        cmocka_unit_test(test_chi_square),
        cmocka_unit_test(test_dist_edit),
        cmocka_unit_test(test_greedy_ties),
        cmocka_unit_test(test_min_p),
        cmocka_unit_test(test_repeat_penalty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
