/* test_server_request.c - the server's request parser (server/openai.c) called directly,
 * without HTTP: the error answers stay well-formed UTF-8 when a field quoted in them is cut
 * at the length of the error's message or param (found by fuzz/fuzz_server_request: a
 * 1024-byte message quoting a long model name ended inside a character), and a body
 * accepted both ways (chat, completion) gives a job freed through the pool's path. */
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

#include "server/openai.h"

static const srv_api_config cfg = {.model_id = "tiny", .model_path = NULL, .n_ctx = 1024, .has_history = 0};

/* Parse body (expected to fail with status and param), check the answer is UTF-8 JSON. */
static void refused(const char *body, int chat, int status, const char *param) {
    srv_error e;
    memset(&e, 0, sizeof e);
    srv_job *j = srv_parse_request(body, strlen(body), chat, &cfg, &e);
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
    srv_job *j = srv_parse_request(body, strlen(body), 1, &cfg, &e);
    assert_non_null(j);
    assert_int_equal(j->r.n_messages, 1);
    assert_string_equal(j->r.messages[0].role, "system");
    assert_string_equal(j->r.messages[0].content, "ab");
    assert_int_equal(j->r.n_stop, 1);
    assert_int_equal(j->r.n_params, 1);
    srv_job_unref(&pool, j);
    j = srv_parse_request(body, strlen(body), 0, &cfg, &e);
    assert_non_null(j);
    assert_string_equal(j->r.prompt, "p");
    srv_job_unref(&pool, j);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cut_model_name),
        cmocka_unit_test(test_cut_param_path),
        cmocka_unit_test(test_accepted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
