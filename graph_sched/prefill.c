/* prefill.c - the scheduled chunked prefill (see prefill.h).
 *
 * The main thread walks the tasks (chunk c, block j) in chunk-major order. At each task
 * boundary it makes the plan's switches due there (wait for the block's G2 load, free its
 * G1), issues the plan's loads due there (queued on the loader thread; a load issued and
 * switched at the same boundary is waited for right away), then runs the
 * block's graph on the chunk's hidden states: G1 over S1 rows (padded), or, once switched,
 * G2 over S2-row sub-chunks. After the last block of a chunk the chunk's KV entries are
 * committed and, when asked, its top-k predictions computed. Resident layer-weight bytes
 * are accounted under a mutex: the loader thread adds a block's G2 bytes when its load
 * starts (the most it will hold), the main thread subtracts G1 bytes after freeing them. */
#include "graph_sched/prefill.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/sdn_util.h"
#include "engine/layout.h"
#include "graph_sched/loader.h"

struct sdn_gs {
    sdn_model *m;
    sdn_gs_mode mode;
    int s1, s2, has_costs;
    sdn_gs_costs costs;
    sdn_blocks bl;
    sdn_graph_bufs bufs;
    sdn_loader *ld;
    /* accounting (mu) */
    pthread_mutex_t mu;
    size_t sz1[SDN_GRAPH_MAX_BLOCKS], sz2[SDN_GRAPH_MAX_BLOCKS];
    int has1[SDN_GRAPH_MAX_BLOCKS], has2[SDN_GRAPH_MAX_BLOCKS];
    size_t cur;  /* resident layout bytes */
    size_t resv; /* bytes free in the layout reserve (resident too) */
    size_t resv_size; /* reserve size for switching modes: the largest block's G2 */
    int phase; /* 0 prefill, 1 switching, 2 done */
    int both_now;
    int *job_block; /* loader job id -> block */
    int job_cap;
    sdn_gs_stats st;
    sdn_gs_task_time *tl; /* timeline of the last prefill */
    int n_tl, tl_cap;
};

static const char *mode_names[] = {"single", "sync", "async", "progressive", "optimal"};

int sdn_gs_mode_parse(const char *s, sdn_gs_mode *out, sdn_err *err) {
    for (int i = 0; i < 5; i++)
        if (s && !strcmp(s, mode_names[i])) {
            *out = (sdn_gs_mode)i;
            return SDN_OK;
        }
    return sdn_fail(err, SDN_EINVAL, "graph mode '%s' is not one of single, sync, async, progressive, optimal", s ? s : "(null)");
}

const char *sdn_gs_mode_name(sdn_gs_mode m) { return m >= SDN_GS_SINGLE && m <= SDN_GS_OPTIMAL ? mode_names[m] : "?"; }

