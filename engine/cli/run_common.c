/* run_common.c - shared body of `sdnpu run` and `sdnpu demo` (see run_common.h): options
 * parsed into a request of the public API (include/sdnpu.h), which does the whole request
 * path; this file only reads files, prints text and statistics, and compares passes. */
#include "engine/cli/run_common.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "common/sdn_util.h"
#include "engine/cli/cli.h"

void sdn_run_opts_init(sdn_run_opts *o) {
    memset(o, 0, sizeof *o);
    o->max_tokens = 256;
    o->threads = 2;
    o->top_p = 1.0f;
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
               "  --history DB          SQLite history store of earlier answers (created when missing)\n"
               "  --task-group NAME     draft from the group's earlier answers in --history, store this answer there\n"
               "  --graphs MODE         fixed-shape graphs, switched during prefill: single, sync, async, progressive\n"
               "  --graph-blocks N --g1 S1 --g2 S2   blocks, prefill and decode graph rows (default 8, 256, from the profile)\n"
               "  --profile-db FILE     graph profile cache (default $SDNPU_CACHE/profiles.sqlite)\n"
               "  --graph-pin           compute threads on CPUs 0..threads-1, the graph loader on the others\n"
               "  --prefill-topk K      prefill predictions kept per context position for sam+cal/sdnpu (default 4)\n"
               "  --param KEY=VALUE     a drafting parameter, e.g. sdnpu.follow=0.7 (keys: draft/methods.h)\n"
               "  --threads K           worker threads (default 2)\n"
               "  --ctx N               KV cache size in tokens (default min(model, 4096))\n"
               "  --tokenizer FILE      llama2.c tokenizer.bin (for llama2.c checkpoints)\n"
               "  --chat-template NAME  auto (default), none, chatml, llama3, llama2, vicuna, plain\n"
               "  --system TEXT         system prompt for chat templates\n"
               "  --ignore-eos          keep generating past end-of-generation tokens\n"
               "  --quiet               print only the generated text\n"
               "  --stats-json FILE     write the run's statistics as JSON\n",
            sdnpu_methods());
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
    if (!strcmp(a, "--history")) return VAL() ? (o->history = v, 1) : -1;
    if (!strcmp(a, "--task-group")) return VAL() ? (o->task_group = v, 1) : -1;
    if (!strcmp(a, "--graphs")) return VAL() ? (o->graphs = v, 1) : -1;
    if (!strcmp(a, "--profile-db")) return VAL() ? (o->profile_db = v, 1) : -1;
    if (!strcmp(a, "--graph-pin")) return o->graph_pin = 1, 1;
    if (!strcmp(a, "--graph-blocks")) return VAL() && !cli_int(a, v, 1, 128, &x) ? (o->graph_blocks = (int)x, 1) : -1;
    if (!strcmp(a, "--g1")) return VAL() && !cli_int(a, v, 1, 4096, &x) ? (o->g1 = (int)x, 1) : -1;
    if (!strcmp(a, "--g2")) return VAL() && !cli_int(a, v, 1, 64, &x) ? (o->g2 = (int)x, 1) : -1;
    if (!strcmp(a, "--quiet")) return o->quiet = 1, 1;
    if (!strcmp(a, "--compare")) return o->compare = 1, 1;
    if (!strcmp(a, "--ignore-eos")) return o->ignore_eos = 1, 1;
    if (!strcmp(a, "--param")) {
        if (!VAL()) return -1;
        sdnpu_error e = {0};
        if (sdnpu_check_param(v, &e)) { fprintf(stderr, "sdnpu: option --param: %s\n", e.message); return -1; }
        const char **p = realloc(o->params, (size_t)(o->n_params + 1) * sizeof *o->params);
        if (!p) { fprintf(stderr, "sdnpu: out of memory\n"); return -1; }
        o->params = p;
        o->params[o->n_params++] = v;
        return 1;
    }
    if (!strcmp(a, "--context")) {
        if (!VAL()) return -1;
        const char **p = realloc(o->contexts, (size_t)(o->n_contexts + 1) * sizeof *o->contexts);
        if (!p) { fprintf(stderr, "sdnpu: out of memory\n"); return -1; }
        o->contexts = p;
        o->contexts[o->n_contexts++] = v;
        return 1;
    }
    if (!strcmp(a, "--max-tokens")) return VAL() && !cli_int(a, v, 0, 1 << 22, &x) ? (o->max_tokens = (int)x, 1) : -1;
    if (!strcmp(a, "--threads")) return VAL() && !cli_int(a, v, 1, 256, &x) ? (o->threads = (int)x, 1) : -1;
    if (!strcmp(a, "--ctx")) return VAL() && !cli_int(a, v, 2, 1 << 22, &x) ? (o->n_ctx = (int)x, 1) : -1;
    if (!strcmp(a, "--prefill-topk")) return VAL() && !cli_int(a, v, 1, 64, &x) ? (o->prefill_topk = (int)x, 1) : -1;
    if (!strcmp(a, "--draft-max")) return VAL() && !cli_int(a, v, 1, 63, &x) ? (o->draft_max = (int)x, 1) : -1;
    if (!strcmp(a, "--draft-depth")) return VAL() && !cli_int(a, v, 1, 63, &x) ? (o->draft_depth = (int)x, 1) : -1;
    if (!strcmp(a, "--draft-branch")) return VAL() && !cli_int(a, v, 1, 63, &x) ? (o->draft_branch = (int)x, 1) : -1;
    if (!strcmp(a, "--seed")) return VAL() && !cli_int(a, v, 0, 0x7fffffffffffffffL, &x) ? (o->seed = (uint64_t)x, 1) : -1;
    if (!strcmp(a, "--top-k")) return VAL() && !cli_int(a, v, 0, 1 << 24, &x) ? (o->top_k = (int)x, 1) : -1;
    if (!strcmp(a, "--temp")) return VAL() && !cli_float(a, v, 0, 100, &d) ? (o->temp = (float)d, 1) : -1;
    if (!strcmp(a, "--top-p")) return VAL() && !cli_float(a, v, 0, 1, &d) ? (o->top_p = (float)d, 1) : -1;
