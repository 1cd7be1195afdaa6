/* test_results.c - result outputs and projections: a verify-cost profile written by hand
 * is read, interpolated and projected to the values computed on paper, malformed profiles
 * are refused naming the field; CSV, JSON and results-database rows carry the numbers of
 * the cells (read back with cJSON and raw SQLite); the SVG charts hold one bar per value
 * and one point per profile entry; the progress bar's text is as specified and nothing is
 * written when the stream is not a terminal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <sqlite3.h>

#include "common/sdn_util.h"
#include "datasets/projection.h"
#include "tools/progress.h"
#include "datasets/results.h"
#include "runtime/decode.h"
#include "runtime/verify_cost.h"
#include "support/test_util.h"
#include "modelfile/model.h"
#include "modelfile/model_registry.h"

static const char *k_profile =
    "{\n  \"format\": \"sdnpu-verify-cost\", \"version\": 1, \"model\": \"m.gguf\", \"shape\": \"test\", \"threads\": 2,\n"
    "  \"tree_sizes\": [1, 3, 7, 15],\n  \"step_ms\": [11.0, 12.0, 14.0, 20.0],\n  \"plain_step_ms\": 10.0,\n"
    "  \"draft_ms_per_step\": 0.5, \"rows\": [2, 4, 8, 16]\n}\n";

/* The verify cost curve by KV length (runtime/verify_cost.h): the near curve up to its
 * length, linear between the two lengths and beyond, never under 5% of the near curve; the
 * default budget drafts fewer tokens where a step's cost grows faster with its size. */
static void test_vcurve(void **state) {
    (void)state;
    sdn_vcurve c = {.len_near = 64, .len_far = 2048};
    for (int d = 0; d < SDN_INVARIANT_MAX_ROWS; d++) {
        c.near[d] = 10.0 + d;
        c.far[d] = 20.0 + 3.0 * d;
    }
    double ms[SDN_INVARIANT_MAX_ROWS];
    sdn_vcurve_at(&c, 10, ms);
    assert_true(ms[0] == 10.0 && ms[5] == 15.0);
    sdn_vcurve_at(&c, 64, ms);
    assert_true(ms[7] == 17.0);
    sdn_vcurve_at(&c, 1056, ms); /* halfway */
    assert_true(fabs(ms[0] - 15.0) < 1e-9 && fabs(ms[4] - (14.0 + 32.0) / 2) < 1e-9);
    sdn_vcurve_at(&c, 4032, ms); /* twice the span beyond the far length: extrapolated */
    assert_true(fabs(ms[0] - 30.0) < 1e-9 && fabs(ms[10] - (20.0 + 2 * 30.0)) < 1e-9);
    int near_budget, far_budget;
    sdn_vcurve_at(&c, 64, ms);
    near_budget = sdn_draft_budget(ms, 63, 0.8);
    sdn_vcurve_at(&c, 8000, ms);
    far_budget = sdn_draft_budget(ms, 63, 0.8);
    print_message("draft budget at acceptance 0.8: %d tokens after 64 positions, %d after 8000\n", near_budget, far_budget);
    assert_true(far_budget < near_budget);
    /* a far curve cheaper than the near one (noise) never drives a step's cost to zero */
    for (int d = 0; d < SDN_INVARIANT_MAX_ROWS; d++) c.far[d] = 1.0;
    sdn_vcurve_at(&c, 100000, ms);
    assert_true(ms[0] >= 0.5 - 1e-12);
}

