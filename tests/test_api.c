/* test_api.c - the public API of include/sdnpu.h, used as an app would (only sdnpu.h, and
 * sdnpu_experimental.h for the graph runtime and the prefill matmuls; the test helpers just
 * write a seeded model file): plain vs speculative output, streaming text
 * against the result and an independent detokenization, the task-group history store (lookup
 * before drafting, store after), KV reuse across requests, cancellation, conversations,
 * bad requests with their error codes and messages, and one model shared by two threads;
 * then the contract: every error code each function documents, provoked, with the state of
 * the objects after it, the struct_size rules and the log callback. (It also uses sqlite3 to
 * damage a history row.) */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <sqlite3.h>

#include "sdnpu.h"
#include "sdnpu_experimental.h"
#include "support/test_util.h"
#include "tools/tools.h" /* sdn_tool_global_options: back to the program's settings after a test changed them */

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
    /* the global scope: a new group drafts from the other groups' answers too, and the answer
     * is plain decoding's whatever it drafted from */
    r.task_group = "newcomer";
    r.history_scope = "global";
    assert_int_equal(sdnpu_generate(c, &r, &o, &e), SDNPU_OK);
    assert_int_equal(o.stats.history_answers, 2);
    assert_memory_equal(o.tokens, plain.tokens, sizeof(int32_t) * 40);
    assert_true(o.stats.mean_accepted > 2.0);
    sdnpu_result_free(&o);
    r.task_group = NULL; /* global without a group: every answer of the model, none stored */
    assert_int_equal(sdnpu_generate(c, &r, &o, &e), SDNPU_OK);
    assert_int_equal(o.stats.history_answers, 2);
    assert_int_equal(o.stats.answer_stored, 0);
    sdnpu_result_free(&o);
    r.history_scope = "everything";
    assert_int_equal(sdnpu_generate(c, &r, &o, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "history_scope"));
    sdnpu_result_free(&o);
    r.history_scope = NULL;
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
    r.task_group = NULL; /* ... and so is the global scope */
    r.history_scope = "global";
    assert_int_equal(sdnpu_generate(bare, &r, &o, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "history_scope"));
    r.history_scope = NULL;
    sdnpu_context_free(bare);
    sdnpu_result_free(&a);
    sdnpu_result_free(&b);
    sdnpu_result_free(&plain);
    sdnpu_context_free(c);
    sdnpu_model_free(m);
}

/* The model's candidate table (sam+model, sdnpu): greedy answers equal plain decoding with a
 * fresh table, a learned one, one loaded from the history store and after a damaged stored
 * one (reported, replaced); the table is stored with the history store and survives a new
 * model and context (the loaded one drafts the repeat in fewer steps); a sampled request with
 * a seed gives the same answer before and after the model learned. */
static long candidates_bytes(const char *db, const char *fp) {
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    long n = -1;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(h, "SELECT length(data) FROM model_candidates WHERE model_fp=?", -1, &st, NULL), SQLITE_OK);
    sqlite3_bind_text(st, 1, fp, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return n;
}

