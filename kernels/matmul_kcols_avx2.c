/* matmul_kcols_avx2.c - column-parallel kernels for Q4_K, Q5_K and Q6_K (256-element super-blocks),
 * the K-type counterpart of matmul_cols_avx2.c: one vector lane per output column (16 with
 * AVX-512, 8 with AVX2), each super-block unpacked once per column group into 64 vectors of
 * unsigned levels in vpdpbusd operand layout (lane c = column c's 4 levels at elements
 * 4t..4t+3) plus per-lane sub-block scales, and reused by every activation row.
 *
 * Per super-block, per row, with dot_j the exact int32 sum of levels * q over sub-block j:
 *   Q4_K, Q5_K (levels 0..31): isum = sum_j sc_j * dot_j, summ = sum_j m_j * (bsum[2j] + bsum[2j+1])
 *         acc = acc + (float)isum * (d * dx);  acc = acc - (float)summ * (dmin * dx)
 *   Q6_K: isum = sum_j sc_j * (dot_j - 32 * bsum[j])  (levels 0..63, offset 32)
 *         acc = acc + (float)isum * (d * dx)
 * exactly the float sequence of the portable kernel (matmul_portable.c, port_k), so every
 * path gives the portable bits (docs/kernels.md, batch invariance across paths). Batches of
 * up to COL_FUSE_ROWS rows (8 with AVX-512, 4 with AVX2) unpack per super-block as they go; larger ones unpack the group once into a
 * per-thread scratch buffer. On packed weights (matmul_pack.c) the same build code loads the
 * block's dword vectors instead of transposing them (ksrc; sdn_matmul_kcols_packed). */
#include "kernels/matmul_internal.h"

#ifdef SDN_MATMUL_AVX2
#include <stdlib.h>

#include "kernels/matmul_avx2.h"
#include "kernels/matmul_cols.h"

#define RT COL_RT

/* One (column group, super-block): levels v[t] for elements 4t..4t+3, int32 scales per lane
 * (16 for Q6_K, 8 for Q4_K), Q4_K's 8 mins as int16 pairs (m, m) per lane (the vpdpwssd /
 * vpmaddwd operand against two 16-element activation sums), d and dmin per lane. */
typedef struct {
    vi v[64];
    vi sc[16];
    vi m[8];
    float d[CW], dmin[CW];
} __attribute__((aligned(64))) kblk;

/* Byte k of every 32-bit lane. */
#define BYTE(v, k) VI_AND(VI_SRL32(v, 8 * (k)), VI_SET1(0xFF))

/* Where a build reads a super-block from: the file's rows r (PK = 0; block at byte offset
 * off), or (PK = 1) block b of packed group G (matmul_pack.c: the block's dwords as 64-byte
 * vectors, lane c = column c; h = which half of the 16 columns an 8-lane build takes).
 * src16 / src32: the 4 / 8 vectors of dwords dw.. of the block, as transpose16 / transpose32
 * give them from the file. */
typedef struct {
    const uint8_t *const *r;
    size_t off;
    const uint8_t *Gb; /* packed: the block's first vector */
    int h;
} ksrc;
#if CW == 16
#define KPK_LOAD(p) _mm512_loadu_si512((const void *)(p))
#else
#define KPK_LOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#endif
SDN_INLINE void src16(const int PK, const ksrc *s, int dw, vi *P) {
    if (PK)
        for (int t = 0; t < 4; t++) P[t] = KPK_LOAD(s->Gb + (size_t)(dw + t) * 64 + 32 * s->h);
    else
        transpose16(s->r, s->off + 4 * (size_t)dw, P);
}
SDN_INLINE void src32(const int PK, const ksrc *s, int dw, vi *P) {
    if (PK)
        for (int t = 0; t < 8; t++) P[t] = KPK_LOAD(s->Gb + (size_t)(dw + t) * 64 + 32 * s->h);
    else
        transpose32(s->r, s->off + 4 * (size_t)dw, P);
}
/* Prefetch the block's data pf bytes on (file: in every row; packed: the nv vectors). */
SDN_INLINE void kprefetch(const int PK, const ksrc *s, int nv, size_t pf) {
    if (PK) {
        for (int t = 0; t < nv; t++) sdn_prefetch(s->Gb + pf + 64 * (size_t)t);
        return;
    }
    for (int c = 0; c < CW; c++)
        for (int t = 0; t < nv * 4; t += 64) sdn_prefetch(s->r[c] + s->off + pf + (size_t)t);
}

