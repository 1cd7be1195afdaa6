/* sdnpu_drafter.c - the combined drafter (see sdnpu_drafter.h). */
#include "draft/sdnpu_drafter.h"

#include <stdlib.h>
#include <string.h>

#include "common/sdn_util.h"
#include "draft/recycle.h"
#include "draft/tree_builder.h"
#include "suffix_automaton/sam.h"

#define TRIE_CAP 512
#define MAX_PRED 64

typedef struct sd {
    sdn_sdnpu_config cfg;
    sdn_sam *dyn, *hist;
    sdn_sam_match dm, hm;  /* matches of the committed sequence (before its newest token) */
    int32_t last;          /* newest committed token (not yet in dyn) */
    int have_last;
    int n_ctx;
    sdn_calib *cal;
    sdn_reuse reuse;
    sdn_tb *tb;
    sdn_sdnpu_info info;
    /* this request's rank counts of the model-derived candidates (rows checked, hits per rank) */
    uint64_t m_rows;
    uint64_t m_hits[SDN_RECYCLE_MAX_K];
} sd;

void sdn_sdnpu_defaults(sdn_sdnpu_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->use_cal = 1;
    cfg->use_reuse = 1;
    cfg->n_predict = 24;
    cfg->min_match = 1;
    cfg->alts = 2;
    cfg->follow = 0.7f;
    cfg->weigh = 0; /* the paper's drafter (3.3); 1 = weigh the context continuation (measured worse, docs/drafting.md) */
    cfg->use_model = 1;
    cfg->model_nodes = 32;
    cfg->model_min = 0.02f;
    cfg->model_prior = 16.0f;
    sdn_calib_defaults(&cfg->cal);
    sdn_reuse_defaults(&cfg->reuse);
}

static float q_of(uint32_t L) { return (float)L / ((float)L + 2.0f); }

/* The source of a token read at position p of the context-and-answer automaton. */
static uint8_t src_at(const sd *d, uint32_t p) { return p != SDN_SAM_NONE && p < (uint32_t)d->n_ctx ? SDN_SRC_PROMPT : SDN_SRC_ANSWER; }

/* Commit one token: match it against the automata (before adding it), then add it. */
static int commit(sd *d, int32_t t, sdn_err *err) {
    if (d->have_last) {
        sdn_sam_match_advance(d->dyn, &d->dm, d->last);
        int rc = sdn_sam_extend(d->dyn, d->last, err);
        if (rc) return rc;
    }
    if (d->hist) sdn_sam_match_advance(d->hist, &d->hm, t);
    d->last = t;
    d->have_last = 1;
    return SDN_OK;
}

static int sd_begin(sdn_drafter *dr, const int32_t *ctx, int n_ctx, const sdn_prefill_preds *preds, sdn_err *err) {
    sd *d = dr->impl;
    sdn_sam_free(d->dyn);
    d->dyn = NULL;
    sdn_calib_free(d->cal);
    d->cal = NULL;
    sdn_reuse_init(&d->reuse, &d->cfg.reuse);
    d->dm = d->hm = sdn_sam_match_root();
    d->have_last = 0;
    d->n_ctx = n_ctx;
    d->m_rows = 0;
    memset(d->m_hits, 0, sizeof d->m_hits);
    int rc = sdn_sam_create(&d->dyn, err);
    if (!rc) rc = sdn_sam_reserve(d->dyn, (size_t)n_ctx + 1024, err);
    if (!rc) rc = sdn_sam_begin_seq(d->dyn, 1, NULL, err);
    for (int i = 0; !rc && i < n_ctx; i++) rc = commit(d, ctx[i], err);
    if (!rc && d->cfg.use_cal && preds) {
        rc = sdn_calib_build(&d->cfg.cal, ctx, n_ctx, preds, &d->cal, err);
        if (!rc) sdn_calib_stats(d->cal, &d->info.cal_positions, &d->info.cal_nodes, &d->info.cal_bytes, &d->info.cal_build_s);
    }
    return rc;
}

/* The dynamic match of the whole committed sequence (its newest token included), as an
 * earlier occurrence: dyn does not hold the newest token yet. */
static sdn_sam_match dyn_match(const sd *d) {
    sdn_sam_match m = d->dm;
    sdn_sam_match_advance(d->dyn, &m, d->last);
    return m;
}

/* The continuation of match c (with its first-token alternatives) into the trie. With
 * calibration and cfg.weigh, a token read from context position p+1+i is weighed by the model's own
 * prediction for it at p+i instead of the fixed estimates. */
