/* make_model.c - seeded random-weight GGUF models of named shapes (see make_model.h).
 *
 * Shapes are the published Hugging Face configurations:
 *   Qwen2.5-0.5B: 24 layers, hidden 896, FFN 4864, 14 heads / 2 KV heads, vocab 151936,
 *     RMS eps 1e-6, rope theta 1e6, tied embeddings, QKV bias.
 *   Qwen2.5-1.5B: 28 layers, 1536, FFN 8960, 12 / 2 heads, vocab 151936, tied.
 *   Llama-3.2-1B: 16 layers, 2048, FFN 8192, 32 / 8 heads, vocab 128256, theta 500000,
 *     tied, rope_scaling llama3 (factor 32, low 1, high 4, original context 8192).
 *   Llama-3.2-3B: 28 layers, 3072, FFN 8192, 24 / 8 heads (head dim 128), vocab 128256.
 *   Qwen3-0.6B: 28 layers, 1024, FFN 3072, 16 / 8 heads, head dim 128 (not 1024/16), vocab
 *     151936, RMS eps 1e-6, theta 1e6, tied, no QKV bias, q/k RMSNorm.
 *   Qwen3-1.7B: 28 layers, 2048, FFN 6144, 16 / 8 heads, head dim 128, vocab 151936, tied.
 *   Gemma-3-270M: 18 layers, 640, FFN 2048, 4 / 1 heads, head dim 256, vocab 262144, eps 1e-6,
 *     global theta 1e6, local theta 1e4, sliding window 512 on 5 of every 6 layers, tied,
 *     q/k norms and post-attention/post-FFN norms (as in the real file, which sdnpu pulls).
 * Norm weights are 1 + noise: Gemma's "1 + w" is already folded in, as in llama.cpp's files.
 * The Llama 3 frequency factors are written as the `rope_freqs.weight` tensor the way
 * llama.cpp's converter does (factor 1 for short wavelengths, `factor` for long ones, a
 * smooth blend between).
 *
 * Each tensor's values come from its own generator seeded by (seed, tensor name), so a
 * tensor's contents do not depend on the type or on the other tensors. */
#include "tools/make_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <xxhash.h>

#include "common/sdn_util.h"
#include "modelfile/gguf.h"
#include "kernels/quant.h"
#include "modelfile/tensor_types.h"
#include "tools/vocab_gen.h"

static const sdn_shape shapes[] = {
    {"qwen2.5-0.5b", SDN_ARCH_QWEN2, 24, 896, 4864, 14, 2, 64, 151936, 32768, 1e-6f, 1e6f, 1, 0, "Qwen2.5-0.5B", 0, 0, 0.0f},
    {"qwen2.5-1.5b", SDN_ARCH_QWEN2, 28, 1536, 8960, 12, 2, 128, 151936, 32768, 1e-6f, 1e6f, 1, 0, "Qwen2.5-1.5B", 0, 0, 0.0f},
    {"llama-3.2-1b", SDN_ARCH_LLAMA, 16, 2048, 8192, 32, 8, 64, 128256, 131072, 1e-5f, 500000.0f, 1, 32.0f, "Llama-3.2-1B", 0, 0, 0.0f},
    {"llama-3.2-3b", SDN_ARCH_LLAMA, 28, 3072, 8192, 24, 8, 128, 128256, 131072, 1e-5f, 500000.0f, 1, 32.0f, "Llama-3.2-3B", 0, 0, 0.0f},
    {"tiny-llama", SDN_ARCH_LLAMA, 2, 256, 512, 4, 2, 64, 512, 1024, 1e-5f, 10000.0f, 0, 0, "test shape, llama, untied output", 0, 0, 0.0f},
    {"tiny-llama3", SDN_ARCH_LLAMA, 2, 256, 512, 8, 2, 32, 512, 1024, 1e-5f, 500000.0f, 1, 32.0f,
     "test shape, llama with Llama 3 rope factors, tied", 0, 0, 0.0f},
    {"tiny-qwen2", SDN_ARCH_QWEN2, 2, 256, 512, 4, 2, 64, 512, 1024, 1e-6f, 1e6f, 1, 0, "test shape, qwen2 (QKV bias, NeoX rope)", 0, 0, 0.0f},
    {"small-llama", SDN_ARCH_LLAMA, 4, 512, 1536, 8, 4, 64, 576, 4096, 1e-5f, 10000.0f, 0, 0, "demo shape, llama, untied output", 0, 0, 0.0f},
    {"qwen3-0.6b", SDN_ARCH_QWEN3, 28, 1024, 3072, 16, 8, 128, 151936, 40960, 1e-6f, 1e6f, 1, 0, "Qwen3-0.6B", 0, 0, 0.0f},
    {"qwen3-1.7b", SDN_ARCH_QWEN3, 28, 2048, 6144, 16, 8, 128, 151936, 40960, 1e-6f, 1e6f, 1, 0, "Qwen3-1.7B", 0, 0, 0.0f},
    {"gemma-3-270m", SDN_ARCH_GEMMA3, 18, 640, 2048, 4, 1, 256, 262144, 32768, 1e-6f, 1e6f, 1, 0, "Gemma-3-270M", 512, 6, 10000.0f},
    {"tiny-qwen3", SDN_ARCH_QWEN3, 2, 256, 512, 4, 2, 96, 512, 1024, 1e-6f, 1e6f, 1, 0, "test shape, qwen3 (q/k norms, head dim 96 != dim/heads)", 0, 0, 0.0f},
    {"tiny-gemma3", SDN_ARCH_GEMMA3, 3, 256, 512, 4, 1, 128, 512, 1024, 1e-6f, 1e6f, 1, 0,
     "test shape, gemma3 (window 8 on layers 0 and 2, layer 1 global)", 8, 2, 10000.0f},
};

