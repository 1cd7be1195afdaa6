/* kv_cache.c - KV cache storage: types, sizes, the tiled layout, and writing rows into it
 * (see kv_cache.h for the layout). */
#include "attention/kv_cache.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/sdn_util.h"
#include "attention/attention_kern.h"
#include "kernels/kernel_path.h"

struct sdn_kv {
    sdn_kv_type tk, tv;
    int n_layers, n_kvh, hd, hd4, kblocks, n_tiles, n_pos; /* n_pos = n_tiles * SDN_KV_TILE */
    size_t k_tile_bytes, v_row_bytes;
    size_t k_layer_bytes, v_layer_bytes; /* per layer: all heads */
    uint8_t *k, *v;                      /* [layer][head][tile] / [layer][head][slot] */
    uint16_t *k_scale, *v_scale;         /* q8: [layer][head][tile][block][64] and [layer][head][slot] */
};

static const char *kv_names[SDN_KV_TYPE_COUNT] = {"auto", "f16", "f32", "q8", "bf16"};

const char *sdn_kv_type_name(sdn_kv_type t) { return t >= 0 && t < SDN_KV_TYPE_COUNT ? kv_names[t] : "?"; }

static pthread_mutex_t def_mu = PTHREAD_MUTEX_INITIALIZER;
static sdn_kv_type def_k = SDN_KV_DEFAULT, def_v = SDN_KV_DEFAULT;

void sdn_kv_set_default(sdn_kv_type k, sdn_kv_type v) {
    pthread_mutex_lock(&def_mu);
    if (k >= SDN_KV_FIRST && k < SDN_KV_TYPE_COUNT) def_k = k;
    if (v >= SDN_KV_FIRST && v < SDN_KV_TYPE_COUNT) def_v = v;
    pthread_mutex_unlock(&def_mu);
}

sdn_kv_type sdn_kv_resolve(sdn_kv_type t, int is_key) {
    if (t != SDN_KV_AUTO) return t;
    pthread_mutex_lock(&def_mu);
    sdn_kv_type r = is_key ? def_k : def_v;
    pthread_mutex_unlock(&def_mu);
    return r;
}

int sdn_kv_type_parse(const char *s, const char *what, sdn_kv_type *out, sdn_err *err) {
    for (int i = SDN_KV_FIRST; s && i < SDN_KV_TYPE_COUNT; i++)
        if (!strcmp(s, kv_names[i])) {
            *out = (sdn_kv_type)i;
            return SDN_OK;
        }
    if (s && !strcmp(s, "q8_0")) {
        *out = SDN_KV_Q8;
        return SDN_OK;
    }
    return sdn_fail(err, SDN_EINVAL, "%s: cache type '%s' is not one of f16, f32, q8, bf16", what ? what : "cache type", s ? s : "(null)");
}

static size_t elem_row_bytes(sdn_kv_type t, int hd, int is_key) {
    switch (t) {
    case SDN_KV_F32: return (size_t)hd * 4;
    case SDN_KV_F16: return (size_t)hd * 2;
    case SDN_KV_BF16: return (size_t)(is_key ? (hd + 1) / 2 * 2 : hd) * 2;
    default: { /* bytes + the F16 scales */
        const size_t hd4 = (size_t)(hd + SDN_KV_KBLOCK - 1) / SDN_KV_KBLOCK * SDN_KV_KBLOCK;
        return is_key ? hd4 + 2 * (hd4 / SDN_KV_KBLOCK) : (size_t)hd + 2;
    }
    }
}

size_t sdn_kv_row_bytes(sdn_kv_type t, int n_kv_heads, int head_dim) {
    return (size_t)n_kv_heads * elem_row_bytes(t, head_dim, 1);
}

size_t sdn_kv_cache_bytes(const sdn_model_config *cfg, sdn_kv_type tk, sdn_kv_type tv, int n_ctx) {
    size_t pos = (size_t)(n_ctx + SDN_KV_TILE - 1) / SDN_KV_TILE * SDN_KV_TILE;
    return (size_t)cfg->n_layers * pos * (size_t)cfg->n_kv_heads *
           (elem_row_bytes(tk, cfg->head_dim, 1) + elem_row_bytes(tv, cfg->head_dim, 0));
}

