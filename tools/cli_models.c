/* cli_models.c - the known models for `sdnpu pull` and `sdnpu demo` (see tools.h): the table
 * of known models and whether each is cached, pulling one, and the demo's model (the known
 * model, or offline a seeded random-weight make-model model). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tools/tools.h"
#include "tools/make_model.h"
#include "modelfile/model_registry.h"
#include "tools/model_pull.h"

void sdn_tool_known_models_print(void) {
    printf("%-24s %-10s %-12s %-9s %s\n", "name", "size", "licence", "cached", "what");
    for (int i = 0; i < sdn_known_model_count(); i++) {
        const sdn_known_model *km = sdn_known_model_at(i);
        char path[1300] = "";
        sdn_known_model_path(km, path, sizeof path);
        printf("%-24s %6.1f MB  %-12s %-9s %s\n", km->name, km->size / 1e6, km->licence, access(path, R_OK) ? "no" : "yes", km->about);
    }
}

int sdn_tool_pull(const char *name, int quiet, int progress) {
    const sdn_known_model *km = sdn_known_model_find(name);
    if (!km) {
        fprintf(stderr, "sdnpu pull: '%s' is not a known model; known models:\n", name);
        for (int i = 0; i < sdn_known_model_count(); i++) fprintf(stderr, "  %s\n", sdn_known_model_at(i)->name);
        return 2;
    }
    sdn_pull_opts o = {.progress = progress, .quiet = quiet, .python = getenv("SDNPU_PYTHON")};
    char path[1300];
    sdn_err err = {0};
    if (sdn_model_pull(km, &o, path, sizeof path, &err)) {
        fprintf(stderr, "sdnpu pull: %s\n", err.msg);
        return 1;
    }
    printf("%s\n", path);
    return 0;
}

int sdn_tool_pull_if_known(const char *cmd, const char *model) {
    const sdn_known_model *km = model ? sdn_known_model_find(model) : NULL;
    if (!km || access(model, F_OK) == 0 || sdn_known_model_check(km, NULL) == SDN_OK) return 0;
    sdn_pull_opts o = {.quiet = 1, .python = getenv("SDNPU_PYTHON")};
    char path[1300];
    sdn_err err = {0};
    fprintf(stderr, "sdnpu %s: fetching %s (%.0f MB, %s) on first use ...\n", cmd, km->name, km->size / 1e6, km->licence);
    if (sdn_model_pull(km, &o, path, sizeof path, &err)) {
        fprintf(stderr, "sdnpu %s: %s\n", cmd, err.msg);
        return 1;
    }
    return 0;
}

/* The seeded random-weight model of the demo's offline fallback (written once into the cache). */
static int fallback_model(const char *shape, const char *type, int seed, char *model, size_t cap) {
    const char *dir = sdn_cache_dir();
    snprintf(model, cap, "%s/demo-%s-%s-seed%d.gguf", dir ? dir : ".", shape, type, seed);
    if (access(model, R_OK) == 0) return 0;
    fprintf(stderr, "demo: writing a seeded random-weight model (%s, %s) to %s ...\n", shape, type, model);
    sdn_make_model_opts mo = {.shape = shape, .out_path = model, .type = type, .seed = (uint64_t)seed, .quiet = 1};
    sdn_err err = {0};
    if (sdn_make_model(&mo, &err)) {
        fprintf(stderr, "sdnpu: %s\n", err.msg);
        return -1;
    }
    return 0;
}

int sdn_tool_demo_model(const char *name, const char *shape, const char *type, int seed, int *offline, char *model, size_t cap, int *real) {
    const sdn_known_model *km = sdn_known_model_find(name);
    sdn_err err = {0};
    *real = 0;
    if (!*offline && sdn_known_model_check(km, &err)) {
        fprintf(stderr, "demo: fetching %s (%.0f MB, %s) on first use ...\n", km->name, km->size / 1e6, km->licence);
        sdn_pull_opts po = {.progress = isatty(2), .python = getenv("SDNPU_PYTHON")};
        sdn_err_clear(&err);
        if (sdn_model_pull(km, &po, model, cap, &err)) {
            fprintf(stderr, "demo: cannot fetch %s: %s\n"
                            "demo: falling back to a seeded random-weight model: the engine runs end to end, but its text is meaningless.\n",
                    km->name, err.msg);
            *offline = 1;
        }
    }
    if (!*offline) {
        sdn_known_model_path(km, model, cap);
        *real = 1;
        return 0;
    }
    return fallback_model(shape, type, seed, model, cap);
}
