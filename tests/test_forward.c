/* test_forward.c - the forward pass against the naive double-precision reference
 * (tests/support/ref_model.c) for every architecture and tensor type, batch invariance
 * (bit-exact logits for batch sizes 1..64 and any thread count), and tree-mask
 * verification with KV compaction against recomputing the accepted sequence from scratch.
 * Batch invariance is also checked on every kernel path (test_batch_invariance_path[path]:
 * the batched types Q8_0, Q4_0, Q4_1, Q4_K, Q6_K, batch sizes around the kernels' tile and
 * AMX thresholds; paths the machine lacks are reported SKIPPED), and for every KV cache type
 * (f16, the default, everywhere; f32 and q8 on a subset), as is chunk invariance
 * (test_chunk_invariance: prefill in any chunks or after a reused prefix gives the bits of
 * one-token decoding) and the compact caches' distance from the reference.
 *
 * Tolerances (max |logit - ref| / max |ref| over a sequence): 2e-4 for F32, F16 and BF16
 * weights (F32 activations; the reference dequantizes the same weights) and 6e-2 for the
 * quantized types, whose kernels quantize activations to 8 bits per block. */
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
#include "kernels/kernel_path.h"
#include "engine/layout.h"
#include "kernels/matmul.h"
#include "modelfile/model.h"
#include "modelfile/tensor_types.h"
#include "support/kpath_test.h"
#include "support/ref_model.h"
#include "support/test_util.h"

static const char *archs[] = {"tiny-llama", "tiny-llama3", "tiny-qwen2", "tiny-qwen3", "tiny-gemma3"};
static const char *types[] = {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M"};
#define NA (sizeof archs / sizeof archs[0])
#define NT (sizeof types / sizeof types[0])

static int is_float(const char *t) { return !strcmp(t, "F32") || !strcmp(t, "F16") || !strcmp(t, "BF16"); }


static void random_tokens(int32_t *t, int n, int vocab, uint64_t seed) {
    sdn_rng r;
    sdn_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) t[i] = (int32_t)sdn_rng_below(&r, (uint64_t)vocab);
}

/* Engine vs reference: a 90-token prefill in one batch (the prefill path), then 6 decode
 * steps (batch-invariant kernels), every position's logits compared; the largest relative
 * error over the sequence is returned. */
static double vs_reference(const char *arch, const char *type, int tk, int tv, uint64_t seed) {
    enum { NP = 90, ND = 6 };
    const char *path = tu_model(arch, type, 11);
    sdn_model *m = tu_load(path, NULL);
    ref_model *r = ref_model_load(path);
    assert_non_null(r);
    int V = sdn_model_cfg(m)->vocab;
    sdn_ctx *c = tu_ctx_kv(m, 256, 2, 128, tk, tv);
    int32_t toks[NP + ND];
    random_tokens(toks, NP + ND, V, seed);
    float *lg = malloc((size_t)NP * V * sizeof(float)), *ref = malloc((size_t)V * sizeof(float));
    sdn_err e = {0};
    sdn_batch b = {.n = NP, .tokens = toks, .n_logits = -1};
    assert_int_equal(sdn_forward(c, &b, lg, &e), SDN_OK);
    double worst = 0;
    for (int p = 0; p < NP + ND; p++) {
        ref_model_step(r, toks[p], ref);
        const float *got = lg + (size_t)p * V;
        if (p >= NP) {
            int32_t row = 0;
            sdn_batch d = {.n = 1, .tokens = &toks[p], .logit_rows = &row, .n_logits = 1, .invariant = 1};
            assert_int_equal(sdn_forward(c, &d, lg, &e), SDN_OK);
            got = lg;
        }
        double mx = 0, diff = 0;
        for (int i = 0; i < V; i++) {
            mx = fmax(mx, fabs(ref[i]));
            diff = fmax(diff, fabs(got[i] - ref[i]));
        }
        worst = fmax(worst, diff / mx);
    }
    free(lg);
    free(ref);
    ref_model_free(r);
    sdn_ctx_free(c);
    sdn_model_free(m);
    return worst;
}

/* Every architecture and tensor type with the F32 cache (the reference's own arithmetic). */
static void test_vs_reference(void **state) {
    for (size_t a = 0; a < NA; a++)
        for (size_t t = 0; t < NT; t++) {
            double worst = vs_reference(archs[a], types[t], SDN_KV_F32, SDN_KV_F32, 5 + a);
            double tol = is_float(types[t]) ? 2e-4 : 4e-2;
            print_message("%-12s %-7s max relative logit error %.2e (tolerance %.0e)\n", archs[a], types[t], worst, tol);
            if (!(worst <= tol)) fail_msg("%s %s: error %.3e above %.0e", archs[a], types[t], worst, tol);
        }
}

