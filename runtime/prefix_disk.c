/* prefix_disk.c - the prefix cache's disk tier (prefix_disk.h).
 *
 * DIR/blocks/<key in hex>.kv holds one block: a fixed header (magic, format version, key,
 * image size, XXH3-128 of the image, cost, the block's tokens) and the image. A write goes to
 * DIR/blocks/.tmp-<pid>-<n> and is renamed into place, so a reader (of any process) sees a
 * whole file or none, whenever a writer is killed. DIR/index.sqlite (WAL, shared by every
 * process using the directory) has one row per file: its size and last use, for the budget.
 * The row is written before the file: a row without a file (a writer killed between the two,
 * or a file evicted by another process) is a miss; a file without a row, or a temporary file,
 * is what a killed writer left, removed at the next open once it is ten minutes old (younger
 * ones may be another process's write in progress). The budget is kept by each writer before
 * it writes: processes writing at the same moment can pass it by a block each. */
#include "runtime/prefix_disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/sdn_db.h"
#include "common/sdn_log.h"

#define PDISK_APP_ID 0x53444e50 /* "SDNP" */
#define PDISK_VERSION 1
#define FILE_VERSION 1
#define STALE_S 600 /* a leftover older than this is no one's write in progress */
static const char MAGIC[8] = {'S', 'D', 'N', 'P', 'K', 'V', '\n', 0};

typedef struct file_header {
    char magic[8];
    uint32_t version, header_bytes;
    uint64_t key_lo, key_hi;
    uint64_t image_bytes;
    uint64_t sum_lo, sum_hi; /* XXH3-128 of the image */
    double cost;
    int32_t tokens[SDN_PREFIX_BLOCK];
} file_header;

struct sdn_pdisk {
    pthread_mutex_t mu; /* the connection, the counters */
    sqlite3 *db;
    char *dir;
    uint64_t budget;
    int on;
    long damaged, evictions;
    unsigned long seq;
};

static const sdn_db_kind INDEX_KIND = {
    .what = "prefix cache index",
    .app_id = PDISK_APP_ID,
    .version = PDISK_VERSION,
    .schema = "CREATE TABLE blocks(key TEXT PRIMARY KEY, bytes INTEGER NOT NULL, last_used INTEGER NOT NULL);",
    .tables = {"blocks", NULL},
};

static void key_hex(sdn_pkey k, char out[33]) { snprintf(out, 33, "%016" PRIx64 "%016" PRIx64, k.hi, k.lo); }

static void file_path(const sdn_pdisk *d, const char *hex, char *out, size_t cap) { snprintf(out, cap, "%s/blocks/%s.kv", d->dir, hex); }

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Run a statement, with the key bound to its one parameter when given (mu held). */
static int exec_key(sqlite3 *db, const char *sql, const char *key) {
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        if (key) sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE || rc == SQLITE_ROW) rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc;
}

static void off(sdn_pdisk *d, const char *what, const char *why) {
    if (!__atomic_exchange_n(&d->on, 0, __ATOMIC_ACQ_REL)) return; /* warned once */
    sdn_log(SDN_LOG_WARN, "prefix cache directory %s: %s (%s): the prefix cache goes on in memory only", d->dir, what, why);
}

/* Leftovers of killed writers: temporary files and files the index does not list. */
static void sweep(sdn_pdisk *d) {
    char path[4200];
    snprintf(path, sizeof path, "%s/blocks", d->dir);
    DIR *dh = opendir(path);
    if (!dh) return;
    sqlite3_stmt *st = NULL;
    sqlite3_prepare_v2(d->db, "SELECT 1 FROM blocks WHERE key=?", -1, &st, NULL);
    const time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(dh))) {
        const char *n = de->d_name;
        int tmp = !strncmp(n, ".tmp-", 5), blk = strlen(n) == 35 && !strcmp(n + 32, ".kv");
        if (!tmp && !blk) continue;
        char fp[4500];
        snprintf(fp, sizeof fp, "%s/%s", path, n);
        struct stat sb;
        if (stat(fp, &sb) || now - sb.st_mtime < STALE_S) continue;
        int listed = 0;
        if (blk && st) {
            char hex[33];
            memcpy(hex, n, 32);
            hex[32] = 0;
            sqlite3_reset(st);
            sqlite3_bind_text(st, 1, hex, -1, SQLITE_TRANSIENT);
            listed = sqlite3_step(st) == SQLITE_ROW;
        }
        if (!listed) unlink(fp);
    }
    sqlite3_finalize(st);
    closedir(dh);
}

