/* test_server_hostile.c - `sdnpu serve` ($SDN_CLI, a small generated model) against hostile
 * clients on loopback, spoken to with raw sockets: malformed framing (each case one well-formed
 * 400/501/505 at once, then the connection closed); slow and idle connections from other
 * loopback addresses beyond the per-client cap while /health and a chat request from 127.0.0.1
 * must be answered within a second; a full connection table answered 503 at once; an answer
 * that takes longer than the idle timeout still delivered; 32 concurrent oversized bodies with
 * the server's peak resident memory checked against its stated bound; a history store the
 * server cannot write refused at startup with no files created beside it. Every attack is
 * bounded in count and time (a few seconds each). */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "sdnpu.h"
#include "support/test_util.h"

typedef struct server {
    pid_t pid;
    int port;
    char log[512];
} server;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *model_path(void) { return tu_model("tiny-llama", "Q8_0", 3); }

/* Fork `sdnpu serve --model tiny --port 0 --host 127.0.0.1 ARGS...` with its stderr in log.
 * drop_dac: when root, without the capabilities that let root ignore file permissions (so a
 * file mode can make the history store unwritable to it). */
static pid_t spawn(server *s, const char *log, int drop_dac, const char *const *args) {
    const char *cli = getenv("SDN_CLI");
    if (!cli) fail_msg("SDN_CLI is not set (run through ctest)");
    const char *argv[48] = {cli, "serve", "--model", model_path(), "--port", "0", "--host", "127.0.0.1", "--threads", "1"};
    int n = 10;
    for (int i = 0; args[i] && n < 46; i++) argv[n++] = args[i];
    argv[n] = NULL;
    snprintf(s->log, sizeof s->log, "%s", tu_tmp(log));
    s->port = 0;
    unlink(s->log); /* no earlier server's "listening" line can be read before the child writes its own */
    s->pid = fork();
    assert_true(s->pid >= 0);
    if (s->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, 2);
        setenv("SDNPU_CACHE", tu_tmpdir(), 1);
        if (drop_dac && geteuid() == 0) {
            const int caps[] = {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER};
            for (int i = 0; i < 3; i++)
                if (prctl(PR_CAPBSET_DROP, caps[i], 0, 0, 0)) {
                    fprintf(stderr, "test: cannot drop capability %d: %s\n", caps[i], strerror(errno));
                    _exit(125);
                }
        }
        execv(cli, (char **)argv);
        _exit(127);
    }
    return s->pid;
}

/* Start a server and wait for its listening line. */
static void start(server *s, const char *log, const char *const *args) {
    spawn(s, log, 0, args);
    for (double t0 = now_s(); now_s() - t0 < 120;) {
        FILE *f = fopen(s->log, "r");
        char line[1024];
        while (f && fgets(line, sizeof line, f)) {
            const char *p = strstr(line, "listening on http://127.0.0.1:");
            if (p) s->port = atoi(p + strlen("listening on http://127.0.0.1:"));
        }
        if (f) fclose(f);
        if (s->port > 0) return;
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) fail_msg("the server exited before listening (log %s)", s->log);
        usleep(20000);
    }
    fail_msg("the server did not start listening (log %s)", s->log);
}

static void stop(server *s) {
    kill(s->pid, SIGTERM);
    int st = 0;
    double t0 = now_s();
    while (waitpid(s->pid, &st, WNOHANG) != s->pid) {
        if (now_s() - t0 > 30) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, &st, 0);
            fail_msg("the server did not stop within 30 s of SIGTERM");
        }
        usleep(20000);
    }
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* ---- raw sockets ---- */

/* A connection from source address src (127.0.0.x) to the server; -1 when refused. */
static int dial(const server *s, const char *src) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, src, &a.sin_addr);
    if (bind(fd, (struct sockaddr *)&a, sizeof a)) fail_msg("bind %s: %s", src, strerror(errno));
    struct sockaddr_in d = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port)};
    inet_pton(AF_INET, "127.0.0.1", &d.sin_addr);
    if (connect(fd, (struct sockaddr *)&d, sizeof d)) {
        close(fd);
        return -1;
    }
    return fd;
}

