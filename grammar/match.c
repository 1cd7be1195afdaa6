/* match.c - the byte-level matcher: a set of parse stacks over the compiled rules (a
 * pushdown recognizer in the manner of llama.cpp's grammar sampler, written anew), advanced
 * one UTF-8 byte at a time with the state of a partial character kept, deduplicated, and
 * bounded (G_MAX_STACKS, G_MAX_DEPTH, G_MAX_WORK: a step beyond them fails with -1).
 * Pattern-checked JSON strings (G_PAT) keep their decoded content on the stack and ask
 * PCRE2 for a partial match at every character. */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"

static inline uint32_t st_words(const uint32_t *st) { return 3 + st[0] + (st[1] + 3) / 4; }

sdn_gstate *gs_alloc(const sdn_grammar *g) {
    sdn_gstate *s = calloc(1, sizeof *s);
    if (s) s->g = g;
    return s;
}

int gs_reserve(sdn_gstate *s, uint32_t words, uint32_t stacks) {
    if (words > s->cap_w) {
        uint32_t c = s->cap_w ? s->cap_w : 64;
        while (c < words) c *= 2;
        uint32_t *w = realloc(s->w, sizeof(uint32_t) * c);
        if (!w) return -1;
        s->w = w;
        s->cap_w = c;
    }
    if (stacks > s->cap_n) {
        uint32_t c = s->cap_n ? s->cap_n : 8;
        while (c < stacks) c *= 2;
        uint32_t *o = realloc(s->off, sizeof(uint32_t) * c);
        if (!o) return -1;
        s->off = o;
        uint32_t *h = realloc(s->hash, sizeof(uint32_t) * c);
        if (!h) return -1;
        s->hash = h;
        s->cap_n = c;
    }
    return 0;
}

static int tmp_reserve(sdn_gstate *s, uint32_t n) {
    if (n <= s->cap_tmp) return 0;
    uint32_t c = s->cap_tmp ? s->cap_tmp : 64;
    while (c < n) c *= 2;
    uint32_t *t = realloc(s->tmp, sizeof(uint32_t) * c);
    if (!t) return -1;
    s->tmp = t;
    s->cap_tmp = c;
    return 0;
}

static void gs_clear(sdn_gstate *d, const sdn_gstate *s) {
    d->g = s->g;
    d->n = 0;
    d->nw = 0;
    d->work = 0;
    d->hs_on = 0;
    d->ended = 0;
    d->pu_need = 0;
    d->pu_n = 0;
}

static int same_stack(const uint32_t *o, const uint32_t *el, uint32_t L, uint32_t P, uint32_t aux, const uint8_t *content) {
    return o[0] == L && o[1] == P && o[2] == aux && (!L || !memcmp(o + 3, el, sizeof(uint32_t) * L)) &&
           (!P || !memcmp(o + 3 + L, content, P));
}

static void hs_insert(sdn_gstate *d, uint32_t idx) {
    uint32_t m = d->hs_cap - 1, j = d->hash[idx] & m;
    while (d->hs[j]) j = (j + 1) & m;
    d->hs[j] = idx + 1;
}

/* Append a stack (deduplicated): elements, pattern content length P, aux, content. Up to 16
 * stacks a linear scan finds duplicates, beyond that a hash set. */
