/* attention_arm.c - the per-tile attention kernels on AArch64 Advanced SIMD, compiled once per
 * AArch64 path like kernels/matmul_arm.c (CMakeLists.txt: neon, dotprod, i8mm, each with its
 * own -march; SDN_KFN names the exported functions). They compute exactly the arithmetic
 * attention/attention_kern.h states, lane by lane, so every path gives the portable C's bits:
 *   scores  keys are stored transposed per tile, so a 4-lane vector holds one element of 4
 *           positions; each key vector serves a block of queries, each lane a sequential FMA
 *           chain over the head dimension (FMLA: one rounding, as fmaf). q8 keys (stored as
 *           unsigned bytes + 128, 4 elements per 32-bit lane) give the exact int32 block dot
 *           products: neon flips the offset away (XOR 0x80 is the signed key) and multiplies by
 *           SMULL + pairwise adds; dotprod does the same with SDOT; i8mm multiplies the stored
 *           unsigned bytes by the signed query with USDOT and subtracts q8bias (128 * the sum
 *           of the query's bytes), the portable statement. Every way gives the same integer.
 *   update  max (FMAXNM: a NaN score never wins, as the portable comparison), rescale,
 *           att_exp (FRINTN for the rounding: the same integer as the portable 1.5 * 2^23
 *           trick for |x| < 2^22; FMLA/FMLS for the fmaf steps), the pairwise tsum64, and the
 *           value rows of the visible lanes accumulated with FMLA in increasing lane order into
 *           a block of queries whose outputs stay in registers (bf16 values: by pairs of lanes, the
 *           odd one first, into a fresh sum per tile, attention_kern.h).
 * The build uses -ffp-contract=off, so no other multiply and add is fused. The head dimension
 * must be a multiple of 4 (attention.c falls back to the portable kernels otherwise). */
#include <arm_neon.h>
#include <math.h>

#include "attention/attention_kern.h"
#include "kernels/matmul_internal.h"

#if !defined(__aarch64__)
#error "attention_arm.c is for AArch64"
#endif

#define W 4
#define NV (64 / W) /* vectors per tile */
#define QB_SCORES 6 /* queries per score block: 6 x 4 accumulators + 4 key vectors */
#define QB_Q8 3     /* q8 keys: 3 x (4 integer + 4 float accumulators) + 4 key vectors */
#define QB_PV 4     /* queries per value block: 4 x 4 accumulators + 4 value vectors */

#define INLINE static inline __attribute__((always_inline))

/* lanes of v where bit i of the 4-bit m is set; 0 or -inf elsewhere */
INLINE uint32x4_t mask4(unsigned m) {
    const uint32x4_t bits = {1, 2, 4, 8};
    return vtstq_u32(vdupq_n_u32(m), bits);
}
INLINE float32x4_t keep0(unsigned m, float32x4_t v) { return vreinterpretq_f32_u32(vandq_u32(mask4(m), vreinterpretq_u32_f32(v))); }
INLINE float32x4_t keepninf(unsigned m, float32x4_t v) { return vbslq_f32(mask4(m), v, vdupq_n_f32(-INFINITY)); }

INLINE float32x4_t f16x4(const uint16_t *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
INLINE float32x4_t bf16x4(const uint16_t *p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }
INLINE void i8x16(const int8_t *p, float32x4_t out[4]) {
    const int8x16_t b = vld1q_s8(p);
    const int16x8_t lo = vmovl_s8(vget_low_s8(b)), hi = vmovl_high_s8(b);
    out[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
    out[1] = vcvtq_f32_s32(vmovl_high_s16(lo));
    out[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
    out[3] = vcvtq_f32_s32(vmovl_high_s16(hi));
}
INLINE float32x4_t i8x4(const int8_t *p) {
    int32_t w;
    memcpy(&w, p, 4);
    const int8x8_t b = vreinterpret_s8_s32(vdup_n_s32(w));
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(b))));
}

/* att_exp of every lane (attention_kern.h): the clamp keeps NaN as the portable `if` does */
INLINE float32x4_t vexp(float32x4_t x) {
    const float32x4_t lo = vdupq_n_f32(-87.0f);
    x = vbslq_f32(vcltq_f32(x, lo), lo, x);
    const float32x4_t k = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504f)));
    const float32x4_t r = vfmsq_f32(x, k, vdupq_n_f32(0.69314718f)); /* fmaf(-k, ln2, x) */
    float32x4_t p = vdupq_n_f32(1.0f / 720);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 120), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 24), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 6), p, r);
    p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(k), vdupq_n_s32(127)), 23);
    return vmulq_f32(p, vreinterpretq_f32_s32(e));
}

