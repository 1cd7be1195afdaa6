/* server.c - the HTTP side of `sdnpu serve`: libmicrohttpd in thread-per-connection mode behind
 * the gate (gate.c: accept, connection caps, request heads checked), routing, API-key check,
 * admission and the body budget, server-sent events, and the process life cycle (check the
 * history store, load, listen, serve until SIGTERM/SIGINT, drain, free).
 *
 * A request is decided as early as it can be: everything but a POST to a completion endpoint
 * is answered as soon as its head is in; a completion request whose place or body cannot be
 * had gets 413 or 503 before its body is read; its body is counted against the body budget as
 * it arrives and must be complete by the connection's deadline (request_timeout after accept);
 * a place is reserved before the body is parsed. Every answer closes its connection (one
 * request per connection: libmicrohttpd would read a second request on it without the gate's
 * checks).
 *
 * A connection thread parses its request into a job (openai.c), queues it (pool.c) and waits:
 * for the whole answer (non-streaming) or for each new piece of text (streaming, inside
 * microhttpd's content reader callback). Either wait ends early when the client hangs up,
 * which cancels the job. The HTTP status of a streamed answer is chosen when its first text
 * (or its end, or its error) is known, so a request the library refuses still gets a 4xx. A
 * streamed answer of a request with tools holds back its text while it may still become a
 * tool call (tools.h) and sends it at the end as delta.tool_calls, or as content. */
#include "server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "server/gate.h"
#include "server/openai.h"
#include "server/page.h"
#include "server/pool.h"
#include "server/tools.h"

typedef struct srv {
    const srv_options *o;
    srv_pool pool;
    srv_gate *gate;
    srv_api_config api;
    char model_id[256];
    long started;
} srv;

/* Per-request state of a connection: the body received so far. */
typedef struct conn {
    char *body;
    size_t len, cap;
    size_t charged;   /* bytes of the body budget the body holds (its buffer's capacity) */
    double deadline;  /* the body must be complete by then (monotonic seconds) */
    int expect_body;  /* a completion request admitted to send its body */
    int answered;     /* a response was queued before the body arrived (its body is discarded) */
    int too_large;    /* a body without Content-Length went past the limit: the rest is discarded */
    int over_budget;  /* the body budget could not hold the body: the rest is discarded, then 503 */
    size_t discarded;
} conn;

void srv_options_init(srv_options *o) {
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->slots = 1;
    o->queue = 16;
    o->max_body = 8u << 20;
    o->drain_s = 10;
    o->request_timeout = 30;
    o->idle_timeout = 10;
    o->max_conns = 256;
    o->max_per_client = 32;
    o->max_messages = 2048;
    o->prefix_cache_bytes = (uint64_t)1024 << 20;
}

/* ---- answers ---- */

static enum MHD_Result reply(srv *s, struct MHD_Connection *c, int status, char *body, const char *ctype) {
    if (!body) {
        status = 500;
        body = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}");
        if (!body) return MHD_NO;
        ctype = "application/json";
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (status == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    srv_pool_count(&s->pool, status);
    return ret;
}

static enum MHD_Result reply_error(srv *s, struct MHD_Connection *c, const srv_error *e) {
    return reply(s, c, e->status, srv_error_json(e), "application/json");
}

static enum MHD_Result fail(srv *s, struct MHD_Connection *c, int status, const char *type, const char *param, const char *msg) {
    srv_error e;
    srv_fail(&e, status, type, param, "%s", msg);
    return reply_error(s, c, &e);
}

static void make_id(char *id, size_t cap, int chat) {
    static unsigned long counter;
    unsigned long n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    snprintf(id, cap, "%s-%lx%06lx", chat ? "chatcmpl" : "cmpl", (unsigned long)time(NULL), n);
}

static int conn_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* ---- API key ---- */

/* Constant-time comparison: the time depends on the lengths only, not on where they differ. */
static int key_equal(const char *given, const char *key) {
    size_t a = strlen(given), b = strlen(key), n = a > b ? a : b;
    unsigned char d = (unsigned char)(a != b);
    for (size_t i = 0; i < n; i++) d |= (unsigned char)((i < a ? given[i] : 0) ^ (i < b ? key[i] : 0));
    return d == 0;
}

static int authorized(srv *s, struct MHD_Connection *c) {
    if (!s->o->api_key) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7) != 0) return 0;
    return key_equal(h + 7, s->o->api_key);
}

