/* reduce_internal.h - what kernels/reduce.c and its SIMD variants (kernels/reduce_avx2.c,
 * compiled once per x86 variant) share: the one-element step of sdn_topk_after's loop, so every
 * path takes candidates by the same code, and the variants' entry points. Internal to kernels/. */
#ifndef SDN_REDUCE_INTERNAL_H
#define SDN_REDUCE_INTERNAL_H

#include <stdint.h>

#include "kernels/reduce.h"

/* The state of sdn_topk_after's loop (kernels/reduce.h). */
typedef struct sdn_topk_state {
    float *cv;
    int32_t *ci;
    int k, m;
    float thr, top_v;
    int32_t top_i;
} sdn_topk_state;

/* One iteration of the loop of kernels/reduce.h for element (v, t); elements must come in
 * increasing t. A SIMD caller may leave out an element only where this step would leave the
 * state unchanged. */
static inline void sdn_topk_push(sdn_topk_state *s, float v, int32_t t) {
    if (v < s->thr || v > s->top_v || (v == s->top_v && t <= s->top_i)) return;
    const int k = s->k;
    float *cv = s->cv;
    int32_t *ci = s->ci;
    if (s->m == k && !sdn_topk_before(v, t, cv[k - 1], ci[k - 1])) return;
    int j = s->m < k ? s->m++ : k - 1;
    while (j > 0 && sdn_topk_before(v, t, cv[j - 1], ci[j - 1])) {
        cv[j] = cv[j - 1];
        ci[j] = ci[j - 1];
        j--;
    }
    cv[j] = v;
    ci[j] = t;
    if (s->m == k) s->thr = cv[k - 1];
}

/* The SIMD variants (reduce_avx2.c; SDN_KFN of kernels/matmul_internal.h names them): the same
 * contracts as sdn_argmax_f32 (for n >= 2 and x[0] not NaN) and sdn_topk_after (for k >= 1). */
#define SDN_REDUCE_KDECL(v)                                                                                            \
    int32_t sdn_argmax_f32_##v(const float *x, int n);                                                                 \
    void sdn_topk_scan_##v(const float *x, int n, sdn_topk_state *s);
SDN_REDUCE_KDECL(avx2)
SDN_REDUCE_KDECL(avx2vnni)
SDN_REDUCE_KDECL(avx512)

#endif
