/* matmul.h - batch-invariant small-batch matrix multiply on the file's weight layout.
 *
 *   Y[r][o] = sum_i W[o][i] * X[r][i]     for rows r < n, output columns o in [o0, o1)
 *
 * W is a weight matrix stored as `out` rows of `in` elements in type `wtype` (row o starts
 * at W + o * row_bytes). Activations are first prepared once per call (sdn_act_prepare:
 * kept as F32 for float weight types, quantized per row to the integer activation format a
 * quantized weight type pairs with). The contract every kernel keeps:
 *
 *   BATCH INVARIANCE: Y[r][o] is a function of W row o and X row r only. It is bit-identical
 *   whatever n is, whatever other rows are in the batch (padding included), and however
 *   [0, out) is split into [o0, o1) ranges across threads.
 *
 * This is what makes speculative (batched) verification produce exactly the bits of plain
 * one-token decoding. Callers split the output range across threads themselves. */
#ifndef SDN_MATMUL_H
#define SDN_MATMUL_H

#include <stddef.h>
#include <stdint.h>

/* Bytes needed to hold `n` prepared activation rows of `in` elements for weight type wtype. */
size_t sdn_act_bytes(uint32_t wtype, int64_t in, int n);
/* Prepare n rows of X (row stride ldx floats) for weight type wtype into `act`. Each row is
 * prepared independently (so preparation is batch-invariant too). */
void sdn_act_prepare(uint32_t wtype, const float *X, int64_t ldx, int n, int64_t in, void *act);
/* Y[r*ldy + o] for r < n, o0 <= o < o1 (see the contract above). */
void sdn_matmul_rows(uint32_t wtype, const void *W, size_t row_bytes, int64_t in, const void *act, int n, float *Y,
                     int64_t ldy, int64_t o0, int64_t o1);
/* ---- Packed weights ----
 * Quantized matrices (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K; the 5-bit types not on
 * AArch64, whose kernels leave them to the portable code: matmul_pack.c) can be rearranged once, at load time, into the layout the
 * column kernels read (kernels/matmul_pack.c: groups of SDN_PACK_COLS output columns, each
 * block's level bytes transposed into vector operands, the scales beside them). The bytes
 * are the file's, rearranged (Q5_0/Q5_1's qh bits too), so the results are the same bits as
 * on the file's layout; the
 * kernels skip the per-call gather and transposition, which at one activation row cost more
 * than the dot products (docs/kernels.md, "Packed weights"). One layout serves every path. */
#define SDN_PACK_COLS 16
/* 1 if wtype has a packed layout. */
int sdn_matmul_packable(uint32_t wtype);
/* Bytes of the packed form of an out x in matrix (out rounded up to SDN_PACK_COLS), 0 if
 * wtype has no packed layout or `in` is not a multiple of 32. */
size_t sdn_matmul_packed_bytes(uint32_t wtype, int64_t in, int64_t out);
/* Pack the file-layout matrix W (out rows of row_bytes) into P (sdn_matmul_packed_bytes). */
void sdn_matmul_pack(uint32_t wtype, const void *W, size_t row_bytes, int64_t in, int64_t out, void *P);
/* Block b of row o of packed matrix P back in the file's layout (one block's bytes into dst). */
void sdn_matmul_packed_block(uint32_t wtype, const void *P, int64_t in, int64_t o, int64_t b, void *dst);
/* Row o of packed matrix P back in the file's layout (row_bytes bytes into dst). */
void sdn_matmul_packed_row(uint32_t wtype, const void *P, int64_t in, int64_t o, void *dst);
/* sdn_matmul_rows on a packed matrix P: same contract, same bits. */
void sdn_matmul_rows_packed(uint32_t wtype, const void *P, int64_t in, const void *act, int n, float *Y, int64_t ldy,
                            int64_t o0, int64_t o1);

/* Description of the kernel path in use, e.g. "avx512 (avx512f+bw+vl+vnni)" (kernel_path.h). */
const char *sdn_matmul_isa(void);

#endif
