/* tools.c - structured output and tool calls of `sdnpu serve` (see tools.h).
 *
 * Decisions (docs/server.md, "Structured output and tool calls"):
 * - One constraint per request: response_format (json_object, json_schema), llama-server's
 *   top-level grammar / json_schema, or a forced tool call; two of them are a 400.
 * - json_object is the schema {"type": "object"} (the library allows any object for a schema
 *   without properties); schemas go to the library as they are (it ignores annotations such
 *   as title and description, and refuses keywords it does not support, naming them).
 * - Tools are rendered into the system prompt in the model's format: Hermes (`# Tools`, the
 *   tools as JSON lines inside <tools></tools>, calls as <tool_call>{...}</tool_call>) when its
 *   chat template has one (sdnpu_model_info.tool_format), else a JSON format: a paragraph
 *   listing the functions and asking for {"name": ..., "arguments": {...}} alone.
 * - A forced call ("required", a named tool) constrains the answer with a JSON schema (one
 *   anyOf branch per allowed tool: name const, arguments = its parameters), so for Hermes
 *   models the answer is the bare JSON object, without the <tool_call> wrapper (the grammar
 *   module takes a grammar or a schema, not both, and the tools' schemas are not converted by
 *   hand into GBNF here). "auto" generates freely and reads the answer back as a call when it
 *   is one (either form), else as content.
 * - History: assistant messages with tool_calls and `tool` messages are rendered as text in
 *   the same format (Hermes: <tool_call> blocks, results as a user turn of <tool_response>
 *   blocks; JSON: the call objects, results as a user turn naming the function). */
#include "server/tools.h"

#include "common/sdn_str.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BAD(e, param, ...) srv_fail(e, 400, "invalid_request_error", param, __VA_ARGS__)
#define OOM(e) srv_fail(e, 500, "server_error", NULL, "out of memory")

/* The buffer's string handed to the job (freed with it), or NULL (out of memory). */
static const char *sb_own(srv_job *j, sdn_str *b) {
    char *p = sdn_str_take(b);
    return p ? srv_job_own(j, p) : NULL;
}

/* ---- JSON in Python's json.dumps layout ---- */

static void py_string(sdn_str *b, const char *s) {
    sdn_str_add(b, "\"");
    for (const unsigned char *u = (const unsigned char *)s; *u; u++) {
        char esc[8];
        switch (*u) {
        case '"': sdn_str_add(b, "\\\""); break;
        case '\\': sdn_str_add(b, "\\\\"); break;
        case '\n': sdn_str_add(b, "\\n"); break;
        case '\r': sdn_str_add(b, "\\r"); break;
        case '\t': sdn_str_add(b, "\\t"); break;
        case '\b': sdn_str_add(b, "\\b"); break;
        case '\f': sdn_str_add(b, "\\f"); break;
        default:
            if (*u < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", *u);
                sdn_str_add(b, esc);
            } else {
                sdn_str_addn(b, (const char *)u, 1);
            }
        }
    }
    sdn_str_add(b, "\"");
}

static void py_value(sdn_str *b, const cJSON *v) {
    if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
        int obj = cJSON_IsObject(v);
        sdn_str_add(b, obj ? "{" : "[");
        for (const cJSON *c = v->child; c; c = c->next) {
            if (c != v->child) sdn_str_add(b, ", ");
            if (obj) {
                py_string(b, c->string ? c->string : "");
                sdn_str_add(b, ": ");
            }
            py_value(b, c);
        }
        sdn_str_add(b, obj ? "}" : "]");
    } else if (cJSON_IsString(v)) {
        py_string(b, v->valuestring);
    } else {
        char *s = cJSON_PrintUnformatted(v); /* numbers, true, false, null */
        if (!s) b->oom = 1;
        else sdn_str_add(b, s);
        free(s);
    }
}

