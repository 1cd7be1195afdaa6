/* test_spec_greedy.c - lossless greedy speculation: for many random prompts, draft caps and
 * every drafting method, the tokens generated with speculation are bit-identical to plain
 * greedy decoding (the reference is the same model decoded one token at a time), for every
 * method: pld, sam, sam+tree, sam+cal (with prefill predictions), sam+reuse, sdnpu. Runs on
 * make-model models of each architecture (several tensor types) and on the real TinyStories
 * model, whose continuations repeat enough for drafts to be accepted. test_kernel_path[path]
 * repeats the make-model check on each kernel path the machine has (fewer prompts; paths it
 * lacks are reported SKIPPED). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "common/sdn_util.h"
#include "draft/methods.h"
#include "draft/recycle.h"
#include "engine/forward.h"
#include "modelfile/model.h"
#include "runtime/decode.h"
#include "tokenizer/tokenizer.h"
#include "support/kpath_test.h"
#include "support/test_util.h"

typedef struct counts {
    int runs, steps, tokens, expected_tokens;
    long accepted;
} counts;

/* The model's candidate table of check_model: shared by all its runs, so what it learned on
 * earlier prompts drafts the later ones (the output must not depend on it). */
static sdn_recycle *g_table;

/* Generate with `method`; returns tokens (malloc'd). */
static int32_t *gen(sdn_ctx *c, const char *method, const int32_t *prompt, int n, int max, sdn_draft_caps caps, int *n_out,
                    sdn_gen_stats *st) {
    sdn_method_config mc;
    sdn_method_defaults(&mc);
    mc.sam.min_match = 1 + (caps.max_depth % 4); /* vary the SAM threshold too */
    mc.sam.tree = caps.max_branch > 1;
    mc.recycle = g_table;
    sdn_drafter d;
    sdn_err e = {0};
    if (sdn_method_create(method, &mc, &d, &e)) fail_msg("%s", e.msg);
    sdn_gen_params gp = {.max_tokens = max, .drafter = d.ops ? &d : NULL, .caps = caps, .ignore_eog = 1,
                         .prefill_topk = sdn_method_uses_prefill_preds(method) ? 3 : 0,
                         .row_topk = g_table && sdn_method_uses_model_table(method, &mc) ? 1 + (caps.max_nodes % SDN_RECYCLE_DEFAULT_K) : 0};
    int32_t *out;
    if (sdn_generate_tokens(c, prompt, n, &gp, &out, n_out, st, &e)) fail_msg("%s: %s", method, e.msg);
    sdn_drafter_destroy(&d);
    return out;
}

