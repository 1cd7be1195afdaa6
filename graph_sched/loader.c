/* loader.c - the loader thread (see loader.h). Jobs live in a growable array indexed by
 * their id; the thread takes them in order under one mutex and signals a condition
 * variable when each finishes. The load itself runs without the lock. */
#include "graph_sched/loader.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/sdn_util.h"

typedef struct job {
    sdn_loader_job_info info;
    sdn_loader_event ev;
    void *ud;
    int state; /* 0 queued, 1 running, 2 done */
    int rc;
    sdn_err err;
} job;

struct sdn_loader {
    sdn_model *m;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    job *jobs;
    int n, cap, next, stop;
};

static void *loader_main(void *arg) {
    sdn_loader *ld = arg;
    pthread_mutex_lock(&ld->mu);
    for (;;) {
        while (!ld->stop && ld->next >= ld->n) pthread_cond_wait(&ld->wake, &ld->mu);
        if (ld->stop) break;
        int id = ld->next++;
        job *j = &ld->jobs[id];
        j->state = 1;
        sdn_loader_event ev = j->ev;
        void *ud = j->ud;
        int l0 = j->info.l0, l1 = j->info.l1;
        sdn_layout which = j->info.which;
        pthread_mutex_unlock(&ld->mu);

        if (ev) ev(ud, id, 0);
        double t0 = sdn_now();
        size_t bytes = 0;
        sdn_err e = {0};
        int rc = sdn_layout_load(ld->m, l0, l1, which, &bytes, &e);
        double t1 = sdn_now();
        if (ev) ev(ud, id, 1);

        pthread_mutex_lock(&ld->mu);
        j = &ld->jobs[id]; /* the array may have moved */
        j->info.t_start = t0;
        j->info.t_end = t1;
        j->info.bytes = bytes;
        j->rc = rc;
        j->err = e;
        j->state = 2;
        pthread_cond_broadcast(&ld->done);
    }
    pthread_mutex_unlock(&ld->mu);
    return NULL;
}

int sdn_loader_new(sdn_model *m, sdn_loader **out, sdn_err *err) {
    *out = NULL;
    sdn_loader *ld = calloc(1, sizeof *ld);
    if (!ld) return sdn_fail(err, SDN_ENOMEM, "loader: out of memory");
    ld->m = m;
    pthread_mutex_init(&ld->mu, NULL);
    pthread_cond_init(&ld->wake, NULL);
    pthread_cond_init(&ld->done, NULL);
    if (pthread_create(&ld->th, NULL, loader_main, ld) != 0) {
        pthread_mutex_destroy(&ld->mu);
        pthread_cond_destroy(&ld->wake);
        pthread_cond_destroy(&ld->done);
        free(ld);
        return sdn_fail(err, SDN_ENOMEM, "loader: cannot start the loader thread");
    }
    *out = ld;
    return SDN_OK;
}

void sdn_loader_free(sdn_loader *ld) {
    if (!ld) return;
    pthread_mutex_lock(&ld->mu);
    ld->stop = 1;
    pthread_cond_broadcast(&ld->wake);
    pthread_mutex_unlock(&ld->mu);
    pthread_join(ld->th, NULL);
    pthread_mutex_destroy(&ld->mu);
    pthread_cond_destroy(&ld->wake);
    pthread_cond_destroy(&ld->done);
    free(ld->jobs);
    free(ld);
}

int sdn_loader_pin(sdn_loader *ld, int cpu0, int n, sdn_err *err) {
    int rc = sdn_pin_thread(ld->th, cpu0, n, err);
    return rc ? sdn_fail(err, rc, "loader: pinning the loader thread") : SDN_OK;
}

int sdn_loader_submit(sdn_loader *ld, int l0, int l1, sdn_layout which, sdn_loader_event ev, void *ud, int *id, sdn_err *err) {
    const sdn_model_config *cfg = sdn_model_cfg(ld->m);
    if (l0 < 0 || l1 > cfg->n_layers || l0 >= l1) return sdn_fail(err, SDN_EINVAL, "loader: layer range [%d, %d) invalid", l0, l1);
    pthread_mutex_lock(&ld->mu);
    if (ld->n == ld->cap) {
        int cap = ld->cap ? 2 * ld->cap : 64;
        job *nj = realloc(ld->jobs, (size_t)cap * sizeof *nj);
        if (!nj) {
            pthread_mutex_unlock(&ld->mu);
            return sdn_fail(err, SDN_ENOMEM, "loader: out of memory");
        }
        ld->jobs = nj;
        ld->cap = cap;
    }
    job *j = &ld->jobs[ld->n];
    memset(j, 0, sizeof *j);
    j->info.t_submit = sdn_now();
    j->info.l0 = l0;
    j->info.l1 = l1;
    j->info.which = which;
    j->ev = ev;
    j->ud = ud;
    *id = ld->n++;
    pthread_cond_signal(&ld->wake);
    pthread_mutex_unlock(&ld->mu);
    return SDN_OK;
}

int sdn_loader_wait(sdn_loader *ld, int id, sdn_loader_job_info *info, sdn_err *err) {
    pthread_mutex_lock(&ld->mu);
    if (id < 0 || id >= ld->n) {
        pthread_mutex_unlock(&ld->mu);
        return sdn_fail(err, SDN_EINVAL, "loader: no job %d", id);
    }
    while (ld->jobs[id].state != 2) pthread_cond_wait(&ld->done, &ld->mu);
    job j = ld->jobs[id];
    pthread_mutex_unlock(&ld->mu);
    if (info) *info = j.info;
    if (j.rc) return sdn_fail(err, j.rc, "%s", j.err.msg);
    return SDN_OK;
}

int sdn_loader_done(sdn_loader *ld, int id) {
    pthread_mutex_lock(&ld->mu);
    int d = id >= 0 && id < ld->n && ld->jobs[id].state == 2;
    pthread_mutex_unlock(&ld->mu);
    return d;
}

int sdn_loader_wait_all(sdn_loader *ld, sdn_err *err) {
    int rc = SDN_OK;
    int n = sdn_loader_count(ld);
    for (int i = 0; i < n; i++) {
        int r = sdn_loader_wait(ld, i, NULL, rc ? NULL : err);
        if (r && !rc) rc = r;
    }
    return rc;
}

int sdn_loader_count(sdn_loader *ld) {
    pthread_mutex_lock(&ld->mu);
    int n = ld->n;
    pthread_mutex_unlock(&ld->mu);
    return n;
}

int sdn_loader_reset(sdn_loader *ld, sdn_err *err) {
    pthread_mutex_lock(&ld->mu);
    for (int i = 0; i < ld->n; i++)
        if (ld->jobs[i].state != 2) {
            pthread_mutex_unlock(&ld->mu);
            return sdn_fail(err, SDN_ESTATE, "loader: job %d is still %s", i, ld->jobs[i].state ? "running" : "queued");
        }
    ld->n = ld->next = 0;
    pthread_mutex_unlock(&ld->mu);
    return SDN_OK;
}
