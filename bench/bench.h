/* bench.h - running a dataset's requests on a model: the benchmark (plain decoding and
 * every drafting method on the same requests, outputs checked against plain decoding,
 * per-task statistics) and trace recording (plain greedy generation with the prefill
 * predictions, written as trace rows). Shared by `sdnpu bench`, `sdnpu trace` and apps.
 *
 * Requests become prompt tokens through engine/request.h: the context as one document
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
#include "datasets/dataset.h"
#include "datasets/history.h"
#include "bench/results.h"
#include "draft/draft_tree.h"
#include "engine/model.h"

typedef struct sdn_bench_opts {
    const char *const *methods; /* drafting methods compared with plain decoding (which is
                                   always run, first in the table; "none" may not be listed) */
    int n_methods;
    int max_tokens;             /* new tokens per request (default 128) */
    sdn_draft_caps caps;        /* zero fields: the engine's defaults */
    const char *chat_template;  /* NULL = auto (request.h) */
    int use_input;              /* render the row's "input" (when present) as the user turn */
    int threads, n_ctx;         /* 0: 2 threads; the model's context (at most 4096) */
    int preds_k;                /* prefill top-k for methods that use predictions, and for
                                   traces (0 in traces: none) */
    sdn_history *history;       /* optional: earlier answers of the group as SAM history; each
                                   request's answer is stored after it ran */
    long history_budget;        /* tokens of history per request (default 4096) */
    const sdn_method_config *mcfg; /* method parameters (NULL: defaults) */
    const sdn_gs_options *graphs;  /* fixed-shape graphs switched during prefill (NULL: none) */
    /* called after every request (done of total; note: the request id) */
    void (*progress)(void *ud, long done, long total, const char *note);
    void *ud;
    FILE *log;                  /* skipped rows and output mismatches (NULL: stderr) */
} sdn_bench_opts;

typedef struct sdn_bench_result {
    sdn_result_cell *cells;     /* per task (first-appearance order) x (none, methods...) */
    int n_cells;
    int n_requests, skipped;    /* requests run / rows skipped (too long for the context) */
    long mismatches;            /* (request, method) pairs whose output differed from plain */
    char model_fp[17];
} sdn_bench_result;

/* Run the benchmark. Every method's greedy output must equal plain decoding's; a mismatch
 * is reported on opts->log and counted (never silently ignored). */
int sdn_bench_run(sdn_model *m, const sdn_dataset *ds, const sdn_bench_opts *o, sdn_bench_result *out, sdn_err *err);
void sdn_bench_result_free(sdn_bench_result *r);

/* Record a trace: plain greedy generation of every row (with opts->preds_k prefill
 * predictions per context position when > 0), one trace row per request written to
 * `out`. model_name / tokenizer_name are stored as the trace's "model" / "tokenizer".
 * *written / *skipped (optional) count rows. */
int sdn_trace_record(sdn_model *m, const char *model_name, const char *tokenizer_name, const sdn_dataset *ds, const sdn_bench_opts *o,
                     FILE *out, int *written, int *skipped, sdn_err *err);

#endif
