/* opts.c - see opts.h: the table-driven option parser and help, the rules main.c applies to
 * every command (--opt=value, -h, deprecated spellings), the default thread count, the
 * up-front check of output paths, and each command's runnable example. */
#include "cli/opts.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sdnpu.h"
#include "tools/tools.h"

static const struct {
    const char *cmd, *example;
} k_examples[] = {
    {"demo", "sdnpu demo --max-tokens 64"},
    {"run", "sdnpu run --model smollm2-135m-instruct --prompt \"Name three colours.\" --max-tokens 32"},
    {"chat", "sdnpu chat --model smollm2-135m-instruct --system \"You answer briefly.\""},
    {"serve", "sdnpu serve --model smollm2-135m-instruct --history answers.sqlite --port 8080"},
    {"pull", "sdnpu pull smollm2-135m-instruct"},
    {"info", "sdnpu info --model smollm2-135m-instruct"},
    {"make-model", "sdnpu make-model --shape tiny-llama --type Q8_0 --out /tmp/tiny.gguf"},
    {"tokenize", "sdnpu tokenize --model smollm2-135m-instruct \"Hello, world\""},
    {"bench-model", "sdnpu bench-model --shape qwen2.5-0.5b --types Q8_0 --prompt-tokens 64 --max-tokens 16"},
    {"bench-verify", "sdnpu bench-verify --model smollm2-135m-instruct --rows 1,2,4,8 --json /tmp/curve.json"},
    {"bench-attention", "sdnpu bench-attention --context 4096 --rows 1,16 --cache f16,q8"},
    {"bench-sam", "sdnpu bench-sam"},
    {"bench-kernels", "sdnpu bench-kernels --types Q8_0"},
    {"profile", "sdnpu profile --model smollm2-135m-instruct"},
    {"bench-graphs", "sdnpu bench-graphs --part ttft --reps 3 --threads 1"},
    {"bench", "sdnpu bench --model smollm2-135m-instruct --dataset summary --limit 2 --max-tokens 32 --budgets default,8 --out /tmp/bench"},
    {"trace", "sdnpu trace --model M.gguf --dataset stories.jsonl --out /tmp/stories.trace.jsonl"},
    {"trace-import", "sdnpu trace-import --outputs answers.jsonl --tokenizer tokenizer.bin --out /tmp/t.trace.jsonl"},
    {"study", "sdnpu study --traces /tmp/stories.trace.jsonl --csv /tmp/study.csv"},
    {"make-story-task", "sdnpu make-story-task --model stories260K.bin --tokenizer tok512.bin --out /tmp/stories.jsonl --n 4"},
};

const char *cli_example(const char *name) {
    for (size_t i = 0; i < sizeof k_examples / sizeof k_examples[0]; i++)
        if (!strcmp(k_examples[i].cmd, name)) return k_examples[i].example;
    return NULL;
}

