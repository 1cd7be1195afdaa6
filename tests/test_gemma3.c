/* test_gemma3.c - the real Gemma 3 270M (Q4_K_M GGUF, base model, pulled into the model cache
 * as `gemma-3-270m`) against llama.cpp, through the golden file recorded by
 * scripts/reference/family_golden.py --family gemma3 (tests/golden/gemma3/llamacpp.jsonl; the
 * header names the llama-cpp-python version and build flags). For 40 requests, the 10 shortest
 * of each task file (summary, rag, ui, tweet), rendered with Gemma 3's chat template:
 *
 *   - prompt: sdnpu's rendering (--chat-template gemma) and tokenization equal llama.cpp's
 *     (Jinja rendering of the template, llama.cpp's SentencePiece tokenizer), text and ids;
 *     the chat cases (system prompt folded into the first user turn, multi-turn) too;
 *   - teacher forcing: fed prompt + llama.cpp's greedy answer, sdnpu's top-1 agrees with
 *     llama.cpp's on >= MIN_AGREE of the answer positions (prompt on the prefill path, answer
 *     on the batch-invariant decode path, as generation runs); the largest logit difference over
 *     llama.cpp's top-8 tokens is printed; every position where the two top-1 tokens differ
 *     is a near-tie of llama.cpp's own logits. That also covers greedy decoding: sdnpu's greedy
 *     answer follows llama.cpp's up to the first such position (where it takes the other side
 *     of the near-tie), so greedy answers are not generated again here (it would double the
 *     test's time);
 *   - speculation: greedy speculative output equals plain greedy decoding for every drafting
 *     method (test_every_method_identical, on the first request of each task: one rag prompt
 *     is longer than the 512-position sliding window).
 * SDN_TEST_FILTER=pattern runs only the matching tests. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "draft/methods.h"
#include "tokenizer/chat_template.h"
#include "engine/forward.h"
#include "modelfile/model.h"
#include "tokenizer/request.h"
#include "runtime/decode.h"
#include "tokenizer/tokenizer.h"
#include "support/golden.h"
#include "support/test_util.h"

/* Teacher-forced top-1 agreement required: the 99%. Measured 955 / 960 = 99.48% (AMD
 * EPYC, AVX-512 path, 2 threads, prefill matmuls `auto`: Q4_K / Q6_K on the int8 kernels,
 * whose bits are the same on every path, Q5_0 on SGEMM); the 5 disagreements are near-ties
 * (llama.cpp margins 0.005-0.32). With every prefill matmul on SGEMM: 957 / 960. Unlike
 * SmolLM2 (97.5%, bounded by llama.cpp's own batched-vs-one-token noise), Gemma's answers here
 * are mostly confident continuations, so 99% holds with a margin of 4 positions for
 * OpenBLAS prefill differences between CPUs. */
#define MIN_AGREE 0.99
/* A disagreement must be a near-tie of llama.cpp's own logits (as for SmolLM2: both engines
 * are up to about a logit away from exact arithmetic). */
#define TIE_TOL 1.0f
#define SPEC_REQUESTS 4 /* 1 per task: the speculative identity within the time budget (7 methods x 24 tokens
                            over a 262k-token LM head; test_spec_greedy holds the identity on 750 random cases) */

static sdn_model *g_model;
static sg_golden *g_gold;

static int teardown(void **state) {
    (void)state;
    if (g_model) sdn_model_free(g_model);
    sg_free(g_gold);
    return 0;
}

#define REQUIRE()                                                                                  \
    do {                                                                                           \
        const char *path_;                                                                         \
        TU_REQUIRE_GEMMA3(path_);                                                                  \
        if (!g_model) {                                                                            \
            g_model = tu_load(path_, "");                                                          \
            g_gold = sg_load(tu_source_path("tests/golden/gemma3/llamacpp.jsonl"));                \
        }                                                                                          \
    } while (0)


