/* summarize.c - an app embedding sdnpu: summarize a document with a small instruction-tuned
 * model, streaming the answer, first with plain decoding and then with speculative decoding
 * that drafts from the document and from earlier summaries of the same task group (a SQLite
 * history store), and print the speedup. It includes only <sdnpu.h>.
 *
 * Build against the installed library:
 *     cc summarize.c $(pkg-config --cflags --libs sdnpu) -o summarize
 * Run:
 *     ./summarize [--model PATH|NAME] [--cache DIR] [--history DB] [--max-tokens N] [DOCUMENT.txt]
 * (defaults: smollm2-135m-instruct from the model cache, where `sdnpu pull smollm2-135m-instruct`
 * puts it: --cache, else $SDNPU_CACHE, else ~/.cache/sdnpu; a history store in
 * ./summaries.sqlite; a short built-in document). The library reads no environment and never
 * downloads: this app reads $SDNPU_CACHE and $HOME itself and tells the library. */
#include <sdnpu.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *k_document =
    "Four score and seven years ago our fathers brought forth on this continent, a new nation, conceived in Liberty, and "
    "dedicated to the proposition that all men are created equal. Now we are engaged in a great civil war, testing whether "
    "that nation, or any nation so conceived and so dedicated, can long endure. We are met on a great battle-field of that "
    "war. We have come to dedicate a portion of that field, as a final resting place for those who here gave their lives "
    "that that nation might live.";

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
    size_t k;
    while (s && (k = fread(s + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (n + 1 == cap) {
            char *t = realloc(s, cap *= 2);
            if (!t) { free(s); s = NULL; }
            s = t;
        }
    }
    fclose(f);
    if (s) s[n] = 0;
    return s;
}

/* Streaming callback: print each piece of the answer as it is decoded. */
static int print_text(void *user_data, const char *text, size_t len) {
    (void)user_data;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0; /* nonzero would cancel the request */
}

static int summarize(sdnpu_context *ctx, const char *doc, const char *method, int max_tokens, sdnpu_result *res) {
    sdnpu_request r;
    sdnpu_request_init(&r);
    r.prompt = "Summarize the document in two sentences.";
    r.documents = &doc;
    r.n_documents = 1;
    r.task_group = "summaries"; /* earlier summaries are drafted from, this one is stored */
    r.method = method;
    r.max_tokens = max_tokens;
    r.on_text = print_text;
    r.store_answer = strcmp(method, "none") != 0;
    sdnpu_error err;
    printf("[%s] ", method);
    if (sdnpu_generate(ctx, &r, res, &err) != SDNPU_OK) {
        fprintf(stderr, "\nsummarize: %s (%s)\n", err.message, sdnpu_status_string(err.code));
        return 1;
    }
    printf("\n");
    return 0;
}

int main(int argc, char **argv) {
    const char *model_name = "smollm2-135m-instruct", *history = "summaries.sqlite", *doc_path = NULL, *cache = NULL;
    int max_tokens = 96;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) model_name = argv[++i];
        else if (!strcmp(argv[i], "--history") && i + 1 < argc) history = argv[++i];
        else if (!strcmp(argv[i], "--cache") && i + 1 < argc) cache = argv[++i];
        else if (!strcmp(argv[i], "--max-tokens") && i + 1 < argc) max_tokens = atoi(argv[++i]);
        else if (argv[i][0] != '-') doc_path = argv[i];
        else { fprintf(stderr, "usage: summarize [--model PATH|NAME] [--cache DIR] [--history DB] [--max-tokens N] [DOCUMENT.txt]\n"); return 2; }
    }
    char *doc = doc_path ? read_file(doc_path) : NULL;
    if (doc_path && !doc) { fprintf(stderr, "summarize: cannot read %s\n", doc_path); return 1; }

    sdnpu_error err;
    /* the model cache (known models, the verify cost curve measured once per machine) */
    char cache_buf[1024];
    const char *home = getenv("HOME");
    if (!cache) cache = getenv("SDNPU_CACHE");
    if ((!cache || !*cache) && home && *home) snprintf(cache_buf, sizeof cache_buf, "%s/.cache/sdnpu", home), cache = cache_buf;
    if (cache && *cache && sdnpu_set_cache_dir(cache, &err) != SDNPU_OK) {
        fprintf(stderr, "summarize: --cache: %s\n", err.message);
        free(doc);
        return 2;
    }
    sdnpu_model *model;
    if (sdnpu_model_load(model_name, NULL, &model, &err) != SDNPU_OK) {
        fprintf(stderr, "summarize: %s\n", err.message);
        free(doc);
        return 1;
    }
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.history_path = history;
    sdnpu_context *ctx;
    if (sdnpu_context_new(model, &cp, &ctx, &err) != SDNPU_OK) {
        fprintf(stderr, "summarize: %s\n", err.message);
        sdnpu_model_free(model);
        free(doc);
        return 1;
    }
    printf("sdnpu %s, model %s\n", sdnpu_version(), model_name);
    sdnpu_result plain, spec;
    sdnpu_result_init(&plain);
    sdnpu_result_init(&spec);
    int rc = summarize(ctx, doc ? doc : k_document, "none", max_tokens, &plain);
    if (!rc) rc = summarize(ctx, doc ? doc : k_document, "sdnpu", max_tokens, &spec);
    if (!rc) {
        double ms_plain = 1000.0 * plain.stats.decode_s / (plain.stats.generated_tokens ? plain.stats.generated_tokens : 1);
        double ms_spec = 1000.0 * spec.stats.decode_s / (spec.stats.generated_tokens ? spec.stats.generated_tokens : 1);
        int same = plain.n_tokens == spec.n_tokens && !memcmp(plain.tokens, spec.tokens, sizeof(int32_t) * (size_t)plain.n_tokens);
        printf("plain %.2f ms/token, sdnpu %.2f ms/token: speedup %.2fx, %.2f tokens per step, drafted from %d earlier "
               "summaries, output %s\n",
               ms_plain, ms_spec, ms_spec > 0 ? ms_plain / ms_spec : 0, spec.stats.mean_accepted, spec.stats.history_answers,
               same ? "identical" : "DIFFERENT");
        if (!same) rc = 1;
        sdnpu_result_free(&plain);
        sdnpu_result_free(&spec);
    }
    sdnpu_context_free(ctx);
    sdnpu_model_free(model);
    free(doc);
    return rc;
}
