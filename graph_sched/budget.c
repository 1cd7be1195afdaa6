/* budget.c - choosing the decode graph shape and draft budget (see budget.h): an
 * exhaustive scan of (shape, draft size) pairs; ties keep the earlier shape of the list,
 * then the smaller draft. */
#include "graph_sched/budget.h"

#include <math.h>

double sdn_accept_geometric(void *ud, int d) {
    double a = ud ? *(const double *)ud : SDN_ACCEPT_DEFAULT;
    if (!(a >= 0)) a = 0;
    if (a >= 1) return d + 1;
    return (1 - pow(a, d + 1)) / (1 - a);
}

int sdn_budget_choose(const int *shapes, int n, sdn_step_cost cost, void *cost_ud, sdn_accept_model acc, void *acc_ud, sdn_budget *out,
                      sdn_err *err) {
    if (!acc) acc = sdn_accept_geometric;
    out->shape = out->draft = 0;
    out->tok_per_s = out->step_s = 0;
    for (int i = 0; i < n; i++) {
        int S = shapes[i];
        if (S < 1 || S > 64) return sdn_fail(err, SDN_EINVAL, "budget: decode shape %d outside 1..64", S);
        for (int d = 0; d < S; d++) {
            double t = cost(cost_ud, S, d + 1), e = acc(acc_ud, d);
            if (!(t > 0) || !isfinite(e)) continue;
            double v = e / t;
            if (v > out->tok_per_s * (1 + 1e-12) || (out->shape == 0)) {
                out->shape = S;
                out->draft = d;
                out->tok_per_s = v;
                out->step_s = t;
            }
        }
    }
    if (!out->shape) return sdn_fail(err, SDN_EINVAL, "budget: no shape with a positive step cost");
    return SDN_OK;
}
