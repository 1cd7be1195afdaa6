/* attention_avx2.c - the per-tile attention kernels on x86 SIMD, compiled once per variant
 * (CMakeLists.txt: avx2, avx2vnni, avx512, and avx512bf16 for this file alone; SDN_KFN names
 * the exported functions). They
 * compute exactly the arithmetic attention/attention_kern.h states, lane by lane, so every
 * variant and the portable C give the same bits; what they add is width and reuse:
 *   scores  keys stored transposed per tile, so a vector holds one element of 8 or 16
 *           positions: each key vector (converted from F16 once) serves a block of queries,
 *           each lane a sequential FMA chain over the head dimension; q8 keys take 4 elements
 *           per 32-bit lane with VPDPBUSD (AVX-512 VNNI, AVX-VNNI) or, without VNNI, with
 *           sign-and-absolute VPMADDUBSW + VPMADDWD, exact integer sums either way
 *   update  max, rescale, exponential and pairwise sum on 64-lane vectors; the value rows of
 *           the visible lanes are converted once and accumulated into a block of queries whose
 *           outputs stay in registers; bf16 values go by pairs of lanes, and with AVX512_BF16
 *           a tile of many queries is transposed in pairs once (sdn_att_t2) for VDPBF16PS.
 * The head dimension must be a multiple of the vector width (attention.c falls back to the
 * portable kernels otherwise). */
#include <immintrin.h>

#include "attention/attention_kern.h"
#include "kernels/matmul_internal.h"

/* The next tile's keys and values are prefetched into L2 (not L1) while this one is computed:
 * each L1 prefetch holds a fill buffer until its line arrives, and a tile is 128-256 lines.
 * Measured in one process against _MM_HINT_T0, in alternating order (bench-attention, f16,
 * 800-8,192 positions): one row 3-8% faster, 4 rows 2-4%; q8 keys 0-4% with 2 threads, the
 * q8 values' transposition 1-8%. */
#define PFX(a) _mm_prefetch(a, _MM_HINT_T1)

#if defined(__AVX512F__)
#define W 16
typedef __m512 vf;
#define vf_load(p) _mm512_loadu_ps(p)
#define vf_store(p, v) _mm512_storeu_ps(p, v)
#define vf_set1(x) _mm512_set1_ps(x)
#define vf_zero() _mm512_setzero_ps()
#define vf_fma(a, b, c) _mm512_fmadd_ps(a, b, c)
#define vf_fnma(a, b, c) _mm512_fnmadd_ps(a, b, c)
#define vf_mul(a, b) _mm512_mul_ps(a, b)
#define vf_add(a, b) _mm512_add_ps(a, b)
#define vf_sub(a, b) _mm512_sub_ps(a, b)
#define vf_max(a, b) _mm512_max_ps(a, b)
#define vf_min(a, b) _mm512_min_ps(a, b)
#define vf_f16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p)))
#define vf_i8(p) _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p))))
#define vf_bf16(p) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(p))), 16))
#define vf_round(v) _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define vf_pow2(k) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23))
/* lanes of v where bit i of m is set, 0 or -inf elsewhere */
#define vf_keep0(m, v) _mm512_maskz_mov_ps((__mmask16)(m), v)
#define vf_keepninf(m, v) _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), (__mmask16)(m), v)
#define QB_SCORES 6 /* queries per score block: 6 x 4 accumulators + 4 key vectors */
#define QB_Q8 3     /* q8 keys: 3 x (4 integer + 4 float accumulators) + 4 key vectors */
#define QB_PV 6
static inline __m256 vf_fold8(vf v) { return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)); }
static inline float vf_hmax(vf v) { return _mm512_reduce_max_ps(v); }
#else
#define W 8
typedef __m256 vf;
#define vf_load(p) _mm256_loadu_ps(p)
#define vf_store(p, v) _mm256_storeu_ps(p, v)
#define vf_set1(x) _mm256_set1_ps(x)
#define vf_zero() _mm256_setzero_ps()
#define vf_fma(a, b, c) _mm256_fmadd_ps(a, b, c)
#define vf_fnma(a, b, c) _mm256_fnmadd_ps(a, b, c)
#define vf_mul(a, b) _mm256_mul_ps(a, b)
#define vf_add(a, b) _mm256_add_ps(a, b)
#define vf_sub(a, b) _mm256_sub_ps(a, b)
#define vf_max(a, b) _mm256_max_ps(a, b)
#define vf_min(a, b) _mm256_min_ps(a, b)
#define vf_f16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p)))
#define vf_i8(p) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(p))))
#define vf_bf16(p) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p))), 16))
#define vf_round(v) _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define vf_pow2(k) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23))
static inline __m256 mask8(unsigned m) {
    const __m256i bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)m), bits), bits));
}
#define vf_keep0(m, v) _mm256_and_ps(mask8(m), v)
#define vf_keepninf(m, v) _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), v, mask8(m))
#define QB_SCORES 2 /* 16 registers: 2 x 4 accumulators + 4 key vectors */
#define QB_Q8 1
#define QB_PV 2
static inline __m256 vf_fold8(vf v) { return v; }
static inline float vf_hmax(vf v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}
#endif
#define NV (64 / W) /* vectors per tile */

