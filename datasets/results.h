/* results.h - benchmark and study results: one cell per (task, method) with the counts,
 * times and memory of its requests, written as CSV, JSON, rows of an SQLite results
 * database, and SVG charts a person would rather look at than read.
 *
 * Results database: SQLite, application_id 0x53444e52 ("SDNR"), user_version 2, WAL:
 *   runs(run_id INTEGER PRIMARY KEY, started TEXT (UTC ISO 8601), kind TEXT ("bench" or
 *        "study"), machine TEXT, model TEXT, model_fp TEXT, threads INTEGER,
 *        max_tokens INTEGER, dataset TEXT, caps TEXT, command TEXT)
 *   results(run_id INTEGER REFERENCES runs, task TEXT, method TEXT, requests INTEGER,
 *        prompt_tokens INTEGER, output_tokens INTEGER, steps INTEGER, mean_accepted REAL,
 *        draft_per_step REAL, accepted_draft_tokens INTEGER, ms_per_token REAL,
 *        plain_ms_per_token REAL, speedup REAL, prefill_ms REAL, decode_ms REAL,
 *        draft_ms REAL, verify_ms REAL, peak_rss_bytes INTEGER, mismatches INTEGER,
 *        accept_hist TEXT ("accepted:steps;..." for non-zero buckets),
        budget TEXT (bench: "default" or the fixed draft budget N; NULL for plain decoding,
        study cells and rows of runs recorded before schema 2))
 * A schema-1 file (no budget column) is upgraded in place when a run is added: the column is
 * added, its old rows keep NULL.
 * A run and all its rows are written in one transaction. With several inputs or models, the
 * runs columns dataset, model and model_fp hold them all, separated by "; "; command holds the
 * whole command line (every --param in it). Figures that were not measured (times, ms/token
 * and speedup of a replayed study cell, memory) are NULL in the database, null in JSON and
 * empty in CSV, never 0. */
#ifndef SDN_RESULTS_H
#define SDN_RESULTS_H

#include <stddef.h>

#include "common/sdn_err.h"
#include "datasets/study.h"

/* ms per generated token over the decode phase, 0 when unknown. */
double sdn_cell_ms_per_token(const sdn_result_cell *c);
/* Plain ms/token divided by this cell's (0 when either is unknown). */
double sdn_cell_speedup(const sdn_result_cell *c);

typedef struct sdn_run_meta {
    const char *kind;        /* "bench" or "study" */
    const char *model, *model_fp, *dataset, *command; /* command: the whole command line */
    const char *const *inputs;  /* every input file (datasets, traces); dataset: the first */
    int n_inputs;
    const char *const *models, *const *model_fps; /* every model the inputs came from (a study over
                                                     traces of several models); model: the first */
    int n_models;
    const char *const *params;  /* every --param KEY=VALUE */
    int n_params;
    int threads, max_tokens;
    char caps[64];           /* "nodes=63 depth=63 branch=1" */
} sdn_run_meta;

int sdn_results_csv(const char *path, const sdn_run_meta *m, const sdn_result_cell *cells, int n, sdn_err *err);
int sdn_results_json(const char *path, const sdn_run_meta *m, const sdn_result_cell *cells, int n, sdn_err *err);
/* Append a run and its cells to the results database at path (created when absent).
 * *run_id (optional) receives the new run's id. */
int sdn_results_db_add(const char *path, const sdn_run_meta *m, const sdn_result_cell *cells, int n, long long *run_id, sdn_err *err);

/* Grouped bar chart: one group per category (x axis), one bar per series, value
 * values[g * n_series + s] (negative: missing). */
int sdn_svg_bars(const char *path, const char *title, const char *y_label, const char *const *groups, int n_groups,
                 const char *const *series, int n_series, const double *values, sdn_err *err);
/* Line chart: series s has n[s] points (x[s][i], y[s][i]). */
int sdn_svg_lines(const char *path, const char *title, const char *x_label, const char *y_label, const char *const *series, int n_series,
                  const double *const *x, const double *const *y, const int *n, sdn_err *err);

/* The same with vertical dashed marker lines at x = marks[i], each labelled mark_labels[i]. */
int sdn_svg_lines_marked(const char *path, const char *title, const char *x_label, const char *y_label, const char *const *series,
                         int n_series, const double *const *x, const double *const *y, const int *n, const double *marks,
                         const char *const *mark_labels, int n_marks, sdn_err *err);

#endif
