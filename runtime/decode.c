/* decode.c - one generation on a context: prefill, then the speculative decode loop, each
 * step one named function (see decode.h):
 *
 *   prefill()        prompt tokens but the last into the KV cache (+ top-k predictions)
 *   loop:
 *     step_draft()    the drafter's token tree, sized by the budget (+ forced text, pruned
 *                     by the grammar when the request has one)
 *     step_verify()   one forward of root + tree, greedy or stochastic acceptance (of the
 *                     tokens the grammar allows at each row)
 *     step_compact()  KV cache compacted to the accepted path
 *     step_commit()   accepted tokens appended, end of generation, streaming callback
 *     step_feedback() the drafter told what the model accepted and predicted
 *
 * Plain decoding is the same loop with no drafter (an empty tree). */
#include "runtime/decode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sdn_util.h"
#include "draft/recycle.h"
#include "draft/sizing.h"
#include "kernels/reduce.h"
#include "modelfile/model.h"
#include "runtime/prefill.h"
#include "runtime/verify_cost.h"
#include "verify/verify.h"

void sdn_preds_free(sdn_preds *p) {
    if (!p) return;
    free(p->tok);
    free(p->prob);
    memset(p, 0, sizeof *p);
}

void sdn_gen_result_free(sdn_gen_result *r) {
    if (!r) return;
    free(r->tokens);
    r->tokens = NULL;
    r->n_tokens = 0;
}

double sdn_gen_mean_accepted(const sdn_gen_stats *s) { return s->steps ? (double)s->n_gen / s->steps : 0.0; }

#define SCORE_PROPOSE 32 /* score_budget: nodes the drafter proposes before the cut */

/* Everything one generation holds between steps. */
typedef struct decode {
    sdn_ctx *c;
    const sdn_gen_params *p;
    const int32_t *prompt;
    int n_prompt, vocab, n_ctx, max_new, pad_rows, greedy, adaptive;
    sdn_draft_caps caps;        /* per-request caps after defaults and the decode shape */
    long budget_miss;           /* steps whose draft was not wholly accepted (budget estimate) */
    int32_t *gen;               /* committed output */
    int n_gen;
    int32_t root;               /* newest committed token: the root of the next step */
    int stop;                   /* SDN_GEN_* once generation ends early */
    uint8_t empty[SDN_INVARIANT_MAX_ROWS]; /* constrained: rows whose grammar state allows no token */
    float *logits;
    int32_t *argmax;
    int32_t *rtopk;  /* [SDN_INVARIANT_MAX_ROWS * row_topk] every verified row's top-k (row_topk) */
    sdn_tree tree;
    sdn_vbatch vb;
    sdn_accept acc;
    sdn_dist dist;
    sdn_rng rng;
    sdn_preds preds;
    uint8_t *seen;   /* repetition penalty scratch (vocab bytes) */
    int32_t *window; /* repetition penalty: the last tokens before a row's prediction */
    int32_t *cvocab; /* candidate vocabulary of the prefill predictions */
    double vms[SDN_INVARIANT_MAX_ROWS]; /* the verify cost curve at the current KV length */
    sdn_draft_calib dcal; /* score_budget: this request's calibration of the drafter's scores */
    sdn_draft_calib *cal; /* the one used: p->calib (greedy) or dcal */
    const double *curve_ms; /* adaptive: the step's cost curve (verify_ms, or vms at its KV length) */
    const double *score_ms; /* score_budget: that curve, corrected by cost_fix for greedy requests */
    double fixed_ms[SDN_INVARIANT_MAX_ROWS]; /* score_budget, greedy, cost_fix: that curve corrected */
    int n_cvocab;
    /* constraint (p->grammar): the committed answer's state, and per batch row the state the
     * row's prediction is constrained by (row 0: gs; row i + 1: gs + the path to node i) */
    sdn_gstate *gs;
    sdn_gstate *rs[SDN_INVARIANT_MAX_ROWS];
    sdn_gstate *gscratch; /* scratch state of exit_text */
    /* the ways out drafted this step (exit_text): below node `leaf` (-1: the root), first
     * tokens a0 and b0 (the split form, -1: none) */
    struct { int leaf; int32_t a0, b0; } exits[8];
    int n_exits;
    int exit_miss;        /* steps in a row whose drafted ways out were all wrong (none committed) */
    /* split probes of this step (memo): below node `leaf` (-1: the root) both forms of forced
     * text were drafted, merged first token a0 and split first token b0 */
    struct { int leaf; int32_t a0, b0; } probe[8];
    int n_probe;
    uint8_t drafted[SDN_INVARIANT_MAX_ROWS]; /* tree node i came from the drafter (not forced text) */
    sdn_gen_stats s;
} decode;

static void decode_free(decode *d) {
    free(d->gen);
    free(d->logits);
    free(d->argmax);
    free(d->rtopk);
    sdn_tree_free(&d->tree);
    sdn_vbatch_free(&d->vb);
    sdn_accept_free(&d->acc);
    sdn_dist_free(&d->dist);
    sdn_preds_free(&d->preds);
    free(d->cvocab);
    free(d->seen);
    free(d->window);
    sdn_gstate_free(d->gs);
    sdn_gstate_free(d->gscratch);
    for (int i = 0; i < SDN_INVARIANT_MAX_ROWS; i++) sdn_gstate_free(d->rs[i]);
}

