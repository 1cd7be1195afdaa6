/* test_bench.c - the benchmark and trace-recording harness end to end on the real
 * TinyStories model: a generated story task, the benchmark over every registered method
 * (every greedy output must equal plain decoding's), a recorded trace whose study (with the
 * simulated history) gives the same acceptance the benchmark measured live with the real
 * history store for every replayable method, the history
 * store filled by the benchmark (one answer per request, loaded back by the next run), and
 * rows too long for the context skipped and counted; every method at several budgets with
 * KV reuse across a request's runs giving the same drafting as fresh prefills, and --budgets
 * parsing. Also the first-sentence rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "datasets/bench.h"
#include "datasets/dataset.h"
#include "runtime/history.h"
#include "datasets/story_task.h"
#include "datasets/study.h"
#include "datasets/trace.h"
#include "draft/methods.h"
#include "modelfile/model.h"
#include "support/test_util.h"

static void test_first_sentence(void **state) {
    (void)state;
    char *s = sdn_first_sentence("  Once upon a time, Tom ran. He fell.");
    assert_string_equal(s, "Once upon a time, Tom ran.");
    free(s);
    s = sdn_first_sentence("She said, \"Hi!\" Then left.");
    assert_string_equal(s, "She said, \"Hi!\"");
    free(s);
    s = sdn_first_sentence("Mr.Smith 3.5 apples? yes");
    assert_string_equal(s, "Mr.Smith 3.5 apples?");
    free(s);
    s = sdn_first_sentence("one two three four five six seven eight nine ten eleven twelve thirteen");
    assert_string_equal(s, "one two three four five six seven eight nine ten eleven twelve");
    free(s);
}

static char **registry(int *n) {
    static char names[32][32];
    static char *ptrs[33];
    int k = 0;
    const char *p = sdn_method_list();
    while (*p && k < 32) {
        while (*p == ' ' || *p == ',') p++;
        int l = 0;
        while (p[l] && p[l] != ',') l++;
        snprintf(names[k], sizeof names[k], "%.*s", l, p);
        p += l;
        if (strcmp(names[k], "none") != 0) ptrs[k] = names[k], k++;
    }
    *n = k;
    return ptrs;
}

static void test_bench_story(void **state) {
    (void)state;
    TU_REQUIRE_SHARED();
    sdn_err err = {0};
    sdn_model *m = NULL;
    m = tu_load_stories();
    /* the generated task: 5 stories */
    const char *task = tu_tmp("stories.jsonl");
    FILE *f = fopen(task, "w");
    sdn_story_opts so = {.n = 5, .seed = 3, .temp = 0.8f, .story_tokens = 200, .min_tokens = 60, .threads = 1};
    if (sdn_story_task_write(m, "stories260K.bin", &so, f, &err)) fail_msg("%s", err.msg);
    fclose(f);
    sdn_dataset ds = {0};
    if (sdn_dataset_load(&ds, task, &err)) fail_msg("%s", err.msg);
    assert_int_equal(ds.n, 5);
    for (int i = 0; i < ds.n; i++) {
        assert_string_equal(ds.rows[i].task, "story");
        assert_int_equal(strncmp(ds.rows[i].context, ds.rows[i].prompt, strlen(ds.rows[i].prompt)), 0);
    }
    /* one row too long for the context */
    char *longctx = malloc(20000);
    for (int i = 0; i < 19999; i++) longctx[i] = "abc def "[i % 8];
    longctx[19999] = 0;
    sdn_task_row extra = {.id = strdup("too-long"), .task = strdup("story"), .group = strdup("story"), .context = longctx,
                          .prompt = strdup("Go."), .file = strdup("mem"), .line = 1};
    ds.rows = realloc(ds.rows, sizeof *ds.rows * (ds.n + 1));
    ds.rows[ds.n++] = extra;
    ds.cap = ds.n;

    int n_methods;
    char **methods = registry(&n_methods);
    const char *hpath = tu_tmp("bench-hist.db");
    unlink(hpath);
    sdn_history *h = NULL;
    if (sdn_history_open(hpath, &h, &err)) fail_msg("%s", err.msg);
    FILE *log = fopen(tu_tmp("bench.log"), "w");
    sdn_bench_opts o = {.methods = (const char *const *)methods, .n_methods = n_methods, .max_tokens = 64, .threads = 1, .n_ctx = 512,
                        .caps = {.max_nodes = 16, .max_depth = 16, .max_branch = 4},
                        .history = h, .log = log};
    sdn_bench_result br;
    if (sdn_bench_run(m, &ds, &o, &br, &err)) fail_msg("%s", err.msg);
    assert_int_equal(br.n_requests, 5);
    assert_int_equal(br.skipped, 1);
    assert_int_equal(br.mismatches, 0);
    assert_int_equal(br.n_cells, 1 + n_methods);
    assert_string_equal(br.cells[0].method, "none");
    /* one prefill per request (KV reuse); it is counted on the plain row only */
    assert_int_equal(br.prefills, 5);
    for (int i = 0; i < br.n_cells; i++) {
        assert_int_equal(br.cells[i].c.requests, 5);
        assert_int_equal(br.cells[i].c.out_tokens, br.cells[0].c.out_tokens);
        assert_true(br.cells[i].t_decode > 0);
        assert_true(i == 0 ? br.cells[i].t_prefill > 0 : br.cells[i].t_prefill == 0);
        assert_true(br.cells[i].plain_t_decode > 0);
        assert_string_equal(br.cells[i].budget, i == 0 ? "" : "16"); /* caps.max_nodes alone: that one budget */
    }
    long answers;
    assert_int_equal(sdn_history_count(h, "story", NULL, &answers, &err), SDN_OK);
    assert_int_equal(answers, 5);

    /* a trace of the same requests; its study must give what the benchmark measured live */
    const char *tpath = tu_tmp("bench.trace.jsonl");
    f = fopen(tpath, "w");
    sdn_bench_opts to = {.max_tokens = 64, .threads = 1, .n_ctx = 512, .preds_k = 8, .log = log};
    int written, skipped;
    if (sdn_trace_record(m, "stories260K.bin", "tok512.bin", &ds, &to, f, &written, &skipped, &err)) fail_msg("%s", err.msg);
    fclose(f);
    assert_int_equal(written, 5);
    assert_int_equal(skipped, 1);
    sdn_trace tr = {0};
    if (sdn_trace_load(&tr, tpath, &err)) fail_msg("%s", err.msg);
    const char **sm = malloc(sizeof *sm * (n_methods + 1));
    int ns = 0;
    sm[ns++] = "none";
    for (int k = 0; k < n_methods; k++)
        if (!sdn_method_needs_model_feedback(methods[k])) sm[ns++] = methods[k];
    /* the benchmark ran with the history store: requests drafted also from earlier answers of
       the group; the study simulates the same store */
    /* the study and the bench default to different caps (the whole budget vs the engine's 4
     * draft tokens): compare them with the bench's caps given explicitly to both */
    sdn_study_opts sopt = {.methods = sm, .n_methods = ns, .history = 1, .caps = o.caps};
    sdn_result_cell *cells;
    int nc;
    if (sdn_study_run(&tr, &sopt, &cells, &nc, &err)) fail_msg("%s", err.msg);
    assert_int_equal(nc, ns);
    for (int k = 0; k < ns; k++) {
        const sdn_result_cell *b = NULL;
        for (int i = 0; i < br.n_cells; i++)
            if (!strcmp(br.cells[i].method, sm[k])) b = &br.cells[i];
        assert_non_null(b);
        if (cells[k].c.steps != b->c.steps || cells[k].c.accepted != b->c.accepted)
            fail_msg("%s: study %ld steps / %ld accepted, bench %ld / %ld", sm[k], cells[k].c.steps, cells[k].c.accepted, b->c.steps,
                     b->c.accepted);
        assert_int_equal(cells[k].c.out_tokens, b->c.out_tokens);
        assert_int_equal(cells[k].c.drafted, b->c.drafted);
    }
    free(cells);
    sdn_trace_free(&tr);
    free(sm);

    /* a second run with the history: every story request now also drafts from the answers
       of the first run, which are the same outputs - SAM must accept far more */
    sdn_dataset_filter(&ds, NULL, 0);
    const char *only_sam[] = {"sam"};
    sdn_bench_opts o2 = o;
    o2.methods = only_sam;
    o2.n_methods = 1;
    sdn_bench_result br2;
    if (sdn_bench_run(m, &ds, &o2, &br2, &err)) fail_msg("%s", err.msg);
    const sdn_result_cell *sam1 = NULL;
    for (int i = 0; i < br.n_cells; i++)
        if (!strcmp(br.cells[i].method, "sam")) sam1 = &br.cells[i];
    print_message("sam mean accepted: %.3f in the first run, %.3f in the second (all first-run answers in the history)\n", sdn_study_mean_accepted(&sam1->c),
                  sdn_study_mean_accepted(&br2.cells[1].c));
    assert_int_equal(br2.mismatches, 0);
    assert_true(sdn_study_mean_accepted(&br2.cells[1].c) > sdn_study_mean_accepted(&sam1->c) + 1.0);
    assert_int_equal(sdn_history_count(h, "story", NULL, &answers, &err), SDN_OK);
    assert_int_equal(answers, 10);
    sdn_bench_result_free(&br2);

    sdn_bench_result_free(&br);
    sdn_history_close(h);
    fclose(log);
    sdn_dataset_free(&ds);
    sdn_model_free(m);
}