static void check_model(sdn_model *m, int n_prompts, uint64_t seed, int vocab_lim, counts *cnt) {
    const char *methods[] = {"pld", "sam", "sam+tree", "sam+cal", "sam+reuse", "sam+model", "sdnpu"};
    enum { NM = sizeof methods / sizeof methods[0] };
    int V = sdn_model_cfg(m)->vocab;
    sdn_err te = {0};
    if (sdn_recycle_new(sdn_model_cfg(m)->vocab, SDN_RECYCLE_DEFAULT_K, &g_table, &te)) fail_msg("%s", te.msg);
    if (vocab_lim > 0 && vocab_lim < V) V = vocab_lim;
    sdn_ctx *c;
    sdn_err e = {0};
    sdn_ctx_params cp = {.n_ctx = 512, .n_threads = 2};
    if (sdn_ctx_new(m, &cp, &c, &e)) fail_msg("%s", e.msg);
    sdn_rng r;
    sdn_rng_seed(&r, seed);
    for (int p = 0; p < n_prompts; p++) {
        /* prompts: random tokens, with a repeated span so retrieval has something to find */
        int n = 2 + (int)sdn_rng_below(&r, 60);
        int32_t prompt[128];
        for (int i = 0; i < n; i++) prompt[i] = (int32_t)sdn_rng_below(&r, (uint64_t)V);
        if (n > 10 && sdn_rng_below(&r, 2)) {
            int span = 3 + (int)sdn_rng_below(&r, (uint64_t)(n / 3));
            memcpy(prompt + n, prompt + n - span - 2, sizeof(int32_t) * (size_t)span);
            n += span;
        }
        if (tu_shared() && sdn_model_tokenizer(m) && sdn_model_cfg(m)->vocab == 512) prompt[0] = 1; /* TinyStories: BOS */
        int max = 8 + (int)sdn_rng_below(&r, 40);
        int base_n;
        sdn_draft_caps none = {0};
        int32_t *base = gen(c, "none", prompt, n, max, none, &base_n, NULL);
        assert_int_equal(base_n, max); /* ignore_eog: exactly max tokens */
        for (int k = 0; k < NM; k++) {
            sdn_draft_caps caps = {.max_nodes = 1 + (int)sdn_rng_below(&r, 63), .max_depth = 1 + (int)sdn_rng_below(&r, 16),
                                   .max_branch = 1 + (int)sdn_rng_below(&r, 4)};
            int got_n;
            sdn_gen_stats st;
            int32_t *got = gen(c, methods[k], prompt, n, max, caps, &got_n, &st);
            if (got_n != base_n || memcmp(got, base, sizeof(int32_t) * (size_t)base_n) != 0) {
                int i = 0;
                while (i < got_n && i < base_n && got[i] == base[i]) i++;
                fail_msg("prompt %d (%d tokens), %s caps %d/%d/%d: output differs from plain decoding at token %d", p, n, methods[k],
                         caps.max_nodes, caps.max_depth, caps.max_branch, i);
            }
            /* the run's own accounting: every step commits its root token plus the draft tokens
             * it accepted (the last step may be cut at max), and the histogram counts every step */
            assert_int_equal(st.n_gen, got_n);
            assert_true(st.steps >= 1 && st.steps <= st.n_gen && st.n_gen <= st.steps + st.accepted);
            assert_true(st.accepted <= st.drafted);
            int hist_steps = 0;
            long hist_acc = 0;
            for (int h = 0; h < SDN_ACCEPT_HIST; h++) hist_steps += st.accept_hist[h], hist_acc += (long)h * st.accept_hist[h];
            assert_int_equal(hist_steps, st.steps);
            assert_int_equal(hist_acc, st.accepted);
            cnt->runs++;
            cnt->expected_tokens += max;
            cnt->steps += st.steps;
            cnt->tokens += st.n_gen;
            cnt->accepted += st.accepted;
            free(got);
        }
        free(base);
    }
    sdn_ctx_free(c);
    uint64_t upd = 0;
    sdn_recycle_stats(g_table, NULL, &upd);
    assert_true(upd > 0); /* the table learned (and drafted from what it learned) */
    sdn_recycle_free(g_table);
    g_table = NULL;
}


static void test_make_model_archs(void **state) {
    /* tiny-gemma3's sliding window (8 positions) is far shorter than prompt + answer, so tree
     * verification and KV compaction run across it */
    const char *shapes[] = {"tiny-llama", "tiny-llama3", "tiny-qwen2", "tiny-qwen3", "tiny-gemma3"};
    const char *types[] = {"Q8_0", "F16", "Q4_K_M", "Q4_K", "Q8_0"};
    counts cnt = {0};
    for (int a = 0; a < 5; a++) {
        sdn_model *m = tu_load(tu_model(shapes[a], types[a], 31), NULL);
        /* a small vocabulary slice makes random prompts repeat, so drafts get accepted sometimes */
        check_model(m, 25, 100 + (uint64_t)a, 8, &cnt);
        sdn_model_free(m);
    }
    print_message("make-model: %d speculative runs identical to plain; %d tokens in %d steps, %ld draft tokens accepted\n", cnt.runs,
                  cnt.tokens, cnt.steps, cnt.accepted);
    assert_int_equal(cnt.runs, 5 * 25 * 7);          /* every prompt x method ran and was compared */
    assert_int_equal(cnt.tokens, cnt.expected_tokens); /* and generated all its tokens */
    assert_true(cnt.steps < cnt.tokens);               /* some drafts were accepted */
}

