/* test_graph_profile.c - profiling (graph_sched/profile.h) on a small model and the SQLite
 * profile cache:
 *   - one measurement per planned point, load bytes equal to the layout sizes, finite fits,
 *     no layout left loaded;
 *   - save / load round trip: the same measurements and, refitted on load, the same fits
 *     bit for bit; other keys find nothing; saving again replaces the profile;
 *   - a file that is not SQLite, an SQLite file of another application and a profile with
 *     a corrupt measurement are refused with messages naming the file. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <cmocka.h>

#include "engine/layout.h"
#include "modelfile/model.h"
#include "graph_sched/profile.h"
#include "support/test_util.h"

static sdn_model *model;
static sdn_profile *prof;

static int setup(void **state) {
    sdn_err e = {0};
    sdn_model_load_opts o = {.no_tokenizer = 1};
    if (sdn_model_load(tu_model_layers("tiny-llama", "Q8_0", 31, 4, NULL), &o, &model, &e)) fail_msg("%s", e.msg);
    sdn_profile_opts po;
    sdn_profile_opts_default(&po);
    po.n_blocks = 2;
    po.s1 = 32;
    po.reps = 1;
    int g1[] = {8, 16, 32}, g1h[] = {12, 24}, g2[] = {4, 8, 16}, g2h[] = {6, 12}, sh[] = {1, 4, 8};
    memcpy(po.g1_lens, g1, sizeof g1); po.n_g1 = 3;
    memcpy(po.g1_hold, g1h, sizeof g1h); po.n_g1_hold = 2;
    memcpy(po.g2_lens, g2, sizeof g2); po.n_g2 = 3;
    memcpy(po.g2_hold, g2h, sizeof g2h); po.n_g2_hold = 2;
    memcpy(po.shapes, sh, sizeof sh); po.n_shapes = 3;
    if (sdn_profile_measure(model, 2, &po, &prof, &e)) fail_msg("%s", e.msg);
    return 0;
}

static int teardown(void **state) {
    sdn_profile_free(prof);
    sdn_model_free(model);
    return 0;
}

static void test_measurements(void **state) {
    /* loads 2 kinds x 2 blocks; G1 per block 4 KV bases + 3 + 2 lengths; G2 3 bases + 3 + 2;
       overlapped G2 loads 2 and the G1 runs during them 2; decode steps: shape 1 (k = 1),
       4 (k = 1, 4), 8 (k = 1, 8) */
    assert_int_equal(prof->n_meas, 4 + 2 * 9 + 2 * 8 + 2 + 2 + 5);
    assert_int_equal(prof->n_blocks, 2);
    assert_int_equal(prof->n_layers, 4);
    int kinds[SDN_PROF_KINDS] = {0};
    for (int i = 0; i < prof->n_meas; i++) {
        const sdn_profile_meas *m = &prof->meas[i];
        assert_true(m->kind > SDN_PROF_NONE && m->kind < SDN_PROF_KINDS);
        assert_true(sdn_profile_kind_name(m->kind)[0] != 0);
        kinds[m->kind]++;
        assert_true(m->seconds > 0);
        if (m->kind == SDN_PROF_G1_LOAD || m->kind == SDN_PROF_G2_LOAD || m->kind == SDN_PROF_G2_LOAD_OVERLAPPED) {
            sdn_layout w = m->kind == SDN_PROF_G1_LOAD ? SDN_LAYOUT_F32 : SDN_LAYOUT_QUANT;
            assert_true(m->bytes == (double)sdn_layout_size(model, prof->l0[m->block], prof->l1[m->block], w));
        }
    }
    assert_int_equal(kinds[SDN_PROF_G1_COMPUTE], 18);
    assert_int_equal(kinds[SDN_PROF_G2_COMPUTE], 16);
    assert_int_equal(kinds[SDN_PROF_G1_LOAD], 2);
    assert_int_equal(kinds[SDN_PROF_G2_LOAD], 2);
    assert_int_equal(kinds[SDN_PROF_VERIFY_STEP], 5);
    assert_int_equal(kinds[SDN_PROF_G2_LOAD_OVERLAPPED], 2);
    assert_int_equal(kinds[SDN_PROF_G1_COMPUTE_DURING_LOAD], 2);
    assert_string_equal(sdn_profile_kind_name(SDN_PROF_NONE), "");
    assert_string_equal(sdn_profile_kind_name((sdn_profile_kind)SDN_PROF_KINDS), "");
    assert_true(isfinite(prof->g1.beta) && isfinite(prof->g2.beta) && prof->g1.r2 <= 1 && prof->g2.r2 <= 1);
    assert_true(prof->tau_g1 > 0 && prof->tau_g2 > 0 && prof->tau_g2_ovl > 0);
    assert_true(isfinite(prof->g1_hold_err) && isfinite(prof->verify_r2));
    assert_int_equal(sdn_layout_resident(model, 0, 4, SDN_LAYOUT_F32), 0);
    assert_int_equal(sdn_layout_resident(model, 0, 4, SDN_LAYOUT_QUANT), 0);
    char machine[160];
    sdn_machine_id(machine, sizeof machine);
    assert_string_equal(prof->machine, machine);
}

