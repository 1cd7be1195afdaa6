/* matmul_cols.h - vector helpers of the column-parallel kernels (matmul_cols_avx2.c,
 * matmul_kcols_avx2.c). Internal; include only under SDN_MATMUL_AVX2, after matmul_avx2.h.
 *
 * With AVX-512 (F/BW/VNNI) a column group is CW = 16 lanes of a zmm, otherwise CW = 8 lanes of
 * a ymm; the VI_* / VF_* macros are the integer / float operations at that width, VDP the
 * exact u8 x s8 dot product into int32 lanes (vpdpbusd, or vpmaddubsw + vpmaddwd without
 * VNNI, exact for the operand ranges the kernels use), VDPW the s16 x s16 pair dot product
 * into int32 lanes (vpdpwssd, or vpmaddwd + vpaddd, which saturates only when all four int16
 * are -32768; the kernels' operands are far smaller). transpose32 / transpose16 turn 32 / 16
 * bytes at the same offset of CW weight rows into vectors whose lane c holds dword t of row c
 * (the vpdpbusd operand layout: one lane per output column). */
#ifndef SDN_MATMUL_COLS_H
#define SDN_MATMUL_COLS_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#define CW 16
#define VI_SRA32(a, k) _mm512_srai_epi32(a, k)
typedef __m512i vi;
typedef __m512 vf;
#define VI_ZERO() _mm512_setzero_si512()
#define VI_SET1(v) _mm512_set1_epi32(v)
#define VI_AND(a, b) _mm512_and_si512(a, b)
#define VI_SUB(a, b) _mm512_sub_epi32(a, b)
#define VI_XOR(a, b) _mm512_xor_si512(a, b)
#define VI_SRL16(a, k) _mm512_srli_epi16(a, k)
#define VI_LOAD(p) _mm512_load_si512((const void *)(p))
#define VI_STORE(p, v) _mm512_store_si512((void *)(p), v)
#define VDP(acc, u, s) _mm512_dpbusd_epi32(acc, u, s)
#define VDPW(acc, a, b) _mm512_dpwssd_epi32(acc, a, b)
#define VF_ZERO() _mm512_setzero_ps()
#define VF_SET1(v) _mm512_set1_ps(v)
#define VF_LOAD(p) _mm512_load_ps(p)
#define VF_STORE(p, v) _mm512_store_ps(p, v)
#define VF_STOREU(p, v) _mm512_storeu_ps(p, v)
#define VF_CVT(v) _mm512_cvtepi32_ps(v)
#define VF_MUL(a, b) _mm512_mul_ps(a, b)
#define VF_ADD(a, b) _mm512_add_ps(a, b)
#define VF_SUB(a, b) _mm512_sub_ps(a, b)
#define VI_ADD(a, b) _mm512_add_epi32(a, b)
#define VI_MULLO(a, b) _mm512_mullo_epi32(a, b)
#define VI_SRL32(a, k) _mm512_srli_epi32(a, k)
#define VI_SLL32(a, k) _mm512_slli_epi32(a, k)
#define VI_OR(a, b) _mm512_or_si512(a, b)
#define VNNI_DP 1
#else
#define CW 8
#define VI_SRA32(a, k) _mm256_srai_epi32(a, k)
typedef __m256i vi;
typedef __m256 vf;
#define VI_ZERO() _mm256_setzero_si256()
#define VI_SET1(v) _mm256_set1_epi32(v)
#define VI_AND(a, b) _mm256_and_si256(a, b)
#define VI_SUB(a, b) _mm256_sub_epi32(a, b)
#define VI_XOR(a, b) _mm256_xor_si256(a, b)
#define VI_SRL16(a, k) _mm256_srli_epi16(a, k)
#define VI_LOAD(p) _mm256_load_si256((const __m256i *)(p))
#define VI_STORE(p, v) _mm256_store_si256((__m256i *)(p), v)
#define VDP(acc, u, s) sdn_dpbusd(acc, u, s)
#define VDPW(acc, a, b) _mm256_add_epi32(acc, _mm256_madd_epi16(a, b))
#define VF_ZERO() _mm256_setzero_ps()
#define VF_SET1(v) _mm256_set1_ps(v)
#define VF_LOAD(p) _mm256_load_ps(p)
#define VF_STORE(p, v) _mm256_store_ps(p, v)
#define VF_STOREU(p, v) _mm256_storeu_ps(p, v)
#define VF_CVT(v) _mm256_cvtepi32_ps(v)
#define VF_MUL(a, b) _mm256_mul_ps(a, b)
#define VF_ADD(a, b) _mm256_add_ps(a, b)
#define VF_SUB(a, b) _mm256_sub_ps(a, b)
#define VI_ADD(a, b) _mm256_add_epi32(a, b)
#define VI_MULLO(a, b) _mm256_mullo_epi32(a, b)
#define VI_SRL32(a, k) _mm256_srli_epi32(a, k)
#define VI_SLL32(a, k) _mm256_slli_epi32(a, k)
#define VI_OR(a, b) _mm256_or_si256(a, b)
#ifdef SDN_VNNI
#define VNNI_DP 1
#else
#define VNNI_DP 0
#endif
#endif

