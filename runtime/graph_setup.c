/* graph_setup.c - graph scheduling for a generation run (see graph_setup.h). A profile is needed by the
 * planned schedules (progressive, optimal) and by the budget (decode shape not given, or
 * draft size not given); otherwise none is read or measured. */
#include "runtime/graph_setup.h"

#include "common/sdn_util.h"

#include <string.h>

int sdn_gs_profile_get(sdn_model *m, int threads, const char *db_path, int n_blocks, int s1, int force, FILE *log, sdn_profile **out,
                       sdn_err *err) {
    *out = NULL;
    char fp[17], machine[160];
    snprintf(fp, sizeof fp, "%016llx", (unsigned long long)sdn_model_fingerprint(m));
    sdn_machine_id(machine, sizeof machine);
    int rc;
    if (!db_path || !*db_path) return sdn_fail(err, SDN_EINVAL, "--profile-db: no profile database given");
    if (!force) {
        if ((rc = sdn_profile_db_load(db_path, fp, threads, machine, out, err))) return rc;
        if (*out) return SDN_OK;
    }
    if (log) fprintf(log, "profiling %s with %d threads (cached in %s) ...\n", sdn_model_path(m), threads, db_path);
    sdn_profile_opts po;
    sdn_profile_opts_default(&po);
    if (n_blocks > 0) po.n_blocks = n_blocks;
    if (s1 > 0) po.s1 = s1;
    po.log = log;
    if ((rc = sdn_profile_measure(m, threads, &po, out, err))) return rc;
    if ((rc = sdn_profile_db_save(db_path, *out, err))) {
        sdn_profile_free(*out);
        *out = NULL;
        return rc;
    }
    return SDN_OK;
}

void sdn_gs_costs_from_profile(const sdn_profile *p, sdn_gs_costs *out) {
    out->g1 = p->g1;
    out->g2 = p->g2;
    out->load_g2 = p->tau_g2;
    out->load_g2_ovl = p->tau_g2_ovl;
}

static double step_cost(void *ud, int shape, int k) { return sdn_profile_verify(ud, shape, k); }

int sdn_gs_budget(const sdn_profile *p, int s2, int min_shape, double accept, sdn_budget *out, sdn_err *err) {
    int shapes[16], n = 0;
    if (s2 > 0) shapes[n++] = s2;
    else {
        for (int i = 0; i < p->n_meas && n < 16; i++) {
            if (p->meas[i].kind != SDN_PROF_VERIFY_STEP || p->meas[i].rows < min_shape) continue;
            int dup = 0;
            for (int k = 0; k < n; k++) dup |= shapes[k] == p->meas[i].rows;
            if (!dup) shapes[n++] = p->meas[i].rows;
        }
        if (!n) return sdn_fail(err, SDN_EINVAL, "budget: the profile has no decode-step measurements of %d rows or more", min_shape);
    }
    return sdn_budget_choose(shapes, n, step_cost, (void *)p, sdn_accept_geometric, &accept, out, err);
}

int sdn_gs_setup(sdn_model *m, int threads, const sdn_gs_options *o, FILE *log, sdn_ctx_params *cp, sdn_gen_params *gp, sdn_gs **out,
                 sdn_budget *budget, sdn_err *err) {
    *out = NULL;
    sdn_gs_config cfg = {.n_blocks = o->n_blocks, .s1 = o->s1, .s2 = o->s2, .pin = o->pin ? threads : 0};
    int rc = sdn_gs_mode_parse(o->graphs, &cfg.mode, err);
    if (rc) return sdn_fail(err, rc, "--graphs");
    /* the options by the names `sdnpu run` gives them (0: the default) */
    if (o->n_blocks < 0 || o->n_blocks > SDN_GRAPH_MAX_BLOCKS)
        return sdn_fail(err, SDN_EINVAL, "--graph-blocks: %d blocks is not in 1..%d (0: default)", o->n_blocks, SDN_GRAPH_MAX_BLOCKS);
    if (o->s1 < 0 || o->s1 > (1 << 16))
        return sdn_fail(err, SDN_EINVAL, "--g1: a prefill graph of %d rows is not in 1..%d (0: default)", o->s1, 1 << 16);
    if (o->s2 < 0 || o->s2 > SDN_INVARIANT_MAX_ROWS)
        return sdn_fail(err, SDN_EINVAL, "--g2: a decode graph of %d rows is not in 1..%d (0: from the profile)", o->s2,
                        SDN_INVARIANT_MAX_ROWS);
    if (o->draft_max < 0) return sdn_fail(err, SDN_EINVAL, "--draft-max: %d draft tokens", o->draft_max);
    if (o->pin && threads >= sdn_cpus_online())
        return sdn_fail(err, SDN_EINVAL, "--graph-pin: %d compute threads leave none of the %d online CPUs to the loader (use fewer --threads)",
                        threads, sdn_cpus_online());
    sdn_budget b = {0};
    sdn_profile *p = NULL;
    sdn_gs_costs costs;
    int need = cfg.mode == SDN_GS_PROGRESSIVE || cfg.mode == SDN_GS_OPTIMAL || o->s2 <= 0 || o->draft_max <= 0;
    if (need) {
        if ((rc = sdn_gs_profile_get(m, threads, o->profile_db, o->n_blocks, o->s1, 0, log, &p, err))) return rc;
        sdn_gs_costs_from_profile(p, &costs);
        cfg.costs = &costs;
        /* with a drafter: the geometric model, shapes of 2 rows or more; plain decoding: one token per step */
        double a = gp->drafter ? (o->accept > 0 ? o->accept : SDN_ACCEPT_DEFAULT) : 0;
        if ((rc = sdn_gs_budget(p, o->s2, gp->drafter ? 2 : 1, a, &b, err))) {
            sdn_profile_free(p);
            return rc;
        }
        if (o->s2 <= 0) cfg.s2 = b.shape;
    }
    sdn_profile_free(p);
    if (o->pin && (rc = sdn_pin_self(0, threads, err))) return rc;
    if ((rc = sdn_gs_new(m, &cfg, out, err))) return rc;
    if ((rc = sdn_gs_prepare(*out, err))) {
        sdn_gs_free(*out);
        *out = NULL;
        return rc;
    }
    if (cp->max_batch < sdn_gs_min_batch(*out)) cp->max_batch = sdn_gs_min_batch(*out);
    cp->file_layout = 1; /* the scheduler loads and unloads G2 itself */
    sdn_gs_apply(*out, gp);
    if (o->draft_max <= 0 && b.shape > 0 && b.draft > 0) gp->caps.max_nodes = b.draft;
    if (budget) *budget = b;
    if (log) {
        fprintf(log, "[graphs %s] %d blocks, G1 %d rows, G2 %d rows", o->graphs, sdn_gs_blocks(*out)->n, sdn_gs_s1(*out), sdn_gs_s2(*out));
        if (b.shape > 0)
            fprintf(log, " | budget from the profile: %s%d draft tokens per step, %.1f tok/s expected", o->s2 > 0 ? "" : "shape and ",
                    o->draft_max > 0 ? o->draft_max : b.draft, b.tok_per_s);
        fprintf(log, "\n");
    }
    return SDN_OK;
}

void sdn_gs_apply(sdn_gs *gs, sdn_gen_params *gp) {
    gp->prefill = sdn_gs_prefill;
    gp->prefill_ud = gs;
    gp->decode_rows = sdn_gs_s2(gs);
}
