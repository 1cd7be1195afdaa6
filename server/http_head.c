/* http_head.c - a request head checked strictly before libmicrohttpd reads it (http_head.h).
 *
 * One pass over the bytes received so far: the request line (method token, SP, target of
 * visible ASCII, SP, HTTP/d.d, CRLF or LF), then header lines (token, ':', value of visible
 * bytes, spaces and tabs), then the empty line. A byte that cannot belong where it is answers
 * at once; running out of bytes means "not complete yet". The framing fields are checked as
 * they arrive (a second Content-Length or Host is refused at once), and once the head is
 * complete: Host present for HTTP/1.1, and Transfer-Encoding ending in chunked, holding
 * nothing else, not in HTTP/1.0 and not beside a Content-Length (RFC 9112 sections 3.2, 6.1,
 * 6.3). A CR must be followed by LF, a line may end with a bare LF (as libmicrohttpd reads
 * it), and a header line may not start with whitespace (obsolete line folding). */
#include "server/http_head.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int refuse(srv_head_verdict *v, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(srv_head_verdict *v, int status, const char *fmt, ...) {
    v->status = status;
    v->len = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->message, sizeof v->message, fmt, ap);
    va_end(ap);
    /* a message quotes bytes of the head: anything but printable ASCII is shown as '?', so the
     * answer stays text (found by fuzz_server_request: a Content-Length of bytes 0xff) */
    for (char *c = v->message; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e) *c = '?';
    return status;
}

/* Out of bytes at the limit: the head is too long; else wait for more. */
static int out_of_bytes(srv_head_verdict *v, size_t n, size_t head_max, int in_request_line) {
    if (n < head_max) return v->status = 0;
    if (in_request_line) return refuse(v, 414, "the request line is longer than %zu bytes", head_max);
    return refuse(v, 431, "the request head is longer than %zu bytes", head_max);
}

/* RFC 9110 token characters. */
static int tchar(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int name_is(const char *s, size_t n, const char *name) {
    if (strlen(name) != n) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != name[i]) return 0;
    }
    return 1;
}

/* s[0..n) without optional whitespace (SP, HTAB) at both ends. */
static void trim(const char **s, size_t *n) {
    while (*n && (**s == ' ' || **s == '\t')) (*s)++, (*n)--;
    while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t')) (*n)--;
}

/* Transfer-Encoding: a list of codings; the last must be chunked and the only one. */
static int check_transfer_encoding(srv_head_verdict *v, const char *te, size_t n) {
    const char *last = NULL;
    size_t last_n = 0;
    int count = 0;
    for (size_t i = 0; i <= n;) {
        size_t j = i;
        while (j < n && te[j] != ',') j++;
        const char *c = te + i;
        size_t cn = j - i;
        trim(&c, &cn);
        if (cn == 0) return refuse(v, 400, "Transfer-Encoding '%.*s' has an empty coding", (int)(n > 80 ? 80 : n), te);
        if (count > 0 && name_is(last, last_n, "chunked"))
            return refuse(v, 400, "Transfer-Encoding '%.*s' applies chunked before another coding: the body length cannot be determined",
                          (int)(n > 80 ? 80 : n), te);
        last = c, last_n = cn, count++;
        i = j + 1;
    }
    if (!name_is(last, last_n, "chunked"))
        return refuse(v, 400, "Transfer-Encoding '%.*s' does not end with chunked: the body length cannot be determined", (int)(n > 80 ? 80 : n),
                      te);
    if (count > 1) {
        const char *c = te;
        size_t cn = 0;
        while (cn < n && te[cn] != ',') cn++;
        trim(&c, &cn);
        return refuse(v, 501, "the transfer coding '%.*s' is not supported (only chunked is)", (int)(cn > 80 ? 80 : cn), c);
    }
    return 0;
}

