/* test_spec_sampling.c - lossless speculative sampling.
 *
 * 1. Unit level: a synthetic "model" is a Markov chain whose next-token logits depend on the
 *    previous token (table M). Verification steps over a fixed draft tree (two candidate
 *    siblings, each with a child) are repeated until two tokens are generated; the joint
 *    distribution of the first two tokens must match the exact P(t1) P(t2 | t1) of plain
 *    sampling (chi-square, 35 degrees of freedom, alpha = 0.001). Two deliberately broken
 *    acceptance rules (no renormalization after a rejected sibling; the bonus drawn from the
 *    unedited distribution) must be rejected by the same test.
 * 2. End to end: on a tiny make-model model, the first two tokens of sdn_generate with a
 *    fixed-tree drafter and with no drafter (many seeds each, top-k 3) must be homogeneous
 *    (two-sample chi-square, alpha = 0.001). */
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
#include "draft/drafter.h"
#include "draft/methods.h"
#include "draft/recycle.h"
#include "engine/forward.h"
#include "modelfile/model.h"
#include "runtime/decode.h"
#include "support/test_util.h"
#include "verify/verify.h"

#define V 6
static float M[V][V]; /* logits of the next token given the previous one */
static float L0[V];   /* logits at the root */

typedef int (*accept_fn)(const sdn_tree *t, const float *logits, int vocab, const sdn_sampling *s, sdn_rng *rng, sdn_dist *work,
                         sdn_accept *out, sdn_err *err);

/* Broken rule 1: a rejected sibling is not removed, so the next sibling is accepted with its
 * unconditional probability, and the bonus comes from the unedited distribution. */
static int broken_no_renorm(const sdn_tree *t, const float *logits, int vocab, const sdn_sampling *s, sdn_rng *rng, sdn_dist *work,
                            sdn_accept *out, sdn_err *err) {
    out->n_acc = 0;
    int cur = -1;
    for (;;) {
        sdn_dist_from_logits(s, logits + (size_t)(cur + 1) * vocab, vocab, work, err);
        int next = -1;
        for (int i = cur + 1; i < t->n && next < 0; i++)
            if (t->parent[i] == cur && sdn_rng_double(rng) < sdn_dist_prob(work, t->token[i])) next = i;
        if (next < 0) {
            out->tokens[out->n_acc] = sdn_dist_sample(work, sdn_rng_double(rng));
            return 0;
        }
        out->nodes[out->n_acc] = next;
        out->tokens[out->n_acc++] = t->token[next];
        cur = next;
    }
}

/* Broken rule 2: renormalizes between siblings but draws the bonus from the original
 * distribution (draft tokens become too likely). */
static int broken_bonus(const sdn_tree *t, const float *logits, int vocab, const sdn_sampling *s, sdn_rng *rng, sdn_dist *work,
                        sdn_accept *out, sdn_err *err) {
    out->n_acc = 0;
    int cur = -1;
    for (;;) {
        sdn_dist_from_logits(s, logits + (size_t)(cur + 1) * vocab, vocab, work, err);
        int next = -1;
        for (int i = cur + 1; i < t->n && next < 0; i++) {
            if (t->parent[i] != cur) continue;
            float p = sdn_dist_prob(work, t->token[i]);
            if (sdn_rng_double(rng) < p) next = i;
            else sdn_dist_remove(work, t->token[i]);
        }
        if (next < 0) {
            sdn_dist_from_logits(s, logits + (size_t)(cur + 1) * vocab, vocab, work, err);
            out->tokens[out->n_acc] = sdn_dist_sample(work, sdn_rng_double(rng));
            return 0;
        }
        out->nodes[out->n_acc] = next;
        out->tokens[out->n_acc++] = t->token[next];
        cur = next;
    }
}

static void softmax(const float *l, double *p) {
    double mx = -1e30, z = 0;
    for (int i = 0; i < V; i++) mx = fmax(mx, l[i]);
    for (int i = 0; i < V; i++) z += (p[i] = exp(l[i] - mx));
    for (int i = 0; i < V; i++) p[i] /= z;
}

