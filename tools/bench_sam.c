/* bench_sam.c - the work of `sdnpu bench-sam` (tools.h; the options in
 * cli/cmd_bench_sam.c): micro-benchmark of the suffix automaton and the
 * baseline drafters on a synthetic context (default 100,000 tokens).
 *
 * Two token sequences are measured:
 *   random  uniform tokens over the vocabulary (default 151,936, Qwen2.5's size), no
 *           repeats beyond chance: most tokens are new, the root gets a transition per
 *           distinct token;
 *   text    Zipf-distributed tokens (rank r with probability ~ 1/r) in which a third of
 *           the positions are copies of earlier spans (3-32 tokens), like a document that
 *           repeats names and phrases: many repeats, many clone states.
 * For each: extension speed (median of --runs builds, one sdn_sam_extend call per token),
 * bytes per indexed token, incremental match advance, continuation and top-k queries on
 * match states of a query stream, PLD and SAM drafter propose()/feedback() per decoding
 * step (with a naive PLD scan as the in-run baseline), and serialization speed. Targets
 * are printed next to the measurements. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sdn_util.h"
#include "draft/pld.h"
#include "draft/sam_drafter.h"
#include "tools/tools.h"
#include "suffix_automaton/sam.h"
#include "tools/bench_util.h"

#define TARGET_EXT_MTOK 5.0
#define TARGET_QUERY_US 5.0
#define TARGET_BYTES 64.0

typedef sdn_tool_bench_sam_opts bench_opts;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
static double pct(double *v, int n, double p) { /* v sorted */
    int i = (int)(p * (n - 1) + 0.5);
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* ---- data ------------------------------------------------------------------------------ */

typedef struct zipf {
    double *cdf;
    long n;
} zipf;

static int zipf_init(zipf *z, long V) {
    z->cdf = bench_xmalloc(sizeof *z->cdf * (size_t)V);
    if (!z->cdf) return -1;
    double s = 0;
    for (long r = 0; r < V; r++) z->cdf[r] = (s += 1.0 / (double)(r + 1));
    z->n = V;
    return 0;
}
static int32_t zipf_draw(const zipf *z, sdn_rng *rng) {
    double u = sdn_rng_double(rng) * z->cdf[z->n - 1];
    long lo = 0, hi = z->n - 1;
    while (lo < hi) {
        long mid = (lo + hi) / 2;
        if (z->cdf[mid] < u) lo = mid + 1;
        else hi = mid;
    }
    /* scatter ranks over the id space so frequent tokens are not all small ids */
    return (int32_t)(((uint64_t)lo * 2654435761u) % (uint64_t)z->n);
}

/* Fill x[from..n) with fresh tokens (uniform, or Zipf when z is set), a third of the
 * positions being copies of earlier spans when `copies` is set: spans of x[0..i) for a
 * document, spans of x[0..from) (the context) for query and output streams. */
static void gen(int32_t *x, long from, long n, long V, const zipf *z, sdn_rng *rng, int copies, int copy_from_start) {
    for (long i = from; i < n;) {
        long avail = copy_from_start ? from : i;
        if (copies && avail > 64 && sdn_rng_below(rng, 3) == 0) {
            long L = 3 + (long)sdn_rng_below(rng, 30), a = (long)sdn_rng_below(rng, (uint64_t)(avail - 32));
            for (long j = 0; j < L && i < n; j++) x[i++] = x[a + j];
        } else {
            x[i++] = z ? zipf_draw(z, rng) : (int32_t)sdn_rng_below(rng, (uint64_t)V);
        }
    }
}

/* Spec-Bench's find_candidate_pred_tokens by scanning: start of the draft or -1. */
static long naive_pld(const int32_t *x, long L, int max_ngram, int min_ngram, int num_pred) {
    for (int n = max_ngram; n >= min_ngram; n--) {
        if (n > L) continue;
        const int32_t *g = x + L - n;
        for (long idx = 0; idx + n <= L; idx++)
            if (x[idx] == g[0] && !memcmp(x + idx, g, sizeof *g * (size_t)n) && idx + n + num_pred <= L && idx + n < L - n)
                return idx + n;
    }
    return -1;
}

/* ---- measurements -------------------------------------------------------------------------- */

static void line(const char *what, double value, const char *unit, const char *target) {
    printf("  %-44s %12.3f %-8s %s\n", what, value, unit, target ? target : "");
}

