/* sam_serialize.c - suffix automaton to bytes and back, so that a history automaton can be
 * stored (e.g. in SQLite) and loaded without re-running construction.
 *
 * The format is a 64-byte header followed by four little-endian arrays (sequences, tokens,
 * states, transitions); docs/drafting.md lists every field. Transitions of each state are
 * written sorted by token, which makes the bytes canonical (independent of hash-table
 * layout) and lets the loader reject duplicates in one pass. Loading treats the bytes as
 * untrusted: a header checksum and a payload checksum (XXH64) catch accidental damage,
 * and independent structural checks make every later operation memory-safe and
 * terminating even on bytes crafted to pass the checksums: ids in range, suffix links to
 * strictly shorter states (so the link graph is a tree rooted at state 0), transitions to
 * strictly longer states, positions inside their sequence, counts in [1, tokens] and never
 * above the parent's count. The checks do not prove that the bytes are the automaton of
 * the stored tokens; a crafted file can give wrong answers, never a crash. */
#include <stdlib.h>
#include <string.h>

#include "suffix_automaton/sam.h"
#include "suffix_automaton/sam_impl.h"

#define SAM_MAGIC "SDNSAM\x1a\x00"
#define SAM_VERSION 1u
#define SAM_HEADER 64u
#define SAM_SEQ_BYTES 8u
#define SAM_TOK_BYTES 4u
#define SAM_STATE_BYTES 24u
#define SAM_TRANS_BYTES 8u

static inline void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}
static inline void put64(uint8_t *p, uint64_t v) {
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}
static inline uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

typedef struct tpair {
    int32_t token;
    uint32_t target;
} tpair;

static int tpair_cmp(const void *a, const void *b) {
    int32_t x = ((const tpair *)a)->token, y = ((const tpair *)b)->token;
    return (x > y) - (x < y);
}

int sdn_sam_serialize(sdn_sam *s, uint8_t **out, size_t *len, sdn_err *err) {
    *out = NULL;
    *len = 0;
    if (s->broken) return sdn_fail(err, SDN_ESTATE, "suffix automaton: unusable after a failed extension");
    sdn_sam_refresh(s);
    if (!s->cold) return sdn_fail(err, SDN_ENOMEM, "suffix automaton: no memory for occurrence counts");
    uint32_t n_trans = 0, max_deg = 0;
    for (uint32_t v = 0; v < s->n_states; v++) {
        uint32_t d = v == 0 ? s->n_root : ((s->hot[v].to0 & SAM_TARGET_MASK) != 0) + sam_n_extra(s, v);
        n_trans += d;
        if (d > max_deg) max_deg = d;
    }
    uint64_t total = SAM_HEADER + (uint64_t)s->n_seq * SAM_SEQ_BYTES + (uint64_t)s->n_tok * SAM_TOK_BYTES +
                     (uint64_t)s->n_states * SAM_STATE_BYTES + (uint64_t)n_trans * SAM_TRANS_BYTES;
    if (total > SIZE_MAX) return sdn_fail(err, SDN_ENOMEM, "suffix automaton: serialized size overflows");
    uint8_t *buf = malloc((size_t)total);
    tpair *tp = malloc((max_deg ? max_deg : 1) * sizeof *tp);
    if (!buf || !tp) {
        free(buf), free(tp);
        return sdn_fail(err, SDN_ENOMEM, "suffix automaton: cannot allocate %llu bytes to serialize",
                        (unsigned long long)total);
    }
    uint8_t *p = buf + SAM_HEADER;
    for (uint32_t i = 0; i < s->n_seq; i++, p += SAM_SEQ_BYTES) {
        put32(p, s->seq[i].start);
        put32(p + 4, s->seq[i].tag);
    }
    for (uint32_t i = 0; i < s->n_tok; i++, p += SAM_TOK_BYTES) put32(p, (uint32_t)s->tok[i]);
    uint8_t *ps = p, *pt = p + (size_t)s->n_states * SAM_STATE_BYTES;
    for (uint32_t v = 0; v < s->n_states; v++, ps += SAM_STATE_BYTES) {
        uint32_t d = 0;
        sam_iter it;
        sam_iter_init(s, &it, v);
        while (d < max_deg && sam_iter_next(s, &it, &tp[d].token, &tp[d].target)) d++;
        if (d > 1) qsort(tp, d, sizeof *tp, tpair_cmp);
        int root = v == 0;
        put32(ps, s->hot[v].len);
        put32(ps + 4, s->hot[v].link);
        put32(ps + 8, root ? 0 : s->hot[v].firstpos);
        put32(ps + 12, root ? (s->n_tok ? s->n_tok - 1 : 0) : s->cold[v].lastpos);
        put32(ps + 16, root ? s->n_tok : s->cold[v].cnt);
        put32(ps + 20, d);
        for (uint32_t j = 0; j < d; j++, pt += SAM_TRANS_BYTES) {
            put32(pt, (uint32_t)tp[j].token);
            put32(pt + 4, tp[j].target);
        }
    }
    free(tp);
    memcpy(buf, SAM_MAGIC, 8);
    put32(buf + 8, SAM_VERSION);
    put32(buf + 12, SAM_HEADER);
    put32(buf + 16, s->n_seq);
    put32(buf + 20, s->n_tok);
    put32(buf + 24, s->n_states);
    put32(buf + 28, n_trans);
    put32(buf + 32, s->last);
    put32(buf + 36, (uint32_t)s->seq_open);
    put32(buf + 40, s->max_len);
    put32(buf + 44, 0);
    put64(buf + 48, XXH64(buf + SAM_HEADER, (size_t)total - SAM_HEADER, 0));
    put64(buf + 56, XXH64(buf, 56, 0));
    *out = buf;
    *len = (size_t)total;
    return SDN_OK;
}

