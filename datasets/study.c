/* study.c - replay of drafting methods against traces, and live measurement of the methods
 * a trace cannot replay (see study.h). The replay loop mirrors engine/session.c's decode
 * loop line by line, with verification replaced by a walk along the recorded output. */
#include "datasets/study.h"

#include "draft/recycle.h"

#include <stdlib.h>
#include <string.h>

#include "common/sdn_util.h"
#include "runtime/history.h"
#include "engine/forward.h"
#include "modelfile/model.h"
#include "tokenizer/tokenizer.h"

void sdn_study_counts_add(sdn_study_counts *s, const sdn_study_counts *c) {
    s->requests += c->requests;
    s->out_tokens += c->out_tokens;
    s->steps += c->steps;
    s->drafted += c->drafted;
    s->accepted += c->accepted;
    for (int i = 0; i < SDN_ACCEPT_HIST; i++) s->accept_hist[i] += c->accept_hist[i];
    for (int i = 0; i < SDN_STUDY_DRAFT_HIST; i++) s->draft_hist[i] += c->draft_hist[i];
    s->t_draft += c->t_draft;
}

double sdn_study_mean_accepted(const sdn_study_counts *c) { return c->steps ? (double)c->out_tokens / (double)c->steps : 0.0; }
double sdn_study_mean_draft(const sdn_study_counts *c) { return c->steps ? (double)c->drafted / (double)c->steps : 0.0; }

void sdn_study_caps(const sdn_draft_caps *in, sdn_draft_caps *out) {
    sdn_draft_caps c = in ? *in : (sdn_draft_caps){0};
    int budget = SDN_INVARIANT_MAX_ROWS - 1;
    if (c.max_nodes <= 0 || c.max_nodes > budget) c.max_nodes = budget;
    if (c.max_depth <= 0) c.max_depth = c.max_nodes;
    if (c.max_branch <= 0) c.max_branch = SDN_DEFAULT_BRANCH;
    *out = c;
}

/* Why a method cannot be replayed on a row (NULL when it can). */
static const char *sdn_study_unreplayable(const char *method, const sdn_trace_row *r) {
    if (sdn_method_reuses_drafts(method))
        return "reuses rejected drafts: needs the model's next token after every rejected draft node, which a trace does not record: "
               "measured live with --model";
    if (sdn_method_needs_model_feedback(method) && r && !r->out_pred_tok)
        return "drafts from the model's top-k at every step, which this trace does not have (record it with `sdnpu trace` and "
               "predictions on, k <= 16): measured live with --model";
    if (sdn_method_uses_prefill_preds(method) && r && r->preds_k <= 0)
        return "needs prefill predictions, which this trace does not have (record traces with `sdnpu trace --topk K`)";
    return NULL;
}

static void record_step(int **steps, int *n, int *cap, int v) {
    if (!steps) return;
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 64;
        int *ns = realloc(*steps, (size_t)nc * sizeof *ns);
        if (!ns) return;
        *steps = ns;
        *cap = nc;
    }
    (*steps)[(*n)++] = v;
}

