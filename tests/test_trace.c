/* test_trace.c - the trace format: a row written and read back equals the row (every
 * field), hand-written malformed rows are refused naming file, line and field, rows a
 * foreign tool could write (minimal fields, pretty numbers) load. With ../shared: the
 * Vicuna answers imported with the Llama-2 tokenizer give the token ids the real
 * tokenizer gives for the Vicuna system prompt, output token counts equal to the counts
 * the original GPU run recorded (its new_tokens minus the end-of-sequence token), and the
 * agreement filter keeps the 71 + 72 rows the model_outputs README reports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "datasets/dataset.h"
#include "datasets/trace.h"
#include "datasets/trace_import.h"
#include "tokenizer/tokenizer.h"
#include "support/test_util.h"

static void test_round_trip(void **state) {
    (void)state;
    int32_t ctx[] = {1, 5, 9, 5, 9, 7};
    int32_t out[] = {5, 9, 7, 3};
    int32_t pt[5 * 2] = {5, 4, 9, 0, 5, 1, 9, 2, 7, 6};
    float pp[5 * 2] = {0.5f, 0.25f, 0.875f, 0.0625f, 0.33333334f, 0.1f, 1.0f, 0.0f, 0.6f, 0.3f};
    int32_t op[4 * 2] = {5, 1, 9, 8, 7, 0, 3, 2}; /* each row starts with the output token */
    sdn_trace_row r = {.id = "r\"1\n", .task = "summary", .group = "g", .model = "m.gguf", .model_fp = "0123456789abcdef",
                       .tokenizer = "tok", .vocab_size = 10, .n_ctx = 6, .n_out = 4, .ctx = ctx, .out = out, .stop = SDN_STOP_EOG,
                       .eog_token = 2, .max_new = 16, .preds_k = 2, .pred_tok = pt, .pred_prob = pp, .source_json = "{\"a\":[1,2]}",
                       .out_pred_tok = op};
    const char *path = tu_tmp("rt.trace.jsonl");
    FILE *f = fopen(path, "w");
    sdn_err err = {0};
    assert_int_equal(sdn_trace_write(f, &r, &err), SDN_OK);
    r.preds_k = 0;
    r.out_pred_tok = NULL;
    r.id = "second";
    r.stop = SDN_STOP_LENGTH;
    r.eog_token = -1;
    r.max_new = 4;
    assert_int_equal(sdn_trace_write(f, &r, &err), SDN_OK);
    fclose(f);
    sdn_trace t = {0};
    if (sdn_trace_load(&t, path, &err)) fail_msg("%s", err.msg);
    assert_int_equal(t.n, 2);
    sdn_trace_row *a = &t.rows[0];
    assert_string_equal(a->id, "r\"1\n");
    assert_string_equal(a->task, "summary");
    assert_string_equal(a->group, "g");
    assert_string_equal(a->model, "m.gguf");
    assert_string_equal(a->model_fp, "0123456789abcdef");
    assert_string_equal(a->tokenizer, "tok");
    assert_string_equal(a->source_json, "{\"a\":[1,2]}");
    assert_int_equal(a->vocab_size, 10);
    assert_int_equal(a->n_ctx, 6);
    assert_memory_equal(a->ctx, ctx, sizeof ctx);
    assert_int_equal(a->n_out, 4);
    assert_memory_equal(a->out, out, sizeof out);
    assert_int_equal(a->stop, SDN_STOP_EOG);
    assert_int_equal(a->eog_token, 2);
    assert_int_equal(a->max_new, 16);
    assert_int_equal(a->preds_k, 2);
    assert_memory_equal(a->pred_tok, pt, sizeof pt);
    for (int i = 0; i < 10; i++) assert_true(a->pred_prob[i] == pp[i]); /* floats round-trip exactly */
    assert_non_null(a->out_pred_tok);
    assert_memory_equal(a->out_pred_tok, op, sizeof op);
    assert_int_equal(sdn_trace_vocab(a), 10);
    assert_int_equal(a->line, 1);
    a = &t.rows[1];
    assert_string_equal(a->id, "second");
    assert_int_equal(a->preds_k, 0);
    assert_null(a->pred_tok);
    assert_null(a->out_pred_tok);
    assert_int_equal(a->stop, SDN_STOP_LENGTH);
    assert_int_equal(a->eog_token, -1);
    assert_int_equal(a->line, 2);
    sdn_trace_free(&t);
}

