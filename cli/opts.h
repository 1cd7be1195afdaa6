/* opts.h - the one option vocabulary of the `sdnpu` program, written once.
 *
 * A command describes its options as a table (name, value kind, range, destination, value
 * name, help line with the default) and calls cli_parse: it accepts `--opt value` and
 * `--opt=value`, `-h`/`--help` (the help generated from the table, ending with the command's
 * runnable example), repeatable list options, positional arguments, deprecated spellings
 * (parsed as the new name with a note on stderr: make-story-task --tokens, trace-import
 * --max-new, bench-model --gen: --max-tokens; bench-sam --tokens: --context-tokens; trace
 * --topk: --prefill-topk; bench-model and bench-graphs --prompt N: --prompt-tokens), and
 * returns exit code 2 for every usage error with a message naming the option and the value.
 * Every command parses its options with it (main.c takes the program's global options out
 * first with cli_extract); options several commands take are declared once (CLI_O_* below).
 * Defaults shared with the library are the library's (SDNPU_DEFAULT_* in sdnpu.h, read
 * through sdnpu_request_init / sdnpu_context_params_init).
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
    CLI_LONG,   /* *(long *)dest, in [lo, hi] */
    CLI_ENUM,   /* *(const char **)dest, one of the '|'-separated words of .choices */
    CLI_FN,     /* .fn(dest, value, why, cap) parses the value (0, or -1 with why filled) */
    CLI_REFUSE, /* a spelling refused with the message in .choices (exit 2; takes no value) */
} cli_kind;

/* What cli_parse checks of a value at once (after storing it). */
typedef enum cli_check {
    CLI_CHECK_NONE,
    CLI_CHECK_OUT_FILE, /* an output file: cli_check_output (failure: exit 1) */
    CLI_CHECK_OUT_DIR,  /* an output directory: cli_check_output_dir (failure: exit 1) */
} cli_check;

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
    const char *choices; /* CLI_ENUM: "a|b|c"; CLI_REFUSE: the message */
    int (*fn)(void *dest, const char *value, char *why, size_t cap); /* CLI_FN */
    cli_check check;    /* output paths checked while parsing */
} cli_opt;

typedef struct cli_cmd {
    const char *name;     /* "run" */
    const char *synopsis; /* "--model M --prompt TEXT [options]" */
    const char *about;    /* one line: what the command does (NULL: none) */
    const cli_opt *opts;  /* table ended by {NULL} */
    const char *positional; /* name of positional arguments ("MODEL ..."), NULL: none allowed */
    int max_positional;
    const char *epilogue;           /* text after the options (notes, lists); NULL: none */
    void (*epilogue_fn)(FILE *f);   /* generated text after the epilogue (shape lists, ...); NULL: none */
} cli_cmd;

/* Parse argv[1..argc) of command c (argv[0] is its name). Positional arguments are stored in
 * pos (up to c->max_positional; *n_pos gets their number). Returns CLI_CONTINUE to go on, or
 * the exit code the command should return: 0 after printing --help, 2 after a usage error
 * (message printed). List destinations are malloc'd: cli_list_free. */
int cli_parse(const cli_cmd *c, int argc, char **argv, const char **pos, int *n_pos);
/* Take the options of table `opts` out of argv[1..*argc) wherever they stand (the program's
 * global options: --kernel, ...), storing their values; the other arguments stay in order
 * (the value of an option not in the table is not looked at: a table option name there is
 * taken). Returns 0, or 2 after a usage error naming the option. */
int cli_extract(const char *who, const cli_opt *opts, int *argc, char **argv);
/* Parse a comma-separated list of integers in [lo, hi] (at most cap) for option `opt`;
 * returns the count, or -1 after "sdnpu CMD: option OPT: ..." on stderr. */
int cli_int_list(const char *cmd, const char *opt, const char *v, long lo, long hi, long *out, int cap);
/* "sdnpu VERSION (libsdnpu VERSION)" (--version of the program and of every command). */
void cli_version(FILE *f);
/* Parse integer `val` of option `opt` in [lo, hi] (items of list values); prints "sdnpu: option
 * OPT: ..." and returns -1 when it is not one. */
int cli_int(const char *opt, const char *val, long lo, long hi, long *out);
/* Print the help of c generated from its table, and its runnable example (cli_example). */
void cli_help(const cli_cmd *c, FILE *f);
void cli_list_free(cli_list *l);

/* The runnable example of command `name` (NULL when it has none); listed at the end of every
 * --help. */
const char *cli_example(const char *name);


