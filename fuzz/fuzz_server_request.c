/* fuzz_server_request.c - libFuzzer target: the input is the body of a POST to the server
 * (`sdnpu serve`), parsed by srv_parse_request twice, as /v1/chat/completions (server with
 * a history store, small limits on messages and characters) and as /v1/completions (without
 * one, small limits on JSON values). An accepted body must give a job whose request is
 * complete (messages with known roles and content, or a prompt or token ids; stop strings
 * non-empty; every string well-formed UTF-8), within the limits, from a body with nothing
 * after its JSON value and no \u0000 escape, freed through the pool's own path
 * (srv_job_unref); a refused one must give a status, a message and an error answer
 * (srv_error_json) that is itself well-formed UTF-8 JSON naming the same field. The scan's
 * bound on the parse's memory must hold whenever cJSON parses the input. The same input is
 * also a request head for srv_http_head_check: its verdict must be consistent (a complete
 * head ends with an empty line within the input; an error has a message) and stable as more
 * bytes arrive. Structured output and tool calls (server/tools.c): an accepted job holds at
 * most one constraint (the schema JSON, the grammar UTF-8), a forced tool call has its
 * schema, and the input read back as the answer of a request with tools gives only calls of
 * its tools with JSON-object arguments; a third pass parses the chat body without text limits,
 * for a model with the Hermes tool-call format. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/http_head.h"
#include "server/openai.h"
#include "server/tools.h"

static int valid(const char *s) { return s && srv_utf8_valid(s, strlen(s)); }

/* Characters (code points) of a UTF-8 string. */
static size_t chars(const char *s) {
    size_t n = 0;
    for (const unsigned char *u = (const unsigned char *)s; *u; u++) n += (*u & 0xC0) != 0x80;
    return n;
}

