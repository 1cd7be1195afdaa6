/* matmul_portable.c - portable C version of the small-batch kernels (kernels/matmul_ref.h):
 * activation preparation and Y = X * W^T on the file's weight layout.
 *
 * Every output element is computed by one fixed sequence of operations that reads only its
 * weight row and its activation row: a weight row is decoded in chunks of 256 elements and
 * each activation row of a group of 64 keeps its own accumulator across the chunks, so the
 * grouping changes which rows share a decoded chunk but never an element's arithmetic.
 *
 * Quantized types use the integer-activation scheme of the SIMD kernels (matmul_internal.h):
 * exact integer dot products per block, then one float multiply-add per block. */
#include <math.h>
#include <string.h>

#include "common/sdn_util.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "kernels/matmul_ref.h"
#include "kernels/quant_blocks.h"

/* ---------------------------------------------------------------- activations */

/* amax of a block, NaN ignored; returns d = amax/127 and sets *id = 127/amax (0 if amax == 0). */
static float act_scale(const float *x, int len, float *id) {
    float amax = 0;
    for (int i = 0; i < len; i++) {
        float a = fabsf(x[i]);
        if (a > amax) amax = a;
    }
    *id = amax > 0 ? 127.0f / amax : 0.0f;
    return amax / 127.0f;
}

static inline int8_t act_q(float v) {
    if (!(v >= -127.0f)) v = -127.0f; /* NaN too */
    if (v > 127.0f) v = 127.0f;
    return (int8_t)rintf(v);
}

void sdn_act_prepare_portable(uint32_t wtype, const float *X, int64_t ldx, int n, int64_t in, void *act) {
    const size_t stride = sdn_act_row_stride(wtype, in);
    if (!stride) return;
    const int fam = sdn_act_family(wtype);
    for (int r = 0; r < n; r++) {
        const float *x = X + (size_t)r * ldx;
        char *row = (char *)act + (size_t)r * stride;
        memset(row, 0, stride);
        if (fam == SDN_ACT_F32) {
            memcpy(row, x, (size_t)in * sizeof(float));
            continue;
        }
        int8_t *q = (int8_t *)row;
        float *d = (float *)(row + in);
        if (fam == SDN_ACT_Q32) {
            float *s = d + in / 32;
            int32_t *qsum = (int32_t *)(s + in / 32);
            for (int64_t b = 0; b < in / 32; b++) {
                float id;
                d[b] = act_scale(x + 32 * b, 32, &id);
                int sum = 0;
                for (int i = 0; i < 32; i++) {
                    q[32 * b + i] = act_q(x[32 * b + i] * id);
                    sum += q[32 * b + i];
                }
                s[b] = d[b] * (float)sum;
                qsum[b] = sum;
            }
        } else {
            int16_t *bsum = (int16_t *)(row + in + (in / 256) * 4);
            for (int64_t b = 0; b < in / 256; b++) {
                float id;
                d[b] = act_scale(x + 256 * b, 256, &id);
                for (int i = 0; i < 256; i++) q[256 * b + i] = act_q(x[256 * b + i] * id);
            }
            for (int64_t g = 0; g < in / 16; g++) {
                int sum = 0;
                for (int i = 0; i < 16; i++) sum += q[16 * g + i];
                bsum[g] = (int16_t)sum;
            }
        }
    }
}

/* ---------------------------------------------------------------- kernels */

#define PG 64 /* activation rows sharing one decoded weight chunk */

