/* matmul_q32_avx2.c - AVX2 kernels for the 32-element block types Q8_0, Q4_0, Q5_0 (symmetric)
 * and Q4_1, Q5_1 (with a min), against Q8_0/Q8_1-style activations (matmul_internal.h).
 *
 * Per block b of element (r, o), with integer weight levels w and activation bytes q:
 *   isum = 8 int32 lanes of sum w*q            (exact)
 *   acc  = fmadd(float(isum), dw*dx, acc)      (8-lane float accumulator)
 *   acc  = fmadd([mw,0,..,0], s, acc)          (Q4_1/Q5_1 only: the min term into lane 0;
 *                                               s = dx*sum(q))
 * result = hsum8(acc).
 * The integer part has two exact implementations: with VNNI, the stored unsigned levels
 * u = w + off (off = 128 for Q8_0 after flipping the sign bit, 8 for Q4_0, 16 for Q5_0) go
 * straight into vpdpbusd, whose accumulator starts at -off * (sum of q over each 4-lane
 * group), and Q4_0/Q4_1 high nibbles stay in place (16 * level, see nibbles_x16); without
 * VNNI, symmetric types use |w| and sign(q, w) with vpmaddubsw. The weight
 * block is unpacked once per tile and reused for the tile's activation rows; every tile
 * shape runs the same per-element sequence above, so an element's bits depend on its weight
 * row and activation row only (batch invariance). */
#include "kernels/matmul_internal.h"

#ifdef SDN_MATMUL_AVX2
#include "kernels/matmul_avx2.h"

#ifdef SDN_VNNI
#define OFFSET_FORM 1 /* unsigned levels + exact offset correction */
#else
#define OFFSET_FORM 0 /* signed levels, |w| and sign(q, w) */
#endif

/* Offset of the unsigned levels in the offset form (0: affine types, no offset). */
SDN_INLINE int level_offset(uint32_t wtype) {
    return wtype == SDN_TYPE_Q8_0 ? 128 : wtype == SDN_TYPE_Q4_0 ? 8 : wtype == SDN_TYPE_Q5_0 ? 16 : 0;
}

/* v | 16 in the bytes whose bit is set in qh (the 5th bit of the Q5 levels). */
SDN_INLINE __m256i add_bit4(__m256i v, uint32_t qh) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    return _mm256_mask_add_epi8(v, (__mmask32)qh, v, _mm256_set1_epi8(16));
#else
    return _mm256_or_si256(v, _mm256_and_si256(sdn_bits_to_bytes(qh), _mm256_set1_epi8(16)));
#endif
}

/* Q4_0/Q4_1 in the offset form: the 16 packed bytes in both halves, masked to the low
 * nibbles (elements 0..15) and to the high nibbles left in place (elements 16..31, stored as
 * 16 * level). The factor 16 is exact in the integer dot product and comes off in the float
 * scale of lanes 4..7 (dx / 16, exact for any dx above 2^-122), saving the shift of a nibble
 * unpack. */
#define NIB16 (OFFSET_FORM)
SDN_INLINE __m256i nibbles_x16(const uint8_t *p) {
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
    return _mm256_and_si256(v, _mm256_setr_epi64x(0x0F0F0F0F0F0F0F0FLL, 0x0F0F0F0F0F0F0F0FLL,
                                                  (long long)0xF0F0F0F0F0F0F0F0ULL, (long long)0xF0F0F0F0F0F0F0F0ULL));
}

/* The fp16 at p in lane 0, zeros in lanes 1..7. */
SDN_INLINE __m256 lane0(const void *p) {
    return _mm256_zextps128_ps256(_mm_load_ss(&sdn_f16_table[sdn_le16(p)]));
}

/* Unpack block `blk` to 32 weight levels (unsigned in the offset form and for the affine
 * types, signed otherwise), its scale and (affine types) min. */
