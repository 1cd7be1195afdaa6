/* quant.c - dequantization of every GGUF weight type to F32 and deterministic reference
 * quantizers (F32 -> any weight type) used to write test models.
 *
 * Block layouts: kernels/quant_blocks.h, which cites ggml's ggml-common.h block structs and
 * ggml-quants.c dequantize_row_*; the code here is written from those layout facts. The
 * dequantizers evaluate the same float expressions as ggml's (e.g. Q4_K: (d*sc)*q - dmin*m),
 * so a GGUF file decodes to the same F32 values as in llama.cpp.
 *
 * Quantizers (round to nearest; results depend only on the input values):
 *   Q8_0               d = amax / 127, levels -127..127.
 *   Q4_0, Q5_0         symmetric: the element of largest magnitude maps to the most
 *                      negative level (d = that value / -8, / -16).
 *   (all 32-element types store d as fp16 and compute the levels against the stored d)
 *   Q4_1, Q5_1         d = (max - min) / (2^b - 1), m = min, levels against stored d, m.
 *   Q4_K, Q5_K         per 32-sub-block affine fit x ~ s*q - mn (mn >= 0): a small search
 *                      over 13 grid scalings, each followed by a least-squares refit of
 *                      (s, mn); then s and mn are quantized to 6 bits against fp16 super-block
 *                      d, dmin, and the levels recomputed against the final effective scales.
 *   Q6_K               per 16-sub-block symmetric fit with the same search, scales to int8
 *                      against fp16 d, levels recomputed against d*sc.
 * Quantization error on N(0,1) data, RMS error / RMS value (tests/test_quant.c, listed in
 * docs/results.md): Q8_0 0.0053, Q4_0 0.086, Q4_1 0.078, Q5_0 0.043, Q5_1 0.038, Q4_K 0.071,
 * Q5_K 0.036, Q6_K 0.017, F16 0.0002, BF16 0.0017.
 * The SIMD dequantizers (quant_avx2.c, chosen at run time) repeat the scalar float operations
 * per lane, so they are bit-identical to sdn_dequantize_row_ref (tested). */
#include "kernels/quant.h"

#include <math.h>
#include <string.h>

#include "common/sdn_util.h"
#include "kernels/quant_blocks.h"

#include "kernels/kernel_path.h"
#include "kernels/matmul_internal.h"

static inline float h2f(uint16_t h) { return sdn_fp16_to_fp32(h); }
static inline uint16_t f2h(float f) { return sdn_fp32_to_fp16(f); }

/* ---------------------------------------------------------------- dequantization */


