/* trace.c - reading, validating and writing sdnpu traces (format in trace.h and
 * docs/datasets.md). Reading is strict: a trace is untrusted input written by any tool. */
#include "datasets/trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonl.h"

void sdn_trace_row_free(sdn_trace_row *r) {
    free(r->id); free(r->task); free(r->group); free(r->model); free(r->model_fp); free(r->tokenizer);
    free(r->source_json); free(r->ctx); free(r->out); free(r->pred_tok); free(r->pred_prob); free(r->out_pred_tok);
    memset(r, 0, sizeof *r);
}

void sdn_trace_free(sdn_trace *t) {
    for (int i = 0; i < t->n; i++) sdn_trace_row_free(&t->rows[i]);
    free(t->rows);
    memset(t, 0, sizeof *t);
}

static const char *sdn_trace_stop_name(sdn_trace_stop s) {
    return s == SDN_STOP_EOG ? "eog" : s == SDN_STOP_LENGTH ? "length" : "unknown";
}

static char *dup_opt(const char *s) { return s ? strdup(s) : NULL; }

static int is_hex64(const char *s) {
    if (strlen(s) != 16) return 0;
    for (int i = 0; i < 16; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

/* Checks shared by parsing and sdn_trace_validate; `r` names the place. */
static int check_row(const jl_reader *rd, const sdn_trace_row *t, sdn_err *err) {
    if (!t->id || !t->id[0]) return jl_error(rd, "id", err, "missing or empty");
    if (!t->task || !t->task[0]) return jl_error(rd, "task", err, "missing or empty");
    if (t->model_fp && !is_hex64(t->model_fp)) return jl_error(rd, "model_fingerprint", err, "expected 16 lower-case hex digits or null");
    if (t->n_ctx < 1) return jl_error(rd, "context_tokens", err, "empty (the prompt has at least one token)");
    if (t->n_out < 0 || (t->n_out > 0 && !t->out)) return jl_error(rd, "output_tokens", err, "invalid");
    if (t->vocab_size < 0) return jl_error(rd, "vocab_size", err, "negative");
    long vmax = t->vocab_size > 0 ? t->vocab_size - 1 : INT32_MAX - 1;
    for (int i = 0; i < t->n_ctx; i++)
        if (t->ctx[i] < 0 || t->ctx[i] > vmax) return jl_error(rd, "context_tokens", err, "element %d (%d) is not a token id in [0, %ld]", i, t->ctx[i], vmax);
    for (int i = 0; i < t->n_out; i++)
        if (t->out[i] < 0 || t->out[i] > vmax) return jl_error(rd, "output_tokens", err, "element %d (%d) is not a token id in [0, %ld]", i, t->out[i], vmax);
    if (t->stop == SDN_STOP_EOG && t->eog_token >= 0 && t->eog_token > vmax)
        return jl_error(rd, "eog_token", err, "%d is not a token id in [0, %ld]", t->eog_token, vmax);
    if (t->stop != SDN_STOP_EOG && t->eog_token >= 0) return jl_error(rd, "eog_token", err, "given but 'stop' is not \"eog\"");
    if (t->max_new < 0) return jl_error(rd, "max_new_tokens", err, "negative");
    if (t->max_new > 0 && t->n_out > t->max_new) return jl_error(rd, "output_tokens", err, "%d tokens, more than max_new_tokens %d", t->n_out, t->max_new);
    if (t->stop == SDN_STOP_LENGTH && t->max_new > 0 && t->n_out != t->max_new)
        return jl_error(rd, "stop", err, "\"length\" but %d output tokens != max_new_tokens %d", t->n_out, t->max_new);
    if (t->preds_k < 0 || t->preds_k > SDN_TRACE_MAX_K) return jl_error(rd, "preds_k", err, "not in [0, %d]", SDN_TRACE_MAX_K);
    if (t->out_pred_tok) { /* each row: distinct ids in range, the recorded output first */
        if (!t->preds_k) return jl_error(rd, "output_pred_tokens", err, "given but preds_k is 0");
        const int K = t->preds_k;
        for (int j = 0; j < t->n_out; j++) {
            const int32_t *row = t->out_pred_tok + (size_t)j * K;
            for (int q = 0; q < K; q++) {
                if (row[q] < 0 || row[q] > vmax)
                    return jl_error(rd, "output_pred_tokens", err, "position %d, element %d (%d) is not a token id in [0, %ld]", j, q, row[q], vmax);
                for (int u = 0; u < q; u++)
                    if (row[u] == row[q]) return jl_error(rd, "output_pred_tokens", err, "position %d lists token %d twice", j, row[q]);
            }
            if (row[0] != t->out[j])
                return jl_error(rd, "output_pred_tokens", err, "position %d starts with %d, not the recorded output token %d (a greedy "
                                "recording's best next token is the one it emitted)", j, row[0], t->out[j]);
        }
    }
    if (t->preds_k) {
        if (!t->pred_tok || !t->pred_prob) return jl_error(rd, "pred_tokens", err, "missing although preds_k = %d", t->preds_k);
        int K = t->preds_k;
        for (int p = 0; p < t->n_ctx - 1; p++) {
            double sum = 0;
            for (int j = 0; j < K; j++) {
                int32_t tk = t->pred_tok[(size_t)p * K + j];
                float pr = t->pred_prob[(size_t)p * K + j];
                if (tk < 0 || tk > vmax) return jl_error(rd, "pred_tokens", err, "position %d, element %d (%d) is not a token id in [0, %ld]", p, j, tk, vmax);
                if (!isfinite(pr) || pr < 0.0f || pr > 1.0f) return jl_error(rd, "pred_probs", err, "position %d, element %d is not a probability in [0, 1]", p, j);
                if (j > 0 && pr > t->pred_prob[(size_t)p * K + j - 1])
                    return jl_error(rd, "pred_probs", err, "position %d is not sorted most probable first", p);
                for (int q = 0; q < j; q++)
                    if (t->pred_tok[(size_t)p * K + q] == tk) return jl_error(rd, "pred_tokens", err, "position %d lists token %d twice", p, tk);
                sum += pr;
            }
            if (sum > 1.0 + 1e-3) return jl_error(rd, "pred_probs", err, "position %d sums to %.6f > 1", p, sum);
        }
    }
    return SDN_OK;
}

int sdn_trace_validate(const sdn_trace_row *r, sdn_err *err) {
    jl_reader rd;
    jl_open_buf(&rd, r->id ? r->id : "trace row", "", 0);
    rd.line = r->line;
    return check_row(&rd, r, err);
}

/* pred_tokens / pred_probs: an array of n_pos arrays of K values each. */
static int read_preds(const jl_reader *rd, const cJSON *o, sdn_trace_row *t, sdn_err *err) {
    const cJSON *tv = cJSON_GetObjectItemCaseSensitive(o, "pred_tokens");
    const cJSON *pv = cJSON_GetObjectItemCaseSensitive(o, "pred_probs");
    int K = t->preds_k, n_pos = t->n_ctx - 1;
    if (!K) {
        if ((tv && !cJSON_IsNull(tv) && cJSON_GetArraySize(tv)) || (pv && !cJSON_IsNull(pv) && cJSON_GetArraySize(pv)))
            return jl_error(rd, "preds_k", err, "0 or missing but predictions are present");
        return SDN_OK;
    }
    if (!cJSON_IsArray(tv)) return jl_error(rd, "pred_tokens", err, "expected an array of %d arrays (preds_k = %d)", n_pos, K);
    if (!cJSON_IsArray(pv)) return jl_error(rd, "pred_probs", err, "expected an array of %d arrays (preds_k = %d)", n_pos, K);
    if (cJSON_GetArraySize(tv) != n_pos)
        return jl_error(rd, "pred_tokens", err, "%d rows, expected one per context position but the last (%d)", cJSON_GetArraySize(tv), n_pos);
    if (cJSON_GetArraySize(pv) != n_pos)
        return jl_error(rd, "pred_probs", err, "%d rows, expected one per context position but the last (%d)", cJSON_GetArraySize(pv), n_pos);
    size_t total = (size_t)n_pos * (size_t)K;
    t->pred_tok = malloc((total + 1) * sizeof *t->pred_tok);
    t->pred_prob = malloc((total + 1) * sizeof *t->pred_prob);
    if (!t->pred_tok || !t->pred_prob) return sdn_fail(err, SDN_ENOMEM, "%s:%d: out of memory (predictions)", rd->name, rd->line);
    const cJSON *a = tv->child, *b = pv->child;
    for (int p = 0; p < n_pos; p++, a = a->next, b = b->next) {
        if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != K) return jl_error(rd, "pred_tokens", err, "position %d: expected an array of %d ids", p, K);
        if (!cJSON_IsArray(b) || cJSON_GetArraySize(b) != K) return jl_error(rd, "pred_probs", err, "position %d: expected an array of %d numbers", p, K);
        const cJSON *x = a->child, *y = b->child;
        for (int j = 0; j < K; j++, x = x->next, y = y->next) {
            long v;
            if (!jl_is_int(x, 0, INT32_MAX - 1, &v)) return jl_error(rd, "pred_tokens", err, "position %d, element %d is not a token id", p, j);
            if (!cJSON_IsNumber(y)) return jl_error(rd, "pred_probs", err, "position %d, element %d is not a number", p, j);
            t->pred_tok[(size_t)p * K + j] = (int32_t)v;
            t->pred_prob[(size_t)p * K + j] = (float)y->valuedouble;
        }
    }
    return SDN_OK;
}

/* output_pred_tokens (optional): an array of n_out arrays of K ids. */
static int read_out_preds(const jl_reader *rd, const cJSON *o, sdn_trace_row *t, sdn_err *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "output_pred_tokens");
    if (!v || cJSON_IsNull(v)) return SDN_OK;
    const int K = t->preds_k;
    if (!K) return jl_error(rd, "output_pred_tokens", err, "given but preds_k is 0 or missing");
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != t->n_out)
        return jl_error(rd, "output_pred_tokens", err, "expected an array of %d arrays (one per output token) of %d ids", t->n_out, K);
    t->out_pred_tok = malloc(((size_t)t->n_out * (size_t)K + 1) * sizeof *t->out_pred_tok);
    if (!t->out_pred_tok) return sdn_fail(err, SDN_ENOMEM, "%s:%d: out of memory (output predictions)", rd->name, rd->line);
    const cJSON *a = v->child;
    for (int j = 0; j < t->n_out; j++, a = a->next) {
        if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != K)
            return jl_error(rd, "output_pred_tokens", err, "position %d: expected an array of %d ids", j, K);
        const cJSON *x = a->child;
        for (int q = 0; q < K; q++, x = x->next) {
            long id;
            if (!jl_is_int(x, 0, INT32_MAX - 1, &id)) return jl_error(rd, "output_pred_tokens", err, "position %d, element %d is not a token id", j, q);
            t->out_pred_tok[(size_t)j * K + q] = (int32_t)id;
        }
    }
    return SDN_OK;
}

