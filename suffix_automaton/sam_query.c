/* sam_query.c - matching and queries on the suffix automaton: incremental longest-suffix
 * matching, occurrence counts and most recent end positions (maintained lazily),
 * continuations, and the top-k next tokens.
 *
 * Matching follows suffix links on a miss, so advancing over a query of q tokens costs
 * O(q) in total. Counts and most recent positions are sums / maxima over suffix-link
 * subtrees of the end sets; an online update would cost the depth of the link path per
 * token, so they are applied on demand. The first count query allocates them and
 * aggregates every position in one pass over the states in decreasing-length order (a
 * counting sort: children before their suffix-link parent). Later queries walk each new
 * position up its link path (count + 1, most recent = max), or aggregate again when that
 * would cost more than a pass. Construction keeps them exact for the positions already
 * applied: a new state starts empty, and a clone copies the state it splits, whose applied
 * end positions it shares. */
#include <stdlib.h>
#include <string.h>

#include "suffix_automaton/sam.h"
#include "suffix_automaton/sam_impl.h"

#define ROOT 0u
#define NONE SDN_SAM_NONE

/* ---- lazy occurrence statistics ------------------------------------------------------ */

/* Positions added since the last refresh ("pending") are not stored in a queue: each
 * one either created a state (its prefix state, whose longest string is the whole sequence
 * prefix: len == firstpos - sequence start + 1, which no clone satisfies) or, in automata
 * of several sequences, reused or cloned an existing one (recorded in xpend). */
static inline int is_prefix_state(const sdn_sam *s, uint32_t v) {
    uint32_t fp = s->hot[v].firstpos, i = sdn_sam_seq_of(s, fp);
    return i != NONE && s->hot[v].len == fp - s->seq[i].start + 1;
}

/* Add end position `pos` to v and its suffix-link ancestors; returns the path length. */
static inline uint32_t walk_up(sdn_sam *s, uint32_t v, uint32_t pos) {
    uint32_t n = 0;
    for (; v != NONE; v = s->hot[v].link, n++) {
        s->cold[v].cnt++;
        if (pos > s->cold[v].lastpos) s->cold[v].lastpos = pos;
    }
    return n;
}

/* Apply pending prefix states v >= from_state and xpend[from_x..] in one pass over all
 * states in decreasing length order (counting sort); -1 if scratch memory is missing. */
static int sam_aggregate(sdn_sam *s, uint32_t from_state, uint32_t from_x) {
    uint32_t S = s->n_states;
    uint32_t *dcnt = calloc(S, sizeof *dcnt), *dmax = calloc(S, sizeof *dmax);
    uint32_t *bucket = calloc((size_t)s->max_len + 2, sizeof *bucket), *order = malloc((size_t)S * sizeof *order);
    if (!dcnt || !dmax || !bucket || !order) {
        free(dcnt), free(dmax), free(bucket), free(order);
        return -1;
    }
    for (uint32_t v = from_state; v < S; v++)
        if (is_prefix_state(s, v)) dcnt[v]++, dmax[v] = s->hot[v].firstpos + 1;
    for (uint32_t j = from_x; j < s->n_xpend; j++) {
        uint32_t pos = s->xpend[2 * j], v = s->xpend[2 * j + 1];
        dcnt[v]++;
        if (pos + 1 > dmax[v]) dmax[v] = pos + 1;
    }
    for (uint32_t v = 0; v < S; v++) bucket[s->hot[v].len + 1]++;
    for (uint32_t l = 1; l <= s->max_len + 1; l++) bucket[l] += bucket[l - 1];
    for (uint32_t v = 0; v < S; v++) order[bucket[s->hot[v].len]++] = v;
    for (uint32_t k = S; k-- > 0;) { /* children (longer) before their suffix-link parent */
        uint32_t v = order[k];
        if (!dcnt[v]) continue;
        s->cold[v].cnt += dcnt[v];
        if (dmax[v] - 1 > s->cold[v].lastpos) s->cold[v].lastpos = dmax[v] - 1;
        uint32_t p = s->hot[v].link;
        if (p != NONE) {
            dcnt[p] += dcnt[v];
            if (dmax[v] > dmax[p]) dmax[p] = dmax[v];
        }
    }
    free(dcnt), free(dmax), free(bucket), free(order);
    return 0;
}

