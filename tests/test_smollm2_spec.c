/* test_smollm2_spec.c - lossless greedy speculation on the real SmolLM2-135M-Instruct: for
 * every other request of the llama.cpp golden file (24 of 48: 6 each from summary, rag, ui and
 * tweet, rendered with the model's chat template; the suite's time limit), every drafting method (pld, sam, sam+tree,
 * sam+cal, sam+reuse, sdnpu) with the engine's default caps generates exactly the tokens of
 * plain greedy decoding, stopping at <|im_end|> at the same place. The reference is the same
 * model decoded one token at a time (and test_smollm2.c ties that to llama.cpp). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "draft/methods.h"
#include "engine/forward.h"
#include "engine/model.h"
#include "runtime/decode.h"
#include "engine/tokenizer.h"
#include "support/smollm2_golden.h"
#include "support/test_util.h"

#define MAX_NEW 64

static int eog(void *ud, int32_t t) { return sdn_tokenizer_is_eog((const sdn_tokenizer *)ud, t); }

static int32_t *gen(sdn_ctx *c, const sdn_tokenizer *tk, const char *method, const int32_t *prompt, int n, int *n_out, sdn_gen_stats *st) {
    sdn_method_config mc;
    sdn_method_defaults(&mc);
    sdn_drafter d;
    sdn_err e = {0};
    if (sdn_method_create(method, &mc, &d, &e)) fail_msg("%s", e.msg);
    sdn_gen_params gp = {.max_tokens = MAX_NEW,
                         .drafter = d.ops ? &d : NULL,
                         .caps = {.max_nodes = SDN_DEFAULT_DRAFT_TOKENS, .max_depth = SDN_DEFAULT_DRAFT_TOKENS, .max_branch = SDN_DEFAULT_BRANCH},
                         .prefill_topk = sdn_method_uses_prefill_preds(method) ? 4 : 0,
                         /* methods without prefill predictions reuse the plain run's prompt KV
                          * entries (the same bits a fresh prefill computes); plain decoding and
                          * the methods with predictions prefill from scratch */
                         .reuse_kv = strcmp(method, "none") != 0};
    int32_t *out;
    gp.eog = eog, gp.eog_ud = (void *)tk;
    if (sdn_generate_tokens(c, prompt, n, &gp, &out, n_out, st, &e)) fail_msg("%s: %s", method, e.msg);
    sdn_drafter_destroy(&d);
    return out;
}

static void test_every_method_identical(void **state) {
    (void)state;
    const char *path;
    TU_REQUIRE_SMOLLM2(path);
    sdn_model *m = tu_load(path, "");
    sg_golden *g = sg_load(tu_source_path("tests/golden/smollm2/llamacpp.jsonl"));
    const sdn_tokenizer *tk = sdn_model_tokenizer(m);
    const char *methods[] = {"pld", "sam", "sam+tree", "sam+cal", "sam+reuse", "sdnpu"};
    enum { NM = sizeof methods / sizeof methods[0] };
    sdn_ctx *c = tu_ctx(m, 4096, 2, 256);
    long gen_tokens = 0, steps[NM] = {0}, toks[NM] = {0};
    int per_task[4] = {0};
    int n_req = 0;
    for (int r = 0; r < g->n; r += 2) {
        const sg_request *q = &g->req[r];
        n_req++;
        int base_n;
        int32_t *base = gen(c, tk, "none", q->prompt_ids, q->n_prompt, &base_n, NULL);
        gen_tokens += base_n;
        for (int k = 0; k < NM; k++) {
            int got_n;
            sdn_gen_stats st;
            int32_t *got = gen(c, tk, methods[k], q->prompt_ids, q->n_prompt, &got_n, &st);
            if (got_n != base_n || memcmp(got, base, sizeof(int32_t) * (size_t)base_n) != 0) {
                int i = 0;
                while (i < got_n && i < base_n && got[i] == base[i]) i++;
                fail_msg("%s, method %s: output differs from plain greedy decoding at token %d (%d vs %d tokens)", q->id, methods[k], i, got_n,
                         base_n);
            }
            steps[k] += st.steps;
            toks[k] += st.n_gen;
            free(got);
        }
        per_task[sg_task_index(q->task)]++;
        free(base);
    }
    print_message("%d requests (summary %d, rag %d, ui %d, tweet %d), %ld plain tokens: every method identical to plain decoding\n", n_req,
                  per_task[0], per_task[1], per_task[2], per_task[3], gen_tokens);
    for (int k = 0; k < NM; k++)
        print_message("  %-10s mean accepted %.2f tokens/step (default caps)\n", methods[k], steps[k] ? (double)toks[k] / steps[k] : 0.0);
    assert_true(g->n >= 40 && n_req >= 20);
    for (int k = 0; k < 4; k++) assert_true(per_task[k] >= 5);
    sdn_ctx_free(c);
    sg_free(g);
    sdn_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_method_identical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
