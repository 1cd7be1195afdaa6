/* matmul_internal.h - the prepared-activation layouts shared by the portable and the SIMD
 * kernels (engine/matmul*.c). Internal to engine/.
 *
 * sdn_act_prepare writes n rows, each `sdn_act_row_stride` bytes (a multiple of 64). Within a
 * row, by activation family:
 *
 *   SDN_ACT_F32 (F32, F16, BF16 weights): float x[in].
 *   SDN_ACT_Q32 (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1): blocks of 32, nb = in/32:
 *       int8 q[in] | float d[nb] | float s[nb] | int32 qsum[nb]
 *     q = round-to-nearest-even(x * 127/amax) of the block, d = amax/127, s = d * sum(q)
 *     (the Q8_1 idea: s makes the min term m * sum(x) of Q4_1/Q5_1 exact in the integer part),
 *     qsum = sum(q) (the offset correction of unsigned weight levels, matmul_cols_avx2.c).
 *   SDN_ACT_QK (Q4_K, Q5_K, Q6_K): super-blocks of 256, nb = in/256:
 *       int8 q[in] | float d[nb] | int16 bsum[in/16]
 *     q, d as above over the 256-element super-block; bsum = sum of each 16 consecutive q
 *     (the Q8_K idea: mins and offsets become integer products with bsum).
 *
 * Quantization per block: amax = max |x| (NaN ignored), d = amax / 127, id = 127 / amax (0 if
 * amax == 0), q = clamp(rint(x * id), -127, 127) with NaN -> -127. The SIMD preparation computes
 * exactly these float operations, so portable and SIMD activations are byte-identical. */
#ifndef SDN_MATMUL_INTERNAL_H
#define SDN_MATMUL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "modelfile/tensor_types.h"

enum { SDN_ACT_NONE = 0, SDN_ACT_F32, SDN_ACT_Q32, SDN_ACT_QK };

static inline int sdn_act_family(uint32_t wtype) {
    switch (wtype) {
    case SDN_TYPE_F32:
    case SDN_TYPE_F16:
    case SDN_TYPE_BF16: return SDN_ACT_F32;
    case SDN_TYPE_Q8_0:
    case SDN_TYPE_Q4_0:
    case SDN_TYPE_Q4_1:
    case SDN_TYPE_Q5_0:
    case SDN_TYPE_Q5_1: return SDN_ACT_Q32;
    case SDN_TYPE_Q4_K:
    case SDN_TYPE_Q5_K:
    case SDN_TYPE_Q6_K: return SDN_ACT_QK;
    default: return SDN_ACT_NONE;
    }
}

/* Bytes of one prepared row, 0 if wtype is not a weight type or `in` is not a positive
 * multiple of its block size. */
static inline size_t sdn_act_row_stride(uint32_t wtype, int64_t in) {
    size_t raw;
    if (in <= 0) return 0;
    switch (sdn_act_family(wtype)) {
    case SDN_ACT_F32: raw = (size_t)in * 4; break;
    case SDN_ACT_Q32:
        if (in % 32) return 0;
        raw = (size_t)in + (size_t)(in / 32) * 12;
        break;
    case SDN_ACT_QK:
        if (in % 256) return 0;
        raw = (size_t)in + (size_t)(in / 256) * 4 + (size_t)(in / 16) * 2;
        break;
    default: return 0;
    }
    return (raw + 63) & ~(size_t)63;
}

/* Field offsets inside a prepared quantized row. */
static inline const int8_t *sdn_act_q(const void *row) { return (const int8_t *)row; }
static inline const float *sdn_act_d(const void *row, int64_t in) { return (const float *)((const char *)row + in); }
/* Q32 only: s[nb] after d[nb]. */
static inline const float *sdn_act_s(const void *row, int64_t in) {
    return (const float *)((const char *)row + in + (in / 32) * 4);
}
/* Q32 only: qsum[nb] after s[nb]. */
static inline const int32_t *sdn_act_qsum(const void *row, int64_t in) {
    return (const int32_t *)((const char *)row + in + (in / 32) * 8);
}
/* QK only: bsum[in/16] after d[in/256]. */
static inline const int16_t *sdn_act_bsum(const void *row, int64_t in) {
    return (const int16_t *)((const char *)row + in + (in / 256) * 4);
}