/* Q4_K, and Q5_K (q5 = 1: qh[32] in dwords 4..11, the nibbles after it): bit 2ch of qh[l]
 * is the 5th bit of element 64ch + l (the low nibble of qs[32ch + l]), bit 2ch + 1 that of
 * element 64ch + 32 + l (its high nibble); the same bit of every byte of a dword, so one
 * shift and one mask put it at bit 4 of each byte. */
SDN_INLINE void build_q4k(const int PK, const int q5, const ksrc *src, size_t pf, kblk *kb) {
    if (pf) kprefetch(PK, src, q5 ? 44 : 36, pf);
    /* bytes 0..15 of the block: d | dmin, scales[0..3], scales[4..7], scales[8..11] */
    vi h[4];
    src16(PK, src, 0, h);
    VF_STORE(kb->d, vf_from_f16(h[0], 0));
    VF_STORE(kb->dmin, vf_from_f16(h[0], 1));
    const vi m63 = VI_SET1(63), m15 = VI_SET1(15);
    for (int k = 0; k < 4; k++) { /* the 6-bit (sc, m) unpacking of sdn_k4_scale_min, per lane */
        const vi s0 = BYTE(h[1], k), s4 = BYTE(h[2], k), s8 = BYTE(h[3], k);
        kb->sc[k] = VI_AND(s0, m63);
        const vi mk = VI_AND(s4, m63), mk4 = VI_OR(VI_SRL32(s8, 4), VI_SLL32(VI_SRL32(s4, 6), 4));
        kb->sc[4 + k] = VI_OR(VI_AND(s8, m15), VI_SLL32(VI_SRL32(s0, 6), 4));
        kb->m[k] = VI_OR(mk, VI_SLL32(mk, 16));
        kb->m[4 + k] = VI_OR(mk4, VI_SLL32(mk4, 16));
    }
    const vi m4 = VI_SET1(0x0F0F0F0F), b4 = VI_SET1(0x10101010);
    vi qh[8];
    if (q5) src32(PK, src, 4, qh);
    for (int ch = 0; ch < 4; ch++) { /* qs[32ch + l]: low nibble sub-block 2ch, high 2ch + 1 */
        vi p[8];
        src32(PK, src, (q5 ? 12 : 4) + 8 * ch, p);
        for (int u = 0; u < 8; u++) {
            kb->v[16 * ch + u] = VI_AND(p[u], m4);
            kb->v[16 * ch + 8 + u] = VI_AND(VI_SRL16(p[u], 4), m4);
            if (q5) { /* bit 2ch (2ch + 1) of each byte to bit 4 */
                const int sl = 4 - 2 * ch, sh = 3 - 2 * ch;
                const vi lo = sl > 0 ? VI_SLL32(qh[u], sl) : sl == 0 ? qh[u] : VI_SRL32(qh[u], -sl);
                const vi hi = sh > 0 ? VI_SLL32(qh[u], sh) : VI_SRL32(qh[u], -sh);
                kb->v[16 * ch + u] = VI_OR(kb->v[16 * ch + u], VI_AND(lo, b4));
                kb->v[16 * ch + 8 + u] = VI_OR(kb->v[16 * ch + 8 + u], VI_AND(hi, b4));
            }
        }
    }
}

