/* cmd_make_model.c - `sdnpu make-model`: write a seeded random-weight GGUF of a named shape. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "tools/bench_util.h"
#include "tools/make_model.h"

static void shapes(FILE *f) {
    fprintf(f, "\nshapes:\n");
    for (int i = 0; i < sdn_shape_count(); i++) {
        const sdn_shape *s = sdn_shape_at(i);
        fprintf(f, "  %-14s %s: %d layers, dim %d, ffn %d, heads %d/%d, vocab %d\n", s->name, s->description, s->n_layers, s->dim,
                s->hidden, s->n_heads, s->n_kv_heads, s->vocab);
    }
}

int cmd_make_model(int argc, char **argv) {
    sdn_make_model_opts o = {.type = "F16", .seed = 1};
    const cli_opt table[] = {
        {.name = "--shape", .kind = CLI_STR, .dest = &o.shape, .arg = "NAME", .help = "the model shape (list below)"},
        CLI_O_OUT(&o.out_path, "the GGUF file written"),
        {.name = "--type", .kind = CLI_STR, .dest = &o.type, .arg = "TYPE",
         .help = "F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K, or Q4_K_M (mixed, default F16)"},
        CLI_O_SEED(&o.seed, 0x7fffffffffffffffL, "weight seed (default 1)"),
        {.name = "--vocab-from", .kind = CLI_STR, .dest = &o.vocab_from, .arg = "GGUF",
         .help = "copy the tokenizer section of another GGUF (vocabulary size follows it)"},
        {.name = "--layers", .kind = CLI_INT, .dest = &o.n_layers, .lo = 1, .hi = 512, .arg = "N", .help = "layers (default: the shape's)"},
        {.name = "--vocab", .kind = CLI_INT, .dest = &o.vocab, .lo = 300, .hi = 4000000, .arg = "N", .help = "vocabulary size (default: the shape's)"},
        CLI_O_QUIET(&o.quiet, "no summary line"),
        CLI_O_END,
    };
    const cli_cmd cmd = {.name = "make-model", .synopsis = "--shape NAME --out FILE [options]",
                         .about = "Write a seeded random-weight GGUF of a named shape.", .opts = table, .epilogue_fn = shapes};
    int rc = cli_parse(&cmd, argc, argv, NULL, NULL);
    if (rc != CLI_CONTINUE) return rc;
    if (bench_check_shapes_types("make-model", "--shape", o.shape, "--type", o.type)) return 2;
    if (!o.shape || !o.out_path) {
        fprintf(stderr, "sdnpu make-model: --shape and --out are required (sdnpu make-model --help)\n");
        return 2;
    }
    sdn_err err = {0};
    double t0 = cli_now();
    if (sdn_make_model(&o, &err)) {
        fprintf(stderr, "sdnpu: %s\n", err.msg);
        return 1;
    }
    if (!o.quiet) fprintf(stderr, "wrote %s (%s, %s, seed %llu) in %.1f s\n", o.out_path, o.shape, o.type, (unsigned long long)o.seed, cli_now() - t0);
    return 0;
}
