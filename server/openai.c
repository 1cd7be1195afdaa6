/* openai.c - request bodies in, JSON answers out, in the OpenAI wire format.
 *
 * A body is scanned first (json_scan.c: its size as a tree, and strings a parse would change:
 * \u0000, raw control characters), then parsed with cJSON; nothing may follow the JSON value,
 * no object may hold a key twice (cJSON would keep the first silently), every string must be
 * UTF-8 (cJSON passes bytes through), and each field the server reads is checked for its type
 * and range, so that an error names the field (`messages[1].content`, `sdnpu.method`) the way
 * OpenAI's `param` does. Fields the server does not use (presence_penalty, logprobs, ...)
 * are ignored; response_format, grammar, json_schema, tools and tool_choice are read by
 * tools.c. The strings of the resulting sdnpu_request point into the parsed tree (or `owned`),
 * which the job keeps. */
#include "server/openai.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/tools.h"

#define BAD(e, param, ...) srv_fail(e, 400, "invalid_request_error", param, __VA_ARGS__)

/* ---- UTF-8 ---- */

/* Length of the well-formed UTF-8 character at s[0..n), or 0 when it is not one. */
static size_t utf8_char(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t k;
    unsigned cp, min;
    if (c >= 0xC2 && c <= 0xDF) k = 2, cp = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) k = 3, cp = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) k = 4, cp = c & 0x07, min = 0x10000;
    else return 0;
    if (n < k) return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return k;
}

int srv_utf8_valid(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_char(u + i, n - i);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

/* Drop the bytes of s that are not part of a well-formed UTF-8 character, in place. A field
 * cut by snprintf (a 128-byte param, a 1024-byte message quoting a 4096-byte model name, a
 * library message cut at its own limit) can end inside a character; the answer must stay
 * UTF-8 (a JSON client may refuse it otherwise). */
static void utf8_scrub(char *s) {
    size_t n = strlen(s), w = 0;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_char((const unsigned char *)s + i, n - i);
        if (!k) {
            i++;
            continue;
        }
        memmove(s + w, s + i, k);
        w += k, i += k;
    }
    s[w] = 0;
}

int srv_fail(srv_error *e, int status, const char *type, const char *param, const char *fmt, ...) {
    e->status = status;
    e->type = type;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    utf8_scrub(e->param);
    utf8_scrub(e->message);
    return -1;
}

/* A copy of s[0..n) with each malformed byte replaced by U+FFFD (answers are JSON strings). */
static char *utf8_clean(const char *s, size_t n) {
    char *o = malloc(n * 3 + 1);
    if (!o) return NULL;
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_char((const unsigned char *)s + i, n - i);
        if (k) memcpy(o + w, s + i, k), w += k, i += k;
        else memcpy(o + w, "\xEF\xBF\xBD", 3), w += 3, i++;
    }
    o[w] = 0;
    return o;
}

/* An object's keys in order, for finding one that appears twice. */
static int cmp_key(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* A key that appears twice among the members of object o (NULL: none). Small objects are
 * compared pairwise, large ones sorted (a hostile object may hold many thousands of keys). */
static const char *duplicate_key(const cJSON *o, int *oom) {
    int n = 0;
    for (const cJSON *c = o->child; c; c = c->next) n++;
    if (n <= 16) {
        for (const cJSON *c = o->child; c; c = c->next)
            for (const cJSON *d = o->child; d != c; d = d->next)
                if (c->string && d->string && !strcmp(c->string, d->string)) return c->string;
        return NULL;
    }
    const char **keys = malloc(sizeof *keys * (size_t)n);
    if (!keys) {
        *oom = 1;
        return NULL;
    }
    int k = 0;
    for (const cJSON *c = o->child; c; c = c->next) keys[k++] = c->string ? c->string : "";
    qsort(keys, (size_t)n, sizeof *keys, cmp_key);
    const char *dup = NULL;
    for (int i = 1; i < n && !dup; i++)
        if (!strcmp(keys[i - 1], keys[i])) dup = keys[i];
    free(keys);
    return dup;
}

/* Every string of the tree (keys too) UTF-8 and no object with a key twice: 0, or -1 with e
 * naming the first that is not (its path built in `path`). */
static int check_tree(const cJSON *it, char *path, size_t cap, srv_error *e) {
    size_t base = strlen(path);
    if (cJSON_IsObject(it)) {
        int oom = 0;
        const char *dup = duplicate_key(it, &oom);
        if (oom) return srv_fail(e, 500, "server_error", NULL, "out of memory");
        if (dup && srv_utf8_valid(dup, strlen(dup))) {
            snprintf(path + base, cap - base, "%s%s", base ? "." : "", dup);
            return BAD(e, path, "'%s' appears twice in one object: a key may appear once", path);
        }
    }
    int i = 0;
    for (const cJSON *c = it->child; c; c = c->next, i++) {
        if (cJSON_IsObject(it)) {
            if (c->string && !srv_utf8_valid(c->string, strlen(c->string)))
                return BAD(e, path, "a key of '%s' is not valid UTF-8", path[0] ? path : "(body)");
            snprintf(path + base, cap - base, "%s%s", base ? "." : "", c->string ? c->string : "");
        } else {
            snprintf(path + base, cap - base, "[%d]", i);
        }
        if (cJSON_IsString(c) && !srv_utf8_valid(c->valuestring, strlen(c->valuestring))) return BAD(e, path, "'%s' is not valid UTF-8", path);
        if ((cJSON_IsObject(c) || cJSON_IsArray(c)) && check_tree(c, path, cap, e)) return -1;
        path[base] = 0;
    }
    return 0;
}

/* Characters (code points) of a UTF-8 string. */
static size_t utf8_chars(const char *s) {
    size_t n = 0;
    for (const unsigned char *u = (const unsigned char *)s; *u; u++) n += (*u & 0xC0) != 0x80;
    return n;
}

/* Add a text field's characters to the request's total: 0, or -1 past cfg->max_chars. */
static int count_chars(const srv_api_config *cfg, size_t *total, const char *text, const char *param, srv_error *e) {
    *total += utf8_chars(text);
    if (cfg->max_chars && *total > cfg->max_chars)
        return BAD(e, param, "the request's text is longer than %zu characters, the server's limit (passed at '%s')", cfg->max_chars, param);
    return 0;
}

/* ---- field readers: 0 absent or null, 1 present and valid, -1 error (e filled) ---- */

static const cJSON *field(const cJSON *obj, const char *name) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(obj, name);
    return f && !cJSON_IsNull(f) ? f : NULL;
}

