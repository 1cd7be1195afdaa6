/* test_cli.c - the `sdnpu` command line as a user runs it: the built binary (SDN_CLI, set by
 * CTest) is spawned with its stdout and stderr captured and a time limit (a hang fails the
 * test), on a seeded tiny-llama model written by `sdnpu make-model` into this test's scratch
 * directory. The model cache (SDNPU_CACHE) points into the scratch directory too, so the
 * test neither reads nor writes the user's cache.
 *
 * What is asserted is what must survive a refactor of the CLI: exit codes (0 on success,
 * nonzero on a usage or input error), that error messages name the option, key, file or
 * model at fault, that speculative and graph-scheduled output equals plain greedy output
 * (the independent reference here is a plain run of the same binary), and the fields of
 * --stats-json and their arithmetic (the accepted-length histogram sums to the step count,
 * tokens = steps + accepted draft tokens, the token list has generated_tokens entries).
 * Human-readable tables are not compared. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "runtime/verify_cost.h"
#include "support/run_cli.h"
#include "support/test_util.h"


typedef tu_cmd cmd_result; /* rc, out, err (support/run_cli.h) */

static char *slurp_n(const char *path, size_t *n) { return tu_slurp(path, n); }
static char *slurp(const char *path) { return tu_slurp(path, NULL); }

static void expect_usage(const cmd_result *r, const char *name);

static void cmd_free(cmd_result *r) { tu_cmd_free(r); }

/* The real SmolLM2-135M-Instruct in the user's model cache (NULL when absent). */
static const char *g_smollm2;

/* Standard input of the next command (NULL: /dev/null); reset after each command. */
static const char *g_stdin = NULL;

/* Run SDN_CLI with the NULL-terminated argument list (after the program name). */
static cmd_result run_argv(const char *const *args) {
    const char *in = g_stdin;
    g_stdin = NULL;
    return tu_run_cli(args, in);
}

#define RUN(...) run_argv((const char *const[]){__VA_ARGS__, NULL})

static void expect_ok(const cmd_result *r) {
    if (r->rc != 0) {
        print_message("stdout:\n%s\nstderr:\n%s\n", r->out, r->err);
        fail_msg("exit code %d, expected 0", r->rc);
    }
}

/* A usage or input error: nonzero exit and a message on stderr naming every `names`. */
static void expect_error_naming(const cmd_result *r, const char *name1, const char *name2) {
    if (r->rc == 0) {
        print_message("stdout:\n%s\nstderr:\n%s\n", r->out, r->err);
        fail_msg("exit code 0, expected an error naming '%s'", name1);
    }
    const char *names[2] = {name1, name2};
    for (int i = 0; i < 2; i++)
        if (names[i] && !strstr(r->err, names[i])) {
            print_message("stderr:\n%s\n", r->err);
            fail_msg("the error message does not name '%s'", names[i]);
        }
}

static const char *model_path(void) {
    static char path[1024];
    if (!path[0]) {
        snprintf(path, sizeof path, "%s", tu_tmp("tiny.gguf"));
        cmd_result r = RUN("make-model", "--shape", "tiny-llama", "--type", "Q8_0", "--seed", "7", "--out", path, "--quiet");
        expect_ok(&r);
        cmd_free(&r);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
    }
    return path;
}

/* A prompt that repeats itself, so the drafters find matches and actually draft. */
#define PROMPT_IDS "1 50 60 70 80 90 50 60 70 80 90 50 60 70"
#define NTOK "24"

static int setup(void **state) {
    (void)state;
    if (!getenv("SDN_CLI")) {
        print_message("SDN_CLI is not set (run through CTest)\n");
        return -1;
    }
    g_smollm2 = tu_smollm2(); /* from the user's cache, before SDNPU_CACHE points elsewhere */
    if (g_smollm2) g_smollm2 = strdup(g_smollm2);
    char cache[1024];
    snprintf(cache, sizeof cache, "%s", tu_tmp("cache"));
    mkdir(cache, 0755);
    setenv("SDNPU_CACHE", cache, 1);
    return 0;
}

/* Plain greedy text of the tiny model (the reference for the comparisons below). */
static const char *plain_text(void) {
    static char *text;
    if (!text) {
        cmd_result r = RUN("run", "--model", model_path(), "--prompt-ids", PROMPT_IDS, "--max-tokens", NTOK, "--quiet");
        expect_ok(&r);
        assert_true(strlen(r.out) > 0);
        text = r.out;
        free(r.err);
    }
    return text;
}

static void test_make_model_and_info(void **state) {
    (void)state;
    const char *m = model_path();
    cmd_result r = RUN("info", m);
    expect_ok(&r);
    assert_non_null(strstr(r.out, "llama"));
    assert_non_null(strstr(r.out, "Q8_0"));
    cmd_free(&r);
    r = RUN("info", tu_tmp("no-such-model.gguf"));
    expect_error_naming(&r, "no-such-model.gguf", NULL);
    cmd_free(&r);
    /* a file that is not a model */
    const char *junk = tu_tmp("junk.gguf");
    assert_int_equal(tu_write_file(junk, "GGUF but not really", 19), 0);
    r = RUN("info", junk);
    expect_error_naming(&r, "junk.gguf", NULL);
    cmd_free(&r);
}