/* Limits, draft caps and buffers of one request. */
static int setup(decode *d, sdn_err *err) {
    const sdn_gen_params *p = d->p;
    d->vocab = sdn_model_cfg(sdn_ctx_model(d->c))->vocab;
    d->n_ctx = sdn_ctx_n_ctx(d->c);
    if (d->n_prompt < 1) return sdn_fail(err, SDN_EINVAL, "empty prompt");
    if (d->n_prompt >= d->n_ctx)
        return sdn_fail(err, SDN_EINVAL, "prompt of %d tokens does not fit the context of %d (raise --ctx)", d->n_prompt, d->n_ctx);
    d->max_new = p->max_tokens;
    if (d->max_new > d->n_ctx - d->n_prompt) d->max_new = d->n_ctx - d->n_prompt;
    d->caps = p->caps;
    int budget = SDN_INVARIANT_MAX_ROWS - 1;
    if (p->decode_rows > 0) {
        d->pad_rows = p->decode_rows < SDN_INVARIANT_MAX_ROWS ? p->decode_rows : SDN_INVARIANT_MAX_ROWS;
        budget = d->pad_rows - 1;
    }
    /* the budget follows the cost curve when the caller gave one and no fixed size */
    d->adaptive = (p->verify_ms || p->vcurve) && p->drafter && d->caps.max_nodes <= 0;
    sdn_draft_caps *caps = &d->caps;
    if (caps->max_nodes <= 0) caps->max_nodes = d->adaptive ? SDN_INVARIANT_MAX_ROWS - 1 : SDN_DEFAULT_DRAFT_TOKENS;
    /* a one-row decode graph (budget 0) leaves no room for drafts */
    if (caps->max_nodes > budget) caps->max_nodes = budget > 0 ? budget : 0;
    if (caps->max_depth <= 0) caps->max_depth = caps->max_nodes;
    if (caps->max_branch <= 0) caps->max_branch = SDN_DEFAULT_BRANCH;
    d->greedy = !(p->sampling.temp > 0);
    d->cal = d->greedy && p->calib ? p->calib : &d->dcal;
    sdn_rng_seed(&d->rng, p->sampling.seed);
    d->gen = malloc(((size_t)d->max_new + SDN_INVARIANT_MAX_ROWS + 1) * sizeof(int32_t));
    d->logits = malloc((size_t)SDN_INVARIANT_MAX_ROWS * d->vocab * sizeof(float));
    d->argmax = malloc((size_t)SDN_INVARIANT_MAX_ROWS * sizeof(int32_t));
    if (!d->gen || !d->logits || !d->argmax) return sdn_fail(err, SDN_ENOMEM, "out of memory");
    if (p->row_topk < 0 || p->row_topk > SDN_RECYCLE_MAX_K)
        return sdn_fail(err, SDN_EINVAL, "row_topk %d is not in [0, %d]", p->row_topk, SDN_RECYCLE_MAX_K);
    if (p->out_topk < 0 || p->out_topk > SDN_RECYCLE_MAX_K || (p->out_topk > 0 && !p->out_topk_tok))
        return sdn_fail(err, SDN_EINVAL, "out_topk %d is not in [0, %d] or has no buffer", p->out_topk, SDN_RECYCLE_MAX_K);
    if (p->out_topk > 0 && (p->sampling.temp > 0 || p->grammar))
        return sdn_fail(err, SDN_EINVAL, "out_topk records greedy, unconstrained generations only");
    if (p->row_topk > 0 && p->drafter && !(d->rtopk = malloc((size_t)SDN_INVARIANT_MAX_ROWS * (size_t)p->row_topk * sizeof(int32_t))))
        return sdn_fail(err, SDN_ENOMEM, "out of memory");
    if (p->sampling.repeat_penalty > 0 && p->sampling.repeat_penalty != 1) {
        int L = p->sampling.repeat_last_n > 0 ? p->sampling.repeat_last_n : 64;
        d->seen = calloc((size_t)d->vocab, 1);
        d->window = malloc(sizeof(int32_t) * (size_t)L);
        if (!d->seen || !d->window) return sdn_fail(err, SDN_ENOMEM, "out of memory");
    }
    int nodes = caps->max_nodes > 0 ? caps->max_nodes : 1;
    int rc;
    if (p->grammar) {
        if (!p->gvocab || sdn_gvocab_n(p->gvocab) != d->vocab)
            return sdn_fail(err, SDN_EINVAL, "a grammar needs the model's vocabulary (%d tokens)", d->vocab);
        if (p->forced_draft && !p->tok) return sdn_fail(err, SDN_EINVAL, "forced-text drafting needs the model's tokenizer");
        if ((rc = sdn_gstate_new(p->grammar, &d->gs, err))) return rc;
        sdn_gstate_set_skip_leading_space(d->gs, p->grammar_skip_space);
        for (int i = 0; i < SDN_INVARIANT_MAX_ROWS; i++)
            if ((rc = sdn_gstate_new(p->grammar, &d->rs[i], err))) return rc;
        if ((rc = sdn_gstate_new(p->grammar, &d->gscratch, err))) return rc;
    }
    if ((rc = sdn_tree_init(&d->tree, nodes, err)) || (rc = sdn_vbatch_init(&d->vb, SDN_INVARIANT_MAX_ROWS, err)) ||
        (rc = sdn_accept_init(&d->acc, nodes, err)))
        return rc;
    return SDN_OK;
}

/* The context's distinct tokens, ascending: the vocabulary in-context predictions are taken
 * over (the prompt is untrusted: ids are checked by the forward pass). */
static int context_vocab(decode *d, sdn_err *err) {
    uint8_t *seen = calloc((size_t)d->vocab, 1);
    d->cvocab = malloc(sizeof(int32_t) * (size_t)d->n_prompt);
    if (!seen || !d->cvocab) { free(seen); return sdn_fail(err, SDN_ENOMEM, "out of memory"); }
    for (int i = 0; i < d->n_prompt; i++)
        if (d->prompt[i] >= 0 && d->prompt[i] < d->vocab) seen[d->prompt[i]] = 1;
    for (int t = 0; t < d->vocab; t++)
        if (seen[t]) d->cvocab[d->n_cvocab++] = t;
    free(seen);
    return SDN_OK;
}

/* Prefill: every prompt token but the last (the last is the root of the first step), after
 * the KV entries kept from the previous request (reuse_kv). With prefill_topk, the same
 * forward passes also produce each row's top-k predictions. Then the drafter begins. */
