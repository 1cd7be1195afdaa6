/* model_load.c - builds an sdn_model from a GGUF file (architectures llama, qwen2, qwen3,
 * gemma3) or a
 * llama2.c checkpoint. Weights stay in the file mapping in their stored layout; small
 * vectors (norms, biases, RoPE factors) are converted to owned F32 arrays. Every tensor's
 * presence, type and exact shape is checked against the configuration read from metadata,
 * so a bad file stops here with a message naming the tensor, never later in a kernel.
 *
 * GGUF tensor names and metadata keys follow llama.cpp's conventions (gguf-py
 * constants.py): token_embd, output_norm, output, rope_freqs, blk.N.{attn_norm, attn_q,
 * attn_k, attn_v, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down}[.weight|.bias] and
 * {arch}.{block_count, embedding_length, feed_forward_length, attention.head_count,
 * attention.head_count_kv, attention.key_length, attention.layer_norm_rms_epsilon,
 * rope.freq_base, rope.dimension_count, rope.scaling.type, rope.scaling.factor,
 * context_length}.
 *
 * qwen3 (llama.cpp src/models/qwen3.cpp): qwen2 without QKV bias, plus blk.N.attn_q_norm /
 * attn_k_norm ([key_length], an RMSNorm over every head of q and k before RoPE); the head
 * dimension is attention.key_length (128 in Qwen3), not embedding_length / head_count.
 * gemma3 (llama.cpp src/models/gemma3.cpp, src/llama-hparams.cpp): q/k norms as qwen3, plus
 * blk.N.post_attention_norm and blk.N.post_ffw_norm; NeoX RoPE; gelu(tanh) gate; embeddings
 * scaled by sqrt(embedding_length); attention scale 1/sqrt(key_length); when
 * gemma3.attention.sliding_window is present, local layers (l % P < P - 1, P =
 * attention.sliding_window_pattern, default 6) attend a window of that many positions and
 * use rope.freq_base_swa (default 10000) while the others are global and use rope.freq_base;
 * optional final_logit_softcapping. The norm weights are used as stored: llama.cpp's
 * converter already added Gemma's "1 +" to them (checked on the real file: the stored
 * weights are the scale factors themselves). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t's size, for a state on the stack */
#include <xxhash.h>

#include "common/sdn_log.h"
#include "common/sdn_util.h"
#include "modelfile/model_registry.h"
#include "modelfile/gguf.h"
#include "attention/kv_cache.h"
#include "engine/layout.h"
#include "engine/model_internal.h"
#include "kernels/quant.h"
#include "modelfile/tensor_types.h"
#include "tokenizer/tokenizer.h"

/* ---------------------------------------------------------------- GGUF ---- */

typedef struct ld {
    sdn_model *m;
    sdn_gguf *g;
    const char *path;
    sdn_err *err;
} ld;

/* Find tensor `name` and check its type and shape ([ne0] or [ne0, ne1]). *out is NULL when
 * an optional tensor is absent; any other problem is an error. */
static int need_tensor(ld *L, const char *name, int64_t ne0, int64_t ne1, int required, const sdn_gguf_tensor **out) {
    *out = NULL;
    const sdn_gguf_tensor *t = sdn_gguf_tensor_find(L->g, name);
    if (!t) return required ? sdn_fail(L->err, SDN_EFORMAT, "%s: tensor '%s' is missing", L->path, name) : SDN_OK;
    int64_t n1 = ne1 > 0 ? ne1 : 1;
    if (!(t->ne[0] == ne0 && t->ne[1] == n1 && t->ne[2] == 1 && t->ne[3] == 1)) {
        if (ne1 > 0)
            return sdn_fail(L->err, SDN_EFORMAT, "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld] from the metadata",
                            L->path, name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                            (long long)ne0, (long long)ne1);
        return sdn_fail(L->err, SDN_EFORMAT, "%s: tensor '%s' has shape [%lld, %lld, ...], expected [%lld] from the metadata",
                        L->path, name, (long long)t->ne[0], (long long)t->ne[1], (long long)ne0);
    }
    if (!sdn_type_is_weight_type(t->type))
        return sdn_fail(L->err, SDN_EUNSUP, "%s: tensor '%s' has type %s, which is not a weight type", L->path, name,
                        sdn_type_name(t->type) ? sdn_type_name(t->type) : "?");
    *out = t;
    return SDN_OK;
}

