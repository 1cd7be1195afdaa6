/* bench_util.c - see bench_util.h. */
#include "engine/cli/bench_util.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "common/sdn_util.h"
#include "engine/make_model.h"

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
double bench_median(double *v, int n) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct probe_arg {
    const uint8_t *p;
    size_t n;
    pthread_barrier_t *bar;
    double t;
    uint64_t sink;
} probe_arg;

static void *probe_thread(void *a) {
    probe_arg *pa = a;
    pthread_barrier_wait(pa->bar);
    double t0 = sdn_now();
#if defined(__AVX2__)
    __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (size_t i = 0; i + 128 <= pa->n; i += 128) {
        acc0 = _mm256_xor_si256(acc0, _mm256_load_si256((const __m256i *)(pa->p + i)));
        acc1 = _mm256_xor_si256(acc1, _mm256_load_si256((const __m256i *)(pa->p + i + 32)));
        acc2 = _mm256_xor_si256(acc2, _mm256_load_si256((const __m256i *)(pa->p + i + 64)));
        acc3 = _mm256_xor_si256(acc3, _mm256_load_si256((const __m256i *)(pa->p + i + 96)));
    }
    acc0 = _mm256_xor_si256(_mm256_xor_si256(acc0, acc1), _mm256_xor_si256(acc2, acc3));
    pa->sink = (uint64_t)_mm256_extract_epi64(acc0, 0);
#else
    uint64_t s = 0;
    for (size_t i = 0; i + 8 <= pa->n; i += 8) { uint64_t v; memcpy(&v, pa->p + i, 8); s ^= v; }
    pa->sink = s;
#endif
    pa->t = sdn_now() - t0;
    return NULL;
}

double bench_read_bandwidth(int threads, size_t bytes, int reps) {
    uint8_t *buf = aligned_alloc(64, bytes);
    if (!buf) return 0;
    memset(buf, 1, bytes);
    double res[64];
    if (reps > 64) reps = 64;
    for (int r = 0; r < reps; r++) {
        pthread_t th[64];
        probe_arg pa[64];
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, (unsigned)threads);
        size_t share = bytes / (size_t)threads / 128 * 128;
        double t0 = sdn_now();
        for (int i = 0; i < threads; i++) {
            pa[i] = (probe_arg){buf + (size_t)i * share, share, &bar, 0, 0};
            if (i) pthread_create(&th[i], NULL, probe_thread, &pa[i]);
        }
        probe_thread(&pa[0]);
        for (int i = 1; i < threads; i++) pthread_join(th[i], NULL);
        double t = sdn_now() - t0;
        (void)t;
        double tmax = 0;
        for (int i = 0; i < threads; i++) tmax = pa[i].t > tmax ? pa[i].t : tmax;
        res[r] = (double)share * threads / tmax / 1e9;
        pthread_barrier_destroy(&bar);
    }
    free(buf);
    return bench_median(res, reps);
}

const char *bench_cache_dir(void) {
    static char dir[1024];
    if (dir[0]) return dir;
    const char *e = getenv("SDNPU_CACHE"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    if (e && *e) snprintf(dir, sizeof dir, "%s", e);
    else if (x && *x) snprintf(dir, sizeof dir, "%s/sdnpu", x);
    else if (h && *h) snprintf(dir, sizeof dir, "%s/.cache/sdnpu", h);
    else snprintf(dir, sizeof dir, "/tmp/sdnpu-cache");
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') { *p = 0; mkdir(dir, 0755); *p = '/'; }
    mkdir(dir, 0755);
    return dir;
}

const char *bench_model(const char *shape, const char *type, const char *vocab_from) {
    static char paths[8][1200];
    static int k;
    char *path = paths[k++ & 7];
    snprintf(path, 1200, "%s/bench-%s-%s%s.gguf", bench_cache_dir(), shape, type, vocab_from ? "-realvocab" : "");
    if (access(path, R_OK) == 0) return path;
    fprintf(stderr, "bench: writing %s ...\n", path);
    sdn_make_model_opts o = {.shape = shape, .out_path = path, .type = type, .seed = 1, .vocab_from = vocab_from, .quiet = 1};
    sdn_err err = {0};
    if (sdn_make_model(&o, &err)) {
        fprintf(stderr, "sdnpu: %s\n", err.msg);
        return NULL;
    }
    return path;
}
