/* test_graph_exec.c - fixed-shape graphs and the scheduled prefill (graph_sched/graph.h,
 * prefill.h) on small make-model models. Numerical rules checked:
 *   - G2 over S2-row sub-chunks is bit-identical to the decode path over the whole chunk in
 *     one call (batch invariance: the same kernels compute every row);
 *   - G2 over sub-chunks vs G1 over the padded chunk: hidden states within
 *     max|G2 - G1| / max|G1| <= 1e-4 for F32 weights and <= 5e-2 for Q8_0 weights (the G2
 *     kernels quantize activations to 8 bits per block, the G1 SGEMM does not);
 *   - single, sync and async prefill every row with G1, so their prefill predictions
 *     (top-k tokens and probabilities) and greedy output are bit-identical;
 *   - progressive and optimal run some rows on G2: their prefill probabilities stay within
 *     0.05 (absolute) of sync's for the same token, their top-1 predictions agree at >= 95%
 *     of positions, and the greedy output equals sync's on these prompts (identical tokens
 *     are expected in practice but guaranteed only within the tolerance above);
 *   - after a switching prefill every block is on G2 with G1 freed; progressive never holds
 *     both layouts of more than one block; peaks and final bytes match the layout sizes. */
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
#include "engine/forward.h"
#include "engine/layout.h"
#include "modelfile/model.h"
#include "runtime/decode.h"
#include "graph_sched/graph.h"
#include "graph_sched/prefill.h"
#include "runtime/graph_setup.h"
#include "support/test_util.h"



static void random_tokens(int32_t *t, int n, int vocab, uint64_t seed) {
    sdn_rng r;
    sdn_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) t[i] = (int32_t)sdn_rng_below(&r, (uint64_t)vocab);
}

/* G2 sub-chunks vs the decode path in one call (bitwise) and vs G1 (tolerance; bitwise for the
 * types G1 runs on the batch kernels). */
static void check_g2_vs_g1(const char *type, double tol) {
    sdn_model *m = tu_load(tu_model_layers("tiny-llama", type, 21, 4, NULL), NULL);
    const sdn_model_config *cfg = sdn_model_cfg(m);
    enum { S1 = 48, S2 = 16, N = 40, BASE = 20 };
    int dim = cfg->dim, L = cfg->n_layers;
    int32_t toks[BASE + S1];
    random_tokens(toks, BASE + S1, cfg->vocab, 7);
    sdn_err e = {0};
    float *x[3];
    for (int v = 0; v < 3; v++) {
        /* a prefix of BASE committed tokens first, so the chunk attends earlier entries */
        sdn_ctx *c = tu_ctx(m, 256, 2, 64);
        sdn_batch pre = {.n = BASE, .tokens = toks, .n_logits = 0};
        assert_int_equal(sdn_forward(c, &pre, NULL, &e), SDN_OK);
        sdn_graph_bufs b;
        assert_int_equal(sdn_graph_bufs_init(&b, dim, S1, S2, &e), SDN_OK);
        assert_int_equal(sdn_graph_embed(c, &b, toks + BASE, N, 0, &e), SDN_OK);
        if (v == 0) {
            sdn_graph g = {SDN_GRAPH_G1, 0, L, S1};
            assert_int_equal(sdn_graph_rows_run(&g, N), S1);
            assert_int_equal(sdn_graph_run(c, &g, b.x, N, BASE, &e), SDN_OK);
        } else if (v == 1) {
            sdn_graph g = {SDN_GRAPH_G2, 0, L, S2};
            assert_int_equal(sdn_graph_rows_run(&g, N), 48);
            assert_int_equal(sdn_graph_run(c, &g, b.x, N, BASE, &e), SDN_OK);
        } else {
            sdn_batch bt = {.n = N};
            assert_int_equal(sdn_fwd_layers(c, &bt, BASE, 0, L, b.x, SDN_PATH_DECODE, &e), SDN_OK);
        }
        x[v] = malloc((size_t)N * dim * sizeof(float));
        memcpy(x[v], b.x, (size_t)N * dim * sizeof(float));
        sdn_graph_bufs_free(&b);
        sdn_ctx_free(c);
    }
    assert_memory_equal(x[1], x[2], (size_t)N * dim * sizeof(float));
    double md = 0, mx = 0;
    for (size_t i = 0; i < (size_t)N * dim; i++) {
        md = fmax(md, fabs((double)x[1][i] - x[0][i]));
        mx = fmax(mx, fabs((double)x[0][i]));
    }
    print_message("  %s: max |G2 - G1| / max |G1| = %.2e (tolerance %.0e)\n", type, md / mx, tol);
    assert_true(md / mx <= tol);
    /* a quantized type's G1 runs the batch kernels, as G2 does (kernels/kernel_path.h): the
     * same bits, so graph modes and chunk sizes do not change the KV entries; F32's G1 runs
     * SGEMM, which need not agree bit for bit */
    if (strcmp(type, "F32") != 0) assert_memory_equal(x[0], x[1], (size_t)N * dim * sizeof(float));
    for (int v = 0; v < 3; v++) free(x[v]);
    sdn_model_free(m);
}