static void test_parse_budgets(void **state) {
    (void)state;
    int b[8], n;
    sdn_err e = {0};
    assert_int_equal(sdn_bench_parse_budgets("default", b, 8, &n, &e), SDN_OK);
    assert_int_equal(n, 1);
    assert_int_equal(b[0], SDN_BENCH_DEFAULT_BUDGET);
    assert_int_equal(sdn_bench_parse_budgets("default,4, 16 ,63", b, 8, &n, &e), SDN_OK);
    assert_int_equal(n, 4);
    assert_int_equal(b[1], 4);
    assert_int_equal(b[2], 16);
    assert_int_equal(b[3], 63);
    const char *bad[] = {"", "0", "64", "4,,8", "4,x", "defaults", "-1", "4,4", "1,2,3,4,5,6,7,8,9", "8,"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&e, 0, sizeof e);
        if (sdn_bench_parse_budgets(bad[i], b, 8, &n, &e) != SDN_EINVAL) fail_msg("'%s' accepted", bad[i]);
        assert_non_null(strstr(e.msg, "--budgets"));
    }
}

/* Every method at every budget (the engine's default and two fixed ones): one cell each
 * with its budget, outputs equal to plain decoding's; with KV reuse one prefill per request,
 * and the same drafting (steps, draft and accepted tokens of every cell) as when every run
 * prefills its prompt itself. */