static int load_matrix(ld *L, sdn_weight *w, const char *name, int64_t in, int64_t out, int required) {
    memset(w, 0, sizeof *w);
    const sdn_gguf_tensor *t;
    int rc = need_tensor(L, name, in, out, required, &t);
    if (rc || !t) return rc;
    w->name = t->name;
    w->type = t->type;
    w->in = in;
    w->out = out;
    w->data = t->data;
    w->row_bytes = sdn_type_row_bytes(t->type, in);
    return SDN_OK;
}

/* A vector tensor converted to owned F32 (any stored type). */
static int load_vector(ld *L, float **dst, const char *name, int64_t n, int required) {
    *dst = NULL;
    const sdn_gguf_tensor *t;
    int rc = need_tensor(L, name, n, 0, required, &t);
    if (rc || !t) return rc;
    *dst = malloc((size_t)n * sizeof(float));
    if (!*dst) return sdn_fail(L->err, SDN_ENOMEM, "%s: out of memory", L->path);
    sdn_dequantize_row(t->type, t->data, *dst, n);
    return SDN_OK;
}

static int meta_u32(ld *L, const char *arch, const char *suffix, int required, uint32_t dflt, uint32_t *out) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    if (!required) return sdn_gguf_get_u32_or(L->g, key, dflt, out, L->err);
    return sdn_gguf_get_u32(L->g, key, out, L->err);
}
static int meta_f32(ld *L, const char *arch, const char *suffix, float dflt, float *out) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return sdn_gguf_get_f32_or(L->g, key, dflt, out, L->err);
}

#define MAX_SANE_DIM (1 << 20)