/* The check_ms of the newest cached near curve in dir (its path into path). */
static double cached_check(const char *dir, char *path, size_t cap) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls %s/verify-cost-*-L64-*.json", dir);
    FILE *ls = popen(cmd, "r");
    assert_non_null(ls);
    assert_non_null(fgets(path, (int)cap, ls));
    pclose(ls);
    path[strcspn(path, "\n")] = 0;
    sdn_cost_profile p;
    assert_int_equal(sdn_cost_load(path, &p, NULL), SDN_OK);
    assert_true(p.check_ms > 0);
    return p.check_ms;
}
/* The cached curve at path with every time (steps, plain step, check) multiplied by f. */
static void scale_cached(const char *path, double f) {
    sdn_cost_profile p;
    assert_int_equal(sdn_cost_load(path, &p, NULL), SDN_OK);
    p.plain_step_ms *= f;
    p.check_ms *= f;
    for (int i = 0; i < p.n; i++) p.step_ms[i] *= f;
    assert_int_equal(sdn_cost_write(path, &p, NULL), SDN_OK);
}
/* What was written to log since the last call (the caller frees it); log is emptied. */
static char *log_take(FILE *log) {
    fflush(log);
    long n = ftell(log);
    char *b = calloc((size_t)n + 1, 1);
    assert_non_null(b);
    rewind(log);
    assert_int_equal(fread(b, 1, (size_t)n, log), (size_t)n);
    rewind(log);
    assert_int_equal(ftruncate(fileno(log), 0), 0);
    return b;
}
/* The cached verify cost curve (sdn_verify_curve): measured and written once with its quick
 * check, then read back; a cached curve whose steps and check are 10x what the machine
 * measures now (measured while it was busy) is measured again and rewritten, the far curve
 * with it; one 10x faster than now (this run is the busy one) is kept as it is; one without
 * a check is measured again. */
static void test_vcurve_cache(void **state) {
    (void)state;
    char dir[1024], near[1200], cmd[2200];
    snprintf(dir, sizeof dir, "%s", tu_tmp("vcurve-cache"));
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", dir, dir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(sdn_cache_dir_set(dir, NULL), SDN_OK);
    sdn_model *m = tu_load(tu_model("tiny-llama", "Q8_0", 5), NULL);
    FILE *log = tmpfile();
    assert_non_null(log);
    sdn_vcurve c1, c2;
    char *b;
    assert_int_equal(sdn_verify_curve(m, 1, &c1, log, NULL), SDN_OK);
    b = log_take(log);
    assert_non_null(strstr(b, "measuring the verify cost curve"));
    free(b);
    const double t0 = cached_check(dir, near, sizeof near);
    /* read back: nothing measured, the same curve (unless the first measurement was the
     * busy one: another test sharing the cores) */
    assert_int_equal(sdn_verify_curve(m, 1, &c2, log, NULL), SDN_OK);
    b = log_take(log);
    if (strstr(b, "measured on a busier machine")) print_message("(the first measurement was disturbed: %s)\n", b);
    else {
        assert_null(strstr(b, "measuring the verify cost curve"));
        assert_memory_equal(c1.near, c2.near, sizeof c1.near);
    }
    free(b);
    /* measured while busy: 10x slower than now: both curves measured again, rewritten */
    scale_cached(near, 10.0);
    assert_int_equal(sdn_verify_curve(m, 1, &c2, log, NULL), SDN_OK);
    b = log_take(log);
    assert_non_null(strstr(b, "measured on a busier machine"));
    assert_non_null(strstr(b, "measuring the verify cost curve of this model on this machine after 2048"));
    free(b);
    const double t1 = cached_check(dir, near, sizeof near);
    print_message("check step %.4f ms measured, %.4f ms after the stale cache was replaced\n", t0, t1);
    assert_true(t1 < 5.0 * t0);
    /* busy now: a cached curve 10x faster than this run is kept */
    scale_cached(near, 0.1);
    const double t2 = cached_check(dir, near, sizeof near);
    assert_int_equal(sdn_verify_curve(m, 1, &c2, log, NULL), SDN_OK);
    b = log_take(log);
    assert_null(strstr(b, "measuring the verify cost curve"));
    free(b);
    assert_true(cached_check(dir, near, sizeof near) == t2);
    /* a curve cached before checks were recorded: measured again, with a check */
    sdn_cost_profile p;
    assert_int_equal(sdn_cost_load(near, &p, NULL), SDN_OK);
    p.check_ms = -1;
    assert_int_equal(sdn_cost_write(near, &p, NULL), SDN_OK);
    assert_int_equal(sdn_verify_curve(m, 1, &c2, log, NULL), SDN_OK);
    b = log_take(log);
    assert_non_null(strstr(b, "measuring the verify cost curve"));
    free(b);
    assert_true(cached_check(dir, near, sizeof near) > 0);
    fclose(log);
    sdn_model_free(m);
    assert_int_equal(sdn_cache_dir_set(NULL, NULL), SDN_OK);
}

