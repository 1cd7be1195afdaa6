/* sdnpu_drafter.h - sdnpu's drafter: retrieval over the context, the output so far and the
 * task group's history, in-context calibration, draft reuse, merged by the budget-filling
 * tree builder. The methods `sam+tree`, `sam+cal`, `sam+reuse` and `sdnpu` are this drafter
 * with parts switched off (see methods.h).
 *
 * Sources and their per-token acceptance estimates (conditional on the parent token):
 *   - dynamic automaton over context + output (the match is the longest suffix of the
 *     committed sequence that occurred earlier, queried before the newest token is added):
 *     the continuation of its earliest occurrence; the first token gets q(L) = L / (L + 2)
 *     for a match of length L, the following ones `follow`; up to `alts` further first
 *     tokens from the automaton's next-token counts get q(L) * count / total; with
 *     calibration on and `weigh` (off by default), a continuation token read from the context
 *     gets the model's prediction for it there instead (q(L) times it for the first);
 *   - the history automaton (earlier answers of the task group): the same;
 *   - calibration (calibration.h): the tree at the context position where the match ends;
 *     its first level gets prob * q(L), deeper nodes their prediction probability;
 *   - reuse (reuse.h): reusable segments, `accept_prob` per token;
 *   - the model-derived candidates (recycle.h, shared by the model's contexts): from the
 *     newest committed token, the table's candidates after it, then theirs, best-first by
 *     path estimate; a rank-r candidate gets a_r, the rate at which the model's next token
 *     was the table's r-th candidate - this request's own count blended with the table's
 *     (model_prior pseudo-observations of it), so the estimate is calibrated on what this
 *     request sees.
 * Everything goes into one candidate trie; the emitted draft is the best-first selection by
 * path probability within the step's caps (tree_builder.h). */
#ifndef SDN_SDNPU_DRAFTER_H
#define SDN_SDNPU_DRAFTER_H

#include <stddef.h>
#include <stdint.h>

#include "draft/calibration.h"
#include "draft/drafter.h"
#include "draft/reuse.h"

typedef struct sdn_sdnpu_config {
    int use_cal;      /* calibrated trees from prefill predictions (needs them at begin) */
    int use_reuse;    /* draft reuse (needs the model's predictions at rejected nodes) */
    int n_predict;    /* continuation tokens read from an automaton (default 24) */
    int min_match;    /* no retrieval draft below this match length (default 1) */
    int alts;         /* alternative first tokens from next-token counts (default 2) */
    float follow;     /* estimate of continuation tokens after the first (default 0.7) */
    int weigh;        /* with calibration on: each token of the context continuation is weighed
                         by the model's own prediction for it at that context position instead
                         of q(L) / follow (1); default 0: the paper's drafter (section
                         3.3), which does not, measured better live (docs/drafting.md) */
    int use_model;    /* the model-derived candidates (needs `recycle`; default 1) */
    int model_nodes;  /* candidates read from the table per step at most (default 32) */
    float model_min;  /* no model-derived candidate whose path estimate is below this (default 0.02) */
    float model_prior; /* weight of the table's own rank counts in a_r, in observations (default 16) */
    struct sdn_recycle *recycle; /* the model's candidate table (not owned; NULL: none) */
    sdn_calib_config cal;
    sdn_reuse_config reuse;
} sdn_sdnpu_config;

void sdn_sdnpu_defaults(sdn_sdnpu_config *cfg);
/* History: earlier answers as token sequences, or a serialized automaton (hist_bytes). */
int sdn_sdnpu_create(const sdn_sdnpu_config *cfg, const int32_t *const *hist, const int *hist_len, int n_hist,
                     const uint8_t *hist_bytes, size_t hist_bytes_len, sdn_drafter *out, sdn_err *err);

/* Counters and timings of a drafter (for benchmarks). */
typedef struct sdn_sdnpu_info {
    double cal_build_s;   /* calibration build time */
    int cal_positions;
    size_t cal_nodes, cal_bytes;
    long proposals;       /* propose() calls */
    double propose_s;     /* total time in propose() */
    long reuse_chains;    /* reuse chains offered */
    long model_nodes;     /* model-derived candidates offered to the tree builder */
} sdn_sdnpu_info;
int sdn_sdnpu_info_get(const sdn_drafter *d, sdn_sdnpu_info *out);

#endif
