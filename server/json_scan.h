/* json_scan.h - one pass over a request body before it is parsed: how many JSON values it
 * holds and how deep they nest (which bounds the memory cJSON's tree of it takes), and the
 * first string that a parse would change without a word: an escaped \u0000 (cJSON's strings
 * end at it) or a raw control character (JSON requires them escaped), with its path
 * ("messages[2].content") for the error's `param`. */
#ifndef SDN_SERVER_JSON_SCAN_H
#define SDN_SERVER_JSON_SCAN_H

#include <stddef.h>

typedef struct srv_json_scan {
    size_t values;       /* objects, arrays, strings, numbers and literals (keys not counted) */
    size_t keys;         /* object members */
    int depth;           /* the deepest nesting seen (0: a scalar at the top) */
    int stopped;         /* 1: the scan stopped at max_values or max_depth; the counts are partial */
    int bad_string;      /* 0 none; 1 a \u0000 escape; 2 a raw control character (byte bad_byte) */
    unsigned char bad_byte;
    int bad_in_key;      /* the bad string is an object key (the path names its object) */
    char bad_path[128];  /* where the bad string is ("" at the top level) */
} srv_json_scan;

/* Scan body[0..len). Stops (s->stopped = 1) once values exceed max_values or nesting exceeds
 * max_depth. Malformed JSON is scanned without harm (its counts are then rough; cJSON refuses
 * it afterwards). Returns 0, or -1 when it stopped. */
int srv_json_scan_body(const char *body, size_t len, size_t max_values, int max_depth, srv_json_scan *s);

/* An upper bound of the bytes cJSON allocates while it parses a scanned body of len bytes,
 * whether or not the body is valid JSON: a 64-byte node per value (and one per open level of a
 * malformed body), a string per value and key (their text is at most the body's), each with
 * the allocator's overhead. */
size_t srv_json_tree_bytes(const srv_json_scan *s, size_t len);

#endif
