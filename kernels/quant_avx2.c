/* quant_avx2.c - SIMD dequantizers of kernels/quant.c's sdn_dequantize_row, compiled once per
 * SIMD variant (matmul_internal.h, SDN_KFN). They repeat the scalar float operations per lane
 * ((float)q * d, then + m or - m), so they produce exactly the bits of sdn_dequantize_row_ref
 * (tested in test_quant for every path the machine has). */
#include "kernels/matmul_internal.h"

#ifdef SDN_MATMUL_AVX2
#include "common/sdn_util.h"
#include "kernels/matmul_avx2.h"
#include "kernels/quant_blocks.h"
static void deq_f16(const uint16_t *s, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++) y[i] = sdn_fp16_to_fp32(s[i]);
}

static void deq_bf16(const uint16_t *s, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(
                                    _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i))), 16)));
    for (; i < n; i++) y[i] = sdn_bf16_to_fp32(s[i]);
}

/* AVX2 versions of the dequantizers: the same float operations on 8 lanes at a time
 * ((float)q * d, then + m or - m), so they produce exactly the bits of the scalar code. */

/* 32 int8 levels -> 32 floats (levels signed or, with `uns`, unsigned) * d (+ m) */
SDN_INLINE void store32(float *y, __m256i lv, int uns, __m256 d, __m256 m, int add_m) {
    SDN_UNROLL
    for (int k = 0; k < 4; k++) {
        const __m128i b = k < 2 ? _mm256_castsi256_si128(lv) : _mm256_extracti128_si256(lv, 1);
        const __m128i b8 = (k & 1) ? _mm_srli_si128(b, 8) : b;
        const __m256i w = uns ? _mm256_cvtepu8_epi32(b8) : _mm256_cvtepi8_epi32(b8);
        __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(w), d);
        if (add_m) v = _mm256_add_ps(v, m);
        _mm256_storeu_ps(y + 8 * k, v);
    }
}

static void deq32_simd(uint32_t type, const uint8_t *src, float *y, int64_t nb) {
    const size_t bb = sdn_type_block_bytes(type);
    for (int64_t i = 0; i < nb; i++, src += bb, y += 32) {
        const __m256 d = _mm256_set1_ps(sdn_fp16_to_fp32(sdn_le16(src)));
        switch (type) {
        case SDN_TYPE_Q8_0: store32(y, _mm256_loadu_si256((const __m256i *)(src + 2)), 0, d, d, 0); break;
        case SDN_TYPE_Q4_0:
            store32(y, _mm256_sub_epi8(sdn_nibbles32(src + 2), _mm256_set1_epi8(8)), 0, d, d, 0);
            break;
        case SDN_TYPE_Q5_0: {
            __m256i hb = _mm256_and_si256(sdn_bits_to_bytes(sdn_le32(src + 2)), _mm256_set1_epi8(16));
            __m256i lv = _mm256_sub_epi8(_mm256_or_si256(sdn_nibbles32(src + 6), hb), _mm256_set1_epi8(16));
            store32(y, lv, 0, d, d, 0);
            break;
        }
        case SDN_TYPE_Q4_1:
            store32(y, sdn_nibbles32(src + 4), 1, d, _mm256_set1_ps(sdn_fp16_to_fp32(sdn_le16(src + 2))), 1);
            break;
        default: { /* Q5_1 */
            __m256i hb = _mm256_and_si256(sdn_bits_to_bytes(sdn_le32(src + 4)), _mm256_set1_epi8(16));
            store32(y, _mm256_or_si256(sdn_nibbles32(src + 8), hb), 1, d, _mm256_set1_ps(sdn_fp16_to_fp32(sdn_le16(src + 2))), 1);
            break;
        }
        }
    }
}

