/* test_util.h - helpers shared by the CMocka tests: locating ../shared (skip when absent
 * in a user's clone, fail under CI=true), scratch paths, and cached make-model models. */
#ifndef SDN_TEST_UTIL_H
#define SDN_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Path of the shared material (SDN_SHARED, else ../shared beside the source tree, SDN_SOURCE;
 * nothing further up), or NULL
 * when absent. When absent and CI=true, the calling test fails. Tests that get NULL call
 * skip() after printing why. */
const char *tu_shared(void);
/* Join shared dir and a relative path into a static buffer (rotating, 8 slots). */
const char *tu_shared_path(const char *rel);
/* A scratch directory for this test process: created empty on first use (a new one each run,
 * never an earlier process's), kept afterwards for its logs. */
const char *tu_tmpdir(void);
/* tu_tmpdir()/name in a static rotating buffer. */
const char *tu_tmp(const char *name);
/* Path of a cached make-model model (built on first use into $SDN_BUILD/test-models). */
const char *tu_model(const char *shape, const char *type, uint64_t seed);
/* Same, with the layer count overridden (fast real-vocabulary shapes). */
const char *tu_model_layers(const char *shape, const char *type, uint64_t seed, int layers, const char *vocab_from);
struct sdn_model;
struct sdn_ctx;
/* Load a model (failing the test on error); tokenizer: a llama2.c tokenizer.bin, "" for a
 * GGUF's own tokenizer, NULL for none. */
struct sdn_model *tu_load(const char *path, const char *tokenizer);
/* The real TinyStories 260K model from ../shared with its tokenizer. */
struct sdn_model *tu_load_stories(void);
/* An inference context (failing the test on error). */
struct sdn_ctx *tu_ctx(struct sdn_model *m, int n_ctx, int threads, int max_batch);
/* The same with KV cache types (sdn_kv_type values of attention/kv_cache.h). */
struct sdn_ctx *tu_ctx_kv(struct sdn_model *m, int n_ctx, int threads, int max_batch, int type_k, int type_v);
/* Write bytes to a file; returns 0 on success. */
int tu_write_file(const char *path, const void *data, size_t n);
/* Offset of the 4-byte value of GGUF key `key` of type UINT32 in the file image b[0..n), or 0
 * when absent (tests patch it to make a bad header). */
size_t tu_gguf_u32_at(const unsigned char *b, size_t n, const char *key);

/* A file of the source tree (SDN_SOURCE, set by CTest), in a static rotating buffer. */
const char *tu_source_path(const char *rel);
/* Path of the cached real SmolLM2-135M-Instruct GGUF (`sdnpu pull smollm2-135m-instruct`,
 * verified size and SHA-256), or NULL when it is not in the cache; under CI=true its absence
 * fails the test. */
const char *tu_smollm2(void);
/* The same for any known model of modelfile/model_registry.c (`sdnpu pull NAME`): its cached
 * path (a static buffer, valid until a call with another name), or NULL / a CI failure. */
const char *tu_known_model(const char *name);

/* Skip (or fail under CI) when the real Gemma 3 270M model is not in the cache. */
#define TU_REQUIRE_GEMMA3(path)                                                                         \
    do {                                                                                                \
        if (!((path) = tu_known_model("gemma-3-270m"))) {                                               \
            print_message("gemma-3-270m is not in the model cache: test skipped "                       \
                          "(run ./sdnpu pull gemma-3-270m)\n");                                        \
            skip();                                                                                     \
        }                                                                                               \
    } while (0)

/* Skip (or fail under CI) when the real SmolLM2 model is not in the cache. */
#define TU_REQUIRE_SMOLLM2(path)                                                                        \
    do {                                                                                                \
        if (!((path) = tu_smollm2())) {                                                                 \
            print_message("SmolLM2-135M-Instruct is not in the model cache: test skipped "              \
                          "(run ./sdnpu pull smollm2-135m-instruct)\n");                               \
            skip();                                                                                     \
        }                                                                                               \
    } while (0)

/* Skip (or fail under CI) when shared data is missing: use at the top of a test. */
#define TU_REQUIRE_SHARED()                                                              \
    do {                                                                                 \
        if (!tu_shared()) {                                                              \
            print_message("../shared not found: test skipped (set SDN_SHARED)\n");       \
            skip();                                                                      \
        }                                                                                \
    } while (0)

struct sdn_ctx;
struct sdn_gen_stats;
/* Greedy generation with drafting method `method` (by name, default parameters) under the
 * engine's default caps (4 draft tokens, branch 4), stopping at the model's end-of-generation
 * tokens: the lossless checks of the real-model tests. Methods other than "none" reuse the
 * context's KV entries for the prompt's common prefix (those without prefill predictions; the
 * others prefill from scratch). Fails the test on an error; returns the malloc'd tokens. */
int32_t *tu_gen_method(struct sdn_ctx *c, const char *method, const int32_t *prompt, int n, int max_new, int *n_out,
                       struct sdn_gen_stats *st);

#endif
