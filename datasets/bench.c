/* bench.c - the benchmark loop and trace recording over a dataset (see bench.h).
 *
 * Per request the runs (plain decoding and every method at every budget) share one inference
 * context and the prompt's KV entries (the first run prefills, the others reuse them; see
 * bench.h); their order rotates from request to request so that no method always runs first
 * (cold caches) or last. The peak resident memory of each run is measured by resetting the kernel's
 * high-water mark (/proc/self/clear_refs, "5") before it; when that is not permitted the
 * process peak is reported. */
#include "datasets/bench.h"

#include <cjson/cJSON.h>

#include <stdlib.h>
#include <string.h>

#include "common/sdn_util.h"
#include "datasets/trace.h"
#include "draft/methods.h"
#include "draft/recycle.h"
#include "draft/sizing.h"
#include "engine/forward.h"
#include "tokenizer/request.h"
#include "runtime/decode.h"
#include "runtime/verify_cost.h"
#include "tokenizer/tokenizer.h"

#define MIN_ROOM 16 /* positions a prompt must leave for generation */

/* Prompt tokens of a row under opts' rendering (*ids malloc'd). */
static int sdn_task_tokens(const sdn_model *m, const sdn_task_row *r, const char *chat_template, int use_input, int32_t **ids, int *n_ids,
                    sdn_err *err) {
    const char *doc = r->context;
    sdn_request rq = {0};
    rq.chat_template = chat_template;
    if (use_input && r->input) {
        rq.prompt = r->input;
    } else {
        rq.documents = doc[0] ? &doc : NULL;
        rq.n_docs = doc[0] ? 1 : 0;
        rq.prompt = r->prompt;
    }
    int rc = sdn_request_tokens(m, &rq, ids, n_ids, NULL, err);
    if (rc) return sdn_fail(err, rc, "%s:%d: request '%s'", r->file ? r->file : "dataset", r->line, r->id);
    return SDN_OK;
}

typedef struct eog_state {
    const sdn_tokenizer *tok;
    int32_t hit;
} eog_state;

static int eog_fn(void *ud, int32_t t) {
    eog_state *s = ud;
    /* a BOS in the middle of generation starts a new document: stop there too (as `sdnpu run`) */
    int e = s->tok && (sdn_tokenizer_is_eog(s->tok, t) || t == sdn_tokenizer_bos(s->tok));
    if (e && s->hit < 0) s->hit = t;
    return e;
}

/* One line of sdn_bench_opts.answers: the request's plain answer (cJSON writes the string). */
static int write_answer(FILE *f, const sdn_task_row *row, const sdn_tokenizer *tok, const int32_t *ids, int n, int complete, sdn_err *err) {
    char *text = NULL, *line = NULL;
    int rc = tok ? sdn_detokenize(tok, ids, n, &text, err) : SDN_OK;
    if (rc) return rc;
    cJSON *j = cJSON_CreateObject();
    if (j && cJSON_AddStringToObject(j, "id", row->id) && cJSON_AddStringToObject(j, "task", row->task) &&
        cJSON_AddStringToObject(j, "answer", text ? text : "") && cJSON_AddBoolToObject(j, "complete", complete))
        line = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    free(text);
    if (!line) return sdn_fail(err, SDN_ENOMEM, "out of memory (answers file)");
    fprintf(f, "%s\n", line);
    cJSON_free(line);
    return ferror(f) ? sdn_fail(err, SDN_EIO, "cannot write the answers file") : SDN_OK;
}

static void reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return;
    fputs("5", f);
    fclose(f);
}

/* The context, and with --graphs the graph scheduler: its setup fills the context shape and
 * the generation parameters every request then copies (prefill hook, decode shape, draft cap). */
static int ctx_for(sdn_model *m, const sdn_bench_opts *o, sdn_ctx **c, sdn_gs **gs, sdn_gen_params *gtmpl, sdn_err *err) {
    int n_ctx = o->n_ctx > 0 ? o->n_ctx : sdn_model_cfg(m)->ctx_len;
    if (n_ctx > SDN_DEFAULT_N_CTX && o->n_ctx <= 0) n_ctx = SDN_DEFAULT_N_CTX; /* the engine's default */
    sdn_ctx_params cp = {.n_ctx = n_ctx, .n_threads = o->threads > 0 ? o->threads : 2};
    memset(gtmpl, 0, sizeof *gtmpl);
    gtmpl->caps = o->caps;
    if (o->graphs && o->graphs->graphs) {
        sdn_gs_options go = *o->graphs;
        go.draft_max = o->caps.max_nodes;
        int rc = sdn_gs_setup(m, cp.n_threads, &go, o->log ? o->log : stderr, &cp, gtmpl, gs, NULL, err);
        if (rc) return rc;
    }
    return sdn_ctx_new(m, &cp, c, err);
}

