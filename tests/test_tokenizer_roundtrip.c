/* test_tokenizer_roundtrip.c - decode(encode(text)) == text for hard UTF-8 (emoji sequences,
 * CJK, combining marks, whitespace runs, newlines, NUL bytes), the invalid-UTF-8 rule against
 * hand-written expectations, streaming decoding (held partial characters, every chunk valid
 * UTF-8, same text as whole decoding, output never lost with tiny buffers), and the
 * special-token policy (control tokens only when asked, added tokens always, EOG set).
 * Runs on small vocabularies written here, and on the real ones in ../shared when present. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/sdn_util.h"
#include "modelfile/gguf.h"
#include "tokenizer/tokenizer.h"
#include "support/test_util.h"

/* ---- vocabularies written by the test */

static const char *const k_spm_pieces[] = {"\xE2\x96\x81", "a", "b", "c", "e", "h", "t", "\xE2\x96\x81t", "he", "\xE2\x96\x81the", "\xE2\x96\x81" "a",
                                           "ab", "abc", "\xE2\x96\x81" "cat", "\xC3\xA9", "\xE6\x97\xA5", "\xE2\x96\x81\xE2\x96\x81"};

/* SentencePiece-style: <unk> <s> </s>, 256 byte tokens, a few pieces (scores: earlier = better).
 * with_bytes = 2 also adds "e\u2581" and "t\u2581c", pieces that reach across a word start. */
static const char *write_spm_vocab(int with_bytes) {
    const char *path = tu_tmp(with_bytes == 2 ? "spm_cross.gguf" : with_bytes ? "spm.gguf" : "spm_nobytes.gguf");
    int np = (int)(sizeof k_spm_pieces / sizeof k_spm_pieces[0]);
    int n = 3 + (with_bytes ? 256 : 0) + np + (with_bytes == 2 ? 2 : 0);
    char **tok = calloc((size_t)n, sizeof *tok);
    float *sc = calloc((size_t)n, sizeof *sc);
    int32_t *ty = calloc((size_t)n, sizeof *ty);
    int k = 0;
    tok[k] = strdup("<unk>"), ty[k++] = 2;
    tok[k] = strdup("<s>"), ty[k++] = 3;
    tok[k] = strdup("</s>"), ty[k++] = 3;
    for (int b = 0; with_bytes && b < 256; b++) {
        tok[k] = malloc(8);
        snprintf(tok[k], 8, "<0x%02X>", b);
        ty[k++] = 6;
    }
    for (int i = 0; i < np; i++) {
        tok[k] = strdup(k_spm_pieces[i]);
        sc[k] = -(float)i;
        ty[k++] = 1;
    }
    if (with_bytes == 2) {
        tok[k] = strdup("e\xE2\x96\x81"), sc[k] = -3.5f, ty[k++] = 1;
        tok[k] = strdup("t\xE2\x96\x81" "c"), sc[k] = -0.5f, ty[k++] = 1;
    }
    sdn_gguf_writer *w = sdn_gguf_writer_new();
    sdn_gguf_w_str(w, "tokenizer.ggml.model", "llama");
    sdn_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok, NULL, (uint64_t)n);
    sdn_gguf_w_arr_f32(w, "tokenizer.ggml.scores", sc, (uint64_t)n);
    sdn_gguf_w_arr_i32(w, "tokenizer.ggml.token_type", ty, (uint64_t)n);
    sdn_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1);
    sdn_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2);
    sdn_err err = {0};
    if (sdn_gguf_writer_write(w, path, NULL, NULL, &err)) fail_msg("%s", err.msg);
    sdn_gguf_writer_free(w);
    for (int i = 0; i < n; i++) free(tok[i]);
    free(tok);
    free(sc);
    free(ty);
    return path;
}

/* GPT-2 style byte-level BPE: the 256 byte characters, a few merges, control and added tokens. */
static void byte_char(int b, char *out) {
    unsigned cp = (b <= 32) ? 256u + (unsigned)b : (b >= 127 && b <= 160) ? 162u + (unsigned)b : (b == 173) ? 323u : (unsigned)b;
    if (cp < 0x80) out[0] = (char)cp, out[1] = 0;
    else out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
}

