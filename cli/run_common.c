/* run_common.c - shared body of `sdnpu run` and `sdnpu demo` (see run_common.h): options
 * parsed into a request of the public API (include/sdnpu.h; --graphs and its options: the
 * graph runtime of include/sdnpu_experimental.h), which does the whole request path; this
 * file only reads files, prints text and statistics, and compares passes. */
#include "cli/run_common.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "sdnpu_experimental.h"
#include "tools/tools.h"

void sdn_run_opts_init(sdn_run_opts *o) {
    memset(o, 0, sizeof *o);
    sdnpu_request rq; /* the defaults are the library's (SDNPU_DEFAULT_* in sdnpu.h) */
    sdnpu_request_init(&rq);
    o->max_tokens = rq.max_tokens;
    o->threads = cli_default_threads();
    cli_sampling_init(&o->smp);
    o->spec = rq.method;
    o->prefill_topk = rq.prefill_topk;
    o->draft_max = rq.draft_max;
    cli_prefix_cache_init(&o->pcache, 0);
}

void sdn_run_opts_free(sdn_run_opts *o) {
    cli_list_free(&o->contexts);
    cli_list_free(&o->params);
    cli_sampling_free(&o->smp);
    free(o->prompt_buf);
    o->prompt_buf = NULL;
    free(o->grammar);
    free(o->json_schema);
    o->grammar = o->json_schema = NULL;
}

int sdn_constraint_error(int rc, const sdnpu_error *err) {
    return rc == SDNPU_EINVAL && (!strncmp(err->message, "grammar", 7) || !strncmp(err->message, "json_schema", 11));
}