static void test_model_candidates(void **state) {
    (void)state;
    const char *db = tu_tmp("api-candidates.sqlite");
    unlink(db);
    sdnpu_model *m = load_tiny();
    sdnpu_model_info info;
    sdnpu_model_info_init(&info);
    assert_int_equal(sdnpu_model_get_info(m, &info, NULL), SDNPU_OK);
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.history_path = db;
    sdnpu_context *c = NULL;
    sdnpu_error e = {0};
    assert_int_equal(sdnpu_context_new(m, &cp, &c, &e), SDNPU_OK);
    sdnpu_request r;
    sdnpu_result plain, a, b, s1, s2;
    sdnpu_result_init(&plain), sdnpu_result_init(&a), sdnpu_result_init(&b), sdnpu_result_init(&s1), sdnpu_result_init(&s2);
    summary_request(&r, "none");
    assert_int_equal(sdnpu_generate(c, &r, &plain, &e), SDNPU_OK);
    /* sampled, seed 7, before the model learned anything */
    summary_request(&r, "sam+model");
    r.temperature = 1.0f, r.seed = 7, r.draft_max = 8;
    assert_int_equal(sdnpu_generate(c, &r, &s1, &e), SDNPU_OK);
    summary_request(&r, "sam+model");
    r.draft_max = 8;
    assert_int_equal(sdnpu_generate(c, &r, &a, &e), SDNPU_OK);
    assert_memory_equal(a.tokens, plain.tokens, sizeof(int32_t) * 40);
    long len = candidates_bytes(db, info.fingerprint);
    assert_int_equal(len, 8 + 4 + 4 + 8 + 8 * 8 + 4L * info.vocab * 8 + 8); /* stored: draft/recycle.h's form, K = 8 */
    r.temperature = 1.0f, r.seed = 7;
    assert_int_equal(sdnpu_generate(c, &r, &s2, &e), SDNPU_OK); /* after it learned: the same answer */
    assert_string_equal(s1.text, s2.text);
    sdnpu_context_free(c);
    sdnpu_model_free(m);
    /* a new model and context: the table comes back from the store */
    m = load_tiny();
    assert_int_equal(sdnpu_context_new(m, &cp, &c, &e), SDNPU_OK);
    summary_request(&r, "sam+model");
    r.draft_max = 8;
    assert_int_equal(sdnpu_generate(c, &r, &b, &e), SDNPU_OK);
    assert_memory_equal(b.tokens, plain.tokens, sizeof(int32_t) * 40);
    print_message("candidate table: %d steps with a fresh table, %d with the stored one\n", a.stats.steps, b.stats.steps);
    assert_true(b.stats.steps < a.stats.steps);
    sdnpu_context_free(c);
    sdnpu_model_free(m);
    /* a damaged stored table: reported and replaced, the answer unchanged */
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_exec(h, "UPDATE model_candidates SET data = substr(data, 1, 100)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
    m = load_tiny();
    assert_int_equal(sdnpu_context_new(m, &cp, &c, &e), SDNPU_OK);
    sdnpu_result_free(&b);
    sdnpu_result_init(&b);
    assert_int_equal(sdnpu_generate(c, &r, &b, &e), SDNPU_OK);
    assert_memory_equal(b.tokens, plain.tokens, sizeof(int32_t) * 40);
    assert_int_equal(candidates_bytes(db, info.fingerprint), len); /* replaced by a whole table */
    sdnpu_context_free(c);
    sdnpu_model_free(m);
    sdnpu_result_free(&plain), sdnpu_result_free(&a), sdnpu_result_free(&b), sdnpu_result_free(&s1), sdnpu_result_free(&s2);
}

/* on_step: what every decode step committed and where each token came from. */
typedef struct steps_seen {
    int32_t tok[512];
    unsigned char src[512];
    size_t end[512];
    int n, steps, bad_step, cut_step, stop_after;
    collected text;
} steps_seen;

static int on_step(void *ud, const sdnpu_step *st) {
    steps_seen *s = ud;
    if (st->step != s->steps + 1 || st->n_tokens < 1 || s->n + st->n_tokens > 512) s->bad_step = 1;
    for (int i = 0; i < st->n_tokens && s->n < 512; i++) {
        /* the accepted draft tokens, then the model's own: only the last may be SDNPU_SOURCE_MODEL */
        if (i < st->n_tokens - 1 && st->sources[i] == SDNPU_SOURCE_MODEL) s->bad_step = 1;
        if (st->sources[i] > SDNPU_SOURCE_RECYCLED) s->bad_step = 1;
        s->tok[s->n] = st->tokens[i], s->src[s->n] = st->sources[i], s->end[s->n] = st->text_end[i];
        s->n++;
    }
    if (st->sources[st->n_tokens - 1] != SDNPU_SOURCE_MODEL) s->cut_step++; /* only the last step may end so */
    s->steps++;
    return s->stop_after > 0 && s->steps >= s->stop_after;
}

static int text_collect(void *ud, const char *text, size_t len) { return collect(&((steps_seen *)ud)->text, text, len); }

/* Does the pair (a, b) occur at positions (q - 1, q) of seq for some q in [from, to)? */
static int pair_in(const int32_t *seq, int from, int to, int32_t a, int32_t b) {
    for (int q = from > 1 ? from : 1; q < to; q++)
        if (seq[q - 1] == a && seq[q] == b) return 1;
    return 0;
}

/* Every method's steps against the result (tokens, step count, accepted tokens, text ends)
 * and each accepted draft token's source against a brute-force look at where it could have
 * been read: the pair (previous token, token) must occur in that source (the prompt, the
 * answer before it, the task group's earlier answer). The drafters read a continuation after
 * a match that ends with the previous token, so a wrong label fails the check. */
static void test_step_sources(void **state) {
    (void)state;
    const char *db = tu_tmp("api-steps.sqlite");
    unlink(db);
    sdnpu_model *m = load_tiny();
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.history_path = db;
    sdnpu_context *c = NULL;
    sdnpu_error e = {0};
    assert_int_equal(sdnpu_context_new(m, &cp, &c, &e), SDNPU_OK);
    char doc[1024];
    snprintf(doc, sizeof doc, "Document:\n%s\n\nSummarize the document.", k_doc);
    int32_t *ids = NULL, seq[1024];
    int n_ids = 0;
    assert_int_equal(sdnpu_tokenize(m, doc, strlen(doc), 1, 0, &ids, &n_ids, &e), SDNPU_OK);
    assert_true(n_ids + 64 < 1024);
    memcpy(seq, ids, sizeof(int32_t) * (size_t)n_ids);
    sdnpu_request r;
    sdnpu_request_init(&r);
    r.prompt_ids = ids;
    r.n_prompt_ids = n_ids;
    r.max_tokens = 48;
    r.ignore_eos = 1;
    r.method = "none";
    r.task_group = "steps"; /* the earlier answer the drafters read from (the same as this one) */
    sdnpu_result plain;
    sdnpu_result_init(&plain);
    steps_seen ps = {0};
    r.on_step = on_step;
    r.user_data = &ps;
    assert_int_equal(sdnpu_generate(c, &r, &plain, &e), SDNPU_OK);
    assert_int_equal(plain.n_tokens, 48);
    /* plain decoding: one token a step, the model's own */
    assert_int_equal(ps.steps, 48);
    assert_int_equal(ps.n, 48);
    for (int i = 0; i < 48; i++) assert_int_equal(ps.src[i], SDNPU_SOURCE_MODEL);
    memcpy(seq + n_ids, plain.tokens, sizeof(int32_t) * 48);
    const char *methods[] = {"pld", "sam", "sam+tree", "sam+cal", "sam+reuse", "sdnpu"};
    for (int k = 0; k < 6; k++) {
        steps_seen *s = calloc(1, sizeof *s);
        r.method = methods[k];
        r.draft_max = 8;
        r.store_answer = 0;
        r.user_data = s;
        r.on_text = text_collect;
        sdnpu_result res;
        sdnpu_result_init(&res);
        if (sdnpu_generate(c, &r, &res, &e)) fail_msg("%s: %s", methods[k], e.message);
        assert_memory_equal(res.tokens, plain.tokens, sizeof(int32_t) * 48);
        assert_false(s->bad_step);
        assert_true(s->cut_step <= 1);
        assert_int_equal(s->steps, res.stats.steps);
        assert_int_equal(s->n, 48);
        assert_memory_equal(s->tok, res.tokens, sizeof(int32_t) * 48);
        assert_string_equal(s->text.buf, res.text);
        int drafted = 0, by[7] = {0};
        for (int i = 0; i < 48; i++) {
            if (i > 0) assert_true(s->end[i] >= s->end[i - 1]);
            by[s->src[i]]++;
            if (s->src[i] == SDNPU_SOURCE_MODEL) continue;
            drafted++;
            const int q = n_ids + i; /* the token's place in prompt ++ answer */
            const int32_t prev = seq[q - 1], t = seq[q];
            const char *why = NULL;
            switch (s->src[i]) {
            case SDNPU_SOURCE_PROMPT: /* calibrated trees are the model's predictions there: no pair to check */
                if (!strstr(methods[k], "cal") && strcmp(methods[k], "sdnpu") && !pair_in(seq, 1, n_ids, prev, t)) why = "prompt";
                break;
            case SDNPU_SOURCE_ANSWER:
                if (!pair_in(seq, n_ids, q, prev, t)) why = "answer";
                break;
            case SDNPU_SOURCE_HISTORY: /* the earlier answer followed the same prompt: its pair may span the two */
                if (!pair_in(seq, n_ids, n_ids + 48, prev, t) && !(i == 0 && seq[n_ids] == t)) why = "history";
                break;
            case SDNPU_SOURCE_REUSE:
                if (!strstr(methods[k], "reuse") && strcmp(methods[k], "sdnpu")) why = "reuse without reuse";
                break;
            case SDNPU_SOURCE_RECYCLED: /* the model's own earlier predictions: only the methods that keep them */
                if (strcmp(methods[k], "sam+model") && strcmp(methods[k], "sdnpu")) why = "recycled without the model's table";
                break;
            default:
                why = "no source";
            }
            if (why) fail_msg("%s: token %d (%d after %d) labelled %s does not occur there", methods[k], i, t, prev, why);
        }
        assert_int_equal(drafted, (int)res.stats.accepted_tokens);
        assert_int_equal(s->end[47], strlen(res.text));
        /* the methods that read the task group's answers take much of this repeat from it */
        if (strcmp(methods[k], "pld")) assert_true(by[SDNPU_SOURCE_HISTORY] > 8);
        else assert_int_equal(by[SDNPU_SOURCE_HISTORY], 0);
        sdnpu_result_free(&res);
        free(s);
    }
    /* on_step can stop the request */
    steps_seen st = {.stop_after = 3};
    r.method = "sdnpu";
    r.user_data = &st;
    sdnpu_result res;
    sdnpu_result_init(&res);
    assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_OK);
    assert_int_equal(res.finish, SDNPU_FINISH_CANCELLED);
    assert_int_equal(st.steps, 3);
    sdnpu_result_free(&res);
    /* forced text (SDNPU_SOURCE_GRAMMAR) needs a model that writes it: test_constrained.c, with SmolLM2 */
    sdnpu_free(ids);
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
    sdnpu_graph_params gp;
    sdnpu_graph_params_init(&gp);
    gp.graphs = "sideways";
    assert_int_equal(sdnpu_context_new_graphs(m, &cp, &gp, &c, &e), SDNPU_EINVAL);
    assert_null(c);
    assert_non_null(strstr(e.message, "graphs"));
    assert_non_null(strstr(e.message, "sideways"));
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

/* ---- the contract of sdnpu.h: every documented error code, provoked, and the state after it ---- */

/* A copy of file `from` with the first occurrence of `find` (after `anchor`, when given)
 * replaced by `repl` (same length). */
static const char *patched_copy_after(const char *from, const char *name, const char *anchor, const char *find, const char *repl) {
    FILE *f = fopen(from, "rb");
    assert_non_null(f);
    static char buf[1 << 22];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n > 0 && n < sizeof buf);
    size_t fl = strlen(find);
    assert_int_equal(fl, strlen(repl));
    char *at = buf;
    if (anchor) {
        at = memmem(buf, n, anchor, strlen(anchor));
        assert_non_null(at);
    }
    char *hit = memmem(at, n - (size_t)(at - buf), find, fl);
    assert_non_null(hit);
    memcpy(hit, repl, fl);
    const char *out = tu_tmp(name);
    assert_int_equal(tu_write_file(out, buf, n), 0);
    return out;
}