static void add_retrieval(sd *d, sdn_sam *s, sdn_sam_match c, int with_alts) {
    if (c.len == 0 || c.len < (uint32_t)d->cfg.min_match) return;
    float q = q_of(c.len);
    int32_t tok[MAX_PRED];
    float pr[MAX_PRED];
    int n = sdn_sam_continuation(s, &c, 0, tok, d->cfg.n_predict < MAX_PRED ? d->cfg.n_predict : MAX_PRED);
    uint32_t end = s == d->dyn && d->cal && d->cfg.weigh ? sdn_sam_first_end(s, &c) : SDN_SAM_NONE;
    for (int i = 0; i < n; i++) {
        float cp = end != SDN_SAM_NONE ? sdn_calib_prob(d->cal, (int)end + i, tok[i]) : -1.0f;
        if (cp >= 0) pr[i] = i == 0 ? q * cp : cp;
        else pr[i] = i == 0 ? q : d->cfg.follow;
    }
    /* the source of each token: the history, or where it was read in context + answer (the
       continuation of the earliest occurrence: token i at position first_end + 1 + i) */
    uint32_t first = s == d->dyn ? sdn_sam_first_end(s, &c) : SDN_SAM_NONE;
    for (int i = 0, at = -1; i < n; i++) {
        sdn_tb_source(d->tb, s != d->dyn ? SDN_SRC_HISTORY : src_at(d, first == SDN_SAM_NONE ? SDN_SAM_NONE : first + 1 + (uint32_t)i));
        if ((at = sdn_tb_add(d->tb, at, tok[i], pr[i], SDN_TB_OR)) < 0) break;
    }
    if (with_alts && d->cfg.alts > 0) {
        sdn_sam_next nx[8];
        uint64_t total = 0;
        int k = sdn_sam_next_tokens(s, &c, d->cfg.alts + 1 < 8 ? d->cfg.alts + 1 : 8, nx, &total, NULL);
        for (int i = 0; i < k && total > 0; i++) {
            if (n > 0 && nx[i].token == tok[0]) continue;
            sdn_tb_source(d->tb, s != d->dyn ? SDN_SRC_HISTORY : src_at(d, sdn_sam_first_end(s, &nx[i].child)));
            sdn_tb_add(d->tb, -1, nx[i].token, q * (float)nx[i].count / (float)total, SDN_TB_OR);
        }
    }
}

/* The calibrated tree at the context position where the dynamic match (extended by the
 * newest token) ends. */
static void add_calibration(sd *d, sdn_sam_match c) {
    if (!d->cal || c.len == 0 || c.len < (uint32_t)d->cfg.min_match) return;
    uint32_t p = sdn_sam_first_end(d->dyn, &c);
    if (p == SDN_SAM_NONE || (int)p >= d->n_ctx) return;
    sdn_tb_source(d->tb, SDN_SRC_PROMPT); /* the model's predictions at a prompt position */
    int n;
    const sdn_calib_node *nd = sdn_calib_tree(d->cal, (int)p, &n);
    int at[64];
    float q = q_of(c.len);
    for (int i = 0; i < n && i < 64; i++) {
        int parent = nd[i].parent < 0 ? -1 : at[nd[i].parent];
        at[i] = parent == -2 ? -2
                             : sdn_tb_add(d->tb, parent, nd[i].token, nd[i].parent < 0 ? nd[i].prob * q : nd[i].prob, SDN_TB_MAX);
        if (at[i] < 0) at[i] = -2; /* trie full: skip the subtree */
    }
}

/* a_r: the estimate of a rank-r model-derived candidate, this request's counts blended with
 * the table's (model_prior observations of them; a weak 0.3 / 2^r guess while the table has
 * none). */
static void rank_estimates(sd *d, int k, float *a) {
    uint64_t hits[SDN_RECYCLE_MAX_K], updates = 0;
    sdn_recycle_stats(d->cfg.recycle, hits, &updates);
    for (int r = 0; r < k; r++) {
        double prior = updates > 0 ? (double)hits[r] / (double)updates : 0.3 / (double)(1 << r);
        double w = d->cfg.model_prior;
        a[r] = (float)(((double)d->m_hits[r] + w * prior) / ((double)d->m_rows + w));
    }
}

/* The model-derived candidates: best-first from the newest committed token through the
 * table's rows, each rank-r candidate with estimate a_r, while the path estimate stays at or
 * above model_min, up to model_nodes candidates. */
