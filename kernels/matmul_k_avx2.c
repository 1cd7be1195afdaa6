/* matmul_k_avx2.c - AVX2 kernels for the K super-block types Q4_K, Q5_K, Q6_K against
 * Q8_K-style activations (int8 q per 256, f32 d, int16 sums of 16; matmul_internal.h).
 *
 * Per super-block of element (r, o):
 *   Q4_K/Q5_K  isum = sum over 8 sub-blocks s of sc[s] * (sum w*q)      (int32 x 8 lanes, exact)
 *              mins = lane k: m[k] * (bsum[2k] + bsum[2k+1])          (int32 x 8 lanes, exact)
 *              acc = fmadd(float(isum), d*dx, acc); acc = fnmadd(float(mins), dmin*dx, acc)
 *   Q6_K       isum = sum over 16 sub-blocks s of sc[s] * (sum w*q) - 32 * (sc . bsum)
 *              (levels w in 0..63, the -32 offset folded in exactly via the block sums)
 *              acc = fmadd(float(isum), d*dx, acc)
 * result = hsum8(acc). vpmaddubsw (unsigned levels x int8 activations, pair sums <= 2*63*127)
 * then vpmaddwd with the sub-block scale are exact. As in the other kernels, tiles of weight
 * rows x activation rows share the unpacking of a weight super-block, and every tile shape
 * runs the same per-element sequence: batch invariance. */
#include "kernels/matmul_internal.h"

#ifdef SDN_MATMUL_AVX2
#include "kernels/matmul_avx2.h"

/* Q4_K/Q5_K 12-byte scales -> 16 bytes [sc0..sc7, m0..m7] (same decoding as
 * sdn_k4_scale_min, four lanes at a time). */
SDN_INLINE __m128i k4_scales16(const uint8_t *s) {
    uint32_t a, b, c;
    memcpy(&a, s, 4);
    memcpy(&b, s + 4, 4);
    memcpy(&c, s + 8, 4);
    const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
    return _mm_setr_epi32((int)(a & m6), (int)((c & m4) | ((a >> 6) & m2) << 4), (int)(b & m6),
                          (int)(((c >> 4) & m4) | ((b >> 6) & m2) << 4));
}

/* int16 lanes all equal to byte k of a (broadcast) 16-byte vector, zero-extended. */
SDN_INLINE __m256i bcast_u8_as_i16(__m256i sv, int k) {
    return _mm256_shuffle_epi8(sv, _mm256_set1_epi16((short)(0x8000 | k)));
}

/* int16 lanes [m0,m0,m1,m1,...,m7,m7] from [sc0..7, m0..7] broadcast in both 128-bit halves. */
SDN_INLINE __m256i mins_pairs(__m256i sv) {
    const __m256i mask = _mm256_setr_epi8(8, -128, 8, -128, 9, -128, 9, -128, 10, -128, 10, -128, 11, -128, 11, -128,
                                          12, -128, 12, -128, 13, -128, 13, -128, 14, -128, 14, -128, 15, -128, 15,
                                          -128);
    return _mm256_shuffle_epi8(sv, mask);
}