#define BAD(...) sdn_fail(err, SDN_EFORMAT, "serialized suffix automaton: " __VA_ARGS__)

/* Check that occurrence [end-len+1, end] lies inside one sequence. */
static int occ_ok(const sdn_sam *s, uint32_t end, uint32_t len) {
    uint32_t i = sdn_sam_seq_of(s, end);
    return i != SDN_SAM_NONE && len <= end + 1 && end + 1 - len >= s->seq[i].start;
}

static int load_body(sdn_sam *s, const uint8_t *buf, uint32_t n_trans, uint32_t last, uint32_t seq_open,
                     sdn_err *err) {
    const uint8_t *p = buf + SAM_HEADER;
    uint32_t N = s->n_tok;
    for (uint32_t i = 0; i < s->n_seq; i++, p += SAM_SEQ_BYTES) {
        uint32_t st = get32(p);
        if (st > N) return BAD("sequence %u: start %u beyond the %u tokens", i, st, N);
        if (i == 0 ? st != 0 : st < s->seq[i - 1].start)
            return BAD("sequence %u: start %u out of order", i, st);
        s->seq[i].start = st;
        s->seq[i].tag = get32(p + 4);
    }
    if (N && !s->n_seq) return BAD("%u tokens but no sequence", N);
    for (uint32_t i = 0; i < N; i++, p += SAM_TOK_BYTES) {
        uint32_t t = get32(p);
        if (t > (uint32_t)SDN_SAM_MAX_TOKEN) return BAD("token %u: value %d out of range", i, (int32_t)t);
        s->tok[i] = (int32_t)t;
    }
    const uint8_t *ps = p, *pt = p + (size_t)s->n_states * SAM_STATE_BYTES;
    /* pass 1: lengths (needed to check links and transitions in any order) */
    for (uint32_t v = 0; v < s->n_states; v++) {
        uint32_t len = get32(ps + (size_t)v * SAM_STATE_BYTES);
        if (len > s->max_len) return BAD("state %u: length %u above the maximum %u", v, len, s->max_len);
        if (v > 0 && len == 0) return BAD("state %u: length 0 (only the root may be empty)", v);
        s->hot[v].len = len;
    }
    if (s->hot[0].len != 0) return BAD("state 0 (root): length %u, expected 0", s->hot[0].len);
    uint64_t seen_trans = 0;
    uint32_t extras = 0;
    for (uint32_t v = 0; v < s->n_states; v++, ps += SAM_STATE_BYTES) {
        uint32_t len = s->hot[v].len, link = get32(ps + 4), fp = get32(ps + 8), lp = get32(ps + 12),
                 cnt = get32(ps + 16), d = get32(ps + 20);
        if (v == 0) {
            if (link != SDN_SAM_NONE) return BAD("state 0 (root): suffix link %u, expected none", link);
            if (fp != 0 || lp != (N ? N - 1 : 0) || cnt != N)
                return BAD("state 0 (root): positions %u..%u / count %u inconsistent with %u tokens", fp, lp, cnt, N);
        } else {
            if (link >= s->n_states) return BAD("state %u: suffix link %u out of range (%u states)", v, link, s->n_states);
            if (s->hot[link].len >= len)
                return BAD("state %u: suffix link %u is not shorter (%u >= %u)", v, link, s->hot[link].len, len);
            if (fp >= N || lp >= N) return BAD("state %u: end position %u/%u out of range (%u tokens)", v, fp, lp, N);
            if (fp > lp) return BAD("state %u: earliest end %u after most recent end %u", v, fp, lp);
            if (!occ_ok(s, fp, len) || !occ_ok(s, lp, len))
                return BAD("state %u: occurrence of length %u ending at %u/%u crosses a sequence start", v, len, fp, lp);
            if (cnt == 0 || cnt > N) return BAD("state %u: occurrence count %u out of range [1, %u]", v, cnt, N);
            if (cnt == 1 && fp != lp) return BAD("state %u: one occurrence but two end positions", v);
        }
        if (d > s->n_states) return BAD("state %u: %u transitions (more than states)", v, d);
        seen_trans += d;
        if (seen_trans > n_trans) return BAD("state %u: transition counts exceed the total %u", v, n_trans);
        s->hot[v].link = link;
        s->hot[v].firstpos = v == 0 ? SDN_SAM_NONE : fp; /* root: firstpos + 1 wraps to 0 */
        s->hot[v].to0 = 0;
        s->cold[v] = (sam_cold){cnt, lp};
        /* the inline transition is the one on the token after the earliest occurrence
         * (implicit); if there is none, the first one, with its token stored explicitly */
        uint32_t nextpos = s->hot[v].firstpos + 1;
        int32_t implicit_tok = nextpos < N ? s->tok[nextpos] : -1;
        int32_t prev = -1;
        uint32_t inline_j = d ? 0 : SDN_SAM_NONE;
        int implicit_found = 0;
        for (uint32_t j = 0; j < d; j++)
            if ((int32_t)get32(pt + (size_t)j * SAM_TRANS_BYTES) == implicit_tok) inline_j = j, implicit_found = 1;
        for (uint32_t j = 0; j < d; j++, pt += SAM_TRANS_BYTES) {
            uint32_t tok = get32(pt), tgt = get32(pt + 4);
            if (tok > (uint32_t)SDN_SAM_MAX_TOKEN) return BAD("state %u: transition %u has token %d out of range", v, j, (int32_t)tok);
            if ((int32_t)tok <= prev)
                return BAD("state %u: transition tokens not strictly increasing (%d after %d)", v, (int32_t)tok, prev);
            if (tgt >= s->n_states || tgt == 0)
                return BAD("state %u: transition on token %u to state %u out of range", v, tok, tgt);
            if (s->hot[tgt].len <= len)
                return BAD("state %u: transition on token %u to a state that is not longer", v, tok);
            prev = (int32_t)tok;
            if (j == inline_j) s->hot[v].to0 = tgt;
        }
        /* table entries: the extras, plus one special entry if there are extras or the
         * inline token is explicit; the root's transitions all go to its own table */
        if (v == 0) s->hot[v].to0 = 0;
        else if (d > 1 || (d == 1 && !implicit_found)) extras += d; /* (d - 1) extras + 1 special */
    }
    if (seen_trans != n_trans) return BAD("transition counts sum to %llu, header says %u", (unsigned long long)seen_trans, n_trans);
    /* counts never exceed the parent's (end sets nest along suffix links) */
    for (uint32_t v = 1; v < s->n_states; v++)
        if (s->cold[v].cnt > s->cold[s->hot[v].link].cnt)
            return BAD("state %u: count %u above its suffix link's count %u", v, s->cold[v].cnt,
                       s->cold[s->hot[v].link].cnt);
    /* extra transitions into the hash table */
    int rc = sam_edge_reserve(s, extras, err);
    if (rc) return rc;
    pt = p + (size_t)s->n_states * SAM_STATE_BYTES;
    ps = p;
    uint32_t d_root = get32(ps + 20);
    for (uint32_t j = 0; j < d_root; j++, pt += SAM_TRANS_BYTES)
        if ((rc = sam_root_add(s, (int32_t)get32(pt), get32(pt + 4), err))) return rc;
    ps += SAM_STATE_BYTES;
    for (uint32_t v = 1; v < s->n_states; v++, ps += SAM_STATE_BYTES) {
        uint32_t d = get32(ps + 20), nextpos = s->hot[v].firstpos + 1;
        int32_t implicit_tok = nextpos < N ? s->tok[nextpos] : -1, inline_tok = -1;
        if (d) inline_tok = (int32_t)get32(pt); /* first, unless the implicit one exists */
        for (uint32_t j = 0; j < d; j++)
            if ((int32_t)get32(pt + (size_t)j * SAM_TRANS_BYTES) == implicit_tok) inline_tok = implicit_tok;
        if (d && inline_tok != implicit_tok) sam_edge_set_xtok(s, v, inline_tok);
        for (uint32_t j = 0; j < d; j++, pt += SAM_TRANS_BYTES)
            if ((int32_t)get32(pt) != inline_tok) sam_edge_add_extra(s, v, (int32_t)get32(pt), get32(pt + 4));
    }
    if (seq_open > 1) return BAD("sequence-open flag %u is not 0 or 1", seq_open);
    if (seq_open && !s->n_seq) return BAD("a sequence is open but there are none");
    if (last >= s->n_states) return BAD("last state %u out of range", last);
    if (!seq_open && last != 0) return BAD("last state %u but no open sequence", last);
    if (seq_open && s->hot[last].len > N - s->seq[s->n_seq - 1].start)
        return BAD("last state %u longer than the open sequence", last);
    s->seq_open = (int)seq_open;
    s->last = last;
    return SDN_OK;
}