#define INLINE static inline __attribute__((always_inline))

/* att_exp of every lane (attention_kern.h). */
INLINE vf vexp(vf x) {
    x = vf_max(x, vf_set1(-87.0f));
    const vf k = vf_round(vf_mul(x, vf_set1(1.44269504f)));
    const vf r = vf_fnma(k, vf_set1(0.69314718f), x);
    vf p = vf_set1(1.0f / 720);
    p = vf_fma(p, r, vf_set1(1.0f / 120));
    p = vf_fma(p, r, vf_set1(1.0f / 24));
    p = vf_fma(p, r, vf_set1(1.0f / 6));
    p = vf_fma(p, r, vf_set1(0.5f));
    p = vf_fma(p, r, vf_set1(1.0f));
    p = vf_fma(p, r, vf_set1(1.0f));
    return vf_mul(p, vf_pow2(k));
}

/* tsum64 of the NV vectors p (attention_kern.h): halves added down to 8 lanes, then 4, 2, 1. */
INLINE float tsum64(const vf *p) {
#if W == 16
    const vf w = vf_add(vf_add(p[0], p[2]), vf_add(p[1], p[3]));
#else
    const vf w = vf_add(vf_add(vf_add(p[0], p[4]), vf_add(p[2], p[6])), vf_add(vf_add(p[1], p[5]), vf_add(p[3], p[7])));
#endif
    const __m256 x = vf_fold8(w);
    __m128 y = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    y = _mm_add_ps(y, _mm_movehl_ps(y, y));
    y = _mm_add_ss(y, _mm_movehdup_ps(y));
    return _mm_cvtss_f32(y);
}

/* sdn_kv_bf16 of softmax weights (finite, not negative), back as floats: rounded to nearest
 * even in the upper 16 bits, 0 below 2^-30. */
INLINE vf vf_bf16w(vf p) {
#if W == 16 && defined(__AVX512BF16__)
    /* VCVTNEPS2BF16 rounds a normal float to nearest even, as sdn_kv_bf16 (a weight is 0 or at
     * least e^-87, normal); the weights below 2^-30 then cleared */
    const __m512i r = _mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(p)), 16);
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(p, _mm512_set1_ps(0x1p-30f), _CMP_GE_OQ), _mm512_castsi512_ps(r));
#elif W == 16
    const __m512i u = _mm512_castps_si512(p);
    const __m512i r = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1))), _mm512_set1_epi32((int)0xffff0000u));
    return _mm512_castsi512_ps(_mm512_maskz_mov_epi32(_mm512_cmpge_epu32_mask(u, _mm512_set1_epi32(0x30800000)), r));
#else
    const __m256i u = _mm256_castps_si256(p);
    const __m256i r = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1))), _mm256_set1_epi32((int)0xffff0000u));
    return _mm256_castsi256_ps(_mm256_and_si256(_mm256_cmpgt_epi32(u, _mm256_set1_epi32(0x307fffff)), r));
#endif
}

/* ------------------------------------------------------------------ scores ---- */

/* F32/F16 keys: lanes [l0, l0 + 4W) of nb queries (nb a constant after inlining). */
INLINE void scores_f_blk(const sdn_att_kt *t, const sdn_att_q *q, float *sc, int l0, const int nb, const uint8_t *pf) {
    vf acc[QB_SCORES][4];
    for (int b = 0; b < nb; b++)
        for (int c = 0; c < 4; c++) acc[b][c] = vf_zero();
    const int hd = t->hd;
    /* the next tile's keys (pf: once per tile): its bytes spread over this tile's d loop */
    const size_t pf_step = pf ? (t->pf_bytes / (size_t)hd + 63) / 64 * 64 : 0;
    if (t->tk == SDN_KV_F32) {
        const float *k = (const float *)t->k + l0;
        for (int d = 0; d < hd; d++, k += 64) {
            if (pf)
                for (size_t o = 0; o < pf_step; o += 64) PFX((const char *)pf + (size_t)d * pf_step + o);
            const vf k0 = vf_load(k), k1 = vf_load(k + W), k2 = vf_load(k + 2 * W), k3 = vf_load(k + 3 * W);
            for (int b = 0; b < nb; b++) {
                const vf qd = vf_set1(q[b].q[d]);
                acc[b][0] = vf_fma(qd, k0, acc[b][0]);
                acc[b][1] = vf_fma(qd, k1, acc[b][1]);
                acc[b][2] = vf_fma(qd, k2, acc[b][2]);
                acc[b][3] = vf_fma(qd, k3, acc[b][3]);
            }
        }
    } else {
        const uint16_t *k = (const uint16_t *)t->k + l0;
        for (int d = 0; d < hd; d++, k += 64) {
            if (pf)
                for (size_t o = 0; o < pf_step; o += 64) PFX((const char *)pf + (size_t)d * pf_step + o);
            const vf k0 = vf_f16(k), k1 = vf_f16(k + W), k2 = vf_f16(k + 2 * W), k3 = vf_f16(k + 3 * W);
            for (int b = 0; b < nb; b++) {
                const vf qd = vf_set1(q[b].q[d]);
                acc[b][0] = vf_fma(qd, k0, acc[b][0]);
                acc[b][1] = vf_fma(qd, k1, acc[b][1]);
                acc[b][2] = vf_fma(qd, k2, acc[b][2]);
                acc[b][3] = vf_fma(qd, k3, acc[b][3]);
            }
        }
    }
    for (int b = 0; b < nb; b++) {
        const vf s = vf_set1(q[b].qs);
        for (int c = 0; c < 4; c++) vf_store(sc + (size_t)b * 64 + l0 + c * W, vf_mul(acc[b][c], s));
    }
}