SDN_INLINE void k45tile(const int q5, const int TW, const int TX, const uint8_t *W, size_t row_bytes, int64_t in,
                        const char *act, size_t stride, int64_t o, int r, float *Y, int64_t ldy) {
    const size_t bb = q5 ? 176 : 144;
    const int64_t nb = in / 256;
    const uint8_t *w[4];
    const int8_t *xq[4];
    const float *xd[4];
    const int16_t *xb[4];
    __m256 acc[4][4];
    SDN_UNROLL
    for (int i = 0; i < TW; i++) w[i] = W + (size_t)(o + i) * row_bytes;
    SDN_UNROLL
    for (int j = 0; j < TX; j++) {
        const char *row = act + (size_t)(r + j) * stride;
        xq[j] = sdn_act_q(row);
        xd[j] = sdn_act_d(row, in);
        xb[j] = sdn_act_bsum(row, in);
    }
    SDN_UNROLL
    for (int i = 0; i < TW; i++)
        SDN_UNROLL
        for (int j = 0; j < TX; j++) acc[i][j] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
    for (int64_t b = 0; b < nb; b++) {
        __m256i sv[4], qh[4], isum[4][4];
        SDN_UNROLL
        for (int i = 0; i < TW; i++) {
            const uint8_t *blk = w[i] + b * bb;
            const uint8_t *pf = blk + SDN_PF_TILES * TW * row_bytes;
            sdn_prefetch(pf);
            sdn_prefetch(pf + 64);
            sdn_prefetch(pf + 128);
            if (q5) sdn_prefetch(pf + 175);
            sv[i] = _mm256_broadcastsi128_si256(k4_scales16(blk + 4));
            if (q5) qh[i] = _mm256_loadu_si256((const __m256i *)(blk + 16));
            SDN_UNROLL
            for (int j = 0; j < TX; j++) isum[i][j] = _mm256_setzero_si256();
        }
        SDN_UNROLL
        for (int c = 0; c < 4; c++) {
            __m256i lo[4], hi[4], slo[4], shi[4];
            SDN_UNROLL
            for (int i = 0; i < TW; i++) {
                const __m256i qs = _mm256_loadu_si256((const __m256i *)(w[i] + b * bb + (q5 ? 48 : 16) + 32 * c));
                lo[i] = _mm256_and_si256(qs, m4);
                hi[i] = _mm256_and_si256(_mm256_srli_epi16(qs, 4), m4);
                if (q5) {
                    lo[i] = _mm256_or_si256(lo[i], _mm256_slli_epi16(_mm256_and_si256(qh[i], one), 4));
                    hi[i] = _mm256_or_si256(hi[i], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh[i], 1), one), 4));
                    qh[i] = _mm256_srli_epi16(qh[i], 2);
                }
                slo[i] = bcast_u8_as_i16(sv[i], 2 * c);
                shi[i] = bcast_u8_as_i16(sv[i], 2 * c + 1);
            }
            SDN_UNROLL
            for (int j = 0; j < TX; j++) {
                const __m256i xlo = _mm256_loadu_si256((const __m256i *)(xq[j] + 256 * b + 64 * c));
                const __m256i xhi = _mm256_loadu_si256((const __m256i *)(xq[j] + 256 * b + 64 * c + 32));
                SDN_UNROLL
                for (int i = 0; i < TW; i++) {
                    __m256i p = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo[i], xlo), slo[i]),
                                                 _mm256_madd_epi16(_mm256_maddubs_epi16(hi[i], xhi), shi[i]));
                    isum[i][j] = _mm256_add_epi32(isum[i][j], p);
                }
            }
        }
        SDN_UNROLL
        for (int i = 0; i < TW; i++) {
            const uint8_t *blk = w[i] + b * bb;
            const float d = sdn_h2f(blk), dmin = sdn_h2f(blk + 2);
            const __m256i mp = mins_pairs(sv[i]);
            SDN_UNROLL
            for (int j = 0; j < TX; j++) {
                const float dx = xd[j][b];
                const __m256i bs = _mm256_loadu_si256((const __m256i *)(xb[j] + 16 * b));
                const __m256i mins = _mm256_madd_epi16(mp, bs);
                acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i][j]), _mm256_set1_ps(d * dx), acc[i][j]);
                acc[i][j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(dmin * dx), acc[i][j]);
            }
        }
    }
    SDN_UNROLL
    for (int j = 0; j < TX; j++)
        SDN_UNROLL
        for (int i = 0; i < TW; i++) Y[(size_t)(r + j) * ldy + o + i] = sdn_hsum8(acc[i][j]);
}

/* Scale vector of Q6_K sub-block pair p (sub-blocks 2p, 2p+1): int16 lanes 0..7 = sc[2p],
 * lanes 8..15 = sc[2p+1]; s16 holds the 16 sign-extended scales. */
SDN_INLINE __m256i q6_pair_scale(__m256i s16, int p) {
    const __m256i t = _mm256_permutevar8x32_epi32(s16, _mm256_set1_epi32(p));
    const __m256i mask = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3,
                                          2, 3, 2, 3, 2, 3);
    return _mm256_shuffle_epi8(t, mask);
}

