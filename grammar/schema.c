/* schema.c - JSON schema -> GBNF text for the rule compiler (gbnf.c), in one canonical
 * layout: the one Python's json.dumps writes ({"id": 10, "action": "tap"}: one space after
 * ':' and ',', no other whitespace, properties in the schema's order, optional ones
 * skippable). Supported keywords, ignored annotations and refused keywords are listed in
 * docs/constrained.md; strings with a "pattern" (or long length bounds) become an internal
 * element checked by PCRE2 (match.c). The schema is parsed with cJSON; nesting, sizes and
 * repetition bounds are limited. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/sdn_str.h"
#include "grammar/grammar_int.h"

#define SCHEMA_MAX_DEPTH 64
#define SMALL_LEN 64 /* length bounds up to this are grammar repetitions, beyond: the string element */

typedef struct defent {
    char *ptr; /* "#/$defs/name" as written in $ref */
    cJSON *node;
    char rule[48];
} defent;

typedef struct C {
    sdn_str g;     /* the grammar being written */
    int next;      /* rule counter */
    unsigned used; /* primitive rules used */
    gpat *pats;
    uint32_t n_pats, cap_pats;
    defent *defs;
    int n_defs;
    sdn_err *err;
    int failed;
} C;

enum { U_CHAR = 1, U_STRING = 2, U_INT = 4, U_NUMBER = 8, U_VALUE = 16 };

static int cfail(C *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int cfail(C *c, int code, const char *fmt, ...) {
    if (c->failed) return -1;
    c->failed = 1;
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sdn_fail(c->err, code, "json_schema: %s", msg);
    return -1;
}

/* JSON pointer of child key under ptr (RFC 6901 escapes). */
static void ptr_key(char *out, size_t cap, const char *ptr, const char *key) {
    size_t n = (size_t)snprintf(out, cap, "%s/", ptr);
    for (const char *k = key; *k && n + 3 < cap; k++) {
        if (*k == '~') { out[n++] = '~'; out[n++] = '0'; }
        else if (*k == '/') { out[n++] = '~'; out[n++] = '1'; }
        else out[n++] = *k;
    }
    if (n >= cap) n = cap - 1;
    out[n] = 0;
}
static const char *ptr_show(const char *ptr) { return *ptr ? ptr : "/"; }

/* GBNF literal of bytes s[0..n) (UTF-8). */
static void lit(sdn_str *b, const char *s, size_t n) {
    sdn_str_add(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"') sdn_str_add(b, "\\\"");
        else if (ch == '\\') sdn_str_add(b, "\\\\");
        else if (ch < 0x20 || ch == 0x7F) sdn_str_printf(b, "\\x%02X", ch);
        else sdn_str_addn(b, (const char *)&ch, 1);
    }
    sdn_str_add(b, "\"");
}

/* ---- canonical JSON text (json.dumps layout, non-ASCII as UTF-8) ---- */

static void json_str(sdn_str *b, const char *s) {
    sdn_str_add(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': sdn_str_add(b, "\\\""); break;
        case '\\': sdn_str_add(b, "\\\\"); break;
        case '\n': sdn_str_add(b, "\\n"); break;
        case '\r': sdn_str_add(b, "\\r"); break;
        case '\t': sdn_str_add(b, "\\t"); break;
        case '\b': sdn_str_add(b, "\\b"); break;
        case '\f': sdn_str_add(b, "\\f"); break;
        default:
            if (*p < 0x20) sdn_str_printf(b, "\\u%04x", *p);
            else sdn_str_addn(b, (const char *)p, 1);
        }
    }
    sdn_str_add(b, "\"");
}

static void json_num(sdn_str *b, double v) {
    if (v == floor(v) && fabs(v) < 1e15) {
        sdn_str_printf(b, "%.0f", v);
        return;
    }
    char t[64];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(t, sizeof t, "%.*g", prec, v);
        if (strtod(t, NULL) == v) break;
    }
    sdn_str_add(b, t);
}

static int json_dump(sdn_str *b, const cJSON *v, int depth) {
    if (depth > SCHEMA_MAX_DEPTH) return -1;
    if (cJSON_IsNull(v)) sdn_str_add(b, "null");
    else if (cJSON_IsTrue(v)) sdn_str_add(b, "true");
    else if (cJSON_IsFalse(v)) sdn_str_add(b, "false");
    else if (cJSON_IsNumber(v)) {
        if (!isfinite(v->valuedouble)) return -1;
        json_num(b, v->valuedouble);
    } else if (cJSON_IsString(v)) json_str(b, v->valuestring);
    else if (cJSON_IsArray(v)) {
        sdn_str_add(b, "[");
        int k = 0;
        for (const cJSON *e = v->child; e; e = e->next, k++) {
            if (k) sdn_str_add(b, ", ");
            if (json_dump(b, e, depth + 1)) return -1;
        }
        sdn_str_add(b, "]");
    } else if (cJSON_IsObject(v)) {
        sdn_str_add(b, "{");
        int k = 0;
        for (const cJSON *e = v->child; e; e = e->next, k++) {
            if (k) sdn_str_add(b, ", ");
            json_str(b, e->string);
            sdn_str_add(b, ": ");
            if (json_dump(b, e, depth + 1)) return -1;
        }
        sdn_str_add(b, "}");
    } else return -1;
    return 0;
}

