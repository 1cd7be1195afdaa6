/* test_server_request.c - the server's request parser (server/openai.c, server/json_scan.c)
 * and request-head check (server/http_head.c) called directly, without HTTP: the error answers
 * stay well-formed UTF-8 when a field quoted in them is cut at the length of the error's
 * message or param (found by fuzz/fuzz_server_request: a 1024-byte message quoting a long
 * model name ended inside a character); a body accepted both ways (chat, completion) gives a
 * job freed through the pool's path; nothing in a body is changed without a word (\u0000, raw
 * control characters, data after the JSON, a key twice: 400 naming the field); the limits on
 * messages, characters, JSON values and nesting; the scan's bound on the parse's memory against
 * what cJSON really allocates (counted by the allocator); and the strict head check against a
 * table of heads, every prefix of a good head waiting for more. */
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cut_model_name),
        cmocka_unit_test(test_cut_param_path),
        cmocka_unit_test(test_accepted),
        cmocka_unit_test(test_no_silent_change),
        cmocka_unit_test(test_tree_bound),
        cmocka_unit_test(test_http_head),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
