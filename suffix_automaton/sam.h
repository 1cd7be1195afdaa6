/* sam.h - token-level generalized suffix automaton (Blumer et al. 1985/1987): an online
 * index of one or more token sequences that answers, for any token string w, "does w occur,
 * how often, where first and where last, and what follows it", and matches a growing query
 * incrementally (the longest suffix of the query that occurs in the indexed sequences).
 *
 * Tokens are int32_t in [0, SDN_SAM_MAX_TOKEN] and opaque to the automaton. Every appended token belongs to a
 * sequence (a source: the context, the output so far, one earlier answer, ...) that carries
 * a caller-chosen 32-bit tag; matches never run across a sequence boundary. Positions are
 * global: token p of the concatenation of all sequences in the order they were added
 * (sdn_sam_tokens(s)[p]). An occurrence of w "ends" at the position of its last token.
 *
 * Costs: extension amortized O(1) per token; advancing a match amortized O(1) per token;
 * continuation O(n) for n tokens; next-token query O(out-degree of the state). Occurrence
 * counts and most-recent positions are maintained lazily: the first query that needs them
 * allocates them (8 bytes per state; automata that are only matched and read from their
 * earliest occurrences never pay for them) and later ones first apply the positions added
 * since the previous such query (see sdn_sam_refresh), so functions taking a non-const
 * sdn_sam * may update internal caches. No function is safe
 * to call concurrently with another on the same automaton unless both take const.
 *
 * See docs/drafting.md for the data layout, memory use and the serialized format. */
#ifndef SDN_SAM_H
#define SDN_SAM_H

#include <stddef.h>
#include <stdint.h>

#include "common/sdn_err.h"

/* Largest number of tokens one automaton holds (state ids must stay below 2^30). */
#define SDN_SAM_MAX_TOKENS ((1u << 29) - 1u)
/* Largest token value (INT32_MAX is reserved internally). */
#define SDN_SAM_MAX_TOKEN (INT32_MAX - 1)
/* "No position / no state". */
#define SDN_SAM_NONE UINT32_MAX

typedef struct sdn_sam sdn_sam;

/* A match: the automaton state holding the matched string and the string's length. The
 * root (state 0, len 0) is the empty match. Plain value; copy freely. A match stays valid
 * while the automaton grows (functions re-normalize it); it belongs to one automaton. */
typedef struct sdn_sam_match {
    uint32_t state;
    uint32_t len;
} sdn_sam_match;

/* Where a matched string occurs. */
typedef struct sdn_sam_occ {
    uint32_t count;     /* number of occurrences (for the empty match: number of tokens) */
    uint32_t first_end; /* end position of the earliest occurrence (NONE for the empty match) */
    uint32_t last_end;  /* end position of the most recent occurrence (NONE for empty) */
} sdn_sam_occ;

/* One distinct next token after a matched string. */
typedef struct sdn_sam_next {
    int32_t token;
    uint32_t count;      /* occurrences of (matched string, token) */
    sdn_sam_match child; /* the match extended by `token` */
} sdn_sam_next;

/* Which occurrence a continuation is read from. */
enum { SDN_SAM_EARLIEST = 0, SDN_SAM_LATEST = 1 };

/* ---- life cycle -------------------------------------------------------------------- */

/* Create an empty automaton (only the root). */
int sdn_sam_create(sdn_sam **out, sdn_err *err);
/* Free an automaton (NULL is fine). */
void sdn_sam_free(sdn_sam *s);
/* Pre-allocate room for `n_tokens` more tokens (states, transitions, token store), so that
 * building a known-size index does not re-allocate. Optional. */
int sdn_sam_reserve(sdn_sam *s, size_t n_tokens, sdn_err *err);
/* Release spare capacity (for an automaton that will no longer grow). */
int sdn_sam_shrink(sdn_sam *s, sdn_err *err);

/* ---- building ---------------------------------------------------------------------- */

/* Start a new sequence with the given tag; later tokens go to it. Matches never cross from
 * one sequence into another. Returns the sequence index through *seq_index if not NULL. */
int sdn_sam_begin_seq(sdn_sam *s, uint32_t tag, uint32_t *seq_index, sdn_err *err);
/* Append one token (0..SDN_SAM_MAX_TOKEN) to the current sequence (a sequence with tag 0 is begun
 * implicitly when none is open). Amortized O(1). After SDN_ENOMEM the automaton is
 * unusable (every later call returns SDN_ESTATE) and must be freed. */
int sdn_sam_extend(sdn_sam *s, int32_t token, sdn_err *err);
/* Append n tokens to the current sequence. */
int sdn_sam_extend_n(sdn_sam *s, const int32_t *tokens, size_t n, sdn_err *err);
/* begin_seq(tag) followed by extend_n(tokens, n). */
int sdn_sam_add_seq(sdn_sam *s, uint32_t tag, const int32_t *tokens, size_t n, sdn_err *err);

/* ---- sizes and stored tokens --------------------------------------------------------- */

