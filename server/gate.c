/* gate.c - the front gate of `sdnpu serve` (gate.h): one thread with an epoll set holds the
 * listening socket and every connection whose request head has not arrived yet.
 *
 * A new connection is counted against two caps (open connections; open connections from its
 * client address); beyond them it gets a 503 with Retry-After at once. Then the gate peeks at
 * the bytes it sent (MSG_PEEK: they stay in the socket for libmicrohttpd to read) each time
 * more arrive (edge-triggered epoll) and checks them with srv_http_head_check: a complete,
 * acceptable head hands the socket to libmicrohttpd (MHD_add_connection); a bad one is answered
 * 400/414/431/501/505 at once; a connection silent for idle_timeout, or without a complete head
 * request_timeout after its accept, gets 408. Every answer of the gate closes its connection
 * after a short drain of what the client still sends (so that the answer is not lost to a
 * reset). A connection handed over keeps its place (and its accept time, for the body's
 * deadline in server.c) until libmicrohttpd reports it closed (srv_gate_notify). */
#include "server/gate.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "server/http_head.h"
#include "server/openai.h"

enum { G_FREE, G_HEAD, G_MHD, G_LINGER };
#define LINGER_MAX 64          /* answered connections drained at once; more are closed at once */
#define LINGER_S 1.0           /* how long an answered connection is drained */
#define LINGER_BYTES 65536     /* how much of what it still sends is read and dropped */
#define EV_LISTEN UINT64_MAX
#define EV_WAKE (UINT64_MAX - 1)

typedef struct gconn {
    int fd, state;
    int family;                /* AF_INET or AF_INET6: the client address, IPv4-mapped ones as IPv4 */
    unsigned char addr[16];
    struct sockaddr_storage sa;
    socklen_t salen;
    double t_accept, t_last;   /* accepted; the last time new bytes came (G_LINGER: its end) */
    size_t seen, drained;
} gconn;

/* kinds of log lines, each written at most once a second */
enum { L_FULL, L_CLIENT, L_REQUEST_TIMEOUT, L_IDLE_TIMEOUT, L_BAD, L_ACCEPT, L_N };

struct srv_gate {
    srv_gate_options o;
    srv_pool *pool;
    struct MHD_Daemon *d;
    int lfd, port, epfd, wake[2];
    pthread_t thread;
    int running;
    pthread_mutex_t mu;        /* guards everything below */
    gconn *c;
    int cap, n_open, n_head, n_linger, stopping;
    double accept_pause_until; /* out of file descriptors: accept again after this */
    long accepted, refused_full, refused_client, bad_heads, gone;
    long events[SRV_GATE_N_EVENTS];
    double log_at[L_N];
    long log_skipped[L_N];
    char *buf;                 /* head_max bytes: the gate thread's peek buffer */
};

double srv_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- small helpers ---- */

static void addr_of(gconn *k) {
    memset(k->addr, 0, sizeof k->addr);
    if (k->sa.ss_family == AF_INET) {
        k->family = AF_INET;
        memcpy(k->addr, &((struct sockaddr_in *)&k->sa)->sin_addr, 4);
    } else if (k->sa.ss_family == AF_INET6) {
        const struct in6_addr *a = &((struct sockaddr_in6 *)&k->sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) k->family = AF_INET, memcpy(k->addr, a->s6_addr + 12, 4);
        else k->family = AF_INET6, memcpy(k->addr, a->s6_addr, 16);
    } else {
        k->family = k->sa.ss_family;
    }
}

static const char *addr_str(const gconn *k, char *out, size_t cap) {
    if (!inet_ntop(k->family, k->addr, out, (socklen_t)cap)) snprintf(out, cap, "?");
    return out;
}

