/* test_constrained.c - constrained decoding through the decode loop
 * (docs/constrained.md). The grammar module's own tests are in test_grammar.c.
 *
 * 1. Lossless speculation under a constraint (public API, a tiny make-model model with its
 *    generated vocabulary): for a JSON schema and a GBNF grammar, every drafting method, with
 *    and without forced-text drafting, gives exactly the tokens of constrained plain
 *    decoding; every answer is checked by an independent reference: cJSON plus the schema's
 *    rules written out by hand, a PCRE2 regular expression for the grammar (partial match
 *    for answers max_tokens cut short).
 * 2. The real SmolLM2-135M-Instruct on DroidTask ui requests with the action schema
 *    (datasets/schemas/ui_action.json): plain, sdnpu with and without forced text, and pld give
 *    the same tokens; every answer is written out and validated by Python's jsonschema
 *    (tests/constrained/validate.py).
 * 3. Sampling: the first two tokens of constrained speculative (and plain) sampling against the
 *    exact renormalized distribution computed from the model's logits and a PCRE2 mask
 *    (chi-square goodness of fit, alpha 0.001); sampling under a deliberately wrong mask
 *    (one letter missing from a class) must fail the same test.
 * 4. Bad constraints: both fields, a bad grammar, an unsupported schema keyword are
 *    SDNPU_EINVAL naming the position / keyword, and the context still answers afterwards. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <math.h>
#include <pcre2.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cjson/cJSON.h>
#include <cmocka.h>

#include "sdnpu.h"
#include "common/sdn_util.h"
#include "draft/drafter.h"
#include "engine/forward.h"
#include "modelfile/model.h"
#include "tokenizer/tokenizer.h"
#include "grammar/grammar.h"
#include "runtime/decode.h"
#include "support/test_util.h"

/* ---- helpers ---- */

/* PCRE2 as the independent reference: 1 when text matches the anchored pattern wholly
 * (complete) or is a prefix of a match (partial allowed). */
static int re_check(const char *pattern, const char *text, size_t len, int partial_ok) {
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_ANCHORED | PCRE2_UTF, &ec, &eo, NULL);
    if (!re) fail_msg("bad test pattern %s", pattern);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = pcre2_match(re, (PCRE2_SPTR)text, len, 0, partial_ok ? PCRE2_PARTIAL_HARD : 0, md, NULL);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return rc >= 0 || (partial_ok && rc == PCRE2_ERROR_PARTIAL);
}

typedef struct gen_out {
    int32_t *tok;
    int n;
    char *text;
    sdnpu_finish finish;
    sdnpu_stats st;
} gen_out;

static void gen_out_free(gen_out *g) {
    free(g->tok);
    free(g->text);
    memset(g, 0, sizeof *g);
}

/* One greedy request: method, constraint, forced-text drafting on/off. */
static gen_out run(sdnpu_context *c, const char *prompt, const char *chat_template, const char *method, const char *schema,
                   const char *grammar, int forced, int max_tokens, int draft_max) {
    sdnpu_request r;
    sdnpu_request_init(&r);
    r.prompt = prompt;
    r.chat_template = chat_template;
    r.method = method;
    r.json_schema = schema;
    r.grammar = grammar;
    r.max_tokens = max_tokens;
    r.draft_max = draft_max;
    const char *params[] = {forced ? "grammar.forced=1" : "grammar.forced=0"};
    r.params = params;
    r.n_params = 1;
    sdnpu_result res;
    sdnpu_result_init(&res);
    sdnpu_error err;
    if (sdnpu_generate(c, &r, &res, &err)) fail_msg("%s %s: %s", method, schema ? "schema" : "grammar", err.message);
    gen_out g = {.tok = res.tokens, .n = res.n_tokens, .text = res.text, .finish = res.finish, .st = res.stats};
    return g;
}

static char *slurp(const char *path) {
    char *b = NULL;
    size_t n = 0;
    sdn_err e = {0};
    if (sdn_read_file(path, &b, &n, &e)) fail_msg("%s", e.msg);
    return b;
}

/* ---- 1. every method = constrained plain, tiny model ---- */

