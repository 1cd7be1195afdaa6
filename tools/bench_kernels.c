/* bench_kernels.c - the work of `sdnpu bench-kernels` (tools.h; the options in
 * cli/cmd_bench_kernels.c): speed of the small-batch matmul kernels
 * (kernels/matmul.h) on Qwen2.5-0.5B-shaped weight matrices, against a streaming-read
 * bandwidth probe measured in the same run.
 *
 * For every weight type, shape (out x in) and batch n, the kernel is timed call by call with
 * 1 and 2 threads (each thread takes one half of the output range, the way the forward pass
 * splits it); the median call time gives weight GB/s (weight bytes / time) and GFLOP/s
 * (2 * n * out * in / time). To measure memory rather than cache, each call reads a different
 * copy of the weight matrix, rotating over a working set of --mem MB (default 512), and the
 * probe streams over a buffer of the same size. At n = 1 a kernel that keeps up with memory
 * reaches the probe's GB/s; the % column is that ratio. Threads are plain pthreads that spin
 * on a generation counter between calls, so a call costs no thread start-up. On a shared
 * machine, --repeat K makes K rounds over everything and keeps each configuration's fastest
 * median (and each type's best probe). The quantized types run on the packed layout the engine
 * loads them in (matmul.h, "Packed weights"); --layout file measures the file's layout, and
 * --layout sgemm what a prefill matmul on SGEMM costs instead (engine/forward.c's sgemm path:
 * each thread dequantizes its rows to F32, then one single-threaded cblas_sgemm on the F32
 * activations; batches up to 256 rows). */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "common/sdn_util.h"
#include "tools/tools.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "modelfile/tensor_types.h"
#include "tools/bench_util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

#define MAXT SDN_TOOL_BENCH_KERNELS_MAXT
#define NMAX 256 /* most activation rows per call */

extern void openblas_set_num_threads(int num_threads);

/* ---------------------------------------------------------------- spinning thread team */

typedef struct {
    int kind; /* 0 = matmul, 1 = read probe */
    uint32_t wtype;
    const uint8_t *W;
    size_t row_bytes;
    int64_t in, out;
    const void *act;
    int n, packed, sgemm;
    float *Y;
    const float *X; /* sgemm: F32 activations, n rows of in */
    float *wf;      /* sgemm: F32 weights, out rows of in (each thread dequantizes its rows) */
    const uint8_t *buf; /* probe */
    size_t buf_len, pf, streams;
} job_t;

static struct {
    int nthreads;
    job_t job;
    atomic_ulong gen;
    atomic_int done, stop;
    double sink[MAXT];
    pthread_t th[MAXT];
} team;

static void run_part(int t, int nt) {
    const job_t *j = &team.job;
    if (j->kind == 0) {
        /* split [0, out) in halves aligned to 16 rows (as the forward pass splits) */
        int64_t o0 = (j->out * t / nt) & ~(int64_t)15, o1 = t == nt - 1 ? j->out : (j->out * (t + 1) / nt) & ~(int64_t)15;
        if (j->sgemm) {
            for (int64_t o = o0; o < o1; o++)
                sdn_dequantize_row(j->wtype, j->W + (size_t)o * j->row_bytes, j->wf + o * j->in, j->in);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->n, (int)(o1 - o0), (int)j->in, 1.0f, j->X, (int)j->in,
                        j->wf + o0 * j->in, (int)j->in, 0.0f, j->Y + o0, (int)j->out);
        } else if (j->packed) sdn_matmul_rows_packed(j->wtype, j->W, j->in, j->act, j->n, j->Y, j->out, o0, o1);
        else sdn_matmul_rows(j->wtype, j->W, j->row_bytes, j->in, j->act, j->n, j->Y, j->out, o0, o1);
    } else {
        /* streaming read of this thread's share, as j->streams contiguous parts read side by
         * side (one 64-byte line of each per step), software prefetch j->pf bytes ahead in
         * each part (0: hardware prefetch only) */
        const size_t S = j->streams;
        size_t per = j->buf_len / (size_t)nt / (256 * S) * (256 * S);
        const uint8_t *p = j->buf + per * (size_t)t;
#if defined(__AVX2__)
        const size_t part = per / S;
        __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                          _mm256_setzero_si256()};
        for (size_t i = 0; i < part; i += 64)
            for (size_t k = 0; k < S; k++) {
                const uint8_t *q = p + k * part + i;
                if (j->pf) _mm_prefetch((const char *)q + j->pf, _MM_HINT_T0);
                acc[k & 3] = _mm256_add_epi64(acc[k & 3], _mm256_load_si256((const __m256i *)q));
            }
        uint64_t v[4];
        _mm256_storeu_si256((__m256i *)v,
                            _mm256_add_epi64(_mm256_add_epi64(acc[0], acc[1]), _mm256_add_epi64(acc[2], acc[3])));
        team.sink[t] += (double)(v[0] + v[1] + v[2] + v[3]);
