/* session.c - prefill and the draft -> verify -> accept -> compact loop (see session.h). */
#include "engine/session.h"

#include <stdlib.h>
#include <string.h>

#include "common/sdn_util.h"
#include "engine/model.h"
#include "verify/verify.h"

void sdn_preds_free(sdn_preds *p) {
    if (!p) return;
    free(p->tok);
    free(p->prob);
    memset(p, 0, sizeof *p);
}

double sdn_gen_mean_accepted(const sdn_gen_stats *s) { return s->steps ? (double)s->n_gen / s->steps : 0.0; }

int sdn_generate(sdn_ctx *c, const int32_t *prompt, int n_prompt, const sdn_gen_params *p, int (*eog)(void *, int32_t),
                 void *ud_eog, sdn_token_cb cb, void *ud, int32_t **out, int *n_out, sdn_gen_stats *st, sdn_err *err) {
    sdn_gen_stats s = {0};
    if (out) *out = NULL;
    if (n_out) *n_out = 0;
    if (n_prompt < 1) return sdn_fail(err, SDN_EINVAL, "empty prompt");
    const sdn_model_config *cfg = sdn_model_cfg(sdn_ctx_model(c));
    int vocab = cfg->vocab, n_ctx = sdn_ctx_n_ctx(c);
    if (n_prompt >= n_ctx)
        return sdn_fail(err, SDN_EINVAL, "prompt of %d tokens does not fit the context of %d (raise --ctx)", n_prompt, n_ctx);
    int max_new = p->max_tokens;
    if (max_new > n_ctx - n_prompt) max_new = n_ctx - n_prompt;
    int chunk = p->prefill_chunk > 0 ? p->prefill_chunk : sdn_ctx_max_batch(c);
    if (chunk > sdn_ctx_max_batch(c)) chunk = sdn_ctx_max_batch(c);
    sdn_draft_caps caps = p->caps;
    int budget = SDN_INVARIANT_MAX_ROWS - 1, pad_rows = 0;
    if (p->decode_rows > 0) {
        pad_rows = p->decode_rows < SDN_INVARIANT_MAX_ROWS ? p->decode_rows : SDN_INVARIANT_MAX_ROWS;
        budget = pad_rows - 1;
    }
    /* the budget follows the cost curve when the caller gave one and no fixed size */
    const int adaptive = p->verify_ms && p->drafter && caps.max_nodes <= 0;
    long budget_miss = 0;
    if (caps.max_nodes <= 0) caps.max_nodes = adaptive ? SDN_INVARIANT_MAX_ROWS - 1 : SDN_DEFAULT_DRAFT_TOKENS;
    /* a one-row decode graph (budget 0) leaves no room for drafts */
    if (caps.max_nodes > budget) caps.max_nodes = budget > 0 ? budget : 0;
    if (caps.max_depth <= 0) caps.max_depth = caps.max_nodes;
    if (caps.max_branch <= 0) caps.max_branch = SDN_DEFAULT_BRANCH;
    int greedy = !(p->sampling.temp > 0);

    int32_t *gen = malloc(((size_t)max_new + SDN_INVARIANT_MAX_ROWS + 1) * sizeof(int32_t));
    float *logits = malloc((size_t)SDN_INVARIANT_MAX_ROWS * vocab * sizeof(float));
    int32_t *argmax = malloc((size_t)SDN_INVARIANT_MAX_ROWS * sizeof(int32_t));
    sdn_tree tree = {0};
    sdn_vbatch vb = {0};
    sdn_accept acc = {0};
    sdn_dist dist = {0};
    sdn_preds preds = {0};
    int32_t *cvocab = NULL; /* candidate vocabulary of the prefill predictions */
    int n_cvocab = 0;
    sdn_rng rng;
    sdn_rng_seed(&rng, p->sampling.seed);
    int rc = SDN_OK;
    if (!gen || !logits || !argmax) { rc = sdn_fail(err, SDN_ENOMEM, "out of memory"); goto done; }
    int K = p->prefill_topk > 0 ? p->prefill_topk : 0;
    int reused = (p->reuse_kv && !K && !p->prefill) ? sdn_kv_common_prefix(c, prompt, n_prompt - 1) : 0;
    sdn_kv_truncate(c, reused);
    if (pad_rows > 0 && n_prompt + pad_rows > n_ctx) {
        rc = sdn_fail(err, SDN_EINVAL, "context of %d is too small for the prompt plus the decode graph's %d rows", n_ctx, pad_rows);
        goto done;
    }
    if ((rc = sdn_tree_init(&tree, caps.max_nodes > 0 ? caps.max_nodes : 1, err)) || (rc = sdn_vbatch_init(&vb, SDN_INVARIANT_MAX_ROWS, err)) ||
        (rc = sdn_accept_init(&acc, caps.max_nodes > 0 ? caps.max_nodes : 1, err)))
        goto done;
    s.n_prompt = n_prompt;
    s.n_reused = reused;

    /* Prefill: every prompt token but the last; the last is the root of the first step.
     * With prefill_topk, the same forward passes also produce each row's top-k. */
    if (K > vocab) K = vocab;
    if (K && !p->prefill_topk_full) {
        /* the context's distinct tokens, ascending (the prompt is untrusted: ids checked by the forward pass) */
        uint8_t *seen = calloc((size_t)vocab, 1);
        cvocab = malloc(sizeof(int32_t) * (size_t)n_prompt);
        if (!seen || !cvocab) { free(seen); rc = sdn_fail(err, SDN_ENOMEM, "out of memory"); goto done; }
        for (int i = 0; i < n_prompt; i++)
            if (prompt[i] >= 0 && prompt[i] < vocab) seen[prompt[i]] = 1;
        for (int t = 0; t < vocab; t++)
            if (seen[t]) cvocab[n_cvocab++] = t;
        free(seen);
        if (K > n_cvocab) K = n_cvocab;
    }
    if (K) {
        preds.n_pos = n_prompt - 1;
        preds.k = K;
        preds.tok = malloc(((size_t)n_prompt * K + 1) * sizeof(int32_t));
        preds.prob = malloc(((size_t)n_prompt * K + 1) * sizeof(float));
        if (!preds.tok || !preds.prob) { rc = sdn_fail(err, SDN_ENOMEM, "out of memory (prefill predictions)"); goto done; }
    }
    sdn_fwd_stats fs0, fs1;
    sdn_ctx_stats(c, &fs0);
    double t0 = sdn_now();
    if (p->prefill) { /* called for a one-token prompt too: graph schedulers switch layouts there */
        if ((rc = p->prefill(p->prefill_ud, c, prompt, n_prompt - 1, K, cvocab, n_cvocab, preds.tok, preds.prob, err))) goto done;
        if (sdn_kv_len(c) != n_prompt - 1) { rc = sdn_fail(err, SDN_ESTATE, "prefill hook left %d KV entries, expected %d", sdn_kv_len(c), n_prompt - 1); goto done; }
    } else
        for (int i = reused; i < n_prompt - 1; i += chunk) {
            int n = n_prompt - 1 - i < chunk ? n_prompt - 1 - i : chunk;
            sdn_batch b = {.n = n, .tokens = prompt + i, .n_logits = K ? -1 : 0, .topk = K,
                           .topk_tok = K ? preds.tok + (size_t)i * K : NULL, .topk_prob = K ? preds.prob + (size_t)i * K : NULL,
                           .topk_vocab = cvocab, .n_topk_vocab = n_cvocab};
            if ((rc = sdn_forward(c, &b, NULL, err))) goto done;
        }
    s.t_prefill = sdn_now() - t0;
    sdn_ctx_stats(c, &fs1);
    s.t_preds = fs1.topk_s - fs0.topk_s;
    if (p->drafter) {
        double td = sdn_now();
        sdn_prefill_preds view = {preds.n_pos, preds.k, preds.tok, preds.prob};
        if ((rc = sdn_drafter_begin(p->drafter, prompt, n_prompt, K ? &view : NULL, err))) goto done;
        s.t_draft += sdn_now() - td;
    }

    double tdec = sdn_now();
    int32_t root = prompt[n_prompt - 1];
    int n_gen = 0, stop = 0;
    while (n_gen < max_new && !stop) {
        /* draft */
        double ta = sdn_now();
        sdn_tree_clear(&tree);
        sdn_draft_caps sc = caps;
        int room = max_new - n_gen - 1; /* tokens beyond the bonus still allowed */
        int kv_room = n_ctx - sdn_kv_len(c) - (pad_rows > 0 ? pad_rows : 1);
        if (adaptive) {
            int d = sdn_draft_budget(p->verify_ms, sc.max_nodes, sdn_accept_estimate(s.accepted, budget_miss));
            if (d == 0 && s.steps % 8 == 7) d = 1; /* keep observing acceptance now and then */
            sc.max_nodes = d;
            if (sc.max_depth > d) sc.max_depth = d;
        }
        if (sc.max_nodes > room) sc.max_nodes = room;
        if (sc.max_nodes > kv_room) sc.max_nodes = kv_room;
        if (p->drafter && sc.max_nodes > 0 && (rc = sdn_drafter_propose(p->drafter, &tree, &sc, err))) goto done;
        double tb = sdn_now();
        s.t_draft += tb - ta;
        /* verify */
        int n_past = sdn_kv_len(c);
        if ((rc = sdn_vbatch_build(&vb, &tree, root, n_past, err))) goto done;
        int n_real = vb.n;
        if (pad_rows > n_real && (rc = sdn_vbatch_pad(&vb, pad_rows, err))) goto done;
        sdn_batch b = {.n = vb.n, .tokens = vb.tokens, .pos = vb.pos, .mask = vb.n > 1 ? vb.mask : NULL, .logit_rows = vb.rows,
                       .n_logits = n_real, .invariant = 1};
        if ((rc = sdn_forward(c, &b, logits, err))) goto done;
        if (greedy) sdn_verify_greedy(&tree, logits, vocab, &acc, argmax);
        else if ((rc = sdn_verify_sample(&tree, logits, vocab, &p->sampling, &rng, &dist, &acc, err))) goto done;
        if ((rc = sdn_kv_keep(c, n_past, acc.keep, acc.n_acc + 1, err))) goto done;
        s.steps++;
        s.drafted += tree.n;
        s.accepted += acc.n_acc;
        if (acc.n_acc < tree.n) budget_miss++;
        s.accept_hist[acc.n_acc < SDN_ACCEPT_HIST ? acc.n_acc : SDN_ACCEPT_HIST - 1]++;
        double tc = sdn_now();
        s.t_verify += tc - tb;
        if (s.steps == 1) s.t_first_token = tc - t0;
        /* commit */
        int n_new = acc.n_acc + 1, first_new = n_gen;
        for (int i = 0; i < n_new && n_gen < max_new; i++) {
            int32_t tk = acc.tokens[i];
            if (!p->ignore_eog && eog && eog(ud_eog, tk)) { stop = 1; break; }
            gen[n_gen++] = tk;
        }
        if (cb && n_gen > first_new && cb(ud, gen + first_new, n_gen - first_new)) stop = 1;
        root = acc.tokens[acc.n_acc];
        if (p->drafter && !stop && n_gen < max_new) {
            double tf = sdn_now();
            sdn_draft_feedback fb = {.accepted = acc.tokens, .n_accepted = n_new, .tree = &tree,
                                     .node_argmax = greedy ? argmax + 1 : NULL, .root_argmax = greedy ? argmax[0] : -1};
            if ((rc = sdn_drafter_feedback(p->drafter, &fb, err))) goto done;
            s.t_draft += sdn_now() - tf;
        }
    }
    s.t_decode = sdn_now() - tdec;
    s.n_gen = n_gen;
    if (out) { *out = gen; gen = NULL; }
    if (n_out) *n_out = n_gen;
    if (p->preds_out) { *p->preds_out = preds; memset(&preds, 0, sizeof preds); }
done:
    s.peak_rss = sdn_peak_rss();
    if (st) *st = s;
    free(gen);
    free(logits);
    free(argmax);
    sdn_tree_free(&tree);
    sdn_vbatch_free(&vb);
    sdn_accept_free(&acc);
    sdn_dist_free(&dist);
    sdn_preds_free(&preds);
    free(cvocab);
    return rc;
}

int sdn_draft_budget(const double *verify_ms, int dmax, double a) {
    int best = 0;
    double e = 1, pw = 1, best_rate = verify_ms[0] > 0 ? 1 / verify_ms[0] : 0;
    for (int d = 1; d <= dmax && d < SDN_INVARIANT_MAX_ROWS; d++) {
        pw *= a;
        e += pw;
        const double rate = verify_ms[d] > 0 ? e / verify_ms[d] : 0;
        if (rate > best_rate) best_rate = rate, best = d;
    }
    return best;
}

double sdn_accept_estimate(long accepted, long misses) {
    const double a = (accepted + 2.0) / (accepted + misses + 4.0);
    return a < 0.98 ? a : 0.98;
}
