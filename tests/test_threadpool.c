/* test_threadpool.c - kernels/threadpool.c.
 *
 * Regression test for the lost wakeup fixed in 66577ab: a worker used to read the job
 * generation when it started running, so a job published by sdn_pool_run before a freshly
 * created worker got scheduled was taken for "already seen"; that worker never ran it,
 * `pending` never reached zero and the caller spun forever. The test creates pools and runs a
 * job at once, thousands of times, with more threads than cores (so workers often start
 * late), and runs bursts of tiny jobs where workers finish before the caller starts waiting.
 * Every test body runs under a watchdog (alarm): a hang fails the test with a message instead
 * of hanging the suite. With the old code (seen = atomic_load(&p->gen) at worker start) the
 * first test hangs within its first rounds and the watchdog fails it.
 *
 * Also: every index of a parallel-for over sdn_pool_range runs exactly once, for many n,
 * alignments and thread counts (checked against a per-index counter), and the ranges are
 * contiguous, ordered and aligned. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "kernels/threadpool.h"

static const char *watch_what = "";

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "\ntest_threadpool: watchdog expired (a pool job never completed: lost wakeup?) in ";
    ssize_t w = write(2, msg, sizeof msg - 1);
    w = write(2, watch_what, strlen(watch_what));
    w = write(2, "\n", 1);
    (void)w;
    _exit(3);
}

static void watchdog(const char *what, unsigned seconds) {
    watch_what = what;
    signal(SIGALRM, on_alarm);
    alarm(seconds);
}

typedef struct {
    atomic_int calls;
    atomic_int per_thread[64];
    int nth_seen;
    atomic_int bad_nth;
} count_job;

static void count_fn(void *ctx, int ith, int nth) {
    count_job *j = ctx;
    atomic_fetch_add(&j->calls, 1);
    if (ith < 0 || ith >= 64 || nth != j->nth_seen) atomic_fetch_add(&j->bad_nth, 1);
    else atomic_fetch_add(&j->per_thread[ith], 1);
}

/* A job published right after creation, before the workers have run: every worker must run it. */
static void test_job_right_after_create(void **state) {
    (void)state;
    watchdog("job right after sdn_pool_new", 60);
    for (int round = 0; round < 1500; round++) {
        int n = 2 + round % 7; /* 2..8 threads on a machine with fewer cores */
        sdn_pool *p = sdn_pool_new(n);
        assert_non_null(p);
        assert_int_equal(sdn_pool_size(p), n);
        count_job j = {.nth_seen = n};
        sdn_pool_run(p, count_fn, &j);
        assert_int_equal(atomic_load(&j.calls), n);
        assert_int_equal(atomic_load(&j.bad_nth), 0);
        for (int t = 0; t < n; t++) assert_int_equal(atomic_load(&j.per_thread[t]), 1);
        sdn_pool_free(p);
    }
    alarm(0);
}

/* Many tiny jobs back to back: workers finish (and go back to spinning or sleeping) before
 * the caller starts waiting, and sleep between bursts. */
static void test_rapid_tiny_jobs(void **state) {
    (void)state;
    watchdog("rapid tiny jobs", 60);
    for (int n = 2; n <= 4; n++) {
        sdn_pool *p = sdn_pool_new(n);
        assert_non_null(p);
        count_job j = {.nth_seen = n};
        int runs = 0;
        for (int burst = 0; burst < 4; burst++) {
            for (int k = 0; k < 1000; k++, runs++) sdn_pool_run(p, count_fn, &j);
            /* let every worker fall asleep on the condition variable, then wake them again */
            if (burst % 2) usleep(5000);
        }
        assert_int_equal(atomic_load(&j.calls), runs * n);
        for (int t = 0; t < n; t++) assert_int_equal(atomic_load(&j.per_thread[t]), runs);
        assert_int_equal(atomic_load(&j.bad_nth), 0);
        sdn_pool_free(p);
    }
    alarm(0);
}

/* A pool freed right after creation (workers maybe not started) and one never used. */
static void test_free_without_jobs(void **state) {
    (void)state;
    watchdog("free without jobs", 60);
    for (int round = 0; round < 300; round++) sdn_pool_free(sdn_pool_new(1 + round % 5));
    sdn_pool_free(NULL);
    assert_int_equal(sdn_pool_size(NULL), 1);
    alarm(0);
}

/* parallel-for over sdn_pool_range: every index exactly once */
typedef struct {
    long n, align;
    atomic_int *hits;
    atomic_int bad;
} pfor_job;

static void pfor_fn(void *ctx, int ith, int nth) {
    pfor_job *j = ctx;
    long b, e;
    sdn_pool_range(j->n, ith, nth, j->align, &b, &e);
    if (b < 0 || e > j->n || b > e || (b % j->align && b != j->n)) atomic_fetch_add(&j->bad, 1);
    for (long i = b; i < e; i++) atomic_fetch_add(&j->hits[i], 1);
}

static void test_parallel_for_each_index_once(void **state) {
    (void)state;
    watchdog("parallel-for", 60);
    const long ns[] = {0, 1, 2, 3, 7, 8, 31, 64, 65, 100, 257, 1000, 4099};
    const long aligns[] = {1, 2, 4, 16, 32};
    for (int nth = 1; nth <= 9; nth++) {
        sdn_pool *p = sdn_pool_new(nth);
        assert_non_null(p);
        for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++)
            for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
                long n = ns[k];
                atomic_int *hits = calloc((size_t)n + 1, sizeof *hits);
                assert_non_null(hits);
                pfor_job j = {.n = n, .align = aligns[a], .hits = hits};
                sdn_pool_run(p, pfor_fn, &j);
                assert_int_equal(atomic_load(&j.bad), 0);
                for (long i = 0; i < n; i++)
                    if (atomic_load(&hits[i]) != 1)
                        fail_msg("n %ld, align %ld, %d threads: index %ld ran %d times", n, aligns[a], nth, i, atomic_load(&hits[i]));
                free(hits);
            }
        sdn_pool_free(p);
    }
    alarm(0);
}

/* sdn_pool_range alone: contiguous, ordered, aligned, balanced to within one aligned block. */
static void test_range_partition(void **state) {
    (void)state;
    for (long n = 0; n <= 300; n += 7)
        for (long align = 1; align <= 64; align *= 4)
            for (int nth = 1; nth <= 12; nth++) {
                long prev = 0, lo = n + 1, hi = -1;
                for (int t = 0; t < nth; t++) {
                    long b, e;
                    sdn_pool_range(n, t, nth, align, &b, &e);
                    assert_int_equal(b, prev);
                    assert_true(e >= b);
                    if (e < n) assert_int_equal(e % align, 0);
                    long blocks = (e - b + align - 1) / align;
                    if (blocks < lo) lo = blocks;
                    if (blocks > hi) hi = blocks;
                    prev = e;
                }
                assert_int_equal(prev, n);
                assert_true(hi - lo <= 1);
            }
    /* align below 1 is taken as 1 */
    long b, e;
    sdn_pool_range(10, 1, 2, 0, &b, &e);
    assert_int_equal(b, 5);
    assert_int_equal(e, 10);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_right_after_create), cmocka_unit_test(test_rapid_tiny_jobs),
        cmocka_unit_test(test_free_without_jobs),      cmocka_unit_test(test_parallel_for_each_index_once),
        cmocka_unit_test(test_range_partition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
