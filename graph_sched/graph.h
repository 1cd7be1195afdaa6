/* graph.h - fixed-shape graphs over blocks of layers.
 *
 * The model's layers are partitioned into N blocks of consecutive layers. A graph is
 * (a block) x (a fixed input length) x (a weight layout):
 *   G1, the prefill graph: S1 rows, the F32 layout (SDN_LAYOUT_F32), OpenBLAS SGEMM and
 *       GEMM attention (SDN_PATH_PREFILL). Input shorter than S1 is padded: the padding
 *       rows come after the real ones (causal attention keeps the real rows from seeing
 *       them), are computed like real rows, and their KV entries land after the real
 *       ones, beyond the committed length, where later tokens overwrite them.
 *   G2, the decode/verify graph: S2 <= 64 rows, the owned quantized layout
 *       (SDN_LAYOUT_QUANT), batch-invariant kernels (SDN_PATH_DECODE). Input longer than S2
 *       runs the graph repeatedly over sub-chunks ("equivalence by repetition"): sub-chunk s
 *       of a chunk at KV base B runs at KV base B + s*S2 and attends the earlier sub-chunks'
 *       entries. Because the kernels are batch invariant, the result is bit-identical to
 *       running the whole chunk through the decode path at once, or token by token.
 * The hidden states of a chunk flow from block to block in one activation buffer that the
 * graphs of a run share (sdn_graph_bufs, allocated once); the context (sdn_ctx) owns the
 * per-layer scratch buffers, sized by its max batch. Which layout is resident is the
 * caller's business (graph_sched/prefill.h): a graph run on a layout that is not loaded
 * still computes the same values, from the file mapping. */
#ifndef SDN_GRAPH_H
#define SDN_GRAPH_H

#include <stdint.h>

#include "common/sdn_err.h"
#include "engine/forward.h"
#include "engine/layout.h"

#define SDN_GRAPH_MAX_BLOCKS 128

/* Contiguous blocks of layers: block j is [l0[j], l1[j]). */
typedef struct sdn_blocks {
    int n;
    int l0[SDN_GRAPH_MAX_BLOCKS], l1[SDN_GRAPH_MAX_BLOCKS];
} sdn_blocks;

/* Split n_layers into n_blocks blocks whose sizes differ by at most one (the first blocks
 * get the extra layers). n_blocks is capped at n_layers. */
int sdn_blocks_partition(int n_layers, int n_blocks, sdn_blocks *out, sdn_err *err);

typedef enum sdn_graph_kind { SDN_GRAPH_G1 = 1, SDN_GRAPH_G2 = 2 } sdn_graph_kind;

typedef struct sdn_graph {
    sdn_graph_kind kind;
    int l0, l1; /* the block's layers */
    int rows;   /* fixed input length: S1 (G1) or S2 (G2) */
} sdn_graph;

/* Rows the graph computes for a chunk of n real rows: S1 for G1 (n <= S1), ceil(n/S2)*S2
 * for G2. */
int sdn_graph_rows_run(const sdn_graph *g, int n);

/* A run's shared activation buffer: hidden states for `rows` rows of width dim, plus the
 * padded token ids of a chunk. */
typedef struct sdn_graph_bufs {
    float *x;
    int32_t *tok;
    int rows, dim;
} sdn_graph_bufs;

/* Buffers for chunks of up to s1 rows run through G1 (s1 rows) and G2 (s2-row sub-chunks). */
int sdn_graph_bufs_init(sdn_graph_bufs *b, int dim, int s1, int s2, sdn_err *err);
void sdn_graph_bufs_free(sdn_graph_bufs *b);

/* Embed chunk tokens[0..n) into b->x, padding the rows after n (up to b->rows) with the
 * embedding of token `pad`. */
int sdn_graph_embed(sdn_ctx *c, sdn_graph_bufs *b, const int32_t *tokens, int n, int32_t pad, sdn_err *err);

/* Run graph g over the chunk in x (n real rows, KV base kv_base). x must hold
 * sdn_graph_rows_run(g, n) rows; the context needs max batch >= g->rows and room for
 * kv_base + rows run. */
int sdn_graph_run(sdn_ctx *c, const sdn_graph *g, float *x, int n, int kv_base, sdn_err *err);

#endif
