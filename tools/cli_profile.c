/* cli_profile.c - the work of `sdnpu profile` after its option parsing (see tools.h): the
 * model's graphs measured on this machine (or read from the profile cache), the per-block
 * measurements, the fitted latency models, the verification budget they imply, and the
 * schedules each scheduler would run for a prompt of a given length. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tools.h"
#include "tools/bench_util.h"
#include "graph_sched/budget.h"
#include "graph_sched/prefill.h"
#include "graph_sched/profile.h"
#include "graph_sched/schedule.h"
#include "runtime/graph_setup.h"

void sdn_tool_profile_defaults(sdn_tool_profile_opts *o) {
    *o = (sdn_tool_profile_opts){.blocks = SDN_GS_DEFAULT_BLOCKS, .s1 = SDN_GS_DEFAULT_S1, .plen = 1024, .reps = 3, .accept = SDN_ACCEPT_DEFAULT};
}

static double step_cost(void *ud, int shape, int k) { return sdn_profile_verify(ud, shape, k); }

int sdn_tool_profile(const sdn_tool_profile_opts *o) {
    const char *model = o->model, *db = o->db;
    long threads = o->threads, blocks = o->blocks, s1 = o->s1, s2 = o->s2, plen = o->plen, reps = o->reps;
    double accept = o->accept;
    int force = o->force;
    char dbpath[1200];
    if (!db) {
        snprintf(dbpath, sizeof dbpath, "%s/profiles.sqlite", bench_cache_dir());
        db = dbpath;
    }
    sdn_err err = {0};
    sdn_model *m = NULL;
    sdn_profile *p = NULL;
    sdn_sched_inst in = {0};
    int code = 1;
    sdn_model_load_opts lo = {.no_tokenizer = 1};
    if (sdn_model_load(model, &lo, &m, &err)) goto fail;
    if (!force) {
        char fp[17], machine[160];
        snprintf(fp, sizeof fp, "%016llx", (unsigned long long)sdn_model_fingerprint(m));
        sdn_machine_id(machine, sizeof machine);
        if (sdn_profile_db_load(db, fp, (int)threads, machine, &p, &err)) goto fail;
        if (p) printf("(cached profile from %s; --force measures again)\n", db);
    }
    if (!p) {
        fprintf(stderr, "profiling %s with %ld threads, %ld blocks (cached in %s) ...\n", model, threads, blocks, db);
        sdn_profile_opts po;
        sdn_profile_opts_default(&po);
        po.n_blocks = (int)blocks;
        po.s1 = (int)s1;
        po.reps = (int)reps;
        po.log = stderr;
        if (sdn_profile_measure(m, (int)threads, &po, &p, &err)) goto fail;
        if (sdn_profile_db_save(db, p, &err)) goto fail;
    }
    sdn_profile_print(p, stdout);

    /* verification budget */
    printf("\nverification budget (geometric acceptance a = %.2f: E(d) = (1 - a^(d+1)) / (1 - a) tokens per step):\n", accept);
    printf("  %-6s %-6s %-10s %-10s\n", "shape", "draft", "step ms", "tok/s");
    int shapes[16], ns = 0;
    for (int i = 0; i < p->n_meas && ns < 16; i++) {
        if (p->meas[i].kind != SDN_PROF_VERIFY_STEP) continue;
        int dup = 0;
        for (int k = 0; k < ns; k++) dup |= shapes[k] == p->meas[i].rows;
        if (!dup) shapes[ns++] = p->meas[i].rows;
    }
    for (int i = 0; i < ns; i++) {
        sdn_budget b;
        if (sdn_budget_choose(&shapes[i], 1, step_cost, p, sdn_accept_geometric, &accept, &b, &err)) goto fail;
        printf("  %-6d %-6d %-10.2f %-10.1f\n", b.shape, b.draft, 1e3 * b.step_s, b.tok_per_s);
    }
    sdn_budget best;
    if (sdn_gs_budget(p, (int)s2, 2, accept, &best, &err)) goto fail;
    printf("  chosen: decode graph S2 = %d rows, draft budget %d tokens (%.1f tok/s expected)\n", best.shape, best.draft, best.tok_per_s);

    /* schedules */
    int S2 = s2 > 0 ? (int)s2 : best.shape;
    sdn_blocks bl;
    if (sdn_blocks_partition(sdn_model_cfg(m)->n_layers, (int)blocks, &bl, &err)) goto fail;
    sdn_gs_costs costs;
    sdn_gs_costs_from_profile(p, &costs);
    if (sdn_gs_instance(&bl, &costs, SDN_GS_PROGRESSIVE, (int)s1, S2, (int)plen, 0, &in, &err)) goto fail;
    printf("\nschedules for a %ld-token prompt: %d chunks of S1 = %ld through %d blocks, G2 = %d rows (predicted; ms)\n", plen, in.n_chunks, s1,
           bl.n, S2);
    double base = 0;
    for (int k = 0; k < in.n_blocks * in.n_chunks; k++) base += in.g1[k];
    double sync_over = 0;
    printf("  %-12s %-10s %-10s %-8s %-9s %s\n", "scheduler", "prefill", "overhead", "hidden", "G2 tasks", "plan");
    for (int mode = SDN_GS_SINGLE; mode <= SDN_GS_OPTIMAL; mode++) {
        sdn_sched_plan plan;
        sdn_err e2 = {0};
        /* sync's loads run alone, the others' overlapped with compute */
        double tau = mode == SDN_GS_SYNC ? costs.load_g2 : costs.load_g2_ovl;
        for (int j = 0; j < bl.n; j++) in.load[j] = (bl.l1[j] - bl.l0[j]) * tau;
        if (sdn_gs_make_plan((sdn_gs_mode)mode, &in, &plan, &e2)) {
            printf("  %-12s (%s)\n", sdn_gs_mode_name((sdn_gs_mode)mode), e2.msg);
            continue;
        }
        sdn_sched_result r;
        sdn_sched_simulate(&in, &plan, &r);
        double over = r.makespan - base;
        if (mode == SDN_GS_SYNC) sync_over = over;
        char hid[16] = "-", buf[4096] = "";
        if (mode != SDN_GS_SINGLE && sync_over > 0) snprintf(hid, sizeof hid, "%.1f%%", 100 * (1 - over / sync_over));
        if (mode == SDN_GS_PROGRESSIVE || mode == SDN_GS_OPTIMAL) sdn_sched_plan_str(&in, &plan, buf, sizeof buf);
        printf("  %-12s %-10.1f %-10.1f %-8s %-9d %s\n", sdn_gs_mode_name((sdn_gs_mode)mode), 1e3 * r.makespan, 1e3 * over, hid, r.g2_tasks, buf);
    }
    code = 0;
    goto out;
fail:
    fprintf(stderr, "sdnpu: %s\n", err.msg);
out:
    sdn_sched_inst_free(&in);
    sdn_profile_free(p);
    sdn_model_free(m);
    return code;
}
