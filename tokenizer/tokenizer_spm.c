/* tokenizer_spm.c - SentencePiece-style BPE encoding ("llama" vocabularies, llama2.c).
 *
 * As SentencePiece's BPE model does it: spaces become U+2581 ("▁") and a dummy "▁" is put in
 * front of the text; the text starts as one symbol per UTF-8 character; a priority queue
 * holds every adjacent pair whose concatenation is a vocabulary piece, best score first
 * (ties: leftmost first); the best pair is merged and its new neighbours are queued, until
 * no pair is left. Only normal, user-defined and unused pieces take part in merges (never
 * control, <unk> or <0xNN> byte pieces). A merged piece that is marked unused is split
 * back into the two pieces it was made of. A symbol that is not a vocabulary piece falls back
 * to its UTF-8 bytes as <0xNN> tokens, or to <unk> (one per run) if the vocabulary has no
 * byte tokens. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_int.h"

typedef struct spm_sym {
    uint32_t off, len; /* bytes of the escaped text; len 0 = merged into its left neighbour */
    int32_t prev, next;
    int32_t node;      /* merge tree node (for resegmenting unused pieces) */
} spm_sym;

typedef struct spm_node {
    uint32_t off, len;
    int32_t left, right; /* children, -1 for a single character */
} spm_node;

typedef struct spm_bigram {
    float score;
    int32_t left, right;
    uint32_t size;
} spm_bigram;

typedef struct spm_heap {
    spm_bigram *a;
    size_t n, cap;
} spm_heap;

/* a comes out of the queue before b */
static int bg_before(const spm_bigram *a, const spm_bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static int heap_push(spm_heap *h, spm_bigram x) {
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 64;
        spm_bigram *p = realloc(h->a, nc * sizeof *p);
        if (!p) return SDN_ENOMEM;
        h->a = p;
        h->cap = nc;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bg_before(&x, &h->a[parent])) break;
        h->a[i] = h->a[parent];
        i = parent;
    }
    h->a[i] = x;
    return SDN_OK;
}

static spm_bigram heap_pop(spm_heap *h) {
    spm_bigram top = h->a[0];
    spm_bigram last = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && bg_before(&h->a[c + 1], &h->a[c])) c++;
        if (!bg_before(&h->a[c], &last)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->n) h->a[i] = last;
    return top;
}

static int mergeable(int ty) { return ty == SDN_TOKEN_NORMAL || ty == SDN_TOKEN_USER_DEFINED || ty == SDN_TOKEN_UNUSED; }

typedef struct spm_ctx {
    const sdn_tokenizer *t;
    const char *buf;
    spm_sym *sym;
    spm_node *node;
    int32_t n_node;
    spm_heap heap;
    tok_vec stack;
} spm_ctx;

static int try_add(spm_ctx *c, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return SDN_OK;
    uint32_t size = c->sym[l].len + c->sym[r].len;
    if (size > (uint32_t)c->t->max_piece) return SDN_OK;
    int32_t id = tok_map_get(c->t, c->buf + c->sym[l].off, size);
    if (id < 0 || !mergeable(c->t->type[id])) return SDN_OK;
    spm_bigram b = {c->t->score[id], l, r, size};
    return heap_push(&c->heap, b);
}

/* Emit the tokens of merge-tree node `root`, depth first with an explicit stack: unused
 * pieces split into their two parts, characters that are not pieces into bytes. */
static int emit(spm_ctx *c, int32_t root, int *prev_unk, tok_vec *out) {
    const sdn_tokenizer *t = c->t;
    int rc;
    c->stack.n = 0;
    if ((rc = tok_vec_push(&c->stack, root))) return rc;
    while (c->stack.n > 0) {
        const spm_node *n = &c->node[c->stack.v[--c->stack.n]];
        int32_t id = tok_map_get(t, c->buf + n->off, n->len);
        int ty = id >= 0 ? t->type[id] : 0;
        if (id >= 0 && ty == SDN_TOKEN_UNUSED && n->left >= 0) {
            if ((rc = tok_vec_push(&c->stack, n->right)) || (rc = tok_vec_push(&c->stack, n->left))) return rc;
            continue;
        }
        if (id >= 0 && mergeable(ty)) {
            if ((rc = tok_vec_push(out, id))) return rc;
            *prev_unk = 0;
            continue;
        }
        for (uint32_t k = 0; k < n->len; k++) {
            int32_t b = t->byte_id[(unsigned char)c->buf[n->off + k]];
            if (b >= 0) {
                if ((rc = tok_vec_push(out, b))) return rc;
                *prev_unk = 0;
            } else if (t->unk >= 0) {
                if (!*prev_unk && (rc = tok_vec_push(out, t->unk))) return rc;
                *prev_unk = 1;
            }
        }
    }
    return SDN_OK;
}