/* ---- keywords ---- */

static const char *const k_annot[] = {"title", "description", "$schema", "$id", "$comment", "default", "examples", "strict", NULL};
static const char *const k_known[] = {"type", "properties", "required", "additionalProperties", "enum", "const", "items",
                                      "minItems", "maxItems", "pattern", "minLength", "maxLength", "anyOf", "$ref",
                                      "$defs", "definitions", NULL};

static int in_list(const char *const *l, const char *s) {
    for (int i = 0; l[i]; i++)
        if (!strcmp(l[i], s)) return 1;
    return 0;
}

static int new_rule_name(C *c, char *out, size_t cap) {
    snprintf(out, cap, "s%d", c->next++);
    return 0;
}

/* Can the pattern tell non-ASCII characters apart? Without PCRE2_UCP, \\w \\d \\s, POSIX
 * classes and \\b are ASCII-only, so every non-ASCII code point behaves the same unless the
 * pattern names one: a literal non-ASCII character, a code point escape (\\x{..}, \\xHH
 * from 80, \\o{..}, \\N{U+..}, octal), a Unicode property (\\p \\P \\X) or caseless matching
 * (Unicode case folding). When it cannot, one representative decides for a whole range of
 * code points (the first byte of a character the matcher has not completed yet). */
static int uniform_pattern(const char *p) {
    for (const unsigned char *q = (const unsigned char *)p; *q; q++) {
        if (*q >= 0x80) return 0;
        if (*q == '(' && q[1] == '?') {
            const unsigned char *r = q + 2;
            while (*r && *r != ')' && *r != ':') {
                if (*r == 'i') return 0;
                r++;
            }
        }
        if (*q == '\\' && q[1]) {
            unsigned char e = q[1];
            if (e == 'p' || e == 'P' || e == 'X' || e == 'o' || e == 'N' || (e >= '0' && e <= '9') || e == 'u' || e == 'U' || e == 'c') return 0;
            if (e == 'x' && (q[2] == '{' || (q[2] >= '8' && q[2] <= '9') || (q[2] >= 'a' && q[2] <= 'f') || (q[2] >= 'A' && q[2] <= 'F'))) return 0;
            q++;
        }
    }
    return 1;
}

static int add_pat(C *c, const char *pattern, uint32_t mn, uint32_t mx, const char *ptr) {
    if (c->n_pats >= 4096) return cfail(c, SDN_EINVAL, "too many patterns (more than 4096) at %s", ptr_show(ptr));
    if (c->n_pats == c->cap_pats) {
        uint32_t nc = c->cap_pats ? c->cap_pats * 2 : 8;
        gpat *q = realloc(c->pats, sizeof *q * nc);
        if (!q) return cfail(c, SDN_ENOMEM, "out of memory");
        c->pats = q;
        c->cap_pats = nc;
    }
    gpat *p = &c->pats[c->n_pats];
    memset(p, 0, sizeof *p);
    p->min = mn;
    p->max = mx;
    if (pattern) {
        int ec;
        PCRE2_SIZE eo;
        p->re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &ec, &eo, NULL);
        if (!p->re) {
            PCRE2_UCHAR m[256];
            pcre2_get_error_message(ec, m, sizeof m);
            return cfail(c, SDN_EINVAL, "\"pattern\" at %s: %s at offset %zu", ptr_show(ptr), (const char *)m, (size_t)eo);
        }
        uint32_t opts = 0;
        pcre2_pattern_info(p->re, PCRE2_INFO_ALLOPTIONS, &opts);
        p->anchored = (opts & PCRE2_ANCHORED) != 0;
        p->uniform = uniform_pattern(pattern);
    }
    return (int)c->n_pats++;
}

static void use_prims(C *c, unsigned u) { c->used |= u; }

static int compile(C *c, const cJSON *node, const char *ptr, int depth, char *rule, size_t rcap);

static int get_uint(C *c, const cJSON *o, const char *kw, const char *ptr, uint32_t *v, int *has) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, kw);
    *has = 0;
    if (!x) return 0;
    if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble != floor(x->valuedouble))
        return cfail(c, SDN_EINVAL, "\"%s\" must be a non-negative integer at %s", kw, ptr_show(ptr));
    if (x->valuedouble > 1e9) *v = 1000000000u;
    else *v = (uint32_t)x->valuedouble;
    *has = 1;
    return 0;
}

/* Does cJSON value v have JSON type t? */
static int has_type(const cJSON *v, const char *t) {
    if (!strcmp(t, "string")) return cJSON_IsString(v);
    if (!strcmp(t, "number")) return cJSON_IsNumber(v);
    if (!strcmp(t, "integer")) return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) && isfinite(v->valuedouble);
    if (!strcmp(t, "boolean")) return cJSON_IsBool(v);
    if (!strcmp(t, "null")) return cJSON_IsNull(v);
    if (!strcmp(t, "object")) return cJSON_IsObject(v);
    if (!strcmp(t, "array")) return cJSON_IsArray(v);
    return 0;
}

static int valid_type_name(const char *t) {
    static const char *const names[] = {"string", "number", "integer", "boolean", "null", "object", "array", NULL};
    return in_list(names, t);
}

