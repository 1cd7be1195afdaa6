/* schedule.c - graph-switch schedulers and the plan simulator (see schedule.h).
 *
 * The simulator walks the boundaries 0..P: at each boundary it performs the planned
 * switches of loads issued earlier (waiting for the load: a stall when it is late), issues
 * the loads planned there (the loader starts each at max(now, end of the previous load)),
 * performs the switches of loads issued there, then runs the task at that position on the
 * block's current graph.
 *
 * The optimum: in a window plan the loader is free at every switch, so the future depends
 * only on the set S of switched blocks and the boundary e, never on how they were reached.
 * best[S][e] = earliest time at boundary e with exactly S switched and the loader idle;
 * moves: run task e on the current graphs (S, e+1), or open a window for a block j not in S
 * from e to e' (S + j, e') costing max(compute of tasks e..e'-1 with S on G2, load_j). The
 * answer is min over e of best[all][e] + the remaining tasks on G2. Sets are visited in
 * increasing numeric order (a superset is numerically larger), boundaries ascending. */
#include "graph_sched/schedule.h"

#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sdn_sched_inst_init(sdn_sched_inst *in, int n_blocks, int n_chunks, sdn_err *err) {
    memset(in, 0, sizeof *in);
    if (n_blocks < 1 || n_blocks > SDN_SCHED_MAX_BLOCKS || n_chunks < 1 || n_chunks > (1 << 20))
        return sdn_fail(err, SDN_EINVAL, "schedule: %d blocks x %d chunks is out of range (1..%d blocks)", n_blocks, n_chunks,
                        SDN_SCHED_MAX_BLOCKS);
    size_t P = (size_t)n_blocks * n_chunks;
    in->n_blocks = n_blocks;
    in->n_chunks = n_chunks;
    in->g1 = calloc(P, sizeof(double));
    in->g2 = calloc(P, sizeof(double));
    in->load = calloc((size_t)n_blocks, sizeof(double));
    if (!in->g1 || !in->g2 || !in->load) {
        sdn_sched_inst_free(in);
        return sdn_fail(err, SDN_ENOMEM, "schedule: out of memory");
    }
    return SDN_OK;
}

void sdn_sched_inst_free(sdn_sched_inst *in) {
    if (!in) return;
    free(in->g1);
    free(in->g2);
    free(in->load);
    memset(in, 0, sizeof *in);
}

int sdn_sched_plan_check(const sdn_sched_inst *in, const sdn_sched_plan *p, sdn_err *err) {
    int P = in->n_blocks * in->n_chunks;
    unsigned char seen[SDN_SCHED_MAX_BLOCKS] = {0};
    if (p->n < 0 || p->n > in->n_blocks) return sdn_fail(err, SDN_EINVAL, "plan: %d loads for %d blocks", p->n, in->n_blocks);
    for (int i = 0; i < p->n; i++) {
        const sdn_sched_load *l = &p->item[i];
        if (l->block < 0 || l->block >= in->n_blocks || seen[l->block])
            return sdn_fail(err, SDN_EINVAL, "plan: load %d names block %d (invalid or repeated)", i, l->block);
        seen[l->block] = 1;
        if (l->issue < 0 || l->issue > l->sw || l->sw > P)
            return sdn_fail(err, SDN_EINVAL, "plan: load %d (block %d) has issue %d, switch %d outside 0 <= issue <= switch <= %d", i,
                            l->block, l->issue, l->sw, P);
        if (i && l->issue < p->item[i - 1].issue)
            return sdn_fail(err, SDN_EINVAL, "plan: load %d is issued before load %d (loader order)", i, i - 1);
    }
    return SDN_OK;
}

void sdn_sched_simulate(const sdn_sched_inst *in, const sdn_sched_plan *p, sdn_sched_result *out) {
    int N = in->n_blocks, P = N * in->n_chunks;
    double t = 0, loader_free = 0, end[SDN_SCHED_MAX_BLOCKS];
    unsigned char on_g2[SDN_SCHED_MAX_BLOCKS] = {0};
    memset(out, 0, sizeof *out);
    for (int i = 0; i < p->n; i++) out->load_total += in->load[p->item[i].block];
    for (int e = 0; e <= P; e++) {
        for (int pass = 0; pass < 3; pass++) /* switches of earlier issues, issues, switches of these issues */
            for (int i = 0; i < p->n; i++) {
                const sdn_sched_load *l = &p->item[i];
                if (pass == 1 && l->issue == e) {
                    double s = t > loader_free ? t : loader_free;
                    end[i] = s + in->load[l->block];
                    loader_free = end[i];
                }
                if (pass != 1 && l->sw == e && (pass == 0) == (l->issue < e)) {
                    if (end[i] > t) {
                        out->stall += end[i] - t;
                        t = end[i];
                    }
                    on_g2[l->block] = 1;
                }
            }
        if (e == P) break;
        int j = e % N;
        double c = on_g2[j] ? in->g2[e] : in->g1[e];
        out->g2_tasks += on_g2[j];
        out->compute += c;
        t += c;
    }
    out->makespan = t;
}

