/* matmul_cols_avx2.c - column-parallel kernels for Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1:
 * one vector lane per output column, so each weight block is unpacked once and reused for
 * every activation row, and the float work per block is one convert + two multiplies + one
 * add per row for a whole vector of columns.
 *
 * Compiled per SIMD variant (matmul_internal.h): with AVX-512 a group is 16 columns (zmm),
 * otherwise 8 (ymm). For a group of columns and a 32-element block b, the weight block is
 * transposed into 8 vectors V[t] (t = 0..7), lane c of V[t] = the 4 weight levels of column c
 * at elements 4t..4t+3 (unsigned: Q4 nibbles as stored, Q5 nibble | 5th bit << 4, Q8_0 levels
 * + 128), the layout of a vpdpbusd operand (and of an AMX B tile). Then per activation row, with the row's 4 bytes at
 * 4t broadcast to all lanes:
 *   isum = -off * qsum[b] + sum_t dpbusd(V[t], x[4t..4t+3])   (exact: the block's sum w*q)
 *   acc  = acc + (float)isum * (dw * dx)                        (dw per lane, dx broadcast)
 *   accm = accm + mw * s                                        (Q4_1, Q5_1: the min term)
 * (off = 128, 8, 16 for Q8_0, Q4_0, Q5_0; 0 for the affine types)
 *   y    = acc (+ accm)
 * which is exactly the per-element float sequence of the portable kernels (matmul_portable.c,
 * port_q32): blocks in order, one accumulator, no FMA. So these kernels give the portable
 * bits, whatever the vector width, the batch size or the tile (batch invariance across
 * paths, docs/kernels.md).
 *
 * Batches of up to COL_FUSE_ROWS rows transpose each block in registers as they go; larger ones
 * first transpose the whole group (all blocks) into a per-thread scratch buffer that all row
 * tiles then read from cache. Without VNNI (plain AVX2) Q8_0 uses |w| and sign(x, w) with
 * vpmaddubsw + vpmaddwd (exact for these ranges, see matmul_avx2.h).
 *
 * Packed weights (matmul_pack.c) skip the gather and the transposes: build_pk loads a block's
 * vectors as they are stored, and the same tile code runs on them (sdn_matmul_cols_packed).
 * One-row Q8_0 calls on packed weights walk two groups at once (tile1_pair, pk_drive): one
 * contiguous stream left a core short of memory-level parallelism (the Qwen2.5-0.5B-shape
 * Q8_0 one-row step at 1 thread: 27.5 ms with one, 24.0 ms with two, medians of 5
 * interleaved rounds); measured no faster for Q4_0 / Q4_1, which keep one stream. */
#include "kernels/matmul_internal.h"

#ifdef SDN_MATMUL_AVX2
#include <stdlib.h>

#include "kernels/matmul_avx2.h"

#include "kernels/matmul_cols.h"

#define RT COL_RT

/* Weight-side data of one (column group, block): 8 transposed level vectors, for plain-AVX2
 * Q8_0 also the 8 signed level vectors (for sign(x, w)), then per-lane d and m. */
typedef struct {
    vi v[8];
#if CW == 8 && !VNNI_DP
    vi sg[8];
#endif
    float d[CW], m[CW];
} __attribute__((aligned(64))) wblk;

SDN_INLINE size_t blk_bytes(uint32_t wtype) {
    switch (wtype) {
    case SDN_TYPE_Q8_0: return 34;
    case SDN_TYPE_Q4_0: return 18;
    case SDN_TYPE_Q5_0: return 22;
    case SDN_TYPE_Q5_1: return 24;
    default: return 20; /* Q4_1 */
    }
}
/* The types with a min term (x = d * q + m), the 5-bit types, and the offset of the unsigned
 * levels the dot products see (Q8_0 + 128 with VNNI, Q4_0 + 8, Q5_0 + 16; the affine types
 * have none). */
#define IS_AFFINE(w) ((w) == SDN_TYPE_Q4_1 || (w) == SDN_TYPE_Q5_1)
#define IS_Q5(w) ((w) == SDN_TYPE_Q5_0 || (w) == SDN_TYPE_Q5_1)
SDN_INLINE int level_off(uint32_t wtype) {
    switch (wtype) {
    case SDN_TYPE_Q8_0: return VNNI_DP ? 128 : 0;
    case SDN_TYPE_Q4_0: return 8;
    case SDN_TYPE_Q5_0: return 16;
    default: return 0;
    }
}
/* Bytes of the qh field before the nibbles (Q5_0: qh at 2, Q5_1: at 4) and of the nibbles. */
SDN_INLINE size_t qs_off(uint32_t wtype) {
    switch (wtype) {
    case SDN_TYPE_Q4_1: return 4;
    case SDN_TYPE_Q5_0: return 6;
    case SDN_TYPE_Q5_1: return 8;
    default: return 2; /* Q4_0 (Q8_0's levels too) */
    }
}

