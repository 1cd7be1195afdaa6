/* gguf.c - validating GGUF reader over mmap (see gguf.h for the format summary).
 *
 * Parsing walks the header with a cursor that refuses to read past the end of the image;
 * counts are checked against the bytes that remain (every key/value needs at least 12
 * bytes, every tensor info at least 24), so absurd counts fail before any allocation. */
#include "modelfile/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "modelfile/tensor_types.h"

#include <xxhash.h>

typedef struct kv {
    char *key;
    sdn_gguf_vtype type;
    /* scalars */
    union { uint64_t u; int64_t i; double f; } num;
    char *str;               /* SDN_GGUF_STRING (NUL-terminated copy) */
    /* arrays */
    sdn_gguf_vtype elem;
    uint64_t count;
    const uint8_t *arr;      /* fixed-size elements in the image */
    const char **sptr;       /* string arrays: pointers into the image */
    uint32_t *slen;
} kv;

/* Open-addressing index from names to positions (keys and tensor names), so lookups and
 * duplicate checks stay O(1) even for hostile files with a million entries. */
typedef struct name_index {
    int32_t *slot; /* -1 empty, else position */
    size_t mask;
} name_index;

struct sdn_gguf {
    name_index kidx, tidx;
    char *path;
    const uint8_t *base;
    size_t size;
    int mapped;
    uint32_t version;
    size_t alignment, header_size, data_off;
    int n_kv, n_tensors;
    kv *kvs;
    sdn_gguf_tensor *tensors;
};

typedef struct cur {
    const uint8_t *p, *end, *base;
    const char *path;
    sdn_err *err;
} cur;

static int need(cur *c, size_t n, const char *what) {
    if ((size_t)(c->end - c->p) < n)
        return sdn_fail(c->err, SDN_EFORMAT, "%s: truncated at byte %zu while reading %s", c->path,
                        (size_t)(c->p - c->base), what);
    return SDN_OK;
}
static int rd(cur *c, void *dst, size_t n, const char *what) {
    int rc = need(c, n, what);
    if (rc) return rc;
    memcpy(dst, c->p, n);
    c->p += n;
    return SDN_OK;
}
static int rd_u32(cur *c, uint32_t *v, const char *what) { return rd(c, v, 4, what); }
static int rd_u64(cur *c, uint64_t *v, const char *what) { return rd(c, v, 8, what); }
/* A string: returns pointer into the image and length. */
static int rd_str(cur *c, const char **s, uint64_t *len, const char *what) {
    int rc = rd_u64(c, len, what);
    if (rc) return rc;
    if (*len > (uint64_t)(c->end - c->p))
        return sdn_fail(c->err, SDN_EFORMAT, "%s: %s: string length %llu runs past the end of the file", c->path,
                        what, (unsigned long long)*len);
    *s = (const char *)c->p;
    c->p += *len;
    return SDN_OK;
}
static char *dupn(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) { memcpy(d, s, n); d[n] = 0; }
    return d;
}

static int index_init(name_index *x, size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    x->slot = malloc(cap * sizeof *x->slot);
    if (!x->slot) return -1;
    memset(x->slot, 0xff, cap * sizeof *x->slot);
    x->mask = cap - 1;
    return 0;
}
/* Find `name` (names[] gives the string at each position); if absent and insert_pos >= 0,
 * insert it. Returns the position found, or -1. */
static int index_lookup(const name_index *x, const char *name, const char *(*get)(const sdn_gguf *, int),
                        const sdn_gguf *g, int insert_pos) {
    if (!x->slot) return -1;
    size_t h = (size_t)XXH3_64bits(name, strlen(name)) & x->mask;
    for (;;) {
        int32_t s = x->slot[h];
        if (s < 0) {
            if (insert_pos >= 0) x->slot[h] = insert_pos;
            return -1;
        }
        if (!strcmp(get(g, s), name)) return s;
        h = (h + 1) & x->mask;
    }
}
static const char *key_at(const sdn_gguf *g, int i) { return g->kvs[i].key; }
static const char *tname_at(const sdn_gguf *g, int i) { return g->tensors[i].name; }