/* SIMD kernels (engine/matmul_*_avx2.c, kernels/quant_avx2.c). Their sources are compiled once
 * per SIMD variant with that variant's target flags (CMakeLists.txt: avx2, avx2vnni, avx512)
 * and SDN_KVARIANT set to the variant's name, which SDN_KFN appends to the exported names:
 * SDN_KFN(sdn_matmul_q32) is sdn_matmul_q32_avx512 in the avx512 objects. kernels/matmul.c
 * picks a variant at run time (kernels/kernel_path.h). Same contracts as sdn_act_prepare /
 * sdn_matmul_rows for their families; sdn_dequantize_row_<v> returns 0 for types it leaves
 * to the scalar code. */
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define SDN_MATMUL_AVX2 1
#endif
#define SDN_KCAT2(a, b) a##_##b
#define SDN_KCAT(a, b) SDN_KCAT2(a, b)
#ifdef SDN_KVARIANT
#define SDN_KFN(name) SDN_KCAT(name, SDN_KVARIANT)
#endif
#define SDN_KDECL(v)                                                                                                   \
    void sdn_act_prepare_##v(uint32_t wtype, const float *X, int64_t ldx, int n, int64_t in, void *act);              \
    void sdn_matmul_float_##v(uint32_t wtype, const void *W, size_t row_bytes, int64_t in, const void *act, int n,   \
                              float *Y, int64_t ldy, int64_t o0, int64_t o1);                                         \
    void sdn_matmul_q32_##v(uint32_t wtype, const void *W, size_t row_bytes, int64_t in, const void *act, int n,     \
                            float *Y, int64_t ldy, int64_t o0, int64_t o1);                                           \
    void sdn_matmul_k_##v(uint32_t wtype, const void *W, size_t row_bytes, int64_t in, const void *act, int n,       \
                          float *Y, int64_t ldy, int64_t o0, int64_t o1);                                             \
    int sdn_matmul_cols_##v(uint32_t wtype, const void *W, size_t row_bytes, int64_t in, const void *act, int n,     \
                            float *Y, int64_t ldy, int64_t o0, int64_t o1, int amx);                                  \
    int sdn_matmul_cols_packed_##v(uint32_t wtype, const void *P, int64_t in, const void *act, int n, float *Y,      \
                                   int64_t ldy, int64_t o0, int64_t o1, int amx);                                     \
    int sdn_matmul_kcols_packed_##v(uint32_t wtype, const void *P, int64_t in, const void *act, int n, float *Y,     \
                                    int64_t ldy, int64_t o0, int64_t o1, int amx);                                    \
    int sdn_matmul_kcols_##v(uint32_t wtype, const void *W, size_t row_bytes, int64_t in, const void *act, int n,    \
                             float *Y, int64_t ldy, int64_t o0, int64_t o1);                                          \
    int sdn_dequantize_row_##v(uint32_t type, const void *src, float *dst, int64_t n);                                \
    void sdn_f16_table_fill_##v(void);
SDN_KDECL(avx2)
SDN_KDECL(avx2vnni)
SDN_KDECL(avx512)
/* The AArch64 kernels (kernels/matmul_arm.c, compiled per path: neon, dotprod, i8mm): the
 * activation preparation and the batched quantized types on the file's layout and on the
 * packed one (o0 a multiple of SDN_PACK_COLS); the matmuls return 0 for the types they leave
 * to the portable kernel. */
#define SDN_KDECL_ARM(v)                                                                                               \
    void sdn_act_prepare_##v(uint32_t wtype, const float *X, int64_t ldx, int n, int64_t in, void *act);              \
    int sdn_matmul_arm_##v(uint32_t wtype, const void *W, size_t row_bytes, int64_t in, const void *act, int n,      \
                           float *Y, int64_t ldy, int64_t o0, int64_t o1);                                            \
    int sdn_matmul_arm_packed_##v(uint32_t wtype, const void *P, int64_t in, const void *act, int n, float *Y,       \
                                  int64_t ldy, int64_t o0, int64_t o1);
SDN_KDECL_ARM(neon)
SDN_KDECL_ARM(dotprod)
SDN_KDECL_ARM(i8mm)

/* fp16 -> fp32 of all 65536 codes, read by the SIMD kernels (defined in matmul.c, filled with
 * the exact F16C conversion by sdn_kernels_setup). */
extern float sdn_f16_table[65536];
/* One-time setup the SIMD kernels need (the table above); idempotent, thread-safe. */
void sdn_kernels_setup(void);
/* The 64-byte AMX tile configuration of the column kernels' AMX loop (kernel_path.c), for
 * m = 1..16 activation rows: palette 1; two tile sets, one per block parity: tmm0/tmm1 = C
 * (m rows x 64 bytes: 16 int32 columns), tmm2/tmm3 = A (m rows x 32 bytes: one 32-element
 * block of int8 activations), tmm4/tmm5 = B (8 rows x 64 bytes: 16 columns x 4 weight
 * bytes); everything else zero (Intel SDM, LDTILECFG). */
void sdn_amx_tile_config(uint8_t cfg[64], int m);
/* 1 if the CPU has AVX-VNNI (kernel_path.c). */
int sdn_kpath_avxvnni(void);
/* 1 if the CPU has AVX512_BF16 (and the OS saves the ZMM state; kernel_path.c): the avx512
 * path's attention then multiplies bf16 keys with VDPBF16PS (attention/attention.c). */
int sdn_kpath_avx512bf16(void);
/* 1 if the CPU has AMX-BF16 besides AVX512_BF16 and the amx path is supported (tile data
 * granted): the amx path's attention then takes bf16 keys' scores on AMX tiles
 * (attention/attention_amx.c). */
int sdn_kpath_amxbf16(void);
/* The rows of attention_amx.c's tile configuration when it is the one loaded in this thread,
 * else 0: the column kernels set it to 0 when they load theirs (they release the tiles after
 * use), so that attention loads its own again before its next tile instruction. */
extern __thread int sdn_amx_att_rows;

#endif
