/* reduce.c - the row reductions of kernels/reduce.h: the portable C loops (every path's
 * reference, and the code of the portable and AArch64 paths) and the run-time choice of a SIMD
 * variant (kernels/reduce_avx2.c) on x86-64, by the kernel path in use (kernels/kernel_path.h). */
#include "kernels/reduce.h"

#include <math.h>

#include "kernels/kernel_path.h"
#include "kernels/reduce_internal.h"

static int32_t argmax_c(const float *x, int n) {
    int32_t best = 0;
    float bv = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > bv) {
            bv = x[i];
            best = i;
        }
    return best;
}

static void topk_scan_c(const float *x, int n, sdn_topk_state *s) {
    for (int t = 0; t < n; t++) sdn_topk_push(s, x[t], t);
}

int32_t sdn_argmax_f32(const float *x, int n) {
    if (n <= 1 || isnan(x[0])) return 0; /* x[0] NaN: nothing is > NaN */
#if defined(__x86_64__) /* the x86 kernels are built on x86-64 only (CMakeLists.txt) */
    switch (sdn_kpath_get()) {
    case SDN_KPATH_AVX2: return sdn_argmax_f32_avx2(x, n);
    case SDN_KPATH_AVX512:
    case SDN_KPATH_AMX: return sdn_argmax_f32_avx512(x, n);
    default: break;
    }
#endif
    return argmax_c(x, n);
}

int sdn_topk_after(const float *x, int n, float top_v, int32_t top_i, int k, float *cv, int32_t *ci) {
    if (k < 1 || n <= 0) return 0;
    sdn_topk_state s = {.cv = cv, .ci = ci, .k = k, .m = 0, .thr = -INFINITY, .top_v = top_v, .top_i = top_i};
#if defined(__x86_64__)
    switch (sdn_kpath_get()) {
    case SDN_KPATH_AVX2: sdn_topk_scan_avx2(x, n, &s); return s.m;
    case SDN_KPATH_AVX512:
    case SDN_KPATH_AMX: sdn_topk_scan_avx512(x, n, &s); return s.m;
    default: break;
    }
#endif
    topk_scan_c(x, n, &s);
    return s.m;
}
