/* fuzz_history.c - libFuzzer target: the input is written to a temporary file that is
 * then opened as the history store (SQLite; WAL side files removed after each run), and
 * when accepted, read as a request would: recent answers within a budget, one answer by
 * id, counts, the history automaton (cache lookup or build), the stored candidate table
 * (loaded into a table of the shape it names, up to 65,535 tokens), the integrity check.
 *
 * Per input only what the store itself needs: the file (on tmpfs when there is one) is
 * rewritten in place with one open(O_TRUNC)/write/close, no stdio buffer, and only the WAL
 * side files are removed after the run, so no stale WAL is replayed into the next input
 * (the paths are made once; everything is removed at exit). The code under test is the
 * same as before. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "draft/recycle.h"
#include "runtime/history.h"

static char fz_path[256], fz_wal[272], fz_shm[272];

static void fz_paths(void) {
    /* tmpfs when there is one: SQLite's fsyncs then cost nothing */
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(fz_path, sizeof fz_path, "%s/sdnpu-fuzz-history-%ld.db", dir, (long)getpid());
    snprintf(fz_wal, sizeof fz_wal, "%s-wal", fz_path);
    snprintf(fz_shm, sizeof fz_shm, "%s-shm", fz_path);
}

static void cleanup_side(void) {
    unlink(fz_wal);
    unlink(fz_shm);
}

static void cleanup(void) {
    unlink(fz_path);
    cleanup_side();
}

/* The input as the store file: SDN_OK, or -1 when it cannot be written. An empty input
 * leaves an empty file (refused by the store: "an empty file"). */
static int put_input(const uint8_t *data, size_t size) {
    int fd = open(fz_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    for (size_t off = 0; off < size;) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)w;
    }
    return close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!fz_path[0]) {
        fz_paths();
        cleanup(); /* a previous process with this pid */
        atexit(cleanup);
    }
    if (put_input(data, size)) {
        cleanup();
        return 0;
    }
    const char *path = fz_path;
    sdn_history *h = NULL;
    sdn_err err = {0};
    if (sdn_history_open(path, &h, &err) == SDN_OK) {
        sdn_history_answer *a = NULL;
        int n = 0;
        if (sdn_history_recent(h, "g", "A", SDN_HISTORY_GROUP, 1000, &a, &n, NULL) == SDN_OK) sdn_history_answers_free(a, n);
        sdn_history_answer one;
        for (int64_t id = 1; id <= 3; id++)
            if (sdn_history_get(h, id, &one, NULL) == SDN_OK) {
                free(one.tokens);
                free(one.text);
            }
        long cnt;
        (void)sdn_history_count(h, NULL, NULL, &cnt, NULL);
        uint8_t *b = NULL;
        size_t len = 0;
        int hit, na;
        long nt;
        if (sdn_history_automaton(h, "g", "A", SDN_HISTORY_GROUP, 500, &b, &len, &hit, &na, &nt, NULL) == SDN_OK) free(b);
        b = NULL;
        if (sdn_history_automaton(h, "g", "A", SDN_HISTORY_GLOBAL, 500, &b, &len, &hit, &na, &nt, NULL) == SDN_OK) free(b);
        /* the stored candidate table of model "A", loaded as a model of the shape its header
           names (bounded) would load it */
        if (sdn_history_candidates_get(h, "A", &b, &len, NULL) == SDN_OK && b) {
            uint32_t vocab = len >= 16 ? (uint32_t)b[8] | (uint32_t)b[9] << 8 : 0, k = len >= 16 ? b[12] : 0;
            sdn_recycle *r = NULL;
            if (vocab >= 1 && k >= 1 && k <= SDN_RECYCLE_MAX_K && sdn_recycle_new((int)vocab, (int)k, &r, NULL) == SDN_OK) {
                sdn_err le = {0};
                if (sdn_recycle_load(r, b, len, "stored table", &le) != SDN_OK && !le.msg[0]) abort(); /* a refusal says why */
                int32_t out[SDN_RECYCLE_MAX_K];
                (void)sdn_recycle_get(r, 0, out);
                sdn_recycle_free(r);
            }
            free(b);
        }
        (void)sdn_history_check(h, NULL);
        sdn_history_close(h);
    } else if (!err.msg[0]) {
        abort();
    }
    cleanup_side();
    return 0;
}
