/* tools.h - the tools library's small internal API for the command line. A file in cli/
 * includes only the public header (sdnpu.h), cli/ headers, datasets/ and tools/ headers and
 * the server's entry (server/server.h) - never a library module's header (tests/test_layering.c).
 * Whatever a command needs beyond the public API is done by a function here (or in the other
 * tools/ headers: bench_util.h, method_params.h, make_model.h, ...; datasets/bench.h, study.h), which
 * does the work and prints its results and errors exactly as the command always has (stdout;
 * stderr "sdnpu[ CMD]: ..."). The command keeps its option table (cli/opts.c is the only
 * parser), fills the options and makes one call. None of it is in libsdnpu.
 *   global options (main.c) .... sdn_tool_global_options (the program's
 *                                environment into the library's settings) tools/cli_machine.c
 *   info ....................... sdn_tool_info_describe, _info_machine   tools/cli_info.c
 *   tokenize ................... sdn_tool_tokenize                       tools/cli_tokenize.c
 *   pull, demo, run/chat/serve . sdn_tool_known_models_print, sdn_tool_pull,
 *                                sdn_tool_demo_model, _pull_if_known     tools/cli_models.c
 *                                (downloading: model_pull.h)             tools/model_pull.c
 *   run, chat, demo (text) ..... sdn_tool_read_constraint, _read_context,
 *                                _read_prompt_file, _read_stdin_text     tools/cli_text.c
 *   --param (bench, study) ..... sdn_tool_param_help; method_params.h    tools/method_params.c
 *   make-model ................. sdn_make_model (make_model.h), bench_check_shapes_types
 *   make-story-task, trace,
 *   trace-import ............... sdn_tool_make_story_task, _trace, _trace_import
 *                                                                        tools/cli_datasets.c
 *   profile .................... sdn_tool_profile                        tools/cli_profile.c
 *   bench-kernels .............. sdn_tool_bench_kernels                  tools/bench_kernels.c
 *   bench-attention ............ sdn_tool_bench_attention                tools/bench_attention.c
 *   bench-sam .................. sdn_tool_bench_sam                      tools/bench_sam.c
 *   bench-model ................ sdn_tool_bench_model                    tools/bench_model.c
 *   bench-verify ............... sdn_tool_bench_verify                   tools/bench_verify.c
 *   bench-graphs ............... sdn_tool_bench_graphs                   tools/bench_graphs.c
 *   study ...................... sdn_tool_study (datasets/study.h)       tools/cli_study.c
 *   bench ...................... sdn_tool_bench (datasets/bench.h)       tools/cli_bench.c
 * A benchmark's options are a struct of its own; sdn_tool_X_defaults(&o) fills the defaults
 * the option help prints, and sdn_tool_X(&o) runs it. run, chat and serve need nothing more
 * than the public API (cli/run_common.c, server/).
 */
#ifndef SDN_TOOLS_H
#define SDN_TOOLS_H

#include <stddef.h>
#include <stdio.h>

/* The global options of every command (main.c), where the program's environment becomes the
 * library's settings (libsdnpu reads none): kernel path ("--kernel NAME", else SDN_KERNEL,
 * else the best), prefill matmuls ("--prefill-matmul", else SDN_PREFILL_MATMUL, else auto),
 * KV cache types ("--cache-type-k/-v", else SDN_CACHE_TYPE_K/_V, else f16), the memory limit
 * (SDN_MEM_LIMIT_MB) and the cache directory (sdn_tool_env_cache_dir); each argument NULL
 * when the option was not given. The tests' support code calls it with four NULLs, so every
 * test honours the same variables. Returns 0, or 2 (a usage error) after "sdnpu: ..." on
 * stderr. */
int sdn_tool_global_options(const char *kernel, const char *prefill_mm, const char *cache_type_k, const char *cache_type_v);
/* The program's cache directory: $SDNPU_CACHE, else $XDG_CACHE_HOME/sdnpu, else
 * $HOME/.cache/sdnpu, else /tmp/sdnpu-cache. */
void sdn_tool_env_cache_dir(char *out, size_t cap);
/* A known model name not in the cache yet is pulled (notes on stderr, "sdnpu CMD: ..." on
 * failure): what run, chat and serve do on first use (the library never downloads). Anything
 * else (a path, an unknown name) is left to the loader. Returns 0, or 1 after the message. */
