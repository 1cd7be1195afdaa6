/* cmd_bench.c - `sdnpu bench`: real generation over a dataset with plain decoding and each
 * drafting method on the same requests (acceptance, ms/token, speedup, outputs checked
 * against plain decoding; CSV/JSON, a results database, SVG charts). The options; the run,
 * its tables and files are tools/cli_bench.c's (sdn_tool_bench, datasets/bench.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/ds_cli.h"
#include "cli/opts.h"
#include "sdnpu.h"
#include "datasets/bench.h"
#include "tools/method_params.h"

/* --budgets LIST (cli_opt.fn; dest: a bench_budgets). */
typedef struct bench_budgets {
    int v[64], n;
} bench_budgets;

static int parse_budgets(void *dest, const char *value, char *why, size_t cap) {
    bench_budgets *b = dest;
    sdn_err be = {0};
    if (sdn_bench_parse_budgets(value, b->v, 64, &b->n, &be)) {
        snprintf(why, cap, "%s", be.msg);
        return -1;
    }
    return 0;
}

int cmd_bench(int argc, char **argv) {
    const char *methods_arg = NULL, *hscope = NULL;
    bench_budgets bud = {.n = 0};
    sdn_tool_bench_cmd_opts t = {.o = {.max_tokens = 128, .threads = cli_default_threads()}};
    sdn_tool_params par;
    sdn_tool_params_init(&par);
    cli_list ds_list = {0}, proj_list = {0};
    static char methods_h[256];
    snprintf(methods_h, sizeof methods_h, "drafting methods compared with plain decoding (default all: %s)", sdnpu_methods());
    const cli_opt table[] = {
        CLI_O_MODEL(&t.model, "model file (GGUF or llama2.c checkpoint)"),
        CLI_O_TOKENIZER(&t.tokenizer),
        CLI_O_DATASET(&ds_list),
        {.name = "--methods", .kind = CLI_STR, .dest = &methods_arg, .arg = "LIST", .help = methods_h},
        CLI_O_TASKS(&t.tasks),
        CLI_O_LIMIT(&t.limit),
        CLI_O_MAX_TOKENS(&t.o.max_tokens, 1, 1 << 20, "new tokens per request (default 128)"),
        {.name = "--budgets", .kind = CLI_FN, .dest = &bud, .fn = parse_budgets, .arg = "LIST",
         .help = "draft budgets every method runs at (plain decoding runs once per request): 'default' = the engine's default, as "
                 "`sdnpu run` without --draft-max (this machine's verify-cost curve sizes every step), N = at most N draft tokens, "
                 "depth N (default: default). After the table: each task and method's best budget"},
        CLI_O_DRAFT_MAX(&t.o.caps.max_nodes, "one fixed budget N (= --budgets N; not with --budgets)"),
        CLI_O_DRAFT_DEPTH(&t.o.caps.max_depth, "depth of --draft-max's budget"),
        CLI_O_DRAFT_BRANCH(&t.o.caps.max_branch, "branching of every budget (default 4)"),
        CLI_O_THREADS(&t.o.threads),
        {.name = "--prefix-cache", .kind = CLI_STR, .dest = &t.prefix_cache_dir, .arg = "DIR",
         .help = "requests' prefills take their prompt blocks from a prefix cache kept in DIR (made 0700) and give it theirs"},
        {.name = "--prefix-cache-mb", .kind = CLI_INT, .dest = &t.prefix_cache_mb, .lo = 0, .hi = 1 << 24, .arg = "N",
         .help = "prefix cache memory budget in MiB (default 0: off, or blocks pass through with --prefix-cache)"},
        {.name = "--prefix-cache-disk-mb", .kind = CLI_INT, .dest = &t.prefix_cache_disk_mb, .lo = 1, .hi = 1 << 30, .arg = "N",
         .help = "the --prefix-cache directory's budget in MiB (default 4096)"},
        CLI_O_CTX(&t.o.n_ctx, 32, "KV cache size (default min(trained length, 8192))"),
        CLI_O_CHAT_TEMPLATE(&t.o.chat_template),
        CLI_O_USE_INPUT(&t.o.use_input),
        {.name = "--history", .kind = CLI_STR, .dest = &t.history, .arg = "FILE",
         .help = "history store: earlier answers of the group feed SAM; answers are stored"},
        {.name = "--history-budget", .kind = CLI_LONG, .dest = &t.history_budget, .lo = 1, .hi = 1L << 30, .arg = "N", .help = "history tokens per request (default 4096)"},
        {.name = "--history-scope", .kind = CLI_STR, .dest = &hscope, .arg = "S",
         .help = "group (default): a request drafts from its group's earlier answers; global: from every answer in --history, its group's first"},
        {.name = "--param", .kind = CLI_FN, .dest = &par, .fn = sdn_tool_param_fn, .arg = "KEY=VALUE", .help = "a drafting-method parameter (repeatable; keys below)"},
        CLI_O_GRAPHS(&t.graphs),
        CLI_O_GRAPH_BLOCKS(&t.gopt.n_blocks, "--graph-blocks"),
        CLI_O_G1(&t.gopt.s1),
        CLI_O_G2(&t.gopt.s2),
        CLI_O_PROFILE_DB(&t.gopt.profile_db),
        CLI_O_OUT_DIR(&t.out_dir, "write bench.csv and bench.json (and the charts) into DIR"),
        CLI_O_JSON(&t.json, "write the result cells to this file (as bench.json)"),
        CLI_O_CSV(&t.csv, "write the result cells to this file (as bench.csv)"),
        CLI_O_RESULTS_DB(&t.rdb),
        {.name = "--plot", .kind = CLI_FLAG, .dest = &t.plot,
         .help = "SVG charts into --out DIR (or .): ms/token per task and method, accepted tokens per step (histogram per method, "
                 "pooled over tasks), verify cost vs draft size with the default budget's choice marked"},
        {.name = "--cost", .kind = CLI_STR, .dest = &t.cost, .arg = "PROFILE", .help = "verify-cost profile to plot (default: measured on the model when plotting)"},
        {.name = "--cost-out", .kind = CLI_STR, .dest = &t.cost_out, .arg = "FILE", .help = "measure the verify-cost profile on the model and write it",
         .check = CLI_CHECK_OUT_FILE},
        {.name = "--project", .kind = CLI_LIST, .dest = &proj_list, .arg = "PROFILE",
         .help = "also project every cell onto another model's verify-cost profile (repeatable, 8 at most; `sdnpu bench-verify --shapes S "
                 "--types T --cost-out PROFILE`): the live steps' draft sizes and draft time at that model's step cost, a projection"},
        {.name = "--fresh-prefill", .kind = CLI_FLAG, .dest = &t.o.fresh_prefill,
         .help = "every run prefills its prompt (default: the request's first run prefills, the others reuse its KV entries and prefill predictions)"},
        {.name = "--json-schema", .kind = CLI_STR, .dest = &t.json_schema, .arg = "FILE",
         .help = "constrained decoding: every run (plain included) answers in this JSON schema"},
        {.name = "--grammar", .kind = CLI_STR, .dest = &t.grammar, .arg = "FILE",
         .help = "... or in this GBNF grammar (docs/constrained.md); --param grammar.forced=0 turns forced-text drafting off. A table after "
                 "the results: complete answers and the constraint's cost per step"},
        {.name = "--answers", .kind = CLI_STR, .dest = &t.answers, .arg = "FILE",
         .help = "write plain decoding's answers, one JSON line each (id, task, answer, complete)", .check = CLI_CHECK_OUT_FILE},
        CLI_O_END,
    };
    const cli_cmd cmd = {.name = "bench", .synopsis = "--model M [options]",
                         .about = "Generation over a dataset: every drafting method vs plain decoding (acceptance, ms/token, speedup).",
                         .opts = table,
                         .epilogue = "Times: ms/token = decode time (drafter set-up such as calibration trees included) per output token;\n"
                                     "speedup = plain decoding's ms/token on the same requests in the same run / the method's. 'prefill ms'\n"
                                     "is the request's one prefill (with the prefill predictions when a listed method uses them), shown on\n"
                                     "the plain-decoding row: the other runs reuse its KV entries and prefill nothing ('-').\n"};
    int prc = cli_parse(&cmd, argc, argv, NULL, NULL);
    if (prc == CLI_CONTINUE && ds_list.n > 32) { fprintf(stderr, "sdnpu: option --dataset: at most 32\n"); prc = 2; }
    if (prc == CLI_CONTINUE && proj_list.n > 8) { fprintf(stderr, "sdnpu bench: option --project: at most 8 profiles\n"); prc = 2; }
    for (int i = 0; prc == CLI_CONTINUE && i < ds_list.n; i++) t.datasets[t.n_datasets++] = ds_list.v[i];
    for (int i = 0; prc == CLI_CONTINUE && i < proj_list.n; i++) t.projects[t.n_projects++] = proj_list.v[i];
    cli_list_free(&ds_list);
    cli_list_free(&proj_list);
    if (prc != CLI_CONTINUE) return prc;
    int global;
    if (cli_history_scope_check(hscope, t.history, "bench", &global)) return 2;
    t.o.history_scope = global ? SDN_HISTORY_GLOBAL : SDN_HISTORY_GROUP;
    memcpy(t.budgets, bud.v, sizeof t.budgets);
    t.n_budgets = bud.n;
    if (par.given) t.o.mcfg = &par.cfg;
    t.params = par.v;
    t.n_params = par.n;
    t.shared = t.n_datasets ? NULL : dscli_shared();
    char **methods = methods_arg ? dscli_split(methods_arg, &t.n_methods) : dscli_all_methods(&t.n_methods);
    t.methods = methods;
    char *cmdline = cli_command_line(argc, argv);
    t.command = cmdline;
    int rc = sdn_tool_bench(&t);
    free(cmdline);
    dscli_free_list(methods);
    return rc;
}
