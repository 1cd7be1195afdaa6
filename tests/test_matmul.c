/* test_matmul.c - the small-batch kernels (kernels/matmul.h, kernels/matmul_ref.h).
 *
 *  - accuracy: for every weight type and several shapes (in = 64, 100, 256, 896, 4864;
 *    out from 1 to 300, odd sizes), Y = sdn_matmul_rows against a double-precision dot
 *    product of the dequantized weights with the raw F32 activations. Tolerances are
 *    derived bounds, not fitted constants:
 *      float weights (F32/F16/BF16; activations stay F32):
 *        |err| <= (in/8 + 4) * 2^-24 * sum|w x|   (8-lane FMA accumulation + 3 reduction adds)
 *      quantized weights (activations quantized to 8 bits per block of 32 or 256, scale dx =
 *      block amax / 127, so each activation moves by at most dx/2):
 *        |err| <= 1.01 * sum |w_i| dx_i / 2 + (nb + 4) * 2^-22 * sum |w_i| (|x_i| + dx_i)
 *      and, as the accuracy figure, RMS(err) / RMS(y) over all shapes <= 1.2e-2 on normal data
 *      (float weights: 1e-6), <= 4e-2 on rows with a 40-sigma outlier (which sets the scale of
 *      its whole activation block: 256 elements for the K types);
 *  - the portable kernels: identical prepared activations (byte for byte, garbage rows
 *    included), results within twice the float-rounding part of the bound above;
 *  - batch invariance, bit for bit (memcmp), for the SIMD and the portable kernels: every
 *    row of a batch of n = 1..64 equals that row computed alone; rows placed at other
 *    positions, among padding rows of garbage bits (NaN/Inf included) and garbage prepared
 *    bytes, give the same bits; any split of [0, out) into [o0, o1) ranges gives the same
 *    bits; nothing outside Y[r < n][o0 <= o < o1] is written;
 *  - every kernel path of kernels/kernel_path.h (tests named fn[path]; paths this machine
 *    lacks are reported SKIPPED by name): invariance as above on the path, and the path's
 *    bits against the portable path's for batches n = 1..64 (bit for bit for the types whose
 *    float work has one fixed order on every path, see cross_path_exact: every quantized type;
 *    to float rounding otherwise, and then bit for bit between the SIMD paths); on the amx path
 *    batches of 32 and more rows of the 32-element block types run on AMX tiles, so [AMX] checks the tile configuration and
 *    kernel where the CPU has AMX; the configuration bytes are checked everywhere;
 *  - packed weights (every quantized type; matmul.h): on every path, sdn_matmul_rows_packed gives
 *    the bits of sdn_matmul_rows on the file's layout for batches n = 1..64, whole and split
 *    into ranges that do and do not start at a column group; packing then reading rows back
 *    reproduces the file's rows byte for byte; packed sizes, and 0 for unpackable types;
 *  - prefill-sized batches (1..300 rows, odd counts) of every quantized type, on every path,
 *    file and packed layouts, column ranges off the 16-column groups: the portable bits. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/sdn_util.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "kernels/matmul_ref.h"
#include "kernels/quant.h"
#include "modelfile/tensor_types.h"
#include "support/kpath_test.h"

static const uint32_t all_types[] = {SDN_TYPE_F32,  SDN_TYPE_F16,  SDN_TYPE_BF16, SDN_TYPE_Q8_0,
                                     SDN_TYPE_Q4_0, SDN_TYPE_Q4_1, SDN_TYPE_Q5_0, SDN_TYPE_Q5_1,
                                     SDN_TYPE_Q4_K, SDN_TYPE_Q5_K, SDN_TYPE_Q6_K};
#define NTYPES (sizeof all_types / sizeof all_types[0])

static int is_float(uint32_t t) { return t == SDN_TYPE_F32 || t == SDN_TYPE_F16 || t == SDN_TYPE_BF16; }
static int act_block(uint32_t t) {
    return is_float(t) ? 0 : (t == SDN_TYPE_Q4_K || t == SDN_TYPE_Q5_K || t == SDN_TYPE_Q6_K) ? 256 : 32;
}
static int shape_ok(uint32_t t, int64_t in) { return sdn_type_row_bytes(t, in) > 0; }

typedef struct {
    uint32_t type;
    int64_t in, out;
    size_t rb;
    uint8_t *W; /* quantized rows */
    float *Wd;  /* dequantized rows */
} wmat;

static void wmat_make(wmat *m, uint32_t type, int64_t out, int64_t in, uint64_t seed) {
    sdn_rng rng;
    sdn_rng_seed(&rng, seed);
    m->type = type;
    m->in = in;
    m->out = out;
    m->rb = sdn_type_row_bytes(type, in);
    m->W = malloc(m->rb * (size_t)out);
    m->Wd = malloc(sizeof(float) * (size_t)(in * out));
    float *row = malloc(sizeof(float) * (size_t)in);
    for (int64_t o = 0; o < out; o++) {
        float scale = 0.02f * (1 + (float)(o % 7)); /* rows of different magnitudes */
        for (int64_t i = 0; i < in; i++) row[i] = scale * sdn_rng_normal(&rng);
        assert_int_equal(sdn_quantize_row(type, row, m->W + (size_t)o * m->rb, in), m->rb);
        sdn_dequantize_row(type, m->W + (size_t)o * m->rb, m->Wd + o * in, in);
    }
    free(row);
}

