/* test_server.c - `sdnpu serve` over HTTP on loopback: the built program ($SDN_CLI) is started on
 * a port the OS picks, with a small generated model, and spoken to with libcurl: chat, streaming
 * (the chunks concatenate to the non-streamed text), greedy identity of speculative and plain
 * decoding against the library called directly, history through `user`, every bad-input case
 * with its status and field (a \u0000, data after the JSON, a key twice among them), 503 on a
 * full queue, cancellation when the client hangs up, a clean exit on SIGTERM, and constrained
 * answers (a grammar, a forced tool call in OpenAI's shape, streamed too, and a
 * schema keyword the library refuses answered 400 naming it).
 * test_server_hostile.c holds the raw-socket cases (framing, slow clients, memory, store). */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <sqlite3.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "sdnpu.h"
#include "support/test_util.h"

#define KEY "test-key-123"

typedef struct server {
    pid_t pid;
    int port;
    char log[512];
} server;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *model_path(void) { return tu_model("tiny-llama", "Q8_0", 3); }

/* Start `sdnpu serve --model tiny --port 0 --api-key KEY EXTRA...` and wait for its listening line. */
static void start(server *s, const char *name, ...) {
    const char *cli = getenv("SDN_CLI");
    if (!cli) fail_msg("SDN_CLI is not set (run through ctest)");
    const char *argv[40] = {cli, "serve", "--model", model_path(), "--port", "0", "--api-key", KEY, "--host", "127.0.0.1", "--model-id", "tiny"};
    int n = 12;
    va_list ap;
    va_start(ap, name);
    for (const char *a; (a = va_arg(ap, const char *)) && n < 38;) argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    snprintf(s->log, sizeof s->log, "%s", tu_tmp(name));
    s->port = 0;
    unlink(s->log); /* no earlier server's "listening" line can be read before the child writes its own */
    s->pid = fork();
    assert_true(s->pid >= 0);
    if (s->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves no server behind */
        int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, 2);
        execv(cli, (char **)argv);
        _exit(127);
    }
    for (double t0 = now_s(); now_s() - t0 < 120;) {
        FILE *f = fopen(s->log, "r");
        char line[1024];
        while (f && fgets(line, sizeof line, f)) {
            const char *p = strstr(line, "listening on http://127.0.0.1:");
            if (p) s->port = atoi(p + strlen("listening on http://127.0.0.1:"));
        }
        if (f) fclose(f);
        if (s->port > 0) return;
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) fail_msg("the server exited before listening (log %s)", s->log);
        usleep(20000);
    }
    fail_msg("the server did not start listening (log %s)", s->log);
}

/* SIGTERM; the server must exit with status 0 within `bound` seconds. */
static void stop(server *s, double bound) {
    kill(s->pid, SIGTERM);
    int st = 0;
    double t0 = now_s();
    while (waitpid(s->pid, &st, WNOHANG) != s->pid) {
        if (now_s() - t0 > bound) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, &st, 0);
            fail_msg("the server did not stop within %.0f s of SIGTERM", bound);
        }
        usleep(20000);
    }
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* ---- HTTP ---- */

typedef struct reply {
    char *body;
    size_t len;
    long status;
    int abort_after;    /* >0: hang up once this many bytes arrived */
    volatile int *seen; /* set to 1 when the first bytes arrive */
    volatile int *hang_up; /* when set to 1: hang up at the next bytes that arrive */
} reply;

static size_t on_body(char *p, size_t sz, size_t n, void *ud) {
    reply *r = ud;
    size_t k = sz * n;
    char *b = realloc(r->body, r->len + k + 1);
    if (!b) return 0;
    r->body = b;
    memcpy(r->body + r->len, p, k);
    r->len += k;
    r->body[r->len] = 0;
    if (r->seen) *r->seen = 1;
    if (r->abort_after > 0 && r->len >= (size_t)r->abort_after) return 0;
    if (r->hang_up && *r->hang_up) return 0;
    return k;
}

/* One request; key NULL: no Authorization header. Returns the status (0: transport error). */
static long http(const server *s, const char *method, const char *path, const char *body, size_t len, const char *key, reply *r,
                 long timeout_ms) {
    CURL *c = curl_easy_init();
    char url[256], auth[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s->port, path);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = curl_slist_append(h, "Expect:");
    if (key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
        h = curl_slist_append(h, auth);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 120000L);
    r->status = 0;
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return r->status;
}

static cJSON *post_json(const server *s, const char *path, const char *body, long want) {
    reply r = {0};
    http(s, "POST", path, body, strlen(body), KEY, &r, 0);
    if (r.status != want) fail_msg("POST %s %s: status %ld, want %ld: %s", path, body, r.status, want, r.body ? r.body : "");
    cJSON *j = cJSON_Parse(r.body ? r.body : "");
    free(r.body);
    assert_non_null(j);
    return j;
}

static const cJSON *at(const cJSON *j, const char *path) { /* "choices.0.message.content" */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ".", &save); tok && j; tok = strtok_r(NULL, ".", &save))
        j = (*tok >= '0' && *tok <= '9') ? cJSON_GetArrayItem(j, atoi(tok)) : cJSON_GetObjectItemCaseSensitive(j, tok);
    if (!j) fail_msg("no %s in the answer", path);
    return j;
}

static double num(const cJSON *j, const char *path) { return at(j, path)->valuedouble; }
static const char *str(const cJSON *j, const char *path) {
    const cJSON *v = at(j, path);
    if (!cJSON_IsString(v)) fail_msg("%s is not a string", path);
    return v->valuestring;
}

/* A metric's value from GET /metrics. */
static double metric(const server *s, const char *name) {
    reply r = {0};
    assert_int_equal(http(s, "GET", "/metrics", NULL, 0, KEY, &r, 0), 200);
    char pat[128];
    snprintf(pat, sizeof pat, "\n%s ", name);
    const char *p = strstr(r.body, pat);
    double v = p ? atof(p + strlen(pat)) : -1;
    free(r.body);
    if (!p) fail_msg("no metric %s", name);
    return v;
}

#define CHAT(extra) "{\"model\":\"tiny\",\"messages\":[{\"role\":\"system\",\"content\":\"You answer briefly.\"}," \
                    "{\"role\":\"user\",\"content\":\"Tell me about the lighthouse on Gull Rock.\"}]" extra "}"

/* ---- tests ---- */

static server g; /* the shared server: 2 slots, history store, small body limit */

static int setup(void **state) {
    (void)state;
    start(&g, "server.log", "--slots", "2", "--history", tu_tmp("history.sqlite"), "--max-body", "65536", "--ctx", "1024", NULL);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    stop(&g, 30);
    return 0;
}

