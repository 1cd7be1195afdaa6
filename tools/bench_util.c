/* bench_util.c - see bench_util.h. */
#include "tools/bench_util.h"
#include "modelfile/model_registry.h"
#include "datasets/projection.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "common/sdn_util.h"
#include "tools/make_model.h"
#include "modelfile/tensor_types.h"
#include <strings.h>

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
    size_t n, pf;
    pthread_barrier_t *bar;
    double t;
    uint64_t sink;
} probe_arg;

/* Read this thread's share line by line (one 32-byte load per 64-byte line is enough to
 * bring the line in), with a software prefetch pf bytes ahead when pf > 0: hardware
 * prefetchers stop at 4 KiB page boundaries, software prefetches do not. */
static void *probe_thread(void *a) {
    probe_arg *pa = a;
    pthread_barrier_wait(pa->bar);
    double t0 = sdn_now();
#if defined(__AVX2__)
    __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (size_t i = 0; i + 256 <= pa->n; i += 256) {
        if (pa->pf) _mm_prefetch((const char *)pa->p + i + pa->pf, _MM_HINT_T0);
        if (pa->pf) _mm_prefetch((const char *)pa->p + i + pa->pf + 128, _MM_HINT_T0);
        acc0 = _mm256_add_epi64(acc0, _mm256_load_si256((const __m256i *)(pa->p + i)));
        acc1 = _mm256_add_epi64(acc1, _mm256_load_si256((const __m256i *)(pa->p + i + 64)));
        acc2 = _mm256_add_epi64(acc2, _mm256_load_si256((const __m256i *)(pa->p + i + 128)));
        acc3 = _mm256_add_epi64(acc3, _mm256_load_si256((const __m256i *)(pa->p + i + 192)));
    }
    acc0 = _mm256_add_epi64(_mm256_add_epi64(acc0, acc1), _mm256_add_epi64(acc2, acc3));
    pa->sink = (uint64_t)_mm256_extract_epi64(acc0, 0);
#else
    uint64_t s = 0;
    for (size_t i = 0; i + 64 <= pa->n; i += 64) { uint64_t v; memcpy(&v, pa->p + i, 8); s += v; }
    pa->sink = s;
#endif
    pa->t = sdn_now() - t0;
    return NULL;
}

static double probe_once(const uint8_t *buf, size_t bytes, int threads, size_t pf) {
    pthread_t th[64];
    probe_arg pa[64];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    size_t share = bytes / (size_t)threads / 256 * 256;
    for (int i = 0; i < threads; i++) {
        pa[i] = (probe_arg){buf + (size_t)i * share, share, pf, &bar, 0, 0};
        if (i) pthread_create(&th[i], NULL, probe_thread, &pa[i]);
    }
    probe_thread(&pa[0]);
    for (int i = 1; i < threads; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    double tmax = 0;
    for (int i = 0; i < threads; i++) tmax = pa[i].t > tmax ? pa[i].t : tmax;
    return (double)share * threads / tmax / 1e9;
}

double bench_read_bandwidth(int threads, size_t bytes, int reps) {
    if (threads > 64) threads = 64;
    if (reps > 64) reps = 64;
    uint8_t *buf = aligned_alloc((size_t)2 << 20, (bytes + ((size_t)2 << 20) - 1) / ((size_t)2 << 20) * ((size_t)2 << 20));
    if (!buf) return 0;
#ifdef MADV_HUGEPAGE
    madvise(buf, bytes, MADV_HUGEPAGE);
#endif
    memset(buf, 1, bytes);
    /* the best variant (hardware prefetch only, software prefetch 1 KiB or 4 KiB ahead),
     * each by its median over reps */
    static const size_t pfs[] = {0, 1024, 4096};
    double best = 0;
    for (size_t v = 0; v < sizeof pfs / sizeof pfs[0]; v++) {
        double res[64];
        for (int r = 0; r < reps; r++) res[r] = probe_once(buf, bytes, threads, pfs[v]);
        double m = bench_median(res, reps);
        if (m > best) best = m;
    }
    free(buf);
    return best;
}

const char *bench_cache_dir(void) {
    const char *d = sdn_cache_dir();
    return d ? d : "."; /* the program always sets one (sdn_tool_global_options) */
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

static void out_of_memory(size_t n) {
    fprintf(stderr, "sdnpu: out of memory (%zu bytes)\n", n);
    exit(1);
}

void *bench_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) out_of_memory(n);
    return p;
}

void *bench_xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) out_of_memory(n * size);
    return p;
}

char *bench_xstrdup(const char *s) {
    char *p = strdup(s);
    if (!p) out_of_memory(strlen(s) + 1);
    return p;
}

void bench_print_projection(const sdn_cost_profile *p, const char *path, const sdn_result_cell *cells, int n) {
    int budgets = 0;
    for (int i = 0; i < n; i++) budgets |= cells[i].budget[0] != 0;
    printf("\nPROJECTION (not measured) onto %s (model %s, shape %s, %d threads): plain decoding %.3f ms/token there\n", path,
           p->model[0] ? p->model : "?", p->shape[0] ? p->shape : "?", p->threads, p->plain_step_ms);
    printf("%-10s %-10s %s%12s %12s %10s %8s %8s\n", "task", "method", budgets ? "budget   " : "", "verify ms/st", "draft ms/st", "ms/token",
           "speedup", "ceiling");
    for (int i = 0; i < n; i++) {
        const sdn_result_cell *c = &cells[i];
        sdn_projection pr;
        sdn_err e = {0};
        if (!c->c.steps || sdn_cost_project(p, &c->c, 1, &pr, &e)) continue;
        printf("%-10s %-10s ", c->task, c->method);
        if (budgets) printf("%-8s ", c->budget[0] ? c->budget : "-");
        printf("%12.3f %12.4f %10.3f %7.2fx %7.2fx\n", pr.verify_ms_per_step, pr.draft_ms_per_step, pr.ms_per_token, pr.speedup,
               pr.ceiling_speedup);
    }
    printf("ceiling: the same steps had each verified only the chain it accepted (perfect draft sizing of these drafts)\n");
}

static int check_list(const char *cmd, const char *opt, const char *csv, int shapes) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", csv);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int ok = 0;
        if (shapes) {
            for (int i = 0; i < sdn_shape_count() && !ok; i++) ok = !strcasecmp(sdn_shape_at(i)->name, t);
        } else {
            int ti = sdn_type_from_name(t);
            ok = !strcasecmp(t, "Q4_K_M") || (ti >= 0 && sdn_type_is_weight_type((uint32_t)ti));
        }
        if (ok) continue;
        fprintf(stderr, "sdnpu %s: option %s: '%s' is not a %s (", cmd, opt, t, shapes ? "model shape" : "weight type");
        if (shapes)
            for (int i = 0; i < sdn_shape_count(); i++) fprintf(stderr, "%s%s", i ? ", " : "", sdn_shape_at(i)->name);
        else fprintf(stderr, "F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K Q4_K_M");
        fprintf(stderr, ")\n");
        return 2;
    }
    return 0;
}

int bench_check_shapes_types(const char *cmd, const char *opt_s, const char *shapes, const char *opt_t, const char *types) {
    if (shapes && check_list(cmd, opt_s, shapes, 1)) return 2;
    if (types && check_list(cmd, opt_t, types, 0)) return 2;
    return 0;
}