static void wmat_free(wmat *m) {
    free(m->W);
    free(m->Wd);
}

static float *make_x(int n, int64_t in, uint64_t seed) {
    sdn_rng rng;
    sdn_rng_seed(&rng, seed);
    float *X = malloc(sizeof(float) * (size_t)(n * in));
    for (int r = 0; r < n; r++) {
        float scale = 0.5f + (float)(r % 5); /* rows of different magnitudes */
        for (int64_t i = 0; i < in; i++) X[r * in + i] = scale * sdn_rng_normal(&rng);
        if (r % 3 == 1) X[r * in + (r * 7) % in] = 40.0f * scale; /* an outlier */
    }
    return X;
}

typedef void (*prep_fn)(uint32_t, const float *, int64_t, int, int64_t, void *);
typedef void (*mm_fn)(uint32_t, const void *, size_t, int64_t, const void *, int, float *, int64_t, int64_t, int64_t);

/* ------------------------------------------------------------ accuracy */

/* squared errors and squared values pooled per type, [0] rows of normal data, [1] rows with
 * one 40-sigma outlier (make_x: r % 3 == 1), which coarsens its block's activation scale */
static double g_se[NTYPES][2], g_sy[NTYPES][2];

static void check_accuracy(uint32_t type, int64_t in, int64_t out, uint64_t seed) {
    const int n = 5;
    wmat m;
    wmat_make(&m, type, out, in, seed);
    float *X = make_x(n, in, seed + 1);
    void *act = malloc(sdn_act_bytes(type, in, n)), *act_p = malloc(sdn_act_bytes(type, in, n));
    float *Y = malloc(sizeof(float) * (size_t)(n * out)), *Yp = malloc(sizeof(float) * (size_t)(n * out));
    sdn_act_prepare(type, X, in, n, in, act);
    sdn_act_prepare_portable(type, X, in, n, in, act_p);
    assert_memory_equal(act, act_p, sdn_act_bytes(type, in, n));
    sdn_matmul_rows(type, m.W, m.rb, in, act, n, Y, out, 0, out);
    sdn_matmul_rows_portable(type, m.W, m.rb, in, act_p, n, Yp, out, 0, out);
    const int ab = act_block(type);
    const int64_t nb = ab ? in / ab : in / 8;
    double se[2] = {0, 0}, sy[2] = {0, 0};
    for (int r = 0; r < n; r++) {
        const float *x = X + r * in;
        for (int64_t o = 0; o < out; o++) {
            const float *w = m.Wd + o * in;
            double ref = 0, sabs = 0, quant = 0, qabs = 0;
            for (int64_t i0 = 0; i0 < in; i0 += ab ? ab : in) {
                const int len = ab ? ab : (int)in;
                double amax = 0;
                for (int i = 0; i < len; i++) amax = fmax(amax, fabs(x[i0 + i]));
                const double dx = amax / 127;
                for (int i = 0; i < len; i++) {
                    ref += (double)w[i0 + i] * x[i0 + i];
                    sabs += fabs((double)w[i0 + i] * x[i0 + i]);
                    quant += fabs(w[i0 + i]) * dx / 2;
                    qabs += fabs(w[i0 + i]) * (fabs(x[i0 + i]) + dx);
                }
            }
            double tol, fl;
            if (ab == 0) fl = tol = (double)(in / 8 + 4) * ldexp(1, -24) * sabs;
            else {
                fl = (double)(nb + 4) * ldexp(1, -22) * qabs;
                tol = 1.01 * quant + fl;
            }
            const double y = Y[r * out + o], yp = Yp[r * out + o];
            if (fabs(y - ref) > tol || fabs(yp - y) > 2 * fl + 1e-30) {
                print_error("%s in=%lld out=%lld r=%d o=%lld: simd %.9g portable %.9g ref %.9g (tol %.3g, fl %.3g)\n",
                            sdn_type_name(type), (long long)in, (long long)out, r, (long long)o, y, yp, ref, tol, fl);
                fail();
            }
            se[r % 3 == 1] += (y - ref) * (y - ref);
            sy[r % 3 == 1] += ref * ref;
        }
    }
    for (size_t t = 0; t < NTYPES; t++)
        if (all_types[t] == type)
            for (int k = 0; k < 2; k++) {
                g_se[t][k] += se[k];
                g_sy[t][k] += sy[k];
            }
    free(act); free(act_p); free(Y); free(Yp); free(X);
    wmat_free(&m);
}