static const char *k_schema =
    "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},"
    "\"action\":{\"type\":\"string\",\"enum\":[\"tap\",\"input\",\"N/A\"]},"
    "\"input_text\":{\"type\":\"string\",\"maxLength\":12}},"
    "\"required\":[\"id\",\"action\",\"input_text\"],\"additionalProperties\":false}";

/* the schema's rules, checked by hand on cJSON's parse of a complete answer */
static void check_action_json(const char *text) {
    cJSON *j = cJSON_Parse(text);
    if (!j) fail_msg("constrained answer is not JSON: %s", text);
    assert_true(cJSON_IsObject(j));
    assert_int_equal(cJSON_GetArraySize(j), 3);
    cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id"), *a = cJSON_GetObjectItemCaseSensitive(j, "action"),
          *t = cJSON_GetObjectItemCaseSensitive(j, "input_text");
    assert_true(cJSON_IsNumber(id) && id->valuedouble == floor(id->valuedouble));
    assert_true(cJSON_IsString(a) && (!strcmp(a->valuestring, "tap") || !strcmp(a->valuestring, "input") || !strcmp(a->valuestring, "N/A")));
    assert_true(cJSON_IsString(t));
    cJSON_Delete(j);
}

static const char *k_gbnf = "# a list of lowercase words\n"
                            "root ::= \"items: \" word (\", \" word){0,3} \".\"\n"
                            "word ::= [a-z]+\n";
static const char *k_gbnf_re = "items: [a-z]+(, [a-z]+){0,3}\\.";

static void test_methods_identical_tiny(void **state) {
    (void)state;
    sdnpu_model *m;
    sdnpu_error err;
    if (sdnpu_model_load(tu_model("tiny-llama", "Q8_0", 41), NULL, &m, &err)) fail_msg("%s", err.message);
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.n_ctx = 512;
    cp.n_threads = 1;
    sdnpu_context *c;
    if (sdnpu_context_new(m, &cp, &c, &err)) fail_msg("%s", err.message);
    const char *prompt = "{\"id\": 3, \"action\": \"tap\", \"input_text\": \"N/A\"}\n"
                         "{\"id\": 12, \"action\": \"input\", \"input_text\": \"hello\"}\n"
                         "items: apples, pears, plums.\nitems: one, two.\n";
    const char *methods[] = {"pld", "sam", "sam+tree", "sam+cal", "sam+reuse", "sdnpu"};
    long forced_total = 0;
    for (int k = 0; k < 2; k++) {
        const char *schema = k == 0 ? k_schema : NULL, *grammar = k == 1 ? k_gbnf : NULL;
        gen_out ref = run(c, prompt, "none", "none", schema, grammar, 1, 48, 0);
        print_message("%s plain: %d tokens, finish %d: %s\n", k ? "grammar" : "schema", ref.n, ref.finish, ref.text);
        if (k == 0 && ref.finish == SDNPU_FINISH_STOP) check_action_json(ref.text);
        if (k == 1) assert_true(re_check(k_gbnf_re, ref.text, strlen(ref.text), ref.finish != SDNPU_FINISH_STOP));
        for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
            for (int forced = 0; forced < 2; forced++) {
                gen_out g = run(c, prompt, "none", methods[i], schema, grammar, forced, 48, 8);
                if (g.n != ref.n || memcmp(g.tok, ref.tok, sizeof(int32_t) * (size_t)ref.n))
                    fail_msg("%s, %s, forced %d: constrained speculative output differs from constrained plain:\n%s\nvs\n%s",
                             k ? "grammar" : "schema", methods[i], forced, g.text, ref.text);
                assert_int_equal(g.finish, ref.finish);
                if (!forced) assert_int_equal(g.st.forced_tokens, 0);
                forced_total += g.st.forced_tokens;
                gen_out_free(&g);
            }
        gen_out_free(&ref);
    }
    print_message("forced-text draft tokens over all runs: %ld\n", forced_total);
    assert_true(forced_total > 0);
    sdnpu_context_free(c);
    sdnpu_model_free(m);
}

/* ---- 2. real SmolLM2 on DroidTask requests ---- */

