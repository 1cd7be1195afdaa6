/* test_attention.c - the KV cache and the attention kernels on their own (attention/kv_cache.h,
 * attention/attention.h):
 *
 *   - the cache's F16 conversion equals the F16C instruction (VCVTPS2PH, round to nearest
 *     even) on every half-precision value, ties and random floats, saturating instead of
 *     overflowing; the q8 row quantization is within half a step of every value;
 *   - attention over caches of every key/value type against a naive double-precision
 *     softmax over the same stored (dequantized) entries, for causal prefill batches, decode
 *     rows, tree batches and sliding windows, across tile and super-tile boundaries;
 *   - the same inputs give the same bits on every kernel path (portable, avx2, avx512 on
 *     x86-64, amx too; portable, neon, dotprod, i8mm on AArch64; the paths this CPU lacks are reported
 *     skipped), with 1 and 2 threads, and for head
 *     dimensions the SIMD kernels take and ones they leave to the portable code; the one
 *     exception, named: bf16 keys on the amx path with AMX-BF16 (TDPBF16PS, its own bits),
 *     whose scores are held to the exact dot product and to their own invariance instead. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "common/sdn_util.h"
#include "attention/attention.h"
#include "attention/attention_kern.h"
#include "kernels/kernel_path.h"
#include "kernels/matmul_internal.h"
#include "attention/kv_cache.h"
#include "kernels/threadpool.h"

/* every kernel path of this build's architecture (the portable one first: the reference) */
#if defined(__aarch64__)
static const sdn_kpath paths[] = {SDN_KPATH_PORTABLE, SDN_KPATH_NEON, SDN_KPATH_DOTPROD, SDN_KPATH_I8MM};
#else
static const sdn_kpath paths[] = {SDN_KPATH_PORTABLE, SDN_KPATH_AVX2, SDN_KPATH_AVX512, SDN_KPATH_AMX};
#endif
#define NPATHS ((int)(sizeof paths / sizeof paths[0]))

#if defined(__x86_64__)
__attribute__((target("f16c"))) static uint16_t f16c(float x) { return (uint16_t)_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT); }
#endif

static void test_f16_conversion(void **state) {
    (void)state;
#if defined(__x86_64__)
    if (!strstr(sdn_cpu_features(), "f16c")) {
        print_message("SKIPPED: this CPU lacks F16C, the reference of the conversion\n");
        skip();
    }
    long n = 0;
    /* every half and the midpoints between neighbours (ties to even) */
    for (uint32_t h = 0; h < 0x7bff; h++) {
        float x = sdn_fp16_to_fp32((uint16_t)h), y = sdn_fp16_to_fp32((uint16_t)(h + 1));
        float mid = 0.5f * (x + y);
        float vals[4] = {x, -x, mid, -mid};
        for (int k = 0; k < 4; k++, n++) assert_int_equal(sdn_kv_f16(vals[k]), f16c(vals[k]));
    }
    sdn_rng r;
    sdn_rng_seed(&r, 7);
    for (int i = 0; i < 1000000; i++, n++) {
        uint32_t bits = (uint32_t)sdn_rng_below(&r, 1ull << 32);
        float x;
        memcpy(&x, &bits, 4);
        if (isnan(x)) continue;
        uint16_t want = fabsf(x) >= 65520.0f ? (uint16_t)(x < 0 ? 0xfbff : 0x7bff) : f16c(x); /* saturated, not infinite */
        assert_int_equal(sdn_kv_f16(x), want);
    }
    assert_int_equal(sdn_kv_f16(INFINITY), 0x7bff);
    print_message("F16 conversion equals F16C on %ld values (saturating at +-65504)\n", n);
#elif defined(__aarch64__)
    /* the AArch64 row conversion (FCVTN, attention_arm.c) against the scalar one, bit for bit:
     * every half and the midpoints between neighbours (ties to even), random bit patterns
     * (NaN, infinities, subnormals, overflow included) */
    enum { R = 4096 };
    static float x[R];
    static uint16_t got[R];
    long n = 0;
    int m = 0;
    sdn_rng r;
    sdn_rng_seed(&r, 7);
    for (uint32_t h = 0; h < 0x7bff || m; h++) {
        if (h < 0x7bff) {
            float a = sdn_fp16_to_fp32((uint16_t)h), b = sdn_fp16_to_fp32((uint16_t)(h + 1));
            float mid = 0.5f * (a + b);
            x[m++] = a, x[m++] = -a, x[m++] = mid, x[m++] = -mid;
        }
        if (m == R || h >= 0x7bff) {
            sdn_kv_f16_row_neon(x, got, m);
            for (int i = 0; i < m; i++, n++)
                if (got[i] != sdn_kv_f16(x[i])) fail_msg("F16 of %a: FCVTN row %#x, scalar %#x", (double)x[i], got[i], sdn_kv_f16(x[i]));
            m = 0;
        }
    }
    for (int it = 0; it < 250; it++) {
        for (int i = 0; i < R; i++) {
            const uint32_t bits = (uint32_t)sdn_rng_below(&r, 1ull << 32);
            memcpy(&x[i], &bits, 4);
        }
        x[0] = INFINITY, x[1] = -INFINITY, x[2] = NAN, x[3] = -NAN;
        sdn_kv_f16_row_neon(x, got, R);
        for (int i = 0; i < R; i++, n++)
            if (got[i] != sdn_kv_f16(x[i])) fail_msg("F16 of %a: FCVTN row %#x, scalar %#x", (double)x[i], got[i], sdn_kv_f16(x[i]));
    }
    print_message("F16 row conversion (FCVTN) equals the scalar one on %ld values\n", n);
#else
    print_message("SKIPPED: no SIMD F16 conversion on this architecture\n");
    skip();
#endif
}

