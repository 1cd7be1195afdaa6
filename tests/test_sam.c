/* test_sam.c - property tests of the suffix automaton against a brute-force reference.
 *
 * The reference knows nothing about automata: it scans every sequence for every
 * occurrence of a token string. For random token sequences (alphabets of 2, 3, 5, 50 and
 * 150,000 tokens, Zipf-distributed "text", lengths up to 100,000, one or several
 * sequences) it checks at every query step: the longest-match length of an incrementally
 * advanced match, the occurrence count, earliest and most recent end positions, the
 * continuations read from both, and the top-k next tokens with counts (ties by token).
 * Also: growth interleaved with queries (the drafter's "advance, then extend" order),
 * sequence boundaries, serialization round trips and corrupted bytes (truncated, bad
 * magic, flipped bytes, out-of-range ids and links, absurd counts), which must fail with
 * SDN_EFORMAT and a message, never crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <xxhash.h>

#include "common/sdn_util.h"
#include "suffix_automaton/sam.h"

/* ---- reference ------------------------------------------------------------------------- */

typedef struct ref {
    int n_seq;
    const int32_t **seq;
    const int *len;
    int *start; /* global start position of each sequence */
    int total;
} ref;

typedef struct ref_occ {
    int count, first_end, last_end; /* -1 when none */
    /* next-token histogram */
    int n_next;
    int32_t *next_tok;
    int *next_cnt;
} ref_occ;

static void ref_init(ref *r, int n_seq, const int32_t **seq, const int *len) {
    r->n_seq = n_seq, r->seq = seq, r->len = len;
    r->start = malloc(sizeof(int) * (n_seq + 1));
    r->total = 0;
    for (int i = 0; i < n_seq; i++) r->start[i] = r->total, r->total += len[i];
}
static void ref_free(ref *r) { free(r->start); }

/* Occurrences of w[0..l) (l >= 1). With `hist`, also the next-token histogram. */
static void ref_find(const ref *r, const int32_t *w, int l, ref_occ *o, int hist) {
    o->count = 0, o->first_end = -1, o->last_end = -1, o->n_next = 0;
    for (int s = 0; s < r->n_seq; s++) {
        const int32_t *x = r->seq[s];
        for (int i = 0; i + l <= r->len[s]; i++) {
            if (x[i] != w[0] || memcmp(x + i, w, sizeof(int32_t) * l) != 0) continue;
            int end = r->start[s] + i + l - 1;
            o->count++;
            if (o->first_end < 0) o->first_end = end;
            o->last_end = end;
            if (hist && i + l < r->len[s]) {
                int32_t t = x[i + l];
                int k = 0;
                while (k < o->n_next && o->next_tok[k] != t) k++;
                if (k == o->n_next) {
                    o->next_tok[k] = t, o->next_cnt[k] = 0;
                    o->n_next++;
                }
                o->next_cnt[k]++;
            }
        }
    }
}

static int ref_occurs(const ref *r, const int32_t *w, int l) {
    if (l == 0) return 1;
    for (int s = 0; s < r->n_seq; s++) {
        const int32_t *x = r->seq[s];
        for (int i = 0; i + l <= r->len[s]; i++)
            if (x[i] == w[0] && memcmp(x + i, w, sizeof(int32_t) * l) == 0) return 1;
    }
    return 0;
}

static int32_t ref_token_at(const ref *r, int pos, int *seq_end) {
    int s = 0;
    while (s + 1 < r->n_seq && r->start[s + 1] <= pos) s++;
    *seq_end = r->start[s] + r->len[s];
    return r->seq[s][pos - r->start[s]];
}

/* Sort histogram by count desc, token asc. */
static void ref_sort_next(ref_occ *o) {
    for (int i = 1; i < o->n_next; i++)
        for (int j = i; j > 0; j--) {
            int a = j - 1, b = j;
            if (o->next_cnt[a] > o->next_cnt[b] || (o->next_cnt[a] == o->next_cnt[b] && o->next_tok[a] < o->next_tok[b]))
                break;
            int32_t t = o->next_tok[a];
            o->next_tok[a] = o->next_tok[b], o->next_tok[b] = t;
            int c = o->next_cnt[a];
            o->next_cnt[a] = o->next_cnt[b], o->next_cnt[b] = c;
        }
}

/* ---- helpers ----------------------------------------------------------------------------- */