static void deq_q4_0(const sdn_blk_q4_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += 32) {
        const float d = h2f(b[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((b[i].qs[j] & 15) - 8) * d;
            y[j + 16] = (float)((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static void deq_q4_1(const sdn_blk_q4_1 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += 32) {
        const float d = h2f(b[i].d), m = h2f(b[i].m);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)(b[i].qs[j] & 15) * d + m;
            y[j + 16] = (float)(b[i].qs[j] >> 4) * d + m;
        }
    }
}

static inline uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void deq_q5_0(const sdn_blk_q5_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += 32) {
        const float d = h2f(b[i].d);
        const uint32_t qh = le32(b[i].qh);
        for (int j = 0; j < 16; j++) {
            int q0 = (b[i].qs[j] & 15) | (int)((qh >> j) & 1) << 4;
            int q1 = (b[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            y[j] = (float)(q0 - 16) * d;
            y[j + 16] = (float)(q1 - 16) * d;
        }
    }
}

static void deq_q5_1(const sdn_blk_q5_1 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += 32) {
        const float d = h2f(b[i].d), m = h2f(b[i].m);
        const uint32_t qh = le32(b[i].qh);
        for (int j = 0; j < 16; j++) {
            int q0 = (b[i].qs[j] & 15) | (int)((qh >> j) & 1) << 4;
            int q1 = (b[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            y[j] = (float)q0 * d + m;
            y[j + 16] = (float)q1 * d + m;
        }
    }
}

static void deq_q8_0(const sdn_blk_q8_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += 32) {
        const float d = h2f(b[i].d);
        for (int j = 0; j < 32; j++) y[j] = (float)b[i].qs[j] * d;
    }
}

static void deq_q4_K(const sdn_blk_q4_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
        uint8_t sc[8], m[8];
        sdn_k4_scale_min(b[i].scales, sc, m);
        for (int c = 0; c < 4; c++, y += 64) {
            const uint8_t *q = b[i].qs + 32 * c;
            const float d1 = d * sc[2 * c], m1 = dmin * m[2 * c];
            const float d2 = d * sc[2 * c + 1], m2 = dmin * m[2 * c + 1];
            for (int l = 0; l < 32; l++) {
                y[l] = d1 * (float)(q[l] & 15) - m1;
                y[l + 32] = d2 * (float)(q[l] >> 4) - m2;
            }
        }
    }
}

static void deq_q5_K(const sdn_blk_q5_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
        uint8_t sc[8], m[8];
        sdn_k4_scale_min(b[i].scales, sc, m);
        for (int c = 0; c < 4; c++, y += 64) {
            const uint8_t *q = b[i].qs + 32 * c;
            const float d1 = d * sc[2 * c], m1 = dmin * m[2 * c];
            const float d2 = d * sc[2 * c + 1], m2 = dmin * m[2 * c + 1];
            for (int l = 0; l < 32; l++) {
                int lo = (q[l] & 15) | ((b[i].qh[l] >> (2 * c)) & 1) << 4;
                int hi = (q[l] >> 4) | ((b[i].qh[l] >> (2 * c + 1)) & 1) << 4;
                y[l] = d1 * (float)lo - m1;
                y[l + 32] = d2 * (float)hi - m2;
            }
        }
    }
}

static void deq_q6_K(const sdn_blk_q6_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += 256) {
        const float d = h2f(b[i].d);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = b[i].ql + 64 * h, *qh = b[i].qh + 32 * h;
            const int8_t *sc = b[i].scales + 8 * h;
            float *yh = y + 128 * h;
            for (int l = 0; l < 32; l++) {
                int q0 = ((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4) - 32;
                int q1 = ((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4) - 32;
                int q2 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                int q3 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                int s = l / 16;
                yh[l] = d * (float)sc[s] * (float)q0;
                yh[l + 32] = d * (float)sc[s + 2] * (float)q1;
                yh[l + 64] = d * (float)sc[s + 4] * (float)q2;
                yh[l + 96] = d * (float)sc[s + 6] * (float)q3;
            }
        }
    }
}


static void deq_scalar(uint32_t type, const void *src, float *dst, int64_t n, int64_t nb) {
    switch (type) {
    case SDN_TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    case SDN_TYPE_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = h2f(((const uint16_t *)src)[i]);
        break;
    case SDN_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = sdn_bf16_to_fp32(((const uint16_t *)src)[i]);
        break;
    case SDN_TYPE_Q4_0: deq_q4_0(src, dst, nb); break;
    case SDN_TYPE_Q4_1: deq_q4_1(src, dst, nb); break;
    case SDN_TYPE_Q5_0: deq_q5_0(src, dst, nb); break;
    case SDN_TYPE_Q5_1: deq_q5_1(src, dst, nb); break;
    case SDN_TYPE_Q8_0: deq_q8_0(src, dst, nb); break;
    case SDN_TYPE_Q4_K: deq_q4_K(src, dst, nb); break;
    case SDN_TYPE_Q5_K: deq_q5_K(src, dst, nb); break;
    case SDN_TYPE_Q6_K: deq_q6_K(src, dst, nb); break;
    default: break;
    }
}

void sdn_dequantize_row_ref(uint32_t type, const void *src, float *dst, int64_t n) {
    int be = sdn_type_block_elems(type);
    if (be <= 0 || n <= 0 || n % be) return;
    deq_scalar(type, src, dst, n, n / be);
}

void sdn_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
    int be = sdn_type_block_elems(type);
    if (be <= 0 || n <= 0 || n % be) return;
    int64_t nb = n / be;
#if defined(__x86_64__) /* the x86 kernels are built on x86-64 only */
    switch (sdn_kpath_get()) {
    case SDN_KPATH_AVX2:
        if ((sdn_kpath_avxvnni() ? sdn_dequantize_row_avx2vnni : sdn_dequantize_row_avx2)(type, src, dst, n)) return;
        break;
    case SDN_KPATH_AVX512:
    case SDN_KPATH_AMX:
        if (sdn_dequantize_row_avx512(type, src, dst, n)) return;
        break;
    default: break;
    }
#endif
    deq_scalar(type, src, dst, n, nb);
}

