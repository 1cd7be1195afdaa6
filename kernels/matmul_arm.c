/* matmul_arm.c - the AArch64 kernels of the batched quantized types (Q8_0, Q4_0, Q4_1, Q4_K,
 * Q6_K) and of the activation preparation, on the file's layout and on the packed layout
 * (kernels/matmul_pack.c). Compiled once per AArch64 path (CMakeLists.txt), each time with its
 * own -march and SDN_KVARIANT, so the baseline objects run on any ARMv8.0 CPU:
 *
 *   neon     -march=armv8-a              int8 dot products by SMULL/SMLAL2 + SADALP
 *   dotprod  -march=armv8.2-a+dotprod    SDOT (4-byte dot products into int32 lanes)
 *   i8mm     -march=armv8.2-a+dotprod+i8mm  SMMLA (2x8 by 8x2 int8 products into 2x2 int32) on
 *                                        pairs of activation rows x pairs of weight columns
 *
 * Same bits as the portable kernels (kernels/matmul_portable.c), by construction: a weight
 * block is decoded into int8 levels (Q4_0: nibble - 8, Q4_1 / Q4_K: nibble, Q6_K: 6-bit level,
 * Q8_0: as stored) and multiplied with the prepared int8 activations by exact integer dot
 * products (any order gives the same int32), and the float part of every output element is
 * the portable kernel's statement sequence written out in scalar C here, blocks in order:
 *
 *   Q8_0, Q4_0   acc += (float)isum * (dw * dx)
 *   Q4_1         acc += (float)isum * (dw * dx); accm += mw * s; y = acc + accm
 *   Q4_K         acc += (float)isum * (d * dx); acc -= (float)summ * (dmin * dx)
 *   Q6_K         acc += (float)isum * (d * dx)
 *
 * (Q8_0 and Q4_0 also end with y = acc + accm, accm = 0, as the portable kernel does.) The
 * build uses -ffp-contract=off, so no multiply-add is fused. The activation preparation
 * computes the portable float operations lane by lane (amax by FMAXNM, which ignores NaN as
 * the portable comparison does; rint by FCVTNS, round to nearest even), so its bytes are the
 * portable bytes. Weight blocks of the packed layout are first put back in the file's byte
 * order (4x4 transposes of dwords), then decoded the same way. Types this file does not
 * handle (Q5_0, Q5_1, Q5_K, F32, F16, BF16) return 0 and take the portable kernel. */
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "common/sdn_util.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "kernels/quant_blocks.h"

#if !defined(__aarch64__)
#error "matmul_arm.c is for AArch64"
#endif
#if defined(__ARM_FEATURE_MATMUL_INT8)
#define ARM_I8MM 1
#endif
#if defined(__ARM_FEATURE_DOTPROD)
#define ARM_DOT 1
#endif

/* ------------------------------------------------------------ activations */

/* q = clamp(rint(x * id), -127, 127), NaN -> -127, for 16 values; returns their sum */
static inline int quant16(const float *x, float32x4_t vid, int8_t *q) {
    const float32x4_t lo = vdupq_n_f32(-127.0f), hi = vdupq_n_f32(127.0f);
    int32x4_t r[4];
    for (int i = 0; i < 4; i++) {
        float32x4_t v = vmulq_f32(vld1q_f32(x + 4 * i), vid);
        v = vbslq_f32(vcgeq_f32(v, lo), v, lo); /* !(v >= -127) (NaN too) -> -127 */
        v = vminq_f32(v, hi);
        r[i] = vcvtnq_s32_f32(v); /* round to nearest, ties to even: rintf */
    }
    const int16x8_t a = vcombine_s16(vmovn_s32(r[0]), vmovn_s32(r[1]));
    const int16x8_t b = vcombine_s16(vmovn_s32(r[2]), vmovn_s32(r[3]));
    const int8x16_t v = vcombine_s8(vmovn_s16(a), vmovn_s16(b));
    vst1q_s8(q, v);
    return vaddlvq_s8(v);
}