#undef VAL
    return 0;
}

static int parse_ids(const char *s, int vocab, int32_t **ids, int *n) {
    int cap = 16, k = 0;
    int32_t *a = malloc((size_t)cap * sizeof *a);
    if (!a) { fprintf(stderr, "sdnpu: option --prompt-ids: out of memory\n"); return -1; }
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
        if (k == cap) {
            int32_t *b = realloc(a, (size_t)(cap *= 2) * sizeof *a);
            if (!b) { fprintf(stderr, "sdnpu: option --prompt-ids: out of memory\n"); free(a); return -1; }
            a = b;
        }
        a[k++] = (int32_t)v;
        p = end;
    }
    if (k == 0) { fprintf(stderr, "sdnpu: option --prompt-ids: no ids given\n"); free(a); return -1; }
    *ids = a;
    *n = k;
    return 0;
}

typedef struct pass {
    const char *method;
    sdnpu_result res;
} pass;

static double ms_per_token(const sdnpu_stats *s) { return s->generated_tokens ? 1000.0 * s->decode_s / s->generated_tokens : 0.0; }

static int same_output(const pass *a, const pass *b) {
    return a->res.n_tokens == b->res.n_tokens && !memcmp(a->res.tokens, b->res.tokens, sizeof(int32_t) * (size_t)a->res.n_tokens);
}