static const char *patched_copy(const char *from, const char *name, const char *find, const char *repl) {
    return patched_copy_after(from, name, NULL, find, repl);
}

typedef struct logged {
    pthread_mutex_t mu;
    int n, level;
    char last[512];
} logged;

static void log_sink(void *user, sdnpu_log_level level, const char *msg) {
    logged *l = user;
    pthread_mutex_lock(&l->mu);
    l->n++;
    l->level = (int)level;
    snprintf(l->last, sizeof l->last, "%s", msg);
    pthread_mutex_unlock(&l->mu);
}

/* sdnpu_set_log: the library's warnings reach the app's sink (a GGUF file without a tokenizer
 * section), with their level; NULL restores the default (stderr) and the sink hears no more. */
static void test_log_callback(void **state) {
    (void)state;
    const char *notok = patched_copy(tu_model("tiny-llama", "Q8_0", 3), "notok.gguf", "tokenizer.ggml.tokens", "tokenizer.ggml.tokenz");
    logged l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sdnpu_set_log(log_sink, &l);
    sdnpu_model *m = NULL;
    sdnpu_error e;
    assert_int_equal(sdnpu_model_load(notok, NULL, &m, &e), SDNPU_OK);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.level, SDNPU_LOG_WARN);
    assert_non_null(strstr(l.last, "notok.gguf has no tokenizer section"));
    assert_null(strchr(l.last, '\n'));
    sdnpu_model_free(m);
    sdnpu_set_log(NULL, NULL);
    assert_int_equal(sdnpu_model_load(notok, NULL, &m, &e), SDNPU_OK); /* to stderr now */
    assert_int_equal(l.n, 1);
    sdnpu_model_free(m);
}

/* sdnpu_set_log while other threads log: every message reaches one of the sinks, none is lost
 * or torn (two sinks swapped 200 times while two threads load a model that warns). */
typedef struct log_loader {
    const char *path;
    int loads;
} log_loader;

static void *load_repeatedly(void *arg) {
    log_loader *ll = arg;
    for (int i = 0; i < ll->loads; i++) {
        sdnpu_model *m = NULL;
        if (sdnpu_model_load(ll->path, NULL, &m, NULL) == SDNPU_OK) sdnpu_model_free(m);
    }
    return NULL;
}

static void test_log_threads(void **state) {
    (void)state;
    const char *notok = patched_copy(tu_model("tiny-llama", "Q8_0", 3), "notok3.gguf", "tokenizer.ggml.tokens", "tokenizer.ggml.tokenz");
    logged a = {.mu = PTHREAD_MUTEX_INITIALIZER}, b = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sdnpu_set_log(log_sink, &a);
    log_loader ll = {.path = notok, .loads = 20};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, load_repeatedly, &ll), 0);
    for (int i = 0; i < 200; i++) sdnpu_set_log(log_sink, i % 2 ? &a : &b);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    sdnpu_set_log(NULL, NULL);
    assert_int_equal(a.n + b.n, 40);
    if (a.n) assert_non_null(strstr(a.last, "has no tokenizer section"));
    if (b.n) assert_non_null(strstr(b.last, "has no tokenizer section"));
}

/* The *_init macros and struct_size: a size below the first released layout is refused and
 * nothing is written; a larger struct (a newer header) gets zeros after the known fields and
 * not a byte past its size. */
