/* cmd_make_model.c - `sdnpu make-model`: write a seeded random-weight GGUF of a named shape. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sdn_util.h"
#include "cli/cli.h"
#include "cli/opts.h"
#include "tools/make_model.h"

static void usage(FILE *f) {
    fprintf(f, "usage: sdnpu make-model --shape NAME --out FILE [--type TYPE] [--seed S] [--vocab-from GGUF]\n"
               "                        [--layers N] [--vocab N] [--quiet]\n"
               "  --type: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K, or Q4_K_M (mixed, default F16)\n"
               "  --vocab-from: copy the tokenizer section of another GGUF (vocabulary size follows it)\n"
               "shapes:\n");
    for (int i = 0; i < sdn_shape_count(); i++) {
        const sdn_shape *s = sdn_shape_at(i);
        fprintf(f, "  %-14s %s: %d layers, dim %d, ffn %d, heads %d/%d, vocab %d\n", s->name, s->description, s->n_layers, s->dim,
                s->hidden, s->n_heads, s->n_kv_heads, s->vocab);
    }
}

int cmd_make_model(int argc, char **argv) {
    sdn_make_model_opts o = {.type = "F16", .seed = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        long x;
        if (!strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--quiet")) o.quiet = 1;
        else if (!strcmp(a, "--shape")) { if (!(o.shape = cli_value(argc, argv, &i, a))) return 2; }
        else if (!strcmp(a, "--out")) { if (!(o.out_path = cli_value(argc, argv, &i, a))) return 2; if (cli_check_output(a, o.out_path)) return 1; }
        else if (!strcmp(a, "--type")) { if (!(o.type = cli_value(argc, argv, &i, a))) return 2; }
        else if (!strcmp(a, "--vocab-from")) { if (!(o.vocab_from = cli_value(argc, argv, &i, a))) return 2; }
        else if (!strcmp(a, "--seed")) {
            if (!(v = cli_value(argc, argv, &i, a)) || cli_int(a, v, 0, 0x7fffffffffffffffL, &x)) return 2;
            o.seed = (uint64_t)x;
        } else if (!strcmp(a, "--layers")) {
            if (!(v = cli_value(argc, argv, &i, a)) || cli_int(a, v, 1, 512, &x)) return 2;
            o.n_layers = (int)x;
        } else if (!strcmp(a, "--vocab")) {
            if (!(v = cli_value(argc, argv, &i, a)) || cli_int(a, v, 300, 4000000, &x)) return 2;
            o.vocab = (int)x;
        } else {
            fprintf(stderr, "sdnpu make-model: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!o.shape || !o.out_path) {
        fprintf(stderr, "sdnpu make-model: --shape and --out are required\n");
        usage(stderr);
        return 2;
    }
    sdn_err err = {0};
    double t0 = sdn_now();
    if (sdn_make_model(&o, &err)) {
        fprintf(stderr, "sdnpu: %s\n", err.msg);
        return 1;
    }
    if (!o.quiet) fprintf(stderr, "wrote %s (%s, %s, seed %llu) in %.1f s\n", o.out_path, o.shape, o.type, (unsigned long long)o.seed, sdn_now() - t0);
    return 0;
}
