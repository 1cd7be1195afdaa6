/* test_reduce.c - the row reductions of kernels/reduce.h (sdn_argmax_f32, sdn_topk_after) return
 * exactly what their scalar loops return, on every kernel path this CPU has (a path it lacks is
 * reported SKIPPED): random vectors of lengths 1..200 and 49,152 at unaligned addresses, with
 * many ties, NaNs anywhere (index 0 included), +-0 and +-inf, random (top_v, top_i) and
 * k = 1..16; the scalar loops are written out here, the same as the ones the functions replaced
 * (engine/sampler.c, grammar/vocab.c). Deliberately wrong versions planted below must be caught,
 * which shows that the comparison can fail. One more entry per path prints a short timing of
 * both functions against the scalar loops on 49,152 floats (docs/results.md quotes it). */
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
#include "kernels/reduce.h"
#include "support/kpath_test.h"

#define KMAX 16
#define PAD 64 /* guard floats on each side of a vector */

/* ------------------------------------------------------------ the scalar loops */

/* engine/sampler.c's sdn_argmax before kernels/reduce.c */
static int32_t ref_argmax(const float *x, int n) {
    int32_t best = 0;
    float bv = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > bv) {
            bv = x[i];
            best = i;
        }
    return best;
}

static inline int before(float a, int32_t ia, float b, int32_t ib) { return a > b || (a == b && ia < ib); }

/* the top-k loop of grammar/vocab.c's sdn_gstate_argmax before kernels/reduce.c, K = k */
static int ref_topk(const float *logits, int n, float top_v, int32_t top_i, int K, float *cv, int32_t *ci) {
    int m = 0;
    float thr = -INFINITY;
    for (int32_t t = 0; t < n; t++) {
        float x = logits[t];
        if (x < thr || x > top_v || (x == top_v && t <= top_i)) continue;
        if (m == K && !before(x, t, cv[K - 1], ci[K - 1])) continue;
        int j = m < K ? m++ : K - 1;
        while (j > 0 && before(x, t, cv[j - 1], ci[j - 1])) {
            cv[j] = cv[j - 1];
            ci[j] = ci[j - 1];
            j--;
        }
        cv[j] = x;
        ci[j] = t;
        if (m == K) thr = cv[K - 1];
    }
    return m;
}

/* ------------------------------------------------------------ planted wrong versions */

/* the last index of the maximum instead of the first */
static int32_t wrong_argmax_last(const float *x, int n) {
    int32_t best = 0;
    float bv = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] >= bv) {
            bv = x[i];
            best = i;
        }
    return best;
}

/* ref_topk with one flaw: 1 = a "vector filter" that drops NaN lanes even while the arrays have
 * room; 2 = a filter that skips v <= thr instead of v < thr (so -inf never enters the arrays) */
static int flawed_topk(const float *x, int n, float top_v, int32_t top_i, int k, float *cv, int32_t *ci, int flaw) {
    int m = 0;
    float thr = -INFINITY;
    for (int32_t t = 0; t < n; t++) {
        float v = x[t];
        if (flaw == 1 && isnan(v)) continue;
        if (flaw == 2 && v == thr) continue;
        if (v < thr || v > top_v || (v == top_v && t <= top_i)) continue;
        if (m == k && !before(v, t, cv[k - 1], ci[k - 1])) continue;
        int j = m < k ? m++ : k - 1;
        while (j > 0 && before(v, t, cv[j - 1], ci[j - 1])) {
            cv[j] = cv[j - 1];
            ci[j] = ci[j - 1];
            j--;
        }
        cv[j] = v;
        ci[j] = t;
        if (m == k) thr = cv[k - 1];
    }
    return m;
}
static int wrong_topk_nan(const float *x, int n, float top_v, int32_t top_i, int k, float *cv, int32_t *ci) {
    return flawed_topk(x, n, top_v, top_i, k, cv, ci, 1);
}
static int wrong_topk_le(const float *x, int n, float top_v, int32_t top_i, int k, float *cv, int32_t *ci) {
    return flawed_topk(x, n, top_v, top_i, k, cv, ci, 2);
}