SDN_INLINE uint32_t ld32(const void *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* In-lane 4x4 transpose of 32-bit elements across a0..a3 (every 128-bit lane separately):
 * out[t] lane-position i of each 128-bit lane = a_i's element t of that lane. */
#define TRANSPOSE4(T, UNLO32, UNHI32, UNLO64, UNHI64, a0, a1, a2, a3, out)                                          \
    do {                                                                                                             \
        const T t0_ = UNLO32(a0, a1), t1_ = UNHI32(a0, a1), t2_ = UNLO32(a2, a3), t3_ = UNHI32(a2, a3);                \
        out[0] = UNLO64(t0_, t2_);                                                                                    \
        out[1] = UNHI64(t0_, t2_);                                                                                    \
        out[2] = UNLO64(t1_, t3_);                                                                                    \
        out[3] = UNHI64(t1_, t3_);                                                                                    \
    } while (0)

#if CW == 16
#define TR4(a0, a1, a2, a3, out)                                                                                     \
    TRANSPOSE4(__m512i, _mm512_unpacklo_epi32, _mm512_unpackhi_epi32, _mm512_unpacklo_epi64, _mm512_unpackhi_epi64, \
               a0, a1, a2, a3, out)
/* 32 bytes of rows r[0..15] at byte offset off -> V[t] lane c = dword t of row c. */
SDN_INLINE void transpose32(const uint8_t *const *r, size_t off, vi *V) {
    __m512i a[8], x[4], y[4];
    for (int j = 0; j < 4; j++) {
        a[j] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(r[j] + off))),
                                  _mm256_loadu_si256((const __m256i *)(r[j + 4] + off)), 1);
        a[4 + j] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(r[8 + j] + off))),
                                      _mm256_loadu_si256((const __m256i *)(r[12 + j] + off)), 1);
    }
    TR4(a[0], a[1], a[2], a[3], x);
    TR4(a[4], a[5], a[6], a[7], y);
    for (int t = 0; t < 4; t++) {
        V[t] = _mm512_shuffle_i64x2(x[t], y[t], _MM_SHUFFLE(2, 0, 2, 0));
        V[4 + t] = _mm512_shuffle_i64x2(x[t], y[t], _MM_SHUFFLE(3, 1, 3, 1));
    }
}
/* 16 bytes of rows r[0..15] at off -> P[t] lane c = dword t of row c (t < 4). */
SDN_INLINE void transpose16(const uint8_t *const *r, size_t off, vi *P) {
    __m512i a[4];
    for (int i = 0; i < 4; i++) {
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(r[i] + off)));
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(r[4 + i] + off)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(r[8 + i] + off)), 2);
        a[i] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(r[12 + i] + off)), 3);
    }
    TR4(a[0], a[1], a[2], a[3], P);
}
#else
#define TR4(a0, a1, a2, a3, out)                                                                                     \
    TRANSPOSE4(__m256i, _mm256_unpacklo_epi32, _mm256_unpackhi_epi32, _mm256_unpacklo_epi64, _mm256_unpackhi_epi64, \
               a0, a1, a2, a3, out)
SDN_INLINE void transpose32(const uint8_t *const *r, size_t off, vi *V) {
    __m256i a[8], x[4], y[4];
    for (int j = 0; j < 8; j++) a[j] = _mm256_loadu_si256((const __m256i *)(r[j] + off));
    TR4(a[0], a[1], a[2], a[3], x);
    TR4(a[4], a[5], a[6], a[7], y);
    for (int t = 0; t < 4; t++) {
        V[t] = _mm256_permute2x128_si256(x[t], y[t], 0x20);
        V[4 + t] = _mm256_permute2x128_si256(x[t], y[t], 0x31);
    }
}
SDN_INLINE void transpose16(const uint8_t *const *r, size_t off, vi *P) {
    __m256i a[4];
    for (int i = 0; i < 4; i++)
        a[i] = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(r[i] + off))),
                                       _mm_loadu_si128((const __m128i *)(r[4 + i] + off)), 1);
    TR4(a[0], a[1], a[2], a[3], P);
}
#endif

