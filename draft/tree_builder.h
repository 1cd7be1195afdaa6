/* tree_builder.h - the budget-filling draft-tree builder: candidates from every drafting
 * source (chains and trees, each token with a conditional acceptance estimate) are merged
 * into one candidate trie; the draft is the best-first selection of the trie's nodes by
 * path probability (the product of the conditional estimates from the root), up to the
 * verification budget and the depth/branch caps. Path probabilities never grow along a
 * path, so the selection is always a valid tree, and siblings come out most promising
 * first (the order stochastic verification tries them in).
 *
 * When two sources propose the same token at the same place, their estimates combine as
 * independent evidence, p = 1 - (1 - p1)(1 - p2) (SDN_TB_OR), or - for two readings of the
 * same evidence, such as a context continuation and the model's prediction that was used to
 * weigh it - as the larger one (SDN_TB_MAX); capped at 0.99. */
#ifndef SDN_TREE_BUILDER_H
#define SDN_TREE_BUILDER_H

#include <stdint.h>

#include "common/sdn_err.h"
#include "draft/draft_tree.h"

typedef struct sdn_tb sdn_tb;

int sdn_tb_new(int max_nodes, sdn_tb **out, sdn_err *err);
void sdn_tb_free(sdn_tb *tb);
/* Forget all candidates. */
void sdn_tb_reset(sdn_tb *tb);
enum { SDN_TB_OR = 0, SDN_TB_MAX = 1 };
/* The source (SDN_SRC_*, draft_tree.h) of the candidates added from now on (after a reset:
 * SDN_SRC_NONE). A node proposed by several sources keeps the first one's. */
void sdn_tb_source(sdn_tb *tb, uint8_t source);
/* Add a candidate below trie node `at` (-1 = the root); returns the trie node of the token
 * (existing or new), or -1 when the trie is full. `mode` says how to merge with an existing
 * estimate. */
int sdn_tb_add(sdn_tb *tb, int at, int32_t token, float prob, int mode);
/* Add a chain below the root: token i has conditional estimate probs[i] (or `prob` for all
 * when probs is NULL). Returns the number of tokens placed. */
int sdn_tb_add_chain(sdn_tb *tb, const int32_t *tokens, const float *probs, float prob, int n, int mode);
/* Emit the best nodes into `out` (cleared first) under the caps; returns the number. */
int sdn_tb_emit(sdn_tb *tb, sdn_tree *out, const sdn_draft_caps *caps);

#endif
