/* test_sdnpu_drafting.c - hand-built cases of sdnpu's drafting techniques:
 *  - calibration: context "... Clinton 's security detail has arrived at Des Moines ..."
 *    with the model predicting "arrived" after "Clinton": after the output "... Clinton"
 *    the draft is "arrived at" (chain caps) instead of the context's "'s security" when the
 *    context continuation is weighed (sdnpu.weigh = 1), the context's phrasing by default;
 *  - reuse: missing tokens, a synonym replacing a span, a redundant draft token, and a
 *    fully wrong draft keep exactly the expected tokens and are proposed as expected;
 *  - the paper's reuse lifetime (reuse.rule = 1) against the default age rule, and
 *    sdnpu.weigh = 1 (the context continuation weighed by the model's predictions; default 0);
 *  - the budget-filling builder: best-first selection by path probability, caps, merging;
 *  - the calibrated trees against a brute-force construction from the definition;
 *  - continue_after (the guess past text not committed, such as a grammar's forced text)
 *    against a brute-force search of the longest suffix and its earliest occurrence. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/sdn_util.h"
#include "draft/calibration.h"
#include "draft/methods.h"
#include "draft/reuse.h"
#include "draft/sdnpu_drafter.h"
#include "draft/tree_builder.h"

/* ---- a tiny word vocabulary ---- */
static const char *words[] = {"<s>", "Hillary", "Clinton", "'s", "security", "detail", "has", "arrived", "at", "Des", "Moines",
                              "on", "Tuesday", ".", "The", "van", "was", "second", "big", "large", "dog", "ran", "home", "A",
                              "B", "C", "D", "E", "F", "X", "G", "H"};
#define NW (int)(sizeof words / sizeof words[0])
static int32_t W(const char *w) {
    for (int i = 0; i < NW; i++)
        if (!strcmp(words[i], w)) return i;
    fail_msg("unknown word %s", w);
    return -1;
}
static int to_ids(const char *text, int32_t *out) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", text);
    int n = 0;
    for (char *t = strtok(buf, " "); t; t = strtok(NULL, " ")) out[n++] = W(t);
    return n;
}