#if W == 16
typedef __m512i vi;
#define vi_zero() _mm512_setzero_si512()
#define vi_load(p) _mm512_loadu_si512((const void *)(p))
#define vi_set1(x) _mm512_set1_epi32(x)
#define vi_sub(a, b) _mm512_sub_epi32(a, b)
#define vi_cvt(v) _mm512_cvtepi32_ps(v)
#define vi_and(a, b) _mm512_and_si512(a, b)
#define vi_shl16(a) _mm512_slli_epi32(a, 16)
#define vi_castf(a) _mm512_castsi512_ps(a)
/* acc += sum over 4 bytes of (u8 k) * (s8 q) per 32-bit lane */
#define vi_dot(acc, k, q) _mm512_dpbusd_epi32(acc, k, q)
#define Q8_BIASED 1
#else
typedef __m256i vi;
#define vi_zero() _mm256_setzero_si256()
#define vi_load(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define vi_set1(x) _mm256_set1_epi32(x)
#define vi_sub(a, b) _mm256_sub_epi32(a, b)
#define vi_cvt(v) _mm256_cvtepi32_ps(v)
#define vi_and(a, b) _mm256_and_si256(a, b)
#define vi_shl16(a) _mm256_slli_epi32(a, 16)
#define vi_castf(a) _mm256_castsi256_ps(a)
#if defined(__AVXVNNI__)
#define vi_dot(acc, k, q) _mm256_dpbusd_avx_epi32(acc, k, q)
#define Q8_BIASED 1
#else
/* without VNNI: the stored byte minus 128 is the signed key; |k| * sign(q, k) pairs by
 * VPMADDUBSW (at most 2 * 128 * 127, no saturation), then pairs of pairs by VPMADDWD: the
 * exact sum of k * q, so the offset is not subtracted */
INLINE __m256i dot_nv(__m256i acc, __m256i ku, __m256i q) {
    const __m256i k = _mm256_xor_si256(ku, _mm256_set1_epi8((char)0x80));
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_abs_epi8(k), _mm256_sign_epi8(q, k));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}
#define vi_dot(acc, k, q) dot_nv(acc, k, q)
#define Q8_BIASED 0
#endif
#endif

/* Q8 keys: lanes [l0, l0 + 4W) of nb queries, block of 32 elements by block: each block's
 * exact int32 dot products, then scaled and summed into the float scores in block order. */
INLINE void scores_q8_blk(const sdn_att_kt *t, const sdn_att_q *q, float *sc, int l0, const int nb, const uint8_t *pf) {
    vf s[QB_Q8][4];
    for (int b = 0; b < nb; b++)
        for (int c = 0; c < 4; c++) s[b][c] = vf_zero(); /* (set by the first block) */
    const size_t pf_step = pf ? (t->pf_bytes / (size_t)(t->hd4 / 4) + 63) / 64 * 64 : 0;
    for (int kb = 0; kb < t->kblocks; kb++) {
        vi acc[QB_Q8][4];
        for (int b = 0; b < nb; b++)
            for (int c = 0; c < 4; c++) acc[b][c] = vi_zero();
        const int g0 = kb * (SDN_KV_KBLOCK / 4);
        const uint8_t *k = (const uint8_t *)t->k + (size_t)g0 * 64 * 4 + (size_t)l0 * 4;
        for (int g = g0; g < g0 + SDN_KV_KBLOCK / 4; g++, k += 64 * 4) {
            if (pf)
                for (size_t o = 0; o < pf_step; o += 64) PFX((const char *)pf + (size_t)g * pf_step + o);
            const vi k0 = vi_load(k), k1 = vi_load(k + 4 * W), k2 = vi_load(k + 8 * W), k3 = vi_load(k + 12 * W);
            for (int b = 0; b < nb; b++) {
                int32_t q4;
                memcpy(&q4, q[b].q8 + 4 * g, 4);
                const vi qv = vi_set1(q4);
                acc[b][0] = vi_dot(acc[b][0], k0, qv);
                acc[b][1] = vi_dot(acc[b][1], k1, qv);
                acc[b][2] = vi_dot(acc[b][2], k2, qv);
                acc[b][3] = vi_dot(acc[b][3], k3, qv);
            }
        }
        for (int b = 0; b < nb; b++) {
            const vf qs = vf_set1(q[b].q8s[kb]);
            for (int c = 0; c < 4; c++) {
                vi a = acc[b][c];
#if Q8_BIASED
                a = vi_sub(a, vi_set1(q[b].q8bias[kb]));
#endif
                const vf w = vf_mul(vf_f16(t->ks + (size_t)kb * 64 + l0 + c * W), qs), dot = vi_cvt(a);
                s[b][c] = kb ? vf_fma(dot, w, s[b][c]) : vf_mul(dot, w);
            }
        }
    }
    for (int b = 0; b < nb; b++)
        for (int c = 0; c < 4; c++) vf_store(sc + (size_t)b * 64 + l0 + c * W, s[b][c]);
}

