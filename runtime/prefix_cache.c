/* prefix_cache.c - the prefix cache's memory tier (prefix_cache.h): a hash table of blocks by
 * key, a least-recently-used list of the ready ones, claims that make a second context wait
 * for a block the first is computing, and the disk tier (prefix_disk.c) behind a miss. One
 * mutex guards the table; images are read and written outside it. */
#include "runtime/prefix_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "runtime/prefix_disk.h"

enum { B_PENDING = 0, B_READY = 1, B_DEAD = 2 };

struct sdn_pblock {
    sdn_pkey key;
    int32_t tokens[SDN_PREFIX_BLOCK];
    size_t bytes;
    uint8_t *data;
    double cost;
    int state;
    int refs;   /* the claim, pins and waiters */
    int listed; /* in the table (a claim made on a key collision is not) */
    sdn_pblock *hnext, *prev, *next; /* hash chain; LRU list of ready blocks, newest first */
};

struct sdn_pcache {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sdn_pblock **buckets;
    size_t n_buckets, count;
    sdn_pblock *head, *tail;
    uint64_t budget, used;
    sdn_pcache_stats st;
    sdn_pdisk *disk;
};

sdn_pkey sdn_pkey_base(const char *settings) {
    XXH128_hash_t h = XXH3_128bits(settings, strlen(settings));
    return (sdn_pkey){h.low64, h.high64};
}

sdn_pkey sdn_pkey_next(sdn_pkey prev, const int32_t *tokens) {
    uint8_t buf[16 + 4 * SDN_PREFIX_BLOCK];
    memcpy(buf, &prev.lo, 8);
    memcpy(buf + 8, &prev.hi, 8);
    memcpy(buf + 16, tokens, 4 * SDN_PREFIX_BLOCK);
    XXH128_hash_t h = XXH3_128bits(buf, sizeof buf);
    return (sdn_pkey){h.low64, h.high64};
}

int sdn_pcache_new(const sdn_pcache_opts *o, sdn_pcache **out, sdn_err *err) {
    *out = NULL;
    sdn_pcache *pc = calloc(1, sizeof *pc);
    if (!pc || !(pc->buckets = calloc(64, sizeof *pc->buckets))) {
        free(pc);
        return sdn_fail(err, SDN_ENOMEM, "out of memory (prefix cache)");
    }
    pc->n_buckets = 64;
    pthread_mutex_init(&pc->mu, NULL);
    pthread_cond_init(&pc->cv, NULL);
    pc->budget = o ? o->mem_bytes : 0;
    if (o && o->dir) pc->disk = sdn_pdisk_open(o->dir, o->disk_bytes ? o->disk_bytes : SDN_PREFIX_DISK_DEFAULT);
    *out = pc;
    return SDN_OK;
}

void sdn_pcache_free(sdn_pcache *pc) {
    if (!pc) return;
    for (size_t i = 0; i < pc->n_buckets; i++)
        for (sdn_pblock *e = pc->buckets[i], *n; e; e = n) {
            n = e->hnext;
            free(e->data);
            free(e);
        }
    sdn_pdisk_close(pc->disk);
    pthread_cond_destroy(&pc->cv);
    pthread_mutex_destroy(&pc->mu);
    free(pc->buckets);
    free(pc);
}

int sdn_pcache_has_disk(const sdn_pcache *pc) { return pc && sdn_pdisk_on(pc->disk); }

static size_t bucket(const sdn_pcache *pc, sdn_pkey k) { return (size_t)(k.lo ^ (k.hi >> 7)) & (pc->n_buckets - 1); }

static sdn_pblock *find(sdn_pcache *pc, sdn_pkey k) {
    for (sdn_pblock *e = pc->buckets[bucket(pc, k)]; e; e = e->hnext)
        if (e->key.lo == k.lo && e->key.hi == k.hi) return e;
    return NULL;
}

/* Insert e; the table doubles when it holds twice as many blocks as buckets (a failed
 * growth keeps the old table: longer chains, nothing lost). */
static void table_add(sdn_pcache *pc, sdn_pblock *e) {
    if (pc->count + 1 > 2 * pc->n_buckets) {
        sdn_pblock **nb = calloc(pc->n_buckets * 2, sizeof *nb);
        if (nb) {
            sdn_pblock **old = pc->buckets;
            size_t on = pc->n_buckets;
            pc->buckets = nb;
            pc->n_buckets = on * 2;
            for (size_t i = 0; i < on; i++)
                for (sdn_pblock *x = old[i], *n; x; x = n) {
                    n = x->hnext;
                    size_t b = bucket(pc, x->key);
                    x->hnext = nb[b];
                    nb[b] = x;
                }
            free(old);
        }
    }
    size_t b = bucket(pc, e->key);
    e->hnext = pc->buckets[b];
    pc->buckets[b] = e;
    e->listed = 1;
    pc->count++;
}

static void table_remove(sdn_pcache *pc, sdn_pblock *e) {
    if (!e->listed) return;
    for (sdn_pblock **p = &pc->buckets[bucket(pc, e->key)]; *p; p = &(*p)->hnext)
        if (*p == e) {
            *p = e->hnext;
            break;
        }
    e->listed = 0;
    pc->count--;
}

