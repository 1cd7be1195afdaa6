/* test_server_request.c - the server's request parser (server/openai.c, server/json_scan.c)
 * and request-head check (server/http_head.c) called directly, without HTTP: the error answers
 * stay well-formed UTF-8 when a field quoted in them is cut at the length of the error's
 * message or param (found by fuzz/fuzz_server_request: a 1024-byte message quoting a long
 * model name ended inside a character); a body accepted both ways (chat, completion) gives a
 * job freed through the pool's path; nothing in a body is changed without a word (\u0000, raw
 * control characters, data after the JSON, a key twice: 400 naming the field); the limits on
 * messages, characters, JSON values and nesting; the scan's bound on the parse's memory against
 * what cJSON really allocates (counted by the allocator); the strict head check against a
 * table of heads, every prefix of a good head waiting for more; and structured output and
 * tool calls (server/tools.c): response_format, grammar and json_schema read into the
 * request's constraint, tools and tool_choice checked and rendered into the system prompt in
 * both tool-call formats, tool calls and results of the history rendered, answers read back
 * as tool calls, and the library's constraint errors answered naming the field. */
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "server/http_head.h"
#include "server/json_scan.h"
#include "server/openai.h"
#include "server/tools.h"

static const srv_api_config cfg = {.model_id = "tiny", .model_path = NULL, .n_ctx = 1024, .has_history = 0};
/* small limits: 4 messages, 10 characters, 100 JSON values */
static const srv_api_config small = {.model_id = "tiny", .n_ctx = 1024, .max_values = 100, .max_messages = 4, .max_chars = 10};

/* Parse body (expected to fail with status and param), check the answer is UTF-8 JSON. */
static void refused(const char *body, int chat, int status, const char *param) {
    srv_error e;
    memset(&e, 0, sizeof e);
    srv_job *j = srv_parse_request(body, strlen(body), chat, &cfg, NULL, &e);
    assert_null(j);
    assert_int_equal(e.status, status);
    if (param) assert_string_equal(e.param, param);
    assert_true(srv_utf8_valid(e.param, strlen(e.param)));
    assert_true(srv_utf8_valid(e.message, strlen(e.message)));
    char *js = srv_error_json(&e);
    assert_non_null(js);
    assert_true(srv_utf8_valid(js, strlen(js)));
    cJSON *o = cJSON_Parse(js);
    assert_non_null(o);
    cJSON_Delete(o);
    free(js);
}

/* A string of n copies of the 2-byte character é after one ASCII byte, so that a cut at an
 * even offset from the start of the text falls inside a character. */
static char *odd_e(size_t n) {
    char *s = malloc(2 * n + 2);
    s[0] = 'a';
    for (size_t i = 0; i < n; i++) s[1 + 2 * i] = (char)0xC3, s[2 + 2 * i] = (char)0xA9;
    s[1 + 2 * n] = 0;
    return s;
}

static void test_cut_model_name(void **state) {
    (void)state;
    char *name = odd_e(1000); /* 2001 bytes: the 1024-byte message holds about half */
    char *body = malloc(strlen(name) + 128);
    sprintf(body, "{\"model\": \"%s\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", name);
    refused(body, 1, 404, "model");
    /* every cut position: the name one byte longer each time */
    for (size_t n = 490; n < 520; n++) {
        char *nm = odd_e(n);
        sprintf(body, "{\"model\": \"%s\", \"prompt\": \"x\"}", nm);
        refused(body, 0, 404, "model");
        free(nm);
    }
    free(body);
    free(name);
}

static void test_cut_param_path(void **state) {
    (void)state;
    /* a bad string under a key path longer than the 128-byte param and the 256-byte path
     * buffer: "kk." then 'a' and é's, so both cuts fall inside a character */
    char *k2 = odd_e(200);
    char *body = malloc(1024);
    sprintf(body, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"kk\": {\"%s\": \"caf\xC3\"}}", k2);
    refused(body, 1, 400, NULL);
    free(body);
    free(k2);
}

static void test_accepted(void **state) {
    (void)state;
    static srv_pool pool = {.mu = PTHREAD_MUTEX_INITIALIZER};
    const char *body = "{\"messages\": [{\"role\": \"developer\", \"content\": [{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"text\", \"text\": \"b\"}]}],"
                       " \"prompt\": \"p\", \"stop\": [\"x\"], \"sdnpu\": {\"method\": \"pld\", \"params\": [\"pld.max_ngram=3\"]}}";
    srv_error e;
    srv_job *j = srv_parse_request(body, strlen(body), 1, &cfg, NULL, &e);
    assert_non_null(j);
    assert_int_equal(j->r.n_messages, 1);
    assert_string_equal(j->r.messages[0].role, "system");
    assert_string_equal(j->r.messages[0].content, "ab");
    assert_int_equal(j->r.n_stop, 1);
    assert_int_equal(j->r.n_params, 1);
    srv_job_unref(&pool, j);
    j = srv_parse_request(body, strlen(body), 0, &cfg, NULL, &e);
    assert_non_null(j);
    assert_string_equal(j->r.prompt, "p");
    srv_job_unref(&pool, j);
}


/* Parse body (length n) with config c: the status (200: accepted) and the param it names. */
static int parse_status(const srv_api_config *c, const char *body, size_t n, int chat, char *param, size_t cap) {
    static srv_pool pool = {.mu = PTHREAD_MUTEX_INITIALIZER};
    srv_error e;
    memset(&e, 0, sizeof e);
    srv_job *j = srv_parse_request(body, n, chat, c, NULL, &e);
    if (j) {
        srv_job_unref(&pool, j);
        snprintf(param, cap, "%s", "");
        return 200;
    }
    snprintf(param, cap, "%s", e.param);
    assert_true(srv_utf8_valid(e.message, strlen(e.message)));
    return e.status;
}

typedef struct req_case {
    const char *body;
    int chat, status;
    const char *param; /* "" : null */
    int small;         /* parsed with the small limits */
} req_case;

#define MSG(content) "{\"messages\":[{\"role\":\"user\",\"content\":\"" content "\"}]"

