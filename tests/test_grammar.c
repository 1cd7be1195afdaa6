/* test_grammar.c - grammar/ (constrained decoding) against independent references.
 *
 *  - GBNF errors: every error kind with its line and column.
 *  - The matcher against a naive recursive recognizer written here (no stacks, no shared
 *    code): for small grammars (recursion, repetition bounds, classes, negation, '.',
 *    alternatives with common prefixes, multi-byte characters) every string up to length 6
 *    over a small alphabet is checked for "prefix of some sentence" and "sentence".
 *  - Byte by byte against all at once, copies independent, rejected input leaves the state
 *    unchanged, forced text.
 *  - JSON schemas: refusals naming the keyword and the JSON pointer, malformed JSON with the
 *    byte offset, the DroidTask action schema against the dataset's reference answers, and
 *    random documents made by walking the matcher, validated by Python's jsonschema
 *    (tests/constrained/validate_random.py; skips without the package, fails under CI=true).
 *  - Tokens (SmolLM2's byte-level BPE vocabulary, the Llama 2 SentencePiece one with
 *    byte-fallback tokens): tokens spanning several symbols or ending inside a character,
 *    byte tokens, end-of-generation only where the grammar may end, control tokens never;
 *    sdn_gstate_argmax = mask + sdn_argmax on random logits, sdn_gstate_mask = per-token
 *    sdn_gstate_allows on the whole vocabulary; the costs are printed. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "modelfile/gguf.h"
#include "engine/sampler.h"
#include "tokenizer/tokenizer.h"
#include "grammar/grammar.h"
#include "support/test_util.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

static sdn_grammar *gbnf(const char *text) {
    sdn_grammar *g = NULL;
    sdn_err e = {0};
    if (sdn_grammar_parse(text, strlen(text), &g, &e)) fail_msg("grammar does not compile: %s\n%s", e.msg, text);
    return g;
}

static sdn_grammar *schema(const char *text) {
    sdn_grammar *g = NULL;
    sdn_err e = {0};
    if (sdn_grammar_from_schema(text, strlen(text), &g, &e)) fail_msg("schema does not compile: %s\n%s", e.msg, text);
    return g;
}

static sdn_gstate *state(const sdn_grammar *g) {
    sdn_gstate *s = NULL;
    sdn_err e = {0};
    if (sdn_gstate_new(g, &s, &e)) fail_msg("%s", e.msg);
    return s;
}

static int accepts(const sdn_grammar *g, const char *text, int *can_end) {
    sdn_gstate *s = state(g);
    int r = sdn_gstate_accept_bytes(s, text, strlen(text));
    if (can_end) *can_end = sdn_gstate_can_end(s);
    sdn_gstate_free(s);
    return r;
}

/* ---- (a) GBNF errors ---- */