/* BF16 keys ([d/2][64][2]: one pair of elements of a position per 32-bit lane): lanes
 * [l0, l0 + 4W) of nb queries, pair by pair, the odd element's product first. With
 * AVX512_BF16 one VDPBF16PS does both of a lane's steps (attention_kern.h: the same bits);
 * the other variants split each lane into its two BF16 halves and run the two FMAs. */
INLINE void scores_bf_blk(const sdn_att_kt *t, const sdn_att_q *q, float *sc, int l0, const int nb, const uint8_t *pf) {
    vf acc[QB_SCORES][4];
    for (int b = 0; b < nb; b++)
        for (int c = 0; c < 4; c++) acc[b][c] = vf_zero();
    const int np = (t->hd + 1) / 2;
    const size_t pf_step = pf ? (t->pf_bytes / (size_t)np + 63) / 64 * 64 : 0;
    const uint32_t *k = (const uint32_t *)t->k + l0;
    for (int g = 0; g < np; g++, k += 64) {
        if (pf)
            for (size_t o = 0; o < pf_step; o += 64) PFX((const char *)pf + (size_t)g * pf_step + o);
        const vi kv[4] = {vi_load(k), vi_load(k + W), vi_load(k + 2 * W), vi_load(k + 3 * W)};
#if W == 16 && defined(__AVX512BF16__)
        for (int b = 0; b < nb; b++) {
            uint32_t q2;
            memcpy(&q2, q[b].qb + 2 * g, 4);
            const __m512bh qv = (__m512bh)_mm512_set1_epi32((int)q2);
            for (int c = 0; c < 4; c++) acc[b][c] = _mm512_dpbf16_ps(acc[b][c], (__m512bh)kv[c], qv);
        }
#else
        for (int c = 0; c < 4; c++) {
            const vf ko = vi_castf(vi_and(kv[c], vi_set1((int)0xffff0000u))), ke = vi_castf(vi_shl16(kv[c]));
            for (int b = 0; b < nb; b++) {
                acc[b][c] = vf_fma(vf_set1(sdn_kv_b2f(q[b].qb[2 * g + 1])), ko, acc[b][c]);
                acc[b][c] = vf_fma(vf_set1(sdn_kv_b2f(q[b].qb[2 * g])), ke, acc[b][c]);
            }
        }
#endif
    }
    for (int b = 0; b < nb; b++) {
        const vf s = vf_set1(q[b].qs);
        for (int c = 0; c < 4; c++) vf_store(sc + (size_t)b * 64 + l0 + c * W, vf_mul(acc[b][c], s));
    }
}

void SDN_KFN(sdn_att_scores)(const sdn_att_kt *t, const sdn_att_q *q, int nq, float *sc) {
    for (int l0 = 0; l0 < 64; l0 += 4 * W)
        for (int i = 0; i < nq; i += QB_SCORES) {
            const int nb = nq - i < QB_SCORES ? nq - i : QB_SCORES;
            const uint8_t *pf = l0 == 0 && i == 0 ? t->pf : NULL;
            if (t->tk == SDN_KV_Q8) {
                for (int i8 = i; i8 < i + nb; i8 += QB_Q8) {
                    const int n8 = i + nb - i8 < QB_Q8 ? i + nb - i8 : QB_Q8;
                    const uint8_t *pf8 = i8 == i ? pf : NULL;
                    switch (n8) {
                    case 1: scores_q8_blk(t, q + i8, sc + (size_t)i8 * 64, l0, 1, pf8); break;
#if QB_Q8 > 2
                    case 2: scores_q8_blk(t, q + i8, sc + (size_t)i8 * 64, l0, 2, pf8); break;
#endif
                    default: scores_q8_blk(t, q + i8, sc + (size_t)i8 * 64, l0, QB_Q8, pf8); break;
                    }
                }
            } else if (t->tk == SDN_KV_BF16) {
                switch (nb) {
                case 1: scores_bf_blk(t, q + i, sc + (size_t)i * 64, l0, 1, pf); break;
#if QB_SCORES > 2
                case 2: scores_bf_blk(t, q + i, sc + (size_t)i * 64, l0, 2, pf); break;
                case 3: scores_bf_blk(t, q + i, sc + (size_t)i * 64, l0, 3, pf); break;
                case 4: scores_bf_blk(t, q + i, sc + (size_t)i * 64, l0, 4, pf); break;
                case 5: scores_bf_blk(t, q + i, sc + (size_t)i * 64, l0, 5, pf); break;
#endif
                default: scores_bf_blk(t, q + i, sc + (size_t)i * 64, l0, QB_SCORES, pf); break;
                }
            } else {
                switch (nb) {
                case 1: scores_f_blk(t, q + i, sc + (size_t)i * 64, l0, 1, pf); break;
#if QB_SCORES > 2
                case 2: scores_f_blk(t, q + i, sc + (size_t)i * 64, l0, 2, pf); break;
                case 3: scores_f_blk(t, q + i, sc + (size_t)i * 64, l0, 3, pf); break;
                case 4: scores_f_blk(t, q + i, sc + (size_t)i * 64, l0, 4, pf); break;
                case 5: scores_f_blk(t, q + i, sc + (size_t)i * 64, l0, 5, pf); break;
#endif
                default: scores_f_blk(t, q + i, sc + (size_t)i * 64, l0, QB_SCORES, pf); break;
                }
            }
        }
}