static int add_stack(sdn_gstate *d, const uint32_t *el, uint32_t L, uint32_t P, uint32_t aux, const uint8_t *content) {
    d->work += L + P / 4 + 1;
    if (d->work > G_MAX_WORK) return -1;
    uint32_t h = 2166136261u;
#define MIX(x) do { h ^= (uint32_t)(x); h *= 16777619u; } while (0)
    MIX(L);
    MIX(P);
    MIX(aux);
    for (uint32_t i = 0; i < L; i++) MIX(el[i]);
    for (uint32_t i = 0; i < P; i++) MIX(content[i]);
#undef MIX
    if (!d->hs_on && d->n >= 16) {
        if (!d->hs) {
            d->hs = malloc(sizeof(uint32_t) * 2 * G_MAX_STACKS);
            if (!d->hs) return -1;
            d->hs_cap = 2 * G_MAX_STACKS;
        }
        memset(d->hs, 0, sizeof(uint32_t) * d->hs_cap);
        for (uint32_t i = 0; i < d->n; i++) hs_insert(d, i);
        d->hs_on = 1;
    }
    if (d->hs_on) {
        uint32_t m = d->hs_cap - 1;
        for (uint32_t j = h & m; d->hs[j]; j = (j + 1) & m) {
            uint32_t i = d->hs[j] - 1;
            if (d->hash[i] == h && same_stack(d->w + d->off[i], el, L, P, aux, content)) return 0;
        }
    } else
        for (uint32_t i = 0; i < d->n; i++)
            if (d->hash[i] == h && same_stack(d->w + d->off[i], el, L, P, aux, content)) return 0;
    if (d->n >= G_MAX_STACKS || L > G_MAX_DEPTH) return -1;
    uint32_t need = 3 + L + (P + 3) / 4;
    if (gs_reserve(d, d->nw + need, d->n + 1)) return -1;
    uint32_t *o = d->w + d->nw;
    o[0] = L;
    o[1] = P;
    o[2] = aux;
    if (L) memcpy(o + 3, el, sizeof(uint32_t) * L);
    if (P) {
        o[3 + L + (P - 1) / 4] = 0;
        memcpy(o + 3 + L, content, P);
    }
    d->off[d->n] = d->nw;
    d->hash[d->n] = h;
    d->n++;
    d->nw += need;
    if (d->hs_on) hs_insert(d, d->n - 1);
    return 0;
}

/* d->tmp[0..L) is a stack whose top may be a rule reference: enter rules until every
 * resulting stack's top is a terminal (or the stack is empty), adding each to d. */
static int expand(sdn_gstate *d, uint32_t L) {
    if (++d->work > G_MAX_WORK) return -1;
    if (L == 0) return add_stack(d, d->tmp, 0, 0, 0, NULL);
    const sdn_grammar *g = d->g;
    uint32_t pos = d->tmp[L - 1];
    const gel *e = &g->el[pos];
    if (e->type != G_REF) return add_stack(d, d->tmp, L, 0, 0, NULL);
    uint32_t nt = g->el[pos + 1].type, L2 = L;
    if (nt == G_END || nt == G_ALT) L2 = L - 1;
    else d->tmp[L - 1] = pos + 1;
    if (L2 + 1 > G_MAX_DEPTH) {
        d->tmp[L - 1] = pos;
        return -1;
    }
    uint32_t a = g->rule_start[e->a];
    int rc = 0;
    for (;;) {
        uint32_t t = g->el[a].type;
        if (t == G_END || t == G_ALT) rc = expand(d, L2);
        else {
            d->tmp[L2] = a;
            rc = expand(d, L2 + 1);
        }
        if (rc) break;
        while (g->el[a].type != G_END && g->el[a].type != G_ALT) a++;
        if (g->el[a].type == G_END) break;
        a++;
    }
    d->tmp[L - 1] = pos;
    return rc;
}

/* ---- pattern-checked strings ---- */

static int ensure_md(sdn_gstate *d) {
    if (!d->md) d->md = pcre2_match_data_create(1, NULL);
    return d->md ? 0 : -1;
}

static uint32_t count_cps(const uint8_t *c, uint32_t n) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) k += (c[i] & 0xC0) != 0x80;
    return k;
}

