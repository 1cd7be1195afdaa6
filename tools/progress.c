/* progress.c - the terminal progress bar (see progress.h). The ETA is the elapsed time per
 * completed unit times the units left; it is shown once one unit is done. */
#include "tools/progress.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/sdn_util.h"

struct sdn_progress {
    FILE *f;
    char label[64];
    long total;
    int active;
    double t0, last;
    size_t last_len;
};

sdn_progress *sdn_progress_new(FILE *f, const char *label, long total, int force) {
    sdn_progress *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->f = f;
    snprintf(p->label, sizeof p->label, "%s", label ? label : "");
    p->total = total;
    p->active = f && (force || isatty(fileno(f)));
    p->t0 = sdn_now();
    p->last = -1;
    return p;
}

static void hms(char *b, size_t cap, double s) {
    if (s < 0) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(b, cap, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else snprintf(b, cap, "%ld:%02ld", t / 60, t % 60);
}

void sdn_progress_format(char *buf, size_t cap, const char *label, long done, long total, double elapsed, const char *note, int width) {
    char bar[128], el[32], eta[32];
    if (width > (int)sizeof bar - 1) width = (int)sizeof bar - 1;
    if (width < 1) width = 1;
    double frac = total > 0 ? (double)done / (double)total : 0;
    if (frac > 1) frac = 1;
    int fill = (int)(frac * width + 1e-9);
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    hms(el, sizeof el, elapsed);
    if (done > 0 && total > done) hms(eta, sizeof eta, elapsed / (double)done * (double)(total - done));
    else snprintf(eta, sizeof eta, done >= total && total > 0 ? "0:00" : "--:--");
    snprintf(buf, cap, "%s [%s] %ld/%ld %3d%%  %s elapsed, ETA %s%s%s", label, bar, done, total, (int)(frac * 100 + 1e-9), el, eta,
             note && note[0] ? "  " : "", note ? note : "");
}

void sdn_progress_update(sdn_progress *p, long done, const char *note) {
    if (!p || !p->active) return;
    double now = sdn_now();
    if (done < p->total && p->last >= 0 && now - p->last < 0.1) return;
    p->last = now;
    char buf[512];
    sdn_progress_format(buf, sizeof buf, p->label, done, p->total, now - p->t0, note, 30);
    size_t len = strlen(buf);
    fprintf(p->f, "\r%s", buf);
    for (size_t i = len; i < p->last_len; i++) fputc(' ', p->f);
    p->last_len = len;
    fflush(p->f);
}

void sdn_progress_end(sdn_progress *p) {
    if (!p) return;
    if (p->active && p->last_len) {
        fputc('\r', p->f);
        for (size_t i = 0; i < p->last_len; i++) fputc(' ', p->f);
        fputc('\r', p->f);
        fflush(p->f);
    }
    free(p);
}