/* chi-square of the first-two-token joint distribution over N samples from `acc` */
static double run_unit(accept_fn acc, int N, uint64_t seed) {
    sdn_tree t;
    sdn_tree_init(&t, 8, NULL);
    sdn_accept a;
    sdn_accept_init(&a, 8, NULL);
    sdn_dist d = {0};
    sdn_rng r;
    sdn_rng_seed(&r, seed);
    sdn_sampling s = {.temp = 1.0f, .top_p = 1.0f};
    float logits[5 * V];
    static int cnt[V][V];
    memset(cnt, 0, sizeof cnt);
    for (int it = 0; it < N; it++) {
        int32_t got[8];
        int ng = 0;
        const float *root = L0;
        while (ng < 2) {
            /* fixed tree: siblings 0 and 1 below the root, node 2 below 0, node 3 below 1 */
            sdn_tree_clear(&t);
            sdn_tree_add(&t, -1, 1, 1, NULL);
            sdn_tree_add(&t, -1, 2, 1, NULL);
            sdn_tree_add(&t, 0, 3, 1, NULL);
            sdn_tree_add(&t, 1, 1, 1, NULL);
            memcpy(logits, root, sizeof(float) * V);
            for (int i = 0; i < t.n; i++) memcpy(logits + (size_t)(i + 1) * V, M[t.token[i]], sizeof(float) * V);
            acc(&t, logits, V, &s, &r, &d, &a, NULL);
            for (int i = 0; i <= a.n_acc && ng < 8; i++) got[ng++] = a.tokens[i];
            root = M[got[ng - 1]];
        }
        cnt[got[0]][got[1]]++;
    }
    double p0[V], chi = 0;
    softmax(L0, p0);
    for (int i = 0; i < V; i++) {
        double p1[V];
        softmax(M[i], p1);
        for (int j = 0; j < V; j++) {
            double e = N * p0[i] * p1[j];
            chi += (cnt[i][j] - e) * (cnt[i][j] - e) / e;
        }
    }
    sdn_tree_free(&t);
    sdn_accept_free(&a);
    sdn_dist_free(&d);
    return chi;
}

static void test_unit_chi_square(void **state) {
    sdn_rng r;
    sdn_rng_seed(&r, 5);
    for (int i = 0; i < V; i++) {
        L0[i] = 1.2f * sdn_rng_normal(&r);
        for (int j = 0; j < V; j++) M[i][j] = 1.2f * sdn_rng_normal(&r);
    }
    const double crit = 66.62; /* chi-square, 35 dof, alpha 0.001 */
    double ok = run_unit(sdn_verify_sample, 60000, 1);
    double b1 = run_unit(broken_no_renorm, 60000, 2);
    double b2 = run_unit(broken_bonus, 60000, 3);
    print_message("chi-square (35 dof, critical %.2f): lossless %.1f, broken-no-renorm %.1f, broken-bonus %.1f\n", crit, ok, b1, b2);
    assert_true(ok < crit);
    assert_true(b1 > crit);
    assert_true(b2 > crit);
}

/* ---- end to end ---- */

typedef struct fixed_drafter {
    int32_t a, b, c;
} fixed_drafter;

static int fd_begin(sdn_drafter *d, const int32_t *ctx, int n, const sdn_prefill_preds *p, sdn_err *e) { return 0; }
static int fd_propose(sdn_drafter *d, sdn_tree *out, const sdn_draft_caps *caps, sdn_err *e) {
    fixed_drafter *f = d->impl;
    int x = sdn_tree_add(out, -1, f->a, 1, NULL);
    sdn_tree_add(out, -1, f->b, 1, NULL);
    if (x >= 0) sdn_tree_add(out, x, f->c, 1, NULL);
    return 0;
}
static int fd_feedback(sdn_drafter *d, const sdn_draft_feedback *fb, sdn_err *e) { return 0; }
static void fd_destroy(sdn_drafter *d) {}
static const sdn_drafter_ops fd_ops = {"fixed", fd_begin, fd_propose, fd_feedback, fd_destroy, NULL};

/* Plain vs speculative sampling of the first two tokens under `s`, drafts from the root's top
 * three (plus, with `repeat`, a chain repeating the most probable token, which the repetition
 * penalty must see on its path); with `table`, drafts of sam+model instead, whose candidate
 * table learns from every run's verified rows (shared across the runs, as a model shares it
 * across requests). */
