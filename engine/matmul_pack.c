/* matmul_pack.c - the packed weight layout of the column kernels (matmul.h, "Packed
 * weights"): packing a matrix at load time, reading a row of it back in the file's layout,
 * and the portable kernel on it.
 *
 * The file stores a Q8_0 / Q4_0 / Q4_1 matrix row by row, block after block (32 elements a
 * block: fp16 scale d, Q4_1 also an fp16 min m, then the level bytes: 16 bytes of nibbles or
 * 32 int8; ggml's block_q4_0 / block_q4_1 / block_q8_0, ggml-common.h). The column kernels
 * (matmul_cols_avx2.c) work on groups of output columns, one vector lane per column, and
 * want a block of every column of a group as vpdpbusd operands: vector t, lane c = level
 * bytes 4t..4t+3 of column c. Reading the file's layout they build that with a gather and
 * shuffles for every block of every call, which at one activation row costs more than the
 * dot products themselves. The packed layout stores it that way once:
 *
 *   columns in groups of SDN_PACK_COLS (16); a last, partial group repeats its last column;
 *   group g at P + g * nb * 16 * block_bytes (nb = in / 32), inside it:
 *     levels:  for each block b: NV vectors of 64 bytes (NV = 4 for Q4_0/Q4_1, 8 for Q8_0),
 *              byte 4c + k of vector t = level byte 4t + k of column c's block b (the file's
 *              bytes unchanged: Q4 nibbles as stored, Q8_0 signed levels)
 *     scales:  for each block b: the 16 columns' fp16 d (32 bytes)
 *     mins:    Q4_1 only, for each block b: the 16 columns' fp16 m (32 bytes)
 *
 * so a group takes exactly the bytes of its 16 file rows (NV*64 + 32 (+32) = 16 * block
 * bytes). An 8-lane (AVX2) kernel reads the lower or upper half of every vector and scale
 * row: one layout serves every SIMD path. The data are the file's bytes rearranged, so the
 * kernels compute the same integers and the same floats as on the file's layout (the
 * batch-invariance contract of matmul.h holds across layouts too). */
#include <string.h>

#include "engine/matmul.h"
#include "engine/matmul_internal.h"
#include "common/sdn_util.h"
#include "engine/matmul_ref.h"
#include "engine/tensor_types.h"

/* Level vectors per block, 0 for a type without a packed layout. */
static int pack_nv(uint32_t wtype) {
    switch (wtype) {
    case SDN_TYPE_Q8_0: return 8;
    case SDN_TYPE_Q4_0:
    case SDN_TYPE_Q4_1: return 4;
    default: return 0;
    }
}
static size_t blk_bytes(uint32_t wtype) { return wtype == SDN_TYPE_Q8_0 ? 34 : wtype == SDN_TYPE_Q4_0 ? 18 : 20; }
/* Offset of the level bytes inside a file block. */
static size_t lv_off(uint32_t wtype) { return wtype == SDN_TYPE_Q4_1 ? 4 : 2; }

int sdn_matmul_packable(uint32_t wtype) { return pack_nv(wtype) > 0; }

size_t sdn_matmul_packed_bytes(uint32_t wtype, int64_t in, int64_t out) {
    if (!pack_nv(wtype) || in <= 0 || in % 32 || out <= 0) return 0;
    const int64_t groups = (out + SDN_PACK_COLS - 1) / SDN_PACK_COLS;
    return (size_t)groups * SDN_PACK_COLS * (size_t)(in / 32) * blk_bytes(wtype);
}

void sdn_matmul_pack(uint32_t wtype, const void *W, size_t row_bytes, int64_t in, int64_t out, void *P) {
    const int nv = pack_nv(wtype);
    if (!nv || in <= 0 || in % 32 || out <= 0) return;
    const int64_t nb = in / 32, groups = (out + SDN_PACK_COLS - 1) / SDN_PACK_COLS;
    const size_t bb = blk_bytes(wtype), lo = lv_off(wtype), gbytes = (size_t)nb * SDN_PACK_COLS * bb;
    for (int64_t g = 0; g < groups; g++) {
        uint8_t *G = (uint8_t *)P + (size_t)g * gbytes;
        uint8_t *lv = G, *sc = G + (size_t)nb * nv * 64, *mn = sc + (size_t)nb * 32;
        for (int c = 0; c < SDN_PACK_COLS; c++) {
            int64_t o = g * SDN_PACK_COLS + c;
            if (o >= out) o = out - 1;
            const uint8_t *row = (const uint8_t *)W + (size_t)o * row_bytes;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + (size_t)b * bb;
                for (int t = 0; t < nv; t++) memcpy(lv + ((size_t)b * nv + t) * 64 + 4 * c, blk + lo + 4 * t, 4);
                memcpy(sc + (size_t)b * 32 + 2 * c, blk, 2);
                if (wtype == SDN_TYPE_Q4_1) memcpy(mn + (size_t)b * 32 + 2 * c, blk + 2, 2);
            }
        }
    }
}

