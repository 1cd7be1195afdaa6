/* forward.c - the transformer forward pass (Llama / Qwen2 / Qwen3 / Gemma 3) over a batch
 * of tokens.
 *
 * Reads top to bottom like llama2.c's run.c, but batched:
 *   x = embed(tokens) (* sqrt(dim) for gemma3)
 *   per layer: xb = rmsnorm(x); q,k,v = xb W{q,k,v} (+bias); per-head rmsnorm(q, k) (qwen3,
 *              gemma3); rope(q, k); append k, v to the cache; att = attention(q, cache,
 *              mask, sliding window of local layers); o = att Wo (rmsnorm(o) for gemma3);
 *              x += o; xb = rmsnorm(x); f = (act(xb Wgate) * (xb Wup)) Wdown with act =
 *              silu (gelu-tanh for gemma3) (rmsnorm(f) for gemma3); x += f
 *   logits = rmsnorm(x[rows]) Wout (cap * tanh(logits / cap) when the model soft-caps)
 *
 * Matmuls go through mm_group(): batch-invariant kernels (matmul.h) split over the thread
 * pool by output rows, for every batch under the default prefill-matmul setting (kernel_path.h);
 * only `sgemm` sends large prefill batches to OpenBLAS SGEMM over F32 weight tiles (split by
 * output columns over the same pool, one single-threaded SGEMM per thread), whose bits depend
 * on the call's shape. Attention (attention/attention.h) is computed per (row, head) over the
 * KV slots it sees (the committed prefix plus the batch rows the mask allows, in slot order)
 * with one fixed order of operations, which makes a row's result identical to the result of
 * plain decoding at the same position, whatever the batch or chunk.
 *
 * Sliding-window (local) layers: a KV entry is visible to a query at position p only when
 * p - pos(entry) < n_swa. A committed entry in slot s holds position s (prefill appends in
 * order and sdn_kv_keep moves accepted tree rows to the slots of their positions), and a
 * batch row's position is b->pos[r]; so the window is a per-row lower bound on the
 * committed slots plus a position test on the batch rows, the same for every batch. */
#include "engine/forward.h"

#include <stdatomic.h>
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
/* The SIMD helpers below (attention dot products, exponentials, axpy) are compiled for
 * AVX2+FMA by function attribute and used when the kernel path in use is not portable
 * (kernels/kernel_path.h), so the build needs no -march flag. */
#define FWD_SIMD 1
#define FWD_TARGET __attribute__((target("avx2,fma"), noinline))
static int g_simd = -1; /* 1: AVX2+FMA helpers (set from the kernel path by sdn_ctx_new) */
#endif

#include "common/sdn_mem.h"
#include "attention/attention.h"
#include "attention/kv_cache.h"
#include "common/sdn_util.h"
#include "modelfile/gguf.h"
#include "kernels/kernel_path.h"
#include "engine/layout.h"
#include "kernels/matmul.h"
#include "engine/model_internal.h"
#include "kernels/quant.h"
#include "kernels/threadpool.h"

/* OpenBLAS-specific thread control (declared in its cblas.h as well). */
extern void openblas_set_num_threads(int num_threads);
extern int openblas_get_num_threads(void);

/* OpenBLAS's thread count is process-wide state (forward.h). sdnpu runs its GEMMs on its own
 * pools, one single-threaded OpenBLAS call per pool thread (sgemm_worker), so each forward
 * pass makes sure the count is 1: OpenBLAS then never starts a GEMM on its own threads,
 * which would spin beside the pool's after every call. It is set only when it is not 1
 * (a set reconfigures OpenBLAS), so a program that changed it gets it changed back. */