/* A log line of kind `kind`, unless one was written less than a second ago (then counted). */
static void glog(srv_gate *g, int kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void glog(srv_gate *g, int kind, const char *fmt, ...) {
    double now = srv_now();
    if (now - g->log_at[kind] < 1.0) {
        g->log_skipped[kind]++;
        return;
    }
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (g->log_skipped[kind]) fprintf(stderr, "sdnpu serve: %s (and %ld more like it in the last second)\n", line, g->log_skipped[kind]);
    else fprintf(stderr, "sdnpu serve: %s\n", line);
    fflush(stderr);
    g->log_at[kind] = now;
    g->log_skipped[kind] = 0;
}

static int from_client(const srv_gate *g, const gconn *k) {
    int n = 0;
    for (int i = 0; i < g->cap; i++) {
        const gconn *x = &g->c[i];
        if ((x->state == G_HEAD || x->state == G_MHD) && x->family == k->family && !memcmp(x->addr, k->addr, 16)) n++;
    }
    return n;
}

static void release(srv_gate *g, gconn *k) {
    if (k->state == G_HEAD || k->state == G_MHD) g->n_open--;
    if (k->state == G_HEAD) g->n_head--;
    if (k->state == G_LINGER) g->n_linger--;
    k->state = G_FREE;
    k->fd = -1;
}

/* Close a connection the gate holds (not one libmicrohttpd holds). */
static void drop(srv_gate *g, gconn *k) {
    epoll_ctl(g->epfd, EPOLL_CTL_DEL, k->fd, NULL);
    close(k->fd);
    release(g, k);
}

static const char *reason_phrase(int status);

/* Write an answer of status with a JSON error body (it fits the socket's buffer: one try). */
static void send_answer(srv_gate *g, int fd, int status, const char *msg) {
    srv_error e;
    srv_fail(&e, status, status == 503 ? "server_error" : "invalid_request_error", NULL, "%s", msg);
    char *js = srv_error_json(&e);
    const char *body = js ? js : "";
    char head[320];
    int hn = snprintf(head, sizeof head,
                      "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n", status,
                      reason_phrase(status), strlen(body), status == 503 ? "Retry-After: 1\r\n" : "");
    struct iovec iov[2] = {{head, (size_t)hn}, {(void *)body, strlen(body)}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
    (void)!sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    free(js);
    if (g->pool) srv_pool_count(g->pool, status);
    shutdown(fd, SHUT_WR);
}

/* Answer a connection the gate holds and close it: what the client still sends is drained
 * for a moment first, so that a reset does not destroy the answer before it is read. */
static void answer(srv_gate *g, gconn *k, int status, const char *msg) {
    send_answer(g, k->fd, status, msg);
    if (g->n_linger >= LINGER_MAX || g->stopping) {
        drop(g, k);
        return;
    }
    if (k->state == G_HEAD || k->state == G_MHD) g->n_open--;
    if (k->state == G_HEAD) g->n_head--;
    k->state = G_LINGER;
    g->n_linger++;
    k->t_last = srv_now() + LINGER_S;
    k->drained = 0;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u64 = (uint64_t)(k - g->c)};
    if (epoll_ctl(g->epfd, EPOLL_CTL_MOD, k->fd, &ev) && epoll_ctl(g->epfd, EPOLL_CTL_ADD, k->fd, &ev)) drop(g, k);
}

static const char *reason_phrase(int status) {
    switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

/* ---- the thread ---- */

/* A connection just accepted: refused at a cap, or watched for its head. */
static void admit(srv_gate *g, int fd, const struct sockaddr_storage *sa, socklen_t salen) {
    g->accepted++;
    /* a record libmicrohttpd never reported closed (it failed after taking the socket) */
    for (int i = 0; i < g->cap; i++)
        if (g->c[i].state == G_MHD && g->c[i].fd == fd) release(g, &g->c[i]);
    gconn *k = NULL;
    for (int i = 0; i < g->cap && !k; i++)
        if (g->c[i].state == G_FREE) k = &g->c[i];
    char msg[200], as[INET6_ADDRSTRLEN];
    if (!k) { /* every record holds an open or a draining connection: answer without draining */
        g->refused_full++;
        snprintf(msg, sizeof msg, "the server has %d connections open, its limit; retry later", g->n_open);
        send_answer(g, fd, 503, msg);
        close(fd);
        return;
    }
    *k = (gconn){.fd = fd, .sa = *sa, .salen = salen, .state = G_FREE};
    addr_of(k);
    k->t_accept = k->t_last = srv_now();
    int open = g->n_open, same = from_client(g, k);
    k->state = G_HEAD;
    g->n_head++, g->n_open++;
    if (open >= g->o.max_conns) {
        g->refused_full++;
        glog(g, L_FULL, "refused a connection from %s: %d connections are open, the limit (--max-conns %d)", addr_str(k, as, sizeof as),
             open, g->o.max_conns);
        snprintf(msg, sizeof msg, "the server has %d connections open, its limit; retry later", open);
        answer(g, k, 503, msg);
        return;
    }
    if (g->o.max_per_client > 0 && same >= g->o.max_per_client) {
        g->refused_client++;
        glog(g, L_CLIENT, "refused a connection from %s: %d connections from that address are open, the limit (--max-conns-per-client %d)",
             addr_str(k, as, sizeof as), same, g->o.max_per_client);
        snprintf(msg, sizeof msg, "%d connections from your address are open, the server's limit per client; retry later", same);
        answer(g, k, 503, msg);
        return;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.u64 = (uint64_t)(k - g->c)};
    if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, fd, &ev)) {
        close(fd);
        release(g, k);
    }
}