/* The compact caches against the reference: every architecture, float and quantized weights,
 * keys and values of each type. Tolerances (relative to the largest logit): F16 rounds each
 * element to 11 significant bits, q8 to 8 bits per row (and the query to 8 bits for q8
 * keys). */
static void test_kv_types_vs_reference(void **state) {
    static const char *ktypes[] = {"F32", "Q8_0", "Q4_K_M"};
    static const int kv[][2] = {{SDN_KV_F16, SDN_KV_F16}, {SDN_KV_Q8, SDN_KV_Q8}, {SDN_KV_F16, SDN_KV_Q8}, {SDN_KV_Q8, SDN_KV_F32}};
    for (size_t a = 0; a < NA; a++)
        for (size_t t = 0; t < 3; t++)
            for (size_t k = 0; k < sizeof kv / sizeof kv[0]; k++) {
                double worst = vs_reference(archs[a], ktypes[t], kv[k][0], kv[k][1], 5 + a);
                int q8 = kv[k][0] == SDN_KV_Q8 || kv[k][1] == SDN_KV_Q8;
                double tol = is_float(ktypes[t]) ? (q8 ? 2e-2 : 1e-3) : (q8 ? 6e-2 : 4e-2);
                print_message("%-12s %-7s cache k %s v %s: max relative logit error %.2e (tolerance %.0e)\n", archs[a], ktypes[t],
                              sdn_kv_type_name((sdn_kv_type)kv[k][0]), sdn_kv_type_name((sdn_kv_type)kv[k][1]), worst, tol);
                if (!(worst <= tol)) fail_msg("%s %s cache %d/%d: error %.3e above %.0e", archs[a], ktypes[t], kv[k][0], kv[k][1], worst, tol);
            }
}

/* The logits of the first n of toks decoded one token at a time (1 thread) equal those of the
 * same tokens in batches of Bs[k] rows (2 threads), bit for bit; `what` names the model. */
static void check_batches_kv(sdn_model *m, const int32_t *toks, int n, const int *Bs, int nB, const char *what, int tk, int tv) {
    int V = sdn_model_cfg(m)->vocab;
    int32_t rows[64];
    for (int i = 0; i < n; i++) rows[i] = i;
    float *base = malloc((size_t)n * V * sizeof(float)), *lg = malloc((size_t)n * V * sizeof(float));
    sdn_err e = {0};
    sdn_ctx *c1 = tu_ctx_kv(m, 128, 1, 128, tk, tv);
    for (int p = 0; p < n; p++) {
        sdn_batch b = {.n = 1, .tokens = &toks[p], .logit_rows = rows, .n_logits = 1, .invariant = 1};
        assert_int_equal(sdn_forward(c1, &b, base + (size_t)p * V, &e), SDN_OK);
    }
    sdn_ctx_free(c1);
    sdn_ctx *c2 = tu_ctx_kv(m, 128, 2, 128, tk, tv);
    for (int k = 0; k < nB; k++) {
        const int B = Bs[k];
        sdn_kv_truncate(c2, 0);
        for (int p = 0; p < n; p += B) {
            int nr = n - p < B ? n - p : B;
            sdn_batch b = {.n = nr, .tokens = toks + p, .logit_rows = rows, .n_logits = nr, .invariant = 1};
            assert_int_equal(sdn_forward(c2, &b, lg + (size_t)p * V, &e), SDN_OK);
        }
        if (memcmp(base, lg, (size_t)n * V * sizeof(float)) != 0)
            fail_msg("%s, cache k %s v %s: batch size %d changes the logits bits", what, sdn_kv_type_name((sdn_kv_type)tk),
                     sdn_kv_type_name((sdn_kv_type)tv), B);
    }
    sdn_ctx_free(c2);
    free(base);
    free(lg);
}

/* With the default cache, and with every cache type when all_types. */
static void check_batches(sdn_model *m, const int32_t *toks, int n, const int *Bs, int nB, const char *what, int all_types) {
    for (int k = SDN_KV_FIRST; k < SDN_KV_TYPE_COUNT; k++)
        if (all_types || k == SDN_KV_DEFAULT) check_batches_kv(m, toks, n, Bs, nB, what, k, k);
}

/* Batch invariance: logits of every position are bit-identical whether the sequence is
 * decoded one token at a time or in batches of any size 1..64, with 1 or 2 threads. */
