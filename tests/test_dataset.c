/* test_dataset.c - the task and answer loaders against hand-written fixtures: every field
 * of well-formed rows (both formats) compared with the values written in the fixture,
 * malformed rows refused with the file, line number and field named in the message, the
 * task filter, and (with ../shared) the row counts the dataset README documents. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "datasets/dataset.h"
#include "support/test_util.h"

static sdn_dataset load_ok(const char *name, const char *text) {
    sdn_dataset ds = {0};
    sdn_err err = {0};
    int rc = sdn_dataset_load_buf(&ds, name, text, strlen(text), &err);
    if (rc) fail_msg("%s: unexpected error: %s", name, err.msg);
    return ds;
}

static void test_task_rows(void **state) {
    (void)state;
    const char *text =
        "{\"id\": \"a-1\", \"task\": \"summary\", \"context\": \"Doc one.\\nLine two.\", \"prompt\": \"Summarize:\", \"reference\": null,"
        " \"source\": {\"repo\": \"x\"}, \"meta\": {\"k\": 1}}\n"
        "\n"
        "   \r\n"
        "{\"id\": \"a-2\", \"task\": \"ui\", \"group\": \"gallery\", \"context\": \"\", \"prompt\": \"Tap\", \"input\": \"full input\","
        " \"reference\": {\"id\": 3, \"action\": \"tap\"}}\r\n"
        "{\"id\": \"a-3\", \"task\": \"summary\", \"context\": \"caf\\u00e9\", \"prompt\": \"p\", \"reference\": \"gold\"}";
    sdn_dataset ds = load_ok("fx.jsonl", text);
    assert_int_equal(ds.n, 3);
    sdn_task_row *r = &ds.rows[0];
    assert_string_equal(r->id, "a-1");
    assert_string_equal(r->task, "summary");
    assert_string_equal(r->group, "summary"); /* default group = task */
    assert_string_equal(r->context, "Doc one.\nLine two.");
    assert_string_equal(r->prompt, "Summarize:");
    assert_null(r->reference);
    assert_null(r->input);
    assert_int_equal(r->line, 1);
    assert_string_equal(r->file, "fx.jsonl");
    r = &ds.rows[1];
    assert_string_equal(r->group, "gallery");
    assert_string_equal(r->context, "");
    assert_string_equal(r->input, "full input");
    assert_string_equal(r->reference, "{\"id\":3,\"action\":\"tap\"}");
    assert_int_equal(r->line, 4); /* blank lines are counted */
    r = &ds.rows[2];
    assert_string_equal(r->context, "caf\xc3\xa9");
    assert_string_equal(r->reference, "gold");
    assert_int_equal(r->line, 5);
    const char *tasks[8];
    assert_int_equal(sdn_dataset_tasks(&ds, tasks, 8), 2);
    assert_string_equal(tasks[0], "summary");
    assert_string_equal(tasks[1], "ui");
    assert_int_equal(sdn_dataset_find(&ds, "a-3"), 2);
    assert_int_equal(sdn_dataset_find(&ds, "zz"), -1);
    sdn_dataset_filter(&ds, "summary", 1);
    assert_int_equal(ds.n, 1);
    assert_string_equal(ds.rows[0].id, "a-1");
    sdn_dataset_free(&ds);
}