/* What another tool might write: only the required fields, ids as 3.0, a pretty array. */
static void test_foreign_row(void **state) {
    (void)state;
    const char *line = "{\"format\":\"sdnpu-trace\",\"version\":1,\"id\":\"x\",\"task\":\"rag\","
                       "\"context_tokens\":[ 1, 2.0, 3 ],\"output_tokens\":[]}";
    sdn_trace_row r;
    sdn_err err = {0};
    if (sdn_trace_parse("foreign", 1, line, strlen(line), &r, &err)) fail_msg("%s", err.msg);
    assert_int_equal(r.n_ctx, 3);
    assert_int_equal(r.ctx[1], 2);
    assert_int_equal(r.n_out, 0);
    assert_int_equal(r.stop, SDN_STOP_UNKNOWN);
    assert_null(r.group);
    assert_null(r.model_fp);
    sdn_trace_row_free(&r);
}

#define HEAD "{\"format\":\"sdnpu-trace\",\"version\":1,\"id\":\"x\",\"task\":\"t\","
static const struct {
    const char *line, *expect;
} k_bad[] = {
    {"{\"format\":\"other\",\"version\":1}", "bad.trace:3: field 'format': \"other\""},
    {HEAD "\"context_tokens\":[1,-2],\"output_tokens\":[]}", "bad.trace:3: field 'context_tokens': element 1 is not an integer"},
    {HEAD "\"context_tokens\":[1,2],\"output_tokens\":[1.5]}", "bad.trace:3: field 'output_tokens': element 0 is not an integer"},
    {HEAD "\"context_tokens\":[],\"output_tokens\":[]}", "bad.trace:3: field 'context_tokens': empty"},
    {HEAD "\"output_tokens\":[]}", "bad.trace:3: field 'context_tokens': missing"},
    {HEAD "\"vocab_size\":4,\"context_tokens\":[1,4],\"output_tokens\":[]}", "bad.trace:3: field 'context_tokens': element 1 (4) is not a token id in [0, 3]"},
    {HEAD "\"context_tokens\":[1,2,3],\"output_tokens\":[],\"preds_k\":1,\"pred_tokens\":[[1]],\"pred_probs\":[[0.5]]}",
     "bad.trace:3: field 'pred_tokens': 1 rows, expected one per context position but the last (2)"},
    {HEAD "\"context_tokens\":[1,2],\"output_tokens\":[],\"preds_k\":2,\"pred_tokens\":[[1,2]],\"pred_probs\":[[0.5]]}",
     "bad.trace:3: field 'pred_probs': position 0: expected an array of 2 numbers"},
    {HEAD "\"context_tokens\":[1,2],\"output_tokens\":[],\"preds_k\":1,\"pred_tokens\":[[1]],\"pred_probs\":[[1.5]]}",
     "bad.trace:3: field 'pred_probs': position 0, element 0 is not a probability"},
    {HEAD "\"context_tokens\":[1,2],\"output_tokens\":[],\"preds_k\":2,\"pred_tokens\":[[1,3]],\"pred_probs\":[[0.1,0.2]]}",
     "bad.trace:3: field 'pred_probs': position 0 is not sorted"},
    {HEAD "\"context_tokens\":[1,2],\"output_tokens\":[],\"preds_k\":2,\"pred_tokens\":[[3,3]],\"pred_probs\":[[0.2,0.1]]}",
     "bad.trace:3: field 'pred_tokens': position 0 lists token 3 twice"},
    {HEAD "\"context_tokens\":[1,2],\"output_tokens\":[],\"pred_tokens\":[[1]]}", "bad.trace:3: field 'preds_k': 0 or missing but predictions"},
    {HEAD "\"context_tokens\":[1,2],\"output_tokens\":[4],\"output_pred_tokens\":[[4]]}", "bad.trace:3: field 'output_pred_tokens': given but preds_k"},
    {HEAD "\"context_tokens\":[1,2],\"output_tokens\":[4,5],\"preds_k\":1,\"pred_tokens\":[[1]],\"pred_probs\":[[0.5]],"
          "\"output_pred_tokens\":[[4]]}", "bad.trace:3: field 'output_pred_tokens': expected an array of 2 arrays"},
    {HEAD "\"context_tokens\":[1,2],\"output_tokens\":[4,5],\"preds_k\":1,\"pred_tokens\":[[1]],\"pred_probs\":[[0.5]],"
          "\"output_pred_tokens\":[[4],[6]]}", "bad.trace:3: field 'output_pred_tokens': position 1 starts with 6, not the recorded output token 5"},
    {HEAD "\"context_tokens\":[1,2],\"output_tokens\":[4],\"preds_k\":2,\"pred_tokens\":[[1,2]],\"pred_probs\":[[0.5,0.25]],"
          "\"output_pred_tokens\":[[4,4]]}", "bad.trace:3: field 'output_pred_tokens': position 0 lists token 4 twice"},
    {HEAD "\"context_tokens\":[1,2],\"output_tokens\":[4],\"preds_k\":1,\"pred_tokens\":[[1]],\"pred_probs\":[[0.5]],"
          "\"output_pred_tokens\":[[-4]]}", "bad.trace:3: field 'output_pred_tokens': position 0, element 0 is not a token id"},
    {HEAD "\"context_tokens\":[1],\"output_tokens\":[4,5],\"stop\":\"length\",\"max_new_tokens\":3}",
     "bad.trace:3: field 'stop': \"length\" but 2 output tokens != max_new_tokens 3"},
    {HEAD "\"context_tokens\":[1],\"output_tokens\":[4,5],\"max_new_tokens\":1}", "bad.trace:3: field 'output_tokens': 2 tokens, more than max_new_tokens 1"},
    {HEAD "\"context_tokens\":[1],\"output_tokens\":[],\"stop\":\"maybe\"}", "bad.trace:3: field 'stop': \"maybe\""},
    {HEAD "\"context_tokens\":[1],\"output_tokens\":[],\"stop\":\"length\",\"eog_token\":2}", "bad.trace:3: field 'eog_token': given but"},
    {HEAD "\"context_tokens\":[1],\"output_tokens\":[],\"decoding\":\"sampled\"}", "bad.trace:3: field 'decoding': \"sampled\""},
    {HEAD "\"context_tokens\":[1],\"output_tokens\":[],\"model_fingerprint\":\"XYZ\"}", "bad.trace:3: field 'model_fingerprint'"},
    {"{\"format\":\"sdnpu-trace\",\"version\":1,\"task\":\"t\",\"context_tokens\":[1],\"output_tokens\":[]}", "bad.trace:3: field 'id': missing"},
    {"[1,2,3]", "bad.trace:3: expected a JSON object"},
};

