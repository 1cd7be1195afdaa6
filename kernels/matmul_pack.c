/* matmul_pack.c - the packed weight layout of the column kernels (matmul.h, "Packed
 * weights"): packing a matrix at load time and reading its blocks back in the file's layout
 * (the portable kernel on packed weights, matmul_portable.c, reads them that way).
 *
 * The file stores a matrix row by row, block after block (ggml's block_q8_0, block_q4_0,
 * block_q4_1, block_q5_0, block_q5_1 of 32 elements and block_q4_K, block_q5_K, block_q6_K of
 * 256, ggml-common.h). The column
 * kernels (matmul_cols_avx2.c, matmul_kcols_avx2.c) work on groups of output columns, one
 * vector lane per column, and want a block of every column of a group as vpdpbusd-style
 * operands: vector t, lane c = bytes 4t..4t+3 of column c's block. Reading the file's
 * layout they build that with gathers and shuffles for every block of every call, which at
 * one activation row costs more than the dot products themselves. The packed layout stores
 * it that way once. Per type, a block is a run of whole dwords (the vector bytes: nv dwords
 * from byte vo) and up to two 2-byte fields outside it (fp16 scales):
 *
 *   type   block  vector bytes          fields
 *   Q8_0   34     2..33   (nv 8)        d at 0
 *   Q4_0   18     2..17   (nv 4)        d at 0
 *   Q4_1   20     4..19   (nv 4)        d at 0, m at 2
 *   Q5_0   22     2..21   (nv 5)        d at 0   (dword 0 = qh, bit-permuted: qh_perm)
 *   Q5_1   24     4..23   (nv 5)        d at 0, m at 2   (dword 0 = qh, as Q5_0)
 *   Q4_K   144    0..143  (nv 36)       -        (d, dmin and the scales are dwords 0..3)
 *   Q5_K   176    0..175  (nv 44)       -        (as Q4_K; qh[32] are dwords 4..11)
 *   Q6_K   210    0..207  (nv 52)       d at 208
 *
 *   columns in groups of SDN_PACK_COLS (16); a last, partial group repeats its last column;
 *   group g at P + g * nb * 16 * block_bytes (nb blocks a row), inside it:
 *     vectors: for each block b, nv vectors of 64 bytes: byte 4c + k of vector t = byte
 *              vo + 4t + k of column c's block b
 *     fields:  for each field f, for each block b: the 16 columns' 2 bytes (32 bytes)
 *
 * so a group takes exactly the bytes of its 16 file rows (Q5_0/Q5_1's qh with its bits in
 * another order). An 8-lane (AVX2) kernel reads the
 * lower or upper half of every vector and field row: one layout serves every SIMD path. The
 * data are the file's bytes (and bits) rearranged, so the kernels compute the same integers and the
 * same floats as on the file's layout (the batch-invariance contract of matmul.h holds
 * across layouts too). */
#include <string.h>

#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "modelfile/tensor_types.h"

typedef struct {
    int bb, vo, nv, nf, fo[2];
    int qhperm; /* 1: vector dword 0 is Q5_0/Q5_1's qh, stored bit-permuted (qh_perm) */
} pack_spec;

/* The packed form of wtype (nv = 0: none). */
static pack_spec spec(uint32_t wtype) {
    switch (wtype) {
    case SDN_TYPE_Q8_0: return (pack_spec){34, 2, 8, 1, {0, 0}, 0};
    case SDN_TYPE_Q4_0: return (pack_spec){18, 2, 4, 1, {0, 0}, 0};
    case SDN_TYPE_Q4_1: return (pack_spec){20, 4, 4, 2, {0, 2}, 0};
#if !defined(__aarch64__)
    /* not on AArch64, whose kernels (matmul_arm.c) leave the 5-bit types to the portable
     * kernel: reading packed blocks back one at a time made its one-row Q5_0 calls 1.75x
     * slower than on the file's layout (measured on the x86 portable path, the same C) */
    case SDN_TYPE_Q5_0: return (pack_spec){22, 2, 5, 1, {0, 0}, 1};
    case SDN_TYPE_Q5_1: return (pack_spec){24, 4, 5, 2, {0, 2}, 1};
    case SDN_TYPE_Q5_K: return (pack_spec){176, 0, 44, 0, {0, 0}, 0};
#endif
    case SDN_TYPE_Q4_K: return (pack_spec){144, 0, 36, 0, {0, 0}, 0};
    case SDN_TYPE_Q6_K: return (pack_spec){210, 0, 52, 1, {208, 0}, 0};
    default: return (pack_spec){0, 0, 0, 0, {0, 0}, 0};
    }
}

int sdn_matmul_packable(uint32_t wtype) { return spec(wtype).nv > 0; }

/* The stored form of Q5_0/Q5_1's qh: bit 8k + j of the stored dword = bit 4j + k of the
 * file's qh (k < 4, j < 8), a bit permutation (inverse: qh_unperm). Element 4j + k's 5th bit
 * (vector j of a block, byte k: matmul_cols_avx2.c) is then bit j of byte k, so a kernel
 * moves all four of a vector's 5th bits into place with one shift and one mask. */