static int get_int(const cJSON *obj, const char *name, const char *param, double lo, double hi, double *out, srv_error *e) {
    const cJSON *f = field(obj, name);
    if (!f) return 0;
    if (!cJSON_IsNumber(f) || floor(f->valuedouble) != f->valuedouble)
        return BAD(e, param, "'%s' must be an integer", param);
    if (f->valuedouble < lo || f->valuedouble > hi)
        return BAD(e, param, "'%s' = %.0f is out of range [%.0f, %.0f]", param, f->valuedouble, lo, hi);
    *out = f->valuedouble;
    return 1;
}

static int get_num(const cJSON *obj, const char *name, const char *param, double lo, double hi, double *out, srv_error *e) {
    const cJSON *f = field(obj, name);
    if (!f) return 0;
    if (!cJSON_IsNumber(f)) return BAD(e, param, "'%s' must be a number", param);
    if (!(f->valuedouble >= lo && f->valuedouble <= hi)) return BAD(e, param, "'%s' = %g is out of range [%g, %g]", param, f->valuedouble, lo, hi);
    *out = f->valuedouble;
    return 1;
}

static int get_bool(const cJSON *obj, const char *name, const char *param, int *out, srv_error *e) {
    const cJSON *f = field(obj, name);
    if (!f) return 0;
    if (!cJSON_IsBool(f)) return BAD(e, param, "'%s' must be a boolean", param);
    *out = cJSON_IsTrue(f);
    return 1;
}

static int get_str(const cJSON *obj, const char *name, const char *param, size_t maxlen, const char **out, srv_error *e) {
    const cJSON *f = field(obj, name);
    if (!f) return 0;
    if (!cJSON_IsString(f)) return BAD(e, param, "'%s' must be a string", param);
    if (strlen(f->valuestring) > maxlen) return BAD(e, param, "'%s' is longer than %zu bytes", param, maxlen);
    *out = f->valuestring;
    return 1;
}

/* ---- the request ---- */

/* A message's content: a string, or an array of {"type": "text", "text": ...} parts (joined). */
static int message_content(srv_job *j, const cJSON *c, int i, const char **out, srv_error *e) {
    char param[64];
    snprintf(param, sizeof param, "messages[%d].content", i);
    if (cJSON_IsString(c)) {
        *out = c->valuestring;
        return 0;
    }
    if (!cJSON_IsArray(c)) return BAD(e, param, "'%s' must be a string or an array of text parts", param);
    size_t total = 1;
    int k = 0;
    for (const cJSON *part = c->child; part; part = part->next, k++) {
        char pp[96];
        snprintf(pp, sizeof pp, "%s[%d]", param, k);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsObject(part) || !cJSON_IsString(type)) return BAD(e, pp, "'%s' must be an object with a 'type'", pp);
        if (strcmp(type->valuestring, "text") != 0)
            return BAD(e, pp, "'%s': content parts of type '%s' are not supported (only 'text')", pp, type->valuestring);
        if (!cJSON_IsString(text)) return BAD(e, pp, "'%s.text' must be a string", pp);
        total += strlen(text->valuestring);
    }
    char *s = srv_job_own(j, malloc(total));
    if (!s) return srv_fail(e, 500, "server_error", NULL, "out of memory");
    size_t at = 0;
    for (const cJSON *part = c->child; part; part = part->next) {
        const char *t = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
        size_t n = strlen(t);
        memcpy(s + at, t, n);
        at += n;
    }
    s[at] = 0;
    *out = s;
    return 0;
}