int sdn_study_replay(const sdn_trace_row *r, const char *method, const sdn_method_config *mcfg, const sdn_draft_caps *caps_in,
                     sdn_study_counts *out, int **steps_out, int *n_steps, sdn_err *err) {
    memset(out, 0, sizeof *out);
    if (steps_out) *steps_out = NULL;
    if (n_steps) *n_steps = 0;
    const char *why = sdn_study_unreplayable(method, r);
    if (why) return sdn_fail(err, SDN_EINVAL, "method %s cannot be replayed on %s: %s", method, r->id, why);
    sdn_method_config defaults;
    if (!mcfg) { sdn_method_defaults(&defaults); mcfg = &defaults; }
    sdn_draft_caps caps;
    sdn_study_caps(caps_in, &caps);

    /* the recorded sequence the "model" emits: the output, then the end-of-generation token */
    int eog_at = r->stop == SDN_STOP_EOG && r->eog_token >= 0 ? r->n_out : -1;
    int n_seq = r->n_out + (eog_at >= 0 ? 1 : 0);
    int32_t *seq = malloc(((size_t)n_seq + 1) * sizeof *seq);
    int32_t *acc = malloc(((size_t)caps.max_nodes + 2) * sizeof *acc);
    if (!seq || !acc) { free(seq); free(acc); return sdn_fail(err, SDN_ENOMEM, "out of memory"); }
    if (r->n_out) memcpy(seq, r->out, (size_t)r->n_out * sizeof *seq);
    if (eog_at >= 0) seq[r->n_out] = r->eog_token;
    /* generation limit: as recorded; a length stop ends exactly at the output's end */
    int max_new = r->max_new > 0 ? r->max_new : (r->stop == SDN_STOP_LENGTH ? r->n_out : n_seq + SDN_INVARIANT_MAX_ROWS);

    /* the model-derived candidates: the recorded output predictions into the table
     * (mcfg->recycle, or a table of this replay's own) */
    sdn_method_config own_cfg = *mcfg;
    sdn_recycle *own_table = NULL;
    int32_t *rows = NULL, *path = NULL;
    const int K = r->preds_k;
    sdn_drafter d = {0};
    sdn_tree tree = {0};
    int rc = SDN_OK, scap = 0;
    if (sdn_method_uses_model_table(method, mcfg) && r->out_pred_tok) {
        if (!own_cfg.recycle) {
            if ((rc = sdn_recycle_new(sdn_trace_vocab(r), SDN_RECYCLE_DEFAULT_K, &own_table, err))) goto done;
            own_cfg.recycle = own_table;
        }
        rows = malloc(((size_t)caps.max_nodes + 1) * (size_t)K * sizeof *rows);
        path = malloc(((size_t)caps.max_nodes + 1) * sizeof *path);
        if (!rows || !path) { rc = sdn_fail(err, SDN_ENOMEM, "out of memory"); goto done; }
        mcfg = &own_cfg;
    }
    if ((rc = sdn_method_create(method, mcfg, &d, err))) goto done;
    if ((rc = sdn_tree_init(&tree, caps.max_nodes, err))) goto done;
    sdn_prefill_preds view = {r->n_ctx - 1, r->preds_k, r->pred_tok, r->pred_prob};
    const sdn_prefill_preds *pv = r->preds_k > 0 && sdn_method_uses_prefill_preds(method) ? &view : NULL;
    double t0 = sdn_now();
    if (d.ops && (rc = sdn_drafter_begin(&d, r->ctx, r->n_ctx, pv, err))) goto done;
    out->t_draft += sdn_now() - t0;

    int n_gen = 0, pos = 0, stop = 0;
    while (n_gen < max_new && !stop && pos < n_seq) {
        double ta = sdn_now();
        sdn_tree_clear(&tree);
        sdn_draft_caps sc = caps;
        int room = max_new - n_gen - 1;
        if (sc.max_nodes > room) sc.max_nodes = room;
        if (d.ops && sc.max_nodes > 0 && (rc = sdn_drafter_propose(&d, &tree, &sc, err))) goto done;
        out->t_draft += sdn_now() - ta;
        /* verification against the recording: follow matching children */
        int node = -1, n_acc = 0;
        while (pos + n_acc < n_seq) {
            int c = sdn_tree_find_child(&tree, node, seq[pos + n_acc]);
            if (c < 0) break;
            acc[n_acc] = seq[pos + n_acc];
            if (rows) path[n_acc] = c;
            n_acc++;
            node = c;
        }
        int have_bonus = pos + n_acc < n_seq;
        if (have_bonus) acc[n_acc] = seq[pos + n_acc];
        out->steps++;
        out->drafted += tree.n;
        out->accepted += n_acc;
        out->accept_hist[n_acc < SDN_ACCEPT_HIST ? n_acc : SDN_ACCEPT_HIST - 1]++;
        out->draft_hist[tree.n < SDN_STUDY_DRAFT_HIST ? tree.n : SDN_STUDY_DRAFT_HIST - 1]++;
        record_step(steps_out, n_steps, &scap, n_acc);
        /* commit */
        int n_new = n_acc + (have_bonus ? 1 : 0);
        for (int i = 0; i < n_new && n_gen < max_new; i++) {
            if (pos + i == eog_at) { stop = 1; break; }
            n_gen++;
        }
        pos += n_new;
        if (!have_bonus) stop = 1; /* the recording ends inside the accepted path */
        if (d.ops && !stop && n_gen < max_new) {
            double tf = sdn_now();
            sdn_draft_feedback fb = {.accepted = acc, .n_accepted = n_acc + 1, .tree = &tree, .node_argmax = NULL, .root_argmax = -1};
            if (rows) { /* the rows the recording knows: the root's and the accepted nodes' (the
                           predictions at output positions pos .. pos + n_acc); rejected nodes'
                           rows are unknown (-1: the table skips them) */
                for (size_t q = 0; q < (size_t)(tree.n + 1) * (size_t)K; q++) rows[q] = -1;
                for (int dd = 0; dd <= n_acc; dd++) {
                    const int j = pos - n_new + dd, row = dd == 0 ? 0 : path[dd - 1] + 1;
                    if (j < r->n_out) memcpy(rows + (size_t)row * K, r->out_pred_tok + (size_t)j * K, (size_t)K * sizeof *rows);
                }
                fb.row_topk = rows;
                fb.topk = K;
            }
            if ((rc = sdn_drafter_feedback(&d, &fb, err))) goto done;
            out->t_draft += sdn_now() - tf;
        }
    }
    out->requests = 1;
    out->out_tokens = n_gen;
done:
    if (rc) sdn_fail(err, rc, "replay of %s on %s", method, r->id);
    if (rc && steps_out) { free(*steps_out); *steps_out = NULL; *n_steps = 0; }
    sdn_drafter_destroy(&d);
    sdn_tree_free(&tree);
    sdn_recycle_free(own_table);
    free(rows);
    free(path);
    free(seq);
    free(acc);
    return rc;
}