/* tsum64 of the 16 vectors p (lane i of vector c is p_{4c+i}): u = p_i + p_{i+32}, then halves */
INLINE float tsum64(const float32x4_t *p) {
    float32x4_t u[8];
    for (int c = 0; c < 8; c++) u[c] = vaddq_f32(p[c], p[c + 8]);
    for (int c = 0; c < 4; c++) u[c] = vaddq_f32(u[c], u[c + 4]);
    for (int c = 0; c < 2; c++) u[c] = vaddq_f32(u[c], u[c + 2]);
    u[0] = vaddq_f32(u[0], u[1]);
    const float32x2_t h = vadd_f32(vget_low_f32(u[0]), vget_high_f32(u[0])); /* u0 + u2, u1 + u3 */
    return vget_lane_f32(h, 0) + vget_lane_f32(h, 1);
}

/* ------------------------------------------------------------------ scores ---- */

/* F32/F16 keys: lanes [l0, l0 + 16) of nb queries (nb a constant after inlining). */
INLINE void scores_f_blk(const sdn_att_kt *t, const sdn_att_q *q, float *sc, int l0, const int nb, const uint8_t *pf) {
    float32x4_t acc[QB_SCORES][4];
    for (int b = 0; b < nb; b++)
        for (int c = 0; c < 4; c++) acc[b][c] = vdupq_n_f32(0.0f);
    const int hd = t->hd;
    const size_t pf_step = pf ? (t->pf_bytes / (size_t)hd + 63) / 64 * 64 : 0;
    for (int d = 0; d < hd; d++) {
        if (pf)
            for (size_t o = 0; o < pf_step; o += 64) __builtin_prefetch(pf + (size_t)d * pf_step + o);
        float32x4_t k[4];
        if (t->tk == SDN_KV_F32) {
            const float *kp = (const float *)t->k + (size_t)d * 64 + l0;
            for (int c = 0; c < 4; c++) k[c] = vld1q_f32(kp + 4 * c);
        } else {
            const uint16_t *kp = (const uint16_t *)t->k + (size_t)d * 64 + l0;
            for (int c = 0; c < 4; c++) k[c] = f16x4(kp + 4 * c);
        }
        for (int b = 0; b < nb; b++) {
            const float32x4_t qd = vld1q_dup_f32(q[b].q + d);
            for (int c = 0; c < 4; c++) acc[b][c] = vfmaq_f32(acc[b][c], qd, k[c]); /* fmaf(q, k, acc) */
        }
    }
    for (int b = 0; b < nb; b++)
        for (int c = 0; c < 4; c++) vst1q_f32(sc + (size_t)b * 64 + l0 + 4 * c, vmulq_f32(acc[b][c], vdupq_n_f32(q[b].qs)));
}

/* BF16 keys ([d/2][64][2], a pair of one position per 32-bit lane): lanes [l0, l0 + 16) of nb
 * queries, pair by pair, the odd element's FMLA first (attention_kern.h). */
INLINE void scores_bf_blk(const sdn_att_kt *t, const sdn_att_q *q, float *sc, int l0, const int nb, const uint8_t *pf) {
    float32x4_t acc[QB_SCORES][4];
    for (int b = 0; b < nb; b++)
        for (int c = 0; c < 4; c++) acc[b][c] = vdupq_n_f32(0.0f);
    const int np = (t->hd + 1) / 2;
    const size_t pf_step = pf ? (t->pf_bytes / (size_t)np + 63) / 64 * 64 : 0;
    for (int g = 0; g < np; g++) {
        if (pf)
            for (size_t o = 0; o < pf_step; o += 64) __builtin_prefetch(pf + (size_t)g * pf_step + o);
        const uint32_t *kp = (const uint32_t *)t->k + (size_t)g * 64 + l0;
        float32x4_t ko[4], ke[4];
        for (int c = 0; c < 4; c++) {
            const uint32x4_t kv = vld1q_u32(kp + 4 * c);
            ko[c] = vreinterpretq_f32_u32(vandq_u32(kv, vdupq_n_u32(0xffff0000u)));
            ke[c] = vreinterpretq_f32_u32(vshlq_n_u32(kv, 16));
        }
        for (int b = 0; b < nb; b++) {
            const float32x4_t qo = vdupq_n_f32(sdn_kv_b2f(q[b].qb[2 * g + 1])), qe = vdupq_n_f32(sdn_kv_b2f(q[b].qb[2 * g]));
            for (int c = 0; c < 4; c++) {
                acc[b][c] = vfmaq_f32(acc[b][c], qo, ko[c]);
                acc[b][c] = vfmaq_f32(acc[b][c], qe, ke[c]);
            }
        }
    }
    for (int b = 0; b < nb; b++)
        for (int c = 0; c < 4; c++) vst1q_f32(sc + (size_t)b * 64 + l0 + 4 * c, vmulq_f32(acc[b][c], vdupq_n_f32(q[b].qs)));
}

