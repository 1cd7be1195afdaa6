/* history.c - the SQLite history store (see history.h). Answers are immutable rows; the
 * cached automaton of a (group, model, budget) is valid while the hash of the ids of the
 * answers it was built from equals the hash of the current selection. */
#include "runtime/history.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "common/sdn_db.h"
#include "suffix_automaton/sam.h"

#define HISTORY_APP_ID 0x53444e48 /* "SDNH" */
#define HISTORY_VERSION 3
#define HISTORY_MAX_ROW_TOKENS (1 << 28) /* tokens of one stored answer */

/* The row checksum of schema 2: XXH3-64 of the token bytes, then a byte 0 (no text) or 1
 * followed by the text bytes, as signed 64-bit. (Schema 1 covered the token bytes only.) */
static int64_t row_sum(const void *tok, size_t nb, const char *text, size_t text_len) {
    XXH3_state_t *s = XXH3_createState();
    if (!s) return 0;
    XXH3_64bits_reset(s);
    XXH3_64bits_update(s, nb ? tok : (const void *)"", nb);
    uint8_t has = text != NULL;
    XXH3_64bits_update(s, &has, 1);
    if (text) XXH3_64bits_update(s, text, text_len);
    uint64_t r = XXH3_64bits_digest(s);
    XXH3_freeState(s);
    return (int64_t)r;
}

/* Schema 1 -> 2: every row whose schema-1 checksum (tokens only) is right gets the schema-2
 * checksum over its tokens and its text as they are now (the rule: texts stored under
 * schema 1 are trusted from the migration on). A row whose tokens already fail keeps its
 * old checksum and stays refused as damaged. No row is removed. */
#define CANDIDATES_TABLE                                                                                                           \
    "CREATE TABLE model_candidates(model_fp TEXT PRIMARY KEY, vocab INTEGER NOT NULL, k INTEGER NOT NULL, data BLOB NOT NULL,"       \
    " updated REAL NOT NULL);"

static int migrate_1_2(sqlite3 *db, const char *path, sdn_err *err);

/* Schema 1 -> 2 (below), then 2 -> 3: the model-derived candidate tables' table. */
static int migrate(sqlite3 *db, const char *path, long long from, sdn_err *err) {
    if (from != 1 && from != 2) return sdn_fail(err, SDN_EUNSUP, "%s: history store schema version %lld cannot be migrated", path, from);
    int rc = from == 1 ? migrate_1_2(db, path, err) : SDN_OK;
    if (!rc) rc = sdn_db_exec(db, path, CANDIDATES_TABLE "UPDATE meta SET value='sdnpu-history 3' WHERE key='schema'", err);
    return rc;
}

static int migrate_1_2(sqlite3 *db, const char *path, sdn_err *err) {
    sqlite3_stmt *sel = NULL, *upd = NULL;
    int rc = SDN_OK, s;
    if (sqlite3_prepare_v2(db, "SELECT id, tokens, text, checksum FROM answers", -1, &sel, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "UPDATE answers SET checksum=? WHERE id=?", -1, &upd, NULL) != SQLITE_OK) {
        rc = sdn_db_fail(db, path, "migrating the history store to schema 2", err);
        goto done;
    }
    while ((s = sqlite3_step(sel)) == SQLITE_ROW) {
        const void *b = sqlite3_column_blob(sel, 1);
        size_t nb = (size_t)sqlite3_column_bytes(sel, 1);
        if ((int64_t)XXH3_64bits(b ? b : (const void *)"", nb) != sqlite3_column_int64(sel, 3)) continue;
        const char *t = sqlite3_column_type(sel, 2) == SQLITE_NULL ? NULL : (const char *)sqlite3_column_text(sel, 2);
        size_t tl = t ? (size_t)sqlite3_column_bytes(sel, 2) : 0;
        sqlite3_bind_int64(upd, 1, row_sum(b, nb, t, tl));
        sqlite3_bind_int64(upd, 2, sqlite3_column_int64(sel, 0));
        if (sqlite3_step(upd) != SQLITE_DONE) { s = SQLITE_ERROR; break; }
        sqlite3_reset(upd);
    }
    if (s != SQLITE_DONE) rc = sdn_db_fail(db, path, "migrating the history store to schema 2", err);
    else rc = sdn_db_exec(db, path, "UPDATE meta SET value='sdnpu-history 2' WHERE key='schema'", err);
done:
    sqlite3_finalize(sel);
    sqlite3_finalize(upd);
    return rc;
}

