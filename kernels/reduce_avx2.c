/* reduce_avx2.c - SIMD versions of the row reductions of kernels/reduce.h, compiled once per x86
 * variant (avx2, avx2vnni, avx512; CMakeLists.txt, SDN_KFN of kernels/matmul_internal.h) and
 * chosen at run time by kernels/reduce.c. The avx512 variant works on 16 lanes with masked
 * tails, the others on 8 lanes with scalar tails.
 *
 * They return exactly what the scalar loops of reduce.h return:
 *   argmax: x[0] is not NaN here (reduce.c answers 0 itself), so the answer is the first index
 *     whose value == the largest non-NaN value. One pass takes that maximum: max_ps(v, m)
 *     returns m when v is NaN, so NaNs never enter it, and equal values (+0, -0) give the same
 *     == afterwards whatever their order. A second pass finds the first element == it and stops
 *     there.
 *   top-k: a block of lanes is handed to the scalar step (sdn_topk_push, reduce_internal.h)
 *     lane by lane, in index order, unless every lane would leave the loop's state unchanged:
 *     v > top_v always does; once the arrays are full (m == k, thr = cv[k-1]) so does every v
 *     that is not > thr (v < thr: the first test; v == thr: it comes after cv[k-1] in index
 *     order; NaN v or NaN thr: sdn_topk_before is false). The state only gets stricter as the
 *     loop goes (thr never falls once the arrays are full), so a lane mask taken at the start
 *     of a block is a superset of the lanes that change it. */
#include "kernels/matmul_internal.h"

#ifdef SDN_MATMUL_AVX2
#include <immintrin.h>

#include "kernels/reduce_internal.h"

#ifdef __AVX512F__

int32_t SDN_KFN(sdn_argmax_f32)(const float *x, int n) {
    const __m512 x0 = _mm512_set1_ps(x[0]);
    __m512 m0 = x0, m1 = x0, m2 = x0, m3 = x0;
    int i = 0;
    for (; n - i >= 64; i += 64) {
        m0 = _mm512_max_ps(_mm512_loadu_ps(x + i), m0);
        m1 = _mm512_max_ps(_mm512_loadu_ps(x + i + 16), m1);
        m2 = _mm512_max_ps(_mm512_loadu_ps(x + i + 32), m2);
        m3 = _mm512_max_ps(_mm512_loadu_ps(x + i + 48), m3);
    }
    for (; n - i >= 16; i += 16) m0 = _mm512_max_ps(_mm512_loadu_ps(x + i), m0);
    if (i < n) /* lanes past the end keep m1's values */
        m1 = _mm512_max_ps(_mm512_mask_loadu_ps(m1, (__mmask16)((1u << (n - i)) - 1), x + i), m1);
    const float mx = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
    const __m512 mv = _mm512_set1_ps(mx);
    for (i = 0; n - i >= 64; i += 64) {
        const uint64_t e = (uint64_t)_mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), mv, _CMP_EQ_OQ) |
                           (uint64_t)_mm512_cmp_ps_mask(_mm512_loadu_ps(x + i + 16), mv, _CMP_EQ_OQ) << 16 |
                           (uint64_t)_mm512_cmp_ps_mask(_mm512_loadu_ps(x + i + 32), mv, _CMP_EQ_OQ) << 32 |
                           (uint64_t)_mm512_cmp_ps_mask(_mm512_loadu_ps(x + i + 48), mv, _CMP_EQ_OQ) << 48;
        if (e) return i + __builtin_ctzll(e);
    }
    for (; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        const __mmask16 e = _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, x + i), mv, _CMP_EQ_OQ);
        if (e) return i + __builtin_ctz(e);
    }
    return 0; /* not reached: mx is the value of an element */
}

/* The lanes of mask c (bit l: element i + l), in index order, through the scalar step. */
static inline void push_lanes(const float *x, int i, uint64_t c, sdn_topk_state *s) {
    for (; c; c &= c - 1) {
        const int t = i + __builtin_ctzll(c);
        sdn_topk_push(s, x[t], t);
    }
}