static void test_batch_invariance(void **state) {
    enum { N = 64 };
    int Bs[N], nB = N;
    for (int B = 1; B <= N; B++) Bs[B - 1] = B;
    /* SDN_TEST_QUICK (.ci/sanitize, .ci/aarch64: every size took most of test_forward's 12
     * minutes under ASan on a 2-core EPYC): the sizes around the kernels' row blocks; the
     * kernels' invariance at every size 1..64 is test_matmul's, whole */
    static const int Bq[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33, 64};
    if (getenv("SDN_TEST_QUICK")) {
        nB = (int)(sizeof Bq / sizeof Bq[0]);
        memcpy(Bs, Bq, sizeof Bq);
    }
    for (size_t a = 0; a < NA; a++)
        for (size_t t = 0; t < NT; t++) {
            sdn_model *m = tu_load(tu_model(archs[a], types[t], 12), NULL);
            int32_t toks[N];
            random_tokens(toks, N, sdn_model_cfg(m)->vocab, 77);
            char what[96];
            snprintf(what, sizeof what, "%s %s", archs[a], types[t]);
            check_batches(m, toks, N, Bs, nB, what, !strcmp(types[t], "F32") || !strcmp(types[t], "Q8_0") || !strcmp(types[t], "Q4_K_M"));
            sdn_model_free(m);
        }
}

/* The logits of N tokens decoded one at a time (1 thread) equal those of the same tokens in
 * batches of B rows (2 threads), bit for bit, on the path this test entry forces. */
static void test_batch_invariance_path(void **state) {
    kpath_use(state);
    enum { N = 40 };
    static const char *btypes[] = {"Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q6_K"};
    static const int Bs[] = {2, 3, 4, 5, 15, 16, 17, 33, 40};
    /* SDN_TEST_QUICK (set by .ci/aarch64 for the runs under emulation): 3 batch sizes, not 9
     * (the kernels' invariance at 1..64 rows is test_matmul's, whole) */
    static const int Bq[] = {3, 17, 40};
    const int quick = getenv("SDN_TEST_QUICK") != NULL;
    /* tiny-gemma3: its sliding window (8) is shorter than the sequence */
    static const char *models[] = {"tiny-qwen2", "tiny-gemma3"};
    /* SDN_TEST_QUICK (also .ci/sanitize, where each type takes about a minute per path): the
     * real models' block types, Q4_1 (SmolLM2) and Q4_K (Gemma 3's Q4_K_M); every type's
     * kernels are held batch-invariant by test_matmul, whole, on every path */
    static const char *qtypes[] = {"Q4_1", "Q4_K"};
    const char *const *types = quick ? qtypes : btypes;
    const size_t nb = quick ? sizeof qtypes / sizeof qtypes[0] : sizeof btypes / sizeof btypes[0];
    for (size_t t = 0; t < 2 * nb; t++) {
        sdn_model *m = tu_load(tu_model(models[t / nb], types[t % nb], 12), NULL);
        int32_t toks[N];
        random_tokens(toks, N, sdn_model_cfg(m)->vocab, 78);
        char what[96];
        snprintf(what, sizeof what, "%s %s on path %s", models[t / nb], types[t % nb], sdn_kpath_name(sdn_kpath_get()));
        if (quick) check_batches(m, toks, N, Bq, (int)(sizeof Bq / sizeof Bq[0]), what, 1);
        else check_batches(m, toks, N, Bs, (int)(sizeof Bs / sizeof Bs[0]), what, 1);
        sdn_model_free(m);
    }
}

/* The prefill-matmul setting (kernels/kernel_path.h) on every kernel path: a 90-token prefill
 * (more than SDN_INVARIANT_MAX_ROWS rows: the prefill path) under sgemm, auto and kernels is
 * within the tolerance of the reference; auto gives exactly the bits of kernels for every
 * weight type on every path (no type is left to SGEMM); kernels and sgemm differ on the
 * quantized types (the setting takes effect). With the layers' F32 layout resident (the graph
 * scheduler's G1) auto still runs every layer on the kernels: the decode step after such a
 * prefill (it reads the prefill's KV entries) has the bits it has after a prefill under auto
 * without the layout, and, for the quantized types, not those it has after one under sgemm. */
