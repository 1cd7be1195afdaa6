/* sdnpu.h - the public API of libsdnpu, the one header an application includes.
 *
 * sdnpu generates text with a small language model and speeds decoding up without changing
 * the output: drafts come from what the model can already see (the request's documents, its
 * answer so far, earlier answers of the same task group kept in a SQLite history store, the
 * model's own predictions made during prefill) and a whole draft tree is checked in one
 * forward pass. Greedy output is identical to plain decoding; sampled output keeps the
 * model's distribution.
 *
 * Use (a model file, or a known model's name once `sdnpu pull smollm2-135m-instruct` has put
 * it in the cache directory given to sdnpu_set_cache_dir):
 *     sdnpu_set_cache_dir("/home/me/.cache/sdnpu", &err);
 *     sdnpu_model *m;   sdnpu_model_load("smollm2-135m-instruct", NULL, &m, &err);
 *     sdnpu_context *c; sdnpu_context_new(m, NULL, &c, &err);
 *     sdnpu_request r;  sdnpu_request_init(&r);
 *     r.prompt = "Summarize the document.";  r.documents = docs;  r.n_documents = 1;
 *     r.task_group = "summary";  r.on_text = print_cb;
 *     sdnpu_result res; sdnpu_result_init(&res);
 *     sdnpu_generate(c, &r, &res, &err);  ...  sdnpu_result_free(&res);
 *     sdnpu_context_free(c); sdnpu_model_free(m);
 * Link with `pkg-config --cflags --libs sdnpu` (or CMake: find_package(sdnpu), target
 * sdnpu::sdnpu). docs/library.md has a walk-through; examples/summarize.c a whole program.
 *
 * What the library depends on: its arguments and the process-wide settings below (cache
 * directory, kernel path, memory limit, log sink and level), nothing else. It reads no
 * environment variable and starts no process (no interpreter, no package client: downloading
 * a known model is `sdnpu pull`'s job); the `sdnpu` program turns its environment variables
 * into these settings (docs/commands.md).
 *
 * Research settings (the graph runtime, the prefill matmul choice, the ablation drafting
 * methods) are not part of this API: sdnpu_experimental.h declares them, for the `sdnpu`
 * program, benchmarks and studies; any minor release may change them.
 *
 * Conventions (SQLite's habit):
 * - Every fallible function returns an sdnpu_status: SDNPU_OK (0) or an error code, and takes
 *   an optional `sdnpu_error *` that receives the code and a message naming the file, field
 *   or option at fault (cleared at the start of every call, so one struct can be reused).
 *   Pass NULL when the message is not wanted. Each function lists the codes it returns
 *   (tests/test_api.c provokes each one); besides those, any function that allocates returns
 *   SDNPU_ENOMEM when an allocation fails. A failed call leaves its output pointers NULL /
 *   zero and the objects it was given as its documentation says.
 * - A NULL object argument (model, context, request) where one is required is SDNPU_EINVAL
 *   for functions returning a status; void and value getters document their NULL behaviour.
 * - Strings are UTF-8. Memory the library returns is released with the matching *_free
 *   function, or sdnpu_free for plain strings.
 *
 * ABI (docs/library.md, "ABI"): the library is versioned major.minor.patch; while the major
 * version is 0 the SONAME carries major.minor (libsdnpu.so.0.9), so a release that breaks the
 * ABI gets a new SONAME and CI compares every build against the committed baseline
 * (abi/libsdnpu-0.9.abi, scripts/check-abi.sh). Every struct the library reads from or writes
 * into the app's memory (sdnpu_model_params, sdnpu_context_params, sdnpu_request,
 * sdnpu_model_info, sdnpu_prefix_cache_stats, sdnpu_result with its sdnpu_stats) begins with
 * `size_t struct_size`, set by its *_init macro to the size the app was compiled with. Fields
 * are only ever added at the end. The library reads and writes no byte past struct_size; a struct smaller than the
 * library's own (an app built against an older header) has its missing trailing fields taken
 * as their defaults; one larger (a newer header) is accepted when the fields this library
 * does not know are zero (else SDNPU_EUNSUP); a struct_size smaller than the first released
 * layout (0.9.0's) is SDNPU_EINVAL naming the struct. So always call the *_init macro first.
 * sdnpu_error and sdnpu_message have a fixed layout that never changes.
 *
 * Threads: an sdnpu_model is immutable once loaded (its one lazily built cache, the
 * vocabulary of constrained decoding, is created under the model's mutex) and may be shared
 * by any number of contexts in any threads. An sdnpu_context is not thread-safe: use each
 * context from one thread at a time (one context per concurrent request); a second
 * sdnpu_generate on a context that is running one (another thread, or its own callback) is
 * refused with SDNPU_ESTATE. A context's worker threads are its own and run all of its work,
 * its prefill GEMMs included (single-threaded OpenBLAS calls). Functions without an object
 * (sdnpu_version, sdnpu_status_string, sdnpu_known_models, sdnpu_methods, the sdnpu_check_*
 * functions, sdnpu_set_log, sdnpu_set_log_level, the *_init macros) may be called from any
 * thread. Process-wide state: the log sink and level, the settings of "process-wide
 * settings" below (cache directory, kernel path, memory limit), and OpenBLAS's thread count
 * (set to 1 at the first forward pass). */
