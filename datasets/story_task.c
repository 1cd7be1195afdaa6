/* story_task.c - generating the "story" task with the model itself (see story_task.h):
 * sample a story from an opening, keep it when long enough, cut its first sentence. */
#include "datasets/story_task.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonl.h"
#include "engine/forward.h"
#include "runtime/decode.h"
#include "tokenizer/tokenizer.h"

static const char *const k_openings[] = {
    "Once upon a time",
    "One day",
    "Once upon a time, there was a little girl named Lily.",
    "Tom and his mom went to the park.",
    "Once upon a time, in a big forest,",
    "Sara had a red ball.",
    "There was a big dog named Max.",
    "Ben wanted to play with his friend.",
};

/* The fixed list of openings (row i uses opening i mod count). */
static int sdn_story_openings(const char *const **out) {
    *out = k_openings;
    return (int)(sizeof k_openings / sizeof k_openings[0]);
}

char *sdn_first_sentence(const char *text) {
    const char *p = text;
    while (*p && isspace((unsigned char)*p)) p++;
    const char *start = p;
    for (const char *q = start; *q; q++) {
        if (*q != '.' && *q != '!' && *q != '?') continue;
        const char *e = q + 1;
        while (*e == '"' || *e == '\'') e++;
        if (!*e || isspace((unsigned char)*e)) return strndup(start, (size_t)(e - start));
    }
    /* no sentence end: the first 12 words */
    const char *q = start;
    for (int w = 0; *q && w < 12; w++) {
        while (*q && !isspace((unsigned char)*q)) q++;
        if (w < 11) while (*q && isspace((unsigned char)*q)) q++;
    }
    return strndup(start, (size_t)(q - start));
}

static int stop_fn(void *ud, int32_t t) {
    const sdn_tokenizer *tok = ud;
    return sdn_tokenizer_is_eog(tok, t) || t == sdn_tokenizer_bos(tok);
}

int sdn_story_task_write(sdn_model *m, const char *model_name, const sdn_story_opts *o, FILE *out, sdn_err *err) {
    const sdn_tokenizer *tok = sdn_model_tokenizer(m);
    if (!tok) return sdn_fail(err, SDN_EINVAL, "%s: the model has no tokenizer", sdn_model_path(m));
    int n = o->n > 0 ? o->n : 40, story_tokens = o->story_tokens > 0 ? o->story_tokens : 300;
    int min_tokens = o->min_tokens > 0 ? o->min_tokens : 80;
    float temp = o->temp > 0 ? o->temp : 0.8f;
    sdn_ctx *c = NULL;
    int n_ctx = sdn_model_cfg(m)->ctx_len < 4096 ? sdn_model_cfg(m)->ctx_len : 4096;
    if (story_tokens + 64 > n_ctx) return sdn_fail(err, SDN_EINVAL, "option --tokens: %d story tokens leave no room in the model's context of %d", story_tokens, n_ctx);
    sdn_ctx_params cp = {.n_ctx = n_ctx, .n_threads = o->threads > 0 ? o->threads : 1};
    int rc = sdn_ctx_new(m, &cp, &c, err);
    if (rc) return rc;
    char fp[17];
    jl_hex64(sdn_model_fingerprint(m), fp);
    const char *const *open;
    int n_open = sdn_story_openings(&open);
    for (int i = 0; i < n && !rc; i++) {
        const char *opening = open[i % n_open];
        int32_t *prompt = NULL, *gen = NULL, *all = NULL;
        int n_prompt = 0, n_gen = 0;
        char *story = NULL, *first = NULL;
        uint64_t seed = o->seed + (uint64_t)i;
        for (int attempt = 0; attempt < 8; attempt++, seed += 1000003ULL) {
            free(gen);
            gen = NULL;
            free(prompt);
            prompt = NULL;
            if ((rc = sdn_tokenize(tok, opening, strlen(opening), sdn_tokenizer_add_bos(tok), 0, &prompt, &n_prompt, err))) break;
            sdn_gen_params gp = {.max_tokens = story_tokens, .sampling = {.temp = temp, .top_p = 1.0f, .seed = seed}};
            gp.eog = stop_fn, gp.eog_ud = (void *)tok;
            if ((rc = sdn_generate_tokens(c, prompt, n_prompt, &gp, &gen, &n_gen, NULL, err))) break;
            if (n_gen >= min_tokens) break;
        }
        if (!rc) {
            all = malloc(((size_t)n_prompt + n_gen + 1) * sizeof *all);
            if (!all) rc = sdn_fail(err, SDN_ENOMEM, "out of memory");
        }
        if (!rc) {
            memcpy(all, prompt, (size_t)n_prompt * sizeof *all);
            if (n_gen) memcpy(all + n_prompt, gen, (size_t)n_gen * sizeof *all);
            rc = sdn_detokenize(tok, all, n_prompt + n_gen, &story, err);
        }
        if (!rc) {
            /* trim trailing whitespace */
            size_t l = strlen(story);
            while (l && isspace((unsigned char)story[l - 1])) story[--l] = 0;
            first = sdn_first_sentence(story);
            if (!first) rc = sdn_fail(err, SDN_ENOMEM, "out of memory");
        }
        if (!rc) {
            fprintf(out, "{\"id\":\"story-%llu-%d\",\"task\":\"story\",\"group\":\"story\",\"context\":", (unsigned long long)o->seed, i);
            jl_write_str(out, story);
            fputs(",\"prompt\":", out);
            jl_write_str(out, first);
            fputs(",\"reference\":null,\"meta\":{\"generator\":\"sdnpu make-story-task\",\"model\":", out);
            jl_write_str(out, model_name ? model_name : sdn_model_path(m));
            fprintf(out, ",\"model_fingerprint\":\"%s\",\"seed\":%llu,\"temperature\":%g,\"opening\":", fp, (unsigned long long)seed, (double)temp);
            jl_write_str(out, opening);
            fprintf(out, ",\"story_tokens\":%d}}\n", n_prompt + n_gen);
            if (ferror(out)) rc = sdn_fail(err, SDN_EIO, "write error");
        }
        free(prompt); free(gen); free(all); free(story); free(first);
    }
    sdn_ctx_free(c);
    return rc;
}
