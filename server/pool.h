/* pool.h - the server's request pool: a bounded queue of jobs feeding N slots, each slot a
 * worker thread with its own sdnpu_context over the one shared sdnpu_model, the admission of
 * requests (a place among slots + queue, reserved before a body is parsed) and the budget of
 * memory for request bodies and parsed requests, plus the counters behind GET /metrics. A job
 * is one parsed request and its progress (streamed text, result); connection threads wait on
 * it while a slot runs it. Uses only the public API (sdnpu.h). */
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
    /* structured output and tool calls (tools.h) */
    const char *constraint; /* the field the grammar or schema came from ("response_format.json_schema.schema",
                               "grammar", "tools", ...: error answers name it); NULL: none */
    int tools;              /* SRV_TOOLS_OFF, _AUTO, _FORCED: whether the answer is read back as tool calls */
    int n_tools;
    const char **tool_names; /* the request's tools in order (the array owned, the names in `json`) */
    int forced_tool;        /* tools forced to one tool: its index; -1: any (branch k of the schema's anyOf is tool k) */
    /* progress, guarded by the pool's mutex */
    int refs;
    char *text;             /* text streamed so far */
    size_t len, cap, taken; /* taken: bytes a streaming connection has already sent */
    /* streaming: the answer's tokens so far as on_step reported them (the sdnpu extension of
       the chunks, docs/server.md): where each one's text ends in `text` and its source */
    size_t *tok_end;
    unsigned char *tok_src;
    int n_tok, tok_cap, steps;
    size_t pend;            /* text bytes after len that on_text gave and the step has not yet reported:
                               readers see text a whole step at a time, with its tokens' sources */
    int started, done;
    int cancel;             /* SRV_LIVE, SRV_CLIENT_GONE, SRV_SHUTDOWN */
    int rc;                 /* sdnpu_generate's status */
    sdnpu_error err;
    sdnpu_result res;
    double t_submit, t_start, t_done; /* queued, taken by a slot, finished (monotonic seconds) */
    int wake;               /* eventfd the slot writes on new text and when done (made when queued; -1: none) */
    size_t charged;         /* bytes of the pool's body budget the job holds (given back when it is freed) */
} srv_job;

#define SRV_N_CODES 15

typedef struct srv_metrics {
    long by_code[SRV_N_CODES];    /* answered requests by status (srv_codes[] order, last: other) */
    long cancelled;               /* requests whose client went away or that shutdown cancelled */
    long completed;               /* requests that generated an answer */
    long prompt_tokens, generated_tokens, steps, drafted, accepted, history_answers;
    double decode_s;
    long busy_queue;              /* 503: every slot and queue place taken */
    long busy_budget;             /* 503: the body budget could not hold the request */
} srv_metrics;

extern const int srv_codes[SRV_N_CODES];

typedef struct srv_pool {
    pthread_mutex_t mu;
    pthread_cond_t work;   /* a job was queued, or the pool stops */
    pthread_cond_t event;  /* a job made progress (text, done) */
    srv_job **queue;       /* ring of n_slots + qcap entries (a free slot takes its job from here) */
    int qcap, qhead, qlen;
    int n_slots, busy, stopping, started_threads;
    int reserved;          /* places reserved by requests being parsed (srv_pool_reserve) */
    size_t budget, budget_used, budget_peak, since_trim; /* the body budget (bytes) */
    srv_job **running;     /* per slot */
    sdnpu_context **ctx;   /* per slot */
    pthread_t *threads;
    sdnpu_model *model;    /* the slots' model (its prefix cache's counters go to /metrics) */
    srv_metrics m;
} srv_pool;

/* A new job with one reference (the caller's), or NULL when out of memory. */
srv_job *srv_job_new(void);
/* Remember a malloc'd string to free with the job; returns it, or NULL (and frees it) when out of memory. */
char *srv_job_own(srv_job *j, char *s);
/* Drop a reference (under no lock); the last one frees the job. */
void srv_job_unref(srv_pool *p, srv_job *j);

/* Create the slots' contexts (n_slots contexts with params cp over model m), the queue of
 * qcap jobs and the worker threads. Returns 0, or -1 with a message in msg. The body budget is
 * p->budget, to be set before requests arrive (0: none can be taken). */
int srv_pool_start(srv_pool *p, sdnpu_model *m, const sdnpu_context_params *cp, int n_slots, int qcap, char *msg, size_t msgcap);

/* Admission. A request holds a place from before its body is parsed until its job is done:
 * requests running, queued or reserved are at most n_slots + qcap. */
/* Whether a place is free now (nothing reserved): 0 yes; 1 every place is taken; 2 stopping. */
int srv_pool_admissible(srv_pool *p);
/* Reserve a place: 0 reserved; 1 every place is taken (counted as busy_queue); 2 stopping. */
int srv_pool_reserve(srv_pool *p);
/* Give a reserved place back (the request was refused). */
void srv_pool_unreserve(srv_pool *p);
/* Queue a job on the place the caller reserved (the pool takes a reference). 0: queued;
 * 2: the pool is stopping (the place is given back, the job not queued). */
int srv_pool_submit(srv_pool *p, srv_job *j);

/* The body budget: bytes of request bodies being received and of parsed requests, held from
 * the first body byte until the job is freed (a job gives back j->charged). */
/* Take bytes from the budget: 0, or -1 (nothing taken; counted as busy_budget when count) when
 * the budget cannot hold them. */
int srv_pool_charge(srv_pool *p, size_t bytes, int count);
/* Whether the budget could take bytes now (nothing taken; a no is counted as busy_budget). */
int srv_pool_fits(srv_pool *p, size_t bytes);
/* Give bytes back (after freeing them: a large amount also trims the heap). */
void srv_pool_uncharge(srv_pool *p, size_t bytes);
/* Wait until the job is done, or (want_text) has text not yet taken, or the client on socket fd
 * (-1: not watched) hung up, which cancels the job. Returns 0, or -1 when the client is gone.
 * A hang-up is noticed when it happens (poll on the socket and the job's eventfd), or within
 * 50 ms when the job has no eventfd. */
int srv_job_wait(srv_pool *p, srv_job *j, int fd, int want_text);
/* Stop: refuse new jobs, cancel queued ones, let running ones finish for up to drain_s seconds,
 * then cancel them, join the workers and free the contexts (closing their history stores). */
void srv_pool_stop(srv_pool *p, double drain_s);
/* Count an answered request by HTTP status. */
void srv_pool_count(srv_pool *p, int status);
/* Prometheus text of the counters (malloc'd), or NULL when out of memory. */
char *srv_pool_metrics(srv_pool *p);

#endif