static void test_g2_subchunks(void **state) {
    check_g2_vs_g1("F32", 1e-4);
    check_g2_vs_g1("Q8_0", 5e-2);
}

static void test_blocks_partition(void **state) {
    sdn_blocks b;
    sdn_err e = {0};
    assert_int_equal(sdn_blocks_partition(10, 4, &b, &e), SDN_OK);
    int want[5] = {0, 3, 6, 8, 10};
    assert_int_equal(b.n, 4);
    for (int j = 0; j < 4; j++) {
        assert_int_equal(b.l0[j], want[j]);
        assert_int_equal(b.l1[j], want[j + 1]);
    }
    assert_int_equal(sdn_blocks_partition(3, 8, &b, &e), SDN_OK);
    assert_int_equal(b.n, 3);
    assert_int_equal(sdn_blocks_partition(3, 0, &b, &e), SDN_EINVAL);
}

/* ---- scheduled prefill through the session ---- */

typedef struct gen_out {
    int32_t *tok;
    int n;
    sdn_preds preds;
    sdn_gs_stats st;
} gen_out;

/* Costs that make the progressive plan switch blocks before their last chunk (loads cover
 * about three 64-row tasks), so G1 and G2 rows mix. */
static const sdn_gs_costs test_costs = {
    .g1 = {.alpha = 0, .beta = 1e-4}, .g2 = {.alpha = 0, .beta = 2e-4}, .load_g2 = 15e-3};

static void run_mode(sdn_model *m, int mode, const int32_t *prompt, int n_prompt, int max_tokens, gen_out *o) {
    sdn_err e = {0};
    memset(o, 0, sizeof *o);
    sdn_ctx *c = tu_ctx(m, 512, 2, 64);
    /* full-vocabulary predictions: this test compares numerics across schedules, where a
     * handful of context tokens would make near-ties (and top-1 flips) common */
    sdn_gen_params gp = {.max_tokens = max_tokens, .ignore_eog = 1, .prefill_topk = 4, .prefill_topk_full = 1, .preds_out = &o->preds};
    sdn_gs *gs = NULL;
    if (mode >= 0) {
        sdn_gs_config cfg = {.mode = (sdn_gs_mode)mode, .n_blocks = 4, .s1 = 64, .s2 = 16, .costs = &test_costs};
        assert_int_equal(sdn_gs_new(m, &cfg, &gs, &e), SDN_OK);
        assert_int_equal(sdn_gs_prepare(gs, &e), SDN_OK);
        sdn_gs_apply(gs, &gp);
    } else
        gp.decode_rows = 16; /* default prefill, same decode graph shape */
    sdn_gen_stats st;
    if (sdn_generate_tokens(c, prompt, n_prompt, &gp, &o->tok, &o->n, &st, &e)) fail_msg("mode %d: %s", mode, e.msg);
    if (gs) {
        o->st = *sdn_gs_last(gs);
        sdn_gs_free(gs);
    }
    sdn_ctx_free(c);
}

static void free_out(gen_out *o) {
    free(o->tok);
    sdn_preds_free(&o->preds);
}

static void assert_same_bits(const gen_out *a, const gen_out *b) {
    assert_int_equal(a->n, b->n);
    assert_memory_equal(a->tok, b->tok, (size_t)a->n * sizeof(int32_t));
    assert_int_equal(a->preds.n_pos, b->preds.n_pos);
    size_t np = (size_t)a->preds.n_pos * a->preds.k;
    assert_memory_equal(a->preds.tok, b->preds.tok, np * sizeof(int32_t));
    assert_memory_equal(a->preds.prob, b->preds.prob, np * sizeof(float));
}

