/* opts.h - the one option vocabulary of the `sdnpu` program, written once.
 *
 * A command describes its options as a table (name, value kind, range, destination, value
 * name, help line with the default) and calls cli_parse: it accepts `--opt value` and
 * `--opt=value`, `-h`/`--help` (the help generated from the table, ending with the command's
 * runnable example), repeatable list options, positional arguments, deprecated spellings
 * (parsed as the new name with a note on stderr), and returns exit code 2 for every usage
 * error with a message naming the option. main.c applies the same rules (--opt=value, -h,
 * --version, deprecated spellings, the example after --help) to every command before it
 * runs, so the benchmark commands that still parse their own loops share them too.
 *
 * Exit codes of every command: 0 success, 1 runtime failure (a file that cannot be read, a
 * model that fails to load, ...), 2 usage error (unknown option, bad value, missing or
 * conflicting options). */
#ifndef SDN_CLI_OPTS_H
#define SDN_CLI_OPTS_H

#include <stdint.h>
#include <stdio.h>

#define CLI_EXIT_RUNTIME 1
#define CLI_EXIT_USAGE 2
#define CLI_CONTINUE (-1)

typedef enum cli_kind {
    CLI_FLAG,   /* no value: sets *(int *)dest = 1 */
    CLI_INT,    /* *(int *)dest, in [lo, hi] */
    CLI_U64,    /* *(uint64_t *)dest, in [lo, hi] */
    CLI_FLOAT,  /* *(float *)dest, in [lo, hi] */
    CLI_DOUBLE, /* *(double *)dest, in [lo, hi] */
    CLI_STR,    /* *(const char **)dest */
    CLI_LIST,   /* repeatable: appended to *(cli_list *)dest */
} cli_kind;

/* Values of a repeatable option (the strings point into argv). */
typedef struct cli_list {
    const char **v;
    int n;
} cli_list;

typedef struct cli_opt {
    const char *name;   /* "--max-tokens"; NULL ends the table */
    cli_kind kind;
    void *dest;
    double lo, hi;      /* range of numeric values */
    const char *arg;    /* value name in the help ("N"); NULL for flags */
    const char *help;   /* one help line, with the default; NULL: not listed (a deprecated spelling) */
    const char *deprecated_for; /* non-NULL: an old spelling of this option name (note printed) */
} cli_opt;

typedef struct cli_cmd {
    const char *name;     /* "run" */
    const char *synopsis; /* "--model M --prompt TEXT [options]" */
    const char *about;    /* one line: what the command does (NULL: none) */
    const cli_opt *opts;  /* table ended by {NULL} */
    const char *positional; /* name of positional arguments ("MODEL ..."), NULL: none allowed */
    int max_positional;
} cli_cmd;

/* Parse argv[1..argc) of command c (argv[0] is its name). Positional arguments are stored in
 * pos (up to c->max_positional; *n_pos gets their number). Returns CLI_CONTINUE to go on, or
 * the exit code the command should return: 0 after printing --help, 2 after a usage error
 * (message printed). List destinations are malloc'd: cli_list_free. */
int cli_parse(const cli_cmd *c, int argc, char **argv, const char **pos, int *n_pos);
/* Print the help of c generated from its table, and its runnable example (cli_example). */
void cli_help(const cli_cmd *c, FILE *f);
void cli_list_free(cli_list *l);

/* The runnable example of command `name` (NULL when it has none); listed at the end of every
 * --help. */
const char *cli_example(const char *name);

/* Rewrite argv of command `cmd` in place for the rules every command shares: "-h" becomes
 * "--help", "--opt=value" becomes "--opt" "value", and deprecated spellings (make-story-task --tokens,
 * trace-import --max-new, bench-model --gen: --max-tokens; bench-sam --tokens:
 * --context-tokens; trace --topk: --prefill-topk; bench-model and bench-graphs --prompt N:
 * --prompt-tokens) become the current name with a note on stderr. *argc may grow; argv must
 * have room for 2 * argc + 1 entries (main allocates it). */
void cli_normalize(const char *cmd, int *argc, char **argv);

/* Default compute threads: the CPUs this process may run on (sched_getaffinity), at least 1. */
int cli_default_threads(void);

/* Check before any work that `path` can be written as an output file: its directory exists
 * and a file can be created there (an existing file must be writable; a new one is created
 * and removed again). Prints "sdnpu: option OPT: PATH: why" and returns -1 when not. */
int cli_check_output(const char *opt, const char *path);

/* The same for a directory an output is written into (created when missing): the nearest
 * existing ancestor must be a writable directory. */
int cli_check_output_dir(const char *opt, const char *dir);

/* The command line as typed ("sdnpu CMD ARG ..."; arguments with spaces or quotes quoted in
 * single quotes), malloc'd; argv[0] is the command name. NULL when out of memory. */
char *cli_command_line(int argc, char **argv);

/* The `--param` help lines: every drafting parameter key with its range and default. */
void cli_param_help(FILE *f);

#endif