char *srv_json_print_py(const cJSON *value) {
    sdn_str b = {0};
    py_value(&b, value);
    sdn_str_add(&b, "");
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* ---- schemas ---- */

/* A schema (an object or a boolean) as the text the library gets. */
static const char *schema_text(srv_job *j, const cJSON *schema, const char *param, srv_error *e) {
    if (!cJSON_IsObject(schema) && !cJSON_IsBool(schema)) {
        BAD(e, param, "'%s' must be a JSON schema (an object, or a boolean)", param);
        return NULL;
    }
    if (cJSON_IsFalse(schema)) {
        BAD(e, param, "'%s' is the schema false, which no answer satisfies", param);
        return NULL;
    }
    char *s = srv_job_own(j, cJSON_PrintUnformatted(schema));
    if (!s) OOM(e);
    return s;
}

/* ---- tool calls and results in the conversation ---- */

static int hermes(const srv_api_config *cfg) { return cfg->tool_format && !strcmp(cfg->tool_format, "hermes"); }

/* The arguments of a call in the history (a JSON string, as OpenAI sends them, or an object)
 * printed in the JSON layout; text that is not JSON goes in as a JSON string. */
static int add_arguments(sdn_str *b, const cJSON *args, const char *param, srv_error *e) {
    if (cJSON_IsObject(args)) {
        py_value(b, args);
        return 0;
    }
    if (!cJSON_IsString(args)) return BAD(e, param, "'%s' must be a string holding a JSON object", param);
    cJSON *parsed = cJSON_Parse(args->valuestring);
    if (parsed) py_value(b, parsed);
    else py_string(b, args->valuestring);
    cJSON_Delete(parsed);
    return 0;
}

int srv_render_tool_calls(srv_job *j, const cJSON *calls, int i, const char *content, const srv_api_config *cfg, const char **out,
                          srv_error *e) {
    char param[96];
    snprintf(param, sizeof param, "messages[%d].tool_calls", i);
    if (!cJSON_IsArray(calls)) return BAD(e, param, "'%s' must be an array", param);
    int n = cJSON_GetArraySize(calls);
    if (n > SRV_MAX_TOOLS) return BAD(e, param, "'%s' holds %d calls, at most %d", param, n, SRV_MAX_TOOLS);
    sdn_str b = {0};
    sdn_str_add(&b, content ? content : "");
    int k = 0;
    for (const cJSON *c = calls->child; c; c = c->next, k++) {
        snprintf(param, sizeof param, "messages[%d].tool_calls[%d]", i, k);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(c, "type");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        int bad = 0;
        if (!cJSON_IsObject(c)) bad = BAD(e, param, "'%s' must be an object", param);
        else if (type && !cJSON_IsNull(type) && !(cJSON_IsString(type) && !strcmp(type->valuestring, "function")))
            bad = BAD(e, param, "'%s.type' must be \"function\"", param);
        else if (!cJSON_IsObject(fn)) bad = BAD(e, param, "'%s.function' must be an object with a name and arguments", param);
        if (bad) {
            free(b.p);
            return -1;
        }
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name"), *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        snprintf(param, sizeof param, "messages[%d].tool_calls[%d].function.name", i, k);
        if (!cJSON_IsString(name) || !name->valuestring[0]) {
            free(b.p);
            return BAD(e, param, "'%s' must be a non-empty string", param);
        }
        snprintf(param, sizeof param, "messages[%d].tool_calls[%d].function.arguments", i, k);
        if (b.n) sdn_str_add(&b, "\n");
        if (hermes(cfg)) sdn_str_add(&b, "<tool_call>\n");
        sdn_str_add(&b, "{\"name\": ");
        py_string(&b, name->valuestring);
        sdn_str_add(&b, ", \"arguments\": ");
        if (!args || cJSON_IsNull(args)) sdn_str_add(&b, "{}");
        else if (add_arguments(&b, args, param, e)) {
            free(b.p);
            return -1;
        }
        sdn_str_add(&b, "}");
        if (hermes(cfg)) sdn_str_add(&b, "\n</tool_call>");
    }
    if (!(*out = sb_own(j, &b))) return OOM(e);
    return 0;
}

/* The name of the function whose call has id `id`, from the assistant messages' tool_calls. */
static const char *call_name(const cJSON *msgs, const char *id) {
    for (const cJSON *m = msgs->child; m; m = m->next) {
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        if (!cJSON_IsArray(calls)) continue;
        for (const cJSON *c = calls->child; c; c = c->next) {
            const cJSON *cid = cJSON_GetObjectItemCaseSensitive(c, "id"), *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
            if (cJSON_IsString(cid) && !strcmp(cid->valuestring, id) && cJSON_IsString(name)) return name->valuestring;
        }
    }
    return NULL;
}

int srv_render_tool_result(srv_job *j, const cJSON *msgs, const cJSON *m, int i, const char *content, const char *prev,
                           const srv_api_config *cfg, const char **out, srv_error *e) {
    char param[64];
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "tool_call_id"), *name = cJSON_GetObjectItemCaseSensitive(m, "name");
    snprintf(param, sizeof param, "messages[%d].tool_call_id", i);
    if (id && !cJSON_IsNull(id) && !cJSON_IsString(id)) return BAD(e, param, "'%s' must be a string", param);
    snprintf(param, sizeof param, "messages[%d].name", i);
    if (name && !cJSON_IsNull(name) && !cJSON_IsString(name)) return BAD(e, param, "'%s' must be a string", param);
    const char *fname = cJSON_IsString(name) ? name->valuestring : cJSON_IsString(id) ? call_name(msgs, id->valuestring) : NULL;
    sdn_str b = {0};
    if (prev) {
        sdn_str_add(&b, prev);
        sdn_str_add(&b, "\n");
    }
    if (hermes(cfg)) {
        sdn_str_add(&b, "<tool_response>\n");
        sdn_str_add(&b, content);
        sdn_str_add(&b, "\n</tool_response>");
    } else {
        sdn_str_add(&b, "Result of the function call");
        if (fname) {
            sdn_str_add(&b, " ");
            sdn_str_add(&b, fname);
        }
        sdn_str_add(&b, ":\n");
        sdn_str_add(&b, content);
    }
    if (!(*out = sb_own(j, &b))) return OOM(e);
    return 0;
}

