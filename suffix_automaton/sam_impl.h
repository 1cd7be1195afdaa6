/* sam_impl.h - private layout of the suffix automaton and its inline lookups, shared by
 * sam.c (construction), sam_query.c (matching and queries) and sam_serialize.c (bytes).
 * Not part of the public API; see sam.h.
 *
 * Layout (flat arrays indexed by state id, cache-friendly, no pointers):
 *   hot[v]  = {len, link, firstpos, to0}: what construction and matching touch. firstpos
 *             is the earliest end position (exact, maintained online). Every state keeps
 *             its first transition inline: to0 holds its target (bits 0-29; 0 = no
 *             transition, since the root is never a target). Its token is not stored:
 *             the first transition a state receives is always the token that follows its
 *             earliest occurrence, tok[firstpos + 1] (the root's firstpos is stored as
 *             NONE so that firstpos + 1 wraps to position 0). The one exception, in
 *             automata of several sequences, is a state whose earliest occurrence ends a
 *             sequence; its first token is then kept in the edge table under the reserved
 *             special entry (below) and flag SAM_XTOK is set. Flag SAM_EXTRA says that
 *             further transitions live in the edge table, so a miss on a state with one
 *             transition costs no hashing.
 *   cold[v] = {cnt, lastpos}: occurrence count and most recent end position (exact for
 *             the positions already applied; see "pending" below). Allocated by the first
 *             count query (NULL before), with its own capacity.
 *   edge[]  = open-addressing hash table (linear probing, xxHash XXH3 of the 64-bit key
 *             (token << 32 | state), multiply-shift range reduction, load <= 0.8) holding
 *             the second and later transitions of each state. A state with such extra
 *             transitions or an explicit first token also owns one "special" entry, key
 *             (v, SAM_SPECIAL_KEY): its target is the explicit first token and its next
 *             field the first extra token; every extra entry's next field names the next
 *             extra token of the same state. Chains link tokens, not slots, so rehashing
 *             moves entries without any fix-up, and a state's out-tokens can be listed.
 *   root[]  = the root's transitions (one per distinct token, up to the vocabulary size):
 *             their own open-addressing table of {token, target} (8 bytes, XXH3 of the
 *             token), listed by scanning; once they cover a third of the token ids seen, an
 *             array indexed by token (rootdir, 4 bytes per id) instead, which is then no
 *             larger and needs no hashing. The root has no inline transition.
 *   tok[]   = the stored tokens; seq[] = {start, tag} per sequence.
 *   pending = positions added since the last refresh. Each has a "prefix state" (the
 *             state whose longest string is the whole sequence prefix ending there); every
 *             suffix-link ancestor of it gains the position in its end set. Usually the
 *             prefix state was created for the position and is recognized by its length
 *             (len == firstpos - sequence start + 1); the others are listed in xpend. */
#ifndef SDN_SAM_IMPL_H
#define SDN_SAM_IMPL_H

#include <stdint.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "suffix_automaton/sam.h"

#define SAM_EXTRA 0x80000000u       /* more transitions in the edge table */
#define SAM_XTOK 0x40000000u        /* inline token stored explicitly (edge table) */
#define SAM_TARGET_MASK 0x3fffffffu /* inline target; 0 = no transition */
#define SAM_MAX_STATES SAM_TARGET_MASK
#define SAM_SPECIAL_KEY ((int32_t)0x7fffffff) /* reserved token of the per-state special entry */
#define SAM_EDGE_EMPTY UINT64_MAX

typedef struct sam_hot {
    uint32_t len;      /* length of the longest string of the state */
    uint32_t link;     /* suffix link (SDN_SAM_NONE for the root) */
    uint32_t firstpos; /* earliest end position (root: SDN_SAM_NONE) */
    uint32_t to0;      /* inline target | SAM_EXTRA | SAM_XTOK */
} sam_hot;

typedef struct sam_cold {
    uint32_t cnt;     /* number of applied end positions */
    uint32_t lastpos; /* most recent end position among applied positions */
} sam_cold;

typedef struct sam_edge {
    uint64_t key;    /* (uint32 token << 32) | state; SAM_EDGE_EMPTY = free slot */
    uint32_t target; /* target state (special entry: explicit first token) */
    uint32_t next;   /* next extra token of the same state, or SDN_SAM_NONE */
} sam_edge;

typedef struct sam_rootent {
    int32_t token; /* -1 = free slot */
    uint32_t target;
} sam_rootent;

typedef struct sam_seq {
    uint32_t start; /* global position of the first token */
    uint32_t tag;
} sam_seq;

struct sdn_sam {
    sam_hot *hot;
    sam_cold *cold; /* NULL until the first count query */
    uint32_t n_states, cap_states, cap_cold;

    sam_edge *edge;
    uint32_t cap_edges; /* table slots */
    uint32_t n_edges;   /* used slots (extra transitions and special entries) */
    uint32_t grow_at;   /* rehash when n_edges would exceed this */

    sam_rootent *root; /* hash table while the root's tokens are sparse ... */
    uint32_t cap_root, n_root, root_grow_at;
    uint32_t *rootdir; /* ... array indexed by token once dense (root == NULL then) */
    uint32_t cap_rootdir;
    int32_t root_max_tok;

    int32_t *tok;
    uint32_t n_tok, cap_tok;

    sam_seq *seq;
    uint32_t n_seq, cap_seq;
    int seq_open; /* tokens go to seq[n_seq-1] */

