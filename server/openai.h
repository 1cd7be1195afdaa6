/* openai.h - the OpenAI wire format of `sdnpu serve`: a request body (chat or text completion)
 * checked field by field and turned into a job (an sdnpu_request), and the JSON the server
 * answers with: completions, stream chunks, model lists and errors naming the field at fault. */
#ifndef SDN_SERVER_OPENAI_H
#define SDN_SERVER_OPENAI_H

#include <stddef.h>

#include "server/pool.h"

/* What the parser needs to know about the server. */
typedef struct srv_api_config {
    const char *model_id;   /* the name clients use in "model" */
    const char *model_path; /* also accepted as "model" */
    int n_ctx;              /* KV cache tokens of a slot: max_tokens is at most this */
    int has_history;        /* a history store is open: `user` / `task_group` become task groups */
} srv_api_config;

/* An error answer: HTTP status, OpenAI error type, the field at fault ("" when none). */
typedef struct srv_error {
    int status;
    const char *type;
    char param[128];
    char message[1024];
} srv_error;

/* Fill e and return -1 (printf-style message). */
int srv_fail(srv_error *e, int status, const char *type, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Parse and check a request body of /v1/chat/completions (chat = 1) or /v1/completions
 * (chat = 0). Returns a job with one reference, or NULL with e filled (400 malformed JSON,
 * wrong types, out-of-range values, invalid UTF-8; 404 unknown model; 500 out of memory). */
srv_job *srv_parse_request(const char *body, size_t len, int chat, const srv_api_config *cfg, srv_error *e);

/* The error of a failed sdnpu_generate as an answer: SDNPU_EINVAL -> 400 naming the field its
 * message names (a prompt longer than the context -> messages / prompt), else 500. */
void srv_generate_error(const srv_job *j, srv_error *e);

/* {"error": {"message", "type", "param", "code"}} (malloc'd), or NULL when out of memory. */
char *srv_error_json(const srv_error *e);

/* The whole answer of a finished job (chat.completion or text_completion), malloc'd. */
char *srv_completion_json(const srv_job *j, const char *id, long created, const char *model_id);

/* One server-sent event "data: {chunk}\n\n" (malloc'd): the first (role) chunk when first,
 * else a chunk carrying text (len bytes); final: the chunk with finish_reason, usage and the
 * sdnpu block (text is then ignored). */
char *srv_chunk_event(const srv_job *j, const char *id, long created, const char *model_id, const char *text, size_t len,
                      int first, int final);

/* GET /v1/models (malloc'd). */
char *srv_models_json(const char *model_id, long created);

/* 1 when s[0..n) is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF). */
int srv_utf8_valid(const char *s, size_t n);

#endif