/* Nothing in a body changes without a word, and the limits name their field. */
static void test_no_silent_change(void **state) {
    (void)state;
    const req_case cases[] = {
        {MSG("a") "}", 1, 200, "", 0},
        {MSG("a") "}  \r\n\t ", 1, 200, "", 0},                         /* whitespace after the value is fine */
        {MSG("a\\u0000bbbb") "}", 1, 400, "messages[0].content", 0},    /* cJSON would end the string at the NUL */
        {MSG("a\\\\u0000") "}", 1, 200, "", 0},                        /* an escaped backslash, then text "u0000" */
        {MSG("a\x01b") "}", 1, 400, "messages[0].content", 0},           /* raw control characters must be escaped */
        {MSG("line\nbreak") "}", 1, 400, "messages[0].content", 0},
        {MSG("line\\nbreak") "}", 1, 200, "", 0},
        {"{\"prompt\":\"x\\u0000y\"}", 0, 400, "prompt", 0},
        {MSG("a") ",\"stop\":[\"ok\",\"\\u0000\"]}", 1, 400, "stop[1]", 0},
        {MSG("a") ",\"x\\u0000\":1}", 1, 400, "", 0},                     /* a key holding NUL: its object is the top */
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"k\\u0000\":1}]}", 1, 400, "messages[0]", 0},
        {MSG("a") "} xyz", 1, 400, "", 0},                                /* data after the JSON value */
        {MSG("a") "}{}", 1, 400, "", 0},
        {MSG("a") "}\n" MSG("b") "}", 1, 400, "", 0},
        {MSG("a") ",\"messages\":[]}", 1, 400, "messages", 0},           /* a key twice: cJSON would take the first */
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"role\":\"system\"}]}", 1, 400, "messages[0].role", 0},
        {MSG("a") ",\"max_tokens\":5,\"max_tokens\":6}", 1, 400, "max_tokens", 0},
        {MSG("a") ",\"model\":\"tiny\",\"mod\\u0065l\":\"other\"}", 1, 400, "model", 0}, /* the same key, escaped */
        {MSG("a") ",\"sdnpu\":{\"method\":\"pld\",\"method\":\"none\"}}", 1, 400, "sdnpu.method", 0},
        {MSG("a") ",\"tools\":[{\"x\":1,\"x\":2}]}", 1, 400, "tools[0].x", 0},    /* ignored fields too */
        /* limits: 4 messages, 10 characters (not bytes), 100 values, nesting 64 */
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"a\"},"
         "{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"a\"}]}", 1, 400, "messages", 1},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"hello\"},{\"role\":\"user\",\"content\":\"world!\"}]}", 1, 400,
         "messages[1].content", 1},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"h\u00e9llo\"},{\"role\":\"user\",\"content\":\"w\u00f6rld\"}]}", 1, 200, "", 1},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hello\"},{\"type\":\"text\",\"text\":\"world!\"}]}]}",
         1, 400, "messages[0].content", 1},
        {"{\"prompt\":\"eleven char\"}", 0, 400, "prompt", 1},
        {"{\"prompt\":\"ten chars!\"}", 0, 200, "", 1},
    };
    char param[160];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const req_case *c = &cases[i];
        int st = parse_status(c->small ? &small : &cfg, c->body, strlen(c->body), c->chat, param, sizeof param);
        if (st != c->status || strcmp(param, c->param))
            fail_msg("case %zu (%s): status %d param '%s', want %d '%s'", i, c->body, st, param, c->status, c->param);
    }
    /* an object of 40 keys holding one twice (found by sorting) */
    char big[2048] = MSG("a") ",\"tools\":{";
    for (int k = 0; k < 40; k++) sprintf(big + strlen(big), "%s\"k%d\":%d", k ? "," : "", k, k);
    strcat(big, ",\"k7\":0}}");
    assert_int_equal(parse_status(&cfg, big, strlen(big), 1, param, sizeof param), 400);
    assert_string_equal(param, "tools.k7");
    /* more JSON values than the limit: 413 before parsing; nesting deeper than 64: 400 */
    char *arr = malloc(4096);
    strcpy(arr, "{\"prompt\":[");
    for (int k = 0; k < 150; k++) strcat(arr, k ? ",1" : "1");
    strcat(arr, "]}");
    assert_int_equal(parse_status(&small, arr, strlen(arr), 0, param, sizeof param), 413);
    assert_int_equal(parse_status(&cfg, arr, strlen(arr), 0, param, sizeof param), 200);
    strcpy(arr, "{\"prompt\":\"x\",\"tools\":");
    for (int k = 0; k < 70; k++) strcat(arr, "[");
    for (int k = 0; k < 70; k++) strcat(arr, "]");
    strcat(arr, "}");
    assert_int_equal(parse_status(&cfg, arr, strlen(arr), 0, param, sizeof param), 400);
    free(arr);
    /* a raw NUL byte inside a string (the body is not a C string) */
    const char nul[] = "{\"prompt\":\"ab\0cd\"}";
    assert_int_equal(parse_status(&cfg, nul, sizeof nul - 1, 0, param, sizeof param), 400);
    assert_string_equal(param, "prompt");
}

/* ---- the parse's memory: the scan's bound against what cJSON allocates ---- */

static size_t live, peak;
static void *count_malloc(size_t n) {
    void *p = malloc(n);
    if (p) live += malloc_usable_size(p) + sizeof(size_t), peak = live > peak ? live : peak;
    return p;
}
static void count_free(void *p) {
    if (p) live -= malloc_usable_size(p) + sizeof(size_t);
    free(p);
}

/* Bytes cJSON allocates at most while it parses body (valid JSON or not), measured by the
 * allocator. */
static size_t parse_bytes(const char *body, size_t n, int valid) {
    cJSON_Hooks h = {count_malloc, count_free};
    cJSON_InitHooks(&h);
    live = peak = 0;
    cJSON *o = cJSON_ParseWithLength(body, n);
    assert_true(valid ? o != NULL : o == NULL);
    cJSON_Delete(o);
    assert_int_equal(live, 0);
    cJSON_InitHooks(NULL);
    return peak;
}