/* ------------------------------------------------------------------ update ---- */

/* Softmax part of one query: running max and sum, rescaled output; the weights of the value
 * rows into w[64] (p_j; for q8 values the 8-bit u_j of attention_kern.h, as floats, and *su;
 * 0 for invisible lanes). */
INLINE void softmax_part(sdn_att_q *Q, const float *s, float *w, float *su, const sdn_att_vt *v) {
    const uint64_t vis = Q->vis;
    vf sv[NV], mx = vf_set1(-INFINITY);
    for (int c = 0; c < NV; c++) {
        sv[c] = vf_keepninf((vis >> (c * W)) & ((1u << W) - 1), vf_load(s + c * W));
        mx = vf_max(mx, sv[c]);
    }
    const float mt = vf_hmax(mx);
    if (Q->m == -INFINITY) Q->m = mt;
    else if (mt > Q->m) {
        const float a = sdn_att_exp(Q->m - mt);
        const vf av = vf_set1(a);
        for (int d = 0; d < v->hd; d += W) vf_store(Q->acc + d, vf_mul(vf_load(Q->acc + d), av));
        Q->l *= a;
        Q->m = mt;
    }
    const vf m = vf_set1(Q->m);
    vf p[NV];
    for (int c = 0; c < NV; c++) p[c] = vf_keep0((vis >> (c * W)) & ((1u << W) - 1), vexp(vf_sub(sv[c], m)));
    if (v->pairs) /* bf16 values: the weights in BF16 */
        for (int c = 0; c < NV; c++) p[c] = vf_bf16w(p[c]);
    Q->l = Q->l + tsum64(p);
    if (v->scaled) { /* att_wq8 */
        vf wv[NV], wm = vf_zero();
        for (int c = 0; c < NV; c++) {
            wv[c] = vf_mul(p[c], vf_load(v->vsc + c * W));
            wm = vf_max(wm, wv[c]);
        }
        float r;
        const vf top = vf_set1(255.0f);
        if (sdn_att_wq8_scale(vf_hmax(wm), &r, su)) {
            const vf rv = vf_set1(r);
            for (int c = 0; c < NV; c++) vf_store(w + c * W, vf_min(vf_round(vf_mul(wv[c], rv)), top));
        } else {
            for (int c = 0; c < NV; c++) vf_store(w + c * W, vf_zero());
        }
    } else {
        for (int c = 0; c < NV; c++) vf_store(w + c * W, p[c]);
    }
}

/* acc_b += w_b[j] * v_j over the lanes j each query sees, in increasing order; nch vectors of
 * the head dimension from d0, nb queries (both constants after inlining). q8 values: the
 * exact integer sums of u_j * v_j (floats below 2^24), then acc_b = fma(isum, su_b, acc_b).
 * bf16 values (v->pairs): lanes 1, 0, 3, 2, ... into a fresh sum, then acc_b += it. */
INLINE void pv_blk(sdn_att_q *const *q, const float *w, const float *su, const sdn_att_vt *v, int d0, const int nch, const int nb, int pf) {
    vf acc[QB_PV][4];
    uint64_t uni = 0, vis[QB_PV];
    float *out[QB_PV];
    for (int b = 0; b < nb; b++) {
        vis[b] = q[b]->vis;
        out[b] = q[b]->acc + d0;
        uni |= vis[b];
        for (int c = 0; c < nch; c++) acc[b][c] = v->scaled || v->pairs ? vf_zero() : vf_load(out[b] + c * W);
    }
    const int all = nb == 1 || ({ int same = 1; for (int b = 1; b < nb; b++) same &= vis[b] == vis[0]; same; });
    /* bf16 values: the lanes of each pair swapped in the walk (1, 0, 3, 2, ...), the odd one first */
    const int sw = v->pairs ? 1 : 0;
    if (sw) uni = (uni & 0x5555555555555555ull) << 1 | (uni >> 1 & 0x5555555555555555ull);
    for (; uni; uni &= uni - 1) {
        const int j = __builtin_ctzll(uni) ^ sw;
        const uint8_t *row = v->vrow[j];
        if (pf && d0 == 0) /* the next tile's row j */
            for (size_t o = 0; o < v->pf_row; o += 64) PFX((const char *)v->pf + (size_t)j * v->pf_row + o);
        vf x[4];
        switch (v->tv) {
        case SDN_KV_F32:
            for (int c = 0; c < nch; c++) x[c] = vf_load((const float *)row + d0 + c * W);
            break;
        case SDN_KV_F16:
            for (int c = 0; c < nch; c++) x[c] = vf_f16((const uint16_t *)row + d0 + c * W);
            break;
        case SDN_KV_BF16:
            for (int c = 0; c < nch; c++) x[c] = vf_bf16((const uint16_t *)row + d0 + c * W);
            break;
        default:
            for (int c = 0; c < nch; c++) x[c] = vf_i8((const int8_t *)row + d0 + c * W);
            break;
        }
        for (int b = 0; b < nb; b++) {
            if (!all && !(vis[b] >> j & 1)) continue;
            const vf wj = vf_set1(w[(size_t)b * 64 + j]);
            for (int c = 0; c < nch; c++) acc[b][c] = vf_fma(wj, x[c], acc[b][c]);
        }
    }
    if (v->scaled)
        for (int b = 0; b < nb; b++) {
            const vf s = vf_set1(su[b]);
            for (int c = 0; c < nch; c++) vf_store(out[b] + c * W, vf_fma(acc[b][c], s, vf_load(out[b] + c * W)));
        }
    else if (v->pairs) /* the tile's own sum, added */
        for (int b = 0; b < nb; b++)
            for (int c = 0; c < nch; c++) vf_store(out[b] + c * W, vf_add(vf_load(out[b] + c * W), acc[b][c]));
    else
        for (int b = 0; b < nb; b++)
            for (int c = 0; c < nch; c++) vf_store(out[b] + c * W, acc[b][c]);
}

