/* methods.c - the drafting-method registry (see methods.h). */
#include "draft/methods.h"

#include <errno.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "draft/sdnpu_drafter.h"

void sdn_method_defaults(sdn_method_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    sdn_pld_defaults(&cfg->pld);
    sdn_sam_drafter_defaults(&cfg->sam);
    sdn_sdnpu_defaults(&cfg->sdnpu);
    cfg->forced = 1;
    cfg->exits = 1;
    cfg->evidence = 0; /* measured no better than the chain rule yet (docs/drafting.md, section 8) */
}

/* The sdnpu-drafter family: which parts each method switches on. */
static const struct {
    const char *name;
    int cal, reuse, model;
} family[] = {{"sam+tree", 0, 0, 0}, {"sam+cal", 1, 0, 0}, {"sam+reuse", 0, 1, 0}, {"sam+model", 0, 0, 1}, {"sdnpu", 1, 1, 1}};
#define NFAM (int)(sizeof family / sizeof family[0])

static int fam(const char *method) {
    for (int i = 0; method && i < NFAM; i++)
        if (!strcmp(method, family[i].name)) return i;
    return -1;
}

int sdn_method_needs_model_feedback(const char *method) { int f = fam(method); return f >= 0 && (family[f].reuse || family[f].model); }
int sdn_method_reuses_drafts(const char *method) { int f = fam(method); return f >= 0 && family[f].reuse; }
int sdn_method_uses_prefill_preds(const char *method) { int f = fam(method); return f >= 0 && family[f].cal; }
int sdn_method_uses_model_table(const char *method, const sdn_method_config *cfg) {
    int f = fam(method);
    return f >= 0 && family[f].model && (!cfg || cfg->sdnpu.use_model);
}

int sdn_method_scores_paths(const char *method, const sdn_method_config *cfg) { return fam(method) >= 0 && cfg->evidence; }

const char *sdn_method_list(void) { return "none, pld, sam, sam+tree, sam+cal, sam+reuse, sam+model, sdnpu"; }

int sdn_method_create(const char *method, const sdn_method_config *cfg, sdn_drafter *out, sdn_err *err) {
    memset(out, 0, sizeof *out);
    if (!method || !strcmp(method, "none")) return SDN_OK;
    if (!strcmp(method, "pld")) return sdn_pld_create(&cfg->pld, out, err);
    if (!strcmp(method, "sam")) {
        if (cfg->hist_bytes) return sdn_sam_drafter_create_from_bytes(&cfg->sam, cfg->hist_bytes, cfg->hist_bytes_len, out, err);
        return sdn_sam_drafter_create(&cfg->sam, cfg->hist, cfg->hist_len, cfg->n_hist, out, err);
    }
    int f = fam(method);
    if (f >= 0) {
        sdn_sdnpu_config c = cfg->sdnpu;
        c.use_cal = family[f].cal;
        c.use_reuse = family[f].reuse;
        c.use_model = family[f].model && c.use_model;
        c.recycle = cfg->recycle;
        return sdn_sdnpu_create(&c, cfg->hist, cfg->hist_len, cfg->n_hist, cfg->hist_bytes, cfg->hist_bytes_len, out, err);
    }
    return sdn_fail(err, SDN_EINVAL, "unknown drafting method '%s' (known: %s)", method, sdn_method_list());
}

typedef struct param {
    const char *key;
    int is_float;
    double lo, hi;
    size_t off; /* offset in sdn_method_config */
} param;

