/* cmd_make_story_task.c - `sdnpu make-story-task`: write the generated "story" task (rows
 * whose context is a story the model itself sampled and whose prompt is its first
 * sentence; see tools/story_task.h) for models that cannot do the Spec-Bench tasks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/story_task.h"
#include "cli/cli.h"
#include "cli/opts.h"
#include "modelfile/model.h"

static void usage(FILE *f) {
    fprintf(f, "usage: sdnpu make-story-task --model M [--tokenizer T] --out FILE [options]\n"
               "  --n N          rows (default 40)\n"
               "  --seed S       base seed: row i samples with S + i (default 1)\n"
               "  --temp T       sampling temperature (default 0.8)\n"
               "  --max-tokens N story tokens sampled at most (default 300)\n"
               "  --min-tokens N shorter stories are sampled again with another seed (default 80)\n"
               "  --threads N    worker threads (default 1)\n");
}

int cmd_make_story_task(int argc, char **argv) {
    const char *model = NULL, *tokenizer = NULL, *out_path = NULL, *v;
    sdn_story_opts o = {.n = 40, .seed = 1, .temp = 0.8f, .story_tokens = 300, .min_tokens = 80, .threads = 1};
    long x;
    double d;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define VAL() ((v = cli_value(argc, argv, &i, a)) != NULL)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--model")) { if (!VAL()) return 2; model = v; }
        else if (!strcmp(a, "--tokenizer")) { if (!VAL()) return 2; tokenizer = v; }
        else if (!strcmp(a, "--out")) { if (!VAL()) return 2; if (cli_check_output(a, v)) return 1; out_path = v; }
        else if (!strcmp(a, "--n")) { if (!VAL() || cli_int(a, v, 1, 100000, &x)) return 2; o.n = (int)x; }
        else if (!strcmp(a, "--seed")) { if (!VAL() || cli_int(a, v, 0, 0x7fffffffffffffffL, &x)) return 2; o.seed = (uint64_t)x; }
        else if (!strcmp(a, "--temp")) { if (!VAL() || cli_float(a, v, 0.01, 10, &d)) return 2; o.temp = (float)d; }
        else if (!strcmp(a, "--max-tokens")) { if (!VAL() || cli_int(a, v, 8, 1 << 20, &x)) return 2; o.story_tokens = (int)x; }
        else if (!strcmp(a, "--min-tokens")) { if (!VAL() || cli_int(a, v, 1, 1 << 20, &x)) return 2; o.min_tokens = (int)x; }
        else if (!strcmp(a, "--threads")) { if (!VAL() || cli_int(a, v, 1, 256, &x)) return 2; o.threads = (int)x; }
        else { fprintf(stderr, "sdnpu make-story-task: unknown option '%s'\n", a); usage(stderr); return 2; }
#undef VAL
    }
    if (!model || !out_path) { fprintf(stderr, "sdnpu make-story-task: --model and --out are required\n"); usage(stderr); return 2; }
    sdn_err err = {0};
    sdn_model *m = NULL;
    sdn_model_load_opts lo = {.tokenizer_path = tokenizer};
    if (sdn_model_load(model, &lo, &m, &err)) { fprintf(stderr, "sdnpu make-story-task: %s\n", err.msg); return 1; }
    FILE *f = fopen(out_path, "w");
    if (!f) { fprintf(stderr, "sdnpu make-story-task: cannot write %s\n", out_path); sdn_model_free(m); return 1; }
    const char *mb = strrchr(model, '/');
    int rc = sdn_story_task_write(m, mb ? mb + 1 : model, &o, f, &err);
    if (fclose(f) && !rc) { fprintf(stderr, "sdnpu make-story-task: write error on %s\n", out_path); rc = 1; }
    sdn_model_free(m);
    if (rc) { fprintf(stderr, "sdnpu make-story-task: %s\n", err.msg); return 1; }
    fprintf(stderr, "make-story-task: %d stories written to %s\n", o.n, out_path);
    return 0;
}
