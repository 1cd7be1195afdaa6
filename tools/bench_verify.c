/* bench_verify.c - the work of `sdnpu bench-verify` (tools.h; the options in
 * cli/cmd_bench_verify.c): what a verification step costs and what
 * speculation buys.
 *  1. Verify-cost curve: the wall time of one decode/verify step with 1, 2, 4, ..., 64 batch
 *     rows (the root + a draft chain) after a 256-token context, relative to the 1-row step,
 *     on Qwen2.5-0.5B- and Llama-3.2-1B-shaped make-model models in F16 and Q8_0 (random
 *     weights: speed only). This curve says how many draft tokens a step can afford here.
 *     --cost-out FILE writes it as a verify-cost profile (JSON) for `sdnpu study --cost`.
 *  2. End to end on the real TinyStories model (../shared or --stories DIR): ms/token, mean
 *     accepted tokens and speedup of pld and sam over plain decoding, measured in the same
 *     run, on prompts that give the model a story to continue. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/sdn_util.h"
#include "draft/methods.h"
#include "draft/sdnpu_drafter.h"
#include "tools/bench_util.h"
#include "tools/tools.h"
#include "engine/forward.h"
#include "kernels/kernel_path.h"
#include "modelfile/model.h"
#include "tokenizer/request.h"
#include "runtime/decode.h"
#include "tokenizer/tokenizer.h"

static const int rows_list[] = {1, 2, 4, 8, 16, 32, 64};
#define NROWS (int)(sizeof rows_list / sizeof rows_list[0])

/* Median ms of a verify step of rows[k] rows (k < nrows, each 1..64) after a ctx_len-token context. */
static int cost_curve_rows(const char *path, int threads, int reps, const int *rows_n, int nrows, int ctx_len, double *ms,
                           sdn_err *err) {
    sdn_model *m;
    sdn_model_load_opts lo = {.no_tokenizer = 1};
    int rc = sdn_model_load(path, &lo, &m, err);
    if (rc) return rc;
    int V = sdn_model_cfg(m)->vocab;
    sdn_ctx *c;
    sdn_ctx_params cp = {.n_ctx = ctx_len + 80, .n_threads = threads, .max_batch = 256};
    if ((rc = sdn_ctx_new(m, &cp, &c, err))) { sdn_model_free(m); return rc; }
    int32_t *toks = bench_xmalloc(sizeof(int32_t) * (size_t)(ctx_len + 64));
    sdn_rng r;
    sdn_rng_seed(&r, 3);
    for (int i = 0; i < ctx_len + 64; i++) toks[i] = (int32_t)sdn_rng_below(&r, (uint64_t)V);
    float *lg = bench_xmalloc((size_t)64 * V * sizeof(float));
    for (int i = 0; i < ctx_len && !rc; i += 256) {
        sdn_batch pre = {.n = ctx_len - i < 256 ? ctx_len - i : 256, .tokens = toks + i, .n_logits = 0};
        rc = sdn_forward(c, &pre, NULL, err);
    }
    if (rc) goto out;
    int32_t rows[64];
    for (int i = 0; i < 64; i++) rows[i] = i;
    for (int k = 0; k < nrows; k++) {
        int n = rows_n[k];
        double t[32];
        for (int rep = 0; rep < reps + 1; rep++) {
            /* a chain draft: causal mask, logits for every row, as a verification step */
            sdn_batch b = {.n = n, .tokens = toks + ctx_len, .logit_rows = rows, .n_logits = n, .invariant = 1};
            double t0 = sdn_now();
            rc = sdn_forward(c, &b, lg, err);
            double dt = sdn_now() - t0;
            sdn_kv_truncate(c, ctx_len);
            if (rc) break;
            if (rep) t[rep - 1] = dt;
        }
        if (rc) break;
        ms[k] = 1000 * bench_median(t, reps);
    }
out:
    free(lg);
    free(toks);
    sdn_ctx_free(c);
    sdn_model_free(m);
    return rc;
}

static int cost_curve(const char *path, int threads, int reps, double *ms, sdn_err *err) {
    return cost_curve_rows(path, threads, reps, rows_list, NROWS, 256, ms, err);
}

