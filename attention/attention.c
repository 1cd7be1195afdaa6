/* attention.c - attention over the KV cache in an order fixed by absolute positions (see
 * attention.h for the algorithm, attention_kern.h for the per-tile arithmetic): the tasks
 * and their split over the thread pool, the walk over super-tiles and tiles, the merge of
 * super-tiles, and the portable kernels (the reference every SIMD path matches bit for bit).
 *
 * A task is one KV head, a range of batch rows (all query heads of that KV head for each)
 * and a range of super-tiles. Prefill batches get one task per (KV head, block of rows)
 * covering all super-tiles, merged as they are computed; decode and verify batches with
 * more than one super-tile get one task per (KV head, super-tile), all rows together (each
 * key tile is read once for all of them), writing per-super-tile partial results that a
 * second pass merges in order. Both give the same bits: the merge is the same arithmetic. */
#include "attention/attention.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/sdn_util.h"
#include "attention/attention_kern.h"
#include "kernels/kernel_path.h"
#include "kernels/matmul_internal.h"

#define TILES_PER_SUPER (SDN_ATT_SUPER / SDN_KV_TILE)
#define PREFILL_QUERIES 48 /* queries of a prefill task: rows x the KV head's query heads (each
                              tile converted once serves them all) */
#define SCRATCH_QUERIES 4  /* more queries than this in a task: a tile's keys and values are
                              converted to floats once for all of them */
/* F16 entries on the avx512 kernels (att_kernels.scratch_f16): they widen F16 keys and values
 * as they read them, once per block of 6 queries
 * (QB_SCORES, QB_PV): the scratch tile's stores and reloads pay only from about 30 queries
 * (bench-attention, f16 cache, 2,048 positions, 1 thread, the settings run in turn twice: 2 rows 273 -> 195-211
 * us a layer without it, 4 rows 360-387 -> 302-304, 16 rows (48 queries) 909-941 with it
 * against 982-1,040 without). */
#define SCRATCH_QUERIES_AVX512 30
/* bf16 values with VDPBF16PS (att_kernels.t2): more queries than this in a task and the tile's
 * rows are transposed in pairs once for all of them (bench-attention, bf16 cache, 4,096
 * positions, 2 threads, the two settings in turn 5 times, medians of us a layer without / with:
 * 2 rows (6 queries) 85.5 / 89.1, 4 rows 134.1 / 150.7, 8 rows 242.1 / 237.9, 16 rows 472.0 /
 * 403.9). */
#define T2_QUERIES 16

/* ------------------------------------------------------------ portable kernels ---- */

void sdn_att_scores_portable(const sdn_att_kt *t, const sdn_att_q *q, int nq, float *sc) {
    for (int i = 0; i < nq; i++) {
        float *s = sc + (size_t)i * 64;
        if (t->tk == SDN_KV_Q8) {
            const uint8_t *k = t->k;
            for (int j = 0; j < 64; j++) {
                float sj = 0.0f;
                for (int kb = 0; kb < t->kblocks; kb++) {
                    int32_t acc = 0;
                    for (int g = kb * (SDN_KV_KBLOCK / 4); g < (kb + 1) * (SDN_KV_KBLOCK / 4); g++)
                        for (int b = 0; b < 4; b++) acc += (int32_t)k[((size_t)g * 64 + j) * 4 + b] * q[i].q8[g * 4 + b];
                    const float w = sdn_kv_h2f(t->ks[(size_t)kb * 64 + j]) * q[i].q8s[kb], dot = (float)(acc - q[i].q8bias[kb]);
                    sj = kb ? fmaf(dot, w, sj) : dot * w;
                }
                s[j] = sj;
            }
        } else {
            for (int j = 0; j < 64; j++) {
                float acc = 0.0f;
                if (t->tk == SDN_KV_F32) {
                    const float *k = t->k;
                    for (int d = 0; d < t->hd; d++) acc = fmaf(q[i].q[d], k[(size_t)d * 64 + j], acc);
                } else if (t->tk == SDN_KV_BF16) { /* pairs, the odd element first (VDPBF16PS) */
                    const uint16_t *k = t->k, *qb = q[i].qb;
                    for (int g = 0; g < (t->hd + 1) / 2; g++) {
                        acc = fmaf(sdn_kv_b2f(qb[2 * g + 1]), sdn_kv_b2f(k[((size_t)g * 64 + j) * 2 + 1]), acc);
                        acc = fmaf(sdn_kv_b2f(qb[2 * g]), sdn_kv_b2f(k[((size_t)g * 64 + j) * 2]), acc);
                    }
                } else {
                    const uint16_t *k = t->k;
                    for (int d = 0; d < t->hd; d++) acc = fmaf(q[i].q[d], sdn_kv_h2f(k[(size_t)d * 64 + j]), acc);
                }
                s[j] = acc * q[i].qs;
            }
        }
    }
}

