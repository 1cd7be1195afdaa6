/* methods.c - the drafting-method registry (see methods.h). */
#include "draft/methods.h"

#include <string.h>

#include "draft/sdnpu_drafter.h"

void sdn_method_defaults(sdn_method_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    sdn_pld_defaults(&cfg->pld);
    sdn_sam_drafter_defaults(&cfg->sam);
    sdn_sdnpu_defaults(&cfg->sdnpu);
}

/* The sdnpu-drafter family: which parts each method switches on. */
static const struct {
    const char *name;
    int cal, reuse;
} family[] = {{"sam+tree", 0, 0}, {"sam+cal", 1, 0}, {"sam+reuse", 0, 1}, {"sdnpu", 1, 1}};
#define NFAM (int)(sizeof family / sizeof family[0])

static int fam(const char *method) {
    for (int i = 0; method && i < NFAM; i++)
        if (!strcmp(method, family[i].name)) return i;
    return -1;
}

int sdn_method_needs_model_feedback(const char *method) { int f = fam(method); return f >= 0 && family[f].reuse; }
int sdn_method_uses_prefill_preds(const char *method) { int f = fam(method); return f >= 0 && family[f].cal; }

const char *sdn_method_list(void) { return "none, pld, sam, sam+tree, sam+cal, sam+reuse, sdnpu"; }

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
        return sdn_sdnpu_create(&c, cfg->hist, cfg->hist_len, cfg->n_hist, cfg->hist_bytes, cfg->hist_bytes_len, out, err);
    }
    return sdn_fail(err, SDN_EINVAL, "unknown drafting method '%s' (known: %s)", method, sdn_method_list());
}