static void test_prefill_matmul(void **state) {
    kpath_use(state);
    enum { NP = 90 };
    static const char *ptypes[] = {"Q8_0", "Q4_1", "Q4_K_M", "Q5_0", "F16", "Q5_1", "Q5_K", "F32", "BF16"};
    /* SDN_TEST_QUICK: the types of the real models' layers, Q4_1 and the Q4_K_M mix */
    const size_t t0 = getenv("SDN_TEST_QUICK") ? 1 : 0, t1 = getenv("SDN_TEST_QUICK") ? 3 : sizeof ptypes / sizeof ptypes[0];
    for (size_t t = t0; t < t1; t++) {
        const char *path = tu_model("tiny-llama", ptypes[t], 13);
        sdn_model *m = tu_load(path, NULL);
        ref_model *r = ref_model_load(path);
        assert_non_null(r);
        const int V = sdn_model_cfg(m)->vocab, L = sdn_model_cfg(m)->n_layers;
        int32_t toks[NP + 1];
        random_tokens(toks, NP + 1, V, 31);
        float *ref = malloc((size_t)(NP + 1) * V * sizeof(float)), *lg[5];
        for (int p = 0; p <= NP; p++) ref_model_step(r, toks[p], ref + (size_t)p * V);
        /* sgemm, auto, kernels; then auto and sgemm with the F32 layout resident */
        static const sdn_prefill_mm modes[5] = {SDN_PREFILL_MM_SGEMM, SDN_PREFILL_MM_AUTO, SDN_PREFILL_MM_KERNELS,
                                                SDN_PREFILL_MM_AUTO, SDN_PREFILL_MM_SGEMM};
        sdn_err e = {0};
        const double tol = is_float(ptypes[t]) ? 2e-4 : 4e-2;
        for (int k = 0; k < 5; k++) {
            lg[k] = malloc((size_t)NP * V * sizeof(float));
            if (k == 3) assert_int_equal(sdn_layout_load(m, 0, L, SDN_LAYOUT_F32, NULL, &e), SDN_OK);
            sdn_prefill_mm_set(modes[k]);
            sdn_ctx *c = tu_ctx_kv(m, 256, 2, 128, SDN_KV_F32, SDN_KV_F32);
            sdn_batch b = {.n = NP, .tokens = toks, .n_logits = k < 3 ? -1 : 0};
            assert_int_equal(sdn_forward(c, &b, lg[k], &e), SDN_OK);
            int p0 = 0, np = NP;
            if (k >= 3) { /* the decode step after the prefill */
                int32_t row = 0;
                sdn_batch d = {.n = 1, .tokens = &toks[NP], .logit_rows = &row, .n_logits = 1, .invariant = 1};
                assert_int_equal(sdn_forward(c, &d, lg[k], &e), SDN_OK);
                p0 = NP;
                np = 1;
            }
            sdn_ctx_free(c);
            if (k == 4) sdn_layout_unload(m, 0, L, SDN_LAYOUT_F32);
            double worst = 0;
            for (int p = 0; p < np; p++) {
                const float *g = lg[k] + (size_t)p * V, *x = ref + (size_t)(p0 + p) * V;
                double mx = 0, diff = 0;
                for (int i = 0; i < V; i++) {
                    mx = fmax(mx, fabs(x[i]));
                    diff = fmax(diff, fabs(g[i] - x[i]));
                }
                worst = fmax(worst, diff / mx);
            }
            print_message("%-7s prefill matmul %-7s%s on path %s: max relative logit error %.2e (tolerance %.0e)\n", ptypes[t],
                          sdn_prefill_mm_name(modes[k]), k >= 3 ? " (F32 layout; the decode step after)" : "",
                          sdn_kpath_name(sdn_kpath_get()), worst, tol);
            if (!(worst <= tol)) fail_msg("%s prefill setting %d: error %.3e above %.0e", ptypes[t], k, worst, tol);
        }
        sdn_prefill_mm_set(SDN_PREFILL_MM_AUTO);
        const size_t bytes = (size_t)NP * V * sizeof(float);
        if (memcmp(lg[1], lg[2], bytes) != 0)
            fail_msg("%s: auto should give the bits of kernels on path %s", ptypes[t], sdn_kpath_name(sdn_kpath_get()));
        if (!is_float(ptypes[t]) && memcmp(lg[0], lg[2], bytes) == 0) fail_msg("%s: kernels and sgemm gave the same bits", ptypes[t]);
        /* auto keeps every layer on the kernels with the F32 layout resident (graph G1) too: the
         * decode step after the prefill is the one after a plain auto prefill */
        {
            float *plain = malloc((size_t)V * sizeof(float));
            sdn_ctx *c = tu_ctx_kv(m, 256, 2, 128, SDN_KV_F32, SDN_KV_F32);
            sdn_batch b = {.n = NP, .tokens = toks, .n_logits = 0};
            assert_int_equal(sdn_forward(c, &b, NULL, &e), SDN_OK);
            int32_t row = 0;
            sdn_batch d = {.n = 1, .tokens = &toks[NP], .logit_rows = &row, .n_logits = 1, .invariant = 1};
            assert_int_equal(sdn_forward(c, &d, plain, &e), SDN_OK);
            sdn_ctx_free(c);
            if (memcmp(lg[3], plain, (size_t)V * sizeof(float)) != 0)
                fail_msg("%s: with the F32 layout resident, auto should still run the layers on the kernels", ptypes[t]);
            if (!is_float(ptypes[t]) && memcmp(lg[3], lg[4], (size_t)V * sizeof(float)) == 0)
                fail_msg("%s: with the F32 layout resident, sgemm should run the layers on SGEMM", ptypes[t]);
            free(plain);
        }
        for (int k = 0; k < 5; k++) free(lg[k]);
        free(ref);
        ref_model_free(r);
        sdn_model_free(m);
    }
}