static const sdn_db_kind k_history = {
    .what = "history store",
    .app_id = HISTORY_APP_ID,
    .version = HISTORY_VERSION,
    .schema = "CREATE TABLE answers(id INTEGER PRIMARY KEY, task_group TEXT NOT NULL, model_fp TEXT NOT NULL, created REAL NOT NULL,"
              " n_tokens INTEGER NOT NULL, tokens BLOB NOT NULL, text TEXT, checksum INTEGER NOT NULL);"
              "CREATE INDEX answers_by_group ON answers(task_group, model_fp, created DESC, id DESC);"
              "CREATE TABLE history_cache(task_group TEXT NOT NULL, model_fp TEXT NOT NULL, max_tokens INTEGER NOT NULL,"
              " answers_hash INTEGER NOT NULL, n_answers INTEGER NOT NULL, n_tokens INTEGER NOT NULL, sam BLOB, created REAL NOT NULL,"
              " PRIMARY KEY(task_group, model_fp, max_tokens));"
              "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);" CANDIDATES_TABLE
              "INSERT INTO meta VALUES('schema', 'sdnpu-history 3');",
    .tables = {"answers", "history_cache", "meta", NULL}, /* model_candidates: added by the migration to 3 */
    .migrate = migrate,
};

struct sdn_history {
    sqlite3 *db;
    char *path;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int sdn_history_open(const char *path, sdn_history **out, sdn_err *err) {
    *out = NULL;
    sdn_history *h = calloc(1, sizeof *h);
    if (!h || !(h->path = strdup(path))) { free(h); return sdn_fail(err, SDN_ENOMEM, "out of memory"); }
    int rc = sdn_db_open(path, &k_history, 1, &h->db, err);
    if (rc) { free(h->path); free(h); return rc; }
    *out = h;
    return SDN_OK;
}

void sdn_history_close(sdn_history *h) {
    if (!h) return;
    sqlite3_close(h->db);
    free(h->path);
    free(h);
}

static void put_le32(uint8_t *p, uint32_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24); }
static uint32_t get_le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