static int bench_one(const char *name, const int32_t *ctx, long n, const int32_t *query, long nq, const int32_t *out,
                     long n_out, const bench_opts *o, int32_t *const *hist, const int *hist_len, int n_hist) {
    sdn_err err = {0};
    int R = (int)o->runs;
    double *t = bench_xmalloc(sizeof *t * (size_t)(R > 64 ? R : 64));
    printf("\n[%s] %ld context tokens, vocabulary %ld\n", name, n, o->vocab);

    /* extension */
    sdn_sam *sam = NULL;
    for (int r = 0; r < R; r++) {
        sdn_sam *s;
        if (sdn_sam_create(&s, &err)) goto fail;
        double t0 = sdn_now();
        for (long i = 0; i < n; i++)
            if (sdn_sam_extend(s, ctx[i], &err)) goto fail;
        t[r] = (double)n / (sdn_now() - t0) / 1e6;
        if (r + 1 < R) sdn_sam_free(s);
        else sam = s;
    }
    double ext = median(t, R);
    char tgt[96];
    snprintf(tgt, sizeof tgt, "target >= %.0f M tok/s: %s", TARGET_EXT_MTOK, ext >= TARGET_EXT_MTOK ? "met" : "MISSED");
    line("extension (sdn_sam_extend per token)", ext, "Mtok/s", tgt);
    double bpt = (double)sdn_sam_memory(sam) / (double)n;
    snprintf(tgt, sizeof tgt, "target <= %.0f B/token: %s", TARGET_BYTES, bpt <= TARGET_BYTES ? "met" : "MISSED");
    line("memory / indexed token (positions only)", bpt, "B/token", tgt);
    printf("  %-44s %12.3f states/token, %.3f transitions/token\n", "automaton shape",
           (double)sdn_sam_n_states(sam) / (double)n, (double)sdn_sam_n_transitions(sam) / (double)n);
    double t0 = sdn_now();
    sdn_sam_refresh(sam);
    line("first count query: computes all counts", (sdn_now() - t0) * 1e3, "ms", "(one pass, then incremental)");
    bpt = (double)sdn_sam_memory(sam) / (double)n;
    snprintf(tgt, sizeof tgt, "target <= %.0f B/token: %s", TARGET_BYTES, bpt <= TARGET_BYTES ? "met" : "MISSED");
    line("memory / indexed token (with counts)", bpt, "B/token", tgt);

    /* match advance over the query stream; collect match states for the queries */
    sdn_sam_match *ms = bench_xmalloc(sizeof *ms * (size_t)nq);
    long nms = 0, sumlen = 0;
    sdn_sam_match m = sdn_sam_match_root();
    for (long i = 0; i < nq; i++) {
        sdn_sam_match_advance(sam, &m, query[i]);
        if (m.len) ms[nms++] = m, sumlen += m.len;
    }
    for (int r = 0; r < R; r++) {
        m = sdn_sam_match_root();
        t0 = sdn_now();
        for (long i = 0; i < nq; i++) sdn_sam_match_advance(sam, &m, query[i]);
        t[r] = (sdn_now() - t0) / (double)nq * 1e9;
    }
    line("match advance (incremental, per token)", median(t, R), "ns", "");
    printf("  %-44s %12.2f tokens (%ld of %ld query steps matched)\n", "  mean match length", nms ? (double)sumlen / (double)nms : 0.0, nms, nq);
    if (!nms) ms[nms++] = sdn_sam_match_root();

    int32_t buf[64];
    volatile long sink = 0;
    for (int which = 0; which < 2; which++) {
        for (int r = 0; r < R; r++) {
            t0 = sdn_now();
            for (long i = 0; i < nms; i++) sink += sdn_sam_continuation(sam, &ms[i], which, buf, 10);
            t[r] = (sdn_now() - t0) / (double)nms * 1e6;
        }
        double q = median(t, R);
        snprintf(tgt, sizeof tgt, "target < %.0f us: %s", TARGET_QUERY_US, q < TARGET_QUERY_US ? "met" : "MISSED");
        line(which ? "continuation, 10 tokens, most recent (per query)" : "continuation, 10 tokens, earliest (per query)", q,
             "us", tgt);
    }
    sdn_sam_next nx[8];
    for (int r = 0; r < R; r++) {
        t0 = sdn_now();
        for (long i = 0; i < nms; i++) sink += sdn_sam_next_tokens(sam, &ms[i], 8, nx, NULL, NULL);
        t[r] = (sdn_now() - t0) / (double)nms * 1e6;
    }
    double q = median(t, R);
    snprintf(tgt, sizeof tgt, "target < %.0f us: %s", TARGET_QUERY_US, q < TARGET_QUERY_US ? "met" : "MISSED");
    line("top-8 next tokens with counts (per query)", q, "us", tgt);

    /* serialization */
    uint8_t *bytes = NULL;
    size_t nbytes = 0;
    for (int r = 0; r < R; r++) {
        free(bytes);
        t0 = sdn_now();
        if (sdn_sam_serialize(sam, &bytes, &nbytes, &err)) goto fail;
        t[r] = (double)nbytes / (sdn_now() - t0) / 1e6;
    }
    line("serialize", median(t, R), "MB/s", "");
    for (int r = 0; r < R; r++) {
        sdn_sam *s2;
        t0 = sdn_now();
        if (sdn_sam_deserialize(bytes, nbytes, &s2, &err)) goto fail;
        t[r] = (double)nbytes / (sdn_now() - t0) / 1e6;
        sdn_sam_free(s2);
    }
    double ds = median(t, R);
    line("deserialize (with validation)", ds, "MB/s", "");
    printf("  %-44s %12.3f B/token (%.2f MB), load %.2f Mtok/s vs build %.2f\n", "  serialized size", (double)nbytes / (double)n,
           (double)nbytes / 1e6, ds * 1e6 / ((double)nbytes / (double)n) / 1e6, ext);
    free(bytes);
    sdn_sam_free(sam);
    sam = NULL;

    /* drafters: decode n_out tokens of `out` after the context, accepting drafts that
     * match it; time every propose() and feedback() */
    int32_t *seq = bench_xmalloc(sizeof *seq * (size_t)(n + n_out));
    memcpy(seq, ctx, sizeof *seq * (size_t)n);
    memcpy(seq + n, out, sizeof *seq * (size_t)n_out);
    sdn_tree tree;
    if (sdn_tree_init(&tree, 64, &err)) goto fail;
    int max_steps = (int)n_out;
    double *tp = bench_xmalloc(sizeof *tp * (size_t)max_steps), *tf = bench_xmalloc(sizeof *tf * (size_t)max_steps);
    double naive_us = 0;
    for (int which = 0; which < 5; which++) {
        sdn_drafter d;
        const char *label;
        sdn_draft_caps caps = {32, 16, 1};
        if (which == 0) {
            label = "PLD (3..1-gram, 10 tokens)";
            if (sdn_pld_create(NULL, &d, &err)) goto fail;
        } else {
            sdn_sam_drafter_config c;
            sdn_sam_drafter_defaults(&c);
            if (which == 2) c.min_match = 1;
            if (which >= 3) c.tree = 1, caps = (sdn_draft_caps){32, 10, 4};
            if (which == 4) c.min_match = 2;
            static const char *labels[] = {"", "SAM chain (defaults)", "SAM chain (min_match 1)",
                                           "SAM tree (top-4, 32 nodes)", "SAM tree (min_match 2)"};
            label = labels[which];
            if (sdn_sam_drafter_create(&c, (const int32_t *const *)hist, hist_len, n_hist, &d, &err)) goto fail;
        }
        t0 = sdn_now();
        if (sdn_drafter_begin(&d, seq, (int)n, NULL, &err)) goto fail;
        double tbegin = sdn_now() - t0;
        long L = n, steps = 0, drafted = 0, acc = 0;
        while (L < n + n_out && steps < max_steps) {
            sdn_tree_clear(&tree);
            t0 = sdn_now();
            if (sdn_drafter_propose(&d, &tree, &caps, &err)) goto fail;
            tp[steps] = (sdn_now() - t0) * 1e6;
            int node = -1, a = 0;
            while (L + a < n + n_out) {
                int ch = sdn_tree_find_child(&tree, node, seq[L + a]);
                if (ch < 0) break;
                node = ch, a++;
            }
            long na = a + 1;
            if (L + na > n + n_out) na = n + n_out - L;
            sdn_draft_feedback fb = {seq + L, (int)na, &tree, NULL, -1, NULL, 0};
            t0 = sdn_now();
            if (sdn_drafter_feedback(&d, &fb, &err)) goto fail;
            tf[steps] = (sdn_now() - t0) * 1e6;
            drafted += tree.n, acc += a, L += na, steps++;
        }
        double pm = median(tp, (int)steps), p99 = pct(tp, (int)steps, 0.99), fm = median(tf, (int)steps);
        char label2[128];
        snprintf(label2, sizeof label2, "%s propose (median per step)", label);
        snprintf(tgt, sizeof tgt, "target < %.0f us: %s (p99 %.2f us)", TARGET_QUERY_US, pm < TARGET_QUERY_US ? "met" : "MISSED", p99);
        line(label2, pm, "us", tgt);
        printf("  %-44s %12.3f us   begin() %.1f ms, %ld steps, %.2f tokens/step accepted of %.1f drafted\n",
               "  feedback (median per step)", fm, tbegin * 1e3, steps, (double)(acc + steps) / (double)steps,
               (double)drafted / (double)steps);
        sdn_drafter_destroy(&d);
        if (which == 0) {
            /* baseline in the same run: the published rule as a scan of the whole sequence */
            int S = steps < 200 ? (int)steps : 200;
            for (int s2 = 0; s2 < S; s2++) {
                long LL = n + (long)s2 * (n_out / (S ? S : 1));
                t0 = sdn_now();
                sink += naive_pld(seq, LL, 3, 1, 10);
                tp[s2] = (sdn_now() - t0) * 1e6;
            }
            naive_us = median(tp, S);
            printf("  %-44s %12.3f us   (indexed PLD is %.0fx faster)\n", "  baseline: PLD rule by scanning (per step)", naive_us,
                   pm > 0 ? naive_us / pm : 0.0);
        }
    }
    (void)sink;
    sdn_tree_free(&tree);
    free(tp), free(tf), free(seq), free(ms), free(t);
    return 0;
fail:
    fprintf(stderr, "sdnpu bench-sam: %s\n", err.msg[0] ? err.msg : "failed");
    sdn_sam_free(sam);
    free(t);
    return 1;
}

