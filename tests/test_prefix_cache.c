/* test_prefix_cache.c - the prefix cache (runtime/prefix_cache.h, runtime/prefill.h).
 *
 * The store against its contract: chained keys, the memory budget with least-recently-used
 * eviction and pinned blocks kept, a claimed block computed once while a second thread waits
 * for it, a dropped claim passed on. Exactness against the reference that matters, a fresh
 * prefill: the same request with blocks from the cache gives the same tokens and the same
 * prefill predictions, bit for bit, for every KV cache type, drafting method, greedy and seeded
 * sampling, prefill chunk size and thread count, on three architectures (gemma3's sliding
 * window among them), also when only part of the prefix is shared. Through the public API:
 * the disk tier across a restart, damaged, truncated and foreign block files and a damaged
 * index (one warning each, the same answers), a directory that cannot be written and a full
 * disk (a warning, memory only), a history store and task group, writers killed with SIGKILL at random moments (no damaged
 * file, leftovers swept), two processes sharing a directory at once, the budgets, the
 * request's opt-out, and two contexts asking for the same document at once (computed once). */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>
#include <cmocka.h>

#include "common/sdn_util.h"
#include "draft/methods.h"
#include "engine/forward.h"
#include "modelfile/model.h"
#include "runtime/decode.h"
#include "runtime/prefix_cache.h"
#include "sdnpu.h"
#include "support/test_util.h"

#define BLK SDN_PREFIX_BLOCK

/* ---- the store ---- */

static int32_t toks[BLK];

static void test_keys(void **state) {
    (void)state;
    for (int i = 0; i < BLK; i++) toks[i] = i;
    sdn_pkey a = sdn_pkey_base("settings A"), b = sdn_pkey_base("settings B");
    assert_false(a.lo == b.lo && a.hi == b.hi);
    sdn_pkey a1 = sdn_pkey_next(a, toks), a1b = sdn_pkey_next(a, toks), b1 = sdn_pkey_next(b, toks);
    assert_true(a1.lo == a1b.lo && a1.hi == a1b.hi);
    assert_false(a1.lo == b1.lo && a1.hi == b1.hi);
    toks[63] = 1000;
    sdn_pkey a1c = sdn_pkey_next(a, toks);
    assert_false(a1.lo == a1c.lo && a1.hi == a1c.hi);
    /* the chain: block 2 after different first blocks differs with the same own tokens */
    assert_false(sdn_pkey_next(a1, toks).lo == sdn_pkey_next(a1c, toks).lo);
}

static uint8_t *image(size_t n, int v) {
    uint8_t *p = malloc(n);
    memset(p, v, n);
    return p;
}

static void test_store_lru(void **state) {
    (void)state;
    const size_t n = 1000;
    sdn_pcache_opts o = {.mem_bytes = 3 * n};
    sdn_pcache *pc;
    assert_int_equal(sdn_pcache_new(&o, &pc, NULL), SDN_OK);
    sdn_pkey k[6];
    k[0] = sdn_pkey_base("lru");
    for (int i = 1; i < 6; i++) k[i] = sdn_pkey_next(k[i - 1], toks);
    sdn_pblock *b, *pinned;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(sdn_pcache_get(pc, k[i], toks, n, 1, &b), SDN_PC_CLAIMED);
        sdn_pcache_publish(pc, b, image(n, i), 0.5);
        if (i == 0) assert_int_equal(sdn_pcache_get(pc, k[0], toks, n, 1, &pinned), SDN_PC_MEM); /* pinned: never evicted */
        sdn_pcache_stats st;
        sdn_pcache_get_stats(pc, &st);
        /* the pinned block may hold the cache one block over its budget, never more */
        assert_true(st.mem_bytes <= 4 * n);
    }
    /* blocks 0 (pinned), 3 and 4 remain; 1 and 2, the least recently used unpinned ones, went */
    assert_int_equal(sdn_pcache_get(pc, k[4], toks, n, 0, &b), SDN_PC_MEM);
    assert_int_equal(sdn_pblock_data(b)[0], 4);
    assert_true(sdn_pblock_cost(b) == 0.5);
    sdn_pcache_put(pc, b);
    assert_int_equal(sdn_pcache_get(pc, k[1], toks, n, 0, &b), SDN_PC_CLAIMED);
    sdn_pcache_drop(pc, b);
    assert_int_equal(sdn_pblock_data(pinned)[0], 0);
    sdn_pcache_put(pc, pinned);
    /* another image size for the same key (a context of another layout) is not shared */
    assert_int_equal(sdn_pcache_get(pc, k[4], toks, n + 1, 0, &b), SDN_PC_CLAIMED);
    sdn_pcache_publish(pc, b, image(n + 1, 9), 0);
    assert_int_equal(sdn_pcache_get(pc, k[4], toks, n, 0, &b), SDN_PC_MEM);
    assert_int_equal(sdn_pblock_data(b)[0], 4);
    sdn_pcache_put(pc, b);
    sdn_pcache_stats st;
    sdn_pcache_get_stats(pc, &st);
    assert_true(st.mem_bytes <= 3 * n);
    assert_true(st.evictions >= 2);
    sdn_pcache_free(pc);
    /* budget 0: a block lives while it is pinned, then goes */
    o.mem_bytes = 0;
    assert_int_equal(sdn_pcache_new(&o, &pc, NULL), SDN_OK);
    assert_int_equal(sdn_pcache_get(pc, k[0], toks, n, 1, &b), SDN_PC_CLAIMED);
    sdn_pcache_publish(pc, b, image(n, 1), 0);
    sdn_pcache_get_stats(pc, &st);
    assert_int_equal(st.mem_bytes, 0);
    sdn_pcache_free(pc);
}