/* ------------------------------------------------------------ inputs */

static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* NaNs of both signs and a few payloads */
static float any_nan(sdn_rng *r) {
    static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7fc12345u, 0x7f800001u, 0xffbfffffu};
    return u2f(nans[sdn_rng_below(r, 5)]);
}

static float special(sdn_rng *r) {
    switch (sdn_rng_below(r, 5)) {
    case 0: return any_nan(r);
    case 1: return INFINITY;
    case 2: return -INFINITY;
    case 3: return 0.0f;
    default: return -0.0f;
    }
}

/* n values of one of several shapes, then specials at rate p, sometimes at index 0 or n-1 */
static void fill(sdn_rng *r, float *x, int n) {
    const int shape = (int)sdn_rng_below(r, 6);
    static const double rates[] = {0, 0, 0.005, 0.05, 0.3};
    const double p = rates[sdn_rng_below(r, 5)];
    for (int i = 0; i < n; i++) {
        float v;
        switch (shape) {
        case 0: v = (float)((int)sdn_rng_below(r, 7) - 3); break;               /* many ties */
        case 1: v = sdn_rng_normal(r); break;                                   /* distinct */
        case 2: v = sdn_rng_below(r, 50) ? 1.0f : 2.0f; break;                 /* nearly constant */
        case 3: v = (float)i * 0.5f; break;                                     /* ascending */
        case 4: v = (float)(n - i); break;                                      /* descending */
        default: v = (float)((int)sdn_rng_below(r, 3)) * (float)sdn_rng_below(r, 2); break; /* zeros */
        }
        if (v == 0 && sdn_rng_below(r, 2)) v = -0.0f;
        if (p > 0 && sdn_rng_double(r) < p) v = special(r);
        x[i] = v;
    }
    if (sdn_rng_below(r, 6) == 0) x[0] = any_nan(r);
    if (sdn_rng_below(r, 10) == 0) x[n - 1] = any_nan(r);
    if (sdn_rng_below(r, 10) == 0) x[sdn_rng_below(r, (uint64_t)n)] = INFINITY;
}

/* guard values around x[0..n): they would change the answer if a kernel read them */
static void guard(float *x, int n, float g) {
    for (int i = 1; i <= PAD; i++) x[-i] = g;
    for (int i = 0; i < PAD; i++) x[n + i] = g;
}

/* ------------------------------------------------------------ the comparison */

typedef int32_t (*argmax_fn)(const float *x, int n);
typedef int (*topk_fn)(const float *x, int n, float top_v, int32_t top_i, int k, float *cv, int32_t *ci);

typedef struct {
    long argmax_bad, topk_bad, calls;
} tally;

