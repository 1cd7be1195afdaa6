/* attention_kern.h - the per-tile attention kernels behind attention/attention.c, one set per
 * kernel path (portable C in attention.c; AVX2, AVX2+VNNI and AVX-512 variants compiled from
 * attention_avx2.c; neon, dotprod and i8mm variants compiled from attention_arm.c; see
 * CMakeLists.txt), and the arithmetic they must all share.
 *
 * Every path computes the same bits: the kernels only change which lanes are computed
 * together, never an operation or its order. Per query and tile of 64 positions:
 *   score     f32/f16 keys: s_j = (fma chain over d = 0 .. hd-1 of q[d] * k_j[d], from 0) * qs
 *             bf16 keys:    qb = the query rounded to BF16 (sdn_kv_bf16); acc = 0, then for
 *                           each pair g = 0 .. hd/2-1 (an odd hd padded with a zero):
 *                           acc = fma(qb[2g+1], k_j[2g+1], acc), acc = fma(qb[2g], k_j[2g], acc);
 *                           s_j = acc * qs. This is VDPBF16PS, element by element as Intel's
 *                           SDM states it (the odd product first, each step rounded to nearest
 *                           even); its DAZ and FTZ never act, because sdn_kv_bf16 stores every
 *                           magnitude below 2^-30 as zero: every product and partial sum is a
 *                           multiple of 2^-74, so zero or a normal float (test_attention
 *                           checks the instruction against this statement where the CPU has it)
 *             q8 keys:      per block b of 32 elements, the exact int32 dot_b = sum over the
 *                           block of q8[d] * k8_j[d], and w_b = ks_jb * qs_b; then
 *                           s_j = (float)dot_0 * w_0, s_j = fma((float)dot_b, w_b, s_j) for b >= 1
 *   update    over the query's visible lanes (a 64-bit mask): mt = max s_j; when the running
 *             max m is -inf, m = mt; else if mt > m: a = att_exp(m - mt), acc[d] *= a, l *= a,
 *             m = mt; then p_j = att_exp(s_j - m) for visible lanes, 0 for the others;
 *             l = l + tsum64(p); then
 *               f32/f16 values: acc[d] = fma(p_j, v_j[d], acc[d]) for the visible lanes j in
 *                 increasing order
 *               bf16 values: the weights rounded to BF16 first, b_j = sdn_kv_bf16(p_j) (0 for
 *                 invisible lanes; a weight below 2^-30 becomes 0), and l = l + tsum64(b) in
 *                 place of tsum64(p); then per d a fresh sum t = 0 and, for each pair of lanes
 *                 i = 0 .. 31 in order, t = fma(b_{2i+1}, v_{2i+1}[d], t) and then
 *                 t = fma(b_{2i}, v_{2i}[d], t) (VDPBF16PS's order, as for bf16 keys); last
 *                 acc[d] = acc[d] + t. Stored values are finite (sdn_kv_bf16v), so a lane of
 *                 zero weight adds exactly nothing (t is never -0) and may be skipped; every
 *                 b_j and v_j is 0 or a multiple of 2^-37 of at least 2^-30, so every t is 0 or
 *                 at least 2^-74 in magnitude and the instruction's DAZ and FTZ never act
 *               q8 values (v_j[d] the stored integer, vs_j the row's scale): the weights
 *                 w_j = p_j * vs_j (0 for invisible lanes) are quantized to 8 bits for the
 *                 tile (att_wq8): u_j = min(rne(w_j * r), 255) with r = 255 / wmax, wmax =
 *                 max_j w_j, and su = wmax / 255 (when wmax <= 2^-100: every u_j = 0, su = 0);
 *                 then isum[d] = the exact integer sum over the lanes of u_j * v_j[d] (below
 *                 64 * 255 * 127 < 2^24, so any order, in integers or floats, gives it) and
 *                 acc[d] = fma((float)isum[d], su, acc[d]). Integer sums are what lets an
 *                 int8 dot-product kernel compute the values' products with the same bits
 *                 as the scalar code
 *   att_exp   x = max(x, -87); k = nearbyint(x * 1.44269504f); r = fma(-k, 0.69314718f, x);
 *             a degree-6 Taylor polynomial of e^r by Horner's rule with fma, times 2^k built
 *             from the exponent bits (the softmax exponential of engine/forward.c)
 *   tsum64    pairwise: u_i = p_i + p_{i+32}, then halves again (16, 8, 4, 2, 1)
 * Conversions are exact (F16 and BF16 -> F32, int8 -> float). */
