/* projection.h - what a study's counts (datasets/study.h) make of a verify-cost profile
 * (runtime/verify_cost.h): projected ms/token and speedup over plain decoding, by the rule
 * written at the top of verify_cost.h. */
#ifndef SDN_PROJECTION_H
#define SDN_PROJECTION_H

#include "datasets/study.h"
#include "runtime/verify_cost.h"

typedef struct sdn_projection {
    double ms_per_token;
    double speedup;
    double verify_ms_per_step, draft_ms_per_step;
    /* Perfect-sizing ceiling: the same steps if each had verified only the chain it went on
     * to accept (a step that accepted a tokens costs step_ms(a), one that accepted none the
     * plain step), with the same drafting time. An upper bound on what any draft-size rule
     * can make of these drafts: it tells how much the sizing leaves on the table and how
     * much only better candidates can give. */
    double ceiling_ms_per_token, ceiling_speedup;
} sdn_projection;
/* Project counts onto the profile (see above). SDN_EINVAL when c has no steps. */
int sdn_cost_project(const sdn_cost_profile *p, const sdn_study_counts *c, int use_study_draft_time, sdn_projection *out, sdn_err *err);

#endif