/* Zero-filled memory from the system (anonymous pages: resident only once written, so a
 * large context costs memory as it fills, not when it is made). */
static void *zalloc(size_t n) {
    if (n == 0) return NULL;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void zfree(void *p, size_t n) {
    if (p) munmap(p, n);
}

int sdn_kv_new(const sdn_model_config *cfg, sdn_kv_type tk, sdn_kv_type tv, int n_ctx, sdn_kv **out, sdn_err *err) {
    *out = NULL;
    tk = sdn_kv_resolve(tk, 1);
    tv = sdn_kv_resolve(tv, 0);
    if (tk < SDN_KV_FIRST || tk >= SDN_KV_TYPE_COUNT || tv < SDN_KV_FIRST || tv >= SDN_KV_TYPE_COUNT)
        return sdn_fail(err, SDN_EINVAL, "KV cache type %d / %d out of range", (int)tk, (int)tv);
    sdn_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return sdn_fail(err, SDN_ENOMEM, "out of memory (KV cache)");
    kv->tk = tk;
    kv->tv = tv;
    kv->n_layers = cfg->n_layers;
    kv->n_kvh = cfg->n_kv_heads;
    kv->hd = cfg->head_dim;
    kv->hd4 = (cfg->head_dim + SDN_KV_KBLOCK - 1) / SDN_KV_KBLOCK * SDN_KV_KBLOCK;
    kv->kblocks = kv->hd4 / SDN_KV_KBLOCK;
    kv->n_tiles = (n_ctx + SDN_KV_TILE - 1) / SDN_KV_TILE;
    kv->n_pos = kv->n_tiles * SDN_KV_TILE;
    size_t kel = tk == SDN_KV_F32 ? 4 : tk == SDN_KV_Q8 ? 1 : 2, vel = tv == SDN_KV_F32 ? 4 : tv == SDN_KV_Q8 ? 1 : 2;
    const int kd = tk == SDN_KV_Q8 ? kv->hd4 : tk == SDN_KV_BF16 ? (kv->hd + 1) / 2 * 2 : kv->hd; /* padded */
    kv->k_tile_bytes = (size_t)kd * SDN_KV_TILE * kel;
    kv->v_row_bytes = (size_t)kv->hd * vel;
    kv->k_layer_bytes = kv->k_tile_bytes * kv->n_tiles * kv->n_kvh;
    kv->v_layer_bytes = kv->v_row_bytes * kv->n_pos * kv->n_kvh;
    size_t scales = (size_t)kv->n_layers * kv->n_kvh * kv->n_pos * sizeof(uint16_t);
    kv->k = zalloc(kv->k_layer_bytes * kv->n_layers);
    kv->v = zalloc(kv->v_layer_bytes * kv->n_layers);
    if (tk == SDN_KV_Q8) kv->k_scale = zalloc(scales * kv->kblocks);
    if (tv == SDN_KV_Q8) kv->v_scale = zalloc(scales);
    if (!kv->k || !kv->v || (tk == SDN_KV_Q8 && !kv->k_scale) || (tv == SDN_KV_Q8 && !kv->v_scale)) {
        size_t need = sdn_kv_cache_bytes(cfg, tk, tv, n_ctx);
        sdn_kv_free(kv);
        return sdn_fail(err, SDN_ENOMEM, "out of memory allocating the KV cache (%zu MiB for %d positions, keys %s, values %s)", need >> 20,
                        n_ctx, sdn_kv_type_name(tk), sdn_kv_type_name(tv));
    }
    *out = kv;
    return SDN_OK;
}

void sdn_kv_free(sdn_kv *kv) {
    if (!kv) return;
    const size_t scales = (size_t)kv->n_layers * kv->n_kvh * kv->n_pos * sizeof(uint16_t);
    zfree(kv->k, kv->k_layer_bytes * kv->n_layers);
    zfree(kv->v, kv->v_layer_bytes * kv->n_layers);
    zfree(kv->k_scale, scales * kv->kblocks);
    zfree(kv->v_scale, scales);
    free(kv);
}

sdn_kv_type sdn_kv_type_k(const sdn_kv *kv) { return kv->tk; }
sdn_kv_type sdn_kv_type_v(const sdn_kv *kv) { return kv->tv; }

uint16_t sdn_kv_f16(float x) {
    if (x > 65504.0f) x = 65504.0f;
    else if (x < -65504.0f) x = -65504.0f;
    return sdn_fp32_to_fp16(x);
}

/* Symmetric 8-bit quantization of one row (kv_cache.h); *dh gets the scale's F16 bits. */
static void q8_row(const float *x, int n, int8_t *q, uint16_t *dh) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > amax) amax = a; /* a NaN never wins: the scale stays finite */
    }
    *dh = sdn_kv_f16(amax / 127.0f);
    float d = sdn_fp16_to_fp32(*dh);
    for (int i = 0; i < n; i++) {
        float r = d > 0.0f ? sdn_kv_round(x[i] / d) : 0.0f; /* |x / d| <= 128 */
        if (!(r >= -127.0f)) r = -127.0f; /* also NaN */
        if (r > 127.0f) r = 127.0f;
        q[i] = (int8_t)r;
    }
}