/* |prob difference| for the same token in both top-k lists, and top-1 agreement */
static void assert_preds_close(const gen_out *a, const gen_out *ref, const char *what) {
    assert_int_equal(a->preds.n_pos, ref->preds.n_pos);
    int k = ref->preds.k, agree = 0;
    double worst = 0;
    for (int p = 0; p < ref->preds.n_pos; p++) {
        agree += a->preds.tok[(size_t)p * k] == ref->preds.tok[(size_t)p * k];
        for (int i = 0; i < k; i++)
            for (int j = 0; j < k; j++)
                if (a->preds.tok[(size_t)p * k + i] == ref->preds.tok[(size_t)p * k + j])
                    worst = fmax(worst, fabs((double)a->preds.prob[(size_t)p * k + i] - ref->preds.prob[(size_t)p * k + j]));
    }
    print_message("  %s: prefill top-k max |dprob| %.2e, top-1 agreement %d/%d, greedy output %s\n", what, worst, agree, ref->preds.n_pos,
                  a->n == ref->n && !memcmp(a->tok, ref->tok, sizeof(int32_t) * (size_t)a->n) ? "identical" : "differs");
    assert_true(worst <= 0.05);
    assert_true(agree >= 0.95 * ref->preds.n_pos);
}

/* Teacher-forced decode logits after a prefill in `mode` (-1: the default prefill): step t
 * feeds the prompt's last token, then ref[0..t-1]; T steps of V logits into out. */
static void forced_logits(sdn_model *m, int mode, const int32_t *prompt, int n, const int32_t *ref, int T, float *out) {
    sdn_err e = {0};
    sdn_ctx *c = tu_ctx(m, 512, 2, 64);
    int V = sdn_model_cfg(m)->vocab;
    if (n > 1) {
        if (mode >= 0) {
            sdn_gs *gs;
            sdn_gs_config cfg = {.mode = (sdn_gs_mode)mode, .n_blocks = 4, .s1 = 64, .s2 = 16, .costs = &test_costs};
            assert_int_equal(sdn_gs_new(m, &cfg, &gs, &e), SDN_OK);
            assert_int_equal(sdn_gs_prepare(gs, &e), SDN_OK);
            if (sdn_gs_prefill(gs, c, prompt, n - 1, 0, NULL, 0, NULL, NULL, &e)) fail_msg("%s", e.msg);
            sdn_gs_free(gs);
        } else
            for (int i = 0; i < n - 1; i += 64) {
                sdn_batch b = {.n = n - 1 - i < 64 ? n - 1 - i : 64, .tokens = prompt + i, .n_logits = 0};
                assert_int_equal(sdn_forward(c, &b, NULL, &e), SDN_OK);
            }
    }
    for (int t = 0; t < T; t++) {
        int32_t tok = t ? ref[t - 1] : prompt[n - 1], row = 0;
        sdn_batch b = {.n = 1, .tokens = &tok, .logit_rows = &row, .n_logits = 1, .invariant = 1};
        assert_int_equal(sdn_forward(c, &b, out + (size_t)t * V, &e), SDN_OK);
    }
    sdn_ctx_free(c);
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[b]) b = i;
    return b;
}

/* Decode logits after the prefill of `mode` vs after sync's: within tol relative to the
 * largest logit, and a greedy choice may differ only where sync's top-2 margin is within
 * twice the logit difference (a near tie). */
static void assert_logits_close(sdn_model *m, int mode, const int32_t *prompt, int n, const gen_out *sync, double tol, const char *what) {
    int V = sdn_model_cfg(m)->vocab, T = sync->n;
    float *a = malloc((size_t)T * V * sizeof(float)), *r = malloc((size_t)T * V * sizeof(float));
    forced_logits(m, mode, prompt, n, sync->tok, T, a);
    forced_logits(m, SDN_GS_SYNC, prompt, n, sync->tok, T, r);
    double worst = 0;
    int flips = 0;
    for (int t = 0; t < T; t++) {
        const float *x = a + (size_t)t * V, *y = r + (size_t)t * V;
        double d = 0, mx = 0;
        for (int i = 0; i < V; i++) {
            d = fmax(d, fabs((double)x[i] - y[i]));
            mx = fmax(mx, fabs((double)y[i]));
        }
        worst = fmax(worst, d / mx);
        int ax = argmax(x, V), ay = argmax(y, V);
        assert_int_equal(ay, sync->tok[t]); /* the forced replay reproduces sync's own greedy output */
        if (ax != ay) {
            flips++;
            assert_true(y[ay] - y[ax] <= 2 * d);
        }
    }
    print_message("  %s: decode logits max |d| / max |logit| = %.2e over %d steps, greedy flips at near ties: %d\n", what, worst, T, flips);
    assert_true(worst <= tol);
    free(a);
    free(r);
}