static const char *write_bpe_vocab(void) {
    const char *path = tu_tmp("bpe.gguf");
    static const char *const merged[] = {"\xC4\xA0t", "he", "\xC4\xA0the", "ab", "abc", "\xC4\xA0\xC4\xA0", "\xC3\xA6\xC4\xBB"};
    static const char *const merges[] = {"\xC4\xA0 t", "h e", "\xC4\xA0t he", "a b", "ab c", "\xC4\xA0 \xC4\xA0", "\xC3\xA6 \xC4\xBB"};
    static const char *const special[] = {"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool>"};
    int n = 256 + 7 + 4;
    char **tok = calloc((size_t)n, sizeof *tok);
    int32_t *ty = calloc((size_t)n, sizeof *ty);
    for (int b = 0; b < 256; b++) {
        tok[b] = malloc(4);
        byte_char(b, tok[b]);
        ty[b] = 1;
    }
    for (int i = 0; i < 7; i++) tok[256 + i] = strdup(merged[i]), ty[256 + i] = 1;
    for (int i = 0; i < 4; i++) tok[263 + i] = strdup(special[i]), ty[263 + i] = i == 3 ? 4 : 3;
    sdn_gguf_writer *w = sdn_gguf_writer_new();
    sdn_gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    sdn_gguf_w_str(w, "tokenizer.ggml.pre", "gpt-2");
    sdn_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok, NULL, (uint64_t)n);
    sdn_gguf_w_arr_i32(w, "tokenizer.ggml.token_type", ty, (uint64_t)n);
    sdn_gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, NULL, 7);
    sdn_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 264);
    sdn_err err = {0};
    if (sdn_gguf_writer_write(w, path, NULL, NULL, &err)) fail_msg("%s", err.msg);
    sdn_gguf_writer_free(w);
    for (int i = 0; i < n; i++) free(tok[i]);
    free(tok);
    free(ty);
    return path;
}

typedef struct tk {
    const char *name;
    sdn_tokenizer *t;
    sdn_gguf *g;
} tk;

static int load_gguf(tk *x, const char *name, const char *path) {
    sdn_err err = {0};
    x->name = name;
    if (sdn_gguf_open(path, &x->g, &err) || sdn_tokenizer_from_gguf(x->g, &x->t, &err)) fail_msg("%s: %s", name, err.msg);
    return 1;
}

/* All tokenizers for this run: the written ones always, the real ones when shared is there. */
static int load_all(tk *all) {
    int n = 0;
    load_gguf(&all[n++], "written-spm", write_spm_vocab(1));
    load_gguf(&all[n++], "written-bpe", write_bpe_vocab());
    if (tu_shared()) {
        load_gguf(&all[n++], "llama-spm", tu_shared_path("golden/tokenizer/ggml-vocab-llama-spm.gguf"));
        load_gguf(&all[n++], "gpt-2", tu_shared_path("golden/tokenizer/ggml-vocab-gpt-2.gguf"));
        load_gguf(&all[n++], "qwen2.5", tu_shared_path("golden/tokenizer/ggml-vocab-qwen2.5.gguf"));
        load_gguf(&all[n++], "llama3.2", tu_shared_path("golden/tokenizer/ggml-vocab-llama3.2.gguf"));
        sdn_err err = {0};
        all[n].name = "tok512";
        all[n].g = NULL;
        if (sdn_tokenizer_from_llama2c(tu_shared_path("models/stories260K/tok512.bin"), 512, &all[n].t, &err)) fail_msg("%s", err.msg);
        n++;
    } else {
        print_message("../shared not found: real vocabularies skipped\n");
    }
    return n;
}

static void free_all(tk *all, int n) {
    for (int i = 0; i < n; i++) {
        sdn_tokenizer_free(all[i].t);
        if (all[i].g) sdn_gguf_close(all[i].g);
    }
}

/* ---- texts */

typedef struct txt {
    const char *s;
    size_t n; /* 0: strlen */
} txt;