int sdn_history_add(sdn_history *h, const char *group, const char *model_fp, const int32_t *tokens, int n_tokens, const char *text,
                    double created, int64_t *id, sdn_err *err) {
    if (!group || !group[0]) return sdn_fail(err, SDN_EINVAL, "history: empty task group");
    if (n_tokens < 0 || (n_tokens && !tokens)) return sdn_fail(err, SDN_EINVAL, "history: bad token array");
    if (n_tokens > HISTORY_MAX_ROW_TOKENS)
        return sdn_fail(err, SDN_EINVAL, "history: an answer of %d tokens is longer than the limit of %d", n_tokens, HISTORY_MAX_ROW_TOKENS);
    for (int i = 0; i < n_tokens; i++)
        if (tokens[i] < 0) return sdn_fail(err, SDN_EINVAL, "history: token %d is negative", i);
    size_t nb = (size_t)n_tokens * 4;
    uint8_t *blob = malloc(nb + 1);
    if (!blob) return sdn_fail(err, SDN_ENOMEM, "history: out of memory");
    for (int i = 0; i < n_tokens; i++) put_le32(blob + 4 * (size_t)i, (uint32_t)tokens[i]);
    int64_t sum = row_sum(blob, nb, text, text ? strlen(text) : 0);
    sqlite3_stmt *st = NULL;
    int rc = sdn_db_exec(h->db, h->path, "BEGIN IMMEDIATE", err);
    if (rc) { free(blob); return rc; }
    if (sqlite3_prepare_v2(h->db, "INSERT INTO answers(task_group, model_fp, created, n_tokens, tokens, text, checksum) VALUES(?,?,?,?,?,?,?)",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = sdn_db_fail(h->db, h->path, "storing an answer", err);
        goto fail;
    }
    sqlite3_bind_text(st, 1, group, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, model_fp ? model_fp : "", -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 3, created > 0 ? created : now_s());
    sqlite3_bind_int(st, 4, n_tokens);
    sqlite3_bind_blob(st, 5, blob, (int)nb, SQLITE_STATIC);
    if (text) sqlite3_bind_text(st, 6, text, -1, SQLITE_STATIC);
    else sqlite3_bind_null(st, 6);
    sqlite3_bind_int64(st, 7, sum);
    if (sqlite3_step(st) != SQLITE_DONE) {
        rc = sdn_db_fail(h->db, h->path, "storing an answer", err);
        goto fail;
    }
    int64_t rid = sqlite3_last_insert_rowid(h->db);
    sqlite3_finalize(st);
    st = NULL;
    if ((rc = sdn_db_exec(h->db, h->path, "COMMIT", err))) goto fail;
    free(blob);
    if (id) *id = rid;
    return SDN_OK;
fail:
    sqlite3_finalize(st);
    sqlite3_exec(h->db, "ROLLBACK", NULL, NULL, NULL);
    free(blob);
    return rc;
}

void sdn_history_answers_free(sdn_history_answer *a, int n) {
    if (!a) return;
    for (int i = 0; i < n; i++) {
        free(a[i].tokens);
        free(a[i].text);
    }
    free(a);
}

/* Read one answers row (columns id, created, n_tokens, tokens, text, checksum) with checks. */
static int read_answer(sdn_history *h, sqlite3_stmt *st, int want_text, sdn_history_answer *a, sdn_err *err) {
    memset(a, 0, sizeof *a);
    a->id = sqlite3_column_int64(st, 0);
    a->created = sqlite3_column_double(st, 1);
    long long n = sqlite3_column_int64(st, 2);
    const uint8_t *blob = sqlite3_column_blob(st, 3);
    long long nb = sqlite3_column_bytes(st, 3);
    int64_t sum = sqlite3_column_int64(st, 5);
    if (n < 0 || n > HISTORY_MAX_ROW_TOKENS || nb != n * 4 || (n && !blob))
        return sdn_fail(err, SDN_EDB, "%s: answer %lld: %lld tokens but %lld token bytes", h->path, (long long)a->id, n, nb);
    const char *text = sqlite3_column_type(st, 4) == SQLITE_NULL ? NULL : (const char *)sqlite3_column_text(st, 4);
    size_t text_len = text ? (size_t)sqlite3_column_bytes(st, 4) : 0;
    if (row_sum(blob, (size_t)nb, text, text_len) != sum)
        return sdn_fail(err, SDN_EDB, "%s: answer %lld: checksum mismatch over its tokens and text (damaged row)", h->path, (long long)a->id);
    a->n_tokens = (int)n;
    a->tokens = malloc(((size_t)n + 1) * sizeof *a->tokens);
    if (!a->tokens) return sdn_fail(err, SDN_ENOMEM, "out of memory");
    for (long long i = 0; i < n; i++) {
        uint32_t v = get_le32(blob + 4 * i);
        if (v > (uint32_t)SDN_SAM_MAX_TOKEN) {
            free(a->tokens);
            a->tokens = NULL;
            return sdn_fail(err, SDN_EDB, "%s: answer %lld: token %lld out of range", h->path, (long long)a->id, i);
        }
        a->tokens[i] = (int32_t)v;
    }
    if (want_text && text) {
        a->text = malloc(text_len + 1);
        if (!a->text) {
            free(a->tokens);
            a->tokens = NULL;
            return sdn_fail(err, SDN_ENOMEM, "out of memory");
        }
        memcpy(a->text, text, text_len + 1);
    }
    return SDN_OK;
}

static int recent(sdn_history *h, const char *group, const char *model_fp, sdn_history_scope scope, long max_tokens, int want_text,
                  sdn_history_answer **out, int *n_out, sdn_err *err) {
    *out = NULL;
    *n_out = 0;
    sqlite3_stmt *st = NULL;
    /* global: the group's answers first (task_group = ?1 is 1 for them; NULL for every row
     * when group is NULL), then the others, each most recent first */
    const char *sql = scope == SDN_HISTORY_GLOBAL
                          ? "SELECT id, created, n_tokens, tokens, text, checksum FROM answers WHERE model_fp=?2"
                            " ORDER BY coalesce(task_group=?1, 0) DESC, created DESC, id DESC"
                          : "SELECT id, created, n_tokens, tokens, text, checksum FROM answers WHERE task_group=?1 AND model_fp=?2"
                            " ORDER BY created DESC, id DESC";
    if (sqlite3_prepare_v2(h->db, sql, -1, &st, NULL) != SQLITE_OK) return sdn_db_fail(h->db, h->path, "reading answers", err);
    sqlite3_bind_text(st, 1, group, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, model_fp ? model_fp : "", -1, SQLITE_STATIC);
    sdn_history_answer *a = NULL;
    int n = 0, cap = 0, rc = SDN_OK, s;
    int64_t total = 0;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t nt = sqlite3_column_int64(st, 2);
        /* range first: a damaged n_tokens (e.g. INT64_MAX) must not reach the sum */
        if (nt < 0 || nt > HISTORY_MAX_ROW_TOKENS) {
            rc = sdn_fail(err, SDN_EDB, "%s: answer %lld: n_tokens %lld is out of range (damaged row)", h->path,
                          (long long)sqlite3_column_int64(st, 0), (long long)nt);
            break;
        }
        if (max_tokens > 0 && total + nt > max_tokens) break;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            sdn_history_answer *na = realloc(a, (size_t)cap * sizeof *na);
            if (!na) { rc = sdn_fail(err, SDN_ENOMEM, "out of memory"); break; }
            a = na;
        }
        if ((rc = read_answer(h, st, want_text, &a[n], err))) break;
        total += a[n].n_tokens;
        n++;
    }
    if (!rc && s != SQLITE_ROW && s != SQLITE_DONE) rc = sdn_db_fail(h->db, h->path, "reading answers", err);
    sqlite3_finalize(st);
    if (rc) {
        sdn_history_answers_free(a, n);
        return rc;
    }
    *out = a;
    *n_out = n;
    return SDN_OK;
}