/* the portable act_scale: amax over len values (NaN ignored), d = amax / 127, id = 127 / amax */
static inline float act_scale(const float *x, int len, float *id) {
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int i = 0; i < len; i += 4) m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(x + i)));
    const float amax = vmaxnmvq_f32(m);
    *id = amax > 0 ? 127.0f / amax : 0.0f;
    return amax / 127.0f;
}

void SDN_KFN(sdn_act_prepare)(uint32_t wtype, const float *X, int64_t ldx, int n, int64_t in, void *act) {
    const size_t stride = sdn_act_row_stride(wtype, in);
    if (!stride) return;
    const int fam = sdn_act_family(wtype);
    for (int r = 0; r < n; r++) {
        const float *x = X + (size_t)r * ldx;
        char *row = (char *)act + (size_t)r * stride;
        memset(row, 0, stride);
        if (fam == SDN_ACT_F32) {
            memcpy(row, x, (size_t)in * sizeof(float));
            continue;
        }
        int8_t *q = (int8_t *)row;
        float *d = (float *)(row + in);
        if (fam == SDN_ACT_Q32) {
            float *s = d + in / 32;
            int32_t *qsum = (int32_t *)(s + in / 32);
            for (int64_t b = 0; b < in / 32; b++) {
                float id;
                d[b] = act_scale(x + 32 * b, 32, &id);
                const float32x4_t vid = vdupq_n_f32(id);
                const int sum = quant16(x + 32 * b, vid, q + 32 * b) + quant16(x + 32 * b + 16, vid, q + 32 * b + 16);
                s[b] = d[b] * (float)sum;
                qsum[b] = sum;
            }
        } else {
            int16_t *bsum = (int16_t *)(row + in + (in / 256) * 4);
            for (int64_t b = 0; b < in / 256; b++) {
                float id;
                d[b] = act_scale(x + 256 * b, 256, &id);
                const float32x4_t vid = vdupq_n_f32(id);
                for (int g = 0; g < 16; g++)
                    bsum[16 * b + g] = (int16_t)quant16(x + 256 * b + 16 * g, vid, q + 256 * b + 16 * g);
            }
        }
    }
}

/* ------------------------------------------------------------ integer dot products */

/* int32 lanes whose sum is the dot product of 16 int8 pairs */
static inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(ARM_DOT)
    return vdotq_s32(acc, a, b);
#else
    /* |a*b| <= 128*128 fits int16; SADALP adds neighbouring pairs into int32 */
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
#endif
}

/* ------------------------------------------------------------ decoded weight blocks */

#define GC 16 /* columns per group (SDN_PACK_COLS) */
#define PG 64 /* activation rows per chunk (the accumulators of a group) */

/* A group's block b, decoded: levels of up to 16 columns (an odd count is padded by repeating
 * the last column, so column pairs are complete), and the per-column scales. */
typedef struct {
    int8_t lv[GC][256] __attribute__((aligned(16)));
    float d[GC], m[GC];   /* Q32: dw, mw (0 if none); K: d, dmin */
    int32_t sc[GC][16];   /* K: sub-block scales (Q4_K 8, Q6_K 16) */
    int32_t mn[GC][8];    /* Q4_K: sub-block mins */
#if defined(ARM_I8MM)
    int8x16_t zp[GC / 2][32]; /* column pairs (c, c+1) as SMMLA operands: chunk k = 8 levels of each */
#endif
} dec_t;

static inline float f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return sdn_fp16_to_fp32(h);
}

