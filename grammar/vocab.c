/* vocab.c - a model vocabulary against the matcher: each token's bytes (byte-fallback
 * tokens as their byte, SentencePiece's U+2581 as a space, byte-level BPE's mapped code
 * points as their bytes: tokenizer/tokenizer.c's sdn_tokenizer_token_bytes), a byte trie of
 * the vocabulary in preorder (walked once per whole-vocabulary mask, pruning every subtree
 * whose prefix the grammar rejects), single-token checks, and the constrained argmax that
 * checks candidates in descending logit order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"
#include "kernels/reduce.h"

enum { TK_TEXT = 0, TK_EOG = 1, TK_NEVER = 2 };

struct sdn_gvocab {
    int n;
    uint32_t *off, *len;
    uint8_t *bytes;
    uint8_t *kind;
    uint8_t *is_byte; /* byte-fallback tokens (their space is never dropped) */
    /* trie nodes in preorder: byte, depth (1 = first byte), index after the subtree,
     * tokens ending here tok[tok_off .. tok_off + tok_n) */
    uint32_t n_nodes;
    uint8_t *nbyte;
    uint32_t *ndepth, *nskip, *ntok_off, *ntok_n;
    /* the subtree of a node: its tokens are tok[nsub_a .. nsub_b), its bytes below 128 the
     * bits of nset[2 * node .. + 1], nna = 1 when it has bytes from 128 */
    uint32_t *nsub_a, *nsub_b;
    uint64_t *nset;
    uint8_t *nna;
    int32_t *tok; /* text tokens sorted by bytes */
    uint32_t max_len;
};

void sdn_gvocab_free(sdn_gvocab *v) {
    if (!v) return;
    free(v->off);
    free(v->len);
    free(v->bytes);
    free(v->kind);
    free(v->is_byte);
    free(v->nbyte);
    free(v->ndepth);
    free(v->nskip);
    free(v->ntok_off);
    free(v->ntok_n);
    free(v->nsub_a);
    free(v->nsub_b);
    free(v->nset);
    free(v->nna);
    free(v->tok);
    free(v);
}

int sdn_gvocab_n(const sdn_gvocab *v) { return v ? v->n : 0; }

