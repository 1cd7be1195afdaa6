/* sdn_log.c - the log sink (sdn_log.h): a mutex guards the (fn, user, extra) triple, which
 * is read under it and called outside it. The default writes "sdnpu: [warning: ]message"
 * lines to stderr (info lines as they are) and drops debug messages. */
#include "common/sdn_log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static sdn_log_fn g_fn;
static void *g_user, *g_extra;

void sdn_log_set(sdn_log_fn fn, void *user, void *extra) {
    pthread_mutex_lock(&g_mu);
    g_fn = fn;
    g_user = fn ? user : NULL;
    g_extra = fn ? extra : NULL;
    pthread_mutex_unlock(&g_mu);
}

void sdn_log(int level, const char *fmt, ...) {
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
    case SDN_LOG_INFO: fprintf(stderr, "%s\n", buf); break;
    default: break;
    }
}