static int load_gguf(sdn_model *m, const char *path, const sdn_model_load_opts *opts, sdn_err *err) {
    int rc = sdn_gguf_open(path, &m->gguf, err);
    if (rc) return rc;
    ld L = {m, m->gguf, path, err};
    sdn_model_config *c = &m->cfg;
    const char *arch = sdn_gguf_str_or_null(m->gguf, "general.architecture");
    if (!arch) return sdn_fail(err, SDN_EFORMAT, "%s: metadata key 'general.architecture' is missing", path);
    if (!strcmp(arch, "llama")) c->arch = SDN_ARCH_LLAMA;
    else if (!strcmp(arch, "qwen2")) c->arch = SDN_ARCH_QWEN2;
    else if (!strcmp(arch, "qwen3")) c->arch = SDN_ARCH_QWEN3;
    else if (!strcmp(arch, "gemma3")) c->arch = SDN_ARCH_GEMMA3;
    else return sdn_fail(err, SDN_EUNSUP, "%s: architecture '%s' is not supported (llama, qwen2, qwen3 and gemma3 are)", path, arch);
    int gemma = c->arch == SDN_ARCH_GEMMA3;

    uint32_t n_layers, dim, hidden, n_heads, n_kv, head_dim, ctx, rope_dims;
    if ((rc = meta_u32(&L, arch, "block_count", 1, 0, &n_layers)) || (rc = meta_u32(&L, arch, "embedding_length", 1, 0, &dim)) ||
        (rc = meta_u32(&L, arch, "feed_forward_length", 1, 0, &hidden)) ||
        (rc = meta_u32(&L, arch, "attention.head_count", 1, 0, &n_heads)) ||
        (rc = meta_u32(&L, arch, "attention.head_count_kv", 0, n_heads, &n_kv)) ||
        (rc = meta_u32(&L, arch, "context_length", 0, 4096, &ctx)))
        return rc;
    if (n_layers == 0 || n_layers > 4096) return sdn_fail(err, SDN_EFORMAT, "%s: %s.block_count = %u is absurd", path, arch, n_layers);
    if (dim == 0 || dim > MAX_SANE_DIM) return sdn_fail(err, SDN_EFORMAT, "%s: %s.embedding_length = %u is absurd", path, arch, dim);
    if (hidden == 0 || hidden > MAX_SANE_DIM) return sdn_fail(err, SDN_EFORMAT, "%s: %s.feed_forward_length = %u is absurd", path, arch, hidden);
    if (n_heads == 0 || n_heads > dim) return sdn_fail(err, SDN_EFORMAT, "%s: %s.attention.head_count = %u is absurd", path, arch, n_heads);
    if (n_kv == 0 || n_kv > n_heads || n_heads % n_kv)
        return sdn_fail(err, SDN_EFORMAT, "%s: %s.attention.head_count_kv = %u does not divide head_count = %u", path, arch, n_kv, n_heads);
    if ((rc = meta_u32(&L, arch, "attention.key_length", 0, dim / n_heads, &head_dim))) return rc;
    if (head_dim == 0 || head_dim % 2 || head_dim > 1024)
        return sdn_fail(err, SDN_EFORMAT, "%s: head dimension %u is absurd (key_length or embedding_length/head_count)", path, head_dim);
    uint32_t vlen;
    if ((rc = meta_u32(&L, arch, "attention.value_length", 0, head_dim, &vlen))) return rc;
    if (vlen != head_dim) return sdn_fail(err, SDN_EUNSUP, "%s: value_length %u != key_length %u is not supported", path, vlen, head_dim);
    if ((rc = meta_u32(&L, arch, "rope.dimension_count", 0, head_dim, &rope_dims))) return rc;
    if (rope_dims == 0 || rope_dims > head_dim || rope_dims % 2)
        return sdn_fail(err, SDN_EFORMAT, "%s: %s.rope.dimension_count = %u is invalid for head dimension %u", path, arch, rope_dims, head_dim);
    c->n_layers = (int)n_layers;
    c->dim = (int)dim;
    c->hidden = (int)hidden;
    c->n_heads = (int)n_heads;
    c->n_kv_heads = (int)n_kv;
    c->head_dim = (int)head_dim;
    c->rope_dims = (int)rope_dims;
    /* ctx is a uint32: values above INT_MAX would wrap through (int) */
    if (ctx > SDN_MAX_CTX_LEN)
        return sdn_fail(err, SDN_EFORMAT, "%s: %s.context_length = %u is larger than the supported %d positions", path, arch, ctx, SDN_MAX_CTX_LEN);
    c->ctx_len = ctx ? (int)ctx : 4096;
    c->rope_neox = c->arch != SDN_ARCH_LLAMA;
    c->has_qk_norm = c->arch == SDN_ARCH_QWEN3 || gemma;
    c->has_post_norms = gemma;
    c->ffn_gelu = gemma;
    c->embd_scale = gemma ? sqrtf((float)dim) : 1.0f;
    c->attn_scale = 1.0f / sqrtf((float)head_dim);
    if ((rc = meta_f32(&L, arch, "attention.layer_norm_rms_epsilon", 1e-5f, &c->rms_eps)) ||
        (rc = meta_f32(&L, arch, "rope.freq_base", 10000.0f, &c->rope_theta)))
        return rc;
    if (!(c->rms_eps > 0 && c->rms_eps < 1)) return sdn_fail(err, SDN_EFORMAT, "%s: rms epsilon %g is invalid", path, c->rms_eps);
    if (!(c->rope_theta > 1)) return sdn_fail(err, SDN_EFORMAT, "%s: %s.rope.freq_base = %g is invalid", path, arch, c->rope_theta);
    c->rope_theta_swa = c->rope_theta;
    if (gemma) {
        uint32_t swa = 0, pat = 6;
        char k2[160];
        snprintf(k2, sizeof k2, "%s.attention.sliding_window", arch);
        int have_swa = sdn_gguf_find(m->gguf, k2) >= 0;
        if ((rc = meta_u32(&L, arch, "attention.sliding_window", 0, 0, &swa)) ||
            (rc = meta_u32(&L, arch, "attention.sliding_window_pattern", 0, 6, &pat)) ||
            (rc = meta_f32(&L, arch, "rope.freq_base_swa", 10000.0f, &c->rope_theta_swa)) ||
            (rc = meta_f32(&L, arch, "final_logit_softcapping", 0.0f, &c->final_softcap)))
            return rc;
        if (have_swa && swa > 0) {
            if (swa > SDN_MAX_CTX_LEN)
                return sdn_fail(err, SDN_EFORMAT, "%s: %s.attention.sliding_window = %u is larger than the supported %d positions", path, arch, swa,
                                SDN_MAX_CTX_LEN);
            if (pat == 0 || pat > n_layers + 1)
                return sdn_fail(err, SDN_EFORMAT, "%s: %s.attention.sliding_window_pattern = %u is invalid for %u layers (1..%u)", path, arch,
                                pat, n_layers, n_layers + 1);
            if (!(c->rope_theta_swa > 1))
                return sdn_fail(err, SDN_EFORMAT, "%s: %s.rope.freq_base_swa = %g is invalid", path, arch, c->rope_theta_swa);
            c->n_swa = (int)swa;
            c->swa_pattern = (int)pat;
        } else c->rope_theta_swa = c->rope_theta;
        if (!(c->final_softcap >= 0 && c->final_softcap < 1e6))
            return sdn_fail(err, SDN_EFORMAT, "%s: %s.final_logit_softcapping = %g is invalid", path, arch, c->final_softcap);
        if (n_layers == 62) c->attn_scale = 1.0f / sqrtf((float)(dim / n_heads)); /* Gemma 3 27B: query_pre_attn_scalar = dim/heads */
    }
    c->rope_scale = 1.0f;
    char key[160];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    const char *st = sdn_gguf_str_or_null(m->gguf, key);
    if (st && strcmp(st, "none") != 0) {
        if (strcmp(st, "linear") != 0)
            return sdn_fail(err, SDN_EUNSUP, "%s: %s = '%s' is not supported (none and linear are; Llama 3 uses rope_freqs)", path, key, st);
        float f;
        if ((rc = meta_f32(&L, arch, "rope.scaling.factor", 1.0f, &f))) return rc;
        if (!(f >= 1 && f < 1e6)) return sdn_fail(err, SDN_EFORMAT, "%s: %s.rope.scaling.factor = %g is invalid", path, arch, f);
        c->rope_scale = f;
    }

    const sdn_gguf_tensor *te = sdn_gguf_tensor_find(m->gguf, "token_embd.weight");
    if (!te) return sdn_fail(err, SDN_EFORMAT, "%s: tensor 'token_embd.weight' is missing", path);
    if (te->ne[1] < 1 || te->ne[1] > 4000000) return sdn_fail(err, SDN_EFORMAT, "%s: tensor 'token_embd.weight' vocabulary %lld is absurd", path, (long long)te->ne[1]);
    c->vocab = (int)te->ne[1];
    int qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    if ((rc = load_matrix(&L, &m->tok_embd, "token_embd.weight", dim, c->vocab, 1))) return rc;
    if ((rc = load_vector(&L, &m->out_norm, "output_norm.weight", dim, 1))) return rc;
    if ((rc = load_matrix(&L, &m->output, "output.weight", dim, c->vocab, 0))) return rc;
    if (!m->output.data) { m->output = m->tok_embd; c->tied_output = 1; }
    if ((rc = load_vector(&L, &m->rope_freqs, "rope_freqs.weight", rope_dims / 2, 0))) return rc;
    c->has_rope_freqs = m->rope_freqs != NULL;
    if (m->rope_freqs)
        for (uint32_t i = 0; i < rope_dims / 2; i++)
            if (!(m->rope_freqs[i] > 0 && m->rope_freqs[i] < 1e9))
                return sdn_fail(err, SDN_EFORMAT, "%s: tensor 'rope_freqs.weight' element %u = %g is invalid", path, i, m->rope_freqs[i]);
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->layers) return sdn_fail(err, SDN_ENOMEM, "%s: out of memory", path);
    for (int l = 0; l < c->n_layers; l++) {
        sdn_layer *y = &m->layers[l];
        char n[96];
#define NM(s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
        if ((rc = load_vector(&L, &y->attn_norm, NM("attn_norm.weight"), dim, 1)) ||
            (rc = load_vector(&L, &y->ffn_norm, NM("ffn_norm.weight"), dim, 1)) ||
            (rc = load_matrix(&L, &y->wq, NM("attn_q.weight"), dim, qd, 1)) ||
            (rc = load_matrix(&L, &y->wk, NM("attn_k.weight"), dim, kvd, 1)) ||
            (rc = load_matrix(&L, &y->wv, NM("attn_v.weight"), dim, kvd, 1)) ||
            (rc = load_matrix(&L, &y->wo, NM("attn_output.weight"), qd, dim, 1)) ||
            (rc = load_matrix(&L, &y->w_gate, NM("ffn_gate.weight"), dim, hidden, 1)) ||
            (rc = load_matrix(&L, &y->w_up, NM("ffn_up.weight"), dim, hidden, 1)) ||
            (rc = load_matrix(&L, &y->w_down, NM("ffn_down.weight"), hidden, dim, 1)) ||
            (rc = load_vector(&L, &y->bq, NM("attn_q.bias"), qd, c->arch == SDN_ARCH_QWEN2)) ||
            (rc = load_vector(&L, &y->bk, NM("attn_k.bias"), kvd, c->arch == SDN_ARCH_QWEN2)) ||
            (rc = load_vector(&L, &y->bv, NM("attn_v.bias"), kvd, c->arch == SDN_ARCH_QWEN2)) ||
            (rc = load_vector(&L, &y->q_norm, NM("attn_q_norm.weight"), head_dim, c->has_qk_norm)) ||
            (rc = load_vector(&L, &y->k_norm, NM("attn_k_norm.weight"), head_dim, c->has_qk_norm)) ||
            (rc = load_vector(&L, &y->post_attn_norm, NM("post_attention_norm.weight"), dim, gemma)) ||
            (rc = load_vector(&L, &y->post_ffn_norm, NM("post_ffw_norm.weight"), dim, gemma)))
            return rc;
#undef NM
        if ((y->bq != NULL) != (y->bk != NULL) || (y->bq != NULL) != (y->bv != NULL))
            return sdn_fail(err, SDN_EFORMAT, "%s: layer %d has only some of the attn_q/k/v biases", path, l);
        if (y->bq) c->has_qkv_bias = 1;
    }

    if (opts && opts->no_tokenizer) return SDN_OK;
    if (sdn_gguf_find(m->gguf, "tokenizer.ggml.tokens") < 0) {
        sdn_log(SDN_LOG_WARN, "%s has no tokenizer section; prompts must be given as token ids", path);
        return SDN_OK;
    }
    rc = sdn_tokenizer_from_gguf(m->gguf, &m->tok, err);
    if (rc) return rc;
    if (sdn_tokenizer_n_vocab(m->tok) > c->vocab)
        return sdn_fail(err, SDN_EFORMAT, "%s: tokenizer has %d tokens but token_embd.weight has only %d rows", path,
                        sdn_tokenizer_n_vocab(m->tok), c->vocab);
    return SDN_OK;
}