static uint32_t utf8_len(const char *s) {
    uint32_t k = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) k += (*p & 0xC0) != 0x80;
    return k;
}

/* "not one of keys" key text rules (after the opening quote, with the closing one). */
typedef struct knode {
    uint32_t cp;
    int child, sib, term;
} knode;

static int decode_cp(const unsigned char **p) {
    const unsigned char *u = *p;
    uint32_t c = u[0];
    int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (n > 1) {
        c &= n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07;
        for (int k = 1; k < n; k++) c = (c << 6) | (u[k] & 0x3F);
    }
    *p += n;
    return (int)c;
}

static void emit_knode(C *c, knode *kn, int t, int id) {
    sdn_str *b = &c->g;
    sdn_str_printf(b, "k%d-%d ::= [^\"\\\\\\x00-\\x1F", id, t);
    for (int ch = kn[t].child; ch >= 0; ch = kn[ch].sib) sdn_str_printf(b, "\\U%08X", kn[ch].cp);
    sdn_str_add(b, "] json-char* \"\\\"\"");
    for (int ch = kn[t].child; ch >= 0; ch = kn[ch].sib) sdn_str_printf(b, " | [\\U%08X] k%d-%d", kn[ch].cp, id, ch);
    if (!kn[t].term) sdn_str_add(b, " | \"\\\"\"");
    sdn_str_add(b, "\n");
    for (int ch = kn[t].child; ch >= 0; ch = kn[ch].sib) emit_knode(c, kn, ch, id);
}

static int key_rule(C *c, const cJSON *props, const char *ptr, char *out, size_t cap) {
    use_prims(c, U_CHAR | U_STRING);
    if (!props || !props->child) {
        snprintf(out, cap, "json-string");
        return 0;
    }
    int nn = 1, capn = 16;
    knode *kn = malloc(sizeof *kn * (size_t)capn);
    if (!kn) return cfail(c, SDN_ENOMEM, "out of memory");
    kn[0] = (knode){0, -1, -1, 0};
    for (const cJSON *p = props->child; p; p = p->next) {
        for (const unsigned char *q = (const unsigned char *)p->string; *q; q++)
            if (*q == '"' || *q == '\\' || *q < 0x20) {
                free(kn);
                return cfail(c, SDN_EINVAL, "additionalProperties beside a property name that needs JSON escapes is not supported at %s", ptr_show(ptr));
            }
        int t = 0;
        const unsigned char *q = (const unsigned char *)p->string;
        while (*q) {
            uint32_t cp = (uint32_t)decode_cp(&q);
            int ch = kn[t].child;
            while (ch >= 0 && kn[ch].cp != cp) ch = kn[ch].sib;
            if (ch < 0) {
                if (nn == capn) {
                    capn *= 2;
                    knode *z = realloc(kn, sizeof *kn * (size_t)capn);
                    if (!z) { free(kn); return cfail(c, SDN_ENOMEM, "out of memory"); }
                    kn = z;
                }
                kn[nn] = (knode){cp, -1, kn[t].child, 0};
                kn[t].child = nn;
                ch = nn++;
            }
            t = ch;
        }
        kn[t].term = 1;
    }
    int id = c->next++;
    emit_knode(c, kn, 0, id);
    free(kn);
    snprintf(out, cap, "\"\\\"\" k%d-0", id);
    return 0;
}

static int compile_members(C *c, const cJSON *o, const cJSON *props, const cJSON *req, const char *ptr, int depth, char *rule, size_t rcap);