static void send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return; /* the server closed: what it answered is read next */
        p += w, n -= (size_t)w;
    }
}

/* Read until the server closes (or timeout s): the bytes (malloc'd, NUL-terminated); *took:
 * seconds until the close, -1 on timeout. */
static char *read_to_close(int fd, double timeout, double *took) {
    size_t cap = 65536, n = 0;
    char *b = malloc(cap);
    double t0 = now_s();
    *took = -1;
    for (;;) {
        double left = timeout - (now_s() - t0);
        if (left <= 0) break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) continue;
        if (n + 4096 > cap) b = realloc(b, cap *= 2);
        ssize_t r = recv(fd, b + n, cap - n - 1, 0);
        if (r <= 0) {
            *took = now_s() - t0;
            break;
        }
        n += (size_t)r;
    }
    b[n] = 0;
    return b;
}

static int status_of(const char *resp) { return !strncmp(resp, "HTTP/1.1 ", 9) ? atoi(resp + 9) : 0; }

/* Status lines in an answer (a header block sent twice shows as two). */
static int status_lines(const char *r) {
    int n = !strncmp(r, "HTTP/1.", 7);
    for (const char *p = r; (p = strstr(p, "\nHTTP/1.")); p++) n++;
    return n;
}

/* One request on a fresh connection from 127.0.0.1: the status (0: no connection or no status
 * line), the whole answer in *out (malloc'd, may be NULL), the seconds until the server closed
 * in *took (-1: it did not close within timeout). */
static int exchange(const server *s, const char *req, size_t n, double timeout, char **out, double *took) {
    int fd = dial(s, "127.0.0.1");
    if (fd < 0) { /* status 0: the caller's check fails (this may run in a thread: no cmocka call here) */
        if (took) *took = -1;
        if (out) *out = calloc(1, 1);
        return 0;
    }
    double t0 = now_s();
    send_all(fd, req, n);
    double t;
    char *r = read_to_close(fd, timeout, &t);
    close(fd);
    if (took) *took = t < 0 ? -1 : now_s() - t0;
    int st = status_of(r);
    if (out) *out = r;
    else free(r);
    return st;
}

static const char *HEALTH = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
#define CHAT_BODY "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me about the lighthouse.\"}],\"max_tokens\":2}"

