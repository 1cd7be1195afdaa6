/* sdn_err.c - error recording for the sdn_err convention (see sdn_err.h). */
#include "common/sdn_err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int sdn_fail(sdn_err *e, int code, const char *fmt, ...) {
    if (!e) return code;
    char buf[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (e->code != SDN_OK && e->msg[0]) {
        char old[sizeof e->msg];
        memcpy(old, e->msg, sizeof old);
        snprintf(e->msg, sizeof e->msg, "%s: %s", buf, old);
    } else {
        snprintf(e->msg, sizeof e->msg, "%s", buf);
        e->code = code;
    }
    if (e->code == SDN_OK) e->code = code;
    return code;
}

void sdn_err_clear(sdn_err *e) {
    if (!e) return;
    e->code = SDN_OK;
    e->msg[0] = 0;
}

const char *sdn_strcode(int code) {
    switch (code) {
    case SDN_OK: return "ok";
    case SDN_EINVAL: return "invalid argument";
    case SDN_EFORMAT: return "format error";
    case SDN_EIO: return "I/O error";
    case SDN_ENOMEM: return "out of memory";
    case SDN_EUNSUP: return "unsupported";
    case SDN_EDB: return "database error";
    case SDN_ESTATE: return "invalid state";
    default: return "error";
    }
}
