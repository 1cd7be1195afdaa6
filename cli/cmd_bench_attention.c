/* cmd_bench_attention.c - `sdnpu bench-attention`: the attention kernels on their own, per KV
 * cache type, context length and batch rows, against a streaming-read bandwidth probe. The
 * options; the measurement is tools/bench_attention.c's (sdn_tool_bench_attention, tools.h). */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "tools/tools.h"

static int parse_ints(const char *s, int *v, int max, const char *what) {
    int n = 0;
    char *end;
    while (*s && n < max) {
        long x = strtol(s, &end, 10);
        if (end == s || x < 1 || x > (1 << 20)) {
            fprintf(stderr, "sdnpu bench-attention: %s: '%s' is not a list of positive integers\n", what, s);
            return -1;
        }
        v[n++] = (int)x;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') {
            fprintf(stderr, "sdnpu bench-attention: %s: unexpected '%s'\n", what, end);
            return -1;
        }
    }
    return n;
}

int cmd_bench_attention(int argc, char **argv) {
    sdn_tool_bench_attention_opts o;
    sdn_tool_bench_attention_defaults(&o);
    const char *ctx_s = "256,2048,4096,8192", *rows_s = "1,16", *threads_s = "1,2";
    const cli_opt table[] = {
        {.name = "--context", .kind = CLI_STR, .dest = &ctx_s, .arg = "LIST", .help = "positions already cached (default 256,2048,4096,8192)"},
        {.name = "--rows", .kind = CLI_STR, .dest = &rows_s, .arg = "LIST", .help = "batch rows: 1 a decode step, more a verify chain (default 1,16)"},
        {.name = "--cache", .kind = CLI_STR, .dest = &o.cache, .arg = "LIST", .help = "cache types, keys and values alike (default f16,q8,f32)"},
        {.name = "--threads", .kind = CLI_STR, .dest = &threads_s, .arg = "LIST", .help = "thread counts (default 1,2)"},
        {.name = "--heads", .kind = CLI_INT, .dest = &o.heads, .lo = 1, .hi = 256, .arg = "N", .help = "query heads (default 9)"},
        {.name = "--kv-heads", .kind = CLI_INT, .dest = &o.kv_heads, .lo = 1, .hi = 256, .arg = "N", .help = "KV heads (default 3)"},
        {.name = "--head-dim", .kind = CLI_INT, .dest = &o.head_dim, .lo = 2, .hi = 1024, .arg = "N", .help = "head dimension (default 64)"},
        {.name = "--layers", .kind = CLI_INT, .dest = &o.layers, .lo = 1, .hi = 256, .arg = "N", .help = "layers rotated over (default 30)"},
        {.name = "--reps", .kind = CLI_INT, .dest = &o.reps, .lo = 1, .hi = 101, .arg = "N", .help = "passes over the layers; the median is kept (default 9)"},
        {NULL},
    };
    const cli_cmd cmd = {.name = "bench-attention", .synopsis = "[options]",
                         .about = "Time the attention kernels per cache type, context and rows, against a memory-bandwidth probe.",
                         .opts = table};
    int rc = cli_parse(&cmd, argc, argv, NULL, NULL);
    if (rc != CLI_CONTINUE) return rc;
    if (o.heads % o.kv_heads) {
        fprintf(stderr, "sdnpu bench-attention: --heads %d is not a multiple of --kv-heads %d\n", o.heads, o.kv_heads);
        return 2;
    }
    o.n_context = parse_ints(ctx_s, o.context, 16, "--context");
    o.n_rows = parse_ints(rows_s, o.rows, 16, "--rows");
    o.n_threads = parse_ints(threads_s, o.threads, 4, "--threads");
    if (o.n_context < 1 || o.n_rows < 1 || o.n_threads < 1) return 2;
    return sdn_tool_bench_attention(&o);
}
