/* dataset.c - loaders for task rows (sdnpu JSONL and Spec-Bench question.jsonl) and for
 * model answer files (see dataset.h). Each line is parsed with cJSON and every field is
 * checked before the row is kept; the format of a file is fixed by its first row. */
#include "datasets/dataset.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/jsonl.h"

enum { FMT_UNKNOWN = 0, FMT_TASK = 1, FMT_SPECBENCH = 2 };

static char *dup_str(const char *s) { return s ? strdup(s) : NULL; }
static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) { memcpy(d, s, n); d[n] = 0; }
    return d;
}

static void row_free(sdn_task_row *r) {
    free(r->id); free(r->task); free(r->group); free(r->context); free(r->prompt);
    free(r->reference); free(r->input); free(r->file);
    memset(r, 0, sizeof *r);
}

void sdn_dataset_free(sdn_dataset *ds) {
    for (int i = 0; i < ds->n; i++) row_free(&ds->rows[i]);
    free(ds->rows);
    memset(ds, 0, sizeof *ds);
}

static int push_row(sdn_dataset *ds, sdn_task_row *r, sdn_err *err) {
    if (ds->n == ds->cap) {
        int nc = ds->cap ? ds->cap * 2 : 64;
        sdn_task_row *nr = realloc(ds->rows, (size_t)nc * sizeof *nr);
        if (!nr) return sdn_fail(err, SDN_ENOMEM, "out of memory (dataset rows)");
        ds->rows = nr;
        ds->cap = nc;
    }
    ds->rows[ds->n++] = *r;
    return SDN_OK;
}

/* The reference: a string as-is, another JSON value as compact JSON text, null -> NULL. */
static int ref_text(const cJSON *o, char **out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "reference");
    *out = NULL;
    if (!v || cJSON_IsNull(v)) return SDN_OK;
    if (cJSON_IsString(v)) *out = dup_str(v->valuestring);
    else *out = cJSON_PrintUnformatted(v);
    return *out ? SDN_OK : SDN_ENOMEM;
}

static int parse_task_row(const jl_reader *r, const cJSON *o, sdn_task_row *row, sdn_err *err) {
    const char *id, *task, *ctx, *prompt, *group, *input;
    int rc;
    if ((rc = jl_str(r, o, "id", 1, &id, err)) || (rc = jl_str(r, o, "task", 1, &task, err)) ||
        (rc = jl_str(r, o, "context", 1, &ctx, err)) || (rc = jl_str(r, o, "prompt", 1, &prompt, err)) ||
        (rc = jl_str(r, o, "group", 0, &group, err)) || (rc = jl_str(r, o, "input", 0, &input, err)))
        return rc;
    if (!id[0]) return jl_error(r, "id", err, "empty");
    if (!task[0]) return jl_error(r, "task", err, "empty");
    if (group && !group[0]) return jl_error(r, "group", err, "empty (omit the field for the default group)");
    row->id = dup_str(id);
    row->task = dup_str(task);
    row->group = dup_str(group ? group : task);
    row->context = dup_str(ctx);
    row->prompt = dup_str(prompt);
    row->input = dup_str(input);
    if (ref_text(o, &row->reference) || !row->id || !row->task || !row->group || !row->context || !row->prompt || (input && !row->input))
        return sdn_fail(err, SDN_ENOMEM, "%s:%d: out of memory", r->name, r->line);
    return SDN_OK;
}

