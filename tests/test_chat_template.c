/* test_chat_template.c - every chat template against the exact rendering of a two-turn
 * conversation written out by hand from the template's definition (Qwen2.5's ChatML, Meta's
 * Llama 3.1 and 3.0 and Llama-2-chat templates, FastChat's vicuna_v1.1, Google's Gemma 3
 * template, sdnpu's plain format); request rendering (documents + question); detection from template sources;
 * and the tokens of rendered text (control tokens parsed, exactly one BOS). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tokenizer/chat_template.h"
#include "modelfile/gguf.h"
#include "tokenizer/tokenizer.h"
#include "support/test_util.h"

static const sdn_chat_msg k_conv[] = {
    {"system", "You are a helpful assistant."},
    {"user", "What is the capital of France?"},
    {"assistant", "Paris."},
    {"user", "And of Germany?"},
};

static void expect_render(sdn_chat_kind kind, const sdn_chat_msg *m, int n, int gen, const char *want) {
    char *out;
    sdn_err err = {0};
    if (sdn_chat_render(kind, m, n, gen, &out, &err)) fail_msg("%s", err.msg);
    if (strcmp(out, want)) print_message("kind %s rendered:\n[%s]\nexpected:\n[%s]\n", sdn_chat_kind_name(kind), out, want);
    assert_string_equal(out, want);
    free(out);
}

static void test_chatml(void **s) {
    (void)s;
    expect_render(SDN_CHAT_CHATML, k_conv, 4, 1,
                  "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                  "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                  "<|im_start|>assistant\nParis.<|im_end|>\n"
                  "<|im_start|>user\nAnd of Germany?<|im_end|>\n"
                  "<|im_start|>assistant\n");
    /* no system message: Qwen2.5's default system prompt */
    expect_render(SDN_CHAT_CHATML, k_conv + 1, 3, 0,
                  "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
                  "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                  "<|im_start|>assistant\nParis.<|im_end|>\n"
                  "<|im_start|>user\nAnd of Germany?<|im_end|>\n");
}

/* Gemma 3's template: <bos> as text, the system message folded into the first user turn,
 * "model" for the assistant, content trimmed, roles alternating. */
static void test_gemma(void **s) {
    (void)s;
    expect_render(SDN_CHAT_GEMMA, k_conv, 4, 1,
                  "<bos><start_of_turn>user\nYou are a helpful assistant.\n\nWhat is the capital of France?<end_of_turn>\n"
                  "<start_of_turn>model\nParis.<end_of_turn>\n"
                  "<start_of_turn>user\nAnd of Germany?<end_of_turn>\n"
                  "<start_of_turn>model\n");
    const sdn_chat_msg padded[] = {{"user", "  Hi there \n"}, {"assistant", "\nHello. "}};
    expect_render(SDN_CHAT_GEMMA, padded, 2, 0, "<bos><start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n");
    char *out = NULL;
    sdn_err err = {0};
    const sdn_chat_msg bad[] = {{"user", "a"}, {"user", "b"}};
    assert_int_equal(sdn_chat_render(SDN_CHAT_GEMMA, bad, 2, 1, &out, &err), SDN_EINVAL);
    assert_non_null(strstr(err.msg, "alternate"));
    const char *docs[] = {"Doc."};
    assert_int_equal(sdn_chat_render_request(SDN_CHAT_GEMMA, NULL, docs, 1, "Summarize.", &out, &err), 0);
    assert_string_equal(out, "<bos><start_of_turn>user\nDocument:\nDoc.\n\nSummarize.<end_of_turn>\n<start_of_turn>model\n");
    free(out);
    assert_true(sdn_chat_writes_bos(SDN_CHAT_GEMMA));
    assert_int_equal(sdn_chat_detect("{{ '<start_of_turn>' + role + '\\n' }}"), SDN_CHAT_GEMMA);
}

