/* sdn_db.c - opening sdnpu's SQLite files safely (see sdn_db.h). The file is identified before
 * anything is written to it (not even its journal mode): a foreign, damaged or empty file is
 * refused byte-for-byte untouched. A new file is built complete under a temporary name (WAL
 * mode, schema, application_id, user_version) and linked into place, so the path never
 * holds a half-made store; an older schema version is migrated after the checks. */
#include "common/sdn_db.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int sdn_db_fail(sqlite3 *db, const char *path, const char *context, sdn_err *err) {
    return sdn_fail(err, SDN_EDB, "%s: %s: %s", path, context, db ? sqlite3_errmsg(db) : "cannot open");
}

int sdn_db_exec(sqlite3 *db, const char *path, const char *sql, sdn_err *err) {
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        int rc = sdn_fail(err, SDN_EDB, "%s: %s", path, msg ? msg : sqlite3_errmsg(db));
        sqlite3_free(msg);
        return rc;
    }
    return SDN_OK;
}

/* First column of a one-row query as an integer; -1 + error on failure. */
static int query_int(sqlite3 *db, const char *path, const char *sql, long long *out, sdn_err *err) {
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        int code = sqlite3_errcode(db);
        int r;
        if (code == SQLITE_NOTADB) r = sdn_fail(err, SDN_EDB, "%s: not an SQLite database (%s)", path, sqlite3_errmsg(db));
        else if (code == SQLITE_CORRUPT) r = sdn_fail(err, SDN_EDB, "%s: damaged SQLite database (%s)", path, sqlite3_errmsg(db));
        else r = sdn_db_fail(db, path, sql, err);
        sqlite3_finalize(st);
        return r;
    }
    *out = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return SDN_OK;
}

static int table_exists(sqlite3 *db, const char *name) {
    sqlite3_stmt *st = NULL;
    int found = 0;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        found = sqlite3_step(st) == SQLITE_ROW;
    }
    sqlite3_finalize(st);
    return found;
}

static void list_tables(sqlite3 *db, char *buf, size_t cap) {
    sqlite3_stmt *st = NULL;
    buf[0] = 0;
    if (sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name LIMIT 8", -1, &st, NULL) != SQLITE_OK) return;
    size_t n = 0;
    while (sqlite3_step(st) == SQLITE_ROW && n + 2 < cap) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", t ? t : "?");
        if (n >= cap) n = cap - 1;
    }
    sqlite3_finalize(st);
}

/* Write the schema, application_id and user_version into a connection whose database has
 * no application_id yet (a new file, or an SQLite file without tables). Inside one
 * IMMEDIATE transaction: a concurrent initializer is detected. */
