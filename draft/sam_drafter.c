/* sam_drafter.c - SAM-Decoding drafter over a dynamic and a static suffix automaton (the
 * rules are stated in sam_drafter.h).
 *
 * Per committed token t: advance the dynamic match by t, then append t to the dynamic
 * automaton, then advance the static match by t. The dynamic match therefore is the
 * longest suffix of the sequence that occurred before its newest token (its earliest end
 * lies before the newest position, so a continuation exists), and nothing is ever
 * rescanned: each token costs amortized O(1) in both automata. A proposal reads the
 * continuation of the earliest occurrence (chain) or expands the automaton's top-k next
 * tokens best-first (tree). */
#include "draft/sam_drafter.h"

#include <stdlib.h>
#include <string.h>

#include "suffix_automaton/sam.h"

typedef struct cand {
    double score;
    uint64_t seq; /* discovery order: ties go to the earlier one */
    int parent, depth;
    int32_t token;
    sdn_sam_match m;
} cand;

typedef struct samd {
    sdn_sam_drafter_config cfg;
    sdn_sam *dyn, *hist;
    sdn_sam_match dm, hm;
    int n_ctx; /* dyn positions below it are the context's, the rest the answer's */
    sdn_sam_drafter_info info;
    cand *heap;
    int heap_n, heap_cap;
    sdn_sam_next *nx;
    int32_t *buf;
} samd;

static const sdn_drafter_ops samd_ops;

void sdn_sam_drafter_defaults(sdn_sam_drafter_config *cfg) {
    cfg->n_predicts = 10;
    cfg->min_match = 4;
    cfg->len_bias = 4;
    cfg->tree = 0;
    cfg->topk = 8;
    cfg->shorten = 1;
}

/* ---- frontier (max-heap by score, then discovery order) -------------------------------- */

static inline int cand_before(const cand *a, const cand *b) {
    return a->score > b->score || (a->score == b->score && a->seq < b->seq);
}

static int heap_push(samd *p, const cand *c) {
    if (p->heap_n == p->heap_cap) {
        int nc = p->heap_cap ? p->heap_cap * 2 : 256;
        cand *nh = realloc(p->heap, sizeof *nh * (size_t)nc);
        if (!nh) return -1;
        p->heap = nh, p->heap_cap = nc;
    }
    int i = p->heap_n++;
    while (i > 0) {
        int up = (i - 1) / 2;
        if (!cand_before(c, &p->heap[up])) break;
        p->heap[i] = p->heap[up];
        i = up;
    }
    p->heap[i] = *c;
    return 0;
}

static cand heap_pop(samd *p) {
    cand top = p->heap[0], last = p->heap[--p->heap_n];
    int i = 0, n = p->heap_n;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, b = i;
        const cand *best = &last;
        if (l < n && cand_before(&p->heap[l], best)) b = l, best = &p->heap[l];
        if (r < n && cand_before(&p->heap[r], best)) b = r;
        if (b == i) break;
        p->heap[i] = p->heap[b];
        i = b;
    }
    if (n) p->heap[i] = last;
    return top;
}

/* ---- drafting ---------------------------------------------------------------------------- */

static int step(samd *p, int32_t t, sdn_err *err) {
    sdn_sam_match_advance(p->dyn, &p->dm, t); /* before t is added: an earlier occurrence */
    int rc = sdn_sam_extend(p->dyn, t, err);
    if (rc) return rc;
    if (p->hist) sdn_sam_match_advance(p->hist, &p->hm, t);
    return SDN_OK;
}