int srv_http_head_check(const char *buf, size_t n, size_t head_max, srv_head_verdict *v) {
    memset(v, 0, sizeof *v);
    const unsigned char *b = (const unsigned char *)buf;
    size_t lim = n < head_max ? n : head_max, i = 0;
    /* empty lines before the request line are ignored (RFC 9112 section 2.2) */
    while (i < lim && (b[i] == '\r' || b[i] == '\n')) {
        if (b[i] == '\n') {
            i++;
            continue;
        }
        if (i + 1 >= lim) return out_of_bytes(v, n, head_max, 1);
        if (b[i + 1] != '\n') return refuse(v, 400, "a CR not followed by LF before the request line");
        i += 2;
    }
    if (i >= lim) return out_of_bytes(v, n, head_max, 1);

    /* the request line: METHOD SP TARGET SP HTTP/d.d */
    size_t m = i;
    while (m < lim && tchar(b[m])) m++;
    if (m < lim && m == i) return refuse(v, 400, "the request does not start with an HTTP method (byte 0x%02x)", b[m]);
    if (m >= lim) return out_of_bytes(v, n, head_max, 1);
    if (b[m] != ' ') return refuse(v, 400, "the method '%.*s' is not followed by a space (byte 0x%02x)", (int)(m - i > 32 ? 32 : m - i), buf + i, b[m]);
    size_t t = m + 1;
    while (t < lim && b[t] > 0x20 && b[t] < 0x7f) t++;
    if (t >= lim) return out_of_bytes(v, n, head_max, 1);
    if (t == m + 1) return refuse(v, 400, "the request line has no target after the method");
    if (b[t] == '\r' || b[t] == '\n') return refuse(v, 400, "the request line has no HTTP version (HTTP/0.9 is not supported)");
    if (b[t] != ' ') return refuse(v, 400, "the request target holds the byte 0x%02x", b[t]);
    static const char proto[] = "HTTP/d.d";
    size_t p = t + 1;
    for (size_t k = 0; k < 8; k++, p++) {
        if (p >= lim) return out_of_bytes(v, n, head_max, 1);
        int ok = proto[k] == 'd' ? b[p] >= '0' && b[p] <= '9' : b[p] == (unsigned char)proto[k];
        if (!ok) return refuse(v, 400, "the request line does not end with an HTTP version such as HTTP/1.1");
    }
    if (p >= lim) return out_of_bytes(v, n, head_max, 1);
    if (b[p] == '\r') {
        if (p + 1 >= lim) return out_of_bytes(v, n, head_max, 1);
        if (b[p + 1] != '\n') return refuse(v, 400, "a CR not followed by LF after the request line");
        p += 2;
    } else if (b[p] == '\n') {
        p++;
    } else {
        return refuse(v, 400, "the request line does not end after its HTTP version");
    }
    int major = b[t + 6] - '0', minor = b[t + 8] - '0';
    if (major != 1) return refuse(v, 505, "HTTP/%d.%d is not supported (HTTP/1.1 and HTTP/1.0 are)", major, minor);

    /* header lines */
    int n_host = 0, n_cl = 0, n_te = 0;
    const char *te = NULL;
    size_t te_n = 0;
    for (;;) {
        if (p >= lim) return out_of_bytes(v, n, head_max, 0);
        if (b[p] == '\r' || b[p] == '\n') { /* the empty line: the head is complete */
            if (b[p] == '\r') {
                if (p + 1 >= lim) return out_of_bytes(v, n, head_max, 0);
                if (b[p + 1] != '\n') return refuse(v, 400, "a CR not followed by LF at the end of the head");
                p++;
            }
            p++;
            break;
        }
        if (b[p] == ' ' || b[p] == '\t') return refuse(v, 400, "a header line starts with whitespace (obsolete line folding is not accepted)");
        size_t q = p;
        while (q < lim && tchar(b[q])) q++;
        if (q >= lim) return out_of_bytes(v, n, head_max, 0);
        if (b[q] != ':') {
            if (q == p) return refuse(v, 400, "a header line does not start with a field name (byte 0x%02x)", b[q]);
            return refuse(v, 400, "the header name '%.*s' is not followed by ':' (byte 0x%02x)", (int)(q - p > 64 ? 64 : q - p), buf + p, b[q]);
        }
        const char *name = buf + p;
        size_t name_n = q - p, r = q + 1;
        while (r < lim && b[r] != '\r' && b[r] != '\n') {
            if ((b[r] < 0x20 && b[r] != '\t') || b[r] == 0x7f)
                return refuse(v, 400, "the header '%.*s' holds the control byte 0x%02x", (int)(name_n > 64 ? 64 : name_n), name, b[r]);
            r++;
        }
        if (r >= lim) return out_of_bytes(v, n, head_max, 0);
        const char *val = buf + q + 1;
        size_t val_n = r - (q + 1);
        if (b[r] == '\r') {
            if (r + 1 >= lim) return out_of_bytes(v, n, head_max, 0);
            if (b[r + 1] != '\n') return refuse(v, 400, "a CR not followed by LF in the header '%.*s'", (int)(name_n > 64 ? 64 : name_n), name);
            r++;
        }
        p = r + 1;
        trim(&val, &val_n);
        if (name_is(name, name_n, "content-length")) {
            if (++n_cl > 1) return refuse(v, 400, "two Content-Length headers: the body length would be ambiguous");
            size_t d = 0;
            while (d < val_n && val[d] >= '0' && val[d] <= '9') d++;
            if (d == 0 || d != val_n || d > 18)
                return refuse(v, 400, "Content-Length '%.*s' is not a number of bytes", (int)(val_n > 40 ? 40 : val_n), val);
        } else if (name_is(name, name_n, "transfer-encoding")) {
            if (++n_te > 1) return refuse(v, 400, "two Transfer-Encoding headers");
            te = val, te_n = val_n;
        } else if (name_is(name, name_n, "host")) {
            if (++n_host > 1) return refuse(v, 400, "two Host headers");
        }
    }
    if (minor >= 1 && n_host == 0) return refuse(v, 400, "an HTTP/1.1 request without a Host header");
    if (n_te) {
        if (minor == 0) return refuse(v, 400, "Transfer-Encoding in an HTTP/1.0 request");
        if (n_cl) return refuse(v, 400, "both Content-Length and Transfer-Encoding: the body length would be ambiguous");
        if (check_transfer_encoding(v, te, te_n)) return v->status;
    }
    v->status = 200;
    v->len = p;
    return 200;
}