/* The curve ms[k] of rows_n[k] rows (rows_n[0] == 1: the plain step) as a verify-cost profile (runtime/verify_cost.h). */
static int write_profile(const char *file, const char *model, const char *shape, int threads, const int *rows_n, int nrows,
                         const double *ms) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "format", "sdnpu-verify-cost");
    cJSON_AddNumberToObject(j, "version", 1);
    cJSON_AddStringToObject(j, "model", model);
    cJSON_AddStringToObject(j, "shape", shape);
    cJSON_AddNumberToObject(j, "threads", threads);
    cJSON *ts = cJSON_CreateArray(), *rs = cJSON_CreateArray(), *ss = cJSON_CreateArray();
    for (int k = 0; k < nrows; k++) {
        cJSON_AddItemToArray(ts, cJSON_CreateNumber(rows_n[k] - 1));
        cJSON_AddItemToArray(rs, cJSON_CreateNumber(rows_n[k]));
        cJSON_AddItemToArray(ss, cJSON_CreateNumber(ms[k]));
    }
    cJSON_AddItemToObject(j, "tree_sizes", ts);
    cJSON_AddItemToObject(j, "rows", rs);
    cJSON_AddItemToObject(j, "step_ms", ss);
    cJSON_AddNumberToObject(j, "plain_step_ms", ms[0]);
    cJSON_AddNumberToObject(j, "draft_ms_per_step", 0.0);
    char *txt = cJSON_Print(j);
    cJSON_Delete(j);
    FILE *f = fopen(file, "w");
    if (!f) { free(txt); fprintf(stderr, "sdnpu: option --cost-out: cannot write %s\n", file); return -1; }
    fprintf(f, "%s\n", txt);
    fclose(f);
    free(txt);
    return 0;
}

/* --model F [--rows LIST] [--context N] [--json OUT] [--cost-out PROFILE]: the curve of one model
 * file (rows_n: the --rows list, nrows of them, parsed by the command) after an N-token context,
 * printed and written as {"kernel", "threads", "model", "context", "rows", "ms"}, and as a
 * verify-cost profile for `sdnpu study --cost` / `sdnpu bench --cost` (the list must then
 * start at 1 row: the plain step). */
static int model_curve(const char *model, const int *rows_n, int nrows, int threads, int reps, int ctx_len, const char *json,
                       const char *cost_out) {
    if (cost_out && rows_n[0] != 1) {
        fprintf(stderr, "sdnpu: option --cost-out: the --rows list must start at 1 (the plain step), not %d\n", rows_n[0]);
        return 2;
    }
    for (int k = 1; cost_out && k < nrows; k++)
        if (rows_n[k] <= rows_n[k - 1]) {
            fprintf(stderr, "sdnpu: option --cost-out: the --rows list must increase (%d after %d)\n", rows_n[k], rows_n[k - 1]);
            return 2;
        }
    double ms[64];
    sdn_err err = {0};
    if (cost_curve_rows(model, threads, reps, rows_n, nrows, ctx_len, ms, &err)) { fprintf(stderr, "sdnpu: %s\n", err.msg); return 1; }
    printf("verify step of %s after a %d-token context, kernel path %s, %d threads, median of %d\n", model, ctx_len,
           sdn_kpath_describe(), threads, reps);
    printf("  %6s %10s %8s\n", "rows", "ms", "T(k)/T(1)");
    for (int k = 0; k < nrows; k++) printf("  %6d %10.3f %8.2fx\n", rows_n[k], ms[k], ms[k] / ms[0]);
    if (json) {
        cJSON *j = cJSON_CreateObject(), *rs = cJSON_CreateArray(), *ts = cJSON_CreateArray();
        cJSON_AddStringToObject(j, "kernel", sdn_kpath_name(sdn_kpath_get()));
        cJSON_AddNumberToObject(j, "threads", threads);
        cJSON_AddStringToObject(j, "model", model);
        cJSON_AddNumberToObject(j, "context", ctx_len);
        for (int k = 0; k < nrows; k++) {
            cJSON_AddItemToArray(rs, cJSON_CreateNumber(rows_n[k]));
            cJSON_AddItemToArray(ts, cJSON_CreateNumber(ms[k]));
        }
        cJSON_AddItemToObject(j, "rows", rs);
        cJSON_AddItemToObject(j, "ms", ts);
        char *txt = cJSON_PrintUnformatted(j);
        cJSON_Delete(j);
        FILE *f = fopen(json, "w");
        if (!f) { free(txt); fprintf(stderr, "sdnpu: option --json: cannot write %s\n", json); return 1; }
        fprintf(f, "%s\n", txt);
        fclose(f);
        free(txt);
    }
    if (cost_out) {
        char shape[64];
        snprintf(shape, sizeof shape, "file, %d-token context", ctx_len);
        if (write_profile(cost_out, model, shape, threads, rows_n, nrows, ms)) return 1;
        printf("  (verify-cost profile written to %s)\n", cost_out);
    }
    return 0;
}


