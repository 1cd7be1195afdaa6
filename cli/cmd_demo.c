/* cmd_demo.c - `sdnpu demo`, the README's main job: the real instruction-tuned model
 * SmolLM2-135M-Instruct (pulled into the cache on first use, tools/cli_models.c) summarizes a
 * real public-domain document that ships inside the program, with plain and speculative
 * decoding side by side (same output, mean accepted tokens, ms/token, speedup). Only when
 * the model cannot be fetched does it fall back, saying why, to a seeded random-weight
 * make-model model and the built-in corpus (no download). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/bench_util.h"
#include "cli/cli.h"
#include "cli/opts.h"
#include "cli/run_common.h"
#include "tools/tools.h"
#include "tools/vocab_gen.h"

#define DEMO_MODEL "smollm2-135m-instruct"
#define DEMO_SHAPE "small-llama"
#define DEMO_TYPE "Q8_0"
#define DEMO_SEED 42 /* vocabulary: the 574 pieces the built-in corpus yields + 2 unused */

/* The demo document: Abraham Lincoln's Gettysburg Address (19 November 1863), the "Bliss
 * copy" text as printed by the Library of Congress and the Lincoln papers; a work of the
 * United States from 1863, in the public domain. */
static const char k_demo_document[] =
    "Address delivered at the dedication of the Cemetery at Gettysburg.\n\n"
    "Four score and seven years ago our fathers brought forth on this continent, a new nation, conceived in Liberty, and "
    "dedicated to the proposition that all men are created equal.\n\n"
    "Now we are engaged in a great civil war, testing whether that nation, or any nation so conceived and so dedicated, can "
    "long endure. We are met on a great battle-field of that war. We have come to dedicate a portion of that field, as a final "
    "resting place for those who here gave their lives that that nation might live. It is altogether fitting and proper that "
    "we should do this.\n\n"
    "But, in a larger sense, we can not dedicate -- we can not consecrate -- we can not hallow -- this ground. The brave men, "
    "living and dead, who struggled here, have consecrated it, far above our poor power to add or detract. The world will "
    "little note, nor long remember what we say here, but it can never forget what they did here. It is for us the living, "
    "rather, to be dedicated here to the unfinished work which they who fought here have thus far so nobly advanced. It is "
    "rather for us to be here dedicated to the great task remaining before us -- that from these honored dead we take "
    "increased devotion to that cause for which they gave the last full measure of devotion -- that we here highly resolve "
    "that these dead shall not have died in vain -- that this nation, under God, shall have a new birth of freedom -- and that "
    "government of the people, by the people, for the people, shall not perish from the earth.\n\n"
    "Abraham Lincoln\nNovember 19, 1863\n";
#define DEMO_DOC_NAME "gettysburg-address.txt"
#define DEMO_DOC_SOURCE "Abraham Lincoln, the Gettysburg Address (1863, Bliss copy; public domain)"
#define DEMO_PROMPT "Summarize the speech in a few sentences."

static int write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "sdnpu demo: cannot write %s\n", path);
        return -1;
    }
    return 0;
}

int cmd_demo(int argc, char **argv) {
    sdn_run_opts o;
    sdn_run_opts_init(&o);
    o.max_tokens = 128;
    o.compare = 1; /* --spec: the library's default (SDNPU_DEFAULT_METHOD), as for run */
    int offline = 0;
    cli_opt table[64];
    int n = sdn_run_opts_table(&o, table, 63);
    table[n] = (cli_opt){.name = "--offline", .kind = CLI_FLAG, .dest = &offline,
                         .help = "use a seeded random-weight model (no download; also the fallback when the pull fails)"};
    memset(&table[n + 1], 0, sizeof table[n + 1]);
    static char about[512];
    snprintf(about, sizeof about,
             "Pulls %s into the cache ($SDNPU_CACHE, default ~/.cache/sdnpu) on first use and asks it to summarize a\n"
             "document that ships with sdnpu (%s), with plain and speculative decoding side by side.\n"
             "The options of `sdnpu run` (--model, --context, --prompt replace the defaults; default --spec %s --compare).",
             DEMO_MODEL, DEMO_DOC_SOURCE, o.spec);
    const cli_cmd cmd = {.name = "demo", .synopsis = "[--offline] [run options]", .about = about, .opts = table};
    int prc = cli_parse(&cmd, argc, argv, NULL, NULL);
    if (prc == CLI_CONTINUE && !(prc = sdn_run_opts_check(&o))) prc = CLI_CONTINUE;
    if (prc != CLI_CONTINUE) {
        sdn_run_opts_free(&o);
        return prc;
    }
    const char *dir = bench_cache_dir();
    char model[1300], doc[1200];
    int real = 0;
    if (!o.model_path) {
        if (sdn_tool_demo_model(DEMO_MODEL, DEMO_SHAPE, DEMO_TYPE, DEMO_SEED, &offline, model, sizeof model, &real)) return 1;
        o.model_path = model;
    }
    if (!o.contexts.n) {
        snprintf(doc, sizeof doc, "%s/%s", dir, real ? DEMO_DOC_NAME : "demo-document.txt");
        if (write_file(doc, real ? k_demo_document : sdn_builtin_corpus)) return 1;
        o.contexts.v = malloc(sizeof *o.contexts.v);
        if (!o.contexts.v) return 1;
        o.contexts.v[0] = doc;
        o.contexts.n = 1;
    }
    if (!o.prompt && !o.prompt_ids) o.prompt = real ? DEMO_PROMPT : "Summarize what the town council discussed about the lighthouse.";
    printf("== sdnpu demo ==\nmodel:    %s\ncontext:  %s%s%s\nprompt:   %s\n", o.model_path, o.contexts.v[0],
           real ? "\n          " : "", real ? DEMO_DOC_SOURCE : "", o.prompt ? o.prompt : o.prompt_ids);
    if (!real)
        printf("note:     this model has random weights, so its text is not meaningful; it exercises the whole\n"
               "          engine (GGUF loading, tokenizer, prefill, drafting, tree verification) with no download.\n");
    printf("\nplain decoding and speculative decoding (%s) side by side, greedy, %d tokens at most:\n", o.spec, o.max_tokens);
    fflush(stdout);
    int rc = sdn_run_request(&o, stdout);
    if (rc == 0)
        printf("\nYour own document:  sdnpu run --model %s --context DOC.txt --prompt \"QUESTION\" --spec sdnpu --compare\n", DEMO_MODEL);
    sdn_run_opts_free(&o);
    return rc;
}
