/* pool.c - the bounded job queue and the slots of `sdnpu serve`.
 *
 * One mutex guards the queue, every job's progress and the counters; two condition variables
 * wake the workers (work) and the connection threads waiting on their jobs (event). A slot
 * pops the oldest job, runs sdnpu_generate on its own context and streams text into the job;
 * its on_text callback returns nonzero once the job is cancelled (client gone, shutdown), which
 * ends the request at the next token. A waiting connection thread sleeps in poll() on its socket
 * (a hang-up) and on the job's eventfd (the slot's wake-up: new text, done), so a hang-up is
 * noticed when it happens (microhttpd does not watch a connection whose handler is busy);
 * checking the socket every 50 ms instead let short answers run to their end after their
 * client had gone (docs/server.md, "Concurrency model").
 *
 * Admission counts places (running + queued + reserved <= slots + queue), so a request is
 * refused before its body is parsed; the body budget counts bytes of bodies and parsed requests
 * under the same mutex. When a large body or parsed request was freed, malloc_trim gives the
 * freed pages back to the system: glibc keeps them in the arena of the thread that allocated
 * them, where no other thread's next request could reuse them, and resident memory would grow
 * past the budget. */
#include "server/pool.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

const int srv_codes[SRV_N_CODES] = {200, 400, 401, 404, 405, 408, 413, 414, 429, 431, 500, 501, 503, 505, 0};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

srv_job *srv_job_new(void) {
    srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    sdnpu_request_init(&j->r);
    j->refs = 1;
    j->wake = -1;
    snprintf(j->method, sizeof j->method, "%s", j->r.method);
    return j;
}

char *srv_job_own(srv_job *j, char *s) {
    if (!s) return NULL;
    char **o = realloc(j->owned, sizeof *o * (size_t)(j->n_owned + 1));
    if (!o) { free(s); return NULL; }
    j->owned = o;
    j->owned[j->n_owned++] = s;
    return s;
}

static void job_free(srv_pool *p, srv_job *j) {
    size_t charged = j->charged;
    if (j->wake >= 0) close(j->wake);
    cJSON_Delete(j->json);
    for (int i = 0; i < j->n_owned; i++) free(j->owned[i]);
    free(j->owned);
    free(j->messages);
    free(j->stop);
    free(j->params);
    free(j->text);
    free(j->tok_end);
    free(j->tok_src);
    sdnpu_result_free(&j->res);
    free(j);
    if (charged) srv_pool_uncharge(p, charged); /* after the free: it may trim the heap */
}

void srv_job_unref(srv_pool *p, srv_job *j) {
    if (!j) return;
    pthread_mutex_lock(&p->mu);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&p->mu);
    if (last) job_free(p, j);
}

/* Wake the connection thread waiting on job j (srv_job_wait), under the pool's mutex. */
static void wake(srv_job *j) {
    if (j->wake < 0) return;
    uint64_t one = 1;
    ssize_t w = write(j->wake, &one, sizeof one); /* cannot block (EFD_NONBLOCK); a full counter is still readable */
    (void)w;
}

/* Streaming callback of a slot: append the text to the job (its connection sees it with the
 * step, on_step); stop when the job is cancelled. */
static int on_text(void *ud, const char *text, size_t len) {
    void **a = ud;
    srv_pool *p = a[0];
    srv_job *j = a[1];
    pthread_mutex_lock(&p->mu);
    int stop = j->cancel != SRV_LIVE;
    if (!stop && j->stream) {
        size_t have = j->len + j->pend;
        if (have + len + 1 > j->cap) {
            size_t cap = (have + len + 1) * 2;
            char *t = realloc(j->text, cap);
            if (!t) stop = 1;
            else j->text = t, j->cap = cap;
        }
        if (!stop) { /* shown to the connection with the step (on_step), or at the end */
            memcpy(j->text + have, text, len);
            j->pend += len;
            j->text[have + len] = 0;
        }
    }
    pthread_mutex_unlock(&p->mu);
    return stop;
}

/* Per decode step of a streaming job: its tokens' text ends and sources, kept for the chunks'
 * sdnpu extension; stop when the job is cancelled. */
