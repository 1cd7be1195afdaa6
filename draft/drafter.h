/* drafter.h - the drafter interface: every drafting method (pld, sam, sam+cal, ...) is an
 * sdn_drafter that proposes a token tree for the current position and is told what the
 * model accepted. The decode loop and the offline study drive drafters only through this.
 *
 * Sequence model: the drafter sees the context tokens once (begin), then the committed
 * output grows only through feedback(). The newest committed token is the implicit tree
 * root; a proposal continues after it. */
#ifndef SDN_DRAFTER_H
#define SDN_DRAFTER_H

#include <stdint.h>

#include "common/sdn_err.h"
#include "draft/draft_tree.h"

/* What one verification step told the drafter. */
typedef struct sdn_draft_feedback {
    const int32_t *accepted;    /* tokens appended to the sequence this step: the accepted
                                   draft tokens followed by the model's bonus token */
    int n_accepted;
    const sdn_tree *tree;       /* the tree that was verified (NULL: no draft this step) */
    const int32_t *node_argmax; /* [tree->n] model's greedy next token after each node, or
                                   NULL when not known (sampling, offline replay) */
    int32_t root_argmax;        /* model's greedy next token after the root (-1 unknown) */
    const int32_t *row_topk;    /* [(tree->n + 1) * topk] the model's top-k next tokens (best
                                   first) at every verified row: row 0 after the root, row i + 1
                                   after node i (NULL: not computed, sdn_gen_params.row_topk) */
    int topk;
} sdn_draft_feedback;

/* Prefill predictions: for every context position p, the model's top-k next tokens
 * (tokens[p*k + j], probs[p*k + j], most probable first). Optional input for calibrated
 * drafters; NULL when unavailable. */
typedef struct sdn_prefill_preds {
    int n_pos, k;
    const int32_t *tokens;
    const float *probs;
} sdn_prefill_preds;

typedef struct sdn_drafter sdn_drafter;

typedef struct sdn_drafter_ops {
    const char *name;
    /* Start a request: the context tokens (the whole prompt as the model sees it; the last
     * one is the first root) and optional prefill predictions. */
    int (*begin)(sdn_drafter *d, const int32_t *ctx, int n_ctx, const sdn_prefill_preds *preds, sdn_err *err);
    /* Fill `out` (cleared by the caller) with a draft after the committed sequence. */
    int (*propose)(sdn_drafter *d, sdn_tree *out, const sdn_draft_caps *caps, sdn_err *err);
    /* The result of verifying the last proposal. */
    int (*feedback)(sdn_drafter *d, const sdn_draft_feedback *fb, sdn_err *err);
    void (*destroy)(sdn_drafter *d);
    /* Optional (NULL: not offered): the drafter's most likely continuation of the committed
     * sequence followed by path[0..n_path) (tokens not committed: a hypothesis, such as the
     * text a grammar forces), at most max tokens into out, and when src is not NULL each
     * token's source (SDN_SRC_*, draft_tree.h) into src; returns the count (0: no guess).
     * Changes nothing the next propose or feedback sees. */
    int (*continue_after)(sdn_drafter *d, const int32_t *path, int n_path, int32_t *out, uint8_t *src, int max);
} sdn_drafter_ops;

struct sdn_drafter {
    const sdn_drafter_ops *ops;
    void *impl;
};

static inline int sdn_drafter_begin(sdn_drafter *d, const int32_t *ctx, int n, const sdn_prefill_preds *p, sdn_err *e) {
    return d->ops->begin(d, ctx, n, p, e);
}
static inline int sdn_drafter_propose(sdn_drafter *d, sdn_tree *out, const sdn_draft_caps *c, sdn_err *e) {
    return d->ops->propose(d, out, c, e);
}
static inline int sdn_drafter_feedback(sdn_drafter *d, const sdn_draft_feedback *fb, sdn_err *e) {
    return d->ops->feedback(d, fb, e);
}
/* continue_after when the drafter offers it, else 0. */
static inline int sdn_drafter_continue_after(sdn_drafter *d, const int32_t *path, int n_path, int32_t *out, int max) {
    return d && d->ops && d->ops->continue_after ? d->ops->continue_after(d, path, n_path, out, NULL, max) : 0;
}
/* The same with each token's source into src. */
static inline int sdn_drafter_continue_after_src(sdn_drafter *d, const int32_t *path, int n_path, int32_t *out, uint8_t *src, int max) {
    return d && d->ops && d->ops->continue_after ? d->ops->continue_after(d, path, n_path, out, src, max) : 0;
}
static inline void sdn_drafter_destroy(sdn_drafter *d) {
    if (d && d->ops) d->ops->destroy(d);
}

#endif
