/* tree_builder.c - candidate trie and best-first emission (see tree_builder.h). The trie
 * keeps first-child/next-sibling links; emission runs a binary max-heap keyed by path
 * probability (ties: shallower first, then insertion order, so results are deterministic). */
#include "draft/tree_builder.h"

#include <stdlib.h>
#include <string.h>

typedef struct tnode {
    int32_t token;
    int32_t parent, first, next;
    float prob, path;
    int depth, out; /* out: index in the emitted tree, -1 not emitted */
    uint8_t src;    /* SDN_SRC_* of the source that proposed it first */
} tnode;

struct sdn_tb {
    tnode *n;
    int size, cap;
    int root_first;
    int *heap, *kids;
    int hn;
    uint8_t src; /* source of the candidates being added */
};

int sdn_tb_new(int max_nodes, sdn_tb **out, sdn_err *err) {
    sdn_tb *tb = calloc(1, sizeof *tb);
    if (!tb) return sdn_fail(err, SDN_ENOMEM, "out of memory");
    tb->cap = max_nodes;
    tb->n = malloc((size_t)max_nodes * sizeof *tb->n);
    tb->heap = malloc((size_t)max_nodes * sizeof *tb->heap);
    tb->kids = malloc((size_t)max_nodes * sizeof *tb->kids);
    if (!tb->n || !tb->heap || !tb->kids) { sdn_tb_free(tb); return sdn_fail(err, SDN_ENOMEM, "out of memory"); }
    sdn_tb_reset(tb);
    *out = tb;
    return SDN_OK;
}

void sdn_tb_free(sdn_tb *tb) {
    if (!tb) return;
    free(tb->n);
    free(tb->heap);
    free(tb->kids);
    free(tb);
}

void sdn_tb_reset(sdn_tb *tb) {
    tb->size = 0;
    tb->root_first = -1;
    tb->src = SDN_SRC_NONE;
}

void sdn_tb_source(sdn_tb *tb, uint8_t source) { tb->src = source; }

int sdn_tb_add(sdn_tb *tb, int at, int32_t token, float prob, int mode) {
    if (prob > 0.99f) prob = 0.99f;
    if (!(prob > 0)) return -1;
    int *link = at < 0 ? &tb->root_first : &tb->n[at].first;
    for (int c = *link; c >= 0; c = tb->n[c].next)
        if (tb->n[c].token == token) {
            float p = tb->n[c].prob;
            p = mode == SDN_TB_MAX ? (prob > p ? prob : p) : 1.0f - (1.0f - p) * (1.0f - prob);
            tb->n[c].prob = p > 0.99f ? 0.99f : p;
            return c;
        }
    if (tb->size == tb->cap) return -1;
    int me = tb->size++;
    tnode *x = &tb->n[me];
    x->token = token;
    x->parent = at;
    x->first = -1;
    x->next = -1;
    x->prob = prob;
    x->src = tb->src;
    x->depth = at < 0 ? 1 : tb->n[at].depth + 1;
    /* append as the last sibling (insertion order breaks ties) */
    if (*link < 0) *link = me;
    else {
        int c = *link;
        while (tb->n[c].next >= 0) c = tb->n[c].next;
        tb->n[c].next = me;
    }
    return me;
}

int sdn_tb_add_chain(sdn_tb *tb, const int32_t *tokens, const float *probs, float prob, int n, int mode) {
    int at = -1, k;
    for (k = 0; k < n; k++) {
        int x = sdn_tb_add(tb, at, tokens[k], probs ? probs[k] : prob, mode);
        if (x < 0) break;
        at = x;
    }
    return k;
}

static int better(const sdn_tb *tb, int a, int b) {
    const tnode *x = &tb->n[a], *y = &tb->n[b];
    if (x->path != y->path) return x->path > y->path;
    if (x->depth != y->depth) return x->depth < y->depth;
    return a < b;
}
static void heap_push(sdn_tb *tb, int v) {
    int i = tb->hn++;
    tb->heap[i] = v;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!better(tb, tb->heap[i], tb->heap[p])) break;
        int t = tb->heap[i]; tb->heap[i] = tb->heap[p]; tb->heap[p] = t;
        i = p;
    }
}
static int heap_pop(sdn_tb *tb) {
    int top = tb->heap[0];
    tb->heap[0] = tb->heap[--tb->hn];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < tb->hn && better(tb, tb->heap[l], tb->heap[m])) m = l;
        if (r < tb->hn && better(tb, tb->heap[r], tb->heap[m])) m = r;
        if (m == i) break;
        int t = tb->heap[i]; tb->heap[i] = tb->heap[m]; tb->heap[m] = t;
        i = m;
    }
    return top;
}

int sdn_tb_emit(sdn_tb *tb, sdn_tree *out, const sdn_draft_caps *caps) {
    sdn_tree_clear(out);
    int max_nodes = caps->max_nodes < out->cap ? caps->max_nodes : out->cap;
    tb->hn = 0;
    for (int c = tb->root_first; c >= 0; c = tb->n[c].next) {
        tb->n[c].path = tb->n[c].prob;
        heap_push(tb, c);
    }
    int root_children = 0;
    int *kids = tb->kids; /* emitted children per trie node */
    memset(kids, 0, (size_t)tb->size * sizeof *kids);
    while (tb->hn > 0 && out->n < max_nodes) {
        int v = heap_pop(tb);
        tnode *x = &tb->n[v];
        x->out = -1;
        if (x->depth > caps->max_depth) continue;
        int *cnt = x->parent < 0 ? &root_children : &kids[x->parent];
        if (*cnt >= caps->max_branch) continue;
        int parent_out = x->parent < 0 ? -1 : tb->n[x->parent].out;
        int idx = sdn_tree_add(out, parent_out, x->token, x->path, NULL);
        if (idx < 0) continue;
        out->source[idx] = x->src;
        (*cnt)++;
        x->out = idx;
        for (int c = x->first; c >= 0; c = tb->n[c].next) {
            tb->n[c].path = x->path * tb->n[c].prob;
            heap_push(tb, c);
        }
    }
    return out->n;
}