void cli_list_free(cli_list *l) {
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

void cli_param_help(FILE *f) { sdn_tool_param_help(f); }

void cli_prefix_cache_init(cli_prefix_cache *p, int def_mb) {
    p->dir = NULL;
    p->mem_mb = def_mb;
    p->disk_mb = 0;
}

void cli_prefix_cache_apply(const cli_prefix_cache *p, sdnpu_model_params *mp) {
    /* with a directory and no memory budget asked for, blocks pass through memory only */
    mp->prefix_cache_bytes = (uint64_t)p->mem_mb << 20;
    mp->prefix_cache_dir = p->dir;
    mp->prefix_cache_disk_bytes = (uint64_t)p->disk_mb << 20;
}

void cli_sampling_init(cli_sampling *s) {
    memset(s, 0, sizeof *s);
    sdnpu_request rq; /* the defaults are the library's (SDNPU_DEFAULT_* in sdnpu.h) */
    sdnpu_request_init(&rq);
    s->temp = rq.temperature;
    s->top_p = rq.top_p;
    s->top_k = rq.top_k;
    s->min_p = rq.min_p;
    s->repeat_penalty = rq.repeat_penalty;
    s->repeat_last_n = rq.repeat_last_n;
    s->seed = rq.seed;
}

void cli_sampling_free(cli_sampling *s) { cli_list_free(&s->stops); }

int cli_sampling_check(const cli_sampling *s, const char *cmd, int max_stops) {
    for (int i = 0; i < s->stops.n; i++)
        if (!s->stops.v[i][0]) {
            fprintf(stderr, "sdnpu %s: option --stop: an empty stop string would end every answer at once\n", cmd);
            return -1;
        }
    if (max_stops > 0 && s->stops.n > max_stops) {
        fprintf(stderr, "sdnpu %s: option --stop: %d stop strings, at most %d\n", cmd, s->stops.n, max_stops);
        return -1;
    }
    return 0;
}

int cli_history_scope_check(const char *scope, const char *history, const char *cmd, int *global) {
    const int g = scope && !strcmp(scope, "global");
    if (global) *global = g;
    if (scope && !g && strcmp(scope, "group")) {
        fprintf(stderr, "sdnpu %s: option --history-scope: '%s' is not group or global\n", cmd, scope);
        return -1;
    }
    if (g && !history) {
        fprintf(stderr, "sdnpu %s: option --history-scope: global needs --history FILE\n", cmd);
        return -1;
    }
    return 0;
}

void cli_sampling_apply(const cli_sampling *s, sdnpu_request *r) {
    r->temperature = s->temp;
    r->top_k = s->top_k;
    r->top_p = s->top_p;
    r->min_p = s->min_p;
    r->repeat_penalty = s->repeat_penalty;
    r->repeat_last_n = s->repeat_last_n;
    r->seed = s->seed;
    r->stop = s->stops.v;
    r->n_stop = s->stops.n;
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A help line wrapped at spaces to 110 columns, continued under the first (column 24). */
static void help_text(FILE *f, const char *h) {
    const int width = 110 - 24;
    while ((int)strlen(h) > width) {
        int cut = width;
        while (cut > 0 && h[cut] != ' ') cut--;
        if (cut == 0) break;
        fprintf(f, "%.*s\n%24s", cut, h, "");
        h += cut + 1;
    }
    fprintf(f, "%s\n", h);
}

void cli_help(const cli_cmd *c, FILE *f) {
    fprintf(f, "usage: sdnpu %s %s\n", c->name, c->synopsis);
    if (c->about) fprintf(f, "%s\n", c->about);
    fprintf(f, "\noptions (--opt VALUE or --opt=VALUE):\n");
    for (const cli_opt *o = c->opts; o->name; o++) {
        if (!o->help) continue;
        char lhs[64];
        snprintf(lhs, sizeof lhs, "%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        if (strlen(lhs) < 22) fprintf(f, "  %-22s", lhs);
        else fprintf(f, "  %s\n  %-22s", lhs, "");
        help_text(f, o->help);
        if (!strcmp(o->name, "--param")) cli_param_help(f);
    }
    fprintf(f, "  -h, --help            this help\n  --version             the program's version\n"
               "  (and the options of every command: --kernel, --prefill-matmul, --cache-type-k, --cache-type-v; sdnpu --help)\n");
    if (c->epilogue) fprintf(f, "\n%s%s", c->epilogue, c->epilogue[strlen(c->epilogue) - 1] == '\n' ? "" : "\n");
    if (c->epilogue_fn) c->epilogue_fn(f);
    const char *ex = cli_example(c->name);
    if (ex) fprintf(f, "\nexample:\n  %s\n", ex);
}

/* Old spellings, by command ("*": every command), and their current names. */
static const struct {
    const char *cmd, *old, *now;
} k_aliases[] = {
    {"make-story-task", "--tokens", "--max-tokens"},
    {"bench-sam", "--tokens", "--context-tokens"},
    {"trace-import", "--max-new", "--max-tokens"},
    {"bench-model", "--gen", "--max-tokens"},
    {"bench-model", "--prompt", "--prompt-tokens"},
    {"bench-graphs", "--prompt", "--prompt-tokens"},
    {"trace", "--topk", "--prefill-topk"},
};

static int set_value(const cli_cmd *c, const cli_opt *o, const char *v) {
    char *end;
    errno = 0;
    switch (o->kind) {
    case CLI_STR: *(const char **)o->dest = v; return 0;
    case CLI_ENUM: {
        size_t vl = strlen(v);
        for (const char *p = o->choices; p && *p;) {
            const char *e = strchr(p, '|');
            size_t l = e ? (size_t)(e - p) : strlen(p);
            if (l == vl && !strncmp(p, v, l)) {
                *(const char **)o->dest = v;
                return 0;
            }
            p = e ? e + 1 : p + l;
        }
        char list[256];
        snprintf(list, sizeof list, "%s", o->choices ? o->choices : "");
        for (char *q = list; *q; q++)
            if (*q == '|') *q = ',';
        fprintf(stderr, "sdnpu %s: option %s: '%s' is not one of %s\n", c->name, o->name, v, list);
        return -1;
    }
    case CLI_FN: {
        char why[256] = "";
        if (o->fn(o->dest, v, why, sizeof why)) {
            fprintf(stderr, "sdnpu %s: option %s: '%s': %s\n", c->name, o->name, v, why[0] ? why : "bad value");
            return -1;
        }
        return 0;
    }
    case CLI_LIST: {
        cli_list *l = o->dest;
        const char **nv = realloc(l->v, (size_t)(l->n + 1) * sizeof *nv);
        if (!nv) { fprintf(stderr, "sdnpu %s: out of memory\n", c->name); return -1; }
        l->v = nv;
        l->v[l->n++] = v;
        return 0;
    }
    case CLI_INT:
    case CLI_LONG:
    case CLI_U64: {
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end || (double)x < o->lo || (double)x > o->hi) {
            fprintf(stderr, "sdnpu %s: option %s: '%s' is not an integer in [%.0f, %.0f]\n", c->name, o->name, v, o->lo, o->hi);
            return -1;
        }
        if (o->kind == CLI_INT) *(int *)o->dest = (int)x;
        else if (o->kind == CLI_LONG) *(long *)o->dest = (long)x;
        else *(uint64_t *)o->dest = (uint64_t)x;
        return 0;
    }
    case CLI_FLOAT:
    case CLI_DOUBLE: {
        double x = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(x) || x < o->lo || x > o->hi) {
            fprintf(stderr, "sdnpu %s: option %s: '%s' is not a number in [%g, %g]\n", c->name, o->name, v, o->lo, o->hi);
            return -1;
        }
        if (o->kind == CLI_FLOAT) *(float *)o->dest = (float)x;
        else *(double *)o->dest = x;
        return 0;
    }
    case CLI_FLAG: *(int *)o->dest = 1; return 0;
    case CLI_REFUSE: return -1;
    }
    return -1;
}

int cli_parse(const cli_cmd *c, int argc, char **argv, const char **pos, int *n_pos) {
    if (n_pos) *n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_help(c, stdout);
            return 0;
        }
        if (!strcmp(a, "--version")) {
            cli_version(stdout);
            return 0;
        }
        if (a[0] != '-' || !strcmp(a, "-")) {
            if (!c->positional || !n_pos || *n_pos >= c->max_positional) {
                fprintf(stderr, "sdnpu %s: unexpected argument '%s'%s\n", c->name, a,
                        c->positional ? " (too many)" : " (this command takes options only; see --help)");
                return CLI_EXIT_USAGE;
            }
            pos[(*n_pos)++] = a;
            continue;
        }
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        const cli_opt *o = c->opts;
        for (; o->name; o++)
            if (strlen(o->name) == nl && !strncmp(o->name, a, nl)) break;
        for (size_t k = 0; !o->name && k < sizeof k_aliases / sizeof k_aliases[0]; k++)
            if (!strcmp(k_aliases[k].cmd, c->name) && strlen(k_aliases[k].old) == nl && !strncmp(k_aliases[k].old, a, nl)) {
                fprintf(stderr, "sdnpu %s: note: %s is deprecated, use %s\n", c->name, k_aliases[k].old, k_aliases[k].now);
                for (o = c->opts; o->name && strcmp(o->name, k_aliases[k].now); o++) {}
            }
        if (!o->name) {
            fprintf(stderr, "sdnpu %s: unknown option %.*s (sdnpu %s --help lists the options)\n", c->name, (int)nl, a, c->name);
            return CLI_EXIT_USAGE;
        }
        if (o->deprecated_for) fprintf(stderr, "sdnpu %s: note: %s is deprecated, use %s\n", c->name, o->name, o->deprecated_for);
        if (o->kind == CLI_REFUSE) {
            fprintf(stderr, "sdnpu %s: option %s: %s\n", c->name, o->name, o->choices);
            return CLI_EXIT_USAGE;
        }
        const char *v = NULL;
        if (o->kind == CLI_FLAG) {
            if (eq) {
                fprintf(stderr, "sdnpu %s: option %s takes no value\n", c->name, o->name);
                return CLI_EXIT_USAGE;
            }
        } else if (eq) v = eq + 1;
        else if (i + 1 < argc) v = argv[++i];
        else {
            fprintf(stderr, "sdnpu %s: option %s needs a value (%s)\n", c->name, o->name, o->arg ? o->arg : "VALUE");
            return CLI_EXIT_USAGE;
        }
        if (set_value(c, o, v)) return CLI_EXIT_USAGE;
        if (o->check == CLI_CHECK_OUT_FILE && cli_check_output(o->name, v)) return CLI_EXIT_RUNTIME;
        if (o->check == CLI_CHECK_OUT_DIR && cli_check_output_dir(o->name, v)) return CLI_EXIT_RUNTIME;
    }
    return CLI_CONTINUE;
}