#ifndef SDNPU_H
#define SDNPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SDNPU_VERSION_MAJOR 0
#define SDNPU_VERSION_MINOR 9
#define SDNPU_VERSION_PATCH 0
#define SDNPU_VERSION "0.9.0"

#if defined(_WIN32)
#define SDNPU_API
#elif defined(SDNPU_BUILDING) || defined(__GNUC__)
#define SDNPU_API __attribute__((visibility("default")))
#else
#define SDNPU_API
#endif

/* ---- status codes and errors ---- */

typedef enum sdnpu_status {
    SDNPU_OK = 0,
    SDNPU_EINVAL = 1,  /* bad argument, option or request (the message names it) */
    SDNPU_EFORMAT = 2, /* malformed or inconsistent file or record */
    SDNPU_EIO = 3,     /* the operating system refused (open, read, mmap, write) */
    SDNPU_ENOMEM = 4,  /* allocation failed, a size would overflow, or a memory limit was hit */
    SDNPU_EUNSUP = 5,  /* well-formed but not supported (architecture, tensor type, version) */
    SDNPU_EDB = 6,     /* the SQLite history store reported an error */
    SDNPU_ESTATE = 7,  /* call not valid in the object's current state */
} sdnpu_status;

/* Fixed layout (never grows). */
typedef struct sdnpu_error {
    int code;          /* an sdnpu_status */
    char message[1024];
} sdnpu_error;

/* "0.9.0": the library's version (may differ from SDNPU_VERSION of the header compiled in). */
SDNPU_API const char *sdnpu_version(void);
/* Short English name of a status code ("invalid argument", ...; "error" for a value that is
 * none); never NULL. */
SDNPU_API const char *sdnpu_status_string(int code);
/* Release a string or array the library returned (NULL is fine). */
SDNPU_API void sdnpu_free(void *p);

/* ---- logging ---- */

typedef enum sdnpu_log_level {
    SDNPU_LOG_ERROR = 0,
    SDNPU_LOG_WARN = 1,
    SDNPU_LOG_INFO = 2,  /* progress notes (verify cost curve or graph profile measured) */
    SDNPU_LOG_DEBUG = 3,
} sdnpu_log_level;

/* A log sink: one message at a time, without a trailing newline, valid during the call. It is
 * called from whichever thread logs (a context's request thread; never a worker thread), so
 * it must be thread-safe when contexts run in several threads. */
typedef void (*sdnpu_log_fn)(void *user, sdnpu_log_level level, const char *message);

/* The library's one way of telling the app anything besides return values: messages
 * (warnings such as a GGUF file without a tokenizer; notes when a context measures this
 * machine's verify cost curve or a graph profile) go to one sink, filtered by one level.
 * Route them to fn (fn NULL restores the default: "sdnpu: [warning: ]message" lines on
 * stderr, notes as they are). Thread-safe: may be called at any time from any thread; a
 * message being logged concurrently goes to either the old or the new sink. Errors returned
 * in an sdnpu_error are not logged. */
SDNPU_API void sdnpu_set_log(sdnpu_log_fn fn, void *user);
/* The most detailed level passed to the sink: SDNPU_LOG_WARN (the default: errors and
 * warnings), SDNPU_LOG_INFO (also the notes; what `sdnpu run` shows unless --quiet, and
 * 0.7's sdnpu_context_params.verbose = 1 did), SDNPU_LOG_DEBUG (everything), SDNPU_LOG_ERROR.
 * A value out of range is clamped. Thread-safe. */
SDNPU_API void sdnpu_set_log_level(sdnpu_log_level level);

/* ---- process-wide settings ----
 * What the `sdnpu` program takes from its environment (SDNPU_CACHE, SDN_KERNEL,
 * SDN_MEM_LIMIT_MB) an app sets here; the library reads no environment. Each applies to the
 * whole process: set them before loading models and making contexts, and never while a
 * context runs a request (the kernel path is read by the forward pass). */

/* The directory of sdnpu's cache (created when missing): known models in DIR/models/ (where
 * `sdnpu pull NAME` puts them; sdnpu_model_load resolves a known name there), the verify cost
 * curve each context measures once per machine (verify-cost-*.json), the graph runtime's
 * profiles (profiles.sqlite). dir NULL or "" (the default): none: a known model name is
 * SDNPU_EIO saying so and each context measures its verify cost curve again (about 2 s with
 * SmolLM2 on 2 cores). The string is copied.
 * Errors: SDNPU_EINVAL (dir of 960 bytes or more; the setting is unchanged). */
