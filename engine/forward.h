/* forward.h - inference context and the transformer forward pass.
 *
 * An sdn_ctx holds a model's KV cache, scratch buffers and thread pool. sdn_forward runs a
 * batch of n tokens with explicit positions and an explicit attention mask over the batch
 * (every row also sees all committed KV entries), appends the batch's n KV entries, and
 * writes logits only for the rows asked for. Verification passes a tree mask, then keeps a
 * subset of the new entries with sdn_kv_keep.
 *
 * Two kernel paths: with batch->invariant set (decode and verification), every matmul and
 * attention row uses the batch-invariant kernels of matmul.h, so a row's output bits do not
 * depend on n, on the other rows or on the thread count. Otherwise (prefill: more than
 * SDN_INVARIANT_MAX_ROWS rows) the work is split differently (attention by blocks of rows,
 * matmuls over whole chunks) but each row is computed with the same operations in the same
 * order, so its bits are still those of a decode step: the prefill-matmul setting
 * (kernels/kernel_path.h) runs every weight type on the same batch kernels by default;
 * only an explicit `sgemm` sends the matmuls to OpenBLAS SGEMM on F32 weights, whose bits
 * depend on the call's shape (threads, chunk size) and so are not covered by the promise. */
#ifndef SDN_FORWARD_H
#define SDN_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "common/sdn_err.h"
#include "attention/kv_cache.h"
#include "modelfile/model.h"

#define SDN_INVARIANT_MAX_ROWS 64
/* The default KV cache size in positions: min(the model's trained length, this). */
#define SDN_DEFAULT_N_CTX 8192

typedef struct sdn_ctx sdn_ctx;

/* Threads: each context has its own pool of n_threads - 1 workers, for the batch kernels
 * and (only under --prefill-matmul sgemm) for the prefill GEMMs: such a GEMM is split by
 * output columns over the pool, each thread calling single-threaded OpenBLAS SGEMM on its
 * slice. sdnpu sets OpenBLAS's process-wide thread count to 1 (openblas_set_num_threads, in
 * a forward pass that finds it otherwise): OpenBLAS's own threads, which spin for about
 * 0.1 s after each GEMM, are never started, and contexts with different thread counts can
 * run at the same time. A program that embeds sdnpu and calls OpenBLAS itself gets
 * single-threaded GEMMs after a forward pass (if it sets its own count, sdnpu's next pass
 * sets 1 again). A context is used by one thread at a time. */
typedef struct sdn_ctx_params {
    int n_ctx;     /* KV cache capacity in tokens (0: min(model ctx_len, SDN_DEFAULT_N_CTX)) */
    int n_threads; /* worker threads incl. the caller (0: 1) */
    int max_batch; /* largest batch sdn_forward accepts (0: 256) */
    int file_layout; /* 0 (default): make the model's decode layout resident (layout.h,
                        sdn_layout_decode_resident: Q8_0/Q4_0/Q4_1 matrices packed for the
                        kernels) if it is not; 1: leave the layouts to the caller (the graph
                        scheduler manages G2 itself); matrices without G2 read the mapping */
    sdn_kv_type type_k, type_v; /* KV cache element types (attention/kv_cache.h; 0, SDN_KV_AUTO: the process default, f16) */
} sdn_ctx_params;

/* Fails when the decode layout does not fit in memory. */
int sdn_ctx_new(const sdn_model *m, const sdn_ctx_params *p, sdn_ctx **out, sdn_err *err);
void sdn_ctx_free(sdn_ctx *c);
const sdn_model *sdn_ctx_model(const sdn_ctx *c);
int sdn_ctx_n_ctx(const sdn_ctx *c);
int sdn_ctx_max_batch(const sdn_ctx *c);
int sdn_ctx_threads(const sdn_ctx *c);
/* The KV cache's element types (resolved: never SDN_KV_AUTO). */
void sdn_ctx_kv_types(const sdn_ctx *c, sdn_kv_type *k, sdn_kv_type *v);

typedef struct sdn_batch {
    int n;
    const int32_t *tokens;     /* [n] token ids */
    const int32_t *pos;        /* [n] RoPE positions; NULL: n_kv + i */
    const uint8_t *mask;       /* [n*n]: row i attends batch row j iff mask[i*n+j] != 0 (row i must
                                  attend itself and only rows j <= i); NULL: causal */
    const int32_t *logit_rows; /* rows whose logits are wanted (ascending) */
    int n_logits;              /* number of those rows; -1 = all rows; 0 = none */
    int invariant;             /* 1: batch-invariant kernels for all rows */
    int topk;                  /* > 0: instead of logits, write each logit row's k most probable
                                  tokens (topk_tok) and their softmax probabilities (topk_prob),
                                  most probable first; `logits` is then unused */
    int32_t *topk_tok;         /* [n_logits * topk] */
    float *topk_prob;          /* [n_logits * topk] */
    const int32_t *topk_vocab; /* optional: restrict the top-k, and the softmax normalizing it,
                                  to these distinct token ids (e.g. the context's own tokens):
                                  the LM head then costs n_topk_vocab / vocab of a full one */
    int n_topk_vocab;
} sdn_batch;