static void test_run_plain_deterministic(void **state) {
    (void)state;
    const char *a = plain_text();
    cmd_result r = RUN("run", "--model", model_path(), "--prompt-ids", PROMPT_IDS, "--max-tokens", NTOK, "--quiet", "--threads", "1");
    expect_ok(&r);
    assert_string_equal(r.out, a); /* thread count does not change greedy output */
    cmd_free(&r);
    r = RUN("run", "--model", model_path(), "--prompt", "the cat sat", "--max-tokens", "8");
    expect_ok(&r);
    cmd_free(&r);
}

/* --compare runs plain then speculative decoding and reports whether the outputs match. */
static void test_run_compare(void **state) {
    (void)state;
    const char *methods[] = {"pld", "sam", "sdnpu"};
    for (int i = 0; i < 3; i++) {
        cmd_result r = RUN("run", "--model", model_path(), "--prompt-ids", PROMPT_IDS, "--max-tokens", NTOK, "--spec", methods[i],
                           "--compare");
        expect_ok(&r);
        int identical = strstr(r.out, "identical") || strstr(r.err, "identical");
        int differs = strstr(r.out, "DIFFERS") || strstr(r.err, "DIFFERS");
        if (!identical || differs) {
            print_message("stdout:\n%s\nstderr:\n%s\n", r.out, r.err);
            fail_msg("--spec %s --compare does not report identical output", methods[i]);
        }
        /* the plain text appears in the output (both sections print it) */
        assert_non_null(strstr(r.out, plain_text()));
        cmd_free(&r);
    }
}

static const cJSON *field(const cJSON *o, const char *name) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!f) fail_msg("--stats-json: no field '%s'", name);
    return f;
}

static int num(const cJSON *o, const char *name) {
    const cJSON *f = field(o, name);
    if (!cJSON_IsNumber(f)) fail_msg("--stats-json: field '%s' is not a number", name);
    return (int)f->valuedouble;
}

static void check_run_stats(const cJSON *run, int max_tokens) {
    int gen = num(run, "generated_tokens"), steps = num(run, "steps"), drafted = num(run, "drafted_tokens"),
        acc = num(run, "accepted_draft_tokens");
    assert_true(num(run, "prompt_tokens") > 0);
    assert_true(gen > 0 && gen <= max_tokens);
    assert_true(steps >= 1 && steps <= gen);
    assert_true(acc >= 0 && acc <= drafted);
    /* every step commits one model token plus the draft tokens it accepted (the last step
     * may be cut at max_tokens) */
    assert_true(gen <= steps + acc);
    assert_true(gen >= steps);
    const cJSON *tokens = field(run, "tokens");
    assert_true(cJSON_IsArray(tokens));
    assert_int_equal(cJSON_GetArraySize(tokens), gen);
    const cJSON *hist = field(run, "accepted_length_histogram");
    assert_true(cJSON_IsArray(hist));
    int hs = 0, ha = 0, i = 0;
    const cJSON *h;
    cJSON_ArrayForEach(h, hist) {
        hs += (int)h->valuedouble;
        ha += i++ * (int)h->valuedouble;
    }
    assert_int_equal(hs, steps);
    assert_int_equal(ha, acc);
    double mean = field(run, "mean_accepted_tokens")->valuedouble;
    assert_true(mean > (double)gen / steps - 1e-6 && mean < (double)gen / steps + 1e-6);
    assert_true(cJSON_IsString(field(run, "text")));
    assert_true(field(run, "decode_s")->valuedouble >= 0);
}

static void test_stats_json(void **state) {
    (void)state;
    char js[1024];
    snprintf(js, sizeof js, "%s", tu_tmp("stats.json"));
    remove(js);
    /* --draft-max pinned: with the default the budget comes from this machine's measured
     * verify cost, and under the sanitizers one draft row cost 1.7x a plain step on this tiny
     * model, so nothing was drafted and the check below failed by timing alone */
    cmd_result r = RUN("run", "--model", model_path(), "--prompt-ids", PROMPT_IDS, "--max-tokens", NTOK, "--spec", "sdnpu", "--compare",
                       "--stats-json", js, "--threads", "2", "--draft-max", "8");
    expect_ok(&r);
    cmd_free(&r);
    char *text = slurp(js);
    cJSON *j = cJSON_Parse(text);
    free(text);
    assert_non_null(j);
    assert_true(strstr(field(j, "model")->valuestring, "tiny.gguf") != NULL);
    assert_int_equal(num(j, "threads"), 2);
    const cJSON *fp = field(j, "model_fingerprint");
    assert_true(cJSON_IsString(fp) && strlen(fp->valuestring) == 16);
    const cJSON *runs = field(j, "runs");
    assert_true(cJSON_IsArray(runs));
    assert_int_equal(cJSON_GetArraySize(runs), 2); /* plain, then speculative */
    const cJSON *plain = cJSON_GetArrayItem(runs, 0), *spec = cJSON_GetArrayItem(runs, 1);
    assert_string_equal(field(plain, "method")->valuestring, "none");
    assert_string_equal(field(spec, "method")->valuestring, "sdnpu");
    check_run_stats(plain, atoi(NTOK));
    check_run_stats(spec, atoi(NTOK));
    assert_int_equal(num(plain, "steps"), num(plain, "generated_tokens"));
    assert_int_equal(num(plain, "drafted_tokens"), 0);
    assert_true(num(spec, "drafted_tokens") > 0); /* the repeating prompt gives the drafter matches */
    assert_true(cJSON_IsTrue(field(spec, "same_output_as_plain")));
    /* the same tokens, and the text is the plain run's text */
    const cJSON *ta = field(plain, "tokens"), *tb = field(spec, "tokens");
    assert_int_equal(cJSON_GetArraySize(ta), cJSON_GetArraySize(tb));
    for (int i = 0; i < cJSON_GetArraySize(ta); i++)
        assert_int_equal((int)cJSON_GetArrayItem(ta, i)->valuedouble, (int)cJSON_GetArrayItem(tb, i)->valuedouble);
    assert_non_null(strstr(plain_text(), field(plain, "text")->valuestring));
    cJSON_Delete(j);

    /* a file that cannot be written: an error naming it */
    r = RUN("run", "--model", model_path(), "--prompt-ids", PROMPT_IDS, "--max-tokens", "4", "--stats-json", "/nonexistent-dir/s.json");
    expect_error_naming(&r, "/nonexistent-dir/s.json", NULL);
    cmd_free(&r);
}