/* Q4_K (q5 = 0) and Q5_K (q5 = 1): per 32-sub-block, d1 * q - m1 with d1 = d*sc, m1 = dmin*m */
static void deq_k45_simd(const uint8_t *src, float *y, int64_t nb, int q5) {
    const size_t bb = q5 ? 176 : 144;
    const __m256i m4 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < nb; i++, src += bb) {
        const float d = sdn_fp16_to_fp32(sdn_le16(src)), dmin = sdn_fp16_to_fp32(sdn_le16(src + 2));
        uint8_t sc[8], m[8];
        sdn_k4_scale_min(src + 4, sc, m);
        __m256i qh = q5 ? _mm256_loadu_si256((const __m256i *)(src + 16)) : _mm256_setzero_si256();
        for (int c = 0; c < 4; c++, y += 64) {
            const __m256i qs = _mm256_loadu_si256((const __m256i *)(src + (q5 ? 48 : 16) + 32 * c));
            __m256i lo = _mm256_and_si256(qs, m4), hi = _mm256_and_si256(_mm256_srli_epi16(qs, 4), m4);
            if (q5) {
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(qh, one), 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 1), one), 4));
                qh = _mm256_srli_epi16(qh, 2);
            }
            const __m256 d1 = _mm256_set1_ps(d * sc[2 * c]), m1 = _mm256_set1_ps(dmin * m[2 * c]);
            const __m256 d2 = _mm256_set1_ps(d * sc[2 * c + 1]), m2 = _mm256_set1_ps(dmin * m[2 * c + 1]);
            const __m256 neg = _mm256_set1_ps(-0.0f);
            /* x - m == x + (-m) exactly */
            store32(y, lo, 1, d1, _mm256_xor_ps(m1, neg), 1);
            store32(y + 32, hi, 1, d2, _mm256_xor_ps(m2, neg), 1);
        }
    }
}

static void deq_q6_K_simd(const uint8_t *src, float *y, int64_t nb) {
    const __m256i m4 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3), o32 = _mm256_set1_epi8(32);
    for (int64_t i = 0; i < nb; i++, src += 210) {
        const float d = sdn_fp16_to_fp32(sdn_le16(src + 208));
        const int8_t *sc = (const int8_t *)(src + 192);
        for (int h = 0; h < 2; h++) {
            const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(src + 64 * h));
            const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(src + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(src + 128 + 32 * h));
            for (int g = 0; g < 4; g++, y += 32) {
                const __m256i l4 = g == 0 ? _mm256_and_si256(ql0, m4)
                                   : g == 1 ? _mm256_and_si256(ql1, m4)
                                   : g == 2 ? _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4)
                                            : _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4);
                const __m256i h2 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), m3);
                const __m256i q = _mm256_sub_epi8(_mm256_or_si256(l4, _mm256_slli_epi16(h2, 4)), o32);
                /* elements 0..15 use scale 8h+2g, 16..31 scale 8h+2g+1: (d*sc)*q as the scalar code */
                const __m256 s0 = _mm256_set1_ps(d * (float)sc[8 * h + 2 * g]);
                const __m256 s1 = _mm256_set1_ps(d * (float)sc[8 * h + 2 * g + 1]);
                for (int k = 0; k < 4; k++) {
                    const __m128i b = k < 2 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
                    const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32((k & 1) ? _mm_srli_si128(b, 8) : b));
                    _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(k < 2 ? s0 : s1, v));
                }
            }
        }
    }
}

int SDN_KFN(sdn_dequantize_row)(uint32_t type, const void *src, float *dst, int64_t n) {
    const int be = sdn_type_block_elems(type);
    if (be <= 0 || n <= 0 || n % be) return 0;
    const int64_t nb = n / be;
    switch (type) {
    case SDN_TYPE_F16: deq_f16(src, dst, n); return 1;
    case SDN_TYPE_BF16: deq_bf16(src, dst, n); return 1;
    case SDN_TYPE_Q4_0:
    case SDN_TYPE_Q4_1:
    case SDN_TYPE_Q5_0:
    case SDN_TYPE_Q5_1:
    case SDN_TYPE_Q8_0: deq32_simd(type, src, dst, nb); return 1;
    case SDN_TYPE_Q4_K: deq_k45_simd(src, dst, nb, 0); return 1;
    case SDN_TYPE_Q5_K: deq_k45_simd(src, dst, nb, 1); return 1;
    case SDN_TYPE_Q6_K: deq_q6_K_simd(src, dst, nb); return 1;
    default: return 0;
    }
}
#endif
