/* test_api.c - the public API of include/sdnpu.h, used as an app would (only sdnpu.h; the
 * test helpers just write a seeded model file): plain vs speculative output, streaming text
 * against the result and an independent detokenization, the task-group history store (lookup
 * before drafting, store after), KV reuse across requests, cancellation, conversations,
 * bad requests with their error codes and messages, and one model shared by two threads. */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "sdnpu.h"
#include "support/test_util.h"

static const char *k_doc =
    "The lighthouse on Gull Rock was built in 1871. Its lamp was repaired in 1903 and again in 1950. "
    "The council voted to repair the lamp once more and to open the lighthouse to visitors on Sundays.";

static sdnpu_model *load_tiny(void) {
    sdnpu_model *m = NULL;
    sdnpu_error e = {0};
    if (sdnpu_model_load(tu_model("tiny-llama", "Q8_0", 3), NULL, &m, &e)) fail_msg("%s", e.message);
    return m;
}

static void summary_request(sdnpu_request *r, const char *method) {
    sdnpu_request_init(r);
    r->prompt = "Summarize the document.";
    r->documents = &k_doc;
    r->n_documents = 1;
    r->method = method;
    r->max_tokens = 40;
    r->ignore_eos = 1; /* random weights: a fixed length makes every comparison cover 40 tokens */
}

typedef struct collected {
    char buf[8192];
    size_t len;
    int calls, cancel_after;
} collected;

static int collect(void *ud, const char *text, size_t len) {
    collected *c = ud;
    assert_true(c->len + len < sizeof c->buf);
    memcpy(c->buf + c->len, text, len);
    c->len += len;
    c->buf[c->len] = 0;
    return c->cancel_after > 0 && ++c->calls >= c->cancel_after;
}

static void test_version_and_status(void **state) {
    (void)state;
    assert_string_equal(sdnpu_version(), SDNPU_VERSION);
    assert_string_equal(sdnpu_status_string(SDNPU_OK), "ok");
    assert_true(strlen(sdnpu_status_string(SDNPU_EFORMAT)) > 0);
    assert_non_null(strstr(sdnpu_known_models(), "smollm2-135m-instruct"));
    assert_non_null(strstr(sdnpu_methods(), "sdnpu"));
}

static void test_load_errors(void **state) {
    (void)state;
    sdnpu_model *m = (sdnpu_model *)1;
    sdnpu_error e = {0};
    assert_int_equal(sdnpu_model_load(NULL, NULL, &m, &e), SDNPU_EINVAL);
    assert_null(m);
    assert_int_equal(sdnpu_model_load("/nonexistent/model.gguf", NULL, &m, &e), SDNPU_EIO);
    assert_int_equal(e.code, SDNPU_EIO);
    assert_non_null(strstr(e.message, "/nonexistent/model.gguf"));
    const char *junk = tu_tmp("junk.gguf");
    tu_write_file(junk, "GGUF\x03\x00\x00\x00garbage", 16);
    assert_int_equal(sdnpu_model_load(junk, NULL, &m, &e), SDNPU_EFORMAT);
    assert_non_null(strstr(e.message, "junk.gguf"));
    char path[256];
    assert_int_equal(sdnpu_model_pull("no-such-model", 1, path, sizeof path, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "smollm2-135m-instruct"));
}

static void test_info_and_tokens(void **state) {
    (void)state;
    sdnpu_model *m = load_tiny();
    sdnpu_model_info mi;
    sdnpu_model_info_init(&mi);
    sdnpu_model_get_info(m, &mi, NULL);
    assert_string_equal(mi.architecture, "llama");
    assert_int_equal(mi.n_layers, 2);
    assert_int_equal(strlen(mi.fingerprint), 16);
    assert_true(mi.max_token_bytes > 0);
    assert_string_equal(mi.tool_format, "json"); /* no chat template with a tool-call format */
    assert_true(sdnpu_model_has_tokenizer(m));
    int32_t *ids = NULL;
    int n = 0;
    char *text = NULL;
    sdnpu_error e = {0};
    assert_int_equal(sdnpu_tokenize(m, k_doc, strlen(k_doc), 0, 0, &ids, &n, &e), SDNPU_OK);
    assert_true(n > 10);
    assert_int_equal(sdnpu_detokenize(m, ids, n, &text, &e), SDNPU_OK);
    assert_string_equal(text, k_doc);
    sdnpu_free(text);
    ids[0] = mi.vocab;
    assert_int_equal(sdnpu_detokenize(m, ids, n, &text, &e), SDNPU_EINVAL);
    sdnpu_free(ids);
    char *d = sdnpu_model_describe(m, 0);
    assert_non_null(strstr(d, "llama"));
    sdnpu_free(d);
    sdnpu_model_free(m);
}

