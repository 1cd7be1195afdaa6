/* profile_db.c - the SQLite profile cache (see profile.h). A profile file is recognised by
 * PRAGMA application_id ('SDNP') and user_version; a new file gets the schema in one
 * transaction. Raw measurements are stored and the fits are recomputed on load (the same
 * code path as after measuring); the fitted parameters are stored too, for other readers. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/sdn_db.h"
#include "graph_sched/profile.h"

#define PROFILE_APP_ID 0x53444e50 /* 'SDNP' */
#define PROFILE_VERSION 1

static const char *schema =
    "CREATE TABLE profile(id INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL, threads INTEGER NOT NULL, machine TEXT NOT NULL,"
    " n_layers INTEGER NOT NULL, n_blocks INTEGER NOT NULL, s1 INTEGER NOT NULL, created TEXT NOT NULL,"
    " UNIQUE(fingerprint, threads, machine));"
    "CREATE TABLE block(profile_id INTEGER NOT NULL REFERENCES profile(id) ON DELETE CASCADE, block INTEGER NOT NULL,"
    " l0 INTEGER NOT NULL, l1 INTEGER NOT NULL, PRIMARY KEY(profile_id, block));"
    "CREATE TABLE measurement(profile_id INTEGER NOT NULL REFERENCES profile(id) ON DELETE CASCADE, block INTEGER NOT NULL,"
    " kind TEXT NOT NULL, rows INTEGER NOT NULL, kv_base INTEGER NOT NULL, held_out INTEGER NOT NULL, seconds REAL NOT NULL,"
    " bytes REAL NOT NULL);"
    "CREATE TABLE fit(profile_id INTEGER NOT NULL REFERENCES profile(id) ON DELETE CASCADE, name TEXT NOT NULL,"
    " p0 REAL, p1 REAL, p2 REAL, r2 REAL, max_rel_err REAL, heldout_rel_err REAL, n_points INTEGER,"
    " PRIMARY KEY(profile_id, name));";

static const char *const kind_names[SDN_PROF_KINDS] = {
    [SDN_PROF_NONE] = "",
    [SDN_PROF_G1_COMPUTE] = "g1_compute",
    [SDN_PROF_G2_COMPUTE] = "g2_compute",
    [SDN_PROF_G1_LOAD] = "g1_load",
    [SDN_PROF_G2_LOAD] = "g2_load",
    [SDN_PROF_VERIFY_STEP] = "verify_step",
    [SDN_PROF_G2_LOAD_OVERLAPPED] = "g2_load_overlapped",
    [SDN_PROF_G1_COMPUTE_DURING_LOAD] = "g1_compute_during_load",
};

const char *sdn_profile_kind_name(sdn_profile_kind k) { return k > SDN_PROF_NONE && k < SDN_PROF_KINDS ? kind_names[k] : ""; }

static const sdn_db_kind k_profile = {
    "profile database", PROFILE_APP_ID, PROFILE_VERSION, NULL, {"profile", "block", "measurement", "fit", NULL}, NULL};

/* Open `path` as a profile file (create when absent, or refuse a foreign/damaged file). */
static int open_db(const char *path, int create, sqlite3 **out, sdn_err *err) {
    sdn_db_kind k = k_profile;
    k.schema = schema;
    return sdn_db_open(path, &k, create, out, err);
}

static int save_fit(sqlite3 *db, const char *path, long long id, const char *name, double p0, double p1, double p2, double r2, double maxe,
                    double hold, int n, sdn_err *err) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "INSERT INTO fit VALUES(?,?,?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK) return sdn_db_fail(db, path, "fit", err);
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 3, p0);
    sqlite3_bind_double(st, 4, p1);
    sqlite3_bind_double(st, 5, p2);
    sqlite3_bind_double(st, 6, r2);
    sqlite3_bind_double(st, 7, maxe);
    sqlite3_bind_double(st, 8, hold);
    sqlite3_bind_int(st, 9, n);
    int rc = sqlite3_step(st) == SQLITE_DONE ? SDN_OK : sdn_db_fail(db, path, "fit", err);
    sqlite3_finalize(st);
    return rc;
}

