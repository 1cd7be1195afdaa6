/* test_graph_loader.c - the loader thread (graph_sched/loader.h): jobs run one at a time
 * in submission order (each starts after the previous ended), allocate exactly the layout
 * sizes, report events in order; bad ranges and unknown jobs are refused; reset only when
 * idle; freeing with queued jobs returns. The layout reserve (engine/layout.h): freed layout
 * memory is kept up to its size and reused by later loads, whose contents still equal the
 * file's rows byte for byte; the reserve never exceeds its size; fill faults it in.
 * Pinning: bad CPU ranges are refused, valid ones accepted. The decode layout a default
 * context makes resident (layout.h, sdn_layout_decode_resident): every layer's G2 and the
 * packed output matrix are there, a context with file_layout = 1 loads nothing, the logits
 * on the packed weights equal the file layout's bit for bit, and the file's rows read through
 * the mapping after its pages were dropped are still the file's bytes. */
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
#include "engine/layout.h"
#include "kernels/matmul.h"
#include "modelfile/model.h"
#include "engine/model_internal.h"
#include "kernels/quant.h"
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

/* every matrix of layer l: the G2 copy holds the file's rows (packed for Q8_0/Q4_0/Q4_1/Q4_K/Q6_K: read
 * back row by row, matmul.h), the G1 copy their dequantization's first value */
static void check_layer_quant(sdn_model *m, int l) {
    sdn_layer *y = &m->layers[l];
    sdn_weight *ws[] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->w_gate, &y->w_up, &y->w_down};
    for (int i = 0; i < 7; i++) {
        assert_non_null(ws[i]->q);
        assert_int_equal((uintptr_t)ws[i]->q % (i ? 4096u : 2u << 20), 0); /* one 2 MiB-aligned chunk per layer, matrices at 4 KiB */
        if (!sdn_matmul_packable(ws[i]->type)) {
            assert_memory_equal(ws[i]->q, ws[i]->data, (size_t)ws[i]->out * ws[i]->row_bytes);
            continue;
        }
        uint8_t *row = malloc(ws[i]->row_bytes);
        for (int64_t o = 0; o < ws[i]->out; o++) {
            sdn_matmul_packed_row(ws[i]->type, ws[i]->q, ws[i]->in, o, row);
            assert_memory_equal(row, (const uint8_t *)ws[i]->data + (size_t)o * ws[i]->row_bytes, ws[i]->row_bytes);
        }
        free(row);
    }
}

static void test_reserve(void **state) {
    sdn_model *m = load();
    sdn_err e = {0};
    size_t R = sdn_layout_alloc_size(m, 0, 1, SDN_LAYOUT_QUANT);
    assert_true(R >= sdn_layout_size(m, 0, 1, SDN_LAYOUT_QUANT) && R % (2u << 20) == 0);
    assert_int_equal(sdn_layout_reserve_bytes(m), 0);
    assert_int_equal(sdn_layout_set_reserve(m, R, 0, &e), SDN_OK);
    assert_int_equal(sdn_layout_reserve_bytes(m), 0); /* no fill: nothing mapped yet */
    assert_int_equal(sdn_layout_load(m, 0, 4, SDN_LAYOUT_QUANT, NULL, &e), SDN_OK);
    for (int l = 0; l < 4; l++) check_layer_quant(m, l);
    /* an unload fills the reserve up to its size, further unloads release the rest */
    sdn_layout_unload(m, 1, 2, SDN_LAYOUT_QUANT);
    assert_int_equal(sdn_layout_reserve_bytes(m), R);
    sdn_layout_unload(m, 2, 4, SDN_LAYOUT_QUANT);
    assert_int_equal(sdn_layout_reserve_bytes(m), R);
    /* a load takes the reserve (memory holding the old rows of another layer) and copies the right rows */
    assert_int_equal(sdn_layout_load(m, 3, 4, SDN_LAYOUT_QUANT, NULL, &e), SDN_OK);
    assert_int_equal(sdn_layout_reserve_bytes(m), 0);
    check_layer_quant(m, 3);
    /* G1 takes a reserve chunk that fits (the fill's), and its values equal a fresh dequantization */
    sdn_layout_unload(m, 3, 4, SDN_LAYOUT_QUANT);
    assert_int_equal(sdn_layout_reserve_bytes(m), R);
    size_t RF = sdn_layout_alloc_size(m, 0, 1, SDN_LAYOUT_F32);
    assert_int_equal(sdn_layout_set_reserve(m, RF + R, 1, &e), SDN_OK);
    assert_int_equal(sdn_layout_reserve_bytes(m), RF + R);
    assert_int_equal(sdn_layout_load(m, 2, 3, SDN_LAYOUT_F32, NULL, &e), SDN_OK);
    assert_int_equal(sdn_layout_reserve_bytes(m), R);
    {
        sdn_layer *y = &m->layers[2];
        sdn_weight *ws[] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->w_gate, &y->w_up, &y->w_down};
        for (int i = 0; i < 7; i++) {
            float *row = malloc((size_t)ws[i]->in * sizeof(float));
            for (int64_t r = 0; r < ws[i]->out; r++) {
                sdn_dequantize_row(ws[i]->type, (const char *)ws[i]->data + (size_t)r * ws[i]->row_bytes, row, ws[i]->in);
                assert_memory_equal(row, ws[i]->f32 + r * ws[i]->in, (size_t)ws[i]->in * sizeof(float));
            }
            free(row);
        }
    }
    /* G2 loads split the G1 chunk freed into the reserve */
    sdn_layout_unload(m, 2, 3, SDN_LAYOUT_F32);
    assert_int_equal(sdn_layout_reserve_bytes(m), RF + R);
    assert_int_equal(sdn_layout_load(m, 1, 4, SDN_LAYOUT_QUANT, NULL, &e), SDN_OK);
    assert_true(sdn_layout_reserve_bytes(m) <= RF + R - 2 * R);
    for (int l = 0; l < 4; l++) check_layer_quant(m, l);
    /* fill maps and faults in what is missing; lowering releases the excess; 0 releases all */
    assert_int_equal(sdn_layout_set_reserve(m, 3 * R, 1, &e), SDN_OK);
    assert_int_equal(sdn_layout_reserve_bytes(m), 3 * R);
    assert_int_equal(sdn_layout_set_reserve(m, R + (3u << 20), 0, &e), SDN_OK);
    assert_int_equal(sdn_layout_reserve_bytes(m), R + (2u << 20));
    assert_int_equal(sdn_layout_set_reserve(m, 0, 0, &e), SDN_OK);
    assert_int_equal(sdn_layout_reserve_bytes(m), 0);
    sdn_layout_unload(m, 0, 4, SDN_LAYOUT_QUANT);
    assert_int_equal(sdn_layout_reserve_bytes(m), 0);
    /* freeing the model with layouts and a filled reserve releases both (ASan/valgrind clean) */
    assert_int_equal(sdn_layout_set_reserve(m, 2 * R, 1, &e), SDN_OK);
    assert_int_equal(sdn_layout_load(m, 0, 2, SDN_LAYOUT_QUANT, NULL, &e), SDN_OK);
    sdn_model_free(m);
}