static int chat(const server *s, double timeout, double *took) {
    char req[512];
    int n = snprintf(req, sizeof req, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s", strlen(CHAT_BODY), CHAT_BODY);
    return exchange(s, req, (size_t)n, timeout, NULL, took);
}

/* A metric's value from GET /metrics. */
static double metric(const server *s, const char *name) {
    char *r = NULL;
    assert_int_equal(exchange(s, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 35, 5, &r, NULL), 200);
    char pat[160];
    snprintf(pat, sizeof pat, "\n%s ", name);
    const char *p = strstr(r, pat);
    double v = p ? atof(p + strlen(pat)) : -1;
    free(r);
    if (!p) fail_msg("no metric %s", name);
    return v;
}

/* ---- framing ---- */

typedef struct frame_case {
    const char *name, *req;
    int status;
} frame_case;

#define H11 " HTTP/1.1\r\nHost: x\r\n"

/* Each malformed head: one well-formed answer at once (a status line, Connection: close, a
 * JSON error), then the connection closed. */
static void test_framing(void **state) {
    (void)state;
    server s;
    start(&s, "hostile-framing.log", (const char *const[]){"--request-timeout", "5", "--idle-timeout", "3", NULL});
    const frame_case cases[] = {
        {"garbage request line", "GARBAGE\r\n\r\n", 400},
        {"TLS hello", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400},
        {"no HTTP version", "GET /health\r\n\r\n", 400},
        {"HTTP/2.0", "GET /health HTTP/2.0\r\nHost: x\r\n\r\n", 505},
        {"no Host", "GET /health HTTP/1.1\r\n\r\n", 400},
        {"Content-Length -1", "POST /v1/chat/completions" H11 "Content-Length: -1\r\n\r\n", 400},
        {"Content-Length abc", "POST /v1/chat/completions" H11 "Content-Length: abc\r\n\r\n", 400},
        {"two Content-Length", "POST /v1/chat/completions" H11 "Content-Length: 2\r\nContent-Length: 40\r\n\r\n{}", 400},
        {"Transfer-Encoding gzip, chunked", "POST /v1/chat/completions" H11 "Transfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 501},
        {"Transfer-Encoding identity", "POST /v1/chat/completions" H11 "Transfer-Encoding: identity\r\n\r\n{}", 400},
        {"Transfer-Encoding and Content-Length", "POST /v1/chat/completions" H11 "Transfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n{}", 400},
        {"obsolete line folding", "GET /health" H11 "X-A: 1\r\n 2\r\n\r\n", 400},
        {"bare CR", "GET /health" H11 "X-A: 1\r2\r\n\r\n", 400},
        {"space before colon", "GET /health" H11 "X-A : 1\r\n\r\n", 400},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const frame_case *c = &cases[i];
        char *r = NULL;
        double took;
        int st = exchange(&s, c->req, strlen(c->req), 3, &r, &took);
        if (st != c->status) fail_msg("%s: status %d, want %d: %.300s", c->name, st, c->status, r);
        if (took < 0 || took > 1.0) fail_msg("%s: the connection was not closed within a second (%.2f s)", c->name, took);
        if (status_lines(r) != 1) fail_msg("%s: %d status lines in the answer: %.400s", c->name, status_lines(r), r);
        assert_non_null(strstr(r, "\r\nConnection: close\r\n"));
        const char *body = strstr(r, "\r\n\r\n");
        assert_non_null(body);
        cJSON *j = cJSON_Parse(body + 4);
        if (!j || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "error"), "message")))
            fail_msg("%s: the answer's body is not a JSON error: %s", c->name, body + 4);
        cJSON_Delete(j);
        free(r);
    }
    /* good requests still work: HTTP/1.0 without Host, a chunked body; one per connection */
    char *r = NULL;
    double took;
    assert_int_equal(exchange(&s, "GET /health HTTP/1.0\r\n\r\n", 24, 3, &r, &took), 200);
    assert_true(took >= 0 && took < 1.0);
    free(r);
    char req[512];
    int n = snprintf(req, sizeof req, "POST /v1/chat/completions" H11 "Transfer-Encoding: chunked\r\n\r\n%zx\r\n%s\r\n0\r\n\r\n", strlen(CHAT_BODY),
                     CHAT_BODY);
    assert_int_equal(exchange(&s, req, (size_t)n, 10, &r, &took), 200);
    assert_non_null(strstr(r, "chat.completion"));
    free(r);
    /* two requests on one connection: the first is answered, then the connection closes */
    n = snprintf(req, sizeof req, "%s%s", HEALTH, HEALTH);
    assert_int_equal(exchange(&s, req, (size_t)n, 3, &r, &took), 200);
    assert_int_equal(status_lines(r), 1);
    free(r);
    assert_true(metric(&s, "sdnpu_connections_closed_total{reason=\"bad_http\"}") >= (double)(sizeof cases / sizeof cases[0]));
    stop(&s);
}

/* ---- slow and idle clients ---- */

enum { SLOW_HEAD, IDLE, SLOW_BODY, N_KINDS };
static const char *kind_name[N_KINDS] = {"slow head", "idle", "slow body"};

typedef struct attacker {
    int fd, kind;
    char src[16];
    double opened, next;
    int reopen;
    char got[64];
    size_t got_n;
} attacker;

typedef struct outcome {
    int refused, timed_out, closed, other; /* 503 at once, 408, closed without an answer, anything else */
    double worst[N_KINDS];                 /* the longest a connection of each kind was held */
    double worst_refusal;                  /* the longest a refused connection waited for its 503 */
} outcome;

