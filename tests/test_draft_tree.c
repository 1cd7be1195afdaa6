/* test_draft_tree.c - the draft tree: appending, duplicate siblings, caps, chains with
 * re-use and depth limits, and validation of hand-broken trees. Random operation
 * sequences are replayed on a naive model (a plain list of (parent, token) pairs). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/sdn_util.h"
#include "draft/draft_tree.h"

static void test_basic(void **st) {
    (void)st;
    sdn_tree t;
    sdn_err e = {0};
    assert_int_equal(sdn_tree_init(&t, 0, &e), SDN_EINVAL);
    assert_int_equal(sdn_tree_init(&t, 5, &e), SDN_OK);
    int ex;
    assert_int_equal(sdn_tree_add(&t, -1, 10, 0.9f, &ex), 0);
    assert_int_equal(ex, -1);
    assert_int_equal(sdn_tree_add(&t, -1, 11, 0.5f, NULL), 1);
    assert_int_equal(sdn_tree_add(&t, 0, 12, 0.8f, NULL), 2);
    assert_int_equal(t.depth[0], 1), assert_int_equal(t.depth[2], 2);
    /* duplicate sibling */
    assert_int_equal(sdn_tree_add(&t, -1, 10, 0.1f, &ex), -1);
    assert_int_equal(ex, 0);
    /* same token under another parent is fine */
    assert_int_equal(sdn_tree_add(&t, 1, 10, 0.1f, NULL), 3);
    /* invalid parents */
    assert_int_equal(sdn_tree_add(&t, -2, 1, 0, &ex), -1);
    assert_int_equal(ex, -1);
    assert_int_equal(sdn_tree_add(&t, 4, 1, 0, &ex), -1);
    assert_int_equal(sdn_tree_find_child(&t, -1, 11), 1);
    assert_int_equal(sdn_tree_find_child(&t, 0, 12), 2);
    assert_int_equal(sdn_tree_find_child(&t, 0, 10), -1);
    assert_int_equal(sdn_tree_find_child(&t, 1, 10), 3);
    assert_int_equal(sdn_tree_add(&t, 3, 7, 0, NULL), 4);
    /* full: -1, and no existing index */
    assert_int_equal(sdn_tree_add(&t, -1, 99, 0, &ex), -1);
    assert_int_equal(ex, -1);
    /* full but duplicate: the existing index is still reported */
    assert_int_equal(sdn_tree_add(&t, 3, 7, 0, &ex), -1);
    assert_int_equal(ex, 4);
    assert_int_equal(sdn_tree_validate(&t, &e), SDN_OK);
    sdn_tree_clear(&t);
    assert_int_equal(t.n, 0);
    assert_int_equal(sdn_tree_add(&t, 0, 1, 0, NULL), -1); /* node 0 no longer exists */
    sdn_tree_free(&t);
    sdn_tree_free(&t); /* idempotent */
}

static void test_chain(void **st) {
    (void)st;
    sdn_tree t;
    assert_int_equal(sdn_tree_init(&t, 8, NULL), SDN_OK);
    const int32_t a[] = {1, 2, 3, 4, 5}, b[] = {1, 2, 9, 9, 9};
    assert_int_equal(sdn_tree_add_chain(&t, -1, a, 5, 0.5f, 3), 3); /* depth cap */
    assert_int_equal(t.n, 3);
    /* re-uses 1 2, adds 9 9 (depth 4 allowed now), stops at depth 4 */
    assert_int_equal(sdn_tree_add_chain(&t, -1, b, 5, 0.25f, 4), 4);
    assert_int_equal(t.n, 5);
    assert_int_equal(t.token[3], 9), assert_int_equal(t.parent[3], 1);
    assert_int_equal(t.depth[4], 4);
    /* chain below a node */
    assert_int_equal(sdn_tree_add_chain(&t, 2, a + 3, 2, 0.1f, 10), 2);
    assert_int_equal(t.depth[6], 5);
    /* cap: one node left */
    assert_int_equal(sdn_tree_add_chain(&t, -1, b + 2, 3, 0.1f, 10), 1);
    assert_int_equal(t.n, 8);
    assert_int_equal(sdn_tree_add_chain(&t, -1, a, 5, 0.1f, 10), 5); /* all re-used, even when full */
    assert_int_equal(sdn_tree_add_chain(&t, 7, a, 2, 0.1f, 10), 0);  /* full */
    assert_int_equal(sdn_tree_add_chain(&t, 42, a, 2, 0.1f, 10), 0); /* bad parent */
    assert_int_equal(sdn_tree_add_chain(&t, -1, a, 2, 0.1f, 0), 0);  /* no depth allowed */
    assert_int_equal(sdn_tree_validate(&t, NULL), SDN_OK);
    sdn_tree_free(&t);
}

