/* tokenizer_bpe.c - byte-level BPE ("gpt2" vocabularies: GPT-2, Llama 3, Qwen2, SmolLM ...).
 *
 * 1. Pre-tokenize: the regexes of the model's pre-tokenizer (`tokenizer.ggml.pre`, table
 *    below, PCRE2 with UTF + Unicode properties, JIT-compiled once per tokenizer) are applied
 *    in order; each one splits every fragment into its matches and the gaps between them.
 * 2. Each fragment is a "word"; its bytes map to GPT-2's printable code points
 *    (bytes_to_unicode), so every byte is a one-character token of the vocabulary.
 * 3. Merge: a priority queue holds adjacent token pairs that appear in
 *    `tokenizer.ggml.merges`, lowest rank first (ties: leftmost); the best pair becomes the
 *    merged token and its new neighbour pairs are queued. Pairs are looked up by token ids
 *    in a hash table built when loading, so merging never touches strings.
 *    Llama 3 style pre-tokenizers ("ignore_merges") take a word that is itself a vocabulary
 *    token as one token without merging.
 *
 * `\s` / `\S` in the regexes are spelled out as the Unicode White_Space set (as in the
 * Rust/Python regex engines the models' tokenizers use), not PCRE2's own \s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcre2.h>
#include <xxhash.h>

#include "tokenizer/tokenizer_int.h"

/* ---- GPT-2 bytes_to_unicode: printable bytes map to themselves, the other 68 bytes (0-32,
 * 127-160, 173) to U+0100.. in byte order. */
static uint32_t tok_bpe_byte_to_cp(unsigned char b) {
    if (b <= 32) return 256u + b;
    if (b >= 127 && b <= 160) return 162u + b; /* 289..322 */
    if (b == 173) return 323;
    return b;
}

int tok_bpe_cp_to_byte(uint32_t cp) {
    if (cp < 256) return (cp <= 32 || (cp >= 127 && cp <= 160) || cp == 173) ? -1 : (int)cp;
    if (cp <= 288) return (int)(cp - 256);
    if (cp <= 322) return (int)(cp - 162);
    if (cp == 323) return 173;
    return -1;
}

/* ---- pre-tokenizers */

#define WS "\\t\\n\\x0B\\f\\r\\x20\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

