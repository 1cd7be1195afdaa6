/* verify_cost.c - verify-cost profiles: reading (strictly validated), writing, interpolation,
 * measuring a profile on a loaded model, and the per-machine cached curve (see verify_cost.h). */
#include "runtime/verify_cost.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/sdn_util.h"
#include "kernels/kernel_path.h"
#include "modelfile/model_registry.h"
#include "graph_sched/profile.h"
#include "common/jsonl.h"

int sdn_cost_parse(const char *name, const char *text, size_t len, sdn_cost_profile *p, sdn_err *err) {
    memset(p, 0, sizeof *p);
    p->draft_ms_per_step = -1;
    p->check_ms = -1;
    jl_reader rd;
    jl_open_buf(&rd, name, text, len); /* line 0: messages name the file only */
    /* the profile is one JSON object, possibly pretty-printed over several lines */
    cJSON *o = cJSON_ParseWithLength(text, len);
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return sdn_fail(err, SDN_EFORMAT, "%s: not a JSON object (a verify-cost profile was expected)", name);
    }
    int rc;
    const char *fmt, *model, *shape;
    long version, threads = 0;
    if ((rc = jl_str(&rd, o, "format", 1, &fmt, err))) goto done;
    if (strcmp(fmt, "sdnpu-verify-cost") != 0) { rc = jl_error(&rd, "format", err, "\"%s\", expected \"sdnpu-verify-cost\"", fmt); goto done; }
    if ((rc = jl_int(&rd, o, "version", 1, 1, 1L << 30, &version, err))) goto done;
    if (version > 1) { rc = sdn_fail(err, SDN_EUNSUP, "%s: field 'version': %ld is newer than the supported 1", name, version); goto done; }
    if ((rc = jl_str(&rd, o, "model", 0, &model, err)) || (rc = jl_str(&rd, o, "shape", 0, &shape, err)) ||
        (rc = jl_int(&rd, o, "threads", 0, 1, 4096, &threads, err)))
        goto done;
    snprintf(p->model, sizeof p->model, "%s", model ? model : "");
    snprintf(p->shape, sizeof p->shape, "%s", shape ? shape : "");
    p->threads = (int)threads;
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(o, "tree_sizes"), *sm = cJSON_GetObjectItemCaseSensitive(o, "step_ms");
    if (!cJSON_IsArray(ts) || cJSON_GetArraySize(ts) < 1 || cJSON_GetArraySize(ts) > SDN_COST_MAX_SIZES) {
        rc = jl_error(&rd, "tree_sizes", err, "expected an array of 1..%d sizes", SDN_COST_MAX_SIZES);
        goto done;
    }
    if (!cJSON_IsArray(sm) || cJSON_GetArraySize(sm) != cJSON_GetArraySize(ts)) {
        rc = jl_error(&rd, "step_ms", err, "expected an array as long as 'tree_sizes' (%d)", cJSON_GetArraySize(ts));
        goto done;
    }
    p->n = cJSON_GetArraySize(ts);
    const cJSON *a = ts->child, *b = sm->child;
    for (int i = 0; i < p->n; i++, a = a->next, b = b->next) {
        long v;
        if (!jl_is_int(a, 0, 4096, &v)) { rc = jl_error(&rd, "tree_sizes", err, "element %d is not an integer in [0, 4096]", i); goto done; }
        if (i && v <= p->tree_sizes[i - 1]) { rc = jl_error(&rd, "tree_sizes", err, "not strictly increasing at element %d", i); goto done; }
        if (!cJSON_IsNumber(b) || !isfinite(b->valuedouble) || b->valuedouble <= 0) {
            rc = jl_error(&rd, "step_ms", err, "element %d is not a positive number", i);
            goto done;
        }
        p->tree_sizes[i] = (int)v;
        p->step_ms[i] = b->valuedouble;
    }
    if ((rc = jl_num(&rd, o, "plain_step_ms", 1, 1e-9, 1e9, &p->plain_step_ms, err))) goto done;
    double dm = -1;
    if ((rc = jl_num(&rd, o, "draft_ms_per_step", 0, 0, 1e9, &dm, err))) goto done;
    p->draft_ms_per_step = dm;
    double ck = -1;
    if ((rc = jl_num(&rd, o, "check_ms", 0, 1e-9, 1e9, &ck, err))) goto done;
    p->check_ms = ck;
done:
    cJSON_Delete(o);
    return rc;
}

int sdn_cost_load(const char *path, sdn_cost_profile *p, sdn_err *err) {
    char *data;
    size_t len;
    int rc = sdn_read_file(path, &data, &len, err);
    if (rc) return rc;
    rc = sdn_cost_parse(path, data, len, p, err);
    free(data);
    return rc;
}