/* Every drafting method gives plain decoding's tokens; the streamed text is the result's
 * text, which is the detokenized tokens. */
static void test_generate_lossless_and_streaming(void **state) {
    (void)state;
    sdnpu_model *m = load_tiny();
    sdnpu_context *c = NULL;
    sdnpu_error e = {0};
    assert_int_equal(sdnpu_context_new(m, NULL, &c, &e), SDNPU_OK);
    sdnpu_request r;
    sdnpu_result base;
    sdnpu_result_init(&base);
    summary_request(&r, "none");
    r.reuse_kv = 0;
    assert_int_equal(sdnpu_generate(c, &r, &base, &e), SDNPU_OK);
    assert_int_equal(base.n_tokens, 40);
    assert_int_equal(base.finish, SDNPU_FINISH_LENGTH);
    assert_int_equal(base.stats.steps, 40);
    const char *methods[] = {"pld", "sam", "sam+tree", "sam+cal", "sam+reuse", "sdnpu"};
    for (size_t k = 0; k < sizeof methods / sizeof *methods; k++) {
        collected col = {0};
        summary_request(&r, methods[k]);
        r.reuse_kv = 0;
        r.draft_max = 6;
        r.on_text = collect;
        r.user_data = &col;
        sdnpu_result res;
        sdnpu_result_init(&res);
        if (sdnpu_generate(c, &r, &res, &e)) fail_msg("%s: %s", methods[k], e.message);
        assert_int_equal(res.n_tokens, base.n_tokens);
        assert_memory_equal(res.tokens, base.tokens, sizeof(int32_t) * (size_t)base.n_tokens);
        assert_string_equal(res.text, base.text);
        assert_string_equal(col.buf, res.text);
        assert_true(res.stats.steps <= 40);
        char *text = NULL;
        assert_int_equal(sdnpu_detokenize(m, res.tokens, res.n_tokens, &text, &e), SDNPU_OK);
        assert_string_equal(text, res.text);
        sdnpu_free(text);
        sdnpu_result_free(&res);
    }
    sdnpu_result_free(&base);
    sdnpu_context_free(c);
    sdnpu_model_free(m);
}

/* The task group's history: the first answer is stored, the second request drafts from it
 * (and, repeating the same answer, accepts long drafts), the output stays plain decoding's. */
static void test_history_store(void **state) {
    (void)state;
    const char *db = tu_tmp("api-history.sqlite");
    unlink(db);
    sdnpu_model *m = load_tiny();
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.history_path = db;
    sdnpu_context *c = NULL;
    sdnpu_error e = {0};
    assert_int_equal(sdnpu_context_new(m, &cp, &c, &e), SDNPU_OK);
    sdnpu_request r;
    sdnpu_result a, b, plain;
    sdnpu_result_init(&a);
    sdnpu_result_init(&b);
    sdnpu_result_init(&plain);
    summary_request(&r, "none");
    assert_int_equal(sdnpu_generate(c, &r, &plain, &e), SDNPU_OK);
    summary_request(&r, "sam");
    r.draft_max = 8;
    r.task_group = "lighthouse";
    assert_int_equal(sdnpu_generate(c, &r, &a, &e), SDNPU_OK);
    assert_int_equal(a.stats.history_answers, 0);
    assert_int_equal(a.stats.answer_stored, 1);
    assert_int_equal(sdnpu_generate(c, &r, &b, &e), SDNPU_OK);
    assert_int_equal(b.stats.history_answers, 1);
    assert_int_equal(b.stats.history_tokens, 40);
    assert_memory_equal(b.tokens, plain.tokens, sizeof(int32_t) * 40);
    assert_memory_equal(a.tokens, plain.tokens, sizeof(int32_t) * 40);
    assert_true(b.stats.steps < a.stats.steps);
    assert_true(b.stats.mean_accepted > 2.0);
    /* another group sees nothing; store_answer = 0 stores nothing */
    sdnpu_result o;
    sdnpu_result_init(&o);
    r.task_group = "other";
    r.store_answer = 0;
    assert_int_equal(sdnpu_generate(c, &r, &o, &e), SDNPU_OK);
    assert_int_equal(o.stats.history_answers, 0);
    assert_int_equal(o.stats.answer_stored, 0);
    sdnpu_result_free(&o);
    sdnpu_context_free(c);
    /* the store persists: a new context on the same file sees both stored answers */
    assert_int_equal(sdnpu_context_new(m, &cp, &c, &e), SDNPU_OK);
    r.task_group = "lighthouse";
    assert_int_equal(sdnpu_generate(c, &r, &o, &e), SDNPU_OK);
    assert_int_equal(o.stats.history_answers, 2);
    sdnpu_result_free(&o);
    /* a task group without a history store is refused */
    sdnpu_context *bare = NULL;
    assert_int_equal(sdnpu_context_new(m, NULL, &bare, &e), SDNPU_OK);
    assert_int_equal(sdnpu_generate(bare, &r, &o, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "lighthouse"));
    sdnpu_context_free(bare);
    sdnpu_result_free(&a);
    sdnpu_result_free(&b);
    sdnpu_result_free(&plain);
    sdnpu_context_free(c);
    sdnpu_model_free(m);
}