/* New bytes (or a hang-up) on a connection whose head is awaited. Returns 1 when the
 * connection is to be handed to libmicrohttpd. */
static int on_head_bytes(srv_gate *g, gconn *k, unsigned events) {
    ssize_t n = recv(k->fd, g->buf, g->o.head_max, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    if (n <= 0) { /* the client closed before sending a head, or the socket failed */
        g->gone++;
        drop(g, k);
        return 0;
    }
    double now = srv_now();
    if ((size_t)n > k->seen) k->seen = (size_t)n, k->t_last = now;
    srv_head_verdict v;
    srv_http_head_check(g->buf, (size_t)n, g->o.head_max, &v);
    if (v.status == 200) return 1;
    char as[INET6_ADDRSTRLEN];
    if (v.status >= 400) {
        g->bad_heads++;
        glog(g, L_BAD, "answered %d to %s: %s", v.status, addr_str(k, as, sizeof as), v.message);
        answer(g, k, v.status, v.message);
    } else if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) { /* no more bytes will come */
        g->gone++;
        answer(g, k, 400, "the connection was closed before the request head was complete");
    }
    return 0;
}

/* Drain an answered connection; close it at its end. */
static void on_linger_bytes(srv_gate *g, gconn *k) {
    char tmp[4096];
    for (;;) {
        ssize_t n = recv(k->fd, tmp, sizeof tmp, MSG_DONTWAIT);
        if (n > 0 && (k->drained += (size_t)n) < LINGER_BYTES) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        drop(g, k);
        return;
    }
}

/* Deadlines: 408 for heads too slow, the end of draining. Returns the next deadline. */
static double expire(srv_gate *g, double now) {
    double next = now + 3600;
    char as[INET6_ADDRSTRLEN], msg[200];
    for (int i = 0; i < g->cap; i++) {
        gconn *k = &g->c[i];
        if (k->state == G_LINGER) {
            if (now >= k->t_last) drop(g, k);
            else if (k->t_last < next) next = k->t_last;
        } else if (k->state == G_HEAD) {
            double req = k->t_accept + g->o.request_timeout, idle = k->t_last + g->o.idle_timeout;
            if (now >= req) {
                g->events[SRV_GATE_REQUEST_TIMEOUT]++;
                glog(g, L_REQUEST_TIMEOUT, "answered 408 to %s: no complete request head %.0f s after it connected (--request-timeout)",
                     addr_str(k, as, sizeof as), g->o.request_timeout);
                snprintf(msg, sizeof msg, "the request was not complete %g s after the connection opened (the server's request timeout)",
                         g->o.request_timeout);
                answer(g, k, 408, msg);
            } else if (now >= idle) {
                g->events[SRV_GATE_IDLE_TIMEOUT]++;
                glog(g, L_IDLE_TIMEOUT, "answered 408 to %s: silent for %g s while its request head was awaited (--idle-timeout)",
                     addr_str(k, as, sizeof as), g->o.idle_timeout);
                snprintf(msg, sizeof msg, "the connection was silent for %g s while its request was awaited (the server's idle timeout)",
                         g->o.idle_timeout);
                answer(g, k, 408, msg);
            } else {
                double t = req < idle ? req : idle;
                if (t < next) next = t;
            }
            if (k->state == G_LINGER && k->t_last < next) next = k->t_last;
        }
    }
    return next;
}

