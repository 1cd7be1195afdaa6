/* decode.h - one generation on an inference context (the token level under the request API
 * of include/sdnpu.h): chunked prefill of the prompt, then the decode loop until an
 * end-of-generation token, the token limit or the callback stops it, with tokens streamed to
 * a callback as they are committed, and per-run statistics.
 *
 * Every decode step is one verification step: the newest committed token (the root, whose
 * KV entry is computed in the step) plus the drafter's token tree run through the
 * batch-invariant kernels in one forward pass, greedy or lossless stochastic acceptance,
 * KV compaction to the accepted path, drafter feedback. Plain decoding is the same loop
 * with no drafter (an empty tree), so both produce identical greedy output. */
#ifndef SDN_DECODE_H
#define SDN_DECODE_H

#include <stdint.h>

#include "common/sdn_err.h"
#include "draft/drafter.h"
#include "engine/forward.h"
#include "engine/sampler.h"
#include "grammar/grammar.h"

#define SDN_ACCEPT_HIST 65 /* histogram buckets: accepted draft tokens 0..64 */
/* Default draft caps when no verify cost curve is given (sdn_gen_params.verify_ms): 4 draft
 * tokens per step, up to 4 children per node (chain drafters such as pld and sam produce
 * chains regardless). `sdnpu run` gives the measured curve, so its default budget follows the
 * machine (sdn_draft_budget); --graphs chooses it from the profiled curve. The offline study
 * uses the whole budget (63) to measure what drafting could accept. */
#define SDN_DEFAULT_DRAFT_TOKENS 4
#define SDN_DEFAULT_BRANCH 4

/* A prefill implementation: run tokens[0..n) into the context's KV cache (committing them)
 * and, when topk > 0, write each position's top-k predictions (tok/prob: n*topk) over the
 * candidate vocabulary `vocab` (n_vocab ids; NULL: the whole vocabulary). */
typedef int (*sdn_prefill_fn)(void *ud, sdn_ctx *c, const int32_t *tokens, int n, int topk, const int32_t *vocab, int n_vocab,
                              int32_t *tok, float *prob, sdn_err *err);

/* Called with the tokens one decode step committed and where each came from (sources[i]:
 * SDN_SRC_* of draft/draft_tree.h for an accepted draft token, SDN_SRC_NONE for the model's
 * own token of the step); return nonzero to stop generation. */
typedef int (*sdn_token_cb)(void *ud, const int32_t *tokens, const uint8_t *sources, int n);

