/* test_tokenizer_bad.c - broken tokenizer sections never crash: each is refused with a
 * message naming the file and the key at fault, or falls back to the documented default
 * with a warning (missing pre-tokenizer, missing scores/types, duplicate pieces, bad type
 * values, negative ids). Files are written here with the GGUF writer; llama2.c
 * tokenizer.bin files are built byte by byte; a mutation loop feeds damaged files through
 * loading, encoding and decoding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <cmocka.h>

#include "common/sdn_util.h"
#include "modelfile/gguf.h"
#include "tokenizer/tokenizer.h"
#include "support/test_util.h"

#define OMIT INT64_MIN

typedef struct spec {
    int bpe;             /* byte-level BPE vocabulary, else SentencePiece */
    const char *model;   /* NULL: omit tokenizer.ggml.model */
    int model_as_u32;
    int tokens_mode;     /* 0 ok, 1 omit, 2 int32 array, 3 plain string, 4 empty array */
    int n_scores;        /* -1 omit, -2 = n_vocab */
    int n_types;         /* -1 omit, -2 = n_vocab */
    int types_as_str;
    int32_t type_value;  /* non-zero: this value for token type_at */
    int type_at;
    int64_t bos, eos, eot;
    const char *pre;     /* BPE: NULL omit */
    int merges_mode;     /* 0 ok, 1 omit, 2 unknown piece, 3 merged piece unknown, 4 no space, 5 int32 array */
    int dup;             /* duplicate piece "ab" */
} spec;

static spec base(int bpe) {
    spec s = {.bpe = bpe, .model = bpe ? "gpt2" : "llama", .n_scores = -2, .n_types = -2, .bos = OMIT, .eos = OMIT, .eot = OMIT,
              .pre = bpe ? "gpt-2" : NULL, .type_at = 5};
    return s;
}

static void byte_char(int b, char *out) {
    unsigned cp = (b <= 32) ? 256u + (unsigned)b : (b >= 127 && b <= 160) ? 162u + (unsigned)b : (b == 173) ? 323u : (unsigned)b;
    if (cp < 0x80) out[0] = (char)cp, out[1] = 0;
    else out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
}

