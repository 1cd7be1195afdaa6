/* bench_graphs.c - the work of `sdnpu bench-graphs` (tools.h; the options in
 * cli/cmd_bench_graphs.c): the graph-switching benchmarks.
 *
 * Part "ttft": on Qwen2.5-0.5B- and Llama-3.2-1B-shaped models (make-model, seeded random
 * weights), time to first token of a prompt (prefill + the first decode step on G2) for
 * each scheduler, against the run that never switches (single: both layouts resident),
 * measured in the same process; each repetition runs every mode once, in an order rotated
 * by the repetition. With fewer compute threads than CPUs the computation is pinned to
 * CPUs 0..K-1 and the loaders to the others (--pin). The load time a mode exposes is
 * estimated three ways (docs/graphs.md), each as a median with a distribution-free CI:
 *   overhead = TTFT(mode) - TTFT(single) of the same repetition (carries the whole run's noise);
 *   task by task: waited + unload + the overlapped tasks' time beyond the same tasks in single;
 *   decomposed: waited + unload + loads x overlapped share x the contention per load,
 *     measured by interleaved pairs of a G1 task alone and beside a G2 load.
 *   hidden = 1 - exposed(mode) / exposed(sync) (target >= 90% for progressive).
 * Part "gap": the greedy (progressive) plan against the exact optimum on random instances
 * (N <= 10 blocks, 2..8 chunks) and on the 2-partition instances of docs/graphs.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/sdn_util.h"
#include "tools/bench_util.h"
#include "tools/tools.h"
#include "engine/forward.h"
#include "tools/make_model.h"
#include "modelfile/model.h"
#include "runtime/decode.h"
#include "graph_sched/graph.h"
#include "graph_sched/loader.h"
#include "graph_sched/prefill.h"
#include "graph_sched/schedule.h"
#include "runtime/graph_setup.h"

#define NMODES 5
#define MAXREPS SDN_TOOL_BENCH_GRAPHS_MAXREPS

typedef struct gopts {
    const char *shapes, *type, *db, *part, *modes;
    int layers, prompt, reps, threads, blocks, s1, s2, instances, pin, pairs;
    long seed;
} gopts;

static const char *model_path(const char *shape, const char *type, int layers) {
    if (layers <= 0) return bench_model(shape, type, NULL);
    static char path[1200];
    snprintf(path, sizeof path, "%s/bench-%s-%s-l%d.gguf", bench_cache_dir(), shape, type, layers);
    if (access(path, R_OK) == 0) return path;
    fprintf(stderr, "bench: writing %s ...\n", path);
    sdn_make_model_opts o = {.shape = shape, .out_path = path, .type = type, .seed = 1, .n_layers = layers, .quiet = 1};
    sdn_err err = {0};
    if (sdn_make_model(&o, &err)) {
        fprintf(stderr, "sdnpu: %s\n", err.msg);
        return NULL;
    }
    return path;
}


/* CPU time (seconds) used by the whole machine (non-idle) and by this process, to detect
 * runs disturbed by other processes on a shared machine. */
static void cpu_times(double *machine, double *self) {
    *machine = *self = 0;
    long tck = sysconf(_SC_CLK_TCK);
    FILE *f = fopen("/proc/stat", "r");
    if (f) {
        unsigned long long v[10] = {0};
        if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) == 8)
            *machine = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / tck; /* all but idle and iowait */
        fclose(f);
    }
    f = fopen("/proc/self/stat", "r");
    if (f) {
        char buf[1024];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        char *p = strrchr(buf, ')');
        unsigned long long ut = 0, stt = 0;
        /* fields after ')': state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
        if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &stt) == 2) *self = (double)(ut + stt) / tck;
        fclose(f);
    }
}

typedef struct mode_res {
    double ttft[MAXREPS], wait[MAXREPS], load[MAXREPS], pred[MAXREPS], prefill[MAXREPS], comp[MAXREPS], unload[MAXREPS];
    sdn_gs_task_time *tl[MAXREPS]; /* each repetition's task timeline */
    int n_tl;
    int g2_tasks, max_both;
    size_t peak_prefill, peak_switch, decode;
    int32_t first;
    int same;
} mode_res;

/* Distribution-free confidence interval of the median of n values (sorted in place): the
 * order statistics [v_(j), v_(n+1-j)] with the largest j whose coverage 1 - 2 P(Bin(n, 1/2) < j)
 * is at least 95% (or j = 1 when n is too small for 95%); *cover gets the coverage; returns the median. */
