/* jsonl.c - JSON Lines reading and writing helpers shared by the readers of datasets/
 * (see jsonl.h). Lines end at '\n' (a preceding '\r' is dropped); lines holding only
 * whitespace are skipped but still counted, so line numbers match an editor's. */
#include "common/jsonl.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/sdn_util.h"

int jl_open(jl_reader *r, const char *path, sdn_err *err) {
    memset(r, 0, sizeof *r);
    r->name = path;
    int rc = sdn_read_file(path, &r->data, &r->len, err);
    if (rc) return rc;
    r->owned = 1;
    return SDN_OK;
}

void jl_open_buf(jl_reader *r, const char *name, const char *data, size_t len) {
    memset(r, 0, sizeof *r);
    r->name = name;
    r->data = (char *)data;
    r->len = len;
}

void jl_close(jl_reader *r) {
    if (r->owned) free(r->data);
    memset(r, 0, sizeof *r);
}

int jl_next(jl_reader *r, const char **line, size_t *len) {
    while (r->pos < r->len) {
        const char *s = r->data + r->pos;
        const char *nl = memchr(s, '\n', r->len - r->pos);
        size_t n = nl ? (size_t)(nl - s) : r->len - r->pos;
        r->pos += n + (nl ? 1 : 0);
        r->line++;
        size_t m = n;
        if (m && s[m - 1] == '\r') m--;
        size_t i = 0;
        while (i < m && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) i++;
        if (i == m) continue;
        *line = s;
        *len = m;
        return 1;
    }
    return 0;
}

int jl_error(const jl_reader *r, const char *field, sdn_err *err, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char where[600];
    if (r->line > 0) snprintf(where, sizeof where, "%s:%d", r->name, r->line);
    else snprintf(where, sizeof where, "%s", r->name);
    if (field) return sdn_fail(err, SDN_EFORMAT, "%s: field '%s': %s", where, field, msg);
    return sdn_fail(err, SDN_EFORMAT, "%s: %s", where, msg);
}

/* Upper bound on the JSON values of a line (commas, '[' and '{' outside strings, plus 1),
 * counted without allocating; stops counting past `limit`. */
static size_t count_values(const char *s, size_t n, size_t limit) {
    size_t v = 1;
    int in_str = 0;
    for (size_t i = 0; i < n && v <= limit; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
        } else if (c == '"') in_str = 1;
        else if (c == ',' || c == '[' || c == '{') v++;
    }
    return v;
}

int jl_parse(const jl_reader *r, const char *line, size_t len, cJSON **out, sdn_err *err) {
    const char *end = NULL;
    *out = NULL;
    /* resource limits before the parser allocates (a cJSON node per value is ~64 bytes) */
    if (len > JL_MAX_LINE_BYTES) return jl_error(r, NULL, err, "line of %zu bytes is longer than the limit of %d bytes", len, JL_MAX_LINE_BYTES);
    if (count_values(line, len, JL_MAX_LINE_VALUES) > JL_MAX_LINE_VALUES)
        return jl_error(r, NULL, err, "line holds more than %d JSON values (the limit per line; e.g. a token array that long)", JL_MAX_LINE_VALUES);
    cJSON *j = cJSON_ParseWithLengthOpts(line, len, &end, 0);
    if (!j) {
        size_t at = end && end >= line && end <= line + len ? (size_t)(end - line) : 0;
        return jl_error(r, NULL, err, "not valid JSON (error near byte %zu of the line)", at + 1);
    }
    /* only whitespace may follow the value */
    if (end) {
        while (end < line + len && (*end == ' ' || *end == '\t' || *end == '\r')) end++;
        if (end < line + len) {
            cJSON_Delete(j);
            return jl_error(r, NULL, err, "text after the JSON value (byte %zu of the line); one object per line", (size_t)(end - line) + 1);
        }
    }
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return jl_error(r, NULL, err, "expected a JSON object, one per line");
    }
    *out = j;
    return SDN_OK;
}

static const cJSON *field_of(const cJSON *obj, const char *field) { return cJSON_GetObjectItemCaseSensitive(obj, field); }