static void accept_some(srv_gate *g) {
    for (int round = 0; round < 64 && !g->stopping; round++) {
        struct sockaddr_storage sa;
        socklen_t salen = sizeof sa;
        int fd = accept4(g->lfd, (struct sockaddr *)&sa, &salen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            admit(g, fd, &sa, salen);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            /* out of descriptors: pause accepting (waiting clients stay in the backlog) */
            glog(g, L_ACCEPT, "cannot accept connections: %s (pausing for 0.1 s; raise the limit of open files or lower --max-conns)",
                 strerror(errno));
            g->accept_pause_until = srv_now() + 0.1;
            struct epoll_event ev = {.events = 0, .data.u64 = EV_LISTEN};
            epoll_ctl(g->epfd, EPOLL_CTL_MOD, g->lfd, &ev);
        }
        return;
    }
}

static void *gate_main(void *arg) {
    srv_gate *g = arg;
    struct epoll_event evs[64];
    int handoff[64];
    pthread_mutex_lock(&g->mu);
    double next = srv_now() + 3600;
    while (!g->stopping) {
        double now = srv_now(), until = next;
        if (g->accept_pause_until > 0 && g->accept_pause_until < until) until = g->accept_pause_until;
        int ms = until <= now ? 0 : (int)((until - now) * 1000) + 1;
        pthread_mutex_unlock(&g->mu);
        int n = epoll_wait(g->epfd, evs, 64, ms);
        pthread_mutex_lock(&g->mu);
        if (g->stopping) break;
        now = srv_now();
        if (g->accept_pause_until > 0 && now >= g->accept_pause_until) {
            g->accept_pause_until = 0;
            struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EV_LISTEN};
            epoll_ctl(g->epfd, EPOLL_CTL_MOD, g->lfd, &ev);
        }
        int n_hand = 0, listen_ready = 0;
        for (int i = 0; i < n; i++) {
            uint64_t id = evs[i].data.u64;
            if (id == EV_WAKE) continue;
            if (id == EV_LISTEN) {
                listen_ready = 1;
                continue;
            }
            gconn *k = &g->c[id];
            if (k->state == G_HEAD && on_head_bytes(g, k, evs[i].events)) {
                epoll_ctl(g->epfd, EPOLL_CTL_DEL, k->fd, NULL);
                k->state = G_MHD;
                g->n_head--;
                handoff[n_hand++] = (int)id;
            } else if (k->state == G_LINGER) {
                on_linger_bytes(g, k);
            }
        }
        if (listen_ready) accept_some(g);
        next = expire(g, srv_now());
        /* hand the complete heads to libmicrohttpd (it may call srv_gate_notify: unlocked) */
        struct {
            int fd, id;
            struct sockaddr_storage sa;
            socklen_t salen;
        } h[64];
        for (int i = 0; i < n_hand; i++) {
            gconn *k = &g->c[handoff[i]];
            h[i].fd = k->fd, h[i].id = handoff[i], h[i].sa = k->sa, h[i].salen = k->salen;
        }
        pthread_mutex_unlock(&g->mu);
        for (int i = 0; i < n_hand; i++) {
            if (MHD_add_connection(g->d, h[i].fd, (struct sockaddr *)&h[i].sa, h[i].salen) == MHD_YES) continue;
            /* libmicrohttpd closed the socket */
            pthread_mutex_lock(&g->mu);
            if (g->c[h[i].id].state == G_MHD && g->c[h[i].id].fd == h[i].fd) release(g, &g->c[h[i].id]);
            glog(g, L_ACCEPT, "libmicrohttpd refused a connection: %s", strerror(errno));
            pthread_mutex_unlock(&g->mu);
        }
        pthread_mutex_lock(&g->mu);
    }
    /* stopping: no new connections; heads still awaited get 503 */
    epoll_ctl(g->epfd, EPOLL_CTL_DEL, g->lfd, NULL);
    close(g->lfd);
    g->lfd = -1;
    for (int i = 0; i < g->cap; i++) {
        gconn *k = &g->c[i];
        if (k->state == G_HEAD) answer(g, k, 503, "the server is shutting down");
        else if (k->state == G_LINGER) drop(g, k);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

/* ---- the interface ---- */

srv_gate *srv_gate_open(const char *host, int port, const srv_gate_options *o, srv_pool *pool, char *msg, size_t msgcap) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int gai = getaddrinfo(host, ps, &hints, &ai);
    if (gai) {
        snprintf(msg, msgcap, "option --host '%s': %s", host, gai_strerror(gai));
        return NULL;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 1024)) {
        snprintf(msg, msgcap, "cannot listen on %s port %d: %s (in use, or not an address of this machine)", host, port, strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(ai);
        return NULL;
    }
    freeaddrinfo(ai);
    struct sockaddr_storage sa;
    socklen_t salen = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &salen);
    srv_gate *g = calloc(1, sizeof *g);
    int cap = o->max_conns + LINGER_MAX;
    if (g) g->c = calloc((size_t)cap, sizeof *g->c), g->buf = malloc(o->head_max);
    if (!g || !g->c || !g->buf) {
        snprintf(msg, msgcap, "out of memory");
        if (g) free(g->c), free(g->buf), free(g);
        close(fd);
        return NULL;
    }
    g->o = *o;
    g->pool = pool;
    g->lfd = fd;
    g->cap = cap;
    g->epfd = -1;
    g->wake[0] = g->wake[1] = -1;
    for (int i = 0; i < cap; i++) g->c[i].fd = -1;
    g->port = sa.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&sa)->sin6_port) : ntohs(((struct sockaddr_in *)&sa)->sin_port);
    pthread_mutex_init(&g->mu, NULL);
    for (int i = 0; i < L_N; i++) g->log_at[i] = -1e9;
    return g;
}