static void test_struct_sizes(void **state) {
    (void)state;
    unsigned char buf[sizeof(sdnpu_request) + 64];
    memset(buf, 0xAB, sizeof buf);
    assert_int_equal(sdnpu_request_init_sized((sdnpu_request *)buf, 8), SDNPU_EINVAL);
    assert_int_equal(sdnpu_request_init_sized(NULL, sizeof(sdnpu_request)), SDNPU_EINVAL);
    for (size_t i = 0; i < sizeof buf; i++) assert_int_equal(buf[i], 0xAB);
    assert_int_equal(sdnpu_request_init_sized((sdnpu_request *)buf, sizeof(sdnpu_request) + 32), SDNPU_OK);
    sdnpu_request *r = (sdnpu_request *)buf;
    assert_int_equal(r->struct_size, sizeof(sdnpu_request) + 32);
    assert_int_equal(r->max_tokens, 256);
    for (size_t i = sizeof(sdnpu_request); i < sizeof(sdnpu_request) + 32; i++) assert_int_equal(buf[i], 0);
    for (size_t i = sizeof(sdnpu_request) + 32; i < sizeof buf; i++) assert_int_equal(buf[i], 0xAB);
    /* the other init functions refuse the same way */
    sdnpu_model_params mp;
    sdnpu_context_params cp;
    sdnpu_model_info mi;
    sdnpu_result res;
    assert_int_equal(sdnpu_model_params_init_sized(&mp, 4), SDNPU_EINVAL);
    assert_int_equal(sdnpu_model_params_init_sized(NULL, sizeof mp), SDNPU_EINVAL);
    assert_int_equal(sdnpu_context_params_init_sized(&cp, 4), SDNPU_EINVAL);
    assert_int_equal(sdnpu_context_params_init_sized(NULL, sizeof cp), SDNPU_EINVAL);
    assert_int_equal(sdnpu_model_info_init_sized(&mi, 4), SDNPU_EINVAL);
    assert_int_equal(sdnpu_model_info_init_sized(NULL, sizeof mi), SDNPU_EINVAL);
    assert_int_equal(sdnpu_result_init_sized(&res, 4), SDNPU_EINVAL);
    assert_int_equal(sdnpu_result_init_sized(NULL, sizeof res), SDNPU_EINVAL);
    sdnpu_graph_params gp;
    assert_int_equal(sdnpu_graph_params_init_sized(&gp, 4), SDNPU_EINVAL);
    assert_int_equal(sdnpu_graph_params_init_sized(NULL, sizeof gp), SDNPU_EINVAL);
    assert_int_equal(sdnpu_model_params_init(&mp), SDNPU_OK);
    assert_null(mp.tokenizer_path);
    assert_int_equal(sdnpu_context_params_init(&cp), SDNPU_OK);
    assert_int_equal(cp.struct_size, sizeof cp);
    assert_int_equal(sdnpu_graph_params_init(&gp), SDNPU_OK);
    assert_int_equal(gp.struct_size, sizeof gp);
    assert_null(gp.graphs);

    /* sdnpu_model_get_info into a struct larger than the library's: zeros after, nothing past */
    sdnpu_model *m = load_tiny();
    sdnpu_error e;
    unsigned char ib[sizeof(sdnpu_model_info) + 32];
    memset(ib, 0xCD, sizeof ib);
    assert_int_equal(sdnpu_model_info_init_sized((sdnpu_model_info *)ib, sizeof(sdnpu_model_info) + 16), SDNPU_OK);
    memset(ib + sizeof(sdnpu_model_info), 0xEE, 16); /* the app's newer fields */
    assert_int_equal(sdnpu_model_get_info(m, (sdnpu_model_info *)ib, &e), SDNPU_OK);
    assert_string_equal(((sdnpu_model_info *)ib)->architecture, "llama");
    for (size_t i = sizeof(sdnpu_model_info); i < sizeof(sdnpu_model_info) + 16; i++) assert_int_equal(ib[i], 0);
    for (size_t i = sizeof(sdnpu_model_info) + 16; i < sizeof ib; i++) assert_int_equal(ib[i], 0xCD);
    /* EINVAL: NULL, and a struct_size below the first layout (not written) */
    mi.struct_size = 8;
    mi.n_layers = -5;
    assert_int_equal(sdnpu_model_get_info(m, &mi, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "sdnpu_model_info.struct_size"));
    assert_int_equal(mi.n_layers, -5);
    assert_int_equal(sdnpu_model_get_info(NULL, &mi, &e), SDNPU_EINVAL);
    assert_int_equal(sdnpu_model_get_info(m, NULL, &e), SDNPU_EINVAL);

    sdnpu_context *c = NULL;
    assert_int_equal(sdnpu_context_new(m, NULL, &c, &e), SDNPU_OK);
    /* a request from a newer header: fine while its unknown fields are zero, EUNSUP when set */
    assert_int_equal(sdnpu_request_init_sized(r, sizeof(sdnpu_request) + 32), SDNPU_OK);
    r->prompt = "Summarize the document.";
    r->documents = &k_doc;
    r->n_documents = 1;
    r->method = "none";
    r->max_tokens = 4;
    sdnpu_result_init(&res);
    assert_int_equal(sdnpu_generate(c, r, &res, &e), SDNPU_OK);
    assert_int_equal(res.n_tokens, 4);
    sdnpu_result_free(&res);
    assert_int_equal(res.struct_size, sizeof res); /* kept: the struct can be passed again */
    buf[sizeof(sdnpu_request) + 3] = 1;
    assert_int_equal(sdnpu_generate(c, r, &res, &e), SDNPU_EUNSUP);
    assert_non_null(strstr(e.message, "sdnpu_request"));
    assert_null(res.text);
    char *text = NULL;
    assert_int_equal(sdnpu_render_prompt(m, r, &text, &e), SDNPU_EUNSUP);
    assert_null(text);
    /* a request or result whose struct_size is below the first layout */
    r->struct_size = 16;
    assert_int_equal(sdnpu_generate(c, r, &res, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "sdnpu_request.struct_size"));
    assert_int_equal(sdnpu_render_prompt(m, r, &text, &e), SDNPU_EINVAL);
    sdnpu_request ok;
    summary_request(&ok, "none");
    ok.max_tokens = 2;
    sdnpu_result small;
    memset(&small, 0x5A, sizeof small);
    small.struct_size = 16;
    assert_int_equal(sdnpu_generate(c, &ok, &small, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "sdnpu_result.struct_size"));
    assert_int_equal(((unsigned char *)&small)[sizeof(size_t)], 0x5A); /* not written */
    /* a larger result gets zeros after the known fields */
    unsigned char rb[sizeof(sdnpu_result) + 16];
    memset(rb, 0x77, sizeof rb);
    assert_int_equal(sdnpu_result_init_sized((sdnpu_result *)rb, sizeof rb), SDNPU_OK);
    memset(rb + sizeof(sdnpu_result), 0x77, 16);
    assert_int_equal(sdnpu_generate(c, &ok, (sdnpu_result *)rb, &e), SDNPU_OK);
    assert_int_equal(((sdnpu_result *)rb)->n_tokens, 2);
    for (size_t i = sizeof(sdnpu_result); i < sizeof rb; i++) assert_int_equal(rb[i], 0);
    sdnpu_result_free((sdnpu_result *)rb);
    /* context and model params from a newer header with unknown fields set: EUNSUP; too small: EINVAL */
    unsigned char pb[sizeof(sdnpu_context_params) + 16];
    assert_int_equal(sdnpu_context_params_init_sized((sdnpu_context_params *)pb, sizeof pb), SDNPU_OK);
    pb[sizeof pb - 1] = 1;
    sdnpu_context *c2 = (sdnpu_context *)1;
    assert_int_equal(sdnpu_context_new(m, (sdnpu_context_params *)pb, &c2, &e), SDNPU_EUNSUP);
    assert_null(c2);
    assert_non_null(strstr(e.message, "sdnpu_context_params"));
    cp.struct_size = 3;
    assert_int_equal(sdnpu_context_new(m, &cp, &c2, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "sdnpu_context_params.struct_size"));
    /* the same for the graph parameters */
    unsigned char gb[sizeof(sdnpu_graph_params) + 16];
    assert_int_equal(sdnpu_graph_params_init_sized((sdnpu_graph_params *)gb, sizeof gb), SDNPU_OK);
    for (size_t i = sizeof(sdnpu_graph_params); i < sizeof gb; i++) assert_int_equal(gb[i], 0);
    gb[sizeof gb - 1] = 1;
    c2 = (sdnpu_context *)1;
    assert_int_equal(sdnpu_context_new_graphs(m, NULL, (sdnpu_graph_params *)gb, &c2, &e), SDNPU_EUNSUP);
    assert_null(c2);
    assert_non_null(strstr(e.message, "sdnpu_graph_params"));
    gp.struct_size = 3;
    assert_int_equal(sdnpu_context_new_graphs(m, NULL, &gp, &c2, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "sdnpu_graph_params.struct_size"));
    unsigned char mb[sizeof(sdnpu_model_params) + 16];
    assert_int_equal(sdnpu_model_params_init_sized((sdnpu_model_params *)mb, sizeof mb), SDNPU_OK);
    mb[sizeof mb - 2] = 1;
    sdnpu_model *m2 = (sdnpu_model *)1;
    assert_int_equal(sdnpu_model_load(tu_model("tiny-llama", "Q8_0", 3), (sdnpu_model_params *)mb, &m2, &e), SDNPU_EUNSUP);
    assert_null(m2);
    mp.struct_size = 2;
    assert_int_equal(sdnpu_model_load(tu_model("tiny-llama", "Q8_0", 3), &mp, &m2, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "sdnpu_model_params.struct_size"));
    sdnpu_context_free(c);
    sdnpu_model_free(m);
}