#else
        const uint64_t *q = (const uint64_t *)p;
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (size_t i = 0; i < per / 8; i += 32) {
            s0 += q[i]; s1 += q[i + 8]; s2 += q[i + 16]; s3 += q[i + 24];
        }
        team.sink[t] += (double)(s0 + s1 + s2 + s3);
#endif
    }
}

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg;
    unsigned long seen = 0;
    for (;;) {
        unsigned long g;
        long spins = 0;
        while ((g = atomic_load_explicit(&team.gen, memory_order_acquire)) == seen) {
            if (atomic_load_explicit(&team.stop, memory_order_relaxed)) return NULL;
            if (++spins < 100000) CPU_RELAX();
            else nanosleep(&(struct timespec){0, 100000}, NULL); /* idle between configurations */
        }
        seen = g;
        if (t < team.nthreads) {
            run_part(t, team.nthreads);
            atomic_fetch_add_explicit(&team.done, 1, memory_order_release);
        }
    }
}

/* Run team.job on nt threads (the caller is thread 0); returns the wall time. */
static double team_run(int nt) {
    double t0 = sdn_now();
    team.nthreads = nt;
    atomic_store_explicit(&team.done, 0, memory_order_relaxed);
    if (nt > 1) atomic_fetch_add_explicit(&team.gen, 1, memory_order_release);
    run_part(0, nt);
    while (atomic_load_explicit(&team.done, memory_order_acquire) < nt - 1) CPU_RELAX();
    return sdn_now() - t0;
}

/* ---------------------------------------------------------------- helpers */

/* CPU time of the calling thread, s: with 1 thread, a call's cost without the time the
 * scheduler gave other processes (the us(cpu) column: on a shared machine the wall-clock
 * median can be several times the work). */
static double thread_cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Streaming-read bandwidth of `mem` bytes on nt threads (best of reps runs), GB/s. */
static double probe_run(const uint8_t *buf, size_t mem, int nt, int variant, int reps) {
    static const size_t pfs[] = {0, 1024, 4096, 0, 1024, 4096}, streams[] = {1, 1, 1, 4, 4, 4};
    double best = INFINITY;
    team.job = (job_t){.kind = 1, .buf = buf, .buf_len = mem, .pf = pfs[variant], .streams = streams[variant]};
    for (int rep = 0; rep < reps; rep++) {
        double dt = team_run(nt);
        if (dt < best) best = dt;
    }
    return (double)(mem / (size_t)nt / (256 * streams[variant]) * (256 * streams[variant]) * (size_t)nt) / best / 1e9;
}

/* ---------------------------------------------------------------- main */

void sdn_tool_bench_kernels_defaults(sdn_tool_bench_kernels_opts *o) {
    *o = (sdn_tool_bench_kernels_opts){.types = "F32,F16,BF16,Q8_0,Q4_0,Q4_1,Q5_0,Q5_1,Q4_K,Q5_K,Q6_K",
                                       .shapes = "896x896,4864x896,896x4864",
                                       .layout = "packed",
                                       .mem_mb = 512,
                                       .repeat = 1,
                                       .min_time = 0.15};
}