static int parse_messages(srv_job *j, const cJSON *body, const srv_api_config *cfg, srv_error *e) {
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(body, "messages");
    if (!ms || cJSON_IsNull(ms)) return BAD(e, "messages", "'messages' is required");
    if (!cJSON_IsArray(ms)) return BAD(e, "messages", "'messages' must be an array");
    int n = cJSON_GetArraySize(ms);
    if (n == 0) return BAD(e, "messages", "'messages' must hold at least one message");
    if (cfg->max_messages && n > cfg->max_messages)
        return BAD(e, "messages", "'messages' holds %d messages, more than the server's limit of %d", n, cfg->max_messages);
    size_t chars = 0;
    /* one spare entry: the system message a request with tools may get (tools.c) */
    if (!(j->messages = calloc((size_t)n + 1, sizeof *j->messages))) return srv_fail(e, 500, "server_error", NULL, "out of memory");
    int i = 0, w = 0, prev_tool = 0;
    for (const cJSON *m = ms->child; m; m = m->next, i++) {
        char param[64];
        snprintf(param, sizeof param, "messages[%d]", i);
        if (!cJSON_IsObject(m)) return BAD(e, param, "'%s' must be an object", param);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        snprintf(param, sizeof param, "messages[%d].role", i);
        if (!cJSON_IsString(role)) return BAD(e, param, "'%s' must be a string", param);
        const char *r = role->valuestring;
        if (!strcmp(r, "developer")) r = "system";
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool"))
            return BAD(e, param, "'%s' = '%s' is not one of system, developer, user, assistant, tool", param, role->valuestring);
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
        const cJSON *calls = !strcmp(r, "assistant") ? field(m, "tool_calls") : NULL;
        snprintf(param, sizeof param, "messages[%d].content", i);
        const char *content = NULL;
        if (c && !cJSON_IsNull(c)) {
            if (message_content(j, c, i, &content, e)) return -1;
        } else if (!calls) {
            return BAD(e, param, "'%s' is required", param);
        }
        if (count_chars(cfg, &chars, content ? content : "", param, e)) return -1;
        /* tool calls and results become text in the model's tool-call format; consecutive
         * results form one user turn */
        int is_tool = !strcmp(r, "tool");
        if (calls && srv_render_tool_calls(j, calls, i, content, cfg, &content, e)) return -1;
        if (is_tool && srv_render_tool_result(j, ms, m, i, content, prev_tool ? j->messages[w - 1].content : NULL, cfg, &content, e))
            return -1;
        if (is_tool && prev_tool) w--;
        j->messages[w].role = is_tool ? "user" : r;
        j->messages[w].content = content;
        w++;
        prev_tool = is_tool;
    }
    n = w;
    j->r.messages = j->messages;
    j->r.n_messages = n;
    return 0;
}

static int parse_prompt(srv_job *j, const cJSON *body, const srv_api_config *cfg, srv_error *e) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(body, "prompt");
    if (!p || cJSON_IsNull(p)) return BAD(e, "prompt", "'prompt' is required");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(p->child)) p = p->child;
    j->r.chat_template = "none"; /* a completion continues the text as it is */
    if (cJSON_IsString(p)) {
        if (!p->valuestring[0]) return BAD(e, "prompt", "'prompt' is empty");
        size_t chars = 0;
        if (count_chars(cfg, &chars, p->valuestring, "prompt", e)) return -1;
        j->r.prompt = p->valuestring;
        return 0;
    }
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) > 0) { /* token ids */
        int n = cJSON_GetArraySize(p), i = 0;
        int32_t *ids = (int32_t *)srv_job_own(j, malloc(sizeof(int32_t) * (size_t)n));
        if (!ids) return srv_fail(e, 500, "server_error", NULL, "out of memory");
        for (const cJSON *t = p->child; t; t = t->next, i++) {
            if (!cJSON_IsNumber(t) || floor(t->valuedouble) != t->valuedouble || t->valuedouble < 0 || t->valuedouble > 2147483647.0) {
                char param[48];
                snprintf(param, sizeof param, "prompt[%d]", i);
                return BAD(e, param, "'prompt' must be a string, an array of one string, or an array of token ids");
            }
            ids[i] = (int32_t)t->valuedouble;
        }
        j->r.prompt_ids = ids;
        j->r.n_prompt_ids = n;
        return 0;
    }
    return BAD(e, "prompt", "'prompt' must be a string, an array of one string, or an array of token ids");
}