static const char *write_spec(const spec *s, const char *name) {
    const char *path = tu_tmp(name);
    char *tok[300] = {0};
    float sc[300] = {0};
    int32_t ty[300] = {0};
    int n = 0;
    if (s->bpe) {
        for (int b = 0; b < 256; b++) {
            tok[n] = malloc(4);
            byte_char(b, tok[n]);
            ty[n++] = 1;
        }
        tok[n] = strdup("ab"), ty[n++] = 1;
        tok[n] = strdup("<|endoftext|>"), ty[n++] = 3;
        if (s->dup) tok[n] = strdup("ab"), ty[n++] = 1;
    } else {
        tok[n] = strdup("<unk>"), ty[n++] = 2;
        tok[n] = strdup("<s>"), ty[n++] = 3;
        tok[n] = strdup("</s>"), ty[n++] = 3;
        for (int b = 0; b < 256; b++) {
            tok[n] = malloc(8);
            snprintf(tok[n], 8, "<0x%02X>", b);
            ty[n++] = 6;
        }
        const char *p[] = {"\xE2\x96\x81", "a", "b", "ab", "\xE2\x96\x81" "ab"};
        for (int i = 0; i < 5; i++) tok[n] = strdup(p[i]), ty[n++] = 1;
        if (s->dup) tok[n] = strdup("ab"), ty[n++] = 1;
    }
    for (int i = 0; i < n; i++) sc[i] = -(float)i;
    if (s->type_value) ty[s->type_at] = s->type_value;
    sdn_gguf_writer *w = sdn_gguf_writer_new();
    sdn_gguf_w_str(w, "general.architecture", "llama");
    if (s->model) {
        if (s->model_as_u32) sdn_gguf_w_u32(w, "tokenizer.ggml.model", 7);
        else sdn_gguf_w_str(w, "tokenizer.ggml.model", s->model);
    }
    if (s->tokens_mode == 0) sdn_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok, NULL, (uint64_t)n);
    else if (s->tokens_mode == 2) sdn_gguf_w_arr_i32(w, "tokenizer.ggml.tokens", ty, (uint64_t)n);
    else if (s->tokens_mode == 3) sdn_gguf_w_str(w, "tokenizer.ggml.tokens", "abc");
    else if (s->tokens_mode == 4) sdn_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok, NULL, 0);
    if (s->n_scores != -1) sdn_gguf_w_arr_f32(w, "tokenizer.ggml.scores", sc, (uint64_t)(s->n_scores == -2 ? n : s->n_scores));
    if (s->n_types != -1) {
        if (s->types_as_str) sdn_gguf_w_arr_str(w, "tokenizer.ggml.token_type", (const char *const *)tok, NULL, (uint64_t)n);
        else sdn_gguf_w_arr_i32(w, "tokenizer.ggml.token_type", ty, (uint64_t)(s->n_types == -2 ? n : s->n_types));
    }
    if (s->bos != OMIT) sdn_gguf_w_i32(w, "tokenizer.ggml.bos_token_id", (int32_t)s->bos);
    if (s->eos != OMIT) sdn_gguf_w_i32(w, "tokenizer.ggml.eos_token_id", (int32_t)s->eos);
    if (s->eot != OMIT) sdn_gguf_w_i32(w, "tokenizer.ggml.eot_token_id", (int32_t)s->eot);
    if (s->pre) sdn_gguf_w_str(w, "tokenizer.ggml.pre", s->pre);
    if (s->bpe && s->merges_mode != 1) {
        const char *m[] = {"a b"};
        if (s->merges_mode == 2) m[0] = "a zz";
        if (s->merges_mode == 3) m[0] = "b a";
        if (s->merges_mode == 4) m[0] = "ab";
        if (s->merges_mode == 5) sdn_gguf_w_arr_i32(w, "tokenizer.ggml.merges", ty, 1);
        else sdn_gguf_w_arr_str(w, "tokenizer.ggml.merges", m, NULL, 1);
    }
    sdn_err err = {0};
    if (sdn_gguf_writer_write(w, path, NULL, NULL, &err)) fail_msg("%s", err.msg);
    sdn_gguf_writer_free(w);
    for (int i = 0; i < n; i++) free(tok[i]);
    return path;
}

/* Load; on failure check code and that the message names the file and each needle. */
static sdn_tokenizer *load(const spec *s, const char *name, int want_rc, const char *needle1, const char *needle2) {
    const char *path = write_spec(s, name);
    sdn_err err = {0};
    sdn_gguf *g;
    if (sdn_gguf_open(path, &g, &err)) fail_msg("writer produced an unreadable file: %s", err.msg);
    sdn_tokenizer *t = NULL;
    int rc = sdn_tokenizer_from_gguf(g, &t, &err);
    sdn_gguf_close(g);
    if (rc != want_rc) fail_msg("%s: expected status %d, got %d (%s)", name, want_rc, rc, err.msg);
    if (rc) {
        assert_null(t);
        print_message("  %s -> %s\n", name, err.msg);
        assert_non_null(strstr(err.msg, name));
        if (needle1) assert_non_null(strstr(err.msg, needle1));
        if (needle2) assert_non_null(strstr(err.msg, needle2));
        return NULL;
    }
    assert_non_null(t);
    return t;
}

static void expect_warning(sdn_tokenizer *t, const char *needle) {
    const char *w = sdn_tokenizer_warnings(t);
    if (!strstr(w, needle)) fail_msg("expected a warning containing '%s', got '%s'", needle, w);
}

/* The tokenizer still works after a fallback. */
static void works(sdn_tokenizer *t) {
    sdn_err err = {0};
    int32_t *ids;
    int n;
    assert_int_equal(sdn_tokenize(t, "ab ab \xF0\x9F\x99\x82", 10, 0, 1, &ids, &n, &err), 0);
    assert_true(n > 0);
    char *dec;
    assert_int_equal(sdn_detokenize(t, ids, n, &dec, &err), 0);
    assert_string_equal(dec, "ab ab \xF0\x9F\x99\x82");
    free(dec);
    free(ids);
}