/* Default compute threads: the library's (sdnpu_context_params_init: SDNPU_DEFAULT_THREADS,
 * min(the CPUs this process may use, SDNPU_DEFAULT_MAX_THREADS)). */
int cli_default_threads(void);
/* Seconds on a monotonic clock (for the commands' own timings). */
double cli_now(void);
/* The help line of --threads with that default ("compute threads (default: ..., here N)"). */
const char *cli_threads_help(void);

/* The names --chat-template takes (tokenizer/chat_template.h's families, auto and none). */
#define CLI_CHAT_TEMPLATES "auto|none|chatml|llama3|llama2|vicuna|plain|gemma"

/* ---- the shared option vocabulary ----
 * Options several commands take are declared here once (name, kind, value name, the checks);
 * a command gives the destination, the range where its own differs, and the help line with its
 * default. */
#define CLI_O_MODEL(d, h) {.name = "--model", .kind = CLI_STR, .dest = (d), .arg = "M", .help = (h)}
#define CLI_O_MODELS(d, h) {.name = "--model", .kind = CLI_LIST, .dest = (d), .arg = "M", .help = (h)}
#define CLI_O_TOKENIZER(d) {.name = "--tokenizer", .kind = CLI_STR, .dest = (d), .arg = "FILE", .help = "llama2.c tokenizer.bin (for llama2.c checkpoints)"}
#define CLI_O_THREADS(d) {.name = "--threads", .kind = CLI_INT, .dest = (d), .lo = 1, .hi = 256, .arg = "N", .help = cli_threads_help()}
#define CLI_O_THREADS_H(d, h) {.name = "--threads", .kind = CLI_INT, .dest = (d), .lo = 1, .hi = 256, .arg = "N", .help = (h)}
#define CLI_O_CTX(d, lo_, h) {.name = "--ctx", .kind = CLI_INT, .dest = (d), .lo = (lo_), .hi = 1 << 22, .arg = "N", .help = (h)}
#define CLI_O_MAX_TOKENS(d, lo_, hi_, h) {.name = "--max-tokens", .kind = CLI_INT, .dest = (d), .lo = (lo_), .hi = (hi_), .arg = "N", .help = (h)}
#define CLI_O_SEED(d, hi_, h) {.name = "--seed", .kind = CLI_U64, .dest = (d), .lo = 0, .hi = (hi_), .arg = "S", .help = (h)}
#define CLI_O_TEMP(d, lo_, hi_, h) {.name = "--temp", .kind = CLI_FLOAT, .dest = (d), .lo = (lo_), .hi = (hi_), .arg = "T", .help = (h)}
#define CLI_O_SPEC(d, h) {.name = "--spec", .kind = CLI_STR, .dest = (d), .arg = "METHOD", .help = (h)}
#define CLI_O_CHAT_TEMPLATE(d) {.name = "--chat-template", .kind = CLI_ENUM, .dest = (d), .arg = "NAME", .choices = CLI_CHAT_TEMPLATES, .help = "auto (default), none, chatml, llama3, llama2, vicuna, plain, gemma"}
#define CLI_O_DATASET(d) {.name = "--dataset", .kind = CLI_LIST, .dest = (d), .arg = "D", .help = "task file or directory (repeatable, 32 at most; default ../shared/datasets)"}
#define CLI_O_TASKS(d) {.name = "--tasks", .kind = CLI_STR, .dest = (d), .arg = "LIST", .help = "only these tasks (comma-separated, e.g. summary,rag)"}
#define CLI_O_LIMIT(d) {.name = "--limit", .kind = CLI_INT, .dest = (d), .lo = 1, .hi = 1 << 30, .arg = "N", .help = "at most N requests per task"}
#define CLI_O_USE_INPUT(d) {.name = "--use-input", .kind = CLI_FLAG, .dest = (d), .help = "render each row's original input as the user turn (as Spec-Bench does)"}
#define CLI_O_PREFILL_TOPK(d, lo_, h) {.name = "--prefill-topk", .kind = CLI_INT, .dest = (d), .lo = (lo_), .hi = 64, .arg = "K", .help = (h)}
#define CLI_O_DRAFT_MAX(d, h) {.name = "--draft-max", .kind = CLI_INT, .dest = (d), .lo = 1, .hi = 63, .arg = "N", .help = (h)}
#define CLI_O_DRAFT_DEPTH(d, h) {.name = "--draft-depth", .kind = CLI_INT, .dest = (d), .lo = 1, .hi = 63, .arg = "D", .help = (h)}
#define CLI_O_DRAFT_BRANCH(d, h) {.name = "--draft-branch", .kind = CLI_INT, .dest = (d), .lo = 1, .hi = 63, .arg = "B", .help = (h)}
#define CLI_O_PARAM(d) {.name = "--param", .kind = CLI_LIST, .dest = (d), .arg = "KEY=VALUE", .help = "a drafting-method parameter (repeatable; keys below)"}
#define CLI_O_GRAPHS(d) {.name = "--graphs", .kind = CLI_STR, .dest = (d), .arg = "MODE", .help = "[experimental] fixed-shape graphs switched during prefill: single, sync, async, progressive, optimal (evaluation only)"}
#define CLI_O_GRAPH_BLOCKS(d, name_) {.name = (name_), .kind = CLI_INT, .dest = (d), .lo = 1, .hi = 128, .arg = "N", .help = "graph layer blocks (default 8)"}
#define CLI_O_G1(d) {.name = "--g1", .kind = CLI_INT, .dest = (d), .lo = 1, .hi = 4096, .arg = "S1", .help = "prefill graph rows (default 256)"}
#define CLI_O_G2(d) {.name = "--g2", .kind = CLI_INT, .dest = (d), .lo = 1, .hi = 64, .arg = "S2", .help = "decode graph rows (default: from the profile)"}
#define CLI_O_PROFILE_DB(d) {.name = "--profile-db", .kind = CLI_STR, .dest = (d), .arg = "FILE", .help = "graph profile cache (default $SDNPU_CACHE/profiles.sqlite)"}
#define CLI_O_OUT(d, h) {.name = "--out", .kind = CLI_STR, .dest = (d), .arg = "FILE", .help = (h), .check = CLI_CHECK_OUT_FILE}
#define CLI_O_OUT_DIR(d, h) {.name = "--out", .kind = CLI_STR, .dest = (d), .arg = "DIR", .help = (h), .check = CLI_CHECK_OUT_DIR}
#define CLI_O_JSON(d, h) {.name = "--json", .kind = CLI_STR, .dest = (d), .arg = "FILE", .help = (h), .check = CLI_CHECK_OUT_FILE}
#define CLI_O_CSV(d, h) {.name = "--csv", .kind = CLI_STR, .dest = (d), .arg = "FILE", .help = (h), .check = CLI_CHECK_OUT_FILE}
#define CLI_O_RESULTS_DB(d) {.name = "--results-db", .kind = CLI_STR, .dest = (d), .arg = "FILE", .help = "append the run to an SQLite results database", .check = CLI_CHECK_OUT_FILE}
#define CLI_O_QUIET(d, h) {.name = "--quiet", .kind = CLI_FLAG, .dest = (d), .help = (h)}
#define CLI_O_TYPES(d, h) {.name = "--types", .kind = CLI_STR, .dest = (d), .arg = "LIST", .help = (h)}
#define CLI_O_SHAPES(d, h) {.name = "--shapes", .kind = CLI_STR, .dest = (d), .arg = "LIST", .help = (h)}
#define CLI_O_REPS(d, hi_, h) {.name = "--reps", .kind = CLI_INT, .dest = (d), .lo = 1, .hi = (hi_), .arg = "N", .help = (h)}
#define CLI_O_END {NULL}

