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

#include "support/test_util.h"

extern char **environ;

/* Seconds any one command may take (the slowest, a first --graphs run, profiles the model in
 * about 2 s on 2 busy cores). */
#define CMD_TIMEOUT_S 60

typedef struct {
    int rc;    /* exit code; -1 when killed by a signal or the timeout */
    char *out; /* stdout, NUL-terminated */
    char *err; /* stderr */
} cmd_result;

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    assert_non_null(b);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = 0;
    fclose(f);
    return b;
}

static void cmd_free(cmd_result *r) {
    free(r->out);
    free(r->err);
}

/* Run SDN_CLI with the NULL-terminated argument list (after the program name). */
static cmd_result run_argv(const char *const *args) {
    const char *cli = getenv("SDN_CLI");
    assert_non_null(cli);
    const char *argv[64];
    int n = 0;
    argv[n++] = cli;
    for (; args[n - 1] && n < 63; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    static char po[1024], pe[1024]; /* own copies: tu_tmp's buffers rotate */
    snprintf(po, sizeof po, "%s", tu_tmp("cli.stdout"));
    snprintf(pe, sizeof pe, "%s", tu_tmp("cli.stderr"));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, po, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, pe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int e = posix_spawn(&pid, cli, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e) fail_msg("cannot spawn %s: %s", cli, strerror(e));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int status = 0, timed_out = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) fail_msg("waitpid: %s", strerror(errno));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (t1.tv_sec - t0.tv_sec > CMD_TIMEOUT_S) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            timed_out = 1;
            break;
        }
        struct timespec nap = {0, 2000000};
        nanosleep(&nap, NULL);
    }
    cmd_result r = {.rc = !timed_out && WIFEXITED(status) ? WEXITSTATUS(status) : -1, .out = slurp(po), .err = slurp(pe)};
    if (timed_out) {
        print_message("stderr:\n%s\n", r.err);
        fail_msg("sdnpu %s ... did not finish within %d s", argv[1], CMD_TIMEOUT_S);
    }
    if (WIFSIGNALED(status)) {
        print_message("stderr:\n%s\n", r.err);
        fail_msg("sdnpu %s ... killed by signal %d", argv[1], WTERMSIG(status));
    }
    return r;
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
    cmd_result r = RUN("run", "--model", model_path(), "--prompt-ids", PROMPT_IDS, "--max-tokens", NTOK, "--spec", "sdnpu", "--compare",
                       "--stats-json", js, "--threads", "2");
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
    r = RUN("info", "--bogus-opt");
    assert_int_not_equal(r.rc, 0);
    cmd_free(&r);
    r = RUN("no-such-command");
    expect_error_naming(&r, "no-such-command", NULL);
    cmd_free(&r);
    r = RUN("make-model", "--shape", "no-such-shape", "--out", tu_tmp("x.gguf"));
    expect_error_naming(&r, "no-such-shape", NULL);
    cmd_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_make_model_and_info), cmocka_unit_test(test_run_plain_deterministic),
        cmocka_unit_test(test_run_compare),         cmocka_unit_test(test_stats_json),
        cmocka_unit_test(test_param),               cmocka_unit_test(test_graphs),
        cmocka_unit_test(test_pull),                cmocka_unit_test(test_usage_errors),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