SDN_INLINE __m256i unpack32(uint32_t wtype, const uint8_t *blk, __m256 *d, __m256 *m) {
    *d = sdn_h2f_bcast(blk);
    switch (wtype) {
    case SDN_TYPE_Q8_0: {
        __m256i v = _mm256_loadu_si256((const __m256i *)(blk + 2));
        return OFFSET_FORM ? _mm256_xor_si256(v, _mm256_set1_epi8((char)0x80)) : v;
    }
    case SDN_TYPE_Q4_0:
        if (NIB16) return nibbles_x16(blk + 2);
        return _mm256_sub_epi8(sdn_nibbles32(blk + 2), _mm256_set1_epi8(8));
    case SDN_TYPE_Q5_0: {
        const uint32_t qh = sdn_le32(blk + 2);
        const __m256i v = sdn_nibbles32(blk + 6);
        if (OFFSET_FORM) return add_bit4(v, qh);
        /* q - 16 = nibble when the 5th bit is set, nibble - 16 = nibble | 0xF0 when it is not */
        return _mm256_or_si256(v, _mm256_andnot_si256(sdn_bits_to_bytes(qh), _mm256_set1_epi8((char)0xF0)));
    }
    case SDN_TYPE_Q4_1: *m = lane0(blk + 2); return NIB16 ? nibbles_x16(blk + 4) : sdn_nibbles32(blk + 4);
    default: /* Q5_1 */
        *m = lane0(blk + 2);
        return add_bit4(sdn_nibbles32(blk + 8), sdn_le32(blk + 4));
    }
}

SDN_INLINE void qtile(uint32_t wtype, const int TW, const int TX, const uint8_t *W, size_t row_bytes, int64_t in,
                      const char *act, size_t stride, int64_t o, int r, float *Y, int64_t ldy) {
    const int affine = wtype == SDN_TYPE_Q4_1 || wtype == SDN_TYPE_Q5_1;
    const int off = OFFSET_FORM ? level_offset(wtype) : 0;
    const int signform = !OFFSET_FORM && !affine;
    const int x16 = NIB16 && (wtype == SDN_TYPE_Q4_0 || wtype == SDN_TYPE_Q4_1);
    /* offsets per byte: lanes of the high nibbles stored x16 carry a x16 offset */
    const __m256i offv = x16 ? _mm256_setr_epi64x(0x0808080808080808LL, 0x0808080808080808LL,
                                                  (long long)0x8080808080808080ULL, (long long)0x8080808080808080ULL)
                             : _mm256_set1_epi8((char)off);
    const __m256 dxs = _mm256_setr_ps(1, 1, 1, 1, 0.0625f, 0.0625f, 0.0625f, 0.0625f);
    const size_t bb = wtype == SDN_TYPE_Q8_0   ? 34
                      : wtype == SDN_TYPE_Q4_0 ? 18
                      : wtype == SDN_TYPE_Q4_1 ? 20
                      : wtype == SDN_TYPE_Q5_0 ? 22
                                               : 24;
    const int64_t nb = in / 32;
    const uint8_t *w[4];
    const int8_t *xq[4];
    const float *xd[4], *xs[4];
    __m256 acc[4][4];
    SDN_UNROLL
    for (int i = 0; i < TW; i++) w[i] = W + (size_t)(o + i) * row_bytes;
    SDN_UNROLL
    for (int j = 0; j < TX; j++) {
        const char *row = act + (size_t)(r + j) * stride;
        xq[j] = sdn_act_q(row);
        xd[j] = sdn_act_d(row, in);
        xs[j] = sdn_act_s(row, in);
    }
    SDN_UNROLL
    for (int i = 0; i < TW; i++)
        SDN_UNROLL
        for (int j = 0; j < TX; j++) {
            acc[i][j] = _mm256_setzero_ps();
        }
    for (int64_t b = 0; b < nb; b++) {
        __m256i wv[4], aw[4];
        __m256 vdw[4], mw[4];
        SDN_UNROLL
        for (int i = 0; i < TW; i++) {
            sdn_prefetch(w[i] + SDN_PF_TILES * TW * row_bytes + b * bb);
            wv[i] = unpack32(wtype, w[i] + b * bb, &vdw[i], &mw[i]);
            if (signform) aw[i] = _mm256_sign_epi8(wv[i], wv[i]);
        }
        SDN_UNROLL
        for (int j = 0; j < TX; j++) {
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(xq[j] + 32 * b));
            __m256 vdx = _mm256_broadcast_ss(xd[j] + b);
            if (x16) vdx = _mm256_mul_ps(vdx, dxs); /* exact: a power of two */
            __m256i negc = _mm256_setzero_si256();
            if (off) negc = _mm256_sub_epi32(negc, sdn_dot_u8s8(offv, xv));
            SDN_UNROLL
            for (int i = 0; i < TW; i++) {
                const __m256i isum = signform ? sdn_dot_u8s8(aw[i], _mm256_sign_epi8(xv, wv[i]))
                                              : sdn_dpbusd(negc, wv[i], xv);
                acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(vdw[i], vdx), acc[i][j]);
                if (affine) acc[i][j] = _mm256_fmadd_ps(mw[i], _mm256_broadcast_ss(xs[j] + b), acc[i][j]);
            }
        }
    }
    SDN_UNROLL
    for (int j = 0; j < TX; j++)
        SDN_UNROLL
        for (int i = 0; i < TW; i++)
            Y[(size_t)(r + j) * ldy + o + i] = sdn_hsum8(acc[i][j]);
}

