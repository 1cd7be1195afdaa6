/* tools.h - structured output and tool calls of `sdnpu serve` (issue 30, docs/server.md,
 * "Structured output and tool calls"): the request fields that constrain an answer
 * (response_format, llama-server's grammar and json_schema, tools with tool_choice) read into
 * the request's grammar or JSON schema and its prompt, tool calls and tool results of the
 * conversation rendered in the model's tool-call format, and an answer read back as tool
 * calls in OpenAI's shape. Uses only the public API; the library compiles and enforces the
 * constraint (an invalid one fails sdnpu_generate with SDNPU_EINVAL, mapped to a 400 here). */
#ifndef SDN_SERVER_TOOLS_H
#define SDN_SERVER_TOOLS_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "server/openai.h"

/* srv_job.tools: how the answer is read back. */
enum {
    SRV_TOOLS_OFF = 0,    /* no tools (or tool_choice "none"): the answer is content */
    SRV_TOOLS_AUTO = 1,   /* tools rendered, answer free: read back as tool calls when it is one */
    SRV_TOOLS_FORCED = 2, /* "required" or a named tool: the answer is constrained to a call */
};

/* Most tools a request may list. */
#define SRV_MAX_TOOLS 128

/* A chat message's tool calls (messages[i].tool_calls, an array) rendered as the assistant's
 * text in the model's format (cfg->tool_format), after its content (NULL: none). *out is owned
 * by the job. 0, or -1 with e naming the field at fault. */
int srv_render_tool_calls(srv_job *j, const cJSON *calls, int i, const char *content, const srv_api_config *cfg, const char **out,
                          srv_error *e);

/* A `tool` message (messages[i], content already read) rendered as the user-side text the
 * model's format gives a tool's result; prev: the text of the tool message just before it,
 * which this one is appended to (consecutive results form one turn), else NULL. msgs: the
 * whole messages array (a result names its function through its tool_call_id). */
int srv_render_tool_result(srv_job *j, const cJSON *msgs, const cJSON *m, int i, const char *content, const char *prev,
                           const srv_api_config *cfg, const char **out, srv_error *e);

/* Read response_format, grammar, json_schema, tools, tool_choice and parallel_tool_calls of a
 * body (chat: /v1/chat/completions; tools only there) into the job: the constraint
 * (j->r.grammar or j->r.json_schema, j->constraint naming its field), the tools section of
 * the system prompt (chat messages must be parsed already, with one spare entry in
 * j->messages), j->tools and the tool names. 0, or -1 with e filled (400 naming the field). */
int srv_parse_structured(srv_job *j, const cJSON *body, int chat, const srv_api_config *cfg, srv_error *e);

/* The answer `text` of a chat job with tools read as tool calls: a JSON array of OpenAI
 * tool_calls entries ({"id", "type": "function", "function": {"name", "arguments": "<JSON>"}};
 * with_index: each with its "index", as stream deltas carry), or NULL when the answer is not
 * one (then it is content). Accepted forms: one or more <tool_call>...</tool_call> blocks
 * (Hermes) or one JSON object {"name": ..., "arguments": {...}}, the whole answer but
 * whitespace and a leading <think>...</think> block; the name must be one of the request's
 * tools and the arguments a JSON object. */
cJSON *srv_answer_tool_calls(const srv_job *j, const char *text, int with_index);

/* While streaming a job with tools: 1 when the text so far (len bytes) may still become a
 * tool call (hold it back), 0 when it cannot (stream it as content). */
int srv_tool_call_possible(const char *text, size_t len);

/* The error answer of a constraint the library refused (message msg): 400 naming the field
 * the constraint came from; for a tool's parameters, `tools[k].function.parameters`, with the
 * JSON pointer relative to them. */
void srv_constraint_error(const srv_job *j, const char *msg, srv_error *e);

/* value printed in the layout of Python's json.dumps ({"a": [1, 2]}), malloc'd; NULL when
 * out of memory. */
char *srv_json_print_py(const cJSON *value);

#endif
