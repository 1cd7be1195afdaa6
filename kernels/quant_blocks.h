/* quant_blocks.h - byte layouts of the GGUF quantized blocks, shared by quant.c (reference
 * (de)quantization) and the matmul kernels. Internal to engine/.
 *
 * The layouts are the ones GGUF files store, as defined by the block structs of ggml's
 * ggml-common.h (block_q4_0, block_q4_1, block_q5_0, block_q5_1, block_q8_0, block_q4_K,
 * block_q5_K, block_q6_K; github.com/ggml-org/ggml, src/ggml-common.h) and decoded by
 * dequantize_row_* in ggml-quants.c. fp16 fields are IEEE binary16, little-endian. Every
 * struct has 2-byte alignment and no padding, so sizeof() is the GGUF block size; blocks in
 * a tensor row are packed back to back. Summary (x = element value, q = stored integer):
 *
 *   Q4_0  (18 B / 32)  d; qs[16]: element j<16 = low nibble of qs[j], j>=16 = high nibble
 *                      of qs[j-16]; x = d * (q - 8)
 *   Q4_1  (20 B / 32)  d, m; qs[16] as Q4_0; x = d * q + m
 *   Q5_0  (22 B / 32)  d; qh[4] (little-endian u32, bit j = 5th bit of element j); qs[16]
 *                      low 4 bits as Q4_0; x = d * (q - 16)
 *   Q5_1  (24 B / 32)  d, m; qh[4]; qs[16]; x = d * q + m
 *   Q8_0  (34 B / 32)  d; int8 qs[32]; x = d * q
 *   Q4_K  (144 B / 256) d, dmin; scales[12] = 8 (scale, min) pairs of 6 bits (see
 *                      quant.c k4_scale_min); qs[128]: for chunk c<4, qs[32c+l] holds element
 *                      64c+l (low nibble, sub-block 2c) and 64c+32+l (high nibble, sub-block
 *                      2c+1); x = d*sc[s]*q - dmin*m[s] for the element's 32-sub-block s
 *   Q5_K  (176 B / 256) d, dmin; scales[12] as Q4_K; qh[32]: bit 2c of qh[l] = 5th bit of
 *                      element 64c+l, bit 2c+1 = of element 64c+32+l; qs[128] as Q4_K
 *   Q6_K  (210 B / 256) ql[128], qh[64], int8 scales[16], d. Half h<2, l<32: element
 *                      128h+l    = ql[64h+l] & 15    | (qh[32h+l] >> 0 & 3) << 4
 *                      128h+32+l = ql[64h+32+l] & 15 | (qh[32h+l] >> 2 & 3) << 4
 *                      128h+64+l = ql[64h+l] >> 4    | (qh[32h+l] >> 4 & 3) << 4
 *                      128h+96+l = ql[64h+32+l] >> 4 | (qh[32h+l] >> 6 & 3) << 4
 *                      x = d * scales[e/16] * (q - 32)
 */
#ifndef SDN_QUANT_BLOCKS_H
#define SDN_QUANT_BLOCKS_H

#include <stdint.h>

typedef struct { uint16_t d; uint8_t qs[16]; } sdn_blk_q4_0;
typedef struct { uint16_t d, m; uint8_t qs[16]; } sdn_blk_q4_1;
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } sdn_blk_q5_0;
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; } sdn_blk_q5_1;
typedef struct { uint16_t d; int8_t qs[32]; } sdn_blk_q8_0;
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; } sdn_blk_q4_K;
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } sdn_blk_q5_K;
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; } sdn_blk_q6_K;

_Static_assert(sizeof(sdn_blk_q4_0) == 18, "Q4_0 block is 18 bytes");
_Static_assert(sizeof(sdn_blk_q4_1) == 20, "Q4_1 block is 20 bytes");
_Static_assert(sizeof(sdn_blk_q5_0) == 22, "Q5_0 block is 22 bytes");
_Static_assert(sizeof(sdn_blk_q5_1) == 24, "Q5_1 block is 24 bytes");
_Static_assert(sizeof(sdn_blk_q8_0) == 34, "Q8_0 block is 34 bytes");
_Static_assert(sizeof(sdn_blk_q4_K) == 144, "Q4_K block is 144 bytes");
_Static_assert(sizeof(sdn_blk_q5_K) == 176, "Q5_K block is 176 bytes");
_Static_assert(sizeof(sdn_blk_q6_K) == 210, "Q6_K block is 210 bytes");

/* Decode the 12-byte scale/min array of Q4_K/Q5_K into sc[8] and m[8] (6-bit values).
 * Sub-blocks 0..3: scale = low 6 bits of byte j, min = low 6 bits of byte j+4.
 * Sub-blocks 4..7: low 4 bits from byte j+4 (scale: low nibble, min: high nibble), high 2 bits
 * from the top 2 bits of byte j-4 (scale) and byte j (min). */
static inline void sdn_k4_scale_min(const uint8_t s[12], uint8_t sc[8], uint8_t m[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        m[j] = s[j + 4] & 63;
        sc[j + 4] = (uint8_t)((s[j + 8] & 15) | ((s[j] >> 6) << 4));
        m[j + 4] = (uint8_t)((s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4));
    }
}

#endif