static void open_attacker(const server *s, attacker *a) {
    a->fd = dial(s, a->src);
    a->opened = now_s();
    a->next = a->opened + 0.3;
    a->got_n = 0;
    if (a->fd < 0) return;
    fcntl(a->fd, F_SETFL, O_NONBLOCK);
    if (a->kind == SLOW_HEAD) send_all(a->fd, "POST /v1/chat/completions HTTP/1.1\r\n", 36);
    if (a->kind == SLOW_BODY)
        send_all(a->fd, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{\"messages\":", 83);
}

/* What the server did to an attacker's connection so far: answered or closed it (counted in
 * o; the attacker reconnects at its next tick when reopen is set), or nothing yet. */
static void check_attacker(const server *s, attacker *a, outcome *o, int reopen) {
    if (a->fd < 0) return;
    for (;;) {
        ssize_t r = recv(a->fd, a->got + a->got_n, sizeof a->got - 1 - a->got_n, 0);
        if (r > 0) {
            a->got_n += (size_t)r;
            if (a->got_n < sizeof a->got - 1) continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        break; /* closed (or reset), or enough read */
    }
    a->got[a->got_n] = 0;
    double held = now_s() - a->opened;
    int st = status_of(a->got);
    if (st == 503) o->refused++;
    else if (st == 408) o->timed_out++;
    else if (a->got_n == 0) o->closed++;
    else o->other++;
    if (st != 503 && held > o->worst[a->kind]) o->worst[a->kind] = held;
    if (st == 503 && held > o->worst_refusal) o->worst_refusal = held;
    close(a->fd);
    a->fd = -1;
    a->next = now_s() + 0.3; /* reconnect at the next tick */
    (void)s;
    a->reopen = reopen;
}

/* Drip-feed the slow attackers; reconnect closed ones. */
static void feed_attacker(const server *s, attacker *a) {
    if (now_s() < a->next) return;
    if (a->fd < 0) {
        if (a->reopen) open_attacker(s, a);
        return;
    }
    a->next += 0.3;
    if (a->kind == SLOW_HEAD) send(a->fd, "X-Slow: 1\r\n", 11, MSG_NOSIGNAL);
    if (a->kind == SLOW_BODY) send(a->fd, "[{\"role\":\"u", 11, MSG_NOSIGNAL);
}

typedef struct bgreq {
    const server *s;
    char req[1024];
    size_t n;
    int status;
    char *r;
} bgreq;

static void *bg_exchange(void *arg) {
    bgreq *b = arg;
    b->status = exchange(b->s, b->req, b->n, 120, &b->r, NULL);
    return NULL;
}

/* An answer that takes longer than the idle timeout (1 s) is still delivered: a stream holds
 * the one slot while a chat request waits in the queue; after 1.5 s the stream's client hangs
 * up, which frees the slot. */
static void slow_answer(const server *s) {
    static const char long_body[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"Go on.\"}],\"max_tokens\":16000,\"stream\":true,"
                                    "\"sdnpu\":{\"ignore_eos\":true,\"method\":\"none\"}}";
    char req[512];
    int n = snprintf(req, sizeof req, "POST /v1/chat/completions" H11 "Content-Length: %zu\r\n\r\n%s", strlen(long_body), long_body);
    int fa = dial(s, "127.0.0.1");
    assert_true(fa >= 0);
    send_all(fa, req, (size_t)n);
    char buf[65536];
    assert_true(recv(fa, buf, sizeof buf, 0) > 0); /* the stream has started: the slot is busy */
    bgreq b = {.s = s};
    b.n = (size_t)snprintf(b.req, sizeof b.req, "POST /v1/chat/completions" H11 "Content-Length: %zu\r\n\r\n%s", strlen(CHAT_BODY), CHAT_BODY);
    pthread_t tb;
    pthread_create(&tb, NULL, bg_exchange, &b);
    fcntl(fa, F_SETFL, O_NONBLOCK);
    for (double t0 = now_s(); now_s() - t0 < 1.5;) { /* keep reading the stream */
        struct pollfd p = {.fd = fa, .events = POLLIN};
        if (poll(&p, 1, 50) > 0 && recv(fa, buf, sizeof buf, 0) == 0) fail_msg("the stream ended before its client hung up");
    }
    close(fa);
    pthread_join(tb, NULL);
    if (b.status != 200) fail_msg("the queued request got %d: %.300s", b.status, b.r ? b.r : "");
    const char *q = strstr(b.r, "\"queue_ms\":");
    assert_non_null(q);
    double queued = atof(q + 11);
    print_message("a request queued for %.0f ms behind a stream (idle timeout 1 s) was answered\n", queued);
    assert_true(queued > 1000);
    free(b.r);
}

/* /health and a chat request in turn every 0.2 s from 127.0.0.1: each must be a 200 within a second. */
typedef struct prober {
    const server *s;
    volatile int stop;
    int probes, failed;
    double worst;
    char failure[200];
} prober;

static void *probe_main(void *arg) {
    prober *p = arg;
    while (!p->stop) {
        double took;
        int st = p->probes % 2 ? chat(p->s, 5, &took) : exchange(p->s, HEALTH, strlen(HEALTH), 5, NULL, &took);
        if ((st != 200 || took < 0 || took > 1.0) && !p->failed) {
            p->failed = 1;
            snprintf(p->failure, sizeof p->failure, "%s got status %d after %.2f s (want 200 within 1 s)", p->probes % 2 ? "a chat request" : "/health",
                     st, took);
        }
        if (took > p->worst) p->worst = took;
        p->probes++;
        usleep(200000);
    }
    return NULL;
}

/* From three other loopback addresses, 24 connections each (slow heads, idle ones, slow
 * bodies; 72 in all, which locked out every client of a server with one slot and a queue of
 * one before the gate; the per-client cap is 8), reopened whenever the server closes one, for
 * 3.5 s; the deadlines are 2 s for a request and 1 s of silence. Meanwhile /health and a chat
 * request from 127.0.0.1 must be answered within a second, every time. */
static void test_slow_and_idle_clients(void **state) {
    (void)state;
    server s;
    start(&s, "hostile-slow.log",
          (const char *const[]){"--slots", "1", "--queue", "1", "--request-timeout", "2", "--idle-timeout", "1", "--max-conns", "64",
                                "--max-conns-per-client", "8", "--ctx", "16384", NULL});
    enum { N_ADDR = 3, PER_ADDR = 24 };
    attacker at[N_ADDR * PER_ADDR];
    outcome o = {0};
    for (int i = 0; i < N_ADDR * PER_ADDR; i++) {
        at[i].kind = i % N_KINDS;
        snprintf(at[i].src, sizeof at[i].src, "127.0.0.%d", 2 + i / PER_ADDR);
        open_attacker(&s, &at[i]);
    }
    /* the probes run in their own thread, so that the attack loop notices each close at once */
    prober pr = {.s = &s};
    pthread_t tp;
    pthread_create(&tp, NULL, probe_main, &pr);
    for (double t0 = now_s(); now_s() - t0 < 3.5;) {
        for (int i = 0; i < N_ADDR * PER_ADDR; i++) {
            check_attacker(&s, &at[i], &o, 1);
            feed_attacker(&s, &at[i]);
        }
        usleep(20000);
    }
    pr.stop = 1;
    pthread_join(tp, NULL);
    if (pr.failed) fail_msg("under attack, %s", pr.failure);
    int probes = pr.probes;
    double worst_probe = pr.worst;
    /* the attack stops: what is still open is answered or closed within the deadlines */
    for (double t1 = now_s(); now_s() - t1 < 3.5;) {
        int open = 0;
        for (int i = 0; i < N_ADDR * PER_ADDR; i++) {
            check_attacker(&s, &at[i], &o, 0);
            feed_attacker(&s, &at[i]);
            open += at[i].fd >= 0;
        }
        if (!open) break;
        usleep(20000);
    }
    for (int i = 0; i < N_ADDR * PER_ADDR; i++)
        if (at[i].fd >= 0) fail_msg("a %s connection from %s is still open %.1f s after it opened", kind_name[at[i].kind], at[i].src, now_s() - at[i].opened);
    print_message("%d probes answered (slowest %.3f s); attackers: %d refused (503, the slowest after %.3f s), %d answered 408, %d closed, "
                  "%d other; held at most %.2f s (slow head), %.2f s (idle), %.2f s (slow body)\n",
                  probes, worst_probe, o.refused, o.worst_refusal, o.timed_out, o.closed, o.other, o.worst[SLOW_HEAD], o.worst[IDLE],
                  o.worst[SLOW_BODY]);
    assert_true(probes >= 10);
    assert_true(o.refused >= N_ADDR * (PER_ADDR - 8)); /* beyond the per-client cap */
    assert_true(o.worst_refusal < 1.0);
    assert_true(o.timed_out > 0);
    assert_int_equal(o.other, 0);
    /* held no longer than the deadlines (a little slack for a busy machine) */
    assert_true(o.worst[SLOW_HEAD] < 2.0 + 0.7);
    assert_true(o.worst[IDLE] < 1.0 + 0.7);
    assert_true(o.worst[SLOW_BODY] < 2.0 + 1.0 + 0.7);
    assert_true(metric(&s, "sdnpu_connections_refused_total{reason=\"client_limit\"}") >= N_ADDR * (PER_ADDR - 8));
    assert_true(metric(&s, "sdnpu_connections_closed_total{reason=\"request_timeout\"}") > 0);
    assert_true(metric(&s, "sdnpu_connections_closed_total{reason=\"idle_timeout\"}") > 0);
    FILE *f = fopen(s.log, "r");
    char line[1024];
    int logged = 0;
    while (f && fgets(line, sizeof line, f)) logged |= strstr(line, "--max-conns-per-client") != NULL;
    if (f) fclose(f);
    assert_true(logged);

    slow_answer(&s);
    stop(&s);
}

/* ---- a full server ---- */

/* Connections beyond --max-conns get 503 with Retry-After at once, /health included, and
 * service comes back once the idle ones are closed. */
static void test_server_full(void **state) {
    (void)state;
    server s;
    start(&s, "hostile-full.log",
          (const char *const[]){"--max-conns", "12", "--max-conns-per-client", "0", "--idle-timeout", "1", "--request-timeout", "3", NULL});
    int fds[12];
    for (int i = 0; i < 12; i++) assert_true((fds[i] = dial(&s, "127.0.0.2")) >= 0);
    usleep(100000);
    char *r = NULL;
    double took;
    assert_int_equal(exchange(&s, HEALTH, strlen(HEALTH), 3, &r, &took), 503);
    assert_true(took >= 0 && took < 1.0);
    assert_non_null(strstr(r, "\r\nRetry-After: 1\r\n"));
    assert_int_equal(status_lines(r), 1);
    free(r);
    /* the idle connections are answered 408 after a second of silence; then /health is served */
    for (int i = 0; i < 12; i++) {
        char *a = read_to_close(fds[i], 3, &took);
        if (status_of(a) != 408) fail_msg("an idle connection got: %.200s", a);
        free(a);
        close(fds[i]);
    }
    assert_int_equal(exchange(&s, HEALTH, strlen(HEALTH), 3, NULL, &took), 200);
    assert_true(metric(&s, "sdnpu_connections_refused_total{reason=\"server_full\"}") >= 1);
    stop(&s);
}

/* ---- memory ---- */

typedef struct bigpost {
    const server *s;
    const char *body;
    size_t n;
    int status;
    double took;
} bigpost;

static void *post_big(void *arg) {
    bigpost *b = arg;
    int fd = dial(b->s, "127.0.0.1");
    b->status = -1;
    if (fd < 0) return NULL;
    char head[200];
    int hn = snprintf(head, sizeof head, "POST /v1/chat/completions" H11 "Content-Length: %zu\r\n\r\n", b->n);
    double t0 = now_s(), t;
    send_all(fd, head, (size_t)hn);
    send_all(fd, b->body, b->n);
    char *r = read_to_close(fd, 30, &t);
    b->status = status_of(r);
    b->took = now_s() - t0;
    free(r);
    close(fd);
    return NULL;
}

/* VmRSS or VmHWM (the peak) of a process, in bytes. */
static double proc_kb(pid_t pid, const char *field) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    double v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, strlen(field))) v = atof(line + strlen(field) + 1) * 1024;
    if (f) fclose(f);
    return v;
}

