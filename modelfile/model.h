/* model.h - loading a model file (GGUF `llama`/`qwen2`/`qwen3`/`gemma3`, or a llama2.c checkpoint) into an
 * opaque sdn_model: configuration, weights (kept in the file's layout through mmap), its
 * tokenizer and a content fingerprint. Inference state lives in sdn_ctx (forward.h). */
#ifndef SDN_MODEL_H
#define SDN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "common/sdn_err.h"

typedef struct sdn_model sdn_model;
struct sdn_tokenizer;

/* Largest trained context length a model file may declare (GGUF context_length, llama2.c
 * seq_len); larger values are refused as absurd rather than narrowed to int. */
#define SDN_MAX_CTX_LEN (1 << 24)

typedef enum sdn_arch { SDN_ARCH_LLAMA = 0, SDN_ARCH_QWEN2 = 1, SDN_ARCH_QWEN3 = 2, SDN_ARCH_GEMMA3 = 3 } sdn_arch;

/* The GGUF general.architecture name of an architecture. */
const char *sdn_arch_name(sdn_arch a);

/* The shape and numerics of a model, as read from its file. */
typedef struct sdn_model_config {
    sdn_arch arch;
    int n_layers;
    int dim;          /* embedding width */
    int hidden;       /* feed-forward width */
    int n_heads;
    int n_kv_heads;   /* GQA: n_heads % n_kv_heads == 0 */
    int head_dim;
    int vocab;
    int ctx_len;      /* trained context length */
    float rms_eps;
    float rope_theta;
    float rope_scale; /* linear position scaling (1 = none) */
    int rope_neox;    /* 1: rotate pairs (i, i + d/2) (qwen2); 0: pairs (2i, 2i+1) (llama) */
    int rope_dims;    /* leading dims of each head that get rotated */
    int has_qkv_bias;
    int has_rope_freqs; /* Llama 3 frequency factors tensor present */
    int tied_output;  /* output projection shares token_embd */
    /* qwen3 and gemma3 */
    int has_qk_norm;  /* RMSNorm over each head of q and k (attn_q_norm, attn_k_norm) before RoPE */
    /* gemma3 */
    int has_post_norms;   /* RMSNorm of the attention and FFN outputs before the residual add
                             (post_attention_norm, post_ffw_norm) */
    int ffn_gelu;         /* 1: gelu(tanh) gate; 0: silu gate */
    float embd_scale;     /* token embeddings are multiplied by this (gemma3: sqrt(dim); else 1) */
    float attn_scale;     /* attention logit scale (1/sqrt(head_dim), or gemma3's query_pre_attn_scalar) */
    int n_swa;            /* > 0: sliding window of the local layers (a query at position p sees
                             keys at positions > p - n_swa); 0: every layer is global */
    int swa_pattern;      /* with n_swa: layer l is local iff l % swa_pattern < swa_pattern - 1 */
    float rope_theta_swa; /* RoPE base of the local layers */
    float final_softcap;  /* > 0: logits = cap * tanh(logits / cap) */
} sdn_model_config;

/* 1 when layer l of the model uses sliding-window (local) attention. */
int sdn_layer_is_swa(const sdn_model_config *c, int l);

typedef struct sdn_model_load_opts {
    const char *tokenizer_path; /* llama2.c tokenizer.bin (needed for llama2.c checkpoints) */
    int no_tokenizer;           /* skip the tokenizer (tests of bare weights) */
} sdn_model_load_opts;

/* Load `path`. GGUF files are recognised by their magic; anything else is read as a
 * llama2.c checkpoint (legacy v0 or the "ak42" v1 export). Every problem is reported with
 * the file name and the field or tensor at fault. */
int sdn_model_load(const char *path, const sdn_model_load_opts *opts, sdn_model **out, sdn_err *err);
void sdn_model_free(sdn_model *m);

const sdn_model_config *sdn_model_cfg(const sdn_model *m);
const char *sdn_model_path(const sdn_model *m);
/* "gguf" or "llama2c" */
const char *sdn_model_format(const sdn_model *m);
/* Tokenizer (NULL when the model was loaded with no_tokenizer). */
struct sdn_tokenizer *sdn_model_tokenizer(const sdn_model *m);
/* 64-bit fingerprint: XXH3 of the file's metadata and tensor table plus sampled weight
 * bytes (identifies the model in history stores, traces and profiles). */
uint64_t sdn_model_fingerprint(const sdn_model *m);
/* Bytes of weights a forward pass over all layers reads (the file's layout). */
size_t sdn_model_weight_bytes(const sdn_model *m);
/* Bytes read per decoded token: all layer weights + output projection (+1 embedding row). */
size_t sdn_model_bytes_per_token(const sdn_model *m);
/* KV cache bytes for n_ctx positions in the process's default cache types (attention/kv_cache.h). */
size_t sdn_model_kv_bytes(const sdn_model *m, int n_ctx);
/* Human-readable description of the model (architecture, shapes, tensor types per
 * role, tokenizer, memory) for `sdnpu info`. malloc'd string; NULL when out of memory. */
char *sdn_model_describe(const sdn_model *m, int n_ctx);

#endif