int sdn_gs_new(sdn_model *m, const sdn_gs_config *cfg, sdn_gs **out, sdn_err *err) {
    *out = NULL;
    const sdn_model_config *mc = sdn_model_cfg(m);
    int s1 = cfg->s1 > 0 ? cfg->s1 : SDN_GS_DEFAULT_S1, s2 = cfg->s2 > 0 ? cfg->s2 : SDN_GS_DEFAULT_S2;
    if (s2 > SDN_INVARIANT_MAX_ROWS) return sdn_fail(err, SDN_EINVAL, "decode graph of %d rows exceeds %d", s2, SDN_INVARIANT_MAX_ROWS);
    if (s1 > (1 << 16)) return sdn_fail(err, SDN_EINVAL, "prefill graph of %d rows is too large", s1);
    if (cfg->mode < SDN_GS_SINGLE || cfg->mode > SDN_GS_OPTIMAL) return sdn_fail(err, SDN_EINVAL, "graph mode %d invalid", (int)cfg->mode);
    if ((cfg->mode == SDN_GS_PROGRESSIVE || cfg->mode == SDN_GS_OPTIMAL) && !cfg->costs)
        return sdn_fail(err, SDN_EINVAL, "the %s schedule needs profiled costs (sdnpu profile)", mode_names[cfg->mode]);
    sdn_gs *gs = calloc(1, sizeof *gs);
    if (!gs) return sdn_fail(err, SDN_ENOMEM, "out of memory");
    gs->m = m;
    gs->mode = cfg->mode;
    gs->s1 = s1;
    gs->s2 = s2;
    if (cfg->costs) {
        gs->costs = *cfg->costs;
        gs->has_costs = 1;
    }
    pthread_mutex_init(&gs->mu, NULL);
    int rc = sdn_blocks_partition(mc->n_layers, cfg->n_blocks > 0 ? cfg->n_blocks : SDN_GS_DEFAULT_BLOCKS, &gs->bl, err);
    if (!rc) rc = sdn_graph_bufs_init(&gs->bufs, mc->dim, s1, s2, err);
    if (!rc) rc = sdn_loader_new(m, &gs->ld, err);
    if (!rc && cfg->pin > 0) {
        int online = sdn_cpus_online();
        rc = cfg->pin < online ? sdn_loader_pin(gs->ld, cfg->pin, online - cfg->pin, err)
                               : sdn_fail(err, SDN_EINVAL, "pinning: %d compute CPUs leave none of the %d online CPUs to the loader", cfg->pin, online);
    }
    if (rc) {
        sdn_gs_free(gs);
        return rc;
    }
    for (int j = 0; j < gs->bl.n; j++) {
        /* memory is accounted as allocated (layout.h: a layer's layout is one chunk rounded to 2 MiB) */
        gs->sz1[j] = sdn_layout_alloc_size(m, gs->bl.l0[j], gs->bl.l1[j], SDN_LAYOUT_F32);
        gs->sz2[j] = sdn_layout_alloc_size(m, gs->bl.l0[j], gs->bl.l1[j], SDN_LAYOUT_QUANT);
        if (gs->sz2[j] > gs->resv_size) gs->resv_size = gs->sz2[j];
    }
    *out = gs;
    return SDN_OK;
}

void sdn_gs_free(sdn_gs *gs) {
    if (!gs) return;
    sdn_loader_free(gs->ld);
    sdn_graph_bufs_free(&gs->bufs);
    pthread_mutex_destroy(&gs->mu);
    free(gs->job_block);
    free(gs->tl);
    free(gs);
}

const sdn_blocks *sdn_gs_blocks(const sdn_gs *gs) { return &gs->bl; }
int sdn_gs_s1(const sdn_gs *gs) { return gs->s1; }
int sdn_gs_s2(const sdn_gs *gs) { return gs->s2; }
const sdn_gs_stats *sdn_gs_last(const sdn_gs *gs) { return &gs->st; }
const sdn_gs_task_time *sdn_gs_timeline(const sdn_gs *gs, int *n) {
    *n = gs->n_tl;
    return gs->tl;
}
int sdn_gs_min_batch(const sdn_gs *gs) { return gs->s1 > SDN_INVARIANT_MAX_ROWS ? gs->s1 : SDN_INVARIANT_MAX_ROWS; }

int sdn_gs_kv_need(const sdn_gs *gs, int kv0, int n) {
    if (n < 1) return kv0;
    int C = (n + gs->s1 - 1) / gs->s1, last = n - (C - 1) * gs->s1;
    int g2 = (last + gs->s2 - 1) / gs->s2 * gs->s2;
    return kv0 + (C - 1) * gs->s1 + (gs->s1 > g2 ? gs->s1 : g2);
}

/* ---- accounting ---- */

static void recount(sdn_gs *gs) {
    pthread_mutex_lock(&gs->mu);
    gs->cur = 0;
    gs->both_now = 0;
    for (int j = 0; j < gs->bl.n; j++) {
        gs->has1[j] = sdn_layout_resident(gs->m, gs->bl.l0[j], gs->bl.l1[j], SDN_LAYOUT_F32) > 0;
        gs->has2[j] = sdn_layout_resident(gs->m, gs->bl.l0[j], gs->bl.l1[j], SDN_LAYOUT_QUANT) > 0;
        gs->cur += (gs->has1[j] ? gs->sz1[j] : 0) + (gs->has2[j] ? gs->sz2[j] : 0);
        gs->both_now += gs->has1[j] && gs->has2[j];
    }
    gs->resv = sdn_layout_reserve_bytes(gs->m);
    gs->phase = 0;
    gs->st.bytes_prefill_peak = gs->cur + gs->resv;
    gs->st.bytes_switch_peak = 0;
    gs->st.max_both = gs->both_now;
    pthread_mutex_unlock(&gs->mu);
}

