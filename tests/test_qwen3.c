/* test_qwen3.c - the qwen3 architecture against llama.cpp on a Qwen3-shaped file: no real
 * Qwen3 file is reachable here, so the test writes one with make-model (seeded random
 * weights, Q8_0) and compares with llama.cpp's logits for the same file, recorded by
 * scripts/reference/family_golden.py --family qwen3 (tests/golden/qwen3/; the header holds the
 * file's size and SHA-256, checked first: a different file would make the comparison
 * meaningless).
 *
 * In CI: the exact per-layer shapes of Qwen3-0.6B (dim 1024, 16 query / 8 KV heads of
 * head dim 128, FFN 3072, q/k RMSNorm, no QKV bias, tied 151936-token embedding) with 2 of its
 * 28 layers, 12 requests (3 per task file, the shortest) of 16 answer tokens. With
 * SDN_QWEN3_FULL=1 the same checks also run on the full Qwen3-0.6B and Qwen3-1.7B shapes
 * (golden files recorded by the same script; ~2.5 GB of files written to the temp folder, ten
 * minutes: not part of the default run). There 28 random layers amplify rounding (8-bit
 * activations in different orders): the second-ranked token agrees less often (0.6B: 87.5%),
 * so instead sdnpu and llama.cpp are both compared with the naive double-precision reference
 * on the shortest request, and sdnpu must be as close to exact as llama.cpp is.
 *
 * Checks: prompt ids equal llama.cpp's (the generated SentencePiece vocabulary, sdnpu's plain
 * rendering); teacher-forced top-1 agreement; since a random-weight model's top-1 is nearly
 * always the input token by a wide margin (tied embeddings), also the agreement on the
 * second-ranked token, which depends on every layer; the largest logit difference on llama.cpp's
 * top-8 relative to the logit scale; greedy speculative output identical to plain decoding
 * for every drafting method (on the 3 tweet requests, the shortest prompts, to stay within the
 * test's time budget; test_spec_greedy holds the identity on 750 random cases of the tiny
 * shapes, tiny-qwen3 among them). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "common/sdn_util.h"
#include "draft/methods.h"
#include "engine/forward.h"
#include "tools/make_model.h"
#include "modelfile/model.h"
#include "modelfile/model_registry.h"
#include "tokenizer/request.h"
#include "runtime/decode.h"
#include "tokenizer/tokenizer.h"
#include "support/ref_model.h"
#include "support/golden.h"
#include "support/test_util.h"

/* Required agreement: top-1 and the second-ranked token (measured: see the test output and
 * docs/results.md; 8-bit activation rounding in different orders moves near-ties only). */
#define MIN_AGREE_TOP1 0.99
#define MIN_AGREE_TOP2 0.90
/* largest |logit difference| over llama.cpp's top-8, relative to llama.cpp's top-1 logit */
#define MAX_REL_DIFF 0.02

typedef struct variant {
    const char *shape;
    int layers; /* 0: all */
    const char *golden;
} variant;

static const variant k_ci = {"qwen3-0.6b", 2, "tests/golden/qwen3/llamacpp-0.6b-l2.jsonl"};
static const variant k_full[] = {{"qwen3-0.6b", 0, "tests/golden/qwen3/llamacpp-0.6b.jsonl"},
                                 {"qwen3-1.7b", 0, "tests/golden/qwen3/llamacpp-1.7b.jsonl"}};

/* The golden file's header values for the model file. */
static void golden_file_facts(const char *golden, char *sha, size_t cap, long long *size) {
    char *text = NULL;
    size_t n;
    sdn_err e = {0};
    if (sdn_read_file(golden, &text, &n, &e)) fail_msg("%s", e.msg);
    char *nl = strchr(text, '\n');
    if (nl) *nl = 0;
    cJSON *h = cJSON_Parse(text);
    const cJSON *s = h ? cJSON_GetObjectItem(h, "model_sha256") : NULL, *z = h ? cJSON_GetObjectItem(h, "model_size") : NULL;
    if (!cJSON_IsString(s) || !cJSON_IsNumber(z)) fail_msg("%s: header has no model_sha256 / model_size", golden);
    snprintf(sha, cap, "%s", s->valuestring);
    *size = (long long)z->valuedouble;
    cJSON_Delete(h);
    free(text);
}

static sdn_model *make(const variant *v, char *path, size_t cap) {
    snprintf(path, cap, "%s", tu_tmp(v->layers ? "qwen3-golden-l.gguf" : v->shape));
    sdn_make_model_opts o = {.shape = v->shape, .out_path = path, .type = "Q8_0", .seed = 1, .n_layers = v->layers, .quiet = 1};
    sdn_err e = {0};
    if (sdn_make_model(&o, &e)) fail_msg("make-model %s: %s", v->shape, e.msg);
    char want[80], hex[65];
    long long size;
    uint64_t got;
    golden_file_facts(tu_source_path(v->golden), want, sizeof want, &size);
    if (sdn_sha256_file(path, hex, &got, &e)) fail_msg("%s", e.msg);
    if (strcmp(hex, want) || (long long)got != size)
        fail_msg("%s: make-model wrote %llu bytes, SHA-256 %s; the golden file %s was recorded on %lld bytes, %s (make-model changed: "
                 "record the golden file again with scripts/reference/family_golden.py)",
                 path, (unsigned long long)got, hex, v->golden, size, want);
    return tu_load(path, "");
}