/* ---- the request's fields ---- */

static const cJSON *field(const cJSON *obj, const char *name) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(obj, name);
    return f && !cJSON_IsNull(f) ? f : NULL;
}

/* A function name: 1 to 64 of a-z A-Z 0-9 _ - (OpenAI's rule). */
static int valid_name(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 64) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return 0;
    }
    return 1;
}

/* response_format: 0 none (absent, null, text), 1 set (j->r.* filled, *src the field the
 * constraint came from), -1 error. */
static int parse_response_format(srv_job *j, const cJSON *body, const char **src, srv_error *e) {
    const cJSON *rf = field(body, "response_format");
    if (!rf) return 0;
    if (!cJSON_IsObject(rf)) return BAD(e, "response_format", "'response_format' must be an object with a 'type'");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
    if (!cJSON_IsString(type))
        return BAD(e, "response_format.type", "'response_format.type' must be one of \"text\", \"json_object\", \"json_schema\"");
    const char *t = type->valuestring;
    if (!strcmp(t, "text")) return 0;
    if (!strcmp(t, "json_object")) {
        const cJSON *schema = field(rf, "schema"); /* llama-server's extension: a schema with json_object */
        if (schema) {
            *src = "response_format.schema";
            return (j->r.json_schema = schema_text(j, schema, *src, e)) ? 1 : -1;
        }
        *src = "response_format";
        j->r.json_schema = "{\"type\":\"object\"}"; /* any object */
        return 1;
    }
    if (strcmp(t, "json_schema") != 0)
        return BAD(e, "response_format.type", "'response_format.type' = '%s' is not one of \"text\", \"json_object\", \"json_schema\"", t);
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
    if (!js || cJSON_IsNull(js))
        return BAD(e, "response_format.json_schema", "'response_format.json_schema' is required with type \"json_schema\" (an object with 'name' and 'schema')");
    if (!cJSON_IsObject(js)) return BAD(e, "response_format.json_schema", "'response_format.json_schema' must be an object with 'name' and 'schema'");
    const cJSON *name = field(js, "name"), *strict = field(js, "strict"), *schema = cJSON_GetObjectItemCaseSensitive(js, "schema");
    if (name && (!cJSON_IsString(name) || !valid_name(name->valuestring)))
        return BAD(e, "response_format.json_schema.name", "'response_format.json_schema.name' must be 1 to 64 letters, digits, '_' or '-'");
    if (strict && !cJSON_IsBool(strict)) return BAD(e, "response_format.json_schema.strict", "'response_format.json_schema.strict' must be a boolean");
    if (!schema || cJSON_IsNull(schema))
        return BAD(e, "response_format.json_schema.schema", "'response_format.json_schema.schema' is required (the JSON schema of the answer)");
    *src = "response_format.json_schema.schema";
    if (!(j->r.json_schema = schema_text(j, schema, *src, e))) return -1;
    return 1;
}