/* A body of n chat messages whose contents are `len` characters each. */
static char *messages_body(int n, int len, size_t *out_n) {
    size_t cap = (size_t)n * ((size_t)len + 40) + 64, at = 0;
    char *b = malloc(cap);
    at += (size_t)sprintf(b, "{\"messages\":[");
    for (int i = 0; i < n; i++) {
        at += (size_t)sprintf(b + at, "%s{\"role\":\"user\",\"content\":\"", i ? "," : "");
        memset(b + at, 'a', (size_t)len);
        at += (size_t)len;
        at += (size_t)sprintf(b + at, "\"}");
    }
    at += (size_t)sprintf(b + at, "],\"max_tokens\":1}");
    *out_n = at;
    return b;
}

/* 32 concurrent bodies of 7.5 MB (250,000 one-character messages: refused from the scan,
 * before parsing), then 32 of 6.6 MB (20,000 messages of 300 characters: parsed, then refused
 * for their message count) against the default limits: every one answered (413, 400, or 503
 * when the body budget is in use), and the server's peak resident memory within its idle size
 * plus the body budget plus 256 KiB per connection (about 75 KiB measured: a thread's stack and
 * libmicrohttpd's buffers). Then one of each alone: 413 and 400. */
static void test_memory_bound(void **state) {
    (void)state;
    server s;
    start(&s, "hostile-memory.log", (const char *const[]){NULL});
    const double budget = 64.0 * 1024 * 1024, conns = 32;
    double idle = proc_kb(s.pid, "VmRSS:");
    size_t n1, n2;
    char *b1 = messages_body(250000, 1, &n1), *b2 = messages_body(20000, 300, &n2);
    int seen[600] = {0};
    for (int wave = 0; wave < 2; wave++) {
        bigpost p[32];
        pthread_t t[32];
        for (int i = 0; i < 32; i++) {
            p[i] = (bigpost){.s = &s, .body = wave ? b2 : b1, .n = wave ? n2 : n1};
            pthread_create(&t[i], NULL, post_big, &p[i]);
        }
        for (int i = 0; i < 32; i++) {
            pthread_join(t[i], NULL);
            if (p[i].status != 400 && p[i].status != 413 && p[i].status != 503)
                fail_msg("wave %d, body %d: status %d after %.2f s (want 400, 413 or 503)", wave, i, p[i].status, p[i].took);
            seen[p[i].status]++;
        }
    }
    double peak = proc_kb(s.pid, "VmHWM:"), after = proc_kb(s.pid, "VmRSS:");
    double bound = idle + budget + conns * 256 * 1024;
    print_message("bodies of %.1f and %.1f MB, 32 at once: %d x 413, %d x 400, %d x 503; resident %.0f MiB idle, peak %.0f MiB (bound %.0f MiB), "
                  "%.0f MiB after\n",
                  n1 / 1e6, n2 / 1e6, seen[413], seen[400], seen[503], idle / 1048576, peak / 1048576, bound / 1048576, after / 1048576);
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer's allocator keeps freed memory in quarantine (256 MB by default) and
     * adds shadow memory: the bound is glibc malloc's, checked in the plain build */
    print_message("AddressSanitizer build: the resident-memory bound is not checked\n");
#else
    if (peak > bound) fail_msg("peak resident memory %.0f MiB is above the bound %.0f MiB", peak / 1048576, bound / 1048576);
#endif
    /* one at a time, nothing competes for the budget: refused from the scan, refused after parsing */
    bigpost one = {.s = &s, .body = b1, .n = n1};
    post_big(&one);
    assert_int_equal(one.status, 413);
    one = (bigpost){.s = &s, .body = b2, .n = n2};
    post_big(&one);
    assert_int_equal(one.status, 400);
    double took;
    assert_int_equal(exchange(&s, HEALTH, strlen(HEALTH), 3, NULL, &took), 200);
    assert_true(metric(&s, "sdnpu_body_bytes") == 0); /* every byte given back */
    free(b1);
    free(b2);
    stop(&s);
}

