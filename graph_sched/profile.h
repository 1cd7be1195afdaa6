/* profile.h - offline profiling of the graphs on this machine, the fitted latency models,
 * and the SQLite profile cache.
 *
 * Warm-up runs measure, per block of layers: the load time of each layout (G1: dequantize
 * to F32; G2: copy the quantized rows), alone and, for G2, on the loader thread while the
 * main thread computes G1 of another block (what a switching schedule sees: the load
 * competes with the computation for the cores; the G1 time meanwhile is kept too, to show
 * the contention), and the compute time of G1 and G2 at a few input
 * lengths (plus held-out lengths never used for fitting) and at a few KV bases; and, for
 * the whole model, one decode-graph step (all layers + LM head) per candidate shape S with
 * 1 and S logit rows (the verify cost curve). From these, per layer:
 *   G1: t = alpha + beta*S + kappa*S*B   ((b + S)/a with a = 1/beta, b = alpha/beta)
 *   G2: t = alpha + beta*S + kappa*S*B   (S/c + d with c = 1/beta, d = alpha)
 *   loads: t = layers * tau (tau = sum of block times / sum of block layers), alone and
 *          overlapped
 *   verify step: T(S, k) = v0 + v1*S + v2*k   (S graph rows, k logit rows)
 * all by least squares (latency.h) on points pooled over the blocks (for each measured
 * (S, B), the median over the blocks of seconds per layer), with R^2, the largest relative
 * error over the fitted points and the largest relative error at the held-out lengths
 * (pooled the same way) against the model.
 *
 * Profiles are cached in an SQLite file keyed by (model fingerprint, threads, machine);
 * the machine id is the CPU model name from /proc/cpuinfo and the online core count. A file
 * that is not SQLite, is damaged, or belongs to another application is refused with a
 * message naming it. */
#ifndef SDN_PROFILE_H
#define SDN_PROFILE_H

#include <stddef.h>
#include <stdio.h>

#include "common/sdn_err.h"
#include "modelfile/model.h"
#include "graph_sched/latency.h"

typedef struct sdn_profile_opts {
    int n_blocks;  /* blocks measured (0: 8) */
    int s1;        /* prefill graph size: KV bases are 0, s1, 2*s1, 3*s1 (0: 256) */
    int reps;      /* repetitions of loads (median kept), KV-base points and decode steps (minimum kept) (0: 3) */
    int g1_lens[8], n_g1;       /* fitted G1 lengths (n_g1 = 0: 32 64 128 256, capped at s1) */
    int g1_hold[8], n_g1_hold;  /* held-out G1 lengths (0: 48 96 192) */
    int g2_lens[8], n_g2;       /* fitted G2 lengths (0: 8 16 32 64) */
    int g2_hold[8], n_g2_hold;  /* held-out G2 lengths (0: 12 24 48) */
    int shapes[8], n_shapes;    /* decode-graph shapes for the verify curve (0: 1 4 8 16 32 64) */
    FILE *log;                  /* progress lines (NULL: quiet) */
} sdn_profile_opts;

/* What a measurement measured. The values are stored by name in the profile cache
 * (profile_db.c: sdn_profile_kind_name). */
typedef enum sdn_profile_kind {
    SDN_PROF_NONE = 0,
    SDN_PROF_G1_COMPUTE = 1,             /* G1 of a block at `rows` rows, KV base kv_base */
    SDN_PROF_G2_COMPUTE = 2,             /* G2 of a block */
    SDN_PROF_G1_LOAD = 3,                /* loading a block's G1 (F32) layout alone */
    SDN_PROF_G2_LOAD = 4,                /* loading a block's G2 (quantized) layout alone */
    SDN_PROF_VERIFY_STEP = 5,            /* one whole-model decode step of shape `rows` with kv_base logit rows */
    SDN_PROF_G2_LOAD_OVERLAPPED = 6,     /* G2 load on the loader thread while the main thread computes G1 */
    SDN_PROF_G1_COMPUTE_DURING_LOAD = 7, /* that G1 computation (of another block) */
} sdn_profile_kind;
#define SDN_PROF_KINDS 8 /* kinds are 1 .. SDN_PROF_KINDS - 1 */

/* "g1_compute", "g2_compute", "g1_load", "g2_load", "verify_step", "g2_load_overlapped",
 * "g1_compute_during_load"; "" for SDN_PROF_NONE and values out of range. */
const char *sdn_profile_kind_name(sdn_profile_kind k);

typedef struct sdn_profile_meas {
    int block;    /* -1: whole model (verify steps) */
    sdn_profile_kind kind;
    int rows;     /* graph rows (compute), decode shape S (verify) */
    int kv_base;  /* KV base (compute), logit rows k (verify) */
    int held_out; /* 1: not used for fitting */
    double seconds;
    double bytes; /* loads */
} sdn_profile_meas;

typedef struct sdn_profile {
    char fingerprint[17];
    int threads;
    char machine[160];
    int n_layers, n_blocks, s1;
    int l0[128], l1[128]; /* the measured blocks */
    sdn_profile_meas *meas;
    int n_meas;
    sdn_lat_model g1, g2;           /* per layer */
    double g1_hold_err, g2_hold_err; /* largest relative error at held-out lengths */
    double tau_g1, tau_g2;           /* load seconds per layer (alone) */
    double tau_g2_ovl;               /* G2 load seconds per layer overlapped with G1 compute */
    double load_g1_err, load_g2_err, load_g2_ovl_err; /* largest relative errors of the per-block load predictions */
    double verify[3];                /* T(S, k) = verify[0] + verify[1]*S + verify[2]*k */
    double verify_r2, verify_err;
} sdn_profile;

void sdn_profile_opts_default(sdn_profile_opts *o);
/* Measure model m with `threads` threads and fit. Leaves no layout loaded that was not
 * loaded before, except that G1 and G2 of every layer end up unloaded. */
int sdn_profile_measure(sdn_model *m, int threads, const sdn_profile_opts *o, sdn_profile **out, sdn_err *err);
void sdn_profile_free(sdn_profile *p);
/* Fit the models from p->meas (after measuring or loading raw measurements). */
int sdn_profile_fit(sdn_profile *p, sdn_err *err);

/* Seconds of one decode step of shape S with k logit rows: the measured steps of that
 * shape interpolated in k, else the fitted T(S, k). */
double sdn_profile_verify(const sdn_profile *p, int shape, int k);

/* "CPU model name x cores" of this machine. */
void sdn_machine_id(char *buf, size_t cap);

/* Save p (replacing an older profile of the same key; the file is created when absent) /
 * load the profile of a key: *out = NULL (and SDN_OK) when the file is absent or has none. */
int sdn_profile_db_save(const char *path, const sdn_profile *p, sdn_err *err);
int sdn_profile_db_load(const char *path, const char *fingerprint, int threads, const char *machine, sdn_profile **out, sdn_err *err);

/* Print the measurements per block, the fits and their quality. */
void sdn_profile_print(const sdn_profile *p, FILE *f);

#endif
