/* sdn_log.h - the library's messages (warnings, progress notes) go through one sink, which
 * the app sets with sdnpu_set_log (runtime/api.c); by default they are written to stderr. */
#ifndef SDN_LOG_H
#define SDN_LOG_H

enum { SDN_LOG_ERROR = 0, SDN_LOG_WARN = 1, SDN_LOG_INFO = 2, SDN_LOG_DEBUG = 3 };

/* A sink: fn(user, extra, level, message); message has no trailing newline. */
typedef void (*sdn_log_fn)(void *user, void *extra, int level, const char *message);

/* Set the sink (fn NULL: the default, stderr). Thread-safe. */
void sdn_log_set(sdn_log_fn fn, void *user, void *extra);
/* Log a printf-style message at level (SDN_LOG_*). Thread-safe. */
void sdn_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
