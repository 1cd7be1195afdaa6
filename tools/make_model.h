/* make_model.h - writing seeded random-weight GGUF models of real shapes (`sdnpu
 * make-model`), so tests and benchmarks need no download. The shapes are the published
 * configurations (Qwen2.5-0.5B/1.5B, Llama-3.2-1B/3B, Qwen3-0.6B/1.7B, Gemma-3-270M) plus small
 * test shapes; weights are
 * Gaussian with std 1/sqrt(fan_in) so activations stay O(1) through the layers, quantized to
 * the requested type with the reference quantizers. The tokenizer section is either copied
 * from another GGUF (--vocab-from) or generated: a SentencePiece-style BPE vocabulary
 * trained on a built-in English text (vocab_gen.h). */
#ifndef SDN_MAKE_MODEL_H
#define SDN_MAKE_MODEL_H

#include <stdint.h>

#include "common/sdn_err.h"
#include "modelfile/model.h"

typedef struct sdn_shape {
    const char *name;
    sdn_arch arch;
    int n_layers, dim, hidden, n_heads, n_kv_heads, head_dim, vocab, ctx_len;
    float rms_eps, rope_theta;
    int tied;
    float llama3_rope_factor; /* > 0: write rope_freqs with the Llama 3 rule */
    const char *description;
    /* gemma3: sliding window of the local layers (0: none), the layer pattern (every
     * swa_pattern-th layer global) and the local layers' rope base */
    int n_swa, swa_pattern;
    float rope_theta_swa;
} sdn_shape;

/* Named shapes. */
int sdn_shape_count(void);
const sdn_shape *sdn_shape_at(int i);

typedef struct sdn_make_model_opts {
    const char *shape;      /* named shape */
    const char *out_path;
    const char *type;       /* weight type name (F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K)
                               or the mix "Q4_K_M" (Q4_K with Q6_K for attn_v/ffn_down of some layers
                               and the output, as llama.cpp's Q4_K_M recipe does) */
    uint64_t seed;
    const char *vocab_from; /* copy tokenizer.* metadata from this GGUF; vocab = its token count */
    int n_layers;           /* > 0: override the shape's layer count */
    int vocab;              /* > 0: override the vocabulary size (generated tokenizer only) */
    int quiet;
} sdn_make_model_opts;

/* Write the model. Row lengths that the requested block size does not divide fall back to
 * Q8_0, then F16 (reported on stderr unless quiet). */
int sdn_make_model(const sdn_make_model_opts *o, sdn_err *err);

#endif
