/* bench_model.c - the work of `sdnpu bench-model` (tools.h; the options in
 * cli/cmd_bench_model.c): prefill and decode speed of the engine on a
 * model (by default Qwen2.5-0.5B-shaped Q8_0 and F16 models written by make-model), with 1
 * and 2 threads, against baselines measured in the same run:
 *   - decode: weight bytes read per token / seconds per token, as a fraction of a
 *     streaming-read bandwidth probe with the same thread count (target >= 70%);
 *   - prefill GEMMs: GFLOP/s of the prefill matmuls (the prefill-matmul setting of
 *     kernels/kernel_path.h, and with the F32 prefill layout resident) as a fraction of
 *     OpenBLAS SGEMM alone on the same shapes (target >= 60%), and the setting's prefill
 *     against SGEMM on dequantized weights, interleaved;
 *   - tokenizer: time to tokenize a ~4,000-token document vs. the time to prefill it. */
#include <cblas.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/sdn_util.h"
#include "tools/bench_util.h"
#include "tools/tools.h"
#include "engine/forward.h"
#include "kernels/kernel_path.h"
#include "engine/layout.h"
#include "kernels/matmul.h"
#include "modelfile/model.h"
#include "engine/model_internal.h"
#include "tokenizer/tokenizer.h"
#include "tools/vocab_gen.h"

extern void openblas_set_num_threads(int num_threads);

typedef struct bopts {
    int prompt, gen, reps;
    int threads[8], n_threads;
    int table_only; /* --table-only: the per-thread table, none of the measurements after it */
    cJSON *json; /* --json: one entry per model and thread count */
} bopts;

/* GFLOP/s of cblas_sgemm alone over the layer matmul shapes for a chunk of n rows. */
static double sgemm_alone(const sdn_model *m, int n, int threads, int reps) {
    const sdn_layer *y = &m->layers[0];
    const sdn_weight *ws[] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->w_gate, &y->w_up, &y->w_down};
    openblas_set_num_threads(threads);
    double flops = 0, total = 0;
    for (int i = 0; i < 7; i++) {
        const sdn_weight *w = ws[i];
        float *W = bench_xmalloc((size_t)w->out * w->in * sizeof(float)), *X = bench_xmalloc((size_t)n * w->in * sizeof(float)),
              *Y = bench_xmalloc((size_t)n * w->out * sizeof(float));
        for (size_t k = 0; k < (size_t)w->out * w->in; k++) W[k] = (float)(k % 13) * 0.01f;
        for (size_t k = 0; k < (size_t)n * w->in; k++) X[k] = (float)(k % 7) * 0.1f;
        double t[16];
        for (int r = 0; r < reps + 1; r++) {
            double t0 = sdn_now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, (int)w->out, (int)w->in, 1.0f, X, (int)w->in, W, (int)w->in, 0.0f, Y,
                        (int)w->out);
            if (r) t[r - 1] = sdn_now() - t0;
        }
        total += bench_median(t, reps);
        flops += 2.0 * n * (double)w->out * (double)w->in;
        free(W); free(X); free(Y);
    }
    return flops / total / 1e9;
}

static double layer_flops(const sdn_model *m, int n) {
    double f = 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const sdn_layer *y = &m->layers[l];
        const sdn_weight *ws[] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->w_gate, &y->w_up, &y->w_down};
        for (int i = 0; i < 7; i++) f += 2.0 * n * (double)ws[i]->out * (double)ws[i]->in;
    }
    return f;
}

