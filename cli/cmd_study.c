/* cmd_study.c - `sdnpu study`: offline acceptance study. Replays every method's drafting
 * against recorded greedy outputs (traces); the options; the study, its tables and records
 * are tools/cli_study.c's (sdn_tool_study, datasets/study.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/ds_cli.h"
#include "cli/opts.h"
#include "sdnpu.h"
#include "tools/method_params.h"
#include "datasets/study.h"

static void study_epilogue(FILE *f) { fprintf(f, "\nmethods: %s\n", sdnpu_methods()); }

int cmd_study(int argc, char **argv) {
    const char *methods_arg = NULL;
    long hist_budget = 0;
    sdn_tool_study_opts o = {.threads = cli_default_threads()};
    sdn_tool_params par;
    sdn_tool_params_init(&par);
    cli_list tr_list = {0}, cost_list = {0};
    const cli_opt table[] = {
        {.name = "--traces", .kind = CLI_LIST, .dest = &tr_list, .arg = "FILE",
         .help = "trace file (JSON Lines, from `sdnpu trace`, `sdnpu trace-import` or another tool; repeatable, 32 at most)"},
        {.name = "--methods", .kind = CLI_STR, .dest = &methods_arg, .arg = "LIST", .help = "drafting methods (comma-separated; default all, listed below)"},
        CLI_O_TASKS(&o.tasks),
        CLI_O_LIMIT(&o.limit),
        CLI_O_DRAFT_MAX(&o.so.caps.max_nodes, "draft tokens per step at most (default 63: the whole budget)"),
        CLI_O_DRAFT_DEPTH(&o.so.caps.max_depth, "draft tree depth at most (default 63)"),
        CLI_O_DRAFT_BRANCH(&o.so.caps.max_branch, "draft tree branching at most (default 4)"),
        {.name = "--replay-history", .kind = CLI_FLAG, .dest = &o.so.history,
         .help = "also draft from earlier outputs of the same group (trace order, in-memory store)"},
        {.name = "--history", .kind = CLI_REFUSE,
         .choices = "--history names a history store FILE in other commands; the study's in-memory history of earlier outputs is --replay-history"},
        {.name = "--history-budget", .kind = CLI_LONG, .dest = &hist_budget, .lo = 1, .hi = 1L << 30, .arg = "N", .help = "history tokens per request (default 4096)"},
        {.name = "--param", .kind = CLI_FN, .dest = &par, .fn = sdn_tool_param_fn, .arg = "KEY=VALUE", .help = "a drafting-method parameter (repeatable; keys below)"},
        {.name = "--cost", .kind = CLI_LIST, .dest = &cost_list, .arg = "PROFILE", .help = "verify-cost profile: project ms/token and speedup per method (repeatable, 8 at most)"},
        CLI_O_MODEL(&o.model, "measure methods a trace cannot replay live on this model"),
        CLI_O_TOKENIZER(&o.tokenizer),
        CLI_O_THREADS(&o.threads),
        CLI_O_CTX(&o.n_ctx, 32, "KV cache size of --model (default: what the longest request needs)"),
        {.name = "--live", .kind = CLI_FLAG, .dest = &o.so.live_all, .help = "measure every method live on --model (checks the replay)"},
        CLI_O_CSV(&o.csv, "write the cells as CSV"),
        CLI_O_JSON(&o.json, "write the cells as JSON"),
        CLI_O_RESULTS_DB(&o.rdb),
        {.name = "--no-published", .kind = CLI_FLAG, .dest = &o.no_published, .help = "do not print the published reference figures"},
        CLI_O_END,
    };
    const cli_cmd cmd = {.name = "study", .synopsis = "--traces FILE [--traces FILE ...] [options]",
                         .about = "Offline acceptance study: replay drafting methods against traces.", .opts = table,
                         .epilogue_fn = study_epilogue};
    int rc = cli_parse(&cmd, argc, argv, NULL, NULL);
    if (rc == CLI_CONTINUE && tr_list.n > 32) { fprintf(stderr, "sdnpu: option --traces: at most 32\n"); rc = 2; }
    if (rc == CLI_CONTINUE && cost_list.n > 8) { fprintf(stderr, "sdnpu study: option --cost: at most 8 profiles\n"); rc = 2; }
    for (int i = 0; rc == CLI_CONTINUE && i < tr_list.n; i++) o.traces[o.n_traces++] = tr_list.v[i];
    for (int i = 0; rc == CLI_CONTINUE && i < cost_list.n; i++) o.costs[o.n_costs++] = cost_list.v[i];
    cli_list_free(&tr_list);
    cli_list_free(&cost_list);
    if (rc != CLI_CONTINUE) return rc;
    if (hist_budget) o.so.history_budget = hist_budget;
    if (par.given) o.so.mcfg = &par.cfg;
    o.params = par.v;
    o.n_params = par.n;
    if (!o.n_traces) { fprintf(stderr, "sdnpu study: --traces is required (sdnpu study --help)\n"); return 2; }
    if (o.so.live_all && !o.model) { fprintf(stderr, "sdnpu study: --live needs --model\n"); return 2; }
    char **methods = methods_arg ? dscli_split(methods_arg, &o.n_methods) : dscli_all_methods(&o.n_methods);
    o.methods = methods;
    char *cmdline = cli_command_line(argc, argv);
    o.command = cmdline;
    rc = sdn_tool_study(&o);
    free(cmdline);
    dscli_free_list(methods);
    return rc;
}
