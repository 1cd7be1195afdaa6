/* matmul_act_avx2.c - AVX2 preparation of activation rows (layouts: matmul_internal.h).
 *
 * Computes exactly the float operations of the portable preparation (amax with NaN ignored,
 * d = amax/127, id = 127/amax, q = rint(clamp(x*id, -127, 127)) with NaN -> -127), so both
 * write identical bytes; only the loops are vectorized. */
#include "kernels/matmul_internal.h"

#ifdef SDN_MATMUL_AVX2
#include <string.h>

#include "kernels/matmul_avx2.h"

/* Fill sdn_f16_table with the F16C conversion (called once by sdn_kernels_setup, never on a
 * CPU without F16C). */
void SDN_KFN(sdn_f16_table_fill)(void) {
    for (int h = 0; h < 65536; h++) sdn_f16_table[h] = _cvtsh_ss((unsigned short)h);
}

/* max |x| over len floats (len a multiple of 32). max_ps(a, m) returns m when a is NaN. */
SDN_INLINE float amax_block(const float *x, int len) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < len; i += 8) m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), absmask), m);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    return _mm_cvtss_f32(h);
}

SDN_INLINE __m256i quant8(const float *x, __m256 id) {
    const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x), id);
    v = _mm256_min_ps(_mm256_max_ps(v, lo), hi); /* max_ps(NaN, lo) = lo */
    return _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* Quantize 32 floats to q[32]; returns the int32 lane sums of elements 0..15 in *lo16 and
 * 16..31 in *hi16 (both exact). */
SDN_INLINE void quant32(const float *x, __m256 id, int8_t *q, int *lo16, int *hi16) {
    __m256i c0 = quant8(x, id), c1 = quant8(x + 8, id), c2 = quant8(x + 16, id), c3 = quant8(x + 24, id);
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(c0, c1), _mm256_packs_epi32(c2, c3));
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)q, p);
    int t[8];
    _mm256_storeu_si256((__m256i *)t, _mm256_add_epi32(c0, c1));
    *lo16 = t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
    _mm256_storeu_si256((__m256i *)t, _mm256_add_epi32(c2, c3));
    *hi16 = t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}

void SDN_KFN(sdn_act_prepare)(uint32_t wtype, const float *X, int64_t ldx, int n, int64_t in, void *act) {
    const size_t stride = sdn_act_row_stride(wtype, in);
    if (!stride) return;
    const int fam = sdn_act_family(wtype);
    for (int r = 0; r < n; r++) {
        const float *x = X + (size_t)r * ldx;
        char *row = (char *)act + (size_t)r * stride;
        if (fam == SDN_ACT_F32) {
            memcpy(row, x, (size_t)in * sizeof(float));
            memset(row + in * 4, 0, stride - (size_t)in * 4);
            continue;
        }
        int8_t *q = (int8_t *)row;
        float *d = (float *)(row + in);
        if (fam == SDN_ACT_Q32) {
            const int64_t nb = in / 32;
            float *s = d + nb;
            int32_t *qsum = (int32_t *)(s + nb);
            for (int64_t b = 0; b < nb; b++) {
                const float amax = amax_block(x + 32 * b, 32);
                const float id = amax > 0 ? 127.0f / amax : 0.0f;
                int lo, hi;
                d[b] = amax / 127.0f;
                quant32(x + 32 * b, _mm256_set1_ps(id), q + 32 * b, &lo, &hi);
                s[b] = d[b] * (float)(lo + hi);
                qsum[b] = lo + hi;
            }
            memset(row + in + nb * 12, 0, stride - (size_t)(in + nb * 12));
        } else {
            const int64_t nb = in / 256;
            int16_t *bsum = (int16_t *)(row + in + nb * 4);
            for (int64_t b = 0; b < nb; b++) {
                const float amax = amax_block(x + 256 * b, 256);
                const __m256 id = _mm256_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
                d[b] = amax / 127.0f;
                for (int k = 0; k < 8; k++) {
                    int lo, hi;
                    quant32(x + 256 * b + 32 * k, id, q + 256 * b + 32 * k, &lo, &hi);
                    bsum[16 * b + 2 * k] = (int16_t)lo;
                    bsum[16 * b + 2 * k + 1] = (int16_t)hi;
                }
            }
            size_t used = (size_t)in + (size_t)nb * 4 + (size_t)(in / 16) * 2;
            memset(row + used, 0, stride - used);
        }
    }
}

#endif