void sdn_sam_refresh(sdn_sam *s) {
    if (!s || (s->cold && s->mat_tok == s->n_tok)) return;
    if (!s->cold) {
        /* first count query: only now pay 8 bytes per state for counts, and compute them
         * for every position in one pass (zero is below every true value) */
        uint32_t cap = s->n_states + s->n_states / 64 + 16; /* grows like hot from here */
        s->cold = calloc(cap, sizeof *s->cold);
        if (!s->cold) return; /* count queries then report 0 (see the readers) */
        s->cap_cold = cap;
        s->mat_tok = 0, s->mat_state = 0;
    }
    /* walk each pending position up its suffix-link path (cheap for a few new tokens);
     * past one pass worth of steps, aggregate the rest in a single pass instead */
    uint64_t steps = 0, budget = (uint64_t)s->n_states + 64;
    uint32_t v = s->mat_state, j = 0;
    if ((uint64_t)(s->n_tok - s->mat_tok) * 8 > s->n_states) budget = 0; /* many: aggregate at once */
    for (; v < s->n_states && steps < budget; v++)
        if (is_prefix_state(s, v)) steps += walk_up(s, v, s->hot[v].firstpos);
    for (; j < s->n_xpend && steps < budget; j++) steps += walk_up(s, s->xpend[2 * j + 1], s->xpend[2 * j]);
    if ((v < s->n_states || j < s->n_xpend) && sam_aggregate(s, v, j) != 0) {
        for (; v < s->n_states; v++) /* no scratch memory: finish by walking */
            if (is_prefix_state(s, v)) walk_up(s, v, s->hot[v].firstpos);
        for (; j < s->n_xpend; j++) walk_up(s, s->xpend[2 * j + 1], s->xpend[2 * j]);
    }
    s->mat_state = s->n_states;
    s->mat_tok = s->n_tok;
    s->n_xpend = 0;
}


/* One past the last position of the sequence holding `pos`. */
static inline uint32_t seq_end_of(const sdn_sam *s, uint32_t pos) {
    uint32_t i = sdn_sam_seq_of(s, pos);
    if (i == NONE) return pos;
    return i + 1 < s->n_seq ? s->seq[i + 1].start : s->n_tok;
}


/* ---- matching -------------------------------------------------------------------------- */

void sdn_sam_match_normalize(const sdn_sam *s, sdn_sam_match *m) {
    if (m->state >= s->n_states || m->len > s->hot[m->state].len) {
        m->state = ROOT, m->len = 0; /* not a match of this automaton */
        return;
    }
    if (m->len == 0) {
        m->state = ROOT;
        return;
    }
    /* a clone split off after m was taken may now hold m's (shorter) string */
    while (m->state != ROOT && m->len <= s->hot[s->hot[m->state].link].len) m->state = s->hot[m->state].link;
}

uint32_t sdn_sam_match_advance(const sdn_sam *s, sdn_sam_match *m, int32_t token) {
    sdn_sam_match_normalize(s, m);
    if (token < 0) {
        m->state = ROOT, m->len = 0;
        return 0;
    }
    uint32_t v = m->state, l = m->len;
    for (;;) {
        uint32_t t = sam_get(s, v, token);
        if (t != NONE) {
            m->state = t, m->len = l + 1;
            return l + 1;
        }
        if (v == ROOT) {
            m->state = ROOT, m->len = 0;
            return 0;
        }
        v = s->hot[v].link;
        l = s->hot[v].len;
    }
}

int sdn_sam_match_child(const sdn_sam *s, const sdn_sam_match *m, int32_t token, sdn_sam_match *out) {
    sdn_sam_match c = *m;
    sdn_sam_match_normalize(s, &c);
    if (token < 0) return 0;
    uint32_t t = sam_get(s, c.state, token);
    if (t == NONE) return 0;
    out->state = t, out->len = c.len + 1;
    return 1;
}

int sdn_sam_match_parent(const sdn_sam *s, sdn_sam_match *m) {
    sdn_sam_match_normalize(s, m);
    if (m->state == ROOT) return 0;
    m->state = s->hot[m->state].link;
    m->len = s->hot[m->state].len;
    return 1;
}

/* ---- queries --------------------------------------------------------------------------- */