static void dec_q32(uint32_t wtype, const uint8_t *blk, int8_t *lv, float *d, float *m) {
    *d = f16_at(blk);
    *m = 0.0f;
    if (wtype == SDN_TYPE_Q8_0) {
        vst1q_s8(lv, vld1q_s8((const int8_t *)blk + 2));
        vst1q_s8(lv + 16, vld1q_s8((const int8_t *)blk + 18));
        return;
    }
    const uint8x16_t qs = vld1q_u8(blk + (wtype == SDN_TYPE_Q4_1 ? 4 : 2));
    int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(qs, vdupq_n_u8(15))), hi = vreinterpretq_s8_u8(vshrq_n_u8(qs, 4));
    if (wtype == SDN_TYPE_Q4_0) {
        lo = vsubq_s8(lo, vdupq_n_s8(8));
        hi = vsubq_s8(hi, vdupq_n_s8(8));
    } else {
        *m = f16_at(blk + 2);
    }
    vst1q_s8(lv, lo);
    vst1q_s8(lv + 16, hi);
}

static void dec_k(uint32_t wtype, const uint8_t *blk, int8_t *lv, float *d, float *dmin, int32_t *sc, int32_t *mn) {
    const uint8x16_t m15 = vdupq_n_u8(15), m48 = vdupq_n_u8(0x30);
    if (wtype == SDN_TYPE_Q6_K) {
        const uint8_t *ql = blk, *qh = blk + 128;
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l += 16) {
                const uint8x16_t a = vld1q_u8(ql + 64 * h + l), b = vld1q_u8(ql + 64 * h + 32 + l), c = vld1q_u8(qh + 32 * h + l);
                int8_t *o = lv + 128 * h + l;
                vst1q_s8(o, vreinterpretq_s8_u8(vorrq_u8(vandq_u8(a, m15), vandq_u8(vshlq_n_u8(c, 4), m48))));
                vst1q_s8(o + 32, vreinterpretq_s8_u8(vorrq_u8(vandq_u8(b, m15), vandq_u8(vshlq_n_u8(c, 2), m48))));
                vst1q_s8(o + 64, vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(a, 4), vandq_u8(c, m48))));
                vst1q_s8(o + 96, vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(b, 4), vandq_u8(vshrq_n_u8(c, 2), m48))));
            }
        for (int j = 0; j < 16; j++) sc[j] = (int8_t)blk[192 + j];
        *d = f16_at(blk + 208);
        *dmin = 0.0f;
        return;
    }
    uint8_t s8[8], m8[8];
    sdn_k4_scale_min(blk + 4, s8, m8);
    for (int j = 0; j < 8; j++) {
        sc[j] = s8[j];
        mn[j] = m8[j];
    }
    const uint8_t *qs = blk + 16;
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l += 16) {
            const uint8x16_t q = vld1q_u8(qs + 32 * c + l);
            vst1q_s8(lv + 64 * c + l, vreinterpretq_s8_u8(vandq_u8(q, m15)));
            vst1q_s8(lv + 64 * c + 32 + l, vreinterpretq_s8_u8(vshrq_n_u8(q, 4)));
        }
    *d = f16_at(blk);
    *dmin = f16_at(blk + 2);
}

/* Where a group's blocks come from: the file's rows, or the packed layout put back in the
 * file's byte order. */
typedef struct {
    uint32_t wtype;
    int bb, vo, nv, nf, fo[2]; /* the packed form (matmul_pack.c) */
    const uint8_t *W;          /* file layout: rows of row_bytes */
    size_t row_bytes;
    const uint8_t *P;          /* packed layout */
    int64_t nb;
    uint8_t raw[GC][224] __attribute__((aligned(16))); /* packed: the group's block, file order */
} src_t;

static int src_init(src_t *s, uint32_t wtype, int64_t in) {
    switch (wtype) {
    case SDN_TYPE_Q8_0: s->bb = 34, s->vo = 2, s->nv = 8, s->nf = 1, s->fo[0] = 0; break;
    case SDN_TYPE_Q4_0: s->bb = 18, s->vo = 2, s->nv = 4, s->nf = 1, s->fo[0] = 0; break;
    case SDN_TYPE_Q4_1: s->bb = 20, s->vo = 4, s->nv = 4, s->nf = 2, s->fo[0] = 0, s->fo[1] = 2; break;
    case SDN_TYPE_Q4_K: s->bb = 144, s->vo = 0, s->nv = 36, s->nf = 0; break;
    case SDN_TYPE_Q6_K: s->bb = 210, s->vo = 0, s->nv = 52, s->nf = 1, s->fo[0] = 208; break;
    default: return 0;
    }
    s->wtype = wtype;
    s->nb = in / sdn_type_block_elems(wtype);
    return s->nb > 0;
}