static void test_calibration_clinton(void **state) {
    int32_t ctx[64];
    int n = to_ids("<s> Hillary Clinton 's security detail has arrived at Des Moines on Tuesday . The van was second .", ctx);
    /* predictions: the model agrees with the context (0.9), except after "Clinton", where it
     * prefers "arrived" (0.6) over the context's "'s" (0.3) */
    enum { K = 2 };
    int32_t pt[64 * K];
    float pp[64 * K];
    for (int p = 0; p + 1 < n; p++) {
        pt[p * K] = ctx[p + 1];
        pp[p * K] = 0.9f;
        pt[p * K + 1] = W(".");
        pp[p * K + 1] = 0.05f;
    }
    pt[2 * K] = W("arrived");
    pp[2 * K] = 0.6f;
    pt[2 * K + 1] = W("'s");
    pp[2 * K + 1] = 0.3f;
    sdn_prefill_preds preds = {n - 1, K, pt, pp};

    /* the calibrated tree at "Clinton": arrived (located at its context occurrence) -> at -> Des ... */
    sdn_calib_config cc;
    sdn_calib_defaults(&cc);
    sdn_calib *cal;
    sdn_err e = {0};
    assert_int_equal(sdn_calib_build(&cc, ctx, n, &preds, &cal, &e), SDN_OK);
    int nn;
    const sdn_calib_node *nd = sdn_calib_tree(cal, 2, &nn);
    assert_true(nn >= 3);
    assert_int_equal(nd[0].token, W("arrived"));
    assert_int_equal(nd[0].parent, -1);
    assert_int_equal(nd[1].token, W("at"));
    assert_int_equal(nd[1].parent, 0);
    assert_true(fabsf(nd[1].path - 0.6f * 0.9f) < 1e-6f);
    assert_int_equal(nd[2].token, W("Des"));
    assert_true(fabsf(sdn_calib_prob(cal, 2, W("arrived")) - 0.6f) < 1e-6f);
    assert_true(sdn_calib_prob(cal, 2, W("van")) <= 0.1f + 1e-6f); /* upper bound for unlisted tokens */
    sdn_calib_free(cal);

    /* sam+cal after the output "<s> ... . Hillary Clinton". Variant 1 is sam+cal as it is by
     * default, the paper's drafter (sdnpu.weigh = 0): the context's continuation keeps its
     * fixed estimates q(2) = 0.5 and 0.7, above the calibrated "arrived" at 0.6 * q(2) = 0.3,
     * so the context's phrasing wins. Variant 2 is sam+cal with sdnpu.weigh = 1 (the context
     * continuation weighed by the model's predictions): the chain draft is "arrived at". */
    for (int variant = 0; variant < 3; variant++) {
        int cal_on = variant == 2;
        sdn_method_config mc;
        sdn_method_defaults(&mc);
        if (variant == 2) assert_int_equal(sdn_method_set_param(&mc, "sdnpu.weigh=1", &e), SDN_OK);
        sdn_drafter d;
        assert_int_equal(sdn_method_create(variant ? "sam+cal" : "sam+tree", &mc, &d, &e), SDN_OK);
        assert_int_equal(sdn_drafter_begin(&d, ctx, n, &preds, &e), SDN_OK);
        int32_t out[2] = {W("Hillary"), W("Clinton")};
        sdn_draft_feedback fb = {.accepted = out, .n_accepted = 2};
        assert_int_equal(sdn_drafter_feedback(&d, &fb, &e), SDN_OK);
        sdn_tree t;
        sdn_tree_init(&t, 16, NULL);
        sdn_draft_caps caps = {.max_nodes = 2, .max_depth = 2, .max_branch = 1};
        assert_int_equal(sdn_drafter_propose(&d, &t, &caps, &e), SDN_OK);
        assert_int_equal(t.n, 2);
        if (cal_on) {
            assert_int_equal(t.token[0], W("arrived"));
            assert_int_equal(t.token[1], W("at"));
        } else { /* without calibration, or without weighing: the context's own phrasing */
            assert_int_equal(t.token[0], W("'s"));
            assert_int_equal(t.token[1], W("security"));
        }
        sdn_tree_free(&t);
        sdn_drafter_destroy(&d);
    }
}

/* A verified chain draft `draft` after which the model accepted `n_acc` tokens and produced
 * `bonus`; argmax[i] is the model's prediction after draft token i. */
typedef struct vcase {
    sdn_tree t;
    int32_t accepted[16];
    int32_t argmax[16];
    sdn_draft_feedback fb;
} vcase;

static void make_case(vcase *v, const char *draft, int n_acc, const char *bonus, const char *argmax) {
    int32_t d[16], a[16];
    int n = to_ids(draft, d), na = to_ids(argmax, a);
    assert_int_equal(n, na);
    sdn_tree_init(&v->t, 16, NULL);
    sdn_tree_add_chain(&v->t, -1, d, n, 1.0f, 16);
    for (int i = 0; i < n_acc; i++) v->accepted[i] = d[i];
    v->accepted[n_acc] = W(bonus);
    memcpy(v->argmax, a, sizeof a);
    v->fb = (sdn_draft_feedback){v->accepted, n_acc + 1, &v->t, v->argmax, -1, NULL, 0};
}

static void expect_kept(vcase *v, const char *want) {
    int32_t got[32], exp[32];
    int n = sdn_reuse_extract(&v->fb, got, 32), ne = want ? to_ids(want, exp) : 0;
    if (n != ne || memcmp(got, exp, sizeof(int32_t) * (size_t)n)) {
        char buf[256] = "";
        for (int i = 0; i < n; i++) { strcat(buf, words[got[i]]); strcat(buf, " "); }
        fail_msg("kept [%s], expected [%s]", buf, want ? want : "");
    }
}

static int has_chain(const sdn_reuse_chain *c, int n, const char *want) {
    int32_t exp[32];
    int ne = to_ids(want, exp);
    for (int i = 0; i < n; i++)
        if (c[i].n == ne && !memcmp(c[i].tok, exp, sizeof(int32_t) * (size_t)ne)) return 1;
    return 0;
}