/* Drafting overheads of sdnpu's drafter on a 4,000-token text-like context (Zipf tokens with
 * copied spans) with top-4 prefill predictions that mostly agree with the context: the
 * calibration build time per context token and the propose + feedback time per step while
 * an output that re-uses the context is decoded. Targets: < 20 us per context token, < 50 us
 * per step. */
static void drafting_overheads(void) {
    enum { N = 4000, K = 4, V = 32000, STEPS = 400 };
    int32_t *ctx = bench_xmalloc(sizeof(int32_t) * N), *pt = bench_xmalloc(sizeof(int32_t) * N * K);
    float *pp = bench_xmalloc(sizeof(float) * N * K);
    sdn_rng r;
    sdn_rng_seed(&r, 11);
    for (int i = 0; i < N; i++) {
        if (i > 40 && sdn_rng_below(&r, 3) == 0) { /* copy a span from earlier */
            int len = 3 + (int)sdn_rng_below(&r, 20), from = (int)sdn_rng_below(&r, (uint64_t)(i - len));
            for (int j = 0; j < len && i < N; j++, i++) ctx[i] = ctx[from + j];
            i--;
            continue;
        }
        double u = sdn_rng_double(&r);
        ctx[i] = (int32_t)(pow((double)V, u) - 1); /* Zipf-like */
    }
    for (int p = 0; p < N - 1; p++) {
        float mass = 0.9f;
        for (int j = 0; j < K; j++) {
            pt[p * K + j] = j == 0 && sdn_rng_below(&r, 4) ? ctx[p + 1] : (int32_t)sdn_rng_below(&r, V);
            pp[p * K + j] = mass * 0.6f;
            mass *= 0.4f;
        }
    }
    sdn_prefill_preds preds = {N - 1, K, pt, pp};
    sdn_method_config mc;
    sdn_method_defaults(&mc);
    sdn_drafter d;
    sdn_err err = {0};
    if (sdn_method_create("sdnpu", &mc, &d, &err) || sdn_drafter_begin(&d, ctx, N, &preds, &err)) {
        fprintf(stderr, "sdnpu: %s\n", err.msg);
        return;
    }
    sdn_tree t;
    sdn_tree_init(&t, 63, NULL);
    sdn_draft_caps caps = {63, 63, 4};
    int32_t argmax[64];
    double tp = 0;
    long drafted = 0, accepted = 0;
    int pos = 1000; /* the output re-tells the context from here, with a wrong token now and then */
    for (int s = 0; s < STEPS; s++) {
        sdn_tree_clear(&t);
        double t0 = sdn_now();
        sdn_drafter_propose(&d, &t, &caps, &err);
        drafted += t.n;
        /* the "model" continues the context; accept the matching path */
        int32_t acc[65];
        int na = 0, cur = -1;
        for (;;) {
            int32_t want = ctx[(pos + na) % N];
            int c = sdn_tree_find_child(&t, cur, want);
            if (c < 0 || na >= 63) break;
            acc[na++] = want;
            cur = c;
        }
        acc[na] = sdn_rng_below(&r, 10) == 0 ? (int32_t)sdn_rng_below(&r, V) : ctx[(pos + na) % N];
        for (int i = 0; i < t.n; i++) argmax[i] = ctx[(pos + t.depth[i]) % N];
        sdn_draft_feedback fb = {acc, na + 1, &t, argmax, -1, NULL, 0};
        sdn_drafter_feedback(&d, &fb, &err);
        tp += sdn_now() - t0;
        pos += na + 1;
        accepted += na + 1;
    }
    sdn_sdnpu_info info;
    sdn_sdnpu_info_get(&d, &info);
    printf("\ndrafting overheads of sdnpu (4,000-token text-like context, top-%d prefill predictions, %d steps):\n", K, STEPS);
    printf("  calibration build: %.2f ms = %.2f us per context token (target < 20 us; published 2 ms), %zu nodes, %.1f KiB\n",
           1000 * info.cal_build_s, 1e6 * info.cal_build_s / N, info.cal_nodes, (double)info.cal_bytes / 1024);
    printf("  propose + feedback: %.1f us per step (target < 50 us), %.1f draft tokens and %.2f accepted tokens per step\n",
           1e6 * tp / STEPS, (double)drafted / STEPS, (double)accepted / STEPS);
    sdn_tree_free(&t);
    sdn_drafter_destroy(&d);
    free(ctx);
    free(pt);
    free(pp);
}