/* The 5th bits of vector j (elements 4j..4j+3 of the block, byte k = element 4j + k) as
 * 0x10 in each byte, lane c from column c's qh. hb_file: qh as in the file (element e's bit
 * is bit e); the byte holding the four bits is broadcast within its dword (vpshufb), then
 * each byte tests its own bit. hb_pk: qh as packed (matmul_pack.c, qh_perm: element 4j + k's
 * bit is bit j of byte k), one shift and one mask. */
SDN_INLINE vi hb_file(vi qh, int j) {
    const int s = j >> 1;
    const int mask = (j & 1) ? (int)0x80402010 : 0x08040201;
#if CW == 16
    const __m512i idx = _mm512_set4_epi32((12 + s) * 0x01010101, (8 + s) * 0x01010101, (4 + s) * 0x01010101,
                                          s * 0x01010101);
    const __mmask64 k = _mm512_test_epi8_mask(_mm512_shuffle_epi8(qh, idx), _mm512_set1_epi32(mask));
    return _mm512_maskz_mov_epi8(k, _mm512_set1_epi8(0x10));
#else
    const __m256i idx = _mm256_setr_epi32(s * 0x01010101, (4 + s) * 0x01010101, (8 + s) * 0x01010101,
                                          (12 + s) * 0x01010101, s * 0x01010101, (4 + s) * 0x01010101,
                                          (8 + s) * 0x01010101, (12 + s) * 0x01010101);
    const __m256i m = _mm256_set1_epi32(mask);
    const __m256i x = _mm256_and_si256(_mm256_shuffle_epi8(qh, idx), m);
    return _mm256_and_si256(_mm256_cmpeq_epi8(x, m), _mm256_set1_epi8(0x10));
#endif
}
SDN_INLINE vi hb_pk(vi qhp, int j) {
    const vi x = j < 4 ? VI_SLL32(qhp, 4 - j) : j == 4 ? qhp : VI_SRL32(qhp, j - 4);
    return VI_AND(x, VI_SET1(0x10101010));
}

/* Unpack block b of the group's rows r[0..CW) into *wb. */
SDN_INLINE void build(uint32_t wtype, const uint8_t *const *r, int64_t b, size_t pf, wblk *wb) {
    const size_t off = (size_t)b * blk_bytes(wtype);
    for (int c = 0; c < CW; c++) sdn_prefetch(r[c] + pf + off);
    const vi dm = gather32(r, off); /* d (and Q4_1's m) of every column, F16C-converted */
    VF_STORE(wb->d, vf_from_f16(dm, 0));
    if (IS_AFFINE(wtype)) VF_STORE(wb->m, vf_from_f16(dm, 1));
    if (wtype == SDN_TYPE_Q8_0) {
        vi w[8];
        transpose32(r, off + 2, w);
        for (int t = 0; t < 8; t++) {
            if (VNNI_DP) {
                wb->v[t] = VI_XOR(w[t], VI_SET1((int)0x80808080)); /* w + 128, unsigned */
            } else {
#if CW == 8 && !VNNI_DP
                wb->v[t] = _mm256_sign_epi8(w[t], w[t]); /* |w| */
                wb->sg[t] = w[t];
#endif
            }
        }
    } else {
        vi p[4];
        transpose16(r, off + qs_off(wtype), p);
        const vi m4 = VI_SET1(0x0F0F0F0F);
        for (int t = 0; t < 4; t++) {
            wb->v[t] = VI_AND(p[t], m4);                /* elements 4t..4t+3: low nibbles */
            wb->v[4 + t] = VI_AND(VI_SRL16(p[t], 4), m4); /* elements 16+4t..: high nibbles */
        }
        if (IS_Q5(wtype)) { /* the 5th bits from qh, just before the nibbles */
            const vi qh = gather32(r, off + qs_off(wtype) - 4);
            for (int t = 0; t < 8; t++) wb->v[t] = VI_OR(wb->v[t], hb_file(qh, t));
        }
    }
}

/* Block b of a group of packed weights (matmul_pack.c) into *wb: G = the group, h = which
 * half of its 16 columns an 8-lane build takes (0 with 16 lanes); pf > 0: also prefetch the
 * same block pf bytes on (the next group; the hardware prefetchers alone leave one-row
 * calls short of memory bandwidth, matmul_avx2.h). */
