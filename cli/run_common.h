/* run_common.h - option parsing and the run-a-request routine shared by `sdnpu run` and
 * `sdnpu demo`, over the public API (include/sdnpu.h): load the model once, then one or more
 * passes (plain and/or speculative) with streaming output, statistics, the history store and
 * the plain-vs-speculative check. */
#ifndef SDN_RUN_COMMON_H
#define SDN_RUN_COMMON_H

#include <stdint.h>
#include <stdio.h>

#include "cli/opts.h"
#include "sdnpu.h"

typedef struct sdn_run_opts {
    const char *model_path, *tokenizer_path, *prompt, *prompt_ids, *prompt_file, *chat_template, *system, *stats_json;
    char *prompt_buf;     /* the prompt read from --prompt-file or stdin (owned) */
    cli_list contexts;    /* --context FILE ... */
    int print_prompt;     /* --print-prompt: print the rendered prompt and exit */
    int max_tokens, threads, n_ctx, ignore_eos, quiet;
    cli_sampling smp;     /* --temp, --top-k, --top-p, --seed, --min-p, --repeat-penalty, --repeat-last-n, --stop;
                             --grammar / --json-schema (sdnpu run): the group run and chat share (cli/opts.h) */
    const char *spec;     /* drafting method (none, pld, sam, ...) */
    int draft_max, draft_depth, draft_branch; /* 0: the engine's defaults */
    int compare;          /* also run plain decoding and compare */
    const char *graphs;   /* --graphs MODE (NULL: off) --graph-blocks N --g1 S1 --g2 S2 --profile-db FILE --graph-pin:
                             sdnpu_graph_params (include/sdnpu_experimental.h) */
    int graph_blocks, g1, g2, graph_pin;
    const char *profile_db;
    const char *history, *task_group; /* --history DB --task-group NAME */
    const char *history_scope;        /* --history-scope group|global (NULL: group) */
    int prefill_topk;     /* top-k prefill predictions kept for methods that use them (default 4) */
    cli_list params;      /* --param KEY=VALUE (drafting-method parameters) */
    char *grammar, *json_schema; /* their text (owned), read by sdn_tool_read_constraint (tools/tools.h) */
    cli_prefix_cache pcache;     /* --prefix-cache DIR, --prefix-cache-mb N, --prefix-cache-disk-mb N */
} sdn_run_opts;

void sdn_run_opts_init(sdn_run_opts *o);
void sdn_run_opts_free(sdn_run_opts *o);
/* Write the option table of the run options (pointing into o; defaults as o holds them now)
 * into t (cap entries, the {NULL} end included); returns the number of options, -1 when cap
 * is too small. Commands append their own options after them. */
int sdn_run_opts_table(sdn_run_opts *o, cli_opt *t, int cap);
/* Check the options after parsing, before any work: values the API would refuse, conflicts
 * (--param with --spec none, --prompt-ids with --context), output paths writable, and the
 * prompt read from --prompt-file or stdin. Returns 0, or the exit code (2 usage, 1 runtime). */
int sdn_run_opts_check(sdn_run_opts *o);
/* 1 when a failed request's error is its constraint's (a grammar or JSON schema the library
 * refused: SDNPU_EINVAL naming the position or keyword); such a failure is a usage error. */
int sdn_constraint_error(int rc, const sdnpu_error *err);

/* Run the request: with o->compare (or spec none) plain decoding first, then the chosen
 * method; generated text streams to `out` (NULL: silent). Returns the exit code. */
int sdn_run_request(const sdn_run_opts *o, FILE *out);

#endif