SDN_INLINE void q6tile(const int TW, const int TX, const uint8_t *W, size_t row_bytes, int64_t in, const char *act,
                       size_t stride, int64_t o, int r, float *Y, int64_t ldy) {
    const size_t bb = 210;
    const int64_t nb = in / 256;
    const uint8_t *w[4];
    const int8_t *xq[4];
    const float *xd[4];
    const int16_t *xb[4];
    __m256 acc[4][4];
    SDN_UNROLL
    for (int i = 0; i < TW; i++) w[i] = W + (size_t)(o + i) * row_bytes;
    SDN_UNROLL
    for (int j = 0; j < TX; j++) {
        const char *row = act + (size_t)(r + j) * stride;
        xq[j] = sdn_act_q(row);
        xd[j] = sdn_act_d(row, in);
        xb[j] = sdn_act_bsum(row, in);
    }
    SDN_UNROLL
    for (int i = 0; i < TW; i++)
        SDN_UNROLL
        for (int j = 0; j < TX; j++) acc[i][j] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(15), m03 = _mm256_set1_epi8(3), m0c = _mm256_set1_epi8(12),
                  m30 = _mm256_set1_epi8(0x30), mc0 = _mm256_set1_epi8((char)0xC0);
    for (int64_t b = 0; b < nb; b++) {
        __m256i s16[4], isum[4][4];
        SDN_UNROLL
        for (int i = 0; i < TW; i++) {
            const uint8_t *pf = w[i] + b * bb + SDN_PF_TILES * TW * row_bytes;
            sdn_prefetch(pf);
            sdn_prefetch(pf + 64);
            sdn_prefetch(pf + 128);
            sdn_prefetch(pf + 209);
            s16[i] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w[i] + b * bb + 192)));
            SDN_UNROLL
            for (int j = 0; j < TX; j++) isum[i][j] = _mm256_setzero_si256();
        }
        SDN_UNROLL
        for (int h = 0; h < 2; h++) {
            __m256i ql0[4], ql1[4], qh[4];
            SDN_UNROLL
            for (int i = 0; i < TW; i++) {
                const uint8_t *blk = w[i] + b * bb;
                ql0[i] = _mm256_loadu_si256((const __m256i *)(blk + 64 * h));
                ql1[i] = _mm256_loadu_si256((const __m256i *)(blk + 64 * h + 32));
                qh[i] = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
            }
            SDN_UNROLL
            for (int g = 0; g < 4; g++) {
                __m256i q[4], sc[4];
                SDN_UNROLL
                for (int i = 0; i < TW; i++) {
                    switch (g) {
                    case 0:
                        q[i] = _mm256_or_si256(_mm256_and_si256(ql0[i], m4),
                                               _mm256_slli_epi16(_mm256_and_si256(qh[i], m03), 4));
                        break;
                    case 1:
                        q[i] = _mm256_or_si256(_mm256_and_si256(ql1[i], m4),
                                               _mm256_slli_epi16(_mm256_and_si256(qh[i], m0c), 2));
                        break;
                    case 2:
                        q[i] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0[i], 4), m4),
                                               _mm256_and_si256(qh[i], m30));
                        break;
                    default:
                        q[i] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1[i], 4), m4),
                                               _mm256_srli_epi16(_mm256_and_si256(qh[i], mc0), 2));
                        break;
                    }
                    sc[i] = q6_pair_scale(s16[i], 4 * h + g);
                }
                SDN_UNROLL
                for (int j = 0; j < TX; j++) {
                    const __m256i xv = _mm256_loadu_si256((const __m256i *)(xq[j] + 256 * b + 128 * h + 32 * g));
                    SDN_UNROLL
                    for (int i = 0; i < TW; i++)
                        isum[i][j] =
                            _mm256_add_epi32(isum[i][j], _mm256_madd_epi16(_mm256_maddubs_epi16(q[i], xv), sc[i]));
                }
            }
        }
        SDN_UNROLL
        for (int i = 0; i < TW; i++) {
            const float d = sdn_h2f(w[i] + b * bb + 208);
            SDN_UNROLL
            for (int j = 0; j < TX; j++) {
                const __m256i bs = _mm256_loadu_si256((const __m256i *)(xb[j] + 16 * b));
                const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(s16[i], bs), 5);
                const __m256i tot = _mm256_sub_epi32(isum[i][j], corr);
                acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), _mm256_set1_ps(d * xd[j][b]), acc[i][j]);
            }
        }
    }
    SDN_UNROLL
    for (int j = 0; j < TX; j++)
        SDN_UNROLL
        for (int i = 0; i < TW; i++) Y[(size_t)(r + j) * ldy + o + i] = sdn_hsum8(acc[i][j]);
}