/* Pointers to block b of columns o..o+nc-1 (nc padded to even by repeating the last). For the
 * packed layout o is a multiple of GC: group o / GC, vector t of block b at byte
 * (b * nv + t) * 64, column c's dword at 4c; fields after the vectors, 32 bytes per (f, b). */
static void src_blocks(src_t *s, int64_t o, int nc, int64_t b, const uint8_t *blk[GC]) {
    const int ncp = (nc + 1) & ~1;
    if (!s->P) {
        for (int c = 0; c < ncp; c++) blk[c] = s->W + (size_t)(o + (c < nc ? c : nc - 1)) * s->row_bytes + (size_t)b * s->bb;
        return;
    }
    const uint8_t *G = s->P + (size_t)(o / GC) * (size_t)s->nb * GC * (size_t)s->bb;
    const uint8_t *V = G + (size_t)b * s->nv * 64;
    for (int t = 0; t < s->nv; t += 4)
        for (int q = 0; q < GC / 4; q++) {
            if (4 * q >= ncp) break;
            const uint32x4_t r0 = vld1q_u32((const uint32_t *)(V + (size_t)(t + 0) * 64 + 16 * q));
            const uint32x4_t r1 = vld1q_u32((const uint32_t *)(V + (size_t)(t + 1) * 64 + 16 * q));
            const uint32x4_t r2 = vld1q_u32((const uint32_t *)(V + (size_t)(t + 2) * 64 + 16 * q));
            const uint32x4_t r3 = vld1q_u32((const uint32_t *)(V + (size_t)(t + 3) * 64 + 16 * q));
            const uint32x4_t t0 = vtrn1q_u32(r0, r1), t1 = vtrn2q_u32(r0, r1), t2 = vtrn1q_u32(r2, r3), t3 = vtrn2q_u32(r2, r3);
            const uint64x2_t u0 = vreinterpretq_u64_u32(t0), u1 = vreinterpretq_u64_u32(t1);
            const uint64x2_t u2 = vreinterpretq_u64_u32(t2), u3 = vreinterpretq_u64_u32(t3);
            uint8_t *dst = &s->raw[4 * q][s->vo + 4 * t];
            vst1q_u8(dst, vreinterpretq_u8_u64(vtrn1q_u64(u0, u2)));
            vst1q_u8(dst + 224, vreinterpretq_u8_u64(vtrn1q_u64(u1, u3)));
            vst1q_u8(dst + 448, vreinterpretq_u8_u64(vtrn2q_u64(u0, u2)));
            vst1q_u8(dst + 672, vreinterpretq_u8_u64(vtrn2q_u64(u1, u3)));
        }
    const uint8_t *F = G + (size_t)s->nb * s->nv * 64;
    for (int f = 0; f < s->nf; f++)
        for (int c = 0; c < ncp; c++) memcpy(&s->raw[c][s->fo[f]], F + ((size_t)f * s->nb + b) * 32 + 2 * c, 2);
    for (int c = 0; c < ncp; c++) blk[c] = s->raw[c];
}

#if defined(ARM_I8MM)
/* two int8 runs a, b of len bytes as SMMLA operands: out[k] = 8 bytes of a, then 8 of b, chunk k */
static inline void zip_chunks(const int8_t *a, const int8_t *b, int len, int8x16_t *out) {
    for (int i = 0; i < len; i += 16) {
        const int64x2_t x = vreinterpretq_s64_s8(vld1q_s8(a + i)), y = vreinterpretq_s64_s8(vld1q_s8(b + i));
        out[i / 8] = vreinterpretq_s8_s64(vzip1q_s64(x, y));
        out[i / 8 + 1] = vreinterpretq_s8_s64(vzip2q_s64(x, y));
    }
}