void sdn_tool_bench_sam_defaults(sdn_tool_bench_sam_opts *o) { *o = (sdn_tool_bench_sam_opts){100000, 151936, 1, 5, 2000}; }

double sdn_tool_bench_sam_max_vocab(void) { return (double)SDN_SAM_MAX_TOKEN; }

int sdn_tool_bench_sam(const sdn_tool_bench_sam_opts *po) {
    const sdn_tool_bench_sam_opts o = *po;
    long n = o.tokens, V = o.vocab, nq = 20000, n_out = o.steps * 4;
    printf("sdnpu bench-sam: %ld tokens, vocabulary %ld, seed %ld, median of %ld runs\n", n, V, o.seed, o.runs);
    printf("targets: extension >= %.0f M tokens/s, a draft query < %.0f us, <= %.0f bytes per indexed token\n", TARGET_EXT_MTOK,
           TARGET_QUERY_US, TARGET_BYTES);
    zipf z;
    int32_t *ctx = bench_xmalloc(sizeof *ctx * (size_t)n), *q = bench_xmalloc(sizeof *q * (size_t)(n + nq)),
            *out = bench_xmalloc(sizeof *out * (size_t)(n + n_out));
    enum { NH = 8, HL = 5000 };
    int32_t *hist[NH];
    int hist_len[NH];
    if (!ctx || !q || !out || zipf_init(&z, V)) {
        fprintf(stderr, "sdnpu bench-sam: out of memory\n");
        return 1;
    }
    int rc = 0;
    for (int kind = 0; kind < 2 && !rc; kind++) {
        sdn_rng rng;
        sdn_rng_seed(&rng, (uint64_t)o.seed * 2 + (uint64_t)kind);
        const zipf *zz = kind ? &z : NULL;
        gen(ctx, 0, n, V, zz, &rng, kind == 1, 0);
        /* query stream and decoded output: copies of the context mixed with fresh tokens */
        memcpy(q, ctx, sizeof *q * (size_t)n);
        gen(q, n, n + nq, V, zz, &rng, 1, 1);
        memcpy(out, ctx, sizeof *out * (size_t)n);
        gen(out, n, n + n_out, V, zz, &rng, 1, 1);
        /* history: earlier answers built the same way from the context */
        for (int h = 0; h < NH; h++) {
            hist[h] = bench_xmalloc(sizeof(int32_t) * (HL + n));
            hist_len[h] = HL;
            memcpy(hist[h], ctx, sizeof(int32_t) * (size_t)n);
            gen(hist[h], n, n + HL, V, zz, &rng, 1, 1);
            memmove(hist[h], hist[h] + n, sizeof(int32_t) * HL);
        }
        rc = bench_one(kind ? "text: Zipf tokens, 1/3 copied spans" : "random: uniform tokens", ctx, n, q + n, nq,
                       out + n, n_out, &o, hist, hist_len, NH);
        for (int h = 0; h < NH; h++) free(hist[h]);
    }
    free(ctx), free(q), free(out), free(z.cdf);
    return rc;
}