static void test_accuracy(void **state) {
    (void)state;
    static const int64_t shapes[][2] = {{64, 1},   {64, 300}, {256, 37},  {256, 4},  {896, 129},
                                        {4864, 77}, {100, 13}, {7, 3},    {1024, 2}, {512, 33}};
    for (size_t t = 0; t < NTYPES; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            if (shape_ok(all_types[t], shapes[s][0]))
                check_accuracy(all_types[t], shapes[s][0], shapes[s][1], 1000 + 10 * t + s);
    for (size_t t = 0; t < NTYPES; t++) {
        const double rel = sqrt(g_se[t][0] / g_sy[t][0]), rel_out = sqrt(g_se[t][1] / g_sy[t][1]);
        print_message("%-5s RMS(err)/RMS(y) vs double reference: %.2e normal rows, %.2e rows with an outlier\n",
                      sdn_type_name(all_types[t]), rel, rel_out);
        assert_true(rel <= (is_float(all_types[t]) ? 1e-6 : 1.2e-2));
        assert_true(rel_out <= (is_float(all_types[t]) ? 1e-6 : 4e-2));
    }
}

/* ------------------------------------------------------------ batch invariance */

static void fill_garbage(void *p, size_t bytes, sdn_rng *rng) {
    uint8_t *b = p;
    for (size_t i = 0; i < bytes; i++) b[i] = (uint8_t)sdn_rng_u64(rng);
}

/* Y rows computed one at a time (n = 1, full range): the reference of every batched run. */
static float *single_rows(prep_fn prep, mm_fn mm, const wmat *m, const float *X, int nrows) {
    const size_t arow = sdn_act_bytes(m->type, m->in, 1);
    void *act = malloc(arow);
    float *Y1 = malloc(sizeof(float) * (size_t)(nrows * m->out));
    for (int r = 0; r < nrows; r++) {
        prep(m->type, X + r * m->in, m->in, 1, m->in, act);
        mm(m->type, m->W, m->rb, m->in, act, 1, Y1 + r * m->out, m->out, 0, m->out);
    }
    free(act);
    return Y1;
}

static void check_invariance(prep_fn prep, mm_fn mm, uint32_t type, int64_t in, int64_t out, uint64_t seed) {
    const int N = 64;
    const int64_t ldy = out + 3; /* a row stride wider than out: the gap must stay untouched */
    const size_t arow = sdn_act_bytes(type, in, 1);
    wmat m;
    wmat_make(&m, type, out, in, seed);
    float *X = make_x(N, in, seed + 1);
    float *Y1 = single_rows(prep, mm, &m, X, N);
    float *Xb = malloc(sizeof(float) * (size_t)(N * in));
    void *act = malloc(arow * N), *act1 = malloc(arow);
    float *Y = malloc(sizeof(float) * (size_t)(N * ldy));
    sdn_rng rng;
    sdn_rng_seed(&rng, seed + 2);
    const float sentinel = -12345.678f;

    /* 1. the first n rows as one batch, n = 1..64; preparation of the batch equals row-by-row
     *    preparation byte for byte. SDN_TEST_QUICK (.ci/aarch64 under emulation, where this
     *    took most of the test's 4.5 minutes): the sizes around the kernels' row blocks of 1, 2,
     *    4, 8 and 16 rows; every size runs natively in ./sdnpu test */
    static const int quick_n[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64};
    const int quick = getenv("SDN_TEST_QUICK") != NULL, nn = quick ? (int)(sizeof quick_n / sizeof quick_n[0]) : N;
    for (int ni = 0; ni < nn; ni++) {
        const int n = quick ? quick_n[ni] : ni + 1;
        prep(type, X, in, n, in, act);
        for (int r = 0; r < n; r++) {
            prep(type, X + r * in, in, 1, in, act1);
            assert_memory_equal((char *)act + r * arow, act1, arow);
        }
        for (int64_t i = 0; i < N * ldy; i++) Y[i] = sentinel;
        mm(type, m.W, m.rb, in, act, n, Y, ldy, 0, out);
        for (int r = 0; r < N; r++) {
            if (r < n) assert_memory_equal(Y + r * ldy, Y1 + r * out, sizeof(float) * (size_t)out);
            for (int64_t o = r < n ? out : 0; o < ldy; o++) assert_true(Y[r * ldy + o] == sentinel);
        }
    }

    /* 2. rows at shuffled positions among garbage padding rows (garbage floats, NaN/Inf
     *    included, and garbage prepared bytes) */
    int pos_src[64];
    for (int trial = 0; trial < 12; trial++) {
        const int n = 1 + (int)sdn_rng_below(&rng, N);
        for (int k = 0; k < n; k++) pos_src[k] = sdn_rng_below(&rng, 3) == 0 ? -1 : (int)sdn_rng_below(&rng, N);
        for (int k = 0; k < n; k++) {
            if (pos_src[k] >= 0) memcpy(Xb + k * in, X + pos_src[k] * in, sizeof(float) * (size_t)in);
            else fill_garbage(Xb + k * in, sizeof(float) * (size_t)in, &rng);
        }
        prep(type, Xb, in, n, in, act);
        for (int k = 0; k < n; k++)
            if (pos_src[k] < 0 && (k & 1)) fill_garbage((char *)act + k * arow, arow, &rng);
        mm(type, m.W, m.rb, in, act, n, Y, ldy, 0, out);
        for (int k = 0; k < n; k++)
            if (pos_src[k] >= 0) assert_memory_equal(Y + k * ldy, Y1 + pos_src[k] * out, sizeof(float) * (size_t)out);
    }

    /* 3. splits of [0, out): random cut points, single outputs, reverse order */
    for (int n = 1; n <= N; n += 21) {
        prep(type, X, in, n, in, act);
        for (int trial = 0; trial < 6; trial++) {
            for (int64_t i = 0; i < N * ldy; i++) Y[i] = sentinel;
            if (trial == 0) {
                for (int64_t o = out - 1; o >= 0; o--) mm(type, m.W, m.rb, in, act, n, Y, ldy, o, o + 1);
            } else {
                int64_t o1 = out;
                while (o1 > 0) {
                    int64_t o0 = o1 - 1 - (int64_t)sdn_rng_below(&rng, (uint64_t)(trial * 4));
                    if (o0 < 0) o0 = 0;
                    mm(type, m.W, m.rb, in, act, n, Y, ldy, o0, o1);
                    o1 = o0;
                }
            }
            for (int r = 0; r < N; r++) {
                if (r < n) assert_memory_equal(Y + r * ldy, Y1 + r * out, sizeof(float) * (size_t)out);
                for (int64_t o = r < n ? out : 0; o < ldy; o++) assert_true(Y[r * ldy + o] == sentinel);
            }
        }
        /* empty range writes nothing */
        mm(type, m.W, m.rb, in, act, n, Y, ldy, 5, 5);
    }
    free(X); free(Y1); free(Xb); free(act); free(act1); free(Y);
    wmat_free(&m);
}

static void run_invariance(prep_fn prep, mm_fn mm) {
    static const int64_t shapes[][2] = {{256, 37}, {896, 21}, {4864, 9}, {100, 6}};
    for (size_t t = 0; t < NTYPES; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            if (shape_ok(all_types[t], shapes[s][0]))
                check_invariance(prep, mm, all_types[t], shapes[s][0], shapes[s][1], 5000 + 10 * t + s);
}

static void test_batch_invariance(void **state) {
    kpath_use(state);
    print_message("kernels: %s\n", sdn_matmul_isa());
    run_invariance(sdn_act_prepare, sdn_matmul_rows);
}

static void test_batch_invariance_portable(void **state) {
    (void)state;
    run_invariance(sdn_act_prepare_portable, sdn_matmul_rows_portable);
}

/* Types whose kernels compute the same float operations in the same order on every path
 * (docs/kernels.md, "Batch invariance across paths"): their bits agree across paths. */
static int cross_path_exact(uint32_t t) {
#if defined(__aarch64__)
    return 1; /* the AArch64 paths run the portable kernels for the other types */
#endif
    return !is_float(t); /* every quantized type runs the column kernels (or the portable ones) */
}

/* Y of batches n = 1..64 (all rows at once) on the path in use vs on `ref`; bit for bit when
 * `exact`, else within the float-rounding part of the accuracy bound. */
static void check_paths(uint32_t type, int64_t in, int64_t out, sdn_kpath ref, int exact, uint64_t seed) {
    const int N = 64;
    const sdn_kpath here = sdn_kpath_get();
    wmat m;
    wmat_make(&m, type, out, in, seed);
    float *X = make_x(N, in, seed + 1);
    void *act = malloc(sdn_act_bytes(type, in, N));
    float *Y = malloc(sizeof(float) * (size_t)(N * out)), *Yr = malloc(sizeof(float) * (size_t)(N * out));
    static const int ns[] = {1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        const int n = ns[k];
        assert_int_equal(sdn_kpath_set(ref, NULL), SDN_OK);
        sdn_act_prepare(type, X, in, n, in, act);
        sdn_matmul_rows(type, m.W, m.rb, in, act, n, Yr, out, 0, out);
        assert_int_equal(sdn_kpath_set(here, NULL), SDN_OK);
        sdn_act_prepare(type, X, in, n, in, act);
        sdn_matmul_rows(type, m.W, m.rb, in, act, n, Y, out, 0, out);
        if (exact) {
            if (memcmp(Y, Yr, sizeof(float) * (size_t)(n * out))) {
                for (int64_t i = 0; i < n * out; i++)
                    if (memcmp(&Y[i], &Yr[i], sizeof(float)))
                        print_error("%s in=%lld n=%d row %lld col %lld: %s %.9g vs %s %.9g\n", sdn_type_name(type),
                                    (long long)in, n, (long long)(i / out), (long long)(i % out), sdn_kpath_name(here),
                                    Y[i], sdn_kpath_name(ref), Yr[i]);
                fail();
            }
        } else {
            /* different summation orders: within 1e-5 of the row's largest magnitude (the
             * accuracy test bounds this difference precisely) */
            for (int r = 0; r < n; r++) {
                double mx = 0;
                for (int64_t o = 0; o < out; o++) mx = fmax(mx, fabs(Yr[r * out + o]));
                for (int64_t o = 0; o < out; o++)
                    if (!(fabs((double)Y[r * out + o] - Yr[r * out + o]) <= 1e-5 * mx)) {
                        print_error("%s n=%d: %.9g vs %.9g\n", sdn_type_name(type), n, Y[r * out + o], Yr[r * out + o]);
                        fail();
                    }
            }
        }
    }
    free(X); free(act); free(Y); free(Yr);
    wmat_free(&m);
}

static void test_paths_agree(void **state) {
    kpath_use(state);
    const sdn_kpath here = sdn_kpath_get();
    static const int64_t shapes[][2] = {{256, 37}, {896, 19}, {4864, 5}};
    for (size_t t = 0; t < NTYPES; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const uint32_t type = all_types[t];
            if (!shape_ok(type, shapes[s][0])) continue;
            const uint64_t seed = 7000 + 10 * t + s;
            check_paths(type, shapes[s][0], shapes[s][1], SDN_KPATH_PORTABLE, cross_path_exact(type), seed);
            if (!cross_path_exact(type) && here != SDN_KPATH_PORTABLE && here <= SDN_KPATH_AMX)
                check_paths(type, shapes[s][0], shapes[s][1], SDN_KPATH_AVX2, 1, seed); /* one SIMD order */
        }
    assert_int_equal(sdn_kpath_set(here, NULL), SDN_OK);
}

/* Portable and SIMD preparations agree byte for byte, also on rows of garbage bits. */
static void test_act_prepare_agree(void **state) {
    kpath_use(state);
    sdn_rng rng;
    sdn_rng_seed(&rng, 99);
    const int64_t in = 512;
    const int n = 16;
    float *X = make_x(n, in, 3);
    fill_garbage(X + 3 * in, sizeof(float) * in, &rng);
    for (int64_t i = 0; i < in; i++) X[5 * in + i] = (i % 3) ? NAN : (i % 2 ? INFINITY : -INFINITY);
    memset(X + 7 * in, 0, sizeof(float) * in);
    for (size_t t = 0; t < NTYPES; t++) {
        const size_t bytes = sdn_act_bytes(all_types[t], in, n);
        assert_true(bytes > 0 && bytes % 64 == 0);
        uint8_t *a = malloc(bytes), *b = malloc(bytes);
        memset(a, 0xAB, bytes);
        memset(b, 0xCD, bytes);
        sdn_act_prepare(all_types[t], X, in, n, in, a);
        sdn_act_prepare_portable(all_types[t], X, in, n, in, b);
        assert_memory_equal(a, b, bytes);
        free(a);
        free(b);
    }
    assert_int_equal(sdn_act_bytes(SDN_TYPE_Q4_K, 896, 1), 0); /* 896 is not a multiple of 256 */
    assert_int_equal(sdn_act_bytes(SDN_TYPE_Q8_0, 48, 1), 0);
    assert_int_equal(sdn_act_bytes(SDN_TYPE_Q8_K, 256, 1), 0);
    free(X);
}

/* The AMX tile configuration bytes (checked everywhere; executed by the [AMX] tests on
 * machines with AMX): palette 1, C/A/B tiles with the documented rows and column bytes, every
 * other byte zero (reserved fields must be zero or ldtilecfg faults). */
static void test_amx_tile_config(void **state) {
    (void)state;
    for (int m = 1; m <= 16; m++) {
        uint8_t cfg[64];
        memset(cfg, 0xEE, sizeof cfg);
        sdn_amx_tile_config(cfg, m);
        uint8_t want[64] = {0};
        want[0] = 1;
        /* two sets by block parity: C tmm0/tmm1 (m x 64 bytes), A tmm2/tmm3 (m x 32), B tmm4/tmm5 (8 x 64) */
        want[16] = 64;
        want[18] = 64;
        want[20] = 32;
        want[22] = 32;
        want[24] = 64;
        want[26] = 64;
        want[48] = want[49] = want[50] = want[51] = (uint8_t)m;
        want[52] = want[53] = 8;
        assert_memory_equal(cfg, want, 64);
    }
}

/* Packed matrices against the file's layout on the path in use (bit for bit), and the row
 * read-back against the file's rows. 100 and 232 columns: several whole groups, an odd count of
 * them and a partial one, so one-row calls take the two-stream pairs (Q8_0) with both halves'
 * lanes on AVX2 and leave groups over for the tiles. */
static void test_packed(void **state) {
    kpath_use(state);
    static const uint32_t types[] = {SDN_TYPE_Q8_0, SDN_TYPE_Q4_0, SDN_TYPE_Q4_1, SDN_TYPE_Q5_0,
                                     SDN_TYPE_Q5_1, SDN_TYPE_Q4_K, SDN_TYPE_Q5_K, SDN_TYPE_Q6_K};
    static const int64_t shapes[][2] = {{64, 16}, {256, 37}, {896, 19}, {4864, 5}, {512, 40}, {256, 100}, {64, 232}};
    static const int ns[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64};
    const int N = 64;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const uint32_t type = types[t];
            const int64_t in = shapes[s][0], out = shapes[s][1];
            if (!shape_ok(type, in) || !sdn_matmul_packable(type)) continue; /* AArch64: not the 5-bit types */
            wmat m;
            wmat_make(&m, type, out, in, 9100 + 10 * t + s);
            const size_t pb = sdn_matmul_packed_bytes(type, in, out);
            assert_int_equal(pb, (size_t)((out + 15) / 16 * 16) * m.rb);
            uint8_t *P = malloc(pb + 64), *row = malloc(m.rb);
            P[pb] = 0xA5;
            sdn_matmul_pack(type, m.W, m.rb, in, out, P);
            assert_int_equal(P[pb], 0xA5); /* nothing written past the packed size */
            for (int64_t o = 0; o < out; o++) {
                sdn_matmul_packed_row(type, P, in, o, row);
                assert_memory_equal(row, m.W + (size_t)o * m.rb, m.rb);
            }
            float *X = make_x(N, in, 9200 + t);
            void *act = malloc(sdn_act_bytes(type, in, N));
            float *Y = malloc(sizeof(float) * (size_t)(N * out)), *Yp = malloc(sizeof(float) * (size_t)(N * out));
            for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
                const int n = ns[k];
                sdn_act_prepare(type, X, in, n, in, act);
                sdn_matmul_rows(type, m.W, m.rb, in, act, n, Y, out, 0, out);
                for (int split = 0; split < 3; split++) {
                    memset(Yp, 0xFF, sizeof(float) * (size_t)(n * out));
                    if (split == 0) sdn_matmul_rows_packed(type, P, in, act, n, Yp, out, 0, out);
                    else {
                        const int64_t c = split == 1 ? (out > 16 ? 16 : out / 2) : out / 3 + 1; /* at / off a group */
                        sdn_matmul_rows_packed(type, P, in, act, n, Yp, out, 0, c);
                        sdn_matmul_rows_packed(type, P, in, act, n, Yp, out, c, out);
                    }
                    if (memcmp(Y, Yp, sizeof(float) * (size_t)(n * out))) {
                        for (int64_t i = 0; i < n * out; i++)
                            if (memcmp(&Y[i], &Yp[i], sizeof(float)))
                                print_error("%s in=%lld n=%d split %d row %lld col %lld: packed %.9g vs file %.9g\n",
                                            sdn_type_name(type), (long long)in, n, split, (long long)(i / out),
                                            (long long)(i % out), Yp[i], Y[i]);
                        fail();
                    }
                }
            }
            free(X); free(act); free(Y); free(Yp); free(P); free(row);
            wmat_free(&m);
        }
    assert_int_equal(sdn_matmul_packed_bytes(SDN_TYPE_F32, 256, 16), 0);
    assert_int_equal(sdn_matmul_packed_bytes(SDN_TYPE_Q8_0, 100, 16), 0);
    assert_int_equal(sdn_matmul_packed_bytes(SDN_TYPE_Q6_K, 896, 16), 0);
    assert_int_equal(sdn_matmul_packed_bytes(SDN_TYPE_Q5_0, 48, 16), 0);
    assert_false(sdn_matmul_packable(SDN_TYPE_F16));
#if defined(__aarch64__) /* the 5-bit types stay on the file's layout there (matmul_pack.c) */
    assert_false(sdn_matmul_packable(SDN_TYPE_Q5_0));
    assert_int_equal(sdn_matmul_packed_bytes(SDN_TYPE_Q5_K, 256, 17), 0);
#else
    assert_int_equal(sdn_matmul_packed_bytes(SDN_TYPE_Q5_K, 256, 17), 32 * 176);
    assert_true(sdn_matmul_packable(SDN_TYPE_Q5_0));
    assert_true(sdn_matmul_packable(SDN_TYPE_Q5_1));
    assert_true(sdn_matmul_packable(SDN_TYPE_Q5_K));
#endif
}