static void test_endpoints(void **state) {
    (void)state;
    reply r = {0};
    assert_int_equal(http(&g, "GET", "/health", NULL, 0, NULL, &r, 0), 200);
    assert_non_null(strstr(r.body, "\"ok\""));
    free(r.body);
    memset(&r, 0, sizeof r);
    assert_int_equal(http(&g, "GET", "/v1/models", NULL, 0, KEY, &r, 0), 200);
    cJSON *j = cJSON_Parse(r.body);
    assert_string_equal(str(j, "data.0.id"), "tiny");
    cJSON_Delete(j);
    free(r.body);
    memset(&r, 0, sizeof r);
    assert_int_equal(http(&g, "GET", "/metrics", NULL, 0, KEY, &r, 0), 200);
    assert_non_null(strstr(r.body, "sdnpu_requests_total{code=\"200\"}"));
    assert_non_null(strstr(r.body, "sdnpu_mean_accepted_tokens_per_step"));
    free(r.body);
    memset(&r, 0, sizeof r);
    assert_int_equal(http(&g, "GET", "/nowhere", NULL, 0, KEY, &r, 0), 404);
    free(r.body);
}

static void test_chat_and_stream(void **state) {
    (void)state;
    const char *body = CHAT(",\"max_tokens\":24,\"sdnpu\":{\"ignore_eos\":true}");
    cJSON *a = post_json(&g, "/v1/chat/completions", body, 200);
    assert_string_equal(str(a, "object"), "chat.completion");
    assert_string_equal(str(a, "choices.0.message.role"), "assistant");
    assert_string_equal(str(a, "choices.0.finish_reason"), "length");
    assert_int_equal((int)num(a, "usage.completion_tokens"), 24);
    assert_int_equal((int)num(a, "usage.total_tokens"), (int)num(a, "usage.prompt_tokens") + 24);
    assert_string_equal(str(a, "sdnpu.method"), "sdnpu"); /* speculative decoding by default */
    assert_true(num(a, "sdnpu.steps") >= 1 && num(a, "sdnpu.steps") <= 24);
    const char *text = str(a, "choices.0.message.content");
    assert_true(strlen(text) > 0);

    /* streamed: the deltas concatenate to the same text; a final chunk; [DONE] */
    const char *sbody = CHAT(",\"max_tokens\":24,\"stream\":true,\"sdnpu\":{\"ignore_eos\":true}");
    reply r = {0};
    assert_int_equal(http(&g, "POST", "/v1/chat/completions", sbody, strlen(sbody), KEY, &r, 0), 200);
    char joined[8192] = "";
    int chunks = 0, finals = 0, done = 0;
    for (char *line = strtok(r.body, "\n"); line; line = strtok(NULL, "\n")) {
        assert_true(!strncmp(line, "data: ", 6));
        if (!strcmp(line + 6, "[DONE]")) { done = 1; continue; }
        assert_false(done);
        cJSON *c = cJSON_Parse(line + 6);
        assert_non_null(c);
        assert_string_equal(str(c, "object"), "chat.completion.chunk");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(at(c, "choices.0.delta"), "content");
        if (cJSON_IsString(content)) strncat(joined, content->valuestring, sizeof joined - strlen(joined) - 1);
        if (cJSON_IsString(at(c, "choices.0.finish_reason"))) {
            finals++;
            assert_string_equal(str(c, "choices.0.finish_reason"), "length");
            assert_int_equal((int)num(c, "usage.completion_tokens"), 24);
        }
        chunks++;
        cJSON_Delete(c);
    }
    assert_true(done);
    assert_int_equal(finals, 1);
    assert_true(chunks >= 3);
    assert_string_equal(joined, text);
    free(r.body);
    cJSON_Delete(a);

    /* sampling: the same seed gives the same answer; no seed gives a fresh one per request */
    cJSON *s1 = post_json(&g, "/v1/chat/completions", CHAT(",\"max_tokens\":16,\"temperature\":1,\"seed\":42"), 200);
    cJSON *s2 = post_json(&g, "/v1/chat/completions", CHAT(",\"max_tokens\":16,\"temperature\":1,\"seed\":42"), 200);
    cJSON *s3 = post_json(&g, "/v1/chat/completions", CHAT(",\"max_tokens\":16,\"temperature\":1"), 200);
    cJSON *s4 = post_json(&g, "/v1/chat/completions", CHAT(",\"max_tokens\":16,\"temperature\":1"), 200);
    assert_string_equal(str(s1, "choices.0.message.content"), str(s2, "choices.0.message.content"));
    assert_int_equal((long long)num(s1, "sdnpu.seed"), 42);
    assert_true(num(s3, "sdnpu.seed") != num(s4, "sdnpu.seed"));
    cJSON_Delete(s1);
    cJSON_Delete(s2);
    cJSON_Delete(s3);
    cJSON_Delete(s4);

    /* text completion */
    cJSON *t = post_json(&g, "/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":8,\"sdnpu\":{\"ignore_eos\":true}}", 200);
    assert_string_equal(str(t, "object"), "text_completion");
    assert_int_equal((int)num(t, "usage.completion_tokens"), 8);
    cJSON_Delete(t);
}

/* Greedy output through the server: speculative (default) = plain ("none") = the library
 * called directly with plain decoding. */
/* Structured output and tool calls over HTTP (the library's constrained decoding behind them). */
#define TOOL_OK "{\"type\":\"function\",\"function\":{\"name\":\"confirm\",\"parameters\":{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"}},\"required\":[\"ok\"]}}}"

