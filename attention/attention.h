/* attention.h - attention of a batch's queries over the KV cache, in an order fixed by
 * absolute positions.
 *
 * One algorithm serves prefill chunks, decode steps and tree verification, so a query's
 * result depends only on the query vector, its position, and the keys and values it sees,
 * never on how the prompt was cut into chunks, the batch size, the thread count, the graph
 * mode or the kernel path:
 *
 *   - the positions a query sees are cut into tiles of 64 (positions 64t .. 64t+63) and
 *     super-tiles of 512 (eight tiles), both aligned to absolute positions;
 *   - within a super-tile, the tiles are visited in order with an online softmax (running
 *     max m, sum l and output acc; attention/attention_kern.h states the arithmetic, lane by
 *     lane, that every kernel path shares);
 *   - the super-tiles' (m, l, acc) are merged in increasing order: M' = max(M, m),
 *     a = e^(M - M'), b = e^(m - M'), L = L a + l b, ACC = fma(acc, b, ACC a); the first
 *     non-empty one is taken as it is;
 *   - the output is ACC * (1 / L).
 * Tiles no visible position falls in are skipped (causal masking, sliding windows), so
 * prefill costs about half of the full square, and the work is split over the thread pool
 * by (KV head, rows) for prefill batches and by (KV head, super-tile) for decode and verify
 * steps, whose per-super-tile results are merged afterwards in the same fixed order.
 *
 * Which entries a batch row sees: committed slot s holds position s (prefill appends in
 * order; sdn_kv_keep moves accepted tree rows to the slots of their positions). A batch
 * without a mask whose positions are the default (kv_base + i) is stored at the slots of its
 * positions and row i sees positions [lo, kv_base + i]. Otherwise (a tree mask, or explicit
 * positions) row i sees the committed positions [lo, kv_base) and the batch rows its mask
 * allows (causal without one), each at its own position, which must be >= kv_base and
 * distinct among the rows one row sees (forward.c checks). lo = p - window + 1 in a
 * sliding-window layer (p the row's position), else 0. */
#ifndef SDN_ATTENTION_H
#define SDN_ATTENTION_H

#include <stdint.h>

#include "common/sdn_err.h"
#include "attention/kv_cache.h"
#include "kernels/threadpool.h"

#define SDN_ATT_SUPER 512 /* positions per super-tile (a multiple of SDN_KV_TILE) */
#define SDN_ATT_MAX_HD 1024 /* the largest head dimension (engine/model_load.c refuses larger) */

typedef struct sdn_att_ws sdn_att_ws;

/* Scratch for the attention of a context: n_threads workers, batches of up to max_batch
 * rows, n_heads query heads of head_dim, n_ctx positions. */
int sdn_att_ws_new(int n_threads, int max_batch, int n_heads, int n_kv_heads, int head_dim, int n_ctx, sdn_att_ws **out, sdn_err *err);
void sdn_att_ws_free(sdn_att_ws *ws);

typedef struct sdn_att_args {
    const sdn_kv *kv;
    int layer;
    const float *q;       /* [n][ldq]: row i's head h at q + i*ldq + h*head_dim (after RoPE) */
    int ldq;
    float *out;           /* [n][ldq], same layout */
    int n, n_heads, n_kv_heads, head_dim;
    float scale;          /* score scale (1/sqrt(head_dim) or the model's) */
    int kv_base;          /* committed entries before the batch; the batch is in slots kv_base .. kv_base+n-1 */
    const int32_t *pos;   /* [n] positions, NULL: kv_base + i */
    const uint8_t *mask;  /* [n*n] row i sees row j iff mask[i*n+j] (j <= i), NULL: causal */
    int window;           /* > 0: sliding window of this layer */
} sdn_att_args;

/* The attention of every row and head of the batch (see above). The batch's K and V must be
 * in the cache already (sdn_kv_store). The kernels are those of the process's kernel path
 * (kernels/kernel_path.h) at the time of the call. */
void sdn_attention(sdn_att_ws *ws, sdn_pool *pool, const sdn_att_args *a);

#endif
