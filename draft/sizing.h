/* sizing.h - draft size from evidence: one calibrated score for every draft node, whatever
 * its source, and the tree cut where the expected gain stops paying for the rows.
 *
 * A drafter that scores its nodes by path estimates (score = the estimated probability that
 * the node is accepted = the product of conditional estimates from the root; the sdnpu
 * drafter family, tree_builder.h) proposes a large tree in best-first order. Calibration
 * (per request): for every node the model could judge - a child of the root or of an
 * accepted node - its conditional estimate c = score / parent's score is added to the
 * expectation of its cell and 1 to the cell's hits when it was accepted; a cell is (source,
 * depth 1 / 2 / 3+, c in fifths: [0, 0.2), ..., [0.8, 1]), so a source whose estimate is too
 * flat (retrieval's L / (L + 2) for a match of length L) is bent back into shape. A cell's
 * factor is f = (hits + 1) / (expectation + 1) (one pseudo-observation of "calibrated as it
 * is"); a node's calibrated conditional is min(c * f, 0.95) and its calibrated path the
 * product along its path.
 *
 * Selection: with the verify cost ms[n] of a step with n draft tokens at this KV length, keep
 * the n nodes of largest calibrated path (parents always come first: a child's path is at
 * most 0.95 of its parent's) that maximize (1 + sum of their paths) / ms[n], the expected
 * tokens per millisecond (greedy: a node is committed exactly when its whole path is
 * accepted, so the sum is the expected accepted draft tokens); n = 0 when no node pays. */
#ifndef SDN_SIZING_H
#define SDN_SIZING_H

#include <stdint.h>

#include "draft/draft_tree.h"

#define SDN_CALIB_SOURCES 8
#define SDN_CALIB_DEPTHS 3
#define SDN_CALIB_BINS 5
#define SDN_CALIB_MAX_COND 0.95f

typedef struct sdn_draft_calib {
    double expect[SDN_CALIB_SOURCES][SDN_CALIB_DEPTHS][SDN_CALIB_BINS];
    double hits[SDN_CALIB_SOURCES][SDN_CALIB_DEPTHS][SDN_CALIB_BINS];
} sdn_draft_calib;

/* The verify cost as measured live, against the curve: a greedy request's steps correct the
 * curve ms[n] (measured once per machine, in a few milliseconds that may have been quiet or
 * busy ones) to f1 * ms[0] + g * (ms[n] - ms[0]), f1 the measured / predicted time of steps
 * without a draft, g that of the draft rows' extra time. Sums decay by 1% a step (the
 * machine's load drifts) and start at SDN_COSTFIX_PRIOR ms of agreement. Kept by the caller
 * across the requests of one context; zero-initialized means "no observation". Sampled
 * requests do not use it: their answer depends on what is drafted, and must not depend on
 * timing. */
#define SDN_COSTFIX_PRIOR 20.0
typedef struct sdn_cost_fix {
    double one_live, one_curve;     /* steps without a draft: measured, predicted (ms) */
    double extra_live, extra_curve; /* steps with one: time beyond f1 * ms[0], ms[n] - ms[0] */
} sdn_cost_fix;
/* Record a step with n draft rows that took ms_live, where the curve said ms[0..]. */
void sdn_cost_fix_observe(sdn_cost_fix *f, const double *ms, int n, double ms_live);
/* The corrected curve out[0..count). */
void sdn_cost_fix_apply(const sdn_cost_fix *f, const double *ms, int count, double *out);

/* Start a request: no observations (every factor 1). */
void sdn_draft_calib_init(sdn_draft_calib *c);
/* After a verification step of tree t whose accepted path is nodes acc[0..n_acc) (root
 * first); only nodes with judge[i] != 0 are counted (NULL: all). Earlier observations decay
 * by SDN_CALIB_DECAY a step (a calibration kept across requests follows what they draft). */
#define SDN_CALIB_DECAY 0.998
void sdn_draft_calib_observe(sdn_draft_calib *c, const sdn_tree *t, const int32_t *acc, int n_acc, const uint8_t *judge);
/* The factor of a node of `source` at `depth` whose conditional estimate is `cond`. */
double sdn_draft_calib_factor(const sdn_draft_calib *c, int source, int depth, double cond);
/* Calibrate t's scores (rewritten as calibrated paths), keep the best n nodes as above (n <=
 * max_n; ms[0..max_n] must be set) and drop the others (t is rewritten in place, nodes in
 * non-increasing calibrated path, parents first). Returns n. With min_n = 1, at least one
 * node is kept when t has one (a probe: acceptance is observed now and then even when the
 * estimates say nothing pays). */
int sdn_draft_select(const sdn_draft_calib *c, sdn_tree *t, const double *ms, int max_n, int min_n);

#endif