int sdn_tool_pull_if_known(const char *cmd, const char *model);

/* `sdnpu info` of one model file or known model name (tokenizer: a llama2.c tokenizer.bin or
 * NULL; n_ctx: 0 = the default, min(trained length, SDNPU_DEFAULT_N_CTX)): architecture,
 * shapes, tensor types, tokenizer, memory on stdout; a vocabulary-only GGUF is described as
 * a tokenizer. Returns 0, or 1 after "sdnpu info: ..." on stderr. */
int sdn_tool_info_describe(const char *path, const char *tokenizer, int n_ctx);
/* The machine lines of `sdnpu info`: kernel path, CPU features, prefill matmul (stdout). */
void sdn_tool_info_machine(void);

typedef struct sdn_tool_tokenize_opts {
    const char *model;     /* GGUF file or known model name (only its tokenizer is read) */
    const char *tokenizer; /* llama2.c tokenizer.bin instead of model */
    const char *file;      /* the text's file, or NULL: text */
    const char *text;
    int ids_only, no_bos, special, bench;
} sdn_tool_tokenize_opts;
/* `sdnpu tokenize` after its option checks: "id<TAB>'piece'" lines (or the ids on one line, or
 * with bench the encode/decode timing) on stdout. Returns 0, or 1 after the error on stderr. */
int sdn_tool_tokenize(const sdn_tool_tokenize_opts *o);

/* The known models' table of `sdnpu pull --list` (name, size, licence, cached, what) on stdout. */
void sdn_tool_known_models_print(void);
/* `sdnpu pull NAME`: fetch and verify a known model, print its path on stdout. quiet: no
 * progress and no notes; progress: a progress bar. Returns 0, 1 (failed, message on stderr)
 * or 2 (not a known model: the known ones listed on stderr). */
int sdn_tool_pull(const char *name, int quiet, int progress);
/* The model of `sdnpu demo`: the known model `name`, pulled on first use (notes on stderr),
 * unless offline (or the pull fails: then *offline is set, saying why); offline, a seeded
 * random-weight make-model model of shape/type/seed, written once into the cache. Its path
 * into path (cap bytes); *real = 1 for the known model. Returns 0, or -1 after the error. */
int sdn_tool_demo_model(const char *name, const char *shape, const char *type, int seed, int *offline, char *path, size_t cap,
                        int *real);

/* The --grammar / --json-schema file of run and chat (cmd: the command's name, for
 * messages): its text (malloc'd) into *grammar or *json_schema, both NULL when neither is
 * given. Returns 0, or 2 (both given, unreadable, over 1 MiB, empty) after the message. */
int sdn_tool_read_constraint(const char *cmd, const char *grammar_file, const char *json_schema_file, char **grammar, char **json_schema);
/* One --context file decoded to UTF-8 text (UTF-8 with or without BOM, UTF-16 with BOM; else
 * refused naming the byte offset) into *doc (malloc'd); more than cap bytes of text is refused
 * with `why`; a non-UTF-8 file is noted on stderr unless quiet. Returns 0, or -1 after the
 * message. */
int sdn_tool_read_context(const char *path, size_t cap, const char *why, int quiet, char **doc);
/* The --prompt-file text (decoded like a context, 1 GiB at most) into *text (malloc'd).
 * Returns 0, or 1 after the message. */
int sdn_tool_read_prompt_file(const char *path, char **text);
/* The whole of standard input as UTF-8 text (--prompt -, decoded like a --context file).
 * Returns 0, or -1 after the message. */
int sdn_tool_read_stdin_text(char **out);

struct sdn_story_opts;
struct sdn_bench_opts;
struct sdn_import_opts;
/* `sdnpu make-story-task` after its option checks: load model (tokenizer: a llama2.c
 * tokenizer.bin or NULL), write o->n stories to out_path (datasets/story_task.h). Returns 0, or 1
 * after the error on stderr. */