static void test_q8_row(void **state) {
    (void)state;
    sdn_rng r;
    sdn_rng_seed(&r, 8);
    for (int t = 0; t < 2000; t++) {
        float x[256];
        int8_t q[256];
        const int n = 1 + (int)sdn_rng_below(&r, 256);
        const float mag = powf(10.0f, (float)sdn_rng_below(&r, 12) - 6.0f);
        for (int i = 0; i < n; i++) x[i] = mag * ((float)sdn_rng_below(&r, 2000001) / 1e6f - 1.0f);
        if (t % 50 == 0) memset(x, 0, sizeof x);
        const float d = sdn_kv_q8_row(x, n, q);
        float amax = 0;
        for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
        assert_true(d >= 0 && isfinite(d));
        for (int i = 0; i < n; i++) {
            assert_true(q[i] >= -127 && q[i] <= 127);
            /* half a step, plus what rounding the scale to F16 can push past the clamp; rows
             * whose scale falls below F16's normal range (max |x| < 127 * 2^-14, 7.8e-3) lose
             * its precision, by at most 127 * 2^-25 per element */
            if (!(fabsf(x[i] - q[i] * d) <= 0.5f * d + amax * 2e-3f + 4e-6f))
                fail_msg("row %d element %d: %g quantized to %d x %g", t, i, x[i], q[i], d);
        }
    }
}

/* sdn_kv_bf16 against a reference by exact arithmetic: the nearest of the two BF16 neighbours
 * of x in double precision (a tie to the even one), for every BF16 value and the midpoints
 * between neighbours, and random bit patterns; magnitudes below 2^-30 give a signed zero,
 * NaN stays NaN, overflow rounds to infinity. */
static uint16_t bf16_ref(float x) {
    if (isnan(x)) return 0x7fc0;
    if (fabsf(x) < 0x1p-30f) return signbit(x) ? 0x8000 : 0;
    uint32_t u;
    memcpy(&u, &x, 4);
    const uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1); /* truncated, and one away from zero */
    /* above the largest BF16 the next one up is 2^128, which rounds as infinity */
    const double vh = (lo & 0x7fff) == 0x7f7f ? copysign(0x1p128, (double)x) : (double)sdn_kv_b2f(hi);
    const double dl = fabs((double)x - sdn_kv_b2f(lo)), dh = fabs(vh - (double)x);
    if ((u & 0xffff) == 0) return lo;
    return dl < dh ? lo : dh < dl ? hi : (lo & 1 ? hi : lo);
}

static void test_bf16_conversion(void **state) {
    (void)state;
    long n = 0;
    for (uint32_t h = 0; h < 0x7f80; h++) {
        const float x = sdn_kv_b2f((uint16_t)h), y = sdn_kv_b2f((uint16_t)(h + 1));
        const float mid = (float)(0.5 * ((double)x + (double)y)); /* exact: 9 bits */
        const float vals[4] = {x, -x, mid, -mid};
        for (int k = 0; k < 4; k++, n++) {
            const uint16_t got = sdn_kv_bf16(vals[k]), want = bf16_ref(vals[k]);
            if (got != want) fail_msg("BF16 of %a: %#x, the reference %#x", (double)vals[k], got, want);
        }
    }
    sdn_rng r;
    sdn_rng_seed(&r, 17);
    for (int i = 0; i < 1000000; i++, n++) {
        const uint32_t bits = (uint32_t)sdn_rng_below(&r, 1ull << 32);
        float x;
        memcpy(&x, &bits, 4);
        const uint16_t got = sdn_kv_bf16(x);
        if (isnan(x)) assert_true(isnan(sdn_kv_b2f(got)));
        else if (got != bf16_ref(x)) fail_msg("BF16 of %a: %#x, the reference %#x", (double)x, got, bf16_ref(x));
    }
    assert_int_equal(sdn_kv_bf16(INFINITY), 0x7f80);
    assert_int_equal(sdn_kv_bf16(-INFINITY), 0xff80);
    assert_int_equal(sdn_kv_bf16(3.4028235e38f), 0x7f80); /* above the largest BF16's midpoint */
    assert_int_equal(sdn_kv_bf16(0x1.fep-31f), 0);       /* just below 2^-30 */
    assert_int_equal(sdn_kv_bf16(-0x1p-30f), 0xb080);    /* 2^-30 itself stays */
    /* the values' conversion: the same, but finite (infinities saturated, a NaN stored as 0) */
    for (uint32_t b = 0; b < 0x10000; b++) {
        const uint32_t u = b << 16;
        float x;
        memcpy(&x, &u, 4);
        const uint16_t a = (uint16_t)(b & 0x7fff);
        const uint16_t want = a > 0x7f80 ? 0 : a == 0x7f80 ? (uint16_t)((b & 0x8000) | 0x7f7f) : sdn_kv_bf16(x);
        if (sdn_kv_bf16v(x) != want) fail_msg("BF16 value of %#x: %#x, want %#x", u, sdn_kv_bf16v(x), want);
    }
    assert_int_equal(sdn_kv_bf16v(3.4028235e38f), 0x7f7f); /* would round to infinity */
    assert_int_equal(sdn_kv_bf16v(-3.4028235e38f), 0xff7f);
    /* ... and what the cache stores of such values */
    {
        sdn_model_config cfg = {0};
        cfg.n_layers = 1;
        cfg.n_kv_heads = 1;
        cfg.head_dim = 64;
        float kr[64], vr[64];
        for (int d = 0; d < 64; d++) {
            kr[d] = 1.0f;
            vr[d] = d % 4 == 0 ? NAN : d % 4 == 1 ? INFINITY : d % 4 == 2 ? -3.4028235e38f : 0.5f;
        }
        sdn_kv *kv;
        assert_int_equal(sdn_kv_new(&cfg, SDN_KV_BF16, SDN_KV_BF16, 64, &kv, NULL), SDN_OK);
        sdn_kv_store(kv, 0, 5, 1, kr, vr);
        sdn_kv_head kh;
        sdn_kv_head_get(kv, 0, 0, &kh);
        const uint16_t *row = (const uint16_t *)(const void *)(kh.v + 5 * kh.v_row_bytes);
        for (int d = 0; d < 64; d++) {
            const uint16_t want = d % 4 == 0 ? 0 : d % 4 == 1 ? 0x7f7f : d % 4 == 2 ? 0xff7f : 0x3f00;
            if (row[d] != want) fail_msg("stored bf16 value %d: %#x, want %#x", d, row[d], want);
        }
        sdn_kv_free(kv);
    }
    print_message("BF16 conversion equals the exact reference on %ld values\n", n);
}

