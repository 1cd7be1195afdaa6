/* sdn_str.h - the growable string: text appended piece by piece (chat templates rendered, JSON
 * schemas compiled to grammars, model descriptions, the server's tool-call prompts), always
 * NUL-terminated, with out of memory remembered rather than reported at every append.
 *
 * Header-only and self-contained (the C library only): the server (server/), a client of the
 * public header, may use it without reaching into libsdnpu (tests/test_layering.c allows this
 * one header and checks that it includes system headers only).
 *
 * Use: `sdn_str s = {0};`, append with sdn_str_add / sdn_str_addn / sdn_str_printf, then
 * sdn_str_take() the string (or NULL after out of memory) or sdn_str_free() it. After a failed
 * allocation every later append does nothing and s.oom stays 1; the text appended until then
 * stays readable. Not thread-safe (one string, one thread). */
#ifndef SDN_STR_H
#define SDN_STR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sdn_str {
    char *p;    /* the text, NUL-terminated once anything was appended; NULL before */
    size_t n;   /* its length in bytes, the NUL not counted */
    size_t cap; /* bytes allocated at p */
    int oom;    /* an allocation failed: appends are ignored from then on */
} sdn_str;

/* Makes room for `more` bytes plus the NUL; 0, or -1 (and s->oom set) when out of memory. */
static inline int sdn_str_reserve(sdn_str *s, size_t more) {
    if (s->oom) return -1;
    if (more > (size_t)-1 / 2 - s->n - 1) return s->oom = 1, -1;
    size_t need = s->n + more + 1;
    if (need <= s->cap) return 0;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < need) cap *= 2;
    char *p = realloc(s->p, cap);
    if (!p) return s->oom = 1, -1;
    s->p = p;
    s->cap = cap;
    return 0;
}

/* Appends n bytes of d (which may hold NULs; then the string's strlen is shorter than s->n). */
static inline void sdn_str_addn(sdn_str *s, const void *d, size_t n) {
    if (sdn_str_reserve(s, n)) return;
    if (n) memcpy(s->p + s->n, d, n);
    s->n += n;
    s->p[s->n] = 0;
}

/* Appends the NUL-terminated text t. sdn_str_add(s, "") makes s->p a string even when empty. */
static inline void sdn_str_add(sdn_str *s, const char *t) { sdn_str_addn(s, t, strlen(t)); }

/* Appends printf-formatted text, whatever its length. An encoding error of vsnprintf appends
 * nothing. */
static inline void sdn_str_vprintf(sdn_str *s, const char *fmt, va_list ap) {
    if (s->oom) return;
    va_list ap2;
    va_copy(ap2, ap);
    char tmp[256];
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap2);
    va_end(ap2);
    if (k < 0) return;
    if ((size_t)k < sizeof tmp) {
        sdn_str_addn(s, tmp, (size_t)k);
        return;
    }
    if (sdn_str_reserve(s, (size_t)k)) return;
    vsnprintf(s->p + s->n, (size_t)k + 1, fmt, ap);
    s->n += (size_t)k;
}

static inline void sdn_str_printf(sdn_str *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void sdn_str_printf(sdn_str *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sdn_str_vprintf(s, fmt, ap);
    va_end(ap);
}

/* Frees the text and empties s (ready for reuse). */
static inline void sdn_str_free(sdn_str *s) {
    free(s->p);
    s->p = NULL;
    s->n = s->cap = 0;
    s->oom = 0;
}

/* Hands the text to the caller (free() it): a string ("" when nothing was appended), or NULL
 * after out of memory (the text is freed then). s is empty afterwards either way. */
static inline char *sdn_str_take(sdn_str *s) {
    sdn_str_add(s, "");
    char *p = s->oom ? NULL : s->p;
    if (!p) free(s->p);
    s->p = NULL;
    s->n = s->cap = 0;
    s->oom = 0;
    return p;
}

#endif
