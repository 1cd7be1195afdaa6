/* prefix_cache.h - the prefix cache: what prefill computed for the prompt prefixes a model has
 * read, kept so that no context reads the same document twice.
 *
 * A block is SDN_PREFIX_BLOCK consecutive prompt positions starting at a multiple of it: the
 * KV entries of those positions in every layer (the KV cache's own tile bytes) and the last
 * layer's output at each of them (so the prefill's top-k predictions can be made again, bit
 * for bit, for the request at hand). Its key chains the hash of every token before it:
 * key(0) = H(settings), key(i + 1) = H(key(i), tokens of block i), where the settings are
 * everything that changes the bytes (the model file's fingerprint, the KV cache types, the
 * kernel path, the image format). The prefill is chunk-invariant (engine/forward.h), so a
 * block's bytes depend on nothing but its key: an imported block is exactly what prefilling
 * the prefix would have written.
 *
 * Memory tier: one per model, shared by all its contexts (thread-safe), under a byte budget;
 * the least recently used blocks not in use are evicted. Two contexts that want the same
 * absent block at once: the first claims it and computes it, the second waits for it
 * (sdn_pcache_get with wait) and imports it, so it is computed once.
 *
 * Disk tier (optional, off unless a directory is given): one file per block in DIR/blocks,
 * written to a temporary name and renamed (a reader sees a whole file or none), with a header
 * naming its key, tokens and size and an XXH3-128 checksum of the image; an SQLite index
 * (DIR/index.sqlite, WAL) holds each file's size and last use, for the disk budget (least
 * recently used files deleted first). Several processes may share the directory. A file that
 * is damaged, truncated or of another key is reported once (a warning naming it), deleted
 * and computed again; a directory that cannot be written (read-only, full disk) gives one
 * warning and the cache goes on in memory only. Files and the directory are the owner's only
 * (0600 / 0700): cached KV reveals the documents. */
#ifndef SDN_PREFIX_CACHE_H
#define SDN_PREFIX_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "attention/kv_cache.h"
#include "common/sdn_err.h"

#define SDN_PREFIX_BLOCK SDN_KV_TILE
#define SDN_PREFIX_DISK_DEFAULT ((uint64_t)4 << 30) /* disk budget when none is given */

typedef struct sdn_pkey {
    uint64_t lo, hi;
} sdn_pkey;

/* The chain's first key from the settings' text, and the key of the block after `prev`
 * holding tokens[0 .. SDN_PREFIX_BLOCK). */
sdn_pkey sdn_pkey_base(const char *settings);
sdn_pkey sdn_pkey_next(sdn_pkey prev, const int32_t *tokens);

typedef struct sdn_pcache_opts {
    uint64_t mem_bytes;  /* memory budget (0: a block is held only while a context uses it) */
    const char *dir;     /* disk tier directory (NULL: none) */
    uint64_t disk_bytes; /* disk budget (0: SDN_PREFIX_DISK_DEFAULT) */
} sdn_pcache_opts;

typedef struct sdn_pcache sdn_pcache;
typedef struct sdn_pblock sdn_pblock;

/* A cache. Errors: SDN_ENOMEM. A disk directory that cannot be used is not an error: one
 * warning, and the cache is memory-only. */
int sdn_pcache_new(const sdn_pcache_opts *o, sdn_pcache **out, sdn_err *err);
void sdn_pcache_free(sdn_pcache *pc);
/* 1 when the disk tier is in use (given and not switched off by a failure). */
int sdn_pcache_has_disk(const sdn_pcache *pc);

typedef enum sdn_pc_result {
    SDN_PC_MEM = 1,     /* found in memory: *b is pinned (sdn_pcache_put when done) */
    SDN_PC_DISK = 2,    /* loaded from the disk tier: *b is pinned, and now in memory too */
    SDN_PC_CLAIMED = 3, /* absent: *b is the caller's claim, to sdn_pcache_publish or _drop */
    SDN_PC_BUSY = 4,    /* without wait: another context is computing it; *b is NULL */
} sdn_pc_result;

/* Look block `key` up. tokens: the block's SDN_PREFIX_BLOCK tokens (an entry must hold the
 * same), bytes: the image size the caller's context uses (an entry of another size is not
 * used). wait: when another context is computing the block, wait for it rather than return
 * SDN_PC_BUSY. Returns an sdn_pc_result, or < 0 when out of memory (-SDN_ENOMEM). */
int sdn_pcache_get(sdn_pcache *pc, sdn_pkey key, const int32_t *tokens, size_t bytes, int wait, sdn_pblock **b);
/* A pinned block's image (bytes long) and the prefill seconds it took to compute. */
const uint8_t *sdn_pblock_data(const sdn_pblock *b);
double sdn_pblock_cost(const sdn_pblock *b);
/* Unpin a block got with SDN_PC_MEM or SDN_PC_DISK. */
void sdn_pcache_put(sdn_pcache *pc, sdn_pblock *b);
/* A claim computed: image (malloc'd, the claim's bytes long; taken over) and its cost in
 * seconds. Wakes the contexts waiting for it; writes it to the disk tier. */
void sdn_pcache_publish(sdn_pcache *pc, sdn_pblock *b, uint8_t *image, double cost_s);
/* Give a claim up (the caller failed or stopped): a waiting context claims it next. */
void sdn_pcache_drop(sdn_pcache *pc, sdn_pblock *b);

typedef struct sdn_pcache_stats {
    long hits_mem, hits_disk, misses; /* blocks */
    long evictions, disk_evictions;   /* blocks evicted from memory, files deleted for the disk budget */
    long disk_writes, disk_damaged;   /* files written; files found damaged (each warned once) */
    uint64_t mem_bytes, mem_budget;   /* image bytes held in memory now, and the budget */
    long mem_blocks;
    uint64_t disk_bytes, disk_budget; /* bytes the index counts now (all processes), and the budget */
    int disk_on;                      /* the disk tier is in use */
} sdn_pcache_stats;
void sdn_pcache_get_stats(sdn_pcache *pc, sdn_pcache_stats *out);

#endif
