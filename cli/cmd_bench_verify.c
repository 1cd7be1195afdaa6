/* cmd_bench_verify.c - `sdnpu bench-verify`: what a verification step costs (the verify-cost
 * curve of make-model models, or of one --model) and what speculation buys (none/pld/sam end
 * to end on TinyStories). The options; the measurement is tools/bench_verify.c's
 * (sdn_tool_bench_verify, tools.h). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "tools/tools.h"

/* --rows LIST of --model's curve: each in [1, 64], 64 at most. Returns 0, or 2 after the message. */
static int parse_rows(const char *rows_opt, sdn_tool_bench_verify_opts *o) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", rows_opt);
    o->n_rows = 0;
    for (char *sp, *t = strtok_r(buf, ",", &sp); t; t = strtok_r(NULL, ",", &sp)) {
        long v;
        if (o->n_rows == 64 || cli_int("--rows", t, 1, 64, &v)) return 2;
        o->rows_n[o->n_rows++] = (int)v;
    }
    if (!o->n_rows) { fprintf(stderr, "sdnpu bench-verify: --rows is empty\n"); return 2; }
    return 0;
}

int cmd_bench_verify(int argc, char **argv) {
    sdn_tool_bench_verify_opts o;
    sdn_tool_bench_verify_defaults(&o);
    const char *rows_opt = "1,2,4,8,16,32,64";
    int nthreads = cli_default_threads();
    const cli_opt table[] = {
        CLI_O_SHAPES(&o.shapes, "make-model shapes whose verify cost is measured (default qwen2.5-0.5b,llama-3.2-1b)"),
        CLI_O_TYPES(&o.types, "their weight types (default F16,Q8_0)"),
        CLI_O_THREADS(&nthreads),
        CLI_O_REPS(&o.reps, 31, "repetitions, median reported (default 5)"),
        {.name = "--cost-out", .kind = CLI_STR, .dest = &o.cost_out, .arg = "FILE", .help = "write the first shape's verify-cost profile (with --model: its curve, --rows from 1 increasing)",
         .check = CLI_CHECK_OUT_FILE},
        {.name = "--stories", .kind = CLI_STR, .dest = &o.stories, .arg = "DIR",
         .help = "TinyStories model directory of the end-to-end run (default ../shared/models/stories260K when present)"},
        {.name = "--max-tokens", .kind = CLI_LONG, .dest = &o.max_tokens, .lo = 1, .hi = 4000, .arg = "N", .help = "new tokens of the end-to-end run (default 200)"},
        {.name = "--no-curve", .kind = CLI_FLAG, .dest = &o.no_curve, .help = "skip the verify-cost curves of the shapes"},
        CLI_O_MODEL(&o.model, "only the verify-cost curve of this file (after --context tokens)"),
        {.name = "--rows", .kind = CLI_STR, .dest = &rows_opt, .arg = "LIST", .help = "rows of --model's curve (default 1,2,4,8,16,32,64)"},
        {.name = "--context", .kind = CLI_LONG, .dest = &o.context, .lo = 1, .hi = 16384, .arg = "N", .help = "context before --model's curve (default 256)"},
        CLI_O_JSON(&o.json, "write --model's curve: {\"kernel\", \"threads\", \"model\", \"context\", \"rows\", \"ms\"}"),
        CLI_O_END,
    };
    const cli_cmd cmd = {.name = "bench-verify", .synopsis = "[--shapes S1,S2] [--types T1,T2] [options]   (or: --model FILE [--rows LIST] [--json OUT])",
                         .about = "Verify-step cost vs. tree size; none/pld/sam end to end on TinyStories (--kernel NAME forces a kernel path).",
                         .opts = table};
    int prc = cli_parse(&cmd, argc, argv, NULL, NULL);
    if (prc != CLI_CONTINUE) return prc;
    o.threads = nthreads;
    if (o.model && parse_rows(rows_opt, &o)) return 2;
    return sdn_tool_bench_verify(&o);
}
