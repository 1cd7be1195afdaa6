/* cli_datasets.c - the work of `sdnpu make-story-task`, `sdnpu trace` and `sdnpu trace-import`
 * after their option parsing (see tools.h): the model or tokenizer loaded, the story task or
 * the trace written, progress and errors on stderr as the commands print them. */
#include <stdio.h>
#include <string.h>

#include "tools/tools.h"
#include "datasets/bench.h"
#include "datasets/dataset.h"
#include "tools/progress.h"
#include "datasets/story_task.h"
#include "datasets/trace_import.h"
#include "modelfile/gguf.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "modelfile/model.h"

int sdn_tool_make_story_task(const char *model, const char *tokenizer, const char *out_path, const sdn_story_opts *o) {
    sdn_err err = {0};
    sdn_model *m = NULL;
    sdn_model_load_opts lo = {.tokenizer_path = tokenizer};
    if (sdn_model_load(model, &lo, &m, &err)) { fprintf(stderr, "sdnpu make-story-task: %s\n", err.msg); return 1; }
    FILE *f = fopen(out_path, "w");
    if (!f) { fprintf(stderr, "sdnpu make-story-task: cannot write %s\n", out_path); sdn_model_free(m); return 1; }
    const char *mb = strrchr(model, '/');
    int rc = sdn_story_task_write(m, mb ? mb + 1 : model, o, f, &err);
    if (fclose(f) && !rc) { fprintf(stderr, "sdnpu make-story-task: write error on %s\n", out_path); rc = 1; }
    sdn_model_free(m);
    if (rc) { fprintf(stderr, "sdnpu make-story-task: %s\n", err.msg); return 1; }
    fprintf(stderr, "make-story-task: %d stories written to %s\n", o->n, out_path);
    return 0;
}

static void on_progress(void *ud, long done, long total, const char *note) {
    (void)total;
    sdn_progress_update(ud, done, note);
}

int sdn_tool_trace(const char *model, const char *tokenizer, const char *out_path, const char *const *datasets, int n_ds, const char *tasks,
                   int limit, sdn_bench_opts *o) {
    sdn_err err = {0};
    sdn_dataset ds = {0};
    sdn_model *m = NULL;
    FILE *f = NULL;
    int code = 1, written = 0, skipped = 0;
    for (int i = 0; i < n_ds; i++)
        if (sdn_dataset_load(&ds, datasets[i], &err)) goto fail;
    sdn_dataset_filter(&ds, tasks, limit);
    if (ds.n == 0) { fprintf(stderr, "sdnpu trace: no requests (check --tasks)\n"); goto out; }
    sdn_model_load_opts lo = {.tokenizer_path = tokenizer};
    if (sdn_model_load(model, &lo, &m, &err)) goto fail;
    if (!(f = fopen(out_path, "w"))) { fprintf(stderr, "sdnpu trace: cannot write %s\n", out_path); goto out; }
    const char *mb = strrchr(model, '/'), *tb = tokenizer ? strrchr(tokenizer, '/') : NULL;
    sdn_progress *pb = sdn_progress_new(stderr, "trace", ds.n, 0);
    o->progress = on_progress;
    o->ud = pb;
    int rc = sdn_trace_record(m, mb ? mb + 1 : model, tokenizer ? (tb ? tb + 1 : tokenizer) : sdn_model_format(m), &ds, o, f, &written, &skipped, &err);
    sdn_progress_end(pb);
    if (fclose(f)) { f = NULL; fprintf(stderr, "sdnpu trace: write error on %s\n", out_path); goto out; }
    f = NULL;
    if (rc) goto fail;
    fprintf(stderr, "trace: %d requests recorded in %s (%d skipped: prompt too long for the context)\n", written, out_path, skipped);
    code = 0;
    goto out;
fail:
    fprintf(stderr, "sdnpu trace: %s\n", err.msg);
out:
    if (f) fclose(f);
    sdn_model_free(m);
    sdn_dataset_free(&ds);
    return code;
}

int sdn_tool_trace_import(const char *const *questions, int n_q, const char *outputs, const char *from_refs, const char *tokenizer,
                          const char *vocab, const char *tmpl, const char *agree, const char *out_path, sdn_import_opts *o) {
    if (sdn_chat_kind_from_name(tmpl, &o->chat) != SDN_OK || o->chat == SDN_CHAT_AUTO) {
        fprintf(stderr, "sdnpu: option --chat-template: '%s' is not one of chatml, llama3, llama2, vicuna, plain, gemma\n", tmpl);
        return 2;
    }
    sdn_err err = {0};
    sdn_dataset qs = {0};
    sdn_answers ans = {0}, other = {0};
    sdn_tokenizer *tok = NULL;
    FILE *f = NULL;
    int code = 1;
    for (int i = 0; i < n_q; i++)
        if (sdn_dataset_load_file(&qs, questions[i], &err)) goto fail;
    if (from_refs) {
        if (sdn_answers_from_references(&qs, from_refs, &ans, &err)) goto fail;
        outputs = "references";
    } else if (sdn_answers_load(&ans, outputs, &err)) goto fail;
    if (agree && sdn_answers_load(&other, agree, &err)) goto fail;
    if (tokenizer) {
        if (sdn_tokenizer_from_llama2c(tokenizer, 0, &tok, &err)) goto fail;
    } else {
        sdn_gguf *g = NULL;
        if (sdn_gguf_open(vocab, &g, &err)) goto fail;
        int rc = sdn_tokenizer_from_gguf(g, &tok, &err);
        sdn_gguf_close(g);
        if (rc) goto fail;
    }
    o->tok = tok;
    o->agree = agree ? &other : NULL;
    o->answers_name = outputs;
    const char *tn = tokenizer ? tokenizer : vocab, *tb = strrchr(tn, '/');
    char tname[512];
    /* the tokenizer's folder and file name identify it better than the file name alone */
    if (tb) {
        const char *p = tb;
        while (p > tn && p[-1] != '/') p--;
        snprintf(tname, sizeof tname, "%s", p);
    } else snprintf(tname, sizeof tname, "%s", tn);
    o->tokenizer_name = tname;
    if (!(f = fopen(out_path, "w"))) { fprintf(stderr, "sdnpu trace-import: cannot write %s\n", out_path); goto out; }
    sdn_import_stats st;
    int rc = sdn_trace_import(&qs, &ans, o, f, &st, &err);
    if (fclose(f)) { f = NULL; fprintf(stderr, "sdnpu trace-import: write error on %s\n", out_path); goto out; }
    f = NULL;
    if (rc) goto fail;
    fprintf(stderr, "trace-import: %d rows written to %s", st.written, out_path);
    if (st.no_question) fprintf(stderr, ", %d answers without a matching question", st.no_question);
    if (st.filtered) fprintf(stderr, ", %d outside --tasks", st.filtered);
    if (agree) fprintf(stderr, ", %d dropped by --agree (different text in %s)", st.disagree, agree);
    fprintf(stderr, "\n");
    code = 0;
    goto out;
fail:
    fprintf(stderr, "sdnpu trace-import: %s\n", err.msg);
out:
    if (f) fclose(f);
    sdn_tokenizer_free(tok);
    sdn_answers_free(&ans);
    sdn_answers_free(&other);
    sdn_dataset_free(&qs);
    return code;
}