int sdn_run_opts_table(sdn_run_opts *o, cli_opt *t, int cap) {
    static char spec_help[160], max_help[64], topk_help[96];
    snprintf(spec_help, sizeof spec_help, "drafting method: %s (default %s)", sdnpu_methods(), o->spec);
    snprintf(max_help, sizeof max_help, "new tokens at most (default %d)", o->max_tokens);
    snprintf(topk_help, sizeof topk_help, "prefill predictions kept per position for sam+cal/sdnpu (default %d)", o->prefill_topk);
    const double big = 1 << 22;
    const cli_opt opts[] = {
        CLI_O_MODEL(&o->model_path, "GGUF file, llama2.c checkpoint or known model name"),
        {.name = "--prompt", .kind = CLI_STR, .dest = &o->prompt, .arg = "TEXT", .help = "the prompt ('-': read it from stdin)"},
        {.name = "--prompt-file", .kind = CLI_STR, .dest = &o->prompt_file, .arg = "FILE", .help = "read the prompt from FILE (UTF-8 or UTF-16 with BOM)"},
        {.name = "--prompt-ids", .kind = CLI_STR, .dest = &o->prompt_ids, .arg = "\"ID ...\"", .help = "the prompt as token ids, used as they are"},
        {.name = "--context", .kind = CLI_LIST, .dest = &o->contexts, .arg = "FILE", .help = "a context document (repeatable; UTF-8 or UTF-16 with BOM)"},
        {.name = "--system", .kind = CLI_STR, .dest = &o->system, .arg = "TEXT", .help = "system prompt (needs a chat template; an error without one)"},
        CLI_O_CHAT_TEMPLATE(&o->chat_template),
        {.name = "--print-prompt", .kind = CLI_FLAG, .dest = &o->print_prompt, .help = "print the prompt as the model sees it (chat template applied) and exit"},
        CLI_O_MAX_TOKENS(&o->max_tokens, 0, big, max_help),
        CLI_O_SAMPLING(&o->smp),
        {.name = "--ignore-eos", .kind = CLI_FLAG, .dest = &o->ignore_eos, .help = "keep generating past end-of-generation tokens"},
        CLI_O_SPEC(&o->spec, spec_help),
        {.name = "--compare", .kind = CLI_FLAG, .dest = &o->compare, .help = "also run plain decoding: same output?, speedup"},
        CLI_O_DRAFT_MAX(&o->draft_max, "draft tokens per step at most (default: from this machine's verify cost curve)"),
        CLI_O_DRAFT_DEPTH(&o->draft_depth, "draft tree depth at most (default: as --draft-max)"),
        CLI_O_DRAFT_BRANCH(&o->draft_branch, "draft tree branching at most (default 4)"),
        {.name = "--param", .kind = CLI_LIST, .dest = &o->params, .arg = "KEY=VALUE", .help = "a drafting parameter (repeatable; not with --spec none)"},
        CLI_O_PREFILL_TOPK(&o->prefill_topk, 1, topk_help),
        {.name = "--history", .kind = CLI_STR, .dest = &o->history, .arg = "FILE", .help = "SQLite history store of earlier answers (created when missing)"},
        {.name = "--task-group", .kind = CLI_STR, .dest = &o->task_group, .arg = "NAME", .help = "draft from the group's earlier answers in --history, store this one"},
        {.name = "--history-scope", .kind = CLI_STR, .dest = &o->history_scope, .arg = "S",
         .help = "group (default): draft from the task group's earlier answers; global: from every answer of the model in --history, the group's first"},
        CLI_O_GRAPHS(&o->graphs),
        CLI_O_GRAPH_BLOCKS(&o->graph_blocks, "--graph-blocks"),
        CLI_O_G1(&o->g1),
        CLI_O_G2(&o->g2),
        CLI_O_PROFILE_DB(&o->profile_db),
        {.name = "--graph-pin", .kind = CLI_FLAG, .dest = &o->graph_pin, .help = "compute threads on CPUs 0..threads-1, the graph loader on the others"},
        CLI_O_PREFIX_CACHE(&o->pcache, "prefix cache memory budget in MiB (default 0: off, or blocks pass through with --prefix-cache)"),
        CLI_O_THREADS(&o->threads),
        CLI_O_CTX(&o->n_ctx, 2, "KV cache size in tokens (default min(trained length, 8192); past the trained length: a warning)"),
        CLI_O_TOKENIZER(&o->tokenizer_path),
        CLI_O_QUIET(&o->quiet, "print only the generated text"),
        {.name = "--stats-json", .kind = CLI_STR, .dest = &o->stats_json, .arg = "FILE", .help = "write the run's statistics as JSON (checked writable first)"},
    };
    int n = (int)(sizeof opts / sizeof opts[0]);
    if (n + 1 > cap) return -1;
    memcpy(t, opts, sizeof opts);
    memset(&t[n], 0, sizeof *t);
    return n;
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
    if (s->prefix_memory_tokens || s->prefix_disk_tokens)
        fprintf(stderr, "[%s] prefix cache: %d of %d prompt tokens from memory, %d from disk, %.0f ms of prefill saved\n", p->method,
                s->prefix_memory_tokens, s->prompt_tokens, s->prefix_disk_tokens, 1000 * s->prefix_saved_s);
    const int global = o->history_scope && !strcmp(o->history_scope, "global");
    if ((o->task_group || global) && strcmp(p->method, "none") != 0)
        fprintf(stderr, "[%s] task group %s%s: drafted from %d earlier answers (%ld tokens)%s\n", p->method, o->task_group ? o->task_group : "-",
                global ? " (global scope)" : "", s->history_answers, s->history_tokens, s->answer_stored ? "; this answer stored" : "");
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
                same_output(base, p) ? "identical" : (o->smp.temp > 0 ? "differs (sampling: same distribution, different draws)" : "DIFFERS"),
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
    cJSON_AddNumberToObject(j, "prefix_memory_tokens", s->prefix_memory_tokens);
    cJSON_AddNumberToObject(j, "prefix_disk_tokens", s->prefix_disk_tokens);
    cJSON_AddNumberToObject(j, "prefix_saved_s", s->prefix_saved_s);
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

/* Prefill progress on a terminal (stderr), for prompts long enough to take a while: a line
 * rewritten in place, cleared when the prefill is done. */
static void on_progress(void *ud, int done, int total) {
    (void)ud;
    static double last;
    if (total < 512) return;
    double now = cli_now();
    if (done < total && now - last < 0.2) return;
    last = now;
    if (done >= total) fprintf(stderr, "\r%60s\r", "");
    else fprintf(stderr, "\rprefill: %d / %d prompt tokens (%.0f%%)", done, total, 100.0 * done / total);
    fflush(stderr);
}

/* One generation pass with `method` on its own context (a graph context is set up for the
 * kind of pass it runs). Returns 0, or prints the error and returns 1 (2: the library refused
 * the --grammar / --json-schema constraint). */
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
    sdnpu_graph_params gp;
    sdnpu_graph_params_init(&gp);
    gp.graphs = o->graphs;
    gp.graph_blocks = o->graph_blocks;
    gp.g1 = o->g1;
    gp.g2 = o->g2;
    gp.profile_db = o->profile_db;
    gp.graph_pin = o->graph_pin;
    rq.method = method;
    rq.on_text = out ? on_text : NULL;
    rq.user_data = out;
    rq.on_progress = !o->quiet && isatty(2) ? on_progress : NULL;
    /* with --compare only the speculative pass stores its answer (it is the same text) */
    rq.store_answer = !(o->compare && !strcmp(method, "none"));
    int rc = sdnpu_context_new_graphs(m, &cp, &gp, &c, &err);
    sdnpu_result_init(&p->res);
    if (!rc) rc = sdnpu_generate(c, &rq, &p->res, &err);
    if (!rc && out && !sdnpu_model_has_tokenizer(m))
        for (int i = 0; i < p->res.n_tokens; i++) fprintf(out, "%d ", p->res.tokens[i]);
    if (!rc && out) { fputc('\n', out); fflush(out); }
    if (!rc && o->graphs && !o->quiet) {
        char *rep = NULL;
        if (!sdnpu_graph_report(c, &rep, NULL)) fputs(rep, stderr);
        sdnpu_free(rep);
    }
    if (rc && sdn_constraint_error(rc, &err)) { /* the constraint the user gave: a usage error */
        fprintf(stderr, "sdnpu: option %s %s: %s\n", o->grammar ? "--grammar" : "--json-schema",
                o->grammar ? o->smp.grammar_file : o->smp.json_schema_file, err.message);
        sdnpu_context_free(c);
        return 2;
    }
    if (rc) fprintf(stderr, "sdnpu: %s\n", err.message);
    sdnpu_context_free(c);
    return rc ? 1 : 0;
}

