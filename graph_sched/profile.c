/* profile.c - measuring the graphs and fitting the latency models (see profile.h).
 *
 * Order of the warm-up runs, per block: G1 at S1 rows at KV bases 0, S1, 2*S1, 3*S1 (each
 * run writes the KV entries the next one attends, so every attended entry is a real
 * computed value), then G1 at the fitted and held-out lengths at base 0, then G2 likewise
 * (its KV-base points reuse the entries G1 wrote). Every compute run starts from freshly
 * embedded random tokens. Compute points keep the minimum of their runs (`reps` runs for
 * the KV-base points and decode steps, 2 for the length points), loads the median of
 * `reps`; the fits pool the blocks (per layer). */
#include "graph_sched/profile.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/sdn_util.h"
#include "engine/forward.h"
#include "engine/layout.h"
#include "graph_sched/graph.h"
#include "graph_sched/loader.h"

static const int def_g1[] = {32, 64, 128, 256}, def_g1h[] = {48, 96, 192}, def_g2[] = {8, 16, 32, 64}, def_g2h[] = {12, 24, 48},
                 def_shapes[] = {1, 4, 8, 16, 32, 64};

void sdn_profile_opts_default(sdn_profile_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_blocks = 8;
    o->s1 = 256;
    o->reps = 3;
}

static void fill_default(int *dst, int *n, const int *src, int ns) {
    if (*n > 0) return;
    memcpy(dst, src, (size_t)ns * sizeof(int));
    *n = ns;
}