static void test_malformed(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
        /* two good-looking blank lines first: the error must name line 3 */
        char buf[2048];
        snprintf(buf, sizeof buf, "\n\n%s\n", k_bad[i].line);
        const char *path = tu_tmp("bad.trace");
        assert_int_equal(tu_write_file(path, buf, strlen(buf)), 0);
        sdn_trace t = {0};
        sdn_err err = {0};
        int rc = sdn_trace_load(&t, path, &err);
        if (rc != SDN_EFORMAT || !strstr(err.msg, k_bad[i].expect))
            fail_msg("fixture %zu: rc %d, message '%s', expected '%s'", i, rc, err.msg, k_bad[i].expect);
        assert_int_equal(t.n, 0);
        sdn_trace_free(&t);
    }
    /* a newer version is "unsupported", not "malformed" */
    const char *v2 = "{\"format\":\"sdnpu-trace\",\"version\":2,\"id\":\"x\",\"task\":\"t\",\"context_tokens\":[1],\"output_tokens\":[]}";
    sdn_trace_row r;
    sdn_err err = {0};
    assert_int_equal(sdn_trace_parse("v2", 1, v2, strlen(v2), &r, &err), SDN_EUNSUP);
    assert_non_null(strstr(err.msg, "field 'version'"));
    /* an empty file is an error too */
    const char *path = tu_tmp("empty.trace");
    assert_int_equal(tu_write_file(path, "\n", 1), 0);
    sdn_trace t = {0};
    assert_int_equal(sdn_trace_load(&t, path, &err), SDN_EFORMAT);
}

