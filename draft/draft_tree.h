/* draft_tree.h - the one input format of verification: a small token tree.
 *
 * The tree hangs below an implicit root: the newest committed token, whose KV entry has
 * not been computed yet (verification feeds it as batch row 0). Node i has a token, a
 * parent (-1 = child of the root, otherwise an index < i, so nodes are in topological
 * order), a depth (1 for children of the root) and a score (the drafter's estimate of the
 * chance the node is accepted; larger is better; used to prune and order). A chain draft
 * is the tree where node i's parent is i-1. Siblings never carry the same token. Each node
 * also records where its token came from (SDN_SRC_*; reported per accepted token through
 * sdnpu_request.on_step): the drafter that adds it sets it. */
#ifndef SDN_DRAFT_TREE_H
#define SDN_DRAFT_TREE_H

#include <stdint.h>

#include "common/sdn_err.h"

/* Where a draft token came from (sdnpu.h's sdnpu_source has the same values). */
enum {
    SDN_SRC_NONE = 0,    /* not recorded (and the model's own token of a step) */
    SDN_SRC_PROMPT = 1,  /* read from the prompt (documents, messages), or the model's prefill
                            prediction at a prompt position (calibration) */
    SDN_SRC_ANSWER = 2,  /* read from earlier in this answer */
    SDN_SRC_HISTORY = 3, /* read from an earlier answer of the task group */
    SDN_SRC_GRAMMAR = 4, /* text the grammar forces, or its way out of an element */
    SDN_SRC_REUSE = 5,   /* the model's prediction at a node rejected in an earlier step */
    SDN_SRC_DRAFT = 6,   /* an accepted draft token whose drafter recorded no source */
    SDN_SRC_RECYCLED = 7, /* the model's own prediction after the same token in an earlier
                             step (the model-derived candidates, recycle.h) */
};

typedef struct sdn_tree {
    int n;           /* nodes in use */
    int cap;         /* hard cap on total nodes (the verification budget) */
    int32_t *token;  /* [cap] */
    int32_t *parent; /* [cap] */
    int32_t *depth;  /* [cap] */
    float *score;    /* [cap] */
    uint8_t *source; /* [cap] SDN_SRC_* (SDN_SRC_NONE until the drafter sets it) */
} sdn_tree;

/* Draft size limits every drafter honours. */
typedef struct sdn_draft_caps {
    int max_nodes;  /* total tree tokens (<= tree cap) */
    int max_depth;  /* longest root-to-leaf path */
    int max_branch; /* children per node (1 = chain drafts) */
} sdn_draft_caps;

/* Allocate a tree able to hold `cap` nodes. */
int sdn_tree_init(sdn_tree *t, int cap, sdn_err *err);
void sdn_tree_free(sdn_tree *t);
/* Remove all nodes. */
void sdn_tree_clear(sdn_tree *t);
/* Append a node; returns its index, or -1 when the tree is full, `parent` is invalid, or
 * `parent` already has a child with this token (the existing child's index is then
 * returned through *existing when non-NULL). */
int sdn_tree_add(sdn_tree *t, int parent, int32_t token, float score, int *existing);
/* Index of the child of `parent` (-1 = root) carrying `token`, or -1. */
int sdn_tree_find_child(const sdn_tree *t, int parent, int32_t token);
/* Append a chain of `n` tokens below `parent`, re-using existing matching children;
 * stops at the cap or at max_depth. Returns the number of tokens of the chain now present
 * in the tree (re-used or added). */
int sdn_tree_add_chain(sdn_tree *t, int parent, const int32_t *tokens, int n, float score, int max_depth);
/* Set the source of nodes [from, t->n) whose source is still SDN_SRC_NONE (after adding a
 * chain whose tokens all came from one place). */
void sdn_tree_set_source(sdn_tree *t, int from, uint8_t source);
/* Check the structural invariants (topological parents, depths, caps, distinct sibling
 * tokens); returns SDN_OK or SDN_EFORMAT with a message naming the bad node. */
int sdn_tree_validate(const sdn_tree *t, sdn_err *err);

#endif