static const sdn_shape *sdn_shape_find(const char *name) {
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (!strcasecmp(shapes[i].name, name)) return &shapes[i];
    return NULL;
}
int sdn_shape_count(void) { return (int)(sizeof shapes / sizeof shapes[0]); }
const sdn_shape *sdn_shape_at(int i) { return i >= 0 && i < sdn_shape_count() ? &shapes[i] : NULL; }

/* per-tensor plan */
typedef struct tplan {
    char name[96];
    uint32_t type;
    int64_t ne0, ne1; /* ne1 = 0: vector */
    enum { T_MATRIX, T_NORM, T_BIAS, T_ROPE } kind;
} tplan;

typedef struct mctx {
    const sdn_shape *sh;
    int n_layers, vocab;
    uint64_t seed;
    tplan *t;
    int nt;
    float *rope_freqs;
} mctx;

static int fill(void *ctxp, int index, const char *name, void *dst, size_t nbytes, sdn_err *err) {
    mctx *c = ctxp;
    tplan *t = &c->t[index];
    int64_t rows = t->ne1 ? t->ne1 : 1, n = t->ne0;
    sdn_rng rng;
    sdn_rng_seed(&rng, c->seed ^ XXH3_64bits(name, strlen(name)));
    float *row = malloc((size_t)n * sizeof(float));
    if (!row) return sdn_fail(err, SDN_ENOMEM, "out of memory");
    size_t rb = sdn_type_row_bytes(t->type, n);
    float std = t->kind == T_MATRIX ? 1.0f / sqrtf((float)n) : 0.02f;
    if (!strcmp(name, "token_embd.weight")) std = 1.0f;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < n; i++) {
            switch (t->kind) {
            case T_NORM: row[i] = 1.0f + 0.1f * sdn_rng_normal(&rng); break;
            case T_ROPE: row[i] = c->rope_freqs[i]; break;
            default: row[i] = std * sdn_rng_normal(&rng);
            }
        }
        if ((size_t)(r + 1) * rb > nbytes) { free(row); return sdn_fail(err, SDN_EINVAL, "internal: tensor %s size", name); }
        sdn_quantize_row(t->type, row, (char *)dst + (size_t)r * rb, n);
    }
    free(row);
    return SDN_OK;
}

/* The type a matrix gets: the requested one, or a fallback when the row length is not a
 * multiple of its block size. */
