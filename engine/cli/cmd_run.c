/* cmd_run.c - `sdnpu run`: one request through the engine, generated text streamed to
 * stdout and a stats line to stderr (or a JSON file). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sdn_util.h"
#include "engine/cli/cli.h"
#include "engine/cli/run_common.h"

static void usage(FILE *f) {
    fprintf(f, "usage: sdnpu run --model M (--prompt TEXT | --prompt-ids \"ID ...\") [options]\n");
    sdn_run_opts_usage(f);
}

int cmd_run(int argc, char **argv) {
    sdn_run_opts o;
    sdn_run_opts_init(&o);
    for (int i = 1; i < argc; i++) {
        int r = sdn_run_opts_parse(&o, argc, argv, &i);
        if (r == 1) continue;
        if (r < 0) return 2;
        if (!strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        fprintf(stderr, "sdnpu run: unknown option %s\n", argv[i]);
        usage(stderr);
        return 2;
    }
    if (!o.model_path) {
        fprintf(stderr, "sdnpu run: --model is required\n");
        usage(stderr);
        return 2;
    }
    if (!o.prompt && !o.prompt_ids) {
        fprintf(stderr, "sdnpu run: --prompt or --prompt-ids is required\n");
        return 2;
    }
    int rc = sdn_run_request(&o, stdout);
    sdn_run_opts_free(&o);
    return rc;
}
