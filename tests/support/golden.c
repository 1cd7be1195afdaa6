/* golden.c - the llama.cpp golden-file harness; see golden.h. */
#include "support/golden.h"

#include <cjson/cJSON.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <math.h>

#include "common/sdn_util.h"
#include "modelfile/model.h"
#include "runtime/decode.h"
#include "support/ref_model.h"
#include "support/test_util.h"
#include "tokenizer/request.h"
#include "tokenizer/tokenizer.h"

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

void sg_check_prompts(const sdn_model *m, const sg_golden *g, const char *chat_template, int tasks[4]) {
    if (tasks) memset(tasks, 0, 4 * sizeof *tasks);
    for (int r = 0; r < g->n; r++) {
        const sg_request *q = &g->req[r];
        const char *docs[1] = {q->context};
        sdn_request rq = {.documents = docs, .n_docs = q->context[0] ? 1 : 0, .prompt = q->prompt, .chat_template = chat_template};
        int32_t *ids;
        int n;
        char *text;
        sdn_err e = {0};
        if (sdn_request_tokens(m, &rq, &ids, &n, &text, &e)) fail_msg("%s: %s", q->id, e.msg);
        if (strcmp(text, q->rendered)) {
            size_t at = 0;
            while (text[at] && text[at] == q->rendered[at]) at++;
            fail_msg("%s: rendered prompt differs from the golden file's at byte %zu: [%.40s] vs [%.40s]", q->id, at, text + at, q->rendered + at);
        }
        if (n != q->n_prompt) fail_msg("%s: %d prompt tokens, llama.cpp has %d", q->id, n, q->n_prompt);
        for (int i = 0; i < n; i++)
            if (ids[i] != q->prompt_ids[i]) fail_msg("%s: prompt token %d is %d, llama.cpp has %d", q->id, i, ids[i], q->prompt_ids[i]);
        if (tasks) tasks[sg_task_index(q->task)]++;
        free(ids);
        free(text);
    }
}

void sg_check_chats(const sdn_model *m, const sg_golden *g, const sdn_chat_template *ct) {
    const sdn_tokenizer *tk = sdn_model_tokenizer(m);
    for (int k = 0; k < g->n_chat; k++) {
        const sg_chat *cc = &g->chat[k];
        char *text;
        int32_t *ids;
        int n;
        sdn_err e = {0};
        if (sdn_chat_template_render(ct, cc->msgs, cc->n_msgs, 1, &text, &e)) fail_msg("chat case %d: %s", k, e.msg);
        if (strcmp(text, cc->rendered)) fail_msg("chat case %d: rendered text differs:\n%s\n---\n%s", k, text, cc->rendered);
        if (sdn_chat_tokenize(tk, text, &ids, &n, &e)) fail_msg("chat case %d: %s", k, e.msg);
        if (n != cc->n_ids || memcmp(ids, cc->ids, sizeof(int32_t) * (size_t)n))
            fail_msg("chat case %d: %d ids differ from llama.cpp's %d", k, n, cc->n_ids);
        free(ids);
        free(text);
    }
}

float *sg_teacher_logits(sdn_ctx *c, const sg_request *q, const sg_path *path) { return sg_teacher_logits_kept(c, q, path, 0); }