int srv_gate_port(const srv_gate *g) { return g->port; }

int srv_gate_run(srv_gate *g, struct MHD_Daemon *d, char *msg, size_t msgcap) {
    g->d = d;
    g->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (g->epfd < 0 || pipe2(g->wake, O_CLOEXEC | O_NONBLOCK)) {
        snprintf(msg, msgcap, "cannot start the connection gate: %s", strerror(errno));
        return -1;
    }
    struct epoll_event el = {.events = EPOLLIN, .data.u64 = EV_LISTEN}, ew = {.events = EPOLLIN, .data.u64 = EV_WAKE};
    int e = 0;
    if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->lfd, &el) || epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->wake[0], &ew)) e = errno;
    if (!e) e = pthread_create(&g->thread, NULL, gate_main, g);
    if (e) {
        snprintf(msg, msgcap, "cannot start the connection gate: %s", strerror(e));
        return -1;
    }
    g->running = 1;
    return 0;
}

void srv_gate_notify(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode code) {
    srv_gate *g = cls;
    (void)socket_context;
    if (code != MHD_CONNECTION_NOTIFY_CLOSED) return;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return;
    pthread_mutex_lock(&g->mu);
    for (int i = 0; i < g->cap; i++)
        if (g->c[i].state == G_MHD && g->c[i].fd == ci->connect_fd) {
            release(g, &g->c[i]);
            break;
        }
    pthread_mutex_unlock(&g->mu);
}

double srv_gate_accepted_at(srv_gate *g, int fd) {
    double t = -1;
    pthread_mutex_lock(&g->mu);
    for (int i = 0; i < g->cap; i++)
        if (g->c[i].state == G_MHD && g->c[i].fd == fd) {
            t = g->c[i].t_accept;
            break;
        }
    pthread_mutex_unlock(&g->mu);
    return t;
}