int sdn_history_recent(sdn_history *h, const char *group, const char *model_fp, sdn_history_scope scope, long max_tokens,
                       sdn_history_answer **out, int *n, sdn_err *err) {
    return recent(h, group, model_fp, scope, max_tokens, 1, out, n, err);
}

int sdn_history_get(sdn_history *h, int64_t id, sdn_history_answer *out, sdn_err *err) {
    sqlite3_stmt *st = NULL;
    memset(out, 0, sizeof *out);
    if (sqlite3_prepare_v2(h->db, "SELECT id, created, n_tokens, tokens, text, checksum FROM answers WHERE id=?", -1, &st, NULL) != SQLITE_OK)
        return sdn_db_fail(h->db, h->path, "reading an answer", err);
    sqlite3_bind_int64(st, 1, id);
    int s = sqlite3_step(st), rc;
    if (s == SQLITE_ROW) rc = read_answer(h, st, 1, out, err);
    else if (s == SQLITE_DONE) rc = sdn_fail(err, SDN_EINVAL, "%s: no answer with id %lld", h->path, (long long)id);
    else rc = sdn_db_fail(h->db, h->path, "reading an answer", err);
    sqlite3_finalize(st);
    return rc;
}

int sdn_history_count(sdn_history *h, const char *group, const char *model_fp, long *n, sdn_err *err) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h->db, "SELECT count(*) FROM answers WHERE (?1 IS NULL OR task_group=?1) AND (?2 IS NULL OR model_fp=?2)", -1,
                           &st, NULL) != SQLITE_OK)
        return sdn_db_fail(h->db, h->path, "counting answers", err);
    if (group) sqlite3_bind_text(st, 1, group, -1, SQLITE_STATIC);
    if (model_fp) sqlite3_bind_text(st, 2, model_fp, -1, SQLITE_STATIC);
    int rc = SDN_OK;
    if (sqlite3_step(st) == SQLITE_ROW) *n = (long)sqlite3_column_int64(st, 0);
    else rc = sdn_db_fail(h->db, h->path, "counting answers", err);
    sqlite3_finalize(st);
    return rc;
}

static int64_t set_hash(const sdn_history_answer *a, int n) {
    XXH3_state_t *s = XXH3_createState();
    if (!s) return 0;
    XXH3_64bits_reset(s);
    for (int i = 0; i < n; i++) {
        uint8_t b[8];
        uint64_t v = (uint64_t)a[i].id;
        for (int k = 0; k < 8; k++) b[k] = (uint8_t)(v >> (8 * k));
        XXH3_64bits_update(s, b, 8);
    }
    uint64_t r = XXH3_64bits_digest(s);
    XXH3_freeState(s);
    return (int64_t)r;
}