static int parse_stop(srv_job *j, const cJSON *body, srv_error *e) {
    const cJSON *s = field(body, "stop");
    if (!s) return 0;
    int n = cJSON_IsString(s) ? 1 : cJSON_IsArray(s) ? cJSON_GetArraySize(s) : -1;
    if (n < 0) return BAD(e, "stop", "'stop' must be a string or an array of strings");
    if (n > 4) return BAD(e, "stop", "'stop' holds %d strings, at most 4", n);
    if (n == 0) return 0;
    if (!(j->stop = calloc((size_t)n, sizeof *j->stop))) return srv_fail(e, 500, "server_error", NULL, "out of memory");
    const cJSON *it = cJSON_IsString(s) ? s : s->child;
    for (int i = 0; i < n; i++, it = it->next) {
        char param[32];
        snprintf(param, sizeof param, cJSON_IsString(s) ? "stop" : "stop[%d]", i);
        if (!cJSON_IsString(it)) return BAD(e, param, "'%s' must be a string", param);
        if (!it->valuestring[0]) return BAD(e, param, "'%s' is empty", param);
        j->stop[i] = it->valuestring;
    }
    j->r.stop = j->stop;
    j->r.n_stop = n;
    return 0;
}

/* The optional "sdnpu" object: method, draft_max, params, top_k, min_p, repeat_penalty,
 * repeat_last_n, ignore_eos, store_answer, prefix_cache. */
static int parse_ext(srv_job *j, const cJSON *body, srv_error *e) {
    const cJSON *x = field(body, "sdnpu");
    if (!x) return 0;
    if (!cJSON_IsObject(x)) return BAD(e, "sdnpu", "'sdnpu' must be an object (method, draft_max, params, top_k, min_p, repeat_penalty, repeat_last_n, ignore_eos, store_answer, prefix_cache)");
    const char *method = NULL;
    double v = 0;
    int b = 0, rc;
    sdnpu_error err = {0};
    if ((rc = get_str(x, "method", "sdnpu.method", 31, &method, e)) < 0) return -1;
    if (rc) {
        if (sdnpu_check_method(method, &err)) return BAD(e, "sdnpu.method", "'sdnpu.method': %s", err.message);
        j->r.method = method;
        snprintf(j->method, sizeof j->method, "%s", method);
    }
    if ((rc = get_int(x, "draft_max", "sdnpu.draft_max", 0, 63, &v, e)) < 0) return -1;
    if (rc) j->r.draft_max = (int)v;
    if ((rc = get_int(x, "top_k", "sdnpu.top_k", 0, 1e9, &v, e)) < 0) return -1;
    if (rc) j->r.top_k = (int)v;
    if ((rc = get_num(x, "min_p", "sdnpu.min_p", 0, 1, &v, e)) < 0) return -1;
    if (rc) j->r.min_p = (float)v;
    if ((rc = get_num(x, "repeat_penalty", "sdnpu.repeat_penalty", 0, 10, &v, e)) < 0) return -1;
    if (rc) j->r.repeat_penalty = (float)v;
    if ((rc = get_int(x, "repeat_last_n", "sdnpu.repeat_last_n", 0, 1 << 20, &v, e)) < 0) return -1;
    if (rc) j->r.repeat_last_n = (int)v;
    if ((rc = get_bool(x, "ignore_eos", "sdnpu.ignore_eos", &b, e)) < 0) return -1;
    if (rc) j->r.ignore_eos = b;
    if ((rc = get_bool(x, "store_answer", "sdnpu.store_answer", &b, e)) < 0) return -1;
    if (rc) j->r.store_answer = b;
    if ((rc = get_bool(x, "prefix_cache", "sdnpu.prefix_cache", &b, e)) < 0) return -1;
    if (rc) j->r.prefix_cache = b;
    const cJSON *ps = field(x, "params");
    if (ps) {
        if (!cJSON_IsArray(ps)) return BAD(e, "sdnpu.params", "'sdnpu.params' must be an array of \"KEY=VALUE\" strings");
        int n = cJSON_GetArraySize(ps), i = 0;
        if (n > 64) return BAD(e, "sdnpu.params", "'sdnpu.params' holds %d entries, at most 64", n);
        if (n && !(j->params = calloc((size_t)n, sizeof *j->params))) return srv_fail(e, 500, "server_error", NULL, "out of memory");
        for (const cJSON *p = ps->child; p; p = p->next, i++) {
            char param[48];
            snprintf(param, sizeof param, "sdnpu.params[%d]", i);
            if (!cJSON_IsString(p)) return BAD(e, param, "'%s' must be a \"KEY=VALUE\" string", param);
            if (sdnpu_check_param(p->valuestring, &err)) return BAD(e, param, "'%s': %s", param, err.message);
            j->params[i] = p->valuestring;
        }
        j->r.params = j->params;
        j->r.n_params = n;
    }
    return 0;
}