static void add_model(sd *d) {
    sdn_recycle *rt = d->cfg.recycle;
    const int k = sdn_recycle_k(rt), cap = d->cfg.model_nodes < 64 ? d->cfg.model_nodes : 64;
    float a[SDN_RECYCLE_MAX_K];
    rank_estimates(d, k, a);
    struct { int at; int32_t tok; float path; int done; } q[65];
    int nq = 1, added = 0;
    q[0].at = -1, q[0].tok = d->last, q[0].path = 1.0f, q[0].done = 0;
    sdn_tb_source(d->tb, SDN_SRC_RECYCLED);
    while (added < cap) {
        int best = -1;
        for (int i = 0; i < nq; i++)
            if (!q[i].done && (best < 0 || q[i].path > q[best].path)) best = i;
        if (best < 0 || q[best].path * a[0] < d->cfg.model_min) break;
        q[best].done = 1;
        int32_t row[SDN_RECYCLE_MAX_K];
        int m = sdn_recycle_get(rt, q[best].tok, row);
        for (int j = 0; j < m && added < cap && nq < 65; j++) {
            float p = q[best].path * a[j];
            if (p < d->cfg.model_min) continue;
            int at = sdn_tb_add(d->tb, q[best].at, row[j], a[j], SDN_TB_OR);
            if (at < 0) return; /* the trie is full */
            q[nq].at = at, q[nq].tok = row[j], q[nq].path = p, q[nq].done = 0;
            nq++, added++;
        }
    }
    d->info.model_nodes += added;
}

static int sd_propose(sdn_drafter *dr, sdn_tree *out, const sdn_draft_caps *caps, sdn_err *err) {
    sd *d = dr->impl;
    if (!d->have_last) return SDN_OK;
    double t0 = sdn_now();
    sdn_tb_reset(d->tb);
    sdn_sam_match m = dyn_match(d);
    add_retrieval(d, d->dyn, m, caps->max_branch > 1);
    if (d->hist) add_retrieval(d, d->hist, d->hm, 0);
    if (d->cfg.use_cal) add_calibration(d, m);
    if (d->cfg.use_model && d->cfg.recycle) add_model(d);
    sdn_reuse_chain rc[2 * SDN_REUSE_MAX_SEGS];
    int nrc = 0;
    if (d->cfg.use_reuse) {
        nrc = sdn_reuse_propose(&d->reuse, d->last, rc, 2 * SDN_REUSE_MAX_SEGS);
        sdn_tb_source(d->tb, SDN_SRC_REUSE);
        for (int i = 0; i < nrc; i++) sdn_tb_add_chain(d->tb, rc[i].tok, NULL, d->cfg.reuse.accept_prob, rc[i].n, SDN_TB_OR);
        d->info.reuse_chains += nrc;
    }
    sdn_tb_emit(d->tb, out, caps);
    /* a reuse chain whose first token did not make it into the tree was not offered */
    for (int i = 0; i < nrc; i++)
        if (rc[i].n == 0 || sdn_tree_find_child(out, -1, rc[i].tok[0]) < 0) sdn_reuse_unoffer(&d->reuse, &rc[i]);
    d->info.proposals++;
    d->info.propose_s += sdn_now() - t0;
    return SDN_OK;
}

/* A guess past text not committed is made only from a match of at least this many tokens
 * (the path's end and what precedes it): a shorter one is weak evidence (q_of(2) = 0.5), and a
 * wrong guess there costs its rows and whatever is drafted below it (measured on constrained
 * RAG answers, where 1- and 2-token matches of `": "` drafted context words that were never
 * accepted, step after step). */
#define AFTER_MIN_MATCH 3

/* The retrieval continuation after the committed sequence + path: of the context-and-answer
 * automaton and the history automaton, the one whose match (path included) is longer (the
 * context's on a tie), when that match is at least AFTER_MIN_MATCH and min_match tokens long.
 * Calibration and draft reuse are positional on committed text, so they are not asked here. */
