/* test_graph_setup.c - graph_sched/setup.c, sdn_gs_setup: what `sdnpu run --graphs MODE` and
 * `sdnpu bench --graphs` call to wire graph scheduling into a generation run.
 *
 * On a 4-layer tiny-llama with F32 weights (G1 and G2 then agree to ~1e-6, so greedy choices
 * cannot flip between them), for each mode (single, sync, async, progressive):
 *   - the context parameters get max_batch raised to the prefill graph (sdn_gs_min_batch);
 *   - the generation parameters get the prefill hook (sdn_gs_prefill with the runtime),
 *     decode_rows = the decode graph's rows, and caps.max_nodes = the budget's draft size
 *     when the caller gave none (and the caller's own cap when it did);
 *   - the decode shape comes from the profile's budget when --g2 is not given (with a drafter:
 *     2 rows or more and draft <= rows - 1), and is the given one otherwise;
 *   - generation through it, with and without a drafter, gives exactly the tokens of plain
 *     greedy decoding with the default prefill (the independent reference);
 *   - the runtime ran the requested mode.
 * Bad options fail with SDN_EINVAL and a message naming the option. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/sdn_util.h"
#include "draft/methods.h"
#include "engine/forward.h"
#include "modelfile/model.h"
#include "runtime/decode.h"
#include "runtime/graph_setup.h"
#include "support/test_util.h"

#define N_PROMPT 150 /* three 64-row prefill chunks */
#define N_GEN 24
#define S1 64
#define THREADS 2

static sdn_model *g_model;
static int32_t g_prompt[N_PROMPT];
static int32_t *g_ref;
static int g_nref;
static char g_db[1024];

/* A prompt with repeats (so pld drafts) from random tokens. */
static void make_prompt(int vocab) {
    sdn_rng r;
    sdn_rng_seed(&r, 99);
    for (int i = 0; i < N_PROMPT; i++) g_prompt[i] = i >= 40 && i % 40 < 20 ? g_prompt[i - 40] : (int32_t)sdn_rng_below(&r, (uint64_t)vocab);
}

static void generate(sdn_ctx_params *cp, sdn_gen_params *gp, int32_t **out, int *n) {
    sdn_ctx *c;
    sdn_err e = {0};
    if (sdn_ctx_new(g_model, cp, &c, &e)) fail_msg("%s", e.msg);
    sdn_gen_stats st;
    if (sdn_generate_tokens(c, g_prompt, N_PROMPT, gp, out, n, &st, &e)) fail_msg("%s", e.msg);
    sdn_ctx_free(c);
}

static int setup(void **state) {
    (void)state;
    g_model = tu_load(tu_model_layers("tiny-llama", "F32", 5, 4, NULL), NULL);
    make_prompt(sdn_model_cfg(g_model)->vocab);
    snprintf(g_db, sizeof g_db, "%s", tu_tmp("profiles.sqlite"));
    sdn_ctx_params cp = {.n_ctx = 512, .n_threads = THREADS, .max_batch = 64};
    sdn_gen_params gp = {.max_tokens = N_GEN, .ignore_eog = 1};
    generate(&cp, &gp, &g_ref, &g_nref);
    return g_nref == N_GEN ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    free(g_ref);
    sdn_model_free(g_model);
    return 0;
}

static sdn_gs_options opts(const char *mode) {
    return (sdn_gs_options){.graphs = mode, .n_blocks = 2, .s1 = S1, .profile_db = g_db};
}

static void expect_ref(const int32_t *tok, int n, const char *what) {
    if (n != g_nref || memcmp(tok, g_ref, sizeof *tok * (size_t)n)) {
        int k = 0;
        while (k < n && k < g_nref && tok[k] == g_ref[k]) k++;
        fail_msg("%s: output differs from plain decoding at token %d (%d vs %d tokens)", what, k, n, g_nref);
    }
}

static void check_mode(const char *mode, int with_drafter, int s2, int draft_max) {
    char what[128];
    snprintf(what, sizeof what, "--graphs %s%s, g2 %d, draft-max %d", mode, with_drafter ? " --spec pld" : "", s2, draft_max);
    sdn_drafter d = {0};
    sdn_err e = {0};
    if (with_drafter) {
        sdn_method_config mc;
        sdn_method_defaults(&mc);
        assert_int_equal(sdn_method_create("pld", &mc, &d, &e), SDN_OK);
    }
    sdn_ctx_params cp = {.n_ctx = 512, .n_threads = THREADS, .max_batch = 1};
    sdn_gen_params gp = {.max_tokens = N_GEN, .ignore_eog = 1, .drafter = with_drafter ? &d : NULL, .caps = {.max_nodes = draft_max}};
    sdn_gs_options o = opts(mode);
    o.s2 = s2;
    o.draft_max = draft_max;
    sdn_gs *gs = NULL;
    sdn_budget b;
    memset(&b, 0xff, sizeof b);
    if (sdn_gs_setup(g_model, THREADS, &o, NULL, &cp, &gp, &gs, &b, &e)) fail_msg("%s: %s", what, e.msg);
    assert_non_null(gs);
    /* the runtime's shape */
    assert_int_equal(sdn_gs_s1(gs), S1);
    assert_int_equal(sdn_gs_blocks(gs)->n, 2);
    if (s2 > 0) assert_int_equal(sdn_gs_s2(gs), s2);
    /* context params: max batch raised to the prefill graph */
    assert_int_equal(cp.max_batch, sdn_gs_min_batch(gs));
    assert_true(cp.max_batch >= S1);
    /* the prompt's padded chunks fit the context this test creates */
    assert_true(sdn_gs_kv_need(gs, 0, N_PROMPT - 1) <= 512);
    assert_true(sdn_gs_kv_need(gs, 0, N_PROMPT - 1) >= N_PROMPT - 1);
    assert_int_equal(cp.n_threads, THREADS);
    /* generation params: the prefill hook and the decode graph shape */
    assert_ptr_equal(gp.prefill, sdn_gs_prefill);
    assert_ptr_equal(gp.prefill_ud, gs);
    assert_int_equal(gp.decode_rows, sdn_gs_s2(gs));
    assert_int_equal(gp.max_tokens, N_GEN);
    /* the budget: a profile was needed (s2 or the draft size not given) */
    if (s2 <= 0 || draft_max <= 0) {
        assert_true(b.shape >= 1 && b.shape <= SDN_INVARIANT_MAX_ROWS);
        assert_true(b.draft >= 0 && b.draft <= b.shape - 1);
        if (s2 <= 0) assert_int_equal(sdn_gs_s2(gs), b.shape);
        if (with_drafter && s2 <= 0) assert_true(b.shape >= 2);
    }
    if (draft_max > 0) assert_int_equal(gp.caps.max_nodes, draft_max); /* the caller's cap stays */
    else if (b.draft > 0) assert_int_equal(gp.caps.max_nodes, b.draft);
    else assert_int_equal(gp.caps.max_nodes, 0);
    assert_true(gp.caps.max_nodes <= sdn_gs_s2(gs) - 1 || gp.caps.max_nodes == draft_max);

    int32_t *tok = NULL;
    int n = 0;
    generate(&cp, &gp, &tok, &n);
    expect_ref(tok, n, what);
    free(tok);
    const sdn_gs_stats *st = sdn_gs_last(gs);
    assert_non_null(st);
    assert_string_equal(sdn_gs_mode_name(st->mode), mode);
    assert_int_equal(st->n_tokens, N_PROMPT - 1); /* the last prompt token is the first decode step's root */
    sdn_gs_free(gs);
    sdn_drafter_destroy(&d);
}