SDNPU_API sdnpu_status sdnpu_set_cache_dir(const char *dir, sdnpu_error *err);

/* The SIMD kernel path: "portable", "avx2" (AVX-VNNI used when present), "avx512", "amx"
 * (x86-64); "neon", "dotprod", "i8mm" (AArch64); NULL or "auto" (the default): the best this
 * CPU supports, chosen at the first context. Every path gives the same output bits.
 * Errors: SDNPU_EINVAL (an unknown name; the message lists them), SDNPU_EUNSUP (this CPU or
 * build lacks it; the message names the missing features); the path is unchanged then. */
SDNPU_API sdnpu_status sdnpu_set_kernel_path(const char *name, sdnpu_error *err);

/* One more bound on the memory this process may use, in bytes (0, the default: none), besides
 * those the library finds itself (cgroup limits, physical and available memory, RLIMIT_AS):
 * a context whose KV cache and buffers would not fit is refused with SDNPU_ENOMEM, with the
 * figures and "sdnpu_set_mem_limit" as the bound that decided. */
SDNPU_API void sdnpu_set_mem_limit(uint64_t bytes);

/* ---- models ---- */

typedef struct sdnpu_model sdnpu_model;

typedef struct sdnpu_model_params {
    size_t struct_size;         /* set by sdnpu_model_params_init (see "ABI" above) */
    const char *tokenizer_path; /* tokenizer.bin of a llama2.c checkpoint (GGUF files carry their own); NULL */
    /* The prefix cache (docs/library.md, "The prefix cache"): what prefill computed for prompt
     * prefixes, in blocks of SDNPU_PREFIX_BLOCK tokens, shared by every context of the model,
     * so that a document read once is not read again by any context (nor, with a directory, by
     * a later process). Answers are byte-identical with and without it. Off when both
     * prefix_cache_bytes and prefix_cache_dir are 0 / NULL (the default). A cached token costs
     * the KV cache's bytes of a position (sdnpu_model_describe lists them per cache type) plus
     * 4 * dim bytes (the last layer's output, from which its predictions are made again). */
    uint64_t prefix_cache_bytes;      /* memory budget; least recently used blocks go first */
    const char *prefix_cache_dir;     /* disk tier: a directory (made 0700; files 0600) shared by any
                                         number of processes; NULL: none. One that cannot be used
                                         (read-only, full) is a warning and the cache stays in
                                         memory; a damaged file is a warning and computed again. */
    uint64_t prefix_cache_disk_bytes; /* the directory's budget (0: 4 GiB) */
} sdnpu_model_params;

#define SDNPU_PREFIX_BLOCK 64 /* tokens per prefix cache block: a prompt's full blocks are cached */

/* The model's prefix cache, counted since the model was loaded (blocks of SDNPU_PREFIX_BLOCK
 * tokens). */
typedef struct sdnpu_prefix_cache_stats {
    size_t struct_size;                   /* set by sdnpu_prefix_cache_stats_init */
    int enabled;                          /* 0: the model has no prefix cache (everything else 0) */
    int disk_enabled;                     /* the disk tier is in use (0 after a warning switched it off) */
    long hits_memory, hits_disk, misses;  /* blocks looked up by prefills */
    long evictions, disk_evictions;       /* blocks evicted from memory; files deleted for the disk budget */
    long disk_writes, disk_damaged;       /* files written; files found damaged, truncated or foreign (each
                                             warned about once, deleted and computed again) */
    long memory_blocks;
    uint64_t memory_bytes, memory_budget; /* bytes the blocks hold in memory now, and the budget */
    uint64_t disk_bytes, disk_budget;     /* bytes the directory's index counts now (every process's) */
} sdnpu_prefix_cache_stats;
SDNPU_API sdnpu_status sdnpu_prefix_cache_stats_init_sized(sdnpu_prefix_cache_stats *s, size_t size);
#define sdnpu_prefix_cache_stats_init(s) sdnpu_prefix_cache_stats_init_sized((s), sizeof *(s))
/* Fill *out (set up by sdnpu_prefix_cache_stats_init). Thread-safe. Errors: SDNPU_EINVAL (m or
 * out NULL, out->struct_size too small). */
SDNPU_API sdnpu_status sdnpu_prefix_cache_get_stats(const sdnpu_model *m, sdnpu_prefix_cache_stats *out, sdnpu_error *err);

/* Fill *p with the defaults and p->struct_size = size. Errors: SDNPU_EINVAL (p NULL, or size
 * smaller than the first released layout); nothing is written then. Use the macro. */
