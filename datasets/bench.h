/* bench.h - running a dataset's requests on a model: the benchmark (plain decoding and
 * every drafting method on the same requests, outputs checked against plain decoding,
 * per-task statistics) and trace recording (plain greedy generation with the prefill
 * predictions, written as trace rows). Shared by `sdnpu bench`, `sdnpu trace` and apps.
 *
 * Requests become prompt tokens through tokenizer/request.h: the context as one document
 * and the prompt as the question, rendered with the model's chat template (or raw text
 * for base models); with use_input the row's original full input (dataset.h "input") is
 * the single user turn instead, as Spec-Bench renders its questions. Rows whose prompt
 * leaves fewer than 16 positions of the context for generation are skipped and counted. */
#ifndef SDN_BENCH_H
#define SDN_BENCH_H

#include <stdint.h>
#include <stdio.h>

#include "common/sdn_err.h"
#include "draft/methods.h"
#include "runtime/graph_setup.h"
#include "runtime/verify_cost.h"
#include "datasets/dataset.h"
#include "runtime/history.h"
#include "datasets/results.h"
#include "draft/draft_tree.h"
#include "grammar/grammar.h"
#include "modelfile/model.h"

typedef struct sdn_bench_opts {
    const char *const *methods; /* drafting methods compared with plain decoding (which is
                                   always run, first in the table; "none" may not be listed) */
    int n_methods;
    int max_tokens;             /* new tokens per request (default 128) */
    sdn_draft_caps caps;        /* max_branch (and max_depth of the default budget): 0 = the
                                   engine's; max_nodes / max_depth: the one budget when
                                   n_budgets = 0 (below) */
    const int *budgets;         /* draft budgets every method runs at (plain decoding runs once):
                                   SDN_BENCH_DEFAULT_BUDGET (0) = the engine's default, as
                                   `sdnpu run` without --draft-max: this machine's verify-cost
                                   curve (sdn_verify_curve) with caps.max_nodes = 0, so
                                   sdn_draft_budget sizes every step (with graphs: the graph
                                   runtime's fixed size); N > 0 = fixed caps of N draft tokens,
                                   depth N, branch caps.max_branch */
    int n_budgets;              /* 0: one budget, caps.max_nodes (with caps.max_depth) when > 0,
                                   else the default */
    int fresh_prefill;          /* 1: every run prefills the whole prompt (no KV reuse) */
    struct sdn_pcache *pcache;  /* a request's prefill takes its prompt's blocks from this prefix
                                   cache and gives it the ones it computes (NULL: none) */
    int curve_only;             /* 1: the default budget from the cost curve alone, without the live
                                   correction of the steps' measured times (sdn_cost_fix): drafting
                                   that does not depend on timing (tests compare it run to run) */
    const char *chat_template;  /* NULL = auto (request.h) */
    int use_input;              /* render the row's "input" (when present) as the user turn */
    int threads, n_ctx;         /* 0: 2 threads; the model's context (at most 4096) */
    int preds_k;                /* prefill top-k for methods that use predictions, and for
                                   traces (0 in traces: none) */
    sdn_history *history;       /* optional: earlier answers of the group as SAM history; each
                                   request's answer is stored after it ran */
    long history_budget;        /* tokens of history per request (default 4096) */
    sdn_history_scope history_scope; /* the group's answers (default) or every group's, its own first */
    const sdn_method_config *mcfg; /* method parameters (NULL: defaults) */
    const sdn_gs_options *graphs;  /* fixed-shape graphs switched during prefill (NULL: none) */
    /* called before every run (done = requests finished; note: request id, run, method@budget)
       and after every request (done of total; note: the request id) */
    void (*progress)(void *ud, long done, long total, const char *note);
    void *ud;
    FILE *log;                  /* skipped rows and output mismatches (NULL: stderr) */
    /* Constrained decoding (docs/constrained.md): every run, plain included, decodes under this
     * grammar (NULL: none); forced-text drafting follows mcfg->forced. */
    const sdn_grammar *grammar;
    const sdn_gvocab *gvocab;   /* the model's vocabulary as bytes (required with grammar) */
    FILE *answers;              /* optional: plain decoding's answers, one JSON line each:
                                   {"id": ..., "task": ..., "answer": "...", "complete": true} */
} sdn_bench_opts;

#define SDN_BENCH_DEFAULT_BUDGET 0

typedef struct sdn_bench_result {
    sdn_result_cell *cells;     /* per task (first-appearance order) x (none, then each method at
                                   each budget: method-major, budgets in the listed order) */
    int n_cells;
    long prefills;              /* runs that prefilled their prompt (KV reuse: one per request) */
    int have_curve;             /* the default budget ran: curve holds what it used */
    sdn_vcurve curve;           /* ms of a verification step with d draft tokens, by KV length */
    int n_requests, skipped;    /* requests run / rows skipped (too long for the context) */
    long mismatches;            /* (request, method) pairs whose output differed from plain */
    char model_fp[17];
} sdn_bench_result;

