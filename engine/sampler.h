/* sampler.h - turning logits into the next token: greedy (argmax, lowest id on ties) or
 * sampling with temperature, top-k and top-p from a seeded generator.
 *
 * Sampling goes through an explicit distribution (sdn_dist: the tokens that survive
 * top-k/top-p with their renormalized probabilities), so speculative sampling can edit
 * the very distribution plain sampling draws from. */
#ifndef SDN_SAMPLER_H
#define SDN_SAMPLER_H

#include <stdint.h>

#include "common/sdn_err.h"
#include "common/sdn_util.h"

typedef struct sdn_sampling {
    float temp;   /* <= 0: greedy */
    int top_k;    /* <= 0: no limit */
    float top_p;  /* >= 1: no limit */
    uint64_t seed;
    float min_p;  /* > 0: drop tokens less probable than min_p times the most probable (after top-p) */
    float repeat_penalty; /* > 1: logits of tokens among the last repeat_last_n of the sequence are
                             divided by it when positive, multiplied when negative (greedy too);
                             0 or 1: off. Applied by the decode loop (sdn_repeat_penalty). */
    int repeat_last_n;    /* window of the penalty (0: 64) */
} sdn_sampling;

/* A sparse probability distribution over token ids, most probable first. */
typedef struct sdn_dist {
    int n, cap;
    int32_t *tok;
    float *p;
} sdn_dist;

/* Index of the largest logit (lowest index among equal maxima). */
int32_t sdn_argmax(const float *logits, int n_vocab);

/* Build the sampling distribution of `logits` under s (temp > 0): softmax(logits/temp),
 * keep the top_k most probable, then the smallest prefix whose mass reaches top_p, then those
 * at least min_p times as probable as the first, and renormalize. d's arrays grow as needed. */
int sdn_dist_from_logits(const sdn_sampling *s, const float *logits, int n_vocab, sdn_dist *d, sdn_err *err);
void sdn_dist_free(sdn_dist *d);
/* Probability of token t in d (0 if absent). */
float sdn_dist_prob(const sdn_dist *d, int32_t t);
/* Remove token t from d and renormalize; returns 0 if d still has mass, -1 if it is empty. */
int sdn_dist_remove(sdn_dist *d, int32_t t);
/* Draw a token from d with u uniform in [0,1). */
int32_t sdn_dist_sample(const sdn_dist *d, double u);

/* The repetition penalty (llama.cpp's rule, a fact of its sampler): each distinct token among
 * window[0..n) gets logit / penalty when its logit is positive, logit * penalty otherwise.
 * `seen` is n_vocab bytes of scratch, all zero on entry and on return. */
void sdn_repeat_penalty(float *logits, int n_vocab, const int32_t *window, int n, float penalty, uint8_t *seen);

/* Convenience for plain decoding: greedy when s->temp <= 0, else draw from the
 * distribution using rng. */
int32_t sdn_sample(const sdn_sampling *s, sdn_rng *rng, const float *logits, int n_vocab, sdn_dist *work);

#endif
