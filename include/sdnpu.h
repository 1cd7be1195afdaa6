/* sdnpu.h - the public API of libsdnpu, the one header an application includes.
 *
 * sdnpu generates text with a small language model and speeds decoding up without changing
 * the output: drafts come from what the model can already see (the request's documents, its
 * answer so far, earlier answers of the same task group kept in a SQLite history store, the
 * model's own predictions made during prefill) and a whole draft tree is checked in one
 * forward pass. Greedy output is identical to plain decoding; sampled output keeps the
 * model's distribution.
 *
 * Use:
 *     sdnpu_model *m;   sdnpu_model_load("smollm2-135m-instruct", NULL, &m, &err);
 *     sdnpu_context *c; sdnpu_context_new(m, NULL, &c, &err);
 *     sdnpu_request r;  sdnpu_request_init(&r);
 *     r.prompt = "Summarize the document.";  r.documents = docs;  r.n_documents = 1;
 *     r.task_group = "summary";  r.on_text = print_cb;
 *     sdnpu_result res; sdnpu_generate(c, &r, &res, &err);  ...  sdnpu_result_free(&res);
 *     sdnpu_context_free(c); sdnpu_model_free(m);
 * Link with `pkg-config --cflags --libs sdnpu` (or CMake: find_package(sdnpu), target
 * sdnpu::sdnpu). docs/library.md has a walk-through; examples/summarize.c a whole program.
 *
 * Conventions (SQLite's habit):
 * - Every fallible function returns an sdnpu_status: SDNPU_OK (0) or an error code, and takes
 *   an optional `sdnpu_error *` that receives the code and a message naming the file, field
 *   or option at fault (cleared at the start of every call, so one struct can be reused).
 *   Pass NULL when the message is not wanted.
 * - Parameter structs are filled with defaults by their *_init function first; fields may be
 *   added at the end in later minor versions, so always call *_init.
 * - Strings are UTF-8. Memory the library returns is released with the matching *_free
 *   function, or sdnpu_free for plain strings.
 *
 * Threads: an sdnpu_model is immutable once loaded and may be shared by any number of
 * contexts in any threads. An sdnpu_context is not thread-safe: use each context from one
 * thread at a time (one context per concurrent request). A context's worker threads are its
 * own and run all of its work, its prefill GEMMs included (single-threaded OpenBLAS calls).
 * Process-wide state: OpenBLAS's thread count (set to 1 at the first forward pass) and the
 * SIMD kernel path chosen at the first load (SDN_KERNEL overrides). */
#ifndef SDNPU_H
#define SDNPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SDNPU_VERSION_MAJOR 0
#define SDNPU_VERSION_MINOR 6
#define SDNPU_VERSION_PATCH 0
#define SDNPU_VERSION "0.6.0"

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

typedef struct sdnpu_error {
    int code;          /* an sdnpu_status */
    char message[1024];
} sdnpu_error;

/* "0.6.0": the library's version (may differ from SDNPU_VERSION of the header compiled in). */
SDNPU_API const char *sdnpu_version(void);
/* Short English name of a status code ("invalid argument", ...); never NULL. */
SDNPU_API const char *sdnpu_status_string(int code);
/* Release a string or array the library returned (NULL is fine). */
SDNPU_API void sdnpu_free(void *p);

/* ---- models ---- */

typedef struct sdnpu_model sdnpu_model;

typedef struct sdnpu_model_params {
    const char *tokenizer_path; /* tokenizer.bin of a llama2.c checkpoint (GGUF files carry their own); NULL */
    int pull;                   /* 1 (default): a known model name not yet in the cache is downloaded
                                   (sdnpu_model_pull); 0: SDNPU_EIO when it is missing */
} sdnpu_model_params;

SDNPU_API void sdnpu_model_params_init(sdnpu_model_params *p);

/* Load a model: a GGUF file (architectures llama, qwen2, qwen3, gemma3), a llama2.c checkpoint, or the name
 * of a known model ("smollm2-135m-instruct"; see sdnpu_known_models), resolved in the cache
 * ($SDNPU_CACHE, else $XDG_CACHE_HOME/sdnpu, else ~/.cache/sdnpu) and verified by size and
 * SHA-256. p may be NULL (defaults). Weights are memory-mapped.
 * Errors: SDNPU_EINVAL (NULL path or out), SDNPU_EIO (missing or unreadable file, failed
 * download), SDNPU_EFORMAT (malformed file, checksum mismatch), SDNPU_EUNSUP (architecture or
 * tensor type), SDNPU_ENOMEM. */
SDNPU_API int sdnpu_model_load(const char *path_or_name, const sdnpu_model_params *p, sdnpu_model **out, sdnpu_error *err);
SDNPU_API void sdnpu_model_free(sdnpu_model *m);

