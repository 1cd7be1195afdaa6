/* tokenizer.c - the common part of the tokenizer: loading the vocabulary from GGUF or from a
 * llama2.c tokenizer.bin, the piece -> id hash map, special-token matching, the UTF-8 rules,
 * and decoding (whole arrays and the streaming detokenizer).
 *
 * Encoding first replaces invalid UTF-8 (one U+FFFD per byte that is not part of a
 * well-formed sequence), then cuts the text at special tokens (leftmost-longest match; control
 * tokens only when the caller asks, added "user-defined" tokens always), and hands each
 * stretch of ordinary text to the SentencePiece (tokenizer_spm.c) or byte-level BPE
 * (tokenizer_bpe.c) encoder. Decoding turns every id into bytes and runs them through one
 * small UTF-8 state machine that holds incomplete characters and replaces stray bytes. */
#include "tokenizer/tokenizer_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "common/sdn_log.h"
#include "common/sdn_util.h"

/* ------------------------------------------------------------------------------------ */
/* small helpers                                                                          */

int tok_vec_push(tok_vec *a, int32_t x) {
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 64;
        int32_t *p = realloc(a->v, nc * sizeof *p);
        if (!p) return SDN_ENOMEM;
        a->v = p;
        a->cap = nc;
    }
    a->v[a->n++] = x;
    return SDN_OK;
}

static void tok_record(sdn_tokenizer *t, int print, const char *fmt, va_list ap) {
    char buf[1536];
    vsnprintf(buf, sizeof buf, fmt, ap);
    if (print) sdn_log(SDN_LOG_WARN, "%s", buf);
    size_t used = strlen(t->warnings);
    if (used + strlen(buf) + 2 < sizeof t->warnings) snprintf(t->warnings + used, sizeof t->warnings - used, "%s\n", buf);
}

void tok_warn(sdn_tokenizer *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tok_record(t, 1, fmt, ap);
    va_end(ap);
}

void tok_warn_opt(sdn_tokenizer *t, int print, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tok_record(t, print, fmt, ap);
    va_end(ap);
}

/* Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlongs, no surrogates,
 * at most U+10FFFF), 0 if the bytes there do not start one. */
static size_t utf8_valid_at(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    if (c < 0xC2 || c > 0xF4) return 0;
    size_t need = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (n < need) return 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c == 0xE0) lo = 0xA0;
    else if (c == 0xED) hi = 0x9F;
    else if (c == 0xF0) lo = 0x90;
    else if (c == 0xF4) hi = 0x8F;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t k = 2; k < need; k++)
        if (s[k] < 0x80 || s[k] > 0xBF) return 0;
    return need;
}

/* The invalid-UTF-8 rule: a copy of s with every byte that does not belong to a well-formed
 * sequence replaced by U+FFFD. Returns NULL if s is already valid (use it as is). */
static char *utf8_sanitize(const char *s, size_t n, size_t *out_n, int *oom) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    *oom = 0;
    while (i < n) {
        size_t k = utf8_valid_at(u + i, n - i);
        if (!k) break;
        i += k;
    }
    if (i == n) return NULL;
    size_t cap;
    if (sdn_mul_overflow(n, 3, &cap)) { *oom = 1; return NULL; }
    char *r = malloc(cap + 1);
    if (!r) { *oom = 1; return NULL; }
    memcpy(r, s, i);
    size_t o = i;
    while (i < n) {
        size_t k = utf8_valid_at(u + i, n - i);
        if (k) {
            memcpy(r + o, s + i, k);
            o += k;
            i += k;
        } else {
            memcpy(r + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += 1;
        }
    }
    r[o] = 0;
    *out_n = o;
    return r;
}

/* ------------------------------------------------------------------------------------ */
/* piece -> id map                                                                        */

static uint64_t tok_hash(const char *s, size_t n) { return (uint64_t)XXH3_64bits(s, n); }

int32_t tok_map_get(const sdn_tokenizer *t, const char *s, size_t n) {
    if (!t->map.slot) return -1;
    uint64_t hv = tok_hash(s, n), h = hv & t->map.mask;
    uint32_t tag = (uint32_t)(hv >> 32);
    for (;;) {
        const tok_slot *e = &t->map.slot[h];
        if (e->id < 0) return -1;
        if (e->tag == tag && t->len[e->id] == n && !memcmp(t->text + t->off[e->id], s, n)) return e->id;
        h = (h + 1) & t->map.mask;
    }
}

static int tok_build_map(sdn_tokenizer *t, const char *path, sdn_err *err) {
    uint64_t size = 16;
    while (size < (uint64_t)t->n_vocab * 2) size <<= 1;
    t->map.slot = malloc(size * sizeof *t->map.slot);
    if (!t->map.slot) return sdn_fail(err, SDN_ENOMEM, "%s: tokenizer: out of memory for the vocabulary index", path);
    for (uint64_t i = 0; i < size; i++) t->map.slot[i] = (tok_slot){-1, 0};
    t->map.mask = size - 1;
    int n_dup = 0, n_empty = 0;
    for (int i = 0; i < t->n_vocab; i++) {
        const char *s = t->text + t->off[i];
        size_t n = t->len[i];
        if (n == 0) {
            if (n_empty++ == 0) tok_warn(t, "%s: tokenizer.ggml.tokens[%d] is empty; it can never be produced by encoding", path, i);
            continue;
        }
        uint64_t hv = tok_hash(s, n), h = hv & t->map.mask;
        uint32_t tag = (uint32_t)(hv >> 32);
        int dup = 0;
        for (;;) {
            const tok_slot *e = &t->map.slot[h];
            if (e->id < 0) break;
            if (e->tag == tag && t->len[e->id] == n && !memcmp(t->text + t->off[e->id], s, n)) {
                dup = 1;
                break;
            }
            h = (h + 1) & t->map.mask;
        }
        if (dup) {
            if (n_dup++ == 0)
                tok_warn(t, "%s: vocabulary piece '%.*s' appears more than once (ids %d and %d); encoding uses the lowest id", path,
                         (int)(n > 40 ? 40 : n), s, t->map.slot[h].id, i);
            continue;
        }
        t->map.slot[h] = (tok_slot){i, tag};
    }
    if (n_dup > 1) tok_warn(t, "%s: %d duplicate vocabulary pieces in total", path, n_dup);
    if (n_empty > 1) tok_warn(t, "%s: %d empty vocabulary pieces in total", path, n_empty);
    return SDN_OK;
}

