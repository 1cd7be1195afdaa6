/* pld.c - prompt lookup decoding drafter (the rule is stated in pld.h).
 *
 * State: the whole sequence S (context + committed output) and, for every n-gram size n in
 * [min_ngram, max_ngram], an open-addressing hash table from n-gram to the start of its
 * earliest occurrence. Appending a token completes one window per size; a window whose
 * n-gram is already in the table is ignored (its earliest start is kept). Entries hold the
 * upper 32 bits of the XXH3 hash of the n tokens and the start; equal tags are confirmed
 * by comparing the tokens in S, so hash collisions never change the result. */
#include "draft/pld.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#define PLD_MAX_NGRAM 64
#define EMPTY UINT64_MAX

typedef struct pld_tab {
    uint64_t *e; /* (tag << 32) | start; EMPTY = free */
    uint32_t cap, n;
} pld_tab;

typedef struct pld {
    sdn_pld_config cfg;
    int32_t *seq;
    uint32_t n, cap;
    uint32_t n_ctx; /* seq[0..n_ctx) is the context, the rest the answer */
    pld_tab tab[PLD_MAX_NGRAM + 1];
} pld;

void sdn_pld_defaults(sdn_pld_config *cfg) {
    cfg->max_ngram = 3;
    cfg->min_ngram = 1;
    cfg->num_pred = 10;
}

static inline uint32_t slot_of(uint64_t h, uint32_t cap) { return (uint32_t)(((h & 0xffffffffu) * cap) >> 32); }

/* Earliest start of the n-gram S[start..start+k); inserts `start` when the n-gram is new
 * (insert != 0). Returns UINT32_MAX if absent and not inserted. */
static uint32_t tab_lookup(pld *p, int k, uint32_t start, int insert) {
    pld_tab *t = &p->tab[k];
    if (!t->cap) return UINT32_MAX;
    const int32_t *w = p->seq + start;
    uint64_t h = XXH3_64bits(w, sizeof(int32_t) * (size_t)k);
    uint32_t tag = (uint32_t)(h >> 32), i = slot_of(h, t->cap);
    for (;;) {
        uint64_t e = t->e[i];
        if (e == EMPTY) {
            if (!insert) return UINT32_MAX;
            t->e[i] = ((uint64_t)tag << 32) | start;
            t->n++;
            return start;
        }
        uint32_t s0 = (uint32_t)e;
        if ((uint32_t)(e >> 32) == tag && memcmp(p->seq + s0, w, sizeof(int32_t) * (size_t)k) == 0) return s0;
        if (++i == t->cap) i = 0;
    }
}

/* Keep load <= 1/2. Rehash needs the n-gram tokens, which S still holds. */
static int tab_reserve(pld *p, int k, sdn_err *err) {
    pld_tab *t = &p->tab[k];
    if ((uint64_t)(t->n + 1) * 2 <= t->cap) return SDN_OK;
    uint64_t nc = t->cap ? (uint64_t)t->cap * 2 : 1024;
    if (nc > UINT32_MAX) return sdn_fail(err, SDN_ENOMEM, "pld: %d-gram table too large", k);
    uint64_t *ne = malloc(sizeof *ne * nc);
    if (!ne) return sdn_fail(err, SDN_ENOMEM, "pld: cannot grow the %d-gram table", k);
    memset(ne, 0xff, sizeof *ne * nc);
    for (uint32_t i = 0; i < t->cap; i++) {
        uint64_t e = t->e[i];
        if (e == EMPTY) continue;
        uint64_t h = XXH3_64bits(p->seq + (uint32_t)e, sizeof(int32_t) * (size_t)k);
        uint32_t j = slot_of(h, (uint32_t)nc);
        while (ne[j] != EMPTY)
            if (++j == nc) j = 0;
        ne[j] = e;
    }
    free(t->e);
    t->e = ne;
    t->cap = (uint32_t)nc;
    return SDN_OK;
}

static int pld_append(pld *p, const int32_t *tok, int n, sdn_err *err) {
    if (n < 0 || (!tok && n)) return sdn_fail(err, SDN_EINVAL, "pld: bad token array");
    if ((uint64_t)p->n + (uint64_t)n >= UINT32_MAX / 2) return sdn_fail(err, SDN_ENOMEM, "pld: sequence too long");
    if (p->n + (uint32_t)n > p->cap) {
        uint64_t nc = p->cap ? p->cap : 1024;
        while (nc < p->n + (uint64_t)n) nc *= 2;
        int32_t *ns = realloc(p->seq, sizeof *ns * nc);
        if (!ns) return sdn_fail(err, SDN_ENOMEM, "pld: cannot grow the sequence to %llu tokens", (unsigned long long)nc);
        p->seq = ns;
        p->cap = (uint32_t)nc;
    }
    for (int i = 0; i < n; i++) {
        p->seq[p->n++] = tok[i];
        for (int k = p->cfg.min_ngram; k <= p->cfg.max_ngram && (uint32_t)k <= p->n; k++) {
            int rc = tab_reserve(p, k, err);
            if (rc) return rc;
            tab_lookup(p, k, p->n - (uint32_t)k, 1);
        }
    }
    return SDN_OK;
}