static void blas_single_thread(void) {
    if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

#define SGEMM_TILE_FLOATS (8u << 20) /* dequantized weight tile for SGEMM: 32 MiB */

struct sdn_ctx {
    const sdn_model *m;
    sdn_pool *pool;
    int n_threads, n_ctx, max_batch, n_kv;
    int qd, kvd;
    sdn_kv *kv;               /* the KV cache (attention/kv_cache.h) */
    sdn_att_ws *attws;        /* attention scratch (attention/attention.h) */
    /* activations, max_batch rows each */
    float *x, *xb, *xb2, *q, *k, *v, *att, *hb, *hb2;
    float *rope_cs;           /* [max_batch][rope_dims/2][2] cos, sin */
    float *rope_cs_swa;       /* the same for the local layers' RoPE base (gemma3), or NULL */
    double *inv_freq;         /* [rope_dims/2] */
    double *inv_freq_swa;     /* [rope_dims/2] local layers (NULL when their base is the same) */
    void *act[2];             /* prepared activations for up to two weight types */
    size_t act_cap[2];
    float *wtile;             /* SGEMM weight tile */
    int32_t *kv_tok, *kv_pos; /* [n_ctx] token and position of each committed KV entry (-1: unknown) */
    sdn_fwd_stats st;
};

/* ------------------------------------------------------------------ context ---- */

int sdn_ctx_new(const sdn_model *m, const sdn_ctx_params *p, sdn_ctx **out, sdn_err *err) {
    *out = NULL;
    const sdn_model_config *cfg = &m->cfg;
    /* the kernel path and prefill matmul setting: the ones set (sdnpu_set_kernel_path, ...), else the defaults */
    int rc0 = sdn_kpath_init(err);
    if (!rc0) rc0 = sdn_prefill_mm_init(err);
    if (rc0) return rc0;
#ifdef FWD_SIMD
    g_simd = sdn_kpath_get() != SDN_KPATH_PORTABLE;
#endif
    sdn_ctx *c = calloc(1, sizeof *c);
    if (!c) return sdn_fail(err, SDN_ENOMEM, "out of memory");
    c->m = m;
    c->n_ctx = p && p->n_ctx > 0 ? p->n_ctx : (cfg->ctx_len < SDN_DEFAULT_N_CTX ? cfg->ctx_len : SDN_DEFAULT_N_CTX);
    c->n_threads = p && p->n_threads > 0 ? p->n_threads : 1;
    c->max_batch = p && p->max_batch > 0 ? p->max_batch : 256;
    if (c->max_batch < SDN_INVARIANT_MAX_ROWS) c->max_batch = SDN_INVARIANT_MAX_ROWS;
    if (c->n_ctx < 2 || c->n_ctx > (1 << 22)) {
        free(c);
        return sdn_fail(err, SDN_EINVAL, "context size %d is out of range", p ? p->n_ctx : 0);
    }
    c->qd = cfg->n_heads * cfg->head_dim;
    c->kvd = cfg->n_kv_heads * cfg->head_dim;
    size_t B = (size_t)c->max_batch;
    sdn_kv_type tk = sdn_kv_resolve(p ? p->type_k : SDN_KV_AUTO, 1), tv = sdn_kv_resolve(p ? p->type_v : SDN_KV_AUTO, 0);
    if (tk < SDN_KV_FIRST || tk >= SDN_KV_TYPE_COUNT || tv < SDN_KV_FIRST || tv >= SDN_KV_TYPE_COUNT) {
        free(c);
        return sdn_fail(err, SDN_EINVAL, "KV cache type %d / %d out of range", (int)tk, (int)tv);
    }
    size_t wide = (size_t)(cfg->hidden > c->qd ? cfg->hidden : c->qd);
    if (wide < (size_t)cfg->dim) wide = (size_t)cfg->dim;
    {
        /* refuse up front what cannot fit: KV cache + the mapped weights + scratch buffers
         * against the process's memory limit (cgroup, physical memory, RLIMIT_AS) */
        uint64_t kv_b = sdn_kv_cache_bytes(cfg, tk, tv, c->n_ctx);
        uint64_t w_b = m->gguf ? sdn_gguf_file_size(m->gguf) : m->map_size;
        uint64_t buf_b = ((uint64_t)B * (3 * (uint64_t)cfg->dim + wide + 2 * (uint64_t)c->qd + 2 * (uint64_t)c->kvd + 2 * (uint64_t)cfg->hidden +
                                         (uint64_t)cfg->rope_dims)) * sizeof(float);
        char detail[200];
        snprintf(detail, sizeof detail, "KV cache %llu MiB (keys %s, values %s), weights %llu MiB, buffers %llu MiB",
                 (unsigned long long)(kv_b >> 20), sdn_kv_type_name(tk), sdn_kv_type_name(tv),
                 (unsigned long long)(w_b >> 20), (unsigned long long)(buf_b >> 20));
        char what[1200];
        snprintf(what, sizeof what, "%s: a context of %d positions (option --ctx)", m->path, c->n_ctx);
        int rc = sdn_mem_check(kv_b + w_b + buf_b, what, detail, err);
        if (rc) {
            free(c);
            return rc;
        }
    }
    if (!(p && p->file_layout)) {
        /* the packed decode layout replaces the mapping's pages the kernels read (same size),
         * so the check above holds for it; loading it changes the model's layout pointers
         * only, which is what layout.h allows beside running forward passes */
        int rc = sdn_layout_decode_resident((sdn_model *)m, NULL, err);
        if (rc) {
            free(c);
            return rc;
        }
    }
    {
        int rc = sdn_kv_new(cfg, tk, tv, c->n_ctx, &c->kv, err);
        if (!rc) rc = sdn_att_ws_new(c->n_threads, c->max_batch, cfg->n_heads, cfg->n_kv_heads, cfg->head_dim, c->n_ctx, &c->attws, err);
        if (rc) {
            sdn_ctx_free(c);
            return rc;
        }
    }
    c->x = malloc(B * cfg->dim * sizeof(float));
    c->xb = malloc(B * wide * sizeof(float));
    c->xb2 = malloc(B * cfg->dim * sizeof(float));
    c->q = malloc(B * c->qd * sizeof(float));
    c->k = malloc(B * c->kvd * sizeof(float));
    c->v = malloc(B * c->kvd * sizeof(float));
    c->att = malloc(B * c->qd * sizeof(float));
    c->hb = malloc(B * cfg->hidden * sizeof(float));
    c->hb2 = malloc(B * cfg->hidden * sizeof(float));
    c->rope_cs = malloc(B * (size_t)cfg->rope_dims * sizeof(float));
    c->inv_freq = malloc((size_t)cfg->rope_dims / 2 * sizeof(double));
    int two_bases = cfg->n_swa > 0 && cfg->rope_theta_swa != cfg->rope_theta;
    if (two_bases) {
        c->rope_cs_swa = malloc(B * (size_t)cfg->rope_dims * sizeof(float));
        c->inv_freq_swa = malloc((size_t)cfg->rope_dims / 2 * sizeof(double));
    }
    c->kv_tok = malloc((size_t)c->n_ctx * sizeof(int32_t));
    c->kv_pos = malloc((size_t)c->n_ctx * sizeof(int32_t));
    c->pool = sdn_pool_new(c->n_threads);
    if (!c->x || !c->xb || !c->xb2 || !c->q || !c->k || !c->v || !c->att || !c->hb ||
        !c->hb2 || !c->rope_cs || !c->inv_freq || (two_bases && (!c->rope_cs_swa || !c->inv_freq_swa)) || !c->kv_tok || !c->kv_pos || !c->pool) {
        sdn_ctx_free(c);
        return sdn_fail(err, SDN_ENOMEM, "out of memory allocating the context's buffers");
    }
    c->n_threads = sdn_pool_size(c->pool);
    /* RoPE inverse frequencies: theta_j = base^(-2j/rope_dims), divided by the Llama 3
     * frequency factor of pair j when the model has them. */
    for (int j = 0; j < cfg->rope_dims / 2; j++) {
        double f = pow((double)cfg->rope_theta, -2.0 * j / cfg->rope_dims);
        if (m->rope_freqs) f /= m->rope_freqs[j];
        c->inv_freq[j] = f;
        if (c->inv_freq_swa) {
            double fs = pow((double)cfg->rope_theta_swa, -2.0 * j / cfg->rope_dims);
            if (m->rope_freqs) fs /= m->rope_freqs[j];
            c->inv_freq_swa[j] = fs;
        }
    }
    *out = c;
    return SDN_OK;
}

void sdn_ctx_free(sdn_ctx *c) {
    if (!c) return;
    sdn_pool_free(c->pool);
    sdn_kv_free(c->kv); sdn_att_ws_free(c->attws); free(c->x); free(c->xb); free(c->xb2); free(c->q); free(c->k); free(c->v);
    free(c->att); free(c->hb); free(c->hb2); free(c->rope_cs); free(c->inv_freq); free(c->rope_cs_swa); free(c->inv_freq_swa); free(c->kv_tok); free(c->kv_pos);
    free(c->act[0]); free(c->act[1]); free(c->wtile);
    free(c);
}

const sdn_model *sdn_ctx_model(const sdn_ctx *c) { return c->m; }
int sdn_ctx_n_ctx(const sdn_ctx *c) { return c->n_ctx; }
int sdn_ctx_max_batch(const sdn_ctx *c) { return c->max_batch; }
int sdn_ctx_threads(const sdn_ctx *c) { return c->n_threads; }
void sdn_ctx_kv_types(const sdn_ctx *c, sdn_kv_type *k, sdn_kv_type *v) {
    *k = sdn_kv_type_k(c->kv);
    *v = sdn_kv_type_v(c->kv);
}
int sdn_kv_len(const sdn_ctx *c) { return c->n_kv; }

int sdn_kv_common_prefix(const sdn_ctx *c, const int32_t *tokens, int n) {
    int i = 0;
    while (i < n && i < c->n_kv && c->kv_pos[i] == i && c->kv_tok[i] == tokens[i]) i++;
    return i;
}
void sdn_ctx_stats(const sdn_ctx *c, sdn_fwd_stats *out) { *out = c->st; }
void sdn_ctx_reset_stats(sdn_ctx *c) { memset(&c->st, 0, sizeof c->st); }

void sdn_kv_truncate(sdn_ctx *c, int n) {
    if (n >= 0 && n < c->n_kv) c->n_kv = n;
}

int sdn_kv_keep(sdn_ctx *c, int first, const int32_t *keep, int n_keep, sdn_err *err) {
    if (first < 0 || first > c->n_kv || n_keep < 0 || n_keep > c->n_kv - first)
        return sdn_fail(err, SDN_EINVAL, "kv_keep: range first=%d n_keep=%d invalid for %d entries", first, n_keep, c->n_kv);
    for (int i = 0; i < n_keep; i++)
        if (keep[i] < 0 || first + keep[i] >= c->n_kv || (i && keep[i] <= keep[i - 1]))
            return sdn_fail(err, SDN_EINVAL, "kv_keep: index %d (%d) is not ascending within the %d new entries", i, keep[i],
                            c->n_kv - first);
    for (int i = 0; i < n_keep; i++) {
        c->kv_tok[first + i] = c->kv_tok[first + keep[i]];
        c->kv_pos[first + i] = c->kv_pos[first + keep[i]];
        if (keep[i] != i) sdn_kv_move(c->kv, first + i, first + keep[i]);
    }
    c->n_kv = first + n_keep;
    return SDN_OK;
}

/* ------------------------------------------------------------------ matmuls ---- */

/* The weight's rows in the file's layout: the G2 copy when loaded and not packed, else the
 * mapping. */
static inline const void *qdata(const sdn_weight *w) { return w->q && !sdn_weight_packed(w) ? w->q : w->data; }

typedef struct mm_job {
    sdn_ctx *c;
    const sdn_weight *w[3];
    float *y[3];
    int nw, n;
    const void *act[3];
    /* activation preparation */
    const float *x;
    int prep_types;
    uint32_t ptype[2];
    int64_t in;
} mm_job;

static void prep_worker(void *arg, int ith, int nth) {
    mm_job *j = arg;
    long b, e;
    sdn_pool_range(j->n, ith, nth, 1, &b, &e);
    for (int t = 0; t < j->prep_types; t++) {
        size_t rowb = sdn_act_bytes(j->ptype[t], j->in, 1);
        if (e > b) sdn_act_prepare(j->ptype[t], j->x + b * j->in, j->in, (int)(e - b), j->in, (char *)j->c->act[t] + b * rowb);
    }
}

static void mm_worker(void *arg, int ith, int nth) {
    mm_job *j = arg;
    for (int i = 0; i < j->nw; i++) {
        const sdn_weight *w = j->w[i];
        long b, e;
        sdn_pool_range(w->out, ith, nth, 16, &b, &e);
        if (e <= b) continue;
        if (w->q && sdn_weight_packed(w)) /* G2 holds it packed */
            sdn_matmul_rows_packed(w->type, w->q, w->in, j->act[i], j->n, j->y[i], w->out, b, e);
        else
            sdn_matmul_rows(w->type, qdata(w), w->row_bytes, w->in, j->act[i], j->n, j->y[i], w->out, b, e);
    }
}

/* One SGEMM Y[:, r0:r1) = X W[r0:r1)^T on the context's pool: each thread takes a slice of
 * the output columns (weight rows), dequantizes that slice into the tile when the weight is
 * quantized (`dst`), and calls single-threaded OpenBLAS on it. OpenBLAS's own threads are
 * never used (see blas_threads): they spin for about 0.1 s after every GEMM, and with
 * them busy the decode steps that follow a prefill ran up to 4x slower on 2 cores. */
typedef struct sgemm_job {
    const sdn_weight *w; /* quantized weight to dequantize, or NULL (src is F32) */
    const float *src;    /* F32 weight rows when w is NULL */
    float *dst;          /* dequantization tile (rows r0.. of w) */
    long r0, r1;
    const float *x;
    int n;
    long in;
    float *y;
    long ldy;
} sgemm_job;

static void sgemm_worker(void *arg, int ith, int nth) {
    sgemm_job *j = arg;
    long b, e;
    sdn_pool_range(j->r1 - j->r0, ith, nth, 16, &b, &e);
    if (b >= e) return;
    const float *W;
    if (j->w) {
        for (long r = b; r < e; r++)
            sdn_dequantize_row(j->w->type, (const char *)qdata(j->w) + (size_t)(j->r0 + r) * j->w->row_bytes, j->dst + r * j->in,
                               j->in);
        W = j->dst + b * j->in;
    } else {
        W = j->src + (j->r0 + b) * j->in;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->n, (int)(e - b), (int)j->in, 1.0f, j->x, (int)j->in, W, (int)j->in, 0.0f,
                j->y + j->r0 + b, (int)j->ldy);
}

static int ensure_act(sdn_ctx *c, int slot, size_t bytes) {
    if (c->act_cap[slot] >= bytes) return 0;
    void *p = realloc(c->act[slot], bytes);
    if (!p) return -1;
    c->act[slot] = p;
    c->act_cap[slot] = bytes;
    return 0;
}

/* Does a prefill (not batch-invariant) matmul by w run on the batch kernels rather than
 * SGEMM? Under the prefill-matmul setting of kernel_path.h, auto and kernels run every weight
 * type on the batch kernels, whatever layouts are resident (also the graph scheduler's F32
 * layout G1): the kernels give a row the bits of a decode step whatever the batch, so every
 * thread count, graph mode and prefill chunking computes the same KV entries. Only an
 * explicit sgemm sends a prefill to OpenBLAS, whose bits for an output column depend on the
 * shape of the call (docs/engine.md, "Same bits however the prompt is cut"). */
static int prefill_on_kernels(const sdn_weight *w) {
    (void)w;
    return sdn_prefill_mm_get() != SDN_PREFILL_MM_SGEMM;
}

/* Y_i = X W_i^T for up to three weights sharing the input X (n rows of `in`), with the
 * batch kernels of matmul.h (every weight when inv, else those prefill_on_kernels picks)
 * and SGEMM for the rest. */
static int mm_group(sdn_ctx *c, const sdn_weight *const *ws, float *const *ys, int nw, const float *X, int n, int inv, sdn_err *err) {
    double t0 = sdn_now();
    int64_t in = ws[0]->in;
    mm_job j = {.c = c, .n = n, .x = X, .in = in};
    for (int i = 0; i < nw; i++) {
        if (!inv && !prefill_on_kernels(ws[i])) continue;
        j.w[j.nw] = ws[i];
        j.y[j.nw] = ys[i];
        int t;
        for (t = 0; t < j.prep_types && j.ptype[t] != ws[i]->type; t++) {}
        if (t == j.prep_types) {
            if (t == 2) return sdn_fail(err, SDN_EUNSUP, "more than two weight types in one matmul group");
            j.ptype[t] = ws[i]->type;
            j.prep_types++;
            if (ensure_act(c, t, sdn_act_bytes(ws[i]->type, in, n))) return sdn_fail(err, SDN_ENOMEM, "out of memory (activations)");
        }
        j.act[j.nw++] = c->act[t];
    }
    if (j.nw > 0) {
        if (n >= 8 && c->n_threads > 1) sdn_pool_run(c->pool, prep_worker, &j);
        else prep_worker(&j, 0, 1);
        sdn_pool_run(c->pool, mm_worker, &j);
    }
    for (int i = 0; i < nw && j.nw < nw; i++) {
        const sdn_weight *w = ws[i];
        if (inv || prefill_on_kernels(w)) continue;
        if (w->type == SDN_TYPE_F32 || w->f32) {
            sgemm_job g = {.src = w->f32 ? w->f32 : (const float *)qdata(w), .r0 = 0, .r1 = w->out, .x = X, .n = n, .in = in,
                           .y = ys[i], .ldy = w->out};
            sdn_pool_run(c->pool, sgemm_worker, &g);
            continue;
        }
        if (!c->wtile) {
            c->wtile = malloc(SGEMM_TILE_FLOATS * sizeof(float));
            if (!c->wtile) return sdn_fail(err, SDN_ENOMEM, "out of memory (weight tile)");
        }
        long rows = (long)(SGEMM_TILE_FLOATS / (size_t)in);
        if (rows < 1) return sdn_fail(err, SDN_EUNSUP, "matrix row of %lld elements exceeds the SGEMM tile", (long long)in);
        for (long r0 = 0; r0 < w->out; r0 += rows) {
            long r1 = r0 + rows < w->out ? r0 + rows : w->out;
            /* the tile holds rows r0..r1 of W; the job's y + r0 + b addresses output column r0 + b */
            sgemm_job g = {.w = w, .dst = c->wtile, .r0 = r0, .r1 = r1, .x = X, .n = n, .in = in, .y = ys[i], .ldy = w->out};
            sdn_pool_run(c->pool, sgemm_worker, &g);
        }
    }
    c->st.matmul_s += sdn_now() - t0;
    return SDN_OK;
}

static int mm(sdn_ctx *c, const sdn_weight *w, const float *X, int n, float *Y, int inv, sdn_err *err) {
    return mm_group(c, &w, &Y, 1, X, n, inv, err);
}

/* ------------------------------------------------------------- elementwise ---- */

static void rmsnorm(float *o, const float *x, const float *w, int d, float eps) {
    float ss = 0.0f;
    for (int i = 0; i < d; i++) ss += x[i] * x[i];
    ss /= (float)d;
    ss += eps;
    ss = 1.0f / sqrtf(ss);
    for (int i = 0; i < d; i++) o[i] = w[i] * (ss * x[i]);
}

/* rmsnorm of n vectors of d (input i at x + i * ldx, output at o + i * ldo; o may be x): the
 * sums of squares of 4 vectors at a time, 4 independent chains (one sequential chain was a
 * fixed 4-cycle add per element), each the same sequence as rmsnorm's, so the same bits. */
static void rmsnorm_n(float *o, size_t ldo, const float *x, size_t ldx, const float *w, int d, float eps, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        const float *x0 = x + (size_t)i * ldx, *x1 = x0 + ldx, *x2 = x1 + ldx, *x3 = x2 + ldx;
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        for (int k = 0; k < d; k++) {
            s0 += x0[k] * x0[k];
            s1 += x1[k] * x1[k];
            s2 += x2[k] * x2[k];
            s3 += x3[k] * x3[k];
        }
        const float ss[4] = {s0, s1, s2, s3};
        for (int r = 0; r < 4; r++) {
            float s = ss[r];
            s /= (float)d;
            s += eps;
            s = 1.0f / sqrtf(s);
            const float *xr = x + (size_t)(i + r) * ldx;
            float *orow = o + (size_t)(i + r) * ldo;
            for (int k = 0; k < d; k++) orow[k] = w[k] * (s * xr[k]);
        }
    }
    for (; i < n; i++) rmsnorm(o + (size_t)i * ldo, x + (size_t)i * ldx, w, d, eps);
}