static void test_kernel_path(void **state) {
    kpath_use(state);
    const char *types[] = {"Q4_0", "Q4_K_M"};
    const int np = getenv("SDN_TEST_QUICK") ? 3 : 6; /* SDN_TEST_QUICK: .ci/aarch64 under emulation */
    counts cnt = {0};
    for (int a = 0; a < 2; a++) {
        sdn_model *m = tu_load(tu_model("tiny-qwen2", types[a], 33), NULL);
        check_model(m, np, 200 + (uint64_t)a, 8, &cnt);
        sdn_model_free(m);
    }
    print_message("path %s: %d speculative runs identical to plain, %ld draft tokens accepted\n", sdn_kpath_name(sdn_kpath_get()),
                  cnt.runs, cnt.accepted);
    assert_int_equal(cnt.runs, 2 * np * 7);
    assert_int_equal(cnt.tokens, cnt.expected_tokens);
}

/* sdn_draft_budget against a brute-force maximization written here, and the acceptance
 * estimate's prior and cap. */
static void test_draft_budget_choice(void **state) {
    (void)state;
    double ms[SDN_INVARIANT_MAX_ROWS];
    for (int shape = 0; shape < 4; shape++)
        for (int ai = 0; ai <= 10; ai++) {
            const double a = ai / 10.0 * 0.98;
            for (int d = 0; d < SDN_INVARIANT_MAX_ROWS; d++)
                ms[d] = shape == 0 ? 10.0 : shape == 1 ? 10.0 + d : shape == 2 ? 10.0 + 0.5 * d : 10.0 + (d > 7 ? 40.0 : 0.2 * d);
            double rate[64], best_r = 0;
            for (int d = 0; d <= 63; d++) {
                double e = 0;
                for (int k = 0; k <= d; k++) e += pow(a, k);
                rate[d] = e / ms[d];
                if (rate[d] > best_r) best_r = rate[d];
            }
            const int got = sdn_draft_budget(ms, 63, a);
            assert_true(got >= 0 && got <= 63);
            assert_true(rate[got] >= best_r * (1 - 1e-12)); /* a maximizer (up to float rounding) */
        }
    for (int d = 0; d < SDN_INVARIANT_MAX_ROWS; d++) ms[d] = 10.0;
    assert_int_equal(sdn_draft_budget(ms, 63, 0.9), 63); /* a flat curve: every token pays */
    assert_int_equal(sdn_draft_budget(ms, 5, 0.9), 5);
    for (int d = 0; d < SDN_INVARIANT_MAX_ROWS; d++) ms[d] = 10.0 * (1 + d);
    assert_int_equal(sdn_draft_budget(ms, 63, 0.9), 0); /* cost linear in rows: drafting never pays */
    assert_true(fabs(sdn_accept_estimate(0, 0) - 0.5) < 1e-12);
    assert_true(fabs(sdn_accept_estimate(6, 2) - 8.0 / 12.0) < 1e-12);
    assert_true(sdn_accept_estimate(100000, 0) == 0.98);
}

/* With a cost curve and no fixed draft size every method's output stays plain greedy
 * decoding's (the per-step budget changes what is drafted, never what is committed); the
 * sdnpu family also with its size from calibrated scores (score_budget, draft/sizing.h) and
 * the model's candidate table, on a flat curve and on a steep one. */
