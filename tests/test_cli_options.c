/* test_cli_options.c - the option table of every `sdnpu` command (cli/opts.c), through the
 * built program (SDN_CLI, set by CTest), with no model file beyond a seeded tiny make-model
 * one: so it runs in the unit tier (`./sdnpu test --quick`).
 *
 * Asserted for every command: -h / --help exit 0 and list the command's options with their
 * value names, ending with a runnable example; an unknown option, a missing value and a
 * malformed value exit 2 with a message naming the option (and the bad value); old spellings
 * (--tokens, --max-new, --gen, --topk, --prompt N, -m, -f) parse as the option they stand for;
 * --opt=value is --opt value; and the defaults the program prints and uses are the library's
 * (sdnpu_request_init, sdnpu_context_params_init: SDNPU_DEFAULT_* of sdnpu.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "sdnpu.h"
#include "support/run_cli.h"
#include "support/test_util.h"


typedef tu_cmd res; /* rc, out, err (support/run_cli.h) */

static char *slurp(const char *path) { return tu_slurp(path, NULL); }
static void res_free(res *r) { tu_cmd_free(r); }
static res run_argv(const char *const *args) { return tu_run_cli(args, NULL); }

#define RUN(...) run_argv((const char *const[]){__VA_ARGS__, NULL})

/* Exit 2 and a message on stderr holding every non-NULL string of a and b. */
static void expect_usage(const char *what, const res *r, const char *a, const char *b) {
    if (r->rc != 2 || (a && !strstr(r->err, a)) || (b && !strstr(r->err, b))) {
        print_message("%s: rc %d\nstdout:\n%s\nstderr:\n%s\n", what, r->rc, r->out, r->err);
        fail_msg("%s: expected exit 2 with a message naming '%s'%s%s", what, a ? a : "", b ? " and " : "", b ? b : "");
    }
}

/* Every command, with options its --help must list (name and value name as printed). */
static const struct {
    const char *cmd;
    const char *opts[4];
} k_cmds[] = {
    {"demo", {"--offline", "--max-tokens N", "--spec METHOD", "--threads N"}},
    {"run", {"--model M", "--prompt TEXT", "--spec METHOD", "--draft-max N"}},
    {"chat", {"--model M", "--system TEXT", "--spec METHOD", "--threads N"}},
    {"serve", {"--model M", "--port N", "--slots N", "--threads N"}},
    {"pull", {"--list", "--quiet", "--no-progress", NULL}},
    {"info", {"--model M", "--tokenizer FILE", "--ctx N", NULL}},
    {"tokenize", {"--model M", "--file PATH", "--ids", "--no-bos"}},
    {"make-model", {"--shape NAME", "--out FILE", "--type TYPE", "--seed S"}},
    {"bench", {"--model M", "--budgets LIST", "--methods LIST", "--max-tokens N"}},
    {"bench-model", {"--model M", "--prompt-tokens N", "--max-tokens N", "--threads LIST"}},
    {"bench-kernels", {"--types LIST", "--shapes LIST", "--layout L", "--time SEC"}},
    {"bench-sam", {"--context-tokens N", "--vocab V", "--runs R", "--steps K"}},
    {"bench-graphs", {"--part ttft|gap|all", "--prompt-tokens N", "--pin auto|on|off", "--reps N"}},
    {"bench-verify", {"--model M", "--rows LIST", "--shapes LIST", "--cost-out FILE"}},
    {"bench-attention", {"--context LIST", "--rows LIST", "--cache LIST", "--heads N"}},
    {"trace", {"--model M", "--out FILE", "--prefill-topk K", "--dataset D"}},
    {"trace-import", {"--outputs FILE", "--max-tokens N", "--chat-template NAME", "--out FILE"}},
    {"study", {"--traces FILE", "--replay-history", "--param KEY=VALUE", "--csv FILE"}},
    {"profile", {"--model M", "--blocks N", "--accept A", "--force"}},
    {"make-story-task", {"--model M", "--out FILE", "--max-tokens N", "--n N"}},
};
#define N_CMDS (sizeof k_cmds / sizeof k_cmds[0])

static void test_help_of_every_command(void **state) {
    (void)state;
    for (size_t i = 0; i < N_CMDS; i++) {
        const char *hs[] = {"-h", "--help"};
        for (int h = 0; h < 2; h++) {
            res r = RUN(k_cmds[i].cmd, hs[h]);
            char usage[64];
            snprintf(usage, sizeof usage, "usage: sdnpu %s", k_cmds[i].cmd);
            int ok = r.rc == 0 && strstr(r.out, usage) && strstr(r.out, "example:\n  sdnpu ") && strstr(r.out, "-h, --help");
            for (int k = 0; k < 4 && k_cmds[i].opts[k]; k++) ok = ok && strstr(r.out, k_cmds[i].opts[k]);
            if (!ok) {
                print_message("sdnpu %s %s: rc %d\n%s\n%s\n", k_cmds[i].cmd, hs[h], r.rc, r.out, r.err);
                fail_msg("sdnpu %s %s: no generated help listing its options", k_cmds[i].cmd, hs[h]);
            }
            res_free(&r);
        }
    }
}