/* ---- server-sent events ---- */

typedef struct sse {
    srv *s;
    srv_job *j;
    int fd;
    char id[64];
    long created;
    char *pending; /* the event being written */
    size_t plen, poff;
    int first_sent, finished;
    /* a job with tools: text that may still become a tool call is held back until the end */
    char *held;
    size_t hlen, held_from; /* held_from: where the held text starts in the answer */
    int released;  /* the text cannot be a tool call: streamed as it comes */
} sse;

/* The events that end a stream: the final chunk (and [DONE]), or an error event. */
static char *stream_end(sse *st) {
    srv_job *j = st->j;
    srv_error e;
    char *ev = NULL;
    if (j->cancel == SRV_SHUTDOWN || j->rc) {
        if (j->cancel == SRV_SHUTDOWN) srv_fail(&e, 503, "server_error", NULL, "the server is shutting down: the answer was cut short");
        else srv_generate_error(j, &e);
        char *js = srv_error_json(&e);
        size_t n = js ? strlen(js) + 32 : 0;
        if (js && (ev = malloc(n))) snprintf(ev, n, "data: %s\n\ndata: [DONE]\n\n", js);
        free(js);
        return ev;
    }
    /* text held back (a job with tools): the tool calls, or the text as content after all */
    char *lead = NULL;
    if (st->hlen || (j->tools && !st->released)) {
        cJSON *calls = srv_answer_tool_calls(j, j->res.text, 1);
        if (calls) lead = srv_tool_calls_event(j, st->id, st->created, st->s->model_id, calls);
        else if (st->hlen) lead = srv_chunk_event(j, st->id, st->created, st->s->model_id, st->held, st->hlen, 0, 0);
        else lead = strdup("");
        cJSON_Delete(calls);
        if (!lead) return NULL;
    }
    char *fin = srv_chunk_event(j, st->id, st->created, st->s->model_id, NULL, 0, 0, 1);
    if (!fin) {
        free(lead);
        return NULL;
    }
    size_t n = (lead ? strlen(lead) : 0) + strlen(fin) + 16;
    if ((ev = malloc(n))) snprintf(ev, n, "%s%sdata: [DONE]\n\n", lead ? lead : "", fin);
    free(lead);
    free(fin);
    return ev;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max) {
    sse *st = cls;
    srv_pool *p = &st->s->pool;
    (void)pos;
    for (;;) {
        if (st->poff < st->plen) {
            size_t n = st->plen - st->poff < max ? st->plen - st->poff : max;
            memcpy(buf, st->pending + st->poff, n);
            st->poff += n;
            return (ssize_t)n;
        }
        free(st->pending);
        st->pending = NULL;
        st->plen = st->poff = 0;
        if (st->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        char *ev = NULL;
        if (!st->first_sent) {
            st->first_sent = 1;
            if (!st->j->chat) continue; /* text completions have no role chunk */
            ev = srv_chunk_event(st->j, st->id, st->created, st->s->model_id, NULL, 0, 1, 0);
        } else {
            if (srv_job_wait(p, st->j, st->fd, 1) < 0) return MHD_CONTENT_READER_END_WITH_ERROR;
            pthread_mutex_lock(&p->mu);
            srv_job *j = st->j;
            if (j->len > j->taken) {
                size_t from = j->taken, n = j->len - j->taken;
                char *piece = malloc(n + 1);
                if (piece) memcpy(piece, j->text + from, n), j->taken = j->len;
                /* the sdnpu extension: where the chunk's text came from (text held while it may be a
                   tool call, below, goes out from held_from when it is released) */
                size_t ext_from = from;
                int hold = j->tools && !st->released;
                if (hold) {
                    if (!st->hlen) st->held_from = from;
                    ext_from = st->held_from;
                }
                cJSON *ext = piece && (!hold || !srv_tool_call_possible(j->text + ext_from, from + n - ext_from))
                                 ? srv_chunk_sdnpu(j, ext_from, from + n)
                                 : NULL;
                pthread_mutex_unlock(&p->mu);
                if (piece && j->tools && !st->released) { /* hold it while it may be a tool call */
                    char *h = realloc(st->held, st->hlen + n + 1);
                    if (h) {
                        memcpy(h + st->hlen, piece, n);
                        st->held = h;
                        st->hlen += n;
                        h[st->hlen] = 0;
                        free(piece);
                        if (srv_tool_call_possible(st->held, st->hlen)) continue;
                        st->released = 1; /* not a call: what was held goes out as content */
                        piece = st->held, n = st->hlen;
                        st->held = NULL, st->hlen = 0;
                    } else {
                        free(piece);
                        piece = NULL;
                    }
                }
                if (piece) ev = srv_chunk_event_sdnpu(j, st->id, st->created, st->s->model_id, piece, n, 0, 0, ext);
                else cJSON_Delete(ext);
                free(piece);
            } else {
                pthread_mutex_unlock(&p->mu); /* done: the result no longer changes */
                ev = stream_end(st);
                st->finished = 1;
            }
        }
        if (!ev) {
            pthread_mutex_lock(&p->mu);
            if (st->j->cancel == SRV_LIVE) st->j->cancel = SRV_CLIENT_GONE; /* out of memory: end the request */
            pthread_mutex_unlock(&p->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        st->pending = ev;
        st->plen = strlen(ev);
    }
}

/* The response is gone (sent, or the connection failed): a job still running is cancelled. */
static void sse_free(void *cls) {
    sse *st = cls;
    srv_pool *p = &st->s->pool;
    pthread_mutex_lock(&p->mu);
    if (!st->j->done && st->j->cancel == SRV_LIVE) st->j->cancel = SRV_CLIENT_GONE;
    pthread_mutex_unlock(&p->mu);
    srv_job_unref(p, st->j);
    free(st->pending);
    free(st->held);
    free(st);
}

/* ---- endpoints ---- */

static const char busy_msg[] = "the server is busy: every slot is running and the queue is full; retry later";
static const char budget_msg[] = "the server is busy receiving and parsing other requests (its body budget is in use); retry later";

/* Drop the body buffer and give its bytes back to the budget. */
static void free_body(srv *s, conn *cs) {
    free(cs->body);
    cs->body = NULL;
    cs->len = cs->cap = 0;
    if (cs->charged) srv_pool_uncharge(&s->pool, cs->charged);
    cs->charged = 0;
}

/* The whole body is in: a place is reserved before it is parsed, the parse's memory is taken
 * from the budget, then the job is queued and waited for. */
static enum MHD_Result completion(srv *s, struct MHD_Connection *c, conn *cs, int chat) {
    srv_error e;
    srv_pool *p = &s->pool;
    int q = srv_pool_reserve(p);
    if (q) {
        free_body(s, cs);
        return fail(s, c, 503, "server_error", NULL, q == 1 ? busy_msg : "the server is shutting down");
    }
    const char *body = cs->body ? cs->body : "";
    srv_json_scan scan;
    if (srv_scan_request(body, cs->len, &s->api, &scan, &e)) {
        srv_pool_unreserve(p);
        free_body(s, cs);
        return reply_error(s, c, &e);
    }
    size_t tree = srv_json_tree_bytes(&scan, cs->len);
    if (srv_pool_charge(p, tree, 1)) {
        srv_pool_unreserve(p);
        free_body(s, cs);
        return fail(s, c, 503, "server_error", NULL, budget_msg);
    }
    srv_job *j = srv_parse_request(body, cs->len, chat, &s->api, &scan, &e);
    free_body(s, cs);
    if (!j) {
        srv_pool_uncharge(p, tree);
        srv_pool_unreserve(p);
        return reply_error(s, c, &e);
    }
    j->charged = tree; /* given back when the job is freed */
    if (srv_pool_submit(p, j)) {
        srv_job_unref(p, j);
        return fail(s, c, 503, "server_error", NULL, "the server is shutting down");
    }
    int fd = conn_fd(c);
    /* libmicrohttpd's inactivity timeout must not count the time the answer takes: off while
     * waiting, back on (from now) for sending */
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    int gone = srv_job_wait(p, j, fd, j->stream) < 0;
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)s->o->idle_timeout);
    if (gone) { /* the client hung up: no answer */
        srv_job_unref(p, j);
        return MHD_NO;
    }
    pthread_mutex_lock(&p->mu);
    int done = j->done, cancel = j->cancel, rc = j->rc, has_text = j->len > 0;
    pthread_mutex_unlock(&p->mu);
    if (done && !has_text && (rc || cancel)) { /* failed (or cut short) before any text: a plain error */
        if (cancel == SRV_CLIENT_GONE) {
            srv_job_unref(p, j);
            return MHD_NO;
        }
        if (cancel == SRV_SHUTDOWN) srv_fail(&e, 503, "server_error", NULL, "the server is shutting down");
        else srv_generate_error(j, &e);
        srv_job_unref(p, j);
        return reply_error(s, c, &e);
    }
    char id[64];
    make_id(id, sizeof id, chat);
    if (!j->stream) {
        enum MHD_Result r = reply(s, c, 200, srv_completion_json(j, id, (long)time(NULL), s->model_id), "application/json");
        srv_job_unref(p, j);
        return r;
    }
    sse *st = calloc(1, sizeof *st);
    if (!st) {
        srv_job_unref(p, j);
        return reply(s, c, 500, NULL, NULL);
    }
    st->s = s;
    st->j = j; /* the stream owns the connection's reference now */
    st->fd = fd;
    st->created = (long)time(NULL);
    snprintf(st->id, sizeof st->id, "%s", id);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_read, st, sse_free);
    if (!r) {
        sse_free(st);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    srv_pool_count(p, 200);
    return ret;
}

static enum MHD_Result health(srv *s, struct MHD_Connection *c) {
    srv_pool *p = &s->pool;
    pthread_mutex_lock(&p->mu);
    int stopping = p->stopping, busy = p->busy, qlen = p->qlen;
    pthread_mutex_unlock(&p->mu);
    char *b = malloc(160);
    if (b)
        snprintf(b, 160, "{\"status\":\"%s\",\"slots\":%d,\"slots_busy\":%d,\"queue\":%d}", stopping ? "stopping" : "ok", p->n_slots, busy,
                 qlen);
    return reply(s, c, stopping ? 503 : 200, b, "application/json");
}

/* /metrics: the pool's counters and the gate's. */
static char *metrics_text(srv *s) {
    char *pool = srv_pool_metrics(&s->pool), *buf = NULL;
    size_t len = 0;
    FILE *f = pool ? open_memstream(&buf, &len) : NULL;
    if (!f) {
        free(pool);
        return NULL;
    }
    fputs(pool, f);
    free(pool);
    srv_gate_metrics(s->gate, f);
    if (fclose(f)) {
        free(buf);
        return NULL;
    }
    return buf;
}

static enum MHD_Result too_large(srv *s, struct MHD_Connection *c, conn *cs) {
    char msg[160];
    cs->answered = 1;
    snprintf(msg, sizeof msg, "the request body is larger than the server's limit of %zu bytes", s->o->max_body);
    return fail(s, c, 413, "invalid_request_error", NULL, msg);
}

/* A completion request whose head is in: refused now when it cannot be taken (every place
 * taken, a body over --max-body or over what the budget holds now), before its body is read;
 * else its body comes next. */
static enum MHD_Result admit_body(srv *s, struct MHD_Connection *c, conn *cs) {
    int q = srv_pool_admissible(&s->pool);
    if (q) return fail(s, c, 503, "server_error", NULL, q == 1 ? busy_msg : "the server is shutting down");
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    unsigned long long n = cl ? strtoull(cl, NULL, 10) : 0; /* digits only: the gate checked it */
    if (n > s->o->max_body) return too_large(s, c, cs);
    if (!srv_pool_fits(&s->pool, (size_t)n)) return fail(s, c, 503, "server_error", NULL, budget_msg); /* charged as it arrives */
    cs->expect_body = 1;
    return MHD_YES;
}

/* GET / and the page's files (page.h): no key needed (the page holds no secret: a key is typed
 * into it and sent by it), kept to this server by its Content-Security-Policy. */
static enum MHD_Result page(srv *s, struct MHD_Connection *c, const srv_page_file *f) {
    struct MHD_Response *r = MHD_create_response_from_buffer(f->len, (void *)f->data, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, srv_page_type(f));
    MHD_add_response_header(r, "Content-Security-Policy", SRV_PAGE_CSP);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    srv_pool_count(&s->pool, 200);
    return ret;
}

/* Called once the head is in (the gate checked its framing). */
static enum MHD_Result route(srv *s, struct MHD_Connection *c, const char *url, const char *method, conn *cs) {
    int get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    int chat = !strcmp(url, "/v1/chat/completions"), text = !strcmp(url, "/v1/completions");
    int models = !strcmp(url, "/v1/models"), metrics = !strcmp(url, "/metrics");
    if (!strcmp(url, "/health")) return get ? health(s, c) : fail(s, c, 405, "invalid_request_error", NULL, "/health takes GET");
    const srv_page_file *pf = srv_page_find(url);
    if (pf) return get ? page(s, c, pf) : fail(s, c, 405, "invalid_request_error", NULL, "the page takes GET");
    if (!chat && !text && !models && !metrics) {
        char msg[200];
        snprintf(msg, sizeof msg, "unknown endpoint %.16s %.120s", method, url);
        return fail(s, c, 404, "invalid_request_error", NULL, msg);
    }
    if (!authorized(s, c))
        return fail(s, c, 401, "invalid_request_error", NULL,
                    "missing or wrong API key: send the header 'Authorization: Bearer KEY' with the server's --api-key");
    if (models) return get ? reply(s, c, 200, srv_models_json(s->model_id, s->started), "application/json")
                           : fail(s, c, 405, "invalid_request_error", NULL, "/v1/models takes GET");
    if (metrics) return get ? reply(s, c, 200, metrics_text(s), "text/plain; version=0.0.4")
                            : fail(s, c, 405, "invalid_request_error", NULL, "/metrics takes GET");
    if (!post) return fail(s, c, 405, "invalid_request_error", NULL, "this endpoint takes POST");
    return admit_body(s, c, cs);
}

/* A piece of the body: kept (counted against the budget), or dropped once the body is refused. */
static enum MHD_Result on_body(srv *s, struct MHD_Connection *c, conn *cs, const char *upload, size_t n) {
    if (srv_now() > cs->deadline) { /* trickled past the deadline: closed without an answer */
        srv_gate_note(s->gate, SRV_GATE_REQUEST_TIMEOUT, conn_fd(c));
        free_body(s, cs);
        return MHD_NO;
    }
    /* microhttpd takes a response only before or after the body: a refused body is read and
     * dropped (up to the limit again, then the connection is closed), then answered */
    if (!cs->answered && !cs->too_large && !cs->over_budget && cs->len + n > s->o->max_body) {
        cs->too_large = 1;
        free_body(s, cs);
    }
    if (cs->answered || cs->too_large || cs->over_budget) {
        cs->discarded += n;
        return cs->discarded > s->o->max_body ? MHD_NO : MHD_YES;
    }
    if (cs->len + n + 1 > cs->cap) {
        size_t cap = (cs->len + n + 1) * 2;
        if (cap > s->o->max_body + 1) cap = s->o->max_body + 1;
        if (srv_pool_charge(&s->pool, cap - cs->cap, 1)) {
            cs->over_budget = 1;
            free_body(s, cs);
            cs->discarded += n;
            return MHD_YES;
        }
        char *b = realloc(cs->body, cap);
        if (!b) {
            srv_pool_uncharge(&s->pool, cap - cs->cap);
            return MHD_NO;
        }
        cs->charged += cap - cs->cap;
        cs->body = b;
        cs->cap = cap;
    }
    memcpy(cs->body + cs->len, upload, n);
    cs->len += n;
    cs->body[cs->len] = 0;
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **con_cls) {
    srv *s = cls;
    (void)version;
    conn *cs = *con_cls;
    if (!cs) { /* the head is in: answer what needs no body */
        if (!(cs = calloc(1, sizeof *cs))) return MHD_NO;
        *con_cls = cs;
        double t0 = srv_gate_accepted_at(s->gate, conn_fd(c));
        cs->deadline = (t0 >= 0 ? t0 : srv_now()) + s->o->request_timeout;
        enum MHD_Result r = route(s, c, url, method, cs);
        cs->answered = !cs->expect_body;
        return r;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        return on_body(s, c, cs, upload, n);
    }
    if (cs->answered) return MHD_YES;
    if (cs->too_large) return too_large(s, c, cs);
    if (cs->over_budget) {
        cs->answered = 1;
        return fail(s, c, 503, "server_error", NULL, budget_msg);
    }
    cs->answered = 1;
    return completion(s, c, cs, !strcmp(url, "/v1/chat/completions"));
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    srv *s = cls;
    conn *cs = *con_cls;
    if (toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED) srv_gate_note(s->gate, SRV_GATE_IDLE_TIMEOUT, conn_fd(c));
    if (!cs) return;
    free_body(s, cs);
    free(cs);
    *con_cls = NULL;
}

/* ---- life cycle ---- */

/* The name clients use: the argument's file name without a .gguf ending. */
static void default_model_id(const char *arg, char *out, size_t cap) {
    const char *b = strrchr(arg, '/');
    b = b ? b + 1 : arg;
    snprintf(out, cap, "%s", b);
    size_t n = strlen(out);
    if (n > 5 && !strcmp(out + n - 5, ".gguf")) out[n - 5] = 0;
}

/* The history store, checked before anything is loaded: an existing file must open for
 * writing and its folder must take new files (SQLite keeps a WAL store's -wal and -shm files
 * beside it). Without this check SQLite opens a file it cannot write read-only, creates -wal and
 * -shm files beside it all the same, and every answer's store fails after its work. Nothing
 * is created or changed here. Returns 0, or -1 with the reason in msg. */
static int check_history(const char *path, char *msg, size_t cap) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    struct stat st;
    if (stat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode)) {
            snprintf(msg, cap, "option --history %s: not a regular file", path);
            return -1;
        }
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            snprintf(msg, cap,
                     "option --history %s: the history store cannot be written (%s); the server stores the answers of requests with "
                     "a `user` there. Make it writable by this process, or start without --history",
                     path, strerror(errno));
            return -1;
        }
        close(fd);
    } else if (errno != ENOENT) {
        snprintf(msg, cap, "option --history %s: %s", path, strerror(errno));
        return -1;
    }
    if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS)) {
        snprintf(msg, cap,
                 "option --history %s: its folder %s does not take new files (%s); SQLite creates the store and its -wal and -shm "
                 "files there. Use a writable folder, or start without --history",
                 path, dir, strerror(errno));
        return -1;
    }
    return 0;
}