void sdn_sched_sync(const sdn_sched_inst *in, sdn_sched_plan *out) {
    int P = in->n_blocks * in->n_chunks;
    out->n = in->n_blocks;
    for (int j = 0; j < in->n_blocks; j++) out->item[j] = (sdn_sched_load){j, P, P};
}

void sdn_sched_async(const sdn_sched_inst *in, sdn_sched_plan *out) {
    int N = in->n_blocks, P = N * in->n_chunks;
    out->n = N;
    for (int j = 0; j < N; j++) out->item[j] = (sdn_sched_load){j, (in->n_chunks - 1) * N + j + 1, P};
}

void sdn_sched_progressive(const sdn_sched_inst *in, sdn_sched_plan *out) {
    int N = in->n_blocks, P = N * in->n_chunks, e = P;
    out->n = N;
    for (int j = N - 1; j >= 0; j--) {
        /* smallest k: tasks e-k..e-1 cover load_j; blocks < j are switched during the window */
        double sum = 0;
        int s = e;
        while (s > 0 && sum < in->load[j]) {
            s--;
            int b = s % N;
            sum += b < j ? in->g2[s] : in->g1[s];
        }
        out->item[j] = (sdn_sched_load){j, s, e};
        e = s;
    }
}

/* cost of task e with switched set S */
static inline double task_cost(const sdn_sched_inst *in, int e, uint32_t S) {
    int j = e % in->n_blocks;
    return (S >> j) & 1 ? in->g2[e] : in->g1[e];
}

int sdn_sched_optimal(const sdn_sched_inst *in, sdn_sched_plan *out, double *makespan, sdn_err *err) {
    int N = in->n_blocks, P = N * in->n_chunks;
    if (N > SDN_SCHED_OPT_MAX_BLOCKS) return sdn_fail(err, SDN_EINVAL, "optimal schedule: %d blocks exceed the limit of %d", N, SDN_SCHED_OPT_MAX_BLOCKS);
    size_t W = (size_t)P + 1, nS = (size_t)1 << N;
    double work = (double)nS * W * (N * (double)W / 2 + 1);
    if (work > 4e9) return sdn_fail(err, SDN_EINVAL, "optimal schedule: %d blocks x %d chunks is too large to search", N, in->n_chunks);
    double *best = malloc(nS * W * sizeof(double));
    int32_t *from = malloc(nS * W * sizeof(int32_t)); /* predecessor: (prev e) * 32 + (block + 1), block+1 = 0: task step */
    if (!best || !from) {
        free(best);
        free(from);
        return sdn_fail(err, SDN_ENOMEM, "optimal schedule: out of memory");
    }
    for (size_t i = 0; i < nS * W; i++) best[i] = DBL_MAX;
    best[0] = 0;
    for (uint32_t S = 0; S < nS; S++) {
        double *b = best + (size_t)S * W;
        for (int e = 0; e <= P; e++) {
            double t = b[e];
            if (t == DBL_MAX) continue;
            if (e < P) {
                double nt = t + task_cost(in, e, S);
                if (nt < b[e + 1]) {
                    b[e + 1] = nt;
                    from[(size_t)S * W + e + 1] = e * 32;
                }
            }
            for (int j = 0; j < N; j++) {
                if ((S >> j) & 1) continue;
                uint32_t S2 = S | (1u << j);
                double *b2 = best + (size_t)S2 * W, comp = 0;
                for (int e2 = e; e2 <= P; e2++) {
                    double nt = t + (comp > in->load[j] ? comp : in->load[j]);
                    if (nt < b2[e2]) {
                        b2[e2] = nt;
                        from[(size_t)S2 * W + e2] = e * 32 + j + 1;
                    }
                    if (e2 < P) comp += task_cost(in, e2, S);
                }
            }
        }
    }
    uint32_t all = (uint32_t)nS - 1;
    double opt = DBL_MAX;
    int e_best = 0;
    double tail = 0;
    for (int e = P; e >= 0; e--) {
        if (e < P) tail += task_cost(in, e, all);
        double v = best[(size_t)all * W + e];
        if (v != DBL_MAX && v + tail < opt) {
            opt = v + tail;
            e_best = e;
        }
    }
    /* walk back: collect windows */
    sdn_sched_load rev[SDN_SCHED_MAX_BLOCKS];
    int n = 0;
    uint32_t S = all;
    int e = e_best;
    while (S || e) {
        int32_t f = from[(size_t)S * W + e];
        int pe = f / 32, blk = f % 32 - 1;
        if (blk >= 0) {
            rev[n++] = (sdn_sched_load){blk, pe, e};
            S &= ~(1u << blk);
        }
        e = pe;
    }
    out->n = n;
    for (int i = 0; i < n; i++) out->item[i] = rev[n - 1 - i];
    *makespan = opt;
    free(best);
    free(from);
    return SDN_OK;
}