/* Merge the characters of buf[a, b) and emit their tokens. */
static int spm_segment(spm_ctx *c, size_t a, size_t b, int *prev_unk, tok_vec *out) {
    const char *buf = c->buf;
    int rc;
    int32_t ns = 0;
    for (size_t i = a; i < b;) {
        size_t l = (size_t)tok_utf8_len((unsigned char)buf[i]);
        if (l > b - i) l = b - i;
        c->sym[ns] = (spm_sym){(uint32_t)i, (uint32_t)l, ns - 1, -1, ns};
        c->node[ns] = (spm_node){(uint32_t)i, (uint32_t)l, -1, -1};
        if (ns > 0) c->sym[ns - 1].next = ns;
        ns++;
        i += l;
    }
    c->n_node = ns;
    c->heap.n = 0;
    for (int32_t i = 1; i < ns; i++)
        if ((rc = try_add(c, i - 1, i))) return rc;
    while (c->heap.n) {
        spm_bigram bg = heap_pop(&c->heap);
        spm_sym *L = &c->sym[bg.left], *R = &c->sym[bg.right];
        if (L->len == 0 || R->len == 0 || L->next != bg.right || L->len + R->len != bg.size) continue; /* stale */
        c->node[c->n_node] = (spm_node){L->off, bg.size, L->node, R->node};
        L->node = c->n_node++;
        L->len = bg.size;
        R->len = 0;
        L->next = R->next;
        if (R->next >= 0) c->sym[R->next].prev = bg.left;
        if ((rc = try_add(c, L->prev, bg.left))) return rc;
        if ((rc = try_add(c, bg.left, L->next))) return rc;
    }
    for (int32_t i = 0; i >= 0 && ns > 0; i = c->sym[i].next)
        if ((rc = emit(c, c->sym[i].node, prev_unk, out))) return rc;
    return SDN_OK;
}

static int is_ws(const char *p) { return (unsigned char)p[0] == 0xE2 && (unsigned char)p[1] == 0x96 && (unsigned char)p[2] == 0x81; }

int tok_spm_encode(const sdn_tokenizer *t, const char *s, size_t n, int prefix_space, tok_vec *out, sdn_err *err) {
    if (n == 0) return SDN_OK;
    /* escape: dummy prefix, ' ' -> U+2581 */
    size_t cap = 3 + n * 3;
    char *buf = malloc(cap);
    if (!buf) return sdn_fail(err, SDN_ENOMEM, "tokenizer: out of memory");
    size_t bn = 0;
    if (prefix_space) {
        memcpy(buf, "\xE2\x96\x81", 3);
        bn = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(buf + bn, "\xE2\x96\x81", 3);
            bn += 3;
        } else {
            buf[bn++] = s[i];
        }
    }
    spm_ctx c = {.t = t, .buf = buf};
    c.sym = malloc(bn * sizeof *c.sym);
    c.node = malloc(2 * bn * sizeof *c.node);
    int rc = SDN_OK, prev_unk = 0;
    if (!c.sym || !c.node) {
        rc = SDN_ENOMEM;
        goto done;
    }
    if (!t->spm_ws_split) {
        rc = spm_segment(&c, 0, bn, &prev_unk, out);
    } else {
        /* no piece reaches across a word start (U+2581 after another character): merge word by
         * word, which gives the same result as one queue over the whole text */
        size_t a = 0, prev = 0;
        for (size_t i = 0; i < bn && !rc;) {
            size_t l = (size_t)tok_utf8_len((unsigned char)buf[i]);
            if (l > bn - i) l = bn - i;
            if (i > a && l == 3 && is_ws(buf + i) && !(i - prev == 3 && is_ws(buf + prev))) {
                rc = spm_segment(&c, a, i, &prev_unk, out);
                a = i;
            }
            prev = i;
            i += l;
        }
        if (!rc) rc = spm_segment(&c, a, bn, &prev_unk, out);
    }
done:
    free(c.heap.a);
    free(c.stack.v);
    free(c.sym);
    free(c.node);
    free(buf);
    if (rc == SDN_ENOMEM) return sdn_fail(err, rc, "tokenizer: out of memory");
    return rc;
}