static void test_structured(void **state) {
    (void)state;
    /* a grammar (llama-server's field): the answer is one of its sentences, plain and speculative alike */
    const char *methods[] = {"none", "sdnpu"};
    char body[1024];
    for (int m = 0; m < 2; m++) {
        snprintf(body, sizeof body, CHAT(",\"max_tokens\":16,\"grammar\":\"root ::= \\\"yes\\\" | \\\"no\\\"\",\"sdnpu\":{\"method\":\"%s\"}"), methods[m]);
        cJSON *a = post_json(&g, "/v1/chat/completions", body, 200);
        const char *t = str(a, "choices.0.message.content");
        if (strcmp(t, "yes") && strcmp(t, "no")) fail_msg("grammar yes|no (%s): answer '%s'", methods[m], t);
        cJSON_Delete(a);
    }
    /* a forced call: content null, tool_calls, finish_reason tool_calls, arguments valid */
    cJSON *a = post_json(&g, "/v1/chat/completions", CHAT(",\"max_tokens\":96,\"tools\":[" TOOL_OK "],\"tool_choice\":\"required\""), 200);
    assert_string_equal(str(a, "choices.0.finish_reason"), "tool_calls");
    assert_true(cJSON_IsNull(at(a, "choices.0.message.content")));
    assert_string_equal(str(a, "choices.0.message.tool_calls.0.type"), "function");
    assert_string_equal(str(a, "choices.0.message.tool_calls.0.function.name"), "confirm");
    assert_true(!strncmp(str(a, "choices.0.message.tool_calls.0.id"), "call_", 5));
    cJSON *args = cJSON_Parse(str(a, "choices.0.message.tool_calls.0.function.arguments"));
    assert_true(cJSON_IsObject(args) && cJSON_GetArraySize(args) == 1 && cJSON_IsBool(cJSON_GetObjectItem(args, "ok")));
    cJSON_Delete(args);
    cJSON_Delete(a);
    /* streamed: one delta.tool_calls chunk, then finish_reason tool_calls, then [DONE] */
    const char *sbody = CHAT(",\"max_tokens\":96,\"stream\":true,\"tools\":[" TOOL_OK "],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"confirm\"}}");
    reply r = {0};
    assert_int_equal(http(&g, "POST", "/v1/chat/completions", sbody, strlen(sbody), KEY, &r, 0), 200);
    int calls = 0, finals = 0, done = 0;
    for (char *line = strtok(r.body, "\n"); line; line = strtok(NULL, "\n")) {
        assert_true(!strncmp(line, "data: ", 6));
        if (!strcmp(line + 6, "[DONE]")) { done = 1; continue; }
        cJSON *c = cJSON_Parse(line + 6);
        assert_non_null(c);
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(at(c, "choices.0.delta"), "tool_calls");
        if (tc) {
            calls++;
            assert_string_equal(str(c, "choices.0.delta.tool_calls.0.function.name"), "confirm");
            assert_int_equal((int)num(c, "choices.0.delta.tool_calls.0.index"), 0);
        }
        if (cJSON_IsString(at(c, "choices.0.finish_reason"))) {
            finals++;
            assert_string_equal(str(c, "choices.0.finish_reason"), "tool_calls");
        }
        cJSON_Delete(c);
    }
    assert_true(done);
    assert_int_equal(calls, 1);
    assert_int_equal(finals, 1);
    free(r.body);
    /* a keyword the library does not support: 400 naming the field and the keyword */
    cJSON *e = post_json(&g, "/v1/chat/completions", CHAT(",\"max_tokens\":8,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
                                                          "{\"name\":\"d\",\"schema\":{\"type\":\"string\",\"format\":\"date\"}}}"), 400);
    assert_string_equal(str(e, "error.param"), "response_format.json_schema.schema");
    assert_non_null(strstr(str(e, "error.message"), "format"));
    cJSON_Delete(e);
    e = post_json(&g, "/v1/chat/completions", CHAT(",\"max_tokens\":8,\"tool_choice\":\"required\",\"tools\":[{\"type\":\"function\",\"function\":"
                                                   "{\"name\":\"d\",\"parameters\":{\"type\":\"object\",\"properties\":{\"when\":{\"type\":\"string\",\"format\":\"date\"}}}}}]"), 400);
    assert_string_equal(str(e, "error.param"), "tools[0].function.parameters");
    assert_non_null(strstr(str(e, "error.message"), "/properties/when"));
    cJSON_Delete(e);
    e = post_json(&g, "/v1/chat/completions", CHAT(",\"max_tokens\":8,\"stream\":true,\"grammar\":\"root ::= (\""), 400);
    assert_string_equal(str(e, "error.param"), "grammar");
    cJSON_Delete(e);
    /* malformed shapes are refused before generation */
    e = post_json(&g, "/v1/chat/completions", CHAT(",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\"}}"), 400);
    assert_string_equal(str(e, "error.param"), "response_format.json_schema.schema");
    cJSON_Delete(e);
}

static void test_greedy_identity(void **state) {
    (void)state;
    cJSON *spec = post_json(&g, "/v1/chat/completions", CHAT(",\"max_tokens\":40,\"sdnpu\":{\"ignore_eos\":true}"), 200);
    cJSON *plain = post_json(&g, "/v1/chat/completions", CHAT(",\"max_tokens\":40,\"sdnpu\":{\"ignore_eos\":true,\"method\":\"none\"}"), 200);
    assert_string_equal(str(plain, "sdnpu.method"), "none");
    assert_string_equal(str(spec, "choices.0.message.content"), str(plain, "choices.0.message.content"));

    sdnpu_model *m = NULL;
    sdnpu_context *c = NULL;
    sdnpu_error e = {0};
    assert_int_equal(sdnpu_model_load(model_path(), NULL, &m, &e), SDNPU_OK);
    assert_int_equal(sdnpu_context_new(m, NULL, &c, &e), SDNPU_OK);
    sdnpu_message msgs[2] = {{"system", "You answer briefly."}, {"user", "Tell me about the lighthouse on Gull Rock."}};
    sdnpu_request r;
    sdnpu_request_init(&r);
    r.messages = msgs;
    r.n_messages = 2;
    r.method = "none";
    r.max_tokens = 40;
    r.ignore_eos = 1;
    sdnpu_result res;
    sdnpu_result_init(&res);
    assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_OK);
    assert_string_equal(str(plain, "choices.0.message.content"), res.text);
    assert_int_equal((int)num(plain, "usage.completion_tokens"), res.n_tokens);
    sdnpu_result_free(&res);
    sdnpu_context_free(c);
    sdnpu_model_free(m);
    cJSON_Delete(spec);
    cJSON_Delete(plain);
}

/* sdnpu serve --temp, --seed, --top-k, --stop (the sampling options of run and chat) are the
 * settings of requests that leave them out: a request on such a server answers exactly as the
 * same request with those settings spelled out on the shared server, and a request's own
 * settings win (temperature 0 there is the shared server's greedy answer). */