void sdn_att_update_portable(sdn_att_q *q, int nq, const float *sc, const sdn_att_vt *v) {
    const int hd = v->hd;
    for (int i = 0; i < nq; i++) {
        sdn_att_q *Q = &q[i];
        const float *s = sc + (size_t)i * 64;
        const uint64_t vis = Q->vis;
        if (!vis) continue;
        float mt = -INFINITY;
        for (int j = 0; j < 64; j++)
            if (vis >> j & 1 && s[j] > mt) mt = s[j];
        if (Q->m == -INFINITY) Q->m = mt;
        else if (mt > Q->m) {
            const float a = sdn_att_exp(Q->m - mt);
            for (int d = 0; d < hd; d++) Q->acc[d] *= a;
            Q->l *= a;
            Q->m = mt;
        }
        float p[64];
        for (int j = 0; j < 64; j++) p[j] = vis >> j & 1 ? sdn_att_exp(s[j] - Q->m) : 0.0f;
        if (v->pairs) /* bf16 values: the weights in BF16 */
            for (int j = 0; j < 64; j++) p[j] = sdn_kv_b2f(sdn_kv_bf16(p[j]));
        Q->l = Q->l + sdn_att_tsum64(p);
        if (v->pairs) { /* bf16 values (possibly handed over as floats): pairs of lanes, the odd one first */
            float t[SDN_ATT_MAX_HD] = {0};
            for (int i = 0; i < 32; i++) {
                if (p[2 * i] == 0.0f && p[2 * i + 1] == 0.0f) continue; /* adds nothing */
                for (int e = 1; e >= 0; e--) {
                    const uint8_t *row = v->vrow[2 * i + e];
                    const float w = p[2 * i + e];
                    if (v->tv == SDN_KV_F32)
                        for (int d = 0; d < hd; d++) t[d] = fmaf(w, ((const float *)row)[d], t[d]);
                    else
                        for (int d = 0; d < hd; d++) t[d] = fmaf(w, sdn_kv_b2f(((const uint16_t *)row)[d]), t[d]);
                }
            }
            for (int d = 0; d < hd; d++) Q->acc[d] = Q->acc[d] + t[d];
            continue;
        }
        if (v->scaled) { /* q8 values: 8-bit weights, exact integer sums (attention_kern.h) */
            float w[64], wmax = 0.0f, r, su;
            for (int j = 0; j < 64; j++) {
                w[j] = p[j] * v->vsc[j];
                if (w[j] > wmax) wmax = w[j];
            }
            const int any = sdn_att_wq8_scale(wmax, &r, &su);
            int32_t isum[SDN_ATT_MAX_HD] = {0};
            for (int j = 0; any && j < 64; j++) {
                if (!(vis >> j & 1)) continue;
                const int32_t u = (int32_t)sdn_att_wq8(w[j], r);
                const int8_t *row = (const int8_t *)v->vrow[j];
                if (v->tv == SDN_KV_F32) /* handed over as floats: the same integers */
                    for (int d = 0; d < hd; d++) isum[d] += u * (int32_t)((const float *)v->vrow[j])[d];
                else
                    for (int d = 0; d < hd; d++) isum[d] += u * row[d];
            }
            for (int d = 0; d < hd; d++) Q->acc[d] = fmaf((float)isum[d], su, Q->acc[d]);
            continue;
        }
        for (int j = 0; j < 64; j++) {
            if (!(vis >> j & 1)) continue;
            const uint8_t *row = v->vrow[j];
            const float w = p[j];
            switch (v->tv) {
            case SDN_KV_F32:
                for (int d = 0; d < hd; d++) Q->acc[d] = fmaf(w, ((const float *)row)[d], Q->acc[d]);
                break;
            case SDN_KV_F16:
                for (int d = 0; d < hd; d++) Q->acc[d] = fmaf(w, sdn_kv_h2f(((const uint16_t *)row)[d]), Q->acc[d]);
                break;
            default:
                for (int d = 0; d < hd; d++) Q->acc[d] = fmaf(w, (float)((const int8_t *)row)[d], Q->acc[d]);
                break;
            }
        }
    }
}

void sdn_att_cvt_portable(const void *src, sdn_kv_type t, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = t == SDN_KV_F16 ? sdn_kv_h2f(((const uint16_t *)src)[i]) : t == SDN_KV_BF16 ? sdn_kv_b2f(((const uint16_t *)src)[i]) : (float)((const int8_t *)src)[i];
}

void sdn_att_merge_portable(float *ACC, const float *acc, float ea, float eb, int hd) {
    for (int d = 0; d < hd; d++) ACC[d] = fmaf(acc[d], eb, ACC[d] * ea);
}

void sdn_att_scale_portable(float *o, const float *acc, float s, int hd) {
    for (int d = 0; d < hd; d++) o[d] = acc[d] * s;
}

/* ------------------------------------------------------------------ dispatch ---- */

typedef struct att_kernels {
    sdn_att_scores_fn scores;
    sdn_att_update_fn update;
    sdn_att_cvt_fn cvt;
    sdn_att_merge_fn merge;
    sdn_att_scale_fn scale;
    sdn_att_t4_fn t4; /* q8 values of many queries transposed for the kernels that take them (or NULL) */
    sdn_att_t2_fn t2; /* bf16 values likewise, in pairs of positions (or NULL) */
    int scratch_f16;  /* F16 keys and values: SCRATCH_QUERIES, or more on the paths that widen them cheaply */
} att_kernels;
#define ATT_KERNELS(v) ((att_kernels){sdn_att_scores_##v, sdn_att_update_##v, sdn_att_cvt_##v, sdn_att_merge_##v, sdn_att_scale_##v, NULL, NULL, SCRATCH_QUERIES})