/* ------------------------------------------------------------ llama2.c ---- */

/* llama2.c checkpoint formats (karpathy/llama2.c, run.c and export.py):
 *  legacy v0: int32 dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size (negative =
 *   separate classifier), seq_len; then float32 token_embedding[vocab][dim], rms_att[L][dim],
 *   wq[L][dim][dim], wk[L][kv_dim][dim], wv[L][kv_dim][dim], wo[L][dim][dim],
 *   rms_ffn[L][dim], w1[L][hidden][dim], w2[L][dim][hidden], w3[L][hidden][dim],
 *   rms_final[dim], freq_cis_real[seq_len][head_size/2], freq_cis_imag[...], [wcls].
 *  v1 ("ak42" export, fp32): uint32 magic 0x616b3432, int32 version 1, the 7 int32 params,
 *   uint8 shared_classifier, zero padding to 256 bytes; then rms_att[L], rms_ffn[L],
 *   rms_final, token_embedding, wq, wk, wv, wo, w1, w2, w3, [wcls]. */
static int load_llama2c(sdn_model *m, const char *path, const sdn_model_load_opts *opts, sdn_err *err) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return sdn_fail(err, SDN_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) { close(fd); return sdn_fail(err, SDN_EIO, "%s: not a regular file", path); }
    size_t size = (size_t)st.st_size;
    if (size < 28) { close(fd); return sdn_fail(err, SDN_EFORMAT, "%s: too small (%zu bytes) to be a GGUF file or a llama2.c checkpoint", path, size); }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return sdn_fail(err, SDN_EIO, "%s: mmap failed: %s", path, strerror(errno));
    m->map = map;
    m->map_size = size;
    const uint8_t *base = map;
    uint32_t magic;
    memcpy(&magic, base, 4);
    int32_t h[7];
    size_t off;
    int version = 0, shared;
    if (magic == 0x616b3432) {
        int32_t ver;
        memcpy(&ver, base + 4, 4);
        if (ver != 1)
            return sdn_fail(err, SDN_EUNSUP, "%s: llama2.c export version %d is not supported (legacy v0 and fp32 v1 are)", path, ver);
        if (size < 256) return sdn_fail(err, SDN_EFORMAT, "%s: llama2.c v1 header truncated", path);
        memcpy(h, base + 8, sizeof h);
        shared = base[36] != 0;
        off = 256;
        version = 1;
    } else {
        memcpy(h, base, sizeof h);
        shared = h[5] > 0;
        /* negative = separate classifier; INT32_MIN has no positive int32 and is invalid */
        if (h[5] == INT32_MIN)
            return sdn_fail(err, SDN_EFORMAT, "%s: not a GGUF file, and as a llama2.c checkpoint its header field vocab_size = %d is invalid",
                            path, (int)h[5]);
        if (h[5] < 0) h[5] = -h[5];
        off = 28;
    }
    const char *names[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
    for (int i = 0; i < 7; i++)
        if (h[i] <= 0 || h[i] > (i == 2 ? 4096 : i == 5 ? 4000000 : MAX_SANE_DIM))
            return sdn_fail(err, SDN_EFORMAT, "%s: not a GGUF file, and as a llama2.c checkpoint its header field %s = %d is invalid", path,
                            names[i], h[i]);
    sdn_model_config *c = &m->cfg;
    c->arch = SDN_ARCH_LLAMA;
    c->dim = h[0];
    c->hidden = h[1];
    c->n_layers = h[2];
    c->n_heads = h[3];
    c->n_kv_heads = h[4];
    c->vocab = h[5];
    c->ctx_len = h[6];
    if (c->dim % c->n_heads || c->n_heads % c->n_kv_heads || (c->dim / c->n_heads) % 2)
        return sdn_fail(err, SDN_EFORMAT, "%s: llama2.c header: dim %d, n_heads %d, n_kv_heads %d are inconsistent", path, c->dim, c->n_heads, c->n_kv_heads);
    c->head_dim = c->dim / c->n_heads;
    c->rope_dims = c->head_dim;
    c->rms_eps = 1e-5f;     /* run.c rmsnorm */
    c->rope_theta = 10000.0f;
    c->rope_scale = 1.0f;
    c->rope_theta_swa = c->rope_theta;
    c->embd_scale = 1.0f;
    c->attn_scale = 1.0f / sqrtf((float)c->head_dim);
    c->tied_output = shared;
    int64_t dim = c->dim, hid = c->hidden, L = c->n_layers, V = c->vocab, kvd = (int64_t)c->n_kv_heads * c->head_dim;
    /* total floats expected */
    int64_t per_layer = 2 * dim + dim * dim + 2 * kvd * dim + dim * dim + 3 * hid * dim;
    int64_t total = V * dim + L * per_layer + dim + (version == 0 ? (int64_t)c->ctx_len * c->head_dim : 0) + (shared ? 0 : V * dim);
    if ((uint64_t)total > (size - off) / 4)
        return sdn_fail(err, SDN_EFORMAT, "%s: llama2.c checkpoint truncated: header needs %lld float32 weights, file holds %zu", path,
                        (long long)total, (size - off) / 4);
    const float *p = (const float *)(base + off);
    const float *emb, *rms_att, *rms_ffn, *rms_final, *wq, *wk, *wv, *wo, *w1, *w2, *w3, *wcls = NULL;
    if (version == 0) {
        emb = p; p += V * dim;
        rms_att = p; p += L * dim;
        wq = p; p += L * dim * dim;
        wk = p; p += L * kvd * dim;
        wv = p; p += L * kvd * dim;
        wo = p; p += L * dim * dim;
        rms_ffn = p; p += L * dim;
        w1 = p; p += L * hid * dim;
        w2 = p; p += L * dim * hid;
        w3 = p; p += L * hid * dim;
        rms_final = p; p += dim;
        p += (int64_t)c->ctx_len * c->head_dim; /* freq_cis_real and _imag: recomputed, not read */
        if (!shared) wcls = p;
    } else {
        rms_att = p; p += L * dim;
        rms_ffn = p; p += L * dim;
        rms_final = p; p += dim;
        emb = p; p += V * dim;
        wq = p; p += L * dim * dim;
        wk = p; p += L * kvd * dim;
        wv = p; p += L * kvd * dim;
        wo = p; p += L * dim * dim;
        w1 = p; p += L * hid * dim;
        w2 = p; p += L * dim * hid;
        w3 = p; p += L * hid * dim;
        if (!shared) wcls = p;
    }
#define W(dst, ptr, i_, o_, nm) (dst) = (sdn_weight){nm, SDN_TYPE_F32, (i_), (o_), (ptr), (size_t)(i_) * 4, NULL, NULL}
    W(m->tok_embd, emb, dim, V, "token_embedding");
    if (shared) m->output = m->tok_embd;
    else W(m->output, wcls, dim, V, "wcls");
    m->out_norm = malloc((size_t)dim * 4);
    m->layers = calloc((size_t)L, sizeof *m->layers);
    if (!m->out_norm || !m->layers) return sdn_fail(err, SDN_ENOMEM, "%s: out of memory", path);
    memcpy(m->out_norm, rms_final, (size_t)dim * 4);
    for (int64_t l = 0; l < L; l++) {
        sdn_layer *y = &m->layers[l];
        y->attn_norm = malloc((size_t)dim * 4);
        y->ffn_norm = malloc((size_t)dim * 4);
        if (!y->attn_norm || !y->ffn_norm) return sdn_fail(err, SDN_ENOMEM, "%s: out of memory", path);
        memcpy(y->attn_norm, rms_att + l * dim, (size_t)dim * 4);
        memcpy(y->ffn_norm, rms_ffn + l * dim, (size_t)dim * 4);
        W(y->wq, wq + l * dim * dim, dim, dim, "wq");
        W(y->wk, wk + l * kvd * dim, dim, kvd, "wk");
        W(y->wv, wv + l * kvd * dim, dim, kvd, "wv");
        W(y->wo, wo + l * dim * dim, dim, dim, "wo");
        W(y->w_gate, w1 + l * hid * dim, dim, hid, "w1");
        W(y->w_down, w2 + l * dim * hid, hid, dim, "w2");
        W(y->w_up, w3 + l * hid * dim, dim, hid, "w3");
    }
#undef W
    if (opts && opts->no_tokenizer) return SDN_OK;
    if (!opts || !opts->tokenizer_path)
        return sdn_fail(err, SDN_EINVAL, "%s: a llama2.c checkpoint needs its tokenizer: pass --tokenizer FILE (tokenizer.bin)", path);
    return sdn_tokenizer_from_llama2c(opts->tokenizer_path, c->vocab, &m->tok, err);
}

