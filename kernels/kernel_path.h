/* kernel_path.h - which family of matmul/dequantization kernels a process runs, chosen at run
 * time from what the CPU (and the operating system) supports.
 *
 *   portable  plain C (kernels/matmul_portable.c), any CPU
 *   avx2      AVX2 + FMA + F16C (AVX-VNNI used when present)
 *   avx512    AVX-512 F/BW/VL + VNNI
 *   amx       avx512 plus AMX-INT8 tiles for batches of SDN_AMX_MIN_ROWS rows and more
 *             (needs the Linux permission for tile data, requested on selection); with
 *             AMX-BF16 also the bf16 cache's key scores, for every batch (their own bits:
 *             attention/attention_amx.c)
 *   neon      AArch64 Advanced SIMD (ARMv8.0, every AArch64 CPU)
 *   dotprod   neon plus the int8 dot products SDOT (FEAT_DotProd, ARMv8.2+)
 *   i8mm      dotprod plus the int8 matrix multiply SMMLA (FEAT_I8MM, ARMv8.6+)
 *
 * The x86 paths exist on x86-64 builds, the AArch64 paths on AArch64 builds; asking for a path
 * of the other architecture is the same error as asking for one the CPU lacks.
 *
 * One binary holds every path (the SIMD kernels are compiled per file with their own target
 * flags, see CMakeLists.txt); the best supported path is used unless sdn_kpath_set() forces
 * another (the public sdnpu_set_kernel_path; the `sdnpu` program's --kernel and the
 * environment variable SDN_KERNEL, which the program and the tests read, never the library). Forcing a path the CPU lacks is an
 * error. Whatever the path, the kernels of the batched types produce the same bits
 * (docs/kernels.md, "Batch invariance"). */
#ifndef SDN_KERNEL_PATH_H
#define SDN_KERNEL_PATH_H

#include "common/sdn_err.h"

typedef enum sdn_kpath {
    SDN_KPATH_PORTABLE = 0,
    SDN_KPATH_AVX2 = 1,
    SDN_KPATH_AVX512 = 2,
    SDN_KPATH_AMX = 3,
    SDN_KPATH_NEON = 4,
    SDN_KPATH_DOTPROD = 5,
    SDN_KPATH_I8MM = 6,
    SDN_KPATH_COUNT = 7
} sdn_kpath;

/* Batches of at least this many rows use AMX tiles on the amx path: below it the avx512
 * tiles are faster (an Intel Xeon with AMX, 1 thread, Q4_0 / Q5_0 at 16 rows 1.3x / 1.1x the
 * AMX time, level at 32, AMX 1.2-1.5x faster from 48; docs/results.md, "AMX tiles, pipelined"). */
#define SDN_AMX_MIN_ROWS 32

/* Revision of the kernels' speed: part of the key of cached measurements (the verify-cost
 * curve of runtime/verify_cost.c), so a change that makes steps faster or slower is measured
 * again instead of sizing drafts from an old curve. Bump it with such a change. */
#define SDN_KERNEL_REV 11 /* 8: AMX from 32 rows, K-type scratch; 9: Q4_K/Q5_K on AMX, per-row steps on the pool; 10: bf16 values in BF16; 11: bf16 keys on AMX-BF16 (amx path) */

/* "portable", "avx2", "avx512", "amx", "neon", "dotprod", "i8mm". */
const char *sdn_kpath_name(sdn_kpath p);
/* Parse a path name; SDN_EINVAL with a message listing the names if unknown. */
int sdn_kpath_parse(const char *s, sdn_kpath *out, sdn_err *err);
/* Resolve the path once: the best unless one was set. Later calls return the first result. */
int sdn_kpath_init(sdn_err *err);
/* The path in use (calls sdn_kpath_init on first use). */
sdn_kpath sdn_kpath_get(void);
/* Force path p for the rest of the process (tests, benchmarks, --kernel); SDN_EUNSUP naming
 * the missing CPU features if the machine lacks it. Not to be called while kernels run. */
int sdn_kpath_set(sdn_kpath p, sdn_err *err);
/* sdn_kpath_set by name; NULL, "" or "auto": the best path. SDN_EINVAL listing the names when
 * unknown, SDN_EUNSUP when the machine lacks it. */
int sdn_kpath_set_name(const char *name, sdn_err *err);
/* Human-readable description of the path in use, e.g. "avx512 (avx512f+bw+vl+vnni)". */
const char *sdn_kpath_describe(void);
/* How prefill batches (the non-invariant path of engine/forward.h: more than
 * SDN_INVARIANT_MAX_ROWS rows) multiply by the weights:
 *   auto     the batch kernels of matmul.h for every weight type, on every path (the
 *            default: a row's bits are a decode step's whatever the batch, thread count or
 *            chunking, so prefill is chunk-invariant; docs/engine.md)
 *   sgemm    always SGEMM on F32 weights (dequantized per call when no F32 layout is
 *            resident): for comparison only, its bits depend on the call's shape
 *   kernels  the same as auto (kept as a name for scripts written before auto meant it)
 * Set by sdn_prefill_mm_set (the public sdnpu_set_prefill_matmul; CLI: the global option
 * --prefill-matmul, or the environment variable SDN_PREFILL_MATMUL that the program reads). */
typedef enum sdn_prefill_mm { SDN_PREFILL_MM_AUTO = 0, SDN_PREFILL_MM_SGEMM = 1, SDN_PREFILL_MM_KERNELS = 2 } sdn_prefill_mm;
/* "auto", "sgemm", "kernels". */
const char *sdn_prefill_mm_name(sdn_prefill_mm m);
/* Parse a setting name; SDN_EINVAL with a message listing the names if unknown. */
int sdn_prefill_mm_parse(const char *s, sdn_prefill_mm *out, sdn_err *err);
/* Resolve the setting once: auto unless one was set. Never fails. */
int sdn_prefill_mm_init(sdn_err *err);
/* The setting in use (calls sdn_prefill_mm_init on first use). */
sdn_prefill_mm sdn_prefill_mm_get(void);
/* Force setting m for the rest of the process (tests, benchmarks, --prefill-matmul). Not to be
 * called while a forward pass runs. */
void sdn_prefill_mm_set(sdn_prefill_mm m);

/* Features this CPU reports, e.g. "avx2 fma f16c avx512f avx512bw avx512vl avx512vnni" or, on
 * AArch64, "asimd asimddp i8mm". */
const char *sdn_cpu_features(void);

#endif