static const txt k_texts[] = {
    {"Hello world", 0},
    {"emoji \xF0\x9F\x99\x82\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD family \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 flag "
     "\xF0\x9F\x87\xBA\xF0\x9F\x87\xB8 rocket\xF0\x9F\x9A\x80",
     0},
    {"\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88 \xE4\xB8\xAD\xE6\x96\x87 \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4",
     0},
    {"combining e\xCC\x81 a\xCC\x80 n\xCC\x83 \xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87 \xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB", 0},
    {"   leading, inner    and trailing   ", 0},
    {"tabs\t\tand\x0Bvertical\x0C""feeds", 0},
    {"line one\nline two\n\n\nline five\r\nwindows\rold mac\n", 0},
    {"\n", 0},
    {" ", 0},
    {"  ", 0},
    {"\xC2\xA0nbsp\xC2\xA0\xC2\xA0" "and\xE3\x80\x80ideographic\xE2\x80\xA8line-sep\xE2\x80\x8Bzero-width", 0},
    {"code: for (int i = 0; i < n; ++i) { x[i] = 0; }  // done", 0},
    {"'s 't 're 've 'm 'll 'd 'S 'T 'RE don't I'M", 0},
    {"numbers 1234567890 3.14159 -42 1,000,000", 0},
    {"control \x01\x02\x1F\x7F chars", 0},
    {"nul\0inside", 10},
    {"<|im_start|>user\nnot special when typed<|im_end|> <s> </s> [INST]", 0},
    {"\xEF\xBF\xBD already a replacement character", 0},
    {"\xF0\x90\x8D\x88 gothic \xF0\x9D\x94\x98 math \xF4\x8F\xBF\xBF max", 0},
    {"", 0},
};

static size_t tlen(const txt *t) { return t->n ? t->n : strlen(t->s); }

static int valid_utf8(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned char c = u[i];
        size_t l = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3 : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
        if (!l || i + l > n) return 0;
        for (size_t k = 1; k < l; k++)
            if ((u[i + k] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && u[i + 1] < 0xA0) return 0;
        if (c == 0xED && u[i + 1] > 0x9F) return 0;
        if (c == 0xF0 && u[i + 1] < 0x90) return 0;
        if (c == 0xF4 && u[i + 1] > 0x8F) return 0;
        i += l;
    }
    return 1;
}

/* Decode by streaming with buffer `cap`; every chunk must be valid UTF-8 when cap >= 4. */
static char *stream_decode(const sdn_tokenizer *t, const int32_t *ids, int n, size_t cap, size_t *out_n) {
    sdn_detok *d = sdn_detok_new(t);
    assert_non_null(d);
    size_t total = 0, acap = 1024;
    char *acc = malloc(acap);
    char *buf = malloc(cap ? cap : 1);
    for (int i = 0; i <= n; i++) {
        size_t got;
        do {
            got = i < n ? sdn_detok_push(d, ids[i], buf, cap) : sdn_detok_flush(d, buf, cap);
            if (cap >= 4) assert_true(valid_utf8(buf, got)); /* no partial character ever leaves */
            if (total + got + 1 > acap) acc = realloc(acc, acap = 2 * (total + got + 1));
            memcpy(acc + total, buf, got);
            total += got;
            if (i < n) break; /* drain the queue with flush at the end */
        } while (got == cap && cap > 0);
    }
    while (sdn_detok_pending(d)) {
        size_t got = sdn_detok_flush(d, buf, cap);
        if (total + got + 1 > acap) acc = realloc(acc, acap = 2 * (total + got + 1));
        memcpy(acc + total, buf, got);
        total += got;
    }
    acc[total] = 0;
    free(buf);
    sdn_detok_free(d);
    *out_n = total;
    return acc;
}