/* ------------------------------------------------------------------------------------ */
/* construction                                                                           */

static int tok_alloc(sdn_tokenizer *t, int n, uint64_t text_bytes, const char *path, sdn_err *err) {
    t->n_vocab = n;
    t->off = calloc((size_t)n, sizeof *t->off);
    t->len = calloc((size_t)n, sizeof *t->len);
    t->score = calloc((size_t)n, sizeof *t->score);
    t->type = calloc((size_t)n, 1);
    t->eog = calloc((size_t)n, 1);
    t->text = (text_bytes < SIZE_MAX) ? malloc((size_t)text_bytes + 1) : NULL;
    if (!t->off || !t->len || !t->score || !t->type || !t->eog || !t->text)
        return sdn_fail(err, SDN_ENOMEM, "%s: tokenizer: out of memory for %d tokens", path, n);
    return SDN_OK;
}

static int parse_byte_piece(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return -1;
    int v = 0;
    for (int k = 3; k < 5; k++) {
        char c = s[k];
        int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static int cmp_special(const void *a, const void *b, void *ctx) {
    const sdn_tokenizer *t = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    unsigned char fx = (unsigned char)t->text[t->off[x]], fy = (unsigned char)t->text[t->off[y]];
    if (fx != fy) return fx < fy ? -1 : 1;
    if (t->len[x] != t->len[y]) return t->len[x] > t->len[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

static const char *const k_eog_texts[] = {
    "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|endoftext|>", "<|end_of_text|>", "<|end|>", "<end_of_turn>", "<EOT>",
};

/* Everything derived from the pieces, types and special ids: the map, byte tokens,
 * end-of-generation set and the special-token index. */
static int tok_finish(sdn_tokenizer *t, const char *path, sdn_err *err) {
    int rc = tok_build_map(t, path, err);
    if (rc) return rc;
    for (int i = 0; i < t->n_vocab; i++)
        if ((int)t->len[i] > t->max_piece) t->max_piece = (int)t->len[i];

    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    if (t->kind == SDN_TOKENIZER_SPM) {
        int missing = 0;
        for (int b = 0; b < 256; b++) {
            char buf[8];
            snprintf(buf, sizeof buf, "<0x%02X>", b);
            t->byte_id[b] = tok_map_get(t, buf, 6);
            if (t->byte_id[b] < 0) missing++;
        }
        if (missing && missing < 256)
            tok_warn(t, "%s: %d of the 256 byte-fallback tokens <0xNN> are missing; those bytes encode as <unk>", path, missing);
        t->spm_ws_split = 1;
        for (int i = 0; i < t->n_vocab && t->spm_ws_split; i++) {
            int ty = t->type[i];
            if (!(ty == SDN_TOKEN_NORMAL || ty == SDN_TOKEN_USER_DEFINED || ty == SDN_TOKEN_UNUSED)) continue;
            const char *p = t->text + t->off[i];
            size_t n = t->len[i], k = 0;
            while (k + 3 <= n && !memcmp(p + k, "\xE2\x96\x81", 3)) k += 3; /* leading run of U+2581 */
            for (; k + 3 <= n; k++)
                if (!memcmp(p + k, "\xE2\x96\x81", 3)) {
                    t->spm_ws_split = 0;
                    break;
                }
        }
    }

    /* end of generation */
    int32_t marks[3] = {t->eos, t->eot, t->eom};
    for (int k = 0; k < 3; k++)
        if (marks[k] >= 0) t->eog[marks[k]] = 1;
    for (size_t k = 0; k < sizeof k_eog_texts / sizeof k_eog_texts[0]; k++) {
        int32_t id = tok_map_get(t, k_eog_texts[k], strlen(k_eog_texts[k]));
        if (id < 0) continue;
        t->eog[id] = 1;
        if (t->type[id] != SDN_TOKEN_CONTROL) {
            tok_warn(t, "%s: end-of-turn token %d '%s' is not marked as a control token; treating it as one", path, id, k_eog_texts[k]);
            t->type[id] = SDN_TOKEN_CONTROL;
        }
    }

    /* special tokens, grouped by first byte, longest first */
    int ns = 0;
    for (int i = 0; i < t->n_vocab; i++) {
        int ty = t->type[i];
        if (t->len[i] && (ty == SDN_TOKEN_CONTROL || ty == SDN_TOKEN_UNKNOWN || ty == SDN_TOKEN_USER_DEFINED)) ns++;
    }
    t->special = malloc((size_t)(ns ? ns : 1) * sizeof *t->special);
    if (!t->special) return sdn_fail(err, SDN_ENOMEM, "%s: tokenizer: out of memory", path);
    ns = 0;
    for (int i = 0; i < t->n_vocab; i++) {
        int ty = t->type[i];
        if (!t->len[i] || !(ty == SDN_TOKEN_CONTROL || ty == SDN_TOKEN_UNKNOWN || ty == SDN_TOKEN_USER_DEFINED)) continue;
        if (tok_map_get(t, t->text + t->off[i], t->len[i]) != i) continue; /* duplicate text: the first id wins */
        t->special[ns++] = i;
        t->special_first[(unsigned char)t->text[t->off[i]]] |= ty == SDN_TOKEN_USER_DEFINED ? 2 : 1;
    }
    t->n_special = ns;
    qsort_r(t->special, (size_t)ns, sizeof *t->special, cmp_special, t);
    return SDN_OK;
}

void sdn_tokenizer_free(sdn_tokenizer *t) {
    if (!t) return;
    tok_bpe_free(t);
    free(t->text);
    free(t->off);
    free(t->len);
    free(t->score);
    free(t->type);
    free(t->eog);
    free(t->map.slot);
    free(t->special);
    free(t->chat_template);
    free(t);
}

/* ------------------------------------------------------------------------------------ */
/* GGUF                                                                                   */

/* Optional special-token id: missing -> dflt (if inside the vocabulary, else -1);
 * present but outside the vocabulary -> error naming the key. */
static int read_special_id(sdn_tokenizer *t, const sdn_gguf *g, const char *key, int32_t dflt, int32_t *out, sdn_err *err) {
    const char *path = sdn_gguf_path(g);
    if (sdn_gguf_find(g, key) < 0) {
        *out = (dflt >= 0 && dflt < t->n_vocab) ? dflt : -1;
        return SDN_OK;
    }
    int64_t v;
    int rc = sdn_gguf_get_i64(g, key, &v, err);
    if (rc) return rc;
    if (v < 0) {
        tok_warn(t, "%s: %s = %lld is negative; treated as not set", path, key, (long long)v);
        *out = -1;
        return SDN_OK;
    }
    if (v >= t->n_vocab)
        return sdn_fail(err, SDN_EFORMAT, "%s: %s = %lld is outside the vocabulary of %d tokens", path, key, (long long)v, t->n_vocab);
    *out = (int32_t)v;
    return SDN_OK;
}

static int read_gguf(sdn_tokenizer *t, const sdn_gguf *g, sdn_err *err) {
    const char *path = sdn_gguf_path(g);
    const char *model = sdn_gguf_str_or_null(g, "tokenizer.ggml.model");
    if (!model) {
        if (sdn_gguf_find(g, "tokenizer.ggml.model") >= 0)
            return sdn_fail(err, SDN_EFORMAT, "%s: tokenizer.ggml.model is not a string", path);
        return sdn_fail(err, SDN_EFORMAT, "%s: tokenizer.ggml.model is missing (the file has no tokenizer section)", path);
    }
    if (!strcmp(model, "llama")) t->kind = SDN_TOKENIZER_SPM;
    else if (!strcmp(model, "gpt2")) t->kind = SDN_TOKENIZER_BPE;
    else if (!strcmp(model, "none") || !strcmp(model, "no_vocab"))
        return sdn_fail(err, SDN_EUNSUP, "%s: tokenizer.ggml.model = '%s': the file has no vocabulary", path, model);
    else
        return sdn_fail(err, SDN_EUNSUP, "%s: tokenizer.ggml.model = '%s' is not supported (supported: 'llama' SentencePiece, 'gpt2' byte-level BPE)", path, model);

    /* tokens */
    int ti = sdn_gguf_find(g, "tokenizer.ggml.tokens");
    if (ti < 0) return sdn_fail(err, SDN_EFORMAT, "%s: tokenizer.ggml.tokens is missing", path);
    sdn_gguf_vtype et;
    uint64_t n;
    if (sdn_gguf_arr_info(g, ti, &et, &n) || et != SDN_GGUF_STRING)
        return sdn_fail(err, SDN_EFORMAT, "%s: tokenizer.ggml.tokens is not an array of strings", path);
    if (n == 0) return sdn_fail(err, SDN_EFORMAT, "%s: tokenizer.ggml.tokens is empty", path);
    if (n > (uint64_t)INT32_MAX - 1) return sdn_fail(err, SDN_EFORMAT, "%s: tokenizer.ggml.tokens has %llu entries (too many)", path, (unsigned long long)n);
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        size_t l;
        sdn_gguf_arr_str(g, ti, i, &l);
        total += l + 1;
    }
    int rc = tok_alloc(t, (int)n, total, path, err);
    if (rc) return rc;
    uint64_t o = 0;
    for (uint64_t i = 0; i < n; i++) {
        size_t l;
        const char *s = sdn_gguf_arr_str(g, ti, i, &l);
        if (l && !s) return sdn_fail(err, SDN_EFORMAT, "%s: tokenizer.ggml.tokens[%llu] is unreadable", path, (unsigned long long)i);
        if (l > UINT32_MAX) return sdn_fail(err, SDN_EFORMAT, "%s: tokenizer.ggml.tokens[%llu] is too long", path, (unsigned long long)i);
        if (l) memcpy(t->text + o, s, l);
        t->text[o + l] = 0;
        t->off[i] = o;
        t->len[i] = (uint32_t)l;
        o += l + 1;
    }

    /* scores */
    int si = sdn_gguf_find(g, "tokenizer.ggml.scores");
    if (si >= 0) {
        uint64_t ns;
        if (sdn_gguf_arr_info(g, si, &et, &ns) || !(et == SDN_GGUF_FLOAT32 || et == SDN_GGUF_FLOAT64 || et == SDN_GGUF_INT32))
            return sdn_fail(err, SDN_EFORMAT, "%s: tokenizer.ggml.scores is not an array of numbers", path);
        if (ns != n)
            return sdn_fail(err, SDN_EFORMAT, "%s: tokenizer.ggml.scores has %llu entries but tokenizer.ggml.tokens has %llu", path,
                            (unsigned long long)ns, (unsigned long long)n);
        for (uint64_t i = 0; i < n; i++) t->score[i] = (float)sdn_gguf_arr_num(g, si, i);
    } else if (t->kind == SDN_TOKENIZER_SPM) {
        tok_warn(t, "%s: tokenizer.ggml.scores is missing; all merges score 0 (leftmost pair first)", path);
    }

    /* token types */
    int yi = sdn_gguf_find(g, "tokenizer.ggml.token_type");
    if (yi >= 0) {
        uint64_t ny;
        if (sdn_gguf_arr_info(g, yi, &et, &ny) || et == SDN_GGUF_STRING || et == SDN_GGUF_ARRAY || et == SDN_GGUF_FLOAT32 || et == SDN_GGUF_FLOAT64)
            return sdn_fail(err, SDN_EFORMAT, "%s: tokenizer.ggml.token_type is not an array of integers", path);
        if (ny != n)
            return sdn_fail(err, SDN_EFORMAT, "%s: tokenizer.ggml.token_type has %llu entries but tokenizer.ggml.tokens has %llu", path,
                            (unsigned long long)ny, (unsigned long long)n);
        int bad = 0;
        for (uint64_t i = 0; i < n; i++) {
            double v = sdn_gguf_arr_num(g, yi, i);
            if (v >= 1 && v <= 6 && v == (int)v) t->type[i] = (uint8_t)v;
            else {
                t->type[i] = SDN_TOKEN_UNDEFINED;
                if (bad++ == 0) tok_warn(t, "%s: tokenizer.ggml.token_type[%llu] = %g is not a known type; the token is never produced by encoding", path, (unsigned long long)i, v);
            }
        }
    } else {
        /* Infer: SentencePiece conventions for "llama", <|...|> markers as control for BPE. */
        for (uint64_t i = 0; i < n; i++) {
            const char *s = t->text + t->off[i];
            size_t l = t->len[i];
            uint8_t ty = SDN_TOKEN_NORMAL;
            if (t->kind == SDN_TOKENIZER_SPM) {
                if (!strcmp(s, "<unk>")) ty = SDN_TOKEN_UNKNOWN;
                else if (!strcmp(s, "<s>") || !strcmp(s, "</s>")) ty = SDN_TOKEN_CONTROL;
                else if (parse_byte_piece(s, l) >= 0) ty = SDN_TOKEN_BYTE;
            } else if (l >= 4 && !memcmp(s, "<|", 2) && !memcmp(s + l - 2, "|>", 2)) {
                ty = SDN_TOKEN_CONTROL;
            }
            t->type[i] = ty;
        }
        tok_warn(t, "%s: tokenizer.ggml.token_type is missing; token types inferred from the pieces", path);
    }

    /* special ids and flags */
    int spm = t->kind == SDN_TOKENIZER_SPM;
    if ((rc = read_special_id(t, g, "tokenizer.ggml.bos_token_id", spm ? 1 : -1, &t->bos, err)) ||
        (rc = read_special_id(t, g, "tokenizer.ggml.eos_token_id", spm ? 2 : -1, &t->eos, err)) ||
        (rc = read_special_id(t, g, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1, &t->unk, err)) ||
        (rc = read_special_id(t, g, "tokenizer.ggml.padding_token_id", -1, &t->pad, err)) ||
        (rc = read_special_id(t, g, "tokenizer.ggml.eot_token_id", -1, &t->eot, err)) ||
        (rc = read_special_id(t, g, "tokenizer.ggml.eom_token_id", -1, &t->eom, err)))
        return rc;
    if (yi < 0) {
        int32_t ctl[4] = {t->bos, t->eos, t->eot, t->eom};
        for (int k = 0; k < 4; k++)
            if (ctl[k] >= 0) t->type[ctl[k]] = SDN_TOKEN_CONTROL;
    }

    const char *pre = sdn_gguf_str_or_null(g, "tokenizer.ggml.pre");
    if (!pre && sdn_gguf_find(g, "tokenizer.ggml.pre") >= 0)
        return sdn_fail(err, SDN_EFORMAT, "%s: tokenizer.ggml.pre is not a string", path);

    int dflt_bos = spm;
    if (!spm && pre && (!strcmp(pre, "llama3") || !strcmp(pre, "llama-v3") || !strcmp(pre, "llama-bpe") || !strcmp(pre, "falcon3") ||
                        !strcmp(pre, "falcon-h1") || !strcmp(pre, "pixtral") || !strcmp(pre, "midm-2.0") || !strcmp(pre, "lfm2")))
        dflt_bos = 1; /* llama.cpp's default for these pre-tokenizers */
    if ((rc = sdn_gguf_get_bool_or(g, "tokenizer.ggml.add_bos_token", dflt_bos, &t->add_bos, err)) ||
        (rc = sdn_gguf_get_bool_or(g, "tokenizer.ggml.add_eos_token", 0, &t->add_eos, err)) ||
        (rc = sdn_gguf_get_bool_or(g, "tokenizer.ggml.add_space_prefix", spm, &t->add_space_prefix, err)))
        return rc;
    if (t->add_bos && t->bos < 0) {
        tok_warn(t, "%s: tokenizer.ggml.add_bos_token is true but there is no BOS token id; no BOS is added", path);
        t->add_bos = 0;
    }
    if (t->add_eos && t->eos < 0) t->add_eos = 0;

    const char *tmpl = sdn_gguf_str_or_null(g, "tokenizer.chat_template");
    if (tmpl) {
        t->chat_template = strdup(tmpl);
        if (!t->chat_template) return sdn_fail(err, SDN_ENOMEM, "%s: out of memory", path);
    }

    if ((rc = tok_finish(t, path, err))) return rc;

    if (t->kind == SDN_TOKENIZER_BPE) {
        int mi = sdn_gguf_find(g, "tokenizer.ggml.merges");
        if (mi < 0) return sdn_fail(err, SDN_EFORMAT, "%s: tokenizer.ggml.merges is missing (required by tokenizer.ggml.model = 'gpt2')", path);
        uint64_t nm;
        if (sdn_gguf_arr_info(g, mi, &et, &nm) || et != SDN_GGUF_STRING)
            return sdn_fail(err, SDN_EFORMAT, "%s: tokenizer.ggml.merges is not an array of strings", path);
        if (nm > (uint64_t)INT32_MAX - 1) return sdn_fail(err, SDN_EFORMAT, "%s: tokenizer.ggml.merges has too many entries", path);
        /* merge table: (left, right) -> (rank, merged) */
        uint64_t size = 16;
        while (size < nm + nm / 3 + 1) size <<= 1;
        merge_map *mm = &t->merges;
        mm->key = malloc(size * sizeof *mm->key);
        mm->rank = malloc(size * sizeof *mm->rank);
        mm->result = malloc(size * sizeof *mm->result);
        if (!mm->key || !mm->rank || !mm->result) return sdn_fail(err, SDN_ENOMEM, "%s: out of memory for %llu merges", path, (unsigned long long)nm);
        memset(mm->key, 0xff, size * sizeof *mm->key);
        mm->mask = size - 1;
        char *cat = malloc((size_t)t->max_piece * 2 + 2);
        if (!cat) return sdn_fail(err, SDN_ENOMEM, "%s: out of memory", path);
        for (uint64_t i = 0; i < nm; i++) {
            size_t l;
            const char *s = sdn_gguf_arr_str(g, mi, i, &l);
            const char *sp = (l > 1) ? memchr(s + 1, ' ', l - 1) : NULL;
            if (!sp) {
                free(cat);
                return sdn_fail(err, SDN_EFORMAT, "%s: tokenizer.ggml.merges[%llu] = '%.*s' is not two pieces separated by a space", path,
                                (unsigned long long)i, (int)(l > 60 ? 60 : l), l ? s : "");
            }
            size_t la = (size_t)(sp - s), lb = l - la - 1;
            int32_t a = tok_map_get(t, s, la), b = tok_map_get(t, sp + 1, lb);
            int32_t m = -1;
            if (a >= 0 && b >= 0 && la + lb <= (size_t)t->max_piece) {
                memcpy(cat, s, la);
                memcpy(cat + la, sp + 1, lb);
                m = tok_map_get(t, cat, la + lb);
            }
            if (a < 0 || b < 0 || m < 0) {
                int shown = (int)(l > 60 ? 60 : l);
                if (a < 0 || b < 0)
                    rc = sdn_fail(err, SDN_EFORMAT, "%s: tokenizer.ggml.merges[%llu] = '%.*s': piece '%.*s' is not in tokenizer.ggml.tokens", path,
                                  (unsigned long long)i, shown, s, (int)((a < 0 ? la : lb) > 60 ? 60 : (a < 0 ? la : lb)), a < 0 ? s : sp + 1);
                else
                    rc = sdn_fail(err, SDN_EFORMAT, "%s: tokenizer.ggml.merges[%llu] = '%.*s': the merged piece is not in tokenizer.ggml.tokens", path,
                                  (unsigned long long)i, shown, s);
                free(cat);
                return rc;
            }
            uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
            uint64_t h = (uint64_t)XXH3_64bits(&key, sizeof key) & mm->mask;
            while (mm->key[h] != UINT64_MAX && mm->key[h] != key) h = (h + 1) & mm->mask;
            if (mm->key[h] == key) continue; /* repeated pair: the first (lowest) rank counts */
            mm->key[h] = key;
            mm->rank[h] = (int32_t)i;
            mm->result[h] = m;
        }
        free(cat);
        t->n_merges = (int)nm;
        if ((rc = tok_bpe_setup(t, pre, path, err))) return rc;
    }
    return SDN_OK;
}

int sdn_tokenizer_from_gguf(const sdn_gguf *g, sdn_tokenizer **out, sdn_err *err) {
    *out = NULL;
    if (!g) return sdn_fail(err, SDN_EINVAL, "sdn_tokenizer_from_gguf: no file");
    sdn_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return sdn_fail(err, SDN_ENOMEM, "%s: out of memory", sdn_gguf_path(g));
    t->bos = t->eos = t->eot = t->eom = t->unk = t->pad = -1;
    int rc = read_gguf(t, g, err);
    if (rc) {
        sdn_tokenizer_free(t);
        return rc;
    }
    *out = t;
    return SDN_OK;
}

/* ------------------------------------------------------------------------------------ */
/* llama2.c tokenizer.bin                                                                 */

int sdn_tokenizer_from_llama2c(const char *path, int vocab_size, sdn_tokenizer **out, sdn_err *err) {
    *out = NULL;
    if (!path) return sdn_fail(err, SDN_EINVAL, "sdn_tokenizer_from_llama2c: no path");
    char *data;
    size_t size;
    int rc = sdn_read_file(path, &data, &size, err);
    if (rc) return rc;
    const unsigned char *p = (const unsigned char *)data, *end = p + size;
    if (size < 4) {
        free(data);
        return sdn_fail(err, SDN_EFORMAT, "%s: too short for a llama2.c tokenizer (no max_token_length)", path);
    }
    int32_t max_len;
    memcpy(&max_len, p, 4);
    p += 4;
    if (max_len <= 0) {
        free(data);
        return sdn_fail(err, SDN_EFORMAT, "%s: max_token_length = %d is not positive", path, max_len);
    }
    /* pass 1: count tokens and validate */
    uint64_t n = 0, total = 0;
    const unsigned char *q = p;
    while (q < end && (vocab_size <= 0 || n < (uint64_t)vocab_size)) {
        if (end - q < 8) {
            free(data);
            return sdn_fail(err, SDN_EFORMAT, "%s: token %llu: truncated score/length header", path, (unsigned long long)n);
        }
        int32_t l;
        memcpy(&l, q + 4, 4);
        q += 8;
        if (l < 0 || (uint64_t)l > (uint64_t)(end - q)) {
            free(data);
            return sdn_fail(err, SDN_EFORMAT, "%s: token %llu: length %d is outside the file", path, (unsigned long long)n, l);
        }
        q += l;
        total += (uint64_t)l + 1;
        n++;
    }
    if (vocab_size > 0 && n < (uint64_t)vocab_size) {
        free(data);
        return sdn_fail(err, SDN_EFORMAT, "%s: holds %llu tokens but the model's vocabulary has %d", path, (unsigned long long)n, vocab_size);
    }
    if (n == 0) {
        free(data);
        return sdn_fail(err, SDN_EFORMAT, "%s: holds no tokens", path);
    }
    if (n > (uint64_t)INT32_MAX - 1) {
        free(data);
        return sdn_fail(err, SDN_EFORMAT, "%s: too many tokens", path);
    }
    sdn_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        free(data);
        return sdn_fail(err, SDN_ENOMEM, "%s: out of memory", path);
    }
    t->kind = SDN_TOKENIZER_SPM;
    t->bos = t->eos = t->eot = t->eom = t->unk = t->pad = -1;
    /* a space becomes U+2581 (3 bytes): worst case 3x */
    if ((rc = tok_alloc(t, (int)n, total * 3, path, err))) goto fail;
    uint64_t o = 0;
    q = p;
    for (uint64_t i = 0; i < n; i++) {
        float sc;
        int32_t l;
        memcpy(&sc, q, 4);
        memcpy(&l, q + 4, 4);
        q += 8;
        const char *s = (const char *)q;
        size_t sl = (size_t)l;
        q += l;
        /* "\n<s>\n" and "\n</s>\n" in llama2.c exports */
        while (sl && *s == '\n' && sl > 1 && s[1] == '<') s++, sl--;
        if (sl > 1 && s[sl - 1] == '\n' && s[sl - 2] == '>') sl--;
        t->off[i] = o;
        size_t start = o;
        for (size_t k = 0; k < sl; k++) {
            if (s[k] == ' ') {
                memcpy(t->text + o, "\xE2\x96\x81", 3);
                o += 3;
            } else {
                t->text[o++] = s[k];
            }
        }
        t->text[o] = 0;
        t->len[i] = (uint32_t)(o - start);
        o++;
        t->score[i] = sc;
        const char *pc = t->text + start;
        size_t pl = t->len[i];
        uint8_t ty = SDN_TOKEN_NORMAL;
        if (pl == 5 && !memcmp(pc, "<unk>", 5)) {
            ty = SDN_TOKEN_UNKNOWN;
            if (t->unk < 0) t->unk = (int32_t)i;
        } else if (pl == 3 && !memcmp(pc, "<s>", 3)) {
            ty = SDN_TOKEN_CONTROL;
            if (t->bos < 0) t->bos = (int32_t)i;
        } else if (pl == 4 && !memcmp(pc, "</s>", 4)) {
            ty = SDN_TOKEN_CONTROL;
            if (t->eos < 0) t->eos = (int32_t)i;
        } else if (parse_byte_piece(pc, pl) >= 0) {
            ty = SDN_TOKEN_BYTE;
        }
        t->type[i] = ty;
    }
    free(data);
    data = NULL;
    t->add_bos = t->bos >= 0;
    t->add_space_prefix = 1;
    if (t->bos < 0) tok_warn(t, "%s: no <s> token; prompts get no BOS", path);
    if ((rc = tok_finish(t, path, err))) goto fail;
    *out = t;
    return SDN_OK;
fail:
    free(data);
    sdn_tokenizer_free(t);
    return rc;
}

/* ------------------------------------------------------------------------------------ */
/* queries                                                                                */

int sdn_tokenizer_n_vocab(const sdn_tokenizer *t) { return t ? t->n_vocab : 0; }
sdn_tokenizer_kind sdn_tokenizer_kind_of(const sdn_tokenizer *t) { return t->kind; }
const char *sdn_tokenizer_pre(const sdn_tokenizer *t) { return t->kind == SDN_TOKENIZER_BPE ? t->pre_name : ""; }
const char *sdn_tokenizer_warnings(const sdn_tokenizer *t) { return t->warnings; }
const char *sdn_tokenizer_chat_template(const sdn_tokenizer *t) { return t->chat_template; }
int sdn_tokenizer_add_bos(const sdn_tokenizer *t) { return t->add_bos; }
int32_t sdn_tokenizer_bos(const sdn_tokenizer *t) { return t->bos; }
int32_t sdn_tokenizer_eos(const sdn_tokenizer *t) { return t->eos; }
int sdn_tokenizer_is_eog(const sdn_tokenizer *t, int32_t id) { return id >= 0 && id < t->n_vocab && t->eog[id]; }
float sdn_tokenizer_score(const sdn_tokenizer *t, int32_t id) { return (id >= 0 && id < t->n_vocab) ? t->score[id] : 0.0f; }
int sdn_tokenizer_token_type(const sdn_tokenizer *t, int32_t id) { return (id >= 0 && id < t->n_vocab) ? t->type[id] : 0; }
int32_t sdn_tokenizer_find(const sdn_tokenizer *t, const char *piece, size_t len) { return tok_map_get(t, piece, len); }

int sdn_tokenizer_max_text_bytes(const sdn_tokenizer *t) { return t->max_piece > 4 ? t->max_piece : 4; }

const char *sdn_tokenizer_piece(const sdn_tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->n_vocab) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = t->len[id];
    return t->text + t->off[id];
}

/* ------------------------------------------------------------------------------------ */
/* encoding                                                                               */

/* Longest special token starting at s (mask 1: control/unknown, 2: user-defined). */
static int32_t match_special(const sdn_tokenizer *t, const char *s, size_t n, int mask, size_t *mlen) {
    unsigned char c = (unsigned char)s[0];
    if (!(t->special_first[c] & mask)) return -1;
    /* binary search the first entry with this first byte */
    int lo = 0, hi = t->n_special;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if ((unsigned char)t->text[t->off[t->special[mid]]] < c) lo = mid + 1;
        else hi = mid;
    }
    for (int k = lo; k < t->n_special; k++) {
        int32_t id = t->special[k];
        const char *p = t->text + t->off[id];
        if ((unsigned char)p[0] != c) break;
        int ty = t->type[id];
        if (!(mask & (ty == SDN_TOKEN_USER_DEFINED ? 2 : 1))) continue;
        size_t l = t->len[id];
        if (l <= n && !memcmp(p, s, l)) {
            *mlen = l;
            return id;
        }
    }
    return -1;
}