static int eog(void *ud, int32_t t) {
    const sdn_tokenizer *tk = ud;
    return sdn_tokenizer_is_eog(tk, t) || t == sdn_tokenizer_bos(tk);
}

/* TinyStories end to end: none / pld / sam on prompts that carry a story to continue. */
static int stories_e2e(const char *dir, int threads, int max_tokens, sdn_err *err) {
    char mp[1024], tp[1024];
    snprintf(mp, sizeof mp, "%s/stories260K.bin", dir);
    snprintf(tp, sizeof tp, "%s/tok512.bin", dir);
    sdn_model *m;
    sdn_model_load_opts lo = {.tokenizer_path = tp};
    int rc = sdn_model_load(mp, &lo, &m, err);
    if (rc) return rc;
    const sdn_tokenizer *tk = sdn_model_tokenizer(m);
    sdn_ctx *c;
    sdn_ctx_params cp = {.n_ctx = 512, .n_threads = threads};
    if ((rc = sdn_ctx_new(m, &cp, &c, err))) { sdn_model_free(m); return rc; }
    /* Each request: a story the model wrote itself (its greedy continuation of an opening),
     * then the opening again: the model retells the story it has in context. */
    const char *openings[] = {"Once upon a time", "Tom and his dog", "One day, a little bird", "Sara had a red ball",
                              "There was a big tree"};
    const char *methods[] = {"none", "pld", "sam", "sam+tree", "sam+cal", "sam+reuse", "sdnpu"};
    enum { NM = sizeof methods / sizeof methods[0] };
    double tot_t[NM] = {0}, tot_n[NM] = {0}, tot_steps[NM] = {0};
    int mismatch = 0;
    for (size_t o = 0; o < sizeof openings / sizeof openings[0] && !rc; o++) {
        sdn_request rq = {.prompt = openings[o]};
        int32_t *op, *story;
        int nop, ns;
        if ((rc = sdn_request_tokens(m, &rq, &op, &nop, NULL, err))) break;
        sdn_gen_params g0 = {.max_tokens = 200};
        g0.eog = eog, g0.eog_ud = (void *)tk;
        if ((rc = sdn_generate_tokens(c, op, nop, &g0, &story, &ns, NULL, err))) { free(op); break; }
        int n = 0;
        int32_t *prompt = bench_xmalloc(sizeof(int32_t) * (size_t)(2 * nop + ns + 2));
        memcpy(prompt, op, sizeof(int32_t) * (size_t)nop);
        n = nop;
        memcpy(prompt + n, story, sizeof(int32_t) * (size_t)ns);
        n += ns;
        int32_t nl = sdn_tokenizer_find(tk, "<0x0A>", 6);
        if (nl >= 0) prompt[n++] = nl;
        memcpy(prompt + n, op + 1, sizeof(int32_t) * (size_t)(nop - 1)); /* the opening again, without BOS */
        n += nop - 1;
        int32_t *base = NULL;
        int nb = 0;
        for (int k = 0; k < NM && !rc; k++) {
            sdn_method_config mc;
            sdn_method_defaults(&mc);
            sdn_drafter d;
            if ((rc = sdn_method_create(methods[k], &mc, &d, err))) break;
            sdn_gen_params gp = {.max_tokens = max_tokens, .drafter = d.ops ? &d : NULL,
                                 .prefill_topk = sdn_method_uses_prefill_preds(methods[k]) ? 4 : 0};
            sdn_gen_stats st;
            int32_t *out;
            int no;
            gp.eog = eog, gp.eog_ud = (void *)tk;
            rc = sdn_generate_tokens(c, prompt, n, &gp, &out, &no, &st, err);
            sdn_drafter_destroy(&d);
            if (rc) break;
            if (k == 0) { base = out; nb = no; }
            else {
                if (no != nb || memcmp(out, base, sizeof(int32_t) * (size_t)no)) mismatch++;
                free(out);
            }
            tot_t[k] += st.t_decode;
            tot_n[k] += st.n_gen;
            tot_steps[k] += st.steps;
        }
        free(base);
        free(prompt);
        free(story);
        free(op);
    }
    if (!rc) {
        printf("\nTinyStories 260K (real model), %zu requests: a story the model wrote, then its opening again; %d threads\n",
               sizeof openings / sizeof openings[0], threads);
        printf("  %-9s %10s %8s %12s %10s\n", "method", "tokens", "steps", "mean accept", "ms/token");
        for (int k = 0; k < NM; k++) {
            double ms = 1000 * tot_t[k] / tot_n[k];
            printf("  %-9s %10.0f %8.0f %12.2f %10.3f", methods[k], tot_n[k], tot_steps[k], tot_n[k] / tot_steps[k], ms);
            if (k) printf("   speedup %.2fx", (1000 * tot_t[0] / tot_n[0]) / ms);
            printf("\n");
        }
        printf("  outputs identical to plain decoding: %s\n", mismatch ? "NO (bug)" : "yes");
    }
    sdn_ctx_free(c);
    sdn_model_free(m);
    return rc ? rc : (mismatch ? SDN_ESTATE : SDN_OK);
}