#if W == 16 && defined(__AVX512BF16__)
/* bf16 values transposed in pairs (v->t2): t_b = VDPBF16PS over the pairs some query of the
 * block sees (wb: each query's 32 pairs of BF16 weights), then acc_b += t_b; 64 elements of
 * the head dimension from d0, nb queries (a constant after inlining). */
INLINE void pv_t2_blk(sdn_att_q *const *q, const uint32_t *wb, const sdn_att_vt *v, int d0, uint32_t pairs, const int nb) {
    __m512 acc[QB_PV][4];
    for (int b = 0; b < nb; b++)
        for (int c = 0; c < 4; c++) acc[b][c] = _mm512_setzero_ps();
    const int hd = v->hd;
    for (; pairs; pairs &= pairs - 1) {
        const int i = __builtin_ctz(pairs);
        const uint16_t *t = v->t2 + ((size_t)i * hd + d0) * 2;
        const __m512i x[4] = {_mm512_loadu_si512(t), _mm512_loadu_si512(t + 32), _mm512_loadu_si512(t + 64), _mm512_loadu_si512(t + 96)};
        for (int b = 0; b < nb; b++) {
            const __m512bh wv = (__m512bh)_mm512_set1_epi32((int)wb[(size_t)b * 32 + i]);
            for (int c = 0; c < 4; c++) acc[b][c] = _mm512_dpbf16_ps(acc[b][c], (__m512bh)x[c], wv);
        }
    }
    for (int b = 0; b < nb; b++) {
        float *o = q[b]->acc + d0;
        for (int c = 0; c < 4; c++) vf_store(o + c * W, vf_add(vf_load(o + c * W), acc[b][c]));
    }
}

INLINE void pv_t2(sdn_att_q *const *q, const float *w, const sdn_att_vt *v, const int nb) {
    uint32_t wb[QB_PV * 32] __attribute__((aligned(64)));
    uint64_t uni = 0;
    for (int b = 0; b < nb; b++) { /* the weights are BF16 values already: their upper halves */
        uni |= q[b]->vis;
        for (int c = 0; c < NV; c++)
            _mm256_storeu_si256((__m256i *)(void *)((uint16_t *)wb + (size_t)b * 64 + c * W), _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(vf_load(w + (size_t)b * 64 + c * W)), 16)));
    }
    uint32_t pairs = 0;
    for (int i = 0; i < 32; i++)
        if (uni >> (2 * i) & 3) pairs |= 1u << i;
    for (int d0 = 0; d0 < v->hd; d0 += 64) pv_t2_blk(q, wb, v, d0, pairs, nb);
}

/* The tile's bf16 value rows transposed in pairs (sdn_att_t2_fn): the elements of rows 2i and
 * 2i + 1 interleaved by VPERMT2W, 32 of each at a time. */
