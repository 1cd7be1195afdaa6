/* run_common.h - option parsing and the run-a-request routine shared by `sdnpu run` and
 * `sdnpu demo`, over the public API (include/sdnpu.h): load the model once, then one or more
 * passes (plain and/or speculative) with streaming output, statistics, the history store and
 * the plain-vs-speculative check. */
#ifndef SDN_RUN_COMMON_H
#define SDN_RUN_COMMON_H

#include <stdint.h>
#include <stdio.h>

#include "sdnpu.h"

typedef struct sdn_run_opts {
    const char *model_path, *tokenizer_path, *prompt, *prompt_ids, *chat_template, *system, *stats_json;
    const char **contexts;
    int n_contexts;
    int max_tokens, threads, n_ctx, ignore_eos, quiet;
    float temp, top_p;    /* --temp (0: greedy) --top-p */
    int top_k;            /* --top-k */
    uint64_t seed;        /* --seed */
    const char *spec;     /* drafting method (none, pld, sam, ...) */
    int draft_max, draft_depth, draft_branch; /* 0: the engine's defaults */
    int compare;          /* also run plain decoding and compare */
    const char *graphs;   /* --graphs MODE (NULL: off) --graph-blocks N --g1 S1 --g2 S2 --profile-db FILE --graph-pin */
    int graph_blocks, g1, g2, graph_pin;
    const char *profile_db;
    const char *history, *task_group; /* --history DB --task-group NAME */
    int prefill_topk;     /* top-k prefill predictions kept for methods that use them (default 4) */
    const char **params;  /* --param KEY=VALUE (drafting-method parameters) */
    int n_params;
} sdn_run_opts;

void sdn_run_opts_init(sdn_run_opts *o);
void sdn_run_opts_free(sdn_run_opts *o);
/* Parse argv[*i] (and its value) if it is a run option: 1 consumed, 0 not a run option,
 * -1 bad value (message printed). */
int sdn_run_opts_parse(sdn_run_opts *o, int argc, char **argv, int *i);
/* Print the run options' help lines. */
void sdn_run_opts_usage(FILE *f);
/* Run the request: with o->compare (or spec none) plain decoding first, then the chosen
 * method; generated text streams to `out` (NULL: silent). Returns the exit code. */
int sdn_run_request(const sdn_run_opts *o, FILE *out);

#endif