/* A seed for a request that gives none: time and a counter through a 64-bit mixer. */
static uint64_t fresh_seed(void) {
    static uint64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ (__atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) << 40);
    x ^= x >> 30, x *= 0xbf58476d1ce4e5b9ull, x ^= x >> 27, x *= 0x94d049bb133111ebull, x ^= x >> 31;
    return x >> 11; /* 53 bits: exact as a JSON number */
}

static int parse_fields(srv_job *j, const cJSON *body, int chat, const srv_api_config *cfg, srv_error *e) {
    const char *model = NULL, *s = NULL;
    double v;
    int b = 0, rc;
    if (get_str(body, "model", "model", 4096, &model, e) < 0) return -1;
    if (model && strcmp(model, cfg->model_id) != 0 && !(cfg->model_path && !strcmp(model, cfg->model_path)))
        return srv_fail(e, 404, "invalid_request_error", "model", "the model '%s' does not exist: this server has '%s'", model, cfg->model_id);
    if (chat ? parse_messages(j, body, cfg, e) : parse_prompt(j, body, cfg, e)) return -1;
    const sdnpu_request *d = cfg->defaults;
    if (d) { /* the server's sampling settings (sdnpu serve --temp ...); the request's own win */
        j->r.temperature = d->temperature;
        j->r.top_p = d->top_p;
        j->r.top_k = d->top_k;
        j->r.min_p = d->min_p;
        j->r.repeat_penalty = d->repeat_penalty;
        j->r.repeat_last_n = d->repeat_last_n;
        j->r.stop = d->stop;
        j->r.n_stop = d->n_stop;
    }
    const char *mt = field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if ((rc = get_int(body, mt, mt, 1, cfg->n_ctx, &v, e)) < 0) return -1;
    if (rc) j->r.max_tokens = (int)v;
    if ((rc = get_num(body, "temperature", "temperature", 0, 2, &v, e)) < 0) return -1;
    if (rc) j->r.temperature = (float)v;
    if ((rc = get_num(body, "top_p", "top_p", 0, 1, &v, e)) < 0) return -1;
    if (rc) j->r.top_p = (float)v;
    if ((rc = get_int(body, "seed", "seed", 0, 9007199254740992.0, &v, e)) < 0) return -1;
    if (rc) j->r.seed = (uint64_t)v;
    else if (cfg->has_seed) j->r.seed = d->seed; /* sdnpu serve --seed */
    else j->r.seed = fresh_seed(); /* as OpenAI: without a seed, sampled answers vary (the sdnpu block reports it) */
    if ((rc = get_int(body, "n", "n", 1, 1, &v, e)) < 0) return -1;
    if (get_bool(body, "stream", "stream", &j->stream, e) < 0) return -1;
    const cJSON *so = field(body, "stream_options");
    if (so) {
        if (!cJSON_IsObject(so)) return BAD(e, "stream_options", "'stream_options' must be an object");
        b = 0;
        if (get_bool(so, "include_usage", "stream_options.include_usage", &b, e) < 0) return -1;
        j->include_usage = b;
    }
    if (parse_stop(j, body, e)) return -1;
    /* the task group: the explicit extension field, else the OpenAI `user` field */
    const char *user = NULL, *group = NULL;
    if (get_str(body, "user", "user", 256, &user, e) < 0) return -1;
    if (get_str(body, "task_group", "task_group", 256, &group, e) < 0) return -1;
    if (group && !cfg->has_history)
        return BAD(e, "task_group", "'task_group' needs a history store: start the server with --history FILE");
    s = group ? group : user;
    if (s && s[0] && cfg->has_history) j->r.task_group = s;
    /* the history scope: the extension field, else the server's --history-scope */
    const char *scope = NULL;
    if (get_str(body, "history_scope", "history_scope", 16, &scope, e) < 0) return -1;
    if (scope && strcmp(scope, "group") && strcmp(scope, "global"))
        return BAD(e, "history_scope", "'history_scope' must be \"group\" or \"global\"");
    if (scope && !cfg->has_history)
        return BAD(e, "history_scope", "'history_scope' needs a history store: start the server with --history FILE");
    j->r.history_scope = scope ? scope : cfg->history_scope;
    if (srv_parse_structured(j, body, chat, cfg, e)) return -1;
    if (chat && cfg->max_chars) { /* the text as the model gets it: tools and tool calls rendered */
        size_t total = 0;
        for (int i = 0; i < j->r.n_messages; i++) total += utf8_chars(j->r.messages[i].content);
        if (total > cfg->max_chars)
            return BAD(e, j->tools ? "tools" : "messages",
                       "the request's text with its %s rendered is %zu characters, more than the server's limit of %zu",
                       j->tools ? "tools" : "tool calls", total, cfg->max_chars);
    }
    return parse_ext(j, body, e);
}

