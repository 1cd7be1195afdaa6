/* schedule.h - the graph-switch scheduling problem and its schedulers (docs/graphs.md has
 * the full statement).
 *
 * Prefill runs C chunks through N blocks of layers in chunk-major order: task (c, j) is
 * chunk c on block j, at position p = c*N + j of a sequence of P = C*N tasks. Boundary e
 * (0..P) is the moment before task e (e = P: after the last task). Every block starts on
 * its prefill graph G1; after prefill every block must be on its decode graph G2. One
 * loader loads G2 layouts one at a time, overlapped with the computation. A block runs
 * task (c, j) on G1 (time g1) before its switch and on G2 (time g2, usually slower for
 * prefill) after it. Switching block j at boundary e waits until its G2 load is complete
 * and then frees its G1 layout.
 *
 * A plan is a list of loads in loader order; load i of block b is issued at boundary
 * `issue` and the block switches at boundary `sw` (issue <= sw). The loader starts a load
 * at max(time of its issue, end of the previous load). At a boundary, the switches of loads
 * issued earlier come first (so a block's G1 is freed before the next load starts), then
 * the loads issued there, then the switches of loads issued there. The objective is the prefill
 * makespan: the time at which every task has run and every planned block has switched
 * (= time to first token minus the first decode step, which is the same for all plans).
 *
 * Schedulers:
 *   sync         all loads issued and switched after the last task (every load exposed);
 *   async        block j's load issued right after its last task (c = C-1), all switches
 *                at the end;
 *   progressive  the greedy rule: blocks switch in index order (block 0, which finishes
 *                its last chunk first, switches first). Windows are built backwards from
 *                the end of prefill, starting with the last block: block j's load window
 *                is the smallest run of k consecutive tasks just before the next block's
 *                window whose predicted compute time covers the load time (tasks of blocks
 *                already switched at that point counted at their G2 cost); the block
 *                switches at the end of its window and runs the rest of prefill on G2.
 *   optimal      exact optimum over all window plans (any block order, any windows, idle
 *                loader allowed) by exhaustive search with memoization over (set of switched
 *                blocks, boundary): N <= SDN_SCHED_OPT_MAX_BLOCKS.
 * Window plans (progressive, optimal) keep at most one block holding both layouts: the next
 * load is issued when the previous block switches. */
#ifndef SDN_SCHEDULE_H
#define SDN_SCHEDULE_H

#include "common/sdn_err.h"

#define SDN_SCHED_MAX_BLOCKS 128
#define SDN_SCHED_OPT_MAX_BLOCKS 14

/* A problem instance (owned arrays). */
typedef struct sdn_sched_inst {
    int n_blocks, n_chunks;
    double *g1;   /* [n_chunks * n_blocks]: time of task (c, j) on G1, index c*n_blocks + j */
    double *g2;   /* [n_chunks * n_blocks]: time of task (c, j) on G2 */
    double *load; /* [n_blocks]: G2 load time of block j */
} sdn_sched_inst;

int sdn_sched_inst_init(sdn_sched_inst *in, int n_blocks, int n_chunks, sdn_err *err);
void sdn_sched_inst_free(sdn_sched_inst *in);

typedef struct sdn_sched_load {
    int block;
    int issue; /* boundary at which the load is issued */
    int sw;    /* boundary at which the block switches to G2 (waits for the load) */
} sdn_sched_load;

typedef struct sdn_sched_plan {
    int n;                                     /* loads (0: nothing switches) */
    sdn_sched_load item[SDN_SCHED_MAX_BLOCKS]; /* in loader order */
} sdn_sched_plan;

/* Check a plan against an instance: blocks distinct and in range, 0 <= issue <= sw <= P,
 * issues non-decreasing in loader order. */
int sdn_sched_plan_check(const sdn_sched_inst *in, const sdn_sched_plan *p, sdn_err *err);

/* Predicted outcome of a plan (the event semantics above). */
typedef struct sdn_sched_result {
    double makespan;    /* prefill end: all tasks run, all planned blocks switched */
    double compute;     /* sum of task times as run (G1 or G2) */
    double stall;       /* time waiting for loads at switch boundaries */
    double load_total;  /* sum of load times */
    int g2_tasks;       /* tasks run on G2 */
} sdn_sched_result;

/* Simulate plan p on instance in (p must pass sdn_sched_plan_check). */
void sdn_sched_simulate(const sdn_sched_inst *in, const sdn_sched_plan *p, sdn_sched_result *out);

/* The schedulers. All blocks are switched by the end of every plan. */
void sdn_sched_sync(const sdn_sched_inst *in, sdn_sched_plan *out);
void sdn_sched_async(const sdn_sched_inst *in, sdn_sched_plan *out);
void sdn_sched_progressive(const sdn_sched_inst *in, sdn_sched_plan *out);
/* Exact optimum over window plans; *makespan gets its value. SDN_EINVAL when N is too large. */
int sdn_sched_optimal(const sdn_sched_inst *in, sdn_sched_plan *out, double *makespan, sdn_err *err);
/* The same optimum by plain enumeration of every block order and every sequence of window
 * boundaries, each plan evaluated by sdn_sched_simulate (independent check of
 * sdn_sched_optimal; exponential: N <= 5 and small P only). */
int sdn_sched_enumerate(const sdn_sched_inst *in, sdn_sched_plan *out, double *makespan, sdn_err *err);

/* Short human-readable listing of a plan ("b0: load @3 -> switch @5; ...") into buf. */
void sdn_sched_plan_str(const sdn_sched_inst *in, const sdn_sched_plan *p, char *buf, int cap);

#endif
