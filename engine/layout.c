/* layout.c - loading and unloading the G1 (F32) and G2 (owned quantized, packed where the
 * type has a packed form) weight layouts of layers, and the packed output matrix (see
 * layout.h). */
#include "engine/layout.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "modelfile/gguf.h"
#include "kernels/matmul.h"
#include "engine/model_internal.h"
#include "kernels/quant.h"

#define NMAT 7
static void mats(sdn_layer *y, sdn_weight **ws) {
    ws[0] = &y->wq; ws[1] = &y->wk; ws[2] = &y->wv; ws[3] = &y->wo;
    ws[4] = &y->w_gate; ws[5] = &y->w_up; ws[6] = &y->w_down;
}

static size_t wsize(const sdn_weight *w, sdn_layout which) {
    if (which == SDN_LAYOUT_F32) return (size_t)w->out * (size_t)w->in * sizeof(float);
    const size_t pb = sdn_matmul_packed_bytes(w->type, w->in, w->out);
    return pb ? pb : (size_t)w->out * w->row_bytes;
}

/* G2 of one matrix into dst: packed (matmul.h) where the type has a packed form, else the
 * file's rows copied. */
int sdn_weight_packed(const sdn_weight *w) { return sdn_matmul_packed_bytes(w->type, w->in, w->out) > 0; }

/* G2 of one matrix into dst. With m (the decode layout): the file mapping's pages of each
 * slice of rows are dropped as soon as the slice is copied, since the kernels no longer read
 * them (the embedding lookup and the other layouts fault back in what they read); slice by
 * slice, so a large matrix (an LM head of 150k rows) is not resident twice at the peak. A
 * slice is a multiple of SDN_PACK_COLS rows, and a packed group takes the bytes of its rows,
 * so slices pack independently to the same bytes. */
static void fill_quant(const sdn_model *m, const sdn_weight *w, void *dst) {
    const int64_t step = 64 * SDN_PACK_COLS;
    for (int64_t r0 = 0; r0 < w->out; r0 += step) {
        const int64_t rows = w->out - r0 < step ? w->out - r0 : step;
        const size_t off = (size_t)r0 * w->row_bytes;
        const char *src = (const char *)w->data + off;
        if (sdn_weight_packed(w)) sdn_matmul_pack(w->type, src, w->row_bytes, w->in, rows, (char *)dst + off);
        else memcpy((char *)dst + off, src, (size_t)rows * w->row_bytes);
        if (m && m->gguf) sdn_gguf_drop_pages(m->gguf, src, (size_t)rows * w->row_bytes);
    }
}

/* Layout memory: 2 MiB-aligned mmap'd chunks advised for transparent huge pages, so
 * materializing a layout costs a few page faults per 2 MiB instead of one per 4 KiB (a
 * fresh 16 MiB copy: about 2 ms instead of 7-8 ms, measured while writing graph_sched).
 *
 * The reserve: freed chunks are kept, up to the model's reserve size, and later loads take
 * them (best fit, split in 2 MiB units) before mapping fresh memory. A fresh huge page is
 * not free: the kernel zeroes it, and on a VM whose host backs guest memory lazily its
 * first touch costs far more (measured here: 14 ms to fault 4.5 MiB of fresh huge pages,
 * 0.6 ms to copy into warm memory). Chunks in the reserve stay resident; callers count
 * them (sdn_layout_reserve_bytes). */
#define HUGE_ALIGN ((size_t)2 << 20)

typedef struct chunk {
    char *p;
    size_t n;
} chunk;

struct sdn_layout_pool {
    pthread_mutex_t mu;
    chunk *free;
    int n_free, cap_free;
    size_t free_bytes, reserve;
};

static pthread_mutex_t pool_create_mu = PTHREAD_MUTEX_INITIALIZER;

static struct sdn_layout_pool *pool_of(sdn_model *m) {
    pthread_mutex_lock(&pool_create_mu);
    if (!m->lpool) {
        struct sdn_layout_pool *p = calloc(1, sizeof *p);
        if (p) pthread_mutex_init(&p->mu, NULL);
        m->lpool = p;
    }
    pthread_mutex_unlock(&pool_create_mu);
    return m->lpool;
}

static size_t chunk_size(size_t sz) { return (sz + HUGE_ALIGN - 1) / HUGE_ALIGN * HUGE_ALIGN; }