static void test_parse_errors(void **st) {
    (void)st;
    static const struct { const char *g, *msg; } cases[] = {
        {"", "grammar: line 1, column 1: empty grammar"},
        {"  # only a comment\n\n", "grammar: line 3, column 1: empty grammar"},
        {"root ::= x", "grammar: line 1, column 10: undefined rule 'x'"},
        {"root ::= \"a\"\nb ::= \"c\" | zed\n", "grammar: line 2, column 13: undefined rule 'zed'"},
        {"a ::= \"x\"", "grammar: line 1, column 1: no rule named 'root'"},
        {"root ::= \"abc", "grammar: line 1, column 10: unterminated literal"},
        {"root ::= \"ab\ncd\"", "grammar: line 1, column 10: unterminated literal"},
        {"root ::= [a-", "grammar: line 1, column 10: unterminated character class"},
        {"root ::=\n  [^\"\\\\", "grammar: line 2, column 3: unterminated character class"},
        {"root ::= \"\\q\"", "grammar: line 1, column 11: bad escape '\\q'"},
        {"root ::= \"\\x4\"", "grammar: line 1, column 11: bad escape '\\x': 2 hexadecimal digits expected"},
        {"root ::= \"\\uD800\"", "grammar: line 1, column 11: bad escape: U+D800 is not a Unicode scalar value"},
        {"root ::= \"\\U00110000\"", "grammar: line 1, column 11: bad escape: U+110000"},
        {"root ::= \"a\"{3,1}", "grammar: line 1, column 13: bad repetition bounds (maximum 1 below minimum 3)"},
        {"root ::= \"a\"{}", "grammar: line 1, column 13: bad repetition bounds (a number expected)"},
        {"root ::= \"a\"{2", "grammar: line 1, column 13: bad repetition bounds ('}' expected)"},
        {"root ::= \"a\"{1,100000}", "grammar: line 1, column 13: bad repetition bounds (at most 1000)"},
        {"root ::= [z-a]", "grammar: line 1, column 11: bad character range"},
        {"root ::= []", "grammar: line 1, column 10: empty character class"},
        {"root ::= \"a\" | root \"b\"", "grammar: line 1, column 1: left recursion in rule 'root'"},
        {"root ::= x\nx ::= y? x \"b\" | \"c\"\ny ::= \"d\"", "grammar: line 2, column 1: left recursion in rule 'x'"},
        {"root ::= (\"a\"?)*", "grammar: line 1, column 1: left recursion in rule 'root'"},
        {"root ::= \"a\"\nroot ::= \"b\"", "grammar: line 2, column 1: rule 'root' defined twice"},
        {"root ::= (\"a\" | \"b\"", "grammar: line 1, column 10: unclosed parenthesis"},
        {"root ::= \"a\" )", "grammar: line 1, column 14: unmatched ')'"},
        {"root = \"a\"", "grammar: line 1, column 6: '::=' expected after the rule name"},
        {"root ::= \"a\" ; ", "grammar: line 1, column 14: unexpected character ';'"},
        {"root ::= \"\xC3\x28\"", "grammar: line 1, column 11: invalid UTF-8"},
        {"root ::= \"a\"\n\n  \"b\" \xFF", "grammar: line 3, column 7: invalid UTF-8"},
        {"root ::= @P0", "grammar: line 1, column 10: unexpected character '@'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sdn_grammar *g = NULL;
        sdn_err e = {0};
        int rc = sdn_grammar_parse(cases[i].g, strlen(cases[i].g), &g, &e);
        if (rc != SDN_EINVAL || g) fail_msg("case %zu: rc %d, expected SDN_EINVAL (%s)", i, rc, cases[i].g);
        if (strncmp(e.msg, cases[i].msg, strlen(cases[i].msg))) fail_msg("case %zu: message '%s', expected '%s...'", i, e.msg, cases[i].msg);
    }
    {
        sdn_grammar *gn = NULL;
        sdn_err en = {0};
        assert_int_equal(sdn_grammar_parse("root ::= \"a\"\0", 13, &gn, &en), SDN_EINVAL);
        assert_string_equal(en.msg, "grammar: line 1, column 13: a NUL byte");
    }
    /* deep nesting is refused, not a stack overflow */
    char *deep = malloc(100000);
    strcpy(deep, "root ::= ");
    size_t n = strlen(deep);
    for (int i = 0; i < 20000; i++) deep[n++] = '(';
    deep[n++] = '"';
    deep[n++] = 'a';
    deep[n++] = '"';
    for (int i = 0; i < 20000; i++) deep[n++] = ')';
    deep[n] = 0;
    sdn_grammar *g = NULL;
    sdn_err e = {0};
    assert_int_equal(sdn_grammar_parse(deep, n, &g, &e), SDN_EINVAL);
    assert_non_null(strstr(e.msg, "nested too deeply"));
    /* a long chain of rules entered without consuming text is refused too */
    n = 0;
    n += (size_t)sprintf(deep + n, "root ::= r0\n");
    for (int i = 0; i < 1500; i++) n += (size_t)sprintf(deep + n, "r%d ::= r%d\n", i, i + 1);
    sprintf(deep + n, "r1500 ::= \"x\"\n");
    e = (sdn_err){0};
    assert_int_equal(sdn_grammar_parse(deep, strlen(deep), &g, &e), SDN_EINVAL);
    assert_non_null(strstr(e.msg, "nested too deeply"));
    free(deep);
    /* accepted syntax: comments, multi-line rules, escapes, {m}, {m,}, {,n}, '.' */
    g = gbnf("# a comment\nroot ::= x y   # trailing\n  z\nx ::= \"\\x41\\u00e9\\U0001F600\\t\"\ny ::= [\\]\\[a-c-]{2}\nz ::= .{,2} \"q\"{1,} \"\\\\\"");
    assert_int_equal(accepts(g, "A\xC3\xA9\xF0\x9F\x98\x80\t]-\xE2\x82\xACzqq\\", NULL), 1);
    int end;
    assert_int_equal(accepts(g, "A\xC3\xA9\xF0\x9F\x98\x80\t[cqq\\", &end), 1);
    assert_int_equal(end, 1);
    assert_int_equal(accepts(g, "A\xC3\xA9\xF0\x9F\x98\x80\tdd", NULL), 0);
    sdn_grammar_free(g);
}

/* ---- (b) the naive reference recognizer ---- */

enum { N_LIT, N_CLS, N_SEQ, N_ALT, N_REP, N_REF, N_ANY };
typedef struct N {
    int t;
    const char *s;
    uint32_t r[8];
    int nr, neg;
    const struct N *k[6];
    int mn, mx;
    int rule;
} N;
#define LIT(x) &(N){.t = N_LIT, .s = x}
#define CLS(ng, nrr, ...) &(N){.t = N_CLS, .neg = ng, .nr = nrr, .r = {__VA_ARGS__}}
#define SEQ(...) &(N){.t = N_SEQ, .k = {__VA_ARGS__}}
#define ALT(...) &(N){.t = N_ALT, .k = {__VA_ARGS__}}
#define REP(x, a, b) &(N){.t = N_REP, .k = {x}, .mn = a, .mx = b}
#define REF(i) &(N){.t = N_REF, .rule = i}
#define ANY &(N){.t = N_ANY}

static int utf8_dec(const char *s, uint32_t *out) {
    int n = 0;
    const unsigned char *u = (const unsigned char *)s;
    while (*u) {
        uint32_t c = *u;
        int l = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if (l > 1) {
            c &= l == 2 ? 0x1F : l == 3 ? 0x0F : 0x07;
            for (int k = 1; k < l; k++) c = (c << 6) | (u[k] & 0x3F);
        }
        out[n++] = c;
        u += l;
    }
    return n;
}

/* End positions (bit set) of node n matched at pos of in[0..len). Prefix mode: running out
 * of input counts as a match (every rule here can derive some text). */
static uint32_t ref_match(const N *n, const uint32_t *in, int len, int pos, int prefix, const N *const *rules) {
    if (prefix && pos == len) return 1u << len;
    switch (n->t) {
    case N_LIT: {
        uint32_t cps[16];
        int m = utf8_dec(n->s, cps);
        for (int i = 0; i < m; i++) {
            if (pos + i == len) return prefix ? 1u << len : 0;
            if (in[pos + i] != cps[i]) return 0;
        }
        return 1u << (pos + m);
    }
    case N_CLS: case N_ANY: {
        if (pos == len) return 0;
        int in_r = 0;
        for (int i = 0; i < n->nr; i++)
            if (in[pos] >= n->r[2 * i] && in[pos] <= n->r[2 * i + 1]) in_r = 1;
        if (n->t == N_ANY || in_r != n->neg) return 1u << (pos + 1);
        return 0;
    }
    case N_SEQ: {
        uint32_t cur = 1u << pos;
        for (int k = 0; k < 6 && n->k[k]; k++) {
            uint32_t nx = 0;
            for (int p = 0; p <= len; p++)
                if (cur >> p & 1) nx |= ref_match(n->k[k], in, len, p, prefix, rules);
            cur = nx;
        }
        return cur;
    }
    case N_ALT: {
        uint32_t r = 0;
        for (int k = 0; k < 6 && n->k[k]; k++) r |= ref_match(n->k[k], in, len, pos, prefix, rules);
        return r;
    }
    case N_REP: {
        uint32_t cur = 1u << pos, res = n->mn == 0 ? cur : 0;
        int mx = n->mx < 0 ? len + 2 : n->mx;
        for (int i = 1; i <= mx && cur; i++) {
            uint32_t nx = 0;
            for (int p = 0; p <= len; p++)
                if (cur >> p & 1) nx |= ref_match(n->k[0], in, len, p, prefix, rules);
            cur = nx;
            if (i >= n->mn) res |= cur;
        }
        return res;
    }
    case N_REF: return ref_match(rules[n->rule], in, len, pos, prefix, rules);
    }
    return 0;
}

typedef struct refg {
    const char *gbnf;
    const N *rules[4];
    const char *alphabet[6];
} refg;

static const refg ref_grammars[] = {
    {"root ::= \"(\" root \")\" root | \"\"", {ALT(SEQ(LIT("("), REF(0), LIT(")"), REF(0)), LIT(""))}, {"(", ")", "x"}},
    {"root ::= (\"ab\" | \"a\"){1,3} [c-d]? \"c\"*",
     {SEQ(REP(ALT(LIT("ab"), LIT("a")), 1, 3), REP(CLS(0, 1, 'c', 'd'), 0, 1), REP(LIT("c"), 0, -1))},
     {"a", "b", "c", "d"}},
    {"root ::= x (\",\" x){0,2}\nx ::= [ab]+ | \"[\" root \"]\"",
     {SEQ(REF(1), REP(SEQ(LIT(","), REF(1)), 0, 2)), ALT(REP(CLS(0, 1, 'a', 'b'), 1, -1), SEQ(LIT("["), REF(0), LIT("]")))},
     {"a", "b", ",", "[", "]"}},
    {"root ::= [^a] . \"a\"? [^a-b\\n]{2}", {SEQ(CLS(1, 1, 'a', 'a'), ANY, REP(LIT("a"), 0, 1), REP(CLS(1, 2, 'a', 'b', '\n', '\n'), 2, 2))},
     {"a", "b", "c", "\n"}},
    {"root ::= [\\u00e9-\\u00eb]+ (\"x\" | \"\xE2\x82\xAC\")", {SEQ(REP(CLS(0, 1, 0xE9, 0xEB), 1, -1), ALT(LIT("x"), LIT("\xE2\x82\xAC")))},
     {"\xC3\xA9", "\xC3\xAA", "x", "\xE2\x82\xAC", "z"}},
    {"root ::= \"ab\" \"c\"\n       | \"ab\" \"d\"   # comment\n       | x\nx ::= \"a\"{2,} y\ny ::= \"\" | \"b\" y \"c\"",
     {ALT(SEQ(LIT("ab"), LIT("c")), SEQ(LIT("ab"), LIT("d")), REF(1)), SEQ(REP(LIT("a"), 2, -1), REF(2)), ALT(LIT(""), SEQ(LIT("b"), REF(2), LIT("c")))},
     {"a", "b", "c", "d"}},
    {"root ::= \"abc\" (\"d\" | \"e\") \"ff\" | \"b\" \"a\" \"a\" root?",
     {ALT(SEQ(LIT("abc"), ALT(LIT("d"), LIT("e")), LIT("ff")), SEQ(LIT("b"), LIT("a"), LIT("a"), REP(REF(0), 0, 1)))},
     {"a", "b", "c", "d", "e", "f"}},
};

static void test_against_reference(void **st) {
    (void)st;
    long checked = 0, nforced = 0;
    for (size_t gi = 0; gi < sizeof ref_grammars / sizeof *ref_grammars; gi++) {
        const refg *R = &ref_grammars[gi];
        sdn_grammar *g = gbnf(R->gbnf);
        int na = 0;
        while (na < 6 && R->alphabet[na]) na++;
        int idx[6];
        for (int len = 0; len <= 6; len++) {
            long total = 1;
            for (int k = 0; k < len; k++) total *= na;
            for (long c = 0; c < total; c++) {
                long x = c;
                char text[64] = "";
                for (int k = 0; k < len; k++) {
                    idx[k] = (int)(x % na);
                    x /= na;
                    strcat(text, R->alphabet[idx[k]]);
                }
                uint32_t cps[16];
                int n = utf8_dec(text, cps);
                int ref_pre = (ref_match(R->rules[0], cps, n, 0, 1, R->rules) >> n) & 1;
                int ref_full = (ref_match(R->rules[0], cps, n, 0, 0, R->rules) >> n) & 1;
                int end = 0;
                int got = accepts(g, text, &end);
                if (got != ref_pre || (got && end != ref_full))
                    fail_msg("grammar %zu, text '%s': matcher prefix %d end %d, reference prefix %d sentence %d", gi, text, got, end, ref_pre, ref_full);
                checked++;
            }
        }
        /* forced text against the reference: for every viable prefix p of up to 3 symbols,
         * every viable p + q (up to 6 symbols in all) agrees with p + forced(p) as far as
         * both go, and a prefix with forced text is not a sentence */
        for (int lp = 0; lp <= 3; lp++) {
            long tp = 1;
            for (int k = 0; k < lp; k++) tp *= na;
            for (long c = 0; c < tp; c++) {
                char p[64] = "";
                long x = c;
                for (int k = 0; k < lp; k++) {
                    strcat(p, R->alphabet[x % na]);
                    x /= na;
                }
                uint32_t cps[16];
                int n = utf8_dec(p, cps);
                if (!((ref_match(R->rules[0], cps, n, 0, 1, R->rules) >> n) & 1)) continue;
                sdn_gstate *s = state(g);
                assert_int_equal(sdn_gstate_accept_bytes(s, p, strlen(p)), 1);
                char fb[64];
                size_t fl = sdn_gstate_forced(s, fb, sizeof fb);
                sdn_gstate_free(s);
                if (fl) {
                    nforced++;
                    if ((ref_match(R->rules[0], cps, n, 0, 0, R->rules) >> n) & 1) fail_msg("grammar %zu: '%s' is a sentence but forces '%.*s'", gi, p, (int)fl, fb);
                }
                for (int lq = 1; lq + lp <= 6; lq++) {
                    long tq = 1;
                    for (int k = 0; k < lq; k++) tq *= na;
                    for (long d = 0; d < tq; d++) {
                        char q[64] = "";
                        long y = d;
                        for (int k = 0; k < lq; k++) {
                            strcat(q, R->alphabet[y % na]);
                            y /= na;
                        }
                        char pq[128];
                        snprintf(pq, sizeof pq, "%s%s", p, q);
                        uint32_t c2[16];
                        int n2 = utf8_dec(pq, c2);
                        if (!((ref_match(R->rules[0], c2, n2, 0, 1, R->rules) >> n2) & 1)) continue;
                        size_t ql = strlen(q), m = ql < fl ? ql : fl;
                        if (memcmp(q, fb, m)) fail_msg("grammar %zu: after '%s' forced '%.*s', but '%s' may follow", gi, p, (int)fl, fb, q);
                    }
                }
            }
        }
        sdn_grammar_free(g);
    }
    print_message("%ld strings checked against the naive recognizer, %ld prefixes with forced text checked against it\n", checked, nforced);
    assert_true(nforced >= 6);
}

/* ---- (c) byte by byte, (d) copies, rejection leaves the state unchanged ---- */

static int byte_allowed(const sdn_gstate *s, const sdn_grammar *g, uint8_t b);

/* Same forced text, same ending, same allowed next bytes. */
static void same_state(const sdn_grammar *g, const sdn_gstate *a, const sdn_gstate *b) {
    char fa[256], fb[256];
    size_t na = sdn_gstate_forced(a, fa, sizeof fa), nb = sdn_gstate_forced(b, fb, sizeof fb);
    assert_int_equal(na, nb);
    assert_memory_equal(fa, fb, na);
    assert_int_equal(sdn_gstate_can_end(a), sdn_gstate_can_end(b));
    for (int c = 0; c < 256; c++) assert_int_equal(byte_allowed(a, g, (uint8_t)c), byte_allowed(b, g, (uint8_t)c));
}

static int byte_allowed(const sdn_gstate *s, const sdn_grammar *g, uint8_t b) {
    sdn_gstate *t = state(g);
    sdn_gstate_copy(t, s);
    int r = sdn_gstate_accept_bytes(t, &b, 1);
    sdn_gstate_free(t);
    return r;
}

static void test_bytes_copies(void **st) {
    (void)st;
    const char *gt = "root ::= obj\nobj ::= \"{\" (kv (\", \" kv)*)? \"}\"\nkv ::= str \": \" val\nval ::= str | obj | [0-9]+\n"
                     "str ::= \"\\\"\" [^\"\\\\\\x00-\\x1f]* \"\\\"\"";
    sdn_grammar *g = gbnf(gt);
    const char *docs[] = {"{\"a\xC3\xA9\": {\"\xE2\x82\xAC\": 12, \"b\": \"\xF0\x9F\x98\x80x\"}}", "{}", "{\"k\": {\"l\": {}}}"};
    for (int d = 0; d < 3; d++) {
        const char *doc = docs[d];
        size_t n = strlen(doc);
        for (int trial = 0; trial < 50; trial++) {
            sdn_gstate *a = state(g), *b = state(g);
            assert_int_equal(sdn_gstate_accept_bytes(a, doc, n), 1);
            size_t i = 0;
            while (i < n) {
                size_t k = 1 + rnd() % 4;
                if (k > n - i) k = n - i;
                /* a rejected byte first: the state must not move */
                uint8_t bad = 0x01;
                assert_int_equal(sdn_gstate_accept_bytes(b, &bad, 1), 0);
                assert_int_equal(sdn_gstate_accept_bytes(b, doc + i, k), 1);
                i += k;
            }
            same_state(g, a, b);
            assert_int_equal(sdn_gstate_can_end(a), 1);
            sdn_gstate_free(a);
            sdn_gstate_free(b);
        }
        /* every prefix: the next byte of the document is allowed, a byte not allowed is
         * refused without moving the state, the forced text is a prefix of the rest */
        sdn_gstate *s = state(g);
        for (size_t i = 0; i < n; i++) {
            char f[128];
            size_t nf = sdn_gstate_forced(s, f, sizeof f);
            assert_true(nf <= n - i);
            assert_memory_equal(f, doc + i, nf);
            assert_int_equal(byte_allowed(s, g, (uint8_t)doc[i]), 1);
            assert_int_equal(sdn_gstate_accept_bytes(s, doc + i, 1), 1);
        }
        sdn_gstate_free(s);
    }
    /* copies are independent */
    sdn_gstate *a = state(g), *b = state(g), *c = state(g);
    assert_int_equal(sdn_gstate_accept_bytes(a, "{\"x\": ", 6), 1);
    assert_int_equal(sdn_gstate_copy(b, a), 0);
    assert_int_equal(sdn_gstate_copy(c, a), 0);
    assert_int_equal(sdn_gstate_accept_bytes(b, "12}", 3), 1);
    assert_int_equal(sdn_gstate_can_end(b), 1);
    assert_int_equal(sdn_gstate_can_end(a), 0);
    same_state(g, a, c);
    assert_int_equal(sdn_gstate_accept_bytes(a, "{}}", 3), 1);
    assert_int_equal(sdn_gstate_accept_bytes(c, "\"s\"}", 4), 1);
    assert_int_equal(sdn_gstate_can_end(b), 1);
    char f[16];
    assert_int_equal(sdn_gstate_forced(b, f, sizeof f), 0);
    assert_int_equal(sdn_gstate_accept_bytes(b, "x", 1), 0);
    sdn_gstate_free(a);
    sdn_gstate_free(b);
    sdn_gstate_free(c);
    /* partial characters: a token may end inside one; a lead byte with no possible
     * completion is refused at once, as are overlong forms and surrogates */
    sdn_grammar *u = gbnf("root ::= [\\u00e9-\\u00eb] \"\xE2\x82\xAC\" [^a]");
    assert_int_equal(accepts(u, "\xC3", NULL), 1);
    assert_int_equal(accepts(u, "\xC4", NULL), 0);
    assert_int_equal(accepts(u, "\xC3\xA8", NULL), 0);
    assert_int_equal(accepts(u, "\xC3\xAB\xE2", NULL), 1);
    assert_int_equal(accepts(u, "\xC3\xAB\xE2\x82\xAC\xED\x9F", NULL), 1);
    assert_int_equal(accepts(u, "\xC3\xAB\xE2\x82\xAC\xED\xA0", NULL), 0);  /* surrogate */
    assert_int_equal(accepts(u, "\xC3\xAB\xE2\x82\xAC\xE0\x80", NULL), 0);  /* overlong */
    assert_int_equal(accepts(u, "\xC3\xAB\xE2\x82\xAC\xF4\x90", NULL), 0);  /* above U+10FFFF */
    assert_int_equal(accepts(u, "\xC3\xAB\xE2\x82\xAC\xC0\x80", NULL), 0);
    assert_int_equal(accepts(u, "\xC3\xAB\xE2\x82\xAC" "a", NULL), 0);
    int end;
    assert_int_equal(accepts(u, "\xC3\xAB\xE2\x82\xAC\xF0\x9F\x98\x80", &end), 1);
    assert_int_equal(end, 1);
    assert_int_equal(accepts(u, "\xC3\xAB\xE2\x82\xAC\xF0\x9F\x98", &end), 1);
    assert_int_equal(end, 0);
    sdn_grammar_free(u);
    sdn_grammar_free(g);
}

/* An ambiguous grammar multiplies stacks: the matcher fails with -1, never hangs. */
static void test_limits(void **st) {
    (void)st;
    sdn_grammar *g = gbnf("root ::= x*\nx ::= \"a\" | \"a\" \"a\" | \"a\" \"a\" \"a\" | y\ny ::= \"a\"+");
    sdn_gstate *s = state(g);
    int r = 1;
    char a[4096];
    memset(a, 'a', sizeof a);
    clock_t t0 = clock();
    for (int i = 0; i < 4096 && r == 1; i++) r = sdn_gstate_accept_bytes(s, a, 1);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    print_message("ambiguous grammar: result %d after the 'a's, %.3f s\n", r, secs);
    assert_true(r == 1 || r == -1);
    assert_true(secs < 20);
    sdn_gstate_free(s);
    sdn_grammar_free(g);
    /* a grammar whose parses multiply (2^n distinct stacks after n 'a's): -1, quickly */
    g = gbnf("root ::= y\ny ::= \"a\" y \"b\" | \"a\" y \"c\" | \"\"");
    s = state(g);
    r = 1;
    t0 = clock();
    int k;
    for (k = 0; k < 100 && r == 1; k++) r = sdn_gstate_accept_bytes(s, "a", 1);
    assert_int_equal(r, -1);
    assert_true(k > 8 && k < 20);
    assert_true((double)(clock() - t0) / CLOCKS_PER_SEC < 5);
    char f[8];
    assert_int_equal(sdn_gstate_forced(s, f, sizeof f), 0); /* the state is still usable */
    assert_int_equal(sdn_gstate_accept_bytes(s, "b", 1), 1);
    sdn_gstate_free(s);
    sdn_grammar_free(g);
    /* deep nesting: the stack bound answers -1 */
    g = gbnf("root ::= \"(\" root \")\" | \"x\"");
    s = state(g);
    r = 1;
    int i;
    for (i = 0; i < 20000 && r == 1; i++) r = sdn_gstate_accept_bytes(s, "(", 1);
    assert_int_equal(r, -1);
    assert_true(i > 1000);
    sdn_gstate_free(s);
    sdn_grammar_free(g);
}

/* ---- (e) forced text ---- */

static const char *DROID =
    "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"action\":{\"type\":\"string\",\"enum\":[\"tap\",\"text\",\"long_tap\","
    "\"scroll_up\",\"scroll_down\",\"go_back\",\"N/A\"]},\"input_text\":{\"type\":\"string\"}},\"required\":[\"id\",\"action\",\"input_text\"],"
    "\"additionalProperties\":false}";

static void check_forced(const sdn_grammar *g, const char *prefix, const char *want) {
    sdn_gstate *s = state(g);
    if (sdn_gstate_accept_bytes(s, prefix, strlen(prefix)) != 1) fail_msg("prefix '%s' refused", prefix);
    char f[256];
    size_t n = sdn_gstate_forced(s, f, sizeof f - 1);
    f[n] = 0;
    if (strcmp(f, want)) fail_msg("after '%s' forced '%s', expected '%s'", prefix, f, want);
    /* cap is honored */
    if (n > 2) assert_int_equal(sdn_gstate_forced(s, f, 2), 2);
    sdn_gstate_free(s);
}

static void test_forced(void **st) {
    (void)st;
    sdn_grammar *g = schema(DROID);
    check_forced(g, "", "{\"id\": ");
    check_forced(g, "{\"id\": 10", ""); /* more digits may follow */
    check_forced(g, "{\"id\": 10,", " \"action\": \"");
    check_forced(g, "{\"id\": 10, \"action\": \"", "");
    check_forced(g, "{\"id\": 10, \"action\": \"ta", "p\", \"input_text\": \"");
    check_forced(g, "{\"id\": 10, \"action\": \"scroll_", "");
    check_forced(g, "{\"id\": 10, \"action\": \"scroll_d", "own\", \"input_text\": \"");
    check_forced(g, "{\"id\": 10, \"action\": \"N/A\", \"input_text\": \"\"", "}");
    check_forced(g, "{\"id\": 10, \"action\": \"N/A\", \"input_text\": \"\"}", "");
    check_forced(g, "{\"id\": -", "");
    check_forced(g, "{\"id\": 0", ", \"action\": \""); /* no leading zeros */
    sdn_grammar_free(g);
    g = schema("{\"enum\":[\"tap\",\"text\"]}");
    check_forced(g, "", "\"t");
    check_forced(g, "\"t", "");
    check_forced(g, "\"ta", "p\"");
    sdn_grammar_free(g);
    g = gbnf("root ::= \"caf\xC3\xA9 \" [\\u00e0-\\u00e1] \"!\"");
    check_forced(g, "", "caf\xC3\xA9 \xC3");
    check_forced(g, "caf\xC3", "\xA9 \xC3");
    check_forced(g, "caf\xC3\xA9 \xC3\xA1", "!");
    sdn_grammar_free(g);
}

/* ---- (f) JSON schemas ---- */

static void test_schema_errors(void **st) {
    (void)st;
    static const struct { const char *s, *msg; } cases[] = {
        {"{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\",\"format\":\"email\"}}}", "json_schema: unsupported keyword \"format\" at /properties/x"},
        {"{\"type\":\"integer\",\"minimum\":3}", "json_schema: unsupported keyword \"minimum\" at /"},
        {"{\"oneOf\":[{\"type\":\"integer\"}]}", "json_schema: unsupported keyword \"oneOf\" at /"},
        {"{\"allOf\":[]}", "json_schema: unsupported keyword \"allOf\" at /"},
        {"{\"not\":{}}", "json_schema: unsupported keyword \"not\" at /"},
        {"{\"if\":{}}", "json_schema: unsupported keyword \"if\" at /"},
        {"{\"type\":\"object\",\"patternProperties\":{}}", "json_schema: unsupported keyword \"patternProperties\" at /"},
        {"{\"type\":\"array\",\"items\":{\"type\":\"array\",\"uniqueItems\":true}}", "json_schema: unsupported keyword \"uniqueItems\" at /items"},
        {"{\"anyOf\":[{\"type\":\"null\"},{\"properties\":{\"a/b\":{\"exclusiveMaximum\":1}}}]}",
         "json_schema: unsupported keyword \"exclusiveMaximum\" at /anyOf/1/properties/a~1b"},
        {"{\"$defs\":{\"x\":{\"type\":\"string\",\"contentEncoding\":\"base64\"}},\"$ref\":\"#/$defs/x\"}", "json_schema: unsupported keyword \"contentEncoding\" at /$defs/x"},
        {"{\"type\":\"object\",\"properties\":{\"a\":1}}", "json_schema: a schema must be an object or a boolean at /properties/a"},
        {"{\"type\":\"strin\"}", "json_schema: unknown type \"strin\" at /"},
        {"{\"type\":\"object\",\"required\":\"b\"}", "json_schema: \"required\" must be an array of strings at /"},
        {"{\"$ref\":\"http://example.com/s.json\"}", "json_schema: $ref \"http://example.com/s.json\" at /: only local references"},
        {"{\"$ref\":\"#/$defs/missing\"}", "json_schema: $ref \"#/$defs/missing\" at /"},
        {"{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}", "json_schema: a $ref or anyOf cycle that consumes no text"},
        {"{\"type\":\"string\",\"pattern\":\"(unclosed\"}", "json_schema: \"pattern\" at /:"},
        {"{\"type\":\"array\",\"maxItems\":100000}", "json_schema: minItems/maxItems above 1000 are not supported at /"},
        {"{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", "json_schema: maxItems below minItems at /"},
        {"{\"type\":\"string\",\"minLength\":-1}", "json_schema: \"minLength\" must be a non-negative integer at /"},
        {"{\"enum\":[1,2],\"type\":\"string\"}", "json_schema: no \"enum\"/\"const\" value satisfies the schema at /"},
        {"false", "json_schema: schema false at / admits no value"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"$defs\":{}}}}", "json_schema: \"$defs\" is supported at the root only, not at /properties/a"},
        {"{\"type\":\"object\",", "json_schema: malformed JSON near byte offset 16"},
        {"{\"type\":\"object\"} x", "json_schema: malformed JSON (text after the schema at byte offset 18)"},
        {"", "json_schema: malformed JSON near byte offset 0"},
        {"{\"items\":[{}]}", "json_schema: \"items\" as an array (tuple form) is not supported at /"},
        {"{\"properties\":{\"a\xC3\":{}},\"additionalProperties\":true}", "json_schema: invalid UTF-8 at byte offset 17"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sdn_grammar *g = NULL;
        sdn_err e = {0};
        int rc = sdn_grammar_from_schema(cases[i].s, strlen(cases[i].s), &g, &e);
        if (rc != SDN_EINVAL || g) fail_msg("case %zu: rc %d, expected SDN_EINVAL (%s)", i, rc, cases[i].s);
        if (strncmp(e.msg, cases[i].msg, strlen(cases[i].msg))) fail_msg("case %zu: message '%s', expected '%s...'", i, e.msg, cases[i].msg);
    }
    /* deep nesting is refused */
    char deep[8192] = "";
    for (int i = 0; i < 100; i++) strcat(deep, "{\"items\":");
    strcat(deep, "{}");
    for (int i = 0; i < 100; i++) strcat(deep, "}");
    sdn_grammar *g = NULL;
    sdn_err e = {0};
    assert_int_equal(sdn_grammar_from_schema(deep, strlen(deep), &g, &e), SDN_EINVAL);
    assert_non_null(strstr(e.msg, "nested deeper than"));
    /* annotations are accepted and ignored */
    g = schema("{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"$id\":\"x\",\"title\":\"t\",\"description\":\"d\",\"$comment\":\"c\","
               "\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\",\"default\":true,\"examples\":[false]}},\"strict\":true}");
    int end;
    assert_int_equal(accepts(g, "{\"a\": true}", &end), 1);
    assert_int_equal(end, 1);
    assert_int_equal(accepts(g, "{}", &end), 1);
    assert_int_equal(end, 1);
    assert_int_equal(accepts(g, "{\"a\": true, \"b\"", NULL), 0); /* additionalProperties absent: false */
    sdn_grammar_free(g);
}

static void test_schema_semantics(void **st) {
    (void)st;
    static const struct { const char *schema, *doc; int ok; } cases[] = {
        {"{\"type\":\"object\"}", "{}", 1},
        {"{\"type\":\"object\"}", "{\"a\": [1, 2.5e-3, {\"b\": null}], \"c\": \"x\\n\\u00e9\", \"d\": true}", 1},
        {"{\"type\":\"object\"}", "{\"a\":1}", 0}, /* the canonical layout only */
        {"{\"type\":\"object\"}", "[]", 0},
        {"{}", "[1, \"a\", {}]", 1},
        {"true", "null", 1},
        {"{\"type\":[\"string\",\"null\"]}", "null", 1},
        {"{\"type\":[\"string\",\"null\"]}", "\"x\"", 1},
        {"{\"type\":[\"string\",\"null\"]}", "1", 0},
        {"{\"type\":\"integer\"}", "-12", 1},
        {"{\"type\":\"integer\"}", "012", 0},
        {"{\"type\":\"integer\"}", "1.5", 0},
        {"{\"type\":\"number\"}", "-0.5E+10", 1},
        {"{\"type\":\"number\"}", "1.", 0},
        {"{\"const\":{\"a\":[1,\"\\u00e9\"]}}", "{\"a\": [1, \"\xC3\xA9\"]}", 1},
        {"{\"enum\":[1,\"two\",null,true]}", "true", 1},
        {"{\"enum\":[1,\"two\",null,true]}", "false", 0},
        {"{\"type\":\"string\",\"enum\":[\"a\",1]}", "1", 0},
        {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"ab\"", 1},
        {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"a\\\"c\"", 1},
        {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"abcd\"", 0},
        {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"a\"", 0},
        {"{\"type\":\"string\",\"maxLength\":100}", "\"\xC3\xA9\xC3\xA9\\u0041\"", 1},
        {"{\"type\":\"string\",\"minLength\":70}", "\"abc\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^[a-z]+-[0-9]{2}$\"}", "\"ab-12\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^[a-z]+-[0-9]{2}$\"}", "\"ab-123\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^[a-z]+-[0-9]{2}$\"}", "\"A", 0},
        {"{\"type\":\"string\",\"pattern\":\"^[a-z]+-[0-9]{2}$\"}", "\"\\u0061b-12\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"cat\"}", "\"concatenate\"", 1}, /* unanchored: anywhere */
        {"{\"type\":\"string\",\"pattern\":\"cat\"}", "\"dog\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^a|b$\"}", "\"xxb\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^a|b$\"}", "\"axx\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^a|b$\"}", "\"xax\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^\\\\d{3}$\",\"maxLength\":3}", "\"123\"", 1},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":3}", "[1, 2, 3]", 1},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":3}", "[1]", 0},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":3}", "[1, 2, 3, 4]", 0},
        {"{\"type\":\"array\",\"maxItems\":0}", "[]", 1},
        {"{\"type\":\"array\"}", "[[], {}]", 1},
        {"{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"array\",\"items\":{\"$ref\":\"#\"}}]}", "[1, [2, []]]", 1},
        {"{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/n\"},{\"type\":\"null\"}]}},"
         "\"required\":[\"v\",\"next\"]}},\"$ref\":\"#/$defs/n\"}",
         "{\"v\": 1, \"next\": {\"v\": 2, \"next\": null}}", 1},
        {"{\"definitions\":{\"a~b/c\":{\"type\":\"boolean\"}},\"type\":\"array\",\"items\":{\"$ref\":\"#/definitions/a~0b~1c\"}}", "[true, false]", 1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"},\"c\":{\"type\":\"integer\"}},\"required\":[\"b\"]}", "{\"b\": 1}", 1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"},\"c\":{\"type\":\"integer\"}},\"required\":[\"b\"]}", "{\"a\": 1, \"b\": 2, \"c\": 3}", 1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"},\"c\":{\"type\":\"integer\"}},\"required\":[\"b\"]}", "{\"a\": 1, \"c\": 3}", 0},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"},\"c\":{\"type\":\"integer\"}},\"required\":[\"b\"]}", "{\"b\": 2, \"a\": 1}", 0},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":{\"type\":\"boolean\"}}", "{\"a\": 1, \"ab\": true, \"\": false}", 1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":{\"type\":\"boolean\"}}", "{\"a\": 1, \"a\": true}", 0},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":true}", "{\"b\": [1]}", 1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":false}", "{\"b\"", 0},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"b\"]}", "{\"b\": [null]}", 1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"b\"]}", "{\"a\": 1}", 0},
        {"{\"required\":[\"x\",\"y\"]}", "{\"x\": 1, \"y\": {}}", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sdn_grammar *g = schema(cases[i].schema);
        int end = 0;
        int r = accepts(g, cases[i].doc, &end);
        int ok = r == 1 && end;
        if (ok != cases[i].ok) fail_msg("case %zu: %s under %s: accepted %d, complete %d, expected %s", i, cases[i].doc, cases[i].schema, r, end,
                                        cases[i].ok ? "valid" : "refused");
        sdn_grammar_free(g);
    }
    char *txt = NULL;
    sdn_err e = {0};
    assert_int_equal(sdn_schema_to_gbnf(DROID, strlen(DROID), &txt, &e), 0);
    assert_non_null(strstr(txt, "root ::= "));
    sdn_grammar *g = gbnf(txt); /* the text is GBNF this parser reads back */
    sdn_grammar_free(g);
    free(txt);
}

