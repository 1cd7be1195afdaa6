/* cmd_bench_graphs.c - `sdnpu bench-graphs`: the graph-switching benchmarks (time to first
 * token of each scheduler on make-model models; the greedy plan against the exact optimum).
 * The options; the measurement is tools/bench_graphs.c's (sdn_tool_bench_graphs, tools.h). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "tools/bench_util.h"
#include "tools/tools.h"

int cmd_bench_graphs(int argc, char **argv) {
    sdn_tool_bench_graphs_opts o;
    sdn_tool_bench_graphs_defaults(&o);
    const char *pin = "auto", *threads_list = "2";
    char reps_h[64], graphs_h[96];
    snprintf(reps_h, sizeof reps_h, "repetitions per scheduler (default 3, at most %d)", SDN_TOOL_BENCH_GRAPHS_MAXREPS);
    snprintf(graphs_h, sizeof graphs_h, "decode graph rows (default %d)", o.s2);
    const cli_opt table[] = {
        {.name = "--part", .kind = CLI_ENUM, .dest = &o.part, .choices = "ttft|gap|all", .arg = "ttft|gap|all", .help = "which benchmark (default all)"},
        CLI_O_SHAPES(&o.shapes, "model shapes (default qwen2.5-0.5b,llama-3.2-1b)"),
        {.name = "--type", .kind = CLI_STR, .dest = &o.type, .arg = "T", .help = "weight type (default Q8_0)"},
        {.name = "--layers", .kind = CLI_INT, .dest = &o.layers, .lo = 1, .hi = 1024, .arg = "L", .help = "cut the models to L layers (default: the full shape)"},
        {.name = "--prompt-tokens", .kind = CLI_INT, .dest = &o.prompt, .lo = 2, .hi = 1 << 20, .arg = "N", .help = "prompt tokens (default 1024; old spelling --prompt N)"},
        CLI_O_REPS(&o.reps, SDN_TOOL_BENCH_GRAPHS_MAXREPS, reps_h),
        {.name = "--threads", .kind = CLI_STR, .dest = &threads_list, .arg = "K[,K2]",
         .help = "compute threads, one table each (default 2; 1 leaves a core to the loader)"},
        {.name = "--modes", .kind = CLI_STR, .dest = &o.modes, .arg = "A,B,...",
         .help = "schedulers (default single,sync,async,progressive,optimal; single is always run)"},
        {.name = "--pin", .kind = CLI_ENUM, .dest = &pin, .choices = "auto|on|off", .arg = "auto|on|off",
         .help = "pin the computation to CPUs 0..K-1 and the loader to the others (auto: on when K is below the online CPUs)"},
        {.name = "--pairs", .kind = CLI_INT, .dest = &o.pairs, .lo = 0, .hi = 4096, .arg = "P",
         .help = "contention pairs: a G1 task alone vs beside a G2 load, interleaved (default 24, 0: skip)"},
        CLI_O_GRAPH_BLOCKS(&o.blocks, "--blocks"),
        CLI_O_G1(&o.s1),
        {.name = "--g2", .kind = CLI_INT, .dest = &o.s2, .lo = 1, .hi = 64, .arg = "S2", .help = graphs_h},
        {.name = "--instances", .kind = CLI_INT, .dest = &o.instances, .lo = 1, .hi = 1000000, .arg = "I", .help = "random scheduling instances for the gap (default 300)"},
        {.name = "--seed", .kind = CLI_LONG, .dest = &o.seed, .lo = 0, .hi = (double)(1L << 40), .arg = "S", .help = "seed of the random instances (default 1)"},
        {.name = "--profile-db", .kind = CLI_STR, .dest = &o.db, .arg = "FILE", .help = "profile cache (default $SDNPU_CACHE/profiles.sqlite)"},
        CLI_O_END,
    };
    const cli_cmd cmd = {.name = "bench-graphs", .synopsis = "[options]",
                         .about = "Graph switching: time to first token of sync/async/progressive, and greedy vs optimal schedules.",
                         .opts = table};
    int prc = cli_parse(&cmd, argc, argv, NULL, NULL);
    if (prc != CLI_CONTINUE) return prc;
    if (bench_check_shapes_types("bench-graphs", "--shapes", o.shapes, "--type", o.type)) return 2;
    o.pin = !strcmp(pin, "auto") ? -1 : !strcmp(pin, "on") ? 1 : 0;
    int n = cli_int_list("bench-graphs", "--threads", threads_list, 1, 256, o.threads, 64);
    if (n < 0) return 2;
    o.n_threads = n;
    return sdn_tool_bench_graphs(&o);
}