static void lru_unlink(sdn_pcache *pc, sdn_pblock *e) {
    if (e->prev) e->prev->next = e->next;
    else pc->head = e->next;
    if (e->next) e->next->prev = e->prev;
    else pc->tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_front(sdn_pcache *pc, sdn_pblock *e) {
    e->next = pc->head;
    e->prev = NULL;
    if (pc->head) pc->head->prev = e;
    pc->head = e;
    if (!pc->tail) pc->tail = e;
}

/* Evict unpinned ready blocks, oldest first, until the images fit the budget. */
static void evict(sdn_pcache *pc) {
    sdn_pblock *e = pc->tail;
    while (pc->used > pc->budget && e) {
        sdn_pblock *prev = e->prev;
        if (e->refs == 0) {
            lru_unlink(pc, e);
            table_remove(pc, e);
            pc->used -= e->bytes;
            pc->st.evictions++;
            free(e->data);
            free(e);
        }
        e = prev;
    }
}

/* A ready block into the list and the accounts (mu held). */
static void make_ready(sdn_pcache *pc, sdn_pblock *e, uint8_t *data, double cost) {
    e->data = data;
    e->cost = cost;
    e->state = B_READY;
    pc->used += e->bytes;
    lru_front(pc, e);
    pthread_cond_broadcast(&pc->cv);
}

static void unref(sdn_pcache *pc, sdn_pblock *e) {
    if (--e->refs == 0 && e->state == B_DEAD) {
        free(e->data);
        free(e);
    }
}

int sdn_pcache_get(sdn_pcache *pc, sdn_pkey key, const int32_t *tokens, size_t bytes, int wait, sdn_pblock **b) {
    *b = NULL;
    pthread_mutex_lock(&pc->mu);
    sdn_pblock *e;
    for (;;) {
        e = find(pc, key);
        if (!e) break;
        if (e->bytes != bytes || memcmp(e->tokens, tokens, sizeof e->tokens)) {
            e = NULL; /* a key collision, or a context of another layout: computed, not shared */
            break;
        }
        if (e->state == B_READY) {
            e->refs++;
            lru_unlink(pc, e);
            lru_front(pc, e);
            pc->st.hits_mem++;
            pthread_mutex_unlock(&pc->mu);
            *b = e;
            return SDN_PC_MEM;
        }
        if (!wait) {
            pthread_mutex_unlock(&pc->mu);
            return SDN_PC_BUSY;
        }
        e->refs++;
        while (e->state == B_PENDING) pthread_cond_wait(&pc->cv, &pc->mu);
        if (e->state == B_READY) {
            lru_unlink(pc, e);
            lru_front(pc, e);
            pc->st.hits_mem++;
            pthread_mutex_unlock(&pc->mu);
            *b = e;
            return SDN_PC_MEM;
        }
        unref(pc, e); /* dropped by its claimer: look again (and claim it) */
    }
    int collided = find(pc, key) != NULL;
    sdn_pblock *c = calloc(1, sizeof *c);
    if (!c) {
        pthread_mutex_unlock(&pc->mu);
        return -SDN_ENOMEM;
    }
    c->key = key;
    memcpy(c->tokens, tokens, sizeof c->tokens);
    c->bytes = bytes;
    c->refs = 1;
    if (!collided) table_add(pc, c);
    pthread_mutex_unlock(&pc->mu);
    *b = c;
    double cost = 0;
    uint8_t *img = collided ? NULL : sdn_pdisk_load(pc->disk, key, tokens, bytes, &cost);
    pthread_mutex_lock(&pc->mu);
    if (img) {
        make_ready(pc, c, img, cost);
        pc->st.hits_disk++;
        evict(pc);
    } else pc->st.misses++;
    pthread_mutex_unlock(&pc->mu);
    return img ? SDN_PC_DISK : SDN_PC_CLAIMED;
}

const uint8_t *sdn_pblock_data(const sdn_pblock *b) { return b->data; }
double sdn_pblock_cost(const sdn_pblock *b) { return b->cost; }

void sdn_pcache_put(sdn_pcache *pc, sdn_pblock *b) {
    if (!b) return;
    pthread_mutex_lock(&pc->mu);
    unref(pc, b);
    evict(pc);
    pthread_mutex_unlock(&pc->mu);
}

void sdn_pcache_publish(sdn_pcache *pc, sdn_pblock *b, uint8_t *image, double cost_s) {
    pthread_mutex_lock(&pc->mu);
    int listed = b->listed;
    if (listed) make_ready(pc, b, image, cost_s); /* the claim's reference now pins it while it is written */
    else {
        b->data = image;
        b->state = B_DEAD;
    }
    pthread_mutex_unlock(&pc->mu);
    if (listed && sdn_pdisk_store(pc->disk, b->key, b->tokens, image, b->bytes, cost_s)) {
        pthread_mutex_lock(&pc->mu);
        pc->st.disk_writes++;
        pthread_mutex_unlock(&pc->mu);
    }
    sdn_pcache_put(pc, b);
}

void sdn_pcache_drop(sdn_pcache *pc, sdn_pblock *b) {
    if (!b) return;
    pthread_mutex_lock(&pc->mu);
    table_remove(pc, b);
    b->state = B_DEAD;
    pthread_cond_broadcast(&pc->cv);
    unref(pc, b);
    pthread_mutex_unlock(&pc->mu);
}

void sdn_pcache_get_stats(sdn_pcache *pc, sdn_pcache_stats *out) {
    memset(out, 0, sizeof *out);
    if (!pc) return;
    pthread_mutex_lock(&pc->mu);
    *out = pc->st;
    out->mem_bytes = pc->used;
    out->mem_budget = pc->budget;
    long n = 0;
    for (sdn_pblock *e = pc->head; e; e = e->next) n++;
    out->mem_blocks = n;
    pthread_mutex_unlock(&pc->mu);
    sdn_pdisk_stats(pc->disk, &out->disk_bytes, &out->disk_budget, &out->disk_damaged, &out->disk_evictions);
    out->disk_on = sdn_pdisk_on(pc->disk);
}
