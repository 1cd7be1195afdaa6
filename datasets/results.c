/* results.c - writing result cells as CSV, JSON, SQLite rows and hand-written SVG charts
 * (see results.h). The charts use "nice" axis ticks (1, 2, 5 x 10^k) and a fixed palette. */
#include "datasets/results.h"

#include "common/sdn_util.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/sdn_db.h"
#include "common/jsonl.h"

double sdn_cell_ms_per_token(const sdn_result_cell *c) { return c->c.out_tokens > 0 && c->t_decode > 0 ? 1000.0 * c->t_decode / c->c.out_tokens : 0; }
static double sdn_cell_plain_ms_per_token(const sdn_result_cell *c) {
    return c->plain_out_tokens > 0 && c->plain_t_decode > 0 ? 1000.0 * c->plain_t_decode / c->plain_out_tokens : 0;
}
double sdn_cell_speedup(const sdn_result_cell *c) {
    double a = sdn_cell_plain_ms_per_token(c), b = sdn_cell_ms_per_token(c);
    return a > 0 && b > 0 ? a / b : 0;
}

/* "hostname, CPU model, N cores" into buf. */
static void sdn_machine_name(char *buf, size_t cap) {
    char host[128] = "?", cpu[160];
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    sdn_cpu_model(cpu, sizeof cpu);
    snprintf(buf, cap, "%s, %s, %ld cores", host, cpu, sysconf(_SC_NPROCESSORS_ONLN));
}

static void hist_text(const sdn_study_counts *c, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < SDN_ACCEPT_HIST && n + 16 < cap; i++)
        if (c->accept_hist[i]) n += (size_t)snprintf(buf + n, cap - n, "%s%d:%ld", n ? ";" : "", i, c->accept_hist[i]);
}

static void utc_now(char *buf, size_t cap) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void csv_field(FILE *f, const char *s) {
    s = s ? s : "";
    if (!strpbrk(s, ",\"\n\r")) { fputs(s, f); return; }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* A measured figure, or NULL-like (v <= 0: not measured). */
static void json_measured(cJSON *o, const char *name, double v) {
    if (v > 0) cJSON_AddNumberToObject(o, name, v);
    else cJSON_AddNullToObject(o, name);
}

static void csv_measured(FILE *f, const char *fmt, double v) {
    fputc(',', f);
    if (v > 0) fprintf(f, fmt, v);
}

static void db_measured(sqlite3_stmt *st, int col, double v) {
    if (v > 0) sqlite3_bind_double(st, col, v);
    else sqlite3_bind_null(st, col);
}

static cJSON *json_strings(const char *const *v, int n, const char *fallback) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(v[i] ? v[i] : ""));
    if (n == 0 && fallback) cJSON_AddItemToArray(a, cJSON_CreateString(fallback));
    return a;
}

/* The strings joined by "; " (or `one` when there is no list), malloc'd. */
static char *joined(const char *const *v, int n, const char *one) {
    if (n <= 0) return strdup(one ? one : "");
    size_t len = 1;
    for (int i = 0; i < n; i++) len += strlen(v[i] ? v[i] : "") + 2;
    char *s = malloc(len);
    if (!s) return NULL;
    s[0] = 0;
    for (int i = 0; i < n; i++) {
        if (i) strcat(s, "; ");
        strcat(s, v[i] ? v[i] : "");
    }
    return s;
}