static void test_specbench_rows(void **state) {
    (void)state;
    const char *text = "{\"question_id\": 241, \"category\": \"summarization\", \"turns\": [\"Summarize: The cat sat.\\nIt slept.\"]}\n"
                       "{\"question_id\": 481, \"category\": \"rag\", \"turns\": [\"Passage A.\\nPassage B.\\nwho sat?\"]}\n"
                       "{\"question_id\": 81, \"category\": \"writing\", \"turns\": [\"Write a poem.\", \"Now shorter.\"]}\n";
    sdn_dataset ds = load_ok("question.jsonl", text);
    assert_int_equal(ds.n, 3);
    assert_string_equal(ds.rows[0].id, "specbench-241");
    assert_string_equal(ds.rows[0].task, "summary");
    assert_string_equal(ds.rows[0].context, "The cat sat.\nIt slept.");
    assert_string_equal(ds.rows[0].prompt, "Summarize:");
    assert_string_equal(ds.rows[0].input, "Summarize: The cat sat.\nIt slept.");
    assert_string_equal(ds.rows[1].task, "rag");
    assert_string_equal(ds.rows[1].context, "Passage A.\nPassage B.");
    assert_string_equal(ds.rows[1].prompt, "who sat?");
    assert_string_equal(ds.rows[1].input, "Passage A.\nPassage B.\nwho sat?");
    assert_string_equal(ds.rows[2].task, "writing");
    assert_string_equal(ds.rows[2].context, "");
    assert_string_equal(ds.rows[2].prompt, "Write a poem.");
    sdn_dataset_free(&ds);
}

/* Each fixture: file content, the message fragment the error must contain. */
static const struct {
    const char *text, *expect;
} k_bad[] = {
    {"{\"id\":\"a\",\"task\":\"t\",\"context\":\"c\",\"prompt\":\"p\"}\n{\"id\":\"b\",\"task\":\"t\",\"context\":\"c\"}\n", "bad.jsonl:2: field 'prompt': missing"},
    {"{\"id\":\"a\",\"task\":\"t\",\"context\":\"c\",\"prompt\":7}\n", "bad.jsonl:1: field 'prompt': expected a string"},
    {"\n\n{\"id\":\"a\",\"task\":\"t\",\"context\":\"c\",\"prompt\":\"p\",}\n", "bad.jsonl:3: not valid JSON"},
    {"{\"id\":\"a\",\"task\":\"t\",\"context\":\"c\",\"prompt\":\"p\"}\n[1,2]\n", "bad.jsonl:2: expected a JSON object"},
    {"{\"id\":\"a\",\"task\":\"\",\"context\":\"c\",\"prompt\":\"p\"}\n", "bad.jsonl:1: field 'task': empty"},
    {"{\"id\":\"\",\"task\":\"t\",\"context\":\"c\",\"prompt\":\"p\"}\n", "bad.jsonl:1: field 'id': empty"},
    {"{\"task\":\"t\",\"context\":\"c\",\"prompt\":\"p\"}\n", "bad.jsonl:1: field 'id': missing"},
    {"{\"id\":\"a\",\"task\":\"t\",\"context\":null,\"prompt\":\"p\"}\n", "bad.jsonl:1: field 'context': is null"},
    {"{\"id\":\"a\",\"task\":\"t\",\"context\":\"c\",\"prompt\":\"p\",\"group\":3}\n", "bad.jsonl:1: field 'group': expected a string"},
    {"{\"id\":\"a\",\"task\":\"t\",\"context\":\"c\",\"prompt\":\"p\"}\n{\"id\":\"a\",\"task\":\"t\",\"context\":\"c\",\"prompt\":\"q\"}\n",
     "bad.jsonl:2: field 'id': duplicate id 'a' (first seen at bad.jsonl:1)"},
    {"{\"id\":\"a\",\"task\":\"t\",\"context\":\"c\",\"prompt\":\"p\"} x\n", "bad.jsonl:1: text after the JSON value"},
    {"{\"question_id\":1,\"category\":\"rag\",\"turns\":[\"x\"]}\n{\"id\":\"a\",\"task\":\"t\",\"context\":\"c\",\"prompt\":\"p\"}\n",
     "bad.jsonl:2: row is in sdnpu task format but the file's first row is in Spec-Bench question format"},
    {"{\"question_id\":1,\"category\":\"rag\",\"turns\":\"x\"}\n", "bad.jsonl:1: field 'turns': expected a non-empty array"},
    {"{\"question_id\":1,\"category\":\"rag\",\"turns\":[\"x\", 5]}\n", "bad.jsonl:1: field 'turns': element 1 is not a string"},
    {"{\"question_id\":1.5,\"category\":\"rag\",\"turns\":[\"x\"]}\n", "bad.jsonl:1: field 'question_id': expected an integer"},
    {"{\"question_id\":-3,\"category\":\"rag\",\"turns\":[\"x\"]}\n", "bad.jsonl:1: field 'question_id': expected an integer"},
};