/* The exact int32 per lane of 4 bytes: acc + sum over the lane's 4 stored key bytes ku (unsigned,
 * + 128) times the query's 4 bytes q; BIASED says whether the sum still holds 128 * sum(q). */
#if defined(__ARM_FEATURE_MATMUL_INT8)
#define BIASED 1
INLINE int32x4_t kdot(int32x4_t acc, uint8x16_t ku, int8x16_t q) { return vusdotq_s32(acc, ku, q); }
#elif defined(__ARM_FEATURE_DOTPROD)
#define BIASED 0
INLINE int32x4_t kdot(int32x4_t acc, uint8x16_t ku, int8x16_t q) {
    return vdotq_s32(acc, vreinterpretq_s8_u8(veorq_u8(ku, vdupq_n_u8(0x80))), q);
}
#else
#define BIASED 0
INLINE int32x4_t kdot(int32x4_t acc, uint8x16_t ku, int8x16_t q) {
    const int8x16_t k = vreinterpretq_s8_u8(veorq_u8(ku, vdupq_n_u8(0x80)));
    /* int8 x int8 fits int16; pairs into int32, then pairs of pairs: lane i = its 4 bytes */
    const int32x4_t lo = vpaddlq_s16(vmull_s8(vget_low_s8(k), vget_low_s8(q)));
    const int32x4_t hi = vpaddlq_s16(vmull_high_s8(k, q));
    return vaddq_s32(acc, vpaddq_s32(lo, hi));
}
#endif

/* Q8 keys: lanes [l0, l0 + 16) of nb queries, block of 32 elements by block: each block's
 * exact int32 dot products, then scaled and summed into the float scores in block order. */
