/* sam.c - token-level generalized suffix automaton: the transition tables and online
 * construction (matching, counts and queries are in sam_query.c, bytes in
 * sam_serialize.c).
 *
 * The automaton of a set of sequences has one state per class of substrings that end at
 * the same set of positions ("endpos" classes); the suffix link of a state points to the
 * state of its longest suffix that has a larger end set, so the links form a tree in which
 * end sets nest. Construction follows Blumer, Blumer, Haussler, Ehrenfeucht, Chen and
 * Seiferas, "The smallest automaton recognizing the subwords of a text" (TCS 1985), one
 * token at a time (amortized O(1) per token), in its generalized form for several
 * sequences (Blumer et al., "Complete inverted files for efficient text retrieval and
 * analysis", JACM 1987): each sequence restarts from the root, and a token that already
 * labels a transition of the current state reuses (or splits off a clone of) the target
 * instead of creating a state, so no string spanning two sequences is ever indexed.
 * SAM-Decoding (Hu et al. 2024, arXiv:2411.10666) uses the same automaton for drafting.
 *
 * Layout and memory: see sam_impl.h. Construction keeps the earliest end position of
 * every state exact (a new state starts at the current position; a clone inherits it from
 * the state it splits off), which is all matching and earliest continuations need.
 * Occurrence counts and most recent positions are applied lazily by sam_query.c; this file
 * only keeps them consistent once they exist (a clone copies them). A position whose
 * extension creates no state (several sequences only) is remembered in xpend for that. */
#include "suffix_automaton/sam.h"

#include <stdlib.h>
#include <string.h>

#include "suffix_automaton/sam_impl.h"

#define ROOT 0u
#define NONE SDN_SAM_NONE

/* ---- growable arrays ----------------------------------------------------------------- */

/* Make room for `need` elements of `elem` bytes in *p (capacity *cap), growing by 1.25x,
 * and by 1.125x past 1 MiB: large blocks are re-mapped by realloc, not copied, so small
 * steps stay cheap and waste little memory. */
static int sam_grow(void **p, uint32_t *cap, size_t elem, size_t need, size_t limit) {
    if (need <= *cap) return 0;
    if (need > limit) return -1;
    size_t nc = *cap < 16 ? 16 : (size_t)*cap + ((size_t)*cap * elem >= (1u << 20) ? *cap / 8 : *cap / 4);
    if (nc < need) nc = need;
    if (nc > limit) nc = limit;
    size_t bytes;
    if (__builtin_mul_overflow(nc, elem, &bytes)) return -1;
    void *np = realloc(*p, bytes);
    if (!np) return -1;
    *p = np;
    *cap = (uint32_t)nc;
    return 0;
}

static int sam_states_reserve(sdn_sam *s, uint32_t more, sdn_err *err) {
    size_t need = (size_t)s->n_states + more, limit = (size_t)SAM_MAX_STATES;
    if (need <= s->cap_states && (!s->cold || need <= s->cap_cold)) return SDN_OK;
    /* cold has its own capacity: it exists only once counts are in use (sdn_sam_refresh) */
    if (sam_grow((void **)&s->hot, &s->cap_states, sizeof(sam_hot), need, limit) ||
        (s->cold && sam_grow((void **)&s->cold, &s->cap_cold, sizeof(sam_cold), need, limit)))
        return sdn_fail(err, SDN_ENOMEM, "suffix automaton: cannot grow to %zu states", need);
    return SDN_OK;
}

static int sam_tokens_reserve(sdn_sam *s, uint32_t more, sdn_err *err) {
    size_t need = (size_t)s->n_tok + more;
    if (need > SDN_SAM_MAX_TOKENS)
        return sdn_fail(err, SDN_ENOMEM, "suffix automaton: more than %u tokens", SDN_SAM_MAX_TOKENS);
    if (sam_grow((void **)&s->tok, &s->cap_tok, sizeof(int32_t), need, SDN_SAM_MAX_TOKENS))
        return sdn_fail(err, SDN_ENOMEM, "suffix automaton: cannot grow token store to %zu", need);
    return SDN_OK;
}