static int samd_begin(sdn_drafter *d, const int32_t *ctx, int n_ctx, const sdn_prefill_preds *preds, sdn_err *err) {
    samd *p = d->impl;
    (void)preds;
    if (n_ctx < 0 || (!ctx && n_ctx)) return sdn_fail(err, SDN_EINVAL, "sam drafter: bad context");
    sdn_sam_free(p->dyn);
    p->dyn = NULL;
    int rc = sdn_sam_create(&p->dyn, err);
    if (rc) return rc;
    if ((rc = sdn_sam_reserve(p->dyn, (size_t)n_ctx + 512, err))) return rc;
    p->dm = sdn_sam_match_root();
    p->hm = sdn_sam_match_root();
    p->n_ctx = n_ctx;
    memset(&p->info, 0, sizeof p->info);
    for (int i = 0; i < n_ctx; i++)
        if ((rc = step(p, ctx[i], err))) return sdn_fail(err, rc, "sam drafter: context token %d", i);
    if (p->cfg.tree) sdn_sam_refresh(p->dyn); /* counts for the whole context: one pass, here */
    return SDN_OK;
}

static int samd_feedback(sdn_drafter *d, const sdn_draft_feedback *fb, sdn_err *err) {
    samd *p = d->impl;
    if (!p->dyn) return sdn_fail(err, SDN_ESTATE, "sam drafter: feedback before begin");
    if (fb->n_accepted < 0 || (!fb->accepted && fb->n_accepted)) return sdn_fail(err, SDN_EINVAL, "sam drafter: bad feedback");
    for (int i = 0; i < fb->n_accepted; i++) {
        int rc = step(p, fb->accepted[i], err);
        if (rc) return sdn_fail(err, rc, "sam drafter: accepted token %d", i);
    }
    return SDN_OK;
}

/* The source (SDN_SRC_*) of a token read at position pos of automaton sam. */
static uint8_t source_at(const samd *p, const sdn_sam *sam, uint32_t pos) {
    if (sam != p->dyn) return SDN_SRC_HISTORY;
    return pos != SDN_SAM_NONE && pos < (uint32_t)p->n_ctx ? SDN_SRC_PROMPT : SDN_SRC_ANSWER;
}

static int propose_chain(samd *p, sdn_sam *sam, sdn_sam_match m, int floor_len, int want, int bias, sdn_tree *out) {
    if (p->cfg.shorten) {
        /* SAM-Decoding's to_anc: a shorter match whose earliest occurrence has more after it */
        while (sdn_sam_avail_after(sam, sdn_sam_first_end(sam, &m)) < (uint32_t)want) {
            sdn_sam_match q = m;
            if (!sdn_sam_match_parent(sam, &q) || (int)q.len < floor_len) break;
            m = q;
        }
    }
    uint32_t end = sdn_sam_first_end(sam, &m);
    int n = sdn_sam_read_after(sam, end, p->buf, want);
    int l = (int)m.len - bias;
    p->info.match_len = l;
    float q = (float)l / (float)(l + 1), score = 1.0f;
    int parent = -1;
    for (int j = 0; j < n; j++) {
        score *= q;
        int i = sdn_tree_add(out, parent, p->buf[j], score, NULL);
        if (i < 0) break;
        out->source[i] = source_at(p, sam, end + 1 + (uint32_t)j);
        parent = i;
    }
    return SDN_OK;
}

/* Push the top-k next tokens of match m (node `parent` at `depth`, score `ps`). */
static int expand(samd *p, sdn_sam *sam, const sdn_sam_match *m, int parent, int depth, double ps, int k, uint64_t *seq) {
    uint64_t total;
    int n = sdn_sam_next_tokens(sam, m, k, p->nx, &total, NULL);
    for (int i = 0; i < n; i++) {
        cand c = {ps * ((double)p->nx[i].count / (double)(total + 1)), (*seq)++, parent, depth + 1, p->nx[i].token,
                  p->nx[i].child};
        if (heap_push(p, &c)) return -1;
    }
    return 0;
}

/* A node's children score strictly below the node (each factor is < 1). If the frontier
 * already holds `room` candidates scoring at least as much, they fill the remaining room
 * first and no child can be chosen: skip listing the children (the tree is the same). */
static int worth_expanding(const samd *p, double score, int room) {
    if (room <= 0) return 0;
    int n = 0;
    for (int i = 0; i < p->heap_n; i++)
        if (p->heap[i].score >= score && ++n >= room) return 0;
    return 1;
}

