/* cli_bench.c - the work of `sdnpu bench` after its option parsing (sdn_tool_bench,
 * datasets/bench.h; the options in cli/cmd_bench.c): real generation over a dataset with plain
 * decoding and each drafting method on the same requests; checks that every method's greedy output equals
 * plain decoding's and prints per task and method: mean accepted tokens, ms/token, speedup
 * over plain decoding measured in the same run, prefill and decode time, peak memory. Also
 * CSV/JSON files, rows in an SQLite results database, and SVG charts (--plot). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/prefix_cache.h"
#include "datasets/bench.h"
#include "runtime/verify_cost.h"
#include "datasets/dataset.h"
#include "runtime/history.h"
#include "tools/progress.h"
#include "datasets/results.h"
#include "draft/methods.h"
#include "tools/bench_util.h"
#include "tools/tools.h"
#include "runtime/decode.h"
#include "engine/forward.h"
#include "modelfile/model.h"

static void on_progress(void *ud, long done, long total, const char *note) {
    (void)total;
    sdn_progress_update(ud, done, note);
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

/* The step budget the default rule chose most often, and the mean (0 when it never drafted). */
static int budget_mode(const long *h, double *mean) {
    long best = 0, n = 0;
    double sum = 0;
    int mode = 0;
    for (int i = 0; i < SDN_STUDY_DRAFT_HIST; i++) {
        if (h[i] > best) best = h[i], mode = i;
        n += h[i];
        sum += (double)i * h[i];
    }
    if (mean) *mean = n ? sum / n : 0;
    return mode;
}

/* Constrained runs: complete answers, forced-text drafts, and the constraint's own cost per
 * decode step against the step's whole cost. */
static void print_constraint(const sdn_bench_result *r) {
    printf("\nconstraint: %-10s %-10s %9s %10s %14s %12s %9s\n", "task", "method", "complete", "forced tok", "constraint ms", "ms/step", "share");
    for (int i = 0; i < r->n_cells; i++) {
        const sdn_result_cell *c = &r->cells[i];
        double per_step = c->c.steps ? 1000 * c->t_constrain / c->c.steps : 0, step = c->c.steps ? 1000 * c->t_decode / c->c.steps : 0;
        printf("            %-10s %-10s %4ld/%-4ld %10ld %14.1f %12.3f %8.2f%%\n", c->task, c->method, c->complete, c->c.requests,
               c->forced_drafted, 1000 * c->t_constrain, step, step > 0 ? 100 * per_step / step : 0);
    }
    printf("(complete: answers that ended where the grammar may end, not cut short by --max-tokens; share: the constraint's time\n"
           " per decode step - pruning drafts, choosing each verified row's token, following the committed text - over the step)\n");
}

static void print_table(const sdn_bench_result *r) {
    printf("\n%-10s %-10s %7s %5s %8s %8s %9s %10s %9s %8s %7s %10s %10s %9s %s\n", "task", "method", "budget", "reqs", "prompt", "out tok",
           "acc/step", "draft/step", "ms/token", "speedup", "draft%", "prefill ms", "decode ms", "peak MiB", "output");
    for (int i = 0; i < r->n_cells; i++) {
        const sdn_result_cell *c = &r->cells[i];
        if (i && strcmp(r->cells[i - 1].task, c->task)) printf("\n");
        char same[48], pre[32];
        if (!strcmp(c->method, "none")) snprintf(same, sizeof same, "(baseline)");
        else if (c->mismatches) snprintf(same, sizeof same, "DIFFERS on %d!", c->mismatches);
        else snprintf(same, sizeof same, "= plain");
        if (c->t_prefill > 0) snprintf(pre, sizeof pre, "%.1f", 1000 * c->t_prefill);
        else snprintf(pre, sizeof pre, "-");
        double share = c->t_decode > 0 ? 100 * c->c.t_draft / c->t_decode : 0;
        printf("%-10s %-10s %7s %5ld %8ld %8ld %9.3f %10.2f %9.3f %7.2fx %6.1f%% %10s %10.1f %9.1f %s\n", c->task, c->method,
               c->budget[0] ? c->budget : "-", c->c.requests, c->prompt_tokens, c->c.out_tokens, sdn_study_mean_accepted(&c->c),
               sdn_study_mean_draft(&c->c), sdn_cell_ms_per_token(c), sdn_cell_speedup(c), share, pre, 1000 * c->t_decode,
               (double)c->peak_rss / (1 << 20), same);
    }
}