typedef struct waiter {
    sdn_pcache *pc;
    sdn_pkey key;
    int result;
    int value;
} waiter;

static void *wait_thread(void *arg) {
    waiter *w = arg;
    sdn_pblock *b;
    w->result = sdn_pcache_get(w->pc, w->key, toks, 100, 1, &b);
    if (w->result == SDN_PC_MEM) {
        w->value = sdn_pblock_data(b)[0];
        sdn_pcache_put(w->pc, b);
    } else if (w->result == SDN_PC_CLAIMED) sdn_pcache_publish(w->pc, b, image(100, 77), 0);
    return NULL;
}

/* a claimed block: a second thread waits for it, then gets the claimer's image; a claim
 * dropped: the waiter claims it itself */
static void test_store_claim_wait(void **state) {
    (void)state;
    sdn_pcache_opts o = {.mem_bytes = 1 << 20};
    sdn_pcache *pc;
    assert_int_equal(sdn_pcache_new(&o, &pc, NULL), SDN_OK);
    for (int round = 0; round < 2; round++) {
        waiter w = {.pc = pc, .key = sdn_pkey_base(round ? "drop" : "publish")};
        sdn_pblock *b;
        assert_int_equal(sdn_pcache_get(pc, w.key, toks, 100, 1, &b), SDN_PC_CLAIMED);
        assert_int_equal(sdn_pcache_get(pc, w.key, toks, 100, 0, &(sdn_pblock *){0}), SDN_PC_BUSY);
        pthread_t t;
        pthread_create(&t, NULL, wait_thread, &w);
        usleep(50000); /* the waiter is blocked: it has not returned */
        assert_int_equal(w.result, 0);
        if (round == 0) sdn_pcache_publish(pc, b, image(100, 42), 0);
        else sdn_pcache_drop(pc, b);
        pthread_join(t, NULL);
        if (round == 0) {
            assert_int_equal(w.result, SDN_PC_MEM);
            assert_int_equal(w.value, 42);
        } else assert_int_equal(w.result, SDN_PC_CLAIMED);
    }
    sdn_pcache_stats st;
    sdn_pcache_get_stats(pc, &st);
    assert_int_equal(st.misses, 3); /* two claims of ours, the waiter's after the drop */
    assert_int_equal(st.hits_mem, 1);
    sdn_pcache_free(pc);
}

/* ---- exactness on the engine ---- */

typedef struct run_out {
    int32_t *tok;
    int n;
    sdn_gen_stats st;
    sdn_preds preds;
} run_out;

static run_out run(sdn_ctx *c, const char *method, const int32_t *prompt, int n, float temp, int chunk, sdn_pcache *pc) {
    sdn_method_config mc;
    sdn_method_defaults(&mc);
    sdn_drafter d;
    sdn_err e = {0};
    if (sdn_method_create(method, &mc, &d, &e)) fail_msg("%s", e.msg);
    run_out r = {0};
    sdn_gen_params gp = {.max_tokens = 24, .drafter = d.ops ? &d : NULL, .ignore_eog = 1, .prefill_chunk = chunk, .pcache = pc,
                         .prefill_topk = d.ops && sdn_method_uses_prefill_preds(method) ? 4 : 0, .preds_out = &r.preds};
    gp.sampling.temp = temp;
    gp.sampling.seed = 1234;
    gp.sampling.top_p = 1.0f;
    sdn_kv_truncate(c, 0);
    if (sdn_generate_tokens(c, prompt, n, &gp, &r.tok, &r.n, &r.st, &e)) fail_msg("%s", e.msg);
    sdn_drafter_destroy(&d);
    return r;
}