/* ---- plain enumeration ---- */
typedef struct enum_state {
    const sdn_sched_inst *in;
    int P;
    int order[SDN_SCHED_MAX_BLOCKS];
    sdn_sched_plan cur, best;
    double best_v;
} enum_state;

/* choose boundaries for loads k.. of the current order, issues >= lo */
static void enum_bounds(enum_state *st, int k, int lo) {
    int N = st->in->n_blocks;
    if (k == N) {
        sdn_sched_result r;
        sdn_sched_simulate(st->in, &st->cur, &r);
        if (r.makespan < st->best_v - 1e-12) {
            st->best_v = r.makespan;
            st->best = st->cur;
        }
        return;
    }
    for (int s = lo; s <= st->P; s++)
        for (int w = s; w <= st->P; w++) {
            st->cur.item[k] = (sdn_sched_load){st->order[k], s, w};
            enum_bounds(st, k + 1, w);
        }
}

static void enum_perm(enum_state *st, int k) {
    int N = st->in->n_blocks;
    if (k == N) {
        enum_bounds(st, 0, 0);
        return;
    }
    for (int i = k; i < N; i++) {
        int t = st->order[k]; st->order[k] = st->order[i]; st->order[i] = t;
        enum_perm(st, k + 1);
        t = st->order[k]; st->order[k] = st->order[i]; st->order[i] = t;
    }
}

int sdn_sched_enumerate(const sdn_sched_inst *in, sdn_sched_plan *out, double *makespan, sdn_err *err) {
    if (in->n_blocks > 5 || in->n_blocks * in->n_chunks > 16)
        return sdn_fail(err, SDN_EINVAL, "enumeration: %d blocks x %d chunks is too large (N <= 5, P <= 16)", in->n_blocks, in->n_chunks);
    enum_state *st = calloc(1, sizeof *st);
    if (!st) return sdn_fail(err, SDN_ENOMEM, "enumeration: out of memory");
    st->in = in;
    st->P = in->n_blocks * in->n_chunks;
    st->best_v = DBL_MAX;
    st->cur.n = in->n_blocks;
    for (int j = 0; j < in->n_blocks; j++) st->order[j] = j;
    enum_perm(st, 0);
    *out = st->best;
    *makespan = st->best_v;
    free(st);
    return SDN_OK;
}

void sdn_sched_plan_str(const sdn_sched_inst *in, const sdn_sched_plan *p, char *buf, int cap) {
    int N = in->n_blocks, P = N * in->n_chunks, n = 0;
    buf[0] = 0;
    for (int i = 0; i < p->n && n < cap - 1; i++) {
        const sdn_sched_load *l = &p->item[i];
        char a[32], b[32];
        if (l->issue == P) snprintf(a, sizeof a, "end");
        else snprintf(a, sizeof a, "(c%d,b%d)", l->issue / N, l->issue % N);
        if (l->sw == P) snprintf(b, sizeof b, "end");
        else snprintf(b, sizeof b, "(c%d,b%d)", l->sw / N, l->sw % N);
        int w = snprintf(buf + n, (size_t)(cap - n), "%sb%d: load@%s switch@%s", i ? "; " : "", l->block, a, b);
        if (w < 0) break;
        n += w;
    }
    if (n >= cap) buf[cap - 1] = 0;
}