/* Per task and method: the budget with the lowest ms/token, and what the default rule chose. */
static void print_best(const sdn_bench_result *r, int n_budgets) {
    int any_default = 0;
    for (int i = 0; i < r->n_cells; i++) any_default |= !strcmp(r->cells[i].budget, "default");
    if (n_budgets < 2 && !any_default) return;
    printf("\n%-10s %-10s %-11s %9s %8s %s\n", "task", "method", "best budget", "ms/token", "speedup",
           any_default ? "default rule's step budget: most often (mean)" : "");
    for (int i = 0; i < r->n_cells; i++) {
        const sdn_result_cell *c = &r->cells[i];
        if (!strcmp(c->method, "none")) continue;
        int first = 1;
        for (int j = 0; j < i; j++)
            if (!strcmp(r->cells[j].task, c->task) && !strcmp(r->cells[j].method, c->method)) first = 0;
        if (!first) continue;
        const sdn_result_cell *best = NULL, *def = NULL;
        for (int j = i; j < r->n_cells; j++) {
            const sdn_result_cell *x = &r->cells[j];
            if (strcmp(x->task, c->task) || strcmp(x->method, c->method)) continue;
            if (!strcmp(x->budget, "default")) def = x;
            double ms = sdn_cell_ms_per_token(x);
            if (ms > 0 && (!best || ms < sdn_cell_ms_per_token(best))) best = x;
        }
        if (!best) continue;
        char chose[64] = "";
        if (def) {
            double mean;
            int mode = budget_mode(def->budget_hist, &mean);
            snprintf(chose, sizeof chose, "%d (%.1f)", mode, mean);
        }
        printf("%-10s %-10s %-11s %9.3f %7.2fx %s\n", c->task, c->method, best->budget, sdn_cell_ms_per_token(best), sdn_cell_speedup(best),
               chose);
    }
}

/* "method" with one budget, "method@budget" with several. */
static void cell_label(const sdn_result_cell *c, int n_budgets, char *buf, size_t cap) {
    if (n_budgets > 1 && c->budget[0]) snprintf(buf, cap, "%s@%s", c->method, c->budget);
    else snprintf(buf, cap, "%s", c->method);
}