static void test_single(void **state) {
    (void)state;
    check_mode("single", 0, 0, 0);
    check_mode("single", 1, 0, 0);
}
static void test_sync(void **state) {
    (void)state;
    check_mode("sync", 0, 16, 0);
    check_mode("sync", 1, 8, 3);
}
static void test_async(void **state) {
    (void)state;
    check_mode("async", 0, 0, 0);
    check_mode("async", 1, 16, 5);
}
static void test_progressive(void **state) {
    (void)state;
    check_mode("progressive", 0, 0, 0);
    check_mode("progressive", 1, 0, 0);
    check_mode("progressive", 1, 16, 4);
}

/* With both the shape and the draft size given, no profile is read or measured: a profile
 * database that cannot be opened is not touched. */
static void test_no_profile_needed(void **state) {
    (void)state;
    sdn_ctx_params cp = {.n_ctx = 512, .n_threads = THREADS, .max_batch = 1};
    sdn_gen_params gp = {.max_tokens = N_GEN, .ignore_eog = 1};
    sdn_gs_options o = opts("sync");
    o.s2 = 8;
    o.draft_max = 4;
    o.profile_db = "/nonexistent-dir/profiles.sqlite";
    sdn_gs *gs;
    sdn_budget b = {.shape = -1};
    sdn_err e = {0};
    assert_int_equal(sdn_gs_setup(g_model, THREADS, &o, NULL, &cp, &gp, &gs, &b, &e), SDN_OK);
    assert_int_equal(b.shape, 0);
    assert_int_equal(gp.decode_rows, 8);
    sdn_gs_free(gs);
}

static void expect_bad(sdn_gs_options o, const char *named) {
    sdn_ctx_params cp = {.n_ctx = 512, .n_threads = THREADS, .max_batch = 1};
    sdn_gen_params gp = {.max_tokens = N_GEN};
    sdn_gs *gs = (sdn_gs *)&cp; /* must be reset to NULL */
    sdn_err e = {0};
    int rc = sdn_gs_setup(g_model, THREADS, &o, NULL, &cp, &gp, &gs, NULL, &e);
    if (rc == SDN_OK) fail_msg("options accepted; expected an error naming '%s'", named);
    assert_null(gs);
    if (!strstr(e.msg, named)) fail_msg("message '%s' does not name '%s'", e.msg, named);
    assert_null(gp.prefill);
    assert_int_equal(gp.decode_rows, 0);
}

static void test_bad_options(void **state) {
    (void)state;
    sdn_gs_options o = opts("weird");
    expect_bad(o, "weird");
    expect_bad(o, "--graphs");
    o = opts(NULL);
    expect_bad(o, "--graphs");
    o = opts("sync");
    o.s2 = 65;
    expect_bad(o, "--g2");
    o.s2 = -1;
    expect_bad(o, "--g2");
    o = opts("sync");
    o.s1 = -5;
    expect_bad(o, "--g1");
    o = opts("sync");
    o.n_blocks = 1000;
    expect_bad(o, "--graph-blocks");
    o = opts("progressive");
    o.profile_db = NULL;
    expect_bad(o, "--profile-db");
    o = opts("sync");
    o.draft_max = -2;
    expect_bad(o, "--draft-max");
    o = opts("sync");
    o.pin = 1; /* THREADS compute threads: refused when they leave no CPU to the loader */
    if (THREADS >= sdn_cpus_online()) expect_bad(o, "--graph-pin");
    /* a profile database that is not one: the file is named */
    const char *junk = tu_tmp("junk.sqlite");
    assert_int_equal(tu_write_file(junk, "not a database, just text", 25), 0);
    o = opts("progressive");
    o.profile_db = junk;
    expect_bad(o, "junk.sqlite");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single),      cmocka_unit_test(test_sync),
        cmocka_unit_test(test_async),       cmocka_unit_test(test_progressive),
        cmocka_unit_test(test_no_profile_needed), cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