/* A request repeating the previous one's prompt prefills only what differs, with the output
 * of a fresh context. */
static void test_kv_reuse(void **state) {
    (void)state;
    sdnpu_model *m = load_tiny();
    sdnpu_context *c = NULL, *fresh = NULL;
    sdnpu_error e = {0};
    assert_int_equal(sdnpu_context_new(m, NULL, &c, &e), SDNPU_OK);
    assert_int_equal(sdnpu_context_new(m, NULL, &fresh, &e), SDNPU_OK);
    sdnpu_request r;
    sdnpu_result first, second, ref;
    sdnpu_result_init(&first);
    sdnpu_result_init(&second);
    sdnpu_result_init(&ref);
    summary_request(&r, "none");
    assert_int_equal(sdnpu_generate(c, &r, &first, &e), SDNPU_OK);
    assert_int_equal(first.stats.reused_tokens, 0);
    r.prompt = "Summarize the document in one sentence.";
    assert_int_equal(sdnpu_generate(c, &r, &second, &e), SDNPU_OK);
    assert_true(second.stats.reused_tokens > first.stats.prompt_tokens / 2);
    assert_true(second.stats.reused_tokens < second.stats.prompt_tokens);
    assert_int_equal(sdnpu_generate(fresh, &r, &ref, &e), SDNPU_OK);
    assert_int_equal(ref.stats.reused_tokens, 0);
    assert_int_equal(second.n_tokens, ref.n_tokens);
    /* KV entries computed by the decode kernels round differently than prefill's: the first
     * tokens agree in any case, the whole output on this model */
    assert_memory_equal(second.tokens, ref.tokens, sizeof(int32_t) * (size_t)ref.n_tokens);
    sdnpu_result_free(&first);
    sdnpu_result_free(&second);
    sdnpu_result_free(&ref);
    /* methods that use prefill predictions (sam+cal, sdnpu) reuse the entries too, with the
     * previous request's predictions for them; a plain request in between invalidates those */
    const char *methods[] = {"sdnpu", "sam+cal"};
    for (int k = 0; k < 2; k++) {
        summary_request(&r, methods[k]);
        r.draft_max = 6;
        assert_int_equal(sdnpu_generate(c, &r, &first, &e), SDNPU_OK);
        r.prompt = "Summarize the document in one sentence.";
        assert_int_equal(sdnpu_generate(c, &r, &second, &e), SDNPU_OK);
        assert_true(second.stats.reused_tokens > first.stats.prompt_tokens / 2);
        summary_request(&r, "none");
        r.prompt = "Summarize the document in one sentence.";
        assert_int_equal(sdnpu_generate(fresh, &r, &ref, &e), SDNPU_OK);
        assert_int_equal(second.n_tokens, ref.n_tokens);
        assert_memory_equal(second.tokens, ref.tokens, sizeof(int32_t) * (size_t)ref.n_tokens);
        sdnpu_result_free(&first);
        sdnpu_result_free(&second);
        sdnpu_result_free(&ref);
        /* plain request (no predictions), then a predicting one: nothing to reuse predictions from */
        summary_request(&r, "none");
        assert_int_equal(sdnpu_generate(c, &r, &first, &e), SDNPU_OK);
        summary_request(&r, methods[k]);
        assert_int_equal(sdnpu_generate(c, &r, &second, &e), SDNPU_OK);
        assert_int_equal(second.stats.reused_tokens, 0);
        sdnpu_result_free(&first);
        sdnpu_result_free(&second);
    }
    sdnpu_context_free(c);
    sdnpu_context_free(fresh);
    sdnpu_model_free(m);
}