static void print_stats(const sdn_run_opts *o, const pass *p, const pass *base) {
    const sdnpu_stats *s = &p->res.stats;
    fprintf(stderr, "[%s] prompt %d tok, prefill %.1f tok/s | %d tokens in %d steps, mean accepted %.2f tok/step | decode %.1f tok/s, "
                    "%.2f ms/token | first token %.0f ms | peak %.1f MiB | %d threads\n",
            p->method, s->prompt_tokens, s->prefill_s > 0 ? (s->prompt_tokens - 1 - s->reused_tokens) / s->prefill_s : 0.0,
            s->generated_tokens, s->steps, s->mean_accepted, s->decode_s > 0 ? s->generated_tokens / s->decode_s : 0.0, ms_per_token(s),
            1000.0 * s->first_token_s, (double)s->peak_rss / (1 << 20), o->threads);
    if (o->task_group && strcmp(p->method, "none") != 0)
        fprintf(stderr, "[%s] task group %s: drafted from %d earlier answers (%ld tokens)%s\n", p->method, o->task_group ? o->task_group : "-",
                s->history_answers, s->history_tokens, s->answer_stored ? "; this answer stored" : "");
    if (strcmp(p->method, "none") != 0) {
        double other = s->decode_s - s->draft_s - s->verify_s;
        fprintf(stderr, "[%s] time: prefill %.1f ms, draft %.1f ms, verify %.1f ms, other %.1f ms | drafted %ld, accepted %ld | accepted "
                        "per step:",
                p->method, 1000 * s->prefill_s, 1000 * s->draft_s, 1000 * s->verify_s, 1000 * other, s->drafted_tokens, s->accepted_tokens);
        int last = 0;
        for (int i = 0; i < SDNPU_ACCEPT_HIST; i++) if (s->accepted_hist[i]) last = i;
        for (int i = 0; i <= last; i++) fprintf(stderr, " %d:%d", i, s->accepted_hist[i]);
        fprintf(stderr, "\n");
    }
    if (base) {
        fprintf(stderr, "[%s] vs plain: output %s, speedup %.2fx (%.2f vs %.2f ms/token)\n", p->method,
                same_output(base, p) ? "identical" : (o->temp > 0 ? "differs (sampling: same distribution, different draws)" : "DIFFERS"),
                ms_per_token(s) > 0 ? ms_per_token(&base->res.stats) / ms_per_token(s) : 0.0, ms_per_token(s), ms_per_token(&base->res.stats));
    }
}

static cJSON *pass_json(const pass *p, const pass *base) {
    const sdnpu_stats *s = &p->res.stats;
    static const char *finish[] = {"stop", "length", "cancelled", "context"};
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "method", p->method);
    cJSON_AddNumberToObject(j, "prompt_tokens", s->prompt_tokens);
    cJSON_AddNumberToObject(j, "reused_prompt_tokens", s->reused_tokens);
    cJSON_AddNumberToObject(j, "generated_tokens", s->generated_tokens);
    cJSON_AddStringToObject(j, "finish", finish[p->res.finish]);
    cJSON_AddNumberToObject(j, "steps", s->steps);
    cJSON_AddNumberToObject(j, "mean_accepted_tokens", s->mean_accepted);
    cJSON_AddNumberToObject(j, "drafted_tokens", (double)s->drafted_tokens);
    cJSON_AddNumberToObject(j, "accepted_draft_tokens", (double)s->accepted_tokens);
    cJSON *h = cJSON_CreateArray();
    for (int i = 0; i < SDNPU_ACCEPT_HIST; i++) cJSON_AddItemToArray(h, cJSON_CreateNumber(s->accepted_hist[i]));
    cJSON_AddItemToObject(j, "accepted_length_histogram", h);
    cJSON_AddNumberToObject(j, "history_answers", s->history_answers);
    cJSON_AddNumberToObject(j, "history_tokens", (double)s->history_tokens);
    cJSON_AddBoolToObject(j, "answer_stored", s->answer_stored);
    cJSON_AddNumberToObject(j, "prefill_s", s->prefill_s);
    cJSON_AddNumberToObject(j, "decode_s", s->decode_s);
    cJSON_AddNumberToObject(j, "draft_s", s->draft_s);
    cJSON_AddNumberToObject(j, "verify_s", s->verify_s);
    cJSON_AddNumberToObject(j, "other_s", s->decode_s - s->draft_s - s->verify_s);
    cJSON_AddNumberToObject(j, "time_to_first_token_s", s->first_token_s);
    cJSON_AddNumberToObject(j, "prefill_tokens_per_s", s->prefill_s > 0 ? (s->prompt_tokens - 1 - s->reused_tokens) / s->prefill_s : 0);
    cJSON_AddNumberToObject(j, "decode_tokens_per_s", s->decode_s > 0 ? s->generated_tokens / s->decode_s : 0);
    cJSON_AddNumberToObject(j, "ms_per_token", ms_per_token(s));
    cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)s->peak_rss);
    if (base) {
        cJSON_AddBoolToObject(j, "same_output_as_plain", same_output(base, p));
        cJSON_AddNumberToObject(j, "speedup_over_plain", ms_per_token(s) > 0 ? ms_per_token(&base->res.stats) / ms_per_token(s) : 0);
    }
    cJSON *ids = cJSON_CreateArray();
    for (int i = 0; i < p->res.n_tokens; i++) cJSON_AddItemToArray(ids, cJSON_CreateNumber(p->res.tokens[i]));
    cJSON_AddItemToObject(j, "tokens", ids);
    cJSON_AddStringToObject(j, "text", p->res.text ? p->res.text : "");
    return j;
}

