/* tokenizer.h - the model's own tokenizer: text -> token ids -> text, read from the model file.
 *
 * Two tokenizer families, chosen by the GGUF key `tokenizer.ggml.model`:
 *   "llama" - SentencePiece-style BPE (Llama 1/2, TinyStories, Vicuna...): spaces become U+2581,
 *             a dummy space prefix, pairs merged best-score-first, byte fallback <0xNN>.
 *             The llama2.c `tokenizer.bin` format is read into the same tokenizer.
 *   "gpt2"  - byte-level BPE (GPT-2, Llama 3, Qwen2, SmolLM...): the text is split by the
 *             pre-tokenizer regex named by `tokenizer.ggml.pre` (PCRE2 with Unicode
 *             properties), bytes are mapped to printable code points, and pairs are merged
 *             lowest-rank-first from `tokenizer.ggml.merges`.
 * docs/tokenizer.md describes the algorithms, the pre-tokenizer table, the special-token
 * policy, the invalid-UTF-8 rule and every fallback.
 *
 * A tokenizer is immutable after loading; every function taking a const sdn_tokenizer* is
 * safe to call from several threads at once. */
#ifndef SDN_TOKENIZER_H
#define SDN_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "common/sdn_err.h"
#include "modelfile/gguf.h"

typedef struct sdn_tokenizer sdn_tokenizer;

typedef enum sdn_tokenizer_kind {
    SDN_TOKENIZER_SPM = 1, /* SentencePiece-style, scores + byte fallback */
    SDN_TOKENIZER_BPE = 2, /* byte-level BPE, merges by rank */
} sdn_tokenizer_kind;

/* Token types, numbered as GGUF's `tokenizer.ggml.token_type` (= SentencePiece's). */
typedef enum sdn_token_type {
    SDN_TOKEN_UNDEFINED = 0,
    SDN_TOKEN_NORMAL = 1,
    SDN_TOKEN_UNKNOWN = 2,
    SDN_TOKEN_CONTROL = 3,      /* <s>, <|im_start|>, <|eot_id|> ...: only from templates */
    SDN_TOKEN_USER_DEFINED = 4, /* added vocabulary, always matched as one token */
    SDN_TOKEN_UNUSED = 5,
    SDN_TOKEN_BYTE = 6,         /* <0xNN> byte-fallback tokens */
} sdn_token_type;

/* Read the tokenizer.ggml.* section of an open GGUF (vocabulary-only files work too).
 * Everything needed is copied: `g` may be closed afterwards. A missing or inconsistent
 * section fails with SDN_EFORMAT / SDN_EUNSUP and a message naming the file and key;
 * recoverable oddities (missing `tokenizer.ggml.pre`, duplicate pieces, ...) fall back to
 * the documented default and are reported by sdn_tokenizer_warnings(). */
int sdn_tokenizer_from_gguf(const sdn_gguf *g, sdn_tokenizer **out, sdn_err *err);

/* Read a llama2.c `tokenizer.bin` (int32 max_token_length, then per token: float32 score,
 * int32 byte length, bytes). vocab_size > 0 reads exactly that many tokens (the checkpoint's
 * vocabulary size); vocab_size <= 0 reads tokens up to the end of the file. Token types are
 * inferred by pattern: <unk> unknown, <s> and </s> control (the file stores them as
 * "\n<s>\n"), <0xNN> byte; spaces in pieces are SentencePiece's U+2581. BOS = <s>, EOS = </s>,
 * add_bos = 1, dummy space prefix on. */
int sdn_tokenizer_from_llama2c(const char *path, int vocab_size, sdn_tokenizer **out, sdn_err *err);

void sdn_tokenizer_free(sdn_tokenizer *t);

int sdn_tokenizer_n_vocab(const sdn_tokenizer *t);
/* Most text bytes one token can stand for (the longest piece; at least 4, a UTF-8
 * character under <unk>): a text of B bytes has at least B / this many tokens. */
int sdn_tokenizer_max_text_bytes(const sdn_tokenizer *t);
sdn_tokenizer_kind sdn_tokenizer_kind_of(const sdn_tokenizer *t);
/* Name of the pre-tokenizer in use ("qwen2", "llama-bpe", ...; "" for SentencePiece). */
const char *sdn_tokenizer_pre(const sdn_tokenizer *t);
/* Warnings collected while loading (one per line, also printed to stderr); "" if none. */
const char *sdn_tokenizer_warnings(const sdn_tokenizer *t);
/* The file's `tokenizer.chat_template` (Jinja source), or NULL. */
const char *sdn_tokenizer_chat_template(const sdn_tokenizer *t);