/* Every DroidTask reference answer: valid JSON in the canonical layout, accepted by the
 * action schema (the dataset's actions are "tap" and "input" - the prompt says "tap or
 * input" - with id -1 and "N/A" when the task is finished; the enum has no "input":
 * with it every answer is accepted, without it exactly the "input" ones are refused). */
static void test_droidtask_references(void **st) {
    (void)st;
    TU_REQUIRE_SHARED();
    FILE *f = fopen(tu_shared_path("datasets/ui/ui_droidtask.jsonl"), "r");
    if (!f) fail_msg("ui_droidtask.jsonl missing");
    const char *real = "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"action\":{\"type\":\"string\",\"enum\":[\"tap\",\"input\",\"text\","
                       "\"long_tap\",\"scroll_up\",\"scroll_down\",\"go_back\",\"N/A\"]},\"input_text\":{\"type\":\"string\"}},"
                       "\"required\":[\"id\",\"action\",\"input_text\"],\"additionalProperties\":false}";
    sdn_grammar *g = schema(DROID), *g2 = schema(real);
    char *line = NULL;
    size_t cap = 0;
    int n = 0, ok = 0, ok2 = 0, input = 0;
    while (getline(&line, &cap, f) > 0) {
        const char *k = strstr(line, "\"reference\": \"");
        if (!k) continue;
        k += 14;
        char ref[512];
        size_t m = 0;
        while (*k && *k != '"' && m < sizeof ref - 1) { /* the JSON string's content, unescaped */
            if (*k == '\\') {
                k++;
                if (*k == 'n') ref[m++] = '\n';
                else ref[m++] = *k;
            } else ref[m++] = *k;
            k++;
        }
        ref[m] = 0;
        n++;
        int end;
        if (accepts(g, ref, &end) == 1 && end) ok++;
        else if (!strstr(ref, "\"action\": \"input\"")) fail_msg("reference refused: %s", ref);
        if (strstr(ref, "\"action\": \"input\"")) input++;
        if (accepts(g2, ref, &end) == 1 && end) ok2++;
        else fail_msg("reference refused by the schema with \"input\": %s", ref);
    }
    free(line);
    fclose(f);
    print_message("DroidTask references: %d, accepted by the issue's schema %d (%d use action \"input\", not in its enum), "
                  "by the schema with \"input\" %d\n", n, ok, input, ok2);
    assert_true(n >= 150);
    assert_int_equal(ok + input, n);
    assert_int_equal(ok2, n);
    sdn_grammar_free(g);
    sdn_grammar_free(g2);
}