static int compile_object(C *c, const cJSON *o, const char *ptr, int depth, char *rule, size_t rcap) {
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(o, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(o, "required");
    if (props && !cJSON_IsObject(props)) return cfail(c, SDN_EINVAL, "\"properties\" must be an object at %s", ptr_show(ptr));
    if (req) {
        if (!cJSON_IsArray(req)) return cfail(c, SDN_EINVAL, "\"required\" must be an array of strings at %s", ptr_show(ptr));
        for (const cJSON *r = req->child; r; r = r->next)
            if (!cJSON_IsString(r)) return cfail(c, SDN_EINVAL, "\"required\" must be an array of strings at %s", ptr_show(ptr));
    }
    /* a required name without a schema in "properties" is a property of any value */
    cJSON *merged = NULL;
    if (req)
        for (const cJSON *r = req->child; r; r = r->next)
            if (!props || !cJSON_GetObjectItemCaseSensitive(props, r->valuestring)) {
                if (!merged) {
                    merged = props ? cJSON_Duplicate(props, 1) : cJSON_CreateObject();
                    if (!merged) return cfail(c, SDN_ENOMEM, "out of memory");
                }
                if (!cJSON_GetObjectItemCaseSensitive(merged, r->valuestring) && !cJSON_AddTrueToObject(merged, r->valuestring)) {
                    cJSON_Delete(merged);
                    return cfail(c, SDN_ENOMEM, "out of memory");
                }
            }
    int rc = compile_members(c, o, merged ? merged : props, req, ptr, depth, rule, rcap);
    cJSON_Delete(merged);
    return rc;
}

static int compile_members(C *c, const cJSON *o, const cJSON *props, const cJSON *req, const char *ptr, int depth, char *rule, size_t rcap) {
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(o, "additionalProperties");
    char sub[1100], tmp[1100];
    /* extra members: value rule, or none */
    char extra_val[64] = "";
    int has_props = props && props->child;
    if (addl && !cJSON_IsBool(addl) && !cJSON_IsObject(addl))
        return cfail(c, SDN_EINVAL, "\"additionalProperties\" must be a boolean or a schema at %s", ptr_show(ptr));
    if ((!addl && !has_props) || cJSON_IsTrue(addl)) {
        use_prims(c, U_VALUE);
        snprintf(extra_val, sizeof extra_val, "json-value");
    } else if (cJSON_IsObject(addl)) {
        ptr_key(tmp, sizeof tmp, ptr, "additionalProperties");
        if (compile(c, addl, tmp, depth + 1, extra_val, sizeof extra_val)) return -1;
    }
    int oid = c->next++;
    int n = 0;
    if (props)
        for (const cJSON *p = props->child; p; p = p->next) n++;
    /* values of the declared properties */
    char (*vr)[64] = calloc((size_t)n + 1, sizeof *vr);
    if (!vr) return cfail(c, SDN_ENOMEM, "out of memory");
    int i = 0;
    if (props)
        for (const cJSON *p = props->child; p; p = p->next, i++) {
            ptr_key(tmp, sizeof tmp, ptr, "properties");
            ptr_key(sub, sizeof sub, tmp, p->string);
            if (compile(c, p, sub, depth + 1, vr[i], sizeof vr[i])) { free(vr); return -1; }
        }
    sdn_str *b = &c->g;
    char key[1100];
    if (extra_val[0]) {
        if (key_rule(c, props, ptr, key, sizeof key)) { free(vr); return -1; }
        sdn_str_printf(b, "o%d-e ::= (\", \" %s \": \" %s)*\n", oid, key, extra_val);
        sdn_str_printf(b, "o%d-a%d ::= (%s \": \" %s o%d-e)?\n", oid, n, key, extra_val, oid);
        sdn_str_printf(b, "o%d-b%d ::= o%d-e\n", oid, n, oid);
    } else {
        sdn_str_printf(b, "o%d-a%d ::= \"\"\n", oid, n);
        sdn_str_printf(b, "o%d-b%d ::= \"\"\n", oid, n);
    }
    /* properties in reverse: a_i (nothing written yet), b_i (something written) */
    const cJSON **arr = calloc((size_t)n + 1, sizeof *arr);
    if (!arr) { free(vr); return cfail(c, SDN_ENOMEM, "out of memory"); }
    i = 0;
    if (props)
        for (const cJSON *p = props->child; p; p = p->next) arr[i++] = p;
    for (i = n - 1; i >= 0; i--) {
        int required = 0;
        if (req)
            for (const cJSON *r = req->child; r; r = r->next)
                if (!strcmp(r->valuestring, arr[i]->string)) required = 1;
        sdn_str kv = {0};
        json_str(&kv, arr[i]->string);
        sdn_str_add(&kv, ": ");
        if (kv.oom) { free(arr); free(vr); return cfail(c, SDN_ENOMEM, "out of memory"); }
        sdn_str_printf(b, "o%d-b%d ::= \", \" ", oid, i);
        lit(b, kv.p, kv.n);
        sdn_str_printf(b, " %s o%d-b%d", vr[i], oid, i + 1);
        if (!required) sdn_str_printf(b, " | o%d-b%d", oid, i + 1);
        sdn_str_printf(b, "\no%d-a%d ::= ", oid, i);
        lit(b, kv.p, kv.n);
        sdn_str_printf(b, " %s o%d-b%d", vr[i], oid, i + 1);
        if (!required) sdn_str_printf(b, " | o%d-a%d", oid, i + 1);
        sdn_str_add(b, "\n");
        free(kv.p);
    }
    free(arr);
    free(vr);
    new_rule_name(c, rule, rcap);
    sdn_str_printf(b, "%s ::= \"{\" o%d-a0 \"}\"\n", rule, oid);
    return 0;
}

static int compile_array(C *c, const cJSON *o, const char *ptr, int depth, char *rule, size_t rcap) {
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(o, "items");
    char ir[64], tmp[1100];
    uint32_t mn = 0, mx = UINT32_MAX;
    int hmn, hmx;
    if (get_uint(c, o, "minItems", ptr, &mn, &hmn) || get_uint(c, o, "maxItems", ptr, &mx, &hmx)) return -1;
    if (!hmn) mn = 0;
    if (!hmx) mx = UINT32_MAX;
    if (mn > G_MAX_REPEAT || (hmx && mx > G_MAX_REPEAT))
        return cfail(c, SDN_EINVAL, "minItems/maxItems above %d are not supported at %s", G_MAX_REPEAT, ptr_show(ptr));
    if (items && cJSON_IsArray(items)) return cfail(c, SDN_EINVAL, "\"items\" as an array (tuple form) is not supported at %s", ptr_show(ptr));
    if (items) {
        ptr_key(tmp, sizeof tmp, ptr, "items");
        if (compile(c, items, tmp, depth + 1, ir, sizeof ir)) return -1;
    } else {
        use_prims(c, U_VALUE);
        snprintf(ir, sizeof ir, "json-value");
    }
    new_rule_name(c, rule, rcap);
    sdn_str *b = &c->g;
    if (mx < mn) {
        return cfail(c, SDN_EINVAL, "maxItems below minItems at %s (no array is valid)", ptr_show(ptr));
    }
    if (mx == 0) {
        sdn_str_printf(b, "%s ::= \"[]\"\n", rule);
        return 0;
    }
    char rep[64];
    uint32_t lo = mn ? mn - 1 : 0;
    if (mx == UINT32_MAX) snprintf(rep, sizeof rep, "{%u,}", lo);
    else snprintf(rep, sizeof rep, "{%u,%u}", lo, mx - 1);
    if (mn) sdn_str_printf(b, "%s ::= \"[\" %s (\", \" %s)%s \"]\"\n", rule, ir, ir, rep);
    else sdn_str_printf(b, "%s ::= \"[\" (%s (\", \" %s)%s)? \"]\"\n", rule, ir, ir, rep);
    return 0;
}

static int compile_string(C *c, const cJSON *o, const char *ptr, char *rule, size_t rcap) {
    uint32_t mn = 0, mx = UINT32_MAX;
    int hmn, hmx;
    if (get_uint(c, o, "minLength", ptr, &mn, &hmn) || get_uint(c, o, "maxLength", ptr, &mx, &hmx)) return -1;
    if (!hmx) mx = UINT32_MAX;
    if (mx < mn) return cfail(c, SDN_EINVAL, "maxLength below minLength at %s (no string is valid)", ptr_show(ptr));
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(o, "pattern");
    if (pat && !cJSON_IsString(pat)) return cfail(c, SDN_EINVAL, "\"pattern\" must be a string at %s", ptr_show(ptr));
    new_rule_name(c, rule, rcap);
    sdn_str *b = &c->g;
    if (pat || mn > SMALL_LEN || (mx != UINT32_MAX && mx > SMALL_LEN)) {
        int k = add_pat(c, pat ? pat->valuestring : NULL, mn, mx, ptr);
        if (k < 0) return -1;
        sdn_str_printf(b, "%s ::= \"\\\"\" @P%d\n", rule, k);
        return 0;
    }
    use_prims(c, U_CHAR);
    if (mx == UINT32_MAX) sdn_str_printf(b, "%s ::= \"\\\"\" json-char{%u,} \"\\\"\"\n", rule, mn);
    else sdn_str_printf(b, "%s ::= \"\\\"\" json-char{%u,%u} \"\\\"\"\n", rule, mn, mx);
    return 0;
}

static int compile_type(C *c, const cJSON *o, const char *t, const char *ptr, int depth, char *rule, size_t rcap) {
    if (!strcmp(t, "string")) return compile_string(c, o, ptr, rule, rcap);
    if (!strcmp(t, "object")) return compile_object(c, o, ptr, depth, rule, rcap);
    if (!strcmp(t, "array")) return compile_array(c, o, ptr, depth, rule, rcap);
    if (!strcmp(t, "integer")) { use_prims(c, U_INT); snprintf(rule, rcap, "json-int"); return 0; }
    if (!strcmp(t, "number")) { use_prims(c, U_NUMBER | U_INT); snprintf(rule, rcap, "json-number"); return 0; }
    if (!strcmp(t, "boolean")) { snprintf(rule, rcap, "json-bool"); c->used |= 32; return 0; }
    snprintf(rule, rcap, "json-null");
    c->used |= 64;
    return 0;
}

static int check_pattern_value(C *c, const cJSON *o, const char *s, const char *ptr, int *ok) {
    *ok = 1;
    uint32_t mn = 0, mx = UINT32_MAX;
    int h1, h2;
    if (get_uint(c, o, "minLength", ptr, &mn, &h1) || get_uint(c, o, "maxLength", ptr, &mx, &h2)) return -1;
    uint32_t l = utf8_len(s);
    if ((h1 && l < mn) || (h2 && l > mx)) *ok = 0;
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(o, "pattern");
    if (*ok && cJSON_IsString(pat)) {
        int ec;
        PCRE2_SIZE eo;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat->valuestring, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &ec, &eo, NULL);
        if (!re) return cfail(c, SDN_EINVAL, "\"pattern\" at %s does not compile", ptr_show(ptr));
        pcre2_match_data *md = pcre2_match_data_create(1, NULL);
        if (!md) { pcre2_code_free(re); return cfail(c, SDN_ENOMEM, "out of memory"); }
        int rc = pcre2_match(re, (PCRE2_SPTR)s, strlen(s), 0, 0, md, NULL);
        pcre2_match_data_free(md);
        pcre2_code_free(re);
        if (rc < 0) *ok = 0;
    }
    return 0;
}