static void test_cost_profile(void **state) {
    (void)state;
    sdn_cost_profile p;
    sdn_err err = {0};
    if (sdn_cost_parse("sample.json", k_profile, strlen(k_profile), &p, &err)) fail_msg("%s", err.msg);
    assert_int_equal(p.n, 4);
    assert_int_equal(p.threads, 2);
    assert_string_equal(p.model, "m.gguf");
    /* interpolation: 0 -> plain, between listed sizes linear, beyond the last flat */
    assert_true(sdn_cost_step_ms(&p, 0) == 10.0);
    assert_true(sdn_cost_step_ms(&p, 0.5) == 10.5);
    assert_true(sdn_cost_step_ms(&p, 1) == 11.0);
    assert_true(sdn_cost_step_ms(&p, 2) == 11.5);
    assert_true(sdn_cost_step_ms(&p, 5) == 13.0);
    assert_true(sdn_cost_step_ms(&p, 11) == 17.0);
    assert_true(sdn_cost_step_ms(&p, 40) == 20.0);
    /* projection: 10 steps, 4 with no draft, 6 with 3 draft tokens; 25 tokens; 2 ms drafting
     * verify = 4*10 + 6*12 = 112 ms; draft 0.2 ms/step -> 2 ms; (112 + 2) / 25 = 4.56 ms/token */
    sdn_study_counts c = {.requests = 1, .out_tokens = 25, .steps = 10, .drafted = 18, .t_draft = 0.002};
    c.draft_hist[0] = 4;
    c.draft_hist[3] = 6;
    /* acceptances (hand-made counts, not a consistent run): 4 steps none, 4 steps one, 2 steps three */
    c.accept_hist[0] = 4;
    c.accept_hist[1] = 4;
    c.accept_hist[3] = 2;
    sdn_projection pr;
    assert_int_equal(sdn_cost_project(&p, &c, 1, &pr, &err), SDN_OK);
    assert_true(fabs(pr.ms_per_token - 4.56) < 1e-9);
    assert_true(fabs(pr.speedup - 10.0 / 4.56) < 1e-9);
    assert_true(fabs(pr.verify_ms_per_step - 11.2) < 1e-9);
    /* ceiling: 4 plain steps (10) + 4 one-token chains (11) + 2 three-token chains (12) =
     * 108 ms, + 2 ms drafting, over 25 tokens */
    assert_true(fabs(pr.ceiling_ms_per_token - 110.0 / 25) < 1e-9);
    assert_true(fabs(pr.ceiling_speedup - 10.0 / (110.0 / 25)) < 1e-9);
    /* without the study's timing: the profile's 0.5 ms per step -> (112 + 5) / 25 */
    assert_int_equal(sdn_cost_project(&p, &c, 0, &pr, &err), SDN_OK);
    assert_true(fabs(pr.ms_per_token - 117.0 / 25) < 1e-9);
    sdn_study_counts empty = {0};
    assert_int_equal(sdn_cost_project(&p, &empty, 1, &pr, &err), SDN_EINVAL);
    /* the format of the lead's verification benchmark: size 0 listed (the 1-row step) */
    const char *z = "{\"format\":\"sdnpu-verify-cost\",\"version\":1,\"tree_sizes\":[0,1,3],\"step_ms\":[9.0,10.0,12.0],\"plain_step_ms\":9.5}";
    if (sdn_cost_parse("z.json", z, strlen(z), &p, &err)) fail_msg("%s", err.msg);
    assert_true(sdn_cost_step_ms(&p, 0) == 9.0);
    assert_true(sdn_cost_step_ms(&p, 2) == 11.0);
    /* write and read back */
    if (sdn_cost_parse("sample.json", k_profile, strlen(k_profile), &p, &err)) fail_msg("%s", err.msg);
    const char *path = tu_tmp("profile.json");
    assert_int_equal(sdn_cost_write(path, &p, &err), SDN_OK);
    sdn_cost_profile q;
    if (sdn_cost_load(path, &q, &err)) fail_msg("%s", err.msg);
    assert_int_equal(q.n, p.n);
    assert_memory_equal(q.tree_sizes, p.tree_sizes, sizeof(int) * p.n);
    for (int i = 0; i < p.n; i++) assert_true(q.step_ms[i] == p.step_ms[i]);
    assert_true(q.plain_step_ms == p.plain_step_ms && q.draft_ms_per_step == p.draft_ms_per_step);
    /* measured values (not short decimals) read back as the same bits: a cached curve gives the
     * budgets the measured one gave */
    for (int i = 0; i < p.n; i++) p.step_ms[i] = 1.0 / (3.0 + i) + i * 0.7123456789012345;
    p.plain_step_ms = 2.0 / 7.0;
    p.draft_ms_per_step = 0.1 / 3.0;
    assert_int_equal(sdn_cost_write(path, &p, &err), SDN_OK);
    if (sdn_cost_load(path, &q, &err)) fail_msg("%s", err.msg);
    assert_memory_equal(q.step_ms, p.step_ms, sizeof(double) * p.n);
    assert_memory_equal(&q.plain_step_ms, &p.plain_step_ms, sizeof(double));
    assert_memory_equal(&q.draft_ms_per_step, &p.draft_ms_per_step, sizeof(double));
}