static int encode_text(const sdn_tokenizer *t, const char *s, size_t n, int after_special, tok_vec *out, sdn_err *err) {
    if (t->kind == SDN_TOKENIZER_SPM) return tok_spm_encode(t, s, n, t->add_space_prefix && after_special, out, err);
    return tok_bpe_encode(t, s, n, out, err);
}

int sdn_tokenize(const sdn_tokenizer *t, const char *text, size_t len, int add_bos, int parse_special, int32_t **ids, int *n_ids,
                 sdn_err *err) {
    *ids = NULL;
    *n_ids = 0;
    if (!t || (!text && len)) return sdn_fail(err, SDN_EINVAL, "sdn_tokenize: no tokenizer or no text");
    if (len > SDN_TOKENIZE_MAX_BYTES)
        return sdn_fail(err, SDN_EINVAL, "sdn_tokenize: text of %zu bytes is longer than the %d MB one call accepts; split it", len,
                        SDN_TOKENIZE_MAX_BYTES >> 20);
    size_t n = len;
    int oom;
    char *clean = utf8_sanitize(text, len, &n, &oom);
    if (oom) return sdn_fail(err, SDN_ENOMEM, "sdn_tokenize: out of memory");
    const char *s = clean ? clean : text;
    if (!clean) n = len;

    tok_vec out = {0};
    int rc = SDN_OK;
    if (add_bos) {
        if (t->bos < 0) {
            free(clean);
            return sdn_fail(err, SDN_EINVAL, "sdn_tokenize: add_bos requested but the tokenizer has no BOS token");
        }
        if ((rc = tok_vec_push(&out, t->bos))) goto done;
    }
    int mask = parse_special ? 3 : 2;
    size_t pos = 0, frag = 0;
    int after_special = 1;
    while (pos < n) {
        size_t ml = 0;
        int32_t sid = match_special(t, s + pos, n - pos, mask, &ml);
        if (sid < 0) {
            pos++;
            continue;
        }
        if (pos > frag) {
            if ((rc = encode_text(t, s + frag, pos - frag, after_special, &out, err))) goto done;
        }
        if ((rc = tok_vec_push(&out, sid))) goto done;
        after_special = 1;
        pos += ml;
        frag = pos;
    }
    if (frag < n) rc = encode_text(t, s + frag, n - frag, after_special, &out, err);
done:
    free(clean);
    if (rc == SDN_ENOMEM && (!err || err->code == SDN_OK)) sdn_fail(err, rc, "sdn_tokenize: out of memory");
    if (rc) {
        free(out.v);
        return rc;
    }
    if (!out.v) out.v = malloc(sizeof(int32_t));
    if (!out.v) return sdn_fail(err, SDN_ENOMEM, "sdn_tokenize: out of memory");
    *ids = out.v;
    *n_ids = (int)out.n;
    return SDN_OK;
}