/* dsrc (packed only): the 16 columns' fp16 d of this block. */
SDN_INLINE void build_q6k(const int PK, const ksrc *src, const uint8_t *dsrc, size_t pf, kblk *kb) {
    if (pf) kprefetch(PK, src, 52, pf);
    if (PK) {
#if CW == 16
        VF_STORE(kb->d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)dsrc)));
#else
        VF_STORE(kb->d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dsrc)));
#endif
    } else {
        for (int c = 0; c < CW; c++) kb->d[c] = sdn_f16_table[sdn_le16(src->r[c] + src->off + 208)];
    }
    vi s[4];
    src16(PK, src, 48, s); /* int8 scales 4t..4t+3 in lane dword t (bytes 192..207) */
    for (int t = 0; t < 4; t++)
        for (int k = 0; k < 4; k++) kb->sc[4 * t + k] = VI_SRA32(VI_SLL32(s[t], 24 - 8 * k), 24);
    const vi m4 = VI_SET1(0x0F0F0F0F), m3 = VI_SET1(0x03030303);
    for (int h = 0; h < 2; h++) {
        vi l0[8], l1[8], qh[8];
        src32(PK, src, 16 * h, l0);      /* ql bytes 64h.. */
        src32(PK, src, 16 * h + 8, l1);  /* ql bytes 64h + 32.. */
        src32(PK, src, 32 + 8 * h, qh);  /* qh bytes 128 + 32h.. */
        for (int g = 0; g < 4; g++)
            for (int u = 0; u < 8; u++) {
                const vi ql = g & 1 ? l1[u] : l0[u];
                const vi lo = g < 2 ? VI_AND(ql, m4) : VI_AND(VI_SRL16(ql, 4), m4);
                const vi hi = VI_AND(VI_SRL16(qh[u], 2 * g), m3);
                kb->v[32 * h + 8 * g + u] = VI_OR(lo, VI_SLL32(hi, 4)); /* hi <= 3: no carry across bytes */
            }
    }
}

/* Super-block b into *kb: from the file rows (PK = 0), or from packed group G (PK = 1). */
SDN_INLINE void build_any(uint32_t wtype, const int PK, const uint8_t *const *r, const uint8_t *G, int h, int64_t nb,
                          int64_t b, size_t pf, kblk *kb) {
    const int q6 = wtype == SDN_TYPE_Q6_K, q5 = wtype == SDN_TYPE_Q5_K, nv = q6 ? 52 : q5 ? 44 : 36;
    const ksrc src = {.r = r, .off = (size_t)b * (size_t)(nv * 4 + (q6 ? 2 : 0)), .Gb = PK ? G + (size_t)b * nv * 64 : NULL,
                      .h = h};
    if (q6) build_q6k(PK, &src, PK ? G + (size_t)nb * nv * 64 + (size_t)b * 32 + 16 * (size_t)h : NULL, pf, kb);
    else build_q4k(PK, q5, &src, pf, kb);
}
SDN_INLINE void build(uint32_t wtype, const uint8_t *const *r, int64_t b, size_t pf, kblk *kb) {
    build_any(wtype, 0, r, NULL, 0, 0, b, pf, kb);
}