static int compile(C *c, const cJSON *node, const char *ptr, int depth, char *rule, size_t rcap) {
    if (c->failed) return -1;
    if (depth > SCHEMA_MAX_DEPTH) return cfail(c, SDN_EINVAL, "schema nested deeper than %d at %s", SCHEMA_MAX_DEPTH, ptr_show(ptr));
    if (cJSON_IsTrue(node)) { use_prims(c, U_VALUE); snprintf(rule, rcap, "json-value"); return 0; }
    if (cJSON_IsFalse(node)) return cfail(c, SDN_EINVAL, "schema false at %s admits no value", ptr_show(ptr));
    if (!cJSON_IsObject(node)) return cfail(c, SDN_EINVAL, "a schema must be an object or a boolean at %s", ptr_show(ptr));
    int n_kw = 0;
    for (const cJSON *k = node->child; k; k = k->next) {
        if (in_list(k_annot, k->string)) continue;
        if (!in_list(k_known, k->string)) return cfail(c, SDN_EINVAL, "unsupported keyword \"%.200s\" at %s", k->string, ptr_show(ptr));
        if ((!strcmp(k->string, "$defs") || !strcmp(k->string, "definitions")) && depth > 0)
            return cfail(c, SDN_EINVAL, "\"%s\" is supported at the root only, not at %s", k->string, ptr_show(ptr));
        if (strcmp(k->string, "$defs") && strcmp(k->string, "definitions")) n_kw++;
    }
    char tmp[1100], sub[64];
    sdn_str *b = &c->g;
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(node, "$ref");
    if (ref) {
        if (n_kw > 1) return cfail(c, SDN_EINVAL, "keywords beside \"$ref\" are not supported at %s", ptr_show(ptr));
        if (!cJSON_IsString(ref)) return cfail(c, SDN_EINVAL, "\"$ref\" must be a string at %s", ptr_show(ptr));
        if (!strcmp(ref->valuestring, "#")) { snprintf(rule, rcap, "root"); return 0; }
        for (int i = 0; i < c->n_defs; i++)
            if (!strcmp(c->defs[i].ptr, ref->valuestring)) {
                snprintf(rule, rcap, "%s", c->defs[i].rule);
                return 0;
            }
        return cfail(c, SDN_EINVAL, "$ref \"%.300s\" at %s: only local references to #/$defs/NAME or #/definitions/NAME (or #) are supported, and it names none",
                     ref->valuestring, ptr_show(ptr));
    }
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(node, "anyOf");
    if (any) {
        if (n_kw > 1) return cfail(c, SDN_EINVAL, "keywords beside \"anyOf\" are not supported at %s", ptr_show(ptr));
        if (!cJSON_IsArray(any) || !any->child) return cfail(c, SDN_EINVAL, "\"anyOf\" must be a non-empty array at %s", ptr_show(ptr));
        sdn_str alt = {0};
        int i = 0;
        for (const cJSON *s = any->child; s; s = s->next, i++) {
            snprintf(sub, sizeof sub, "%d", i);
            char p2[1100];
            ptr_key(tmp, sizeof tmp, ptr, "anyOf");
            ptr_key(p2, sizeof p2, tmp, sub);
            char r[64];
            if (compile(c, s, p2, depth + 1, r, sizeof r)) { free(alt.p); return -1; }
            sdn_str_printf(&alt, "%s%s", i ? " | " : "", r);
        }
        new_rule_name(c, rule, rcap);
        sdn_str_printf(b, "%s ::= %s\n", rule, alt.p ? alt.p : "\"\"");
        int oom = alt.oom;
        free(alt.p);
        if (oom) return cfail(c, SDN_ENOMEM, "out of memory");
        return 0;
    }
    /* types asked for */
    const char *types[8];
    int nt = 0;
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(node, "type");
    if (ty) {
        if (cJSON_IsString(ty)) {
            if (!valid_type_name(ty->valuestring)) return cfail(c, SDN_EINVAL, "unknown type \"%.100s\" at %s", ty->valuestring, ptr_show(ptr));
            types[nt++] = ty->valuestring;
        } else if (cJSON_IsArray(ty) && ty->child) {
            for (const cJSON *t = ty->child; t; t = t->next) {
                if (!cJSON_IsString(t) || !valid_type_name(t->valuestring))
                    return cfail(c, SDN_EINVAL, "\"type\" must name JSON types at %s", ptr_show(ptr));
                int dup = 0;
                for (int k = 0; k < nt; k++) dup |= !strcmp(types[k], t->valuestring);
                if (!dup && nt < 8) types[nt++] = t->valuestring;
            }
        } else return cfail(c, SDN_EINVAL, "\"type\" must be a string or an array of strings at %s", ptr_show(ptr));
    }
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(node, "enum");
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(node, "const");
    if (en || cn) {
        static const char *const structural[] = {"properties", "required", "additionalProperties", "items", "minItems", "maxItems", NULL};
        for (const cJSON *k = node->child; k; k = k->next)
            if (in_list(structural, k->string))
                return cfail(c, SDN_EINVAL, "\"%s\" beside \"enum\"/\"const\" is not supported at %s", k->string, ptr_show(ptr));
        if (en && (!cJSON_IsArray(en) || !en->child)) return cfail(c, SDN_EINVAL, "\"enum\" must be a non-empty array at %s", ptr_show(ptr));
        sdn_str alt = {0};
        int cnt = 0;
        for (const cJSON *v = cn ? cn : en->child; v; v = cn ? NULL : v->next) {
            int ok = nt == 0;
            for (int k = 0; k < nt; k++) ok |= has_type(v, types[k]);
            if (ok && cn && en) {
                ok = 0;
                for (const cJSON *e = en->child; e; e = e->next) ok |= cJSON_Compare(e, cn, 1);
            }
            if (ok && cJSON_IsString(v) && check_pattern_value(c, node, v->valuestring, ptr, &ok)) { free(alt.p); return -1; }
            if (!ok) continue;
            sdn_str val = {0};
            if (json_dump(&val, v, 0) || val.oom) {
                free(val.p);
                free(alt.p);
                return cfail(c, SDN_EINVAL, "an \"enum\"/\"const\" value at %s cannot be written as JSON", ptr_show(ptr));
            }
            if (cnt++) sdn_str_add(&alt, " | ");
            lit(&alt, val.p, val.n);
            free(val.p);
        }
        if (!cnt) { free(alt.p); return cfail(c, SDN_EINVAL, "no \"enum\"/\"const\" value satisfies the schema at %s", ptr_show(ptr)); }
        new_rule_name(c, rule, rcap);
        sdn_str_printf(b, "%s ::= %s\n", rule, alt.p ? alt.p : "\"\"");
        int oom = alt.oom;
        free(alt.p);
        if (oom) return cfail(c, SDN_ENOMEM, "out of memory");
        return 0;
    }
    if (!nt) { /* types implied by the keywords present */
        static const char *const kobj[] = {"properties", "required", "additionalProperties", NULL};
        static const char *const karr[] = {"items", "minItems", "maxItems", NULL};
        static const char *const kstr[] = {"pattern", "minLength", "maxLength", NULL};
        int o = 0, a = 0, s = 0;
        for (const cJSON *k = node->child; k; k = k->next) {
            o |= in_list(kobj, k->string);
            a |= in_list(karr, k->string);
            s |= in_list(kstr, k->string);
        }
        if (o) types[nt++] = "object";
        if (a) types[nt++] = "array";
        if (s) types[nt++] = "string";
        if (!nt) { use_prims(c, U_VALUE); snprintf(rule, rcap, "json-value"); return 0; }
    }
    if (nt == 1) return compile_type(c, node, types[0], ptr, depth, rule, rcap);
    sdn_str alt = {0};
    for (int k = 0; k < nt; k++) {
        char r[64];
        if (compile_type(c, node, types[k], ptr, depth, r, sizeof r)) { free(alt.p); return -1; }
        sdn_str_printf(&alt, "%s%s", k ? " | " : "", r);
    }
    new_rule_name(c, rule, rcap);
    sdn_str_printf(b, "%s ::= %s\n", rule, alt.p ? alt.p : "\"\"");
    int oom = alt.oom;
    free(alt.p);
    if (oom) return cfail(c, SDN_ENOMEM, "out of memory");
    return 0;
}