float sdn_kv_q8_row(const float *x, int n, int8_t *q) {
    uint16_t dh;
    q8_row(x, n, q, &dh);
    return sdn_fp16_to_fp32(dh);
}

/* n values to F16 (sdn_kv_f16): on the x86 SIMD paths with F16C when n is a multiple of 8,
 * on the AArch64 ones with FCVTN when n is a multiple of 4; the same bits. */
static void f16_row(const float *x, uint16_t *h, int n) {
#if defined(__x86_64__)
    if (n % 8 == 0 && sdn_kpath_get() != SDN_KPATH_PORTABLE) {
        sdn_kv_f16_row_avx2(x, h, n);
        return;
    }
#elif defined(__aarch64__)
    if (n % 4 == 0 && sdn_kpath_get() != SDN_KPATH_PORTABLE) {
        sdn_kv_f16_row_neon(x, h, n); /* FCVTN: every AArch64 path has it */
        return;
    }
#endif
    for (int i = 0; i < n; i++) h[i] = sdn_kv_f16(x[i]);
}

void sdn_kv_store(sdn_kv *kv, int l, int slot0, int n, const float *k, const float *v) {
    const int hd = kv->hd, kvd = kv->n_kvh * hd;
    int8_t q[1024];
    uint16_t hk[1024];
    for (int h = 0; h < kv->n_kvh; h++) {
        uint8_t *K = kv->k + (size_t)l * kv->k_layer_bytes + (size_t)h * kv->n_tiles * kv->k_tile_bytes;
        uint8_t *V = kv->v + (size_t)l * kv->v_layer_bytes + (size_t)h * kv->n_pos * kv->v_row_bytes;
        size_t sc = ((size_t)l * kv->n_kvh + h) * kv->n_pos;
        for (int i = 0; i < n; i++) {
            const int s = slot0 + i, lane = s % SDN_KV_TILE;
            const float *kr = k + (size_t)i * kvd + (size_t)h * hd, *vr = v + (size_t)i * kvd + (size_t)h * hd;
            uint8_t *kt = K + (size_t)(s / SDN_KV_TILE) * kv->k_tile_bytes;
            switch (kv->tk) {
            case SDN_KV_F32:
                for (int d = 0; d < hd; d++) ((float *)kt)[(size_t)d * SDN_KV_TILE + lane] = kr[d];
                break;
            case SDN_KV_F16:
                f16_row(kr, hk, hd);
                for (int d = 0; d < hd; d++) ((uint16_t *)kt)[(size_t)d * SDN_KV_TILE + lane] = hk[d];
                break;
            case SDN_KV_BF16: /* [d/2][64][2]; the pad of an odd head dimension stays zero */
                for (int d = 0; d < hd; d++) ((uint16_t *)kt)[((size_t)(d / 2) * SDN_KV_TILE + lane) * 2 + d % 2] = sdn_kv_bf16(kr[d]);
                break;
            default:
                for (int b = 0; b < kv->kblocks; b++) { /* blocks of 32 (the last zero-padded) */
                    const int d0 = b * SDN_KV_KBLOCK, nd = hd - d0 < SDN_KV_KBLOCK ? hd - d0 : SDN_KV_KBLOCK;
                    q8_row(kr + d0, nd, q + d0, &kv->k_scale[(sc / SDN_KV_TILE + s / SDN_KV_TILE) * kv->kblocks * SDN_KV_TILE +
                                                            (size_t)b * SDN_KV_TILE + lane]);
                }
                for (int d = 0; d < kv->hd4; d++)
                    kt[((size_t)(d / 4) * SDN_KV_TILE + lane) * 4 + d % 4] = (uint8_t)((d < hd ? q[d] : 0) + 128);
                break;
            }
            uint8_t *vrow = V + (size_t)s * kv->v_row_bytes;
            switch (kv->tv) {
            case SDN_KV_F32: memcpy(vrow, vr, (size_t)hd * 4); break;
            case SDN_KV_F16: f16_row(vr, (uint16_t *)vrow, hd); break;
            case SDN_KV_BF16:
                for (int d = 0; d < hd; d++) ((uint16_t *)vrow)[d] = sdn_kv_bf16v(vr[d]);
                break;
            default: q8_row(vr, hd, (int8_t *)vrow, &kv->v_scale[sc + s]); break;
            }
        }
    }
}

