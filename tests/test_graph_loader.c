/* test_graph_loader.c - the loader thread (graph_sched/loader.h): jobs run one at a time
 * in submission order (each starts after the previous ended), allocate exactly the layout
 * sizes, report events in order; bad ranges and unknown jobs are refused; reset only when
 * idle; freeing with queued jobs returns. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "engine/layout.h"
#include "engine/model.h"
#include "graph_sched/loader.h"
#include "support/test_util.h"

static sdn_model *load(void) {
    sdn_model *m;
    sdn_err e = {0};
    sdn_model_load_opts o = {.no_tokenizer = 1};
    if (sdn_model_load(tu_model_layers("tiny-llama", "Q8_0", 41, 4, NULL), &o, &m, &e)) fail_msg("%s", e.msg);
    return m;
}

static int events[64], n_events;
static void on_event(void *ud, int job, int done) {
    (void)ud;
    if (n_events < 64) events[n_events++] = job * 2 + done;
}

static void test_fifo(void **state) {
    sdn_model *m = load();
    sdn_loader *ld;
    sdn_err e = {0};
    assert_int_equal(sdn_loader_new(m, &ld, &e), SDN_OK);
    int ids[6];
    struct { int l0, l1; sdn_layout w; } jobs[6] = {{0, 1, SDN_LAYOUT_QUANT}, {1, 2, SDN_LAYOUT_QUANT}, {2, 4, SDN_LAYOUT_QUANT},
                                                    {0, 2, SDN_LAYOUT_F32},   {2, 3, SDN_LAYOUT_F32},   {3, 4, SDN_LAYOUT_F32}};
    n_events = 0;
    for (int i = 0; i < 6; i++) {
        assert_int_equal(sdn_loader_submit(ld, jobs[i].l0, jobs[i].l1, jobs[i].w, on_event, NULL, &ids[i], &e), SDN_OK);
        assert_int_equal(ids[i], i);
    }
    sdn_loader_job_info info[6];
    for (int i = 5; i >= 0; i--) assert_int_equal(sdn_loader_wait(ld, ids[i], &info[i], &e), SDN_OK);
    for (int i = 0; i < 6; i++) {
        assert_true(info[i].t_start >= info[i].t_submit && info[i].t_end >= info[i].t_start);
        if (i) assert_true(info[i].t_start >= info[i - 1].t_end);
        assert_int_equal(info[i].bytes, sdn_layout_size(m, jobs[i].l0, jobs[i].l1, jobs[i].w));
        assert_true(sdn_loader_done(ld, ids[i]));
    }
    assert_int_equal(n_events, 12);
    for (int i = 0; i < 12; i++) assert_int_equal(events[i], i);
    for (int l = 0; l < 4; l++) {
        assert_true(sdn_layout_is_loaded(m, l, SDN_LAYOUT_QUANT));
        assert_true(sdn_layout_is_loaded(m, l, SDN_LAYOUT_F32));
    }
    assert_int_equal(sdn_loader_count(ld), 6);
    assert_int_equal(sdn_loader_reset(ld, &e), SDN_OK);
    assert_int_equal(sdn_loader_count(ld), 0);
    assert_int_equal(sdn_loader_submit(ld, 2, 2, SDN_LAYOUT_QUANT, NULL, NULL, &ids[0], &e), SDN_EINVAL);
    assert_int_equal(sdn_loader_submit(ld, 0, 5, SDN_LAYOUT_QUANT, NULL, NULL, &ids[0], &e), SDN_EINVAL);
    assert_int_equal(sdn_loader_wait(ld, 0, NULL, &e), SDN_EINVAL);
    sdn_loader_free(ld);
    sdn_layout_unload(m, 0, 4, SDN_LAYOUT_F32);
    sdn_layout_unload(m, 0, 4, SDN_LAYOUT_QUANT);
    sdn_model_free(m);
}

static void test_free_with_queue(void **state) {
    sdn_model *m = load();
    sdn_loader *ld;
    sdn_err e = {0};
    assert_int_equal(sdn_loader_new(m, &ld, &e), SDN_OK);
    int id;
    for (int i = 0; i < 20; i++) {
        assert_int_equal(sdn_loader_submit(ld, i % 4, i % 4 + 1, i % 2 ? SDN_LAYOUT_F32 : SDN_LAYOUT_QUANT, NULL, NULL, &id, &e), SDN_OK);
    }
    sdn_loader_free(ld); /* finishes the running job, drops the rest */
    sdn_layout_unload(m, 0, 4, SDN_LAYOUT_F32);
    sdn_layout_unload(m, 0, 4, SDN_LAYOUT_QUANT);
    sdn_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_fifo), cmocka_unit_test(test_free_with_queue)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