/* The cached blob when its hash matches and it deserializes; else NULL. */
static uint8_t *cache_lookup(sdn_history *h, const char *group, const char *fp, long max_tokens, int64_t hash, int64_t n_tokens,
                             size_t *len) {
    sqlite3_stmt *st = NULL;
    uint8_t *res = NULL;
    if (sqlite3_prepare_v2(h->db, "SELECT answers_hash, sam FROM history_cache WHERE task_group=? AND model_fp=? AND max_tokens=?", -1, &st,
                           NULL) != SQLITE_OK)
        return NULL;
    sqlite3_bind_text(st, 1, group, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, fp, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, max_tokens);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) == hash && sqlite3_column_type(st, 1) == SQLITE_BLOB) {
        const void *b = sqlite3_column_blob(st, 1);
        int n = sqlite3_column_bytes(st, 1);
        sdn_sam *s = NULL;
        /* the automaton of the selection holds exactly its tokens: a cached blob declaring
         * more is damaged (refused before it is allocated) */
        uint32_t lim = n_tokens < (int64_t)SDN_SAM_MAX_TOKENS ? (uint32_t)n_tokens : SDN_SAM_MAX_TOKENS;
        if (b && n > 0 && sdn_sam_deserialize_max(b, (size_t)n, lim, &s, NULL) == SDN_OK && (res = malloc((size_t)n))) {
            memcpy(res, b, (size_t)n);
            *len = (size_t)n;
        }
        sdn_sam_free(s);
    }
    sqlite3_finalize(st);
    return res;
}

static void cache_store(sdn_history *h, const char *group, const char *fp, long max_tokens, int64_t hash, int n_answers, long n_tokens,
                        const uint8_t *b, size_t len) {
    sqlite3_stmt *st = NULL;
    /* best effort: a store that cannot be written (read-only file, busy) still answers */
    if (sqlite3_exec(h->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) return;
    if (sqlite3_prepare_v2(h->db, "INSERT OR REPLACE INTO history_cache VALUES(?,?,?,?,?,?,?,?)", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, group, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, fp, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, max_tokens);
        sqlite3_bind_int64(st, 4, hash);
        sqlite3_bind_int(st, 5, n_answers);
        sqlite3_bind_int64(st, 6, n_tokens);
        sqlite3_bind_blob(st, 7, b, (int)len, SQLITE_STATIC);
        sqlite3_bind_double(st, 8, now_s());
        if (sqlite3_step(st) == SQLITE_DONE) {
            sqlite3_finalize(st);
            if (sqlite3_exec(h->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK) return;
            st = NULL;
        }
    }
    sqlite3_finalize(st);
    sqlite3_exec(h->db, "ROLLBACK", NULL, NULL, NULL);
}

int sdn_history_automaton(sdn_history *h, const char *group, const char *model_fp, sdn_history_scope scope, long max_tokens,
                          uint8_t **bytes, size_t *len, int *cache_hit, int *n_answers, long *n_tokens, sdn_err *err) {
    *bytes = NULL;
    *len = 0;
    if (cache_hit) *cache_hit = 0;
    if (n_answers) *n_answers = 0;
    if (n_tokens) *n_tokens = 0;
    const char *fp = model_fp ? model_fp : "";
    if (max_tokens < 0) max_tokens = 0;
    sdn_history_answer *a = NULL;
    int n = 0, rc;
    /* one read transaction: the selection and the cache entry are from the same snapshot */
    if ((rc = sdn_db_exec(h->db, h->path, "BEGIN", err))) return rc;
    rc = recent(h, group, fp, scope, max_tokens, 0, &a, &n, err);
    const long key = scope == SDN_HISTORY_GLOBAL ? -1 - max_tokens : max_tokens; /* the cache's key */
    const char *gkey = group ? group : "";
    long total = 0; /* each row <= 2^28 tokens, and their sum <= the budget or the store's total */
    for (int i = 0; i < n; i++) total += a[i].n_tokens;
    if (n_answers) *n_answers = n;
    if (n_tokens) *n_tokens = total;
    int64_t hash = set_hash(a, n);
    uint8_t *cached = NULL;
    size_t clen = 0;
    if (!rc && n > 0) cached = cache_lookup(h, gkey, fp, key, hash, total, &clen);
    sqlite3_exec(h->db, "COMMIT", NULL, NULL, NULL);
    if (rc || n == 0) {
        sdn_history_answers_free(a, n);
        return rc;
    }
    if (cached) {
        sdn_history_answers_free(a, n);
        *bytes = cached;
        *len = clen;
        if (cache_hit) *cache_hit = 1;
        return SDN_OK;
    }
    /* build exactly as sdn_sam_drafter_create builds its static automaton: one sequence per
     * answer, tagged with its index, then shrunk */
    sdn_sam *s = NULL;
    if (!(rc = sdn_sam_create(&s, err))) {
        for (int i = 0; i < n && !rc; i++) rc = sdn_sam_add_seq(s, (uint32_t)i, a[i].tokens, (size_t)a[i].n_tokens, err);
        if (!rc) rc = sdn_sam_shrink(s, err);
        if (!rc) rc = sdn_sam_serialize(s, bytes, len, err);
    }
    sdn_sam_free(s);
    sdn_history_answers_free(a, n);
    if (rc) return sdn_fail(err, rc, "%s: building the history automaton of group '%s'%s", h->path, gkey,
                            scope == SDN_HISTORY_GLOBAL ? " (global scope)" : "");
    cache_store(h, gkey, fp, key, hash, n, total, *bytes, *len);
    return SDN_OK;
}

int sdn_history_check(sdn_history *h, sdn_err *err) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h->db, "PRAGMA integrity_check", -1, &st, NULL) != SQLITE_OK) return sdn_db_fail(h->db, h->path, "integrity check", err);
    char res[512] = "";
    size_t n = 0;
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        if (t && strcmp(t, "ok") != 0 && n + 2 < sizeof res) {
            n += (size_t)snprintf(res + n, sizeof res - n, "%s%s", n ? "; " : "", t);
            if (n >= sizeof res) n = sizeof res - 1;
        }
    }
    int rc = SDN_OK;
    if (s != SQLITE_DONE) rc = sdn_db_fail(h->db, h->path, "integrity check", err);
    else if (n) rc = sdn_fail(err, SDN_EDB, "%s: integrity check failed: %s", h->path, res);
    sqlite3_finalize(st);
    return rc;
}

