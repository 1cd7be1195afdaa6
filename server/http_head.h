/* http_head.h - the head of an HTTP/1.x request (request line and header fields) checked
 * strictly, before libmicrohttpd reads it: RFC 9112's framing rules (one Content-Length of
 * digits only, Transfer-Encoding that ends in chunked and holds nothing else, not both, one
 * Host) and a request line of method, target and HTTP/1.0 or HTTP/1.1. libmicrohttpd 0.9.75
 * (Debian 12) is more lenient: it takes the first of two Content-Length headers, reads a body
 * of an unknown transfer coding until the connection closes, closes a request line without a
 * space without an answer and sends its 400 header block twice for a malformed
 * Content-Length. The gate (gate.c) hands it only heads this check accepts. */
#ifndef SDN_SERVER_HTTP_HEAD_H
#define SDN_SERVER_HTTP_HEAD_H

#include <stddef.h>

/* The verdict on the bytes received so far. */
typedef struct srv_head_verdict {
    int status;        /* 0: not complete yet (nothing wrong so far); 200: a complete head that is
                          acceptable; else the error status to answer: 400, 414, 431, 501, 505 */
    size_t len;        /* status 200: the head's length in bytes, its empty line included */
    char message[200]; /* status >= 400: what is wrong, for the client (printable ASCII) */
} srv_head_verdict;

/* Check the first n bytes a client sent on a connection (buf need not be NUL-terminated).
 * A head longer than head_max bytes (the empty line included) is refused: 414 when the request
 * line alone is longer, else 431. An error is reported as soon as the bytes seen prove it (a
 * byte that cannot start an HTTP method answers 400 at once, without waiting for a line end).
 * Always fills v; returns v->status. */
int srv_http_head_check(const char *buf, size_t n, size_t head_max, srv_head_verdict *v);

#endif
