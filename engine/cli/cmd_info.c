/* cmd_info.c - `sdnpu info MODEL`: architecture, shapes, tensor types, tokenizer and the
 * memory a session needs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cli/cli.h"
#include "engine/kernel_path.h"
#include "engine/model.h"

int cmd_info(int argc, char **argv) {
    const char *path = NULL, *tok = NULL;
    long n_ctx = 0; /* 0: the engine's default, min(trained context, 4096) */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            printf("usage: sdnpu info MODEL [--tokenizer FILE] [--ctx N (default: min(trained context, 4096))]\n");
            return 0;
        } else if (!strcmp(argv[i], "--tokenizer")) {
            if (!(tok = cli_value(argc, argv, &i, "--tokenizer"))) return 2;
        } else if (!strcmp(argv[i], "--ctx")) {
            const char *v = cli_value(argc, argv, &i, "--ctx");
            if (!v || cli_int("--ctx", v, 2, 1 << 22, &n_ctx)) return 2;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "sdnpu info: unknown option %s\n", argv[i]);
            return 2;
        } else path = argv[i];
    }
    if (!path) {
        fprintf(stderr, "sdnpu info: missing MODEL\n");
        return 2;
    }
    sdn_err err = {0};
    sdn_model *m;
    sdn_model_load_opts o = {.tokenizer_path = tok, .no_tokenizer = 0};
    if (sdn_model_load(path, &o, &m, &err)) {
        /* a llama2.c checkpoint without --tokenizer can still be described */
        sdn_err e2 = {0};
        o.no_tokenizer = 1;
        if (err.code != SDN_EINVAL || sdn_model_load(path, &o, &m, &e2)) {
            fprintf(stderr, "sdnpu: %s\n", err.msg);
            return 1;
        }
    }
    if (n_ctx == 0) {
        int c = sdn_model_cfg(m)->ctx_len;
        n_ctx = c < 4096 ? c : 4096;
    }
    char *d = sdn_model_describe(m, (int)n_ctx);
    fputs(d, stdout);
    printf("kernel path: %s; CPU features: %s\n", sdn_kpath_describe(), sdn_cpu_features());
    free(d);
    sdn_model_free(m);
    return 0;
}