/* The system prompt's tools section: the tools as JSON lines and how to call them. forced:
 * -2 not forced (auto), -1 any tool, else that tool. */
static const char *tools_section(srv_job *j, const cJSON *tools, int forced, const srv_api_config *cfg, srv_error *e) {
    sdn_str b = {0};
    int h = hermes(cfg);
    if (h) sdn_str_add(&b, "# Tools\n\nYou may call one or more functions to help with the user's request.\n\n"
                      "The functions you can call are given as JSON signatures inside <tools></tools> XML tags:\n<tools>\n");
    else sdn_str_add(&b, "# Tools\n\nYou can call the functions below, each given as a JSON object (its name, what it does, and its parameters as a JSON schema):\n");
    for (const cJSON *t = tools->child; t; t = t->next) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        if (h) py_value(&b, t);
        else {
            sdn_str_add(&b, "{\"name\": ");
            py_string(&b, cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring);
            const cJSON *d = field(fn, "description"), *p = field(fn, "parameters");
            if (d) {
                sdn_str_add(&b, ", \"description\": ");
                py_value(&b, d);
            }
            if (p) {
                sdn_str_add(&b, ", \"parameters\": ");
                py_value(&b, p);
            }
            sdn_str_add(&b, "}");
        }
        sdn_str_add(&b, "\n");
    }
    if (h) sdn_str_add(&b, "</tools>\n\nTo call a function, write a JSON object with its name and arguments inside <tool_call></tool_call> XML tags:\n"
                      "<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>");
    else sdn_str_add(&b, "\nTo call a function, answer with a JSON object alone, nothing before or after it: "
                    "{\"name\": \"<function name>\", \"arguments\": {<its arguments, as its parameters say>}}. "
                    "If no function is needed, answer normally.");
    if (forced >= 0) {
        const cJSON *t = cJSON_GetArrayItem(tools, forced);
        sdn_str_add(&b, "\n\nCall the function ");
        py_string(&b, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"), "name")->valuestring);
        sdn_str_add(&b, " now: answer with its call as the JSON object {\"name\": ..., \"arguments\": {...}} alone.");
    } else if (forced == -1) {
        sdn_str_add(&b, "\n\nCall one of the functions now: answer with the call as the JSON object {\"name\": ..., \"arguments\": {...}} alone.");
    }
    const char *s = sb_own(j, &b);
    if (!s) OOM(e);
    return s;
}

/* The schema of a forced call: {"type": "object", "properties": {"name": {"const": N},
 * "arguments": P}, "required": ["name", "arguments"]} for the one tool, or an anyOf of one
 * such branch per tool. */