static void test_malformed_rows(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
        sdn_dataset ds = {0};
        sdn_err err = {0};
        int rc = sdn_dataset_load_buf(&ds, "bad.jsonl", k_bad[i].text, strlen(k_bad[i].text), &err);
        if (rc != SDN_EFORMAT || !strstr(err.msg, k_bad[i].expect))
            fail_msg("fixture %zu: rc %d, message '%s', expected '%s'", i, rc, err.msg, k_bad[i].expect);
        assert_int_equal(ds.n, 0); /* nothing of a failing file is kept */
        sdn_dataset_free(&ds);
    }
}

static void test_file_errors(void **state) {
    (void)state;
    sdn_dataset ds = {0};
    sdn_err err = {0};
    assert_int_not_equal(sdn_dataset_load(&ds, tu_tmp("does-not-exist.jsonl"), &err), SDN_OK);
    assert_non_null(strstr(err.msg, "does-not-exist.jsonl"));
    /* a good file then a bad one: the good rows stay, the error names the bad file */
    const char *good = tu_tmp("good.jsonl"), *bad = tu_tmp("bad2.jsonl");
    const char *g = "{\"id\":\"g\",\"task\":\"t\",\"context\":\"c\",\"prompt\":\"p\"}\n";
    const char *b = "{\"id\":\"h\",\"task\":\"t\",\"context\":\"c\",\"prompt\":\"p\"}\n{\"id\":\"i\",\"task\":\"t\"}\n";
    assert_int_equal(tu_write_file(good, g, strlen(g)), 0);
    assert_int_equal(tu_write_file(bad, b, strlen(b)), 0);
    sdn_err_clear(&err);
    assert_int_equal(sdn_dataset_load_file(&ds, good, &err), SDN_OK);
    assert_int_equal(sdn_dataset_load_file(&ds, bad, &err), SDN_EFORMAT);
    assert_non_null(strstr(err.msg, "bad2.jsonl:2: field 'context': missing"));
    assert_int_equal(ds.n, 1);
    sdn_dataset_free(&ds);
}

/* answers from the rows' own references: rows without one are skipped */
static void test_answers_from_references(void **state) {
    const char *rows = "{\"id\": \"a\", \"task\": \"ui\", \"context\": \"c\", \"prompt\": \"p\", \"reference\": \"tap 3\"}\n"
                       "{\"id\": \"b\", \"task\": \"ui\", \"context\": \"c\", \"prompt\": \"p\", \"reference\": null}\n"
                       "{\"id\": \"c\", \"task\": \"tweet\", \"context\": \"\", \"prompt\": \"q\", \"reference\": \"hi there\"}\n";
    sdn_dataset ds = {0};
    sdn_err e = {0};
    assert_int_equal(sdn_dataset_load_buf(&ds, "refs.jsonl", rows, strlen(rows), &e), SDN_OK);
    sdn_answers a;
    assert_int_equal(sdn_answers_from_references(&ds, "gpt-4", &a, &e), SDN_OK);
    assert_int_equal(a.n, 2);
    assert_string_equal(a.rows[0].id, "a");
    assert_string_equal(a.rows[0].output, "tap 3");
    assert_string_equal(a.rows[0].model, "gpt-4");
    assert_string_equal(a.rows[1].id, "c");
    assert_string_equal(a.rows[1].task, "tweet");
    assert_int_equal(sdn_answers_find(&a, "b"), -1);
    sdn_answers_free(&a);
    sdn_dataset_free(&ds);
}