static uint32_t qh_perm(uint32_t qh) {
    uint32_t r = 0;
    for (int j = 0; j < 8; j++)
        for (int k = 0; k < 4; k++) r |= ((qh >> (4 * j + k)) & 1u) << (8 * k + j);
    return r;
}
static uint32_t qh_unperm(uint32_t p) {
    uint32_t r = 0;
    for (int j = 0; j < 8; j++)
        for (int k = 0; k < 4; k++) r |= ((p >> (8 * k + j)) & 1u) << (4 * j + k);
    return r;
}

/* Blocks per row, 0 if `in` does not fill whole blocks. */
static int64_t blocks(uint32_t wtype, int64_t in) {
    const int64_t be = sdn_type_block_elems(wtype);
    return in > 0 && be > 0 && in % be == 0 ? in / be : 0;
}

size_t sdn_matmul_packed_bytes(uint32_t wtype, int64_t in, int64_t out) {
    const pack_spec ps = spec(wtype);
    const int64_t nb = blocks(wtype, in);
    if (!ps.nv || !nb || out <= 0) return 0;
    const int64_t groups = (out + SDN_PACK_COLS - 1) / SDN_PACK_COLS;
    return (size_t)groups * SDN_PACK_COLS * (size_t)nb * (size_t)ps.bb;
}

/* Where group G keeps vector t of block b for column c, and field f of block b. */
static uint8_t *vec_at(uint8_t *G, const pack_spec *ps, int64_t b, int t, int c) {
    return G + ((size_t)b * ps->nv + t) * 64 + 4 * c;
}
static uint8_t *field_at(uint8_t *G, const pack_spec *ps, int64_t nb, int f, int64_t b, int c) {
    return G + (size_t)nb * ps->nv * 64 + ((size_t)f * nb + b) * 32 + 2 * c;
}

void sdn_matmul_pack(uint32_t wtype, const void *W, size_t row_bytes, int64_t in, int64_t out, void *P) {
    const pack_spec ps = spec(wtype);
    const int64_t nb = blocks(wtype, in);
    if (!sdn_matmul_packed_bytes(wtype, in, out)) return;
    const int64_t groups = (out + SDN_PACK_COLS - 1) / SDN_PACK_COLS;
    const size_t gbytes = (size_t)nb * SDN_PACK_COLS * ps.bb;
    for (int64_t g = 0; g < groups; g++) {
        uint8_t *G = (uint8_t *)P + (size_t)g * gbytes;
        for (int c = 0; c < SDN_PACK_COLS; c++) {
            int64_t o = g * SDN_PACK_COLS + c;
            if (o >= out) o = out - 1;
            const uint8_t *row = (const uint8_t *)W + (size_t)o * row_bytes;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + (size_t)b * ps.bb;
                for (int t = 0; t < ps.nv; t++) memcpy(vec_at(G, &ps, b, t, c), blk + ps.vo + 4 * t, 4);
                if (ps.qhperm) {
                    uint32_t qh;
                    memcpy(&qh, blk + ps.vo, 4);
                    qh = qh_perm(qh);
                    memcpy(vec_at(G, &ps, b, 0, c), &qh, 4);
                }
                for (int f = 0; f < ps.nf; f++) memcpy(field_at(G, &ps, nb, f, b, c), blk + ps.fo[f], 2);
            }
        }
    }
}

void sdn_matmul_packed_block(uint32_t wtype, const void *P, int64_t in, int64_t o, int64_t b, void *dst) {
    const pack_spec ps = spec(wtype);
    const int64_t nb = blocks(wtype, in);
    if (!ps.nv || !nb || o < 0 || b < 0 || b >= nb) return;
    const int c = (int)(o % SDN_PACK_COLS);
    uint8_t *G = (uint8_t *)P + (size_t)(o / SDN_PACK_COLS) * (size_t)nb * SDN_PACK_COLS * (size_t)ps.bb;
    uint8_t *blk = dst;
    for (int t = 0; t < ps.nv; t++) memcpy(blk + ps.vo + 4 * t, vec_at(G, &ps, b, t, c), 4);
    if (ps.qhperm) {
        uint32_t qh;
        memcpy(&qh, blk + ps.vo, 4);
        qh = qh_unperm(qh);
        memcpy(blk + ps.vo, &qh, 4);
    }
    for (int f = 0; f < ps.nf; f++) memcpy(blk + ps.fo[f], field_at(G, &ps, nb, f, b, c), 2);
}

void sdn_matmul_packed_row(uint32_t wtype, const void *P, int64_t in, int64_t o, void *dst) {
    const pack_spec ps = spec(wtype);
    const int64_t nb = blocks(wtype, in);
    for (int64_t b = 0; ps.nv && b < nb; b++)
        sdn_matmul_packed_block(wtype, P, in, o, b, (uint8_t *)dst + (size_t)b * (size_t)ps.bb);
}
