/* kv_cache.h - the KV cache of an inference context: its element types, its memory layout,
 * and the one place where K and V rows are written (converted or quantized), moved and read.
 *
 * Types (chosen per context, separately for keys and values):
 *   f32  4 bytes per element: the exact values the forward pass computed (the reference)
 *   f16  2 bytes (IEEE binary16, round to nearest even, saturated at +-65504 so the cache
 *        never holds an infinity): the default; attention converts back to F32 (exact)
 *   bf16 2 bytes (the upper half of the F32 bits, round to nearest even; magnitudes below
 *        2^-30 stored as zero so that no product of the kernels is subnormal; values also
 *        finite: infinities saturated, a NaN stored as 0): keys and values are multiplied in
 *        BF16 (attention_kern.h; VDPBF16PS where the CPU has AVX512_BF16)
 *   q8   1 byte per element plus F16 scales: keys one per block of 32 elements of a head
 *        row (SDN_KV_KBLOCK; as llama.cpp's q8_0), values one per head row: 8.375 bits per
 *        element for a 64-element head. A block (row) is quantized symmetrically: d =
 *        max|x| / 127 rounded to F16, x8 = round-to-nearest-even(x / d) clamped to
 *        [-127, 127]. Keys are stored as unsigned bytes x8 + 128 (the int8 dot-product
 *        instructions multiply unsigned by signed bytes; attention/attention.c undoes the offset
 *        exactly); values as signed bytes. Quantization is scalar C shared by every kernel
 *        path, so every path stores the same bytes.
 *
 * Layout, per layer and KV head, in tiles of SDN_KV_TILE = 64 positions (slot s is lane
 * s % 64 of tile s / 64):
 *   keys    transposed in each tile, so one SIMD vector holds one element of 16 (or 8)
 *           consecutive positions: f32/f16 [d][64]; q8 [d/4][64][4] (4 consecutive elements
 *           of one position per 32-bit lane, the operand shape of VPDPBUSD), the head
 *           dimension padded to a multiple of 32 with zeros; q8 scales [tile][block][64]
 *   values  one row per slot: [slot][head_dim] elements; q8 scales [slot]
 * Memory is zero-filled at creation (anonymous pages, resident once written), so lanes never
 * written hold finite values.
 *
 * The attention kernels (attention/attention.h) read this layout through the accessors below;
 * nothing else touches the bytes. */
#ifndef SDN_KV_CACHE_H
#define SDN_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/sdn_err.h"
#include "modelfile/model.h"

#define SDN_KV_TILE 64
#define SDN_KV_KBLOCK 32 /* q8 keys: elements per scale */

/* SDN_KV_AUTO (0, what zero-initialized parameters ask for) is the process default below. */
typedef enum sdn_kv_type { SDN_KV_AUTO = 0, SDN_KV_F16 = 1, SDN_KV_F32 = 2, SDN_KV_Q8 = 3, SDN_KV_BF16 = 4, SDN_KV_TYPE_COUNT = 5 } sdn_kv_type;
#define SDN_KV_FIRST SDN_KV_F16 /* the real types are SDN_KV_FIRST .. SDN_KV_TYPE_COUNT - 1 */
#define SDN_KV_DEFAULT SDN_KV_F16 /* the built-in default of keys and values */

/* The process default SDN_KV_AUTO stands for: f16, unless sdn_kv_set_default says otherwise
 * (k or v SDN_KV_AUTO: that one unchanged). The CLI sets it from --cache-type-k /
 * --cache-type-v, else the environment variables SDN_CACHE_TYPE_K / _V, which the program and
 * the tests read (the library reads none). Not exported: an app names its cache types in
 * sdnpu_context_params. */
void sdn_kv_set_default(sdn_kv_type k, sdn_kv_type v);
/* t, or the process default for keys (is_key) or values when t is SDN_KV_AUTO. */
sdn_kv_type sdn_kv_resolve(sdn_kv_type t, int is_key);

/* "f16", "f32", "q8", "bf16" ("auto" for SDN_KV_AUTO). */
const char *sdn_kv_type_name(sdn_kv_type t);
/* Parse a type name (also "q8_0", llama.cpp's name of its 8-bit cache); SDN_EINVAL naming
 * `what` (e.g. "--cache-type-k") and listing the names when unknown. */
int sdn_kv_type_parse(const char *s, const char *what, sdn_kv_type *out, sdn_err *err);
/* Bytes one position takes in one layer's keys (or values) of type t: n_kv_heads rows. */
size_t sdn_kv_row_bytes(sdn_kv_type t, int n_kv_heads, int head_dim);
/* Bytes of a whole cache of n_ctx positions (all layers, keys of type tk, values of tv). */
size_t sdn_kv_cache_bytes(const sdn_model_config *cfg, sdn_kv_type tk, sdn_kv_type tv, int n_ctx);

typedef struct sdn_kv sdn_kv;

/* A zero-filled cache of n_ctx positions (rounded up to whole tiles). SDN_ENOMEM when the
 * memory cannot be had. */
int sdn_kv_new(const sdn_model_config *cfg, sdn_kv_type tk, sdn_kv_type tv, int n_ctx, sdn_kv **out, sdn_err *err);
void sdn_kv_free(sdn_kv *kv);
sdn_kv_type sdn_kv_type_k(const sdn_kv *kv);
sdn_kv_type sdn_kv_type_v(const sdn_kv *kv);

