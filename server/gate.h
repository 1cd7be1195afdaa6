/* gate.h - the front gate of `sdnpu serve`: the listening socket and every connection until
 * its request head is complete and checked; then the connection is handed to libmicrohttpd.
 *
 * libmicrohttpd 0.9.75 (Debian 12) has an inactivity timeout that each trickled byte restarts,
 * a connection limit at which it stops accepting (new clients wait, unanswered) and a
 * per-address limit that closes without a word; it parses heads leniently (http_head.h). The
 * gate does instead: a total deadline for the request (head and body) counted from the
 * connection's accept, an idle limit, a cap on open connections and one per client address
 * with a fast 503 (Retry-After, a log line, a counter) beyond them, and the strict head check.
 * A connection waiting for its head costs no thread: one gate thread polls them all. */
#ifndef SDN_SERVER_GATE_H
#define SDN_SERVER_GATE_H

#include <microhttpd.h>
#include <stddef.h>
#include <stdio.h>

#include "server/pool.h"

typedef struct srv_gate_options {
    int max_conns;          /* open connections at most (in the gate and in libmicrohttpd) */
    int max_per_client;     /* open connections from one client address at most (0: no cap) */
    double request_timeout; /* seconds from accept until the request's head and body are in */
    double idle_timeout;    /* seconds a connection may stay silent while its request arrives */
    size_t head_max;        /* longest request head (request line and header fields) */
} srv_gate_options;

/* What happened to connections, counted for /metrics (srv_gate_note for events seen outside
 * the gate). */
typedef enum srv_gate_event {
    SRV_GATE_REQUEST_TIMEOUT, /* the request was not complete within request_timeout */
    SRV_GATE_IDLE_TIMEOUT,    /* silent for idle_timeout while its request arrived or its answer was sent */
    SRV_GATE_N_EVENTS
} srv_gate_event;

typedef struct srv_gate srv_gate;

/* Resolve host and bind and listen on port (0: a free one). Nothing is accepted before
 * srv_gate_run. Returns the gate, or NULL with a message naming --host or --port in msg.
 * pool (may be NULL) counts the gate's answers by status (srv_pool_count). */
srv_gate *srv_gate_open(const char *host, int port, const srv_gate_options *o, srv_pool *pool, char *msg, size_t msgcap);

/* The port bound (the one asked for, or the free one the system chose). */
int srv_gate_port(const srv_gate *g);

/* Start the gate's thread: accept, check heads, hand connections to d (started with
 * MHD_USE_NO_LISTEN_SOCKET and srv_gate_notify as its MHD_OPTION_NOTIFY_CONNECTION callback,
 * with the gate as its argument). Returns 0, or -1 with a message in msg. */
int srv_gate_run(srv_gate *g, struct MHD_Daemon *d, char *msg, size_t msgcap);

/* libmicrohttpd's connection notifications (MHD_NotifyConnectionCallback): a connection closed
 * gives its place back. */
void srv_gate_notify(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode code);

/* Monotonic time (seconds) at which the connection on socket fd was accepted, or -1 when the
 * gate does not know it. */
double srv_gate_accepted_at(srv_gate *g, int fd);

/* Count an event seen outside the gate, and log it (at most one line a second per kind). */
void srv_gate_note(srv_gate *g, srv_gate_event ev, int fd);

/* The gate's part of /metrics (Prometheus text, appended to f). */
void srv_gate_metrics(srv_gate *g, FILE *f);

/* Stop accepting: close the listening socket and answer 503 to connections whose head has not
 * arrived. Connections already handed over stay with libmicrohttpd. */
void srv_gate_stop(srv_gate *g);

/* Join the thread and free the gate (after srv_gate_stop, and after MHD_stop_daemon). */
void srv_gate_free(srv_gate *g);

/* Monotonic seconds (the gate's clock). */
double srv_now(void);

#endif