/* ---- (g) random documents, validated by Python's jsonschema ---- */

static const char *const rand_schemas[] = {
    NULL, /* DROID */
    "{\"type\":\"object\"}",
    "{}",
    "{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"maxItems\":3},\"minItems\":1,\"maxItems\":4}",
    "{\"anyOf\":[{\"type\":\"number\"},{\"type\":\"string\",\"maxLength\":5},{\"type\":\"boolean\"},{\"type\":\"null\"}]}",
    "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"pattern\":\"^[a-z]{2,4}-[0-9]+$\"},"
    "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"},\"maxItems\":2}},\"required\":[\"name\"]}},\"$ref\":\"#/$defs/node\"}",
    "{\"type\":\"object\",\"properties\":{\"a\":{\"enum\":[1,\"x\",null,[1,2],{\"k\":\"v\"}]},\"b\":{\"const\":\"caf\xC3\xA9\"},\"c\":{\"type\":[\"integer\",\"null\"]}},"
    "\"required\":[\"b\"],\"additionalProperties\":{\"type\":\"boolean\"}}",
    "{\"type\":\"string\",\"minLength\":3,\"maxLength\":80}",
    "{\"type\":\"string\",\"pattern\":\"\\\\d{3}\"}",
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"b\",\"a\"]}",
    "{\"type\":\"object\",\"properties\":{\"q\":{\"type\":\"string\",\"pattern\":\"^(yes|no)$\"},\"n\":{\"type\":\"number\"}},\"additionalProperties\":true}",
    "{\"definitions\":{\"v\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"array\",\"items\":{\"$ref\":\"#/definitions/v\"},\"maxItems\":3}]}},\"$ref\":\"#/definitions/v\"}",
};

