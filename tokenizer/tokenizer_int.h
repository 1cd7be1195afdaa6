/* tokenizer_int.h - internals shared by tokenizer.c (loading, special tokens, decoding),
 * tokenizer_spm.c (SentencePiece merges) and tokenizer_bpe.c (byte-level BPE). Not a public
 * header: the rest of sdnpu uses tokenizer/tokenizer.h. */
#ifndef SDN_TOKENIZER_INT_H
#define SDN_TOKENIZER_INT_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

/* Growable int32 array (token output). */
typedef struct tok_vec {
    int32_t *v;
    size_t n, cap;
} tok_vec;
int tok_vec_push(tok_vec *a, int32_t x);

/* Open-addressing hash map from vocabulary strings to ids (XXH3 hash). */
typedef struct tok_slot {
    int32_t id;   /* -1 = empty */
    uint32_t tag; /* high bits of the hash: most mismatches never touch the strings */
} tok_slot;
typedef struct tok_map {
    tok_slot *slot;
    uint64_t mask;
} tok_map;

/* Pre-tokenizer: regexes applied in order; each splits every fragment into matches and the
 * gaps between them (both kept), as llama.cpp and HF's "Isolated" split do. */
#define SDN_PRE_MAX_RE 4
typedef struct bpe_pre {
    int n_re;
    void *code[SDN_PRE_MAX_RE]; /* pcre2_code_8 * */
    int jit[SDN_PRE_MAX_RE];    /* JIT compiled */
} bpe_pre;

/* Merge table of byte-level BPE: (left id, right id) -> (rank, merged id). */
typedef struct merge_map {
    uint64_t *key; /* (left << 32) | right, UINT64_MAX = empty */
    int32_t *rank;
    int32_t *result;
    uint64_t mask;
} merge_map;

struct sdn_tokenizer {
    sdn_tokenizer_kind kind;
    int n_vocab;
    char *text;     /* all pieces, each NUL-terminated */
    uint64_t *off;  /* piece i = text + off[i] */
    uint32_t *len;
    float *score;
    uint8_t *type;  /* sdn_token_type */
    uint8_t *eog;
    tok_map map;
    int max_piece;  /* longest piece in bytes */

    int32_t bos, eos, eot, eom, unk, pad;
    int add_bos, add_eos, add_space_prefix;
    int32_t byte_id[256]; /* SPM: <0xNN>; BPE: token of the byte's mapped code point; -1 none */
    int spm_ws_split;     /* SPM: no mergeable piece has U+2581 after other characters, so merges
                             never cross a word start and words can be merged one at a time */

    /* texts matched before tokenizing: control/unknown (parse_special) and user-defined */
    int32_t *special; /* ids, longest text first */
    int n_special;
    uint8_t special_first[256]; /* bit 1: some control/unknown token starts with this byte, bit 2: user-defined */

    /* byte-level BPE */
    merge_map merges;
    int n_merges;
    bpe_pre pre;
    int ignore_merges; /* a pre-token that is itself a token is not merged (Llama 3) */
    char pre_name[64];

    char *chat_template;
    char warnings[2048];
};

/* UTF-8 length of the sequence starting with lead byte c (1 for invalid leads). */
static inline int tok_utf8_len(unsigned char c) {
    return c < 0x80 ? 1 : c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF8 ? 4 : 1;
}

int32_t tok_map_get(const sdn_tokenizer *t, const char *s, size_t n);

/* Append a warning (printed to stderr and kept in t->warnings). */
void tok_warn(sdn_tokenizer *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same, printed only when `print` is nonzero (always recorded for sdn_tokenizer_warnings). */
void tok_warn_opt(sdn_tokenizer *t, int print, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* SentencePiece: encode one text fragment (already free of special tokens). `prefix_space`
 * adds the dummy U+2581 prefix. */
int tok_spm_encode(const sdn_tokenizer *t, const char *s, size_t n, int prefix_space, tok_vec *out, sdn_err *err);

/* Byte-level BPE. */
int tok_bpe_setup(sdn_tokenizer *t, const char *pre, const char *path, sdn_err *err);
void tok_bpe_free(sdn_tokenizer *t);
int tok_bpe_encode(const sdn_tokenizer *t, const char *s, size_t n, tok_vec *out, sdn_err *err);
/* GPT-2 byte <-> code point table (the byte -> code point direction is internal to tokenizer_bpe.c). */
int tok_bpe_cp_to_byte(uint32_t cp); /* -1 if cp is not a mapped byte */

#endif
