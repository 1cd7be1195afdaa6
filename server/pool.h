/* pool.h - the server's request pool: a bounded queue of jobs feeding N slots, each slot a
 * worker thread with its own sdnpu_context over the one shared sdnpu_model, plus the counters
 * behind GET /metrics. A job is one parsed request and its progress (streamed text, result);
 * connection threads wait on it while a slot runs it. Uses only the public API (sdnpu.h). */
#ifndef SDN_SERVER_POOL_H
#define SDN_SERVER_POOL_H

#include <pthread.h>
#include <stddef.h>

#include "sdnpu.h"

/* Why a job was cancelled. */
enum { SRV_LIVE = 0, SRV_CLIENT_GONE = 1, SRV_SHUTDOWN = 2 };

typedef struct srv_job {
    /* the request; its strings point into `json` (the parsed body) or `owned` */
    sdnpu_request r;
    void *json;             /* cJSON tree of the body (freed with the job) */
    char **owned;           /* strings made while parsing (joined content parts) */
    int n_owned;
    sdnpu_message *messages;
    const char **stop, **params;
    int chat, stream, include_usage;
    char method[32];        /* the drafting method, for the response's sdnpu block */
    /* progress, guarded by the pool's mutex */
    int refs;
    char *text;             /* text streamed so far */
    size_t len, cap, taken; /* taken: bytes a streaming connection has already sent */
    int started, done;
    int cancel;             /* SRV_LIVE, SRV_CLIENT_GONE, SRV_SHUTDOWN */
    int rc;                 /* sdnpu_generate's status */
    sdnpu_error err;
    sdnpu_result res;
    double t_submit, t_start, t_done; /* queued, taken by a slot, finished (monotonic seconds) */
} srv_job;

#define SRV_N_CODES 10

typedef struct srv_metrics {
    long by_code[SRV_N_CODES];    /* answered requests by status (srv_codes[] order, last: other) */
    long cancelled;               /* requests whose client went away or that shutdown cancelled */
    long completed;               /* requests that generated an answer */
    long prompt_tokens, generated_tokens, steps, drafted, accepted, history_answers;
    double decode_s;
} srv_metrics;

extern const int srv_codes[SRV_N_CODES];

typedef struct srv_pool {
    pthread_mutex_t mu;
    pthread_cond_t work;   /* a job was queued, or the pool stops */
    pthread_cond_t event;  /* a job made progress (text, done) */
    srv_job **queue;
    int qcap, qhead, qlen;
    int n_slots, busy, stopping, started_threads;
    srv_job **running;     /* per slot */
    sdnpu_context **ctx;   /* per slot */
    pthread_t *threads;
    srv_metrics m;
} srv_pool;

/* A new job with one reference (the caller's), or NULL when out of memory. */
srv_job *srv_job_new(void);
/* Remember a malloc'd string to free with the job; returns it, or NULL (and frees it) when out of memory. */
char *srv_job_own(srv_job *j, char *s);
/* Drop a reference (under no lock); the last one frees the job. */
void srv_job_unref(srv_pool *p, srv_job *j);

/* Create the slots' contexts (n_slots contexts with params cp over model m), the queue of
 * qcap jobs and the worker threads. Returns 0, or -1 with a message in msg. */
int srv_pool_start(srv_pool *p, sdnpu_model *m, const sdnpu_context_params *cp, int n_slots, int qcap, char *msg, size_t msgcap);
/* Queue a job (the pool takes a reference). 0: queued; 1: the queue is full; 2: the pool is stopping. */
int srv_pool_submit(srv_pool *p, srv_job *j);
/* Wait until the job is done, or (want_text) has text not yet taken, or the client on socket fd
 * (-1: not watched) hung up, which cancels the job. Returns 0, or -1 when the client is gone. */
int srv_job_wait(srv_pool *p, srv_job *j, int fd, int want_text);
/* Stop: refuse new jobs, cancel queued ones, let running ones finish for up to drain_s seconds,
 * then cancel them, join the workers and free the contexts (closing their history stores). */
void srv_pool_stop(srv_pool *p, double drain_s);
/* Count an answered request by HTTP status. */
void srv_pool_count(srv_pool *p, int status);
/* Prometheus text of the counters (malloc'd), or NULL when out of memory. */
char *srv_pool_metrics(srv_pool *p);

#endif