/* A random document: random allowed bytes, more and more biased towards closing. Every
 * prefix must have a continuation (no dead ends). */
static int random_doc(const sdn_grammar *g, char *out, size_t cap) {
    sdn_gstate *s = state(g), *t = state(g);
    size_t n = 0;
    uint8_t allowed[256];
    for (;;) {
        int na = 0;
        for (int b = 0; b < 256; b++) {
            sdn_gstate_copy(t, s);
            if (sdn_gstate_accept_bytes(t, &(uint8_t){(uint8_t)b}, 1) == 1) allowed[na++] = (uint8_t)b;
        }
        int end = sdn_gstate_can_end(s);
        if (!na && !end) fail_msg("dead end after '%.*s'", (int)n, out);
        if (end && (!na || rnd() % 100 < 30 + n / 4)) break;
        if (n + 1 >= cap) fail_msg("document too long: '%.80s...'", out);
        uint8_t pick = allowed[rnd() % na];
        if (n > 12 && rnd() % 100 < 60) { /* prefer closing bytes */
            static const char pref[] = "\"0]}";
            for (const char *p = pref; *p; p++)
                if (memchr(allowed, *p, (size_t)na)) {
                    pick = (uint8_t)*p;
                    break;
                }
        } else if (rnd() % 4 == 0) { /* some non-ASCII text */
            for (int k = 0; k < na; k++)
                if (allowed[k] >= 0xC3 && allowed[k] <= 0xE2 && rnd() % 3 == 0) { pick = allowed[k]; break; }
        }
        out[n++] = (char)pick;
        assert_int_equal(sdn_gstate_accept_bytes(s, &pick, 1), 1);
    }
    out[n] = 0;
    sdn_gstate_free(s);
    sdn_gstate_free(t);
    return (int)n;
}

