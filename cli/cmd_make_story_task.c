/* cmd_make_story_task.c - `sdnpu make-story-task`: write the generated "story" task (rows
 * whose context is a story the model itself sampled and whose prompt is its first
 * sentence; see datasets/story_task.h) for models that cannot do the Spec-Bench tasks. The work
 * is tools/cli_datasets.c's (tools.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/story_task.h"
#include "cli/cli.h"
#include "cli/opts.h"
#include "tools/tools.h"

int cmd_make_story_task(int argc, char **argv) {
    const char *model = NULL, *tokenizer = NULL, *out_path = NULL;
    sdn_story_opts o = {.n = 40, .seed = 1, .temp = 0.8f, .story_tokens = 300, .min_tokens = 80, .threads = 1};
    const cli_opt table[] = {
        CLI_O_MODEL(&model, "model file (GGUF or llama2.c checkpoint)"),
        CLI_O_TOKENIZER(&tokenizer),
        CLI_O_OUT(&out_path, "the task file written (JSON Lines)"),
        {.name = "--n", .kind = CLI_INT, .dest = &o.n, .lo = 1, .hi = 100000, .arg = "N", .help = "rows (default 40)"},
        CLI_O_SEED(&o.seed, 0x7fffffffffffffffL, "base seed: row i samples with S + i (default 1)"),
        CLI_O_TEMP(&o.temp, 0.01, 10, "sampling temperature (default 0.8)"),
        CLI_O_MAX_TOKENS(&o.story_tokens, 8, 1 << 20, "story tokens sampled at most (default 300; old spelling --tokens)"),
        {.name = "--min-tokens", .kind = CLI_INT, .dest = &o.min_tokens, .lo = 1, .hi = 1 << 20, .arg = "N",
         .help = "shorter stories are sampled again with another seed (default 80)"},
        CLI_O_THREADS_H(&o.threads, "worker threads (default 1)"),
        CLI_O_END,
    };
    const cli_cmd cmd = {.name = "make-story-task", .synopsis = "--model M [--tokenizer T] --out FILE [options]",
                         .about = "Write the generated story task (model-written stories) for small story models.", .opts = table};
    int rc = cli_parse(&cmd, argc, argv, NULL, NULL);
    if (rc != CLI_CONTINUE) return rc;
    if (!model || !out_path) { fprintf(stderr, "sdnpu make-story-task: --model and --out are required (sdnpu make-story-task --help)\n"); return 2; }
    return sdn_tool_make_story_task(model, tokenizer, out_path, &o);
}