static void test_smollm2_ui_schema(void **state) {
    (void)state;
    const char *path;
    TU_REQUIRE_SMOLLM2(path);
    TU_REQUIRE_SHARED();
    char *schema = slurp(tu_source_path("datasets/schemas/ui_action.json"));
    sdnpu_model *m;
    sdnpu_error err;
    if (sdnpu_model_load(path, NULL, &m, &err)) fail_msg("%s", err.message);
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.n_ctx = 2048;
    sdnpu_context *c;
    if (sdnpu_context_new(m, &cp, &c, &err)) fail_msg("%s", err.message);
    FILE *ds = fopen(tu_shared_path("datasets/ui/ui_droidtask.jsonl"), "r");
    assert_non_null(ds);
    char out_path[1200];
    snprintf(out_path, sizeof out_path, "%s/constrained-ui-answers.jsonl", getenv("SDN_BUILD") ? getenv("SDN_BUILD") : "/tmp");
    FILE *out = fopen(out_path, "w");
    assert_non_null(out);
    static char line[1 << 16];
    int n_req = 0, row = 0;
    long steps_plain = 0, steps_forced = 0, toks = 0;
    char *first_prompt = NULL;
    const struct { const char *method; int forced; } runs[] = {{"sdnpu", 1}, {"sdnpu", 0}, {"pld", 1}};
    /* SDN_TEST_QUICK (.ci/sanitize, where each request takes over a minute under ASan): 2 */
    const int want = getenv("SDN_TEST_QUICK") ? 2 : 6;
    while (n_req < want && fgets(line, sizeof line, ds)) {
        if (row++ % 17) continue; /* spread over the file's apps */
        cJSON *j = cJSON_Parse(line);
        assert_non_null(j);
        const char *ctx = cJSON_GetObjectItem(j, "context")->valuestring, *pr = cJSON_GetObjectItem(j, "prompt")->valuestring;
        char *prompt = malloc(strlen(ctx) + strlen(pr) + 4);
        sprintf(prompt, "%s\n\n%s", ctx, pr);
        gen_out ref = run(c, prompt, NULL, "none", schema, NULL, 1, 64, 0);
        assert_int_equal(ref.finish, SDNPU_FINISH_STOP);
        steps_plain += ref.st.steps;
        toks += ref.n;
        for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
            gen_out g = run(c, prompt, NULL, runs[k].method, schema, NULL, runs[k].forced, 64, 0);
            if (g.n != ref.n || memcmp(g.tok, ref.tok, sizeof(int32_t) * (size_t)ref.n))
                fail_msg("request %d, %s forced %d: output differs from constrained plain:\n%s\nvs\n%s", n_req, runs[k].method,
                         runs[k].forced, g.text, ref.text);
            if (k == 0) steps_forced += g.st.steps;
            gen_out_free(&g);
        }
        fprintf(out, "%s\n", ref.text);
        check_action_json(ref.text);
        gen_out_free(&ref);
        if (!first_prompt) first_prompt = prompt;
        else free(prompt);
        cJSON_Delete(j);
        n_req++;
    }
    fclose(ds);
    fclose(out);
    print_message("%d ui requests, %ld answer tokens: plain %ld steps, sdnpu+forced %ld steps\n", n_req, toks, steps_plain, steps_forced);
    assert_int_equal(n_req, want);
    /* forced text, the drafter's guesses past it and the way out take an answer of ~25 tokens
       from ~26 plain steps to 2-3 (docs/constrained.md) */
    assert_true(steps_forced * 4 < steps_plain);
    /* the context's memory of the model's forms (sdn_draft_memo): on a fresh context the same
       request drafts fewer forced tokens once the model twice wrote `{` `"` where the tokenizer
       merges `{"` (the merged chain shrinks to its first token), with the same answer */
    sdnpu_context *c2;
    if (sdnpu_context_new(m, &cp, &c2, &err)) fail_msg("%s", err.message);
    gen_out g0 = run(c2, first_prompt, NULL, "sdnpu", schema, NULL, 1, 64, 0);
    gen_out g1 = run(c2, first_prompt, NULL, "sdnpu", schema, NULL, 1, 64, 0);
    gen_out g2 = run(c2, first_prompt, NULL, "sdnpu", schema, NULL, 1, 64, 0);
    assert_true(g0.n == g2.n && !memcmp(g0.tok, g2.tok, sizeof(int32_t) * (size_t)g0.n));
    print_message("forced tokens drafted for one request on a fresh context: %ld, then %ld, then %ld\n", (long)g0.st.forced_tokens,
                  (long)g1.st.forced_tokens, (long)g2.st.forced_tokens);
    assert_true(g2.st.forced_tokens < g0.st.forced_tokens);
    gen_out_free(&g0), gen_out_free(&g1), gen_out_free(&g2);
    sdnpu_context_free(c2);
    free(first_prompt);
    /* the independent validator */
    char cmd[4000];
    snprintf(cmd, sizeof cmd, "python3 %s %s %s", tu_source_path("tests/constrained/validate.py"), tu_source_path("datasets/schemas/ui_action.json"),
             out_path);
    int rc = system(cmd);
    if (rc != 0 && WEXITSTATUS(rc) == 77 && !getenv("CI")) {
        print_message("python3 jsonschema is missing: the independent validation is skipped (apt-get install python3-jsonschema)\n");
    } else {
        assert_int_equal(rc, 0);
    }
    free(schema);
    sdnpu_context_free(c);
    sdnpu_model_free(m);
}