static void json_escape(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void test_random_documents(void **st) {
    (void)st;
    const char *path = tu_tmp("grammar-random.jsonl");
    char pbuf[1024];
    snprintf(pbuf, sizeof pbuf, "%s", path);
    FILE *f = fopen(pbuf, "w");
    assert_non_null(f);
    int total = 0;
    char doc[4096];
    for (size_t k = 0; k < sizeof rand_schemas / sizeof *rand_schemas; k++) {
        const char *sc = rand_schemas[k] ? rand_schemas[k] : DROID;
        sdn_grammar *g = schema(sc);
        for (int i = 0; i < 40; i++) {
            random_doc(g, doc, sizeof doc);
            fprintf(f, "{\"schema\": %s, \"doc\": ", sc);
            json_escape(f, doc);
            fprintf(f, "}\n");
            total++;
        }
        sdn_grammar_free(g);
    }
    fclose(f);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s'", tu_source_path("tests/constrained/validate_random.py"), pbuf);
    int rc = system(cmd);
    int code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    if (code == 77) {
        const char *ci = getenv("CI");
        if (ci && !strcmp(ci, "true")) fail_msg("python3 jsonschema missing under CI=true");
        print_message("python3 jsonschema missing: the validation is skipped (apt-get install python3-jsonschema)\n");
        skip();
    }
    if (code != 0) fail_msg("validate_random.py failed (exit %d); documents in %s", code, pbuf);
    print_message("%d random documents validated by jsonschema\n", total);
}

/* ---- (h) tokens ---- */

static sdn_tokenizer *smollm2_tok(void) {
    const char *path = tu_smollm2();
    if (!path) return NULL;
    sdn_gguf *gg = NULL;
    sdn_tokenizer *t = NULL;
    sdn_err e = {0};
    if (sdn_gguf_open(path, &gg, &e) || sdn_tokenizer_from_gguf(gg, &t, &e)) fail_msg("%s", e.msg);
    sdn_gguf_close(gg);
    return t;
}

static sdn_gvocab *vocab(const sdn_tokenizer *t) {
    sdn_gvocab *v;
    sdn_err e = {0};
    if (sdn_gvocab_new(t, &v, &e)) fail_msg("%s", e.msg);
    return v;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void check_mask_and_argmax(const sdn_gstate *s, const sdn_gvocab *v, int n_logit_trials, int *n_allowed) {
    int n = sdn_gvocab_n(v);
    float *lg = malloc(sizeof(float) * (size_t)n), *m = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) lg[i] = 0;
    memcpy(m, lg, sizeof(float) * (size_t)n);
    int cnt = sdn_gstate_mask(s, v, m), c2 = 0;
    for (int t = 0; t < n; t++) {
        int a = sdn_gstate_allows(s, v, t);
        c2 += a;
        if (a != (m[t] == 0)) fail_msg("token %d: allows %d, mask %s", t, a, m[t] == 0 ? "keeps it" : "masks it");
    }
    assert_int_equal(cnt, c2);
    *n_allowed = cnt;
    for (int trial = 0; trial < n_logit_trials; trial++) {
        int mode = trial % 3;
        for (int i = 0; i < n; i++) {
            float x = (float)(rnd() % 100000) / 1000.0f;
            if (mode == 1) x = (float)(rnd() % 4); /* many ties */
            lg[i] = x;
        }
        if (mode == 2 && cnt) { /* the model agrees: the best allowed token on top */
            memcpy(m, lg, sizeof(float) * (size_t)n);
            sdn_gstate_mask(s, v, m);
            lg[sdn_argmax(m, n)] = 1000;
        }
        memcpy(m, lg, sizeof(float) * (size_t)n);
        sdn_gstate_mask(s, v, m);
        int32_t want = cnt ? sdn_argmax(m, n) : -1;
        int32_t got = sdn_gstate_argmax(s, v, lg);
        if (got != want) fail_msg("argmax %d, mask + sdn_argmax %d (trial %d)", got, want, trial);
    }
    free(lg);
    free(m);
}

static void test_tokens_smollm2(void **st) {
    (void)st;
    sdn_tokenizer *t = smollm2_tok();
    if (!t) {
        print_message("SmolLM2-135M-Instruct is not in the model cache: test skipped\n");
        skip();
    }
    double tv0 = now_ms();
    sdn_gvocab *v = vocab(t);
    double tv = now_ms() - tv0;
    int n = sdn_gvocab_n(v);
    assert_int_equal(n, sdn_tokenizer_n_vocab(t));
    print_message("sdn_gvocab_new: %.1f ms for %d tokens\n", tv, n);
    sdn_grammar *g = schema(DROID);
    /* the reference answer as the model's tokenizer writes it: tokens spanning symbols */
    const char *ans = "{\"id\": 10, \"action\": \"tap\", \"input_text\": \"N/A\"}";
    int32_t *ids;
    int nid;
    sdn_err e = {0};
    if (sdn_tokenize(t, ans, strlen(ans), 0, 0, &ids, &nid, &e)) fail_msg("%s", e.msg);
    sdn_gstate *s = state(g);
    int spanning = 0;
    int32_t eog = -1, ctl = -1;
    for (int i = 0; i < n; i++) {
        if (sdn_tokenizer_is_eog(t, i) && eog < 0) eog = i;
        else if (!sdn_tokenizer_is_eog(t, i) && sdn_tokenizer_token_type(t, i) == SDN_TOKEN_CONTROL && ctl < 0) ctl = i;
    }
    assert_true(eog >= 0 && ctl >= 0);
    for (int i = 0; i < nid; i++) {
        char b[64];
        size_t l = sdn_tokenizer_token_bytes(t, ids[i], b, sizeof b);
        if (l >= 2 && (memchr(b, '"', l) && (memchr(b, ':', l) || memchr(b, ',', l) || memchr(b, '{', l)))) spanning++;
        assert_int_equal(sdn_gstate_allows(s, v, eog), 0);
        assert_int_equal(sdn_gstate_allows(s, v, ctl), 0);
        if (sdn_gstate_allows(s, v, ids[i]) != 1) fail_msg("token %d ('%.*s') of the answer refused", i, (int)l, b);
        assert_int_equal(sdn_gstate_accept_token(s, v, ids[i]), 1);
    }
    assert_true(spanning >= 2);
    assert_int_equal(sdn_gstate_can_end(s), 1);
    assert_int_equal(sdn_gstate_allows(s, v, ctl), 0);
    assert_int_equal(sdn_gstate_allows(s, v, eog), 1);
    assert_int_equal(sdn_gstate_accept_token(s, v, eog), 1);
    assert_int_equal(sdn_gstate_ended(s), 1);
    for (int i = 0; i < n; i += 97) assert_int_equal(sdn_gstate_allows(s, v, i), 0);
    float *lg = calloc((size_t)n, sizeof(float));
    assert_int_equal(sdn_gstate_argmax(s, v, lg), -1);
    assert_int_equal(sdn_gstate_mask(s, v, lg), 0);
    free(lg);
    sdn_gstate_free(s);
    free(ids);
    print_message("the DroidTask answer is %d SmolLM2 tokens, %d of them spanning several grammar symbols\n", nid, spanning);

    /* a token ending inside a character: its first bytes are allowed where the character is */
    int32_t mid = -1;
    char mb[64];
    size_t ml = 0;
    for (int i = 0; i < n && mid < 0; i++) {
        ml = sdn_tokenizer_token_bytes(t, i, mb, sizeof mb);
        if (ml == 2 && (unsigned char)mb[0] == 0xE2 && (unsigned char)mb[1] == 0x80) mid = i; /* first 2 bytes of U+2000-U+203F */
    }
    assert_true(mid >= 0);
    sdn_grammar *u = gbnf("root ::= \"\\u2026\"+ | \"x\"");
    s = state(u);
    assert_int_equal(sdn_gstate_allows(s, v, mid), 1);
    assert_int_equal(sdn_gstate_accept_token(s, v, mid), 1);
    assert_int_equal(sdn_gstate_can_end(s), 0);
    int nfin = 0;
    for (int i = 0; i < n; i++)
        if (sdn_gstate_allows(s, v, i)) {
            char b[64];
            size_t l = sdn_tokenizer_token_bytes(t, i, b, sizeof b);
            assert_true(l >= 1 && (unsigned char)b[0] == 0xA6);
            nfin++;
        }
    assert_true(nfin >= 1);
    int allowed;
    check_mask_and_argmax(s, v, 30, &allowed);
    sdn_gstate_free(s);
    sdn_grammar_free(u);

    /* mask = allows on the whole vocabulary, argmax = mask + sdn_argmax, at several states */
    const char *prefixes[] = {"", "{\"id\": ", "{\"id\": 1", "{\"id\": 10, \"action\": \"", "{\"id\": 10, \"action\": \"t",
                              "{\"id\": 10, \"action\": \"tap\", \"input_text\": \"", "{\"id\": 10, \"action\": \"tap\", \"input_text\": \"caf\xC3",
                              "{\"id\": 10, \"action\": \"tap\", \"input_text\": \"x\""};
    for (size_t p = 0; p < sizeof prefixes / sizeof *prefixes; p++) {
        s = state(g);
        assert_int_equal(sdn_gstate_accept_bytes(s, prefixes[p], strlen(prefixes[p])), 1);
        check_mask_and_argmax(s, v, 60, &allowed);
        sdn_gstate_free(s);
    }

    /* costs */
    float *l1 = malloc(sizeof(float) * (size_t)n), *l2 = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) l1[i] = (float)(rnd() % 100000) / 1000.0f;
    {
        sdn_gstate *a = state(g), *b = state(g);
        const char *pre = "{\"id\": 10, \"action\": \"t";
        sdn_gstate_accept_bytes(a, pre, strlen(pre));
        double t0 = now_ms();
        for (int r = 0; r < 10000; r++) sdn_gstate_copy(b, a);
        double tc = (now_ms() - t0) / 10000 * 1e3;
        int32_t tok = sdn_tokenizer_find(t, "ap", 2);
        assert_true(tok >= 0 && sdn_gstate_allows(a, v, tok));
        t0 = now_ms();
        for (int r = 0; r < 10000; r++) (void)sdn_gstate_allows(a, v, tok);
        double tt = (now_ms() - t0) / 10000 * 1e3;
        sdn_gstate_free(a);
        a = state(g);
        const char *pre2 = "{\"id\": 10,";
        sdn_gstate_accept_bytes(a, pre2, strlen(pre2));
        char fb[64];
        size_t fl = 0;
        t0 = now_ms();
        for (int r = 0; r < 1000; r++) fl = sdn_gstate_forced(a, fb, sizeof fb);
        double tf = (now_ms() - t0) / 1000 * 1e3;
        print_message("sdn_gstate_copy %.3f us, sdn_gstate_allows of a 2-byte token %.3f us (after '%s'), sdn_gstate_forced %.1f us "
                      "(%zu bytes after '%s')\n", tc, tt, pre, tf, fl, pre2);
        sdn_gstate_free(a);
        sdn_gstate_free(b);
    }
    print_message("costs on the SmolLM2 vocabulary (%d tokens), DroidTask schema, best of 20:\n", n);
    for (size_t p = 0; p < sizeof prefixes / sizeof *prefixes; p++) {
        s = state(g);
        sdn_gstate_accept_bytes(s, prefixes[p], strlen(prefixes[p]));
        double tm = 1e9, ta = 1e9, tb = 1e9, tx = 1e9;
        int cnt = 0;
        for (int r = 0; r < 20; r++) {
            memcpy(l2, l1, sizeof(float) * (size_t)n);
            double a = now_ms();
            cnt = sdn_gstate_mask(s, v, l2);
            double d = now_ms() - a;
            if (d < tm) tm = d;
        }
        int32_t best = sdn_argmax(l2, n);
        memcpy(l2, l1, sizeof(float) * (size_t)n);
        l2[best] = 1000; /* the model agrees with the grammar */
        for (int r = 0; r < 20; r++) {
            double a = now_ms();
            volatile int32_t x = sdn_gstate_argmax(s, v, l2);
            (void)x;
            double d = now_ms() - a;
            if (d < ta) ta = d;
            a = now_ms();
            x = sdn_gstate_argmax(s, v, l1);
            d = now_ms() - a;
            if (d < tb) tb = d;
            a = now_ms();
            x = sdn_argmax(l2, n);
            d = now_ms() - a;
            if (d < tx) tx = d;
        }
        print_message("  after '%s': %d allowed, mask %.3f ms, argmax %.3f ms when the model agrees (sdn_argmax alone %.3f ms), "
                      "%.3f ms on random logits\n", prefixes[p], cnt, tm, ta, tx, tb);
        sdn_gstate_free(s);
    }
    free(l1);
    free(l2);
    sdn_grammar_free(g);
    sdn_gvocab_free(v);
    sdn_tokenizer_free(t);
}