static uint32_t pick_type(uint32_t want, int64_t ne0, const char *name, int quiet) {
    uint32_t t = want;
    if (ne0 % sdn_type_block_elems(t)) t = SDN_TYPE_Q8_0;
    if (ne0 % sdn_type_block_elems(t)) t = SDN_TYPE_F16;
    if (t != want && !quiet)
        fprintf(stderr, "make-model: %s: row length %lld is not a multiple of the %s block; using %s\n", name, (long long)ne0,
                sdn_type_name(want), sdn_type_name(t));
    return t;
}

/* llama.cpp's `general.file_type` (enum llama_ftype) for a uniform weight type. */
static uint32_t file_type(uint32_t t) {
    switch (t) {
    case SDN_TYPE_F32: return 0;
    case SDN_TYPE_F16: return 1;
    case SDN_TYPE_Q4_0: return 2;
    case SDN_TYPE_Q4_1: return 3;
    case SDN_TYPE_Q8_0: return 7;
    case SDN_TYPE_Q5_0: return 8;
    case SDN_TYPE_Q5_1: return 9;
    case SDN_TYPE_Q4_K: return 14;
    case SDN_TYPE_Q5_K: return 16;
    case SDN_TYPE_Q6_K: return 18;
    case SDN_TYPE_BF16: return 32;
    default: return 1;
    }
}

static void llama3_factors(const sdn_shape *sh, float *out) {
    /* rope_scaling: factor, low_freq_factor 1, high_freq_factor 4, original context 8192 */
    double factor = sh->llama3_rope_factor, lo = 1.0, hi = 4.0, old_ctx = 8192.0;
    double low_wl = old_ctx / lo, high_wl = old_ctx / hi;
    for (int j = 0; j < sh->head_dim / 2; j++) {
        double freq = 1.0 / pow(sh->rope_theta, 2.0 * j / sh->head_dim), wl = 2 * M_PI / freq;
        if (wl < high_wl) out[j] = 1.0f;
        else if (wl > low_wl) out[j] = (float)factor;
        else {
            double smooth = (old_ctx / wl - lo) / (hi - lo);
            out[j] = (float)(1.0 / ((1 - smooth) / factor + smooth));
        }
    }
}

int sdn_make_model(const sdn_make_model_opts *o, sdn_err *err) {
    const sdn_shape *sh = sdn_shape_find(o->shape ? o->shape : "");
    if (!sh) {
        char names[512] = "";
        for (int i = 0; i < sdn_shape_count(); i++) {
            strcat(names, i ? ", " : "");
            strcat(names, shapes[i].name);
        }
        return sdn_fail(err, SDN_EINVAL, "option --shape: unknown shape '%s' (known: %s)", o->shape ? o->shape : "", names);
    }
    const char *tname = o->type ? o->type : "F16";
    int mix = !strcasecmp(tname, "Q4_K_M");
    int ti = mix ? SDN_TYPE_Q4_K : sdn_type_from_name(tname);
    if (ti < 0 || !sdn_type_is_weight_type((uint32_t)ti))
        return sdn_fail(err, SDN_EINVAL, "option --type: unknown weight type '%s' (F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K Q4_K_M)", tname);
    uint32_t want = (uint32_t)ti;
    mctx c = {.sh = sh, .n_layers = o->n_layers > 0 ? o->n_layers : sh->n_layers, .vocab = sh->vocab, .seed = o->seed};
    if (c.n_layers > 512) return sdn_fail(err, SDN_EINVAL, "option --layers: %d is too many", c.n_layers);

    sdn_gguf_writer *w = sdn_gguf_writer_new();
    sdn_gguf *src = NULL;
    sdn_vocab voc = {0};
    int rc = SDN_OK;
    if (o->vocab_from) {
        if ((rc = sdn_gguf_open(o->vocab_from, &src, err))) goto done;
        int ki = sdn_gguf_find(src, "tokenizer.ggml.tokens");
        uint64_t nv = 0;
        if (ki < 0 || sdn_gguf_arr_info(src, ki, NULL, &nv) || nv == 0) {
            rc = sdn_fail(err, SDN_EFORMAT, "%s: option --vocab-from: file has no tokenizer.ggml.tokens array", o->vocab_from);
            goto done;
        }
        c.vocab = (int)nv;
        for (int i = 0; i < sdn_gguf_n_kv(src); i++)
            if (!strncmp(sdn_gguf_kv_key(src, i), "tokenizer.", 10)) sdn_gguf_w_copy_kv(w, src, i);
    } else {
        if (o->vocab > 0) c.vocab = o->vocab;
        if ((rc = sdn_vocab_generate(c.vocab, &voc, err))) goto done;
        sdn_gguf_w_str(w, "tokenizer.ggml.model", "llama");
        sdn_gguf_w_str(w, "tokenizer.ggml.pre", "default");
        sdn_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)voc.piece, NULL, (uint64_t)voc.n);
        sdn_gguf_w_arr_f32(w, "tokenizer.ggml.scores", voc.score, (uint64_t)voc.n);
        sdn_gguf_w_arr_i32(w, "tokenizer.ggml.token_type", voc.type, (uint64_t)voc.n);
        sdn_gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 0);
        sdn_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1);
        sdn_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2);
        sdn_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 1);
        sdn_gguf_w_bool(w, "tokenizer.ggml.add_eos_token", 0);
    }
    const char *arch = sdn_arch_name(sh->arch);
    char key[128];