static att_kernels kernels_for(int hd) {
#if defined(__x86_64__)
    /* the SIMD kernels take whole vectors of the head dimension; the portable ones give the
     * same bits for any other */
    switch (sdn_kpath_get()) {
    case SDN_KPATH_AVX2:
        if (hd % 8 == 0)
            return sdn_kpath_avxvnni() ? ATT_KERNELS(avx2vnni) : ATT_KERNELS(avx2);
        break;
    case SDN_KPATH_AVX512:
    case SDN_KPATH_AMX:
        if (hd % 16 == 0) {
            /* with AVX512_BF16: the same kernels, bf16 keys' products by VDPBF16PS (the same bits) */
            const int bf = sdn_kpath_avx512bf16();
            att_kernels k = bf ? ATT_KERNELS(avx512bf16) : ATT_KERNELS(avx512);
            /* the amx path too (AMX-INT8 tiles for the q8 products measured no faster,
             * docs/kernels.md), except the bf16 keys' scores with AMX-BF16 below */
            if (hd % 64 == 0) k.t4 = bf ? sdn_att_t4_avx512bf16 : sdn_att_t4_avx512;
            if (hd % 64 == 0 && bf) k.t2 = sdn_att_t2_avx512bf16; /* bf16 values by VDPBF16PS */
            /* the amx path with AMX-BF16: bf16 keys' scores on tiles, for every batch (their
             * own bits: attention_amx.c) */
            if (sdn_kpath_get() == SDN_KPATH_AMX && sdn_kpath_amxbf16() && hd % 32 == 0) k.scores = sdn_att_scores_amxbf16;
            k.scratch_f16 = SCRATCH_QUERIES_AVX512;
            return k;
        }
        break;
    default: break;
    }
#elif defined(__aarch64__)
    /* attention_arm.c takes head dimensions of whole 4-lane vectors */
    if (hd % 4 == 0) switch (sdn_kpath_get()) {
        case SDN_KPATH_NEON: return ATT_KERNELS(neon);
        case SDN_KPATH_DOTPROD: return ATT_KERNELS(dotprod);
        case SDN_KPATH_I8MM: return ATT_KERNELS(i8mm);
        default: break;
        }
#endif
    return ATT_KERNELS(portable);
}

/* ----------------------------------------------------------------- workspace ---- */

typedef struct att_thread {
    sdn_att_q *q;        /* [qmax] */
    float *acc;          /* [qmax][hd] super-tile accumulators */
    float *gacc;         /* [qmax][hd] merged accumulators (inline merge) */
    float *gm, *gl;      /* [qmax] merged max and sum */
    float *sc;           /* [qmax][64] tile scores */
    float *kbuf, *vbuf;  /* a tile's keys [hd][64] and values [64][hd] converted to floats */
    float *scb;          /* [qmax][128] scores of the batch's slot tiles (tree mode) */
} att_thread;

struct sdn_att_ws {
    int n_threads, qmax, hd, hd4, n_heads, max_inv_rows, n_super;
    att_thread *th;
    float *part;         /* [n_super][max_inv_rows][n_heads][hd + 2]: per-super-tile results */
    /* per-call row data */
    int32_t *rpos, *rlo, *rclim, *rmax; /* [max_batch] position, window start, committed limit, last visible position */
    int32_t *ext_pos, *ext_slot;        /* [max_inv_rows][max_inv_rows] a row's visible batch entries, by position */
    int32_t *n_ext;                     /* [max_batch] */
    int8_t *q8;                         /* [max_batch][n_heads][hd4] queries quantized (q8 keys) */
    int32_t *q8bias;                    /* [max_batch][n_heads][kblocks] 128 * the sum of a block's bytes */
    float *q8s;                         /* [max_batch][n_heads][kblocks] its scale times the score scale */
    uint16_t *qb;                       /* [n_kv_heads][n][grp][hd2] queries rounded to BF16 (bf16 keys) */
    int kblocks, hd2;
    int max_batch;
};

static void thread_free(att_thread *t) {
    free(t->q); free(t->acc); free(t->gacc); free(t->gm); free(t->gl); free(t->sc); free(t->scb); free(t->kbuf); free(t->vbuf);
}

void sdn_att_ws_free(sdn_att_ws *ws) {
    if (!ws) return;
    for (int i = 0; ws->th && i < ws->n_threads; i++) thread_free(&ws->th[i]);
    free(ws->th);
    free(ws->part);
    free(ws->rpos); free(ws->rlo); free(ws->rclim); free(ws->rmax); free(ws->ext_pos); free(ws->ext_slot); free(ws->n_ext);
    free(ws->q8); free(ws->q8bias); free(ws->q8s); free(ws->qb);
    free(ws);
}