/* Download a known model into the cache (no-op when it is there and verified) and write its
 * path into path (cap bytes). Needs python3 with pip (SDNPU_PYTHON overrides the interpreter).
 * quiet = 0 lets pip print its progress on stderr.
 * Errors: SDNPU_EINVAL (unknown name: the message lists the known ones), SDNPU_EUNSUP (no
 * interpreter or no pip), SDNPU_EIO (index unreachable, download failed or interrupted),
 * SDNPU_EFORMAT (member missing, size or checksum mismatch). Nothing partial is left behind. */
SDNPU_API int sdnpu_model_pull(const char *name, int quiet, char *path, size_t cap, sdnpu_error *err);
/* Comma-separated names of the known models. */
SDNPU_API const char *sdnpu_known_models(void);

typedef struct sdnpu_model_info {
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

/* 1 when the model has a tokenizer (GGUF files do; a llama2.c checkpoint needs tokenizer_path). */
SDNPU_API int sdnpu_model_has_tokenizer(const sdnpu_model *m);
/* Describe a loaded model; the strings live as long as the model. */
SDNPU_API void sdnpu_model_get_info(const sdnpu_model *m, sdnpu_model_info *out);
/* A human-readable description (architecture, shapes, tensor types, tokenizer, chat template,
 * memory for a KV cache of n_ctx tokens; 0: the default size), malloc'd (sdnpu_free); NULL when
 * out of memory. */
SDNPU_API char *sdnpu_model_describe(const sdnpu_model *m, int n_ctx);

/* Tokenize text with the model's own tokenizer. add_bos: 1 as the model's metadata says,
 * 0 never; parse_special: 1 turns control-token text (<|im_start|>) into its token.
 * *ids is malloc'd (sdnpu_free). Errors: SDNPU_EINVAL (no tokenizer, text too long), SDNPU_ENOMEM. */
SDNPU_API int sdnpu_tokenize(const sdnpu_model *m, const char *text, size_t len, int add_bos, int parse_special, int32_t **ids,
                             int *n_ids, sdnpu_error *err);
/* Text of token ids (control tokens not rendered). *text is malloc'd (sdnpu_free).
 * Errors: SDNPU_EINVAL (no tokenizer, id out of range), SDNPU_ENOMEM. */
SDNPU_API int sdnpu_detokenize(const sdnpu_model *m, const int32_t *ids, int n_ids, char **text, sdnpu_error *err);

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
    int n_ctx;                /* KV cache size in tokens (0, default: min(trained length, SDNPU_DEFAULT_N_CTX)) */
    int n_threads;            /* compute threads (0: the default rule, min(the CPUs this process may
                                 run on, SDNPU_DEFAULT_MAX_THREADS); sdnpu_context_params_init
                                 sets that number) */
    const char *history_path; /* SQLite history store of earlier answers per task group (created
                                 when missing); NULL (default): none */
    const char *graphs;       /* fixed-shape graphs switched during prefill: NULL (default: off),
                                 "single", "sync", "async", "progressive" */
    int graph_blocks;         /* layer blocks of the graph runtime (0: 8) */
    int g1, g2;               /* prefill and decode graph rows (0: 256, and from the profile) */
    const char *profile_db;   /* graph profile cache (NULL: $SDNPU_CACHE/profiles.sqlite) */
    int graph_pin;            /* 1: pin compute threads to CPUs 0..n_threads-1 and the graph loader to
                                 the others (needs more CPUs than n_threads) */
    int verbose;              /* 1: notes on stderr (verify cost curve or graph profile measured) */
    const char *cache_type_k; /* KV cache key type: "f16" (2 bytes an element), "f32" (4, the exact
                                 values), "q8" (8-bit with F16 scales, ~1.06 bytes); NULL
                                 (default): $SDN_CACHE_TYPE_K, else "f16". Every type keeps greedy
                                 output independent of batching and prefill chunking (docs/engine.md) */
    const char *cache_type_v; /* the same for values ($SDN_CACHE_TYPE_V) */
} sdnpu_context_params;

SDNPU_API void sdnpu_context_params_init(sdnpu_context_params *p);
/* Create a context on a loaded model (the model must outlive it). p may be NULL.
 * With graphs set, the model is profiled on first use (cached in profile_db) and the graph
 * runtime is set up at the first request, for that request's kind (plain or drafted); such a
 * context switches the model's weight layouts, so only one graph context may use a model at a
 * time, and no other context while it runs.
 * Errors: SDNPU_EINVAL (bad parameter, named), SDNPU_ENOMEM, SDNPU_EDB / SDNPU_EFORMAT
 * (history store or profile cache unusable). */
