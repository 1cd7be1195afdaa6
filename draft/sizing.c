/* sizing.c - calibrated node scores and the draft size from evidence (see sizing.h). */
#include "draft/sizing.h"

#include <string.h>

void sdn_draft_calib_init(sdn_draft_calib *c) { memset(c, 0, sizeof *c); }

static int cell_src(int s) { return s >= 0 && s < SDN_CALIB_SOURCES ? s : 0; }
static int cell_depth(int d) { return d <= 1 ? 0 : d == 2 ? 1 : 2; }
static int cell_bin(double c) {
    int b = (int)(c * SDN_CALIB_BINS);
    return b < 0 ? 0 : b >= SDN_CALIB_BINS ? SDN_CALIB_BINS - 1 : b;
}

/* A node's conditional estimate: its score over its parent's (the root's is 1). */
static double cond_of(const sdn_tree *t, int i) {
    double ps = t->parent[i] < 0 ? 1.0 : (double)t->score[t->parent[i]];
    double c = ps > 0 ? (double)t->score[i] / ps : 0.0;
    return c < 0 ? 0 : c > 1 ? 1 : c;
}

void sdn_draft_calib_observe(sdn_draft_calib *c, const sdn_tree *t, const int32_t *acc, int n_acc, const uint8_t *judge) {
    uint8_t accepted[64] = {0};
    for (int k = 0; k < n_acc; k++)
        if (acc[k] >= 0 && acc[k] < 64) accepted[acc[k]] = 1;
    double *e = &c->expect[0][0][0], *h = &c->hits[0][0][0];
    for (int i = 0; i < SDN_CALIB_SOURCES * SDN_CALIB_DEPTHS * SDN_CALIB_BINS; i++) e[i] *= SDN_CALIB_DECAY, h[i] *= SDN_CALIB_DECAY;
    for (int i = 0; i < t->n && i < 64; i++) {
        if (judge && !judge[i]) continue;
        const int p = t->parent[i];
        if (p >= 0 && !accepted[p]) continue; /* the model never judged it */
        const int s = cell_src(t->source[i]), d = cell_depth(t->depth[i]);
        const double q = cond_of(t, i);
        c->expect[s][d][cell_bin(q)] += q;
        c->hits[s][d][cell_bin(q)] += accepted[i];
    }
}

double sdn_draft_calib_factor(const sdn_draft_calib *c, int source, int depth, double cond) {
    const int s = cell_src(source), d = cell_depth(depth), b = cell_bin(cond);
    return (c->hits[s][d][b] + 1.0) / (c->expect[s][d][b] + 1.0);
}

int sdn_draft_select(const sdn_draft_calib *c, sdn_tree *t, const double *ms, int max_n, int min_n) {
    const int n = t->n < 64 ? t->n : 64;
    double path[64];
    int order[64];
    for (int i = 0; i < n; i++) {
        const double raw = cond_of(t, i);
        double q = raw * sdn_draft_calib_factor(c, t->source[i], t->depth[i], raw);
        if (q > SDN_CALIB_MAX_COND) q = SDN_CALIB_MAX_COND;
        path[i] = (t->parent[i] < 0 ? 1.0 : path[t->parent[i]]) * q;
        order[i] = i;
    }
    /* by calibrated path, larger first; ties by index (a parent precedes its children: its
       path is larger, or both are 0 and its index is smaller) */
    for (int i = 1; i < n; i++) {
        int v = order[i], j = i;
        while (j > 0 && (path[order[j - 1]] < path[v] || (path[order[j - 1]] == path[v] && order[j - 1] > v))) order[j] = order[j - 1], j--;
        order[j] = v;
    }
    int best = 0;
    double sum = 1.0, best_rate = ms[0] > 0 ? 1.0 / ms[0] : 0.0;
    for (int k = 1; k <= n && k <= max_n; k++) {
        sum += path[order[k - 1]];
        const double rate = ms[k] > 0 ? sum / ms[k] : 0.0;
        if (rate > best_rate) best_rate = rate, best = k;
    }
    if (best < min_n && n > 0 && max_n > 0) best = min_n < n ? min_n : n;
    /* rewrite the tree: the kept nodes in that order, parents re-indexed (all read before any
       is written) */
    int32_t tok[64], par[64], dep[64], map[64];
    float sc[64];
    uint8_t src[64];
    for (int i = 0; i < n; i++) map[i] = -1;
    for (int k = 0; k < best; k++) {
        const int v = order[k];
        map[v] = k;
        tok[k] = t->token[v];
        par[k] = t->parent[v] < 0 ? -1 : map[t->parent[v]];
        dep[k] = t->depth[v];
        sc[k] = (float)path[v];
        src[k] = t->source[v];
    }
    for (int k = 0; k < best; k++) {
        t->token[k] = tok[k], t->parent[k] = par[k], t->depth[k] = dep[k], t->score[k] = sc[k], t->source[k] = src[k];
    }
    t->n = best;
    return best;
}

static double fix_one(const sdn_cost_fix *f) { return (f->one_live + SDN_COSTFIX_PRIOR) / (f->one_curve + SDN_COSTFIX_PRIOR); }
static double fix_extra(const sdn_cost_fix *f) { return (f->extra_live + SDN_COSTFIX_PRIOR) / (f->extra_curve + SDN_COSTFIX_PRIOR); }

void sdn_cost_fix_observe(sdn_cost_fix *f, const double *ms, int n, double ms_live) {
    if (!(ms_live > 0) || n < 0 || n >= 64) return;
    f->one_live *= 0.99, f->one_curve *= 0.99, f->extra_live *= 0.99, f->extra_curve *= 0.99;
    if (n == 0) {
        f->one_live += ms_live;
        f->one_curve += ms[0];
    } else if (ms[n] > ms[0]) {
        double extra = ms_live - fix_one(f) * ms[0];
        f->extra_live += extra > 0 ? extra : 0;
        f->extra_curve += ms[n] - ms[0];
    }
}

void sdn_cost_fix_apply(const sdn_cost_fix *f, const double *ms, int count, double *out) {
    const double a = fix_one(f), g = fix_extra(f);
    for (int n = 0; n < count; n++) out[n] = a * ms[0] + g * (ms[n] - ms[0]);
}