static void test_llama3(void **s) {
    (void)s;
    expect_render(SDN_CHAT_LLAMA3, k_conv, 4, 1,
                  "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                  "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
                  "You are a helpful assistant.<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nWhat is the capital of France?<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\nParis.<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nAnd of Germany?<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n");
    /* 3.1+ always has the dated system turn; contents are trimmed */
    const sdn_chat_msg padded[] = {{"user", "  Hi there \n"}};
    expect_render(SDN_CHAT_LLAMA3, padded, 1, 1,
                  "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                  "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n");
    /* Llama 3.0's template: no dated header, no system turn unless given */
    const char *tmpl30 =
        "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + "
        "'<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content "
        "%}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
    sdn_chat_template ct;
    sdn_chat_template_init(&ct, SDN_CHAT_AUTO, tmpl30);
    assert_int_equal(ct.kind, SDN_CHAT_LLAMA3);
    assert_int_equal(ct.llama3_dated, 0);
    char *out;
    sdn_err err = {0};
    assert_int_equal(sdn_chat_template_render(&ct, k_conv + 1, 1, 1, &out, &err), 0);
    assert_string_equal(out, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat is the capital of France?<|eot_id|>"
                             "<|start_header_id|>assistant<|end_header_id|>\n\n");
    free(out);
}

static void test_llama2(void **s) {
    (void)s;
    /* Meta's Llama-2-chat template: generation starts right after " [/INST]" */
    expect_render(SDN_CHAT_LLAMA2, k_conv, 4, 1,
                  "<s>[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nWhat is the capital of France? [/INST]"
                  " Paris. </s><s>[INST] And of Germany? [/INST]");
    expect_render(SDN_CHAT_LLAMA2, k_conv + 1, 1, 1, "<s>[INST] What is the capital of France? [/INST]");
    /* roles must alternate */
    const sdn_chat_msg bad[] = {{"user", "a"}, {"user", "b"}};
    char *out;
    sdn_err err = {0};
    assert_int_equal(sdn_chat_render(SDN_CHAT_LLAMA2, bad, 2, 1, &out, &err), SDN_EINVAL);
    assert_non_null(strstr(err.msg, "alternate"));
}

static void test_vicuna(void **s) {
    (void)s;
    expect_render(SDN_CHAT_VICUNA, k_conv, 4, 1,
                  "You are a helpful assistant. USER: What is the capital of France? ASSISTANT: Paris.</s>USER: And of Germany? ASSISTANT:");
    expect_render(SDN_CHAT_VICUNA, k_conv + 1, 1, 1,
                  "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, detailed, and polite "
                  "answers to the user's questions. USER: What is the capital of France? ASSISTANT:");
    const sdn_chat_msg bad[] = {{"tool", "x"}};
    char *out;
    sdn_err err = {0};
    assert_int_equal(sdn_chat_render(SDN_CHAT_VICUNA, bad, 1, 1, &out, &err), SDN_EINVAL);
    assert_non_null(strstr(err.msg, "message 0"));
}

static void test_plain(void **s) {
    (void)s;
    expect_render(SDN_CHAT_PLAIN, k_conv, 4, 1,
                  "You are a helpful assistant.\n\nUser: What is the capital of France?\nAssistant: Paris.\nUser: And of Germany?\nAssistant:");
    expect_render(SDN_CHAT_AUTO, k_conv + 1, 1, 0, "User: What is the capital of France?\n");
}

static void test_request(void **s) {
    (void)s;
    const char *docs[] = {"First doc.", "Second doc."};
    char *out;
    sdn_err err = {0};
    assert_int_equal(sdn_chat_render_request(SDN_CHAT_CHATML, NULL, docs, 2, "Summarize.", &out, &err), 0);
    assert_string_equal(out, "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
                             "<|im_start|>user\nDocument 1:\nFirst doc.\n\nDocument 2:\nSecond doc.\n\nSummarize.<|im_end|>\n"
                             "<|im_start|>assistant\n");
    free(out);
    assert_int_equal(sdn_chat_render_request(SDN_CHAT_LLAMA3, "Be brief.", docs, 1, "Who?", &out, &err), 0);
    assert_string_equal(out, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                             "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nBe brief.<|eot_id|>"
                             "<|start_header_id|>user<|end_header_id|>\n\nDocument:\nFirst doc.\n\nWho?<|eot_id|>"
                             "<|start_header_id|>assistant<|end_header_id|>\n\n");
    free(out);
    assert_int_equal(sdn_chat_render_request(SDN_CHAT_LLAMA2, "Be brief.", docs, 1, "Who?", &out, &err), 0);
    assert_string_equal(out, "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nDocument:\nFirst doc.\n\nWho? [/INST]");
    free(out);
    assert_int_equal(sdn_chat_render_request(SDN_CHAT_VICUNA, NULL, NULL, 0, "Hi?", &out, &err), 0);
    assert_string_equal(out,
                        "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, detailed, and polite "
                        "answers to the user's questions. USER: Hi? ASSISTANT:");
    free(out);
    assert_int_equal(sdn_chat_render_request(SDN_CHAT_PLAIN, NULL, docs, 2, NULL, &out, &err), 0);
    assert_string_equal(out, "User: Document 1:\nFirst doc.\n\nDocument 2:\nSecond doc.\nAssistant:");
    free(out);
}

static void test_detect_and_names(void **s) {
    (void)s;
    assert_int_equal(sdn_chat_detect(NULL), SDN_CHAT_PLAIN);
    assert_int_equal(sdn_chat_detect("{{ messages }}"), SDN_CHAT_PLAIN);
    assert_int_equal(sdn_chat_detect("{{'<|im_start|>' + message['role'] }}"), SDN_CHAT_CHATML);
    assert_int_equal(sdn_chat_detect("{{ '<|start_header_id|>' + role + '<|end_header_id|>' }}"), SDN_CHAT_LLAMA3);
    assert_int_equal(sdn_chat_detect("{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"), SDN_CHAT_LLAMA2);
    assert_int_equal(sdn_chat_detect("{{ 'USER: ' + m }}{{ 'ASSISTANT: ' + a }}"), SDN_CHAT_VICUNA);
    assert_int_equal(sdn_chat_detect("llama2"), SDN_CHAT_LLAMA2);
    const char *names[] = {"auto", "chatml", "llama3", "llama2", "vicuna", "plain", "gemma"};
    for (int k = 0; k < 7; k++) {
        sdn_chat_kind kind;
        assert_int_equal(sdn_chat_kind_from_name(names[k], &kind), 0);
        assert_int_equal((int)kind, k);
        assert_string_equal(sdn_chat_kind_name(kind), names[k]);
    }
    sdn_chat_kind kind;
    assert_int_equal(sdn_chat_kind_from_name("jinja", &kind), SDN_EINVAL);
    assert_true(sdn_chat_writes_bos(SDN_CHAT_LLAMA3) && sdn_chat_writes_bos(SDN_CHAT_LLAMA2));
    assert_false(sdn_chat_writes_bos(SDN_CHAT_CHATML) || sdn_chat_writes_bos(SDN_CHAT_VICUNA) || sdn_chat_writes_bos(SDN_CHAT_PLAIN));

    /* a ChatML template with its own default system literal (SmolLM2 style) */
    const char *smol = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou "
                       "are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + "
                       "message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}";
    sdn_chat_template ct;
    sdn_chat_template_init(&ct, SDN_CHAT_AUTO, smol);
    assert_int_equal(ct.kind, SDN_CHAT_CHATML);
    assert_string_equal(ct.default_system, "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
    /* a plain ChatML template without a default: no system turn */
    sdn_chat_template_init(&ct, SDN_CHAT_AUTO, "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n'}}");
    assert_string_equal(ct.default_system, "");
    /* forcing a family ignores a template of another family */
    sdn_chat_template_init(&ct, SDN_CHAT_LLAMA2, smol);
    assert_int_equal(ct.kind, SDN_CHAT_LLAMA2);
    assert_string_equal(ct.default_system, "");
}

static int count(const int32_t *v, int n, int32_t x) {
    int c = 0;
    for (int i = 0; i < n; i++) c += v[i] == x;
    return c;
}

/* The models' own templates: detection and defaults from the GGUF, then tokens. */
static void test_real_templates(void **s) {
    (void)s;
    TU_REQUIRE_SHARED();
    sdn_err err = {0};
    sdn_gguf *g;
    sdn_tokenizer *t;
    char *out;
    int32_t *ids;
    int n;

    /* Qwen2.5 */
    if (sdn_gguf_open(tu_shared_path("golden/tokenizer/ggml-vocab-qwen2.5.gguf"), &g, &err) || sdn_tokenizer_from_gguf(g, &t, &err)) fail_msg("%s", err.msg);
    sdn_chat_template ct;
    sdn_chat_template_init(&ct, SDN_CHAT_AUTO, sdn_tokenizer_chat_template(t));
    assert_int_equal(ct.kind, SDN_CHAT_CHATML);
    assert_string_equal(ct.default_system, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
    assert_int_equal(sdn_chat_template_render(&ct, k_conv + 1, 1, 1, &out, &err), 0);
    assert_int_equal(sdn_chat_tokenize(t, out, &ids, &n, &err), 0);
    /* <|im_start|> system \n ... <|im_end|> \n <|im_start|> user \n ... */
    const int32_t head[] = {151644, 8948, 198};
    assert_memory_equal(ids, head, sizeof head);
    assert_int_equal(count(ids, n, 151644), 3);
    assert_int_equal(count(ids, n, 151645), 2);
    const int32_t tail[] = {151644, 77091, 198}; /* <|im_start|>assistant\n */
    assert_memory_equal(ids + n - 3, tail, sizeof tail);
    free(ids);
    free(out);
    sdn_tokenizer_free(t);
    sdn_gguf_close(g);

    /* Llama 3.2: the template writes <|begin_of_text|>; add_bos must not double it */
    if (sdn_gguf_open(tu_shared_path("golden/tokenizer/ggml-vocab-llama3.2.gguf"), &g, &err) || sdn_tokenizer_from_gguf(g, &t, &err)) fail_msg("%s", err.msg);
    assert_int_equal(sdn_tokenizer_add_bos(t), 1);
    sdn_chat_template_init(&ct, SDN_CHAT_AUTO, sdn_tokenizer_chat_template(t));
    assert_int_equal(ct.kind, SDN_CHAT_LLAMA3);
    assert_int_equal(ct.llama3_dated, 1);
    assert_int_equal(sdn_chat_template_render(&ct, k_conv, 4, 1, &out, &err), 0);
    assert_int_equal(sdn_chat_tokenize(t, out, &ids, &n, &err), 0);
    const int32_t lhead[] = {128000, 128006, 9125, 128007, 271}; /* BOS <|start_header_id|> system <|end_header_id|> \n\n */
    assert_memory_equal(ids, lhead, sizeof lhead);
    assert_int_equal(count(ids, n, 128000), 1);
    assert_int_equal(count(ids, n, 128009), 4);
    const int32_t ltail[] = {128006, 78191, 128007, 271}; /* <|start_header_id|>assistant<|end_header_id|>\n\n */
    assert_memory_equal(ids + n - 4, ltail, sizeof ltail);
    free(ids);
    free(out);
    sdn_tokenizer_free(t);
    sdn_gguf_close(g);

    /* Llama 2 (SentencePiece): <s> written per turn, one BOS at the start */
    if (sdn_gguf_open(tu_shared_path("golden/tokenizer/ggml-vocab-llama-spm.gguf"), &g, &err) || sdn_tokenizer_from_gguf(g, &t, &err)) fail_msg("%s", err.msg);
    assert_int_equal(sdn_chat_render(SDN_CHAT_LLAMA2, k_conv, 4, 1, &out, &err), 0);
    assert_int_equal(sdn_chat_tokenize(t, out, &ids, &n, &err), 0);
    assert_int_equal(ids[0], 1);
    assert_int_not_equal(ids[1], 1);
    assert_int_equal(count(ids, n, 1), 2);
    assert_int_equal(count(ids, n, 2), 1);
    char *dec;
    assert_int_equal(sdn_detokenize(t, ids, n, &dec, &err), 0);
    /* control tokens are not text; "[INST]" after <s> gets SentencePiece's space prefix */
    assert_string_equal(dec, "[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nWhat is the capital of France? [/INST] Paris.  [INST] And of Germany? [/INST]");
    free(dec);
    free(ids);
    free(out);
    sdn_tokenizer_free(t);
    sdn_gguf_close(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chatml),
        cmocka_unit_test(test_gemma),  cmocka_unit_test(test_llama3),           cmocka_unit_test(test_llama2),
        cmocka_unit_test(test_vicuna),  cmocka_unit_test(test_plain),            cmocka_unit_test(test_request),
        cmocka_unit_test(test_detect_and_names), cmocka_unit_test(test_real_templates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