/* A fresh chunk of n bytes (a multiple of HUGE_ALIGN) for `used` bytes of data: only the huge
 * pages the data fill are advised for THP, so a chunk's partly used last 2 MiB is backed by
 * 4 KiB pages as they are touched instead of a whole huge page (with a layer of 2.1 MiB, as
 * in SmolLM2, a huge tail page nearly doubled the layout's resident memory). */
static void *map_chunk(size_t n, size_t used) {
    size_t want = n + HUGE_ALIGN;
    char *p = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    char *a = (char *)(((uintptr_t)p + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1));
    size_t head = (size_t)(a - p), tail = want - head - n;
    if (head) munmap(p, head);
    if (tail) munmap(a + n, tail);
#ifdef MADV_HUGEPAGE
    if (used / HUGE_ALIGN) madvise(a, used / HUGE_ALIGN * HUGE_ALIGN, MADV_HUGEPAGE);
#endif
    return a;
}

/* the pool's mutex held */
static int pool_push(struct sdn_layout_pool *pl, char *p, size_t n) {
    if (pl->n_free == pl->cap_free) {
        int cap = pl->cap_free ? 2 * pl->cap_free : 64;
        chunk *f = realloc(pl->free, (size_t)cap * sizeof *f);
        if (!f) return -1;
        pl->free = f;
        pl->cap_free = cap;
    }
    pl->free[pl->n_free++] = (chunk){p, n};
    pl->free_bytes += n;
    return 0;
}

/* release free chunks until the reserve holds at most `keep` bytes (the pool's mutex held) */
static void pool_shrink(struct sdn_layout_pool *pl, size_t keep) {
    while (pl->free_bytes > keep && pl->n_free > 0) {
        chunk *c = &pl->free[pl->n_free - 1];
        size_t excess = pl->free_bytes - keep, cut = excess >= c->n ? c->n : chunk_size(excess);
        if (cut >= c->n) {
            munmap(c->p, c->n);
            pl->free_bytes -= c->n;
            pl->n_free--;
        } else {
            munmap(c->p + (c->n - cut), cut);
            c->n -= cut;
            pl->free_bytes -= cut;
        }
    }
}

static void *layout_alloc(sdn_model *m, size_t sz) {
    size_t n = chunk_size(sz);
    struct sdn_layout_pool *pl = pool_of(m);
    if (pl) {
        pthread_mutex_lock(&pl->mu);
        int best = -1;
        for (int i = 0; i < pl->n_free; i++)
            if (pl->free[i].n >= n && (best < 0 || pl->free[i].n < pl->free[best].n)) best = i;
        if (best >= 0) {
            chunk c = pl->free[best];
            pl->free[best] = pl->free[--pl->n_free];
            pl->free_bytes -= c.n;
            if (c.n > n && pool_push(pl, c.p + n, c.n - n)) munmap(c.p + n, c.n - n);
            pthread_mutex_unlock(&pl->mu);
            return c.p;
        }
        pthread_mutex_unlock(&pl->mu);
    }
    return map_chunk(n, sz);
}

static void layout_free(sdn_model *m, void *p, size_t sz) {
    if (!p) return;
    size_t n = chunk_size(sz);
    struct sdn_layout_pool *pl = pool_of(m);
    if (pl) {
        pthread_mutex_lock(&pl->mu);
        if (pl->free_bytes + n <= pl->reserve && pool_push(pl, p, n) == 0) {
            pthread_mutex_unlock(&pl->mu);
            return;
        }
        size_t keep = pl->reserve > pl->free_bytes ? (pl->reserve - pl->free_bytes) / HUGE_ALIGN * HUGE_ALIGN : 0;
        if (keep > 0 && keep < n && pool_push(pl, p, keep) == 0) {
            pthread_mutex_unlock(&pl->mu);
            munmap((char *)p + keep, n - keep);
            return;
        }
        pthread_mutex_unlock(&pl->mu);
    }
    munmap(p, n);
}

int sdn_layout_set_reserve(sdn_model *m, size_t bytes, int fill, sdn_err *err) {
    struct sdn_layout_pool *pl = pool_of(m);
    if (!pl) return sdn_fail(err, SDN_ENOMEM, "layout reserve: out of memory");
    bytes = bytes / HUGE_ALIGN * HUGE_ALIGN;
    pthread_mutex_lock(&pl->mu);
    pl->reserve = bytes;
    pool_shrink(pl, bytes);
    size_t need = fill && pl->free_bytes < bytes ? bytes - pl->free_bytes : 0;
    pthread_mutex_unlock(&pl->mu);
    if (!need) return SDN_OK;
    char *p = map_chunk(need, need);
    if (!p) return sdn_fail(err, SDN_ENOMEM, "layout reserve: cannot map %zu MiB", need >> 20);
    memset(p, 0, need); /* fault it in now */
    pthread_mutex_lock(&pl->mu);
    int rc = pool_push(pl, p, need);
    pool_shrink(pl, pl->reserve);
    pthread_mutex_unlock(&pl->mu);
    if (rc) {
        munmap(p, need);
        return sdn_fail(err, SDN_ENOMEM, "layout reserve: out of memory");
    }
    return SDN_OK;
}