size_t sdn_sam_n_tokens(const sdn_sam *s);
size_t sdn_sam_n_states(const sdn_sam *s);
/* Number of transitions (edges) of the automaton. */
size_t sdn_sam_n_transitions(const sdn_sam *s);
size_t sdn_sam_n_seqs(const sdn_sam *s);
/* The stored tokens, all sequences concatenated (valid until the next extension). */
const int32_t *sdn_sam_tokens(const sdn_sam *s);
/* Sequence `i`: its first global position, length and tag. Returns SDN_EINVAL if i is
 * out of range. */
int sdn_sam_seq_info(const sdn_sam *s, size_t i, uint32_t *start, uint32_t *len, uint32_t *tag);
/* Index of the sequence holding global position `pos` (SDN_SAM_NONE if out of range). */
uint32_t sdn_sam_seq_of(const sdn_sam *s, uint32_t pos);
/* Bytes currently allocated by the automaton (capacity, not just use). */
size_t sdn_sam_memory(const sdn_sam *s);

/* ---- matching ---------------------------------------------------------------------- */

/* The empty match. */
static inline sdn_sam_match sdn_sam_match_root(void) {
    sdn_sam_match m = {0, 0};
    return m;
}
/* Advance `m` by one query token: afterwards m is the longest suffix of (old match string,
 * token) that occurs in the indexed sequences; returns its length. Amortized O(1): a
 * query of q tokens costs O(q) in total. A negative token resets to the empty match. */
uint32_t sdn_sam_match_advance(const sdn_sam *s, sdn_sam_match *m, int32_t token);
/* Extend `m` by exactly `token` without dropping any prefix: returns 1 and sets *out if
 * (match string, token) occurs, else returns 0. */
int sdn_sam_match_child(const sdn_sam *s, const sdn_sam_match *m, int32_t token, sdn_sam_match *out);
/* Shorten `m` to the longest proper suffix of its string that occurs in more places (the
 * suffix-link parent); returns 0 (and leaves m empty) when m was already the empty match. */
int sdn_sam_match_parent(const sdn_sam *s, sdn_sam_match *m);
/* Bring `m` up to date after the automaton grew (the functions above do this on their
 * own; exposed for callers that read m.state directly). */
void sdn_sam_match_normalize(const sdn_sam *s, sdn_sam_match *m);

/* ---- queries ----------------------------------------------------------------------- */

/* Earliest end position of the matched string (no cache update needed; SDN_SAM_NONE for
 * the empty match). */
uint32_t sdn_sam_first_end(const sdn_sam *s, const sdn_sam_match *m);
/* Occurrence count and earliest / most recent end positions of the matched string. */
void sdn_sam_occurrences(sdn_sam *s, const sdn_sam_match *m, sdn_sam_occ *out);
/* The tokens that follow one occurrence of the matched string (its earliest or most
 * recent one), up to `max_n` of them and never past the end of that occurrence's sequence.
 * Returns the number written (0 for the empty match). */
int sdn_sam_continuation(sdn_sam *s, const sdn_sam_match *m, int which, int32_t *out, int max_n);
/* Tokens after global position `end_pos` within its sequence, up to max_n. */
int sdn_sam_read_after(const sdn_sam *s, uint32_t end_pos, int32_t *out, int max_n);
/* Number of tokens after global position `end_pos` within its sequence. */
uint32_t sdn_sam_avail_after(const sdn_sam *s, uint32_t end_pos);
/* The k most frequent distinct next tokens after the matched string (count descending,
 * then token ascending), with counts and child matches. *total (if not NULL) receives the
 * sum of the counts of all distinct next tokens (= occurrences that have a next token in
 * their sequence) and *n_distinct (if not NULL) their number. Returns the number written
 * (<= k). O(d log k)-ish for a state with d distinct next tokens. */
int sdn_sam_next_tokens(sdn_sam *s, const sdn_sam_match *m, int k, sdn_sam_next *out, uint64_t *total,
                        uint32_t *n_distinct);
/* Apply pending positions to occurrence counts and most-recent positions now (the first
 * call allocates them and fills them in one pass over the states). Cost: O(sum of
 * suffix-link depths of the new positions), at most O(states). After it, and until the
 * next extension, the count queries above only read the automaton. If memory for the
 * counts cannot be allocated, count queries report 0 occurrences. */
void sdn_sam_refresh(sdn_sam *s);

/* ---- serialization ----------------------------------------------------------------- */

/* Serialize to a malloc'd little-endian byte buffer (*out, *len; free with free()). The
 * format is canonical: equal automata give equal bytes. */
int sdn_sam_serialize(sdn_sam *s, uint8_t **out, size_t *len, sdn_err *err);
/* Load an automaton from bytes produced by sdn_sam_serialize. The bytes are untrusted:
 * sizes, checksum, every state id, link, length, position and count are checked; any
 * inconsistency gives SDN_EFORMAT with a message naming the field (SDN_EUNSUP for a
 * newer format version). The loaded automaton can be queried and extended. */
int sdn_sam_deserialize(const uint8_t *buf, size_t len, sdn_sam **out, sdn_err *err);
/* The same with a size limit: bytes that declare more than max_tokens tokens (and so up to
 * 2 * max_tokens + 1 states) are refused with SDN_EFORMAT before anything is allocated. */
int sdn_sam_deserialize_max(const uint8_t *buf, size_t len, uint32_t max_tokens, sdn_sam **out, sdn_err *err);

#endif
