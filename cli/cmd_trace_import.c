/* cmd_trace_import.c - `sdnpu trace-import`: traces from text-only answers recorded by
 * another program (e.g. ../shared/datasets/model_outputs/, Vicuna-7B-v1.3 greedy outputs):
 * prompts rendered with the model's chat template, prompt and output tokenized with the
 * model's tokenizer (rules in datasets/trace_import.h). The work is tools/cli_datasets.c's
 * (tools.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/trace_import.h"
#include "cli/cli.h"
#include "cli/opts.h"
#include "cli/ds_cli.h"
#include "tools/tools.h"

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
    char q1[4200], q2[4200];
    if (n_q == 0) {
        if (!dscli_shared()) { fprintf(stderr, "sdnpu trace-import: no --questions given and ../shared/datasets not found\n"); return 2; }
        snprintf(q1, sizeof q1, "%s/datasets/summary/summary_specbench.jsonl", dscli_shared());
        snprintf(q2, sizeof q2, "%s/datasets/rag/rag_specbench.jsonl", dscli_shared());
        questions[n_q++] = q1;
        questions[n_q++] = q2;
    }
    return sdn_tool_trace_import(questions, n_q, outputs, from_refs, tokenizer, vocab, tmpl, agree, out_path, &o);
}