int sdn_profile_db_save(const char *path, const sdn_profile *p, sdn_err *err) {
    sqlite3 *db;
    int rc = open_db(path, 1, &db, err);
    if (rc) return rc;
    sqlite3_stmt *st = NULL;
    if ((rc = sdn_db_exec(db, path, "BEGIN IMMEDIATE", err))) goto out;
    if (sqlite3_prepare_v2(db, "DELETE FROM profile WHERE fingerprint=? AND threads=? AND machine=?", -1, &st, NULL) != SQLITE_OK) goto dberr;
    sqlite3_bind_text(st, 1, p->fingerprint, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, p->threads);
    sqlite3_bind_text(st, 3, p->machine, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE) goto dberr;
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(db, "INSERT INTO profile(fingerprint,threads,machine,n_layers,n_blocks,s1,created) VALUES(?,?,?,?,?,?,?)", -1, &st,
                           NULL) != SQLITE_OK)
        goto dberr;
    char when[32];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    sqlite3_bind_text(st, 1, p->fingerprint, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, p->threads);
    sqlite3_bind_text(st, 3, p->machine, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 4, p->n_layers);
    sqlite3_bind_int(st, 5, p->n_blocks);
    sqlite3_bind_int(st, 6, p->s1);
    sqlite3_bind_text(st, 7, when, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_DONE) goto dberr;
    sqlite3_finalize(st);
    long long id = sqlite3_last_insert_rowid(db);
    if (sqlite3_prepare_v2(db, "INSERT INTO block VALUES(?,?,?,?)", -1, &st, NULL) != SQLITE_OK) goto dberr;
    for (int j = 0; j < p->n_blocks; j++) {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int(st, 2, j);
        sqlite3_bind_int(st, 3, p->l0[j]);
        sqlite3_bind_int(st, 4, p->l1[j]);
        if (sqlite3_step(st) != SQLITE_DONE) goto dberr;
    }
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(db, "INSERT INTO measurement VALUES(?,?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK) goto dberr;
    for (int i = 0; i < p->n_meas; i++) {
        const sdn_profile_meas *me = &p->meas[i];
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int(st, 2, me->block);
        sqlite3_bind_text(st, 3, sdn_profile_kind_name(me->kind), -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 4, me->rows);
        sqlite3_bind_int(st, 5, me->kv_base);
        sqlite3_bind_int(st, 6, me->held_out);
        sqlite3_bind_double(st, 7, me->seconds);
        sqlite3_bind_double(st, 8, me->bytes);
        if (sqlite3_step(st) != SQLITE_DONE) goto dberr;
    }
    sqlite3_finalize(st);
    st = NULL;
    if ((rc = save_fit(db, path, id, "g1", p->g1.alpha, p->g1.beta, p->g1.kappa, p->g1.r2, p->g1.max_rel_err, p->g1_hold_err, p->g1.n_points, err)) ||
        (rc = save_fit(db, path, id, "g2", p->g2.alpha, p->g2.beta, p->g2.kappa, p->g2.r2, p->g2.max_rel_err, p->g2_hold_err, p->g2.n_points, err)) ||
        (rc = save_fit(db, path, id, "load_g1", p->tau_g1, 0, 0, 0, p->load_g1_err, 0, p->n_blocks, err)) ||
        (rc = save_fit(db, path, id, "load_g2", p->tau_g2, 0, 0, 0, p->load_g2_err, 0, p->n_blocks, err)) ||
        (rc = save_fit(db, path, id, "load_g2_overlapped", p->tau_g2_ovl, 0, 0, 0, p->load_g2_ovl_err, 0, p->n_blocks, err)) ||
        (rc = save_fit(db, path, id, "verify", p->verify[0], p->verify[1], p->verify[2], p->verify_r2, p->verify_err, 0, 0, err)))
        goto rollback;
    if ((rc = sdn_db_exec(db, path, "COMMIT", err))) goto rollback;
    goto out;
dberr:
    rc = sdn_db_fail(db, path, "saving the profile", err);
rollback:
    sqlite3_finalize(st);
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
out:
    sqlite3_close(db);
    return rc;
}