int sdn_tool_make_story_task(const char *model, const char *tokenizer, const char *out_path, const struct sdn_story_opts *o);
/* `sdnpu trace` after its option checks: the datasets loaded and filtered (tasks, limit), the
 * model loaded, plain greedy generation recorded as a trace in out_path with a progress bar
 * (o: max_tokens, preds_k, threads, n_ctx, chat_template, use_input; its progress callback is
 * set here). Returns 0, or 1 after the error on stderr. */
int sdn_tool_trace(const char *model, const char *tokenizer, const char *out_path, const char *const *datasets, int n_ds, const char *tasks,
                   int limit, struct sdn_bench_opts *o);

/* `sdnpu trace-import` after its option checks: the questions (n_q files) joined with the
 * answers (outputs, or the questions' own references written by from_refs), tokenized with
 * tokenizer (llama2.c tokenizer.bin) or vocab (a GGUF's tokenizer), rendered with chat
 * template tmpl, kept where they agree with agree's answers (NULL: all), written as a trace
 * to out_path (datasets/trace_import.h; o's chat, tok, agree and names are set here). Returns
 * 0, 2 (tmpl not a template) or 1 after the error on stderr. */
int sdn_tool_trace_import(const char *const *questions, int n_q, const char *outputs, const char *from_refs, const char *tokenizer,
                          const char *vocab, const char *tmpl, const char *agree, const char *out_path, struct sdn_import_opts *o);

/* `sdnpu profile`'s options; sdn_tool_profile_defaults fills the defaults (the option help
 * prints them). */
typedef struct sdn_tool_profile_opts {
    const char *model; /* model file or known model name */
    const char *db;    /* profile cache (NULL: $SDNPU_CACHE/profiles.sqlite) */
    long threads, blocks, s1, s2, plen, reps; /* s2 0: from the budget */
    double accept;     /* per-token draft acceptance of the budget's model */
    int force;         /* measure again even when cached */
} sdn_tool_profile_opts;
void sdn_tool_profile_defaults(sdn_tool_profile_opts *o);
/* `sdnpu profile`: measure (or read from the cache) the model's graphs, print the fits, the
 * verification budget and the schedules on stdout. Returns 0, or 1 after the error. */
int sdn_tool_profile(const sdn_tool_profile_opts *o);

#define SDN_TOOL_BENCH_KERNELS_MAXT 2 /* most threads bench-kernels runs */
/* `sdnpu bench-kernels`'s options; sdn_tool_bench_kernels_defaults fills the defaults. */
typedef struct sdn_tool_bench_kernels_opts {
    const char *types;  /* comma-separated weight types (checked here: 2 on a bad name) */
    const char *shapes; /* comma-separated OUTxIN matrices (checked here) */
    const char *layout; /* "packed", "file" or "sgemm" */
    long mem_mb, repeat;
    double min_time;    /* measuring time per configuration, s */
    long n[16];         /* activation rows per call; nn 0: 1,2,4,8,16,32,64 */
    int nn;
    long threads[4];    /* thread counts; nthreads 0: 1,2 */
    int nthreads;
} sdn_tool_bench_kernels_opts;
void sdn_tool_bench_kernels_defaults(sdn_tool_bench_kernels_opts *o);
/* `sdnpu bench-kernels`: the tables on stdout, notes on stderr. Returns 0, 1 (runtime) or 2
 * (a bad type or shape name: usage) after the message. */
int sdn_tool_bench_kernels(const sdn_tool_bench_kernels_opts *o);

/* `sdnpu bench-attention`'s options; sdn_tool_bench_attention_defaults fills the defaults. */
typedef struct sdn_tool_bench_attention_opts {
    int context[16], n_context; /* positions already cached */
    int rows[16], n_rows;       /* batch rows */
    int threads[4], n_threads;  /* thread counts */
    const char *cache;          /* comma-separated cache types (checked here) */
    int heads, kv_heads, head_dim, layers, reps;
} sdn_tool_bench_attention_opts;
void sdn_tool_bench_attention_defaults(sdn_tool_bench_attention_opts *o);
/* `sdnpu bench-attention`: the table on stdout. Returns 0, 1 (runtime) or 2 (a bad cache type,
 * more than 256 rows: usage) after the message. */
int sdn_tool_bench_attention(const sdn_tool_bench_attention_opts *o);