/* The bf16 keys' score kernels of every x86 variant this CPU runs, called directly on tiles
 * made to stress the statement of attention_kern.h: magnitudes from 2^-30 to 2^20 (products
 * and partial sums over 2^-60 .. 2^40), and pairs that cancel what the lane summed so far,
 * so that the order of the two products and the rounding of each step decide the bits.
 * VDPBF16PS (the avx512bf16 variant) must give the portable statement's bits; the test says
 * so by name, or that the CPU lacks it. */
static void test_bf16_scores_variants(void **state) {
    (void)state;
#if defined(__x86_64__)
    enum { HD = 64, NQ = 7 };
    static uint16_t kt[HD * 64];
    static uint16_t qb[NQ][HD];
    static float ref[NQ * 64], got[NQ * 64];
    struct {
        const char *name;
        sdn_att_scores_fn fn;
        int have;
    } vars[] = {
        {"avx2", sdn_att_scores_avx2, strstr(sdn_cpu_features(), "avx2") && strstr(sdn_cpu_features(), "fma") != NULL},
        {"avx2vnni", sdn_att_scores_avx2vnni, strstr(sdn_cpu_features(), "avx-vnni") != NULL},
        {"avx512", sdn_att_scores_avx512, strstr(sdn_cpu_features(), "avx512vnni") != NULL},
        {"avx512bf16", sdn_att_scores_avx512bf16, strstr(sdn_cpu_features(), "avx512vnni") && strstr(sdn_cpu_features(), "avx512bf16") != NULL},
    };
    for (size_t v = 0; v < sizeof vars / sizeof vars[0]; v++)
        if (!vars[v].have) print_message("SKIPPED variant %s: this CPU lacks it (features: %s)\n", vars[v].name, sdn_cpu_features());
    sdn_rng r;
    sdn_rng_seed(&r, 23);
    long lanes = 0;
    for (int trial = 0; trial < 400; trial++) {
        for (int i = 0; i < NQ; i++)
            for (int d = 0; d < HD; d++) {
                const float m = ldexpf((float)sdn_rng_below(&r, 1000001) / 1e6f + 0.5f, (int)sdn_rng_below(&r, 51) - 30);
                qb[i][d] = sdn_kv_bf16(sdn_rng_below(&r, 2) ? m : -m);
            }
        for (int j = 0; j < 64; j++)
            for (int g = 0; g < HD / 2; g++)
                for (int e = 0; e < 2; e++) {
                    float x = ldexpf((float)sdn_rng_below(&r, 1000001) / 1e6f + 0.5f, (int)sdn_rng_below(&r, 51) - 30);
                    if (sdn_rng_below(&r, 2)) x = -x;
                    /* a lane that cancels query 0's running sum: the key equal to minus the query */
                    if (trial % 2 && j % 3 == 0 && g % 4 == 3) x = -sdn_kv_b2f(qb[0][2 * g + e]);
                    kt[((size_t)g * 64 + j) * 2 + e] = sdn_kv_bf16(x);
                }
        sdn_att_q q[NQ];
        memset(q, 0, sizeof q);
        for (int i = 0; i < NQ; i++) {
            q[i].qb = qb[i];
            q[i].qs = 0.125f;
        }
        const sdn_att_kt t = {.tk = SDN_KV_BF16, .hd = HD, .hd4 = HD, .k = kt};
        sdn_att_scores_portable(&t, q, NQ, ref);
        for (size_t v = 0; v < sizeof vars / sizeof vars[0]; v++) {
            if (!vars[v].have) continue;
            memset(got, 0xff, sizeof got);
            vars[v].fn(&t, q, NQ, got);
            for (int k = 0; k < NQ * 64; k++)
                if (memcmp(&got[k], &ref[k], 4)) fail_msg("trial %d query %d lane %d: variant %s gives %a, the portable statement %a", trial, k / 64, k % 64, vars[v].name, (double)got[k], (double)ref[k]);
        }
        lanes += NQ * 64;
    }
    print_message("bf16 scores: %ld lanes, every variant this CPU runs gives the portable statement's bits\n", lanes);
#else
    print_message("SKIPPED: the x86 bf16 score variants (attention_arm.c's are compared in test_attention_paths)\n");
    skip();
#endif
}

/* bf16 keys' scores on AMX-BF16 tiles (attention_amx.c), called directly where the CPU has
 * them. TDPBF16PS has its own arithmetic (not attention_kern.h's chain), so what is checked
 * is what the amx path relies on and what a user gets: (1) invariance - a query's 64 scores
 * are the same bits whatever the number of queries in the call (1 to 40, more than two 16-row
 * tiles), the query's place among them, the other queries' values and whether the queries
 * follow each other in memory (in place) or not (gathered); (2) accuracy - each score within
 * 64 x 2^-24 = 2^-18 of sum |q_d k_d| (times the scale) of the exact dot product of the same
 * BF16 values (in double): the bound of a chain of 64 F32 roundings; (3) how often its bits
 * differ from the portable statement's, printed (the reason the path has bits of its own). */
