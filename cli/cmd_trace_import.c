/* cmd_trace_import.c - `sdnpu trace-import`: traces from text-only answers recorded by
 * another program (e.g. ../shared/datasets/model_outputs/, Vicuna-7B-v1.3 greedy outputs):
 * prompts rendered with the model's chat template, prompt and output tokenized with the
 * model's tokenizer (rules in tools/trace_import.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/dataset.h"
#include "tools/trace_import.h"
#include "tokenizer/chat_template.h"
#include "cli/cli.h"
#include "cli/opts.h"
#include "cli/ds_cli.h"
#include "modelfile/gguf.h"
#include "tokenizer/tokenizer.h"

int cmd_trace_import(int argc, char **argv) {
    const char *from_refs = NULL;
    const char *outputs = NULL, *tokenizer = NULL, *vocab = NULL, *tmpl = "vicuna", *agree = NULL, *out_path = NULL;
    const char *questions[16];
    cli_list q_list = {0};
    int n_q = 0;
    sdn_import_opts o = {.max_new = 1024};
    const cli_opt table[] = {
        {.name = "--outputs", .kind = CLI_STR, .dest = &outputs, .arg = "FILE", .help = "answers: model_outputs/*.jsonl rows or Spec-Bench model_answer rows"},
        {.name = "--questions", .kind = CLI_LIST, .dest = &q_list, .arg = "FILE",
         .help = "the questions they answer (repeatable, 16 at most; default ../shared/datasets/summary and rag Spec-Bench files); joined by id"},
        {.name = "--tokenizer", .kind = CLI_STR, .dest = &tokenizer, .arg = "FILE",
         .help = "llama2.c tokenizer.bin of the model (e.g. ../shared/models/llama2-tokenizer/tokenizer.bin)"},
        {.name = "--vocab", .kind = CLI_STR, .dest = &vocab, .arg = "GGUF", .help = "or the tokenizer of a GGUF file (vocabulary-only files work)"},
        {.name = "--chat-template", .kind = CLI_ENUM, .dest = &tmpl, .arg = "NAME", .choices = "chatml|llama3|llama2|vicuna|plain|gemma", .help = "template the answers were generated with (default vicuna)"},
        {.name = "--system", .kind = CLI_STR, .dest = &o.system, .arg = "TEXT", .help = "system prompt (default: the template's)"},
        {.name = "--agree", .kind = CLI_STR, .dest = &agree, .arg = "FILE", .help = "keep only answers identical to this other run's (FP16 run-to-run noise)"},
        CLI_O_TASKS(&o.tasks),
        CLI_O_MAX_TOKENS(&o.max_new, 1, 1 << 20, "generation limit of the recorded run (default 1024; old spelling --max-new)"),
        {.name = "--model-name", .kind = CLI_STR, .dest = &o.model_name, .arg = "NAME", .help = "the trace's \"model\" (default: the answers' model_id)"},
        {.name = "--from-references", .kind = CLI_STR, .dest = &from_refs, .arg = "WHO",
         .help = "instead of --outputs: the questions' own \"reference\" fields are the outputs, written by WHO (e.g. gpt-4)"},
        CLI_O_OUT(&out_path, "the trace (JSON Lines)"),
        CLI_O_END,
    };
    const cli_cmd cmd = {.name = "trace-import", .synopsis = "--outputs FILE (--tokenizer FILE | --vocab GGUF) --out FILE [options]",
                         .about = "Turn text-only model answers (e.g. Vicuna outputs) into a trace.", .opts = table};
    int prc = cli_parse(&cmd, argc, argv, NULL, NULL);
    if (prc != CLI_CONTINUE) {
        cli_list_free(&q_list);
        return prc;
    }
    if (q_list.n > 16) { fprintf(stderr, "sdnpu: option --questions: at most 16\n"); cli_list_free(&q_list); return 2; }
    for (int i = 0; i < q_list.n; i++) questions[n_q++] = q_list.v[i];
    cli_list_free(&q_list);
    if (!outputs == !from_refs || !out_path || (!tokenizer == !vocab)) {
        fprintf(stderr, "sdnpu trace-import: one of --outputs / --from-references, --out and one of --tokenizer / --vocab are required\n");
        return 2;
    }
    if (sdn_chat_kind_from_name(tmpl, &o.chat) != SDN_OK || o.chat == SDN_CHAT_AUTO) {
        fprintf(stderr, "sdnpu: option --chat-template: '%s' is not one of chatml, llama3, llama2, vicuna, plain, gemma\n", tmpl);
        return 2;
    }
    char q1[4200], q2[4200];
    if (n_q == 0) {
        if (!dscli_shared()) { fprintf(stderr, "sdnpu trace-import: no --questions given and ../shared/datasets not found\n"); return 2; }
        snprintf(q1, sizeof q1, "%s/datasets/summary/summary_specbench.jsonl", dscli_shared());
        snprintf(q2, sizeof q2, "%s/datasets/rag/rag_specbench.jsonl", dscli_shared());
        questions[n_q++] = q1;
        questions[n_q++] = q2;
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
    o.tok = tok;
    o.agree = agree ? &other : NULL;
    o.answers_name = outputs;
    const char *tn = tokenizer ? tokenizer : vocab, *tb = strrchr(tn, '/');
    char tname[512];
    /* the tokenizer's folder and file name identify it better than the file name alone */
    if (tb) {
        const char *p = tb;
        while (p > tn && p[-1] != '/') p--;
        snprintf(tname, sizeof tname, "%s", p);
    } else snprintf(tname, sizeof tname, "%s", tn);
    o.tokenizer_name = tname;
    if (!(f = fopen(out_path, "w"))) { fprintf(stderr, "sdnpu trace-import: cannot write %s\n", out_path); goto out; }
    sdn_import_stats st;
    int rc = sdn_trace_import(&qs, &ans, &o, f, &st, &err);
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