SDN_INLINE void build_pk(uint32_t wtype, const uint8_t *G, int64_t nb, int64_t b, int h, size_t pf, wblk *wb) {
    const int nv = wtype == SDN_TYPE_Q8_0 ? 8 : IS_Q5(wtype) ? 5 : 4;
    const uint8_t *lv = G + (size_t)b * nv * 64 + (size_t)(32 * h);
    const uint8_t *sc = G + (size_t)nb * nv * 64 + (size_t)b * 32 + (size_t)(16 * h);
    if (pf) {
        for (int t = 0; t < nv; t++) sdn_prefetch(lv + pf + 64 * t);
        if (!(b & 1)) sdn_prefetch(sc + pf);
        if (IS_AFFINE(wtype) && !(b & 1)) sdn_prefetch(sc + pf + (size_t)nb * 32);
    }
#if CW == 16
#define PK_LOADU(p) _mm512_loadu_si512((const void *)(p))
#define PK_F16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#else
#define PK_LOADU(p) _mm256_loadu_si256((const __m256i *)(p))
#define PK_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#endif
    VF_STORE(wb->d, PK_F16(sc));
    if (IS_AFFINE(wtype)) VF_STORE(wb->m, PK_F16(sc + (size_t)nb * 32));
    if (wtype == SDN_TYPE_Q8_0) {
        for (int t = 0; t < 8; t++) {
            const vi w = PK_LOADU(lv + 64 * t);
            if (VNNI_DP) {
                wb->v[t] = VI_XOR(w, VI_SET1((int)0x80808080)); /* w + 128, unsigned */
            } else {
#if CW == 8 && !VNNI_DP
                wb->v[t] = _mm256_sign_epi8(w, w); /* |w| */
                wb->sg[t] = w;
#endif
            }
        }
    } else if (IS_Q5(wtype)) { /* vector 0: qh (permuted), 1..4: the nibbles */
        const vi m4 = VI_SET1(0x0F0F0F0F), qhp = PK_LOADU(lv);
        for (int t = 0; t < 4; t++) {
            const vi p = PK_LOADU(lv + 64 * (t + 1));
            wb->v[t] = VI_OR(VI_AND(p, m4), hb_pk(qhp, t));
            wb->v[4 + t] = VI_OR(VI_AND(VI_SRL16(p, 4), m4), hb_pk(qhp, 4 + t));
        }
    } else {
        const vi m4 = VI_SET1(0x0F0F0F0F);
        for (int t = 0; t < 4; t++) {
            const vi p = PK_LOADU(lv + 64 * t);
            wb->v[t] = VI_AND(p, m4);
            wb->v[4 + t] = VI_AND(VI_SRL16(p, 4), m4);
        }
    }
#undef PK_LOADU
#undef PK_F16
}

/* The per-(row, block) sequence of every tile (tile_any, tile1_pair), so every tile shape and
 * order gives the same bits: blk_isum0 starts the block's integer sum with its offset term
 * (a wrapping, unsigned product: the same bits for real block sums, |sum| <= 32*127, and no
 * signed overflow when a padding row of the batch holds arbitrary bytes, UBSan); blk_dp adds
 * dword t of the row's block x (its 32 quantized values) against weight vector t; blk_acc is
 * the float update (Q4_1 also the min term, from xs[b]). */
SDN_INLINE vi blk_isum0(int off, int32_t xsum) {
    return off ? VI_SET1((int32_t)(0u - (uint32_t)off * (uint32_t)xsum)) : VI_ZERO();
}
SDN_INLINE vi blk_dp(uint32_t wtype, const wblk *wb, vi isum, const int8_t *x, int t) {
    vi xb = VI_SET1((int)ld32(x + 4 * t));
#if CW == 8 && !VNNI_DP
    if (wtype == SDN_TYPE_Q8_0) xb = _mm256_sign_epi8(xb, VI_LOAD(&wb->sg[t]));
#endif
    return VDP(isum, VI_LOAD(&wb->v[t]), xb);
}
SDN_INLINE void blk_acc(uint32_t wtype, const wblk *wb, vi isum, float xd, const float *xs, int64_t b, vf *acc, vf *accm) {
    *acc = VF_ADD(*acc, VF_MUL(VF_CVT(isum), VF_MUL(VF_LOAD(wb->d), VF_SET1(xd))));
    if (IS_AFFINE(wtype)) *accm = VF_ADD(*accm, VF_MUL(VF_LOAD(wb->m), VF_SET1(xs[b])));
}

/* Rows [r, r + TX) of the batch against one group: acc[j] over all blocks (from wb[b], or
 * built per block into a local when wb is NULL: from packed group G when PK, else from the
 * file rows), then y. */
