/* calibration.h - in-context distribution calibration: model-preferred continuation trees
 * built from the prefill predictions, indexed by context position.
 *
 * The context says how a document phrases things; the prefill predictions say how the model
 * would phrase them. For every context position p (prediction available), a small tree of
 * the model's preferred continuations is built by depth-first search:
 *   sample step: the predicted tokens x at p with probability >= min_prob (at most
 *                max_branch of them, most probable first) become children;
 *   search step: each child x is located in the context through the automaton - the
 *                context's own next token when it is x, otherwise the earliest occurrence of
 *                the longest suffix of ctx[..p] (at most 8 tokens) followed by x - and the
 *                predictions at that occurrence expand x in turn;
 * bounded by max_depth and max_nodes per tree. Node scores are path probabilities (products
 * of prediction probabilities). A drafter that matched the output's suffix to context
 * position p proposes the tree at p: in "Clinton's security detail has arrived at" with the
 * model predicting "arrived" after "Clinton", the tree at "Clinton" holds "arrived at ...". */
#ifndef SDN_CALIBRATION_H
#define SDN_CALIBRATION_H

#include <stddef.h>
#include <stdint.h>

#include "common/sdn_err.h"
#include "draft/drafter.h"

typedef struct sdn_calib_config {
    float min_prob; /* smallest prediction probability that becomes a child (default 0.1) */
    int max_depth;  /* depth of a position's tree (default 6) */
    int max_branch; /* children per node (default 2) */
    int max_nodes;  /* nodes per position's tree (default 16) */
} sdn_calib_config;

/* One node of a position's tree: parent is a local index (-1 = below the position's token),
 * nodes are in depth-first order so parents precede children. */
typedef struct sdn_calib_node {
    int32_t token;
    int16_t parent;
    uint16_t depth; /* 1 = child of the position */
    float prob;     /* the prediction probability of this token (conditional on its parent) */
    float path;     /* product of prob along the path from the position */
} sdn_calib_node;

typedef struct sdn_calib sdn_calib;

void sdn_calib_defaults(sdn_calib_config *cfg);
/* Build the trees for context positions 0 .. preds->n_pos-1 of ctx[0..n_ctx). */
int sdn_calib_build(const sdn_calib_config *cfg, const int32_t *ctx, int n_ctx, const sdn_prefill_preds *preds, sdn_calib **out,
                    sdn_err *err);
void sdn_calib_free(sdn_calib *c);
/* The tree of context position p (n = 0 when p has none). */
const sdn_calib_node *sdn_calib_tree(const sdn_calib *c, int p, int *n);
/* The model's predicted probability of `token` after context position p: its listed
 * probability when it is among the top-k, otherwise an upper bound (the smaller of the
 * k-th probability and the mass outside the top-k); -1 when p has no predictions. */
float sdn_calib_prob(const sdn_calib *c, int p, int32_t token);
/* Statistics: positions, total nodes, bytes held, build time in seconds. */
void sdn_calib_stats(const sdn_calib *c, int *positions, size_t *nodes, size_t *bytes, double *build_s);

#endif
