/* run_common.c - shared body of `sdnpu run` and `sdnpu demo` (see run_common.h). */
#include "engine/cli/run_common.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/sdn_util.h"
#include "datasets/cost.h"
#include "draft/methods.h"
#include "engine/cli/bench_util.h"
#include "engine/cli/cli.h"
#include "engine/forward.h"
#include "engine/kernel_path.h"
#include "engine/model.h"
#include "engine/request.h"
#include "engine/tokenizer.h"
#include "graph_sched/profile.h"

void sdn_run_opts_init(sdn_run_opts *o) {
    memset(o, 0, sizeof *o);
    o->max_tokens = 256;
    o->threads = 2;
    o->sampling.top_p = 1.0f;
    o->spec = "none";
    o->prefill_topk = 4;
}

void sdn_run_opts_free(sdn_run_opts *o) {
    free(o->contexts);
    o->contexts = NULL;
    free(o->params);
    o->params = NULL;
}

void sdn_run_opts_usage(FILE *f) {
    fprintf(f, "  --context FILE        a context document (repeatable)\n"
               "  --max-tokens N        new tokens at most (default 256)\n"
               "  --temp T --top-k K --top-p P --seed S   sampling (default greedy)\n"
               "  --spec METHOD         drafting method: %s (default none)\n"
               "  --draft-max N --draft-depth D --draft-branch B   draft tree caps (default: each step's draft size\n"
               "                        from this machine's measured verify cost curve and the acceptance seen\n"
               "                        so far, maximizing expected tokens/s; branch 4)\n"
               "  --compare             also run plain decoding: same output?, speedup\n"
               "  --graphs MODE         fixed-shape graphs, switched during prefill: single, sync, async, progressive\n"
               "  --graph-blocks N --g1 S1 --g2 S2   blocks, prefill and decode graph rows (default 8, 256, from the profile)\n"
               "  --profile-db FILE     graph profile cache (default $SDNPU_CACHE/profiles.sqlite)\n"
               "  --graph-pin           compute threads on CPUs 0..threads-1, the graph loader on the others\n"
               "  --prefill-topk K      prefill predictions kept per context position for sam+cal/sdnpu (default 4)\n"
               "  --param KEY=VALUE     a drafting parameter, e.g. sdnpu.follow=0.7 (keys: draft/methods.h)\n"
               "  --threads K           worker threads (default 2)\n"
               "  --ctx N               KV cache size in tokens (default min(model, 4096))\n"
               "  --tokenizer FILE      llama2.c tokenizer.bin (for llama2.c checkpoints)\n"
               "  --chat-template NAME  auto (default), none, chatml, llama3, llama2, vicuna, plain, gemma\n"
               "  --system TEXT         system prompt for chat templates\n"
               "  --ignore-eos          keep generating past end-of-generation tokens\n"
               "  --quiet               print only the generated text\n"
               "  --stats-json FILE     write the run's statistics as JSON\n",
            sdn_method_list());
}

int sdn_run_opts_parse(sdn_run_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i], *v;
    long x;
    double d;