int sdn_results_csv(const char *path, const sdn_run_meta *m, const sdn_result_cell *cells, int n, sdn_err *err) {
    FILE *f = fopen(path, "w");
    if (!f) return sdn_fail(err, SDN_EIO, "%s: cannot write", path);
    fputs("kind,model,model_fp,threads,task,method,budget,requests,prompt_tokens,output_tokens,steps,mean_accepted,draft_per_step,"
          "accepted_draft_tokens,ms_per_token,plain_ms_per_token,speedup,prefill_ms,decode_ms,draft_ms,verify_ms,peak_rss_mib,mismatches,"
          "live,accept_hist,inputs,params,command\n",
          f);
    char *models = joined(m->models, m->n_models, m->model), *fps = joined(m->model_fps, m->n_models, m->model_fp),
         *inputs = joined(m->inputs, m->n_inputs, m->dataset), *params = joined(m->params, m->n_params, "");
    if (!models || !fps || !inputs || !params) {
        free(models), free(fps), free(inputs), free(params);
        fclose(f);
        return sdn_fail(err, SDN_ENOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        const sdn_result_cell *c = &cells[i];
        char hist[2048];
        hist_text(&c->c, hist, sizeof hist);
        csv_field(f, m->kind);
        fputc(',', f);
        csv_field(f, models);
        fputc(',', f);
        csv_field(f, fps);
        fprintf(f, ",%d,", m->threads);
        csv_field(f, c->task);
        fputc(',', f);
        csv_field(f, c->method);
        fputc(',', f);
        csv_field(f, c->budget);
        fprintf(f, ",%ld,%ld,%ld,%ld,%.4f,%.3f,%ld", c->c.requests, c->prompt_tokens, c->c.out_tokens, c->c.steps,
                sdn_study_mean_accepted(&c->c), sdn_study_mean_draft(&c->c), c->c.accepted);
        csv_measured(f, "%.4f", sdn_cell_ms_per_token(c));
        csv_measured(f, "%.4f", sdn_cell_plain_ms_per_token(c));
        csv_measured(f, "%.4f", sdn_cell_speedup(c));
        csv_measured(f, "%.2f", 1000 * c->t_prefill);
        csv_measured(f, "%.2f", 1000 * c->t_decode);
        fprintf(f, ",%.2f", 1000 * c->c.t_draft);
        csv_measured(f, "%.2f", 1000 * c->t_verify);
        csv_measured(f, "%.2f", (double)c->peak_rss / (1 << 20));
        fprintf(f, ",%d,%d,%s,", c->mismatches, c->live, hist);
        csv_field(f, inputs);
        fputc(',', f);
        csv_field(f, params);
        fputc(',', f);
        csv_field(f, m->command ? m->command : "");
        fputc('\n', f);
    }
    free(models), free(fps), free(inputs), free(params);
    int bad = ferror(f);
    if (fclose(f) || bad) return sdn_fail(err, SDN_EIO, "%s: write error", path);
    return SDN_OK;
}

int sdn_results_json(const char *path, const sdn_run_meta *m, const sdn_result_cell *cells, int n, sdn_err *err) {
    cJSON *j = cJSON_CreateObject();
    char machine[400], when[32];
    sdn_machine_name(machine, sizeof machine);
    utc_now(when, sizeof when);
    cJSON_AddStringToObject(j, "format", "sdnpu-results");
    cJSON_AddNumberToObject(j, "version", 1);
    cJSON_AddStringToObject(j, "kind", m->kind ? m->kind : "");
    cJSON_AddStringToObject(j, "started", when);
    cJSON_AddStringToObject(j, "machine", machine);
    cJSON_AddStringToObject(j, "model", m->model ? m->model : "");
    cJSON_AddStringToObject(j, "model_fingerprint", m->model_fp ? m->model_fp : "");
    cJSON_AddStringToObject(j, "dataset", m->dataset ? m->dataset : "");
    cJSON_AddStringToObject(j, "caps", m->caps);
    cJSON_AddNumberToObject(j, "threads", m->threads);
    cJSON_AddNumberToObject(j, "max_tokens", m->max_tokens);
    cJSON_AddStringToObject(j, "command", m->command ? m->command : "");
    cJSON_AddItemToObject(j, "inputs", json_strings(m->inputs, m->n_inputs, m->dataset));
    cJSON *models = cJSON_AddArrayToObject(j, "models");
    for (int i = 0; i < (m->n_models ? m->n_models : 1); i++) {
        cJSON *mo = cJSON_CreateObject();
        const char *path = m->n_models ? m->models[i] : m->model, *fp = m->n_models ? m->model_fps[i] : m->model_fp;
        if (path && *path) cJSON_AddStringToObject(mo, "path", path);
        else cJSON_AddNullToObject(mo, "path");
        if (fp && *fp) cJSON_AddStringToObject(mo, "fingerprint", fp);
        else cJSON_AddNullToObject(mo, "fingerprint");
        cJSON_AddItemToArray(models, mo);
    }
    cJSON_AddItemToObject(j, "params", json_strings(m->params, m->n_params, NULL));
    cJSON *arr = cJSON_AddArrayToObject(j, "results");
    for (int i = 0; i < n; i++) {
        const sdn_result_cell *c = &cells[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "task", c->task);
        cJSON_AddStringToObject(o, "method", c->method);
        if (c->budget[0]) cJSON_AddStringToObject(o, "budget", c->budget);
        else cJSON_AddNullToObject(o, "budget");
        cJSON_AddNumberToObject(o, "requests", (double)c->c.requests);
        cJSON_AddNumberToObject(o, "prompt_tokens", (double)c->prompt_tokens);
        cJSON_AddNumberToObject(o, "output_tokens", (double)c->c.out_tokens);
        cJSON_AddNumberToObject(o, "steps", (double)c->c.steps);
        cJSON_AddNumberToObject(o, "mean_accepted", sdn_study_mean_accepted(&c->c));
        cJSON_AddNumberToObject(o, "draft_per_step", sdn_study_mean_draft(&c->c));
        cJSON_AddNumberToObject(o, "accepted_draft_tokens", (double)c->c.accepted);
        json_measured(o, "ms_per_token", sdn_cell_ms_per_token(c));
        json_measured(o, "plain_ms_per_token", sdn_cell_plain_ms_per_token(c));
        json_measured(o, "speedup", sdn_cell_speedup(c));
        json_measured(o, "prefill_ms", 1000 * c->t_prefill);
        json_measured(o, "decode_ms", 1000 * c->t_decode);
        cJSON_AddNumberToObject(o, "draft_ms", 1000 * c->c.t_draft);
        json_measured(o, "verify_ms", 1000 * c->t_verify);
        json_measured(o, "peak_rss_bytes", (double)c->peak_rss);
        cJSON_AddNumberToObject(o, "mismatches", c->mismatches);
        cJSON_AddBoolToObject(o, "live", c->live);
        int last = 0;
        for (int k = 0; k < SDN_ACCEPT_HIST; k++) if (c->c.accept_hist[k]) last = k;
        cJSON *h = cJSON_AddArrayToObject(o, "accept_hist");
        for (int k = 0; k <= last; k++) cJSON_AddItemToArray(h, cJSON_CreateNumber((double)c->c.accept_hist[k]));
        last = 0;
        for (int k = 0; k < SDN_STUDY_DRAFT_HIST; k++) if (c->c.draft_hist[k]) last = k;
        cJSON *dh = cJSON_AddArrayToObject(o, "draft_size_hist");
        for (int k = 0; k <= last; k++) cJSON_AddItemToArray(dh, cJSON_CreateNumber((double)c->c.draft_hist[k]));
        last = -1;
        for (int k = 0; k < SDN_STUDY_DRAFT_HIST; k++) if (c->budget_hist[k]) last = k;
        if (last >= 0) { /* bench: steps by the draft budget allowed */
            cJSON *bh = cJSON_AddArrayToObject(o, "budget_hist");
            for (int k = 0; k <= last; k++) cJSON_AddItemToArray(bh, cJSON_CreateNumber((double)c->budget_hist[k]));
        }
        cJSON_AddItemToArray(arr, o);
    }
    char *txt = cJSON_Print(j);
    cJSON_Delete(j);
    if (!txt) return sdn_fail(err, SDN_ENOMEM, "out of memory");
    FILE *f = fopen(path, "w");
    if (!f) { free(txt); return sdn_fail(err, SDN_EIO, "%s: cannot write", path); }
    fputs(txt, f);
    fputc('\n', f);
    free(txt);
    int bad = ferror(f);
    if (fclose(f) || bad) return sdn_fail(err, SDN_EIO, "%s: write error", path);
    return SDN_OK;
}

/* Schema 1 -> 2: the results table gets the budget column (NULL in the rows of older runs). */
static int results_migrate(sqlite3 *db, const char *path, long long from, sdn_err *err) {
    if (from != 1) return sdn_fail(err, SDN_EUNSUP, "%s: results database schema version %lld cannot be migrated", path, from);
    return sdn_db_exec(db, path, "ALTER TABLE results ADD COLUMN budget TEXT", err);
}

static const sdn_db_kind k_results = {
    .what = "results database",
    .app_id = 0x53444e52,
    .version = 2,
    .migrate = results_migrate,
    .schema = "CREATE TABLE runs(run_id INTEGER PRIMARY KEY, started TEXT, kind TEXT, machine TEXT, model TEXT, model_fp TEXT,"
              " threads INTEGER, max_tokens INTEGER, dataset TEXT, caps TEXT, command TEXT);"
              "CREATE TABLE results(run_id INTEGER NOT NULL REFERENCES runs(run_id), task TEXT, method TEXT, requests INTEGER,"
              " prompt_tokens INTEGER, output_tokens INTEGER, steps INTEGER, mean_accepted REAL, draft_per_step REAL,"
              " accepted_draft_tokens INTEGER, ms_per_token REAL, plain_ms_per_token REAL, speedup REAL, prefill_ms REAL,"
              " decode_ms REAL, draft_ms REAL, verify_ms REAL, peak_rss_bytes INTEGER, mismatches INTEGER, accept_hist TEXT,"
              " budget TEXT);"
              "CREATE INDEX results_by_run ON results(run_id);",
    .tables = {"runs", "results", NULL},
};

int sdn_results_db_add(const char *path, const sdn_run_meta *m, const sdn_result_cell *cells, int n, long long *run_id, sdn_err *err) {
    sqlite3 *db = NULL;
    int rc = sdn_db_open(path, &k_results, 1, &db, err);
    if (rc) return rc;
    sqlite3_stmt *st = NULL;
    char machine[400], when[32];
    sdn_machine_name(machine, sizeof machine);
    utc_now(when, sizeof when);
    char *models = joined(m->models, m->n_models, m->model), *fps = joined(m->model_fps, m->n_models, m->model_fp),
         *inputs = joined(m->inputs, m->n_inputs, m->dataset);
    if (!models || !fps || !inputs) { rc = sdn_fail(err, SDN_ENOMEM, "out of memory"); goto out; }
    if ((rc = sdn_db_exec(db, path, "BEGIN IMMEDIATE", err))) goto out;
    if (sqlite3_prepare_v2(db, "INSERT INTO runs(started, kind, machine, model, model_fp, threads, max_tokens, dataset, caps, command)"
                               " VALUES(?,?,?,?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK) {
        rc = sdn_db_fail(db, path, "recording the run", err);
        goto rollback;
    }
    sqlite3_bind_text(st, 1, when, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, m->kind ? m->kind : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, machine, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, models ? models : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, fps ? fps : "", -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 6, m->threads);
    sqlite3_bind_int(st, 7, m->max_tokens);
    sqlite3_bind_text(st, 8, inputs ? inputs : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 9, m->caps, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 10, m->command ? m->command : "", -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE) { rc = sdn_db_fail(db, path, "recording the run", err); goto rollback; }
    sqlite3_finalize(st);
    st = NULL;
    long long rid = sqlite3_last_insert_rowid(db);
    if (sqlite3_prepare_v2(db, "INSERT INTO results(run_id, task, method, requests, prompt_tokens, output_tokens, steps, mean_accepted,"
                               " draft_per_step, accepted_draft_tokens, ms_per_token, plain_ms_per_token, speedup, prefill_ms, decode_ms,"
                               " draft_ms, verify_ms, peak_rss_bytes, mismatches, accept_hist, budget)"
                               " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK) {
        rc = sdn_db_fail(db, path, "recording results", err);
        goto rollback;
    }
    for (int i = 0; i < n; i++) {
        const sdn_result_cell *c = &cells[i];
        char hist[2048];
        hist_text(&c->c, hist, sizeof hist);
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, rid);
        sqlite3_bind_text(st, 2, c->task, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, c->method, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, c->c.requests);
        sqlite3_bind_int64(st, 5, c->prompt_tokens);
        sqlite3_bind_int64(st, 6, c->c.out_tokens);
        sqlite3_bind_int64(st, 7, c->c.steps);
        sqlite3_bind_double(st, 8, sdn_study_mean_accepted(&c->c));
        sqlite3_bind_double(st, 9, sdn_study_mean_draft(&c->c));
        sqlite3_bind_int64(st, 10, c->c.accepted);
        db_measured(st, 11, sdn_cell_ms_per_token(c));
        db_measured(st, 12, sdn_cell_plain_ms_per_token(c));
        db_measured(st, 13, sdn_cell_speedup(c));
        db_measured(st, 14, 1000 * c->t_prefill);
        db_measured(st, 15, 1000 * c->t_decode);
        sqlite3_bind_double(st, 16, 1000 * c->c.t_draft);
        db_measured(st, 17, 1000 * c->t_verify);
        if (c->peak_rss) sqlite3_bind_int64(st, 18, (long long)c->peak_rss);
        else sqlite3_bind_null(st, 18);
        sqlite3_bind_int(st, 19, c->mismatches);
        sqlite3_bind_text(st, 20, hist, -1, SQLITE_TRANSIENT);
        if (c->budget[0]) sqlite3_bind_text(st, 21, c->budget, -1, SQLITE_STATIC);
        else sqlite3_bind_null(st, 21);
        if (sqlite3_step(st) != SQLITE_DONE) { rc = sdn_db_fail(db, path, "recording results", err); goto rollback; }
    }
    sqlite3_finalize(st);
    st = NULL;
    if ((rc = sdn_db_exec(db, path, "COMMIT", err))) goto rollback;
    if (run_id) *run_id = rid;
    goto out;
rollback:
    sqlite3_finalize(st);
    st = NULL;
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
out:
    free(models);
    free(fps);
    free(inputs);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return rc;
}

/* ---- SVG -------------------------------------------------------------------------------- */

static const char *const k_palette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
#define N_PALETTE 10

static void xml_text(FILE *f, const char *s) {
    for (; s && *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

/* A tick step of 1, 2 or 5 x 10^k giving about `want` ticks up to hi. */
static double nice_step(double hi, int want) {
    if (hi <= 0) return 1;
    double raw = hi / want, p = pow(10, floor(log10(raw))), r = raw / p;
    return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * p;
}

static void svg_head(FILE *f, int w, int h, const char *title) {
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n", w, h,
            w, h);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n<text x=\"%d\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">", w, h, w / 2);
    xml_text(f, title);
    fputs("</text>\n", f);
}

/* Horizontal grid, y ticks and the y label for a plot area (x0, y0)-(x1, y1) over [0, top]. */
static void y_axis(FILE *f, int x0, int y0, int x1, int y1, double top, double step, const char *label) {
    for (double v = 0; v <= top + step * 1e-6; v += step) {
        double y = y1 - (y1 - y0) * v / top;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x0, y, x1, y);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", x0 - 6, y + 4, v);
    }
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n", x0, y0, x0, y1);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n", x0, y1, x1, y1);
    fprintf(f, "<text transform=\"translate(16 %d) rotate(-90)\" text-anchor=\"middle\">", (y0 + y1) / 2);
    xml_text(f, label);
    fputs("</text>\n", f);
}

static void legend(FILE *f, int x, int y, const char *const *series, int n, int lines) {
    for (int s = 0; s < n; s++) {
        int yy = y + 18 * s;
        if (lines) fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>\n", x, yy - 4, x + 16, yy - 4, k_palette[s % N_PALETTE]);
        else fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>\n", x, yy - 10, k_palette[s % N_PALETTE]);
        fprintf(f, "<text x=\"%d\" y=\"%d\">", x + 20, yy);
        xml_text(f, series[s]);
        fputs("</text>\n", f);
    }
}

int sdn_svg_bars(const char *path, const char *title, const char *y_label, const char *const *groups, int n_groups,
                 const char *const *series, int n_series, const double *values, sdn_err *err) {
    if (n_groups < 1 || n_series < 1) return sdn_fail(err, SDN_EINVAL, "%s: nothing to plot", path);
    FILE *f = fopen(path, "w");
    if (!f) return sdn_fail(err, SDN_EIO, "%s: cannot write", path);
    int bar = 22, gap = 24, pw = n_groups * (n_series * bar + gap);
    if (pw < 500) pw = 500;
    int x0 = 70, y0 = 40, y1 = 340, x1 = x0 + pw, w = x1 + 160, h = 400;
    double hi = 0;
    for (int i = 0; i < n_groups * n_series; i++) if (values[i] > hi) hi = values[i];
    double step = nice_step(hi > 0 ? hi : 1, 5), top = step * ceil((hi > 0 ? hi : 1) / step);
    svg_head(f, w, h, title);
    y_axis(f, x0, y0, x1, y1, top, step, y_label);
    double gw = (double)pw / n_groups;
    for (int g = 0; g < n_groups; g++) {
        double gx = x0 + g * gw + (gw - n_series * bar) / 2;
        for (int s = 0; s < n_series; s++) {
            double v = values[g * n_series + s];
            if (v < 0) continue;
            double bh = (y1 - y0) * v / top, x = gx + s * bar;
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"><title>", x, y1 - bh, bar - 3, bh, k_palette[s % N_PALETTE]);
            xml_text(f, groups[g]);
            fputs(" / ", f);
            xml_text(f, series[s]);
            fprintf(f, ": %.3g</title></rect>\n", v);
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"9\" text-anchor=\"middle\">%.3g</text>\n", x + (bar - 3) / 2.0, y1 - bh - 3, v);
        }
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", x0 + g * gw + gw / 2, y1 + 18);
        xml_text(f, groups[g]);
        fputs("</text>\n", f);
    }
    legend(f, x1 + 20, y0 + 14, series, n_series, 0);
    fputs("</svg>\n", f);
    int bad = ferror(f);
    if (fclose(f) || bad) return sdn_fail(err, SDN_EIO, "%s: write error", path);
    return SDN_OK;
}