static int sam_seqs_reserve(sdn_sam *s, uint32_t more, sdn_err *err) {
    size_t need = (size_t)s->n_seq + more;
    if (sam_grow((void **)&s->seq, &s->cap_seq, sizeof(sam_seq), need, UINT32_MAX - 1))
        return sdn_fail(err, SDN_ENOMEM, "suffix automaton: cannot grow sequence table to %zu", need);
    return SDN_OK;
}

/* ---- transition table ---------------------------------------------------------------- */

/* Place an entry known to be absent; returns its slot. Capacity must have been reserved. */
static uint32_t edge_place(sam_edge *e, uint32_t cap, uint64_t key, uint32_t target) {
    uint32_t i = sam_edge_home(key, cap);
    while (e[i].key != SAM_EDGE_EMPTY)
        if (++i == cap) i = 0;
    e[i].key = key;
    e[i].target = target;
    e[i].next = NONE;
    return i;
}

/* Ensure `more` insertions fit without exceeding load 4/5 (grow by 1.5x). Chains link
 * tokens, not slots, so entries are simply re-placed. */
static inline uint32_t load_limit(uint64_t cap) { return (uint32_t)(cap / 5 * 4); }

int sam_edge_reserve(sdn_sam *s, uint32_t more, sdn_err *err) {
    uint64_t want = (uint64_t)s->n_edges + more;
    if (want <= s->grow_at) return SDN_OK;
    uint64_t cap = s->cap_edges < 64 ? 64 : s->cap_edges;
    while (want > load_limit(cap)) cap += cap / 2;
    if (cap >= UINT32_MAX)
        return sdn_fail(err, SDN_ENOMEM, "suffix automaton: transition table over 2^32 slots");
    sam_edge *ne = malloc((size_t)cap * sizeof *ne);
    if (!ne) return sdn_fail(err, SDN_ENOMEM, "suffix automaton: cannot grow transition table to %llu slots",
                             (unsigned long long)cap);
    memset(ne, 0xff, (size_t)cap * sizeof *ne);
    for (uint32_t i = 0; i < s->cap_edges; i++) {
        const sam_edge *o = &s->edge[i];
        if (o->key == SAM_EDGE_EMPTY) continue;
        uint32_t j = edge_place(ne, (uint32_t)cap, o->key, o->target);
        ne[j].next = o->next;
    }
    free(s->edge);
    s->edge = ne;
    s->cap_edges = (uint32_t)cap;
    s->grow_at = load_limit(cap);
    return SDN_OK;
}

static inline int has_special(const sdn_sam *s, uint32_t v) {
    return (s->hot[v].to0 & (SAM_EXTRA | SAM_XTOK)) != 0;
}

void sam_edge_set_xtok(sdn_sam *s, uint32_t v, int32_t c) {
    edge_place(s->edge, s->cap_edges, sam_edge_key(v, SAM_SPECIAL_KEY), (uint32_t)c);
    s->n_edges++;
    s->hot[v].to0 |= SAM_XTOK;
}

void sam_edge_add_extra(sdn_sam *s, uint32_t v, int32_t c, uint32_t t) {
    uint32_t sp;
    if (has_special(s, v)) {
        sp = sam_edge_slot_find(s, v, SAM_SPECIAL_KEY);
    } else {
        sp = edge_place(s->edge, s->cap_edges, sam_edge_key(v, SAM_SPECIAL_KEY), 0);
        s->n_edges++;
    }
    uint32_t j = edge_place(s->edge, s->cap_edges, sam_edge_key(v, c), t); /* moves no entry */
    s->edge[j].next = s->edge[sp].next;
    s->edge[sp].next = (uint32_t)c;
    s->n_edges++;
    s->hot[v].to0 |= SAM_EXTRA;
}

/* First / next extra transition of v as an edge slot (SDN_SAM_NONE at the end). */
static uint32_t sam_extra_first(const sdn_sam *s, uint32_t v) {
    if (!(s->hot[v].to0 & SAM_EXTRA)) return NONE;
    uint32_t sp = sam_edge_slot_find(s, v, SAM_SPECIAL_KEY);
    return sam_edge_slot_find(s, v, (int32_t)s->edge[sp].next);
}

static uint32_t sam_extra_next(const sdn_sam *s, uint32_t v, uint32_t slot) {
    uint32_t t = s->edge[slot].next;
    return t == NONE ? NONE : sam_edge_slot_find(s, v, (int32_t)t);
}

