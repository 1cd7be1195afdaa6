/* cmd_trace.c - `sdnpu trace`: plain greedy generation over a dataset, recorded as a trace
 * (context tokens, top-k prefill predictions per position, output tokens, model
 * fingerprint; format in tools/trace.h and docs/datasets.md) for offline studies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench.h"
#include "tools/dataset.h"
#include "tools/progress.h"
#include "cli/cli.h"
#include "cli/opts.h"
#include "cli/ds_cli.h"
#include "modelfile/model.h"

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
    o.progress = dscli_progress;
    o.ud = pb;
    int rc = sdn_trace_record(m, mb ? mb + 1 : model, tokenizer ? (tb ? tb + 1 : tokenizer) : sdn_model_format(m), &ds, &o, f, &written, &skipped, &err);
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