int sdn_trace_parse(const char *name, int line, const char *text, size_t len, sdn_trace_row *t, sdn_err *err) {
    jl_reader rd;
    jl_open_buf(&rd, name, text, len);
    rd.line = line;
    memset(t, 0, sizeof *t);
    t->eog_token = -1;
    t->line = line;
    cJSON *o = NULL;
    int rc = jl_parse(&rd, text, len, &o, err);
    if (rc) return rc;
    const char *fmt, *id, *task, *group, *model, *fp, *tok, *stop, *dec;
    long version = 0, vocab = 0, eog = -1, max_new = 0, k = 0;
    if ((rc = jl_str(&rd, o, "format", 1, &fmt, err))) goto done;
    if (strcmp(fmt, "sdnpu-trace") != 0) { rc = jl_error(&rd, "format", err, "\"%s\", expected \"sdnpu-trace\"", fmt); goto done; }
    if ((rc = jl_int(&rd, o, "version", 1, 1, 1L << 30, &version, err))) goto done;
    if (version > SDN_TRACE_VERSION) {
        rc = sdn_fail(err, SDN_EUNSUP, "%s:%d: field 'version': %ld is newer than the supported %d", name, line, version, SDN_TRACE_VERSION);
        goto done;
    }
    if ((rc = jl_str(&rd, o, "id", 1, &id, err)) || (rc = jl_str(&rd, o, "task", 1, &task, err)) ||
        (rc = jl_str(&rd, o, "group", 0, &group, err)) || (rc = jl_str(&rd, o, "model", 0, &model, err)) ||
        (rc = jl_str(&rd, o, "model_fingerprint", 0, &fp, err)) || (rc = jl_str(&rd, o, "tokenizer", 0, &tok, err)) ||
        (rc = jl_str(&rd, o, "stop", 0, &stop, err)) || (rc = jl_str(&rd, o, "decoding", 0, &dec, err)) ||
        (rc = jl_int(&rd, o, "vocab_size", 0, 1, INT32_MAX, &vocab, err)) ||
        (rc = jl_int(&rd, o, "eog_token", 0, 0, INT32_MAX - 1, &eog, err)) ||
        (rc = jl_int(&rd, o, "max_new_tokens", 0, 0, SDN_TRACE_MAX_TOKENS, &max_new, err)) ||
        (rc = jl_int(&rd, o, "preds_k", 0, 0, SDN_TRACE_MAX_K, &k, err)))
        goto done;
    if (dec && strcmp(dec, "greedy") != 0) {
        rc = jl_error(&rd, "decoding", err, "\"%s\": only greedy traces can be replayed", dec);
        goto done;
    }
    if (!stop || !strcmp(stop, "unknown")) t->stop = SDN_STOP_UNKNOWN;
    else if (!strcmp(stop, "eog")) t->stop = SDN_STOP_EOG;
    else if (!strcmp(stop, "length")) t->stop = SDN_STOP_LENGTH;
    else { rc = jl_error(&rd, "stop", err, "\"%s\", expected \"eog\", \"length\" or \"unknown\"", stop); goto done; }
    t->id = strdup(id);
    t->task = strdup(task);
    t->group = dup_opt(group);
    t->model = dup_opt(model);
    t->model_fp = dup_opt(fp);
    t->tokenizer = dup_opt(tok);
    if (!t->id || !t->task || (group && !t->group) || (model && !t->model) || (fp && !t->model_fp) || (tok && !t->tokenizer)) {
        rc = sdn_fail(err, SDN_ENOMEM, "trace: out of memory");
        goto done;
    }
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(o, "source");
    if (src && !cJSON_IsNull(src)) t->source_json = cJSON_PrintUnformatted(src);
    t->vocab_size = (int)vocab;
    t->eog_token = (int32_t)eog;
    t->max_new = (int)max_new;
    t->preds_k = (int)k;
    if ((rc = jl_int_array(&rd, o, "context_tokens", 1, 0, INT32_MAX - 1, SDN_TRACE_MAX_TOKENS, &t->ctx, &t->n_ctx, err)) ||
        (rc = jl_int_array(&rd, o, "output_tokens", 1, 0, INT32_MAX - 1, SDN_TRACE_MAX_TOKENS, &t->out, &t->n_out, err)))
        goto done;
    if (t->n_ctx < 1) { rc = jl_error(&rd, "context_tokens", err, "empty (the prompt has at least one token)"); goto done; }
    if ((rc = read_preds(&rd, o, t, err)) || (rc = read_out_preds(&rd, o, t, err))) goto done;
    rc = check_row(&rd, t, err);
done:
    cJSON_Delete(o);
    if (rc) sdn_trace_row_free(t);
    return rc;
}