uint32_t sam_n_extra(const sdn_sam *s, uint32_t v) {
    uint32_t n = 0;
    for (uint32_t i = sam_extra_first(s, v); i != NONE; i = sam_extra_next(s, v, i)) n++;
    return n;
}

/* ---- the root's own table ----------------------------------------------------------- */

/* The root has one transition per distinct token. While they are sparse in the token-id
 * range they live in a hash table of {token, target}; once they cover a third of the ids
 * seen (where a plain array costs no more) they move to an array indexed by token
 * (0 = no transition: the root is never a target), which needs no hashing at all. */

static void root_place(sam_rootent *r, uint32_t cap, int32_t c, uint32_t t) {
    uint32_t i = sam_root_home(c, cap);
    while (r[i].token >= 0)
        if (++i == cap) i = 0;
    r[i].token = c;
    r[i].target = t;
}

static int root_hash_reserve(sdn_sam *s, uint32_t more, sdn_err *err) {
    uint64_t want = (uint64_t)s->n_root + more;
    if (want <= s->root_grow_at) return SDN_OK;
    uint64_t cap = s->cap_root < 64 ? 64 : s->cap_root;
    while (want > load_limit(cap)) cap += cap / 2;
    if (cap >= UINT32_MAX) return sdn_fail(err, SDN_ENOMEM, "suffix automaton: root table over 2^32 slots");
    sam_rootent *nr = malloc((size_t)cap * sizeof *nr);
    if (!nr) return sdn_fail(err, SDN_ENOMEM, "suffix automaton: cannot grow the root table to %llu slots",
                             (unsigned long long)cap);
    memset(nr, 0xff, (size_t)cap * sizeof *nr);
    for (uint32_t i = 0; i < s->cap_root; i++)
        if (s->root[i].token >= 0) root_place(nr, (uint32_t)cap, s->root[i].token, s->root[i].target);
    free(s->root);
    s->root = nr;
    s->cap_root = (uint32_t)cap;
    s->root_grow_at = load_limit(cap);
    return SDN_OK;
}

/* Make the direct array cover token c (zero-filled growth by 1.25x). */
static int rootdir_cover(sdn_sam *s, int32_t c, sdn_err *err) {
    if ((uint32_t)c < s->cap_rootdir) return SDN_OK;
    uint64_t nc = (uint64_t)s->cap_rootdir + s->cap_rootdir / 4;
    if (nc < (uint64_t)c + 1) nc = (uint64_t)c + 1;
    uint32_t *nd = realloc(s->rootdir, (size_t)nc * sizeof *nd);
    if (!nd) return sdn_fail(err, SDN_ENOMEM, "suffix automaton: cannot grow the root array to %llu tokens",
                             (unsigned long long)nc);
    memset(nd + s->cap_rootdir, 0, (size_t)(nc - s->cap_rootdir) * sizeof *nd);
    s->rootdir = nd;
    s->cap_rootdir = (uint32_t)nc;
    return SDN_OK;
}

int sam_root_add(sdn_sam *s, int32_t c, uint32_t t, sdn_err *err) {
    int rc;
    if (c > s->root_max_tok) s->root_max_tok = c;
    if (s->rootdir) {
        if ((rc = rootdir_cover(s, c, err))) return rc;
        s->rootdir[c] = t;
        s->n_root++;
        return SDN_OK;
    }
    if ((rc = root_hash_reserve(s, 1, err))) return rc;
    root_place(s->root, s->cap_root, c, t);
    s->n_root++;
    if (s->n_root >= 1024 && (uint64_t)s->n_root * 3 >= (uint64_t)s->root_max_tok + 1) {
        /* dense: switch to the array (kept as a hash table if memory is short) */
        uint64_t nc = (uint64_t)s->root_max_tok + 1 + (s->root_max_tok + 1) / 8;
        uint32_t *nd = calloc((size_t)nc, sizeof *nd);
        if (nd) {
            for (uint32_t i = 0; i < s->cap_root; i++)
                if (s->root[i].token >= 0) nd[s->root[i].token] = s->root[i].target;
            free(s->root);
            s->root = NULL, s->cap_root = 0, s->root_grow_at = 0;
            s->rootdir = nd, s->cap_rootdir = (uint32_t)nc;
        }
    }
    return SDN_OK;
}