static void test_cost_malformed(void **state) {
    (void)state;
    static const struct {
        const char *text, *expect;
    } bad[] = {
        {"[1]", "not a JSON object"},
        {"{\"format\":\"x\",\"version\":1}", "field 'format'"},
        {"{\"format\":\"sdnpu-verify-cost\",\"version\":1,\"tree_sizes\":[1,2],\"step_ms\":[1],\"plain_step_ms\":1}", "field 'step_ms'"},
        {"{\"format\":\"sdnpu-verify-cost\",\"version\":1,\"tree_sizes\":[2,1],\"step_ms\":[1,1],\"plain_step_ms\":1}", "field 'tree_sizes': not strictly increasing"},
        {"{\"format\":\"sdnpu-verify-cost\",\"version\":1,\"tree_sizes\":[1],\"step_ms\":[-1],\"plain_step_ms\":1}", "field 'step_ms': element 0"},
        {"{\"format\":\"sdnpu-verify-cost\",\"version\":1,\"tree_sizes\":[1],\"step_ms\":[1]}", "field 'plain_step_ms': missing"},
        {"{\"format\":\"sdnpu-verify-cost\",\"version\":1,\"tree_sizes\":[],\"step_ms\":[],\"plain_step_ms\":1}", "field 'tree_sizes'"},
        {"{\"format\":\"sdnpu-verify-cost\",\"version\":1,\"tree_sizes\":[1],\"step_ms\":[1],\"plain_step_ms\":1,\"draft_ms_per_step\":\"a\"}",
         "field 'draft_ms_per_step'"},
        {"{\"format\":\"sdnpu-verify-cost\",\"version\":1,\"tree_sizes\":[1],\"step_ms\":[1],\"plain_step_ms\":1,\"check_ms\":0}",
         "field 'check_ms'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sdn_cost_profile p;
        sdn_err err = {0};
        int rc = sdn_cost_parse("prof.json", bad[i].text, strlen(bad[i].text), &p, &err);
        if (rc != SDN_EFORMAT || !strstr(err.msg, "prof.json") || !strstr(err.msg, bad[i].expect))
            fail_msg("profile %zu: rc %d, '%s', expected '%s'", i, rc, err.msg, bad[i].expect);
    }
    const char *v2 = "{\"format\":\"sdnpu-verify-cost\",\"version\":2}";
    sdn_cost_profile p;
    sdn_err err = {0};
    assert_int_equal(sdn_cost_parse("v2.json", v2, strlen(v2), &p, &err), SDN_EUNSUP);
}

static void make_cells(sdn_result_cell *c) {
    memset(c, 0, 2 * sizeof *c);
    snprintf(c[0].task, sizeof c[0].task, "story");
    snprintf(c[0].method, sizeof c[0].method, "none");
    c[0].c.requests = 2, c[0].c.out_tokens = 100, c[0].c.steps = 100, c[0].c.accept_hist[0] = 100;
    c[0].t_decode = 0.5, c[0].plain_t_decode = 0.5, c[0].plain_out_tokens = 100, c[0].prompt_tokens = 40;
    snprintf(c[1].task, sizeof c[1].task, "story");
    snprintf(c[1].method, sizeof c[1].method, "pld, \"x\"");
    snprintf(c[1].budget, sizeof c[1].budget, "4");
    c[1].c.requests = 2, c[1].c.out_tokens = 100, c[1].c.steps = 40, c[1].c.drafted = 200, c[1].c.accepted = 60;
    c[1].c.accept_hist[0] = 20, c[1].c.accept_hist[3] = 20;
    c[1].t_decode = 0.25, c[1].plain_t_decode = 0.5, c[1].plain_out_tokens = 100, c[1].mismatches = 1, c[1].peak_rss = 3 << 20;
}

static void test_outputs(void **state) {
    (void)state;
    sdn_result_cell cells[2];
    make_cells(cells);
    assert_true(sdn_cell_ms_per_token(&cells[1]) == 2.5);
    assert_true(sdn_cell_speedup(&cells[1]) == 2.0);
    sdn_run_meta meta = {.kind = "bench", .model = "m.gguf", .model_fp = "0011223344556677", .dataset = "d", .threads = 2, .max_tokens = 64};
    snprintf(meta.caps, sizeof meta.caps, "nodes=63");
    sdn_err err = {0};
    /* CSV: header + 2 rows, the awkward method name quoted */
    const char *csv = tu_tmp("r.csv");
    assert_int_equal(sdn_results_csv(csv, &meta, cells, 2, &err), SDN_OK);
    char *text;
    size_t n;
    assert_int_equal(sdn_read_file(csv, &text, &n, &err), SDN_OK);
    int lines = 0;
    for (size_t i = 0; i < n; i++) lines += text[i] == '\n';
    assert_int_equal(lines, 3);
    assert_non_null(strstr(text, ",method,budget,requests,"));
    assert_non_null(strstr(text, ",none,,2,40,100,"));
    assert_non_null(strstr(text, ",\"pld, \"\"x\"\"\",4,2,0,100,40,2.5000,5.000,60,2.5000,5.0000,2.0000,"));
    assert_non_null(strstr(text, "0:20;3:20"));
    free(text);
    /* JSON */
    const char *js = tu_tmp("r.json");
    assert_int_equal(sdn_results_json(js, &meta, cells, 2, &err), SDN_OK);
    assert_int_equal(sdn_read_file(js, &text, &n, &err), SDN_OK);
    cJSON *j = cJSON_Parse(text);
    free(text);
    assert_non_null(j);
    cJSON *res = cJSON_GetObjectItem(j, "results");
    assert_int_equal(cJSON_GetArraySize(res), 2);
    cJSON *r1 = cJSON_GetArrayItem(res, 1);
    assert_string_equal(cJSON_GetObjectItem(r1, "method")->valuestring, "pld, \"x\"");
    assert_true(cJSON_GetObjectItem(r1, "mean_accepted")->valuedouble == 2.5);
    assert_true(cJSON_GetObjectItem(r1, "speedup")->valuedouble == 2.0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r1, "accept_hist")), 4);
    assert_int_equal(cJSON_GetObjectItem(r1, "mismatches")->valueint, 1);
    assert_string_equal(cJSON_GetObjectItem(r1, "budget")->valuestring, "4");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(res, 0), "budget")));
    cJSON_Delete(j);
    /* results database: two runs appended */
    const char *db = tu_tmp("results.db");
    unlink(db);
    long long id1, id2;
    assert_int_equal(sdn_results_db_add(db, &meta, cells, 2, &id1, &err), SDN_OK);
    assert_int_equal(sdn_results_db_add(db, &meta, cells, 1, &id2, &err), SDN_OK);
    assert_true(id2 > id1);
    sqlite3 *h;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(h, "SELECT count(*), sum(mismatches), max(speedup) FROM results", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 3);
    assert_int_equal(sqlite3_column_int(st, 1), 1);
    assert_true(sqlite3_column_double(st, 2) == 2.0);
    sqlite3_finalize(st);
    assert_int_equal(sqlite3_prepare_v2(h, "SELECT count(*) FROM results WHERE budget = '4'", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 1);
    sqlite3_finalize(st);
    assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA application_id", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 0x53444e52);
    sqlite3_finalize(st);
    sqlite3_close(h);
    /* a history store is not a results database */
    const char *junk = tu_tmp("notresults.db");
    unlink(junk);
    assert_int_equal(sqlite3_open(junk, &h), SQLITE_OK);
    assert_int_equal(sqlite3_exec(h, "PRAGMA application_id=1397968456; CREATE TABLE answers(x);", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
    assert_int_equal(sdn_results_db_add(junk, &meta, cells, 2, NULL, &err), SDN_EDB);
    assert_non_null(strstr(err.msg, "notresults.db"));
}

/* A results database of schema 1 (before the budget column) is upgraded when a run is
 * added: its old rows stay readable with a NULL budget, the new rows carry theirs. */
static void test_db_upgrade(void **state) {
    (void)state;
    const char *db = tu_tmp("results-v1.db");
    unlink(db);
    sqlite3 *h;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    const char *v1 =
        "PRAGMA application_id=1396985426; PRAGMA user_version=1;"
        "CREATE TABLE runs(run_id INTEGER PRIMARY KEY, started TEXT, kind TEXT, machine TEXT, model TEXT, model_fp TEXT,"
        " threads INTEGER, max_tokens INTEGER, dataset TEXT, caps TEXT, command TEXT);"
        "CREATE TABLE results(run_id INTEGER NOT NULL REFERENCES runs(run_id), task TEXT, method TEXT, requests INTEGER,"
        " prompt_tokens INTEGER, output_tokens INTEGER, steps INTEGER, mean_accepted REAL, draft_per_step REAL,"
        " accepted_draft_tokens INTEGER, ms_per_token REAL, plain_ms_per_token REAL, speedup REAL, prefill_ms REAL,"
        " decode_ms REAL, draft_ms REAL, verify_ms REAL, peak_rss_bytes INTEGER, mismatches INTEGER, accept_hist TEXT);"
        "CREATE INDEX results_by_run ON results(run_id);"
        "INSERT INTO runs(run_id, kind) VALUES(1, 'bench');"
        "INSERT INTO results(run_id, task, method, requests) VALUES(1, 'summary', 'pld', 3);";
    assert_int_equal(sqlite3_exec(h, v1, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
    sdn_result_cell cells[2];
    make_cells(cells);
    sdn_run_meta meta = {.kind = "bench", .model = "m.gguf", .model_fp = "0011223344556677", .dataset = "d", .threads = 2, .max_tokens = 64};
    sdn_err err = {0};
    long long id;
    if (sdn_results_db_add(db, &meta, cells, 2, &id, &err)) fail_msg("%s", err.msg);
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(h, "SELECT run_id, method, requests, budget FROM results ORDER BY run_id, rowid", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW); /* the old row */
    assert_int_equal(sqlite3_column_int(st, 0), 1);
    assert_string_equal((const char *)sqlite3_column_text(st, 1), "pld");
    assert_int_equal(sqlite3_column_int(st, 2), 3);
    assert_int_equal(sqlite3_column_type(st, 3), SQLITE_NULL);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW); /* plain decoding: no budget */
    assert_int_equal(sqlite3_column_type(st, 3), SQLITE_NULL);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 3), "4");
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA user_version", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 2);
    sqlite3_finalize(st);
    sqlite3_close(h);
}

/* Provenance: every input, model and --param and the command line are recorded; figures
 * that were not measured (a replayed study cell has no times) are null / empty / NULL. */
static void test_provenance_and_nulls(void **state) {
    (void)state;
    sdn_result_cell cells[2];
    make_cells(cells);
    cells[0].t_decode = cells[0].t_prefill = cells[0].t_verify = 0; /* not measured */
    cells[0].plain_t_decode = 0;
    cells[0].peak_rss = 0;
    const char *inputs[] = {"a.trace.jsonl", "b.trace.jsonl"}, *models[] = {"m1.gguf", "m2.gguf"}, *fps[] = {"0011223344556677", "8899aabbccddeeff"},
               *params[] = {"sdnpu.follow=0.5", "cal.max_depth=4"};
    sdn_run_meta meta = {.kind = "study", .model = "m1.gguf", .model_fp = fps[0], .dataset = inputs[0], .threads = 1,
                         .command = "sdnpu study --traces a.trace.jsonl --traces b.trace.jsonl --param sdnpu.follow=0.5 --param cal.max_depth=4",
                         .inputs = inputs, .n_inputs = 2, .models = models, .model_fps = fps, .n_models = 2, .params = params, .n_params = 2};
    sdn_err err = {0};
    const char *js = tu_tmp("p.json");
    assert_int_equal(sdn_results_json(js, &meta, cells, 2, &err), SDN_OK);
    char *text;
    size_t n;
    assert_int_equal(sdn_read_file(js, &text, &n, &err), SDN_OK);
    cJSON *j = cJSON_Parse(text);
    free(text);
    assert_non_null(j);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "inputs")), 2);
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "inputs"), 1)->valuestring, "b.trace.jsonl");
    cJSON *ms = cJSON_GetObjectItem(j, "models");
    assert_int_equal(cJSON_GetArraySize(ms), 2);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(ms, 1), "fingerprint")->valuestring, "8899aabbccddeeff");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "params")), 2);
    assert_non_null(strstr(cJSON_GetObjectItem(j, "command")->valuestring, "--param cal.max_depth=4"));
    cJSON *r0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "results"), 0), *r1 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "results"), 1);
    const char *unmeasured[] = {"ms_per_token", "plain_ms_per_token", "speedup", "prefill_ms", "decode_ms", "verify_ms", "peak_rss_bytes"};
    for (int i = 0; i < 7; i++) assert_true(cJSON_IsNull(cJSON_GetObjectItem(r0, unmeasured[i])));
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(r1, "ms_per_token")));
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(r0, "mean_accepted")));
    cJSON_Delete(j);
    /* CSV: the empty fields, and the provenance columns */
    const char *csv = tu_tmp("p.csv");
    assert_int_equal(sdn_results_csv(csv, &meta, cells, 2, &err), SDN_OK);
    assert_int_equal(sdn_read_file(csv, &text, &n, &err), SDN_OK);
    assert_non_null(strstr(text, "m1.gguf; m2.gguf"));
    assert_non_null(strstr(text, "a.trace.jsonl; b.trace.jsonl"));
    assert_non_null(strstr(text, "sdnpu.follow=0.5; cal.max_depth=4"));
    assert_non_null(strstr(text, ",,,,,")); /* ms/token .. decode ms empty in the first row */
    free(text);
    /* database: NULL, not 0 */
    const char *db = tu_tmp("p.db");
    unlink(db);
    assert_int_equal(sdn_results_db_add(db, &meta, cells, 2, NULL, &err), SDN_OK);
    sqlite3 *h;
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(h, "SELECT count(*) FROM results WHERE ms_per_token IS NULL AND decode_ms IS NULL AND peak_rss_bytes IS NULL",
                                        -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 1);
    sqlite3_finalize(st);
    assert_int_equal(sqlite3_prepare_v2(h, "SELECT model, model_fp, dataset, command FROM runs", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "m1.gguf; m2.gguf");
    assert_string_equal((const char *)sqlite3_column_text(st, 2), "a.trace.jsonl; b.trace.jsonl");
    assert_non_null(strstr((const char *)sqlite3_column_text(st, 3), "--param sdnpu.follow=0.5"));
    sqlite3_finalize(st);
    sqlite3_close(h);
}