/* Compare f / g with the scalar loops on one vector x[0..n) (guards around it). */
static void check_vector(float *x, int n, sdn_rng *r, argmax_fn f, topk_fn g, tally *out) {
    if (f) {
        guard(x, n, INFINITY);
        const int32_t want = ref_argmax(x, n), got = f(x, n);
        out->calls++;
        if (got != want) {
            if (!out->argmax_bad)
                print_message("argmax n=%d: got %d (%g), want %d (%g)\n", n, got, (double)x[got], want, (double)x[want]);
            out->argmax_bad++;
        }
    }
    if (!g) return;
    for (int c = 0; c < 6; c++) {
        float top_v;
        int32_t top_i;
        const int32_t j = (int32_t)sdn_rng_below(r, (uint64_t)n);
        switch (c) {
        case 0: top_i = ref_argmax(x, n), top_v = x[top_i]; break; /* the grammar's use */
        case 1: top_i = j, top_v = x[j]; break;
        case 2: top_i = (int32_t)sdn_rng_below(r, (uint64_t)n + 2) - 1, top_v = x[j]; break;
        case 3: top_i = (int32_t)sdn_rng_below(r, (uint64_t)n + 2) - 1, top_v = special(r); break;
        case 4: top_i = j, top_v = 1.0f; break;
        default: top_i = -1, top_v = INFINITY; break;
        }
        /* a value that would be taken after everything else, were it read */
        guard(x, n, isnan(top_v) ? INFINITY : top_v);
        const int k = 1 + (int)sdn_rng_below(r, KMAX);
        float cv0[KMAX + 4], cv1[KMAX + 4];
        int32_t ci0[KMAX + 4], ci1[KMAX + 4];
        for (int i = 0; i < KMAX + 4; i++) cv0[i] = cv1[i] = 12345.f, ci0[i] = ci1[i] = -7;
        const int m0 = ref_topk(x, n, top_v, top_i, k, cv0, ci0);
        const int m1 = g(x, n, top_v, top_i, k, cv1, ci1);
        out->calls++;
        int bad = m0 != m1;
        for (int i = 0; !bad && i < m0; i++) bad = f2u(cv0[i]) != f2u(cv1[i]) || ci0[i] != ci1[i];
        for (int i = m1 < 0 ? 0 : m1; !bad && i < KMAX + 4; i++) bad = cv1[i] != 12345.f || ci1[i] != -7;
        if (bad) {
            if (!out->topk_bad) {
                print_message("topk n=%d k=%d top_v=%g top_i=%d: got m=%d, want m=%d\n", n, k, (double)top_v, top_i, m1, m0);
                for (int i = 0; i < (m0 > m1 ? m0 : m1) && i < KMAX; i++)
                    print_message("  [%d] got %g@%d want %g@%d\n", i, (double)cv1[i], ci1[i], (double)cv0[i], ci0[i]);
            }
            out->topk_bad++;
        }
    }
}

/* Lengths 1..200 (trials each) and 49,152, at random offsets from a 64-byte boundary. */
static tally check_all(argmax_fn f, topk_fn g, uint64_t seed, int trials, int big_trials) {
    enum { BIG = 49152 };
    tally t = {0, 0, 0};
    sdn_rng r;
    sdn_rng_seed(&r, seed);
    float *buf = aligned_alloc(64, sizeof(float) * (BIG + 3 * PAD));
    assert_non_null(buf);
    for (int n = 1; n <= 200; n++)
        for (int tr = 0; tr < trials; tr++) {
            float *x = buf + PAD + sdn_rng_below(&r, 16);
            fill(&r, x, n);
            check_vector(x, n, &r, f, g, &t);
        }
    for (int tr = 0; tr < big_trials; tr++) {
        float *x = buf + PAD + sdn_rng_below(&r, 16);
        fill(&r, x, BIG);
        check_vector(x, BIG, &r, f, g, &t);
    }
    free(buf);
    return t;
}