SDN_INLINE void tile_any(uint32_t wtype, const int TX, const int PK, const uint8_t *const *rows, const wblk *wbs, const uint8_t *G,
                         int h, int64_t nb, size_t pf, const char *act, size_t stride, int64_t in, int r,
                         float *out /* [TX][CW] */) {
    const int affine = IS_AFFINE(wtype);
    const int off = level_off(wtype);
    const int8_t *xq[RT];
    const float *xd[RT], *xs[RT];
    const int32_t *xsum[RT];
    vf acc[RT], accm[RT];
    SDN_UNROLL
    for (int j = 0; j < TX; j++) {
        const char *row = act + (size_t)(r + j) * stride;
        xq[j] = sdn_act_q(row);
        xd[j] = sdn_act_d(row, in);
        xs[j] = sdn_act_s(row, in);
        xsum[j] = sdn_act_qsum(row, in);
        acc[j] = VF_ZERO();
        accm[j] = VF_ZERO();
    }
    wblk local;
    for (int64_t b = 0; b < nb; b++) {
        const wblk *wb = wbs ? wbs + b : &local;
        if (!wbs) {
            if (PK) build_pk(wtype, G, nb, b, h, pf, &local);
            else build(wtype, rows, b, pf, &local);
        }
        /* With 32 vector registers (and for plain-AVX2 Q8_0) the rows' dot-product chains are
         * interleaved (t outer, rows inner): TX independent vpdpbusd chains in flight instead
         * of one row's chain of 8 at a time. With 16 registers the Q4 types keep one row at a
         * time (interleaved, their 8 unpacked weight vectors, the chains and the accumulators
         * spill: measured 7-10% slower). The integer sums are exact, so the order changes no
         * bit; the float work per row is the same either way. */
        if (CW == 16 || wtype == SDN_TYPE_Q8_0) {
            vi isum[RT];
            SDN_UNROLL
            for (int j = 0; j < TX; j++) isum[j] = blk_isum0(off, xsum[j][b]);
            SDN_UNROLL
            for (int t = 0; t < 8; t++) {
                SDN_UNROLL
                for (int j = 0; j < TX; j++) isum[j] = blk_dp(wtype, wb, isum[j], xq[j] + 32 * b, t);
            }
            SDN_UNROLL
            for (int j = 0; j < TX; j++) blk_acc(wtype, wb, isum[j], xd[j][b], xs[j], b, &acc[j], &accm[j]);
        } else {
            SDN_UNROLL
            for (int j = 0; j < TX; j++) {
                vi isum = blk_isum0(off, xsum[j][b]);
                SDN_UNROLL
                for (int t = 0; t < 8; t++) isum = blk_dp(wtype, wb, isum, xq[j] + 32 * b, t);
                blk_acc(wtype, wb, isum, xd[j][b], xs[j], b, &acc[j], &accm[j]);
            }
        }
    }
    SDN_UNROLL
    for (int j = 0; j < TX; j++) VF_STOREU(out + j * CW, affine ? VF_ADD(acc[j], accm[j]) : acc[j]);
}

#define tile(wtype, TX, rows, wbs, nb, pf, act, stride, in, r, out)                                                    \
    tile_any(wtype, TX, 0, rows, wbs, NULL, 0, nb, pf, act, stride, in, r, out)
COL_TILE_SET(q8_0, tile, build, wblk, SDN_TYPE_Q8_0)
COL_TILE_SET(q4_0, tile, build, wblk, SDN_TYPE_Q4_0)
COL_TILE_SET(q4_1, tile, build, wblk, SDN_TYPE_Q4_1)
COL_TILE_SET(q5_0, tile, build, wblk, SDN_TYPE_Q5_0)
COL_TILE_SET(q5_1, tile, build, wblk, SDN_TYPE_Q5_1)

#if CW == 16
/* AMX-INT8 (tile registers + TMUL), used by the amx path for batches of SDN_AMX_MIN_ROWS rows
 * and more: per block, C = A x B with tdpbssd, A = up to 16 activation rows of 32 int8 (the
 * prepared rows read in place, stride = row stride), B = the block's 8 transposed weight
 * vectors from the scratch as signed levels (level - offset, amx_signed: 8 rows of 16 columns
 * x 4 bytes), C = the exact int32 block sums of 16 rows x 16 columns, the integers the
 * vpdpbusd loop computes (there with the offset term added); the float work per row is the
 * same sequence as tile(), so the bits are the same.
 *
 * Two tile sets alternate by block parity (C in tmm0/tmm1, A in tmm2/tmm3, B in tmm4/tmm5;
 * sdn_amx_tile_config), so block b's tile work does not wait for block b - 1's (tile registers
 * are not renamed), and the float work of block b - AMX_LAG runs after block b's tile work
 * is issued, reading sums stored AMX_LAG blocks earlier. Measured (docs/results.md, "AMX
 * tiles, pipelined"): the tile work of a block costs 11-13 ns however it is pipelined; what
 * made the first loop no faster than the vector tiles was its float work (amx_rows_any). Every tile instruction is inline asm (no AMX
 * intrinsics): GCC 12's _tile_loadconfig can drop the stores that fill the configuration
 * before ldtilecfg (SIGILL at the first tile instruction), so the configuration is written by
 * an out-of-line function into memory the asm reads through a "memory" clobber. */
