/* cmd_bench_model.c - `sdnpu bench-model`: prefill and decode speed of the engine on a model
 * (by default Qwen2.5-0.5B-shaped make-model models) against a bandwidth probe and SGEMM
 * measured in the same run. The options; the measurement is tools/bench_model.c's
 * (sdn_tool_bench_model, tools.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "tools/tools.h"

/* --threads 1,2,...: each in [1, 256], 8 at most (cli_opt.fn; dest: the options). */
static int parse_threads(void *dest, const char *v, char *why, size_t cap) {
    sdn_tool_bench_model_opts *o = dest;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", v);
    o->n_threads = 0;
    for (char *t = strtok(buf, ","); t && o->n_threads < 8; t = strtok(NULL, ",")) {
        char *end;
        long x = strtol(t, &end, 10);
        if (end == t || *end || x < 1 || x > 256) {
            snprintf(why, cap, "'%s' is not an integer in [1, 256]", t);
            return -1;
        }
        o->threads[o->n_threads++] = (int)x;
    }
    return 0;
}

int cmd_bench_model(int argc, char **argv) {
    sdn_tool_bench_model_opts o;
    sdn_tool_bench_model_defaults(&o);
    cli_list model_list = {0};
    const cli_opt table[] = {
        CLI_O_MODELS(&model_list, "model file (repeatable, 8 at most; default: make-model --shape models, cached)"),
        {.name = "--shape", .kind = CLI_STR, .dest = &o.shape, .arg = "S", .help = "make-model shape (default qwen2.5-0.5b)"},
        CLI_O_TYPES(&o.types, "weight types of the --shape models (default Q8_0,F16)"),
        {.name = "--vocab-from", .kind = CLI_STR, .dest = &o.vocab, .arg = "GGUF", .help = "copy the tokenizer of this GGUF into the --shape models"},
        {.name = "--threads", .kind = CLI_FN, .dest = &o, .fn = parse_threads, .arg = "LIST", .help = "thread counts measured (default 1,2)"},
        {.name = "--prompt-tokens", .kind = CLI_INT, .dest = &o.prompt, .lo = 8, .hi = 8192, .arg = "N",
         .help = "prefill tokens (default 256; old spelling --prompt N)"},
        CLI_O_MAX_TOKENS(&o.gen, 1, 4000, "decode steps (default 32; old spelling --gen)"),
        CLI_O_REPS(&o.reps, 15, "repetitions, median reported (default 3)"),
        CLI_O_JSON(&o.json, "write the results as JSON"),
        {.name = "--table-only", .kind = CLI_FLAG, .dest = &o.table_only,
         .help = "only the per-thread prefill/decode table (no setting comparison, prefill predictions, F32 layout or tokenizer lines)"},
        CLI_O_END,
    };
    const cli_cmd cmd = {.name = "bench-model", .synopsis = "[--model M ...] [--shape S --types T1,T2] [options]",
                         .about = "Prefill/decode speed vs. memory bandwidth and SGEMM; default: make-model qwen2.5-0.5b in Q8_0 and F16\n"
                                  "(cached), 256-token prefill, 32 decode steps.",
                         .opts = table};
    int prc = cli_parse(&cmd, argc, argv, NULL, NULL);
    for (int i = 0; prc == CLI_CONTINUE && i < model_list.n && o.n_models < 8; i++) o.models[o.n_models++] = model_list.v[i];
    cli_list_free(&model_list);
    if (prc != CLI_CONTINUE) return prc;
    return sdn_tool_bench_model(&o);
}