int sdn_trace_load(sdn_trace *t, const char *path, sdn_err *err) {
    jl_reader rd;
    int rc = jl_open(&rd, path, err);
    if (rc) return rc;
    const char *line;
    size_t n;
    int first = t->n, any = 0;
    while (jl_next(&rd, &line, &n)) {
        any = 1;
        if (t->n == t->cap) {
            int nc = t->cap ? t->cap * 2 : 32;
            sdn_trace_row *nr = realloc(t->rows, (size_t)nc * sizeof *nr);
            if (!nr) { rc = sdn_fail(err, SDN_ENOMEM, "%s: out of memory", path); break; }
            t->rows = nr;
            t->cap = nc;
        }
        if ((rc = sdn_trace_parse(path, rd.line, line, n, &t->rows[t->n], err))) break;
        t->n++;
    }
    if (!rc && !any) rc = sdn_fail(err, SDN_EFORMAT, "%s: empty trace (no rows)", path);
    if (rc)
        while (t->n > first) sdn_trace_row_free(&t->rows[--t->n]);
    jl_close(&rd);
    return rc;
}

int sdn_trace_vocab(const sdn_trace_row *r) {
    if (r->vocab_size > 0) return r->vocab_size;
    int32_t m = 0;
    const size_t K = (size_t)r->preds_k;
    for (int i = 0; i < r->n_ctx; i++) m = r->ctx[i] > m ? r->ctx[i] : m;
    for (int i = 0; i < r->n_out; i++) m = r->out[i] > m ? r->out[i] : m;
    for (size_t i = 0; r->pred_tok && r->n_ctx > 1 && i < (size_t)(r->n_ctx - 1) * K; i++) m = r->pred_tok[i] > m ? r->pred_tok[i] : m;
    for (size_t i = 0; r->out_pred_tok && i < (size_t)r->n_out * K; i++) m = r->out_pred_tok[i] > m ? r->out_pred_tok[i] : m;
    return m + 1;
}

