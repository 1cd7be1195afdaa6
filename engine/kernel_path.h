/* kernel_path.h - which family of matmul/dequantization kernels a process runs, chosen at run
 * time from what the CPU (and the operating system) supports.
 *
 *   portable  plain C (engine/matmul_portable.c), any CPU
 *   avx2      AVX2 + FMA + F16C (AVX-VNNI used when present)
 *   avx512    AVX-512 F/BW/VL + VNNI
 *   amx       avx512 plus AMX-INT8 tiles for batches of SDN_AMX_MIN_ROWS rows and more
 *             (needs the Linux permission for tile data, requested on selection)
 *
 * One binary holds every path (the SIMD kernels are compiled per file with their own target
 * flags, see CMakeLists.txt); the best supported path is used unless the environment
 * variable SDN_KERNEL or sdn_kpath_set() forces another. Forcing a path the CPU lacks is an
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
    SDN_KPATH_COUNT = 4
} sdn_kpath;

/* Batches of at least this many rows use AMX tiles on the amx path (a conservative choice:
 * AMX could not be measured where this was written; see docs/kernels.md). */
#define SDN_AMX_MIN_ROWS 16

/* Revision of the kernels' speed: part of the key of cached measurements (the verify-cost
 * curve of runtime/verify_cost.c), so a change that makes steps faster or slower is measured
 * again instead of sizing drafts from an old curve. Bump it with such a change. */
#define SDN_KERNEL_REV 3

/* "portable", "avx2", "avx512", "amx". */
const char *sdn_kpath_name(sdn_kpath p);
/* Parse a path name; SDN_EINVAL with a message listing the names if unknown. */
int sdn_kpath_parse(const char *s, sdn_kpath *out, sdn_err *err);
/* Resolve the path once: SDN_KERNEL if set (an unknown or unsupported name is an error),
 * else the best. Later calls return the first result. */
int sdn_kpath_init(sdn_err *err);
/* The path in use (calls sdn_kpath_init on first use; an invalid SDN_KERNEL aborts the
 * process with its message, so callers that want an error status call sdn_kpath_init first). */
sdn_kpath sdn_kpath_get(void);
/* Force path p for the rest of the process (tests, benchmarks, --kernel); SDN_EUNSUP naming
 * the missing CPU features if the machine lacks it. Not to be called while kernels run. */
int sdn_kpath_set(sdn_kpath p, sdn_err *err);
/* Human-readable description of the path in use, e.g. "avx512 (avx512f+bw+vl+vnni)". */
const char *sdn_kpath_describe(void);
/* Features this CPU reports, e.g. "avx2 fma f16c avx512f avx512bw avx512vl avx512vnni". */
const char *sdn_cpu_features(void);

#endif