/* bench-verify --model --cost-out: the file's measured curve as a verify-cost profile that
 * `sdnpu study --cost` reads, loaded by the reader itself (runtime/verify_cost.h: sizes =
 * rows - 1, the 1-row step the plain step) and held against the table the command printed;
 * a --rows list that does not start at 1 or does not increase is refused first. */
static void test_model_cost_profile(void **state) {
    (void)state;
    char prof[1024];
    snprintf(prof, sizeof prof, "%s", tu_tmp("curve-profile.json"));
    remove(prof);
    cmd_result r = RUN("bench-verify", "--model", model_path(), "--rows", "1,2,4", "--context", "24", "--reps", "1", "--threads", "1",
                       "--cost-out", prof);
    expect_ok(&r);
    sdn_cost_profile p;
    sdn_err err = {0};
    if (sdn_cost_load(prof, &p, &err)) fail_msg("%s", err.msg);
    assert_int_equal(p.n, 3);
    const int rows[] = {1, 2, 4};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(p.tree_sizes[i], rows[i] - 1);
        /* the printed line of that row count: "  rows  ms  ratio", ms with 3 decimals */
        char want[64];
        snprintf(want, sizeof want, "\n  %6d %10.3f ", rows[i], p.step_ms[i]);
        if (!strstr(r.out, want)) fail_msg("no line '%s' in the output:\n%s", want + 1, r.out);
    }
    assert_true(p.plain_step_ms == p.step_ms[0]);
    assert_non_null(strstr(p.shape, "24-token context"));
    cmd_free(&r);
    r = RUN("bench-verify", "--model", model_path(), "--rows", "2,4", "--cost-out", prof);
    expect_usage(&r, "--cost-out");
    cmd_free(&r);
    r = RUN("bench-verify", "--model", model_path(), "--rows", "1,4,2", "--cost-out", prof);
    expect_usage(&r, "--cost-out");
    cmd_free(&r);
}

static void test_param(void **state) {
    (void)state;
    const char *m = model_path();
    cmd_result r = RUN("run", "--model", m, "--prompt-ids", PROMPT_IDS, "--max-tokens", NTOK, "--spec", "sdnpu", "--param", "sdnpu.follow=0.5",
                       "--param", "cal.max_depth=4", "--quiet");
    expect_ok(&r);
    assert_string_equal(r.out, plain_text());
    cmd_free(&r);
    r = RUN("run", "--model", m, "--prompt-ids", PROMPT_IDS, "--max-tokens", "4", "--spec", "pld", "--param", "bogus.key=3");
    expect_error_naming(&r, "bogus.key", NULL);
    cmd_free(&r);
    r = RUN("run", "--model", m, "--prompt-ids", PROMPT_IDS, "--max-tokens", "4", "--spec", "sdnpu", "--param", "sdnpu.follow=7");
    expect_error_naming(&r, "sdnpu.follow", NULL);
    cmd_free(&r);
    r = RUN("run", "--model", m, "--prompt-ids", PROMPT_IDS, "--max-tokens", "4", "--spec", "pld", "--param", "pld.max_ngram");
    expect_error_naming(&r, "pld.max_ngram", NULL);
    cmd_free(&r);
    r = RUN("run", "--model", m, "--prompt-ids", PROMPT_IDS, "--max-tokens", "4", "--spec", "pld", "--param");
    expect_error_naming(&r, "--param", NULL);
    cmd_free(&r);
}

/* --graphs: prefill through the fixed-shape graphs; single/sync/async prefill every row on G1
 * and decode on G2, progressive switches block by block; all of them give the plain text. */