static double median_ci(double *v, int n, double *lo, double *hi, double *cover) {
    double med = bench_median(v, n); /* sorts */
    double pk = pow(0.5, n), cdf = 0; /* P(X <= i) */
    int j = 1;
    double cov = 1 - 2 * pk;          /* j = 1: P(X < 1) = P(X = 0) */
    for (int i = 0; i < n / 2; i++) { /* try j = i + 2 */
        cdf += pk;
        pk = pk * (n - i) / (i + 1);
        double c = 1 - 2 * (cdf + pk);
        if (c < 0.95) break;
        j = i + 2;
        cov = c;
    }
    *lo = v[j - 1];
    *hi = v[n - j];
    *cover = cov;
    return med;
}

/* which modes to run: mask over sdn_gs_mode; single always (the reference) */
static int parse_modes(const char *list, int *on) {
    for (int k = 0; k < NMODES; k++) on[k] = list == NULL;
    on[SDN_GS_SINGLE] = 1;
    if (!list) return 0;
    char *l = bench_xstrdup(list), *save = NULL;
    for (char *t = strtok_r(l, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int k = 0;
        while (k < NMODES && strcmp(t, sdn_gs_mode_name((sdn_gs_mode)k))) k++;
        if (k == NMODES) {
            fprintf(stderr, "sdnpu bench-graphs: --modes: unknown scheduler '%s' (single, sync, async, progressive, optimal)\n", t);
            free(l);
            return 2;
        }
        on[k] = 1;
    }
    free(l);
    return 0;
}

/* What a G2 load beside a G1 task costs that task: pairs of the same G1 task (block j, S1
 * rows) run alone and beside the G2 load of block j+1 into the layout reserve (as in a
 * switching run: the load starts with the task, on the loader's CPUs), in alternating
 * order; the median paired difference is the contention per load. Tasks of about the same
 * length measured seconds apart carry run-to-run noise; adjacent pairs cancel most of it. */
typedef struct contention {
    double per_load, lo, hi, cover, load, task;
    int pairs;
} contention;

static int bench_contention(sdn_model *m, sdn_ctx *c, sdn_gs *gs, const gopts *o, int pin, contention *out, sdn_err *err) {
    memset(out, 0, sizeof *out);
    int P = o->pairs;
    if (P < 1) return SDN_OK;
    const sdn_blocks *bl = sdn_gs_blocks(gs);
    if (bl->n < 2) return SDN_OK;
    int rc = sdn_gs_prepare(gs, err); /* every G1 resident, the reserve filled */
    if (rc) return rc;
    sdn_graph_bufs b = {0};
    sdn_loader *ld = NULL;
    double *d = bench_xmalloc((size_t)P * 3 * sizeof(double)), *lt = NULL, *ta = NULL;
    int32_t *toks = bench_xmalloc((size_t)o->s1 * sizeof(int32_t));
    if (!d || !toks) { rc = sdn_fail(err, SDN_ENOMEM, "out of memory"); goto done; }
    lt = d + P;
    ta = d + 2 * P;
    for (int i = 0; i < o->s1; i++) toks[i] = (int32_t)(i * 7919 % sdn_model_cfg(m)->vocab);
    if ((rc = sdn_graph_bufs_init(&b, sdn_model_cfg(m)->dim, o->s1, 1, err)) || (rc = sdn_loader_new(m, &ld, err))) goto done;
    int online = sdn_cpus_online();
    if (pin && (rc = sdn_loader_pin(ld, o->threads, online - o->threads, err))) goto done;
    for (int p = 0; p < P && !rc; p++) {
        int j = p % bl->n, k = (j + 1) % bl->n;
        sdn_graph g = {SDN_GRAPH_G1, bl->l0[j], bl->l1[j], o->s1};
        double t[2] = {0};
        for (int h = 0; h < 2 && !rc; h++) {
            int loaded = (h + p) % 2; /* alternate which of the pair runs first */
            int id = -1;
            if ((rc = sdn_graph_embed(c, &b, toks, o->s1, 0, err))) break;
            if (loaded && ((rc = sdn_loader_reset(ld, err)) || (rc = sdn_loader_submit(ld, bl->l0[k], bl->l1[k], SDN_LAYOUT_QUANT, NULL, NULL, &id, err))))
                break;
            double t0 = sdn_now();
            rc = sdn_graph_run(c, &g, b.x, o->s1, 0, err);
            t[loaded] = sdn_now() - t0;
            if (loaded) {
                sdn_loader_job_info info;
                int rw = sdn_loader_wait(ld, id, &info, rc ? NULL : err);
                if (!rc) rc = rw;
                lt[p] = info.t_end - info.t_start;
                sdn_layout_unload(m, bl->l0[k], bl->l1[k], SDN_LAYOUT_QUANT); /* back into the reserve */
            }
        }
        d[p] = t[1] - t[0];
        ta[p] = t[0];
    }
    if (rc) goto done;
    out->pairs = P;
    out->load = bench_median(lt, P);
    out->task = bench_median(ta, P);
    out->per_load = median_ci(d, P, &out->lo, &out->hi, &out->cover);
done:
    sdn_loader_free(ld);
    sdn_graph_bufs_free(&b);
    free(d);
    free(toks);
    return rc;
}

static int bench_ttft_one(const gopts *o, const char *shape) {
    int on[NMODES], order[NMODES], M = 0;
    if (parse_modes(o->modes, on)) return 2;
    for (int k = 0; k < NMODES; k++)
        if (on[k]) order[M++] = k;
    int online = sdn_cpus_online();
    int pin = o->pin < 0 ? o->threads < online : o->pin;
    if (pin && o->threads >= online) {
        fprintf(stderr, "sdnpu bench-graphs: --pin on needs fewer compute threads (%d) than online CPUs (%d)\n", o->threads, online);
        return 2;
    }
    const char *path = model_path(shape, o->type, o->layers);
    if (!path) return 1;
    sdn_err err = {0};
    sdn_model *m = NULL;
    sdn_profile *p = NULL;
    sdn_gs *gs[NMODES] = {0};
    sdn_ctx *c = NULL;
    int32_t *toks = NULL;
    int code = 1, pinned = 0;
    mode_res *res = bench_xcalloc(NMODES, sizeof *res);
    if (!res) return 1;
    sdn_model_load_opts lo = {.no_tokenizer = 1};
    if (sdn_model_load(path, &lo, &m, &err)) goto fail;
    const sdn_model_config *cfg = sdn_model_cfg(m);
    if (sdn_gs_profile_get(m, o->threads, o->db, o->blocks, o->s1, 0, stderr, &p, &err)) goto fail;
    sdn_gs_costs costs;
    sdn_gs_costs_from_profile(p, &costs);
    /* the computation on CPUs 0..K-1 (the context's pool and OpenBLAS threads inherit the
     * caller's CPU set), each runtime's loader on the others */
    if (pin) {
        if (sdn_pin_self(0, o->threads, &err)) goto fail;
        pinned = 1;
    }
    for (int k = 0; k < NMODES; k++) {
        if (!on[k]) continue;
        sdn_gs_config gc = {.mode = (sdn_gs_mode)k, .n_blocks = o->blocks, .s1 = o->s1, .s2 = o->s2, .costs = &costs, .pin = pin ? o->threads : 0};
        if (sdn_gs_new(m, &gc, &gs[k], &err)) goto fail;
    }
    int P = o->prompt;
    toks = bench_xmalloc((size_t)(P + 1) * sizeof(int32_t));
    if (!toks) { sdn_fail(&err, SDN_ENOMEM, "out of memory"); goto fail; }
    sdn_rng rng;
    sdn_rng_seed(&rng, 99);
    for (int i = 0; i <= P; i++) toks[i] = (int32_t)sdn_rng_below(&rng, (uint64_t)cfg->vocab);
    sdn_ctx_params cp = {.n_ctx = P + o->s1 + 2 * SDN_INVARIANT_MAX_ROWS + 8, .n_threads = o->threads, .max_batch = sdn_gs_min_batch(gs[0]), .file_layout = 1};
    if (sdn_ctx_new(m, &cp, &c, &err)) goto fail;
    double la[3] = {0};
    FILE *lf = fopen("/proc/loadavg", "r");
    if (lf) {
        if (fscanf(lf, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3) la[0] = -1;
        fclose(lf);
    }
    printf("\n%s (%s, %d layers, %s): prompt %d tokens, %d threads%s, %d blocks, S1 %d, S2 %d, %d reps; load average before %.2f\n", shape,
           o->type, cfg->n_layers, path, P, o->threads, pin ? " (pinned to CPUs 0..K-1, the loader to the others)" : "",
           sdn_gs_blocks(gs[0])->n, o->s1, o->s2, o->reps, la[0]);
    fflush(stdout);
    int discarded = 0;
    /* repetition r runs the modes in the order rotated by r, so that no mode always follows
     * the same one (the run before leaves freed or fresh memory behind) */
    for (int r = 0; r < o->reps; r++)
        for (int i = 0; i < M; i++) {
            int k = order[(i + r) % M];
            if (sdn_gs_prepare(gs[k], &err)) goto fail;
            double m0, s0, m1, s1;
            cpu_times(&m0, &s0);
            sdn_kv_truncate(c, 0); /* sdn_generate checks the decode graph's room before it resets the cache */
            sdn_gen_params gp = {.max_tokens = 1, .ignore_eog = 1};
            sdn_gs_apply(gs[k], &gp);
            int32_t *out = NULL;
            int n_out = 0;
            sdn_gen_stats gst;
            if (sdn_generate_tokens(c, toks, P + 1, &gp, &out, &n_out, &gst, &err)) goto fail;
            const sdn_gs_stats *s = sdn_gs_last(gs[k]);
            cpu_times(&m1, &s1);
            double foreign = (m1 - m0) - (s1 - s0);
            /* another process took more than 10% of a core-second per second of the run: run the repetition of this mode again */
            if (foreign > 0.1 * gst.t_first_token + 0.05 && discarded < 8 * o->reps) {
                discarded++;
                fprintf(stderr, "  rep %d %-12s disturbed (other processes used %.2f CPU-s): repeated\n", r, sdn_gs_mode_name((sdn_gs_mode)k), foreign);
                free(out);
                i--;
                continue;
            }
            mode_res *mr = &res[k];
            mr->ttft[r] = gst.t_first_token;
            mr->prefill[r] = s->t_prefill;
            mr->comp[r] = s->t_compute;
            mr->wait[r] = s->t_wait;
            mr->load[r] = s->t_load;
            mr->pred[r] = s->predicted;
            mr->unload[r] = s->t_unload;
            int ntl;
            const sdn_gs_task_time *tl = sdn_gs_timeline(gs[k], &ntl);
            free(mr->tl[r]);
            mr->tl[r] = bench_xmalloc((size_t)(ntl > 0 ? ntl : 1) * sizeof *tl);
            if (!mr->tl[r]) { sdn_fail(&err, SDN_ENOMEM, "out of memory"); goto fail; }
            memcpy(mr->tl[r], tl, (size_t)ntl * sizeof *tl);
            mr->n_tl = ntl;
            mr->g2_tasks = s->g2_tasks;
            mr->max_both = s->max_both;
            mr->peak_prefill = s->bytes_prefill_peak;
            mr->peak_switch = s->bytes_switch_peak;
            mr->decode = s->bytes_decode;
            if (r == 0) mr->first = n_out ? out[0] : -1;
            mr->same = (r == 0 || mr->same) && n_out && out[0] == mr->first; /* the same first token in every repetition */
            free(out);
            fprintf(stderr, "  rep %d %-12s TTFT %.1f ms (prefill %.1f: compute %.1f, waited %.1f; first step %.1f)\n", r,
                    sdn_gs_mode_name((sdn_gs_mode)k), 1e3 * gst.t_first_token, 1e3 * s->t_prefill, 1e3 * s->t_compute, 1e3 * s->t_wait,
                    1e3 * gst.t_verify);
        }
    /* overheads: per repetition against the single run of the same repetition, then the
     * median and its distribution-free confidence interval */
    double over[NMODES] = {0}, olo[NMODES] = {0}, ohi[NMODES] = {0}, cover = 0, d[MAXREPS];
    for (int k = 1; k < NMODES; k++) {
        if (!on[k]) continue;
        for (int r = 0; r < o->reps; r++) d[r] = res[k].ttft[r] - res[0].ttft[r];
        over[k] = median_ci(d, o->reps, &olo[k], &ohi[k], &cover);
    }
    double over_sync = on[SDN_GS_SYNC] ? over[SDN_GS_SYNC] : 0;
    /* exposed load time, task by task: waiting for loads + freeing G1 + for every task that
     * overlapped a load or ran on G2, its time beyond the same task of the single run of the
     * same repetition. The tasks without a load beside them and on the same graph as in
     * single are left out: their difference is noise only, which the whole-TTFT overhead
     * carries in full. */
    double expo[NMODES] = {0}, elo[NMODES] = {0}, ehi[NMODES] = {0}, cont[NMODES] = {0};
    int n_ovl[NMODES] = {0};
    for (int k = 1; k < NMODES; k++) {
        if (!on[k]) continue;
        double cc[MAXREPS], no[MAXREPS];
        for (int r = 0; r < o->reps; r++) {
            double x = 0;
            int cnt = 0;
            for (int e = 0; e < res[k].n_tl && e < res[0].n_tl; e++)
                if (res[k].tl[r][e].loading || res[k].tl[r][e].g2) {
                    x += (res[k].tl[r][e].t1 - res[k].tl[r][e].t0) - (res[0].tl[r][e].t1 - res[0].tl[r][e].t0);
                    cnt++;
                }
            cc[r] = x;
            no[r] = cnt;
            d[r] = res[k].wait[r] + res[k].unload[r] + x;
        }
        cont[k] = bench_median(cc, o->reps);
        n_ovl[k] = (int)bench_median(no, o->reps);
        expo[k] = median_ci(d, o->reps, &elo[k], &ehi[k], &cover);
    }
    double expo_sync = on[SDN_GS_SYNC] ? expo[SDN_GS_SYNC] : 0;
    printf("  %-12s %9s %9s %17s %8s %9s %8s %8s %8s %8s %8s %6s  %-24s %s\n", "scheduler", "TTFT ms", "overhead", "overhead CI", "hidden",
           "compute", "waited", "loads", "overlap", "pred. ms", "G2 tasks", "both", "weights MiB pre/sw/dec", "1st token");
    for (int k = 0; k < NMODES; k++) {
        if (!on[k]) continue;
        mode_res *mr = &res[k];
        double t = bench_median(mr->ttft, o->reps), w = bench_median(mr->wait, o->reps), l = bench_median(mr->load, o->reps);
        double pr = bench_median(mr->pred, o->reps), cm = bench_median(mr->comp, o->reps);
        char hid[16] = "-", ovl[16] = "-", ci[32] = "-";
        /* the ratio means nothing when sync's own overhead is not distinguishable from 0 */
        if (k > 0 && over_sync > 0 && olo[SDN_GS_SYNC] > 0) snprintf(hid, sizeof hid, "%.1f%%", 100 * (1 - over[k] / over_sync));
        else if (k > 0) snprintf(hid, sizeof hid, "n.s.");
        if (k > 0) snprintf(ci, sizeof ci, "[%.0f, %.0f]", 1e3 * olo[k], 1e3 * ohi[k]);
        if (l > 0) snprintf(ovl, sizeof ovl, "%.1f%%", 100 * (1 - w / l));
        char mem[64];
        snprintf(mem, sizeof mem, "%.0f/%.0f/%.0f", mr->peak_prefill / 1048576.0, mr->peak_switch / 1048576.0, mr->decode / 1048576.0);
        printf("  %-12s %9.1f %9.1f %17s %8s %9.1f %8.1f %8.1f %8s %8.1f %8d %6d  %-24s %d%s\n", sdn_gs_mode_name((sdn_gs_mode)k), 1e3 * t,
               1e3 * over[k], ci, hid, 1e3 * cm, 1e3 * w, 1e3 * l, ovl, 1e3 * pr, mr->g2_tasks, mr->max_both, mem, mr->first,
               mr->first == res[0].first && mr->same ? "" : " (differs from single)");
    }
    printf("  exposed load time, task by task:\n");
    printf("  %-12s %8s %8s %10s %8s %9s %17s %8s\n", "scheduler", "waited", "unload", "contention", "tasks", "exposed", "exposed CI", "hidden");
    for (int k = 1; k < NMODES; k++) {
        if (!on[k]) continue;
        char hid[16] = "-", ci[32];
        if (expo_sync > 0) snprintf(hid, sizeof hid, "%.1f%%", 100 * (1 - expo[k] / expo_sync));
        snprintf(ci, sizeof ci, "[%.0f, %.0f]", 1e3 * elo[k], 1e3 * ehi[k]);
        printf("  %-12s %8.1f %8.1f %10.1f %8d %9.1f %17s %8s\n", sdn_gs_mode_name((sdn_gs_mode)k), 1e3 * bench_median(res[k].wait, o->reps),
               1e3 * bench_median(res[k].unload, o->reps), 1e3 * cont[k], n_ovl[k], 1e3 * expo[k], ci, hid);
    }
    int ksw = on[SDN_GS_SYNC] ? SDN_GS_SYNC : on[SDN_GS_PROGRESSIVE] ? SDN_GS_PROGRESSIVE : -1;
    if (o->pairs > 0 && ksw > 0) {
        contention ct;
        if (bench_contention(m, c, gs[ksw], o, pin, &ct, &err)) goto fail;
        if (ct.pairs) {
            printf("  contention: a G1 task (median %.1f ms) beside a G2 load (median %.1f ms) takes %+.2f ms more, %.0f%% CI [%+.2f, %+.2f] (%d interleaved pairs)\n",
                   1e3 * ct.task, 1e3 * ct.load, 1e3 * ct.per_load, 100 * ct.cover, 1e3 * ct.lo, 1e3 * ct.hi, ct.pairs);
            for (int k = 1; k < NMODES; k++) {
                if (!on[k] || !res[k].n_tl) continue;
                double nloads = (double)sdn_gs_last(gs[k])->plan.n;
                double w = bench_median(res[k].wait, o->reps), u = bench_median(res[k].unload, o->reps);
                double ovl_frac = 0, lsum = 0, wsum = 0;
                for (int r = 0; r < o->reps; r++) { lsum += res[k].load[r]; wsum += res[k].wait[r]; }
                ovl_frac = lsum > 0 ? 1 - wsum / lsum : 0; /* share of the load time that overlapped computation */
                ovl_frac = ovl_frac < 0 ? 0 : ovl_frac > 1 ? 1 : ovl_frac;
                double e = w + u + nloads * ovl_frac * ct.per_load, elo = w + u + nloads * ovl_frac * ct.lo, ehi = w + u + nloads * ovl_frac * ct.hi;
                char hid[48] = "-";
                if (k != SDN_GS_SYNC && on[SDN_GS_SYNC]) {
                    double es = bench_median(res[SDN_GS_SYNC].wait, o->reps) + bench_median(res[SDN_GS_SYNC].unload, o->reps);
                    snprintf(hid, sizeof hid, "%.1f%% [%.1f%%, %.1f%%]", 100 * (1 - e / es), 100 * (1 - ehi / es), 100 * (1 - elo / es));
                }
                printf("    %-12s waited %.1f + unload %.1f + %.0f loads x %.0f%% overlapped x contention = exposed %.1f ms [%.1f, %.1f]; hidden %s\n",
                       sdn_gs_mode_name((sdn_gs_mode)k), 1e3 * w, 1e3 * u, nloads, 100 * ovl_frac, 1e3 * e, 1e3 * elo, 1e3 * ehi, hid);
            }
        }
    }
    lf = fopen("/proc/loadavg", "r");
    if (lf) {
        if (fscanf(lf, "%lf", &la[0]) != 1) la[0] = -1;
        fclose(lf);
    }
    printf("  (%d runs disturbed by other processes were repeated; load average after %.2f)\n", discarded, la[0]);
    printf("  (TTFT: median; overhead = median over repetitions of TTFT - TTFT(single) of the same repetition, CI: its %.1f%% distribution-free\n"
           "   confidence interval; hidden = 1 - overhead / overhead(sync), n.s. when sync's CI contains 0; compute = main thread in graph\n"
           "   runs, embedding and head (its growth over single is the loader's contention); waited = main thread blocked on loads;\n"
           "   overlap = 1 - waited / load time;\n"
           "   pred. = the plan's predicted prefill time from the profile;\n"
           "   exposed = waited + unload + contention, per repetition, median and CI; contention = time of the tasks that overlapped a load\n"
           "   or ran on G2 beyond the same tasks in single of the same repetition (tasks: how many, median); hidden = 1 - exposed / exposed(sync);\n"
           "   decomposed (the lines under 'contention:'): waited + unload + loads x overlapped share x the pairs' median contention, its CI\n"
           "   from the pairs' CI)\n",
           100 * cover);
    code = 0;
    goto out;
fail:
    fprintf(stderr, "sdnpu: %s\n", err.msg);
out:
    for (int k = 0; k < NMODES; k++) sdn_gs_free(gs[k]);
    sdn_ctx_free(c);
    free(toks);
    sdn_profile_free(p);
    sdn_model_free(m);
    for (int k = 0; k < NMODES; k++)
        for (int r = 0; r < MAXREPS; r++) free(res[k].tl[r]);
    free(res);
    if (pinned) sdn_pin_self(0, online, NULL);
    return code;
}

/* ---- greedy vs optimum ---- */

static double pct(double *v, int n, double q) {
    if (n <= 0) return 0;
    int i = (int)floor(q * (n - 1) + 0.5);
    return v[i];
}

static void random_instance(sdn_sched_inst *in, sdn_rng *r) {
    int N = 2 + (int)sdn_rng_below(r, 9), C = 2 + (int)sdn_rng_below(r, 7);
    sdn_sched_inst_init(in, N, C, NULL);
    double base[16], slow[16];
    for (int j = 0; j < N; j++) {
        base[j] = 0.5 + sdn_rng_double(r);
        slow[j] = 1 + 2 * sdn_rng_double(r);
        /* load / one task: log-uniform in [1/20, 8] */
        in->load[j] = base[j] * exp(log(0.05) + sdn_rng_double(r) * (log(8.0) - log(0.05)));
    }
    double last = 0.2 + 0.8 * sdn_rng_double(r);
    for (int c = 0; c < C; c++)
        for (int j = 0; j < N; j++) {
            double g = base[j] * (c == C - 1 ? last : 1) * (0.9 + 0.2 * sdn_rng_double(r));
            in->g1[c * N + j] = g;
            in->g2[c * N + j] = g * slow[j];
        }
}

static void partition_instance(sdn_sched_inst *in, const int *a, int n, int L) {
    int B2 = 0;
    for (int i = 0; i < n; i++) B2 += a[i];
    int B = B2 / 2, C = 2 * B + L + 1, cs = B + L, N = n + 2;
    double M = 10.0 * (B2 + L + 1);
    sdn_sched_inst_init(in, N, C, NULL);
    for (int c = 0; c < C; c++) {
        in->g1[c * N] = in->g2[c * N] = c == cs ? 0 : 1;
        in->g1[c * N + 1] = c == cs ? M : 0;
        in->g2[c * N + 1] = c == cs - 1 ? M : 0;
    }
    in->load[1] = L;
    for (int i = 0; i < n; i++) in->load[2 + i] = a[i];
}

static int bench_gap(const gopts *o) {
    int I = o->instances;
    double *gap = bench_xmalloc((size_t)I * sizeof(double)), *gsync = bench_xmalloc((size_t)I * sizeof(double)), *gasync = bench_xmalloc((size_t)I * sizeof(double));
    sdn_rng r;
    sdn_rng_seed(&r, (uint64_t)o->seed);
    int n_opt = 0, async_below = 0, reg_n[3] = {0};
    double reg_sum[3] = {0}, reg_max[3] = {0};
    double t0 = sdn_now();
    for (int i = 0; i < I; i++) {
        sdn_sched_inst in;
        random_instance(&in, &r);
        sdn_sched_plan p;
        double opt;
        sdn_err err = {0};
        if (sdn_sched_optimal(&in, &p, &opt, &err)) {
            fprintf(stderr, "sdnpu: %s\n", err.msg);
            return 1;
        }
        sdn_sched_result res;
        sdn_sched_progressive(&in, &p);
        sdn_sched_simulate(&in, &p, &res);
        gap[i] = res.makespan / opt - 1;
        n_opt += gap[i] < 1e-9;
        double lsum = 0, gsum = 0;
        for (int j = 0; j < in.n_blocks; j++) lsum += in.load[j] / in.n_blocks;
        for (int k = 0; k < in.n_blocks * in.n_chunks; k++) gsum += in.g1[k] / (in.n_blocks * in.n_chunks);
        int rb = lsum < gsum ? 0 : lsum < 3 * gsum ? 1 : 2;
        reg_n[rb]++;
        reg_sum[rb] += gap[i];
        if (gap[i] > reg_max[rb]) reg_max[rb] = gap[i];
        sdn_sched_sync(&in, &p);
        sdn_sched_simulate(&in, &p, &res);
        gsync[i] = res.makespan / opt - 1;
        sdn_sched_async(&in, &p);
        sdn_sched_simulate(&in, &p, &res);
        gasync[i] = res.makespan / opt - 1;
        async_below += gasync[i] < -1e-9;
        sdn_sched_inst_free(&in);
    }
    double t = sdn_now() - t0;
    bench_median(gap, I);
    bench_median(gsync, I);
    bench_median(gasync, I);
    double mean = 0, ms = 0, ma = 0;
    for (int i = 0; i < I; i++) { mean += gap[i] / I; ms += gsync[i] / I; ma += gasync[i] / I; }
    printf("\ngreedy (progressive) vs exact optimum: %d random instances, 2..10 blocks x 2..8 chunks (seed %ld; %.1f s incl. the search)\n", I,
           o->seed, t);
    printf("  instances: task times U(0.5,1.5) per block, last chunk 0.2..1 of a full one, G2 1..3x slower, load 1/20..8 tasks (log-uniform)\n");
    printf("  makespan / optimum - 1:  %8s %8s %8s %8s %8s %8s\n", "mean", "median", "p90", "p99", "max", "optimal");
    printf("    progressive            %7.2f%% %7.2f%% %7.2f%% %7.2f%% %7.2f%% %7.1f%%\n", 100 * mean, 100 * pct(gap, I, 0.5),
           100 * pct(gap, I, 0.9), 100 * pct(gap, I, 0.99), 100 * gap[I - 1], 100.0 * n_opt / I);
    printf("    sync                   %7.2f%% %7.2f%% %7.2f%% %7.2f%% %7.2f%%\n", 100 * ms, 100 * pct(gsync, I, 0.5), 100 * pct(gsync, I, 0.9),
           100 * pct(gsync, I, 0.99), 100 * gsync[I - 1]);
    printf("    async                  %7.2f%% %7.2f%% %7.2f%% %7.2f%% %7.2f%%   (async queues loads outside the window class;\n"
           "                           below the window optimum on %d instances)\n",
           100 * ma, 100 * pct(gasync, I, 0.5), 100 * pct(gasync, I, 0.9), 100 * pct(gasync, I, 0.99), 100 * gasync[I - 1], async_below);
    static const double edges[] = {1e-9, 0.01, 0.05, 0.10, 0.25, 0.5};
    static const char *labels[] = {"= 0", "(0,1%]", "(1,5%]", "(5,10%]", "(10,25%]", "(25,50%]", "> 50%"};
    int hist[7] = {0};
    for (int i = 0; i < I; i++) {
        int b = 0;
        while (b < 6 && gap[i] > edges[b]) b++;
        hist[b]++;
    }
    static const char *regs[] = {"load < 1 task", "1-3 tasks", ">= 3 tasks"};
    printf("  progressive gap by mean load / mean G1 task:");
    for (int b = 0; b < 3; b++) printf("  %s: %d inst., mean %.2f%%, max %.2f%%;", regs[b], reg_n[b], reg_n[b] ? 100 * reg_sum[b] / reg_n[b] : 0, 100 * reg_max[b]);
    printf("\n");
    printf("  progressive gap histogram:");
    for (int b = 0; b < 7; b++) printf("  %s: %d", labels[b], hist[b]);
    printf("\n");
    struct { int a[6], n, L, yes; } cases[] = {{{1, 1, 2}, 3, 1, 1}, {{1, 2, 3, 4}, 4, 2, 1}, {{3, 3, 2, 2, 2}, 5, 1, 1}, {{1, 1, 4}, 3, 1, 0}, {{2, 2, 3, 5}, 4, 1, 0}};
    printf("  2-partition instances (optimum = 2B + L iff the items split evenly):\n");
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        sdn_sched_inst in;
        partition_instance(&in, cases[k].a, cases[k].n, cases[k].L);
        sdn_sched_plan p;
        double opt;
        sdn_sched_optimal(&in, &p, &opt, NULL);
        sdn_sched_result res;
        sdn_sched_progressive(&in, &p);
        sdn_sched_simulate(&in, &p, &res);
        int B2 = 0;
        printf("    items {");
        for (int i = 0; i < cases[k].n; i++) { printf("%s%d", i ? "," : "", cases[k].a[i]); B2 += cases[k].a[i]; }
        printf("} L=%d (%s): 2B+L = %d, optimum %g, progressive %g\n", cases[k].L, cases[k].yes ? "partition exists" : "no partition",
               B2 + cases[k].L, opt, res.makespan);
        sdn_sched_inst_free(&in);
    }
    free(gap);
    free(gsync);
    free(gasync);
    return 0;
}

void sdn_tool_bench_graphs_defaults(sdn_tool_bench_graphs_opts *o) {
    *o = (sdn_tool_bench_graphs_opts){.shapes = "qwen2.5-0.5b,llama-3.2-1b", .type = "Q8_0", .part = "all", .prompt = 1024, .reps = 3,
                                      .blocks = SDN_GS_DEFAULT_BLOCKS, .s1 = SDN_GS_DEFAULT_S1, .s2 = SDN_GS_DEFAULT_S2, .instances = 300,
                                      .seed = 1, .pin = -1, .pairs = 24, .threads = {2}, .n_threads = 1};
}

int sdn_tool_bench_graphs(const sdn_tool_bench_graphs_opts *to) {
    gopts o = {.shapes = to->shapes, .type = to->type, .db = to->db, .part = to->part, .modes = to->modes, .layers = to->layers,
               .prompt = to->prompt, .reps = to->reps, .blocks = to->blocks, .s1 = to->s1, .s2 = to->s2, .instances = to->instances,
               .pin = to->pin, .pairs = to->pairs, .seed = to->seed};
    char dbpath[1200];
    if (!o.db) {
        snprintf(dbpath, sizeof dbpath, "%s/profiles.sqlite", bench_cache_dir());
        o.db = dbpath;
    }
    int rc = 0;
    if (strcmp(o.part, "gap")) {
        char *list = bench_xstrdup(o.shapes), *save = NULL;
        for (char *s = strtok_r(list, ",", &save); s && !rc; s = strtok_r(NULL, ",", &save))
            for (int t = 0; t < to->n_threads && !rc; t++) {
                o.threads = (int)to->threads[t];
                rc = bench_ttft_one(&o, s);
            }
        free(list);
    }
    if (!rc && strcmp(o.part, "ttft")) rc = bench_gap(&o);
    return rc;
}
