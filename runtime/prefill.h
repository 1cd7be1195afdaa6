/* prefill.h - the prompt into the KV cache: chunked forward passes after the entries the
 * context already holds, with whole blocks taken from the model's prefix cache where it has
 * them and the blocks it computes given to it (runtime/prefix_cache.h).
 *
 * Exact: a block from the cache holds the bytes prefilling would have written (the prefill
 * is chunk-invariant and a block's key chains every token before it and the settings that
 * change the bytes), and the top-k predictions of its positions are computed again from its
 * stored last-layer outputs for this request's candidate vocabulary, so the request sees
 * exactly what a fresh prefill gives it. */
#ifndef SDN_PREFILL_H
#define SDN_PREFILL_H

#include <stdint.h>

#include "common/sdn_err.h"
#include "engine/forward.h"
#include "runtime/prefix_cache.h"

typedef struct sdn_prefill_job {
    sdn_ctx *c;
    const int32_t *tokens; /* positions 0 .. n-1 go into the KV cache */
    int n;
    int from;  /* entries 0 .. from-1 are already there (the context's own reuse) */
    int chunk; /* rows per forward pass */
    /* > 0: each position's top-k predictions over vocab (n_vocab ids; NULL: all) into
     * tok / prob [n * topk] (positions below `from` are the caller's) */
    int topk;
    const int32_t *vocab;
    int n_vocab;
    int32_t *tok;
    float *prob;
    sdn_pcache *pc; /* NULL: no prefix cache */
    void (*on_progress)(void *ud, int done, int total);
    void *progress_ud;
    /* out */
    int n_mem, n_disk; /* positions imported from the cache's memory and disk tiers */
    double saved_s;    /* what computing those blocks cost when they were made, less the import */
} sdn_prefill_job;

/* Run the job. Errors: whatever the forward pass reports, SDN_ENOMEM. On error the KV cache
 * holds what was filled so far (the caller truncates it). */
int sdn_prefill(sdn_prefill_job *j, sdn_err *err);

/* The prefix cache's settings text for a context: what a block's bytes depend on, beyond its
 * tokens (the model file's fingerprint, the KV cache types, the kernel path, the block image
 * format). NULL when this context's prefill is not chunk-invariant (the `sgemm` prefill
 * matmul setting) and must not use the cache. */
const char *sdn_prefill_cache_settings(const sdn_ctx *c, char *buf, size_t cap);

#endif
