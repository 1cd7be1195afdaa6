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

static void usage(FILE *f) {
    fprintf(f, "usage: sdnpu trace --model M --out FILE [options]\n"
               "  --model M            model file (GGUF or llama2.c checkpoint)\n"
               "  --tokenizer FILE     llama2.c tokenizer.bin (for llama2.c checkpoints)\n"
               "  --dataset D          task file or directory (repeatable; default ../shared/datasets)\n"
               "  --tasks LIST         only these tasks (comma-separated, e.g. summary,rag)\n"
               "  --limit N            at most N requests per task\n"
               "  --max-tokens N       new tokens per request (default 128)\n"
               "  --prefill-topk K     prefill predictions per context position (default 8; 0: none)\n"
               "  --out FILE           the trace (JSON Lines)\n"
               "  --threads N --ctx N  worker threads (default: the CPUs this process may use), KV cache size\n"
               "  --chat-template NAME auto (default), none, chatml, llama3, llama2, vicuna, plain, gemma\n"
               "  --use-input          render each row's original input as the user turn (as Spec-Bench does)\n");
}

int cmd_trace(int argc, char **argv) {
    const char *model = NULL, *tokenizer = NULL, *out_path = NULL, *tasks = NULL, *v;
    const char *datasets[32];
    int n_ds = 0;
    long x;
    sdn_bench_opts o = {.max_tokens = 128, .preds_k = 8, .threads = cli_default_threads()};
    long limit = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define VAL() ((v = cli_value(argc, argv, &i, a)) != NULL)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--model")) { if (!VAL()) return 2; model = v; }
        else if (!strcmp(a, "--tokenizer")) { if (!VAL()) return 2; tokenizer = v; }
        else if (!strcmp(a, "--out")) { if (!VAL()) return 2; if (cli_check_output(a, v)) return 1; out_path = v; }
        else if (!strcmp(a, "--tasks")) { if (!VAL()) return 2; tasks = v; }
        else if (!strcmp(a, "--dataset")) {
            if (!VAL()) return 2;
            if (n_ds == 32) { fprintf(stderr, "sdnpu: option --dataset: at most 32\n"); return 2; }
            datasets[n_ds++] = v;
        }
        else if (!strcmp(a, "--chat-template")) { if (!VAL()) return 2; o.chat_template = v; }
        else if (!strcmp(a, "--use-input")) o.use_input = 1;
        else if (!strcmp(a, "--limit")) { if (!VAL() || cli_int(a, v, 1, 1 << 30, &limit)) return 2; }
        else if (!strcmp(a, "--max-tokens")) { if (!VAL() || cli_int(a, v, 1, 1 << 20, &x)) return 2; o.max_tokens = (int)x; }
        else if (!strcmp(a, "--prefill-topk")) { if (!VAL() || cli_int(a, v, 0, 64, &x)) return 2; o.preds_k = (int)x; }
        else if (!strcmp(a, "--threads")) { if (!VAL() || cli_int(a, v, 1, 256, &x)) return 2; o.threads = (int)x; }
        else if (!strcmp(a, "--ctx")) { if (!VAL() || cli_int(a, v, 32, 1 << 22, &x)) return 2; o.n_ctx = (int)x; }
        else { fprintf(stderr, "sdnpu trace: unknown option '%s'\n", a); usage(stderr); return 2; }
#undef VAL
    }
    if (!model || !out_path) { fprintf(stderr, "sdnpu trace: --model and --out are required\n"); usage(stderr); return 2; }
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
    sdn_dataset_filter(&ds, tasks, (int)limit);
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
