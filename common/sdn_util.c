/* sdn_util.c - implementation of the shared helpers in sdn_util.h. */
#include "common/sdn_util.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double sdn_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int sdn_mul_overflow(size_t a, size_t b, size_t *out) {
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

int sdn_read_file(const char *path, char **data, size_t *len, sdn_err *err) {
    return sdn_read_file_max(path, SIZE_MAX, NULL, data, len, err);
}

int sdn_read_file_max(const char *path, size_t max, const char *why, char **data, size_t *len, sdn_err *err) {
    *data = NULL;
    if (len) *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return sdn_fail(err, SDN_EIO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) { fclose(f); return sdn_fail(err, SDN_ENOMEM, "%s: out of memory", path); }
    for (;;) {
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); fclose(f); return sdn_fail(err, SDN_ENOMEM, "%s: out of memory", path); }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (n > max) { /* stop reading as soon as the limit is passed */
            free(buf);
            fclose(f);
            return sdn_fail(err, SDN_EINVAL, "%s: longer than the limit of %zu bytes%s%s", path, max, why ? ": " : "", why ? why : "");
        }
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { free(buf); return sdn_fail(err, SDN_EIO, "%s: read error", path); }
    buf[n] = 0;
    *data = buf;
    if (len) *len = n;
    return SDN_OK;
}

static size_t status_field_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0, fl = strlen(field);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, field, fl) == 0) { kb = strtoull(line + fl, NULL, 10); break; }
    }
    fclose(f);
    return kb * 1024;
}
size_t sdn_peak_rss(void) { return status_field_kb("VmHWM:"); }

void sdn_cpu_model(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        char *c = strchr(line, ':');
        if (c) {
            c++;
            while (*c == ' ' || *c == '\t') c++;
            c[strcspn(c, "\n")] = 0;
            snprintf(buf, cap, "%s", c);
        }
        break;
    }
    fclose(f);
}

int sdn_cpus_online(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int sdn_pin_thread(pthread_t th, int cpu0, int n, sdn_err *err) {
    int online = sdn_cpus_online();
    if (cpu0 < 0 || n < 1 || cpu0 + n > online || cpu0 + n > CPU_SETSIZE)
        return sdn_fail(err, SDN_EINVAL, "CPU range %d..%d is outside this machine's %d online CPUs", cpu0, cpu0 + n - 1, online);
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = cpu0; i < cpu0 + n; i++) CPU_SET(i, &set);
#if defined(__ANDROID__)
    /* Bionic has no pthread_setaffinity_np: the thread's kernel id and sched_setaffinity */
    if (sched_setaffinity(pthread_gettid_np(th), sizeof set, &set) != 0)
        return sdn_fail(err, SDN_EIO, "cannot pin a thread to CPUs %d..%d", cpu0, cpu0 + n - 1);
#else
    if (pthread_setaffinity_np(th, sizeof set, &set) != 0) return sdn_fail(err, SDN_EIO, "cannot pin a thread to CPUs %d..%d", cpu0, cpu0 + n - 1);
#endif
    return SDN_OK;
}

int sdn_pin_self(int cpu0, int n, sdn_err *err) { return sdn_pin_thread(pthread_self(), cpu0, n, err); }

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
void sdn_rng_seed(sdn_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}
static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
uint64_t sdn_rng_u64(sdn_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t; s[3] = rotl(s[3], 45);
    return result;
}
float sdn_rng_float(sdn_rng *r) { return (float)(sdn_rng_u64(r) >> 40) * (1.0f / 16777216.0f); }
double sdn_rng_double(sdn_rng *r) { return (double)(sdn_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }
float sdn_rng_normal(sdn_rng *r) {
    double u1 = sdn_rng_double(r), u2 = sdn_rng_double(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
uint64_t sdn_rng_below(sdn_rng *r, uint64_t n) {
    if (n == 0) return 0;
    uint64_t lim = UINT64_MAX - UINT64_MAX % n, x;
    do { x = sdn_rng_u64(r); } while (x >= lim);
    return x % n;
}

/* IEEE binary16 conversions written from the format definition (1 sign, 5 exponent bits
 * with bias 15, 10 mantissa bits). */
float sdn_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) bits = sign;
        else { /* subnormal: normalize */
            int e = -1;
            do { e++; man <<= 1; } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 0x1f) bits = sign | 0x7f800000u | (man << 13);
    else bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
uint16_t sdn_fp32_to_fp16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t)((x >> 23) & 0xff);
    uint32_t man = x & 0x7fffff;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    int32_t e = exp - 127 + 15;
    if (e >= 0x1f) return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000;
        int shift = 14 - e;
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++; /* may carry into exponent: correct */
    return (uint16_t)(sign | half);
}
float sdn_bf16_to_fp32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
uint16_t sdn_fp32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}
