/* bench_attention.c - the work of `sdnpu bench-attention` (tools.h; the options in
 * cli/cmd_bench_attention.c): the attention kernels (attention/attention.h)
 * on their own, per KV cache type, context length and batch rows, against a streaming-read
 * bandwidth probe measured in the same run.
 *
 * A cache of --layers layers of the model shape (default SmolLM2-135M's: 9 query heads, 3 KV
 * heads of 64) is filled with random entries; each timed call is the attention of one layer
 * (the layers taken in turn, so the reads come from memory as a decode step's do, not from
 * the cache of the previous call) for a batch of --rows rows after --context positions
 * (causal rows: a verify chain, or a decode row). The configurations take turns within each
 * pass over the layers (a drift of the machine's speed reaches them alike). Per configuration: the median time per
 * layer, the KV bytes a call reads (every visible position's keys and values of every KV
 * head) divided by that time, and that as a share of the probe: a one-row decode that keeps
 * up with memory reaches 100%. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench_util.h"
#include "common/sdn_util.h"
#include "attention/attention.h"
#include "tools/tools.h"
#include "kernels/kernel_path.h"
#include "attention/kv_cache.h"
#include "kernels/threadpool.h"

void sdn_tool_bench_attention_defaults(sdn_tool_bench_attention_opts *o) {
    *o = (sdn_tool_bench_attention_opts){.context = {256, 2048, 4096, 8192}, .n_context = 4, .rows = {1, 16}, .n_rows = 2, .cache = "f16,q8,f32",
                                         .threads = {1, 2}, .n_threads = 2, .heads = 9, .kv_heads = 3, .head_dim = 64, .layers = 30, .reps = 9};
}

int sdn_tool_bench_attention(const sdn_tool_bench_attention_opts *o) {
    const char *types_s = o->cache;
    const int heads = o->heads, kv_heads = o->kv_heads, hd = o->head_dim, layers = o->layers, reps = o->reps;
    const int *ctxs = o->context, *rows = o->rows, *threads = o->threads, nc = o->n_context, nr = o->n_rows, nt = o->n_threads;
    sdn_kv_type types[8];
    int ntypes = 0;
    for (const char *s = types_s; *s && ntypes < 8;) {
        char name[16];
        size_t len = strcspn(s, ",");
        snprintf(name, sizeof name, "%.*s", (int)(len < 15 ? len : 15), s);
        sdn_err err = {0};
        if (sdn_kv_type_parse(name, "--cache", &types[ntypes], &err)) {
            fprintf(stderr, "sdnpu bench-attention: %s\n", err.msg);
            return 2;
        }
        ntypes++;
        s += len + (s[len] == ',');
    }
    int max_ctx = 0, max_rows = 0, max_th = 0;
    for (int i = 0; i < nc; i++) max_ctx = ctxs[i] > max_ctx ? ctxs[i] : max_ctx;
    for (int i = 0; i < nr; i++) max_rows = rows[i] > max_rows ? rows[i] : max_rows;
    for (int i = 0; i < nt; i++) max_th = threads[i] > max_th ? threads[i] : max_th;
    if (max_rows > 256) {
        fprintf(stderr, "sdnpu bench-attention: --rows at most 256\n");
        return 2;
    }
    const int total = max_ctx + max_rows, kvd = kv_heads * hd, qd = heads * hd;
    double *probe = calloc((size_t)nt, sizeof *probe); /* read bandwidth per entry of the --threads list */
    if (!probe) {
        fprintf(stderr, "sdnpu bench-attention: out of memory\n");
        return 1;
    }
    for (int i = 0; i < nt; i++) probe[i] = bench_read_bandwidth(threads[i], (size_t)512 << 20, 5);
    printf("sdnpu bench-attention: kernels %s, %d heads (%d KV) of %d, %d layers rotated, median of %d passes\n", sdn_kpath_describe(), heads,
           kv_heads, hd, layers, reps);
    printf("streaming-read probe:");
    for (int i = 0; i < nt; i++) printf("  %d thread%s %.1f GB/s", threads[i], threads[i] > 1 ? "s" : "", probe[i]);
    printf("\nKV GB/s = keys and values of the visible positions of every KV head / time per layer\n\n");
    printf("cache  context  rows  thr   us/layer   KV GB/s   %%probe\n");
    float *k = bench_xmalloc((size_t)total * kvd * sizeof(float)), *v = bench_xmalloc((size_t)total * kvd * sizeof(float));
    float *q = bench_xmalloc((size_t)max_rows * qd * sizeof(float)), *out = bench_xmalloc((size_t)max_rows * qd * sizeof(float));
    sdn_rng r;
    sdn_rng_seed(&r, 1);
    for (size_t i = 0; i < (size_t)total * kvd; i++) {
        k[i] = (float)sdn_rng_below(&r, 2001) / 1000.0f - 1.0f;
        v[i] = (float)sdn_rng_below(&r, 2001) / 1000.0f - 1.0f;
    }
    for (size_t i = 0; i < (size_t)max_rows * qd; i++) q[i] = (float)sdn_rng_below(&r, 2001) / 1000.0f - 1.0f;
    sdn_model_config cfg = {0};
    cfg.n_layers = layers;
    cfg.n_kv_heads = kv_heads;
    cfg.head_dim = hd;
    double *t = bench_xmalloc((size_t)nc * nr * reps * sizeof(double));
    for (int ti = 0; ti < ntypes; ti++) {
        sdn_kv *kv = NULL;
        sdn_err err = {0};
        if (sdn_kv_new(&cfg, types[ti], types[ti], total, &kv, &err)) {
            fprintf(stderr, "sdnpu bench-attention: %s\n", err.msg);
            return 1;
        }
        for (int l = 0; l < layers; l++) sdn_kv_store(kv, l, 0, total, k, v);
        const double row_bytes = (double)sdn_kv_row_bytes(types[ti], kv_heads, hd) * 2; /* keys + values per position */
        for (int th = 0; th < nt; th++) {
            sdn_pool *pool = sdn_pool_new(threads[th]);
            sdn_att_ws *ws = NULL;
            if (!pool || sdn_att_ws_new(threads[th], max_rows > 64 ? max_rows : 64, heads, kv_heads, hd, total, &ws, &err)) {
                fprintf(stderr, "sdnpu bench-attention: %s\n", pool ? err.msg : "out of memory");
                return 1;
            }
            /* the configurations in turn within each pass (p outer), so a drift of the machine's
             * speed reaches every configuration alike; the median per configuration */
            for (int p = -1; p < reps; p++)
                for (int ci = 0; ci < nc; ci++)
                    for (int ri = 0; ri < nr; ri++) {
                        sdn_att_args a = {.kv = kv, .q = q, .ldq = qd, .out = out, .n = rows[ri], .n_heads = heads, .n_kv_heads = kv_heads,
                                          .head_dim = hd, .scale = 1.0f / sqrtf((float)hd), .kv_base = ctxs[ci]};
                        double t0 = sdn_now(); /* p = -1: the warm-up pass, not kept */
                        for (int l = 0; l < layers; l++) {
                            a.layer = l;
                            sdn_attention(ws, pool, &a);
                        }
                        if (p >= 0) t[((size_t)ci * nr + ri) * reps + p] = (sdn_now() - t0) / layers;
                    }
            for (int ci = 0; ci < nc; ci++)
                for (int ri = 0; ri < nr; ri++) {
                    const double med = bench_median(t + ((size_t)ci * nr + ri) * reps, reps), gbs = row_bytes * (ctxs[ci] + rows[ri]) / med / 1e9;
                    printf("%-5s  %7d  %4d  %3d  %9.1f  %8.1f  %6.0f%%\n", sdn_kv_type_name(types[ti]), ctxs[ci], rows[ri], threads[th], med * 1e6,
                           gbs, 100 * gbs / probe[th]);
                    fflush(stdout);
                }
            sdn_att_ws_free(ws);
            sdn_pool_free(pool);
        }
        sdn_kv_free(kv);
    }
    free(k);
    free(v);
    free(q);
    free(out);
    free(t);
    free(probe);
    return 0;
}