#define CHECK(cond, ...)                                                                                         \
    do {                                                                                                         \
        if (!(cond)) {                                                                                           \
            print_error("%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);                               \
            print_error(__VA_ARGS__);                                                                            \
            print_error("\n");                                                                                   \
            fail();                                                                                              \
        }                                                                                                        \
    } while (0)

static sdn_sam *build(int n_seq, const int32_t **seq, const int *len) {
    sdn_sam *s;
    sdn_err e = {0};
    assert_int_equal(sdn_sam_create(&s, &e), SDN_OK);
    for (int i = 0; i < n_seq; i++) assert_int_equal(sdn_sam_add_seq(s, 100 + i, seq[i], len[i], &e), SDN_OK);
    return s;
}

static int32_t *random_tokens(sdn_rng *rng, int n, int V) {
    int32_t *x = malloc(sizeof(int32_t) * (n ? n : 1));
    for (int i = 0; i < n; i++) x[i] = (int32_t)sdn_rng_below(rng, V);
    return x;
}

/* Zipf-like "text": token rank r with probability ~ 1/r over V tokens, plus copied
 * phrases (repeats) as in real documents. */
static int32_t *text_tokens(sdn_rng *rng, int n, int V) {
    int32_t *x = malloc(sizeof(int32_t) * (n ? n : 1));
    double H = 0;
    for (int r = 1; r <= V; r++) H += 1.0 / r;
    for (int i = 0; i < n;) {
        if (i > 100 && sdn_rng_below(rng, 3) == 0) {
            int L = 3 + (int)sdn_rng_below(rng, 30), src = (int)sdn_rng_below(rng, i - 40);
            for (int j = 0; j < L && i < n; j++) x[i++] = x[src + j];
        } else {
            double u = sdn_rng_double(rng) * H, acc = 0;
            int r = 1;
            /* inverse CDF by a short walk plus a tail jump: fine for tests */
            while (r < V && acc + 1.0 / r < u) {
                acc += 1.0 / r, r++;
                if (r > 2000) { r = 2000 + (int)sdn_rng_below(rng, V - 2000 > 0 ? V - 2000 : 1); break; }
            }
            x[i++] = (int32_t)(r - 1);
        }
    }
    return x;
}

/* Query tokens: mostly copied windows of the indexed sequences with mutations, so that
 * long matches occur, plus random tokens. */
static int32_t *make_query(sdn_rng *rng, const ref *r, int qlen, int V) {
    int32_t *q = malloc(sizeof(int32_t) * (qlen ? qlen : 1));
    for (int i = 0; i < qlen;) {
        int mode = (int)sdn_rng_below(rng, 4);
        if (mode > 0 && r->total > 0) {
            int s = (int)sdn_rng_below(rng, r->n_seq);
            if (!r->len[s]) continue;
            int a = (int)sdn_rng_below(rng, r->len[s]), L = 1 + (int)sdn_rng_below(rng, 25);
            for (int j = 0; j < L && a + j < r->len[s] && i < qlen; j++) q[i++] = r->seq[s][a + j];
        } else {
            q[i++] = (int32_t)sdn_rng_below(rng, V);
        }
    }
    return q;
}

/* Check every query step against the reference. `full` also checks next tokens and
 * counts (costlier). Returns the sum of match lengths (to show matches were nontrivial). */
static long check_query(sdn_sam *s, const ref *r, const int32_t *q, int qlen, int full, int32_t *hist_tok, int *hist_cnt) {
    sdn_sam_match m = sdn_sam_match_root();
    int l = 0;
    long sum = 0;
    ref_occ o = {.next_tok = hist_tok, .next_cnt = hist_cnt};
    for (int j = 0; j < qlen; j++) {
        /* reference longest match: l_j <= l_{j-1} + 1, search downwards */
        int want = l + 1 > j + 1 ? j + 1 : l + 1;
        while (want > 0 && !ref_occurs(r, q + j + 1 - want, want)) want--;
        uint32_t got = sdn_sam_match_advance(s, &m, q[j]);
        CHECK((int)got == want && (int)m.len == want, "step %d: match length %u, reference %d", j, got, want);
        l = want;
        sum += l;
        if (!l) continue;
        const int32_t *w = q + j + 1 - l;
        ref_find(r, w, l, &o, full);
        sdn_sam_occ so;
        sdn_sam_occurrences(s, &m, &so);
        CHECK((int)so.count == o.count && (int)so.first_end == o.first_end && (int)so.last_end == o.last_end,
              "step %d len %d: count/first/last %u/%u/%u, reference %d/%d/%d", j, l, so.count, so.first_end,
              so.last_end, o.count, o.first_end, o.last_end);
        CHECK(sdn_sam_first_end(s, &m) == so.first_end, "step %d: first_end differs", j);
        /* continuations from both ends */
        for (int which = 0; which < 2; which++) {
            int32_t cont[16];
            int n = sdn_sam_continuation(s, &m, which, cont, 12);
            int e = which == SDN_SAM_EARLIEST ? o.first_end : o.last_end, seq_end, k = 0;
            ref_token_at(r, e, &seq_end);
            for (int p = e + 1; p < seq_end && k < 12; p++, k++) {
                int dummy;
                CHECK(k < n && cont[k] == ref_token_at(r, p, &dummy), "step %d: continuation %d token %d", j, which, k);
            }
            CHECK(n == k, "step %d: continuation %d has %d tokens, reference %d", j, which, n, k);
        }
        if (!full) continue;
        ref_sort_next(&o);
        sdn_sam_next nx[8];
        uint64_t total;
        uint32_t nd;
        int kk = (int)(j % 8) + 1;
        int got_n = sdn_sam_next_tokens(s, &m, kk, nx, &total, &nd);
        long ref_total = 0;
        for (int i = 0; i < o.n_next; i++) ref_total += o.next_cnt[i];
        CHECK((int)nd == o.n_next && (long)total == ref_total, "step %d: %u distinct next tokens (total %llu), reference %d (%ld)",
              j, nd, (unsigned long long)total, o.n_next, ref_total);
        CHECK(got_n == (o.n_next < kk ? o.n_next : kk), "step %d: top-%d returned %d", j, kk, got_n);
        for (int i = 0; i < got_n; i++) {
            CHECK(nx[i].token == o.next_tok[i] && (int)nx[i].count == o.next_cnt[i],
                  "step %d: next #%d is %d x%u, reference %d x%d", j, i, nx[i].token, nx[i].count, o.next_tok[i],
                  o.next_cnt[i]);
            /* the child match is the match extended by that token */
            CHECK(nx[i].child.len == m.len + 1, "step %d: child length", j);
            sdn_sam_occ co;
            sdn_sam_occurrences(s, &nx[i].child, &co);
            CHECK((int)co.count == o.next_cnt[i], "step %d: child count %u vs %d", j, co.count, o.next_cnt[i]);
            sdn_sam_match cm;
            CHECK(sdn_sam_match_child(s, &m, nx[i].token, &cm) && cm.state == nx[i].child.state, "step %d: match_child", j);
        }
    }
    return sum;
}

/* ---- tests --------------------------------------------------------------------------------- */

static void test_small_exhaustive(void **st) {
    (void)st;
    sdn_rng rng;
    sdn_rng_seed(&rng, 11);
    int32_t hist_tok[64];
    int hist_cnt[64];
    static const int alphabets[] = {1, 2, 3, 5, 50};
    long matched = 0;
    for (int trial = 0; trial < 3000; trial++) {
        int V = alphabets[trial % 5];
        int n_seq = 1 + (int)sdn_rng_below(&rng, 4);
        const int32_t *seq[4];
        int len[4];
        for (int i = 0; i < n_seq; i++) {
            len[i] = (int)sdn_rng_below(&rng, 60);
            seq[i] = random_tokens(&rng, len[i], V);
        }
        ref r;
        ref_init(&r, n_seq, seq, len);
        sdn_sam *s = build(n_seq, seq, len);
        CHECK(sdn_sam_n_tokens(s) == (size_t)r.total, "tokens");
        CHECK(sdn_sam_n_states(s) <= (size_t)(2 * r.total + 1), "state bound");
        int qlen = 1 + (int)sdn_rng_below(&rng, 40);
        int32_t *q = make_query(&rng, &r, qlen, V + 1);
        matched += check_query(s, &r, q, qlen, 1, hist_tok, hist_cnt);
        /* empty match: counts and unigram next tokens */
        sdn_sam_match root = sdn_sam_match_root();
        sdn_sam_occ so;
        sdn_sam_occurrences(s, &root, &so);
        CHECK((int)so.count == r.total && so.first_end == SDN_SAM_NONE, "root occurrences");
        sdn_sam_next nx[64];
        uint32_t nd;
        uint64_t tot;
        int got = sdn_sam_next_tokens(s, &root, 64, nx, &tot, &nd);
        CHECK((long)tot == r.total && got == (int)nd, "root next: total %llu", (unsigned long long)tot);
        for (int i = 0; i < got; i++) {
            int c = 0;
            for (int a = 0; a < n_seq; a++)
                for (int b = 0; b < len[a]; b++) c += seq[a][b] == nx[i].token;
            CHECK(c == (int)nx[i].count, "unigram count of %d", nx[i].token);
        }
        free(q);
        sdn_sam_free(s);
        ref_free(&r);
        for (int i = 0; i < n_seq; i++) free((void *)seq[i]);
    }
    CHECK(matched > 1000, "queries matched too little (%ld)", matched);
}

/* Many distinct tokens: the root's transitions become dense and move from a hash table to
 * an array indexed by token. Unigram counts, queries and serialization must not change. */
static void test_dense_root(void **st) {
    (void)st;
    sdn_rng rng;
    sdn_rng_seed(&rng, 71);
    int32_t *hist_tok = malloc(sizeof(int32_t) * 4000);
    int *hist_cnt = malloc(sizeof(int) * 4000);
    const int32_t *seq[3];
    int len[3] = {6000, 3000, 5000};
    for (int i = 0; i < 3; i++) seq[i] = random_tokens(&rng, len[i], 3000 + 500 * i);
    ref r;
    ref_init(&r, 3, seq, len);
    sdn_sam *s = build(3, seq, len);
    int32_t *q = make_query(&rng, &r, 300, 4000);
    check_query(s, &r, q, 300, 1, hist_tok, hist_cnt);
    /* root: every distinct token with its count */
    static int count[4000];
    memset(count, 0, sizeof count);
    int distinct = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < len[i]; j++) distinct += count[seq[i][j]]++ == 0;
    sdn_sam_match root = sdn_sam_match_root();
    sdn_sam_next *nx = malloc(sizeof *nx * 4000);
    uint32_t nd;
    uint64_t tot;
    int got = sdn_sam_next_tokens(s, &root, 4000, nx, &tot, &nd);
    CHECK(got == distinct && (int)nd == distinct && tot == 14000, "root: %d distinct, reference %d", got, distinct);
    for (int i = 0; i < got; i++) CHECK((int)nx[i].count == count[nx[i].token], "unigram %d", nx[i].token);
    uint8_t *b1, *b2;
    size_t n1, n2;
    sdn_sam *t;
    assert_int_equal(sdn_sam_serialize(s, &b1, &n1, NULL), SDN_OK);
    assert_int_equal(sdn_sam_deserialize(b1, n1, &t, NULL), SDN_OK);
    assert_int_equal(sdn_sam_serialize(t, &b2, &n2, NULL), SDN_OK);
    assert_int_equal(n1, n2);
    assert_memory_equal(b1, b2, n1);
    check_query(t, &r, q, 300, 1, hist_tok, hist_cnt);
    free(b1), free(b2), free(q), free(nx), free(hist_tok), free(hist_cnt);
    sdn_sam_free(s), sdn_sam_free(t);
    ref_free(&r);
    for (int i = 0; i < 3; i++) free((void *)seq[i]);
}

/* Large sequences: 100,000 tokens for several alphabets, a limited number of brute-force
 * query steps (each is a scan of the whole sequence). */
static void run_large(int V, int text, int n, int n_seq, int qlen, uint64_t seed) {
    sdn_rng rng;
    sdn_rng_seed(&rng, seed);
    const int32_t *seq[4];
    int len[4];
    for (int i = 0; i < n_seq; i++) {
        len[i] = n / n_seq;
        seq[i] = text ? text_tokens(&rng, len[i], V) : random_tokens(&rng, len[i], V);
    }
    ref r;
    ref_init(&r, n_seq, seq, len);
    sdn_sam *s = build(n_seq, seq, len);
    int32_t *hist_tok = malloc(sizeof(int32_t) * (V < 100000 ? V + 1 : 100001));
    int *hist_cnt = malloc(sizeof(int) * (V < 100000 ? V + 1 : 100001));
    int32_t *q = make_query(&rng, &r, qlen, V);
    long matched = check_query(s, &r, q, qlen, 1, hist_tok, hist_cnt);
    CHECK(matched > qlen, "V=%d: matches too short (%ld over %d steps)", V, matched, qlen);
    free(q), free(hist_tok), free(hist_cnt);
    sdn_sam_free(s);
    ref_free(&r);
    for (int i = 0; i < n_seq; i++) free((void *)seq[i]);
}

static void test_large_alphabet2(void **st) { (void)st; run_large(2, 0, 100000, 1, 600, 21); }
static void test_large_alphabet150k(void **st) { (void)st; run_large(150000, 0, 100000, 1, 800, 22); }
static void test_large_text(void **st) { (void)st; run_large(32000, 1, 100000, 1, 800, 23); }
static void test_large_multi(void **st) { (void)st; run_large(50, 0, 100000, 4, 600, 24); }

/* Growth interleaved with matching, as the drafter does it: before appending token t the
 * match is advanced by t, so it is the longest suffix of the sequence so far that also
 * occurs ending before the newest position. Counts are queried between extensions so
 * that lazy statistics are exercised while clones are being created. */
static void test_dynamic_growth(void **st) {
    (void)st;
    sdn_rng rng;
    sdn_rng_seed(&rng, 31);
    for (int trial = 0; trial < 60; trial++) {
        int V = trial % 2 ? 3 : 40, n = 400 + (int)sdn_rng_below(&rng, 600);
        int32_t *x = trial % 4 == 3 ? text_tokens(&rng, n, V) : random_tokens(&rng, n, V);
        if (trial % 5 == 0)
            for (int i = 0; i < n; i++) x[i] = i % 37 < 30 ? 7 : x[i]; /* long runs */
        sdn_sam *s;
        assert_int_equal(sdn_sam_create(&s, NULL), SDN_OK);
        sdn_sam_match m = sdn_sam_match_root();
        for (int i = 0; i < n; i++) {
            sdn_sam_match_advance(s, &m, x[i]);
            /* reference: longest l with x[i-l+1..i] occurring inside x[0..i-1] */
            int want = m.len;
            const int32_t *pre[1] = {x};
            int plen[1] = {i};
            ref r;
            ref_init(&r, 1, pre, plen);
            int best = 0;
            for (int l = 1; l <= i; l++) {
                if (!ref_occurs(&r, x + i + 1 - l, l)) break;
                best = l;
            }
            CHECK(want == best, "trial %d pos %d: match %d, reference %d", trial, i, want, best);
            assert_int_equal(sdn_sam_extend(s, x[i], NULL), SDN_OK);
            if (i % 7 == 0 && m.len) {
                /* after extension the automaton holds x[0..i]; the match string also ends at i */
                const int32_t *all[1] = {x};
                int alen[1] = {i + 1};
                ref r2;
                ref_init(&r2, 1, all, alen);
                ref_occ o;
                ref_find(&r2, x + i + 1 - m.len, m.len, &o, 0);
                sdn_sam_occ so;
                sdn_sam_occurrences(s, &m, &so);
                CHECK((int)so.count == o.count && (int)so.first_end == o.first_end && (int)so.last_end == i,
                      "trial %d pos %d: occ %u/%u/%u vs %d/%d/%d", trial, i, so.count, so.first_end, so.last_end, o.count,
                      o.first_end, i);
                CHECK(so.first_end < (uint32_t)i, "earliest occurrence must be earlier");
                ref_free(&r2);
            }
            ref_free(&r);
        }
        sdn_sam_free(s);
        free(x);
    }
}

static void test_boundaries_and_tags(void **st) {
    (void)st;
    sdn_sam *s;
    sdn_err e = {0};
    assert_int_equal(sdn_sam_create(&s, &e), SDN_OK);
    const int32_t a[] = {1, 2, 3}, b[] = {4, 5, 6}, c[] = {3, 4};
    uint32_t idx;
    assert_int_equal(sdn_sam_begin_seq(s, 77, &idx, &e), SDN_OK);
    assert_int_equal(idx, 0);
    assert_int_equal(sdn_sam_extend_n(s, a, 3, &e), SDN_OK);
    assert_int_equal(sdn_sam_add_seq(s, 88, b, 3, &e), SDN_OK);
    /* "3 4" spans the boundary of a and b: must not match as 2 tokens */
    sdn_sam_match m = sdn_sam_match_root();
    sdn_sam_match_advance(s, &m, c[0]);
    assert_int_equal(sdn_sam_match_advance(s, &m, c[1]), 1);
    /* continuation never runs into the next sequence */
    m = sdn_sam_match_root();
    sdn_sam_match_advance(s, &m, 2);
    int32_t out[8];
    assert_int_equal(sdn_sam_continuation(s, &m, SDN_SAM_EARLIEST, out, 8), 1);
    assert_int_equal(out[0], 3);
    uint32_t start, len, tag;
    assert_int_equal(sdn_sam_seq_info(s, 1, &start, &len, &tag), SDN_OK);
    assert_int_equal(start, 3), assert_int_equal(len, 3), assert_int_equal(tag, 88);
    assert_int_equal(sdn_sam_seq_of(s, 2), 0), assert_int_equal(sdn_sam_seq_of(s, 3), 1);
    assert_int_equal(sdn_sam_seq_of(s, 6), SDN_SAM_NONE);
    assert_int_equal(sdn_sam_seq_info(s, 2, NULL, NULL, NULL), SDN_EINVAL);
    /* bad tokens */
    assert_int_equal(sdn_sam_extend(s, -3, &e), SDN_EINVAL);
    assert_true(strstr(e.msg, "-3") != NULL);
    sdn_err_clear(&e);
    assert_int_equal(sdn_sam_extend(s, INT32_MAX, &e), SDN_EINVAL);
    /* a negative query token resets the match */
    m = sdn_sam_match_root();
    sdn_sam_match_advance(s, &m, 4);
    assert_int_equal(sdn_sam_match_advance(s, &m, -1), 0);
    /* parent: "4 5" -> shorter suffix */
    m = sdn_sam_match_root();
    sdn_sam_match_advance(s, &m, 4);
    sdn_sam_match_advance(s, &m, 5);
    assert_int_equal(m.len, 2);
    assert_int_equal(sdn_sam_match_parent(s, &m), 1);
    assert_true(m.len < 2);
    /* a match from another automaton state id is sanitized, not trusted */
    sdn_sam_match bogus = {123456, 9};
    assert_int_equal(sdn_sam_match_advance(s, &bogus, 4), 1);
    sdn_sam_free(s);
}

/* The same sequence added twice, and a sequence that is a prefix of another (the
 * generalized construction's "existing transition" paths). */
static void test_repeated_sequences(void **st) {
    (void)st;
    sdn_rng rng;
    sdn_rng_seed(&rng, 41);
    int32_t hist_tok[64];
    int hist_cnt[64];
    for (int trial = 0; trial < 200; trial++) {
        int V = 2 + trial % 3, L = 1 + (int)sdn_rng_below(&rng, 30);
        int32_t *x = random_tokens(&rng, L, V);
        int cut = (int)sdn_rng_below(&rng, L + 1);
        const int32_t *seq[4] = {x, x, x + cut, x};
        int len[4] = {L, L, L - cut, cut};
        ref r;
        ref_init(&r, 4, seq, len);
        sdn_sam *s = build(4, seq, len);
        int32_t *q = make_query(&rng, &r, 30, V + 1);
        check_query(s, &r, q, 30, 1, hist_tok, hist_cnt);
        free(q);
        sdn_sam_free(s);
        ref_free(&r);
        free(x);
    }
}

/* ---- serialization ---------------------------------------------------------------------- */

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}
static uint32_t get32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

/* Recompute both checksums (layout documented in docs/drafting.md), so that structural
 * checks behind them are reached. */
static void fix_checksums(uint8_t *b, size_t n) {
    uint64_t h = XXH64(b + 64, n - 64, 0);
    put32(b + 48, (uint32_t)h), put32(b + 52, (uint32_t)(h >> 32));
    h = XXH64(b, 56, 0);
    put32(b + 56, (uint32_t)h), put32(b + 60, (uint32_t)(h >> 32));
}

static void expect_format_error(const uint8_t *b, size_t n, const char *what, const char *needle) {
    sdn_sam *s = (sdn_sam *)0x1;
    sdn_err e = {0};
    int rc = sdn_sam_deserialize(b, n, &s, &e);
    CHECK(rc == SDN_EFORMAT, "%s: expected SDN_EFORMAT, got %d (%s)", what, rc, e.msg);
    CHECK(s == NULL, "%s: output not cleared", what);
    CHECK(e.code == SDN_EFORMAT && strlen(e.msg) > 20, "%s: message '%s'", what, e.msg);
    CHECK(!needle || strstr(e.msg, needle), "%s: message '%s' lacks '%s'", what, e.msg, needle);
}

static void test_serialize_roundtrip(void **st) {
    (void)st;
    sdn_rng rng;
    sdn_rng_seed(&rng, 51);
    int32_t hist_tok[512];
    int hist_cnt[512];
    for (int trial = 0; trial < 30; trial++) {
        int V = trial % 3 == 0 ? 2 : trial % 3 == 1 ? 20 : 500, n_seq = 1 + trial % 4;
        const int32_t *seq[4];
        int len[4];
        for (int i = 0; i < n_seq; i++) {
            len[i] = (int)sdn_rng_below(&rng, 3000);
            seq[i] = trial % 2 ? text_tokens(&rng, len[i], V) : random_tokens(&rng, len[i], V);
        }
        ref r;
        ref_init(&r, n_seq, seq, len);
        sdn_sam *s = build(n_seq, seq, len);
        uint8_t *b1, *b2;
        size_t n1, n2;
        sdn_err e = {0};
        assert_int_equal(sdn_sam_serialize(s, &b1, &n1, &e), SDN_OK);
        sdn_sam *t;
        assert_int_equal(sdn_sam_deserialize(b1, n1, &t, &e), SDN_OK);
        assert_int_equal(sdn_sam_n_states(t), sdn_sam_n_states(s));
        assert_int_equal(sdn_sam_n_transitions(t), sdn_sam_n_transitions(s));
        /* canonical: re-serializing gives the same bytes */
        assert_int_equal(sdn_sam_serialize(t, &b2, &n2, &e), SDN_OK);
        assert_int_equal(n1, n2);
        assert_memory_equal(b1, b2, n1);
        free(b1), free(b2);
        /* the loaded automaton answers like the reference */
        int32_t *q = make_query(&rng, &r, 60, V);
        check_query(t, &r, q, 60, 1, hist_tok, hist_cnt);
        free(q);
        /* it can be extended: same result as extending the original */
        int32_t *more = random_tokens(&rng, 200, V);
        assert_int_equal(sdn_sam_extend_n(s, more, 100, &e), SDN_OK);
        assert_int_equal(sdn_sam_extend_n(t, more, 100, &e), SDN_OK);
        assert_int_equal(sdn_sam_add_seq(s, 9, more + 100, 100, &e), SDN_OK);
        assert_int_equal(sdn_sam_add_seq(t, 9, more + 100, 100, &e), SDN_OK);
        uint8_t *c1, *c2;
        size_t m1, m2;
        assert_int_equal(sdn_sam_serialize(s, &c1, &m1, &e), SDN_OK);
        assert_int_equal(sdn_sam_serialize(t, &c2, &m2, &e), SDN_OK);
        assert_int_equal(m1, m2);
        assert_memory_equal(c1, c2, m1);
        free(c1), free(c2), free(more);
        /* shrink keeps the answers */
        assert_int_equal(sdn_sam_shrink(t, &e), SDN_OK);
        assert_int_equal(sdn_sam_serialize(t, &c2, &m2, &e), SDN_OK);
        assert_int_equal(sdn_sam_serialize(s, &c1, &m1, &e), SDN_OK);
        assert_memory_equal(c1, c2, m1);
        free(c1), free(c2);
        sdn_sam_free(s), sdn_sam_free(t);
        ref_free(&r);
        for (int i = 0; i < n_seq; i++) free((void *)seq[i]);
    }
}

static void test_serialize_empty(void **st) {
    (void)st;
    sdn_sam *s, *t;
    uint8_t *b;
    size_t n;
    assert_int_equal(sdn_sam_create(&s, NULL), SDN_OK);
    assert_int_equal(sdn_sam_serialize(s, &b, &n, NULL), SDN_OK);
    assert_int_equal(sdn_sam_deserialize(b, n, &t, NULL), SDN_OK);
    assert_int_equal(sdn_sam_n_tokens(t), 0);
    assert_int_equal(sdn_sam_extend(t, 5, NULL), SDN_OK);
    sdn_sam_match m = sdn_sam_match_root();
    assert_int_equal(sdn_sam_match_advance(t, &m, 5), 1);
    free(b);
    sdn_sam_free(s), sdn_sam_free(t);
}

/* A size limit on deserialization: an automaton of 100 tokens loads under a
 * limit of 100 and is refused under 99, with the counts in the message. */
static void test_deserialize_limit(void **st) {
    (void)st;
    sdn_sam *s, *t = NULL;
    uint8_t *b;
    size_t n;
    int32_t tok[100];
    for (int i = 0; i < 100; i++) tok[i] = (i * 7) % 13;
    assert_int_equal(sdn_sam_create(&s, NULL), SDN_OK);
    assert_int_equal(sdn_sam_add_seq(s, 1, tok, 100, NULL), SDN_OK);
    assert_int_equal(sdn_sam_serialize(s, &b, &n, NULL), SDN_OK);
    assert_int_equal(sdn_sam_deserialize_max(b, n, 100, &t, NULL), SDN_OK);
    sdn_sam_free(t);
    sdn_err e = {0};
    assert_int_equal(sdn_sam_deserialize_max(b, n, 99, &t, &e), SDN_EFORMAT);
    assert_null(t);
    assert_non_null(strstr(e.msg, "100 tokens exceed the limit 99"));
    free(b);
    sdn_sam_free(s);
}

/* Offsets in the documented format. */
#define H 64u
static uint32_t off_states(const uint8_t *b) { return H + 8 * get32(b + 16) + 4 * get32(b + 20); }
static uint32_t off_trans(const uint8_t *b) { return off_states(b) + 24 * get32(b + 24); }

static void test_serialize_corrupt(void **st) {
    (void)st;
    sdn_rng rng;
    sdn_rng_seed(&rng, 61);
    const int32_t *seq[2];
    int len[2] = {300, 200};
    seq[0] = text_tokens(&rng, 300, 12);
    seq[1] = random_tokens(&rng, 200, 12);
    sdn_sam *s = build(2, seq, len);
    uint8_t *b;
    size_t n;
    assert_int_equal(sdn_sam_serialize(s, &b, &n, NULL), SDN_OK);
    uint8_t *c = malloc(n);
    uint32_t S = get32(b + 24), os = off_states(b), ot = off_trans(b);

    /* truncated at every length */
    for (size_t k = 0; k < n; k += (k < 200 ? 1 : 37)) expect_format_error(b, k, "truncated", "truncated");
    /* trailing bytes */
    uint8_t *big = malloc(n + 3);
    memcpy(big, b, n);
    expect_format_error(big, n + 3, "trailing", "trailing");
    free(big);
    /* bad magic */
    memcpy(c, b, n), c[0] ^= 0x20;
    expect_format_error(c, n, "magic", "magic");
    /* flipped bytes anywhere: header or payload checksum catches them */
    for (int k = 0; k < 200; k++) {
        memcpy(c, b, n);
        size_t at = sdn_rng_below(&rng, n);
        c[at] ^= (uint8_t)(1 + sdn_rng_below(&rng, 255));
        expect_format_error(c, n, "flipped byte", "checksum");
    }
    /* from here on checksums are recomputed, so the structural checks must catch it */
#define CORRUPT(off, val, what, needle)                                                                          \
    do {                                                                                                         \
        memcpy(c, b, n);                                                                                         \
        put32(c + (off), (val));                                                                                 \
        fix_checksums(c, n);                                                                                     \
        expect_format_error(c, n, what, needle);                                                                 \
    } while (0)
    uint32_t v = S / 2; /* some non-root state */
    CORRUPT(os + 24 * v + 4, S + 5, "link out of range", "suffix link");
    CORRUPT(os + 24 * v + 4, v, "link to itself", "suffix link");
    CORRUPT(os + 24 * v + 4, 0xfffffffeu, "link huge", "suffix link");
    CORRUPT(os + 24 * v + 0, 0, "zero length", "length");
    CORRUPT(os + 24 * v + 0, 0x7fffffff, "absurd length", "length");
    CORRUPT(os + 24 * v + 8, 10000, "first end out of range", "end position");
    CORRUPT(os + 24 * v + 12, 0xffffffffu, "last end out of range", "end position");
    CORRUPT(os + 24 * v + 16, 0, "zero count", "count");
    CORRUPT(os + 24 * v + 16, 0xffffffffu, "absurd count", "count");
    {
        uint32_t w = 1;
        while (w < S && get32(b + os + 24 * w + 4) == 0) w++; /* a state whose link is not the root */
        assert_true(w < S);
        uint32_t parent = get32(b + os + 24 * w + 4), pc = get32(b + os + 24 * parent + 16);
        CORRUPT(os + 24 * w + 16, pc + 1, "count above parent", "count");
    }
    CORRUPT(os + 24 * v + 20, 0xffffffffu, "absurd degree", "transition");
    CORRUPT(os + 0 + 16, 7, "root count", "root");
    CORRUPT(os + 0 + 4, 3, "root link", "root");
    CORRUPT(ot + 4, S, "target out of range", "out of range");
    CORRUPT(ot + 4, 0, "target is root", "out of range");
    CORRUPT(ot + 0, 0x80000000u, "negative transition token", "token");
    CORRUPT(ot + 8, get32(b + ot), "duplicate transition token", "increasing");
    CORRUPT(24, 0, "zero states", "states");
    CORRUPT(24, 0x7ffffff0u, "absurd states", "states");
    CORRUPT(20, 0xfffffff0u, "absurd tokens", "tokens");
    CORRUPT(28, get32(b + 28) + 1, "transition total", NULL);
    CORRUPT(32, S + 1, "last state", "last state");
    CORRUPT(36, 2, "open flag", "flag");
    CORRUPT(40, 100000, "max length", "maximum length");
    CORRUPT(44, 1, "reserved", "reserved");
    CORRUPT(H + 8, 600, "sequence start beyond the tokens", "sequence");
    CORRUPT(H + 0, 5, "first sequence not at 0", "sequence");
    CORRUPT(H + 8 * 2 + 4 * 10, 0xffffffffu, "negative token", "token");
    /* a state whose occurrence would cross into the previous sequence */
    {
        uint32_t found = 0;
        for (uint32_t w = 1; w < S && !found; w++) {
            uint32_t fp = get32(b + os + 24 * w + 8), l = get32(b + os + 24 * w);
            if (fp >= 300 && fp - 300 + 1 == l) found = w; /* occurrence starts the 2nd sequence */
        }
        assert_true(found);
        CORRUPT(os + 24 * found + 0, get32(b + os + 24 * found) + 1, "crosses sequence start", NULL);
    }
    /* version */
    memcpy(c, b, n), put32(c + 8, 99), fix_checksums(c, n);
    {
        sdn_sam *t;
        sdn_err e = {0};
        assert_int_equal(sdn_sam_deserialize(c, n, &t, &e), SDN_EUNSUP);
        assert_non_null(strstr(e.msg, "version"));
    }
    /* random structural damage with valid checksums: never a crash (run under ASan),
     * either rejected or loaded; a loaded automaton must answer queries safely */
    for (int k = 0; k < 3000; k++) {
        memcpy(c, b, n);
        int flips = 1 + (int)sdn_rng_below(&rng, 3);
        for (int f = 0; f < flips; f++) {
            size_t at = H + sdn_rng_below(&rng, n - H);
            if (sdn_rng_below(&rng, 2)) c[at] ^= (uint8_t)(1u << sdn_rng_below(&rng, 8));
            else c[at] = (uint8_t)sdn_rng_below(&rng, 256);
        }
        fix_checksums(c, n);
        sdn_sam *t = NULL;
        sdn_err e = {0};
        int rc = sdn_sam_deserialize(c, n, &t, &e);
        CHECK(rc == SDN_OK || rc == SDN_EFORMAT, "fuzz: rc %d", rc);
        if (rc == SDN_OK) {
            sdn_sam_match m = sdn_sam_match_root();
            int32_t out[16];
            sdn_sam_next nx[4];
            sdn_sam_occ o;
            for (int j = 0; j < 50; j++) {
                sdn_sam_match_advance(t, &m, (int32_t)sdn_rng_below(&rng, 13));
                sdn_sam_occurrences(t, &m, &o);
                sdn_sam_continuation(t, &m, j & 1, out, 16);
                sdn_sam_next_tokens(t, &m, 4, nx, NULL, NULL);
            }
            sdn_sam_extend_n(t, seq[1], 50, NULL);
            sdn_sam_refresh(t);
            sdn_sam_free(t);
        } else {
            CHECK(t == NULL && e.msg[0], "fuzz: error without message");
        }
    }
    free(c), free(b);
    sdn_sam_free(s);
    free((void *)seq[0]), free((void *)seq[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_exhaustive),
        cmocka_unit_test(test_boundaries_and_tags),
        cmocka_unit_test(test_repeated_sequences),
        cmocka_unit_test(test_dynamic_growth),
        cmocka_unit_test(test_dense_root),
        cmocka_unit_test(test_large_alphabet2),
        cmocka_unit_test(test_large_alphabet150k),
        cmocka_unit_test(test_large_text),
        cmocka_unit_test(test_large_multi),
        cmocka_unit_test(test_serialize_empty), cmocka_unit_test(test_deserialize_limit),
        cmocka_unit_test(test_serialize_roundtrip),
        cmocka_unit_test(test_serialize_corrupt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