static void test_answers(void **state) {
    (void)state;
    const char *path = tu_tmp("answers.jsonl");
    const char *text = "{\"id\":\"specbench-241\",\"task\":\"summary\",\"model_id\":\"m\",\"output\":\"Hello there.\",\"new_tokens\":4}\n"
                       "{\"question_id\":242,\"model_id\":\"m\",\"choices\":[{\"index\":0,\"turns\":[\"Second.\"],\"new_tokens\":[3]}]}\n";
    assert_int_equal(tu_write_file(path, text, strlen(text)), 0);
    sdn_answers a = {0};
    sdn_err err = {0};
    assert_int_equal(sdn_answers_load(&a, path, &err), SDN_OK);
    assert_int_equal(a.n, 2);
    assert_string_equal(a.rows[0].id, "specbench-241");
    assert_string_equal(a.rows[0].output, "Hello there.");
    assert_int_equal(a.rows[0].new_tokens, 4);
    assert_string_equal(a.rows[1].id, "specbench-242");
    assert_string_equal(a.rows[1].output, "Second.");
    assert_int_equal(a.rows[1].new_tokens, 3);
    assert_null(a.rows[1].task);
    sdn_answers_free(&a);
    const char *bad = "{\"id\":\"x\",\"output\":\"a\"}\n{\"id\":\"y\",\"choices\":[{\"turns\":[]}]}\n";
    assert_int_equal(tu_write_file(path, bad, strlen(bad)), 0);
    assert_int_equal(sdn_answers_load(&a, path, &err), SDN_EFORMAT);
    assert_non_null(strstr(err.msg, "answers.jsonl:2: field 'choices[0].turns'"));
    sdn_answers_free(&a);
}

/* The row counts ../shared/datasets/README.md documents, read through the directory loader. */
static void test_shared_datasets(void **state) {
    (void)state;
    TU_REQUIRE_SHARED();
    sdn_dataset ds = {0};
    sdn_err err = {0};
    if (sdn_dataset_load(&ds, tu_shared_path("datasets"), &err)) fail_msg("%s", err.msg);
    int summary = 0, rag = 0, ui = 0, tweet = 0;
    for (int i = 0; i < ds.n; i++) {
        summary += !strcmp(ds.rows[i].task, "summary");
        rag += !strcmp(ds.rows[i].task, "rag");
        ui += !strcmp(ds.rows[i].task, "ui");
        tweet += !strcmp(ds.rows[i].task, "tweet");
    }
    /* the task files, and longdoc/longdoc.jsonl's long documents (16 summary, 9 rag) */
    assert_int_equal(summary, 80 + 16);
    assert_int_equal(rag, 80 + 9);
    assert_int_equal(ui, 199 + 24);
    assert_int_equal(tweet, 198);
    assert_int_equal(ds.n, 80 + 80 + 223 + 198 + 25); /* model_outputs/ is not read as tasks */
    int l = sdn_dataset_find(&ds, "govreport-money-bail");
    assert_true(l >= 0);
    assert_string_equal(ds.rows[l].task, "rag");
    assert_true(strlen(ds.rows[l].context) > 8000);
    int i = sdn_dataset_find(&ds, "specbench-241");
    assert_true(i >= 0);
    assert_non_null(ds.rows[i].input);
    assert_int_equal(strncmp(ds.rows[i].input, "Summarize: ", 11), 0);
    assert_string_equal(ds.rows[i].input + 11, ds.rows[i].context);
    sdn_dataset_free(&ds);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_task_rows),      cmocka_unit_test(test_specbench_rows), cmocka_unit_test(test_malformed_rows),
        cmocka_unit_test(test_file_errors),    cmocka_unit_test(test_answers),        cmocka_unit_test(test_answers_from_references), cmocka_unit_test(test_shared_datasets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
