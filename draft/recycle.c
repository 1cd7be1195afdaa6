/* recycle.c - the model-derived candidate table (see recycle.h). */
#include "draft/recycle.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

struct sdn_recycle {
    int vocab, k;
    int32_t *cand; /* [vocab][k], -1 = empty */
    uint64_t hits[SDN_RECYCLE_MAX_K], updates;
    pthread_mutex_t mu;
};

static const char MAGIC[8] = {'S', 'D', 'N', 'R', 'C', 'Y', '0', '1'};

int sdn_recycle_new(int vocab, int k, sdn_recycle **out, sdn_err *err) {
    *out = NULL;
    if (vocab < 1 || k < 1 || k > SDN_RECYCLE_MAX_K)
        return sdn_fail(err, SDN_EINVAL, "candidate table: vocab %d, k %d (need vocab >= 1, 1 <= k <= %d)", vocab, k, SDN_RECYCLE_MAX_K);
    sdn_recycle *r = calloc(1, sizeof *r);
    if (!r) return sdn_fail(err, SDN_ENOMEM, "out of memory");
    r->vocab = vocab;
    r->k = k;
    r->cand = malloc((size_t)vocab * (size_t)k * sizeof(int32_t));
    if (!r->cand || pthread_mutex_init(&r->mu, NULL)) {
        free(r->cand);
        free(r);
        return sdn_fail(err, SDN_ENOMEM, "out of memory (candidate table of %d x %d)", vocab, k);
    }
    memset(r->cand, 0xff, (size_t)vocab * (size_t)k * sizeof(int32_t));
    *out = r;
    return SDN_OK;
}

void sdn_recycle_free(sdn_recycle *r) {
    if (!r) return;
    pthread_mutex_destroy(&r->mu);
    free(r->cand);
    free(r);
}

int sdn_recycle_vocab(const sdn_recycle *r) { return r->vocab; }
int sdn_recycle_k(const sdn_recycle *r) { return r->k; }

void sdn_recycle_update(sdn_recycle *r, const int32_t *t, const int32_t *cand, int stride, int n, int n_rows, uint64_t *hits,
                        uint64_t *rows) {
    if (n > r->k) n = r->k;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < n_rows; i++) {
        if (t[i] < 0 || t[i] >= r->vocab) continue;
        const int32_t *c = cand + (size_t)i * (size_t)stride;
        if (n > 0 && (c[0] < 0 || c[0] >= r->vocab)) continue; /* a row not known (an offline replay's rejected node) */
        int32_t *row = r->cand + (size_t)t[i] * (size_t)r->k;
        if (row[0] >= 0) { /* a row seen before: where the model's next token stood in it */
            r->updates++;
            if (rows) (*rows)++;
            for (int j = 0; j < r->k && row[j] >= 0; j++)
                if (n > 0 && row[j] == c[0]) {
                    r->hits[j]++;
                    if (hits) hits[j]++;
                    break;
                }
        }
        int m = 0;
        for (int j = 0; j < n; j++)
            if (c[j] >= 0 && c[j] < r->vocab) row[m++] = c[j];
        if (m == 0) continue; /* nothing valid: keep the old row */
        for (; m < r->k; m++) row[m] = -1;
    }
    pthread_mutex_unlock(&r->mu);
}

int sdn_recycle_get(sdn_recycle *r, int32_t t, int32_t *out) {
    if (t < 0 || t >= r->vocab) return 0;
    const int32_t *row = r->cand + (size_t)t * (size_t)r->k;
    int m = 0;
    pthread_mutex_lock(&r->mu);
    while (m < r->k && row[m] >= 0) out[m] = row[m], m++;
    pthread_mutex_unlock(&r->mu);
    return m;
}

void sdn_recycle_stats(sdn_recycle *r, uint64_t *hits, uint64_t *updates) {
    pthread_mutex_lock(&r->mu);
    if (hits) memcpy(hits, r->hits, (size_t)r->k * sizeof *hits);
    if (updates) *updates = r->updates;
    pthread_mutex_unlock(&r->mu);
}

static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint32_t get32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

static size_t ser_len(int vocab, int k) { return 8 + 4 + 4 + 8 + 8 * (size_t)k + 4 * (size_t)vocab * (size_t)k + 8; }

int sdn_recycle_serialize(sdn_recycle *r, uint8_t **out, size_t *len, sdn_err *err) {
    size_t n = ser_len(r->vocab, r->k);
    uint8_t *b = malloc(n);
    if (!b) return sdn_fail(err, SDN_ENOMEM, "out of memory");
    pthread_mutex_lock(&r->mu);
    memcpy(b, MAGIC, 8);
    put32(b + 8, (uint32_t)r->vocab);
    put32(b + 12, (uint32_t)r->k);
    put64(b + 16, r->updates);
    uint8_t *p = b + 24;
    for (int j = 0; j < r->k; j++, p += 8) put64(p, r->hits[j]);
    for (size_t i = 0; i < (size_t)r->vocab * (size_t)r->k; i++, p += 4) put32(p, (uint32_t)r->cand[i]);
    pthread_mutex_unlock(&r->mu);
    put64(p, XXH3_64bits(b, (size_t)(p - b)));
    *out = b;
    *len = n;
    return SDN_OK;
}

int sdn_recycle_load(sdn_recycle *r, const uint8_t *buf, size_t len, const char *what, sdn_err *err) {
    if (!what) what = "candidate table";
    if (len < 24 || memcmp(buf, MAGIC, 8)) return sdn_fail(err, SDN_EFORMAT, "%s: not a candidate table (bad magic or %zu bytes)", what, len);
    uint32_t vocab = get32(buf + 8), k = get32(buf + 12);
    if (vocab != (uint32_t)r->vocab || k != (uint32_t)r->k)
        return sdn_fail(err, SDN_EFORMAT, "%s: table of vocab %u, k %u where the model needs vocab %d, k %d", what, vocab, k, r->vocab, r->k);
    size_t n = ser_len(r->vocab, r->k);
    if (len != n) return sdn_fail(err, SDN_EFORMAT, "%s: %zu bytes where %zu were expected", what, len, n);
    if (XXH3_64bits(buf, n - 8) != get64(buf + n - 8)) return sdn_fail(err, SDN_EFORMAT, "%s: checksum mismatch (damaged)", what);
    const uint8_t *p = buf + 24 + 8 * (size_t)k;
    for (size_t i = 0; i < (size_t)vocab * k; i++) {
        int32_t v = (int32_t)get32(p + 4 * i);
        if (v < -1 || v >= (int32_t)vocab)
            return sdn_fail(err, SDN_EFORMAT, "%s: token id %d of row %zu is out of range", what, (int)v, i / k);
    }
    pthread_mutex_lock(&r->mu);
    r->updates = get64(buf + 16);
    for (uint32_t j = 0; j < k; j++) r->hits[j] = get64(buf + 24 + 8 * (size_t)j);
    for (size_t i = 0; i < (size_t)vocab * k; i++) r->cand[i] = (int32_t)get32(p + 4 * i);
    pthread_mutex_unlock(&r->mu);
    return SDN_OK;
}