static void port_float(uint32_t wtype, const uint8_t *W, size_t row_bytes, int64_t in, const char *act, size_t stride,
                       int n, float *Y, int64_t ldy, int64_t o0, int64_t o1) {
    /* 8 interleaved partial sums per element (lane = i % 8), reduced in a fixed tree: the
     * accuracy of the SIMD kernel, and a loop compilers can vectorize */
    float wf[256], acc[PG][8];
    for (int64_t o = o0; o < o1; o++) {
        const uint8_t *w = W + (size_t)o * row_bytes;
        for (int r0 = 0; r0 < n; r0 += PG) {
            const int nr = n - r0 < PG ? n - r0 : PG;
            memset(acc, 0, sizeof acc);
            for (int64_t k0 = 0; k0 < in; k0 += 256) {
                const int len = in - k0 < 256 ? (int)(in - k0) : 256;
                for (int i = 0; i < len; i++) {
                    uint16_t h;
                    switch (wtype) {
                    case SDN_TYPE_F32: memcpy(&wf[i], w + 4 * (k0 + i), 4); break;
                    case SDN_TYPE_F16: memcpy(&h, w + 2 * (k0 + i), 2); wf[i] = sdn_fp16_to_fp32(h); break;
                    default: memcpy(&h, w + 2 * (k0 + i), 2); wf[i] = sdn_bf16_to_fp32(h); break;
                    }
                }
                const int len8 = len & ~7;
                for (int r = 0; r < nr; r++) {
                    const float *x = (const float *)(act + (size_t)(r0 + r) * stride) + k0;
                    float *a = acc[r];
                    for (int i = 0; i < len8; i += 8)
                        for (int l = 0; l < 8; l++) a[l] += wf[i + l] * x[i + l];
                    for (int i = len8; i < len; i++) a[i - len8] += wf[i] * x[i];
                }
            }
            for (int r = 0; r < nr; r++) {
                const float *a = acc[r];
                float s0 = a[0] + a[4], s1 = a[1] + a[5], s2 = a[2] + a[6], s3 = a[3] + a[7];
                Y[(size_t)(r0 + r) * ldy + o] = (s0 + s2) + (s1 + s3);
            }
        }
    }
}

/* Decode one 32-block of a Q32-family weight into integer levels lv[32] (signed level for
 * the symmetric types, unsigned 0..31 for Q4_1/Q5_1), scale *d and min *m (0 if none). */
