/* test_recycle.c - the model-derived candidate table (draft/recycle.h) against a naive
 * reference: random rows of candidates replace a token's row (newest wins), the rank counts
 * are where the next best token stood in the old row (the table's and each call's own tally),
 * reads give exactly the newest row;
 * serialize/load round trip; a damaged, truncated, other-shape or out-of-range table is
 * refused naming what is wrong and leaves the table as it was; concurrent writers and readers
 * (server slots) keep every row one writer's whole row. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <cmocka.h>

#include "common/sdn_util.h"
#include "draft/recycle.h"

enum { V = 300, K = 5 };

/* the naive table: rows as last written, rank counts by a linear search */
typedef struct naive {
    int32_t row[V][K];
    int n[V];
    uint64_t hits[K], updates;
} naive;

static void naive_update(naive *nv, int32_t t, const int32_t *c, int n) {
    if (t < 0 || t >= V) return;
    if (n > 0 && (c[0] < 0 || c[0] >= V)) return; /* a row not known: neither counted nor stored */
    if (nv->n[t] > 0) {
        nv->updates++;
        for (int j = 0; j < nv->n[t]; j++)
            if (n > 0 && nv->row[t][j] == c[0]) { nv->hits[j]++; break; }
    }
    int m = 0;
    int32_t r[K];
    for (int j = 0; j < n && j < K; j++)
        if (c[j] >= 0 && c[j] < V) r[m++] = c[j];
    if (m == 0) return;
    memcpy(nv->row[t], r, sizeof(int32_t) * (size_t)m);
    nv->n[t] = m;
}

static void check_equal(sdn_recycle *r, const naive *nv) {
    int32_t got[K];
    for (int t = -2; t < V + 2; t++) {
        int m = sdn_recycle_get(r, t, got);
        int want = t >= 0 && t < V ? nv->n[t] : 0;
        assert_int_equal(m, want);
        if (want) assert_memory_equal(got, nv->row[t], sizeof(int32_t) * (size_t)want);
    }
    uint64_t hits[K], upd;
    sdn_recycle_stats(r, hits, &upd);
    assert_int_equal(upd, nv->updates);
    for (int j = 0; j < K; j++) assert_int_equal(hits[j], nv->hits[j]);
}

static void test_against_naive(void **state) {
    (void)state;
    sdn_err e = {0};
    sdn_recycle *r;
    assert_int_equal(sdn_recycle_new(V, K, &r, &e), SDN_OK);
    assert_int_equal(sdn_recycle_vocab(r), V);
    assert_int_equal(sdn_recycle_k(r), K);
    naive *nv = calloc(1, sizeof *nv);
    uint64_t mine[K] = {0}, mine_rows = 0; /* the callers' tally, summed over the calls */
    sdn_rng g;
    sdn_rng_seed(&g, 7);
    for (int it = 0; it < 3000; it++) {
        int rows = 1 + (int)sdn_rng_below(&g, 6), n = (int)sdn_rng_below(&g, K + 3); /* n > K: clipped */
        int32_t t[6], c[6 * 8];
        for (int i = 0; i < rows; i++) {
            /* few distinct tokens so rows are replaced often; some ids out of range */
            t[i] = (int32_t)sdn_rng_below(&g, 40) - (sdn_rng_below(&g, 50) == 0 ? 45 : 0);
            for (int j = 0; j < 8; j++) c[i * 8 + j] = (int32_t)sdn_rng_below(&g, 12) * 7 + (sdn_rng_below(&g, 30) == 0 ? V : 0);
        }
        sdn_recycle_update(r, t, c, 8, n, rows, mine, &mine_rows);
        for (int i = 0; i < rows; i++) naive_update(nv, t[i], c + i * 8, n < K ? n : K);
        if (it % 500 == 0) check_equal(r, nv);
    }
    check_equal(r, nv);
    uint64_t hits[K], upd;
    sdn_recycle_stats(r, hits, &upd);
    assert_true(upd > 1000 && hits[0] > 0); /* the test exercised the counts */
    assert_int_equal(mine_rows, nv->updates);
    for (int j = 0; j < K; j++) assert_int_equal(mine[j], nv->hits[j]);
    free(nv);
    sdn_recycle_free(r);
    assert_int_equal(sdn_recycle_new(0, K, &r, &e), SDN_EINVAL);
    assert_int_equal(sdn_recycle_new(V, SDN_RECYCLE_MAX_K + 1, &r, &e), SDN_EINVAL);
    assert_non_null(strstr(e.msg, "k 17"));
}

static sdn_recycle *filled(int seed) {
    sdn_err e = {0};
    sdn_recycle *r;
    assert_int_equal(sdn_recycle_new(V, K, &r, &e), SDN_OK);
    sdn_rng g;
    sdn_rng_seed(&g, (uint64_t)seed);
    for (int it = 0; it < 500; it++) {
        int32_t t = (int32_t)sdn_rng_below(&g, V), c[K];
        for (int j = 0; j < K; j++) c[j] = (int32_t)sdn_rng_below(&g, V);
        sdn_recycle_update(r, &t, c, K, 1 + (int)sdn_rng_below(&g, K), 1, NULL, NULL);
    }
    return r;
}