static void test_roundtrip(void **state) {
    const char *db = tu_tmp("prof.sqlite");
    remove(db);
    sdn_err e = {0};
    sdn_profile *p = NULL;
    assert_int_equal(sdn_profile_db_load(db, prof->fingerprint, 2, prof->machine, &p, &e), SDN_OK);
    assert_null(p); /* absent file */
    assert_int_equal(sdn_profile_db_save(db, prof, &e), SDN_OK);
    assert_int_equal(sdn_profile_db_save(db, prof, &e), SDN_OK); /* replaces */
    assert_int_equal(sdn_profile_db_load(db, prof->fingerprint, 2, prof->machine, &p, &e), SDN_OK);
    assert_non_null(p);
    assert_int_equal(p->n_meas, prof->n_meas);
    for (int i = 0; i < p->n_meas; i++) {
        const sdn_profile_meas *a = &p->meas[i], *b = &prof->meas[i];
        assert_true(a->block == b->block && a->kind == b->kind && a->rows == b->rows && a->kv_base == b->kv_base &&
                    a->held_out == b->held_out && a->seconds == b->seconds && a->bytes == b->bytes);
    }
    assert_memory_equal(&p->g1, &prof->g1, sizeof p->g1);
    assert_memory_equal(&p->g2, &prof->g2, sizeof p->g2);
    assert_true(p->tau_g2 == prof->tau_g2 && p->verify[1] == prof->verify[1] && p->g1_hold_err == prof->g1_hold_err);
    assert_memory_equal(p->l1, prof->l1, sizeof(int) * 2);
    sdn_profile_free(p);
    sqlite3 *s;
    assert_int_equal(sqlite3_open(db, &s), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(s, "SELECT count(*) FROM profile", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 1);
    sqlite3_finalize(st);
    sqlite3_close(s);
    assert_int_equal(sdn_profile_db_load(db, prof->fingerprint, 3, prof->machine, &p, &e), SDN_OK);
    assert_null(p);
    assert_int_equal(sdn_profile_db_load(db, "0123456789abcdef", 2, prof->machine, &p, &e), SDN_OK);
    assert_null(p);
}

static void test_bad_files(void **state) {
    sdn_err e = {0};
    sdn_profile *p = NULL;
    const char *junk = tu_tmp("junk.sqlite");
    char bytes[4096];
    for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (char)(i * 37 + 11);
    assert_int_equal(tu_write_file(junk, bytes, sizeof bytes), 0);
    assert_int_equal(sdn_profile_db_load(junk, prof->fingerprint, 2, prof->machine, &p, &e), SDN_EDB);
    assert_non_null(strstr(e.msg, junk));
    e = (sdn_err){0};
    assert_int_equal(sdn_profile_db_save(junk, prof, &e), SDN_EDB);

    const char *foreign = tu_tmp("foreign.sqlite");
    remove(foreign);
    sqlite3 *s;
    assert_int_equal(sqlite3_open(foreign, &s), SQLITE_OK);
    assert_int_equal(sqlite3_exec(s, "CREATE TABLE notes(x TEXT)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(s);
    e = (sdn_err){0};
    assert_int_equal(sdn_profile_db_load(foreign, prof->fingerprint, 2, prof->machine, &p, &e), SDN_EDB);
    assert_non_null(strstr(e.msg, "another application"));

    const char *bad = tu_tmp("badmeas.sqlite");
    remove(bad);
    assert_int_equal(sdn_profile_db_save(bad, prof, &e), SDN_OK);
    assert_int_equal(sqlite3_open(bad, &s), SQLITE_OK);
    assert_int_equal(sqlite3_exec(s, "UPDATE measurement SET seconds = -1 WHERE rowid = 3", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(s);
    e = (sdn_err){0};
    assert_int_equal(sdn_profile_db_load(bad, prof->fingerprint, 2, prof->machine, &p, &e), SDN_EFORMAT);
    assert_non_null(strstr(e.msg, "invalid measurement"));
    assert_null(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_measurements),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_bad_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