int sdn_sam_deserialize(const uint8_t *buf, size_t len, sdn_sam **out, sdn_err *err) {
    return sdn_sam_deserialize_max(buf, len, SDN_SAM_MAX_TOKENS, out, err);
}

int sdn_sam_deserialize_max(const uint8_t *buf, size_t len, uint32_t max_tokens, sdn_sam **out, sdn_err *err) {
    *out = NULL;
    if (max_tokens > SDN_SAM_MAX_TOKENS) max_tokens = SDN_SAM_MAX_TOKENS;
    if (!buf && len) return sdn_fail(err, SDN_EINVAL, "serialized suffix automaton: NULL buffer");
    if (len < SAM_HEADER) return BAD("truncated: %zu bytes, the header alone is %u", len, SAM_HEADER);
    if (memcmp(buf, SAM_MAGIC, 8) != 0) return BAD("bad magic (not a suffix automaton)");
    if (get64(buf + 56) != XXH64(buf, 56, 0)) return BAD("header checksum mismatch (damaged header)");
    uint32_t version = get32(buf + 8), hbytes = get32(buf + 12);
    if (version == 0) return BAD("version 0 is invalid");
    if (version > SAM_VERSION)
        return sdn_fail(err, SDN_EUNSUP, "serialized suffix automaton: version %u is newer than supported (%u)",
                        version, SAM_VERSION);
    if (hbytes != SAM_HEADER) return BAD("header size %u, expected %u", hbytes, SAM_HEADER);
    uint32_t n_seq = get32(buf + 16), n_tok = get32(buf + 20), n_states = get32(buf + 24), n_trans = get32(buf + 28),
             last = get32(buf + 32), seq_open = get32(buf + 36), max_len = get32(buf + 40);
    if (get32(buf + 44) != 0) return BAD("reserved header field is not zero");
    if (n_tok > max_tokens) return BAD("%u tokens exceed the limit %u", n_tok, max_tokens);
    if (n_states == 0 || (uint64_t)n_states > 2ull * n_tok + 1 || n_states > SAM_MAX_STATES)
        return BAD("%u states impossible for %u tokens", n_states, n_tok);

    if (max_len > n_tok) return BAD("maximum length %u above the %u tokens", max_len, n_tok);
    uint64_t need = SAM_HEADER + (uint64_t)n_seq * SAM_SEQ_BYTES + (uint64_t)n_tok * SAM_TOK_BYTES +
                    (uint64_t)n_states * SAM_STATE_BYTES + (uint64_t)n_trans * SAM_TRANS_BYTES;
    if ((uint64_t)len < need) return BAD("truncated: %zu bytes, the header promises %llu", len, (unsigned long long)need);
    if ((uint64_t)len > need) return BAD("%llu trailing bytes after the data", (unsigned long long)(len - need));
    if (get64(buf + 48) != XXH64(buf + SAM_HEADER, len - SAM_HEADER, 0))
        return BAD("payload checksum mismatch (damaged data)");

    sdn_sam *s = calloc(1, sizeof *s);
    if (!s) return sdn_fail(err, SDN_ENOMEM, "suffix automaton: out of memory");
    s->hot = malloc((size_t)n_states * sizeof *s->hot);
    s->cold = malloc((size_t)n_states * sizeof *s->cold);
    s->tok = malloc((size_t)(n_tok ? n_tok : 1) * sizeof *s->tok);
    s->seq = malloc((size_t)(n_seq ? n_seq : 1) * sizeof *s->seq);
    if (!s->hot || !s->cold || !s->tok || !s->seq) {
        sdn_sam_free(s);
        return sdn_fail(err, SDN_ENOMEM, "suffix automaton: out of memory loading %u states", n_states);
    }
    s->n_states = s->cap_states = s->cap_cold = n_states;
    s->n_tok = n_tok, s->cap_tok = n_tok ? n_tok : 1;
    s->n_seq = n_seq, s->cap_seq = n_seq ? n_seq : 1;
    s->max_len = max_len;
    s->mat_tok = n_tok, s->mat_state = n_states; /* counts are stored applied */
    int rc = load_body(s, buf, n_trans, last, seq_open, err);
    if (rc) {
        sdn_sam_free(s);
        return rc;
    }
    *out = s;
    return SDN_OK;
}