static int count(const char *s, const char *needle) {
    int k = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) k++;
    return k;
}

static void test_svg(void **state) {
    (void)state;
    const char *groups[] = {"summary", "rag<&>"};
    const char *series[] = {"none", "pld", "sam"};
    double vals[] = {10, 5, 6, 10, 8, -1};
    const char *path = tu_tmp("bars.svg");
    sdn_err err = {0};
    assert_int_equal(sdn_svg_bars(path, "ms/token", "ms", groups, 2, series, 3, vals, &err), SDN_OK);
    char *t;
    size_t n;
    assert_int_equal(sdn_read_file(path, &t, &n, &err), SDN_OK);
    assert_int_equal(strncmp(t, "<svg ", 5), 0);
    assert_non_null(strstr(t, "</svg>\n"));
    /* 5 bars (one value missing) + background + 3 legend swatches */
    assert_int_equal(count(t, "<rect"), 5 + 1 + 3);
    assert_int_equal(count(t, "<title>"), 5);
    assert_non_null(strstr(t, "rag&lt;&amp;&gt;"));
    assert_null(strstr(t, "rag<&>"));
    free(t);
    double x[] = {0, 1, 3, 7}, y[] = {10, 11, 12, 14};
    const double *xs[1] = {x}, *ys[1] = {y};
    int np[1] = {4};
    const char *names[1] = {"cost"};
    path = tu_tmp("lines.svg");
    assert_int_equal(sdn_svg_lines(path, "cost", "tokens", "ms", names, 1, xs, ys, np, &err), SDN_OK);
    assert_int_equal(sdn_read_file(path, &t, &n, &err), SDN_OK);
    assert_int_equal(count(t, "<circle"), 4);
    assert_int_equal(count(t, "<polyline"), 1);
    free(t);
}

