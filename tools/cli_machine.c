/* cli_machine.c - the global options of every command (see tools.h): kernel path, prefill
 * matmuls, KV cache types, memory limit and cache directory, set once before the command
 * runs. This is where the program's environment variables (SDN_KERNEL, SDN_PREFILL_MATMUL,
 * SDN_CACHE_TYPE_K / _V, SDN_MEM_LIMIT_MB, SDNPU_CACHE, XDG_CACHE_HOME, HOME) become the
 * library's settings: libsdnpu reads no environment variable (docs/library.md). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tools.h"
#include "attention/kv_cache.h"
#include "common/sdn_mem.h"
#include "kernels/kernel_path.h"
#include "modelfile/model_registry.h"

/* An option's value, else the environment variable's (non-empty), else NULL; *what names the source. */
static const char *pick(const char *opt, const char *opt_name, const char *var, const char **what) {
    if (opt) {
        *what = opt_name;
        return opt;
    }
    const char *e = getenv(var);
    *what = var;
    return e && *e ? e : NULL;
}

void sdn_tool_env_cache_dir(char *out, size_t cap) {
    const char *e = getenv("SDNPU_CACHE"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    if (e && *e) snprintf(out, cap, "%s", e);
    else if (x && *x) snprintf(out, cap, "%s/sdnpu", x);
    else if (h && *h) snprintf(out, cap, "%s/.cache/sdnpu", h);
    else snprintf(out, cap, "/tmp/sdnpu-cache");
}

int sdn_tool_global_options(const char *name, const char *pmm, const char *ctk, const char *ctv) {
    sdn_err err = {0};
    const char *what;
    /* kernel path: --kernel, else SDN_KERNEL, else the best */
    const char *kp = pick(name, "--kernel", "SDN_KERNEL", &what);
    if (sdn_kpath_set_name(kp, &err)) {
        fprintf(stderr, "sdnpu: %s: %s\n", what, err.msg);
        return 2;
    }
    /* prefill matmuls: --prefill-matmul, else SDN_PREFILL_MATMUL, else auto */
    const char *pm = pick(pmm, "--prefill-matmul", "SDN_PREFILL_MATMUL", &what);
    sdn_prefill_mm m = SDN_PREFILL_MM_AUTO;
    if (pm && sdn_prefill_mm_parse(pm, &m, &err)) {
        fprintf(stderr, "sdnpu: %s: %s\n", what, err.msg);
        return 2;
    }
    sdn_prefill_mm_set(m);
    /* KV cache types: --cache-type-k/-v, else SDN_CACHE_TYPE_K/_V, else f16 */
    sdn_kv_type tk = SDN_KV_AUTO, tv = SDN_KV_AUTO;
    const char *wk, *wv;
    const char *k = pick(ctk, "--cache-type-k", "SDN_CACHE_TYPE_K", &wk), *v = pick(ctv, "--cache-type-v", "SDN_CACHE_TYPE_V", &wv);
    if ((k && sdn_kv_type_parse(k, wk, &tk, &err)) || (v && sdn_kv_type_parse(v, wv, &tv, &err))) {
        fprintf(stderr, "sdnpu: %s\n", err.msg);
        return 2;
    }
    sdn_kv_set_default(tk, tv);
    /* memory limit: SDN_MEM_LIMIT_MB, a positive number of MiB ("0" or unset: none) */
    const char *ml = getenv("SDN_MEM_LIMIT_MB");
    if (ml && *ml) {
        char *end;
        unsigned long long mb = strtoull(ml, &end, 10);
        if (*end || ml[0] == '-' || mb >= (UINT64_MAX >> 20)) {
            fprintf(stderr, "sdnpu: SDN_MEM_LIMIT_MB: '%s' is not a number of MiB\n", ml);
            return 2;
        }
        sdn_mem_set_limit((uint64_t)mb << 20, "SDN_MEM_LIMIT_MB");
    }
    /* the cache directory: models, verify cost curves, graph profiles */
    char dir[1024];
    sdn_tool_env_cache_dir(dir, sizeof dir);
    if (sdn_cache_dir_set(dir, &err)) {
        fprintf(stderr, "sdnpu: SDNPU_CACHE: %s\n", err.msg);
        return 2;
    }
    return 0;
}