static int open_index(sdn_pdisk *d, const char *idx, sdn_err *e) {
    int fd = open(idx, O_RDWR | O_CREAT | O_CLOEXEC, 0600); /* the index is the owner's only, before SQLite makes it */
    if (fd >= 0) {
        struct stat sb;
        int empty = !fstat(fd, &sb) && sb.st_size == 0;
        close(fd);
        if (empty) unlink(idx); /* sdn_db_open refuses an empty file; it creates the new one */
    }
    mode_t old = umask(077);
    int rc = sdn_db_open(idx, &INDEX_KIND, 1, &d->db, e);
    umask(old);
    return rc;
}

sdn_pdisk *sdn_pdisk_open(const char *dir, uint64_t budget) {
    struct stat sb;
    if (mkdir(dir, 0700) && errno != EEXIST) {
        sdn_log(SDN_LOG_WARN, "prefix cache directory %s: cannot create it (%s): the prefix cache goes on in memory only", dir, strerror(errno));
        return NULL;
    }
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) {
        sdn_log(SDN_LOG_WARN, "prefix cache directory %s: not a directory: the prefix cache goes on in memory only", dir);
        return NULL;
    }
    if (access(dir, W_OK | X_OK)) {
        sdn_log(SDN_LOG_WARN, "prefix cache directory %s: not writable (%s): the prefix cache goes on in memory only", dir, strerror(errno));
        return NULL;
    }
    sdn_pdisk *d = calloc(1, sizeof *d);
    if (!d || !(d->dir = strdup(dir))) {
        free(d);
        sdn_log(SDN_LOG_WARN, "prefix cache directory %s: out of memory: the prefix cache goes on in memory only", dir);
        return NULL;
    }
    pthread_mutex_init(&d->mu, NULL);
    d->budget = budget;
    char path[4200];
    snprintf(path, sizeof path, "%s/blocks", dir);
    if (mkdir(path, 0700) && errno != EEXIST) {
        sdn_log(SDN_LOG_WARN, "prefix cache directory %s: cannot create %s (%s): the prefix cache goes on in memory only", dir, path, strerror(errno));
        sdn_pdisk_close(d);
        return NULL;
    }
    snprintf(path, sizeof path, "%s/index.sqlite", dir);
    sdn_err e = {0};
    if (open_index(d, path, &e)) {
        if (e.code != SDN_EDB) { /* another application's file, or a newer format: not ours to remove */
            sdn_log(SDN_LOG_WARN, "prefix cache directory %s: %s: the prefix cache goes on in memory only", dir, e.msg);
            sdn_pdisk_close(d);
            return NULL;
        }
        /* a damaged index: the cache is made anew (the files it listed go at the next sweeps) */
        sdn_log(SDN_LOG_WARN, "prefix cache directory %s: %s: the index is made anew", dir, e.msg);
        char side[4300];
        unlink(path);
        snprintf(side, sizeof side, "%s-wal", path), unlink(side);
        snprintf(side, sizeof side, "%s-shm", path), unlink(side);
        sdn_err_clear(&e);
        if (open_index(d, path, &e)) {
            sdn_log(SDN_LOG_WARN, "prefix cache directory %s: %s: the prefix cache goes on in memory only", dir, e.msg);
            sdn_pdisk_close(d);
            return NULL;
        }
    }
    sqlite3_busy_timeout(d->db, 10000);
    d->on = 1;
    sweep(d);
    return d;
}

void sdn_pdisk_close(sdn_pdisk *d) {
    if (!d) return;
    if (d->db) sqlite3_close(d->db);
    pthread_mutex_destroy(&d->mu);
    free(d->dir);
    free(d);
}

int sdn_pdisk_on(const sdn_pdisk *d) { return d && __atomic_load_n(&d->on, __ATOMIC_ACQUIRE); }