int sdn_att_ws_new(int n_threads, int max_batch, int n_heads, int n_kv_heads, int head_dim, int n_ctx, sdn_att_ws **out, sdn_err *err) {
    *out = NULL;
    sdn_att_ws *ws = calloc(1, sizeof *ws);
    if (!ws) return sdn_fail(err, SDN_ENOMEM, "out of memory (attention)");
    const int grp = n_heads / n_kv_heads, inv = max_batch < 64 ? max_batch : 64;
    ws->n_threads = n_threads;
    ws->hd = head_dim;
    ws->hd4 = (head_dim + SDN_KV_KBLOCK - 1) / SDN_KV_KBLOCK * SDN_KV_KBLOCK;
    ws->kblocks = ws->hd4 / SDN_KV_KBLOCK;
    ws->hd2 = (head_dim + 1) / 2 * 2;
    ws->n_heads = n_heads;
    ws->max_inv_rows = inv;
    ws->max_batch = max_batch;
    ws->n_super = (n_ctx + SDN_ATT_SUPER - 1) / SDN_ATT_SUPER;
    /* a task holds at most the 64 rows of a decode batch, or a prefill block, times grp */
    int qmax = inv * grp;
    if (qmax < PREFILL_QUERIES + grp) qmax = PREFILL_QUERIES + grp;
    ws->qmax = qmax;
    ws->th = calloc((size_t)n_threads, sizeof *ws->th);
    int ok = ws->th != NULL;
    for (int i = 0; ok && i < n_threads; i++) {
        att_thread *t = &ws->th[i];
        t->q = calloc((size_t)qmax, sizeof *t->q);
        t->acc = malloc((size_t)qmax * head_dim * sizeof(float));
        t->gacc = malloc((size_t)qmax * head_dim * sizeof(float));
        t->gm = malloc((size_t)qmax * sizeof(float));
        t->gl = malloc((size_t)qmax * sizeof(float));
        t->sc = malloc((size_t)qmax * 64 * sizeof(float));
        t->scb = malloc((size_t)qmax * 128 * sizeof(float));
        t->kbuf = aligned_alloc(64, (size_t)64 * ((head_dim + 15) / 16 * 16) * sizeof(float));
        t->vbuf = aligned_alloc(64, (size_t)64 * ((head_dim + 15) / 16 * 16) * sizeof(float));
        ok = t->q && t->acc && t->gacc && t->gm && t->gl && t->sc && t->scb && t->kbuf && t->vbuf;
    }
    if (ok && ws->n_super > 1) {
        ws->part = malloc((size_t)ws->n_super * inv * n_heads * (head_dim + 2) * sizeof(float));
        ok = ws->part != NULL;
    }
    ws->rpos = malloc((size_t)max_batch * sizeof(int32_t));
    ws->rlo = malloc((size_t)max_batch * sizeof(int32_t));
    ws->rclim = malloc((size_t)max_batch * sizeof(int32_t));
    ws->rmax = malloc((size_t)max_batch * sizeof(int32_t));
    ws->n_ext = malloc((size_t)max_batch * sizeof(int32_t));
    ws->ext_pos = malloc((size_t)inv * inv * sizeof(int32_t));
    ws->ext_slot = malloc((size_t)inv * inv * sizeof(int32_t));
    ws->q8 = calloc((size_t)max_batch * n_heads * ws->hd4, 1);
    ws->q8bias = malloc((size_t)max_batch * n_heads * ws->kblocks * sizeof(int32_t));
    ws->q8s = malloc((size_t)max_batch * n_heads * ws->kblocks * sizeof(float));
    ws->qb = calloc((size_t)max_batch * n_heads * ws->hd2, sizeof(uint16_t));
    ok = ok && ws->q8 && ws->q8bias && ws->q8s && ws->qb && ws->rpos && ws->rlo && ws->rclim && ws->rmax && ws->n_ext && ws->ext_pos && ws->ext_slot;
    if (!ok) {
        sdn_att_ws_free(ws);
        return sdn_fail(err, SDN_ENOMEM, "out of memory (attention scratch)");
    }
    *out = ws;
    return SDN_OK;
}

/* --------------------------------------------------------------------- tasks ---- */

typedef struct att_job {
    sdn_att_ws *ws;
    const sdn_att_args *a;
    att_kernels k;
    int grp, tree, rows_per_task, n_row_blocks, s_lo, s_hi, split; /* split: one task per (KV head, super-tile) */
    int n_tasks;
    atomic_int next;
} att_job;

static inline uint64_t lane_range(int a, int b) { /* lanes [a, b) of 64 */
    if (a >= b) return 0;
    uint64_t hi = b >= 64 ? ~0ull : (1ull << b) - 1, lo = (1ull << a) - 1;
    return hi & ~lo;
}