static void test_unknown_option_every_command(void **state) {
    (void)state;
    for (size_t i = 0; i < N_CMDS; i++) {
        res r = RUN(k_cmds[i].cmd, "--no-such-option-x");
        expect_usage(k_cmds[i].cmd, &r, "--no-such-option-x", NULL);
        res_free(&r);
        r = RUN(k_cmds[i].cmd, "--no-such-option-y=3");
        expect_usage(k_cmds[i].cmd, &r, "--no-such-option-y", NULL);
        res_free(&r);
    }
}

/* A malformed value and a missing value of one option of every command: exit 2 naming the
 * option (and the value), before any work. */
static void test_bad_values_every_command(void **state) {
    (void)state;
    static const struct {
        const char *cmd, *opt, *bad;
    } bad[] = {
        {"demo", "--max-tokens", "-5"},
        {"run", "--threads", "0"},
        {"run", "--temp", "abc"},
        {"run", "--chat-template", "bogus"},
        {"chat", "--top-p", "2"},
        {"chat", "--chat-template", "nope"},
        {"serve", "--port", "99999"},
        {"info", "--ctx", "1"},
        {"tokenize", "--model", NULL},
        {"make-model", "--layers", "0"},
        {"make-model", "--shape", "no-such-shape"},
        {"make-model", "--type", "Q9_9"},
        {"bench", "--budgets", "x"},
        {"bench", "--param", "bogus.key=1"},
        {"bench", "--limit", "0"},
        {"bench-model", "--reps", "99"},
        {"bench-model", "--threads", "1,x"},
        {"bench-model", "--types", "Q9_9"},
        {"bench-kernels", "--layout", "sideways"},
        {"bench-kernels", "--time", "1e9"},
        {"bench-sam", "--runs", "0"},
        {"bench-graphs", "--part", "everything"},
        {"bench-graphs", "--pin", "maybe"},
        {"bench-graphs", "--threads", "0"},
        {"bench-verify", "--reps", "0"},
        {"bench-verify", "--shapes", "no-such-shape"},
        {"bench-attention", "--heads", "0"},
        {"trace", "--limit", "0"},
        {"trace", "--prefill-topk", "99"},
        {"trace-import", "--chat-template", "auto"},
        {"study", "--limit", "x"},
        {"study", "--param", "bogus.key=1"},
        {"profile", "--accept", "2"},
        {"make-story-task", "--n", "0"},
        {"pull", "--list=yes", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char what[160];
        snprintf(what, sizeof what, "sdnpu %s %s %s", bad[i].cmd, bad[i].opt, bad[i].bad ? bad[i].bad : "");
        res r = bad[i].bad ? RUN(bad[i].cmd, bad[i].opt, bad[i].bad) : RUN(bad[i].cmd, bad[i].opt);
        char opt[64];
        snprintf(opt, sizeof opt, "%.*s", (int)strcspn(bad[i].opt, "="), bad[i].opt);
        expect_usage(what, &r, opt, bad[i].bad);
        res_free(&r);
    }
    /* a missing value: every command's first valued option, as the last argument */
    static const struct {
        const char *cmd, *opt;
    } missing[] = {{"demo", "--model"}, {"run", "--max-tokens"}, {"chat", "--spec"}, {"serve", "--host"}, {"info", "--ctx"},
                   {"tokenize", "--file"}, {"make-model", "--out"}, {"bench", "--dataset"}, {"bench-model", "--shape"},
                   {"bench-kernels", "--n"}, {"bench-sam", "--vocab"}, {"bench-graphs", "--modes"}, {"bench-verify", "--rows"},
                   {"bench-attention", "--cache"}, {"trace", "--tasks"}, {"trace-import", "--vocab"}, {"study", "--traces"},
                   {"profile", "--g1"}, {"make-story-task", "--seed"}};
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
        res r = RUN(missing[i].cmd, missing[i].opt);
        expect_usage(missing[i].cmd, &r, missing[i].opt, "needs a value");
        res_free(&r);
    }
}

/* An old spelling parses as the option it stands for: the same message for the same value
 * (after the note naming the new spelling). */