void sdn_tool_bench_verify_defaults(sdn_tool_bench_verify_opts *o) {
    *o = (sdn_tool_bench_verify_opts){.shapes = "qwen2.5-0.5b,llama-3.2-1b", .types = "F16,Q8_0", .reps = 5, .max_tokens = 200, .context = 256};
}

int sdn_tool_bench_verify(const sdn_tool_bench_verify_opts *o) {
    const char *cost_out = o->cost_out, *stories = o->stories, *shapes = o->shapes, *types = o->types;
    const char *model = o->model, *json = o->json;
    const long threads = o->threads, reps = o->reps, max_tokens = o->max_tokens, context = o->context;
    const int skip_curve = o->no_curve;
    if (!model && bench_check_shapes_types("bench-verify", "--shapes", shapes, "--types", types)) return 2;
    if (model) return model_curve(model, o->rows_n, o->n_rows, (int)threads, (int)reps, (int)context, json, cost_out);
    sdn_err err = {0};
    if (!skip_curve) {
        printf("verify step cost vs. batch rows (root + draft chain) after a 256-token context, %ld threads, median of %ld,\n"
               "kernel path %s\n(random-weight models: these figures are speed only; acceptance on them is meaningless)\n",
               threads, reps, sdn_kpath_describe());
        printf("  %-14s %-5s", "shape", "type");
        for (int k = 0; k < NROWS; k++) printf(" %9d", rows_list[k]);
        printf("   (rows)\n");
        char sb[256], tb[256];
        snprintf(sb, sizeof sb, "%s", shapes);
        int first = 1;
        for (char *sp, *s = strtok_r(sb, ",", &sp); s; s = strtok_r(NULL, ",", &sp)) {
            snprintf(tb, sizeof tb, "%s", types);
            for (char *tp, *t = strtok_r(tb, ",", &tp); t; t = strtok_r(NULL, ",", &tp)) {
                const char *path = bench_model(s, t, NULL);
                if (!path) return 1;
                double ms[NROWS];
                if (cost_curve(path, (int)threads, (int)reps, ms, &err)) { fprintf(stderr, "sdnpu: %s\n", err.msg); return 1; }
                printf("  %-14s %-5s", s, t);
                for (int k = 0; k < NROWS; k++) printf(" %7.2fms", ms[k]);
                printf("\n  %-14s %-5s", "", "ratio");
                for (int k = 0; k < NROWS; k++) printf(" %8.2fx", ms[k] / ms[0]);
                printf("\n");
                if (cost_out && first) {
                    if (write_profile(cost_out, path, s, (int)threads, rows_list, NROWS, ms)) return 1;
                    printf("  (verify-cost profile of %s %s written to %s)\n", s, t, cost_out);
                }
                first = 0;
            }
        }
    }
    drafting_overheads();
    if (!stories && access("../shared/models/stories260K/stories260K.bin", R_OK) == 0) stories = "../shared/models/stories260K";
    if (stories) {
        if (stories_e2e(stories, (int)threads, (int)max_tokens, &err)) {
            fprintf(stderr, "sdnpu: %s\n", err.msg[0] ? err.msg : "speculative output differs from plain decoding");
            return 1;
        }
    } else
        printf("\n(TinyStories end-to-end skipped: ../shared/models/stories260K not found; pass --stories DIR)\n");
    return 0;
}