/* Prepare the task's queries: pointers, q8 quantization (q8 keys), state. */
static void setup_queries(const att_job *j, att_thread *t, int h, int r0, int r1) {
    const sdn_att_args *a = j->a;
    const int hd = a->head_dim, hd4 = j->ws->hd4;
    int nq = 0;
    for (int r = r0; r < r1; r++)
        for (int g = 0; g < j->grp; g++, nq++) {
            sdn_att_q *Q = &t->q[nq];
            Q->q = a->q + (size_t)r * a->ldq + (size_t)(h * j->grp + g) * hd;
            Q->acc = t->acc + (size_t)nq * hd;
            Q->qs = a->scale;
            if (sdn_kv_type_k(a->kv) == SDN_KV_Q8) { /* quantized once per call (q8_worker) */
                const size_t k = (size_t)r * a->n_heads + (size_t)(h * j->grp + g);
                Q->q8 = j->ws->q8 + k * hd4;
                Q->q8bias = j->ws->q8bias + k * j->ws->kblocks;
                Q->q8s = j->ws->q8s + k * j->ws->kblocks;
            } else if (sdn_kv_type_k(a->kv) == SDN_KV_BF16) { /* rounded once per call (bf16_worker) */
                Q->qb = j->ws->qb + (((size_t)h * a->n + r) * j->grp + g) * j->ws->hd2;
            }
        }
}

/* q8 keys: every (row, head) query quantized symmetrically to 8 bits per block of 32 (each
 * block's scale times the score scale kept), and each block's byte sum for the keys' offset. */
static void q8_worker(void *arg, int ith, int nth) {
    const att_job *j = arg;
    const sdn_att_args *a = j->a;
    const int hd = a->head_dim, hd4 = j->ws->hd4;
    long b, e;
    sdn_pool_range((long)a->n * a->n_heads, ith, nth, 1, &b, &e);
    for (long k = b; k < e; k++) {
        const float *q = a->q + (size_t)(k / a->n_heads) * a->ldq + (size_t)(k % a->n_heads) * hd;
        int8_t *q8 = j->ws->q8 + (size_t)k * hd4;
        for (int kb = 0; kb < j->ws->kblocks; kb++) {
            const int d0 = kb * SDN_KV_KBLOCK, d1 = d0 + SDN_KV_KBLOCK;
            float amax = 0.0f;
            for (int d = d0; d < d1 && d < hd; d++)
                if (fabsf(q[d]) > amax) amax = fabsf(q[d]);
            const float sq = amax / 127.0f;
            int32_t sum = 0;
            for (int d = d0; d < d1; d++) {
                float v = d < hd && sq > 0.0f ? sdn_kv_round(q[d] / sq) : 0.0f;
                if (!(v >= -127.0f)) v = -127.0f;
                if (v > 127.0f) v = 127.0f;
                q8[d] = (int8_t)v;
                sum += q8[d];
            }
            j->ws->q8bias[(size_t)k * j->ws->kblocks + kb] = 128 * sum;
            j->ws->q8s[(size_t)k * j->ws->kblocks + kb] = sq * a->scale;
        }
    }
}

/* bf16 keys: every (row, head) query rounded to BF16 (sdn_kv_bf16), the pad of an odd head
 * dimension zero; stored by KV head, then row, then query head of the group, so that a task's
 * queries follow each other (an AMX A tile, attention_amx.c). */
static void bf16_worker(void *arg, int ith, int nth) {
    const att_job *j = arg;
    const sdn_att_args *a = j->a;
    const int hd = a->head_dim, hd2 = j->ws->hd2;
    long b, e;
    sdn_pool_range((long)a->n * a->n_heads, ith, nth, 1, &b, &e);
    for (long k = b; k < e; k++) {
        const long r = k / a->n_heads, head = k % a->n_heads; /* stored by (KV head, row, group) */
        const float *q = a->q + (size_t)r * a->ldq + (size_t)head * hd;
        uint16_t *qb = j->ws->qb + (((size_t)(head / j->grp) * a->n + r) * j->grp + head % j->grp) * hd2;
        for (int d = 0; d < hd; d++) qb[d] = sdn_kv_bf16(q[d]);
        for (int d = hd; d < hd2; d++) qb[d] = 0;
    }
}

static void reset_super(att_thread *t, int nq, int hd) {
    for (int i = 0; i < nq; i++) {
        t->q[i].m = -INFINITY;
        t->q[i].l = 0.0f;
    }
    memset(t->acc, 0, (size_t)nq * hd * sizeof(float));
}

/* Merge a super-tile's (m, l, acc) into (M, L, ACC) (attention.h). */
static void merge(const att_kernels *k, float *M, float *L, float *ACC, float m, float l, const float *acc, int hd, int first) {
    if (first) {
        *M = m;
        *L = l;
        memcpy(ACC, acc, (size_t)hd * sizeof(float));
        return;
    }
    const float Mn = m > *M ? m : *M, ea = sdn_att_exp(*M - Mn), eb = sdn_att_exp(m - Mn);
    *L = *L * ea + l * eb;
    k->merge(ACC, acc, ea, eb, hd);
    *M = Mn;
}