void SDN_KFN(sdn_topk_scan)(const float *x, int n, sdn_topk_state *s) {
    const __m512 tv = _mm512_set1_ps(s->top_v);
    __m512 thr = _mm512_set1_ps(s->thr);
    __mmask16 open = s->m < s->k ? 0xFFFF : 0; /* not full: any lane not > top_v may be taken */
/* lanes of v that may change the state: not > top_v, and > thr unless the arrays have room */
#define CAND(k, v) _mm512_mask_cmp_ps_mask((__mmask16)((k) & (_mm512_cmp_ps_mask(v, thr, _CMP_GT_OQ) | open)), v, tv, _CMP_NGT_UQ)
    int i = 0;
    for (; n - i >= 64; i += 64) {
        const uint64_t c = (uint64_t)CAND(0xFFFF, _mm512_loadu_ps(x + i)) |
                           (uint64_t)CAND(0xFFFF, _mm512_loadu_ps(x + i + 16)) << 16 |
                           (uint64_t)CAND(0xFFFF, _mm512_loadu_ps(x + i + 32)) << 32 |
                           (uint64_t)CAND(0xFFFF, _mm512_loadu_ps(x + i + 48)) << 48;
        if (c) {
            push_lanes(x, i, c, s);
            thr = _mm512_set1_ps(s->thr);
            open = s->m < s->k ? 0xFFFF : 0;
        }
    }
    for (; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        const __mmask16 c = CAND(k, _mm512_maskz_loadu_ps(k, x + i));
        if (c) {
            push_lanes(x, i, c, s);
            thr = _mm512_set1_ps(s->thr);
            open = s->m < s->k ? 0xFFFF : 0;
        }
    }
#undef CAND
}

#else /* AVX2: 8 lanes */

/* The largest of 8 non-NaN lanes. */
static inline float hmax8(__m256 v) {
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    return _mm_cvtss_f32(h);
}

static inline uint32_t eq8(const float *p, __m256 mv) {
    return (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(p), mv, _CMP_EQ_OQ));
}

int32_t SDN_KFN(sdn_argmax_f32)(const float *x, int n) {
    const __m256 x0 = _mm256_set1_ps(x[0]);
    __m256 m0 = x0, m1 = x0, m2 = x0, m3 = x0;
    int i = 0;
    for (; n - i >= 32; i += 32) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
        m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
        m2 = _mm256_max_ps(_mm256_loadu_ps(x + i + 16), m2);
        m3 = _mm256_max_ps(_mm256_loadu_ps(x + i + 24), m3);
    }
    for (; n - i >= 8; i += 8) m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
    float mx = hmax8(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
    for (; i < n; i++)
        if (x[i] > mx) mx = x[i];
    const __m256 mv = _mm256_set1_ps(mx);
    for (i = 0; n - i >= 32; i += 32) {
        const uint32_t e = eq8(x + i, mv) | eq8(x + i + 8, mv) << 8 | eq8(x + i + 16, mv) << 16 | eq8(x + i + 24, mv) << 24;
        if (e) return i + __builtin_ctz(e);
    }
    for (; n - i >= 8; i += 8) {
        const uint32_t e = eq8(x + i, mv);
        if (e) return i + __builtin_ctz(e);
    }
    for (; i < n; i++)
        if (x[i] == mx) return i;
    return 0; /* not reached: mx is the value of an element */
}

/* Lanes of the 8 floats at p that may change the state: not > top_v, and > thr unless the
 * arrays have room (open all ones). */
static inline uint32_t cand8(const float *p, __m256 tv, __m256 thr, __m256 open) {
    const __m256 v = _mm256_loadu_ps(p);
    const __m256 c = _mm256_and_ps(_mm256_cmp_ps(v, tv, _CMP_NGT_UQ), _mm256_or_ps(_mm256_cmp_ps(v, thr, _CMP_GT_OQ), open));
    return (uint32_t)_mm256_movemask_ps(c);
}

void SDN_KFN(sdn_topk_scan)(const float *x, int n, sdn_topk_state *s) {
    const __m256 tv = _mm256_set1_ps(s->top_v), ones = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    __m256 thr = _mm256_set1_ps(s->thr);
    __m256 open = s->m < s->k ? ones : _mm256_setzero_ps();
    int i = 0;
    for (; n - i >= 32; i += 32) {
        uint32_t c = cand8(x + i, tv, thr, open) | cand8(x + i + 8, tv, thr, open) << 8 |
                     cand8(x + i + 16, tv, thr, open) << 16 | cand8(x + i + 24, tv, thr, open) << 24;
        if (!c) continue;
        for (; c; c &= c - 1) {
            const int t = i + __builtin_ctz(c);
            sdn_topk_push(s, x[t], t);
        }
        thr = _mm256_set1_ps(s->thr);
        open = s->m < s->k ? ones : _mm256_setzero_ps();
    }
    for (; i < n; i++) sdn_topk_push(s, x[i], i);
}

#endif /* __AVX512F__ */
#endif /* SDN_MATMUL_AVX2 */