static void check_job(const srv_job *j, int chat, const srv_api_config *cfg) {
    const sdnpu_request *r = &j->r;
    if (j->chat != chat) abort();
    size_t total = 0;
    if (chat) {
        if (r->n_messages < 1 || !r->messages) abort();
        if (cfg->max_messages && r->n_messages > cfg->max_messages) abort();
        for (int i = 0; i < r->n_messages; i++) {
            const char *role = r->messages[i].role;
            if (!role || (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant"))) abort();
            if (!valid(r->messages[i].content)) abort();
            total += chars(r->messages[i].content);
        }
    } else if (r->prompt) {
        if (!r->prompt[0] || !valid(r->prompt)) abort();
        total += chars(r->prompt);
    } else if (r->n_prompt_ids < 1 || !r->prompt_ids) {
        abort();
    } else {
        for (int i = 0; i < r->n_prompt_ids; i++)
            if (r->prompt_ids[i] < 0) abort();
    }
    if (r->n_stop < 0 || r->n_stop > 4) abort();
    for (int i = 0; i < r->n_stop; i++)
        if (!r->stop[i] || !r->stop[i][0] || !valid(r->stop[i])) abort();
    if (r->n_params < 0 || r->n_params > 64) abort();
    for (int i = 0; i < r->n_params; i++)
        if (!valid(r->params[i])) abort();
    if (r->max_tokens < 1 || r->max_tokens > cfg->n_ctx) abort();
    if (!(r->temperature >= 0 && r->temperature <= 2) || !(r->top_p >= 0 && r->top_p <= 1)) abort();
    if (r->draft_max < 0 || r->draft_max > 63 || r->top_k < 0 || r->repeat_last_n < 0) abort();
    if (r->task_group && (!cfg->has_history || !valid(r->task_group))) abort();
    if (!valid(r->method) || !valid(j->method)) abort();
    if (cfg->max_chars && total > cfg->max_chars) abort();
    if (r->grammar && r->json_schema) abort();
    if (r->grammar && !valid(r->grammar)) abort();
    if (r->json_schema) {
        cJSON *sc = cJSON_Parse(r->json_schema);
        if (!sc || !valid(r->json_schema)) abort();
        cJSON_Delete(sc);
    }
    if ((r->grammar || r->json_schema) != (j->constraint != NULL)) abort();
    if (j->tools < SRV_TOOLS_OFF || j->tools > SRV_TOOLS_FORCED || (j->tools && (!chat || j->n_tools < 1))) abort();
    if (j->tools == SRV_TOOLS_FORCED && (!r->json_schema || strcmp(j->constraint, "tools"))) abort();
    if (j->forced_tool < -1 || j->forced_tool >= (j->n_tools > 0 ? j->n_tools : 1)) abort();
    for (int i = 0; i < j->n_tools; i++)
        if (!valid(j->tool_names[i]) || !j->tool_names[i][0]) abort();
}

/* The input read back as the answer of a request with the tools get_weather and tap: calls
 * only of those tools, with JSON-object arguments. */
static void check_answer(const uint8_t *data, size_t size) {
    static srv_job *j;
    if (!j) {
        static const char body[] = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": ["
                                   "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}},"
                                   "{\"type\": \"function\", \"function\": {\"name\": \"tap\"}}]}";
        static const srv_api_config cfg = {.model_id = "tiny", .n_ctx = 64};
        srv_error e;
        if (!(j = srv_parse_request(body, sizeof body - 1, 1, &cfg, NULL, &e))) abort();
    }
    char *text = malloc(size + 1);
    if (!text) return;
    memcpy(text, data, size);
    text[size] = 0;
    (void)srv_tool_call_possible(text, size);
    cJSON *calls = srv_answer_tool_calls(j, text, 1);
    if (calls && (!j->tools || cJSON_GetArraySize(calls) < 1)) abort();
    for (const cJSON *c = calls ? calls->child : NULL; c; c = c->next) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name"), *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        int known = 0;
        for (int i = 0; cJSON_IsString(name) && i < j->n_tools; i++) known |= !strcmp(name->valuestring, j->tool_names[i]);
        cJSON *a = cJSON_IsString(args) ? cJSON_Parse(args->valuestring) : NULL;
        if (!known || !cJSON_IsObject(a)) abort();
        cJSON_Delete(a);
    }
    cJSON_Delete(calls);
    free(text);
}

/* The body as accepted: nothing but whitespace after its JSON value, no \u0000 escape. */
static void check_body(const uint8_t *data, size_t size) {
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts((const char *)data, size, &end, 0);
    if (!o) abort();
    cJSON_Delete(o);
    for (size_t at = (size_t)(end - (const char *)data); at < size; at++)
        if (!strchr(" \t\r\n", data[at])) abort();
    srv_json_scan s;
    if (srv_json_scan_body((const char *)data, size, (size_t)-1, SRV_MAX_DEPTH, &s) || s.bad_string) abort();
}

/* The memory bound of the scan holds for what cJSON allocates (counted by these hooks). */
static size_t live, peak;
static void *count_malloc(size_t n) {
    size_t *p = malloc(n + 16);
    if (!p) return NULL;
    p[0] = n;
    live += n + 16, peak = live > peak ? live : peak;
    return p + 2;
}
static void count_free(void *q) {
    if (!q) return;
    size_t *p = (size_t *)q - 2;
    live -= p[0] + 16;
    free(p);
}

static void check_tree_bound(const uint8_t *data, size_t size) {
    srv_json_scan s;
    if (srv_json_scan_body((const char *)data, size, (size_t)-1, SRV_MAX_DEPTH, &s)) return;
    cJSON_Hooks h = {count_malloc, count_free};
    cJSON_InitHooks(&h);
    live = peak = 0;
    cJSON *o = cJSON_ParseWithLength((const char *)data, size);
    cJSON_Delete(o);
    cJSON_InitHooks(NULL);
    /* the bound allows 16 bytes of allocator overhead per allocation, as counted here */
    if (peak > srv_json_tree_bytes(&s, size)) abort();
}

/* The input as a request head: a consistent verdict, the same on a shorter prefix or more. */
static void check_head(const uint8_t *data, size_t size) {
    srv_head_verdict v, w;
    int st = srv_http_head_check((const char *)data, size, 512, &v);
    if (st == 200) {
        if (v.len < 2 || v.len > size || v.len > 512 || data[v.len - 1] != '\n') abort();
        /* the head alone gives the same verdict; one byte fewer is not complete */
        if (srv_http_head_check((const char *)data, v.len, 512, &w) != 200 || w.len != v.len) abort();
        if (srv_http_head_check((const char *)data, v.len - 1, 512, &w) == 200) abort();
    } else if (st) {
        if (st != 400 && st != 414 && st != 431 && st != 501 && st != 505) abort();
        if (!v.message[0] || !valid(v.message)) abort();
    }
}

static void check_error(const srv_error *e) {
    if (e->status != 400 && e->status != 404 && e->status != 413 && e->status != 500) abort();
    if (!e->message[0] || !e->type) abort();
    char *js = srv_error_json(e);
    if (!js) return; /* out of memory */
    /* the answer goes to the client as is: well-formed UTF-8, JSON, the same param */
    if (!valid(js)) abort();
    cJSON *o = cJSON_Parse(js);
    const cJSON *er = cJSON_GetObjectItemCaseSensitive(o, "error");
    const cJSON *param = cJSON_GetObjectItemCaseSensitive(er, "param");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(er, "message");
    if (!cJSON_IsString(msg) || strcmp(msg->valuestring, e->message)) abort();
    if (e->param[0] ? !cJSON_IsString(param) || strcmp(param->valuestring, e->param) : !cJSON_IsNull(param)) abort();
    cJSON_Delete(o);
    free(js);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static srv_pool pool = {.mu = PTHREAD_MUTEX_INITIALIZER};
    static const srv_api_config cfgs[3] = {
        {.model_id = "tiny", .model_path = NULL, .n_ctx = 1024, .has_history = 0, .max_values = 64},
        {.model_id = "tiny", .model_path = "/models/tiny.gguf", .n_ctx = 4096, .has_history = 1, .max_messages = 3, .max_chars = 40},
        {.model_id = "tiny", .model_path = NULL, .n_ctx = 1024, .tool_format = "hermes"},
    };
    for (int pass = 2; pass >= 0; pass--) {
        int chat = pass > 0;
        const srv_api_config *cfg = &cfgs[pass];
        srv_error e;
        memset(&e, 0, sizeof e);
        srv_job *j = srv_parse_request((const char *)data, size, chat, cfg, NULL, &e);
        if (j) {
            check_job(j, chat, cfg);
            check_body(data, size);
            srv_job_unref(&pool, j);
        } else {
            check_error(&e);
        }
    }
    check_tree_bound(data, size);
    check_head(data, size);
    check_answer(data, size);
    return 0;
}
