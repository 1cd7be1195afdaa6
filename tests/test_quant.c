/* test_quant.c - tensor block formats (kernels/quant.h) against independent references.
 *
 *  - fp16/bf16 conversions: every one of the 65536 codes against a decoder written from the
 *    IEEE definition with ldexp (subnormals, infinities, NaN), known rounding cases, and the
 *    round trip code -> float -> code;
 *  - dequantization of every type on hand-built blocks: a few values worked out by hand from
 *    the layout, then random block bytes against a deliberately naive decoder in this file
 *    that reads the GGUF layout bit by bit (get_bits on byte offsets written from the
 *    ggml-common.h block definitions, not from kernels/quant.c), and the SIMD dequantizers
 *    bit-identical to the scalar ones (sdn_dequantize_row_ref) on every kernel path the
 *    machine has (tests fn[path]; paths it lacks reported SKIPPED);
 *  - quantize -> dequantize error bounds per type on N(0,1) data (RMS error relative to the
 *    RMS value, and a per-block max error), exact round trips for data already on a type's
 *    grid, determinism, and the row-size / unsupported-type contract. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/sdn_util.h"
#include "support/kpath_test.h"
#include "kernels/quant.h"
#include "modelfile/tensor_types.h"

/* ------------------------------------------------------------ independent decoders */

/* bits [bit, bit+n) of byte string p, least significant bit first (GGUF is little-endian) */
static unsigned get_bits(const uint8_t *p, unsigned bit, unsigned n) {
    unsigned v = 0;
    for (unsigned k = 0; k < n; k++) v |= (unsigned)((p[(bit + k) / 8] >> ((bit + k) % 8)) & 1) << k;
    return v;
}

