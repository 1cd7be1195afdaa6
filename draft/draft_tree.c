/* draft_tree.c - the token tree every drafter returns and verification consumes (see
 * draft_tree.h). Five parallel arrays of `cap` entries; nodes are appended in topological
 * order (a parent always precedes its children), so a tree is built by appending and
 * cleared by resetting the count. Trees are small (the verification budget, tens to a few
 * hundred nodes), so looking up a child is a linear scan over the nodes. */
#include "draft/draft_tree.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int sdn_tree_init(sdn_tree *t, int cap, sdn_err *err) {
    memset(t, 0, sizeof *t);
    if (cap < 1 || cap > (1 << 24)) return sdn_fail(err, SDN_EINVAL, "draft tree: capacity %d not in [1, 2^24]", cap);
    t->token = malloc(sizeof *t->token * (size_t)cap);
    t->parent = malloc(sizeof *t->parent * (size_t)cap);
    t->depth = malloc(sizeof *t->depth * (size_t)cap);
    t->score = malloc(sizeof *t->score * (size_t)cap);
    t->source = malloc((size_t)cap);
    if (!t->token || !t->parent || !t->depth || !t->score || !t->source) {
        sdn_tree_free(t);
        return sdn_fail(err, SDN_ENOMEM, "draft tree: cannot allocate %d nodes", cap);
    }
    t->cap = cap;
    return SDN_OK;
}

void sdn_tree_free(sdn_tree *t) {
    if (!t) return;
    free(t->token), free(t->parent), free(t->depth), free(t->score), free(t->source);
    memset(t, 0, sizeof *t);
}

void sdn_tree_clear(sdn_tree *t) { t->n = 0; }

int sdn_tree_find_child(const sdn_tree *t, int parent, int32_t token) {
    /* children of `parent` come after it */
    for (int i = parent < 0 ? 0 : parent + 1; i < t->n; i++)
        if (t->parent[i] == parent && t->token[i] == token) return i;
    return -1;
}

int sdn_tree_add(sdn_tree *t, int parent, int32_t token, float score, int *existing) {
    if (existing) *existing = -1;
    if (parent < -1 || parent >= t->n) return -1;
    int dup = sdn_tree_find_child(t, parent, token);
    if (dup >= 0) {
        if (existing) *existing = dup;
        return -1;
    }
    if (t->n >= t->cap) return -1;
    int i = t->n++;
    t->token[i] = token;
    t->parent[i] = parent;
    t->depth[i] = parent < 0 ? 1 : t->depth[parent] + 1;
    t->score[i] = score;
    t->source[i] = SDN_SRC_NONE;
    return i;
}

void sdn_tree_set_source(sdn_tree *t, int from, uint8_t source) {
    for (int i = from < 0 ? 0 : from; i < t->n; i++)
        if (t->source[i] == SDN_SRC_NONE) t->source[i] = source;
}

int sdn_tree_add_chain(sdn_tree *t, int parent, const int32_t *tokens, int n, float score, int max_depth) {
    if (parent < -1 || parent >= t->n) return 0;
    int depth = parent < 0 ? 0 : t->depth[parent], done = 0;
    for (int k = 0; k < n; k++) {
        if (depth + 1 > max_depth) break;
        int existing, i = sdn_tree_add(t, parent, tokens[k], score, &existing);
        if (i < 0) i = existing;
        if (i < 0) break; /* full */
        parent = i, depth++, done++;
    }
    return done;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int sdn_tree_validate(const sdn_tree *t, sdn_err *err) {
    if (t->n < 0 || t->n > t->cap) return sdn_fail(err, SDN_EFORMAT, "draft tree: %d nodes with capacity %d", t->n, t->cap);
    if (t->n && (!t->token || !t->parent || !t->depth || !t->score))
        return sdn_fail(err, SDN_EFORMAT, "draft tree: arrays not allocated");
    for (int i = 0; i < t->n; i++) {
        int p = t->parent[i];
        if (p < -1 || p >= i)
            return sdn_fail(err, SDN_EFORMAT, "draft tree: node %d has parent %d (must be -1 or an earlier node)", i, p);
        int want = p < 0 ? 1 : t->depth[p] + 1;
        if (t->depth[i] != want)
            return sdn_fail(err, SDN_EFORMAT, "draft tree: node %d has depth %d, expected %d", i, t->depth[i], want);
        if (isnan(t->score[i])) return sdn_fail(err, SDN_EFORMAT, "draft tree: node %d has a NaN score", i);
    }
    /* distinct sibling tokens: sort (parent, token) pairs */
    if (t->n > 1) {
        int64_t *key = malloc(sizeof *key * (size_t)t->n);
        if (!key) { /* quadratic fallback without memory */
            for (int i = 0; i < t->n; i++)
                for (int j = i + 1; j < t->n; j++)
                    if (t->parent[i] == t->parent[j] && t->token[i] == t->token[j])
                        return sdn_fail(err, SDN_EFORMAT, "draft tree: nodes %d and %d are siblings with token %d", i, j,
                                        t->token[i]);
            return SDN_OK;
        }
        for (int i = 0; i < t->n; i++) key[i] = ((int64_t)(t->parent[i] + 1) << 32) | (uint32_t)t->token[i];
        qsort(key, (size_t)t->n, sizeof *key, cmp_i64);
        for (int i = 1; i < t->n; i++)
            if (key[i] == key[i - 1]) {
                int parent = (int)(key[i] >> 32) - 1;
                int32_t tok = (int32_t)(uint32_t)key[i];
                free(key);
                int a = sdn_tree_find_child(t, parent, tok), b = -1;
                for (int j = a + 1; j < t->n; j++)
                    if (t->parent[j] == parent && t->token[j] == tok) { b = j; break; }
                return sdn_fail(err, SDN_EFORMAT, "draft tree: nodes %d and %d are siblings with token %d", a, b, tok);
            }
        free(key);
    }
    return SDN_OK;
}
