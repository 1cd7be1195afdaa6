/* json_scan.c - a request body scanned once before cJSON parses it (json_scan.h).
 *
 * The scan follows JSON's punctuation only: brackets open and close frames (an object frame
 * remembers its current key, an array frame its index), a string is skipped with its escapes,
 * a run of number or literal characters is one value. It allocates nothing and keeps at most
 * max_depth frames, so a hostile body costs one linear pass; cJSON still decides whether the
 * body is valid JSON. */
#include "server/json_scan.h"

#include <stdio.h>
#include <string.h>

#define SCAN_DEPTH_MAX 256

typedef struct frame {
    char obj, expect_key; /* an object (waiting for a key), or an array */
    int index;            /* array: the current element */
    char key[48];         /* object: the current member's key (cut) */
} frame;

/* The path of the value the frames st[0..d) lead to: "messages[2].content". */
static void path_of(const frame *st, int d, char *out, size_t cap) {
    size_t n = 0;
    out[0] = 0;
    for (int k = 0; k < d && n + 1 < cap; k++) {
        int w = st[k].obj ? snprintf(out + n, cap - n, "%s%s", n ? "." : "", st[k].key) : snprintf(out + n, cap - n, "[%d]", st[k].index);
        if (w < 0) break;
        n += (size_t)w;
        if (n >= cap) n = cap - 1;
    }
}

static int is_scalar_char(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '+' || c == '-' || c == '.';
}

int srv_json_scan_body(const char *body, size_t len, size_t max_values, int max_depth, srv_json_scan *s) {
    memset(s, 0, sizeof *s);
    frame st[SCAN_DEPTH_MAX];
    if (max_depth > SCAN_DEPTH_MAX) max_depth = SCAN_DEPTH_MAX;
    const unsigned char *b = (const unsigned char *)body;
    int d = 0;
    for (size_t i = 0; i < len;) {
        unsigned char c = b[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            i++;
            continue;
        }
        if (c == '}' || c == ']') {
            if (d > 0) d--;
            i++;
            continue;
        }
        if (c == ',') {
            if (d > 0) {
                if (st[d - 1].obj) st[d - 1].expect_key = 1;
                else st[d - 1].index++;
            }
            i++;
            continue;
        }
        if (c == ':') {
            if (d > 0 && st[d - 1].obj) st[d - 1].expect_key = 0;
            i++;
            continue;
        }
        int is_key = c == '"' && d > 0 && st[d - 1].obj && st[d - 1].expect_key;
        if (!is_key && ++s->values > max_values) {
            s->stopped = 1;
            return -1;
        }
        if (c == '{' || c == '[') {
            if (d >= max_depth) {
                s->depth = d + 1;
                s->stopped = 1;
                return -1;
            }
            st[d].obj = c == '{';
            st[d].expect_key = c == '{';
            st[d].index = 0;
            st[d].key[0] = 0;
            if (++d > s->depth) s->depth = d;
            i++;
            continue;
        }
        if (c == '"') {
            size_t j = i + 1;
            int bad = 0;
            unsigned char bad_byte = 0;
            while (j < len && b[j] != '"') {
                if (b[j] == '\\') {
                    if (!bad && j + 5 < len && b[j + 1] == 'u' && b[j + 2] == '0' && b[j + 3] == '0' && b[j + 4] == '0' && b[j + 5] == '0')
                        bad = 1;
                    j += 2;
                    continue;
                }
                if (!bad && b[j] < 0x20) bad = 2, bad_byte = b[j];
                j++;
            }
            size_t end = j < len ? j : len;
            if (is_key) {
                size_t kn = end - (i + 1);
                if (kn > sizeof st[d - 1].key - 1) kn = sizeof st[d - 1].key - 1;
                memcpy(st[d - 1].key, body + i + 1, kn);
                st[d - 1].key[kn] = 0;
                s->keys++;
            }
            if (bad && !s->bad_string) {
                s->bad_string = bad;
                s->bad_byte = bad_byte;
                s->bad_in_key = is_key;
                path_of(st, is_key ? d - 1 : d, s->bad_path, sizeof s->bad_path);
            }
            i = end + 1;
            continue;
        }
        /* a number, a literal, or a stray byte (cJSON refuses the latter) */
        size_t j = i;
        while (j < len && is_scalar_char(b[j])) j++;
        i = j > i ? j : i + 1;
    }
    return 0;
}

size_t srv_json_tree_bytes(const srv_json_scan *s, size_t len) {
    /* cJSON 1.7: a node is 64 bytes (80 with malloc's header and rounding); a string of n
     * bytes takes at most n + 2 rounded up to 16 with the header, 32 at least. cJSON allocates
     * a value's node before it parses the value, so a body that turns out malformed may have
     * one node more than the scan counted on each open level (found by fuzz_server_request:
     * "," allocated the root node) */
    return len + 128 * s->values + 64 * s->keys + 128 * ((size_t)s->depth + 1);
}