/* Prefill-sized batches (up to 300 rows, odd counts) of every quantized type on the path in
 * use, against the portable kernel on the file's layout, bit for bit: the file layout and the
 * packed one, each over the whole range and split into ranges that start off a column group
 * (5, 21, 37) as well as at one (16, 48). In = 512 (16 blocks of 32, 2 super-blocks of 256);
 * out = 53 (three whole groups of 16 and a partial one). Sized for the emulated AArch64 CI
 * (about 0.7 s of CPU natively for the four x86 paths). */
static void prefill_rows_case(uint32_t type, int64_t out, const int *ns, size_t nns, const int64_t (*cuts)[4],
                              size_t ncuts, uint64_t seed) {
    const int N = 300;
    const int64_t in = 512;
    wmat m;
    wmat_make(&m, type, out, in, seed + (uint64_t)in);
    const int layouts = sdn_matmul_packable(type) ? 2 : 1; /* AArch64: the 5-bit types unpacked */
    uint8_t *P = malloc(layouts == 2 ? sdn_matmul_packed_bytes(type, in, out) : 1);
    if (layouts == 2) sdn_matmul_pack(type, m.W, m.rb, in, out, P);
    float *X = make_x(N, in, seed + 100);
    void *act = malloc(sdn_act_bytes(type, in, N));
    float *Yr = malloc(sizeof(float) * (size_t)(N * out)), *Y = malloc(sizeof(float) * (size_t)(N * out));
    for (size_t k = 0; k < nns; k++) {
        const int n = ns[k];
        sdn_act_prepare(type, X, in, n, in, act);
        sdn_matmul_rows_portable(type, m.W, m.rb, in, act, n, Yr, out, 0, out);
        for (int layout = 0; layout < layouts; layout++)
            for (size_t c = 0; c < ncuts; c++) {
                memset(Y, 0xFF, sizeof(float) * (size_t)(n * out));
                for (int p = 0; p < 3; p++) {
                    const int64_t o0 = cuts[c][p], o1 = cuts[c][p + 1];
                    if (o1 <= o0) continue;
                    if (layout) sdn_matmul_rows_packed(type, P, in, act, n, Y, out, o0, o1);
                    else sdn_matmul_rows(type, m.W, m.rb, in, act, n, Y, out, o0, o1);
                }
                if (memcmp(Y, Yr, sizeof(float) * (size_t)(n * out))) {
                    int shown = 0;
                    for (int64_t i = 0; i < n * out && shown < 10; i++)
                        if (memcmp(&Y[i], &Yr[i], sizeof(float)) && ++shown)
                            print_error("%s in=%lld out=%lld n=%d %s cuts %zu row %lld col %lld: %.9g vs portable %.9g\n",
                                        sdn_type_name(type), (long long)in, (long long)out, n, layout ? "packed" : "file",
                                        c, (long long)(i / out), (long long)(i % out), Y[i], Yr[i]);
                    fail();
                }
            }
    }
    free(X); free(act); free(Y); free(Yr); free(P);
    wmat_free(&m);
}
static void test_prefill_rows(void **state) {
    kpath_use(state);
    static const uint32_t types[] = {SDN_TYPE_Q8_0, SDN_TYPE_Q4_0, SDN_TYPE_Q4_1, SDN_TYPE_Q5_0,
                                     SDN_TYPE_Q5_1, SDN_TYPE_Q4_K, SDN_TYPE_Q5_K, SDN_TYPE_Q6_K};
    static const int ns[] = {1, 3, 17, 65, 129, 300};
    static const int64_t cuts[][4] = {{0, 53, 53, 53}, {0, 5, 37, 53}, {0, 21, 53, 53}, {0, 16, 48, 53}};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        prefill_rows_case(types[t], 53, ns, sizeof ns / sizeof ns[0], cuts, sizeof cuts / sizeof cuts[0], 9500 + 10 * t);
#if defined(__x86_64__)
    /* more column groups than the AMX loop unpacks at once (8, matmul_cols_avx2.c): 10 and a
     * partial one, whole and cut inside and at the ninth group; one plain and one affine type
     * (x86-64 only: no AArch64 kernel has such a pass, and qemu makes it costly there) */
    static const int ns2[] = {33, 100};
    static const int64_t cuts2[][4] = {{0, 170, 170, 170}, {0, 16, 150, 170}, {0, 128, 133, 170}};
    prefill_rows_case(SDN_TYPE_Q5_0, 170, ns2, 2, cuts2, 3, 9700);
    prefill_rows_case(SDN_TYPE_Q4_1, 170, ns2, 2, cuts2, 3, 9710);
#endif
}