static void test_modes_results(void **state) {
    sdn_model *m = tu_load(tu_model_layers("tiny-llama", "Q8_0", 22, 4, NULL), NULL);
    int V = sdn_model_cfg(m)->vocab;
    int lens[] = {151, 2, 12, 65, 64};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        int n = lens[li];
        int32_t prompt[200];
        random_tokens(prompt, n, V, 100 + li);
        gen_out o[5], def;
        for (int mode = 0; mode < 5; mode++) run_mode(m, mode, prompt, n, 12, &o[mode]);
        run_mode(m, -1, prompt, n, 12, &def);
        print_message("prompt of %d tokens (%d prefill rows in %d chunks; progressive: %d G2 tasks):\n", n, n - 1, o[1].st.n_chunks,
                      o[SDN_GS_PROGRESSIVE].st.g2_tasks);
        assert_same_bits(&o[SDN_GS_SYNC], &o[SDN_GS_SINGLE]);
        assert_same_bits(&o[SDN_GS_ASYNC], &o[SDN_GS_SINGLE]);
        assert_preds_close(&o[SDN_GS_PROGRESSIVE], &o[SDN_GS_SYNC], "progressive vs sync");
        assert_preds_close(&o[SDN_GS_OPTIMAL], &o[SDN_GS_SYNC], "optimal vs sync");
        assert_preds_close(&def, &o[SDN_GS_SYNC], "default prefill vs sync");
        assert_logits_close(m, SDN_GS_PROGRESSIVE, prompt, n, &o[SDN_GS_SYNC], 5e-2, "progressive vs sync");
        assert_logits_close(m, SDN_GS_SINGLE, prompt, n, &o[SDN_GS_SYNC], 0, "single vs sync");
        if (n == 151) assert_true(o[SDN_GS_PROGRESSIVE].st.g2_tasks > 0); /* G1 and G2 rows really mixed */
        for (int mode = 0; mode < 5; mode++) free_out(&o[mode]);
        free_out(&def);
    }
    sdn_model_free(m);
}

/* A real model (TinyStories 260K, F32 weights): every mode gives the same greedy story. */
static void test_modes_real_model(void **state) {
    TU_REQUIRE_SHARED();
    sdn_model *m;
    sdn_err e = {0};
    sdn_model_load_opts lo = {.tokenizer_path = tu_shared_path("models/stories260K/tok512.bin")};
    if (sdn_model_load(tu_shared_path("models/stories260K/stories260K.bin"), &lo, &m, &e)) fail_msg("%s", e.msg);
    int32_t prompt[160];
    random_tokens(prompt, 160, sdn_model_cfg(m)->vocab, 9);
    prompt[0] = 1;
    gen_out o[5];
    for (int mode = 0; mode < 5; mode++) {
        run_mode(m, mode, prompt, 160, 40, &o[mode]);
        if (mode) {
            assert_int_equal(o[mode].n, o[0].n);
            assert_memory_equal(o[mode].tok, o[0].tok, sizeof(int32_t) * (size_t)o[0].n);
        }
    }
    print_message("  stories260K: %d blocks, progressive ran %d G2 tasks; 40 greedy tokens identical in every mode\n", o[3].st.n_blocks,
                  o[3].st.g2_tasks);
    for (int mode = 0; mode < 5; mode++) free_out(&o[mode]);
    sdn_model_free(m);
}

static void test_state_and_memory(void **state) {
    sdn_model *m = tu_load(tu_model_layers("tiny-llama", "Q8_0", 22, 4, NULL), NULL);
    int L = sdn_model_cfg(m)->n_layers, V = sdn_model_cfg(m)->vocab;
    /* accounted as allocated: each layer's layout is one chunk rounded up to 2 MiB */
    size_t g1 = sdn_layout_alloc_size(m, 0, L, SDN_LAYOUT_F32), g2 = sdn_layout_alloc_size(m, 0, L, SDN_LAYOUT_QUANT);
    size_t g2_block = sdn_layout_alloc_size(m, 0, 1, SDN_LAYOUT_QUANT);
    size_t R = sdn_layout_alloc_size(m, 0, 1, SDN_LAYOUT_QUANT); /* the switching modes' reserve: the largest block's G2 allocation */
    int32_t prompt[151];
    random_tokens(prompt, 151, V, 5);
    for (int mode = 0; mode < 5; mode++) {
        gen_out o;
        run_mode(m, mode, prompt, 151, 3, &o);
        const sdn_gs_stats *s = &o.st;
        assert_int_equal(s->n_chunks, 3);
        assert_int_equal(s->n_blocks, 4);
        assert_int_equal(s->g1_tasks + s->g2_tasks, 12);
        assert_int_equal(s->bytes_prefill_peak, mode == SDN_GS_SINGLE ? g1 + g2 : g1 + R);
        if (mode == SDN_GS_SINGLE) {
            assert_int_equal(s->plan.n, 0);
            assert_int_equal(s->bytes_decode, g1 + g2);
            assert_int_equal(sdn_layout_reserve_bytes(m), 0);
            assert_int_equal(sdn_layout_resident(m, 0, L, SDN_LAYOUT_F32), sdn_layout_size(m, 0, L, SDN_LAYOUT_F32));
        } else {
            assert_int_equal(s->plan.n, 4);
            assert_int_equal(sdn_layout_reserve_bytes(m), 0); /* released after the last switch */
            assert_int_equal(s->bytes_decode, g2);
            assert_int_equal(sdn_layout_resident(m, 0, L, SDN_LAYOUT_F32), 0);
            assert_int_equal(sdn_layout_resident(m, 0, L, SDN_LAYOUT_QUANT), sdn_layout_size(m, 0, L, SDN_LAYOUT_QUANT));
            for (int l = 0; l < L; l++) assert_true(sdn_layout_is_loaded(m, l, SDN_LAYOUT_QUANT));
            assert_true(s->bytes_switch_peak <= g1 + g2_block + R);
            assert_true(s->t_load > 0);
        }
        if (mode == SDN_GS_SYNC || mode == SDN_GS_ASYNC) assert_int_equal(s->max_both, 0);
        if (mode == SDN_GS_PROGRESSIVE || mode == SDN_GS_OPTIMAL) assert_true(s->max_both <= 1);
        if (mode == SDN_GS_SYNC) assert_int_equal(s->g2_tasks, 0);
        free_out(&o);
    }
    sdn_model_free(m);
}

