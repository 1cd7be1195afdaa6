/* sam_drafter.h - suffix-automaton drafting as in SAM-Decoding (Hu et al. 2024,
 * arXiv:2411.10666): retrieve the draft from the longest suffix match of the sequence in
 * two automata and pick the source by match length.
 *
 *  - dynamic automaton: the context and the committed output, one growing sequence. Its
 *    match is advanced by each committed token *before* the token is added, so it is the
 *    longest suffix of the sequence that also occurs ending before the newest token: its
 *    earliest occurrence always has a continuation.
 *  - static automaton: earlier answers (history), several sequences in one generalized
 *    automaton, built at creation or loaded from bytes (sdn_sam_serialize); its match is
 *    advanced by every context and output token, never extended.
 *
 * Source choice (SAM-Decoding's rule): with match lengths l_dyn and l_static, the dynamic
 * source is used when l_dyn >= l_static - len_bias, else the static one; the chosen
 * length is l_dyn or l_static - len_bias, and no draft is made below min_match.
 *
 * Chain mode: the n_predicts tokens that followed the earliest occurrence of the match
 * (within its sequence). While that occurrence has fewer tokens after it, the match is
 * shortened along suffix links (keeping length >= min_match), as SAM-Decoding's to_anc
 * step does; a shorter match's earliest occurrence is never later. Node d scores (l / (l + 1))^d for the
 * chosen (biased) match length l: a heuristic that falls with depth and rises with l.
 *
 * Tree mode: best-first expansion from the match state. A node for next token c of a
 * matched string w scores score(parent) * count(w c) / (sum over c' of count(w c') + 1),
 * the probability of c estimated from occurrence counts with one count reserved for
 * continuations never seen (PPM escape method A). The highest-scoring frontier node is
 * added next (ties: the one discovered first); each added node contributes its top-k next
 * tokens (k = min(topk, caps.max_branch)) to the frontier, until caps.max_nodes nodes,
 * depth min(n_predicts, caps.max_depth), or no frontier. With max_branch 1 the tree mode
 * degenerates to a count-guided chain. */
#ifndef SDN_SAM_DRAFTER_H
#define SDN_SAM_DRAFTER_H

#include <stddef.h>
#include <stdint.h>

#include "draft/drafter.h"

typedef struct sdn_sam_drafter_config {
    int n_predicts; /* longest draft: chain length / tree depth (default 10) */
    int min_match;  /* no draft when the chosen match length is below this (default 4) */
    int len_bias;   /* subtracted from the static match length before choosing (default 4) */
    int tree;       /* 0: chain drafts, 1: top-k tree drafts (default 0) */
    int topk;       /* branching of tree drafts, also capped by caps.max_branch (default 8) */
    int shorten;    /* chain mode: trade match length for a full continuation (default 1) */
} sdn_sam_drafter_config;

/* SAM-Decoding's published values: n_predicts 10, len_threshold (min_match) 4, len_bias 4,
 * top-k 8; chain mode, shortening on. */
void sdn_sam_drafter_defaults(sdn_sam_drafter_config *cfg);

/* Create a SAM drafter (cfg NULL = defaults). `hist`/`hist_len`: n_hist earlier token
 * sequences for the static automaton (n_hist 0: none). SDN_EINVAL names a bad field. */
int sdn_sam_drafter_create(const sdn_sam_drafter_config *cfg, const int32_t *const *hist, const int *hist_len,
                           int n_hist, sdn_drafter *out, sdn_err *err);
/* Same, with the static automaton loaded from sdn_sam_serialize bytes (len 0: none). */
int sdn_sam_drafter_create_from_bytes(const sdn_sam_drafter_config *cfg, const uint8_t *bytes, size_t len,
                                      sdn_drafter *out, sdn_err *err);

/* What the last propose() saw (for studies, tests and benchmarks). */
typedef struct sdn_sam_drafter_info {
    int dyn_len;    /* dynamic match length */
    int static_len; /* static match length (before the bias) */
    int source;     /* 0: no draft, 1: dynamic, 2: static */
    int match_len;  /* chosen length (static: after the bias) */
} sdn_sam_drafter_info;

/* Fill *out for a drafter made by sdn_sam_drafter_create*; SDN_EINVAL for another one. */
int sdn_sam_drafter_info_get(const sdn_drafter *d, sdn_sam_drafter_info *out);

#endif
