/* test_history.c - the SQLite history store: answers round-trip exactly; loading is most
 * recent first, per group and model, within the token budget; the cached automaton equals
 * one built independently from the same answers and is rebuilt exactly when the answer
 * set changes (or the cached blob is damaged); WAL mode, a writer not blocked by an open
 * reader, concurrent reader and writer processes; a child killed with SIGKILL in the
 * middle of writing loses no answer it reported committed and leaves a sound file;
 * random bytes, a truncated file and other applications' SQLite files are refused with a
 * message naming the file, and left untouched. A damaged store in rollback-journal
 * mode and an empty file are refused byte-for-byte unchanged; the row checksum covers the
 * text; a damaged n_tokens (INT64_MAX) is refused before any arithmetic; a version-1 store
 * is migrated without losing rows; a writer killed at random points many times and two
 * concurrent writers lose no committed row. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>
#include <xxhash.h>

#include "common/sdn_util.h"
#include "runtime/history.h"
#include "draft/sam_drafter.h"
#include "suffix_automaton/sam.h"
#include "support/test_util.h"

static sdn_history *open_ok(const char *path) {
    sdn_history *h = NULL;
    sdn_err err = {0};
    if (sdn_history_open(path, &h, &err)) fail_msg("%s", err.msg);
    return h;
}

static void fresh(const char *path) {
    char p[1200];
    unlink(path);
    snprintf(p, sizeof p, "%s-wal", path);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", path);
    unlink(p);
}

/* Deterministic answer k: 5 + k % 7 tokens. */
static int answer_tokens(int k, int32_t *t) {
    int n = 5 + k % 7;
    for (int i = 0; i < n; i++) t[i] = (int32_t)((k * 31 + i * 7) % 500);
    return n;
}

