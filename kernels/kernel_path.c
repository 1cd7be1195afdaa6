/* kernel_path.c - run-time choice of the kernel path (kernels/kernel_path.h).
 *
 * CPU features come from cpuid (leaf 1 and leaf 7), and the operating system's support of
 * the register state from xgetbv (XCR0): ymm state for AVX2, opmask + zmm state for AVX-512,
 * tile config + tile data for AMX. On Linux, AMX tile data must also be requested per
 * process with arch_prctl(ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18) (Linux's
 * Documentation/arch/x86/xstate.rst) before the first tile instruction; that request is made
 * once, the first time the amx path is asked about.
 *
 * On AArch64 (Linux and Android) the features come from the kernel's hardware-capability words:
 * getauxval(AT_HWCAP) bit HWCAP_ASIMD (Advanced SIMD) and HWCAP_ASIMDDP (SDOT/UDOT), and
 * getauxval(AT_HWCAP2) bit HWCAP2_I8MM (SMMLA/UMMLA/USMMLA); user space cannot read the ID
 * registers itself without the kernel's emulation, and the auxiliary vector is what both
 * glibc and Bionic provide. */
#include "common/sdn_log.h"
#include "kernels/kernel_path.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__aarch64__) && defined(__linux__) /* Android included */
#include <sys/auxv.h>
/* the bits of the AArch64 HWCAP words (Linux's arch/arm64/include/uapi/asm/hwcap.h), for
 * C libraries whose headers predate them */
#ifndef AT_HWCAP2 /* (linux/auxvec.h) */
#define AT_HWCAP2 26
#endif
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1UL << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1UL << 13)
#endif
#endif

#include "kernels/matmul_internal.h"

typedef struct cpu_caps {
    int avx2, fma, f16c, avxvnni, avx512f, avx512bw, avx512vl, avx512vnni, avx512bf16, amx_tile, amx_int8, amx_bf16;
    int os_ymm, os_zmm, os_tile;
    int asimd, asimddp, i8mm; /* AArch64 */
} cpu_caps;

static cpu_caps g_caps;
static int g_amx_perm = -1; /* -1 not asked, 0 refused, 1 granted */
static pthread_once_t g_caps_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static volatile int g_path = -1;

#if defined(__x86_64__) || defined(__i386__)
static unsigned long long xgetbv0(void) {
    unsigned int lo, hi;
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0)); /* xgetbv */
    return (unsigned long long)hi << 32 | lo;
}
#endif

static void detect(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    cpu_caps *k = &g_caps;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    const int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
    k->fma = (c >> 12) & 1;
    k->f16c = (c >> 29) & 1;
    if (osxsave && avx) {
        const unsigned long long x = xgetbv0();
        k->os_ymm = (x & 6) == 6;
        k->os_zmm = k->os_ymm && (x & 0xE0) == 0xE0;
        k->os_tile = (x & 0x60000) == 0x60000;
    }
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        k->avx2 = (b >> 5) & 1;
        k->avx512f = (b >> 16) & 1;
        k->avx512bw = (b >> 30) & 1;
        k->avx512vl = (b >> 31) & 1;
        k->avx512vnni = (c >> 11) & 1;
        k->amx_tile = (d >> 24) & 1;
        k->amx_int8 = (d >> 25) & 1;
        k->amx_bf16 = (d >> 22) & 1;
        if (a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) {
            k->avxvnni = (a >> 4) & 1;
            k->avx512bf16 = (a >> 5) & 1;
        }
    }
#elif defined(__aarch64__)
    cpu_caps *k = &g_caps;
#if defined(__linux__)
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    k->asimd = (hw & HWCAP_ASIMD) != 0;
    k->asimddp = (hw & HWCAP_ASIMDDP) != 0;
    k->i8mm = (hw2 & HWCAP2_I8MM) != 0;
#else
    k->asimd = 1; /* Advanced SIMD is part of every AArch64 CPU; the others are not asked here */
#endif
#endif
}

static const cpu_caps *caps(void) {
    pthread_once(&g_caps_once, detect);
    return &g_caps;
}

static int amx_permission(void) {
    pthread_mutex_lock(&g_mu);
    if (g_amx_perm < 0) {
#if defined(__linux__) && defined(SYS_arch_prctl)
        g_amx_perm = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
#else
        g_amx_perm = 0;
#endif
    }
    const int ok = g_amx_perm;
    pthread_mutex_unlock(&g_mu);
    return ok;
}

static const char *const names[SDN_KPATH_COUNT] = {"portable", "avx2", "avx512", "amx", "neon", "dotprod", "i8mm"};

const char *sdn_kpath_name(sdn_kpath p) { return (unsigned)p < SDN_KPATH_COUNT ? names[p] : "?"; }