#define QTILE_FN(name, T, TW, TX)                                                                                    \
    static void name(const uint8_t *W, size_t rb, int64_t in, const char *act, size_t st, int64_t o, int r,       \
                     float *Y, int64_t ldy) {                                                                       \
        qtile(T, TW, TX, W, rb, in, act, st, o, r, Y, ldy);                                                         \
    }
#define QTILE_SET(pfx, T)                                                                                           \
    QTILE_FN(pfx##_4x1, T, 4, 1)                                                                                    \
    QTILE_FN(pfx##_4x2, T, 4, 2)                                                                                    \
    QTILE_FN(pfx##_4x3, T, 4, 3)                                                                                    \
    QTILE_FN(pfx##_4x4, T, 4, 4)                                                                                    \
    QTILE_FN(pfx##_1x1, T, 1, 1)                                                                                    \
    QTILE_FN(pfx##_1x2, T, 1, 2)                                                                                    \
    QTILE_FN(pfx##_1x3, T, 1, 3)                                                                                    \
    QTILE_FN(pfx##_1x4, T, 1, 4)                                                                                    \
    static const qtile_fn pfx##_tiles[2][4] = {{pfx##_1x1, pfx##_1x2, pfx##_1x3, pfx##_1x4},                        \
                                               {pfx##_4x1, pfx##_4x2, pfx##_4x3, pfx##_4x4}};

typedef void (*qtile_fn)(const uint8_t *, size_t, int64_t, const char *, size_t, int64_t, int, float *, int64_t);

QTILE_SET(q8_0, SDN_TYPE_Q8_0)
QTILE_SET(q4_0, SDN_TYPE_Q4_0)
QTILE_SET(q5_0, SDN_TYPE_Q5_0)
QTILE_SET(q4_1, SDN_TYPE_Q4_1)
QTILE_SET(q5_1, SDN_TYPE_Q5_1)

void SDN_KFN(sdn_matmul_q32)(uint32_t wtype, const void *W, size_t row_bytes, int64_t in, const void *act, int n,
                         float *Y, int64_t ldy, int64_t o0, int64_t o1) {
    const qtile_fn(*t)[4];
    switch (wtype) {
    case SDN_TYPE_Q8_0: t = q8_0_tiles; break;
    case SDN_TYPE_Q4_0: t = q4_0_tiles; break;
    case SDN_TYPE_Q5_0: t = q5_0_tiles; break;
    case SDN_TYPE_Q4_1: t = q4_1_tiles; break;
    default: t = q5_1_tiles; break;
    }
    const size_t stride = sdn_act_row_stride(wtype, in);
    int64_t o = o0;
    for (; o + 4 <= o1; o += 4)
        for (int r = 0; r < n; r += 4) t[1][(n - r < 4 ? n - r : 4) - 1](W, row_bytes, in, act, stride, o, r, Y, ldy);
    for (; o < o1; o++)
        for (int r = 0; r < n; r += 4) t[0][(n - r < 4 ? n - r : 4) - 1](W, row_bytes, in, act, stride, o, r, Y, ldy);
}

#endif