#define K(s) (snprintf(key, sizeof key, "%s.%s", arch, s), key)
    sdn_gguf_w_str(w, "general.architecture", arch);
    char nm[160];
    snprintf(nm, sizeof nm, "sdnpu random %s (%s, seed %llu)", sh->description, mix ? "Q4_K_M" : sdn_type_name(want),
             (unsigned long long)o->seed);
    sdn_gguf_w_str(w, "general.name", nm);
    sdn_gguf_w_u32(w, "general.alignment", 32);
    sdn_gguf_w_u64(w, "sdnpu.make_model.seed", o->seed);
    sdn_gguf_w_str(w, "sdnpu.make_model.shape", sh->name);
    sdn_gguf_w_u32(w, K("block_count"), (uint32_t)c.n_layers);
    sdn_gguf_w_u32(w, K("context_length"), (uint32_t)sh->ctx_len);
    sdn_gguf_w_u32(w, K("embedding_length"), (uint32_t)sh->dim);
    sdn_gguf_w_u32(w, K("feed_forward_length"), (uint32_t)sh->hidden);
    sdn_gguf_w_u32(w, K("attention.head_count"), (uint32_t)sh->n_heads);
    sdn_gguf_w_u32(w, K("attention.head_count_kv"), (uint32_t)sh->n_kv_heads);
    sdn_gguf_w_u32(w, K("attention.key_length"), (uint32_t)sh->head_dim);
    sdn_gguf_w_u32(w, K("attention.value_length"), (uint32_t)sh->head_dim);
    sdn_gguf_w_u32(w, K("rope.dimension_count"), (uint32_t)sh->head_dim);
    sdn_gguf_w_f32(w, K("rope.freq_base"), sh->rope_theta);
    sdn_gguf_w_f32(w, K("attention.layer_norm_rms_epsilon"), sh->rms_eps);
    sdn_gguf_w_u32(w, K("vocab_size"), (uint32_t)c.vocab);
    if (sh->n_swa > 0) {
        sdn_gguf_w_u32(w, K("attention.sliding_window"), (uint32_t)sh->n_swa);
        sdn_gguf_w_u32(w, K("attention.sliding_window_pattern"), (uint32_t)sh->swa_pattern);
        sdn_gguf_w_f32(w, K("rope.freq_base_swa"), sh->rope_theta_swa);
    }
#undef K

    int64_t dim = sh->dim, hid = sh->hidden, qd = (int64_t)sh->n_heads * sh->head_dim, kvd = (int64_t)sh->n_kv_heads * sh->head_dim;
    int cap = 8 + c.n_layers * 16;
    c.t = calloc((size_t)cap, sizeof *c.t);
    c.rope_freqs = sh->llama3_rope_factor > 0 ? malloc((size_t)sh->head_dim / 2 * sizeof(float)) : NULL;
    if (!c.t || (sh->llama3_rope_factor > 0 && !c.rope_freqs)) {
        rc = sdn_fail(err, SDN_ENOMEM, "make-model: out of memory");
        goto done;
    }