/* On the shortest request: sdnpu (prompt on the prefill path, answer on the decode path) and
 * llama.cpp (the golden logits) each against the naive double-precision reference on the same
 * weights, over llama.cpp's top-8 tokens of every answer position. */
static void exact_three_way(sdn_model *m, const sg_golden *g) {
    const sg_request *q = NULL;
    for (int r = 0; r < g->n; r++)
        if (!q || g->req[r].n_prompt < q->n_prompt) q = &g->req[r];
    ref_model *ref = ref_model_load(sdn_model_path(m));
    assert_non_null(ref);
    sg_exact x = {0};
    sg_exact_compare(m, ref, q, q->n_top, &x);
    ref_model_free(ref);
    print_message("against exact arithmetic (%s, %d positions): sdnpu largest logit difference %.3f, second-ranked token %d agree; "
                  "llama.cpp %.3f, %d agree\n",
                  q->id, x.positions, x.sdn_diff, x.sdn_top2, x.ll_diff, x.ll_top2);
    assert_true(x.sdn_diff <= 1.5 * x.ll_diff + 0.5);
    assert_true(x.sdn_top2 >= x.ll_top2 - 1);
}

static void check_variant(const variant *v, int spec) {
    char path[1300];
    sdn_model *m = make(v, path, sizeof path);
    sg_golden *g = sg_load(tu_source_path(v->golden));
    const sdn_model_config *cfg = sdn_model_cfg(m);
    assert_int_equal(cfg->arch, SDN_ARCH_QWEN3);
    assert_int_equal(cfg->head_dim, 128);
    assert_true(cfg->has_qk_norm && !cfg->has_qkv_bias);
    /* prompt ids: sdnpu's rendering (plain: the file has no chat template) and tokenizer */
    sg_check_prompts(m, g, NULL, NULL);
    /* teacher forcing: prompt on the prefill path, answer positions on the decode path in one batch */
    for (int r = 0; r < g->n; r++) assert_true(g->req[r].n_top <= 64);
    sdn_ctx *c = tu_ctx(m, 2048, 2, 256);
    sg_path tp = {.prefill_chunk = 256, .prefill_invariant = 0, .answer_chunk = 64, .answer_invariant = 1};
    sg_score s = {0};
    sg_score_teacher_forced(c, g, 1, &tp, 0, &s);
    print_message("%s (%s layers): %d requests, %d positions: top-1 agreement %.2f%%, second-ranked token %.2f%%, largest logit "
                  "difference over llama.cpp's top-8 %.3g of its top-1 logit\n",
                  v->shape, v->layers ? "2" : "all", g->n, s.total, 100.0 * s.agree1 / s.total, 100.0 * s.agree2 / s.total, s.max_rel);
    assert_true(g->n >= 8);
    assert_true((double)s.agree1 / s.total >= MIN_AGREE_TOP1);
    if (v->layers) {
        assert_true((double)s.agree2 / s.total >= MIN_AGREE_TOP2);
        assert_true(s.max_rel <= MAX_REL_DIFF);
    } else {
        /* 28 random layers amplify rounding differences (no trained, contractive weights):
         * the second-ranked token and the logits are checked against exact arithmetic instead:
         * sdnpu must be as close to the naive double-precision reference as llama.cpp is */
        exact_three_way(m, g);
    }
    if (spec) {
        const char *methods[] = {"pld", "sam", "sam+tree", "sam+cal", "sam+reuse", "sdnpu"};
        /* the tweet requests (the shortest prompts): 7 methods over a 151936-token LM head each */
        int done = 0;
        for (int r = 0; r < g->n; r++) {
            const sg_request *q = &g->req[r];
            if (strcmp(q->task, "tweet")) continue;
            done++;
            sg_methods_identical(c, q, methods, (int)(sizeof methods / sizeof methods[0]), NULL, NULL);
        }
        print_message("every drafting method identical to plain decoding on %d requests\n", done);
        assert_true(done >= 3);
    }
    sdn_ctx_free(c);
    sg_free(g);
    sdn_model_free(m);
    remove(path);
}

static void test_qwen3_reduced(void **state) {
    (void)state;
    check_variant(&k_ci, 1);
}

static void test_qwen3_full_shapes(void **state) {
    (void)state;
    if (!getenv("SDN_QWEN3_FULL")) {
        print_message("full Qwen3-0.6B / 1.7B shapes: set SDN_QWEN3_FULL=1 (writes ~2.5 GB, a few minutes)\n");
        skip();
    }
    for (size_t i = 0; i < sizeof k_full / sizeof k_full[0]; i++) check_variant(&k_full[i], 0);
}

int main(void) {
    if (getenv("SDN_TEST_FILTER")) cmocka_set_test_filter(getenv("SDN_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen3_reduced),
        cmocka_unit_test(test_qwen3_full_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