static void test_amx_bf16_scores(void **state) {
    (void)state;
#if defined(__x86_64__)
    if (!sdn_kpath_amxbf16()) {
        print_message("SKIPPED on path amx: the bf16 keys' AMX-BF16 scores: this CPU or OS lacks AMX-BF16 (features: %s)\n", sdn_cpu_features());
        skip();
    }
    enum { HD = 64, NQ = 40 };
    static uint16_t kt[HD * 64];
    static uint16_t qb[NQ][HD], qg[2 * NQ][HD]; /* in place; every other row (gathered) */
    static float ref[64], got[NQ * 64], one[64];
    sdn_rng r;
    sdn_rng_seed(&r, 41);
    long lanes = 0, differ = 0;
    double worst = 0.0;
    for (int trial = 0; trial < 200; trial++) {
        for (int i = 0; i < NQ; i++)
            for (int d = 0; d < HD; d++) {
                const float m = ldexpf((float)sdn_rng_below(&r, 1000001) / 1e6f + 0.5f, (int)sdn_rng_below(&r, 41) - 20);
                qb[i][d] = sdn_kv_bf16(sdn_rng_below(&r, 2) ? m : -m);
            }
        for (int j = 0; j < 64; j++)
            for (int d = 0; d < HD; d++) {
                float x = ldexpf((float)sdn_rng_below(&r, 1000001) / 1e6f + 0.5f, (int)sdn_rng_below(&r, 41) - 20);
                if (sdn_rng_below(&r, 2)) x = -x;
                if (trial % 2 && j % 3 == 0 && d % 8 == 7) x = -sdn_kv_b2f(qb[0][d]); /* cancellation */
                kt[((size_t)(d / 2) * 64 + j) * 2 + d % 2] = sdn_kv_bf16(x);
            }
        const sdn_att_kt t = {.tk = SDN_KV_BF16, .hd = HD, .hd4 = HD, .k = kt};
        sdn_att_q q[NQ];
        memset(q, 0, sizeof q);
        const int nq = 1 + (int)sdn_rng_below(&r, NQ), gather = trial % 3 == 0;
        for (int i = 0; i < nq; i++) {
            if (gather) memcpy(qg[2 * i], qb[i], sizeof qb[i]);
            q[i].qb = gather ? qg[2 * i] : qb[i];
            q[i].qs = 0.125f;
        }
        memset(got, 0xff, sizeof got);
        sdn_att_scores_amxbf16(&t, q, nq, got);
        for (int i = 0; i < nq; i++) {
            /* the same query alone */
            sdn_att_q q1 = q[i];
            memset(one, 0xff, sizeof one);
            sdn_att_scores_amxbf16(&t, &q1, 1, one);
            if (memcmp(one, got + (size_t)i * 64, sizeof one))
                fail_msg("trial %d: query %d of %d (%s) has other bits than the same query alone", trial, i, nq, gather ? "gathered" : "in place");
            sdn_att_scores_portable(&t, &q[i], 1, ref);
            for (int j = 0; j < 64; j++) {
                double exact = 0.0, mag = 0.0;
                for (int d = 0; d < HD; d++) {
                    const double p = (double)sdn_kv_b2f(qb[i][d]) * sdn_kv_b2f(kt[((size_t)(d / 2) * 64 + j) * 2 + d % 2]);
                    exact += p;
                    mag += fabs(p);
                }
                const double err = fabs((double)got[i * 64 + j] - 0.125 * exact) / (0.125 * mag);
                if (err > worst) worst = err;
                if (!(err <= 0x1p-18)) fail_msg("trial %d query %d lane %d: %a, the exact dot product %a: %.2e of sum |q k|", trial, i, j, (double)got[i * 64 + j], 0.125 * exact, err);
                differ += memcmp(&got[i * 64 + j], &ref[j], 4) != 0;
                lanes++;
            }
        }
    }
    print_message("bf16 scores on AMX-BF16: %ld lanes, each the same bits whatever the call's other queries, within %.1e of sum |q k| of the "
                  "exact dot product; %.1f%% differ from the portable statement's bits (TDPBF16PS's own sums)\n",
                  lanes, worst, 100.0 * (double)differ / (double)lanes);
#else
    print_message("SKIPPED on path amx: the bf16 keys' AMX-BF16 scores (x86-64 only)\n");
    skip();
#endif
}

/* The queries of test_bf16_update_variants before a tile: lanes vis[i], running max m0 (sum 0
 * on the first tile, else 2.5), outputs acc[i] set to acc0[i]. */
static void bf16_update_start(sdn_att_q *q, int nq, const uint64_t *vis, float m0, float (*acc)[128], float (*acc0)[128]) {
    for (int i = 0; i < nq; i++) {
        q[i].vis = vis[i];
        q[i].m = m0;
        q[i].l = m0 == -INFINITY ? 0.0f : 2.5f;
        q[i].acc = acc[i];
        memcpy(acc[i], acc0[i], sizeof acc0[i]);
    }
}

/* The bf16 values' update kernels of every x86 variant this CPU runs, called directly: the
 * rows as BF16, handed over as floats, and (the avx512bf16 variant's VDPBF16PS) transposed in
 * pairs, against the portable statement of attention_kern.h, bit for bit (max, sum and
 * outputs). Weights from 1 down to e^-40 (below 2^-30 they round to 0), values from 2^-30 to
 * 2^20 with lanes that cancel, queries that see different lanes (half-visible pairs), the
 * first tile, a rescale and none; then the lanes no query sees set to the largest finite
 * values, which must change nothing. */
