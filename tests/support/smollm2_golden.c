/* smollm2_golden.c - see smollm2_golden.h. */
#include "support/smollm2_golden.h"

#include <cjson/cJSON.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/sdn_util.h"

static char *dup_str(const cJSON *o, const char *key, const char *path, int line) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v)) fail_msg("%s:%d: field '%s' is not a string", path, line, key);
    return strdup(v->valuestring);
}

static int32_t *int_array(const cJSON *a, int *n, const char *path, int line, const char *key) {
    if (!cJSON_IsArray(a)) fail_msg("%s:%d: field '%s' is not an array", path, line, key);
    *n = cJSON_GetArraySize(a);
    int32_t *r = malloc(sizeof(int32_t) * (size_t)(*n ? *n : 1));
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, a) {
        if (!cJSON_IsNumber(x)) fail_msg("%s:%d: field '%s' has a non-number", path, line, key);
        r[i++] = (int32_t)x->valuedouble;
    }
    return r;
}

static int get_int(const cJSON *o, const char *key, const char *path, int line) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) fail_msg("%s:%d: field '%s' is not a number", path, line, key);
    return v->valueint;
}

static void parse_request(sg_request *q, const cJSON *o, int max_new, int topk, const char *path, int line) {
    q->id = dup_str(o, "id", path, line);
    q->task = dup_str(o, "task", path, line);
    q->context = dup_str(o, "context", path, line);
    q->prompt = dup_str(o, "prompt", path, line);
    q->rendered = dup_str(o, "rendered", path, line);
    q->prompt_ids = int_array(cJSON_GetObjectItemCaseSensitive(o, "prompt_ids"), &q->n_prompt, path, line, "prompt_ids");
    q->answer_ids = int_array(cJSON_GetObjectItemCaseSensitive(o, "answer_ids"), &q->n_answer, path, line, "answer_ids");
    q->stopped_at_eog = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "stopped_at_eog"));
    q->max_new = max_new;
    q->topk = topk;
    const cJSON *ti = cJSON_GetObjectItemCaseSensitive(o, "top_ids"), *tl = cJSON_GetObjectItemCaseSensitive(o, "top_logits");
    if (!cJSON_IsArray(ti) || !cJSON_IsArray(tl) || cJSON_GetArraySize(ti) != cJSON_GetArraySize(tl))
        fail_msg("%s:%d: top_ids / top_logits missing or of different lengths", path, line);
    q->n_top = cJSON_GetArraySize(ti);
    if (q->n_top != q->n_answer + (q->stopped_at_eog ? 1 : 0)) fail_msg("%s:%d: %d top-k positions for %d answer tokens", path, line, q->n_top, q->n_answer);
    q->top_ids = malloc(sizeof(int32_t) * (size_t)(q->n_top * topk + 1));
    q->top_logits = malloc(sizeof(float) * (size_t)(q->n_top * topk + 1));
    for (int p = 0; p < q->n_top; p++) {
        const cJSON *a = cJSON_GetArrayItem(ti, p), *b = cJSON_GetArrayItem(tl, p);
        if (cJSON_GetArraySize(a) != topk || cJSON_GetArraySize(b) != topk) fail_msg("%s:%d: position %d has not %d top entries", path, line, p, topk);
        for (int k = 0; k < topk; k++) {
            q->top_ids[p * topk + k] = (int32_t)cJSON_GetArrayItem(a, k)->valuedouble;
            q->top_logits[p * topk + k] = (float)cJSON_GetArrayItem(b, k)->valuedouble;
        }
    }
}

static void parse_chat(sg_chat *c, const cJSON *o, const char *path, int line) {
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(o, "messages"), *m;
    if (!cJSON_IsArray(ms)) fail_msg("%s:%d: messages is not an array", path, line);
    c->n_msgs = cJSON_GetArraySize(ms);
    c->msgs = calloc((size_t)c->n_msgs + 1, sizeof *c->msgs);
    int i = 0;
    cJSON_ArrayForEach(m, ms) {
        c->msgs[i].role = dup_str(m, "role", path, line);
        c->msgs[i].content = dup_str(m, "content", path, line);
        i++;
    }
    c->rendered = dup_str(o, "rendered", path, line);
    c->ids = int_array(cJSON_GetObjectItemCaseSensitive(o, "ids"), &c->n_ids, path, line, "ids");
}

sg_golden *sg_load(const char *path) {
    char *data;
    size_t len;
    sdn_err e = {0};
    if (sdn_read_file(path, &data, &len, &e)) fail_msg("%s", e.msg);
    sg_golden *g = calloc(1, sizeof *g);
    int cap = 0, ccap = 0, max_new = 0, topk = 0, line = 0;
    for (char *s = data, *nl; s && *s; s = nl ? nl + 1 : NULL) {
        nl = strchr(s, '\n');
        if (nl) *nl = 0;
        line++;
        if (!*s) continue;
        cJSON *o = cJSON_Parse(s);
        if (!o) fail_msg("%s:%d: not JSON", path, line);
        char *kind = dup_str(o, "kind", path, line);
        if (!strcmp(kind, "header")) {
            max_new = get_int(o, "max_new", path, line);
            topk = get_int(o, "topk", path, line);
        } else if (!strcmp(kind, "request")) {
            if (!topk) fail_msg("%s:%d: request before the header", path, line);
            if (g->n == cap) g->req = realloc(g->req, sizeof *g->req * (size_t)(cap = cap ? 2 * cap : 64));
            memset(&g->req[g->n], 0, sizeof g->req[0]);
            parse_request(&g->req[g->n++], o, max_new, topk, path, line);
        } else if (!strcmp(kind, "chat")) {
            if (g->n_chat == ccap) g->chat = realloc(g->chat, sizeof *g->chat * (size_t)(ccap = ccap ? 2 * ccap : 8));
            memset(&g->chat[g->n_chat], 0, sizeof g->chat[0]);
            parse_chat(&g->chat[g->n_chat++], o, path, line);
        } else {
            fail_msg("%s:%d: unknown kind '%s'", path, line, kind);
        }
        free(kind);
        cJSON_Delete(o);
    }
    free(data);
    return g;
}

void sg_free(sg_golden *g) {
    if (!g) return;
    for (int i = 0; i < g->n; i++) {
        sg_request *q = &g->req[i];
        free(q->id), free(q->task), free(q->context), free(q->prompt), free(q->rendered);
        free(q->prompt_ids), free(q->answer_ids), free(q->top_ids), free(q->top_logits);
    }
    for (int i = 0; i < g->n_chat; i++) {
        sg_chat *c = &g->chat[i];
        for (int k = 0; k < c->n_msgs; k++) free((char *)c->msgs[k].role), free((char *)c->msgs[k].content);
        free(c->msgs), free(c->rendered), free(c->ids);
    }
    free(g->req);
    free(g->chat);
    free(g);
}

int sg_task_index(const char *task) {
    const char *names[4] = {"summary", "rag", "ui", "tweet"};
    for (int k = 0; k < 4; k++)
        if (!strcmp(task, names[k])) return k;
    fail_msg("unknown task '%s' in the golden file", task);
    return 0;
}