/* IEEE binary16 by definition: (-1)^s * 2^(e-15) * 1.m, subnormal 2^-14 * 0.m */
static double half_ref(unsigned h) {
    int s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp(m, -24);
    else v = ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

static double bf16_ref(unsigned h) {
    int s = (h >> 15) & 1, e = (h >> 7) & 255, m = h & 127;
    double v;
    if (e == 255) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp(m, -133);
    else v = ldexp(128 + m, e - 134);
    return s ? -v : v;
}

static double half_at(const uint8_t *p, unsigned byte) { return half_ref(get_bits(p, 8 * byte, 16)); }

/* Naive reference of element e of one block (offsets from the ggml-common.h structs), in
 * double (exact). *mag receives the magnitude of the terms the float decoder adds, which
 * bounds its rounding error. */
static double ref_elem(uint32_t type, const uint8_t *b, int e, double *mag) {
    *mag = 0;
    switch (type) {
    case SDN_TYPE_Q4_0: { /* d @0, qs[16] @2: e<16 low nibble of qs[e], else high nibble of qs[e-16] */
        unsigned q = get_bits(b, 8 * (2 + e % 16) + 4 * (e / 16), 4);
        *mag = fabs(((int)q - 8) * half_at(b, 0));
        return ((int)q - 8) * half_at(b, 0);
    }
    case SDN_TYPE_Q4_1: { /* d @0, m @2, qs @4 */
        unsigned q = get_bits(b, 8 * (4 + e % 16) + 4 * (e / 16), 4);
        *mag = fabs(q * half_at(b, 0)) + fabs(half_at(b, 2));
        return q * half_at(b, 0) + half_at(b, 2);
    }
    case SDN_TYPE_Q5_0: { /* d @0, qh[4] @2 (bit e), qs @6 */
        unsigned q = get_bits(b, 8 * (6 + e % 16) + 4 * (e / 16), 4) | get_bits(b, 16 + e, 1) << 4;
        *mag = fabs(((int)q - 16) * half_at(b, 0));
        return ((int)q - 16) * half_at(b, 0);
    }
    case SDN_TYPE_Q5_1: { /* d @0, m @2, qh @4, qs @8 */
        unsigned q = get_bits(b, 8 * (8 + e % 16) + 4 * (e / 16), 4) | get_bits(b, 32 + e, 1) << 4;
        *mag = fabs(q * half_at(b, 0)) + fabs(half_at(b, 2));
        return q * half_at(b, 0) + half_at(b, 2);
    }
    case SDN_TYPE_Q8_0:
        *mag = fabs((int8_t)get_bits(b, 8 * (2 + e), 8) * half_at(b, 0));
        return (int8_t)get_bits(b, 8 * (2 + e), 8) * half_at(b, 0);
    case SDN_TYPE_Q4_K:
    case SDN_TYPE_Q5_K: { /* d @0, dmin @2, scales[12] @4, (Q5_K: qh[32] @16), qs[128] @16 / @48 */
        int s = e / 32, c = e / 64, l = e % 32, high = (e / 32) % 2;
        unsigned sc, m;
        if (s < 4) {
            sc = get_bits(b, 8 * (4 + s), 6);
            m = get_bits(b, 8 * (4 + s + 4), 6);
        } else {
            sc = get_bits(b, 8 * (4 + s + 4), 4) | get_bits(b, 8 * (4 + s - 4) + 6, 2) << 4;
            m = get_bits(b, 8 * (4 + s + 4) + 4, 4) | get_bits(b, 8 * (4 + s) + 6, 2) << 4;
        }
        unsigned qs_off = type == SDN_TYPE_Q5_K ? 48 : 16;
        unsigned q = get_bits(b, 8 * (qs_off + 32 * c + l) + 4 * high, 4);
        if (type == SDN_TYPE_Q5_K) q |= get_bits(b, 8 * (16 + l) + 2 * c + high, 1) << 4;
        *mag = fabs(half_at(b, 0) * sc * q) + fabs(half_at(b, 2) * m);
        return half_at(b, 0) * sc * q - half_at(b, 2) * m;
    }
    case SDN_TYPE_Q6_K: { /* ql[128] @0, qh[64] @128, int8 scales[16] @192, d @208 */
        int h = e / 128, g = (e % 128) / 32, l = e % 32;
        unsigned lo = get_bits(b, 8 * (64 * h + 32 * (g % 2) + l) + 4 * (g / 2), 4);
        unsigned hi = get_bits(b, 8 * (128 + 32 * h + l) + 2 * g, 2);
        int sc = (int8_t)get_bits(b, 8 * (192 + e / 16), 8);
        *mag = fabs(half_at(b, 208) * sc * ((int)(lo | hi << 4) - 32));
        return half_at(b, 208) * sc * ((int)(lo | hi << 4) - 32);
    }
    default: return NAN;
    }
}

static const uint32_t qtypes[] = {SDN_TYPE_Q4_0, SDN_TYPE_Q4_1, SDN_TYPE_Q5_0, SDN_TYPE_Q5_1,
                                  SDN_TYPE_Q8_0, SDN_TYPE_Q4_K, SDN_TYPE_Q5_K, SDN_TYPE_Q6_K};
#define NQ (sizeof qtypes / sizeof qtypes[0])

/* ------------------------------------------------------------ fp16 / bf16 */

static void test_fp16_all_codes(void **state) {
    kpath_use(state);
    uint16_t codes[65536];
    float dq[65536];
    for (unsigned h = 0; h < 65536; h++) codes[h] = (uint16_t)h;
    sdn_dequantize_row(SDN_TYPE_F16, codes, dq, 65536); /* the (vectorized) F16 row path */
    float dref[65536];
    sdn_dequantize_row_ref(SDN_TYPE_F16, codes, dref, 65536);
    for (unsigned h = 0; h < 65536; h++) {
        double ref = half_ref(h);
        float f = sdn_fp16_to_fp32((uint16_t)h);
        if (isnan(ref)) {
            assert_true(isnan(f));
            assert_true(isnan(dq[h]));
            continue;
        }
        assert_true((double)f == ref);
        assert_true((double)dq[h] == ref);
        assert_true(dref[h] == f);
        assert_int_equal(signbit(f) != 0, (h >> 15) & 1); /* -0 stays -0 */
        assert_int_equal(sdn_fp32_to_fp16(f), h);          /* exact round trip */
    }
}

static void test_fp16_rounding(void **state) {
    (void)state;
    assert_int_equal(sdn_fp32_to_fp16(1.0f), 0x3C00);
    assert_int_equal(sdn_fp32_to_fp16(-2.0f), 0xC000);
    assert_int_equal(sdn_fp32_to_fp16(65504.0f), 0x7BFF);
    assert_int_equal(sdn_fp32_to_fp16(65519.0f), 0x7BFF); /* below the halfway point to 65536 */
    assert_int_equal(sdn_fp32_to_fp16(65520.0f), 0x7C00); /* halfway, ties to even -> inf */
    assert_int_equal(sdn_fp32_to_fp16(1e10f), 0x7C00);
    assert_int_equal(sdn_fp32_to_fp16(-INFINITY), 0xFC00);
    assert_int_equal(sdn_fp32_to_fp16(1.0f + ldexpf(1, -11)), 0x3C00);     /* tie -> even */
    assert_int_equal(sdn_fp32_to_fp16(1.0f + 3 * ldexpf(1, -11)), 0x3C02); /* tie -> even (up) */
    assert_int_equal(sdn_fp32_to_fp16(ldexpf(1, -24)), 0x0001);             /* smallest subnormal */
    assert_int_equal(sdn_fp32_to_fp16(ldexpf(1, -25)), 0x0000);             /* tie -> even (zero) */
    assert_int_equal(sdn_fp32_to_fp16(ldexpf(3, -26)), 0x0001);             /* 0.75 ulp -> 1 */
    assert_int_equal(sdn_fp32_to_fp16(ldexpf(1023, -24)), 0x03FF);          /* largest subnormal */
    assert_int_equal(sdn_fp32_to_fp16(ldexpf(2047, -25)), 0x0400);          /* rounds up to normal */
    assert_int_equal(sdn_fp32_to_fp16(-0.0f), 0x8000);
    uint16_t n = sdn_fp32_to_fp16(NAN);
    assert_int_equal(n & 0x7C00, 0x7C00);
    assert_true((n & 0x3FF) != 0);
}

static void test_bf16(void **state) {
    (void)state;
    uint16_t codes[65536];
    float dq[65536];
    for (unsigned h = 0; h < 65536; h++) codes[h] = (uint16_t)h;
    sdn_dequantize_row(SDN_TYPE_BF16, codes, dq, 65536);
    for (unsigned h = 0; h < 65536; h++) {
        double ref = bf16_ref(h);
        if (isnan(ref)) {
            assert_true(isnan(sdn_bf16_to_fp32((uint16_t)h)));
            assert_true(isnan(dq[h]));
            assert_true(isnan(sdn_bf16_to_fp32(sdn_fp32_to_bf16(dq[h]))));
            continue;
        }
        assert_true((double)sdn_bf16_to_fp32((uint16_t)h) == ref);
        assert_true((double)dq[h] == ref);
        assert_int_equal(sdn_fp32_to_bf16(dq[h]), h);
    }
    assert_int_equal(sdn_fp32_to_bf16(1.0f + ldexpf(1, -8)), 0x3F80);     /* tie -> even */
    assert_int_equal(sdn_fp32_to_bf16(1.0f + 3 * ldexpf(1, -8)), 0x3F82); /* tie -> even (up) */
    assert_int_equal(sdn_fp32_to_bf16(1.0f + ldexpf(1, -8) + ldexpf(1, -20)), 0x3F81);
    assert_int_equal(sdn_fp32_to_bf16(ldexpf(1, -133)), 0x0001); /* subnormal */
    assert_int_equal(sdn_fp32_to_bf16(FLT_MAX), 0x7F80);         /* rounds to inf */
    assert_int_equal(sdn_fp32_to_bf16(-INFINITY), 0xFF80);
}

/* ------------------------------------------------------------ hand-worked blocks */

static void put_half(uint8_t *p, float v) {
    uint16_t h = sdn_fp32_to_fp16(v);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

static void test_hand_values(void **state) {
    (void)state;
    float y[256];
    { /* Q4_0: d = 0.5, qs[0] = 0xF1: element 0 = (1-8)*0.5, element 16 = (15-8)*0.5 */
        uint8_t b[18] = {0};
        put_half(b, 0.5f);
        memset(b + 2, 0x88, 16); /* every other element = level 8 -> 0 */
        b[2] = 0xF1;
        sdn_dequantize_row(SDN_TYPE_Q4_0, b, y, 32);
        assert_true(y[0] == -3.5f && y[16] == 3.5f && y[1] == 0 && y[31] == 0);
    }
    { /* Q4_1: d = 0.25, m = -1: qs[3] = 0x2A -> element 3 = 10*0.25-1, element 19 = 2*0.25-1 */
        uint8_t b[20] = {0};
        put_half(b, 0.25f);
        put_half(b + 2, -1.0f);
        b[4 + 3] = 0x2A;
        sdn_dequantize_row(SDN_TYPE_Q4_1, b, y, 32);
        assert_true(y[3] == 1.5f && y[19] == -0.5f && y[0] == -1.0f);
    }
    { /* Q5_0: d = 1, qh bit 0 and bit 17 set; qs[0] = 0x03, qs[1] = 0xF0
         element 0 = (16+3)-16 = 3, element 16 = 0-16, element 17 = (16+15)-16 = 15, element 1 = -16 */
        uint8_t b[22] = {0};
        put_half(b, 1.0f);
        b[2] = 0x01;      /* bit 0 */
        b[4] = 0x02;      /* bit 17 */
        b[6 + 0] = 0x03;
        b[6 + 1] = 0xF0;
        sdn_dequantize_row(SDN_TYPE_Q5_0, b, y, 32);
        assert_true(y[0] == 3 && y[16] == -16 && y[17] == 15 && y[1] == -16);
    }
    { /* Q5_1: d = 2, m = 0.5, qh bit 31 set, qs[15] = 0xF0: element 31 = 31*2+0.5 */
        uint8_t b[24] = {0};
        put_half(b, 2.0f);
        put_half(b + 2, 0.5f);
        b[7] = 0x80;
        b[8 + 15] = 0xF0;
        sdn_dequantize_row(SDN_TYPE_Q5_1, b, y, 32);
        assert_true(y[31] == 62.5f && y[15] == 0.5f);
    }
    { /* Q8_0: d = 0.125, qs = -128 .. */
        uint8_t b[34] = {0};
        put_half(b, 0.125f);
        b[2] = 0x80; /* -128 */
        b[3] = 0x7F; /* 127 */
        b[4] = 0xFF; /* -1 */
        sdn_dequantize_row(SDN_TYPE_Q8_0, b, y, 32);
        assert_true(y[0] == -16.0f && y[1] == 15.875f && y[2] == -0.125f && y[3] == 0);
    }
    { /* Q4_K: d = 1, dmin = 0.5. Sub-block 0: scale 3, min 2 (bytes 0 and 4, low 6 bits).
         Sub-block 5: scale = 0x2A (low nibble 0xA in byte 9, high bits 0b10 in byte 1 bits 6-7),
         min = 0x15 (high nibble 0x5 of byte 9, high bits 0b01 in byte 5 bits 6-7).
         qs[0] = 0x47: element 0 = 3*7 - 0.5*2 = 20 (low nibble, sub-block 0),
         element 32 = sub-block 1 (scale 0, min 0) -> 0.
         qs[64+1] = 0xC0: element 128+32+1 = 161 is sub-block 5, level 12: 42*12 - 0.5*21 */
        uint8_t b[144] = {0};
        put_half(b, 1.0f);
        put_half(b + 2, 0.5f);
        b[4 + 0] = 3;
        b[4 + 4] = 2;
        b[4 + 1] = 0x80;            /* sc[5] high bits = 2 */
        b[4 + 5] = 0x40;            /* m[5] high bits = 1 */
        b[4 + 9] = 0x5A;            /* sc[5] low = 0xA, m[5] low = 0x5 */
        b[16 + 0] = 0x47;
        b[16 + 64 + 1] = 0xC0;
        sdn_dequantize_row(SDN_TYPE_Q4_K, b, y, 256);
        assert_true(y[0] == 20.0f);
        assert_true(y[1] == -1.0f); /* level 0 of sub-block 0: -dmin*2 */
        assert_true(y[32] == 0.0f);
        assert_true(y[161] == 42.0f * 12 - 0.5f * 21);
        assert_true(y[160] == -0.5f * 21);
    }
    { /* Q5_K: Q4_K layout plus qh: bit 2 of qh[4] = 5th bit of element 64*1+4 (sub-block 2) */
        uint8_t b[176] = {0};
        put_half(b, 0.5f);
        put_half(b + 2, 0.0f);
        b[4 + 2] = 10;       /* sc[2] = 10 */
        b[16 + 4] = 0x04;    /* qh[4] bit 2 */
        b[48 + 32 + 4] = 0x03; /* qs chunk 1, byte 4, low nibble 3 */
        sdn_dequantize_row(SDN_TYPE_Q5_K, b, y, 256);
        assert_true(y[68] == 0.5f * 10 * 19);
        assert_true(y[4] == 0.0f);
    }
    { /* Q6_K: d = 0.5, scales[0] = -2, scales[9] = 3.
         element 0: ql[0] low = 5, qh[0] bits 0-1 = 2 -> 37 - 32 = 5 -> 0.5 * -2 * 5 = -5
         element 128+64+16 = 208 (h=1, g=2, l=16): ql[64+16] high nibble, qh[32+16] bits 4-5,
         sub-block 13 (scale 0) ... use element 128+16 = 144 (g=0, l=16, sub-block 9):
         ql[64+16] low = 0xF, qh[32+16] bits 0-1 = 3 -> 63 - 32 = 31 -> 0.5*3*31 */
        uint8_t b[210] = {0};
        b[0] = 0x05;
        b[128 + 0] = 0x02;
        b[64 + 16] = 0x0F;
        b[128 + 32 + 16] = 0x03;
        b[192 + 0] = (uint8_t)-2;
        b[192 + 9] = 3;
        put_half(b + 208, 0.5f);
        sdn_dequantize_row(SDN_TYPE_Q6_K, b, y, 256);
        assert_true(y[0] == -5.0f);
        assert_true(y[144] == 46.5f);
        assert_true(y[1] == 0.5f * -2 * -32);
    }
}

/* Random block bytes (with sane fp16 scales) against the naive decoder. */
static void test_random_blocks_vs_naive(void **state) {
    kpath_use(state);
    sdn_rng rng;
    sdn_rng_seed(&rng, 7);
    for (size_t t = 0; t < NQ; t++) {
        const uint32_t type = qtypes[t];
        const int be = sdn_type_block_elems(type);
        const size_t bb = sdn_type_block_bytes(type);
        const int nblk = 6;
        uint8_t *buf = malloc(bb * nblk);
        float *y = malloc(sizeof(float) * be * nblk), *yref = malloc(sizeof(float) * be * nblk);
        for (int rep = 0; rep < 50; rep++) {
            for (size_t i = 0; i < bb * nblk; i++) buf[i] = (uint8_t)sdn_rng_u64(&rng);
            for (int k = 0; k < nblk; k++) { /* replace fp16 fields by finite values */
                uint8_t *b = buf + k * bb;
                float s1 = (sdn_rng_float(&rng) - 0.5f) * 4, s2 = (sdn_rng_float(&rng) - 0.5f) * 4;
                if (type == SDN_TYPE_Q6_K) put_half(b + 208, s1);
                else {
                    put_half(b, s1);
                    if (type == SDN_TYPE_Q4_1 || type == SDN_TYPE_Q5_1 || type == SDN_TYPE_Q4_K ||
                        type == SDN_TYPE_Q5_K)
                        put_half(b + 2, s2);
                }
            }
            sdn_dequantize_row(type, buf, y, (int64_t)be * nblk);
            sdn_dequantize_row_ref(type, buf, yref, (int64_t)be * nblk);
            assert_memory_equal(y, yref, sizeof(float) * be * nblk); /* SIMD path = scalar path */
            for (int k = 0; k < nblk; k++)
                for (int e = 0; e < be; e++) {
                    double mag, ref = ref_elem(type, buf + k * bb, e, &mag);
                    double got = y[k * be + e];
                    /* the float decoder rounds at most 3 times, each within FLT_EPSILON/2 of
                     * the magnitude of the terms */
                    if (fabs(got - ref) > 2 * FLT_EPSILON * mag) {
                        print_error("%s block %d elem %d: got %.9g want %.9g\n", sdn_type_name(type), k, e, got, ref);
                        fail();
                    }
                }
        }
        free(buf);
        free(y);
        free(yref);
    }
}

/* ------------------------------------------------------------ quantization */

typedef struct {
    uint32_t type;
    double max_rel_rms; /* bound on RMS(error) / RMS(x) for N(0,1) data */
    double max_rel_blk; /* bound on max |error| / max |x| of the block */
} qbound;

/* Max error per block: half a quantization step, from each format's definition (Q8_0:
 * amax/127/2; Q4_0/Q5_0: one full step amax/8, amax/16, because the largest magnitude takes
 * the most negative level and a positive value of that magnitude is clamped one step short;
 * Q4_1/Q5_1: (max-min)/15/2 <= amax/15, amax/31; F16/BF16: half an ulp) plus fp16 rounding of
 * the stored scales. The K formats have no closed form (6/8-bit scales of fitted sub-block
 * scales): 1.5x the measured worst case. RMS bounds are 1.25x the errors measured with these
 * quantizers on this data (docs/results.md lists them), to catch regressions. */
static const qbound bounds[] = {
    {SDN_TYPE_F32, 0, 0},           {SDN_TYPE_F16, 2.7e-4, 4.9e-4}, {SDN_TYPE_BF16, 2.1e-3, 3.9e-3},
    {SDN_TYPE_Q8_0, 0.0067, 0.0040}, {SDN_TYPE_Q4_0, 0.108, 0.1255}, {SDN_TYPE_Q4_1, 0.098, 0.0670},
    {SDN_TYPE_Q5_0, 0.054, 0.0630},  {SDN_TYPE_Q5_1, 0.048, 0.0325}, {SDN_TYPE_Q4_K, 0.089, 0.122},
    {SDN_TYPE_Q5_K, 0.045, 0.068},   {SDN_TYPE_Q6_K, 0.022, 0.026},
};

static void test_roundtrip_error(void **state) {
    (void)state;
    const int64_t n = 256 * 64;
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    uint8_t *q = malloc((size_t)n * 4), *q2 = malloc((size_t)n * 4);
    sdn_rng rng;
    sdn_rng_seed(&rng, 42);
    for (int64_t i = 0; i < n; i++) x[i] = sdn_rng_normal(&rng);
    for (size_t t = 0; t < sizeof bounds / sizeof bounds[0]; t++) {
        const uint32_t type = bounds[t].type;
        size_t bytes = sdn_quantize_row(type, x, q, n);
        assert_int_equal(bytes, sdn_type_row_bytes(type, n));
        assert_int_equal(sdn_quantize_row(type, x, q2, n), bytes);
        assert_memory_equal(q, q2, bytes); /* deterministic */
        sdn_dequantize_row(type, q, y, n);
        double se = 0, sx = 0, worst = 0;
        const int be = type == SDN_TYPE_F32 || type == SDN_TYPE_F16 || type == SDN_TYPE_BF16 ? 32 : sdn_type_block_elems(type);
        for (int64_t b = 0; b < n / be; b++) {
            double amax = 0, emax = 0;
            for (int i = 0; i < be; i++) {
                double e = (double)y[b * be + i] - x[b * be + i];
                se += e * e;
                sx += (double)x[b * be + i] * x[b * be + i];
                amax = fmax(amax, fabs(x[b * be + i]));
                emax = fmax(emax, fabs(e));
            }
            worst = fmax(worst, emax / amax);
        }
        double rel = sqrt(se / sx);
        print_message("%-5s rel RMS error %.5f, worst block max error / block amax %.4f\n", sdn_type_name(type), rel,
                      worst);
        assert_true(rel <= bounds[t].max_rel_rms);
        assert_true(worst <= bounds[t].max_rel_blk);
    }
    free(x); free(y); free(q); free(q2);
}

/* Data already on a type's grid comes back exactly. */
static void test_exact_grid(void **state) {
    (void)state;
    float x[32], y[32];
    uint8_t q[64];
    /* Q8_0: multiples of 0.25 spanning -127..127 steps, |max| = 127 * 0.25 */
    for (int i = 0; i < 32; i++) x[i] = 0.25f * (float)((i * 37) % 255 - 127);
    x[5] = -127 * 0.25f;
    sdn_quantize_row(SDN_TYPE_Q8_0, x, q, 32);
    sdn_dequantize_row(SDN_TYPE_Q8_0, q, y, 32);
    assert_memory_equal(x, y, sizeof x);
    /* Q4_0 / Q5_0: (level - 8) * 0.5 with a -8 (resp. -16) level present */
    for (int i = 0; i < 32; i++) x[i] = 0.5f * (float)(i % 16 - 8);
    sdn_quantize_row(SDN_TYPE_Q4_0, x, q, 32);
    sdn_dequantize_row(SDN_TYPE_Q4_0, q, y, 32);
    assert_memory_equal(x, y, sizeof x);
    for (int i = 0; i < 32; i++) x[i] = 0.5f * (float)(i - 16);
    sdn_quantize_row(SDN_TYPE_Q5_0, x, q, 32);
    sdn_dequantize_row(SDN_TYPE_Q5_0, q, y, 32);
    assert_memory_equal(x, y, sizeof x);
    /* Q4_1 / Q5_1: m + level * d with levels 0 and 15 (31) present */
    for (int i = 0; i < 32; i++) x[i] = -2.0f + 0.25f * (float)(i % 16);
    sdn_quantize_row(SDN_TYPE_Q4_1, x, q, 32);
    sdn_dequantize_row(SDN_TYPE_Q4_1, q, y, 32);
    assert_memory_equal(x, y, sizeof x);
    for (int i = 0; i < 32; i++) x[i] = 1.0f + 0.125f * (float)(31 - i);
    sdn_quantize_row(SDN_TYPE_Q5_1, x, q, 32);
    sdn_dequantize_row(SDN_TYPE_Q5_1, q, y, 32);
    assert_memory_equal(x, y, sizeof x);
}

static void test_special_inputs(void **state) {
    (void)state;
    float x[256], y[256];
    uint8_t q[256 * 4];
    memset(x, 0, sizeof x);
    for (size_t t = 0; t < sizeof bounds / sizeof bounds[0]; t++) { /* zeros stay zeros */
        assert_true(sdn_quantize_row(bounds[t].type, x, q, 256) > 0);
        sdn_dequantize_row(bounds[t].type, q, y, 256);
        for (int i = 0; i < 256; i++) assert_true(y[i] == 0.0f);
    }
    for (int i = 0; i < 256; i++) x[i] = 3.0f; /* constant positive block */
    for (size_t t = 0; t < sizeof bounds / sizeof bounds[0]; t++) {
        sdn_quantize_row(bounds[t].type, x, q, 256);
        sdn_dequantize_row(bounds[t].type, q, y, 256);
        for (int i = 0; i < 256; i++) assert_true(fabsf(y[i] - 3.0f) <= 3.0f * 0.01f);
    }
    /* contract: n must be a multiple of the block size; activation formats are not weight types */
    assert_int_equal(sdn_quantize_row(SDN_TYPE_Q4_0, x, q, 48), 0);
    assert_int_equal(sdn_quantize_row(SDN_TYPE_Q4_K, x, q, 128), 0);
    assert_int_equal(sdn_quantize_row(SDN_TYPE_Q8_K, x, q, 256), 0);
    assert_int_equal(sdn_quantize_row(SDN_TYPE_Q8_1, x, q, 256), 0);
    assert_int_equal(sdn_quantize_row(99, x, q, 256), 0);
    assert_int_equal(sdn_quantize_row(SDN_TYPE_F16, x, q, 3), 6);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        KPATH_TESTS(test_fp16_all_codes),       cmocka_unit_test(test_fp16_rounding),
        cmocka_unit_test(test_bf16),            cmocka_unit_test(test_hand_values),
        KPATH_TESTS(test_random_blocks_vs_naive), cmocka_unit_test(test_roundtrip_error),
        cmocka_unit_test(test_exact_grid),      cmocka_unit_test(test_special_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