static void test_progress(void **state) {
    (void)state;
    char buf[256];
    sdn_progress_format(buf, sizeof buf, "bench", 10, 40, 20.0, "story-7", 10);
    assert_string_equal(buf, "bench [##........] 10/40  25%  0:20 elapsed, ETA 1:00  story-7");
    sdn_progress_format(buf, sizeof buf, "x", 0, 4, 0, NULL, 4);
    assert_string_equal(buf, "x [....] 0/4   0%  0:00 elapsed, ETA --:--");
    sdn_progress_format(buf, sizeof buf, "x", 4, 4, 3725, NULL, 4);
    assert_string_equal(buf, "x [####] 4/4 100%  1:02:05 elapsed, ETA 0:00");
    /* not a terminal: silent */
    const char *path = tu_tmp("progress.txt");
    FILE *f = fopen(path, "w");
    sdn_progress *p = sdn_progress_new(f, "quiet", 3, 0);
    for (int i = 1; i <= 3; i++) sdn_progress_update(p, i, "row");
    sdn_progress_end(p);
    fclose(f);
    char *t;
    size_t n;
    assert_int_equal(sdn_read_file(path, &t, &n, NULL), SDN_OK);
    assert_int_equal(n, 0);
    free(t);
    /* forced: draws with carriage returns and clears the line at the end */
    f = fopen(path, "w");
    p = sdn_progress_new(f, "loud", 2, 1);
    sdn_progress_update(p, 2, NULL);
    sdn_progress_end(p);
    fclose(f);
    assert_int_equal(sdn_read_file(path, &t, &n, NULL), SDN_OK);
    assert_true(n > 10 && t[0] == '\r' && strstr(t, "loud [") && t[n - 1] == '\r');
    free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vcurve), cmocka_unit_test(test_vcurve_cache), cmocka_unit_test(test_cost_profile), cmocka_unit_test(test_cost_malformed), cmocka_unit_test(test_outputs), cmocka_unit_test(test_db_upgrade),
        cmocka_unit_test(test_svg),          cmocka_unit_test(test_progress), cmocka_unit_test(test_provenance_and_nulls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