SDNPU_API int sdnpu_context_new(sdnpu_model *m, const sdnpu_context_params *p, sdnpu_context **out, sdnpu_error *err);
SDNPU_API void sdnpu_context_free(sdnpu_context *c);
/* Size of the context's KV cache in tokens: the most a request's prompt plus its answer can
 * hold (n_ctx, or its default min(trained length, SDNPU_DEFAULT_N_CTX)). A server checks max_tokens with it. */
SDNPU_API int sdnpu_context_n_ctx(const sdnpu_context *c);
/* The graph runtime's account of the last request (layout switches, waits, time to first
 * token) as text, malloc'd (sdnpu_free). SDNPU_ESTATE when the context has no graphs or has
 * run no request. */
SDNPU_API int sdnpu_graph_report(const sdnpu_context *c, char **text, sdnpu_error *err);

/* ---- drafting methods ---- */

/* Comma-separated names of the drafting methods ("none, pld, sam, ..."). */
SDNPU_API const char *sdnpu_methods(void);
/* SDNPU_OK when method names a drafting method, else SDNPU_EINVAL listing them. */
SDNPU_API int sdnpu_check_method(const char *method, sdnpu_error *err);
/* SDNPU_OK when "KEY=VALUE" is a valid drafting parameter (keys: docs/drafting.md), else
 * SDNPU_EINVAL naming the key or value at fault. */
SDNPU_API int sdnpu_check_param(const char *key_value, sdnpu_error *err);
/* SDNPU_OK when graphs names a graph mode of sdnpu_context_params.graphs ("single", "sync",
 * "async", "progressive", "optimal"), else SDNPU_EINVAL listing them. */
SDNPU_API int sdnpu_check_graphs(const char *graphs, sdnpu_error *err);

/* ---- requests ---- */

typedef struct sdnpu_message {
    const char *role;    /* "system", "user", "assistant" */
    const char *content;
} sdnpu_message;

/* Streaming: called with each piece of new text as it is committed (whole UTF-8 characters).
 * Return 0 to go on, nonzero to stop the request (its result says "cancelled"). */
typedef int (*sdnpu_text_cb)(void *user_data, const char *text, size_t len);

typedef struct sdnpu_request {
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
    /* Drafting: "none" (plain decoding), "pld", "sam", "sam+tree", "sam+cal", "sam+reuse",
     * "sdnpu" (SDNPU_DEFAULT_METHOD). draft_max 0 (SDNPU_DEFAULT_DRAFT_MAX): each step's draft
     * size from this machine's verify cost curve (measured once, cached) and the acceptance
     * seen so far. */
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
     * done reaches total before the first answer token. With graphs: once, at the end. */
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
} sdnpu_request;

SDNPU_API void sdnpu_request_init(sdnpu_request *r);

typedef enum sdnpu_finish {
    SDNPU_FINISH_STOP = 0,      /* the model ended its answer (end-of-generation token) or a stop string */
    SDNPU_FINISH_LENGTH = 1,    /* max_tokens reached */
    SDNPU_FINISH_CANCELLED = 2, /* on_text returned nonzero */
    SDNPU_FINISH_CONTEXT = 3,   /* the context (KV cache) is full */
} sdnpu_finish;

#define SDNPU_ACCEPT_HIST 65

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
} sdnpu_stats;

typedef struct sdnpu_result {
    char *text;          /* the answer (without end-of-generation tokens) */
    int32_t *tokens;
    int n_tokens;
    sdnpu_finish finish;
    int stop_index;      /* the stop string that ended the answer, else -1 */
    sdnpu_stats stats;
} sdnpu_result;

/* Run a request on a context: render and tokenize it, look up the task group's history,
 * prefill (reusing the previous request's KV entries for the common prefix), decode with the
 * drafting method, stream text to on_text, store the answer. result may be NULL when only the
 * stream matters. The context can take another request afterwards.
 * Errors: SDNPU_EINVAL (no prompt, several prompt kinds, unknown method or template, bad
 * parameter, a prompt longer than the context; the message names the field), SDNPU_ENOMEM,
 * SDNPU_EDB (history store), SDNPU_EFORMAT (corrupt history entry). */
SDNPU_API int sdnpu_generate(sdnpu_context *c, const sdnpu_request *r, sdnpu_result *result, sdnpu_error *err);
SDNPU_API void sdnpu_result_free(sdnpu_result *r);

/* The prompt exactly as the model sees it, rendered with its chat template (malloc'd, sdnpu_free).
 * Errors as sdnpu_generate's rendering step. */
SDNPU_API int sdnpu_render_prompt(const sdnpu_model *m, const sdnpu_request *r, char **text, sdnpu_error *err);

#ifdef __cplusplus
}
#endif

#endif