int sdn_tool_bench_kernels(const sdn_tool_bench_kernels_opts *ko) {
    long types[16], nlist[16], tlist[4], shapes[8][2];
    int ntypes = 0, nn = ko->nn, nthr = ko->nthreads, nshapes = 0;
    const long mem_mb = ko->mem_mb, repeat = ko->repeat;
    const int use_packed = !strcmp(ko->layout, "packed"), use_sgemm = !strcmp(ko->layout, "sgemm");
    const double min_time = ko->min_time;
    const char *types_s = ko->types, *shapes_s = ko->shapes;
    memcpy(nlist, ko->n, sizeof nlist);
    memcpy(tlist, ko->threads, sizeof tlist);
    {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", types_s);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            int t = sdn_type_from_name(tok);
            if (t < 0 || !sdn_type_is_weight_type((uint32_t)t)) {
                fprintf(stderr, "sdnpu: option --types: '%s' is not a weight type\n", tok);
                return 2;
            }
            if (ntypes < 16) types[ntypes++] = t;
        }
        snprintf(buf, sizeof buf, "%s", shapes_s);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            long o, in;
            char extra;
            if (sscanf(tok, "%ldx%ld%c", &o, &in, &extra) != 2 || o < 1 || in < 1 || o > 1000000 || in > 1000000 ||
                nshapes == 8) {
                fprintf(stderr, "sdnpu: option --shapes: '%s' is not OUTxIN\n", tok);
                return 2;
            }
            shapes[nshapes][0] = o;
            shapes[nshapes][1] = in;
            nshapes++;
        }
    }
    if (!nn) {
        static const long def[] = {1, 2, 4, 8, 16, 32, 64};
        nn = 7;
        memcpy(nlist, def, sizeof def);
    }
    if (!nthr) { tlist[0] = 1; tlist[1] = 2; nthr = 2; }
    if (!ntypes || !nshapes) { fprintf(stderr, "sdnpu bench-kernels: nothing to measure\n"); return 2; }
    for (int i = 0; i < nn; i++)
        if (nlist[i] < 1 || nlist[i] > NMAX) {
            fprintf(stderr, "sdnpu: option --n: %ld is not in 1..%d\n", nlist[i], NMAX);
            return 2;
        }
    if (use_sgemm) openblas_set_num_threads(1); /* one single-threaded SGEMM per thread, as the engine */

    const size_t mem = (size_t)mem_mb << 20;
    int maxthr = 1;
    for (int i = 0; i < nthr; i++)
        if (tlist[i] > maxthr) maxthr = (int)tlist[i];
    for (int t = 1; t < maxthr; t++)
        if (pthread_create(&team.th[t], NULL, worker, (void *)(intptr_t)t)) {
            fprintf(stderr, "sdnpu bench-kernels: cannot start thread %d\n", t);
            return 1;
        }

    /* bandwidth probe: the best of 6 variants (1 or 4 side-by-side streams per thread, like a
     * kernel tile's 4 weight rows; hardware prefetch only or software prefetch 1 KB / 4 KB
     * ahead), 5 runs each; re-measured (best variant, 3 runs) before each weight type so that
     * every ratio compares against memory under the same machine load */
    uint8_t *probe = aligned_alloc(64, mem);
    double probe_gbs[MAXT + 1] = {0};
    int probe_var[MAXT + 1] = {0};
    if (!probe) { fprintf(stderr, "sdnpu bench-kernels: cannot allocate %ld MB\n", mem_mb); return 1; }
    for (size_t i = 0; i < mem; i += 4096) memset(probe + i, (int)(i >> 12), 4096);
    for (int k = 0; k < nthr; k++) {
        const int nt = (int)tlist[k];
        for (int v = 0; v < 6; v++) {
            double g = probe_run(probe, mem, nt, v, 5);
            if (g > probe_gbs[nt]) { probe_gbs[nt] = g; probe_var[nt] = v; }
        }
    }

    /* measure: `repeat` rounds over everything (weights regenerated identically each round),
     * keeping per configuration the fastest median and fastest call, and per type the best
     * probe measured just before it */
    const size_t ncfg = (size_t)ntypes * nshapes * nn * nthr;
    double *med_best = bench_xmalloc(ncfg * sizeof(double)), *min_best = bench_xmalloc(ncfg * sizeof(double));
    double *cpu_best = bench_xmalloc(ncfg * sizeof(double)); /* 1 thread: median thread CPU time */
    double probe_t[16][MAXT + 1];
    int status = 0;
    if (!med_best || !min_best || !cpu_best) {
        fprintf(stderr, "sdnpu bench-kernels: out of memory\n");
        status = 1;
        goto done;
    }
    for (size_t i = 0; i < ncfg; i++) med_best[i] = min_best[i] = cpu_best[i] = INFINITY;
    memset(probe_t, 0, sizeof probe_t);
