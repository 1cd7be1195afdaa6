/* test_arch_golden.c - the same logits bits on every kernel path of both architectures: hashes of the logits of real models on fixed tokens, recorded once on x86-64 (portable
 * path) in tests/golden/arch_logits.txt, compared on every path of the machine running the test
 * (on AArch64 under qemu-aarch64 -cpu max in CI: portable, neon, dotprod, i8mm).
 *
 * Requests: the shortest golden requests of SmolLM2-135M-Instruct (Q4_1; Q8_0 embeddings and
 * LM head) and Gemma 3 270M (Q4_K_M: Q4_K, Q6_K, Q5_0/Q8_0 for the 640-wide matrices), prompt
 * plus llama.cpp's answer from their golden files. Every batch runs on the batch-invariant path
 * (prompt in 64-row chunks, answer positions in batches of 8, 2 threads): no OpenBLAS call
 * (whose kernels differ between architectures) takes part, so the bits are a function of the
 * model, the tokens and sdnpu's own arithmetic. Each answer position's logits row is hashed
 * (XXH64 of its float bytes).
 *
 * Which paths must match: on AArch64 all four (the SIMD paths' matmul and attention kernels
 * reproduce the portable float sequence, the rest of their work is the portable code). On x86-64 the portable path;
 * the avx2/avx512/amx paths keep their own float operations in the SiLU and top-k
 * exponentials of engine/forward.c and their own order in the row-parallel types
 * (docs/kernels.md, "Elementwise work", "Batch invariance"), so they are reported as not
 * compared.
 *
 * Recording (x86-64): scripts/record_arch_golden.sh (SDN_GOLDEN_RECORD=1, portable entry). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <xxhash.h>

#include "engine/forward.h"
#include "kernels/kernel_path.h"
#include "modelfile/model.h"
#include "support/kpath_test.h"
#include "support/golden.h"
#include "support/test_util.h"

#define MAX_REQ 2
#define GOLDEN "tests/golden/arch_logits.txt"

typedef struct {
    const char *name, *golden;
    int n_req, n_pos; /* requests, answer positions per request (kept small: emulation is slow) */
} model_spec;

static const model_spec models[] = {
    {"smollm2", "tests/golden/smollm2/llamacpp.jsonl", 2, 8},
    {"gemma3", "tests/golden/gemma3/llamacpp.jsonl", 1, 4},
};

/* Logits hashes of model k's n_req shortest requests into out (one line per request:
 * "model id n_prompt hash hash ..."); returns the number of lines, 0 when the model is absent. */
static int run_model(int k, char *out, size_t cap) {
    const char *path = k == 0 ? tu_smollm2() : tu_known_model("gemma-3-270m");
    if (!path) return 0;
    sdn_model *m = tu_load(path, "");
    sg_golden *g = sg_load(tu_source_path(models[k].golden));
    const int V = sdn_model_cfg(m)->vocab;
    /* the N_REQ shortest requests, in file order among equals */
    /* SDN_TEST_QUICK (.ci/aarch64 under emulation): one request per model; the recorded lines
     * are matched by request, so the others are simply not compared */
    const int N_REQ = getenv("SDN_TEST_QUICK") ? 1 : models[k].n_req, N_POS = models[k].n_pos;
    int pick[MAX_REQ], np = 0;
    for (int t = 0; t < N_REQ; t++) {
        int best = -1;
        for (int r = 0; r < g->n; r++) {
            int used = 0;
            for (int u = 0; u < np; u++) used |= pick[u] == r;
            if (used || g->req[r].n_answer < N_POS) continue;
            if (best < 0 || g->req[r].n_prompt < g->req[best].n_prompt) best = r;
        }
        assert_true(best >= 0);
        pick[np++] = best;
    }
    sdn_ctx *c = tu_ctx(m, 1024, 2, 64);
    float *logits = malloc(sizeof(float) * (size_t)V * 8);
    size_t len = 0;
    for (int t = 0; t < N_REQ; t++) {
        const sg_request *q = &g->req[pick[t]];
        const int n = q->n_prompt + N_POS;
        int32_t *seq = malloc(sizeof(int32_t) * (size_t)n);
        memcpy(seq, q->prompt_ids, sizeof(int32_t) * (size_t)q->n_prompt);
        memcpy(seq + q->n_prompt, q->answer_ids, sizeof(int32_t) * N_POS);
        sdn_kv_truncate(c, 0);
        sdn_err e = {0};
        for (int s = 0; s < q->n_prompt - 1; s += 64) {
            const int b = q->n_prompt - 1 - s < 64 ? q->n_prompt - 1 - s : 64;
            sdn_batch bt = {.n = b, .tokens = seq + s, .n_logits = 0, .invariant = 1};
            if (sdn_forward(c, &bt, NULL, &e)) fail_msg("%s: %s", q->id, e.msg);
        }
        len += (size_t)snprintf(out + len, cap - len, "%s %s %d", models[k].name, q->id, q->n_prompt);
        const int32_t rows[8] = {0, 1, 2, 3, 4, 5, 6, 7};
        for (int s = q->n_prompt - 1; s < q->n_prompt - 1 + N_POS; s += 8) {
            const int b = q->n_prompt - 1 + N_POS - s < 8 ? q->n_prompt - 1 + N_POS - s : 8;
            sdn_batch bt = {.n = b, .tokens = seq + s, .logit_rows = rows, .n_logits = b, .invariant = 1};
            if (sdn_forward(c, &bt, logits, &e)) fail_msg("%s: %s", q->id, e.msg);
            for (int i = 0; i < b; i++)
                len += (size_t)snprintf(out + len, cap - len, " %016llx",
                                        (unsigned long long)XXH64(logits + (size_t)i * V, sizeof(float) * (size_t)V, 0));
        }
        len += (size_t)snprintf(out + len, cap - len, "\n");
        free(seq);
    }
    free(logits);
    sdn_ctx_free(c);
    sg_free(g);
    sdn_model_free(m);
    return N_REQ;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    s[fread(s, 1, (size_t)n, f)] = 0;
    fclose(f);
    return s;
}