static void test_bench_budgets_reuse(void **state) {
    (void)state;
    TU_REQUIRE_SHARED();
    sdn_err err = {0};
    sdn_model *m = tu_load_stories();
    const char *task = tu_tmp("stories-b.jsonl");
    FILE *f = fopen(task, "w");
    sdn_story_opts so = {.n = 3, .seed = 5, .temp = 0.8f, .story_tokens = 160, .min_tokens = 60, .threads = 1};
    if (sdn_story_task_write(m, "stories260K.bin", &so, f, &err)) fail_msg("%s", err.msg);
    fclose(f);
    sdn_dataset ds = {0};
    if (sdn_dataset_load(&ds, task, &err)) fail_msg("%s", err.msg);
    const char *methods[] = {"pld", "sam+cal", "sdnpu"};
    const int budgets[] = {SDN_BENCH_DEFAULT_BUDGET, 2, 8};
    FILE *log = fopen(tu_tmp("bench-b.log"), "w");
    sdn_bench_opts o = {.methods = methods, .n_methods = 3, .budgets = budgets, .n_budgets = 3, .max_tokens = 48, .threads = 1,
                        .n_ctx = 512, .log = log, .curve_only = 1}; /* the live cost correction depends on timing */
    sdn_bench_result r[2];
    for (int fresh = 0; fresh < 2; fresh++) {
        o.fresh_prefill = fresh;
        if (sdn_bench_run(m, &ds, &o, &r[fresh], &err)) fail_msg("%s", err.msg);
        assert_int_equal(r[fresh].n_requests, 3);
        assert_int_equal(r[fresh].mismatches, 0);
        assert_int_equal(r[fresh].n_cells, 1 + 3 * 3);
        assert_int_equal(r[fresh].prefills, fresh ? 3 * (1 + 3 * 3) : 3);
        assert_true(r[fresh].have_curve);
    }
    static const char *labels[] = {"default", "2", "8"};
    for (int i = 0; i < r[0].n_cells; i++) {
        const sdn_result_cell *a = &r[0].cells[i], *b = &r[1].cells[i];
        assert_string_equal(a->method, i ? methods[(i - 1) / 3] : "none");
        assert_string_equal(a->budget, i ? labels[(i - 1) % 3] : "");
        assert_string_equal(a->budget, b->budget);
        assert_int_equal(a->c.out_tokens, r[0].cells[0].c.out_tokens);
        if (a->c.steps != b->c.steps || a->c.drafted != b->c.drafted || a->c.accepted != b->c.accepted)
            fail_msg("%s@%s: %ld steps / %ld drafted / %ld accepted with KV reuse, %ld / %ld / %ld without", a->method, a->budget, a->c.steps,
                     a->c.drafted, a->c.accepted, b->c.steps, b->c.drafted, b->c.accepted);
        /* fixed budgets are never exceeded; the default's budgets come from the curve */
        long over = 0, any = 0;
        for (int k = 0; k < SDN_STUDY_DRAFT_HIST; k++) {
            any += a->budget_hist[k];
            if (i && strcmp(a->budget, "default") && k > atoi(a->budget)) over += a->c.draft_hist[k] + a->budget_hist[k];
        }
        assert_int_equal(over, 0);
        assert_true(i == 0 ? any == 0 : any == a->c.steps);
        assert_true(i == 0 ? a->t_prefill > 0 : a->t_prefill == 0); /* the request's one prefill on the plain row */
        assert_true(b->t_prefill > 0);                                  /* every run prefilled */
    }
    sdn_bench_result_free(&r[0]);
    sdn_bench_result_free(&r[1]);
    fclose(log);
    sdn_dataset_free(&ds);
    sdn_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_sentence),
        cmocka_unit_test(test_parse_budgets),
        cmocka_unit_test(test_bench_story),
        cmocka_unit_test(test_bench_budgets_reuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
