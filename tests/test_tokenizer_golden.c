/* test_tokenizer_golden.c - the tokenizers against tokenizations made by other programs
 * (../shared/golden): llama.cpp's test-tokenizer-0 vocabularies (.inp/.out), Llama 3.2 and
 * Qwen2.5 case files, SentencePiece's own Llama-2 tokenizations (through the llama2.c
 * tokenizer.bin and through the GGUF vocabulary), and the stories260K tokenizer against
 * llama2.c's recorded prompt, a naive re-implementation of llama2.c's encoder, and the
 * independently decoded greedy output. Every case must match exactly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "common/sdn_util.h"
#include "modelfile/gguf.h"
#include "tokenizer/tokenizer.h"
#include "support/test_util.h"

static sdn_tokenizer *open_gguf_tok(const char *rel, sdn_gguf **g) {
    sdn_err err = {0};
    sdn_tokenizer *t = NULL;
    if (sdn_gguf_open(tu_shared_path(rel), g, &err) || sdn_tokenizer_from_gguf(*g, &t, &err)) fail_msg("%s: %s", rel, err.msg);
    return t;
}

static void print_ids(const char *what, const int32_t *v, int n) {
    print_message("%s (%d):", what, n);
    for (int i = 0; i < n && i < 40; i++) print_message(" %d", v[i]);
    print_message("%s\n", n > 40 ? " ..." : "");
}

static int same_ids(const char *text, size_t len, const int32_t *got, int ng, const int32_t *exp, int ne) {
    if (ng == ne && (ne == 0 || !memcmp(got, exp, (size_t)ne * sizeof *exp))) return 1;
    print_message("MISMATCH for '%.*s'\n", (int)(len > 80 ? 80 : len), text);
    print_ids("  got", got, ng);
    print_ids("  expected", exp, ne);
    return 0;
}

/* llama.cpp test-tokenizer-0 format: texts separated by "\n__ggml_vocab_test__\n" (a text is
 * what lies between separators; the file ends with a separator), one line of ids per text in
 * .out, tokenized without BOS and without parsing special tokens. */
static void run_inp_out(const char *vocab) {
    TU_REQUIRE_SHARED();
    char rel[256];
    sdn_gguf *g;
    sdn_tokenizer *t = open_gguf_tok(vocab, &g);
    sdn_err err = {0};
    char *inp, *outs;
    size_t ni, no;
    snprintf(rel, sizeof rel, "%s.inp", vocab);
    assert_int_equal(sdn_read_file(tu_shared_path(rel), &inp, &ni, &err), 0);
    snprintf(rel, sizeof rel, "%s.out", vocab);
    assert_int_equal(sdn_read_file(tu_shared_path(rel), &outs, &no, &err), 0);
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t sl = strlen(sep), pos = 0;
    char *line = outs;
    int total = 0, bad = 0;
    int32_t *exp = malloc(sizeof(int32_t) * (no + 1));
    while (pos < ni) {
        char *nx = memmem(inp + pos, ni - pos, sep, sl);
        size_t end = nx ? (size_t)(nx - inp) : ni;
        assert_true(*line || line < outs + no); /* an .out line for every text */
        char *eol = strchr(line, '\n');
        if (eol) *eol = 0;
        int ne = 0;
        for (char *q = line; *q;) {
            while (*q == ' ') q++;
            if (!*q) break;
            exp[ne++] = (int32_t)strtol(q, &q, 10);
        }
        int32_t *ids;
        int n;
        assert_int_equal(sdn_tokenize(t, inp + pos, end - pos, 0, 0, &ids, &n, &err), 0);
        total++;
        if (!same_ids(inp + pos, end - pos, ids, n, exp, ne)) bad++;
        /* and back: decoding gives the text again */
        char *dec;
        assert_int_equal(sdn_detokenize(t, ids, n, &dec, &err), 0);
        if (strlen(dec) != end - pos || memcmp(dec, inp + pos, end - pos)) {
            print_message("DECODE MISMATCH '%.*s' -> '%s'\n", (int)(end - pos), inp + pos, dec);
            bad++;
        }
        free(dec);
        free(ids);
        line = eol ? eol + 1 : line + strlen(line);
        pos = nx ? end + sl : ni;
    }
    print_message("%s: %d/%d texts match\n", vocab, total - bad, total);
    assert_true(total >= 40);
    assert_int_equal(bad, 0);
    free(exp);
    free(inp);
    free(outs);
    sdn_tokenizer_free(t);
    sdn_gguf_close(g);
}