static void run_task(att_job *j, att_thread *t, int h, int r0, int r1, int s0, int s1) {
    const sdn_att_args *a = j->a;
    sdn_att_ws *ws = j->ws;
    const int hd = a->head_dim, grp = j->grp, nq = (r1 - r0) * grp, kv_base = a->kv_base;
    sdn_kv_head kh;
    sdn_kv_head_get(a->kv, a->layer, h, &kh);
    setup_queries(j, t, h, r0, r1);
    sdn_att_kt kt = {.tk = kh.tk, .hd = hd, .hd4 = kh.hd4, .kblocks = kh.kblocks, .pf_bytes = kh.k_tile_bytes};
    sdn_att_vt vt = {0};
    vt.hd = hd;
    vt.scaled = kh.tv == SDN_KV_Q8;
    vt.pairs = kh.tv == SDN_KV_BF16;
    /* tree mode: every query's scores against the batch's slot tiles, once */
    const int tb0 = kv_base / SDN_KV_TILE;
    if (j->tree) {
        const int tb1 = (kv_base + a->n - 1) / SDN_KV_TILE;
        for (int tb = tb0; tb <= tb1; tb++) {
            kt.k = kh.k + (size_t)tb * kh.k_tile_bytes;
            kt.ks = kh.k_scale ? kh.k_scale + (size_t)tb * kh.kblocks * SDN_KV_TILE : NULL;
            kt.pf = NULL;
            j->k.scores(&kt, t->q, nq, t->sc);
            for (int i = 0; i < nq; i++) memcpy(t->scb + (size_t)i * 128 + (tb - tb0) * 64, t->sc + (size_t)i * 64, 64 * sizeof(float));
        }
    }
    int lo_min = INT32_MAX, hi_max = -1;
    for (int r = r0; r < r1; r++) {
        if (ws->rlo[r] < lo_min) lo_min = ws->rlo[r];
        if (ws->rmax[r] > hi_max) hi_max = ws->rmax[r];
    }
    for (int S = s0; S < s1; S++) {
        reset_super(t, nq, hd);
        int T0 = S * TILES_PER_SUPER, T1 = T0 + TILES_PER_SUPER;
        if (T0 < lo_min / SDN_KV_TILE) T0 = lo_min / SDN_KV_TILE;
        if (T1 > hi_max / SDN_KV_TILE + 1) T1 = hi_max / SDN_KV_TILE + 1;
        if (T0 < T1) { /* the first tile's keys and values: the kernels prefetch each next one */
            const uint8_t *k0 = kh.k + (size_t)T0 * kh.k_tile_bytes, *v0 = kh.v + (size_t)T0 * SDN_KV_TILE * kh.v_row_bytes;
            for (size_t o = 0; o < kh.k_tile_bytes; o += 64) __builtin_prefetch(k0 + o);
            for (size_t o = 0; o < SDN_KV_TILE * kh.v_row_bytes; o += 64) __builtin_prefetch(v0 + o);
        }
        for (int T = T0; T < T1; T++) {
            const int p0 = T * SDN_KV_TILE;
            int any_c = 0, any_x = 0;
            for (int r = r0; r < r1; r++) {
                const int lo = ws->rlo[r], cl = ws->rclim[r];
                uint64_t vis = lane_range((lo > p0 ? lo : p0) - p0, (cl < p0 + 64 ? cl : p0 + 64) - p0);
                any_c |= vis != 0;
                uint64_t xv = 0;
                if (j->tree)
                    for (int e = 0; e < ws->n_ext[r]; e++) {
                        const int p = ws->ext_pos[(size_t)r * ws->max_inv_rows + e];
                        if (p >= p0 && p < p0 + 64) xv |= 1ull << (p - p0);
                    }
                any_x |= xv != 0;
                for (int g = 0; g < grp; g++) t->q[(r - r0) * grp + g].vis = vis | xv;
            }
            if (!any_c && !any_x) continue;
            /* many queries: the tile's entries converted to floats (q8 values: transposed) once
             * for all of them (exact: the same bits); F16 entries from the path's own count */
            const int scratch = nq > SCRATCH_QUERIES && !any_x && (hd * 64) % 16 == 0;
            const int scratch16 = scratch && nq > j->k.scratch_f16;
            /* the next tile this task reads, fetched while this one is computed */
            const int pf_next = T + 1 < T1 && T + 1 < kh.n_tiles;
            kt.pf = pf_next ? kh.k + (size_t)(T + 1) * kh.k_tile_bytes : NULL;
            vt.pf = pf_next ? kh.v + (size_t)(p0 + 64) * kh.v_row_bytes : NULL;
            vt.pf_row = kh.v_row_bytes;
            if (any_c || T == tb0) {
                kt.tk = kh.tk;
                kt.k = kh.k + (size_t)T * kh.k_tile_bytes;
                kt.ks = kh.k_scale ? kh.k_scale + (size_t)T * kh.kblocks * SDN_KV_TILE : NULL;
                if (j->tree && T >= tb0 && T - tb0 < 2) {
                    for (int i = 0; i < nq; i++) memcpy(t->sc + (size_t)i * 64, t->scb + (size_t)i * 128 + (T - tb0) * 64, 64 * sizeof(float));
                } else {
                    if (scratch16 && kh.tk == SDN_KV_F16) {
                        j->k.cvt(kt.k, SDN_KV_F16, t->kbuf, (size_t)hd * 64);
                        kt.k = t->kbuf;
                        kt.tk = SDN_KV_F32;
                    }
                    j->k.scores(&kt, t->q, nq, t->sc);
                }
            }
            vt.tv = kh.tv;
            for (int l = 0; l < 64; l++) {
                vt.vrow[l] = kh.v + (size_t)(p0 + l) * kh.v_row_bytes;
                vt.vsc[l] = kh.v_scale ? sdn_kv_h2f(kh.v_scale[p0 + l]) : 0.0f;
            }
            vt.t4 = NULL;
            vt.t2 = NULL;
            if (scratch && kh.tv == SDN_KV_Q8 && j->k.t4) { /* transposed for the int8 products */
                j->k.t4(&vt, (int8_t *)t->vbuf);
                vt.t4 = (const int8_t *)t->vbuf;
            } else if (scratch && nq > T2_QUERIES && kh.tv == SDN_KV_BF16 && j->k.t2) { /* ... and for the BF16 ones */
                j->k.t2(&vt, (uint16_t *)t->vbuf);
                vt.t2 = (const uint16_t *)t->vbuf;
            } else if ((kh.tv == SDN_KV_F16 || kh.tv == SDN_KV_BF16 ? scratch16 : scratch) && kh.tv != SDN_KV_F32 && hd % 16 == 0) {
                uint64_t uni = 0;
                for (int i = 0; i < nq; i++) uni |= t->q[i].vis;
                for (; uni; uni &= uni - 1) {
                    const int l = __builtin_ctzll(uni);
                    j->k.cvt(vt.vrow[l], kh.tv, t->vbuf + (size_t)l * hd, (size_t)hd);
                    vt.vrow[l] = (const uint8_t *)(t->vbuf + (size_t)l * hd);
                }
                vt.tv = SDN_KV_F32;
            }
            if (!any_x) {
                j->k.update(t->q, nq, t->sc, &vt);
                continue;
            }
            /* batch entries at their positions: each row's own scores and value rows */
            for (int r = r0; r < r1; r++) {
                sdn_att_vt vr = vt;
                float sr[64 * 8];
                const int ne = ws->n_ext[r];
                for (int g0 = 0; g0 < grp; g0 += 8) {
                    const int ng = grp - g0 < 8 ? grp - g0 : 8;
                    for (int g = 0; g < ng; g++) memcpy(sr + g * 64, t->sc + (size_t)((r - r0) * grp + g0 + g) * 64, 64 * sizeof(float));
                    for (int e = 0; e < ne; e++) {
                        const int p = ws->ext_pos[(size_t)r * ws->max_inv_rows + e], slot = ws->ext_slot[(size_t)r * ws->max_inv_rows + e];
                        if (p < p0 || p >= p0 + 64) continue;
                        for (int g = 0; g < ng; g++)
                            sr[g * 64 + (p - p0)] = t->scb[(size_t)((r - r0) * grp + g0 + g) * 128 + (slot - tb0 * SDN_KV_TILE)];
                        vr.vrow[p - p0] = kh.v + (size_t)slot * kh.v_row_bytes;
                        vr.vsc[p - p0] = kh.v_scale ? sdn_kv_h2f(kh.v_scale[slot]) : 0.0f;
                    }
                    j->k.update(t->q + (r - r0) * grp + g0, ng, sr, &vr);
                }
            }
        }
        /* the super-tile's results: merged now (whole range in this task) or stored */
        for (int i = 0; i < nq; i++) {
            const int r = r0 + i / grp, head = h * grp + i % grp;
            sdn_att_q *Q = &t->q[i];
            if (j->split) {
                float *pp = ws->part + (((size_t)S * ws->max_inv_rows + r) * ws->n_heads + head) * (hd + 2);
                pp[0] = Q->m;
                pp[1] = Q->l;
                memcpy(pp + 2, Q->acc, (size_t)hd * sizeof(float));
            } else if (Q->l > 0.0f) {
                merge(&j->k, &t->gm[i], &t->gl[i], t->gacc + (size_t)i * hd, Q->m, Q->l, Q->acc, hd, t->gl[i] == 0.0f);
            }
        }
    }
    if (!j->split)
        for (int i = 0; i < nq; i++) {
            const int r = r0 + i / grp, head = h * grp + i % grp;
            j->k.scale(a->out + (size_t)r * a->ldq + (size_t)head * hd, t->gacc + (size_t)i * hd, 1.0f / t->gl[i], hd);
        }
}