/* Lane c = the 4 bytes at r[c] + off (a gather over the group's rows). */
SDN_INLINE vi gather32(const uint8_t *const *r, size_t off) {
#if CW == 16
    const __m512i b = _mm512_set1_epi64((long long)(uintptr_t)r[0]);
    const __m256i i0 = _mm512_cvtepi64_epi32(_mm512_sub_epi64(_mm512_loadu_si512((const void *)r), b));
    const __m256i i1 = _mm512_cvtepi64_epi32(_mm512_sub_epi64(_mm512_loadu_si512((const void *)(r + 8)), b));
    const __m512i idx = _mm512_inserti64x4(_mm512_castsi256_si512(i0), i1, 1);
    return _mm512_i32gather_epi32(idx, (const void *)(r[0] + off), 1);
#else
    const __m256i b = _mm256_set1_epi64x((long long)(uintptr_t)r[0]);
    const __m256i d0 = _mm256_sub_epi64(_mm256_loadu_si256((const __m256i *)r), b);
    const __m256i d1 = _mm256_sub_epi64(_mm256_loadu_si256((const __m256i *)(r + 4)), b);
    /* low dwords of the 8 int64 differences, in order */
    const __m256i sel = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
    const __m256i lo = _mm256_permutevar8x32_epi32(d0, sel), hi = _mm256_permutevar8x32_epi32(d1, sel);
    const __m256i idx = _mm256_permute2x128_si256(lo, hi, 0x20);
    return _mm256_i32gather_epi32((const int *)(r[0] + off), idx, 1);
#endif
}

/* Lane c = the fp16 in the low (hi = 0) or high (hi = 1) 16 bits of lane c of v, as fp32
 * (F16C: the exact conversion, the same values as sdn_f16_table). */
SDN_INLINE vf vf_from_f16(vi v, int hi) {
#if CW == 16
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(hi ? _mm512_srli_epi32(v, 16) : v));
#else
    const __m256i h = hi ? _mm256_srli_epi32(v, 16) : _mm256_and_si256(v, _mm256_set1_epi32(0xFFFF));
    return _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
#endif
}

/* ---- the driver shared by the column kernels ----
 * A kernel supplies: blk_bytes (the unpacked form of one (column group, block)), build (unpack
 * block b of the group's CW weight rows into a blk), tiles[tx - 1] (rows [r, r + tx) of the
 * batch, tx <= COL_RT, against all blocks: from the unpacked blocks, or unpacking per block
 * when given NULL; writes out[tx][CW]) and optionally group (all n rows of a group at once from
 * the unpacked blocks, writing out[row][CW] rows of up to 16 at a time via its own loop; NULL
 * when unused). */
#if CW == 16
/* AVX-512 has 32 vector registers: 8 rows' accumulators (16 with Q4_1's min term) and a
 * block's 8 weight vectors fit, so a verify step of up to 8 rows (the default draft budgets)
 * unpacks each weight block once, in registers, and needs no scratch pass */
#define COL_RT 8        /* activation rows per tile */
#define COL_FUSE_ROWS 8 /* batches up to this size unpack in registers, larger ones via scratch */
#else
#define COL_RT 4
#define COL_FUSE_ROWS 4
#endif

typedef void (*col_build_fn)(const uint8_t *const *rows, int64_t b, size_t pf, void *blk);
typedef void (*col_tile_fn)(const uint8_t *const *rows, const void *blks, int64_t nb, size_t pf, const char *act,
                            size_t stride, int64_t in, int r, float *out);
/* All n rows of one group from the unpacked blocks into Y (columns [o, o + nc)). */
typedef void (*col_group_fn)(const void *blks, int64_t nb, const char *act, size_t stride, int64_t in, int n, float *Y,
                             int64_t ldy, int64_t o, int nc);