typedef struct sdn_gen_params {
    int max_tokens;        /* new tokens to generate at most */
    int (*eog)(void *ud, int32_t tok); /* does tok end generation? (NULL: never) */
    void *eog_ud;
    sdn_token_cb on_tokens; /* newly committed tokens (NULL: none); nonzero return stops */
    void *cb_ud;
    sdn_sampling sampling; /* temp <= 0: greedy */
    int prefill_chunk;     /* prompt tokens per prefill forward (0: the context's max batch) */
    int ignore_eog;        /* keep generating past end-of-generation tokens */
    sdn_drafter *drafter;  /* NULL: plain decoding */
    sdn_draft_caps caps;   /* draft limits (max_nodes <= SDN_INVARIANT_MAX_ROWS - 1) */
    int prefill_topk;      /* > 0: keep the model's top-k next-token predictions (with
                              probabilities) for context positions 0 .. n_prompt-2, computed by
                              the prefill forward passes themselves, and give them to the drafter
                              (the last position's prediction comes from the first step) */
    struct sdn_preds *preds_out; /* optional: receives those predictions (caller frees) */
    int prefill_topk_full;       /* 0 (default): predictions over the context's own tokens, normalized
                                    there - what in-context calibration can use (it only expands
                                    tokens that occur in the context), at ~|context vocabulary| /
                                    |vocabulary| of a full LM head's cost; 1: over the whole vocabulary */
    /* Graph scheduling hooks (graph_sched/): a replacement for the default chunked prefill,
     * and a fixed decode-graph shape. */
    sdn_prefill_fn prefill;      /* NULL: default chunked prefill */
    void *prefill_ud;
    int decode_rows;             /* > 0: every verification batch is padded to this many rows (the
                                    decode graph's fixed shape; padding rows are computed and
                                    discarded); the draft budget is capped at decode_rows - 1 */
    int reuse_kv;                /* 1: keep the KV entries of the context's previous request that hold
                                    the same leading prompt tokens (sdn_kv_common_prefix) and prefill
                                    only the rest. Not with a prefill hook (its layouts need the whole
                                    prompt). With prefill_topk, only with reuse_preds (below). Entries
                                    the previous request made while decoding have the decode kernels'
                                    rounding, not the prefill's. */
    struct sdn_pcache *pcache;   /* the model's prefix cache (runtime/prefix_cache.h; NULL: none):
                                    whole blocks of the prompt are taken from it and given to it
                                    (runtime/prefill.h). Not with a prefill hook. */
    const struct sdn_preds *reuse_preds; /* the previous request's prefill predictions on this context
                                    (its preds_out): with reuse_kv and prefill_topk (same k), the
                                    positions of the common prefix that it covers take these and are
                                    not prefilled again. They were normalized over that request's
                                    context vocabulary: drafting only, the output is unaffected. */
    /* Draft budget from the verify cost curve: verify_ms[d] (d = 0 .. SDN_INVARIANT_MAX_ROWS - 1)
     * is the measured time of a verification step with d draft tokens (d = 0: plain decoding).
     * With a drafter, verify_ms and caps.max_nodes = 0, every step drafts sdn_draft_budget(
     * verify_ms, cap, a) tokens, a = the per-token acceptance observed so far in this request
     * (sdn_accept_estimate); NULL: the fixed caps. */
    const double *verify_ms;
    /* The same from a curve measured at two KV lengths (runtime/verify_cost.h), read at the
     * KV length of each step; takes the place of verify_ms when set. */
    const struct sdn_vcurve *vcurve;
    /* Prefill progress (NULL: none): called before the first prefill chunk with done = the
     * reused KV entries and after every chunk, done = prompt positions in the KV cache so far,
     * total = the prompt positions prefill fills (n_prompt - 1). With a prefill hook: once, at
     * the end. */
    void (*on_progress)(void *ud, int done, int total);
    void *progress_ud;
    /* Constrained decoding (grammar/grammar.h; docs/constrained.md): every committed token is
     * one the grammar allows (greedy: the best allowed token; sampling: the allowed tokens'
     * renormalized distribution), at every verified row, so speculative output equals
     * constrained plain output; draft nodes the grammar rules out are pruned before the
     * forward pass. NULL: no constraint. */
    const sdn_grammar *grammar;
    const sdn_gvocab *gvocab; /* the model's vocabulary as bytes (required with grammar) */
    const sdn_tokenizer *tok;   /* tokenizes forced text (required with forced_draft) */
    int forced_draft;                /* 1: with a drafter, the text the grammar forces next is drafted too */
    int exit_draft;                  /* 1 (with forced_draft): at a branch point, the way out of the element and its forced text too */
    int grammar_skip_space;          /* 1: the answer starts a SentencePiece text stream, whose first
                                        leading space the detokenizer drops: the grammar matches the
                                        text without it (sdn_gstate_set_skip_leading_space) */
    /* What forced-text drafting learned on this context's earlier requests (NULL: nothing kept;
     * see sdn_draft_memo). Drafting only: the output never depends on it. */
    struct sdn_draft_memo *memo;
    /* > 0 (with a drafter): the model's top row_topk next tokens at every verified row go to
     * the drafter's feedback (sdn_draft_feedback.row_topk; the model-derived candidates,
     * draft/recycle.h); counted as drafting time. At most SDN_RECYCLE_MAX_K. */
    int row_topk;
    /* > 0: the model's top out_topk next tokens at every committed position into out_topk_tok
     * ([max_tokens * out_topk], best first, -1 padded; row j: after the token before output
     * j, so it starts with output j), for traces (sdn_trace_row.out_pred_tok). Greedy and
     * unconstrained only (else SDN_EINVAL); at most SDN_RECYCLE_MAX_K. */
    int out_topk;
    int32_t *out_topk_tok;
    /* 1 (with a drafter whose node scores are path estimates and draft.evidence=1, sdn_method_scores_paths, and a
     * cost curve, verify_ms / vcurve, and no fixed caps.max_nodes): each step the drafter
     * proposes up to 32 nodes, their scores are calibrated on this request's acceptances per
     * source and depth, and the tree is cut to the size the expected tokens per millisecond
     * choose (draft/sizing.h) instead of sdn_draft_budget's chain rule. */
    int score_budget;
    /* Greedy with score_budget: the verify cost as this context measured it live (draft/sizing.h,
     * sdn_cost_fix), updated every step, kept by the caller across requests (NULL: the curve
     * as it is). */
    struct sdn_cost_fix *cost_fix;
    /* Greedy with score_budget: the calibration of the drafter's scores kept by the caller
     * across requests (draft/sizing.h; NULL, or a sampled request: this request's own, from
     * nothing). Drafting only: a greedy answer never depends on it. */
    struct sdn_draft_calib *calib;
} sdn_gen_params;

/* Forced-text drafting's memory across the requests of one context (owned by the caller, used
 * by one generation at a time): where forced text starts with a token the tokenizer merges
 * (`{"`, `"}`) and the model may write its first character alone instead (`{` `"`), how
 * often the model took each form. Once one form wins clearly, the other is drafted as its
 * first token only (one row instead of the whole chain), so a wrong guess is still
 * noticed. Zero-initialize it. */
