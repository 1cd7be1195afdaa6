/* cmd_bench_sam.c - `sdnpu bench-sam`: micro-benchmark of the suffix automaton and the
 * baseline drafters on a synthetic context. The options; the measurement is
 * tools/bench_sam.c's (sdn_tool_bench_sam, tools.h). */
#include <stdio.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "tools/tools.h"

int cmd_bench_sam(int argc, char **argv) {
    sdn_tool_bench_sam_opts o;
    sdn_tool_bench_sam_defaults(&o);
    const cli_opt table[] = {
        {.name = "--context-tokens", .kind = CLI_LONG, .dest = &o.tokens, .lo = 1000, .hi = 50000000L, .arg = "N",
         .help = "context length (default 100000; old spelling --tokens)"},
        {.name = "--vocab", .kind = CLI_LONG, .dest = &o.vocab, .lo = 2, .hi = sdn_tool_bench_sam_max_vocab(), .arg = "V", .help = "vocabulary size (default 151936)"},
        {.name = "--seed", .kind = CLI_LONG, .dest = &o.seed, .lo = 0, .hi = 0x7fffffffL, .arg = "S", .help = "random seed (default 1)"},
        {.name = "--runs", .kind = CLI_LONG, .dest = &o.runs, .lo = 1, .hi = 101, .arg = "R", .help = "repetitions per measurement, median reported (default 5)"},
        {.name = "--steps", .kind = CLI_LONG, .dest = &o.steps, .lo = 1, .hi = 1000000L, .arg = "K", .help = "decoding steps of the drafter benchmark (default 2000)"},
        CLI_O_END,
    };
    const cli_cmd cmd = {.name = "bench-sam", .synopsis = "[options]",
                         .about = "Micro-benchmark of the suffix automaton and baseline drafters.", .opts = table};
    int prc = cli_parse(&cmd, argc, argv, NULL, NULL);
    if (prc != CLI_CONTINUE) return prc;
    return sdn_tool_bench_sam(&o);
}