static int cmp_tok(const void *a, const void *b, void *arg) {
    const sdn_gvocab *sort_v = arg;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = sort_v->len[x], ly = sort_v->len[y];
    int c = memcmp(sort_v->bytes + sort_v->off[x], sort_v->bytes + sort_v->off[y], lx < ly ? lx : ly);
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* The node at path[d] ends: where its subtree ends, and its bytes go to its parent. */
static void close_node(sdn_gvocab *v, const uint32_t *path, uint32_t d, uint32_t next_node, uint32_t next_tok) {
    uint32_t x = path[d];
    v->nskip[x] = next_node;
    v->nsub_b[x] = next_tok;
    if (d > 0) {
        uint32_t p = path[d - 1];
        v->nset[2 * p] |= v->nset[2 * x];
        v->nset[2 * p + 1] |= v->nset[2 * x + 1];
        v->nna[p] |= v->nna[x];
    }
}

int sdn_gvocab_new(const sdn_tokenizer *t, sdn_gvocab **out, sdn_err *err) {
    if (!t || !out) return sdn_fail(err, SDN_EINVAL, "grammar: no tokenizer or output pointer");
    *out = NULL;
    int n = sdn_tokenizer_n_vocab(t);
    sdn_gvocab *v = calloc(1, sizeof *v);
    if (!v) return sdn_fail(err, SDN_ENOMEM, "grammar: out of memory (vocabulary)");
    v->n = n;
    v->off = calloc((size_t)n + 1, sizeof *v->off);
    v->len = calloc((size_t)n + 1, sizeof *v->len);
    v->kind = calloc((size_t)n + 1, 1);
    v->is_byte = calloc((size_t)n + 1, 1);
    v->tok = calloc((size_t)n + 1, sizeof *v->tok);
    size_t cap = 1 << 16, used = 0;
    v->bytes = malloc(cap);
    if (!v->off || !v->len || !v->kind || !v->is_byte || !v->tok || !v->bytes) goto oom;
    char tmp[256];
    for (int i = 0; i < n; i++) {
        int ty = sdn_tokenizer_token_type(t, i);
        v->is_byte[i] = ty == SDN_TOKEN_BYTE;
        if (sdn_tokenizer_is_eog(t, i)) v->kind[i] = TK_EOG;
        else if (ty == SDN_TOKEN_CONTROL || ty == SDN_TOKEN_UNKNOWN || ty == SDN_TOKEN_UNUSED || ty == SDN_TOKEN_UNDEFINED)
            v->kind[i] = TK_NEVER;
        size_t l = sdn_tokenizer_token_bytes(t, i, tmp, sizeof tmp);
        if (l > UINT32_MAX / 2) goto oom;
        while (used + l > cap) {
            cap *= 2;
            uint8_t *b = realloc(v->bytes, cap);
            if (!b) goto oom;
            v->bytes = b;
        }
        if (l <= sizeof tmp) memcpy(v->bytes + used, tmp, l);
        else sdn_tokenizer_token_bytes(t, i, (char *)v->bytes + used, l);
        v->off[i] = (uint32_t)used;
        v->len[i] = (uint32_t)l;
        used += l;
        if (v->kind[i] == TK_TEXT && l == 0) v->kind[i] = TK_NEVER; /* no progress: never */
    }
    /* trie */
    int nt = 0;
    for (int i = 0; i < n; i++)
        if (v->kind[i] == TK_TEXT) v->tok[nt++] = i;
    qsort_r(v->tok, (size_t)nt, sizeof *v->tok, cmp_tok, v); /* glibc's (the build defines _GNU_SOURCE) */
    size_t ncap = used + 1;
    v->nbyte = malloc(ncap);
    v->ndepth = malloc(ncap * sizeof(uint32_t));
    v->nskip = malloc(ncap * sizeof(uint32_t));
    v->ntok_off = malloc(ncap * sizeof(uint32_t));
    v->ntok_n = malloc(ncap * sizeof(uint32_t));
    v->nsub_a = malloc(ncap * sizeof(uint32_t));
    v->nsub_b = malloc(ncap * sizeof(uint32_t));
    v->nset = calloc(ncap * 2, sizeof(uint64_t));
    v->nna = calloc(ncap, 1);
    uint32_t maxl = 0;
    for (int k = 0; k < nt; k++)
        if (v->len[v->tok[k]] > maxl) maxl = v->len[v->tok[k]];
    uint32_t *path = malloc(((size_t)maxl + 1) * sizeof *path);
    if (!v->nbyte || !v->ndepth || !v->nskip || !v->ntok_off || !v->ntok_n || !v->nsub_a || !v->nsub_b || !v->nset || !v->nna || !path) {
        free(path);
        goto oom;
    }
    uint32_t depth = 0, nn = 0;
    const uint8_t *prev = NULL;
    for (int k = 0; k < nt; k++) {
        int32_t id = v->tok[k];
        const uint8_t *b = v->bytes + v->off[id];
        uint32_t l = v->len[id], c = 0;
        if (prev)
            while (c < depth && c < l && prev[c] == b[c]) c++;
        while (depth > c) close_node(v, path, --depth, nn, (uint32_t)k);
        while (depth < l) {
            v->nbyte[nn] = b[depth];
            v->ndepth[nn] = depth + 1;
            v->ntok_off[nn] = 0;
            v->ntok_n[nn] = 0;
            v->nsub_a[nn] = (uint32_t)k;
            if (b[depth] < 128) v->nset[2 * nn + (b[depth] >> 6)] |= 1ull << (b[depth] & 63);
            else v->nna[nn] = 1;
            path[depth++] = nn++;
        }
        uint32_t node = path[l - 1];
        if (!v->ntok_n[node]) v->ntok_off[node] = (uint32_t)k;
        v->ntok_n[node]++;
        prev = b;
    }
    while (depth > 0) close_node(v, path, --depth, nn, (uint32_t)nt);
    free(path);
    v->n_nodes = nn;
    v->max_len = maxl;
    *out = v;
    return SDN_OK;
oom:
    sdn_gvocab_free(v);
    return sdn_fail(err, SDN_ENOMEM, "grammar: out of memory (vocabulary)");
}

/* The bytes of text token tok the grammar sees from s: without the leading space while
 * sdn_gstate_set_skip_leading_space is on (byte-fallback tokens keep theirs). */
static const uint8_t *tok_text(const sdn_gstate *s, const sdn_gvocab *v, int32_t tok, size_t *n) {
    const uint8_t *b = v->bytes + v->off[tok];
    *n = v->len[tok];
    if (s->skip_ls && !v->is_byte[tok] && *n && b[0] == ' ') {
        b++;
        (*n)--;
    }
    return b;
}

int sdn_gstate_allows(const sdn_gstate *s, const sdn_gvocab *v, int32_t tok) {
    if (!s || !v || tok < 0 || tok >= v->n || s->ended) return 0;
    if (v->kind[tok] == TK_EOG) return sdn_gstate_can_end(s);
    if (v->kind[tok] != TK_TEXT) return 0;
    size_t n;
    const uint8_t *b = tok_text(s, v, tok, &n);
    if (!n) return 1;
    int which;
    return gs_run(s, b, n, &which) == 1;
}

int sdn_gstate_accept_token(sdn_gstate *s, const sdn_gvocab *v, int32_t tok) {
    if (!s || !v || tok < 0 || tok >= v->n || s->ended) return 0;
    if (v->kind[tok] == TK_EOG) {
        if (!sdn_gstate_can_end(s)) return 0;
        gs_set_ended(s);
        return 1;
    }
    if (v->kind[tok] != TK_TEXT) return 0;
    size_t n;
    const uint8_t *b = tok_text(s, v, tok, &n);
    int r = n ? sdn_gstate_accept_bytes(s, b, n) : 1;
    if (r == 1) s->skip_ls = 0;
    return r;
}

/* Same stack sets (in any order), same partial character? */
static int gs_equal(const sdn_gstate *a, const sdn_gstate *b) {
    if (a->n != b->n || a->nw != b->nw || a->ended != b->ended || a->pu_need != b->pu_need || a->pu_n != b->pu_n ||
        memcmp(a->pu, b->pu, a->pu_n))
        return 0;
    for (uint32_t i = 0; i < a->n; i++) {
        const uint32_t *x = a->w + a->off[i];
        uint32_t nx = 3 + x[0] + (x[1] + 3) / 4, j;
        for (j = 0; j < b->n; j++)
            if (b->hash[j] == a->hash[i] && !memcmp(b->w + b->off[j], x, sizeof(uint32_t) * nx)) break;
        if (j == b->n) return 0;
    }
    return 1;
}

/* Walk the trie from s: s->allowed[tok] = 1 for every allowed token. Returns the count or
 * -1 (out of memory). Inside a repetition (a string's characters, digits) most bytes lead
 * back to the very state they leave: those bytes (found once per walk) cost no step, and a
 * step whose result equals the start state continues as the start state. */
static int walk(const sdn_gstate *cs, const sdn_gvocab *v) {
    sdn_gstate *s = (sdn_gstate *)cs; /* scratch memory of a state owned by one thread */
    if (s->n_allowed < v->n) {
        uint8_t *a = realloc(s->allowed, (size_t)v->n);
        if (!a) return -1;
        s->allowed = a;
        s->n_allowed = v->n;
    }
    memset(s->allowed, 0, (size_t)v->n);
    if (s->ended) return 0;
    if (s->n_dfs < v->max_len + 1) {
        sdn_gstate **d = realloc(s->dfs, sizeof *d * (v->max_len + 1));
        if (!d) return -1;
        s->dfs = d;
        for (uint32_t k = s->n_dfs; k <= v->max_len; k++) d[k] = NULL;
        s->n_dfs = v->max_len + 1;
    }
    for (uint32_t k = 0; k <= v->max_len; k++)
        if (!s->dfs[k] && !(s->dfs[k] = gs_alloc(s->g))) return -1;
    /* bytes that loop on s: 0 not known yet, 1 loops, 2 does not. When a letter or a space
     * loops (inside a string), all of ASCII is tried at once: then a subtree whose bytes all
     * loop is allowed whole, without a step (its tokens are a contiguous run). */
    uint8_t loop[256] = {0};
    uint64_t lmask[2] = {0, 0};
    int full = 0;
    if (!s->pu_need) {
        for (int probe = 0; probe < 2 && !full; probe++) {
            uint8_t b = probe ? ' ' : 'e';
            if (gs_step(s->dfs[0], s, b) == 1 && gs_equal(s->dfs[0], s)) full = 1;
        }
        if (full)
            for (int b = 0; b < 128; b++) {
                loop[b] = gs_step(s->dfs[0], s, (uint8_t)b) == 1 && gs_equal(s->dfs[0], s) ? 1 : 2;
                if (loop[b] == 1) lmask[b >> 6] |= 1ull << (b & 63);
            }
    }
    const sdn_gstate *curbuf[257];
    const sdn_gstate **cur = v->max_len < 256 ? curbuf : malloc(sizeof *cur * (v->max_len + 1));
    if (!cur) return -1;
    cur[0] = s;
    int cnt = 0;
    uint32_t i = 0;
    while (i < v->n_nodes) {
        uint32_t d = v->ndepth[i];
        const sdn_gstate *par = cur[d - 1];
        uint8_t b = v->nbyte[i];
        if (full && par == s && !v->nna[i] && !(v->nset[2 * i] & ~lmask[0]) && !(v->nset[2 * i + 1] & ~lmask[1])) {
            for (uint32_t k = v->nsub_a[i]; k < v->nsub_b[i]; k++) s->allowed[v->tok[k]] = 1;
            cnt += (int)(v->nsub_b[i] - v->nsub_a[i]);
            i = v->nskip[i];
            continue;
        }
        if (d == 1 && b == ' ' && s->skip_ls) {
            /* the leading space is dropped: the subtree continues from s; a byte-fallback
             * token " " keeps its space */
            cur[1] = s;
            int sp = -1;
            for (uint32_t k = 0; k < v->ntok_n[i]; k++) {
                int32_t t = v->tok[v->ntok_off[i] + k];
                if (v->is_byte[t]) {
                    if (sp < 0) sp = gs_step(s->dfs[1], s, ' ') == 1;
                    if (!sp) continue;
                }
                s->allowed[t] = 1;
                cnt++;
            }
            i++;
            continue;
        }
        if (par == s && loop[b] == 1) cur[d] = s;
        else {
            int r = gs_step(s->dfs[d], par, b);
            if (r != 1) {
                i = v->nskip[i];
                continue;
            }
            int same = (par != s || !loop[b]) && gs_equal(s->dfs[d], s);
            if (par == s && !loop[b]) loop[b] = same ? 1 : 2;
            cur[d] = same ? s : s->dfs[d];
        }
        for (uint32_t k = 0; k < v->ntok_n[i]; k++) {
            s->allowed[v->tok[v->ntok_off[i] + k]] = 1;
            cnt++;
        }
        i++;
    }
    if (cur != curbuf) free(cur);
    if (sdn_gstate_can_end(s))
        for (int t = 0; t < v->n; t++)
            if (v->kind[t] == TK_EOG) {
                s->allowed[t] = 1;
                cnt++;
            }
    return cnt;
}

int sdn_gstate_mask(const sdn_gstate *s, const sdn_gvocab *v, float *logits) {
    if (!s || !v || !logits) return 0;
    int cnt = walk(s, v);
    if (cnt < 0) {
        /* out of memory: fall back to one check per token */
        cnt = 0;
        for (int t = 0; t < v->n; t++) {
            if (sdn_gstate_allows(s, v, t)) cnt++;
            else logits[t] = -INFINITY;
        }
        return cnt;
    }
    for (int t = 0; t < v->n; t++)
        if (!s->allowed[t]) logits[t] = -INFINITY;
    return cnt;
}

/* Candidate order (sdn_topk_before, kernels/reduce.h): larger logit first, lower id among equal
 * logits. */
int32_t sdn_gstate_argmax(const sdn_gstate *s, const sdn_gvocab *v, const float *logits) {
    if (!s || !v || !logits || s->ended || v->n <= 0) return -1;
    /* the unconstrained argmax first (sdn_argmax's rule): the typical case */
    const int32_t top_i = sdn_argmax_f32(logits, v->n);
    const float top_v = logits[top_i];
    if (sdn_gstate_allows(s, v, top_i)) return top_i;
    /* the next 8 in logit order (the argmax was the first; kernels/reduce.h, the same candidates
     * as its scalar loop, NaNs included) */
    enum { K = 8 };
    float cv[K];
    int32_t ci[K];
    const int m = sdn_topk_after(logits, v->n, top_v, top_i, K, cv, ci);
    for (int j = 0; j < m; j++)
        if (sdn_gstate_allows(s, v, ci[j])) return ci[j];
    if (m < K) return -1; /* every token checked */
    /* the model disagrees with the grammar: one walk of the vocabulary */
    int cnt = walk(s, v);
    int32_t best = -1;
    if (cnt < 0) {
        for (int32_t t = 0; t < v->n; t++)
            if ((best < 0 || sdn_topk_before(logits[t], t, logits[best], best)) && sdn_gstate_allows(s, v, t)) best = t;
        return best;
    }
    for (int32_t t = 0; t < v->n; t++)
        if (s->allowed[t] && (best < 0 || sdn_topk_before(logits[t], t, logits[best], best))) best = t;
    return best;
}