/* ---- the history store ---- */

/* Start the server on history store db, expecting it to refuse: its exit status and log. */
static int refused_start(const char *db, char *log, size_t cap) {
    server s;
    spawn(&s, "hostile-store.log", 1, (const char *const[]){"--history", db, NULL});
    int st = 0;
    double t0 = now_s();
    while (waitpid(s.pid, &st, WNOHANG) != s.pid) {
        FILE *f = fopen(s.log, "r");
        char line[1024];
        int listening = 0;
        while (f && fgets(line, sizeof line, f)) listening |= strstr(line, "listening on") != NULL;
        if (f) fclose(f);
        if (listening || now_s() - t0 > 60) {
            kill(s.pid, SIGKILL);
            waitpid(s.pid, &st, 0);
            fail_msg("the server did not refuse the history store %s (log %s)", db, s.log);
        }
        usleep(20000);
    }
    FILE *f = fopen(s.log, "r");
    size_t n = f ? fread(log, 1, cap - 1, f) : 0;
    log[n] = 0;
    if (f) fclose(f);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 125) fail_msg("cannot drop CAP_DAC_OVERRIDE to make a file unwritable for root: %s", log);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The folder holds only the store (no -wal, -shm, journal or temporary file). */
static void only_the_store(const char *dir) {
    char cmd[800];
    snprintf(cmd, sizeof cmd, "ls -A '%s'", dir);
    FILE *p = popen(cmd, "r");
    char line[256], all[1024] = "";
    int n = 0;
    while (p && fgets(line, sizeof line, p)) n++, strncat(all, line, sizeof all - strlen(all) - 1);
    if (p) pclose(p);
    if (n != 1 || strcmp(all, "answers.sqlite\n")) fail_msg("files beside the store: %s", all);
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *b = malloc(1 << 20);
    *n = fread(b, 1, 1 << 20, f);
    fclose(f);
    return b;
}

