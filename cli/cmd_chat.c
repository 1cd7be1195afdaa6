/* cmd_chat.c - `sdnpu chat --model M`: an interactive multi-turn conversation over the public
 * API. Each line read from stdin is a user turn; the whole conversation (an sdnpu_message
 * array) is sent as one request and the answer streams to stdout, then joins the
 * conversation. The context keeps its KV cache between turns, so each turn prefills only the
 * new messages (methods without prefill predictions). `/reset` forgets the conversation,
 * `/exit` (or end of input) ends the session. --grammar / --json-schema constrain every answer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "cli/run_common.h"
#include "tools/tools.h"
#include "sdnpu.h"

typedef struct convo {
    sdnpu_message *msg;
    char **owned; /* the strings of msg, owned */
    int n, cap;
} convo;

static int convo_add(convo *c, const char *role, const char *text) {
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 16;
        sdnpu_message *m = realloc(c->msg, (size_t)cap * sizeof *m);
        if (!m) return -1;
        c->msg = m;
        char **o = realloc(c->owned, (size_t)cap * sizeof *o);
        if (!o) return -1;
        c->owned = o;
        c->cap = cap;
    }
    char *dup = strdup(text);
    if (!dup) return -1;
    c->owned[c->n] = dup;
    c->msg[c->n].role = role;
    c->msg[c->n].content = dup;
    c->n++;
    return 0;
}

static void convo_truncate(convo *c, int n) {
    while (c->n > n) free(c->owned[--c->n]);
}

static int on_text(void *ud, const char *text, size_t len) {
    (void)ud;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0;
}