    uint32_t last;    /* prefix state of the current sequence's last token (root if none) */
    uint32_t max_len; /* longest state length (bound for the counting sort) */

    uint32_t mat_tok;   /* positions below this are applied to cnt / lastpos */
    uint32_t mat_state; /* states below this existed at the last refresh */
    uint32_t *xpend;    /* (position, prefix state) pairs of pending positions that created
                           no state (several-sequence automata only) */
    uint32_t n_xpend, cap_xpend;

    int broken; /* an allocation failed mid-extension */
};

/* ---- lookups (inline: the hot path of construction and matching) ---------------------- */

static inline uint64_t sam_edge_key(uint32_t state, int32_t token) {
    return ((uint64_t)(uint32_t)token << 32) | state;
}

/* Home slot of a 64-bit key in a table of `cap` slots: XXH3, multiply-shift reduction. */
static inline uint32_t sam_edge_home(uint64_t key, uint32_t cap) {
    uint64_t h = XXH3_64bits(&key, sizeof key);
    return (uint32_t)(((h >> 32) * (uint64_t)cap) >> 32);
}

/* Slot of (state, token) in the edge table, or SDN_SAM_NONE. */
static inline uint32_t sam_edge_slot_find(const sdn_sam *s, uint32_t state, int32_t token) {
    uint32_t cap = s->cap_edges;
    if (!cap) return SDN_SAM_NONE;
    uint64_t key = sam_edge_key(state, token);
    const sam_edge *e = s->edge;
    for (uint32_t i = sam_edge_home(key, cap);;) {
        if (e[i].key == key) return i;
        if (e[i].key == SAM_EDGE_EMPTY) return SDN_SAM_NONE;
        if (++i == cap) i = 0;
    }
}

static inline uint32_t sam_root_home(int32_t c, uint32_t cap) {
    uint64_t h = XXH3_64bits(&c, sizeof c);
    return (uint32_t)(((h >> 32) * (uint64_t)cap) >> 32);
}

/* Slot of token c in the root's hash table, or SDN_SAM_NONE. */
static inline uint32_t sam_root_slot(const sdn_sam *s, int32_t c) {
    uint32_t cap = s->cap_root;
    if (!cap) return SDN_SAM_NONE;
    for (uint32_t i = sam_root_home(c, cap);;) {
        if (s->root[i].token == c) return i;
        if (s->root[i].token < 0) return SDN_SAM_NONE;
        if (++i == cap) i = 0;
    }
}

/* Target of root --c-->, or SDN_SAM_NONE. */
static inline uint32_t sam_root_get(const sdn_sam *s, int32_t c) {
    if (s->rootdir) return (uint32_t)c < s->cap_rootdir && s->rootdir[c] ? s->rootdir[c] : SDN_SAM_NONE;
    uint32_t i = sam_root_slot(s, c);
    return i == SDN_SAM_NONE ? SDN_SAM_NONE : s->root[i].target;
}

/* Token of v's inline transition, -1 if v has none (not for the root). */
static inline int32_t sam_tok0(const sdn_sam *s, uint32_t v) {
    const sam_hot *h = &s->hot[v];
    if (!(h->to0 & SAM_TARGET_MASK)) return -1;
    if (h->to0 & SAM_XTOK) return (int32_t)s->edge[sam_edge_slot_find(s, v, SAM_SPECIAL_KEY)].target;
    return s->tok[h->firstpos + 1];
}

/* Target of v --c-->, or SDN_SAM_NONE. */
static inline uint32_t sam_get(const sdn_sam *s, uint32_t v, int32_t c) {
    if (v == 0) return sam_root_get(s, c);
    const sam_hot *h = &s->hot[v];
    uint32_t x = h->to0;
    if (!(x & SAM_TARGET_MASK)) return SDN_SAM_NONE;
    int32_t t0 = (x & SAM_XTOK) ? sam_tok0(s, v) : s->tok[h->firstpos + 1];
    if (t0 == c) return x & SAM_TARGET_MASK;
    if (!(x & SAM_EXTRA)) return SDN_SAM_NONE;
    uint32_t i = sam_edge_slot_find(s, v, c);
    return i == SDN_SAM_NONE ? SDN_SAM_NONE : s->edge[i].target;
}

/* ---- shared helpers (sam.c) -------------------------------------------------------------- */

int sam_edge_reserve(sdn_sam *s, uint32_t more, sdn_err *err);
/* Add extra transition v --c--> t (absent; 2 slots reserved) to v's chain. */
void sam_edge_add_extra(sdn_sam *s, uint32_t v, int32_t c, uint32_t t);
/* Give v an explicit first token (1 slot reserved; v has no special entry yet). */
void sam_edge_set_xtok(sdn_sam *s, uint32_t v, int32_t c);
/* Add the absent root transition on token c. */
int sam_root_add(sdn_sam *s, int32_t c, uint32_t t, sdn_err *err);
/* Iterate over all transitions of v (any order): init, then next() until it returns 0. */
typedef struct sam_iter {
    uint32_t v, phase, slot;
} sam_iter;
void sam_iter_init(const sdn_sam *s, sam_iter *it, uint32_t v);
int sam_iter_next(const sdn_sam *s, sam_iter *it, int32_t *token, uint32_t *target);
/* Number of extra transitions of v. */
uint32_t sam_n_extra(const sdn_sam *s, uint32_t v);

#endif
