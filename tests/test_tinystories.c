/* test_tinystories.c - the real TinyStories 260K model (llama2.c checkpoint) against outputs
 * of other programs in ../shared: llama2.c's run.c greedy output for "Once upon a time"
 * (token ids and text), its greedy output with no prompt (text), and an independent Python
 * forward pass's 256 greedy tokens from BOS. Token-for-token identity is required, with 1
 * and 2 threads, and the decoded text must equal run.c's printed text. */
#include <cjson/cJSON.h>
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
#include "modelfile/model.h"
#include "tokenizer/request.h"
#include "runtime/decode.h"
#include "tokenizer/tokenizer.h"
#include "support/test_util.h"


static int eog(void *ud, int32_t t) {
    const sdn_tokenizer *tk = ud;
    return sdn_tokenizer_is_eog(tk, t) || t == sdn_tokenizer_bos(tk);
}

static int32_t *gen(sdn_model *m, const int32_t *prompt, int n_prompt, int max, int threads, int *n_out) {
    sdn_ctx *c;
    sdn_err e = {0};
    sdn_ctx_params cp = {.n_ctx = 512, .n_threads = threads};
    if (sdn_ctx_new(m, &cp, &c, &e)) fail_msg("%s", e.msg);
    sdn_gen_params gp = {.max_tokens = max};
    int32_t *out;
    gp.eog = eog, gp.eog_ud = sdn_model_tokenizer(m);
    if (sdn_generate_tokens(c, prompt, n_prompt, &gp, &out, n_out, NULL, &e)) fail_msg("%s", e.msg);
    sdn_ctx_free(c);
    return out;
}

static int read_ids_line(FILE *f, int32_t *ids, int cap) {
    char line[16384];
    do {
        if (!fgets(line, sizeof line, f)) return -1;
    } while (line[0] == '#');
    int n = 0;
    for (char *t = strtok(line, " \n"); t && n < cap; t = strtok(NULL, " \n")) ids[n++] = (int32_t)atoi(t);
    return n;
}

static char *read_text(const char *path) {
    char *d;
    size_t n;
    sdn_err e = {0};
    if (sdn_read_file(path, &d, &n, &e)) fail_msg("%s", e.msg);
    return d;
}

static void test_golden_prompt(void **state) {
    TU_REQUIRE_SHARED();
    sdn_model *m = tu_load_stories();
    FILE *f = fopen(tu_shared_path("golden/stories260K/stories260K_greedy.ids"), "r");
    assert_non_null(f);
    int32_t want_prompt[64], want[1024];
    int np = read_ids_line(f, want_prompt, 64), nw = read_ids_line(f, want, 1024);
    fclose(f);
    assert_int_equal(np, 5);
    assert_int_equal(nw, 252);
    /* the prompt through the request path (raw text for a model without a chat template) */
    sdn_request rq = {.prompt = "Once upon a time"};
    int32_t *ids;
    int n;
    sdn_err e = {0};
    assert_int_equal(sdn_request_tokens(m, &rq, &ids, &n, NULL, &e), SDN_OK);
    assert_int_equal(n, np);
    assert_memory_equal(ids, want_prompt, sizeof(int32_t) * (size_t)np);
    for (int threads = 1; threads <= 2; threads++) {
        int ng;
        int32_t *g = gen(m, ids, n, 256 - np + 1, threads, &ng);
        assert_int_equal(ng, nw);
        for (int i = 0; i < nw; i++)
            if (g[i] != want[i]) fail_msg("threads %d: token %d is %d, run.c produced %d", threads, i, g[i], want[i]);
        /* decoded text = run.c's printed text (prompt + continuation) */
        int32_t *all = malloc(sizeof(int32_t) * (size_t)(n + ng));
        memcpy(all, ids, sizeof(int32_t) * (size_t)n);
        memcpy(all + n, g, sizeof(int32_t) * (size_t)ng);
        char *text;
        assert_int_equal(sdn_detokenize(sdn_model_tokenizer(m), all, n + ng, &text, &e), SDN_OK);
        char *want_text = read_text(tu_shared_path("golden/stories260K/stories260K_greedy.txt"));
        size_t wl = strlen(want_text);
        while (wl && want_text[wl - 1] == '\n') want_text[--wl] = 0;
        assert_string_equal(text, want_text);
        free(want_text);
        free(text);
        free(all);
        free(g);
    }
    free(ids);
    sdn_model_free(m);
}

static void test_golden_from_bos(void **state) {
    TU_REQUIRE_SHARED();
    sdn_model *m = tu_load_stories();
    char *js = read_text(tu_shared_path("models/stories260K/greedy_from_bos_256.json"));
    cJSON *j = cJSON_Parse(js);
    assert_non_null(j);
    cJSON *arr = cJSON_GetObjectItem(j, "generated_token_ids");
    int nw = cJSON_GetArraySize(arr);
    assert_int_equal(nw, 256);
    int32_t bos = 1;
    int ng;
    int32_t *g = gen(m, &bos, 1, nw, 2, &ng);
    assert_int_equal(ng, nw);
    for (int i = 0; i < nw; i++) assert_int_equal(g[i], cJSON_GetArrayItem(arr, i)->valueint);
    /* run.c with no prompt (-n 256) prints the 256 tokens generated after BOS */
    char *want = read_text(tu_shared_path("golden/stories260K/stories260K_greedy_noprompt.txt"));
    int32_t all[257];
    all[0] = 1;
    memcpy(all + 1, g, sizeof(int32_t) * 256);
    char *text;
    sdn_err e = {0};
    assert_int_equal(sdn_detokenize(sdn_model_tokenizer(m), all, 257, &text, &e), SDN_OK);
    size_t wl = strlen(want);
    while (wl && want[wl - 1] == '\n') want[--wl] = 0;
    assert_string_equal(text, want);
    free(text);
    free(want);
    free(g);
    cJSON_Delete(j);
    free(js);
    sdn_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_prompt),
        cmocka_unit_test(test_golden_from_bos),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