size_t sdn_layout_reserve_bytes(sdn_model *m) {
    struct sdn_layout_pool *pl = pool_of(m);
    if (!pl) return 0;
    pthread_mutex_lock(&pl->mu);
    size_t b = pl->free_bytes;
    pthread_mutex_unlock(&pl->mu);
    return b;
}

void sdn_layout_release(sdn_model *m) {
    if (m->output.q) {
        layout_free(m, m->output.q, sdn_layout_output_size(m));
        m->output.q = NULL;
    }
    if (!m->layers) return;
    sdn_layout_unload(m, 0, m->cfg.n_layers, SDN_LAYOUT_F32);
    sdn_layout_unload(m, 0, m->cfg.n_layers, SDN_LAYOUT_QUANT);
    struct sdn_layout_pool *pl = m->lpool;
    if (!pl) return;
    pool_shrink(pl, 0);
    free(pl->free);
    pthread_mutex_destroy(&pl->mu);
    free(pl);
    m->lpool = NULL;
}

static int range_ok(const sdn_model *m, int l0, int l1) { return l0 >= 0 && l1 <= m->cfg.n_layers && l0 <= l1; }

/* A layer's layout is one chunk: its seven matrices packed at 4 KiB-aligned offsets (the
 * chunk rounded up to 2 MiB), so a layer wastes less than one huge page. */
#define MAT_ALIGN ((size_t)4096)
static size_t layer_bytes(sdn_layer *y, sdn_layout which, size_t off[NMAT]) {
    sdn_weight *ws[NMAT];
    mats(y, ws);
    size_t t = 0;
    for (int i = 0; i < NMAT; i++) {
        if (off) off[i] = t;
        t += (wsize(ws[i], which) + MAT_ALIGN - 1) / MAT_ALIGN * MAT_ALIGN;
    }
    return t;
}

/* sdn_layout_load; drop: G2 also drops the mapping's pages it copied (fill_quant). */
static int load_layers(sdn_model *m, int l0, int l1, sdn_layout which, int drop, size_t *bytes, sdn_err *err) {
    size_t total = 0;
    if (!range_ok(m, l0, l1)) return sdn_fail(err, SDN_EINVAL, "layout: layer range [%d, %d) invalid", l0, l1);
    for (int l = l0; l < l1; l++) {
        sdn_weight *ws[NMAT];
        mats(&m->layers[l], ws);
        if (which == SDN_LAYOUT_F32 ? ws[0]->f32 != NULL : ws[0]->q != NULL) continue; /* a layer loads whole */
        size_t off[NMAT], n = layer_bytes(&m->layers[l], which, off);
        char *base = layout_alloc(m, n);
        if (!base)
            return sdn_fail(err, SDN_ENOMEM, "out of memory loading the %s layout of layer %d (%zu MiB)",
                            which == SDN_LAYOUT_F32 ? "F32" : "quantized", l, n >> 20);
        for (int i = 0; i < NMAT; i++) {
            sdn_weight *w = ws[i];
            if (which == SDN_LAYOUT_F32) {
                float *d = (float *)(base + off[i]);
                for (int64_t r = 0; r < w->out; r++)
                    sdn_dequantize_row(w->type, (const char *)w->data + (size_t)r * w->row_bytes, d + r * w->in, w->in);
            } else
                fill_quant(drop ? m : NULL, w, base + off[i]);
            total += wsize(w, which);
        }
        /* publish the pointers after the data (other layers may be computing meanwhile) */
        for (int i = 0; i < NMAT; i++) {
            if (which == SDN_LAYOUT_F32) __atomic_store_n(&ws[i]->f32, (float *)(base + off[i]), __ATOMIC_RELEASE);
            else __atomic_store_n(&ws[i]->q, (void *)(base + off[i]), __ATOMIC_RELEASE);
        }
    }
    if (bytes) *bytes = total;
    return SDN_OK;
}

