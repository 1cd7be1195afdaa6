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
/* 1 when these kernels, on the path in use, beat OpenBLAS SGEMM on dequantized F32 weights
 * for prefill-sized batches of weight type wtype (hundreds of rows): the column-parallel
 * integer types (Q8_0, Q4_0, Q4_1, Q4_K, Q6_K) on a SIMD path. The measurements behind the
 * rule are in docs/kernels.md; forward.c applies it under the prefill-matmul setting
 * (kernel_path.h). */
int sdn_matmul_prefill_fast(uint32_t wtype);
/* Description of the kernel path in use, e.g. "avx512 (avx512f+bw+vl+vnni)" (kernel_path.h). */
const char *sdn_matmul_isa(void);

#endif