static int on_step(void *ud, const sdnpu_step *st) {
    void **a = ud;
    srv_pool *p = a[0];
    srv_job *j = a[1];
    pthread_mutex_lock(&p->mu);
    int stop = j->cancel != SRV_LIVE;
    if (!stop && j->stream) {
        if (j->n_tok + st->n_tokens > j->tok_cap) {
            int cap = (j->n_tok + st->n_tokens) * 2;
            size_t *e = realloc(j->tok_end, sizeof *e * (size_t)cap);
            if (e) j->tok_end = e;
            unsigned char *s = e ? realloc(j->tok_src, (size_t)cap) : NULL;
            if (s) j->tok_src = s, j->tok_cap = cap;
            else stop = 1;
        }
        for (int i = 0; !stop && i < st->n_tokens; i++) {
            j->tok_end[j->n_tok] = st->text_end[i];
            j->tok_src[j->n_tok++] = st->sources[i];
        }
        j->steps = st->step;
        j->len += j->pend;
        j->pend = 0;
        wake(j);
        pthread_cond_broadcast(&p->event);
    }
    pthread_mutex_unlock(&p->mu);
    return stop;
}

typedef struct slot_arg {
    srv_pool *p;
    int slot;
} slot_arg;

static void *slot_main(void *arg) {
    slot_arg *sa = arg;
    srv_pool *p = sa->p;
    int slot = sa->slot;
    free(sa);
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->qlen == 0 && !p->stopping) pthread_cond_wait(&p->work, &p->mu);
        if (p->qlen == 0) break; /* stopping with nothing queued */
        srv_job *j = p->queue[p->qhead];
        p->qhead = (p->qhead + 1) % (p->n_slots + p->qcap);
        p->qlen--;
        j->started = 1;
        j->t_start = now_s();
        p->running[slot] = j;
        p->busy++;
        int skip = j->cancel != SRV_LIVE;
        pthread_mutex_unlock(&p->mu);
        if (!skip) {
            void *ud[2] = {p, j};
            j->r.on_text = on_text;
            j->r.on_step = on_step;
            j->r.user_data = ud;
            sdnpu_error err = {0};
            sdnpu_result res;
            sdnpu_result_init(&res);
            int rc = sdnpu_generate(p->ctx[slot], &j->r, &res, &err);
            pthread_mutex_lock(&p->mu);
            j->len += j->pend; /* text after the last step (held back for a stop string, the last bytes) */
            j->pend = 0;
            j->rc = rc;
            j->err = err;
            j->res = res;
            if (!rc && res.finish != SDNPU_FINISH_CANCELLED) {
                const sdnpu_stats *s = &res.stats;
                p->m.completed++;
                p->m.prompt_tokens += s->prompt_tokens;
                p->m.generated_tokens += s->generated_tokens;
                p->m.steps += s->steps;
                p->m.drafted += s->drafted_tokens;
                p->m.accepted += s->accepted_tokens;
                p->m.history_answers += s->history_answers;
                p->m.decode_s += s->decode_s;
            }
        } else {
            pthread_mutex_lock(&p->mu);
            j->res.finish = SDNPU_FINISH_CANCELLED;
        }
        if (j->cancel != SRV_LIVE) p->m.cancelled++;
        j->done = 1;
        j->t_done = now_s();
        p->running[slot] = NULL;
        p->busy--;
        wake(j);
        pthread_cond_broadcast(&p->event);
        int last = --j->refs == 0;
        if (last) {
            pthread_mutex_unlock(&p->mu);
            job_free(p, j);
            pthread_mutex_lock(&p->mu);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int srv_pool_start(srv_pool *p, sdnpu_model *m, const sdnpu_context_params *cp, int n_slots, int qcap, char *msg, size_t msgcap) {
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->event, &ca);
    pthread_condattr_destroy(&ca);
    p->n_slots = n_slots;
    p->model = m;
    p->qcap = qcap > 0 ? qcap : 1;
    p->queue = calloc((size_t)(n_slots + p->qcap), sizeof *p->queue);
    p->running = calloc((size_t)n_slots, sizeof *p->running);
    p->ctx = calloc((size_t)n_slots, sizeof *p->ctx);
    p->threads = calloc((size_t)n_slots, sizeof *p->threads);
    if (!p->queue || !p->running || !p->ctx || !p->threads) {
        snprintf(msg, msgcap, "out of memory");
        return -1;
    }
    for (int i = 0; i < n_slots; i++) {
        sdnpu_error err = {0};
        if (sdnpu_context_new(m, cp, &p->ctx[i], &err)) {
            snprintf(msg, msgcap, "slot %d: %s", i, err.message);
            return -1;
        }
    }
    /* warm-up: a one-token request per slot, so that the first client does not wait for the
     * draft budget's verify cost curve (measured once per machine and cached by the library) */
    for (int i = 0; i < n_slots; i++) {
        static const int32_t tok0 = 0;
        sdnpu_request r;
        sdnpu_request_init(&r);
        r.prompt_ids = &tok0;
        r.n_prompt_ids = 1;
        r.max_tokens = 1;
        r.store_answer = 0;
        sdnpu_error err = {0};
        if (sdnpu_generate(p->ctx[i], &r, NULL, &err)) {
            snprintf(msg, msgcap, "slot %d: warm-up request: %s", i, err.message);
            return -1;
        }
    }
    for (int i = 0; i < n_slots; i++) {
        slot_arg *sa = malloc(sizeof *sa);
        if (!sa) {
            snprintf(msg, msgcap, "out of memory");
            return -1;
        }
        sa->p = p;
        sa->slot = i;
        int e = pthread_create(&p->threads[i], NULL, slot_main, sa);
        if (e) {
            free(sa);
            snprintf(msg, msgcap, "cannot start slot thread %d: %s", i, strerror(e));
            return -1;
        }
        p->started_threads++;
    }
    return 0;
}

