/* cmd_bench_kernels.c - `sdnpu bench-kernels`: speed of the small-batch matmul kernels on
 * Qwen2.5-0.5B-shaped weight matrices against a streaming-read bandwidth probe. The options;
 * the measurement is tools/bench_kernels.c's (sdn_tool_bench_kernels, tools.h). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "tools/tools.h"

static int parse_list(const char *opt, const char *s, long lo, long hi, long *v, int max) {
    int k = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (k == max) { fprintf(stderr, "sdnpu: option %s: too many values\n", opt); return -1; }
        if (cli_int(opt, tok, lo, hi, &v[k])) return -1;
        k++;
    }
    if (!k) { fprintf(stderr, "sdnpu: option %s: empty list\n", opt); return -1; }
    return k;
}

int cmd_bench_kernels(int argc, char **argv) {
    sdn_tool_bench_kernels_opts o;
    sdn_tool_bench_kernels_defaults(&o);
    const char *n_s = NULL, *threads_s = NULL;
    char threads_h[48];
    snprintf(threads_h, sizeof threads_h, "thread counts, at most %d (default 1,2)", SDN_TOOL_BENCH_KERNELS_MAXT);
    const cli_opt table[] = {
        CLI_O_TYPES(&o.types, "weight types (default F32,F16,BF16,Q8_0,Q4_0,Q4_1,Q5_0,Q5_1,Q4_K,Q5_K,Q6_K)"),
        CLI_O_SHAPES(&o.shapes, "OUTxIN matrices (default 896x896,4864x896,896x4864: Qwen2.5-0.5B attn, ffn up, ffn down)"),
        {.name = "--n", .kind = CLI_STR, .dest = &n_s, .arg = "LIST", .help = "activation rows per call, at most 256 (default 1,2,4,8,16,32,64)"},
        {.name = "--threads", .kind = CLI_STR, .dest = &threads_s, .arg = "LIST", .help = threads_h},
        {.name = "--mem", .kind = CLI_LONG, .dest = &o.mem_mb, .lo = 1, .hi = 16384, .arg = "MB", .help = "weight working set rotated over, and probe size (default 512)"},
        {.name = "--time", .kind = CLI_DOUBLE, .dest = &o.min_time, .lo = 0.001, .hi = 60, .arg = "SEC", .help = "measuring time per configuration (default 0.15)"},
        {.name = "--layout", .kind = CLI_ENUM, .dest = &o.layout, .choices = "packed|file|sgemm", .arg = "L",
         .help = "packed (default: the quantized types on the packed layout the engine loads, the float types on the file's), "
                 "file (every type on the file's layout) or sgemm (what a prefill matmul on SGEMM costs: weights dequantized "
                 "per call, OpenBLAS)"},
        {.name = "--repeat", .kind = CLI_LONG, .dest = &o.repeat, .lo = 1, .hi = 100, .arg = "K",
         .help = "K rounds over all configurations, keeping each one's fastest median and the best probe (default 1; on a shared "
                 "machine this filters out the intervals when other work ran)"},
        CLI_O_END,
    };
    const cli_cmd cmd = {.name = "bench-kernels", .synopsis = "[options]",
                         .about = "Speed of the small-batch matmul kernels vs a memory-bandwidth probe.", .opts = table};
    int prc = cli_parse(&cmd, argc, argv, NULL, NULL);
    if (prc != CLI_CONTINUE) return prc;
    if (n_s && (o.nn = parse_list("--n", n_s, 1, 256, o.n, 16)) < 0) return 2;
    if (threads_s && (o.nthreads = parse_list("--threads", threads_s, 1, SDN_TOOL_BENCH_KERNELS_MAXT, o.threads, 4)) < 0) return 2;
    return sdn_tool_bench_kernels(&o);
}