/* ---- the sampling and constraint options of run and chat ----
 * One group, declared once: the same names, ranges, help lines and defaults (the library's,
 * sdnpu_request_init) in `sdnpu run` (and demo), `sdnpu chat` and `sdnpu serve`, where they are
 * the settings of requests that leave them out (a request's body sets its own; docs/server.md).
 * The constraint options are run's and chat's: a server's requests bring their own. */
typedef struct cli_sampling {
    cli_list stops;                              /* --stop STR ... */
    float temp, top_p, min_p, repeat_penalty;    /* --temp (0: greedy) --top-p --min-p --repeat-penalty */
    int top_k, repeat_last_n;                    /* --top-k --repeat-last-n */
    uint64_t seed;                               /* --seed */
    const char *grammar_file, *json_schema_file; /* --grammar FILE --json-schema FILE */
} cli_sampling;
/* The defaults (sdnpu_request_init's). */
void cli_sampling_init(cli_sampling *s);
void cli_sampling_free(cli_sampling *s);
/* Check the --stop strings: none empty (it would end every answer at once), at most max_stops
 * (0: no limit). Prints "sdnpu CMD: option --stop: why" and returns -1 when not. */
int cli_sampling_check(const cli_sampling *s, const char *cmd, int max_stops);
/* Check --history-scope (run, serve, bench): NULL, "group" or "global", and "global" only
 * with a history store (history: the --history value). Prints "sdnpu CMD: option
 * --history-scope: why" and returns -1 when not; *global (optional): 1 for "global". */