#endif

/* Decode block b of columns o..o+nc-1; pairs: also the SMMLA column pairs (batches of 2+ rows). */
static void decode(src_t *s, int64_t o, int nc, int64_t b, dec_t *D, int pairs) {
    const uint8_t *blk[GC];
    src_blocks(s, o, nc, b, blk);
    const int ncp = (nc + 1) & ~1;
    for (int c = 0; c < ncp; c++) {
        if (sdn_act_family(s->wtype) == SDN_ACT_Q32) dec_q32(s->wtype, blk[c], D->lv[c], &D->d[c], &D->m[c]);
        else dec_k(s->wtype, blk[c], D->lv[c], &D->d[c], &D->m[c], D->sc[c], D->mn[c]);
    }
#if defined(ARM_I8MM)
    const int len = sdn_act_family(s->wtype) == SDN_ACT_Q32 ? 32 : 256;
    for (int c = 0; pairs && c < ncp; c += 2) zip_chunks(D->lv[c], D->lv[c + 1], len, D->zp[c / 2]);
#else
    (void)pairs;
#endif
}

/* ------------------------------------------------------------ integer parts */

/* The exact integer parts of one output element (row x, column c of D) for block b:
 * Q32 isum; Q4_K isum and summ; Q6_K isum (the -32 offset included). */
static inline void ints1(uint32_t wtype, const dec_t *D, int c, const int8_t *xq, const int16_t *bs, int32_t *isum,
                         int32_t *summ) {
    const int8_t *w = D->lv[c];
    if (wtype == SDN_TYPE_Q4_K) {
        int32x4_t acc = vdupq_n_s32(0);
        int32_t sm = 0;
        for (int j = 0; j < 8; j++) {
            int32x4_t p = dot16(vdupq_n_s32(0), vld1q_s8(w + 32 * j), vld1q_s8(xq + 32 * j));
            p = dot16(p, vld1q_s8(w + 32 * j + 16), vld1q_s8(xq + 32 * j + 16));
            acc = vmlaq_n_s32(acc, p, D->sc[c][j]);
            sm += D->mn[c][j] * (bs[2 * j] + bs[2 * j + 1]);
        }
        *isum = vaddvq_s32(acc);
        *summ = sm;
    } else if (wtype == SDN_TYPE_Q6_K) {
        int32x4_t acc = vdupq_n_s32(0);
        int32_t off = 0;
        for (int j = 0; j < 16; j++) {
            acc = vmlaq_n_s32(acc, dot16(vdupq_n_s32(0), vld1q_s8(w + 16 * j), vld1q_s8(xq + 16 * j)), D->sc[c][j]);
            off += D->sc[c][j] * bs[j];
        }
        *isum = vaddvq_s32(acc) - 32 * off;
    } else {
        int32x4_t acc = dot16(vdupq_n_s32(0), vld1q_s8(w), vld1q_s8(xq));
        *isum = vaddvq_s32(dot16(acc, vld1q_s8(w + 16), vld1q_s8(xq + 16)));
    }
}

#if defined(ARM_I8MM)
/* 2x2 int32 [r0c0, r0c1, r1c0, r1c1] of the 8-byte chunks k0..k0+nk-1: A[k] interleaves the two
 * activation rows' chunk k, B[k] the two weight columns' (SMMLA: d[2i+j] += sum a[8i+t] b[8j+t]) */
static inline int32x4_t mm_chunks(const int8x16_t *A, const int8x16_t *B, int k0, int nk) {
    int32x4_t t = vdupq_n_s32(0);
    for (int k = k0; k < k0 + nk; k++) t = vmmlaq_s32(t, A[k], B[k]);
    return t;
}

/* The integer parts of rows (x0, x1) x columns (c, c+1): SMMLA per sub-block, then the
 * per-column scales; results in [r][c] order as ints1 would give them. */
