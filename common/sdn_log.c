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

FILE *sdn_log_stream_open(sdn_log_stream *s, int level) {
    memset(s, 0, sizeof *s);
    s->level = level;
    if (!sdn_log_enabled(level)) return NULL;
    s->f = open_memstream(&s->buf, &s->len);
    return s->f;
}

void sdn_log_stream_close(sdn_log_stream *s) {
    if (!s->f) return;
    fclose(s->f);
    static const char warn[] = "sdnpu: warning: ";
    for (char *line = s->buf, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (!strncmp(line, warn, sizeof warn - 1)) sdn_log(SDN_LOG_WARN, "%s", line + sizeof warn - 1);
        else if (*line) sdn_log(s->level, "%s", line);
    }
    free(s->buf);
    memset(s, 0, sizeof *s);
}
