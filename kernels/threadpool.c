/* threadpool.c - spin-then-sleep worker pool (see threadpool.h).
 *
 * A job is published by bumping `gen` (an atomic generation counter). Workers poll `gen`
 * for a bounded number of iterations, then wait on `cv`. The caller runs its own share and
 * then waits until `pending` drops to zero. */
#include "kernels/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
/* YIELD: the spin-wait hint (a no-op on most cores, lets an SMT sibling or an emulator's other
 * thread run) */
#define CPU_RELAX() __asm__ __volatile__("yield" ::: "memory")
#else
#define CPU_RELAX() ((void)0)
#endif

/* Spin budget before a worker sleeps (~0.1-0.3 ms of pause instructions): long enough to
 * stay awake between the jobs of one forward pass, short enough not to steal a core from
 * other processes (or OpenBLAS) when the pool is idle. */
#define SPIN_ITERS 2000
/* The caller waiting for the workers yields the core after this many spins, so a worker
 * descheduled on an oversubscribed machine gets to run. */
#define WAIT_SPINS 4000

struct sdn_pool {
    int n;
    pthread_t *th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint gen;
    atomic_int pending;
    atomic_int quit;
    sdn_pool_fn fn;
    void *ctx;
};

typedef struct { sdn_pool *p; int ith; } warg;

static void *worker(void *a) {
    warg w = *(warg *)a;
    free(a);
    sdn_pool *p = w.p;
    unsigned seen = 0; /* the generation at creation: a job published before this thread runs is still seen */
    for (;;) {
        int spins = 0;
        unsigned g;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen && !atomic_load(&p->quit)) {
            if (++spins < SPIN_ITERS) { CPU_RELAX(); continue; }
            pthread_mutex_lock(&p->mu);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->quit)) pthread_cond_wait(&p->cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit)) return NULL;
        seen = g;
        p->fn(p->ctx, w.ith, p->n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
    }
}

sdn_pool *sdn_pool_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    sdn_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->th = calloc((size_t)n_threads, sizeof *p->th);
    if (!p->th) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        free(p);
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        warg *a = malloc(sizeof *a);
        if (!a) {
            p->n = i; /* run with the threads we got */
            break;
        }
        a->p = p;
        a->ith = i;
        if (pthread_create(&p->th[i], NULL, worker, a) != 0) {
            free(a);
            p->n = i; /* run with the threads we got */
            break;
        }
    }
    return p;
}

void sdn_pool_free(sdn_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->th[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->th);
    free(p);
}

int sdn_pool_size(const sdn_pool *p) { return p ? p->n : 1; }

void sdn_pool_run(sdn_pool *p, sdn_pool_fn fn, void *ctx) {
    if (!p || p->n == 1) { fn(ctx, 0, 1); return; }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store(&p->pending, p->n - 1);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    int spins = 0;
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) {
        if (++spins < WAIT_SPINS) CPU_RELAX();
        else sched_yield();
    }
}

void sdn_pool_range(long n, int ith, int nth, long align, long *b, long *e) {
    if (align < 1) align = 1;
    long blocks = (n + align - 1) / align;
    long per = blocks / nth, extra = blocks % nth;
    long bb = ith * per + (ith < extra ? ith : extra);
    long eb = bb + per + (ith < extra ? 1 : 0);
    *b = bb * align < n ? bb * align : n;
    *e = eb * align < n ? eb * align : n;
}