static void test_inp_llama_spm(void **s) { (void)s; run_inp_out("golden/tokenizer/ggml-vocab-llama-spm.gguf"); }
static void test_inp_gpt2(void **s) { (void)s; run_inp_out("golden/tokenizer/ggml-vocab-gpt-2.gguf"); }
static void test_inp_qwen25(void **s) { (void)s; run_inp_out("golden/tokenizer/ggml-vocab-qwen2.5.gguf"); }
static void test_inp_llama32(void **s) { (void)s; run_inp_out("golden/tokenizer/ggml-vocab-llama3.2.gguf"); }

/* jsonl: {"text": ..., "ids": [...], "decoded": ... (optional)} per line, ids without BOS. */
static void run_jsonl(sdn_tokenizer *t, const char *rel) {
    sdn_err err = {0};
    char *data;
    size_t n;
    assert_int_equal(sdn_read_file(tu_shared_path(rel), &data, &n, &err), 0);
    int total = 0, bad = 0;
    for (char *line = data; *line;) {
        char *eol = strchr(line, '\n');
        if (eol) *eol = 0;
        if (*line) {
            cJSON *j = cJSON_Parse(line);
            assert_non_null(j);
            cJSON *jt = cJSON_GetObjectItem(j, "text"), *ji = cJSON_GetObjectItem(j, "ids"), *jd = cJSON_GetObjectItem(j, "decoded");
            assert_true(cJSON_IsString(jt) && cJSON_IsArray(ji));
            int ne = cJSON_GetArraySize(ji);
            int32_t *exp = malloc(sizeof(int32_t) * (size_t)(ne + 1));
            for (int i = 0; i < ne; i++) exp[i] = (int32_t)cJSON_GetArrayItem(ji, i)->valuedouble;
            const char *text = jt->valuestring;
            int32_t *ids;
            int ng;
            assert_int_equal(sdn_tokenize(t, text, strlen(text), 0, 0, &ids, &ng, &err), 0);
            total++;
            if (!same_ids(text, strlen(text), ids, ng, exp, ne)) bad++;
            /* decoding the reference ids gives the reference decoding (or the text) */
            const char *want = cJSON_IsString(jd) ? jd->valuestring : text;
            char *dec;
            assert_int_equal(sdn_detokenize(t, exp, ne, &dec, &err), 0);
            if (strcmp(dec, want)) {
                print_message("DECODE MISMATCH '%.60s' -> '%.60s'\n", want, dec);
                bad++;
            }
            free(dec);
            free(ids);
            free(exp);
            cJSON_Delete(j);
        }
        line = eol ? eol + 1 : line + strlen(line);
    }
    print_message("%s: %d/%d cases match\n", rel, total - bad, total);
    assert_true(total >= 100);
    assert_int_equal(bad, 0);
    free(data);
}

static void test_cases_qwen25(void **s) {
    (void)s;
    TU_REQUIRE_SHARED();
    sdn_gguf *g;
    sdn_tokenizer *t = open_gguf_tok("golden/tokenizer/ggml-vocab-qwen2.5.gguf", &g);
    run_jsonl(t, "golden/tokenizer/qwen2.5.cases.jsonl");
    sdn_tokenizer_free(t);
    sdn_gguf_close(g);
}

static void test_cases_llama32(void **s) {
    (void)s;
    TU_REQUIRE_SHARED();
    sdn_gguf *g;
    sdn_tokenizer *t = open_gguf_tok("golden/tokenizer/ggml-vocab-llama3.2.gguf", &g);
    run_jsonl(t, "golden/tokenizer/llama3.2.cases.jsonl");
    sdn_tokenizer_free(t);
    sdn_gguf_close(g);
}

/* SentencePiece's Llama-2 tokenizations through the llama2.c export of the same model. */
static void test_llama2_spm_tokenizer_bin(void **s) {
    (void)s;
    TU_REQUIRE_SHARED();
    sdn_err err = {0};
    sdn_tokenizer *t;
    if (sdn_tokenizer_from_llama2c(tu_shared_path("models/llama2-tokenizer/tokenizer.bin"), 32000, &t, &err)) fail_msg("%s", err.msg);
    assert_int_equal(sdn_tokenizer_n_vocab(t), 32000);
    assert_int_equal(sdn_tokenizer_bos(t), 1);
    assert_int_equal(sdn_tokenizer_eos(t), 2);
    assert_int_equal(sdn_tokenizer_add_bos(t), 1);
    assert_int_equal(sdn_tokenizer_token_type(t, 0), SDN_TOKEN_UNKNOWN);
    assert_int_equal(sdn_tokenizer_token_type(t, 1), SDN_TOKEN_CONTROL);
    assert_int_equal(sdn_tokenizer_token_type(t, 3 + 0x41), SDN_TOKEN_BYTE);
    run_jsonl(t, "golden/llama2-spm/cases.jsonl");
    sdn_tokenizer_free(t);
}

