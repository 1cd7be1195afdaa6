/* openai.h - the OpenAI wire format of `sdnpu serve`: a request body (chat or text completion)
 * checked field by field and turned into a job (an sdnpu_request), and the JSON the server
 * answers with: completions, stream chunks, model lists and errors naming the field at fault. */
#ifndef SDN_SERVER_OPENAI_H
#define SDN_SERVER_OPENAI_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "server/json_scan.h"
#include "server/pool.h"

/* What the parser needs to know about the server. */
typedef struct srv_api_config {
    const char *model_id;   /* the name clients use in "model" */
    const char *model_path; /* also accepted as "model" */
    int n_ctx;              /* KV cache tokens of a slot: max_tokens is at most this */
    int has_history;        /* a history store is open: `user` / `task_group` become task groups */
    const char *history_scope; /* the requests' default history_scope (--history-scope; NULL: group) */
    size_t max_values;      /* JSON values in one body at most (0: no limit) */
    int max_messages;       /* entries of `messages` at most (0: no limit) */
    size_t max_chars;       /* characters of text (message contents, prompt) at most (0: no limit) */
    const char *tool_format; /* the model's tool-call format (sdnpu_model_info.tool_format): "hermes" or "json" (NULL: json) */
    const sdnpu_request *defaults; /* sampling settings of requests that leave them out (srv_options.defaults; NULL: the library's) */
    int has_seed;                  /* defaults->seed for requests without a seed (else a fresh seed each) */
} srv_api_config;

/* Nesting of JSON values a body may have at most. */
#define SRV_MAX_DEPTH 64

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

/* Scan a request body before it is parsed (json_scan.h): 0, or -1 with e filled when it holds
 * more than cfg->max_values JSON values (413) or nests deeper than SRV_MAX_DEPTH (400). The
 * bytes its parse takes at most are srv_json_tree_bytes(s, len). */
int srv_scan_request(const char *body, size_t len, const srv_api_config *cfg, srv_json_scan *s, srv_error *e);

/* Parse and check a request body of /v1/chat/completions (chat = 1) or /v1/completions
 * (chat = 0); scan is the body's srv_scan_request result (NULL: scanned here). Returns a job
 * with one reference, or NULL with e filled: 400 for malformed JSON, data after the JSON
 * value, a key twice in one object, a string holding \u0000 or a raw control character,
 * invalid UTF-8, wrong types, out-of-range values, more messages or characters than the
 * limits (cfg); 413 for too many JSON values; 404 unknown model; 500 out of memory. The error's
 * param names the field at fault. */
srv_job *srv_parse_request(const char *body, size_t len, int chat, const srv_api_config *cfg, const srv_json_scan *scan, srv_error *e);

/* The error of a failed sdnpu_generate as an answer: SDNPU_EINVAL -> 400 naming the field its
 * message names (a prompt longer than the context -> messages / prompt), else 500. */
void srv_generate_error(const srv_job *j, srv_error *e);

/* {"error": {"message", "type", "param", "code"}} (malloc'd), or NULL when out of memory. */
char *srv_error_json(const srv_error *e);

/* The whole answer of a finished job (chat.completion or text_completion), malloc'd. */
char *srv_completion_json(const srv_job *j, const char *id, long created, const char *model_id);

/* One server-sent event "data: {chunk}\n\n" (malloc'd): the first (role) chunk when first,
 * else a chunk carrying text (len bytes); final: the chunk with finish_reason ("tool_calls"
 * when the answer is read as tool calls), usage and the sdnpu block (text is then ignored). */
char *srv_chunk_event(const srv_job *j, const char *id, long created, const char *model_id, const char *text, size_t len,
                      int first, int final);

/* The same with the chunk's sdnpu extension ext (owned; NULL: none; not with final, whose
 * sdnpu block is the answer's statistics). */
char *srv_chunk_event_sdnpu(const srv_job *j, const char *id, long created, const char *model_id, const char *text, size_t len,
                            int first, int final, cJSON *ext);
/* The sdnpu extension of a chunk carrying the streamed text j->text[from..to) (docs/server.md):
 * {"pieces": [{"text", "source"}, ...], "steps", "tokens"}: the text cut where its tokens' texts
 * end (on_step's text_end), each piece with its token's sdnpu_source as a name ("model",
 * "prompt", "answer", "history", "grammar", "reuse", "draft", "recycled"); the decode steps so far and the
 * tokens whose text is in. Call with the pool's mutex held (the job's token records grow).
 * NULL when out of memory. */
cJSON *srv_chunk_sdnpu(const srv_job *j, size_t from, size_t to);

/* The event of a chat chunk whose delta carries the tool calls `calls` (an array from
 * srv_answer_tool_calls with indexes), malloc'd. */
char *srv_tool_calls_event(const srv_job *j, const char *id, long created, const char *model_id, const cJSON *calls);

/* GET /v1/models (malloc'd). */
char *srv_models_json(const char *model_id, long created);

/* 1 when s[0..n) is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF). */
int srv_utf8_valid(const char *s, size_t n);

#endif
