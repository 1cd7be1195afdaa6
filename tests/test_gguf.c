/* test_gguf.c - GGUF reader/writer round trip, the metadata value sizes against the
 * specification's, and bad model files: truncated, wrong magic, absurd counts and dimensions,
 * tensor data out of bounds, unsupported type, version and architecture, shape mismatches,
 * missing tensors, and random corruption. Every bad file must end in one error naming the
 * file and the problem, never a crash. A context_length of 2^31 and a llama2.c
 * vocab_size of INT32_MIN are clear errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/sdn_util.h"
#include "modelfile/gguf.h"
#include "modelfile/model.h"
#include "modelfile/tensor_types.h"
#include "support/test_util.h"

static int fill_seq(void *ctx, int index, const char *name, void *dst, size_t nbytes, sdn_err *err) {
    for (size_t i = 0; i < nbytes; i++) ((uint8_t *)dst)[i] = (uint8_t)(i * 7 + (size_t)index);
    return SDN_OK;
}

static void test_roundtrip(void **state) {
    sdn_gguf_writer *w = sdn_gguf_writer_new();
    sdn_gguf_w_str(w, "general.architecture", "llama");
    sdn_gguf_w_u32(w, "a.u32", 123456);
    sdn_gguf_w_i32(w, "a.i32", -5);
    sdn_gguf_w_f32(w, "a.f32", 0.25f);
    sdn_gguf_w_bool(w, "a.bool", 1);
    sdn_gguf_w_u64(w, "a.u64", 1ull << 40);
    const char *strs[] = {"x", "", "hello world", "\xe2\x96\x81t"};
    sdn_gguf_w_arr_str(w, "a.strs", strs, NULL, 4);
    float fl[3] = {1, -2, 3.5f};
    sdn_gguf_w_arr_f32(w, "a.f32s", fl, 3);
    int64_t ne1[2] = {64, 3}, ne2[1] = {32};
    assert_int_equal(sdn_gguf_w_tensor(w, "t.q8", SDN_TYPE_Q8_0, 2, ne1), 0);
    assert_int_equal(sdn_gguf_w_tensor(w, "t.f32", SDN_TYPE_F32, 1, ne2), 1);
    assert_int_equal(sdn_gguf_w_tensor(w, "bad", SDN_TYPE_Q4_K, 1, ne2), -1); /* 32 not a multiple of 256 */
    sdn_err e = {0};
    const char *path = tu_tmp("rt.gguf");
    assert_int_equal(sdn_gguf_writer_write(w, path, fill_seq, NULL, &e), SDN_OK);
    sdn_gguf_writer_free(w);

    sdn_gguf *g;
    assert_int_equal(sdn_gguf_open(path, &g, &e), SDN_OK);
    assert_int_equal(sdn_gguf_version(g), 3);
    uint32_t u;
    assert_int_equal(sdn_gguf_get_u32(g, "a.u32", &u, &e), 0);
    assert_int_equal(u, 123456);
    int64_t i64;
    assert_int_equal(sdn_gguf_get_i64(g, "a.i32", &i64, &e), 0);
    assert_int_equal(i64, -5);
    assert_int_not_equal(sdn_gguf_get_u32(g, "a.i32", &u, &e), 0); /* negative does not fit u32 */
    sdn_err_clear(&e);
    assert_int_equal(sdn_gguf_get_i64(g, "a.u64", &i64, &e), 0);
    assert_true(i64 == (1ll << 40));
    float f;
    assert_int_equal(sdn_gguf_get_f32(g, "a.f32", &f, &e), 0);
    assert_true(f == 0.25f);
    int b;
    assert_int_equal(sdn_gguf_get_bool_or(g, "a.bool", 0, &b, &e), 0);
    assert_int_equal(b, 1);
    int ki = sdn_gguf_find(g, "a.strs");
    sdn_gguf_vtype et;
    uint64_t cnt;
    assert_int_equal(sdn_gguf_arr_info(g, ki, &et, &cnt), 0);
    assert_int_equal(et, SDN_GGUF_STRING);
    assert_int_equal(cnt, 4);
    for (int i = 0; i < 4; i++) {
        size_t l;
        const char *s = sdn_gguf_arr_str(g, ki, (uint64_t)i, &l);
        assert_int_equal(l, strlen(strs[i]));
        assert_memory_equal(s, strs[i], l);
    }
    ki = sdn_gguf_find(g, "a.f32s");
    assert_true(sdn_gguf_arr_num(g, ki, 2) == 3.5);
    const sdn_gguf_tensor *t = sdn_gguf_tensor_find(g, "t.q8");
    assert_non_null(t);
    assert_int_equal(t->ne[0], 64);
    assert_int_equal(t->ne[1], 3);
    assert_int_equal(t->nbytes, 3 * 2 * 34);
    assert_int_equal((uintptr_t)t->data % 32, 0);
    for (size_t i = 0; i < t->nbytes; i++) assert_int_equal(((const uint8_t *)t->data)[i], (uint8_t)(i * 7));
    t = sdn_gguf_tensor_find(g, "t.f32");
    for (size_t i = 0; i < t->nbytes; i++) assert_int_equal(((const uint8_t *)t->data)[i], (uint8_t)(i * 7 + 1));
    assert_null(sdn_gguf_tensor_find(g, "nope"));
    assert_int_equal(sdn_gguf_find(g, "nope"), -1);
    assert_int_not_equal(sdn_gguf_get_u32(g, "nope", &u, &e), 0);
    assert_non_null(strstr(e.msg, "nope"));
    sdn_gguf_close(g);
}