typedef void (*ktile_fn)(const uint8_t *, size_t, int64_t, const char *, size_t, int64_t, int, float *, int64_t);

#define KTILE_FN(name, CALL)                                                                                         \
    static void name(const uint8_t *W, size_t rb, int64_t in, const char *act, size_t st, int64_t o, int r,       \
                     float *Y, int64_t ldy) {                                                                       \
        CALL;                                                                                                       \
    }
#define Q45(q5, TW, TX) k45tile(q5, TW, TX, W, rb, in, act, st, o, r, Y, ldy)
#define Q6(TW, TX) q6tile(TW, TX, W, rb, in, act, st, o, r, Y, ldy)
/* Tile shapes: [0] 1 x (1..4), [1] 2 x (1..4), plus 4 x 1 for single-row calls. */
#define KTILE_SET(pfx, M)                                                                                           \
    KTILE_FN(pfx##_1x1, M(1, 1))                                                                                    \
    KTILE_FN(pfx##_1x2, M(1, 2))                                                                                    \
    KTILE_FN(pfx##_1x3, M(1, 3))                                                                                    \
    KTILE_FN(pfx##_1x4, M(1, 4))                                                                                    \
    KTILE_FN(pfx##_2x1, M(2, 1))                                                                                    \
    KTILE_FN(pfx##_2x2, M(2, 2))                                                                                    \
    KTILE_FN(pfx##_2x3, M(2, 3))                                                                                    \
    KTILE_FN(pfx##_2x4, M(2, 4))                                                                                    \
    KTILE_FN(pfx##_4x1, M(4, 1))                                                                                    \
    static const ktile_fn pfx##_tiles[2][4] = {{pfx##_1x1, pfx##_1x2, pfx##_1x3, pfx##_1x4},                        \
                                               {pfx##_2x1, pfx##_2x2, pfx##_2x3, pfx##_2x4}};

#define M_Q4K(TW, TX) Q45(0, TW, TX)
#define M_Q5K(TW, TX) Q45(1, TW, TX)
KTILE_SET(q4k, M_Q4K)
KTILE_SET(q5k, M_Q5K)
KTILE_SET(q6k, Q6)

void SDN_KFN(sdn_matmul_k)(uint32_t wtype, const void *W, size_t row_bytes, int64_t in, const void *act, int n, float *Y,
                       int64_t ldy, int64_t o0, int64_t o1) {
    const ktile_fn(*t)[4] = wtype == SDN_TYPE_Q4_K ? q4k_tiles : wtype == SDN_TYPE_Q5_K ? q5k_tiles : q6k_tiles;
    const ktile_fn t4x1 = wtype == SDN_TYPE_Q4_K ? q4k_4x1 : wtype == SDN_TYPE_Q5_K ? q5k_4x1 : q6k_4x1;
    const size_t stride = sdn_act_row_stride(wtype, in);
    int64_t o = o0;
    if (n == 1)
        for (; o + 4 <= o1; o += 4) t4x1(W, row_bytes, in, act, stride, o, 0, Y, ldy);
    for (; o + 2 <= o1; o += 2)
        for (int r = 0; r < n; r += 4) t[1][(n - r < 4 ? n - r : 4) - 1](W, row_bytes, in, act, stride, o, r, Y, ldy);
    for (; o < o1; o++)
        for (int r = 0; r < n; r += 4) t[0][(n - r < 4 ? n - r : 4) - 1](W, row_bytes, in, act, stride, o, r, Y, ldy);
}

#endif