/* ---- live measurement ----------------------------------------------------------------- */

/* A drafter wrapper that records the accepted draft tokens of every step that got feedback. */
typedef struct rec_drafter {
    sdn_drafter *inner;
    int *steps, n, cap;
    long proposals;
    long draft_hist[SDN_STUDY_DRAFT_HIST];
} rec_drafter;

static int rec_begin(sdn_drafter *d, const int32_t *ctx, int n, const sdn_prefill_preds *p, sdn_err *e) {
    rec_drafter *r = d->impl;
    return sdn_drafter_begin(r->inner, ctx, n, p, e);
}
static int rec_propose(sdn_drafter *d, sdn_tree *t, const sdn_draft_caps *c, sdn_err *e) {
    rec_drafter *r = d->impl;
    int rc = sdn_drafter_propose(r->inner, t, c, e);
    if (!rc) {
        r->proposals++;
        r->draft_hist[t->n < SDN_STUDY_DRAFT_HIST ? t->n : SDN_STUDY_DRAFT_HIST - 1]++;
    }
    return rc;
}
static int rec_feedback(sdn_drafter *d, const sdn_draft_feedback *fb, sdn_err *e) {
    rec_drafter *r = d->impl;
    record_step(&r->steps, &r->n, &r->cap, fb->n_accepted - 1);
    return sdn_drafter_feedback(r->inner, fb, e);
}
static void rec_destroy(sdn_drafter *d) { (void)d; }
static const sdn_drafter_ops k_rec_ops = {"record", rec_begin, rec_propose, rec_feedback, rec_destroy, NULL};

static int live_eog(void *ud, int32_t tok) {
    const sdn_tokenizer *t = ud;
    return t && (sdn_tokenizer_is_eog(t, tok) || tok == sdn_tokenizer_bos(t));
}