/* Setting names: each parses to itself; an unknown one is refused with the valid names. */
static void test_prefill_matmul_names(void **state) {
    (void)state;
    for (int k = 0; k < 3; k++) {
        sdn_prefill_mm m;
        assert_int_equal(sdn_prefill_mm_parse(sdn_prefill_mm_name((sdn_prefill_mm)k), &m, NULL), SDN_OK);
        assert_int_equal((int)m, k);
    }
    sdn_err e = {0};
    sdn_prefill_mm m;
    assert_int_equal(sdn_prefill_mm_parse("fast", &m, &e), SDN_EINVAL);
    assert_non_null(strstr(e.msg, "'fast'"));
    assert_non_null(strstr(e.msg, "auto, sgemm or kernels"));
}

/* Tree verification: a random token tree is run in one batch with the tree mask; then a
 * root-to-leaf path is kept with sdn_kv_keep and decoding continues. Logits along the
 * path and after it must equal (bit for bit) decoding prefix + path from scratch. */
static void test_tree_mask_and_kv_keep(void **state) {
    for (size_t a = 0; a < NA; a++) {
        sdn_model *m = tu_load(tu_model(archs[a], "Q8_0", 13), NULL);
        int V = sdn_model_cfg(m)->vocab;
        sdn_rng r;
        sdn_rng_seed(&r, 1000 + a);
        for (int trial = 0; trial < 20 + 2 * 6; trial++) {
            enum { MAXN = 40 };
            /* the default cache in 20 trials, then f32 and q8 in 6 each; prefixes that put the
             * tree inside the first tile, across a tile boundary and across a super-tile one */
            const int kt = trial < 20 ? SDN_KV_DEFAULT : trial < 26 ? SDN_KV_F32 : SDN_KV_Q8;
            static const int prefixes[] = {20, 60, 490, 505};
            const int P = prefixes[trial % 4];
            int32_t prefix[505];
            random_tokens(prefix, P, V, 300 + (uint64_t)trial);
            int n = 2 + (int)sdn_rng_below(&r, MAXN - 1); /* root + nodes */
            int32_t tok[MAXN], parent[MAXN], depth[MAXN], pos[MAXN], rows[MAXN];
            uint8_t mask[MAXN * MAXN];
            tok[0] = prefix[P - 1];
            parent[0] = -1;
            depth[0] = 0;
            for (int i = 1; i < n; i++) {
                parent[i] = (int)sdn_rng_below(&r, (uint64_t)i);
                depth[i] = depth[parent[i]] + 1;
                tok[i] = (int32_t)sdn_rng_below(&r, (uint64_t)V);
            }
            memset(mask, 0, sizeof mask);
            for (int i = 0; i < n; i++) {
                pos[i] = P - 1 + depth[i];
                rows[i] = i;
                for (int j = i; j >= 0; j = parent[j]) mask[i * n + j] = 1;
            }
            sdn_err e = {0};
            sdn_ctx *c = tu_ctx_kv(m, 640, 2, 512, kt, kt);
            sdn_batch pre = {.n = P - 1, .tokens = prefix, .n_logits = 0};
            assert_int_equal(sdn_forward(c, &pre, NULL, &e), SDN_OK);
            float *tl = malloc((size_t)n * V * sizeof(float));
            sdn_batch tb = {.n = n, .tokens = tok, .pos = pos, .mask = mask, .logit_rows = rows, .n_logits = n, .invariant = 1};
            assert_int_equal(sdn_forward(c, &tb, tl, &e), SDN_OK);
            /* path from the root to a random node */
            int leaf = (int)sdn_rng_below(&r, (uint64_t)n), path[MAXN], np = 0;
            for (int j = leaf; j >= 0; j = parent[j]) path[np++] = j;
            for (int i = 0; i < np / 2; i++) { int x = path[i]; path[i] = path[np - 1 - i]; path[np - 1 - i] = x; }
            assert_int_equal(sdn_kv_keep(c, P - 1, path, np, &e), SDN_OK);
            assert_int_equal(sdn_kv_len(c), P - 1 + np);
            /* continue two steps after the path */
            int32_t extra[2] = {5, 9}, row0 = 0;
            float *cont = malloc(2 * (size_t)V * sizeof(float));
            for (int k = 0; k < 2; k++) {
                sdn_batch d = {.n = 1, .tokens = &extra[k], .logit_rows = &row0, .n_logits = 1, .invariant = 1};
                assert_int_equal(sdn_forward(c, &d, cont + (size_t)k * V, &e), SDN_OK);
            }
            /* reference: the accepted sequence decoded from scratch, one token at a time */
            sdn_ctx *s = tu_ctx_kv(m, 640, 1, 512, kt, kt);
            assert_int_equal(sdn_forward(s, &pre, NULL, &e), SDN_OK);
            float *one = malloc((size_t)V * sizeof(float));
            for (int i = 0; i < np + 2; i++) {
                int32_t tk = i < np ? tok[path[i]] : extra[i - np];
                sdn_batch d = {.n = 1, .tokens = &tk, .logit_rows = &row0, .n_logits = 1, .invariant = 1};
                assert_int_equal(sdn_forward(s, &d, one, &e), SDN_OK);
                const float *got = i < np ? tl + (size_t)path[i] * V : cont + (size_t)(i - np) * V;
                if (memcmp(one, got, (size_t)V * sizeof(float)) != 0)
                    fail_msg("%s trial %d (cache %s): logits at path step %d differ from decoding from scratch", archs[a], trial,
                             sdn_kv_type_name((sdn_kv_type)kt), i);
            }
            free(one);
            free(cont);
            free(tl);
            sdn_ctx_free(s);
            sdn_ctx_free(c);
        }
        sdn_model_free(m);
    }
}