SDNPU_API sdnpu_status sdnpu_model_params_init_sized(sdnpu_model_params *p, size_t size);
#define sdnpu_model_params_init(p) sdnpu_model_params_init_sized((p), sizeof *(p))

/* Load a model: a GGUF file (architectures llama, qwen2, qwen3, gemma3), a llama2.c checkpoint, or the name
 * of a known model ("smollm2-135m-instruct"; see sdnpu_known_models), resolved in the cache
 * directory (sdnpu_set_cache_dir) and verified by size and SHA-256. The library never
 * downloads: `sdnpu pull NAME` does. p may be NULL (defaults). Weights are memory-mapped.
 * Errors: SDNPU_EINVAL (path_or_name NULL or empty, out NULL, p->struct_size too small),
 * SDNPU_EIO (missing or unreadable file; a known model not in the cache, or no cache
 * directory set: the message says to run `sdnpu pull NAME`), SDNPU_EFORMAT (malformed
 * file, checksum mismatch), SDNPU_EUNSUP (architecture or tensor type; p larger than this
 * library knows with unknown fields set). On error *out is NULL (when out is not) and
 * nothing is kept. */
SDNPU_API sdnpu_status sdnpu_model_load(const char *path_or_name, const sdnpu_model_params *p, sdnpu_model **out, sdnpu_error *err);
/* Free a model (NULL is fine). Every context made on it must be freed first. */
SDNPU_API void sdnpu_model_free(sdnpu_model *m);

/* Comma-separated names of the known models; a static string, never NULL. */
SDNPU_API const char *sdnpu_known_models(void);

typedef struct sdnpu_model_info {
    size_t struct_size;        /* set by sdnpu_model_info_init (see "ABI" above) */
    const char *path;          /* the file loaded */
    const char *architecture;  /* "llama", "qwen2", "qwen3", "gemma3" */
    const char *chat_template; /* template family: "chatml", "llama3", "llama2", "vicuna", "gemma", or "none" */
    char fingerprint[17];      /* hex content fingerprint (history stores are keyed by it) */
    int n_layers, dim, n_heads, n_kv_heads, vocab;
    int context_length;        /* trained context length */
    int max_token_bytes;       /* most text bytes one token stands for (0: no tokenizer): a text of
                                  more than n * max_token_bytes bytes cannot fit n tokens */
    uint64_t weight_bytes;
    const char *tool_format;   /* how the model writes a tool call: "hermes" when its chat template has
                                  one (the file's tokenizer.chat_template mentions <tool_call>: Qwen
                                  family), else "json" (sdnpu's documented format, docs/server.md) */
} sdnpu_model_info;

/* Set out->struct_size = size (the other fields are written by sdnpu_model_get_info).
 * Errors: SDNPU_EINVAL (out NULL, size too small). Use the macro. */
SDNPU_API sdnpu_status sdnpu_model_info_init_sized(sdnpu_model_info *out, size_t size);
#define sdnpu_model_info_init(p) sdnpu_model_info_init_sized((p), sizeof *(p))

/* 1 when the model has a tokenizer (GGUF files do; a llama2.c checkpoint needs tokenizer_path);
 * 0 when it has none or m is NULL. */
SDNPU_API int sdnpu_model_has_tokenizer(const sdnpu_model *m);
/* Describe a loaded model into *out, whose struct_size sdnpu_model_info_init set (fields past
 * it are not written; a larger struct from a newer header gets the fields this library knows
 * and zeros after them); the strings live as long as the model. Safe from several threads.
 * Errors: SDNPU_EINVAL (m or out NULL, out->struct_size too small; *out is not written). */
SDNPU_API sdnpu_status sdnpu_model_get_info(const sdnpu_model *m, sdnpu_model_info *out, sdnpu_error *err);
/* A human-readable description (architecture, shapes, tensor types, tokenizer, chat template,
 * memory for a KV cache of n_ctx tokens; 0: the default size), malloc'd (sdnpu_free); NULL when
 * out of memory or m is NULL. */
SDNPU_API char *sdnpu_model_describe(const sdnpu_model *m, int n_ctx);

/* Tokenize text with the model's own tokenizer. add_bos: 1 as the model's metadata says,
 * 0 never; parse_special: 1 turns control-token text (<|im_start|>) into its token.
 * *ids is malloc'd (sdnpu_free). The model is only read (safe from several threads).
 * Errors: SDNPU_EINVAL (m, ids or n_ids NULL; text NULL with len > 0; the model has no
 * tokenizer; text longer than the 1-call limit, refused before it is read). On error *ids is
 * NULL and *n_ids 0 (when they are not NULL). */
SDNPU_API sdnpu_status sdnpu_tokenize(const sdnpu_model *m, const char *text, size_t len, int add_bos, int parse_special, int32_t **ids,
                                      int *n_ids, sdnpu_error *err);