static void test_sampling_defaults(void **state) {
    (void)state;
    server s2;
    start(&s2, "srv-defaults.log", "--temp", "1.3", "--seed", "11", "--top-k", "40", "--stop", "m", NULL);
    const char *plain = ",\"max_tokens\":30,\"sdnpu\":{\"method\":\"none\"}";
    char body[1024];
    snprintf(body, sizeof body, CHAT("%s"), plain);
    cJSON *dflt = post_json(&s2, "/v1/chat/completions", body, 200);
    cJSON *expl = post_json(&g, "/v1/chat/completions",
                            CHAT(",\"max_tokens\":30,\"temperature\":1.3,\"seed\":11,\"stop\":\"m\",\"sdnpu\":{\"method\":\"none\",\"top_k\":40}"), 200);
    assert_int_equal((long)num(dflt, "sdnpu.seed"), 11);
    print_message("--temp 1.3 --seed 11 --top-k 40 --stop m: '%s' (%s)\n", str(dflt, "choices.0.message.content"),
                  str(dflt, "choices.0.finish_reason"));
    assert_string_equal(str(dflt, "choices.0.message.content"), str(expl, "choices.0.message.content"));
    assert_string_equal(str(dflt, "choices.0.finish_reason"), str(expl, "choices.0.finish_reason"));
    assert_null(strchr(str(dflt, "choices.0.message.content"), 'm'));
    assert_string_equal(str(dflt, "choices.0.finish_reason"), "stop"); /* the server's stop string ended it */
    /* the request's own settings win */
    cJSON *own = post_json(&s2, "/v1/chat/completions", CHAT(",\"max_tokens\":30,\"temperature\":0,\"stop\":\"zzzz\",\"sdnpu\":{\"method\":\"none\"}"), 200);
    cJSON *greedy = post_json(&g, "/v1/chat/completions", CHAT(",\"max_tokens\":30,\"sdnpu\":{\"method\":\"none\"}"), 200);
    assert_string_equal(str(own, "choices.0.message.content"), str(greedy, "choices.0.message.content"));
    assert_string_not_equal(str(own, "choices.0.message.content"), str(dflt, "choices.0.message.content"));
    cJSON_Delete(dflt);
    cJSON_Delete(expl);
    cJSON_Delete(own);
    cJSON_Delete(greedy);
    stop(&s2, 15);
}

/* `user` is the task group: the second identical request drafts from the first's answer. */
static void test_history_user(void **state) {
    (void)state;
    /* a fixed draft budget: the default one follows this machine's measured verify cost, which a
     * busy machine can make small */
    const char *body = CHAT(",\"max_tokens\":48,\"user\":\"alice\",\"sdnpu\":{\"ignore_eos\":true,\"draft_max\":16}");
    cJSON *a = post_json(&g, "/v1/chat/completions", body, 200);
    cJSON *b = post_json(&g, "/v1/chat/completions", body, 200);
    assert_int_equal((int)num(a, "sdnpu.history_answers"), 0);
    assert_true(cJSON_IsTrue(at(a, "sdnpu.answer_stored")));
    assert_true(num(b, "sdnpu.history_answers") >= 1);
    assert_string_equal(str(a, "choices.0.message.content"), str(b, "choices.0.message.content"));
    print_message("history: mean accepted tokens per step %.2f -> %.2f\n", num(a, "sdnpu.mean_accepted_tokens"),
                  num(b, "sdnpu.mean_accepted_tokens"));
    assert_true(num(b, "sdnpu.mean_accepted_tokens") > num(a, "sdnpu.mean_accepted_tokens") + 1.0);
    /* an explicit task_group wins over user: a fresh group has no history */
    cJSON *c = post_json(&g, "/v1/chat/completions", CHAT(",\"max_tokens\":8,\"user\":\"alice\",\"task_group\":\"fresh\""), 200);
    assert_int_equal((int)num(c, "sdnpu.history_answers"), 0);
    /* ... unless it asks for the global scope: then alice's answers are there too */
    cJSON *d = post_json(&g, "/v1/chat/completions",
                         CHAT(",\"max_tokens\":8,\"task_group\":\"fresh2\",\"history_scope\":\"global\",\"sdnpu\":{\"draft_max\":16}"), 200);
    assert_true(num(d, "sdnpu.history_answers") >= 2);
    cJSON_Delete(d);
    d = post_json(&g, "/v1/chat/completions", CHAT(",\"max_tokens\":8,\"history_scope\":\"all\""), 400);
    assert_string_equal(str(d, "error.param"), "history_scope");
    cJSON_Delete(d);
    cJSON_Delete(a);
    cJSON_Delete(b);
    cJSON_Delete(c);
}

/* The page (GET /, server/page/): its files with a Content-Security-Policy, no key needed; and
 * the sdnpu extension of streamed chunks that it shows: each chunk's pieces concatenate to its
 * text, name a known source, count steps and tokens that only grow; a repeat for one user
 * drafts from the first answer, so pieces from the history appear (scripts/test-page.sh drives
 * the page itself in a browser). */
static size_t on_head(char *p, size_t sz, size_t n, void *ud) {
    char *h = ud;
    size_t k = sz * n, have = strlen(h);
    if (have + k < 4096) memcpy(h + have, p, k), h[have + k] = 0;
    return k;
}

static void test_page_and_pieces(void **state) {
    (void)state;
    const char *files[][2] = {{"/", "id=\"answer\""}, {"/page.js", "textContent"}, {"/page.css", ".accepted"}};
    for (int i = 0; i < 3; i++) {
        char url[256], head[4096] = "";
        reply r = {0};
        snprintf(url, sizeof url, "http://127.0.0.1:%d%s", g.port, files[i][0]);
        CURL *c = curl_easy_init();
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_head);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, head);
        assert_int_equal(curl_easy_perform(c), CURLE_OK);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
        curl_easy_cleanup(c);
        assert_int_equal(r.status, 200);
        assert_non_null(strstr(r.body, files[i][1]));
        assert_non_null(strstr(head, "Content-Security-Policy: default-src 'none'; script-src 'self'"));
        assert_non_null(strstr(head, "X-Content-Type-Options: nosniff"));
        free(r.body);
    }
    reply r = {0};
    assert_int_equal(http(&g, "POST", "/", "{}", 2, KEY, &r, 0), 405);
    free(r.body);
    static const char *const names[] = {"model", "prompt", "answer", "history", "grammar", "reuse", "draft", "recycled"};
    const char *body = CHAT(",\"max_tokens\":40,\"stream\":true,\"user\":\"carol\",\"sdnpu\":{\"ignore_eos\":true,\"draft_max\":16}");
    for (int round = 0; round < 2; round++) {
        memset(&r, 0, sizeof r);
        assert_int_equal(http(&g, "POST", "/v1/chat/completions", body, strlen(body), KEY, &r, 0), 200);
        int by[8] = {0}, steps = 0, tokens = 0, final_steps = -1, completion = -1;
        for (char *line = strtok(r.body, "\n"); line; line = strtok(NULL, "\n")) {
            if (!strcmp(line + 6, "[DONE]")) continue;
            cJSON *c = cJSON_Parse(line + 6);
            assert_non_null(c);
            const cJSON *content = cJSON_GetObjectItemCaseSensitive(at(c, "choices.0.delta"), "content");
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(c, "sdnpu");
            if (cJSON_IsString(at(c, "choices.0.finish_reason"))) {
                final_steps = (int)num(c, "sdnpu.steps");
                completion = (int)num(c, "usage.completion_tokens");
            } else if (cJSON_IsString(content) && content->valuestring[0]) {
                assert_non_null(x); /* every chunk with text says where it came from */
                char joined[4096] = "";
                const cJSON *p;
                cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(x, "pieces")) {
                    strncat(joined, str(p, "text"), sizeof joined - strlen(joined) - 1);
                    int k = 0;
                    while (k < 8 && strcmp(str(p, "source"), names[k])) k++;
                    if (k == 8) fail_msg("unknown source %s", str(p, "source"));
                    by[k]++;
                }
                assert_string_equal(joined, content->valuestring);
                assert_true(num(x, "steps") > steps && num(x, "tokens") > tokens);
                steps = (int)num(x, "steps"), tokens = (int)num(x, "tokens");
            }
            cJSON_Delete(c);
        }
        free(r.body);
        print_message("round %d: %d tokens in %d steps; pieces: %d model, %d prompt, %d answer, %d history, %d reuse\n", round,
                      completion, final_steps, by[0], by[1], by[2], by[3], by[5]);
        assert_int_equal(final_steps, steps);
        assert_int_equal(completion, tokens);
        if (round == 0) assert_int_equal(by[3], 0);
        else assert_true(by[3] > 10 && steps < 20); /* the repeat is drafted from the first answer */
    }
}

