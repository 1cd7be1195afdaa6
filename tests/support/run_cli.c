/* run_cli.c - see run_cli.h. The 60 s limit: the slowest command of test_cli, a first --graphs
 * run, profiles the model in about 2 s on 2 busy cores. */
#include "support/run_cli.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <cmocka.h>

#include "support/test_util.h"

extern char **environ;

#define CMD_TIMEOUT_S 60

static int cmd_timeout_s(void) {
    const char *e = getenv("SDN_TEST_TIME_SCALE");
    int k = e ? atoi(e) : 1;
    return CMD_TIMEOUT_S * (k >= 1 && k <= 100 ? k : 1);
}

char *tu_slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)(sz > 0 ? sz : 0) + 1);
    assert_non_null(b);
    size_t got = sz > 0 ? fread(b, 1, (size_t)sz, f) : 0;
    b[got] = 0;
    fclose(f);
    if (n) *n = got;
    return b;
}

void tu_cmd_free(tu_cmd *r) {
    free(r->out);
    free(r->err);
}

tu_cmd tu_run_cli(const char *const *args, const char *stdin_path) {
    const char *cli = getenv("SDN_CLI");
    if (!cli) fail_msg("SDN_CLI is not set (run through ctest)");
    const char *argv[64];
    int n = 0;
    argv[n++] = cli;
    for (; args[n - 1] && n < 63; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    static char po[1024], pe[1024]; /* own copies: tu_tmp's buffers rotate */
    snprintf(po, sizeof po, "%s", tu_tmp("cli.stdout"));
    snprintf(pe, sizeof pe, "%s", tu_tmp("cli.stderr"));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, stdin_path ? stdin_path : "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, po, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, pe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int e = posix_spawn(&pid, cli, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e) fail_msg("cannot spawn %s: %s", cli, strerror(e));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int status = 0, timed_out = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) fail_msg("waitpid: %s", strerror(errno));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (t1.tv_sec - t0.tv_sec > cmd_timeout_s()) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            timed_out = 1;
            break;
        }
        struct timespec nap = {0, 2000000};
        nanosleep(&nap, NULL);
    }
    tu_cmd r = {.rc = !timed_out && WIFEXITED(status) ? WEXITSTATUS(status) : -1, .out = tu_slurp(po, NULL), .err = tu_slurp(pe, NULL)};
    if (timed_out || WIFSIGNALED(status)) {
        print_message("stderr:\n%s\n", r.err);
        int sig = timed_out ? 0 : WTERMSIG(status);
        tu_cmd_free(&r); /* fail_msg does not return */
        if (timed_out) fail_msg("sdnpu %s ... did not finish within %d s", argv[1], cmd_timeout_s());
        fail_msg("sdnpu %s ... killed by signal %d", argv[1], sig);
    }
    return r;
}
