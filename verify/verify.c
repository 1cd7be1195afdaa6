/* verify.c - tree batches, greedy and stochastic acceptance (see verify.h). Acceptance
 * walks the tree with a child list built per step: children of a node are its later nodes
 * with that parent, in index order (the order the drafter ranked them). */
#include "verify/verify.h"

#include <stdlib.h>
#include <string.h>

int sdn_vbatch_init(sdn_vbatch *vb, int max_rows, sdn_err *err) {
    memset(vb, 0, sizeof *vb);
    vb->cap = max_rows;
    vb->tokens = malloc((size_t)max_rows * sizeof(int32_t));
    vb->pos = malloc((size_t)max_rows * sizeof(int32_t));
    vb->rows = malloc((size_t)max_rows * sizeof(int32_t));
    vb->mask = malloc((size_t)max_rows * max_rows);
    if (!vb->tokens || !vb->pos || !vb->rows || !vb->mask) {
        sdn_vbatch_free(vb);
        return sdn_fail(err, SDN_ENOMEM, "out of memory (verification batch)");
    }
    return SDN_OK;
}

void sdn_vbatch_free(sdn_vbatch *vb) {
    free(vb->tokens);
    free(vb->pos);
    free(vb->rows);
    free(vb->mask);
    memset(vb, 0, sizeof *vb);
}

int sdn_vbatch_build(sdn_vbatch *vb, const sdn_tree *t, int32_t root, int n_past, sdn_err *err) {
    int n = t->n + 1;
    if (n > vb->cap) return sdn_fail(err, SDN_EINVAL, "draft tree of %d nodes exceeds the verification budget of %d", t->n, vb->cap - 1);
    int rc = sdn_tree_validate(t, err);
    if (rc) return rc;
    vb->n = n;
    memset(vb->mask, 0, (size_t)n * n);
    vb->tokens[0] = root;
    vb->pos[0] = n_past;
    vb->rows[0] = 0;
    vb->mask[0] = 1;
    for (int i = 0; i < t->n; i++) {
        int r = i + 1;
        vb->tokens[r] = t->token[i];
        vb->pos[r] = n_past + t->depth[i];
        vb->rows[r] = r;
        uint8_t *m = vb->mask + (size_t)r * n;
        m[0] = 1;
        for (int j = i; j >= 0; j = t->parent[j]) m[j + 1] = 1;
    }
    return SDN_OK;
}

int sdn_vbatch_pad(sdn_vbatch *vb, int rows, sdn_err *err) {
    int n = vb->n;
    if (rows <= n) return SDN_OK;
    if (rows > vb->cap) return sdn_fail(err, SDN_EINVAL, "padding to %d rows exceeds the batch capacity %d", rows, vb->cap);
    /* re-lay the n x n mask into rows x rows */
    for (int i = n - 1; i >= 0; i--) {
        memmove(vb->mask + (size_t)i * rows, vb->mask + (size_t)i * n, (size_t)n);
        memset(vb->mask + (size_t)i * rows + n, 0, (size_t)(rows - n));
    }
    for (int r = n; r < rows; r++) {
        vb->tokens[r] = vb->tokens[0];
        vb->pos[r] = vb->pos[0];
        vb->rows[r] = r;
        memset(vb->mask + (size_t)r * rows, 0, (size_t)rows);
        vb->mask[(size_t)r * rows + r] = 1;
    }
    vb->n = rows;
    return SDN_OK;
}

int sdn_accept_init(sdn_accept *a, int max_nodes, sdn_err *err) {
    memset(a, 0, sizeof *a);
    a->cap = max_nodes;
    a->nodes = malloc(((size_t)max_nodes + 1) * sizeof(int32_t));
    a->tokens = malloc(((size_t)max_nodes + 2) * sizeof(int32_t));
    a->keep = malloc(((size_t)max_nodes + 2) * sizeof(int32_t));
    if (!a->nodes || !a->tokens || !a->keep) {
        sdn_accept_free(a);
        return sdn_fail(err, SDN_ENOMEM, "out of memory (acceptance)");
    }
    return SDN_OK;
}

void sdn_accept_free(sdn_accept *a) {
    free(a->nodes);
    free(a->tokens);
    free(a->keep);
    memset(a, 0, sizeof *a);
}

static void finish(sdn_accept *out, int32_t bonus) {
    out->tokens[out->n_acc] = bonus;
    out->keep[0] = 0;
    for (int i = 0; i < out->n_acc; i++) out->keep[i + 1] = out->nodes[i] + 1;
}

/* The greedy walk: from the root, follow the child carrying each row's choice (row_choice[row],
 * or the row's argmax computed on the way when row_choice is NULL: only the rows on the
 * accepted path then pay for it). */
static void greedy_walk(const sdn_tree *t, const int32_t *row_choice, const float *logits, int vocab, sdn_accept *out) {
    out->n_acc = 0;
    int cur = -1; /* -1 = root */
    for (;;) {
        int row = cur + 1;
        int32_t a = row_choice ? row_choice[row] : sdn_argmax(logits + (size_t)row * vocab, vocab);
        int child = -1;
        for (int i = cur + 1; i < t->n; i++)
            if (t->parent[i] == cur && t->token[i] == a) { child = i; break; }
        if (child < 0) { finish(out, a); return; }
        out->nodes[out->n_acc] = child;
        out->tokens[out->n_acc] = a;
        out->n_acc++;
        cur = child;
    }
}

void sdn_verify_greedy_rows(const sdn_tree *t, const int32_t *row_choice, sdn_accept *out) { greedy_walk(t, row_choice, NULL, 0, out); }

void sdn_verify_greedy(const sdn_tree *t, const float *logits, int vocab, sdn_accept *out, int32_t *argmax) {
    if (argmax)
        for (int r = 0; r <= t->n; r++) argmax[r] = sdn_argmax(logits + (size_t)r * vocab, vocab);
    greedy_walk(t, argmax, logits, vocab, out);
}

int sdn_verify_sample(const sdn_tree *t, const float *logits, int vocab, const sdn_sampling *s, sdn_rng *rng, sdn_dist *work,
                      sdn_accept *out, sdn_err *err) {
    out->n_acc = 0;
    int cur = -1;
    for (;;) {
        int row = cur + 1, rc;
        if ((rc = sdn_dist_from_logits(s, logits + (size_t)row * vocab, vocab, work, err))) return rc;
        int next = -1;
        for (int i = cur + 1; i < t->n && next < 0; i++) {
            if (t->parent[i] != cur) continue;
            float p = sdn_dist_prob(work, t->token[i]);
            if (p > 0 && sdn_rng_double(rng) < p) next = i;
            else if (p > 0 && sdn_dist_remove(work, t->token[i]) != 0) break; /* no mass left: cannot happen unless p == 1 */
        }
        if (next < 0) {
            finish(out, sdn_dist_sample(work, sdn_rng_double(rng)));
            return SDN_OK;
        }
        out->nodes[out->n_acc] = next;
        out->tokens[out->n_acc] = t->token[next];
        out->n_acc++;
        cur = next;
    }
}