static void expect_refused(sdn_recycle *dst, const uint8_t *b, size_t n, const char *why) {
    sdn_err e = {0};
    uint8_t *before, *after;
    size_t nb, na;
    assert_int_equal(sdn_recycle_serialize(dst, &before, &nb, &e), SDN_OK);
    assert_int_equal(sdn_recycle_load(dst, b, n, "table.bin", &e), SDN_EFORMAT);
    if (!strstr(e.msg, why) || !strstr(e.msg, "table.bin")) fail_msg("message '%s' does not say '%s'", e.msg, why);
    assert_int_equal(sdn_recycle_serialize(dst, &after, &na, &e), SDN_OK);
    assert_int_equal(na, nb);
    assert_memory_equal(before, after, na); /* left as it was */
    free(before);
    free(after);
}

static void test_serialize(void **state) {
    (void)state;
    sdn_err e = {0};
    sdn_recycle *a = filled(1), *b = filled(2), *other;
    uint8_t *buf, *buf2;
    size_t n, n2;
    assert_int_equal(sdn_recycle_serialize(a, &buf, &n, &e), SDN_OK);
    assert_int_equal(sdn_recycle_load(b, buf, n, NULL, &e), SDN_OK);
    assert_int_equal(sdn_recycle_serialize(b, &buf2, &n2, &e), SDN_OK);
    assert_int_equal(n, n2);
    assert_memory_equal(buf, buf2, n);
    int32_t x[K], y[K];
    for (int t = 0; t < V; t++) {
        int m = sdn_recycle_get(a, t, x);
        assert_int_equal(sdn_recycle_get(b, t, y), m);
        if (m) assert_memory_equal(x, y, sizeof(int32_t) * (size_t)m);
    }
    free(buf2);
    /* refused: truncated, bad magic, flipped byte, another shape, an id out of range */
    sdn_recycle *c = filled(3);
    expect_refused(c, buf, n - 1, "bytes");
    expect_refused(c, buf, 10, "not a candidate table");
    uint8_t *bad = malloc(n);
    memcpy(bad, buf, n);
    bad[0] = 'X';
    expect_refused(c, bad, n, "not a candidate table");
    memcpy(bad, buf, n);
    bad[n / 2] ^= 0x10;
    expect_refused(c, bad, n, "checksum");
    memcpy(bad, buf, n);
    size_t row0 = 24 + 8 * K; /* first candidate: set it to V, then fix the checksum */
    bad[row0] = (uint8_t)(V & 0xff), bad[row0 + 1] = (uint8_t)(V >> 8), bad[row0 + 2] = 0, bad[row0 + 3] = 0;
    uint64_t h = XXH3_64bits(bad, n - 8);
    for (int i = 0; i < 8; i++) bad[n - 8 + i] = (uint8_t)(h >> (8 * i));
    expect_refused(c, bad, n, "out of range");
    assert_int_equal(sdn_recycle_new(V + 1, K, &other, &e), SDN_OK);
    assert_int_equal(sdn_recycle_load(other, buf, n, "t", &e), SDN_EFORMAT);
    assert_non_null(strstr(e.msg, "vocab 300"));
    sdn_recycle_free(other);
    free(bad);
    free(buf);
    sdn_recycle_free(a);
    sdn_recycle_free(b);
    sdn_recycle_free(c);
}

/* Two writers and a reader at once: every row read is one some writer wrote whole (a writer w
 * writes rows whose candidates are all w * 1000 + t % 1000 ... ). */
typedef struct thr {
    sdn_recycle *r;
    int w, bad;
} thr;

static void *writer(void *p) {
    thr *x = p;
    for (int it = 0; it < 20000; it++) {
        int32_t t = it % V, c[K];
        for (int j = 0; j < K; j++) c[j] = (x->w * 50 + t) % V;
        sdn_recycle_update(x->r, &t, c, K, K, 1, NULL, NULL);
    }
    return NULL;
}
static void *reader(void *p) {
    thr *x = p;
    int32_t o[K];
    for (int it = 0; it < 20000; it++) {
        int m = sdn_recycle_get(x->r, it % V, o);
        for (int j = 1; j < m; j++)
            if (o[j] != o[0]) x->bad++;
    }
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    sdn_err e = {0};
    sdn_recycle *r;
    assert_int_equal(sdn_recycle_new(V, K, &r, &e), SDN_OK);
    pthread_t th[3];
    thr a = {r, 1, 0}, b = {r, 2, 0}, c = {r, 0, 0};
    pthread_create(&th[0], NULL, writer, &a);
    pthread_create(&th[1], NULL, writer, &b);
    pthread_create(&th[2], NULL, reader, &c);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    assert_int_equal(c.bad, 0);
    sdn_recycle_free(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_naive),
        cmocka_unit_test(test_serialize),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
