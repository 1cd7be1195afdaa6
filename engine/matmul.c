/* matmul.c - entry points of the small-batch kernels (engine/matmul.h): picks the SIMD
 * kernels when the build targets AVX2+FMA+F16C, the portable ones (matmul_portable.c)
 * otherwise. The choice is made at compile time, so one binary always runs one kernel
 * family and a row's bits never depend on a run-time decision.
 *
 * Kernel families and their files:
 *   F32, F16, BF16 weights, F32 activations           matmul_float_avx2.c
 *   Q8_0, Q4_0, Q5_0, Q4_1, Q5_1 x Q8_0/Q8_1-style     matmul_q32_avx2.c
 *   Q4_K, Q5_K, Q6_K x Q8_K-style                      matmul_k_avx2.c
 *   activation preparation                             matmul_act_avx2.c
 * Layouts of the prepared activations: matmul_internal.h. */
#include "engine/matmul.h"

#include "engine/matmul_internal.h"
#include "engine/matmul_ref.h"

size_t sdn_act_bytes(uint32_t wtype, int64_t in, int n) {
    size_t stride = sdn_act_row_stride(wtype, in);
    return n > 0 ? stride * (size_t)n : 0;
}

void sdn_act_prepare(uint32_t wtype, const float *X, int64_t ldx, int n, int64_t in, void *act) {
#ifdef SDN_MATMUL_AVX2
    sdn_act_prepare_avx2(wtype, X, ldx, n, in, act);
#else
    sdn_act_prepare_portable(wtype, X, ldx, n, in, act);
#endif
}

void sdn_matmul_rows(uint32_t wtype, const void *W, size_t row_bytes, int64_t in, const void *act, int n, float *Y,
                     int64_t ldy, int64_t o0, int64_t o1) {
#ifdef SDN_MATMUL_AVX2
    if (!sdn_act_row_stride(wtype, in) || n <= 0 || o1 <= o0) return;
    switch (sdn_act_family(wtype)) {
    case SDN_ACT_F32: sdn_matmul_float_avx2(wtype, W, row_bytes, in, act, n, Y, ldy, o0, o1); break;
    case SDN_ACT_Q32: sdn_matmul_q32_avx2(wtype, W, row_bytes, in, act, n, Y, ldy, o0, o1); break;
    case SDN_ACT_QK: sdn_matmul_k_avx2(wtype, W, row_bytes, in, act, n, Y, ldy, o0, o1); break;
    default: break;
    }
#else
    sdn_matmul_rows_portable(wtype, W, row_bytes, in, act, n, Y, ldy, o0, o1);
#endif
}

const char *sdn_matmul_isa(void) {
#ifdef SDN_MATMUL_AVX2
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
    return "avx2+fma+vnni";
#else
    return "avx2+fma";
#endif
#else
    return "portable";
#endif
}