int cmd_chat(int argc, char **argv) {
    sdnpu_request defaults; /* the library's (SDNPU_DEFAULT_* in sdnpu.h) */
    sdnpu_request_init(&defaults);
    const char *model = NULL, *system = NULL, *spec = defaults.method, *tmpl = NULL, *tokenizer = NULL;
    char *grammar = NULL, *schema = NULL;
    int max_tokens = defaults.max_tokens, threads = cli_default_threads(), n_ctx = 0, quiet = 0;
    cli_sampling smp; /* the sampling and constraint options run takes too (cli/opts.h) */
    cli_sampling_init(&smp);
    cli_prefix_cache pcache;
    cli_prefix_cache_init(&pcache, 0);
    static char spec_help[192], max_help[64];
    snprintf(spec_help, sizeof spec_help, "drafting method: %s (default %s; pld keeps the whole KV cache between turns, sdnpu re-prefills the last answer)", sdnpu_methods(), spec);
    snprintf(max_help, sizeof max_help, "new tokens per answer at most (default %d)", max_tokens);
    const cli_opt table[] = {
        CLI_O_MODEL(&model, "a chat model: GGUF file or known model name"),
        {.name = "--system", .kind = CLI_STR, .dest = &system, .arg = "TEXT", .help = "system prompt (default: the template's)"},
        {.name = "--chat-template", .kind = CLI_ENUM, .dest = &tmpl, .arg = "NAME", .choices = CLI_CHAT_TEMPLATES,
         .help = "auto (default), chatml, llama3, llama2, vicuna, plain, gemma"},
        CLI_O_MAX_TOKENS(&max_tokens, 1, 1 << 22, max_help),
        CLI_O_SAMPLING(&smp),
        CLI_O_SPEC(&spec, spec_help),
        CLI_O_THREADS(&threads),
        CLI_O_PREFIX_CACHE(&pcache, "prefix cache memory budget in MiB (default 0: off, or blocks pass through with --prefix-cache)"),
        CLI_O_CTX(&n_ctx, 2, "KV cache size: the conversation's length at most (default min(trained, 8192))"),
        CLI_O_TOKENIZER(&tokenizer),
        CLI_O_QUIET(&quiet, "no banner, prompts or statistics: answers only"),
        CLI_O_CONSTRAINT(&smp),
        CLI_O_END,
    };
    const cli_cmd cmd = {.name = "chat", .synopsis = "--model M [options]",
                         .about = "Talk with a chat model: each line of standard input is your turn, the answer streams back.\n"
                                  "Commands: /reset (forget the conversation), /exit (or end of input).",
                         .opts = table};
    int rc = cli_parse(&cmd, argc, argv, NULL, NULL);
    if (rc != CLI_CONTINUE) goto done_opts;
    sdnpu_error err = {0};
    rc = 2;
    if (!model) {
        fprintf(stderr, "sdnpu chat: --model is required (sdnpu chat --help)\n");
        goto done_opts;
    }
    if (sdnpu_check_method(spec, &err)) {
        fprintf(stderr, "sdnpu chat: option --spec: %s\n", err.message);
        goto done_opts;
    }
    if (cli_sampling_check(&smp, "chat", 0)) goto done_opts;
    if (sdn_tool_read_constraint("chat", smp.grammar_file, smp.json_schema_file, &grammar, &schema)) goto done_opts;
    rc = 1;
    sdnpu_model *m = NULL;
    sdnpu_context *ctx = NULL;
    sdnpu_model_params mp;
    sdnpu_model_params_init(&mp);
    mp.tokenizer_path = tokenizer;
    cli_prefix_cache_apply(&pcache, &mp);
    if (sdn_tool_pull_if_known("chat", model)) goto done_opts; /* the program pulls a known model on first use; the library never downloads */
    if (sdnpu_model_load(model, &mp, &m, &err)) {
        fprintf(stderr, "sdnpu chat: %s\n", err.message);
        goto done_opts;
    }
    sdnpu_model_info mi;
    sdnpu_model_info_init(&mi);
    sdnpu_model_get_info(m, &mi, NULL);
    if (!sdnpu_model_has_tokenizer(m)) {
        fprintf(stderr, "sdnpu chat: %s has no tokenizer (give --tokenizer FILE)\n", model);
        rc = 2;
        goto done;
    }
    if (!strcmp(mi.chat_template, "none") && (!tmpl || !strcmp(tmpl, "auto") || !strcmp(tmpl, "none"))) {
        fprintf(stderr, "sdnpu chat: %s has no chat template: a conversation cannot be rendered for it; give --chat-template NAME "
                        "(chatml, llama3, llama2, vicuna) if you know the one it was trained with\n", model);
        rc = 2;
        goto done;
    }
    if (n_ctx > mi.context_length)
        fprintf(stderr, "sdnpu chat: warning: --ctx %d is past %s's trained context length of %d tokens\n", n_ctx, model, mi.context_length);
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.n_ctx = n_ctx;
    cp.n_threads = threads;
    if (sdnpu_context_new(m, &cp, &ctx, &err)) {
        fprintf(stderr, "sdnpu chat: %s\n", err.message);
        goto done;
    }
    convo c = {0};
    if (system && convo_add(&c, "system", system)) goto oom;
    int base = c.n, tty = isatty(0);
    if (!quiet)
        fprintf(stderr, "chat with %s (%s template); /reset forgets the conversation, /exit ends it\n", mi.path, mi.chat_template);
    char *line = NULL;
    size_t lcap = 0;
    rc = 0;
    for (;;) {
        if (tty && !quiet) {
            fputs("> ", stderr);
            fflush(stderr);
        }
        ssize_t l = getline(&line, &lcap, stdin);
        if (l < 0) break;
        while (l > 0 && (line[l - 1] == '\n' || line[l - 1] == '\r')) line[--l] = 0;
        if (l == 0) continue;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!strcmp(line, "/reset")) {
            convo_truncate(&c, base);
            if (!quiet) fprintf(stderr, "(conversation reset)\n");
            continue;
        }
        if (line[0] == '/' && line[1] && !strchr(line, ' ')) {
            fprintf(stderr, "sdnpu chat: unknown command %s (/reset, /exit)\n", line);
            continue;
        }
        int before = c.n;
        if (convo_add(&c, "user", line)) goto oom;
        sdnpu_request r;
        sdnpu_request_init(&r);
        r.messages = c.msg;
        r.n_messages = c.n;
        r.chat_template = tmpl;
        r.method = spec;
        r.max_tokens = max_tokens;
        cli_sampling_apply(&smp, &r);
        r.seed = smp.seed + (uint64_t)c.n; /* a new draw every turn, reproducible */
        r.on_text = on_text;
        r.grammar = grammar;
        r.json_schema = schema;
        sdnpu_result res;
        sdnpu_result_init(&res);
        int grc = sdnpu_generate(ctx, &r, &res, &err);
        if (grc && sdn_constraint_error(grc, &err)) { /* it would refuse every turn */
            fprintf(stderr, "sdnpu chat: option %s %s: %s\n", grammar ? "--grammar" : "--json-schema", grammar ? smp.grammar_file : smp.json_schema_file,
                    err.message);
            convo_truncate(&c, before);
            rc = 2;
            break;
        }
        if (grc) {
            fprintf(stderr, "sdnpu chat: %s%s\n", err.message, c.n > base + 1 ? " (/reset starts a new conversation)" : "");
            convo_truncate(&c, before);
            rc = 1;
            continue;
        }
        fputc('\n', stdout);
        fflush(stdout);
        if (!quiet)
            fprintf(stderr, "[%d tokens, %.2f tok/step, %.1f tok/s%s%s]\n", res.stats.generated_tokens, res.stats.mean_accepted,
                    res.stats.decode_s > 0 ? res.stats.generated_tokens / res.stats.decode_s : 0.0,
                    res.finish == SDNPU_FINISH_LENGTH ? "; cut at --max-tokens" : "",
                    res.finish == SDNPU_FINISH_CONTEXT ? "; the context is full: /reset" : "");
        int add = convo_add(&c, "assistant", res.text ? res.text : "");
        sdnpu_result_free(&res);
        if (add) goto oom;
        if (rc == 1) rc = 0;
    }
    free(line);
    convo_truncate(&c, 0);
    free(c.msg);
    free(c.owned);
    goto done;
oom:
    fprintf(stderr, "sdnpu chat: out of memory\n");
    rc = 1;
    convo_truncate(&c, 0);
    free(c.msg);
    free(c.owned);
done:
    sdnpu_context_free(ctx);
    sdnpu_model_free(m);
done_opts:
    cli_sampling_free(&smp);
    free(grammar);
    free(schema);
    return rc;
}