void sdn_bench_result_free(sdn_bench_result *r) {
    free(r->cells);
    memset(r, 0, sizeof *r);
}

static void add_stats(sdn_result_cell *cell, const sdn_gen_stats *s, int count_prefill) {
    sdn_study_counts c = {0};
    c.requests = 1;
    c.out_tokens = s->n_gen;
    c.steps = s->steps;
    c.drafted = s->drafted;
    c.accepted = s->accepted;
    for (int i = 0; i < SDN_ACCEPT_HIST; i++) c.accept_hist[i] = s->accept_hist[i];
    for (int i = 0; i < SDN_ACCEPT_HIST && i < SDN_STUDY_DRAFT_HIST; i++) {
        c.draft_hist[i] = s->draft_hist[i];
        cell->budget_hist[i] += s->budget_hist[i];
    }
    c.t_draft = s->t_draft;
    sdn_study_counts_add(&cell->c, &c);
    cell->prompt_tokens += s->n_prompt;
    if (count_prefill) cell->t_prefill += s->t_prefill;
    cell->t_decode += s->t_decode + s->t_begin; /* the drafter's begin (calibration build) counts */
    cell->t_verify += s->t_verify;
    if (s->peak_rss > cell->peak_rss) cell->peak_rss = s->peak_rss;
    cell->forced_drafted += s->forced_drafted;
    cell->t_constrain += s->t_constrain;
}

int sdn_bench_parse_budgets(const char *list, int *out, int cap, int *n, sdn_err *err) {
    *n = 0;
    if (!list || !*list) return sdn_fail(err, SDN_EINVAL, "option --budgets: empty list");
    const char *p = list;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        while (len && *p == ' ') p++, len--;
        while (len && p[len - 1] == ' ') len--;
        int v = -1;
        if (len == 7 && !strncmp(p, "default", 7)) v = SDN_BENCH_DEFAULT_BUDGET;
        else if (len > 0 && len < 4) {
            v = 0;
            for (size_t i = 0; i < len; i++) {
                if (p[i] < '0' || p[i] > '9') { v = -1; break; }
                v = v * 10 + (p[i] - '0');
            }
            if (v < 1 || v > SDN_INVARIANT_MAX_ROWS - 1) v = -1;
        }
        if (v < 0)
            return sdn_fail(err, SDN_EINVAL, "option --budgets: '%.*s' is not 'default' or an integer in [1, %d]", (int)len, p,
                            SDN_INVARIANT_MAX_ROWS - 1);
        for (int i = 0; i < *n; i++)
            if (out[i] == v) return sdn_fail(err, SDN_EINVAL, "option --budgets: '%.*s' is listed twice", (int)len, p);
        if (*n == cap) return sdn_fail(err, SDN_EINVAL, "option --budgets: at most %d budgets", cap);
        out[(*n)++] = v;
        if (!e) break;
        p = e + 1;
    }
    return SDN_OK;
}

/* One run of a request: plain decoding (method NULL) or a method at a budget. */
typedef struct bench_run {
    const char *method;
    int budget; /* SDN_BENCH_DEFAULT_BUDGET or N */
} bench_run;