/* ------------------------------------------------------------------------------------ */
/* decoding                                                                               */

size_t sdn_tokenizer_token_bytes(const sdn_tokenizer *t, int32_t id, char *out, size_t cap) {
    if (!t || id < 0 || id >= t->n_vocab) return 0;
    const char *s = t->text + t->off[id];
    size_t n = t->len[id], w = 0;
#define PUT(c) do { if (w < cap) out[w] = (char)(c); w++; } while (0)
    int ty = t->type[id];
    if (ty == SDN_TOKEN_BYTE) {
        int b = parse_byte_piece(s, n);
        if (b >= 0) {
            PUT(b);
            return w;
        }
    }
    if (ty != SDN_TOKEN_NORMAL && !(t->kind == SDN_TOKENIZER_SPM && (ty == SDN_TOKEN_USER_DEFINED || ty == SDN_TOKEN_UNUSED))) {
        for (size_t k = 0; k < n; k++) PUT(s[k]);
        return w;
    }
    if (t->kind == SDN_TOKENIZER_SPM) {
        for (size_t k = 0; k < n; k++) {
            if (k + 2 < n && (unsigned char)s[k] == 0xE2 && (unsigned char)s[k + 1] == 0x96 && (unsigned char)s[k + 2] == 0x81) {
                PUT(' ');
                k += 2;
            } else {
                PUT(s[k]);
            }
        }
        return w;
    }
    /* byte-level BPE: every code point stands for one byte */
    const unsigned char *u = (const unsigned char *)s;
    size_t k = 0;
    while (k < n) {
        size_t l = utf8_valid_at(u + k, n - k);
        if (!l) {
            PUT(u[k]);
            k++;
            continue;
        }
        uint32_t cp = l == 1 ? u[k] : l == 2 ? ((u[k] & 0x1Fu) << 6) | (u[k + 1] & 0x3Fu) : 0x110000;
        int b = tok_bpe_cp_to_byte(cp);
        if (b >= 0) PUT(b);
        else
            for (size_t j = 0; j < l; j++) PUT(u[k + j]);
        k += l;
    }
#undef PUT
    return w;
}