void sam_iter_init(const sdn_sam *s, sam_iter *it, uint32_t v) {
    (void)s;
    it->v = v, it->phase = 0, it->slot = 0;
}

int sam_iter_next(const sdn_sam *s, sam_iter *it, int32_t *token, uint32_t *target) {
    uint32_t v = it->v;
    if (v == ROOT) {
        if (s->rootdir) {
            for (; it->slot < s->cap_rootdir; it->slot++)
                if (s->rootdir[it->slot]) {
                    *token = (int32_t)it->slot, *target = s->rootdir[it->slot];
                    it->slot++;
                    return 1;
                }
            return 0;
        }
        for (; it->slot < s->cap_root; it->slot++)
            if (s->root[it->slot].token >= 0) {
                *token = s->root[it->slot].token, *target = s->root[it->slot].target;
                it->slot++;
                return 1;
            }
        return 0;
    }
    if (it->phase == 0) {
        it->phase = 1;
        if (s->hot[v].to0 & SAM_TARGET_MASK) {
            *token = sam_tok0(s, v), *target = s->hot[v].to0 & SAM_TARGET_MASK;
            it->slot = sam_extra_first(s, v);
            return 1;
        }
        return 0;
    }
    if (it->slot == NONE) return 0;
    const sam_edge *e = &s->edge[it->slot];
    *token = (int32_t)(e->key >> 32), *target = e->target;
    it->slot = sam_extra_next(s, v, it->slot);
    return 1;
}

/* Add the absent transition v --c--> t while appending position `pos` (token c). */
static int sam_add(sdn_sam *s, uint32_t v, int32_t c, uint32_t t, uint32_t pos, sdn_err *err) {
    sam_hot *h = &s->hot[v];
    int rc;
    if (v == ROOT) return sam_root_add(s, c, t, err);
    if (!(h->to0 & SAM_TARGET_MASK)) {
        /* first transition: implicit iff it follows the earliest occurrence (always so in
         * one sequence; not when that occurrence ended an earlier sequence) */
        if (h->firstpos + 1 == pos) {
            h->to0 = t;
            return SDN_OK;
        }
        if ((rc = sam_edge_reserve(s, 1, err))) return rc;
        s->hot[v].to0 = t;
        sam_edge_set_xtok(s, v, c);
        return SDN_OK;
    }
    if ((rc = sam_edge_reserve(s, 2, err))) return rc;
    sam_edge_add_extra(s, v, c, t);
    return SDN_OK;
}

/* If v --c--> q, make it v --c--> t and return 1; else return 0. */
static inline int sam_redirect(sdn_sam *s, uint32_t v, int32_t c, uint32_t q, uint32_t t) {
    if (v == ROOT) {
        if (s->rootdir) {
            if ((uint32_t)c >= s->cap_rootdir || s->rootdir[c] != q) return 0;
            s->rootdir[c] = t;
            return 1;
        }
        uint32_t i = sam_root_slot(s, c);
        if (i == NONE || s->root[i].target != q) return 0;
        s->root[i].target = t;
        return 1;
    }
    sam_hot *h = &s->hot[v];
    if (!(h->to0 & SAM_TARGET_MASK)) return 0;
    int32_t t0 = (h->to0 & SAM_XTOK) ? sam_tok0(s, v) : s->tok[h->firstpos + 1];
    if (t0 == c) {
        if ((h->to0 & SAM_TARGET_MASK) != q) return 0;
        h->to0 = (h->to0 & ~SAM_TARGET_MASK) | t;
        return 1;
    }
    if (!(h->to0 & SAM_EXTRA)) return 0;
    uint32_t i = sam_edge_slot_find(s, v, c);
    if (i == NONE || s->edge[i].target != q) return 0;
    s->edge[i].target = t;
    return 1;
}

