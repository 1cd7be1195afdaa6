/* fuzz_grammar.c - libFuzzer target: grammar/'s two compilers and its matcher. The first byte
 * selects the compiler (even: GBNF, sdn_grammar_parse; odd: JSON schema,
 * sdn_grammar_from_schema); the text runs to the first NUL. When it compiles, the bytes after
 * the NUL (or, with none, the text itself) are fed to a state one at a time, with copies, the
 * forced text and the ending checked at each step. The promises: a refusal always carries a
 * message, nothing crashes, hangs or leaks; an accepted byte moves the state, a refused one
 * leaves it as it was; the forced text is accepted. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int mode = data[0] & 1;
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    const uint8_t *nul = memchr(text, 0, n);
    size_t tl = nul ? (size_t)(nul - (const uint8_t *)text) : n;
    const uint8_t *feed = nul ? nul + 1 : (const uint8_t *)text;
    size_t nf = nul ? n - tl - 1 : tl;
    if (nf > 512) nf = 512;
    sdn_grammar *g = NULL;
    sdn_err err = {0};
    int rc = mode ? sdn_grammar_from_schema(text, tl, &g, &err) : sdn_grammar_parse(text, tl, &g, &err);
    if (rc != SDN_OK) {
        if (!err.msg[0] || g) abort();
        return 0;
    }
    if (mode) { /* the GBNF text of a schema compiles the same way */
        char *gb = NULL;
        sdn_err e2 = {0};
        if (sdn_schema_to_gbnf(text, tl, &gb, &e2) != SDN_OK) abort();
        free(gb);
    }
    sdn_gstate *s = NULL, *c = NULL;
    if (sdn_gstate_new(g, &s, &err) != SDN_OK) {
        if (!err.msg[0]) abort();
        sdn_grammar_free(g);
        return 0;
    }
    if (sdn_gstate_new(g, &c, &err) != SDN_OK) abort();
    char forced[64];
    for (size_t i = 0; i < nf; i++) {
        int end = sdn_gstate_can_end(s);
        size_t fl = sdn_gstate_forced(s, forced, sizeof forced);
        if (fl > sizeof forced) abort();
        if (sdn_gstate_copy(c, s) != 0) break;
        if (fl) { /* the forced text is accepted by a copy */
            int r = sdn_gstate_accept_bytes(c, forced, fl);
            if (r == 0) abort();
            if (sdn_gstate_copy(c, s) != 0) break;
        }
        int r = sdn_gstate_accept_bytes(s, feed + i, 1);
        if (r == 0) {
            if (sdn_gstate_can_end(s) != end) abort();
            char f2[64];
            if (sdn_gstate_forced(s, f2, sizeof f2) != fl || memcmp(f2, forced, fl)) abort();
            /* a refused byte is also refused by the copy */
            if (sdn_gstate_accept_bytes(c, feed + i, 1) != 0) abort();
        } else if (r < 0) {
            break;
        } else if (fl && feed[i] != (uint8_t)forced[0]) {
            abort(); /* a byte other than the forced one was accepted */
        }
    }
    sdn_gstate_free(c);
    sdn_gstate_free(s);
    sdn_grammar_free(g);
    return 0;
}