int sdn_kpath_parse(const char *s, sdn_kpath *out, sdn_err *err) {
    for (int p = 0; p < SDN_KPATH_COUNT; p++)
        if (s && strcmp(s, names[p]) == 0) {
            *out = (sdn_kpath)p;
            return SDN_OK;
        }
    return sdn_fail(err, SDN_EINVAL, "unknown kernel path '%s' (expected portable, avx2, avx512, amx, neon, dotprod or i8mm)", s ? s : "");
}

/* What path p needs that this machine lacks ("" if nothing). */
static const char *missing(sdn_kpath p) {
    const cpu_caps *k = caps();
    if (p == SDN_KPATH_PORTABLE) return "";
    if (p >= SDN_KPATH_NEON) {
#if defined(__aarch64__)
        if (!k->asimd) return "Advanced SIMD (HWCAP_ASIMD)";
        if (p == SDN_KPATH_NEON) return "";
        if (!k->asimddp) return "the dot-product instructions (FEAT_DotProd, HWCAP_ASIMDDP)";
        if (p == SDN_KPATH_DOTPROD) return "";
        if (!k->i8mm) return "the int8 matrix multiply (FEAT_I8MM, HWCAP2_I8MM)";
        return "";
#else
        return "AArch64 (this build is not for an AArch64 CPU)";
#endif
    }
#if !defined(__x86_64__)
    return "x86-64 (this build is not for an x86-64 CPU)";
#endif
    if (!k->avx2 || !k->fma || !k->f16c) return "AVX2/FMA/F16C";
    if (!k->os_ymm) return "operating-system support of the ymm register state";
    if (p == SDN_KPATH_AVX2) return "";
    if (!k->avx512f || !k->avx512bw || !k->avx512vl || !k->avx512vnni) return "AVX-512 F/BW/VL/VNNI";
    if (!k->os_zmm) return "operating-system support of the zmm register state";
    if (p == SDN_KPATH_AVX512) return "";
    if (!k->amx_tile || !k->amx_int8) return "AMX-TILE/AMX-INT8";
    if (!k->os_tile) return "operating-system support of the AMX tile state";
    if (!amx_permission()) return "the Linux permission for AMX tile data (arch_prctl ARCH_REQ_XCOMP_PERM)";
    return "";
}

/* 1 if this CPU and OS support path p (for amx: also that the kernel granted tile data). */
static int sdn_kpath_supported(sdn_kpath p) { return (unsigned)p < SDN_KPATH_COUNT && missing(p)[0] == 0; }

/* The best supported path. */
static sdn_kpath sdn_kpath_best(void) {
    for (int p = SDN_KPATH_COUNT - 1; p > 0; p--)
        if (sdn_kpath_supported((sdn_kpath)p)) return (sdn_kpath)p;
    return SDN_KPATH_PORTABLE;
}

/* Kernel-side setup of a SIMD path (tables its kernels read), before the path is published. */
static void activate(sdn_kpath p) {
    if (p != SDN_KPATH_PORTABLE) sdn_kernels_setup();
}

int sdn_kpath_set(sdn_kpath p, sdn_err *err) {
    if ((unsigned)p >= SDN_KPATH_COUNT) return sdn_fail(err, SDN_EINVAL, "kernel path %d out of range", (int)p);
    const char *m = missing(p);
    if (m[0]) return sdn_fail(err, SDN_EUNSUP, "kernel path '%s' is not available on this CPU: it lacks %s", names[p], m);
    activate(p);
    g_path = (int)p;
    return SDN_OK;
}

int sdn_kpath_init(sdn_err *err) {
    if (g_path >= 0) return SDN_OK;
    return sdn_kpath_set(sdn_kpath_best(), err);
}

int sdn_kpath_set_name(const char *name, sdn_err *err) {
    if (!name || !*name || !strcmp(name, "auto")) return sdn_kpath_set(sdn_kpath_best(), err);
    sdn_kpath p = SDN_KPATH_PORTABLE;
    int rc = sdn_kpath_parse(name, &p, err);
    return rc ? rc : sdn_kpath_set(p, err);
}

sdn_kpath sdn_kpath_get(void) {
    const int p = g_path;
    if (p >= 0) return (sdn_kpath)p;
    sdn_err err = {0};
    if (sdn_kpath_init(&err)) { /* the best path is one the CPU has, so this cannot fail; should it, the portable path runs anywhere */
        sdn_log(SDN_LOG_ERROR, "%s: the portable path is used", err.msg);
        g_path = SDN_KPATH_PORTABLE;
    }
    return (sdn_kpath)g_path;
}

const char *sdn_kpath_describe(void) {
    switch (sdn_kpath_get()) {
    case SDN_KPATH_AVX2: return caps()->avxvnni ? "avx2 (avx2+fma+f16c+avx-vnni)" : "avx2 (avx2+fma+f16c)";
    case SDN_KPATH_AVX512: return "avx512 (avx512f+bw+vl+vnni)";
    case SDN_KPATH_AMX:
        return sdn_kpath_amxbf16() ? "amx (amx-int8 tiles from 32 rows, avx512 below; bf16 keys on amx-bf16 tiles)"
                                   : "amx (amx-int8 tiles from 32 rows, avx512 below)";
    case SDN_KPATH_NEON: return "neon (asimd)";
    case SDN_KPATH_DOTPROD: return "dotprod (asimd+dotprod)";
    case SDN_KPATH_I8MM: return "i8mm (asimd+dotprod+i8mm)";
    default: return "portable (C)";
    }
}

