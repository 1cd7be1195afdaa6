/* main.c - entry point of the `sdnpu` program: dispatches to one subcommand per file
 * (cmd_*.c). The CLI only parses options and calls libsdnpu (sdnpu.h) and the tools library
 * (tools/tools.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "sdnpu.h"
#include "tools/tools.h"

static const struct {
    const char *name;
    sdn_cmd_fn fn;
    const char *help;
} commands[] = {
    {"demo", cmd_demo, "the built-in default: SmolLM2-135M-Instruct summarizes a shipped document, plain vs speculative"},
    {"run", cmd_run, "generate text for a prompt (and context documents) with a model file"},
    {"chat", cmd_chat, "interactive multi-turn conversation with a chat model (lines from stdin; /reset, /exit)"},
    {"pull", cmd_pull, "fetch a known real model (smollm2-135m-instruct) into the cache and verify it"},
    {"info", cmd_info, "describe a model file: architecture, shapes, tensor types, tokenizer, memory"},
    {"make-model", cmd_make_model, "write a seeded random-weight GGUF of a named shape"},
    {"bench-model", cmd_bench_model, "prefill/decode speed vs. memory bandwidth and SGEMM (Qwen2.5-0.5B shapes)"},
    {"tokenize", cmd_tokenize, "show the ids and pieces of a text under a model's own tokenizer (--bench: speed)"},
    {"bench-verify", cmd_bench_verify, "verify-step cost vs. tree size; none/pld/sam end to end on TinyStories"},
    {"bench-sam", cmd_bench_sam, "micro-benchmark of the suffix automaton and baseline drafters"},
    {"bench-kernels", cmd_bench_kernels, "speed of the small-batch matmul kernels vs a memory-bandwidth probe"},
    {"bench-attention", cmd_bench_attention, "speed of the attention kernels per cache type, context and rows vs a bandwidth probe"},
    {"profile", cmd_profile, "profile the prefill/decode graphs of a model on this machine; print the fits and the chosen schedule"},
    {"bench-graphs", cmd_bench_graphs, "graph switching: time to first token of sync/async/progressive, and greedy vs optimal schedules"},
    {"bench", cmd_bench, "generation over a dataset: every drafting method vs plain decoding (acceptance, ms/token, speedup)"},
    {"trace", cmd_trace, "record plain greedy generation over a dataset as a trace for offline studies"},
    {"trace-import", cmd_trace_import, "turn text-only model answers (e.g. Vicuna outputs) into a trace"},
    {"study", cmd_study, "offline acceptance study: replay drafting methods against traces"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server (chat, completions, streaming) with speculative decoding on"},
    {"make-story-task", cmd_make_story_task, "write the generated story task (model-written stories) for small story models"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: sdnpu COMMAND [options]   (sdnpu COMMAND --help for its options; sdnpu --version)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nevery command also takes --kernel NAME (or the environment variable SDN_KERNEL) to force a\n"
               "kernel path: portable, avx2 (AVX-VNNI used when present), avx512, amx on x86-64; portable, neon,\n"
               "dotprod, i8mm on AArch64; the default is the best path this CPU supports;\n"
               "and --prefill-matmul auto|sgemm|kernels (or SDN_PREFILL_MATMUL): how prefill batches\n"
               "multiply, default auto (the batch kernels for every weight type; sgemm: OpenBLAS, inexact);\n"
               "and --cache-type-k, --cache-type-v f16|f32|q8|bf16 (or -ctk, -ctv; SDN_CACHE_TYPE_K, SDN_CACHE_TYPE_V):\n"
               "the KV cache's key and value types of every context the command makes, default f16\n"
               "environment: SDNPU_CACHE (model cache, default ~/.cache/sdnpu), SDN_MEM_LIMIT_MB (memory bound),\n"
               "SDNPU_PYTHON (pull's interpreter), SDNPU_API_KEY (serve); docs/commands.md\n"
               "options are written --opt VALUE or --opt=VALUE; exit codes: 0 success, 1 runtime failure, 2 usage error\n"
               "\nexample:\n  %s\n", cli_example("run"));
}

/* Take the global options out of argv: --kernel NAME (or --kernel=NAME) selects the kernel
 * path (that one, else SDN_KERNEL, else the best), --prefill-matmul auto|sgemm|kernels the
 * prefill matmuls (else SDN_PREFILL_MATMUL, else auto), --cache-type-k / --cache-type-v (-ctk,
 * -ctv) f16|f32|q8|bf16 the KV cache types of every context (else SDN_CACHE_TYPE_K / _V, else f16);
 * sdn_tool_global_options also sets the memory limit (SDN_MEM_LIMIT_MB) and the cache
 * directory (SDNPU_CACHE, ...): the library reads no environment. Returns 0, or 2 after
 * printing the error. */
static int kernel_option(const char *cmd, int *argc, char **argv) {
    const char *name = NULL, *pmm = NULL, *ctk = NULL, *ctv = NULL;
    const cli_opt global[] = {
        {.name = "--kernel", .kind = CLI_STR, .dest = &name, .arg = "portable|avx2|avx512|amx|neon|dotprod|i8mm"},
        {.name = "--prefill-matmul", .kind = CLI_STR, .dest = &pmm, .arg = "auto|sgemm|kernels"},
        {.name = "--cache-type-k", .kind = CLI_STR, .dest = &ctk, .arg = "f16|f32|q8|bf16"},
        {.name = "-ctk", .kind = CLI_STR, .dest = &ctk, .arg = "f16|f32|q8|bf16"},
        {.name = "--cache-type-v", .kind = CLI_STR, .dest = &ctv, .arg = "f16|f32|q8|bf16"},
        {.name = "-ctv", .kind = CLI_STR, .dest = &ctv, .arg = "f16|f32|q8|bf16"},
        CLI_O_END,
    };
    int rc = cli_extract(cmd, global, argc, argv);
    if (rc) return rc;
    return sdn_tool_global_options(name, pmm, ctk, ctv);
}

static void version(void) { cli_version(stdout); }

int main(int argc, char **argv) {
    if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))) {
        version();
        return 0;
    }
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    /* a copy: the global options are taken out of it */
    char **args = calloc((size_t)argc + 1, sizeof *args);
    if (!args) return 1;
    memcpy(args, argv, (size_t)argc * sizeof *argv);
    argv = args;
    int rc = 2;
    if (kernel_option(argv[1], &argc, argv)) goto out;
    if (argc < 2) {
        usage(stderr);
        goto out;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) {
            rc = commands[i].fn(argc - 1, argv + 1); /* cli_parse prints --help with the example */
            goto out;
        }
    fprintf(stderr, "sdnpu: unknown command '%s'\n", argv[1]);
    usage(stderr);
out:
    free(args);
    return rc;
}