struct sdn_detok {
    const sdn_tokenizer *t;
    int render_special;
    int bos_ws;      /* SentencePiece: the next text piece may lose its leading space */
    int ws_seen;     /* the previous text piece did */
    int has_text;    /* some text (or byte pieces) already decoded */
    int discard;     /* priming: decode but drop the output */
    unsigned char pend[4];
    int npend, need; /* held bytes of an incomplete character */
    char *q;         /* output not yet handed to the caller */
    size_t qn, qcap;
    char *tmp;
    size_t tmpcap;
};

sdn_detok *sdn_detok_new(const sdn_tokenizer *t) {
    if (!t) return NULL;
    sdn_detok *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->t = t;
    d->bos_ws = 1;
    d->tmpcap = (size_t)t->max_piece + 16;
    d->tmp = malloc(d->tmpcap);
    d->qcap = 256 + (size_t)t->max_piece * 4;
    d->q = malloc(d->qcap);
    if (!d->tmp || !d->q) {
        sdn_detok_free(d);
        return NULL;
    }
    return d;
}

void sdn_detok_free(sdn_detok *d) {
    if (!d) return;
    free(d->q);
    free(d->tmp);
    free(d);
}

void sdn_detok_set_special(sdn_detok *d, int on) { d->render_special = on != 0; }
size_t sdn_detok_pending(const sdn_detok *d) { return d->qn; }