/* ---------------------------------------------------------------- quantization */

/* Round to nearest (halves away from zero) and clamp to [lo, hi]; NaN maps to lo. */
static inline int qround(float v, int lo, int hi) {
    if (!(v > (float)lo)) return lo;
    if (v >= (float)hi) return hi;
    return (int)roundf(v);
}

/* Value of largest magnitude (first one on ties), keeping its sign. */
static float signed_absmax(const float *x, int n) {
    float amax = 0, mx = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) { amax = fabsf(x[i]); mx = x[i]; }
    return mx;
}

static void quant_q8_0(const float *x, sdn_blk_q8_0 *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 32) {
        const float amax = fabsf(signed_absmax(x, 32));
        b[i].d = f2h(amax / 127.0f);
        const float d = h2f(b[i].d), id = d != 0 ? 1.0f / d : 0.0f;
        for (int j = 0; j < 32; j++) b[i].qs[j] = (int8_t)qround(x[j] * id, -127, 127);
    }
}

/* Symmetric b-bit block of 32 (Q4_0: nlev 16, Q5_0: nlev 32): levels 0..nlev-1, value
 * d * (q - nlev/2), the largest-magnitude element mapped to level 0. */
static void quant_sym32(const float *x, int nlev, uint16_t *dh, uint8_t q[32]) {
    const int half = nlev / 2;
    *dh = f2h(signed_absmax(x, 32) / (float)-half);
    const float d = h2f(*dh), id = d != 0 ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++) q[j] = (uint8_t)(qround(x[j] * id, -half, half - 1) + half);
}

/* Affine b-bit block of 32: value d * q + m, q in 0..nlev-1. */
static void quant_aff32(const float *x, int nlev, uint16_t *dh, uint16_t *mh, uint8_t q[32]) {
    float mn = x[0], mx = x[0];
    for (int j = 1; j < 32; j++) {
        if (x[j] < mn) mn = x[j];
        if (x[j] > mx) mx = x[j];
    }
    *dh = f2h((mx - mn) / (float)(nlev - 1));
    *mh = f2h(mn);
    const float d = h2f(*dh), m = h2f(*mh), id = d != 0 ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++) q[j] = (uint8_t)qround((x[j] - m) * id, 0, nlev - 1);
}

static void pack_nibbles(const uint8_t q[32], uint8_t qs[16]) {
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
}

static void pack_qh32(const uint8_t q[32], uint8_t qh[4]) {
    uint32_t h = 0;
    for (int j = 0; j < 32; j++) h |= (uint32_t)((q[j] >> 4) & 1) << j;
    for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(h >> (8 * k));
}

static void quant_q4_0(const float *x, sdn_blk_q4_0 *b, int64_t nb) {
    uint8_t q[32];
    for (int64_t i = 0; i < nb; i++, x += 32) {
        quant_sym32(x, 16, &b[i].d, q);
        pack_nibbles(q, b[i].qs);
    }
}

static void quant_q5_0(const float *x, sdn_blk_q5_0 *b, int64_t nb) {
    uint8_t q[32];
    for (int64_t i = 0; i < nb; i++, x += 32) {
        quant_sym32(x, 32, &b[i].d, q);
        pack_nibbles(q, b[i].qs);
        pack_qh32(q, b[i].qh);
    }
}

static void quant_q4_1(const float *x, sdn_blk_q4_1 *b, int64_t nb) {
    uint8_t q[32];
    for (int64_t i = 0; i < nb; i++, x += 32) {
        quant_aff32(x, 16, &b[i].d, &b[i].m, q);
        pack_nibbles(q, b[i].qs);
    }
}

static void quant_q5_1(const float *x, sdn_blk_q5_1 *b, int64_t nb) {
    uint8_t q[32];
    for (int64_t i = 0; i < nb; i++, x += 32) {
        quant_aff32(x, 32, &b[i].d, &b[i].m, q);
        pack_nibbles(q, b[i].qs);
        pack_qh32(q, b[i].qh);
    }
}

/* Fit x[i] ~ s * L[i] - mn with L in 0..nmax, s >= 0, mn >= 0 (the sub-block model of
 * Q4_K/Q5_K). Tries 13 grid scalings of the min/max range; for each, a least-squares refit
 * of (s, mn) given the levels; keeps the smallest squared error. */