static void amx_signed(uint32_t wtype, wblk *wbs, int64_t nb) {
    const int off = level_off(wtype);
    if (!off) return; /* the affine types' levels (0..31) are already valid signed bytes */
    const __m512i o = _mm512_set1_epi8((char)off); /* Q8_0: v + 128 - 128 (mod 256) = w */
    for (int64_t b = 0; b < nb; b++)
        for (int t = 0; t < 8; t++) wbs[b].v[t] = _mm512_sub_epi8(wbs[b].v[t], o);
}
#ifndef AMX_LAG
#define AMX_LAG 3
#endif
/* Rows [r, r + M) (M <= 16) against all blocks, the tiles configured for M rows. Inlined with
 * M = 16 for the full tiles, so the rows' loops unroll and the accumulators stay in
 * registers (with a run-time count they lived on the stack: the float work, not the tiles,
 * was the loop's cost). */
SDN_INLINE void amx_rows_any(uint32_t wtype, const int M, const wblk *wbs, int64_t nb, const char *act, size_t stride,
                             int64_t in, int r, float *Y, int64_t ldy, int nc) {
    const int affine = IS_AFFINE(wtype);
    int32_t C[AMX_LAG + 1][16][CW] __attribute__((aligned(64))); /* block b's sums in C[b % (AMX_LAG + 1)] */
    vf acc[16], accm[16];
    const float *xd[16] = {0}, *xs[16] = {0};
    const char *a0 = act + (size_t)r * stride;
    SDN_UNROLL
    for (int j = 0; j < M; j++) {
        acc[j] = accm[j] = VF_ZERO();
        xd[j] = sdn_act_d(a0 + (size_t)j * stride, in);
        xs[j] = sdn_act_s(a0 + (size_t)j * stride, in);
    }
    for (int64_t b = 0; b < nb + AMX_LAG; b++) {
        if (!(b & 1) && b + 2 < nb) /* the rows' next 64-byte line (blocks b + 2, b + 3) */
            for (int j = 0; j < M; j++) _mm_prefetch(a0 + (size_t)j * stride + 32 * (b + 2), _MM_HINT_T0);
        if (b < nb) amx_block((int)(b & 1), a0 + 32 * b, stride, wbs[b].v, &C[b % (AMX_LAG + 1)][0][0]);
        if (b < AMX_LAG) continue;
        const int64_t p = b - AMX_LAG;
        const int32_t(*Cp)[CW] = C[p % (AMX_LAG + 1)];
        const wblk *wb = wbs + p;
        const vf dw = VF_LOAD(wb->d);
        SDN_UNROLL
        for (int j = 0; j < M; j++) acc[j] = VF_ADD(acc[j], VF_MUL(VF_CVT(VI_LOAD(Cp[j])), VF_MUL(dw, VF_SET1(xd[j][p]))));
        if (affine) {
            const vf mw = VF_LOAD(wb->m);
            SDN_UNROLL
            for (int j = 0; j < M; j++) accm[j] = VF_ADD(accm[j], VF_MUL(mw, VF_SET1(xs[j][p])));
        }
    }
    /* the first nc columns of each row straight into Y (masked stores) */
    const __mmask16 keep = (__mmask16)((1u << nc) - 1);
    SDN_UNROLL
    for (int j = 0; j < M; j++) _mm512_mask_storeu_ps(Y + (size_t)j * ldy, keep, affine ? VF_ADD(acc[j], accm[j]) : acc[j]);
}
static void amx_rows16(uint32_t wtype, const wblk *wbs, int64_t nb, const char *act, size_t stride, int64_t in, int r,
                       float *Y, int64_t ldy, int nc) {
    if (IS_AFFINE(wtype)) amx_rows_any(SDN_TYPE_Q4_1, 16, wbs, nb, act, stride, in, r, Y, ldy, nc); /* Q4_1 = Q5_1 here */
    else amx_rows_any(SDN_TYPE_Q4_0, 16, wbs, nb, act, stride, in, r, Y, ldy, nc);                  /* offsets are in B */
}
static void amx_rows(uint32_t wtype, const wblk *wbs, int64_t nb, const char *act, size_t stride, int64_t in, int r,
                     int m, float *Y, int64_t ldy, int nc) {
    if (IS_AFFINE(wtype)) amx_rows_any(SDN_TYPE_Q4_1, m, wbs, nb, act, stride, in, r, Y, ldy, nc);
    else amx_rows_any(SDN_TYPE_Q4_0, m, wbs, nb, act, stride, in, r, Y, ldy, nc);
}
#endif