/* Load `bytes` as a model file; expect failure whose message names the file and contains `want`. */
static void expect_model_error(const char *name, const uint8_t *bytes, size_t n, const char *want) {
    const char *path = tu_tmp(name);
    assert_int_equal(tu_write_file(path, bytes, n), 0);
    sdn_model *m = NULL;
    sdn_err e = {0};
    sdn_model_load_opts o = {.no_tokenizer = 1};
    int rc = sdn_model_load(path, &o, &m, &e);
    if (rc == SDN_OK) fail_msg("%s: loaded although it is bad", name);
    assert_null(m);
    if (!strstr(e.msg, path)) fail_msg("%s: message does not name the file: %s", name, e.msg);
    if (want && !strstr(e.msg, want)) fail_msg("%s: message '%s' lacks '%s'", name, e.msg, want);
}

static uint8_t *load_bytes(const char *path, size_t *n) {
    char *d;
    sdn_err e = {0};
    assert_int_equal(sdn_read_file(path, &d, n, &e), 0);
    return (uint8_t *)d;
}

/* Offset of the tensor-info record of `name` (the uint32 n_dims after the name). */
static size_t tinfo_off(const uint8_t *b, size_t n, const char *name) {
    size_t l = strlen(name);
    for (size_t i = 8; i + l + 4 < n; i++) {
        uint64_t len;
        memcpy(&len, b + i - 8, 8);
        if (len == l && !memcmp(b + i, name, l)) {
            /* a tensor info: followed by n_dims in 1..4 */
            uint32_t nd;
            memcpy(&nd, b + i + l, 4);
            if (nd >= 1 && nd <= 4) return i + l;
        }
    }
    fail_msg("tensor info %s not found", name);
    return 0;
}

/* The metadata value sizes of the GGUF specification (docs/gguf.md, `gguf_metadata_value_type`),
 * written out here, against the one table the reader and the writer share. */
static void test_vtype_sizes(void **state) {
    (void)state;
    static const size_t spec[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8}; /* UINT8 .. FLOAT64 by id */
    for (uint32_t t = 0; t < 13; t++) assert_int_equal(sdn_gguf_vtype_size(t), spec[t]);
    assert_int_equal(sdn_gguf_vtype_size(13), 0);
    assert_int_equal(sdn_gguf_vtype_size(UINT32_MAX), 0);
}