static void note_peak(sdn_gs *gs) { /* under mu */
    size_t *pk = gs->phase == 0 ? &gs->st.bytes_prefill_peak : &gs->st.bytes_switch_peak;
    if (gs->cur + gs->resv > *pk) *pk = gs->cur + gs->resv;
    if (gs->both_now > gs->st.max_both) gs->st.max_both = gs->both_now;
}

static void on_load_event(void *ud, int job, int done) {
    sdn_gs *gs = ud;
    if (done) return;
    pthread_mutex_lock(&gs->mu);
    int j = job < gs->job_cap ? gs->job_block[job] : -1;
    if (j >= 0 && !gs->has2[j]) {
        gs->has2[j] = 1;
        gs->cur += gs->sz2[j];
        size_t r = sdn_layout_reserve_bytes(gs->m); /* the load is about to take its memory from the reserve */
        gs->resv = r > gs->sz2[j] ? r - gs->sz2[j] : 0;
        gs->both_now += gs->has1[j];
        note_peak(gs);
    }
    pthread_mutex_unlock(&gs->mu);
}

static void free_g1(sdn_gs *gs, int j) {
    double t0 = sdn_now();
    /* the freed chunks stay in the reserve as far as the loads still to come can use them
     * (their G2 bytes), so no load of this prefill faults fresh memory while memory freed
     * earlier in it is at hand; the rest goes back to the system */
    size_t need = 0;
    pthread_mutex_lock(&gs->mu);
    for (int b = 0; b < gs->bl.n; b++)
        if (!gs->has2[b]) need += gs->sz2[b];
    pthread_mutex_unlock(&gs->mu);
    if (gs->mode != SDN_GS_SINGLE) sdn_layout_set_reserve(gs->m, need, 0, NULL);
    sdn_layout_unload(gs->m, gs->bl.l0[j], gs->bl.l1[j], SDN_LAYOUT_F32);
    gs->st.t_unload += sdn_now() - t0;
    pthread_mutex_lock(&gs->mu);
    if (gs->has1[j]) {
        gs->has1[j] = 0;
        gs->cur -= gs->sz1[j];
        gs->both_now -= gs->has2[j];
    }
    gs->resv = sdn_layout_reserve_bytes(gs->m);
    note_peak(gs);
    pthread_mutex_unlock(&gs->mu);
}

/* every layer on G1 only (single: on both) */
static int state_ready(sdn_gs *gs) {
    int L = sdn_model_cfg(gs->m)->n_layers;
    for (int l = 0; l < L; l++) {
        int g1 = sdn_layout_is_loaded(gs->m, l, SDN_LAYOUT_F32);
        int g2_all = sdn_layout_is_loaded(gs->m, l, SDN_LAYOUT_QUANT), g2_any = sdn_layout_resident(gs->m, l, l + 1, SDN_LAYOUT_QUANT) > 0;
        if (gs->mode == SDN_GS_SINGLE ? !(g1 && g2_all) : !(g1 && !g2_any)) return 0;
    }
    return 1;
}

int sdn_gs_prepare(sdn_gs *gs, sdn_err *err) {
    int rc = sdn_loader_wait_all(gs->ld, NULL);
    (void)rc;
    int L = sdn_model_cfg(gs->m)->n_layers;
    /* switching modes keep a reserve of the largest block's G2 bytes, faulted in, for the
     * loads to copy into (layout.h); single never loads during a run */
    size_t resv = gs->mode == SDN_GS_SINGLE ? 0 : gs->resv_size;
    if ((rc = sdn_layout_set_reserve(gs->m, resv, 0, err))) return rc;
    if (gs->mode != SDN_GS_SINGLE) sdn_layout_unload(gs->m, 0, L, SDN_LAYOUT_QUANT);
    /* the G1 layouts: the upper half of the layers on the loader thread (its own CPUs when
     * pinned), the lower half here */
    int half = L / 2, id = -1;
    if (half > 0 && (rc = sdn_loader_submit(gs->ld, half, L, SDN_LAYOUT_F32, NULL, NULL, &id, err))) return rc;
    rc = sdn_layout_load(gs->m, 0, half > 0 ? half : L, SDN_LAYOUT_F32, NULL, err);
    int rw = id >= 0 ? sdn_loader_wait(gs->ld, id, NULL, rc ? NULL : err) : SDN_OK;
    if (!rc) rc = rw;
    if (!rc) rc = sdn_loader_reset(gs->ld, err); /* a run's job ids start at 0 */
    if (rc) return sdn_fail(err, rc, "preparing the prefill graphs");
    if (gs->mode == SDN_GS_SINGLE && (rc = sdn_layout_load(gs->m, 0, L, SDN_LAYOUT_QUANT, NULL, err)))
        return sdn_fail(err, rc, "preparing the decode graphs");
    if ((rc = sdn_layout_set_reserve(gs->m, resv, 1, err))) return rc;
    recount(gs);
    return SDN_OK;
}