/* The same cases through the GGUF vocabulary (identical pieces and scores). */
static void test_llama2_spm_gguf(void **s) {
    (void)s;
    TU_REQUIRE_SHARED();
    sdn_gguf *g;
    sdn_tokenizer *t = open_gguf_tok("golden/tokenizer/ggml-vocab-llama-spm.gguf", &g);
    run_jsonl(t, "golden/llama2-spm/cases.jsonl");
    sdn_tokenizer_free(t);
    sdn_gguf_close(g);
}

/* ---- stories260K: tok512.bin */

/* Naive re-implementation of llama2.c run.c's encode() straight from the file: dummy " "
 * token, one token per code point (bytes + 3 as fallback), then repeatedly merge the
 * leftmost best-scoring adjacent pair whose concatenation is in the vocabulary. */
typedef struct naive_vocab {
    int n;
    char **s;
    float *score;
} naive_vocab;

static void naive_load(const char *path, naive_vocab *v) {
    sdn_err err = {0};
    char *d;
    size_t n;
    assert_int_equal(sdn_read_file(path, &d, &n, &err), 0);
    size_t o = 4;
    v->n = 0;
    v->s = malloc(sizeof(char *) * 512);
    v->score = malloc(sizeof(float) * 512);
    while (o + 8 <= n && v->n < 512) {
        int32_t l;
        memcpy(&v->score[v->n], d + o, 4);
        memcpy(&l, d + o + 4, 4);
        o += 8;
        v->s[v->n] = malloc((size_t)l + 1);
        memcpy(v->s[v->n], d + o, (size_t)l);
        v->s[v->n][l] = 0;
        o += (size_t)l;
        v->n++;
    }
    free(d);
}

static int naive_find(const naive_vocab *v, const char *s) {
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->s[i], s)) return i;
    return -1;
}

static int naive_encode(const naive_vocab *v, const char *text, int32_t *out) {
    int n = 0;
    out[n++] = 1; /* BOS */
    if (text[0]) out[n++] = naive_find(v, " ");
    for (const unsigned char *p = (const unsigned char *)text; *p;) {
        int l = (*p < 0x80) ? 1 : (*p < 0xE0) ? 2 : (*p < 0xF0) ? 3 : 4;
        char buf[8] = {0};
        memcpy(buf, p, (size_t)l);
        int id = naive_find(v, buf);
        if (id >= 0) out[n++] = id;
        else
            for (int k = 0; k < l; k++) out[n++] = p[k] + 3;
        p += l;
    }
    for (;;) {
        float best = -1e10f;
        int bi = -1, bid = -1;
        for (int i = 1; i + 1 < n; i++) {
            char buf[64];
            snprintf(buf, sizeof buf, "%s%s", v->s[out[i]], v->s[out[i + 1]]);
            int id = naive_find(v, buf);
            if (id >= 0 && v->score[id] > best) {
                best = v->score[id];
                bi = i;
                bid = id;
            }
        }
        if (bi < 0) break;
        out[bi] = bid;
        memmove(out + bi + 1, out + bi + 2, sizeof(int32_t) * (size_t)(n - bi - 2));
        n--;
    }
    return n;
}