static int init_schema(sqlite3 *db, const char *path, const sdn_db_kind *k, sdn_err *err) {
    int rc;
    long long app = 0;
    if ((rc = sdn_db_exec(db, path, "BEGIN IMMEDIATE", err))) return rc;
    if ((rc = query_int(db, path, "PRAGMA application_id", &app, err))) goto fail_tx;
    if (app == 0) {
        char sql[128];
        if ((rc = sdn_db_exec(db, path, k->schema, err))) goto fail_tx;
        snprintf(sql, sizeof sql, "PRAGMA application_id=%d; PRAGMA user_version=%d", k->app_id, k->version);
        if ((rc = sdn_db_exec(db, path, sql, err))) goto fail_tx;
    } else if (app != k->app_id) {
        rc = sdn_fail(err, SDN_EDB, "%s: became a database of another application while opening", path);
        goto fail_tx;
    }
    return sdn_db_exec(db, path, "COMMIT", err);
fail_tx:
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

static int set_wal(sqlite3 *db, const char *path, sdn_err *err) {
    int rc = sdn_db_exec(db, path, "PRAGMA journal_mode=WAL", err);
    return rc ? rc : sdn_db_exec(db, path, "PRAGMA synchronous=FULL", err);
}

/* Create `path` as a new, complete database of kind k: built under a temporary name in the
 * same folder and linked into place only when finished, so `path` never exists as an empty
 * or half-written file (link() fails with EEXIST when a concurrent creator won: fine). */
static int create_file(const char *path, const sdn_db_kind *k, sdn_err *err) {
    size_t n = strlen(path) + 64;
    char *tmp = malloc(n);
    if (!tmp) return sdn_fail(err, SDN_ENOMEM, "out of memory");
    snprintf(tmp, n, "%s.new-%ld", path, (long)getpid());
    unlink(tmp);
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(tmp, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        rc = sdn_fail(err, SDN_EDB, "%s: cannot create the %s: %s", path, k->what, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close(db);
        free(tmp);
        return rc;
    }
    rc = set_wal(db, path, err);
    if (!rc) rc = init_schema(db, path, k, err);
    if (sqlite3_close(db) != SQLITE_OK && !rc) rc = sdn_fail(err, SDN_EDB, "%s: closing the new %s failed", path, k->what);
    if (!rc && link(tmp, path) != 0 && errno != EEXIST) {
        /* file systems without hard links: rename, unless the path appeared meanwhile */
        struct stat st;
        int e = errno;
        if ((e == EPERM || e == ENOTSUP || e == ENOSYS) && stat(path, &st) != 0 && rename(tmp, path) == 0) e = 0;
        if (e) rc = sdn_fail(err, SDN_EIO, "%s: cannot create the %s: %s", path, k->what, strerror(e));
    }
    unlink(tmp);
    char side[2][16] = {"-wal", "-shm"};
    for (int i = 0; i < 2; i++) {
        char p2[4200];
        snprintf(p2, sizeof p2, "%s%s", tmp, side[i]);
        unlink(p2);
    }
    free(tmp);
    return rc;
}

/* PRAGMA quick_check(4): SDN_OK or SDN_EDB "damaged" with its findings. */
static int quick_check(sqlite3 *db, const char *path, const sdn_db_kind *k, sdn_err *err) {
    char res[512] = "";
    sqlite3_stmt *st = NULL;
    int q = sqlite3_prepare_v2(db, "PRAGMA quick_check(4)", -1, &st, NULL);
    size_t n = 0;
    int ok = q == SQLITE_OK;
    while (ok && (q = sqlite3_step(st)) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        if (t && strcmp(t, "ok") != 0 && n + 2 < sizeof res) {
            n += (size_t)snprintf(res + n, sizeof res - n, "%s%s", n ? "; " : "", t);
            if (n >= sizeof res) n = sizeof res - 1;
        }
    }
    if (ok && q != SQLITE_DONE) ok = 0;
    sqlite3_finalize(st);
    if (!ok || n) return sdn_fail(err, SDN_EDB, "%s: damaged %s: %s", path, k->what, n ? res : sqlite3_errmsg(db));
    for (int i = 0; k->tables[i]; i++)
        if (!table_exists(db, k->tables[i])) return sdn_fail(err, SDN_EDB, "%s: damaged %s: table '%s' is missing", path, k->what, k->tables[i]);
    return SDN_OK;
}

/* Bring an accepted file of an older schema version to k->version in one transaction. */
static int migrate(sqlite3 *db, const char *path, const sdn_db_kind *k, long long ver, sdn_err *err) {
    int rc;
    if ((rc = sdn_db_exec(db, path, "BEGIN IMMEDIATE", err))) return rc;
    long long now = 0;
    if ((rc = query_int(db, path, "PRAGMA user_version", &now, err))) goto fail_tx;
    if (now < k->version) { /* not done meanwhile by another process */
        if ((rc = k->migrate(db, path, now, err))) goto fail_tx;
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version=%d", k->version);
        if ((rc = sdn_db_exec(db, path, sql, err))) goto fail_tx;
    }
    (void)ver;
    return sdn_db_exec(db, path, "COMMIT", err);
fail_tx:
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

int sdn_db_open(const char *path, const sdn_db_kind *k, int create, sqlite3 **out, sdn_err *err) {
    sqlite3 *db = NULL;
    *out = NULL;
    int memory = !strcmp(path, ":memory:");
    if (!memory) {
        struct stat st;
        if (stat(path, &st) != 0) {
            if (errno != ENOENT || !create) return sdn_fail(err, SDN_EDB, "%s: cannot open the %s: %s", path, k->what, strerror(errno));
            int rc = create_file(path, k, err);
            if (rc) return rc;
        } else if (S_ISREG(st.st_mode) && st.st_size == 0) {
            return sdn_fail(err, SDN_EDB,
                            "%s: an empty file, not an sdnpu %s (a new one is created only where no file exists; remove the empty file "
                            "to start a new one)",
                            path, k->what);
        }
    }
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | (memory ? SQLITE_OPEN_CREATE : 0), NULL);
    if (rc != SQLITE_OK) {
        int r = sdn_fail(err, SDN_EDB, "%s: cannot open the %s: %s", path, k->what, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close(db);
        return r;
    }
    sqlite3_busy_timeout(db, 15000);
    sqlite3_extended_result_codes(db, 0);
    /* identify and check the file read-only first: nothing is written (not even the
     * journal mode) before it is accepted */
    long long app = 0, ver = 0, ntab = 0;
    if ((rc = query_int(db, path, "PRAGMA application_id", &app, err)) || (rc = query_int(db, path, "PRAGMA user_version", &ver, err)) ||
        (rc = query_int(db, path, "SELECT count(*) FROM sqlite_master", &ntab, err)))
        goto fail;
    if (app == 0 && ntab > 0) {
        char tabs[256];
        list_tables(db, tabs, sizeof tabs);
        rc = sdn_fail(err, SDN_EDB, "%s: an SQLite database of another application (tables: %s), not an sdnpu %s", path, tabs, k->what);
        goto fail;
    }
    if (app != 0 && app != k->app_id) {
        rc = sdn_fail(err, SDN_EDB, "%s: an SQLite database of another application (application_id 0x%08llx), not an sdnpu %s", path,
                      (unsigned long long)(app & 0xffffffffLL), k->what);
        goto fail;
    }
    if (app == k->app_id && ver > k->version) {
        rc = sdn_fail(err, SDN_EUNSUP, "%s: %s schema version %lld is newer than this program's %d", path, k->what, ver, k->version);
        goto fail;
    }
    if (app == k->app_id && (rc = quick_check(db, path, k, err))) goto fail;
    /* accepted: now it may change. WAL: readers never block the writer and a killed writer
     * loses only its open transaction */
    if ((rc = set_wal(db, path, err))) goto fail;
    if (app == 0 && (rc = init_schema(db, path, k, err))) goto fail;
    if (app == k->app_id && ver < k->version && k->migrate && (rc = migrate(db, path, k, ver, err))) goto fail;
    if ((rc = sdn_db_exec(db, path, "PRAGMA foreign_keys=ON", err))) goto fail;
    *out = db;
    return SDN_OK;
fail:
    sqlite3_close(db);
    return rc;
}