static void test_old_spellings(void **state) {
    (void)state;
    static const struct {
        const char *cmd, *old, *now, *val;
    } al[] = {
        {"make-story-task", "--tokens", "--max-tokens", "5"}, {"bench-sam", "--tokens", "--context-tokens", "5"},
        {"bench-model", "--gen", "--max-tokens", "0"},       {"bench-model", "--prompt", "--prompt-tokens", "1"},
        {"bench-graphs", "--prompt", "--prompt-tokens", "1"}, {"trace", "--topk", "--prefill-topk", "99"},
        {"trace-import", "--max-new", "--max-tokens", "0"},
    };
    for (size_t i = 0; i < sizeof al / sizeof al[0]; i++) {
        res a = RUN(al[i].cmd, al[i].old, al[i].val), b = RUN(al[i].cmd, al[i].now, al[i].val);
        expect_usage(al[i].cmd, &a, al[i].now, "deprecated");
        expect_usage(al[i].cmd, &b, al[i].now, al[i].val);
        const char *tail = strstr(a.err, "\n"); /* the note, then the message */
        assert_non_null(tail);
        assert_string_equal(tail + 1, b.err);
        res_free(&a);
        res_free(&b);
    }
    /* tokenize's short spellings -m and -f, and --opt=value */
    char tok[1024], words[1024]; /* own copies: tu_tmp's buffers rotate */
    snprintf(tok, sizeof tok, "%s", tu_model("tiny-llama", "Q8_0", 1));
    snprintf(words, sizeof words, "%s", tu_tmp("words.txt"));
    assert_int_equal(tu_write_file(words, "the cat sat", 11), 0);
    res a = RUN("tokenize", "--model", tok, "--ids", "the cat sat"), b = RUN("tokenize", "-m", tok, "--ids", "the cat sat");
    char eq[1200];
    snprintf(eq, sizeof eq, "--model=%s", tok);
    res c = RUN("tokenize", eq, "--ids", "--file", words), d = RUN("tokenize", "-m", tok, "-f", words, "--ids");
    assert_int_equal(a.rc, 0);
    assert_true(a.out[0] != 0);
    assert_int_equal(b.rc, 0);
    assert_string_equal(a.out, b.out);
    assert_int_equal(c.rc, 0);
    assert_string_equal(a.out, c.out);
    assert_int_equal(d.rc, 0);
    assert_string_equal(a.out, d.out);
    res_free(&a);
    res_free(&b);
    res_free(&c);
    res_free(&d);
}

/* The defaults: one table (sdnpu.h), read by the library's init functions, printed by the
 * program's help and used by its runs. */
static void test_defaults_are_the_librarys(void **state) {
    (void)state;
    sdnpu_request rq;
    sdnpu_request_init(&rq);
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    assert_string_equal(rq.method, SDNPU_DEFAULT_METHOD);
    assert_string_equal(rq.method, "sdnpu");
    assert_int_equal(rq.max_tokens, SDNPU_DEFAULT_MAX_TOKENS);
    assert_int_equal(rq.draft_max, SDNPU_DEFAULT_DRAFT_MAX);
    assert_int_equal(rq.prefill_topk, SDNPU_DEFAULT_PREFILL_TOPK);
    cpu_set_t set;
    CPU_ZERO(&set);
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    int cpus = CPU_COUNT(&set), want = cpus < SDNPU_DEFAULT_MAX_THREADS ? cpus : SDNPU_DEFAULT_MAX_THREADS;
    assert_int_equal(cp.n_threads, want);

    char spec[96], maxt[96], thr[96];
    snprintf(spec, sizeof spec, "(default %s", rq.method);
    snprintf(maxt, sizeof maxt, "new tokens at most (default %d)", rq.max_tokens);
    snprintf(thr, sizeof thr, "here %d)", cp.n_threads);
    const char *cmds[] = {"run", "demo", "chat"};
    for (int i = 0; i < 3; i++) {
        res r = RUN(cmds[i], "--help");
        assert_int_equal(r.rc, 0);
        const char *line = strstr(r.out, "--spec METHOD");
        assert_non_null(line);
        const char *eol = strstr(line, "\n  -"); /* the option's text, wrapped lines included */
        if (!eol) eol = line + strlen(line);
        if (!strstr(line, spec) || strstr(line, spec) > eol) fail_msg("sdnpu %s --help: --spec default is not %s:\n%.*s", cmds[i], rq.method, (int)(eol - line), line);
        if (!strstr(r.out, thr)) fail_msg("sdnpu %s --help: the default threads are not %d", cmds[i], cp.n_threads);
        if (i == 0 && !strstr(r.out, maxt)) fail_msg("sdnpu run --help: --max-tokens default is not %d", rq.max_tokens);
        res_free(&r);
    }
    res r = RUN("serve", "--help");
    assert_non_null(strstr(r.out, thr));
    res_free(&r);

    /* and used: run with no --spec and no --threads drafts with the default method on the
     * default threads (--stats-json records both) */
    setenv("SDNPU_CACHE", tu_tmpdir(), 1);
    char m[1024], js[1024];
    snprintf(m, sizeof m, "%s", tu_model("tiny-llama", "Q8_0", 1));
    snprintf(js, sizeof js, "%s", tu_tmp("stats.json"));
    r = RUN("run", "--model", m, "--prompt-ids", "1 2 3 4", "--max-tokens", "4", "--quiet", "--stats-json", js);
    if (r.rc != 0) fail_msg("run: rc %d: %s", r.rc, r.err);
    res_free(&r);
    char *txt = slurp(js);
    cJSON *j = cJSON_Parse(txt);
    free(txt);
    assert_non_null(j);
    assert_int_equal(cJSON_GetObjectItem(j, "threads")->valueint, cp.n_threads);
    cJSON *runs = cJSON_GetObjectItem(j, "runs");
    assert_int_equal(cJSON_GetArraySize(runs), 1);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(runs, 0), "method")->valuestring, rq.method);
    cJSON_Delete(j);
}

