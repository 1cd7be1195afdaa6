/* cmd_run.c - `sdnpu run`: one request through the engine, generated text streamed to
 * stdout and a stats line to stderr (or a JSON file). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cli/cli.h"
#include "engine/cli/opts.h"
#include "engine/cli/run_common.h"

int cmd_run(int argc, char **argv) {
    sdn_run_opts o;
    sdn_run_opts_init(&o);
    cli_opt table[64];
    sdn_run_opts_table(&o, table, 64);
    const cli_cmd cmd = {.name = "run",
                         .synopsis = "--model M (--prompt TEXT | --prompt - | --prompt-file FILE | --prompt-ids \"ID ...\") [options]",
                         .about = "Generate an answer: text streams to stdout, statistics to stderr.",
                         .opts = table};
    int rc = cli_parse(&cmd, argc, argv, NULL, NULL);
    if (rc == CLI_CONTINUE) {
        if (!o.model_path) {
            fprintf(stderr, "sdnpu run: --model is required (sdnpu run --help)\n");
            rc = 2;
        } else if (!o.prompt && !o.prompt_ids && !o.prompt_file) {
            fprintf(stderr, "sdnpu run: a prompt is required: --prompt TEXT, --prompt - (stdin), --prompt-file FILE or --prompt-ids\n");
            rc = 2;
        } else if (!(rc = sdn_run_opts_check(&o)))
            rc = sdn_run_request(&o, stdout);
    }
    sdn_run_opts_free(&o);
    return rc;
}
