/* fuzz_server_request.c - libFuzzer target: the input is the body of a POST to the server
 * (`sdnpu serve`), parsed by srv_parse_request twice, as /v1/chat/completions (server with
 * a history store) and as /v1/completions (without one). An accepted body must give a job
 * whose request is complete (messages with known roles and content, or a prompt or token
 * ids; stop strings non-empty; every string well-formed UTF-8), freed through the pool's
 * own path (srv_job_unref); a refused one must give a status, a message and an error
 * answer (srv_error_json) that is itself well-formed UTF-8 JSON naming the same field. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/openai.h"

static int valid(const char *s) { return s && srv_utf8_valid(s, strlen(s)); }

static void check_job(const srv_job *j, int chat, const srv_api_config *cfg) {
    const sdnpu_request *r = &j->r;
    if (j->chat != chat) abort();
    if (chat) {
        if (r->n_messages < 1 || !r->messages) abort();
        for (int i = 0; i < r->n_messages; i++) {
            const char *role = r->messages[i].role;
            if (!role || (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant"))) abort();
            if (!valid(r->messages[i].content)) abort();
        }
    } else if (r->prompt) {
        if (!r->prompt[0] || !valid(r->prompt)) abort();
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
}

static void check_error(const srv_error *e) {
    if (e->status != 400 && e->status != 404 && e->status != 500) abort();
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
    static const srv_api_config cfgs[2] = {
        {.model_id = "tiny", .model_path = NULL, .n_ctx = 1024, .has_history = 0},
        {.model_id = "tiny", .model_path = "/models/tiny.gguf", .n_ctx = 4096, .has_history = 1},
    };
    for (int chat = 1; chat >= 0; chat--) {
        const srv_api_config *cfg = &cfgs[chat];
        srv_error e;
        memset(&e, 0, sizeof e);
        srv_job *j = srv_parse_request((const char *)data, size, chat, cfg, &e);
        if (j) {
            check_job(j, chat, cfg);
            srv_job_unref(&pool, j);
        } else {
            check_error(&e);
        }
    }
    return 0;
}
