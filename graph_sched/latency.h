/* latency.h - the few-shot latency model of a graph and its least-squares fit.
 *
 * Per layer, a graph of S rows at KV base B takes
 *     t(S, B) = alpha + beta * S + kappa * S * B
 * The first two terms are the SimFLi form: for the prefill graph t = (b + S) / a, a
 * saturating throughput a * S / (b + S) tokens/s (a = 1/beta tokens/s at large S, b =
 * alpha/beta the fixed cost in token-equivalents); for the decode graph t = S / c + d
 * (c = 1/beta, d = alpha). The third term is attention over the B earlier KV entries (each
 * of the S rows reads B keys and values); it is fitted only when the measurements span more
 * than one KV base.
 *
 * Fitting: ordinary least squares on the measured (S, B, t) points, solved by Householder
 * QR of the design matrix [1, S, S*B] with its columns scaled to unit norm (no normal
 * equations, so no squared condition number). Quality: R^2 = 1 - SS_res / SS_tot and the
 * largest relative error |t_fit - t| / t over the fitted points. */
#ifndef SDN_LATENCY_H
#define SDN_LATENCY_H

#include "common/sdn_err.h"

typedef struct sdn_lat_model {
    double alpha, beta, kappa; /* seconds, seconds/row, seconds/(row * KV entry) */
    double r2;                 /* coefficient of determination over the fitted points */
    double max_rel_err;        /* largest |fit - measured| / measured over the fitted points */
    int n_points;
} sdn_lat_model;

/* Predicted seconds of one layer for a graph of `rows` rows at KV base kv_base. */
double sdn_lat_eval(const sdn_lat_model *m, double rows, double kv_base);

/* Fit the model to n points (rows[i], kv[i], t[i]). with_kv = 0 fits alpha and beta only
 * (kappa = 0). Needs at least as many points with distinct regressors as parameters. */
int sdn_lat_fit(const double *rows, const double *kv, const double *t, int n, int with_kv, sdn_lat_model *out, sdn_err *err);

/* Least squares: p (k values) minimizing |X p - y| for X n x k (row-major), k <= 4, n >= k.
 * SDN_EINVAL when X is rank deficient. */
int sdn_lsq(const double *X, const double *y, int n, int k, double *p, sdn_err *err);

#endif