static void emit_prims(C *c) {
    sdn_str *b = &c->g;
    unsigned u = c->used;
    if (u & U_VALUE) u |= U_STRING | U_NUMBER | U_INT | 32 | 64;
    if (u & U_STRING) u |= U_CHAR;
    if (u & U_CHAR) {
        sdn_str_add(b, "json-char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" json-hex4)\n");
        sdn_str_add(b, "json-hex4 ::= [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}\n");
    }
    if (u & U_STRING) sdn_str_add(b, "json-string ::= \"\\\"\" json-char* \"\\\"\"\n");
    if (u & (U_INT | U_NUMBER)) sdn_str_add(b, "json-int ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15})\n");
    if (u & U_NUMBER) sdn_str_add(b, "json-number ::= json-int (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?\n");
    if (u & 32) sdn_str_add(b, "json-bool ::= \"true\" | \"false\"\n");
    if (u & 64) sdn_str_add(b, "json-null ::= \"null\"\n");
    if (u & U_VALUE) {
        sdn_str_add(b, "json-value ::= json-object | json-array | json-string | json-number | json-bool | json-null\n");
        sdn_str_add(b, "json-object ::= \"{\" (json-string \": \" json-value (\", \" json-string \": \" json-value)*)? \"}\"\n");
        sdn_str_add(b, "json-array ::= \"[\" (json-value (\", \" json-value)*)? \"]\"\n");
    }
}

