/* fuzz_trace.c - libFuzzer target: the input is a trace file (JSON Lines, docs/datasets.md),
 * loaded as `sdnpu study` loads it; every loaded row is validated again and written back
 * out (to /dev/null). */
#include <stdio.h>
#include <stdlib.h>

#include "datasets/trace.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    int fd = fz_memfile(data, size, path);
    if (fd < 0) return 0;
    sdn_trace t = {0};
    sdn_err err = {0};
    if (sdn_trace_load(&t, path, &err) == SDN_OK) {
        static FILE *null;
        if (!null) null = fopen("/dev/null", "w");
        for (int i = 0; i < t.n; i++) {
            if (sdn_trace_validate(&t.rows[i], NULL) != SDN_OK) abort(); /* loaded rows are valid rows */
            if (null) sdn_trace_write(null, &t.rows[i], NULL);
        }
    } else if (!err.msg[0]) {
        abort();
    }
    sdn_trace_free(&t);
    close(fd);
    return 0;
}
