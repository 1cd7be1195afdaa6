/* cmd_serve.c - `sdnpu serve`: parse the options and run the OpenAI-compatible HTTP server of
 * server/ (docs/server.md) until SIGTERM or SIGINT. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cli/cli.h"
#include "server/server.h"

static void usage(FILE *f) {
    fprintf(f, "usage: sdnpu serve --model M [options]\n"
               "  --model M         model file or known model name (pulled on first use)\n"
               "  --host ADDR       address to listen on (default 127.0.0.1)\n"
               "  --port N          port (default 8080; 0: a free one, printed when listening)\n"
               "  --history DB      SQLite history store: a request's `user` (or `task_group`) drafts from\n"
               "                    the earlier answers of that task group and stores its own\n"
               "  --api-key KEY     require 'Authorization: Bearer KEY' (also $SDNPU_API_KEY)\n"
               "  --slots N         requests run at once, each on its own context (default 1)\n"
               "  --queue N         requests that may wait for a slot (default 16); more get 503\n"
               "  --ctx N           KV cache tokens per slot (default min(trained length, 4096))\n"
               "  --threads N       compute threads per slot (default 2)\n"
               "  --max-body BYTES  largest request body (default 8388608); larger ones get 413\n"
               "  --drain S         on SIGTERM/SIGINT, seconds running requests may finish (default 10)\n"
               "  --model-id NAME   the model name clients send (default: the --model file name)\n"
               "Speculative decoding (method sdnpu, budget from this machine's verify cost curve) is on by\n"
               "default; a request's \"sdnpu\": {\"method\": \"none\"} asks for plain decoding.\n");
}

int cmd_serve(int argc, char **argv) {
    srv_options o;
    srv_options_init(&o);
    o.api_key = getenv("SDNPU_API_KEY");
    if (o.api_key && !*o.api_key) o.api_key = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        long n;
        double x;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
#define VAL() do { if (!(v = cli_value(argc, argv, &i, a))) return 2; } while (0)
        if (!strcmp(a, "--model")) { VAL(); o.model = v; }
        else if (!strcmp(a, "--model-id")) { VAL(); o.model_id = v; }
        else if (!strcmp(a, "--host")) { VAL(); o.host = v; }
        else if (!strcmp(a, "--port")) { VAL(); if (cli_int(a, v, 0, 65535, &n)) return 2; o.port = (int)n; }
        else if (!strcmp(a, "--history")) { VAL(); o.history = v; }
        else if (!strcmp(a, "--api-key")) { VAL(); if (!*v) { fprintf(stderr, "sdnpu serve: option --api-key: empty key\n"); return 2; } o.api_key = v; }
        else if (!strcmp(a, "--slots")) { VAL(); if (cli_int(a, v, 1, 256, &n)) return 2; o.slots = (int)n; }
        else if (!strcmp(a, "--queue")) { VAL(); if (cli_int(a, v, 1, 100000, &n)) return 2; o.queue = (int)n; }
        else if (!strcmp(a, "--ctx")) { VAL(); if (cli_int(a, v, 2, 1 << 20, &n)) return 2; o.n_ctx = (int)n; }
        else if (!strcmp(a, "--threads")) { VAL(); if (cli_int(a, v, 1, 256, &n)) return 2; o.threads = (int)n; }
        else if (!strcmp(a, "--max-body")) { VAL(); if (cli_int(a, v, 1024, 1L << 30, &n)) return 2; o.max_body = (size_t)n; }
        else if (!strcmp(a, "--drain")) { VAL(); if (cli_float(a, v, 0, 3600, &x)) return 2; o.drain_s = x; }
        else {
            fprintf(stderr, "sdnpu serve: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
#undef VAL
    }
    if (!o.model) {
        fprintf(stderr, "sdnpu serve: --model is required\n");
        usage(stderr);
        return 2;
    }
    return srv_run(&o);
}