static void test_roundtrip(void **state) {
    (void)state;
    tk all[16];
    int nt = load_all(all);
    sdn_err err = {0};
    for (int k = 0; k < nt; k++) {
        for (size_t i = 0; i < sizeof k_texts / sizeof k_texts[0]; i++) {
            const char *s = k_texts[i].s;
            size_t n = tlen(&k_texts[i]);
            for (int bos = 0; bos <= 1; bos++) {
                if (bos && sdn_tokenizer_bos(all[k].t) < 0) continue;
                int32_t *ids;
                int ni;
                assert_int_equal(sdn_tokenize(all[k].t, s, n, bos, 0, &ids, &ni, &err), 0);
                char *dec;
                assert_int_equal(sdn_detokenize(all[k].t, ids, ni, &dec, &err), 0);
                if (strlen(dec) != n && memchr(s, 0, n) == NULL) print_message("%s: '%s' -> '%s'\n", all[k].name, s, dec);
                assert_memory_equal(dec, s, n);
                if (!memchr(s, 0, n)) assert_int_equal(strlen(dec), n);
                /* streaming: whole-token chunks, and a 1-byte buffer (queueing) */
                size_t sn;
                char *st = stream_decode(all[k].t, ids, ni, 64, &sn);
                assert_int_equal(sn, n);
                assert_memory_equal(st, s, n);
                free(st);
                st = stream_decode(all[k].t, ids, ni, 1, &sn);
                assert_int_equal(sn, n);
                assert_memory_equal(st, s, n);
                free(st);
                free(dec);
                free(ids);
            }
        }
    }
    free_all(all, nt);
}

/* A long document and pathological runs round-trip too (and do not blow the stack). */
static void test_long_inputs(void **state) {
    (void)state;
    tk all[16];
    int nt = load_all(all);
    sdn_err err = {0};
    size_t n = 200000;
    char *spaces = malloc(n + 1), *word = malloc(n + 1), *mixed = malloc(n + 1);
    memset(spaces, ' ', n);
    memset(word, 'a', n);
    for (size_t i = 0; i < n; i++) mixed[i] = "ab c\n\xC3\xA9"[i % 7];
    mixed[n - 1] = 'x'; /* end on a complete character */
    mixed[n - 2] = 'x';
    const char *in[3] = {spaces, word, mixed};
    for (int k = 0; k < nt; k++)
        for (int j = 0; j < 3; j++) {
            int32_t *ids;
            int ni;
            assert_int_equal(sdn_tokenize(all[k].t, in[j], n, 0, 0, &ids, &ni, &err), 0);
            char *dec;
            assert_int_equal(sdn_detokenize(all[k].t, ids, ni, &dec, &err), 0);
            assert_int_equal(strlen(dec), n);
            assert_memory_equal(dec, in[j], n);
            free(dec);
            free(ids);
        }
    free(spaces);
    free(word);
    free(mixed);
    free_all(all, nt);
}

/* Invalid UTF-8: each byte that is not part of a well-formed sequence becomes U+FFFD. */
#define R "\xEF\xBF\xBD"
static const struct {
    const char *in, *out;
} k_invalid[] = {
    {"\xFF", R},
    {"a\xC3", "a" R},                        /* truncated 2-byte sequence at the end */
    {"\xE3\x81", R R},                       /* truncated 3-byte sequence: one per byte */
    {"\xE3\x81\x41", R R "A"},               /* interrupted sequence */
    {"\xC0\x80 overlong", R R " overlong"},  /* overlong NUL */
    {"\xED\xA0\x80 surrogate", R R R " surrogate"},
    {"\xF4\x90\x80\x80 too big", R R R R " too big"},
    {"\x80\x80 stray", R R " stray"},
    {"ok \xF0\x9F\x99 cut emoji \xF0\x9F\x99\x82", "ok " R R R " cut emoji \xF0\x9F\x99\x82"},
    {"\xFE\xFF", R R},
};

static void test_invalid_utf8(void **state) {
    (void)state;
    tk all[16];
    int nt = load_all(all);
    sdn_err err = {0};
    for (int k = 0; k < nt; k++)
        for (size_t i = 0; i < sizeof k_invalid / sizeof k_invalid[0]; i++) {
            int32_t *ids, *ids2;
            int ni, ni2;
            assert_int_equal(sdn_tokenize(all[k].t, k_invalid[i].in, strlen(k_invalid[i].in), 0, 0, &ids, &ni, &err), 0);
            char *dec;
            assert_int_equal(sdn_detokenize(all[k].t, ids, ni, &dec, &err), 0);
            assert_string_equal(dec, k_invalid[i].out);
            /* the same tokens as the replaced text */
            assert_int_equal(sdn_tokenize(all[k].t, k_invalid[i].out, strlen(k_invalid[i].out), 0, 0, &ids2, &ni2, &err), 0);
            assert_int_equal(ni, ni2);
            assert_memory_equal(ids, ids2, (size_t)ni * sizeof *ids);
            free(ids2);
            free(dec);
            free(ids);
        }
    free_all(all, nt);
}