int sdn_layout_load(sdn_model *m, int l0, int l1, sdn_layout which, size_t *bytes, sdn_err *err) {
    return load_layers(m, l0, l1, which, 0, bytes, err);
}

void sdn_layout_unload(sdn_model *m, int l0, int l1, sdn_layout which) {
    if (!range_ok(m, l0, l1)) return;
    for (int l = l0; l < l1; l++) {
        sdn_weight *ws[NMAT];
        mats(&m->layers[l], ws);
        void *base = which == SDN_LAYOUT_F32 ? (void *)ws[0]->f32 : ws[0]->q;
        if (!base) continue;
        for (int i = 0; i < NMAT; i++) {
            if (which == SDN_LAYOUT_F32) ws[i]->f32 = NULL;
            else ws[i]->q = NULL;
        }
        layout_free(m, base, layer_bytes(&m->layers[l], which, NULL));
    }
}

size_t sdn_layout_resident(const sdn_model *m, int l0, int l1, sdn_layout which) {
    size_t t = 0;
    if (!range_ok(m, l0, l1)) return 0;
    for (int l = l0; l < l1; l++) {
        sdn_weight *ws[NMAT];
        mats(&m->layers[l], ws);
        for (int i = 0; i < NMAT; i++)
            if (which == SDN_LAYOUT_F32 ? ws[i]->f32 != NULL : ws[i]->q != NULL) t += wsize(ws[i], which);
    }
    return t;
}

size_t sdn_layout_alloc_size(const sdn_model *m, int l0, int l1, sdn_layout which) {
    size_t t = 0;
    if (!range_ok(m, l0, l1)) return 0;
    for (int l = l0; l < l1; l++) t += chunk_size(layer_bytes(&m->layers[l], which, NULL));
    return t;
}

size_t sdn_layout_size(const sdn_model *m, int l0, int l1, sdn_layout which) {
    size_t t = 0;
    if (!range_ok(m, l0, l1)) return 0;
    for (int l = l0; l < l1; l++) {
        sdn_weight *ws[NMAT];
        mats(&m->layers[l], ws);
        for (int i = 0; i < NMAT; i++) t += wsize(ws[i], which);
    }
    return t;
}

int sdn_layout_is_loaded(const sdn_model *m, int l, sdn_layout which) {
    if (l < 0 || l >= m->cfg.n_layers) return 0;
    sdn_weight *ws[NMAT];
    mats(&m->layers[l], ws);
    for (int i = 0; i < NMAT; i++)
        if (which == SDN_LAYOUT_F32 ? !ws[i]->f32 : !ws[i]->q) return 0;
    return 1;
}

size_t sdn_layout_output_size(const sdn_model *m) {
    const sdn_weight *w = &m->output;
    return w->data ? sdn_matmul_packed_bytes(w->type, w->in, w->out) : 0;
}

int sdn_layout_layer_packed(const sdn_model *m, int l) {
    if (l < 0 || l >= m->cfg.n_layers) return 0;
    sdn_weight *ws[NMAT];
    mats(&m->layers[l], ws);
    for (int i = 0; i < NMAT; i++)
        if (sdn_weight_packed(ws[i])) return 1;
    return 0;
}

static pthread_mutex_t decode_mu = PTHREAD_MUTEX_INITIALIZER;

int sdn_layout_decode_resident(sdn_model *m, size_t *bytes, sdn_err *err) {
    size_t total = 0;
    int rc = SDN_OK;
    pthread_mutex_lock(&decode_mu);
    for (int l = 0; l < m->cfg.n_layers && !rc; l++) {
        if (!sdn_layout_layer_packed(m, l) || sdn_layout_is_loaded(m, l, SDN_LAYOUT_QUANT)) continue;
        size_t b = 0;
        rc = load_layers(m, l, l + 1, SDN_LAYOUT_QUANT, 1, &b, err);
        total += b;
    }
    const size_t ob = sdn_layout_output_size(m);
    if (!rc && ob && !m->output.q) {
        char *p = layout_alloc(m, ob);
        if (!p) rc = sdn_fail(err, SDN_ENOMEM, "out of memory packing the output matrix (%zu MiB)", ob >> 20);
        else {
            fill_quant(m, &m->output, p);
            __atomic_store_n(&m->output.q, (void *)p, __ATOMIC_RELEASE);
            total += ob;
        }
    }
    pthread_mutex_unlock(&decode_mu);
    if (bytes) *bytes = total;
    return rc;
}