/* Hand-picked cases: the reference's corners, each on its own. */
static void check_corners(void) {
    const float nan = NAN, inf = INFINITY;
    struct {
        int n;
        float x[5];
    } cases[] = {
        {1, {nan}},           {2, {nan, inf}},         {2, {-0.0f, 0.0f}},      {2, {0.0f, -0.0f}},
        {3, {-inf, -inf, -inf}}, {3, {1, nan, 2}},     {3, {2, nan, 2}},       {4, {-inf, nan, -inf, nan}},
        {5, {1, 3, nan, 3, 3}},  {2, {inf, inf}},      {5, {-1, -0.0f, 0, -0.0f, -2}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int n = cases[c].n;
        const float *x = cases[c].x;
        assert_int_equal(sdn_argmax_f32(x, n), ref_argmax(x, n));
        for (int k = 1; k <= 4; k++)
            for (int ti = -1; ti <= n; ti++) {
                const float tvs[] = {nan, inf, -inf, 0.0f, -0.0f, 2, 3};
                for (size_t v = 0; v < sizeof tvs / sizeof tvs[0]; v++) {
                    float cv0[KMAX], cv1[KMAX];
                    int32_t ci0[KMAX], ci1[KMAX];
                    const int m0 = ref_topk(x, n, tvs[v], ti, k, cv0, ci0);
                    assert_int_equal(sdn_topk_after(x, n, tvs[v], ti, k, cv1, ci1), m0);
                    for (int i = 0; i < m0; i++) {
                        assert_int_equal(f2u(cv1[i]), f2u(cv0[i]));
                        assert_int_equal(ci1[i], ci0[i]);
                    }
                }
            }
    }
    float one = 5;
    assert_int_equal(sdn_argmax_f32(&one, 1), 0);
    assert_int_equal(sdn_argmax_f32(&one, 0), 0);
    float cv[1];
    int32_t ci[1];
    assert_int_equal(sdn_topk_after(&one, 1, 6, -1, 0, cv, ci), 0); /* k < 1 */
    assert_int_equal(sdn_topk_after(&one, 0, 6, -1, 1, cv, ci), 0); /* n = 0 */
}

static void test_same_as_scalar(void **state) {
    kpath_use(state);
    check_corners();
    const tally t = check_all(sdn_argmax_f32, sdn_topk_after, 20240601, 25, 12);
    print_message("path %s: %ld comparisons, %ld argmax and %ld top-k mismatches\n", sdn_kpath_name(sdn_kpath_get()),
                  t.calls, t.argmax_bad, t.topk_bad);
    assert_int_equal(t.argmax_bad, 0);
    assert_int_equal(t.topk_bad, 0);
}

/* The comparison catches wrong versions (path-independent: they are plain C). */
static void test_planted_wrong_caught(void **state) {
    (void)state;
    tally t = check_all(wrong_argmax_last, NULL, 7, 5, 1);
    print_message("last-equal argmax: %ld of %ld comparisons caught\n", t.argmax_bad, t.calls);
    assert_true(t.argmax_bad > 0);
    t = check_all(NULL, wrong_topk_nan, 7, 5, 1);
    print_message("top-k that drops NaN: %ld of %ld comparisons caught\n", t.topk_bad, t.calls);
    assert_true(t.topk_bad > 0);
    t = check_all(NULL, wrong_topk_le, 7, 5, 1);
    print_message("top-k that skips v <= thr: %ld of %ld comparisons caught\n", t.topk_bad, t.calls);
    assert_true(t.topk_bad > 0);
}

/* ------------------------------------------------------------ timing (printed, not checked) */

static int cmp_dbl(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define REPS 200
static volatile int64_t g_sink;

/* median microseconds of REPS calls of expr */
#define MEDIAN_US(out, expr)                                                                                           \
    do {                                                                                                               \
        double ts_[REPS];                                                                                              \
        for (int r_ = 0; r_ < REPS; r_++) {                                                                            \
            const double t0_ = sdn_now();                                                                              \
            g_sink += (expr);                                                                                          \
            ts_[r_] = (sdn_now() - t0_) * 1e6;                                                                         \
        }                                                                                                              \
        qsort(ts_, REPS, sizeof(double), cmp_dbl);                                                                     \
        (out) = ts_[REPS / 2];                                                                                         \
    } while (0)

static void test_timing(void **state) {
    kpath_use(state);
    enum { N = 49152 };
    float *x = aligned_alloc(64, sizeof(float) * N);
    assert_non_null(x);
    sdn_rng r;
    sdn_rng_seed(&r, 99);
    for (int i = 0; i < N; i++) x[i] = 4 * sdn_rng_normal(&r);
    const int32_t top_i = ref_argmax(x, N);
    const float top_v = x[top_i];
    float cv[8];
    int32_t ci[8];
    double a_ref, a_new, k_ref, k_new;
    MEDIAN_US(a_ref, ref_argmax(x, N));
    MEDIAN_US(a_new, sdn_argmax_f32(x, N));
    MEDIAN_US(k_ref, ref_topk(x, N, top_v, top_i, 8, cv, ci));
    MEDIAN_US(k_new, sdn_topk_after(x, N, top_v, top_i, 8, cv, ci));
    print_message("path %s, %d random floats, median of %d calls: argmax scalar %.1f us, sdn_argmax_f32 %.1f us; "
                  "top-8 scalar %.1f us, sdn_topk_after %.1f us\n",
                  sdn_kpath_name(sdn_kpath_get()), N, REPS, a_ref, a_new, k_ref, k_new);
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        KPATH_TESTS(test_same_as_scalar),
        cmocka_unit_test(test_planted_wrong_caught),
        KPATH_TESTS(test_timing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