static void test_bf16_update_variants(void **state) {
    (void)state;
#if defined(__x86_64__)
    enum { NQ = 7, MAXHD = 128 };
    static uint16_t rows[64][MAXHD], t2[32 * MAXHD * 2];
    static float rowsf[64][MAXHD], sc[NQ * 64], acc0[NQ][MAXHD], accr[NQ][MAXHD], accg[NQ][MAXHD], acc1[NQ][MAXHD];
    float m1[NQ], l1[NQ];
    const int has512 = strstr(sdn_cpu_features(), "avx512vnni") != NULL;
    struct {
        const char *name;
        sdn_att_update_fn fn;
        int have, t2;
    } vars[] = {
        {"avx2", sdn_att_update_avx2, strstr(sdn_cpu_features(), "avx2") && strstr(sdn_cpu_features(), "fma") != NULL, 0},
        {"avx2vnni", sdn_att_update_avx2vnni, strstr(sdn_cpu_features(), "avx-vnni") != NULL, 0},
        {"avx512", sdn_att_update_avx512, has512, 0},
        {"avx512bf16", sdn_att_update_avx512bf16, has512 && strstr(sdn_cpu_features(), "avx512bf16") != NULL, 1},
    };
    for (size_t k = 0; k < sizeof vars / sizeof vars[0]; k++)
        if (!vars[k].have) print_message("SKIPPED variant %s: this CPU lacks it (features: %s)\n", vars[k].name, sdn_cpu_features());
    const int hds[] = {64, 80, 128};
    sdn_rng r;
    sdn_rng_seed(&r, 29);
    long lanes = 0;
    for (int trial = 0; trial < 240; trial++) {
        const int hd = hds[trial % 3];
        for (int j = 0; j < 64; j++)
            for (int d = 0; d < hd; d++) {
                float x = ldexpf((float)sdn_rng_below(&r, 1000001) / 1e6f + 0.5f, (int)sdn_rng_below(&r, 51) - 30);
                if (sdn_rng_below(&r, 2)) x = -x;
                if (trial % 2 && j % 2 && d % 5 == 0) x = -sdn_kv_b2f(rows[j - 1][d]); /* cancels the pair's even lane */
                rows[j][d] = sdn_kv_bf16v(x);
                rowsf[j][d] = sdn_kv_b2f(rows[j][d]);
            }
        uint64_t uni = 0, vis[NQ];
        for (int i = 0; i < NQ; i++) {
            vis[i] = 0;
            for (int j = 0; j < 64; j++) {
                sc[i * 64 + j] = -40.0f * (float)sdn_rng_below(&r, 1000001) / 1e6f;
                if (trial % 2 && j % 6 == 1) sc[i * 64 + j] = sc[i * 64 + j - 1]; /* equal weights: the pair can cancel exactly */
                if (sdn_rng_below(&r, 4)) vis[i] |= 1ull << j;
            }
            if (trial % 4 == 0) vis[i] = vis[0]; /* the same lanes for the whole block */
            if (i == 3) vis[i] = 0;              /* a query that sees nothing */
            uni |= vis[i];
            for (int d = 0; d < hd; d++) acc0[i][d] = (float)sdn_rng_below(&r, 2000001) / 1e6f - 1.0f;
        }
        for (int pass = 0; pass < 2; pass++) {
            if (pass) /* the lanes no query sees: the largest finite values, which add nothing */
                for (int j = 0; j < 64; j++)
                    if (!(uni >> j & 1))
                        for (int d = 0; d < hd; d++) {
                            rows[j][d] = d % 2 ? 0x7f7f : 0xff7f;
                            rowsf[j][d] = sdn_kv_b2f(rows[j][d]);
                        }
            for (int i = 0; i < 32; i++)
                for (int d = 0; d < hd; d++)
                    for (int e = 0; e < 2; e++) t2[((size_t)i * hd + d) * 2 + e] = rows[2 * i + e][d];
            sdn_att_vt vt = {.tv = SDN_KV_BF16, .hd = hd, .pairs = 1};
            for (int j = 0; j < 64; j++) vt.vrow[j] = (const uint8_t *)rows[j];
            if (vars[3].have && hd % 64 == 0) { /* the variant's own transposition gives the same layout */
                static uint16_t t2k[32 * MAXHD * 2];
                sdn_att_t2_avx512bf16(&vt, t2k);
                if (memcmp(t2k, t2, (size_t)64 * hd * 2)) fail_msg("trial %d: sdn_att_t2_avx512bf16 gives another layout", trial);
            }
            sdn_att_q q[NQ];
            /* first tile, no rescale, rescale */
            const float m0 = trial % 3 == 0 ? -INFINITY : trial % 3 == 1 ? 1.0f : -3.0f;
            memset(q, 0, sizeof q);
            bf16_update_start(q, NQ, vis, m0, accr, acc0);
            sdn_att_update_portable(q, NQ, sc, &vt);
            float mr[NQ], lr[NQ];
            for (int i = 0; i < NQ; i++) {
                mr[i] = q[i].m;
                lr[i] = q[i].l;
            }
            for (size_t k = 0; k < sizeof vars / sizeof vars[0]; k++) {
                if (!vars[k].have || (hd % 16 && k >= 2)) continue;
                for (int form = 0; form < 3; form++) { /* BF16 rows, float rows, pairs transposed */
                    if (form == 2 && !(vars[k].t2 && hd % 64 == 0)) continue;
                    sdn_att_vt vg = vt;
                    if (form == 1) {
                        vg.tv = SDN_KV_F32;
                        for (int j = 0; j < 64; j++) vg.vrow[j] = (const uint8_t *)rowsf[j];
                    }
                    if (form == 2) vg.t2 = t2;
                    bf16_update_start(q, NQ, vis, m0, accg, acc0);
                    vars[k].fn(q, NQ, sc, &vg);
                    for (int i = 0; i < NQ; i++) {
                        if (memcmp(&q[i].m, &mr[i], 4) || memcmp(&q[i].l, &lr[i], 4))
                            fail_msg("trial %d query %d: variant %s (form %d) max/sum %a/%a, the portable statement %a/%a", trial, i, vars[k].name, form,
                                     (double)q[i].m, (double)q[i].l, (double)mr[i], (double)lr[i]);
                        for (int d = 0; d < hd; d++)
                            if (memcmp(&accg[i][d], &accr[i][d], 4))
                                fail_msg("trial %d (head %d, pass %d) query %d element %d: variant %s (form %d) gives %a, the portable statement %a", trial, hd,
                                         pass, i, d, vars[k].name, form, (double)accg[i][d], (double)accr[i][d]);
                    }
                    lanes += NQ * 64;
                }
            }
            if (pass == 0) { /* kept to compare the passes */
                memcpy(acc1, accr, sizeof accr);
                memcpy(m1, mr, sizeof mr);
                memcpy(l1, lr, sizeof lr);
            } else if (memcmp(acc1, accr, sizeof accr) || memcmp(m1, mr, sizeof mr) || memcmp(l1, lr, sizeof lr)) {
                fail_msg("trial %d: the lanes no query sees changed the portable result", trial);
            }
        }
    }
    print_message("bf16 value updates: %ld query tiles, every variant this CPU runs gives the portable statement's bits\n", lanes / 64);
#else
    print_message("SKIPPED: the x86 bf16 update variants (attention_arm.c's are compared in test_attention_paths)\n");
    skip();
#endif
}

/* The cache stores the same bytes on every kernel path (the F16 rows go through F16C on the
 * SIMD paths, scalar code on the portable one), overflowing values included. */
