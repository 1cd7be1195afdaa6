/* trace.h - traces: recorded greedy generations that offline studies replay drafting
 * against (docs/datasets.md has the full format description).
 *
 * Format: JSON Lines, one self-contained request per line, so any tool can write it:
 *   {"format": "sdnpu-trace", "version": 1,
 *    "id": "specbench-241", "task": "summary", "group": "summary" (optional),
 *    "model": "stories260K.bin" (free text, optional),
 *    "model_fingerprint": "16 hex digits" or null (sdnpu's XXH3 model fingerprint),
 *    "tokenizer": "tok512.bin" (free text, optional), "vocab_size": 512 (optional; when
 *    given every token id must be below it),
 *    "decoding": "greedy" (optional; any other value is refused: only greedy runs replay),
 *    "context_tokens": [ids...]   the whole prompt as the model saw it (BOS, template),
 *    "output_tokens": [ids...]    generated tokens, without the end-of-generation token,
 *    "stop": "eog" | "length" | "unknown",
 *    "eog_token": id or null      the end-of-generation token that stopped it ("eog"),
 *    "max_new_tokens": N or null  the generation limit in force (length stops happen here),
 *    "preds_k": K (0 or absent: no predictions),
 *    "pred_tokens": [[K ids] x (n_ctx - 1)]  the model's top-K next tokens after context
 *                                           position p (most probable first), p < n_ctx - 1,
 *    "pred_probs":  [[K probs] x (n_ctx - 1)] their probabilities, each in [0, 1],
 *    "output_pred_tokens": [[K ids] x n_out] (optional, with preds_k > 0): the model's top-K
 *                         next tokens at every output position j, i.e. after the token before
 *                         output j (the context's last for j = 0), best first, so row j
 *                         starts with output j (a greedy recording); what an offline replay
 *                         feeds the model-derived candidates (study.h),
 *    "source": any JSON (optional, kept verbatim; e.g. where the text came from)}
 * Loading checks every field: ids in [0, 2^31-2] (and below vocab_size), lengths
 * consistent, probabilities finite in [0, 1] and non-increasing within a row, known
 * stop values; the first problem fails with SDN_EFORMAT naming file, line and field. */
#ifndef SDN_TRACE_H
#define SDN_TRACE_H

#include <stdint.h>
#include <stdio.h>

#include "common/sdn_err.h"

#define SDN_TRACE_VERSION 1
#define SDN_TRACE_MAX_TOKENS (1 << 24) /* per token array */
#define SDN_TRACE_MAX_K 64

typedef enum sdn_trace_stop { SDN_STOP_UNKNOWN = 0, SDN_STOP_EOG = 1, SDN_STOP_LENGTH = 2 } sdn_trace_stop;

typedef struct sdn_trace_row {
    char *id, *task, *group;      /* group NULL when absent */
    char *model, *model_fp;       /* NULL when absent */
    char *tokenizer;              /* NULL when absent */
    char *source_json;            /* compact JSON of "source", NULL when absent */
    int vocab_size;               /* 0 unknown */
    int n_ctx, n_out;
    int32_t *ctx, *out;
    sdn_trace_stop stop;
    int32_t eog_token;            /* -1 unknown */
    int max_new;                  /* 0 unknown */
    int preds_k;                  /* 0: no predictions */
    int32_t *pred_tok;            /* [(n_ctx - 1) * preds_k] */
    float *pred_prob;             /* [(n_ctx - 1) * preds_k] */
    int32_t *out_pred_tok;        /* [n_out * preds_k] output_pred_tokens (NULL: absent) */
    int line;                     /* line in the file it was read from (0: built in memory) */
} sdn_trace_row;

typedef struct sdn_trace {
    int n, cap;
    sdn_trace_row *rows;
} sdn_trace;

/* Parse one line (name/line for messages). */
int sdn_trace_parse(const char *name, int line, const char *text, size_t len, sdn_trace_row *out, sdn_err *err);
/* Append every row of a trace file to t (zero-initialize it first). */
int sdn_trace_load(sdn_trace *t, const char *path, sdn_err *err);
/* Check a row built in memory (the same rules as loading). */
int sdn_trace_validate(const sdn_trace_row *r, sdn_err *err);
/* The row's vocabulary size: vocab_size when given, else 1 + the largest token id it holds. */
int sdn_trace_vocab(const sdn_trace_row *r);
/* Write one row as one line. */
int sdn_trace_write(FILE *f, const sdn_trace_row *r, sdn_err *err);
void sdn_trace_row_free(sdn_trace_row *r);
void sdn_trace_free(sdn_trace *t);
/* Keep rows whose task is in the comma-separated list (NULL or "": all) and at most
 * `limit` per task (<= 0: all). */
void sdn_trace_filter(sdn_trace *t, const char *tasks, int limit);

#endif
