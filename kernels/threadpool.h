/* threadpool.h - a fixed pool of worker threads for the forward pass (sized by --threads).
 *
 * sdn_pool_run(pool, fn, ctx) calls fn(ctx, ith, nth) once on each of the nth threads (the
 * caller is thread 0) and returns when all are done. Workers spin briefly after a job (a
 * decode step issues hundreds of small jobs) and then sleep on a condition variable, so an
 * idle pool does not compete with OpenBLAS's own threads during large GEMMs. */
#ifndef SDN_THREADPOOL_H
#define SDN_THREADPOOL_H

typedef struct sdn_pool sdn_pool;
typedef void (*sdn_pool_fn)(void *ctx, int ith, int nth);

/* Create a pool of n_threads (>= 1) threads including the caller. NULL on failure. */
sdn_pool *sdn_pool_new(int n_threads);
void sdn_pool_free(sdn_pool *p);
int sdn_pool_size(const sdn_pool *p);
/* Run fn on every thread and wait. Not reentrant: fn must not call sdn_pool_run. */
void sdn_pool_run(sdn_pool *p, sdn_pool_fn fn, void *ctx);

/* Split [0, n) into nth nearly equal contiguous ranges, aligned to `align` elements;
 * thread ith gets [*b, *e). */
void sdn_pool_range(long n, int ith, int nth, long align, long *b, long *e);

#endif
