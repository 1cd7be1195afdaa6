/* run_common.c - shared body of `sdnpu run` and `sdnpu demo` (see run_common.h). */
#include "engine/cli/run_common.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "common/sdn_util.h"
#include "engine/cli/cli.h"
#include "engine/forward.h"
#include "engine/model.h"
#include "engine/request.h"
#include "engine/tokenizer.h"

void sdn_run_opts_init(sdn_run_opts *o) {
    memset(o, 0, sizeof *o);
    o->max_tokens = 256;
    o->threads = 2;
    o->sampling.top_p = 1.0f;
}

void sdn_run_opts_free(sdn_run_opts *o) {
    free(o->contexts);
    o->contexts = NULL;
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
    if (!strcmp(a, "--quiet")) return o->quiet = 1, 1;
    if (!strcmp(a, "--ignore-eos")) return o->ignore_eos = 1, 1;
    if (!strcmp(a, "--context")) {
        if (!VAL()) return -1;
        o->contexts = realloc(o->contexts, (size_t)(o->n_contexts + 1) * sizeof *o->contexts);
        o->contexts[o->n_contexts++] = v;
        return 1;
    }
    if (!strcmp(a, "--max-tokens")) return VAL() && !cli_int(a, v, 0, 1 << 22, &x) ? (o->max_tokens = (int)x, 1) : -1;
    if (!strcmp(a, "--threads")) return VAL() && !cli_int(a, v, 1, 256, &x) ? (o->threads = (int)x, 1) : -1;
    if (!strcmp(a, "--ctx")) return VAL() && !cli_int(a, v, 2, 1 << 22, &x) ? (o->n_ctx = (int)x, 1) : -1;
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
    for (int i = 0; i < n; i++)
        if (s->dt) emit(s, buf, sdn_detok_push(s->dt, t[i], buf, sizeof buf));
    return 0;
}

static int is_eog(void *ud, int32_t tok) {
    const sdn_tokenizer *t = ud;
    /* a BOS in the middle of generation starts a new document: stop there too (llama2.c's run.c rule) */
    return t && (sdn_tokenizer_is_eog(t, tok) || tok == sdn_tokenizer_bos(t));
}

static int write_stats_json(const char *path, const sdn_run_opts *o, const sdn_model *m, const sdn_run_result *r) {
    cJSON *j = cJSON_CreateObject();
    const sdn_gen_stats *s = &r->stats;
    cJSON_AddStringToObject(j, "model", o->model_path);
    cJSON_AddNumberToObject(j, "threads", o->threads);
    cJSON_AddNumberToObject(j, "prompt_tokens", s->n_prompt);
    cJSON_AddNumberToObject(j, "generated_tokens", s->n_gen);
    cJSON_AddNumberToObject(j, "decode_steps", s->steps);
    cJSON_AddNumberToObject(j, "prefill_s", s->t_prefill);
    cJSON_AddNumberToObject(j, "decode_s", s->t_decode);
    cJSON_AddNumberToObject(j, "time_to_first_token_s", s->t_first_token);
    cJSON_AddNumberToObject(j, "prefill_tokens_per_s", s->t_prefill > 0 ? (s->n_prompt - 1) / s->t_prefill : 0);
    cJSON_AddNumberToObject(j, "decode_tokens_per_s", s->t_decode > 0 ? s->n_gen / s->t_decode : 0);
    cJSON_AddNumberToObject(j, "ms_per_token", s->n_gen ? 1000.0 * s->t_decode / s->n_gen : 0);
    cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)s->peak_rss);
    char fp[24];
    snprintf(fp, sizeof fp, "%016llx", (unsigned long long)sdn_model_fingerprint(m));
    cJSON_AddStringToObject(j, "model_fingerprint", fp);
    cJSON *ids = cJSON_CreateArray();
    for (int i = 0; i < r->n_tokens; i++) cJSON_AddItemToArray(ids, cJSON_CreateNumber(r->tokens[i]));
    cJSON_AddItemToObject(j, "tokens", ids);
    cJSON_AddStringToObject(j, "text", r->text ? r->text : "");
    char *txt = cJSON_Print(j);
    cJSON_Delete(j);
    FILE *f = fopen(path, "w");
    if (!f) { fprintf(stderr, "sdnpu: option --stats-json: cannot write %s\n", path); free(txt); return -1; }
    fputs(txt, f);
    fputc('\n', f);
    fclose(f);
    free(txt);
    return 0;
}