static int bench_one(const char *path, const bopts *o) {
    sdn_err err = {0};
    sdn_model *m;
    sdn_model_load_opts lo = {0};
    if (sdn_model_load(path, &lo, &m, &err)) {
        fprintf(stderr, "sdnpu: %s\n", err.msg);
        return 1;
    }
    const sdn_model_config *cfg = sdn_model_cfg(m);
    size_t bpt = sdn_model_bytes_per_token(m);
    printf("\nmodel %s\n  %d layers, dim %d, vocab %d; weights read per decoded token %.1f MiB\n", path, cfg->n_layers, cfg->dim, cfg->vocab,
           (double)bpt / (1 << 20));
    int V = cfg->vocab, P = o->prompt;
    int32_t *toks = bench_xmalloc((size_t)(P + o->gen + 1) * sizeof(int32_t));
    sdn_rng rng;
    sdn_rng_seed(&rng, 7);
    for (int i = 0; i < P + o->gen + 1; i++) toks[i] = (int32_t)sdn_rng_below(&rng, (uint64_t)V);
    double tok_prefill_rate = 0;
    printf("  %-7s | %-12s %-12s %-10s %-8s | %-10s %-9s %-10s %-9s %-7s\n", "threads", "prefill t/s", "GEMM GF/s", "SGEMM GF/s",
           "ratio", "decode t/s", "ms/token", "weight GB/s", "probe GB/s", "ratio");
    for (int ti = 0; ti < o->n_threads; ti++) {
        int th = o->threads[ti];
        sdn_ctx *c;
        sdn_ctx_params cp = {.n_ctx = P + o->gen + 8, .n_threads = th, .max_batch = P};
        if (sdn_ctx_new(m, &cp, &c, &err)) { fprintf(stderr, "sdnpu: %s\n", err.msg); return 1; }
        double pt[16], gm[16], dt[4096];
        int nd = 0;
        for (int r = 0; r < o->reps + 1; r++) {
            sdn_kv_truncate(c, 0);
            sdn_ctx_reset_stats(c);
            sdn_batch b = {.n = P, .tokens = toks, .n_logits = 0};
            double t0 = sdn_now();
            if (sdn_forward(c, &b, NULL, &err)) { fprintf(stderr, "sdnpu: %s\n", err.msg); return 1; }
            double t = sdn_now() - t0;
            sdn_fwd_stats st;
            sdn_ctx_stats(c, &st);
            float *lg = bench_xmalloc((size_t)V * sizeof(float));
            for (int g = 0; g < o->gen; g++) {
                int32_t row = 0;
                sdn_batch d = {.n = 1, .tokens = &toks[P + g], .logit_rows = &row, .n_logits = 1, .invariant = 1};
                double t1 = sdn_now();
                if (sdn_forward(c, &d, lg, &err)) { fprintf(stderr, "sdnpu: %s\n", err.msg); return 1; }
                if (r) dt[nd++] = sdn_now() - t1;
            }
            free(lg);
            if (r) { pt[r - 1] = t; gm[r - 1] = st.matmul_s; }
        }
        double p = bench_median(pt, o->reps), g = bench_median(gm, o->reps), d = bench_median(dt, nd);
        double gemm = layer_flops(m, P) / g / 1e9, alone = sgemm_alone(m, P, th, o->reps);
        double probe = bench_read_bandwidth(th, (size_t)1 << 30, 5), wgbs = (double)bpt / d / 1e9;
        if (th == o->threads[o->n_threads - 1]) tok_prefill_rate = P / p;
        char ratio[16];
        snprintf(ratio, sizeof ratio, "%.0f%%", 100 * gemm / alone);
        printf("  %-7d | %-12.1f %-12.1f %-10.1f %-8s | %-10.1f %-9.2f %-10.2f %-9.2f %.0f%%\n", th, P / p, gemm, alone, ratio, 1.0 / d,
               1000 * d, wgbs, probe, 100 * wgbs / probe);
        if (o->json) {
            cJSON *r = cJSON_CreateObject();
            cJSON_AddStringToObject(r, "model", path);
            cJSON_AddStringToObject(r, "kernel", sdn_matmul_isa());
            cJSON_AddStringToObject(r, "prefill_matmul", sdn_prefill_mm_name(sdn_prefill_mm_get()));
            cJSON_AddNumberToObject(r, "threads", th);
            cJSON_AddNumberToObject(r, "prompt_tokens", P);
            cJSON_AddNumberToObject(r, "prefill_tokens_per_s", P / p);
            cJSON_AddNumberToObject(r, "decode_tokens_per_s", 1.0 / d);
            cJSON_AddNumberToObject(r, "decode_ms_per_token", 1000 * d);
            cJSON_AddItemToArray(o->json, r);
        }
        sdn_ctx_free(c);
    }
    if (o->table_only) {
        free(toks);
        sdn_model_free(m);
        return 0;
    }
    /* the prefill matmul setting against SGEMM on dequantized weights (the only choice before
     * the batch kernels took prefill), interleaved round by round */
    if (sdn_prefill_mm_get() != SDN_PREFILL_MM_SGEMM) {
        int th = o->threads[o->n_threads - 1];
        const sdn_prefill_mm set = sdn_prefill_mm_get();
        sdn_ctx *c;
        sdn_ctx_params cp = {.n_ctx = P + 8, .n_threads = th, .max_batch = P};
        if (sdn_ctx_new(m, &cp, &c, &err) == SDN_OK) {
            double tm[2][16];
            for (int r = 0; r < o->reps + 1; r++)
                for (int k = 0; k < 2; k++) {
                    sdn_prefill_mm_set(k ? SDN_PREFILL_MM_SGEMM : set);
                    sdn_kv_truncate(c, 0);
                    sdn_batch b = {.n = P, .tokens = toks, .n_logits = 0};
                    double t0 = sdn_now();
                    if (sdn_forward(c, &b, NULL, &err)) { fprintf(stderr, "sdnpu: %s\n", err.msg); return 1; }
                    if (r) tm[k][r - 1] = sdn_now() - t0;
                }
            sdn_prefill_mm_set(set);
            double a = bench_median(tm[0], o->reps), g = bench_median(tm[1], o->reps);
            printf("  prefill matmul %s vs sgemm (dequantized per call), %d threads, interleaved: %.1f vs %.1f tok/s = %.2fx\n",
                   sdn_prefill_mm_name(set), th, P / a, P / g, g / a);
            sdn_ctx_free(c);
        }
    }
    /* prefill predictions: the same prefill also producing top-4 (token, probability) per
     * position through the tiled LM head */
    {
        int th = o->threads[o->n_threads - 1];
        sdn_ctx *c;
        sdn_ctx_params cp = {.n_ctx = P + 8, .n_threads = th, .max_batch = P};
        if (sdn_ctx_new(m, &cp, &c, &err) == SDN_OK) {
            int32_t *tk = bench_xmalloc(sizeof(int32_t) * (size_t)P * 4);
            float *pr = bench_xmalloc(sizeof(float) * (size_t)P * 4);
            /* the context's distinct tokens: the engine's default candidate vocabulary */
            uint8_t *seen = bench_xcalloc((size_t)V, 1);
            int32_t *cv = bench_xmalloc(sizeof(int32_t) * (size_t)P);
            int ncv = 0;
            for (int i = 0; i < P; i++) seen[toks[i]] = 1;
            for (int t = 0; t < V; t++) if (seen[t]) cv[ncv++] = t;
            free(seen);
            double t_mode[3][16];
            for (int r = 0; r < o->reps + 1; r++)
                for (int mode = 0; mode < 3; mode++) { /* plain, context vocabulary, full vocabulary */
                    sdn_kv_truncate(c, 0);
                    sdn_batch b = {.n = P, .tokens = toks, .n_logits = mode ? -1 : 0, .topk = mode ? 4 : 0, .topk_tok = tk,
                                   .topk_prob = pr, .topk_vocab = mode == 1 ? cv : NULL, .n_topk_vocab = mode == 1 ? ncv : 0};
                    double t0 = sdn_now();
                    sdn_forward(c, &b, NULL, &err);
                    if (r > 0) t_mode[mode][r - 1] = sdn_now() - t0;
                }
            double a = bench_median(t_mode[0], o->reps), bc = bench_median(t_mode[1], o->reps), bf = bench_median(t_mode[2], o->reps);
            printf("  prefill predictions (top-4 per position, %d threads): prefill %.0f ms; over the context's %d distinct tokens (the "
                   "default) %.0f ms (%+.1f%%); over all %d tokens %.0f ms (%+.0f%%)\n",
                   th, 1000 * a, ncv, 1000 * bc, 100 * (bc - a) / a, V, 1000 * bf, 100 * (bf - a) / a);
            free(cv);
            free(tk);
            free(pr);
            sdn_ctx_free(c);
        }
    }
    /* prefill with the F32 layout resident (what the prefill graph G1 keeps) */
    size_t f32b = 0;
    if (sdn_layout_load(m, 0, cfg->n_layers, SDN_LAYOUT_F32, &f32b, &err) == SDN_OK) {
        int th = o->threads[o->n_threads - 1];
        sdn_ctx *c;
        sdn_ctx_params cp = {.n_ctx = P + 8, .n_threads = th, .max_batch = P};
        if (sdn_ctx_new(m, &cp, &c, &err) == SDN_OK) {
            double pt[16], gm[16];
            for (int r = 0; r < o->reps + 1; r++) {
                sdn_kv_truncate(c, 0);
                sdn_ctx_reset_stats(c);
                sdn_batch b = {.n = P, .tokens = toks, .n_logits = 0};
                double t0 = sdn_now();
                sdn_forward(c, &b, NULL, &err);
                sdn_fwd_stats st;
                sdn_ctx_stats(c, &st);
                if (r) { pt[r - 1] = sdn_now() - t0; gm[r - 1] = st.matmul_s; }
            }
            double p = bench_median(pt, o->reps), g = bench_median(gm, o->reps);
            double gemm = layer_flops(m, P) / g / 1e9, alone = sgemm_alone(m, P, th, o->reps);
            printf("  F32 prefill layout resident (%.0f MiB), %d threads: prefill %.1f tok/s, GEMM %.1f GFLOP/s = %.0f%% of SGEMM alone "
                   "(target >= 60%%)\n",
                   (double)f32b / (1 << 20), th, P / p, gemm, 100 * gemm / alone);
            sdn_ctx_free(c);
        }
        sdn_layout_unload(m, 0, cfg->n_layers, SDN_LAYOUT_F32);
    }
    /* tokenizer cost vs prefill for a ~4,000-token document */
    const sdn_tokenizer *tk = sdn_model_tokenizer(m);
    if (tk && tok_prefill_rate > 0) {
        size_t cl = strlen(sdn_builtin_corpus);
        char *doc = bench_xmalloc(cl * 8 + 1);
        int32_t *ids = NULL;
        int n_ids = 0, copies = 1;
        for (;;) {
            for (int k = 0; k < copies; k++) memcpy(doc + (size_t)k * cl, sdn_builtin_corpus, cl);
            doc[(size_t)copies * cl] = 0;
            free(ids);
            ids = NULL;
            if (sdn_tokenize(tk, doc, (size_t)copies * cl, 1, 0, &ids, &n_ids, &err)) break;
            if (n_ids >= 4000 || copies == 8) break;
            copies++;
        }
        double tt[9];
        for (int r = 0; r < 9; r++) {
            double t0 = sdn_now();
            int32_t *x = NULL;
            int nx;
            sdn_tokenize(tk, doc, (size_t)copies * cl, 1, 0, &x, &nx, &err);
            tt[r] = sdn_now() - t0;
            free(x);
        }
        double t = bench_median(tt, 9), pre = n_ids / tok_prefill_rate;
        printf("  tokenizer: %d tokens (%zu bytes) in %.2f ms = %.2f%% of their prefill time (%.2f s)\n", n_ids, (size_t)copies * cl,
               1000 * t, 100 * t / pre, pre);
        free(ids);
        free(doc);
    }
    free(toks);
    sdn_model_free(m);
    return 0;
}