static char *cjson_err_msg(const char *json, size_t len, char *buf, size_t cap) {
    const char *e = cJSON_GetErrorPtr();
    size_t off = e && e >= json && e <= json + len ? (size_t)(e - json) : 0;
    snprintf(buf, cap, "malformed JSON near byte offset %zu", off);
    return buf;
}

/* Offset of the first byte that is not well-formed UTF-8, or len. */
static size_t utf8_bad(const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        unsigned c = u[i];
        int n;
        uint32_t mn;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) { n = 2; mn = 0x80; }
        else if (c >= 0xE0 && c <= 0xEF) { n = 3; mn = 0x800; }
        else if (c >= 0xF0 && c <= 0xF4) { n = 4; mn = 0x10000; }
        else return i;
        if (i + (size_t)n > len) return i;
        uint32_t v = c & (n == 2 ? 0x1Fu : n == 3 ? 0x0Fu : 0x07u);
        for (int k = 1; k < n; k++) {
            if ((u[i + k] & 0xC0) != 0x80) return i;
            v = (v << 6) | (u[i + k] & 0x3Fu);
        }
        if (v < mn || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return i;
        i += (size_t)n;
    }
    return len;
}

static int build(const char *json, size_t len, C *c, sdn_err *err) {
    memset(c, 0, sizeof *c);
    c->err = err;
    if (!json) return sdn_fail(err, SDN_EINVAL, "json_schema: no schema");
    if (len > G_MAX_TEXT) return sdn_fail(err, SDN_EINVAL, "json_schema: schema too large (%zu bytes, at most %u)", len, G_MAX_TEXT);
    if (memchr(json, 0, len)) return sdn_fail(err, SDN_EINVAL, "json_schema: malformed JSON (a NUL byte at offset %zu)", (size_t)((const char *)memchr(json, 0, len) - json));
    size_t bad = utf8_bad(json, len);
    if (bad < len) return sdn_fail(err, SDN_EINVAL, "json_schema: invalid UTF-8 at byte offset %zu", bad);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root) {
        size_t off = end && end >= json && end <= json + len ? (size_t)(end - json) : 0;
        char m[128];
        if (!end) cjson_err_msg(json, len, m, sizeof m);
        else snprintf(m, sizeof m, "malformed JSON near byte offset %zu", off);
        return sdn_fail(err, SDN_EINVAL, "json_schema: %s", m);
    }
    if (end) {
        const char *q = end;
        while (q < json + len && (*q == ' ' || *q == '\n' || *q == '\r' || *q == '\t')) q++;
        if (q < json + len) {
            cJSON_Delete(root);
            return sdn_fail(err, SDN_EINVAL, "json_schema: malformed JSON (text after the schema at byte offset %zu)", (size_t)(q - json));
        }
    }
    int rc = 0;
    /* definitions at the root */
    if (cJSON_IsObject(root)) {
        int nd = 0;
        for (int w = 0; w < 2; w++) {
            const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, w ? "definitions" : "$defs");
            if (!d) continue;
            if (!cJSON_IsObject(d)) { rc = cfail(c, SDN_EINVAL, "\"%s\" must be an object at /", w ? "definitions" : "$defs"); goto out; }
            for (const cJSON *x = d->child; x; x = x->next) nd++;
        }
        c->defs = calloc((size_t)nd + 1, sizeof *c->defs);
        if (!c->defs) { rc = cfail(c, SDN_ENOMEM, "out of memory"); goto out; }
        for (int w = 0; w < 2; w++) {
            const char *kw = w ? "definitions" : "$defs";
            const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, kw);
            if (!d) continue;
            for (cJSON *x = d->child; x; x = x->next) {
                defent *de = &c->defs[c->n_defs];
                char p[1100];
                ptr_key(p, sizeof p, w ? "#/definitions" : "#/$defs", x->string);
                de->ptr = strdup(p);
                if (!de->ptr) { rc = cfail(c, SDN_ENOMEM, "out of memory"); goto out; }
                de->node = x;
                int k = snprintf(de->rule, sizeof de->rule, "def%d-", c->n_defs);
                for (const char *q = x->string; *q && k < (int)sizeof de->rule - 1; q++)
                    if ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9')) de->rule[k++] = *q;
                de->rule[k] = 0;
                c->n_defs++;
            }
        }
    }
    char r[64];
    if (compile(c, root, "", 0, r, sizeof r)) { rc = -1; goto out; }
    if (strcmp(r, "root")) sdn_str_printf(&c->g, "root ::= %s\n", r);
    for (int i = 0; i < c->n_defs; i++) {
        char rr[64];
        if (compile(c, c->defs[i].node, c->defs[i].ptr + 1, 1, rr, sizeof rr)) { rc = -1; goto out; }
        sdn_str_printf(&c->g, "%s ::= %s\n", c->defs[i].rule, rr);
    }
    emit_prims(c);
    if (c->g.oom) rc = cfail(c, SDN_ENOMEM, "out of memory");
