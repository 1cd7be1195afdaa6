/* cmd_serve.c - `sdnpu serve`: parse the options (the table vocabulary of opts.h) and run the
 * OpenAI-compatible HTTP server of server/ (docs/server.md) until SIGTERM or SIGINT. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "server/server.h"
#include "tools/tools.h"

int cmd_serve(int argc, char **argv) {
    srv_options o;
    srv_options_init(&o);
    o.api_key = getenv("SDNPU_API_KEY");
    if (o.api_key && !*o.api_key) o.api_key = NULL;
    int max_body = (int)o.max_body;
    uint64_t body_budget = 0, max_chars = 0;
    cli_sampling smp; /* the sampling options of run and chat (cli/opts.h): defaults of the requests */
    cli_sampling_init(&smp);
    smp.seed = UINT64_MAX; /* not given: a fresh seed per request */
    int pc_mb = (int)(o.prefix_cache_bytes >> 20), pc_disk_mb = 0;
    static char threads_help[160];
    snprintf(threads_help, sizeof threads_help,
             "compute threads per slot (default: the library's default divided by --slots, here %d); slots x threads should not exceed the cores",
             cli_default_threads());
    const cli_opt table[] = {
        CLI_O_MODEL(&o.model, "model file or known model name (pulled on first use)"),
        {.name = "--host", .kind = CLI_STR, .dest = &o.host, .arg = "ADDR", .help = "address to listen on (default 127.0.0.1)"},
        {.name = "--port", .kind = CLI_INT, .dest = &o.port, .lo = 0, .hi = 65535, .arg = "N",
         .help = "port (default 8080; 0: a free one, printed in the listening line)"},
        {.name = "--history", .kind = CLI_STR, .dest = &o.history, .arg = "DB",
         .help = "SQLite history store: a request's `user` (or `task_group`) drafts from that group's earlier answers"},
        {.name = "--history-scope", .kind = CLI_STR, .dest = &o.history_scope, .arg = "S",
         .help = "group (default): a request drafts from its group's earlier answers; global: from every group's, its own first "
                 "(a request's `history_scope` overrides)"},
        {.name = "--api-key", .kind = CLI_STR, .dest = &o.api_key, .arg = "KEY",
         .help = "require 'Authorization: Bearer KEY' on /v1 and /metrics (default $SDNPU_API_KEY, else none)"},
        {.name = "--slots", .kind = CLI_INT, .dest = &o.slots, .lo = 1, .hi = 256, .arg = "N",
         .help = "requests decoded at once, each on its own context (default 1)"},
        {.name = "--queue", .kind = CLI_INT, .dest = &o.queue, .lo = 1, .hi = 100000, .arg = "N",
         .help = "requests that may wait for a slot (default 16); more get 503"},
        CLI_O_CTX(&o.n_ctx, 2, "KV cache tokens per slot (default min(trained length, 8192))"),
        CLI_O_THREADS_H(&o.threads, threads_help),
        {.name = "--max-body", .kind = CLI_INT, .dest = &max_body, .lo = 1024, .hi = 1 << 30, .arg = "BYTES",
         .help = "largest request body (default 8388608); larger ones get 413"},
        {.name = "--request-timeout", .kind = CLI_INT, .dest = &o.request_timeout, .lo = 1, .hi = 86400, .arg = "S",
         .help = "seconds a client has from connecting to send its whole request, head and body (default 30); then 408 or closed"},
        {.name = "--idle-timeout", .kind = CLI_INT, .dest = &o.idle_timeout, .lo = 1, .hi = 86400, .arg = "S",
         .help = "seconds a connection may stay silent while its request arrives or its answer is sent (default 10)"},
        {.name = "--max-conns", .kind = CLI_INT, .dest = &o.max_conns, .lo = 1, .hi = 65536, .arg = "N",
         .help = "open connections at most (default 256); more get 503 at once"},
        {.name = "--max-conns-per-client", .kind = CLI_INT, .dest = &o.max_per_client, .lo = 0, .hi = 65536, .arg = "N",
         .help = "open connections from one client address at most (default 32; 0: no cap); more get 503 at once"},
        {.name = "--body-budget", .kind = CLI_U64, .dest = &body_budget, .lo = 1 << 20, .hi = (double)(1ull << 40), .arg = "BYTES",
         .help = "bytes of request bodies and parsed requests held at once (default 64 MiB, more when --max-body needs it); beyond: 503"},
        {.name = "--max-messages", .kind = CLI_INT, .dest = &o.max_messages, .lo = 1, .hi = 1 << 20, .arg = "N",
         .help = "messages in one chat request at most (default 2048); more: 400"},
        {.name = "--max-chars", .kind = CLI_U64, .dest = &max_chars, .lo = 1, .hi = (double)(1ull << 40), .arg = "N",
         .help = "characters of text in one request at most (default: context tokens x the model's longest token); more: 400"},
        {.name = "--drain", .kind = CLI_DOUBLE, .dest = &o.drain_s, .lo = 0, .hi = 3600, .arg = "S",
         .help = "on SIGTERM/SIGINT, seconds running requests may still finish (default 10)"},
        {.name = "--model-id", .kind = CLI_STR, .dest = &o.model_id, .arg = "NAME",
         .help = "the model name clients send (default: the --model file name without .gguf)"},
        {.name = "--prefix-cache-mb", .kind = CLI_INT, .dest = &pc_mb, .lo = 0, .hi = 1 << 24, .arg = "N",
         .help = "memory budget of the prefix cache the slots share, MiB (default 1024; 0: off)"},
        {.name = "--prefix-cache", .kind = CLI_STR, .dest = &o.prefix_cache_dir, .arg = "DIR",
         .help = "keep the prefix cache in DIR too, across restarts and processes (made 0700; off by default)"},
        {.name = "--prefix-cache-disk-mb", .kind = CLI_INT, .dest = &pc_disk_mb, .lo = 1, .hi = 1 << 30, .arg = "N",
         .help = "the --prefix-cache directory's budget in MiB (default 4096)"},
        CLI_O_SAMPLING_SEED(&smp, "sampling seed of requests that give none (default: a fresh one per request)"),
        {NULL},
    };
    const cli_cmd cmd = {.name = "serve", .synopsis = "--model M [options]",
                         .about = "OpenAI-compatible HTTP server: POST /v1/chat/completions, /v1/completions (stream: true for\n"
                                  "server-sent events), GET /v1/models, /health, /metrics, and GET / a page to try it in a browser.\n"
                                  "Speculative decoding is on by default; "
                                  "a request's \"sdnpu\": {\"method\": \"none\"} asks for plain decoding. docs/server.md.",
                         .opts = table};
    sdnpu_request defaults; /* the options' settings (the library's where not given) */
    int rc = cli_parse(&cmd, argc, argv, NULL, NULL);
    if (rc != CLI_CONTINUE) goto done;
    rc = CLI_EXIT_USAGE;
    if (cli_sampling_check(&smp, "serve", 4)) goto done; /* at most 4, as a request's "stop" */
    if (!o.model) {
        fprintf(stderr, "sdnpu serve: --model is required (sdnpu serve --help)\n");
        goto done;
    }
    if (o.api_key && !*o.api_key) {
        fprintf(stderr, "sdnpu serve: option --api-key: the key is empty\n");
        goto done;
    }
    if (cli_history_scope_check(o.history_scope, o.history, "serve", NULL)) goto done;
    sdnpu_request_init(&defaults);
    o.has_seed = smp.seed != UINT64_MAX;
    if (!o.has_seed) smp.seed = defaults.seed;
    cli_sampling_apply(&smp, &defaults);
    o.defaults = &defaults;
    o.max_body = (size_t)max_body;
    o.body_budget = (size_t)body_budget;
    o.max_chars = (long)max_chars;
    o.prefix_cache_bytes = (uint64_t)pc_mb << 20;
    o.prefix_cache_disk_bytes = (uint64_t)pc_disk_mb << 20;
    rc = 1; /* a known model is pulled on first use; the library never downloads */
    if (!sdn_tool_pull_if_known("serve", o.model)) rc = srv_run(&o);
done:
    cli_sampling_free(&smp);
    return rc;
}