#define VAL() (v = cli_value(argc, argv, i, a))
    if (!strcmp(a, "--model")) return VAL() ? (o->model_path = v, 1) : -1;
    if (!strcmp(a, "--tokenizer")) return VAL() ? (o->tokenizer_path = v, 1) : -1;
    if (!strcmp(a, "--prompt")) return VAL() ? (o->prompt = v, 1) : -1;
    if (!strcmp(a, "--prompt-ids")) return VAL() ? (o->prompt_ids = v, 1) : -1;
    if (!strcmp(a, "--chat-template")) return VAL() ? (o->chat_template = v, 1) : -1;
    if (!strcmp(a, "--system")) return VAL() ? (o->system = v, 1) : -1;
    if (!strcmp(a, "--stats-json")) return VAL() ? (o->stats_json = v, 1) : -1;
    if (!strcmp(a, "--spec")) return VAL() ? (o->spec = v, 1) : -1;
    if (!strcmp(a, "--graphs")) return VAL() ? (o->graphs.graphs = v, 1) : -1;
    if (!strcmp(a, "--profile-db")) return VAL() ? (o->graphs.profile_db = v, 1) : -1;
    if (!strcmp(a, "--graph-pin")) return o->graphs.pin = 1, 1;
    if (!strcmp(a, "--graph-blocks")) return VAL() && !cli_int(a, v, 1, 128, &x) ? (o->graphs.n_blocks = (int)x, 1) : -1;
    if (!strcmp(a, "--g1")) return VAL() && !cli_int(a, v, 1, 4096, &x) ? (o->graphs.s1 = (int)x, 1) : -1;
    if (!strcmp(a, "--g2")) return VAL() && !cli_int(a, v, 1, 64, &x) ? (o->graphs.s2 = (int)x, 1) : -1;
    if (!strcmp(a, "--quiet")) return o->quiet = 1, 1;
    if (!strcmp(a, "--compare")) return o->compare = 1, 1;
    if (!strcmp(a, "--ignore-eos")) return o->ignore_eos = 1, 1;
    if (!strcmp(a, "--param")) {
        if (!VAL()) return -1;
        sdn_method_config probe;
        sdn_err e = {0};
        sdn_method_defaults(&probe);
        if (sdn_method_set_param(&probe, v, &e)) { fprintf(stderr, "sdnpu: %s\n", e.msg); return -1; }
        o->params = realloc(o->params, (size_t)(o->n_params + 1) * sizeof *o->params);
        o->params[o->n_params++] = v;
        return 1;
    }
    if (!strcmp(a, "--context")) {
        if (!VAL()) return -1;
        o->contexts = realloc(o->contexts, (size_t)(o->n_contexts + 1) * sizeof *o->contexts);
        o->contexts[o->n_contexts++] = v;
        return 1;
    }
    if (!strcmp(a, "--max-tokens")) return VAL() && !cli_int(a, v, 0, 1 << 22, &x) ? (o->max_tokens = (int)x, 1) : -1;
    if (!strcmp(a, "--threads")) return VAL() && !cli_int(a, v, 1, 256, &x) ? (o->threads = (int)x, 1) : -1;
    if (!strcmp(a, "--ctx")) return VAL() && !cli_int(a, v, 2, 1 << 22, &x) ? (o->n_ctx = (int)x, 1) : -1;
    if (!strcmp(a, "--prefill-topk")) return VAL() && !cli_int(a, v, 1, 64, &x) ? (o->prefill_topk = (int)x, 1) : -1;
    if (!strcmp(a, "--draft-max")) return VAL() && !cli_int(a, v, 1, 63, &x) ? (o->caps.max_nodes = (int)x, 1) : -1;
    if (!strcmp(a, "--draft-depth")) return VAL() && !cli_int(a, v, 1, 63, &x) ? (o->caps.max_depth = (int)x, 1) : -1;
    if (!strcmp(a, "--draft-branch")) return VAL() && !cli_int(a, v, 1, 63, &x) ? (o->caps.max_branch = (int)x, 1) : -1;
    if (!strcmp(a, "--seed")) return VAL() && !cli_int(a, v, 0, 0x7fffffffffffffffL, &x) ? (o->sampling.seed = (uint64_t)x, 1) : -1;
    if (!strcmp(a, "--top-k")) return VAL() && !cli_int(a, v, 0, 1 << 24, &x) ? (o->sampling.top_k = (int)x, 1) : -1;
    if (!strcmp(a, "--temp")) return VAL() && !cli_float(a, v, 0, 100, &d) ? (o->sampling.temp = (float)d, 1) : -1;
    if (!strcmp(a, "--top-p")) return VAL() && !cli_float(a, v, 0, 1, &d) ? (o->sampling.top_p = (float)d, 1) : -1;
#undef VAL
    return 0;
}

static int parse_ids(const char *s, int vocab, int32_t **ids, int *n) {
    int cap = 16, k = 0;
    int32_t *a = malloc((size_t)cap * sizeof *a);
    const char *p = s;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= vocab) {
            fprintf(stderr, "sdnpu: option --prompt-ids: '%.20s' is not a token id in [0, %d)\n", p, vocab);
            free(a);
            return -1;
        }
        if (k == cap) a = realloc(a, (size_t)(cap *= 2) * sizeof *a);
        a[k++] = (int32_t)v;
        p = end;
    }
    if (k == 0) { fprintf(stderr, "sdnpu: option --prompt-ids: no ids given\n"); free(a); return -1; }
    *ids = a;
    *n = k;
    return 0;
}