static void dec32(uint32_t wtype, const uint8_t *blk, int8_t lv[32], float *d, float *m) {
    uint16_t dh, mh = 0;
    uint32_t qh = 0;
    const uint8_t *qs;
    int off = 0, affine = 0;
    memcpy(&dh, blk, 2);
    switch (wtype) {
    case SDN_TYPE_Q8_0:
        memcpy(lv, blk + 2, 32);
        *d = sdn_fp16_to_fp32(dh);
        *m = 0;
        return;
    case SDN_TYPE_Q4_0: qs = blk + 2; off = 8; break;
    case SDN_TYPE_Q5_0: memcpy(&qh, blk + 2, 4); qs = blk + 6; off = 16; break;
    case SDN_TYPE_Q4_1: memcpy(&mh, blk + 2, 2); qs = blk + 4; affine = 1; break;
    default: /* Q5_1 */ memcpy(&mh, blk + 2, 2); memcpy(&qh, blk + 4, 4); qs = blk + 8; affine = 1; break;
    }
    for (int j = 0; j < 16; j++) {
        lv[j] = (int8_t)(((qs[j] & 15) | (int)((qh >> j) & 1) << 4) - off);
        lv[j + 16] = (int8_t)(((qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4) - off);
    }
    *d = sdn_fp16_to_fp32(dh);
    *m = affine ? sdn_fp16_to_fp32(mh) : 0.0f;
}

/* Block b of column o: in the file's rows W, or (P not NULL) read back from the packed matrix P
 * into buf (matmul_pack.c). */
static const uint8_t *block_of(uint32_t wtype, const uint8_t *W, size_t row_bytes, const uint8_t *P, int64_t in,
                               int64_t o, int64_t b, size_t bb, uint8_t *buf) {
    if (!P) return W + (size_t)o * row_bytes + (size_t)b * bb;
    sdn_matmul_packed_block(wtype, P, in, o, b, buf);
    return buf;
}

static void port_q32(uint32_t wtype, const uint8_t *W, size_t row_bytes, const uint8_t *P, int64_t in, const char *act,
                     size_t stride, int n, float *Y, int64_t ldy, int64_t o0, int64_t o1) {
    const size_t bb = sdn_type_block_bytes(wtype);
    const int64_t nb = in / 32;
    const int affine = wtype == SDN_TYPE_Q4_1 || wtype == SDN_TYPE_Q5_1;
    int8_t lv[256];
    float dw[8], mw[8], acc[PG], accm[PG];
    uint8_t buf[64];
    for (int64_t o = o0; o < o1; o++) {
        for (int r0 = 0; r0 < n; r0 += PG) {
            const int nr = n - r0 < PG ? n - r0 : PG;
            for (int r = 0; r < nr; r++) acc[r] = accm[r] = 0;
            for (int64_t b0 = 0; b0 < nb; b0 += 8) {
                const int cb = nb - b0 < 8 ? (int)(nb - b0) : 8;
                for (int b = 0; b < cb; b++)
                    dec32(wtype, block_of(wtype, W, row_bytes, P, in, o, b0 + b, bb, buf), lv + 32 * b, &dw[b], &mw[b]);
                for (int r = 0; r < nr; r++) {
                    const char *row = act + (size_t)(r0 + r) * stride;
                    const int8_t *xq = sdn_act_q(row) + 32 * b0;
                    const float *xd = sdn_act_d(row, in) + b0, *xs = sdn_act_s(row, in) + b0;
                    for (int b = 0; b < cb; b++) {
                        int isum = 0;
                        for (int i = 0; i < 32; i++) isum += lv[32 * b + i] * xq[32 * b + i];
                        acc[r] += (float)isum * (dw[b] * xd[b]);
                        if (affine) accm[r] += mw[b] * xs[b];
                    }
                }
            }
            for (int r = 0; r < nr; r++) Y[(size_t)(r0 + r) * ldy + o] = acc[r] + accm[r];
        }
    }
}

/* One decoded K super-block: levels, sub-block scales (and mins for Q4_K/Q5_K), d, dmin. */
typedef struct {
    uint8_t L[256];
    int sc[16], m[8];
    float d, dmin;
} kdec;

static void deck(uint32_t wtype, const uint8_t *blk, kdec *k) {
    if (wtype == SDN_TYPE_Q6_K) {
        const sdn_blk_q6_K *b = (const sdn_blk_q6_K *)blk;
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const uint8_t ql0 = b->ql[64 * h + l], ql1 = b->ql[64 * h + 32 + l], qh = b->qh[32 * h + l];
                k->L[128 * h + l] = (uint8_t)((ql0 & 15) | (qh & 3) << 4);
                k->L[128 * h + 32 + l] = (uint8_t)((ql1 & 15) | ((qh >> 2) & 3) << 4);
                k->L[128 * h + 64 + l] = (uint8_t)((ql0 >> 4) | ((qh >> 4) & 3) << 4);
                k->L[128 * h + 96 + l] = (uint8_t)((ql1 >> 4) | ((qh >> 6) & 3) << 4);
            }
        for (int j = 0; j < 16; j++) k->sc[j] = b->scales[j];
        uint16_t dh;
        memcpy(&dh, &b->d, 2);
        k->d = sdn_fp16_to_fp32(dh);
        k->dmin = 0;
        return;
    }
    const uint8_t *scales = blk + 4, *qh = NULL, *qs;
    if (wtype == SDN_TYPE_Q5_K) { qh = blk + 16; qs = blk + 48; }
    else qs = blk + 16;
    uint8_t sc[8], m[8];
    sdn_k4_scale_min(scales, sc, m);
    for (int j = 0; j < 8; j++) { k->sc[j] = sc[j]; k->m[j] = m[j]; }
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            int lo = qs[32 * c + l] & 15, hi = qs[32 * c + l] >> 4;
            if (qh) { lo |= ((qh[l] >> (2 * c)) & 1) << 4; hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4; }
            k->L[64 * c + l] = (uint8_t)lo;
            k->L[64 * c + 32 + l] = (uint8_t)hi;
        }
    uint16_t dh, mh;
    memcpy(&dh, blk, 2);
    memcpy(&mh, blk + 2, 2);
    k->d = sdn_fp16_to_fp32(dh);
    k->dmin = sdn_fp16_to_fp32(mh);
}

