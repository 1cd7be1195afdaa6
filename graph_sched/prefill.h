/* prefill.h - chunked prefill through fixed-shape graphs, switching block by block from the
 * prefill graphs G1 to the decode graphs G2 while prefill still runs; plugged into the
 * session as its prefill hook (sdn_gen_params.prefill), with decoding on the fixed G2 shape
 * (sdn_gen_params.decode_rows = S2).
 *
 * State: a run starts with every block on G1 (F32 layout resident, quantized layout not:
 * sdn_gs_prepare brings the model there, outside the timed run, the setting of the design)
 * and ends with every block on G2 and every G1 layout freed (decoding uses only G2).
 * Modes:
 *   single       no switching: both layouts resident from the start (twice the memory);
 *                prefill on G1, decoding on G2. The baseline a switching run is compared to.
 *   sync         after the last chunk, load every block's G2 (exposed), free G1.
 *   async        block j's G2 load is queued on the loader thread right after block j's
 *                last-chunk computation (its G1 is freed then); the run ends when all loads
 *                are done.
 *   progressive  the greedy plan of schedule.h on the profiled costs: a block switches at the
 *                end of its load window and runs its remaining chunks on G2, over S2-row
 *                sub-chunks.
 *   optimal      the exact optimum of schedule.h on the same costs (small N), for evaluation.
 * Loads run on a real loader thread (loader.h) that competes with the computation for the
 * cores. A block's G1 is freed as soon as it switches or has run its last chunk.
 *
 * Results: decode steps always run the G2 kernels, so runs whose prefill used the same
 * kernels for every row give bit-identical output: single, sync and async (prefill fully on
 * G1) are bit-identical. A progressive run computes some rows with G2 instead of G1, equal
 * within float tolerance (docs/graphs.md states the tolerance the tests hold). */
#ifndef SDN_PREFILL_H
#define SDN_PREFILL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/sdn_err.h"
#include "engine/forward.h"
#include "modelfile/model.h"
#include "engine/forward.h"
#include "graph_sched/graph.h"
#include "graph_sched/latency.h"
#include "graph_sched/schedule.h"

typedef enum sdn_gs_mode { SDN_GS_SINGLE = 0, SDN_GS_SYNC, SDN_GS_ASYNC, SDN_GS_PROGRESSIVE, SDN_GS_OPTIMAL } sdn_gs_mode;

/* "single", "sync", "async", "progressive", "optimal" */
int sdn_gs_mode_parse(const char *s, sdn_gs_mode *out, sdn_err *err);
const char *sdn_gs_mode_name(sdn_gs_mode m);

/* Predicted costs per layer (from a profile: profile.h) used to plan. */
typedef struct sdn_gs_costs {
    sdn_lat_model g1, g2; /* seconds of one layer at S rows, KV base B */
    double load_g2;       /* seconds to load one layer's G2 layout alone (sync's loads) */
    double load_g2_ovl;   /* ... on the loader thread while the main thread computes (0: load_g2) */
} sdn_gs_costs;

#define SDN_GS_DEFAULT_BLOCKS 8
#define SDN_GS_DEFAULT_S1 256
#define SDN_GS_DEFAULT_S2 32

typedef struct sdn_gs_config {
    sdn_gs_mode mode;
    int n_blocks;              /* 0: SDN_GS_DEFAULT_BLOCKS (capped at the layer count) */
    int s1;                    /* prefill graph rows (0: SDN_GS_DEFAULT_S1) */
    int s2;                    /* decode graph rows, 1..64 (0: SDN_GS_DEFAULT_S2) */
    const sdn_gs_costs *costs; /* needed by progressive and optimal; otherwise optional (predicted times) */
    int pin;                   /* > 0: the computation runs on CPUs [0, pin) (the caller pins itself, sdn_pin_self,
                                  before creating its context); the loader thread is pinned to the other CPUs.
                                  Needs pin < the online CPUs. 0: no pinning */
} sdn_gs_config;

typedef struct sdn_gs sdn_gs;