static int sd_continue_after(sdn_drafter *dr, const int32_t *path, int n_path, int32_t *out, uint8_t *src, int max) {
    sd *d = dr->impl;
    if (!d->have_last || n_path <= 0 || max <= 0) return 0;
    sdn_sam_match m = dyn_match(d), h = d->hm;
    for (int i = 0; i < n_path; i++) {
        sdn_sam_match_advance(d->dyn, &m, path[i]);
        if (d->hist) sdn_sam_match_advance(d->hist, &h, path[i]);
    }
    sdn_sam *s = d->dyn;
    sdn_sam_match c = m;
    if (d->hist && h.len > m.len) s = d->hist, c = h;
    if (c.len < AFTER_MIN_MATCH || c.len < (uint32_t)d->cfg.min_match) return 0;
    if (max > MAX_PRED) max = MAX_PRED;
    int n = sdn_sam_continuation(s, &c, SDN_SAM_EARLIEST, out, max);
    uint32_t first = s == d->dyn ? sdn_sam_first_end(s, &c) : SDN_SAM_NONE;
    for (int i = 0; src && i < n; i++) src[i] = s != d->dyn ? SDN_SRC_HISTORY : src_at(d, first + 1 + (uint32_t)i);
    return n;
}

/* The verified rows into the model's table: row 0 after the root (the newest committed token),
 * row i + 1 after node i; the update also tallies this request's rank counts (where each row's
 * best token stood in the table's old row). */
static void model_feedback(sd *d, const sdn_draft_feedback *fb) {
    const int n = 1 + (fb->tree ? fb->tree->n : 0);
    if (n > 64 || !d->have_last) return;
    int32_t tok[64];
    tok[0] = d->last;
    for (int i = 1; i < n; i++) tok[i] = fb->tree->token[i - 1];
    sdn_recycle_update(d->cfg.recycle, tok, fb->row_topk, fb->topk, fb->topk, n, d->m_hits, &d->m_rows);
}

static int sd_feedback(sdn_drafter *dr, const sdn_draft_feedback *fb, sdn_err *err) {
    sd *d = dr->impl;
    if (d->cfg.use_reuse && fb->node_argmax) sdn_reuse_feedback(&d->reuse, fb);
    if (d->cfg.use_model && d->cfg.recycle && fb->row_topk && fb->topk > 0) model_feedback(d, fb);
    for (int i = 0; i < fb->n_accepted; i++) {
        int rc = commit(d, fb->accepted[i], err);
        if (rc) return rc;
    }
    return SDN_OK;
}

static void sd_destroy(sdn_drafter *dr) {
    sd *d = dr->impl;
    if (!d) return;
    sdn_sam_free(d->dyn);
    sdn_sam_free(d->hist);
    sdn_calib_free(d->cal);
    sdn_tb_free(d->tb);
    free(d);
    dr->impl = NULL;
}

static const sdn_drafter_ops ops = {"sdnpu", sd_begin, sd_propose, sd_feedback, sd_destroy, sd_continue_after};

int sdn_sdnpu_create(const sdn_sdnpu_config *cfg, const int32_t *const *hist, const int *hist_len, int n_hist,
                     const uint8_t *hist_bytes, size_t hist_bytes_len, sdn_drafter *out, sdn_err *err) {
    memset(out, 0, sizeof *out);
    if (cfg->n_predict < 1 || cfg->min_match < 0 || cfg->alts < 0 || !(cfg->follow > 0 && cfg->follow < 1) || cfg->model_nodes < 0 ||
        !(cfg->model_min >= 0 && cfg->model_min <= 1) || !(cfg->model_prior >= 0))
        return sdn_fail(err, SDN_EINVAL, "sdnpu drafter: invalid configuration (n_predict >= 1, follow in (0, 1), model_nodes >= 0, model_min in [0, 1], model_prior >= 0)");
    sd *d = calloc(1, sizeof *d);
    if (!d) return sdn_fail(err, SDN_ENOMEM, "out of memory");
    d->cfg = *cfg;
    int rc = sdn_tb_new(TRIE_CAP, &d->tb, err);
    if (!rc && hist_bytes) rc = sdn_sam_deserialize(hist_bytes, hist_bytes_len, &d->hist, err);
    else if (!rc && n_hist > 0) {
        rc = sdn_sam_create(&d->hist, err);
        for (int i = 0; !rc && i < n_hist; i++) rc = sdn_sam_add_seq(d->hist, (uint32_t)i + 1, hist[i], (size_t)hist_len[i], err);
    }
    out->ops = &ops;
    out->impl = d;
    if (rc) {
        sd_destroy(out);
        out->ops = NULL;
        return rc;
    }
    return SDN_OK;
}

int sdn_sdnpu_info_get(const sdn_drafter *dr, sdn_sdnpu_info *out) {
    if (!dr || dr->ops != &ops) return SDN_EINVAL;
    *out = ((const sd *)dr->impl)->info;
    return SDN_OK;
}