static void same(const run_out *a, const run_out *b, const char *what) {
    if (a->n != b->n || memcmp(a->tok, b->tok, sizeof(int32_t) * (size_t)a->n)) fail_msg("%s: tokens differ from a fresh prefill", what);
    if (a->preds.n_pos != b->preds.n_pos || a->preds.k != b->preds.k) fail_msg("%s: predictions of another shape", what);
    size_t np = (size_t)a->preds.n_pos * (size_t)a->preds.k;
    if (np && (memcmp(a->preds.tok, b->preds.tok, np * sizeof(int32_t)) || memcmp(a->preds.prob, b->preds.prob, np * sizeof(float))))
        fail_msg("%s: prefill predictions differ from a fresh prefill", what);
}

static void run_free(run_out *r) {
    free(r->tok);
    sdn_preds_free(&r->preds);
}

static void exact_on(const char *shape, const char *type, int kv_types_all) {
    sdn_model *m = tu_load(tu_model(shape, type, 5), NULL);
    const int V = sdn_model_cfg(m)->vocab;
    sdn_rng r;
    sdn_rng_seed(&r, 99);
    enum { N = 200 };
    int32_t prompt[N], other[N];
    for (int i = 0; i < N; i++) prompt[i] = (int32_t)sdn_rng_below(&r, (uint64_t)V);
    for (int i = 100; i < 140; i++) prompt[i] = prompt[i - 70]; /* something for the drafters to find */
    memcpy(other, prompt, sizeof other);
    other[150] = (other[150] + 1) % V; /* shares the first two blocks only */
    const char *methods[] = {"none", "pld", "sam", "sdnpu", "sam+tree", "sam+cal", "sam+reuse", "sam+model"};
    const int n_methods = kv_types_all ? 8 : 4;
    const int kvs[] = {SDN_KV_F16, SDN_KV_Q8, SDN_KV_BF16, SDN_KV_F32};
    const int chunks[] = {0, 7, 100, 64};
    int combo = 0;
    /* every method greedy and four sampled on the f16 cache; on the other types plain decoding
     * and sdnpu, greedy and sampled. SDN_TEST_QUICK (.ci/sanitize): f16 and q8, four methods */
    const int quick = getenv("SDN_TEST_QUICK") != NULL;
    for (int t = 0; t < (kv_types_all ? (quick ? 2 : 4) : 1); t++)
        for (int k = 0; k < (t == 0 && !quick ? n_methods : 4); k++)
            for (int s = 0; s < 2; s++, combo++) {
                if (t > 0 && k != 0 && k != 3) continue;
                if (s && k >= 4) continue;
                const float temp = s ? 0.8f : 0.0f;
                const int threads = 1 + combo % 2, chunk = chunks[combo % 4];
                sdn_pcache_opts o = {.mem_bytes = 64 << 20};
                sdn_pcache *pc;
                assert_int_equal(sdn_pcache_new(&o, &pc, NULL), SDN_OK);
                sdn_ctx *fresh = tu_ctx_kv(m, 512, threads, 256, kvs[t], kvs[t]);
                sdn_ctx *filler = tu_ctx_kv(m, 512, 2, 256, kvs[t], kvs[t]);
                sdn_ctx *user = tu_ctx_kv(m, 512, 3 - threads, 256, kvs[t], kvs[t]);
                char what[160];
                snprintf(what, sizeof what, "%s %s, cache %s, %s, %s, chunk %d, %d threads", shape, type, sdn_kv_type_name(kvs[t]), methods[k],
                         s ? "sampled" : "greedy", chunk, threads);
                run_out ref = run(fresh, methods[k], prompt, N, temp, chunk, NULL);
                run_out fill = run(filler, methods[k], prompt, N, temp, chunks[(combo + 1) % 4], pc); /* fills the cache */
                run_out hit = run(user, methods[k], prompt, N, temp, chunk, pc);
                same(&ref, &fill, what);
                same(&ref, &hit, what);
                assert_int_equal(fill.st.n_cached_mem, 0);
                assert_int_equal(hit.st.n_cached_mem, (N - 1) / BLK * BLK);
                /* a prompt that shares two blocks: those from the cache, the rest computed */
                run_out ref2 = run(fresh, methods[k], other, N, temp, chunk, NULL);
                run_out hit2 = run(user, methods[k], other, N, temp, chunk, pc);
                same(&ref2, &hit2, what);
                assert_int_equal(hit2.st.n_cached_mem, 2 * BLK);
                run_free(&ref), run_free(&fill), run_free(&hit), run_free(&ref2), run_free(&hit2);
                sdn_ctx_free(fresh);
                sdn_ctx_free(filler);
                sdn_ctx_free(user);
                sdn_pcache_free(pc);
            }
    sdn_model_free(m);
}