typedef struct sdn_gs_stats {
    sdn_gs_mode mode;
    int n_tokens, n_blocks, n_chunks, s1, s2;
    double t_prefill;   /* wall time of the scheduled prefill */
    double t_compute;   /* main thread: embedding, graph runs, prefill top-k head */
    double t_g1, t_g2;  /* parts of t_compute: block tasks run on G1, on G2 */
    double t_wait;      /* main thread waiting for G2 loads (at switches and at the end) */
    double t_wait_end;  /* the part of t_wait after the last task */
    double t_load;      /* loader busy time: sum of the G2 load durations */
    double t_unload;    /* freeing G1 layouts */
    double t_prepare;   /* restoring the initial state inside the run (0 when prepared before) */
    double predicted;   /* the plan's predicted makespan (0 without costs) */
    int g1_tasks, g2_tasks, g2_passes; /* block x chunk tasks per graph; G2 sub-chunk passes */
    long rows_real, rows_run;          /* real rows vs rows computed incl. padding (summed over blocks) */
    size_t bytes_prefill_peak;         /* peak resident layer weights (G1 + G2) before the first load */
    size_t bytes_switch_peak;          /* ... from the first load until the last switch */
    size_t bytes_decode;               /* ... held after prefill, for decoding */
    int max_both;                      /* most blocks holding both layouts at once */
    sdn_sched_plan plan;               /* the plan that ran */
    double load_t0[SDN_SCHED_MAX_BLOCKS], load_t1[SDN_SCHED_MAX_BLOCKS]; /* plan item i's load on the loader (sdn_now()) */
} sdn_gs_stats;

/* One block task of the last prefill (see sdn_gs_timeline). */
typedef struct sdn_gs_task_time {
    double t0, t1; /* sdn_now() at the start and end of the graph run */
    int g2;        /* ran on G2 (its block had switched) */
    int loading;   /* the loader was loading during part of the task */
} sdn_gs_task_time;

/* Create the runtime for model m (starts the loader thread). Does not load anything. */
int sdn_gs_new(sdn_model *m, const sdn_gs_config *cfg, sdn_gs **out, sdn_err *err);
/* Stop the loader thread and free the runtime (layouts stay as they are). */
void sdn_gs_free(sdn_gs *gs);
/* Bring the model to the initial state of a run (see above): every G1 layout loaded (half
 * of the layers on the loader thread), G2 unloaded (single: loaded too), and for the
 * switching modes a layout reserve of the largest block's G2 bytes, faulted in, for the
 * loads to copy into (engine/layout.h); untimed setup. */
int sdn_gs_prepare(sdn_gs *gs, sdn_err *err);
/* The prefill hook (sdn_prefill_fn): ud is the sdn_gs. The context needs max batch >=
 * sdn_gs_min_batch() and room for the padded chunks (sdn_gs_kv_need()). n = 0 (nothing to
 * prefill) only switches every block to G2. */
int sdn_gs_prefill(void *ud, sdn_ctx *c, const int32_t *tokens, int n, int topk, const int32_t *vocab, int n_vocab, int32_t *tok,
                   float *prob, sdn_err *err);
int sdn_gs_min_batch(const sdn_gs *gs);
/* KV slots a prefill of n tokens starting at KV length kv0 writes (padding included). */
int sdn_gs_kv_need(const sdn_gs *gs, int kv0, int n);
const sdn_blocks *sdn_gs_blocks(const sdn_gs *gs);
int sdn_gs_s1(const sdn_gs *gs);
int sdn_gs_s2(const sdn_gs *gs);
/* Statistics of the last prefill. */
const sdn_gs_stats *sdn_gs_last(const sdn_gs *gs);
/* Timeline of the last prefill: task (c, j) at index c * n_blocks + j; *n gets the task
 * count (chunks x blocks). Valid until the next prefill. Comparing a task's time with the
 * same task in a run that never switches (single) separates what a load costs the
 * computation it overlaps (contention) from run-to-run noise in the rest of the run. */
const sdn_gs_task_time *sdn_gs_timeline(const sdn_gs *gs, int *n);

/* The scheduling instance of a prefill of n tokens at KV length kv0 under the costs, for
 * `mode`: sync loads after the computation, so its loads take load_g2; the other modes
 * overlap them with computation (load_g2_ovl). */
int sdn_gs_instance(const sdn_blocks *bl, const sdn_gs_costs *costs, sdn_gs_mode mode, int s1, int s2, int n, int kv0, sdn_sched_inst *out,
                    sdn_err *err);
/* The plan `mode` makes for that instance (single: no loads). */
int sdn_gs_make_plan(sdn_gs_mode mode, const sdn_sched_inst *in, sdn_sched_plan *out, sdn_err *err);

/* One line of statistics ("[graphs progressive] ..."). */
void sdn_gs_stats_print(const sdn_gs_stats *s, FILE *f);

#endif