static void test_graphs(void **state) {
    (void)state;
    char db[1024];
    snprintf(db, sizeof db, "%s", tu_tmp("profiles.sqlite"));
    const char *modes[] = {"single", "progressive", "sync", "async"};
    for (int i = 0; i < 4; i++) {
        cmd_result r = RUN("run", "--model", model_path(), "--prompt-ids", PROMPT_IDS, "--max-tokens", NTOK, "--graphs", modes[i],
                           "--profile-db", db, "--quiet");
        expect_ok(&r);
        if (strcmp(r.out, plain_text())) {
            print_message("--graphs %s:\n[%s]\nplain:\n[%s]\n", modes[i], r.out, plain_text());
            fail_msg("--graphs %s changes the greedy output", modes[i]);
        }
        cmd_free(&r);
    }
    /* with a drafter on top */
    cmd_result r = RUN("run", "--model", model_path(), "--prompt-ids", PROMPT_IDS, "--max-tokens", NTOK, "--graphs", "progressive",
                       "--profile-db", db, "--spec", "sdnpu", "--quiet");
    expect_ok(&r);
    assert_string_equal(r.out, plain_text());
    cmd_free(&r);
    r = RUN("run", "--model", model_path(), "--prompt-ids", PROMPT_IDS, "--max-tokens", "4", "--graphs", "weird", "--profile-db", db);
    expect_error_naming(&r, "weird", NULL);
    cmd_free(&r);
}

static void test_pull(void **state) {
    (void)state;
    cmd_result r = RUN("pull", "--list");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "smollm2-135m-instruct"));
    cmd_free(&r);
    r = RUN("pull", "no-such-model-xyz");
    expect_error_naming(&r, "no-such-model-xyz", NULL);
    cmd_free(&r);
}

static void test_usage_errors(void **state) {
    (void)state;
    const char *m = model_path();
    cmd_result r = RUN("run", "--model", m, "--prompt", "hi", "--bogus-opt");
    expect_error_naming(&r, "--bogus-opt", NULL);
    cmd_free(&r);
    r = RUN("run", "--model", m, "--prompt", "hi", "--max-tokens");
    expect_error_naming(&r, "--max-tokens", NULL);
    cmd_free(&r);
    r = RUN("run", "--model", m, "--prompt", "hi", "--spec", "no-such-method");
    expect_error_naming(&r, "no-such-method", NULL);
    cmd_free(&r);
    r = RUN("run", "--model", tu_tmp("missing.gguf"), "--prompt", "hi");
    expect_error_naming(&r, "missing.gguf", NULL);
    cmd_free(&r);
    r = RUN("run", "--model", m, "--prompt", "hi", "--graphs", "nope");
    expect_usage(&r, "--graphs");
    assert_non_null(strstr(r.err, "progressive"));
    cmd_free(&r);
    r = RUN("info", "--bogus-opt");
    assert_int_not_equal(r.rc, 0);
    cmd_free(&r);
    /* a model whose header is wrong is not called a vocabulary: info names the field */
    {
        size_t n;
        unsigned char *b = (unsigned char *)slurp_n(m, &n);
        const char *key = "llama.context_length";
        size_t at = tu_gguf_u32_at(b, n, key);
        if (!at) fail_msg("%s: key %s (uint32) not found", m, key);
        uint32_t v = 1u << 31;
        memcpy(b + at, &v, 4);
        assert_int_equal(tu_write_file(tu_tmp("ctx2g.gguf"), b, n), 0);
        free(b);
        r = RUN("info", "--model", tu_tmp("ctx2g.gguf"));
        if (r.rc == 0 || !strstr(r.err, "context_length") || strstr(r.out, "vocabulary only")) {
            print_message("rc %d\nstdout:\n%s\nstderr:\n%s\n", r.rc, r.out, r.err);
            fail_msg("info on a model with context_length 2^31 did not name the field");
        }
        cmd_free(&r);
    }
    r = RUN("no-such-command");
    expect_error_naming(&r, "no-such-command", NULL);
    cmd_free(&r);
    r = RUN("make-model", "--shape", "no-such-shape", "--out", tu_tmp("x.gguf"));
    expect_error_naming(&r, "no-such-shape", NULL);
    cmd_free(&r);
}


/* A usage error: exit code 2 and a message naming `name`. */
static void expect_usage(const cmd_result *r, const char *name) {
    if (r->rc != 2 || !strstr(r->err, name)) {
        print_message("rc %d\nstdout:\n%s\nstderr:\n%s\n", r->rc, r->out, r->err);
        fail_msg("expected a usage error (exit 2) naming '%s'", name);
    }
}

/* A runtime failure: exit code 1 and a message naming both strings. */
static void expect_runtime(const cmd_result *r, const char *a, const char *b) {
    if (r->rc != 1 || !strstr(r->err, a) || (b && !strstr(r->err, b))) {
        print_message("rc %d\nstdout:\n%s\nstderr:\n%s\n", r->rc, r->out, r->err);
        fail_msg("expected a runtime failure (exit 1) naming '%s' and '%s'", a, b ? b : "");
    }
}

/* --context files: every encoding decoded (the rendered prompt shows the text, checked
 * against the UTF-8 it was written from), or refused with the byte offset; never cut. */