static void test_exact_llama(void **state) {
    (void)state;
    exact_on("tiny-llama", "Q8_0", 1);
}

static void test_exact_other_archs(void **state) {
    (void)state;
    exact_on("tiny-gemma3", "Q4_0", 0); /* window of 8 positions on two of its layers */
    exact_on("tiny-qwen3", "F16", 0);   /* head dimension 96 */
}

/* ---- the public API, the disk tier ---- */

typedef struct logcap {
    pthread_mutex_t mu;
    int warnings;
    char last[2048];
} logcap;
static logcap g_log = {PTHREAD_MUTEX_INITIALIZER, 0, ""};

static void capture(void *user, sdnpu_log_level level, const char *msg) {
    (void)user;
    if (level != SDNPU_LOG_WARN) return;
    pthread_mutex_lock(&g_log.mu);
    g_log.warnings++;
    snprintf(g_log.last, sizeof g_log.last, "%s", msg);
    pthread_mutex_unlock(&g_log.mu);
}

static int warnings_since(int *mark) {
    pthread_mutex_lock(&g_log.mu);
    int n = g_log.warnings - *mark;
    *mark = g_log.warnings;
    pthread_mutex_unlock(&g_log.mu);
    return n;
}

static sdnpu_model *load_cached(const char *dir, uint64_t mem, uint64_t disk) {
    sdnpu_model_params mp;
    sdnpu_model_params_init(&mp);
    mp.prefix_cache_bytes = mem;
    mp.prefix_cache_dir = dir;
    mp.prefix_cache_disk_bytes = disk;
    sdnpu_model *m = NULL;
    sdnpu_error e = {0};
    if (sdnpu_model_load(tu_model("tiny-llama", "Q8_0", 3), &mp, &m, &e)) fail_msg("%s", e.message);
    return m;
}

static int32_t g_docs[4][400];

static void make_docs(void) {
    sdn_rng r;
    sdn_rng_seed(&r, 7);
    for (int d = 0; d < 4; d++)
        for (int i = 0; i < 400; i++) g_docs[d][i] = (int32_t)(1 + sdn_rng_below(&r, 500));
}

typedef struct answer {
    char text[4096];
    int32_t tok[64];
    int n;
    sdnpu_stats st;
} answer;

static answer ask(sdnpu_model *m, int doc, int n_tokens, const char *method, float temp, int use_cache) {
    sdnpu_context_params cp;
    sdnpu_context_params_init(&cp);
    cp.n_threads = 1;
    cp.n_ctx = 512;
    sdnpu_context *c;
    sdnpu_error e = {0};
    if (sdnpu_context_new(m, &cp, &c, &e)) fail_msg("%s", e.message);
    sdnpu_request r;
    sdnpu_request_init(&r);
    r.prompt_ids = g_docs[doc];
    r.n_prompt_ids = n_tokens;
    r.method = method;
    r.max_tokens = 20;
    r.ignore_eos = 1;
    r.temperature = temp;
    r.seed = 5;
    r.prefix_cache = use_cache;
    r.draft_max = 8; /* a fixed budget: no verify cost curve to measure (children running as another user cannot read its cache) */
    sdnpu_result res;
    sdnpu_result_init(&res);
    if (sdnpu_generate(c, &r, &res, &e)) fail_msg("%s", e.message);
    answer a = {0};
    snprintf(a.text, sizeof a.text, "%s", res.text);
    a.n = res.n_tokens < 64 ? res.n_tokens : 64;
    memcpy(a.tok, res.tokens, sizeof(int32_t) * (size_t)a.n);
    a.st = res.stats;
    sdnpu_result_free(&res);
    sdnpu_context_free(c);
    return a;
}

static void same_answer(const answer *a, const answer *b, const char *what) {
    if (a->n != b->n || memcmp(a->tok, b->tok, sizeof(int32_t) * (size_t)a->n) || strcmp(a->text, b->text))
        fail_msg("%s: the answer differs from the one without the prefix cache", what);
}

static answer g_ref[4][2]; /* [doc][greedy sdnpu, sampled sam], without any cache */

static void references(void) {
    static int done;
    if (done) return;
    done = 1;
    make_docs();
    sdnpu_set_log(capture, NULL);
    sdnpu_model *m = load_cached(NULL, 0, 0);
    for (int d = 0; d < 4; d++) {
        g_ref[d][0] = ask(m, d, 400, "sdnpu", 0, 1);
        g_ref[d][1] = ask(m, d, 400, "sam", 0.9f, 1);
    }
    sdnpu_model_free(m);
}