/* GPT-2 (and SmolLM's second stage) */
static const char RE_GPT2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS "])";
/* Llama 3 (tiktoken cl100k-style) */
static const char RE_LLAMA3[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|[" WS
                                "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+";
/* Qwen2: as Llama 3 but single digits */
static const char RE_QWEN2[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|[" WS
                               "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+";
static const char RE_DIGIT[] = "\\p{N}";
/* llama.cpp's "default" set, used for files without tokenizer.ggml.pre */
static const char RE_DEF1[] = "[\\p{P}\\$\\+<=>\\^~\\|]+";
static const char RE_DEF3[] = "\\p{N}+";
static const char RE_DEF4[] = "[0-9][0-9][0-9]";

typedef struct pre_def {
    const char *names; /* '|'-separated values of tokenizer.ggml.pre */
    int ignore_merges;
    const char *re[SDN_PRE_MAX_RE];
} pre_def;

static const pre_def k_pre[] = {
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2", 1, {RE_LLAMA3}},
    {"dbrx|smaug-bpe|chatglm-bpe|glm4", 0, {RE_LLAMA3}},
    {"qwen2|deepseek-r1-qwen|megrez|stablelm2|hunyuan", 0, {RE_QWEN2}},
    {"gpt-2|phi-2|mpt|olmo|jais|exaone4|gigachat|jina-es|jina-de|jina-v2-es|jina-v2-de|a.x-4.0|mellum|trillion|granite-docling", 0, {RE_GPT2}},
    {"smollm|starcoder|refact|command-r|codeshell|exaone|minerva-7b", 0, {RE_DIGIT, RE_GPT2}},
    {"default", 0, {RE_DEF1, RE_GPT2, RE_DEF3, RE_DEF4}},
};

static int name_in(const char *list, const char *name) {
    size_t nl = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, '|');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == nl && !memcmp(p, name, l)) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

void tok_bpe_free(sdn_tokenizer *t) {
    for (int k = 0; k < t->pre.n_re; k++) pcre2_code_free((pcre2_code *)t->pre.code[k]);
    t->pre.n_re = 0;
    free(t->merges.key);
    free(t->merges.rank);
    free(t->merges.result);
    t->merges.key = NULL;
    t->merges.rank = t->merges.result = NULL;
}

int tok_bpe_setup(sdn_tokenizer *t, const char *pre, const char *path, sdn_err *err) {
    const pre_def *d = NULL;
    const char *name = pre;
    if (!pre || !*pre) {
        tok_warn(t, "%s: tokenizer.ggml.pre is missing; using the 'default' pre-tokenizer (as llama.cpp does) - tokenization may differ from the model's", path);
        name = "default";
    }
    for (size_t k = 0; k < sizeof k_pre / sizeof k_pre[0]; k++)
        if (name_in(k_pre[k].names, name)) d = &k_pre[k];
    if (!d)
        return sdn_fail(err, SDN_EUNSUP,
                        "%s: tokenizer.ggml.pre = '%s' is not a known pre-tokenizer (known: llama-bpe/llama3, qwen2, gpt-2, smollm, "
                        "default and their aliases, see docs/tokenizer.md)",
                        path, pre);
    snprintf(t->pre_name, sizeof t->pre_name, "%s", name);
    t->ignore_merges = d->ignore_merges;
    for (int k = 0; k < SDN_PRE_MAX_RE && d->re[k]; k++) {
        int ec;
        PCRE2_SIZE eo;
        pcre2_code *code = pcre2_compile((PCRE2_SPTR)d->re[k], PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
        if (!code) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(ec, msg, sizeof msg);
            return sdn_fail(err, SDN_EUNSUP, "%s: pre-tokenizer '%s': regex %d does not compile at offset %zu: %s", path, name, k, (size_t)eo,
                            (const char *)msg);
        }
        t->pre.code[k] = code;
        t->pre.jit[k] = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
        t->pre.n_re = k + 1;
    }
    int missing = 0;
    for (int b = 0; b < 256; b++) {
        char u[4];
        uint32_t cp = tok_bpe_byte_to_cp((unsigned char)b);
        size_t l;
        if (cp < 0x80) {
            u[0] = (char)cp;
            l = 1;
        } else {
            u[0] = (char)(0xC0 | (cp >> 6));
            u[1] = (char)(0x80 | (cp & 0x3F));
            l = 2;
        }
        t->byte_id[b] = tok_map_get(t, u, l);
        if (t->byte_id[b] < 0) missing++;
    }
    if (missing) {
        /* Listed bytes are dropped when encoding (as llama.cpp does). Vocabularies such as
         * SmolLM2's lack only control bytes and bytes that (almost) never occur in UTF-8 text
         * (0xC0, 0xC1, leads of 4-byte sequences past U+3FFFF): recorded for `info` but not
         * printed; any other missing byte is warned about. */
        char list[256 * 5 + 1];
        size_t o = 0;
        int rare = 1;
        for (int b = 0; b < 256; b++)
            if (t->byte_id[b] < 0) {
                o += (size_t)snprintf(list + o, sizeof list - o, " %02X", b);
                if (!((b < 0x20 && b != '\t' && b != '\n' && b != '\r') || b == 0x7F || b == 0xC0 || b == 0xC1 || b >= 0xF1)) rare = 0;
            }
        tok_warn_opt(t, !rare, "%s: %d of the 256 byte tokens of byte-level BPE are missing (bytes%s); those bytes are dropped when encoding", path,
                     missing, list);
    }
    return SDN_OK;
}

/* ---- merging */

typedef struct bpe_bigram {
    int32_t rank, left, right, id_l, id_r;
} bpe_bigram;

typedef struct bpe_work {
    int32_t *id, *prev, *next;
    size_t cap;
    bpe_bigram *heap;
    size_t hn, hcap;
    char *mapped;
    size_t mcap;
    /* fragments */
    size_t *fa, *fb;
    size_t fan, fbn, facap, fbcap;
    pcre2_match_data *md[SDN_PRE_MAX_RE];
    pcre2_jit_stack *jstack;
    pcre2_match_context *mctx;
} bpe_work;

static int bg_before(const bpe_bigram *a, const bpe_bigram *b) { return a->rank < b->rank || (a->rank == b->rank && a->left < b->left); }

static int hpush(bpe_work *w, bpe_bigram x) {
    if (w->hn == w->hcap) {
        size_t nc = w->hcap ? w->hcap * 2 : 64;
        bpe_bigram *p = realloc(w->heap, nc * sizeof *p);
        if (!p) return SDN_ENOMEM;
        w->heap = p;
        w->hcap = nc;
    }
    size_t i = w->hn++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bg_before(&x, &w->heap[parent])) break;
        w->heap[i] = w->heap[parent];
        i = parent;
    }
    w->heap[i] = x;
    return SDN_OK;
}

static bpe_bigram hpop(bpe_work *w) {
    bpe_bigram top = w->heap[0], last = w->heap[--w->hn];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= w->hn) break;
        if (c + 1 < w->hn && bg_before(&w->heap[c + 1], &w->heap[c])) c++;
        if (!bg_before(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (w->hn) w->heap[i] = last;
    return top;
}

static int merge_lookup(const sdn_tokenizer *t, int32_t a, int32_t b, int32_t *rank, int32_t *result) {
    const merge_map *m = &t->merges;
    if (!m->key) return 0;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint64_t h = (uint64_t)XXH3_64bits(&key, sizeof key) & m->mask;
    for (;;) {
        uint64_t k = m->key[h];
        if (k == UINT64_MAX) return 0;
        if (k == key) {
            *rank = m->rank[h];
            *result = m->result[h];
            return 1;
        }
        h = (h + 1) & m->mask;
    }
}

static int try_pair(const sdn_tokenizer *t, bpe_work *w, int32_t l, int32_t r) {
    if (l < 0 || r < 0 || w->id[l] < 0 || w->id[r] < 0) return SDN_OK;
    int32_t rank, res;
    if (!merge_lookup(t, w->id[l], w->id[r], &rank, &res)) return SDN_OK;
    (void)res;
    bpe_bigram b = {rank, l, r, w->id[l], w->id[r]};
    return hpush(w, b);
}

static int encode_word(const sdn_tokenizer *t, bpe_work *w, const unsigned char *s, size_t n, tok_vec *out) {
    int rc;
    if (n == 1) return t->byte_id[s[0]] >= 0 ? tok_vec_push(out, t->byte_id[s[0]]) : SDN_OK;
    if (t->ignore_merges) {
        if (w->mcap < 2 * n) {
            char *p = realloc(w->mapped, 2 * n);
            if (!p) return SDN_ENOMEM;
            w->mapped = p;
            w->mcap = 2 * n;
        }
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t cp = tok_bpe_byte_to_cp(s[i]);
            if (cp < 0x80) w->mapped[m++] = (char)cp;
            else {
                w->mapped[m++] = (char)(0xC0 | (cp >> 6));
                w->mapped[m++] = (char)(0x80 | (cp & 0x3F));
            }
        }
        int32_t id = m <= (size_t)t->max_piece ? tok_map_get(t, w->mapped, m) : -1;
        if (id >= 0) return tok_vec_push(out, id);
    }
    if (w->cap < n) {
        size_t nc = n < 64 ? 64 : n;
        int32_t *a = realloc(w->id, nc * sizeof *a), *b = a ? realloc(w->prev, nc * sizeof *b) : NULL, *c = b ? realloc(w->next, nc * sizeof *c) : NULL;
        if (a) w->id = a;
        if (b) w->prev = b;
        if (c) w->next = c;
        if (!a || !b || !c) return SDN_ENOMEM;
        w->cap = nc;
    }
    for (size_t i = 0; i < n; i++) {
        w->id[i] = t->byte_id[s[i]];
        w->prev[i] = (int32_t)i - 1;
        w->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    w->hn = 0;
    for (size_t i = 1; i < n; i++)
        if ((rc = try_pair(t, w, (int32_t)i - 1, (int32_t)i))) return rc;
    while (w->hn) {
        bpe_bigram b = hpop(w);
        int32_t l = b.left, r = b.right;
        if (w->next[l] != r || w->id[l] != b.id_l || w->id[r] != b.id_r) continue; /* stale */
        int32_t rank, res = -1;
        merge_lookup(t, b.id_l, b.id_r, &rank, &res);
        w->id[l] = res;
        w->id[r] = -1;
        w->next[l] = w->next[r];
        if (w->next[r] >= 0) w->prev[w->next[r]] = l;
        w->next[r] = -2; /* dead */
        if ((rc = try_pair(t, w, w->prev[l], l))) return rc;
        if ((rc = try_pair(t, w, l, w->next[l]))) return rc;
    }
    for (int32_t i = 0; i >= 0; i = w->next[i])
        if (w->id[i] >= 0 && (rc = tok_vec_push(out, w->id[i]))) return rc;
    return SDN_OK;
}

/* ---- splitting */

static int frag_push(size_t **a, size_t *n, size_t *cap, size_t off, size_t len) {
    if (*n + 2 > *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        size_t *p = realloc(*a, nc * sizeof *p);
        if (!p) return SDN_ENOMEM;
        *a = p;
        *cap = nc;
    }
    (*a)[(*n)++] = off;
    (*a)[(*n)++] = len;
    return SDN_OK;
}

static int run_match(const sdn_tokenizer *t, bpe_work *w, int k, const char *subj, size_t n, size_t start) {
    pcre2_code *code = (pcre2_code *)t->pre.code[k];
    int rc;
    if (t->pre.jit[k]) {
        rc = pcre2_jit_match(code, (PCRE2_SPTR)subj, n, start, PCRE2_NO_UTF_CHECK, w->md[k], w->mctx);
        if (rc != PCRE2_ERROR_JIT_STACKLIMIT) return rc;
        if (!w->jstack) {
            w->jstack = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, NULL);
            if (!w->mctx) w->mctx = pcre2_match_context_create(NULL);
            if (w->jstack && w->mctx) {
                pcre2_jit_stack_assign(w->mctx, NULL, w->jstack);
                rc = pcre2_jit_match(code, (PCRE2_SPTR)subj, n, start, PCRE2_NO_UTF_CHECK, w->md[k], w->mctx);
                if (rc != PCRE2_ERROR_JIT_STACKLIMIT) return rc;
            }
        }
    }
    /* interpreter: no JIT, or the JIT stack was not enough */
    return pcre2_match(code, (PCRE2_SPTR)subj, n, start, PCRE2_NO_UTF_CHECK, w->md[k], NULL);
}

/* Split fragment [off, off+len) of s with regex k into matches and gaps, appended to dst. */
static int split(const sdn_tokenizer *t, bpe_work *w, int k, const char *s, size_t off, size_t len, size_t **dst, size_t *dn, size_t *dcap,
                 sdn_err *err) {
    const char *subj = s + off;
    size_t pos = 0, last = 0;
    int rc;
    while (pos < len) {
        int m = run_match(t, w, k, subj, len, pos);
        if (m == PCRE2_ERROR_NOMATCH) break;
        if (m < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(m, msg, sizeof msg);
            return sdn_fail(err, SDN_EINVAL, "tokenizer: pre-tokenizer '%s' failed on the text: %s", t->pre_name, (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(w->md[k]);
        size_t a = ov[0], b = ov[1];
        if (b == a) { /* empty match: step over one character, it joins the next gap */
            pos = a + (size_t)tok_utf8_len((unsigned char)subj[a]);
            continue;
        }
        if (a > last && (rc = frag_push(dst, dn, dcap, off + last, a - last))) return rc;
        if ((rc = frag_push(dst, dn, dcap, off + a, b - a))) return rc;
        pos = last = b;
    }
    if (last < len && (rc = frag_push(dst, dn, dcap, off + last, len - last))) return rc;
    return SDN_OK;
}

int tok_bpe_encode(const sdn_tokenizer *t, const char *s, size_t n, tok_vec *out, sdn_err *err) {
    if (n == 0) return SDN_OK;
    bpe_work w;
    memset(&w, 0, sizeof w);
    int rc = SDN_OK;
    for (int k = 0; k < t->pre.n_re; k++) {
        w.md[k] = pcre2_match_data_create_from_pattern((pcre2_code *)t->pre.code[k], NULL);
        if (!w.md[k]) {
            rc = SDN_ENOMEM;
            goto done;
        }
    }
    if ((rc = frag_push(&w.fa, &w.fan, &w.facap, 0, n))) goto done;
    for (int k = 0; k < t->pre.n_re; k++) {
        w.fbn = 0;
        for (size_t f = 0; f < w.fan; f += 2)
            if ((rc = split(t, &w, k, s, w.fa[f], w.fa[f + 1], &w.fb, &w.fbn, &w.fbcap, err))) goto done;
        size_t *tp = w.fa, tc = w.facap;
        w.fa = w.fb;
        w.fan = w.fbn;
        w.facap = w.fbcap;
        w.fb = tp;
        w.fbcap = tc;
    }
    for (size_t f = 0; f < w.fan; f += 2)
        if ((rc = encode_word(t, &w, (const unsigned char *)s + w.fa[f], w.fa[f + 1], out))) goto done;
done:
    for (int k = 0; k < t->pre.n_re; k++) pcre2_match_data_free(w.md[k]);
    if (w.mctx) pcre2_match_context_free(w.mctx);
    if (w.jstack) pcre2_jit_stack_free(w.jstack);
    free(w.id);
    free(w.prev);
    free(w.next);
    free(w.heap);
    free(w.mapped);
    free(w.fa);
    free(w.fb);
    if (rc == SDN_ENOMEM) return sdn_fail(err, rc, "tokenizer: out of memory");
    return rc;
}
