/* test_sam_drafter.c - the SAM drafter against a brute-force transcription of its rules
 * (sam_drafter.h): match lengths by scanning the sequence and the history, the source
 * choice with bias and threshold, the chain from the earliest occurrence with shortening,
 * and the best-first top-k tree with scores from scanned occurrence counts. Simulated
 * decoding runs accept drafts against a "true" output built from copies of the context
 * and the history. Also: history from bytes equals history from sequences, corrupted
 * history bytes are refused, caps are honoured, bad configurations are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/sdn_util.h"
#include "draft/sam_drafter.h"
#include "suffix_automaton/sam.h"

/* ---- reference ----------------------------------------------------------------------- */

#define MAXH 8
typedef struct src {
    int n;
    const int32_t *seq[MAXH];
    int len[MAXH];
} src;

/* Occurrences of w[0..l): count, earliest end (sequence index and offset), and the
 * histogram of next tokens (tok/cnt, n_next). */
typedef struct occ {
    int count, fs, fo;
    int n_next;
    int32_t tok[4096];
    int cnt[4096];
} occ;

static void find(const src *s, const int32_t *w, int l, occ *o, int hist) {
    o->count = 0, o->fs = -1, o->fo = -1, o->n_next = 0;
    for (int q = 0; q < s->n; q++)
        for (int i = 0; i + l <= s->len[q]; i++) {
            if (memcmp(s->seq[q] + i, w, sizeof(int32_t) * l)) continue;
            if (!o->count) o->fs = q, o->fo = i + l - 1;
            o->count++;
            if (hist && i + l < s->len[q]) {
                int32_t t = s->seq[q][i + l];
                int k = 0;
                while (k < o->n_next && o->tok[k] != t) k++;
                if (k == o->n_next) o->tok[k] = t, o->cnt[k] = 0, o->n_next++;
                o->cnt[k]++;
            }
        }
    /* count desc, token asc */
    for (int i = 1; i < o->n_next; i++)
        for (int j = i; j > 0 && (o->cnt[j - 1] < o->cnt[j] || (o->cnt[j - 1] == o->cnt[j] && o->tok[j - 1] > o->tok[j])); j--) {
            int32_t t = o->tok[j];
            o->tok[j] = o->tok[j - 1], o->tok[j - 1] = t;
            int c = o->cnt[j];
            o->cnt[j] = o->cnt[j - 1], o->cnt[j - 1] = c;
        }
}

/* Longest suffix of x[0..L) occurring in s. */
static int longest(const src *s, const int32_t *x, int L) {
    static occ o;
    int best = 0;
    for (int l = 1; l <= L; l++) {
        find(s, x + L - l, l, &o, 0);
        if (!o.count) break;
        best = l;
    }
    return best;
}

typedef struct rtree {
    int n;
    int32_t tok[512];
    int parent[512];
    float score[512];
} rtree;

typedef struct rcand {
    double score;
    int seq, parent, depth;
    int32_t token;
} rcand;

static rcand cands[8192];

