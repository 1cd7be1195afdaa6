/* ref_model.c - naive double-precision reference forward pass (see ref_model.h).
 * Definitions used: RMSNorm y = w * x / sqrt(mean(x^2) + eps); RoPE on pairs (2j, 2j+1)
 * for llama and (j, j + d/2) for qwen2 with angle pos * theta^(-2j/d) / factor_j;
 * attention softmax(q.k / sqrt(d)) v over all earlier positions, K/V head = q head /
 * (heads / kv_heads); FFN down(silu(gate x) * up x); logits = output(rmsnorm(x)).
 * qwen3 adds an RMSNorm over each head of q and k before RoPE (NeoX pairs, no bias).
 * gemma3 (Gemma 3 as google/gemma_pytorch defines it, with the norm weights stored as the
 * scale "1 + w"): x = embedding * sqrt(dim); q/k head norms; attention of layer l over the
 * last W positions only when l % P < P - 1 (W = attention.sliding_window, P =
 * attention.sliding_window_pattern, default 6), those layers rotating with
 * rope.freq_base_swa (default 10000); x += rmsnorm_post(attention); x += rmsnorm_post(
 * down(gelu_tanh(gate x) * up x)); logits soft-capped when final_logit_softcapping is set. */
#include "support/ref_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelfile/gguf.h"
#include "kernels/quant.h"

typedef struct rlayer {
    float *an, *fn, *wq, *wk, *wv, *wo, *wg, *wu, *wd, *bq, *bk, *bv;
    float *qn, *kn, *pan, *pfn; /* q/k head norms, post-attention and post-FFN norms (or NULL) */
} rlayer;

struct ref_model {
    int L, dim, hid, H, KV, hd, V, neox, ctx;
    double eps, theta, theta_swa, softcap;
    int gemma, swa, swa_pat;
    float *emb, *out, *onorm, *rf;
    rlayer *ly;
    double *kc, *vc; /* [L][ctx][KV*hd] */
    int pos;
};

static float *tensor_f32(sdn_gguf *g, const char *name, int64_t expect_n) {
    const sdn_gguf_tensor *t = sdn_gguf_tensor_find(g, name);
    if (!t) return NULL;
    int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    if (expect_n && n != expect_n) { fprintf(stderr, "ref: %s has %lld elements, expected %lld\n", name, (long long)n, (long long)expect_n); return NULL; }
    float *d = malloc((size_t)n * sizeof(float));
    size_t rb = sdn_type_row_bytes(t->type, t->ne[0]);
    for (int64_t r = 0; r < n / t->ne[0]; r++) sdn_dequantize_row(t->type, (const char *)t->data + r * rb, d + r * t->ne[0], t->ne[0]);
    return d;
}

static uint32_t u32(sdn_gguf *g, const char *arch, const char *k, uint32_t dflt) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, k);
    uint32_t v = dflt;
    sdn_gguf_get_u32_or(g, key, dflt, &v, NULL);
    return v;
}
static double f32(sdn_gguf *g, const char *arch, const char *k, float dflt) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, k);
    float v = dflt;
    sdn_gguf_get_f32_or(g, key, dflt, &v, NULL);
    return v;
}

