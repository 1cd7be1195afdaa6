/* matmul.c - entry points of the small-batch kernels (kernels/matmul.h): dispatch to the kernel
 * path chosen at run time (kernels/kernel_path.h).
 *
 * Kernel families and their files (the *_avx2.c sources are compiled once per SIMD variant,
 * avx2 / avx2vnni / avx512, with that variant's target flags; matmul_internal.h):
 *   F32, F16, BF16 weights, F32 activations           matmul_float_avx2.c
 *   Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (the portable bits)   matmul_cols_avx2.c
 *   Q4_K, Q5_K, Q6_K (the portable bits)               matmul_kcols_avx2.c
 *   activation preparation                             matmul_act_avx2.c
 *   any type, plain C                                  matmul_portable.c
 *   the packed layout of all eight quantized types     matmul_pack.c (its kernels: the
 *                                                      column files above, *_packed)
 * (matmul_q32_avx2.c and matmul_k_avx2.c, the row-parallel kernels the 5-bit types ran
 * before, are the fallback of sdn_matmul_rows for a type the column kernels do not take.)
 * On AArch64 the paths neon, dotprod and i8mm run kernels/matmul_arm.c (compiled once per path)
 * for the activation preparation and Q8_0, Q4_0, Q4_1, Q4_K, Q6_K, and the portable kernels
 * for the other types.
 * Layouts of the prepared activations: matmul_internal.h. */
#include "kernels/matmul.h"

#include <pthread.h>

#include "kernels/kernel_path.h"
#include "kernels/matmul_internal.h"
#include "kernels/matmul_ref.h"

float sdn_f16_table[65536];

static pthread_once_t g_setup_once = PTHREAD_ONCE_INIT;
#if defined(__x86_64__)
static void setup_once(void) { sdn_f16_table_fill_avx2(); }
#else
static void setup_once(void) { /* no SIMD kernel reads the table on other architectures */ }
#endif
void sdn_kernels_setup(void) { pthread_once(&g_setup_once, setup_once); }

typedef void (*prep_fn)(uint32_t, const float *, int64_t, int, int64_t, void *);
typedef void (*mm_fn)(uint32_t, const void *, size_t, int64_t, const void *, int, float *, int64_t, int64_t, int64_t);

typedef int (*cols_fn)(uint32_t, const void *, size_t, int64_t, const void *, int, float *, int64_t, int64_t, int64_t,
                       int);
typedef int (*colspk_fn)(uint32_t, const void *, int64_t, const void *, int, float *, int64_t, int64_t, int64_t, int);
typedef int (*kcolspk_fn)(uint32_t, const void *, int64_t, const void *, int, float *, int64_t, int64_t, int64_t, int);
typedef int (*kcols_fn)(uint32_t, const void *, size_t, int64_t, const void *, int, float *, int64_t, int64_t, int64_t);

typedef struct kvariant {
    prep_fn prep;
    mm_fn fl, q32, k;
    cols_fn cols;
    colspk_fn colspk;
    kcols_fn kcols;
    kcolspk_fn kcolspk;
} kvariant;

#define KV(v) {sdn_act_prepare_##v, sdn_matmul_float_##v, sdn_matmul_q32_##v, sdn_matmul_k_##v, sdn_matmul_cols_##v,        \
              sdn_matmul_cols_packed_##v, sdn_matmul_kcols_##v, sdn_matmul_kcols_packed_##v}
#if defined(__x86_64__) /* the x86 kernels are built on x86-64 only (CMakeLists.txt) */
static const kvariant kv_avx2 = KV(avx2), kv_avx2vnni = KV(avx2vnni), kv_avx512 = KV(avx512);
#endif

/* The SIMD variant of the path in use (NULL: portable). */
static const kvariant *variant(void) {
#if defined(__x86_64__)
    switch (sdn_kpath_get()) {
    case SDN_KPATH_AVX2: return sdn_kpath_avxvnni() ? &kv_avx2vnni : &kv_avx2;
    case SDN_KPATH_AVX512:
    case SDN_KPATH_AMX: return &kv_avx512;
    default: return NULL;
    }
#else
    return NULL;
#endif
}

#if defined(__aarch64__) /* the AArch64 kernels are built on AArch64 only (CMakeLists.txt) */
typedef int (*arm_fn)(uint32_t, const void *, size_t, int64_t, const void *, int, float *, int64_t, int64_t, int64_t);
typedef int (*armpk_fn)(uint32_t, const void *, int64_t, const void *, int, float *, int64_t, int64_t, int64_t);
typedef struct armvariant {
    prep_fn prep;
    arm_fn rows;
    armpk_fn packed;
} armvariant;
#define AV(v) {sdn_act_prepare_##v, sdn_matmul_arm_##v, sdn_matmul_arm_packed_##v}
static const armvariant av_neon = AV(neon), av_dotprod = AV(dotprod), av_i8mm = AV(i8mm);