/* New state copying q's transitions and applied statistics, with length `len`. */
static int sam_clone(sdn_sam *s, uint32_t q, uint32_t len, uint32_t *out, sdn_err *err) {
    int rc = sam_states_reserve(s, 1, err);
    if (rc) return rc;
    uint32_t extra = has_special(s, q) + sam_n_extra(s, q);
    if ((rc = sam_edge_reserve(s, extra, err))) return rc;
    uint32_t cl = s->n_states++;
    s->hot[cl].len = len;
    s->hot[cl].link = s->hot[q].link;
    s->hot[cl].firstpos = s->hot[q].firstpos; /* same earliest occurrence, so same first token */
    s->hot[cl].to0 = s->hot[q].to0 & SAM_TARGET_MASK;
    if (s->cold) s->cold[cl] = s->cold[q];
    if (has_special(s, q)) {
        /* copy the special entry, then q's extras into cl's chain (placing entries never
         * moves others, so the special slot stays valid) */
        uint32_t qs = sam_edge_slot_find(s, q, SAM_SPECIAL_KEY);
        uint32_t cs = edge_place(s->edge, s->cap_edges, sam_edge_key(cl, SAM_SPECIAL_KEY), s->edge[qs].target);
        s->n_edges++;
        s->hot[cl].to0 |= s->hot[q].to0 & (SAM_XTOK | SAM_EXTRA);
        for (uint32_t t = s->edge[qs].next; t != NONE;) {
            uint32_t i = sam_edge_slot_find(s, q, (int32_t)t);
            uint32_t j = edge_place(s->edge, s->cap_edges, sam_edge_key(cl, (int32_t)t), s->edge[i].target);
            s->edge[j].next = s->edge[cs].next;
            s->edge[cs].next = t;
            s->n_edges++;
            t = s->edge[i].next;
        }
    }
    *out = cl;
    return SDN_OK;
}

/* ---- life cycle ---------------------------------------------------------------------- */

int sdn_sam_create(sdn_sam **out, sdn_err *err) {
    *out = NULL;
    sdn_sam *s = calloc(1, sizeof *s);
    if (!s) return sdn_fail(err, SDN_ENOMEM, "suffix automaton: out of memory");
    int rc = sam_states_reserve(s, 1, err);
    if (rc) {
        free(s);
        return rc;
    }
    s->n_states = 1;
    s->hot[ROOT] = (sam_hot){0, NONE, NONE, 0}; /* firstpos + 1 wraps to position 0 */
    s->last = ROOT;
    *out = s;
    return SDN_OK;
}

void sdn_sam_free(sdn_sam *s) {
    if (!s) return;
    free(s->hot), free(s->cold), free(s->edge), free(s->root), free(s->rootdir), free(s->tok), free(s->seq);
    free(s->xpend);
    free(s);
}

int sdn_sam_reserve(sdn_sam *s, size_t n_tokens, sdn_err *err) {
    if (!s) return sdn_fail(err, SDN_EINVAL, "suffix automaton: NULL");
    if (n_tokens > SDN_SAM_MAX_TOKENS - s->n_tok)
        return sdn_fail(err, SDN_ENOMEM, "suffix automaton: reserve of %zu tokens exceeds the limit", n_tokens);
    uint32_t n = (uint32_t)n_tokens;
    int rc;
    if ((rc = sam_tokens_reserve(s, n, err))) return rc;
    /* typical token streams need 1.2-1.7 states and 0.3-0.6 extra transitions per token;
     * reserve the low end, growth covers the rest */
    if ((rc = sam_states_reserve(s, n + n / 4 + 2, err))) return rc;
    return sam_edge_reserve(s, n / 3, err);
}

static void *shrink_to(void *p, size_t n, size_t elem) {
    if (!n) n = 1;
    void *np = realloc(p, n * elem);
    return np ? np : p;
}

