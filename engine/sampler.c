/* sampler.c - greedy and temperature/top-k/top-p sampling (see sampler.h).
 *
 * The distribution is built by selecting candidates above a threshold: with top_k set, a
 * partial selection keeps the k largest logits; without it, every token whose probability
 * could matter (logit > max - temp*40, i.e. relative probability > e^-40) is kept, which
 * avoids sorting 150k-entry vocabularies at every step while losing < 1e-13 of the mass. */
#include "engine/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/reduce.h"

/* the first largest logit, NaNs never chosen unless logits[0] is one (kernels/reduce.h: the SIMD
 * scan returns exactly the scalar loop's answer) */
int32_t sdn_argmax(const float *logits, int n_vocab) { return sdn_argmax_f32(logits, n_vocab); }

void sdn_dist_free(sdn_dist *d) {
    free(d->tok);
    free(d->p);
    memset(d, 0, sizeof *d);
}

static int dist_reserve(sdn_dist *d, int n) {
    if (d->cap >= n) return 0;
    int32_t *t = realloc(d->tok, (size_t)n * sizeof *t);
    if (!t) return -1;
    d->tok = t;
    float *p = realloc(d->p, (size_t)n * sizeof *p);
    if (!p) return -1;
    d->p = p;
    d->cap = n;
    return 0;
}

static int cmp_desc(const void *a, const void *b, void *ctx) {
    const float *lg = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (lg[x] > lg[y]) return -1;
    if (lg[x] < lg[y]) return 1;
    return x < y ? -1 : x > y;
}

int sdn_dist_from_logits(const sdn_sampling *s, const float *logits, int n_vocab, sdn_dist *d, sdn_err *err) {
    if (!(s->temp > 0)) return sdn_fail(err, SDN_EINVAL, "sampling distribution needs temperature > 0");
    float mx = logits[sdn_argmax(logits, n_vocab)];
    float cut = mx - s->temp * 40.0f;
    int n = 0;
    for (int i = 0; i < n_vocab; i++) n += logits[i] >= cut;
    if (dist_reserve(d, n)) return sdn_fail(err, SDN_ENOMEM, "out of memory (sampling)");
    n = 0;
    for (int i = 0; i < n_vocab; i++)
        if (logits[i] >= cut) d->tok[n++] = i;
    qsort_r(d->tok, (size_t)n, sizeof(int32_t), cmp_desc, (void *)logits);
    if (s->top_k > 0 && n > s->top_k) n = s->top_k;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        double e = exp((double)(logits[d->tok[i]] - mx) / s->temp);
        d->p[i] = (float)e;
        sum += e;
    }
    if (s->top_p < 1.0f) {
        double acc = 0;
        int keep = n;
        for (int i = 0; i < n; i++) {
            acc += d->p[i] / sum;
            if (acc >= s->top_p) { keep = i + 1; break; }
        }
        n = keep;
        sum = 0;
        for (int i = 0; i < n; i++) sum += d->p[i];
    }
    if (s->min_p > 0) { /* p[0] is exp(0) = 1: the most probable token's weight */
        int keep = 1;
        while (keep < n && d->p[keep] >= s->min_p) keep++;
        n = keep;
        sum = 0;
        for (int i = 0; i < n; i++) sum += d->p[i];
    }
    for (int i = 0; i < n; i++) d->p[i] = (float)(d->p[i] / sum);
    d->n = n;
    return SDN_OK;
}

float sdn_dist_prob(const sdn_dist *d, int32_t t) {
    for (int i = 0; i < d->n; i++)
        if (d->tok[i] == t) return d->p[i];
    return 0.0f;
}

int sdn_dist_remove(sdn_dist *d, int32_t t) {
    int w = 0;
    double sum = 0;
    for (int i = 0; i < d->n; i++) {
        if (d->tok[i] == t) continue;
        d->tok[w] = d->tok[i];
        d->p[w] = d->p[i];
        sum += d->p[w];
        w++;
    }
    d->n = w;
    if (w == 0 || !(sum > 0)) { d->n = 0; return -1; }
    for (int i = 0; i < w; i++) d->p[i] = (float)(d->p[i] / sum);
    return 0;
}

int32_t sdn_dist_sample(const sdn_dist *d, double u) {
    double acc = 0;
    for (int i = 0; i < d->n; i++) {
        acc += d->p[i];
        if (u < acc) return d->tok[i];
    }
    return d->n ? d->tok[d->n - 1] : -1;
}

int32_t sdn_sample(const sdn_sampling *s, sdn_rng *rng, const float *logits, int n_vocab, sdn_dist *work) {
    if (!(s->temp > 0)) return sdn_argmax(logits, n_vocab);
    if (sdn_dist_from_logits(s, logits, n_vocab, work, NULL)) return sdn_argmax(logits, n_vocab);
    return sdn_dist_sample(work, sdn_rng_double(rng));
}

void sdn_repeat_penalty(float *logits, int n_vocab, const int32_t *window, int n, float penalty, uint8_t *seen) {
    for (int i = 0; i < n; i++) {
        int32_t t = window[i];
        if (t < 0 || t >= n_vocab || seen[t]) continue;
        seen[t] = 1;
        logits[t] = logits[t] > 0 ? logits[t] / penalty : logits[t] * penalty;
    }
    for (int i = 0; i < n; i++)
        if (window[i] >= 0 && window[i] < n_vocab) seen[window[i]] = 0;
}
