/* fuzz_dataset.c - libFuzzer target: the input is a JSONL task file (sdnpu task rows or
 * Spec-Bench questions), loaded from memory, then filtered and searched. */
#include <stdint.h>
#include <stdlib.h>

#include "datasets/dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sdn_dataset ds = {0};
    sdn_err err = {0};
    if (sdn_dataset_load_buf(&ds, "fuzz.jsonl", (const char *)data, size, &err) == SDN_OK) {
        const char *names[16];
        (void)sdn_dataset_tasks(&ds, names, 16);
        (void)sdn_dataset_find(&ds, "1");
        sdn_dataset_filter(&ds, "summary,rag", 3);
    } else if (!err.msg[0]) {
        abort();
    }
    sdn_dataset_free(&ds);
    return 0;
}