int sdn_sam_shrink(sdn_sam *s, sdn_err *err) {
    if (!s) return sdn_fail(err, SDN_EINVAL, "suffix automaton: NULL");
    if (s->broken) return sdn_fail(err, SDN_ESTATE, "suffix automaton: unusable after a failed extension");
    sdn_sam_refresh(s);
    s->hot = shrink_to(s->hot, s->n_states, sizeof *s->hot);
    if (s->cold) s->cold = shrink_to(s->cold, s->n_states, sizeof *s->cold), s->cap_cold = s->n_states;
    s->cap_states = s->n_states;
    s->tok = shrink_to(s->tok, s->n_tok, sizeof *s->tok);
    s->cap_tok = s->n_tok ? s->n_tok : 1;
    s->seq = shrink_to(s->seq, s->n_seq, sizeof *s->seq);
    s->cap_seq = s->n_seq ? s->n_seq : 1;
    free(s->xpend);
    s->xpend = NULL;
    s->cap_xpend = 0;
    /* rehash the edge table to the smallest capacity with load <= 4/5 */
    uint64_t cap = 64;
    while ((uint64_t)s->n_edges > load_limit(cap)) cap += cap / 2;
    if (cap < s->cap_edges) {
        sam_edge *old = s->edge;
        uint32_t oldcap = s->cap_edges, n = s->n_edges;
        s->edge = NULL, s->cap_edges = 0, s->grow_at = 0, s->n_edges = 0;
        if (sam_edge_reserve(s, n, NULL)) { /* keep the larger table */
            s->edge = old, s->cap_edges = oldcap, s->n_edges = n, s->grow_at = load_limit(oldcap);
            return SDN_OK;
        }
        for (uint32_t i = 0; i < oldcap; i++) {
            if (old[i].key == SAM_EDGE_EMPTY) continue;
            uint32_t j = edge_place(s->edge, s->cap_edges, old[i].key, old[i].target);
            s->edge[j].next = old[i].next;
        }
        s->n_edges = n;
        free(old);
    }
    return SDN_OK;
}

/* ---- building ------------------------------------------------------------------------ */

int sdn_sam_begin_seq(sdn_sam *s, uint32_t tag, uint32_t *seq_index, sdn_err *err) {
    if (!s) return sdn_fail(err, SDN_EINVAL, "suffix automaton: NULL");
    if (s->broken) return sdn_fail(err, SDN_ESTATE, "suffix automaton: unusable after a failed extension");
    int rc = sam_seqs_reserve(s, 1, err);
    if (rc) return rc;
    s->seq[s->n_seq].start = s->n_tok;
    s->seq[s->n_seq].tag = tag;
    if (seq_index) *seq_index = s->n_seq;
    s->n_seq++;
    s->seq_open = 1;
    s->last = ROOT;
    return SDN_OK;
}

/* Extension core: capacity for the token and two states was reserved. */
static int sam_extend_one(sdn_sam *s, int32_t c, sdn_err *err) {
    uint32_t pos = s->n_tok, last = s->last, ps, cl;
    int created = 0;
    s->tok[s->n_tok++] = c;
    sam_hot *H = s->hot;
    uint32_t q = sam_get(s, last, c);
    int rc;
    if (q != NONE) {
        /* generalized case: (current prefix, c) already occurs in an earlier sequence */
        if (H[q].len == H[last].len + 1) {
            ps = q;
        } else {
            if ((rc = sam_clone(s, q, H[last].len + 1, &cl, err))) return rc;
            H = s->hot;
            for (uint32_t p = last; p != NONE && sam_redirect(s, p, c, q, cl); p = H[p].link) {}
            H[q].link = cl;
            ps = cl;
        }
    } else {
        uint32_t cur = s->n_states++;
        H[cur] = (sam_hot){H[last].len + 1, NONE, pos, 0};
        if (s->cold) s->cold[cur] = (sam_cold){0, pos};
        uint32_t p = last;
        while (p != NONE) {
            q = sam_get(s, p, c);
            if (q != NONE) break;
            if ((rc = sam_add(s, p, c, cur, pos, err))) return rc;
            p = H[p].link;
        }
        if (p == NONE) {
            H[cur].link = ROOT;
        } else if (H[p].len + 1 == H[q].len) {
            H[cur].link = q;
        } else {
            if ((rc = sam_clone(s, q, H[p].len + 1, &cl, err))) return rc;
            H = s->hot;
            for (; p != NONE && sam_redirect(s, p, c, q, cl); p = H[p].link) {}
            H[q].link = cl;
            H[cur].link = cl;
        }
        ps = cur;
        created = 1;
    }
    if (H[ps].len > s->max_len) s->max_len = H[ps].len;
    s->last = ps;
    if (!created) { /* no new prefix state marks this position: remember it */
        if (sam_grow((void **)&s->xpend, &s->cap_xpend, 2 * sizeof *s->xpend, (size_t)s->n_xpend + 1, SDN_SAM_MAX_TOKENS))
            return sdn_fail(err, SDN_ENOMEM, "suffix automaton: cannot grow the pending-position list");
        s->xpend[2 * s->n_xpend] = pos;
        s->xpend[2 * s->n_xpend + 1] = ps;
        s->n_xpend++;
    }
    return SDN_OK;
}

