/* cli_machine.c - the global options of every command (see tools.h): kernel path, prefill
 * matmuls and KV cache types, set once before the command runs. */
#include <stdio.h>

#include "tools/tools.h"
#include "attention/kv_cache.h"
#include "kernels/kernel_path.h"

int sdn_tool_global_options(const char *name, const char *pmm, const char *ctk, const char *ctv) {
    sdn_err err = {0};
    sdn_kpath p;
    int rc = name ? sdn_kpath_parse(name, &p, &err) : SDN_OK;
    if (!rc) rc = name ? sdn_kpath_set(p, &err) : sdn_kpath_init(&err);
    if (rc) {
        fprintf(stderr, "sdnpu: %s%s\n", name ? "--kernel: " : "", err.msg);
        return 2;
    }
    sdn_prefill_mm m;
    rc = pmm ? sdn_prefill_mm_parse(pmm, &m, &err) : sdn_prefill_mm_init(&err);
    if (rc) {
        fprintf(stderr, "sdnpu: %s%s\n", pmm ? "--prefill-matmul: " : "", err.msg);
        return 2;
    }
    if (pmm) sdn_prefill_mm_set(m);
    sdn_kv_type tk = SDN_KV_AUTO, tv = SDN_KV_AUTO;
    if ((ctk && sdn_kv_type_parse(ctk, "--cache-type-k", &tk, &err)) || (ctv && sdn_kv_type_parse(ctv, "--cache-type-v", &tv, &err)) ||
        (!ctk && !ctv && sdn_kv_default_init(&err))) {
        fprintf(stderr, "sdnpu: %s\n", err.msg);
        return 2;
    }
    if (ctk || ctv) sdn_kv_set_default(tk, tv);
    return 0;
}
