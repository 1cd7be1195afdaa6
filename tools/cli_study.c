/* cli_study.c - the work of `sdnpu study` after its option parsing (sdn_tool_study,
 * datasets/study.h; the options in cli/cmd_study.c): offline acceptance study. Replays every
 * method's drafting against recorded greedy outputs (traces), prints mean accepted tokens per step,
 * accepted-length histograms and draft sizes per task and method, optionally projects
 * ms/token and speedup from a verify-cost profile, and shows published figures beside
 * traces of Vicuna-7B on Spec-Bench. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench_util.h"
#include "tools/progress.h"
#include "datasets/results.h"
#include "datasets/study.h"
#include "datasets/trace.h"
#include "draft/methods.h"
#include "tools/tools.h"
#include "engine/forward.h"
#include "modelfile/model.h"

static void on_progress(void *ud, long done, long total, const char *note) {
    (void)total;
    sdn_progress_update(ud, done, note);
}

static void print_tables(const sdn_result_cell *cells, int n) {
    printf("\n%-10s %-10s %5s %9s %8s %9s %9s %9s  %s\n", "task", "method", "reqs", "out tok", "steps", "acc/step", "draft/st", "draft ms", "");
    printf("%-10s %-10s %5s %9s %8s %9s %9s %9s\n", "", "", "", "", "", "(+bonus)", "(tokens)", "per step");
    for (int i = 0; i < n; i++) {
        const sdn_result_cell *c = &cells[i];
        if (i && strcmp(cells[i - 1].task, c->task)) printf("\n");
        if (c->c.requests == 0) {
            printf("%-10s %-10s %5s  %s\n", c->task, c->method, "-", c->note[0] ? c->note : "no requests");
            continue;
        }
        printf("%-10s %-10s %5ld %9ld %8ld %9.3f %9.2f %9.4f  %s%s%s%s\n", c->task, c->method, c->c.requests, c->c.out_tokens, c->c.steps,
               sdn_study_mean_accepted(&c->c), sdn_study_mean_draft(&c->c), c->c.steps ? 1000.0 * c->c.t_draft / c->c.steps : 0.0,
               c->live ? "(live)" : "", c->mismatches ? " output differs from the trace" : "", c->skipped ? " (some requests skipped)" : "",
               !c->live && c->note[0] ? " (approximate replay)" : "");
    }
    printf("\naccepted draft tokens per step (%% of steps; the bonus token not counted)\n%-10s %-10s", "task", "method");
    for (int b = 0; b <= 10; b++) printf(" %5d", b);
    printf(" %5s\n", ">10");
    for (int i = 0; i < n; i++) {
        const sdn_result_cell *c = &cells[i];
        if (!c->c.steps) continue;
        printf("%-10s %-10s", c->task, c->method);
        long more = 0;
        for (int b = 11; b < SDN_ACCEPT_HIST; b++) more += c->c.accept_hist[b];
        for (int b = 0; b <= 10; b++) printf(" %5.1f", 100.0 * c->c.accept_hist[b] / c->c.steps);
        printf(" %5.1f\n", 100.0 * more / c->c.steps);
    }
    printf("\ndraft size per step (%% of steps with that many draft tokens)\n%-10s %-10s %6s %6s %6s %6s %6s %6s %6s\n", "task", "method",
           "0", "1-4", "5-9", "10", "11-31", "32-63", "mean");
    for (int i = 0; i < n; i++) {
        const sdn_result_cell *c = &cells[i];
        if (!c->c.steps) continue;
        long b[6] = {0};
        for (int d = 0; d < SDN_STUDY_DRAFT_HIST; d++) {
            int k = d == 0 ? 0 : d < 5 ? 1 : d < 10 ? 2 : d == 10 ? 3 : d < 32 ? 4 : 5;
            b[k] += c->c.draft_hist[d];
        }
        printf("%-10s %-10s", c->task, c->method);
        for (int k = 0; k < 6; k++) printf(" %6.1f", 100.0 * b[k] / c->c.steps);
        printf(" %6.2f\n", sdn_study_mean_draft(&c->c));
    }
}

/* The published reference figures of model_outputs/README.md (Spec-Bench leaderboard). */
static void print_published(void) {
    printf("\npublished reference (Spec-Bench Leaderboard.md, Vicuna-7B-v1.3, greedy, FP16; RTX 3090 / A100):\n"
           "  PLD mean accepted tokens per step, all 480 Spec-Bench questions (6 tasks): 1.73 / 1.75\n"
           "  PLD per-task mean accepted tokens: not published (no PLD answer files with accept lengths exist)\n"
           "  PLD speedup over plain decoding: summarization 2.46x / 2.66x, RAG 1.71x / 1.86x\n"
           "  (for comparison, recorded runs of other methods on the same questions, mean accepted tokens:\n"
           "   EAGLE summarization 3.306, RAG 3.211; SpS-68m summarization 2.733 / 2.424, RAG 2.773 / 2.464)\n");
}