/* Byte tokens that split characters: nothing leaves until the character is complete; an
 * incomplete character is replaced at flush, or when something else interrupts it. */
static void test_stream_split_bytes(void **state) {
    (void)state;
    sdn_err err = {0};
    sdn_gguf *g;
    sdn_tokenizer *t;
    if (sdn_gguf_open(write_spm_vocab(1), &g, &err) || sdn_tokenizer_from_gguf(g, &t, &err)) fail_msg("%s", err.msg);
    const char *text = "x\xE6\x97\xA5\xF0\x9F\x99\x82\xC3\xA9\xE2\x82\xAC"; /* x 日 🙂 é € */
    size_t n = strlen(text);
    /* every split point: bytes [0,k) as byte tokens, then the rest */
    for (size_t k = 0; k <= n; k++) {
        sdn_detok *d = sdn_detok_new(t);
        char out[256];
        size_t o = 0;
        for (size_t i = 0; i < k; i++) {
            int32_t id = 3 + (unsigned char)text[i]; /* <0xNN> */
            size_t got = sdn_detok_push(d, id, out + o, sizeof out - o);
            assert_true(valid_utf8(out + o, got));
            o += got;
            /* output so far is exactly the complete characters among bytes [0, i] */
            size_t complete = 0;
            for (size_t p = 0; p <= i;) {
                unsigned char c = (unsigned char)text[p];
                size_t l = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
                if (p + l <= i + 1) complete = p + l;
                p += l;
            }
            assert_int_equal(o, complete);
        }
        o += sdn_detok_flush(d, out + o, sizeof out - o);
        out[o] = 0;
        /* the cut character (if any) is one U+FFFD per byte that arrived */
        char want[256];
        size_t w = 0, p = 0;
        while (p < n) {
            unsigned char c = (unsigned char)text[p];
            size_t l = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
            if (p + l <= k || k == n) {
                memcpy(want + w, text + p, l);
                w += l;
            } else {
                for (size_t j = p; j < k; j++) memcpy(want + w, R, 3), w += 3;
                break;
            }
            p += l;
        }
        want[w] = 0;
        assert_string_equal(out, want);
        sdn_detok_free(d);
    }
    /* interrupted by a normal piece: the held bytes become U+FFFD each */
    sdn_detok *d = sdn_detok_new(t);
    char out[64];
    size_t o = sdn_detok_push(d, 3 + 0xE6, out, sizeof out);
    o += sdn_detok_push(d, 3 + 0x97, out + o, sizeof out - o);
    assert_int_equal(o, 0);
    int32_t a = sdn_tokenizer_find(t, "a", 1);
    o += sdn_detok_push(d, a, out + o, sizeof out - o);
    o += sdn_detok_flush(d, out + o, sizeof out - o);
    out[o] = 0;
    assert_string_equal(out, R R "a");
    sdn_detok_free(d);
    /* an id outside the vocabulary renders as U+FFFD and sdn_detokenize refuses it */
    d = sdn_detok_new(t);
    o = sdn_detok_push(d, 1 << 30, out, sizeof out);
    out[o] = 0;
    assert_string_equal(out, R);
    sdn_detok_free(d);
    int32_t bad[2] = {3 + 'a', -7};
    char *dec;
    assert_int_not_equal(sdn_detokenize(t, bad, 2, &dec, &err), 0);
    assert_non_null(strstr(err.msg, "ids[1]"));
    sdn_tokenizer_free(t);
    sdn_gguf_close(g);
}

/* SentencePiece's leading-space rule: only the first text piece after the start (or after
 * BOS) loses its space; priming with a prompt continues mid-text. */