#if CW == 16
/* Rows [r0, r1) of one column group (blocks already signed, amx_signed) into Y columns
 * [o, o + nc); *cm = the row count the tiles are configured for (0: none yet). */
static void amx_span(uint32_t wtype, const wblk *blks, int64_t nb, const char *act, size_t stride, int64_t in, int r0,
                     int r1, float *Y, int64_t ldy, int64_t o, int nc, int *cm) {
    uint8_t cfg[64] __attribute__((aligned(64)));
    for (int r = r0; r < r1; r += 16) {
        const int m = r1 - r < 16 ? r1 - r : 16;
        if (m != *cm) {
            sdn_amx_tile_config(cfg, m);
            __asm__ volatile("ldtilecfg %0" ::"m"(*(const uint8_t(*)[64])cfg) : "memory");
            sdn_amx_att_rows = 0; /* attention's configuration is gone */
            *cm = m;
        }
        if (m == 16) amx_rows16(wtype, blks, nb, act, stride, in, r, Y + (size_t)r * ldy + o, ldy, nc);
        else amx_rows(wtype, blks, nb, act, stride, in, r, m, Y + (size_t)r * ldy + o, ldy, nc);
    }
}
/* All n rows of one column group on AMX (the file layout's scratch path): the unpacked
 * blocks (this thread's scratch, built for this group) turned into signed levels, then the
 * tiles configured once for the full 16-row tiles and once more for a shorter last one. */
static void amx_group(uint32_t wtype, const void *blks, int64_t nb, const char *act, size_t stride, int64_t in, int n,
                      float *Y, int64_t ldy, int64_t o, int nc) {
    int cm = 0;
    amx_signed(wtype, (wblk *)(uintptr_t)blks, nb);
    amx_span(wtype, blks, nb, act, stride, in, 0, n, Y, ldy, o, nc, &cm);
    __asm__ volatile("tilerelease" ::: "memory");
}
#define AMX_GROUP(pfx, T)                                                                                             \
    static void pfx##_amx(const void *blks, int64_t nb, const char *act, size_t stride, int64_t in, int n, float *Y,   \
                          int64_t ldy, int64_t o, int nc) {                                                            \
        amx_group(T, blks, nb, act, stride, in, n, Y, ldy, o, nc);                                                   \
    }
AMX_GROUP(q8_0, SDN_TYPE_Q8_0)
AMX_GROUP(q4_0, SDN_TYPE_Q4_0)
AMX_GROUP(q4_1, SDN_TYPE_Q4_1)
AMX_GROUP(q5_0, SDN_TYPE_Q5_0)
AMX_GROUP(q5_1, SDN_TYPE_Q5_1)
#endif

/* ---- packed weights (matmul_pack.c) ---- */
#define PK_TILE(T, TX, G, h, nb, pf, act, stride, in, r, out) tile_any(T, TX, 1, NULL, NULL, G, h, nb, pf, act, stride, in, r, out)
PK_TILE_SET(pk_q8_0, PK_TILE, SDN_TYPE_Q8_0)
PK_TILE_SET(pk_q4_0, PK_TILE, SDN_TYPE_Q4_0)
PK_TILE_SET(pk_q4_1, PK_TILE, SDN_TYPE_Q4_1)
PK_TILE_SET(pk_q5_0, PK_TILE, SDN_TYPE_Q5_0)
PK_TILE_SET(pk_q5_1, PK_TILE, SDN_TYPE_Q5_1)

/* One activation row against two packed groups at once (G0 and G1, both whole; h0 / h1 their
 * halves with 8 lanes): two weight streams in flight instead of one, for one-row calls, which
 * are bound by how many misses one core keeps outstanding. Per group the same sequence as
 * tile_any with TX = 1 (same bits). Used for Q8_0 (measured faster there only). */
