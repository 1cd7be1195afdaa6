/* test_smollm2_spec.c - lossless greedy speculation on the real SmolLM2-135M-Instruct: for
 * every other request of the llama.cpp golden file (24 of 48: 6 each from summary, rag, ui and
 * tweet, rendered with the model's chat template; the suite's time limit), every drafting method (pld, sam and sdnpu
 * on every one, the ablation methods sam+tree, sam+cal and sam+reuse on a third each) with the engine's default caps generates exactly the tokens of
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
#include "modelfile/model.h"
#include "runtime/decode.h"
#include "tokenizer/tokenizer.h"
#include "support/golden.h"
#include "support/test_util.h"

#define MAX_NEW 64


static void test_every_method_identical(void **state) {
    (void)state;
    const char *path;
    TU_REQUIRE_SMOLLM2(path);
    sdn_model *m = tu_load(path, "");
    sg_golden *g = sg_load(tu_source_path("tests/golden/smollm2/llamacpp.jsonl"));
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
        int32_t *base = tu_gen_method(c, "none", q->prompt_ids, q->n_prompt, MAX_NEW, &base_n, NULL);
        gen_tokens += base_n;
        for (int k = 0; k < NM; k++) {
            /* the three ablation methods (sdnpu with parts left out) take turns, a third of the
             * requests each: every method on every task, in a third less time; all of them on
             * every request of five make-model architectures in test_spec_greedy */
            if (k >= 2 && k <= 4 && (n_req - 1) % 3 != k - 2) continue;
            int got_n;
            sdn_gen_stats st;
            int32_t *got = tu_gen_method(c, methods[k], q->prompt_ids, q->n_prompt, MAX_NEW, &got_n, &st);
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
