/* tensor_types.h - the tensor element types sdnpu reads and writes, with their GGUF type ids
 * and block geometry. Ids and block sizes are the GGUF/ggml ones (ggml.h `enum ggml_type`,
 * described in the GGUF specification, github.com/ggml-org/ggml docs/gguf.md):
 *   F32=0 F16=1 Q4_0=2 Q4_1=3 Q5_0=6 Q5_1=7 Q8_0=8 Q8_1=9 Q4_K=12 Q5_K=13 Q6_K=14 Q8_K=15 BF16=30.
 * Q8_1 and Q8_K are activation formats of the kernels, not weight types of model files. */
#ifndef SDN_TENSOR_TYPES_H
#define SDN_TENSOR_TYPES_H

#include <stddef.h>
#include <stdint.h>

typedef enum sdn_type {
    SDN_TYPE_F32 = 0,
    SDN_TYPE_F16 = 1,
    SDN_TYPE_Q4_0 = 2,
    SDN_TYPE_Q4_1 = 3,
    SDN_TYPE_Q5_0 = 6,
    SDN_TYPE_Q5_1 = 7,
    SDN_TYPE_Q8_0 = 8,
    SDN_TYPE_Q8_1 = 9,
    SDN_TYPE_Q4_K = 12,
    SDN_TYPE_Q5_K = 13,
    SDN_TYPE_Q6_K = 14,
    SDN_TYPE_Q8_K = 15,
    SDN_TYPE_BF16 = 30,
} sdn_type;

#define SDN_QK 32   /* elements per block of the 32-element formats */
#define SDN_QK_K 256 /* elements per super-block of the K formats */

/* Elements per block (1 for F32/F16/BF16), or 0 for an id sdnpu does not support. */
int sdn_type_block_elems(uint32_t type);
/* Bytes per block, or 0 for an unsupported id. */
size_t sdn_type_block_bytes(uint32_t type);
/* Name as used by GGUF tools ("Q4_K", "F16"), or NULL for an unsupported id. */
const char *sdn_type_name(uint32_t type);
/* Parse a name (case-insensitive); returns -1 if unknown. */
int sdn_type_from_name(const char *name);
/* True for types a model file may use for weights (excludes the activation formats). */
int sdn_type_is_weight_type(uint32_t type);
/* Bytes of a row of `n` elements; 0 if `n` is not a multiple of the block size or the
 * type is unsupported. */
size_t sdn_type_row_bytes(uint32_t type, int64_t n);

#endif