static void test_refused(void **state) {
    (void)state;
    spec s;
    s = base(0), s.model = NULL;
    load(&s, "no_model.gguf", SDN_EFORMAT, "tokenizer.ggml.model", "missing");
    s = base(0), s.model_as_u32 = 1;
    load(&s, "model_u32.gguf", SDN_EFORMAT, "tokenizer.ggml.model", "not a string");
    s = base(0), s.model = "bert";
    load(&s, "model_bert.gguf", SDN_EUNSUP, "'bert'", "not supported");
    s = base(0), s.model = "no_vocab";
    load(&s, "model_none.gguf", SDN_EUNSUP, "no vocabulary", NULL);
    s = base(0), s.tokens_mode = 1;
    load(&s, "no_tokens.gguf", SDN_EFORMAT, "tokenizer.ggml.tokens", "missing");
    s = base(0), s.tokens_mode = 2;
    load(&s, "tokens_int.gguf", SDN_EFORMAT, "tokenizer.ggml.tokens", "not an array of strings");
    s = base(1), s.tokens_mode = 3;
    load(&s, "tokens_str.gguf", SDN_EFORMAT, "tokenizer.ggml.tokens", "not an array of strings");
    s = base(0), s.tokens_mode = 4, s.n_scores = 0, s.n_types = 0;
    load(&s, "tokens_empty.gguf", SDN_EFORMAT, "tokenizer.ggml.tokens", "empty");
    s = base(0), s.n_scores = 10;
    load(&s, "scores_short.gguf", SDN_EFORMAT, "tokenizer.ggml.scores has 10 entries", "264");
    s = base(0), s.n_types = 300;
    load(&s, "types_long.gguf", SDN_EFORMAT, "tokenizer.ggml.token_type has 300 entries", NULL);
    s = base(0), s.types_as_str = 1;
    load(&s, "types_str.gguf", SDN_EFORMAT, "tokenizer.ggml.token_type", "not an array of integers");
    s = base(0), s.bos = 999;
    load(&s, "bos_range.gguf", SDN_EFORMAT, "tokenizer.ggml.bos_token_id = 999", "outside the vocabulary");
    s = base(1), s.eos = 100000;
    load(&s, "eos_range.gguf", SDN_EFORMAT, "tokenizer.ggml.eos_token_id = 100000", "outside the vocabulary");
    s = base(1), s.eot = 258;
    load(&s, "eot_range.gguf", SDN_EFORMAT, "tokenizer.ggml.eot_token_id = 258", NULL);
    s = base(1), s.merges_mode = 1;
    load(&s, "no_merges.gguf", SDN_EFORMAT, "tokenizer.ggml.merges", "missing");
    s = base(1), s.merges_mode = 2;
    load(&s, "merge_unknown.gguf", SDN_EFORMAT, "tokenizer.ggml.merges[0] = 'a zz'", "'zz' is not in tokenizer.ggml.tokens");
    s = base(1), s.merges_mode = 3;
    load(&s, "merge_result.gguf", SDN_EFORMAT, "tokenizer.ggml.merges[0] = 'b a'", "merged piece");
    s = base(1), s.merges_mode = 4;
    load(&s, "merge_nospace.gguf", SDN_EFORMAT, "tokenizer.ggml.merges[0]", "two pieces");
    s = base(1), s.merges_mode = 5;
    load(&s, "merges_int.gguf", SDN_EFORMAT, "tokenizer.ggml.merges", "not an array of strings");
    s = base(1), s.pre = "fancy-new";
    load(&s, "pre_unknown.gguf", SDN_EUNSUP, "tokenizer.ggml.pre = 'fancy-new'", "not a known pre-tokenizer");
}