static void test_round_trip(void **state) {
    (void)state;
    const char *path = tu_tmp("hist-rt.db");
    fresh(path);
    sdn_history *h = open_ok(path);
    sdn_err err = {0};
    int32_t t[16];
    int64_t ids[6];
    /* group g, model A: created 100, 300, 200 (not in id order); group g model B; group h */
    double created[] = {100, 300, 200, 400, 500, 250};
    const char *groups[] = {"g", "g", "g", "g", "h", "g"};
    const char *models[] = {"A", "A", "A", "B", "A", "A"};
    char text[32];
    for (int k = 0; k < 6; k++) {
        int n = answer_tokens(k, t);
        snprintf(text, sizeof text, "answer %d", k);
        assert_int_equal(sdn_history_add(h, groups[k], models[k], t, n, k == 2 ? NULL : text, created[k], &ids[k], &err), SDN_OK);
    }
    long cnt;
    assert_int_equal(sdn_history_count(h, "g", "A", &cnt, &err), SDN_OK);
    assert_int_equal(cnt, 4);
    assert_int_equal(sdn_history_count(h, NULL, NULL, &cnt, &err), SDN_OK);
    assert_int_equal(cnt, 6);
    /* most recent first: k=1 (300), k=5 (250), k=2 (200), k=0 (100) */
    sdn_history_answer *a;
    int n;
    assert_int_equal(sdn_history_recent(h, "g", "A", SDN_HISTORY_GROUP, 0, &a, &n, &err), SDN_OK);
    assert_int_equal(n, 4);
    int order[] = {1, 5, 2, 0};
    for (int i = 0; i < 4; i++) {
        int k = order[i];
        int m = answer_tokens(k, t);
        assert_int_equal(a[i].id, ids[k]);
        assert_int_equal(a[i].n_tokens, m);
        assert_memory_equal(a[i].tokens, t, sizeof(int32_t) * m);
        assert_true(a[i].created == created[k]);
        if (k == 2) assert_null(a[i].text);
        else {
            snprintf(text, sizeof text, "answer %d", k);
            assert_string_equal(a[i].text, text);
        }
    }
    sdn_history_answers_free(a, n);
    /* budget: answers 1 (6 tokens) + 5 (10 tokens) = 16 fit in 17; the next (7) does not */
    assert_int_equal(answer_tokens(1, t), 6);
    assert_int_equal(answer_tokens(5, t), 10);
    assert_int_equal(sdn_history_recent(h, "g", "A", SDN_HISTORY_GROUP, 17, &a, &n, &err), SDN_OK);
    assert_int_equal(n, 2);
    sdn_history_answers_free(a, n);
    sdn_history_answer one;
    assert_int_equal(sdn_history_get(h, ids[4], &one, &err), SDN_OK);
    assert_string_equal(one.text, "answer 4");
    free(one.tokens);
    free(one.text);
    assert_int_equal(sdn_history_get(h, 9999, &one, &err), SDN_EINVAL);
    /* bad arguments */
    assert_int_equal(sdn_history_add(h, "", "A", t, 1, NULL, 0, NULL, &err), SDN_EINVAL);
    t[0] = -1;
    assert_int_equal(sdn_history_add(h, "g", "A", t, 1, NULL, 0, NULL, &err), SDN_EINVAL);
    sdn_history_close(h);
    /* reopen: same content, WAL mode on the file */
    h = open_ok(path);
    assert_int_equal(sdn_history_count(h, NULL, NULL, &cnt, &err), SDN_OK);
    assert_int_equal(cnt, 6);
    assert_int_equal(sdn_history_check(h, &err), SDN_OK);
    sdn_history_close(h);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* The automaton an independent build gives: one sequence per answer, most recent first. */
static void reference_bytes(sdn_history *h, const char *g, const char *m, long budget, uint8_t **b, size_t *len) {
    sdn_history_answer *a;
    int n;
    sdn_err err = {0};
    assert_int_equal(sdn_history_recent(h, g, m, SDN_HISTORY_GROUP, budget, &a, &n, &err), SDN_OK);
    sdn_sam *s;
    assert_int_equal(sdn_sam_create(&s, &err), SDN_OK);
    for (int i = 0; i < n; i++) assert_int_equal(sdn_sam_add_seq(s, (uint32_t)i, a[i].tokens, (size_t)a[i].n_tokens, &err), SDN_OK);
    assert_int_equal(sdn_sam_shrink(s, &err), SDN_OK);
    assert_int_equal(sdn_sam_serialize(s, b, len, &err), SDN_OK);
    sdn_sam_free(s);
    sdn_history_answers_free(a, n);
}

/* The global scope: the group's answers first, then the model's other answers, each most
 * recent first, under one budget (an order written out by hand from the timestamps); its
 * automaton equals an independent build over that selection and is cached apart from the
 * group's own. */
static void test_global_scope(void **state) {
    (void)state;
    const char *path = tu_tmp("hist-global.db");
    fresh(path);
    sdn_history *h = open_ok(path);
    sdn_err err = {0};
    int32_t t[16];
    int64_t ids[6];
    const double created[] = {100, 300, 400, 500, 200, 350};
    const char *groups[] = {"g", "g", "h", "g", "h", "i"};
    const char *models[] = {"A", "A", "A", "B", "A", "A"};
    for (int k = 0; k < 6; k++)
        assert_int_equal(sdn_history_add(h, groups[k], models[k], t, answer_tokens(k, t), NULL, created[k], &ids[k], &err), SDN_OK);
    static const struct {
        const char *group;
        long budget;
        int n, order[5];
    } cases[] = {
        {"g", 0, 5, {1, 0, 2, 5, 4}},    /* own (300, 100), then h 400, i 350, h 200; model B never */
        {NULL, 0, 5, {2, 5, 1, 4, 0}},   /* no group: the model's answers by time */
        {"zzz", 0, 5, {2, 5, 1, 4, 0}},  /* a group without answers: the others */
        {"i", 0, 5, {5, 2, 1, 4, 0}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        sdn_history_answer *a;
        int n;
        assert_int_equal(sdn_history_recent(h, cases[c].group, "A", SDN_HISTORY_GLOBAL, cases[c].budget, &a, &n, &err), SDN_OK);
        assert_int_equal(n, cases[c].n);
        for (int i = 0; i < n; i++) assert_int_equal(a[i].id, ids[cases[c].order[i]]);
        sdn_history_answers_free(a, n);
    }
    /* the budget cuts the same sequence: 1 (6 tokens) + 0 (5) fit in 12, answer 2 (7) does not */
    assert_int_equal(answer_tokens(0, t) + answer_tokens(1, t), 11);
    sdn_history_answer *a;
    int n;
    assert_int_equal(sdn_history_recent(h, "g", "A", SDN_HISTORY_GLOBAL, 12, &a, &n, &err), SDN_OK);
    assert_int_equal(n, 2);
    sdn_history_answers_free(a, n);
    /* the automaton: an independent build over the global selection, and the group's own apart */
    uint8_t *b = NULL, *gb = NULL;
    size_t bl, gbl;
    int hit, na;
    long nt;
    assert_int_equal(sdn_history_automaton(h, "g", "A", SDN_HISTORY_GLOBAL, 0, &b, &bl, &hit, &na, &nt, &err), SDN_OK);
    assert_int_equal(hit, 0);
    assert_int_equal(na, 5);
    assert_int_equal(sdn_history_recent(h, "g", "A", SDN_HISTORY_GLOBAL, 0, &a, &n, &err), SDN_OK);
    sdn_sam *s;
    assert_int_equal(sdn_sam_create(&s, &err), SDN_OK);
    for (int i = 0; i < n; i++) assert_int_equal(sdn_sam_add_seq(s, (uint32_t)i, a[i].tokens, (size_t)a[i].n_tokens, &err), SDN_OK);
    assert_int_equal(sdn_sam_shrink(s, &err), SDN_OK);
    uint8_t *r;
    size_t rl;
    assert_int_equal(sdn_sam_serialize(s, &r, &rl, &err), SDN_OK);
    sdn_sam_free(s);
    sdn_history_answers_free(a, n);
    assert_int_equal(bl, rl);
    assert_memory_equal(b, r, bl);
    free(r);
    assert_int_equal(sdn_history_automaton(h, "g", "A", SDN_HISTORY_GROUP, 0, &gb, &gbl, &hit, &na, NULL, &err), SDN_OK);
    assert_int_equal(hit, 0);
    assert_int_equal(na, 2);
    free(gb);
    /* both stay cached: neither lookup evicts the other */
    assert_int_equal(sdn_history_automaton(h, "g", "A", SDN_HISTORY_GLOBAL, 0, &gb, &gbl, &hit, NULL, NULL, &err), SDN_OK);
    assert_int_equal(hit, 1);
    assert_int_equal(gbl, bl);
    assert_memory_equal(gb, b, bl);
    free(gb);
    assert_int_equal(sdn_history_automaton(h, "g", "A", SDN_HISTORY_GROUP, 0, &gb, &gbl, &hit, NULL, NULL, &err), SDN_OK);
    assert_int_equal(hit, 1);
    free(gb);
    /* another group's new answer changes the global selection: rebuilt */
    assert_int_equal(sdn_history_add(h, "j", "A", t, answer_tokens(3, t), NULL, 900, NULL, &err), SDN_OK);
    assert_int_equal(sdn_history_automaton(h, "g", "A", SDN_HISTORY_GLOBAL, 0, &gb, &gbl, &hit, &na, NULL, &err), SDN_OK);
    assert_int_equal(hit, 0);
    assert_int_equal(na, 6);
    free(gb);
    free(b);
    sdn_history_close(h);
}

static void test_automaton_cache(void **state) {
    (void)state;
    const char *path = tu_tmp("hist-cache.db");
    fresh(path);
    sdn_history *h = open_ok(path);
    sdn_err err = {0};
    uint8_t *b = NULL, *r = NULL;
    size_t bl, rl;
    int hit, na;
    long nt;
    /* no answers: no automaton */
    assert_int_equal(sdn_history_automaton(h, "g", "A", SDN_HISTORY_GROUP, 100, &b, &bl, &hit, &na, &nt, &err), SDN_OK);
    assert_null(b);
    assert_int_equal(na, 0);
    int32_t t[16];
    for (int k = 0; k < 5; k++) {
        int n = answer_tokens(k, t);
        assert_int_equal(sdn_history_add(h, "g", "A", t, n, NULL, 1000 + k, NULL, &err), SDN_OK);
    }
    assert_int_equal(sdn_history_automaton(h, "g", "A", SDN_HISTORY_GROUP, 30, &b, &bl, &hit, &na, &nt, &err), SDN_OK);
    assert_int_equal(hit, 0);
    reference_bytes(h, "g", "A", 30, &r, &rl);
    assert_int_equal(bl, rl);
    assert_memory_equal(b, r, bl);
    assert_true(na >= 2 && nt <= 30);
    free(b);
    /* unchanged answer set: from the cache, same bytes */
    assert_int_equal(sdn_history_automaton(h, "g", "A", SDN_HISTORY_GROUP, 30, &b, &bl, &hit, NULL, NULL, &err), SDN_OK);
    assert_int_equal(hit, 1);
    assert_int_equal(bl, rl);
    assert_memory_equal(b, r, bl);
    free(b);
    free(r);
    /* an answer of another group or model does not change it */
    answer_tokens(9, t);
    assert_int_equal(sdn_history_add(h, "other", "A", t, 5, NULL, 5000, NULL, &err), SDN_OK);
    assert_int_equal(sdn_history_add(h, "g", "B", t, 5, NULL, 5000, NULL, &err), SDN_OK);
    assert_int_equal(sdn_history_automaton(h, "g", "A", SDN_HISTORY_GROUP, 30, &b, &bl, &hit, NULL, NULL, &err), SDN_OK);
    assert_int_equal(hit, 1);
    free(b);
    /* a new answer of the group: rebuilt, and equal to the independent build again */
    assert_int_equal(sdn_history_add(h, "g", "A", t, 5, NULL, 6000, NULL, &err), SDN_OK);
    assert_int_equal(sdn_history_automaton(h, "g", "A", SDN_HISTORY_GROUP, 30, &b, &bl, &hit, NULL, NULL, &err), SDN_OK);
    assert_int_equal(hit, 0);
    reference_bytes(h, "g", "A", 30, &r, &rl);
    assert_int_equal(bl, rl);
    assert_memory_equal(b, r, bl);
    /* the bytes feed the SAM drafter */
    sdn_drafter d;
    assert_int_equal(sdn_sam_drafter_create_from_bytes(NULL, b, bl, &d, &err), SDN_OK);
    sdn_drafter_destroy(&d);
    free(b);
    free(r);
    /* damage the cached blob behind the store's back: it is rebuilt, not trusted */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "UPDATE history_cache SET sam = zeroblob(64)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(sdn_history_automaton(h, "g", "A", SDN_HISTORY_GROUP, 30, &b, &bl, &hit, NULL, NULL, &err), SDN_OK);
    assert_int_equal(hit, 0);
    reference_bytes(h, "g", "A", 30, &r, &rl);
    assert_memory_equal(b, r, bl);
    free(b);
    free(r);
    /* a damaged answer row is reported with its id */
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "UPDATE answers SET tokens = zeroblob(length(tokens)) WHERE id = 2", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    sdn_history_answer *a;
    int n;
    assert_int_equal(sdn_history_recent(h, "g", "A", SDN_HISTORY_GROUP, 0, &a, &n, &err), SDN_EDB);
    assert_non_null(strstr(err.msg, "answer 2"));
    sdn_history_close(h);
}

/* A writer commits while another connection holds a read transaction (WAL); reader and
 * writer processes run at the same time without errors. */
static void test_concurrency(void **state) {
    (void)state;
    const char *path = tu_tmp("hist-conc.db");
    fresh(path);
    sdn_history *h = open_ok(path);
    sdn_err err = {0};
    int32_t t[16];
    int n = answer_tokens(1, t);
    assert_int_equal(sdn_history_add(h, "g", "A", t, n, "x", 0, NULL, &err), SDN_OK);
    sqlite3 *rd;
    assert_int_equal(sqlite3_open(path, &rd), SQLITE_OK);
    assert_int_equal(sqlite3_exec(rd, "BEGIN; SELECT count(*) FROM answers;", NULL, NULL, NULL), SQLITE_OK);
    double t0 = sdn_now();
    assert_int_equal(sdn_history_add(h, "g", "A", t, n, "y", 0, NULL, &err), SDN_OK);
    assert_true(sdn_now() - t0 < 5.0); /* not blocked by the reader */
    sqlite3_exec(rd, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(rd);
    sdn_history_close(h);

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        sdn_history *c = NULL;
        if (sdn_history_open(path, &c, NULL)) _exit(10);
        for (int i = 0; i < 150; i++) {
            sdn_history_answer *a;
            int m;
            if (sdn_history_recent(c, "g", "A", SDN_HISTORY_GROUP, 0, &a, &m, NULL)) _exit(11);
            sdn_history_answers_free(a, m);
        }
        sdn_history_close(c);
        _exit(0);
    }
    h = open_ok(path);
    for (int i = 0; i < 40; i++) assert_int_equal(sdn_history_add(h, "g", "A", t, n, NULL, 0, NULL, &err), SDN_OK);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    long cnt;
    assert_int_equal(sdn_history_count(h, "g", "A", &cnt, &err), SDN_OK);
    assert_int_equal(cnt, 42);
    sdn_history_close(h);
}

/* A child writes answers in a loop and reports each committed (k, id) through a pipe; it is
 * SIGKILLed while writing. Mode 0: at an arbitrary moment of the loop (large answers keep
 * it inside transactions most of the time). Mode 1: certainly inside a transaction: after
 * 40 answers it opens one on a second connection, inserts a row, reports that and waits.
 * Every reported answer must be present and intact, the uncommitted row absent, and the
 * file sound and writable. */
static void kill_run(int mode) {
    const char *path = tu_tmp(mode ? "hist-kill1.db" : "hist-kill0.db");
    fresh(path);
    sdn_history_close(open_ok(path));
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        sdn_history *c = NULL;
        if (sdn_history_open(path, &c, NULL)) _exit(10);
        static int32_t big[4096];
        for (int k = 0;; k++) {
            if (mode == 1 && k == 40) {
                sqlite3 *raw;
                if (sqlite3_open(path, &raw) != SQLITE_OK) _exit(13);
                sqlite3_busy_timeout(raw, 10000);
                if (sqlite3_exec(raw, "BEGIN IMMEDIATE; INSERT INTO answers(task_group, model_fp, created, n_tokens, tokens, text, checksum)"
                                      " VALUES('g', 'A', 1, 1000, zeroblob(4000), 'uncommitted', 0);", NULL, NULL, NULL) != SQLITE_OK)
                    _exit(14);
                int64_t msg[2] = {-1, -1};
                if (write(fd[1], msg, sizeof msg) != sizeof msg) _exit(12);
                for (;;) pause();
            }
            int n = 1000 + (k * 37) % 3000;
            for (int i = 0; i < n; i++) big[i] = (int32_t)((k * 131 + i) % 30000);
            char text[64];
            snprintf(text, sizeof text, "answer %d", k);
            int64_t id;
            if (sdn_history_add(c, "g", "A", big, n, text, 0, &id, NULL)) _exit(11);
            int64_t msg[2] = {k, id};
            if (write(fd[1], msg, sizeof msg) != sizeof msg) _exit(12);
        }
    }
    close(fd[1]);
    static int64_t got[4096][2];
    int n_got = 0, in_txn = 0;
    for (;;) {
        int64_t m[2];
        if (read(fd[0], m, sizeof m) != sizeof m) break;
        if (m[0] < 0) { in_txn = 1; break; }
        got[n_got][0] = m[0], got[n_got][1] = m[1];
        n_got++;
        if (mode == 0 && n_got == 60) break;
    }
    if (mode == 0) usleep(3000); /* let it get into the next transaction */
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    if (!WIFSIGNALED(status)) fail_msg("writer child exited with status %d instead of being killed", WEXITSTATUS(status));
    if (mode == 1) assert_true(in_txn);
    /* what it reported before dying */
    for (;;) {
        int64_t m[2];
        if (read(fd[0], m, sizeof m) != sizeof m || m[0] < 0 || n_got + 1 >= 4096) break;
        got[n_got][0] = m[0], got[n_got][1] = m[1];
        n_got++;
    }
    close(fd[0]);
    assert_true(n_got >= (mode ? 40 : 60));
    sdn_history *h = open_ok(path);
    sdn_err err = {0};
    assert_int_equal(sdn_history_check(h, &err), SDN_OK);
    static int32_t want[4096];
    for (int i = 0; i < n_got; i++) {
        int k = (int)got[i][0];
        int n = 1000 + (k * 37) % 3000;
        for (int j = 0; j < n; j++) want[j] = (int32_t)((k * 131 + j) % 30000);
        sdn_history_answer a;
        if (sdn_history_get(h, got[i][1], &a, &err)) fail_msg("committed answer %d (id %lld) lost: %s", k, (long long)got[i][1], err.msg);
        assert_int_equal(a.n_tokens, n);
        assert_memory_equal(a.tokens, want, sizeof(int32_t) * n);
        char text[64];
        snprintf(text, sizeof text, "answer %d", k);
        assert_string_equal(a.text, text);
        free(a.tokens);
        free(a.text);
    }
    long cnt;
    assert_int_equal(sdn_history_count(h, NULL, NULL, &cnt, &err), SDN_OK);
    if (mode == 1) assert_int_equal(cnt, n_got); /* the open transaction's row is gone */
    else assert_true(cnt >= n_got && cnt <= n_got + 1); /* at most the unreported last commit on top */
    /* every stored row is intact (the interrupted one would fail its checksum) */
    sdn_history_answer *all;
    int n_all;
    assert_int_equal(sdn_history_recent(h, "g", "A", SDN_HISTORY_GROUP, 0, &all, &n_all, &err), SDN_OK);
    assert_int_equal(n_all, cnt);
    sdn_history_answers_free(all, n_all);
    /* still writable after the crash */
    int32_t t[4] = {1, 2, 3, 4};
    assert_int_equal(sdn_history_add(h, "g", "A", t, 4, NULL, 0, NULL, &err), SDN_OK);
    sdn_history_close(h);
}

static void test_kill_during_write(void **state) {
    (void)state;
    kill_run(0);
    kill_run(1);
}

static char *slurp(const char *path, size_t *n) {
    char *d;
    if (sdn_read_file(path, &d, n, NULL)) return NULL;
    return d;
}

static void expect_refused(const char *path, const char *fragment) {
    size_t n0, n1;
    char *before = slurp(path, &n0);
    sdn_history *h = NULL;
    sdn_err err = {0};
    int rc = sdn_history_open(path, &h, &err);
    if (rc == SDN_OK) fail_msg("%s opened although it should be refused", path);
    if (!strstr(err.msg, path) || !strstr(err.msg, fragment)) fail_msg("message '%s' should name %s and say '%s'", err.msg, path, fragment);
    char *after = slurp(path, &n1);
    assert_int_equal(n0, n1); /* untouched */
    assert_memory_equal(before, after, n0);
    free(before);
    free(after);
}

static void test_bad_files(void **state) {
    (void)state;
    /* random bytes */
    const char *p1 = tu_tmp("random.db");
    fresh(p1);
    uint8_t junk[8192];
    sdn_rng r;
    sdn_rng_seed(&r, 5);
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)sdn_rng_u64(&r);
    assert_int_equal(tu_write_file(p1, junk, sizeof junk), 0);
    expect_refused(p1, "not an SQLite database");
    /* another application's database */
    const char *p2 = tu_tmp("foreign.db");
    fresh(p2);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(p2, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE users(name TEXT); INSERT INTO users VALUES('x');", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    expect_refused(p2, "another application (tables: users)");
    /* another application_id */
    const char *p3 = tu_tmp("otherapp.db");
    fresh(p3);
    assert_int_equal(sqlite3_open(p3, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA application_id=1234; CREATE TABLE answers(x);", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    expect_refused(p3, "application_id 0x000004d2");
    /* a newer schema version of our own store */
    const char *p4 = tu_tmp("newer.db");
    fresh(p4);
    sdn_history_close(open_ok(p4));
    assert_int_equal(sqlite3_open(p4, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version=99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    sdn_history *h = NULL;
    sdn_err err = {0};
    assert_int_equal(sdn_history_open(p4, &h, &err), SDN_EUNSUP);
    assert_non_null(strstr(err.msg, "newer"));
    /* a truncated store (checkpointed into the main file, then cut in half) */
    const char *p5 = tu_tmp("trunc.db");
    fresh(p5);
    h = open_ok(p5);
    static int32_t big[2000];
    for (int i = 0; i < 2000; i++) big[i] = i;
    for (int k = 0; k < 30; k++) assert_int_equal(sdn_history_add(h, "g", "A", big, 2000, "text", 0, NULL, &err), SDN_OK);
    sdn_history_close(h); /* the last connection checkpoints and removes the WAL */
    struct stat st;
    assert_int_equal(stat(p5, &st), 0);
    assert_true(st.st_size > 100000);
    assert_int_equal(truncate(p5, st.st_size / 2), 0);
    expect_refused(p5, "damaged");
    /* a directory path that cannot be created */
    assert_int_not_equal(sdn_history_open(tu_tmp("no/such/dir/h.db"), &h, &err), SDN_OK);
    assert_non_null(strstr(err.msg, "no/such/dir/h.db"));
}

static uint64_t file_hash(const char *path, size_t *n) {
    char *d = slurp(path, n);
    if (!d) fail_msg("cannot read %s", path);
    uint64_t h = XXH3_64bits(d, *n);
    free(d);
    return h;
}

/* A damaged store whose journal mode is the rollback journal (DELETE) must be refused
 * unchanged: switching it to WAL before the integrity check would modify it. */
static void test_damaged_rollback_store_unchanged(void **state) {
    (void)state;
    const char *p = tu_tmp("damaged-delete.db");
    fresh(p);
    sdn_history *h = open_ok(p);
    sdn_err err = {0};
    static int32_t big[2000];
    for (int i = 0; i < 2000; i++) big[i] = i;
    for (int k = 0; k < 30; k++) assert_int_equal(sdn_history_add(h, "g", "A", big, 2000, "text", 0, NULL, &err), SDN_OK);
    sdn_history_close(h);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    size_t n;
    char *d = slurp(p, &n);
    assert_non_null(d);
    assert_int_equal((uint8_t)d[18], 1); /* rollback-journal file format */
    /* damage: overwrite the middle pages (the answers b-tree) with a pattern */
    assert_true(n > 100000);
    for (size_t i = n / 4; i < n / 2; i++) d[i] = (char)(i * 37);
    assert_int_equal(tu_write_file(p, d, n), 0);
    free(d);
    size_t n0, n1;
    uint64_t h0 = file_hash(p, &n0);
    expect_refused(p, "damaged");
    uint64_t h1 = file_hash(p, &n1);
    assert_int_equal(n0, n1);
    assert_true(h0 == h1);
    struct stat st;
    char side[1200];
    snprintf(side, sizeof side, "%s-wal", p);
    assert_int_not_equal(stat(side, &st), 0); /* no WAL file was started either */
}

/* An empty file given as the store is refused (not adopted) and stays empty; a missing
 * file is created complete (never seen half-made). */
static void test_empty_file_refused(void **state) {
    (void)state;
    const char *p = tu_tmp("empty.db");
    fresh(p);
    assert_int_equal(tu_write_file(p, "", 0), 0);
    expect_refused(p, "empty file");
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, 0);
    fresh(p);
    sdn_history_close(open_ok(p));
    assert_int_equal(stat(p, &st), 0);
    assert_true(st.st_size > 0);
}

/* The checksum covers the text: a changed text is refused as a damaged row; a stored
 * n_tokens of INT64_MAX is refused (naming the row) before it is added to the budget sum. */
static void test_damaged_rows(void **state) {
    (void)state;
    const char *p = tu_tmp("hist-rows.db");
    fresh(p);
    sdn_history *h = open_ok(p);
    sdn_err err = {0};
    int32_t t[16];
    int n = answer_tokens(3, t);
    int64_t id1, id2;
    assert_int_equal(sdn_history_add(h, "g", "A", t, n, "the answer", 0, &id1, &err), SDN_OK);
    assert_int_equal(sdn_history_add(h, "g", "B", t, n, NULL, 0, &id2, &err), SDN_OK);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "UPDATE answers SET text='the answeR' WHERE model_fp='A'", NULL, NULL, NULL), SQLITE_OK);
    sdn_history_answer a;
    assert_int_equal(sdn_history_get(h, id1, &a, &err), SDN_EDB);
    assert_non_null(strstr(err.msg, "checksum"));
    assert_non_null(strstr(err.msg, p));
    /* NULL text and empty text are different rows */
    sdn_err_clear(&err);
    assert_int_equal(sdn_history_get(h, id2, &a, &err), SDN_OK);
    assert_null(a.text);
    free(a.tokens);
    assert_int_equal(sqlite3_exec(db, "UPDATE answers SET text='' WHERE model_fp='B'", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(sdn_history_get(h, id2, &a, &err), SDN_EDB);
    /* model C: an older row whose n_tokens became INT64_MAX after a newer valid one, so
     * the old code computed total + INT64_MAX (signed overflow) before refusing the row */
    int64_t idc;
    assert_int_equal(sdn_history_add(h, "g", "C", t, n, "old", 1, &idc, &err), SDN_OK);
    assert_int_equal(sdn_history_add(h, "g", "C", t, n, "new", 2, NULL, &err), SDN_OK);
    char sql[128];
    snprintf(sql, sizeof sql, "UPDATE answers SET n_tokens=9223372036854775807 WHERE id=%lld", (long long)idc);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    sdn_history_answer *all = NULL;
    int n_all = 0;
    sdn_err_clear(&err);
    assert_int_equal(sdn_history_recent(h, "g", "C", SDN_HISTORY_GROUP, 100, &all, &n_all, &err), SDN_EDB);
    if (!strstr(err.msg, "n_tokens 9223372036854775807 is out of range")) fail_msg("message: %s", err.msg);
    assert_null(all);
    sdn_history_close(h);
}

/* A version-1 store (checksum over the tokens only, no model_candidates table) is migrated on
 * open: no row is lost, each reads back with its text, and user_version becomes 3. A row whose tokens were
 * already damaged stays refused. The v1 checksum is computed here independently. */
static void test_migrate_v1(void **state) {
    (void)state;
    const char *p = tu_tmp("hist-v1.db");
    fresh(p);
    sdn_history *h = open_ok(p);
    sdn_err err = {0};
    int32_t t[16];
    int64_t ids[5];
    for (int k = 0; k < 5; k++) {
        int n = answer_tokens(k, t);
        char text[32];
        snprintf(text, sizeof text, "v1 answer %d", k);
        assert_int_equal(sdn_history_add(h, "g", "A", t, n, k == 2 ? NULL : text, 0, &ids[k], &err), SDN_OK);
    }
    sdn_history_close(h);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, "UPDATE answers SET checksum=? WHERE id=?", -1, &st, NULL), SQLITE_OK);
    for (int k = 0; k < 5; k++) {
        int n = answer_tokens(k, t);
        uint8_t b[64];
        for (int i = 0; i < n; i++)
            for (int j = 0; j < 4; j++) b[4 * i + j] = (uint8_t)((uint32_t)t[i] >> (8 * j));
        int64_t v1 = (int64_t)XXH3_64bits(b, (size_t)n * 4);
        sqlite3_bind_int64(st, 1, k == 4 ? v1 + 1 : v1); /* row 4: damaged already */
        sqlite3_bind_int64(st, 2, ids[k]);
        assert_int_equal(sqlite3_step(st), SQLITE_DONE);
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    assert_int_equal(sqlite3_exec(db, "DROP TABLE model_candidates; PRAGMA user_version=1; UPDATE meta SET value='sdnpu-history 1'", NULL,
                                  NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    h = open_ok(p);
    for (int k = 0; k < 5; k++) {
        sdn_history_answer a;
        int rc = sdn_history_get(h, ids[k], &a, &err);
        if (k == 4) {
            assert_int_equal(rc, SDN_EDB);
            continue;
        }
        if (rc) fail_msg("row %d after migration: %s", k, err.msg);
        int n = answer_tokens(k, t);
        assert_int_equal(a.n_tokens, n);
        assert_memory_equal(a.tokens, t, sizeof(int32_t) * n);
        char text[32];
        snprintf(text, sizeof text, "v1 answer %d", k);
        if (k == 2) assert_null(a.text);
        else assert_string_equal(a.text, text);
        free(a.tokens);
        free(a.text);
    }
    long cnt;
    assert_int_equal(sdn_history_count(h, NULL, NULL, &cnt, &err), SDN_OK);
    assert_int_equal(cnt, 5);
    sdn_history_close(h);
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 3);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* The model's candidate table: stored per model fingerprint, replaced by the next put, read
 * back byte for byte, absent for another model; a version-2 store (no model_candidates table)
 * gets the table on open and keeps its answers. */
static void test_candidates(void **state) {
    (void)state;
    const char *p = tu_tmp("hist-cand.db");
    fresh(p);
    sdn_history *h = open_ok(p);
    sdn_err err = {0};
    uint8_t *b = NULL;
    size_t n = 0;
    assert_int_equal(sdn_history_candidates_get(h, "A", &b, &n, &err), SDN_OK);
    assert_null(b);
    uint8_t one[100], two[300];
    for (int i = 0; i < 300; i++) two[i] = (uint8_t)(i * 7 + 1);
    memset(one, 0xab, sizeof one);
    assert_int_equal(sdn_history_candidates_put(h, "A", 10, 2, one, sizeof one, &err), SDN_OK);
    assert_int_equal(sdn_history_candidates_put(h, "B", 10, 2, two, sizeof two, &err), SDN_OK);
    assert_int_equal(sdn_history_candidates_put(h, "A", 10, 2, two, 200, &err), SDN_OK); /* replaces */
    assert_int_equal(sdn_history_candidates_put(h, "A", 10, 2, NULL, 0, &err), SDN_EINVAL);
    assert_int_equal(sdn_history_candidates_get(h, "A", &b, &n, &err), SDN_OK);
    assert_int_equal(n, 200);
    assert_memory_equal(b, two, 200);
    free(b);
    assert_int_equal(sdn_history_candidates_get(h, "C", &b, &n, &err), SDN_OK);
    assert_null(b);
    int32_t t[16];
    int nt = answer_tokens(1, t);
    assert_int_equal(sdn_history_add(h, "g", "A", t, nt, "kept", 0, NULL, &err), SDN_OK);
    sdn_history_close(h);
    /* back to a version-2 store */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "DROP TABLE model_candidates; PRAGMA user_version=2; UPDATE meta SET value='sdnpu-history 2'", NULL,
                                  NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    h = open_ok(p);
    long cnt;
    assert_int_equal(sdn_history_count(h, "g", "A", &cnt, &err), SDN_OK);
    assert_int_equal(cnt, 1);
    assert_int_equal(sdn_history_candidates_get(h, "A", &b, &n, &err), SDN_OK);
    assert_null(b);
    assert_int_equal(sdn_history_candidates_put(h, "A", 10, 2, one, sizeof one, &err), SDN_OK);
    assert_int_equal(sdn_history_candidates_get(h, "A", &b, &n, &err), SDN_OK);
    assert_int_equal(n, sizeof one);
    free(b);
    sdn_history_close(h);
}

/* The content every writer process below stores as its answer number k. */
static int writer_answer(int w, int k, int32_t *t) {
    int n = 50 + (k * 13 + w * 7) % 400;
    for (int i = 0; i < n; i++) t[i] = (int32_t)((w * 10007 + k * 131 + i) % 30000);
    return n;
}

/* Every row of group `g` matches writer_answer for the (writer, k) its text names. */
static int check_rows(sdn_history *h, long *n_rows) {
    sdn_history_answer *all;
    int n_all;
    sdn_err err = {0};
    if (sdn_history_recent(h, "g", "A", SDN_HISTORY_GROUP, 0, &all, &n_all, &err)) fail_msg("%s", err.msg);
    static int32_t want[512];
    for (int i = 0; i < n_all; i++) {
        int w, k;
        if (!all[i].text || sscanf(all[i].text, "w%d k%d", &w, &k) != 2) fail_msg("row %lld has text '%s'", (long long)all[i].id, all[i].text);
        int n = writer_answer(w, k, want);
        assert_int_equal(all[i].n_tokens, n);
        assert_memory_equal(all[i].tokens, want, sizeof(int32_t) * n);
    }
    sdn_history_answers_free(all, n_all);
    *n_rows = n_all;
    return 0;
}

/* Writer child: writes answers (w, k0), (w, k0 + 1), ... until killed or n are done. */
static void writer_child(const char *path, int w, int k0, int n) {
    sdn_history *c = NULL;
    if (sdn_history_open(path, &c, NULL)) _exit(10);
    static int32_t t[512];
    for (int k = k0; n < 0 || k < k0 + n; k++) {
        char text[32];
        snprintf(text, sizeof text, "w%d k%d", w, k);
        int m = writer_answer(w, k, t);
        if (sdn_history_add(c, "g", "A", t, m, text, 0, NULL, NULL)) _exit(11);
    }
    sdn_history_close(c);
    _exit(0);
}

/* A writer is SIGKILLed at 25 random moments (random delays, so inside and outside
 * transactions, during checkpoints...). After each kill: the rows counted before the
 * writer started are all still there, every row is intact, the integrity check passes,
 * and the count never goes down. */
static void test_kill_random_points(void **state) {
    (void)state;
    const char *path = tu_tmp("hist-killrand.db");
    fresh(path);
    sdn_history_close(open_ok(path));
    sdn_rng r;
    sdn_rng_seed(&r, 19);
    long before = 0;
    int k0 = 0;
    for (int round = 0; round < 25; round++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) writer_child(path, 0, k0, -1);
        usleep((useconds_t)(2000 + sdn_rng_u64(&r) % 60000));
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        if (!WIFSIGNALED(status)) fail_msg("round %d: writer exited with status %d instead of being killed", round, WEXITSTATUS(status));
        sdn_history *h = open_ok(path);
        sdn_err err = {0};
        if (sdn_history_check(h, &err)) fail_msg("round %d: %s", round, err.msg);
        long after;
        check_rows(h, &after);
        if (after < before) fail_msg("round %d: %ld committed rows before the kill, %ld after", round, before, after);
        sdn_history_close(h);
        k0 += 100000; /* distinct k per round */
        before = after;
    }
    assert_true(before > 0);
}

/* Two writer processes add 150 answers each to one store at the same time: all 300 are
 * there and intact, and the file is sound. */
static void test_two_writers(void **state) {
    (void)state;
    const char *path = tu_tmp("hist-2w.db");
    fresh(path);
    pid_t pid[2];
    for (int w = 0; w < 2; w++) {
        pid[w] = fork();
        assert_true(pid[w] >= 0);
        if (pid[w] == 0) writer_child(path, w + 1, 0, 150);
    }
    for (int w = 0; w < 2; w++) {
        int status;
        assert_int_equal(waitpid(pid[w], &status, 0), pid[w]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail_msg("writer %d failed (status %d)", w + 1, status);
    }
    sdn_history *h = open_ok(path);
    sdn_err err = {0};
    assert_int_equal(sdn_history_check(h, &err), SDN_OK);
    long n;
    check_rows(h, &n);
    assert_int_equal(n, 300);
    sdn_history_close(h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),    cmocka_unit_test(test_automaton_cache), cmocka_unit_test(test_global_scope), cmocka_unit_test(test_concurrency),
        cmocka_unit_test(test_kill_during_write), cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_damaged_rollback_store_unchanged), cmocka_unit_test(test_empty_file_refused),
        cmocka_unit_test(test_damaged_rows), cmocka_unit_test(test_migrate_v1), cmocka_unit_test(test_candidates), cmocka_unit_test(test_kill_random_points),
        cmocka_unit_test(test_two_writers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
