/* cmd_trace.c - `sdnpu trace`: plain greedy generation over a dataset, recorded as a trace
 * (context tokens, top-k prefill predictions per position, output tokens, model
 * fingerprint; format in datasets/trace.h and docs/datasets.md) for offline studies. The work is
 * tools/cli_datasets.c's (tools.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/bench.h"
#include "cli/cli.h"
#include "cli/opts.h"
#include "cli/ds_cli.h"
#include "tools/tools.h"

int cmd_trace(int argc, char **argv) {
    const char *model = NULL, *tokenizer = NULL, *out_path = NULL, *tasks = NULL;
    const char *datasets[33];
    cli_list ds_list = {0};
    int n_ds = 0, limit = 0;
    sdn_bench_opts o = {.max_tokens = 128, .preds_k = 8, .threads = cli_default_threads()};
    const cli_opt table[] = {
        CLI_O_MODEL(&model, "model file (GGUF or llama2.c checkpoint)"),
        CLI_O_TOKENIZER(&tokenizer),
        CLI_O_DATASET(&ds_list),
        CLI_O_TASKS(&tasks),
        CLI_O_LIMIT(&limit),
        CLI_O_MAX_TOKENS(&o.max_tokens, 1, 1 << 20, "new tokens per request (default 128)"),
        CLI_O_PREFILL_TOPK(&o.preds_k, 0, "prefill predictions per context position (default 8; 0: none; old spelling --topk)"),
        CLI_O_OUT(&out_path, "the trace (JSON Lines)"),
        CLI_O_THREADS(&o.threads),
        CLI_O_CTX(&o.n_ctx, 32, "KV cache size (default: the model's context, at most 4096)"),
        CLI_O_CHAT_TEMPLATE(&o.chat_template),
        CLI_O_USE_INPUT(&o.use_input),
        CLI_O_END,
    };
    const cli_cmd cmd = {.name = "trace", .synopsis = "--model M --out FILE [options]",
                         .about = "Record plain greedy generation over a dataset as a trace for offline studies.", .opts = table};
    int prc = cli_parse(&cmd, argc, argv, NULL, NULL);
    if (prc != CLI_CONTINUE) {
        cli_list_free(&ds_list);
        return prc;
    }
    if (ds_list.n > 32) { fprintf(stderr, "sdnpu: option --dataset: at most 32\n"); cli_list_free(&ds_list); return 2; }
    for (int i = 0; i < ds_list.n; i++) datasets[n_ds++] = ds_list.v[i];
    cli_list_free(&ds_list);
    if (!model || !out_path) { fprintf(stderr, "sdnpu trace: --model and --out are required (sdnpu trace --help)\n"); return 2; }
    char shared_ds[4200];
    if (n_ds == 0) {
        if (!dscli_shared()) { fprintf(stderr, "sdnpu trace: no --dataset given and ../shared/datasets not found\n"); return 2; }
        snprintf(shared_ds, sizeof shared_ds, "%s/datasets", dscli_shared());
        datasets[n_ds++] = shared_ds;
    }
    return sdn_tool_trace(model, tokenizer, out_path, datasets, n_ds, tasks, limit, &o);
}