static void test_context_encodings(void **state) {
    (void)state;
    const char *m = model_path();
    const char *utf8 = "caf\xc3\xa9 na\xc3\xafve \xf0\x9f\x98\x80 end";
    /* the same text in UTF-16LE and UTF-16BE with a BOM, built by hand from its code points */
    const uint32_t cps[] = {'c', 'a', 'f', 0xE9, ' ', 'n', 'a', 0xEF, 'v', 'e', ' ', 0x1F600, ' ', 'e', 'n', 'd'};
    unsigned char le[64], be[64];
    size_t n = 0;
    le[n] = 0xFF, be[n++] = 0xFE;
    le[n] = 0xFE, be[n++] = 0xFF;
    for (size_t i = 0; i < sizeof cps / sizeof cps[0]; i++) {
        uint32_t u[2] = {cps[i], 0};
        int k = 1;
        if (cps[i] > 0xFFFF) u[0] = 0xD800 + ((cps[i] - 0x10000) >> 10), u[1] = 0xDC00 + ((cps[i] - 0x10000) & 0x3FF), k = 2;
        for (int j = 0; j < k; j++, n += 2) {
            le[n] = (unsigned char)(u[j] & 0xFF), le[n + 1] = (unsigned char)(u[j] >> 8);
            be[n] = (unsigned char)(u[j] >> 8), be[n + 1] = (unsigned char)(u[j] & 0xFF);
        }
    }
    char bom8[64];
    snprintf(bom8, sizeof bom8, "\xef\xbb\xbf%s", utf8);
    struct {
        const char *name;
        const void *data;
        size_t len;
    } ok[] = {{"plain.txt", utf8, strlen(utf8)}, {"bom8.txt", bom8, strlen(bom8)}, {"u16le.txt", le, n}, {"u16be.txt", be, n}};
    for (int i = 0; i < 4; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s", tu_tmp(ok[i].name));
        assert_int_equal(tu_write_file(path, ok[i].data, ok[i].len), 0);
        cmd_result r = RUN("run", "--model", m, "--context", path, "--prompt", "Q", "--print-prompt");
        expect_ok(&r);
        if (!strstr(r.out, utf8) || strstr(r.out, "\xef\xbb\xbf")) {
            print_message("%s: rendered prompt:\n%s\n", ok[i].name, r.out);
            fail_msg("--context %s is not decoded to the UTF-8 text", ok[i].name);
        }
        cmd_free(&r);
    }
    struct {
        const char *name, *data;
        size_t len;
        const char *offset;
    } bad[] = {
        {"nul.txt", "abc\0def", 7, "byte offset 3"},          /* cut at the NUL before */
        {"u16nobom.txt", "h\0i\0", 4, "byte offset 1"},        /* UTF-16 without BOM */
        {"badutf8.txt", "ab\xc3(", 4, "byte offset 2"},        /* invalid continuation */
        {"overlong.txt", "x\xc0\xaf", 3, "byte offset 1"},     /* overlong '/' */
        {"lone.txt", "\xff\xfe" "a\0\x00\xdc", 6, "byte offset 4"}, /* unpaired low surrogate */
        {"odd.txt", "\xff\xfe" "a\0b", 5, "byte offset 4"},    /* odd-length UTF-16 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s", tu_tmp(bad[i].name));
        assert_int_equal(tu_write_file(path, bad[i].data, bad[i].len), 0);
        cmd_result r = RUN("run", "--model", m, "--context", path, "--prompt", "Q", "--max-tokens", "2");
        expect_runtime(&r, bad[i].name, bad[i].offset);
        cmd_free(&r);
    }
}

/* Options that would be silently ignored are usage errors (exit 2) naming them. */
static void test_ignored_options_refused(void **state) {
    (void)state;
    const char *m = model_path();
    cmd_result r = RUN("run", "--model", m, "--prompt", "hi", "--spec", "none", "--param", "sdnpu.follow=0.5");
    expect_usage(&r, "--param");
    cmd_free(&r);
    r = RUN("run", "--model", m, "--prompt", "hi", "--system", "be brief"); /* tiny model: no chat template */
    expect_usage(&r, "--system");
    cmd_free(&r);
    r = RUN("run", "--model", m, "--prompt", "hi", "--chat-template", "none", "--system", "x");
    expect_usage(&r, "--system");
    cmd_free(&r);
    r = RUN("run", "--model", m, "--prompt-ids", "1 2", "--context", tu_tmp("plain.txt"));
    expect_usage(&r, "--context");
    cmd_free(&r);
    r = RUN("run", "--model", m, "--prompt", "a", "--prompt-ids", "1 2");
    expect_usage(&r, "--prompt-ids");
    cmd_free(&r);
    /* info A B describes both */
    char m2[1024];
    snprintf(m2, sizeof m2, "%s", tu_tmp("tiny2.gguf"));
    r = RUN("make-model", "--shape", "tiny-qwen2", "--type", "F16", "--seed", "3", "--out", m2, "--quiet");
    expect_ok(&r);
    cmd_free(&r);
    r = RUN("info", m, m2);
    expect_ok(&r);
    assert_non_null(strstr(r.out, "tiny.gguf"));
    assert_non_null(strstr(r.out, "tiny2.gguf"));
    assert_non_null(strstr(r.out, "qwen2"));
    assert_non_null(strstr(r.out, "llama"));
    cmd_free(&r);
    r = RUN("info", "--model", m, "--model=" "/nonexistent/x.gguf");
    expect_runtime(&r, "/nonexistent/x.gguf", NULL);
    assert_non_null(strstr(r.out, "tiny.gguf")); /* the good one is still described */
    cmd_free(&r);
}

/* The global options --kernel and --prefill-matmul (and SDN_PREFILL_MATMUL): a bad or missing
 * value is a usage error naming the option (or the variable); a good one runs. */
static void test_global_options(void **state) {
    (void)state;
    cmd_result r = RUN("info", "--prefill-matmul", "fast", "--model", model_path());
    expect_usage(&r, "--prefill-matmul");
    cmd_free(&r);
    r = RUN("info", "--model", model_path(), "--prefill-matmul");
    expect_usage(&r, "--prefill-matmul");
    cmd_free(&r);
    r = RUN("info", "--kernel=none", "--model", model_path());
    expect_usage(&r, "--kernel");
    cmd_free(&r);
    setenv("SDN_PREFILL_MATMUL", "fast", 1);
    r = RUN("info", "--model", model_path());
    unsetenv("SDN_PREFILL_MATMUL");
    expect_usage(&r, "SDN_PREFILL_MATMUL");
    cmd_free(&r);
    r = RUN("info", "--model", model_path(), "--prefill-matmul=sgemm");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "prefill matmul: sgemm"));
    cmd_free(&r);
    static const char *ok[] = {"auto", "sgemm", "kernels"};
    for (int k = 0; k < 3; k++) {
        r = RUN("run", "--model", model_path(), "--prompt", "hi", "--max-tokens", "2", "--prefill-matmul", ok[k]);
        if (r.rc != 0) fail_msg("--prefill-matmul %s: rc %d: %s", ok[k], r.rc, r.err);
        cmd_free(&r);
    }
}

