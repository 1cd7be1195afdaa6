/* study.h - offline acceptance studies: replay a drafting method against a recorded greedy
 * generation (a trace row) and count what live speculative decoding would have accepted.
 *
 * Replay of one row, step by step exactly as the decode loop of engine/session.c drives a
 * drafter when the model's greedy outputs are the recorded ones:
 *   begin(context tokens, prefill predictions when the method uses them and the trace has
 *   them, else NULL); then while fewer than max_new tokens are committed:
 *     caps.max_nodes is lowered to the room left (max_new - committed - 1);
 *     propose a tree (skipped when that room is 0);
 *     walk it from the root, following the child whose token is the next recorded token
 *     (the model's greedy choice), as far as it goes: those are the accepted tokens; the
 *     next recorded token is the bonus;
 *     commit; stop at the recorded end-of-generation token or the output's end;
 *     feedback(accepted + bonus, the tree, node_argmax NULL, root_argmax -1) unless
 *     generation stopped.
 * Mean accepted tokens per step counts the bonus token (output tokens / steps), as
 * sdn_gen_mean_accepted does. The only place a replay can differ from a live run is the
 * step that produced the end-of-generation token when the draft itself contained that
 * token: the live verifier may accept further draft tokens after it (they are discarded),
 * the replay cannot know them.
 *
 * Not replayable: methods that reuse rejected drafts (sdn_method_reuses_drafts: they need the
 * model's greedy token after rejected draft nodes, which no trace records); the study measures
 * those live with sdn_study_live. Methods with the model's candidates replay approximately
 * from a row's output predictions (the root's and the accepted nodes' rows of each step; the
 * rejected nodes' rows are unknown), into mcfg->recycle or a fresh table of their own. Methods for which sdn_method_uses_prefill_preds()
 * is 1 need traces with predictions (preds_k > 0). */
#ifndef SDN_STUDY_H
#define SDN_STUDY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/sdn_err.h"
#include "datasets/trace.h"
#include "draft/draft_tree.h"
#include "draft/methods.h"
#include "runtime/decode.h"

#define SDN_STUDY_DRAFT_HIST 65 /* draft-size buckets: 0..64 nodes */

/* Counts of one replay (or live run), and sums of several. */
typedef struct sdn_study_counts {
    long requests;
    long out_tokens;                    /* committed tokens (without end-of-generation) */
    long steps;                         /* verification steps */
    long drafted;                       /* draft tokens proposed */
    long accepted;                      /* draft tokens accepted (bonus not counted) */
    long accept_hist[SDN_ACCEPT_HIST];  /* steps by accepted draft tokens */
    long draft_hist[SDN_STUDY_DRAFT_HIST]; /* steps by draft size (tree nodes) */
    double t_draft;                     /* seconds in begin + propose + feedback */
} sdn_study_counts;

void sdn_study_counts_add(sdn_study_counts *sum, const sdn_study_counts *c);
/* Output tokens per step (the bonus counted), 0 without steps. */
double sdn_study_mean_accepted(const sdn_study_counts *c);
/* Mean draft tokens per step. */
double sdn_study_mean_draft(const sdn_study_counts *c);

/* Replay `method` (created with mcfg, NULL = defaults) on one trace row with draft caps
 * `caps` (zero fields take the study's defaults: the whole budget of 63 nodes, depth = nodes, branch 4).
 * steps_out (optional) receives the accepted draft tokens of every step (malloc'd,
 * *n_steps entries). Fails with SDN_EINVAL when the method is not replayable on the row. */
int sdn_study_replay(const sdn_trace_row *r, const char *method, const sdn_method_config *mcfg, const sdn_draft_caps *caps,
                     sdn_study_counts *out, int **steps_out, int *n_steps, sdn_err *err);

/* Live measurement of a method on a trace row's context with a loaded model: greedy
 * sdn_generate with the method's drafter (prefill predictions with k = preds_k when the
 * method uses them), max_new tokens as recorded (or the recorded output length + 1),
 * stopping at the model tokenizer's end-of-generation tokens. *same (optional) says
 * whether the output equals the recorded one; steps_out as for replay. A method with the
 * model's candidates learns every verified row's top-k into mcfg->recycle, or into a fresh
 * table of this run's own when it is NULL (as sdn_study_run gives every request). */
int sdn_study_live(sdn_ctx *c, const sdn_trace_row *r, const char *method, const sdn_method_config *mcfg, const sdn_draft_caps *caps,
                   int preds_k, sdn_study_counts *out, int *same, int **steps_out, int *n_steps, sdn_err *err);

