/* vocab_gen.h - a generated SentencePiece-style vocabulary for make-model: <unk>, <s>,
 * </s>, the 256 byte-fallback tokens <0x00>..<0xFF>, the characters of a built-in English
 * text, then BPE merges learned on that text (most frequent adjacent pair first; piece
 * score = -merge rank, so score-ordered SentencePiece merging replays the learned order),
 * padded with <unused_N> tokens to the requested size. Spaces are U+2581 ("▁") as in
 * SentencePiece. */
#ifndef SDN_VOCAB_GEN_H
#define SDN_VOCAB_GEN_H

#include <stddef.h>

#include "common/sdn_err.h"

typedef struct sdn_vocab {
    int n;
    char **piece;
    float *score;
    int *type; /* GGUF token types: 1 normal, 2 unknown, 3 control, 5 unused, 6 byte */
} sdn_vocab;

/* Build a vocabulary of exactly n tokens (n >= 259 + the corpus's distinct characters). */
int sdn_vocab_generate(int n, sdn_vocab *out, sdn_err *err);
void sdn_vocab_free(sdn_vocab *v);

/* The built-in English text (a few KB) the vocabulary is trained on; also the source of
 * the demo request. */
extern const char sdn_builtin_corpus[];

#endif