static int propose_tree(samd *p, sdn_sam *sam, sdn_sam_match m, int max_nodes, int max_depth, int k, sdn_tree *out,
                        sdn_err *err) {
    uint64_t seq = 0;
    p->heap_n = 0;
    if (expand(p, sam, &m, -1, 0, 1.0, k, &seq)) return sdn_fail(err, SDN_ENOMEM, "sam drafter: out of memory");
    int added = 0;
    while (added < max_nodes && p->heap_n > 0) {
        cand c = heap_pop(p);
        int i = sdn_tree_add(out, c.parent, c.token, (float)c.score, NULL);
        if (i < 0) {
            if (out->n >= out->cap) break;
            continue; /* (cannot happen: siblings carry distinct tokens) */
        }
        out->source[i] = source_at(p, sam, sdn_sam_first_end(sam, &c.m));
        added++;
        if (c.depth >= max_depth || !worth_expanding(p, c.score, max_nodes - added)) continue;
        if (expand(p, sam, &c.m, i, c.depth, c.score, k, &seq)) return sdn_fail(err, SDN_ENOMEM, "sam drafter: out of memory");
    }
    return SDN_OK;
}

static int samd_propose(sdn_drafter *d, sdn_tree *out, const sdn_draft_caps *caps, sdn_err *err) {
    samd *p = d->impl;
    memset(&p->info, 0, sizeof p->info);
    if (!p->dyn) return sdn_fail(err, SDN_ESTATE, "sam drafter: propose before begin");
    sdn_sam_match_normalize(p->dyn, &p->dm);
    int ld = (int)p->dm.len, ls = p->hist ? (int)p->hm.len : 0;
    p->info.dyn_len = ld, p->info.static_len = ls;
    int use_dyn = ld >= ls - p->cfg.len_bias;
    int l = use_dyn ? ld : ls - p->cfg.len_bias;
    if (l < p->cfg.min_match || l <= 0) return SDN_OK;
    sdn_sam *sam = use_dyn ? p->dyn : p->hist;
    sdn_sam_match m = use_dyn ? p->dm : p->hm;
    int bias = use_dyn ? 0 : p->cfg.len_bias;
    if (m.len == 0) return SDN_OK; /* (a negative bias can favour an empty static match) */

    int max_depth = p->cfg.n_predicts, max_nodes = out->cap - out->n, k = p->cfg.topk;
    if (caps) {
        if (caps->max_depth < max_depth) max_depth = caps->max_depth;
        if (caps->max_nodes < max_nodes) max_nodes = caps->max_nodes;
        if (caps->max_branch < k) k = caps->max_branch;
    }
    if (max_depth <= 0 || max_nodes <= 0 || k <= 0) return SDN_OK;
    p->info.source = use_dyn ? 1 : 2;
    p->info.match_len = l;
    if (!p->cfg.tree) {
        int want = max_depth < max_nodes ? max_depth : max_nodes;
        return propose_chain(p, sam, m, p->cfg.min_match + bias, want, bias, out);
    }
    return propose_tree(p, sam, m, max_nodes, max_depth, k, out, err);
}

static void samd_destroy(sdn_drafter *d) {
    samd *p = d->impl;
    if (p) {
        sdn_sam_free(p->dyn);
        sdn_sam_free(p->hist);
        free(p->heap), free(p->nx), free(p->buf);
        free(p);
    }
    d->impl = NULL;
    d->ops = NULL;
}

static const sdn_drafter_ops samd_ops = {
    .name = "sam",
    .begin = samd_begin,
    .propose = samd_propose,
    .feedback = samd_feedback,
    .destroy = samd_destroy,
};