static void rope_table(const sdn_ctx *c, const sdn_batch *b, int kv_base, const double *inv_freq, float *out) {
    const sdn_model_config *cfg = &c->m->cfg;
    int half = cfg->rope_dims / 2;
    for (int i = 0; i < b->n; i++) {
        double p = (double)(b->pos ? b->pos[i] : kv_base + i) / cfg->rope_scale;
        float *cs = out + (size_t)i * cfg->rope_dims;
        for (int j = 0; j < half; j++) {
            double a = p * inv_freq[j];
            cs[2 * j] = (float)cos(a);
            cs[2 * j + 1] = (float)sin(a);
        }
    }
}

static void rope_tables(sdn_ctx *c, const sdn_batch *b, int kv_base) {
    rope_table(c, b, kv_base, c->inv_freq, c->rope_cs);
    if (c->inv_freq_swa) rope_table(c, b, kv_base, c->inv_freq_swa, c->rope_cs_swa);
}

/* tanh in float with the same bits on every architecture: the C library's tanhf is not
 * (glibc's x86-64 and AArch64 tanhf and erff give other bits for some inputs, while its exp,
 * expf, sin, cos, pow agree; issue 32, docs/kernels.md "AArch64"). (1 - e) / (1 + e) with
 * e = exp(-2|x|) in double, then rounded once to float: relative error far below float's
 * half ulp except at rounding boundaries; below 2^-12 tanh x = x in float (x^2/3 < 2^-25). */