#define SDN_DRAFT_MEMO_ENTRIES 16
typedef struct sdn_draft_memo_entry {
    int32_t merged, split;      /* the merged form's first token and the split form's */
    uint16_t n_merged, n_split; /* times the model wrote each */
} sdn_draft_memo_entry;
typedef struct sdn_draft_memo {
    sdn_draft_memo_entry e[SDN_DRAFT_MEMO_ENTRIES];
    int n;
} sdn_draft_memo;

/* The draft size d in [0, dmax] maximizing expected tokens per millisecond of a chain whose
 * tokens are each accepted with probability a given the previous ones: E(d) / verify_ms[d],
 * E(d) = 1 + a + ... + a^d (the bonus token included). Ties go to the smaller d. */
int sdn_draft_budget(const double *verify_ms, int dmax, double a);
/* Per-token acceptance estimate after `accepted` accepted draft tokens and `misses` steps
 * whose draft was not fully accepted: (accepted + 2) / (accepted + misses + 4), i.e. a prior
 * of 0.5 worth four observations, capped at 0.98. */
double sdn_accept_estimate(long accepted, long misses);

/* Owned prefill predictions: tok[p*k + j], prob[p*k + j] for positions p < n_pos. */
typedef struct sdn_preds {
    int n_pos, k;
    int32_t *tok;
    float *prob;
} sdn_preds;
void sdn_preds_free(sdn_preds *p);

typedef struct sdn_gen_stats {
    int n_prompt, n_gen;
    int n_reused;                /* prompt tokens whose KV entries were reused (reuse_kv) */
    int n_cached_mem, n_cached_disk; /* prompt tokens imported from the prefix cache's memory / disk tier */
    double t_saved;              /* the prefill seconds those blocks cost when computed, less their import */
    int steps;                   /* verification (decode) steps */
    long drafted;                /* draft tokens proposed in total */
    long accepted;               /* draft tokens accepted in total */
    int accept_hist[SDN_ACCEPT_HIST]; /* steps by number of accepted draft tokens */
    int draft_hist[SDN_ACCEPT_HIST];  /* steps by draft tokens verified (tree nodes) */
    int budget_hist[SDN_ACCEPT_HIST]; /* steps with a drafter by the draft budget allowed: the
                                         fixed cap or sdn_draft_budget's choice (before the
                                         limits of the remaining tokens and KV room) */
    double t_prefill, t_decode;  /* seconds: prefill; all decode steps */
    double t_preds;              /* part of t_prefill spent on top-k predictions (LM head + top-k) */
    double t_draft, t_verify;    /* drafting + feedback (including t_begin); forward + acceptance
                                    (parts of t_decode, except t_begin) */
    double t_begin;              /* the drafter's begin after prefill (calibration trees, automaton
                                    over the prompt): in t_draft, in neither t_prefill nor t_decode */
    double t_first_token;        /* prefill + first step */
    size_t peak_rss;             /* bytes, process high-water mark */
    long forced_drafted;         /* draft tokens that came from the grammar's forced text */
    double t_constrain;          /* seconds in the constraint: pruning, per-row choice or mask, commit */
} sdn_gen_stats;

/* Mean accepted tokens per step, counting the bonus token (= n_gen / steps). */
double sdn_gen_mean_accepted(const sdn_gen_stats *s);

/* Why a generation ended. */
typedef enum sdn_gen_stop {
    SDN_GEN_LENGTH = 0,   /* max_tokens generated */
    SDN_GEN_EOG = 1,      /* an end-of-generation token (not included in the output) */
    SDN_GEN_CANCEL = 2,   /* on_tokens returned nonzero */
    SDN_GEN_CONTEXT = 3,  /* the KV cache is full */
} sdn_gen_stop;

typedef struct sdn_gen_result {
    int32_t *tokens;       /* generated tokens without any end-of-generation token (malloc'd) */
    int n_tokens;
    sdn_gen_stop stop;
    sdn_gen_stats stats;   /* also filled when generation fails part way */
} sdn_gen_result;

/* Generate after `prompt` (n_prompt >= 1 tokens) on a context whose KV cache is reset (or,
 * with reuse_kv, kept for the prompt's common prefix with what the context holds). `out` may
 * be NULL; free its tokens with sdn_gen_result_free. Errors: SDN_EINVAL (empty prompt, prompt
 * or decode graph larger than the context), SDN_ENOMEM, and whatever the forward pass, the
 * prefill hook or the drafter report. */
int sdn_generate(sdn_ctx *c, const int32_t *prompt, int n_prompt, const sdn_gen_params *p, sdn_gen_result *out, sdn_err *err);
void sdn_gen_result_free(sdn_gen_result *r);
/* sdn_generate for callers that want the tokens and statistics only: *out (malloc'd, may be
 * NULL), *n_out and *st (each optional) receive the result's fields. */
int sdn_generate_tokens(sdn_ctx *c, const int32_t *prompt, int n_prompt, const sdn_gen_params *p, int32_t **out, int *n_out,
                        sdn_gen_stats *st, sdn_err *err);

#endif