static void test_store_paths(void **state) {
    (void)state;
    sdn_model_config cfg = {0};
    cfg.n_layers = 2;
    cfg.n_kv_heads = 3;
    cfg.head_dim = 64;
    enum { N = 150 };
    const int kvd = 3 * 64;
    float *k = malloc((size_t)N * kvd * sizeof(float)), *v = malloc((size_t)N * kvd * sizeof(float));
    sdn_rng r;
    sdn_rng_seed(&r, 9);
    for (int i = 0; i < N * kvd; i++) {
        const float mag = i % 97 == 0 ? 1e6f : i % 13 == 0 ? 1e-6f : 3.0f;
        k[i] = mag * ((float)sdn_rng_below(&r, 2000001) / 1e6f - 1.0f);
        v[i] = mag * ((float)sdn_rng_below(&r, 2000001) / 1e6f - 1.0f);
    }
    for (int t = SDN_KV_FIRST; t < SDN_KV_TYPE_COUNT; t++) {
        sdn_kv *ref = NULL;
        for (int p = 0; p < NPATHS; p++) {
            if (sdn_kpath_set(paths[p], NULL)) continue;
            sdn_kv *kv;
            assert_int_equal(sdn_kv_new(&cfg, (sdn_kv_type)t, (sdn_kv_type)t, N, &kv, NULL), SDN_OK);
            for (int l = 0; l < 2; l++) sdn_kv_store(kv, l, 0, N, k, v);
            if (!ref) {
                ref = kv;
                continue;
            }
            for (int l = 0; l < 2; l++)
                for (int h = 0; h < 3; h++) {
                    sdn_kv_head a, b;
                    sdn_kv_head_get(ref, l, h, &a);
                    sdn_kv_head_get(kv, l, h, &b);
                    if (memcmp(a.k, b.k, a.k_tile_bytes * (size_t)a.n_tiles) || memcmp(a.v, b.v, a.v_row_bytes * (size_t)N))
                        fail_msg("cache %s: path %s stores other bytes", sdn_kv_type_name((sdn_kv_type)t), sdn_kpath_name(paths[p]));
                }
            sdn_kv_free(kv);
        }
        sdn_kv_free(ref);
    }
    free(k);
    free(v);
}

/* ---- attention against a naive reference ---- */

typedef struct case_t {
    int hd, n_heads, n_kvh, kv_base, n, window, tree;
} case_t;

/* The stored value of element d of slot s, head h (dequantized as the kernels read it). */
static double stored_k(const sdn_kv *kv, int h, int s, int d) {
    sdn_kv_head kh;
    sdn_kv_head_get(kv, 0, h, &kh);
    const uint8_t *t = kh.k + (size_t)(s / SDN_KV_TILE) * kh.k_tile_bytes;
    const int lane = s % SDN_KV_TILE;
    switch (kh.tk) {
    case SDN_KV_F32: return ((const float *)t)[(size_t)d * 64 + lane];
    case SDN_KV_F16: return sdn_fp16_to_fp32(((const uint16_t *)t)[(size_t)d * 64 + lane]);
    case SDN_KV_BF16: return sdn_kv_b2f(((const uint16_t *)t)[((size_t)(d / 2) * 64 + lane) * 2 + d % 2]);
    default:
        return ((int)t[((size_t)(d / 4) * 64 + lane) * 4 + d % 4] - 128) *
               (double)sdn_fp16_to_fp32(kh.k_scale[((size_t)(s / SDN_KV_TILE) * kh.kblocks + d / SDN_KV_KBLOCK) * SDN_KV_TILE + lane]);
    }
}

static double stored_v(const sdn_kv *kv, int h, int s, int d) {
    sdn_kv_head kh;
    sdn_kv_head_get(kv, 0, h, &kh);
    const uint8_t *row = kh.v + (size_t)s * kh.v_row_bytes;
    switch (kh.tv) {
    case SDN_KV_F32: return ((const float *)row)[d];
    case SDN_KV_F16: return sdn_fp16_to_fp32(((const uint16_t *)row)[d]);
    case SDN_KV_BF16: return sdn_kv_b2f(((const uint16_t *)row)[d]);
    default: return ((const int8_t *)row)[d] * (double)sdn_fp16_to_fp32(kh.v_scale[s]);
    }
}

/* A cache of one layer with random entries in slots [0, kv_base + n), a batch of queries (a
 * tree: random parents, positions kv_base + depth), the attention, and the reference. */
typedef struct setup_t {
    case_t c;
    sdn_kv *kv;
    float *q, *out;
    int32_t *pos;
    uint8_t *mask;
} setup_t;

static void make_setup(setup_t *S, const case_t *c, int tk, int tv, uint64_t seed) {
    S->c = *c;
    sdn_model_config cfg = {0};
    cfg.n_layers = 1;
    cfg.n_kv_heads = c->n_kvh;
    cfg.head_dim = c->hd;
    const int total = c->kv_base + c->n, kvd = c->n_kvh * c->hd, qd = c->n_heads * c->hd;
    assert_int_equal(sdn_kv_new(&cfg, (sdn_kv_type)tk, (sdn_kv_type)tv, total + 70, &S->kv, NULL), SDN_OK);
    sdn_rng r;
    sdn_rng_seed(&r, seed);
    float *k = malloc((size_t)total * kvd * sizeof(float)), *v = malloc((size_t)total * kvd * sizeof(float));
    for (long i = 0; i < (long)total * kvd; i++) {
        /* a few large key channels, as RoPE'd keys have */
        const float big = (i % c->hd) < 2 ? 4.0f : 1.0f;
        k[i] = big * ((float)sdn_rng_below(&r, 2000001) / 1e6f - 1.0f);
        v[i] = (float)sdn_rng_below(&r, 2000001) / 1e6f - 1.0f;
    }
    sdn_kv_store(S->kv, 0, 0, total, k, v);
    free(k);
    free(v);
    S->q = malloc((size_t)c->n * qd * sizeof(float));
    S->out = malloc((size_t)c->n * qd * sizeof(float));
    for (long i = 0; i < (long)c->n * qd; i++) S->q[i] = 1.5f * ((float)sdn_rng_below(&r, 2000001) / 1e6f - 1.0f);
    S->pos = NULL;
    S->mask = NULL;
    if (c->tree) {
        S->pos = malloc((size_t)c->n * sizeof(int32_t));
        S->mask = calloc((size_t)c->n * c->n, 1);
        int *parent = malloc((size_t)c->n * sizeof(int)), *depth = malloc((size_t)c->n * sizeof(int));
        for (int i = 0; i < c->n; i++) {
            parent[i] = i ? (int)sdn_rng_below(&r, (uint64_t)i) : -1;
            depth[i] = i ? depth[parent[i]] + 1 : 0;
            S->pos[i] = c->kv_base + depth[i];
            for (int j = i; j >= 0; j = parent[j]) S->mask[(size_t)i * c->n + j] = 1;
        }
        free(parent);
        free(depth);
    }
}