/* Chunk invariance: every position's logits are bit-identical whether the prompt is decoded
 * one token at a time, prefilled in one batch (the prefill path, more than 64 rows), in
 * chunks of any size, or after a reused prefix of any length, for each cache type and every
 * weight type the engine loads (all of them take the batch kernels on the prefill path by
 * default; only --prefill-matmul sgemm makes no such promise). 600 positions cross the
 * 512-position super-tile; tiny-gemma3's local layers have a window of 8. */
static void test_chunk_invariance(void **state) {
    enum { N = 600 };
    static const struct { const char *arch, *type; } ms[] = {
        {"tiny-llama", "Q8_0"}, {"tiny-gemma3", "Q4_K_M"}, {"tiny-qwen3", "Q4_1"}, {"tiny-llama", "F16"},
        {"tiny-gemma3", "Q5_0"}, {"tiny-llama", "Q5_1"}, {"tiny-llama", "Q5_K"}, {"tiny-llama", "F32"},
        {"tiny-qwen3", "BF16"}, {"tiny-llama", "Q4_0"}, {"tiny-llama", "Q6_K"}};
    static const int chunkings[][6] = {{N}, {256, 256, 88}, {1, 599}, {64, 64, 64, 64, 64, 280}, {100, 37, 200, 263}, {511, 2, 87}};
    /* SDN_TEST_QUICK (.ci/sanitize: under ASan each type takes about a minute): the first three,
     * the real models' weight types */
    const size_t n_ms = getenv("SDN_TEST_QUICK") ? 3 : sizeof ms / sizeof ms[0];
    for (size_t mi = 0; mi < n_ms; mi++) {
        sdn_model *m = tu_load(tu_model(ms[mi].arch, ms[mi].type, 16), NULL);
        const int V = sdn_model_cfg(m)->vocab;
        int32_t toks[N];
        random_tokens(toks, N, V, 99 + mi);
        float *ref = malloc((size_t)N * V * sizeof(float)), *lg = malloc((size_t)N * V * sizeof(float));
        sdn_err e = {0};
        for (int kt = SDN_KV_FIRST; kt < SDN_KV_TYPE_COUNT; kt++) {
            sdn_ctx *c1 = tu_ctx_kv(m, N, 1, N, kt, kt);
            int32_t row0 = 0;
            for (int p = 0; p < N; p++) {
                sdn_batch b = {.n = 1, .tokens = &toks[p], .logit_rows = &row0, .n_logits = 1, .invariant = 1};
                assert_int_equal(sdn_forward(c1, &b, ref + (size_t)p * V, &e), SDN_OK);
            }
            sdn_ctx_free(c1);
            sdn_ctx *c = tu_ctx_kv(m, N, 2, N, kt, kt);
            for (size_t ch = 0; ch < sizeof chunkings / sizeof chunkings[0]; ch++) {
                sdn_kv_truncate(c, 0);
                int p = 0;
                for (int k = 0; k < 6 && p < N; k++) {
                    sdn_batch b = {.n = chunkings[ch][k], .tokens = toks + p, .n_logits = -1};
                    assert_int_equal(sdn_forward(c, &b, lg + (size_t)p * V, &e), SDN_OK);
                    p += chunkings[ch][k];
                }
                assert_int_equal(p, N);
                for (int q = 0; q < N; q++)
                    if (memcmp(ref + (size_t)q * V, lg + (size_t)q * V, (size_t)V * sizeof(float)) != 0)
                        fail_msg("%s %s cache %s, chunking %zu: position %d's logits differ from one-token decoding", ms[mi].arch,
                                 ms[mi].type, sdn_kv_type_name((sdn_kv_type)kt), ch, q);
            }
            /* a reused prefix: keep the first r entries, prefill the rest in one batch */
            static const int reuse[] = {25, 64, 300, 512, 599};
            for (size_t k = 0; k < sizeof reuse / sizeof reuse[0]; k++) {
                sdn_kv_truncate(c, reuse[k]);
                sdn_batch b = {.n = N - reuse[k], .tokens = toks + reuse[k], .n_logits = -1};
                assert_int_equal(sdn_forward(c, &b, lg, &e), SDN_OK);
                if (memcmp(ref + (size_t)reuse[k] * V, lg, (size_t)(N - reuse[k]) * V * sizeof(float)) != 0)
                    fail_msg("%s %s cache %s: prefill after a reused prefix of %d differs", ms[mi].arch, ms[mi].type,
                             sdn_kv_type_name((sdn_kv_type)kt), reuse[k]);
            }
            sdn_ctx_free(c);
        }
        print_message("%-12s %-7s: bit-identical logits for every chunking and reused prefix, caches f16, f32, q8, bf16\n", ms[mi].arch, ms[mi].type);
        free(ref);
        free(lg);
        sdn_model_free(m);
    }
}