/* Text of token ids (control tokens not rendered). *text is malloc'd (sdnpu_free).
 * Errors: SDNPU_EINVAL (m or text NULL, ids NULL with n_ids > 0, n_ids negative, no
 * tokenizer, an id out of range). On error *text is NULL (when text is not). */
SDNPU_API sdnpu_status sdnpu_detokenize(const sdnpu_model *m, const int32_t *ids, int n_ids, char **text, sdnpu_error *err);

/* ---- contexts ---- */

typedef struct sdnpu_context sdnpu_context;

/* The default KV cache size of a context: min(the model's trained length, this) positions. */
#define SDNPU_DEFAULT_N_CTX 8192

/* The one table of defaults, read by the library's init functions (sdnpu_request_init,
 * sdnpu_context_params_init), the `sdnpu` program and its server alike:
 *   SDNPU_DEFAULT_METHOD       the drafting method of a request ("sdnpu"; greedy output is the
 *                              same as plain decoding's, token for token)
 *   SDNPU_DEFAULT_MAX_TOKENS   new tokens of a request at most
 *   SDNPU_DEFAULT_DRAFT_MAX    draft budget: 0 = each step's draft size from this machine's
 *                              verify cost curve (measured once, cached) and the acceptance so far
 *   SDNPU_DEFAULT_PREFILL_TOPK prefill predictions kept per position for calibrating methods
 *   SDNPU_DEFAULT_MAX_THREADS  compute threads: n_threads 0 means min(the CPUs this process may
 *                              run on, this); sdnpu_context_params_init fills in that number */
#define SDNPU_DEFAULT_METHOD "sdnpu"
#define SDNPU_DEFAULT_MAX_TOKENS 256
#define SDNPU_DEFAULT_DRAFT_MAX 0
#define SDNPU_DEFAULT_PREFILL_TOPK 4
#define SDNPU_DEFAULT_MAX_THREADS 8

typedef struct sdnpu_context_params {
    size_t struct_size;       /* set by sdnpu_context_params_init (see "ABI" above) */
    int n_ctx;                /* KV cache size in tokens (0, default: min(trained length, SDNPU_DEFAULT_N_CTX)) */
    int n_threads;            /* compute threads (0: the default rule, min(the CPUs this process may
                                 run on, SDNPU_DEFAULT_MAX_THREADS); sdnpu_context_params_init
                                 sets that number) */
    const char *history_path; /* SQLite history store of earlier answers per task group (created
                                 when missing); NULL (default): none */
    const char *cache_type_k; /* KV cache key type: "f16" (2 bytes an element), "f32" (4, the exact
                                 values), "q8" (8-bit with F16 scales, ~1.06 bytes), "bf16" (2
                                 bytes; keys multiplied in BF16, VDPBF16PS where the CPU has
                                 AVX512_BF16; the same bits on every CPU); NULL
                                 (default): "f16". Every type keeps greedy output independent of
                                 batching and prefill chunking (docs/engine.md) */
    const char *cache_type_v; /* the same for values */
} sdnpu_context_params;

/* Fill *p with the defaults and p->struct_size = size. Errors: SDNPU_EINVAL (p NULL, or size
 * smaller than the first released layout); nothing is written then. Use the macro. */
SDNPU_API sdnpu_status sdnpu_context_params_init_sized(sdnpu_context_params *p, size_t size);
#define sdnpu_context_params_init(p) sdnpu_context_params_init_sized((p), sizeof *(p))
/* Create a context on a loaded model (the model must outlive it). p may be NULL (defaults);
 * its strings are copied. Several contexts may share one model, in any threads.
 * Errors: SDNPU_EINVAL (m or out NULL, p->struct_size too small, a bad parameter: named),
 * SDNPU_EUNSUP (p larger than this library knows with unknown fields set), SDNPU_ENOMEM (the
 * KV cache and buffers do not fit the memory limit: sdnpu_set_mem_limit, RLIMIT_AS, cgroup),
 * SDNPU_EDB (the history store cannot be opened or created: not an SQLite database, damaged,
 * another application's database). On error *out is NULL and nothing is kept (the model is
 * unchanged). */
SDNPU_API sdnpu_status sdnpu_context_new(sdnpu_model *m, const sdnpu_context_params *p, sdnpu_context **out, sdnpu_error *err);
/* Free a context (NULL is fine); not while it runs a request. */
SDNPU_API void sdnpu_context_free(sdnpu_context *c);
/* Size of the context's KV cache in tokens: the most a request's prompt plus its answer can
 * hold (n_ctx, or its default min(trained length, SDNPU_DEFAULT_N_CTX)). A server checks
 * max_tokens with it. 0 when c is NULL. */
SDNPU_API int sdnpu_context_n_ctx(const sdnpu_context *c);