/* on_progress: called before the first prefill chunk and after each one, done never falls,
 * ends at total = the prompt tokens but the last (the stats' prompt_tokens - 1) before the
 * first answer token, counts reused KV entries as done; the output is unchanged. */
typedef struct progress_log {
    int calls, first_done, last_done, last_total, monotonic, text_before_end;
    collected text;
} progress_log;

static void on_progress(void *ud, int done, int total) {
    progress_log *p = ud;
    if (p->calls == 0) p->first_done = done;
    if (p->calls && done < p->last_done) p->monotonic = 0;
    if (p->text.len) p->text_before_end = 1;
    p->last_done = done;
    p->last_total = total;
    p->calls++;
}

static int progress_text(void *ud, const char *text, size_t len) { return collect(&((progress_log *)ud)->text, text, len); }

static void test_progress(void **state) {
    (void)state;
    sdnpu_model *m = load_tiny();
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    sdnpu_context *c = NULL, *ref = NULL;
    sdnpu_error e = {0};
    assert_int_equal(sdnpu_context_new(m, &cp, &c, &e), SDNPU_OK);
    assert_int_equal(sdnpu_context_new(m, NULL, &ref, &e), SDNPU_OK);
    const char *methods[] = {"none", "sdnpu"};
    for (int k = 0; k < 2; k++) {
        sdnpu_request r;
        sdnpu_result res, plain;
        sdnpu_result_init(&res);
        sdnpu_result_init(&plain);
        summary_request(&r, methods[k]);
        assert_int_equal(sdnpu_generate(ref, &r, &plain, &e), SDNPU_OK);
        progress_log log = {.monotonic = 1};
        r.on_progress = on_progress;
        r.on_text = progress_text;
        r.user_data = &log;
        assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_OK);
        assert_true(log.calls >= 2);
        assert_true(log.monotonic);
        assert_int_equal(log.last_total, res.stats.prompt_tokens - 1);
        assert_int_equal(log.last_done, log.last_total);
        assert_int_equal(log.first_done, res.stats.reused_tokens);
        assert_false(log.text_before_end);
        assert_int_equal(res.n_tokens, plain.n_tokens);
        assert_memory_equal(res.tokens, plain.tokens, sizeof(int32_t) * (size_t)res.n_tokens);
        sdnpu_result_free(&res);
        sdnpu_result_free(&plain);
    }
    sdnpu_context_free(c);
    sdnpu_context_free(ref);
    sdnpu_model_free(m);
}

static void test_cancel(void **state) {
    (void)state;
    const char *db = tu_tmp("api-cancel.sqlite");
    unlink(db);
    sdnpu_model *m = load_tiny();
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.history_path = db;
    sdnpu_context *c = NULL;
    sdnpu_error e = {0};
    assert_int_equal(sdnpu_context_new(m, &cp, &c, &e), SDNPU_OK);
    sdnpu_request r;
    summary_request(&r, "none");
    r.task_group = "g";
    collected col = {.cancel_after = 3};
    r.on_text = collect;
    r.user_data = &col;
    sdnpu_result res;
    sdnpu_result_init(&res);
    assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_OK);
    assert_int_equal(res.finish, SDNPU_FINISH_CANCELLED);
    assert_int_equal(col.calls, 3);
    assert_true(res.n_tokens >= 3 && res.n_tokens < 40);
    assert_int_equal(res.stats.answer_stored, 0); /* a cancelled answer is not history */
    sdnpu_result_free(&res);
    /* the context goes on after a cancelled request */
    r.on_text = NULL;
    assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_OK);
    assert_int_equal(res.n_tokens, 40);
    sdnpu_result_free(&res);
    sdnpu_context_free(c);
    sdnpu_model_free(m);
}