int sdn_study_live(sdn_ctx *c, const sdn_trace_row *r, const char *method, const sdn_method_config *mcfg, const sdn_draft_caps *caps_in,
                   int preds_k, sdn_study_counts *out, int *same, int **steps_out, int *n_steps, sdn_err *err) {
    memset(out, 0, sizeof *out);
    if (steps_out) *steps_out = NULL;
    if (n_steps) *n_steps = 0;
    if (same) *same = 0;
    sdn_method_config defaults;
    if (!mcfg) { sdn_method_defaults(&defaults); mcfg = &defaults; }
    sdn_draft_caps caps;
    sdn_study_caps(caps_in, &caps);
    const sdn_model *m = sdn_ctx_model(c);
    int vocab = sdn_model_cfg(m)->vocab;
    for (int i = 0; i < r->n_ctx; i++)
        if (r->ctx[i] >= vocab) return sdn_fail(err, SDN_EINVAL, "%s: context token %d (%d) is outside the model's vocabulary of %d", r->id, i, r->ctx[i], vocab);
    /* the model-derived candidates: mcfg->recycle, or a fresh table of this run's own (each
     * request of a study starts from nothing, so a study's figures do not depend on the order
     * or the split of its requests) */
    sdn_method_config own_cfg = *mcfg;
    sdn_recycle *own_table = NULL;
    if (sdn_method_uses_model_table(method, mcfg) && !mcfg->recycle) {
        int rc0 = sdn_recycle_new(vocab, SDN_RECYCLE_DEFAULT_K, &own_table, err);
        if (rc0) return rc0;
        own_cfg.recycle = own_table;
        mcfg = &own_cfg;
    }
    sdn_drafter inner = {0};
    int rc = sdn_method_create(method, mcfg, &inner, err);
    if (rc) { sdn_recycle_free(own_table); return rc; }
    rec_drafter rec = {.inner = &inner};
    sdn_drafter wrap = {&k_rec_ops, &rec};
    int max_new = r->max_new > 0 ? r->max_new : r->n_out + 1;
    sdn_gen_params gp = {.max_tokens = max_new, .drafter = inner.ops ? &wrap : NULL, .caps = caps,
                         .prefill_topk = sdn_method_uses_prefill_preds(method) ? (preds_k > 0 ? preds_k : 8) : 0};
    /* the model-derived candidates learn from every verified row */
    if (inner.ops && mcfg->recycle && sdn_method_uses_model_table(method, mcfg)) gp.row_topk = sdn_recycle_k(mcfg->recycle);
    int32_t *gen = NULL;
    int n_gen = 0;
    sdn_gen_stats st;
    gp.eog = live_eog, gp.eog_ud = sdn_model_tokenizer(m);
    rc = sdn_generate_tokens(c, r->ctx, r->n_ctx, &gp, &gen, &n_gen, &st, err);
    if (!rc) {
        out->requests = 1;
        out->out_tokens = st.n_gen;
        out->steps = st.steps;
        out->drafted = st.drafted;
        out->accepted = st.accepted;
        for (int i = 0; i < SDN_ACCEPT_HIST; i++) out->accept_hist[i] = st.accept_hist[i];
        out->t_draft = st.t_draft;
        /* steps without a proposal (no room left) had an empty draft */
        for (int i = 0; i < SDN_STUDY_DRAFT_HIST; i++) out->draft_hist[i] = rec.draft_hist[i];
        if (inner.ops) out->draft_hist[0] += st.steps - rec.proposals;
        else out->draft_hist[0] = st.steps;
        if (same) *same = n_gen == r->n_out && (n_gen == 0 || !memcmp(gen, r->out, (size_t)n_gen * sizeof *gen));
        if (steps_out && st.steps > 0) {
            /* the last step gets no feedback: its count is the histogram's remainder */
            long rest[SDN_ACCEPT_HIST];
            for (int i = 0; i < SDN_ACCEPT_HIST; i++) rest[i] = st.accept_hist[i];
            for (int i = 0; i < rec.n; i++) rest[rec.steps[i] < SDN_ACCEPT_HIST ? rec.steps[i] : SDN_ACCEPT_HIST - 1]--;
            for (int i = 0; i < SDN_ACCEPT_HIST; i++)
                if (rest[i] > 0) { record_step(&rec.steps, &rec.n, &rec.cap, i); break; }
            *steps_out = rec.steps;
            *n_steps = rec.n;
            rec.steps = NULL;
        }
    }
    free(rec.steps);
    free(gen);
    sdn_drafter_destroy(&inner);
    sdn_recycle_free(own_table);
    return rc;
}

/* ---- a whole study ---------------------------------------------------------------------- */