static void test_pin(void **state) {
    sdn_model *m = load();
    sdn_loader *ld;
    sdn_err e = {0};
    assert_int_equal(sdn_loader_new(m, &ld, &e), SDN_OK);
    int online = sdn_cpus_online();
    assert_true(online >= 1);
    assert_int_equal(sdn_loader_pin(ld, online, 1, &e), SDN_EINVAL);
    assert_non_null(strstr(e.msg, "online CPUs"));
    e = (sdn_err){0};
    assert_int_equal(sdn_loader_pin(ld, 0, 0, &e), SDN_EINVAL);
    e = (sdn_err){0};
    assert_int_equal(sdn_loader_pin(ld, online - 1, 1, &e), SDN_OK);
    int id;
    assert_int_equal(sdn_loader_submit(ld, 0, 1, SDN_LAYOUT_QUANT, NULL, NULL, &id, &e), SDN_OK);
    assert_int_equal(sdn_loader_wait(ld, id, NULL, &e), SDN_OK);
    assert_int_equal(sdn_pin_self(-1, 1, &e), SDN_EINVAL);
    e = (sdn_err){0};
    assert_int_equal(sdn_pin_self(0, online + 1, &e), SDN_EINVAL);
    e = (sdn_err){0};
    assert_int_equal(sdn_pin_self(0, online, &e), SDN_OK); /* all CPUs: what the test had */
    sdn_loader_free(ld);
    sdn_model_free(m);
}

static void forward_logits(sdn_ctx *c, int vocab, float *logits) {
    static const int32_t toks[5] = {1, 17, 42, 7, 99};
    sdn_batch b = {.n = 5, .tokens = toks, .n_logits = -1, .invariant = 1};
    sdn_err e = {0};
    if (sdn_forward(c, &b, logits, &e)) fail_msg("%s", e.msg);
    (void)vocab;
}

static void test_decode_layout(void **state) {
    (void)state;
    sdn_model *m = load();
    const int L = m->cfg.n_layers, V = m->cfg.vocab;
    float *la = malloc(sizeof(float) * 5 * (size_t)V), *lb = malloc(sizeof(float) * 5 * (size_t)V);
    sdn_err e = {0};
    sdn_ctx *a = NULL, *b = NULL;
    sdn_ctx_params pa = {.n_ctx = 64, .n_threads = 2, .file_layout = 1}, pb = {.n_ctx = 64, .n_threads = 2};
    assert_int_equal(sdn_ctx_new(m, &pa, &a, &e), SDN_OK);
    assert_int_equal(sdn_layout_resident(m, 0, L, SDN_LAYOUT_QUANT), 0);
    assert_null(m->output.q);
    forward_logits(a, V, la); /* the file's layout */
    assert_int_equal(sdn_ctx_new(m, &pb, &b, &e), SDN_OK);
    for (int l = 0; l < L; l++) {
        assert_true(sdn_layout_layer_packed(m, l));
        assert_true(sdn_layout_is_loaded(m, l, SDN_LAYOUT_QUANT));
        check_layer_quant(m, l); /* also reads the mapping whose pages were dropped */
    }
    assert_int_equal(sdn_matmul_packable(m->output.type), m->output.q != NULL);
    if (m->output.q) {
        uint8_t *row = malloc(m->output.row_bytes);
        for (int64_t o = 0; o < m->output.out; o++) {
            sdn_matmul_packed_row(m->output.type, m->output.q, m->output.in, o, row);
            assert_memory_equal(row, (const uint8_t *)m->output.data + (size_t)o * m->output.row_bytes, m->output.row_bytes);
        }
        free(row);
    }
    forward_logits(b, V, lb); /* the packed layout */
    assert_memory_equal(la, lb, sizeof(float) * 5 * (size_t)V);
    sdn_ctx_free(a);
    sdn_ctx_free(b);
    free(la);
    free(lb);
    sdn_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_fifo), cmocka_unit_test(test_free_with_queue), cmocka_unit_test(test_reserve),
                                       cmocka_unit_test(test_pin), cmocka_unit_test(test_decode_layout)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