/* Store n rows (row i: kvd = n_kv_heads * head_dim floats of K and of V at k + i*kvd, v + i*kvd)
 * into slots slot0 .. slot0+n-1 of layer l. */
void sdn_kv_store(sdn_kv *kv, int l, int slot0, int n, const float *k, const float *v);
/* Copy slot src to slot dst in every layer (src != dst). */
void sdn_kv_move(sdn_kv *kv, int dst, int src);

/* Whole tiles (SDN_KV_TILE positions of every layer and head) as a flat byte image, for the
 * prefix cache: the bytes of one tile, its image written to buf, and an image read back into
 * tile t (the caller guarantees the image came from a cache of the same model, types and
 * layout: equal sdn_kv_tile_bytes is necessary, not sufficient). An imported tile holds
 * exactly the bytes the exporting cache held, so attention over it gives the same bits. */
size_t sdn_kv_tile_bytes(const sdn_kv *kv);
void sdn_kv_tile_export(const sdn_kv *kv, int t, uint8_t *buf);
void sdn_kv_tile_import(sdn_kv *kv, int t, const uint8_t *buf);
int sdn_kv_n_tiles(const sdn_kv *kv);

/* Read access for the attention kernels, layer l, KV head h. */
typedef struct sdn_kv_head {
    sdn_kv_type tk, tv;
    int hd, hd4;              /* head dim, and rounded up to a multiple of SDN_KV_KBLOCK (q8 keys) */
    int kblocks;              /* q8 keys: scale blocks per head row (hd4 / SDN_KV_KBLOCK) */
    int n_tiles;              /* tiles of the cache (positions / SDN_KV_TILE) */
    const uint8_t *k;         /* tile t at k + t * k_tile_bytes */
    size_t k_tile_bytes;
    const uint16_t *k_scale;  /* q8: [tile][block][64] F16 scales, else NULL */
    const uint8_t *v;         /* slot s at v + s * v_row_bytes */
    size_t v_row_bytes;
    const uint16_t *v_scale;  /* q8: [slot] F16 scales, else NULL */
} sdn_kv_head;
void sdn_kv_head_get(const sdn_kv *kv, int l, int h, sdn_kv_head *out);

/* F16 bits -> float, exact for every finite half (its bits shifted into a float and rescaled
 * by 2^112, which is exact for normal and subnormal halves alike); inline for the hot loops. */
static inline float sdn_kv_h2f(uint16_t h) {
    uint32_t em = (uint32_t)(h & 0x7fff) << 13, s = (uint32_t)(h & 0x8000) << 16;
    float f;
    if (em >= (0x7c00u << 13)) {
        em |= 0x7f800000u;
        memcpy(&f, &em, 4);
    } else {
        memcpy(&f, &em, 4);
        f *= 0x1p112f;
    }
    uint32_t b;
    memcpy(&b, &f, 4);
    b |= s;
    memcpy(&f, &b, 4);
    return f;
}
/* x rounded to the nearest integer, ties to even, for |x| < 2^22 (adding and subtracting
 * 1.5 * 2^23 rounds in the default rounding mode; what nearbyintf gives, without a call;
 * the build's IEEE semantics keep the compiler from folding the two). */
static inline float sdn_kv_round(float x) { return (x + 12582912.0f) - 12582912.0f; }

/* BF16 bits -> float (exact). */
static inline float sdn_kv_b2f(uint16_t b) {
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The scalar conversions every path shares (exposed for the tests). */
uint16_t sdn_kv_f16(float x);                          /* saturating F32 -> F16 (RNE) */
/* F32 -> BF16, round to nearest even; |x| < 2^-30 gives a zero of x's sign; an infinity stays
 * one, a NaN stays a (quiet) NaN. The score kernels' operands (kv_cache.h "bf16"). Inline and
 * without branches, so that loops over it vectorize (the queries of every attention call). */
static inline uint16_t sdn_kv_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    const uint32_t a = u & 0x7fffffffu;
    const uint32_t rne = (u + 0x7fffu + ((u >> 16) & 1)) >> 16; /* a carry into the exponent is
                                                                  the right rounding, up to infinity */
    const uint32_t nan = (u >> 16) | 0x40, tiny = (u >> 16) & 0x8000;
    return (uint16_t)(a > 0x7f800000u ? nan : a < 0x30800000u ? tiny : rne);
}
/* The bf16 values' conversion: sdn_kv_bf16, with every stored value finite: an infinity
 * saturates at +-0x7f7f (+-3.39e38) and a NaN is stored as +0, so that a lane of weight 0 adds
 * exactly nothing to the pair products (attention_kern.h), whatever an earlier request left in
 * it. */
static inline uint16_t sdn_kv_bf16v(float x) {
    const uint16_t b = sdn_kv_bf16(x), a = b & 0x7fff;
    return (uint16_t)(a > 0x7f80 ? 0 : a == 0x7f80 ? b - 1 : b);
}
float sdn_kv_q8_row(const float *x, int n, int8_t *q); /* quantize n values, returns the F16-rounded scale */

#endif