static void check_all(sdnpu_model *m, const char *what, int *from_disk, int *from_mem) {
    for (int d = 0; d < 4; d++) {
        answer a = ask(m, d, 400, "sdnpu", 0, 1), b = ask(m, d, 400, "sam", 0.9f, 1);
        same_answer(&g_ref[d][0], &a, what);
        same_answer(&g_ref[d][1], &b, what);
        if (from_disk) *from_disk += a.st.prefix_disk_tokens + b.st.prefix_disk_tokens;
        if (from_mem) *from_mem += a.st.prefix_memory_tokens + b.st.prefix_memory_tokens;
    }
}

static const char *fresh_dir(const char *name) {
    static char buf[8][1024];
    static int i;
    char *p = buf[i++ % 8];
    snprintf(p, 1024, "%s", tu_tmp(name));
    return p;
}

/* Files in DIR/blocks: block files (kind 0) or temporary files (kind 1). */
static int count_files(const char *dir, int kind) {
    char p[1100];
    snprintf(p, sizeof p, "%s/blocks", dir);
    DIR *d = opendir(p);
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (kind ? !strncmp(de->d_name, ".tmp-", 5) : strlen(de->d_name) == 35 && !strcmp(de->d_name + 32, ".kv")) n++;
    closedir(d);
    return n;
}

static int block_file(const char *dir, int idx, char *out, size_t cap) {
    char p[1100];
    snprintf(p, sizeof p, "%s/blocks", dir);
    DIR *d = opendir(p);
    if (!d) return -1;
    struct dirent *de;
    int n = 0, found = -1;
    while ((de = readdir(d)))
        if (strlen(de->d_name) == 35 && n++ == idx) {
            snprintf(out, cap, "%s/%s", p, de->d_name);
            found = 0;
            break;
        }
    closedir(d);
    return found;
}

static void test_disk_restart(void **state) {
    (void)state;
    references();
    const char *dir = fresh_dir("pc-restart");
    int mark = g_log.warnings;
    sdnpu_model *m = load_cached(dir, 64 << 20, 0);
    int mem = 0, disk = 0;
    check_all(m, "first process", &disk, &mem);
    assert_int_equal(disk, 0);
    assert_true(mem > 0); /* the second request of each doc hits the memory tier */
    sdnpu_prefix_cache_stats st;
    sdnpu_prefix_cache_stats_init(&st);
    assert_int_equal(sdnpu_prefix_cache_get_stats(m, &st, NULL), SDNPU_OK);
    assert_int_equal(st.enabled, 1);
    assert_int_equal(st.disk_enabled, 1);
    assert_int_equal(st.disk_writes, 4 * (399 / BLK));
    assert_true(st.disk_bytes > 0 && st.memory_bytes <= st.memory_budget);
    sdnpu_model_free(m);
    struct stat sb;
    assert_int_equal(stat(dir, &sb), 0);
    assert_int_equal(sb.st_mode & 077, 0); /* the owner's only */
    char f[1200];
    assert_int_equal(block_file(dir, 0, f, sizeof f), 0);
    assert_int_equal(stat(f, &sb), 0);
    assert_int_equal(sb.st_mode & 077, 0);
    /* a new process (a new model): every block from disk, the same answers */
    m = load_cached(dir, 64 << 20, 0);
    mem = disk = 0;
    check_all(m, "after a restart", &disk, &mem);
    assert_int_equal(disk, 4 * (399 / BLK) * BLK);
    assert_int_equal(warnings_since(&mark), 0);
    sdnpu_model_free(m);
    /* disk only (no memory budget): the blocks still come from disk */
    m = load_cached(dir, 0, 0);
    answer a = ask(m, 0, 400, "sdnpu", 0, 1);
    same_answer(&g_ref[0][0], &a, "disk only");
    assert_int_equal(a.st.prefix_disk_tokens, 399 / BLK * BLK);
    /* opted out: nothing from the cache */
    a = ask(m, 0, 400, "sdnpu", 0, 0);
    same_answer(&g_ref[0][0], &a, "opted out");
    assert_int_equal(a.st.prefix_disk_tokens + a.st.prefix_memory_tokens, 0);
    sdnpu_model_free(m);
}

static void flip_byte(const char *path, long off) {
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    if (off < 0) {
        fseek(f, 0, SEEK_END);
        off = ftell(f) + off;
    }
    fseek(f, off, SEEK_SET);
    int c = fgetc(f);
    fseek(f, off, SEEK_SET);
    fputc(c ^ 0x5a, f);
    fclose(f);
}