typedef struct stream {
    FILE *out;
    sdn_detok *dt;
    char *text;
    size_t len, cap;
} stream;

static void emit(stream *s, const char *buf, size_t n) {
    if (!n) return;
    if (s->out) { fwrite(buf, 1, n, s->out); fflush(s->out); }
    if (s->len + n + 1 > s->cap) { s->cap = (s->len + n + 1) * 2; s->text = realloc(s->text, s->cap); }
    memcpy(s->text + s->len, buf, n);
    s->len += n;
    s->text[s->len] = 0;
}

static int on_tokens(void *ud, const int32_t *t, int n) {
    stream *s = ud;
    char buf[512];
    for (int i = 0; i < n; i++) {
        if (s->dt) emit(s, buf, sdn_detok_push(s->dt, t[i], buf, sizeof buf));
        else if (s->out) { fprintf(s->out, "%d ", t[i]); fflush(s->out); }
    }
    return 0;
}

static int is_eog(void *ud, int32_t tok) {
    const sdn_tokenizer *t = ud;
    /* a BOS in the middle of generation starts a new document: stop there too (llama2.c's run.c rule) */
    return t && (sdn_tokenizer_is_eog(t, tok) || tok == sdn_tokenizer_bos(t));
}

typedef struct pass {
    const char *method;
    int32_t *tokens;
    int n_tokens;
    char *text;
    sdn_gen_stats st;
} pass;

static double ms_per_token(const sdn_gen_stats *s) { return s->n_gen ? 1000.0 * s->t_decode / s->n_gen : 0.0; }

static void print_stats(const sdn_run_opts *o, const pass *p, const pass *base) {
    const sdn_gen_stats *s = &p->st;
    fprintf(stderr, "[%s] prompt %d tok, prefill %.1f tok/s | %d tokens in %d steps, mean accepted %.2f tok/step | decode %.1f tok/s, "
                    "%.2f ms/token | first token %.0f ms | peak %.1f MiB | %d threads\n",
            p->method, s->n_prompt, s->t_prefill > 0 ? (s->n_prompt - 1) / s->t_prefill : 0.0, s->n_gen, s->steps,
            sdn_gen_mean_accepted(s), s->t_decode > 0 ? s->n_gen / s->t_decode : 0.0, ms_per_token(s), 1000.0 * s->t_first_token,
            (double)s->peak_rss / (1 << 20), o->threads);
    if (strcmp(p->method, "none") != 0) {
        double other = s->t_decode - s->t_draft - s->t_verify;
        fprintf(stderr, "[%s] time: prefill %.1f ms, draft %.1f ms, verify %.1f ms, other %.1f ms | drafted %ld, accepted %ld | accepted "
                        "per step:",
                p->method, 1000 * s->t_prefill, 1000 * s->t_draft, 1000 * s->t_verify, 1000 * other, s->drafted, s->accepted);
        int last = 0;
        for (int i = 0; i < SDN_ACCEPT_HIST; i++) if (s->accept_hist[i]) last = i;
        for (int i = 0; i <= last; i++) fprintf(stderr, " %d:%d", i, s->accept_hist[i]);
        fprintf(stderr, "\n");
    }
    if (base) {
        int same = base->n_tokens == p->n_tokens && !memcmp(base->tokens, p->tokens, sizeof(int32_t) * (size_t)p->n_tokens);
        fprintf(stderr, "[%s] vs plain: output %s, speedup %.2fx (%.2f vs %.2f ms/token)\n", p->method,
                same ? "identical" : (o->sampling.temp > 0 ? "differs (sampling: same distribution, different draws)" : "DIFFERS"),
                ms_per_token(&p->st) > 0 ? ms_per_token(&base->st) / ms_per_token(&p->st) : 0.0, ms_per_token(&p->st),
                ms_per_token(&base->st));
    }
}