int sdn_profile_db_load(const char *path, const char *fingerprint, int threads, const char *machine, sdn_profile **out, sdn_err *err) {
    *out = NULL;
    if (access(path, F_OK) != 0) return SDN_OK; /* no cache yet */
    sqlite3 *db;
    int rc = open_db(path, 0, &db, err);
    if (rc) return rc;
    sqlite3_stmt *st = NULL;
    sdn_profile *p = NULL;
    if (sqlite3_prepare_v2(db, "SELECT id, n_layers, n_blocks, s1 FROM profile WHERE fingerprint=? AND threads=? AND machine=?", -1, &st,
                           NULL) != SQLITE_OK)
        goto dberr;
    sqlite3_bind_text(st, 1, fingerprint, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, threads);
    sqlite3_bind_text(st, 3, machine, -1, SQLITE_STATIC);
    int s = sqlite3_step(st);
    if (s == SQLITE_DONE) goto out; /* none */
    if (s != SQLITE_ROW) goto dberr;
    p = calloc(1, sizeof *p);
    if (!p) { rc = sdn_fail(err, SDN_ENOMEM, "out of memory"); goto out; }
    long long id = sqlite3_column_int64(st, 0);
    snprintf(p->fingerprint, sizeof p->fingerprint, "%s", fingerprint);
    p->threads = threads;
    snprintf(p->machine, sizeof p->machine, "%s", machine);
    p->n_layers = sqlite3_column_int(st, 1);
    p->n_blocks = sqlite3_column_int(st, 2);
    p->s1 = sqlite3_column_int(st, 3);
    sqlite3_finalize(st);
    st = NULL;
    if (p->n_layers < 1 || p->n_blocks < 1 || p->n_blocks > 128 || p->n_blocks > p->n_layers || p->s1 < 1) {
        rc = sdn_fail(err, SDN_EFORMAT, "%s: profile %lld: bad shape (%d layers, %d blocks, S1 %d)", path, id, p->n_layers, p->n_blocks, p->s1);
        goto out;
    }
    if (sqlite3_prepare_v2(db, "SELECT block, l0, l1 FROM block WHERE profile_id=? ORDER BY block", -1, &st, NULL) != SQLITE_OK) goto dberr;
    sqlite3_bind_int64(st, 1, id);
    int nb = 0;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        int j = sqlite3_column_int(st, 0), l0 = sqlite3_column_int(st, 1), l1 = sqlite3_column_int(st, 2);
        if (j != nb || j >= p->n_blocks || l0 < 0 || l1 <= l0 || l1 > p->n_layers || (j && l0 != p->l1[j - 1])) {
            rc = sdn_fail(err, SDN_EFORMAT, "%s: profile %lld: block %d has an invalid layer range [%d, %d)", path, id, j, l0, l1);
            goto out;
        }
        p->l0[j] = l0;
        p->l1[j] = l1;
        nb++;
    }
    if (s != SQLITE_DONE) goto dberr;
    if (nb != p->n_blocks || p->l1[nb - 1] != p->n_layers) {
        rc = sdn_fail(err, SDN_EFORMAT, "%s: profile %lld: blocks do not cover the %d layers", path, id, p->n_layers);
        goto out;
    }
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(db, "SELECT block, kind, rows, kv_base, held_out, seconds, bytes FROM measurement WHERE profile_id=? ORDER BY rowid",
                           -1, &st, NULL) != SQLITE_OK)
        goto dberr;
    sqlite3_bind_int64(st, 1, id);
    int cap = 0;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        sdn_profile_meas me = {0};
        const char *k = (const char *)sqlite3_column_text(st, 1);
        for (int i = SDN_PROF_NONE + 1; i < SDN_PROF_KINDS; i++)
            if (k && !strcmp(k, kind_names[i])) me.kind = (sdn_profile_kind)i;
        me.block = sqlite3_column_int(st, 0);
        me.rows = sqlite3_column_int(st, 2);
        me.kv_base = sqlite3_column_int(st, 3);
        me.held_out = sqlite3_column_int(st, 4) != 0;
        me.seconds = sqlite3_column_double(st, 5);
        me.bytes = sqlite3_column_double(st, 6);
        int block_ok = me.kind == SDN_PROF_VERIFY_STEP ? me.block == -1 : me.block >= 0 && me.block < p->n_blocks;
        if (!me.kind || !block_ok || me.rows < 0 || me.rows > (1 << 20) || me.kv_base < 0 || !(me.seconds >= 0 && me.seconds < 1e6) ||
            ((me.kind == SDN_PROF_G1_COMPUTE || me.kind == SDN_PROF_G2_COMPUTE || me.kind == SDN_PROF_VERIFY_STEP ||
              me.kind == SDN_PROF_G1_COMPUTE_DURING_LOAD) &&
             me.rows < 1)) {
            rc = sdn_fail(err, SDN_EFORMAT, "%s: profile %lld: invalid measurement (kind '%s', block %d, rows %d, seconds %g)", path, id,
                          k ? k : "NULL", me.block, me.rows, me.seconds);
            goto out;
        }
        if (p->n_meas == cap) {
            cap = cap ? 2 * cap : 256;
            sdn_profile_meas *nm = realloc(p->meas, (size_t)cap * sizeof *nm);
            if (!nm) { rc = sdn_fail(err, SDN_ENOMEM, "out of memory"); goto out; }
            p->meas = nm;
        }
        p->meas[p->n_meas++] = me;
    }
    if (s != SQLITE_DONE) goto dberr;
    sqlite3_finalize(st);
    st = NULL;
    if ((rc = sdn_profile_fit(p, err))) {
        rc = sdn_fail(err, SDN_EFORMAT, "%s: profile %lld", path, id);
        goto out;
    }
    *out = p;
    p = NULL;
    goto out;
dberr:
    rc = sdn_db_fail(db, path, "reading the profile", err);
out:
    sqlite3_finalize(st);
    sqlite3_close(db);
    sdn_profile_free(p);
    return rc;
}