/* ---------------------------------------------------------------- common ---- */

static uint64_t fingerprint(const sdn_model *m) {
    XXH3_state_t state, *s = &state; /* on the stack: the fingerprint cannot fail for want of memory */
    XXH3_64bits_reset(s);
    const uint8_t *img;
    size_t size, head;
    if (m->gguf) {
        img = sdn_gguf_image(m->gguf);
        size = sdn_gguf_file_size(m->gguf);
        head = sdn_gguf_header_size(m->gguf);
    } else {
        img = m->map;
        size = m->map_size;
        head = size < 256 ? size : 256;
    }
    XXH3_64bits_update(s, img, head);
    XXH3_64bits_update(s, &size, sizeof size);
    /* weights: all of a small file, else 4 KiB samples every 1 MiB */
    if (size <= (64u << 20)) XXH3_64bits_update(s, img + head, size - head);
    else
        for (size_t o = head; o < size; o += 1u << 20) XXH3_64bits_update(s, img + o, size - o < 4096 ? size - o : 4096);
    return XXH3_64bits_digest(s);
}

int sdn_model_load(const char *path, const sdn_model_load_opts *opts, sdn_model **out, sdn_err *err) {
    *out = NULL;
    char resolved[1300];
    int rc = sdn_model_resolve(path, resolved, sizeof resolved, err); /* a known model's name -> its cached file */
    if (rc) return rc;
    path = resolved;
    sdn_model *m = calloc(1, sizeof *m);
    if (!m) return sdn_fail(err, SDN_ENOMEM, "out of memory");
    m->path = strdup(path);
    if (!m->path) {
        free(m);
        return sdn_fail(err, SDN_ENOMEM, "%s: out of memory", path);
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        int rc = sdn_fail(err, SDN_EIO, "%s: cannot open: %s", path, strerror(errno));
        sdn_model_free(m);
        return rc;
    }
    char magic[4] = {0};
    size_t got = fread(magic, 1, 4, f);
    fclose(f);
    if (got == 4 && !memcmp(magic, "GGUF", 4)) {
        m->format = "gguf";
        rc = load_gguf(m, path, opts, err);
    } else {
        m->format = "llama2c";
        rc = load_llama2c(m, path, opts, err);
    }
    if (rc) {
        sdn_model_free(m);
        return rc;
    }
    m->fingerprint = fingerprint(m);
    *out = m;
    return SDN_OK;
}