static cJSON *pass_json(const pass *p, const pass *base) {
    const sdn_gen_stats *s = &p->st;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "method", p->method);
    cJSON_AddNumberToObject(j, "prompt_tokens", s->n_prompt);
    cJSON_AddNumberToObject(j, "generated_tokens", s->n_gen);
    cJSON_AddNumberToObject(j, "steps", s->steps);
    cJSON_AddNumberToObject(j, "mean_accepted_tokens", sdn_gen_mean_accepted(s));
    cJSON_AddNumberToObject(j, "drafted_tokens", (double)s->drafted);
    cJSON_AddNumberToObject(j, "accepted_draft_tokens", (double)s->accepted);
    cJSON *h = cJSON_CreateArray();
    for (int i = 0; i < SDN_ACCEPT_HIST; i++) cJSON_AddItemToArray(h, cJSON_CreateNumber(s->accept_hist[i]));
    cJSON_AddItemToObject(j, "accepted_length_histogram", h);
    cJSON_AddNumberToObject(j, "prefill_s", s->t_prefill);
    cJSON_AddNumberToObject(j, "decode_s", s->t_decode);
    cJSON_AddNumberToObject(j, "draft_s", s->t_draft);
    cJSON_AddNumberToObject(j, "verify_s", s->t_verify);
    cJSON_AddNumberToObject(j, "other_s", s->t_decode - s->t_draft - s->t_verify);
    cJSON_AddNumberToObject(j, "time_to_first_token_s", s->t_first_token);
    cJSON_AddNumberToObject(j, "prefill_tokens_per_s", s->t_prefill > 0 ? (s->n_prompt - 1) / s->t_prefill : 0);
    cJSON_AddNumberToObject(j, "decode_tokens_per_s", s->t_decode > 0 ? s->n_gen / s->t_decode : 0);
    cJSON_AddNumberToObject(j, "ms_per_token", ms_per_token(s));
    cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)s->peak_rss);
    if (base) {
        cJSON_AddBoolToObject(j, "same_output_as_plain",
                              base->n_tokens == p->n_tokens && !memcmp(base->tokens, p->tokens, sizeof(int32_t) * (size_t)p->n_tokens));
        cJSON_AddNumberToObject(j, "speedup_over_plain", ms_per_token(s) > 0 ? ms_per_token(&base->st) / ms_per_token(s) : 0);
    }
    cJSON *ids = cJSON_CreateArray();
    for (int i = 0; i < p->n_tokens; i++) cJSON_AddItemToArray(ids, cJSON_CreateNumber(p->tokens[i]));
    cJSON_AddItemToObject(j, "tokens", ids);
    cJSON_AddStringToObject(j, "text", p->text ? p->text : "");
    return j;
}

/* The verify cost curve of m on this machine (ms of a verification step with d = 0..63 draft
 * tokens, interpolated): from the cache file $SDNPU_CACHE/verify-cost-<model
 * fingerprint>-<kernel path>-t<threads>.json when it was measured on this machine, else
 * measured now (sdn_cost_measure after a 64-token context, a few seconds) and cached. */
static int verify_curve(sdn_model *m, int threads, double *ms, FILE *log, sdn_err *err) {
    static const int sizes[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 63};
    const int nsz = (int)(sizeof sizes / sizeof sizes[0]);
    char path[1200], key[256], machine[160];
    const char *kp = sdn_kpath_name(sdn_kpath_get());
    sdn_machine_id(machine, sizeof machine);
    snprintf(path, sizeof path, "%s/verify-cost-%016llx-%s-t%d.json", bench_cache_dir(),
             (unsigned long long)sdn_model_fingerprint(m), kp, threads);
    snprintf(key, sizeof key, "%s, kernel path %s", machine, kp);
    sdn_cost_profile prof;
    sdn_err e2 = {0};
    int cached = access(path, R_OK) == 0 && sdn_cost_load(path, &prof, &e2) == SDN_OK && !strcmp(prof.shape, key) &&
                 prof.threads == threads && prof.n == nsz;
    if (!cached) {
        if (log) fprintf(log, "measuring the verify cost curve of this model on this machine (cached in %s) ...\n", path);
        sdn_ctx *c = NULL;
        sdn_ctx_params cp = {.n_ctx = 64 + SDN_INVARIANT_MAX_ROWS + 8, .n_threads = threads, .max_batch = SDN_INVARIANT_MAX_ROWS};
        int rc = sdn_ctx_new(m, &cp, &c, err);
        if (!rc) rc = sdn_cost_measure(c, sizes, nsz, 64, 2, &prof, err);
        sdn_ctx_free(c);
        if (rc) return sdn_fail(err, rc, "verify cost curve");
        snprintf(prof.model, sizeof prof.model, "%016llx", (unsigned long long)sdn_model_fingerprint(m));
        snprintf(prof.shape, sizeof prof.shape, "%s", key);
        prof.threads = threads;
        if (sdn_cost_write(path, &prof, &e2) && log) fprintf(log, "sdnpu: warning: %s (the curve is not cached)\n", e2.msg);
    }
    for (int d = 0; d < SDN_INVARIANT_MAX_ROWS; d++) ms[d] = sdn_cost_step_ms(&prof, d);
    if (log)
        fprintf(log, "draft budget per step from the verify cost curve (%s): T(4)/T(0) %.2f, T(16)/T(0) %.2f, T(63)/T(0) %.2f\n",
                kp, ms[4] / ms[0], ms[16] / ms[0], ms[63] / ms[0]);
    return SDN_OK;
}