void sdn_machine_id(char *buf, size_t cap) {
    char model[128];
    sdn_cpu_model(model, sizeof model);
    snprintf(buf, cap, "%s x%ld", model, sysconf(_SC_NPROCESSORS_ONLN));
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Compute times keep the minimum of their repetitions: on a shared machine interference
 * only ever adds time. Loads keep the median (the allocator's state varies between runs). */
static double minimum(const double *v, int n) {
    double m = v[0];
    for (int i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
    return m;
}

static int add_meas(sdn_profile *p, int *cap, sdn_profile_meas m, sdn_err *err) {
    if (p->n_meas == *cap) {
        int nc = *cap ? 2 * *cap : 256;
        sdn_profile_meas *nm = realloc(p->meas, (size_t)nc * sizeof *nm);
        if (!nm) return sdn_fail(err, SDN_ENOMEM, "profile: out of memory");
        p->meas = nm;
        *cap = nc;
    }
    p->meas[p->n_meas++] = m;
    return SDN_OK;
}

void sdn_profile_free(sdn_profile *p) {
    if (!p) return;
    free(p->meas);
    free(p);
}

typedef struct prof_run {
    sdn_model *m;
    sdn_ctx *c;
    sdn_graph_bufs bufs;
    int32_t *toks; /* random tokens, bufs.rows of them */
    int dim;
} prof_run;

/* seconds of one graph run over fresh embeddings */
static int time_graph(prof_run *r, sdn_graph_kind kind, int l0, int l1, int rows, int kv, double *sec, sdn_err *err) {
    int rc = sdn_graph_embed(r->c, &r->bufs, r->toks, rows, 0, err);
    if (rc) return rc;
    sdn_graph g = {kind, l0, l1, rows};
    double t0 = sdn_now();
    rc = sdn_graph_run(r->c, &g, r->bufs.x, rows, kv, err);
    *sec = sdn_now() - t0;
    return rc;
}

static void plog(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void plog(FILE *f, const char *fmt, ...) {
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fflush(f);
}

int sdn_profile_measure(sdn_model *m, int threads, const sdn_profile_opts *oi, sdn_profile **out, sdn_err *err) {
    *out = NULL;
    sdn_profile_opts o = *oi;
    if (o.n_blocks <= 0) o.n_blocks = 8;
    if (o.s1 <= 0) o.s1 = 256;
    if (o.reps <= 0) o.reps = 3;
    if (o.reps > 15) o.reps = 15;
    fill_default(o.g1_lens, &o.n_g1, def_g1, 4);
    fill_default(o.g1_hold, &o.n_g1_hold, def_g1h, 3);
    fill_default(o.g2_lens, &o.n_g2, def_g2, 4);
    fill_default(o.g2_hold, &o.n_g2_hold, def_g2h, 3);
    fill_default(o.shapes, &o.n_shapes, def_shapes, 6);
    int maxrows = o.s1;
    for (int i = 0; i < o.n_g1; i++) maxrows = o.g1_lens[i] > maxrows ? o.g1_lens[i] : maxrows;
    for (int i = 0; i < o.n_g1_hold; i++) maxrows = o.g1_hold[i] > maxrows ? o.g1_hold[i] : maxrows;
    int g2max = 1;
    for (int i = 0; i < o.n_g2; i++) {
        if (o.g2_lens[i] < 1 || o.g2_lens[i] > SDN_INVARIANT_MAX_ROWS)
            return sdn_fail(err, SDN_EINVAL, "profile: G2 length %d outside 1..%d", o.g2_lens[i], SDN_INVARIANT_MAX_ROWS);
        g2max = o.g2_lens[i] > g2max ? o.g2_lens[i] : g2max;
    }
    for (int i = 0; i < o.n_shapes; i++)
        if (o.shapes[i] < 1 || o.shapes[i] > SDN_INVARIANT_MAX_ROWS)
            return sdn_fail(err, SDN_EINVAL, "profile: decode shape %d outside 1..%d", o.shapes[i], SDN_INVARIANT_MAX_ROWS);
    if (g2max > maxrows) maxrows = g2max;
    if (SDN_INVARIANT_MAX_ROWS > maxrows) maxrows = SDN_INVARIANT_MAX_ROWS;

    const sdn_model_config *cfg = sdn_model_cfg(m);
    sdn_blocks bl;
    int rc = sdn_blocks_partition(cfg->n_layers, o.n_blocks, &bl, err);
    if (rc) return rc;
    sdn_profile *p = calloc(1, sizeof *p);
    if (!p) return sdn_fail(err, SDN_ENOMEM, "profile: out of memory");
    snprintf(p->fingerprint, sizeof p->fingerprint, "%016llx", (unsigned long long)sdn_model_fingerprint(m));
    p->threads = threads;
    sdn_machine_id(p->machine, sizeof p->machine);
    p->n_layers = cfg->n_layers;
    p->n_blocks = bl.n;
    p->s1 = o.s1;
    memcpy(p->l0, bl.l0, sizeof p->l0);
    memcpy(p->l1, bl.l1, sizeof p->l1);

    prof_run r = {.m = m, .dim = cfg->dim};
    sdn_loader *ld = NULL;
    int cap = 0;
    double *tv = malloc(16 * sizeof(double));
    sdn_ctx_params cp = {.n_ctx = 4 * o.s1 + maxrows + 8, .n_threads = threads, .max_batch = maxrows, .file_layout = 1};
    if (!tv) { rc = sdn_fail(err, SDN_ENOMEM, "profile: out of memory"); goto done; }
    if ((rc = sdn_ctx_new(m, &cp, &r.c, err))) goto done;
    if ((rc = sdn_graph_bufs_init(&r.bufs, cfg->dim, maxrows, 1, err))) goto done;
    r.toks = malloc((size_t)r.bufs.rows * sizeof(int32_t));
    if (!r.toks) { rc = sdn_fail(err, SDN_ENOMEM, "profile: out of memory"); goto done; }
    sdn_rng rng;
    sdn_rng_seed(&rng, 1234);
    for (int i = 0; i < r.bufs.rows; i++) r.toks[i] = (int32_t)sdn_rng_below(&rng, (uint64_t)cfg->vocab);
    sdn_layout_unload(m, 0, cfg->n_layers, SDN_LAYOUT_F32);
    sdn_layout_unload(m, 0, cfg->n_layers, SDN_LAYOUT_QUANT);

    /* 1. loads. G2 loads copy into the layout reserve as in a scheduled prefill (prefill.h:
     * the largest block's G2 bytes, faulted in); G1 loads (prepare) into fresh memory. */
    size_t resv = 0;
    for (int j = 0; j < bl.n; j++)
        if (sdn_layout_alloc_size(m, bl.l0[j], bl.l1[j], SDN_LAYOUT_QUANT) > resv) resv = sdn_layout_alloc_size(m, bl.l0[j], bl.l1[j], SDN_LAYOUT_QUANT);
    for (int g2 = 0; g2 <= 1; g2++) {
        sdn_profile_kind kind = g2 ? SDN_PROF_G2_LOAD : SDN_PROF_G1_LOAD;
        sdn_layout which = g2 ? SDN_LAYOUT_QUANT : SDN_LAYOUT_F32;
        if ((rc = sdn_layout_set_reserve(m, g2 ? resv : 0, g2, err))) goto done;
        plog(o.log, "profile: %s loads of %d blocks x %d reps\n", g2 ? "G2 (quantized)" : "G1 (F32)", bl.n, o.reps);
        for (int j = 0; j < bl.n; j++) {
            size_t bytes = 0;
            for (int k = 0; k < o.reps; k++) {
                sdn_layout_unload(m, bl.l0[j], bl.l1[j], which);
                double t0 = sdn_now();
                if ((rc = sdn_layout_load(m, bl.l0[j], bl.l1[j], which, &bytes, err))) goto done;
                tv[k] = sdn_now() - t0;
            }
            sdn_profile_meas me = {.block = j, .kind = kind, .seconds = median(tv, o.reps), .bytes = (double)bytes};
            if ((rc = add_meas(p, &cap, me, err))) goto done;
        }
    }
    if ((rc = sdn_layout_set_reserve(m, 0, 0, err))) goto done;
    /* 2. compute: G1 then G2, per block */
    for (int g2 = 0; g2 <= 1; g2++) {
        sdn_profile_kind kind = g2 ? SDN_PROF_G2_COMPUTE : SDN_PROF_G1_COMPUTE;
        sdn_graph_kind gk = g2 ? SDN_GRAPH_G2 : SDN_GRAPH_G1;
        int brows = g2 ? g2max : o.s1;
        const int *lens = g2 ? o.g2_lens : o.g1_lens, *hold = g2 ? o.g2_hold : o.g1_hold;
        int nl = g2 ? o.n_g2 : o.n_g1, nh = g2 ? o.n_g2_hold : o.n_g1_hold;
        plog(o.log, "profile: %s compute of %d blocks\n", g2 ? "G2" : "G1", bl.n);
        for (int j = 0; j < bl.n; j++) {
            double t;
            if ((rc = time_graph(&r, gk, bl.l0[j], bl.l1[j], brows, 0, &t, err))) goto done; /* warm-up */
            for (int bi = g2 ? 1 : 0; bi < 4; bi++) {
                for (int k = 0; k < o.reps; k++)
                    if ((rc = time_graph(&r, gk, bl.l0[j], bl.l1[j], brows, bi * o.s1, &tv[k], err))) goto done;
                sdn_profile_meas me = {.block = j, .kind = kind, .rows = brows, .kv_base = bi * o.s1, .seconds = minimum(tv, o.reps)};
                if ((rc = add_meas(p, &cap, me, err))) goto done;
            }
            for (int h = 0; h < 2; h++)
                for (int i = 0; i < (h ? nh : nl); i++) {
                    int S = h ? hold[i] : lens[i];
                    if (S < 1 || S > maxrows || (g2 && S > SDN_INVARIANT_MAX_ROWS)) continue;
                    for (int k = 0; k < 2; k++)
                        if ((rc = time_graph(&r, gk, bl.l0[j], bl.l1[j], S, 0, &tv[k], err))) goto done;
                    sdn_profile_meas me = {.block = j, .kind = kind, .rows = S, .kv_base = 0, .held_out = h, .seconds = minimum(tv, 2)};
                    if ((rc = add_meas(p, &cap, me, err))) goto done;
                }
        }
    }
    /* 3. G2 loads on the loader thread while the main thread runs G1 of the next block */
    plog(o.log, "profile: G2 loads overlapped with G1 compute, %d blocks x %d reps\n", bl.n, o.reps);
    if ((rc = sdn_loader_new(m, &ld, err))) goto done;
    if ((rc = sdn_layout_set_reserve(m, resv, 1, err))) goto done;
    for (int j = 0; j < bl.n; j++) {
        int other = (j + 1) % bl.n;
        double tg[16];
        for (int k = 0; k < o.reps; k++) {
            int id, runs = 0;
            sdn_loader_job_info info;
            double t, sum = 0;
            sdn_layout_unload(m, bl.l0[j], bl.l1[j], SDN_LAYOUT_QUANT);
            if ((rc = sdn_loader_reset(ld, err)) || (rc = sdn_loader_submit(ld, bl.l0[j], bl.l1[j], SDN_LAYOUT_QUANT, NULL, NULL, &id, err))) goto done;
            do {
                if ((rc = time_graph(&r, SDN_GRAPH_G1, bl.l0[other], bl.l1[other], o.s1, 0, &t, err))) break;
                sum += t;
                runs++;
            } while (!sdn_loader_done(ld, id) && bl.n > 1);
            int rw = sdn_loader_wait(ld, id, &info, rc ? NULL : err);
            if (rc || (rc = rw)) goto done;
            tv[k] = info.t_end - info.t_start;
            tg[k] = sum / runs;
        }
        sdn_profile_meas me = {.block = j, .kind = SDN_PROF_G2_LOAD_OVERLAPPED, .seconds = median(tv, o.reps),
                               .bytes = (double)sdn_layout_size(m, bl.l0[j], bl.l1[j], SDN_LAYOUT_QUANT)};
        sdn_profile_meas mg = {.block = other, .kind = SDN_PROF_G1_COMPUTE_DURING_LOAD, .rows = o.s1, .seconds = median(tg, o.reps)};
        if ((rc = add_meas(p, &cap, me, err)) || (rc = add_meas(p, &cap, mg, err))) goto done;
    }
    if ((rc = sdn_layout_set_reserve(m, 0, 0, err))) goto done;
    /* 4. whole-model decode steps (G2 resident everywhere) at KV base s1 */
    plog(o.log, "profile: decode steps at %d shapes\n", o.n_shapes);
    {
        float *lg = malloc((size_t)SDN_INVARIANT_MAX_ROWS * cfg->vocab * sizeof(float));
        int32_t rows[SDN_INVARIANT_MAX_ROWS];
        for (int i = 0; i < SDN_INVARIANT_MAX_ROWS; i++) rows[i] = i;
        if (!lg) { rc = sdn_fail(err, SDN_ENOMEM, "profile: out of memory (logits)"); goto done; }
        for (int si = 0; si < o.n_shapes && !rc; si++) {
            int S = o.shapes[si];
            for (int kk = 0; kk < 2 && !rc; kk++) {
                int k = kk ? S : 1;
                if (kk && S == 1) break;
                for (int rep = 0; rep <= o.reps && !rc; rep++) { /* rep 0: warm-up */
                    /* the step runs at committed length s1 (entries the G1 runs wrote) */
                    sdn_kv_truncate(r.c, o.s1);
                    if (sdn_kv_len(r.c) < o.s1) sdn_kv_commit(r.c, o.s1 - sdn_kv_len(r.c));
                    sdn_batch b = {.n = S, .tokens = r.toks, .logit_rows = rows, .n_logits = k, .invariant = 1};
                    double t0 = sdn_now();
                    rc = sdn_forward(r.c, &b, lg, err);
                    if (rep) tv[rep - 1] = sdn_now() - t0;
                }
                if (rc) break;
                sdn_profile_meas me = {.block = -1, .kind = SDN_PROF_VERIFY_STEP, .rows = S, .kv_base = k, .seconds = minimum(tv, o.reps)};
                rc = add_meas(p, &cap, me, err);
            }
        }
        free(lg);
        if (rc) goto done;
    }
    rc = sdn_profile_fit(p, err);
done:
    sdn_loader_free(ld);
    sdn_layout_set_reserve(m, 0, 0, NULL);
    sdn_layout_unload(m, 0, cfg->n_layers, SDN_LAYOUT_F32);
    sdn_layout_unload(m, 0, cfg->n_layers, SDN_LAYOUT_QUANT);
    sdn_ctx_free(r.c);
    sdn_graph_bufs_free(&r.bufs);
    free(r.toks);
    free(tv);
    if (rc) {
        sdn_profile_free(p);
        return sdn_fail(err, rc, "profiling %s", sdn_model_path(m));
    }
    *out = p;
    return SDN_OK;
}

static int block_layers(const sdn_profile *p, int j) { return p->l1[j] - p->l0[j]; }

/* Fit one graph kind. Points are pooled over the blocks: for every (rows, KV base) measured,
 * the median over the blocks of seconds per layer (robust to a block run that another
 * process on the machine interrupted). The held-out error compares each held-out length's
 * pooled median with the model. */
static int fit_kind(sdn_profile *p, sdn_profile_kind kind, sdn_lat_model *mdl, double *hold_err, sdn_err *err) {
    int nm = p->n_meas;
    double *S = malloc((size_t)(nm + 1) * 4 * sizeof(double));
    if (!S) return sdn_fail(err, SDN_ENOMEM, "profile fit: out of memory");
    double *B = S + nm + 1, *T = B + nm + 1, *tmp = T + nm + 1;
    int n = 0, kv_distinct = 0, kv0 = -1, rc = SDN_OK;
    *hold_err = 0;
    for (int h = 0; h < 2; h++) {
        if (h) {
            rc = sdn_lat_fit(S, B, T, n, kv_distinct, mdl, err);
            if (rc) break;
        }
        for (int i = 0; i < nm; i++) {
            const sdn_profile_meas *me = &p->meas[i];
            if (me->kind != kind || me->held_out != h || me->block < 0 || me->block >= p->n_blocks) continue;
            int seen = 0;
            for (int k = 0; k < i && !seen; k++)
                seen = p->meas[k].kind == kind && p->meas[k].held_out == h && p->meas[k].rows == me->rows &&
                       p->meas[k].kv_base == me->kv_base && p->meas[k].block >= 0 && p->meas[k].block < p->n_blocks;
            if (seen) continue;
            int m = 0;
            for (int k = i; k < nm; k++) {
                const sdn_profile_meas *o = &p->meas[k];
                if (o->kind == kind && o->held_out == h && o->rows == me->rows && o->kv_base == me->kv_base && o->block >= 0 &&
                    o->block < p->n_blocks)
                    tmp[m++] = o->seconds / block_layers(p, o->block);
            }
            double med = median(tmp, m);
            if (!h) {
                S[n] = me->rows;
                B[n] = me->kv_base;
                T[n] = med;
                if (kv0 < 0) kv0 = me->kv_base;
                else if (me->kv_base != kv0) kv_distinct = 1;
                n++;
            } else {
                double pred = sdn_lat_eval(mdl, me->rows, me->kv_base), e = med > 0 ? fabs(pred - med) / med : 0;
                if (e > *hold_err) *hold_err = e;
            }
        }
    }
    free(S);
    return rc;
}

static void fit_load(const sdn_profile *p, sdn_profile_kind kind, double *tau, double *maxerr) {
    double st = 0, sl = 0;
    for (int i = 0; i < p->n_meas; i++)
        if (p->meas[i].kind == kind && p->meas[i].block >= 0 && p->meas[i].block < p->n_blocks) {
            st += p->meas[i].seconds;
            sl += block_layers(p, p->meas[i].block);
        }
    *tau = sl > 0 ? st / sl : 0;
    *maxerr = 0;
    for (int i = 0; i < p->n_meas; i++)
        if (p->meas[i].kind == kind && p->meas[i].block >= 0 && p->meas[i].block < p->n_blocks && p->meas[i].seconds > 0) {
            double e = fabs(*tau * block_layers(p, p->meas[i].block) - p->meas[i].seconds) / p->meas[i].seconds;
            if (e > *maxerr) *maxerr = e;
        }
}

int sdn_profile_fit(sdn_profile *p, sdn_err *err) {
    int rc;
    if ((rc = fit_kind(p, SDN_PROF_G1_COMPUTE, &p->g1, &p->g1_hold_err, err))) return sdn_fail(err, rc, "G1 model");
    if ((rc = fit_kind(p, SDN_PROF_G2_COMPUTE, &p->g2, &p->g2_hold_err, err))) return sdn_fail(err, rc, "G2 model");
    fit_load(p, SDN_PROF_G1_LOAD, &p->tau_g1, &p->load_g1_err);
    fit_load(p, SDN_PROF_G2_LOAD, &p->tau_g2, &p->load_g2_err);
    fit_load(p, SDN_PROF_G2_LOAD_OVERLAPPED, &p->tau_g2_ovl, &p->load_g2_ovl_err);
    if (p->tau_g2_ovl <= 0) p->tau_g2_ovl = p->tau_g2; /* profiles without overlapped loads */
    int n = 0;
    for (int i = 0; i < p->n_meas; i++) n += p->meas[i].kind == SDN_PROF_VERIFY_STEP;
    memset(p->verify, 0, sizeof p->verify);
    p->verify_r2 = p->verify_err = 0;
    if (n >= 3) {
        double *X = malloc((size_t)n * 4 * sizeof(double));
        if (!X) return sdn_fail(err, SDN_ENOMEM, "profile fit: out of memory");
        double *y = X + 3 * n; /* after the check: no arithmetic on a null pointer */
        int k = 0;
        for (int i = 0; i < p->n_meas; i++)
            if (p->meas[i].kind == SDN_PROF_VERIFY_STEP) {
                X[3 * k] = 1;
                X[3 * k + 1] = p->meas[i].rows;
                X[3 * k + 2] = p->meas[i].kv_base;
                y[k++] = p->meas[i].seconds;
            }
        rc = sdn_lsq(X, y, n, 3, p->verify, err);
        if (!rc) {
            double mean = 0, ss_tot = 0, ss_res = 0;
            for (int i = 0; i < n; i++) mean += y[i] / n;
            for (int i = 0; i < n; i++) {
                double f = p->verify[0] + p->verify[1] * X[3 * i + 1] + p->verify[2] * X[3 * i + 2];
                ss_res += (f - y[i]) * (f - y[i]);
                ss_tot += (y[i] - mean) * (y[i] - mean);
                double e = y[i] > 0 ? fabs(f - y[i]) / y[i] : 0;
                if (e > p->verify_err) p->verify_err = e;
            }
            p->verify_r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 1;
        }
        free(X);
        if (rc) return sdn_fail(err, rc, "verify-step model");
    }
    return SDN_OK;
}

/* The measured steps of this shape (1 and S logit rows), interpolated linearly in k; the
 * fitted plane for shapes that were not measured. */
double sdn_profile_verify(const sdn_profile *p, int shape, int k) {
    double t1 = -1, tS = -1;
    for (int i = 0; i < p->n_meas; i++) {
        const sdn_profile_meas *me = &p->meas[i];
        if (me->kind != SDN_PROF_VERIFY_STEP || me->rows != shape) continue;
        if (me->kv_base == 1) t1 = me->seconds;
        if (me->kv_base == shape) tS = me->seconds;
    }
    if (t1 > 0 && shape == 1) return t1;
    if (t1 > 0 && tS > 0) return t1 + (tS - t1) * (k - 1) / (shape - 1);
    return p->verify[0] + p->verify[1] * shape + p->verify[2] * k;
}

void sdn_profile_print(const sdn_profile *p, FILE *f) {
    fprintf(f, "profile of model %s | %d threads | %s\n", p->fingerprint, p->threads, p->machine);
    fprintf(f, "  %d layers in %d blocks, prefill graph S1 = %d; times in ms\n", p->n_layers, p->n_blocks, p->s1);
    fprintf(f, "  %-5s %-6s | %-9s %-9s %-9s | %-27s | %-20s\n", "block", "layers", "G1 load", "G2 load", "G2 ovl", "G1 S1 rows @B=0,S1,2S1,3S1",
            "G2 rows @B=S1,2S1,3S1");
    for (int j = 0; j < p->n_blocks; j++) {
        double l1 = 0, l2 = 0, l2o = 0, g1[4] = {0}, g2[4] = {0};
        for (int i = 0; i < p->n_meas; i++) {
            const sdn_profile_meas *me = &p->meas[i];
            if (me->block != j) continue;
            if (me->kind == SDN_PROF_G1_LOAD) l1 = me->seconds;
            if (me->kind == SDN_PROF_G2_LOAD) l2 = me->seconds;
            if (me->kind == SDN_PROF_G2_LOAD_OVERLAPPED) l2o = me->seconds;
            if (me->kind == SDN_PROF_G1_COMPUTE && me->rows == p->s1 && me->kv_base % p->s1 == 0 && me->kv_base / p->s1 < 4 && !me->held_out)
                g1[me->kv_base / p->s1] = me->seconds;
            if (me->kind == SDN_PROF_G2_COMPUTE && me->kv_base > 0 && me->kv_base % p->s1 == 0 && me->kv_base / p->s1 < 4) g2[me->kv_base / p->s1] = me->seconds;
        }
        fprintf(f, "  %-5d %-6d | %9.2f %9.2f %9.2f | %6.1f %6.1f %6.1f %6.1f | %6.1f %6.1f %6.1f\n", j, p->l1[j] - p->l0[j], 1e3 * l1,
                1e3 * l2, 1e3 * l2o, 1e3 * g1[0], 1e3 * g1[1], 1e3 * g1[2], 1e3 * g1[3], 1e3 * g2[1], 1e3 * g2[2], 1e3 * g2[3]);
    }
    fprintf(f, "  per layer, S rows at KV base B:\n");
    fprintf(f, "    G1 t = (b + S)/a + k*S*B: a = %.0f tok/s, b = %.1f tok, k = %.3g ms/(row*1k entries) | R2 %.4f, max err %.1f%% (%d pts), "
               "held-out max err %.1f%%\n",
            p->g1.beta > 0 ? 1 / p->g1.beta : 0, p->g1.beta > 0 ? p->g1.alpha / p->g1.beta : 0, p->g1.kappa * 1e6, p->g1.r2,
            100 * p->g1.max_rel_err, p->g1.n_points, 100 * p->g1_hold_err);
    fprintf(f, "    G2 t = S/c + d + k*S*B:   c = %.0f tok/s, d = %.3f ms, k = %.3g ms/(row*1k entries) | R2 %.4f, max err %.1f%% (%d pts), "
               "held-out max err %.1f%%\n",
            p->g2.beta > 0 ? 1 / p->g2.beta : 0, 1e3 * p->g2.alpha, p->g2.kappa * 1e6, p->g2.r2, 100 * p->g2.max_rel_err, p->g2.n_points,
            100 * p->g2_hold_err);
    fprintf(f, "    loads: G1 %.2f ms/layer (max err %.1f%%), G2 %.2f ms/layer (max err %.1f%%), G2 overlapped with G1 compute %.2f ms/layer "
               "(max err %.1f%%)\n",
            1e3 * p->tau_g1, 100 * p->load_g1_err, 1e3 * p->tau_g2, 100 * p->load_g2_err, 1e3 * p->tau_g2_ovl, 100 * p->load_g2_ovl_err);
    double during = 0, alone = 0;
    int nd = 0;
    for (int i = 0; i < p->n_meas; i++) {
        const sdn_profile_meas *me = &p->meas[i];
        if (me->kind != SDN_PROF_G1_COMPUTE_DURING_LOAD) continue;
        for (int k = 0; k < p->n_meas; k++)
            if (p->meas[k].kind == SDN_PROF_G1_COMPUTE && p->meas[k].block == me->block && p->meas[k].rows == me->rows && p->meas[k].kv_base == 0 &&
                !p->meas[k].held_out) {
                during += me->seconds;
                alone += p->meas[k].seconds;
                nd++;
                break;
            }
    }
    if (nd && alone > 0)
        fprintf(f, "    contention: G1 at S1 rows runs %.1f%% slower while a G2 load is in flight (%.1f vs %.1f ms per block, mean of %d blocks)\n",
                100 * (during / alone - 1), 1e3 * during / nd, 1e3 * alone / nd, nd);
    fprintf(f, "  decode step (all layers + head), shape S, k logit rows: T = %.2f + %.3f*S + %.3f*k ms | R2 %.4f, max err %.1f%%\n",
            1e3 * p->verify[0], 1e3 * p->verify[1], 1e3 * p->verify[2], p->verify_r2, 100 * p->verify_err);
}