static const char *call_schema(srv_job *j, const cJSON *tools, int forced, srv_error *e) {
    cJSON *any = cJSON_CreateArray();
    int k = 0, ok = any != NULL;
    for (const cJSON *t = tools->child; t && ok; t = t->next, k++) {
        if (forced >= 0 && k != forced) continue;
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *params = field(fn, "parameters");
        cJSON *br = cJSON_CreateObject();
        cJSON *props = br && cJSON_AddStringToObject(br, "type", "object") ? cJSON_AddObjectToObject(br, "properties") : NULL;
        cJSON *nm = props ? cJSON_AddObjectToObject(props, "name") : NULL;
        cJSON *args = params ? cJSON_Duplicate(params, 1) : cJSON_CreateObject();
        cJSON *req = cJSON_CreateArray();
        ok = br && nm && args && req && cJSON_AddStringToObject(nm, "const", j->tool_names[k]);
        if (ok && !params) ok = cJSON_AddStringToObject(args, "type", "object") && cJSON_AddObjectToObject(args, "properties");
        if (ok) {
            cJSON_AddItemToObject(props, "arguments", args);
            args = NULL;
            ok = cJSON_AddItemToArray(req, cJSON_CreateString("name")) && cJSON_AddItemToArray(req, cJSON_CreateString("arguments"));
        }
        if (ok) {
            cJSON_AddItemToObject(br, "required", req);
            req = NULL;
            cJSON_AddItemToArray(any, br);
            br = NULL;
        }
        cJSON_Delete(br);
        cJSON_Delete(args);
        cJSON_Delete(req);
    }
    cJSON *root = NULL;
    if (ok && forced >= 0) {
        root = cJSON_DetachItemFromArray(any, 0);
    } else if (ok && (root = cJSON_CreateObject())) {
        cJSON_AddItemToObject(root, "anyOf", any);
        any = NULL;
    }
    char *s = root ? srv_job_own(j, cJSON_PrintUnformatted(root)) : NULL;
    cJSON_Delete(root);
    cJSON_Delete(any);
    if (!s) OOM(e);
    return s;
}

/* tools: checked, names kept in j->tool_names. 0 absent, 1 present, -1 error. */
static int parse_tools(srv_job *j, const cJSON *body, int chat, srv_error *e) {
    const cJSON *tools = field(body, "tools");
    if (!tools) return 0;
    if (!chat) return BAD(e, "tools", "'tools' is a field of /v1/chat/completions, not of /v1/completions");
    if (!cJSON_IsArray(tools)) return BAD(e, "tools", "'tools' must be an array of {\"type\": \"function\", \"function\": {...}}");
    int n = cJSON_GetArraySize(tools);
    if (n == 0) return 0; /* as OpenAI's clients send it: no tools */
    if (n > SRV_MAX_TOOLS) return BAD(e, "tools", "'tools' holds %d tools, at most %d", n, SRV_MAX_TOOLS);
    j->tool_names = (const char **)(void *)srv_job_own(j, calloc((size_t)n, sizeof *j->tool_names));
    if (!j->tool_names) return OOM(e);
    int k = 0;
    for (const cJSON *t = tools->child; t; t = t->next, k++) {
        char param[96];
        snprintf(param, sizeof param, "tools[%d]", k);
        if (!cJSON_IsObject(t)) return BAD(e, param, "'%s' must be an object {\"type\": \"function\", \"function\": {...}}", param);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type"), *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        snprintf(param, sizeof param, "tools[%d].type", k);
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0)
            return BAD(e, param, "'%s' must be \"function\" (the only kind of tool)", param);
        snprintf(param, sizeof param, "tools[%d].function", k);
        if (!cJSON_IsObject(fn)) return BAD(e, param, "'%s' must be an object with 'name', 'description' and 'parameters'", param);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        snprintf(param, sizeof param, "tools[%d].function.name", k);
        if (!name || cJSON_IsNull(name)) return BAD(e, param, "'%s' is required", param);
        if (!cJSON_IsString(name) || !valid_name(name->valuestring))
            return BAD(e, param, "'%s' must be 1 to 64 letters, digits, '_' or '-'", param);
        for (int i = 0; i < k; i++)
            if (!strcmp(j->tool_names[i], name->valuestring))
                return BAD(e, param, "'%s' = '%s' is the name of tools[%d] too: names must differ", param, name->valuestring, i);
        j->tool_names[k] = name->valuestring;
        const cJSON *d = field(fn, "description"), *p = field(fn, "parameters"), *st = field(fn, "strict");
        snprintf(param, sizeof param, "tools[%d].function.description", k);
        if (d && !cJSON_IsString(d)) return BAD(e, param, "'%s' must be a string", param);
        snprintf(param, sizeof param, "tools[%d].function.parameters", k);
        if (p && !cJSON_IsObject(p)) return BAD(e, param, "'%s' must be a JSON schema object (of the arguments object)", param);
        snprintf(param, sizeof param, "tools[%d].function.strict", k);
        if (st && !cJSON_IsBool(st)) return BAD(e, param, "'%s' must be a boolean", param);
    }
    j->n_tools = n;
    return 1;
}