/* One generation pass with `method`. Returns 0 or prints the error and returns 1. */
static int run_pass(const sdn_run_opts *o, sdn_model *m, const int32_t *prompt, int n_prompt, const char *method, FILE *out, pass *p) {
    sdn_err err = {0};
    sdn_ctx *c = NULL;
    sdn_gs *gs = NULL;
    sdn_drafter d = {0};
    sdn_method_config mc;
    stream st = {.out = out};
    const sdn_tokenizer *tok = sdn_model_tokenizer(m);
    int rc = 1;
    memset(p, 0, sizeof *p);
    p->method = method;
    sdn_method_defaults(&mc);
    for (int i = 0; i < o->n_params; i++)
        if (sdn_method_set_param(&mc, o->params[i], &err)) goto fail;
    if (sdn_method_create(method, &mc, &d, &err)) goto fail;
    sdn_ctx_params cp = {.n_ctx = o->n_ctx, .n_threads = o->threads};
    sdn_gen_params gp = {.max_tokens = o->max_tokens, .sampling = o->sampling, .ignore_eog = o->ignore_eos,
                         .drafter = d.ops ? &d : NULL, .caps = o->caps,
                         .prefill_topk = sdn_method_uses_prefill_preds(method) ? o->prefill_topk : 0};
    double verify_ms[SDN_INVARIANT_MAX_ROWS];
    if (d.ops && !o->graphs.graphs && o->caps.max_nodes <= 0) { /* the default budget: from the cost curve */
        if (verify_curve(m, o->threads, verify_ms, o->quiet ? NULL : stderr, &err)) goto fail;
        gp.verify_ms = verify_ms;
    }
    if (o->graphs.graphs) { /* fixed-shape graphs: prefill hook, decode shape, budget (graph_sched/setup.h) */
        sdn_gs_options go = o->graphs;
        char db[1200];
        if (!go.profile_db) snprintf(db, sizeof db, "%s/profiles.sqlite", bench_cache_dir()), go.profile_db = db;
        go.draft_max = o->caps.max_nodes;
        if (sdn_gs_setup(m, o->threads, &go, o->quiet ? NULL : stderr, &cp, &gp, &gs, NULL, &err)) goto fail;
    }
    if (sdn_ctx_new(m, &cp, &c, &err)) goto fail;
    if (tok) {
        st.dt = sdn_detok_new(tok);
        sdn_detok_prime(st.dt, prompt, n_prompt);
    }
    if (sdn_generate(c, prompt, n_prompt, &gp, is_eog, (void *)tok, on_tokens, &st, &p->tokens, &p->n_tokens, &p->st, &err)) goto fail;
    if (st.dt) {
        char buf[512];
        emit(&st, buf, sdn_detok_flush(st.dt, buf, sizeof buf));
    }
    if (out) { fputc('\n', out); fflush(out); }
    if (gs && !o->quiet) sdn_gs_stats_print(sdn_gs_last(gs), stderr);
    p->text = st.text;
    st.text = NULL;
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "sdnpu: %s\n", err.msg);
out:
    if (st.dt) sdn_detok_free(st.dt);
    free(st.text);
    sdn_drafter_destroy(&d);
    sdn_ctx_free(c);
    sdn_gs_free(gs);
    return rc;
}