/* Results of one (task, method): the counts plus, for live runs and benchmarks, times and
 * memory (results.h writes them as tables, CSV, JSON, SQLite rows and charts). */
typedef struct sdn_result_cell {
    char task[64], method[64];
    char budget[16];              /* bench: the draft budget the method ran at ("default": the
                                     engine's verify-cost rule; "N": fixed caps); "" otherwise */
    sdn_study_counts c;           /* requests, tokens, steps, histograms, draft time */
    long budget_hist[SDN_STUDY_DRAFT_HIST]; /* bench: steps by the draft budget allowed */
    long prompt_tokens;
    double t_prefill, t_decode, t_verify; /* seconds, summed over requests (0: not measured); bench:
                                     t_decode includes the drafter's begin (calibration build),
                                     t_prefill see bench.h (KV reuse) */
    double plain_t_decode;        /* plain decoding over the same requests (bench) */
    long plain_out_tokens;
    size_t peak_rss;              /* largest peak RSS of a request (bytes, 0: unknown) */
    int mismatches;               /* requests whose greedy output differed from plain */
    int live;                     /* study: measured live instead of replayed */
    long skipped;                 /* study: requests the method could not be measured on */
    char note[200];               /* study: why (empty when nothing was skipped) */
    /* bench with a constraint (sdn_bench_opts.grammar) */
    long complete;                /* answers that ended where the grammar may end (not cut by max_tokens) */
    long forced_drafted;          /* draft tokens that were forced text */
    double t_constrain;           /* seconds spent applying the constraint */
} sdn_result_cell;

typedef struct sdn_study_opts {
    const char *const *methods;  /* methods to study ("none" gives the 1-token-per-step baseline) */
    int n_methods;
    sdn_draft_caps caps;         /* zero fields: the engine's defaults */
    const sdn_method_config *mcfg; /* NULL: defaults */
    int history;                 /* simulate the history store: each row drafts also from the
                                    earlier outputs of its group in trace order (in-memory
                                    store, most recent first within history_budget tokens) */
    long history_budget;         /* default 4096 */
    sdn_ctx *live_ctx;           /* optional model context for live measurement */
    int live_all;                /* measure every method live (needs live_ctx) */
    void (*progress)(void *ud, long done, long total, const char *note);
    void *ud;
    FILE *log;                   /* notes and warnings (NULL: stderr) */
} sdn_study_opts;

/* Run a study over all rows of a trace: one cell per (task in first-appearance order,
 * method), then, when there are several tasks, one "all" cell per method summing them. Methods a row cannot be
 * replayed on are measured live when live_ctx is given, otherwise skipped with a note.
 * *cells malloc'd. */
int sdn_study_run(const sdn_trace *t, const sdn_study_opts *o, sdn_result_cell **cells, int *n_cells, sdn_err *err);

/* Normalize caps as the engine does (zero fields: defaults). */
void sdn_study_caps(const sdn_draft_caps *in, sdn_draft_caps *out);

/* `sdnpu study` (the command's work after option parsing, tools/cli_study.c): the options. */
typedef struct sdn_tool_study_opts {
    const char *traces[32];    /* trace files, n_traces of them */
    int n_traces;
    const char *costs[8];      /* verify-cost profiles to project onto, n_costs of them */
    int n_costs;
    char *const *methods;      /* methods studied, n_methods of them (0: "no methods", exit 1) */
    int n_methods;
    const char *tasks;         /* --tasks filter (NULL: all) */
    int limit;                 /* --limit rows per task (0: all) */
    const char *model, *tokenizer; /* live measurement model (NULL: none) */
    int threads, n_ctx;
    const char *csv, *json, *rdb; /* outputs (NULL: not written) */
    int no_published;          /* no published reference figures */
    const char **params;       /* the --param values for the records, n_params of them */
    int n_params;
    const char *command;       /* the command line for the records (NULL: "sdnpu study") */
    sdn_study_opts so;         /* caps, history, history_budget, live_all, mcfg (methods, progress and
                                  live_ctx are set by sdn_tool_study) */
} sdn_tool_study_opts;
/* Load the traces (filtered), the profiles and the model; replay (or measure live) every
 * method; print the tables, projections and published figures on stdout; write the records.
 * Returns 0, or 1 after the error on stderr. */
int sdn_tool_study(const sdn_tool_study_opts *o);

#endif