static const char *k_commands[] = {"demo", "run", "chat", "pull", "info", "make-model", "bench-model", "tokenize", "bench-verify",
                                   "bench-sam", "bench-kernels", "profile", "bench-graphs", "bench", "trace", "trace-import",
                                   "study", "make-story-task"};

/* Every command: -h and --help (exit 0, an example at the end), --version, an unknown
 * option (exit 2 naming it). */
static void test_option_vocabulary(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++) {
        const char *hs[] = {"-h", "--help"};
        for (int h = 0; h < 2; h++) {
            cmd_result r = RUN(k_commands[i], hs[h]);
            if (r.rc != 0 || !strstr(r.out, "usage") || !strstr(r.out, "example:\n  sdnpu ")) {
                print_message("sdnpu %s %s: rc %d\n%s\n%s\n", k_commands[i], hs[h], r.rc, r.out, r.err);
                fail_msg("sdnpu %s %s: no help ending with an example", k_commands[i], hs[h]);
            }
            cmd_free(&r);
        }
        cmd_result r = RUN(k_commands[i], "--version");
        expect_ok(&r);
        assert_non_null(strstr(r.out, "sdnpu 0."));
        cmd_free(&r);
        r = RUN(k_commands[i], "--no-such-option-x");
        expect_usage(&r, "--no-such-option-x");
        cmd_free(&r);
    }
    cmd_result r = RUN("--version");
    expect_ok(&r);
    cmd_free(&r);
    /* --opt=value is --opt value */
    char arg[1100];
    snprintf(arg, sizeof arg, "--model=%s", model_path());
    r = RUN("run", arg, "--prompt-ids=" PROMPT_IDS, "--max-tokens=" NTOK, "--quiet", "--threads=1");
    expect_ok(&r);
    assert_string_equal(r.out, plain_text());
    cmd_free(&r);
    /* bad values: exit 2 for every option kind */
    const char *bad[][2] = {{"--max-tokens", "-1"}, {"--temp", "abc"}, {"--threads", "0"}, {"--top-p", "2"}, {"--ctx", "1"}, {"--seed", "x"}};
    for (int i = 0; i < 6; i++) {
        r = RUN("run", "--model", model_path(), "--prompt", "hi", bad[i][0], bad[i][1]);
        expect_usage(&r, bad[i][0]);
        cmd_free(&r);
    }
    /* old spellings still work, with a note naming the new one */
    r = RUN("make-story-task", "--tokens", "x");
    expect_usage(&r, "--max-tokens");
    assert_non_null(strstr(r.err, "deprecated"));
    cmd_free(&r);
    /* --help of run lists the --param keys and the default thread count */
    r = RUN("run", "--help");
    assert_non_null(strstr(r.out, "sdnpu.follow"));
    assert_non_null(strstr(r.out, "CPUs this process may use"));
    cmd_free(&r);
    /* study --history is a file elsewhere: refused with the new name */
    r = RUN("study", "--history");
    expect_usage(&r, "--replay-history");
    cmd_free(&r);
}