static int prefill(decode *d, double t0, sdn_err *err) {
    const sdn_gen_params *p = d->p;
    int K = p->prefill_topk > 0 ? p->prefill_topk : 0, rc;
    if (K > d->vocab) K = d->vocab;
    if (K && !p->prefill_topk_full) {
        if ((rc = context_vocab(d, err))) return rc;
        if (K > d->n_cvocab) K = d->n_cvocab;
    }
    int reused = (p->reuse_kv && !p->prefill) ? sdn_kv_common_prefix(d->c, d->prompt, d->n_prompt - 1) : 0;
    if (K) { /* reused positions need predictions: the previous request's, where it has them */
        const sdn_preds *rp = p->reuse_preds;
        if (!rp || rp->k != K || !rp->tok || !rp->prob) reused = 0;
        else if (reused > rp->n_pos) reused = rp->n_pos;
    }
    sdn_kv_truncate(d->c, reused);
    if (d->pad_rows > 0 && d->n_prompt + d->pad_rows > d->n_ctx)
        return sdn_fail(err, SDN_EINVAL, "context of %d is too small for the prompt plus the decode graph's %d rows", d->n_ctx, d->pad_rows);
    d->s.n_prompt = d->n_prompt;
    d->s.n_reused = reused;
    if (K) {
        d->preds.n_pos = d->n_prompt - 1;
        d->preds.k = K;
        d->preds.tok = malloc(((size_t)d->n_prompt * K + 1) * sizeof(int32_t));
        d->preds.prob = malloc(((size_t)d->n_prompt * K + 1) * sizeof(float));
        if (!d->preds.tok || !d->preds.prob) return sdn_fail(err, SDN_ENOMEM, "out of memory (prefill predictions)");
        if (reused) {
            memcpy(d->preds.tok, p->reuse_preds->tok, sizeof(int32_t) * (size_t)reused * K);
            memcpy(d->preds.prob, p->reuse_preds->prob, sizeof(float) * (size_t)reused * K);
        }
    }
    sdn_fwd_stats fs0, fs1;
    sdn_ctx_stats(d->c, &fs0);
    if (p->prefill) { /* called for a one-token prompt too: graph schedulers switch layouts there */
        if ((rc = p->prefill(p->prefill_ud, d->c, d->prompt, d->n_prompt - 1, K, d->cvocab, d->n_cvocab, d->preds.tok, d->preds.prob, err)))
            return rc;
        if (sdn_kv_len(d->c) != d->n_prompt - 1)
            return sdn_fail(err, SDN_ESTATE, "prefill hook left %d KV entries, expected %d", sdn_kv_len(d->c), d->n_prompt - 1);
    } else {
        int chunk = p->prefill_chunk > 0 ? p->prefill_chunk : sdn_ctx_max_batch(d->c);
        if (chunk > sdn_ctx_max_batch(d->c)) chunk = sdn_ctx_max_batch(d->c);
        sdn_prefill_job j = {.c = d->c, .tokens = d->prompt, .n = d->n_prompt - 1, .from = reused, .chunk = chunk, .topk = K,
                             .vocab = d->cvocab, .n_vocab = d->n_cvocab, .tok = d->preds.tok, .prob = d->preds.prob, .pc = p->pcache,
                             .on_progress = p->on_progress, .progress_ud = p->progress_ud};
        rc = sdn_prefill(&j, err);
        d->s.n_cached_mem = j.n_mem;
        d->s.n_cached_disk = j.n_disk;
        d->s.t_saved = j.saved_s;
        if (rc) return rc;
    }
    if (p->prefill && p->on_progress) p->on_progress(p->progress_ud, d->n_prompt - 1, d->n_prompt - 1);
    d->s.t_prefill = sdn_now() - t0;
    sdn_ctx_stats(d->c, &fs1);
    d->s.t_preds = fs1.topk_s - fs0.topk_s;
    d->root = d->prompt[d->n_prompt - 1];
    if (p->drafter) {
        double td = sdn_now();
        sdn_prefill_preds view = {d->preds.n_pos, d->preds.k, d->preds.tok, d->preds.prob};
        if ((rc = sdn_drafter_begin(p->drafter, d->prompt, d->n_prompt, K ? &view : NULL, err))) return rc;
        d->s.t_begin = sdn_now() - td;
        d->s.t_draft += d->s.t_begin;
    }
    return SDN_OK;
}

/* Forced text (constrained requests): the bytes the grammar forces after the committed
 * answer, tokenized as the model's tokenizer would write them on their own; at most `lim`
 * tokens. Verification judges them like any draft, so a tokenization the model would not
 * produce only costs rows. Returns the count, or -1 when out of memory. */
static int tokenize_forced(decode *d, const char *buf, size_t n, int32_t *out, int lim) {
    if (!n || lim <= 0) return 0;
    int32_t *ids = NULL;
    int n_ids = 0;
    sdn_err e;
    sdn_err_clear(&e);
    if (sdn_tokenize(d->p->tok, buf, n, 0, 0, &ids, &n_ids, &e)) { free(ids); return e.code == SDN_ENOMEM ? -1 : 0; }
    /* a last token of only white space (`"id": ` ends in one) stays: a model that writes the
       space joined to the next word rejects it at the cost of one row, one that writes it on
       its own (SmolLM2 before a digit) gets the next word as the step's bonus token */
    if (n_ids > lim) n_ids = lim;
    if (n_ids > SDN_INVARIANT_MAX_ROWS - 1) n_ids = SDN_INVARIANT_MAX_ROWS - 1;
    memcpy(out, ids, sizeof(int32_t) * (size_t)n_ids);
    free(ids);
    return n_ids;
}

/* At a branch point of the grammar (no forced text), the way out of the current element: of
 * the punctuation and white-space bytes the grammar allows next, the one after which it forces
 * the longest text (the `,` that ends a number and opens the next key, the `"` that closes a
 * string and its `}`). That byte and its forced text go to buf (at most cap bytes), drafted
 * as a chain beside the drafter's guess; verification judges it like any draft (a wrong
 * guess costs its rows, never the output). From state src. Returns the count (0: no way
 * out that forces text), -1 out of memory. */