static void test_bad_files(void **state) {
    const char *good = tu_model("tiny-llama", "Q8_0", 3);
    size_t n;
    uint8_t *b = load_bytes(good, &n);
    uint8_t *c = malloc(n);
    sdn_model *m;
    sdn_err e = {0};
    sdn_model_load_opts o = {.no_tokenizer = 1};
    assert_int_equal(sdn_model_load(good, &o, &m, &e), SDN_OK);
    sdn_model_free(m);

    /* GGUF v2 has the same layout (64-bit counts): a v2 header must load too */
    memcpy(c, b, n);
    c[4] = 2;
    assert_int_equal(tu_write_file(tu_tmp("v2.gguf"), c, n), 0);
    assert_int_equal(sdn_model_load(tu_tmp("v2.gguf"), &o, &m, &e), SDN_OK);
    sdn_model_free(m);
    expect_model_error("empty.gguf", b, 0, "too small");
    memcpy(c, b, n); c[0] = 'X';
    expect_model_error("magic.gguf", c, n, "not a GGUF file");
    memcpy(c, b, n); c[4] = 1;
    expect_model_error("v1.gguf", c, n, "version 1");
    memcpy(c, b, n); c[4] = 9;
    expect_model_error("v9.gguf", c, n, "version 9");
    memcpy(c, b, n); { uint64_t big = 1ull << 40; memcpy(c + 8, &big, 8); }
    expect_model_error("ntensors.gguf", c, n, "tensor count");
    memcpy(c, b, n); { uint64_t big = 1ull << 50; memcpy(c + 16, &big, 8); }
    expect_model_error("nkv.gguf", c, n, "metadata count");
    /* truncations at several points: header, metadata, tensor infos, data */
    size_t cuts[] = {10, 30, 200, 2000, n / 2, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "trunc%zu.gguf", cuts[i]);
        expect_model_error(nm, b, cuts[i], NULL);
    }
    expect_model_error("trunc_data.gguf", b, n - 1, "out of bounds");
    /* tensor info fields */
    size_t off = tinfo_off(b, n, "blk.0.attn_q.weight");
    memcpy(c, b, n); { uint64_t d0 = 0; memcpy(c + off + 4, &d0, 8); }
    expect_model_error("dim0.gguf", c, n, "dimension 0");
    memcpy(c, b, n); { uint64_t d0 = 1ull << 45; memcpy(c + off + 4, &d0, 8); }
    expect_model_error("dimhuge.gguf", c, n, "blk.0.attn_q.weight");
    memcpy(c, b, n); { uint32_t nd = 9; memcpy(c + off, &nd, 4); }
    expect_model_error("ndims.gguf", c, n, "dimensions");
    memcpy(c, b, n); { uint32_t ty = 10; memcpy(c + off + 4 + 16, &ty, 4); } /* Q2_K */
    expect_model_error("type.gguf", c, n, "not supported");
    memcpy(c, b, n); { uint64_t o2 = 1ull << 40; memcpy(c + off + 4 + 16 + 4, &o2, 8); }
    expect_model_error("oob.gguf", c, n, "out of bounds");
    memcpy(c, b, n); { uint64_t o2 = 3; memcpy(c + off + 4 + 16 + 4, &o2, 8); }
    expect_model_error("misaligned.gguf", c, n, "aligned");
    memcpy(c, b, n); { uint64_t d1 = 512; memcpy(c + off + 4, &d1, 8); } /* [512, 256]: data size grows, shape mismatch */
    expect_model_error("shape.gguf", c, n, NULL);
    /* rename a tensor so it is missing */
    memcpy(c, b, n); c[off - 1] = 'X'; /* blk.0.attn_q.weighX */
    expect_model_error("missing.gguf", c, n, "blk.0.attn_q.weight' is missing");
    /* unsupported architecture */
    {
        size_t l = strlen("llama");
        for (size_t i = 0; i + 8 < n; i++) {
            uint64_t len;
            memcpy(&len, b + i, 8);
            if (len == l && !memcmp(b + i + 8, "llama", l) && i > 24 && !memcmp(b + i - 24, "general.architecture", 20)) {
                memcpy(c, b, n);
                memcpy(c + i + 8, "gpt99", 5);
                expect_model_error("arch.gguf", c, n, "architecture 'gpt99' is not supported");
                break;
            }
        }
    }
    /* context_length 2^31 would become INT_MIN through (int): a clear error instead */
    {
        const char *key = "llama.context_length";
        size_t at = tu_gguf_u32_at(b, n, key);
        if (!at) fail_msg("%s: key %s (uint32) not found", good, key);
        uint32_t v = 1u << 31;
        memcpy(c, b, n);
        memcpy(c + at, &v, 4);
        expect_model_error("ctx2g.gguf", c, n, "context_length = 2147483648");
        v = SDN_MAX_CTX_LEN; /* the largest accepted */
        memcpy(c + at, &v, 4);
        assert_int_equal(tu_write_file(tu_tmp("ctxmax.gguf"), c, n), 0);
        if (sdn_model_load(tu_tmp("ctxmax.gguf"), &o, &m, &e)) fail_msg("%s", e.msg);
        assert_int_equal(sdn_model_cfg(m)->ctx_len, SDN_MAX_CTX_LEN);
        sdn_model_free(m);
    }
    /* random corruption of the header region: never a crash; loads that succeed are fine */
    sdn_rng r;
    sdn_rng_seed(&r, 99);
    size_t hdr = off + 64;
    for (int it = 0; it < 300; it++) {
        memcpy(c, b, n);
        int flips = 1 + (int)sdn_rng_below(&r, 4);
        for (int k = 0; k < flips; k++) c[sdn_rng_below(&r, hdr)] ^= (uint8_t)(1 + sdn_rng_below(&r, 255));
        const char *path = tu_tmp("fuzz.gguf");
        assert_int_equal(tu_write_file(path, c, n), 0);
        sdn_err fe = {0};
        if (sdn_model_load(path, &o, &m, &fe) == SDN_OK) sdn_model_free(m);
        else assert_true(fe.msg[0] != 0);
    }
    free(b);
    free(c);
}

