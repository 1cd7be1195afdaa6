/* trace_import.c - turning text-only answers into trace rows (see trace_import.h). */
#include "datasets/trace_import.h"

#include <stdlib.h>
#include <string.h>

#include "common/jsonl.h"
#include "datasets/trace.h"

static int task_ok(const char *tasks, const char *task) {
    if (!tasks || !tasks[0]) return 1;
    size_t l = strlen(task);
    for (const char *p = tasks; *p;) {
        const char *c = strchr(p, ',');
        size_t k = c ? (size_t)(c - p) : strlen(p);
        if (k == l && !strncmp(p, task, l)) return 1;
        if (!c) break;
        p = c + 1;
    }
    return 0;
}

/* The user turn: the original input, else "context\n\nprompt" rendered as a request. */
static int render(const sdn_import_opts *o, const sdn_task_row *q, char **text, sdn_err *err) {
    sdn_chat_template ct;
    sdn_chat_template_init(&ct, o->chat, NULL);
    if (q->input) return sdn_chat_template_render_request(&ct, o->system, NULL, 0, q->input, text, err);
    const char *doc = q->context;
    return sdn_chat_template_render_request(&ct, o->system, doc[0] ? &doc : NULL, doc[0] ? 1 : 0, q->prompt, text, err);
}

int sdn_trace_import(const sdn_dataset *questions, const sdn_answers *answers, const sdn_import_opts *o, FILE *out, sdn_import_stats *st,
                     sdn_err *err) {
    sdn_import_stats s = {0};
    int max_new = o->max_new > 0 ? o->max_new : 1024;
    int rc = SDN_OK;
    if (!o->tok) return sdn_fail(err, SDN_EINVAL, "trace import: no tokenizer");
    for (int i = 0; i < answers->n && !rc; i++) {
        const sdn_answer_row *a = &answers->rows[i];
        int qi = sdn_dataset_find(questions, a->id);
        if (qi < 0) { s.no_question++; continue; }
        const sdn_task_row *q = &questions->rows[qi];
        if (!task_ok(o->tasks, q->task)) { s.filtered++; continue; }
        if (o->agree) {
            int j = sdn_answers_find(o->agree, a->id);
            if (j < 0 || strcmp(o->agree->rows[j].output, a->output) != 0) { s.disagree++; continue; }
        }
        char *text = NULL;
        int32_t *ctx = NULL, *outp = NULL;
        int n_ctx = 0, n_out = 0;
        if ((rc = render(o, q, &text, err)) || (rc = sdn_chat_tokenize(o->tok, text, &ctx, &n_ctx, err)) ||
            (rc = sdn_tokenize(o->tok, a->output, strlen(a->output), 0, 0, &outp, &n_out, err))) {
            sdn_fail(err, rc, "answer %s", a->id);
        } else {
            sdn_trace_row tr = {0};
            tr.eog_token = -1;
            tr.id = a->id;
            tr.task = q->task;
            tr.group = q->group;
            tr.model = (char *)(o->model_name ? o->model_name : a->model);
            tr.tokenizer = (char *)o->tokenizer_name;
            tr.vocab_size = sdn_tokenizer_n_vocab(o->tok);
            tr.ctx = ctx;
            tr.n_ctx = n_ctx;
            tr.out = outp;
            tr.n_out = n_out;
            long produced = a->new_tokens >= 0 ? a->new_tokens : n_out;
            if (produced >= max_new) {
                tr.stop = SDN_STOP_LENGTH;
                tr.max_new = n_out;
            } else {
                tr.stop = SDN_STOP_EOG;
                tr.eog_token = sdn_tokenizer_eos(o->tok);
                tr.max_new = n_out < max_new ? max_new : n_out + 1;
            }
            /* "source": where the text came from */
            cJSON *src = cJSON_CreateObject();
            cJSON_AddStringToObject(src, "answers", o->answers_name ? o->answers_name : "");
            cJSON_AddNumberToObject(src, "answers_line", a->line);
            cJSON_AddStringToObject(src, "question", q->file ? q->file : "");
            cJSON_AddNumberToObject(src, "question_line", q->line);
            cJSON_AddBoolToObject(src, "text_only", 1);
            tr.source_json = cJSON_PrintUnformatted(src);
            cJSON_Delete(src);
            if (!tr.source_json) rc = sdn_fail(err, SDN_ENOMEM, "out of memory");
            if (!rc) rc = sdn_trace_write(out, &tr, err);
            if (!rc) s.written++;
            free(tr.source_json);
        }
        free(text);
        free(ctx);
        free(outp);
    }
    if (st) *st = s;
    return rc;
}