/* sdnpu_model_load: EINVAL, EIO (missing file; a known model not in the cache, or no cache
 * directory), EFORMAT, EUNSUP (architecture), and the state after (out NULL). The library
 * never downloads (`sdnpu pull` does: test_model_registry.c); sdnpu_set_cache_dir's EINVAL. */
static void test_load_errors_cache(void **state) {
    (void)state;
    sdnpu_model *m = (sdnpu_model *)1;
    sdnpu_error e;
    assert_int_equal(sdnpu_model_load("", NULL, &m, &e), SDNPU_EINVAL);
    assert_null(m);
    assert_int_equal(sdnpu_model_load(tu_model("tiny-llama", "Q8_0", 3), NULL, NULL, &e), SDNPU_EINVAL);
    const char *badarch = patched_copy_after(tu_model("tiny-llama", "Q8_0", 3), "badarch.gguf", "general.architecture", "llama", "llamq");
    m = (sdnpu_model *)1;
    assert_int_equal(sdnpu_model_load(badarch, NULL, &m, &e), SDNPU_EUNSUP);
    assert_null(m);
    assert_non_null(strstr(e.message, "llamq"));

    char cache[512];
    snprintf(cache, sizeof cache, "%s/empty-cache", tu_tmpdir());
    mkdir(cache, 0755);
    assert_int_equal(sdnpu_set_cache_dir(cache, &e), SDNPU_OK);
    /* a known model missing from the cache: no download, the message says how */
    assert_int_equal(sdnpu_model_load("smollm2-135m-instruct", NULL, &m, &e), SDNPU_EIO);
    assert_null(m);
    assert_non_null(strstr(e.message, "sdnpu pull smollm2-135m-instruct"));
    assert_non_null(strstr(e.message, cache));
    /* no cache directory at all (the default of an app): the same code, saying so */
    assert_int_equal(sdnpu_set_cache_dir(NULL, &e), SDNPU_OK);
    assert_int_equal(sdnpu_model_load("smollm2-135m-instruct", NULL, &m, &e), SDNPU_EIO);
    assert_non_null(strstr(e.message, "no model cache directory"));
    /* the environment is not read: SDNPU_CACHE pointing at the empty cache changes nothing */
    setenv("SDNPU_CACHE", cache, 1);
    assert_int_equal(sdnpu_model_load("smollm2-135m-instruct", NULL, &m, &e), SDNPU_EIO);
    assert_non_null(strstr(e.message, "no model cache directory"));
    char longdir[2000];
    memset(longdir, 'd', sizeof longdir - 1);
    longdir[sizeof longdir - 1] = 0;
    assert_int_equal(sdnpu_set_cache_dir(longdir, &e), SDNPU_EINVAL);
    /* back to the program's settings (tests/support/env_settings.c) */
    unsetenv("SDNPU_CACHE");
    assert_int_equal(sdn_tool_global_options(NULL, NULL, NULL, NULL), 0);
}

/* The process-wide settings: the kernel path by name (unknown: EINVAL listing the names; one
 * this machine lacks: EUNSUP; every path the same greedy tokens), the prefill matmuls, the
 * memory limit (ENOMEM naming sdnpu_set_mem_limit), and the environment variables the program
 * reads (SDN_KERNEL, SDN_MEM_LIMIT_MB) changing nothing in the library. */
