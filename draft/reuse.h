/* reuse.h - draft reuse: rejected draft tokens that the model's own predictions confirm are
 * kept and proposed again in the following steps, so drafts stay long.
 *
 * Rule (after a verification step). Let r_1..r_m be the rejected draft chain: below the
 * deepest accepted node, the first-ranked child, its first-ranked child, and so on. Let
 * pi_i be the model's greedy prediction after r_i (computed by the same verification pass,
 * with the draft up to r_i as context). A run [g, e] (g < e) is consistent when
 * pi_i == token(r_{i+1}) for every g <= i < e: the model, reading the draft, would itself
 * continue it there. The kept segment is the longest consistent run (the earliest among
 * equally long ones) - argmax over (g, e) of e - g - as tokens r_g .. r_e followed by
 * pi_e, the model's own next token after it. No consistent pair: nothing is kept.
 *
 * Proposal after a committed token t (the next tree root):
 *   - t occurs in the segment at index j (the draft had a redundant token the model
 *     skipped, or the model re-generated part of the segment): propose the segment after j;
 *   - otherwise two alternatives: the whole segment (tokens missing from the draft: the
 *     model inserted t before r_g) and the segment without its first token (a synonym: t
 *     replaced r_g).
 * A segment whose proposal is accepted is advanced. Lifetime (rule):
 *   SDN_REUSE_AGE (0, the default): dropped when a proposal from it is rejected at its first
 *     token (it stopped matching), when it is used up, or after max_age steps without an
 *     accepted token;
 *   SDN_REUSE_PAPER (1, sd.npu section 3.4): kept for at least one iteration, then dropped
 *     after a verification step whose draft (all tree nodes of the step: retrieval,
 *     calibration and reuse together) had more than `threshold` tokens; a rejected proposal
 *     does not drop it and it does not age out (used-up segments still go, and the oldest
 *     makes room when SDN_REUSE_MAX_SEGS are held).
 * Proposals carry a fixed per-token confidence (accept_prob) for the tree builder. */
#ifndef SDN_REUSE_H
#define SDN_REUSE_H

#include <stdint.h>

#include "draft/drafter.h"

#define SDN_REUSE_MAX_SEGS 4
#define SDN_REUSE_MAX_LEN 64

enum { SDN_REUSE_AGE = 0, SDN_REUSE_PAPER = 1 };

typedef struct sdn_reuse_config {
    int max_age;       /* steps a segment lives without being accepted (default 3; rule AGE) */
    float accept_prob; /* per-token confidence given to reused tokens (default 0.5) */
    int rule;          /* SDN_REUSE_AGE (default) or SDN_REUSE_PAPER */
    int threshold;     /* rule PAPER: a step drafting more tokens than this drops the
                          segments that lived through it (default 16) */
} sdn_reuse_config;

typedef struct sdn_reuse_seg {
    int32_t tok[SDN_REUSE_MAX_LEN];
    int n;   /* tokens */
    int pos; /* tokens already consumed (accepted) */
    int age;
    int offered;     /* proposed in the last step: 0 none, else the index of its first proposed token + 1 */
    int offered_alt; /* same for the second alternative (the synonym case), 0 none */
} sdn_reuse_seg;

typedef struct sdn_reuse {
    sdn_reuse_config cfg;
    sdn_reuse_seg seg[SDN_REUSE_MAX_SEGS];
    int n_seg;
} sdn_reuse;

/* One proposed chain. */
typedef struct sdn_reuse_chain {
    const int32_t *tok;
    int n;
    int seg, alt; /* provenance: segment index, 0 = main proposal, 1 = the synonym alternative */
} sdn_reuse_chain;

void sdn_reuse_defaults(sdn_reuse_config *cfg);
void sdn_reuse_init(sdn_reuse *r, const sdn_reuse_config *cfg);
/* The kept segment of a verified tree (the rule above): writes up to `cap` tokens and
 * returns their number (0: nothing kept). Exposed for tests. */
int sdn_reuse_extract(const sdn_draft_feedback *fb, int32_t *out, int cap);
/* Learn from a verification step: advance or drop existing segments, add the new one. */
void sdn_reuse_feedback(sdn_reuse *r, const sdn_draft_feedback *fb);
/* Chains to propose below root token t (at most 2 per segment); returns their number. */
int sdn_reuse_propose(sdn_reuse *r, int32_t t, sdn_reuse_chain *out, int cap);
/* A proposed chain did not make it into the verified tree: do not judge its segment by it. */
void sdn_reuse_unoffer(sdn_reuse *r, const sdn_reuse_chain *c);

#endif