int srv_scan_request(const char *body, size_t len, const srv_api_config *cfg, srv_json_scan *s, srv_error *e) {
    if (!srv_json_scan_body(body, len, cfg->max_values ? cfg->max_values : (size_t)-1, SRV_MAX_DEPTH, s)) return 0;
    if (s->depth > SRV_MAX_DEPTH) return BAD(e, "", "the request body nests JSON values deeper than %d levels", SRV_MAX_DEPTH);
    return srv_fail(e, 413, "invalid_request_error", NULL, "the request body holds more than %zu JSON values, the server's limit", cfg->max_values);
}

/* The scan's finding on a string the parse would change, as an error. */
static void bad_string(const srv_json_scan *s, srv_error *e) {
    const char *p = s->bad_path;
    char what[64];
    if (s->bad_string == 1) snprintf(what, sizeof what, "the escape \\u0000 (a NUL character)");
    else snprintf(what, sizeof what, "a raw control character (byte 0x%02x, which JSON requires escaped)", s->bad_byte);
    if (s->bad_in_key) BAD(e, p, "a key of '%s' holds %s", p[0] ? p : "(body)", what);
    else if (s->bad_string == 1) BAD(e, p, "'%s' holds %s: text may not contain NUL characters", p[0] ? p : "(body)", what);
    else BAD(e, p, "'%s' holds %s", p[0] ? p : "(body)", what);
}

srv_job *srv_parse_request(const char *body, size_t len, int chat, const srv_api_config *cfg, const srv_json_scan *scan, srv_error *e) {
    srv_json_scan own;
    if (!scan) {
        if (srv_scan_request(body, len, cfg, &own, e)) return NULL;
        scan = &own;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!root) {
        size_t at = end && end >= body ? (size_t)(end - body) : 0;
        BAD(e, "", "the request body is not valid JSON (near byte %zu)", at);
        return NULL;
    }
    srv_job *j = srv_job_new();
    if (!j) {
        cJSON_Delete(root);
        srv_fail(e, 500, "server_error", NULL, "out of memory");
        return NULL;
    }
    j->json = root;
    j->chat = chat;
    size_t at = end && end >= body ? (size_t)(end - body) : len;
    while (at < len && (body[at] == ' ' || body[at] == '\t' || body[at] == '\n' || body[at] == '\r')) at++;
    char path[256] = "";
    if (at < len) BAD(e, "", "the request body goes on after its JSON value (at byte %zu): one JSON object is expected", at);
    else if (!cJSON_IsObject(root)) BAD(e, "", "the request body must be a JSON object");
    else if (scan->bad_string) bad_string(scan, e);
    else if (check_tree(root, path, sizeof path, e)) (void)0;
    else if (!parse_fields(j, root, chat, cfg, e)) return j;
    j->refs = 1;
    /* a job that never ran: free it through a throwaway pool-less path */
    cJSON_Delete(j->json);
    j->json = NULL;
    for (int i = 0; i < j->n_owned; i++) free(j->owned[i]);
    free(j->owned);
    free(j->messages);
    free(j->stop);
    free(j->params);
    free(j);
    return NULL;
}

void srv_generate_error(const srv_job *j, srv_error *e) {
    const char *m = j->err.message;
    if (j->rc != SDNPU_EINVAL) {
        srv_fail(e, 500, "server_error", NULL, "%s: %s", sdnpu_status_string(j->rc), m);
        return;
    }
    if (j->constraint && (strstr(m, "json_schema") || strstr(m, "grammar"))) { /* the constraint the request gave */
        srv_constraint_error(j, m, e);
        return;
    }
    const char *param = "";
    if (strstr(m, "context")) param = j->chat ? "messages" : "prompt";
    else if (strstr(m, "params[")) param = "sdnpu.params";
    else if (strstr(m, "method")) param = "sdnpu.method";
    else if (strstr(m, "stop")) param = "stop";
    else if (strstr(m, "prompt_ids")) param = "prompt";
    else if (strstr(m, "messages")) param = "messages";
    srv_fail(e, 400, "invalid_request_error", param, "%s", m);
}

/* ---- answers ---- */