typedef struct bad_case {
    const char *path, *body, *key;
    long status;
    const char *param; /* NULL: null */
} bad_case;

static void test_bad_input(void **state) {
    (void)state;
    char *longmsg = malloc(60000);
    strcpy(longmsg, "{\"messages\":[{\"role\":\"user\",\"content\":\"");
    for (int i = 0; i < 600; i++) strcat(longmsg, "lighthouse keeper "); /* within --max-chars, beyond the context */
    strcat(longmsg, "\"}]}");
    char *verylong = malloc(60000);
    strcpy(verylong, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"user\",\"content\":\"");
    for (int i = 0; i < 2000; i++) strcat(verylong, "lighthouse keeper "); /* more characters than can fit the context */
    strcat(verylong, "\"}]}");
    char *longstream = malloc(strlen(longmsg) + 32);
    strcpy(longstream, longmsg);
    strcpy(longstream + strlen(longstream) - 1, ",\"stream\":true}");
    const bad_case cases[] = {
        {"/v1/chat/completions", "{\"messages\": [", KEY, 400, NULL},
        {"/v1/chat/completions", "[1,2,3]", KEY, 400, NULL},
        {"/v1/chat/completions", "{}", KEY, 400, "messages"},
        {"/v1/chat/completions", "{\"messages\":\"hi\"}", KEY, 400, "messages"},
        {"/v1/chat/completions", "{\"messages\":[]}", KEY, 400, "messages"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", KEY, 400, "messages[0].content"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"wizard\",\"content\":\"hi\"}]}", KEY, 400, "messages[0].role"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":\"hot\"}", KEY, 400, "temperature"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":7}", KEY, 400, "temperature"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"top_p\":-1}", KEY, 400, "top_p"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":\"yes\"}", KEY, 400, "stream"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"seed\":1.5}", KEY, 400, "seed"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":0}", KEY, 400, "max_tokens"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":100000}", KEY, 400, "max_tokens"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_completion_tokens\":-3}", KEY, 400,
         "max_completion_tokens"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", KEY, 400, "stop"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stop\":[\"a\",7]}", KEY, 400, "stop[1]"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"n\":2}", KEY, 400, "n"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"sdnpu\":{\"method\":\"warp\"}}", KEY, 400, "sdnpu.method"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"sdnpu\":{\"draft_max\":99}}", KEY, 400, "sdnpu.draft_max"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"sdnpu\":{\"params\":[\"warp.speed=9\"]}}", KEY, 400,
         "sdnpu.params[0]"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"sdnpu\":{\"repeat_penalty\":\"x\"}}", KEY, 400,
         "sdnpu.repeat_penalty"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"sdnpu\":[1]}", KEY, 400, "sdnpu"},
        {"/v1/chat/completions", "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", KEY, 404, "model"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"caf\xC3\"}]}", KEY, 400, "messages[0].content"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"\xED\xA0\x80\"}]}", KEY, 400, "messages[0].content"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", NULL, 401, NULL},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", "test-key-124", 401, NULL},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", "test-key-1234", 401, NULL},
        {"/v1/completions", "{\"prompt\":5}", KEY, 400, "prompt"},
        {"/v1/completions", "{\"prompt\":[1,-2]}", KEY, 400, "prompt[1]"},
        {"/v1/chat/completions", longmsg, KEY, 400, "messages"}, /* longer than the 1024-token context */
        {"/v1/chat/completions", longstream, KEY, 400, "messages"}, /* the same, streamed: refused before the stream starts */
        {"/v1/chat/completions", verylong, KEY, 400, "messages[1].content"}, /* past --max-chars: refused before tokenizing */
        /* nothing is changed without a word: a NUL cut the text, data after the JSON and a second
         * key were ignored */
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0000bbbb\"}]}", KEY, 400, "messages[0].content"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]} xyz", KEY, 400, NULL},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\",\"role\":\"system\"}]}", KEY, 400, "messages[0].role"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2,\"max_tokens\":900}", KEY, 400,
         "max_tokens"},
        {"/v1/completions", "{\"prompt\":\"Once\\u0000 upon\"}", KEY, 400, "prompt"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *c = &cases[i];
        reply r = {0};
        http(&g, "POST", c->path, c->body, strlen(c->body), c->key, &r, 0);
        if (r.status != c->status) fail_msg("case %zu (%.60s): status %ld, want %ld: %s", i, c->body, r.status, c->status, r.body ? r.body : "");
        cJSON *j = cJSON_Parse(r.body);
        if (!j) fail_msg("case %zu: the error is not JSON: %s", i, r.body ? r.body : "");
        assert_true(cJSON_IsString(at(j, "error.message")));
        assert_true(cJSON_IsString(at(j, "error.type")));
        const cJSON *param = at(j, "error.param");
        if (c->param) {
            if (!cJSON_IsString(param) || strcmp(param->valuestring, c->param))
                fail_msg("case %zu (%.60s): param %s, want %s", i, c->body, cJSON_IsString(param) ? param->valuestring : "null", c->param);
        } else {
            assert_true(cJSON_IsNull(param));
        }
        cJSON_Delete(j);
        free(r.body);
    }
    free(longmsg);
    free(longstream);
    free(verylong);

    /* over the body limit (64 KiB here): with Content-Length, and the same streamed in chunks */
    size_t big = 100000;
    char *b = malloc(big);
    memset(b, 'a', big);
    reply r = {0};
    assert_int_equal(http(&g, "POST", "/v1/chat/completions", b, big, KEY, &r, 0), 413);
    free(r.body);

    /* hostile bodies: deep nesting, binary noise, an empty body; the server answers each */
    size_t deep = 60000;
    char *d = malloc(deep + 1);
    for (size_t i = 0; i < deep; i++) d[i] = i < deep / 2 ? '[' : ']';
    d[deep] = 0;
    memset(&r, 0, sizeof r);
    assert_int_equal(http(&g, "POST", "/v1/chat/completions", d, deep, KEY, &r, 0), 400);
    free(r.body);
    for (size_t i = 0; i < 4096; i++) b[i] = (char)(rand() & 0xff);
    memset(&r, 0, sizeof r);
    assert_int_equal(http(&g, "POST", "/v1/chat/completions", b, 4096, KEY, &r, 0), 400);
    free(r.body);
    memset(&r, 0, sizeof r);
    assert_int_equal(http(&g, "POST", "/v1/chat/completions", "", 0, KEY, &r, 0), 400);
    free(r.body);
    memset(&r, 0, sizeof r);
    assert_int_equal(http(&g, "GET", "/v1/chat/completions", NULL, 0, KEY, &r, 0), 405);
    free(r.body);
    free(d);
    free(b);
    memset(&r, 0, sizeof r);
    assert_int_equal(http(&g, "GET", "/health", NULL, 0, NULL, &r, 0), 200);
    free(r.body);
}