static void test_reuse_cases(void **state) {
    sdn_reuse r;
    sdn_reuse_chain ch[8];
    /* missing token: draft "A B D E F", the model says "A B C D E F" */
    vcase v;
    make_case(&v, "A B D E F", 2, "C", "B C E F G");
    expect_kept(&v, "D E F G");
    sdn_reuse_init(&r, NULL);
    sdn_reuse_feedback(&r, &v.fb);
    int n = sdn_reuse_propose(&r, W("C"), ch, 8);
    assert_true(has_chain(ch, n, "D E F G"));
    sdn_tree_free(&v.t);

    /* synonym: draft "the big dog ran home", the model says "large" instead of "big" */
    make_case(&v, "big dog ran home", 0, "large", "dog ran home .");
    expect_kept(&v, "big dog ran home .");
    sdn_reuse_init(&r, NULL);
    sdn_reuse_feedback(&r, &v.fb);
    n = sdn_reuse_propose(&r, W("large"), ch, 8);
    assert_true(has_chain(ch, n, "dog ran home ."));
    /* the model accepts the synonym alternative: the segment advances and is used up */
    int32_t acc[5] = {W("dog"), W("ran"), W("home"), W("."), W("The")};
    sdn_tree t2;
    sdn_tree_init(&t2, 16, NULL);
    sdn_tree_add_chain(&t2, -1, acc, 4, 1.0f, 16);
    sdn_draft_feedback fb2 = {acc, 5, &t2, NULL, -1, NULL, 0};
    sdn_reuse_feedback(&r, &fb2);
    assert_int_equal(r.n_seg, 0);
    sdn_tree_free(&t2);
    sdn_tree_free(&v.t);

    /* redundant token: draft "A B X C D", the model says "A B C D" */
    make_case(&v, "A B X C D", 2, "C", "B C C D E");
    expect_kept(&v, "X C D E");
    sdn_reuse_init(&r, NULL);
    sdn_reuse_feedback(&r, &v.fb);
    n = sdn_reuse_propose(&r, W("C"), ch, 8);
    assert_int_equal(n, 1);
    assert_true(has_chain(ch, n, "D E"));
    sdn_tree_free(&v.t);

    /* fully wrong draft: no prediction confirms any draft token -> nothing kept */
    make_case(&v, "X G H", 0, "A", "B C D");
    expect_kept(&v, NULL);
    sdn_reuse_init(&r, NULL);
    sdn_reuse_feedback(&r, &v.fb);
    assert_int_equal(r.n_seg, 0);
    assert_int_equal(sdn_reuse_propose(&r, W("A"), ch, 8), 0);
    sdn_tree_free(&v.t);

    /* a segment that stops matching is dropped */
    make_case(&v, "A B D E F", 2, "C", "B C E F G");
    sdn_reuse_init(&r, NULL);
    sdn_reuse_feedback(&r, &v.fb);
    n = sdn_reuse_propose(&r, W("C"), ch, 8);
    assert_true(n > 0);
    int32_t wrong[1] = {W("H")};
    sdn_draft_feedback fb3 = {wrong, 1, NULL, NULL, -1, NULL, 0};
    sdn_reuse_feedback(&r, &fb3);
    assert_int_equal(r.n_seg, 0);
    sdn_tree_free(&v.t);
}

/* A chain tree of n tokens (A B C ...), no model predictions: feedback that verified a draft
 * of n tokens, accepted none and committed `tok` (extracts nothing). */
static sdn_draft_feedback step_of(sdn_tree *t, int n, int32_t *tok) {
    int32_t d[16];
    for (int i = 0; i < n; i++) d[i] = W("A") + (i % 8);
    sdn_tree_clear(t);
    sdn_tree_add_chain(t, -1, d, n, 1.0f, 16);
    return (sdn_draft_feedback){tok, 1, t, NULL, -1, NULL, 0};
}

/* The paper's reuse lifetime (reuse.rule = 1, section 3.4): a segment is kept while the
 * steps draft at most reuse.threshold tokens - through a rejected proposal and past max_age
 * steps, both of which end it under the default rule - and dropped after the first step
 * that drafts more. */