/* Top-k output of the forward pass vs. a brute-force softmax + sort of its full logits, on a
 * prefill batch large enough for the SGEMM path and on a decode batch. */
static void test_topk(void **state) {
    const char *path = tu_model("tiny-qwen2", "Q8_0", 15);
    sdn_model *m = tu_load(path, NULL);
    int V = sdn_model_cfg(m)->vocab, K = 7;
    enum { N = 80 };
    int32_t toks[N];
    random_tokens(toks, N, V, 21);
    float *lg = malloc((size_t)N * V * sizeof(float)), *pr = malloc((size_t)N * K * sizeof(float));
    int32_t *tk = malloc((size_t)N * K * sizeof(int32_t));
    sdn_err e = {0};
    for (int pass = 0; pass < 2; pass++) {
        int n = pass ? 12 : N, inv = pass;
        sdn_ctx *c = tu_ctx(m, 256, 2, 128);
        sdn_batch b = {.n = n, .tokens = toks, .n_logits = -1, .invariant = inv};
        assert_int_equal(sdn_forward(c, &b, lg, &e), SDN_OK);
        sdn_kv_truncate(c, 0);
        sdn_batch t = {.n = n, .tokens = toks, .n_logits = -1, .invariant = inv, .topk = K, .topk_tok = tk, .topk_prob = pr};
        assert_int_equal(sdn_forward(c, &t, NULL, &e), SDN_OK);
        for (int r = 0; r < n; r++) {
            const float *l = lg + (size_t)r * V;
            double mx = -1e30, z = 0;
            for (int i = 0; i < V; i++) mx = fmax(mx, l[i]);
            for (int i = 0; i < V; i++) z += exp(l[i] - mx);
            int used[1024] = {0};
            for (int j = 0; j < K; j++) {
                int best = -1;
                for (int i = 0; i < V; i++)
                    if (!used[i] && (best < 0 || l[i] > l[best])) best = i;
                used[best] = 1;
                assert_int_equal(tk[(size_t)r * K + j], best);
                double want = exp(l[best] - mx) / z;
                assert_true(fabs(pr[(size_t)r * K + j] - want) <= 1e-5 * want + 1e-9);
            }
        }
        sdn_ctx_free(c);
    }
    /* restricted to a candidate vocabulary: the top-k and the softmax over those ids only */
    int32_t cand[37];
    for (int i = 0; i < 37; i++) cand[i] = (int32_t)(i * 13 + 5) % V;
    {
        sdn_ctx *c = tu_ctx(m, 256, 2, 128);
        sdn_batch b = {.n = N, .tokens = toks, .n_logits = -1};
        assert_int_equal(sdn_forward(c, &b, lg, &e), SDN_OK);
        sdn_kv_truncate(c, 0);
        sdn_batch t = {.n = N, .tokens = toks, .n_logits = -1, .topk = K, .topk_tok = tk, .topk_prob = pr, .topk_vocab = cand,
                       .n_topk_vocab = 37};
        assert_int_equal(sdn_forward(c, &t, NULL, &e), SDN_OK);
        for (int r = 0; r < N; r++) {
            const float *l = lg + (size_t)r * V;
            double mx = -1e30, z = 0;
            for (int i = 0; i < 37; i++) mx = fmax(mx, l[cand[i]]);
            for (int i = 0; i < 37; i++) z += exp(l[cand[i]] - mx);
            int used[37] = {0};
            for (int j = 0; j < K; j++) {
                int best = -1;
                for (int i = 0; i < 37; i++)
                    if (!used[i] && (best < 0 || l[cand[i]] > l[cand[best]])) best = i;
                used[best] = 1;
                assert_int_equal(tk[(size_t)r * K + j], cand[best]);
                double want = exp(l[cand[best]] - mx) / z;
                /* the 37 gathered rows are one GEMM whose columns the pool splits differently from
                 * the full head's, so OpenBLAS may round their logits differently (1e-5-ish) */
                assert_true(fabs(pr[(size_t)r * K + j] - want) <= 1e-4 * want + 1e-9);
            }
        }
        sdn_ctx_free(c);
    }
    free(lg); free(pr); free(tk);
    sdn_model_free(m);
}

