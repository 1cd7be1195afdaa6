/* sdn_mem.h - how much memory this process may use, so that a request can be refused up
 * front, with the figures, instead of allocating until the kernel kills it.
 *
 * The limit is the smallest of: the cgroup memory limit of the process and of every
 * ancestor cgroup (v2 memory.max, v1 memory.limit_in_bytes; read through
 * /proc/self/cgroup), the physical memory (sysconf), the memory available now
 * (MemAvailable in /proc/meminfo plus this process's resident set), and RLIMIT_AS. The environment
 * variable SDN_MEM_LIMIT_MB, when set to a positive integer, is one more bound (for tests
 * and for users who want to keep headroom). */
#ifndef SDN_MEM_H
#define SDN_MEM_H

#include <stdint.h>

#include "common/sdn_err.h"

/* The limit in bytes (UINT64_MAX when nothing is known); *source (optional) receives a
 * short static description of the bound that decided it ("cgroup memory.max", ...). */
uint64_t sdn_mem_limit(const char **source);

/* SDN_OK when `need` bytes fit the limit; otherwise SDN_ENOMEM with "<what> needs N MiB
 * (<detail>) but this process may use only M MiB (<source>)". detail may be NULL. */
int sdn_mem_check(uint64_t need, const char *what, const char *detail, sdn_err *err);

#endif