static void fit_affine(const float *x, int n, int nmax, float *s_out, float *mn_out) {
    double lo = 0, hi = 0; /* lo <= 0 so that mn >= 0 */
    for (int i = 0; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
    if (!(hi > lo)) { *s_out = 0; *mn_out = (float)-lo; return; }
    double best_s = (hi - lo) / nmax, best_b = lo, best_err = INFINITY;
    for (int k = -6; k <= 6; k++) {
        double iscale = (nmax + 0.1 * k) / (hi - lo);
        double sl = 0, sll = 0, sx = 0, slx = 0;
        for (int i = 0; i < n; i++) {
            int l = qround((float)((x[i] - lo) * iscale), 0, nmax);
            sl += l; sll += (double)l * l; sx += x[i]; slx += (double)l * x[i];
        }
        double det = n * sll - sl * sl, s, b;
        if (det <= 0) continue;
        s = (n * slx - sl * sx) / det;
        b = (sll * sx - sl * slx) / det;
        if (b > 0) { b = 0; s = slx / sll; }
        if (!(s > 0)) continue;
        /* error of the refit model with levels re-chosen for it */
        double err = 0;
        for (int i = 0; i < n; i++) {
            int l = qround((float)((x[i] - b) / s), 0, nmax);
            double e = s * l + b - x[i];
            err += e * e;
        }
        if (err < best_err) { best_err = err; best_s = s; best_b = b; }
    }
    *s_out = (float)best_s;
    *mn_out = (float)-best_b;
}

/* Quantize 8 sub-block scales and mins (>= 0) to 6 bits against fp16 super-block factors. */
static void k_scales6(const float s[8], const float mn[8], uint16_t *dh, uint16_t *dminh, uint8_t sc[8],
                      uint8_t m[8]) {
    float smax = 0, mmax = 0;
    for (int j = 0; j < 8; j++) {
        if (s[j] > smax) smax = s[j];
        if (mn[j] > mmax) mmax = mn[j];
    }
    *dh = f2h(smax / 63.0f);
    *dminh = f2h(mmax / 63.0f);
    const float d = h2f(*dh), dmin = h2f(*dminh);
    for (int j = 0; j < 8; j++) {
        sc[j] = (uint8_t)(d > 0 ? qround(s[j] / d, 0, 63) : 0);
        m[j] = (uint8_t)(dmin > 0 ? qround(mn[j] / dmin, 0, 63) : 0);
    }
}

/* Inverse of sdn_k4_scale_min. */
static void k_pack_scales(const uint8_t sc[8], const uint8_t m[8], uint8_t s[12]) {
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
        s[j + 4] = (uint8_t)((m[j] & 63) | (m[j + 4] >> 4) << 6);
        s[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
}

/* Levels of one 256-element K super-block (affine, 0..nmax) against the final scales. */
static void k_levels(const float *x, int nmax, float d, float dmin, const uint8_t sc[8], const uint8_t m[8],
                     uint8_t L[256]) {
    for (int j = 0; j < 8; j++) {
        const float s = d * sc[j], mn = dmin * m[j];
        for (int i = 0; i < 32; i++)
            L[32 * j + i] = (uint8_t)(s > 0 ? qround((x[32 * j + i] + mn) / s, 0, nmax) : 0);
    }
}

static void quant_k_affine(const float *x, int nmax, uint16_t *dh, uint16_t *dminh, uint8_t scales[12],
                           uint8_t L[256]) {
    float s[8], mn[8];
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; j++) fit_affine(x + 32 * j, 32, nmax, &s[j], &mn[j]);
    k_scales6(s, mn, dh, dminh, sc, m);
    k_pack_scales(sc, m, scales);
    k_levels(x, nmax, h2f(*dh), h2f(*dminh), sc, m, L);
}

static void quant_q4_K(const float *x, sdn_blk_q4_K *b, int64_t nb) {
    uint8_t L[256];
    for (int64_t i = 0; i < nb; i++, x += 256) {
        quant_k_affine(x, 15, &b[i].d, &b[i].dmin, b[i].scales, L);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) b[i].qs[32 * c + l] = (uint8_t)(L[64 * c + l] | L[64 * c + 32 + l] << 4);
    }
}