static void test_disk_damaged(void **state) {
    (void)state;
    references();
    const char *dir = fresh_dir("pc-damaged");
    sdnpu_model *m = load_cached(dir, 64 << 20, 0);
    check_all(m, "filling", NULL, NULL);
    sdnpu_model_free(m);
    /* a flipped byte in the image, one in the header, a truncated file, and a foreign one (another
     * block's file under this one's name) */
    char f[4][1200];
    for (int i = 0; i < 4; i++) assert_int_equal(block_file(dir, i * 3, f[i], sizeof f[i]), 0);
    flip_byte(f[0], -100);
    flip_byte(f[1], 20);
    assert_int_equal(truncate(f[2], 5000), 0);
    char cmd[2600], other[1200];
    assert_int_equal(block_file(dir, 1, other, sizeof other), 0);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", other, f[3]);
    assert_int_equal(system(cmd), 0);
    int mark = g_log.warnings;
    m = load_cached(dir, 64 << 20, 0);
    check_all(m, "damaged files", NULL, NULL);
    assert_int_equal(warnings_since(&mark), 4); /* one each */
    sdnpu_prefix_cache_stats st;
    sdnpu_prefix_cache_stats_init(&st);
    sdnpu_prefix_cache_get_stats(m, &st, NULL);
    assert_int_equal(st.disk_damaged, 4);
    assert_int_equal(st.disk_enabled, 1);
    sdnpu_model_free(m);
    /* they were computed again and written: the next process finds them whole, no warning */
    m = load_cached(dir, 64 << 20, 0);
    int disk = 0;
    check_all(m, "repaired", &disk, NULL);
    assert_int_equal(disk, 4 * (399 / BLK) * BLK);
    assert_int_equal(warnings_since(&mark), 0);
    sdnpu_model_free(m);
    /* a damaged index: one warning, made anew, the answers the same */
    char idx[1200];
    snprintf(idx, sizeof idx, "%s/index.sqlite", dir);
    assert_int_equal(tu_write_file(idx, "this is not a database, it is a file of text long enough to be read", 68), 0);
    m = load_cached(dir, 64 << 20, 0);
    check_all(m, "damaged index", NULL, NULL);
    assert_int_equal(warnings_since(&mark), 1);
    assert_non_null(strstr(g_log.last, "made anew"));
    sdnpu_model_free(m);
    m = load_cached(dir, 64 << 20, 0);
    check_all(m, "after the new index", NULL, NULL);
    assert_int_equal(warnings_since(&mark), 0);
    sdnpu_model_free(m);
}

/* The disk tier in a child process whose writes fail: `how` 0 a full disk (RLIMIT_FSIZE below
 * one block file: writes fail with EFBIG), 1 a directory not writable from the start, 2 one
 * made read-only after the cache opened it. The child checks the answers and the one warning
 * and exits 0. As root, the child drops to user nobody so that permissions hold. */
static void child_unwritable(const char *dir, int how) {
    if (how) {
        if (getuid() == 0 && (setgid(65534) || setuid(65534))) _exit(10);
        if (how == 1 && chmod(dir, 0500)) _exit(11);
    } else {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {40000, 40000};
        if (setrlimit(RLIMIT_FSIZE, &rl)) _exit(12);
    }
    int mark = g_log.warnings;
    sdnpu_model *m = load_cached(dir, 64 << 20, 0);
    char blocks[700];
    snprintf(blocks, sizeof blocks, "%s/blocks", dir);
    if (how == 2 && (chmod(blocks, 0500) || chmod(dir, 0500))) _exit(13);
    sdnpu_prefix_cache_stats st;
    sdnpu_prefix_cache_stats_init(&st);
    check_all(m, "unwritable directory", NULL, NULL);
    sdnpu_prefix_cache_get_stats(m, &st, NULL);
    int w = warnings_since(&mark);
    fprintf(stderr, "child %d: %d warning(s), disk %s, last: %s\n", how, w, st.disk_enabled ? "on" : "off", g_log.last);
    if (w != 1 || st.disk_enabled || !strstr(g_log.last, "memory only")) _exit(14);
    if (st.hits_memory == 0) _exit(15); /* the memory tier went on */
    sdnpu_model_free(m);
    _exit(0);
}

static void test_disk_unwritable(void **state) {
    (void)state;
    references();
    for (int how = 0; how < 3; how++) {
        /* a directory nobody can reach: /tmp/sdnpu-pc-XXXXXX (0755) with the model copied in */
        char base[] = "/tmp/sdnpu-pc-XXXXXX";
        assert_non_null(mkdtemp(base));
        chmod(base, 0755);
        char dir[600];
        snprintf(dir, sizeof dir, "%s/cache", base);
        assert_int_equal(mkdir(dir, 0700), 0);
        if (getuid() == 0 && chown(dir, 65534, 65534)) fail_msg("chown %s", dir);
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) child_unwritable(dir, how);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
        if (system(cmd)) print_message("could not remove %s\n", base);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail_msg("case %d: the child ended with status %d", how, status);
    }
}