/* A stop string ends the answer before it, at the same token for every method; the streamed
 * text never shows any part of it. */
static void test_stop_strings(void **state) {
    (void)state;
    sdnpu_model *m = load_tiny();
    sdnpu_context *c = NULL;
    sdnpu_error e = {0};
    assert_int_equal(sdnpu_context_new(m, NULL, &c, &e), SDNPU_OK);
    sdnpu_request r;
    sdnpu_result full;
    sdnpu_result_init(&full);
    summary_request(&r, "none");
    assert_int_equal(sdnpu_generate(c, &r, &full, &e), SDNPU_OK);
    size_t L = strlen(full.text);
    assert_true(L > 40);
    char stop[8];
    memcpy(stop, full.text + L / 2, 5); /* a piece from the middle of the answer */
    stop[5] = 0;
    size_t first = (size_t)(strstr(full.text, stop) - full.text);
    const char *stops[] = {"\x01never\x02", stop};
    sdnpu_result ref = {0};
    sdnpu_result_init(&ref);
    const char *methods[] = {"none", "sam", "pld", "sdnpu"};
    for (int k = 0; k < 4; k++) {
        collected col = {0};
        summary_request(&r, methods[k]);
        r.draft_max = 8;
        r.stop = stops;
        r.n_stop = 2;
        r.on_text = collect;
        r.user_data = &col;
        sdnpu_result res;
        sdnpu_result_init(&res);
        if (sdnpu_generate(c, &r, &res, &e)) fail_msg("%s: %s", methods[k], e.message);
        assert_int_equal(res.finish, SDNPU_FINISH_STOP);
        assert_int_equal(res.stop_index, 1);
        assert_int_equal(strlen(res.text), first);
        assert_memory_equal(res.text, full.text, first);
        assert_string_equal(col.buf, res.text);
        assert_true(res.n_tokens < full.n_tokens);
        if (k == 0) ref = res;
        else {
            assert_int_equal(res.n_tokens, ref.n_tokens);
            assert_memory_equal(res.tokens, ref.tokens, sizeof(int32_t) * (size_t)ref.n_tokens);
            sdnpu_result_free(&res);
        }
    }
    /* the tokens go as far as the stop string (the streaming detokenizer may release a
     * token's text one token later, so they can hold one more) */
    char *text = NULL;
    assert_int_equal(sdnpu_detokenize(m, ref.tokens, ref.n_tokens, &text, &e), SDNPU_OK);
    assert_non_null(strstr(text, stop));
    sdnpu_free(text);
    assert_int_equal(sdnpu_detokenize(m, ref.tokens, ref.n_tokens - 2, &text, &e), SDNPU_OK);
    assert_null(strstr(text, stop));
    sdnpu_free(text);
    const char *empty[] = {""};
    r.stop = empty;
    r.n_stop = 1;
    assert_int_equal(sdnpu_generate(c, &r, NULL, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "stop[0]"));
    sdnpu_result_free(&ref);
    sdnpu_result_free(&full);
    sdnpu_context_free(c);
    sdnpu_model_free(m);
}

/* Repetition penalty and min-p: greedy speculative output equals plain decoding's under the
 * penalty (each tree row penalized with its own path), and the penalty does change it. */