static inline float tanh_f(float x) {
    const double y = fabs((double)x);
    if (y < 0x1p-12) return x;
    if (y > 20.0) return x > 0 ? 1.0f : -1.0f;
    const double e = exp(-2.0 * y);
    const float t = (float)((1.0 - e) / (1.0 + e));
    return x < 0 ? -t : t;
}

/* gelu with the tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
static inline float gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanh_f(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

/* The FFN's gated activation hb = act(hb) * hb2 over n x hidden elements, split over the
 * pool in contiguous ranges (elementwise: the same bits whatever the split). */
typedef struct glu_job {
    float *hb;
    const float *hb2;
    size_t n;
    int gelu;
} glu_job;

#ifdef FWD_SIMD
FWD_TARGET static void silu_mul_avx2(float *hb, const float *hb2, long b, long e);
FWD_TARGET static void gelu_mul_avx2(float *hb, const float *hb2, long b, long e);
#endif

static void glu_worker(void *arg, int ith, int nth) {
    const glu_job *j = arg;
    long b, e;
    sdn_pool_range((long)j->n, ith, nth, 16, &b, &e);
    float *hb = j->hb;
    const float *hb2 = j->hb2;
#ifdef FWD_SIMD
    if (j->gelu && g_simd > 0)
        gelu_mul_avx2(hb, hb2, b, e);
    else if (j->gelu)
#else
    if (j->gelu)
#endif
        for (long i = b; i < e; i++) hb[i] = gelu_tanh(hb[i]) * hb2[i];
#ifdef FWD_SIMD
    else if (g_simd > 0)
        silu_mul_avx2(hb, hb2, b, e);
#endif
    else
        for (long i = b; i < e; i++) {
            const float g = hb[i];
            hb[i] = g / (1.0f + expf(-g)) * hb2[i];
        }
}

/* Rotate n_h heads of one row in place. llama ("normal") rotates pairs (2j, 2j+1); NeoX
 * style (qwen2) rotates pairs (j, j + rope_dims/2). */