static void att_worker(void *arg, int ith, int nth) {
    att_job *j = arg;
    att_thread *t = &j->ws->th[ith];
    for (;;) {
        const int k = atomic_fetch_add(&j->next, 1);
        if (k >= j->n_tasks) break;
        if (j->split) { /* (KV head, super-tile), all rows */
            const int ns = j->s_hi - j->s_lo;
            run_task(j, t, k / ns, 0, j->a->n, j->s_lo + k % ns, j->s_lo + k % ns + 1);
        } else { /* (KV head, row block), the last rows (the most work) first */
            const int b = j->n_row_blocks - 1 - k / j->a->n_kv_heads, h = k % j->a->n_kv_heads;
            const int r0 = b * j->rows_per_task, r1 = r0 + j->rows_per_task < j->a->n ? r0 + j->rows_per_task : j->a->n;
            const int nq = (r1 - r0) * j->grp;
            for (int i = 0; i < nq; i++) t->gl[i] = 0.0f;
            run_task(j, t, h, r0, r1, j->s_lo, j->s_hi);
        }
    }
}

/* Second pass of split tasks: merge each (row, head)'s super-tiles in order. */
static void merge_worker(void *arg, int ith, int nth) {
    att_job *j = arg;
    const sdn_att_args *a = j->a;
    sdn_att_ws *ws = j->ws;
    const int hd = a->head_dim;
    long b, e;
    sdn_pool_range((long)a->n * a->n_heads, ith, nth, 1, &b, &e);
    float *ACC = ws->th[ith].gacc;
    for (long k = b; k < e; k++) {
        const int r = (int)(k / a->n_heads), head = (int)(k % a->n_heads);
        float M = -INFINITY, L = 0.0f;
        for (int S = j->s_lo; S < j->s_hi; S++) {
            const float *pp = ws->part + (((size_t)S * ws->max_inv_rows + r) * ws->n_heads + head) * (hd + 2);
            if (pp[1] > 0.0f) merge(&j->k, &M, &L, ACC, pp[0], pp[1], pp + 2, hd, L == 0.0f);
        }
        j->k.scale(a->out + (size_t)r * a->ldq + (size_t)head * hd, ACC, 1.0f / L, hd);
    }
}

