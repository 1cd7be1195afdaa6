/* bench_util.h - part of the tools API for the commands (see tools/tools.h): helpers shared
 * by the benchmark commands (cli/cmd_bench*.c, profile, study, demo, make-model): medians, a
 * streaming-read memory bandwidth probe, the cache directory for generated benchmark models,
 * checks of make-model shape and type names, allocation that exits on failure, and the
 * projection table of study and bench. */
#ifndef SDN_BENCH_UTIL_H
#define SDN_BENCH_UTIL_H

#include <stddef.h>

#include "datasets/study.h"
#include "runtime/verify_cost.h"

/* Median of n values (the array is sorted in place). */
double bench_median(double *v, int n);
/* Streaming-read bandwidth in GB/s (1e9 bytes/s) with `threads` threads over a buffer of
 * `bytes` (much larger than the caches, on transparent huge pages): the best of three
 * variants (hardware prefetch only; software prefetch 1 KiB or 4 KiB ahead), each the median
 * of `reps` passes. Each thread reads its contiguous share line by line. */
double bench_read_bandwidth(int threads, size_t bytes, int reps);
/* The cache directory (sdn_tool_global_options set it: $SDNPU_CACHE, $XDG_CACHE_HOME/sdnpu,
 * ~/.cache/sdnpu), created; "." when none is set. */
const char *bench_cache_dir(void);
/* Path of a cached make-model model of shape/type (written on first use). NULL on error
 * (message printed). vocab_from may be NULL. */
const char *bench_model(const char *shape, const char *type, const char *vocab_from);
/* Check, before any work, that every name of the comma-separated lists is a make-model shape
 * (shapes, option opt_s; NULL: none given) and a make-model weight type (types, option opt_t;
 * NULL: none given), as sdn_make_model takes them. Returns 0, or 2 (a usage error) after
 * "sdnpu CMD: option OPT: 'NAME' is not ..." on stderr. */
int bench_check_shapes_types(const char *cmd, const char *opt_s, const char *shapes, const char *opt_t, const char *types);
/* Allocation for the benchmark commands: on failure print "sdnpu: out of memory (N bytes)"
 * and exit with status 1 (a benchmark cannot go on without its buffers). */
void *bench_xmalloc(size_t n);
void *bench_xcalloc(size_t n, size_t size);
char *bench_xstrdup(const char *s);
/* Print each cell's counts projected onto profile p (read from path): verify and draft ms
 * per step, ms/token and speedup there, labelled as a projection; a budget column when a
 * cell has one (bench). Cells without steps are left out. */
void bench_print_projection(const sdn_cost_profile *p, const char *path, const sdn_result_cell *cells, int n);

#endif