static void free_setup(setup_t *S) {
    sdn_kv_free(S->kv);
    free(S->q);
    free(S->out);
    free(S->pos);
    free(S->mask);
}

static void run_att(setup_t *S, int threads) {
    const case_t *c = &S->c;
    sdn_att_ws *ws;
    assert_int_equal(sdn_att_ws_new(threads, c->n > 64 ? c->n : 64, c->n_heads, c->n_kvh, c->hd, c->kv_base + c->n + 70, &ws, NULL), SDN_OK);
    sdn_pool *pool = sdn_pool_new(threads);
    sdn_att_args a = {.kv = S->kv, .layer = 0, .q = S->q, .ldq = c->n_heads * c->hd, .out = S->out, .n = c->n, .n_heads = c->n_heads,
                      .n_kv_heads = c->n_kvh, .head_dim = c->hd, .scale = 1.0f / sqrtf((float)c->hd), .kv_base = c->kv_base,
                      .pos = S->pos, .mask = S->mask, .window = c->window};
    sdn_attention(ws, pool, &a);
    sdn_pool_free(pool);
    sdn_att_ws_free(ws);
}

/* Largest |out - ref| / max|ref| of the batch. */
static double ref_error(const setup_t *S) {
    const case_t *c = &S->c;
    const int grp = c->n_heads / c->n_kvh, qd = c->n_heads * c->hd;
    double worst = 0;
    double *sc = malloc((size_t)(c->kv_base + c->n) * sizeof(double)), *o = malloc((size_t)c->hd * sizeof(double));
    int *slots = malloc((size_t)(c->kv_base + c->n) * sizeof(int));
    for (int i = 0; i < c->n; i++) {
        const int p = S->pos ? S->pos[i] : c->kv_base + i, lo = c->window > 0 && p - c->window + 1 > 0 ? p - c->window + 1 : 0;
        int ns = 0;
        if (S->mask || S->pos) {
            for (int s = lo; s < c->kv_base; s++) slots[ns++] = s;
            for (int r = 0; r <= i; r++) {
                const int pr = S->pos ? S->pos[r] : c->kv_base + r;
                if ((!S->mask || S->mask[(size_t)i * c->n + r]) && pr >= lo) slots[ns++] = c->kv_base + r;
            }
        } else {
            for (int s = lo; s <= p; s++) slots[ns++] = s;
        }
        for (int h = 0; h < c->n_heads; h++) {
            const int kh = h / grp;
            const float *q = S->q + (size_t)i * qd + (size_t)h * c->hd;
            double mx = -INFINITY, sum = 0, omax = 0, diff = 0;
            for (int k = 0; k < ns; k++) {
                double d = 0;
                for (int e = 0; e < c->hd; e++) d += (double)q[e] * stored_k(S->kv, kh, slots[k], e);
                sc[k] = d / sqrt((double)c->hd);
                mx = fmax(mx, sc[k]);
            }
            for (int e = 0; e < c->hd; e++) o[e] = 0;
            for (int k = 0; k < ns; k++) {
                const double w = exp(sc[k] - mx);
                sum += w;
                for (int e = 0; e < c->hd; e++) o[e] += w * stored_v(S->kv, kh, slots[k], e);
            }
            const float *got = S->out + (size_t)i * qd + (size_t)h * c->hd;
            for (int e = 0; e < c->hd; e++) {
                omax = fmax(omax, fabs(o[e] / sum));
                diff = fmax(diff, fabs(got[e] - o[e] / sum));
            }
            worst = fmax(worst, diff / fmax(omax, 1e-6));
        }
    }
    free(sc);
    free(o);
    free(slots);
    return worst;
}

static const case_t cases[] = {
    {64, 9, 3, 0, 150, 0, 0},     /* a prefill chunk from the start (SmolLM2's heads) */
    {64, 9, 3, 700, 1, 0, 0},     /* a decode row over two super-tiles */
    {64, 9, 3, 1100, 16, 0, 0},   /* a 16-row causal verify batch, three super-tiles */
    {64, 9, 3, 700, 4, 0, 0},     /* a 4-row verify chain over two super-tiles: 12 queries, F16 tiles widened per block on avx512 */
    {64, 9, 3, 1030, 40, 0, 1},   /* a tree over three super-tiles, crossing a tile boundary */
    {64, 4, 4, 77, 200, 0, 0},    /* multi-head attention, a prefill chunk after 77 entries */
    {256, 4, 1, 600, 100, 48, 0}, /* Gemma 3's local layers: head 256, a window of 48 */
    {256, 4, 1, 600, 20, 48, 1},  /* ... a tree in a window */
    {128, 8, 2, 520, 70, 0, 0},   /* head 128 */
    {80, 4, 2, 300, 12, 0, 1},    /* head 80: avx2 takes it, avx512 leaves it to the portable code */
    {6, 2, 1, 130, 9, 0, 0},      /* head 6: portable only */
};
#define NCASES (sizeof cases / sizeof cases[0])

/* Attention of every case and cache type against the reference. Tolerances (relative to the
 * largest output element): f32 and f16 keys 1e-5 (the reference reads the same stored
 * entries; what is left is float rounding), q8 values 2e-2 (each tile's softmax weights are
 * rounded to 8 bits: at most wmax / 510 each; measured 0.4-1.2% on these uniform random
 * values, whose averages are small next to single entries), q8 keys 3e-2 (the query is
 * quantized to 8 bits). */