/* ---- drafting methods ---- */

/* Comma-separated names of the drafting methods ("none, pld, sam, ..."); static, never NULL. */
SDNPU_API const char *sdnpu_methods(void);
/* SDNPU_OK when method names a drafting method, else SDNPU_EINVAL listing them (method NULL
 * included). */
SDNPU_API sdnpu_status sdnpu_check_method(const char *method, sdnpu_error *err);
/* SDNPU_OK when "KEY=VALUE" is a valid drafting parameter (keys: docs/drafting.md), else
 * SDNPU_EINVAL naming the key or value at fault (key_value NULL included). */
SDNPU_API sdnpu_status sdnpu_check_param(const char *key_value, sdnpu_error *err);

/* ---- requests ---- */

/* Fixed layout (never grows: requests hold arrays of it). */
typedef struct sdnpu_message {
    const char *role;    /* "system", "user", "assistant" */
    const char *content;
} sdnpu_message;

/* Streaming: called with each piece of new text as it is committed (whole UTF-8 characters).
 * Return 0 to go on, nonzero to stop the request (its result says "cancelled"). */
typedef int (*sdnpu_text_cb)(void *user_data, const char *text, size_t len);

/* Where a token of the answer came from (sdnpu_step.sources). Every decode step commits the
 * draft tokens the model accepted, then one token of the model's own. */
typedef enum sdnpu_source {
    SDNPU_SOURCE_MODEL = 0,   /* the model's own token of the step: decoded, not drafted */
    SDNPU_SOURCE_PROMPT = 1,  /* an accepted draft token read from the prompt (the documents, the
                                 messages), or the model's own prediction at a prompt position
                                 made during prefill (the calibrating methods) */
    SDNPU_SOURCE_ANSWER = 2,  /* ... read from earlier in this answer */
    SDNPU_SOURCE_HISTORY = 3, /* ... read from an earlier answer of the task group */
    SDNPU_SOURCE_GRAMMAR = 4, /* ... text the grammar or JSON schema forced (or its way out of an element) */
    SDNPU_SOURCE_REUSE = 5,   /* ... what the model predicted at a draft node rejected in an earlier step */
    SDNPU_SOURCE_DRAFT = 6,   /* ... a draft token whose drafter recorded no source */
    SDNPU_SOURCE_RECYCLED = 7, /* ... what the model predicted after the same token in an earlier step
                                  of any request of this model (the model-derived candidates of
                                  sam+model and sdnpu; docs/drafting.md) */
} sdnpu_source;

/* One decode step, as sdnpu_request.on_step reports it. Valid during the call only. Fields
 * are added at the end only. */
typedef struct sdnpu_step {
    int step;                      /* 1, 2, ...: the decode step (verification step) */
    int n_tokens;                  /* tokens the step committed (>= 1; fewer at the end of the answer) */
    const int32_t *tokens;         /* [n_tokens] */
    const unsigned char *sources;  /* [n_tokens] an sdnpu_source each: the accepted draft tokens', then
                                      SDNPU_SOURCE_MODEL for the model's own */
    const size_t *text_end;        /* [n_tokens] bytes of answer text once token i is in, counted from the
                                      answer's start in the text on_text delivers: token i's text is
                                      bytes [text_end[i-1], text_end[i]) (text_end[-1]: the previous
                                      step's last, 0 at first); may run past what on_text has
                                      delivered so far (text held back while it may start a stop
                                      string, never delivered when it does) */
} sdnpu_step;