static void test_reuse_paper_rule(void **state) {
    (void)state;
    for (int paper = 0; paper < 2; paper++) {
        sdn_method_config mc;
        sdn_method_defaults(&mc);
        sdn_err e = {0};
        assert_int_equal(sdn_method_set_param(&mc, paper ? "reuse.rule=1" : "reuse.rule=0", &e), SDN_OK);
        assert_int_equal(sdn_method_set_param(&mc, "reuse.threshold=4", &e), SDN_OK);
        sdn_reuse r;
        sdn_reuse_chain ch[8];
        sdn_reuse_init(&r, &mc.sdnpu.reuse);
        /* a draft of 5 tokens (> 4) stores "D E F G": the step that stored it does not count */
        vcase v;
        make_case(&v, "A B D E F", 2, "C", "B C E F G");
        sdn_reuse_feedback(&r, &v.fb);
        assert_int_equal(r.n_seg, 1);
        /* proposed after "C" and rejected at its first token in a 2-token step */
        assert_true(sdn_reuse_propose(&r, W("C"), ch, 8) > 0);
        sdn_tree t;
        sdn_tree_init(&t, 16, NULL);
        int32_t wrong[1] = {W("H")};
        sdn_draft_feedback fb = step_of(&t, 2, wrong);
        sdn_reuse_feedback(&r, &fb);
        assert_int_equal(r.n_seg, paper ? 1 : 0); /* the age rule drops a segment that stopped matching */
        if (paper) {
            /* short steps (4 tokens = the threshold, not more) well past max_age (3): kept */
            for (int i = 0; i < 6; i++) {
                fb = step_of(&t, 4, wrong);
                sdn_reuse_feedback(&r, &fb);
                assert_int_equal(r.n_seg, 1);
            }
            assert_true(has_chain(ch, sdn_reuse_propose(&r, W("C"), ch, 8), "D E F G"));
            /* a step of 5 draft tokens drops it */
            fb = step_of(&t, 5, wrong);
            sdn_reuse_feedback(&r, &fb);
            assert_int_equal(r.n_seg, 0);
        } else {
            /* the age rule: a segment never proposed is dropped after max_age + 1 steps */
            sdn_reuse_init(&r, &mc.sdnpu.reuse);
            sdn_reuse_feedback(&r, &v.fb);
            for (int i = 0; i < 4; i++) {
                fb = step_of(&t, 1, wrong);
                sdn_reuse_feedback(&r, &fb);
            }
            assert_int_equal(r.n_seg, 0);
        }
        sdn_tree_free(&t);
        sdn_tree_free(&v.t);
    }
}

/* Builder vs brute force: random tries; the emitted set must be the top-N nodes by path
 * probability among those whose ancestors are all selected and that respect the caps. */