static void forget(sdn_pdisk *d, const char *hex) {
    pthread_mutex_lock(&d->mu);
    exec_key(d->db, "DELETE FROM blocks WHERE key=?", hex);
    pthread_mutex_unlock(&d->mu);
}

/* A damaged file: one warning (the file goes, so it is never read again), then a miss. */
static uint8_t *damaged(sdn_pdisk *d, const char *path, const char *hex, const char *why, uint8_t *img, int fd) {
    if (fd >= 0) close(fd);
    free(img);
    sdn_log(SDN_LOG_WARN, "prefix cache: %s: %s: not used, the block is computed again", path, why);
    unlink(path);
    forget(d, hex);
    pthread_mutex_lock(&d->mu);
    d->damaged++;
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

static int read_all(int fd, void *buf, size_t n) {
    uint8_t *p = buf;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static int write_all(int fd, const void *buf, size_t n) {
    const uint8_t *p = buf;
    while (n) {
        ssize_t r = write(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = ENOSPC;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

uint8_t *sdn_pdisk_load(sdn_pdisk *d, sdn_pkey key, const int32_t *tokens, size_t bytes, double *cost) {
    if (!sdn_pdisk_on(d)) return NULL;
    char hex[33], path[4200];
    key_hex(key, hex);
    file_path(d, hex, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL; /* absent (or evicted by another process) */
    struct stat sb;
    file_header h;
    char why[160];
    if (fstat(fd, &sb)) return damaged(d, path, hex, "cannot stat it", NULL, fd);
    if ((uint64_t)sb.st_size != sizeof h + (uint64_t)bytes) {
        snprintf(why, sizeof why, "%lld bytes, expected %zu (truncated, or another cache's layout)", (long long)sb.st_size, sizeof h + bytes);
        return damaged(d, path, hex, why, NULL, fd);
    }
    if (read_all(fd, &h, sizeof h)) return damaged(d, path, hex, strerror(errno ? errno : EIO), NULL, fd);
    if (memcmp(h.magic, MAGIC, sizeof MAGIC) || h.version != FILE_VERSION || h.header_bytes != sizeof h)
        return damaged(d, path, hex, "not a prefix block file of this version", NULL, fd);
    if (h.key_lo != key.lo || h.key_hi != key.hi || h.image_bytes != bytes || memcmp(h.tokens, tokens, sizeof h.tokens))
        return damaged(d, path, hex, "another block's file (its key, size or tokens differ)", NULL, fd);
    uint8_t *img = malloc(bytes ? bytes : 1);
    if (!img) {
        close(fd);
        return NULL; /* out of memory: a miss */
    }
    if (read_all(fd, img, bytes)) return damaged(d, path, hex, strerror(errno ? errno : EIO), img, fd);
    close(fd);
    XXH128_hash_t s = XXH3_128bits(img, bytes);
    if (s.low64 != h.sum_lo || s.high64 != h.sum_hi) return damaged(d, path, hex, "checksum mismatch (damaged)", img, -1);
    *cost = isfinite(h.cost) && h.cost >= 0 && h.cost < 1e6 ? h.cost : 0;
    pthread_mutex_lock(&d->mu);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(d->db, "UPDATE blocks SET last_used=?1 WHERE key=?2", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, now_ms());
        sqlite3_bind_text(st, 2, hex, -1, SQLITE_TRANSIENT);
        sqlite3_step(st);
    }
    sqlite3_finalize(st);
    pthread_mutex_unlock(&d->mu);
    return img;
}

/* Delete the least recently used files until `need` more bytes fit (mu held, in a transaction). */
static int make_room(sdn_pdisk *d, uint64_t need) {
    sqlite3_stmt *sum = NULL, *old = NULL;
    int rc = SQLITE_OK;
    uint64_t total = 0;
    if (sqlite3_prepare_v2(d->db, "SELECT COALESCE(SUM(bytes), 0) FROM blocks", -1, &sum, NULL) != SQLITE_OK || sqlite3_step(sum) != SQLITE_ROW) {
        sqlite3_finalize(sum);
        return SQLITE_ERROR;
    }
    total = (uint64_t)sqlite3_column_int64(sum, 0);
    sqlite3_finalize(sum);
    while (total + need > d->budget && rc == SQLITE_OK) {
        if (sqlite3_prepare_v2(d->db, "SELECT key, bytes FROM blocks ORDER BY last_used LIMIT 16", -1, &old, NULL) != SQLITE_OK) return SQLITE_ERROR;
        char keys[16][33];
        int n = 0;
        while (n < 16 && sqlite3_step(old) == SQLITE_ROW) {
            const char *k = (const char *)sqlite3_column_text(old, 0);
            snprintf(keys[n], 33, "%s", k ? k : "");
            total -= (uint64_t)sqlite3_column_int64(old, 1) < total ? (uint64_t)sqlite3_column_int64(old, 1) : total;
            n++;
        }
        sqlite3_finalize(old);
        if (n == 0) break;
        for (int i = 0; i < n && rc == SQLITE_OK; i++) {
            char path[4200];
            file_path(d, keys[i], path, sizeof path);
            unlink(path);
            rc = exec_key(d->db, "DELETE FROM blocks WHERE key=?", keys[i]);
            d->evictions++;
        }
    }
    return rc;
}

int sdn_pdisk_store(sdn_pdisk *d, sdn_pkey key, const int32_t *tokens, const uint8_t *img, size_t bytes, double cost) {
    if (!sdn_pdisk_on(d)) return 0;
    file_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MAGIC, sizeof MAGIC);
    h.version = FILE_VERSION;
    h.header_bytes = sizeof h;
    h.key_lo = key.lo;
    h.key_hi = key.hi;
    h.image_bytes = bytes;
    XXH128_hash_t s = XXH3_128bits(img, bytes);
    h.sum_lo = s.low64;
    h.sum_hi = s.high64;
    h.cost = cost;
    memcpy(h.tokens, tokens, sizeof h.tokens);
    char hex[33], path[4200], tmp[4300];
    key_hex(key, hex);
    file_path(d, hex, path, sizeof path);
    const uint64_t need = sizeof h + (uint64_t)bytes;
    if (need > d->budget) return 0;
    pthread_mutex_lock(&d->mu);
    int rc = exec_key(d->db, "BEGIN IMMEDIATE", NULL);
    if (rc == SQLITE_OK) rc = make_room(d, need);
    if (rc == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        rc = sqlite3_prepare_v2(d->db, "INSERT OR REPLACE INTO blocks(key, bytes, last_used) VALUES(?1, ?2, ?3)", -1, &st, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_bind_text(st, 1, hex, -1, SQLITE_TRANSIENT);
            sqlite3_bind_int64(st, 2, (long long)need);
            sqlite3_bind_int64(st, 3, now_ms());
            rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
        }
        sqlite3_finalize(st);
    }
    rc = rc == SQLITE_OK ? exec_key(d->db, "COMMIT", NULL) : rc;
    char why[300] = "";
    if (rc != SQLITE_OK) {
        snprintf(why, sizeof why, "%s", sqlite3_errmsg(d->db));
        exec_key(d->db, "ROLLBACK", NULL);
    }
    unsigned long seq = ++d->seq;
    pthread_mutex_unlock(&d->mu);
    if (rc != SQLITE_OK) {
        off(d, "cannot update index.sqlite", why);
        return 0;
    }
    snprintf(tmp, sizeof tmp, "%s/blocks/.tmp-%ld-%lu-%s", d->dir, (long)getpid(), seq, hex);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    int ok = fd >= 0 && !write_all(fd, &h, sizeof h) && !write_all(fd, img, bytes);
    int e = errno;
    if (fd >= 0 && close(fd) && ok) ok = 0, e = errno;
    if (ok && rename(tmp, path)) ok = 0, e = errno;
    if (!ok) {
        unlink(tmp);
        forget(d, hex);
        off(d, "cannot write a block file", strerror(e ? e : EIO));
    }
    return ok;
}

void sdn_pdisk_stats(sdn_pdisk *d, uint64_t *bytes, uint64_t *budget, long *damaged_n, long *evictions) {
    *bytes = 0;
    *budget = 0;
    *damaged_n = *evictions = 0;
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(d->db, "SELECT COALESCE(SUM(bytes), 0) FROM blocks", -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        *bytes = (uint64_t)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    *budget = d->budget;
    *damaged_n = d->damaged;
    *evictions = d->evictions;
    pthread_mutex_unlock(&d->mu);
}