static char *print_free(cJSON *o) {
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

char *srv_error_json(const srv_error *e) {
    cJSON *o = cJSON_CreateObject(), *er = cJSON_AddObjectToObject(o, "error");
    if (!er) {
        cJSON_Delete(o);
        return NULL;
    }
    cJSON_AddStringToObject(er, "message", e->message);
    cJSON_AddStringToObject(er, "type", e->type ? e->type : "invalid_request_error");
    if (e->param[0]) cJSON_AddStringToObject(er, "param", e->param);
    else cJSON_AddNullToObject(er, "param");
    const char *code = e->status == 404 && !strcmp(e->param, "model") ? "model_not_found"
                       : e->status == 401                             ? "invalid_api_key"
                                                                      : NULL;
    if (code) cJSON_AddStringToObject(er, "code", code);
    else cJSON_AddNullToObject(er, "code");
    return print_free(o);
}

static const char *finish_name(sdnpu_finish f) { return f == SDNPU_FINISH_STOP ? "stop" : "length"; }

static void add_usage(cJSON *o, const srv_job *j) {
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    const sdnpu_stats *s = &j->res.stats;
    cJSON_AddNumberToObject(u, "prompt_tokens", s->prompt_tokens);
    cJSON_AddNumberToObject(u, "completion_tokens", j->res.n_tokens);
    cJSON_AddNumberToObject(u, "total_tokens", s->prompt_tokens + j->res.n_tokens);
}

static void add_sdnpu(cJSON *o, const srv_job *j) {
    cJSON *x = cJSON_AddObjectToObject(o, "sdnpu");
    const sdnpu_stats *s = &j->res.stats;
    cJSON_AddStringToObject(x, "method", j->method);
    cJSON_AddNumberToObject(x, "steps", s->steps);
    cJSON_AddNumberToObject(x, "mean_accepted_tokens", round(s->mean_accepted * 1000) / 1000);
    cJSON_AddNumberToObject(x, "drafted_tokens", (double)s->drafted_tokens);
    cJSON_AddNumberToObject(x, "accepted_tokens", (double)s->accepted_tokens);
    cJSON_AddNumberToObject(x, "history_answers", s->history_answers);
    cJSON_AddBoolToObject(x, "answer_stored", s->answer_stored);
    cJSON_AddNumberToObject(x, "reused_prompt_tokens", s->reused_tokens);
    cJSON_AddNumberToObject(x, "prefix_cache_tokens", s->prefix_memory_tokens + s->prefix_disk_tokens);
    cJSON_AddNumberToObject(x, "prefix_disk_tokens", s->prefix_disk_tokens);
    cJSON_AddNumberToObject(x, "prefix_saved_ms", round(s->prefix_saved_s * 1e4) / 10);
    cJSON_AddNumberToObject(x, "seed", (double)j->r.seed);
    cJSON_AddNumberToObject(x, "prefill_ms", round(s->prefill_s * 1e4) / 10);
    cJSON_AddNumberToObject(x, "decode_ms_per_token",
                            s->generated_tokens > 0 ? round(s->decode_s * 1e4 / s->generated_tokens) / 10 : 0.0);
    cJSON_AddNumberToObject(x, "queue_ms", round((j->t_start - j->t_submit) * 1e4) / 10); /* waiting for a slot */
    cJSON_AddNumberToObject(x, "total_ms", round((j->t_done - j->t_submit) * 1e4) / 10);
}

static cJSON *envelope(const srv_job *j, const char *id, long created, const char *model_id, int chunk) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", j->chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion");
    cJSON_AddNumberToObject(o, "created", (double)created);
    cJSON_AddStringToObject(o, "model", model_id);
    cJSON_AddStringToObject(o, "system_fingerprint", "sdnpu-" SDNPU_VERSION);
    return o;
}

char *srv_completion_json(const srv_job *j, const char *id, long created, const char *model_id) {
    cJSON *o = envelope(j, id, created, model_id, 0);
    char *text = utf8_clean(j->res.text ? j->res.text : "", j->res.text ? strlen(j->res.text) : 0);
    if (!o || !text) {
        cJSON_Delete(o);
        free(text);
        return NULL;
    }
    cJSON *ch = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddItemToArray(ch, c);
    cJSON_AddNumberToObject(c, "index", 0);
    cJSON *calls = srv_answer_tool_calls(j, j->res.text, 0);
    if (j->chat) {
        cJSON *msg = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        if (calls) { /* OpenAI's shape: no content, the calls, finish_reason "tool_calls" */
            cJSON_AddNullToObject(msg, "content");
            cJSON_AddItemToObject(msg, "tool_calls", calls);
        } else {
            cJSON_AddStringToObject(msg, "content", text);
        }
    } else {
        cJSON_AddStringToObject(c, "text", text);
        cJSON_AddNullToObject(c, "logprobs");
    }
    cJSON_AddStringToObject(c, "finish_reason", calls ? "tool_calls" : finish_name(j->res.finish));
    free(text);
    add_usage(o, j);
    add_sdnpu(o, j);
    return print_free(o);
}

/* The names of sdnpu_source values in the chunks' sdnpu extension. */
static const char *source_name(unsigned char s) {
    static const char *const names[] = {"model", "prompt", "answer", "history", "grammar", "reuse", "draft", "recycled"};
    return s < sizeof names / sizeof names[0] ? names[s] : "draft";
}