int cli_extract(const char *who, const cli_opt *opts, int *argc, char **argv) {
    const cli_cmd c = {.name = who, .opts = opts};
    int j = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        const cli_opt *o = opts;
        for (; o->name; o++)
            if (strlen(o->name) == nl && !strncmp(o->name, a, nl)) break;
        if (!o->name) {
            argv[j++] = argv[i];
            continue;
        }
        const char *v = NULL;
        if (eq) v = eq + 1;
        else if (i + 1 < *argc) v = argv[++i];
        else {
            fprintf(stderr, "sdnpu %s: option %s needs a value (%s)\n", who, o->name, o->arg ? o->arg : "VALUE");
            return CLI_EXIT_USAGE;
        }
        if (set_value(&c, o, v)) return CLI_EXIT_USAGE;
    }
    *argc = j;
    argv[j] = NULL;
    return 0;
}

int cli_int_list(const char *cmd, const char *opt, const char *v, long lo, long hi, long *out, int cap) {
    int n = 0;
    const char *p = v;
    for (;;) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (errno || end == p || (*end && *end != ',') || x < lo || x > hi) {
            fprintf(stderr, "sdnpu %s: option %s: '%s' is not a comma-separated list of integers in [%ld, %ld]\n", cmd, opt, v, lo, hi);
            return -1;
        }
        if (n == cap) {
            fprintf(stderr, "sdnpu %s: option %s: '%s': %d values at most\n", cmd, opt, v, cap);
            return -1;
        }
        out[n++] = x;
        if (!*end) return n;
        p = end + 1;
    }
}