/* ---- planning ---- */

int sdn_gs_instance(const sdn_blocks *bl, const sdn_gs_costs *costs, sdn_gs_mode mode, int s1, int s2, int n, int kv0, sdn_sched_inst *out,
                    sdn_err *err) {
    if (n < 1 || s1 < 1 || s2 < 1) return sdn_fail(err, SDN_EINVAL, "instance: %d tokens, graphs %d/%d", n, s1, s2);
    int C = (n + s1 - 1) / s1, N = bl->n;
    int rc = sdn_sched_inst_init(out, N, C, err);
    if (rc) return rc;
    for (int c = 0; c < C; c++) {
        int nc = n - c * s1 < s1 ? n - c * s1 : s1, base = kv0 + c * s1;
        double t1 = sdn_lat_eval(&costs->g1, s1, base), t2 = 0;
        for (int s = 0; s * s2 < nc; s++) t2 += sdn_lat_eval(&costs->g2, s2, base + s * s2);
        for (int j = 0; j < N; j++) {
            int L = bl->l1[j] - bl->l0[j];
            out->g1[c * N + j] = L * (t1 > 0 ? t1 : 0);
            out->g2[c * N + j] = L * (t2 > 0 ? t2 : 0);
        }
    }
    double tau = mode == SDN_GS_SYNC || costs->load_g2_ovl <= 0 ? costs->load_g2 : costs->load_g2_ovl;
    for (int j = 0; j < N; j++) out->load[j] = (bl->l1[j] - bl->l0[j]) * (tau > 0 ? tau : 0);
    return SDN_OK;
}

int sdn_gs_make_plan(sdn_gs_mode mode, const sdn_sched_inst *in, sdn_sched_plan *out, sdn_err *err) {
    double v;
    switch (mode) {
    case SDN_GS_SINGLE: out->n = 0; return SDN_OK;
    case SDN_GS_SYNC: sdn_sched_sync(in, out); return SDN_OK;
    case SDN_GS_ASYNC: sdn_sched_async(in, out); return SDN_OK;
    case SDN_GS_PROGRESSIVE: sdn_sched_progressive(in, out); return SDN_OK;
    case SDN_GS_OPTIMAL: return sdn_sched_optimal(in, out, &v, err);
    }
    return sdn_fail(err, SDN_EINVAL, "graph mode %d invalid", (int)mode);
}

/* ---- the run ---- */

typedef struct run {
    sdn_gs *gs;
    int P;
    int job[SDN_SCHED_MAX_BLOCKS]; /* plan item -> loader job */
    int on_g2[SDN_GRAPH_MAX_BLOCKS];
    int switched;
} run;

static int ensure_jobs(sdn_gs *gs, int n, sdn_err *err) {
    if (n <= gs->job_cap) return SDN_OK;
    pthread_mutex_lock(&gs->mu);
    int *nb = realloc(gs->job_block, (size_t)n * sizeof(int));
    if (nb) {
        gs->job_block = nb;
        for (int i = gs->job_cap; i < n; i++) nb[i] = -1;
        gs->job_cap = n;
    }
    pthread_mutex_unlock(&gs->mu);
    return nb ? SDN_OK : sdn_fail(err, SDN_ENOMEM, "out of memory");
}

