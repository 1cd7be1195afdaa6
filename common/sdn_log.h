/* sdn_log.h - the library's messages (warnings, progress notes) go through one sink, which
 * the app sets with sdnpu_set_log (runtime/api.c), filtered by one level (sdnpu_set_log_level;
 * default SDN_LOG_WARN); by default they are written to stderr. */
#include <stddef.h>
#include <stdio.h>

#ifndef SDN_LOG_H
#define SDN_LOG_H

enum { SDN_LOG_ERROR = 0, SDN_LOG_WARN = 1, SDN_LOG_INFO = 2, SDN_LOG_DEBUG = 3 };

/* A sink: fn(user, extra, level, message); message has no trailing newline. */
typedef void (*sdn_log_fn)(void *user, void *extra, int level, const char *message);

/* Set the sink (fn NULL: the default, stderr). Thread-safe. */
void sdn_log_set(sdn_log_fn fn, void *user, void *extra);
/* The most detailed level passed on (clamped to SDN_LOG_ERROR .. SDN_LOG_DEBUG). Thread-safe. */
void sdn_log_set_level(int level);
/* 1 when a message of this level would be passed on. */
int sdn_log_enabled(int level);
/* Log a printf-style message at level (SDN_LOG_*), when enabled. Thread-safe. */
void sdn_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A FILE for code that writes notes to a stream (the verify cost curve, graph profiles): NULL
 * when `level` is not enabled (write nothing), else a stream whose lines go to the sink at
 * `level` ("sdnpu: warning: " lines at SDN_LOG_WARN, that prefix removed): each line as it is
 * written (glibc), or all at sdn_log_stream_close (elsewhere). Close it with
 * sdn_log_stream_close (s must stay in place until then). */
typedef struct sdn_log_stream {
    FILE *f;
    char *buf;
    size_t len, cap;
    int level;
} sdn_log_stream;
FILE *sdn_log_stream_open(sdn_log_stream *s, int level);
void sdn_log_stream_close(sdn_log_stream *s);

#endif