static int parse_specbench_row(const jl_reader *r, const cJSON *o, sdn_task_row *row, sdn_err *err) {
    long qid;
    const char *cat;
    int rc;
    if ((rc = jl_int(r, o, "question_id", 1, 0, 1L << 40, &qid, err)) || (rc = jl_str(r, o, "category", 1, &cat, err))) return rc;
    const cJSON *turns = cJSON_GetObjectItemCaseSensitive(o, "turns");
    if (!turns) return jl_error(r, "turns", err, "missing");
    if (!cJSON_IsArray(turns) || cJSON_GetArraySize(turns) < 1) return jl_error(r, "turns", err, "expected a non-empty array of strings");
    int k = 0;
    for (const cJSON *t = turns->child; t; t = t->next, k++)
        if (!cJSON_IsString(t) || !t->valuestring) return jl_error(r, "turns", err, "element %d is not a string", k);
    const char *turn = turns->child->valuestring;
    char idbuf[48];
    snprintf(idbuf, sizeof idbuf, "specbench-%ld", qid);
    row->id = dup_str(idbuf);
    row->input = dup_str(turn);
    if (!strcmp(cat, "summarization")) {
        static const char pfx[] = "Summarize: ";
        row->task = dup_str("summary");
        if (!strncmp(turn, pfx, sizeof pfx - 1)) {
            row->context = dup_str(turn + sizeof pfx - 1);
            row->prompt = dup_str("Summarize:");
        } else {
            row->context = dup_str("");
            row->prompt = dup_str(turn);
        }
    } else if (!strcmp(cat, "rag")) {
        row->task = dup_str("rag");
        const char *nl = strrchr(turn, '\n');
        if (nl) {
            row->context = dup_n(turn, (size_t)(nl - turn));
            row->prompt = dup_str(nl + 1);
        } else {
            row->context = dup_str("");
            row->prompt = dup_str(turn);
        }
    } else {
        if (!cat[0]) return jl_error(r, "category", err, "empty");
        row->task = dup_str(cat);
        row->context = dup_str("");
        row->prompt = dup_str(turn);
    }
    row->group = dup_str(row->task);
    if (!row->id || !row->input || !row->task || !row->context || !row->prompt || !row->group)
        return sdn_fail(err, SDN_ENOMEM, "%s:%d: out of memory", r->name, r->line);
    return SDN_OK;
}

int sdn_dataset_load_buf(sdn_dataset *ds, const char *name, const char *data, size_t len, sdn_err *err) {
    jl_reader r;
    jl_open_buf(&r, name, data, len);
    const char *line;
    size_t n;
    int fmt = FMT_UNKNOWN, first_new = ds->n, rc = SDN_OK;
    while (jl_next(&r, &line, &n)) {
        cJSON *o;
        if ((rc = jl_parse(&r, line, n, &o, err))) break;
        int f = cJSON_GetObjectItemCaseSensitive(o, "question_id") && cJSON_GetObjectItemCaseSensitive(o, "turns") ? FMT_SPECBENCH : FMT_TASK;
        if (fmt == FMT_UNKNOWN) fmt = f;
        sdn_task_row row = {0};
        if (f != fmt) {
            rc = jl_error(&r, NULL, err, "row is in %s format but the file's first row is in %s format",
                          f == FMT_SPECBENCH ? "Spec-Bench question" : "sdnpu task", fmt == FMT_SPECBENCH ? "Spec-Bench question" : "sdnpu task");
        } else {
            rc = fmt == FMT_SPECBENCH ? parse_specbench_row(&r, o, &row, err) : parse_task_row(&r, o, &row, err);
        }
        cJSON_Delete(o);
        if (!rc) {
            row.file = dup_str(name);
            row.line = r.line;
            if (!row.file) rc = sdn_fail(err, SDN_ENOMEM, "out of memory");
        }
        if (!rc) {
            int dup = sdn_dataset_find(ds, row.id);
            if (dup >= 0)
                rc = jl_error(&r, "id", err, "duplicate id '%s' (first seen at %s:%d)", row.id, ds->rows[dup].file, ds->rows[dup].line);
        }
        if (!rc) rc = push_row(ds, &row, err);
        if (rc) { row_free(&row); break; }
    }
    if (rc) {
        /* drop this file's rows */
        while (ds->n > first_new) row_free(&ds->rows[--ds->n]);
    }
    return rc;
}

int sdn_dataset_load_file(sdn_dataset *ds, const char *path, sdn_err *err) {
    jl_reader r;
    int rc = jl_open(&r, path, err);
    if (rc) return rc;
    rc = sdn_dataset_load_buf(ds, path, r.data, r.len, err);
    jl_close(&r);
    return rc;
}

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Collect *.jsonl files of dir (and of its direct subdirectories when depth > 0): 0, -1 when
 * dir cannot be read, -2 out of memory. */
static int collect(const char *dir, int depth, char ***list, int *n, int *cap) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st)) continue;
        if (S_ISDIR(st.st_mode)) {
            if (depth > 0 && strcmp(e->d_name, "model_outputs") != 0 && collect(path, depth - 1, list, n, cap) == -2) {
                closedir(d);
                return -2;
            }
        } else if (S_ISREG(st.st_mode) && has_suffix(e->d_name, ".jsonl")) {
            if (*n == *cap) {
                int nc = *cap ? *cap * 2 : 16;
                char **nl = realloc(*list, (size_t)nc * sizeof **list);
                if (!nl) { closedir(d); return -2; }
                *list = nl;
                *cap = nc;
            }
            if (!((*list)[*n] = strdup(path))) { closedir(d); return -2; }
            (*n)++;
        }
    }
    closedir(d);
    return 0;
}

