/* calibration.c - builds the calibrated continuation trees (see calibration.h). An automaton
 * over the context answers the search step; trees are stored flat (offset per position) so
 * a query is one array lookup. */
#include "draft/calibration.h"

#include <stdlib.h>
#include <string.h>

#include "common/sdn_util.h"
#include "suffix_automaton/sam.h"

#define SEARCH_CTX 8 /* suffix length used to place a predicted token in the context */

struct sdn_calib {
    int n_pos, k;
    int32_t *ptok; /* copy of the predictions: [n_pos * k] */
    float *pprob;
    uint32_t *off; /* [n_pos + 1] */
    sdn_calib_node *nodes;
    size_t n_nodes, cap_nodes;
    double build_s;
};

void sdn_calib_defaults(sdn_calib_config *cfg) {
    cfg->min_prob = 0.1f;
    cfg->max_depth = 6;
    cfg->max_branch = 2;
    cfg->max_nodes = 16;
}

typedef struct builder {
    const sdn_calib_config *cfg;
    const int32_t *ctx;
    int n_ctx;
    const sdn_prefill_preds *pr;
    sdn_sam *sam;
    sdn_calib *c;
    size_t base; /* first node of the tree being built */
    int oom;
} builder;

/* Where in the context does predicted token x, following position q, continue? */
static int locate(builder *b, int q, int32_t x) {
    if (q + 1 < b->n_ctx && b->ctx[q + 1] == x) return q + 1;
    sdn_sam_match m = sdn_sam_match_root();
    int from = q + 1 - SEARCH_CTX < 0 ? 0 : q + 1 - SEARCH_CTX;
    for (int i = from; i <= q; i++) sdn_sam_match_advance(b->sam, &m, b->ctx[i]);
    for (;;) {
        sdn_sam_match child;
        if (sdn_sam_match_child(b->sam, &m, x, &child)) return (int)sdn_sam_first_end(b->sam, &child);
        if (!sdn_sam_match_parent(b->sam, &m)) return -1; /* x does not occur in the context */
    }
}

static int push(builder *b, sdn_calib_node nd) {
    sdn_calib *c = b->c;
    if (c->n_nodes == c->cap_nodes) {
        size_t nc = c->cap_nodes ? c->cap_nodes * 2 : 1024;
        sdn_calib_node *nn = realloc(c->nodes, nc * sizeof *nn);
        if (!nn) { b->oom = 1; return -1; }
        c->nodes = nn;
        c->cap_nodes = nc;
    }
    c->nodes[c->n_nodes] = nd;
    return (int)(c->n_nodes++ - b->base);
}

/* Expand the node `parent` (local index, -1 = the position itself) with the predictions
 * made at context position q. */
static void expand(builder *b, int q, int parent, int depth, float path) {
    const sdn_calib_config *cfg = b->cfg;
    if (q < 0 || q >= b->pr->n_pos || depth >= cfg->max_depth) return;
    int k = b->pr->k, branches = 0;
    for (int j = 0; j < k && branches < cfg->max_branch; j++) {
        if ((int)(b->c->n_nodes - b->base) >= cfg->max_nodes || b->oom) return;
        int32_t x = b->pr->tokens[(size_t)q * k + j];
        float p = b->pr->probs[(size_t)q * k + j];
        if (x < 0 || !(p >= cfg->min_prob)) break; /* sorted: the rest are smaller */
        sdn_calib_node nd = {x, (int16_t)parent, (uint16_t)(depth + 1), p, path * p};
        int me = push(b, nd);
        if (me < 0) return;
        branches++;
        expand(b, locate(b, q, x), me, depth + 1, path * p);
    }
}