void sdn_attention(sdn_att_ws *ws, sdn_pool *pool, const sdn_att_args *a) {
    const int n = a->n, kv_base = a->kv_base;
    att_job j = {.ws = ws, .a = a, .k = kernels_for(a->head_dim), .grp = a->n_heads / a->n_kv_heads};
    /* rows: position, window start, committed limit, visible batch entries */
    int slot_pos = !a->mask;
    for (int i = 0; slot_pos && a->pos && i < n; i++) slot_pos = a->pos[i] == kv_base + i;
    j.tree = !slot_pos;
    int lo_all = INT32_MAX, hi_all = 0;
    for (int i = 0; i < n; i++) {
        const int p = a->pos ? a->pos[i] : kv_base + i;
        const int lo = a->window > 0 && p - a->window + 1 > 0 ? p - a->window + 1 : 0;
        ws->rpos[i] = p;
        ws->rlo[i] = lo;
        ws->rclim[i] = slot_pos ? p + 1 : kv_base;
        ws->rmax[i] = slot_pos ? p : kv_base - 1;
        ws->n_ext[i] = 0;
        if (!slot_pos) {
            int32_t *ep = ws->ext_pos + (size_t)i * ws->max_inv_rows, *es = ws->ext_slot + (size_t)i * ws->max_inv_rows;
            int ne = 0;
            for (int r = 0; r <= i; r++) {
                const int see = a->mask ? a->mask[(size_t)i * n + r] != 0 : 1;
                const int pr = a->pos ? a->pos[r] : kv_base + r;
                if (!see || pr < lo) continue;
                int k = ne++; /* insertion by position */
                while (k > 0 && ep[k - 1] > pr) { ep[k] = ep[k - 1]; es[k] = es[k - 1]; k--; }
                ep[k] = pr;
                es[k] = kv_base + r;
                if (pr > ws->rmax[i]) ws->rmax[i] = pr;
            }
            ws->n_ext[i] = ne;
        }
        if (lo < lo_all) lo_all = lo;
        if (ws->rmax[i] > hi_all) hi_all = ws->rmax[i];
    }
    j.s_lo = lo_all / SDN_ATT_SUPER;
    j.s_hi = hi_all / SDN_ATT_SUPER + 1;
    const int nth = sdn_pool_size(pool);
    /* decode and verify steps over more than one super-tile: split by super-tile */
    j.split = n <= ws->max_inv_rows && j.s_hi - j.s_lo > 1 && ws->part != NULL;
    if (j.split) {
        j.n_tasks = a->n_kv_heads * (j.s_hi - j.s_lo);
    } else {
        int rows = PREFILL_QUERIES / j.grp;
        if (rows < 1) rows = 1;
        if (n <= ws->max_inv_rows && (long)a->n_kv_heads * ((n + rows - 1) / rows) < nth) rows = (n + nth - 1) / nth;
        if (j.tree || rows * j.grp > ws->qmax) rows = n; /* tree batches: all rows in one task (n <= 64) */
        if (rows * j.grp > ws->qmax) rows = ws->qmax / j.grp;
        j.rows_per_task = rows;
        j.n_row_blocks = (n + rows - 1) / rows;
        j.n_tasks = a->n_kv_heads * j.n_row_blocks;
    }
    atomic_init(&j.next, 0);
    if (sdn_kv_type_k(a->kv) == SDN_KV_Q8 || sdn_kv_type_k(a->kv) == SDN_KV_BF16) {
        void (*fn)(void *, int, int) = sdn_kv_type_k(a->kv) == SDN_KV_Q8 ? q8_worker : bf16_worker;
        if (nth > 1 && n > 8) sdn_pool_run(pool, fn, &j);
        else fn(&j, 0, 1);
    }
    if (nth > 1 && j.n_tasks > 1) sdn_pool_run(pool, att_worker, &j);
    else att_worker(&j, 0, 1);
    if (j.split) {
        if (nth > 1) sdn_pool_run(pool, merge_worker, &j);
        else merge_worker(&j, 0, 1);
    }
}