SDN_INLINE void ktile_any(uint32_t wtype, const int TX, const int PK, const uint8_t *const *rows, const kblk *kbs,
                          const uint8_t *G, int h, int64_t nb, size_t pf, const char *act, size_t stride, int64_t in,
                          int r, float *out) {
    const int q6 = wtype == SDN_TYPE_Q6_K;
    const int8_t *xq[RT];
    const float *xd[RT];
    const int16_t *bs[RT];
    vf acc[RT];
    SDN_UNROLL
    for (int j = 0; j < TX; j++) {
        const char *row = act + (size_t)(r + j) * stride;
        xq[j] = sdn_act_q(row);
        xd[j] = sdn_act_d(row, in);
        bs[j] = sdn_act_bsum(row, in);
        acc[j] = VF_ZERO();
    }
    kblk local;
    for (int64_t b = 0; b < nb; b++) {
        const kblk *kb = kbs ? kbs + b : &local;
        if (!kbs) build_any(wtype, PK, rows, G, h, nb, b, pf, &local);
        const vf d = VF_LOAD(kb->d);
        /* the rows' dot-product chains interleaved (u outer, rows inner), TX chains in
         * flight; integer sums are exact, so the order changes no bit */
        vi isum[RT], dot[RT];
        SDN_UNROLL
        for (int j = 0; j < TX; j++) isum[j] = VI_ZERO();
        if (q6) {
            for (int sb = 0; sb < 16; sb++) {
                SDN_UNROLL
                for (int j = 0; j < TX; j++) dot[j] = VI_SET1(-32 * bs[j][16 * b + sb]);
                SDN_UNROLL
                for (int u = 0; u < 4; u++) {
                    const vi w = VI_LOAD(&kb->v[4 * sb + u]);
                    SDN_UNROLL
                    for (int j = 0; j < TX; j++) dot[j] = VDP(dot[j], w, VI_SET1((int)ld32(xq[j] + 256 * b + 16 * sb + 4 * u)));
                }
                const vi sc = VI_LOAD(&kb->sc[sb]);
                SDN_UNROLL
                for (int j = 0; j < TX; j++) isum[j] = VI_ADD(isum[j], VI_MULLO(sc, dot[j]));
            }
            SDN_UNROLL
            for (int j = 0; j < TX; j++) acc[j] = VF_ADD(acc[j], VF_MUL(VF_CVT(isum[j]), VF_MUL(d, VF_SET1(xd[j][b]))));
        } else {
            for (int sb = 0; sb < 8; sb++) {
                SDN_UNROLL
                for (int j = 0; j < TX; j++) dot[j] = VI_ZERO();
                SDN_UNROLL
                for (int u = 0; u < 8; u++) {
                    const vi w = VI_LOAD(&kb->v[8 * sb + u]);
                    SDN_UNROLL
                    for (int j = 0; j < TX; j++) dot[j] = VDP(dot[j], w, VI_SET1((int)ld32(xq[j] + 256 * b + 32 * sb + 4 * u)));
                }
                const vi sc = VI_LOAD(&kb->sc[sb]);
                SDN_UNROLL
                for (int j = 0; j < TX; j++) isum[j] = VI_ADD(isum[j], VI_MULLO(sc, dot[j]));
            }
            const vf dmin = VF_LOAD(kb->dmin);
            SDN_UNROLL
            for (int j = 0; j < TX; j++) {
                /* summ = sum_sb m_sb * (bsum[2sb] + bsum[2sb + 1]): int16 pairs (bsum[2k],
                 * bsum[2k + 1]) against (m_k, m_k), exact in int32 */
                const int16_t *sj = bs[j] + 16 * b;
                vi summ = VI_ZERO();
                SDN_UNROLL
                for (int k = 0; k < 8; k++) summ = VDPW(summ, VI_LOAD(&kb->m[k]), VI_SET1((int)ld32(sj + 2 * k)));
                const vf dx = VF_SET1(xd[j][b]);
                acc[j] = VF_ADD(acc[j], VF_MUL(VF_CVT(isum[j]), VF_MUL(d, dx)));
                acc[j] = VF_SUB(acc[j], VF_MUL(VF_CVT(summ), VF_MUL(dmin, dx)));
            }
        }
    }
    SDN_UNROLL
    for (int j = 0; j < TX; j++) VF_STOREU(out + j * CW, acc[j]);
}

#define ktile(wtype, TX, rows, kbs, nb, pf, act, stride, in, r, out)                                                 \
    ktile_any(wtype, TX, 0, rows, kbs, NULL, 0, nb, pf, act, stride, in, r, out)