#ifndef SDN_ATTENTION_KERN_H
#define SDN_ATTENTION_KERN_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "attention/kv_cache.h"

/* One query (a row's head) as the kernels see it. */
typedef struct sdn_att_q {
    const float *q;   /* f32/f16 keys: the query, hd floats */
    const int8_t *q8; /* q8 keys: the quantized query, hd4 bytes (zero-padded), a scale per block of 32 */
    const int32_t *q8bias; /* q8 keys: per block, 128 * the sum of its bytes (the keys' offset, removed exactly) */
    const float *q8s; /* q8 keys: per block, its scale times the score scale (qs_b) */
    const uint16_t *qb; /* bf16 keys: the query rounded to BF16, hd rounded up to even (zero-padded) */
    float qs;         /* f32/f16 keys: the score scale */
    uint64_t vis;     /* visible lanes of the tile being processed */
    float m, l;       /* running max and sum of the current super-tile */
    float *acc;       /* [hd] running output of the current super-tile */
} sdn_att_q;

/* One key tile of the cache (kv_cache.h layout): 64 slots. */
typedef struct sdn_att_kt {
    sdn_kv_type tk;
    int hd, hd4, kblocks;
    const void *k;       /* the tile */
    const uint16_t *ks;  /* q8: the 64 slots' F16 scales of each block: [block][64] */
    const uint8_t *pf;   /* the next tile's keys, prefetched while this one is computed (or NULL) */
    size_t pf_bytes;
} sdn_att_kt;

/* The values a tile update reads: lane j's row at vrow[j] (stored as tv, hd elements); with
 * scaled (q8 values) the weight of lane j is p_j * vsc[j]. q8 rows may be handed over already
 * converted to floats (tv f32, scaled 1): the conversion is exact, the bits the same. */
typedef struct sdn_att_vt {
    sdn_kv_type tv;
    int hd, scaled;
    const uint8_t *vrow[64];
    float vsc[64];
    const uint8_t *pf;   /* the next tile's first value row, prefetched row by row (or NULL) */
    size_t pf_row;       /* bytes from one of its rows to the next */
    /* q8 values, for the kernels that take them so (sdn_att_t4_fn; else NULL): the tile's 64
     * rows transposed in groups of 4 positions, [16][hd][4] bytes: byte (g, d, i) is element d
     * of lane 4g + i, the operand shape of VPDPBUSD and of an AMX B tile */
    const int8_t *t4;
    /* bf16 values: the pair arithmetic of attention_kern.h (set also when the rows are handed
     * over converted to floats, tv f32) */
    int pairs;
    /* bf16 values, for the kernels that take them so (sdn_att_t2_fn; else NULL; vrow stays
     * valid): the tile's rows transposed in pairs of positions, [32][hd][2] BF16: element
     * (i, d, e) is element d of lane 2i + e, the operand shape of VDPBF16PS */
    const uint16_t *t2;
} sdn_att_vt;

/* t4[(g * hd + d) * 4 + i] = element d of row vrow[4g + i] (q8 values), g < 16, d < hd (a
 * multiple of 64). */
typedef void (*sdn_att_t4_fn)(const sdn_att_vt *v, int8_t *t4);
/* t2[(i * hd + d) * 2 + e] = element d of row vrow[2i + e] (bf16 values), i < 32, d < hd (a
 * multiple of 64). */
typedef void (*sdn_att_t2_fn)(const sdn_att_vt *v, uint16_t *t2);

/* sc[i * 64 + j] = score of query i against slot j of tile t, for i < nq (every lane, visible
 * or not; invisible lanes may hold anything, NaN included). */
typedef void (*sdn_att_scores_fn)(const sdn_att_kt *t, const sdn_att_q *q, int nq, float *sc);
/* The update of each query i < nq with its scores sc + i * 64 over its lanes q[i].vis (none:
 * the query is left as it is). */
typedef void (*sdn_att_update_fn)(sdn_att_q *q, int nq, const float *sc, const sdn_att_vt *v);