void sdn_model_free(sdn_model *m) {
    if (!m) return;
    sdn_layout_release(m);
    if (m->layers) {
        for (int l = 0; l < m->cfg.n_layers; l++) {
            sdn_layer *y = &m->layers[l];
            free(y->attn_norm); free(y->ffn_norm); free(y->bq); free(y->bk); free(y->bv);
            free(y->q_norm); free(y->k_norm); free(y->post_attn_norm); free(y->post_ffn_norm);
        }
        free(m->layers);
    }
    free(m->out_norm);
    free(m->rope_freqs);
    if (m->tok) sdn_tokenizer_free(m->tok);
    if (m->gguf) sdn_gguf_close(m->gguf);
    if (m->map) munmap(m->map, m->map_size);
    free(m->path);
    free(m);
}

const sdn_model_config *sdn_model_cfg(const sdn_model *m) { return &m->cfg; }

const char *sdn_arch_name(sdn_arch a) {
    switch (a) {
    case SDN_ARCH_LLAMA: return "llama";
    case SDN_ARCH_QWEN2: return "qwen2";
    case SDN_ARCH_QWEN3: return "qwen3";
    case SDN_ARCH_GEMMA3: return "gemma3";
    }
    return "?";
}

int sdn_layer_is_swa(const sdn_model_config *c, int l) {
    return c->n_swa > 0 && c->swa_pattern > 0 && l % c->swa_pattern < c->swa_pattern - 1;
}
const char *sdn_model_path(const sdn_model *m) { return m->path; }
const char *sdn_model_format(const sdn_model *m) { return m->format; }
struct sdn_tokenizer *sdn_model_tokenizer(const sdn_model *m) { return m->tok; }
uint64_t sdn_model_fingerprint(const sdn_model *m) { return m->fingerprint; }

static size_t wbytes(const sdn_weight *w) { return w->data ? (size_t)w->out * w->row_bytes : 0; }

size_t sdn_model_weight_bytes(const sdn_model *m) {
    size_t t = 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const sdn_layer *y = &m->layers[l];
        t += wbytes(&y->wq) + wbytes(&y->wk) + wbytes(&y->wv) + wbytes(&y->wo) + wbytes(&y->w_gate) + wbytes(&y->w_up) + wbytes(&y->w_down);
    }
    return t;
}
size_t sdn_model_bytes_per_token(const sdn_model *m) {
    return sdn_model_weight_bytes(m) + wbytes(&m->output) + m->tok_embd.row_bytes;
}
size_t sdn_model_kv_bytes(const sdn_model *m, int n_ctx) {
    return sdn_kv_cache_bytes(&m->cfg, sdn_kv_resolve(SDN_KV_AUTO, 1), sdn_kv_resolve(SDN_KV_AUTO, 0), n_ctx);
}