static void test_spm_leading_space(void **state) {
    (void)state;
    sdn_err err = {0};
    sdn_gguf *g;
    sdn_tokenizer *t;
    if (sdn_gguf_open(write_spm_vocab(1), &g, &err) || sdn_tokenizer_from_gguf(g, &t, &err)) fail_msg("%s", err.msg);
    int32_t the = sdn_tokenizer_find(t, "\xE2\x96\x81the", 6), cat = sdn_tokenizer_find(t, "\xE2\x96\x81" "cat", 6);
    int32_t sp = sdn_tokenizer_find(t, "\xE2\x96\x81", 3);
    assert_true(the > 0 && cat > 0 && sp > 0);
    char *dec;
    int32_t s1[] = {1, the, cat};
    assert_int_equal(sdn_detokenize(t, s1, 3, &dec, &err), 0);
    assert_string_equal(dec, "the cat");
    free(dec);
    int32_t s2[] = {the, cat};
    assert_int_equal(sdn_detokenize(t, s2, 2, &dec, &err), 0);
    assert_string_equal(dec, "the cat");
    free(dec);
    int32_t s3[] = {sp, the}; /* " the": only the first "▁" is the dummy prefix */
    assert_int_equal(sdn_detokenize(t, s3, 2, &dec, &err), 0);
    assert_string_equal(dec, " the");
    free(dec);
    /* continuation after a primed prompt keeps the space */
    sdn_detok *d = sdn_detok_new(t);
    sdn_detok_prime(d, s1, 2);
    char out[32];
    size_t o = sdn_detok_push(d, cat, out, sizeof out);
    out[o] = 0;
    assert_string_equal(out, " cat");
    sdn_detok_free(d);
    /* control tokens: invisible by default, rendered on request */
    d = sdn_detok_new(t);
    sdn_detok_set_special(d, 1);
    o = sdn_detok_push(d, 1, out, sizeof out);
    o += sdn_detok_push(d, the, out + o, sizeof out - o);
    out[o] = 0;
    assert_string_equal(out, "<s> the");
    sdn_detok_free(d);
    sdn_tokenizer_free(t);
    sdn_gguf_close(g);
}

/* A SentencePiece vocabulary without byte tokens: unknown characters become <unk>, one per
 * run, which decodes as SentencePiece's " \u2047 ". */
static void test_spm_no_byte_fallback(void **state) {
    (void)state;
    sdn_err err = {0};
    sdn_gguf *g;
    sdn_tokenizer *t;
    if (sdn_gguf_open(write_spm_vocab(0), &g, &err) || sdn_tokenizer_from_gguf(g, &t, &err)) fail_msg("%s", err.msg);
    int32_t *ids;
    int n;
    assert_int_equal(sdn_tokenize(t, "xyz abc", 7, 0, 0, &ids, &n, &err), 0);
    /* "\u2581xyz\u2581abc": "\u2581a" (score -10) beats "ab" (-11), so: \u2581, <unk>, \u2581a, b, c */
    int32_t want[5] = {sdn_tokenizer_find(t, "\xE2\x96\x81", 3), 0, sdn_tokenizer_find(t, "\xE2\x96\x81" "a", 4), sdn_tokenizer_find(t, "b", 1),
                       sdn_tokenizer_find(t, "c", 1)};
    assert_int_equal(n, 5);
    assert_memory_equal(ids, want, sizeof want);
    char *dec;
    assert_int_equal(sdn_detokenize(t, ids, n, &dec, &err), 0);
    assert_string_equal(dec, " \xE2\x81\x87  abc");
    free(dec);
    free(ids);
    sdn_tokenizer_free(t);
    sdn_gguf_close(g);
}

/* Naive SentencePiece BPE from the public lookups: symbols are strings; repeatedly merge the
 * leftmost best-scoring adjacent pair that is a normal piece; unknown symbols as bytes. */