static void test_model_and_prompts(void **state) {
    (void)state;
    REQUIRE();
    const sdn_model_config *c = sdn_model_cfg(g_model);
    assert_int_equal(c->arch, SDN_ARCH_GEMMA3);
    assert_int_equal(c->n_layers, 18);
    assert_int_equal(c->head_dim, 256);
    assert_int_equal(c->n_swa, 512);
    for (int l = 0; l < c->n_layers; l++) assert_int_equal(sdn_layer_is_swa(c, l), l % 6 != 5);
    int tasks[4];
    sg_check_prompts(g_model, g_gold, "gemma", tasks);
    print_message("prompt ids identical to llama.cpp's for %d requests (summary %d, rag %d, ui %d, tweet %d)\n", g_gold->n, tasks[0], tasks[1],
                  tasks[2], tasks[3]);
    assert_true(g_gold->n >= 40);
    for (int k = 0; k < 4; k++) assert_true(tasks[k] >= 10);
    /* chat cases: system prompt folded into the first turn, multi-turn, trimmed content */
    const sdn_tokenizer *tk = sdn_model_tokenizer(g_model);
    sdn_chat_template ct;
    sdn_chat_template_init(&ct, SDN_CHAT_GEMMA, NULL);
    sg_check_chats(g_model, g_gold, &ct);
    assert_true(g_gold->n_chat >= 3);
    /* the turn markers are single control tokens, <end_of_turn> ends generation */
    int32_t *ids;
    int n;
    sdn_err e = {0};
    assert_int_equal(sdn_tokenize(tk, "<start_of_turn><end_of_turn>", 28, 0, 1, &ids, &n, &e), SDN_OK);
    assert_int_equal(n, 2);
    assert_true(sdn_tokenizer_is_eog(tk, ids[1]));
    assert_false(sdn_tokenizer_is_eog(tk, ids[0]));
    free(ids);
    print_message("%d chat cases render and tokenize as llama.cpp's rendering of the Gemma template\n", g_gold->n_chat);
}

static void test_teacher_forced(void **state) {
    (void)state;
    REQUIRE();
    sdn_ctx *c = tu_ctx(g_model, 2048, 2, 256);
    sg_path path = {.prefill_chunk = 256, .prefill_invariant = 0, .answer_chunk = 32, .answer_invariant = 1};
    sg_score s = {0};
    sg_score_teacher_forced(c, g_gold, 1, &path, TIE_TOL, &s);
    sdn_ctx_free(c);
    double rate = s.total ? (double)s.agree1 / s.total : 0;
    print_message("teacher-forced top-1 agreement with llama.cpp (prompt on the prefill path, answer on the decode path): %d / %d = %.2f%%; "
                  "largest logit difference over llama.cpp's top-8: %.4f (%s)\n",
                  s.agree1, s.total, 100 * rate, s.max_diff, s.worst_id);
    print_message("every disagreement is a near-tie of llama.cpp's logits (largest margin %.4f, tolerance %.2f)\n", s.worst_margin, TIE_TOL);
    assert_true(s.total >= 40 * 16);
    assert_true(rate >= MIN_AGREE);
    assert_int_equal(s.not_ties, 0);
}

/* Greedy speculative output identical to plain decoding for every drafting method, on the
 * first request of each task (the sliding window of 512 is crossed by the rag prompt). */
static void test_every_method_identical(void **state) {
    (void)state;
    REQUIRE();
    const char *methods[] = {"pld", "sam", "sam+tree", "sam+cal", "sam+reuse", "sdnpu"};
    enum { NM = sizeof methods / sizeof methods[0] };
    sdn_ctx *c = tu_ctx(g_model, 2048, 2, 256);
    long steps[NM] = {0}, toks[NM] = {0}, plain = 0;
    int per_task[4] = {0}, done = 0, crossed = 0;
    for (int r = 0; r < g_gold->n; r++) {
        const sg_request *q = &g_gold->req[r];
        int t = sg_task_index(q->task);
        if (per_task[t] >= SPEC_REQUESTS / 4) continue;
        per_task[t]++;
        done++;
        int base_n = sg_methods_identical(c, q, methods, NM, steps, toks);
        plain += base_n;
        crossed += q->n_prompt + base_n > sdn_model_cfg(g_model)->n_swa;
    }
    print_message("%d requests (%d longer than the sliding window), %ld plain tokens: every method identical to plain decoding\n", done, crossed,
                  plain);
    for (int k = 0; k < NM; k++)
        print_message("  %-10s mean accepted %.2f tokens/step (default caps)\n", methods[k], steps[k] ? (double)toks[k] / steps[k] : 0.0);
    sdn_ctx_free(c);
    assert_int_equal(done, SPEC_REQUESTS);
    assert_true(crossed > 0);
}

int main(void) {
    if (getenv("SDN_TEST_FILTER")) cmocka_set_test_filter(getenv("SDN_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_and_prompts),
        cmocka_unit_test(test_teacher_forced),
        cmocka_unit_test(test_every_method_identical),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