static void test_fallbacks(void **state) {
    (void)state;
    sdn_tokenizer *t;
    spec s;
    /* no pre-tokenizer: llama.cpp's 'default' set, with a warning */
    s = base(1), s.pre = NULL;
    t = load(&s, "pre_missing.gguf", 0, NULL, NULL);
    expect_warning(t, "tokenizer.ggml.pre is missing");
    assert_string_equal(sdn_tokenizer_pre(t), "default");
    works(t);
    sdn_tokenizer_free(t);
    /* duplicate piece: the lowest id wins */
    s = base(1), s.dup = 1;
    t = load(&s, "dup.gguf", 0, NULL, NULL);
    expect_warning(t, "more than once");
    assert_int_equal(sdn_tokenizer_find(t, "ab", 2), 256);
    works(t);
    sdn_tokenizer_free(t);
    s = base(0), s.dup = 1;
    t = load(&s, "dup_spm.gguf", 0, NULL, NULL);
    expect_warning(t, "more than once");
    works(t);
    sdn_tokenizer_free(t);
    /* unknown token type value */
    s = base(0), s.type_value = 42;
    t = load(&s, "type_bad.gguf", 0, NULL, NULL);
    expect_warning(t, "token_type[5] = 42");
    assert_int_equal(sdn_tokenizer_token_type(t, 5), SDN_TOKEN_UNDEFINED);
    works(t);
    sdn_tokenizer_free(t);
    /* SentencePiece without scores or types: inferred, with warnings */
    s = base(0), s.n_scores = -1, s.n_types = -1;
    t = load(&s, "spm_bare.gguf", 0, NULL, NULL);
    expect_warning(t, "scores is missing");
    expect_warning(t, "token_type is missing");
    assert_int_equal(sdn_tokenizer_token_type(t, 1), SDN_TOKEN_CONTROL);
    assert_int_equal(sdn_tokenizer_token_type(t, 3 + 'x'), SDN_TOKEN_BYTE);
    assert_int_equal(sdn_tokenizer_bos(t), 1);
    works(t);
    sdn_tokenizer_free(t);
    /* negative BOS id: treated as unset; add_bos is then impossible */
    s = base(0), s.bos = -1;
    t = load(&s, "bos_negative.gguf", 0, NULL, NULL);
    expect_warning(t, "negative");
    expect_warning(t, "no BOS");
    assert_int_equal(sdn_tokenizer_bos(t), -1);
    assert_int_equal(sdn_tokenizer_add_bos(t), 0);
    works(t);
    sdn_tokenizer_free(t);
    /* an end-of-turn marker typed as normal text is made a control token */
    s = base(1), s.type_value = 1, s.type_at = 257;
    t = load(&s, "eog_normal.gguf", 0, NULL, NULL);
    expect_warning(t, "not marked as a control token");
    assert_true(sdn_tokenizer_is_eog(t, 257));
    assert_int_equal(sdn_tokenizer_token_type(t, 257), SDN_TOKEN_CONTROL);
    sdn_tokenizer_free(t);
}

/* llama2.c tokenizer.bin files built by hand. */
static const char *write_bin(const char *name, const void *data, size_t n) {
    const char *path = tu_tmp(name);
    assert_int_equal(tu_write_file(path, data, n), 0);
    return path;
}

static void bin_fails(const char *name, const void *data, size_t n, int vocab, const char *needle) {
    const char *path = write_bin(name, data, n);
    sdn_err err = {0};
    sdn_tokenizer *t = (sdn_tokenizer *)1;
    int rc = sdn_tokenizer_from_llama2c(path, vocab, &t, &err);
    print_message("  %s -> %s\n", name, err.msg);
    assert_int_not_equal(rc, 0);
    assert_null(t);
    assert_non_null(strstr(err.msg, name));
    assert_non_null(strstr(err.msg, needle));
}

