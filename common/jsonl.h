/* jsonl.h - internal helpers of datasets/ for JSON Lines files: reading a whole file and
 * walking it line by line with line numbers, parsing one line into a cJSON object, typed
 * field access whose errors name the file, the line and the field, and writing JSON
 * strings and numbers. Every reader in datasets/ (task rows, model answers, traces,
 * verify-cost profiles) goes through these so that error messages read the same:
 *     "tasks.jsonl:12: field 'prompt': expected a string" */
#ifndef SDN_DATASETS_JSONL_H
#define SDN_DATASETS_JSONL_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/sdn_err.h"

/* A JSONL source held in memory. `name` is used in messages (usually the path). */
typedef struct jl_reader {
    const char *name;
    char *data;
    size_t len, pos;
    int line;   /* line number of the line last returned by jl_next (1-based) */
    int owned;  /* data is malloc'd by jl_open */
} jl_reader;

/* Read `path` into memory. */
int jl_open(jl_reader *r, const char *path, sdn_err *err);
/* Walk an in-memory buffer (not copied, must outlive the reader). */
void jl_open_buf(jl_reader *r, const char *name, const char *data, size_t len);
void jl_close(jl_reader *r);
/* Next non-blank line (without its line terminator): 1 and the line, or 0 at the end. */
int jl_next(jl_reader *r, const char **line, size_t *len);
/* Limits of one line, checked before it is parsed: bytes, and JSON values (every number
 * of a token array is one: a trace row of a 400k-token context with 4 predictions per
 * position is about 3.6M values). The parser then holds at most ~64 bytes per value. */
#define JL_MAX_LINE_BYTES (64 << 20)
#define JL_MAX_LINE_VALUES (4 << 20)
/* Parse the line just returned into a JSON object (*out, free with cJSON_Delete). A parse
 * error, a value that is not an object, or a line over the limits above fails with
 * SDN_EFORMAT naming file and line; the limits are checked before anything is allocated. */
int jl_parse(const jl_reader *r, const char *line, size_t len, cJSON **out, sdn_err *err);

/* Field access. `required` = 0 accepts a missing field or null (then *out is untouched for
 * numbers, NULL for strings). A wrong type or range fails with SDN_EFORMAT. */
int jl_error(const jl_reader *r, const char *field, sdn_err *err, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int jl_str(const jl_reader *r, const cJSON *obj, const char *field, int required, const char **out, sdn_err *err);
int jl_int(const jl_reader *r, const cJSON *obj, const char *field, int required, long lo, long hi, long *out, sdn_err *err);
int jl_num(const jl_reader *r, const cJSON *obj, const char *field, int required, double lo, double hi, double *out, sdn_err *err);
/* An array of integers in [lo, hi] (*out malloc'd, *n its length; up to max_n elements).
 * Missing / null with required = 0 gives *out = NULL, *n = 0. */
int jl_int_array(const jl_reader *r, const cJSON *obj, const char *field, int required, long lo, long hi, int max_n, int32_t **out,
                 int *n, sdn_err *err);
/* An integer-valued JSON number in [lo, hi] (no fraction). */
int jl_is_int(const cJSON *v, long lo, long hi, long *out);

/* Write s as a JSON string (quoted, escaped; invalid UTF-8 bytes are written as U+FFFD). */
void jl_write_str(FILE *f, const char *s);

/* Hex digits of a 64-bit fingerprint ("%016llx") into buf[17]. */
void jl_hex64(uint64_t v, char buf[17]);

#endif