COL_TILE_SET(q4k, ktile, build, kblk, SDN_TYPE_Q4_K)
COL_TILE_SET(q5k, ktile, build, kblk, SDN_TYPE_Q5_K)
COL_TILE_SET(q6k, ktile, build, kblk, SDN_TYPE_Q6_K)

/* ---- packed weights (matmul_pack.c) ---- */
#define KPK_TILE(T, TX, G, h, nb, pf, act, stride, in, r, out) ktile_any(T, TX, 1, NULL, NULL, G, h, nb, pf, act, stride, in, r, out)
PK_TILE_SET(kpk_q4k, KPK_TILE, SDN_TYPE_Q4_K)
PK_TILE_SET(kpk_q5k, KPK_TILE, SDN_TYPE_Q5_K)
PK_TILE_SET(kpk_q6k, KPK_TILE, SDN_TYPE_Q6_K)

/* Batches of KPK_SCR_ROWS rows and more on packed weights: the group's super-blocks unpacked
 * into scratch once, then the file layout's tiles over them (the same tile code, so the same
 * bits). Unpacking per 8-row tile repeated a super-block's unpacking (about 100 vector
 * operations for Q4_K, twice that for Q6_K, against 512 dot products per tile) 32 times in a
 * 256-row prefill batch. Out of memory: the tiles that unpack as they go. */