/* Offset of the value of metadata key `key` of GGUF type `ty` (4 = UINT32, 6 = FLOAT32), or
 * fail the test. */
static size_t kv_value_off(const uint8_t *b, size_t n, const char *key, uint32_t ty) {
    size_t l = strlen(key);
    for (size_t i = 8; i + l + 8 < n; i++) {
        uint64_t len;
        memcpy(&len, b + i - 8, 8);
        uint32_t t;
        memcpy(&t, b + i + l, 4);
        if (len == l && !memcmp(b + i, key, l) && t == ty) return i + l + 4;
    }
    fail_msg("key %s (type %u) not found", key, ty);
    return 0;
}

/* gemma3 and qwen3 files with bad metadata or a missing tensor: one clear error naming the
 * key or tensor. */
static void test_new_archs_bad(void **state) {
    (void)state;
    const char *good = tu_model("tiny-gemma3", "Q8_0", 3);
    size_t n;
    uint8_t *b = load_bytes(good, &n);
    uint8_t *c = malloc(n);
    uint32_t v;
    float f;
    memcpy(c, b, n);
    v = 0;
    memcpy(c + kv_value_off(b, n, "gemma3.attention.sliding_window_pattern", 4), &v, 4);
    expect_model_error("swa_pattern0.gguf", c, n, "gemma3.attention.sliding_window_pattern = 0 is invalid");
    memcpy(c, b, n);
    v = 1u << 30;
    memcpy(c + kv_value_off(b, n, "gemma3.attention.sliding_window", 4), &v, 4);
    expect_model_error("swa_huge.gguf", c, n, "gemma3.attention.sliding_window = 1073741824");
    memcpy(c, b, n);
    f = 0.5f;
    memcpy(c + kv_value_off(b, n, "gemma3.rope.freq_base_swa", 6), &f, 4);
    expect_model_error("swa_theta.gguf", c, n, "gemma3.rope.freq_base_swa = 0.5 is invalid");
    memcpy(c, b, n);
    size_t off = tinfo_off(b, n, "blk.1.post_ffw_norm.weight");
    c[off - 1] = 'X';
    expect_model_error("no_post_norm.gguf", c, n, "blk.1.post_ffw_norm.weight' is missing");
    free(b);
    const char *q3 = tu_model("tiny-qwen3", "Q8_0", 3);
    b = load_bytes(q3, &n);
    c = realloc(c, n);
    memcpy(c, b, n);
    off = tinfo_off(b, n, "blk.0.attn_k_norm.weight");
    c[off - 1] = 'X';
    expect_model_error("no_k_norm.gguf", c, n, "blk.0.attn_k_norm.weight' is missing");
    memcpy(c, b, n);
    off = tinfo_off(b, n, "blk.0.attn_q_norm.weight");
    { uint64_t d0 = 64; memcpy(c + off + 4, &d0, 8); } /* [64] instead of head dim 96 */
    expect_model_error("q_norm_shape.gguf", c, n, "blk.0.attn_q_norm.weight");
    free(b);
    free(c);
}

static void test_llama2c_bad(void **state) {
    int32_t h[7] = {64, 172, 5, 8, 4, 512, 512};
    expect_model_error("l2c_trunc.bin", (uint8_t *)h, sizeof h, "truncated");
    h[3] = 7;
    uint8_t buf[28 + 64];
    memset(buf, 0, sizeof buf);
    memcpy(buf, h, 28);
    expect_model_error("l2c_heads.bin", buf, sizeof buf, "inconsistent");
    h[3] = 8;
    h[0] = -3;
    memcpy(buf, h, 28);
    expect_model_error("l2c_dim.bin", buf, sizeof buf, "dim");
    /* vocab_size INT32_MIN must not be negated (undefined behaviour; the sanitizer build
     * of the fuzz regressions catches the UB itself, this checks the clear error) */
    h[0] = 64;
    h[5] = INT32_MIN;
    memcpy(buf, h, 28);
    expect_model_error("l2c_vocab_min.bin", buf, sizeof buf, "vocab_size = -2147483648");
    h[5] = -512;
    memcpy(buf, h, 28);
    expect_model_error("l2c_vocab_neg.bin", buf, sizeof buf, "truncated"); /* valid header, no weights */
    /* a llama2.c checkpoint without its tokenizer: clear message pointing to --tokenizer */
    if (!tu_shared()) return;
    sdn_model *m;
    sdn_err e = {0};
    sdn_model_load_opts o = {0};
    assert_int_not_equal(sdn_model_load(tu_shared_path("models/stories260K/stories260K.bin"), &o, &m, &e), 0);
    assert_non_null(strstr(e.msg, "--tokenizer"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_vtype_sizes),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_new_archs_bad),
        cmocka_unit_test(test_llama2c_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