void SDN_KFN(sdn_att_t2)(const sdn_att_vt *v, uint16_t *t2) {
    const int hd = v->hd;
    /* the interleaving: element k of row 2i, then of row 2i + 1 (k < 16; ib: k + 16). Static, not
     * on the stack: a sanitizer's fake stack frame need not keep the 64-byte alignment the
     * compiler assumed for a local array it loads whole */
    static const uint16_t ia[32] = {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
                                    8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    static const uint16_t ib[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
                                    24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
    const __m512i i0 = _mm512_loadu_si512(ia), i1 = _mm512_loadu_si512(ib);
    for (int i = 0; i < 32; i++) {
        if (v->pf) /* the next tile's rows 2i, 2i + 1 (pv_t2 reads this tile's from t2 only) */
            for (size_t o = 0; o < 2 * v->pf_row; o += 64) PFX((const char *)v->pf + (size_t)(2 * i) * v->pf_row + o);
        const uint16_t *r0 = (const uint16_t *)(const void *)v->vrow[2 * i], *r1 = (const uint16_t *)(const void *)v->vrow[2 * i + 1];
        uint16_t *dst = t2 + (size_t)i * hd * 2;
        for (int d0 = 0; d0 < hd; d0 += 32) {
            const __m512i a = _mm512_loadu_si512(r0 + d0), b = _mm512_loadu_si512(r1 + d0);
            _mm512_storeu_si512(dst + 2 * d0, _mm512_permutex2var_epi16(a, i0, b));
            _mm512_storeu_si512(dst + 2 * d0 + 32, _mm512_permutex2var_epi16(a, i1, b));
        }
    }
}
#endif

#if W == 16
/* q8 values transposed (v->t4): acc_b = fma(isum_b, su_b, acc_b), isum_b[d] = sum over the
 * 16 groups g of VPDPBUSD(u_b[4g .. 4g+3], t4[g][d][0..3]): the exact integer sums of
 * attention_kern.h, 64 products per instruction; nb queries (a constant after inlining), 64
 * elements of the head dimension from d0. A group no query of the block sees is skipped. */
INLINE void pv_t4_blk(sdn_att_q *const *q, const uint8_t *u, const float *su, const sdn_att_vt *v, int d0, uint16_t groups, const int nb) {
    __m512i acc[QB_PV][4];
    for (int b = 0; b < nb; b++)
        for (int c = 0; c < 4; c++) acc[b][c] = _mm512_setzero_si512();
    const int hd = v->hd;
    for (; groups; groups &= (uint16_t)(groups - 1)) {
        const int g = __builtin_ctz(groups);
        const int8_t *t = v->t4 + ((size_t)g * hd + d0) * 4;
        const __m512i x0 = _mm512_loadu_si512(t), x1 = _mm512_loadu_si512(t + 64), x2 = _mm512_loadu_si512(t + 128), x3 = _mm512_loadu_si512(t + 192);
        for (int b = 0; b < nb; b++) {
            int32_t u4;
            memcpy(&u4, u + (size_t)b * 64 + 4 * g, 4);
            const __m512i ub = _mm512_set1_epi32(u4);
            acc[b][0] = _mm512_dpbusd_epi32(acc[b][0], ub, x0);
            acc[b][1] = _mm512_dpbusd_epi32(acc[b][1], ub, x1);
            acc[b][2] = _mm512_dpbusd_epi32(acc[b][2], ub, x2);
            acc[b][3] = _mm512_dpbusd_epi32(acc[b][3], ub, x3);
        }
    }
    for (int b = 0; b < nb; b++) {
        const vf sb = vf_set1(su[b]);
        float *o = q[b]->acc + d0;
        for (int c = 0; c < 4; c++) vf_store(o + c * W, vf_fma(_mm512_cvtepi32_ps(acc[b][c]), sb, vf_load(o + c * W)));
    }
}

INLINE void pv_t4(sdn_att_q *const *q, const float *w, const float *su, const sdn_att_vt *v, const int nb) {
    uint8_t u[QB_PV * 64] __attribute__((aligned(64)));
    uint64_t uni = 0;
    for (int b = 0; b < nb; b++) { /* the weights as bytes (integers 0 .. 255 already) */
        uni |= q[b]->vis;
        for (int c = 0; c < NV; c++) _mm_storeu_si128((__m128i *)(void *)(u + (size_t)b * 64 + c * W), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(vf_load(w + (size_t)b * 64 + c * W))));
    }
    uint16_t groups = 0; /* groups of 4 lanes some query sees */
    for (int g = 0; g < 16; g++)
        if (uni >> (4 * g) & 15) groups |= (uint16_t)(1u << g);
    for (int d0 = 0; d0 < v->hd; d0 += 64) pv_t4_blk(q, u, su, v, d0, groups, nb);
}

/* The tile's q8 value rows transposed in groups of 4 (sdn_att_t4_fn): per group, 4 rows of 64
 * bytes interleaved by bytes and pairs within 128-bit lanes, then the lanes put in order. */
void SDN_KFN(sdn_att_t4)(const sdn_att_vt *v, int8_t *t4) {
    const int hd = v->hd;
    for (int g = 0; g < 16; g++) {
        if (v->pf) /* the next tile's rows 4g .. 4g + 3 (pv_t4 reads this tile's from t4 only) */
            for (size_t o = 0; o < 4 * v->pf_row; o += 64) PFX((const char *)v->pf + (size_t)(4 * g) * v->pf_row + o);
        for (int d0 = 0; d0 < hd; d0 += 64) {
            const __m512i r0 = _mm512_loadu_si512(v->vrow[4 * g] + d0), r1 = _mm512_loadu_si512(v->vrow[4 * g + 1] + d0);
            const __m512i r2 = _mm512_loadu_si512(v->vrow[4 * g + 2] + d0), r3 = _mm512_loadu_si512(v->vrow[4 * g + 3] + d0);
            const __m512i l01 = _mm512_unpacklo_epi8(r0, r1), h01 = _mm512_unpackhi_epi8(r0, r1);
            const __m512i l23 = _mm512_unpacklo_epi8(r2, r3), h23 = _mm512_unpackhi_epi8(r2, r3);
            /* o_k, 128-bit lane L: elements 16L + 4k .. 16L + 4k + 3, 4 rows each */
            const __m512i o0 = _mm512_unpacklo_epi16(l01, l23), o1 = _mm512_unpackhi_epi16(l01, l23);
            const __m512i o2 = _mm512_unpacklo_epi16(h01, h23), o3 = _mm512_unpackhi_epi16(h01, h23);
            const __m512i t0 = _mm512_shuffle_i32x4(o0, o1, 0x44), t1 = _mm512_shuffle_i32x4(o2, o3, 0x44);
            const __m512i t2 = _mm512_shuffle_i32x4(o0, o1, 0xEE), t3 = _mm512_shuffle_i32x4(o2, o3, 0xEE);
            int8_t *dst = t4 + ((size_t)g * hd + d0) * 4;
            _mm512_storeu_si512(dst, _mm512_shuffle_i32x4(t0, t1, 0x88));
            _mm512_storeu_si512(dst + 64, _mm512_shuffle_i32x4(t0, t1, 0xDD));
            _mm512_storeu_si512(dst + 128, _mm512_shuffle_i32x4(t2, t3, 0x88));
            _mm512_storeu_si512(dst + 192, _mm512_shuffle_i32x4(t2, t3, 0xDD));
        }
    }
}
#endif

INLINE void pv_q(sdn_att_q *const *q, const float *w, const float *su, const sdn_att_vt *v, const int nb, int pf) {
#if W == 16
    if (v->t4) {
        pv_t4(q, w, su, v, nb);
        return;
    }
#endif
#if W == 16 && defined(__AVX512BF16__)
    if (v->t2) {
        pv_t2(q, w, v, nb);
        return;
    }
#endif
    int d0 = 0;
    for (; d0 + 4 * W <= v->hd; d0 += 4 * W) pv_blk(q, w, su, v, d0, 4, nb, pf);
    for (; d0 < v->hd; d0 += W) pv_blk(q, w, su, v, d0, 1, nb, pf);
}

void SDN_KFN(sdn_att_update)(sdn_att_q *q, int nq, const float *sc, const sdn_att_vt *v) {
    float w[QB_PV * 64] __attribute__((aligned(64))), su[QB_PV];
    for (int i = 0; i < nq; i += QB_PV) {
        sdn_att_q *tmp[QB_PV];
        int nb = 0;
        /* the block's visible queries, gathered (a query that sees nothing is left alone) */
        for (int b = i; b < nq && b < i + QB_PV; b++) {
            if (!q[b].vis) continue;
            softmax_part(&q[b], sc + (size_t)b * 64, w + (size_t)nb * 64, su + nb, v);
            tmp[nb] = &q[b];
            nb++;
        }
        const int pf = v->pf && i == 0;
        switch (nb) {
        case 0: break;
        case 1: pv_q(tmp, w, su, v, 1, pf); break;
#if QB_PV > 2
        case 2: pv_q(tmp, w, su, v, 2, pf); break;
        case 3: pv_q(tmp, w, su, v, 3, pf); break;
        case 4: pv_q(tmp, w, su, v, 4, pf); break;
        case 5: pv_q(tmp, w, su, v, 5, pf); break;
#endif
        default: pv_q(tmp, w, su, v, QB_PV, pf); break;
        }
    }
}

void SDN_KFN(sdn_att_cvt)(const void *src, sdn_kv_type t, float *dst, size_t n) {
    if (t == SDN_KV_F16)
        for (size_t i = 0; i < n; i += W) vf_store(dst + i, vf_f16((const uint16_t *)src + i));
    else if (t == SDN_KV_BF16)
        for (size_t i = 0; i < n; i += W) vf_store(dst + i, vf_bf16((const uint16_t *)src + i));
    else
        for (size_t i = 0; i < n; i += W) vf_store(dst + i, vf_i8((const int8_t *)src + i));
}

void SDN_KFN(sdn_att_merge)(float *ACC, const float *acc, float ea, float eb, int hd) {
    const vf va = vf_set1(ea), vb = vf_set1(eb);
    for (int d = 0; d < hd; d += W) vf_store(ACC + d, vf_fma(vf_load(acc + d), vb, vf_mul(vf_load(ACC + d), va)));
}

void SDN_KFN(sdn_att_scale)(float *o, const float *acc, float s, int hd) {
    const vf vs = vf_set1(s);
    for (int d = 0; d < hd; d += W) vf_store(o + d, vf_mul(vf_load(acc + d), vs));
}

/* sdn_kv_f16 of n values (n a multiple of 8): clamped to +-65504 (a NaN stays NaN), then
 * VCVTPS2PH with round to nearest even, what the scalar conversion computes (test_attention). */
void SDN_KFN(sdn_kv_f16_row)(const float *x, uint16_t *h, int n) {
    const __m256 lo = _mm256_set1_ps(-65504.0f), hi = _mm256_set1_ps(65504.0f);
    for (int i = 0; i < n; i += 8) {
        const __m256 v = _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_loadu_ps(x + i)));
        _mm_storeu_si128((__m128i *)(void *)(h + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
}