static void test_attention_reference(void **state) {
    (void)state;
    for (size_t ci = 0; ci < NCASES; ci++)
        for (int tk = SDN_KV_FIRST; tk < SDN_KV_TYPE_COUNT; tk++)
            for (int tv = SDN_KV_FIRST; tv < SDN_KV_TYPE_COUNT; tv++) {
                setup_t S;
                make_setup(&S, &cases[ci], tk, tv, 100 + ci);
                run_att(&S, 2);
                const double err = ref_error(&S), tol = tk == SDN_KV_Q8 ? 3e-2 : tv == SDN_KV_Q8 ? 2e-2 : tk == SDN_KV_BF16 || tv == SDN_KV_BF16 ? 1e-2 : 1e-5;
                if (tv == SDN_KV_FIRST || tv == SDN_KV_Q8 || tk == SDN_KV_BF16 || tv == SDN_KV_BF16)
                    print_message("case %zu (head %d, %d rows after %d%s%s): keys %s values %s: error %.2e (tolerance %.0e)\n", ci,
                                  cases[ci].hd, cases[ci].n, cases[ci].kv_base, cases[ci].tree ? ", tree" : "", cases[ci].window ? ", window" : "",
                                  sdn_kv_type_name((sdn_kv_type)tk), sdn_kv_type_name((sdn_kv_type)tv), err, tol);
                if (!(err <= tol))
                    fail_msg("case %zu keys %s values %s: error %.3e above %.0e", ci, sdn_kv_type_name((sdn_kv_type)tk),
                             sdn_kv_type_name((sdn_kv_type)tv), err, tol);
                free_setup(&S);
            }
}

/* The same bits on every kernel path this CPU has, with 1 and 2 threads. */
static void test_attention_paths(void **state) {
    (void)state;
    sdn_err e = {0};
    int have[NPATHS], checked = 0, amx_named = 0;
    /* SDN_TEST_QUICK (.ci/aarch64 under emulation, .ci/sanitize): 2 threads only; the thread
     * count's invariance is the same C code on every path and runs natively in ./sdnpu test */
    const int th0 = getenv("SDN_TEST_QUICK") ? 2 : 1;
    for (int p = 0; p < NPATHS; p++) {
        have[p] = sdn_kpath_set(paths[p], &e) == SDN_OK;
        if (!have[p]) print_message("SKIPPED path %s: %s\n", sdn_kpath_name(paths[p]), e.msg);
    }
    for (size_t ci = 0; ci < NCASES; ci++)
        for (int tk = SDN_KV_FIRST; tk < SDN_KV_TYPE_COUNT; tk++)
            for (int tv = SDN_KV_FIRST; tv < SDN_KV_TYPE_COUNT; tv++) {
                /* bf16 beside f16 or itself only: its kernels' other pairings are the same code */
                if ((tk == SDN_KV_BF16) != (tv == SDN_KV_BF16) && tk != SDN_KV_F16 && tv != SDN_KV_F16) continue;
                setup_t S;
                make_setup(&S, &cases[ci], tk, tv, 200 + ci);
                const size_t bytes = (size_t)cases[ci].n * cases[ci].n_heads * cases[ci].hd * sizeof(float);
                float *base = NULL, *own = NULL;
                for (int p = 0; p < NPATHS; p++) {
                    if (!have[p]) continue;
                    assert_int_equal(sdn_kpath_set(paths[p], &e), SDN_OK);
                    /* bf16 keys on the amx path with AMX-BF16: TDPBF16PS's own bits
                     * (attention_amx.c), compared with the path itself across threads here
                     * and held by test_amx_bf16_scores and test_forward's invariance tests */
                    const int amx_own = paths[p] == SDN_KPATH_AMX && tk == SDN_KV_BF16 && sdn_kpath_amxbf16() && cases[ci].hd % 32 == 0;
                    if (amx_own && !own) amx_named++;
                    for (int th = th0; th <= 2; th++) {
                        run_att(&S, th);
                        float **bp = amx_own ? &own : &base;
                        if (!*bp) {
                            *bp = malloc(bytes);
                            memcpy(*bp, S.out, bytes);
                        } else if (memcmp(*bp, S.out, bytes) != 0) {
                            fail_msg("case %zu keys %s values %s: path %s with %d threads gives other bits", ci, sdn_kv_type_name((sdn_kv_type)tk),
                                     sdn_kv_type_name((sdn_kv_type)tv), sdn_kpath_name(paths[p]), th);
                        }
                        checked++;
                    }
                }
                free(base);
                free(own);
                free_setup(&S);
            }
    print_message("%d runs: the same bits on every path this CPU has, %s threads\n", checked, th0 == 1 ? "1 and 2" : "2");
    if (amx_named)
        print_message("except bf16 keys on path amx (%d cases): AMX-BF16 tiles (TDPBF16PS) sum pairs in their own way, so that path "
                      "has bits of its own there, the same with 1 and 2 threads (test_amx_bf16_scores)\n", amx_named);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_conversion),
        cmocka_unit_test(test_q8_row),
        cmocka_unit_test(test_bf16_conversion),
        cmocka_unit_test(test_bf16_scores_variants),
        cmocka_unit_test(test_amx_bf16_scores),
        cmocka_unit_test(test_bf16_update_variants),
        cmocka_unit_test(test_store_paths),
        cmocka_unit_test(test_attention_reference),
        cmocka_unit_test(test_attention_paths),
    };
    /* SDN_TEST_FILTER=pattern runs only the matching tests (cmocka's wildcards) */
    if (getenv("SDN_TEST_FILTER")) cmocka_set_test_filter(getenv("SDN_TEST_FILTER"));
    /* SDN_TEST_SKIP=pattern leaves the matching tests out (.ci/aarch64: the reference check, which
     * is path-independent arithmetic checked natively; under emulation it took 4.7 minutes) */
    if (getenv("SDN_TEST_SKIP")) cmocka_set_skip_filter(getenv("SDN_TEST_SKIP"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
