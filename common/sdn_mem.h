/* sdn_mem.h - how much memory this process may use, so that a request can be refused up
 * front, with the figures, instead of allocating until the kernel kills it.
 *
 * The limit is the smallest of: the cgroup memory limit of the process and of every
 * ancestor cgroup (v2 memory.max, v1 memory.limit_in_bytes; read through
 * /proc/self/cgroup), the physical memory (sysconf), the memory available now
 * (MemAvailable in /proc/meminfo plus this process's resident set), and RLIMIT_AS. A limit set
 * with sdn_mem_set_limit (the public sdnpu_set_mem_limit; the `sdnpu` program and the tests
 * turn the environment variable SDN_MEM_LIMIT_MB into it) is one more bound, for users who
 * want to keep headroom. The library reads no environment variable. */
#ifndef SDN_MEM_H
#define SDN_MEM_H

#include <stdint.h>

#include "common/sdn_err.h"

/* The limit in bytes (UINT64_MAX when nothing is known); *source (optional) receives a
 * short static description of the bound that decided it ("cgroup memory.max", ...). */
uint64_t sdn_mem_limit(const char **source);

/* One more bound on the limit: `bytes` (0: none), described as `source` in messages (e.g.
 * "SDN_MEM_LIMIT_MB"; NULL: "sdnpu_set_mem_limit"; copied). Process-wide; call it before the
 * contexts it should bound are made. */
void sdn_mem_set_limit(uint64_t bytes, const char *source);

/* SDN_OK when `need` bytes fit the limit; otherwise SDN_ENOMEM with "<what> needs N MiB
 * (<detail>) but this process may use only M MiB (<source>)". detail may be NULL. */
int sdn_mem_check(uint64_t need, const char *what, const char *detail, sdn_err *err);

#endif