/* Generated text straight to the terminal (or file) as it is committed. */
static int on_text(void *ud, const char *text, size_t len) {
    FILE *out = ud;
    fwrite(text, 1, len, out);
    fflush(out);
    return 0;
}

/* One generation pass with `method` on its own context (a graph context is set up for the
 * kind of pass it runs). Returns 0, or prints the error and returns 1. */
static int run_pass(const sdn_run_opts *o, sdnpu_model *m, sdnpu_request rq, const char *method, FILE *out, pass *p) {
    sdnpu_error err = {0};
    sdnpu_context *c = NULL;
    memset(p, 0, sizeof *p);
    p->method = method;
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.n_ctx = o->n_ctx;
    cp.n_threads = o->threads;
    cp.history_path = o->history;
    cp.graphs = o->graphs;
    cp.graph_blocks = o->graph_blocks;
    cp.g1 = o->g1;
    cp.g2 = o->g2;
    cp.profile_db = o->profile_db;
    cp.graph_pin = o->graph_pin;
    cp.verbose = !o->quiet;
    rq.method = method;
    rq.on_text = out ? on_text : NULL;
    rq.user_data = out;
    /* with --compare only the speculative pass stores its answer (it is the same text) */
    rq.store_answer = !(o->compare && !strcmp(method, "none"));
    int rc = sdnpu_context_new(m, &cp, &c, &err);
    if (!rc) rc = sdnpu_generate(c, &rq, &p->res, &err);
    if (!rc && out && !sdnpu_model_has_tokenizer(m))
        for (int i = 0; i < p->res.n_tokens; i++) fprintf(out, "%d ", p->res.tokens[i]);
    if (!rc && out) { fputc('\n', out); fflush(out); }
    if (!rc && o->graphs && !o->quiet) {
        char *rep = NULL;
        if (!sdnpu_graph_report(c, &rep, NULL)) fputs(rep, stderr);
        sdnpu_free(rep);
    }
    if (rc) fprintf(stderr, "sdnpu: %s\n", err.message);
    sdnpu_context_free(c);
    return rc ? 1 : 0;
}

/* Read the --context files; none may hold more text than the context can take. */
static int read_contexts(const sdn_run_opts *o, const sdnpu_model_info *mi, char ***docs_out) {
    int n_ctx = o->n_ctx > 0 ? o->n_ctx : (mi->context_length < 4096 ? mi->context_length : 4096);
    size_t cap = mi->max_token_bytes > 0 ? (size_t)n_ctx * (size_t)mi->max_token_bytes : SIZE_MAX;
    char why[160];
    snprintf(why, sizeof why, "more text than %d tokens can hold (raise --ctx or shorten the context)", n_ctx);
    char **docs = calloc((size_t)o->n_contexts + 1, sizeof *docs);
    if (!docs) { fprintf(stderr, "sdnpu: out of memory\n"); return -1; }
    *docs_out = docs;
    for (int i = 0; i < o->n_contexts; i++) {
        size_t len;
        sdn_err err = {0};
        if (sdn_read_file_max(o->contexts[i], cap, why, &docs[i], &len, &err)) {
            fprintf(stderr, "sdnpu: option --context: %s\n", err.msg);
            return -1;
        }
    }
    return 0;
}

