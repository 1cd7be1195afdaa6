/* test_layering.c - the folders form layers (docs/layout.md): a file may include
 * headers of its own folder and of the layers below it, never of a higher layer or of another
 * folder on the same layer, so there is no include cycle between modules. The library, bottom
 * first:
 *   common < suffix_automaton < modelfile < kernels < attention < tokenizer < engine < grammar
 *   < draft < verify, graph_sched < runtime
 * then, not in libsdnpu, the datasets library (datasets/: task datasets, traces, the benchmark
 * harness, acceptance studies), the tools library (tools/) and the command line (cli/) on top.
 * The public header (include/sdnpu.h) includes nothing of sdnpu; the server (server/) and the
 * examples include only the public header (and the server its own files and the
 * self-contained, header-only primitives of common/ listed below, which need nothing of
 * libsdnpu); the command line is thin: a cli/ file includes only the public header
 * ("sdnpu.h"), cli/ headers, the datasets and tools libraries' APIs (datasets/, tools/,
 * tools/tools.h) and the server's entry (server/, itself a client of the public header only),
 * never a library module's header: what a command needs beyond the public API is a tools/
 * function; tests and fuzz targets may include anything. Every folder of the tree that holds
 * C files, subfolders included, must be declared here (a subfolder takes its top folder's
 * rule), so a new folder cannot slip past the check. No library folder may hold more than a
 * quarter of the library's lines (folders with one job each). Reads the source tree
 * ($SDN_SOURCE). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "support/test_util.h"

#define ANYTHING 100 /* tests (which include fuzz targets' sources too), scripts: above every layer */

static const struct {
    const char *folder;
    int level;
    int public_only; /* 1: may include no other folder's header (only include/sdnpu.h and its own) */
} k_layers[] = {
    {"common", 0, 0},      {"suffix_automaton", 1, 0}, {"modelfile", 2, 0}, {"kernels", 3, 0},
    {"attention", 4, 0},   {"tokenizer", 5, 0},        {"engine", 6, 0},    {"grammar", 7, 0},
    {"draft", 8, 0},       {"verify", 9, 0},           {"graph_sched", 9, 0}, {"runtime", 10, 0},
    {"datasets", 11, 0},   {"tools", 12, 0},           {"server", 13, 1},   {"cli", 14, 0},
    {"include", 0, 1},     {"examples", 15, 1},        {"tests", ANYTHING, 0}, {"fuzz", ANYTHING - 1, 0},
    {"scripts", ANYTHING, 0},
};
#define N_LAYERS (int)(sizeof k_layers / sizeof k_layers[0])

/* Self-contained headers (header-only, system headers only: test_self_contained checks) that the
 * server may include besides the public header: small primitives it would otherwise copy. */
static const char *const k_self_contained[] = {"common/sdn_str.h"};
#define N_SELF_CONTAINED (int)(sizeof k_self_contained / sizeof k_self_contained[0])

static int is_self_contained(const char *inc, size_t len) {
    for (int i = 0; i < N_SELF_CONTAINED; i++)
        if (strlen(k_self_contained[i]) == len && !strncmp(k_self_contained[i], inc, len)) return 1;
    return 0;
}

/* The folders a cli/ file may include besides its own (and the public "sdnpu.h"). */
static const char *const k_cli_may_include[] = {"datasets", "tools", "server"};

/* May a cli/ file include folder x (a declared folder other than cli)? */
static int cli_may_include(int x) {
    for (size_t i = 0; i < sizeof k_cli_may_include / sizeof k_cli_may_include[0]; i++)
        if (!strcmp(k_layers[x].folder, k_cli_may_include[i])) return 1;
    return 0;
}

static int find_layer(const char *folder, size_t len);
static int find_layer_level(const char *folder);

static int find_layer(const char *folder, size_t len) {
    for (int i = 0; i < N_LAYERS; i++)
        if (strlen(k_layers[i].folder) == len && !strncmp(k_layers[i].folder, folder, len)) return i;
    return -1; /* not a declared folder (e.g. tests' "support/x.h"): not a module include */
}

static int find_layer_level(const char *folder) { return k_layers[find_layer(folder, strlen(folder))].level; }

/* Violations in one file of top folder `folder`: includes "X/..." of a declared folder X other
 * than its own, where X is a higher layer or a folder on the same layer, or any such include at
 * all from a public-only folder (the server may include the self-contained headers above), or
 * from cli/ one of a folder other than datasets/, tools/ and server/. */