static void add_piece(cJSON *arr, const char *text, size_t n, unsigned char src) {
    char *t = utf8_clean(text, n);
    cJSON *p = cJSON_CreateObject();
    if (!t || !p) { free(t); cJSON_Delete(p); return; }
    cJSON_AddStringToObject(p, "text", t);
    cJSON_AddStringToObject(p, "source", source_name(src));
    cJSON_AddItemToArray(arr, p);
    free(t);
}

cJSON *srv_chunk_sdnpu(const srv_job *j, size_t from, size_t to) {
    cJSON *x = cJSON_CreateObject(), *arr = x ? cJSON_AddArrayToObject(x, "pieces") : NULL;
    if (!arr) { cJSON_Delete(x); return NULL; }
    size_t start = 0; /* where token k's text starts */
    int tokens = 0;
    for (int k = 0; k < j->n_tok && start < to; k++) {
        size_t end = j->tok_end[k] < to ? j->tok_end[k] : to, a = start > from ? start : from;
        if (end > a) add_piece(arr, j->text + a, end - a, j->tok_src[k]);
        if (j->tok_end[k] <= to) tokens = k + 1;
        if (j->tok_end[k] > start) start = j->tok_end[k];
    }
    if (start < to) { /* text after the last token's end (bytes the detokenizer gave at the end) */
        size_t a = start > from ? start : from;
        add_piece(arr, j->text + a, to - a, SDNPU_SOURCE_MODEL);
    }
    cJSON_AddNumberToObject(x, "steps", j->steps);
    cJSON_AddNumberToObject(x, "tokens", tokens);
    return x;
}

char *srv_chunk_event(const srv_job *j, const char *id, long created, const char *model_id, const char *text, size_t len,
                      int first, int final) {
    return srv_chunk_event_sdnpu(j, id, created, model_id, text, len, first, final, NULL);
}

char *srv_chunk_event_sdnpu(const srv_job *j, const char *id, long created, const char *model_id, const char *text, size_t len,
                            int first, int final, cJSON *ext) {
    cJSON *o = envelope(j, id, created, model_id, 1);
    if (o && ext) cJSON_AddItemToObject(o, "sdnpu", ext);
    else cJSON_Delete(ext);
    char *t = utf8_clean(final || first ? "" : text, final || first ? 0 : len);
    if (!o || !t) {
        cJSON_Delete(o);
        free(t);
        return NULL;
    }
    cJSON *ch = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddItemToArray(ch, c);
    cJSON_AddNumberToObject(c, "index", 0);
    if (j->chat) {
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        if (first) cJSON_AddStringToObject(d, "role", "assistant");
        if (!final) cJSON_AddStringToObject(d, "content", t);
    } else {
        cJSON_AddStringToObject(c, "text", t);
        cJSON_AddNullToObject(c, "logprobs");
    }
    free(t);
    if (final) {
        cJSON *calls = srv_answer_tool_calls(j, j->res.text, 0);
        cJSON_AddStringToObject(c, "finish_reason", calls ? "tool_calls" : finish_name(j->res.finish));
        cJSON_Delete(calls);
        add_usage(o, j);
        add_sdnpu(o, j);
    } else {
        cJSON_AddNullToObject(c, "finish_reason");
    }
    char *js = print_free(o);
    if (!js) return NULL;
    size_t n = strlen(js) + 9;
    char *ev = malloc(n);
    if (ev) snprintf(ev, n, "data: %s\n\n", js);
    free(js);
    return ev;
}

char *srv_tool_calls_event(const srv_job *j, const char *id, long created, const char *model_id, const cJSON *calls) {
    cJSON *o = envelope(j, id, created, model_id, 1), *ch = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON *copy = cJSON_Duplicate(calls, 1);
    if (!o || !ch || !c || !copy) {
        cJSON_Delete(o);
        cJSON_Delete(c);
        cJSON_Delete(copy);
        return NULL;
    }
    cJSON_AddItemToArray(ch, c);
    cJSON_AddNumberToObject(c, "index", 0);
    cJSON *d = cJSON_AddObjectToObject(c, "delta");
    cJSON_AddItemToObject(d, "tool_calls", copy);
    cJSON_AddNullToObject(c, "finish_reason");
    char *js = print_free(o);
    if (!js) return NULL;
    size_t n = strlen(js) + 9;
    char *ev = malloc(n);
    if (ev) snprintf(ev, n, "data: %s\n\n", js);
    free(js);
    return ev;
}

char *srv_models_json(const char *model_id, long created) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *d = cJSON_AddArrayToObject(o, "data"), *m = cJSON_CreateObject();
    cJSON_AddItemToArray(d, m);
    cJSON_AddStringToObject(m, "id", model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)created);
    cJSON_AddStringToObject(m, "owned_by", "sdnpu");
    return print_free(o);
}