static void quant_q5_K(const float *x, sdn_blk_q5_K *b, int64_t nb) {
    uint8_t L[256];
    for (int64_t i = 0; i < nb; i++, x += 256) {
        quant_k_affine(x, 31, &b[i].d, &b[i].dmin, b[i].scales, L);
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
                b[i].qs[32 * c + l] = (uint8_t)((lo & 15) | (hi & 15) << 4);
                b[i].qh[l] |= (uint8_t)(((lo >> 4) & 1) << (2 * c) | ((hi >> 4) & 1) << (2 * c + 1));
            }
    }
}

/* Symmetric fit x ~ s * L, L in -nh..nh-1 (Q6_K sub-blocks of 16, nh = 32): grid of 13
 * scalings around "largest magnitude -> -nh", least-squares s for each, smallest error. */
static float fit_sym(const float *x, int n, int nh) {
    const float mx = signed_absmax(x, n);
    if (mx == 0) return 0;
    double best_s = mx / (double)-nh, best_err = INFINITY;
    for (int k = -6; k <= 6; k++) {
        double iscale = -(nh + 0.1 * k) / mx, slx = 0, sll = 0;
        for (int i = 0; i < n; i++) {
            int l = qround((float)(x[i] * iscale), -nh, nh - 1);
            slx += (double)l * x[i];
            sll += (double)l * l;
        }
        if (sll <= 0) continue;
        double s = slx / sll, err = 0;
        for (int i = 0; i < n; i++) {
            int l = qround((float)(x[i] / s), -nh, nh - 1);
            double e = s * l - x[i];
            err += e * e;
        }
        if (err < best_err) { best_err = err; best_s = s; }
    }
    return (float)best_s;
}

static void quant_q6_K(const float *x, sdn_blk_q6_K *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 256) {
        float s[16], smax = 0;
        for (int j = 0; j < 16; j++) {
            s[j] = fit_sym(x + 16 * j, 16, 32);
            if (fabsf(s[j]) > smax) smax = fabsf(s[j]);
        }
        b[i].d = f2h(smax / 127.0f);
        const float d = h2f(b[i].d);
        uint8_t L[256];
        for (int j = 0; j < 16; j++) {
            int sc = d > 0 ? qround(s[j] / d, -128, 127) : 0;
            b[i].scales[j] = (int8_t)sc;
            const float ds = d * (float)sc;
            for (int k = 0; k < 16; k++)
                L[16 * j + k] = (uint8_t)((ds != 0 ? qround(x[16 * j + k] / ds, -32, 31) : 0) + 32);
        }
        for (int h = 0; h < 2; h++) {
            const uint8_t *Lh = L + 128 * h;
            for (int l = 0; l < 32; l++) {
                b[i].ql[64 * h + l] = (uint8_t)((Lh[l] & 15) | (Lh[l + 64] & 15) << 4);
                b[i].ql[64 * h + 32 + l] = (uint8_t)((Lh[l + 32] & 15) | (Lh[l + 96] & 15) << 4);
                b[i].qh[32 * h + l] =
                    (uint8_t)((Lh[l] >> 4) | (Lh[l + 32] >> 4) << 2 | (Lh[l + 64] >> 4) << 4 | (Lh[l + 96] >> 4) << 6);
            }
        }
    }
}

size_t sdn_quantize_row(uint32_t type, const float *src, void *dst, int64_t n) {
    if (!sdn_type_is_weight_type(type)) return 0;
    size_t bytes = sdn_type_row_bytes(type, n);
    if (!bytes) return 0;
    int64_t nb = n / sdn_type_block_elems(type);
    switch (type) {
    case SDN_TYPE_F32: memcpy(dst, src, bytes); break;
    case SDN_TYPE_F16: {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = f2h(src[i]);
        break;
    }
    case SDN_TYPE_BF16: {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = sdn_fp32_to_bf16(src[i]);
        break;
    }
    case SDN_TYPE_Q4_0: quant_q4_0(src, dst, nb); break;
    case SDN_TYPE_Q4_1: quant_q4_1(src, dst, nb); break;
    case SDN_TYPE_Q5_0: quant_q5_0(src, dst, nb); break;
    case SDN_TYPE_Q5_1: quant_q5_1(src, dst, nb); break;
    case SDN_TYPE_Q8_0: quant_q8_0(src, dst, nb); break;
    case SDN_TYPE_Q4_K: quant_q4_K(src, dst, nb); break;
    case SDN_TYPE_Q5_K: quant_q5_K(src, dst, nb); break;
    case SDN_TYPE_Q6_K: quant_q6_K(src, dst, nb); break;
    default: return 0;
    }
    return bytes;
}
