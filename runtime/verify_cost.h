/* verify_cost.h - verify-cost profiles: what one verification step costs on a machine as a
 * function of the draft size (the engine's default draft budget follows it), and the
 * projection rule datasets/projection.h applies to a study's counts.
 *
 * Profile file (JSON, one object; written by the verification benchmark or by
 * `sdnpu bench --cost-out`):
 *   {"format": "sdnpu-verify-cost", "version": 1,
 *    "model": "...", "shape": "...", "threads": N,
 *    "tree_sizes": [0, 1, 3, ..., 63],   draft tokens per step, strictly increasing, >= 0;
 *                                        the batch is tree_size + 1 rows (the root too);
 *                                        size 0, when listed, is the 1-row plain step
 *    "step_ms": [...],                   median wall time of one verification step with
 *                                        tree_sizes[i] draft tokens (ms, > 0)
 *    "plain_step_ms": x,                 one plain decoding step: the 1-row batch (ms, > 0)
 *    "draft_ms_per_step": y,             optional: drafting time per step assumed when a
 *                                        study has no timing of its own (ms, >= 0)
 *    "check_ms": z}                      optional: the cached curve's quick check (below),
 *                                        measured with it (ms, > 0)
 * Unknown fields (e.g. "rows") are ignored.
 * Step cost for d draft tokens: plain_step_ms at d = 0 (or the listed size-0 value), linear
 * interpolation between the listed sizes, the last listed value beyond the largest size (a fixed-shape graph costs
 * the same for any fill).
 *
 * Projection for counts c (study.h): ms/token = (sum over steps of step_ms(draft size of
 * the step) + steps * draft ms per step) / output tokens, with the study's own measured
 * drafting time (or the profile's when the study has none); speedup = plain_step_ms /
 * that, since plain decoding makes one token per 1-row step. Summing per step (from the
 * study's draft-size histogram) is exact for any cost curve; evaluating the curve at the
 * mean draft size is the same when the curve is linear. The ceiling beside it: the same,
 * with each step's cost step_ms(accepted draft tokens of that step) (the acceptance
 * histogram), as if every step had verified only the chain it went on to accept. */
#ifndef SDN_VERIFY_COST_H
#define SDN_VERIFY_COST_H

#include <stdio.h>

#include "common/sdn_err.h"
#include "engine/forward.h"

#define SDN_COST_MAX_SIZES 64

typedef struct sdn_cost_profile {
    char model[256], shape[192];
    int threads;
    int n;                              /* listed sizes */
    int tree_sizes[SDN_COST_MAX_SIZES];
    double step_ms[SDN_COST_MAX_SIZES];
    double plain_step_ms;
    double draft_ms_per_step;           /* -1 when absent */
    double check_ms;                    /* -1 when absent */
} sdn_cost_profile;

int sdn_cost_load(const char *path, sdn_cost_profile *p, sdn_err *err);
int sdn_cost_parse(const char *name, const char *text, size_t len, sdn_cost_profile *p, sdn_err *err);
int sdn_cost_write(const char *path, const sdn_cost_profile *p, sdn_err *err);
/* Cost of one verification step with d draft tokens (ms). */
double sdn_cost_step_ms(const sdn_cost_profile *p, double d);

/* Measure a profile on a context: for each size d in sizes (and the 1-row plain step),
 * the median over `reps` of one forward of a (d + 1)-row chain batch with the
 * batch-invariant kernels after `n_past` committed positions (synthetic keys and values:
 * sdn_kv_fill_synthetic), logits for all rows, as a
 * verification step runs it. The sizes are timed in rounds (each round times every size
 * once, after one warm-up round), so slow spells of a shared machine spread over all
 * sizes. The KV cache is reset. */
int sdn_cost_measure(sdn_ctx *c, const int *sizes, int n_sizes, int n_past, int reps, sdn_cost_profile *out, sdn_err *err);

/* The verify cost curve of m on this machine as a function of the KV length: near[d] and
 * far[d] (d = 0 .. SDN_INVARIANT_MAX_ROWS - 1) are a verification step with d draft tokens
 * after len_near (64) and len_far (2048) positions, interpolated over d. Each comes from the
 * cache file (in the cache directory, sdn_cache_dir; none set: not kept) verify-cost-<model fingerprint>-<kernel path>-t<threads>-r<SDN_KERNEL_REV>
 * -k<key type>-v<value type>-L<positions>.json when it was measured on this machine, else is
 * measured now (sdn_cost_measure: the near curve at 12 sizes x 5 rounds, the far one at 7 x 3,
 * without a prefill; about 2 s for SmolLM2 on 2 cores) and cached with its quick check (the
 * median of 5 plain steps in a fresh context). A cached near curve is checked first (about
 * 35 ms for SmolLM2 on 2 cores): when its check is more than SDN_VCURVE_STALE times the same
 * check now, the curve was measured on a busy machine and both curves are measured again
 * (and rewritten); a slower check now keeps them, and a near curve without a check is
 * measured again, with the far one. log (optional) says which. The default draft budget reads the curve at
 * the request's KV length (sdn_vcurve_at). */
#define SDN_VCURVE_NEAR 64
#define SDN_VCURVE_FAR 2048
#define SDN_VCURVE_STALE 2.0
typedef struct sdn_vcurve {
    int len_near, len_far;
    double near[SDN_INVARIANT_MAX_ROWS], far[SDN_INVARIANT_MAX_ROWS];
} sdn_vcurve;
int sdn_verify_curve(sdn_model *m, int threads, sdn_vcurve *out, FILE *log, sdn_err *err);
/* The curve at KV length len: linear in len between the two measured lengths and beyond the
 * far one (attention reads every cached position, so a step's cost grows linearly with the
 * length), the near curve below it; never below 5% of the near one. */
void sdn_vcurve_at(const sdn_vcurve *c, int len, double *ms);

#endif