int sdn_run_request(const sdn_run_opts *o, FILE *out) {
    sdn_err err = {0};
    sdn_model *m = NULL;
    int32_t *prompt = NULL;
    char **docs = NULL;
    int n_prompt = 0, code = 1;
    pass base = {0}, spec = {0};
    sdn_model_load_opts lo = {.tokenizer_path = o->tokenizer_path};
    if (sdn_model_load(o->model_path, &lo, &m, &err)) goto fail;
    const sdn_tokenizer *tok = sdn_model_tokenizer(m);
    if (o->prompt_ids) {
        if (parse_ids(o->prompt_ids, sdn_model_cfg(m)->vocab, &prompt, &n_prompt)) { code = 2; goto out; }
    } else {
        if (!tok) {
            fprintf(stderr, "sdnpu: %s has no tokenizer: give the prompt with --prompt-ids\n", o->model_path);
            code = 2;
            goto out;
        }
        /* a context that cannot fit is refused while it is read, before it is tokenized:
         * n_ctx tokens stand for at most n_ctx * (longest piece) bytes of text */
        int n_ctx = o->n_ctx > 0 ? o->n_ctx : (sdn_model_cfg(m)->ctx_len < 4096 ? sdn_model_cfg(m)->ctx_len : 4096);
        size_t cap = sdn_request_max_bytes(m, n_ctx);
        char why[160];
        snprintf(why, sizeof why, "more text than %d tokens can hold (raise --ctx or shorten the context)", n_ctx);
        docs = calloc((size_t)o->n_contexts + 1, sizeof *docs);
        for (int i = 0; i < o->n_contexts; i++) {
            size_t len;
            if (sdn_read_file_max(o->contexts[i], cap, why, &docs[i], &len, &err)) { sdn_fail(&err, err.code, "option --context"); goto fail; }
        }
        sdn_request rq = {(const char *const *)docs, o->n_contexts, o->prompt, o->system, o->chat_template, n_ctx};
        if (sdn_request_tokens(m, &rq, &prompt, &n_prompt, NULL, &err)) goto fail;
    }
    sdn_drafter probe = {0};
    sdn_method_config mc;
    sdn_method_defaults(&mc);
    if (sdn_method_create(o->spec, &mc, &probe, &err)) { sdn_fail(&err, SDN_EINVAL, "option --spec"); goto fail; }
    sdn_drafter_destroy(&probe);
    int plain_only = !strcmp(o->spec, "none");
    if (plain_only || o->compare) {
        if (o->compare && !o->quiet && out) fprintf(out, "-- plain decoding --\n");
        if (run_pass(o, m, prompt, n_prompt, "none", out, &base)) goto out;
        if (!o->quiet) print_stats(o, &base, NULL);
    }
    if (!plain_only) {
        if (o->compare && !o->quiet && out) fprintf(out, "-- speculative decoding (%s) --\n", o->spec);
        if (run_pass(o, m, prompt, n_prompt, o->spec, o->compare && o->quiet ? NULL : out, &spec)) goto out;
        if (!o->quiet) print_stats(o, &spec, o->compare ? &base : NULL);
    }
    if (o->stats_json) {
        cJSON *j = cJSON_CreateObject();
        char fp[24];
        snprintf(fp, sizeof fp, "%016llx", (unsigned long long)sdn_model_fingerprint(m));
        cJSON_AddStringToObject(j, "model", o->model_path);
        cJSON_AddStringToObject(j, "model_fingerprint", fp);
        cJSON_AddNumberToObject(j, "threads", o->threads);
        cJSON *runs = cJSON_CreateArray();
        if (base.st.steps) cJSON_AddItemToArray(runs, pass_json(&base, NULL));
        if (spec.st.steps) cJSON_AddItemToArray(runs, pass_json(&spec, base.st.steps ? &base : NULL));
        cJSON_AddItemToObject(j, "runs", runs);
        char *txt = cJSON_Print(j);
        cJSON_Delete(j);
        FILE *f = fopen(o->stats_json, "w");
        if (!f) { fprintf(stderr, "sdnpu: option --stats-json: cannot write %s\n", o->stats_json); free(txt); goto out; }
        fputs(txt, f);
        fputc('\n', f);
        fclose(f);
        free(txt);
    }
    code = 0;
    goto out;
fail:
    fprintf(stderr, "sdnpu: %s\n", err.msg);
out:
    if (docs) {
        for (int i = 0; i < o->n_contexts; i++) free(docs[i]);
        free(docs);
    }
    free(base.tokens); free(base.text); free(spec.tokens); free(spec.text);
    free(prompt);
    sdn_model_free(m);
    return code;
}