INLINE void scores_q8_blk(const sdn_att_kt *t, const sdn_att_q *q, float *sc, int l0, const int nb, const uint8_t *pf) {
    float32x4_t s[QB_Q8][4];
    for (int b = 0; b < nb; b++)
        for (int c = 0; c < 4; c++) s[b][c] = vdupq_n_f32(0.0f); /* (set by the first block) */
    const size_t pf_step = pf ? (t->pf_bytes / (size_t)(t->hd4 / 4) + 63) / 64 * 64 : 0;
    for (int kb = 0; kb < t->kblocks; kb++) {
        int32x4_t acc[QB_Q8][4];
        for (int b = 0; b < nb; b++)
            for (int c = 0; c < 4; c++) acc[b][c] = vdupq_n_s32(0);
        const int g0 = kb * (SDN_KV_KBLOCK / 4);
        const uint8_t *k = (const uint8_t *)t->k + (size_t)g0 * 64 * 4 + (size_t)l0 * 4;
        for (int g = g0; g < g0 + SDN_KV_KBLOCK / 4; g++, k += 64 * 4) {
            if (pf)
                for (size_t o = 0; o < pf_step; o += 64) __builtin_prefetch(pf + (size_t)g * pf_step + o);
            const uint8x16_t k0 = vld1q_u8(k), k1 = vld1q_u8(k + 16), k2 = vld1q_u8(k + 32), k3 = vld1q_u8(k + 48);
            for (int b = 0; b < nb; b++) {
                int32_t q4;
                memcpy(&q4, q[b].q8 + 4 * g, 4);
                const int8x16_t qv = vreinterpretq_s8_s32(vdupq_n_s32(q4));
                acc[b][0] = kdot(acc[b][0], k0, qv);
                acc[b][1] = kdot(acc[b][1], k1, qv);
                acc[b][2] = kdot(acc[b][2], k2, qv);
                acc[b][3] = kdot(acc[b][3], k3, qv);
            }
        }
        for (int b = 0; b < nb; b++) {
            const float32x4_t qs = vdupq_n_f32(q[b].q8s[kb]);
            for (int c = 0; c < 4; c++) {
                int32x4_t a = acc[b][c];
#if BIASED
                a = vsubq_s32(a, vdupq_n_s32(q[b].q8bias[kb]));
#endif
                const float32x4_t w = vmulq_f32(f16x4(t->ks + (size_t)kb * 64 + l0 + 4 * c), qs), dot = vcvtq_f32_s32(a);
                s[b][c] = kb ? vfmaq_f32(s[b][c], dot, w) : vmulq_f32(dot, w);
            }
        }
    }
    for (int b = 0; b < nb; b++)
        for (int c = 0; c < 4; c++) vst1q_f32(sc + (size_t)b * 64 + l0 + 4 * c, s[b][c]);
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
                    case 2: scores_q8_blk(t, q + i8, sc + (size_t)i8 * 64, l0, 2, pf8); break;
                    default: scores_q8_blk(t, q + i8, sc + (size_t)i8 * 64, l0, QB_Q8, pf8); break;
                    }
                }
            } else if (t->tk == SDN_KV_BF16) {
                switch (nb) {
                case 1: scores_bf_blk(t, q + i, sc + (size_t)i * 64, l0, 1, pf); break;
                case 2: scores_bf_blk(t, q + i, sc + (size_t)i * 64, l0, 2, pf); break;
                case 3: scores_bf_blk(t, q + i, sc + (size_t)i * 64, l0, 3, pf); break;
                case 4: scores_bf_blk(t, q + i, sc + (size_t)i * 64, l0, 4, pf); break;
                case 5: scores_bf_blk(t, q + i, sc + (size_t)i * 64, l0, 5, pf); break;
                default: scores_bf_blk(t, q + i, sc + (size_t)i * 64, l0, QB_SCORES, pf); break;
                }
            } else {
                switch (nb) {
                case 1: scores_f_blk(t, q + i, sc + (size_t)i * 64, l0, 1, pf); break;
                case 2: scores_f_blk(t, q + i, sc + (size_t)i * 64, l0, 2, pf); break;
                case 3: scores_f_blk(t, q + i, sc + (size_t)i * 64, l0, 3, pf); break;
                case 4: scores_f_blk(t, q + i, sc + (size_t)i * 64, l0, 4, pf); break;
                case 5: scores_f_blk(t, q + i, sc + (size_t)i * 64, l0, 5, pf); break;
                default: scores_f_blk(t, q + i, sc + (size_t)i * 64, l0, QB_SCORES, pf); break;
                }
            }
        }
}

/* ------------------------------------------------------------------ update ---- */

/* sdn_kv_bf16 of softmax weights (finite, not negative), back as floats: rounded to nearest
 * even in the upper 16 bits, 0 below 2^-30. */
INLINE float32x4_t bf16w(float32x4_t p) {
    const uint32x4_t u = vreinterpretq_u32_f32(p);
    const uint32x4_t r = vandq_u32(vaddq_u32(vaddq_u32(u, vdupq_n_u32(0x7fff)), vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1))), vdupq_n_u32(0xffff0000u));
    return vreinterpretq_f32_u32(vandq_u32(vcgeq_u32(u, vdupq_n_u32(0x30800000u)), r));
}

/* Softmax part of one query: running max and sum, rescaled output; the weights of the value
 * rows into w[64] (p_j; for q8 values the 8-bit u_j of attention_kern.h, as floats, and *su;
 * 0 for invisible lanes). */