/* `sdnpu bench-sam`'s options; sdn_tool_bench_sam_defaults fills the defaults. */
typedef struct sdn_tool_bench_sam_opts {
    long tokens, vocab, seed, runs, steps;
} sdn_tool_bench_sam_opts;
void sdn_tool_bench_sam_defaults(sdn_tool_bench_sam_opts *o);
/* The largest --vocab value accepted (the automaton's largest token id, SDN_SAM_MAX_TOKEN). */
double sdn_tool_bench_sam_max_vocab(void);
/* `sdnpu bench-sam`: the measurements on stdout. Returns 0, or 1 after the error. */
int sdn_tool_bench_sam(const sdn_tool_bench_sam_opts *o);

/* `sdnpu bench-model`'s options; sdn_tool_bench_model_defaults fills the defaults. */
typedef struct sdn_tool_bench_model_opts {
    int prompt, gen, reps;  /* prefill tokens, decode steps, repetitions */
    int threads[8], n_threads;
    int table_only;         /* only the per-thread table */
    const char *models[8];  /* model files; none (n_models 0): make-model models of shape, types */
    int n_models;
    const char *shape, *types, *vocab; /* vocab: a GGUF whose tokenizer the shape models copy (NULL) */
    const char *json;       /* write the results as JSON here (NULL: not) */
} sdn_tool_bench_model_opts;
void sdn_tool_bench_model_defaults(sdn_tool_bench_model_opts *o);
/* `sdnpu bench-model`: the tables on stdout. Returns 0, 1 (runtime) or 2 (bad shape or type
 * names, an unwritable --json: usage) after the message. */
int sdn_tool_bench_model(const sdn_tool_bench_model_opts *o);

/* `sdnpu bench-verify`'s options; sdn_tool_bench_verify_defaults fills the defaults. */
typedef struct sdn_tool_bench_verify_opts {
    const char *shapes, *types; /* make-model shapes and weight types of the curves */
    const char *cost_out;       /* write the first shape's verify-cost profile (NULL: not) */
    const char *stories;        /* TinyStories directory (NULL: ../shared/models/stories260K when present) */
    const char *model;          /* only this file's curve (NULL: the shapes') */
    int rows_n[64], n_rows;     /* rows of --model's curve (parsed by the command) */
    const char *json;           /* write --model's curve (NULL: not) */
    long threads, reps, max_tokens, context;
    int no_curve;               /* skip the shapes' curves */
} sdn_tool_bench_verify_opts;
void sdn_tool_bench_verify_defaults(sdn_tool_bench_verify_opts *o);
/* `sdnpu bench-verify`: the curves and the end-to-end table on stdout. Returns 0, 1
 * (runtime) or 2 (bad names: usage) after the message. */
int sdn_tool_bench_verify(const sdn_tool_bench_verify_opts *o);

#define SDN_TOOL_BENCH_GRAPHS_MAXREPS 64 /* most repetitions per scheduler */
/* `sdnpu bench-graphs`'s options; sdn_tool_bench_graphs_defaults fills the defaults. */
typedef struct sdn_tool_bench_graphs_opts {
    const char *shapes, *type; /* make-model shapes and weight type (bench_check_shapes_types) */
    const char *db;            /* profile cache (NULL: $SDNPU_CACHE/profiles.sqlite) */
    const char *part;          /* "ttft", "gap" or "all" */
    const char *modes;         /* schedulers (NULL: all) */
    int layers, prompt, reps, blocks, s1, s2, instances, pairs;
    int pin;                   /* -1 auto, 1 on, 0 off */
    long seed;
    long threads[64];          /* compute threads, one table each, n_threads of them */
    int n_threads;
} sdn_tool_bench_graphs_opts;
void sdn_tool_bench_graphs_defaults(sdn_tool_bench_graphs_opts *o);
/* `sdnpu bench-graphs`: the tables on stdout. Returns 0, 1 (runtime) or 2 (usage) after the
 * message. */
int sdn_tool_bench_graphs(const sdn_tool_bench_graphs_opts *o);

/* The keys of --param with their ranges and defaults, and the notes on them (option help). */
void sdn_tool_param_help(FILE *f);

#endif