static void test_penalty_lossless(void **state) {
    (void)state;
    const char *db = tu_tmp("api-penalty.sqlite");
    unlink(db);
    sdnpu_model *m = load_tiny();
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.history_path = db;
    sdnpu_context *c = NULL;
    sdnpu_error e = {0};
    assert_int_equal(sdnpu_context_new(m, &cp, &c, &e), SDNPU_OK);
    sdnpu_request r;
    sdnpu_result base, pen;
    sdnpu_result_init(&base);
    sdnpu_result_init(&pen);
    summary_request(&r, "none");
    r.max_tokens = 64;
    assert_int_equal(sdnpu_generate(c, &r, &base, &e), SDNPU_OK);
    r.repeat_penalty = 1.8f;
    r.repeat_last_n = 32;
    r.min_p = 0.1f;          /* no effect on greedy decoding */
    r.task_group = "penalized"; /* stored: the drafts below replay it, so long paths get verified */
    assert_int_equal(sdnpu_generate(c, &r, &pen, &e), SDNPU_OK);
    assert_int_equal(pen.n_tokens, 64);
    assert_true(memcmp(pen.tokens, base.tokens, sizeof(int32_t) * 64) != 0);
    const char *methods[] = {"pld", "sam", "sam+tree", "sam+cal", "sam+reuse", "sdnpu"};
    for (int k = 0; k < 6; k++) {
        summary_request(&r, methods[k]);
        r.max_tokens = 64;
        r.repeat_penalty = 1.8f;
        r.repeat_last_n = 32;
        r.draft_max = 8;
        r.draft_branch = 3;
        r.task_group = "penalized";
        r.store_answer = 0;
        sdnpu_result res;
        sdnpu_result_init(&res);
        if (sdnpu_generate(c, &r, &res, &e)) fail_msg("%s: %s", methods[k], e.message);
        assert_int_equal(res.n_tokens, 64);
        assert_memory_equal(res.tokens, pen.tokens, sizeof(int32_t) * 64);
        if (strcmp(methods[k], "pld") != 0) assert_true(res.stats.mean_accepted > 2.0); /* long verified paths */
        sdnpu_result_free(&res);
    }
    r.repeat_penalty = -1;
    assert_int_equal(sdnpu_generate(c, &r, NULL, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "repeat_penalty"));
    r.repeat_penalty = 0;
    r.min_p = 2;
    assert_int_equal(sdnpu_generate(c, &r, NULL, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "min_p"));
    sdnpu_result_free(&base);
    sdnpu_result_free(&pen);
    sdnpu_context_free(c);
    sdnpu_model_free(m);
}

static void test_messages(void **state) {
    (void)state;
    sdnpu_model *m = load_tiny();
    sdnpu_message msgs[] = {{"user", "What year was the lighthouse built?"}, {"assistant", "In 1871."}, {"user", "And repaired?"}};
    sdnpu_request r;
    sdnpu_request_init(&r);
    r.messages = msgs;
    r.n_messages = 3;
    char *text = NULL;
    sdnpu_error e = {0};
    assert_int_equal(sdnpu_render_prompt(m, &r, &text, &e), SDNPU_OK);
    /* no chat template in this file: the plain rendering */
    const char *a = strstr(text, "What year"), *b = strstr(text, "In 1871."), *c3 = strstr(text, "And repaired?");
    assert_true(a && b && c3 && a < b && b < c3);
    sdnpu_free(text);
    sdnpu_context *c = NULL;
    assert_int_equal(sdnpu_context_new(m, NULL, &c, &e), SDNPU_OK);
    r.max_tokens = 8;
    r.ignore_eos = 1;
    sdnpu_result res;
    sdnpu_result_init(&res);
    assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_OK);
    assert_int_equal(res.n_tokens, 8);
    sdnpu_result_free(&res);
    sdnpu_context_free(c);
    sdnpu_model_free(m);
}

static void test_bad_requests(void **state) {
    (void)state;
    sdnpu_model *m = load_tiny();
    sdnpu_context *c = NULL;
    sdnpu_error e = {0};
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.n_threads = -1;
    assert_int_equal(sdnpu_context_new(m, &cp, &c, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "n_threads"));
    cp.n_threads = 1;
    cp.graphs = "sideways";
    assert_int_equal(sdnpu_context_new(m, &cp, &c, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "graphs"));
    assert_int_equal(sdnpu_context_new(m, NULL, &c, &e), SDNPU_OK);
    sdnpu_request r;
    sdnpu_result res;
    sdnpu_result_init(&res);
    sdnpu_request_init(&r);
    assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_EINVAL); /* nothing to answer */
    assert_non_null(strstr(e.message, "prompt"));
    summary_request(&r, "telepathy");
    assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "telepathy"));
    assert_int_equal(sdnpu_check_method("telepathy", &e), SDNPU_EINVAL);
    assert_int_equal(sdnpu_check_method("sam", &e), SDNPU_OK);
    const char *params[] = {"sdnpu.follow=0.7", "warp.speed=9"};
    summary_request(&r, "sdnpu");
    r.params = params;
    r.n_params = 2;
    assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "warp.speed"));
    assert_int_equal(sdnpu_check_param("sdnpu.follow=0.7", &e), SDNPU_OK);
    assert_int_equal(sdnpu_check_param("sdnpu.follow", &e), SDNPU_EINVAL);
    summary_request(&r, "none");
    r.temperature = -1;
    assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "temperature"));
    summary_request(&r, "none");
    int32_t ids[] = {1, 2, 3};
    r.prompt_ids = ids;
    r.n_prompt_ids = 3;
    assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_EINVAL); /* prompt and prompt_ids */
    r.prompt = NULL;
    r.documents = NULL;
    r.n_documents = 0;
    ids[1] = 1 << 30;
    assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "prompt_ids[1]"));
    ids[1] = 2;
    assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_OK);
    sdnpu_result_free(&res);
    /* a document longer than the context */
    sdnpu_context *small = NULL;
    cp.graphs = NULL;
    cp.n_ctx = 32;
    assert_int_equal(sdnpu_context_new(m, &cp, &small, &e), SDNPU_OK);
    summary_request(&r, "none");
    assert_int_equal(sdnpu_generate(small, &r, &res, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "context of 32"));
    sdnpu_context_free(small);
    sdnpu_context_free(c);
    sdnpu_model_free(m);
}