/* dst[i] = the exact float of src[i] (stored as t: f16, bf16 or q8's int8), i < n (a multiple of 16). */
typedef void (*sdn_att_cvt_fn)(const void *src, sdn_kv_type t, float *dst, size_t n);

/* ACC[d] = fma(acc[d], eb, ACC[d] * ea) for d < hd (the merge of a super-tile, attention.h). */
typedef void (*sdn_att_merge_fn)(float *ACC, const float *acc, float ea, float eb, int hd);
/* o[d] = acc[d] * s for d < hd. */
typedef void (*sdn_att_scale_fn)(float *o, const float *acc, float s, int hd);

#define SDN_ATT_KDECL(v)                                                                                   \
    void sdn_att_scores_##v(const sdn_att_kt *t, const sdn_att_q *q, int nq, float *sc);                \
    void sdn_att_update_##v(sdn_att_q *q, int nq, const float *sc, const sdn_att_vt *v);                \
    void sdn_att_cvt_##v(const void *src, sdn_kv_type t, float *dst, size_t n);                         \
    void sdn_att_merge_##v(float *ACC, const float *acc, float ea, float eb, int hd);                   \
    void sdn_att_scale_##v(float *o, const float *acc, float s, int hd);                                \
    void sdn_kv_f16_row_##v(const float *x, uint16_t *h, int n);
SDN_ATT_KDECL(portable)
SDN_ATT_KDECL(avx2)
SDN_ATT_KDECL(avx2vnni)
SDN_ATT_KDECL(avx512)
SDN_ATT_KDECL(avx512bf16)
SDN_ATT_KDECL(neon)
/* bf16 keys' scores on AMX-BF16 tiles (attention_amx.c: the instruction's own bits, the amx
 * path's; other key types and head dimensions not a multiple of 32 go to the avx512bf16
 * kernel). */
void sdn_att_scores_amxbf16(const sdn_att_kt *t, const sdn_att_q *q, int nq, float *sc);
SDN_ATT_KDECL(dotprod)
SDN_ATT_KDECL(i8mm)
void sdn_att_t4_avx512(const sdn_att_vt *v, int8_t *t4); /* the sdn_att_t4_fn (attention_avx2.c) */
void sdn_att_t4_avx512bf16(const sdn_att_vt *v, int8_t *t4);
void sdn_att_t2_avx512bf16(const sdn_att_vt *v, uint16_t *t2); /* the sdn_att_t2_fn (VDPBF16PS) */

/* The scalar definitions (also what the portable kernels run). */
static inline float sdn_att_exp(float x) {
    if (x < -87.0f) x = -87.0f;
    const float k = sdn_kv_round(x * 1.44269504f);
    const float r = fmaf(-k, 0.69314718f, x);
    float p = 1.0f / 720;
    p = fmaf(p, r, 1.0f / 120);
    p = fmaf(p, r, 1.0f / 24);
    p = fmaf(p, r, 1.0f / 6);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    const uint32_t bits = (uint32_t)((int32_t)k + 127) << 23;
    float e;
    memcpy(&e, &bits, 4);
    return p * e;
}

/* att_wq8's scalars: *r and *su of the tile's largest weight wmax; 0 when the tile's weights
 * are all 0 (wmax <= 2^-100: every u_j = 0, su = 0). */
static inline int sdn_att_wq8_scale(float wmax, float *r, float *su) {
    if (!(wmax > 0x1p-100f)) {
        *r = 0.0f;
        *su = 0.0f;
        return 0;
    }
    *r = 255.0f / wmax;
    *su = wmax / 255.0f;
    return 1;
}

/* u_j of one weight (att_wq8): rne(w * r), at most 255. */
static inline float sdn_att_wq8(float w, float r) {
    const float u = sdn_kv_round(w * r);
    return u < 255.0f ? u : 255.0f;
}

static inline float sdn_att_tsum64(const float *p) {
    float u[32];
    for (int i = 0; i < 32; i++) u[i] = p[i] + p[i + 32];
    for (int w = 16; w >= 1; w /= 2)
        for (int i = 0; i < w; i++) u[i] = u[i] + u[i + w];
    return u[0];
}

#endif
