/* projection.c - projected speed of a study's counts on a verify-cost profile (see projection.h). */
#include "datasets/projection.h"

#include <string.h>

int sdn_cost_project(const sdn_cost_profile *p, const sdn_study_counts *c, int use_study_draft_time, sdn_projection *out, sdn_err *err) {
    memset(out, 0, sizeof *out);
    if (c->steps <= 0 || c->out_tokens <= 0) return sdn_fail(err, SDN_EINVAL, "projection: no steps");
    double verify = 0;
    long counted = 0;
    for (int i = 0; i < SDN_STUDY_DRAFT_HIST; i++) {
        verify += (double)c->draft_hist[i] * sdn_cost_step_ms(p, i);
        counted += c->draft_hist[i];
    }
    /* steps without a size record (should not happen) cost the mean-size step */
    if (counted < c->steps) verify += (double)(c->steps - counted) * sdn_cost_step_ms(p, sdn_study_mean_draft(c));
    double draft = use_study_draft_time && c->t_draft > 0 ? 1000.0 * c->t_draft / (double)c->steps
                                                         : (p->draft_ms_per_step > 0 ? p->draft_ms_per_step : 0);
    out->verify_ms_per_step = verify / (double)c->steps;
    out->draft_ms_per_step = draft;
    out->ms_per_token = (verify + draft * (double)c->steps) / (double)c->out_tokens;
    out->speedup = out->ms_per_token > 0 ? p->plain_step_ms / out->ms_per_token : 0;
    double oracle = 0;
    long acc_counted = 0;
    for (int a = 0; a < SDN_ACCEPT_HIST; a++) {
        oracle += (double)c->accept_hist[a] * sdn_cost_step_ms(p, a);
        acc_counted += c->accept_hist[a];
    }
    /* steps without an acceptance record cost the plain step (they accepted nothing known) */
    if (acc_counted < c->steps) oracle += (double)(c->steps - acc_counted) * sdn_cost_step_ms(p, 0);
    out->ceiling_ms_per_token = (oracle + draft * (double)c->steps) / (double)c->out_tokens;
    out->ceiling_speedup = out->ceiling_ms_per_token > 0 ? p->plain_step_ms / out->ceiling_ms_per_token : 0;
    return SDN_OK;
}