int sdn_cost_write(const char *path, const sdn_cost_profile *p, sdn_err *err) {
    FILE *f = fopen(path, "w");
    if (!f) return sdn_fail(err, SDN_EIO, "%s: cannot write", path);
    fputs("{\"format\": \"sdnpu-verify-cost\", \"version\": 1, \"model\": ", f);
    jl_write_str(f, p->model);
    fputs(", \"shape\": ", f);
    jl_write_str(f, p->shape);
    fprintf(f, ", \"threads\": %d,\n \"tree_sizes\": [", p->threads > 0 ? p->threads : 1);
    for (int i = 0; i < p->n; i++) fprintf(f, i ? ", %d" : "%d", p->tree_sizes[i]);
    /* 17 significant digits read back as the same doubles: a curve measured now and the same
     * curve read from the cache give the same draft budgets (with 6, a process that measured it
     * and one that read it back could size a step differently) */
    fputs("],\n \"step_ms\": [", f);
    for (int i = 0; i < p->n; i++) fprintf(f, i ? ", %.17g" : "%.17g", p->step_ms[i]);
    fprintf(f, "],\n \"plain_step_ms\": %.17g", p->plain_step_ms);
    if (p->draft_ms_per_step >= 0) fprintf(f, ", \"draft_ms_per_step\": %.17g", p->draft_ms_per_step);
    if (p->check_ms > 0) fprintf(f, ",\n \"check_ms\": %.17g", p->check_ms);
    fputs("}\n", f);
    int bad = ferror(f);
    if (fclose(f) || bad) return sdn_fail(err, SDN_EIO, "%s: write error", path);
    return SDN_OK;
}