int cli_history_scope_check(const char *scope, const char *history, const char *cmd, int *global);
/* Copy the sampling settings (not the constraint: its files are read by the command) into r. */
struct sdnpu_request;
void cli_sampling_apply(const cli_sampling *s, struct sdnpu_request *r);
/* The eight sampling options (table entries pointing into *s); seed_help: --seed's help line. */
#define CLI_O_SAMPLING(s) CLI_O_SAMPLING_SEED(s, "sampling seed (default 0)")
#define CLI_O_SAMPLING_SEED(s, seed_help)                                                                                                    \
    {.name = "--stop", .kind = CLI_LIST, .dest = &(s)->stops, .arg = "STR", .help = "end an answer before STR (repeatable)"},                \
        CLI_O_TEMP(&(s)->temp, 0, 100, "sampling temperature (default 0: greedy)"),                                                         \
        {.name = "--top-k", .kind = CLI_INT, .dest = &(s)->top_k, .lo = 0, .hi = 1 << 24, .arg = "K", .help = "sample from the K most likely tokens (default 0: all)"}, \
        {.name = "--top-p", .kind = CLI_FLOAT, .dest = &(s)->top_p, .lo = 0, .hi = 1, .arg = "P", .help = "nucleus sampling (default 1)"}, \
        CLI_O_SEED(&(s)->seed, 9.2e18, seed_help),                                                                                          \
        {.name = "--min-p", .kind = CLI_FLOAT, .dest = &(s)->min_p, .lo = 0, .hi = 1, .arg = "P",                                            \
         .help = "drop tokens less than P times as likely as the most likely (default 0: off)"},                                           \
        {.name = "--repeat-penalty", .kind = CLI_FLOAT, .dest = &(s)->repeat_penalty, .lo = 0, .hi = 10, .arg = "R",                         \
         .help = "penalize tokens seen in the last --repeat-last-n, greedy too (default 1: off)"},                                         \
        {.name = "--repeat-last-n", .kind = CLI_INT, .dest = &(s)->repeat_last_n, .lo = 0, .hi = 1 << 20, .arg = "N",                        \
         .help = "window of --repeat-penalty in tokens, prompt included (default 64)"}
/* The two constraint options (at most one of them; sdn_tool_read_constraint reads the file). */
#define CLI_O_CONSTRAINT(s)                                                                                                                  \
    {.name = "--grammar", .kind = CLI_STR, .dest = &(s)->grammar_file, .arg = "FILE", .help = "constrain the answer to a GBNF grammar (root rule \"root\")"}, \
        {.name = "--json-schema", .kind = CLI_STR, .dest = &(s)->json_schema_file, .arg = "FILE", .help = "constrain the answer to JSON valid against a JSON schema"}

/* ---- the prefix cache options (run, chat, bench, serve; docs/commands.md) ----
 * --prefix-cache DIR adds the disk tier (so that a second process skips a document's prefill),
 * --prefix-cache-mb N the memory budget (0: off; default: def_mb, the command's),
 * --prefix-cache-disk-mb N the directory's budget. */
typedef struct cli_prefix_cache {
    const char *dir;
    int mem_mb, disk_mb;
} cli_prefix_cache;
void cli_prefix_cache_init(cli_prefix_cache *p, int def_mb);
struct sdnpu_model_params;
/* Into the model parameters (off when both the memory budget and the directory are 0). */
void cli_prefix_cache_apply(const cli_prefix_cache *p, struct sdnpu_model_params *mp);
#define CLI_O_PREFIX_CACHE(p, mb_help)                                                                                                           {.name = "--prefix-cache", .kind = CLI_STR, .dest = &(p)->dir, .arg = "DIR",                                                                    .help = "keep what prefill computed for prompt prefixes in DIR too, for later runs (made 0700; off by default)"},                               {.name = "--prefix-cache-mb", .kind = CLI_INT, .dest = &(p)->mem_mb, .lo = 0, .hi = 1 << 24, .arg = "N", .help = (mb_help)},               {.name = "--prefix-cache-disk-mb", .kind = CLI_INT, .dest = &(p)->disk_mb, .lo = 1, .hi = 1 << 30, .arg = "N",                                .help = "the --prefix-cache directory's budget in MiB (default 4096)"}

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