static void write_ids(FILE *f, const int32_t *a, int n) {
    fputc('[', f);
    for (int i = 0; i < n; i++) fprintf(f, i ? ",%d" : "%d", a[i]);
    fputc(']', f);
}

static void write_opt_str(FILE *f, const char *key, const char *v) {
    fprintf(f, ",\"%s\":", key);
    if (v) jl_write_str(f, v);
    else fputs("null", f);
}

int sdn_trace_write(FILE *f, const sdn_trace_row *r, sdn_err *err) {
    int rc = sdn_trace_validate(r, err);
    if (rc) return rc;
    fprintf(f, "{\"format\":\"sdnpu-trace\",\"version\":%d,\"id\":", SDN_TRACE_VERSION);
    jl_write_str(f, r->id);
    fputs(",\"task\":", f);
    jl_write_str(f, r->task);
    write_opt_str(f, "group", r->group);
    write_opt_str(f, "model", r->model);
    write_opt_str(f, "model_fingerprint", r->model_fp);
    write_opt_str(f, "tokenizer", r->tokenizer);
    if (r->vocab_size > 0) fprintf(f, ",\"vocab_size\":%d", r->vocab_size);
    fputs(",\"decoding\":\"greedy\",\"stop\":", f);
    jl_write_str(f, sdn_trace_stop_name(r->stop));
    if (r->eog_token >= 0) fprintf(f, ",\"eog_token\":%d", r->eog_token);
    else fputs(",\"eog_token\":null", f);
    if (r->max_new > 0) fprintf(f, ",\"max_new_tokens\":%d", r->max_new);
    else fputs(",\"max_new_tokens\":null", f);
    if (r->source_json) fprintf(f, ",\"source\":%s", r->source_json);
    fputs(",\"context_tokens\":", f);
    write_ids(f, r->ctx, r->n_ctx);
    fputs(",\"output_tokens\":", f);
    write_ids(f, r->out, r->n_out);
    fprintf(f, ",\"preds_k\":%d", r->preds_k);
    if (r->preds_k) {
        int K = r->preds_k;
        fputs(",\"pred_tokens\":[", f);
        for (int p = 0; p < r->n_ctx - 1; p++) {
            if (p) fputc(',', f);
            write_ids(f, r->pred_tok + (size_t)p * K, K);
        }
        fputs("],\"pred_probs\":[", f);
        for (int p = 0; p < r->n_ctx - 1; p++) {
            fputs(p ? ",[" : "[", f);
            for (int j = 0; j < K; j++) fprintf(f, j ? ",%.9g" : "%.9g", (double)r->pred_prob[(size_t)p * K + j]);
            fputc(']', f);
        }
        fputc(']', f);
        if (r->out_pred_tok) {
            fputs(",\"output_pred_tokens\":[", f);
            for (int j = 0; j < r->n_out; j++) {
                if (j) fputc(',', f);
                write_ids(f, r->out_pred_tok + (size_t)j * K, K);
            }
            fputc(']', f);
        }
    }
    fputs("}\n", f);
    if (ferror(f)) return sdn_fail(err, SDN_EIO, "trace: write error");
    return SDN_OK;
}

void sdn_trace_filter(sdn_trace *t, const char *tasks, int limit) {
    int w = 0;
    for (int i = 0; i < t->n; i++) {
        sdn_trace_row *r = &t->rows[i];
        int keep = 1;
        if (tasks && tasks[0]) {
            keep = 0;
            size_t l = strlen(r->task);
            for (const char *p = tasks; *p;) {
                const char *c = strchr(p, ',');
                size_t k = c ? (size_t)(c - p) : strlen(p);
                if (k == l && !strncmp(p, r->task, l)) { keep = 1; break; }
                if (!c) break;
                p = c + 1;
            }
        }
        if (keep && limit > 0) {
            int seen = 0;
            for (int j = 0; j < w; j++) seen += !strcmp(t->rows[j].task, r->task);
            keep = seen < limit;
        }
        if (keep) t->rows[w++] = *r;
        else sdn_trace_row_free(r);
    }
    t->n = w;
}
