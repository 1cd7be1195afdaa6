/* cli_tokenize.c - the work of `sdnpu tokenize` (see tools.h): the tokenizer section of a
 * GGUF (vocabulary-only files work) or a llama2.c tokenizer.bin, the text split into ids and
 * pieces, or encoding and decoding timed (median of repeated runs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tools.h"
#include "common/sdn_util.h"
#include "modelfile/gguf.h"
#include "modelfile/model_registry.h"
#include "tokenizer/tokenizer.h"

/* The bytes of a piece, readable: \n \t \r \\ \' escaped, other control bytes and bytes that
 * are not part of a complete UTF-8 character as \xNN. */
static void print_escaped(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c == '\\') fputs("\\\\", stdout);
        else if (c == '\'') fputs("\\'", stdout);
        else if (c >= 0x20 && c < 0x7F) putchar(c);
        else if (c >= 0xC2 && c <= 0xF4) {
            size_t l = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4, k = 1;
            while (k < l && i + k < n && (u[i + k] & 0xC0) == 0x80) k++;
            if (k == l) {
                fwrite(s + i, 1, l, stdout);
                i += l;
                continue;
            }
            printf("\\x%02X", c);
        } else {
            printf("\\x%02X", c);
        }
        i++;
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int bench(const sdn_tokenizer *t, const char *text, size_t len, int add_bos, int special) {
    sdn_err err = {0};
    double enc[64], dec[64];
    int runs = 0, n = 0;
    double start = sdn_now();
    while (runs < 64 && (runs < 5 || sdn_now() - start < 1.0)) {
        int32_t *ids;
        double t0 = sdn_now();
        if (sdn_tokenize(t, text, len, add_bos, special, &ids, &n, &err)) {
            fprintf(stderr, "sdnpu: %s\n", err.msg);
            return 1;
        }
        double t1 = sdn_now();
        char *out;
        if (sdn_detokenize(t, ids, n, &out, &err)) {
            fprintf(stderr, "sdnpu: %s\n", err.msg);
            free(ids);
            return 1;
        }
        double t2 = sdn_now();
        free(out);
        free(ids);
        enc[runs] = t1 - t0;
        dec[runs] = t2 - t1;
        runs++;
    }
    qsort(enc, (size_t)runs, sizeof *enc, cmp_double);
    qsort(dec, (size_t)runs, sizeof *dec, cmp_double);
    double me = enc[runs / 2], md = dec[runs / 2];
    printf("tokenize: %zu bytes -> %d tokens; encode median %.3f ms (%.0f tokens/s, %.1f MB/s), decode median %.3f ms (%.0f tokens/s); %d runs\n",
           len, n, me * 1e3, n / me, len / me / 1e6, md * 1e3, n / md, runs);
    return 0;
}

int sdn_tool_tokenize(const sdn_tool_tokenize_opts *o) {
    const char *text = o->text;
    sdn_err err = {0};
    char *buf = NULL;
    size_t len;
    if (o->file) {
        if (sdn_read_file(o->file, &buf, &len, &err)) {
            fprintf(stderr, "sdnpu tokenize: option --file: %s\n", err.msg);
            return 1;
        }
        text = buf;
    } else {
        len = strlen(text);
    }
    sdn_gguf *g = NULL;
    sdn_tokenizer *t = NULL;
    int rc;
    if (o->tokenizer) {
        rc = sdn_tokenizer_from_llama2c(o->tokenizer, 0, &t, &err);
        if (rc) fprintf(stderr, "sdnpu tokenize: option --tokenizer: %s\n", err.msg);
    } else {
        char resolved[1300];
        rc = sdn_model_resolve(o->model, resolved, sizeof resolved, &err);
        if (!rc) rc = sdn_gguf_open(resolved, &g, &err);
        if (!rc) rc = sdn_tokenizer_from_gguf(g, &t, &err);
        if (rc)
            fprintf(stderr, "sdnpu tokenize: option --model: %s%s\n", err.msg,
                    strstr(err.msg, "magic") ? " (for a llama2.c checkpoint give its tokenizer.bin with --tokenizer)" : "");
    }
    if (rc) {
        sdn_gguf_close(g);
        free(buf);
        return 1;
    }
    int add_bos = o->no_bos ? 0 : sdn_tokenizer_add_bos(t);
    if (o->bench) {
        rc = bench(t, text, len, add_bos, o->special);
    } else {
        int32_t *ids;
        int n;
        rc = sdn_tokenize(t, text, len, add_bos, o->special, &ids, &n, &err);
        if (!rc && add_bos && n >= 2 && ids[1] == ids[0])
            fprintf(stderr, "sdnpu tokenize: note: the text starts with the BOS token and BOS was added too (--no-bos avoids the double BOS)\n");
        if (rc) {
            fprintf(stderr, "sdnpu tokenize: %s\n", err.msg);
        } else if (o->ids_only) {
            for (int i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
            printf("\n");
        } else {
            char small[256];
            for (int i = 0; i < n; i++) {
                size_t l = sdn_tokenizer_token_bytes(t, ids[i], small, sizeof small);
                char *p = small;
                if (l > sizeof small) {
                    p = malloc(l);
                    if (p) sdn_tokenizer_token_bytes(t, ids[i], p, l);
                }
                printf("%d\t'", ids[i]);
                if (p) print_escaped(p, l);
                printf("'\n");
                if (p != small) free(p);
            }
        }
        if (!rc) free(ids);
    }
    sdn_tokenizer_free(t);
    sdn_gguf_close(g);
    free(buf);
    return rc ? 1 : 0;
}
