/* layout.c - loading and unloading the G1 (F32) and G2 (owned quantized) weight layouts of
 * layers (see layout.h). */
#include "engine/layout.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "engine/model_internal.h"
#include "engine/quant.h"

#define NMAT 7
static void mats(sdn_layer *y, sdn_weight **ws) {
    ws[0] = &y->wq; ws[1] = &y->wk; ws[2] = &y->wv; ws[3] = &y->wo;
    ws[4] = &y->w_gate; ws[5] = &y->w_up; ws[6] = &y->w_down;
}

static size_t wsize(const sdn_weight *w, sdn_layout which) {
    return which == SDN_LAYOUT_F32 ? (size_t)w->out * (size_t)w->in * sizeof(float) : (size_t)w->out * w->row_bytes;
}

/* Layout memory: 2 MiB-aligned and advised for transparent huge pages, so materializing a
 * layout costs a few page faults per 2 MiB instead of one per 4 KiB (a fresh 16 MiB copy:
 * about 2 ms instead of 7-8 ms, measured while writing graph_sched). */
#define HUGE_ALIGN ((size_t)2 << 20)
static void *layout_alloc(size_t sz) {
    size_t n = (sz + HUGE_ALIGN - 1) / HUGE_ALIGN * HUGE_ALIGN;
    void *p = aligned_alloc(HUGE_ALIGN, n);
#ifdef MADV_HUGEPAGE
    if (p) madvise(p, n, MADV_HUGEPAGE);
#endif
    return p;
}

static int range_ok(const sdn_model *m, int l0, int l1) { return l0 >= 0 && l1 <= m->cfg.n_layers && l0 <= l1; }

int sdn_layout_load(sdn_model *m, int l0, int l1, sdn_layout which, size_t *bytes, sdn_err *err) {
    size_t total = 0;
    if (!range_ok(m, l0, l1)) return sdn_fail(err, SDN_EINVAL, "layout: layer range [%d, %d) invalid", l0, l1);
    for (int l = l0; l < l1; l++) {
        sdn_weight *ws[NMAT];
        mats(&m->layers[l], ws);
        for (int i = 0; i < NMAT; i++) {
            sdn_weight *w = ws[i];
            size_t sz = wsize(w, which);
            if (which == SDN_LAYOUT_F32) {
                if (w->f32) continue;
                float *d = layout_alloc(sz);
                if (!d) return sdn_fail(err, SDN_ENOMEM, "out of memory loading the F32 layout of layer %d (%zu MiB)", l, sz >> 20);
                for (int64_t r = 0; r < w->out; r++)
                    sdn_dequantize_row(w->type, (const char *)w->data + (size_t)r * w->row_bytes, d + r * w->in, w->in);
                __atomic_store_n(&w->f32, d, __ATOMIC_RELEASE);
            } else {
                if (w->q) continue;
                void *d = layout_alloc(sz);
                if (!d) return sdn_fail(err, SDN_ENOMEM, "out of memory loading the quantized layout of layer %d", l);
                memcpy(d, w->data, sz);
                __atomic_store_n(&w->q, d, __ATOMIC_RELEASE);
            }
            total += sz;
        }
    }
    if (bytes) *bytes = total;
    return SDN_OK;
}

void sdn_layout_unload(sdn_model *m, int l0, int l1, sdn_layout which) {
    if (!range_ok(m, l0, l1)) return;
    for (int l = l0; l < l1; l++) {
        sdn_weight *ws[NMAT];
        mats(&m->layers[l], ws);
        for (int i = 0; i < NMAT; i++) {
            if (which == SDN_LAYOUT_F32) { free(ws[i]->f32); ws[i]->f32 = NULL; }
            else { free(ws[i]->q); ws[i]->q = NULL; }
        }
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