/* SentencePiece with byte fallback (Llama 2's 32000 tokens): <0x0A> is the byte 0x0A,
 * U+2581 is a space. */
static void test_tokens_sentencepiece(void **st) {
    (void)st;
    TU_REQUIRE_SHARED();
    sdn_tokenizer *t;
    sdn_err e = {0};
    if (sdn_tokenizer_from_llama2c(tu_shared_path("models/llama2-tokenizer/tokenizer.bin"), 32000, &t, &e)) fail_msg("%s", e.msg);
    sdn_gvocab *v = vocab(t);
    int32_t nl = sdn_tokenizer_find(t, "<0x0A>", 6), e9 = sdn_tokenizer_find(t, "<0xC3>", 6);
    int32_t sp_a = sdn_tokenizer_find(t, "\xE2\x96\x81" "a", 4), eos = sdn_tokenizer_eos(t), bos = sdn_tokenizer_bos(t);
    assert_true(nl >= 0 && e9 >= 0 && sp_a >= 0 && eos >= 0 && bos >= 0);
    sdn_grammar *g = gbnf("root ::= \"x a\\n\" [\\u00e9]");
    sdn_gstate *s = state(g);
    int32_t x = sdn_tokenizer_find(t, "x", 1);
    assert_true(x >= 0);
    assert_int_equal(sdn_gstate_allows(s, v, bos), 0);
    assert_int_equal(sdn_gstate_allows(s, v, eos), 0);
    assert_int_equal(sdn_gstate_accept_token(s, v, x), 1);
    assert_int_equal(sdn_gstate_allows(s, v, nl), 0);
    assert_int_equal(sdn_gstate_accept_token(s, v, sp_a), 1);
    assert_int_equal(sdn_gstate_accept_token(s, v, nl), 1);
    assert_int_equal(sdn_gstate_allows(s, v, eos), 0);
    assert_int_equal(sdn_gstate_accept_token(s, v, e9), 1); /* half of é */
    assert_int_equal(sdn_gstate_can_end(s), 0);
    int32_t a9 = sdn_tokenizer_find(t, "<0xA9>", 6);
    assert_int_equal(sdn_gstate_allows(s, v, sdn_tokenizer_find(t, "<0xA8>", 6)), 0);
    int allowed;
    check_mask_and_argmax(s, v, 30, &allowed);
    assert_int_equal(allowed, 1);
    assert_int_equal(sdn_gstate_accept_token(s, v, a9), 1);
    assert_int_equal(sdn_gstate_allows(s, v, eos), 1);
    check_mask_and_argmax(s, v, 10, &allowed);
    sdn_gstate_free(s);
    sdn_grammar_free(g);
    /* the leading space SentencePiece's decoder drops: "▁{" matches "{" while skipping */
    g = schema(DROID);
    s = state(g);
    int32_t sp_brace = sdn_tokenizer_find(t, "\xE2\x96\x81{", 4), sp = sdn_tokenizer_find(t, "\xE2\x96\x81", 3);
    int32_t sp_byte = sdn_tokenizer_find(t, "<0x20>", 6), brace = sdn_tokenizer_find(t, "{", 1);
    assert_true(sp_brace >= 0 && sp >= 0 && sp_byte >= 0 && brace >= 0);
    assert_int_equal(sdn_gstate_allows(s, v, sp_brace), 0);
    sdn_gstate_set_skip_leading_space(s, 1);
    assert_int_equal(sdn_gstate_allows(s, v, sp_brace), 1);
    assert_int_equal(sdn_gstate_allows(s, v, brace), 1);
    assert_int_equal(sdn_gstate_allows(s, v, sp), 1);
    assert_int_equal(sdn_gstate_allows(s, v, sp_byte), 0);
    check_mask_and_argmax(s, v, 30, &allowed);
    sdn_gstate *s2 = state(g);
    assert_int_equal(sdn_gstate_copy(s2, s), 0);
    assert_int_equal(sdn_gstate_accept_token(s2, v, sp), 1); /* the first text piece: nothing left */
    assert_int_equal(sdn_gstate_allows(s2, v, sp_brace), 0);   /* the next one keeps its space */
    assert_int_equal(sdn_gstate_accept_token(s, v, sp_brace), 1);
    char fb[16];
    size_t fl = sdn_gstate_forced(s, fb, sizeof fb - 1);
    fb[fl] = 0;
    assert_string_equal(fb, "\"id\": ");
    sdn_gstate_free(s2);
    sdn_gstate_free(s);
    s = state(g);
    check_mask_and_argmax(s, v, 30, &allowed);
    const char *pre = "{\"id\": 3, \"action\": \"tap\", \"input_text\": \"";
    assert_int_equal(sdn_gstate_accept_bytes(s, pre, strlen(pre)), 1);
    check_mask_and_argmax(s, v, 30, &allowed);
    sdn_gstate_free(s);
    sdn_grammar_free(g);
    sdn_gvocab_free(v);
    sdn_tokenizer_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_bytes_copies),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_forced),
        cmocka_unit_test(test_schema_errors),
        cmocka_unit_test(test_schema_semantics),
        cmocka_unit_test(test_droidtask_references),
        cmocka_unit_test(test_random_documents),
        cmocka_unit_test(test_tokens_smollm2),
        cmocka_unit_test(test_tokens_sentencepiece),
    };
    if (getenv("SDN_TEST_FILTER")) cmocka_set_test_filter(getenv("SDN_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