static int check_file(const char *path, const char *folder) {
    int me = find_layer(folder, strlen(folder));
    if (me < 0) fail_msg("%s: folder %s is not declared", path, folder);
    int level = k_layers[me].level, public_only = k_layers[me].public_only;
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
        size_t len = (size_t)(slash - p);
        int x = find_layer(p, len);
        if (x < 0 || x == me) continue;
        if (!strcmp(folder, "server") && is_self_contained(p, (size_t)(quote - p))) continue;
        if (!strcmp(folder, "cli") && !cli_may_include(x)) {
            print_error("%s (layer cli) includes %.*s, but a command may use only sdnpu.h, cli/, datasets/, tools/ and server/ headers "
                        "(do the work in a tools/ function, tools/tools.h)\n", path, (int)(quote - p), p);
            bad++;
        } else if (public_only || k_layers[x].level >= level) {
            print_error("%s (layer %s) includes %.*s, %s\n", path, folder, (int)(quote - p), p,
                        public_only ? "but may use the public header only" : "which is not a lower layer");
            bad++;
        }
    }
    fclose(f);
    return bad;
}

static int is_source(const char *name) {
    size_t n = strlen(name);
    return n >= 3 && (!strcmp(name + n - 2, ".c") || !strcmp(name + n - 2, ".h"));
}

/* Walks `dir` (a folder of top folder `top`) and its subfolders; counts files and violations. */
static void walk(const char *dir, const char *top, int *files, int *bad) {
    DIR *d = opendir(dir);
    if (!d) fail_msg("cannot list %s", dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st)) continue;
        if (S_ISDIR(st.st_mode)) walk(path, top, files, bad);
        else if (S_ISREG(st.st_mode) && is_source(e->d_name)) {
            *bad += check_file(path, top);
            (*files)++;
        }
    }
    closedir(d);
}

/* Does `dir` or a subfolder hold a C file? */
static int holds_sources(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int found = 0;
    while (!found && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st)) continue;
        if (S_ISDIR(st.st_mode)) found = holds_sources(path);
        else found = S_ISREG(st.st_mode) && is_source(e->d_name);
    }
    closedir(d);
    return found;
}

static void test_no_upward_includes(void **state) {
    (void)state;
    char src[1100];
    snprintf(src, sizeof src, "%s", tu_source_path("."));
    int bad = 0, files = 0;
    for (int i = 0; i < N_LAYERS; i++) {
        char dir[1200];
        snprintf(dir, sizeof dir, "%s/%s", src, k_layers[i].folder);
        walk(dir, k_layers[i].folder, &files, &bad);
    }
    assert_true(files > 250);
    assert_int_equal(bad, 0);
}

/* The self-contained headers the server may include pull in nothing of sdnpu (no quoted include)
 * and declare no function that is not defined in them (static inline only). */
static void test_self_contained(void **state) {
    (void)state;
    for (int i = 0; i < N_SELF_CONTAINED; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", tu_source_path("."), k_self_contained[i]);
        FILE *f = fopen(path, "r");
        if (!f) fail_msg("cannot read %s", path);
        char line[1024];
        int quoted = 0, inline_fns = 0;
        while (fgets(line, sizeof line, f)) {
            const char *p = line;
            while (*p == ' ' || *p == '\t') p++;
            if (!strncmp(p, "#include \"", 10)) {
                print_error("%s includes %s", k_self_contained[i], p);
                quoted++;
            }
            if (!strncmp(line, "static inline ", 14)) inline_fns++;
            else if (line[0] != ' ' && line[0] != '}' && strchr(line, '(') && strchr(line, ';') && strncmp(line, "#", 1) &&
                     strncmp(line, "/*", 2) && strncmp(line, " *", 2) && strncmp(line, "typedef", 7))
                fail_msg("%s declares a function it does not define inline: %s", k_self_contained[i], line);
        }
        fclose(f);
        assert_int_equal(quoted, 0);
        assert_true(inline_fns > 0);
    }
}

