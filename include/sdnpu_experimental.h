/* sdnpu_experimental.h - the research settings of libsdnpu, kept out of the public API.
 *
 * sdnpu.h holds everything an app uses. This header adds what exists to study the engine:
 * the graph runtime (fixed-shape graphs switched block by block during prefill,
 * docs/graphs.md), the choice of prefill matmul, and the ablation drafting methods. Any
 * minor release may change or drop them, and a 1.x minor release may too, unlike what
 * sdnpu.h declares. Within one SONAME they follow sdnpu.h's ABI rules (docs/library.md,
 * "ABI"; scripts/check-abi.sh checks both headers). The `sdnpu` program (`run --graphs`,
 * `--prefill-matmul`), the benchmarks and the tests use them. The examples and the server
 * must not: they include sdnpu.h only, which scripts/check-abi.sh checks.
 *
 * Include this header instead of sdnpu.h (it includes sdnpu.h) and link the same library;
 * the installed package (pkg-config, the CMake package) ships both headers. sdnpu.h's
 * conventions hold here too (status codes, sdnpu_error, struct_size with its *_init macro,
 * threads). */
#ifndef SDNPU_EXPERIMENTAL_H
#define SDNPU_EXPERIMENTAL_H

#include "sdnpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the ablation drafting methods ----
 * Besides the methods of sdnpu.h ("none", "pld", "sam", "sam+model", "sdnpu"),
 * sdnpu_request.method takes three that are sdnpu with parts left out, for studies
 * (docs/drafting.md, "7. The ablation methods and the defaults"):
 *   "sam+tree"  retrieval from every match length and the budget-filling draft tree
 *   "sam+cal"   + in-context calibration by the model's prefill predictions (KV reuse keeps
 *               them, as for "sdnpu"; prefill_topk applies)
 *   "sam+reuse" + draft reuse (what the model predicted at rejected draft nodes)
 * sdnpu_methods lists them and sdnpu_check_method accepts them like any other method. Greedy
 * output is the same as plain decoding's with each of them. */

/* ---- prefill matmuls (process-wide, like the settings of sdnpu.h) ---- */

/* How prefill batches multiply by the weights: "auto" (NULL, the default: the quantized
 * batch kernels for the weight types where they beat OpenBLAS SGEMM, SGEMM for the others),
 * "sgemm" (always, on dequantized F32 weights), "kernels" (always the batch kernels).
 * docs/kernels.md has the measurements; the `sdnpu` program takes it from --prefill-matmul or
 * SDN_PREFILL_MATMUL. Set it before making contexts and never while a context runs a request
 * (the forward pass reads it). The prefix cache is not used under "sgemm", whose bits depend
 * on the chunking. Thread-safe to call, like sdnpu.h's other process-wide settings.
 * Errors: SDNPU_EINVAL (an unknown name; the setting is unchanged). */
SDNPU_API sdnpu_status sdnpu_set_prefill_matmul(const char *name, sdnpu_error *err);

/* ---- the graph runtime ---- */

/* A graph context's settings, given to sdnpu_context_new_graphs: what 0.8's
 * sdnpu_context_params held under the same names. It follows sdnpu.h's struct_size rules
 * (set up by sdnpu_graph_params_init; fields only appended). */
typedef struct sdnpu_graph_params {
    size_t struct_size;     /* set by sdnpu_graph_params_init */
    const char *graphs;     /* the fixed-shape graphs switched during prefill (docs/graphs.md): "single",
                               "sync", "async", "progressive", "optimal"; NULL (default): none, an
                               ordinary context */
    const char *profile_db; /* graph profile cache, an SQLite file (NULL: profiles.sqlite in the cache
                               directory, sdnpu_set_cache_dir; a graph context with neither fails at its
                               first request with SDNPU_EINVAL) */
    int graph_blocks;       /* layer blocks of the graph runtime (0: 8) */
    int g1, g2;             /* prefill and decode graph rows (0: 256, and from the profile) */
    int graph_pin;          /* 1: pin compute threads to CPUs 0..n_threads-1 and the graph loader to
                               the others (needs more CPUs than n_threads) */
} sdnpu_graph_params;

/* Fill *p with the defaults (no graphs) and p->struct_size = size. Errors: SDNPU_EINVAL (p
 * NULL, or size smaller than the first released layout); nothing is written then. Use the
 * macro. */
SDNPU_API sdnpu_status sdnpu_graph_params_init_sized(sdnpu_graph_params *p, size_t size);
#define sdnpu_graph_params_init(p) sdnpu_graph_params_init_sized((p), sizeof *(p))

/* sdnpu_context_new with the graph runtime: p as sdnpu_context_new takes it (NULL:
 * defaults), g the graph settings (NULL, or g->graphs NULL: none, and the call is
 * sdnpu_context_new's); the strings of both are copied. A graph context profiles the model on
 * first use (cached in g->profile_db) and sets up the graph runtime at its first request, for
 * that request's kind (plain or drafted). It switches the model's weight layouts, so only one
 * graph context may use a model at a time, and no other context while it runs. It does not
 * use the model's prefix cache, and its on_progress is called once, at the end of prefill.
 * Greedy output is the same as an ordinary context's.
 * Errors: sdnpu_context_new's (p->struct_size and g->struct_size are checked the same way,
 * naming the struct), and SDNPU_EINVAL for an unknown g->graphs (the message lists the modes).
 * On error *out is NULL and nothing is kept. */
SDNPU_API sdnpu_status sdnpu_context_new_graphs(sdnpu_model *m, const sdnpu_context_params *p, const sdnpu_graph_params *g,
                                                sdnpu_context **out, sdnpu_error *err);

/* SDNPU_OK when graphs names a graph mode of sdnpu_graph_params.graphs ("single", "sync",
 * "async", "progressive", "optimal"; docs/graphs.md), else SDNPU_EINVAL listing them (graphs
 * NULL included). Callable from any thread. */
SDNPU_API sdnpu_status sdnpu_check_graphs(const char *graphs, sdnpu_error *err);

/* The graph runtime's account of the last request (layout switches, waits, time to first
 * token) as text, malloc'd (sdnpu_free).
 * Errors: SDNPU_EINVAL (c or text NULL), SDNPU_ESTATE (the context has no graphs, or has run
 * no request yet; the context is unchanged). On error *text is NULL (when text is not). */
SDNPU_API sdnpu_status sdnpu_graph_report(const sdnpu_context *c, char **text, sdnpu_error *err);

#ifdef __cplusplus
}
#endif

#endif
