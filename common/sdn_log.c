/* sdn_log.c - the log sink (sdn_log.h): a mutex guards the (fn, user, extra) triple, which
 * is read under it and called outside it. The default writes "sdnpu: [warning: ]message"
 * lines to stderr (info and debug lines as they are); messages more detailed than the level
 * (sdn_log_set_level, default SDN_LOG_WARN) are dropped before the sink. */
#include "common/sdn_log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static sdn_log_fn g_fn;
static void *g_user, *g_extra;
static volatile int g_level = SDN_LOG_WARN;

void sdn_log_set_level(int level) { g_level = level < SDN_LOG_ERROR ? SDN_LOG_ERROR : level > SDN_LOG_DEBUG ? SDN_LOG_DEBUG : level; }

int sdn_log_enabled(int level) { return level <= g_level; }

void sdn_log_set(sdn_log_fn fn, void *user, void *extra) {
    pthread_mutex_lock(&g_mu);
    g_fn = fn;
    g_user = fn ? user : NULL;
    g_extra = fn ? extra : NULL;
    pthread_mutex_unlock(&g_mu);
}

void sdn_log(int level, const char *fmt, ...) {
    if (!sdn_log_enabled(level)) return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&g_mu);
    sdn_log_fn fn = g_fn;
    void *user = g_user, *extra = g_extra;
    pthread_mutex_unlock(&g_mu);
    if (fn) { fn(user, extra, level, buf); return; }
    switch (level) {
    case SDN_LOG_ERROR: fprintf(stderr, "sdnpu: %s\n", buf); break;
    case SDN_LOG_WARN: fprintf(stderr, "sdnpu: warning: %s\n", buf); break;
    default: fprintf(stderr, "%s\n", buf); break;
    }
}

/* One line of a note stream to the sink: "sdnpu: warning: " lines as warnings. */
static void emit_line(int level, const char *line) {
    static const char warn[] = "sdnpu: warning: ";
    if (!strncmp(line, warn, sizeof warn - 1)) sdn_log(SDN_LOG_WARN, "%s", line + sizeof warn - 1);
    else if (*line) sdn_log(level, "%s", line);
}

/* Pass on the complete lines of s->buf[0 .. s->len), keeping the rest (all of it when final). */
static void emit_lines(sdn_log_stream *s, int final) {
    char *start = s->buf, *end = s->buf + s->len, *nl;
    while (start < end && (nl = memchr(start, '\n', (size_t)(end - start)))) {
        *nl = 0;
        emit_line(s->level, start);
        start = nl + 1;
    }
    if (final && start < end) {
        *end = 0; /* the buffer keeps a byte for it */
        emit_line(s->level, start);
        start = end;
    }
    memmove(s->buf, start, (size_t)(end - start));
    s->len = (size_t)(end - start);
}

#ifdef __GLIBC__
/* glibc: a cookie stream passes each line on as soon as it is written (a note before a long
 * measurement shows before it); elsewhere a memory stream passes them on at the close. */
static ssize_t cookie_write(void *c, const char *data, size_t n) {
    sdn_log_stream *s = c;
    if (s->len + n + 1 > s->cap) {
        size_t cap = (s->len + n + 1) * 2;
        char *b = realloc(s->buf, cap);
        if (!b) return -1;
        s->buf = b;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, data, n);
    s->len += n;
    emit_lines(s, 0);
    return (ssize_t)n;
}

static int cookie_close(void *c) {
    sdn_log_stream *s = c;
    if (s->buf) emit_lines(s, 1);
    free(s->buf);
    s->buf = NULL;
    s->len = s->cap = 0;
    return 0;
}
#endif

FILE *sdn_log_stream_open(sdn_log_stream *s, int level) {
    memset(s, 0, sizeof *s);
    s->level = level;
    if (!sdn_log_enabled(level)) return NULL;
#ifdef __GLIBC__
    cookie_io_functions_t io = {.write = cookie_write, .close = cookie_close};
    s->f = fopencookie(s, "w", io);
    if (s->f) setvbuf(s->f, NULL, _IOLBF, 0);
#else
    s->f = open_memstream(&s->buf, &s->len);
#endif
    return s->f;
}

void sdn_log_stream_close(sdn_log_stream *s) {
    if (!s->f) return;
    fclose(s->f);
#ifndef __GLIBC__
    if (s->buf) {
        char *b = realloc(s->buf, s->len + 1); /* room for the final NUL of emit_lines */
        if (b) s->buf = b, emit_lines(s, 1);
    }
    free(s->buf);
#endif
    memset(s, 0, sizeof *s);
}