static void rope_row(const sdn_model_config *cfg, float *v, int n_h, const float *cs) {
    int half = cfg->rope_dims / 2;
    for (int h = 0; h < n_h; h++) {
        float *x = v + (size_t)h * cfg->head_dim;
        for (int j = 0; j < half; j++) {
            int i0 = cfg->rope_neox ? j : 2 * j, i1 = cfg->rope_neox ? j + half : 2 * j + 1;
            float c = cs[2 * j], s = cs[2 * j + 1], a = x[i0], bb = x[i1];
            x[i0] = a * c - bb * s;
            x[i1] = a * s + bb * c;
        }
    }
}

/* ---------------------------------------------------------------- attention ---- */

/* Vectorized e^x for x <= 0 (AVX2; also right for 0 < x <= 88, where 2^k stays a normal
 * float): range reduction x = k ln2 + r, |r| <= ln2/2, a degree-6 Taylor polynomial for e^r
 * (relative error < 2e-7), 2^k from exponent bits; x is clamped at -87. Used where many
 * exponentials are computed (softmax, silu), always through the same code, so results are
 * reproducible bit for bit. */
#ifdef FWD_SIMD
__attribute__((target("avx2,fma"))) static inline __m256 exp256(__m256 v) {
    v = _mm256_max_ps(v, _mm256_set1_ps(-87.0f));
    __m256 kf = _mm256_round_ps(_mm256_mul_ps(v, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(kf, _mm256_set1_ps(0.69314718f), v);
    __m256 p = _mm256_set1_ps(1.0f / 720);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(kf), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
#endif

/* hb[i] = silu(hb[i]) * hb2[i] = hb[i] / (1 + e^-hb[i]) * hb2[i] for b <= i < e, 8 lanes at a
 * time with exp256's polynomial (its argument clamped to [-87, 88]: e^88 is finite, and
 * silu is within float rounding of g or of 0 there); the last partial vector goes through the
 * same code with masked loads and stores, so an element's bits do not depend on where the
 * pool's range split falls (batch invariance). */
#ifdef FWD_SIMD
__attribute__((target("avx2,fma"))) static inline __m256 silu_mul8(__m256 g, __m256 u) {
    const __m256 ex = exp256(_mm256_min_ps(_mm256_sub_ps(_mm256_setzero_ps(), g), _mm256_set1_ps(88.0f)));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), ex)), u);
}
FWD_TARGET static void silu_mul_avx2(float *hb, const float *hb2, long b, long e) {
    long i = b;
    for (; i + 8 <= e; i += 8) _mm256_storeu_ps(hb + i, silu_mul8(_mm256_loadu_ps(hb + i), _mm256_loadu_ps(hb2 + i)));
    if (i < e) {
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(e - i)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_maskstore_ps(hb + i, m, silu_mul8(_mm256_maskload_ps(hb + i, m), _mm256_maskload_ps(hb2 + i, m)));
    }
}
#endif

/* hb[i] = gelu_tanh(hb[i]) * hb2[i] for b <= i < e on the x86 SIMD paths (Gemma 3's FFN),
 * 8 lanes at a time: gelu_tanh(x) = 0.5 x (1 + tanh(u)) = x / (1 + e^-2u) with
 * u = sqrt(2/pi) (x + 0.044715 x^3), so it is silu's code with e^-2u (exp256's polynomial,
 * its argument clamped to [-87, 88]) in place of e^-x: no cancellation near x = 0 or for large
 * negative x. The scalar gelu_tanh (double tanh) stays the portable path's and AArch64's: on
 * x86 SIMD paths Gemma's bits differ from portable as the SiLU models' already do (the per-path
 * activation functions, docs/kernels.md), never with the batch, split or thread count: the
 * last partial vector goes through the same code with masked loads and stores. */
#ifdef FWD_SIMD
__attribute__((target("avx2,fma"))) static inline __m256 gelu_mul8(__m256 g, __m256 up) {
    const __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
    const __m256 u = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f), _mm256_add_ps(g, _mm256_mul_ps(_mm256_set1_ps(0.044715f), g3)));
    const __m256 ex = exp256(_mm256_min_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f), u), _mm256_set1_ps(88.0f)));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), ex)), up);
}
FWD_TARGET static void gelu_mul_avx2(float *hb, const float *hb2, long b, long e) {
    long i = b;
    for (; i + 8 <= e; i += 8) _mm256_storeu_ps(hb + i, gelu_mul8(_mm256_loadu_ps(hb + i), _mm256_loadu_ps(hb2 + i)));
    if (i < e) {
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(e - i)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_maskstore_ps(hb + i, m, gelu_mul8(_mm256_maskload_ps(hb + i, m), _mm256_maskload_ps(hb2 + i, m)));
    }
}
#endif

/* sum_i exp(x[i] - m) for x[i] <= m, in double across lanes (LM-head normalizer). */
#ifdef FWD_SIMD
FWD_TARGET static int sum_exp_shifted_avx2(const float *x, int n, float m, double *total) {
    int i = 0;
    __m256 acc = _mm256_setzero_ps(), vm = _mm256_set1_ps(m);
    for (; i + 8 <= n; i += 8) acc = _mm256_add_ps(acc, exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm)));
    float lanes[8];
    _mm256_storeu_ps(lanes, acc);
    for (int j = 0; j < 8; j++) *total += lanes[j];
    return i;
}
#endif

static double sum_exp_shifted(const float *x, int n, float m) {
    int i = 0;
    double total = 0;
#ifdef FWD_SIMD
    if (g_simd > 0) i = sum_exp_shifted_avx2(x, n, m, &total);
#endif
    for (; i < n; i++) total += exp((double)x[i] - m);
    return total;
}

static void attention(sdn_ctx *c, const sdn_batch *b, int layer, int kv_base) {
    const sdn_model_config *cfg = &c->m->cfg;
    sdn_att_args a = {.kv = c->kv, .layer = layer, .q = c->q, .ldq = c->qd, .out = c->att, .n = b->n, .n_heads = cfg->n_heads,
                      .n_kv_heads = cfg->n_kv_heads, .head_dim = cfg->head_dim, .scale = cfg->attn_scale, .kv_base = kv_base,
                      .pos = b->pos, .mask = b->mask, .window = sdn_layer_is_swa(cfg, layer) ? cfg->n_swa : 0};
    sdn_attention(c->attws, c->pool, &a);
}

/* ------------------------------------------------------------------ forward ---- */

/* Top-k tokens and probabilities of the nl normalized rows in c->xb: the output matrix is
 * multiplied tile by tile (TOPK_TILE vocabulary rows); each row keeps its k best logits
 * (insertion into a sorted list) and an online log-sum-exp, then the k logits become
 * probabilities. Ties keep the lower token id first, like sdn_argmax. */
#define TOPK_TILE 4096

/* Final logit soft-capping (Gemma): x = cap * tanh(x / cap). */
static void softcap(float *x, size_t n, float cap) {
    for (size_t i = 0; i < n; i++) x[i] = cap * tanh_f(x[i] / cap);
}

