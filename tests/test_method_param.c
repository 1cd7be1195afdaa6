/* test_method_param.c - the --param parser, sdn_method_set_param (draft/methods.h).
 *
 * Every key documented in methods.h sets exactly its own field of sdn_method_config (the
 * rest of the struct is byte-for-byte unchanged), at both ends of its range; values just
 * outside the range, non-integers for integer keys, NaN, infinities, trailing junk, and
 * malformed arguments ("KEY", "=V", "KEY=", "") fail with SDN_EINVAL and a message naming
 * the key (or the argument), leaving the config untouched. */
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

/* The documented keys, the field each must set, and the allowed range. */
typedef struct {
    const char *key;
    size_t off;
    int is_float;
    double lo, hi;
} key_spec;

#define K(k, field, f, lo, hi) {k, offsetof(sdn_method_config, field), f, lo, hi}
static const key_spec keys[] = {
    K("pld.max_ngram", pld.max_ngram, 0, 1, 64),
    K("pld.min_ngram", pld.min_ngram, 0, 1, 64),
    K("pld.num_pred", pld.num_pred, 0, 1, 63),
    K("sam.n_predicts", sam.n_predicts, 0, 1, 63),
    K("sam.min_match", sam.min_match, 0, 0, 1000),
    K("sam.len_bias", sam.len_bias, 0, 0, 1000),
    K("sam.tree", sam.tree, 0, 0, 1),
    K("sam.topk", sam.topk, 0, 1, 64),
    K("sdnpu.n_predict", sdnpu.n_predict, 0, 1, 63),
    K("sdnpu.min_match", sdnpu.min_match, 0, 0, 1000),
    K("sdnpu.alts", sdnpu.alts, 0, 0, 7),
    K("sdnpu.follow", sdnpu.follow, 1, 0.001, 0.999),
    K("cal.min_prob", sdnpu.cal.min_prob, 1, 0, 1),
    K("cal.max_depth", sdnpu.cal.max_depth, 0, 1, 63),
    K("cal.max_branch", sdnpu.cal.max_branch, 0, 1, 16),
    K("cal.max_nodes", sdnpu.cal.max_nodes, 0, 1, 64),
    K("reuse.max_age", sdnpu.reuse.max_age, 0, 0, 1000),
    K("reuse.accept_prob", sdnpu.reuse.accept_prob, 1, 0.001, 0.99),
    K("reuse.rule", sdnpu.reuse.rule, 0, 0, 1),
    K("reuse.threshold", sdnpu.reuse.threshold, 0, 0, 1000),
    K("sdnpu.weigh", sdnpu.weigh, 0, 0, 1),
};
#undef K
#define NKEYS (int)(sizeof keys / sizeof keys[0])

static double get(const sdn_method_config *c, const key_spec *k) {
    const char *p = (const char *)c + k->off;
    if (k->is_float) {
        float f;
        memcpy(&f, p, sizeof f);
        return f;
    }
    int i;
    memcpy(&i, p, sizeof i);
    return i;
}

/* Set "key=value" and check that only the key's field changed, to `want`. */
static void expect_set(const key_spec *k, const char *value, double want) {
    sdn_method_config c, before;
    sdn_method_defaults(&c);
    /* poison the field so a parser that does not write it is caught even when want is the default */
    if (k->is_float) { float f = -12345.0f; memcpy((char *)&c + k->off, &f, sizeof f); }
    else { int i = -12345; memcpy((char *)&c + k->off, &i, sizeof i); }
    before = c;
    char kv[128];
    snprintf(kv, sizeof kv, "%s=%s", k->key, value);
    sdn_err e = {0};
    if (sdn_method_set_param(&c, kv, &e) != SDN_OK) fail_msg("%s: %s", kv, e.msg);
    double got = get(&c, k);
    if (k->is_float ? fabs(got - want) > 1e-6 : got != want) fail_msg("%s: field is %g, expected %g", kv, got, want);
    /* every other byte is as before */
    memcpy((char *)&c + k->off, (char *)&before + k->off, k->is_float ? sizeof(float) : sizeof(int));
    if (memcmp(&c, &before, sizeof c)) fail_msg("%s changed another field", kv);
}

static void expect_fail(const char *kv, const char *named) {
    sdn_method_config c, before;
    sdn_method_defaults(&c);
    before = c;
    sdn_err e = {0};
    int rc = sdn_method_set_param(&c, kv, &e);
    if (rc != SDN_EINVAL) fail_msg("'%s': rc %d, expected SDN_EINVAL", kv, rc);
    if (named && !strstr(e.msg, named)) fail_msg("'%s': message '%s' does not name '%s'", kv, e.msg, named);
    if (memcmp(&c, &before, sizeof c)) fail_msg("'%s' failed but changed the config", kv);
}

