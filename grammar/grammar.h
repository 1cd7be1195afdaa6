/* grammar.h - constrained decoding: a grammar (a documented subset of llama.cpp's
 * GBNF) or a JSON schema compiled to one set of rules, a byte-level matcher over those rules,
 * and token-level checks of a model's vocabulary against the matcher.
 *
 * Layering: grammar/ sits above engine/ (it reads the tokenizer's token bytes) and below
 * draft/, verify/ and runtime/, which apply it (docs/constrained.md).
 *
 * Objects:
 *   sdn_grammar  compiled rules; immutable once built, shareable between threads.
 *   sdn_gstate   where the text generated so far stands in the grammar; owned by one thread.
 *                Copying a state is cheap (the tree verifier keeps one per draft node).
 *   sdn_gvocab   a model vocabulary as byte strings (byte-fallback tokens as their one byte,
 *                control tokens marked), built once per model, immutable, shareable.
 *
 * Text is matched as UTF-8 bytes, so a token may end inside a grammar symbol, span several,
 * or end inside a multi-byte character. End-of-generation tokens are allowed exactly where
 * the grammar may end; other control tokens are never allowed. Errors of a grammar or schema
 * are SDN_EINVAL with a message naming the position ("grammar: line 3, column 7: ...") or the
 * keyword and JSON pointer ("json_schema: unsupported keyword \"format\" at /properties/x"). */
#ifndef SDN_GRAMMAR_H
#define SDN_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "common/sdn_err.h"
#include "tokenizer/tokenizer.h"

typedef struct sdn_grammar sdn_grammar;
typedef struct sdn_gstate sdn_gstate;
typedef struct sdn_gvocab sdn_gvocab;

/* Compile GBNF text (start rule "root"). */
int sdn_grammar_parse(const char *gbnf, size_t len, sdn_grammar **out, sdn_err *err);
/* Compile a JSON schema (JSON text). */
int sdn_grammar_from_schema(const char *json, size_t len, sdn_grammar **out, sdn_err *err);
void sdn_grammar_free(sdn_grammar *g);
/* The GBNF text a JSON schema compiles to (*gbnf malloc'd, NUL-terminated; free it): for
 * inspection and the docs. Strings with a "pattern" (or length bounds above 64) appear as
 * the internal element @P<n>, which only the schema compiler may write. */
int sdn_schema_to_gbnf(const char *json, size_t len, char **gbnf, sdn_err *err);

/* A state at the start of g's root rule. */
int sdn_gstate_new(const sdn_grammar *g, sdn_gstate **out, sdn_err *err);
void sdn_gstate_free(sdn_gstate *s);
/* dst becomes a copy of src (same grammar); 0, or -1 when out of memory (dst unchanged). */
int sdn_gstate_copy(sdn_gstate *dst, const sdn_gstate *src);
/* Advance over n bytes: 1 when the grammar allows them (state advanced), 0 when it does not
 * (state unchanged), -1 out of memory or beyond the matcher's limits (state unchanged): more
 * than 1024 alternative parses at once (a very ambiguous grammar), nesting deeper than 8192
 * elements, more than 2^20 units of work (rule expansions and stack words) for one byte.
 * Functions that take a const state may still use scratch memory kept inside it (a state
 * belongs to one thread). */
int sdn_gstate_accept_bytes(sdn_gstate *s, const void *bytes, size_t n);
/* 1 when the text so far is a complete sentence of the grammar (it may end here). */
int sdn_gstate_can_end(const sdn_gstate *s);
/* 1 once an end-of-generation token was accepted: nothing more is allowed. */
int sdn_gstate_ended(const sdn_gstate *s);
/* SentencePiece's decoder drops the leading space (U+2581) of the first text piece of an
 * output (sdn_detok). With skip = 1, until a text token is accepted, token checks and
 * sdn_gstate_accept_token match a token's text without its leading space, so the grammar
 * sees the text as the detokenizer writes it (a byte-fallback token keeps its space; a token
 * that is only a space matches nothing and is allowed). For an answer that starts the
 * detokenized stream of a SentencePiece model; byte-level BPE keeps every space. Default 0;
 * copied by sdn_gstate_copy. */
void sdn_gstate_set_skip_leading_space(sdn_gstate *s, int skip);
/* The bytes every continuation must start with (the text the grammar forces next), at most
 * cap; stops where the grammar branches or may end. Returns the count. */
size_t sdn_gstate_forced(const sdn_gstate *s, char *buf, size_t cap);

/* The vocabulary of tokenizer t as bytes. */
int sdn_gvocab_new(const sdn_tokenizer *t, sdn_gvocab **out, sdn_err *err);
void sdn_gvocab_free(sdn_gvocab *v);
int sdn_gvocab_n(const sdn_gvocab *v);

/* 1 when token tok may come next, else 0. */
int sdn_gstate_allows(const sdn_gstate *s, const sdn_gvocab *v, int32_t tok);
/* Advance over token tok: 1 accepted, 0 not allowed (unchanged), -1 out of memory. */
int sdn_gstate_accept_token(sdn_gstate *s, const sdn_gvocab *v, int32_t tok);
/* The allowed token with the largest logit, lowest id among equal ones: exactly what
 * sdn_argmax returns on the logits with every disallowed token masked. Candidates are
 * checked in logit order, so the cost is small when the model agrees with the grammar.
 * -1 when no token is allowed. */
int32_t sdn_gstate_argmax(const sdn_gstate *s, const sdn_gvocab *v, const float *logits);
/* Set the logit of every disallowed token to -INFINITY; returns the number allowed
 * (a whole-vocabulary pass, for sampling). */
int sdn_gstate_mask(const sdn_gstate *s, const sdn_gvocab *v, float *logits);

#endif
