/* matmul_ref.h - the portable C kernels of kernels/matmul.h, always compiled, for tests and
 * for machines without AVX2/FMA/F16C (where sdn_act_prepare / sdn_matmul_rows call them).
 *
 * Same contracts as sdn_act_prepare and sdn_matmul_rows (batch invariance included), same
 * prepared-activation layout: sdn_act_prepare_portable writes exactly the bytes the SIMD
 * preparation writes, so either preparation can feed either kernel. Results of the portable
 * and the SIMD kernels are bit-identical for the quantized types (the column kernels: one
 * fixed float order on every path) and agree to float rounding for the float types F32,
 * F16, BF16 (different summation order). */
#ifndef SDN_MATMUL_REF_H
#define SDN_MATMUL_REF_H

#include <stddef.h>
#include <stdint.h>

void sdn_act_prepare_portable(uint32_t wtype, const float *X, int64_t ldx, int n, int64_t in, void *act);
void sdn_matmul_rows_portable(uint32_t wtype, const void *W, size_t row_bytes, int64_t in, const void *act, int n,
                              float *Y, int64_t ldy, int64_t o0, int64_t o1);
/* sdn_matmul_rows_packed's portable kernel (matmul_pack.c). */
void sdn_matmul_rows_packed_portable(uint32_t wtype, const void *P, int64_t in, const void *act, int n, float *Y,
                                     int64_t ldy, int64_t o0, int64_t o1);

#endif