float *sg_teacher_logits_kept(sdn_ctx *c, const sg_request *q, const sg_path *path, int kept) {
    int np = q->n_prompt, na = q->n_answer, n_pos = q->n_top; /* positions np-1 .. predict answer[0..n_pos) (the last may predict EOG) */
    int V = sdn_model_cfg(sdn_ctx_model(c))->vocab;
    int32_t *seq = malloc(sizeof(int32_t) * (size_t)(np + na));
    memcpy(seq, q->prompt_ids, sizeof(int32_t) * (size_t)np);
    memcpy(seq + np, q->answer_ids, sizeof(int32_t) * (size_t)na);
    float *logits = malloc(sizeof(float) * (size_t)V * (size_t)(n_pos ? n_pos : 1));
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)(path->answer_chunk));
    for (int i = 0; i < path->answer_chunk; i++) rows[i] = i;
    if (kept < 0 || kept > np - 1 || kept > sdn_kv_len(c)) fail_msg("%s: %d prompt entries kept of %d", q->id, kept, np - 1);
    sdn_kv_truncate(c, kept);
    sdn_err e = {0};
    for (int s = kept; s < np - 1; s += path->prefill_chunk) {
        int m = np - 1 - s < path->prefill_chunk ? np - 1 - s : path->prefill_chunk;
        sdn_batch b = {.n = m, .tokens = seq + s, .n_logits = 0, .invariant = path->prefill_invariant};
        if (sdn_forward(c, &b, NULL, &e)) fail_msg("%s: %s", q->id, e.msg);
    }
    int got = 0;
    for (int s = np - 1; s < np - 1 + n_pos; s += path->answer_chunk) {
        int m = np - 1 + n_pos - s < path->answer_chunk ? np - 1 + n_pos - s : path->answer_chunk;
        sdn_batch b = {.n = m, .tokens = seq + s, .logit_rows = rows, .n_logits = m, .invariant = path->answer_invariant};
        if (sdn_forward(c, &b, logits + (size_t)got * (size_t)V, &e)) fail_msg("%s: %s", q->id, e.msg);
        got += m;
    }
    if (got != n_pos) fail_msg("%s: %d of %d answer positions computed", q->id, got, n_pos);
    free(seq);
    free(rows);
    return logits;
}

void sg_score_position(sg_score *s, const float *l, int V, const sg_request *q, int p, float tie_tol) {
    int b1 = 0, b2 = -1;
    for (int t = 1; t < V; t++) {
        if (l[t] > l[b1]) {
            b2 = b1;
            b1 = t;
        } else if (b2 < 0 || l[t] > l[b2])
            b2 = t;
    }
    if (b2 < 0) b2 = b1 ? 0 : 1;
    const int32_t *ti = q->top_ids + (size_t)p * q->topk;
    const float *tl = q->top_logits + (size_t)p * q->topk;
    s->total++;
    s->agree1 += b1 == ti[0];
    s->agree2 += q->topk > 1 && b2 == ti[1];
    if (b1 != ti[0] && tie_tol > 0) {
        /* a near-tie of llama.cpp's own logits: its top-1 and sdnpu's top-1 */
        float lm = NAN;
        for (int k = 0; k < q->topk; k++)
            if (ti[k] == b1) lm = tl[k];
        float margin = tl[0] - lm;
        print_message("%s: answer position %d: llama.cpp's top-1 %d (logit %.4f), sdnpu's %d (llama.cpp's logit %.4f, margin %.4f)\n", q->id, p,
                      ti[0], tl[0], b1, lm, margin);
        if (!(margin <= tie_tol)) s->not_ties++;
        if (!(margin <= s->worst_margin)) s->worst_margin = margin;
    }
    double scale = fabs(tl[0]) > 1 ? fabs(tl[0]) : 1;
    for (int k = 0; k < q->topk; k++) {
        float d = fabsf(l[ti[k]] - tl[k]);
        if (d > s->max_diff) {
            s->max_diff = d;
            s->worst_id = q->id;
        }
        if (d / scale > s->max_rel) s->max_rel = d / scale;
    }
}

void sg_score_teacher_forced(sdn_ctx *c, const sg_golden *g, int stride, const sg_path *path, float tie_tol, sg_score *s) {
    int V = sdn_model_cfg(sdn_ctx_model(c))->vocab;
    if (!s->worst_id) s->worst_id = "";
    for (int r = 0; r < g->n; r += stride) {
        const sg_request *q = &g->req[r];
        float *l = sg_teacher_logits(c, q, path);
        for (int p = 0; p < q->n_top; p++) sg_score_position(s, l + (size_t)p * (size_t)V, V, q, p, tie_tol);
        free(l);
    }
}