static void port_k(uint32_t wtype, const uint8_t *W, size_t row_bytes, const uint8_t *P, int64_t in, const char *act,
                   size_t stride, int n, float *Y, int64_t ldy, int64_t o0, int64_t o1) {
    const size_t bb = sdn_type_block_bytes(wtype);
    const int64_t nb = in / 256;
    kdec k;
    float acc[PG];
    uint8_t buf[256];
    for (int64_t o = o0; o < o1; o++) {
        for (int r0 = 0; r0 < n; r0 += PG) {
            const int nr = n - r0 < PG ? n - r0 : PG;
            for (int r = 0; r < nr; r++) acc[r] = 0;
            for (int64_t b = 0; b < nb; b++) {
                deck(wtype, block_of(wtype, W, row_bytes, P, in, o, b, bb, buf), &k);
                for (int r = 0; r < nr; r++) {
                    const char *row = act + (size_t)(r0 + r) * stride;
                    const int8_t *xq = sdn_act_q(row) + 256 * b;
                    const int16_t *bs = sdn_act_bsum(row, in) + 16 * b;
                    const float dx = sdn_act_d(row, in)[b];
                    int isum = 0;
                    if (wtype == SDN_TYPE_Q6_K) {
                        for (int j = 0; j < 16; j++) {
                            int dot = 0;
                            for (int i = 0; i < 16; i++) dot += k.L[16 * j + i] * xq[16 * j + i];
                            isum += k.sc[j] * (dot - 32 * bs[j]);
                        }
                        acc[r] += (float)isum * (k.d * dx);
                    } else {
                        int summ = 0;
                        for (int j = 0; j < 8; j++) {
                            int dot = 0;
                            for (int i = 0; i < 32; i++) dot += k.L[32 * j + i] * xq[32 * j + i];
                            isum += k.sc[j] * dot;
                            summ += k.m[j] * (bs[2 * j] + bs[2 * j + 1]);
                        }
                        acc[r] += (float)isum * (k.d * dx);
                        acc[r] -= (float)summ * (k.dmin * dx);
                    }
                }
            }
            for (int r = 0; r < nr; r++) Y[(size_t)(r0 + r) * ldy + o] = acc[r];
        }
    }
}

void sdn_matmul_rows_portable(uint32_t wtype, const void *W, size_t row_bytes, int64_t in, const void *act, int n,
                              float *Y, int64_t ldy, int64_t o0, int64_t o1) {
    const size_t stride = sdn_act_row_stride(wtype, in);
    if (!stride || n <= 0 || o1 <= o0) return;
    switch (sdn_act_family(wtype)) {
    case SDN_ACT_F32: port_float(wtype, W, row_bytes, in, act, stride, n, Y, ldy, o0, o1); break;
    case SDN_ACT_Q32: port_q32(wtype, W, row_bytes, NULL, in, act, stride, n, Y, ldy, o0, o1); break;
    case SDN_ACT_QK: port_k(wtype, W, row_bytes, NULL, in, act, stride, n, Y, ldy, o0, o1); break;
    default: break;
    }
}

void sdn_matmul_rows_packed_portable(uint32_t wtype, const void *P, int64_t in, const void *act, int n, float *Y,
                                     int64_t ldy, int64_t o0, int64_t o1) {
    const size_t stride = sdn_act_row_stride(wtype, in);
    if (!sdn_matmul_packed_bytes(wtype, in, o1) || !stride || n <= 0 || o1 <= o0) return;
    if (sdn_act_family(wtype) == SDN_ACT_Q32) port_q32(wtype, NULL, 0, P, in, act, stride, n, Y, ldy, o0, o1);
    else port_k(wtype, NULL, 0, P, in, act, stride, n, Y, ldy, o0, o1);
}