ref_model *ref_model_load(const char *path) {
    sdn_gguf *g;
    sdn_err e = {0};
    if (sdn_gguf_open(path, &g, &e)) { fprintf(stderr, "ref: %s\n", e.msg); return NULL; }
    const char *arch = sdn_gguf_str_or_null(g, "general.architecture");
    ref_model *r = calloc(1, sizeof *r);
    r->neox = !strcmp(arch, "qwen2") || !strcmp(arch, "qwen3") || !strcmp(arch, "gemma3");
    r->gemma = !strcmp(arch, "gemma3");
    r->L = (int)u32(g, arch, "block_count", 0);
    r->dim = (int)u32(g, arch, "embedding_length", 0);
    r->hid = (int)u32(g, arch, "feed_forward_length", 0);
    r->H = (int)u32(g, arch, "attention.head_count", 0);
    r->KV = (int)u32(g, arch, "attention.head_count_kv", (uint32_t)r->H);
    r->hd = (int)u32(g, arch, "attention.key_length", (uint32_t)(r->dim / r->H));
    r->eps = f32(g, arch, "attention.layer_norm_rms_epsilon", 1e-5f);
    r->theta = f32(g, arch, "rope.freq_base", 10000.0f);
    r->swa = (int)u32(g, arch, "attention.sliding_window", 0);
    r->swa_pat = (int)u32(g, arch, "attention.sliding_window_pattern", 6);
    r->theta_swa = f32(g, arch, "rope.freq_base_swa", 10000.0f);
    r->softcap = f32(g, arch, "final_logit_softcapping", 0.0f);
    const sdn_gguf_tensor *te = sdn_gguf_tensor_find(g, "token_embd.weight");
    r->V = (int)te->ne[1];
    r->ctx = 512;
    int qd = r->H * r->hd, kvd = r->KV * r->hd;
    r->emb = tensor_f32(g, "token_embd.weight", (int64_t)r->V * r->dim);
    r->out = tensor_f32(g, "output.weight", (int64_t)r->V * r->dim);
    if (!r->out) r->out = r->emb;
    r->onorm = tensor_f32(g, "output_norm.weight", r->dim);
    r->rf = tensor_f32(g, "rope_freqs.weight", r->hd / 2);
    r->ly = calloc((size_t)r->L, sizeof *r->ly);
    for (int l = 0; l < r->L; l++) {
        char n[96];
#define T(s, cnt) (snprintf(n, sizeof n, "blk.%d.%s", l, s), tensor_f32(g, n, cnt))
        rlayer *y = &r->ly[l];
        y->an = T("attn_norm.weight", r->dim);
        y->fn = T("ffn_norm.weight", r->dim);
        y->wq = T("attn_q.weight", (int64_t)qd * r->dim);
        y->wk = T("attn_k.weight", (int64_t)kvd * r->dim);
        y->wv = T("attn_v.weight", (int64_t)kvd * r->dim);
        y->wo = T("attn_output.weight", (int64_t)qd * r->dim);
        y->wg = T("ffn_gate.weight", (int64_t)r->hid * r->dim);
        y->wu = T("ffn_up.weight", (int64_t)r->hid * r->dim);
        y->wd = T("ffn_down.weight", (int64_t)r->hid * r->dim);
        y->bq = T("attn_q.bias", qd);
        y->bk = T("attn_k.bias", kvd);
        y->bv = T("attn_v.bias", kvd);
        y->qn = T("attn_q_norm.weight", r->hd);
        y->kn = T("attn_k_norm.weight", r->hd);
        y->pan = T("post_attention_norm.weight", r->dim);
        y->pfn = T("post_ffw_norm.weight", r->dim);
#undef T
    }
    sdn_gguf_close(g);
    r->kc = calloc((size_t)r->L * r->ctx * kvd, sizeof(double));
    r->vc = calloc((size_t)r->L * r->ctx * kvd, sizeof(double));
    return r;
}

void ref_model_free(ref_model *r) {
    if (!r) return;
    for (int l = 0; l < r->L; l++) {
        rlayer *y = &r->ly[l];
        float *p[] = {y->an, y->fn, y->wq, y->wk, y->wv, y->wo, y->wg, y->wu, y->wd, y->bq, y->bk, y->bv, y->qn, y->kn, y->pan, y->pfn};
        for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
    }
    if (r->out != r->emb) free(r->out);
    free(r->emb); free(r->onorm); free(r->rf); free(r->ly); free(r->kc); free(r->vc);
    free(r);
}

int ref_model_vocab(const ref_model *r) { return r->V; }
void ref_model_reset(ref_model *r) { r->pos = 0; }

static void matvec(double *y, const float *W, const double *x, int out, int in) {
    for (int o = 0; o < out; o++) {
        double s = 0;
        for (int i = 0; i < in; i++) s += (double)W[(size_t)o * in + i] * x[i];
        y[o] = s;
    }
}
static void rms(double *y, const double *x, const float *w, int n, double eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double k = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) y[i] = w[i] * x[i] * k;
}
static void rope(const ref_model *r, double *v, int nh, int pos, double theta) {
    int half = r->hd / 2;
    for (int h = 0; h < nh; h++)
        for (int j = 0; j < half; j++) {
            double f = pow(theta, -2.0 * j / r->hd);
            if (r->rf) f /= r->rf[j];
            double a = pos * f, c = cos(a), s = sin(a);
            int i0 = r->neox ? j : 2 * j, i1 = r->neox ? j + half : 2 * j + 1;
            double x0 = v[h * r->hd + i0], x1 = v[h * r->hd + i1];
            v[h * r->hd + i0] = x0 * c - x1 * s;
            v[h * r->hd + i1] = x0 * s + x1 * c;
        }
}

