/* quant.h - tensor block formats: dequantization (any weight type -> F32) and reference
 * quantization (F32 -> any weight type, used by the GGUF writer and tests). Block layouts
 * are exactly GGUF's (ggml-common.h block_q4_0 ... block_q6_K); see tensor_types.h for
 * the type ids and block sizes. */
#ifndef SDN_QUANT_H
#define SDN_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "modelfile/tensor_types.h"

/* Dequantize `n` elements (a multiple of the type's block size) of type `type` at `src`
 * into `dst`. Defined for every weight type and for Q8_0. */
void sdn_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n);

/* The plain scalar decoder that sdn_dequantize_row's SIMD paths reproduce bit for bit (the
 * same float operations per element); for tests. Same contract as sdn_dequantize_row. */
void sdn_dequantize_row_ref(uint32_t type, const void *src, float *dst, int64_t n);

/* Quantize `n` floats (a multiple of the block size) into `dst` in type `type`'s layout
 * with a deterministic round-to-nearest quantizer. Returns the bytes written (0 for an
 * unsupported type). */
size_t sdn_quantize_row(uint32_t type, const float *src, void *dst, int64_t n);

#endif