int sdn_dataset_load(sdn_dataset *ds, const char *path, sdn_err *err) {
    struct stat st;
    if (stat(path, &st)) return sdn_fail(err, SDN_EIO, "%s: no such file or directory", path);
    if (!S_ISDIR(st.st_mode)) return sdn_dataset_load_file(ds, path, err);
    char **list = NULL;
    int n = 0, cap = 0, rc = SDN_OK;
    int cr = collect(path, 1, &list, &n, &cap);
    if (cr == -1) return sdn_fail(err, SDN_EIO, "%s: cannot read the directory", path);
    if (cr == -2) rc = sdn_fail(err, SDN_ENOMEM, "%s: out of memory listing the directory", path);
    else if (n == 0) rc = sdn_fail(err, SDN_EINVAL, "%s: no *.jsonl dataset files in it or in its subdirectories", path);
    if (!rc) qsort(list, (size_t)n, sizeof *list, cmp_str);
    for (int i = 0; i < n && !rc; i++) rc = sdn_dataset_load_file(ds, list[i], err);
    for (int i = 0; i < n; i++) free(list[i]);
    free(list);
    return rc;
}

static int in_list(const char *list, const char *name) {
    if (!list || !list[0]) return 1;
    size_t l = strlen(name);
    const char *p = list;
    while (*p) {
        const char *c = strchr(p, ',');
        size_t k = c ? (size_t)(c - p) : strlen(p);
        if (k == l && !strncmp(p, name, l)) return 1;
        if (!c) break;
        p = c + 1;
    }
    return 0;
}

void sdn_dataset_filter(sdn_dataset *ds, const char *tasks, int limit) {
    int w = 0;
    for (int i = 0; i < ds->n; i++) {
        sdn_task_row *r = &ds->rows[i];
        int keep = in_list(tasks, r->task);
        if (keep && limit > 0) {
            int seen = 0;
            for (int j = 0; j < w; j++) seen += !strcmp(ds->rows[j].task, r->task);
            keep = seen < limit;
        }
        if (keep) ds->rows[w++] = *r;
        else row_free(r);
    }
    ds->n = w;
}

int sdn_dataset_find(const sdn_dataset *ds, const char *id) {
    for (int i = 0; i < ds->n; i++)
        if (!strcmp(ds->rows[i].id, id)) return i;
    return -1;
}

int sdn_dataset_tasks(const sdn_dataset *ds, const char **names, int max) {
    int k = 0;
    for (int i = 0; i < ds->n; i++) {
        int j = 0;
        for (int q = 0; q < i; q++)
            if (!strcmp(ds->rows[q].task, ds->rows[i].task)) { j = 1; break; }
        if (j) continue;
        if (k < max) names[k] = ds->rows[i].task;
        k++;
    }
    return k;
}

/* ---- model answers ----------------------------------------------------------------- */

void sdn_answers_free(sdn_answers *a) {
    for (int i = 0; i < a->n; i++) {
        free(a->rows[i].id); free(a->rows[i].task); free(a->rows[i].model); free(a->rows[i].output);
    }
    free(a->rows);
    memset(a, 0, sizeof *a);
}

int sdn_answers_find(const sdn_answers *a, const char *id) {
    for (int i = 0; i < a->n; i++)
        if (!strcmp(a->rows[i].id, id)) return i;
    return -1;
}

