/* gguf_write.c - streaming GGUF writer (version 3, see gguf.h). Metadata and tensor infos
 * are collected in memory; tensor data is requested from a callback one tensor at a time
 * while the file is written, then the temp file is renamed into place so a failed write
 * never leaves a half-written model under the final name. */
#include "modelfile/gguf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/sdn_str.h"
#include "modelfile/tensor_types.h"

typedef struct wkv {
    char *key;
    uint32_t type;
    uint8_t *val; /* serialized value bytes (type-specific payload, after the type id) */
    size_t len;
} wkv;

typedef struct wtensor {
    char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[SDN_GGUF_MAX_DIMS];
    size_t nbytes;
} wtensor;

struct sdn_gguf_writer {
    wkv *kv;
    int n_kv, cap_kv;
    wtensor *t;
    int n_t, cap_t;
};

sdn_gguf_writer *sdn_gguf_writer_new(void) { return calloc(1, sizeof(sdn_gguf_writer)); }

void sdn_gguf_writer_free(sdn_gguf_writer *w) {
    if (!w) return;
    for (int i = 0; i < w->n_kv; i++) { free(w->kv[i].key); free(w->kv[i].val); }
    for (int i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

/* metadata values and the header are bytes in a growable string (common/sdn_str.h) */
typedef sdn_str buf;
static void put(buf *b, const void *d, size_t n) { sdn_str_addn(b, d, n); }
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s, size_t n) { put_u64(b, n); put(b, s, n); }

static int set_kv(sdn_gguf_writer *w, const char *key, uint32_t type, buf *b) {
    if (b->oom) { free(b->p); return SDN_ENOMEM; }
    for (int i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) {
            free(w->kv[i].val);
            w->kv[i].type = type;
            w->kv[i].val = (uint8_t *)b->p;
            w->kv[i].len = b->n;
            return SDN_OK;
        }
    if (w->n_kv == w->cap_kv) {
        int c = w->cap_kv ? w->cap_kv * 2 : 32;
        wkv *nk = realloc(w->kv, (size_t)c * sizeof *nk);
        if (!nk) { free(b->p); return SDN_ENOMEM; }
        w->kv = nk;
        w->cap_kv = c;
    }
    w->kv[w->n_kv] = (wkv){strdup(key), type, (uint8_t *)b->p, b->n};
    w->n_kv++;
    return SDN_OK;
}

int sdn_gguf_w_u32(sdn_gguf_writer *w, const char *key, uint32_t v) { buf b = {0}; put_u32(&b, v); return set_kv(w, key, SDN_GGUF_UINT32, &b); }
int sdn_gguf_w_i32(sdn_gguf_writer *w, const char *key, int32_t v) { buf b = {0}; put(&b, &v, 4); return set_kv(w, key, SDN_GGUF_INT32, &b); }
int sdn_gguf_w_u64(sdn_gguf_writer *w, const char *key, uint64_t v) { buf b = {0}; put_u64(&b, v); return set_kv(w, key, SDN_GGUF_UINT64, &b); }
int sdn_gguf_w_f32(sdn_gguf_writer *w, const char *key, float v) { buf b = {0}; put(&b, &v, 4); return set_kv(w, key, SDN_GGUF_FLOAT32, &b); }
int sdn_gguf_w_bool(sdn_gguf_writer *w, const char *key, int v) { buf b = {0}; uint8_t x = v != 0; put(&b, &x, 1); return set_kv(w, key, SDN_GGUF_BOOL, &b); }
int sdn_gguf_w_str(sdn_gguf_writer *w, const char *key, const char *v) { buf b = {0}; put_str(&b, v, strlen(v)); return set_kv(w, key, SDN_GGUF_STRING, &b); }

int sdn_gguf_w_arr_str(sdn_gguf_writer *w, const char *key, const char *const *v, const size_t *lens, uint64_t n) {
    buf b = {0};
    put_u32(&b, SDN_GGUF_STRING);
    put_u64(&b, n);
    for (uint64_t i = 0; i < n; i++) put_str(&b, v[i], lens ? lens[i] : strlen(v[i]));
    return set_kv(w, key, SDN_GGUF_ARRAY, &b);
}
int sdn_gguf_w_arr_f32(sdn_gguf_writer *w, const char *key, const float *v, uint64_t n) {
    buf b = {0};
    put_u32(&b, SDN_GGUF_FLOAT32);
    put_u64(&b, n);
    put(&b, v, n * 4);
    return set_kv(w, key, SDN_GGUF_ARRAY, &b);
}
int sdn_gguf_w_arr_i32(sdn_gguf_writer *w, const char *key, const int32_t *v, uint64_t n) {
    buf b = {0};
    put_u32(&b, SDN_GGUF_INT32);
    put_u64(&b, n);
    put(&b, v, n * 4);
    return set_kv(w, key, SDN_GGUF_ARRAY, &b);
}

int sdn_gguf_w_copy_kv(sdn_gguf_writer *w, const sdn_gguf *src, int i) {
    const char *key = sdn_gguf_kv_key(src, i);
    sdn_gguf_vtype t = sdn_gguf_kv_type(src, i);
    buf b = {0};
    if (t == SDN_GGUF_STRING) {
        const char *s = sdn_gguf_str_or_null(src, key);
        put_str(&b, s, strlen(s));
    } else if (t == SDN_GGUF_ARRAY) {
        sdn_gguf_vtype et;
        uint64_t n;
        sdn_gguf_arr_info(src, i, &et, &n);
        put_u32(&b, et);
        put_u64(&b, n);
        if (et == SDN_GGUF_STRING) {
            for (uint64_t j = 0; j < n; j++) {
                size_t l;
                const char *s = sdn_gguf_arr_str(src, i, j, &l);
                put_str(&b, s, l);
            }
        } else if (sdn_gguf_vtype_size(et)) {
            put(&b, sdn_gguf_arr_data(src, i), n * sdn_gguf_vtype_size(et));
        } else {
            free(b.p);
            return SDN_EUNSUP; /* nested arrays are not copied */
        }
    } else {
        /* re-encode scalars from their parsed value */
        double v = 0;
        int64_t iv = 0;
        uint64_t uv = 0;
        switch (t) {
        case SDN_GGUF_FLOAT32: { float f; sdn_gguf_get_f32(src, key, &f, NULL); put(&b, &f, 4); break; }
        case SDN_GGUF_FLOAT64: { float f; sdn_gguf_get_f32(src, key, &f, NULL); v = f; put(&b, &v, 8); break; }
        case SDN_GGUF_BOOL: { int x; sdn_gguf_get_bool_or(src, key, 0, &x, NULL); uint8_t u = (uint8_t)x; put(&b, &u, 1); break; }
        default:
            sdn_gguf_get_i64(src, key, &iv, NULL);
            uv = (uint64_t)iv;
            put(&b, &uv, sdn_gguf_vtype_size(t));
        }
    }
    return set_kv(w, key, t, &b);
}

int sdn_gguf_w_tensor(sdn_gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne) {
    if (n_dims < 1 || n_dims > SDN_GGUF_MAX_DIMS || !sdn_type_block_elems(type)) return -1;
    uint64_t nel = 1;
    for (int d = 0; d < n_dims; d++) {
        if (ne[d] <= 0) return -1;
        nel *= (uint64_t)ne[d];
    }
    if (ne[0] % sdn_type_block_elems(type)) return -1;
    if (w->n_t == w->cap_t) {
        int c = w->cap_t ? w->cap_t * 2 : 64;
        wtensor *nt = realloc(w->t, (size_t)c * sizeof *nt);
        if (!nt) return -1;
        w->t = nt;
        w->cap_t = c;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) return -1;
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < SDN_GGUF_MAX_DIMS; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->nbytes = sdn_type_row_bytes(type, (int64_t)nel); /* the reader's size: whole blocks, ne[0] a multiple */
    return w->n_t++;
}

#define ALIGN SDN_GGUF_DEFAULT_ALIGNMENT
static size_t align_up(size_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }

int sdn_gguf_writer_write(sdn_gguf_writer *w, const char *path, sdn_gguf_fill_fn fill, void *ctx, sdn_err *err) {
    buf h = {0};
    put(&h, "GGUF", 4);
    put_u32(&h, 3);
    put_u64(&h, (uint64_t)w->n_t);
    put_u64(&h, (uint64_t)w->n_kv);
    for (int i = 0; i < w->n_kv; i++) {
        put_str(&h, w->kv[i].key, strlen(w->kv[i].key));
        put_u32(&h, w->kv[i].type);
        put(&h, w->kv[i].val, w->kv[i].len);
    }
    size_t off = 0, maxbytes = 0;
    for (int i = 0; i < w->n_t; i++) {
        wtensor *t = &w->t[i];
        put_str(&h, t->name, strlen(t->name));
        put_u32(&h, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) put_u64(&h, (uint64_t)t->ne[d]);
        put_u32(&h, t->type);
        put_u64(&h, off);
        off = align_up(off + t->nbytes);
        if (t->nbytes > maxbytes) maxbytes = t->nbytes;
    }
    if (h.oom) { free(h.p); return sdn_fail(err, SDN_ENOMEM, "%s: out of memory building the header", path); }
    size_t tmplen = strlen(path) + 16;
    char *tmp = malloc(tmplen);
    if (!tmp) {
        free(h.p);
        return sdn_fail(err, SDN_ENOMEM, "%s: out of memory", path);
    }
    snprintf(tmp, tmplen, "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int rc = sdn_fail(err, SDN_EIO, "%s: cannot create: %s", tmp, strerror(errno));
        free(h.p); free(tmp);
        return rc;
    }
    static const uint8_t zeros[ALIGN];
    int rc = SDN_OK;
    uint8_t *data = maxbytes ? malloc(maxbytes) : NULL;
    if (maxbytes && !data) rc = sdn_fail(err, SDN_ENOMEM, "%s: out of memory", path);
    if (!rc && fwrite(h.p, 1, h.n, f) != h.n) rc = sdn_fail(err, SDN_EIO, "%s: write failed", tmp);
    if (!rc && align_up(h.n) > h.n && fwrite(zeros, 1, align_up(h.n) - h.n, f) != align_up(h.n) - h.n)
        rc = sdn_fail(err, SDN_EIO, "%s: write failed", tmp);
    for (int i = 0; !rc && i < w->n_t; i++) {
        wtensor *t = &w->t[i];
        memset(data, 0, t->nbytes);
        rc = fill(ctx, i, t->name, data, t->nbytes, err);
        if (rc) break;
        if (fwrite(data, 1, t->nbytes, f) != t->nbytes) { rc = sdn_fail(err, SDN_EIO, "%s: write failed", tmp); break; }
        size_t pad = align_up(t->nbytes) - t->nbytes;
        if (i + 1 < w->n_t && pad && fwrite(zeros, 1, pad, f) != pad) rc = sdn_fail(err, SDN_EIO, "%s: write failed", tmp);
    }
    free(data);
    free(h.p);
    if (fclose(f) != 0 && !rc) rc = sdn_fail(err, SDN_EIO, "%s: write failed: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, path) != 0) rc = sdn_fail(err, SDN_EIO, "%s: cannot rename into place: %s", path, strerror(errno));
    if (rc) unlink(tmp);
    free(tmp);
    return rc;
}