static void test_tree_bound(void **state) {
    (void)state;
    size_t cap = 4u << 20;
    char *b = malloc(cap);
    for (int shape = 0; shape < 6; shape++) {
        size_t n = 0;
        n += (size_t)sprintf(b, "{\"messages\":[");
        for (int i = 0; n + 200 < cap && i < 30000; i++) {
            const char *sep = i ? "," : "";
            switch (shape) {
            case 0: n += (size_t)sprintf(b + n, "%s{\"role\":\"user\",\"content\":\"a\"}", sep); break;  /* many tiny messages */
            case 1: n += (size_t)sprintf(b + n, "%s0", sep); break;                                     /* token ids */
            case 2: n += (size_t)sprintf(b + n, "%s\"\"", sep); break;                                /* empty strings */
            case 3: n += (size_t)sprintf(b + n, "%s{\"k%d\":\"v\",\"\":[]}", sep, i); break;          /* keys, empty arrays */
            case 4: n += (size_t)sprintf(b + n, "%s\"%0100d\\n\\u00e9\"", sep, i); break;            /* longer strings, escapes */
            default: n += (size_t)sprintf(b + n, "%s[[[{}]],null,true,1e5]", sep); break;               /* nesting, literals */
            }
        }
        n += (size_t)sprintf(b + n, "]}");
        srv_json_scan s;
        assert_int_equal(srv_json_scan_body(b, n, (size_t)-1, 64, &s), 0);
        size_t real = parse_bytes(b, n, 1), bound = srv_json_tree_bytes(&s, n);
        print_message("shape %d: %zu bytes of JSON, %zu values, %zu keys: cJSON allocated %zu bytes, bound %zu\n", shape, n, s.values, s.keys,
                      real, bound);
        if (real > bound) fail_msg("shape %d: cJSON allocated %zu bytes, more than the bound %zu", shape, real, bound);
        assert_true(bound < 4 * real + n); /* and the bound is not absurdly loose */
    }
    free(b);
    /* malformed bodies: cJSON allocates a value's node before it finds the value is not one
     * (found by fuzz_server_request: ",") */
    const char *bad[] = {",", "[,,,,", "[[[[[[[[[[[[[[[[,", "{\"a\" \"b\"}", "{\"a\":[{\"b\":[\"c\",}", "[\"x\" \"y\" \"z\" ,"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        srv_json_scan s;
        srv_json_scan_body(bad[i], strlen(bad[i]), (size_t)-1, 64, &s);
        size_t real = parse_bytes(bad[i], strlen(bad[i]), 0), bound = srv_json_tree_bytes(&s, strlen(bad[i]));
        if (real > bound) fail_msg("'%s': cJSON allocated %zu bytes, more than the bound %zu", bad[i], real, bound);
    }
}

/* ---- request heads ---- */

typedef struct head_case {
    const char *head;
    int status;
} head_case;

#define H11 " HTTP/1.1\r\nHost: x\r\n"