/* tool_choice: sets j->tools and j->forced_tool. */
static int parse_tool_choice(srv_job *j, const cJSON *body, int has_tools, srv_error *e) {
    const cJSON *tc = field(body, "tool_choice");
    j->forced_tool = -1;
    j->tools = has_tools ? SRV_TOOLS_AUTO : SRV_TOOLS_OFF;
    if (!tc) return 0;
    if (cJSON_IsString(tc)) {
        const char *s = tc->valuestring;
        if (!strcmp(s, "none")) j->tools = SRV_TOOLS_OFF;
        else if (!strcmp(s, "auto")) (void)0;
        else if (!strcmp(s, "required")) {
            if (!has_tools) return BAD(e, "tool_choice", "'tool_choice' = \"required\" needs 'tools'");
            j->tools = SRV_TOOLS_FORCED;
            if (j->n_tools == 1) j->forced_tool = 0; /* one tool: that one */
        } else return BAD(e, "tool_choice", "'tool_choice' = '%s' is not one of \"none\", \"auto\", \"required\", or {\"type\": \"function\", \"function\": {\"name\": ...}}", s);
        return 0;
    }
    if (!cJSON_IsObject(tc))
        return BAD(e, "tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\", or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(tc, "type"), *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0)
        return BAD(e, "tool_choice.type", "'tool_choice.type' must be \"function\"");
    const cJSON *name = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "name") : NULL;
    if (!cJSON_IsString(name)) return BAD(e, "tool_choice.function.name", "'tool_choice.function.name' must be a string: the tool to call");
    if (!has_tools) return BAD(e, "tool_choice", "'tool_choice' names the tool '%s', but the request has no 'tools'", name->valuestring);
    for (int k = 0; k < j->n_tools; k++)
        if (!strcmp(j->tool_names[k], name->valuestring)) {
            j->tools = SRV_TOOLS_FORCED;
            j->forced_tool = k;
            return 0;
        }
    return BAD(e, "tool_choice.function.name", "'tool_choice.function.name' = '%s' is not one of the request's tools", name->valuestring);
}

/* Put the tools section into the system message (after its text), or a new system message first. */
static int add_tools_prompt(srv_job *j, const cJSON *body, const srv_api_config *cfg, srv_error *e) {
    const cJSON *tools = field(body, "tools");
    const char *sec = tools_section(j, tools, j->tools == SRV_TOOLS_FORCED ? j->forced_tool : -2, cfg, e);
    if (!sec) return -1;
    sdnpu_message *m = j->messages;
    int n = j->r.n_messages;
    if (n > 0 && !strcmp(m[0].role, "system")) {
        sdn_str b = {0};
        sdn_str_add(&b, m[0].content);
        if (m[0].content[0]) sdn_str_add(&b, "\n\n");
        sdn_str_add(&b, sec);
        if (!(m[0].content = sb_own(j, &b))) return OOM(e);
        return 0;
    }
    memmove(m + 1, m, sizeof *m * (size_t)n); /* parse_messages left room for one */
    m[0].role = "system";
    m[0].content = sec;
    j->r.n_messages = n + 1;
    return 0;
}

