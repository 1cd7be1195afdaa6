/* test_fuzz_regressions.c - every committed fuzz finding (fuzz/regressions/<target>/, the
 * minimized inputs of docs/fuzzing.md) replayed through its fuzz target's own code in the
 * ordinary test build: the targets are compiled in here (renamed), so `./sdnpu test`
 * checks each input is refused or handled with a message and no crash (and, in an
 * SDN_SANITIZE build, no sanitizer report), without clang or libFuzzer. The defect each
 * input stood for also has a direct test (test_gguf, test_history, test_server_request). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/sdn_util.h"

#define LLVMFuzzerTestOneInput fz_gguf_model
#include "fuzz/fuzz_gguf_model.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fz_gguf_tokenizer
#include "fuzz/fuzz_gguf_tokenizer.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fz_llama2c
#include "fuzz/fuzz_llama2c.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fz_dataset
#include "fuzz/fuzz_dataset.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fz_trace
#include "fuzz/fuzz_trace.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fz_sam
#include "fuzz/fuzz_sam.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fz_history
#include "fuzz/fuzz_history.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fz_chat_template
#include "fuzz/fuzz_chat_template.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fz_server_request
#include "fuzz/fuzz_server_request.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fz_grammar
#include "fuzz/fuzz_grammar.c"
#undef LLVMFuzzerTestOneInput

static const struct {
    const char *name;
    int (*run)(const uint8_t *, size_t);
} targets[] = {
    {"gguf_model", fz_gguf_model}, {"gguf_tokenizer", fz_gguf_tokenizer}, {"llama2c", fz_llama2c}, {"dataset", fz_dataset},
    {"trace", fz_trace},           {"sam", fz_sam},                       {"history", fz_history}, {"chat_template", fz_chat_template},
    {"server_request", fz_server_request}, {"grammar", fz_grammar},
};

static void test_replay(void **state) {
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", __FILE__);
    char *slash = strrchr(dir, '/');
    if (!slash) skip();
    *slash = 0; /* .../tests */
    int total = 0;
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
        char td[1200];
        snprintf(td, sizeof td, "%s/../fuzz/regressions/%s", dir, targets[t].name);
        DIR *d = opendir(td);
        if (!d) continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char p[1500];
            snprintf(p, sizeof p, "%s/%s", td, e->d_name);
            char *data;
            size_t n;
            if (sdn_read_file(p, &data, &n, NULL)) fail_msg("cannot read %s", p);
            printf("replay %s %s (%zu bytes)\n", targets[t].name, e->d_name, n);
            targets[t].run((const uint8_t *)data, n);
            free(data);
            total++;
        }
        closedir(d);
    }
    assert_true(total >= 3); /* the three committed with the loaders' hardening at least */
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_replay)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
