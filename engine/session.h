/* session.h - one generation request on an inference context: chunked prefill of the
 * prompt, then the decode loop until an end-of-generation token or the token limit, with
 * tokens streamed to a callback as they are committed, and per-run statistics.
 *
 * Decode steps always run the batch-invariant kernels with the newest committed token as
 * row 0 (its KV entry is computed in the step), so plain decoding is the special case of
 * speculative decoding with an empty draft. */
#ifndef SDN_SESSION_H
#define SDN_SESSION_H

#include <stdint.h>

#include "common/sdn_err.h"
#include "engine/forward.h"
#include "engine/sampler.h"

typedef struct sdn_gen_params {
    int max_tokens;        /* new tokens to generate at most */
    sdn_sampling sampling; /* temp <= 0: greedy */
    int prefill_chunk;     /* prompt tokens per prefill forward (0: the context's max batch) */
    int ignore_eog;        /* keep generating past end-of-generation tokens */
} sdn_gen_params;

typedef struct sdn_gen_stats {
    int n_prompt, n_gen;
    int steps;             /* decode forward passes */
    double t_prefill, t_decode; /* seconds */
    double t_first_token;  /* prefill + first decode step */
    size_t peak_rss;       /* bytes, process high-water mark */
} sdn_gen_stats;

/* Called with newly committed tokens; return nonzero to stop generation. */
typedef int (*sdn_token_cb)(void *ud, const int32_t *tokens, int n);

/* Generate after `prompt` (n_prompt >= 1 tokens) on a context whose KV cache is reset.
 * The generated tokens (without any end-of-generation token) are returned in *out
 * (malloc'd) when out is not NULL. eog(ud_eog, tok) says whether a token ends generation
 * (NULL: never). */
int sdn_generate(sdn_ctx *c, const int32_t *prompt, int n_prompt, const sdn_gen_params *p, int (*eog)(void *, int32_t),
                 void *ud_eog, sdn_token_cb cb, void *ud, int32_t **out, int *n_out, sdn_gen_stats *st, sdn_err *err);

#endif