static void test_llama2c_bad(void **state) {
    (void)state;
    unsigned char buf[256] = {0};
    size_t o = 0;
    int32_t v;
    float f = 0;
#define PUT32(x) (v = (x), memcpy(buf + o, &v, 4), o += 4)
#define PUTF(x) (f = (x), memcpy(buf + o, &f, 4), o += 4)
    bin_fails("empty.bin", buf, 0, 0, "too short");
    o = 0;
    PUT32(0);
    bin_fails("maxlen0.bin", buf, o, 0, "max_token_length");
    o = 0;
    PUT32(8);
    PUTF(0);
    PUT32(5);
    memcpy(buf + o, "<unk>", 5), o += 5;
    PUTF(0);
    PUT32(100); /* longer than the rest of the file */
    memcpy(buf + o, "<s>", 3), o += 3;
    bin_fails("badlen.bin", buf, o, 0, "outside the file");
    o = 0;
    PUT32(8);
    PUTF(0);
    PUT32(-3);
    bin_fails("neglen.bin", buf, o, 0, "outside the file");
    o = 0;
    PUT32(8);
    PUTF(0);
    PUT32(1);
    buf[o++] = 'a';
    PUTF(0);
    bin_fails("truncated.bin", buf, o, 0, "truncated");
    o = 0;
    PUT32(8);
    PUTF(0);
    PUT32(1);
    buf[o++] = 'a';
    bin_fails("toofew.bin", buf, o, 5, "vocabulary has 5");
    sdn_err err = {0};
    sdn_tokenizer *t;
    assert_int_equal(sdn_tokenizer_from_llama2c("/nonexistent/tokenizer.bin", 32, &t, &err), SDN_EIO);
    assert_non_null(strstr(err.msg, "/nonexistent/tokenizer.bin"));
    /* a valid tiny file without <s>: loads, warns, add_bos off */
    o = 0;
    PUT32(8);
    PUTF(0);
    PUT32(1);
    buf[o++] = 'a';
    PUTF(-1);
    PUT32(1);
    buf[o++] = ' ';
    const char *path = write_bin("tiny.bin", buf, o);
    assert_int_equal(sdn_tokenizer_from_llama2c(path, 0, &t, &err), 0);
    assert_int_equal(sdn_tokenizer_n_vocab(t), 2);
    expect_warning(t, "no <s>");
    assert_int_equal(sdn_tokenizer_add_bos(t), 0);
    int32_t *ids;
    int n;
    /* no byte tokens and no <unk>: unknown characters are dropped, never a crash */
    assert_int_equal(sdn_tokenize(t, "a b", 3, 0, 0, &ids, &n, &err), 0);
    free(ids);
    sdn_tokenizer_free(t);
#undef PUT32
#undef PUTF
}

/* Damaged files: random byte flips and truncations of a valid BPE and SPM file go through
 * open -> load -> encode -> decode without a crash (meaningful under -DSDN_SANITIZE=ON). */
static void test_mutations(void **state) {
    (void)state;
    spec sp[2] = {base(1), base(0)};
    /* damaged files warn a lot: keep stderr quiet during the loop */
    fflush(stderr);
    int saved = dup(2), devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, 2);
    for (int k = 0; k < 2; k++) {
        const char *path = write_spec(&sp[k], k ? "mut_spm.gguf" : "mut_bpe.gguf");
        char *orig;
        size_t n;
        sdn_err err = {0};
        assert_int_equal(sdn_read_file(path, &orig, &n, &err), 0);
        char *img = malloc(n);
        sdn_rng r;
        sdn_rng_seed(&r, 1234 + (uint64_t)k);
        int loaded = 0, refused = 0;
        for (int it = 0; it < 1500; it++) {
            memcpy(img, orig, n);
            size_t len = n;
            int flips = 1 + (int)sdn_rng_below(&r, 4);
            for (int j = 0; j < flips; j++) img[sdn_rng_below(&r, n)] ^= (char)(1u << sdn_rng_below(&r, 8));
            if (it % 5 == 0) len = (size_t)sdn_rng_below(&r, n);
            sdn_gguf *g;
            sdn_err e2 = {0};
            if (sdn_gguf_open_memory(img, len, "mutated.gguf", &g, &e2)) {
                refused++;
                continue;
            }
            sdn_tokenizer *t;
            if (sdn_tokenizer_from_gguf(g, &t, &e2) == 0) {
                loaded++;
                int32_t *ids;
                int ni;
                if (sdn_tokenize(t, "ab <|endoftext|> a\xC3\xA9 \xFF", 22, 0, 1, &ids, &ni, &e2) == 0) {
                    char *dec;
                    if (sdn_detokenize(t, ids, ni, &dec, &e2) == 0) free(dec);
                    free(ids);
                }
                sdn_tokenizer_free(t);
            } else {
                assert_true(e2.msg[0] != 0);
                refused++;
            }
            sdn_gguf_close(g);
        }
        print_message("  %s: %d loaded, %d refused\n", k ? "spm" : "bpe", loaded, refused);
        free(img);
        free(orig);
    }
    fflush(stderr);
    if (saved >= 0) dup2(saved, 2), close(saved);
    if (devnull >= 0) close(devnull);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_fallbacks),
        cmocka_unit_test(test_llama2c_bad),
        cmocka_unit_test(test_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