/* Run the batch; logits (n_logits x vocab floats, in logit_rows order) go to `logits` (or
 * the top-k lists when batch->topk > 0: computed over vocabulary tiles with a running
 * log-sum-exp, so no n x vocab matrix is materialized).
 * On success the KV cache holds n more entries (slots n_kv .. n_kv+n-1). */
int sdn_forward(sdn_ctx *c, const sdn_batch *b, float *logits, sdn_err *err);

/* Number of committed KV entries. */
int sdn_kv_len(const sdn_ctx *c);
/* How many leading committed KV entries hold tokens[0..n) at their own positions (entries
 * committed through the block API count as unknown): the prefix a new prompt can reuse. */
int sdn_kv_common_prefix(const sdn_ctx *c, const int32_t *tokens, int n);
/* Keep only entries first+keep[0], first+keep[1], ... (keep ascending, all < n_kv - first)
 * and move them to slots first, first+1, ...; the KV length becomes first + n_keep. */
int sdn_kv_keep(sdn_ctx *c, int first, const int32_t *keep, int n_keep, sdn_err *err);
/* Drop entries from slot n on. */
void sdn_kv_truncate(sdn_ctx *c, int n);

/* Prefix blocks: the KV entries of SDN_KV_TILE consecutive positions starting at a multiple
 * of SDN_KV_TILE, as a flat image (attention/kv_cache.h, tiles), for the prefix cache.
 * Export: block blk must be committed (its last slot < sdn_kv_len). Import: the KV length must
 * be blk * SDN_KV_TILE (the block comes next) and the block must fit; its entries then count
 * as tokens[0 .. SDN_KV_TILE) at their own positions, and the KV length grows by a block.
 * SDN_EINVAL otherwise. */
size_t sdn_ctx_block_bytes(const sdn_ctx *c);
int sdn_ctx_block_export(const sdn_ctx *c, int blk, uint8_t *buf, sdn_err *err);
int sdn_ctx_block_import(sdn_ctx *c, int blk, const uint8_t *buf, const int32_t *tokens, sdn_err *err);
/* The last layer's output (before the final norm) of the rows of the last sdn_forward call:
 * n x dim floats, valid until the next forward pass; sdn_fwd_head of them gives those rows'
 * logits again, bit for bit. */
const float *sdn_ctx_hidden(const sdn_ctx *c);

/* Time spent in the forward pass by part, accumulated since creation / last reset. */
typedef struct sdn_fwd_stats {
    double matmul_s, attention_s, other_s;
    double topk_s; /* LM head + top-k selection of batches with topk > 0 (part of the above) */
    long forwards, rows;
} sdn_fwd_stats;
void sdn_ctx_stats(const sdn_ctx *c, sdn_fwd_stats *out);
void sdn_ctx_reset_stats(sdn_ctx *c);

/* ---- Block-level API (graph scheduling runs blocks of layers with chosen kernels) ----
 * sdn_forward(b) == embed into the context's hidden buffer, layers [0, n_layers) at KV base
 * sdn_kv_len() with SDN_PATH_AUTO, head, commit b->n entries. */
typedef enum sdn_path {
    SDN_PATH_AUTO = 0,    /* batch-invariant kernels when b->invariant or n <= 64, else the prefill path */
    SDN_PATH_PREFILL = 1, /* the prefill graph G1: matmuls as the prefill-matmul setting says
                             (the batch kernels by default; SGEMM on the F32 layout when it is
                             resident, else dequantized per call, under `sgemm`) */
    SDN_PATH_DECODE = 2,  /* the decode graph G2: batch-invariant kernels on the quantized layout
                             (n <= max batch; a row's bits never depend on the batch) */
} sdn_path;

/* Token embeddings of b->tokens into x (n x dim). */
int sdn_fwd_embed(sdn_ctx *c, const sdn_batch *b, float *x);
/* Run layers [l0, l1) over the hidden states x (n x dim, updated in place). The batch's KV
 * entries go to slots kv_base .. kv_base+n-1 of those layers, and its rows attend slots
 * [0, kv_base) plus the batch rows the mask allows. Positions: b->pos or kv_base + i. Does
 * not change the committed KV length. */
int sdn_fwd_layers(sdn_ctx *c, const sdn_batch *b, int kv_base, int l0, int l1, float *x, sdn_path path, sdn_err *err);
/* Final norm and logits (or top-k) for the rows b asks for, from hidden states x. */
int sdn_fwd_head(sdn_ctx *c, const sdn_batch *b, const float *x, float *logits, sdn_path path, sdn_err *err);
/* Commit n more KV entries (after all layers of a batch ran). */
void sdn_kv_commit(sdn_ctx *c, int n);
/* Timing only: append n entries holding pseudo-random keys and values (uniform in [-1, 1),
 * stored in the cache's types) without running the model, so a cost measurement after
 * thousands of positions does not pay their prefill. The entries count as unknown tokens,
 * like sdn_kv_commit's. Returns SDN_EINVAL when they do not fit. */
int sdn_kv_fill_synthetic(sdn_ctx *c, int n, uint64_t seed, sdn_err *err);

#endif