static int write_stats_json(const sdn_run_opts *o, const sdnpu_model_info *mi, const pass *base, const pass *spec) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", o->model_path);
    cJSON_AddStringToObject(j, "model_fingerprint", mi->fingerprint);
    cJSON_AddNumberToObject(j, "threads", o->threads);
    if (o->task_group) cJSON_AddStringToObject(j, "task_group", o->task_group);
    cJSON *runs = cJSON_CreateArray();
    if (base->method) cJSON_AddItemToArray(runs, pass_json(base, NULL));
    if (spec->method) cJSON_AddItemToArray(runs, pass_json(spec, base->method ? base : NULL));
    cJSON_AddItemToObject(j, "runs", runs);
    char *txt = cJSON_Print(j);
    cJSON_Delete(j);
    FILE *f = txt ? fopen(o->stats_json, "w") : NULL;
    int ok = f && fputs(txt, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f)) ok = 0;
    free(txt);
    if (!ok) fprintf(stderr, "sdnpu: option --stats-json: cannot write %s\n", o->stats_json);
    return ok ? 0 : 1;
}

int sdn_run_request(const sdn_run_opts *o, FILE *out) {
    sdnpu_error err = {0};
    sdnpu_model *m = NULL;
    int32_t *ids = NULL;
    char **docs = NULL;
    int n_ids = 0, code = 1;
    pass base = {0}, spec = {0};
    sdnpu_model_params mp;
    sdnpu_model_params_init(&mp);
    mp.tokenizer_path = o->tokenizer_path;
    if (sdnpu_check_method(o->spec, &err)) { fprintf(stderr, "sdnpu: option --spec: %s\n", err.message); return 2; }
    if (o->task_group && !o->history) { fprintf(stderr, "sdnpu: option --task-group needs --history DB\n"); return 2; }
    if (sdnpu_model_load(o->model_path, &mp, &m, &err)) { fprintf(stderr, "sdnpu: %s\n", err.message); return 1; }
    sdnpu_model_info mi;
    sdnpu_model_get_info(m, &mi);
    sdnpu_request rq;
    sdnpu_request_init(&rq);
    rq.max_tokens = o->max_tokens;
    rq.temperature = o->temp;
    rq.top_p = o->top_p;
    rq.top_k = o->top_k;
    rq.seed = o->seed;
    rq.ignore_eos = o->ignore_eos;
    rq.draft_max = o->draft_max;
    rq.draft_depth = o->draft_depth;
    rq.draft_branch = o->draft_branch;
    rq.params = o->params;
    rq.n_params = o->n_params;
    rq.prefill_topk = o->prefill_topk;
    rq.task_group = o->task_group;
    rq.chat_template = o->chat_template;
    if (o->prompt_ids) {
        if (parse_ids(o->prompt_ids, mi.vocab, &ids, &n_ids)) { code = 2; goto out; }
        rq.prompt_ids = ids;
        rq.n_prompt_ids = n_ids;
    } else {
        if (!sdnpu_model_has_tokenizer(m)) {
            fprintf(stderr, "sdnpu: %s has no tokenizer: give the prompt with --prompt-ids\n", o->model_path);
            code = 2;
            goto out;
        }
        if (read_contexts(o, &mi, &docs)) goto out;
        rq.documents = (const char *const *)docs;
        rq.n_documents = o->n_contexts;
        rq.prompt = o->prompt;
        rq.system = o->system;
    }
    int plain_only = !strcmp(o->spec, "none");
    if (plain_only || o->compare) {
        if (o->compare && !o->quiet && out) fprintf(out, "-- plain decoding --\n");
        if (run_pass(o, m, rq, "none", out, &base)) goto out;
        if (!o->quiet) print_stats(o, &base, NULL);
    }
    if (!plain_only) {
        if (o->compare && !o->quiet && out) fprintf(out, "-- speculative decoding (%s) --\n", o->spec);
        if (run_pass(o, m, rq, o->spec, o->compare && o->quiet ? NULL : out, &spec)) goto out;
        if (!o->quiet) print_stats(o, &spec, o->compare ? &base : NULL);
    }
    code = o->stats_json ? write_stats_json(o, &mi, &base, &spec) : 0;
out:
    if (docs) {
        for (int i = 0; i < o->n_contexts; i++) free(docs[i]);
        free(docs);
    }
    sdnpu_result_free(&base.res);
    sdnpu_result_free(&spec.res);
    free(ids);
    sdnpu_model_free(m);
    return code;
}
