/* gbnf.c - the GBNF parser (a documented subset of llama.cpp's grammar syntax, see
 * docs/constrained.md and https://github.com/ggml-org/llama.cpp/blob/master/grammars/README.md
 * for the syntax it follows; no code taken) and the rule compiler shared with the JSON schema
 * path (schema.c writes GBNF text): repetitions become generated rules, character classes
 * are normalized, undefined rules, a missing root and left recursion are refused. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"

typedef struct brule {
    char *name;
    gel *el;
    uint32_t n, cap;
    int defined;
    size_t def_pos; /* where it was defined (or, generated, its user rule's definition) */
    size_t ref_pos; /* first reference */
    int referenced;
    uint32_t owner; /* user rule a generated rule belongs to (itself for user rules) */
    uint32_t n_gen;
} brule;

typedef struct P {
    const char *s;
    size_t n, i;
    int internal;
    uint32_t n_pats;
    brule *r;
    uint32_t nr, capr;
    gclass *cls;
    uint32_t ncls, capcls;
    uint32_t *rng;
    uint32_t nrng, caprng;
    size_t total_el;
    uint32_t *ht; /* open addressing: user rule names -> id + 1 (0 empty) */
    uint32_t htcap, htn;
    sdn_err *err;
    int failed;
} P;

static void pos_lc(const char *s, size_t pos, int *line, int *col) {
    int l = 1, c = 1;
    for (size_t i = 0; i < pos; i++) {
        if (s[i] == '\n') { l++; c = 1; }
        else c++;
    }
    *line = l;
    *col = c;
}

