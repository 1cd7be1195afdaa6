/* test_layering.c - the module folders form layers (README "Layout"): a file may include
 * headers of its own folder and of the folders below it, never above, so there is no include
 * cycle between modules (issue 15 removed engine -> verify -> engine). The order:
 *   common < suffix_automaton < engine < grammar < draft < verify, graph_sched < datasets < runtime < bench
 * The CLI (engine/cli, bench/cli) sits above everything; include/sdnpu.h includes nothing of
 * sdnpu; the server (server/) includes only the public header. Reads the source tree ($SDN_SOURCE). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "support/test_util.h"

static const struct {
    const char *folder;
    int level;
} k_layers[] = {
    {"common", 0}, {"suffix_automaton", 1}, {"engine", 2}, {"grammar", 3}, {"draft", 4}, {"verify", 5},
    {"graph_sched", 5}, {"datasets", 6}, {"runtime", 7}, {"bench", 8},
};
#define N_LAYERS (int)(sizeof k_layers / sizeof k_layers[0])

static int level_of(const char *folder, size_t len) {
    for (int i = 0; i < N_LAYERS; i++)
        if (strlen(k_layers[i].folder) == len && !strncmp(k_layers[i].folder, folder, len)) return k_layers[i].level;
    return -1;
}

/* Violations in one file: includes "X/..." with level(X) > level. */
static int check_file(const char *path, const char *folder, int level) {
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot read %s", path);
    char line[1024];
    int bad = 0;
    while (fgets(line, sizeof line, f)) {
        const char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (strncmp(p, "#include \"", 10)) continue;
        p += 10;
        const char *slash = strchr(p, '/'), *quote = strchr(p, '"');
        if (!slash || !quote || slash > quote) continue;
        int l = level_of(p, (size_t)(slash - p));
        if (l > level) {
            print_error("%s (layer %s) includes %.*s, a higher layer\n", path, folder, (int)(quote - p), p);
            bad++;
        }
    }
    fclose(f);
    return bad;
}

static void test_no_upward_includes(void **state) {
    (void)state;
    char src[1100];
    snprintf(src, sizeof src, "%s", tu_source_path("."));
    int bad = 0, files = 0;
    for (int i = 0; i < N_LAYERS; i++) {
        char dir[1200];
        snprintf(dir, sizeof dir, "%s/%s", src, k_layers[i].folder);
        DIR *d = opendir(dir);
        if (!d) fail_msg("cannot list %s", dir);
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t n = strlen(e->d_name);
            if (n < 3 || (strcmp(e->d_name + n - 2, ".c") && strcmp(e->d_name + n - 2, ".h"))) continue;
            char path[1600];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            bad += check_file(path, k_layers[i].folder, k_layers[i].level);
            files++;
        }
        closedir(d);
    }
    assert_true(files > 100);
    assert_int_equal(bad, 0);
}

/* The public header stands alone: no sdnpu module header behind it. */
static void test_public_header_alone(void **state) {
    (void)state;
    const char *path = tu_source_path("include/sdnpu.h");
    assert_int_equal(check_file(path, "include", -1), 0);
}

/* The server (server/, `sdnpu serve`) is a client of the public API: no module header. */
static void test_server_public_api_only(void **state) {
    (void)state;
    char dir[1200];
    snprintf(dir, sizeof dir, "%s", tu_source_path("server"));
    DIR *d = opendir(dir);
    if (!d) fail_msg("cannot list %s", dir);
    int bad = 0, files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 3 || (strcmp(e->d_name + n - 2, ".c") && strcmp(e->d_name + n - 2, ".h"))) continue;
        char path[1600];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        bad += check_file(path, "server", -1);
        files++;
    }
    closedir(d);
    assert_true(files >= 6);
    assert_int_equal(bad, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_upward_includes),
        cmocka_unit_test(test_public_header_alone),
        cmocka_unit_test(test_server_public_api_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
