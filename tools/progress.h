/* progress.h - a one-line progress bar for long runs (requests done / total, elapsed, ETA)
 * drawn on a terminal with carriage returns, at most ten times a second. When the stream
 * is not a terminal (a pipe, a file, CI logs) it prints nothing at all. */
#ifndef SDN_PROGRESS_H
#define SDN_PROGRESS_H

#include <stdio.h>

typedef struct sdn_progress sdn_progress;

/* A bar on `f` for `total` units labelled `label` (copied). force: draw even when f is
 * not a terminal (tests); otherwise the bar is silent unless isatty(fileno(f)). Returns
 * NULL on allocation failure (every function accepts NULL and does nothing). */
sdn_progress *sdn_progress_new(FILE *f, const char *label, long total, int force);
/* Record that `done` units are complete; `note` (may be NULL) is shown after the counts. */
void sdn_progress_update(sdn_progress *p, long done, const char *note);
/* Erase the bar (the line is cleared so later output starts clean) and free it. */
void sdn_progress_end(sdn_progress *p);
/* Format the bar text for done/total after `elapsed` seconds into buf (exposed for
 * tests): "label [#####.....] 12/40  30%  0:12 elapsed, ETA 0:28  note". */
void sdn_progress_format(char *buf, size_t cap, const char *label, long done, long total, double elapsed, const char *note, int width);

#endif