/* Per-thread scratch of at least `bytes` (64-byte aligned; NULL when out of memory). The
 * buffer is also registered under a thread-specific key whose destructor frees it when the
 * thread exits: every context's pool creates and joins its own worker threads, so without
 * it each context freed leaked one buffer per worker (found by LeakSanitizer). */
static __thread void *g_col_scratch;
static __thread size_t g_col_scratch_bytes;
static pthread_key_t g_col_key;
static pthread_once_t g_col_once = PTHREAD_ONCE_INIT;
static int g_col_key_ok;
static void col_scratch_release(void *p) {
    free(p);
    g_col_scratch = NULL;
    g_col_scratch_bytes = 0;
}
static void col_key_init(void) { g_col_key_ok = pthread_key_create(&g_col_key, col_scratch_release) == 0; }
static inline void *col_scratch(size_t bytes) {
    if (bytes > g_col_scratch_bytes) {
        free(g_col_scratch);
        g_col_scratch = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
        g_col_scratch_bytes = g_col_scratch ? bytes : 0;
        pthread_once(&g_col_once, col_key_init);
        if (g_col_key_ok) pthread_setspecific(g_col_key, g_col_scratch);
    }
    return g_col_scratch;
}

/* Rows 0..tx of out[tx][CW] into Y (row stride ldy), the first nc columns of each: a full
 * group with fixed-size copies (vector moves, no call). */
static inline void col_store(float *Y, int64_t ldy, const float *out, int tx, int nc) {
    if (nc == CW)
        for (int j = 0; j < tx; j++) memcpy(Y + (size_t)j * ldy, out + j * CW, sizeof(float) * CW);
    else
        for (int j = 0; j < tx; j++) memcpy(Y + (size_t)j * ldy, out + j * CW, sizeof(float) * (size_t)nc);
}

/* All n rows of one column group from its unpacked blocks (scratch), COL_RT rows per tile,
 * into Y columns [o, o + nc): the scratch paths of the packed layouts (PK_SCR, KPK_SCR). */
static inline void col_tiles_run(const col_tile_fn *tiles, const void *blks, int64_t nb, const char *act,
                                 size_t stride, int64_t in, int n, float *Y, int64_t ldy, int64_t o, int nc) {
    float out[COL_RT * CW] __attribute__((aligned(64)));
    for (int r = 0; r < n; r += COL_RT) {
        const int tx = n - r < COL_RT ? n - r : COL_RT;
        tiles[tx - 1](NULL, blks, nb, 0, act, stride, in, r, out);
        col_store(Y + (size_t)r * ldy + o, ldy, out, tx, nc);
    }
}

/* Y[r][o] for r < n, o0 <= o < o1: column groups of CW (the last one repeats its last valid
 * row in the missing lanes, which are not stored), each unpacked once into scratch for
 * batches above COL_FUSE_ROWS (without scratch memory every tile unpacks for itself: slower,
 * the same bits), then row tiles or `group`. */
static inline void col_drive(const void *W, size_t row_bytes, int64_t nb, size_t blk_bytes, col_build_fn build,
                             const col_tile_fn *tiles, col_group_fn group, const char *act, size_t stride, int64_t in,
                             int n, float *Y, int64_t ldy, int64_t o0, int64_t o1) {
    const size_t pf = (size_t)CW * row_bytes; /* prefetch distance: the next group's rows */
    char *blks = n > COL_FUSE_ROWS ? col_scratch((size_t)nb * blk_bytes) : NULL;
    float out[COL_RT * CW] __attribute__((aligned(64)));
    for (int64_t o = o0; o < o1; o += CW) {
        const int nc = o1 - o < CW ? (int)(o1 - o) : CW;
        const uint8_t *rows[CW];
        for (int c = 0; c < CW; c++) rows[c] = (const uint8_t *)W + (size_t)(o + (c < nc ? c : nc - 1)) * row_bytes;
        if (blks)
            for (int64_t b = 0; b < nb; b++) build(rows, b, pf, blks + (size_t)b * blk_bytes);
        if (group && blks) {
            group(blks, nb, act, stride, in, n, Y, ldy, o, nc);
            continue;
        }
        for (int r = 0; r < n; r += COL_RT) {
            const int tx = n - r < COL_RT ? n - r : COL_RT;
            tiles[tx - 1](rows, blks, nb, pf, act, stride, in, r, out);
            col_store(Y + (size_t)r * ldy + o, ldy, out, tx, nc);
        }
    }
}

