/* fuzz_history.c - libFuzzer target: the input is written to a temporary file that is
 * then opened as the history store (SQLite; WAL side files removed after each run), and
 * when accepted, read as a request would: recent answers within a budget, one answer by
 * id, counts, the history automaton (cache lookup or build), the integrity check. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "datasets/history.h"

static void cleanup(const char *p) {
    char side[512];
    unlink(p);
    snprintf(side, sizeof side, "%s-wal", p);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", p);
    unlink(side);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char path[256];
    if (!path[0]) {
        /* tmpfs when there is one: SQLite's fsyncs then cost nothing */
        const char *dir = getenv("TMPDIR");
        if (!dir || !*dir) dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(path, sizeof path, "%s/sdnpu-fuzz-history-%ld.db", dir, (long)getpid());
    }
    cleanup(path);
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    if (size) fwrite(data, 1, size, f);
    fclose(f);
    sdn_history *h = NULL;
    sdn_err err = {0};
    if (sdn_history_open(path, &h, &err) == SDN_OK) {
        sdn_history_answer *a = NULL;
        int n = 0;
        if (sdn_history_recent(h, "g", "A", 1000, &a, &n, NULL) == SDN_OK) sdn_history_answers_free(a, n);
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
        if (sdn_history_automaton(h, "g", "A", 500, &b, &len, &hit, &na, &nt, NULL) == SDN_OK) free(b);
        (void)sdn_history_check(h, NULL);
        sdn_history_close(h);
    } else if (!err.msg[0]) {
        abort();
    }
    cleanup(path);
    return 0;
}
