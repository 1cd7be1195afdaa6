/* recycle.h - the model-derived drafting source: the candidates the model itself ranked
 * highest after each token, kept across steps, requests and contexts of one model.
 *
 * After Token Recycling (Luo et al., ACL 2025, arXiv 2408.08696, section 3): every verified
 * row of a decode step - the root and every draft node, accepted or rejected - gives the
 * model's top-K next tokens after that row's token t; the table's row for t is replaced by
 * them (newest wins). A draft is then read from the table by following its rows from the
 * newest committed token: the model's own earlier predictions, which retrieval from the
 * context cannot give when the model paraphrases what it reads.
 *
 * The table is keyed by the previous token only (a first-order model of the model), holds
 * K token ids per vocabulary entry (4 * K * vocab bytes: 1.5 MiB for SmolLM2's 49,152 tokens
 * at K = 8, 8 MiB for Gemma 3's 262,144) and counts, per rank r, how often the model's next
 * token after t was the table's r-th candidate for t when the row was replaced (its measured
 * accuracy, what the drafter's estimates start from).
 *
 * One table is shared by every context of a model (the API keeps it with the model; server
 * slots update it concurrently): every call takes the table's lock. Drafting only: the
 * output never depends on what the table holds.
 *
 * Serialized form (stored by runtime/history.c, untrusted on load): magic "SDNRCY01", u32
 * vocab, u32 K, u64 updates, K x u64 hits, then vocab * K int32 (little-endian; -1 = empty),
 * then an XXH3-64 of everything before it. */
#ifndef SDN_RECYCLE_H
#define SDN_RECYCLE_H

#include <stddef.h>
#include <stdint.h>

#include "common/sdn_err.h"

#define SDN_RECYCLE_MAX_K 16
#define SDN_RECYCLE_DEFAULT_K 8

typedef struct sdn_recycle sdn_recycle;

/* A table for `vocab` token ids with k candidates each (1 <= k <= SDN_RECYCLE_MAX_K). */
int sdn_recycle_new(int vocab, int k, sdn_recycle **out, sdn_err *err);
void sdn_recycle_free(sdn_recycle *r);
int sdn_recycle_vocab(const sdn_recycle *r);
int sdn_recycle_k(const sdn_recycle *r);

/* One verified row: after token t the model ranked cand[0..n) highest, best first (n <= k;
 * ids outside the vocabulary are ignored; a row whose cand[0] is not a token id is not known
 * and is skipped entirely, neither counted nor stored). Counts where cand[0] stood in t's old row, then
 * replaces the row. n_rows rows at once (t[i], cand + i * stride, n) under one lock. The
 * same counts of these rows alone are also added to hits[0..k) and *rows when not NULL (a
 * caller's own tally: a request's, sdnpu_drafter.c). */
void sdn_recycle_update(sdn_recycle *r, const int32_t *t, const int32_t *cand, int stride, int n, int n_rows, uint64_t *hits,
                        uint64_t *rows);

/* t's row into out[0..k) (best first); returns how many are set (0: t never seen or out of
 * range). */
int sdn_recycle_get(sdn_recycle *r, int32_t t, int32_t *out);

/* Per rank, how often the replaced row's r-th candidate was the model's next token
 * (hits[0..k)), and how many rows were replaced (*updates). */
void sdn_recycle_stats(sdn_recycle *r, uint64_t *hits, uint64_t *updates);

/* Serialize (*out malloc'd). */
int sdn_recycle_serialize(sdn_recycle *r, uint8_t **out, size_t *len, sdn_err *err);
/* Replace r's contents with a serialized table of the same vocabulary and K; anything else
 * (wrong size, magic, checksum, shape, token ids out of range) fails with SDN_EFORMAT naming
 * what is wrong, and r is left as it was. `what` names the source in messages. */
int sdn_recycle_load(sdn_recycle *r, const uint8_t *buf, size_t len, const char *what, sdn_err *err);

#endif
