/* cmd_demo.c - `sdnpu demo`, the README's main job: with no download, write (once, cached)
 * a seeded make-model model and run the built-in request on it, printing the output and
 * the statistics, then say how to run a real GGUF file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/cli/bench_util.h"
#include "engine/cli/cli.h"
#include "engine/cli/run_common.h"
#include "engine/make_model.h"
#include "engine/vocab_gen.h"

#define DEMO_SHAPE "small-llama"
#define DEMO_TYPE "Q8_0"
#define DEMO_SEED 42 /* vocabulary: the 574 pieces the built-in corpus yields + 2 unused */

int cmd_demo(int argc, char **argv) {
    sdn_run_opts o;
    sdn_run_opts_init(&o);
    o.max_tokens = 64;
    o.spec = "sdnpu";
    o.compare = 1;
    for (int i = 1; i < argc; i++) {
        int r = sdn_run_opts_parse(&o, argc, argv, &i);
        if (r == 1) continue;
        if (r < 0) return 2;
        if (!strcmp(argv[i], "--help")) {
            printf("usage: sdnpu demo [run options]\n  Writes (once) a seeded %s %s model to the cache directory ($SDNPU_CACHE,\n"
                   "  default ~/.cache/sdnpu) and runs the built-in request on it. Options as for `sdnpu run`.\n",
                   DEMO_SHAPE, DEMO_TYPE);
            return 0;
        }
        fprintf(stderr, "sdnpu demo: unknown option %s\n", argv[i]);
        return 2;
    }
    char model[1200], doc[1200];
    const char *dir = bench_cache_dir();
    snprintf(model, sizeof model, "%s/demo-%s-%s-seed%d.gguf", dir, DEMO_SHAPE, DEMO_TYPE, DEMO_SEED);
    snprintf(doc, sizeof doc, "%s/demo-document.txt", dir);
    if (access(model, R_OK) != 0) {
        fprintf(stderr, "demo: writing a seeded random-weight model (%s, %s) to %s ...\n", DEMO_SHAPE, DEMO_TYPE, model);
        sdn_make_model_opts mo = {.shape = DEMO_SHAPE, .out_path = model, .type = DEMO_TYPE, .seed = DEMO_SEED, .quiet = 1};
        sdn_err err = {0};
        if (sdn_make_model(&mo, &err)) {
            fprintf(stderr, "sdnpu: %s\n", err.msg);
            return 1;
        }
    }
    FILE *f = fopen(doc, "w");
    if (!f || fputs(sdn_builtin_corpus, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "sdnpu demo: cannot write %s\n", doc);
        return 1;
    }
    if (!o.model_path) o.model_path = model;
    if (!o.prompt && !o.prompt_ids) o.prompt = "Summarize what the town council discussed about the lighthouse.";
    if (!o.n_contexts) {
        o.contexts = malloc(sizeof *o.contexts);
        o.contexts[0] = doc;
        o.n_contexts = 1;
    }
    printf("== sdnpu demo ==\nmodel:    %s\ncontext:  %s (%zu bytes)\nprompt:   %s\n", o.model_path, doc, strlen(sdn_builtin_corpus),
           o.prompt ? o.prompt : o.prompt_ids);
    printf("note:     the demo model has random weights, so its text is not meaningful; it exercises the\n"
           "          whole engine (GGUF loading, tokenizer, prefill, drafting, tree verification) with no download.\n"
           "          Acceptance on a random model only reflects its repetition loops, not real behaviour: see the\n"
           "          README for figures measured on a real model.\n\n");
    printf("plain decoding and speculative decoding (%s) side by side, greedy, %d tokens at most:\n", o.spec, o.max_tokens);
    fflush(stdout);
    int rc = sdn_run_request(&o, stdout);
    if (rc == 0)
        printf("\nTo run a real model:  sdnpu run --model MODEL.gguf --context DOC.txt --prompt \"QUESTION\"\n"
               "Real TinyStories:     sdnpu run --model stories260K.bin --tokenizer tok512.bin --prompt \"Once upon a time\"\n");
    sdn_run_opts_free(&o);
    return rc;
}