/* Output paths are checked before the work starts (the command fails at once). */
static void test_outputs_checked_first(void **state) {
    (void)state;
    const char *m = model_path();
    struct {
        const char *cmd, *opt;
    } outs[] = {{"study", "--csv"}, {"study", "--json"}, {"study", "--results-db"}, {"bench", "--results-db"},
                {"trace", "--out"}, {"bench-verify", "--json"}, {"bench-model", "--json"}, {"make-story-task", "--out"}};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        cmd_result r = RUN(outs[i].cmd, outs[i].opt, "/nonexistent-dir/out.x", "--model", m);
        expect_runtime(&r, outs[i].opt, "/nonexistent-dir");
        cmd_free(&r);
    }
    cmd_result r = RUN("bench", "--out", "/proc/version/sub", "--model", m);
    expect_runtime(&r, "--out", "/proc/version");
    cmd_free(&r);
    r = RUN("run", "--model", m, "--prompt-ids", PROMPT_IDS, "--stats-json", "/nonexistent-dir/s.json", "--max-tokens", "100000");
    expect_runtime(&r, "--stats-json", "/nonexistent-dir");
    cmd_free(&r);
}

/* --prompt - (stdin), --prompt-file, --stop, --print-prompt, the trained-length warning. */
static void test_prompt_sources(void **state) {
    (void)state;
    const char *m = model_path();
    const char *pf = tu_tmp("prompt.txt");
    char pfile[1024];
    snprintf(pfile, sizeof pfile, "%s", pf);
    assert_int_equal(tu_write_file(pfile, "the cat sat", 11), 0);
    cmd_result a = RUN("run", "--model", m, "--prompt", "the cat sat", "--max-tokens", "8", "--quiet");
    expect_ok(&a);
    g_stdin = pfile;
    cmd_result b = RUN("run", "--model", m, "--prompt", "-", "--max-tokens", "8", "--quiet");
    expect_ok(&b);
    assert_string_equal(a.out, b.out);
    cmd_free(&b);
    b = RUN("run", "--model", m, "--prompt-file", pfile, "--max-tokens", "8", "--quiet");
    expect_ok(&b);
    assert_string_equal(a.out, b.out);
    cmd_free(&b);
    b = RUN("run", "--model", m, "--prompt-file", pfile, "--print-prompt");
    expect_ok(&b);
    assert_string_equal(b.out, "the cat sat\n");
    cmd_free(&b);
    /* --stop: the answer ends before the stop string (a piece of the plain answer) */
    const char *txt = a.out;
    size_t tl = strlen(txt);
    if (tl > 4) {
        char stop[8];
        snprintf(stop, sizeof stop, "%.2s", txt + tl / 2);
        char *at = strstr(txt, stop);
        b = RUN("run", "--model", m, "--prompt", "the cat sat", "--max-tokens", "8", "--quiet", "--stop", stop);
        expect_ok(&b);
        assert_int_equal(strlen(b.out), (size_t)(at - txt) + 1); /* the text before it, and the newline */
        assert_memory_equal(b.out, txt, (size_t)(at - txt));
        cmd_free(&b);
    }
    cmd_free(&a);
    b = RUN("run", "--model", m, "--prompt-file", tu_tmp("no-such-prompt.txt"), "--max-tokens", "2");
    expect_runtime(&b, "--prompt-file", "no-such-prompt.txt");
    cmd_free(&b);
    b = RUN("run", "--model", m, "--prompt", "hi", "--max-tokens", "2", "--ctx", "100000", "--quiet");
    assert_non_null(strstr(b.err, "trained context length"));
    cmd_free(&b);
}

/* `chat` holds a multi-turn conversation with the real SmolLM2 model: stdin piped, the
 * second answer sees the first turn (the model repeats a name it was told), /reset forgets. */
static void test_chat_real_model(void **state) {
    (void)state;
    if (!g_smollm2) {
        const char *ci = getenv("CI");
        if (ci && !strcmp(ci, "true")) fail_msg("SmolLM2-135M-Instruct is not in the model cache but CI=true");
        print_message("SmolLM2-135M-Instruct is not in the model cache: test skipped (run ./sdnpu pull smollm2-135m-instruct)\n");
        skip();
    }
    char in[1024];
    snprintf(in, sizeof in, "%s", tu_tmp("chat.in"));
    const char *script = "My name is Zorblax. Say hello to me.\nWhat is my name?\n/reset\n/exit\nthis line is never read\n";
    assert_int_equal(tu_write_file(in, script, strlen(script)), 0);
    g_stdin = in;
    cmd_result r = RUN("chat", "--model", g_smollm2, "--max-tokens", "24", "--threads", "2");
    expect_ok(&r);
    /* two answers, one per user turn, each ending with a newline */
    int lines = 0;
    for (const char *p = r.out; *p; p++) lines += *p == '\n';
    assert_true(lines >= 2);
    if (!strstr(r.out, "Zorblax")) {
        print_message("chat output:\n%s\n", r.out);
        fail_msg("the model did not use the name from the earlier turn");
    }
    assert_non_null(strstr(r.err, "conversation reset"));
    cmd_free(&r);
    /* a model without a chat template cannot chat: usage error */
    r = RUN("chat", "--model", model_path());
    expect_usage(&r, "chat template");
    cmd_free(&r);
}

/* --grammar / --json-schema: the files' errors are usage errors naming the option
 * and the file, the two exclude each other, a grammar or schema the library refuses is a
 * usage error with its message (position or keyword), and a grammar constrains the answer. */