#define ADD(nm_, ty_, a_, b_, kind_)                                                   \
    do {                                                                              \
        tplan *t_ = &c.t[c.nt++];                                                     \
        snprintf(t_->name, sizeof t_->name, "%s", nm_);                               \
        t_->ne0 = (a_); t_->ne1 = (b_); t_->kind = (kind_);                            \
        t_->type = (kind_) == T_MATRIX ? pick_type((ty_), (a_), t_->name, o->quiet) : SDN_TYPE_F32; \
    } while (0)
    uint32_t emb_t = mix ? SDN_TYPE_Q4_K : want, out_t = mix ? SDN_TYPE_Q6_K : want;
    ADD("token_embd.weight", emb_t, dim, c.vocab, T_MATRIX);
    ADD("output_norm.weight", 0, dim, 0, T_NORM);
    if (!sh->tied) ADD("output.weight", out_t, dim, c.vocab, T_MATRIX);
    if (sh->llama3_rope_factor > 0) {
        llama3_factors(sh, c.rope_freqs);
        ADD("rope_freqs.weight", 0, sh->head_dim / 2, 0, T_ROPE);
    }
    for (int l = 0; l < c.n_layers; l++) {
        char n[96];
        /* Q4_K_M recipe: Q6_K for attn_v and ffn_down in the first and last eighth of the
         * layers and every third layer between, Q4_K elsewhere. */
        int more = l < c.n_layers / 8 || l >= 7 * c.n_layers / 8 || (l - c.n_layers / 8) % 3 == 2;
        uint32_t vt = mix && more ? SDN_TYPE_Q6_K : want;
#define NM(s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
        ADD(NM("attn_norm.weight"), 0, dim, 0, T_NORM);
        ADD(NM("attn_q.weight"), want, dim, qd, T_MATRIX);
        ADD(NM("attn_k.weight"), want, dim, kvd, T_MATRIX);
        ADD(NM("attn_v.weight"), vt, dim, kvd, T_MATRIX);
        if (sh->arch == SDN_ARCH_QWEN2) {
            ADD(NM("attn_q.bias"), 0, qd, 0, T_BIAS);
            ADD(NM("attn_k.bias"), 0, kvd, 0, T_BIAS);
            ADD(NM("attn_v.bias"), 0, kvd, 0, T_BIAS);
        }
        if (sh->arch == SDN_ARCH_QWEN3 || sh->arch == SDN_ARCH_GEMMA3) {
            ADD(NM("attn_q_norm.weight"), 0, sh->head_dim, 0, T_NORM);
            ADD(NM("attn_k_norm.weight"), 0, sh->head_dim, 0, T_NORM);
        }
        ADD(NM("attn_output.weight"), want, qd, dim, T_MATRIX);
        if (sh->arch == SDN_ARCH_GEMMA3) {
            ADD(NM("post_attention_norm.weight"), 0, dim, 0, T_NORM);
            ADD(NM("post_ffw_norm.weight"), 0, dim, 0, T_NORM);
        }
        ADD(NM("ffn_norm.weight"), 0, dim, 0, T_NORM);
        ADD(NM("ffn_gate.weight"), want, dim, hid, T_MATRIX);
        ADD(NM("ffn_up.weight"), want, dim, hid, T_MATRIX);
        ADD(NM("ffn_down.weight"), vt, hid, dim, T_MATRIX);
#undef NM
    }
#undef ADD
    sdn_gguf_w_u32(w, "general.file_type", mix ? 15 : file_type(want));
    for (int i = 0; i < c.nt; i++) {
        int64_t ne[2] = {c.t[i].ne0, c.t[i].ne1};
        if (sdn_gguf_w_tensor(w, c.t[i].name, c.t[i].type, c.t[i].ne1 ? 2 : 1, ne) < 0) {
            rc = sdn_fail(err, SDN_EINVAL, "internal: cannot declare tensor %s", c.t[i].name);
            goto done;
        }
    }
    rc = sdn_gguf_writer_write(w, o->out_path, fill, &c, err);
done:
    sdn_gguf_writer_free(w);
    if (src) sdn_gguf_close(src);
    sdn_vocab_free(&voc);
    free(c.t);
    free(c.rope_freqs);
    return rc;
}