size_t sdn_gguf_vtype_size(uint32_t t) {
    switch (t) {
    case SDN_GGUF_UINT8: case SDN_GGUF_INT8: case SDN_GGUF_BOOL: return 1;
    case SDN_GGUF_UINT16: case SDN_GGUF_INT16: return 2;
    case SDN_GGUF_UINT32: case SDN_GGUF_INT32: case SDN_GGUF_FLOAT32: return 4;
    case SDN_GGUF_UINT64: case SDN_GGUF_INT64: case SDN_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

static double num_at(uint32_t t, const uint8_t *p) {
    switch (t) {
    case SDN_GGUF_UINT8: case SDN_GGUF_BOOL: return *p;
    case SDN_GGUF_INT8: return (int8_t)*p;
    case SDN_GGUF_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case SDN_GGUF_INT16: { int16_t v; memcpy(&v, p, 2); return v; }
    case SDN_GGUF_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case SDN_GGUF_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case SDN_GGUF_FLOAT32: { float v; memcpy(&v, p, 4); return v; }
    case SDN_GGUF_UINT64: { uint64_t v; memcpy(&v, p, 8); return (double)v; }
    case SDN_GGUF_INT64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case SDN_GGUF_FLOAT64: { double v; memcpy(&v, p, 8); return v; }
    default: return 0;
    }
}

/* Skip a value of type t (used for nested arrays, whose contents sdnpu never needs). */
static int skip_value(cur *c, uint32_t t, int depth, const char *key) {
    if (depth > 4) return sdn_fail(c->err, SDN_EFORMAT, "%s: key '%s': arrays nested too deeply", c->path, key);
    size_t sz = sdn_gguf_vtype_size(t);
    if (sz) return need(c, sz, key) ? SDN_EFORMAT : (c->p += sz, SDN_OK);
    if (t == SDN_GGUF_STRING) { const char *s; uint64_t n; return rd_str(c, &s, &n, key); }
    if (t == SDN_GGUF_ARRAY) {
        uint32_t et; uint64_t n;
        if (rd_u32(c, &et, key) || rd_u64(c, &n, key)) return SDN_EFORMAT;
        size_t esz = sdn_gguf_vtype_size(et);
        if (esz) {
            if (n > (uint64_t)(c->end - c->p) / esz)
                return sdn_fail(c->err, SDN_EFORMAT, "%s: key '%s': array of %llu elements runs past the end of the file",
                                c->path, key, (unsigned long long)n);
            c->p += n * esz;
            return SDN_OK;
        }
        if (et != SDN_GGUF_STRING && et != SDN_GGUF_ARRAY)
            return sdn_fail(c->err, SDN_EFORMAT, "%s: key '%s': unknown array element type %u", c->path, key, et);
        if (n > (uint64_t)(c->end - c->p) / 8)
            return sdn_fail(c->err, SDN_EFORMAT, "%s: key '%s': array count %llu is larger than the file allows", c->path,
                            key, (unsigned long long)n);
        for (uint64_t j = 0; j < n; j++)
            if (skip_value(c, et, depth + 1, key)) return SDN_EFORMAT;
        return SDN_OK;
    }
    return sdn_fail(c->err, SDN_EFORMAT, "%s: key '%s': unknown value type %u", c->path, key, t);
}

static int parse_kv(cur *c, kv *k) {
    const char *ks = NULL; uint64_t kl = 0;
    if (rd_str(c, &ks, &kl, "metadata key")) return SDN_EFORMAT;
    if (kl > 65535) return sdn_fail(c->err, SDN_EFORMAT, "%s: metadata key of %llu bytes is absurd", c->path, (unsigned long long)kl);
    k->key = dupn(ks, kl);
    if (!k->key) return sdn_fail(c->err, SDN_ENOMEM, "%s: out of memory", c->path);
    uint32_t t;
    if (rd_u32(c, &t, k->key)) return SDN_EFORMAT;
    k->type = (sdn_gguf_vtype)t;
    size_t sz = sdn_gguf_vtype_size(t);
    if (sz) {
        if (need(c, sz, k->key)) return SDN_EFORMAT;
        if (t == SDN_GGUF_FLOAT32 || t == SDN_GGUF_FLOAT64) k->num.f = num_at(t, c->p);
        else if (t == SDN_GGUF_UINT64) memcpy(&k->num.u, c->p, 8);
        else if (t == SDN_GGUF_INT64) memcpy(&k->num.i, c->p, 8);
        else {
            double v = num_at(t, c->p);
            if (v < 0) k->num.i = (int64_t)v; else k->num.u = (uint64_t)v;
        }
        c->p += sz;
        return SDN_OK;
    }
    if (t == SDN_GGUF_STRING) {
        const char *s; uint64_t n;
        if (rd_str(c, &s, &n, k->key)) return SDN_EFORMAT;
        if (!(k->str = dupn(s, n))) return sdn_fail(c->err, SDN_ENOMEM, "%s: out of memory", c->path);
        return SDN_OK;
    }
    if (t != SDN_GGUF_ARRAY) return sdn_fail(c->err, SDN_EFORMAT, "%s: key '%s': unknown value type %u", c->path, k->key, t);
    uint32_t et;
    if (rd_u32(c, &et, k->key) || rd_u64(c, &k->count, k->key)) return SDN_EFORMAT;
    k->elem = (sdn_gguf_vtype)et;
    size_t esz = sdn_gguf_vtype_size(et);
    if (esz) {
        if (k->count > (uint64_t)(c->end - c->p) / esz)
            return sdn_fail(c->err, SDN_EFORMAT, "%s: key '%s': array of %llu elements runs past the end of the file",
                            c->path, k->key, (unsigned long long)k->count);
        k->arr = c->p;
        c->p += k->count * esz;
        return SDN_OK;
    }
    if (et == SDN_GGUF_STRING) {
        if (k->count > (uint64_t)(c->end - c->p) / 8)
            return sdn_fail(c->err, SDN_EFORMAT, "%s: key '%s': string array count %llu is larger than the file allows",
                            c->path, k->key, (unsigned long long)k->count);
        k->sptr = malloc((k->count ? k->count : 1) * sizeof *k->sptr);
        k->slen = malloc((k->count ? k->count : 1) * sizeof *k->slen);
        if (!k->sptr || !k->slen) return sdn_fail(c->err, SDN_ENOMEM, "%s: out of memory", c->path);
        for (uint64_t j = 0; j < k->count; j++) {
            uint64_t n;
            if (rd_str(c, &k->sptr[j], &n, k->key)) return SDN_EFORMAT;
            if (n > UINT32_MAX) return sdn_fail(c->err, SDN_EFORMAT, "%s: key '%s': element %llu too long", c->path, k->key, (unsigned long long)j);
            k->slen[j] = (uint32_t)n;
        }
        return SDN_OK;
    }
    if (et == SDN_GGUF_ARRAY) {
        const uint8_t *start = c->p;
        if (k->count > (uint64_t)(c->end - c->p) / 12)
            return sdn_fail(c->err, SDN_EFORMAT, "%s: key '%s': nested array count %llu is larger than the file allows",
                            c->path, k->key, (unsigned long long)k->count);
        for (uint64_t j = 0; j < k->count; j++)
            if (skip_value(c, SDN_GGUF_ARRAY, 1, k->key)) return SDN_EFORMAT;
        (void)start;
        return SDN_OK;
    }
    return sdn_fail(c->err, SDN_EFORMAT, "%s: key '%s': unknown array element type %u", c->path, k->key, et);
}

static int parse(sdn_gguf *g, sdn_err *err) {
    cur c = {g->base, g->base + g->size, g->base, g->path, err};
    uint32_t magic;
    if (g->size < 4 || memcmp(g->base, "GGUF", 4) != 0)
        return sdn_fail(err, SDN_EFORMAT, "%s: not a GGUF file (bad magic)", g->path);
    if (rd_u32(&c, &magic, "magic") || rd_u32(&c, &g->version, "version")) return SDN_EFORMAT;
    if (g->version == 1) return sdn_fail(err, SDN_EUNSUP, "%s: GGUF version 1 is not supported (use version 2 or 3)", g->path);
    if (g->version < 2 || g->version > 3)
        return sdn_fail(err, SDN_EUNSUP, "%s: GGUF version %u is not supported (2 and 3 are)", g->path, g->version);
    uint64_t nt, nkv;
    if (rd_u64(&c, &nt, "tensor count") || rd_u64(&c, &nkv, "metadata count")) return SDN_EFORMAT;
    size_t rem = (size_t)(c.end - c.p);
    if (nkv > rem / 12 || nkv > 1000000)
        return sdn_fail(err, SDN_EFORMAT, "%s: metadata count %llu is absurd for a file of %zu bytes", g->path, (unsigned long long)nkv, g->size);
    if (nt > rem / 24 || nt > 1000000)
        return sdn_fail(err, SDN_EFORMAT, "%s: tensor count %llu is absurd for a file of %zu bytes", g->path, (unsigned long long)nt, g->size);
    g->kvs = calloc(nkv ? nkv : 1, sizeof *g->kvs);
    g->tensors = calloc(nt ? nt : 1, sizeof *g->tensors);
    if (!g->kvs || !g->tensors || index_init(&g->kidx, nkv) || index_init(&g->tidx, nt))
        return sdn_fail(err, SDN_ENOMEM, "%s: out of memory", g->path);
    for (uint64_t i = 0; i < nkv; i++) {
        g->n_kv = (int)i + 1;
        if (parse_kv(&c, &g->kvs[i])) return SDN_EFORMAT;
        if (index_lookup(&g->kidx, g->kvs[i].key, key_at, g, (int)i) >= 0)
            return sdn_fail(err, SDN_EFORMAT, "%s: metadata key '%s' appears twice", g->path, g->kvs[i].key);
    }
    g->alignment = SDN_GGUF_DEFAULT_ALIGNMENT;
    int ai = sdn_gguf_find(g, "general.alignment");
    if (ai >= 0) {
        const kv *k = &g->kvs[ai];
        if (k->type != SDN_GGUF_UINT32 || k->num.u == 0 || (k->num.u & (k->num.u - 1)) || k->num.u > 65536)
            return sdn_fail(err, SDN_EFORMAT, "%s: general.alignment must be a uint32 power of two (<= 65536)", g->path);
        g->alignment = (size_t)k->num.u;
    }
    for (uint64_t i = 0; i < nt; i++) {
        sdn_gguf_tensor *t = &g->tensors[i];
        g->n_tensors = (int)i + 1;
        const char *ns; uint64_t nl;
        if (rd_str(&c, &ns, &nl, "tensor name")) return SDN_EFORMAT;
        if (nl > 4096) return sdn_fail(err, SDN_EFORMAT, "%s: tensor %llu: name of %llu bytes is absurd", g->path, (unsigned long long)i, (unsigned long long)nl);
        if (!(t->name = dupn(ns, nl))) return sdn_fail(err, SDN_ENOMEM, "%s: out of memory", g->path);
        if (rd_u32(&c, &t->n_dims, t->name)) return SDN_EFORMAT;
        if (t->n_dims == 0 || t->n_dims > SDN_GGUF_MAX_DIMS)
            return sdn_fail(err, SDN_EFORMAT, "%s: tensor '%s': %u dimensions (1..4 allowed)", g->path, t->name, t->n_dims);
        uint64_t nel = 1;
        for (int d = 0; d < SDN_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            uint64_t v;
            if (rd_u64(&c, &v, t->name)) return SDN_EFORMAT;
            if (v == 0 || v > (1ull << 40))
                return sdn_fail(err, SDN_EFORMAT, "%s: tensor '%s': dimension %u is %llu", g->path, t->name, d, (unsigned long long)v);
            if (__builtin_mul_overflow(nel, v, &nel) || nel > (1ull << 42))
                return sdn_fail(err, SDN_EFORMAT, "%s: tensor '%s': element count overflows", g->path, t->name);
            t->ne[d] = (int64_t)v;
        }
        if (rd_u32(&c, &t->type, t->name) || rd_u64(&c, &t->offset, t->name)) return SDN_EFORMAT;
        if (!sdn_type_block_elems(t->type))
            return sdn_fail(err, SDN_EUNSUP, "%s: tensor '%s': tensor type %u is not supported (supported: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K)",
                            g->path, t->name, t->type);
        int be = sdn_type_block_elems(t->type);
        if (t->ne[0] % be)
            return sdn_fail(err, SDN_EFORMAT, "%s: tensor '%s': row length %lld is not a multiple of the %s block size %d",
                            g->path, t->name, (long long)t->ne[0], sdn_type_name(t->type), be);
        t->nbytes = sdn_type_row_bytes(t->type, (int64_t)nel); /* whole blocks: ne[0] is a multiple */
        if (t->offset % g->alignment)
            return sdn_fail(err, SDN_EFORMAT, "%s: tensor '%s': offset %llu is not aligned to %zu", g->path, t->name,
                            (unsigned long long)t->offset, g->alignment);
        if (index_lookup(&g->tidx, t->name, tname_at, g, (int)i) >= 0)
            return sdn_fail(err, SDN_EFORMAT, "%s: tensor '%s' appears twice", g->path, t->name);
    }
    g->header_size = (size_t)(c.p - g->base);
    g->data_off = (g->header_size + g->alignment - 1) / g->alignment * g->alignment;
    if (nt && g->data_off > g->size)
        return sdn_fail(err, SDN_EFORMAT, "%s: truncated before the tensor data section", g->path);
    for (int i = 0; i < g->n_tensors; i++) {
        sdn_gguf_tensor *t = &g->tensors[i];
        uint64_t end;
        if (__builtin_add_overflow(t->offset, (uint64_t)t->nbytes, &end) || end > g->size - g->data_off)
            return sdn_fail(err, SDN_EFORMAT, "%s: tensor '%s': data [%llu, +%zu) out of bounds (data section is %zu bytes; file truncated?)",
                            g->path, t->name, (unsigned long long)t->offset, t->nbytes, g->size - g->data_off);
        t->data = g->base + g->data_off + t->offset;
    }
    return SDN_OK;
}

static int finish_open(sdn_gguf *g, sdn_gguf **out, sdn_err *err) {
    int rc = parse(g, err);
    if (rc) { sdn_gguf_close(g); return rc; }
    *out = g;
    return SDN_OK;
}

int sdn_gguf_open(const char *path, sdn_gguf **out, sdn_err *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return sdn_fail(err, SDN_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return sdn_fail(err, SDN_EIO, "%s: not a regular file", path);
    }
    sdn_gguf *g = calloc(1, sizeof *g);
    if (!g) { close(fd); return sdn_fail(err, SDN_ENOMEM, "out of memory"); }
    g->path = strdup(path);
    if (!g->path) {
        close(fd);
        sdn_gguf_close(g);
        return sdn_fail(err, SDN_ENOMEM, "%s: out of memory", path);
    }
    g->size = (size_t)st.st_size;
    if (g->size == 0) {
        close(fd);
        sdn_gguf_close(g);
        return sdn_fail(err, SDN_EFORMAT, "%s: empty file, not a GGUF model", path);
    }
    void *m = mmap(NULL, g->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        sdn_gguf_close(g);
        return sdn_fail(err, SDN_EIO, "%s: mmap failed: %s", path, strerror(errno));
    }
    g->base = m;
    g->mapped = 1;
    return finish_open(g, out, err);
}

int sdn_gguf_open_memory(const void *data, size_t size, const char *name, sdn_gguf **out, sdn_err *err) {
    *out = NULL;
    sdn_gguf *g = calloc(1, sizeof *g);
    if (!g) return sdn_fail(err, SDN_ENOMEM, "out of memory");
    g->path = strdup(name ? name : "<memory>");
    if (!g->path) {
        free(g);
        return sdn_fail(err, SDN_ENOMEM, "out of memory");
    }
    g->base = data;
    g->size = size;
    return finish_open(g, out, err);
}

void sdn_gguf_close(sdn_gguf *g) {
    if (!g) return;
    for (int i = 0; i < g->n_kv; i++) {
        free(g->kvs[i].key);
        free(g->kvs[i].str);
        free(g->kvs[i].sptr);
        free(g->kvs[i].slen);
    }
    for (int i = 0; i < g->n_tensors; i++) free((void *)g->tensors[i].name);
    free(g->kvs);
    free(g->tensors);
    free(g->kidx.slot);
    free(g->tidx.slot);
    if (g->mapped) munmap((void *)g->base, g->size);
    free(g->path);
    free(g);
}

const char *sdn_gguf_path(const sdn_gguf *g) { return g->path; }
uint32_t sdn_gguf_version(const sdn_gguf *g) { return g->version; }
size_t sdn_gguf_file_size(const sdn_gguf *g) { return g->size; }
const void *sdn_gguf_image(const sdn_gguf *g) { return g->base; }
void sdn_gguf_drop_pages(const sdn_gguf *g, const void *p, size_t n) {
    const uintptr_t b = (uintptr_t)g->base, s = (uintptr_t)p;
    if (!g->mapped || s < b || n > g->size || s - b > g->size - n) return;
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = (s + pg - 1) / pg * pg, e = (s + n) / pg * pg;
    if (e > a) madvise((void *)a, e - a, MADV_DONTNEED);
}
size_t sdn_gguf_header_size(const sdn_gguf *g) { return g->header_size; }
int sdn_gguf_n_kv(const sdn_gguf *g) { return g->n_kv; }
const char *sdn_gguf_kv_key(const sdn_gguf *g, int i) { return g->kvs[i].key; }
sdn_gguf_vtype sdn_gguf_kv_type(const sdn_gguf *g, int i) { return g->kvs[i].type; }

int sdn_gguf_find(const sdn_gguf *g, const char *key) {
    return index_lookup(&g->kidx, key, key_at, g, -1);
}

static int is_int_type(sdn_gguf_vtype t) {
    return t == SDN_GGUF_UINT8 || t == SDN_GGUF_INT8 || t == SDN_GGUF_UINT16 || t == SDN_GGUF_INT16 ||
           t == SDN_GGUF_UINT32 || t == SDN_GGUF_INT32 || t == SDN_GGUF_UINT64 || t == SDN_GGUF_INT64;
}
static int is_signed_neg(const kv *k) {
    return (k->type == SDN_GGUF_INT8 || k->type == SDN_GGUF_INT16 || k->type == SDN_GGUF_INT32 || k->type == SDN_GGUF_INT64) &&
           k->num.i < 0;
}

int sdn_gguf_get_i64(const sdn_gguf *g, const char *key, int64_t *out, sdn_err *err) {
    int i = sdn_gguf_find(g, key);
    if (i < 0) return sdn_fail(err, SDN_EFORMAT, "%s: metadata key '%s' is missing", g->path, key);
    const kv *k = &g->kvs[i];
    if (!is_int_type(k->type)) return sdn_fail(err, SDN_EFORMAT, "%s: metadata key '%s' is not an integer", g->path, key);
    if (!is_signed_neg(k) && k->num.u > (uint64_t)INT64_MAX)
        return sdn_fail(err, SDN_EFORMAT, "%s: metadata key '%s' is out of range", g->path, key);
    *out = k->num.i;
    return SDN_OK;
}
int sdn_gguf_get_u32(const sdn_gguf *g, const char *key, uint32_t *out, sdn_err *err) {
    int64_t v = 0;
    int rc = sdn_gguf_get_i64(g, key, &v, err);
    if (rc) return rc;
    if (v < 0 || v > (int64_t)UINT32_MAX)
        return sdn_fail(err, SDN_EFORMAT, "%s: metadata key '%s' = %lld is out of range", g->path, key, (long long)v);
    *out = (uint32_t)v;
    return SDN_OK;
}
int sdn_gguf_get_u32_or(const sdn_gguf *g, const char *key, uint32_t dflt, uint32_t *out, sdn_err *err) {
    if (sdn_gguf_find(g, key) < 0) { *out = dflt; return SDN_OK; }
    return sdn_gguf_get_u32(g, key, out, err);
}
int sdn_gguf_get_f32(const sdn_gguf *g, const char *key, float *out, sdn_err *err) {
    int i = sdn_gguf_find(g, key);
    if (i < 0) return sdn_fail(err, SDN_EFORMAT, "%s: metadata key '%s' is missing", g->path, key);
    const kv *k = &g->kvs[i];
    if (k->type == SDN_GGUF_FLOAT32 || k->type == SDN_GGUF_FLOAT64) *out = (float)k->num.f;
    else if (is_int_type(k->type)) *out = is_signed_neg(k) ? (float)k->num.i : (float)k->num.u;
    else return sdn_fail(err, SDN_EFORMAT, "%s: metadata key '%s' is not a number", g->path, key);
    return SDN_OK;
}
int sdn_gguf_get_f32_or(const sdn_gguf *g, const char *key, float dflt, float *out, sdn_err *err) {
    if (sdn_gguf_find(g, key) < 0) { *out = dflt; return SDN_OK; }
    return sdn_gguf_get_f32(g, key, out, err);
}
int sdn_gguf_get_bool_or(const sdn_gguf *g, const char *key, int dflt, int *out, sdn_err *err) {
    int i = sdn_gguf_find(g, key);
    if (i < 0) { *out = dflt; return SDN_OK; }
    const kv *k = &g->kvs[i];
    if (k->type != SDN_GGUF_BOOL && !is_int_type(k->type))
        return sdn_fail(err, SDN_EFORMAT, "%s: metadata key '%s' is not a bool", g->path, key);
    *out = k->num.u != 0;
    return SDN_OK;
}
const char *sdn_gguf_str_or_null(const sdn_gguf *g, const char *key) {
    int i = sdn_gguf_find(g, key);
    return (i >= 0 && g->kvs[i].type == SDN_GGUF_STRING) ? g->kvs[i].str : NULL;
}

int sdn_gguf_arr_info(const sdn_gguf *g, int i, sdn_gguf_vtype *elem_type, uint64_t *count) {
    if (i < 0 || i >= g->n_kv || g->kvs[i].type != SDN_GGUF_ARRAY) return SDN_EINVAL;
    if (elem_type) *elem_type = g->kvs[i].elem;
    if (count) *count = g->kvs[i].count;
    return SDN_OK;
}
const void *sdn_gguf_arr_data(const sdn_gguf *g, int i) {
    if (i < 0 || i >= g->n_kv || g->kvs[i].type != SDN_GGUF_ARRAY) return NULL;
    return g->kvs[i].arr;
}
const char *sdn_gguf_arr_str(const sdn_gguf *g, int i, uint64_t j, size_t *len) {
    if (i < 0 || i >= g->n_kv || !g->kvs[i].sptr || j >= g->kvs[i].count) { if (len) *len = 0; return NULL; }
    if (len) *len = g->kvs[i].slen[j];
    return g->kvs[i].sptr[j];
}
double sdn_gguf_arr_num(const sdn_gguf *g, int i, uint64_t j) {
    const kv *k = &g->kvs[i];
    if (!k->arr || j >= k->count) return 0;
    return num_at(k->elem, k->arr + j * sdn_gguf_vtype_size(k->elem));
}

int sdn_gguf_n_tensors(const sdn_gguf *g) { return g->n_tensors; }
const sdn_gguf_tensor *sdn_gguf_tensor_find(const sdn_gguf *g, const char *name) {
    int i = index_lookup(&g->tidx, name, tname_at, g, -1);
    return i >= 0 ? &g->tensors[i] : NULL;
}
