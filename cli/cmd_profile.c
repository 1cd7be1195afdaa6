/* cmd_profile.c - `sdnpu profile --model M`: measure (or read from the profile cache) the
 * graphs of a model on this machine, print the per-block measurements, the fitted latency
 * models with their quality, the verification budget they imply, and the schedules each
 * scheduler would run for a prompt of a given length with their predicted prefill times. The
 * work is tools/cli_profile.c's (tools.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "tools/tools.h"

int cmd_profile(int argc, char **argv) {
    sdn_tool_profile_opts o;
    sdn_tool_profile_defaults(&o);
    int nthreads = cli_default_threads();
    char blocks_h[48], g1_h[48], acc_h[96];
    snprintf(blocks_h, sizeof blocks_h, "blocks of layers (default %ld)", o.blocks);
    snprintf(g1_h, sizeof g1_h, "prefill graph rows (default %ld)", o.s1);
    snprintf(acc_h, sizeof acc_h, "per-token draft acceptance of the budget's model (default %.2f)", o.accept);
    const cli_opt table[] = {
        CLI_O_MODEL(&o.model, "model file or known model name"),
        CLI_O_THREADS(&nthreads),
        {.name = "--blocks", .kind = CLI_LONG, .dest = &o.blocks, .lo = 1, .hi = 128, .arg = "N", .help = blocks_h},
        {.name = "--g1", .kind = CLI_LONG, .dest = &o.s1, .lo = 1, .hi = 4096, .arg = "S1", .help = g1_h},
        {.name = "--g2", .kind = CLI_LONG, .dest = &o.s2, .lo = 1, .hi = 64, .arg = "S2", .help = "decode graph rows for the schedule (default: from the budget)"},
        {.name = "--prompt-len", .kind = CLI_LONG, .dest = &o.plen, .lo = 1, .hi = 1 << 20, .arg = "N", .help = "prompt length of the schedule shown (default 1024)"},
        {.name = "--accept", .kind = CLI_DOUBLE, .dest = &o.accept, .lo = 0, .hi = 0.999, .arg = "A", .help = acc_h},
        {.name = "--reps", .kind = CLI_LONG, .dest = &o.reps, .lo = 1, .hi = 15, .arg = "R", .help = "repetitions per load / KV-base measurement (default 3)"},
        {.name = "--profile-db", .kind = CLI_STR, .dest = &o.db, .arg = "FILE", .help = "profile cache (default $SDNPU_CACHE/profiles.sqlite)"},
        {.name = "--force", .kind = CLI_FLAG, .dest = &o.force, .help = "measure again even when cached"},
        CLI_O_END,
    };
    const cli_cmd cmd = {.name = "profile", .synopsis = "--model M [options]",
                         .about = "Profile the prefill/decode graphs of a model on this machine; print the fits and the chosen schedule.",
                         .opts = table};
    int rc = cli_parse(&cmd, argc, argv, NULL, NULL);
    if (rc != CLI_CONTINUE) return rc;
    o.threads = nthreads;
    if (!o.model) {
        fprintf(stderr, "sdnpu profile: --model is required (sdnpu profile --help)\n");
        return 2;
    }
    return sdn_tool_profile(&o);
}