int sdn_calib_build(const sdn_calib_config *cfg, const int32_t *ctx, int n_ctx, const sdn_prefill_preds *preds, sdn_calib **out,
                    sdn_err *err) {
    *out = NULL;
    if (!preds || preds->k < 1 || preds->n_pos < 0 || preds->n_pos > n_ctx)
        return sdn_fail(err, SDN_EINVAL, "calibration: prefill predictions missing or inconsistent with the context");
    if (cfg->max_nodes < 1 || cfg->max_nodes > 32767 || cfg->max_depth < 1 || cfg->max_branch < 1)
        return sdn_fail(err, SDN_EINVAL, "calibration: bounds must be positive (max_nodes <= 32767)");
    double t0 = sdn_now();
    sdn_calib *c = calloc(1, sizeof *c);
    if (!c) return sdn_fail(err, SDN_ENOMEM, "out of memory");
    c->n_pos = preds->n_pos;
    c->k = preds->k;
    c->off = malloc(((size_t)c->n_pos + 1) * sizeof *c->off);
    c->ptok = malloc(((size_t)c->n_pos * c->k + 1) * sizeof *c->ptok);
    c->pprob = malloc(((size_t)c->n_pos * c->k + 1) * sizeof *c->pprob);
    if (c->ptok && c->pprob) {
        memcpy(c->ptok, preds->tokens, (size_t)c->n_pos * c->k * sizeof *c->ptok);
        memcpy(c->pprob, preds->probs, (size_t)c->n_pos * c->k * sizeof *c->pprob);
    }
    builder b = {cfg, ctx, n_ctx, preds, NULL, c, 0, 0};
    int rc = sdn_sam_create(&b.sam, err);
    if (!rc) rc = sdn_sam_add_seq(b.sam, 1, ctx, (size_t)n_ctx, err);
    if (!rc && (!c->off || !c->ptok || !c->pprob)) rc = sdn_fail(err, SDN_ENOMEM, "out of memory");
    for (int p = 0; !rc && p < c->n_pos; p++) {
        c->off[p] = (uint32_t)c->n_nodes;
        b.base = c->n_nodes;
        expand(&b, p, -1, 0, 1.0f);
        if (b.oom) rc = sdn_fail(err, SDN_ENOMEM, "out of memory building calibration trees");
    }
    if (!rc) c->off[c->n_pos] = (uint32_t)c->n_nodes;
    sdn_sam_free(b.sam);
    if (rc) { sdn_calib_free(c); return rc; }
    c->build_s = sdn_now() - t0;
    *out = c;
    return SDN_OK;
}

void sdn_calib_free(sdn_calib *c) {
    if (!c) return;
    free(c->off);
    free(c->nodes);
    free(c->ptok);
    free(c->pprob);
    free(c);
}

float sdn_calib_prob(const sdn_calib *c, int p, int32_t token) {
    if (!c || p < 0 || p >= c->n_pos) return -1.0f;
    const int32_t *t = c->ptok + (size_t)p * c->k;
    const float *pr = c->pprob + (size_t)p * c->k;
    float mass = 0.0f;
    for (int j = 0; j < c->k; j++) {
        if (t[j] == token) return pr[j];
        mass += pr[j];
    }
    float rest = 1.0f - mass;
    if (rest < 0) rest = 0;
    return rest < pr[c->k - 1] ? rest : pr[c->k - 1];
}

const sdn_calib_node *sdn_calib_tree(const sdn_calib *c, int p, int *n) {
    if (!c || p < 0 || p >= c->n_pos) { *n = 0; return NULL; }
    *n = (int)(c->off[p + 1] - c->off[p]);
    return c->nodes + c->off[p];
}

void sdn_calib_stats(const sdn_calib *c, int *positions, size_t *nodes, size_t *bytes, double *build_s) {
    if (positions) *positions = c->n_pos;
    if (nodes) *nodes = c->n_nodes;
    if (bytes)
        *bytes = sizeof *c + ((size_t)c->n_pos + 1) * sizeof *c->off + c->cap_nodes * sizeof *c->nodes +
                 (size_t)c->n_pos * c->k * (sizeof *c->ptok + sizeof *c->pprob);
    if (build_s) *build_s = c->build_s;
}