void srv_gate_note(srv_gate *g, srv_gate_event ev, int fd) {
    pthread_mutex_lock(&g->mu);
    g->events[ev]++;
    const gconn *k = NULL;
    for (int i = 0; i < g->cap && !k; i++)
        if (g->c[i].state == G_MHD && g->c[i].fd == fd) k = &g->c[i];
    char as[INET6_ADDRSTRLEN] = "?";
    if (k) addr_str(k, as, sizeof as);
    if (ev == SRV_GATE_REQUEST_TIMEOUT)
        glog(g, L_REQUEST_TIMEOUT, "closed the connection of %s: its request body was not complete %g s after it connected (--request-timeout)",
             as, g->o.request_timeout);
    else
        glog(g, L_IDLE_TIMEOUT, "closed the connection of %s: silent for %g s while its request body arrived or its answer was sent (--idle-timeout)",
             as, g->o.idle_timeout);
    pthread_mutex_unlock(&g->mu);
}

void srv_gate_metrics(srv_gate *g, FILE *f) {
    pthread_mutex_lock(&g->mu);
    int open = g->n_open, head = g->n_head;
    long acc = g->accepted, full = g->refused_full, client = g->refused_client, bad = g->bad_heads, gone = g->gone;
    long rt = g->events[SRV_GATE_REQUEST_TIMEOUT], it = g->events[SRV_GATE_IDLE_TIMEOUT];
    pthread_mutex_unlock(&g->mu);
    fprintf(f, "# HELP sdnpu_connections_open Open client connections (request head awaited, or with libmicrohttpd).\n"
               "# TYPE sdnpu_connections_open gauge\nsdnpu_connections_open %d\n", open);
    fprintf(f, "# HELP sdnpu_connections_awaiting_head Connections whose request head has not arrived yet.\n"
               "# TYPE sdnpu_connections_awaiting_head gauge\nsdnpu_connections_awaiting_head %d\n", head);
    fprintf(f, "# HELP sdnpu_connections_limit Open connections at most (--max-conns).\n"
               "# TYPE sdnpu_connections_limit gauge\nsdnpu_connections_limit %d\n", g->o.max_conns);
    fprintf(f, "# HELP sdnpu_connections_accepted_total Connections accepted.\n"
               "# TYPE sdnpu_connections_accepted_total counter\nsdnpu_connections_accepted_total %ld\n", acc);
    fprintf(f, "# HELP sdnpu_connections_refused_total Connections answered 503 at once: the server's cap (server_full) or the cap per client address (client_limit).\n"
               "# TYPE sdnpu_connections_refused_total counter\nsdnpu_connections_refused_total{reason=\"server_full\"} %ld\n"
               "sdnpu_connections_refused_total{reason=\"client_limit\"} %ld\n", full, client);
    fprintf(f, "# HELP sdnpu_connections_closed_total Connections closed by the server before their request was complete.\n"
               "# TYPE sdnpu_connections_closed_total counter\nsdnpu_connections_closed_total{reason=\"request_timeout\"} %ld\n"
               "sdnpu_connections_closed_total{reason=\"idle_timeout\"} %ld\nsdnpu_connections_closed_total{reason=\"bad_http\"} %ld\n"
               "sdnpu_connections_closed_total{reason=\"client_gone\"} %ld\n", rt, it, bad, gone);
}

void srv_gate_stop(srv_gate *g) {
    pthread_mutex_lock(&g->mu);
    g->stopping = 1;
    pthread_mutex_unlock(&g->mu);
    if (g->wake[1] >= 0) (void)!write(g->wake[1], "x", 1);
    if (g->running) {
        pthread_join(g->thread, NULL);
        g->running = 0;
    } else if (g->lfd >= 0) {
        close(g->lfd);
        g->lfd = -1;
    }
}

void srv_gate_free(srv_gate *g) {
    if (!g) return;
    srv_gate_stop(g);
    for (int i = 0; i < g->cap; i++)
        if (g->c[i].state == G_HEAD || g->c[i].state == G_LINGER) close(g->c[i].fd);
    if (g->epfd >= 0) close(g->epfd);
    if (g->wake[0] >= 0) close(g->wake[0]), close(g->wake[1]);
    pthread_mutex_destroy(&g->mu);
    free(g->c);
    free(g->buf);
    free(g);
}
