/* text_decode.c - see text_decode.h. UTF-8 is validated by the well-formed byte sequences of
 * the Unicode standard (table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF);
 * UTF-16 is converted code unit by code unit, pairing surrogates. Offsets in messages are
 * offsets in the file as it lies on disk (the BOM counted). */
#include "common/text_decode.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/sdn_util.h"

const char *sdn_text_enc_name(sdn_text_enc e) {
    switch (e) {
    case SDN_TEXT_UTF8_BOM: return "UTF-8 with BOM";
    case SDN_TEXT_UTF16LE: return "UTF-16LE";
    case SDN_TEXT_UTF16BE: return "UTF-16BE";
    default: return "UTF-8";
    }
}

/* Length of the well-formed UTF-8 sequence at p (n bytes left), 0 when it is not one. */
static size_t utf8_seq(const unsigned char *p, size_t n) {
    unsigned c = p[0];
    if (c < 0x80) return 1;
    size_t k;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) k = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        k = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if (n < k) return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < k; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return k;
}

static size_t put_utf8(unsigned char *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { o[0] = (unsigned char)(0xC0 | cp >> 6); o[1] = (unsigned char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

static int decode_utf8(const char *name, const unsigned char *d, size_t len, size_t skip, char **out, size_t *out_len, sdn_err *err) {
    for (size_t i = skip; i < len;) {
        if (d[i] == 0)
            return sdn_fail(err, SDN_EFORMAT,
                            "%s: NUL byte at byte offset %zu: not a text file (UTF-16 without a byte-order mark? save it as UTF-8)",
                            name, i);
        size_t k = utf8_seq(d + i, len - i);
        if (!k) return sdn_fail(err, SDN_EFORMAT, "%s: invalid UTF-8 at byte offset %zu (byte 0x%02X): save the file as UTF-8", name, i, d[i]);
        i += k;
    }
    char *o = malloc(len - skip + 1);
    if (!o) return sdn_fail(err, SDN_ENOMEM, "%s: out of memory", name);
    memcpy(o, d + skip, len - skip);
    o[len - skip] = 0;
    *out = o;
    *out_len = len - skip;
    return SDN_OK;
}

static int decode_utf16(const char *name, const unsigned char *d, size_t len, int big, char **out, size_t *out_len, sdn_err *err) {
    if (len % 2)
        return sdn_fail(err, SDN_EFORMAT, "%s: UTF-16 (byte-order mark) with an odd number of bytes: truncated at byte offset %zu", name,
                        len - 1);
    size_t cap;
    if (sdn_mul_overflow(len / 2, 3, &cap)) return sdn_fail(err, SDN_ENOMEM, "%s: too large", name);
    unsigned char *o = malloc(cap + 1);
    if (!o) return sdn_fail(err, SDN_ENOMEM, "%s: out of memory", name);
    size_t n = 0;
    for (size_t i = 2; i < len; i += 2) {
        uint32_t u = big ? (uint32_t)(d[i] << 8 | d[i + 1]) : (uint32_t)(d[i + 1] << 8 | d[i]);
        size_t at = i;
        if (u >= 0xD800 && u <= 0xDBFF) {
            uint32_t v = 0;
            if (i + 3 < len) v = big ? (uint32_t)(d[i + 2] << 8 | d[i + 3]) : (uint32_t)(d[i + 3] << 8 | d[i + 2]);
            if (v < 0xDC00 || v > 0xDFFF) {
                free(o);
                return sdn_fail(err, SDN_EFORMAT, "%s: UTF-16 high surrogate without its pair at byte offset %zu", name, at);
            }
            u = 0x10000 + ((u - 0xD800) << 10) + (v - 0xDC00);
            i += 2;
        } else if (u >= 0xDC00 && u <= 0xDFFF) {
            free(o);
            return sdn_fail(err, SDN_EFORMAT, "%s: UTF-16 low surrogate without its pair at byte offset %zu", name, at);
        } else if (u == 0) {
            free(o);
            return sdn_fail(err, SDN_EFORMAT, "%s: NUL character (U+0000) at byte offset %zu: not a text file", name, at);
        }
        n += put_utf8(o + n, u);
    }
    o[n] = 0;
    *out = (char *)o;
    *out_len = n;
    return SDN_OK;
}

int sdn_text_decode(const char *name, const unsigned char *d, size_t len, char **out, size_t *out_len, sdn_text_enc *enc, sdn_err *err) {
    *out = NULL;
    *out_len = 0;
    sdn_text_enc e = SDN_TEXT_UTF8;
    int rc;
    if (len >= 4 && ((d[0] == 0xFF && d[1] == 0xFE && d[2] == 0 && d[3] == 0) || (d[0] == 0 && d[1] == 0 && d[2] == 0xFE && d[3] == 0xFF)))
        return sdn_fail(err, SDN_EFORMAT, "%s: UTF-32 (byte-order mark at byte offset 0) is not supported: save the file as UTF-8", name);
    if (len >= 3 && d[0] == 0xEF && d[1] == 0xBB && d[2] == 0xBF) {
        e = SDN_TEXT_UTF8_BOM;
        rc = decode_utf8(name, d, len, 3, out, out_len, err);
    } else if (len >= 2 && d[0] == 0xFF && d[1] == 0xFE) {
        e = SDN_TEXT_UTF16LE;
        rc = decode_utf16(name, d, len, 0, out, out_len, err);
    } else if (len >= 2 && d[0] == 0xFE && d[1] == 0xFF) {
        e = SDN_TEXT_UTF16BE;
        rc = decode_utf16(name, d, len, 1, out, out_len, err);
    } else rc = decode_utf8(name, d, len, 0, out, out_len, err);
    if (!rc && enc) *enc = e;
    return rc;
}

int sdn_text_read_file(const char *path, size_t max_bytes, const char *why, char **out, size_t *out_len, sdn_text_enc *enc, sdn_err *err) {
    char *raw;
    size_t n;
    *out = NULL;
    *out_len = 0;
    int rc = sdn_read_file_max(path, max_bytes, why, &raw, &n, err);
    if (rc) return rc;
    rc = sdn_text_decode(path, (const unsigned char *)raw, n, out, out_len, enc, err);
    free(raw);
    return rc;
}