static uint32_t utf8_put(uint8_t *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { o[0] = (uint8_t)(0xC0 | (cp >> 6)); o[1] = (uint8_t)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* Can content[0..n) still be extended to a string the pattern accepts? 1, 0, -1 error. */
static int pat_viable(sdn_gstate *d, const gpat *p, const uint8_t *c, uint32_t n) {
    if (count_cps(c, n) > p->max) return 0;
    if (!p->re || !p->anchored) return 1; /* unanchored: a match can still come later */
    if (ensure_md(d)) return -1;
    int rc = pcre2_match(p->re, c, n, 0, PCRE2_PARTIAL_HARD | PCRE2_NO_UTF_CHECK, d->md, NULL);
    return rc >= 0 || rc == PCRE2_ERROR_PARTIAL;
}

static int pat_complete(sdn_gstate *d, const gpat *p, const uint8_t *c, uint32_t n) {
    uint32_t k = count_cps(c, n);
    if (k < p->min || k > p->max) return 0;
    if (!p->re) return 1;
    if (ensure_md(d)) return -1;
    return pcre2_match(p->re, c, n, 0, PCRE2_NO_UTF_CHECK, d->md, NULL) >= 0;
}

static uint8_t *pbuf(sdn_gstate *d, uint32_t need);

/* Is some code point of [lo, hi] (surrogates excluded) a viable next character of the
 * content c[0..P)? ASCII ones are tried one by one; non-ASCII ones: all of a range of up to
 * 64 (a character missing its last byte), one representative when the pattern cannot tell
 * non-ASCII characters apart (p->uniform), else 256 spread over the range (an
 * under-approximation for patterns that single out rare characters: never a dead end, a
 * few characters possibly never offered). Uses d's content buffer. */
static int pat_range(sdn_gstate *d, const gpat *p, const uint8_t *c, uint32_t P, uint32_t lo, uint32_t hi) {
    if (count_cps(c, P) + 1 > p->max) return 0;
    if (!p->re || !p->anchored) return 1;
    uint8_t *buf = pbuf(d, P + 8);
    if (!buf) return -1;
    if (buf != c) memmove(buf, c, P);
    for (uint32_t cp = lo; cp <= hi && cp < 0x80; cp++) {
        int r = pat_viable(d, p, buf, P + utf8_put(buf + P, cp));
        if (r) return r;
    }
    if (hi < 0x80) return 0;
    if (lo < 0x80) lo = 0x80;
    uint32_t step = 1;
    if (p->uniform) step = hi - lo + 1;
    else if (hi - lo >= 64) step = (hi - lo) / 256 + 1;
    for (uint32_t cp = lo; cp <= hi; cp += step) {
        uint32_t x = cp;
        if (x >= 0xD800 && x <= 0xDFFF) {
            if (hi < 0xE000) continue;
            x = 0xE000;
        }
        int r = pat_viable(d, p, buf, P + utf8_put(buf + P, x));
        if (r) return r;
    }
    return 0;
}

/* Feed code point cp to the pattern string at the top of stack st. Returns -2 rejected,
 * -1 error, 0 continues (the new content in buf, *np bytes, *naux), 1 closed. */
static int pat_feed(sdn_gstate *d, const uint32_t *st, uint32_t cp, uint8_t *buf, uint32_t *np, uint32_t *naux) {
    const sdn_grammar *g = d->g;
    uint32_t L = st[0], P = st[1], aux = st[2];
    const gpat *p = &g->pats[g->el[st[3 + L - 1]].a];
    const uint8_t *content = (const uint8_t *)(st + 3 + L);
    uint32_t mode = aux & 0xFF, add;
    if (mode == 0) {
        if (cp == '"') {
            int r = pat_complete(d, p, content, P);
            return r < 0 ? -1 : r ? 1 : -2;
        }
        if (cp == '\\') { /* some escape must lead on: any of U+0000-U+FFFF */
            int r = pat_range(d, p, content, P, 0, 0xFFFF);
            if (r <= 0) return r < 0 ? -1 : -2;
            memcpy(buf, content, P);
            *np = P;
            *naux = 1;
            return 0;
        }
        if (cp < 0x20) return -2;
        add = cp;
    } else if (mode == 1) {
        switch (cp) {
        case '"': add = '"'; break;
        case '\\': add = '\\'; break;
        case '/': add = '/'; break;
        case 'b': add = 8; break;
        case 'f': add = 12; break;
        case 'n': add = 10; break;
        case 'r': add = 13; break;
        case 't': add = 9; break;
        case 'u':
            memcpy(buf, content, P); /* the backslash checked U+0000-U+FFFF already */
            *np = P;
            *naux = 2;
            return 0;
        default: return -2;
        }
    } else {
        int h = (cp >= '0' && cp <= '9') ? (int)cp - '0' : (cp >= 'a' && cp <= 'f') ? (int)cp - 'a' + 10 : (cp >= 'A' && cp <= 'F') ? (int)cp - 'A' + 10 : -1;
        if (h < 0) return -2;
        uint32_t v = ((aux >> 8) << 4) | (uint32_t)h;
        if (mode < 5) {
            /* \uD800-\uDFFF (surrogates) are refused, as in the schema grammar's strings */
            if (mode == 3 && v >= 0xD8 && v <= 0xDF) return -2;
            uint32_t sh = 4 * (5 - mode), lo = v << sh, hi = lo | ((1u << sh) - 1);
            int r = pat_range(d, p, content, P, lo, hi);
            if (r <= 0) return r < 0 ? -1 : -2;
            memcpy(buf, content, P);
            *np = P;
            *naux = (mode + 1) | (v << 8);
            return 0;
        }
        add = v;
    }
    if (P + 4 > G_MAX_PATTERN_BYTES) return -2;
    memcpy(buf, content, P);
    uint32_t n = P + utf8_put(buf + P, add);
    int r = pat_viable(d, p, buf, n);
    if (r < 0) return -1;
    if (!r) return -2;
    *np = n;
    *naux = 0;
    return 0;
}

/* ---- code point and partial-character steps ---- */

static uint8_t *pbuf(sdn_gstate *d, uint32_t need) {
    if (need > d->cap_pb) {
        uint32_t c = d->cap_pb ? d->cap_pb : 64;
        while (c < need) c *= 2;
        uint8_t *b = realloc(d->pb, c);
        if (!b) return NULL;
        d->pb = b;
        d->cap_pb = c;
    }
    return d->pb;
}

/* Pop the matched terminal at the top of st (copied to d->tmp) and expand. */
static int pop_and_expand(sdn_gstate *d, const uint32_t *st) {
    uint32_t L = st[0], top = st[3 + L - 1];
    if (L > 1) memcpy(d->tmp, st + 3, sizeof(uint32_t) * (L - 1));
    uint32_t nt = d->g->el[top + 1].type;
    if (nt == G_END || nt == G_ALT) return expand(d, L - 1);
    d->tmp[L - 1] = top + 1;
    return expand(d, L);
}

static int step_cp(sdn_gstate *d, const sdn_gstate *s, uint32_t cp) {
    const sdn_grammar *g = s->g;
    gs_clear(d, s);
    uint32_t maxL = 0;
    for (uint32_t i = 0; i < s->n; i++)
        if (s->w[s->off[i]] > maxL) maxL = s->w[s->off[i]];
    if (maxL > G_MAX_DEPTH || tmp_reserve(d, maxL + G_MAX_CHAIN + 8)) return -1;
    for (uint32_t i = 0; i < s->n; i++) {
        const uint32_t *st = s->w + s->off[i];
        uint32_t L = st[0];
        if (!L) continue;
        const gel *e = &g->el[st[3 + L - 1]];
        if (e->type == G_CHAR) {
            if (!g_class_match(g, e->a, cp)) continue;
            if (pop_and_expand(d, st)) return -1;
        } else if (e->type == G_PAT) {
            uint8_t *buf = pbuf(d, st[1] + 8);
            if (!buf) return -1;
            uint32_t np = 0, naux = 0;
            int r = pat_feed(d, st, cp, buf, &np, &naux);
            if (r == -1) return -1;
            if (r == -2) continue;
            if (r == 1) {
                if (pop_and_expand(d, st)) return -1;
            } else if (add_stack(d, st + 3, L, np, naux, buf)) return -1;
        }
    }
    return d->n ? 1 : 0;
}

/* Could the top of stack st accept some code point in [lo, hi]? (partial character) */
static int range_ok(sdn_gstate *d, const uint32_t *st, uint32_t lo, uint32_t hi) {
    const sdn_grammar *g = d->g;
    uint32_t L = st[0];
    if (!L) return 0;
    const gel *e = &g->el[st[3 + L - 1]];
    if (e->type == G_CHAR) {
        const gclass *c = &g->cls[e->a];
        const uint32_t *r = g->ranges + 2 * c->roff;
        for (uint32_t k = 0; k < c->rn; k++) {
            if (c->neg) {
                if (r[2 * k] <= lo && r[2 * k + 1] >= hi) return 0;
            } else if (r[2 * k] <= hi && r[2 * k + 1] >= lo) return 1;
        }
        return (int)c->neg;
    }
    if (e->type != G_PAT) return 0;
    if ((st[2] & 0xFF) != 0) return 0; /* escapes are ASCII */
    return pat_range(d, &g->pats[e->a], (const uint8_t *)(st + 3 + L), st[1], lo, hi);
}

/* The code points a partial character pu[0..n) of total length need+n can still become. */
static int pu_range(const uint8_t *pu, int n, int total, uint32_t *lo, uint32_t *hi) {
    uint32_t a = pu[0] & (total == 2 ? 0x1F : total == 3 ? 0x0F : 0x07), b;
    for (int k = 1; k < n; k++) a = (a << 6) | (pu[k] & 0x3F);
    b = a;
    for (int k = n; k < total; k++) {
        a = (a << 6);
        b = (b << 6) | 0x3F;
    }
    uint32_t mn = total == 2 ? 0x80 : total == 3 ? 0x800 : 0x10000;
    if (a < mn) a = mn;
    if (b > 0x10FFFF) b = 0x10FFFF;
    if (a > b) return 0;
    if (a >= 0xD800 && b <= 0xDFFF) return 0;
    *lo = a;
    *hi = b;
    return 1;
}

static int step_partial(sdn_gstate *d, const sdn_gstate *s, const uint8_t *pu, int n, int total) {
    uint32_t lo, hi;
    if (!pu_range(pu, n, total, &lo, &hi)) return 0;
    gs_clear(d, s);
    for (uint32_t i = 0; i < s->n; i++) {
        const uint32_t *st = s->w + s->off[i];
        int r = range_ok(d, st, lo, hi);
        if (r < 0) return -1;
        if (!r) continue;
        uint32_t nw = st_words(st);
        if (gs_reserve(d, d->nw + nw, d->n + 1)) return -1;
        memcpy(d->w + d->nw, st, sizeof(uint32_t) * nw);
        d->off[d->n] = d->nw;
        d->hash[d->n] = s->hash[i];
        d->n++;
        d->nw += nw;
    }
    if (!d->n) return 0;
    memcpy(d->pu, pu, (size_t)n);
    d->pu_n = (uint8_t)n;
    d->pu_need = (uint8_t)(total - n);
    return 1;
}

static int utf8_total(uint8_t b) {
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;
}

int gs_step(sdn_gstate *d, const sdn_gstate *s, uint8_t b) {
    if (s->ended) return 0;
    if (!s->pu_need) {
        if (b < 0x80) return step_cp(d, s, b);
        int t = utf8_total(b);
        if (!t) return 0;
        return step_partial(d, s, &b, 1, t);
    }
    if ((b & 0xC0) != 0x80) return 0;
    uint8_t pu[4];
    memcpy(pu, s->pu, s->pu_n);
    pu[s->pu_n] = b;
    int n = s->pu_n + 1, total = n + s->pu_need - 1;
    if (n < total) return step_partial(d, s, pu, n, total);
    uint32_t lo, hi;
    if (!pu_range(pu, n, total, &lo, &hi)) return 0;
    return step_cp(d, s, lo);
}

/* ---- public API ---- */

int gs_scratch(const sdn_gstate *cs) {
    sdn_gstate *s = (sdn_gstate *)cs; /* scratch memory of a state owned by one thread */
    for (int k = 0; k < 2; k++)
        if (!s->scr[k] && !(s->scr[k] = gs_alloc(s->g))) return -1;
    return 0;
}

static void gs_release(sdn_gstate *s) {
    free(s->w);
    free(s->off);
    free(s->hash);
    free(s->tmp);
    free(s->pb);
    free(s->hs);
    if (s->md) pcre2_match_data_free(s->md);
}

void gs_free_one(sdn_gstate *s) {
    if (!s) return;
    gs_release(s);
    free(s);
}

void sdn_gstate_free(sdn_gstate *s) {
    if (!s) return;
    for (int k = 0; k < 2; k++) gs_free_one(s->scr[k]);
    for (uint32_t k = 0; k < s->n_dfs; k++) gs_free_one(s->dfs[k]);
    free(s->dfs);
    free(s->allowed);
    gs_release(s);
    free(s);
}

int sdn_gstate_new(const sdn_grammar *g, sdn_gstate **out, sdn_err *err) {
    if (!out || !g) return sdn_fail(err, SDN_EINVAL, "grammar: no grammar or output pointer");
    *out = NULL;
    sdn_gstate *s = gs_alloc(g);
    if (!s || tmp_reserve(s, G_MAX_CHAIN + 8)) {
        sdn_gstate_free(s);
        return sdn_fail(err, SDN_ENOMEM, "grammar: out of memory (state)");
    }
    s->tmp[0] = 0; /* element 0 is a reference to root */
    if (expand(s, 1)) {
        sdn_gstate_free(s);
        return sdn_fail(err, SDN_ENOMEM, "grammar: the start rule expands beyond the matcher's limits");
    }
    *out = s;
    return SDN_OK;
}

int sdn_gstate_copy(sdn_gstate *dst, const sdn_gstate *src) {
    if (dst == src) return 0;
    if (gs_reserve(dst, src->nw, src->n)) return -1;
    dst->g = src->g;
    if (src->n) {
        memcpy(dst->w, src->w, sizeof(uint32_t) * src->nw);
        memcpy(dst->off, src->off, sizeof(uint32_t) * src->n);
        memcpy(dst->hash, src->hash, sizeof(uint32_t) * src->n);
    }
    dst->n = src->n;
    dst->nw = src->nw;
    dst->ended = src->ended;
    dst->skip_ls = src->skip_ls;
    dst->pu_need = src->pu_need;
    dst->pu_n = src->pu_n;
    memcpy(dst->pu, src->pu, sizeof dst->pu);
    for (int k = 0; k < 2; k++)
        if (dst->scr[k]) dst->scr[k]->g = src->g;
    return 0;
}

static void gs_swap(sdn_gstate *a, sdn_gstate *b) {
    sdn_gstate t = *a;
#define SW(f) do { a->f = b->f; b->f = t.f; } while (0)
    SW(n); SW(nw); SW(cap_w); SW(cap_n); SW(w); SW(off); SW(hash); SW(ended); SW(pu_need); SW(pu_n);
#undef SW
    memcpy(a->pu, b->pu, sizeof a->pu);
    memcpy(b->pu, t.pu, sizeof a->pu);
}

/* Run bytes from s through the scratch states; the result is s->scr[*which]. */
int gs_run(const sdn_gstate *s, const uint8_t *b, size_t n, int *which) {
    if (gs_scratch(s)) return -1;
    const sdn_gstate *cur = s;
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        sdn_gstate *nx = s->scr[k];
        int r = gs_step(nx, cur, b[i]);
        if (r != 1) return r;
        cur = nx;
        k ^= 1;
    }
    *which = k ^ 1;
    return 1;
}

int sdn_gstate_accept_bytes(sdn_gstate *s, const void *bytes, size_t n) {
    if (!s) return 0;
    if (!n) return s->ended ? 0 : 1;
    int which;
    int r = gs_run(s, bytes, n, &which);
    if (r == 1) gs_swap(s, s->scr[which]);
    return r;
}

int sdn_gstate_can_end(const sdn_gstate *s) {
    if (!s) return 0;
    if (s->ended) return 1;
    if (s->pu_need) return 0;
    for (uint32_t i = 0; i < s->n; i++)
        if (s->w[s->off[i]] == 0) return 1;
    return 0;
}

int sdn_gstate_ended(const sdn_gstate *s) { return s && s->ended; }

void sdn_gstate_set_skip_leading_space(sdn_gstate *s, int skip) {
    if (s) s->skip_ls = skip != 0;
}

void gs_set_ended(sdn_gstate *s) { s->ended = 1; }

/* Would byte b be accepted? (exact, without building the next state) */
static int byte_ok(sdn_gstate *scr, const sdn_gstate *s, uint8_t b) {
    const sdn_grammar *g = s->g;
    uint32_t cp;
    if (!s->pu_need) {
        if (b >= 0x80) {
            int t = utf8_total(b);
            uint32_t lo, hi;
            if (!t || !pu_range(&b, 1, t, &lo, &hi)) return 0;
            for (uint32_t i = 0; i < s->n; i++)
                if (range_ok(scr, s->w + s->off[i], lo, hi) == 1) return 1;
            return 0;
        }
        cp = b;
    } else {
        if ((b & 0xC0) != 0x80) return 0;
        uint8_t pu[4];
        memcpy(pu, s->pu, s->pu_n);
        pu[s->pu_n] = b;
        int n = s->pu_n + 1, total = n + s->pu_need - 1;
        uint32_t lo, hi;
        if (!pu_range(pu, n, total, &lo, &hi)) return 0;
        if (n < total) {
            for (uint32_t i = 0; i < s->n; i++)
                if (range_ok(scr, s->w + s->off[i], lo, hi) == 1) return 1;
            return 0;
        }
        cp = lo;
    }
    for (uint32_t i = 0; i < s->n; i++) {
        const uint32_t *st = s->w + s->off[i];
        uint32_t L = st[0];
        if (!L) continue;
        const gel *e = &g->el[st[3 + L - 1]];
        if (e->type == G_CHAR) {
            if (g_class_match(g, e->a, cp)) return 1;
        } else if (e->type == G_PAT) {
            uint8_t *buf = pbuf(scr, st[1] + 8);
            if (!buf) return 0;
            uint32_t np, naux;
            if (pat_feed(scr, st, cp, buf, &np, &naux) >= 0) return 1;
        }
    }
    return 0;
}

static uint8_t utf8_lead(uint32_t cp) {
    uint8_t b[4];
    utf8_put(b, cp);
    return b[0];
}

/* The bytes that can come next, a superset (set: 256 bits): the first bytes of every stack
 * top's characters. -1 when a pattern string or a partial character needs all 256 tried. */
static int next_bytes(const sdn_gstate *s, uint64_t set[4]) {
    const sdn_grammar *g = s->g;
    set[0] = set[1] = set[2] = set[3] = 0;
    if (s->pu_need) return -1;
    for (uint32_t i = 0; i < s->n; i++) {
        const uint32_t *st = s->w + s->off[i];
        uint32_t L = st[0];
        if (!L) continue;
        const gel *e = &g->el[st[3 + L - 1]];
        if (e->type != G_CHAR) return -1;
        const gclass *c = &g->cls[e->a];
        if (c->neg) return -1; /* many characters: not forced anyway, let the exact test say */
        const uint32_t *r = g->ranges + 2 * c->roff;
        for (uint32_t k = 0; k < c->rn; k++) {
            uint32_t lo = r[2 * k], hi = r[2 * k + 1];
            for (uint32_t x = lo; x <= hi && x < 0x80; x++) set[x >> 6] |= 1ull << (x & 63);
            if (hi >= 0x80) {
                uint32_t a = utf8_lead(lo < 0x80 ? 0x80 : lo), b = utf8_lead(hi > 0x10FFFF ? 0x10FFFF : hi);
                for (uint32_t x = a; x <= b; x++) set[x >> 6] |= 1ull << (x & 63);
            }
        }
    }
    return 0;
}

size_t sdn_gstate_forced(const sdn_gstate *s, char *buf, size_t cap) {
    if (!s || s->ended || gs_scratch(s)) return 0;
    sdn_gstate *a = s->scr[0], *b = s->scr[1];
    const sdn_gstate *cur = s;
    size_t k = 0;
    while (k < cap) {
        if (sdn_gstate_can_end(cur)) break;
        int cnt = 0, last = -1;
        uint64_t set[4];
        int all = next_bytes(cur, set) < 0;
        for (int c = 0; c < 256 && cnt < 2; c++)
            if ((all || (set[c >> 6] >> (c & 63) & 1)) && byte_ok(a, cur, (uint8_t)c)) {
                cnt++;
                last = c;
            }
        if (cnt != 1) break;
        sdn_gstate *nx = cur == a ? b : a;
        if (gs_step(nx, cur, (uint8_t)last) != 1) break;
        buf[k++] = (char)last;
        cur = nx;
    }
    return k;
}