INLINE void softmax_part(sdn_att_q *Q, const float *s, float *w, float *su, const sdn_att_vt *v) {
    const uint64_t vis = Q->vis;
    float32x4_t sv[NV], mx = vdupq_n_f32(-INFINITY);
    for (int c = 0; c < NV; c++) {
        sv[c] = keepninf((unsigned)(vis >> (c * W)) & 15u, vld1q_f32(s + c * W));
        mx = vmaxnmq_f32(mx, sv[c]);
    }
    const float mt = vmaxnmvq_f32(mx);
    if (Q->m == -INFINITY) Q->m = mt;
    else if (mt > Q->m) {
        const float a = sdn_att_exp(Q->m - mt);
        const float32x4_t av = vdupq_n_f32(a);
        for (int d = 0; d < v->hd; d += W) vst1q_f32(Q->acc + d, vmulq_f32(vld1q_f32(Q->acc + d), av));
        Q->l *= a;
        Q->m = mt;
    }
    const float32x4_t m = vdupq_n_f32(Q->m);
    float32x4_t p[NV];
    for (int c = 0; c < NV; c++) p[c] = keep0((unsigned)(vis >> (c * W)) & 15u, vexp(vsubq_f32(sv[c], m)));
    if (v->pairs) /* bf16 values: the weights in BF16 */
        for (int c = 0; c < NV; c++) p[c] = bf16w(p[c]);
    Q->l = Q->l + tsum64(p);
    if (v->scaled) { /* att_wq8 */
        float32x4_t wv[NV], wm = vdupq_n_f32(0.0f);
        for (int c = 0; c < NV; c++) {
            wv[c] = vmulq_f32(p[c], vld1q_f32(v->vsc + c * W));
            wm = vmaxq_f32(wm, wv[c]);
        }
        float r;
        if (sdn_att_wq8_scale(vmaxvq_f32(wm), &r, su)) {
            const float32x4_t rv = vdupq_n_f32(r), top = vdupq_n_f32(255.0f);
            for (int c = 0; c < NV; c++) vst1q_f32(w + c * W, vminq_f32(vrndnq_f32(vmulq_f32(wv[c], rv)), top));
        } else {
            for (int c = 0; c < NV; c++) vst1q_f32(w + c * W, vdupq_n_f32(0.0f));
        }
    } else {
        for (int c = 0; c < NV; c++) vst1q_f32(w + c * W, p[c]);
    }
}

/* acc_b += w_b[j] * v_j over the lanes j each query sees, in increasing order; nch vectors of
 * the head dimension from d0, nb queries (both constants after inlining). bf16 values
 * (v->pairs): lanes 1, 0, 3, 2, ... into a fresh sum, then acc_b += it. */
INLINE void pv_blk(sdn_att_q *const *q, const float *w, const float *su, const sdn_att_vt *v, int d0, const int nch, const int nb, int pf) {
    float32x4_t acc[QB_PV][4];
    uint64_t uni = 0, vis[QB_PV];
    float *out[QB_PV];
    for (int b = 0; b < nb; b++) {
        vis[b] = q[b]->vis;
        out[b] = q[b]->acc + d0;
        uni |= vis[b];
        for (int c = 0; c < nch; c++) acc[b][c] = v->scaled || v->pairs ? vdupq_n_f32(0.0f) : vld1q_f32(out[b] + c * W);
    }
    int all = 1;
    for (int b = 1; b < nb; b++) all &= vis[b] == vis[0];
    /* bf16 values: the lanes of each pair swapped in the walk (1, 0, 3, 2, ...), the odd one first */
    const int sw = v->pairs ? 1 : 0;
    if (sw) uni = (uni & 0x5555555555555555ull) << 1 | (uni >> 1 & 0x5555555555555555ull);
    for (; uni; uni &= uni - 1) {
        const int j = __builtin_ctzll(uni) ^ sw;
        const uint8_t *row = v->vrow[j];
        if (pf && d0 == 0) /* the next tile's row j */
            for (size_t o = 0; o < v->pf_row; o += 64) __builtin_prefetch(v->pf + (size_t)j * v->pf_row + o);
        float32x4_t x[4];
        switch (v->tv) {
        case SDN_KV_F32:
            for (int c = 0; c < nch; c++) x[c] = vld1q_f32((const float *)row + d0 + c * W);
            break;
        case SDN_KV_F16:
            for (int c = 0; c < nch; c++) x[c] = f16x4((const uint16_t *)row + d0 + c * W);
            break;
        case SDN_KV_BF16:
            for (int c = 0; c < nch; c++) x[c] = bf16x4((const uint16_t *)row + d0 + c * W);
            break;
        default:
            if (nch == 4) i8x16((const int8_t *)row + d0, x);
            else
                for (int c = 0; c < nch; c++) x[c] = i8x4((const int8_t *)row + d0 + c * W);
            break;
        }
        for (int b = 0; b < nb; b++) {
            if (!all && !(vis[b] >> j & 1)) continue;
            const float32x4_t wj = vld1q_dup_f32(w + (size_t)b * 64 + j);
            for (int c = 0; c < nch; c++) acc[b][c] = vfmaq_f32(acc[b][c], wj, x[c]); /* fmaf(w, v, acc) */
        }
    }
    if (v->scaled) /* q8 values: the exact integer sums, then fma(isum, su, acc) */
        for (int b = 0; b < nb; b++) {
            const float32x4_t s = vdupq_n_f32(su[b]);
            for (int c = 0; c < nch; c++) vst1q_f32(out[b] + c * W, vfmaq_f32(vld1q_f32(out[b] + c * W), acc[b][c], s));
        }
    else if (v->pairs) /* the tile's own sum, added */
        for (int b = 0; b < nb; b++)
            for (int c = 0; c < nch; c++) vst1q_f32(out[b] + c * W, vaddq_f32(vld1q_f32(out[b] + c * W), acc[b][c]));
    else
        for (int b = 0; b < nb; b++)
            for (int c = 0; c < nch; c++) vst1q_f32(out[b] + c * W, acc[b][c]);
}