/* Writers killed with SIGKILL at random moments: no file is ever damaged (each is renamed into
 * place whole), and what they left is swept once old enough. */
static void test_disk_kill9(void **state) {
    (void)state;
    references();
    const char *dir = fresh_dir("pc-kill9");
    sdn_rng r;
    sdn_rng_seed(&r, (uint64_t)time(NULL));
    for (int k = 0; k < 12; k++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            sdnpu_model *m = load_cached(dir, 1 << 20, 0); /* a small memory budget: many disk reads too */
            for (int round = 0;; round++) {
                int d = (round + k) % 4;
                answer a = ask(m, d, 400 - round % 3, "none", 0, 1);
                (void)a;
            }
        }
        usleep((useconds_t)(20000 + sdn_rng_below(&r, 250000)));
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
    }
    int mark = g_log.warnings;
    sdnpu_model *m = load_cached(dir, 64 << 20, 0);
    check_all(m, "after SIGKILLs", NULL, NULL);
    sdnpu_prefix_cache_stats st;
    sdnpu_prefix_cache_stats_init(&st);
    sdnpu_prefix_cache_get_stats(m, &st, NULL);
    assert_int_equal(st.disk_damaged, 0);
    assert_int_equal(warnings_since(&mark), 0);
    sdnpu_model_free(m);
    /* leftovers (temporary files of killed writers) made old: the next open removes them */
    char p[1100];
    snprintf(p, sizeof p, "%s/blocks", dir);
    DIR *dh = opendir(p);
    struct dirent *de;
    int tmp = 0;
    while ((de = readdir(dh))) {
        char fp[1400];
        snprintf(fp, sizeof fp, "%s/%s", p, de->d_name);
        if (!strncmp(de->d_name, ".tmp-", 5)) tmp++;
        if (de->d_name[0] != '.' || !strncmp(de->d_name, ".tmp-", 5)) {
            struct utimbuf ut = {time(NULL) - 3600, time(NULL) - 3600};
            utime(fp, &ut);
        }
    }
    closedir(dh);
    /* a file the index does not know, old: swept as well */
    char stray[1200];
    snprintf(stray, sizeof stray, "%s/0123456789abcdef0123456789abcdef.kv", p);
    assert_int_equal(tu_write_file(stray, "x", 1), 0);
    struct utimbuf ut = {time(NULL) - 3600, time(NULL) - 3600};
    utime(stray, &ut);
    print_message("%d temporary files left by 12 killed writers\n", tmp);
    m = load_cached(dir, 64 << 20, 0);
    assert_int_equal(count_files(dir, 1), 0);
    assert_int_equal(access(stray, F_OK), -1);
    check_all(m, "after the sweep", NULL, NULL);
    assert_int_equal(warnings_since(&mark), 0);
    sdnpu_model_free(m);
}

/* Two processes on one directory at once, and the disk budget. */
static void test_disk_shared_and_budget(void **state) {
    (void)state;
    references();
    const char *dir = fresh_dir("pc-shared");
    pid_t pids[2];
    fflush(NULL);
    for (int i = 0; i < 2; i++)
        if ((pids[i] = fork()) == 0) {
            sdnpu_model *m = load_cached(dir, 1 << 20, 0);
            for (int round = 0; round < 3; round++) check_all(m, "two processes", NULL, NULL);
            sdnpu_model_free(m);
            _exit(0);
        }
    for (int i = 0; i < 2; i++) {
        int status;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        if (!WIFEXITED(status) || WEXITSTATUS(status)) fail_msg("process %d ended with status %d", i, status);
    }
    /* budgets: memory for 3 blocks, disk for 5 files: never more (one block of slack each) */
    sdnpu_model *probe = load_cached(dir, 64 << 20, 0);
    answer a = ask(probe, 0, 400, "none", 0, 1);
    assert_true(a.st.prefix_disk_tokens > 0);
    sdnpu_prefix_cache_stats st;
    sdnpu_prefix_cache_stats_init(&st);
    sdnpu_prefix_cache_get_stats(probe, &st, NULL);
    const uint64_t block = st.memory_bytes / (uint64_t)(399 / BLK);
    sdnpu_model_free(probe);
    const char *dir2 = fresh_dir("pc-budget");
    sdnpu_model *m = load_cached(dir2, 3 * block, 5 * (block + 4096));
    for (int round = 0; round < 2; round++) {
        check_all(m, "under budgets", NULL, NULL);
        sdnpu_prefix_cache_get_stats(m, &st, NULL);
        assert_true(st.memory_bytes <= 3 * block);
        assert_true(st.disk_bytes <= 5 * (block + 4096));
        assert_true(count_files(dir2, 0) <= 5);
    }
    assert_true(st.evictions > 0 && st.disk_evictions > 0);
    sdnpu_model_free(m);
}

