/* server.h - `sdnpu serve`: a local OpenAI-compatible HTTP server over the public library API
 * (include/sdnpu.h), libmicrohttpd and cJSON. docs/server.md describes the endpoints. */
#ifndef SDN_SERVER_H
#define SDN_SERVER_H

#include <stddef.h>

#include "sdnpu.h"

typedef struct srv_options {
    const char *model;    /* model file or known model name (required) */
    const char *model_id; /* the name clients use (NULL: the --model argument's file name without .gguf) */
    const char *host;     /* address to bind ("127.0.0.1") */
    int port;             /* 0: a free port chosen by the OS (the listening line says which) */
    const char *history;  /* SQLite history store shared by the slots; NULL: none */
    const char *history_scope; /* requests' default history scope, "group" or "global" (NULL: group) */
    const char *api_key;  /* required as "Authorization: Bearer KEY" on /v1 and /metrics; NULL: none */
    int slots;            /* contexts running requests at once (1) */
    int queue;            /* requests that may wait for a slot (16); more get 503 */
    int n_ctx;            /* KV cache tokens per slot (0: the library's default) */
    int threads;          /* compute threads per slot (0: the library's default,
                             sdnpu_context_params_init's n_threads, divided by the slots) */
    size_t max_body;      /* largest request body in bytes (8 MiB); larger ones get 413 */
    double drain_s;       /* on SIGTERM/SIGINT, running requests may finish for this long (10 s) */
    /* what a client may take (docs/server.md, "Limits") */
    int request_timeout;  /* seconds from a connection's accept until its request (head and body) is in (30) */
    int idle_timeout;     /* seconds a connection may stay silent while its request arrives or its answer is sent (10) */
    int max_conns;        /* open connections at most (256); more get 503 at once */
    int max_per_client;   /* open connections from one client address at most (32; 0: no cap) */
    size_t body_budget;   /* bytes of request bodies and parsed requests held at once (0: 64 MiB, or more when
                             one request of --max-body needs more); beyond it requests get 503 */
    int max_messages;     /* entries of `messages` at most (2048) */
    long max_chars;       /* characters of text in one request at most (0: 32 per token of context) */
    /* Sampling settings of requests that leave them out (sdnpu serve --temp, --top-k, --top-p,
     * --min-p, --repeat-penalty, --repeat-last-n, --stop: cli/opts.h's group): temperature,
     * top_p, top_k, min_p, repeat_penalty, repeat_last_n, stop / n_stop of *defaults, and its
     * seed when has_seed (else each request without a seed gets a fresh one). NULL: the
     * library's (sdnpu_request_init). Must outlive srv_run. */
    const sdnpu_request *defaults;
    int has_seed;
    /* The model's prefix cache, shared by the slots (docs/server.md, "The prefix cache"):
     * memory budget (default 1 GiB; 0: off), the disk tier's directory (NULL: none) and budget
     * (0: 4 GiB). */
    uint64_t prefix_cache_bytes;
    const char *prefix_cache_dir;
    uint64_t prefix_cache_disk_bytes;
} srv_options;

/* Defaults as above. */
void srv_options_init(srv_options *o);

/* Check that the history store can be written (before anything is loaded), load the model,
 * create the slots, listen, and serve until SIGTERM or SIGINT; then stop accepting, let running
 * requests finish (up to drain_s, then cancel them), free everything. Prints "sdnpu serve:
 * listening on http://HOST:PORT ..." on stderr once ready. Returns the process exit code: 0
 * after a clean shutdown, 1 when it cannot start (the message on stderr names the option). */
int srv_run(const srv_options *o);

#endif