/* Hostile input: 300 seeded mutations of a valid body (bytes flipped, inserted, deleted, cut);
 * every one is answered with 200 or a 4xx JSON error, and the server stays healthy. */
static void test_mutated_bodies(void **state) {
    (void)state;
    const char *base = "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"caf\u00e9\"}]}],"
                       "\"max_tokens\":3,\"stop\":[\"x\"],\"temperature\":0.5,\"seed\":7,\"user\":\"m\",\"sdnpu\":{\"method\":\"pld\",\"draft_max\":4}}";
    const char junk[] = "{}[]\",:\\0123456789.eE-+ntfu\x00\x80\xC3\xFF";
    uint64_t x = 0x9E3779B97F4A7C15ull;
    char buf[1024];
    int counts[6] = {0};
    for (int it = 0; it < 300; it++) {
        size_t n = strlen(base);
        memcpy(buf, base, n);
        int edits = 1 + it % 4;
        for (int k = 0; k < edits; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t at = (size_t)(x >> 20) % n;
            char c = junk[(x >> 8) % (sizeof junk - 1)];
            switch (x % 4) {
            case 0: buf[at] = c; break;                                                     /* replace */
            case 1: if (n < sizeof buf - 1) { memmove(buf + at + 1, buf + at, n - at); buf[at] = c; n++; } break; /* insert */
            case 2: memmove(buf + at, buf + at + 1, n - at - 1); n--; break;                   /* delete */
            default: n = at + 1; break;                                                      /* cut */
            }
        }
        reply r = {0};
        long st = http(&g, "POST", "/v1/chat/completions", buf, n, KEY, &r, 0);
        if (st != 200 && st != 400 && st != 404) fail_msg("mutation %d: status %ld: %.*s", it, st, (int)n, buf);
        if (st != 200) {
            cJSON *j = cJSON_Parse(r.body);
            if (!j || !cJSON_IsString(at(j, "error.message"))) fail_msg("mutation %d: not a JSON error: %s", it, r.body ? r.body : "");
            cJSON_Delete(j);
        }
        counts[st == 200 ? 0 : st == 400 ? 1 : 2]++;
        free(r.body);
    }
    print_message("mutated bodies: %d answered, %d refused (400), %d unknown model (404)\n", counts[0], counts[1], counts[2]);
    reply r = {0};
    assert_int_equal(http(&g, "GET", "/health", NULL, 0, NULL, &r, 0), 200);
    free(r.body);
}

typedef struct bg {
    const server *s;
    const char *body;
    reply r;
    volatile int seen;
    volatile int hang_up; /* set: the client hangs up at the next bytes */
} bg;

static void *bg_post(void *arg) {
    bg *b = arg;
    b->r.seen = &b->seen;
    b->r.hang_up = &b->hang_up;
    http(b->s, "POST", "/v1/chat/completions", b->body, strlen(b->body), KEY, &b->r, 0);
    return NULL;
}

static void wait_seen(bg *b) {
    double t0 = now_s();
    while (!b->seen) {
        if (now_s() - t0 > 30) fail_msg("no answer to the first request");
        usleep(2000);
    }
}

/* ---- cancellation ---- */

/* Wait until no request runs or waits: the event a request ends with, cancelled or not. The
 * bound only guards against a server that hangs (the requests below end by themselves, when
 * not cancelled, in seconds; tens of seconds on a busy machine). */
static void wait_idle(const server *s, const char *what) {
    for (double t0 = now_s(); metric(s, "sdnpu_slots_busy") > 0 || metric(s, "sdnpu_queue_length") > 0; usleep(5000))
        if (now_s() - t0 > 300) fail_msg("%s: the server is still busy after 300 s", what);
}

/* Wait until the server shows `want` requests running (slots) or waiting (queue). */
static void wait_metric(const server *s, const char *name, double want, const char *what) {
    double done0 = metric(s, "sdnpu_requests_completed_total");
    for (double t0 = now_s(); metric(s, name) < want; usleep(2000)) {
        if (metric(s, "sdnpu_requests_completed_total") > done0) fail_msg("%s: a request ended before %s reached %g", what, name, want);
        if (now_s() - t0 > 120) fail_msg("%s: %s did not reach %g within 120 s", what, name, want);
    }
}

/* A request on a raw socket from 127.0.0.1 (no answer is read); returns the socket. */
static int send_raw(const server *s, const char *body) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) fail_msg("connect to port %d: %s", s->port, strerror(errno));
    char head[512];
    int n = snprintf(head, sizeof head,
                     "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " KEY "\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                     strlen(body));
    assert_int_equal(send(fd, head, (size_t)n, MSG_NOSIGNAL), n);
    assert_int_equal(send(fd, body, strlen(body), MSG_NOSIGNAL), (ssize_t)strlen(body));
    return fd;
}

/* The counters a cancelled request must leave: cancelled +k, nothing completed, no tokens counted. */
typedef struct counts {
    double cancelled, completed, tokens;
} counts;

static counts counters(const server *s) {
    return (counts){metric(s, "sdnpu_requests_cancelled_total"), metric(s, "sdnpu_requests_completed_total"),
                    metric(s, "sdnpu_tokens_generated_total")};
}

static void expect_cancelled(const server *s, counts c0, int k, const char *what) {
    counts c1 = counters(s);
    if (c1.completed != c0.completed)
        fail_msg("%s: %g request(s) ran to the end of their answers although their clients had hung up", what, c1.completed - c0.completed);
    if (c1.cancelled != c0.cancelled + k) fail_msg("%s: %g request(s) counted as cancelled, want %d", what, c1.cancelled - c0.cancelled, k);
    assert_true(c1.tokens == c0.tokens); /* cancelled requests are not counted as generated answers */
}