static void test_bad_batches(void **state) {
    sdn_model *m = tu_load(tu_model("tiny-llama", "F32", 14), NULL);
    sdn_ctx *c = tu_ctx(m, 16, 1, 128);
    sdn_err e = {0};
    int32_t t[20] = {0}, bad = 100000, row = 0;
    sdn_batch b = {.n = 1, .tokens = &bad, .n_logits = 0};
    assert_int_equal(sdn_forward(c, &b, NULL, &e), SDN_EINVAL);
    assert_non_null(strstr(e.msg, "vocabulary"));
    sdn_batch big = {.n = 20, .tokens = t, .n_logits = 0};
    sdn_err_clear(&e);
    assert_int_equal(sdn_forward(c, &big, NULL, &e), SDN_EINVAL);
    assert_non_null(strstr(e.msg, "context"));
    uint8_t mask[4] = {1, 1, 1, 1}; /* row 0 attends row 1: not allowed */
    sdn_batch mb = {.n = 2, .tokens = t, .mask = mask, .logit_rows = &row, .n_logits = 1};
    sdn_err_clear(&e);
    assert_int_equal(sdn_forward(c, &mb, NULL, &e), SDN_EINVAL);
    int32_t keep[2] = {1, 0};
    sdn_batch ok = {.n = 3, .tokens = t, .n_logits = 0};
    assert_int_equal(sdn_forward(c, &ok, NULL, &e), SDN_OK);
    sdn_err_clear(&e);
    assert_int_equal(sdn_kv_keep(c, 0, keep, 2, &e), SDN_EINVAL);
    /* the timing-only synthetic fill: refused past the context, else n entries of unknown
     * tokens that a step attends like any others (finite logits) */
    sdn_err_clear(&e);
    assert_int_equal(sdn_kv_fill_synthetic(c, 14, 1, &e), SDN_EINVAL);
    assert_non_null(strstr(e.msg, "context size"));
    assert_int_equal(sdn_kv_len(c), 3);
    assert_int_equal(sdn_kv_fill_synthetic(c, 11, 1, &e), SDN_OK);
    assert_int_equal(sdn_kv_len(c), 14);
    assert_int_equal(sdn_kv_common_prefix(c, t, 3), 3);
    int V = sdn_model_cfg(m)->vocab;
    float *lg = malloc((size_t)V * sizeof *lg);
    sdn_batch one = {.n = 1, .tokens = t, .logit_rows = &row, .n_logits = 1, .invariant = 1};
    assert_int_equal(sdn_forward(c, &one, lg, &e), SDN_OK);
    for (int i = 0; i < V; i++) assert_true(isfinite(lg[i]));
    free(lg);
    sdn_ctx_free(c);
    sdn_model_free(m);
}

int main(void) {
    /* SDN_TEST_FILTER=pattern runs only the matching tests (cmocka's wildcards); SDN_TEST_PATH_CASES
     * only the per-path cases (named "[PATH]": .ci/aarch64, where the rest repeats the x86 suite
     * at emulation cost) */
    if (getenv("SDN_TEST_FILTER")) cmocka_set_test_filter(getenv("SDN_TEST_FILTER"));
    else if (getenv("SDN_TEST_PATH_CASES")) cmocka_set_test_filter("*]");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_batches),
        cmocka_unit_test(test_topk),
        cmocka_unit_test(test_vs_reference),
        cmocka_unit_test(test_kv_types_vs_reference),
        cmocka_unit_test(test_batch_invariance),
        KPATH_TESTS(test_batch_invariance_path),
        KPATH_TESTS(test_prefill_matmul),
        cmocka_unit_test(test_prefill_matmul_names),
        cmocka_unit_test(test_tree_mask_and_kv_keep),
        cmocka_unit_test(test_chunk_invariance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