static void ref_propose(const sdn_sam_drafter_config *c, const int32_t *x, int L, const src *hist, const sdn_draft_caps *caps,
                        int tree_cap, rtree *out, sdn_sam_drafter_info *info) {
    static occ o;
    out->n = 0;
    memset(info, 0, sizeof *info);
    src dyn_before = {1, {x}, {L - 1}}, dyn = {1, {x}, {L}};
    int ld = L > 0 ? longest(&dyn_before, x, L) : 0, ls = hist->n ? longest(hist, x, L) : 0;
    info->dyn_len = ld, info->static_len = ls;
    int use_dyn = ld >= ls - c->len_bias, l = use_dyn ? ld : ls - c->len_bias;
    if (l < c->min_match || l <= 0) return;
    const src *s = use_dyn ? &dyn : hist;
    int mlen = use_dyn ? ld : ls, bias = use_dyn ? 0 : c->len_bias;
    if (mlen == 0) return;
    int max_depth = c->n_predicts, max_nodes = tree_cap, k = c->topk;
    if (caps->max_depth < max_depth) max_depth = caps->max_depth;
    if (caps->max_nodes < max_nodes) max_nodes = caps->max_nodes;
    if (caps->max_branch < k) k = caps->max_branch;
    if (max_depth <= 0 || max_nodes <= 0 || k <= 0) return;
    info->source = use_dyn ? 1 : 2;
    info->match_len = l;
    if (!c->tree) {
        int want = max_depth < max_nodes ? max_depth : max_nodes;
        find(s, x + L - mlen, mlen, &o, 0);
        int fs = o.fs, fo = o.fo, cnt = o.count;
        while (c->shorten && s->len[fs] - fo - 1 < want) {
            int l2 = mlen - 1;
            for (; l2 > 0; l2--) {
                find(s, x + L - l2, l2, &o, 0);
                if (o.count > cnt) break;
            }
            if (l2 < c->min_match + bias || l2 <= 0) break;
            mlen = l2, fs = o.fs, fo = o.fo, cnt = o.count;
        }
        int lb = mlen - bias;
        info->match_len = lb;
        float q = (float)lb / (float)(lb + 1), score = 1.0f;
        for (int j = 0; j < want && fo + 1 + j < s->len[fs]; j++) {
            score *= q;
            out->tok[out->n] = s->seq[fs][fo + 1 + j];
            out->parent[out->n] = out->n - 1;
            out->score[out->n] = score;
            out->n++;
        }
        return;
    }
    /* best-first tree: a node's string is the match followed by its path's tokens; each
     * added node (first the match itself, node -1) offers its top-k next tokens */
    static int alive[8192];
    int32_t *buf = malloc(sizeof(int32_t) * (size_t)(mlen + max_depth + 1));
    double nscore[512];
    int ndepth[512], nc = 0, seq = 0;
    for (int node = -1;;) {
        int depth = node < 0 ? 0 : ndepth[node];
        if (depth < max_depth) {
            memcpy(buf, x + L - mlen, sizeof(int32_t) * mlen);
            for (int v = node, d = depth; v >= 0; v = out->parent[v]) buf[mlen + --d] = out->tok[v];
            find(s, buf, mlen + depth, &o, 1);
            long total = 0;
            for (int i = 0; i < o.n_next; i++) total += o.cnt[i];
            double ps = node < 0 ? 1.0 : nscore[node];
            for (int i = 0; i < o.n_next && i < k; i++) {
                rcand *r = &cands[nc];
                r->score = ps * ((double)o.cnt[i] / (double)(total + 1));
                r->seq = seq++, r->parent = node, r->depth = depth + 1, r->token = o.tok[i];
                alive[nc++] = 1;
            }
        }
        if (out->n >= max_nodes) break;
        int b = -1;
        for (int i = 0; i < nc; i++)
            if (alive[i] && (b < 0 || cands[i].score > cands[b].score ||
                             (cands[i].score == cands[b].score && cands[i].seq < cands[b].seq)))
                b = i;
        if (b < 0) break;
        alive[b] = 0;
        int idx = out->n++;
        out->tok[idx] = cands[b].token, out->parent[idx] = cands[b].parent, out->score[idx] = (float)cands[b].score;
        nscore[idx] = cands[b].score, ndepth[idx] = cands[b].depth;
        node = idx;
    }
    free(buf);
}

/* ---- simulation ------------------------------------------------------------------------ */

typedef struct world {
    int32_t *x; /* context followed by the true output */
    int n_ctx, total;
    src hist;
    int32_t *hbuf[MAXH];
} world;

static void make_world(world *w, sdn_rng *rng, int V, int n_ctx, int n_out, int n_hist) {
    w->n_ctx = n_ctx, w->total = n_ctx + n_out;
    w->x = malloc(sizeof(int32_t) * w->total);
    for (int i = 0; i < n_ctx; i++) w->x[i] = (int32_t)sdn_rng_below(rng, V);
    w->hist.n = n_hist;
    for (int h = 0; h < n_hist; h++) {
        int len = 50 + (int)sdn_rng_below(rng, 300);
        w->hbuf[h] = malloc(sizeof(int32_t) * len);
        for (int i = 0; i < len; i++) w->hbuf[h][i] = (int32_t)sdn_rng_below(rng, V);
        w->hist.seq[h] = w->hbuf[h], w->hist.len[h] = len;
    }
    for (int i = n_ctx; i < w->total;) {
        int mode = (int)sdn_rng_below(rng, 4);
        const int32_t *from = w->x;
        int flen = i;
        if (mode == 1 && n_hist) {
            int h = (int)sdn_rng_below(rng, n_hist);
            from = w->hist.seq[h], flen = w->hist.len[h];
        }
        if (mode <= 1) {
            int a = (int)sdn_rng_below(rng, flen), L = 2 + (int)sdn_rng_below(rng, 20);
            for (int j = 0; j < L && i < w->total && a + j < flen; j++) w->x[i++] = from[a + j];
        } else {
            w->x[i++] = (int32_t)sdn_rng_below(rng, V);
        }
    }
}