static int topk_logits(sdn_ctx *c, const sdn_batch *b, int nl, int inv, sdn_err *err) {
    const sdn_model *m = c->m;
    int k = b->topk;
    /* candidate rows of the output matrix: the whole vocabulary, or the listed tokens
     * gathered into a temporary matrix of the same layout */
    sdn_weight out = m->output;
    void *gathered = NULL;
    int n_cand = m->cfg.vocab;
    if (b->topk_vocab && b->n_topk_vocab > 0) {
        n_cand = b->n_topk_vocab;
        gathered = malloc((size_t)n_cand * out.row_bytes);
        if (!gathered) return sdn_fail(err, SDN_ENOMEM, "out of memory (top-k vocabulary)");
        const void *src = qdata(&out);
        for (int i = 0; i < n_cand; i++)
            memcpy((char *)gathered + (size_t)i * out.row_bytes, (const char *)src + (size_t)b->topk_vocab[i] * out.row_bytes, out.row_bytes);
        out.data = gathered;
        out.q = NULL;
        out.f32 = NULL;
        out.out = n_cand;
    }
    float *tile = malloc((size_t)nl * TOPK_TILE * sizeof(float));
    double *mx = malloc((size_t)nl * sizeof(double)), *se = malloc((size_t)nl * sizeof(double));
    float *best = malloc((size_t)nl * k * sizeof(float));
    if (!tile || !mx || !se || !best) {
        free(tile); free(mx); free(se); free(best); free(gathered);
        return sdn_fail(err, SDN_ENOMEM, "out of memory (top-k logits)");
    }
    for (int r = 0; r < nl; r++) {
        mx[r] = -INFINITY;
        se[r] = 0;
        for (int j = 0; j < k; j++) { best[(size_t)r * k + j] = -INFINITY; b->topk_tok[(size_t)r * k + j] = -1; }
    }
    int rc = SDN_OK;
    for (int v0 = 0; v0 < n_cand && !rc; v0 += TOPK_TILE) {
        int nv = n_cand - v0 < TOPK_TILE ? n_cand - v0 : TOPK_TILE;
        sdn_weight w = out;
        w.data = (const char *)out.data + (size_t)v0 * out.row_bytes;
        /* packed: groups of SDN_PACK_COLS rows take the bytes of as many file rows, and v0
         * is a multiple of SDN_PACK_COLS, so the offset is the same */
        w.q = out.q ? (char *)out.q + (size_t)v0 * out.row_bytes : NULL;
        w.f32 = out.f32 ? out.f32 + (size_t)v0 * out.in : NULL;
        w.out = nv;
        if ((rc = mm(c, &w, c->xb, nl, tile, inv, err))) break;
        if (m->cfg.final_softcap > 0) softcap(tile, (size_t)nl * nv, m->cfg.final_softcap);
        for (int r = 0; r < nl; r++) {
            const float *lg = tile + (size_t)r * nv;
            float *bl = best + (size_t)r * k;
            int32_t *bt = b->topk_tok + (size_t)r * k;
            double m0 = mx[r];
            for (int i = 0; i < nv; i++) if (lg[i] > m0) m0 = lg[i];
            double s = se[r] * exp(mx[r] - m0) + sum_exp_shifted(lg, nv, (float)m0);
            for (int i = 0; i < nv; i++) {
                if (lg[i] > bl[k - 1]) {
                    int j = k - 1;
                    while (j > 0 && lg[i] > bl[j - 1]) { bl[j] = bl[j - 1]; bt[j] = bt[j - 1]; j--; }
                    bl[j] = lg[i];
                    bt[j] = gathered ? b->topk_vocab[v0 + i] : v0 + i;
                }
            }
            mx[r] = m0;
            se[r] = s;
        }
    }
    for (int r = 0; r < nl && !rc; r++)
        for (int j = 0; j < k; j++)
            b->topk_prob[(size_t)r * k + j] = (float)(exp((double)best[(size_t)r * k + j] - mx[r]) / se[r]);
    free(tile); free(mx); free(se); free(best); free(gathered);
    return rc;
}

static int check_batch(const sdn_ctx *c, const sdn_batch *b, sdn_err *err) {
    if (b->n < 1 || b->n > c->max_batch) return sdn_fail(err, SDN_EINVAL, "batch of %d tokens (1..%d allowed)", b->n, c->max_batch);
    if (c->n_kv + b->n > c->n_ctx)
        return sdn_fail(err, SDN_EINVAL, "context full: %d cached + %d new tokens exceed the context size %d (raise --ctx)", c->n_kv,
                        b->n, c->n_ctx);
    for (int i = 0; i < b->n; i++) {
        if (b->tokens[i] < 0 || b->tokens[i] >= c->m->cfg.vocab)
            return sdn_fail(err, SDN_EINVAL, "token id %d at batch row %d is outside the vocabulary (0..%d)", b->tokens[i], i,
                            c->m->cfg.vocab - 1);
        if (b->pos && b->pos[i] < 0) return sdn_fail(err, SDN_EINVAL, "negative position at batch row %d", i);
        if (b->mask) {
            if (!b->mask[(size_t)i * b->n + i]) return sdn_fail(err, SDN_EINVAL, "mask: row %d does not attend itself", i);
            for (int j = i + 1; j < b->n; j++)
                if (b->mask[(size_t)i * b->n + j]) return sdn_fail(err, SDN_EINVAL, "mask: row %d attends later row %d", i, j);
        }
    }
    /* a mask or explicit positions: each row's entries sit at their positions (attention.h),
     * which must lie past the committed ones and inside the cache, distinct among the rows
     * one row sees */
    if (b->mask || b->pos) {
        int dflt = !b->mask;
        for (int i = 0; dflt && i < b->n; i++) dflt = b->pos[i] == c->n_kv + i;
        if (!dflt) {
            if (b->n > SDN_INVARIANT_MAX_ROWS)
                return sdn_fail(err, SDN_EINVAL, "a batch with a mask or its own positions has at most %d rows (got %d)",
                                SDN_INVARIANT_MAX_ROWS, b->n);
            for (int i = 0; i < b->n; i++) {
                int p = b->pos ? b->pos[i] : c->n_kv + i;
                if (p < c->n_kv || p >= c->n_ctx)
                    return sdn_fail(err, SDN_EINVAL, "position %d at batch row %d is outside [%d, %d) (past the cached entries, inside the context)",
                                    p, i, c->n_kv, c->n_ctx);
                for (int j = 0; j < i; j++) {
                    int pj = b->pos ? b->pos[j] : c->n_kv + j;
                    if (pj == p && (!b->mask || b->mask[(size_t)i * b->n + j]))
                        return sdn_fail(err, SDN_EINVAL, "batch row %d sees row %d at the same position %d", i, j, p);
                }
            }
            for (int i = 0; b->mask && i < b->n; i++)
                for (int j = 0; j < i; j++)
                    for (int k = j + 1; k < i; k++) {
                        if (!b->mask[(size_t)i * b->n + j] || !b->mask[(size_t)i * b->n + k]) continue;
                        int pj = b->pos ? b->pos[j] : c->n_kv + j, pk = b->pos ? b->pos[k] : c->n_kv + k;
                        if (pj == pk) return sdn_fail(err, SDN_EINVAL, "batch row %d sees rows %d and %d at the same position %d", i, j, k, pj);
                    }
        }
    }
    if (b->n_logits > b->n || b->n_logits < -1) return sdn_fail(err, SDN_EINVAL, "n_logits %d out of range", b->n_logits);
    int cand = b->topk_vocab && b->n_topk_vocab > 0 ? b->n_topk_vocab : c->m->cfg.vocab;
    if (b->topk < 0 || b->topk > cand || (b->topk && (!b->topk_tok || !b->topk_prob)))
        return sdn_fail(err, SDN_EINVAL, "top-k of %d is invalid for a candidate vocabulary of %d", b->topk, cand);
    for (int i = 0; b->topk_vocab && i < b->n_topk_vocab; i++)
        if (b->topk_vocab[i] < 0 || b->topk_vocab[i] >= c->m->cfg.vocab)
            return sdn_fail(err, SDN_EINVAL, "top-k vocabulary entry %d (%d) is outside the vocabulary", i, b->topk_vocab[i]);
    for (int i = 0; i < b->n_logits; i++)
        if (!b->logit_rows || b->logit_rows[i] < 0 || b->logit_rows[i] >= b->n || (i && b->logit_rows[i] <= b->logit_rows[i - 1]))
            return sdn_fail(err, SDN_EINVAL, "logit_rows must be ascending rows of the batch");
    return SDN_OK;
}