/* Read the --context files, decoded from their encoding (UTF-8 with or without BOM, UTF-16
 * with BOM) or refused naming the byte offset; none may hold more text than the context can
 * take (the raw file may be up to twice that: UTF-16). */
static int read_contexts(const sdn_run_opts *o, const sdnpu_model_info *mi, char ***docs_out) {
    int n_ctx = o->n_ctx > 0 ? o->n_ctx : (mi->context_length < SDNPU_DEFAULT_N_CTX ? mi->context_length : SDNPU_DEFAULT_N_CTX);
    size_t cap = mi->max_token_bytes > 0 ? (size_t)n_ctx * (size_t)mi->max_token_bytes : SIZE_MAX / 4;
    char why[224];
    snprintf(why, sizeof why, "more text than %d tokens can hold (raise --ctx, up to the model's trained %d, or shorten the context)", n_ctx,
             mi->context_length);
    char **docs = calloc((size_t)o->contexts.n + 1, sizeof *docs);
    if (!docs) { fprintf(stderr, "sdnpu: out of memory\n"); return -1; }
    *docs_out = docs;
    for (int i = 0; i < o->contexts.n; i++)
        if (sdn_tool_read_context(o->contexts.v[i], cap, why, o->quiet, &docs[i])) return -1;
    return 0;
}

static int write_stats_json(const sdn_run_opts *o, const sdnpu_model_info *mi, const pass *base, const pass *spec) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", o->model_path);
    cJSON_AddStringToObject(j, "model_fingerprint", mi->fingerprint);
    cJSON_AddNumberToObject(j, "threads", o->threads);
    if (o->task_group) cJSON_AddStringToObject(j, "task_group", o->task_group);
    if (o->history_scope) cJSON_AddStringToObject(j, "history_scope", o->history_scope);
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

int sdn_run_opts_check(sdn_run_opts *o) {
    sdnpu_error err = {0};
    int sources = !!o->prompt + !!o->prompt_file + !!o->prompt_ids;
    if (sources > 1) {
        fprintf(stderr, "sdnpu: options --prompt, --prompt-file and --prompt-ids exclude each other: give one\n");
        return 2;
    }
    if (sdnpu_check_method(o->spec, &err)) { fprintf(stderr, "sdnpu: option --spec: %s\n", err.message); return 2; }
    if (o->graphs && sdnpu_check_graphs(o->graphs, &err)) { fprintf(stderr, "sdnpu: option --graphs: %s\n", err.message); return 2; }
    if (o->task_group && !o->history) { fprintf(stderr, "sdnpu: option --task-group needs --history FILE\n"); return 2; }
    if (cli_history_scope_check(o->history_scope, o->history, "run", NULL)) return 2;
    for (int i = 0; i < o->params.n; i++)
        if (sdnpu_check_param(o->params.v[i], &err)) { fprintf(stderr, "sdnpu: %s\n", err.message); return 2; }
    if (o->params.n && !strcmp(o->spec, "none")) {
        fprintf(stderr, "sdnpu: option --param: drafting parameters do nothing with --spec none (plain decoding); "
                        "choose a drafting method with --spec or drop --param\n");
        return 2;
    }
    if (o->prompt_ids && (o->contexts.n || o->system || o->chat_template)) {
        fprintf(stderr, "sdnpu: option %s: not used with --prompt-ids (the ids are the whole prompt, as they are)\n",
                o->contexts.n ? "--context" : o->system ? "--system" : "--chat-template");
        return 2;
    }
    if (cli_sampling_check(&o->smp, "run", 0)) return 2;
    if (o->stats_json && cli_check_output("--stats-json", o->stats_json)) return 1;
    if (o->prompt_file) {
        if (sdn_tool_read_prompt_file(o->prompt_file, &o->prompt_buf)) return 1;
        o->prompt = o->prompt_buf;
    } else if (o->prompt && !strcmp(o->prompt, "-")) {
        if (sdn_tool_read_stdin_text(&o->prompt_buf)) return 1;
        o->prompt = o->prompt_buf;
    }
    return 0;
}