static void test_budget_from_curve(void **state) {
    (void)state;
    sdn_model *m = tu_shared() ? tu_load_stories() : tu_load(tu_model("tiny-qwen2", "Q8_0", 41), NULL);
    double ms[SDN_INVARIANT_MAX_ROWS];
    for (int d = 0; d < SDN_INVARIANT_MAX_ROWS; d++) ms[d] = 10.0 + 0.05 * d;
    sdn_ctx *c;
    sdn_err e = {0};
    sdn_ctx_params cp = {.n_ctx = 512, .n_threads = 2};
    if (sdn_ctx_new(m, &cp, &c, &e)) fail_msg("%s", e.msg);
    int32_t prompt[24];
    const int V = sdn_model_cfg(m)->vocab < 8 ? sdn_model_cfg(m)->vocab : 8;
    for (int i = 0; i < 24; i++) prompt[i] = i == 0 ? 1 : (int32_t)(1 + (i * 5) % (V - 1));
    const char *methods[] = {"pld", "sam", "sdnpu", "sam+tree", "sam+model", "sdnpu"};
    double steep[SDN_INVARIANT_MAX_ROWS];
    for (int d = 0; d < SDN_INVARIANT_MAX_ROWS; d++) steep[d] = 10.0 + 4.0 * d;
    sdn_recycle *table;
    if (sdn_recycle_new(sdn_model_cfg(m)->vocab, SDN_RECYCLE_DEFAULT_K, &table, &e)) fail_msg("%s", e.msg);
    long drafted = 0, steps = 0, max_step = 0, sized_drafted[2] = {0};
    for (int k = 0; k < 9; k++) {
        const int sized = k >= 3, curve = k >= 6; /* k 3..5: flat curve, 6..8: steep */
        sdn_gen_params gp = {.max_tokens = 60, .ignore_eog = 1};
        int32_t *base, *got;
        int nb, ng;
        if (sdn_generate_tokens(c, prompt, 24, &gp, &base, &nb, NULL, &e)) fail_msg("%s", e.msg);
        sdn_method_config mc;
        sdn_method_defaults(&mc);
        sdn_drafter d;
        const char *method = methods[sized ? 3 + k % 3 : k];
        mc.recycle = sized ? table : NULL;
        if (sdn_method_create(method, &mc, &d, &e)) fail_msg("%s", e.msg);
        gp.drafter = &d;
        gp.verify_ms = curve ? steep : ms;
        gp.score_budget = sized;
        gp.row_topk = sized && sdn_method_uses_model_table(method, &mc) ? SDN_RECYCLE_DEFAULT_K : 0;
        sdn_gen_stats st;
        if (sdn_generate_tokens(c, prompt, 24, &gp, &got, &ng, &st, &e)) fail_msg("%s", e.msg);
        assert_int_equal(ng, nb);
        assert_memory_equal(got, base, sizeof(int32_t) * (size_t)nb);
        if (sized) sized_drafted[curve] += st.drafted;
        else drafted += st.drafted;
        steps += st.steps;
        for (int h = 0; h < SDN_ACCEPT_HIST; h++)
            if (st.accept_hist[h] && h > max_step) max_step = h;
        sdn_drafter_destroy(&d);
        free(base);
        free(got);
    }
    print_message("budget from a flat curve: %ld draft tokens in %ld steps, up to %ld accepted in one step\n", drafted, steps, max_step);
    print_message("sized from scores: %ld draft tokens on the flat curve, %ld on the steep one\n", sized_drafted[0], sized_drafted[1]);
    assert_true(drafted > 0);
    assert_true(sized_drafted[0] > sized_drafted[1]); /* dearer rows: smaller drafts */
    sdn_recycle_free(table);
    assert_true(sdn_draft_budget(ms, 63, sdn_accept_estimate(0, 0)) > 4); /* the prior drafts beyond the old default here */
    sdn_ctx_free(c);
    sdn_model_free(m);
}

static void test_tinystories(void **state) {
    TU_REQUIRE_SHARED();
    sdn_model *m = tu_load_stories();
    counts cnt = {0};
    check_model(m, 50, 7, 0, &cnt);
    print_message("TinyStories: %d speculative runs identical to plain; %d tokens in %d steps (%.2f tokens/step), %ld draft tokens accepted\n",
                  cnt.runs, cnt.tokens, cnt.steps, (double)cnt.tokens / cnt.steps, cnt.accepted);
    assert_int_equal(cnt.runs, 50 * 7);
    assert_int_equal(cnt.tokens, cnt.expected_tokens);
    assert_true(cnt.accepted > 100); /* the identity check must have exercised accepted drafts */
    sdn_model_free(m);
}

int main(void) {
    /* SDN_TEST_FILTER=pattern runs only the matching tests (cmocka's wildcards); SDN_TEST_PATH_CASES
     * only the per-path cases (named "[PATH]": .ci/aarch64, where the rest repeats the x86 suite
     * at emulation cost) */
    if (getenv("SDN_TEST_FILTER")) cmocka_set_test_filter(getenv("SDN_TEST_FILTER"));
    else if (getenv("SDN_TEST_PATH_CASES")) cmocka_set_test_filter("*]");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_make_model_archs),
        KPATH_TESTS(test_kernel_path),
        cmocka_unit_test(test_draft_budget_choice),
        cmocka_unit_test(test_budget_from_curve),
        cmocka_unit_test(test_tinystories),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
