/* cmd_info.c - `sdnpu info --model M [M ...]`: architecture, shapes, tensor types, tokenizer
 * and the memory a session needs, for every model named (positional names are synonyms of
 * --model). A vocabulary-only GGUF file (no weights: what `tokenize` accepts) is described as
 * a tokenizer. The work is tools/cli_info.c's (tools.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdnpu.h"
#include "cli/cli.h"
#include "cli/opts.h"
#include "tools/tools.h"

int cmd_info(int argc, char **argv) {
    const char *tok = NULL;
    int n_ctx = 0; /* 0: the engine's default, min(trained context, 8192) */
    cli_list models = {0};
    const cli_opt table[] = {
        CLI_O_MODELS(&models, "model file or known model name (repeatable; also positional)"),
        CLI_O_TOKENIZER(&tok),
        CLI_O_CTX(&n_ctx, 2, "KV cache size for the memory figures (default min(trained length, 8192))"),
        {NULL},
    };
    const cli_cmd cmd = {.name = "info", .synopsis = "--model M [--model M2 ...] [options]   (or: sdnpu info M [M2 ...])",
                         .about = "Describe models: architecture, shapes, tensor types, tokenizer, chat template, memory.",
                         .opts = table, .positional = "M", .max_positional = 64};
    const char *pos[64];
    int n_pos = 0;
    int rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc != CLI_CONTINUE) {
        cli_list_free(&models);
        return rc;
    }
    const char *all[128];
    int n = 0;
    for (int i = 0; i < models.n && n < 128; i++) all[n++] = models.v[i];
    for (int i = 0; i < n_pos && n < 128; i++) all[n++] = pos[i];
    cli_list_free(&models);
    if (n == 0) {
        fprintf(stderr, "sdnpu info: give a model: --model M (sdnpu info --help)\n");
        return 2;
    }
    int failed = 0;
    for (int i = 0; i < n; i++) {
        if (n > 1) printf("%s== %s ==\n", i ? "\n" : "", all[i]);
        failed |= sdn_tool_info_describe(all[i], tok, n_ctx);
    }
    sdn_tool_info_machine();
    return failed ? 1 : 0;
}