int sdn_run_request(const sdn_run_opts *o, FILE *out) {
    sdnpu_error err = {0};
    sdnpu_model *m = NULL;
    int32_t *ids = NULL;
    char **docs = NULL;
    int n_ids = 0, code = 1, prc = 0;
    pass base = {0}, spec = {0};
    sdnpu_model_params mp;
    sdnpu_model_params_init(&mp);
    mp.tokenizer_path = o->tokenizer_path;
    cli_prefix_cache_apply(&o->pcache, &mp);
    /* notes (verify cost curve or graph profile measured) through the library's log unless --quiet */
    sdnpu_set_log_level(o->quiet ? SDNPU_LOG_WARN : SDNPU_LOG_INFO);
    if (sdn_tool_pull_if_known("run", o->model_path)) return 1; /* the program pulls a known model on first use; the library never downloads */
    if (sdnpu_model_load(o->model_path, &mp, &m, &err)) { fprintf(stderr, "sdnpu: %s\n", err.message); return 1; }
    sdnpu_model_info mi;
    sdnpu_model_info_init(&mi);
    sdnpu_model_get_info(m, &mi, NULL);
    sdnpu_request rq;
    sdnpu_request_init(&rq);
    rq.max_tokens = o->max_tokens;
    cli_sampling_apply(&o->smp, &rq);
    rq.ignore_eos = o->ignore_eos;
    rq.draft_max = o->draft_max;
    rq.draft_depth = o->draft_depth;
    rq.draft_branch = o->draft_branch;
    rq.params = o->params.v;
    rq.n_params = o->params.n;
    rq.prefill_topk = o->prefill_topk;
    rq.task_group = o->task_group;
    rq.history_scope = o->history_scope;
    rq.chat_template = o->chat_template;
    rq.grammar = o->grammar;
    rq.json_schema = o->json_schema;
    if (o->n_ctx > mi.context_length)
        fprintf(stderr, "sdnpu: warning: --ctx %d is past %s's trained context length of %d tokens: output beyond %d tokens "
                        "is likely to degrade\n", o->n_ctx, o->model_path, mi.context_length, mi.context_length);
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
        int raw = (o->chat_template && !strcmp(o->chat_template, "none")) ||
                  ((!o->chat_template || !strcmp(o->chat_template, "auto")) && !strcmp(mi.chat_template, "none"));
        if (o->system && raw) {
            fprintf(stderr, "sdnpu: option --system: %s has no chat template%s, so a system prompt has nowhere to go; "
                            "give --chat-template NAME (chatml, llama3, llama2, vicuna) or drop --system\n",
                    o->model_path, o->chat_template ? " (--chat-template none)" : "");
            code = 2;
            goto out;
        }
        if (read_contexts(o, &mi, &docs)) goto out;
        rq.documents = (const char *const *)docs;
        rq.n_documents = o->contexts.n;
        rq.prompt = o->prompt;
        rq.system = o->system;
    }
    if (o->print_prompt) {
        char *text = NULL;
        if (o->prompt_ids) {
            if (sdnpu_detokenize(m, ids, n_ids, &text, &err)) { fprintf(stderr, "sdnpu: %s\n", err.message); goto out; }
        } else if (sdnpu_render_prompt(m, &rq, &text, &err)) {
            fprintf(stderr, "sdnpu: %s\n", err.message);
            goto out;
        }
        fputs(text, stdout);
        if (!*text || text[strlen(text) - 1] != '\n') fputc('\n', stdout);
        sdnpu_free(text);
        code = 0;
        goto out;
    }
    int plain_only = !strcmp(o->spec, "none");
    if (plain_only || o->compare) {
        if (o->compare && !o->quiet && out) fprintf(out, "-- plain decoding --\n");
        if ((prc = run_pass(o, m, rq, "none", out, &base))) goto out;
        if (!o->quiet) print_stats(o, &base, NULL);
    }
    if (!plain_only) {
        if (o->compare && !o->quiet && out) fprintf(out, "-- speculative decoding (%s) --\n", o->spec);
        if ((prc = run_pass(o, m, rq, o->spec, o->compare && o->quiet ? NULL : out, &spec))) goto out;
        if (!o->quiet) print_stats(o, &spec, o->compare ? &base : NULL);
    }
    code = o->stats_json ? write_stats_json(o, &mi, &base, &spec) : 0;
out:
    if (prc) code = prc;
    if (docs) {
        for (int i = 0; i < o->contexts.n; i++) free(docs[i]);
        free(docs);
    }
    sdnpu_result_free(&base.res);
    sdnpu_result_free(&spec.res);
    free(ids);
    sdnpu_model_free(m);
    return code;
}