static int parse_answer(const jl_reader *r, const cJSON *o, sdn_answer_row *row, sdn_err *err) {
    const char *id, *task, *model, *output = NULL;
    long qid = -1, nt = -1;
    int rc;
    if ((rc = jl_str(r, o, "id", 0, &id, err)) || (rc = jl_int(r, o, "question_id", 0, 0, 1L << 40, &qid, err)) ||
        (rc = jl_str(r, o, "task", 0, &task, err)) || (rc = jl_str(r, o, "model_id", 0, &model, err)))
        return rc;
    if (!id && qid < 0) return jl_error(r, "id", err, "missing (and no 'question_id' either)");
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(o, "choices");
    if (cJSON_GetObjectItemCaseSensitive(o, "output")) {
        if ((rc = jl_str(r, o, "output", 1, &output, err)) || (rc = jl_int(r, o, "new_tokens", 0, 0, 1L << 30, &nt, err))) return rc;
    } else if (choices) {
        if (!cJSON_IsArray(choices) || !choices->child || !cJSON_IsObject(choices->child))
            return jl_error(r, "choices", err, "expected a non-empty array of objects");
        const cJSON *turns = cJSON_GetObjectItemCaseSensitive(choices->child, "turns");
        if (!cJSON_IsArray(turns) || !turns->child || !cJSON_IsString(turns->child) || !turns->child->valuestring)
            return jl_error(r, "choices[0].turns", err, "expected a non-empty array of strings");
        output = turns->child->valuestring;
        const cJSON *ntv = cJSON_GetObjectItemCaseSensitive(choices->child, "new_tokens");
        if (ntv && !cJSON_IsNull(ntv)) {
            const cJSON *first = cJSON_IsArray(ntv) ? ntv->child : ntv;
            if (!first || !jl_is_int(first, 0, 1L << 30, &nt)) return jl_error(r, "choices[0].new_tokens", err, "expected integers");
        }
    } else {
        return jl_error(r, "output", err, "missing (and no Spec-Bench 'choices' either)");
    }
    char idbuf[48];
    if (!id) snprintf(idbuf, sizeof idbuf, "specbench-%ld", qid);
    row->id = strdup(id ? id : idbuf);
    row->task = dup_str(task);
    row->model = dup_str(model);
    row->output = strdup(output);
    row->new_tokens = nt;
    row->line = r->line;
    if (!row->id || !row->output || (task && !row->task) || (model && !row->model))
        return sdn_fail(err, SDN_ENOMEM, "%s:%d: out of memory", r->name, r->line);
    return SDN_OK;
}

int sdn_answers_load(sdn_answers *a, const char *path, sdn_err *err) {
    jl_reader r;
    int rc = jl_open(&r, path, err);
    if (rc) return rc;
    const char *line;
    size_t n;
    while (jl_next(&r, &line, &n)) {
        cJSON *o;
        if ((rc = jl_parse(&r, line, n, &o, err))) break;
        sdn_answer_row row = {0};
        rc = parse_answer(&r, o, &row, err);
        cJSON_Delete(o);
        if (!rc && sdn_answers_find(a, row.id) >= 0) rc = jl_error(&r, "id", err, "duplicate answer for '%s'", row.id);
        if (!rc && a->n == a->cap) {
            int nc = a->cap ? a->cap * 2 : 64;
            sdn_answer_row *nr = realloc(a->rows, (size_t)nc * sizeof *nr);
            if (!nr) rc = sdn_fail(err, SDN_ENOMEM, "out of memory");
            else a->rows = nr, a->cap = nc;
        }
        if (rc) {
            free(row.id); free(row.task); free(row.model); free(row.output);
            break;
        }
        a->rows[a->n++] = row;
    }
    jl_close(&r);
    return rc;
}

int sdn_answers_from_references(const sdn_dataset *ds, const char *model, sdn_answers *a, sdn_err *err) {
    memset(a, 0, sizeof *a);
    for (int i = 0; i < ds->n; i++) {
        const sdn_task_row *r = &ds->rows[i];
        if (!r->reference) continue;
        if (a->n == a->cap) {
            int nc = a->cap ? a->cap * 2 : 64;
            sdn_answer_row *nr = realloc(a->rows, (size_t)nc * sizeof *nr);
            if (!nr) { sdn_answers_free(a); return sdn_fail(err, SDN_ENOMEM, "out of memory"); }
            a->rows = nr;
            a->cap = nc;
        }
        sdn_answer_row *x = &a->rows[a->n++];
        memset(x, 0, sizeof *x);
        x->id = strdup(r->id);
        x->task = strdup(r->task);
        x->model = strdup(model ? model : "reference");
        x->output = strdup(r->reference);
        x->new_tokens = -1;
        x->line = r->line;
        if (!x->id || !x->task || !x->model || !x->output) { sdn_answers_free(a); return sdn_fail(err, SDN_ENOMEM, "out of memory"); }
    }
    return SDN_OK;
}
