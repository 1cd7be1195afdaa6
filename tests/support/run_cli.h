/* run_cli.h - running the built `sdnpu` program ($SDN_CLI) from a test: arguments in, exit code
 * and captured stdout/stderr out, with a time limit (test_cli, test_cli_options). */
#ifndef SDN_TEST_RUN_CLI_H
#define SDN_TEST_RUN_CLI_H

#include <stddef.h>

typedef struct tu_cmd {
    int rc;    /* exit code */
    char *out; /* stdout, NUL-terminated */
    char *err; /* stderr */
} tu_cmd;

/* Run $SDN_CLI with the NULL-terminated arguments (after the program name), standard input
 * from stdin_path (NULL: /dev/null). Fails the running test when the program cannot start, is
 * killed by a signal, or runs past 60 s times SDN_TEST_TIME_SCALE (.ci/sanitize sets 4). */
tu_cmd tu_run_cli(const char *const *args, const char *stdin_path);
void tu_cmd_free(tu_cmd *r);

/* The whole file, NUL-terminated (fails the test when it cannot be read); its size in *n
 * when n is not NULL. */
char *tu_slurp(const char *path, size_t *n);

#endif