#if defined(__x86_64__)
typedef int (*cols_fn)(uint32_t, const void *, size_t, int64_t, const void *, int, float *, int64_t, int64_t, int64_t,
                       int);
typedef int (*colspk_fn)(uint32_t, const void *, int64_t, const void *, int, float *, int64_t, int64_t, int64_t, int);
typedef int (*kcols_fn)(uint32_t, const void *, size_t, int64_t, const void *, int, float *, int64_t, int64_t, int64_t);
typedef int (*kcolspk_fn)(uint32_t, const void *, int64_t, const void *, int, float *, int64_t, int64_t, int64_t, int);
#endif

/* Every x86 SIMD variant's column kernels called directly (the paths pick one variant each,
 * so on a CPU with AVX-VNNI the plain-AVX2 one, vpmaddubsw + vpmaddwd, is never picked by a
 * path): file and packed layouts, 1..300 rows, against the portable kernel bit for bit. A
 * variant the CPU cannot run is skipped by name. */
static void test_simd_variants(void **state) {
    (void)state;
#if defined(__x86_64__)
    static const uint32_t types[] = {SDN_TYPE_Q8_0, SDN_TYPE_Q4_0, SDN_TYPE_Q4_1, SDN_TYPE_Q5_0,
                                     SDN_TYPE_Q5_1, SDN_TYPE_Q4_K, SDN_TYPE_Q5_K, SDN_TYPE_Q6_K};
    static const struct {
        const char *name;
        sdn_kpath need; /* the path whose CPU features it needs */
        int vnni;       /* needs AVX-VNNI too */
        cols_fn cols;
        colspk_fn colspk;
        kcols_fn kcols;
        kcolspk_fn kcolspk;
    } vars[] = {
        {"avx2", SDN_KPATH_AVX2, 0, sdn_matmul_cols_avx2, sdn_matmul_cols_packed_avx2, sdn_matmul_kcols_avx2,
         sdn_matmul_kcols_packed_avx2},
        {"avx2vnni", SDN_KPATH_AVX2, 1, sdn_matmul_cols_avx2vnni, sdn_matmul_cols_packed_avx2vnni,
         sdn_matmul_kcols_avx2vnni, sdn_matmul_kcols_packed_avx2vnni},
        {"avx512", SDN_KPATH_AVX512, 0, sdn_matmul_cols_avx512, sdn_matmul_cols_packed_avx512, sdn_matmul_kcols_avx512,
         sdn_matmul_kcols_packed_avx512},
    };
    static const int ns[] = {1, 2, 5, 8, 9, 17, 65, 300};
    const int N = 300;
    const int64_t in = 512, out = 53;
    const sdn_kpath here = sdn_kpath_get();
    sdn_kernels_setup();
    for (size_t v = 0; v < sizeof vars / sizeof vars[0]; v++) {
        if (sdn_kpath_set(vars[v].need, NULL) != SDN_OK || (vars[v].vnni && !sdn_kpath_avxvnni())) {
            print_message("SKIPPED variant %s: this CPU lacks its instructions\n", vars[v].name);
            continue;
        }
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            const uint32_t type = types[t];
            const int k = act_block(type) == 256;
            wmat m;
            wmat_make(&m, type, out, in, 9700 + t);
            uint8_t *P = malloc(sdn_matmul_packed_bytes(type, in, out));
            sdn_matmul_pack(type, m.W, m.rb, in, out, P);
            float *X = make_x(N, in, 9800 + t);
            void *act = malloc(sdn_act_bytes(type, in, N));
            float *Yr = malloc(sizeof(float) * (size_t)(N * out)), *Y = malloc(sizeof(float) * (size_t)(N * out));
            for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) {
                const int n = ns[j];
                sdn_act_prepare_portable(type, X, in, n, in, act);
                sdn_matmul_rows_portable(type, m.W, m.rb, in, act, n, Yr, out, 0, out);
                for (int layout = 0; layout < 2; layout++) {
                    memset(Y, 0xFF, sizeof(float) * (size_t)(n * out));
                    /* file: [0, 21) and [21, out); packed: [0, 32) and [32, out) (group starts) */
                    const int64_t cut = layout ? 32 : 21;
                    for (int p = 0; p < 2; p++) {
                        const int64_t o0 = p ? cut : 0, o1 = p ? out : cut;
                        int ok;
                        if (layout)
                            ok = k ? vars[v].kcolspk(type, P, in, act, n, Y, out, o0, o1, 0)
                                   : vars[v].colspk(type, P, in, act, n, Y, out, o0, o1, 0);
                        else
                            ok = k ? vars[v].kcols(type, m.W, m.rb, in, act, n, Y, out, o0, o1)
                                   : vars[v].cols(type, m.W, m.rb, in, act, n, Y, out, o0, o1, 0);
                        assert_true(ok);
                    }
                    if (memcmp(Y, Yr, sizeof(float) * (size_t)(n * out))) {
                        print_error("%s %s n=%d %s: not the portable bits\n", vars[v].name, sdn_type_name(type), n,
                                    layout ? "packed" : "file");
                        fail();
                    }
                }
            }
            free(X); free(act); free(Y); free(Yr); free(P);
            wmat_free(&m);
        }
    }
    assert_int_equal(sdn_kpath_set(here, NULL), SDN_OK);
#endif
}

int main(void) {
    /* SDN_TEST_FILTER=pattern runs only the matching tests (cmocka's wildcards; .ci/aarch64: '*]') */
    if (getenv("SDN_TEST_FILTER")) cmocka_set_test_filter(getenv("SDN_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        KPATH_TESTS(test_act_prepare_agree),
        cmocka_unit_test(test_accuracy),
        KPATH_TESTS(test_batch_invariance),
        cmocka_unit_test(test_batch_invariance_portable),
        KPATH_TESTS(test_paths_agree),
        cmocka_unit_test(test_amx_tile_config),
        KPATH_TESTS(test_packed),
        KPATH_TESTS(test_prefill_rows),
        cmocka_unit_test(test_simd_variants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