int sdn_tool_study(const sdn_tool_study_opts *o) {
    const char *const *traces = o->traces, *const *costs = o->costs;
    const char *tasks = o->tasks, *model = o->model, *tokenizer = o->tokenizer, *csv = o->csv, *json = o->json, *rdb = o->rdb;
    const char *cmdline = o->command;
    const char **params = o->params;
    const int n_tr = o->n_traces, n_costs = o->n_costs, limit = o->limit, threads = o->threads, n_ctx = o->n_ctx, no_pub = o->no_published;
    const int n_methods = o->n_methods, n_params = o->n_params;
    char *const *methods = o->methods;
    sdn_study_opts so = o->so;
    int rc;
    sdn_err err = {0};
    sdn_trace tr = {0};
    sdn_cost_profile prof[8];
    sdn_model *m = NULL;
    sdn_ctx *ctx = NULL;
    sdn_result_cell *cells = NULL;
    int n_cells = 0, code = 1;
    if (!n_methods) { fprintf(stderr, "sdnpu study: no methods\n"); goto out; }
    for (int i = 0; i < n_tr; i++)
        if (sdn_trace_load(&tr, traces[i], &err)) goto fail;
    sdn_trace_filter(&tr, tasks, limit);
    if (!tr.n) { fprintf(stderr, "sdnpu study: no trace rows (check --tasks)\n"); goto out; }
    for (int i = 0; i < n_costs; i++)
        if (sdn_cost_load(costs[i], &prof[i], &err)) goto fail;
    if (model) {
        sdn_model_load_opts lo = {.tokenizer_path = tokenizer};
        if (sdn_model_load(model, &lo, &m, &err)) goto fail;
        int need = 0;
        for (int i = 0; i < tr.n; i++) {
            int l = tr.rows[i].n_ctx + (tr.rows[i].max_new > 0 ? tr.rows[i].max_new : tr.rows[i].n_out + 1) + 1;
            if (l > need) need = l;
        }
        sdn_ctx_params cp = {.n_ctx = n_ctx > 0 ? n_ctx : need, .n_threads = threads};
        if (sdn_ctx_new(m, &cp, &ctx, &err)) goto fail;
        so.live_ctx = ctx;
    }
    so.methods = (const char *const *)methods;
    so.n_methods = n_methods;
    sdn_draft_caps caps;
    sdn_study_caps(&so.caps, &caps);
    /* what the traces are */
    int with_preds = 0, vicuna = 0;
    for (int i = 0; i < tr.n; i++) {
        with_preds += tr.rows[i].preds_k > 0;
        if (tr.rows[i].model && strstr(tr.rows[i].model, "vicuna-7b")) vicuna = 1;
    }
    printf("study: %d requests from %d trace file(s) (first: %s, model %s, fingerprint %s), %d with prefill predictions\n"
           "draft caps: %d nodes, depth %d, branch %d%s\n",
           tr.n, n_tr, traces[0], tr.rows[0].model ? tr.rows[0].model : "?", tr.rows[0].model_fp ? tr.rows[0].model_fp : "none", with_preds,
           caps.max_nodes, caps.max_depth, caps.max_branch, so.history ? "; history: earlier outputs of the same group" : "");
    for (int k = 0; k < n_methods; k++) {
        if (sdn_method_needs_model_feedback(methods[k]))
            printf("note: %s learns from the model's predictions at rejected draft positions, which a trace does not record: it cannot be "
                   "replayed exactly%s\n", methods[k],
                   model ? "; measured live on --model instead"
                   : sdn_method_reuses_drafts(methods[k])
                       ? "; give --model to measure it live"
                       : "; replayed approximately from traces with output predictions (fewer tokens per step than live: "
                         "docs/datasets.md), give --model to measure it live");
        if (sdn_method_uses_prefill_preds(methods[k]) && with_preds < tr.n)
            printf("note: %s needs prefill predictions: %d of %d requests have none and are skipped for it\n", methods[k], tr.n - with_preds, tr.n);
    }
    sdn_progress *pb = sdn_progress_new(stderr, "study", tr.n, 0);
    so.progress = on_progress;
    so.ud = pb;
    rc = sdn_study_run(&tr, &so, &cells, &n_cells, &err);
    sdn_progress_end(pb);
    if (rc) goto fail;
    print_tables(cells, n_cells);
    for (int i = 0; i < n_costs; i++) bench_print_projection(&prof[i], costs[i], cells, n_cells);
    if (vicuna && !no_pub) print_published();
    char capsbuf[64];
    snprintf(capsbuf, sizeof capsbuf, "nodes=%d depth=%d branch=%d", caps.max_nodes, caps.max_depth, caps.max_branch);
    /* provenance: every trace, every distinct model the traces name, the command line, --param */
    const char *mpaths[64], *mfps[64];
    int n_models = 0;
    for (int i = 0; i < tr.n && n_models < 64; i++) {
        const char *mp = tr.rows[i].model ? tr.rows[i].model : "", *fp = tr.rows[i].model_fp ? tr.rows[i].model_fp : "";
        int seen = 0;
        for (int k = 0; k < n_models && !seen; k++) seen = !strcmp(mpaths[k], mp) && !strcmp(mfps[k], fp);
        if (!seen) mpaths[n_models] = mp, mfps[n_models++] = fp;
    }
    sdn_run_meta meta = {.kind = "study", .model = n_models ? mpaths[0] : "", .model_fp = n_models ? mfps[0] : "", .dataset = traces[0],
                         .command = cmdline ? cmdline : "sdnpu study", .threads = threads, .inputs = traces, .n_inputs = n_tr,
                         .models = mpaths, .model_fps = mfps, .n_models = n_models, .params = params, .n_params = n_params};
    snprintf(meta.caps, sizeof meta.caps, "%s", capsbuf);
    if (csv && sdn_results_csv(csv, &meta, cells, n_cells, &err)) goto fail;
    if (json && sdn_results_json(json, &meta, cells, n_cells, &err)) goto fail;
    long long run_id = 0;
    if (rdb && sdn_results_db_add(rdb, &meta, cells, n_cells, &run_id, &err)) goto fail;
    if (rdb) printf("\nresults database %s: run %lld\n", rdb, run_id);
    code = 0;
    goto out;
fail:
    fprintf(stderr, "sdnpu study: %s\n", err.msg);
out:
    free(cells);
    sdn_ctx_free(ctx);
    sdn_model_free(m);
    sdn_trace_free(&tr);
    return code;
}