SDN_INLINE void tile1_pair(uint32_t wtype, const uint8_t *G0, int h0, const uint8_t *G1, int h1, int64_t nb, size_t pf,
                           const char *act, int64_t in, float *out0, float *out1) {
    const int affine = IS_AFFINE(wtype);
    const int off = level_off(wtype);
    const int8_t *xq = sdn_act_q(act);
    const float *xd = sdn_act_d(act, in), *xs = sdn_act_s(act, in);
    const int32_t *xsum = sdn_act_qsum(act, in);
    vf acc0 = VF_ZERO(), acc1 = VF_ZERO(), accm0 = VF_ZERO(), accm1 = VF_ZERO();
    for (int64_t b = 0; b < nb; b++) {
        wblk w0, w1;
        build_pk(wtype, G0, nb, b, h0, pf, &w0);
        build_pk(wtype, G1, nb, b, h1, pf, &w1);
        vi i0 = blk_isum0(off, xsum[b]), i1 = i0;
        SDN_UNROLL
        for (int t = 0; t < 8; t++) {
            i0 = blk_dp(wtype, &w0, i0, xq + 32 * b, t);
            i1 = blk_dp(wtype, &w1, i1, xq + 32 * b, t);
        }
        blk_acc(wtype, &w0, i0, xd[b], xs, b, &acc0, &accm0);
        blk_acc(wtype, &w1, i1, xd[b], xs, b, &acc1, &accm1);
    }
    VF_STOREU(out0, affine ? VF_ADD(acc0, accm0) : acc0);
    VF_STOREU(out1, affine ? VF_ADD(acc1, accm1) : acc1);
}
static void pk_q8_0_pair(const uint8_t *G0, int h0, const uint8_t *G1, int h1, int64_t nb, size_t pf, const char *act,
                         int64_t in, float *out0, float *out1) {
    tile1_pair(SDN_TYPE_Q8_0, G0, h0, G1, h1, nb, pf, act, in, out0, out1);
}

/* Batches of PK_SCR_ROWS rows and more of the 5-bit types on packed weights: the group's
 * blocks unpacked into scratch once (their 5th bits cost about as much as the nibbles), then
 * the same tiles as the file layout's scratch path (same bits). Out of memory: the tiles
 * that unpack as they go. */