int jl_str(const jl_reader *r, const cJSON *obj, const char *field, int required, const char **out, sdn_err *err) {
    const cJSON *v = field_of(obj, field);
    *out = NULL;
    if (!v || cJSON_IsNull(v)) return required ? jl_error(r, field, err, v ? "is null, expected a string" : "missing") : SDN_OK;
    if (!cJSON_IsString(v) || !v->valuestring) return jl_error(r, field, err, "expected a string");
    *out = v->valuestring;
    return SDN_OK;
}

int jl_is_int(const cJSON *v, long lo, long hi, long *out) {
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d) || d < (double)lo || d > (double)hi) return 0;
    *out = (long)d;
    return 1;
}

int jl_int(const jl_reader *r, const cJSON *obj, const char *field, int required, long lo, long hi, long *out, sdn_err *err) {
    const cJSON *v = field_of(obj, field);
    if (!v || cJSON_IsNull(v)) return required ? jl_error(r, field, err, v ? "is null, expected an integer" : "missing") : SDN_OK;
    long x;
    if (!jl_is_int(v, lo, hi, &x)) return jl_error(r, field, err, "expected an integer in [%ld, %ld]", lo, hi);
    *out = x;
    return SDN_OK;
}

int jl_num(const jl_reader *r, const cJSON *obj, const char *field, int required, double lo, double hi, double *out, sdn_err *err) {
    const cJSON *v = field_of(obj, field);
    if (!v || cJSON_IsNull(v)) return required ? jl_error(r, field, err, v ? "is null, expected a number" : "missing") : SDN_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
        return jl_error(r, field, err, "expected a number in [%g, %g]", lo, hi);
    *out = v->valuedouble;
    return SDN_OK;
}

int jl_int_array(const jl_reader *r, const cJSON *obj, const char *field, int required, long lo, long hi, int max_n, int32_t **out,
                 int *n, sdn_err *err) {
    const cJSON *v = field_of(obj, field);
    *out = NULL;
    *n = 0;
    if (!v || cJSON_IsNull(v)) return required ? jl_error(r, field, err, v ? "is null, expected an array" : "missing") : SDN_OK;
    if (!cJSON_IsArray(v)) return jl_error(r, field, err, "expected an array of integers");
    int cnt = cJSON_GetArraySize(v);
    if (cnt > max_n) return jl_error(r, field, err, "%d elements, more than the %d allowed", cnt, max_n);
    int32_t *a = malloc(((size_t)cnt + 1) * sizeof *a);
    if (!a) return sdn_fail(err, SDN_ENOMEM, "%s:%d: field '%s': out of memory", r->name, r->line, field);
    int i = 0;
    for (const cJSON *e = v->child; e; e = e->next, i++) {
        long x;
        if (!jl_is_int(e, lo, hi, &x)) {
            free(a);
            return jl_error(r, field, err, "element %d is not an integer in [%ld, %ld]", i, lo, hi);
        }
        a[i] = (int32_t)x;
    }
    *out = a;
    *n = cnt;
    return SDN_OK;
}

/* Length of the well-formed UTF-8 sequence at s (n bytes available), 0 if ill-formed. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t l;
    unsigned min;
    if (c >= 0xC2 && c <= 0xDF) l = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) l = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) l = 4, min = 0x10000;
    else return 0;
    if (l > n) return 0;
    unsigned cp = c & (l == 2 ? 0x1F : l == 3 ? 0x0F : 0x07);
    for (size_t i = 1; i < l; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return l;
}

void jl_write_str(FILE *f, const char *s) {
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t n = strlen((const char *)p);
    fputc('"', f);
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        if (c == '"') fputs("\\\"", f), i++;
        else if (c == '\\') fputs("\\\\", f), i++;
        else if (c == '\n') fputs("\\n", f), i++;
        else if (c == '\r') fputs("\\r", f), i++;
        else if (c == '\t') fputs("\\t", f), i++;
        else if (c < 0x20 || c == 0x7F) fprintf(f, "\\u%04x", c), i++;
        else if (c < 0x80) fputc((int)c, f), i++;
        else {
            size_t l = utf8_len(p + i, n - i);
            if (l) fwrite(p + i, 1, l, f), i += l;
            else fputs("\\ufffd", f), i++;
        }
    }
    fputc('"', f);
}

void jl_hex64(uint64_t v, char buf[17]) { snprintf(buf, 17, "%016llx", (unsigned long long)v); }