static int naive_spm(const sdn_tokenizer *t, const char *text, int32_t *out) {
    char buf[2048];
    size_t bn = 0, off[700], len[700];
    memcpy(buf, "\xE2\x96\x81", 3), bn = 3;
    for (const char *p = text; *p; p++) {
        if (*p == ' ') memcpy(buf + bn, "\xE2\x96\x81", 3), bn += 3;
        else buf[bn++] = *p;
    }
    int ns = 0;
    for (size_t i = 0; i < bn;) {
        unsigned char c = (unsigned char)buf[i];
        size_t l = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        off[ns] = i, len[ns++] = l;
        i += l;
    }
    for (;;) {
        int bi = -1;
        float best = 0;
        for (int i = 0; i + 1 < ns; i++) {
            int32_t id = sdn_tokenizer_find(t, buf + off[i], len[i] + len[i + 1]);
            if (id < 0 || sdn_tokenizer_token_type(t, id) != SDN_TOKEN_NORMAL) continue;
            if (bi < 0 || sdn_tokenizer_score(t, id) > best) bi = i, best = sdn_tokenizer_score(t, id);
        }
        if (bi < 0) break;
        len[bi] += len[bi + 1];
        memmove(off + bi + 1, off + bi + 2, sizeof *off * (size_t)(ns - bi - 2));
        memmove(len + bi + 1, len + bi + 2, sizeof *len * (size_t)(ns - bi - 2));
        ns--;
    }
    int n = 0;
    for (int i = 0; i < ns; i++) {
        int32_t id = sdn_tokenizer_find(t, buf + off[i], len[i]);
        if (id >= 0 && sdn_tokenizer_token_type(t, id) == SDN_TOKEN_NORMAL) {
            out[n++] = id;
            continue;
        }
        for (size_t k = 0; k < len[i]; k++) {
            char hex[8];
            snprintf(hex, sizeof hex, "<0x%02X>", (unsigned char)buf[off[i] + k]);
            out[n++] = sdn_tokenizer_find(t, hex, 6);
        }
    }
    return n;
}

/* The optimised SentencePiece encoder (word-by-word queues when no piece crosses a word start,
 * one queue otherwise) against the naive one. */
static void test_spm_vs_naive(void **state) {
    (void)state;
    const char *texts[] = {"the cat", "e e e cat", "theee  te cat", "abc abcab  ab c", "a   b", "tee cate the tc",
                           "caf\xC3\xA9 \xE6\x97\xA5\xE6\x97\xA5 the", "Hello  world, this is a longer sentence with  double spaces.",
                           "  leading and trailing  ", "line\nbreaks\tand tabs"};
    const char *paths[3] = {write_spm_vocab(1), write_spm_vocab(2), NULL};
    if (tu_shared()) paths[2] = tu_shared_path("golden/tokenizer/ggml-vocab-llama-spm.gguf");
    for (int k = 0; k < 3 && paths[k]; k++) {
        sdn_err err = {0};
        sdn_gguf *g;
        sdn_tokenizer *t;
        if (sdn_gguf_open(paths[k], &g, &err) || sdn_tokenizer_from_gguf(g, &t, &err)) fail_msg("%s", err.msg);
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
            int32_t ref[700], *ids;
            int nr = naive_spm(t, texts[i], ref), n;
            assert_int_equal(sdn_tokenize(t, texts[i], strlen(texts[i]), 0, 0, &ids, &n, &err), 0);
            if (n != nr || memcmp(ids, ref, sizeof *ids * (size_t)n)) fail_msg("%s: '%s' differs from the naive encoder", paths[k], texts[i]);
            free(ids);
        }
        sdn_tokenizer_free(t);
        sdn_gguf_close(g);
    }
}

static int has(const int32_t *v, int n, int32_t x) {
    for (int i = 0; i < n; i++)
        if (v[i] == x) return 1;
    return 0;
}