int srv_run(const srv_options *o) {
    srv s;
    memset(&s, 0, sizeof s);
    s.o = o;
    s.started = (long)time(NULL);
    /* signals: every thread created below inherits the blocked set; main waits for them */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* bodies (large buffers) always from mmap, so that their pages go back when they are
     * freed (glibc's adaptive threshold would move them into per-thread heaps after the first) */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);

    char msg[1200];
    if (o->history && check_history(o->history, msg, sizeof msg)) {
        fprintf(stderr, "sdnpu serve: %s\n", msg);
        return 1;
    }
    if (o->model_id) snprintf(s.model_id, sizeof s.model_id, "%s", o->model_id);
    else default_model_id(o->model, s.model_id, sizeof s.model_id);
    sdnpu_model *m = NULL;
    sdnpu_error err = {0};
    sdnpu_model_params mp;
    sdnpu_model_params_init(&mp);
    mp.prefix_cache_bytes = o->prefix_cache_bytes;
    mp.prefix_cache_dir = o->prefix_cache_dir;
    mp.prefix_cache_disk_bytes = o->prefix_cache_disk_bytes;
    /* a known model name is loaded from the cache; `sdnpu serve` (cli/cmd_serve.c) pulled it first if needed */
    if (sdnpu_model_load(o->model, &mp, &m, &err)) {
        fprintf(stderr, "sdnpu serve: %s\n", err.message);
        return 1;
    }
    if (!sdnpu_model_has_tokenizer(m)) {
        fprintf(stderr, "sdnpu serve: %s has no tokenizer (a GGUF file with one is needed)\n", o->model);
        sdnpu_model_free(m);
        return 1;
    }
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.n_ctx = o->n_ctx;
    /* threads 0: the library's default (cp.n_threads), shared by the slots */
    if (o->threads > 0) cp.n_threads = o->threads;
    else if (o->slots > 1) cp.n_threads = cp.n_threads / o->slots > 0 ? cp.n_threads / o->slots : 1;
    cp.history_path = o->history;
    if (srv_pool_start(&s.pool, m, &cp, o->slots, o->queue, msg, sizeof msg)) {
        fprintf(stderr, "sdnpu serve: %s\n", msg);
        srv_pool_stop(&s.pool, 0);
        sdnpu_model_free(m);
        return 1;
    }
    sdnpu_model_info mi;
    sdnpu_model_info_init(&mi);
    sdnpu_model_get_info(m, &mi, NULL);
    s.api.model_id = s.model_id;
    s.api.model_path = o->model;
    s.api.n_ctx = sdnpu_context_n_ctx(s.pool.ctx[0]);
    s.api.has_history = o->history != NULL;
    s.api.history_scope = o->history ? o->history_scope : NULL;
    s.api.tool_format = mi.tool_format;
    s.api.defaults = o->defaults;
    s.api.has_seed = o->defaults && o->has_seed;
    /* request limits: a token-id prompt filling the context fits max_values; a text longer than
     * n_ctx * max_token_bytes bytes (so characters) cannot fit the context */
    s.api.max_values = 65536 + (size_t)s.api.n_ctx;
    s.api.max_messages = o->max_messages;
    s.api.max_chars = o->max_chars > 0 ? (size_t)o->max_chars : (size_t)s.api.n_ctx * (size_t)(mi.max_token_bytes > 0 ? mi.max_token_bytes : 32);
    /* the body budget must hold one request of --max-body: its body, and its tree while parsed */
    size_t one = (o->max_body + 1) + o->max_body + 192 * s.api.max_values;
    size_t budget = o->body_budget ? o->body_budget : one > (64u << 20) ? one : (64u << 20);
    if (budget < one) {
        fprintf(stderr, "sdnpu serve: option --body-budget %zu: one request of --max-body %zu bytes may need %zu bytes (its body, and its "
                        "parsed JSON of up to %zu values); raise --body-budget or lower --max-body\n",
                budget, o->max_body, one, s.api.max_values);
        srv_pool_stop(&s.pool, 0);
        sdnpu_model_free(m);
        return 1;
    }
    s.pool.budget = budget;
    /* open files: a connection is one, a queued or running request one more (its eventfd), and
     * so are the model, the store and the slots' own */
    struct rlimit rl;
    rlim_t want = (rlim_t)o->max_conns + (rlim_t)o->slots + (rlim_t)o->queue + 64 + 128;
    if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
        setrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur < want)
            fprintf(stderr, "sdnpu serve: warning: --max-conns %d needs about %llu open files, the limit is %llu (ulimit -n)\n", o->max_conns,
                    (unsigned long long)want, (unsigned long long)rl.rlim_cur);
    }

    srv_gate_options go = {.max_conns = o->max_conns, .max_per_client = o->max_per_client, .request_timeout = o->request_timeout,
                           .idle_timeout = o->idle_timeout, .head_max = 8192};
    s.gate = srv_gate_open(o->host, o->port, &go, &s.pool, msg, sizeof msg);
    if (!s.gate) {
        fprintf(stderr, "sdnpu serve: %s\n", msg);
        srv_pool_stop(&s.pool, 0);
        sdnpu_model_free(m);
        return 1;
    }
    /* connections come from the gate (MHD_add_connection); libmicrohttpd's own connection limit
     * sits above the gate's so that it never refuses one the gate took */
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC | MHD_USE_NO_LISTEN_SOCKET;
    struct MHD_Daemon *d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, &s, MHD_OPTION_CONNECTION_LIMIT, (unsigned)(o->max_conns + 16),
                                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->idle_timeout, MHD_OPTION_STRICT_FOR_CLIENT, 1,
                                            MHD_OPTION_NOTIFY_CONNECTION, srv_gate_notify, s.gate, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
                                            &s, MHD_OPTION_END);
    if (!d || srv_gate_run(s.gate, d, msg, sizeof msg)) {
        fprintf(stderr, "sdnpu serve: %s\n", d ? msg : "cannot start libmicrohttpd");
        srv_gate_stop(s.gate);
        if (d) MHD_stop_daemon(d);
        srv_gate_free(s.gate);
        srv_pool_stop(&s.pool, 0);
        sdnpu_model_free(m);
        return 1;
    }
    int v6 = strchr(o->host, ':') != NULL; /* an IPv6 address goes in brackets in a URL */
    fprintf(stderr, "sdnpu serve: listening on http://%s%s%s:%d (model '%s', %s %s, %d slot%s of %d tokens, queue %d%s%s)\n", v6 ? "[" : "",
            o->host, v6 ? "]" : "", srv_gate_port(s.gate), s.model_id, mi.architecture, mi.chat_template, o->slots, o->slots == 1 ? "" : "s",
            s.api.n_ctx, o->queue, o->history ? ", history " : "", o->history ? o->history : "");
    fprintf(stderr, "sdnpu serve: limits: request %d s, idle %d s, %d connections (%d per client address), body %zu bytes, body budget "
                    "%zu bytes, %d messages, %zu characters\n",
            o->request_timeout, o->idle_timeout, o->max_conns, o->max_per_client, o->max_body, budget, o->max_messages, s.api.max_chars);
    fflush(stderr);

    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "sdnpu serve: %s: no new connections; running requests may finish for %.0f s\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
            o->drain_s);
    srv_gate_stop(s.gate);
    srv_pool_stop(&s.pool, o->drain_s);
    MHD_stop_daemon(d);
    srv_gate_free(s.gate);
    sdnpu_model_free(m);
    fprintf(stderr, "sdnpu serve: stopped\n");
    return 0;
}