static int path_invariant(sdn_path path, const sdn_batch *b) {
    if (path == SDN_PATH_DECODE) return 1;
    if (path == SDN_PATH_PREFILL) return 0;
    return b->invariant || b->n <= SDN_INVARIANT_MAX_ROWS;
}

int sdn_fwd_embed(sdn_ctx *c, const sdn_batch *b, float *x) {
    const sdn_model *m = c->m;
    for (int i = 0; i < b->n; i++) {
        float *xi = x + (size_t)i * m->cfg.dim;
        sdn_dequantize_row(m->tok_embd.type, (const char *)m->tok_embd.data + (size_t)b->tokens[i] * m->tok_embd.row_bytes, xi, m->cfg.dim);
        if (m->cfg.embd_scale != 1.0f)
            for (int d = 0; d < m->cfg.dim; d++) xi[d] *= m->cfg.embd_scale;
    }
    return SDN_OK;
}

/* The per-row steps of a layer between its matmuls (norms, biases, rope, residual adds), split
 * over the pool by rows from ROWS_POOL_MIN rows: a row's arithmetic does not depend on the
 * split, so the same bits. On one thread they held the other idle for about 8% of a 2,048-token
 * Gemma 3 prefill (six sequential norm sums per row and layer). */
#define ROWS_POOL_MIN 8
typedef enum { ROWS_ATTN_IN, ROWS_QKV, ROWS_ATTN_OUT, ROWS_FFN_OUT } rows_step;
typedef struct rows_job {
    sdn_ctx *c;
    const sdn_layer *y;
    float *x;
    int layer, n;
    rows_step step;
} rows_job;

static void rows_do(const rows_job *j, int i0, int i1) {
    sdn_ctx *c = j->c;
    const sdn_layer *y = j->y;
    const sdn_model_config *cfg = &c->m->cfg;
    const int dim = cfg->dim, nr = i1 - i0;
    float *x = j->x + (size_t)i0 * dim, *xb = c->xb + (size_t)i0 * dim, *xb2 = c->xb2 + (size_t)i0 * dim;
    switch (j->step) {
    case ROWS_ATTN_IN: /* xb = rmsnorm(x) */
        rmsnorm_n(xb, dim, x, dim, y->attn_norm, dim, cfg->rms_eps, nr);
        break;
    case ROWS_QKV: /* biases, per-head norms, rotations */
        for (int i = i0; i < i1; i++) {
            float *q = c->q + (size_t)i * c->qd, *k = c->k + (size_t)i * c->kvd, *v = c->v + (size_t)i * c->kvd;
            if (y->bq) {
                for (int d = 0; d < c->qd; d++) q[d] += y->bq[d];
                for (int d = 0; d < c->kvd; d++) { k[d] += y->bk[d]; v[d] += y->bv[d]; }
            }
            if (y->q_norm) {
                rmsnorm_n(q, cfg->head_dim, q, cfg->head_dim, y->q_norm, cfg->head_dim, cfg->rms_eps, cfg->n_heads);
                rmsnorm_n(k, cfg->head_dim, k, cfg->head_dim, y->k_norm, cfg->head_dim, cfg->rms_eps, cfg->n_kv_heads);
            }
            const float *cs = (c->rope_cs_swa && sdn_layer_is_swa(cfg, j->layer) ? c->rope_cs_swa : c->rope_cs) + (size_t)i * cfg->rope_dims;
            rope_row(cfg, q, cfg->n_heads, cs);
            rope_row(cfg, k, cfg->n_kv_heads, cs);
        }
        break;
    case ROWS_ATTN_OUT: /* x += rmsnorm(o) (gemma3) or o; xb = rmsnorm(x) */
        if (y->post_attn_norm) rmsnorm_n(xb2, dim, xb2, dim, y->post_attn_norm, dim, cfg->rms_eps, nr);
        for (size_t i = 0; i < (size_t)nr * dim; i++) x[i] += xb2[i];
        rmsnorm_n(xb, dim, x, dim, y->ffn_norm, dim, cfg->rms_eps, nr);
        break;
    case ROWS_FFN_OUT: /* x += rmsnorm(f) (gemma3) or f */
        if (y->post_ffn_norm) rmsnorm_n(xb2, dim, xb2, dim, y->post_ffn_norm, dim, cfg->rms_eps, nr);
        for (size_t i = 0; i < (size_t)nr * dim; i++) x[i] += xb2[i];
        break;
    }
}

static void rows_worker(void *arg, int ith, int nth) {
    const rows_job *j = arg;
    long b, e;
    sdn_pool_range(j->n, ith, nth, 1, &b, &e);
    if (b < e) rows_do(j, (int)b, (int)e);
}

static void rows_run(sdn_ctx *c, rows_job *j) {
    if (j->n >= ROWS_POOL_MIN && sdn_pool_size(c->pool) > 1) sdn_pool_run(c->pool, rows_worker, j);
    else rows_do(j, 0, j->n);
}