static void q_put(sdn_detok *d, const void *p, size_t n) {
    if (d->discard || !n) return;
    if (d->qn + n > d->qcap) {
        size_t nc = d->qcap * 2;
        while (nc < d->qn + n) nc *= 2;
        char *r = realloc(d->q, nc);
        if (!r) return; /* out of memory: drop the text rather than crash */
        d->q = r;
        d->qcap = nc;
    }
    memcpy(d->q + d->qn, p, n);
    d->qn += n;
}

static void emit_fffd(sdn_detok *d) { q_put(d, "\xEF\xBF\xBD", 3); }

/* UTF-8 state machine: complete characters go out, stray bytes become U+FFFD each. */
static void feed_byte(sdn_detok *d, unsigned char b) {
    for (;;) {
        if (d->npend == 0) {
            if (b < 0x80) {
                q_put(d, &b, 1);
                return;
            }
            if (b < 0xC2 || b > 0xF4) {
                emit_fffd(d);
                return;
            }
            d->need = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
            d->pend[d->npend++] = b;
            return;
        }
        unsigned char lo = 0x80, hi = 0xBF;
        if (d->npend == 1) {
            unsigned char c = d->pend[0];
            if (c == 0xE0) lo = 0xA0;
            else if (c == 0xED) hi = 0x9F;
            else if (c == 0xF0) lo = 0x90;
            else if (c == 0xF4) hi = 0x8F;
        }
        if (b >= lo && b <= hi) {
            d->pend[d->npend++] = b;
            if (d->npend == d->need) {
                q_put(d, d->pend, (size_t)d->npend);
                d->npend = 0;
            }
            return;
        }
        for (int k = 0; k < d->npend; k++) emit_fffd(d);
        d->npend = 0; /* and look at b again as a fresh byte */
    }
}