static void test_errors(void **state) {
    sdn_model *m = tu_load(tu_model_layers("tiny-llama", "Q8_0", 22, 4, NULL), NULL);
    sdn_err e = {0};
    sdn_gs *gs = NULL;
    sdn_gs_config cfg = {.mode = SDN_GS_PROGRESSIVE, .s1 = 64, .s2 = 16};
    assert_int_equal(sdn_gs_new(m, &cfg, &gs, &e), SDN_EINVAL); /* no costs */
    cfg.mode = SDN_GS_SYNC;
    cfg.s2 = 65;
    assert_int_equal(sdn_gs_new(m, &cfg, &gs, &e), SDN_EINVAL);
    cfg.s2 = 16;
    assert_int_equal(sdn_gs_new(m, &cfg, &gs, &e), SDN_OK);
    assert_int_equal(sdn_gs_prepare(gs, &e), SDN_OK);
    int32_t toks[100] = {0};
    sdn_ctx *c = tu_ctx(m, 120, 2, 64); /* 100 tokens in 64-row chunks need 128 slots */
    e = (sdn_err){0};
    assert_int_equal(sdn_gs_prefill(gs, c, toks, 100, 0, NULL, 0, NULL, NULL, &e), SDN_EINVAL);
    assert_non_null(strstr(e.msg, "raise --ctx"));
    /* nothing to prefill (one-token prompt): every block switches to G2 */
    assert_int_equal(sdn_gs_prefill(gs, c, toks, 0, 0, NULL, 0, NULL, NULL, &e), SDN_OK);
    int L = sdn_model_cfg(m)->n_layers;
    assert_int_equal(sdn_layout_resident(m, 0, L, SDN_LAYOUT_F32), 0);
    assert_int_equal(sdn_layout_resident(m, 0, L, SDN_LAYOUT_QUANT), sdn_layout_size(m, 0, L, SDN_LAYOUT_QUANT));
    assert_int_equal(sdn_gs_last(gs)->max_both, 0);
    assert_int_equal(sdn_kv_len(c), 0);
    sdn_ctx_free(c);
    sdn_gs_free(gs);
    sdn_gs_mode md;
    assert_int_equal(sdn_gs_mode_parse("progressive", &md, &e), SDN_OK);
    assert_int_equal(md, SDN_GS_PROGRESSIVE);
    assert_int_equal(sdn_gs_mode_parse("fast", &md, &e), SDN_EINVAL);
    /* pinning needs a CPU left for the loader */
    sdn_gs_config pc = {.mode = SDN_GS_SYNC, .s1 = 64, .s2 = 16, .pin = sdn_cpus_online()};
    e = (sdn_err){0};
    assert_int_equal(sdn_gs_new(m, &pc, &gs, &e), SDN_EINVAL);
    assert_non_null(strstr(e.msg, "loader"));
    assert_null(gs);
    sdn_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_partition), cmocka_unit_test(test_g2_subchunks), cmocka_unit_test(test_modes_results),
        cmocka_unit_test(test_modes_real_model),
        cmocka_unit_test(test_state_and_memory), cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