const char *sdn_cpu_features(void) {
    static char buf[160];
    const cpu_caps *k = caps();
#if defined(__aarch64__)
    snprintf(buf, sizeof buf, "%s%s%s", k->asimd ? "asimd " : "", k->asimddp ? "asimddp " : "", k->i8mm ? "i8mm " : "");
    size_t la = strlen(buf);
    if (la) buf[la - 1] = 0;
    else snprintf(buf, sizeof buf, "none of asimd/asimddp/i8mm");
    return buf;
#endif
    snprintf(buf, sizeof buf, "%s%s%s%s%s%s%s%s%s%s%s%s", k->avx2 ? "avx2 " : "", k->fma ? "fma " : "", k->f16c ? "f16c " : "",
             k->avxvnni ? "avx-vnni " : "", k->avx512f ? "avx512f " : "", k->avx512bw ? "avx512bw " : "",
             k->avx512vl ? "avx512vl " : "", k->avx512vnni ? "avx512vnni " : "", k->avx512bf16 ? "avx512bf16 " : "", k->amx_tile ? "amx-tile " : "",
             k->amx_int8 ? "amx-int8 " : "", k->amx_bf16 ? "amx-bf16 " : "");
    size_t l = strlen(buf);
    if (l) buf[l - 1] = 0;
    else snprintf(buf, sizeof buf, "none of avx2/avx512/amx");
    return buf;
}

/* AVX-VNNI is not a path of its own: the avx2 path uses it when the CPU has it. */
int sdn_kpath_avxvnni(void) { return caps()->avxvnni; }
int sdn_kpath_avx512bf16(void) { const cpu_caps *k = caps(); return k->avx512bf16 && k->avx512f && k->os_zmm; }
__thread int sdn_amx_att_rows;
/* asked once: the amx path's check takes a lock, and attention asks at every call */
int sdn_kpath_amxbf16(void) {
    static volatile int v = -1;
    if (v < 0) v = caps()->amx_bf16 && sdn_kpath_avx512bf16() && sdn_kpath_supported(SDN_KPATH_AMX);
    return v;
}

void sdn_amx_tile_config(uint8_t cfg[64], int m) {
    memset(cfg, 0, 64);
    cfg[0] = 1; /* palette 1; start_row 0 */
    /* colsb[i] at 16 + 2i (little-endian uint16), rows[i] at 48 + i; two sets (block parity) */
    static const int colsb[6] = {64, 64, 32, 32, 64, 64};
    for (int t = 0; t < 6; t++) {
        cfg[16 + 2 * t] = (uint8_t)colsb[t];
        cfg[17 + 2 * t] = 0;
        /* tmm0/1: C, m rows of 16 int32; tmm2/3: A, m activation rows of 32 bytes (one
         * block); tmm4/5: B, 8 rows of 16 columns x 4 bytes */
        cfg[48 + t] = (uint8_t)(t < 4 ? m : 8);
    }
}

/* ---- the prefill-matmul setting ---- */

static volatile int g_prefill_mm = -1;
static const char *const prefill_mm_names[] = {"auto", "sgemm", "kernels"};

const char *sdn_prefill_mm_name(sdn_prefill_mm m) { return (unsigned)m < 3 ? prefill_mm_names[m] : "?"; }

int sdn_prefill_mm_parse(const char *s, sdn_prefill_mm *out, sdn_err *err) {
    for (int i = 0; i < 3; i++)
        if (s && !strcmp(s, prefill_mm_names[i])) {
            *out = (sdn_prefill_mm)i;
            return SDN_OK;
        }
    return sdn_fail(err, SDN_EINVAL, "unknown prefill matmul setting '%s' (auto, sgemm or kernels)", s ? s : "");
}

int sdn_prefill_mm_init(sdn_err *err) {
    (void)err;
    if (g_prefill_mm < 0) g_prefill_mm = SDN_PREFILL_MM_AUTO;
    return SDN_OK;
}

sdn_prefill_mm sdn_prefill_mm_get(void) {
    const int m = g_prefill_mm;
    if (m >= 0) return (sdn_prefill_mm)m;
    sdn_prefill_mm_init(NULL); /* never fails: the default when nothing was set */
    return (sdn_prefill_mm)g_prefill_mm;
}

void sdn_prefill_mm_set(sdn_prefill_mm m) { g_prefill_mm = (unsigned)m < 3 ? (int)m : SDN_PREFILL_MM_AUTO; }