static int pld_begin(sdn_drafter *d, const int32_t *ctx, int n_ctx, const sdn_prefill_preds *preds, sdn_err *err) {
    pld *p = d->impl;
    (void)preds;
    p->n = 0;
    for (int k = 0; k <= PLD_MAX_NGRAM; k++) {
        if (p->tab[k].e) memset(p->tab[k].e, 0xff, sizeof(uint64_t) * p->tab[k].cap);
        p->tab[k].n = 0;
    }
    p->n_ctx = n_ctx > 0 ? (uint32_t)n_ctx : 0;
    return pld_append(p, ctx, n_ctx, err);
}

static int pld_feedback(sdn_drafter *d, const sdn_draft_feedback *fb, sdn_err *err) {
    return pld_append(d->impl, fb->accepted, fb->n_accepted, err);
}

static int pld_propose(sdn_drafter *d, sdn_tree *out, const sdn_draft_caps *caps, sdn_err *err) {
    pld *p = d->impl;
    (void)err;
    int64_t L = p->n, np = p->cfg.num_pred;
    int limit = p->cfg.num_pred;
    if (caps) {
        if (caps->max_nodes < limit) limit = caps->max_nodes;
        if (caps->max_depth < limit) limit = caps->max_depth;
        if (caps->max_branch < 1) limit = 0;
    }
    if (out->cap - out->n < limit) limit = out->cap - out->n;
    if (limit <= 0) return SDN_OK;
    for (int k = p->cfg.max_ngram; k >= p->cfg.min_ngram; k--) {
        if (k > L) continue;
        uint32_t idx = tab_lookup(p, k, (uint32_t)(L - k), 0);
        if (idx == UINT32_MAX) continue; /* cannot happen: the final window is indexed */
        if ((int64_t)idx + k + np <= L && (int64_t)idx + k < L - k) {
            const int32_t *draft = p->seq + idx + k;
            float q = (float)k / (float)(k + 1), score = 1.0f;
            int parent = -1;
            for (int j = 0; j < limit; j++) {
                score *= q;
                int i = sdn_tree_add(out, parent, draft[j], score, NULL);
                if (i < 0) break;
                out->source[i] = idx + (uint32_t)k + (uint32_t)j < p->n_ctx ? SDN_SRC_PROMPT : SDN_SRC_ANSWER;
                parent = i;
            }
            return SDN_OK;
        }
    }
    return SDN_OK;
}

static void pld_destroy(sdn_drafter *d) {
    pld *p = d->impl;
    if (p) {
        for (int k = 0; k <= PLD_MAX_NGRAM; k++) free(p->tab[k].e);
        free(p->seq);
        free(p);
    }
    d->impl = NULL;
    d->ops = NULL;
}

static const sdn_drafter_ops pld_ops = {
    .name = "pld",
    .begin = pld_begin,
    .propose = pld_propose,
    .feedback = pld_feedback,
    .destroy = pld_destroy,
};

int sdn_pld_create(const sdn_pld_config *cfg, sdn_drafter *out, sdn_err *err) {
    out->ops = NULL;
    out->impl = NULL;
    sdn_pld_config c;
    if (cfg) c = *cfg;
    else sdn_pld_defaults(&c);
    if (c.min_ngram < 1 || c.min_ngram > PLD_MAX_NGRAM)
        return sdn_fail(err, SDN_EINVAL, "pld: min_ngram %d not in [1, %d]", c.min_ngram, PLD_MAX_NGRAM);
    if (c.max_ngram < c.min_ngram || c.max_ngram > PLD_MAX_NGRAM)
        return sdn_fail(err, SDN_EINVAL, "pld: max_ngram %d not in [min_ngram=%d, %d]", c.max_ngram, c.min_ngram,
                        PLD_MAX_NGRAM);
    if (c.num_pred < 1 || c.num_pred > 4096)
        return sdn_fail(err, SDN_EINVAL, "pld: num_pred %d not in [1, 4096]", c.num_pred);
    pld *p = calloc(1, sizeof *p);
    if (!p) return sdn_fail(err, SDN_ENOMEM, "pld: out of memory");
    p->cfg = c;
    out->ops = &pld_ops;
    out->impl = p;
    return SDN_OK;
}