static void free_world(world *w) {
    free(w->x);
    for (int h = 0; h < w->hist.n; h++) free(w->hbuf[h]);
}

static void compare(const sdn_tree *t, const rtree *r, int L) {
    if (t->n != r->n) fail_msg("L=%d: %d nodes, reference %d", L, t->n, r->n);
    for (int i = 0; i < t->n; i++)
        if (t->token[i] != r->tok[i] || t->parent[i] != r->parent[i] || t->score[i] != r->score[i])
            fail_msg("L=%d: node %d = (%d, parent %d, %.6g), reference (%d, parent %d, %.6g)", L, i, t->token[i],
                     t->parent[i], t->score[i], r->tok[i], r->parent[i], r->score[i]);
}

/* Run the drafter(s) over a world, comparing every proposal with the reference. */
static long simulate(const sdn_sam_drafter_config *c, world *w, sdn_drafter *d, sdn_drafter *d2, sdn_rng *rng,
                     int vary_caps, long *accepted_out) {
    sdn_tree t, t2;
    assert_int_equal(sdn_tree_init(&t, 40, NULL), SDN_OK);
    assert_int_equal(sdn_tree_init(&t2, 40, NULL), SDN_OK);
    static rtree r;
    sdn_err e = {0};
    assert_int_equal(sdn_drafter_begin(d, w->x, w->n_ctx, NULL, &e), SDN_OK);
    if (d2) assert_int_equal(sdn_drafter_begin(d2, w->x, w->n_ctx, NULL, &e), SDN_OK);
    int L = w->n_ctx;
    long drafted = 0, accepted = 0;
    while (L < w->total) {
        sdn_draft_caps caps = {40, 40, 40};
        if (vary_caps)
            caps = (sdn_draft_caps){(int)sdn_rng_below(rng, 30), 1 + (int)sdn_rng_below(rng, 12), 1 + (int)sdn_rng_below(rng, 5)};
        sdn_tree_clear(&t);
        assert_int_equal(sdn_drafter_propose(d, &t, &caps, &e), SDN_OK);
        assert_int_equal(sdn_tree_validate(&t, NULL), SDN_OK);
        sdn_sam_drafter_info info, rinfo;
        assert_int_equal(sdn_sam_drafter_info_get(d, &info), SDN_OK);
        ref_propose(c, w->x, L, &w->hist, &caps, t.cap, &r, &rinfo);
        if (info.dyn_len != rinfo.dyn_len || info.static_len != rinfo.static_len || info.source != rinfo.source ||
            info.match_len != rinfo.match_len)
            fail_msg("L=%d: info dyn %d static %d source %d len %d, reference %d %d %d %d", L, info.dyn_len,
                     info.static_len, info.source, info.match_len, rinfo.dyn_len, rinfo.static_len, rinfo.source,
                     rinfo.match_len);
        compare(&t, &r, L);
        /* caps */
        assert_true(t.n <= caps.max_nodes || caps.max_nodes < 0);
        for (int i = 0; i < t.n; i++) {
            assert_true(t.depth[i] <= caps.max_depth && t.depth[i] <= c->n_predicts);
            int kids = 0;
            for (int j = 0; j < t.n; j++) kids += t.parent[j] == t.parent[i];
            assert_true(kids <= caps.max_branch || !c->tree);
            if (t.parent[i] >= 0) assert_true(t.score[i] <= t.score[t.parent[i]]);
        }
        if (d2) {
            sdn_tree_clear(&t2);
            assert_int_equal(sdn_drafter_propose(d2, &t2, &caps, &e), SDN_OK);
            compare(&t2, &r, L);
        }
        drafted += t.n;
        /* verification: follow the true continuation down the tree, then a bonus token */
        int node = -1, a = 0;
        while (L + a < w->total) {
            int ch = sdn_tree_find_child(&t, node, w->x[L + a]);
            if (ch < 0) break;
            node = ch, a++;
        }
        int n_acc = a + 1;
        if (L + n_acc > w->total) n_acc = w->total - L;
        accepted += a;
        sdn_draft_feedback fb = {w->x + L, n_acc, &t, NULL, -1, NULL, 0};
        assert_int_equal(sdn_drafter_feedback(d, &fb, &e), SDN_OK);
        if (d2) assert_int_equal(sdn_drafter_feedback(d2, &fb, &e), SDN_OK);
        L += n_acc;
    }
    sdn_tree_free(&t), sdn_tree_free(&t2);
    if (accepted_out) *accepted_out = accepted;
    return drafted;
}

