/* methods.h - the drafting methods selectable by name (`--spec METHOD`): one registry so
 * the CLI, the benchmark and the offline study create drafters the same way.
 *   none  plain decoding (no drafter)
 *   pld   prompt-lookup n-grams (pld.h)
 *   sam   suffix-automaton retrieval over context+output and history (sam_drafter.h), the
 *         SAM-Decoding baseline
 *   sam+tree   sdnpu's drafter with retrieval only (budget-filling tree builder)
 *   sam+cal    + in-context calibration trees (uses prefill predictions)
 *   sam+reuse  + draft reuse (uses the model's predictions at rejected nodes)
 *   sam+model  + the model-derived candidates (recycle.h; uses the model's top-k at every
 *              verified row and the model's shared candidate table, sdn_method_config.recycle)
 *   sdnpu      all of them (sdnpu_drafter.h) */
#ifndef SDN_METHODS_H
#define SDN_METHODS_H

#include <stddef.h>
#include <stdint.h>

#include "draft/drafter.h"
#include "draft/pld.h"
#include "draft/sam_drafter.h"
#include "draft/sdnpu_drafter.h"

typedef struct sdn_method_config {
    sdn_pld_config pld;
    sdn_sam_drafter_config sam;
    sdn_sdnpu_config sdnpu; /* sam+tree, sam+cal, sam+reuse, sdnpu (parts switched per method) */
    /* earlier answers of the same task group (static history automaton), either as token
     * sequences or as a serialized automaton; both optional */
    const int32_t *const *hist;
    const int *hist_len;
    int n_hist;
    const uint8_t *hist_bytes;
    size_t hist_bytes_len;
    int forced; /* grammar.forced: with a constrained request, draft the text the grammar forces and go on past it (1) */
    int exits;  /* grammar.exits: at a branch point, also draft the way out of the element and its forced text (1) */
    int evidence; /* draft.evidence: the sdnpu family's draft size from calibrated scores (sizing.h; 0) */
    struct sdn_recycle *recycle; /* the model's candidate table (recycle.h; not owned): what sam+model
                                    and sdnpu read and update; NULL: that source is off */
} sdn_method_config;

void sdn_method_defaults(sdn_method_config *cfg);
/* Create the drafter of `method`. For "none", out->ops is NULL and SDN_OK is returned.
 * Unknown names fail with SDN_EINVAL listing the known methods. */
int sdn_method_create(const char *method, const sdn_method_config *cfg, sdn_drafter *out, sdn_err *err);
/* 1 when the method learns from the model's predictions at rejected draft positions
 * (sdn_draft_feedback.node_argmax, row_topk), so an offline replay of a trace cannot
 * reproduce it. */
int sdn_method_needs_model_feedback(const char *method);
/* 1 when the method reuses rejected drafts (the model's greedy token after every rejected
 * draft node, sdn_draft_feedback.node_argmax): what no trace records. The model-derived
 * candidates (row_topk) replay from a trace's output predictions (datasets/study.h). */
int sdn_method_reuses_drafts(const char *method);
/* 1 when the method uses the prefill predictions (sdn_gen_params.prefill_topk > 0). */
int sdn_method_uses_prefill_preds(const char *method);
/* 1 when the method reads and updates the model's candidate table (with cfg, unless
 * sdnpu.model=0 switched it off): the decode loop then computes every verified row's top-k
 * (sdn_gen_params.row_topk) and cfg->recycle should be set. */
int sdn_method_uses_model_table(const char *method, const sdn_method_config *cfg);
/* 1 when the method's node scores are path estimates (the sdnpu family's tree builder) and
 * cfg's draft.evidence is on: the decode loop may then size each step's draft from them
 * (sdn_gen_params.score_budget, draft/sizing.h). */
int sdn_method_scores_paths(const char *method, const sdn_method_config *cfg);
/* Set one parameter from "KEY=VALUE" (the --param option). Keys:
 *   pld.max_ngram pld.min_ngram pld.num_pred
 *   sam.n_predicts sam.min_match sam.len_bias sam.tree sam.topk
 *   sdnpu.n_predict sdnpu.min_match sdnpu.alts sdnpu.follow
 *   cal.min_prob cal.max_depth cal.max_branch cal.max_nodes
 *   reuse.max_age reuse.accept_prob reuse.rule reuse.threshold sdnpu.weigh grammar.forced
 *   grammar.exits sdnpu.model model.nodes model.min model.prior draft.evidence
 * (reuse.rule: 0 = segments age out after reuse.max_age steps, 1 = the paper's rule, dropped
 * after a step drafting more than reuse.threshold tokens (reuse.h); sdnpu.weigh: 1 = the
 * context continuation is weighed by the model's predictions when calibration is on,
 * 0 = not, as in the paper (the default); the sdnpu.*, cal.* and reuse.* keys apply to sam+tree, sam+cal, sam+reuse and sdnpu;
 * grammar.forced: 1 (default) = with any drafting method, a constrained request also drafts the
 * text its grammar forces next and, past it, goes on with the drafter's continuation where a
 * value starts (methods that offer continue_after), 0 = not; sdnpu.model: 1 (default) = sam+model and
 * sdnpu draft the model-derived candidates, 0 = not; model.nodes / model.min / model.prior: that
 * source's candidates per step, lowest path estimate and prior weight (sdnpu_drafter.h);
 * draft.evidence: 1 = with the engine's budget (a cost curve), the sdnpu family sizes each
 * step's draft from its calibrated node scores (sizing.h), 0 (default, measured no worse) =
 * from the chain rule (sdn_draft_budget); grammar.exits: 1 (default) = where the grammar
 * branches (no forced text), also the byte that leaves the current element with the longest
 * forced text after it, such as the `,` after a number and the next key, 0 = not).
 * Unknown keys and out-of-range values fail with SDN_EINVAL naming them. */
int sdn_method_set_param(sdn_method_config *cfg, const char *kv, sdn_err *err);
/* Describe parameter i (0, 1, ... in the order above): its key, whether it is a number or an
 * integer, its range and its default. Returns 0 when i is past the last one. */
int sdn_method_param_info(int i, const char **key, int *is_float, double *lo, double *hi, double *def);
/* Comma-separated list of the method names. */
const char *sdn_method_list(void);

#endif