int sg_methods_identical(sdn_ctx *c, const sg_request *q, const char *const *methods, int n_methods, long *steps, long *tokens) {
    int base_n;
    int32_t *base = tu_gen_method(c, "none", q->prompt_ids, q->n_prompt, q->max_new, &base_n, NULL);
    for (int k = 0; k < n_methods; k++) {
        int got_n;
        sdn_gen_stats st;
        int32_t *got = tu_gen_method(c, methods[k], q->prompt_ids, q->n_prompt, q->max_new, &got_n, &st);
        if (got_n != base_n || memcmp(got, base, sizeof(int32_t) * (size_t)base_n) != 0) {
            int i = 0;
            while (i < got_n && i < base_n && got[i] == base[i]) i++;
            fail_msg("%s, method %s: output differs from plain greedy decoding at token %d (%d vs %d tokens)", q->id, methods[k], i, got_n, base_n);
        }
        if (steps) steps[k] += st.steps;
        if (tokens) tokens[k] += st.n_gen;
        free(got);
    }
    free(base);
    return base_n;
}

/* The best and second-best token of l. */
static void top2(const float *l, int V, int *b1, int *b2) {
    int x = 0, y = -1;
    for (int t = 1; t < V; t++) {
        if (l[t] > l[x]) {
            y = x;
            x = t;
        } else if (y < 0 || l[t] > l[y])
            y = t;
    }
    *b1 = x;
    *b2 = y < 0 ? (x ? 0 : 1) : y;
}

void sg_exact_compare(sdn_model *m, ref_model *ref, const sg_request *q, int npos, sg_exact *x) {
    int V = sdn_model_cfg(m)->vocab, np = q->n_prompt;
    if (npos > q->n_top) npos = q->n_top;
    float *ex = malloc(sizeof(float) * (size_t)V * (size_t)npos), *lg = malloc(sizeof(float) * (size_t)V);
    float *sl = malloc(sizeof(float) * (size_t)V * (size_t)npos);
    int32_t *seq = malloc(sizeof(int32_t) * (size_t)(np + q->n_answer));
    memcpy(seq, q->prompt_ids, sizeof(int32_t) * (size_t)np);
    memcpy(seq + np, q->answer_ids, sizeof(int32_t) * (size_t)q->n_answer);
    ref_model_reset(ref);
    for (int i = 0; i < np - 1 + npos; i++) {
        ref_model_step(ref, seq[i], i >= np - 1 ? lg : NULL);
        if (i >= np - 1) memcpy(ex + (size_t)(i - np + 1) * V, lg, sizeof(float) * (size_t)V);
    }
    sdn_ctx *c = tu_ctx(m, 1024, 2, 256);
    sdn_err e = {0};
    sdn_batch b = {.n = np - 1, .tokens = seq, .n_logits = 0};
    if (sdn_forward(c, &b, NULL, &e)) fail_msg("%s: %s", q->id, e.msg);
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)npos);
    for (int i = 0; i < npos; i++) rows[i] = i;
    sdn_batch a = {.n = npos, .tokens = seq + np - 1, .logit_rows = rows, .n_logits = npos, .invariant = 1};
    if (sdn_forward(c, &a, sl, &e)) fail_msg("%s: %s", q->id, e.msg);
    for (int p = 0; p < npos; p++) {
        const float *ev = ex + (size_t)p * V, *sv = sl + (size_t)p * V;
        int e1, e2, s1, s2;
        top2(ev, V, &e1, &e2);
        top2(sv, V, &s1, &s2);
        x->positions++;
        x->sdn_top1 += s1 == e1;
        x->sdn_top2 += s2 == e2;
        x->ll_top1 += q->top_ids[p * q->topk] == e1;
        x->ll_top2 += q->topk > 1 && q->top_ids[p * q->topk + 1] == e2;
        for (int k = 0; k < q->topk; k++) {
            int t = q->top_ids[p * q->topk + k];
            double ds = fabs((double)sv[t] - ev[t]), dl = fabs((double)q->top_logits[p * q->topk + k] - ev[t]);
            if (ds > x->sdn_diff) x->sdn_diff = ds;
            if (dl > x->ll_diff) x->ll_diff = dl;
        }
    }
    sdn_ctx_free(c);
    free(ex), free(lg), free(sl), free(seq), free(rows);
}
