/* cmd_run.c - `sdnpu run`: one request through the engine, generated text streamed to
 * stdout and a stats line to stderr (or a JSON file); --grammar / --json-schema constrain
 * the answer (the file's text goes to the request's grammar or json_schema). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "cli/run_common.h"
#include "tools/tools.h"

int cmd_run(int argc, char **argv) {
    sdn_run_opts o;
    sdn_run_opts_init(&o);
    cli_opt table[64];
    int n = sdn_run_opts_table(&o, table, 62);
    const cli_opt constraint[] = {CLI_O_CONSTRAINT(&o.smp)}; /* the group run and chat share (cli/opts.h) */
    for (size_t i = 0; i < sizeof constraint / sizeof constraint[0]; i++) table[n++] = constraint[i];
    table[n] = (cli_opt){0};
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
        } else if (!(rc = sdn_run_opts_check(&o)) && !(rc = sdn_tool_read_constraint("run", o.smp.grammar_file, o.smp.json_schema_file, &o.grammar, &o.json_schema)))
            rc = sdn_run_request(&o, stdout);
    }
    sdn_run_opts_free(&o);
    return rc;
}