/* One model, two contexts in two threads at once: each gets the single-threaded answer. */
typedef struct job {
    sdnpu_model *m;
    const char *method;
    sdnpu_result res;
    int rc;
} job;

static void *run_job(void *arg) {
    job *j = arg;
    sdnpu_result_init(&j->res);
    sdnpu_context *c = NULL;
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.n_threads = 1;
    j->rc = sdnpu_context_new(j->m, &cp, &c, NULL);
    sdnpu_request r;
    summary_request(&r, j->method);
    r.draft_max = 4;
    for (int i = 0; i < 3 && !j->rc; i++) {
        sdnpu_result_free(&j->res);
        j->rc = sdnpu_generate(c, &r, &j->res, NULL);
    }
    sdnpu_context_free(c);
    return NULL;
}

static void test_shared_model_threads(void **state) {
    (void)state;
    sdnpu_model *m = load_tiny();
    job ref = {.m = m, .method = "none"};
    run_job(&ref);
    assert_int_equal(ref.rc, SDNPU_OK);
    job jobs[2] = {{.m = m, .method = "none"}, {.m = m, .method = "sam"}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, run_job, &jobs[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(jobs[i].rc, SDNPU_OK);
        assert_int_equal(jobs[i].res.n_tokens, ref.res.n_tokens);
        assert_memory_equal(jobs[i].res.tokens, ref.res.tokens, sizeof(int32_t) * (size_t)ref.res.n_tokens);
        sdnpu_result_free(&jobs[i].res);
    }
    sdnpu_result_free(&ref.res);
    sdnpu_model_free(m);
}

/* sdnpu_context_n_ctx: the default (min(trained length, 8192)) and an explicit n_ctx; a prompt
 * of more tokens than that is refused with SDNPU_EINVAL. */
static void test_context_n_ctx(void **state) {
    (void)state;
    sdnpu_model *m = load_tiny();
    sdnpu_model_info mi;
    sdnpu_model_info_init(&mi);
    sdnpu_model_get_info(m, &mi, NULL);
    sdnpu_context *c = NULL;
    sdnpu_error e = {0};
    assert_int_equal(sdnpu_context_new(m, NULL, &c, &e), SDNPU_OK);
    assert_int_equal(sdnpu_context_n_ctx(c), mi.context_length < SDNPU_DEFAULT_N_CTX ? mi.context_length : SDNPU_DEFAULT_N_CTX);
    sdnpu_context_free(c);
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.n_ctx = 48;
    assert_int_equal(sdnpu_context_new(m, &cp, &c, &e), SDNPU_OK);
    assert_int_equal(sdnpu_context_n_ctx(c), 48);
    sdnpu_request r;
    summary_request(&r, "none"); /* the document alone is more than 48 tokens */
    assert_int_equal(sdnpu_generate(c, &r, NULL, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "context"));
    sdnpu_context_free(c);
    sdnpu_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_and_status),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_info_and_tokens),
        cmocka_unit_test(test_generate_lossless_and_streaming),
        cmocka_unit_test(test_history_store),
        cmocka_unit_test(test_kv_reuse),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_progress),
        cmocka_unit_test(test_stop_strings),
        cmocka_unit_test(test_penalty_lossless),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_shared_model_threads),
        cmocka_unit_test(test_context_n_ctx),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