static int do_switch(run *r, int i, int e, sdn_err *err) {
    sdn_gs *gs = r->gs;
    sdn_gs_stats *st = &gs->st;
    int j = st->plan.item[i].block;
    sdn_loader_job_info info;
    double t0 = sdn_now();
    int rc = sdn_loader_wait(gs->ld, r->job[i], &info, err);
    double w = sdn_now() - t0;
    st->t_wait += w;
    if (e == r->P) st->t_wait_end += w;
    if (rc) return sdn_fail(err, rc, "loading the decode graph of block %d", j);
    st->t_load += info.t_end - info.t_start;
    st->load_t0[i] = info.t_start;
    st->load_t1[i] = info.t_end;
    if (gs->has1[j]) free_g1(gs, j);
    r->on_g2[j] = 1;
    if (++r->switched == st->plan.n) {
        pthread_mutex_lock(&gs->mu);
        gs->phase = 2;
        pthread_mutex_unlock(&gs->mu);
    }
    return SDN_OK;
}

/* Boundary e: the switches of loads issued earlier (their G1 is freed before the next load
 * starts), then the loads issued here, then the switches of loads issued here. */
static int boundary(run *r, int e, sdn_err *err) {
    sdn_gs *gs = r->gs;
    sdn_gs_stats *st = &gs->st;
    int rc;
    for (int i = 0; i < st->plan.n; i++)
        if (st->plan.item[i].sw == e && st->plan.item[i].issue < e && (rc = do_switch(r, i, e, err))) return rc;
    for (int i = 0; i < st->plan.n; i++) {
        const sdn_sched_load *l = &st->plan.item[i];
        if (l->issue != e) continue;
        int j = l->block, id;
        int next = sdn_loader_count(gs->ld);
        if ((rc = ensure_jobs(gs, next + 1, err))) return rc;
        pthread_mutex_lock(&gs->mu);
        gs->job_block[next] = j;
        if (gs->phase == 0) gs->phase = 1;
        pthread_mutex_unlock(&gs->mu);
        if ((rc = sdn_loader_submit(gs->ld, gs->bl.l0[j], gs->bl.l1[j], SDN_LAYOUT_QUANT, on_load_event, gs, &id, err))) return rc;
        r->job[i] = id;
    }
    for (int i = 0; i < st->plan.n; i++)
        if (st->plan.item[i].sw == e && st->plan.item[i].issue == e && (rc = do_switch(r, i, e, err))) return rc;
    return SDN_OK;
}

/* Nothing to prefill (a one-token prompt): switch every block to G2 (loads exposed). */
static int switch_only(sdn_gs *gs, sdn_err *err) {
    sdn_gs_stats *st = &gs->st;
    double t_start = sdn_now();
    memset(st, 0, sizeof *st);
    gs->n_tl = 0;
    st->mode = gs->mode;
    st->n_blocks = gs->bl.n;
    st->s1 = gs->s1;
    st->s2 = gs->s2;
    int rc = sdn_loader_wait_all(gs->ld, err);
    if (!rc) rc = sdn_loader_reset(gs->ld, err);
    if (rc) return rc;
    if (!state_ready(gs)) {
        double t0 = sdn_now();
        if ((rc = sdn_gs_prepare(gs, err))) return rc;
        st->t_prepare = sdn_now() - t0;
    } else
        recount(gs);
    if (gs->mode != SDN_GS_SINGLE) {
        run r = {.gs = gs, .P = 0};
        sdn_sched_inst in = {.n_blocks = gs->bl.n, .n_chunks = 0};
        sdn_sched_sync(&in, &st->plan);
        for (int j = 0; j < gs->bl.n; j++) free_g1(gs, j); /* no task needs G1 */
        if (!(rc = boundary(&r, 0, err))) rc = sdn_layout_set_reserve(gs->m, 0, 0, err);
        if (rc) {
            sdn_loader_wait_all(gs->ld, NULL);
            return sdn_fail(err, rc, "graph prefill (%s)", sdn_gs_mode_name(gs->mode));
        }
    }
    pthread_mutex_lock(&gs->mu);
    gs->phase = 2;
    st->bytes_decode = gs->cur + sdn_layout_reserve_bytes(gs->m);
    pthread_mutex_unlock(&gs->mu);
    st->t_prefill = sdn_now() - t_start;
    return SDN_OK;
}