void sdn_kv_move(sdn_kv *kv, int dst, int src) {
    const int ld = dst % SDN_KV_TILE, ls = src % SDN_KV_TILE;
    const size_t kel = kv->tk == SDN_KV_F32 ? 4 : kv->tk == SDN_KV_F16 ? 2 : 1;
    for (int l = 0; l < kv->n_layers; l++)
        for (int h = 0; h < kv->n_kvh; h++) {
            uint8_t *K = kv->k + (size_t)l * kv->k_layer_bytes + (size_t)h * kv->n_tiles * kv->k_tile_bytes;
            uint8_t *kd = K + (size_t)(dst / SDN_KV_TILE) * kv->k_tile_bytes, *ks = K + (size_t)(src / SDN_KV_TILE) * kv->k_tile_bytes;
            if (kv->tk == SDN_KV_Q8 || kv->tk == SDN_KV_BF16) { /* 4-byte lanes: 4 q8 or 2 bf16 elements */
                const int ng = kv->tk == SDN_KV_Q8 ? kv->hd4 / 4 : (kv->hd + 1) / 2;
                for (int g = 0; g < ng; g++)
                    memcpy(kd + ((size_t)g * SDN_KV_TILE + ld) * 4, ks + ((size_t)g * SDN_KV_TILE + ls) * 4, 4);
            } else {
                for (int d = 0; d < kv->hd; d++)
                    memcpy(kd + ((size_t)d * SDN_KV_TILE + ld) * kel, ks + ((size_t)d * SDN_KV_TILE + ls) * kel, kel);
            }
            uint8_t *V = kv->v + (size_t)l * kv->v_layer_bytes + (size_t)h * kv->n_pos * kv->v_row_bytes;
            memcpy(V + (size_t)dst * kv->v_row_bytes, V + (size_t)src * kv->v_row_bytes, kv->v_row_bytes);
            size_t sc = ((size_t)l * kv->n_kvh + h) * kv->n_pos;
            if (kv->k_scale)
                for (int b = 0; b < kv->kblocks; b++)
                    kv->k_scale[(sc / SDN_KV_TILE + dst / SDN_KV_TILE) * kv->kblocks * SDN_KV_TILE + (size_t)b * SDN_KV_TILE + ld] =
                        kv->k_scale[(sc / SDN_KV_TILE + src / SDN_KV_TILE) * kv->kblocks * SDN_KV_TILE + (size_t)b * SDN_KV_TILE + ls];
            if (kv->v_scale) kv->v_scale[sc + dst] = kv->v_scale[sc + src];
        }
}