int sdn_bench_run(sdn_model *m, const sdn_dataset *ds, const sdn_bench_opts *o, sdn_bench_result *out, sdn_err *err) {
    memset(out, 0, sizeof *out);
    FILE *log = o->log ? o->log : stderr;
    for (int i = 0; i < o->n_methods; i++) {
        if (!strcmp(o->methods[i], "none")) return sdn_fail(err, SDN_EINVAL, "option --methods: 'none' (plain decoding) always runs as the baseline; do not list it");
        sdn_drafter probe = {0};
        sdn_method_config mc;
        sdn_method_defaults(&mc);
        int rc = sdn_method_create(o->methods[i], &mc, &probe, err);
        sdn_drafter_destroy(&probe);
        if (rc) return sdn_fail(err, rc, "option --methods");
    }
    /* the budgets: listed, or the one of caps */
    int one_budget = o->caps.max_nodes > 0 ? o->caps.max_nodes : SDN_BENCH_DEFAULT_BUDGET;
    const int *budgets = o->n_budgets > 0 ? o->budgets : &one_budget;
    int nb = o->n_budgets > 0 ? o->n_budgets : 1, any_default = 0;
    for (int b = 0; b < nb; b++) {
        if (budgets[b] < 0 || budgets[b] > SDN_INVARIANT_MAX_ROWS - 1)
            return sdn_fail(err, SDN_EINVAL, "option --budgets: %d is not 'default' or in [1, %d]", budgets[b], SDN_INVARIANT_MAX_ROWS - 1);
        if (budgets[b] == SDN_BENCH_DEFAULT_BUDGET) any_default = 1;
    }
    const char *tasks[64];
    int n_tasks = sdn_dataset_tasks(ds, tasks, 64);
    if (n_tasks > 64) return sdn_fail(err, SDN_EINVAL, "dataset: more than 64 tasks");
    if (n_tasks == 0) return sdn_fail(err, SDN_EINVAL, "dataset: no requests");
    int nm = 1 + o->n_methods * nb; /* runs per request: none first, then method-major */
    bench_run *runs = calloc((size_t)nm, sizeof *runs);
    sdn_result_cell *cells = calloc((size_t)n_tasks * nm, sizeof *cells);
    int32_t **outs = calloc((size_t)nm, sizeof *outs);
    int *n_outs = calloc((size_t)nm, sizeof *n_outs);
    sdn_gen_stats *stats = calloc((size_t)nm, sizeof *stats);
    int *ends = calloc((size_t)nm, sizeof *ends); /* the run ended at an end-of-generation token */
    /* each method's forced-text drafting memory over the requests, as one context keeps it
       across its requests (runtime/api.c) */
    sdn_draft_memo *memos = calloc((size_t)nm, sizeof *memos);
    /* each method's candidate table over the requests (fresh at the start), as a model keeps it
       across its requests (runtime/api.c) */
    sdn_recycle **tables = calloc((size_t)nm, sizeof *tables);
    sdn_cost_fix *fixes = calloc((size_t)nm, sizeof *fixes); /* each run's live verify cost, as a context keeps it */
    sdn_draft_calib *calibs = calloc((size_t)nm, sizeof *calibs); /* and its score calibration */
    if (!runs || !cells || !outs || !n_outs || !stats || !ends || !memos || !tables || !fixes || !calibs) {
        free(runs); free(cells); free(outs); free(n_outs); free(stats); free(ends); free(memos); free(tables); free(fixes); free(calibs);
        return sdn_fail(err, SDN_ENOMEM, "out of memory");
    }
    int K = 0; /* prefill predictions of the request's first run: when any method uses them */
    for (int i = 0; i < o->n_methods; i++)
        for (int b = 0; b < nb; b++) {
            runs[1 + i * nb + b] = (bench_run){o->methods[i], budgets[b]};
            if (sdn_method_uses_prefill_preds(o->methods[i])) K = o->preds_k > 0 ? o->preds_k : 8;
        }
    for (int t = 0; t < n_tasks; t++)
        for (int k = 0; k < nm; k++) {
            sdn_result_cell *cell = &cells[t * nm + k];
            snprintf(cell->task, sizeof cell->task, "%s", tasks[t]);
            snprintf(cell->method, sizeof cell->method, "%s", k ? runs[k].method : "none");
            if (k && runs[k].budget == SDN_BENCH_DEFAULT_BUDGET) snprintf(cell->budget, sizeof cell->budget, "default");
            else if (k) snprintf(cell->budget, sizeof cell->budget, "%d", runs[k].budget);
        }
    char fp[17];
    snprintf(fp, sizeof fp, "%016llx", (unsigned long long)sdn_model_fingerprint(m));
    memcpy(out->model_fp, fp, sizeof fp);
    sdn_ctx *c = NULL;
    sdn_gs *gs = NULL;
    sdn_gen_params gtmpl;
    sdn_preds preds = {0};
    int rc = ctx_for(m, o, &c, &gs, &gtmpl, err);
    if (rc) goto done;
    /* the default budget: the graph runtime's fixed size, else the verify-cost curve */
    if (any_default && !gs) {
        if ((rc = sdn_verify_curve(m, o->threads > 0 ? o->threads : 2, &out->curve, log, err))) goto done;
        out->have_curve = 1;
    }
    const int reuse = !o->fresh_prefill && !gs; /* a prefill hook needs the whole prompt */
    const sdn_tokenizer *tok = sdn_model_tokenizer(m);
    long budget = o->history_budget > 0 ? o->history_budget : 4096;
    for (int i = 0; i < ds->n; i++) {
        const sdn_task_row *row = &ds->rows[i];
        int t = 0;
        while (t < n_tasks && strcmp(tasks[t], row->task) != 0) t++;
        int32_t *prompt = NULL;
        int n_prompt = 0;
        if ((rc = sdn_task_tokens(m, row, o->chat_template, o->use_input, &prompt, &n_prompt, err))) goto done;
        if (n_prompt + MIN_ROOM > sdn_ctx_n_ctx(c)) {
            fprintf(log, "bench: %s (%s) skipped: its prompt of %d tokens does not fit the context of %d with room to generate\n", row->id,
                    row->task, n_prompt, sdn_ctx_n_ctx(c));
            out->skipped++;
            free(prompt);
            if (o->progress) o->progress(o->ud, i + 1, ds->n, row->id);
            continue;
        }
        uint8_t *hist = NULL;
        size_t hist_len = 0;
        if (o->history && (rc = sdn_history_automaton(o->history, row->group, fp, o->history_scope, budget, &hist, &hist_len, NULL, NULL, NULL, err))) {
            free(prompt);
            goto done;
        }
        sdn_preds_free(&preds);
        int first_prefill = -1; /* the run that prefilled the request's prompt */
        for (int j = 0; j < nm && !rc; j++) {
            int k = (j + i) % nm; /* rotate the order */
            const char *method = k ? runs[k].method : "none";
            sdn_method_config mc;
            if (o->mcfg) mc = *o->mcfg;
            else sdn_method_defaults(&mc);
            mc.hist_bytes = hist;
            mc.hist_bytes_len = hist_len;
            if (k && sdn_method_uses_model_table(method, &mc)) {
                if (!tables[k] && (rc = sdn_recycle_new(sdn_model_cfg(m)->vocab, SDN_RECYCLE_DEFAULT_K, &tables[k], err))) break;
                mc.recycle = tables[k];
            }
            sdn_drafter d = {0};
            if ((rc = sdn_method_create(method, &mc, &d, err))) break;
            int uses_preds = k && sdn_method_uses_prefill_preds(method);
            sdn_gen_params gp = {.max_tokens = o->max_tokens > 0 ? o->max_tokens : 128, .drafter = d.ops ? &d : NULL,
                                 .prefill = gtmpl.prefill, .prefill_ud = gtmpl.prefill_ud, .decode_rows = gtmpl.decode_rows,
                                 .row_topk = mc.recycle && d.ops ? sdn_recycle_k(mc.recycle) : 0,
                                 .score_budget = d.ops && sdn_method_scores_paths(method, &mc), .cost_fix = o->curve_only ? NULL : &fixes[k], .calib = &calibs[k]};
            if (k && runs[k].budget != SDN_BENCH_DEFAULT_BUDGET) { /* fixed caps */
                int n = runs[k].budget;
                int depth = o->n_budgets > 0 || o->caps.max_depth <= 0 || o->caps.max_depth > n ? n : o->caps.max_depth;
                gp.caps = (sdn_draft_caps){.max_nodes = n, .max_depth = depth, .max_branch = o->caps.max_branch};
            } else if (k) { /* the engine's default: as `sdnpu run` (runtime/api.c) */
                gp.caps = (sdn_draft_caps){.max_nodes = 0, .max_depth = o->caps.max_depth, .max_branch = o->caps.max_branch};
                if (gs) gp.caps.max_nodes = gtmpl.caps.max_nodes;
                else gp.vcurve = &out->curve;
            }
            if (j == 0 || !reuse) { /* the request's prefill */
                gp.pcache = o->pcache;
                gp.prefill_topk = reuse || uses_preds ? K : 0;
                if (reuse && K) gp.preds_out = &preds;
            } else { /* after the first run's KV entries (and predictions) */
                gp.reuse_kv = 1;
                gp.prefill_topk = uses_preds ? K : 0;
                if (uses_preds) gp.reuse_preds = &preds;
            }
            if (o->progress) { /* the bar stays at the requests done; the note names the run */
                char note[160];
                snprintf(note, sizeof note, "%s: run %d/%d %s%s%s", row->id, j + 1, nm, method, k ? "@" : "", k ? cells[t * nm + k].budget : "");
                o->progress(o->ud, i, ds->n, note);
            }
            eog_state es = {tok, -1};
            free(outs[k]);
            outs[k] = NULL;
            if (gs && (rc = sdn_gs_prepare(gs, err))) break; /* back to the run's initial layouts, untimed */
            reset_peak_rss();
            gp.eog = eog_fn, gp.eog_ud = &es;
            if (o->grammar) {
                gp.grammar = o->grammar, gp.gvocab = o->gvocab, gp.tok = tok;
                gp.forced_draft = mc.forced;
                gp.exit_draft = mc.forced && mc.exits;
                gp.memo = &memos[k];
            }
            sdn_gen_result gr;
            rc = sdn_generate(c, prompt, n_prompt, &gp, &gr, err);
            outs[k] = gr.tokens, n_outs[k] = gr.n_tokens, stats[k] = gr.stats, ends[k] = gr.stop == SDN_GEN_EOG;
            sdn_drafter_destroy(&d);
            if (rc) sdn_fail(err, rc, "%s with method %s", row->id, method);
            else if (stats[k].n_reused < n_prompt - 1 || j == 0) {
                out->prefills++;
                if (j == 0) first_prefill = k;
                else if (reuse) /* should not happen: the run could not reuse the first run's entries */
                    fprintf(log, "bench: %s with %s: %d of %d prompt positions reused, the rest prefilled again\n", row->id, method,
                            stats[k].n_reused, n_prompt - 1);
            }
        }
        free(hist);
        if (rc) { free(prompt); goto done; }
        for (int k = 0; k < nm; k++) {
            sdn_result_cell *cell = &cells[t * nm + k];
            /* the prefill: with KV reuse the request's one prefill goes to the plain cell, a run's
               own prefill (no reuse, or one that could not reuse) to its cell */
            int own_prefill = !reuse || (k != first_prefill && stats[k].n_reused < n_prompt - 1);
            add_stats(cell, &stats[k], own_prefill);
            cell->complete += ends[k];
            if (reuse && k == 0) cell->t_prefill += stats[first_prefill].t_prefill;
            cell->plain_t_decode += stats[0].t_decode;
            cell->plain_out_tokens += stats[0].n_gen;
            if (k && (n_outs[k] != n_outs[0] || (n_outs[0] && memcmp(outs[k], outs[0], (size_t)n_outs[0] * sizeof(int32_t))))) {
                int at = 0;
                while (at < n_outs[k] && at < n_outs[0] && outs[k][at] == outs[0][at]) at++;
                fprintf(log, "bench: MISMATCH: %s with %s (budget %s): greedy output differs from plain decoding at token %d (%d vs %d tokens) - this is a bug\n",
                        row->id, runs[k].method, cell->budget, at, n_outs[k], n_outs[0]);
                cell->mismatches++;
                out->mismatches++;
            }
        }
        out->n_requests++;
        if (o->answers && (rc = write_answer(o->answers, row, tok, outs[0], n_outs[0], ends[0], err))) { free(prompt); goto done; }
        if (o->history) {
            char *text = NULL;
            if (tok) sdn_detokenize(tok, outs[0], n_outs[0], &text, NULL);
            rc = sdn_history_add(o->history, row->group, fp, outs[0], n_outs[0], text, 0, NULL, err);
            free(text);
            if (rc) { free(prompt); goto done; }
        }
        free(prompt);
        if (o->progress) o->progress(o->ud, i + 1, ds->n, row->id);
    }
done:
    sdn_preds_free(&preds);
    sdn_ctx_free(c);
    sdn_gs_free(gs);
    for (int k = 0; k < nm; k++) free(outs[k]);
    free(outs);
    free(n_outs);
    free(stats);
    free(ends);
    free(memos);
    for (int k = 0; k < nm; k++) sdn_recycle_free(tables[k]);
    free(tables);
    free(fixes);
    free(calibs);
    free(runs);
    if (rc) {
        free(cells);
        return rc;
    }
    /* drop the cells of tasks whose rows were all skipped */
    int w = 0;
    for (int i = 0; i < n_tasks * nm; i++)
        if (cells[i].c.requests > 0) cells[w++] = cells[i];
    out->cells = cells;
    out->n_cells = w;
    return SDN_OK;
}

