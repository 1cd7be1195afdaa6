/* verify.h - tree verification: turn a draft tree into one forward batch (tokens,
 * positions, tree attention mask), then accept the longest path the model agrees with and
 * say which KV entries to keep.
 *
 * Batch layout: row 0 is the root (the newest committed token, position n_past); row i+1
 * is tree node i at position n_past + depth(i). Row r attends the committed prefix, itself
 * and its ancestors only. After acceptance, rows {0} + {1 + accepted nodes} are kept; the
 * committed sequence grows by the accepted tokens and one token from the model (the
 * "bonus"), which becomes the next root. */
#ifndef SDN_VERIFY_H
#define SDN_VERIFY_H

#include <stdint.h>

#include "common/sdn_err.h"
#include "common/sdn_util.h"
#include "draft/draft_tree.h"
#include "engine/sampler.h"

typedef struct sdn_vbatch {
    int n, cap;
    int32_t *tokens, *pos, *rows;
    uint8_t *mask; /* n x n */
} sdn_vbatch;

int sdn_vbatch_init(sdn_vbatch *vb, int max_rows, sdn_err *err);
void sdn_vbatch_free(sdn_vbatch *vb);
/* Fill vb for `tree` below `root` at position n_past. The tree must be valid (topological,
 * see draft_tree.h) and hold at most max_rows - 1 nodes. */
int sdn_vbatch_build(sdn_vbatch *vb, const sdn_tree *tree, int32_t root, int n_past, sdn_err *err);

/* Pad vb to `rows` rows (a fixed-shape decode graph): padding rows repeat the root token at
 * the root's position and attend only themselves, so no real row sees them; they are
 * computed and then dropped by the KV compaction. */
int sdn_vbatch_pad(sdn_vbatch *vb, int rows, sdn_err *err);

typedef struct sdn_accept {
    int n_acc;         /* accepted draft tokens */
    int32_t *nodes;    /* [n_acc] accepted node indices, root to leaf */
    int32_t *tokens;   /* [n_acc + 1] accepted tokens then the bonus token */
    int32_t *keep;     /* [n_acc + 1] batch rows whose KV entries to keep: 0, 1 + nodes[i] */
    int cap;
} sdn_accept;

int sdn_accept_init(sdn_accept *a, int max_nodes, sdn_err *err);
void sdn_accept_free(sdn_accept *a);

/* Greedy: from the root, follow the child whose token is the model's argmax at the
 * current row; stop at the first row whose argmax no child carries: that argmax is the
 * bonus. Output is exactly what plain greedy decoding would produce. `argmax` (optional,
 * [tree->n + 1]) receives every row's argmax. */
void sdn_verify_greedy(const sdn_tree *tree, const float *logits, int vocab, sdn_accept *out, int32_t *argmax);

/* Greedy acceptance from a given choice per row (row_choice[r] for r = 0 .. tree->n: the
 * token decoding would pick after row r, e.g. the best token a grammar allows): the same walk
 * as sdn_verify_greedy. A negative choice is never a child's token: it ends the walk as the
 * bonus (the caller decides what a row with no allowed token means). */
void sdn_verify_greedy_rows(const sdn_tree *tree, const int32_t *row_choice, sdn_accept *out);

/* Lossless speculative sampling for deterministic drafts with several candidates per
 * node: at the current row build the sampling distribution p (temperature, top-k, top-p);
 * try the children in tree order: accept child c with probability p(c); on rejection set
 * p(c) = 0 and renormalize, then try the next child; when no child is accepted, the bonus
 * is drawn from what is left of p. The committed tokens are distributed exactly as plain
 * sampling's. */
int sdn_verify_sample(const sdn_tree *tree, const float *logits, int vocab, const sdn_sampling *s, sdn_rng *rng, sdn_dist *work,
                      sdn_accept *out, sdn_err *err);

#endif