/* Control tokens only with parse_special; added (user-defined) tokens always; EOG set. */
static void test_special_policy(void **state) {
    (void)state;
    sdn_err err = {0};
    sdn_gguf *g;
    sdn_tokenizer *t;
    if (sdn_gguf_open(write_bpe_vocab(), &g, &err) || sdn_tokenizer_from_gguf(g, &t, &err)) fail_msg("%s", err.msg);
    const char *s = "<|im_start|>user\nhi <tool> x<|im_end|>";
    int32_t *ids;
    int n;
    assert_int_equal(sdn_tokenize(t, s, strlen(s), 0, 0, &ids, &n, &err), 0);
    assert_false(has(ids, n, 263) || has(ids, n, 264));
    assert_true(has(ids, n, 266)); /* <tool> is added vocabulary */
    free(ids);
    assert_int_equal(sdn_tokenize(t, s, strlen(s), 0, 1, &ids, &n, &err), 0);
    assert_int_equal(ids[0], 263);
    assert_int_equal(ids[n - 1], 264);
    assert_true(has(ids, n, 266));
    char *dec;
    assert_int_equal(sdn_detokenize(t, ids, n, &dec, &err), 0);
    assert_string_equal(dec, "user\nhi <tool> x"); /* control tokens are not text */
    free(dec);
    free(ids);
    assert_true(sdn_tokenizer_is_eog(t, 264));   /* <|im_end|> */
    assert_true(sdn_tokenizer_is_eog(t, 265));   /* <|endoftext|> */
    assert_false(sdn_tokenizer_is_eog(t, 263));  /* <|im_start|> */
    assert_false(sdn_tokenizer_is_eog(t, 'a'));
    /* add_bos without a BOS token is an error, not a crash */
    assert_int_not_equal(sdn_tokenize(t, "x", 1, 1, 0, &ids, &n, &err), 0);
    assert_non_null(strstr(err.msg, "BOS"));
    sdn_tokenizer_free(t);
    sdn_gguf_close(g);

    if (!tu_shared()) return;
    struct {
        const char *path;
        const char *ctl;
        int32_t ctl_id;
        int32_t eog[3];
    } real[] = {
        {"golden/tokenizer/ggml-vocab-qwen2.5.gguf", "<|im_start|>", 151644, {151645, 151643, -1}},
        {"golden/tokenizer/ggml-vocab-llama3.2.gguf", "<|start_header_id|>", 128006, {128009, 128001, 128008}},
        {"golden/tokenizer/ggml-vocab-gpt-2.gguf", "<|endoftext|>", 50256, {50256, -1, -1}},
        {"golden/tokenizer/ggml-vocab-llama-spm.gguf", "</s>", 2, {2, -1, -1}},
    };
    for (size_t k = 0; k < sizeof real / sizeof real[0]; k++) {
        if (sdn_gguf_open(tu_shared_path(real[k].path), &g, &err) || sdn_tokenizer_from_gguf(g, &t, &err)) fail_msg("%s", err.msg);
        char text[128];
        snprintf(text, sizeof text, "say %s now", real[k].ctl);
        assert_int_equal(sdn_tokenize(t, text, strlen(text), 0, 0, &ids, &n, &err), 0);
        assert_false(has(ids, n, real[k].ctl_id));
        free(ids);
        assert_int_equal(sdn_tokenize(t, text, strlen(text), 0, 1, &ids, &n, &err), 0);
        assert_true(has(ids, n, real[k].ctl_id));
        free(ids);
        for (int e = 0; e < 3; e++)
            if (real[k].eog[e] >= 0) assert_true(sdn_tokenizer_is_eog(t, real[k].eog[e]));
        assert_false(sdn_tokenizer_is_eog(t, 100));
        sdn_tokenizer_free(t);
        sdn_gguf_close(g);
    }
    /* Qwen's <tool_call> is added vocabulary: one token even in user text */
    if (sdn_gguf_open(tu_shared_path("golden/tokenizer/ggml-vocab-qwen2.5.gguf"), &g, &err) || sdn_tokenizer_from_gguf(g, &t, &err)) fail_msg("%s", err.msg);
    assert_int_equal(sdn_tokenize(t, "a<tool_call>b", 13, 0, 0, &ids, &n, &err), 0);
    assert_true(has(ids, n, 151657));
    free(ids);
    sdn_tokenizer_free(t);
    sdn_gguf_close(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),          cmocka_unit_test(test_long_inputs),       cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_stream_split_bytes), cmocka_unit_test(test_spm_leading_space), cmocka_unit_test(test_special_policy),
        cmocka_unit_test(test_spm_no_byte_fallback), cmocka_unit_test(test_spm_vs_naive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