/* ---- 3. sampling: chi-square against the exact renormalized distribution ---- */

typedef struct fixed_drafter {
    int32_t a, b, c, bad;
} fixed_drafter;

static int fd_begin(sdn_drafter *d, const int32_t *ctx, int n, const sdn_prefill_preds *p, sdn_err *e) {
    (void)d, (void)ctx, (void)n, (void)p, (void)e;
    return 0;
}
static int fd_propose(sdn_drafter *d, sdn_tree *out, const sdn_draft_caps *caps, sdn_err *e) {
    (void)caps, (void)e;
    fixed_drafter *f = d->impl;
    int x = sdn_tree_add(out, -1, f->a, 1, NULL);
    sdn_tree_add(out, -1, f->bad, 1, NULL); /* disallowed: pruned before the forward pass */
    sdn_tree_add(out, -1, f->b, 1, NULL);
    if (x >= 0) sdn_tree_add(out, x, f->c, 1, NULL);
    return 0;
}
static int fd_feedback(sdn_drafter *d, const sdn_draft_feedback *fb, sdn_err *e) {
    (void)d, (void)fb, (void)e;
    return 0;
}
static void fd_destroy(sdn_drafter *d) { (void)d; }
static const sdn_drafter_ops fd_ops = {"fixed", fd_begin, fd_propose, fd_feedback, fd_destroy, NULL};

#define RE_OK "[b-s][a-z ]+\\."

/* the token's bytes continue `prefix` (len pl) as a prefix of a sentence of RE_OK */
static int allowed_after(const sdn_tokenizer *t, const char *prefix, size_t pl, int32_t tok) {
    int ty = sdn_tokenizer_token_type(t, tok);
    if (sdn_tokenizer_is_eog(t, tok) || (ty != SDN_TOKEN_NORMAL && ty != SDN_TOKEN_USER_DEFINED && ty != SDN_TOKEN_BYTE)) return 0;
    char buf[256];
    size_t n = sdn_tokenizer_token_bytes(t, tok, buf + pl, sizeof buf - pl - 1);
    if (n == 0) return 0;
    memcpy(buf, prefix, pl);
    return re_check(RE_OK, buf, pl + n, 1);
}

/* exact constrained distribution of the next token after prompt ++ extra */
static void exact_dist(sdn_ctx *c, const sdn_tokenizer *t, const int32_t *seq, int n, const char *prefix, size_t pl, const sdn_sampling *s,
                       sdn_dist *d) {
    int Vv = sdn_tokenizer_n_vocab(t);
    float *lg = malloc(sizeof(float) * (size_t)Vv);
    sdn_err e = {0};
    sdn_kv_truncate(c, 0);
    sdn_batch b = {.n = n, .tokens = seq, .logit_rows = (int32_t[]){n - 1}, .n_logits = 1, .invariant = 1};
    assert_int_equal(sdn_forward(c, &b, lg, &e), SDN_OK);
    for (int v = 0; v < Vv; v++)
        if (!allowed_after(t, prefix, pl, v)) lg[v] = -INFINITY;
    assert_int_equal(sdn_dist_from_logits(s, lg, Vv, d, &e), SDN_OK);
    free(lg);
    sdn_kv_truncate(c, 0);
}

