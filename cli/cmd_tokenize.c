/* cmd_tokenize.c - `sdnpu tokenize`: show how a model's own tokenizer splits a text.
 * Reads only the tokenizer section of a GGUF (vocabulary-only files work), or a llama2.c
 * tokenizer.bin; prints one "id<TAB>'piece'" line per token, or just the ids; --bench
 * times encoding and decoding of the text (median of repeated runs). The work is
 * tools/cli_tokenize.c's (tools.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "tools/tools.h"

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *tokfile = NULL, *file = NULL, *text = NULL;
    int ids_only = 0, no_bos = 0, special = 0, do_bench = 0;
    const cli_opt table[] = {
        CLI_O_MODEL(&model, "GGUF file (a vocabulary-only GGUF is enough; or -m M)"),
        {.name = "-m", .kind = CLI_STR, .dest = &model, .arg = "M"},
        {.name = "--tokenizer", .kind = CLI_STR, .dest = &tokfile, .arg = "FILE", .help = "llama2.c tokenizer.bin instead of a GGUF"},
        {.name = "--ids", .kind = CLI_FLAG, .dest = &ids_only, .help = "print only the ids, space-separated on one line"},
        {.name = "--no-bos", .kind = CLI_FLAG, .dest = &no_bos, .help = "do not add BOS (default: as the model's metadata says)"},
        {.name = "--special", .kind = CLI_FLAG, .dest = &special, .help = "control tokens written in the text (<|im_start|>, <s>) become single tokens"},
        {.name = "--file", .kind = CLI_STR, .dest = &file, .arg = "PATH", .help = "tokenize the contents of PATH instead of TEXT (or -f PATH)"},
        {.name = "-f", .kind = CLI_STR, .dest = &file, .arg = "PATH"},
        {.name = "--bench", .kind = CLI_FLAG, .dest = &do_bench, .help = "time tokenization of the text (median of repeated runs)"},
        CLI_O_END,
    };
    const cli_cmd cmd = {.name = "tokenize", .synopsis = "(--model M | --tokenizer FILE) [options] (TEXT | --file PATH)",
                         .about = "Show the ids and pieces of a text under a model's own tokenizer (quote the TEXT: one argument).",
                         .opts = table, .positional = "TEXT", .max_positional = 1};
    int n_pos = 0;
    int prc = cli_parse(&cmd, argc, argv, &text, &n_pos);
    if (prc != CLI_CONTINUE) return prc;
    if (!model && !tokfile) {
        fprintf(stderr, "sdnpu tokenize: give --model M (GGUF) or --tokenizer FILE (llama2.c tokenizer.bin)\n");
        return 2;
    }
    if (!text == !file) {
        fprintf(stderr, "sdnpu tokenize: give either TEXT or --file PATH\n");
        return 2;
    }
    sdn_tool_tokenize_opts to = {.model = model, .tokenizer = tokfile, .file = file, .text = text, .ids_only = ids_only,
                                 .no_bos = no_bos, .special = special, .bench = do_bench};
    return sdn_tool_tokenize(&to);
}
