/* latency.c - least-squares fit of the latency model (see latency.h). Householder QR on
 * the column-scaled design matrix, then back substitution. */
#include "graph_sched/latency.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double sdn_lat_eval(const sdn_lat_model *m, double rows, double kv_base) {
    return m->alpha + m->beta * rows + m->kappa * rows * kv_base;
}

int sdn_lsq(const double *X, const double *y, int n, int k, double *p, sdn_err *err) {
    if (k < 1 || k > 4 || n < k) return sdn_fail(err, SDN_EINVAL, "least squares: %d points for %d parameters", n, k);
    double *A = malloc((size_t)n * k * sizeof(double)), *b = malloc((size_t)n * sizeof(double));
    if (!A || !b) {
        free(A);
        free(b);
        return sdn_fail(err, SDN_ENOMEM, "least squares: out of memory");
    }
    memcpy(A, X, (size_t)n * k * sizeof(double));
    memcpy(b, y, (size_t)n * sizeof(double));
    double scale[4];
    for (int j = 0; j < k; j++) {
        double s = 0;
        for (int i = 0; i < n; i++) s += A[i * k + j] * A[i * k + j];
        s = sqrt(s);
        if (!(s > 0)) {
            free(A);
            free(b);
            return sdn_fail(err, SDN_EINVAL, "least squares: regressor %d is zero at every point", j);
        }
        scale[j] = s;
        for (int i = 0; i < n; i++) A[i * k + j] /= s;
    }
    int rc = SDN_OK;
    for (int j = 0; j < k; j++) {
        /* Householder reflection zeroing A[j+1.., j] */
        double norm = 0;
        for (int i = j; i < n; i++) norm += A[i * k + j] * A[i * k + j];
        norm = sqrt(norm);
        if (norm < 1e-10) {
            rc = sdn_fail(err, SDN_EINVAL, "least squares: the regressors are linearly dependent (column %d)", j);
            break;
        }
        double alpha = A[j * k + j] > 0 ? -norm : norm;
        double v0 = A[j * k + j] - alpha, vnorm2 = v0 * v0;
        for (int i = j + 1; i < n; i++) vnorm2 += A[i * k + j] * A[i * k + j];
        if (vnorm2 > 0) {
            /* v = (v0, A[j+1..n-1, j]); apply H = I - 2 v v^T / |v|^2 to remaining columns and b */
            for (int c = j + 1; c < k; c++) {
                double d = v0 * A[j * k + c];
                for (int i = j + 1; i < n; i++) d += A[i * k + j] * A[i * k + c];
                double f = 2 * d / vnorm2;
                A[j * k + c] -= f * v0;
                for (int i = j + 1; i < n; i++) A[i * k + c] -= f * A[i * k + j];
            }
            double d = v0 * b[j];
            for (int i = j + 1; i < n; i++) d += A[i * k + j] * b[i];
            double f = 2 * d / vnorm2;
            b[j] -= f * v0;
            for (int i = j + 1; i < n; i++) b[i] -= f * A[i * k + j];
        }
        A[j * k + j] = alpha;
    }
    if (!rc)
        for (int j = k - 1; j >= 0; j--) {
            double s = b[j];
            for (int c = j + 1; c < k; c++) s -= A[j * k + c] * p[c];
            p[j] = s / A[j * k + j];
        }
    if (!rc)
        for (int j = 0; j < k; j++) p[j] /= scale[j];
    free(A);
    free(b);
    return rc;
}

int sdn_lat_fit(const double *rows, const double *kv, const double *t, int n, int with_kv, sdn_lat_model *out, sdn_err *err) {
    memset(out, 0, sizeof *out);
    int k = with_kv ? 3 : 2;
    double *X = malloc((size_t)n * 3 * sizeof(double));
    if (!X) return sdn_fail(err, SDN_ENOMEM, "latency fit: out of memory");
    for (int i = 0; i < n; i++) {
        X[i * k + 0] = 1;
        X[i * k + 1] = rows[i];
        if (with_kv) X[i * k + 2] = rows[i] * (kv ? kv[i] : 0);
    }
    double p[3] = {0, 0, 0};
    int rc = sdn_lsq(X, t, n, k, p, err);
    free(X);
    if (rc) return sdn_fail(err, rc, "latency fit");
    out->alpha = p[0];
    out->beta = p[1];
    out->kappa = with_kv ? p[2] : 0;
    out->n_points = n;
    double mean = 0, ss_tot = 0, ss_res = 0, worst = 0;
    for (int i = 0; i < n; i++) mean += t[i];
    mean /= n;
    for (int i = 0; i < n; i++) {
        double f = sdn_lat_eval(out, rows[i], kv ? kv[i] : 0), r = f - t[i];
        ss_res += r * r;
        ss_tot += (t[i] - mean) * (t[i] - mean);
        double rel = t[i] > 0 ? fabs(r) / t[i] : 0;
        if (rel > worst) worst = rel;
    }
    out->r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 1;
    out->max_rel_err = worst;
    return SDN_OK;
}