/* samples of the first two tokens under `gbnf`, as cell counts over (t1, t2) keys */
static void sample_pairs(sdn_ctx *c, sdn_grammar *g, sdn_gvocab *gv, const int32_t *prompt, int np, sdn_sampling s, sdn_drafter *dr, int N,
                         int32_t (*keys)[2], int *nk, int *cnt, int cells) {
    sdn_err e = {0};
    for (int i = 0; i < N; i++) {
        s.seed = (uint64_t)i * 7919u + 977;
        sdn_gen_params gp = {.max_tokens = 2, .sampling = s, .drafter = dr, .caps = {.max_nodes = 8, .max_depth = 4, .max_branch = 4},
                             .grammar = g, .gvocab = gv};
        int32_t *out;
        int n;
        if (sdn_generate_tokens(c, prompt, np, &gp, &out, &n, NULL, &e)) fail_msg("%s", e.msg);
        assert_int_equal(n, 2);
        int k;
        for (k = 0; k < *nk && (keys[k][0] != out[0] || keys[k][1] != out[1]); k++) {}
        if (k == *nk) {
            if (*nk == cells) fail_msg("more than %d outcomes", cells);
            keys[k][0] = out[0], keys[k][1] = out[1], (*nk)++;
        }
        cnt[k]++;
        free(out);
    }
}

/* on_step's sources on a constrained answer (SmolLM2, one DroidTask ui request): the tokens
 * labelled SDNPU_SOURCE_GRAMMAR were drafted as forced text, so each one's text is a piece of
 * the schema's fixed text (its keys and punctuation, in the layout of json.dumps); most of
 * the answer is forced, so such tokens are many; every drafted token is accounted for. */
typedef struct src_seen {
    char text[4096];
    size_t len, end[256];
    unsigned char src[256];
    int n;
} src_seen;

static int src_text(void *ud, const char *t, size_t n) {
    src_seen *s = ud;
    if (s->len + n < sizeof s->text) memcpy(s->text + s->len, t, n), s->len += n, s->text[s->len] = 0;
    return 0;
}

static int src_step(void *ud, const sdnpu_step *st) {
    src_seen *s = ud;
    for (int i = 0; i < st->n_tokens && s->n < 256; i++) s->src[s->n] = st->sources[i], s->end[s->n] = st->text_end[i], s->n++;
    return 0;
}

static void test_smollm2_forced_sources(void **state) {
    (void)state;
    const char *path;
    TU_REQUIRE_SMOLLM2(path);
    char *schema = slurp(tu_source_path("datasets/schemas/ui_action.json"));
    sdnpu_model *m;
    sdnpu_error err;
    if (sdnpu_model_load(path, NULL, &m, &err)) fail_msg("%s", err.message);
    sdnpu_context *c;
    if (sdnpu_context_new(m, NULL, &c, &err)) fail_msg("%s", err.message);
    sdnpu_request r;
    sdnpu_request_init(&r);
    r.prompt = "Task: open the camera.\nUI: <button id=1 text=\"Open camera\"></button> <button id=2 text=\"Settings\"></button>";
    r.method = "sdnpu";
    r.json_schema = schema;
    r.max_tokens = 64;
    src_seen s = {0};
    r.on_text = src_text;
    r.on_step = src_step;
    r.user_data = &s;
    sdnpu_result res;
    sdnpu_result_init(&res);
    if (sdnpu_generate(c, &r, &res, &err)) fail_msg("%s", err.message);
    check_action_json(res.text);
    assert_string_equal(s.text, res.text);
    assert_int_equal(s.n, res.n_tokens);
    /* the schema's fixed text as the answer lays it out */
    const char *fixed = "{\"id\": , \"action\": \"tap\", \"input_text\": \"\"}";
    int forced = 0, drafted = 0;
    for (int i = 0; i < s.n; i++) {
        if (s.src[i] != SDNPU_SOURCE_MODEL) drafted++;
        if (s.src[i] != SDNPU_SOURCE_GRAMMAR) continue;
        size_t a = i ? s.end[i - 1] : 0, b = s.end[i];
        char piece[64];
        assert_true(b > a && b - a < sizeof piece && b <= s.len);
        memcpy(piece, s.text + a, b - a);
        piece[b - a] = 0;
        if (!strstr(fixed, piece)) fail_msg("token %d '%s' labelled forced text is not part of the schema's fixed text (answer %s)", i, piece, res.text);
        forced++;
    }
    print_message("%d answer tokens in %d steps: %d drafted, %d of them forced text\n", res.n_tokens, res.stats.steps, drafted, forced);
    assert_int_equal(drafted, (int)res.stats.accepted_tokens);
    assert_true(forced >= 8);
    sdnpu_result_free(&res);
    sdnpu_context_free(c);
    sdnpu_model_free(m);
    free(schema);
}