void sdn_tool_bench_model_defaults(sdn_tool_bench_model_opts *o) {
    *o = (sdn_tool_bench_model_opts){.prompt = 256, .gen = 32, .reps = 3, .threads = {1, 2}, .n_threads = 2, .shape = "qwen2.5-0.5b",
                                     .types = "Q8_0,F16"};
}

int sdn_tool_bench_model(const sdn_tool_bench_model_opts *to) {
    bopts o = {.prompt = to->prompt, .gen = to->gen, .reps = to->reps, .n_threads = to->n_threads, .table_only = to->table_only};
    memcpy(o.threads, to->threads, sizeof o.threads);
    const char *models[8];
    int nm = to->n_models;
    for (int i = 0; i < nm; i++) models[i] = to->models[i];
    const char *shape = to->shape, *types = to->types, *vocab = to->vocab, *json = to->json;
    if (!nm && bench_check_shapes_types("bench-model", "--shape", shape, "--types", types)) return 2;
    if (nm == 0) {
        if (!vocab && access("../shared/golden/tokenizer/ggml-vocab-qwen2.5.gguf", R_OK) == 0 && !strcmp(shape, "qwen2.5-0.5b"))
            vocab = "../shared/golden/tokenizer/ggml-vocab-qwen2.5.gguf";
        char buf[128];
        snprintf(buf, sizeof buf, "%s", types);
        for (char *t = strtok(buf, ","); t && nm < 8; t = strtok(NULL, ",")) {
            const char *p = bench_model(shape, t, vocab);
            if (!p) return 1;
            models[nm++] = bench_xstrdup(p);
        }
    }
    printf("sdnpu bench-model: prefill %d tokens, decode %d tokens, median of %d runs; random weights (speed only)\n"
           "  kernels %s; prefill matmul %s (--prefill-matmul)\n"
           "  GEMM ratio: prefill matmul GFLOP/s (that setting; no F32 layout resident) / OpenBLAS SGEMM alone on the same shapes\n"
           "  decode ratio: weight bytes per token / s per token, over a streaming-read probe with the same threads (target >= 70%%)\n",
           o.prompt, o.gen, o.reps, sdn_matmul_isa(), sdn_prefill_mm_name(sdn_prefill_mm_get()));
    FILE *jf = NULL;
    if (json) {
        if (!(jf = fopen(json, "w"))) {
            fprintf(stderr, "sdnpu bench-model: option --json: cannot write %s\n", json);
            return 2;
        }
        o.json = cJSON_CreateArray();
    }
    for (int i = 0; i < nm; i++)
        if (bench_one(models[i], &o)) return 1;
    if (jf) {
        char *t = cJSON_Print(o.json);
        fprintf(jf, "%s\n", t);
        fclose(jf);
        free(t);
        cJSON_Delete(o.json);
    }
    return 0;
}