static void test_settings(void **state) {
    (void)state;
    sdnpu_error e;
    assert_int_equal(sdnpu_set_kernel_path("warp", &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "portable"));
#if defined(__x86_64__)
    assert_int_equal(sdnpu_set_kernel_path("neon", &e), SDNPU_EUNSUP);
#elif defined(__aarch64__)
    assert_int_equal(sdnpu_set_kernel_path("avx2", &e), SDNPU_EUNSUP);
#endif
    assert_int_equal(sdnpu_set_prefill_matmul("fast", &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "sgemm"));
    assert_int_equal(sdnpu_set_prefill_matmul("kernels", &e), SDNPU_OK);
    assert_int_equal(sdnpu_set_prefill_matmul(NULL, &e), SDNPU_OK);

    sdnpu_model *m = load_tiny();
    sdnpu_request r;
    summary_request(&r, "none");
    r.max_tokens = 12;
    sdnpu_result ref, got;
    sdnpu_result_init(&ref);
    sdnpu_result_init(&got);
    sdnpu_context *c = NULL;
    assert_int_equal(sdnpu_set_kernel_path("portable", &e), SDNPU_OK);
    assert_int_equal(sdnpu_context_new(m, NULL, &c, &e), SDNPU_OK);
    assert_int_equal(sdnpu_generate(c, &r, &ref, &e), SDNPU_OK);
    sdnpu_context_free(c);
    assert_int_equal(sdnpu_set_kernel_path(NULL, &e), SDNPU_OK); /* the best */
    /* the program's variables are not the library's: a bogus SDN_KERNEL and a 1 MiB
     * SDN_MEM_LIMIT_MB in the environment do not stop a context */
    setenv("SDN_KERNEL", "bogus", 1);
    setenv("SDN_MEM_LIMIT_MB", "1", 1);
    assert_int_equal(sdnpu_context_new(m, NULL, &c, &e), SDNPU_OK);
    unsetenv("SDN_KERNEL");
    unsetenv("SDN_MEM_LIMIT_MB");
    assert_int_equal(sdnpu_generate(c, &r, &got, &e), SDNPU_OK);
    assert_int_equal(got.n_tokens, ref.n_tokens);
    assert_memory_equal(got.tokens, ref.tokens, (size_t)ref.n_tokens * sizeof ref.tokens[0]);
    sdnpu_context_free(c);
    sdnpu_result_free(&ref);
    sdnpu_result_free(&got);
    /* the memory limit set by the app */
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.n_ctx = 1 << 20;
    sdnpu_set_mem_limit(16u << 20);
    c = (sdnpu_context *)1;
    assert_int_equal(sdnpu_context_new(m, &cp, &c, &e), SDNPU_ENOMEM);
    assert_null(c);
    assert_non_null(strstr(e.message, "sdnpu_set_mem_limit"));
    assert_non_null(strstr(e.message, "may use only 16 MiB"));
    sdnpu_set_mem_limit(0);
    sdnpu_model_free(m);
    assert_int_equal(sdn_tool_global_options(NULL, NULL, NULL, NULL), 0); /* the program's settings again */
}

/* One mechanism for the library's messages: a context's notes (its verify cost curve measured)
 * reach the sink at SDNPU_LOG_INFO when the level lets them through, and nothing at the
 * default level (SDNPU_LOG_WARN); a warning is dropped at SDNPU_LOG_ERROR. */
static void test_log_level(void **state) {
    (void)state;
    const char *notok = patched_copy(tu_model("tiny-llama", "Q8_0", 3), "notok-level.gguf", "tokenizer.ggml.tokens", "tokenizer.ggml.tokenz");
    logged l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sdnpu_set_log(log_sink, &l);
    sdnpu_error e;
    sdnpu_model *m = NULL;
    sdnpu_set_log_level(SDNPU_LOG_ERROR);
    assert_int_equal(sdnpu_model_load(notok, NULL, &m, &e), SDNPU_OK);
    sdnpu_model_free(m);
    assert_int_equal(l.n, 0);
    sdnpu_set_log_level(SDNPU_LOG_WARN);
    assert_int_equal(sdnpu_model_load(notok, NULL, &m, &e), SDNPU_OK);
    sdnpu_model_free(m);
    assert_int_equal(l.n, 1);
    /* no cache directory: each context measures its verify cost curve (and says so at INFO) */
    assert_int_equal(sdnpu_set_cache_dir(NULL, &e), SDNPU_OK);
    m = load_tiny();
    sdnpu_request r;
    summary_request(&r, "sdnpu");
    r.max_tokens = 4;
    for (int level = SDNPU_LOG_WARN; level <= SDNPU_LOG_INFO; level++) {
        sdnpu_set_log_level((sdnpu_log_level)level);
        l.n = 0;
        sdnpu_context *c = NULL;
        assert_int_equal(sdnpu_context_new(m, NULL, &c, &e), SDNPU_OK);
        assert_int_equal(sdnpu_generate(c, &r, NULL, &e), SDNPU_OK);
        sdnpu_context_free(c);
        if (level == SDNPU_LOG_WARN) assert_int_equal(l.n, 0);
        else {
            assert_true(l.n >= 2); /* measuring ..., and the budget it gives */
            assert_int_equal(l.level, SDNPU_LOG_INFO);
            assert_non_null(strstr(l.last, "verify cost curve"));
            assert_null(strchr(l.last, '\n'));
        }
    }
    sdnpu_model_free(m);
    sdnpu_set_log_level(SDNPU_LOG_WARN);
    sdnpu_set_log(NULL, NULL);
    assert_int_equal(sdn_tool_global_options(NULL, NULL, NULL, NULL), 0);
}

