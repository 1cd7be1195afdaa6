/* model_internal.h - the sdn_model structure, shared by the engine's own files (loader,
 * forward pass, graph layouts). Not part of the public API. */
#ifndef SDN_MODEL_INTERNAL_H
#define SDN_MODEL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "modelfile/model.h"

/* A weight matrix y = W x with W of `out` rows of `in` elements, in the file's layout. */
typedef struct sdn_weight {
    const char *name;
    uint32_t type;
    int64_t in, out;
    const void *data; /* row o at data + o * row_bytes */
    size_t row_bytes;
    float *f32;       /* G1 layout: materialized F32 copy (out x in), or NULL */
    void *q;          /* G2 layout: owned copy of the file's quantized rows, packed when
                         sdn_weight_packed (matmul.h, "Packed weights"), or NULL (then the
                         kernels read the mapping) */
} sdn_weight;

/* Is w's G2 copy (when loaded) in the packed layout rather than the file's? */
int sdn_weight_packed(const sdn_weight *w);

typedef struct sdn_layer {
    float *attn_norm, *ffn_norm;   /* [dim], owned F32 copies */
    float *q_norm, *k_norm;        /* [head_dim] (qwen3, gemma3) or NULL */
    float *post_attn_norm, *post_ffn_norm; /* [dim] (gemma3) or NULL */
    float *bq, *bk, *bv;           /* biases or NULL */
    sdn_weight wq, wk, wv, wo;
    sdn_weight w_gate, w_up, w_down;
} sdn_layer;

struct sdn_gguf;

struct sdn_model {
    char *path;
    const char *format;
    sdn_model_config cfg;
    struct sdn_gguf *gguf;      /* GGUF models */
    void *map;                  /* llama2.c: mmap of the checkpoint */
    size_t map_size;
    sdn_weight tok_embd;        /* vocab rows of dim */
    sdn_weight output;          /* vocab rows of dim (== tok_embd when tied) */
    float *out_norm;            /* [dim] */
    float *rope_freqs;          /* [rope_dims/2] Llama 3 frequency factors or NULL */
    sdn_layer *layers;
    struct sdn_tokenizer *tok;
    uint64_t fingerprint;
    struct sdn_layout_pool *lpool; /* layout.c: the layout memory reserve (NULL until first used) */
};

#endif
