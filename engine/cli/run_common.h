/* run_common.h - option parsing and the run-one-request routine shared by `sdnpu run` and
 * `sdnpu demo`: load the model, build the prompt, generate with streaming output, report. */
#ifndef SDN_RUN_COMMON_H
#define SDN_RUN_COMMON_H

#include <stdint.h>
#include <stdio.h>

#include "engine/sampler.h"
#include "engine/session.h"

typedef struct sdn_run_opts {
    const char *model_path, *tokenizer_path, *prompt, *prompt_ids, *chat_template, *system, *stats_json;
    const char **contexts;
    int n_contexts;
    int max_tokens, threads, n_ctx, ignore_eos, quiet;
    sdn_sampling sampling;
    const char *label; /* printed in the stats line (demo) */
} sdn_run_opts;

typedef struct sdn_run_result {
    int32_t *tokens;
    int n_tokens;
    char *text;
    sdn_gen_stats stats;
} sdn_run_result;

void sdn_run_opts_init(sdn_run_opts *o);
void sdn_run_opts_free(sdn_run_opts *o);
/* Parse argv[*i] (and its value) if it is a run option: 1 consumed, 0 not a run option,
 * -1 bad value (message printed). */
int sdn_run_opts_parse(sdn_run_opts *o, int argc, char **argv, int *i);
/* Run the request; generated text streams to `out` (NULL: silent). Returns the exit code. */
int sdn_run_request(const sdn_run_opts *o, FILE *out, sdn_run_result *res);
void sdn_run_result_free(sdn_run_result *r);

#endif