/* sdnpu_tokenize / sdnpu_detokenize / the getters with NULL and without a tokenizer. */
static void test_token_errors(void **state) {
    (void)state;
    sdnpu_model *m = load_tiny();
    sdnpu_error e;
    int32_t *ids = (int32_t *)1;
    int n = 7;
    assert_int_equal(sdnpu_tokenize(NULL, "a", 1, 0, 0, &ids, &n, &e), SDNPU_EINVAL);
    assert_null(ids);
    assert_int_equal(n, 0);
    assert_int_equal(sdnpu_tokenize(m, NULL, 3, 0, 0, &ids, &n, &e), SDNPU_EINVAL);
    assert_int_equal(sdnpu_tokenize(m, "a", 1, 0, 0, NULL, &n, &e), SDNPU_EINVAL);
    assert_int_equal(sdnpu_tokenize(m, "a", (size_t)1 << 40, 0, 0, &ids, &n, &e), SDNPU_EINVAL); /* too long: refused unread */
    assert_non_null(strstr(e.message, "longer"));
    assert_int_equal(sdnpu_tokenize(m, NULL, 0, 0, 0, &ids, &n, &e), SDNPU_OK);
    assert_int_equal(n, 0);
    sdnpu_free(ids);
    char *text = (char *)1;
    int32_t one = 1;
    assert_int_equal(sdnpu_detokenize(m, NULL, 2, &text, &e), SDNPU_EINVAL);
    assert_null(text);
    assert_int_equal(sdnpu_detokenize(m, &one, -1, &text, &e), SDNPU_EINVAL);
    assert_int_equal(sdnpu_detokenize(NULL, &one, 1, &text, &e), SDNPU_EINVAL);
    assert_int_equal(sdnpu_detokenize(m, &one, 1, NULL, &e), SDNPU_EINVAL);
    /* NULL getters */
    assert_int_equal(sdnpu_model_has_tokenizer(NULL), 0);
    assert_null(sdnpu_model_describe(NULL, 0));
    assert_int_equal(sdnpu_context_n_ctx(NULL), 0);
    sdnpu_model_free(NULL);
    sdnpu_context_free(NULL);
    sdnpu_result_free(NULL);
    sdnpu_free(NULL);
    assert_string_equal(sdnpu_status_string(99), "error");
    sdnpu_model_free(m);
    /* a model without a tokenizer */
    const char *notok = patched_copy(tu_model("tiny-llama", "Q8_0", 3), "notok2.gguf", "tokenizer.ggml.tokens", "tokenizer.ggml.tokenz");
    logged l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sdnpu_set_log(log_sink, &l); /* keep the warning off stderr */
    assert_int_equal(sdnpu_model_load(notok, NULL, &m, &e), SDNPU_OK);
    sdnpu_set_log(NULL, NULL);
    assert_int_equal(sdnpu_model_has_tokenizer(m), 0);
    assert_int_equal(sdnpu_tokenize(m, "a", 1, 0, 0, &ids, &n, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "no tokenizer"));
    assert_int_equal(sdnpu_detokenize(m, &one, 1, &text, &e), SDNPU_EINVAL);
    sdnpu_request r;
    summary_request(&r, "none");
    r.grammar = "root ::= \"a\"";
    sdnpu_context *c = NULL;
    assert_int_equal(sdnpu_context_new(m, NULL, &c, &e), SDNPU_OK);
    assert_int_equal(sdnpu_generate(c, &r, NULL, &e), SDNPU_EINVAL); /* a grammar needs the tokenizer */
    assert_non_null(strstr(e.message, "tokenizer"));
    sdnpu_context_free(c);
    sdnpu_model_free(m);
}

/* sdnpu_context_new: EINVAL, ENOMEM (memory limit), EDB (not a database);
 * sdnpu_context_new_graphs: EINVAL, and without graphs an ordinary context; sdnpu_graph_report:
 * EINVAL, ESTATE; the sdnpu_check_* functions: EINVAL. */
static void test_context_errors(void **state) {
    (void)state;
    sdnpu_model *m = load_tiny();
    sdnpu_error e;
    sdnpu_context *c = (sdnpu_context *)1;
    assert_int_equal(sdnpu_context_new(NULL, NULL, &c, &e), SDNPU_EINVAL);
    assert_null(c);
    assert_int_equal(sdnpu_context_new(m, NULL, NULL, &e), SDNPU_EINVAL);
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.n_ctx = 1;
    assert_int_equal(sdnpu_context_new(m, &cp, &c, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "n_ctx"));
    sdnpu_context_params_init(&cp);
    cp.cache_type_k = "f7";
    assert_int_equal(sdnpu_context_new(m, &cp, &c, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "cache_type_k"));
    /* ENOMEM: the KV cache does not fit the memory limit */
    sdnpu_context_params_init(&cp);
    cp.n_ctx = 1 << 20;
    sdnpu_set_mem_limit(16u << 20);
    assert_int_equal(sdnpu_context_new(m, &cp, &c, &e), SDNPU_ENOMEM);
    sdnpu_set_mem_limit(0);
    assert_null(c);
    assert_non_null(strstr(e.message, "sdnpu_set_mem_limit"));
    /* EDB: the history store is not an SQLite database */
    const char *junk = tu_tmp("junk-history.sqlite");
    char page[4096];
    memset(page, 'x', sizeof page);
    tu_write_file(junk, page, sizeof page);
    sdnpu_context_params_init(&cp);
    cp.history_path = junk;
    assert_int_equal(sdnpu_context_new(m, &cp, &c, &e), SDNPU_EDB);
    assert_null(c);
    assert_non_null(strstr(e.message, "junk-history.sqlite"));
    /* sdnpu_graph_report */
    char *text = (char *)1;
    assert_int_equal(sdnpu_graph_report(NULL, &text, &e), SDNPU_EINVAL);
    assert_null(text);
    assert_int_equal(sdnpu_context_new(m, NULL, &c, &e), SDNPU_OK);
    assert_int_equal(sdnpu_graph_report(c, NULL, &e), SDNPU_EINVAL);
    assert_int_equal(sdnpu_graph_report(c, &text, &e), SDNPU_ESTATE); /* no graphs */
    assert_null(text);
    sdnpu_context_free(c);
    /* sdnpu_context_new_graphs: NULL model or out; no graph parameters, or no mode: an ordinary context */
    sdnpu_graph_params gp;
    sdnpu_graph_params_init(&gp);
    gp.graphs = "sync";
    c = (sdnpu_context *)1;
    assert_int_equal(sdnpu_context_new_graphs(NULL, NULL, &gp, &c, &e), SDNPU_EINVAL);
    assert_null(c);
    assert_non_null(strstr(e.message, "sdnpu_context_new_graphs"));
    assert_int_equal(sdnpu_context_new_graphs(m, NULL, &gp, NULL, &e), SDNPU_EINVAL);
    sdnpu_context_params_init(&cp);
    cp.n_ctx = 1;
    assert_int_equal(sdnpu_context_new_graphs(m, &cp, &gp, &c, &e), SDNPU_EINVAL); /* the context parameters are checked too */
    assert_non_null(strstr(e.message, "n_ctx"));
    for (int k = 0; k < 2; k++) {
        sdnpu_graph_params none;
        sdnpu_graph_params_init(&none);
        assert_int_equal(sdnpu_context_new_graphs(m, NULL, k ? &none : NULL, &c, &e), SDNPU_OK);
        assert_int_equal(sdnpu_graph_report(c, &text, &e), SDNPU_ESTATE); /* no graphs */
        sdnpu_context_free(c);
    }
    sdnpu_context_params_init(&cp);
    assert_int_equal(sdnpu_context_new_graphs(m, &cp, &gp, &c, &e), SDNPU_OK);
    assert_int_equal(sdnpu_graph_report(c, &text, &e), SDNPU_ESTATE); /* no request yet */
    assert_non_null(strstr(e.message, "no graph run"));
    sdnpu_context_free(c);
    /* the checks */
    assert_int_equal(sdnpu_check_method(NULL, &e), SDNPU_EINVAL);
    assert_int_equal(sdnpu_check_param(NULL, &e), SDNPU_EINVAL);
    assert_int_equal(sdnpu_check_graphs(NULL, &e), SDNPU_EINVAL);
    assert_int_equal(sdnpu_check_graphs("sideways", &e), SDNPU_EINVAL);
    assert_int_equal(sdnpu_check_graphs("async", &e), SDNPU_OK);
    sdnpu_model_free(m);
}

