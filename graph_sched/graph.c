/* graph.c - block partition and fixed-shape graph runs (see graph.h): G1 = one padded
 * SGEMM pass of S1 rows, G2 = the batch-invariant pass repeated over S2-row sub-chunks. */
#include "graph_sched/graph.h"

#include <stdlib.h>
#include <string.h>

#include "modelfile/model.h"

int sdn_blocks_partition(int n_layers, int n_blocks, sdn_blocks *out, sdn_err *err) {
    memset(out, 0, sizeof *out);
    if (n_layers < 1) return sdn_fail(err, SDN_EINVAL, "blocks: model has no layers");
    if (n_blocks < 1 || n_blocks > SDN_GRAPH_MAX_BLOCKS)
        return sdn_fail(err, SDN_EINVAL, "blocks: %d blocks is out of range (1..%d)", n_blocks, SDN_GRAPH_MAX_BLOCKS);
    if (n_blocks > n_layers) n_blocks = n_layers;
    int base = n_layers / n_blocks, extra = n_layers % n_blocks, l = 0;
    out->n = n_blocks;
    for (int j = 0; j < n_blocks; j++) {
        out->l0[j] = l;
        l += base + (j < extra);
        out->l1[j] = l;
    }
    return SDN_OK;
}

int sdn_graph_rows_run(const sdn_graph *g, int n) {
    if (g->kind == SDN_GRAPH_G1) return g->rows;
    return (n + g->rows - 1) / g->rows * g->rows;
}

int sdn_graph_bufs_init(sdn_graph_bufs *b, int dim, int s1, int s2, sdn_err *err) {
    memset(b, 0, sizeof *b);
    if (s1 < 1 || s2 < 1) return sdn_fail(err, SDN_EINVAL, "graph buffers: sizes %d, %d invalid", s1, s2);
    int r2 = (s1 + s2 - 1) / s2 * s2;
    b->rows = s1 > r2 ? s1 : r2;
    b->dim = dim;
    b->x = calloc((size_t)b->rows * dim, sizeof(float));
    b->tok = calloc((size_t)b->rows, sizeof(int32_t));
    if (!b->x || !b->tok) {
        sdn_graph_bufs_free(b);
        return sdn_fail(err, SDN_ENOMEM, "graph buffers: out of memory");
    }
    return SDN_OK;
}

void sdn_graph_bufs_free(sdn_graph_bufs *b) {
    if (!b) return;
    free(b->x);
    free(b->tok);
    memset(b, 0, sizeof *b);
}

int sdn_graph_embed(sdn_ctx *c, sdn_graph_bufs *b, const int32_t *tokens, int n, int32_t pad, sdn_err *err) {
    int vocab = sdn_model_cfg(sdn_ctx_model(c))->vocab;
    if (n < 1 || n > b->rows) return sdn_fail(err, SDN_EINVAL, "graph: chunk of %d tokens exceeds the graph buffer of %d rows", n, b->rows);
    for (int i = 0; i < b->rows; i++) {
        int32_t t = i < n ? tokens[i] : pad;
        if (t < 0 || t >= vocab) return sdn_fail(err, SDN_EINVAL, "graph: token id %d at row %d is outside the vocabulary", t, i);
        b->tok[i] = t;
    }
    sdn_batch bt = {.n = b->rows, .tokens = b->tok};
    return sdn_fwd_embed(c, &bt, b->x);
}

int sdn_graph_run(sdn_ctx *c, const sdn_graph *g, float *x, int n, int kv_base, sdn_err *err) {
    int dim = sdn_model_cfg(sdn_ctx_model(c))->dim;
    if (n < 1 || (g->kind == SDN_GRAPH_G1 && n > g->rows))
        return sdn_fail(err, SDN_EINVAL, "graph G%d of %d rows: chunk of %d rows", (int)g->kind, g->rows, n);
    sdn_batch b = {.n = g->rows};
    if (g->kind == SDN_GRAPH_G1) return sdn_fwd_layers(c, &b, kv_base, g->l0, g->l1, x, SDN_PATH_PREFILL, err);
    for (int s = 0; s * g->rows < n; s++) {
        int rc = sdn_fwd_layers(c, &b, kv_base + s * g->rows, g->l0, g->l1, x + (size_t)s * g->rows * dim, SDN_PATH_DECODE, err);
        if (rc) return rc;
    }
    return SDN_OK;
}