#define P(k, f, lo, hi, field) {k, f, lo, hi, offsetof(sdn_method_config, field)}
static const param params[] = {
    P("pld.max_ngram", 0, 1, 64, pld.max_ngram),     P("pld.min_ngram", 0, 1, 64, pld.min_ngram),
    P("pld.num_pred", 0, 1, 63, pld.num_pred),       P("sam.n_predicts", 0, 1, 63, sam.n_predicts),
    P("sam.min_match", 0, 0, 1000, sam.min_match),   P("sam.len_bias", 0, 0, 1000, sam.len_bias),
    P("sam.tree", 0, 0, 1, sam.tree),                P("sam.topk", 0, 1, 64, sam.topk),
    P("sdnpu.n_predict", 0, 1, 63, sdnpu.n_predict), P("sdnpu.min_match", 0, 0, 1000, sdnpu.min_match),
    P("sdnpu.alts", 0, 0, 7, sdnpu.alts),            P("sdnpu.follow", 1, 0.001, 0.999, sdnpu.follow),
    P("cal.min_prob", 1, 0, 1, sdnpu.cal.min_prob),  P("cal.max_depth", 0, 1, 63, sdnpu.cal.max_depth),
    P("cal.max_branch", 0, 1, 16, sdnpu.cal.max_branch), P("cal.max_nodes", 0, 1, 64, sdnpu.cal.max_nodes),
    P("reuse.max_age", 0, 0, 1000, sdnpu.reuse.max_age), P("reuse.accept_prob", 1, 0.001, 0.99, sdnpu.reuse.accept_prob),
    P("reuse.rule", 0, 0, 1, sdnpu.reuse.rule),      P("reuse.threshold", 0, 0, 1000, sdnpu.reuse.threshold),
    P("sdnpu.weigh", 0, 0, 1, sdnpu.weigh),       P("grammar.forced", 0, 0, 1, forced), P("grammar.exits", 0, 0, 1, exits),
    P("sdnpu.model", 0, 0, 1, sdnpu.use_model),   P("model.nodes", 0, 0, 64, sdnpu.model_nodes),
    P("model.min", 1, 0, 1, sdnpu.model_min),     P("model.prior", 1, 0, 1e6, sdnpu.model_prior),
    P("draft.evidence", 0, 0, 1, evidence),
};
#undef P

int sdn_method_set_param(sdn_method_config *cfg, const char *kv, sdn_err *err) {
    const char *eq = strchr(kv, '=');
    if (!eq) return sdn_fail(err, SDN_EINVAL, "option --param: '%s' is not KEY=VALUE", kv);
    size_t kl = (size_t)(eq - kv);
    if (!kl) return sdn_fail(err, SDN_EINVAL, "option --param: '%s' has no KEY before '='", kv);
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        if (strlen(params[i].key) != kl || strncmp(params[i].key, kv, kl)) continue;
        char *end;
        errno = 0;
        double v = strtod(eq + 1, &end);
        /* !(lo <= v <= hi) also refuses NaN, and keeps the (int) conversion in range */
        if (errno || end == eq + 1 || *end || !(v >= params[i].lo && v <= params[i].hi) || (!params[i].is_float && v != (int)v))
            return sdn_fail(err, SDN_EINVAL, "option --param: %.*s = '%s' is not a%s in [%g, %g]", (int)kl, kv, eq + 1,
                            params[i].is_float ? " number" : "n integer", params[i].lo, params[i].hi);
        char *base = (char *)cfg + params[i].off;
        if (params[i].is_float) *(float *)base = (float)v;
        else *(int *)base = (int)v;
        return SDN_OK;
    }
    char keys[512] = "";
    size_t kn = 0;
    for (size_t i = 0; i < sizeof params / sizeof params[0] && kn < sizeof keys; i++)
        kn += (size_t)snprintf(keys + kn, sizeof keys - kn, "%s%s", i ? " " : "", params[i].key);
    return sdn_fail(err, SDN_EINVAL, "option --param: unknown key '%.*s' (keys: %s)", (int)kl, kv, keys);
}

int sdn_method_param_info(int i, const char **key, int *is_float, double *lo, double *hi, double *def) {
    if (i < 0 || (size_t)i >= sizeof params / sizeof params[0]) return 0;
    sdn_method_config d;
    sdn_method_defaults(&d);
    const char *base = (const char *)&d + params[i].off;
    *key = params[i].key;
    *is_float = params[i].is_float;
    *lo = params[i].lo;
    *hi = params[i].hi;
    *def = params[i].is_float ? (double)*(const float *)base : (double)*(const int *)base;
    return 1;
}
