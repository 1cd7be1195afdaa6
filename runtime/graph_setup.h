/* graph_setup.h - wiring graph scheduling into a generation run (what `sdnpu run --graphs` calls,
 * and what `sdnpu bench` can call): the profile from the cache (measured and cached on
 * first use), the decode graph shape and draft budget from the profile's verify cost curve
 * (graph_sched/budget.h), the runtime created and brought to its initial state, and the context and
 * generation parameters filled in. */
#ifndef SDN_GS_SETUP_H
#define SDN_GS_SETUP_H

#include <stdio.h>

#include "common/sdn_err.h"
#include "engine/forward.h"
#include "modelfile/model.h"
#include "runtime/decode.h"
#include "graph_sched/budget.h"
#include "graph_sched/prefill.h"
#include "graph_sched/profile.h"

typedef struct sdn_gs_options {
    const char *graphs;     /* single | sync | async | progressive | optimal */
    int n_blocks, s1, s2;   /* 0: defaults; s2 = 0: chosen by the verification budget */
    const char *profile_db; /* profile cache file (needed when a profile is) */
    int draft_max;          /* > 0: the caller's draft cap; 0: the budget's draft size */
    double accept;          /* per-token acceptance of the default model (0: SDN_ACCEPT_DEFAULT) */
    int pin;                /* 1: pin the calling thread (and so the context's compute threads created after
                               setup) to CPUs 0..threads-1 and the loader to the others; needs threads below
                               the online CPUs */
} sdn_gs_options;

/* The profile of m with `threads` threads: from the cache file, or measured now (progress
 * lines on log) and saved there. force: measure even when cached. */
int sdn_gs_profile_get(sdn_model *m, int threads, const char *db_path, int n_blocks, int s1, int force, FILE *log, sdn_profile **out,
                       sdn_err *err);

/* Costs for planning from a profile. */
void sdn_gs_costs_from_profile(const sdn_profile *p, sdn_gs_costs *out);

/* Decode shape and draft size from a profile: candidates {s2} when s2 > 0, else the
 * profiled shapes of at least min_shape rows; accept = the geometric model's per-token
 * acceptance (0: plain decoding, one token per step). */
int sdn_gs_budget(const sdn_profile *p, int s2, int min_shape, double accept, sdn_budget *out, sdn_err *err);

/* Set up a run of model m: *out gets a prepared runtime; cp->max_batch is raised to what the
 * prefill graph needs; gp gets the prefill hook, decode_rows and (when o->draft_max is 0)
 * caps.max_nodes = the budget's draft size. The budget uses gp->drafter: with a drafter,
 * shapes of 2 rows or more and the geometric acceptance model; without, one token per step
 * (the cheapest shape). *budget (optional) gets the budget used (shape 0 when no profile
 * was needed). */
int sdn_gs_setup(sdn_model *m, int threads, const sdn_gs_options *o, FILE *log, sdn_ctx_params *cp, sdn_gen_params *gp, sdn_gs **out,
                 sdn_budget *budget, sdn_err *err);

/* Point gp at this graph runtime: the prefill hook (sdn_gs_prefill) and decode_rows = S2. */
void sdn_gs_apply(sdn_gs *gs, sdn_gen_params *gp);

#endif