static void test_tree_builder(void **state) {
    sdn_tb *tb;
    sdn_err e = {0};
    assert_int_equal(sdn_tb_new(256, &tb, &e), SDN_OK);
    sdn_tree t;
    sdn_tree_init(&t, 64, NULL);
    /* merging: same token twice at the root combines as noisy-OR, or max */
    sdn_tb_add(tb, -1, 5, 0.5f, SDN_TB_OR);
    sdn_tb_add(tb, -1, 5, 0.5f, SDN_TB_OR);
    sdn_tb_add(tb, -1, 6, 0.6f, SDN_TB_MAX);
    sdn_tb_add(tb, -1, 6, 0.3f, SDN_TB_MAX);
    sdn_draft_caps caps = {.max_nodes = 8, .max_depth = 8, .max_branch = 8};
    sdn_tb_emit(tb, &t, &caps);
    assert_int_equal(t.n, 2);
    assert_int_equal(t.token[0], 5);
    assert_true(fabsf(t.score[0] - 0.75f) < 1e-6f);
    assert_int_equal(t.token[1], 6);
    assert_true(fabsf(t.score[1] - 0.6f) < 1e-6f);
    sdn_rng r;
    sdn_rng_seed(&r, 4);
    for (int trial = 0; trial < 300; trial++) {
        sdn_tb_reset(tb);
        /* the test's own copy of the trie: token, parent (test index), merged estimate */
        int32_t tk[128];
        int par[128], n = 0;
        float pr[128];
        for (int i = 0; i < 60; i++) {
            int parent = n == 0 || sdn_rng_below(&r, 4) == 0 ? -1 : (int)sdn_rng_below(&r, (uint64_t)n);
            int32_t tok = (int32_t)sdn_rng_below(&r, 6);
            float p = 0.05f + 0.9f * sdn_rng_float(&r);
            sdn_tb_add(tb, parent, tok, p, SDN_TB_MAX); /* the builder numbers nodes in creation order too */
            int j;
            for (j = 0; j < n && !(par[j] == parent && tk[j] == tok); j++) {}
            if (j == n) { tk[n] = tok; par[n] = parent; pr[n] = p; n++; }
            else if (p > pr[j]) pr[j] = p;
        }
        caps = (sdn_draft_caps){.max_nodes = 1 + (int)sdn_rng_below(&r, 30), .max_depth = 1 + (int)sdn_rng_below(&r, 6),
                                .max_branch = 1 + (int)sdn_rng_below(&r, 3)};
        sdn_tb_emit(tb, &t, &caps);
        assert_int_equal(sdn_tree_validate(&t, &e), SDN_OK);
        /* reference: repeatedly take the best candidate (path probability, then shallower,
         * then creation order) whose parent is taken, within depth and branch caps */
        int taken[128], out_of[128], kids[129], dep[128], m = 0;
        float path[128];
        memset(taken, 0, sizeof taken);
        memset(kids, 0, sizeof kids);
        for (int i = 0; i < n; i++) {
            dep[i] = par[i] < 0 ? 1 : dep[par[i]] + 1;
            path[i] = par[i] < 0 ? pr[i] : path[par[i]] * pr[i];
        }
        while (m < caps.max_nodes) {
            int best = -1;
            for (int i = 0; i < n; i++) {
                if (taken[i] || (par[i] >= 0 && !taken[par[i]]) || dep[i] > caps.max_depth || kids[par[i] + 1] >= caps.max_branch) continue;
                if (best < 0 || path[i] > path[best] || (path[i] == path[best] && dep[i] < dep[best])) best = i;
            }
            if (best < 0) break;
            taken[best] = 1;
            kids[par[best] + 1]++;
            out_of[best] = m;
            assert_true(m < t.n);
            assert_int_equal(t.token[m], tk[best]);
            assert_int_equal(t.parent[m], par[best] < 0 ? -1 : out_of[par[best]]);
            assert_true(fabsf(t.score[m] - path[best]) <= 1e-6f * path[best]);
            m++;
        }
        assert_int_equal(t.n, m);
    }
    sdn_tree_free(&t);
    sdn_tb_free(tb);
}

/* continue_after(path) by brute force: the longest suffix of ctx ++ committed ++ path that
 * occurs in the text the drafter's automaton holds (ctx ++ committed without its newest
 * token), then the tokens after that suffix's earliest occurrence, at most max; nothing when
 * that longest suffix is shorter than 3 tokens (the drafter's AFTER_MIN_MATCH). */
static int ref_continue(const int32_t *q, int nq, int nt, int32_t *out, int max) {
    for (int L = nq < nt ? nq : nt; L >= 1; L--) {
        const int32_t *suf = q + nq - L;
        for (int end = L - 1; end < nt; end++) /* earliest occurrence: the smallest end */
            if (!memcmp(q + end - L + 1, suf, sizeof(int32_t) * (size_t)L)) {
                if (L < 3) return 0;
                int n = 0;
                for (int i = end + 1; i < nt && n < max; i++) out[n++] = q[i];
                return n;
            }
    }
    return 0;
}

