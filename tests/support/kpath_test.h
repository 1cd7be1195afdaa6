/* kpath_test.h - run a CMocka test once per kernel path (kernels/kernel_path.h).
 *
 * KPATH_TESTS(fn) expands to four CMUnitTest entries, one per path of the build's architecture:
 * "fn[PORTABLE]", "fn[AVX2]", "fn[AVX512]", "fn[AMX]" on x86-64, "fn[PORTABLE]", "fn[NEON]",
 * "fn[DOTPROD]", "fn[I8MM]" on AArch64 (PORTABLE alone elsewhere); each first calls
 * kpath_use(state), which forces its path, or prints why this machine lacks it and reports the
 * test SKIPPED (never a silent pass). */
#ifndef SDN_KPATH_TEST_H
#define SDN_KPATH_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "kernels/kernel_path.h"

static sdn_kpath kpath_ids[SDN_KPATH_COUNT] = {SDN_KPATH_PORTABLE, SDN_KPATH_AVX2,    SDN_KPATH_AVX512, SDN_KPATH_AMX,
                                               SDN_KPATH_NEON,     SDN_KPATH_DOTPROD, SDN_KPATH_I8MM};

/* Force the path this test entry was registered for, or skip it with the reason. */
static inline void kpath_use(void **state) {
    const sdn_kpath p = *(const sdn_kpath *)*state;
    sdn_err e = {0};
    if (sdn_kpath_set(p, &e)) {
        print_message("SKIPPED on path %s: %s\n", sdn_kpath_name(p), e.msg);
        skip();
    }
}

#define KPATH_TEST1(fn, i) {#fn "[" #i "]", fn, NULL, NULL, &kpath_ids[SDN_KPATH_##i]}
#if defined(__aarch64__)
#define KPATH_TESTS(fn) KPATH_TEST1(fn, PORTABLE), KPATH_TEST1(fn, NEON), KPATH_TEST1(fn, DOTPROD), KPATH_TEST1(fn, I8MM)
#elif defined(__x86_64__)
#define KPATH_TESTS(fn) KPATH_TEST1(fn, PORTABLE), KPATH_TEST1(fn, AVX2), KPATH_TEST1(fn, AVX512), KPATH_TEST1(fn, AMX)
#else
#define KPATH_TESTS(fn) KPATH_TEST1(fn, PORTABLE)
#endif

#endif