static void test_constraint_options(void **state) {
    (void)state;
    const char *m = model_path();
    char missing[1024], empty[1024], bad_g[1024], bad_s[1024], yes_no[1024], dir[1024];
    snprintf(missing, sizeof missing, "%s", tu_tmp("no-such-grammar.gbnf"));
    snprintf(empty, sizeof empty, "%s", tu_tmp("empty.json"));
    snprintf(bad_g, sizeof bad_g, "%s", tu_tmp("bad.gbnf"));
    snprintf(bad_s, sizeof bad_s, "%s", tu_tmp("bad-schema.json"));
    snprintf(yes_no, sizeof yes_no, "%s", tu_tmp("yes-no.gbnf"));
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
    assert_int_equal(tu_write_file(empty, "", 0), 0);
    const char *g1 = "root ::= \"yes\" | \"no\"\nbroken ::= (\"a\"\n";
    assert_int_equal(tu_write_file(bad_g, g1, strlen(g1)), 0);
    const char *s1 = "{\"type\": \"object\", \"properties\": {\"when\": {\"type\": \"string\", \"format\": \"date\"}}}";
    assert_int_equal(tu_write_file(bad_s, s1, strlen(s1)), 0);
    const char *g2 = "root ::= \"yes\" | \"no\"\n";
    assert_int_equal(tu_write_file(yes_no, g2, strlen(g2)), 0);
    const char *cmds[] = {"run", "chat"};
    for (int c = 0; c < 2; c++) {
        cmd_result r = c == 0 ? RUN("run", "--model", m, "--prompt", "hi", "--grammar", missing) : RUN("chat", "--model", m, "--grammar", missing);
        expect_usage(&r, "--grammar");
        assert_non_null(strstr(r.err, "no-such-grammar.gbnf"));
        cmd_free(&r);
        r = c == 0 ? RUN("run", "--model", m, "--prompt", "hi", "--json-schema", empty) : RUN("chat", "--model", m, "--json-schema", empty);
        expect_usage(&r, "--json-schema");
        assert_non_null(strstr(r.err, "empty.json"));
        cmd_free(&r);
        r = c == 0 ? RUN("run", "--model", m, "--prompt", "hi", "--json-schema", dir) : RUN("chat", "--model", m, "--json-schema", dir);
        expect_usage(&r, "--json-schema");
        cmd_free(&r);
        r = c == 0 ? RUN("run", "--model", m, "--prompt", "hi", "--grammar", yes_no, "--json-schema", bad_s)
                   : RUN("chat", "--model", m, "--grammar", yes_no, "--json-schema", bad_s);
        expect_usage(&r, "--grammar");
        assert_non_null(strstr(r.err, "--json-schema"));
        cmd_free(&r);
        r = RUN(cmds[c], "--help");
        assert_non_null(strstr(r.out, "--grammar FILE"));
        assert_non_null(strstr(r.out, "--json-schema FILE"));
        cmd_free(&r);
    }
    /* the library's verdict on the constraint itself */
    cmd_result r = RUN("run", "--model", m, "--prompt-ids", PROMPT_IDS, "--max-tokens", "4", "--grammar", bad_g);
    expect_usage(&r, "--grammar");
    assert_non_null(strstr(r.err, "grammar: line 2"));
    cmd_free(&r);
    r = RUN("run", "--model", m, "--prompt-ids", PROMPT_IDS, "--max-tokens", "4", "--json-schema", bad_s);
    expect_usage(&r, "--json-schema");
    assert_non_null(strstr(r.err, "\"format\""));
    assert_non_null(strstr(r.err, "/properties/when"));
    cmd_free(&r);
    /* a grammar constrains the answer, plain and speculative alike */
    const char *specs[] = {"none", "sdnpu"};
    for (int k = 0; k < 2; k++) {
        r = RUN("run", "--model", m, "--prompt-ids", PROMPT_IDS, "--max-tokens", "8", "--quiet", "--spec", specs[k], "--grammar", yes_no);
        expect_ok(&r);
        if (strcmp(r.out, "yes\n") != 0 && strcmp(r.out, "no\n") != 0) fail_msg("--spec %s --grammar yes|no answered '%s'", specs[k], r.out);
        cmd_free(&r);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_make_model_and_info), cmocka_unit_test(test_run_plain_deterministic),
        cmocka_unit_test(test_run_compare),         cmocka_unit_test(test_stats_json),
        cmocka_unit_test(test_param),               cmocka_unit_test(test_graphs),
        cmocka_unit_test(test_model_cost_profile),
        cmocka_unit_test(test_pull),                cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_context_encodings),   cmocka_unit_test(test_ignored_options_refused),
        cmocka_unit_test(test_option_vocabulary),   cmocka_unit_test(test_outputs_checked_first),
        cmocka_unit_test(test_global_options),
        cmocka_unit_test(test_prompt_sources),      cmocka_unit_test(test_chat_real_model),
        cmocka_unit_test(test_constraint_options),
    };
    /* SDN_TEST_FILTER=pattern runs only the matching tests (cmocka's wildcards) */
    if (getenv("SDN_TEST_FILTER")) cmocka_set_test_filter(getenv("SDN_TEST_FILTER"));
    return cmocka_run_group_tests(tests, setup, NULL);
}
