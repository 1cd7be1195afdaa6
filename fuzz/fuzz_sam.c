/* fuzz_sam.c - libFuzzer target: the input is a serialized suffix automaton (the history
 * cache's blob). When it loads, it is queried along its own stored tokens and a few
 * others (matches, occurrences, continuations, next tokens), extended, and serialized
 * again. The format's promise: crafted bytes may give wrong answers, never a crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "suffix_automaton/sam.h"

static void run(const uint8_t *data, size_t size);

/* Each input twice: as it is (the checksums then reject almost every mutation), and with
 * its payload and header XXH64 recomputed (offsets 48 and 56 of the documented header),
 * so that the structural checks behind the checksums see crafted bytes too. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    run(data, size);
    if (size >= 64) {
        uint8_t *c = malloc(size);
        if (!c) return 0;
        memcpy(c, data, size);
        uint64_t p = XXH64(c + 64, size - 64, 0);
        for (int i = 0; i < 8; i++) c[48 + i] = (uint8_t)(p >> (8 * i));
        uint64_t h = XXH64(c, 56, 0);
        for (int i = 0; i < 8; i++) c[56 + i] = (uint8_t)(h >> (8 * i));
        run(c, size);
        free(c);
    }
    return 0;
}

static void run(const uint8_t *data, size_t size) {
    sdn_sam *s = NULL;
    sdn_err err = {0};
    if (sdn_sam_deserialize(data, size, &s, &err) != SDN_OK) {
        if (!err.msg[0]) abort();
        return;
    }
    size_t n = sdn_sam_n_tokens(s);
    const int32_t *tok = sdn_sam_tokens(s);
    sdn_sam_match m = sdn_sam_match_root();
    int32_t out[16];
    for (size_t i = 0; i < n && i < 4096; i++) {
        int32_t q = (i % 7 == 3) ? (int32_t)(i * 2654435761u % 1000) : tok[i];
        sdn_sam_match_advance(s, &m, q);
        sdn_sam_occ occ;
        sdn_sam_occurrences(s, &m, &occ);
        (void)sdn_sam_first_end(s, &m);
        (void)sdn_sam_continuation(s, &m, (int)(i % 2), out, 16);
        if (occ.first_end != SDN_SAM_NONE) {
            (void)sdn_sam_read_after(s, occ.first_end, out, 16);
            (void)sdn_sam_avail_after(s, occ.first_end);
        }
        if (i % 5 == 0) {
            sdn_sam_next nx[4];
            uint64_t total;
            (void)sdn_sam_next_tokens(s, &m, 4, nx, &total, NULL);
            sdn_sam_match c = m;
            if (sdn_sam_match_child(s, &m, tok[i], &c)) (void)sdn_sam_first_end(s, &c);
            sdn_sam_match p = m;
            (void)sdn_sam_match_parent(s, &p);
        }
    }
    for (size_t i = 0; i < sdn_sam_n_seqs(s) && i < 64; i++) {
        uint32_t st, len, tag;
        if (sdn_sam_seq_info(s, i, &st, &len, &tag) == SDN_OK) (void)sdn_sam_seq_of(s, st);
    }
    /* extend (a loaded automaton can grow) and serialize again */
    int32_t more[3] = {1, 2, 1};
    if (sdn_sam_extend_n(s, more, 3, NULL) == SDN_OK) {
        uint8_t *b = NULL;
        size_t len = 0;
        if (sdn_sam_serialize(s, &b, &len, NULL) == SDN_OK) free(b);
    }
    sdn_sam_free(s);
}