#ifndef KPK_SCR_ROWS
#define KPK_SCR_ROWS 24
#endif
#define KPK_SCR(pfx, cpfx, T)                                                                                         \
    static void pfx##_scr(const uint8_t *G, int64_t nb, size_t gbytes, const char *act, size_t stride, int64_t in,    \
                          int n, float *Y, int64_t ldy, int64_t o, int nc) {                                          \
        kblk *kbs = col_scratch((size_t)nb * sizeof(kblk));                                                           \
        if (!kbs) {                                                                                                   \
            pk_drive(G, nb, gbytes, pfx##_tiles, NULL, NULL, act, stride, in, n, Y, ldy, o, o + nc);                  \
            return;                                                                                                   \
        }                                                                                                             \
        const int h = (int)(o % 16) / CW;                                                                             \
        for (int64_t b = 0; b < nb; b++) build_any(T, 1, NULL, G, h, nb, b, gbytes, kbs + b);                        \
        col_tiles_run(cpfx##_tiles, kbs, nb, act, stride, in, n, Y, ldy, o, nc);                                       \
    }
KPK_SCR(kpk_q4k, q4k, SDN_TYPE_Q4_K)
KPK_SCR(kpk_q5k, q5k, SDN_TYPE_Q5_K)
KPK_SCR(kpk_q6k, q6k, SDN_TYPE_Q6_K)

#if CW == 16
/* AMX-INT8 for Q4_K and Q5_K (the amx path, batches of SDN_AMX_MIN_ROWS rows and more, packed
 * weights): per super-block, each 32-element sub-block's exact int32 sums of 16 rows x 16
 * columns by tdpbssd (amx_block), A = the rows' activation bytes of the sub-block read in
 * place, B = its unpacked level vectors (kblk.v is already the B tile layout; levels 0..31
 * are valid signed bytes), so C_j = dot_j of ktile_any; then per row ktile_any's integer sums
 * (isum, summ) and float sequence: the same bits. The tile work of super-block b is issued
 * before the float work of b - 1 (sums in C[b & 1]). Measured (bench-kernels, 1 thread, 64 and
 * 256 rows, 640x1024 and 640x2048; docs/results.md): 1.21-1.30x the vector tiles. Q6_K's 16-element sub-blocks
 * measured 0.85x (16 tile blocks per super-block, each costing its loads and store more than
 * its products), so Q6_K stays on the vector tiles. */
SDN_INLINE void kamx_rows_any(const int M, const kblk *kbs, int64_t nb, const char *act, size_t stride, int64_t in,
                              int r, float *Y, int64_t ldy, int nc) {
    int32_t C[2][8][16][CW] __attribute__((aligned(64)));
    vf acc[16];
    const float *xd[16] = {0};
    const int16_t *bs[16] = {0};
    const char *a0 = act + (size_t)r * stride;
    SDN_UNROLL
    for (int j = 0; j < 16; j++) acc[j] = VF_ZERO();
    SDN_UNROLL
    for (int j = 0; j < M; j++) {
        xd[j] = sdn_act_d(a0 + (size_t)j * stride, in);
        bs[j] = sdn_act_bsum(a0 + (size_t)j * stride, in);
    }
    for (int64_t b = 0; b <= nb; b++) {
        if (b < nb)
            for (int sb = 0; sb < 8; sb++)
                amx_block(sb & 1, a0 + 256 * b + 32 * sb, stride, &kbs[b].v[8 * sb], &C[b & 1][sb][0][0]);
        if (b == 0) continue;
        const int64_t p = b - 1;
        const kblk *kb = kbs + p;
        const int32_t(*Cp)[16][CW] = C[p & 1];
        const vf d = VF_LOAD(kb->d), dmin = VF_LOAD(kb->dmin);
        SDN_UNROLL
        for (int j = 0; j < M; j++) {
            vi isum = VI_ZERO(), summ = VI_ZERO();
            for (int sb = 0; sb < 8; sb++) isum = VI_ADD(isum, VI_MULLO(VI_LOAD(&kb->sc[sb]), VI_LOAD(Cp[sb][j])));
            const int16_t *sj = bs[j] + 16 * p;
            for (int k = 0; k < 8; k++) summ = VDPW(summ, VI_LOAD(&kb->m[k]), VI_SET1((int)ld32(sj + 2 * k)));
            const vf dx = VF_SET1(xd[j][p]);
            acc[j] = VF_ADD(acc[j], VF_MUL(VF_CVT(isum), VF_MUL(d, dx)));
            acc[j] = VF_SUB(acc[j], VF_MUL(VF_CVT(summ), VF_MUL(dmin, dx)));
        }
    }
    const __mmask16 keep = (__mmask16)((1u << nc) - 1); /* the first nc columns, straight into Y */
    SDN_UNROLL
    for (int j = 0; j < M; j++) _mm512_mask_storeu_ps(Y + (size_t)j * ldy, keep, acc[j]);
}
static void kamx_rows16(const kblk *kbs, int64_t nb, const char *act, size_t stride, int64_t in, int r, float *Y,
                        int64_t ldy, int nc) {
    kamx_rows_any(16, kbs, nb, act, stride, in, r, Y, ldy, nc);
}
static void kamx_rows(const kblk *kbs, int64_t nb, const char *act, size_t stride, int64_t in, int r, int m, float *Y,
                      int64_t ldy, int nc) {
    kamx_rows_any(m, kbs, nb, act, stride, in, r, Y, ldy, nc);
}

/* Columns [o0, o1) of packed Q4_K / Q5_K weights on AMX: per column group, its super-blocks
 * unpacked into scratch once (as KPK_SCR), then 16 rows at a time. Out of memory: the vector
 * tiles. */
static void kpk_amx_range(uint32_t wtype, const pk_tile_fn *tiles, const uint8_t *P, int64_t nb, size_t gbytes,
                          const char *act, size_t stride, int64_t in, int n, float *Y, int64_t ldy, int64_t o0, int64_t o1) {
    kblk *kbs = col_scratch((size_t)nb * sizeof(kblk));
    if (!kbs) {
        pk_drive(P, nb, gbytes, tiles, NULL, NULL, act, stride, in, n, Y, ldy, o0, o1);
        return;
    }
    uint8_t cfg[64] __attribute__((aligned(64)));
    int cm = 0;
    for (int64_t o = o0; o < o1; o += 16) {
        const int nc = o1 - o < 16 ? (int)(o1 - o) : 16;
        const uint8_t *G = P + (size_t)(o / 16) * gbytes;
        for (int64_t b = 0; b < nb; b++) build_any(wtype, 1, NULL, G, 0, nb, b, gbytes, kbs + b);
        for (int r = 0; r < n; r += 16) {
            const int m = n - r < 16 ? n - r : 16;
            if (m != cm) {
                sdn_amx_tile_config(cfg, m);
                __asm__ volatile("ldtilecfg %0" ::"m"(*(const uint8_t(*)[64])cfg) : "memory");
            sdn_amx_att_rows = 0; /* attention's configuration is gone */
                cm = m;
            }
            if (m == 16) kamx_rows16(kbs, nb, act, stride, in, r, Y + (size_t)r * ldy + o, ldy, nc);
            else kamx_rows(kbs, nb, act, stride, in, r, m, Y + (size_t)r * ldy + o, ldy, nc);
        }
    }
    if (cm) __asm__ volatile("tilerelease" ::: "memory");
}
#endif

/* sdn_matmul_rows_packed for Q4_K / Q5_K / Q6_K and o0 a multiple of SDN_PACK_COLS: per column
 * group, row tiles unpack each super-block from the packed group as they go, or (from
 * KPK_SCR_ROWS rows) the group is unpacked into scratch once. Returns 0 for other types. */
int SDN_KFN(sdn_matmul_kcols_packed)(uint32_t wtype, const void *P, int64_t in, const void *act, int n, float *Y,
                                     int64_t ldy, int64_t o0, int64_t o1, int amx) {
    const pk_tile_fn *tiles;
    pk_group_fn group;
    switch (wtype) {
    case SDN_TYPE_Q4_K: tiles = kpk_q4k_tiles; group = kpk_q4k_scr; break;
    case SDN_TYPE_Q5_K: tiles = kpk_q5k_tiles; group = kpk_q5k_scr; break;
    case SDN_TYPE_Q6_K: tiles = kpk_q6k_tiles; group = kpk_q6k_scr; break;
    default: return 0;
    }
    if (n < KPK_SCR_ROWS) group = NULL;
    const int64_t nb = in / 256;
#if CW == 16
    if (amx && wtype != SDN_TYPE_Q6_K) {
        kpk_amx_range(wtype, tiles, P, nb, (size_t)nb * 16 * sdn_type_block_bytes(wtype), (const char *)act,
                      sdn_act_row_stride(wtype, in), in, n, Y, ldy, o0, o1);
        return 1;
    }
#else
    (void)amx;
#endif
    pk_drive(P, nb, (size_t)nb * 16 * sdn_type_block_bytes(wtype), tiles, group, NULL, (const char *)act,
             sdn_act_row_stride(wtype, in), in, n, Y, ldy, o0, o1);
    return 1;
}

/* Returns 0 (and does nothing) for types other than Q4_K, Q5_K and Q6_K. */
int SDN_KFN(sdn_matmul_kcols)(uint32_t wtype, const void *W, size_t row_bytes, int64_t in, const void *act, int n,
                              float *Y, int64_t ldy, int64_t o0, int64_t o1) {
    const col_tile_fn *tiles;
    col_build_fn bld;
    switch (wtype) {
    case SDN_TYPE_Q4_K: tiles = q4k_tiles; bld = q4k_build; break;
    case SDN_TYPE_Q5_K: tiles = q5k_tiles; bld = q5k_build; break;
    case SDN_TYPE_Q6_K: tiles = q6k_tiles; bld = q6k_build; break;
    default: return 0;
    }
    col_drive(W, row_bytes, in / 256, sizeof(kblk), bld, tiles, NULL, (const char *)act, sdn_act_row_stride(wtype, in), in,
              n, Y, ldy, o0, o1);
    return 1;
}

#endif