/* A client that hangs up cancels its request: streaming (after the first chunk), not streaming
 * (while its answer is being generated) and queued (it never runs). The test hangs up on
 * events, not after a delay: when the first chunk arrived, when /metrics shows the request
 * running or queued; then it waits until the server is idle and checks the counters. Each
 * request asks for 8,000 tokens (about 2.5 s of one core here; 4,000 took 0.67 s), so it
 * cannot end by itself before its hang-up is noticed (within a millisecond, 38 ms at worst on
 * a machine with load 20: srv_job_wait polls the socket); a server that missed the hang-up
 * would let it run to its end, which fails the case. The server is its own (one slot, a fresh
 * context): what earlier cases left does not matter. */
static void test_cancel_on_disconnect(void **state) {
    (void)state;
    server s;
    start(&s, "server-cancel.log", "--slots", "1", "--threads", "1", "--queue", "2", "--ctx", "8192", NULL);
    const char *streamed = CHAT(",\"max_tokens\":8000,\"stream\":true,\"sdnpu\":{\"ignore_eos\":true,\"method\":\"none\"}");
    const char *plain = CHAT(",\"max_tokens\":8000,\"sdnpu\":{\"ignore_eos\":true,\"method\":\"none\"}");

    /* streaming: the client hangs up once the first chunk arrived */
    counts c0 = counters(&s);
    reply r = {.abort_after = 1};
    http(&s, "POST", "/v1/chat/completions", streamed, strlen(streamed), KEY, &r, 0);
    assert_true(r.len > 0); /* the stream had started */
    free(r.body);
    wait_idle(&s, "streaming");
    expect_cancelled(&s, c0, 1, "streaming");

    /* not streaming: the client hangs up while its answer is generated */
    c0 = counters(&s);
    int fd = send_raw(&s, plain);
    wait_metric(&s, "sdnpu_slots_busy", 1, "not streaming");
    close(fd);
    wait_idle(&s, "not streaming");
    expect_cancelled(&s, c0, 1, "not streaming");

    /* queued behind a stream: its client hangs up, then the stream's; neither runs to its end */
    c0 = counters(&s);
    bg a = {.s = &s, .body = streamed};
    pthread_t ta;
    pthread_create(&ta, NULL, bg_post, &a);
    wait_seen(&a);
    fd = send_raw(&s, plain);
    wait_metric(&s, "sdnpu_queue_length", 1, "queued");
    close(fd);
    a.hang_up = 1;
    pthread_join(ta, NULL);
    free(a.r.body);
    wait_idle(&s, "queued");
    expect_cancelled(&s, c0, 2, "queued");

    reply h = {0};
    assert_int_equal(http(&s, "GET", "/health", NULL, 0, NULL, &h, 0), 200);
    free(h.body);
    stop(&s, 30);
}

/* One slot, a queue of one: a running request, a queued one, and a third gets 503. Then the
 * running stream's client hangs up and the queued request is answered. The stream asks for
 * 16,000 tokens, far more than it can decode while the test queues and refuses the others; it
 * never has to end by itself (it used to run its 4,000 tokens to the end: up to 14 s on a busy
 * machine). */
static void test_queue_full(void **state) {
    (void)state;
    server s;
    start(&s, "server-queue.log", "--slots", "1", "--queue", "1", "--ctx", "16384", NULL);
    bg a = {.s = &s, .body = CHAT(",\"max_tokens\":16000,\"stream\":true,\"sdnpu\":{\"ignore_eos\":true,\"method\":\"none\"}")};
    bg b = {.s = &s, .body = CHAT(",\"max_tokens\":4")};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, bg_post, &a);
    wait_seen(&a); /* a is running */
    pthread_create(&tb, NULL, bg_post, &b);
    double t0 = now_s();
    while (metric(&s, "sdnpu_queue_length") < 1) {
        if (now_s() - t0 > 10) fail_msg("the second request was not queued");
        usleep(2000);
    }
    reply r = {0};
    assert_int_equal(http(&s, "POST", "/v1/chat/completions", b.body, strlen(b.body), KEY, &r, 0), 503);
    cJSON *j = cJSON_Parse(r.body);
    assert_non_null(strstr(str(j, "error.message"), "queue"));
    cJSON_Delete(j);
    free(r.body);
    a.hang_up = 1;
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_non_null(strstr(a.r.body, "chat.completion.chunk")); /* the stream ran (curl reports no status for a transfer it aborted) */
    assert_int_equal(b.r.status, 200);
    cJSON *jb = cJSON_Parse(b.r.body);
    assert_non_null(jb);
    assert_string_equal(str(jb, "object"), "chat.completion");
    cJSON_Delete(jb);
    free(a.r.body);
    free(b.r.body);
    stop(&s, 30);
}

/* The prefix cache the slots share (on by default), with its directory: a document asked about
 * again after another one takes its blocks from the cache (one slot: its own context held the
 * other document), a restarted server takes them from the directory, an opted-out request
 * neither, and every answer is the one of a server without the cache; /metrics counts it. */
#define DOCREQ(doc, extra)                                                                                                        \
    "{\"model\":\"tiny\",\"max_tokens\":12,\"messages\":[{\"role\":\"user\",\"content\":\"Document: " doc                              \
    " Question: what is it about?\"}]" extra "}"
#define DOC1 "The lighthouse on Gull Rock was built in 1871. Its lamp was repaired in 1903 and again in 1950. The council voted to repair " \
             "the lamp once more and to open the lighthouse to visitors on Sundays, and the keeper's cottage became a museum of the coast."
#define DOC2 "The harbour commission met on Tuesday to discuss the new breakwater, the dredging of the channel, the fees for moorings, " \
             "the ferry timetable for the summer and the repairs to the fish market roof, which leaks whenever the wind is from the east."

