/* cmd_bench.c - `sdnpu bench`: real generation over a dataset with plain decoding and each
 * drafting method on the same requests; checks that every method's greedy output equals
 * plain decoding's and prints per task and method: mean accepted tokens, ms/token, speedup
 * over plain decoding measured in the same run, prefill and decode time, peak memory. Also
 * CSV/JSON files, rows in an SQLite results database, and SVG charts (--plot). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/bench.h"
#include "runtime/verify_cost.h"
#include "datasets/dataset.h"
#include "datasets/history.h"
#include "datasets/progress.h"
#include "bench/results.h"
#include "draft/methods.h"
#include "bench/cli/bench_util.h"
#include "engine/cli/cli.h"
#include "engine/cli/opts.h"
#include "runtime/decode.h"
#include "bench/cli/ds_cli.h"
#include "engine/forward.h"
#include "engine/model.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: sdnpu bench --model M [options]\n"
            "  --model M            model file (GGUF or llama2.c checkpoint)\n"
            "  --tokenizer FILE     llama2.c tokenizer.bin (for llama2.c checkpoints)\n"
            "  --dataset D          task file or directory (repeatable; default ../shared/datasets)\n"
            "  --methods LIST       drafting methods compared with plain decoding (default all: %s)\n"
            "  --tasks LIST         only these tasks      --limit N   at most N requests per task\n"
            "  --max-tokens N       new tokens per request (default 128)\n"
            "  --draft-max N --draft-depth D --draft-branch B   draft caps (default 4, 4, 4: the engine's)\n"
            "  --threads N --ctx N  worker threads (default: the CPUs this process may use), KV cache size\n"
            "  --chat-template NAME --use-input   request rendering (see `sdnpu trace --help`)\n"
            "  --history FILE       history store: earlier answers of the group feed SAM; answers are stored\n"
            "  --history-budget N   history tokens per request (default 4096)\n"
            "  --param KEY=VALUE    a drafting-method parameter (repeatable; keys below)\n"
            "  --graphs MODE        fixed-shape graphs switched during prefill: single, sync, async, progressive\n"
            "                       (--graph-blocks N --g1 S1 --g2 S2 --profile-db FILE, as for run)\n"
            "  --out DIR            write bench.csv and bench.json (and the charts) into DIR\n"
            "  --results-db FILE    append the run to an SQLite results database\n"
            "  --plot               SVG charts: ms/token per task and method, verify cost vs draft size\n"
            "  --cost PROFILE       verify-cost profile to plot (default: measured on the model when plotting)\n"
            "  --cost-out FILE      measure the verify-cost profile on the model and write it\n",
            sdn_method_list());
    cli_param_help(f);
}

static int mkdir_p(const char *dir) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0755) && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(buf, 0755) && errno != EEXIST ? -1 : 0;
}

static void print_table(const sdn_bench_result *r) {
    printf("\n%-10s %-10s %5s %8s %8s %9s %9s %8s %10s %10s %9s %s\n", "task", "method", "reqs", "prompt", "out tok", "acc/step", "ms/token",
           "speedup", "prefill ms", "decode ms", "peak MiB", "output");
    for (int i = 0; i < r->n_cells; i++) {
        const sdn_result_cell *c = &r->cells[i];
        if (i && strcmp(r->cells[i - 1].task, c->task)) printf("\n");
        char same[48];
        if (!strcmp(c->method, "none")) snprintf(same, sizeof same, "(baseline)");
        else if (c->mismatches) snprintf(same, sizeof same, "DIFFERS on %d!", c->mismatches);
        else snprintf(same, sizeof same, "= plain");
        printf("%-10s %-10s %5ld %8ld %8ld %9.3f %9.3f %7.2fx %10.1f %10.1f %9.1f %s\n", c->task, c->method, c->c.requests, c->prompt_tokens,
               c->c.out_tokens, sdn_study_mean_accepted(&c->c), sdn_cell_ms_per_token(c), sdn_cell_speedup(c), 1000 * c->t_prefill,
               1000 * c->t_decode, (double)c->peak_rss / (1 << 20), same);
    }
}

int cmd_bench(int argc, char **argv) {
    const char *model = NULL, *tokenizer = NULL, *methods_arg = NULL, *tasks = NULL, *out_dir = NULL, *rdb = NULL, *cost = NULL;
    const char *cost_out = NULL, *hist_path = NULL, *v;
    const char *datasets[32];
    int n_ds = 0, plot = 0, n_params = 0;
    const char *params[64];
    char *cmdline = NULL;
    long x, limit = 0;
    sdn_bench_opts o = {.max_tokens = 128, .threads = cli_default_threads()};
    sdn_method_config mcfg;
    sdn_method_defaults(&mcfg);
    sdn_gs_options gopt = {0};
    char gdb[1200];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define VAL() ((v = cli_value(argc, argv, &i, a)) != NULL)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--model")) { if (!VAL()) return 2; model = v; }
        else if (!strcmp(a, "--tokenizer")) { if (!VAL()) return 2; tokenizer = v; }
        else if (!strcmp(a, "--dataset")) {
            if (!VAL()) return 2;
            if (n_ds == 32) { fprintf(stderr, "sdnpu: option --dataset: at most 32\n"); return 2; }
            datasets[n_ds++] = v;
        }
        else if (!strcmp(a, "--methods")) { if (!VAL()) return 2; methods_arg = v; }
        else if (!strcmp(a, "--tasks")) { if (!VAL()) return 2; tasks = v; }
        else if (!strcmp(a, "--out")) { if (!VAL()) return 2; if (cli_check_output_dir(a, v)) return 1; out_dir = v; }
        else if (!strcmp(a, "--results-db")) { if (!VAL()) return 2; if (cli_check_output(a, v)) return 1; rdb = v; }
        else if (!strcmp(a, "--cost")) { if (!VAL()) return 2; cost = v; }
        else if (!strcmp(a, "--cost-out")) { if (!VAL()) return 2; if (cli_check_output(a, v)) return 1; cost_out = v; }
        else if (!strcmp(a, "--history")) { if (!VAL()) return 2; hist_path = v; }
        else if (!strcmp(a, "--chat-template")) { if (!VAL()) return 2; o.chat_template = v; }
        else if (!strcmp(a, "--use-input")) o.use_input = 1;
        else if (!strcmp(a, "--plot")) plot = 1;
        else if (!strcmp(a, "--limit")) { if (!VAL() || cli_int(a, v, 1, 1 << 30, &limit)) return 2; }
        else if (!strcmp(a, "--graphs")) { if (!VAL()) return 2; gopt.graphs = v; o.graphs = &gopt; }
        else if (!strcmp(a, "--graph-blocks")) { if (!VAL() || cli_int(a, v, 1, 128, &x)) return 2; gopt.n_blocks = (int)x; }
        else if (!strcmp(a, "--g1")) { if (!VAL() || cli_int(a, v, 1, 4096, &x)) return 2; gopt.s1 = (int)x; }
        else if (!strcmp(a, "--g2")) { if (!VAL() || cli_int(a, v, 1, 64, &x)) return 2; gopt.s2 = (int)x; }
        else if (!strcmp(a, "--profile-db")) { if (!VAL()) return 2; gopt.profile_db = v; }
        else if (!strcmp(a, "--param")) {
            if (!VAL()) return 2;
            sdn_err pe = {0};
            if (sdn_method_set_param(&mcfg, v, &pe)) { fprintf(stderr, "sdnpu: %s\n", pe.msg); return 2; }
            if (n_params < 64) params[n_params++] = v;
            o.mcfg = &mcfg;
        }
        else if (!strcmp(a, "--history-budget")) { if (!VAL() || cli_int(a, v, 1, 1L << 30, &x)) return 2; o.history_budget = x; }
        else if (!strcmp(a, "--param")) {
            if (!VAL()) return 2;
            sdn_err pe = {0};
            if (sdn_method_set_param(&mcfg, v, &pe)) { fprintf(stderr, "sdnpu: %s\n", pe.msg); return 2; }
            o.mcfg = &mcfg;
        }
        else if (!strcmp(a, "--max-tokens")) { if (!VAL() || cli_int(a, v, 1, 1 << 20, &x)) return 2; o.max_tokens = (int)x; }
        else if (!strcmp(a, "--draft-max")) { if (!VAL() || cli_int(a, v, 1, 63, &x)) return 2; o.caps.max_nodes = (int)x; }
        else if (!strcmp(a, "--draft-depth")) { if (!VAL() || cli_int(a, v, 1, 63, &x)) return 2; o.caps.max_depth = (int)x; }
        else if (!strcmp(a, "--draft-branch")) { if (!VAL() || cli_int(a, v, 1, 63, &x)) return 2; o.caps.max_branch = (int)x; }
        else if (!strcmp(a, "--threads")) { if (!VAL() || cli_int(a, v, 1, 256, &x)) return 2; o.threads = (int)x; }
        else if (!strcmp(a, "--ctx")) { if (!VAL() || cli_int(a, v, 32, 1 << 22, &x)) return 2; o.n_ctx = (int)x; }
        else { fprintf(stderr, "sdnpu bench: unknown option '%s'\n", a); usage(stderr); return 2; }
#undef VAL
    }
    if (!model) { fprintf(stderr, "sdnpu bench: --model is required\n"); usage(stderr); return 2; }
    char shared_ds[4200];
    if (n_ds == 0) {
        if (!dscli_shared()) { fprintf(stderr, "sdnpu bench: no --dataset given and ../shared/datasets not found\n"); return 2; }
        snprintf(shared_ds, sizeof shared_ds, "%s/datasets", dscli_shared());
        datasets[n_ds++] = shared_ds;
    }
    int n_methods = 0;
    char **methods = methods_arg ? dscli_split(methods_arg, &n_methods) : dscli_all_methods(&n_methods);
    /* plain decoding always runs as the baseline: drop "none" from the list; check the rest */
    int w = 0;
    for (int k = 0; k < n_methods; k++) {
        if (!strcmp(methods[k], "none")) { free(methods[k]); continue; }
        sdn_drafter probe = {0};
        sdn_method_config mc;
        sdn_err perr = {0};
        sdn_method_defaults(&mc);
        int bad = sdn_method_create(methods[k], &mc, &probe, &perr);
        sdn_drafter_destroy(&probe);
        if (bad) {
            fprintf(stderr, "sdnpu bench: option --methods: %s\n", perr.msg);
            for (int j = k; j < n_methods; j++) free(methods[j]);
            methods[w] = NULL;
            dscli_free_list(methods);
            return 2;
        }
        methods[w++] = methods[k];
    }
    methods[w] = NULL;
    n_methods = w;
    sdn_err err = {0};
    sdn_dataset ds = {0};
    sdn_model *m = NULL;
    sdn_history *hist = NULL;
    sdn_bench_result res = {0};
    sdn_cost_profile prof;
    int have_prof = 0, code = 1;
    for (int i = 0; i < n_ds; i++)
        if (sdn_dataset_load(&ds, datasets[i], &err)) goto fail;
    sdn_dataset_filter(&ds, tasks, (int)limit);
    if (ds.n == 0) { fprintf(stderr, "sdnpu bench: no requests (check --tasks)\n"); goto out; }
    if (cost) {
        if (sdn_cost_load(cost, &prof, &err)) goto fail;
        have_prof = 1;
    }
    sdn_model_load_opts lo = {.tokenizer_path = tokenizer};
    if (sdn_model_load(model, &lo, &m, &err)) goto fail;
    if (hist_path && sdn_history_open(hist_path, &hist, &err)) goto fail;
    o.methods = (const char *const *)methods;
    o.n_methods = n_methods;
    o.history = hist;
    sdn_draft_caps caps = o.caps;
    if (caps.max_nodes <= 0) caps.max_nodes = SDN_DEFAULT_DRAFT_TOKENS; /* as sdn_bench_run does */
    sdn_study_caps(&caps, &caps);
    printf("bench: %s, %d threads, %d requests, at most %d new tokens, draft caps %d/%d/%d, methods: none (baseline)", model, o.threads, ds.n,
           o.max_tokens, caps.max_nodes, caps.max_depth, caps.max_branch);
    for (int k = 0; k < n_methods; k++) printf(", %s", methods[k]);
    printf("%s\n", hist ? " (+ history store)" : "");
    fflush(stdout);
    sdn_progress *pb = sdn_progress_new(stderr, "bench", ds.n, 0);
    o.progress = dscli_progress;
    o.ud = pb;
    if (o.graphs && !gopt.profile_db) {
        snprintf(gdb, sizeof gdb, "%s/profiles.sqlite", bench_cache_dir());
        gopt.profile_db = gdb;
    }
    int rc = sdn_bench_run(m, &ds, &o, &res, &err);
    sdn_progress_end(pb);
    if (rc) goto fail;
    printf("model fingerprint %s; %d requests run, %d skipped (prompt too long for the context)\n", res.model_fp, res.n_requests, res.skipped);
    if (res.skipped && sdn_model_cfg(m)->ctx_len <= 1024)
        printf("note: a small-context base model such as TinyStories cannot take (or summarize) news articles and Wikipedia passages; "
               "use a task in its domain (sdnpu make-story-task)\n");
    print_table(&res);
    if (res.mismatches)
        printf("\nERROR: %ld (request, method) outputs differ from plain greedy decoding - a bug in the engine or a drafter\n", res.mismatches);
    /* files */
    char capsbuf[64];
    snprintf(capsbuf, sizeof capsbuf, "nodes=%d depth=%d branch=%d", caps.max_nodes, caps.max_depth, caps.max_branch);
    cmdline = cli_command_line(argc, argv);
    sdn_run_meta meta = {.kind = "bench", .model = model, .model_fp = res.model_fp, .dataset = datasets[0],
                         .command = cmdline ? cmdline : "sdnpu bench", .threads = o.threads, .max_tokens = o.max_tokens,
                         .inputs = datasets, .n_inputs = n_ds, .params = params, .n_params = n_params};
    snprintf(meta.caps, sizeof meta.caps, "%s", capsbuf);
    const char *dir = out_dir ? out_dir : ".";
    char path[4400];
    if ((out_dir || plot) && mkdir_p(dir)) { fprintf(stderr, "sdnpu bench: cannot create %s\n", dir); goto out; }
    if (out_dir) {
        snprintf(path, sizeof path, "%s/bench.csv", dir);
        if (sdn_results_csv(path, &meta, res.cells, res.n_cells, &err)) goto fail;
        snprintf(path, sizeof path, "%s/bench.json", dir);
        if (sdn_results_json(path, &meta, res.cells, res.n_cells, &err)) goto fail;
        printf("\nwrote %s/bench.csv and %s/bench.json\n", dir, dir);
    }
    if (rdb) {
        long long run_id;
        if (sdn_results_db_add(rdb, &meta, res.cells, res.n_cells, &run_id, &err)) goto fail;
        printf("results database %s: run %lld\n", rdb, run_id);
    }
    if ((plot && !have_prof) || cost_out) {
        sdn_ctx *c = NULL;
        int sizes[] = {1, 2, 4, 8, 16, 24, 32, 48, 63};
        sdn_ctx_params cp = {.n_ctx = 256 + 64, .n_threads = o.threads};
        if (sdn_model_cfg(m)->ctx_len < cp.n_ctx) cp.n_ctx = sdn_model_cfg(m)->ctx_len;
        if (sdn_ctx_new(m, &cp, &c, &err)) goto fail;
        sdn_cost_profile mp;
        rc = sdn_cost_measure(c, sizes, 9, cp.n_ctx - 64, 7, &mp, &err);
        sdn_ctx_free(c);
        if (rc) goto fail;
        printf("\nverify cost on this machine (%d threads): plain step %.3f ms;", o.threads, mp.plain_step_ms);
        for (int i = 0; i < mp.n; i++) printf(" %d:%.3f", mp.tree_sizes[i], mp.step_ms[i]);
        printf(" (draft tokens: ms)\n");
        if (cost_out) {
            if (sdn_cost_write(cost_out, &mp, &err)) goto fail;
            printf("wrote %s\n", cost_out);
        }
        if (!have_prof) prof = mp, have_prof = 1;
    }
    if (plot) {
        /* ms/token per task (groups) and method (series) */
        const char *groups[64], *series[32];
        int ng = 0, ns = 0;
        for (int i = 0; i < res.n_cells; i++) {
            int g = 0, s = 0;
            while (g < ng && strcmp(groups[g], res.cells[i].task)) g++;
            if (g == ng && ng < 64) groups[ng++] = res.cells[i].task;
            while (s < ns && strcmp(series[s], res.cells[i].method)) s++;
            if (s == ns && ns < 32) series[ns++] = res.cells[i].method;
        }
        double *vals = bench_xmalloc((size_t)(ng * ns + 1) * sizeof *vals);
        for (int i = 0; i < ng * ns; i++) vals[i] = -1;
        for (int i = 0; i < res.n_cells; i++) {
            int g = 0, s = 0;
            while (g < ng && strcmp(groups[g], res.cells[i].task)) g++;
            while (s < ns && strcmp(series[s], res.cells[i].method)) s++;
            if (g < ng && s < ns) vals[g * ns + s] = sdn_cell_ms_per_token(&res.cells[i]);
        }
        char title[512];
        const char *mb = strrchr(model, '/');
        snprintf(title, sizeof title, "decode ms/token by task and method (%s, %d threads; lower is better)", mb ? mb + 1 : model, o.threads);
        snprintf(path, sizeof path, "%s/ms_per_token.svg", dir);
        rc = sdn_svg_bars(path, title, "ms per token", groups, ng, series, ns, vals, &err);
        free(vals);
        if (rc) goto fail;
        printf("wrote %s\n", path);
        double xs[SDN_COST_MAX_SIZES + 1], ys[SDN_COST_MAX_SIZES + 1];
        xs[0] = 0, ys[0] = prof.plain_step_ms;
        for (int i = 0; i < prof.n; i++) xs[i + 1] = prof.tree_sizes[i], ys[i + 1] = prof.step_ms[i];
        const double *px[1] = {xs}, *py[1] = {ys};
        int pn[1] = {prof.n + 1};
        const char *name[1] = {cost ? cost : "measured on this machine"};
        snprintf(title, sizeof title, "verification step cost vs draft tokens (%s, %d threads)", prof.shape[0] ? prof.shape : "?", prof.threads);
        snprintf(path, sizeof path, "%s/verify_cost.svg", dir);
        if (sdn_svg_lines(path, title, "draft tokens in the tree (batch = tokens + 1 rows)", "ms per step", name, 1, px, py, pn, &err)) goto fail;
        printf("wrote %s\n", path);
    }
    code = res.mismatches ? 3 : 0;
    goto out;
fail:
    fprintf(stderr, "sdnpu bench: %s\n", err.msg);
out:
    free(cmdline);
    sdn_bench_result_free(&res);
    sdn_history_close(hist);
    sdn_model_free(m);
    sdn_dataset_free(&ds);
    dscli_free_list(methods);
    return code;
}