static inline void ints22(uint32_t wtype, const dec_t *D, int c, const int8x16_t *A, const int16_t *bs0, const int16_t *bs1,
                          int32_t isum[4], int32_t summ[4]) {
    const int8x16_t *B = D->zp[c / 2];
    if (wtype == SDN_TYPE_Q4_K) {
        int32x4_t acc = vdupq_n_s32(0);
        for (int j = 0; j < 8; j++) {
            const int32_t s2[4] = {D->sc[c][j], D->sc[c + 1][j], D->sc[c][j], D->sc[c + 1][j]};
            acc = vmlaq_s32(acc, mm_chunks(A, B, 4 * j, 4), vld1q_s32(s2));
        }
        vst1q_s32(isum, acc);
        const int16_t *bsr[2] = {bs0, bs1};
        for (int e = 0; e < 4; e++) {
            const int16_t *bs = bsr[e >> 1];
            const int32_t *mn = D->mn[c + (e & 1)];
            int32_t sm = 0;
            for (int j = 0; j < 8; j++) sm += mn[j] * (bs[2 * j] + bs[2 * j + 1]);
            summ[e] = sm;
        }
    } else if (wtype == SDN_TYPE_Q6_K) {
        int32x4_t acc = vdupq_n_s32(0);
        for (int j = 0; j < 16; j++) {
            const int32_t s2[4] = {D->sc[c][j], D->sc[c + 1][j], D->sc[c][j], D->sc[c + 1][j]};
            acc = vmlaq_s32(acc, mm_chunks(A, B, 2 * j, 2), vld1q_s32(s2));
        }
        vst1q_s32(isum, acc);
        const int16_t *bsr[2] = {bs0, bs1};
        for (int e = 0; e < 4; e++) {
            const int16_t *bs = bsr[e >> 1];
            const int32_t *sc = D->sc[c + (e & 1)];
            int32_t off = 0;
            for (int j = 0; j < 16; j++) off += sc[j] * bs[j];
            isum[e] -= 32 * off;
        }
    } else {
        vst1q_s32(isum, mm_chunks(A, B, 0, 4));
    }
}
#endif

/* ------------------------------------------------------------ the kernel */

/* The float part of one element for block b: the portable statements (see the top). */
static inline void fstep(uint32_t wtype, const dec_t *D, int c, float dx, float sx, int32_t isum, int32_t summ, float *acc,
                         float *accm) {
    if (wtype == SDN_TYPE_Q4_K) {
        *acc += (float)isum * (D->d[c] * dx);
        *acc -= (float)summ * (D->m[c] * dx);
    } else if (wtype == SDN_TYPE_Q6_K) {
        *acc += (float)isum * (D->d[c] * dx);
    } else {
        *acc += (float)isum * (D->d[c] * dx);
        if (wtype == SDN_TYPE_Q4_1) *accm += D->m[c] * sx;
    }
}