/* Every top folder with C files in it (build folders aside) is declared above. */
static void test_every_folder_declared(void **state) {
    (void)state;
    char src[1100];
    snprintf(src, sizeof src, "%s", tu_source_path("."));
    DIR *d = opendir(src);
    assert_non_null(d);
    struct dirent *e;
    int undeclared = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !strncmp(e->d_name, "build", 5)) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", src, e->d_name);
        struct stat st;
        if (lstat(path, &st) || !S_ISDIR(st.st_mode) || !holds_sources(path)) continue;
        if (find_layer(e->d_name, strlen(e->d_name)) < 0) {
            print_error("folder %s holds C files but has no place in the layer table\n", e->d_name);
            undeclared++;
        }
    }
    closedir(d);
    assert_int_equal(undeclared, 0);
}

/* Lines of the C files directly in dir. */
static long count_lines(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) fail_msg("cannot list %s", dir);
    struct dirent *e;
    long lines = 0;
    while ((e = readdir(d))) {
        if (!is_source(e->d_name)) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) fail_msg("cannot read %s", path);
        int c;
        while ((c = fgetc(f)) != EOF) lines += c == '\n';
        fclose(f);
    }
    closedir(d);
    return lines;
}

/* No folder of the library (the layers below datasets/) holds more than a quarter of its lines. */
static void test_no_folder_too_big(void **state) {
    (void)state;
    long lines[N_LAYERS] = {0}, total = 0;
    for (int i = 0; i < N_LAYERS; i++) {
        if (k_layers[i].public_only || k_layers[i].level >= find_layer_level("datasets")) continue;
        char dir[1200];
        snprintf(dir, sizeof dir, "%s/%s", tu_source_path("."), k_layers[i].folder);
        total += lines[i] = count_lines(dir);
    }
    assert_true(total > 10000);
    for (int i = 0; i < N_LAYERS; i++) {
        if (lines[i] * 4 > total) print_error("%s holds %ld of the library's %ld lines, more than a quarter\n", k_layers[i].folder, lines[i], total);
        assert_true(lines[i] * 4 <= total);
    }
}

/* The checker itself: an upward, a same-layer and a non-public include are each caught, and a
 * cli/ file's include of a library module. */
static void test_checker_catches(void **state) {
    (void)state;
    char path[] = "/tmp/sdn_layering_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("#include \"runtime/api.h\"\n#include \"graph_sched/x.h\"\n#include \"common/sdn_err.h\"\n", f);
    fclose(f);
    char cpath[] = "/tmp/sdn_layering_cli_XXXXXX";
    int cfd = mkstemp(cpath);
    assert_true(cfd >= 0);
    FILE *cf = fdopen(cfd, "w");
    fputs("#include \"sdnpu.h\"\n#include \"cli/opts.h\"\n#include \"tools/tools.h\"\n#include \"server/server.h\"\n"
          "#include \"datasets/bench.h\"\n", cf);
    fclose(cf);
    assert_int_equal(check_file(cpath, "cli"), 0);     /* the public header, cli/, tools/, server/, datasets/ */
    assert_int_equal(check_file(cpath, "server"), 3);  /* cli/, tools/ and datasets/ are not the public header */
    assert_int_equal(check_file(cpath, "tools"), 2);   /* cli/ and server/ are higher; datasets/ is lower */
    assert_int_equal(check_file(cpath, "datasets"), 3); /* cli/, tools/, server/ are higher */
    FILE *sf = fopen(cpath, "w");
    fputs("#include \"sdnpu.h\"\n#include \"common/sdn_str.h\"\n#include \"common/sdn_util.h\"\n", sf);
    fclose(sf);
    assert_int_equal(check_file(cpath, "server"), 1);  /* a self-contained header, then a library one */
    assert_int_equal(check_file(cpath, "examples"), 2); /* only the server may use the self-contained ones */
    unlink(cpath);
    assert_int_equal(check_file(path, "runtime"), 0);  /* all three are lower */
    assert_int_equal(check_file(path, "draft"), 2);    /* runtime and graph_sched are higher */
    assert_int_equal(check_file(path, "verify"), 2);   /* runtime higher, graph_sched same layer */
    assert_int_equal(check_file(path, "server"), 3);   /* public header only */
    assert_int_equal(check_file(path, "cli"), 3);      /* library modules: not through the tools API */
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_upward_includes),
        cmocka_unit_test(test_every_folder_declared),
        cmocka_unit_test(test_self_contained),
        cmocka_unit_test(test_no_folder_too_big),
        cmocka_unit_test(test_checker_catches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