static void end_to_end_with(sdn_sampling s, int repeat, int table) {
    sdn_model *m;
    sdn_err e = {0};
    sdn_model_load_opts o = {.no_tokenizer = 1};
    if (sdn_model_load(tu_model("tiny-llama", "Q8_0", 41), &o, &m, &e)) fail_msg("%s", e.msg);
    sdn_ctx *c;
    sdn_ctx_params cp = {.n_ctx = 64, .n_threads = 1};
    assert_int_equal(sdn_ctx_new(m, &cp, &c, &e), SDN_OK);
    int32_t prompt[4] = {5, 17, 99, 3};
    /* the model's top-3 at the root become the drafted candidates */
    int Vv = sdn_model_cfg(m)->vocab;
    float *lg = malloc(sizeof(float) * (size_t)Vv);
    sdn_batch b = {.n = 4, .tokens = prompt, .logit_rows = (int32_t[]){3}, .n_logits = 1, .invariant = 1};
    assert_int_equal(sdn_forward(c, &b, lg, &e), SDN_OK);
    sdn_sampling plain_s = {.temp = s.temp, .top_k = 3, .top_p = 1.0f};
    sdn_dist d = {0};
    sdn_dist_from_logits(&plain_s, lg, Vv, &d, NULL);
    fixed_drafter fd = {d.tok[1], d.tok[0], d.tok[2]};
    if (repeat) fd = (fixed_drafter){d.tok[0], d.tok[1], d.tok[0]};
    sdn_drafter dr = {&fd_ops, &fd};
    sdn_recycle *rt = NULL;
    if (table) assert_int_equal(sdn_recycle_new(Vv, SDN_RECYCLE_DEFAULT_K, &rt, &e), SDN_OK);
    long recycled = 0;
    enum { N = 6000, CELLS = 64 };
    int32_t keys[CELLS][2];
    int nk = 0, cnt[2][CELLS] = {{0}};
    for (int mode = 0; mode < 2; mode++)
        for (int i = 0; i < N; i++) {
            s.seed = (uint64_t)(i * 2 + mode) * 7919u + 12345;
            sdn_gen_params gp = {.max_tokens = 2, .sampling = s, .drafter = mode ? &dr : NULL, .ignore_eog = 1,
                                 .caps = {.max_nodes = 8, .max_depth = 4, .max_branch = 4}};
            sdn_drafter md = {0};
            if (table && mode) {
                sdn_method_config mc;
                sdn_method_defaults(&mc);
                mc.recycle = rt;
                assert_int_equal(sdn_method_create("sam+model", &mc, &md, &e), SDN_OK);
                gp.drafter = &md;
                gp.row_topk = SDN_RECYCLE_DEFAULT_K;
            }
            int32_t *out;
            int n;
            sdn_gen_stats st;
            assert_int_equal(sdn_generate_tokens(c, prompt, 4, &gp, &out, &n, &st, &e), SDN_OK);
            if (table && mode) {
                sdn_sdnpu_info info;
                assert_int_equal(sdn_sdnpu_info_get(&md, &info), SDN_OK);
                recycled += info.model_nodes;
                sdn_drafter_destroy(&md);
            }
            assert_int_equal(n, 2);
            int k;
            for (k = 0; k < nk && (keys[k][0] != out[0] || keys[k][1] != out[1]); k++) {}
            if (k == nk) { assert_true(nk < CELLS); keys[nk][0] = out[0]; keys[nk][1] = out[1]; nk++; }
            cnt[mode][k]++;
            free(out);
        }
    /* two-sample chi-square (homogeneity), cells merged until expected counts >= 5 */
    double chi = 0;
    int dof = -1, acc0 = 0, acc1 = 0;
    for (int k = 0; k < nk; k++) {
        acc0 += cnt[0][k];
        acc1 += cnt[1][k];
        if (acc0 + acc1 < 20 && k + 1 < nk) continue;
        double tot = acc0 + acc1, e0 = tot / 2, e1 = tot / 2;
        chi += (acc0 - e0) * (acc0 - e0) / e0 + (acc1 - e1) * (acc1 - e1) / e1;
        dof++;
        acc0 = acc1 = 0;
    }
    /* alpha 0.001 critical values for up to 12 dof */
    static const double crit[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88, 29.59, 31.26, 32.91};
    assert_true(dof >= 1 && dof <= 12);
    print_message("end to end: %d outcome cells, chi-square %.2f with %d dof (critical %.2f)\n", nk, chi, dof, crit[dof]);
    assert_true(chi < crit[dof]);
    if (table) { /* the table did draft: most runs' second step offered its candidates */
        print_message("model-derived candidates offered: %ld over %d runs\n", recycled, N);
        assert_true(recycled > N / 2);
    }
    sdn_recycle_free(rt);
    free(lg);
    sdn_dist_free(&d);
    sdn_ctx_free(c);
    sdn_model_free(m);
}

static void end_to_end(sdn_sampling s, int repeat) { end_to_end_with(s, repeat, 0); }

/* The model-derived candidates keep the model's distribution too. */
static void test_end_to_end_model_table(void **state) {
    (void)state;
    end_to_end_with((sdn_sampling){.temp = 1.0f, .top_k = 3, .top_p = 1.0f}, 0, 1);
}

static void test_end_to_end(void **state) { end_to_end((sdn_sampling){.temp = 1.5f, .top_k = 3, .top_p = 1.0f}, 0); }

/* The same with min-p and a strong repetition penalty over the prompt and the drafted path. */
static void test_end_to_end_penalty(void **state) {
    end_to_end((sdn_sampling){.temp = 1.5f, .top_k = 3, .top_p = 1.0f, .min_p = 0.05f, .repeat_penalty = 3.0f, .repeat_last_n = 8}, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unit_chi_square),
        cmocka_unit_test(test_end_to_end), cmocka_unit_test(test_end_to_end_model_table),
        cmocka_unit_test(test_end_to_end_penalty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