int sdn_study_run(const sdn_trace *t, const sdn_study_opts *o, sdn_result_cell **cells_out, int *n_out, sdn_err *err) {
    *cells_out = NULL;
    *n_out = 0;
    FILE *log = o->log ? o->log : stderr;
    int nm = o->n_methods;
    if (nm < 1) return sdn_fail(err, SDN_EINVAL, "study: no methods");
    for (int k = 0; k < nm; k++) {
        sdn_drafter probe = {0};
        sdn_method_config mc;
        sdn_method_defaults(&mc);
        int rc = sdn_method_create(o->methods[k], o->mcfg ? o->mcfg : &mc, &probe, err);
        sdn_drafter_destroy(&probe);
        if (rc) return sdn_fail(err, rc, "option --methods");
    }
    if (o->live_all && !o->live_ctx) return sdn_fail(err, SDN_EINVAL, "study: live measurement needs a model (--model)");
    /* tasks in first-appearance order */
    const char **tasks = malloc(((size_t)t->n + 1) * sizeof *tasks);
    int n_tasks = 0;
    for (int i = 0; tasks && i < t->n; i++) {
        int seen = 0;
        for (int j = 0; j < n_tasks && !seen; j++) seen = !strcmp(tasks[j], t->rows[i].task);
        if (!seen) tasks[n_tasks++] = t->rows[i].task;
    }
    int with_all = n_tasks > 1;
    int n_cells = (n_tasks + with_all) * nm;
    sdn_result_cell *cells = calloc((size_t)n_cells, sizeof *cells);
    if (!tasks || !cells) { free(tasks); free(cells); return sdn_fail(err, SDN_ENOMEM, "out of memory"); }
    for (int ti = 0; ti < n_tasks + with_all; ti++)
        for (int k = 0; k < nm; k++) {
            snprintf(cells[ti * nm + k].task, sizeof cells->task, "%s", ti < n_tasks ? tasks[ti] : "all");
            snprintf(cells[ti * nm + k].method, sizeof cells->method, "%s", o->methods[k]);
        }
    sdn_history *hist = NULL;
    int rc = SDN_OK, warned_fp = 0;
    if (o->history && (rc = sdn_history_open(":memory:", &hist, err))) goto done;
    char live_fp[17] = "";
    if (o->live_ctx) snprintf(live_fp, sizeof live_fp, "%016llx", (unsigned long long)sdn_model_fingerprint(sdn_ctx_model(o->live_ctx)));
    for (int i = 0; i < t->n && !rc; i++) {
        const sdn_trace_row *r = &t->rows[i];
        int ti = 0;
        while (strcmp(tasks[ti], r->task) != 0) ti++;
        sdn_method_config mc;
        if (o->mcfg) mc = *o->mcfg;
        else sdn_method_defaults(&mc);
        uint8_t *hb = NULL;
        size_t hl = 0;
        const char *group = r->group ? r->group : r->task;
        if (hist) {
            if ((rc = sdn_history_automaton(hist, group, r->model_fp, SDN_HISTORY_GROUP, o->history_budget > 0 ? o->history_budget : 4096, &hb, &hl, NULL, NULL,
                                            NULL, err)))
                break;
            mc.hist = NULL, mc.hist_len = NULL, mc.n_hist = 0;
            mc.hist_bytes = hb;
            mc.hist_bytes_len = hl;
        }
        for (int k = 0; k < nm && !rc; k++) {
            const char *method = o->methods[k];
            sdn_result_cell *cell = &cells[ti * nm + k];
            const char *why = sdn_study_unreplayable(method, r);
            /* methods that learn from the model are measured live when a model is given (a
             * replay of the model's candidates is approximate: study.h) */
            const int feedback = sdn_method_needs_model_feedback(method);
            int live = o->live_all || (feedback && (why || o->live_ctx));
            sdn_study_counts c;
            if (live && o->live_ctx) {
                if (!warned_fp && r->model_fp && strcmp(r->model_fp, live_fp) != 0) {
                    fprintf(log, "study: warning: the trace was recorded with model %s but --model is %s: live outputs will differ from the "
                                 "recorded ones\n", r->model_fp, live_fp);
                    warned_fp = 1;
                }
                int same = 0;
                if ((rc = sdn_study_live(o->live_ctx, r, method, &mc, &o->caps, r->preds_k, &c, &same, NULL, NULL, err))) break;
                cell->live = 1;
                if (!same) cell->mismatches++;
            } else if (why) {
                cell->skipped++;
                snprintf(cell->note, sizeof cell->note, "%s", live ? "not replayable from a trace; give --model to measure it live" : why);
                continue;
            } else {
                if ((rc = sdn_study_replay(r, method, &mc, &o->caps, &c, NULL, NULL, err))) break;
                if (feedback)
                    snprintf(cell->note, sizeof cell->note, "approximate: replayed from the output predictions (the model's top-k at "
                                                            "rejected draft nodes is not recorded)");
            }
            sdn_study_counts_add(&cell->c, &c);
            cell->prompt_tokens += r->n_ctx;
        }
        free(hb);
        if (!rc && hist && (rc = sdn_history_add(hist, group, r->model_fp, r->out, r->n_out, NULL, 0, NULL, err))) break;
        if (o->progress) o->progress(o->ud, i + 1, t->n, r->id);
    }
    if (rc) goto done;
    /* the "all" rows */
    for (int k = 0; with_all && k < nm; k++) {
        sdn_result_cell *all = &cells[n_tasks * nm + k];
        for (int ti = 0; ti < n_tasks; ti++) {
            const sdn_result_cell *c = &cells[ti * nm + k];
            sdn_study_counts_add(&all->c, &c->c);
            all->prompt_tokens += c->prompt_tokens;
            all->skipped += c->skipped;
            all->mismatches += c->mismatches;
            all->live |= c->live;
            if (!all->note[0] && c->note[0]) memcpy(all->note, c->note, sizeof all->note);
        }
    }
done:
    sdn_history_close(hist);
    free(tasks);
    if (rc) { free(cells); return rc; }
    *cells_out = cells;
    *n_out = n_cells;
    return SDN_OK;
}