static int places_taken(const srv_pool *p) { return p->stopping ? 2 : p->busy + p->qlen + p->reserved >= p->n_slots + p->qcap ? 1 : 0; }

int srv_pool_admissible(srv_pool *p) {
    pthread_mutex_lock(&p->mu);
    int rc = places_taken(p);
    if (rc == 1) p->m.busy_queue++;
    pthread_mutex_unlock(&p->mu);
    return rc;
}

int srv_pool_reserve(srv_pool *p) {
    pthread_mutex_lock(&p->mu);
    int rc = places_taken(p);
    if (!rc) p->reserved++;
    else if (rc == 1) p->m.busy_queue++;
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void srv_pool_unreserve(srv_pool *p) {
    pthread_mutex_lock(&p->mu);
    p->reserved--;
    pthread_mutex_unlock(&p->mu);
}

int srv_pool_submit(srv_pool *p, srv_job *j) {
    if (j->wake < 0) j->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); /* -1 (out of files): srv_job_wait polls */
    pthread_mutex_lock(&p->mu);
    p->reserved--;
    int rc = p->stopping ? 2 : 0;
    if (!rc) {
        p->queue[(p->qhead + p->qlen) % (p->n_slots + p->qcap)] = j;
        p->qlen++;
        j->refs++;
        j->t_submit = now_s();
        pthread_cond_signal(&p->work);
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

int srv_pool_charge(srv_pool *p, size_t bytes, int count) {
    pthread_mutex_lock(&p->mu);
    int ok = bytes <= p->budget - p->budget_used;
    if (ok) {
        p->budget_used += bytes;
        if (p->budget_used > p->budget_peak) p->budget_peak = p->budget_used;
    } else if (count) {
        p->m.busy_budget++;
    }
    pthread_mutex_unlock(&p->mu);
    return ok ? 0 : -1;
}

int srv_pool_fits(srv_pool *p, size_t bytes) {
    pthread_mutex_lock(&p->mu);
    int ok = bytes <= p->budget - p->budget_used;
    if (!ok) p->m.busy_budget++;
    pthread_mutex_unlock(&p->mu);
    return ok;
}

void srv_pool_uncharge(srv_pool *p, size_t bytes) {
    pthread_mutex_lock(&p->mu);
    p->budget_used -= bytes;
    p->since_trim += bytes;
    int trim = bytes >= (1u << 20) || p->since_trim >= (8u << 20);
    if (trim) p->since_trim = 0;
    pthread_mutex_unlock(&p->mu);
    if (trim) malloc_trim(0);
}

/* Whether poll() reported that the peer of a socket closed its end (or the socket failed). */
static int hung_up(short revents) { return (revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0; }

/* 1 when the peer of socket fd has closed its end (or the socket failed). */
static int client_gone(int fd) {
    if (fd < 0) return 0;
    struct pollfd pf = {.fd = fd, .events = POLLRDHUP};
    return poll(&pf, 1, 0) > 0 && hung_up(pf.revents);
}

int srv_job_wait(srv_pool *p, srv_job *j, int fd, int want_text) {
    int gone = 0;
    pthread_mutex_lock(&p->mu);
    while (!j->done && !(want_text && j->len > j->taken)) {
        if (fd >= 0 && j->wake >= 0) {
            /* sleep until the socket hangs up or the slot wakes the job (a wake-up written after
             * the check above leaves the eventfd readable: none is lost); the timeout is only a
             * backstop */
            pthread_mutex_unlock(&p->mu);
            struct pollfd pf[2] = {{.fd = fd, .events = POLLRDHUP}, {.fd = j->wake, .events = POLLIN}};
            int n = poll(pf, 2, 1000);
            if (n > 0 && (pf[1].revents & POLLIN)) { /* reset the counter */
                uint64_t v;
                ssize_t r = read(j->wake, &v, sizeof v);
                (void)r;
            }
            pthread_mutex_lock(&p->mu);
            if (n > 0 && hung_up(pf[0].revents) && !j->done) {
                gone = 1;
                if (j->cancel == SRV_LIVE) j->cancel = SRV_CLIENT_GONE;
                break;
            }
            continue;
        }
        if (client_gone(fd)) {
            gone = 1;
            if (j->cancel == SRV_LIVE) j->cancel = SRV_CLIENT_GONE;
            break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&p->event, &p->mu, &ts);
    }
    pthread_mutex_unlock(&p->mu);
    return gone ? -1 : 0;
}

void srv_pool_stop(srv_pool *p, double drain_s) {
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    /* queued jobs are not started: they end at once as cancelled by the shutdown */
    while (p->qlen > 0) {
        srv_job *j = p->queue[p->qhead];
        p->qhead = (p->qhead + 1) % (p->n_slots + p->qcap);
        p->qlen--;
        j->cancel = SRV_SHUTDOWN;
        j->res.finish = SDNPU_FINISH_CANCELLED;
        j->done = 1;
        wake(j);
        p->m.cancelled++;
        int last = --j->refs == 0;
        if (last) {
            pthread_mutex_unlock(&p->mu);
            job_free(p, j);
            pthread_mutex_lock(&p->mu);
        }
    }
    pthread_cond_broadcast(&p->work);
    pthread_cond_broadcast(&p->event);
    double end = now_s() + drain_s;
    while (p->busy > 0 && now_s() < end) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&p->event, &p->mu, &ts);
    }
    for (int i = 0; i < p->n_slots; i++)
        if (p->running && p->running[i] && p->running[i]->cancel == SRV_LIVE) p->running[i]->cancel = SRV_SHUTDOWN;
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->started_threads; i++) pthread_join(p->threads[i], NULL);
    for (int i = 0; p->ctx && i < p->n_slots; i++) sdnpu_context_free(p->ctx[i]);
    free(p->ctx);
    free(p->threads);
    free(p->running);
    free(p->queue);
    p->ctx = NULL;
    p->threads = NULL;
    p->running = NULL;
    p->queue = NULL;
}