/* Vicuna answers through trace-import (needs ../shared). */
static void test_import_vicuna(void **state) {
    (void)state;
    TU_REQUIRE_SHARED();
    sdn_err err = {0};
    sdn_tokenizer *tok = NULL;
    if (sdn_tokenizer_from_llama2c(tu_shared_path("models/llama2-tokenizer/tokenizer.bin"), 0, &tok, &err)) fail_msg("%s", err.msg);
    sdn_dataset qs = {0};
    if (sdn_dataset_load_file(&qs, tu_shared_path("datasets/summary/summary_specbench.jsonl"), &err) ||
        sdn_dataset_load_file(&qs, tu_shared_path("datasets/rag/rag_specbench.jsonl"), &err))
        fail_msg("%s", err.msg);
    sdn_answers a = {0}, b = {0};
    if (sdn_answers_load(&a, tu_shared_path("datasets/model_outputs/yukiki-jc__vicuna-7b-v1.3-vanilla-float16-temp-0.0.summary_rag.jsonl"), &err) ||
        sdn_answers_load(&b, tu_shared_path("datasets/model_outputs/BNukhkadiev__vicuna-7b-v1.3-vanilla-float16-temp-0.0.summary_rag.jsonl"), &err))
        fail_msg("%s", err.msg);
    const char *path = tu_tmp("vicuna.trace.jsonl");
    FILE *f = fopen(path, "w");
    sdn_import_opts o = {.tok = tok, .chat = SDN_CHAT_VICUNA, .max_new = 1024, .tokenizer_name = "llama2-tokenizer/tokenizer.bin"};
    sdn_import_stats st;
    if (sdn_trace_import(&qs, &a, &o, f, &st, &err)) fail_msg("%s", err.msg);
    fclose(f);
    assert_int_equal(st.written, 160);
    sdn_trace t = {0};
    if (sdn_trace_load(&t, path, &err)) fail_msg("%s", err.msg);
    assert_int_equal(t.n, 160);
    /* "<s> A chat between a curious user" under the Llama tokenizer (ids from the
       published Llama/Vicuna vocabulary) */
    static const int32_t head[] = {1, 319, 13563, 1546, 263, 12758, 1404};
    for (int i = 0; i < t.n; i++) assert_memory_equal(t.rows[i].ctx, head, sizeof head);
    /* every answer re-tokenizes to the length the GPU run reported (new_tokens counts </s>) */
    int same = 0;
    for (int i = 0; i < t.n; i++) {
        int j = sdn_answers_find(&a, t.rows[i].id);
        assert_true(j >= 0);
        same += t.rows[i].n_out == a.rows[j].new_tokens - 1;
        if (t.rows[i].stop == SDN_STOP_EOG) assert_int_equal(t.rows[i].eog_token, 2);
    }
    assert_int_equal(same, 160);
    sdn_trace_free(&t);
    /* agreement with the other vanilla run: 71 summaries + 72 RAG answers (README) */
    f = fopen(path, "w");
    o.agree = &b;
    if (sdn_trace_import(&qs, &a, &o, f, &st, &err)) fail_msg("%s", err.msg);
    fclose(f);
    assert_int_equal(st.written, 71 + 72);
    assert_int_equal(st.disagree, 160 - 143);
    sdn_answers_free(&a);
    sdn_answers_free(&b);
    sdn_dataset_free(&qs);
    sdn_tokenizer_free(tok);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_foreign_row),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_import_vicuna),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