static void test_continue_after(void **state) {
    (void)state;
    sdn_rng r;
    sdn_rng_seed(&r, 17);
    int checked = 0, nonempty = 0;
    for (int trial = 0; trial < 400; trial++) {
        const int alpha = 2 + (int)sdn_rng_below(&r, 5);
        int32_t q[128];
        const int nctx = 1 + (int)sdn_rng_below(&r, 60), ncom = (int)sdn_rng_below(&r, 8), npath = 1 + (int)sdn_rng_below(&r, 6);
        for (int i = 0; i < nctx + ncom + npath; i++) q[i] = (int32_t)sdn_rng_below(&r, (uint64_t)alpha);
        sdn_method_config mc;
        sdn_method_defaults(&mc);
        sdn_drafter d;
        sdn_err e = {0};
        assert_int_equal(sdn_method_create("sdnpu", &mc, &d, &e), SDN_OK);
        assert_int_equal(sdn_drafter_begin(&d, q, nctx, NULL, &e), SDN_OK);
        if (ncom) {
            sdn_draft_feedback fb = {.accepted = q + nctx, .n_accepted = ncom};
            assert_int_equal(sdn_drafter_feedback(&d, &fb, &e), SDN_OK);
        }
        const int max = 1 + (int)sdn_rng_below(&r, 8);
        int32_t got[16], want[16];
        int ng = sdn_drafter_continue_after(&d, q + nctx + ncom, npath, got, max);
        int nw = ref_continue(q, nctx + ncom + npath, nctx + ncom - 1, want, max);
        assert_int_equal(ng, nw);
        assert_memory_equal(got, want, sizeof(int32_t) * (size_t)nw);
        /* asking changes nothing: the same question gives the same answer, and a proposal
           after it equals one from a drafter never asked */
        assert_int_equal(sdn_drafter_continue_after(&d, q + nctx + ncom, npath, got, max), nw);
        sdn_drafter d2;
        assert_int_equal(sdn_method_create("sdnpu", &mc, &d2, &e), SDN_OK);
        assert_int_equal(sdn_drafter_begin(&d2, q, nctx, NULL, &e), SDN_OK);
        if (ncom) {
            sdn_draft_feedback fb = {.accepted = q + nctx, .n_accepted = ncom};
            assert_int_equal(sdn_drafter_feedback(&d2, &fb, &e), SDN_OK);
        }
        sdn_tree t1, t2;
        sdn_tree_init(&t1, 16, NULL);
        sdn_tree_init(&t2, 16, NULL);
        sdn_draft_caps caps = {.max_nodes = 8, .max_depth = 8, .max_branch = 2};
        assert_int_equal(sdn_drafter_propose(&d, &t1, &caps, &e), SDN_OK);
        assert_int_equal(sdn_drafter_propose(&d2, &t2, &caps, &e), SDN_OK);
        assert_int_equal(t1.n, t2.n);
        assert_memory_equal(t1.token, t2.token, sizeof(int32_t) * (size_t)t1.n);
        assert_memory_equal(t1.parent, t2.parent, sizeof(int32_t) * (size_t)t1.n);
        sdn_tree_free(&t1);
        sdn_tree_free(&t2);
        sdn_drafter_destroy(&d);
        sdn_drafter_destroy(&d2);
        checked++;
        nonempty += nw > 0;
    }
    assert_int_equal(checked, 400);
    print_message("%d of 400 cases with a continuation\n", nonempty);
    assert_true(nonempty > 100); /* the cases exercise real continuations */
    /* methods without the operation offer none */
    sdn_method_config mc;
    sdn_method_defaults(&mc);
    sdn_drafter d;
    sdn_err e = {0};
    int32_t ctx[4] = {1, 2, 1, 2}, out[4];
    assert_int_equal(sdn_method_create("pld", &mc, &d, &e), SDN_OK);
    assert_int_equal(sdn_drafter_begin(&d, ctx, 4, NULL, &e), SDN_OK);
    assert_int_equal(sdn_drafter_continue_after(&d, ctx, 1, out, 4), 0);
    sdn_drafter_destroy(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_continue_after),
        cmocka_unit_test(test_calibration_clinton),
        cmocka_unit_test(test_reuse_cases),
        cmocka_unit_test(test_reuse_paper_rule),
        cmocka_unit_test(test_tree_builder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
