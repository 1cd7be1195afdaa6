/* sdn_mem.c - the memory limit of this process (see sdn_mem.h). */
#include "common/sdn_mem.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* The bound set by sdn_mem_set_limit (0: none) and its description. */
static pthread_mutex_t g_set_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_set_bytes;
static char g_set_src[64] = "sdnpu_set_mem_limit";

void sdn_mem_set_limit(uint64_t bytes, const char *source) {
    pthread_mutex_lock(&g_set_mu);
    g_set_bytes = bytes;
    snprintf(g_set_src, sizeof g_set_src, "%s", source && *source ? source : "sdnpu_set_mem_limit");
    pthread_mutex_unlock(&g_set_mu);
}

/* A limit file holding a byte count or "max"; UINT64_MAX when absent or unlimited. */
static uint64_t read_limit_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return UINT64_MAX;
    char buf[64] = "";
    uint64_t v = UINT64_MAX;
    if (fgets(buf, sizeof buf, f) && strncmp(buf, "max", 3) != 0) {
        char *end;
        unsigned long long x = strtoull(buf, &end, 10);
        if (end != buf && x > 0) v = (uint64_t)x;
    }
    fclose(f);
    return v;
}

/* The smallest `file` limit of cgroup `cg` (a path such as "/a/b") and its ancestors,
 * under the mount point `root`. */
static uint64_t cgroup_chain_limit(const char *root, const char *cg, const char *file) {
    char path[1024], rel[512];
    snprintf(rel, sizeof rel, "%s", cg);
    uint64_t best = UINT64_MAX;
    for (;;) {
        snprintf(path, sizeof path, "%s%s/%s", root, rel, file);
        uint64_t v = read_limit_file(path);
        if (v < best) best = v;
        char *slash = strrchr(rel, '/');
        if (!slash || rel[0] == 0) break;
        *slash = 0; /* parent; "" is the root */
    }
    return best;
}

/* cgroup limits of this process: v2 (line "0::/path") and v1 (controller list holding
 * "memory"). */
static uint64_t cgroup_limit(const char **kind) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return UINT64_MAX;
    char line[1024];
    uint64_t best = UINT64_MAX;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = 0;
        const char *ctrl = c1 + 1, *cg = c2 + 1;
        uint64_t v = UINT64_MAX;
        const char *k = NULL;
        if (!strcmp(line, "0") && ctrl[0] == 0) {
            v = cgroup_chain_limit("/sys/fs/cgroup", cg, "memory.max");
            k = "cgroup memory.max";
        } else if (strstr(ctrl, "memory")) {
            v = cgroup_chain_limit("/sys/fs/cgroup/memory", cg, "memory.limit_in_bytes");
            k = "cgroup memory.limit_in_bytes";
        }
        if (v < best) best = v, *kind = k;
    }
    fclose(f);
    return best;
}

uint64_t sdn_mem_limit(const char **source) {
    const char *src = "no known limit";
    uint64_t best = UINT64_MAX;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0) best = (uint64_t)pages * (uint64_t)psz, src = "physical memory";
    /* what the machine can give now: MemAvailable plus what this process already holds */
    FILE *mi = fopen("/proc/meminfo", "r");
    if (mi) {
        char line[256];
        while (fgets(line, sizeof line, mi))
            if (!strncmp(line, "MemAvailable:", 13)) {
                uint64_t av = (uint64_t)strtoull(line + 13, NULL, 10) << 10;
                FILE *st = fopen("/proc/self/status", "r");
                if (st) {
                    char l2[256];
                    while (fgets(l2, sizeof l2, st))
                        if (!strncmp(l2, "VmRSS:", 6)) av += (uint64_t)strtoull(l2 + 6, NULL, 10) << 10;
                    fclose(st);
                }
                if (av > 0 && av < best) best = av, src = "available memory: MemAvailable in /proc/meminfo plus this process's RSS";
                break;
            }
        fclose(mi);
    }
    const char *k = NULL;
    uint64_t cg = cgroup_limit(&k);
    if (cg < best) best = cg, src = k;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (uint64_t)rl.rlim_cur < best)
        best = (uint64_t)rl.rlim_cur, src = "RLIMIT_AS (ulimit -v)";
    pthread_mutex_lock(&g_set_mu);
    if (g_set_bytes && g_set_bytes < best) best = g_set_bytes, src = g_set_src;
    pthread_mutex_unlock(&g_set_mu);
    if (source) *source = src;
    return best;
}

int sdn_mem_check(uint64_t need, const char *what, const char *detail, sdn_err *err) {
    const char *src;
    uint64_t lim = sdn_mem_limit(&src);
    if (need <= lim) return SDN_OK;
    return sdn_fail(err, SDN_ENOMEM, "%s needs %llu MiB%s%s%s but this process may use only %llu MiB (%s)", what,
                    (unsigned long long)((need + (1u << 20) - 1) >> 20), detail ? " (" : "", detail ? detail : "", detail ? ")" : "",
                    (unsigned long long)(lim >> 20), src);
}