static void test_http_head(void **state) {
    (void)state;
    const head_case cases[] = {
        {"GET /health" H11 "\r\n", 200},
        {"POST /v1/chat/completions" H11 "Content-Length: 2\r\n\r\n", 200},
        {"GET /health HTTP/1.1\nHost: x\n\n", 200},                       /* bare LF line ends */
        {"\r\n\r\nGET /health" H11 "\r\n", 200},                          /* empty lines before the request line */
        {"GET /health HTTP/1.0\r\n\r\n", 200},                             /* HTTP/1.0 needs no Host */
        {"GET /health HTTP/1.2\r\nHost: x\r\n\r\n", 200},                  /* a later HTTP/1.x minor is read as 1.1 */
        {"POST /v1/completions" H11 "Transfer-Encoding: Chunked \r\n\r\n", 200},
        {"POST /v1/completions" H11 "Content-Length:  12 \r\n\r\n", 200},
        {"GET /x?a=%20b" H11 "X-Obs: caf\xc3\xa9\r\n\r\n", 200},
        {"GARBAGE\r\n\r\n", 400},
        {"\x16\x03\x01\x02\x00", 400},                                      /* a TLS hello */
        {"GET /health\r\n\r\n", 400},                                      /* HTTP/0.9 */
        {"GET  /health" H11 "\r\n", 400},
        {"GET /health HTTP/1.1 \r\nHost: x\r\n\r\n", 400},
        {"GET /he\x01lth" H11 "\r\n", 400},
        {"GET /health http/1.1\r\nHost: x\r\n\r\n", 400},
        {"GET /health HTTP/1.10\r\nHost: x\r\n\r\n", 400},
        {"GET /health HTTP/2.0\r\nHost: x\r\n\r\n", 505},
        {"GET /health HTTP/0.9\r\nHost: x\r\n\r\n", 505},
        {"GET /health HTTP/1.1\r\n\r\n", 400},                             /* no Host */
        {"GET /health" H11 "Host: y\r\n\r\n", 400},
        {"GET /health" H11 "Bad Name: v\r\n\r\n", 400},
        {"GET /health" H11 "X-A : v\r\n\r\n", 400},
        {"GET /health" H11 "NoColon\r\n\r\n", 400},
        {"GET /health" H11 "X-A: v\r\n folded\r\n\r\n", 400},
        {"GET /health" H11 "X-A: a\rb\r\n\r\n", 400},
        {"GET /health" H11 "X-A: a\x7f\r\n\r\n", 400},
        {"GET /health\r HTTP/1.1\r\n\r\n", 400},
        {"POST /v1/completions" H11 "Content-Length: -1\r\n\r\n", 400},
        {"POST /v1/completions" H11 "Content-Length: abc\r\n\r\n", 400},
        {"POST /v1/completions" H11 "Content-Length: 5, 5\r\n\r\n", 400},
        {"POST /v1/completions" H11 "Content-Length: 1 2\r\n\r\n", 400},
        {"POST /v1/completions" H11 "Content-Length: 12345678901234567890\r\n\r\n", 400},
        {"POST /v1/completions" H11 "Content-Length: 2\r\nContent-Length: 40\r\n\r\n", 400},
        {"POST /v1/completions" H11 "Content-Length: 2\r\ncontent-length: 2\r\n\r\n", 400},
        {"POST /v1/completions" H11 "Transfer-Encoding: gzip, chunked\r\n\r\n", 501},
        {"POST /v1/completions" H11 "Transfer-Encoding: gzip\r\n\r\n", 400},
        {"POST /v1/completions" H11 "Transfer-Encoding: identity\r\n\r\n", 400},
        {"POST /v1/completions" H11 "Transfer-Encoding: chunked, gzip\r\n\r\n", 400},
        {"POST /v1/completions" H11 "Transfer-Encoding: chunked, chunked\r\n\r\n", 400},
        {"POST /v1/completions" H11 "Transfer-Encoding: chunked,\r\n\r\n", 400},
        {"POST /v1/completions" H11 "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
        {"POST /v1/completions" H11 "Transfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n", 400},
        {"POST /v1/completions HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
    };
    srv_head_verdict v;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *h = cases[i].head;
        size_t n = strlen(h);
        int st = srv_http_head_check(h, n, 8192, &v);
        if (st != cases[i].status) fail_msg("case %zu (%s): status %d (%s), want %d", i, h, st, v.message, cases[i].status);
        if (st == 200) assert_int_equal(v.len, n);
        else assert_true(v.message[0] && srv_utf8_valid(v.message, strlen(v.message)));
        /* every prefix waits for more, or (bad heads) already gives the same answer */
        for (size_t k = 0; k < n; k++) {
            int sp = srv_http_head_check(h, k, 8192, &v);
            if (!(sp == 0 || (st != 200 && sp == st))) fail_msg("case %zu: the prefix of %zu bytes gives %d (%s)", i, k, sp, v.message);
        }
    }
    /* a body after the head is not part of it */
    const char *withbody = "POST /v1/completions" H11 "Content-Length: 2\r\n\r\n{}";
    assert_int_equal(srv_http_head_check(withbody, strlen(withbody), 8192, &v), 200);
    assert_int_equal(v.len, strlen(withbody) - 2);
    /* too long: the request line (414), the headers (431); a short prefix waits */
    char *big = malloc(10000);
    strcpy(big, "GET /");
    memset(big + 5, 'a', 9000);
    big[9005] = 0;
    assert_int_equal(srv_http_head_check(big, strlen(big), 8192, &v), 414);
    assert_int_equal(srv_http_head_check(big, 100, 8192, &v), 0);
    strcpy(big, "GET /" H11 "X-Big: ");
    size_t at = strlen(big);
    memset(big + at, 'b', 9000);
    big[at + 9000] = 0;
    assert_int_equal(srv_http_head_check(big, strlen(big), 8192, &v), 431);
    free(big);
    /* a message quoting the head stays printable ASCII (found by fuzz_server_request) */
    const char *ff = "GET / HTTP/1.0\nContent-Length: \xff\xfe x\n\n";
    assert_int_equal(srv_http_head_check(ff, strlen(ff), 8192, &v), 400);
    for (const char *c = v.message; *c; c++) assert_true(*c >= 0x20 && *c <= 0x7e);
    /* an error is known before the line ends */
    assert_int_equal(srv_http_head_check("\x16", 1, 8192, &v), 400);
    assert_int_equal(srv_http_head_check("GET", 3, 8192, &v), 0);
}

/* ---- structured output and tool calls (server/tools.c) ---- */

static srv_pool g_pool = {.mu = PTHREAD_MUTEX_INITIALIZER};
static const srv_api_config hermes_cfg = {.model_id = "tiny", .n_ctx = 1024, .tool_format = "hermes"};

/* Parse a body that must be accepted. */
static srv_job *accepted(const srv_api_config *c, const char *body, int chat) {
    srv_error e;
    memset(&e, 0, sizeof e);
    srv_job *j = srv_parse_request(body, strlen(body), chat, c, NULL, &e);
    if (!j) fail_msg("refused (%d, param '%s': %s): %s", e.status, e.param, e.message, body);
    return j;
}

/* The job's JSON schema parsed (the caller frees it). */
static cJSON *job_schema(const srv_job *j) {
    assert_non_null(j->r.json_schema);
    cJSON *s = cJSON_Parse(j->r.json_schema);
    assert_non_null(s);
    return s;
}

#define DROID_SCHEMA                                                                                                                      \
    "{\"type\":\"object\",\"title\":\"Action\",\"properties\":{\"id\":{\"type\":\"integer\",\"description\":\"element\"},\"action\":{"    \
    "\"type\":\"string\",\"enum\":[\"tap\",\"text\",\"long_tap\",\"scroll_up\",\"scroll_down\",\"go_back\",\"N/A\"]},\"input_text\":{"  \
    "\"type\":\"string\"}},\"required\":[\"id\",\"action\",\"input_text\"]}"

static void test_response_format(void **state) {
    (void)state;
    /* text: no constraint; json_object: the JSON-object grammar */
    srv_job *j = accepted(&cfg, MSG("a") ",\"response_format\":{\"type\":\"text\"}}", 1);
    assert_null(j->r.grammar);
    assert_null(j->r.json_schema);
    assert_null(j->constraint);
    srv_job_unref(&g_pool, j);
    j = accepted(&cfg, MSG("a") ",\"response_format\":{\"type\":\"json_object\"}}", 1);
    assert_null(j->r.grammar);
    assert_string_equal(j->r.json_schema, "{\"type\":\"object\"}"); /* any object */
    assert_string_equal(j->constraint, "response_format");
    srv_job_unref(&g_pool, j);
    /* json_schema: the schema as text, as it is (the library ignores annotations) */
    j = accepted(&cfg, MSG("a") ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"action\",\"strict\":true,"
                                "\"schema\":" DROID_SCHEMA "}}}", 1);
    assert_null(j->r.grammar);
    assert_string_equal(j->constraint, "response_format.json_schema.schema");
    cJSON *s = job_schema(j);
    assert_string_equal(cJSON_GetObjectItem(s, "title")->valuestring, "Action");
    const cJSON *props = cJSON_GetObjectItem(s, "properties");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(props, "id"), "description")->valuestring, "element");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(props, "id"), "type")->valuestring, "integer");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(props, "action"), "enum")), 7);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(s, "required")), 3);
    cJSON_Delete(s);
    srv_job_unref(&g_pool, j);
    /* completions take it too */
    j = accepted(&cfg, "{\"prompt\":\"p\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{\"type\":\"object\","
                       "\"properties\":{\"description\":{\"type\":\"string\"}}}}}}", 0);
    s = job_schema(j);
    assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(s, "properties"), "description"));
    cJSON_Delete(s);
    srv_job_unref(&g_pool, j);
    /* llama-server's fields: grammar (GBNF text), json_schema (a schema) */
    j = accepted(&cfg, MSG("a") ",\"grammar\":\"root ::= \\\"yes\\\" | \\\"no\\\"\"}", 1);
    assert_string_equal(j->r.grammar, "root ::= \"yes\" | \"no\"");
    assert_string_equal(j->constraint, "grammar");
    srv_job_unref(&g_pool, j);
    j = accepted(&cfg, "{\"prompt\":\"p\",\"json_schema\":{\"type\":\"integer\"}}", 0);
    assert_string_equal(j->r.json_schema, "{\"type\":\"integer\"}");
    assert_string_equal(j->constraint, "json_schema");
    srv_job_unref(&g_pool, j);
    /* llama-server's json_object with a schema */
    j = accepted(&cfg, MSG("a") ",\"response_format\":{\"type\":\"json_object\",\"schema\":{\"type\":\"boolean\"}}}", 1);
    assert_null(j->r.grammar);
    assert_string_equal(j->r.json_schema, "{\"type\":\"boolean\"}");
    assert_string_equal(j->constraint, "response_format.schema");
    srv_job_unref(&g_pool, j);
    const req_case cases[] = {
        {MSG("a") ",\"response_format\":\"json\"}", 1, 400, "response_format", 0},
        {MSG("a") ",\"response_format\":{}}", 1, 400, "response_format.type", 0},
        {MSG("a") ",\"response_format\":{\"type\":\"yaml\"}}", 1, 400, "response_format.type", 0},
        {MSG("a") ",\"response_format\":{\"type\":\"json_schema\"}}", 1, 400, "response_format.json_schema", 0},
        {MSG("a") ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":[]}}", 1, 400, "response_format.json_schema", 0},
        {MSG("a") ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\"}}}", 1, 400,
         "response_format.json_schema.schema", 0},
        {MSG("a") ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\",\"schema\":\"object\"}}}", 1, 400,
         "response_format.json_schema.schema", 0},
        {MSG("a") ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\",\"schema\":false}}}", 1, 400,
         "response_format.json_schema.schema", 0},
        {MSG("a") ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a b\",\"schema\":{}}}}", 1, 400,
         "response_format.json_schema.name", 0},
        {MSG("a") ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"strict\":1,\"schema\":{}}}}", 1, 400,
         "response_format.json_schema.strict", 0},
        {MSG("a") ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":true}}}", 1, 200, "", 0},
        {MSG("a") ",\"grammar\":5}", 1, 400, "grammar", 0},
        {MSG("a") ",\"grammar\":\"\"}", 1, 400, "grammar", 0},
        {MSG("a") ",\"json_schema\":[1]}", 1, 400, "json_schema", 0},
        {MSG("a") ",\"response_format\":{\"type\":\"json_object\"},\"grammar\":\"root ::= \\\"x\\\"\"}", 1, 400, "grammar", 0},
        {MSG("a") ",\"grammar\":\"root ::= \\\"x\\\"\",\"json_schema\":{}}", 1, 400, "json_schema", 0},
        {"{\"prompt\":\"p\",\"response_format\":{\"type\":\"json_object\"}}", 0, 200, "", 0},
        {MSG("a") ",\"response_format\":{\"type\":\"json_object\",\"schema\":[]}}", 1, 400, "response_format.schema", 0},
    };
    char param[160];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const req_case *c = &cases[i];
        int st = parse_status(&cfg, c->body, strlen(c->body), c->chat, param, sizeof param);
        if (st != c->status || strcmp(param, c->param))
            fail_msg("case %zu (%s): status %d param '%s', want %d '%s'", i, c->body, st, param, c->status, c->param);
    }
}

