/* cmd_serve.c - `sdnpu serve`: parse the options (the table vocabulary of opts.h) and run the
 * OpenAI-compatible HTTP server of server/ (docs/server.md) until SIGTERM or SIGINT. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cli/cli.h"
#include "engine/cli/opts.h"
#include "server/server.h"

int cmd_serve(int argc, char **argv) {
    srv_options o;
    srv_options_init(&o);
    o.api_key = getenv("SDNPU_API_KEY");
    if (o.api_key && !*o.api_key) o.api_key = NULL;
    int max_body = (int)o.max_body;
    const cli_opt table[] = {
        {.name = "--model", .kind = CLI_STR, .dest = &o.model, .arg = "M", .help = "model file or known model name (pulled on first use)"},
        {.name = "--host", .kind = CLI_STR, .dest = &o.host, .arg = "ADDR", .help = "address to listen on (default 127.0.0.1)"},
        {.name = "--port", .kind = CLI_INT, .dest = &o.port, .lo = 0, .hi = 65535, .arg = "N",
         .help = "port (default 8080; 0: a free one, printed in the listening line)"},
        {.name = "--history", .kind = CLI_STR, .dest = &o.history, .arg = "DB",
         .help = "SQLite history store: a request's `user` (or `task_group`) drafts from that group's earlier answers"},
        {.name = "--api-key", .kind = CLI_STR, .dest = &o.api_key, .arg = "KEY",
         .help = "require 'Authorization: Bearer KEY' on /v1 and /metrics (default $SDNPU_API_KEY, else none)"},
        {.name = "--slots", .kind = CLI_INT, .dest = &o.slots, .lo = 1, .hi = 256, .arg = "N",
         .help = "requests decoded at once, each on its own context (default 1)"},
        {.name = "--queue", .kind = CLI_INT, .dest = &o.queue, .lo = 1, .hi = 100000, .arg = "N",
         .help = "requests that may wait for a slot (default 16); more get 503"},
        {.name = "--ctx", .kind = CLI_INT, .dest = &o.n_ctx, .lo = 2, .hi = 1 << 22, .arg = "N",
         .help = "KV cache tokens per slot (default min(trained length, 4096))"},
        {.name = "--threads", .kind = CLI_INT, .dest = &o.threads, .lo = 1, .hi = 256, .arg = "N",
         .help = "compute threads per slot (default 2; slots x threads should not exceed the cores)"},
        {.name = "--max-body", .kind = CLI_INT, .dest = &max_body, .lo = 1024, .hi = 1 << 30, .arg = "BYTES",
         .help = "largest request body (default 8388608); larger ones get 413"},
        {.name = "--drain", .kind = CLI_DOUBLE, .dest = &o.drain_s, .lo = 0, .hi = 3600, .arg = "S",
         .help = "on SIGTERM/SIGINT, seconds running requests may still finish (default 10)"},
        {.name = "--model-id", .kind = CLI_STR, .dest = &o.model_id, .arg = "NAME",
         .help = "the model name clients send (default: the --model file name without .gguf)"},
        {NULL},
    };
    const cli_cmd cmd = {.name = "serve", .synopsis = "--model M [options]",
                         .about = "OpenAI-compatible HTTP server: POST /v1/chat/completions, /v1/completions (stream: true for\n"
                                  "server-sent events), GET /v1/models, /health, /metrics. Speculative decoding is on by default;\n"
                                  "a request's \"sdnpu\": {\"method\": \"none\"} asks for plain decoding. docs/server.md.",
                         .opts = table};
    int rc = cli_parse(&cmd, argc, argv, NULL, NULL);
    if (rc != CLI_CONTINUE) return rc;
    if (!o.model) {
        fprintf(stderr, "sdnpu serve: --model is required (sdnpu serve --help)\n");
        return CLI_EXIT_USAGE;
    }
    if (o.api_key && !*o.api_key) {
        fprintf(stderr, "sdnpu serve: option --api-key: the key is empty\n");
        return CLI_EXIT_USAGE;
    }
    o.max_body = (size_t)max_body;
    return srv_run(&o);
}