int sdn_history_candidates_get(sdn_history *h, const char *model_fp, uint8_t **bytes, size_t *len, sdn_err *err) {
    *bytes = NULL;
    *len = 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h->db, "SELECT data FROM model_candidates WHERE model_fp=?", -1, &st, NULL) != SQLITE_OK)
        return sdn_db_fail(h->db, h->path, "reading the model's candidate table", err);
    sqlite3_bind_text(st, 1, model_fp ? model_fp : "", -1, SQLITE_STATIC);
    int s = sqlite3_step(st), rc = SDN_OK;
    if (s == SQLITE_ROW) {
        const void *b = sqlite3_column_blob(st, 0);
        int n = sqlite3_column_bytes(st, 0);
        if (b && n > 0) {
            if (!(*bytes = malloc((size_t)n))) rc = sdn_fail(err, SDN_ENOMEM, "out of memory");
            else memcpy(*bytes, b, (size_t)n), *len = (size_t)n;
        }
    } else if (s != SQLITE_DONE) {
        rc = sdn_db_fail(h->db, h->path, "reading the model's candidate table", err);
    }
    sqlite3_finalize(st);
    return rc;
}

int sdn_history_candidates_put(sdn_history *h, const char *model_fp, int vocab, int k, const uint8_t *bytes, size_t len, sdn_err *err) {
    if (!bytes || len == 0 || len > (size_t)INT32_MAX) return sdn_fail(err, SDN_EINVAL, "history: bad candidate table");
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h->db, "INSERT OR REPLACE INTO model_candidates(model_fp, vocab, k, data, updated) VALUES(?,?,?,?,?)", -1, &st,
                           NULL) != SQLITE_OK)
        return sdn_db_fail(h->db, h->path, "storing the model's candidate table", err);
    sqlite3_bind_text(st, 1, model_fp ? model_fp : "", -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, vocab);
    sqlite3_bind_int(st, 3, k);
    sqlite3_bind_blob(st, 4, bytes, (int)len, SQLITE_STATIC);
    sqlite3_bind_double(st, 5, now_s());
    int rc = sqlite3_step(st) == SQLITE_DONE ? SDN_OK : sdn_db_fail(h->db, h->path, "storing the model's candidate table", err);
    sqlite3_finalize(st);
    return rc;
}