#define TOOL_WEATHER                                                                                                                     \
    "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"The weather in a city\",\"parameters\":{\"type\":"  \
    "\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"description\":\"the city\"}},\"required\":[\"city\"]}}}"
#define TOOL_TAP                                                                                                                         \
    "{\"type\":\"function\",\"function\":{\"name\":\"tap\",\"parameters\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":"     \
    "\"integer\"}},\"required\":[\"id\"]}}}"
#define TOOLS2 ",\"tools\":[" TOOL_WEATHER "," TOOL_TAP "]"

static void test_tools(void **state) {
    (void)state;
    /* auto (the default with tools): a system message listing them, no constraint */
    srv_job *j = accepted(&cfg, MSG("Weather in Paris?") TOOLS2 "}", 1);
    assert_int_equal(j->tools, SRV_TOOLS_AUTO);
    assert_int_equal(j->n_tools, 2);
    assert_null(j->r.json_schema);
    assert_null(j->constraint);
    assert_int_equal(j->r.n_messages, 2);
    assert_string_equal(j->r.messages[0].role, "system");
    const char *sys = j->r.messages[0].content;
    assert_non_null(strstr(sys, "# Tools"));
    assert_non_null(strstr(sys, "{\"name\": \"get_weather\", \"description\": \"The weather in a city\", \"parameters\": {\"type\": \"object\""));
    assert_non_null(strstr(sys, "{\"name\": \"tap\", \"parameters\":"));
    assert_non_null(strstr(sys, "{\"name\": \"<function name>\", \"arguments\":"));
    assert_null(strstr(sys, "<tool_call>"));
    assert_string_equal(j->r.messages[1].content, "Weather in Paris?");
    srv_job_unref(&g_pool, j);
    /* Hermes: the tools inside <tools></tools>, calls in <tool_call> tags; after the request's own system text */
    j = accepted(&hermes_cfg,
                 "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"x\"}]" TOOLS2 ",\"tool_choice\":\"auto\"}", 1);
    assert_int_equal(j->r.n_messages, 2);
    sys = j->r.messages[0].content;
    assert_true(!strncmp(sys, "Be brief.\n\n# Tools\n", 19));
    assert_non_null(strstr(sys, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\""));
    assert_non_null(strstr(sys, "</tools>"));
    assert_non_null(strstr(sys, "<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>"));
    srv_job_unref(&g_pool, j);
    /* none: tools not rendered, no constraint */
    j = accepted(&cfg, MSG("x") TOOLS2 ",\"tool_choice\":\"none\"}", 1);
    assert_int_equal(j->tools, SRV_TOOLS_OFF);
    assert_int_equal(j->r.n_messages, 1);
    assert_null(j->r.json_schema);
    srv_job_unref(&g_pool, j);
    /* required: one anyOf branch per tool, name const, arguments = the parameters */
    j = accepted(&cfg, MSG("x") TOOLS2 ",\"tool_choice\":\"required\"}", 1);
    assert_int_equal(j->tools, SRV_TOOLS_FORCED);
    assert_int_equal(j->forced_tool, -1);
    assert_string_equal(j->constraint, "tools");
    assert_non_null(strstr(j->r.messages[0].content, "Call one of the functions now"));
    cJSON *s = job_schema(j);
    const cJSON *any = cJSON_GetObjectItem(s, "anyOf");
    assert_int_equal(cJSON_GetArraySize(any), 2);
    const cJSON *b0 = cJSON_GetArrayItem(any, 0), *p0 = cJSON_GetObjectItem(b0, "properties");
    assert_string_equal(cJSON_GetObjectItem(b0, "type")->valuestring, "object");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(p0, "name"), "const")->valuestring, "get_weather");
    const cJSON *args = cJSON_GetObjectItem(p0, "arguments");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(args, "properties"), "city"), "type")->valuestring, "string");
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(args, "required"), 0)->valuestring, "city");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(b0, "required")), 2);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(any, 1), "properties"), "name"), "const")->valuestring, "tap");
    cJSON_Delete(s);
    srv_job_unref(&g_pool, j);
    /* a named tool: that tool's object alone; a tool without parameters: an empty arguments object */
    j = accepted(&cfg, MSG("x") TOOLS2 ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"tap\"}}}", 1);
    assert_int_equal(j->forced_tool, 1);
    assert_non_null(strstr(j->r.messages[0].content, "Call the function \"tap\" now"));
    s = job_schema(j);
    assert_null(cJSON_GetObjectItem(s, "anyOf"));
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(s, "properties"), "name"), "const")->valuestring, "tap");
    cJSON_Delete(s);
    srv_job_unref(&g_pool, j);
    j = accepted(&cfg, MSG("x") ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"now\"}}],\"tool_choice\":\"required\"}", 1);
    s = job_schema(j);
    const cJSON *a = cJSON_GetObjectItem(cJSON_GetObjectItem(s, "properties"), "arguments");
    assert_string_equal(cJSON_GetObjectItem(a, "type")->valuestring, "object");
    assert_non_null(cJSON_GetObjectItem(a, "properties"));
    cJSON_Delete(s);
    srv_job_unref(&g_pool, j);
    /* an empty tools array is no tools */
    j = accepted(&cfg, MSG("x") ",\"tools\":[],\"parallel_tool_calls\":false}", 1);
    assert_int_equal(j->tools, SRV_TOOLS_OFF);
    srv_job_unref(&g_pool, j);
    const req_case cases[] = {
        {MSG("x") ",\"tools\":{}}", 1, 400, "tools", 0},
        {MSG("x") ",\"tools\":[5]}", 1, 400, "tools[0]", 0},
        {MSG("x") ",\"tools\":[{\"type\":\"retrieval\"}]}", 1, 400, "tools[0].type", 0},
        {MSG("x") ",\"tools\":[{\"type\":\"function\"}]}", 1, 400, "tools[0].function", 0},
        {MSG("x") ",\"tools\":[{\"type\":\"function\",\"function\":{\"description\":\"d\"}}]}", 1, 400, "tools[0].function.name", 0},
        {MSG("x") ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]}", 1, 400, "tools[0].function.name", 0},
        {MSG("x") ",\"tools\":[" TOOL_TAP "," TOOL_WEATHER "," TOOL_TAP "]}", 1, 400, "tools[2].function.name", 0},
        {MSG("x") ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":[]}}]}", 1, 400,
         "tools[0].function.parameters", 0},
        {MSG("x") ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":\"object\"}}]}", 1, 400,
         "tools[0].function.parameters", 0},
        {MSG("x") ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":7}}]}", 1, 400,
         "tools[0].function.description", 0},
        {MSG("x") TOOLS2 ",\"tool_choice\":\"always\"}", 1, 400, "tool_choice", 0},
        {MSG("x") TOOLS2 ",\"tool_choice\":7}", 1, 400, "tool_choice", 0},
        {MSG("x") TOOLS2 ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"fly\"}}}", 1, 400, "tool_choice.function.name", 0},
        {MSG("x") TOOLS2 ",\"tool_choice\":{\"type\":\"function\"}}", 1, 400, "tool_choice.function.name", 0},
        {MSG("x") TOOLS2 ",\"tool_choice\":{\"type\":\"tool\",\"function\":{\"name\":\"tap\"}}}", 1, 400, "tool_choice.type", 0},
        {MSG("x") ",\"tool_choice\":\"required\"}", 1, 400, "tool_choice", 0},
        {MSG("x") ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"tap\"}}}", 1, 400, "tool_choice", 0},
        {MSG("x") ",\"tool_choice\":\"auto\"}", 1, 200, "", 0},
        {MSG("x") ",\"tool_choice\":\"none\"}", 1, 200, "", 0},
        {MSG("x") TOOLS2 ",\"tool_choice\":\"required\",\"response_format\":{\"type\":\"json_object\"}}", 1, 400, "tool_choice", 0},
        {MSG("x") TOOLS2 ",\"response_format\":{\"type\":\"json_object\"}}", 1, 200, "", 0}, /* auto: free, the format constrains */
        {MSG("x") TOOLS2 ",\"parallel_tool_calls\":\"yes\"}", 1, 400, "parallel_tool_calls", 0},
        {"{\"prompt\":\"p\"" TOOLS2 "}", 0, 400, "tools", 0},
        {"{\"prompt\":\"p\",\"tool_choice\":\"none\"}", 0, 400, "tool_choice", 0},
    };
    char param[160];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const req_case *c = &cases[i];
        int st = parse_status(&cfg, c->body, strlen(c->body), c->chat, param, sizeof param);
        if (st != c->status || strcmp(param, c->param))
            fail_msg("case %zu (%s): status %d param '%s', want %d '%s'", i, c->body, st, param, c->status, c->param);
    }
}