/* With a history store and a task group: the second answer drafts from the first, with and
 * without the prefix cache, and the answers are the same bytes. */
static void test_with_history(void **state) {
    (void)state;
    references();
    sdnpu_model *plain = load_cached(NULL, 0, 0), *cached = load_cached(NULL, 64 << 20, 0);
    sdnpu_model *models[2] = {plain, cached};
    answer got[2][3];
    for (int k = 0; k < 2; k++) {
        sdnpu_context_params cp;
        sdnpu_context_params_init(&cp);
        cp.n_threads = 1;
        cp.n_ctx = 512;
        char db[64];
        snprintf(db, sizeof db, "hist-%d.sqlite", k);
        cp.history_path = tu_tmp(db);
        sdnpu_context *c[2];
        sdnpu_error e = {0};
        for (int i = 0; i < 2; i++)
            if (sdnpu_context_new(models[k], &cp, &c[i], &e)) fail_msg("%s", e.message);
        for (int q = 0; q < 3; q++) { /* doc 1, doc 0 on one context, doc 1 on the other: the cache serves the third */
            sdnpu_request r;
            sdnpu_request_init(&r);
            r.prompt_ids = g_docs[q == 1 ? 0 : 1];
            r.n_prompt_ids = 400;
            r.max_tokens = 20;
            r.ignore_eos = 1;
            r.task_group = "group";
            r.temperature = q == 2 ? 0.7f : 0;
            r.seed = 11;
            sdnpu_result res;
            sdnpu_result_init(&res);
            if (sdnpu_generate(c[q == 2], &r, &res, &e)) fail_msg("%s", e.message);
            got[k][q].n = res.n_tokens < 64 ? res.n_tokens : 64;
            memcpy(got[k][q].tok, res.tokens, sizeof(int32_t) * (size_t)got[k][q].n);
            snprintf(got[k][q].text, sizeof got[k][q].text, "%s", res.text);
            got[k][q].st = res.stats;
            sdnpu_result_free(&res);
        }
        for (int i = 0; i < 2; i++) sdnpu_context_free(c[i]);
    }
    for (int q = 0; q < 3; q++) same_answer(&got[0][q], &got[1][q], "with history");
    assert_true(got[1][2].st.history_answers >= 2 && got[1][2].st.prefix_memory_tokens == 399 / BLK * BLK);
    sdnpu_model_free(plain);
    sdnpu_model_free(cached);
}

/* Two contexts, two threads, one document at the same moment: its blocks are computed once. */
typedef struct asker {
    sdnpu_model *m;
    answer a;
} asker;

static void *ask_thread(void *arg) {
    asker *k = arg;
    k->a = ask(k->m, 2, 400, "sdnpu", 0, 1);
    return NULL;
}

static void test_concurrent_contexts(void **state) {
    (void)state;
    references();
    sdnpu_model *m = load_cached(NULL, 64 << 20, 0);
    asker k[2] = {{.m = m}, {.m = m}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, ask_thread, &k[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) same_answer(&g_ref[2][0], &k[i].a, "two contexts at once");
    sdnpu_prefix_cache_stats st;
    sdnpu_prefix_cache_stats_init(&st);
    sdnpu_prefix_cache_get_stats(m, &st, NULL);
    assert_int_equal(st.misses, 399 / BLK); /* each block computed once */
    assert_int_equal(st.hits_memory, 399 / BLK);
    assert_int_equal(k[0].a.st.prefix_memory_tokens + k[1].a.st.prefix_memory_tokens, 399 / BLK * BLK);
    sdnpu_model_free(m);
}

int main(void) {
    if (getenv("SDN_TEST_FILTER")) cmocka_set_test_filter(getenv("SDN_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_store_lru),
        cmocka_unit_test(test_store_claim_wait),
        cmocka_unit_test(test_exact_llama),
        cmocka_unit_test(test_exact_other_archs),
        cmocka_unit_test(test_disk_restart),
        cmocka_unit_test(test_disk_damaged),
        cmocka_unit_test(test_disk_unwritable),
        cmocka_unit_test(test_disk_kill9),
        cmocka_unit_test(test_disk_shared_and_budget),
        cmocka_unit_test(test_with_history),
        cmocka_unit_test(test_concurrent_contexts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