INLINE void pv_q(sdn_att_q *const *q, const float *w, const float *su, const sdn_att_vt *v, const int nb, int pf) {
    int d0 = 0;
    for (; d0 + 4 * W <= v->hd; d0 += 4 * W) pv_blk(q, w, su, v, d0, 4, nb, pf);
    for (; d0 < v->hd; d0 += W) pv_blk(q, w, su, v, d0, 1, nb, pf);
}

void SDN_KFN(sdn_att_update)(sdn_att_q *q, int nq, const float *sc, const sdn_att_vt *v) {
    float w[QB_PV * 64] __attribute__((aligned(16))), su[QB_PV];
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
        case 2: pv_q(tmp, w, su, v, 2, pf); break;
        case 3: pv_q(tmp, w, su, v, 3, pf); break;
        default: pv_q(tmp, w, su, v, QB_PV, pf); break;
        }
    }
}

void SDN_KFN(sdn_att_cvt)(const void *src, sdn_kv_type t, float *dst, size_t n) {
    if (t == SDN_KV_F16)
        for (size_t i = 0; i < n; i += W) vst1q_f32(dst + i, f16x4((const uint16_t *)src + i));
    else if (t == SDN_KV_BF16)
        for (size_t i = 0; i < n; i += W) vst1q_f32(dst + i, bf16x4((const uint16_t *)src + i));
    else
        for (size_t i = 0; i < n; i += 16) {
            float32x4_t x[4];
            i8x16((const int8_t *)src + i, x);
            for (int c = 0; c < 4; c++) vst1q_f32(dst + i + 4 * c, x[c]);
        }
}

void SDN_KFN(sdn_att_merge)(float *ACC, const float *acc, float ea, float eb, int hd) {
    const float32x4_t va = vdupq_n_f32(ea), vb = vdupq_n_f32(eb);
    for (int d = 0; d < hd; d += W) vst1q_f32(ACC + d, vfmaq_f32(vmulq_f32(vld1q_f32(ACC + d), va), vld1q_f32(acc + d), vb));
}

void SDN_KFN(sdn_att_scale)(float *o, const float *acc, float s, int hd) {
    const float32x4_t vs = vdupq_n_f32(s);
    for (int d = 0; d < hd; d += W) vst1q_f32(o + d, vmulq_f32(vld1q_f32(acc + d), vs));
}

/* sdn_kv_f16 of n values (n a multiple of 4): clamped to +-65504, then FCVTN (round to nearest
 * even, as the scalar conversion); a NaN becomes the scalar conversion's quiet NaN (sign |
 * 0x7e00, no payload), which FCVTN would not give (it keeps payload bits). */
void SDN_KFN(sdn_kv_f16_row)(const float *x, uint16_t *h, int n) {
    const float32x4_t lo = vdupq_n_f32(-65504.0f), hi = vdupq_n_f32(65504.0f);
    for (int i = 0; i < n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        const float32x4_t c = vminq_f32(hi, vmaxq_f32(lo, v)); /* NaN stays NaN */
        uint16x4_t r = vreinterpret_u16_f16(vcvt_f16_f32(c));
        const uint16x4_t nan = vmovn_u32(vmvnq_u32(vceqq_f32(v, v)));
        const uint16x4_t qn = vorr_u16(vand_u16(r, vdup_n_u16(0x8000)), vdup_n_u16(0x7e00));
        r = vbsl_u16(nan, qn, r);
        vst1_u16(h + i, r);
    }
}