double sdn_cost_step_ms(const sdn_cost_profile *p, double d) {
    /* a listed size 0 is a measured 1-row step: it stands for the plain step */
    double x0 = 0, y0 = p->n && p->tree_sizes[0] == 0 ? p->step_ms[0] : p->plain_step_ms;
    if (d <= 0) return y0;
    for (int i = p->tree_sizes[0] == 0 ? 1 : 0; i < p->n; i++) {
        double x1 = p->tree_sizes[i], y1 = p->step_ms[i];
        if (d <= x1) return y0 + (y1 - y0) * (d - x0) / (x1 - x0);
        x0 = x1, y0 = y1;
    }
    return y0;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int sdn_cost_measure(sdn_ctx *c, const int *sizes, int n_sizes, int n_past, int reps, sdn_cost_profile *out, sdn_err *err) {
    const sdn_model *m = sdn_ctx_model(c);
    int vocab = sdn_model_cfg(m)->vocab;
    memset(out, 0, sizeof *out);
    out->draft_ms_per_step = -1;
    out->check_ms = -1;
    if (n_sizes < 1 || n_sizes > SDN_COST_MAX_SIZES || reps < 1 || n_past < 1) return sdn_fail(err, SDN_EINVAL, "cost measure: bad arguments");
    int maxd = 0;
    for (int i = 0; i < n_sizes; i++) {
        if (sizes[i] < 1 || sizes[i] > SDN_INVARIANT_MAX_ROWS - 1 || (i && sizes[i] <= sizes[i - 1]))
            return sdn_fail(err, SDN_EINVAL, "cost measure: tree sizes must increase within [1, %d]", SDN_INVARIANT_MAX_ROWS - 1);
        if (sizes[i] > maxd) maxd = sizes[i];
    }
    if (n_past + maxd + 1 > sdn_ctx_n_ctx(c)) return sdn_fail(err, SDN_EINVAL, "cost measure: context too small for %d + %d positions", n_past, maxd + 1);
    int rows = maxd + 1;
    int32_t *tok = malloc((size_t)rows * sizeof *tok);
    int32_t *pos = malloc((size_t)rows * sizeof *pos), *lr = malloc((size_t)rows * sizeof *lr);
    float *logits = malloc((size_t)rows * vocab * sizeof *logits);
    double *t = malloc((size_t)(n_sizes + 1) * reps * sizeof *t);
    int rc = SDN_OK;
    if (!tok || !pos || !lr || !logits || !t) { rc = sdn_fail(err, SDN_ENOMEM, "out of memory"); goto done; }
    sdn_rng rng;
    sdn_rng_seed(&rng, 12345);
    for (int i = 0; i < rows; i++) tok[i] = (int32_t)sdn_rng_below(&rng, (uint64_t)vocab);
    /* the steps' cost does not depend on what the cache holds: synthetic keys and values
     * stand for the n_past positions, so a curve after 2,048 positions costs no prefill */
    sdn_kv_truncate(c, 0);
    if ((rc = sdn_kv_fill_synthetic(c, n_past, 777, err))) goto done;
    for (int i = 0; i < rows; i++) pos[i] = n_past + i, lr[i] = i;
    /* rounds over all sizes (the plain step first), one warm-up round, so a slow spell of a
     * shared machine spreads over the sizes instead of bending the curve */
    for (int r = -1; r < reps; r++)
        for (int s = -1; s < n_sizes; s++) {
            int n = (s < 0 ? 0 : sizes[s]) + 1;
            sdn_batch b = {.n = n, .tokens = tok, .pos = pos, .mask = NULL, .logit_rows = lr, .n_logits = n, .invariant = 1};
            double t0 = sdn_now();
            if ((rc = sdn_forward(c, &b, logits, err))) goto done;
            double dt = sdn_now() - t0;
            sdn_kv_truncate(c, n_past);
            if (r >= 0) t[(size_t)(s + 1) * reps + r] = dt * 1000.0;
        }
    for (int s = -1; s < n_sizes; s++) {
        double *ts = t + (size_t)(s + 1) * reps;
        qsort(ts, (size_t)reps, sizeof *ts, cmp_d);
        double med = reps % 2 ? ts[reps / 2] : 0.5 * (ts[reps / 2 - 1] + ts[reps / 2]);
        if (s < 0) out->plain_step_ms = med;
        else {
            out->tree_sizes[out->n] = sizes[s];
            out->step_ms[out->n] = med;
            out->n++;
        }
    }
    snprintf(out->model, sizeof out->model, "%s", sdn_model_path(m));
    const sdn_model_config *cfg = sdn_model_cfg(m);
    snprintf(out->shape, sizeof out->shape, "%s L%d d%d ff%d h%d/%d v%d", sdn_arch_name(cfg->arch), cfg->n_layers, cfg->dim,
             cfg->hidden, cfg->n_heads, cfg->n_kv_heads, cfg->vocab);
    out->threads = sdn_ctx_threads(c);
done:
    sdn_kv_truncate(c, 0);
    free(tok); free(pos); free(lr); free(logits); free(t);
    return rc;
}

/* The build's kind, part of a cached curve's name and key: a sanitizer or unoptimized build
 * runs several times slower, and its curve must never size a release build's drafts (one
 * cache directory serves every build of a checkout). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define SDN_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(SDN_SANITIZED)
#define BUILD_KIND "sanitized"
#elif !defined(__OPTIMIZE__)
#define BUILD_KIND "unoptimized"
#else
#define BUILD_KIND "optimized"
#endif

/* The quick check of a cached curve (sdn_verify_curve): the median of 5 plain steps after
 * n_past positions in a fresh context (one warm-up round; each round also times a 2-row
 * step, as the curve's rounds alternate sizes). */
static int quick_check(sdn_model *m, int threads, int n_past, double *ms) {
    static const int one[] = {1};
    sdn_ctx *c = NULL;
    sdn_cost_profile q;
    sdn_err e = {0};
    sdn_ctx_params cp = {.n_ctx = n_past + 8, .n_threads = threads, .max_batch = 8};
    int rc = sdn_ctx_new(m, &cp, &c, &e);
    if (!rc) rc = sdn_cost_measure(c, one, 1, n_past, 5, &q, &e);
    sdn_ctx_free(c);
    if (!rc) *ms = q.plain_step_ms;
    return rc;
}

/* One curve after n_past positions, cached (sdn_verify_curve). */
static int curve_at(sdn_model *m, int threads, int n_past, int check, int *stale, double *ms, FILE *log, sdn_err *err) {
    /* the near curve in detail; the far one, which only tilts it, at 7 sizes and 3 rounds
     * (the two cost about 1.5 s together with SmolLM2 on 2 cores, once per machine) */
    static const int near_sizes[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 63}, far_sizes[] = {1, 2, 4, 8, 16, 32, 63};
    const int far = n_past > SDN_VCURVE_NEAR;
    const int *sizes = far ? far_sizes : near_sizes;
    const int nsz = far ? (int)(sizeof far_sizes / sizeof far_sizes[0]) : (int)(sizeof near_sizes / sizeof near_sizes[0]);
    const int reps = far ? 3 : 5;
    char path[1200], key[256], machine[160];
    const char *kp = sdn_kpath_name(sdn_kpath_get());
    const char *tk = sdn_kv_type_name(sdn_kv_resolve(SDN_KV_AUTO, 1)), *tv = sdn_kv_type_name(sdn_kv_resolve(SDN_KV_AUTO, 0));
    sdn_machine_id(machine, sizeof machine);
    const char *cache = sdn_cache_dir(); /* none set: measured, not kept */
    if (cache)
        snprintf(path, sizeof path, "%s/verify-cost-%016llx-%s-t%d-r%d-k%s-v%s-L%d-%s.json", cache, (unsigned long long)sdn_model_fingerprint(m),
                 kp, threads, SDN_KERNEL_REV, tk, tv, n_past, BUILD_KIND);
    else path[0] = 0;
    snprintf(key, sizeof key, "%s, kernel path %s, kernels r%d, cache %s/%s, after %d, %s build", machine, kp, SDN_KERNEL_REV, tk, tv, n_past,
             BUILD_KIND);
    sdn_cost_profile prof;
    sdn_err e2 = {0};
    int cached = path[0] && access(path, R_OK) == 0 && sdn_cost_load(path, &prof, &e2) == SDN_OK && !strcmp(prof.shape, key) &&
                 prof.threads == threads && prof.n == nsz;
    if (cached && *stale) cached = 0;
    else if (cached && check) {
        double now_ms = -1;
        /* a curve measured while the machine was busy (every step slower, the ratios bent)
         * must not size drafts for good: the quick check again, against the one measured
         * with the curve; much faster now means the cache was the busy one, so it is
         * measured again. Slower now keeps the cache (this run is the busy one). A cached
         * curve without a check is measured again. */
        if (prof.check_ms <= 0) cached = 0, *stale = 1;
        else if (quick_check(m, threads, n_past, &now_ms) == SDN_OK && prof.check_ms > SDN_VCURVE_STALE * now_ms) {
            if (log)
                fprintf(log, "the cached verify cost curve after %d positions was measured on a busier machine (check step %.3f ms, %.3f ms now): measured again\n",
                        n_past, prof.check_ms, now_ms);
            cached = 0, *stale = 1;
        }
    }
    if (!cached) {
        if (log)
            fprintf(log, "measuring the verify cost curve of this model on this machine after %d positions (%s%s) ...\n", n_past,
                    path[0] ? "cached in " : "not kept: no cache directory", path);
        sdn_ctx *c = NULL;
        sdn_ctx_params cp = {.n_ctx = n_past + SDN_INVARIANT_MAX_ROWS + 8, .n_threads = threads, .max_batch = 256};
        int rc = sdn_ctx_new(m, &cp, &c, err);
        if (!rc) rc = sdn_cost_measure(c, sizes, nsz, n_past, reps, &prof, err);
        sdn_ctx_free(c);
        if (rc) return sdn_fail(err, rc, "verify cost curve");
        /* the near curve's check, which a later load repeats, measured the same way now */
        if (check && quick_check(m, threads, n_past, &prof.check_ms)) prof.check_ms = -1;
        snprintf(prof.model, sizeof prof.model, "%016llx", (unsigned long long)sdn_model_fingerprint(m));
        snprintf(prof.shape, sizeof prof.shape, "%s", key);
        prof.threads = threads;
        if (path[0] && sdn_cost_write(path, &prof, &e2) && log) fprintf(log, "sdnpu: warning: %s (the curve is not cached)\n", e2.msg);
    }
    for (int d = 0; d < SDN_INVARIANT_MAX_ROWS; d++) ms[d] = sdn_cost_step_ms(&prof, d);
    if (log)
        fprintf(log, "draft budget per step from the verify cost curve after %d positions (%s): T(4)/T(0) %.2f, T(16)/T(0) %.2f, T(63)/T(0) %.2f\n",
                n_past, kp, ms[4] / ms[0], ms[16] / ms[0], ms[63] / ms[0]);
    return SDN_OK;
}

int sdn_verify_curve(sdn_model *m, int threads, sdn_vcurve *out, FILE *log, sdn_err *err) {
    out->len_near = SDN_VCURVE_NEAR;
    out->len_far = SDN_VCURVE_FAR;
    /* the near curve's check stands for both (they are measured one after the other): a
     * stale near curve has the far one measured again too */
    int stale = 0;
    int rc = curve_at(m, threads, out->len_near, 1, &stale, out->near, log, err);
    if (!rc) rc = curve_at(m, threads, out->len_far, 0, &stale, out->far, log, err);
    return rc;
}

void sdn_vcurve_at(const sdn_vcurve *c, int len, double *ms) {
    const double f = len <= c->len_near ? 0.0 : (double)(len - c->len_near) / (double)(c->len_far - c->len_near);
    for (int d = 0; d < SDN_INVARIANT_MAX_ROWS; d++) {
        const double v = c->near[d] + (c->far[d] - c->near[d]) * f;
        ms[d] = v > 0.05 * c->near[d] ? v : 0.05 * c->near[d]; /* a noisy far curve never goes to 0 */
    }
}