#define SDN_TOKENIZE_MAX_BYTES (64 << 20)

/* Encode len bytes of text. add_bos: prepend BOS (callers pass sdn_tokenizer_add_bos(t)
 * unless told otherwise). parse_special: control tokens written in the text ("<|im_start|>",
 * "<s>") become single tokens; without it they are tokenized as ordinary text. Added
 * (user-defined) tokens are always matched, as in the model's own tokenizer. Invalid UTF-8
 * never fails: every byte that is not part of a well-formed UTF-8 sequence is replaced by
 * U+FFFD before tokenizing. *ids is malloc'd (free it), also when *n_ids is 0. One call takes
 * at most SDN_TOKENIZE_MAX_BYTES of text. */
int sdn_tokenize(const sdn_tokenizer *t, const char *text, size_t len, int add_bos, int parse_special,
                 int32_t **ids, int *n_ids, sdn_err *err);

int sdn_tokenizer_add_bos(const sdn_tokenizer *t); /* metadata default (1/0) */
int32_t sdn_tokenizer_bos(const sdn_tokenizer *t); /* -1 if none */
int32_t sdn_tokenizer_eos(const sdn_tokenizer *t); /* -1 if none */
/* End of generation: the metadata's EOS / EOT / EOM ids, plus control tokens whose text is
 * an end-of-turn marker (<|im_end|>, <|eot_id|>, <|eom_id|>, <|endoftext|>,
 * <|end_of_text|>, <|end|>, <end_of_turn>, <EOT>). */
int sdn_tokenizer_is_eog(const sdn_tokenizer *t, int32_t id);
/* SentencePiece merge score of token id (tokenizer.ggml.scores; 0 if absent or out of range). */
float sdn_tokenizer_score(const sdn_tokenizer *t, int32_t id);
/* Type of token id (SDN_TOKEN_*), 0 if id is out of range. */
int sdn_tokenizer_token_type(const sdn_tokenizer *t, int32_t id);
/* Id of the vocabulary string piece[0..len), or -1. */
int32_t sdn_tokenizer_find(const sdn_tokenizer *t, const char *piece, size_t len);
/* Raw vocabulary string of id (NUL-terminated, *len bytes), NULL if out of range. For
 * SentencePiece it contains U+2581 for spaces, for byte-level BPE the mapped code points. */
const char *sdn_tokenizer_piece(const sdn_tokenizer *t, int32_t id, size_t *len);
/* Bytes that token id contributes to decoded text (no leading-space rule applied; control
 * tokens give their text). Writes at most cap bytes, returns the full length. */
size_t sdn_tokenizer_token_bytes(const sdn_tokenizer *t, int32_t id, char *out, size_t cap);

/* Streaming detokenizer. Push ids one by one and receive valid UTF-8: bytes of a character
 * split across tokens are held until the character is complete; a byte that cannot belong
 * to a well-formed character becomes U+FFFD (one per byte, as SentencePiece decodes).
 * SentencePiece tokenizers drop the leading space of the first text piece of the stream
 * (after BOS / control tokens), as SentencePiece's decoder does. Control and unused tokens
 * produce no text unless sdn_detok_set_special(d, 1). Output that does not fit in `cap`
 * is kept and returned first by the next push/flush, so nothing is ever lost. */
typedef struct sdn_detok sdn_detok;
sdn_detok *sdn_detok_new(const sdn_tokenizer *t); /* NULL on allocation failure */
void sdn_detok_set_special(sdn_detok *d, int render_control_tokens);
/* Feed ids that are already on screen (a prompt) without producing output, so the
 * leading-space rule and held bytes are right for what follows. */
void sdn_detok_prime(sdn_detok *d, const int32_t *ids, int n);
size_t sdn_detok_push(sdn_detok *d, int32_t id, char *out, size_t cap); /* bytes written */
/* End of stream: held bytes of an incomplete character become U+FFFD each. */
size_t sdn_detok_flush(sdn_detok *d, char *out, size_t cap);
size_t sdn_detok_pending(const sdn_detok *d); /* bytes queued because cap was too small */
/* 1 when the next text token's leading space will be dropped (a SentencePiece stream with no
 * text yet: nothing or only BOS / control tokens pushed or primed). */
int sdn_detok_drops_next_space(const sdn_detok *d);
void sdn_detok_free(sdn_detok *d);

/* Decode a whole id array (with the rules of sdn_detok, control tokens not rendered) into a
 * malloc'd NUL-terminated string. Fails with SDN_EINVAL naming the first id out of range. */
int sdn_detokenize(const sdn_tokenizer *t, const int32_t *ids, int n, char **text, sdn_err *err);

#endif