uint32_t sdn_sam_first_end(const sdn_sam *s, const sdn_sam_match *m) {
    sdn_sam_match c = *m;
    sdn_sam_match_normalize(s, &c);
    return c.len ? s->hot[c.state].firstpos : NONE;
}

void sdn_sam_occurrences(sdn_sam *s, const sdn_sam_match *m, sdn_sam_occ *out) {
    sdn_sam_match c = *m;
    sdn_sam_match_normalize(s, &c);
    sdn_sam_refresh(s);
    if (!c.len) {
        out->count = s->n_tok, out->first_end = NONE, out->last_end = NONE;
        return;
    }
    out->first_end = s->hot[c.state].firstpos;
    if (!s->cold) { /* out of memory for counts */
        out->count = 0, out->last_end = out->first_end;
        return;
    }
    out->count = s->cold[c.state].cnt;
    out->last_end = s->cold[c.state].lastpos;
}

uint32_t sdn_sam_avail_after(const sdn_sam *s, uint32_t end_pos) {
    if (end_pos >= s->n_tok) return 0;
    return seq_end_of(s, end_pos) - end_pos - 1;
}

int sdn_sam_read_after(const sdn_sam *s, uint32_t end_pos, int32_t *out, int max_n) {
    if (max_n <= 0 || end_pos >= s->n_tok) return 0;
    uint32_t avail = sdn_sam_avail_after(s, end_pos);
    uint32_t n = avail < (uint32_t)max_n ? avail : (uint32_t)max_n;
    memcpy(out, s->tok + end_pos + 1, (size_t)n * sizeof *out);
    return (int)n;
}

int sdn_sam_continuation(sdn_sam *s, const sdn_sam_match *m, int which, int32_t *out, int max_n) {
    sdn_sam_match c = *m;
    sdn_sam_match_normalize(s, &c);
    if (!c.len || max_n <= 0) return 0;
    uint32_t e;
    if (which == SDN_SAM_LATEST) {
        sdn_sam_refresh(s);
        e = s->cold ? s->cold[c.state].lastpos : s->hot[c.state].firstpos;
    } else {
        e = s->hot[c.state].firstpos;
    }
    return sdn_sam_read_after(s, e, out, max_n);
}

/* Insert (tok, cnt) into out[0..*w) kept sorted by count desc then token asc, size <= k. */
static inline void topk_push(sdn_sam_next *out, int *w, int k, int32_t tok, uint32_t cnt, uint32_t child, uint32_t clen) {
    int i = *w;
    if (i == k) {
        const sdn_sam_next *b = &out[k - 1];
        if (cnt < b->count || (cnt == b->count && tok > b->token)) return;
        i = k - 1;
    } else {
        (*w)++;
    }
    while (i > 0 && (out[i - 1].count < cnt || (out[i - 1].count == cnt && out[i - 1].token > tok))) {
        out[i] = out[i - 1];
        i--;
    }
    out[i].token = tok, out[i].count = cnt, out[i].child.state = child, out[i].child.len = clen;
}

int sdn_sam_next_tokens(sdn_sam *s, const sdn_sam_match *m, int k, sdn_sam_next *out, uint64_t *total,
                        uint32_t *n_distinct) {
    sdn_sam_match c = *m;
    sdn_sam_match_normalize(s, &c);
    sdn_sam_refresh(s);
    uint64_t tot = 0;
    uint32_t nd = 0;
    int w = 0;
    if (k < 0) k = 0;
    static const sam_cold none = {0, 0};
    /* gather transitions in blocks, prefetch the targets' counts (independent loads that
     * can overlap), then rank them */
    enum { BLK = 64 };
    int32_t btok[BLK];
    uint32_t btgt[BLK];
    sam_iter it;
    sam_iter_init(s, &it, c.state);
    for (int more = 1; more;) {
        int b = 0;
        while (b < BLK && (more = sam_iter_next(s, &it, &btok[b], &btgt[b])))
            if (s->cold) __builtin_prefetch(&s->cold[btgt[b++]]);
            else b++;
        for (int i = 0; i < b; i++) {
            uint32_t cnt = (s->cold ? &s->cold[btgt[i]] : &none)->cnt;
            tot += cnt, nd++;
            if (k) topk_push(out, &w, k, btok[i], cnt, btgt[i], c.len + 1);
        }
    }
    if (total) *total = tot;
    if (n_distinct) *n_distinct = nd;
    return w;
}
