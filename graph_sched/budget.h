/* budget.h - the verification budget from the decode graph's shape and the profiled
 * verify cost curve.
 *
 * A decode step with a graph of S rows verifies the root plus up to S - 1 draft tokens and
 * costs T(S, k) seconds, k = the rows whose logits are computed (root + draft tokens): with
 * a fixed shape the layers cost the same for 1 or S tokens, only the LM head grows with k.
 * An acceptance model E(d) gives the expected tokens committed per step (accepted draft
 * tokens plus the bonus token) with a draft of d tokens. The budget is the (S, d), d < S,
 * maximizing E(d) / T(S, d + 1) over the candidate shapes: the step verifies as many
 * tokens as pay for themselves on this machine.
 *
 * Default acceptance model: a chain whose tokens are each accepted with probability a
 * given that the previous ones were, E(d) = 1 + a + ... + a^d = (1 - a^(d+1)) / (1 - a).
 * Callers with measured acceptance (an offline study's histogram) pass their own E. */
#ifndef SDN_BUDGET_H
#define SDN_BUDGET_H

#include "common/sdn_err.h"

/* Expected tokens committed per step with a draft of d tokens (E(0) = 1). */
typedef double (*sdn_accept_model)(void *ud, int d);
/* Seconds of one decode step of shape S with k logit rows. */
typedef double (*sdn_step_cost)(void *ud, int shape, int k);

#define SDN_ACCEPT_DEFAULT 0.5 /* default per-token acceptance of the geometric model */

/* The geometric model; ud points to a double a in [0, 1) (NULL: SDN_ACCEPT_DEFAULT). */
double sdn_accept_geometric(void *ud, int d);

typedef struct sdn_budget {
    int shape;        /* decode graph rows S2 */
    int draft;        /* draft tokens per step (<= shape - 1) */
    double tok_per_s; /* expected committed tokens per second */
    double step_s;    /* seconds per step */
} sdn_budget;

/* Choose among shapes[0..n) (each 1..64). acc NULL: the geometric default. */
int sdn_budget_choose(const int *shapes, int n, sdn_step_cost cost, void *cost_ud, sdn_accept_model acc, void *acc_ud, sdn_budget *out,
                      sdn_err *err);

#endif