/* Run the benchmark. Every method's greedy output must equal plain decoding's; a mismatch
 * is reported on opts->log and counted (never silently ignored).
 *
 * KV reuse: the runs of one request share the prompt's KV entries. The request's first run
 * (whichever the rotation puts first) prefills the prompt - with the top-k prefill
 * predictions when any listed method uses them (k = preds_k, default 8) - and every later run
 * keeps those entries (sdn_gen_params.reuse_kv, and reuse_preds for methods that use the
 * predictions), so it prefills nothing and decodes after exactly the same KV entries. That
 * one prefill is counted in the task's plain-decoding cell (t_prefill of "none"); method
 * cells have t_prefill 0 (not measured), unless a run had to prefill itself (--graphs: a
 * prefill hook cannot reuse entries, so every run prefills and each cell has its own). A
 * method cell's t_decode includes its drafter's begin (sdn_gen_stats.t_begin: calibration
 * trees, automaton over the prompt), which is done after the prefill for each run. */
int sdn_bench_run(sdn_model *m, const sdn_dataset *ds, const sdn_bench_opts *o, sdn_bench_result *out, sdn_err *err);
void sdn_bench_result_free(sdn_bench_result *r);

/* Parse a --budgets list: comma-separated "default" (SDN_BENCH_DEFAULT_BUDGET) and integers
 * in [1, 63], at most `cap`, no repeats. *n receives the count. SDN_EINVAL names the bad item. */
int sdn_bench_parse_budgets(const char *list, int *out, int cap, int *n, sdn_err *err);

/* Record a trace: plain greedy generation of every row (with opts->preds_k prefill
 * predictions per context position when > 0), one trace row per request written to
 * `out`. model_name / tokenizer_name are stored as the trace's "model" / "tokenizer".
 * *written / *skipped (optional) count rows. */
int sdn_trace_record(sdn_model *m, const char *model_name, const char *tokenizer_name, const sdn_dataset *ds, const sdn_bench_opts *o,
                     FILE *out, int *written, int *skipped, sdn_err *err);

/* `sdnpu bench` (the command's work after option parsing, tools/cli_bench.c): the options. */
typedef struct sdn_tool_bench_cmd_opts {
    const char *model, *tokenizer;
    const char *datasets[32];     /* dataset files or folders, n_datasets of them (0: shared/datasets) */
    int n_datasets;
    const char *shared;           /* the shared material folder when no dataset is given (NULL: not found, a usage error) */
    const char *tasks;            /* --tasks filter (NULL: all) */
    int limit;                    /* --limit requests per task (0: all) */
    char **methods;               /* NULL-terminated list of methods, n_methods of them ("none" is dropped and
                                     freed here, the others checked; the command frees the list after) */
    int n_methods;
    int budgets[64], n_budgets;   /* --budgets (0: --draft-max's, or the engine's default) */
    long history_budget;          /* history tokens per request (0: the default) */
    const char *history;          /* history store file (NULL: none) */
    const char *graphs;           /* --graphs (NULL: none); gopt: its blocks, rows and profile database */
    sdn_gs_options gopt;
    const char *out_dir, *json, *csv, *rdb; /* outputs (NULL: not written) */
    int plot;                     /* SVG charts into out_dir (or .) */
    const char *cost, *cost_out;  /* verify-cost profile to plot; measure and write one */
    const char *projects[8];      /* profiles to project the cells onto, n_projects of them */
    int n_projects;
    const char *json_schema, *grammar, *answers; /* constraint files; plain decoding's answers written here */
    const char **params;          /* the --param values for the records, n_params of them */
    int n_params;
    const char *command;          /* the command line for the records (NULL: "sdnpu bench") */
    const char *prefix_cache_dir; /* --prefix-cache DIR (NULL: none) */
    int prefix_cache_mb, prefix_cache_disk_mb; /* --prefix-cache-mb (0 with no DIR: no cache), --prefix-cache-disk-mb */
    sdn_bench_opts o;             /* max_tokens, caps, threads, n_ctx, chat_template, use_input, fresh_prefill,
                                     mcfg (the rest is set by sdn_tool_bench) */
} sdn_tool_bench_cmd_opts;
/* Load the datasets, profiles, model, grammar and history; run plain decoding and every method;
 * print the tables, projections and charts' paths on stdout; write the files. Returns 0, 1
 * (runtime), 2 (usage: a bad grammar, method or budget combination) or 3 (an output differs
 * from plain decoding) after the message. */
int sdn_tool_bench(const sdn_tool_bench_cmd_opts *o);

#endif
