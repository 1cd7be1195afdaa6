/* methods.c - the drafting-method registry (see methods.h). */
#include "draft/methods.h"

#include <string.h>

void sdn_method_defaults(sdn_method_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    sdn_pld_defaults(&cfg->pld);
    sdn_sam_drafter_defaults(&cfg->sam);
}

int sdn_method_needs_model_feedback(const char *method) { (void)method; return 0; }
int sdn_method_uses_prefill_preds(const char *method) { (void)method; return 0; }

const char *sdn_method_list(void) { return "none, pld, sam"; }

int sdn_method_create(const char *method, const sdn_method_config *cfg, sdn_drafter *out, sdn_err *err) {
    memset(out, 0, sizeof *out);
    if (!method || !strcmp(method, "none")) return SDN_OK;
    if (!strcmp(method, "pld")) return sdn_pld_create(&cfg->pld, out, err);
    if (!strcmp(method, "sam")) {
        if (cfg->hist_bytes) return sdn_sam_drafter_create_from_bytes(&cfg->sam, cfg->hist_bytes, cfg->hist_bytes_len, out, err);
        return sdn_sam_drafter_create(&cfg->sam, cfg->hist, cfg->hist_len, cfg->n_hist, out, err);
    }
    return sdn_fail(err, SDN_EINVAL, "unknown drafting method '%s' (known: %s)", method, sdn_method_list());
}