typedef struct sdnpu_request {
    size_t struct_size;        /* set by sdnpu_request_init (see "ABI" above) */
    /* What the model sees. Exactly one of: messages (a conversation, rendered with the
     * model's chat template), prompt (+ documents: one user turn "Document:\n...\n\nprompt"
     * on chat models, plain text on base models), or prompt_ids (tokens as they are). */
    const sdnpu_message *messages;
    int n_messages;
    const char *prompt;
    const char *const *documents;
    int n_documents;
    const char *system;        /* system prompt for prompt requests (NULL: the template's default) */
    const char *chat_template; /* NULL or "auto" (the model's), "none" (plain text), or a family name */
    const int32_t *prompt_ids;
    int n_prompt_ids;
    /* Task group: earlier answers of the group are looked up in the context's history store
     * before drafting and this answer is stored back after (store_answer). NULL: none. */
    const char *task_group;
    int store_answer;          /* 1 (default): store the answer when it ended normally */
    /* Drafting: "none" (plain decoding), "pld", "sam", "sam+model", "sdnpu"
     * (SDNPU_DEFAULT_METHOD); docs/drafting.md. draft_max 0 (SDNPU_DEFAULT_DRAFT_MAX): each
     * step's draft size from this machine's verify cost curve (measured once, cached) and the
     * acceptance seen so far. */
    const char *method;
    int draft_max, draft_depth, draft_branch; /* 0: defaults */
    const char *const *params; /* drafting parameters "KEY=VALUE" (docs/drafting.md) */
    int n_params;
    int prefill_topk;          /* prefill predictions kept per position for calibration (0: SDNPU_DEFAULT_PREFILL_TOPK) */
    /* Sampling: temperature 0 (default) is greedy. */
    int max_tokens;            /* new tokens at most (default SDNPU_DEFAULT_MAX_TOKENS) */
    float temperature, top_p;  /* top_p default 1 */
    int top_k;                 /* 0: all */
    uint64_t seed;
    int ignore_eos;            /* keep generating past end-of-generation tokens */
    const char *const *stop;   /* stop strings: the answer ends before the first one produced (the
                                  text excludes it; the tokens end where the streamed text completed
                                  it, at most one token past the one that did) */
    int n_stop;
    int reuse_kv;              /* 1 (default): keep the KV entries of the previous request on this
                                  context that hold the same leading tokens (calibrating methods:
                                  those its prefill made, with its predictions for them) */
    sdnpu_text_cb on_text;
    void *user_data;
    /* Prefill progress (NULL: none), for long prompts: called with user_data before the first
     * prefill chunk and after each one, done = prompt tokens in the KV cache so far (reused
     * ones included), total = the prompt tokens prefill fills (the prompt but its last token);
     * done reaches total before the first answer token. */
    void (*on_progress)(void *user_data, int done, int total);
    /* More sampling controls (greedy decoding honours the repetition penalty too; speculative
     * output stays identical to plain decoding, sampled output keeps its distribution). */
    float min_p;               /* > 0: drop tokens less than min_p times as probable as the most probable */
    float repeat_penalty;      /* > 1: penalize tokens among the last repeat_last_n (llama.cpp's rule:
                                  positive logits divided, negative multiplied); 0 or 1: off */
    int repeat_last_n;         /* penalty window in tokens, prompt included (0: 64) */
    /* Constrained answers (docs/constrained.md): at most one of the two. The answer is a
     * sentence of the grammar / a JSON document valid against the schema (unless max_tokens
     * cuts it short: finish SDNPU_FINISH_LENGTH). A malformed or unsupported grammar or schema
     * is SDNPU_EINVAL naming the position or keyword. Speculative output stays identical to
     * constrained plain decoding. */
    const char *grammar;       /* GBNF text (llama.cpp's syntax, the documented subset), root rule "root"; NULL: none */
    const char *json_schema;   /* JSON schema text; NULL: none */
    /* Per decode step (NULL: none), to show speculation at work: called with user_data after
     * the step's text went to on_text, with the tokens the step committed, where each came
     * from and where its text ends. Return 0 to go on, nonzero to stop the request as on_text
     * does. The step that completes a stop string reports its tokens up to that one. */
    int (*on_step)(void *user_data, const sdnpu_step *step);
    /* Which earlier answers in the context's history store drafting reads: NULL or "group"
     * (default): the task group's; "global": every answer of this model, the task group's
     * first, then the other groups', most recent first within each, under the same token
     * budget (SuffixDecoding's global tree; docs/drafting.md). "global" needs a history store
     * and works without a task group too (the answer is then not stored). Only the speed
     * depends on it: greedy output is the same. Anything else is SDNPU_EINVAL. */
    const char *history_scope;
    /* 1 (default): prefill takes the prompt's blocks from the model's prefix cache and gives it
     * the ones it computes (when the model has one); 0: neither. The answer is the same. */
    int prefix_cache;
    int reserved0; /* 0 */
} sdnpu_request;

/* Fill *r with the defaults and r->struct_size = size. Errors: SDNPU_EINVAL (r NULL, or size
 * smaller than the first released layout); nothing is written then. Use the macro. */
SDNPU_API sdnpu_status sdnpu_request_init_sized(sdnpu_request *r, size_t size);
#define sdnpu_request_init(r) sdnpu_request_init_sized((r), sizeof *(r))

typedef enum sdnpu_finish {
    SDNPU_FINISH_STOP = 0,      /* the model ended its answer (end-of-generation token) or a stop string */
    SDNPU_FINISH_LENGTH = 1,    /* max_tokens reached */
    SDNPU_FINISH_CANCELLED = 2, /* on_text returned nonzero */
    SDNPU_FINISH_CONTEXT = 3,   /* the context (KV cache) is full */
} sdnpu_finish;

#define SDNPU_ACCEPT_HIST 65

