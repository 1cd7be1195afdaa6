/* test_sdn_str.c - the growable string (common/sdn_str.h) against a naive reference: random
 * appends (bytes with NULs, C strings, printf text short and longer than its stack buffer)
 * give the same bytes as the same pieces copied into one big fixed buffer with memcpy and
 * snprintf; the string is NUL-terminated after every append; sdn_str_take hands over "" for
 * an empty string and empties it; after an allocation that cannot succeed (a size past any
 * memory) every later append is ignored, the text so far stays, and take returns NULL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/sdn_str.h"

/* xorshift64: a fixed sequence, so a failure reproduces */
static uint64_t rng(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void test_against_reference(void **state) {
    (void)state;
    enum { REF_CAP = 1 << 22 };
    char *ref = malloc(REF_CAP);
    char *piece = malloc(4096);
    assert_non_null(ref);
    assert_non_null(piece);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int round = 0; round < 20; round++) {
        sdn_str s = {0};
        size_t rn = 0;
        int n_appends = (int)(rng(&seed) % 400);
        for (int a = 0; a < n_appends; a++) {
            size_t len = (size_t)(rng(&seed) % (rng(&seed) % 8 ? 40 : 3000));
            for (size_t i = 0; i < len; i++) piece[i] = (char)(rng(&seed) % 256);
            switch (rng(&seed) % 3) {
            case 0: /* raw bytes, NULs included */
                sdn_str_addn(&s, piece, len);
                memcpy(ref + rn, piece, len);
                rn += len;
                break;
            case 1: /* a C string: up to the first NUL */
                piece[len] = 0;
                sdn_str_add(&s, piece);
                memcpy(ref + rn, piece, strlen(piece));
                rn += strlen(piece);
                break;
            default: { /* printf: a number and a string of any length */
                for (size_t i = 0; i < len; i++) piece[i] = (char)('a' + rng(&seed) % 26);
                piece[len] = 0;
                long v = (long)rng(&seed);
                sdn_str_printf(&s, "[%ld|%s|%.3f]", v, piece, (double)len / 7.0);
                int k = snprintf(ref + rn, REF_CAP - rn, "[%ld|%s|%.3f]", v, piece, (double)len / 7.0);
                assert_true(k > 0);
                rn += (size_t)k;
            }
            }
            assert_true(rn < REF_CAP / 2);
            assert_int_equal(s.oom, 0);
            assert_int_equal(s.n, rn);
            if (s.p) {
                assert_true(s.cap > s.n);
                assert_int_equal(s.p[s.n], 0);
            }
        }
        if (rn) assert_memory_equal(s.p, ref, rn);
        char *t = sdn_str_take(&s);
        assert_non_null(t);
        assert_int_equal(t[rn], 0);
        if (rn) assert_memory_equal(t, ref, rn);
        assert_null(s.p);
        assert_int_equal(s.n, 0);
        free(t);
    }
    free(piece);
    free(ref);
}

static void test_empty_and_reuse(void **state) {
    (void)state;
    sdn_str s = {0};
    char *t = sdn_str_take(&s);
    assert_non_null(t);
    assert_string_equal(t, "");
    free(t);
    sdn_str_add(&s, "");
    assert_non_null(s.p);
    assert_int_equal(s.n, 0);
    sdn_str_printf(&s, "%s=%d", "x", 42);
    assert_string_equal(s.p, "x=42");
    sdn_str_free(&s);
    assert_null(s.p);
    sdn_str_add(&s, "again");
    assert_string_equal(s.p, "again");
    sdn_str_free(&s);
}

static void test_out_of_memory(void **state) {
    (void)state;
    sdn_str s = {0};
    sdn_str_add(&s, "kept");
    assert_int_equal(sdn_str_reserve(&s, (size_t)-1 - 2), -1); /* past any memory: refused, not wrapped */
    assert_int_equal(s.oom, 1);
    sdn_str_add(&s, " ignored");
    sdn_str_printf(&s, "%d", 7);
    assert_string_equal(s.p, "kept");
    assert_int_equal(s.n, 4);
    assert_null(sdn_str_take(&s));
    assert_int_equal(s.oom, 0); /* emptied: usable again */
    sdn_str_add(&s, "ok");
    assert_string_equal(s.p, "ok");
    sdn_str_free(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_empty_and_reuse),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
