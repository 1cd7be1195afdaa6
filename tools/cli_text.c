/* cli_text.c - the text files and standard input of `sdnpu run`, `chat` and `demo` (see
 * tools.h): grammar and JSON-schema files, --context documents and --prompt-file decoded from
 * their encoding (common/text_decode.h), and --prompt - from standard input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tools.h"
#include "common/text_decode.h"

int sdn_tool_read_constraint(const char *cmd, const char *grammar_file, const char *json_schema_file, char **grammar, char **json_schema) {
    *grammar = *json_schema = NULL;
    if (grammar_file && json_schema_file) {
        fprintf(stderr, "sdnpu %s: options --grammar %s and --json-schema %s exclude each other: an answer takes one constraint\n", cmd,
                grammar_file, json_schema_file);
        return 2;
    }
    const char *opt = grammar_file ? "--grammar" : "--json-schema", *path = grammar_file ? grammar_file : json_schema_file;
    if (!path) return 0;
    char *text = NULL;
    size_t len = 0;
    sdn_err e = {0};
    if (sdn_text_read_file(path, (size_t)1 << 20, "a grammar or schema file is 1 MiB at most", &text, &len, NULL, &e)) {
        fprintf(stderr, "sdnpu %s: option %s: %s\n", cmd, opt, e.msg);
        return 2;
    }
    if (!len) {
        fprintf(stderr, "sdnpu %s: option %s: %s is empty\n", cmd, opt, path);
        free(text);
        return 2;
    }
    *(grammar_file ? grammar : json_schema) = text;
    return 0;
}

int sdn_tool_read_context(const char *path, size_t cap, const char *why, int quiet, char **doc) {
    size_t len;
    sdn_err err = {0};
    sdn_text_enc enc;
    if (sdn_text_read_file(path, 2 * cap + 4, why, doc, &len, &enc, &err)) {
        fprintf(stderr, "sdnpu: option --context: %s\n", err.msg);
        return -1;
    }
    if (len > cap) {
        fprintf(stderr, "sdnpu: option --context: %s: %zu bytes of text once decoded from %s, longer than the limit of %zu bytes: %s\n", path,
                len, sdn_text_enc_name(enc), cap, why);
        return -1;
    }
    if (enc != SDN_TEXT_UTF8 && !quiet) fprintf(stderr, "sdnpu: --context %s: decoded from %s\n", path, sdn_text_enc_name(enc));
    return 0;
}

int sdn_tool_read_prompt_file(const char *path, char **text) {
    size_t len;
    sdn_err e = {0};
    if (sdn_text_read_file(path, (size_t)1 << 30, NULL, text, &len, NULL, &e)) {
        fprintf(stderr, "sdnpu: option --prompt-file: %s\n", e.msg);
        return 1;
    }
    return 0;
}

int sdn_tool_read_stdin_text(char **out) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) return -1;
    for (;;) {
        if (n == cap) {
            char *nb = cap < ((size_t)1 << 30) ? realloc(buf, cap *= 2) : NULL;
            if (!nb) { free(buf); fprintf(stderr, "sdnpu: option --prompt -: standard input too large\n"); return -1; }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, stdin);
        if (!got) break;
        n += got;
    }
    sdn_err err = {0};
    size_t len;
    int rc = sdn_text_decode("standard input", (const unsigned char *)buf, n, out, &len, NULL, &err);
    free(buf);
    if (rc) fprintf(stderr, "sdnpu: option --prompt -: %s\n", err.msg);
    return rc ? -1 : 0;
}
