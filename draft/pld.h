/* pld.h - prompt lookup decoding (PLD, Saxena 2023; as run by Spec-Bench, Xia et al. 2024):
 * draft the tokens that followed an earlier occurrence of the sequence's last n-gram.
 *
 * The rule, exactly as Spec-Bench's find_candidate_pred_tokens applies it to the whole
 * sequence S (context followed by the committed output; L = |S|; the newest token is last):
 *   for n = max_ngram down to min_ngram (sizes with n > L are skipped):
 *     for every start idx = 0, 1, ..., L - n in increasing order with S[idx..idx+n) equal
 *     to the last n tokens S[L-n..L):
 *       if idx + n + num_pred <= L and idx + n < L - n:
 *         the draft is S[idx+n .. idx+n+num_pred)    (exactly num_pred tokens)
 *   no draft when nothing qualifies (Spec-Bench then feeds a dummy token; we draft none).
 * The first condition asks for a full continuation of num_pred tokens, the second keeps
 * the continuation from starting inside the final n-gram. Both bound idx from above, so if
 * the earliest occurrence of an n-gram fails them every later one fails too: the drafter
 * therefore keeps, per n-gram size, a hash table (XXH3 of the n tokens) from n-gram to its
 * earliest start, updated as tokens arrive, and answers in O(max_ngram) per step with the
 * same result as the scan.
 *
 * The draft is a chain; node d (1-based depth) scores (n / (n + 1))^d, n being the size
 * of the matched n-gram: a heuristic acceptance estimate that falls with depth and is
 * higher for longer matches. Caps (max_nodes, max_depth, the tree's free room) truncate
 * the chain; they never change which occurrence is chosen. */
#ifndef SDN_PLD_H
#define SDN_PLD_H

#include "draft/drafter.h"

typedef struct sdn_pld_config {
    int max_ngram; /* largest n-gram size tried first (default 3) */
    int min_ngram; /* smallest n-gram size tried (default 1) */
    int num_pred;  /* continuation tokens required and drafted (default 10) */
} sdn_pld_config;

/* The published defaults: max_ngram 3, min_ngram 1, num_pred 10. */
void sdn_pld_defaults(sdn_pld_config *cfg);

/* Create a PLD drafter (cfg NULL = defaults). Fails with SDN_EINVAL naming the field when
 * 1 <= min_ngram <= max_ngram <= 64 and 1 <= num_pred <= 4096 do not hold. */
int sdn_pld_create(const sdn_pld_config *cfg, sdn_drafter *out, sdn_err *err);

#endif