static void test_prefix_cache(void **state) {
    (void)state;
    const char *dir = tu_tmp("serve-pcache");
    const char *bodies[4] = {DOCREQ(DOC1 DOC1, ""), DOCREQ(DOC2 DOC2, ""), DOCREQ(DOC1 DOC1, ""), DOCREQ(DOC1 DOC1, ",\"sdnpu\":{\"prefix_cache\":false}")};
    char *want[4];
    server off, on;
    start(&off, "server-pc-off.log", "--slots", "1", "--prefix-cache-mb", "0", NULL);
    for (int i = 0; i < 4; i++) {
        cJSON *a = post_json(&off, "/v1/chat/completions", bodies[i], 200);
        want[i] = strdup(str(a, "choices.0.message.content"));
        assert_int_equal((int)num(a, "sdnpu.prefix_cache_tokens"), 0);
        cJSON_Delete(a);
    }
    reply r = {0};
    assert_int_equal(http(&off, "GET", "/metrics", NULL, 0, KEY, &r, 0), 200);
    assert_null(strstr(r.body, "sdnpu_prefix_cache_lookups_total")); /* off: no such metric */
    free(r.body);
    stop(&off, 30);
    start(&on, "server-pc-on.log", "--slots", "1", "--prefix-cache", dir, NULL);
    double cached[4];
    for (int i = 0; i < 4; i++) {
        cJSON *a = post_json(&on, "/v1/chat/completions", bodies[i], 200);
        assert_string_equal(str(a, "choices.0.message.content"), want[i]);
        cached[i] = num(a, "sdnpu.prefix_cache_tokens");
        cJSON_Delete(a);
    }
    print_message("prefix cache: %.0f, %.0f, %.0f, %.0f prompt tokens from it\n", cached[0], cached[1], cached[2], cached[3]);
    assert_true(cached[0] == 0 && cached[1] == 0 && cached[2] >= 64 && cached[3] == 0);
    assert_true(metric(&on, "sdnpu_prefix_cache_lookups_total{result=\"hit_memory\"}") >= 1);
    assert_true(metric(&on, "sdnpu_prefix_cache_disk_writes_total") >= 2);
    assert_true(metric(&on, "sdnpu_prefix_cache_disk_enabled") == 1);
    stop(&on, 30);
    /* restarted on the same directory: the blocks come from disk */
    start(&on, "server-pc-restart.log", "--slots", "2", "--prefix-cache", dir, NULL);
    cJSON *a = post_json(&on, "/v1/chat/completions", bodies[0], 200);
    assert_string_equal(str(a, "choices.0.message.content"), want[0]);
    assert_true(num(a, "sdnpu.prefix_disk_tokens") >= 64);
    assert_true(num(a, "sdnpu.prefix_saved_ms") > 0);
    cJSON_Delete(a);
    assert_true(metric(&on, "sdnpu_prefix_cache_lookups_total{result=\"hit_disk\"}") >= 1);
    a = post_json(&on, "/v1/chat/completions", DOCREQ(DOC1, ",\"sdnpu\":{\"prefix_cache\":1}"), 400);
    assert_string_equal(str(a, "error.param"), "sdnpu.prefix_cache");
    cJSON_Delete(a);
    stop(&on, 30);
    for (int i = 0; i < 4; i++) free(want[i]);
}

/* SIGTERM during a long streamed request: the server stops within the drain bound plus a
 * margin, exits 0, and the stream ends (cut short with an error event). */
static void test_sigterm(void **state) {
    (void)state;
    server s;
    const char *db = tu_tmp("term.sqlite");
    start(&s, "server-term.log", "--slots", "1", "--drain", "0.2", "--ctx", "16384", "--history", db, NULL);
    cJSON *first = post_json(&s, "/v1/chat/completions", CHAT(",\"max_tokens\":8,\"user\":\"bob\",\"sdnpu\":{\"ignore_eos\":true}"), 200);
    assert_true(cJSON_IsTrue(at(first, "sdnpu.answer_stored")));
    cJSON_Delete(first);
    bg a = {.s = &s, .body = CHAT(",\"max_tokens\":16000,\"stream\":true,\"user\":\"bob\",\"sdnpu\":{\"ignore_eos\":true,\"method\":\"none\"}")};
    pthread_t ta;
    pthread_create(&ta, NULL, bg_post, &a);
    wait_seen(&a);
    double t0 = now_s();
    stop(&s, 10);
    print_message("stopped %.2f s after SIGTERM\n", now_s() - t0);
    pthread_join(ta, NULL);
    assert_non_null(a.r.body);
    assert_non_null(strstr(a.r.body, "data: [DONE]"));
    /* cut short, not finished within the drain bound: the request is long enough that it cannot
     * finish in 0.2 s (about 0.2 ms per token on this test model with today's kernels) */
    assert_non_null(strstr(a.r.body, "shutting down"));
    assert_null(strstr(a.r.body, "\"finish_reason\":\"length\""));
    free(a.r.body);
    FILE *f = fopen(s.log, "r");
    char line[512];
    int stopped = 0;
    while (f && fgets(line, sizeof line, f)) stopped |= strstr(line, "sdnpu serve: stopped") != NULL;
    if (f) fclose(f);
    assert_true(stopped);
    /* the history store was closed cleanly: intact, the first answer kept, the cut one not */
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
    sqlite3_finalize(st);
    sqlite3_close(h);
    sdnpu_model *m = NULL;
    sdnpu_context *c = NULL;
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.history_path = db;
    sdnpu_error e = {0};
    assert_int_equal(sdnpu_model_load(model_path(), NULL, &m, &e), SDNPU_OK);
    assert_int_equal(sdnpu_context_new(m, &cp, &c, &e), SDNPU_OK);
    sdnpu_message msgs[2] = {{"system", "You answer briefly."}, {"user", "Tell me about the lighthouse on Gull Rock."}};
    sdnpu_request r;
    sdnpu_request_init(&r);
    r.messages = msgs;
    r.n_messages = 2;
    r.task_group = "bob";
    r.max_tokens = 4;
    r.store_answer = 0;
    sdnpu_result res;
    sdnpu_result_init(&res);
    assert_int_equal(sdnpu_generate(c, &r, &res, &e), SDNPU_OK);
    assert_int_equal(res.stats.history_answers, 1);
    sdnpu_result_free(&res);
    sdnpu_context_free(c);
    sdnpu_model_free(m);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    /* the verify cost curve is measured once for all servers and this process's own requests,
     * in the scratch folder: nothing read from or written to the user's ~/.cache/sdnpu */
    setenv("SDNPU_CACHE", tu_tmpdir(), 1);
    model_path(); /* write the model once, before any server starts */
    const struct CMUnitTest shared[] = {
        cmocka_unit_test(test_endpoints),
        cmocka_unit_test(test_chat_and_stream),
        cmocka_unit_test(test_structured),
        cmocka_unit_test(test_greedy_identity),
        cmocka_unit_test(test_sampling_defaults),
        cmocka_unit_test(test_history_user),
        cmocka_unit_test(test_page_and_pieces),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_mutated_bodies),
    };
    const struct CMUnitTest own[] = {
        cmocka_unit_test(test_cancel_on_disconnect),
        cmocka_unit_test(test_queue_full),
        cmocka_unit_test(test_prefix_cache),
        cmocka_unit_test(test_sigterm),
    };
    int rc = cmocka_run_group_tests_name("server", shared, setup, teardown);
    rc |= cmocka_run_group_tests_name("server lifecycle", own, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