static int perr(P *p, size_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int perr(P *p, size_t pos, const char *fmt, ...) {
    if (p->failed) return -1;
    p->failed = 1;
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int l, c;
    pos_lc(p->s, pos, &l, &c);
    sdn_fail(p->err, SDN_EINVAL, "grammar: line %d, column %d: %s", l, c, msg);
    return -1;
}

static int oom(P *p) {
    if (!p->failed) {
        p->failed = 1;
        sdn_fail(p->err, SDN_ENOMEM, "grammar: out of memory");
    }
    return -1;
}

static int grow(void **ptr, uint32_t *cap, uint32_t need, size_t elsz) {
    if (need <= *cap) return 0;
    uint32_t nc = *cap ? *cap : 8;
    while (nc < need) {
        if (nc > UINT32_MAX / 2) return -1;
        nc *= 2;
    }
    void *q = realloc(*ptr, (size_t)nc * elsz);
    if (!q) return -1;
    *ptr = q;
    *cap = nc;
    return 0;
}

static int new_rule(P *p, const char *name, size_t nlen) {
    if (grow((void **)&p->r, &p->capr, p->nr + 1, sizeof *p->r)) return oom(p);
    brule *r = &p->r[p->nr];
    memset(r, 0, sizeof *r);
    r->name = malloc(nlen + 1);
    if (!r->name) return oom(p);
    memcpy(r->name, name, nlen);
    r->name[nlen] = 0;
    r->owner = p->nr;
    return (int)p->nr++;
}

static uint32_t name_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static int find_rule(P *p, const char *name, size_t nlen) {
    if (!p->htcap) return -1;
    for (uint32_t i = name_hash(name, nlen) & (p->htcap - 1);; i = (i + 1) & (p->htcap - 1)) {
        uint32_t id = p->ht[i];
        if (!id) return -1;
        const char *nm = p->r[id - 1].name;
        if (strlen(nm) == nlen && !memcmp(nm, name, nlen)) return (int)(id - 1);
    }
}

/* A rule named in the text (user rules; generated names contain '_', never written). */
static int named_rule(P *p, const char *name, size_t nlen) {
    if (2 * (p->htn + 1) > p->htcap) {
        uint32_t nc = p->htcap ? p->htcap * 2 : 64;
        uint32_t *t = calloc(nc, sizeof *t);
        if (!t) return oom(p);
        for (uint32_t i = 0; i < p->htcap; i++)
            if (p->ht[i]) {
                const char *nm = p->r[p->ht[i] - 1].name;
                uint32_t j = name_hash(nm, strlen(nm)) & (nc - 1);
                while (t[j]) j = (j + 1) & (nc - 1);
                t[j] = p->ht[i];
            }
        free(p->ht);
        p->ht = t;
        p->htcap = nc;
    }
    int id = new_rule(p, name, nlen);
    if (id < 0) return -1;
    uint32_t j = name_hash(name, nlen) & (p->htcap - 1);
    while (p->ht[j]) j = (j + 1) & (p->htcap - 1);
    p->ht[j] = (uint32_t)id + 1;
    p->htn++;
    return id;
}

/* A generated rule, named after its user rule ("name_3"). */
static int gen_rule(P *p, uint32_t parent) {
    uint32_t owner = p->r[parent].owner;
    char nm[256];
    snprintf(nm, sizeof nm, "%.200s_%u", p->r[owner].name, ++p->r[owner].n_gen);
    int id = new_rule(p, nm, strlen(nm));
    if (id < 0) return -1;
    p->r[id].owner = owner;
    p->r[id].defined = 1;
    p->r[id].def_pos = p->r[owner].def_pos;
    return id;
}

static int emit(P *p, uint32_t rule, uint32_t type, uint32_t a) {
    if (++p->total_el > G_MAX_ELEMS) return perr(p, p->i, "grammar too large (more than %u elements)", G_MAX_ELEMS);
    brule *r = &p->r[rule];
    if (grow((void **)&r->el, &r->cap, r->n + 1, sizeof *r->el)) return oom(p);
    r->el[r->n].type = type;
    r->el[r->n].a = a;
    r->n++;
    return 0;
}

/* ---- lexing ---- */

static int is_word(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-'; }

static void skip_ws(P *p) {
    while (p->i < p->n) {
        char c = p->s[p->i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') p->i++;
        else if (c == '#') {
            while (p->i < p->n && p->s[p->i] != '\n') p->i++;
        } else break;
    }
}

static size_t word_end(P *p, size_t i) {
    while (i < p->n && is_word((unsigned char)p->s[i])) i++;
    return i;
}

/* At a rule head "name ::=" (after whitespace)? */
static int at_rule_head(P *p) {
    size_t e = word_end(p, p->i);
    if (e == p->i) return 0;
    P q = *p;
    q.i = e;
    skip_ws(&q);
    return q.i + 3 <= q.n && !memcmp(q.s + q.i, "::=", 3);
}

/* Decode one UTF-8 character (the text was validated). */
static uint32_t utf8_at(P *p, size_t *i) {
    const unsigned char *u = (const unsigned char *)p->s + *i;
    uint32_t c = u[0];
    int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (n == 1) { (*i)++; return c; }
    c &= n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07;
    for (int k = 1; k < n; k++) c = (c << 6) | (u[k] & 0x3F);
    *i += (size_t)n;
    return c;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One character of a literal or class (escapes decoded) at p->i; -1 on error. */
static int64_t parse_char(P *p) {
    size_t at = p->i;
    if (p->s[p->i] != '\\') return utf8_at(p, &p->i);
    if (p->i + 1 >= p->n) return perr(p, at, "bad escape at the end of the text");
    char e = p->s[p->i + 1];
    p->i += 2;
    int nh = 0;
    switch (e) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case '"': return '"';
    case '\\': return '\\';
    case '[': return '[';
    case ']': return ']';
    case 'x': nh = 2; break;
    case 'u': nh = 4; break;
    case 'U': nh = 8; break;
    default:
        if ((unsigned char)e < 0x80 && isprint((unsigned char)e)) return perr(p, at, "bad escape '\\%c'", e);
        return perr(p, at, "bad escape");
    }
    uint32_t v = 0;
    for (int k = 0; k < nh; k++) {
        int h = p->i < p->n ? hexval((unsigned char)p->s[p->i]) : -1;
        if (h < 0) return perr(p, at, "bad escape '\\%c': %d hexadecimal digits expected", e, nh);
        v = v * 16 + (uint32_t)h;
        p->i++;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return perr(p, at, "bad escape: U+%X is not a Unicode scalar value", v);
    return v;
}

static int add_class(P *p, const uint32_t *pairs, uint32_t npairs, int neg) {
    /* sort and merge */
    uint32_t *q = malloc(sizeof(uint32_t) * 2 * (npairs ? npairs : 1));
    if (!q) return oom(p);
    if (npairs) memcpy(q, pairs, sizeof(uint32_t) * 2 * npairs);
    for (uint32_t i = 1; i < npairs; i++) /* insertion sort: classes are small */
        for (uint32_t j = i; j > 0 && q[2 * j] < q[2 * (j - 1)]; j--) {
            uint32_t a = q[2 * j], b = q[2 * j + 1];
            q[2 * j] = q[2 * (j - 1)];
            q[2 * j + 1] = q[2 * (j - 1) + 1];
            q[2 * (j - 1)] = a;
            q[2 * (j - 1) + 1] = b;
        }
    uint32_t m = 0;
    for (uint32_t i = 0; i < npairs; i++) {
        if (m && q[2 * i] <= q[2 * (m - 1) + 1] + 1) {
            if (q[2 * i + 1] > q[2 * (m - 1) + 1]) q[2 * (m - 1) + 1] = q[2 * i + 1];
        } else {
            q[2 * m] = q[2 * i];
            q[2 * m + 1] = q[2 * i + 1];
            m++;
        }
    }
    if (grow((void **)&p->cls, &p->capcls, p->ncls + 1, sizeof *p->cls) ||
        grow((void **)&p->rng, &p->caprng, 2 * (p->nrng + m) + 2, sizeof *p->rng)) {
        free(q);
        return oom(p);
    }
    gclass *c = &p->cls[p->ncls];
    memset(c, 0, sizeof *c);
    c->roff = p->nrng;
    c->rn = m;
    c->neg = (uint32_t)neg;
    memcpy(p->rng + 2 * p->nrng, q, sizeof(uint32_t) * 2 * m);
    p->nrng += m;
    for (uint32_t cp = 0; cp < 128; cp++) {
        int in = 0;
        for (uint32_t k = 0; k < m; k++)
            if (cp >= q[2 * k] && cp <= q[2 * k + 1]) in = 1;
        if (in != neg) c->ascii[cp >> 5] |= 1u << (cp & 31);
    }
    free(q);
    return (int)p->ncls++;
}

static int parse_alternates(P *p, uint32_t rule, int depth);

/* Repetition of the atom el[start..] of rule: [mn, mx] times, mx == UINT32_MAX unbounded. */
static int repeat(P *p, uint32_t rule, uint32_t start, uint32_t mn, uint32_t mx) {
    brule *r = &p->r[rule];
    uint32_t cnt = r->n - start;
    if (cnt == 0) return 0; /* "" repeated is still "" */
    uint32_t sub;
    if (cnt == 1 && r->el[start].type == G_REF) {
        sub = r->el[start].a;
    } else {
        int s = gen_rule(p, rule);
        if (s < 0) return -1;
        r = &p->r[rule];
        for (uint32_t k = 0; k < cnt; k++)
            if (emit(p, (uint32_t)s, r->el[start + k].type, r->el[start + k].a)) return -1;
        sub = (uint32_t)s;
        r = &p->r[rule];
    }
    p->total_el -= cnt;
    r->n = start;
    for (uint32_t k = 0; k < mn; k++)
        if (emit(p, rule, G_REF, sub)) return -1;
    if (mx == UINT32_MAX) { /* star ::= sub star | */
        int st = gen_rule(p, rule);
        if (st < 0) return -1;
        if (emit(p, (uint32_t)st, G_REF, sub) || emit(p, (uint32_t)st, G_REF, (uint32_t)st) || emit(p, (uint32_t)st, G_ALT, 0) ||
            emit(p, rule, G_REF, (uint32_t)st))
            return -1;
    } else if (mx > mn) { /* opt_k ::= sub opt_{k-1} | ; opt_1 ::= sub | */
        uint32_t prev = UINT32_MAX;
        for (uint32_t k = 0; k < mx - mn; k++) {
            int o = gen_rule(p, rule);
            if (o < 0) return -1;
            if (emit(p, (uint32_t)o, G_REF, sub)) return -1;
            if (prev != UINT32_MAX && emit(p, (uint32_t)o, G_REF, prev)) return -1;
            if (emit(p, (uint32_t)o, G_ALT, 0)) return -1;
            prev = (uint32_t)o;
        }
        if (emit(p, rule, G_REF, prev)) return -1;
    }
    return 0;
}

static int parse_uint(P *p, uint32_t *v) {
    size_t at = p->i;
    uint64_t x = 0;
    while (p->i < p->n && isdigit((unsigned char)p->s[p->i])) {
        x = x * 10 + (uint64_t)(p->s[p->i] - '0');
        if (x > 1000000) x = 1000000;
        p->i++;
    }
    *v = (uint32_t)x;
    return p->i > at;
}

static int parse_sequence(P *p, uint32_t rule, int depth) {
    for (;;) {
        skip_ws(p);
        if (p->i >= p->n) return 0;
        char c = p->s[p->i];
        if (c == ')' || c == '|') return 0;
        if (is_word((unsigned char)c) && at_rule_head(p)) return 0;
        size_t at = p->i;
        uint32_t start = p->r[rule].n;
        if (c == '"') {
            p->i++;
            for (;;) {
                if (p->i >= p->n || p->s[p->i] == '\n') return perr(p, at, "unterminated literal");
                if (p->s[p->i] == '"') { p->i++; break; }
                int64_t ch = parse_char(p);
                if (ch < 0) return -1;
                uint32_t pr[2] = {(uint32_t)ch, (uint32_t)ch};
                int k = add_class(p, pr, 1, 0);
                if (k < 0 || emit(p, rule, G_CHAR, (uint32_t)k)) return -1;
            }
        } else if (c == '[') {
            p->i++;
            int neg = 0;
            if (p->i < p->n && p->s[p->i] == '^') { neg = 1; p->i++; }
            uint32_t *pairs = NULL, np = 0, cap = 0;
            for (;;) {
                if (p->i >= p->n || p->s[p->i] == '\n') { free(pairs); return perr(p, at, "unterminated character class"); }
                if (p->s[p->i] == ']') { p->i++; break; }
                size_t cat = p->i;
                int64_t lo = parse_char(p), hi = lo;
                if (lo < 0) { free(pairs); return -1; }
                if (p->i + 1 < p->n && p->s[p->i] == '-' && p->s[p->i + 1] != ']') {
                    p->i++;
                    hi = parse_char(p);
                    if (hi < 0) { free(pairs); return -1; }
                    if (hi < lo) { free(pairs); return perr(p, cat, "bad character range (its end comes before its start)"); }
                }
                if (grow((void **)&pairs, &cap, 2 * np + 2, sizeof *pairs)) { free(pairs); return oom(p); }
                pairs[2 * np] = (uint32_t)lo;
                pairs[2 * np + 1] = (uint32_t)hi;
                np++;
            }
            if (!np && !neg) { free(pairs); return perr(p, at, "empty character class"); }
            int k = add_class(p, pairs, np, neg);
            free(pairs);
            if (k < 0 || emit(p, rule, G_CHAR, (uint32_t)k)) return -1;
        } else if (c == '.') {
            p->i++;
            int k = add_class(p, NULL, 0, 1);
            if (k < 0 || emit(p, rule, G_CHAR, (uint32_t)k)) return -1;
        } else if (c == '(') {
            if (depth >= G_MAX_NEST) return perr(p, at, "parentheses nested too deeply (more than %d)", G_MAX_NEST);
            p->i++;
            int g = gen_rule(p, rule);
            if (g < 0 || parse_alternates(p, (uint32_t)g, depth + 1)) return -1;
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != ')') return perr(p, at, "unclosed parenthesis");
            p->i++;
            if (emit(p, rule, G_REF, (uint32_t)g)) return -1;
        } else if (is_word((unsigned char)c)) {
            size_t e = word_end(p, p->i);
            int id = find_rule(p, p->s + p->i, e - p->i);
            if (id < 0) id = named_rule(p, p->s + p->i, e - p->i);
            if (id < 0) return -1;
            if (!p->r[id].referenced) { p->r[id].referenced = 1; p->r[id].ref_pos = p->i; }
            p->i = e;
            if (emit(p, rule, G_REF, (uint32_t)id)) return -1;
        } else if (c == '@' && p->internal && p->i + 1 < p->n && p->s[p->i + 1] == 'P') {
            p->i += 2;
            uint32_t k;
            if (!parse_uint(p, &k) || k >= p->n_pats) return perr(p, at, "bad pattern reference");
            if (emit(p, rule, G_PAT, k)) return -1;
        } else {
            if ((unsigned char)c < 0x80 && isprint((unsigned char)c)) return perr(p, at, "unexpected character '%c'", c);
            return perr(p, at, "unexpected character");
        }
        /* postfix operators */
        for (;;) {
            size_t save = p->i;
            skip_ws(p);
            if (p->i >= p->n) { p->i = save; break; }
            char o = p->s[p->i];
            size_t oat = p->i;
            uint32_t mn, mx;
            if (o == '*') { mn = 0; mx = UINT32_MAX; p->i++; }
            else if (o == '+') { mn = 1; mx = UINT32_MAX; p->i++; }
            else if (o == '?') { mn = 0; mx = 1; p->i++; }
            else if (o == '{') {
                p->i++;
                skip_ws(p);
                int hm = parse_uint(p, &mn);
                skip_ws(p);
                if (p->i < p->n && p->s[p->i] == ',') {
                    p->i++;
                    skip_ws(p);
                    if (!parse_uint(p, &mx)) mx = UINT32_MAX;
                    if (!hm) mn = 0;
                    if (!hm && mx == UINT32_MAX) return perr(p, oat, "bad repetition bounds (a number expected)");
                } else {
                    if (!hm) return perr(p, oat, "bad repetition bounds (a number expected)");
                    mx = mn;
                }
                skip_ws(p);
                if (p->i >= p->n || p->s[p->i] != '}') return perr(p, oat, "bad repetition bounds ('}' expected)");
                p->i++;
                if (mn > G_MAX_REPEAT || (mx != UINT32_MAX && mx > G_MAX_REPEAT))
                    return perr(p, oat, "bad repetition bounds (at most %d)", G_MAX_REPEAT);
                if (mx < mn) return perr(p, oat, "bad repetition bounds (maximum %u below minimum %u)", mx, mn);
            } else { p->i = save; break; }
            /* a further operator applies to the whole repetition (start stays) */
            if (repeat(p, rule, start, mn, mx)) return -1;
        }
    }
}

static int parse_alternates(P *p, uint32_t rule, int depth) {
    if (parse_sequence(p, rule, depth)) return -1;
    for (;;) {
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == '|') {
            p->i++;
            if (emit(p, rule, G_ALT, 0) || parse_sequence(p, rule, depth)) return -1;
        } else return 0;
    }
}

static int utf8_check(P *p) {
    const unsigned char *u = (const unsigned char *)p->s;
    size_t i = 0;
    while (i < p->n) {
        unsigned c = u[i];
        int n;
        uint32_t mn;
        if (c == 0) return perr(p, i, "a NUL byte");
        if (c < 0x80) { i++; continue; }
        else if (c >= 0xC2 && c <= 0xDF) { n = 2; mn = 0x80; }
        else if (c >= 0xE0 && c <= 0xEF) { n = 3; mn = 0x800; }
        else if (c >= 0xF0 && c <= 0xF4) { n = 4; mn = 0x10000; }
        else return perr(p, i, "invalid UTF-8");
        if (i + (size_t)n > p->n) return perr(p, i, "invalid UTF-8");
        uint32_t v = c & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
        for (int k = 1; k < n; k++) {
            if ((u[i + k] & 0xC0) != 0x80) return perr(p, i, "invalid UTF-8");
            v = (v << 6) | (u[i + k] & 0x3F);
        }
        if (v < mn || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return perr(p, i, "invalid UTF-8");
        i += (size_t)n;
    }
    return 0;
}

/* ---- checks and flattening ---- */

typedef struct chk {
    P *p;
    uint8_t *nullable, *color;
    uint32_t *depth;
} chk;

static int elem_nullable(chk *c, const gel *e) { return e->type == G_REF && c->nullable[e->a]; }

/* DFS over "enters without consuming" edges: a cycle is left recursion; depth = longest chain. */
static int left_dfs(chk *c, uint32_t r, int lvl) {
    P *p = c->p;
    if (c->color[r] == 2) return 0;
    if (c->color[r] == 1) {
        uint32_t o = p->r[r].owner;
        return perr(p, p->r[o].def_pos, "left recursion in rule '%s' (it can reach itself without consuming text)", p->r[o].name);
    }
    if (lvl > G_MAX_CHAIN) {
        uint32_t o = p->r[r].owner;
        return perr(p, p->r[o].def_pos, "rule '%s': rules nested too deeply (more than %d without consuming text)", p->r[o].name, G_MAX_CHAIN);
    }
    c->color[r] = 1;
    uint32_t d = 0;
    brule *b = &p->r[r];
    int lead = 1;
    for (uint32_t k = 0; k < b->n; k++) {
        gel *e = &b->el[k];
        if (e->type == G_ALT) { lead = 1; continue; }
        if (!lead) continue;
        if (e->type == G_REF) {
            if (left_dfs(c, e->a, lvl + 1)) return -1;
            if (c->depth[e->a] + 1 > d) d = c->depth[e->a] + 1;
        }
        if (!elem_nullable(c, e)) lead = 0;
    }
    c->depth[r] = d;
    if (d > G_MAX_CHAIN) {
        uint32_t o = p->r[r].owner;
        return perr(p, p->r[o].def_pos, "rule '%s': rules nested too deeply (more than %d without consuming text)", p->r[o].name, G_MAX_CHAIN);
    }
    c->color[r] = 2;
    return 0;
}

/* Nullable rules (derive the empty text), in time linear in the grammar: every alternative
 * counts its elements not yet known nullable; a rule found nullable decrements the
 * alternatives that reference it. */
static int compute_nullable(P *p, uint8_t *nullable) {
    uint32_t na = 0;
    size_t nref = 0;
    for (uint32_t r = 0; r < p->nr; r++) {
        na++;
        for (uint32_t k = 0; k < p->r[r].n; k++) {
            if (p->r[r].el[k].type == G_ALT) na++;
            if (p->r[r].el[k].type == G_REF) nref++;
        }
    }
    uint32_t *cnt = calloc(na + 1, sizeof *cnt), *arule = calloc(na + 1, sizeof *arule);
    uint32_t *ostart = calloc((size_t)p->nr + 1, sizeof *ostart), *occ = calloc(nref + 1, sizeof *occ);
    uint32_t *queue = calloc((size_t)p->nr + 1, sizeof *queue), *fill = calloc((size_t)p->nr + 1, sizeof *fill);
    if (!cnt || !arule || !ostart || !occ || !queue || !fill) {
        free(cnt); free(arule); free(ostart); free(occ); free(queue); free(fill);
        return -1;
    }
    const uint32_t DEAD = UINT32_MAX;
    uint32_t a = 0;
    for (uint32_t r = 0; r < p->nr; r++) {
        arule[a] = r;
        for (uint32_t k = 0; k < p->r[r].n; k++) {
            gel *e = &p->r[r].el[k];
            if (e->type == G_ALT) { arule[++a] = r; continue; }
            if (e->type == G_REF) { if (cnt[a] != DEAD) cnt[a]++; ostart[e->a + 1]++; }
            else cnt[a] = DEAD;
        }
        a++;
    }
    for (uint32_t r = 0; r < p->nr; r++) ostart[r + 1] += ostart[r];
    a = 0;
    for (uint32_t r = 0; r < p->nr; r++) {
        for (uint32_t k = 0; k < p->r[r].n; k++) {
            gel *e = &p->r[r].el[k];
            if (e->type == G_ALT) { a++; continue; }
            if (e->type == G_REF) occ[ostart[e->a] + fill[e->a]++] = a;
        }
        a++;
    }
    uint32_t qh = 0, qt = 0;
    for (uint32_t x = 0; x < na; x++)
        if (cnt[x] == 0 && !nullable[arule[x]]) { nullable[arule[x]] = 1; queue[qt++] = arule[x]; }
    while (qh < qt) {
        uint32_t r = queue[qh++];
        for (uint32_t k = ostart[r]; k < ostart[r + 1]; k++) {
            uint32_t x = occ[k];
            if (cnt[x] == DEAD || cnt[x] == 0) continue;
            if (--cnt[x] == 0 && !nullable[arule[x]]) { nullable[arule[x]] = 1; queue[qt++] = arule[x]; }
        }
    }
    free(cnt); free(arule); free(ostart); free(occ); free(queue); free(fill);
    return 0;
}

static void free_p(P *p) {
    for (uint32_t i = 0; i < p->nr; i++) {
        free(p->r[i].name);
        free(p->r[i].el);
    }
    free(p->r);
    free(p->cls);
    free(p->rng);
    free(p->ht);
}

void sdn_grammar_free(sdn_grammar *g) {
    if (!g) return;
    for (uint32_t i = 0; i < g->n_rules; i++) free(g->names[i]);
    free(g->names);
    free(g->el);
    free(g->rule_start);
    free(g->cls);
    free(g->ranges);
    for (uint32_t i = 0; i < g->n_pats; i++) {
        pcre2_code_free(g->pats[i].re);
    }
    free(g->pats);
    free(g);
}

static void free_pats(gpat *pats, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        pcre2_code_free(pats[i].re);
    }
    free(pats);
}

int g_parse(const char *text, size_t len, int allow_internal, gpat *pats, uint32_t n_pats, sdn_grammar **out,
            sdn_err *err) {
    *out = NULL;
    P p = {.s = text ? text : "", .n = text ? len : 0, .internal = allow_internal, .n_pats = n_pats, .err = err};
    int rc = SDN_EINVAL;
    if (p.n > G_MAX_TEXT) {
        free_pats(pats, n_pats);
        return sdn_fail(err, SDN_EINVAL, "grammar: text too large (%zu bytes, at most %u)", p.n, G_MAX_TEXT);
    }
    if (utf8_check(&p)) goto fail;
    skip_ws(&p);
    if (p.i >= p.n) {
        perr(&p, p.i, "empty grammar (no rule)");
        goto fail;
    }
    while (p.i < p.n) {
        size_t at = p.i;
        size_t e = word_end(&p, p.i);
        if (e == p.i) {
            perr(&p, at, "rule name expected");
            goto fail;
        }
        int id = find_rule(&p, p.s + at, e - at);
        if (id >= 0 && p.r[id].defined) {
            perr(&p, at, "rule '%.*s' defined twice", (int)(e - at > 200 ? 200 : e - at), p.s + at);
            goto fail;
        }
        if (id < 0) id = named_rule(&p, p.s + at, e - at);
        if (id < 0) goto fail;
        p.r[id].defined = 1;
        p.r[id].def_pos = at;
        p.i = e;
        skip_ws(&p);
        if (p.i + 3 > p.n || memcmp(p.s + p.i, "::=", 3)) {
            perr(&p, p.i, "'::=' expected after the rule name");
            goto fail;
        }
        p.i += 3;
        if (parse_alternates(&p, (uint32_t)id, 0)) goto fail;
        skip_ws(&p);
        if (p.i < p.n && !at_rule_head(&p)) {
            if (p.s[p.i] == ')') perr(&p, p.i, "unmatched ')'");
            else perr(&p, p.i, "rule name expected");
            goto fail;
        }
    }
    for (uint32_t i = 0; i < p.nr; i++)
        if (!p.r[i].defined) {
            perr(&p, p.r[i].ref_pos, "undefined rule '%s'", p.r[i].name);
            goto fail;
        }
    int root = find_rule(&p, "root", 4);
    if (root < 0) {
        perr(&p, 0, "no rule named 'root' (the start rule)");
        goto fail;
    }
    /* nullable rules, then left recursion */
    chk c = {.p = &p};
    c.nullable = calloc(p.nr, 1);
    c.color = calloc(p.nr, 1);
    c.depth = calloc(p.nr, sizeof *c.depth);
    if (!c.nullable || !c.color || !c.depth) {
        free(c.nullable); free(c.color); free(c.depth);
        oom(&p);
        goto fail;
    }
    if (compute_nullable(&p, c.nullable)) {
        free(c.nullable); free(c.color); free(c.depth);
        oom(&p);
        goto fail;
    }
    for (uint32_t r = 0; r < p.nr; r++)
        if (left_dfs(&c, r, 0)) {
            free(c.nullable); free(c.color); free(c.depth);
            goto fail;
        }
    free(c.nullable); free(c.color); free(c.depth);

    sdn_grammar *g = calloc(1, sizeof *g);
    if (!g) { oom(&p); goto fail; }
    g->n_rules = p.nr;
    g->names = calloc(p.nr, sizeof *g->names);
    g->rule_start = malloc(sizeof(uint32_t) * p.nr);
    size_t tot = 2;
    for (uint32_t r = 0; r < p.nr; r++) tot += p.r[r].n + 1;
    g->el = malloc(sizeof(gel) * tot);
    if (!g->names || !g->rule_start || !g->el) { sdn_grammar_free(g); oom(&p); goto fail; }
    g->el[0] = (gel){G_REF, (uint32_t)root};
    g->el[1] = (gel){G_END, 0};
    uint32_t k = 2;
    for (uint32_t r = 0; r < p.nr; r++) {
        g->rule_start[r] = k;
        if (p.r[r].n) memcpy(g->el + k, p.r[r].el, sizeof(gel) * p.r[r].n);
        k += p.r[r].n;
        g->el[k++] = (gel){G_END, 0};
        g->names[r] = p.r[r].name;
        p.r[r].name = NULL;
    }
    g->n_el = k;
    g->cls = p.cls;
    g->n_cls = p.ncls;
    g->ranges = p.rng;
    p.cls = NULL;
    p.rng = NULL;
    g->pats = pats;
    g->n_pats = n_pats;
    free_p(&p);
    *out = g;
    return SDN_OK;
fail:
    if (err && err->code) rc = err->code;
    free_p(&p);
    free_pats(pats, n_pats);
    return rc;
}

int sdn_grammar_parse(const char *gbnf, size_t len, sdn_grammar **out, sdn_err *err) {
    if (!out) return sdn_fail(err, SDN_EINVAL, "grammar: no output pointer");
    return g_parse(gbnf, len, 0, NULL, 0, out, err);
}

int g_class_match(const sdn_grammar *g, uint32_t c, uint32_t cp) {
    const gclass *k = &g->cls[c];
    if (cp < 128) return (k->ascii[cp >> 5] >> (cp & 31)) & 1;
    const uint32_t *r = g->ranges + 2 * k->roff;
    int in = 0;
    for (uint32_t i = 0; i < k->rn; i++) {
        if (cp < r[2 * i]) break;
        if (cp <= r[2 * i + 1]) { in = 1; break; }
    }
    return in != (int)k->neg;
}