static void run(src_t *s, int64_t in, const char *act, size_t stride, int n, float *Y, int64_t ldy, int64_t o0, int64_t o1) {
    dec_t D; /* about 12 KB of stack with src_t and the accumulators: no thread-local storage,
              * which Android before API 29 only emulates */
    const uint32_t wt = s->wtype;
    const int q32 = sdn_act_family(wt) == SDN_ACT_Q32;
    const int be = q32 ? 32 : 256;
    float acc[PG][GC], accm[PG][GC];
    for (int64_t o = o0; o < o1; o += GC) {
        const int nc = o1 - o < GC ? (int)(o1 - o) : GC;
        for (int r0 = 0; r0 < n; r0 += PG) {
            const int nr = n - r0 < PG ? n - r0 : PG;
            memset(acc, 0, sizeof acc);
            memset(accm, 0, sizeof accm);
            for (int64_t b = 0; b < s->nb; b++) {
                decode(s, o, nc, b, &D, nr >= 2);
                int r = 0;
#if defined(ARM_I8MM)
                for (; r + 1 < nr; r += 2) {
                    const char *x0 = act + (size_t)(r0 + r) * stride, *x1 = x0 + stride;
                    int8x16_t A[32];
                    zip_chunks(sdn_act_q(x0) + be * b, sdn_act_q(x1) + be * b, be, A);
                    const float dx0 = sdn_act_d(x0, in)[b], dx1 = sdn_act_d(x1, in)[b];
                    const float sx0 = q32 ? sdn_act_s(x0, in)[b] : 0.0f, sx1 = q32 ? sdn_act_s(x1, in)[b] : 0.0f;
                    const int16_t *bs0 = q32 ? NULL : sdn_act_bsum(x0, in) + 16 * b;
                    const int16_t *bs1 = q32 ? NULL : sdn_act_bsum(x1, in) + 16 * b;
                    for (int c = 0; c < nc; c += 2) {
                        int32_t is[4], sm[4] = {0, 0, 0, 0};
                        ints22(wt, &D, c, A, bs0, bs1, is, sm);
                        fstep(wt, &D, c, dx0, sx0, is[0], sm[0], &acc[r][c], &accm[r][c]);
                        fstep(wt, &D, c, dx1, sx1, is[2], sm[2], &acc[r + 1][c], &accm[r + 1][c]);
                        if (c + 1 < nc) {
                            fstep(wt, &D, c + 1, dx0, sx0, is[1], sm[1], &acc[r][c + 1], &accm[r][c + 1]);
                            fstep(wt, &D, c + 1, dx1, sx1, is[3], sm[3], &acc[r + 1][c + 1], &accm[r + 1][c + 1]);
                        }
                    }
                }
#endif
                for (; r < nr; r++) {
                    const char *x = act + (size_t)(r0 + r) * stride;
                    const int8_t *xq = sdn_act_q(x) + be * b;
                    const float dx = sdn_act_d(x, in)[b];
                    const float sx = q32 ? sdn_act_s(x, in)[b] : 0.0f;
                    const int16_t *bs = q32 ? NULL : sdn_act_bsum(x, in) + 16 * b;
                    for (int c = 0; c < nc; c++) {
                        int32_t is, sm = 0;
                        ints1(wt, &D, c, xq, bs, &is, &sm);
                        fstep(wt, &D, c, dx, sx, is, sm, &acc[r][c], &accm[r][c]);
                    }
                }
            }
            for (int r = 0; r < nr; r++)
                for (int c = 0; c < nc; c++) Y[(size_t)(r0 + r) * ldy + o + c] = q32 ? acc[r][c] + accm[r][c] : acc[r][c];
        }
    }
}

static int handled(uint32_t wtype) {
    return wtype == SDN_TYPE_Q8_0 || wtype == SDN_TYPE_Q4_0 || wtype == SDN_TYPE_Q4_1 || wtype == SDN_TYPE_Q4_K ||
           wtype == SDN_TYPE_Q6_K;
}

int SDN_KFN(sdn_matmul_arm)(uint32_t wtype, const void *W, size_t row_bytes, int64_t in, const void *act, int n, float *Y,
                            int64_t ldy, int64_t o0, int64_t o1) {
    src_t s;
    const size_t stride = sdn_act_row_stride(wtype, in);
    if (!handled(wtype) || !stride || !src_init(&s, wtype, in)) return 0;
    s.W = W;
    s.row_bytes = row_bytes;
    s.P = NULL;
    if (n > 0 && o1 > o0) run(&s, in, act, stride, n, Y, ldy, o0, o1);
    return 1;
}

int SDN_KFN(sdn_matmul_arm_packed)(uint32_t wtype, const void *P, int64_t in, const void *act, int n, float *Y, int64_t ldy,
                                   int64_t o0, int64_t o1) {
    src_t s;
    const size_t stride = sdn_act_row_stride(wtype, in);
    if (!handled(wtype) || !stride || o0 % GC || !src_init(&s, wtype, in)) return 0;
    s.W = NULL;
    s.P = P;
    if (n > 0 && o1 > o0) run(&s, in, act, stride, n, Y, ldy, o0, o1);
    return 1;
}