void sdn_kv_head_get(const sdn_kv *kv, int l, int h, sdn_kv_head *out) {
    size_t sc = ((size_t)l * kv->n_kvh + h) * kv->n_pos;
    out->tk = kv->tk;
    out->tv = kv->tv;
    out->hd = kv->hd;
    out->hd4 = kv->hd4;
    out->n_tiles = kv->n_tiles;
    out->k = kv->k + (size_t)l * kv->k_layer_bytes + (size_t)h * kv->n_tiles * kv->k_tile_bytes;
    out->k_tile_bytes = kv->k_tile_bytes;
    out->k_scale = kv->k_scale ? kv->k_scale + sc * kv->kblocks : NULL;
    out->kblocks = kv->kblocks;
    out->v = kv->v + (size_t)l * kv->v_layer_bytes + (size_t)h * kv->n_pos * kv->v_row_bytes;
    out->v_row_bytes = kv->v_row_bytes;
    out->v_scale = kv->v_scale ? kv->v_scale + sc : NULL;
}

/* One tile of one layer and head in the tile format: the key tile, its q8 scales, the 64 value
 * rows, their q8 scales, in that order. */
size_t sdn_kv_tile_bytes(const sdn_kv *kv) {
    size_t per = kv->k_tile_bytes + (size_t)SDN_KV_TILE * kv->v_row_bytes;
    if (kv->k_scale) per += (size_t)kv->kblocks * SDN_KV_TILE * sizeof(uint16_t);
    if (kv->v_scale) per += (size_t)SDN_KV_TILE * sizeof(uint16_t);
    return per * (size_t)kv->n_layers * (size_t)kv->n_kvh;
}

/* Walk tile t of every layer and head, copying to (out = 1) or from the buffer. */
static void tile_copy(sdn_kv *kv, int t, uint8_t *buf, int out) {
    const size_t vbytes = (size_t)SDN_KV_TILE * kv->v_row_bytes, ksb = (size_t)kv->kblocks * SDN_KV_TILE * sizeof(uint16_t);
    for (int l = 0; l < kv->n_layers; l++)
        for (int h = 0; h < kv->n_kvh; h++) {
            const size_t sc = ((size_t)l * kv->n_kvh + h) * kv->n_pos;
            uint8_t *parts[4] = {kv->k + (size_t)l * kv->k_layer_bytes + ((size_t)h * kv->n_tiles + t) * kv->k_tile_bytes,
                                 kv->k_scale ? (uint8_t *)(kv->k_scale + (sc / SDN_KV_TILE + t) * kv->kblocks * SDN_KV_TILE) : NULL,
                                 kv->v + (size_t)l * kv->v_layer_bytes + ((size_t)h * kv->n_pos + (size_t)t * SDN_KV_TILE) * kv->v_row_bytes,
                                 kv->v_scale ? (uint8_t *)(kv->v_scale + sc + (size_t)t * SDN_KV_TILE) : NULL};
            const size_t sizes[4] = {kv->k_tile_bytes, ksb, vbytes, SDN_KV_TILE * sizeof(uint16_t)};
            for (int i = 0; i < 4; i++) {
                if (!parts[i]) continue;
                if (out) memcpy(buf, parts[i], sizes[i]);
                else memcpy(parts[i], buf, sizes[i]);
                buf += sizes[i];
            }
        }
}

void sdn_kv_tile_export(const sdn_kv *kv, int t, uint8_t *buf) { tile_copy((sdn_kv *)kv, t, buf, 1); }
void sdn_kv_tile_import(sdn_kv *kv, int t, const uint8_t *buf) { tile_copy(kv, t, (uint8_t *)buf, 0); }
int sdn_kv_n_tiles(const sdn_kv *kv) { return kv->n_tiles; }
