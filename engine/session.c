/* session.c - prefill and the decode loop (see session.h). */
#include "engine/session.h"

#include <stdlib.h>
#include <string.h>

#include "common/sdn_util.h"
#include "engine/model.h"

int sdn_generate(sdn_ctx *c, const int32_t *prompt, int n_prompt, const sdn_gen_params *p, int (*eog)(void *, int32_t),
                 void *ud_eog, sdn_token_cb cb, void *ud, int32_t **out, int *n_out, sdn_gen_stats *st, sdn_err *err) {
    sdn_gen_stats s = {0};
    if (out) *out = NULL;
    if (n_out) *n_out = 0;
    if (n_prompt < 1) return sdn_fail(err, SDN_EINVAL, "empty prompt");
    const sdn_model_config *cfg = sdn_model_cfg(sdn_ctx_model(c));
    int vocab = cfg->vocab, n_ctx = sdn_ctx_n_ctx(c);
    if (n_prompt >= n_ctx)
        return sdn_fail(err, SDN_EINVAL, "prompt of %d tokens does not fit the context of %d (raise --ctx)", n_prompt, n_ctx);
    int max_new = p->max_tokens;
    if (max_new > n_ctx - n_prompt) max_new = n_ctx - n_prompt;
    int chunk = p->prefill_chunk > 0 ? p->prefill_chunk : sdn_ctx_max_batch(c);
    if (chunk > sdn_ctx_max_batch(c)) chunk = sdn_ctx_max_batch(c);
    int32_t *gen = malloc(((size_t)max_new + 1) * sizeof(int32_t));
    float *logits = malloc((size_t)vocab * sizeof(float));
    sdn_dist dist = {0};
    sdn_rng rng;
    sdn_rng_seed(&rng, p->sampling.seed);
    int rc = SDN_OK;
    if (!gen || !logits) { rc = sdn_fail(err, SDN_ENOMEM, "out of memory"); goto done; }
    sdn_kv_truncate(c, 0);
    s.n_prompt = n_prompt;

    /* Prefill: every prompt token but the last; the last is the root of the first step. */
    double t0 = sdn_now();
    for (int i = 0; i < n_prompt - 1; i += chunk) {
        int n = n_prompt - 1 - i < chunk ? n_prompt - 1 - i : chunk;
        sdn_batch b = {.n = n, .tokens = prompt + i, .n_logits = 0};
        if ((rc = sdn_forward(c, &b, NULL, err))) goto done;
    }
    s.t_prefill = sdn_now() - t0;

    double td = sdn_now();
    int32_t root = prompt[n_prompt - 1];
    int n_gen = 0;
    while (n_gen < max_new) {
        int32_t row0 = 0;
        sdn_batch b = {.n = 1, .tokens = &root, .logit_rows = &row0, .n_logits = 1, .invariant = 1};
        if ((rc = sdn_forward(c, &b, logits, err))) goto done;
        s.steps++;
        int32_t next = sdn_sample(&p->sampling, &rng, logits, vocab, &dist);
        if (s.steps == 1) s.t_first_token = sdn_now() - t0;
        if (!p->ignore_eog && eog && eog(ud_eog, next)) break;
        gen[n_gen++] = next;
        root = next;
        if (cb && cb(ud, &next, 1)) break;
    }
    s.t_decode = sdn_now() - td;
    s.n_gen = n_gen;
    if (out) { *out = gen; gen = NULL; }
    if (n_out) *n_out = n_gen;
done:
    s.peak_rss = sdn_peak_rss();
    if (st) *st = s;
    free(gen);
    free(logits);
    sdn_dist_free(&dist);
    return rc;
}
