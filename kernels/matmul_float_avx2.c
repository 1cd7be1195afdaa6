/* matmul_float_avx2.c - AVX2/FMA kernels for F32, F16 and BF16 weights with F32 activations.
 *
 * Element (r, o) is one 8-lane accumulator: acc = fmadd(w[k..k+7], x[k..k+7], acc) for
 * k = 0, 8, 16, ... (a zero-padded last chunk when in % 8 != 0), then sdn_hsum8. F16 weights
 * are widened with vcvtph2ps and BF16 with a 16-bit shift, both exact. Tiles of TW weight
 * rows x TX activation rows share the weight loads; every tile shape runs this same
 * per-element sequence (one inline body, unrolled per shape), which is the batch-invariance
 * argument: an element's bits depend on its weight row and activation row only. */
#include "kernels/matmul_internal.h"

#ifdef SDN_MATMUL_AVX2
#include "kernels/matmul_avx2.h"

SDN_INLINE __m256 load_w8(uint32_t wtype, const uint8_t *w, int64_t k) {
    if (wtype == SDN_TYPE_F32) return _mm256_loadu_ps((const float *)w + k);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + k));
    if (wtype == SDN_TYPE_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Last in % 8 elements of a weight row, zero-padded to 8. */
SDN_INLINE __m256 load_w_tail(uint32_t wtype, const uint8_t *w, int64_t k, int rem) {
    uint8_t buf[32] = {0};
    memcpy(buf, w + k * (wtype == SDN_TYPE_F32 ? 4 : 2), (size_t)rem * (wtype == SDN_TYPE_F32 ? 4 : 2));
    return load_w8(wtype, buf, 0);
}

SDN_INLINE __m256 load_x_tail(const float *x, int64_t k, int rem) {
    float buf[8] = {0};
    memcpy(buf, x + k, (size_t)rem * sizeof(float));
    return _mm256_loadu_ps(buf);
}

SDN_INLINE void ftile(uint32_t wtype, const int TW, const int TX, const uint8_t *W, size_t row_bytes, int64_t in,
                      const char *act, size_t stride, int64_t o, int r, float *Y, int64_t ldy) {
    const size_t esz = wtype == SDN_TYPE_F32 ? 4 : 2;
    const uint8_t *w[4];
    const float *x[4];
    __m256 acc[4][4];
    SDN_UNROLL
    for (int i = 0; i < TW; i++) w[i] = W + (size_t)(o + i) * row_bytes;
    SDN_UNROLL
    for (int j = 0; j < TX; j++) x[j] = (const float *)(act + (size_t)(r + j) * stride);
    SDN_UNROLL
    for (int i = 0; i < TW; i++)
        SDN_UNROLL
        for (int j = 0; j < TX; j++) acc[i][j] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= in; k += 8) {
        __m256 wv[4];
        if ((k & 15) == 0) { /* once per 64 bytes of F32 rows, 32 bytes of F16/BF16 rows */
            SDN_UNROLL
            for (int i = 0; i < TW; i++) sdn_prefetch(w[i] + SDN_PF_TILES * TW * row_bytes + k * esz);
        }
        SDN_UNROLL
        for (int i = 0; i < TW; i++) wv[i] = load_w8(wtype, w[i], k);
        SDN_UNROLL
        for (int j = 0; j < TX; j++) {
            const __m256 xv = _mm256_loadu_ps(x[j] + k);
            SDN_UNROLL
            for (int i = 0; i < TW; i++) acc[i][j] = _mm256_fmadd_ps(wv[i], xv, acc[i][j]);
        }
    }
    if (k < in) {
        const int rem = (int)(in - k);
        __m256 wv[4];
        SDN_UNROLL
        for (int i = 0; i < TW; i++) wv[i] = load_w_tail(wtype, w[i], k, rem);
        SDN_UNROLL
        for (int j = 0; j < TX; j++) {
            const __m256 xv = load_x_tail(x[j], k, rem);
            SDN_UNROLL
            for (int i = 0; i < TW; i++) acc[i][j] = _mm256_fmadd_ps(wv[i], xv, acc[i][j]);
        }
    }
    SDN_UNROLL
    for (int j = 0; j < TX; j++)
        SDN_UNROLL
        for (int i = 0; i < TW; i++) Y[(size_t)(r + j) * ldy + o + i] = sdn_hsum8(acc[i][j]);
}

/* One function per (type, tile shape) so each gets its own fully unrolled body. */
#define FTILE_FN(name, T, TW, TX)                                                                                    \
    static void name(const uint8_t *W, size_t rb, int64_t in, const char *act, size_t st, int64_t o, int r,       \
                     float *Y, int64_t ldy) {                                                                       \
        ftile(T, TW, TX, W, rb, in, act, st, o, r, Y, ldy);                                                         \
    }
#define FTILE_SET(pfx, T)                                                                                           \
    FTILE_FN(pfx##_4x1, T, 4, 1)                                                                                    \
    FTILE_FN(pfx##_4x2, T, 4, 2)                                                                                    \
    FTILE_FN(pfx##_4x3, T, 4, 3)                                                                                    \
    FTILE_FN(pfx##_4x4, T, 4, 4)                                                                                    \
    FTILE_FN(pfx##_1x1, T, 1, 1)                                                                                    \
    FTILE_FN(pfx##_1x2, T, 1, 2)                                                                                    \
    FTILE_FN(pfx##_1x3, T, 1, 3)                                                                                    \
    FTILE_FN(pfx##_1x4, T, 1, 4)                                                                                    \
    static const ftile_fn pfx##_tiles[2][4] = {{pfx##_1x1, pfx##_1x2, pfx##_1x3, pfx##_1x4},                        \
                                               {pfx##_4x1, pfx##_4x2, pfx##_4x3, pfx##_4x4}};

typedef void (*ftile_fn)(const uint8_t *, size_t, int64_t, const char *, size_t, int64_t, int, float *, int64_t);

FTILE_SET(f32, SDN_TYPE_F32)
FTILE_SET(f16, SDN_TYPE_F16)
FTILE_SET(bf16, SDN_TYPE_BF16)

void SDN_KFN(sdn_matmul_float)(uint32_t wtype, const void *W, size_t row_bytes, int64_t in, const void *act, int n,
                           float *Y, int64_t ldy, int64_t o0, int64_t o1) {
    const ftile_fn(*t)[4] = wtype == SDN_TYPE_F32 ? f32_tiles : wtype == SDN_TYPE_F16 ? f16_tiles : bf16_tiles;
    const size_t stride = sdn_act_row_stride(wtype, in);
    int64_t o = o0;
    for (; o + 4 <= o1; o += 4)
        for (int r = 0; r < n; r += 4) t[1][(n - r < 4 ? n - r : 4) - 1](W, row_bytes, in, act, stride, o, r, Y, ldy);
    for (; o < o1; o++)
        for (int r = 0; r < n; r += 4) t[0][(n - r < 4 ? n - r : 4) - 1](W, row_bytes, in, act, stride, o, r, Y, ldy);
}

#endif