#ifndef PK_SCR_ROWS
#define PK_SCR_ROWS 24
#endif
#define PK_SCR(pfx, cpfx, T)                                                                                          \
    static void pfx##_scr(const uint8_t *G, int64_t nb, size_t gbytes, const char *act, size_t stride, int64_t in,    \
                          int n, float *Y, int64_t ldy, int64_t o, int nc) {                                          \
        wblk *blks = col_scratch((size_t)nb * sizeof(wblk));                                                          \
        if (!blks) {                                                                                                  \
            pk_drive(G, nb, gbytes, pfx##_tiles, NULL, NULL, act, stride, in, n, Y, ldy, o, o + nc);                  \
            return;                                                                                                   \
        }                                                                                                             \
        const int h = (int)(o % 16) / CW;                                                                             \
        for (int64_t b = 0; b < nb; b++) build_pk(T, G, nb, b, h, gbytes, blks + b);                                 \
        col_tiles_run(cpfx##_tiles, blks, nb, act, stride, in, n, Y, ldy, o, nc);                                      \
    }
PK_SCR(pk_q5_0, q5_0, SDN_TYPE_Q5_0)
PK_SCR(pk_q5_1, q5_1, SDN_TYPE_Q5_1)

#if CW == 16
/* The AMX path on packed weights, the whole column range at once: AMX_GROUPS column groups'
 * blocks are unpacked into scratch (signed levels), then AMX_ROWS rows at a time run against
 * each of those groups, so the rows' activations stay in L1 across the groups (one group at
 * a time over a whole 256-row prefill batch read them from L2 for every group; the tiles
 * load 16 rows' lines per block). Each row and column still gets the same block sequence
 * (same bits). Out of memory: the vector tiles. */
#ifndef AMX_GROUPS
#define AMX_GROUPS 8
#endif
#ifndef AMX_ROWS
#define AMX_ROWS 64
#endif
static void pk_amx_range(uint32_t wtype, const pk_tile_fn *tiles, const uint8_t *P, int64_t nb, size_t gbytes,
                         const char *act, size_t stride, int64_t in, int n, float *Y, int64_t ldy, int64_t o0,
                         int64_t o1) {
    wblk *blks = col_scratch((size_t)nb * sizeof(wblk) * AMX_GROUPS);
    if (!blks) {
        pk_drive(P, nb, gbytes, tiles, NULL, NULL, act, stride, in, n, Y, ldy, o0, o1);
        return;
    }
    int cm = 0;
    for (int64_t o = o0; o < o1; o += 16 * AMX_GROUPS) {
        const int ng = (int)((o1 - o + 15) / 16 < AMX_GROUPS ? (o1 - o + 15) / 16 : AMX_GROUPS);
        for (int g = 0; g < ng; g++) {
            const uint8_t *G = P + (size_t)((o / 16) + g) * gbytes;
            for (int64_t b = 0; b < nb; b++) build_pk(wtype, G, nb, b, 0, 0, blks + (size_t)g * nb + b);
            amx_signed(wtype, blks + (size_t)g * nb, nb);
        }
        for (int r = 0; r < n; r += AMX_ROWS) {
            const int r1 = n - r < AMX_ROWS ? n : r + AMX_ROWS;
            for (int g = 0; g < ng; g++) {
                const int64_t oc = o + 16 * g;
                const int nc = o1 - oc < 16 ? (int)(o1 - oc) : 16;
                amx_span(wtype, blks + (size_t)g * nb, nb, act, stride, in, r, r1, Y, ldy, oc, nc, &cm);
            }
        }
    }
    if (cm) __asm__ volatile("tilerelease" ::: "memory");
}
#endif

/* sdn_matmul_rows_packed for o0 a multiple of SDN_PACK_COLS: per column group, row tiles
 * unpack each block from the packed group as they go (a few logic operations a block, no
 * scratch pass at any batch size); with amx, the group's blocks are unpacked into scratch
 * once for the tiles. Returns 0 for other types. */
int SDN_KFN(sdn_matmul_cols_packed)(uint32_t wtype, const void *P, int64_t in, const void *act, int n, float *Y,
                                    int64_t ldy, int64_t o0, int64_t o1, int amx) {
    const pk_tile_fn *tiles;
    pk_group_fn group = NULL;
    pk_pair_fn pair;
    switch (wtype) {
    case SDN_TYPE_Q8_0: tiles = pk_q8_0_tiles; pair = pk_q8_0_pair; break;
    case SDN_TYPE_Q4_0: tiles = pk_q4_0_tiles; pair = NULL; break;
    case SDN_TYPE_Q4_1: tiles = pk_q4_1_tiles; pair = NULL; break;
    case SDN_TYPE_Q5_0: tiles = pk_q5_0_tiles; pair = NULL; group = n >= PK_SCR_ROWS ? pk_q5_0_scr : NULL; break;
    case SDN_TYPE_Q5_1: tiles = pk_q5_1_tiles; pair = NULL; group = n >= PK_SCR_ROWS ? pk_q5_1_scr : NULL; break;
    default: return 0;
    }
    const int64_t nb = in / 32;
#if CW == 16
    /* AMX for every column type (the AMX loop, amx_rows_any) */
    if (amx) {
        pk_amx_range(wtype, tiles, (const uint8_t *)P, nb, (size_t)nb * 16 * blk_bytes(wtype), (const char *)act,
                     sdn_act_row_stride(wtype, in), in, n, Y, ldy, o0, o1);
        return 1;
    }
#else
    (void)amx;
#endif
    pk_drive(P, nb, (size_t)nb * 16 * blk_bytes(wtype), tiles, group, pair, (const char *)act, sdn_act_row_stride(wtype, in),
             in, n, Y, ldy, o0, o1);
    return 1;
}

/* Returns 0 (and does nothing) for types other than Q8_0, Q4_0, Q4_1, Q5_0, Q5_1. amx: use AMX tiles
 * (only in the AVX-512 build, on a CPU the caller checked). */
int SDN_KFN(sdn_matmul_cols)(uint32_t wtype, const void *W, size_t row_bytes, int64_t in, const void *act, int n,
                             float *Y, int64_t ldy, int64_t o0, int64_t o1, int amx) {
    const col_tile_fn *tiles;
    col_build_fn bld;
    col_group_fn group = NULL;
    switch (wtype) {
    case SDN_TYPE_Q8_0: tiles = q8_0_tiles; bld = q8_0_build; break;
    case SDN_TYPE_Q4_0: tiles = q4_0_tiles; bld = q4_0_build; break;
    case SDN_TYPE_Q4_1: tiles = q4_1_tiles; bld = q4_1_build; break;
    case SDN_TYPE_Q5_0: tiles = q5_0_tiles; bld = q5_0_build; break;
    case SDN_TYPE_Q5_1: tiles = q5_1_tiles; bld = q5_1_build; break;
    default: return 0;
    }
#if CW == 16
    if (amx)
        switch (wtype) {
        case SDN_TYPE_Q8_0: group = q8_0_amx; break;
        case SDN_TYPE_Q4_0: group = q4_0_amx; break;
        case SDN_TYPE_Q4_1: group = q4_1_amx; break;
        case SDN_TYPE_Q5_0: group = q5_0_amx; break;
        default: group = q5_1_amx; break;
        }
#else
    (void)amx;
#endif
    col_drive(W, row_bytes, in / 32, sizeof(wblk), bld, tiles, group, (const char *)act, sdn_act_row_stride(wtype, in), in,
              n, Y, ldy, o0, o1);
    return 1;
}

#endif