void ref_model_step(ref_model *r, int32_t tok, float *logits) {
    int D = r->dim, qd = r->H * r->hd, kvd = r->KV * r->hd, p = r->pos;
    double *x = calloc((size_t)D, 8), *xb = calloc((size_t)(D > qd ? D : qd), 8), *q = calloc((size_t)qd, 8), *att = calloc((size_t)qd, 8);
    double *k = calloc((size_t)kvd, 8), *v = calloc((size_t)kvd, 8), *o = calloc((size_t)D, 8);
    double *g = calloc((size_t)r->hid, 8), *u = calloc((size_t)r->hid, 8), *sc = calloc((size_t)p + 1, 8);
    for (int i = 0; i < D; i++) x[i] = r->emb[(size_t)tok * D + i] * (r->gemma ? sqrt((double)D) : 1.0);
    for (int l = 0; l < r->L; l++) {
        rlayer *y = &r->ly[l];
        int local = r->swa > 0 && l % r->swa_pat < r->swa_pat - 1;
        int t0 = local && p - r->swa + 1 > 0 ? p - r->swa + 1 : 0; /* first visible position */
        rms(xb, x, y->an, D, r->eps);
        matvec(q, y->wq, xb, qd, D);
        matvec(k, y->wk, xb, kvd, D);
        matvec(v, y->wv, xb, kvd, D);
        if (y->bq) {
            for (int i = 0; i < qd; i++) q[i] += y->bq[i];
            for (int i = 0; i < kvd; i++) { k[i] += y->bk[i]; v[i] += y->bv[i]; }
        }
        if (y->qn) {
            for (int h = 0; h < r->H; h++) rms(q + h * r->hd, q + h * r->hd, y->qn, r->hd, r->eps);
            for (int h = 0; h < r->KV; h++) rms(k + h * r->hd, k + h * r->hd, y->kn, r->hd, r->eps);
        }
        rope(r, q, r->H, p, local ? r->theta_swa : r->theta);
        rope(r, k, r->KV, p, local ? r->theta_swa : r->theta);
        double *K = r->kc + (size_t)l * r->ctx * kvd, *Vc = r->vc + (size_t)l * r->ctx * kvd;
        memcpy(K + (size_t)p * kvd, k, (size_t)kvd * 8);
        memcpy(Vc + (size_t)p * kvd, v, (size_t)kvd * 8);
        for (int h = 0; h < r->H; h++) {
            int kh = h / (r->H / r->KV);
            double mx = -1e300, sum = 0;
            for (int t = t0; t <= p; t++) {
                double s = 0;
                for (int d = 0; d < r->hd; d++) s += q[h * r->hd + d] * K[(size_t)t * kvd + kh * r->hd + d];
                sc[t] = s / sqrt((double)r->hd);
                if (sc[t] > mx) mx = sc[t];
            }
            for (int t = t0; t <= p; t++) { sc[t] = exp(sc[t] - mx); sum += sc[t]; }
            for (int d = 0; d < r->hd; d++) {
                double a = 0;
                for (int t = t0; t <= p; t++) a += sc[t] * Vc[(size_t)t * kvd + kh * r->hd + d];
                att[h * r->hd + d] = a / sum;
            }
        }
        matvec(o, y->wo, att, D, qd);
        if (y->pan) rms(o, o, y->pan, D, r->eps);
        for (int i = 0; i < D; i++) x[i] += o[i];
        rms(xb, x, y->fn, D, r->eps);
        matvec(g, y->wg, xb, r->hid, D);
        matvec(u, y->wu, xb, r->hid, D);
        for (int i = 0; i < r->hid; i++)
            g[i] = (r->gemma ? 0.5 * g[i] * (1 + tanh(sqrt(2 / M_PI) * (g[i] + 0.044715 * g[i] * g[i] * g[i]))) : g[i] / (1 + exp(-g[i]))) * u[i];
        matvec(o, y->wd, g, D, r->hid);
        if (y->pfn) rms(o, o, y->pfn, D, r->eps);
        for (int i = 0; i < D; i++) x[i] += o[i];
    }
    rms(xb, x, r->onorm, D, r->eps);
    for (int t = 0; logits && t < r->V; t++) {
        double s = 0;
        for (int i = 0; i < D; i++) s += (double)r->out[(size_t)t * D + i] * xb[i];
        logits[t] = (float)(r->softcap > 0 ? r->softcap * tanh(s / r->softcap) : s);
    }
    r->pos++;
    free(x); free(xb); free(q); free(att); free(k); free(v); free(o); free(g); free(u); free(sc);
}