static void feed(sdn_detok *d, const char *s, size_t n) {
    for (size_t k = 0; k < n; k++) feed_byte(d, (unsigned char)s[k]);
}

static size_t take(sdn_detok *d, char *out, size_t cap) {
    size_t n = d->qn < cap ? d->qn : cap;
    if (n) {
        memcpy(out, d->q, n);
        memmove(d->q, d->q + n, d->qn - n);
        d->qn -= n;
    }
    return n;
}

static void decode_id(sdn_detok *d, int32_t id) {
    const sdn_tokenizer *t = d->t;
    if (id < 0 || id >= t->n_vocab) {
        feed(d, "\xEF\xBF\xBD", 3);
        d->has_text = 1;
        return;
    }
    int ty = t->type[id];
    size_t n = sdn_tokenizer_token_bytes(t, id, d->tmp, d->tmpcap);
    if (n > d->tmpcap) {
        char *r = realloc(d->tmp, n);
        if (!r) return;
        d->tmp = r;
        d->tmpcap = n;
        n = sdn_tokenizer_token_bytes(t, id, d->tmp, d->tmpcap);
    }
    if (t->kind == SDN_TOKENIZER_SPM) {
        if (ty == SDN_TOKEN_BYTE) {
            feed(d, d->tmp, n);
            d->has_text = 1;
            return;
        }
        if (d->ws_seen || d->has_text) d->bos_ws = 0;
        if (ty == SDN_TOKEN_CONTROL) {
            d->ws_seen = 0;
            if (d->render_special && n) {
                feed(d, d->tmp, n);
                d->has_text = 1;
            }
            return;
        }
        if (ty == SDN_TOKEN_UNKNOWN) {
            d->ws_seen = 0;
            if (d->render_special) feed(d, d->tmp, n);
            else feed(d, " \xE2\x81\x87 ", 5); /* SentencePiece's surface of <unk> */
            d->has_text = 1;
            return;
        }
        const char *p = d->tmp;
        d->ws_seen = 0;
        if (d->bos_ws && n && p[0] == ' ') {
            p++;
            n--;
            d->ws_seen = 1;
        }
        feed(d, p, n);
        if (n) d->has_text = 1;
        return;
    }
    /* byte-level BPE */
    if ((ty == SDN_TOKEN_CONTROL || ty == SDN_TOKEN_UNKNOWN || ty == SDN_TOKEN_UNUSED || ty == SDN_TOKEN_UNDEFINED) && !d->render_special) return;
    feed(d, d->tmp, n);
    if (n) d->has_text = 1;
}