int srv_parse_structured(srv_job *j, const cJSON *body, int chat, const srv_api_config *cfg, srv_error *e) {
    j->forced_tool = -1;
    const char *src = NULL; /* the field that set the constraint so far */
    const char *rf = NULL;
    int rc = parse_response_format(j, body, &rf, e);
    if (rc < 0) return -1;
    if (rc) src = rf;
    const cJSON *g = field(body, "grammar"), *js = field(body, "json_schema");
    if (g) {
        if (src) return BAD(e, "grammar", "'grammar' and 'response_format' both constrain the answer: give one");
        if (!cJSON_IsString(g) || !g->valuestring[0]) return BAD(e, "grammar", "'grammar' must be a non-empty string (GBNF, root rule \"root\")");
        j->r.grammar = g->valuestring;
        src = "grammar";
    }
    if (js) {
        if (src) return BAD(e, "json_schema", "'json_schema' and '%s' both constrain the answer: give one", j->r.grammar ? "grammar" : "response_format");
        if (!(j->r.json_schema = schema_text(j, js, "json_schema", e))) return -1;
        src = "json_schema";
    }
    int has_tools = parse_tools(j, body, chat, e);
    if (has_tools < 0) return -1;
    const cJSON *ptc = field(body, "parallel_tool_calls");
    if (ptc && !cJSON_IsBool(ptc)) return BAD(e, "parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    if (!chat && field(body, "tool_choice")) return BAD(e, "tool_choice", "'tool_choice' is a field of /v1/chat/completions, not of /v1/completions");
    if (parse_tool_choice(j, body, has_tools, e)) return -1;
    if (j->tools == SRV_TOOLS_FORCED) {
        if (src)
            return BAD(e, "tool_choice", "'tool_choice' forces a tool call and '%s' constrains the answer too: give one",
                       strncmp(src, "response_format", 15) ? src : "response_format");
        if (!(j->r.json_schema = call_schema(j, field(body, "tools"), j->forced_tool, e))) return -1;
        src = "tools";
    }
    if (j->tools != SRV_TOOLS_OFF && add_tools_prompt(j, body, cfg, e)) return -1;
    j->constraint = src;
    return 0;
}

/* ---- answers read back as tool calls ---- */

static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

/* "call_" and 24 hex digits, unique in this process and unlikely to repeat across runs. */
static void call_id(char *id, size_t cap) {
    static uint64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t a = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    uint64_t x = a ^ (n * 0x9e3779b97f4a7c15ull);
    x ^= x >> 30, x *= 0xbf58476d1ce4e5b9ull, x ^= x >> 27, x *= 0x94d049bb133111ebull, x ^= x >> 31;
    snprintf(id, cap, "call_%016llx%08llx", (unsigned long long)x, (unsigned long long)(n & 0xffffffffull));
}

/* One call's JSON text (s, n bytes) appended to calls: 0, or -1 when it is not a call of one
 * of the job's tools. */
static int add_call(const srv_job *j, cJSON *calls, const char *s, size_t n, int with_index) {
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(s, n, &end, 0);
    if (!o) return -1;
    /* nothing but whitespace may follow the object (in its block, or in the answer) */
    const char *p = end && end >= s && end <= s + n ? end : s + n;
    while (p < s + n && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    int ok = cJSON_IsObject(o) && p == s + n;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name"), *args = cJSON_GetObjectItemCaseSensitive(o, "arguments");
    ok = ok && cJSON_IsString(name) && cJSON_GetArraySize(o) == 2;
    int known = 0;
    for (int k = 0; ok && k < j->n_tools && !known; k++) known = !strcmp(j->tool_names[k], name->valuestring);
    char *argtext = NULL;
    if (ok && known) {
        if (cJSON_IsObject(args)) argtext = cJSON_PrintUnformatted(args);
        else if (cJSON_IsString(args)) { /* arguments given as a JSON string holding the object */
            cJSON *a = cJSON_Parse(args->valuestring);
            if (cJSON_IsObject(a)) argtext = cJSON_PrintUnformatted(a);
            cJSON_Delete(a);
        }
    }
    cJSON *c = argtext ? cJSON_CreateObject() : NULL;
    if (c) {
        char id[48];
        call_id(id, sizeof id);
        if (with_index) cJSON_AddNumberToObject(c, "index", cJSON_GetArraySize(calls));
        cJSON_AddStringToObject(c, "id", id);
        cJSON_AddStringToObject(c, "type", "function");
        cJSON *fn = cJSON_AddObjectToObject(c, "function");
        cJSON_AddStringToObject(fn, "name", name->valuestring);
        cJSON_AddStringToObject(fn, "arguments", argtext);
        cJSON_AddItemToArray(calls, c);
    }
    free(argtext);
    cJSON_Delete(o);
    return c ? 0 : -1;
}

cJSON *srv_answer_tool_calls(const srv_job *j, const char *text, int with_index) {
    if (!j->chat || j->tools == SRV_TOOLS_OFF || !text || j->n_tools == 0) return NULL;
    const char *p = skip_ws(text);
    if (!strncmp(p, "<think>", 7)) {
        const char *q = strstr(p, "</think>");
        if (!q) return NULL;
        p = skip_ws(q + 8);
    }
    cJSON *calls = cJSON_CreateArray();
    if (!calls) return NULL;
    int ok = 0;
    if (*p == '{') {
        ok = !add_call(j, calls, p, strlen(p), with_index);
    } else if (!strncmp(p, "<tool_call>", 11)) {
        ok = 1;
        while (ok && *p) {
            if (strncmp(p, "<tool_call>", 11) != 0) {
                ok = 0;
                break;
            }
            const char *q = strstr(p + 11, "</tool_call>");
            if (!q) {
                ok = 0;
                break;
            }
            ok = !add_call(j, calls, p + 11, (size_t)(q - (p + 11)), with_index);
            p = skip_ws(q + 12);
        }
    }
    if (!ok || cJSON_GetArraySize(calls) == 0) {
        cJSON_Delete(calls);
        return NULL;
    }
    return calls;
}

int srv_tool_call_possible(const char *text, size_t len) {
    size_t i = 0;
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) i++;
    if (i == len) return 1; /* nothing but whitespace yet */
    if (text[i] == '{') return 1;
    static const char *const opens[] = {"<tool_call>", "<think>"};
    for (int k = 0; k < 2; k++) {
        size_t n = strlen(opens[k]), m = len - i < n ? len - i : n;
        if (!strncmp(text + i, opens[k], m)) return 1;
    }
    return 0;
}

void srv_constraint_error(const srv_job *j, const char *msg, srv_error *e) {
    const char *src = j->constraint ? j->constraint : "";
    if (strcmp(src, "tools") != 0) {
        BAD(e, src, "'%s': %s", src, msg);
        return;
    }
    /* a tool's parameters: the pointer into the call schema, relative to them */
    int tool = j->forced_tool;
    const char *rest = NULL, *at = strstr(msg, " at /");
    if (at) {
        const char *ptr = at + 4;
        if (tool < 0 && !strncmp(ptr, "/anyOf/", 7)) {
            char *end;
            long k = strtol(ptr + 7, &end, 10);
            if (end != ptr + 7 && k >= 0 && k < j->n_tools) tool = (int)k, ptr = end;
            else tool = -1;
        }
        if (tool >= 0 && !strncmp(ptr, "/properties/arguments", 21)) rest = ptr + 21;
    }
    if (!rest) {
        BAD(e, "tools", "'tools': %s", msg);
        return;
    }
    char param[96];
    snprintf(param, sizeof param, "tools[%d].function.parameters", tool);
    BAD(e, param, "'%s': %.*s at %s", param, (int)(at - msg), msg, rest[0] ? rest : "/");
}