int sdn_sam_extend(sdn_sam *s, int32_t token, sdn_err *err) {
    return sdn_sam_extend_n(s, &token, 1, err);
}

int sdn_sam_extend_n(sdn_sam *s, const int32_t *tokens, size_t n, sdn_err *err) {
    if (!s || (!tokens && n)) return sdn_fail(err, SDN_EINVAL, "suffix automaton: NULL argument");
    if (s->broken) return sdn_fail(err, SDN_ESTATE, "suffix automaton: unusable after a failed extension");
    if (n > SDN_SAM_MAX_TOKENS - s->n_tok)
        return sdn_fail(err, SDN_ENOMEM, "suffix automaton: more than %u tokens", SDN_SAM_MAX_TOKENS);
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] > SDN_SAM_MAX_TOKEN)
            return sdn_fail(err, SDN_EINVAL, "suffix automaton: token %zu has value %d outside [0, %d]", i, tokens[i],
                            SDN_SAM_MAX_TOKEN);
    int rc;
    if (!s->seq_open && (rc = sdn_sam_begin_seq(s, 0, NULL, err))) return rc;
    if ((rc = sam_tokens_reserve(s, (uint32_t)n, err))) return rc;
    for (size_t i = 0; i < n; i++) {
        /* at most two new states per token */
        if ((s->n_states + 2 > s->cap_states || (s->cold && s->n_states + 2 > s->cap_cold)) &&
            (rc = sam_states_reserve(s, 2, err)))
            return rc;
        if ((rc = sam_extend_one(s, tokens[i], err))) {
            s->broken = 1;
            return rc;
        }
    }
    return SDN_OK;
}

int sdn_sam_add_seq(sdn_sam *s, uint32_t tag, const int32_t *tokens, size_t n, sdn_err *err) {
    int rc = sdn_sam_begin_seq(s, tag, NULL, err);
    return rc ? rc : sdn_sam_extend_n(s, tokens, n, err);
}

/* ---- sizes ----------------------------------------------------------------------------- */

size_t sdn_sam_n_tokens(const sdn_sam *s) { return s->n_tok; }
size_t sdn_sam_n_states(const sdn_sam *s) { return s->n_states; }
size_t sdn_sam_n_seqs(const sdn_sam *s) { return s->n_seq; }
const int32_t *sdn_sam_tokens(const sdn_sam *s) { return s->tok; }

size_t sdn_sam_n_transitions(const sdn_sam *s) {
    size_t n = (size_t)s->n_edges + s->n_root;
    for (uint32_t v = 0; v < s->n_states; v++) {
        n += (s->hot[v].to0 & SAM_TARGET_MASK) != 0;
        n -= has_special(s, v); /* special entries are no transitions */
    }
    return n;
}

int sdn_sam_seq_info(const sdn_sam *s, size_t i, uint32_t *start, uint32_t *len, uint32_t *tag) {
    if (i >= s->n_seq) return SDN_EINVAL;
    uint32_t st = s->seq[i].start, end = i + 1 < s->n_seq ? s->seq[i + 1].start : s->n_tok;
    if (start) *start = st;
    if (len) *len = end - st;
    if (tag) *tag = s->seq[i].tag;
    return SDN_OK;
}

uint32_t sdn_sam_seq_of(const sdn_sam *s, uint32_t pos) {
    if (pos >= s->n_tok || !s->n_seq) return NONE;
    if (pos >= s->seq[s->n_seq - 1].start) return s->n_seq - 1;
    uint32_t lo = 0, hi = s->n_seq - 1; /* largest i with start[i] <= pos, in [lo, hi) */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s->seq[mid].start <= pos) lo = mid;
        else hi = mid;
    }
    return lo;
}

size_t sdn_sam_memory(const sdn_sam *s) {
    return sizeof *s + (size_t)s->cap_states * sizeof(sam_hot) + (size_t)s->cap_cold * sizeof(sam_cold) +
           (size_t)s->cap_edges * sizeof(sam_edge) + (size_t)s->cap_root * sizeof(sam_rootent) +
           (size_t)s->cap_rootdir * sizeof(uint32_t) +
           (size_t)s->cap_tok * sizeof(int32_t) +
           (size_t)s->cap_seq * sizeof(sam_seq) + (size_t)s->cap_xpend * 2 * sizeof(uint32_t);
}