static void test_validate(void **st) {
    (void)st;
    sdn_tree t;
    sdn_err e = {0};
    assert_int_equal(sdn_tree_init(&t, 6, NULL), SDN_OK);
    sdn_tree_add(&t, -1, 1, 1, NULL);
    sdn_tree_add(&t, 0, 2, 1, NULL);
    sdn_tree_add(&t, 0, 3, 1, NULL);
    sdn_tree_add(&t, 2, 4, 1, NULL);
    assert_int_equal(sdn_tree_validate(&t, &e), SDN_OK);
    t.parent[1] = 3; /* forward reference */
    assert_int_equal(sdn_tree_validate(&t, &e), SDN_EFORMAT);
    assert_non_null(strstr(e.msg, "node 1"));
    t.parent[1] = 0;
    t.depth[3] = 2;
    sdn_err_clear(&e);
    assert_int_equal(sdn_tree_validate(&t, &e), SDN_EFORMAT);
    assert_non_null(strstr(e.msg, "node 3"));
    t.depth[3] = 3;
    t.token[2] = 2; /* siblings 1 and 2 now both carry token 2 */
    sdn_err_clear(&e);
    assert_int_equal(sdn_tree_validate(&t, &e), SDN_EFORMAT);
    assert_non_null(strstr(e.msg, "nodes 1 and 2"));
    t.token[2] = 3;
    t.score[0] = NAN;
    sdn_err_clear(&e);
    assert_int_equal(sdn_tree_validate(&t, &e), SDN_EFORMAT);
    assert_non_null(strstr(e.msg, "NaN"));
    t.score[0] = 1;
    t.n = 7;
    sdn_err_clear(&e);
    assert_int_equal(sdn_tree_validate(&t, &e), SDN_EFORMAT);
    t.n = 4;
    assert_int_equal(sdn_tree_validate(&t, &e), SDN_OK);
    sdn_tree_free(&t);
}

/* Random operations replayed on a naive model. */
static void test_random_ops(void **st) {
    (void)st;
    sdn_rng rng;
    sdn_rng_seed(&rng, 5);
    enum { CAP = 200 };
    for (int trial = 0; trial < 200; trial++) {
        sdn_tree t;
        int cap = 1 + (int)sdn_rng_below(&rng, CAP);
        assert_int_equal(sdn_tree_init(&t, cap, NULL), SDN_OK);
        int mp[CAP], mt[CAP], md[CAP], n = 0;
        for (int op = 0; op < 400; op++) {
            int parent = (int)sdn_rng_below(&rng, n + 2) - 1; /* may be == n: invalid */
            int32_t tok = (int32_t)sdn_rng_below(&rng, 4);
            int ex, got = sdn_tree_add(&t, parent, tok, (float)sdn_rng_double(&rng), &ex);
            int dup = -1;
            for (int i = 0; i < n; i++)
                if (mp[i] == parent && mt[i] == tok) dup = i;
            if (parent >= n) {
                assert_int_equal(got, -1), assert_int_equal(ex, -1);
            } else if (dup >= 0) {
                assert_int_equal(got, -1), assert_int_equal(ex, dup);
            } else if (n == cap) {
                assert_int_equal(got, -1), assert_int_equal(ex, -1);
            } else {
                assert_int_equal(got, n);
                mp[n] = parent, mt[n] = tok, md[n] = parent < 0 ? 1 : md[parent] + 1;
                n++;
            }
            assert_int_equal(t.n, n);
            int q = (int)sdn_rng_below(&rng, n + 1) - 1;
            int32_t qt = (int32_t)sdn_rng_below(&rng, 4);
            int want = -1;
            for (int i = 0; i < n; i++)
                if (mp[i] == q && mt[i] == qt) want = i;
            assert_int_equal(sdn_tree_find_child(&t, q, qt), want);
        }
        for (int i = 0; i < n; i++) {
            assert_int_equal(t.parent[i], mp[i]);
            assert_int_equal(t.token[i], mt[i]);
            assert_int_equal(t.depth[i], md[i]);
        }
        assert_int_equal(sdn_tree_validate(&t, NULL), SDN_OK);
        sdn_tree_free(&t);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_chain),
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_random_ops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