static int samd_new(const sdn_sam_drafter_config *cfg, samd **out, sdn_err *err) {
    sdn_sam_drafter_config c;
    if (cfg) c = *cfg;
    else sdn_sam_drafter_defaults(&c);
    if (c.n_predicts < 1 || c.n_predicts > 4096)
        return sdn_fail(err, SDN_EINVAL, "sam drafter: n_predicts %d not in [1, 4096]", c.n_predicts);
    if (c.min_match < 1) return sdn_fail(err, SDN_EINVAL, "sam drafter: min_match %d below 1", c.min_match);
    if (c.len_bias < -1000000 || c.len_bias > 1000000)
        return sdn_fail(err, SDN_EINVAL, "sam drafter: len_bias %d out of range", c.len_bias);
    if (c.tree != 0 && c.tree != 1) return sdn_fail(err, SDN_EINVAL, "sam drafter: tree %d is not 0 or 1", c.tree);
    if (c.topk < 1 || c.topk > 1024) return sdn_fail(err, SDN_EINVAL, "sam drafter: topk %d not in [1, 1024]", c.topk);
    if (c.shorten != 0 && c.shorten != 1) return sdn_fail(err, SDN_EINVAL, "sam drafter: shorten %d is not 0 or 1", c.shorten);
    samd *p = calloc(1, sizeof *p);
    if (p) {
        p->nx = malloc(sizeof *p->nx * (size_t)c.topk);
        p->buf = malloc(sizeof *p->buf * (size_t)c.n_predicts);
    }
    if (!p || !p->nx || !p->buf) {
        if (p) free(p->nx), free(p->buf), free(p);
        return sdn_fail(err, SDN_ENOMEM, "sam drafter: out of memory");
    }
    p->cfg = c;
    *out = p;
    return SDN_OK;
}

static void samd_wrap(samd *p, sdn_drafter *out) {
    out->ops = &samd_ops;
    out->impl = p;
}

int sdn_sam_drafter_create(const sdn_sam_drafter_config *cfg, const int32_t *const *hist, const int *hist_len,
                           int n_hist, sdn_drafter *out, sdn_err *err) {
    out->ops = NULL, out->impl = NULL;
    if (n_hist < 0 || (n_hist && (!hist || !hist_len))) return sdn_fail(err, SDN_EINVAL, "sam drafter: bad history arrays");
    samd *p = NULL;
    int rc = samd_new(cfg, &p, err);
    if (rc) return rc;
    sdn_drafter tmp;
    samd_wrap(p, &tmp);
    if (n_hist > 0) {
        if ((rc = sdn_sam_create(&p->hist, err))) goto fail;
        for (int i = 0; i < n_hist; i++) {
            if (hist_len[i] < 0 || (!hist[i] && hist_len[i])) {
                rc = sdn_fail(err, SDN_EINVAL, "sam drafter: history sequence %d is invalid", i);
                goto fail;
            }
            if ((rc = sdn_sam_add_seq(p->hist, (uint32_t)i, hist[i], (size_t)hist_len[i], err))) {
                rc = sdn_fail(err, rc, "sam drafter: history sequence %d", i);
                goto fail;
            }
        }
        /* finished growing: trim and apply counts, so queries only read it */
        if ((rc = sdn_sam_shrink(p->hist, err))) goto fail;
    }
    *out = tmp;
    return SDN_OK;
fail:
    samd_destroy(&tmp);
    return rc;
}

int sdn_sam_drafter_create_from_bytes(const sdn_sam_drafter_config *cfg, const uint8_t *bytes, size_t len,
                                      sdn_drafter *out, sdn_err *err) {
    out->ops = NULL, out->impl = NULL;
    samd *p = NULL;
    int rc = samd_new(cfg, &p, err);
    if (rc) return rc;
    sdn_drafter tmp;
    samd_wrap(p, &tmp);
    if (len > 0) {
        if ((rc = sdn_sam_deserialize(bytes, len, &p->hist, err))) {
            samd_destroy(&tmp);
            return sdn_fail(err, rc, "sam drafter: history automaton");
        }
        sdn_sam_refresh(p->hist);
    }
    *out = tmp;
    return SDN_OK;
}

int sdn_sam_drafter_info_get(const sdn_drafter *d, sdn_sam_drafter_info *out) {
    if (!d || d->ops != &samd_ops || !d->impl) return SDN_EINVAL;
    *out = ((const samd *)d->impl)->info;
    return SDN_OK;
}