/* A store the server cannot write is refused at startup, before the model is loaded, with a
 * message naming --history; nothing is created beside it and the file is unchanged. */
static void test_readonly_store(void **state) {
    (void)state;
    char dir[600], db[700], log[4096];
    snprintf(dir, sizeof dir, "%s", tu_tmp("store"));
    mkdir(dir, 0755);
    snprintf(db, sizeof db, "%s/answers.sqlite", dir);
    /* a real store, created by the library */
    sdnpu_model *m = NULL;
    sdnpu_context *c = NULL;
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.history_path = db;
    sdnpu_error e = {0};
    assert_int_equal(sdnpu_model_load(model_path(), NULL, &m, &e), SDNPU_OK);
    assert_int_equal(sdnpu_context_new(m, &cp, &c, &e), SDNPU_OK);
    sdnpu_context_free(c);
    sdnpu_model_free(m);
    only_the_store(dir);
    size_t n0, n1;
    char *before = slurp(db, &n0);

    /* the file read-only */
    chmod(db, 0444);
    assert_int_equal(refused_start(db, log, sizeof log), 1);
    if (!strstr(log, "--history") || !strstr(log, "cannot be written")) fail_msg("the refusal does not say why: %s", log);
    assert_null(strstr(log, "listening"));
    only_the_store(dir);
    char *after = slurp(db, &n1);
    assert_true(n0 == n1 && !memcmp(before, after, n0));
    free(after);

    /* the file writable, its folder not (SQLite's -wal and -shm files go there) */
    chmod(db, 0644);
    chmod(dir, 0555);
    int st = refused_start(db, log, sizeof log);
    chmod(dir, 0755);
    assert_int_equal(st, 1);
    if (!strstr(log, "--history") || !strstr(log, "folder")) fail_msg("the refusal does not say why: %s", log);
    only_the_store(dir);
    free(before);

    /* the same store, writable: the server starts on it */
    server s;
    start(&s, "hostile-store-ok.log", (const char *const[]){"--history", db, NULL});
    stop(&s);
}

int main(void) {
    model_path(); /* write the model once, before any server starts */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_framing),
        cmocka_unit_test(test_slow_and_idle_clients),
        cmocka_unit_test(test_server_full),
        cmocka_unit_test(test_memory_bound),
        cmocka_unit_test(test_readonly_store),
    };
    return cmocka_run_group_tests_name("server hostile", tests, NULL, NULL);
}