/* The conversation's tool calls and results, in both formats. */
#define HISTORY                                                                                                                          \
    "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris and Rome?\"},"                                                      \
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":"          \
    "\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}},{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":" \
    "\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Rome\\\"}\"}}]},"                                                              \
    "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"18 C\"},{\"role\":\"tool\",\"tool_call_id\":\"call_2\",\"content\":\"24 C\"},"

static void test_tool_history(void **state) {
    (void)state;
    srv_job *j = accepted(&cfg, HISTORY "{\"role\":\"user\",\"content\":\"Thanks\"}]}", 1);
    assert_int_equal(j->r.n_messages, 4); /* the two results are one user turn */
    assert_string_equal(j->r.messages[1].role, "assistant");
    assert_string_equal(j->r.messages[1].content, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                                                  "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}");
    assert_string_equal(j->r.messages[2].role, "user");
    assert_string_equal(j->r.messages[2].content, "Result of the function call get_weather:\n18 C\nResult of the function call get_weather:\n24 C");
    assert_string_equal(j->r.messages[3].content, "Thanks");
    srv_job_unref(&g_pool, j);
    j = accepted(&hermes_cfg, HISTORY "{\"role\":\"assistant\",\"content\":\"Sunny.\",\"tool_calls\":[]}]}", 1);
    assert_int_equal(j->r.n_messages, 4);
    assert_string_equal(j->r.messages[1].content, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
                                                  "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>");
    assert_string_equal(j->r.messages[2].content, "<tool_response>\n18 C\n</tool_response>\n<tool_response>\n24 C\n</tool_response>");
    assert_string_equal(j->r.messages[3].content, "Sunny.");
    srv_job_unref(&g_pool, j);
    /* content before calls; arguments that are not JSON go in as a string */
    j = accepted(&hermes_cfg, "{\"messages\":[{\"role\":\"assistant\",\"content\":\"Let me look.\",\"tool_calls\":[{\"type\":\"function\","
                              "\"function\":{\"name\":\"f\",\"arguments\":\"not json\"}}]}]}", 1);
    assert_string_equal(j->r.messages[0].content, "Let me look.\n<tool_call>\n{\"name\": \"f\", \"arguments\": \"not json\"}\n</tool_call>");
    srv_job_unref(&g_pool, j);
    const req_case cases[] = {
        {"{\"messages\":[{\"role\":\"assistant\",\"content\":null}]}", 1, 400, "messages[0].content", 0},
        {"{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":{}}]}", 1, 400, "messages[0].tool_calls", 0},
        {"{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[7]}]}", 1, 400, "messages[0].tool_calls[0]", 0},
        {"{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"arguments\":\"{}\"}}]}]}", 1, 400,
         "messages[0].tool_calls[0].function.name", 0},
        {"{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":5}}]}]}", 1, 400,
         "messages[0].tool_calls[0].function.arguments", 0},
        {"{\"messages\":[{\"role\":\"tool\",\"content\":null}]}", 1, 400, "messages[0].content", 0},
        {"{\"messages\":[{\"role\":\"tool\",\"content\":\"r\",\"tool_call_id\":5}]}", 1, 400, "messages[0].tool_call_id", 0},
        {"{\"messages\":[{\"role\":\"function\",\"content\":\"r\"}]}", 1, 400, "messages[0].role", 0},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"r\",\"tool_calls\":[]}]}", 1, 200, "", 0}, /* only an assistant's are read */
    };
    char param[160];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const req_case *c = &cases[i];
        int st = parse_status(&cfg, c->body, strlen(c->body), c->chat, param, sizeof param);
        if (st != c->status || strcmp(param, c->param))
            fail_msg("case %zu (%s): status %d param '%s', want %d '%s'", i, c->body, st, param, c->status, c->param);
    }
}