void sdn_matmul_packed_row(uint32_t wtype, const void *P, int64_t in, int64_t o, void *dst) {
    const int nv = pack_nv(wtype);
    if (!nv || in <= 0 || in % 32 || o < 0) return;
    const int64_t nb = in / 32;
    const size_t bb = blk_bytes(wtype), lo = lv_off(wtype), gbytes = (size_t)nb * SDN_PACK_COLS * bb;
    const int c = (int)(o % SDN_PACK_COLS);
    const uint8_t *G = (const uint8_t *)P + (size_t)(o / SDN_PACK_COLS) * gbytes;
    const uint8_t *lv = G, *sc = G + (size_t)nb * nv * 64, *mn = sc + (size_t)nb * 32;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = (uint8_t *)dst + (size_t)b * bb;
        for (int t = 0; t < nv; t++) memcpy(blk + lo + 4 * t, lv + ((size_t)b * nv + t) * 64 + 4 * c, 4);
        memcpy(blk, sc + (size_t)b * 32 + 2 * c, 2);
        if (wtype == SDN_TYPE_Q4_1) memcpy(blk + 2, mn + (size_t)b * 32 + 2 * c, 2);
    }
}

/* The portable kernel on packed weights: port_q32's arithmetic (matmul_portable.c) with the
 * levels and scales read from the packed groups, so the same bits: per row and column, blocks
 * in order, acc += (float)isum * (d * xd), accm += m * xs, y = acc + accm. */
void sdn_matmul_rows_packed_portable(uint32_t wtype, const void *P, int64_t in, const void *act, int n, float *Y,
                                     int64_t ldy, int64_t o0, int64_t o1) {
    const int nv = pack_nv(wtype);
    const size_t stride = sdn_act_row_stride(wtype, in);
    if (!nv || !stride || n <= 0 || o1 <= o0) return;
    const int64_t nb = in / 32;
    const size_t gbytes = (size_t)nb * SDN_PACK_COLS * blk_bytes(wtype);
    const int affine = wtype == SDN_TYPE_Q4_1, off = wtype == SDN_TYPE_Q4_0 ? 8 : 0;
    for (int64_t o = o0; o < o1; o++) {
        const int c = (int)(o % SDN_PACK_COLS);
        const uint8_t *G = (const uint8_t *)P + (size_t)(o / SDN_PACK_COLS) * gbytes;
        const uint8_t *lvp = G, *sc = G + (size_t)nb * nv * 64, *mn = sc + (size_t)nb * 32;
        for (int r = 0; r < n; r++) {
            const char *row = (const char *)act + (size_t)r * stride;
            const int8_t *xq = sdn_act_q(row);
            const float *xd = sdn_act_d(row, in), *xs = sdn_act_s(row, in);
            float acc = 0, accm = 0;
            for (int64_t b = 0; b < nb; b++) {
                int8_t lv[32];
                for (int t = 0; t < nv; t++) {
                    const uint8_t *q = lvp + ((size_t)b * nv + t) * 64 + 4 * c;
                    for (int k = 0; k < 4; k++) {
                        if (nv == 8) lv[4 * t + k] = (int8_t)q[k];
                        else {
                            lv[4 * t + k] = (int8_t)((q[k] & 15) - off);
                            lv[16 + 4 * t + k] = (int8_t)((q[k] >> 4) - off);
                        }
                    }
                }
                int isum = 0;
                for (int i = 0; i < 32; i++) isum += lv[i] * xq[32 * b + i];
                uint16_t dh, mh;
                memcpy(&dh, sc + (size_t)b * 32 + 2 * c, 2);
                acc += (float)isum * (sdn_fp16_to_fp32(dh) * xd[b]);
                if (affine) {
                    memcpy(&mh, mn + (size_t)b * 32 + 2 * c, 2);
                    accm += sdn_fp16_to_fp32(mh) * xs[b];
                }
            }
            Y[(size_t)r * ldy + o] = acc + accm;
        }
    }
}