static void test_every_key_sets_its_field(void **state) {
    (void)state;
    for (int i = 0; i < NKEYS; i++) {
        const key_spec *k = &keys[i];
        char v[64];
        snprintf(v, sizeof v, "%.17g", k->lo);
        expect_set(k, v, k->lo);
        snprintf(v, sizeof v, "%.17g", k->hi);
        expect_set(k, v, k->hi);
        double mid = k->is_float ? (k->lo + k->hi) / 2 : floor((k->lo + k->hi) / 2);
        snprintf(v, sizeof v, "%.17g", mid);
        expect_set(k, v, mid);
    }
    /* integer keys accept integral spellings strtod reads */
    expect_set(&keys[0], "4.0", 4);
    expect_set(&keys[0], "+5", 5);
    expect_set(&keys[11], " 0.25", 0.25);
}

static void test_range_and_type_errors(void **state) {
    (void)state;
    char kv[128];
    for (int i = 0; i < NKEYS; i++) {
        const key_spec *k = &keys[i];
        double step = k->is_float ? 1e-3 : 1;
        snprintf(kv, sizeof kv, "%s=%.17g", k->key, k->lo - step);
        expect_fail(kv, k->key);
        snprintf(kv, sizeof kv, "%s=%.17g", k->key, k->hi + step);
        expect_fail(kv, k->key);
        if (!k->is_float) {
            snprintf(kv, sizeof kv, "%s=%.17g", k->key, k->lo + 0.5);
            expect_fail(kv, k->key);
        }
        const char *bad[] = {"nan", "-nan", "inf", "-inf", "1e400", "abc", "1x", "0x", "2 ", ""};
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            snprintf(kv, sizeof kv, "%s=%s", k->key, bad[b]);
            expect_fail(kv, k->key);
        }
    }
}

static void test_malformed_and_unknown(void **state) {
    (void)state;
    expect_fail("pld.max_ngram", "pld.max_ngram"); /* no '=' */
    expect_fail("=3", "=3");                        /* no key */
    expect_fail("", NULL);
    expect_fail("=", NULL);
    expect_fail("pld.max_ngram=", "pld.max_ngram"); /* no value */
    expect_fail("bogus.key=3", "bogus.key");
    expect_fail("pld=3", "pld");
    expect_fail("pld.max_ngramX=3", "pld.max_ngramX");
    expect_fail("PLD.MAX_NGRAM=3", "PLD.MAX_NGRAM"); /* keys are case-sensitive */
    expect_fail("pld.max_ngram =3", "pld.max_ngram ");
    expect_fail("cal.=3", "cal.");
}

/* Values set through --param reach the drafter: an out-of-range combination the drafter
 * itself checks (pld: min_ngram <= max_ngram) is refused by sdn_method_create. */
static void test_params_reach_the_drafter(void **state) {
    (void)state;
    sdn_method_config c;
    sdn_method_defaults(&c);
    sdn_err e = {0};
    assert_int_equal(sdn_method_set_param(&c, "pld.min_ngram=5", &e), SDN_OK);
    assert_int_equal(sdn_method_set_param(&c, "pld.max_ngram=2", &e), SDN_OK);
    sdn_drafter d;
    assert_int_not_equal(sdn_method_create("pld", &c, &d, &e), SDN_OK);
    assert_int_equal(sdn_method_set_param(&c, "pld.max_ngram=6", &e), SDN_OK);
    assert_int_equal(sdn_method_create("pld", &c, &d, &e), SDN_OK);
    sdn_drafter_destroy(&d);
}

/* The --param errors above are SDN_EINVAL; every status code has its own short name
 * (common/sdn_err.h, for messages such as "sdnpu: invalid argument: ..."), and sdn_fail
 * prefixes context to an error already recorded. */
static void test_status_names(void **state) {
    (void)state;
    const int codes[] = {SDN_OK, SDN_EINVAL, SDN_EFORMAT, SDN_EIO, SDN_ENOMEM, SDN_EUNSUP, SDN_EDB, SDN_ESTATE};
    for (int i = 0; i < 8; i++) {
        const char *a = sdn_strcode(codes[i]);
        assert_true(a && *a && strcmp(a, "error"));
        for (int j = 0; j < i; j++) assert_string_not_equal(a, sdn_strcode(codes[j]));
    }
    assert_string_equal(sdn_strcode(SDN_ENOMEM), "out of memory");
    assert_string_equal(sdn_strcode(99), "error");
    assert_string_equal(sdn_strcode(-1), "error");
    sdn_err e = {0};
    sdn_method_config c;
    sdn_method_defaults(&c);
    assert_int_equal(sdn_method_set_param(&c, "bogus=1", &e), SDN_EINVAL);
    assert_int_equal(sdn_fail(&e, SDN_EINVAL, "run"), SDN_EINVAL);
    assert_true(!strncmp(e.msg, "run: ", 5) && strstr(e.msg, "bogus"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_key_sets_its_field),
        cmocka_unit_test(test_range_and_type_errors),
        cmocka_unit_test(test_malformed_and_unknown),
        cmocka_unit_test(test_params_reach_the_drafter),
        cmocka_unit_test(test_status_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