/* Usage errors of run exit 2 naming the option and the value, runtime failures 1. */
static void test_run_exit_codes(void **state) {
    (void)state;
    setenv("SDNPU_CACHE", tu_tmpdir(), 1);
    char m[1024], missing[1024];
    snprintf(m, sizeof m, "%s", tu_model("tiny-llama", "Q8_0", 1));
    snprintf(missing, sizeof missing, "%s", tu_tmp("missing.gguf"));
    res r = RUN("run", "--model", m, "--prompt-ids", "1 2", "--graphs", "nope");
    expect_usage("run --graphs nope", &r, "--graphs", "nope");
    res_free(&r);
    r = RUN("run", "--model", m, "--prompt-ids", "1 2", "--spec", "nope");
    expect_usage("run --spec nope", &r, "--spec", "nope");
    res_free(&r);
    r = RUN("run", "--model", m, "--prompt-ids", "1 2", "--max-tokens=x");
    expect_usage("run --max-tokens=x", &r, "--max-tokens", "'x'");
    res_free(&r);
    r = RUN("run", "--model", m, "--prompt-ids", "1 2", "--kernel", "nope");
    expect_usage("run --kernel nope", &r, "--kernel", "nope");
    res_free(&r);
    r = RUN("run", "--model", m, "--prompt-ids", "1 2", "-ctk", "q9");
    expect_usage("run -ctk q9", &r, "--cache-type-k", "q9");
    res_free(&r);
    /* the --stop check run, chat and serve share (cli_sampling_check) */
    r = RUN("run", "--model", m, "--prompt-ids", "1 2", "--stop", "");
    expect_usage("run --stop ''", &r, "--stop", "empty stop string");
    res_free(&r);
    r = RUN("chat", "--model", m, "--stop", "");
    expect_usage("chat --stop ''", &r, "--stop", "empty stop string");
    res_free(&r);
    r = RUN("serve", "--model", m, "--stop", "");
    expect_usage("serve --stop ''", &r, "--stop", "empty stop string");
    res_free(&r);
    r = RUN("serve", "--model", m, "--stop", "a", "--stop", "b", "--stop", "c", "--stop", "d", "--stop", "e");
    expect_usage("serve with 5 --stop", &r, "--stop", "at most 4");
    res_free(&r);
    /* the history scope: a known value, and a store to read it from (run and serve) */
    r = RUN("run", "--model", m, "--prompt-ids", "1 2", "--history-scope", "all");
    expect_usage("run --history-scope all", &r, "--history-scope", "'all'");
    res_free(&r);
    r = RUN("run", "--model", m, "--prompt-ids", "1 2", "--history-scope", "global");
    expect_usage("run --history-scope global", &r, "--history-scope", "--history");
    res_free(&r);
    r = RUN("serve", "--model", m, "--history-scope", "all");
    expect_usage("serve --history-scope all", &r, "--history-scope", "'all'");
    res_free(&r);
    r = RUN("serve", "--model", m, "--history-scope", "global");
    expect_usage("serve --history-scope global", &r, "--history-scope", "--history");
    res_free(&r);
    r = RUN("run", "--model", missing, "--prompt-ids", "1 2");
    assert_int_equal(r.rc, 1); /* a file that cannot be read: a runtime failure */
    assert_non_null(strstr(r.err, "missing.gguf"));
    res_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_of_every_command), cmocka_unit_test(test_unknown_option_every_command),
        cmocka_unit_test(test_bad_values_every_command), cmocka_unit_test(test_old_spellings),
        cmocka_unit_test(test_defaults_are_the_librarys), cmocka_unit_test(test_run_exit_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