int sdn_svg_lines(const char *path, const char *title, const char *x_label, const char *y_label, const char *const *series, int n_series,
                  const double *const *x, const double *const *y, const int *n, sdn_err *err) {
    return sdn_svg_lines_marked(path, title, x_label, y_label, series, n_series, x, y, n, NULL, NULL, 0, err);
}

int sdn_svg_lines_marked(const char *path, const char *title, const char *x_label, const char *y_label, const char *const *series,
                         int n_series, const double *const *x, const double *const *y, const int *n, const double *marks,
                         const char *const *mark_labels, int n_marks, sdn_err *err) {
    double xhi = 0, yhi = 0;
    int any = 0;
    for (int s = 0; s < n_series; s++)
        for (int i = 0; i < n[s]; i++) {
            if (x[s][i] > xhi) xhi = x[s][i];
            if (y[s][i] > yhi) yhi = y[s][i];
            any = 1;
        }
    if (!any) return sdn_fail(err, SDN_EINVAL, "%s: nothing to plot", path);
    FILE *f = fopen(path, "w");
    if (!f) return sdn_fail(err, SDN_EIO, "%s: cannot write", path);
    int x0 = 70, y0 = 40, x1 = 560, y1 = 340, w = 760, h = 400;
    double ys = nice_step(yhi > 0 ? yhi : 1, 5), ytop = ys * ceil((yhi > 0 ? yhi : 1) / ys);
    double xs = nice_step(xhi > 0 ? xhi : 1, 8), xtop = xs * ceil((xhi > 0 ? xhi : 1) / xs);
    svg_head(f, w, h, title);
    y_axis(f, x0, y0, x1, y1, ytop, ys, y_label);
    for (double v = 0; v <= xtop + xs * 1e-6; v += xs) {
        double px = x0 + (x1 - x0) * v / xtop;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#333\"/>\n", px, y1, px, y1 + 4);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", px, y1 + 18, v);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", (x0 + x1) / 2, y1 + 40);
    xml_text(f, x_label);
    fputs("</text>\n", f);
    for (int i = 0; i < n_marks; i++) { /* dashed vertical lines with their labels */
        if (!(marks[i] >= 0 && marks[i] <= xtop)) continue;
        double px = x0 + (x1 - x0) * marks[i] / xtop;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#555\" stroke-dasharray=\"5,4\"/>\n", px, y0, px, y1);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" fill=\"#333\">", px + 4, y0 + 14 + 14 * i);
        xml_text(f, mark_labels && mark_labels[i] ? mark_labels[i] : "");
        fputs("</text>\n", f);
    }
    for (int s = 0; s < n_series; s++) {
        const char *col = k_palette[s % N_PALETTE];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
        for (int i = 0; i < n[s]; i++)
            fprintf(f, "%s%.1f,%.1f", i ? " " : "", x0 + (x1 - x0) * x[s][i] / xtop, y1 - (y1 - y0) * y[s][i] / ytop);
        fputs("\"/>\n", f);
        for (int i = 0; i < n[s]; i++)
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>%g: %.3g</title></circle>\n", x0 + (x1 - x0) * x[s][i] / xtop,
                    y1 - (y1 - y0) * y[s][i] / ytop, col, x[s][i], y[s][i]);
    }
    legend(f, x1 + 20, y0 + 14, series, n_series, 1);
    fputs("</svg>\n", f);
    int bad = ferror(f);
    if (fclose(f) || bad) return sdn_fail(err, SDN_EIO, "%s: write error", path);
    return SDN_OK;
}