int sdn_gs_prefill(void *ud, sdn_ctx *c, const int32_t *tokens, int n, int topk, const int32_t *vocab, int n_vocab, int32_t *tok,
                   float *prob, sdn_err *err) {
    sdn_gs *gs = ud;
    sdn_gs_stats *st = &gs->st;
    if (sdn_ctx_model(c) != gs->m) return sdn_fail(err, SDN_EINVAL, "graph prefill: the context belongs to another model");
    if (n < 0) return sdn_fail(err, SDN_EINVAL, "graph prefill: %d tokens", n);
    if (n == 0) return switch_only(gs, err);
    int N = gs->bl.n, s1 = gs->s1, C = (n + s1 - 1) / s1, kv0 = sdn_kv_len(c), rc;
    if (sdn_ctx_max_batch(c) < sdn_gs_min_batch(gs))
        return sdn_fail(err, SDN_EINVAL, "graph prefill: the context's max batch %d is below the prefill graph's %d rows", sdn_ctx_max_batch(c),
                        sdn_gs_min_batch(gs));
    int need = sdn_gs_kv_need(gs, kv0, n);
    if (need > sdn_ctx_n_ctx(c))
        return sdn_fail(err, SDN_EINVAL, "graph prefill: %d tokens in %d-row chunks need %d KV slots, the context has %d (raise --ctx)", n, s1,
                        need, sdn_ctx_n_ctx(c));
    double t_start = sdn_now();
    sdn_gs_mode mode = gs->mode;
    memset(st, 0, sizeof *st);
    st->mode = mode;
    st->n_tokens = n;
    st->n_blocks = N;
    st->n_chunks = C;
    st->s1 = s1;
    st->s2 = gs->s2;
    if ((rc = sdn_loader_wait_all(gs->ld, err)) || (rc = sdn_loader_reset(gs->ld, err))) return rc;
    if (!state_ready(gs)) {
        double t0 = sdn_now();
        if ((rc = sdn_gs_prepare(gs, err))) return rc;
        st->t_prepare = sdn_now() - t0;
    } else
        recount(gs);
    /* plan */
    sdn_sched_inst in = {0};
    int have_inst = 0;
    if (gs->has_costs) {
        if ((rc = sdn_gs_instance(&gs->bl, &gs->costs, mode, s1, gs->s2, n, kv0, &in, err))) return rc;
        have_inst = 1;
    } else if ((rc = sdn_sched_inst_init(&in, N, C, err)))
        return rc;
    rc = sdn_gs_make_plan(mode, &in, &st->plan, err);
    if (!rc && have_inst) {
        sdn_sched_result pr;
        sdn_sched_simulate(&in, &st->plan, &pr);
        st->predicted = pr.makespan;
    }
    sdn_sched_inst_free(&in);
    if (rc) return rc;

    run r = {.gs = gs, .P = N * C};
    gs->n_tl = 0;
    if (r.P > gs->tl_cap) {
        sdn_gs_task_time *t = realloc(gs->tl, (size_t)r.P * sizeof *t);
        if (!t) return sdn_fail(err, SDN_ENOMEM, "graph prefill: out of memory (timeline)");
        gs->tl = t;
        gs->tl_cap = r.P;
    }
    int K = topk > 0 ? topk : 0;
    for (int ci = 0; ci < C && !rc; ci++) {
        int nc = n - ci * s1 < s1 ? n - ci * s1 : s1, base = kv0 + ci * s1;
        double t0 = sdn_now();
        rc = sdn_graph_embed(c, &gs->bufs, tokens + (size_t)ci * s1, nc, 0, err);
        st->t_compute += sdn_now() - t0;
        for (int j = 0; j < N && !rc; j++) {
            if ((rc = boundary(&r, ci * N + j, err))) break;
            sdn_graph g = {r.on_g2[j] ? SDN_GRAPH_G2 : SDN_GRAPH_G1, gs->bl.l0[j], gs->bl.l1[j], r.on_g2[j] ? gs->s2 : s1};
            t0 = sdn_now();
            rc = sdn_graph_run(c, &g, gs->bufs.x, nc, base, err);
            double t1 = sdn_now(), dt = t1 - t0;
            gs->tl[gs->n_tl++] = (sdn_gs_task_time){t0, t1, r.on_g2[j], 0};
            st->t_compute += dt;
            *(r.on_g2[j] ? &st->t_g2 : &st->t_g1) += dt;
            int rows = sdn_graph_rows_run(&g, nc);
            st->rows_real += nc;
            st->rows_run += rows;
            if (r.on_g2[j]) {
                st->g2_tasks++;
                st->g2_passes += rows / gs->s2;
            } else
                st->g1_tasks++;
            if (ci == C - 1 && !r.on_g2[j] && mode != SDN_GS_SINGLE && gs->has1[j]) free_g1(gs, j);
        }
        if (rc) break;
        sdn_kv_commit(c, nc);
        if (K) {
            sdn_batch b = {.n = nc, .tokens = tokens + (size_t)ci * s1, .n_logits = -1, .topk = K,
                           .topk_tok = tok + (size_t)ci * s1 * K, .topk_prob = prob + (size_t)ci * s1 * K,
                           .topk_vocab = vocab, .n_topk_vocab = n_vocab};
            t0 = sdn_now();
            rc = sdn_fwd_head(c, &b, gs->bufs.x, NULL, SDN_PATH_PREFILL, err);
            st->t_compute += sdn_now() - t0;
        }
    }
    if (!rc) rc = boundary(&r, r.P, err);
    if (!rc && mode != SDN_GS_SINGLE) { /* every block switched: decoding needs no reserve (the next prepare refills it) */
        double t0 = sdn_now();
        rc = sdn_layout_set_reserve(gs->m, 0, 0, err);
        st->t_unload += sdn_now() - t0;
    }
    if (rc) {
        sdn_loader_wait_all(gs->ld, NULL);
        return sdn_fail(err, rc, "graph prefill (%s)", sdn_gs_mode_name(mode));
    }
    pthread_mutex_lock(&gs->mu);
    gs->phase = 2;
    st->bytes_decode = gs->cur + sdn_layout_reserve_bytes(gs->m);
    pthread_mutex_unlock(&gs->mu);
    for (int e = 0; e < gs->n_tl; e++) /* every load has been waited for: its interval is known */
        for (int i = 0; i < st->plan.n; i++)
            if (st->load_t1[i] > gs->tl[e].t0 && st->load_t0[i] < gs->tl[e].t1) gs->tl[e].loading = 1;
    if (mode != SDN_GS_SINGLE)
        for (int j = 0; j < N; j++)
            if (!r.on_g2[j] || gs->has1[j])
                return sdn_fail(err, SDN_ESTATE, "graph prefill: block %d did not end on its decode graph", j);
    st->t_prefill = sdn_now() - t_start;
    return SDN_OK;
}