int sdn_tool_bench(const sdn_tool_bench_cmd_opts *to) {
    const char *model = to->model, *tokenizer = to->tokenizer, *tasks = to->tasks, *out_dir = to->out_dir, *rdb = to->rdb, *cost = to->cost;
    const char *cost_out = to->cost_out, *hist_path = to->history, *json_out = to->json, *csv_out = to->csv, *graphs = to->graphs;
    const char *schema_path = to->json_schema, *grammar_path = to->grammar, *answers_path = to->answers, *shared = to->shared;
    const char *cmdline = to->command;
    const char *const *projs = to->projects;
    const int n_projs = to->n_projects, plot = to->plot, limit = to->limit, n_params = to->n_params;
    const char **params = to->params;
    const char *datasets[33];
    int n_ds = 0;
    for (int i = 0; i < to->n_datasets && i < 32; i++) datasets[n_ds++] = to->datasets[i];
    int budgets[64], n_budgets = to->n_budgets;
    memcpy(budgets, to->budgets, sizeof budgets);
    const long hist_budget = to->history_budget;
    char **methods = to->methods;
    int n_methods = to->n_methods;
    sdn_bench_opts o = to->o;
    sdn_gs_options gopt = to->gopt;
    char gdb[1200];
    if (hist_budget) o.history_budget = hist_budget;
    if (graphs) {
        gopt.graphs = graphs;
        o.graphs = &gopt;
    }
    if (!model) { fprintf(stderr, "sdnpu bench: --model is required (sdnpu bench --help)\n"); return 2; }
    if (schema_path && grammar_path) { fprintf(stderr, "sdnpu bench: give --json-schema or --grammar, not both\n"); return 2; }
    sdn_grammar *gram = NULL;
    sdn_gvocab *gvocab = NULL;
    FILE *answers = NULL;
    if (schema_path || grammar_path) { /* a bad grammar is a usage error, found before the model loads */
        const char *gp = schema_path ? schema_path : grammar_path;
        char *text = NULL;
        size_t len = 0;
        sdn_err ge = {0};
        if (sdn_read_file_max(gp, 1 << 20, schema_path ? "JSON schema" : "grammar", &text, &len, &ge) ||
            (schema_path ? sdn_grammar_from_schema(text, len, &gram, &ge) : sdn_grammar_parse(text, len, &gram, &ge))) {
            fprintf(stderr, "sdnpu bench: option %s %s: %s\n", schema_path ? "--json-schema" : "--grammar", gp, ge.msg);
            free(text);
            return 2;
        }
        free(text);
        o.grammar = gram;
    }
    if (n_budgets && o.caps.max_nodes) { fprintf(stderr, "sdnpu bench: --draft-max N is the fixed budget N: give it in --budgets instead\n"); return 2; }
    if (!n_budgets) { /* --draft-max N alone: that budget (with --draft-depth); else the engine's default */
        budgets[0] = o.caps.max_nodes > 0 ? o.caps.max_nodes : SDN_BENCH_DEFAULT_BUDGET;
        if (!o.caps.max_nodes) n_budgets = 1; /* else n_budgets = 0: sdn_bench_run takes caps (depth) */
    }
    o.budgets = budgets;
    o.n_budgets = n_budgets;
    int nb_shown = n_budgets ? n_budgets : 1;
    char shared_ds[4200];
    if (n_ds == 0) {
        if (!shared) { fprintf(stderr, "sdnpu bench: no --dataset given and ../shared/datasets not found\n"); return 2; }
        snprintf(shared_ds, sizeof shared_ds, "%s/datasets", shared);
        datasets[n_ds++] = shared_ds;
    }
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
            methods[w] = NULL; /* the rest of the list is the command's to free */
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
    sdn_pcache *pcache = NULL;
    sdn_bench_result res = {0};
    sdn_cost_profile prof, projp[8];
    int have_prof = 0, code = 1;
    for (int i = 0; i < n_ds; i++)
        if (sdn_dataset_load(&ds, datasets[i], &err)) goto fail;
    sdn_dataset_filter(&ds, tasks, limit);
    if (ds.n == 0) { fprintf(stderr, "sdnpu bench: no requests (check --tasks)\n"); goto out; }
    for (int i = 0; i < n_projs; i++) /* before the run: a bad profile fails at once */
        if (sdn_cost_load(projs[i], &projp[i], &err)) goto fail;
    if (cost) {
        if (sdn_cost_load(cost, &prof, &err)) goto fail;
        have_prof = 1;
    }
    sdn_model_load_opts lo = {.tokenizer_path = tokenizer};
    if (sdn_model_load(model, &lo, &m, &err)) goto fail;
    if (to->prefix_cache_dir || to->prefix_cache_mb > 0) {
        sdn_pcache_opts po = {.mem_bytes = (uint64_t)to->prefix_cache_mb << 20, .dir = to->prefix_cache_dir,
                              .disk_bytes = (uint64_t)to->prefix_cache_disk_mb << 20};
        if (sdn_pcache_new(&po, &pcache, &err)) goto fail;
        o.pcache = pcache;
    }
    if (gram) {
        if (!sdn_model_tokenizer(m)) { sdn_fail(&err, SDN_EINVAL, "a grammar needs the model's tokenizer"); goto fail; }
        if (sdn_gvocab_new(sdn_model_tokenizer(m), &gvocab, &err)) goto fail;
        o.gvocab = gvocab;
    }
    if (answers_path && !(answers = o.answers = fopen(answers_path, "w"))) {
        sdn_fail(&err, SDN_EIO, "cannot write %s", answers_path);
        goto fail;
    }
    if (hist_path && sdn_history_open(hist_path, &hist, &err)) goto fail;
    o.methods = (const char *const *)methods;
    o.n_methods = n_methods;
    o.history = hist;
    char capsbuf[64];
    size_t cn = (size_t)snprintf(capsbuf, sizeof capsbuf, "budgets=");
    for (int b = 0; b < nb_shown && cn < sizeof capsbuf; b++) {
        int bv = n_budgets ? budgets[b] : o.caps.max_nodes;
        if (bv == SDN_BENCH_DEFAULT_BUDGET) cn += (size_t)snprintf(capsbuf + cn, sizeof capsbuf - cn, "%sdefault", b ? "," : "");
        else cn += (size_t)snprintf(capsbuf + cn, sizeof capsbuf - cn, "%s%d", b ? "," : "", bv);
    }
    if (cn < sizeof capsbuf && !n_budgets && o.caps.max_depth)
        cn += (size_t)snprintf(capsbuf + cn, sizeof capsbuf - cn, " depth=%d", o.caps.max_depth);
    if (cn < sizeof capsbuf) snprintf(capsbuf + cn, sizeof capsbuf - cn, " branch=%d", o.caps.max_branch > 0 ? o.caps.max_branch : SDN_DEFAULT_BRANCH);
    printf("bench: %s, %d threads, %d requests, at most %d new tokens, draft %s, %s, methods: none (baseline)", model, o.threads, ds.n,
           o.max_tokens, capsbuf, o.fresh_prefill || o.graphs ? "every run prefills" : "one prefill per request (KV reused)");
    for (int k = 0; k < n_methods; k++) printf(", %s", methods[k]);
    printf("%s\n", hist ? " (+ history store)" : "");
    fflush(stdout);
    sdn_progress *pb = sdn_progress_new(stderr, "bench", ds.n, 0);
    o.progress = on_progress;
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
    if (gram) print_constraint(&res);
    if (!o.fresh_prefill && !o.graphs)
        printf("(prefill ms: each request's one prefill, on the plain row; the other runs reuse its KV entries. %ld runs prefilled for %d requests)\n",
               res.prefills, res.n_requests);
    print_best(&res, nb_shown);
    for (int i = 0; i < n_projs; i++) bench_print_projection(&projp[i], projs[i], res.cells, res.n_cells);
    if (res.mismatches)
        printf("\nERROR: %ld (request, method) outputs differ from plain greedy decoding - a bug in the engine or a drafter\n", res.mismatches);
    /* files */
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
    if (json_out) {
        if (sdn_results_json(json_out, &meta, res.cells, res.n_cells, &err)) goto fail;
        printf("wrote %s\n", json_out);
    }
    if (csv_out) {
        if (sdn_results_csv(csv_out, &meta, res.cells, res.n_cells, &err)) goto fail;
        printf("wrote %s\n", csv_out);
    }
    if (rdb) {
        long long run_id;
        if (sdn_results_db_add(rdb, &meta, res.cells, res.n_cells, &run_id, &err)) goto fail;
        printf("results database %s: run %lld\n", rdb, run_id);
    }
    if ((plot && !have_prof && !res.have_curve) || cost_out) {
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
        /* ms/token per task (groups) and method at budget (series) */
        enum { MAXS = 64 };
        const char *groups[64], *series[MAXS];
        char labels[MAXS][96];
        int ng = 0, ns = 0;
        for (int i = 0; i < res.n_cells; i++) {
            char lab[96];
            cell_label(&res.cells[i], nb_shown, lab, sizeof lab);
            int g = 0, s = 0;
            while (g < ng && strcmp(groups[g], res.cells[i].task)) g++;
            if (g == ng && ng < 64) groups[ng++] = res.cells[i].task;
            while (s < ns && strcmp(series[s], lab)) s++;
            if (s == ns && ns < MAXS) { snprintf(labels[ns], sizeof labels[ns], "%s", lab); series[ns] = labels[ns]; ns++; }
        }
        double *vals = bench_xmalloc((size_t)(ng * ns + 1) * sizeof *vals);
        for (int i = 0; i < ng * ns; i++) vals[i] = -1;
        for (int i = 0; i < res.n_cells; i++) {
            char lab[96];
            cell_label(&res.cells[i], nb_shown, lab, sizeof lab);
            int g = 0, s = 0;
            while (g < ng && strcmp(groups[g], res.cells[i].task)) g++;
            while (s < ns && strcmp(series[s], lab)) s++;
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

        /* accepted draft tokens per step: share of steps, per method at budget, pooled over tasks */
        enum { HB = 12 }; /* 0 .. 10, then "> 10" */
        const char *hgroups[HB] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", ">10"};
        const char *hseries[MAXS];
        int nhs = 0;
        double *hv = bench_xmalloc((size_t)(HB * MAXS) * sizeof *hv);
        long *hcount = bench_xmalloc((size_t)(HB * MAXS) * sizeof *hcount);
        memset(hcount, 0, (size_t)(HB * MAXS) * sizeof *hcount);
        for (int s = 0; s < ns; s++) {
            if (!strcmp(series[s], "none")) continue;
            int hs = nhs++;
            hseries[hs] = series[s];
            for (int i = 0; i < res.n_cells; i++) {
                char lab[96];
                cell_label(&res.cells[i], nb_shown, lab, sizeof lab);
                if (strcmp(lab, series[s])) continue;
                for (int k = 0; k < SDN_ACCEPT_HIST; k++) hcount[(k < HB - 1 ? k : HB - 1) * MAXS + hs] += res.cells[i].c.accept_hist[k];
            }
        }
        for (int hs = 0; hs < nhs; hs++) {
            long tot = 0;
            for (int g = 0; g < HB; g++) tot += hcount[g * MAXS + hs];
            for (int g = 0; g < HB; g++) hv[g * nhs + hs] = tot ? 100.0 * hcount[g * MAXS + hs] / tot : -1;
        }
        free(hcount);
        if (nhs > 0) {
            snprintf(title, sizeof title, "accepted draft tokens per step, %% of steps (all tasks; %s, %d threads)", mb ? mb + 1 : model, o.threads);
            snprintf(path, sizeof path, "%s/accept_hist.svg", dir);
            rc = sdn_svg_bars(path, title, "% of steps", hgroups, HB, hseries, nhs, hv, &err);
        }
        free(hv);
        if (rc) goto fail;
        if (nhs > 0) printf("wrote %s\n", path);

        /* the verify-cost curve(s), the default rule's step budgets marked */
        double cx[SDN_INVARIANT_MAX_ROWS], cy[SDN_INVARIANT_MAX_ROWS], cy2[SDN_INVARIANT_MAX_ROWS], xs[SDN_COST_MAX_SIZES + 1],
            ys[SDN_COST_MAX_SIZES + 1];
        const double *px[3], *py[3];
        int pn[3], nl = 0;
        const char *name[3];
        char cname[2][96];
        if (res.have_curve) {
            for (int d = 0; d < SDN_INVARIANT_MAX_ROWS; d++) cx[d] = d, cy[d] = res.curve.near[d], cy2[d] = res.curve.far[d];
            snprintf(cname[0], sizeof cname[0], "curve the default budget used, after %d positions", res.curve.len_near);
            snprintf(cname[1], sizeof cname[1], "after %d positions", res.curve.len_far);
            px[nl] = cx, py[nl] = cy, pn[nl] = SDN_INVARIANT_MAX_ROWS, name[nl++] = cname[0];
            px[nl] = cx, py[nl] = cy2, pn[nl] = SDN_INVARIANT_MAX_ROWS, name[nl++] = cname[1];
        }
        if (have_prof) {
            xs[0] = 0, ys[0] = prof.plain_step_ms;
            for (int i = 0; i < prof.n; i++) xs[i + 1] = prof.tree_sizes[i], ys[i + 1] = prof.step_ms[i];
            px[nl] = xs, py[nl] = ys, pn[nl] = prof.n + 1, name[nl++] = cost ? cost : "measured on this machine";
        }
        long bh[SDN_STUDY_DRAFT_HIST] = {0};
        int any_def = 0;
        for (int i = 0; i < res.n_cells; i++)
            if (!strcmp(res.cells[i].budget, "default")) {
                any_def = 1;
                for (int k = 0; k < SDN_STUDY_DRAFT_HIST; k++) bh[k] += res.cells[i].budget_hist[k];
            }
        double marks[2];
        char mlab[2][96];
        const char *mlabels[2] = {mlab[0], mlab[1]};
        int nmark = 0;
        if (any_def) {
            double mean;
            int mode = budget_mode(bh, &mean);
            marks[nmark] = mode;
            snprintf(mlab[nmark++], sizeof mlab[0], "default rule's step budget: most often %d (mean %.1f)", mode, mean);
            if (mean > 0 && (int)(mean + 0.5) != mode) {
                marks[nmark] = mean;
                snprintf(mlab[nmark++], sizeof mlab[0], "mean %.1f", mean);
            }
        }
        snprintf(title, sizeof title, "verification step cost vs draft tokens (%d threads)", o.threads);
        snprintf(path, sizeof path, "%s/verify_cost.svg", dir);
        if (nl && sdn_svg_lines_marked(path, title, "draft tokens in the tree (batch = tokens + 1 rows)", "ms per step", name, nl, px, py, pn,
                                       marks, mlabels, nmark, &err))
            goto fail;
        if (nl) printf("wrote %s\n", path);
    }
    code = res.mismatches ? 3 : 0;
    goto out;
fail:
    fprintf(stderr, "sdnpu bench: %s\n", err.msg);
out:
    if (answers && fclose(answers) && code == 0) {
        fprintf(stderr, "sdnpu bench: cannot write %s\n", answers_path);
        code = 1;
    }
    sdn_grammar_free(gram);
    sdn_gvocab_free(gvocab);
    sdn_bench_result_free(&res);
    sdn_history_close(hist);
    sdn_pcache_free(pcache);
    sdn_model_free(m);
    sdn_dataset_free(&ds);
    return code;
}
