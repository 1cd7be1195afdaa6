/* loader.h - the loader thread: a pthread that materializes weight layouts (layout.h) for
 * ranges of layers, one job at a time in submission order, while the caller's thread keeps
 * computing other layers. A job's start and end times are recorded, so the caller can
 * measure how much of the load it waited for. Unloading stays on the caller's thread (it
 * must never free a layout a running computation uses, and only the caller knows). */
#ifndef SDN_LOADER_H
#define SDN_LOADER_H

#include <stddef.h>

#include "common/sdn_err.h"
#include "engine/layout.h"
#include "modelfile/model.h"

typedef struct sdn_loader sdn_loader;

/* Called on the loader thread when a job starts (done = 0) and when it ends (done = 1). */
typedef void (*sdn_loader_event)(void *ud, int job, int done);

/* Start the loader thread for model m. */
int sdn_loader_new(sdn_model *m, sdn_loader **out, sdn_err *err);
/* Finish the running job, drop queued ones, stop and join the thread. */
void sdn_loader_free(sdn_loader *ld);

/* Pin the loader thread to CPUs [cpu0, cpu0 + n) (e.g. the cores the computation leaves
 * free, the CPU analogue of loading on a different resource than the accelerator computes
 * on). SDN_EINVAL naming the range when it is outside the online CPUs. */
int sdn_loader_pin(sdn_loader *ld, int cpu0, int n, sdn_err *err);

/* Queue a load of layout `which` for layers [l0, l1); *job gets its id (ids count up from 0
 * since the last sdn_loader_reset). `ev` (optional) is called on the loader thread. */
int sdn_loader_submit(sdn_loader *ld, int l0, int l1, sdn_layout which, sdn_loader_event ev, void *ud, int *job, sdn_err *err);

typedef struct sdn_loader_job_info {
    double t_submit, t_start, t_end; /* sdn_now() times */
    size_t bytes;                    /* bytes the load allocated */
    int l0, l1;
    sdn_layout which;
} sdn_loader_job_info;

/* Block until job `job` has finished; its outcome (the load's status and message) is
 * returned, and its times in *info (optional). */
int sdn_loader_wait(sdn_loader *ld, int job, sdn_loader_job_info *info, sdn_err *err);
/* 1 when job `job` has finished (no blocking). */
int sdn_loader_done(sdn_loader *ld, int job);
/* Wait for every submitted job; returns the first failure. */
int sdn_loader_wait_all(sdn_loader *ld, sdn_err *err);
/* Number of jobs submitted since the last reset. */
int sdn_loader_count(sdn_loader *ld);
/* Forget finished jobs (ids restart at 0). SDN_ESTATE when jobs are still queued or running. */
int sdn_loader_reset(sdn_loader *ld, sdn_err *err);

#endif