/* The golden line of (model, id), or NULL. */
static const char *golden_line(const char *gold, const char *line, size_t *n) {
    const char *sp = strchr(line, ' ');
    sp = sp ? strchr(sp + 1, ' ') : NULL; /* "model id " */
    if (!sp) return NULL;
    const size_t key = (size_t)(sp - line) + 1;
    for (const char *p = gold; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (*p != '#' && !strncmp(p, line, key)) {
            const char *e = strchr(p, '\n');
            *n = e ? (size_t)(e - p) : strlen(p);
            return p;
        }
    return NULL;
}

static void test_logits_match_x86(void **state) {
    kpath_use(state);
    const sdn_kpath p = sdn_kpath_get();
    if (p >= SDN_KPATH_AVX2 && p <= SDN_KPATH_AMX) {
        print_message("not compared on path %s: the x86 SIMD paths keep their own SiLU, GELU and top-k exponentials and "
                      "their own order in the row-parallel types (docs/kernels.md); the golden bits are the portable path's\n",
                      sdn_kpath_name(p));
        skip();
    }
    sdn_prefill_mm_set(SDN_PREFILL_MM_AUTO);
    char out[8192];
    const int record = getenv("SDN_GOLDEN_RECORD") && p == SDN_KPATH_PORTABLE;
    FILE *rec = NULL;
    if (record) {
        rec = fopen(tu_source_path(GOLDEN), "w");
        assert_non_null(rec);
        fprintf(rec, "# test_arch_golden: XXH64 of each logits row (float bytes) of the first answer positions, batch-invariant path, 2 threads\n"
                     "# recorded on x86-64 by scripts/record_arch_golden.sh (kernel path portable); columns: model request "
                     "n_prompt hashes\n");
    }
    char *gold = record ? NULL : slurp(tu_source_path(GOLDEN));
    if (!record) assert_non_null(gold);
    int lines = 0, bad = 0;
    for (int k = 0; k < (int)(sizeof models / sizeof models[0]); k++) {
        const int got = run_model(k, out, sizeof out);
        if (!got) {
            print_message("%s is not in the model cache: its requests are not compared\n", models[k].name);
            continue;
        }
        for (char *l = out; *l; l = strchr(l, '\n') + 1) {
            const size_t n = (size_t)(strchr(l, '\n') - l);
            lines++;
            if (record) {
                fprintf(rec, "%.*s\n", (int)n, l);
                continue;
            }
            size_t gn = 0;
            const char *g = golden_line(gold, l, &gn);
            if (!g) fail_msg("no golden line for '%.*s'", (int)n, l);
            if (gn != n || memcmp(g, l, n)) {
                print_error("path %s differs from x86-64:\n  here   %.*s\n  golden %.*s\n", sdn_kpath_name(p), (int)n, l, (int)gn, g);
                bad++;
            }
        }
    }
    if (rec) fclose(rec);
    free(gold);
    print_message("path %s: %d requests, %s\n", sdn_kpath_name(p), lines,
                  record ? "recorded" : bad ? "DIFFERENT logits" : "logits bit-identical to the x86-64 recording");
    assert_int_equal(bad, 0);
}

int main(void) {
    if (getenv("SDN_TEST_FILTER")) cmocka_set_test_filter(getenv("SDN_TEST_FILTER"));
    const struct CMUnitTest tests[] = {KPATH_TESTS(test_logits_match_x86)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