/* goodness of fit of counts (N samples) to probabilities p over nk cells, merging cells with
 * expected counts under 5 into one; returns chi-square, *dof its degrees of freedom */
static double chi_square(const int *cnt, const double *p, int nk, int N, int *dof) {
    double chi = 0, ro = 0, re = 0;
    *dof = -1;
    for (int k = 0; k < nk; k++) {
        double ex = p[k] * N;
        if (ex < 5) { ro += cnt[k], re += ex; continue; }
        chi += (cnt[k] - ex) * (cnt[k] - ex) / ex;
        (*dof)++;
    }
    if (re > 0) { chi += (ro - re) * (ro - re) / (re > 1e-9 ? re : 1e-9); (*dof)++; }
    return chi;
}

static void test_sampling_chi_square(void **state) {
    (void)state;
    sdn_model *m = tu_load(tu_model("tiny-llama", "Q8_0", 41), "");
    const sdn_tokenizer *t = sdn_model_tokenizer(m);
    assert_non_null(t);
    sdn_ctx *c = tu_ctx(m, 64, 1, 64);
    sdn_err e = {0};
    sdn_gvocab *gv;
    assert_int_equal(sdn_gvocab_new(t, &gv, &e), SDN_OK);
    const char *good = "root ::= [b-s] [a-z ]+ \".\"\n";
    sdn_grammar *g;
    if (sdn_grammar_parse(good, strlen(good), &g, &e)) fail_msg("%s", e.msg);
    int32_t prompt[4] = {5, 17, 99, 3};
    sdn_sampling s = {.temp = 1.5f, .top_k = 3, .top_p = 1.0f};
    /* exact joint distribution over (t1, t2) */
    sdn_dist d1 = {0}, d2 = {0};
    exact_dist(c, t, prompt, 4, "", 0, &s, &d1);
    assert_true(d1.n >= 2);
    enum { CELLS = 64 };
    int32_t keys[CELLS][2];
    double p[CELLS];
    int nk = 0;
    for (int i = 0; i < d1.n; i++) {
        char pre[256];
        size_t pl = sdn_tokenizer_token_bytes(t, d1.tok[i], pre, sizeof pre);
        int32_t seq[5] = {5, 17, 99, 3, d1.tok[i]};
        exact_dist(c, t, seq, 5, pre, pl, &s, &d2);
        for (int j = 0; j < d2.n; j++) keys[nk][0] = d1.tok[i], keys[nk][1] = d2.tok[j], p[nk++] = (double)d1.p[i] * d2.p[j];
    }
    /* a token the grammar rules out at the root, drafted beside the allowed ones */
    int32_t bad = -1;
    for (int v = 0; v < sdn_tokenizer_n_vocab(t) && bad < 0; v++)
        if (!allowed_after(t, "", 0, v) && sdn_tokenizer_token_type(t, v) == SDN_TOKEN_NORMAL) bad = v;
    assert_true(bad >= 0);
    fixed_drafter fd = {d1.tok[1], d1.tok[0], keys[0][1], bad};
    sdn_drafter dr = {&fd_ops, &fd};
    const int N = 6000;
    static const double crit[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88, 29.59, 31.26, 32.91};
    for (int mode = 0; mode < 2; mode++) { /* plain, speculative */
        int nk2 = nk, cnt[CELLS] = {0};
        int32_t k2[CELLS][2];
        memcpy(k2, keys, sizeof keys);
        sample_pairs(c, g, gv, prompt, 4, s, mode ? &dr : NULL, N, k2, &nk2, cnt, CELLS);
        if (nk2 != nk) fail_msg("%s sampling produced a pair the exact distribution gives probability 0", mode ? "speculative" : "plain");
        int dof;
        double chi = chi_square(cnt, p, nk, N, &dof);
        assert_true(dof >= 1 && dof <= 12);
        print_message("%s constrained sampling: chi-square %.2f, %d dof (critical %.2f)\n", mode ? "speculative" : "plain", chi, dof, crit[dof]);
        assert_true(chi < crit[dof]);
    }
    /* a deliberately wrong mask: the most probable first token's first letter left out */
    char first[256];
    sdn_tokenizer_token_bytes(t, d1.tok[0], first, sizeof first);
    char wrong[256], cls[64];
    int nc = 0;
    for (char ch = 'b'; ch <= 's'; ch++)
        if (ch != first[0]) cls[nc++] = ch;
    cls[nc] = 0;
    snprintf(wrong, sizeof wrong, "root ::= [%s] [a-z ]+ \".\"\n", cls);
    sdn_grammar *gw;
    if (sdn_grammar_parse(wrong, strlen(wrong), &gw, &e)) fail_msg("%s", e.msg);
    {
        int nk2 = nk, cnt[CELLS] = {0};
        int32_t k2[CELLS][2];
        memcpy(k2, keys, sizeof keys);
        sample_pairs(c, gw, gv, prompt, 4, s, &dr, N, k2, &nk2, cnt, CELLS);
        int dof;
        double chi = nk2 > nk ? INFINITY : chi_square(cnt, p, nk, N, &dof);
        print_message("wrong mask (first letter '%c' left out): chi-square %.2f (must exceed the critical value)\n", first[0], chi);
        assert_true(nk2 > nk || chi > crit[dof < 12 ? dof : 12]);
    }
    sdn_grammar_free(gw);
    sdn_dist_free(&d1);
    sdn_dist_free(&d2);
    sdn_grammar_free(g);
    sdn_gvocab_free(gv);
    sdn_ctx_free(c);
    sdn_model_free(m);
}