/* The answer's calls: n of them, the k-th naming `name` with arguments `args` (compact JSON). */
static void expect_calls(const srv_job *j, const char *text, int n, const char *name, const char *args) {
    cJSON *calls = srv_answer_tool_calls(j, text, 0);
    if (!n) {
        if (calls) fail_msg("read as tool calls: %s", text);
        return;
    }
    if (!calls) fail_msg("not read as tool calls: %s", text);
    assert_int_equal(cJSON_GetArraySize(calls), n);
    const cJSON *c = cJSON_GetArrayItem(calls, n - 1), *fn = cJSON_GetObjectItem(c, "function");
    assert_true(!strncmp(cJSON_GetObjectItem(c, "id")->valuestring, "call_", 5));
    assert_string_equal(cJSON_GetObjectItem(c, "type")->valuestring, "function");
    assert_string_equal(cJSON_GetObjectItem(fn, "name")->valuestring, name);
    assert_string_equal(cJSON_GetObjectItem(fn, "arguments")->valuestring, args);
    assert_null(cJSON_GetObjectItem(c, "index"));
    cJSON_Delete(calls);
}

static void test_answer_tool_calls(void **state) {
    (void)state;
    srv_job *j = accepted(&cfg, MSG("x") TOOLS2 "}", 1);
    expect_calls(j, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}", 1, "get_weather", "{\"city\":\"Paris\"}");
    expect_calls(j, "\n {\"name\": \"tap\", \"arguments\": {\"id\": 3}} \n", 1, "tap", "{\"id\":3}");
    expect_calls(j, "<tool_call>\n{\"name\": \"tap\", \"arguments\": {\"id\": 3}}\n</tool_call>", 1, "tap", "{\"id\":3}");
    expect_calls(j, "<think>\nhmm\n</think>\n\n<tool_call>\n{\"name\": \"tap\", \"arguments\": {\"id\": 1}}\n</tool_call>\n"
                    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Rome\\\"}\"}\n</tool_call>\n",
                 2, "get_weather", "{\"city\":\"Rome\"}");
    expect_calls(j, "Hello there.", 0, NULL, NULL);
    expect_calls(j, "{\"name\": \"fly\", \"arguments\": {}}", 0, NULL, NULL);                 /* not a tool of the request */
    expect_calls(j, "{\"name\": \"tap\", \"arguments\": {\"id\": 3}} and more", 0, NULL, NULL); /* text after it */
    expect_calls(j, "{\"name\": \"tap\", \"arguments\": 3}", 0, NULL, NULL);
    expect_calls(j, "{\"name\": \"tap\", \"arguments\": {}, \"x\": 1}", 0, NULL, NULL);
    expect_calls(j, "{\"name\": \"tap\", \"arguments\": {\"id\": 3", 0, NULL, NULL);              /* cut short (max_tokens) */
    expect_calls(j, "<tool_call>\n{\"name\": \"tap\", \"arguments\": {}}\n", 0, NULL, NULL);
    expect_calls(j, "<tool_call>{\"name\": \"tap\", \"arguments\": {}}</tool_call> then text", 0, NULL, NULL);
    expect_calls(j, "", 0, NULL, NULL);
    /* ids differ; stream deltas carry an index */
    cJSON *a = srv_answer_tool_calls(j, "{\"name\": \"tap\", \"arguments\": {}}", 1), *b = srv_answer_tool_calls(j, "{\"name\": \"tap\", \"arguments\": {}}", 0);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(a, 0), "index")->valueint, 0);
    assert_string_not_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(a, 0), "id")->valuestring, cJSON_GetObjectItem(cJSON_GetArrayItem(b, 0), "id")->valuestring);
    cJSON_Delete(a);
    cJSON_Delete(b);
    /* the completion: content null, the calls, finish_reason tool_calls */
    j->res.text = strdup("{\"name\": \"tap\", \"arguments\": {\"id\": 2}}");
    char *js = srv_completion_json(j, "chatcmpl-1", 1, "tiny");
    cJSON *o = cJSON_Parse(js);
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0), *msg = cJSON_GetObjectItem(ch, "message");
    assert_string_equal(cJSON_GetObjectItem(ch, "finish_reason")->valuestring, "tool_calls");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(msg, "content")));
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(msg, "tool_calls"), 0), "function"), "arguments")->valuestring, "{\"id\":2}");
    cJSON_Delete(o);
    free(js);
    js = srv_chunk_event(j, "chatcmpl-1", 1, "tiny", NULL, 0, 0, 1);
    assert_non_null(strstr(js, "\"finish_reason\":\"tool_calls\""));
    free(js);
    cJSON *calls = srv_answer_tool_calls(j, j->res.text, 1);
    js = srv_tool_calls_event(j, "chatcmpl-1", 1, "tiny", calls);
    assert_true(!strncmp(js, "data: {", 7));
    o = cJSON_Parse(js + 6);
    const cJSON *d = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0), "delta");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(d, "tool_calls"), 0), "function"), "name")->valuestring, "tap");
    cJSON_Delete(o);
    cJSON_Delete(calls);
    free(js);
    /* plain text stays content */
    free(j->res.text);
    j->res.text = strdup("It is sunny.");
    js = srv_completion_json(j, "chatcmpl-2", 1, "tiny");
    assert_non_null(strstr(js, "\"content\":\"It is sunny.\""));
    assert_non_null(strstr(js, "\"finish_reason\":\"stop\""));
    free(js);
    srv_job_unref(&g_pool, j);
    /* tool_choice none: never read as calls */
    j = accepted(&cfg, MSG("x") TOOLS2 ",\"tool_choice\":\"none\"}", 1);
    expect_calls(j, "{\"name\": \"tap\", \"arguments\": {}}", 0, NULL, NULL);
    srv_job_unref(&g_pool, j);
    /* streaming: what may still become a call is held back */
    const char *hold[] = {"", "  \n", "{", "{\"na", "<", "<tool", "<tool_call>\n{", "<think>", "<thi"};
    const char *go[] = {"Hi", " I", "<b>", "<toolbox>", "[1]"};
    for (size_t i = 0; i < sizeof hold / sizeof hold[0]; i++) assert_int_equal(srv_tool_call_possible(hold[i], strlen(hold[i])), 1);
    for (size_t i = 0; i < sizeof go / sizeof go[0]; i++) assert_int_equal(srv_tool_call_possible(go[i], strlen(go[i])), 0);
}