void sdn_gs_stats_print(const sdn_gs_stats *s, FILE *f) {
    double hidden = s->t_load > 0 && s->t_wait < s->t_load ? 1 - s->t_wait / s->t_load : 0;
    fprintf(f, "[graphs %s] %d tokens, %d chunks x %d blocks, G1 %d rows, G2 %d rows | prefill %.1f ms (compute %.1f, waiting for loads %.1f, "
               "of which at the end %.1f; predicted %.1f) | loads %.1f ms, %.0f%% overlapped with compute | tasks G1 %d, G2 %d (%d passes), padding %.0f%% | "
               "layer weights MiB: prefill %.1f, switching %.1f, decoding %.1f; both layouts held by <= %d block%s\n",
            sdn_gs_mode_name(s->mode), s->n_tokens, s->n_chunks, s->n_blocks, s->s1, s->s2, 1e3 * s->t_prefill, 1e3 * s->t_compute,
            1e3 * s->t_wait, 1e3 * s->t_wait_end, 1e3 * s->predicted, 1e3 * s->t_load, 100 * hidden, s->g1_tasks, s->g2_tasks, s->g2_passes,
            s->rows_run ? 100.0 * (double)(s->rows_run - s->rows_real) / (double)s->rows_run : 0.0, s->bytes_prefill_peak / 1048576.0,
            s->bytes_switch_peak / 1048576.0, s->bytes_decode / 1048576.0, s->max_both, s->max_both == 1 ? "" : "s");
}