static long exit_text(decode *d, const sdn_gstate *src, char *out, size_t cap) {
    char buf[512];
    size_t best = 0;
    sdn_gstate *s = d->gscratch;
    for (int b = 0x09; b < 0x7f; b++) {
        if ((b >= '0' && b <= '9') || (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') || (b > 0x0d && b < 0x20)) continue;
        if (sdn_gstate_copy(s, src)) return -1;
        unsigned char c = (unsigned char)b;
        if (sdn_gstate_accept_bytes(s, &c, 1) != 1) continue;
        size_t n = sdn_gstate_forced(s, buf + 1, sizeof buf - 1);
        if (n > 0 && n + 1 > best && n + 1 <= cap) {
            buf[0] = (char)c;
            best = n + 1;
            memcpy(out, buf, best);
        }
    }
    return (long)best;
}

/* Bytes of the UTF-8 character starting at s (1 for a stray continuation byte). */
static size_t utf8_char_len(unsigned char c) { return c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1; }

/* Text of n bytes whose tokenization starts with token first, tokenized instead with its first
 * character as a token of its own (chain b of forced_chains), at most lim tokens; 0 when
 * first is that character already or the character has no token of its own, -1 out of
 * memory. */
static int tokenize_split(decode *d, const char *text, size_t n, int32_t first, int32_t *out, int lim) {
    size_t c1 = utf8_char_len((unsigned char)text[0]);
    char tb[64];
    if (c1 >= n || lim < 2 || sdn_tokenizer_token_bytes(d->p->tok, first, tb, sizeof tb) <= c1) return 0;
    int k = tokenize_forced(d, text, c1, out, 1);
    if (k != 1) return k < 0 ? -1 : 0;
    int m = tokenize_forced(d, text + c1, n - c1, out + 1, lim - 1);
    return m < 0 ? -1 : 1 + m;
}

/* A way out drafted below node `leaf` (-1: the root) with first tokens a0 and b0 (-1: none). */
static void note_exit(decode *d, int leaf, int32_t a0, int32_t b0) {
    if (d->n_exits >= (int)(sizeof d->exits / sizeof d->exits[0])) return;
    d->exits[d->n_exits].leaf = leaf, d->exits[d->n_exits].a0 = a0, d->exits[d->n_exits].b0 = b0;
    d->n_exits++;
}

/* The token committed right after node `leaf` (-1: the root) this step, or -1 when the
 * accepted path does not reach that node. */
static int32_t committed_after(const decode *d, int leaf) {
    if (leaf < 0) return d->acc.tokens[0];
    for (int j = 0; j < d->acc.n_acc; j++)
        if (d->acc.nodes[j] == leaf) return d->acc.tokens[j + 1];
    return -1;
}

/* The memo's entry of the forms (a0 merged, b0 split), or NULL (create: the least used entry
 * gives way when all are taken). */
static sdn_draft_memo_entry *memo_entry(sdn_draft_memo *m, int32_t a0, int32_t b0, int create) {
    int low = 0;
    for (int i = 0; i < m->n; i++) {
        if (m->e[i].merged == a0 && m->e[i].split == b0) return &m->e[i];
        if (m->e[i].n_merged + m->e[i].n_split < m->e[low].n_merged + m->e[low].n_split) low = i;
    }
    if (!create) return NULL;
    int i = m->n < SDN_DRAFT_MEMO_ENTRIES ? m->n++ : low;
    m->e[i].merged = a0, m->e[i].split = b0, m->e[i].n_merged = m->e[i].n_split = 0;
    return &m->e[i];
}

/* Both forms of forced text below node `leaf` (chain a as the tokenizer writes it, chain b with
 * its first character alone): the form the model clearly did not write before (twice at
 * least, three times as often as the other) is cut to its first token, and the step notes
 * which one the model takes (step_commit). */
static void split_forms(decode *d, int leaf, const int32_t *a, int *na, const int32_t *b, int *nb) {
    if (*na <= 0 || *nb <= 0) return;
    sdn_draft_memo *m = d->p->memo;
    if (m) {
        const sdn_draft_memo_entry *e = memo_entry(m, a[0], b[0], 0);
        if (e && e->n_split >= 2 && e->n_split >= 3 * e->n_merged && *na > 1) *na = 1;
        else if (e && e->n_merged >= 2 && e->n_merged >= 3 * e->n_split && *nb > 1) *nb = 1;
    }
    if (d->n_probe < (int)(sizeof d->probe / sizeof d->probe[0])) {
        d->probe[d->n_probe].leaf = leaf, d->probe[d->n_probe].a0 = a[0], d->probe[d->n_probe].b0 = b[0];
        d->n_probe++;
    }
}

/* After acceptance: which form the model wrote below each probe's node, into the memo. */
static void memo_learn(decode *d) {
    sdn_draft_memo *m = d->p->memo;
    for (int i = 0; m && i < d->n_probe; i++) {
        const int32_t next = committed_after(d, d->probe[i].leaf);
        if (next < 0 || (next != d->probe[i].a0 && next != d->probe[i].b0)) continue;
        sdn_draft_memo_entry *e = memo_entry(m, d->probe[i].a0, d->probe[i].b0, 1);
        if (e->n_merged + e->n_split >= 1000) e->n_merged /= 2, e->n_split /= 2; /* keeps adapting */
        if (next == d->probe[i].a0) e->n_merged++;
        else e->n_split++;
    }
    d->n_probe = 0;
}

/* The step's forced chains (constrained requests with forced-text drafting): the forced text
 * after the committed answer, or at a branch point the way out (exit_text); tokenized as the
 * tokenizer writes it (chain a), and, at the answer's start and for the way out, also with
 * its first character as a token of its own (chain b: models often write `{` `"` and `"` `}`
 * where the tokenizer merges `{"` and `"}`). Chains of at most
 * lim tokens; *na, *nb their lengths. Returns 0, or -1 when out of memory. */
static int forced_chains(decode *d, int lim, int32_t *a, int *na_out, int32_t *b, int *nb_out) {
    *na_out = *nb_out = 0;
    char text[512];
    size_t n = sdn_gstate_forced(d->gs, text, sizeof text);
    int is_exit = 0;
    if (n > 0) d->exit_miss = 0; /* a new element: guess its way out again */
    else if (d->p->exit_draft && d->exit_miss < 2) { /* not after two wrong guesses in a row (a long free string) */
        long k = exit_text(d, d->gs, text, sizeof text);
        if (k < 0) return -1;
        n = (size_t)k;
        is_exit = 1;
    }
    int na = tokenize_forced(d, text, n, a, lim), nb = 0;
    if (na < 0) return -1;
    if (na == 0) return 0;
    if (d->n_gen == 0 || is_exit) {
        if ((nb = tokenize_split(d, text, n, a[0], b, lim)) < 0) return -1;
        split_forms(d, -1, a, &na, b, &nb);
    }
    if (is_exit) note_exit(d, -1, a[0], nb > 0 ? b[0] : -1);
    *na_out = na;
    *nb_out = nb;
    return 0;
}

/* Constrained requests: give every batch row its grammar state (row 0: the committed
 * answer's; node i's row: its parent's row advanced over node i's token) and drop the draft
 * nodes the grammar rules out, with their subtrees, before they cost a row. The tree stays
 * topological (kept nodes keep their order). */
static int constrain_tree(decode *d, sdn_err *err) {
    sdn_tree *t = &d->tree;
    if (sdn_gstate_copy(d->rs[0], d->gs)) return sdn_fail(err, SDN_ENOMEM, "out of memory (grammar state)");
    int32_t map[SDN_INVARIANT_MAX_ROWS];
    int n = 0;
    for (int i = 0; i < t->n; i++) {
        map[i] = -1;
        int par = t->parent[i];
        if (par >= 0 && map[par] < 0) continue; /* below a dropped node */
        sdn_gstate *dst = d->rs[n + 1];
        if (sdn_gstate_copy(dst, d->rs[par < 0 ? 0 : map[par] + 1])) return sdn_fail(err, SDN_ENOMEM, "out of memory (grammar state)");
        int ok = sdn_gstate_accept_token(dst, d->p->gvocab, t->token[i]);
        if (ok < 0) return sdn_fail(err, SDN_ENOMEM, "out of memory (grammar state)");
        if (!ok) continue;
        map[i] = n;
        t->token[n] = t->token[i];
        t->parent[n] = par < 0 ? -1 : map[par];
        t->depth[n] = t->depth[i];
        t->score[n] = t->score[i];
        t->source[n] = t->source[i];
        d->drafted[n] = d->drafted[i];
        n++;
    }
    t->n = n;
    return SDN_OK;
}

/* The sources of the nodes of chain tokens[0..n) below `parent` (after sdn_tree_add_chain):
 * src[k] (src NULL: `one` for all); a node already in the tree keeps its source unless
 * `override` (forced text is shown as forced even where a drafter proposed it too). */
static void chain_source(sdn_tree *t, int parent, const int32_t *tokens, int n, const uint8_t *src, uint8_t one, int override) {
    for (int k = 0; k < n; k++) {
        if ((parent = sdn_tree_find_child(t, parent, tokens[k])) < 0) return;
        if (override || t->source[parent] == SDN_SRC_NONE) t->source[parent] = src ? src[k] : one;
    }
}

/* After constrain_tree, constrained requests draft on below the tree's deepest leaf (its main
 * line) as far as the grammar and the drafter reach, SGLang's jump-forward with retrieval for
 * the free parts: where the grammar forces text, that text (`", "input_text": "` after the
 * enum value); where it branches right after forced text, the drafter's continuation of the
 * whole line (continue_after: `N/A` from the context after `"input_text": "`); where it
 * branches after free text, the way out of the element (exit_text: `"}` after `N/A`) with
 * both forms of its first token. Each addition is pruned by constrain_tree; the tree stays
 * within lim nodes, a drafter continuation within dlim tokens. Returns SDN_OK or an error. */
static int extend_spine(decode *d, int lim, int dlim, sdn_err *err) {
    sdn_tree *t = &d->tree;
    for (int round = 0; round < 8 && t->n < lim; round++) {
        int leaf = -1;
        for (int i = 0; i < t->n; i++)
            if (leaf < 0 || t->depth[i] > t->depth[leaf]) leaf = i;
        if (leaf < 0) return SDN_OK; /* no line: forced_chains found nothing at the root */
        const sdn_gstate *st = d->rs[leaf + 1];
        if (sdn_gstate_ended(st)) return SDN_OK;
        char text[512];
        int32_t ch[SDN_INVARIANT_MAX_ROWS], sp[SDN_INVARIANT_MAX_ROWS];
        uint8_t chs[SDN_INVARIANT_MAX_ROWS];
        int m = 0, ms = 0, from_drafter = 0;
        size_t n = sdn_gstate_forced(st, text, sizeof text);
        if (n > 0) {
            m = tokenize_forced(d, text, n, ch, lim - t->n);
        } else if (!d->drafted[leaf]) { /* the element starts here: the drafter's guess */
            int32_t path[SDN_INVARIANT_MAX_ROWS];
            int np = 0;
            for (int v = leaf; v >= 0; v = t->parent[v]) np++;
            for (int v = leaf, k = np - 1; v >= 0; v = t->parent[v], k--) path[k] = t->token[v];
            int cap = dlim < lim - t->n ? dlim : lim - t->n;
            m = sdn_drafter_continue_after_src(d->p->drafter, path, np, ch, chs, cap);
            from_drafter = 1;
        } else if (d->p->exit_draft && d->exit_miss < 2) { /* after free text: the way out (as at the root) */
            long k = exit_text(d, st, text, sizeof text);
            if (k < 0) return sdn_fail(err, SDN_ENOMEM, "out of memory (grammar state)");
            n = (size_t)k;
            m = tokenize_forced(d, text, n, ch, lim - t->n);
            if (m > 0 && (ms = tokenize_split(d, text, n, ch[0], sp, lim - t->n - m)) >= 0) split_forms(d, leaf, ch, &m, sp, &ms);
            if (m > 0 && ms >= 0) note_exit(d, leaf, ch[0], ms > 0 ? sp[0] : -1);
        }
        if (m < 0 || ms < 0) return sdn_fail(err, SDN_ENOMEM, "out of memory (forced text)");
        if (m == 0) return SDN_OK;
        int before = t->n;
        sdn_tree_add_chain(t, leaf, ch, m, 1.0f, d->caps.max_depth);
        if (ms > 0) sdn_tree_add_chain(t, leaf, sp, ms, 1.0f, d->caps.max_depth);
        if (t->n == before) return SDN_OK;
        chain_source(t, leaf, ch, m, from_drafter ? chs : NULL, SDN_SRC_GRAMMAR, !from_drafter);
        if (ms > 0) chain_source(t, leaf, sp, ms, NULL, SDN_SRC_GRAMMAR, 1);
        for (int i = before; i < t->n; i++) d->drafted[i] = (uint8_t)from_drafter;
        if (!from_drafter) d->s.forced_drafted += t->n - before;
        int rc = constrain_tree(d, err);
        if (rc) return rc;
        if (t->n == before) return SDN_OK; /* the grammar refused all of it */
    }
    return SDN_OK;
}

/* Draft: the step's budget (fixed caps, or from the verify cost curve and the acceptance
 * seen so far), bounded by the tokens still allowed and the KV room, then the drafter's tree. */
static int step_draft_tree(decode *d, sdn_err *err) {
    sdn_tree_clear(&d->tree);
    sdn_draft_caps sc = d->caps;
    int room = d->max_new - d->n_gen - 1; /* tokens beyond the bonus still allowed */
    int kv_room = d->n_ctx - sdn_kv_len(d->c) - (d->pad_rows > 0 ? d->pad_rows : 1);
    if (d->adaptive) {
        const double *ms = d->p->verify_ms;
        if (d->p->vcurve) { /* the step's cost at this KV length */
            sdn_vcurve_at(d->p->vcurve, sdn_kv_len(d->c), d->vms);
            ms = d->vms;
        }
        if (d->p->score_budget) { /* the drafter's best 32 at most, cut after it proposed (draft/sizing.h) */
            d->curve_ms = d->score_ms = ms;
            if (d->greedy && d->p->cost_fix) {
                sdn_cost_fix_apply(d->p->cost_fix, ms, SDN_INVARIANT_MAX_ROWS, d->fixed_ms);
                d->score_ms = d->fixed_ms;
            }
            if (sc.max_nodes > SCORE_PROPOSE) sc.max_nodes = SCORE_PROPOSE;
        } else {
            int n = sdn_draft_budget(ms, sc.max_nodes, sdn_accept_estimate(d->s.accepted, d->budget_miss));
            if (n == 0 && d->s.steps % 8 == 7) n = 1; /* keep observing acceptance now and then */
            sc.max_nodes = n;
            if (sc.max_depth > n) sc.max_depth = n;
        }
    }
    if (d->p->drafter && !(d->adaptive && d->p->score_budget))
        d->s.budget_hist[sc.max_nodes < SDN_ACCEPT_HIST ? sc.max_nodes : SDN_ACCEPT_HIST - 1]++;
    const int budget = sc.max_nodes; /* the drafter's share: also the length of its guesses past forced text */
    d->n_probe = d->n_exits = 0;
    if (sc.max_nodes > room) sc.max_nodes = room;
    if (sc.max_nodes > kv_room) sc.max_nodes = kv_room;
    int32_t fa[SDN_INVARIANT_MAX_ROWS], fb[SDN_INVARIANT_MAX_ROWS];
    int na = 0, nb = 0, rc;
    if (d->p->drafter && d->gs && d->p->forced_draft) {
        int lim = d->caps.max_nodes < room ? d->caps.max_nodes : room;
        if (lim > kv_room) lim = kv_room;
        double t = sdn_now();
        rc = forced_chains(d, lim, fa, &na, fb, &nb);
        d->s.t_constrain += sdn_now() - t;
        if (rc < 0) return sdn_fail(err, SDN_ENOMEM, "out of memory (forced text)");
        /* the drafter fills what the forced text leaves of the budget */
        if (sc.max_nodes > d->caps.max_nodes - na - nb) sc.max_nodes = d->caps.max_nodes - na - nb;
        if (sc.max_nodes < 0) sc.max_nodes = 0;
    }
    if (d->p->drafter && sc.max_nodes > 0 && (rc = sdn_drafter_propose(d->p->drafter, &d->tree, &sc, err))) return rc;
    if (d->p->drafter && d->adaptive && d->p->score_budget) { /* the size the evidence chooses */
        int n = sdn_draft_select(d->cal, &d->tree, d->score_ms, sc.max_nodes, d->s.steps % 8 == 7);
        d->s.budget_hist[n < SDN_ACCEPT_HIST ? n : SDN_ACCEPT_HIST - 1]++;
    }
    for (int i = 0; i < d->tree.n; i++) d->drafted[i] = 1;
    if (na > 0) { /* shares the drafter's nodes where they agree */
        int before = d->tree.n;
        sdn_tree_add_chain(&d->tree, -1, fa, na, 1.0f, d->caps.max_depth);
        if (nb > 0) sdn_tree_add_chain(&d->tree, -1, fb, nb, 1.0f, d->caps.max_depth);
        chain_source(&d->tree, -1, fa, na, NULL, SDN_SRC_GRAMMAR, 1);
        if (nb > 0) chain_source(&d->tree, -1, fb, nb, NULL, SDN_SRC_GRAMMAR, 1);
        for (int i = before; i < d->tree.n; i++) d->drafted[i] = 0;
        d->s.forced_drafted += d->tree.n - before;
    }
    if (d->gs) {
        double t = sdn_now();
        rc = constrain_tree(d, err);
        if (!rc && d->p->drafter && d->p->forced_draft)
            rc = extend_spine(d, room < d->caps.max_nodes ? room : d->caps.max_nodes, budget > 1 ? budget : 2, err);
        d->s.t_constrain += sdn_now() - t;
        return rc;
    }
    return SDN_OK;
}

/* The step's draft tree (step_draft_tree) within the KV cache's room: the tree's cap is
 * lowered to the rows the cache can still take for this step. */
static int step_draft(decode *d, sdn_err *err) {
    int cap0 = d->tree.cap, kv_room = d->n_ctx - sdn_kv_len(d->c) - (d->pad_rows > 0 ? d->pad_rows : 1);
    if (kv_room < cap0) d->tree.cap = kv_room > 0 ? kv_room : 0;
    int rc = step_draft_tree(d, err);
    d->tree.cap = cap0;
    return rc;
}

/* Repetition penalty on every verified row: row 0 predicts after the committed sequence
 * (prompt + output), row i + 1 after that sequence plus the path to tree node i, so each row
 * is penalized exactly as plain decoding would penalize it had it committed that path. */
static void penalize_rows(decode *d, int n_rows) {
    const sdn_sampling *s = &d->p->sampling;
    const int L = s->repeat_last_n > 0 ? s->repeat_last_n : 64, committed = d->n_prompt + d->n_gen;
    int32_t path[SDN_INVARIANT_MAX_ROWS];
    for (int r = 0; r < n_rows; r++) {
        int np = 0;
        for (int v = r - 1; v >= 0 && np < SDN_INVARIANT_MAX_ROWS; v = d->tree.parent[v]) path[np++] = d->tree.token[v];
        /* window = the last L tokens of committed ++ reverse(path) */
        int from_path = np < L ? np : L, n = 0;
        for (int j = committed - (L - from_path); j < committed; j++)
            if (j >= 0) d->window[n++] = j < d->n_prompt ? d->prompt[j] : d->gen[j - d->n_prompt];
        for (int k = from_path - 1; k >= 0; k--) d->window[n++] = path[k];
        sdn_repeat_penalty(d->logits + (size_t)r * d->vocab, d->vocab, d->window, n, s->repeat_penalty, d->seen);
    }
}

/* The constraint on the verified rows: greedy, each row's choice is the best token its
 * grammar state allows (checked in logit order, so it is cheap); sampling, each row's
 * disallowed tokens get a -inf logit, so acceptance draws from the allowed tokens'
 * renormalized distribution. A row that allows nothing (after an end-of-generation token,
 * or where the grammar has no way on that the vocabulary can write) is marked empty: it has
 * no children (all pruned) and step_commit ends the answer instead of taking its bonus. */
static void constrain_rows(decode *d, int n_rows) {
    for (int r = 0; r < n_rows; r++) {
        float *row = d->logits + (size_t)r * d->vocab;
        if (d->greedy) {
            /* the row's argmax, which unconstrained verification computes too, is not counted
               as the constraint's time: only checking it, and a search when it is refused */
            double t0 = sdn_now();
            int32_t a = sdn_argmax(row, d->vocab);
            double t1 = sdn_now();
            d->s.t_constrain -= t1 - t0;
            if (!sdn_gstate_allows(d->rs[r], d->p->gvocab, a)) {
                int32_t b = sdn_gstate_argmax(d->rs[r], d->p->gvocab, row);
                d->empty[r] = b < 0;
                if (b >= 0) a = b; /* else the drafter's feedback still wants a token */
            } else {
                d->empty[r] = 0;
            }
            d->argmax[r] = a;
        } else {
            d->empty[r] = sdn_gstate_mask(d->rs[r], d->p->gvocab, row) == 0;
            if (d->empty[r]) row[0] = 0.0f; /* a point mass, never committed */
        }
    }
}

/* Verify: root + tree as one batch (tree attention mask, padded to the decode graph's rows),
 * one forward pass with the batch-invariant kernels, then acceptance of the longest path
 * that matches the model (greedy) or lossless stochastic acceptance. */
static int step_verify(decode *d, sdn_err *err) {
    int rc, n_past = sdn_kv_len(d->c);
    if ((rc = sdn_vbatch_build(&d->vb, &d->tree, d->root, n_past, err))) return rc;
    int n_real = d->vb.n;
    if (d->pad_rows > n_real && (rc = sdn_vbatch_pad(&d->vb, d->pad_rows, err))) return rc;
    sdn_batch b = {.n = d->vb.n, .tokens = d->vb.tokens, .pos = d->vb.pos, .mask = d->vb.n > 1 ? d->vb.mask : NULL,
                   .logit_rows = d->vb.rows, .n_logits = n_real, .invariant = 1};
    if ((rc = sdn_forward(d->c, &b, d->logits, err))) return rc;
    if (d->window) penalize_rows(d, n_real);
    if (d->gs) {
        double t = sdn_now();
        constrain_rows(d, n_real);
        d->s.t_constrain += sdn_now() - t;
    }
    if (d->greedy && d->gs) sdn_verify_greedy_rows(&d->tree, d->argmax, &d->acc);
    else if (d->greedy) sdn_verify_greedy(&d->tree, d->logits, d->vocab, &d->acc, d->argmax);
    else if ((rc = sdn_verify_sample(&d->tree, d->logits, d->vocab, &d->p->sampling, &d->rng, &d->dist, &d->acc, err))) return rc;
    d->s.steps++;
    d->s.drafted += d->tree.n;
    d->s.accepted += d->acc.n_acc;
    if (d->acc.n_acc < d->tree.n) d->budget_miss++;
    if (d->adaptive && d->p->score_budget) sdn_draft_calib_observe(d->cal, &d->tree, d->acc.nodes, d->acc.n_acc, d->drafted);
    d->s.accept_hist[d->acc.n_acc < SDN_ACCEPT_HIST ? d->acc.n_acc : SDN_ACCEPT_HIST - 1]++;
    d->s.draft_hist[d->tree.n < SDN_ACCEPT_HIST ? d->tree.n : SDN_ACCEPT_HIST - 1]++;
    return SDN_OK;
}

/* The model's top-k at every verified row for the drafter (row_topk): the row's argmax (the
 * one verification found, greedy and unconstrained) and the k - 1 tokens after it in logit
 * order. Drafting only: nothing here changes what is committed. */
static void row_topk(decode *d) {
    const int k = d->p->row_topk, n = d->vb.n < d->tree.n + 1 ? d->vb.n : d->tree.n + 1;
    float cv[SDN_RECYCLE_MAX_K];
    for (int r = 0; r < n; r++) {
        const float *row = d->logits + (size_t)r * d->vocab;
        int32_t *out = d->rtopk + (size_t)r * k;
        out[0] = d->greedy && !d->gs ? d->argmax[r] : sdn_argmax_f32(row, d->vocab);
        int m = 1 + (k > 1 ? sdn_topk_after(row, d->vocab, row[out[0]], out[0], k - 1, cv, out + 1) : 0);
        for (; m < k; m++) out[m] = -1;
    }
}

/* out_topk: the top-k of the row that predicted committed token i of this step (row 0 for the
 * first, the row after accepted node i - 1 otherwise) as output row j. */
static void out_row_topk(decode *d, int i, int j) {
    const int k = d->p->out_topk, r = i == 0 ? 0 : d->acc.nodes[i - 1] + 1;
    const float *row = d->logits + (size_t)r * d->vocab;
    int32_t *out = d->p->out_topk_tok + (size_t)j * k;
    float cv[SDN_RECYCLE_MAX_K];
    out[0] = d->argmax[r]; /* what verification committed (greedy, unconstrained) */
    int m = 1 + (k > 1 ? sdn_topk_after(row, d->vocab, row[out[0]], out[0], k - 1, cv, out + 1) : 0);
    for (; m < k; m++) out[m] = -1;
}

/* Compact: keep the KV entries of the root and the accepted path, drop the rest. */
static int step_compact(decode *d, int n_past, sdn_err *err) {
    return sdn_kv_keep(d->c, n_past, d->acc.keep, d->acc.n_acc + 1, err);
}

/* Commit: append the accepted tokens and the bonus token up to the limit, stopping at an
 * end-of-generation token; stream them; the last one is the next root. */
static int step_commit(decode *d, sdn_err *err) {
    const sdn_gen_params *p = d->p;
    memo_learn(d);
    int n_new = d->acc.n_acc + 1, first_new = d->n_gen;
    int bonus_row = d->acc.n_acc ? d->acc.nodes[d->acc.n_acc - 1] + 1 : 0, stuck = d->gs && d->empty[bonus_row];
    if (d->n_exits > 0) { /* a step whose ways out were all wrong counts as a miss */
        int hit = 0;
        for (int i = 0; i < d->n_exits && !hit; i++) {
            const int32_t next = committed_after(d, d->exits[i].leaf);
            hit = next >= 0 && (next == d->exits[i].a0 || next == d->exits[i].b0);
        }
        d->exit_miss = hit ? 0 : d->exit_miss + 1;
    }
    if (stuck) n_new = d->acc.n_acc; /* the bonus row allowed nothing: the answer ends */
    uint8_t src[SDN_INVARIANT_MAX_ROWS + 1]; /* per committed token: its draft node's source, SDN_SRC_NONE for the bonus */
    for (int i = 0; i < n_new && d->n_gen < d->max_new; i++) {
        int32_t tk = d->acc.tokens[i];
        src[d->n_gen - first_new] = i == d->acc.n_acc ? SDN_SRC_NONE
                                    : d->tree.source[d->acc.nodes[i]] ? d->tree.source[d->acc.nodes[i]] : SDN_SRC_DRAFT;
        if (d->gs) { /* the committed answer's grammar state follows (the tokens were checked) */
            int ok = sdn_gstate_accept_token(d->gs, p->gvocab, tk);
            if (ok < 0) return sdn_fail(err, SDN_ENOMEM, "out of memory (grammar state)");
            if (!ok) return sdn_fail(err, SDN_ESTATE, "constrained decoding committed token %d that its grammar does not allow", tk);
        }
        if (!p->ignore_eog && p->eog && p->eog(p->eog_ud, tk)) { d->stop = SDN_GEN_EOG; break; }
        if (p->out_topk > 0) out_row_topk(d, i, d->n_gen);
        d->gen[d->n_gen++] = tk;
        if (d->gs && sdn_gstate_ended(d->gs)) { d->stop = SDN_GEN_EOG; break; }
    }
    if (stuck && !d->stop) d->stop = SDN_GEN_EOG;
    if (p->on_tokens && d->n_gen > first_new && p->on_tokens(p->cb_ud, d->gen + first_new, src, d->n_gen - first_new) && !d->stop)
        d->stop = SDN_GEN_CANCEL;
    d->root = d->acc.tokens[d->acc.n_acc];
    return SDN_OK;
}

/* Feedback: the drafter learns the accepted tokens and, greedy, the model's next token after
 * every verified node (what draft reuse keeps). */
static int step_feedback(decode *d, sdn_err *err) {
    if (!d->p->drafter || d->stop || d->n_gen >= d->max_new) return SDN_OK;
    if (d->rtopk) row_topk(d);
    sdn_draft_feedback fb = {.accepted = d->acc.tokens, .n_accepted = d->acc.n_acc + 1, .tree = &d->tree,
                             .node_argmax = d->greedy ? d->argmax + 1 : NULL, .root_argmax = d->greedy ? d->argmax[0] : -1,
                             .row_topk = d->rtopk, .topk = d->rtopk ? d->p->row_topk : 0};
    return sdn_drafter_feedback(d->p->drafter, &fb, err);
}

int sdn_generate(sdn_ctx *c, const int32_t *prompt, int n_prompt, const sdn_gen_params *p, sdn_gen_result *out, sdn_err *err) {
    decode d = {.c = c, .p = p, .prompt = prompt, .n_prompt = n_prompt};
    if (out) memset(out, 0, sizeof *out);
    double t0 = sdn_now();
    int rc = setup(&d, err);
    if (!rc) rc = prefill(&d, t0, err);
    double tdec = sdn_now();
    while (!rc && d.n_gen < d.max_new && !d.stop) {
        double ta = sdn_now();
        if ((rc = step_draft(&d, err))) break;
        double tb = sdn_now();
        d.s.t_draft += tb - ta;
        int n_past = sdn_kv_len(c);
        if ((rc = step_verify(&d, err)) || (rc = step_compact(&d, n_past, err))) break;
        double tc = sdn_now();
        d.s.t_verify += tc - tb;
        if (d.adaptive && p->score_budget && d.greedy && p->cost_fix && d.curve_ms) /* against the uncorrected curve */
            sdn_cost_fix_observe(p->cost_fix, d.curve_ms, d.tree.n, (tc - tb) * 1000.0);
        if (d.s.steps == 1) d.s.t_first_token = tc - t0;
        double tcm = sdn_now();
        if ((rc = step_commit(&d, err))) break;
        if (d.gs) d.s.t_constrain += sdn_now() - tcm;
        double tf = sdn_now();
        rc = step_feedback(&d, err);
        d.s.t_draft += sdn_now() - tf;
    }
    d.s.t_decode = sdn_now() - tdec;
    d.s.n_gen = d.n_gen;
    d.s.peak_rss = sdn_peak_rss();
    if (out) {
        out->stats = d.s;
        if (!rc) {
            out->tokens = d.gen;
            out->n_tokens = d.n_gen;
            out->stop = d.stop ? d.stop : (d.n_gen < p->max_tokens ? SDN_GEN_CONTEXT : SDN_GEN_LENGTH);
            d.gen = NULL;
            if (p->preds_out) { *p->preds_out = d.preds; memset(&d.preds, 0, sizeof d.preds); }
        }
    }
    decode_free(&d);
    return rc;
}

int sdn_generate_tokens(sdn_ctx *c, const int32_t *prompt, int n_prompt, const sdn_gen_params *p, int32_t **out, int *n_out,
                        sdn_gen_stats *st, sdn_err *err) {
    sdn_gen_result r;
    int rc = sdn_generate(c, prompt, n_prompt, p, &r, err);
    if (st) *st = r.stats;
    if (n_out) *n_out = r.n_tokens;
    if (out) *out = r.tokens;
    else free(r.tokens);
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
