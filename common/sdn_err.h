/* sdn_err.h - the one error convention of sdnpu.
 *
 * Every fallible function returns an int status (SDN_OK == 0 on success) and takes an
 * optional `sdn_err *` that receives a human-readable message naming the file, field or
 * option at fault. Callers that do not care pass NULL. Messages are complete sentences
 * fragments such as "model.gguf: tensor 'blk.0.attn_q.weight': data out of bounds". */
#ifndef SDN_ERR_H
#define SDN_ERR_H

#include <stddef.h>

enum {
    SDN_OK = 0,
    SDN_EINVAL = 1,  /* bad argument or option */
    SDN_EFORMAT = 2, /* malformed or inconsistent file / record content */
    SDN_EIO = 3,     /* the operating system refused (open, read, mmap, write) */
    SDN_ENOMEM = 4,  /* allocation failed or a size would overflow */
    SDN_EUNSUP = 5,  /* well-formed but not supported (type, architecture, version) */
    SDN_EDB = 6,     /* SQLite reported an error */
    SDN_ESTATE = 7,  /* call not valid in the object's current state */
};

typedef struct sdn_err {
    int code;
    char msg[1024];
} sdn_err;

/* Record an error (printf-style message) in `e` if it is not NULL and return `code`.
 * If `e` already holds an error, the new message is prefixed to it ("outer: inner"),
 * so callers can add context: return sdn_fail(e, rc, "%s", path). */
int sdn_fail(sdn_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Clear `e` (code SDN_OK, empty message). Safe with NULL. */
void sdn_err_clear(sdn_err *e);

/* Short name of a status code ("format error", ...). */
const char *sdn_strcode(int code);

#endif