int sdn_trace_record(sdn_model *m, const char *model_name, const char *tokenizer_name, const sdn_dataset *ds, const sdn_bench_opts *o,
                     FILE *out, int *written, int *skipped, sdn_err *err) {
    FILE *log = o->log ? o->log : stderr;
    if (written) *written = 0;
    if (skipped) *skipped = 0;
    sdn_ctx *c = NULL;
    sdn_bench_opts plain = *o; /* traces record plain decoding: no graph scheduling */
    plain.graphs = NULL;
    sdn_gen_params unused;
    sdn_gs *no_gs = NULL;
    int rc = ctx_for(m, &plain, &c, &no_gs, &unused, err);
    if (rc) return rc;
    const sdn_tokenizer *tok = sdn_model_tokenizer(m);
    char fp[17];
    snprintf(fp, sizeof fp, "%016llx", (unsigned long long)sdn_model_fingerprint(m));
    for (int i = 0; i < ds->n && !rc; i++) {
        const sdn_task_row *row = &ds->rows[i];
        int32_t *prompt = NULL, *gen = NULL;
        int n_prompt = 0, n_gen = 0;
        if ((rc = sdn_task_tokens(m, row, o->chat_template, o->use_input, &prompt, &n_prompt, err))) break;
        if (n_prompt + MIN_ROOM > sdn_ctx_n_ctx(c)) {
            fprintf(log, "trace: %s (%s) skipped: its prompt of %d tokens does not fit the context of %d with room to generate\n", row->id,
                    row->task, n_prompt, sdn_ctx_n_ctx(c));
            if (skipped) (*skipped)++;
            free(prompt);
            if (o->progress) o->progress(o->ud, i + 1, ds->n, row->id);
            continue;
        }
        int max_tokens = o->max_tokens > 0 ? o->max_tokens : 128;
        int max_new = max_tokens < sdn_ctx_n_ctx(c) - n_prompt ? max_tokens : sdn_ctx_n_ctx(c) - n_prompt;
        sdn_preds preds = {0};
        sdn_gen_params gp = {.max_tokens = max_tokens, .prefill_topk = o->preds_k > 0 ? o->preds_k : 0, .preds_out = &preds};
        /* with predictions, also the model's top-k at every output position (the replay of the
         * model-derived candidates; at most SDN_RECYCLE_MAX_K, the table's width) */
        int32_t *out_preds = NULL;
        const int ok_k = o->preds_k < SDN_RECYCLE_MAX_K ? o->preds_k : SDN_RECYCLE_MAX_K;
        if (o->preds_k > 0) {
            if (!(out_preds = malloc((size_t)max_tokens * (size_t)ok_k * sizeof *out_preds))) {
                free(prompt);
                rc = sdn_fail(err, SDN_ENOMEM, "out of memory (output predictions)");
                break;
            }
            gp.out_topk = ok_k;
            gp.out_topk_tok = out_preds;
        }
        eog_state es = {tok, -1};
        sdn_gen_stats st;
        gp.eog = eog_fn, gp.eog_ud = &es;
        rc = sdn_generate_tokens(c, prompt, n_prompt, &gp, &gen, &n_gen, &st, err);
        if (!rc) {
            sdn_trace_row tr = {0};
            tr.id = row->id;
            tr.task = row->task;
            tr.group = row->group;
            tr.model = (char *)model_name;
            tr.model_fp = fp;
            tr.tokenizer = (char *)tokenizer_name;
            tr.vocab_size = sdn_model_cfg(m)->vocab;
            tr.ctx = prompt;
            tr.n_ctx = n_prompt;
            tr.out = gen;
            tr.n_out = n_gen;
            tr.stop = es.hit >= 0 ? SDN_STOP_EOG : SDN_STOP_LENGTH;
            tr.eog_token = es.hit;
            tr.max_new = max_new;
            if (preds.k > 0 && preds.n_pos == n_prompt - 1) {
                tr.preds_k = preds.k;
                tr.pred_tok = preds.tok;
                tr.pred_prob = preds.prob;
                if (out_preds && preds.k <= ok_k) { /* the rows as wide as the prefill's (which may have fewer: a context
                                                       of fewer distinct tokens) */
                    for (int j = 0; j < n_gen; j++) memmove(out_preds + (size_t)j * preds.k, out_preds + (size_t)j * ok_k, (size_t)preds.k * sizeof *out_preds);
                    tr.out_pred_tok = out_preds;
                }
            }
            rc = sdn_trace_write(out, &tr, err);
            if (!rc && written) (*written)++;
        } else {
            sdn_fail(err, rc, "%s", row->id);
        }
        sdn_preds_free(&preds);
        free(out_preds);
        free(prompt);
        free(gen);
        if (o->progress) o->progress(o->ud, i + 1, ds->n, row->id);
    }
    sdn_ctx_free(c);
    return rc;
}