static void run_config(const sdn_sam_drafter_config *c, int n_runs, uint64_t seed, int with_hist, int vary_caps) {
    sdn_rng rng;
    sdn_rng_seed(&rng, seed);
    long drafted = 0, accepted = 0;
    for (int run = 0; run < n_runs; run++) {
        world w;
        make_world(&w, &rng, run % 2 ? 6 : 40, 100 + 150 * (run % 4), 250, with_hist ? 1 + run % 4 : 0);
        sdn_drafter d;
        sdn_err e = {0};
        assert_int_equal(sdn_sam_drafter_create(c, w.hist.seq, w.hist.len, w.hist.n, &d, &e), SDN_OK);
        assert_string_equal(d.ops->name, "sam");
        long acc;
        drafted += simulate(c, &w, &d, NULL, &rng, vary_caps, &acc);
        accepted += acc;
        sdn_drafter_destroy(&d);
        free_world(&w);
    }
    assert_true(drafted > 0);
    assert_true(accepted > 0);
}

static void test_chain_default(void **st) {
    (void)st;
    sdn_sam_drafter_config c;
    sdn_sam_drafter_defaults(&c);
    assert_int_equal(c.n_predicts, 10), assert_int_equal(c.min_match, 4), assert_int_equal(c.len_bias, 4);
    run_config(&c, 30, 1, 1, 0);
    run_config(&c, 20, 2, 1, 1);
}

static void test_chain_variants(void **st) {
    (void)st;
    sdn_sam_drafter_config c;
    sdn_sam_drafter_defaults(&c);
    c.shorten = 0, c.min_match = 2;
    run_config(&c, 8, 3, 1, 0);
    sdn_sam_drafter_defaults(&c);
    c.min_match = 1, c.len_bias = 0, c.n_predicts = 25;
    run_config(&c, 8, 4, 1, 1);
    sdn_sam_drafter_defaults(&c);
    c.len_bias = -2; /* favours the history */
    run_config(&c, 6, 5, 1, 0);
    c.len_bias = -6; /* so much that even an empty history match would be chosen */
    run_config(&c, 4, 10, 1, 0);
    sdn_sam_drafter_defaults(&c);
    run_config(&c, 6, 6, 0, 0); /* no history */
}

static void test_tree(void **st) {
    (void)st;
    sdn_sam_drafter_config c;
    sdn_sam_drafter_defaults(&c);
    c.tree = 1, c.min_match = 2;
    run_config(&c, 20, 7, 1, 0);
    run_config(&c, 20, 8, 1, 1);
    c.topk = 2, c.min_match = 1, c.len_bias = 0, c.n_predicts = 6;
    run_config(&c, 8, 9, 1, 1);
}