/* Fields are added at the end only; it is the last member of sdnpu_result. */
typedef struct sdnpu_stats {
    int prompt_tokens, reused_tokens; /* reused: prompt tokens whose KV entries were kept */
    int generated_tokens, steps;      /* steps: verification (decode) steps */
    long drafted_tokens, accepted_tokens;
    double mean_accepted;             /* tokens per step, the model's own token included */
    int accepted_hist[SDNPU_ACCEPT_HIST]; /* steps by accepted draft tokens (0 .. 64) */
    double prefill_s, decode_s, draft_s, verify_s, first_token_s;
    int history_answers;              /* earlier answers of the task group drafted from */
    long history_tokens;
    int answer_stored;                /* 1 when this answer went into the history store */
    size_t peak_rss;                  /* bytes, process high-water mark */
    long forced_tokens;               /* constrained requests: draft tokens that were text the grammar forced */
    double constrain_s;               /* constrained requests: seconds spent applying the constraint */
    int prefix_memory_tokens;         /* prompt tokens whose prefill came from the prefix cache in memory */
    int prefix_disk_tokens;           /* ... from its disk tier */
    double prefix_saved_s;            /* what computing those blocks cost when they were made, less
                                         importing them: the prefill time the cache saved */
} sdnpu_stats;

typedef struct sdnpu_result {
    size_t struct_size;  /* set by sdnpu_result_init (see "ABI" above); kept by sdnpu_generate */
    char *text;          /* the answer (without end-of-generation tokens) */
    int32_t *tokens;
    int n_tokens;
    sdnpu_finish finish;
    int stop_index;      /* the stop string that ended the answer, else -1 */
    sdnpu_stats stats;
} sdnpu_result;

/* Zero *r and set r->struct_size = size (before sdnpu_generate). Errors: SDNPU_EINVAL (r
 * NULL, or size smaller than the first released layout); nothing is written then. */
SDNPU_API sdnpu_status sdnpu_result_init_sized(sdnpu_result *r, size_t size);
#define sdnpu_result_init(r) sdnpu_result_init_sized((r), sizeof *(r))

/* Run a request on a context: render and tokenize it, look up the task group's history,
 * prefill (reusing the previous request's KV entries for the common prefix), decode with the
 * drafting method, stream text to on_text, store the answer. A context also keeps what
 * constrained drafting learned on its earlier requests (which of two tokenizations of forced
 * text the model writes, docs/constrained.md): that changes how many rows a step verifies,
 * never the answer. result may be NULL when only the
 * stream matters; else it must have been set up by sdnpu_result_init (or hold a previous
 * result, which is overwritten: free it first). The context can take another request
 * afterwards, also after any error.
 * Errors: SDNPU_EINVAL (c or r NULL; r->struct_size or result->struct_size too small; no
 * prompt, several prompt kinds, unknown method or template, a bad parameter, grammar or JSON
 * schema, a prompt longer than the context, a task group without a history store; the
 * message names the field), SDNPU_EUNSUP (r larger than this library knows with unknown
 * fields set), SDNPU_ESTATE (the context is already running a request: called from its own
 * on_text / on_progress callback or from another thread at the same time; that request goes
 * on undisturbed and this call touches neither result nor the context; also an internal
 * consistency check failing during decoding, which would be a bug), SDNPU_EDB (the history
 * store: a read or write failed, or a damaged answer row of the task group).
 * State after an error: result (when given and its struct_size valid; not for SDNPU_ESTATE
 * from a busy context) holds no text and no tokens (text NULL, n_tokens 0; sdnpu_result_free
 * is harmless) and the stats gathered so far; the answer is not stored in the history store.
 * The context stays usable. Errors found before decoding (argument and request checks,
 * rendering, a prompt longer than the context, the grammar, the history lookup) leave it as it
 * was, its KV entries kept for reuse. An error from the decoding step itself (a prompt_ids
 * prompt longer than the context, out of memory during prefill or decoding, an internal
 * check) empties its KV cache: the next request prefills its whole prompt. SDNPU_EDB from
 * storing the answer leaves the KV entries of the request (the next request may reuse them). */
SDNPU_API sdnpu_status sdnpu_generate(sdnpu_context *c, const sdnpu_request *r, sdnpu_result *result, sdnpu_error *err);
/* Free a result's text and tokens and zero them (NULL is fine; struct_size is kept, so the
 * struct can be passed to sdnpu_generate again). */
SDNPU_API void sdnpu_result_free(sdnpu_result *r);

/* The prompt exactly as the model sees it, rendered with its chat template (malloc'd, sdnpu_free).
 * Errors: SDNPU_EINVAL (m, r or text NULL, r->struct_size too small, a prompt_ids request,
 * and sdnpu_generate's rendering errors), SDNPU_EUNSUP (as sdnpu_generate). On error *text is
 * NULL (when text is not). */
SDNPU_API sdnpu_status sdnpu_render_prompt(const sdnpu_model *m, const sdnpu_request *r, char **text, sdnpu_error *err);

#ifdef __cplusplus
}
#endif

#endif
