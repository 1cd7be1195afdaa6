/* reduce.h - reductions over one row of logits: the greedy argmax and the candidates that
 * follow a known argmax in logit order. Speculative verification takes the argmax of every
 * verified row (verify/verify.c, runtime/decode.c) and the grammar's constrained argmax
 * (grammar/vocab.c, sdn_gstate_argmax) both, so they run once per row over the whole
 * vocabulary (49,152 floats for SmolLM2).
 *
 * Both functions are exact: on every kernel path (kernels/kernel_path.h) they return what the
 * scalar loops written in the comments below return, for any input, NaN, infinities and
 * signed zeros included (tested in tests/test_reduce.c). The SIMD versions (reduce_avx2.c) only
 * find the same answer faster. Pointers need no alignment. */
#ifndef SDN_REDUCE_H
#define SDN_REDUCE_H

#include <stdint.h>

/* Index of the first largest element of x[0..n-1], by exactly this loop:
 *
 *     best = 0; bv = x[0];
 *     for (i = 1; i < n; i++) if (x[i] > bv) { bv = x[i]; best = i; }
 *
 * So: 0 if x[0] is NaN; otherwise NaNs are never chosen and the answer is the first index
 * whose value equals (==, so -0 equals +0) the largest non-NaN value. n >= 1; n <= 1 returns 0
 * (without reading x for n <= 0). */
int32_t sdn_argmax_f32(const float *x, int n);

/* "a comes before b" in candidate order: larger value first, lower index among equal values. */
static inline int sdn_topk_before(float a, int32_t ia, float b, int32_t ib) { return a > b || (a == b && ia < ib); }

/* The k candidates that follow (top_v, top_i) in candidate order, as this loop finds them
 * (the top-k scan of sdn_gstate_argmax, which passes the argmax as top_v, top_i):
 *
 *     m = 0; thr = -INFINITY;
 *     for (t = 0; t < n; t++) {
 *         float v = x[t];
 *         if (v < thr || v > top_v || (v == top_v && t <= top_i)) continue;
 *         if (m == k && !sdn_topk_before(v, t, cv[k-1], ci[k-1])) continue;
 *         insert (v, t) into cv/ci sorted by sdn_topk_before (the last one drops off when full);
 *         m = min(m + 1, k);
 *         if (m == k) thr = cv[k-1];
 *     }
 *
 * Writes cv[0..m-1] (values) and ci[0..m-1] (indices) and returns m (<= k; m < k means every
 * element after (top_v, top_i) was taken). A NaN element is taken while the arrays are not full
 * and then keeps its place (later candidates go after it, never before): the loop's own
 * behaviour, kept bit for bit. Meant for small k (insertion is O(k)); k >= 1 (k < 1 returns 0), n >= 0. */
int sdn_topk_after(const float *x, int n, float top_v, int32_t top_i, int k, float *cv, int32_t *ci);

#endif