out:
    for (int i = 0; i < c->n_defs; i++) free(c->defs[i].ptr);
    free(c->defs);
    c->defs = NULL;
    cJSON_Delete(root);
    if (rc) {
        for (uint32_t i = 0; i < c->n_pats; i++) pcre2_code_free(c->pats[i].re);
        free(c->pats);
        free(c->g.p);
        c->pats = NULL;
        c->g.p = NULL;
        return err && err->code ? err->code : SDN_EINVAL;
    }
    return 0;
}

int sdn_schema_to_gbnf(const char *json, size_t len, char **gbnf, sdn_err *err) {
    C c;
    int rc = build(json, len, &c, err);
    if (rc) return rc;
    for (uint32_t i = 0; i < c.n_pats; i++) pcre2_code_free(c.pats[i].re);
    free(c.pats);
    *gbnf = c.g.p;
    return 0;
}

int sdn_grammar_from_schema(const char *json, size_t len, sdn_grammar **out, sdn_err *err) {
    if (!out) return sdn_fail(err, SDN_EINVAL, "json_schema: no output pointer");
    *out = NULL;
    C c;
    int rc = build(json, len, &c, err);
    if (rc) return rc;
    sdn_err inner = {0};
    rc = g_parse(c.g.p, c.g.n, 1, c.pats, c.n_pats, out, &inner);
    if (rc) {
        const char *lr = strstr(inner.msg, "left recursion in rule '");
        if (lr) {
            const char *nm = lr + 24, *q = strchr(nm, '\'');
            sdn_fail(err, rc, "json_schema: a $ref or anyOf cycle that consumes no text (through rule '%.*s' of the compiled grammar)",
                     (int)(q ? q - nm : 0), nm);
        }
        else sdn_fail(err, rc, "json_schema: %s", inner.msg);
    }
    free(c.g.p);
    return rc;
}