void sdn_run_result_free(sdn_run_result *r) {
    free(r->tokens);
    free(r->text);
    memset(r, 0, sizeof *r);
}

int sdn_run_request(const sdn_run_opts *o, FILE *out, sdn_run_result *res) {
    memset(res, 0, sizeof *res);
    sdn_err err = {0};
    sdn_model *m = NULL;
    sdn_ctx *c = NULL;
    int32_t *prompt = NULL;
    char **docs = NULL;
    int n_prompt = 0, code = 1;
    stream st = {.out = out};
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
        docs = calloc((size_t)o->n_contexts + 1, sizeof *docs);
        for (int i = 0; i < o->n_contexts; i++) {
            size_t len;
            if (sdn_read_file(o->contexts[i], &docs[i], &len, &err)) { sdn_fail(&err, err.code, "option --context"); goto fail; }
        }
        sdn_request rq = {(const char *const *)docs, o->n_contexts, o->prompt, o->system, o->chat_template};
        if (sdn_request_tokens(m, &rq, &prompt, &n_prompt, NULL, &err)) goto fail;
    }
    sdn_ctx_params cp = {.n_ctx = o->n_ctx, .n_threads = o->threads};
    if (sdn_ctx_new(m, &cp, &c, &err)) goto fail;
    if (tok) st.dt = sdn_detok_new(tok);
    sdn_gen_params gp = {.max_tokens = o->max_tokens, .sampling = o->sampling, .ignore_eog = o->ignore_eos};
    if (sdn_generate(c, prompt, n_prompt, &gp, is_eog, (void *)tok, on_tokens, &st, &res->tokens, &res->n_tokens, &res->stats, &err))
        goto fail;
    if (st.dt) {
        char buf[512];
        emit(&st, buf, sdn_detok_flush(st.dt, buf, sizeof buf));
    } else if (out) {
        for (int i = 0; i < res->n_tokens; i++) fprintf(out, "%s%d", i ? " " : "", res->tokens[i]);
    }
    if (out) { fputc('\n', out); fflush(out); }
    res->text = st.text;
    st.text = NULL;
    const sdn_gen_stats *s = &res->stats;
    if (!o->quiet)
        fprintf(stderr,
                "%s%sprompt %d tokens, prefill %.1f tok/s | generated %d tokens, decode %.1f tok/s, %.2f ms/token | "
                "first token %.0f ms | peak memory %.1f MiB | %d threads\n",
                o->label ? o->label : "", o->label ? ": " : "", s->n_prompt,
                s->t_prefill > 0 ? (s->n_prompt - 1) / s->t_prefill : 0.0, s->n_gen, s->t_decode > 0 ? s->n_gen / s->t_decode : 0.0,
                s->n_gen ? 1000.0 * s->t_decode / s->n_gen : 0.0, 1000.0 * s->t_first_token, (double)s->peak_rss / (1 << 20),
                o->threads);
    if (o->stats_json && write_stats_json(o->stats_json, o, m, res)) goto out;
    code = 0;
    goto out;
fail:
    fprintf(stderr, "sdnpu: %s\n", err.msg);
out:
    if (docs) {
        for (int i = 0; i < o->n_contexts; i++) free(docs[i]);
        free(docs);
    }
    if (st.dt) sdn_detok_free(st.dt);
    free(st.text);
    free(prompt);
    sdn_ctx_free(c);
    sdn_model_free(m);
    return code;
}