#define CFG(ti, si, ni, k) ((((size_t)(ti) * nshapes + (si)) * nn + (ni)) * nthr + (k))
    for (int rep = 0; rep < repeat; rep++) {
        if (repeat > 1) fprintf(stderr, "sdnpu bench-kernels: round %d of %ld\n", rep + 1, repeat);
        for (int ti = 0; ti < ntypes; ti++) {
            const uint32_t wt = (uint32_t)types[ti];
            for (int k = 0; k < nthr; k++) {
                const int nt = (int)tlist[k];
                const double g = rep == 0 && ti == 0 ? probe_gbs[nt] : probe_run(probe, mem, nt, probe_var[nt], 3);
                if (g > probe_t[ti][nt]) probe_t[ti][nt] = g;
            }
            for (int si = 0; si < nshapes; si++) {
                const int64_t out = shapes[si][0], in = shapes[si][1];
                const size_t rb = sdn_type_row_bytes(wt, in);
                if (!rb) continue;
                const int packed = use_packed && sdn_matmul_packable(wt);
                const size_t wbytes = packed ? sdn_matmul_packed_bytes(wt, in, out) : rb * (size_t)out;
                size_t copies = mem / wbytes;
                if (copies < 1) copies = 1;
                uint8_t *W = bench_xmalloc(wbytes * copies);
                uint8_t *Wf = packed ? bench_xmalloc(rb * (size_t)out) : W;
                float *row = bench_xmalloc(sizeof(float) * (size_t)in);
                float *X = bench_xmalloc(sizeof(float) * (size_t)in * NMAX);
                float *Y = bench_xmalloc(sizeof(float) * (size_t)out * NMAX);
                void *act = bench_xmalloc(sdn_act_bytes(wt, in, NMAX));
                float *wf = use_sgemm ? bench_xmalloc(sizeof(float) * (size_t)out * (size_t)in) : NULL;
                if (!W || !Wf || !row || !X || !Y || !act || (use_sgemm && !wf)) {
                    fprintf(stderr, "sdnpu bench-kernels: out of memory\n");
                    if (Wf != W) free(Wf);
                    free(W); free(row); free(X); free(Y); free(act); free(wf);
                    status = 1;
                    goto done;
                }
                sdn_rng rng;
                sdn_rng_seed(&rng, 12345 + 100 * (uint64_t)ti + (uint64_t)si);
                for (int64_t o = 0; o < out; o++) {
                    for (int64_t i = 0; i < in; i++) row[i] = 0.05f * sdn_rng_normal(&rng);
                    sdn_quantize_row(wt, row, Wf + (size_t)o * rb, in);
                }
                if (packed) {
                    sdn_matmul_pack(wt, Wf, rb, in, out, W);
                    free(Wf);
                }
                for (size_t c = 1; c < copies; c++) memcpy(W + c * wbytes, W, wbytes);
                for (int64_t i = 0; i < in * NMAX; i++) X[i] = sdn_rng_normal(&rng);
                for (int ni = 0; ni < nn; ni++) {
                    const int n = (int)nlist[ni];
                    sdn_act_prepare(wt, X, in, n, in, act);
                    for (int k = 0; k < nthr; k++) {
                        const int nt = (int)tlist[k];
                        double times[4096], cpus[4096];
                        int nrep = 0;
                        size_t c = 0;
                        team.job = (job_t){.kind = 0, .wtype = wt, .row_bytes = rb, .in = in, .out = out,
                                           .act = act, .n = n, .Y = Y, .packed = packed, .sgemm = use_sgemm,
                                           .X = X, .wf = wf};
                        for (int w = 0; w < 3; w++, c = (c + 1) % copies) { /* warm-up */
                            team.job.W = W + c * wbytes;
                            team_run(nt);
                        }
                        double t_start = sdn_now();
                        while (nrep < 4096 && (nrep < 5 || sdn_now() - t_start < min_time)) {
                            team.job.W = W + c * wbytes;
                            const double c0 = thread_cpu();
                            times[nrep] = team_run(nt);
                            cpus[nrep++] = thread_cpu() - c0;
                            c = (c + 1) % copies;
                        }
                        qsort(times, (size_t)nrep, sizeof(double), cmp_double);
                        size_t id = CFG(ti, si, ni, k);
                        if (times[nrep / 2] < med_best[id]) med_best[id] = times[nrep / 2];
                        if (times[0] < min_best[id]) min_best[id] = times[0];
                        qsort(cpus, (size_t)nrep, sizeof(double), cmp_double);
                        if (nt == 1 && cpus[nrep / 2] < cpu_best[id]) cpu_best[id] = cpus[nrep / 2];
                    }
                }
                free(W); free(row); free(X); free(Y); free(act); free(wf);
            }
        }
    }

    printf("sdnpu bench-kernels: kernels %s, %s, weights rotated over %ld MB, median per-call time",
           use_sgemm ? "none: SGEMM (OpenBLAS, 1 thread each) on weights dequantized per call" : sdn_matmul_isa(),
           use_packed ? "quantized types packed" : "file layout", mem_mb);
    if (repeat > 1) printf(" (fastest of %ld rounds)", repeat);
    printf("\nstreaming-read probe (%ld MB):", mem_mb);
    for (int k = 0; k < nthr; k++) {
        const int v = probe_var[tlist[k]];
        printf("  %ld thread%s %.1f GB/s (%d stream%s/thread, %s)", tlist[k], tlist[k] > 1 ? "s" : "",
               probe_gbs[tlist[k]], v < 3 ? 1 : 4, v < 3 ? "" : "s",
               v % 3 == 0 ? "hw prefetch" : v % 3 == 1 ? "sw prefetch 1 KB" : "sw prefetch 4 KB");
    }
    printf("\n%%bw = weight GB/s of the median call / probe GB/s measured with each type; us(cpu) = median thread CPU time "
           "of a 1-thread call (without the time other processes ran)\n");
    double sum_ratio[16] = {0};
    int cnt_ratio[16] = {0};
    for (int ti = 0; ti < ntypes; ti++) {
        const uint32_t wt = (uint32_t)types[ti];
        printf("\n%-5s probe:", sdn_type_name(wt));
        for (int k = 0; k < nthr; k++) printf(" %ld thr %.1f GB/s", tlist[k], probe_t[ti][tlist[k]]);
        printf("\n%-5s %-10s %3s %3s %9s %9s %9s %8s %8s %5s\n", "type", "out x in", "n", "thr", "us/call", "us(min)",
               "us(cpu)", "wGB/s", "GFLOP/s", "%bw");
        for (int si = 0; si < nshapes; si++) {
            const int64_t out = shapes[si][0], in = shapes[si][1];
            const size_t rb = sdn_type_row_bytes(wt, in);
            if (!rb) {
                printf("%-5s %4ldx%-5ld  skipped: in is not a multiple of the %d-element block\n", sdn_type_name(wt),
                       (long)out, (long)in, sdn_type_block_elems(wt));
                continue;
            }
            const size_t wbytes = rb * (size_t)out;
            for (int ni = 0; ni < nn; ni++)
                for (int k = 0; k < nthr; k++) {
                    const int n = (int)nlist[ni], nt = (int)tlist[k];
                    const size_t id = CFG(ti, si, ni, k);
                    const double med = med_best[id], gbs = (double)wbytes / med / 1e9;
                    const double gflops = 2.0 * n * (double)out * (double)in / med / 1e9;
                    const double ratio = gbs / probe_t[ti][nt];
                    char cpu_s[16] = "-";
                    if (nt == 1) snprintf(cpu_s, sizeof cpu_s, "%.1f", cpu_best[id] * 1e6);
                    printf("%-5s %4ldx%-5ld %3d %3d %9.1f %9.1f %9s %8.2f %8.2f %4.0f%%\n", sdn_type_name(wt),
                           (long)out, (long)in, n, nt, med * 1e6, min_best[id] * 1e6, cpu_s, gbs, gflops, 100 * ratio);
                    if (n == 1 && nt == maxthr) { sum_ratio[ti] += ratio; cnt_ratio[ti]++; }
                }
        }
    }
#undef CFG
    printf("\nn = 1 with %d thread%s, weight GB/s as a share of the probe (mean over shapes; target >= 70%%):\n",
           maxthr, maxthr > 1 ? "s" : "");
    for (int ti = 0; ti < ntypes; ti++)
        if (cnt_ratio[ti])
            printf("  %-5s %5.0f%%%s\n", sdn_type_name((uint32_t)types[ti]), 100 * sum_ratio[ti] / cnt_ratio[ti],
                   sum_ratio[ti] / cnt_ratio[ti] >= 0.7 ? "" : "  (below target)");
done:
    free(probe);
    free(med_best);
    free(min_best);
    free(cpu_best);
    atomic_store(&team.stop, 1);
    for (int t = 1; t < maxthr; t++) pthread_join(team.th[t], NULL);
    return status;
}
