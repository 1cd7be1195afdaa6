/* ds_cli.c - see ds_cli.h. */
#include "cli/ds_cli.h"
#include "tools/bench_util.h"

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sdnpu.h"

const char *dscli_shared(void) {
    static char path[PATH_MAX];
    static int done;
    static const char *res;
    if (done) return res;
    done = 1;
    char exe[PATH_MAX] = "";
    ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (l > 0) exe[l] = 0;
    char *exedir = l > 0 ? dirname(exe) : NULL;
    /* the program lies in BUILD/ (BUILD = SOURCE/build): ../shared beside the source tree is
     * EXEDIR/../../shared; nothing further up (it could be an unrelated folder) */
    char c1[PATH_MAX], src[PATH_MAX];
    snprintf(c1, sizeof c1, "%s/..", exedir ? exedir : ".");
    int is_src = 0;
    snprintf(src, sizeof src, "%s/CMakeLists.txt", c1);
    is_src = access(src, R_OK) == 0;
    snprintf(c1, sizeof c1, "%s/../../shared", exedir ? exedir : ".");
    const char *cands[] = {getenv("SDN_SHARED"), is_src ? c1 : NULL};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
        if (!cands[i]) continue;
        char probe[PATH_MAX + 32];
        snprintf(probe, sizeof probe, "%s/datasets", cands[i]);
        if (access(probe, R_OK) == 0) {
            snprintf(path, sizeof path, "%s", cands[i]);
            res = path;
            break;
        }
    }
    return res;
}

char **dscli_split(const char *csv, int *n) {
    int cap = 4, k = 0;
    char **l = bench_xmalloc((size_t)(cap + 1) * sizeof *l);
    const char *p = csv ? csv : "";
    while (l && *p) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ',') e++;
        const char *t = e;
        while (t > p && t[-1] == ' ') t--;
        if (k == cap) {
            cap *= 2;
            char **nl = realloc(l, (size_t)(cap + 1) * sizeof *l);
            if (!nl) break;
            l = nl;
        }
        l[k++] = strndup(p, (size_t)(t - p));
        p = e;
    }
    if (l) l[k] = NULL;
    *n = k;
    return l;
}

void dscli_free_list(char **l) {
    if (!l) return;
    for (char **p = l; *p; p++) free(*p);
    free(l);
}

char **dscli_all_methods(int *n) {
    int k = 0;
    char **all = dscli_split(sdnpu_methods(), &k);
    int w = 0;
    for (int i = 0; i < k; i++) {
        if (!strcmp(all[i], "none")) free(all[i]);
        else all[w++] = all[i];
    }
    all[w] = NULL;
    *n = w;
    return all;
}