void srv_pool_count(srv_pool *p, int status) {
    pthread_mutex_lock(&p->mu);
    int k = SRV_N_CODES - 1;
    for (int i = 0; i < SRV_N_CODES - 1; i++)
        if (srv_codes[i] == status) k = i;
    p->m.by_code[k]++;
    pthread_mutex_unlock(&p->mu);
}

char *srv_pool_metrics(srv_pool *p) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    pthread_mutex_lock(&p->mu);
    srv_metrics m = p->m;
    int qlen = p->qlen, busy = p->busy, slots = p->n_slots, qcap = p->qcap;
    size_t budget = p->budget, used = p->budget_used, peak = p->budget_peak;
    pthread_mutex_unlock(&p->mu);
    fprintf(f, "# HELP sdnpu_requests_total HTTP requests answered, by status code.\n# TYPE sdnpu_requests_total counter\n");
    for (int i = 0; i < SRV_N_CODES; i++)
        if (srv_codes[i]) fprintf(f, "sdnpu_requests_total{code=\"%d\"} %ld\n", srv_codes[i], m.by_code[i]);
        else fprintf(f, "sdnpu_requests_total{code=\"other\"} %ld\n", m.by_code[i]);
    fprintf(f, "# HELP sdnpu_requests_cancelled_total Requests cancelled (client gone or shutdown), not answered.\n"
               "# TYPE sdnpu_requests_cancelled_total counter\nsdnpu_requests_cancelled_total %ld\n", m.cancelled);
    fprintf(f, "# HELP sdnpu_requests_completed_total Requests that generated an answer.\n"
               "# TYPE sdnpu_requests_completed_total counter\nsdnpu_requests_completed_total %ld\n", m.completed);
    fprintf(f, "# HELP sdnpu_prompt_tokens_total Prompt tokens of completed requests.\n"
               "# TYPE sdnpu_prompt_tokens_total counter\nsdnpu_prompt_tokens_total %ld\n", m.prompt_tokens);
    fprintf(f, "# HELP sdnpu_tokens_generated_total Tokens generated by completed requests.\n"
               "# TYPE sdnpu_tokens_generated_total counter\nsdnpu_tokens_generated_total %ld\n", m.generated_tokens);
    fprintf(f, "# HELP sdnpu_decode_seconds_total Time spent decoding (after prefill).\n"
               "# TYPE sdnpu_decode_seconds_total counter\nsdnpu_decode_seconds_total %.6f\n", m.decode_s);
    fprintf(f, "# HELP sdnpu_tokens_per_second Generated tokens per decoding second, over all requests.\n"
               "# TYPE sdnpu_tokens_per_second gauge\nsdnpu_tokens_per_second %.3f\n", m.decode_s > 0 ? m.generated_tokens / m.decode_s : 0.0);
    fprintf(f, "# HELP sdnpu_decode_steps_total Verification (decode) steps.\n"
               "# TYPE sdnpu_decode_steps_total counter\nsdnpu_decode_steps_total %ld\n", m.steps);
    fprintf(f, "# HELP sdnpu_mean_accepted_tokens_per_step Generated tokens per decode step (the model's own token included).\n"
               "# TYPE sdnpu_mean_accepted_tokens_per_step gauge\nsdnpu_mean_accepted_tokens_per_step %.4f\n",
            m.steps > 0 ? (double)m.generated_tokens / (double)m.steps : 0.0);
    fprintf(f, "# HELP sdnpu_drafted_tokens_total Draft tokens verified.\n# TYPE sdnpu_drafted_tokens_total counter\n"
               "sdnpu_drafted_tokens_total %ld\n", m.drafted);
    fprintf(f, "# HELP sdnpu_accepted_tokens_total Draft tokens accepted.\n# TYPE sdnpu_accepted_tokens_total counter\n"
               "sdnpu_accepted_tokens_total %ld\n", m.accepted);
    fprintf(f, "# HELP sdnpu_history_answers_total Earlier answers of task groups drafted from.\n"
               "# TYPE sdnpu_history_answers_total counter\nsdnpu_history_answers_total %ld\n", m.history_answers);
    fprintf(f, "# HELP sdnpu_queue_length Requests waiting for a slot.\n# TYPE sdnpu_queue_length gauge\nsdnpu_queue_length %d\n", qlen);
    fprintf(f, "# HELP sdnpu_queue_capacity Requests that may wait for a slot.\n# TYPE sdnpu_queue_capacity gauge\n"
               "sdnpu_queue_capacity %d\n", qcap);
    fprintf(f, "# HELP sdnpu_slots_busy Slots running a request.\n# TYPE sdnpu_slots_busy gauge\nsdnpu_slots_busy %d\n", busy);
    fprintf(f, "# HELP sdnpu_slots Slots (contexts) of the server.\n# TYPE sdnpu_slots gauge\nsdnpu_slots %d\n", slots);
    fprintf(f, "# HELP sdnpu_requests_busy_total Requests answered 503 because every slot and queue place was taken (queue) or the body budget could not hold them (body_budget).\n"
               "# TYPE sdnpu_requests_busy_total counter\nsdnpu_requests_busy_total{reason=\"queue\"} %ld\n"
               "sdnpu_requests_busy_total{reason=\"body_budget\"} %ld\n", m.busy_queue, m.busy_budget);
    fprintf(f, "# HELP sdnpu_body_budget_bytes Bytes of request bodies and parsed requests the server holds at most (--body-budget).\n"
               "# TYPE sdnpu_body_budget_bytes gauge\nsdnpu_body_budget_bytes %zu\n", budget);
    fprintf(f, "# HELP sdnpu_body_bytes Bytes of the body budget in use now.\n# TYPE sdnpu_body_bytes gauge\nsdnpu_body_bytes %zu\n", used);
    sdnpu_prefix_cache_stats pc;
    sdnpu_prefix_cache_stats_init(&pc);
    if (p->model && sdnpu_prefix_cache_get_stats(p->model, &pc, NULL) == SDNPU_OK && pc.enabled) {
        fprintf(f, "# HELP sdnpu_prefix_cache_lookups_total Prompt blocks (%d tokens) prefill looked up in the prefix cache, by outcome.\n"
                   "# TYPE sdnpu_prefix_cache_lookups_total counter\nsdnpu_prefix_cache_lookups_total{result=\"hit_memory\"} %ld\n"
                   "sdnpu_prefix_cache_lookups_total{result=\"hit_disk\"} %ld\nsdnpu_prefix_cache_lookups_total{result=\"miss\"} %ld\n",
                SDNPU_PREFIX_BLOCK, pc.hits_memory, pc.hits_disk, pc.misses);
        fprintf(f, "# HELP sdnpu_prefix_cache_evictions_total Blocks evicted, from memory and (files) from the disk tier.\n"
                   "# TYPE sdnpu_prefix_cache_evictions_total counter\nsdnpu_prefix_cache_evictions_total{tier=\"memory\"} %ld\n"
                   "sdnpu_prefix_cache_evictions_total{tier=\"disk\"} %ld\n", pc.evictions, pc.disk_evictions);
        fprintf(f, "# HELP sdnpu_prefix_cache_bytes Bytes the prefix cache holds now, by tier.\n# TYPE sdnpu_prefix_cache_bytes gauge\n"
                   "sdnpu_prefix_cache_bytes{tier=\"memory\"} %llu\nsdnpu_prefix_cache_bytes{tier=\"disk\"} %llu\n",
                (unsigned long long)pc.memory_bytes, (unsigned long long)pc.disk_bytes);
        fprintf(f, "# HELP sdnpu_prefix_cache_budget_bytes The prefix cache's budget, by tier.\n# TYPE sdnpu_prefix_cache_budget_bytes gauge\n"
                   "sdnpu_prefix_cache_budget_bytes{tier=\"memory\"} %llu\nsdnpu_prefix_cache_budget_bytes{tier=\"disk\"} %llu\n",
                (unsigned long long)pc.memory_budget, (unsigned long long)pc.disk_budget);
        fprintf(f, "# HELP sdnpu_prefix_cache_disk_writes_total Block files written to the disk tier.\n"
                   "# TYPE sdnpu_prefix_cache_disk_writes_total counter\nsdnpu_prefix_cache_disk_writes_total %ld\n", pc.disk_writes);
        fprintf(f, "# HELP sdnpu_prefix_cache_disk_damaged_total Block files found damaged, truncated or foreign (not used, computed again).\n"
                   "# TYPE sdnpu_prefix_cache_disk_damaged_total counter\nsdnpu_prefix_cache_disk_damaged_total %ld\n", pc.disk_damaged);
        fprintf(f, "# HELP sdnpu_prefix_cache_disk_enabled 1 while the disk tier is in use.\n# TYPE sdnpu_prefix_cache_disk_enabled gauge\n"
                   "sdnpu_prefix_cache_disk_enabled %d\n", pc.disk_enabled);
    }
    fprintf(f, "# HELP sdnpu_body_bytes_peak The most bytes of the body budget in use at once since the start.\n"
               "# TYPE sdnpu_body_bytes_peak gauge\nsdnpu_body_bytes_peak %zu\n", peak);
    if (fclose(f)) {
        free(buf);
        return NULL;
    }
    return buf;
}