static void test_stories260k(void **s) {
    (void)s;
    TU_REQUIRE_SHARED();
    sdn_err err = {0};
    sdn_tokenizer *t;
    const char *path = tu_shared_path("models/stories260K/tok512.bin");
    if (sdn_tokenizer_from_llama2c(path, 512, &t, &err)) fail_msg("%s", err.msg);
    assert_int_equal(sdn_tokenizer_n_vocab(t), 512);

    /* llama2.c's own run: -i "Once upon a time" -> 1 403 407 261 378 */
    int32_t *ids;
    int n;
    assert_int_equal(sdn_tokenize(t, "Once upon a time", 16, sdn_tokenizer_add_bos(t), 0, &ids, &n, &err), 0);
    const int32_t want[] = {1, 403, 407, 261, 378};
    assert_true(same_ids("Once upon a time", 16, ids, n, want, 5));
    free(ids);

    /* against the naive llama2.c encoder */
    naive_vocab v;
    naive_load(path, &v);
    const char *texts[] = {"Once upon a time", "Lily and Timmy went to the park. They saw a big red ball!",
                           "  two leading spaces and a trailing one ", "line one\nline two\n\nend", "tabs\tand numbers 12345",
                           "café naïve 日本 🙂", "\"Don't worry,\" said Mom.", "a", " ", ""};
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        int32_t ref[512];
        int nr = naive_encode(&v, texts[k], ref);
        assert_int_equal(sdn_tokenize(t, texts[k], strlen(texts[k]), 1, 0, &ids, &n, &err), 0);
        assert_true(same_ids(texts[k], strlen(texts[k]), ids, n, ref, nr));
        char *dec;
        assert_int_equal(sdn_detokenize(t, ids, n, &dec, &err), 0);
        assert_string_equal(dec, texts[k]);
        free(dec);
        free(ids);
    }
    for (int i = 0; i < v.n; i++) free(v.s[i]);
    free(v.s);
    free(v.score);

    /* the greedy continuation recorded by llama2.c's run (prompt + 252 generated ids) decodes
     * to the text it printed */
    char *idtext, *want_text;
    size_t nl, nw;
    assert_int_equal(sdn_read_file(tu_shared_path("golden/stories260K/stories260K_greedy.ids"), &idtext, &nl, &err), 0);
    assert_int_equal(sdn_read_file(tu_shared_path("golden/stories260K/stories260K_greedy.txt"), &want_text, &nw, &err), 0);
    int32_t all[600];
    int na = 0;
    for (char *line = idtext; *line;) {
        char *eol = strchr(line, '\n');
        if (eol) *eol = 0;
        if (line[0] != '#')
            for (char *q = line; *q && na < 600;) {
                while (*q == ' ') q++;
                if (!*q) break;
                all[na++] = (int32_t)strtol(q, &q, 10);
            }
        line = eol ? eol + 1 : line + strlen(line);
    }
    assert_int_equal(na, 5 + 252);
    char *dec;
    assert_int_equal(sdn_detokenize(t, all, na, &dec, &err), 0);
    while (nw && want_text[nw - 1] == '\n') want_text[--nw] = 0;
    assert_string_equal(dec, want_text);
    free(dec);
    free(idtext);
    free(want_text);

    /* greedy_from_bos_256.json: BOS + 256 ids -> decoded_text (independent Python decoder) */
    char *js;
    size_t nj;
    assert_int_equal(sdn_read_file(tu_shared_path("models/stories260K/greedy_from_bos_256.json"), &js, &nj, &err), 0);
    cJSON *j = cJSON_Parse(js);
    assert_non_null(j);
    cJSON *gi = cJSON_GetObjectItem(j, "generated_token_ids"), *gt = cJSON_GetObjectItem(j, "decoded_text");
    int ng = cJSON_GetArraySize(gi);
    int32_t *seq = malloc(sizeof(int32_t) * (size_t)(ng + 1));
    seq[0] = 1;
    for (int i = 0; i < ng; i++) seq[i + 1] = (int32_t)cJSON_GetArrayItem(gi, i)->valuedouble;
    assert_int_equal(sdn_detokenize(t, seq, ng + 1, &dec, &err), 0);
    assert_string_equal(dec, gt->valuestring);
    /* streaming, one id at a time, gives the same text */
    sdn_detok *d = sdn_detok_new(t);
    char *acc = calloc(1, strlen(dec) + 64);
    size_t an = 0;
    char buf[64];
    for (int i = 0; i <= ng; i++) an += sdn_detok_push(d, seq[i], acc + an, 64);
    an += sdn_detok_flush(d, buf, sizeof buf);
    acc[an] = 0;
    assert_string_equal(acc, dec);
    sdn_detok_free(d);
    free(acc);
    free(dec);
    free(seq);
    cJSON_Delete(j);
    free(js);
    sdn_tokenizer_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inp_llama_spm),  cmocka_unit_test(test_inp_gpt2),       cmocka_unit_test(test_inp_qwen25),
        cmocka_unit_test(test_inp_llama32),    cmocka_unit_test(test_cases_qwen25),   cmocka_unit_test(test_cases_llama32),
        cmocka_unit_test(test_llama2_spm_tokenizer_bin), cmocka_unit_test(test_llama2_spm_gguf), cmocka_unit_test(test_stories260k),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