/* The AArch64 variant of the path in use (NULL: portable). */
static const armvariant *arm_variant(void) {
    switch (sdn_kpath_get()) {
    case SDN_KPATH_NEON: return &av_neon;
    case SDN_KPATH_DOTPROD: return &av_dotprod;
    case SDN_KPATH_I8MM: return &av_i8mm;
    default: return NULL;
    }
}
#endif

size_t sdn_act_bytes(uint32_t wtype, int64_t in, int n) {
    size_t stride = sdn_act_row_stride(wtype, in);
    return n > 0 ? stride * (size_t)n : 0;
}

void sdn_act_prepare(uint32_t wtype, const float *X, int64_t ldx, int n, int64_t in, void *act) {
#if defined(__aarch64__)
    const armvariant *a = arm_variant();
    if (a) {
        a->prep(wtype, X, ldx, n, in, act);
        return;
    }
#endif
    const kvariant *v = variant();
    if (v) v->prep(wtype, X, ldx, n, in, act);
    else sdn_act_prepare_portable(wtype, X, ldx, n, in, act);
}

void sdn_matmul_rows(uint32_t wtype, const void *W, size_t row_bytes, int64_t in, const void *act, int n, float *Y,
                     int64_t ldy, int64_t o0, int64_t o1) {
#if defined(__aarch64__)
    const armvariant *a = arm_variant();
    if (a && a->rows(wtype, W, row_bytes, in, act, n, Y, ldy, o0, o1)) return;
#endif
    const kvariant *v = variant();
    if (!v) {
        sdn_matmul_rows_portable(wtype, W, row_bytes, in, act, n, Y, ldy, o0, o1);
        return;
    }
    if (!sdn_act_row_stride(wtype, in) || n <= 0 || o1 <= o0) return;
    switch (sdn_act_family(wtype)) {
    case SDN_ACT_F32: v->fl(wtype, W, row_bytes, in, act, n, Y, ldy, o0, o1); break;
    case SDN_ACT_Q32:
        if (!v->cols(wtype, W, row_bytes, in, act, n, Y, ldy, o0, o1,
                     n >= SDN_AMX_MIN_ROWS && sdn_kpath_get() == SDN_KPATH_AMX))
            v->q32(wtype, W, row_bytes, in, act, n, Y, ldy, o0, o1);
        break;
    case SDN_ACT_QK:
        if (!v->kcols(wtype, W, row_bytes, in, act, n, Y, ldy, o0, o1)) v->k(wtype, W, row_bytes, in, act, n, Y, ldy, o0, o1);
        break;
    default: break;
    }
}

void sdn_matmul_rows_packed(uint32_t wtype, const void *P, int64_t in, const void *act, int n, float *Y, int64_t ldy,
                            int64_t o0, int64_t o1) {
#if defined(__aarch64__)
    const armvariant *a = arm_variant();
    if (a) {
        if (!sdn_act_row_stride(wtype, in) || n <= 0 || o1 <= o0) return;
        /* columns before the first group boundary take the portable kernel, as below */
        int64_t oa = (o0 + SDN_PACK_COLS - 1) / SDN_PACK_COLS * SDN_PACK_COLS;
        if (oa > o1) oa = o1;
        if (oa > o0) sdn_matmul_rows_packed_portable(wtype, P, in, act, n, Y, ldy, o0, oa);
        if (oa < o1 && !a->packed(wtype, P, in, act, n, Y, ldy, oa, o1))
            sdn_matmul_rows_packed_portable(wtype, P, in, act, n, Y, ldy, oa, o1);
        return;
    }
#endif
    const kvariant *v = variant();
    if (!sdn_act_row_stride(wtype, in) || n <= 0 || o1 <= o0) return;
    /* the SIMD kernels start at a column group; columns before the first boundary (callers
     * that split ranges at multiples of SDN_PACK_COLS have none) take the portable kernel */
    int64_t oa = v ? (o0 + SDN_PACK_COLS - 1) / SDN_PACK_COLS * SDN_PACK_COLS : o1;
    if (oa > o1) oa = o1;
    if (oa > o0) sdn_matmul_rows_packed_portable(wtype, P, in, act, n, Y, ldy, o0, oa);
    const int amx = n >= SDN_AMX_MIN_ROWS && sdn_kpath_get() == SDN_KPATH_AMX;
    if (oa < o1 && !v->colspk(wtype, P, in, act, n, Y, ldy, oa, o1, amx) && !v->kcolspk(wtype, P, in, act, n, Y, ldy, oa, o1, amx))
        sdn_matmul_rows_packed_portable(wtype, P, in, act, n, Y, ldy, oa, o1);
}

const char *sdn_matmul_isa(void) { return sdn_kpath_describe(); }