#if COL_RT == 8
#define COL_TILE_MORE(pfx, BODY, BLK, T)                                                                              \
    COL_TILE_FN(pfx##_5, BODY, BLK, T, 5)                                                                             \
    COL_TILE_FN(pfx##_6, BODY, BLK, T, 6)                                                                             \
    COL_TILE_FN(pfx##_7, BODY, BLK, T, 7)                                                                             \
    COL_TILE_FN(pfx##_8, BODY, BLK, T, 8)
#define COL_TILE_MORE_LIST(pfx) , pfx##_5, pfx##_6, pfx##_7, pfx##_8
#else
#define COL_TILE_MORE(pfx, BODY, BLK, T)
#define COL_TILE_MORE_LIST(pfx)
#endif

/* tile functions for tile sizes 1..COL_RT of an inline tile body BODY(T, TX, ...), a build wrapper,
 * and the table pfx##_tiles */
#define COL_TILE_FN(name, BODY, BLK, T, TX)                                                                           \
    static void name(const uint8_t *const *rows, const void *blks, int64_t nb, size_t pf, const char *act,           \
                     size_t stride, int64_t in, int r, float *out) {                                                  \
        BODY(T, TX, rows, (const BLK *)blks, nb, pf, act, stride, in, r, out);                                        \
    }
#define COL_TILE_SET(pfx, BODY, BUILD, BLK, T)                                                                        \
    COL_TILE_FN(pfx##_1, BODY, BLK, T, 1)                                                                             \
    COL_TILE_FN(pfx##_2, BODY, BLK, T, 2)                                                                             \
    COL_TILE_FN(pfx##_3, BODY, BLK, T, 3)                                                                             \
    COL_TILE_FN(pfx##_4, BODY, BLK, T, 4)                                                                             \
    COL_TILE_MORE(pfx, BODY, BLK, T)                                                                                  \
    static void pfx##_build(const uint8_t *const *rows, int64_t b, size_t pf, void *blk) {                            \
        BUILD(T, rows, b, pf, (BLK *)blk);                                                                            \
    }                                                                                                                 \
    static const col_tile_fn pfx##_tiles[COL_RT] = {pfx##_1, pfx##_2, pfx##_3, pfx##_4 COL_TILE_MORE_LIST(pfx)};

/* ---- the driver shared by the column kernels on packed weights (matmul_pack.c) ----
 * A kernel supplies tiles[tx - 1] (rows [r, r + tx) of the batch, tx <= COL_RT, against the
 * packed column group G, lanes of half h (0 with 16 lanes), unpacking each block as it goes
 * and prefetching pf bytes on when pf > 0; writes out[tx][CW]) and optionally group (all n
 * rows of group G at once, writing Y: the AMX path). gbytes = bytes of one packed group. */
typedef void (*pk_tile_fn)(const uint8_t *G, int h, int64_t nb, size_t pf, const char *act, size_t stride, int64_t in,
                           int r, float *out);
typedef void (*pk_group_fn)(const uint8_t *G, int64_t nb, size_t gbytes, const char *act, size_t stride, int64_t in,
                            int n, float *Y, int64_t ldy, int64_t o, int nc);

/* One activation row against the whole CW-column groups at columns oa and ob (see pk_drive). */
typedef void (*pk_pair_fn)(const uint8_t *Ga, int ha, const uint8_t *Gb, int hb, int64_t nb, size_t pf,
                           const char *act, int64_t in, float *outa, float *outb);

/* Y[r][o] for r < n, o0 <= o < o1, o0 a multiple of 16 (the packed group width). The first
 * tile of a group prefetches the next group. With one row and a pair function, the whole
 * groups of the range run as two streams (the first half of the groups beside the second
 * half), then the rest as usual. */
static inline void pk_drive(const void *P, int64_t nb, size_t gbytes, const pk_tile_fn *tiles, pk_group_fn group,
                            pk_pair_fn pair, const char *act, size_t stride, int64_t in, int n, float *Y, int64_t ldy,
                            int64_t o0, int64_t o1) {
    float out[COL_RT * CW] __attribute__((aligned(64)));
    if (n == 1 && pair && !group) {
        const int64_t half = (o1 - o0) / CW / 2; /* pairs of whole groups */
        for (int64_t k = 0; k < half; k++) {
            const int64_t oa = o0 + k * CW, ob = oa + half * CW;
            pair((const uint8_t *)P + (size_t)(oa / 16) * gbytes, (int)(oa % 16) / CW,
                 (const uint8_t *)P + (size_t)(ob / 16) * gbytes, (int)(ob % 16) / CW, nb, gbytes, act, in, Y + oa, Y + ob);
        }
        o0 += 2 * half * CW;
    }
    for (int64_t o = o0; o < o1; o += CW) {
        const int nc = o1 - o < CW ? (int)(o1 - o) : CW;
        const uint8_t *G = (const uint8_t *)P + (size_t)(o / 16) * gbytes;
        if (group) {
            group(G, nb, gbytes, act, stride, in, n, Y, ldy, o, nc);
            continue;
        }
        for (int r = 0; r < n; r += COL_RT) {
            const int tx = n - r < COL_RT ? n - r : COL_RT;
            tiles[tx - 1](G, (int)(o % 16) / CW, nb, r ? 0 : gbytes, act, stride, in, r, out);
            col_store(Y + (size_t)r * ldy + o, ldy, out, tx, nc);
        }
    }
}

/* Tile functions pfx##_1..COL_RT on packed weights from a tile body BODY(T, TX, G, h, nb, pf,
 * act, stride, in, r, out), and the table pfx##_tiles. */
#define PK_TILE_FN(name, BODY, T, TX)                                                                                 \
    static void name(const uint8_t *G, int h, int64_t nb, size_t pf, const char *act, size_t stride, int64_t in,      \
                     int r, float *out) {                                                                             \
        BODY(T, TX, G, h, nb, pf, act, stride, in, r, out);                                                           \
    }
#if COL_RT == 8
#define PK_TILE_MORE(pfx, BODY, T)                                                                                    \
    PK_TILE_FN(pfx##_5, BODY, T, 5) PK_TILE_FN(pfx##_6, BODY, T, 6) PK_TILE_FN(pfx##_7, BODY, T, 7)                   \
    PK_TILE_FN(pfx##_8, BODY, T, 8)
#else
#define PK_TILE_MORE(pfx, BODY, T)
#endif
#define PK_TILE_SET(pfx, BODY, T)                                                                                     \
    PK_TILE_FN(pfx##_1, BODY, T, 1) PK_TILE_FN(pfx##_2, BODY, T, 2) PK_TILE_FN(pfx##_3, BODY, T, 3)                   \
    PK_TILE_FN(pfx##_4, BODY, T, 4) PK_TILE_MORE(pfx, BODY, T)                                                        \
    static const pk_tile_fn pfx##_tiles[COL_RT] = {pfx##_1, pfx##_2, pfx##_3, pfx##_4 COL_TILE_MORE_LIST(pfx)};

#if CW == 16
/* One AMX block of the column kernels' AMX loops (matmul_cols_avx2.c "AMX-INT8",
 * matmul_kcols_avx2.c): c[16][16] = the exact int32 sums A x B by tdpbssd, A = the tiles'
 * configured rows of 32 int8 at a (row stride `stride`), B = 8 rows of 64 bytes at bv (16
 * columns x 4 bytes), with the tile set of parity par (sdn_amx_tile_config: C tmm0/tmm1, A
 * tmm2/tmm3, B tmm4/tmm5). Inline asm, not intrinsics: see matmul_cols_avx2.c. */
static inline __attribute__((always_inline)) void amx_block(int par, const char *a, size_t stride, const void *bv, int32_t *c) {
    if (par)
        __asm__ volatile("tilezero %%tmm1\n\t"
                         "tileloadd (%0,%1,1), %%tmm3\n\t"
                         "tileloadd (%2,%3,1), %%tmm5\n\t"
                         "tdpbssd %%tmm5, %%tmm3, %%tmm1\n\t"
                         "tilestored %%tmm1, (%4,%3,1)"
                         :
                         : "r"(a), "r"((long)stride), "r"(bv), "r"((long)64), "r"(c)
                         : "memory");
    else
        __asm__ volatile("tilezero %%tmm0\n\t"
                         "tileloadd (%0,%1,1), %%tmm2\n\t"
                         "tileloadd (%2,%3,1), %%tmm4\n\t"
                         "tdpbssd %%tmm4, %%tmm2, %%tmm0\n\t"
                         "tilestored %%tmm0, (%4,%3,1)"
                         :
                         : "r"(a), "r"((long)stride), "r"(bv), "r"((long)64), "r"(c)
                         : "memory");
}
#endif

#endif