/* sdnpu_generate called from its own on_text callback: SDNPU_ESTATE, the running request
 * goes on undisturbed. */
typedef struct reenter {
    sdnpu_context *c;
    const sdnpu_request *r;
    int calls, rc;
    sdnpu_error e;
} reenter;

static int reenter_cb(void *ud, const char *text, size_t len) {
    reenter *x = ud;
    if (x->calls++ == 0) x->rc = sdnpu_generate(x->c, x->r, NULL, &x->e);
    return 0;
}

/* sdnpu_generate: ESTATE (re-entered), EDB (history store: a damaged answer row), EINVAL
 * (NULL, bad grammar and schema, task group without store), and the context state after
 * each: usable, KV entries kept after an error found before decoding, dropped after one in
 * decoding. */
static void test_generate_errors(void **state) {
    (void)state;
    sdnpu_model *m = load_tiny();
    sdnpu_error e;
    const char *hist = tu_tmp("errors-history.sqlite");
    unlink(hist);
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.history_path = hist;
    cp.n_ctx = 256;
    sdnpu_context *c = NULL;
    assert_int_equal(sdnpu_context_new(m, &cp, &c, &e), SDNPU_OK);
    sdnpu_request r;
    summary_request(&r, "none");
    r.max_tokens = 8;
    sdnpu_result res;
    sdnpu_result_init(&res);
    assert_int_equal(sdnpu_generate(NULL, &r, &res, &e), SDNPU_EINVAL);
    assert_int_equal(sdnpu_generate(c, NULL, &res, &e), SDNPU_EINVAL);
    assert_null(res.text);
    assert_int_equal(res.n_tokens, 0);

    /* ESTATE: re-entered from on_text */
    reenter x = {.c = c, .r = &r};
    r.on_text = reenter_cb;
    r.user_data = &x;
    assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_OK);
    assert_int_equal(x.rc, SDNPU_ESTATE);
    assert_non_null(strstr(x.e.message, "already running"));
    assert_int_equal(res.n_tokens, 8);
    sdnpu_result_free(&res);
    r.on_text = NULL;
    r.user_data = NULL;

    /* EINVAL before decoding keeps the KV entries: the same request again reuses them */
    assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_OK);
    sdnpu_result_free(&res);
    sdnpu_request bad = r;
    bad.temperature = -1;
    assert_int_equal(sdnpu_generate(c, &bad, &res, &e), SDNPU_EINVAL);
    bad = r;
    bad.grammar = "root ::= (";
    assert_int_equal(sdnpu_generate(c, &bad, &res, &e), SDNPU_EINVAL);
    bad = r;
    bad.json_schema = "{\"type\": \"quaternion\"}";
    assert_int_equal(sdnpu_generate(c, &bad, &res, &e), SDNPU_EINVAL);
    assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_OK);
    assert_true(res.stats.reused_tokens > 0);
    sdnpu_result_free(&res);
    /* an error in the decoding step itself (prompt_ids longer than the context) empties it */
    int32_t *many = calloc(300, sizeof *many);
    for (int i = 0; i < 300; i++) many[i] = 1 + i % 50;
    bad = r;
    bad.prompt = NULL;
    bad.documents = NULL;
    bad.n_documents = 0;
    bad.prompt_ids = many;
    bad.n_prompt_ids = 300;
    assert_int_equal(sdnpu_generate(c, &bad, &res, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "context"));
    assert_null(res.text);
    free(many);
    assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_OK);
    assert_int_equal(res.stats.reused_tokens, 0);
    sdnpu_result_free(&res);

    /* EDB: a damaged answer row of the task group */
    r.task_group = "g";
    r.method = "sam";
    assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_OK);
    assert_int_equal(res.stats.answer_stored, 1);
    sdnpu_result_free(&res);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(hist, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "UPDATE answers SET checksum = checksum + 1; DELETE FROM history_cache;", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_EDB);
    assert_non_null(strstr(e.message, "damaged"));
    assert_null(res.text);
    /* the context is still usable */
    r.task_group = NULL;
    assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_OK);
    assert_int_equal(res.n_tokens, 8);
    sdnpu_result_free(&res);
    sdnpu_context_free(c);
    /* a task group on a context without a history store */
    assert_int_equal(sdnpu_context_new(m, NULL, &c, &e), SDNPU_OK);
    r.task_group = "g";
    assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_EINVAL);
    assert_non_null(strstr(e.message, "history_path"));
    /* sdnpu_render_prompt */
    char *text = (char *)1;
    assert_int_equal(sdnpu_render_prompt(NULL, &r, &text, &e), SDNPU_EINVAL);
    assert_null(text);
    assert_int_equal(sdnpu_render_prompt(m, NULL, &text, &e), SDNPU_EINVAL);
    assert_int_equal(sdnpu_render_prompt(m, &r, NULL, &e), SDNPU_EINVAL);
    int32_t ids[] = {1, 2};
    r.prompt = NULL;
    r.documents = NULL;
    r.n_documents = 0;
    r.prompt_ids = ids;
    r.n_prompt_ids = 2;
    assert_int_equal(sdnpu_render_prompt(m, &r, &text, &e), SDNPU_EINVAL);
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
        cmocka_unit_test(test_model_candidates),
        cmocka_unit_test(test_step_sources),
        cmocka_unit_test(test_kv_reuse),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_progress),
        cmocka_unit_test(test_stop_strings),
        cmocka_unit_test(test_penalty_lossless),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_shared_model_threads),
        cmocka_unit_test(test_context_n_ctx),
        cmocka_unit_test(test_log_callback),
        cmocka_unit_test(test_log_threads),
        cmocka_unit_test(test_struct_sizes),
        cmocka_unit_test(test_load_errors_cache),
        cmocka_unit_test(test_settings),
        cmocka_unit_test(test_log_level),
        cmocka_unit_test(test_token_errors),
        cmocka_unit_test(test_context_errors),
        cmocka_unit_test(test_generate_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