int cli_default_threads(void) {
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    return cp.n_threads;
}

const char *cli_threads_help(void) {
    static char h[128];
    if (!h[0])
        snprintf(h, sizeof h, "compute threads (default: the CPUs this process may use, %d at most; here %d)", SDNPU_DEFAULT_MAX_THREADS,
                 cli_default_threads());
    return h;
}

int cli_check_output(const char *opt, const char *path) {
    if (!path || !strcmp(path, "-")) return 0;
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            fprintf(stderr, "sdnpu: option %s: %s is a directory, not a file\n", opt, path);
            return -1;
        }
        if (access(path, W_OK) != 0) {
            fprintf(stderr, "sdnpu: option %s: %s: cannot write: %s\n", opt, path, strerror(errno));
            return -1;
        }
        return 0;
    }
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", path);
    const char *dir = dirname(copy);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "sdnpu: option %s: %s: the directory %s does not exist\n", opt, path, dir);
        return -1;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) {
        fprintf(stderr, "sdnpu: option %s: %s: cannot create: %s\n", opt, path, strerror(errno));
        return -1;
    }
    close(fd);
    unlink(path);
    return 0;
}

int cli_check_output_dir(const char *opt, const char *dir) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", dir);
    for (;;) {
        struct stat st;
        if (stat(p, &st) == 0) {
            if (!S_ISDIR(st.st_mode)) {
                fprintf(stderr, "sdnpu: option %s: %s: %s is not a directory\n", opt, dir, p);
                return -1;
            }
            if (access(p, W_OK | X_OK) != 0) {
                fprintf(stderr, "sdnpu: option %s: %s: cannot write in %s: %s\n", opt, dir, p, strerror(errno));
                return -1;
            }
            return 0;
        }
        char *slash = strrchr(p, '/');
        if (!slash) return access(".", W_OK) == 0 ? 0 : (fprintf(stderr, "sdnpu: option %s: %s: cannot write here\n", opt, dir), -1);
        if (slash == p) { p[1] = 0; continue; }
        *slash = 0;
    }
}

char *cli_command_line(int argc, char **argv) {
    size_t cap = 8;
    for (int i = 0; i < argc; i++) cap += 4 * strlen(argv[i]) + 3;
    char *s = malloc(cap), *p = s;
    if (!s) return NULL;
    p += sprintf(p, "sdnpu");
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        *p++ = ' ';
        if (*a && !strpbrk(a, " \t\n'\"\\$`*?;&|<>()")) {
            p += sprintf(p, "%s", a);
            continue;
        }
        *p++ = '\'';
        for (; *a; a++) {
            if (*a == '\'') p += sprintf(p, "'\\''");
            else *p++ = *a;
        }
        *p++ = '\'';
    }
    *p = 0;
    return s;
}

void cli_version(FILE *f) { fprintf(f, "sdnpu %s (libsdnpu %s)\n", SDNPU_VERSION, sdnpu_version()); }

int cli_int(const char *opt, const char *val, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || end == val || *end || v < lo || v > hi) {
        fprintf(stderr, "sdnpu: option %s: '%s' is not an integer in [%ld, %ld]\n", opt, val, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