/* History given as sequences and as serialized bytes must draft identically. */
static void test_history_from_bytes(void **st) {
    (void)st;
    sdn_rng rng;
    sdn_rng_seed(&rng, 77);
    for (int mode = 0; mode < 2; mode++) {
        sdn_sam_drafter_config c;
        sdn_sam_drafter_defaults(&c);
        c.tree = mode, c.min_match = 2;
        world w;
        make_world(&w, &rng, 8, 200, 300, 4);
        sdn_sam *h;
        assert_int_equal(sdn_sam_create(&h, NULL), SDN_OK);
        for (int i = 0; i < w.hist.n; i++) assert_int_equal(sdn_sam_add_seq(h, (uint32_t)i, w.hist.seq[i], w.hist.len[i], NULL), SDN_OK);
        uint8_t *b;
        size_t n;
        assert_int_equal(sdn_sam_serialize(h, &b, &n, NULL), SDN_OK);
        sdn_drafter d1, d2;
        sdn_err e = {0};
        assert_int_equal(sdn_sam_drafter_create(&c, w.hist.seq, w.hist.len, w.hist.n, &d1, &e), SDN_OK);
        assert_int_equal(sdn_sam_drafter_create_from_bytes(&c, b, n, &d2, &e), SDN_OK);
        simulate(&c, &w, &d1, &d2, &rng, 1, NULL);
        sdn_drafter_destroy(&d1), sdn_drafter_destroy(&d2);
        /* corrupted bytes are refused with a format error */
        b[n / 2] ^= 0x40;
        sdn_err_clear(&e);
        assert_int_equal(sdn_sam_drafter_create_from_bytes(&c, b, n, &d2, &e), SDN_EFORMAT);
        assert_non_null(strstr(e.msg, "history automaton"));
        assert_null(d2.impl);
        assert_int_equal(sdn_sam_drafter_create_from_bytes(&c, b, 10, &d2, &e), SDN_EFORMAT);
        free(b);
        sdn_sam_free(h);
        free_world(&w);
    }
}

/* A long context: incremental matching over 20,000 tokens, brute force at a few steps. */
static void test_long_context(void **st) {
    (void)st;
    sdn_rng rng;
    sdn_rng_seed(&rng, 88);
    sdn_sam_drafter_config c;
    sdn_sam_drafter_defaults(&c);
    world w;
    make_world(&w, &rng, 30, 20000, 60, 2);
    sdn_drafter d;
    assert_int_equal(sdn_sam_drafter_create(&c, w.hist.seq, w.hist.len, w.hist.n, &d, NULL), SDN_OK);
    long acc;
    simulate(&c, &w, &d, NULL, &rng, 0, &acc);
    sdn_drafter_destroy(&d);
    free_world(&w);
}

static void test_errors(void **st) {
    (void)st;
    sdn_drafter d;
    sdn_err e = {0};
    sdn_sam_drafter_config c;
    sdn_sam_drafter_defaults(&c);
    c.min_match = 0;
    assert_int_equal(sdn_sam_drafter_create(&c, NULL, NULL, 0, &d, &e), SDN_EINVAL);
    assert_non_null(strstr(e.msg, "min_match"));
    sdn_sam_drafter_defaults(&c);
    c.topk = 0;
    sdn_err_clear(&e);
    assert_int_equal(sdn_sam_drafter_create(&c, NULL, NULL, 0, &d, &e), SDN_EINVAL);
    assert_non_null(strstr(e.msg, "topk"));
    sdn_sam_drafter_defaults(&c);
    c.n_predicts = 0;
    assert_int_equal(sdn_sam_drafter_create(&c, NULL, NULL, 0, &d, &e), SDN_EINVAL);
    const int32_t bad[] = {1, -5};
    const int32_t *hs[1] = {bad};
    int hl[1] = {2};
    sdn_err_clear(&e);
    assert_int_equal(sdn_sam_drafter_create(NULL, hs, hl, 1, &d, &e), SDN_EINVAL);
    assert_non_null(strstr(e.msg, "history sequence 0"));
    /* propose before begin */
    assert_int_equal(sdn_sam_drafter_create(NULL, NULL, NULL, 0, &d, &e), SDN_OK);
    sdn_tree t;
    assert_int_equal(sdn_tree_init(&t, 8, NULL), SDN_OK);
    sdn_draft_caps caps = {8, 8, 1};
    assert_int_equal(sdn_drafter_propose(&d, &t, &caps, &e), SDN_ESTATE);
    /* a negative context token is refused */
    const int32_t ctx[] = {3, 4, -1};
    assert_int_equal(sdn_drafter_begin(&d, ctx, 3, NULL, &e), SDN_EINVAL);
    sdn_sam_drafter_info info;
    assert_int_equal(sdn_sam_drafter_info_get(&d, &info), SDN_OK);
    sdn_drafter other = {0};
    assert_int_equal(sdn_sam_drafter_info_get(&other, &info), SDN_EINVAL);
    sdn_drafter_destroy(&d);
    sdn_tree_free(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_default),
        cmocka_unit_test(test_chain_variants),
        cmocka_unit_test(test_tree),
        cmocka_unit_test(test_history_from_bytes),
        cmocka_unit_test(test_long_context),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
