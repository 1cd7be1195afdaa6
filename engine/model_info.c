/* model_info.c - the human-readable model description printed by `sdnpu info`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sdn_str.h"
#include "modelfile/gguf.h"
#include "tokenizer/chat_template.h"
#include "kernels/kernel_path.h"
#include "attention/kv_cache.h"
#include "engine/layout.h"
#include "kernels/matmul.h"
#include "engine/model_internal.h"
#include "modelfile/tensor_types.h"
#include "tokenizer/tokenizer.h"

static const char *mib(size_t bytes, char *buf) {
    snprintf(buf, 32, "%.1f MiB", (double)bytes / (1 << 20));
    return buf;
}

char *sdn_model_describe(const sdn_model *m, int n_ctx) {
    const sdn_model_config *c = &m->cfg;
    sdn_str b = {0};
    char t1[32], t2[32], t3[32];
    sdn_str_printf(&b, "file:          %s (%s)\n", m->path, m->format);
    if (m->gguf) {
        const char *name = sdn_gguf_str_or_null(m->gguf, "general.name");
        sdn_str_printf(&b, "name:          %s\n", name ? name : "-");
        sdn_str_printf(&b, "gguf:          version %u, %d metadata keys, %d tensors\n", sdn_gguf_version(m->gguf), sdn_gguf_n_kv(m->gguf),
            sdn_gguf_n_tensors(m->gguf));
    }
    sdn_str_printf(&b, "architecture:  %s%s%s%s%s%s\n", sdn_arch_name(c->arch), c->has_qkv_bias ? " (QKV bias)" : "",
        c->has_rope_freqs ? " (Llama 3 rope frequency factors)" : "", c->has_qk_norm ? " (RMSNorm on q and k)" : "",
        c->has_post_norms ? " (norms after attention and FFN)" : "", c->ffn_gelu ? " (gelu-tanh gated FFN)" : "");
    if (c->arch == SDN_ARCH_GEMMA3) {
        int n_local = 0;
        for (int l = 0; l < c->n_layers; l++) n_local += sdn_layer_is_swa(c, l);
        if (c->n_swa > 0)
            sdn_str_printf(&b, "attention:     %d local layers (sliding window %d, rope theta %g) and %d global (every %d%s layer), scale %g\n", n_local,
                c->n_swa, c->rope_theta_swa, c->n_layers - n_local, c->swa_pattern,
                c->swa_pattern == 2 ? "nd" : c->swa_pattern == 3 ? "rd" : "th", c->attn_scale);
        else
            sdn_str_printf(&b, "attention:     all %d layers global, scale %g\n", c->n_layers, c->attn_scale);
        sdn_str_printf(&b, "embeddings:    scaled by %g (sqrt of dim)%s\n", c->embd_scale, c->final_softcap > 0 ? "" : ", no final logit soft-capping");
        if (c->final_softcap > 0) sdn_str_printf(&b, "logits:        soft-capped at %g\n", c->final_softcap);
    }
    sdn_str_printf(&b, "shape:         %d layers, dim %d, ffn %d, heads %d (kv %d, head dim %d), vocab %d\n", c->n_layers, c->dim, c->hidden,
        c->n_heads, c->n_kv_heads, c->head_dim, c->vocab);
    sdn_str_printf(&b, "numerics:      rms eps %g, rope theta %g (%s%s), trained context %d\n", c->rms_eps, c->rope_theta,
        c->rope_neox ? "NeoX pairs" : "interleaved pairs", c->rope_scale != 1 ? ", linear scaling" : "", c->ctx_len);
    sdn_str_printf(&b, "output:        %s\n", c->tied_output ? "tied to token embedding" : "separate matrix");
    /* tensor types by role */
    struct { const char *role; uint32_t types[16]; int n; } roles[] = {{"attn_q/k/v", {0}, 0}, {"attn_output", {0}, 0},
                                                                     {"ffn_gate/up", {0}, 0}, {"ffn_down", {0}, 0}};
    for (int l = 0; l < c->n_layers; l++) {
        const sdn_layer *y = &m->layers[l];
        const sdn_weight *ws[4][3] = {{&y->wq, &y->wk, &y->wv}, {&y->wo, NULL, NULL}, {&y->w_gate, &y->w_up, NULL}, {&y->w_down, NULL, NULL}};
        for (int r = 0; r < 4; r++)
            for (int k = 0; k < 3 && ws[r][k]; k++) {
                int seen = 0;
                for (int i = 0; i < roles[r].n; i++) seen |= roles[r].types[i] == ws[r][k]->type;
                if (!seen && roles[r].n < 16) roles[r].types[roles[r].n++] = ws[r][k]->type;
            }
    }
    sdn_str_printf(&b, "tensor types:  token_embd %s, output %s", sdn_type_name(m->tok_embd.type), sdn_type_name(m->output.type));
    for (int r = 0; r < 4; r++) {
        sdn_str_printf(&b, ", %s ", roles[r].role);
        for (int i = 0; i < roles[r].n; i++) sdn_str_printf(&b, "%s%s", i ? "+" : "", sdn_type_name(roles[r].types[i]));
    }
    sdn_str_printf(&b, "\n");
    if (m->tok)
        sdn_str_printf(&b, "tokenizer:     %s, %d tokens, bos %d, eos %d, add_bos %s\n", sdn_tokenizer_kind_of(m->tok) == SDN_TOKENIZER_SPM ? "SentencePiece (scores, byte fallback)" : "byte-level BPE", sdn_tokenizer_n_vocab(m->tok),
            sdn_tokenizer_bos(m->tok), sdn_tokenizer_eos(m->tok), sdn_tokenizer_add_bos(m->tok) ? "yes" : "no");
    else
        sdn_str_printf(&b, "tokenizer:     none (prompts as token ids)\n");
    if (m->tok) {
        /* every warning the tokenizer recorded while loading, one line each */
        const char *w = sdn_tokenizer_warnings(m->tok);
        for (const char *e; w && *w; w = *e ? e + 1 : e) {
            e = strchr(w, '\n');
            if (!e) e = w + strlen(w);
            sdn_str_printf(&b, "tokenizer note: %.*s\n", (int)(e - w), w);
        }
    }
    if (m->gguf) {
        const char *tmpl = sdn_gguf_str_or_null(m->gguf, "tokenizer.chat_template");
        if (tmpl) {
            sdn_chat_template ct;
            sdn_chat_template_init(&ct, SDN_CHAT_AUTO, tmpl);
            sdn_str_printf(&b, "chat template: present, rendered as %s%s%s%s\n", sdn_chat_kind_name(ct.kind), ct.default_system[0] ? " (default system prompt: \"" : "",
                ct.default_system, ct.default_system[0] ? "\")" : "");
        } else if (m->tok && sdn_tokenizer_find(m->tok, "<start_of_turn>", 15) >= 0 && sdn_tokenizer_find(m->tok, "<end_of_turn>", 13) >= 0) {
            sdn_str_printf(&b, "chat template: none (a base model; its vocabulary has Gemma's turn markers: --chat-template gemma renders them)\n");
        } else {
            sdn_str_printf(&b, "chat template: none\n");
        }
    }
    size_t wb = sdn_model_weight_bytes(m), tok = sdn_model_bytes_per_token(m), kv = sdn_model_kv_bytes(m, n_ctx);
    int packed = 0; /* layers whose decode layout a context packs */
    for (int l = 0; l < c->n_layers; l++) packed += sdn_layout_layer_packed(m, l);
    const sdn_kv_type tk = sdn_kv_resolve(SDN_KV_AUTO, 1), tv = sdn_kv_resolve(SDN_KV_AUTO, 0);
    sdn_str_printf(&b, "memory:        layer weights %s (%s), read per decoded token %s, KV cache for %d positions %s (keys %s, values %s)\n",
        mib(wb, t1), packed ? "packed for the kernels when a context opens, mapping released" : "mapped", mib(tok, t2), n_ctx, mib(kv, t3),
        sdn_kv_type_name(tk), sdn_kv_type_name(tv));
    {
        /* a prefix cache block holds a position's KV entries and its last-layer output (F32) */
        size_t per[SDN_KV_TYPE_COUNT];
        for (int t = SDN_KV_FIRST; t < SDN_KV_TYPE_COUNT; t++)
            per[t] = sdn_kv_cache_bytes(c, (sdn_kv_type)t, (sdn_kv_type)t, SDN_KV_TILE) / SDN_KV_TILE + 4 * (size_t)c->dim;
        sdn_str_printf(&b, "prefix cache:  a cached prompt token takes %zu bytes with f16 keys and values, bf16 %zu, q8 %zu, f32 %zu "
                           "(its KV entries and its last layer's output)\n",
                       per[SDN_KV_F16], per[SDN_KV_BF16], per[SDN_KV_Q8], per[SDN_KV_F32]);
    }
    size_t f32 = 0;
    for (int l = 0; l < c->n_layers; l++) {
        const sdn_layer *y = &m->layers[l];
        const sdn_weight *ws[] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->w_gate, &y->w_up, &y->w_down};
        for (int i = 0; i < 7; i++) f32 += (size_t)ws[i]->in * (size_t)ws[i]->out * 4;
    }
    sdn_str_printf(&b, "               a session needs about %s resident (weights + KV cache); the F32 prefill layout of all layers adds %s\n",
        mib(tok + kv, t1), mib(f32, t2));
    {
        /* the prefill's promise (docs/engine.md, "Same bits however the prompt is cut"): the
         * batch kernels compute a row the same way in any batch, SGEMM does not */
        char sg[256] = "";
        size_t o = 0;
        uint32_t seen[64];
        int ns = 0;
        for (int l = 0; l < c->n_layers; l++) {
            const sdn_layer *y = &m->layers[l];
            const sdn_weight *ws[] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->w_gate, &y->w_up, &y->w_down};
            for (int i = 0; i < 7; i++) {
                const uint32_t t = ws[i]->type;
                int dup = 0;
                for (int k = 0; k < ns; k++) dup |= seen[k] == t;
                if (dup || ns == 64) continue;
                seen[ns++] = t;
                const int kern = sdn_prefill_mm_get() != SDN_PREFILL_MM_SGEMM;
                if (!kern && o < sizeof sg) o += (size_t)snprintf(sg + o, sizeof sg - o, "%s%s", o ? ", " : "", sdn_type_name(t));
            }
        }
        if (!sg[0])
            sdn_str_printf(&b, "determinism:   a position's KV entries and logits are the same bits whatever the prefill chunking, batch or reused prefix\n");
        else
            sdn_str_printf(&b, "determinism:   layers of type %s prefill on SGEMM, whose bits depend on the chunking: answers can differ with\n"
                    "               chunk size, graph mode or a reused prefix (--prefill-matmul sgemm asked for it; auto removes that)\n", sg);
    }
    sdn_str_printf(&b, "fingerprint:   %016llx\n", (unsigned long long)m->fingerprint);
    return sdn_str_take(&b);
}