/* ---- 4. bad constraints ---- */

static void test_bad_constraints(void **state) {
    (void)state;
    sdnpu_model *m;
    sdnpu_error err;
    if (sdnpu_model_load(tu_model("tiny-llama", "Q8_0", 41), NULL, &m, &err)) fail_msg("%s", err.message);
    sdnpu_context *c;
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.n_ctx = 256;
    cp.n_threads = 1;
    if (sdnpu_context_new(m, &cp, &c, &err)) fail_msg("%s", err.message);
    sdnpu_request r;
    sdnpu_result res;
    sdnpu_result_init(&res);
    sdnpu_request_init(&r);
    r.prompt = "hello";
    r.chat_template = "none";
    r.max_tokens = 4;
    r.grammar = k_gbnf;
    r.json_schema = k_schema;
    assert_int_equal(sdnpu_generate(c, &r, &res, &err), SDNPU_EINVAL);
    assert_non_null(strstr(err.message, "grammar and json_schema"));
    r.json_schema = NULL;
    r.grammar = "root ::= \"a\" missing\n";
    assert_int_equal(sdnpu_generate(c, &r, &res, &err), SDNPU_EINVAL);
    print_message("bad grammar: %s\n", err.message);
    assert_non_null(strstr(err.message, "missing"));
    assert_non_null(strstr(err.message, "line 1"));
    r.grammar = NULL;
    r.json_schema = "{\"type\":\"object\",\"properties\":{\"when\":{\"type\":\"string\",\"format\":\"date\"}}}";
    assert_int_equal(sdnpu_generate(c, &r, &res, &err), SDNPU_EINVAL);
    print_message("bad schema: %s\n", err.message);
    assert_non_null(strstr(err.message, "format"));
    assert_non_null(strstr(err.message, "/properties/when"));
    r.json_schema = "{\"type\": \"object\",";
    assert_int_equal(sdnpu_generate(c, &r, &res, &err), SDNPU_EINVAL);
    r.json_schema = NULL;
    assert_int_equal(sdnpu_generate(c, &r, &res, &err), SDNPU_OK); /* the context still answers */
    sdnpu_result_free(&res);
    sdnpu_context_free(c);
    sdnpu_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_methods_identical_tiny),
        cmocka_unit_test(test_sampling_chi_square),
        cmocka_unit_test(test_bad_constraints),
        cmocka_unit_test(test_smollm2_ui_schema),
        cmocka_unit_test(test_smollm2_forced_sources),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