/* The library's constraint errors as 400s naming the request's field. */
static void test_constraint_errors(void **state) {
    (void)state;
    const struct {
        const char *body, *lib, *param, *in_message;
    } cases[] = {
        {MSG("x") ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{\"type\":\"string\",\"format\":\"date\"}}}}",
         "json_schema: unsupported keyword \"format\" at /format", "response_format.json_schema.schema", "unsupported keyword \"format\" at /format"},
        {MSG("x") ",\"grammar\":\"root ::= [\"}", "grammar: line 1, column 10: unterminated character class", "grammar", "line 1, column 10"},
        {MSG("x") ",\"json_schema\":{\"type\":\"string\",\"format\":\"date\"}}", "json_schema: unsupported keyword \"format\" at /format",
         "json_schema", "at /format"},
        {MSG("x") TOOLS2 ",\"tool_choice\":\"required\"}",
         "json_schema: unsupported keyword \"format\" at /anyOf/1/properties/arguments/properties/id", "tools[1].function.parameters",
         "unsupported keyword \"format\" at /properties/id"},
        {MSG("x") TOOLS2 ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}}",
         "json_schema: unsupported keyword \"format\" at /properties/arguments", "tools[0].function.parameters", "format\" at /"},
        {MSG("x") TOOLS2 ",\"tool_choice\":\"required\"}", "json_schema: too many rules", "tools", "too many rules"},
        {MSG("x") ",\"response_format\":{\"type\":\"json_object\"}}", "json_schema: out of memory", "response_format", "out of memory"},
        {MSG("x") ",\"response_format\":{\"type\":\"json_object\",\"schema\":{\"format\":\"x\"}}}", "json_schema: unsupported keyword \"format\" at /format",
         "response_format.schema", "format"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        srv_job *j = accepted(&cfg, cases[i].body, 1);
        j->rc = SDNPU_EINVAL;
        snprintf(j->err.message, sizeof j->err.message, "%s", cases[i].lib);
        srv_error e;
        memset(&e, 0, sizeof e);
        srv_generate_error(j, &e);
        assert_int_equal(e.status, 400);
        if (strcmp(e.param, cases[i].param) || !strstr(e.message, cases[i].in_message))
            fail_msg("case %zu: param '%s' message '%s', want '%s' and '%s'", i, e.param, e.message, cases[i].param, cases[i].in_message);
        srv_job_unref(&g_pool, j);
    }
}

static void test_json_print_py(void **state) {
    (void)state;
    cJSON *v = cJSON_Parse("{\"a\":1,\"b\":[true,null,\"x\\n\\\"y\\u0001\"],\"c\":{},\"d\":[],\"e\":-2.5}");
    char *s = srv_json_print_py(v);
    assert_string_equal(s, "{\"a\": 1, \"b\": [true, null, \"x\\n\\\"y\\u0001\"], \"c\": {}, \"d\": [], \"e\": -2.5}");
    free(s);
    cJSON_Delete(v);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cut_model_name),
        cmocka_unit_test(test_cut_param_path),
        cmocka_unit_test(test_accepted),
        cmocka_unit_test(test_no_silent_change),
        cmocka_unit_test(test_tree_bound),
        cmocka_unit_test(test_http_head),
        cmocka_unit_test(test_response_format),
        cmocka_unit_test(test_tools),
        cmocka_unit_test(test_tool_history),
        cmocka_unit_test(test_answer_tool_calls),
        cmocka_unit_test(test_constraint_errors),
        cmocka_unit_test(test_json_print_py),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
