/* sdn_util.h - small shared helpers: monotonic time, checked allocation sizes, reading
 * whole files, a seeded PRNG (splitmix64/xoshiro-style) used by make-model and tests, and
 * peak-memory queries. Nothing here knows about models or tokens. */
#ifndef SDN_UTIL_H
#define SDN_UTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "common/sdn_err.h"

/* Monotonic wall-clock time in seconds. */
double sdn_now(void);

/* a*b into *out; returns 0 on success, -1 on size_t overflow. */
int sdn_mul_overflow(size_t a, size_t b, size_t *out);

/* Read a whole file into a NUL-terminated malloc'd buffer; *len gets the byte count. */
int sdn_read_file(const char *path, char **data, size_t *len, sdn_err *err);
/* The same, but a file longer than `max` bytes is refused (SDN_EINVAL) as soon as the
 * reading passes the limit, without holding more than about max + 64 KiB; the message is
 * "<path>: longer than the limit of N bytes: <why>" (why may be NULL). */
int sdn_read_file_max(const char *path, size_t max, const char *why, char **data, size_t *len, sdn_err *err);

/* Peak resident set size of this process in bytes (VmHWM), 0 if unknown. */
size_t sdn_peak_rss(void);

/* The CPU's model name from /proc/cpuinfo ("unknown CPU" when unavailable). */
void sdn_cpu_model(char *buf, size_t cap);

/* Online CPUs of this machine (>= 1). */
int sdn_cpus_online(void);
/* Pin the calling thread to CPUs [cpu0, cpu0 + n) (threads it creates afterwards inherit
 * the set). SDN_EINVAL naming the range when it is outside the online CPUs; SDN_EIO when
 * the kernel refuses. */
int sdn_pin_self(int cpu0, int n, sdn_err *err);
/* The same for thread th. */
int sdn_pin_thread(pthread_t th, int cpu0, int n, sdn_err *err);

/* Deterministic 64-bit PRNG (xoshiro256**, seeded through splitmix64). */
typedef struct sdn_rng { uint64_t s[4]; } sdn_rng;
void sdn_rng_seed(sdn_rng *r, uint64_t seed);
uint64_t sdn_rng_u64(sdn_rng *r);
/* Uniform in [0, 1) with 24 random bits (exactly representable as float). */
float sdn_rng_float(sdn_rng *r);
/* Uniform double in [0, 1) with 53 random bits. */
double sdn_rng_double(sdn_rng *r);
/* Standard normal (Box-Muller). */
float sdn_rng_normal(sdn_rng *r);
/* Uniform integer in [0, n). */
uint64_t sdn_rng_below(sdn_rng *r, uint64_t n);

/* fp16 / bf16 <-> fp32 conversion, bit-exact IEEE round-to-nearest-even. */
float sdn_fp16_to_fp32(uint16_t h);
uint16_t sdn_fp32_to_fp16(float f);
float sdn_bf16_to_fp32(uint16_t h);
uint16_t sdn_fp32_to_bf16(float f);

#endif