int sdn_fwd_layers(sdn_ctx *c, const sdn_batch *b, int kv_base, int l0, int l1, float *x, sdn_path path, sdn_err *err) {
    const sdn_model *m = c->m;
    const sdn_model_config *cfg = &m->cfg;
    int n = b->n, hid = cfg->hidden, inv = path_invariant(path, b), rc;
    if (l0 < 0 || l1 > cfg->n_layers || l0 >= l1) return sdn_fail(err, SDN_EINVAL, "layer range [%d, %d) invalid", l0, l1);
    if (n < 1 || n > c->max_batch || kv_base < 0 || kv_base + n > c->n_ctx)
        return sdn_fail(err, SDN_EINVAL, "batch of %d at KV slot %d does not fit (max batch %d, context %d)", n, kv_base, c->max_batch, c->n_ctx);
    double t_start = sdn_now(), t_mm0 = c->st.matmul_s, t_att = 0;
    blas_single_thread();
    rope_tables(c, b, kv_base);
    for (int l = l0; l < l1; l++) {
        const sdn_layer *y = &m->layers[l];
        rows_job rj = {.c = c, .y = y, .layer = l, .x = x, .n = n, .step = ROWS_ATTN_IN};
        rows_run(c, &rj);
        const sdn_weight *qkv[3] = {&y->wq, &y->wk, &y->wv};
        float *qkv_out[3] = {c->q, c->k, c->v};
        if ((rc = mm_group(c, qkv, qkv_out, 3, c->xb, n, inv, err))) return rc;
        rj.step = ROWS_QKV;
        rows_run(c, &rj);
        sdn_kv_store(c->kv, l, kv_base, n, c->k, c->v);
        double ta = sdn_now();
        attention(c, b, l, kv_base);
        t_att += sdn_now() - ta;
        if ((rc = mm(c, &y->wo, c->att, n, c->xb2, inv, err))) return rc;
        rj.step = ROWS_ATTN_OUT;
        rows_run(c, &rj);
        const sdn_weight *gu[2] = {&y->w_gate, &y->w_up};
        float *gu_out[2] = {c->hb, c->hb2};
        if ((rc = mm_group(c, gu, gu_out, 2, c->xb, n, inv, err))) return rc;
        glu_job gj = {.hb = c->hb, .hb2 = c->hb2, .n = (size_t)n * hid, .gelu = cfg->ffn_gelu};
        sdn_pool_run(c->pool, glu_worker, &gj);
        if ((rc = mm(c, &y->w_down, c->hb, n, c->xb2, inv, err))) return rc;
        rj.step = ROWS_FFN_OUT;
        rows_run(c, &rj);
    }
    double total = sdn_now() - t_start;
    c->st.attention_s += t_att;
    c->st.other_s += total - t_att - (c->st.matmul_s - t_mm0);
    return SDN_OK;
}

int sdn_fwd_head(sdn_ctx *c, const sdn_batch *b, const float *x, float *logits, sdn_path path, sdn_err *err) {
    const sdn_model *m = c->m;
    int dim = m->cfg.dim, n = b->n, inv = path_invariant(path, b), rc = SDN_OK;
    int nl = b->n_logits < 0 ? n : b->n_logits;
    if (nl == 0) return SDN_OK;
    double t0 = sdn_now(), t_mm0 = c->st.matmul_s;
    if (b->n_logits < 0) rmsnorm_n(c->xb, dim, x, dim, m->out_norm, dim, m->cfg.rms_eps, nl);
    else
        for (int r = 0; r < nl; r++) rmsnorm(c->xb + (size_t)r * dim, x + (size_t)b->logit_rows[r] * dim, m->out_norm, dim, m->cfg.rms_eps);
    if (b->topk > 0) {
        rc = topk_logits(c, b, nl, inv, err);
        c->st.topk_s += sdn_now() - t0;
    } else {
        rc = mm(c, &m->output, c->xb, nl, logits, inv, err);
        if (!rc && m->cfg.final_softcap > 0) softcap(logits, (size_t)nl * m->cfg.vocab, m->cfg.final_softcap);
    }
    c->st.other_s += sdn_now() - t0 - (c->st.matmul_s - t_mm0);
    return rc;
}

void sdn_kv_commit(sdn_ctx *c, int n) {
    if (n < 0 || c->n_kv + n > c->n_ctx) return;
    for (int i = 0; i < n; i++) c->kv_tok[c->n_kv + i] = c->kv_pos[c->n_kv + i] = -1; /* the block API does not see the tokens */
    c->n_kv += n;
}

size_t sdn_ctx_block_bytes(const sdn_ctx *c) { return sdn_kv_tile_bytes(c->kv); }

int sdn_ctx_block_export(const sdn_ctx *c, int blk, uint8_t *buf, sdn_err *err) {
    if (blk < 0 || (long)(blk + 1) * SDN_KV_TILE > c->n_kv)
        return sdn_fail(err, SDN_EINVAL, "prefix block %d is not committed (KV length %d)", blk, c->n_kv);
    sdn_kv_tile_export(c->kv, blk, buf);
    return SDN_OK;
}

int sdn_ctx_block_import(sdn_ctx *c, int blk, const uint8_t *buf, const int32_t *tokens, sdn_err *err) {
    if (blk < 0 || (long)blk * SDN_KV_TILE != c->n_kv || c->n_kv + SDN_KV_TILE > c->n_ctx)
        return sdn_fail(err, SDN_EINVAL, "prefix block %d cannot follow KV length %d in a context of %d", blk, c->n_kv, c->n_ctx);
    sdn_kv_tile_import(c->kv, blk, buf);
    for (int i = 0; i < SDN_KV_TILE; i++) {
        c->kv_tok[c->n_kv + i] = tokens[i];
        c->kv_pos[c->n_kv + i] = c->n_kv + i;
    }
    c->n_kv += SDN_KV_TILE;
    return SDN_OK;
}

const float *sdn_ctx_hidden(const sdn_ctx *c) { return c->x; }

int sdn_kv_fill_synthetic(sdn_ctx *c, int n, uint64_t seed, sdn_err *err) {
    if (n < 0 || c->n_kv + n > c->n_ctx)
        return sdn_fail(err, SDN_EINVAL, "synthetic KV fill: %d + %d entries exceed the context size %d", c->n_kv, n, c->n_ctx);
    const int chunk = 64;
    float *k = malloc((size_t)chunk * c->kvd * sizeof *k), *v = malloc((size_t)chunk * c->kvd * sizeof *v);
    if (!k || !v) { free(k); free(v); return sdn_fail(err, SDN_ENOMEM, "out of memory"); }
    sdn_rng rng;
    sdn_rng_seed(&rng, seed);
    for (int l = 0; l < c->m->cfg.n_layers; l++)
        for (int i = 0; i < n; i += chunk) {
            int m = n - i < chunk ? n - i : chunk;
            for (size_t j = 0; j < (size_t)m * c->kvd; j++) k[j] = 2.0f * sdn_rng_float(&rng) - 1.0f, v[j] = 2.0f * sdn_rng_float(&rng) - 1.0f;
            sdn_kv_store(c->kv, l, c->n_kv + i, m, k, v);
        }
    free(k); free(v);
    sdn_kv_commit(c, n);
    return SDN_OK;
}

int sdn_forward(sdn_ctx *c, const sdn_batch *b, float *logits, sdn_err *err) {
    int rc = check_batch(c, b, err);
    if (rc) return rc;
    sdn_fwd_embed(c, b, c->x);
    if ((rc = sdn_fwd_layers(c, b, c->n_kv, 0, c->m->cfg.n_layers, c->x, SDN_PATH_AUTO, err))) return rc;
    if ((rc = sdn_fwd_head(c, b, c->x, logits, SDN_PATH_AUTO, err))) return rc;
    /* what each entry holds, for prompt-prefix reuse: an entry counts only in the slot of its
     * own position (tree rows get there when sdn_kv_keep moves the accepted ones) */
    for (int i = 0; i < b->n; i++) {
        c->kv_tok[c->n_kv + i] = b->tokens[i];
        c->kv_pos[c->n_kv + i] = b->pos ? b->pos[i] : c->n_kv + i;
    }
    c->n_kv += b->n;
    c->st.forwards++;
    c->st.rows += b->n;
    return SDN_OK;
}