int sdn_detok_drops_next_space(const sdn_detok *d) { return d && d->t->kind == SDN_TOKENIZER_SPM && d->bos_ws && !d->has_text && !d->ws_seen; }

size_t sdn_detok_push(sdn_detok *d, int32_t id, char *out, size_t cap) {
    if (!d) return 0;
    decode_id(d, id);
    return take(d, out, cap);
}

void sdn_detok_prime(sdn_detok *d, const int32_t *ids, int n) {
    if (!d) return;
    d->discard = 1;
    for (int i = 0; i < n; i++) decode_id(d, ids[i]);
    d->discard = 0;
}

size_t sdn_detok_flush(sdn_detok *d, char *out, size_t cap) {
    if (!d) return 0;
    for (int k = 0; k < d->npend; k++) emit_fffd(d);
    d->npend = 0;
    return take(d, out, cap);
}

int sdn_detokenize(const sdn_tokenizer *t, const int32_t *ids, int n, char **text, sdn_err *err) {
    *text = NULL;
    if (!t || (n > 0 && !ids)) return sdn_fail(err, SDN_EINVAL, "sdn_detokenize: no tokenizer or no ids");
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->n_vocab)
            return sdn_fail(err, SDN_EINVAL, "sdn_detokenize: ids[%d] = %d is outside the vocabulary of %d tokens", i, ids[i], t->n_vocab);
    sdn_detok *d = sdn_detok_new(t);
    if (!d) return sdn_fail(err, SDN_ENOMEM, "sdn_detokenize: out of memory");
    for (int i = 0; i < n; i++) decode_id(d, ids[i]);
    for (int k = 0; k < d->npend; k++) emit_fffd(d);
    d->npend = 0;
    char *r = malloc(d->qn + 1);
    if (!r) {
        sdn_detok_free(d);
        return sdn_fail(err, SDN_ENOMEM, "sdn_detokenize: out of memory");
    }
    memcpy(r, d->q, d->qn);
    r[d->qn] = 0;
    sdn_detok_free(d);
    *text = r;
    return SDN_OK;
}
