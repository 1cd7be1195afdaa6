/* api.c - the API of include/sdnpu.h and include/sdnpu_experimental.h: models, contexts
 * (graph contexts included) and the request path.
 *
 * One request (sdnpu_generate) is these steps, each a function below, in order:
 *   request_tokens()   render with the chat template and tokenize   (tokenizer/request.c)
 *   history_lookup()   earlier answers of the task group -> automaton (runtime/history.c)
 *   make_drafter()     the drafting method with its parameters and the model's
 *                      candidate table                                  (draft/methods.c, draft/recycle.c)
 *   make_grammar()     the request's grammar or JSON schema compiled  (grammar/)
 *   gen_params()       budget from the verify cost curve, graph hooks (runtime/verify_cost.c,
 *                      runtime/graph_setup.c)
 *   sdn_generate()     prefill + draft/verify/compact/commit/feedback  (runtime/decode.c)
 *   on_tokens()        streaming detokenization to the app's callback
 *   history_store()    the answer stored back into the task group
 *   candidates_store() the model's candidate table into the history store */
#include "sdnpu.h"
#include "sdnpu_experimental.h"

#include <limits.h>
#include <stddef.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sdn_err.h"
#include "common/sdn_log.h"
#include "common/sdn_mem.h"
#include "kernels/kernel_path.h"
#include "common/sdn_util.h"
#include "runtime/history.h"
#include "draft/methods.h"
#include "draft/recycle.h"
#include "draft/sizing.h"
#include "tokenizer/chat_template.h"
#include "engine/forward.h"
#include "modelfile/model.h"
#include "modelfile/model_registry.h"
#include "tokenizer/request.h"
#include "tokenizer/tokenizer.h"
#include "grammar/grammar.h"
#include "runtime/decode.h"
#include "runtime/graph_setup.h"
#include "runtime/prefix_cache.h"
#include "runtime/verify_cost.h"

_Static_assert(SDNPU_DEFAULT_N_CTX == SDN_DEFAULT_N_CTX, "the public and the engine's default context size");

_Static_assert(sizeof(sdnpu_error) == sizeof(sdn_err), "sdnpu_error mirrors sdn_err");
_Static_assert((int)SDNPU_EINVAL == (int)SDN_EINVAL && (int)SDNPU_ESTATE == (int)SDN_ESTATE && (int)SDNPU_EDB == (int)SDN_EDB, "status codes mirror sdn_err.h");
_Static_assert(SDNPU_ACCEPT_HIST == SDN_ACCEPT_HIST, "histogram sizes agree");

#define E(err) ((sdn_err *)(err))

/* ---- struct sizes (sdnpu.h, "ABI") ----
 * END_OF(T, f): the bytes of T up to and including field f. FIRST_*: the layout of the first
 * release of this SONAME (0.9.0): never change these within it. KNOWN_*: this library's last field:
 * move it when a field is appended. */
#define END_OF(T, f) (offsetof(T, f) + sizeof(((T *)0)->f))
#define FIRST_MODEL_PARAMS END_OF(sdnpu_model_params, prefix_cache_disk_bytes)
#define FIRST_CONTEXT_PARAMS END_OF(sdnpu_context_params, cache_type_v)
#define FIRST_GRAPH_PARAMS END_OF(sdnpu_graph_params, graph_pin)
#define FIRST_REQUEST END_OF(sdnpu_request, reserved0)
#define FIRST_MODEL_INFO END_OF(sdnpu_model_info, tool_format)
#define FIRST_RESULT END_OF(sdnpu_result, stats.prefix_saved_s)
#define FIRST_PREFIX_STATS END_OF(sdnpu_prefix_cache_stats, disk_budget)
#define KNOWN_MODEL_PARAMS END_OF(sdnpu_model_params, prefix_cache_disk_bytes)
#define KNOWN_CONTEXT_PARAMS END_OF(sdnpu_context_params, cache_type_v)
#define KNOWN_GRAPH_PARAMS END_OF(sdnpu_graph_params, graph_pin)
#define KNOWN_REQUEST END_OF(sdnpu_request, reserved0)
#define KNOWN_MODEL_INFO END_OF(sdnpu_model_info, tool_format)
#define KNOWN_RESULT END_OF(sdnpu_result, stats.prefix_saved_s)
/* No tail padding after the known fields: the bytes a newer header adds start at sizeof. */
_Static_assert(KNOWN_MODEL_PARAMS == sizeof(sdnpu_model_params) && KNOWN_CONTEXT_PARAMS == sizeof(sdnpu_context_params) &&
                   KNOWN_GRAPH_PARAMS == sizeof(sdnpu_graph_params) && KNOWN_REQUEST == sizeof(sdnpu_request) &&
                   KNOWN_MODEL_INFO == sizeof(sdnpu_model_info) && KNOWN_RESULT == sizeof(sdnpu_result),
               "a struct_size struct ends with padding: reorder its fields (padding is not reliably zero in the app's copy)");

static int bad_size(const char *name, size_t size, size_t first, sdn_err *err) {
    return sdn_fail(err, SDN_EINVAL, "%s.struct_size = %zu is smaller than the first released layout (%zu bytes): set it with %s_init()",
                    name, size, first, name);
}

/* Read the app's struct src (its struct_size bytes) into dst, which holds the defaults: the
 * fields the app's layout lacks keep them. Bytes past the fields this library knows must be 0. */
static int take_struct(void *dst, const void *src, size_t first, size_t known, const char *name, sdn_err *err) {
    size_t size = *(const size_t *)src;
    if (size < first) return bad_size(name, size, first, err);
    for (size_t i = known; i < size; i++)
        if (((const unsigned char *)src)[i])
            return sdn_fail(err, SDN_EUNSUP, "%s: byte %zu of its %zu is set, but library %s knows only the first %zu (built against a newer sdnpu.h?)",
                            name, i, size, SDNPU_VERSION, known);
    memcpy((char *)dst + sizeof(size_t), (const char *)src + sizeof(size_t), (size < known ? size : known) - sizeof(size_t));
    return SDN_OK;
}

/* Write src (this library's struct) into the app's dst of size bytes: the fields both know,
 * zeros after them; struct_size = size. */
static void put_struct(void *dst, size_t size, const void *src, size_t known) {
    memset(dst, 0, size);
    memcpy(dst, src, size < known ? size : known);
    *(size_t *)dst = size;
}

/* The *_init functions: refuse a size below the first layout (logged, naming the struct). */
static int init_size_ok(const void *p, size_t size, size_t first, const char *name) {
    if (p && size >= first) return 1;
    if (!p) sdn_log(SDN_LOG_ERROR, "%s_init: the struct pointer is NULL", name);
    else sdn_log(SDN_LOG_ERROR, "%s_init: size %zu is smaller than the first released layout (%zu bytes)", name, size, first);
    return 0;
}
#define HISTORY_TOKENS 4096 /* earlier answers drafted from, most recent first (bench default) */

struct sdnpu_model {
    sdn_model *m;
    sdnpu_model_info info;
    pthread_mutex_t mu;  /* guards gvocab's creation (contexts on several threads share a model) */
    sdn_gvocab *gvocab;  /* the vocabulary as bytes, built at the first constrained request */
    sdn_recycle *recycle; /* the model-derived candidates (draft/recycle.h), made at the first request
                             that drafts from them; shared by all contexts (it has its own lock) */
    int recycle_fresh;    /* nothing learned or loaded into it yet (guarded by mu) */
    sdn_pcache *pcache;   /* the prefix cache shared by its contexts (runtime/prefix_cache.h), or NULL */
};

struct sdnpu_context {
    sdnpu_model *model;
    sdnpu_context_params p;
    sdnpu_graph_params g; /* its graph settings (sdnpu_context_new_graphs; the strings are the copies below) */
    char *history_path, *graphs, *profile_db; /* owned copies of p's and g's strings (graphs NULL: no graphs) */
    sdn_ctx *ctx;       /* created at the first request when graphs are on (their shape needs it) */
    sdn_kv_type type_k, type_v; /* p's cache types, parsed (SDN_KV_AUTO: the process default) */
    sdn_history *hist;
    sdn_gs *gs;
    sdn_gen_params graph_gp; /* prefill hook, decode rows, draft size of the graph runtime */
    int requests;
    sdn_preds last_preds; /* the previous request's prefill predictions (reused with its KV entries) */
    int have_curve;
    sdn_vcurve curve; /* the verify cost curve by KV length (runtime/verify_cost.h) */
    sdn_draft_memo memo; /* what forced-text drafting learned on the earlier requests */
    int candidates_loaded; /* the history store's candidate table was offered to the model */
    sdn_cost_fix cost_fix; /* the verify cost as this context's greedy steps measured it (draft/sizing.h) */
    sdn_draft_calib calib; /* the drafter's scores as this context's greedy requests calibrated them */
    int busy;         /* a request is running (atomic): a second one is SDNPU_ESTATE */
};

/* ---- library ---- */

const char *sdnpu_version(void) { return SDNPU_VERSION; }
const char *sdnpu_status_string(int code) { return sdn_strcode(code); }
void sdnpu_free(void *p) { free(p); }

/* ---- logging ---- */

_Static_assert((int)SDNPU_LOG_ERROR == (int)SDN_LOG_ERROR && (int)SDNPU_LOG_DEBUG == (int)SDN_LOG_DEBUG, "log levels mirror common/sdn_log.h");

/* The app's sink, called through common/sdn_log.c's (its function pointer travels as extra). */
static void log_to_app(void *user, void *extra, int level, const char *msg) {
    sdnpu_log_fn fn = (sdnpu_log_fn)extra;
    fn(user, (sdnpu_log_level)level, msg);
}

void sdnpu_set_log(sdnpu_log_fn fn, void *user) {
    if (fn) sdn_log_set(log_to_app, user, (void *)fn);
    else sdn_log_set(NULL, NULL, NULL);
}

void sdnpu_set_log_level(sdnpu_log_level level) { sdn_log_set_level((int)level); }

/* ---- process-wide settings ---- */

sdnpu_status sdnpu_set_cache_dir(const char *dir, sdnpu_error *err) {
    sdn_err_clear(E(err)); /* a reused error struct starts empty */
    return sdn_cache_dir_set(dir, E(err));
}

sdnpu_status sdnpu_set_kernel_path(const char *name, sdnpu_error *err) {
    sdn_err_clear(E(err));
    return sdn_kpath_set_name(name, E(err));
}

sdnpu_status sdnpu_set_prefill_matmul(const char *name, sdnpu_error *err) {
    sdn_err_clear(E(err));
    sdn_prefill_mm m = SDN_PREFILL_MM_AUTO;
    if (name && sdn_prefill_mm_parse(name, &m, E(err))) return SDNPU_EINVAL;
    sdn_prefill_mm_set(m);
    return SDNPU_OK;
}

void sdnpu_set_mem_limit(uint64_t bytes) { sdn_mem_set_limit(bytes, "sdnpu_set_mem_limit"); }

/* ---- models ---- */

static void model_params_defaults(sdnpu_model_params *p) { memset(p, 0, sizeof *p); }

sdnpu_status sdnpu_model_params_init_sized(sdnpu_model_params *p, size_t size) {
    if (!init_size_ok(p, size, FIRST_MODEL_PARAMS, "sdnpu_model_params")) return SDNPU_EINVAL;
    sdnpu_model_params d;
    model_params_defaults(&d);
    put_struct(p, size, &d, KNOWN_MODEL_PARAMS);
    return SDNPU_OK;
}

sdnpu_status sdnpu_model_load(const char *path_or_name, const sdnpu_model_params *pp, sdnpu_model **out, sdnpu_error *err) {
    sdn_err_clear(E(err)); /* a reused error struct starts empty */
    if (out) *out = NULL;
    sdnpu_model_params def, *p = &def;
    model_params_defaults(&def);
    int rc0;
    if (pp && (rc0 = take_struct(&def, pp, FIRST_MODEL_PARAMS, KNOWN_MODEL_PARAMS, "sdnpu_model_params", E(err)))) return rc0;
    if (!out) return sdn_fail(E(err), SDN_EINVAL, "sdnpu_model_load: out is NULL");
    if (!path_or_name || !*path_or_name) return sdn_fail(E(err), SDN_EINVAL, "sdnpu_model_load: no model path or name");
    const sdn_known_model *km = sdn_known_model_find(path_or_name);
    sdn_err why = {0};
    if (km && sdn_known_model_check(km, &why) != SDN_OK) /* a known name not (validly) cached: the library does not download */
        return sdn_fail(E(err), why.code == SDN_EFORMAT ? SDN_EFORMAT : SDN_EIO, "model '%s' is not usable from the cache (%s): download it first with `sdnpu pull %s`",
                        path_or_name, why.msg[0] ? why.msg : "missing", km->name);
    sdnpu_model *pm = calloc(1, sizeof *pm);
    if (!pm) return sdn_fail(E(err), SDN_ENOMEM, "out of memory");
    pthread_mutex_init(&pm->mu, NULL);
    sdn_model_load_opts lo = {.tokenizer_path = p->tokenizer_path};
    int rc = sdn_model_load(path_or_name, &lo, &pm->m, E(err));
    if (!rc && (p->prefix_cache_bytes || p->prefix_cache_dir)) {
        if (p->prefix_cache_dir && !*p->prefix_cache_dir) rc = sdn_fail(E(err), SDN_EINVAL, "model parameter prefix_cache_dir is empty");
        else {
            sdn_pcache_opts po = {.mem_bytes = p->prefix_cache_bytes, .dir = p->prefix_cache_dir, .disk_bytes = p->prefix_cache_disk_bytes};
            rc = sdn_pcache_new(&po, &pm->pcache, E(err));
        }
        if (rc) sdn_model_free(pm->m);
    }
    if (rc) { pthread_mutex_destroy(&pm->mu); free(pm); return rc; }
    const sdn_model_config *cfg = sdn_model_cfg(pm->m);
    sdnpu_model_info *in = &pm->info;
    in->path = sdn_model_path(pm->m);
    in->architecture = sdn_arch_name(cfg->arch);
    const sdn_tokenizer *tok = sdn_model_tokenizer(pm->m);
    const char *tmpl = tok ? sdn_tokenizer_chat_template(tok) : NULL;
    in->chat_template = tmpl ? sdn_chat_kind_name(sdn_chat_detect(tmpl)) : "none";
    in->tool_format = tmpl && strstr(tmpl, "<tool_call>") ? "hermes" : "json";
    snprintf(in->fingerprint, sizeof in->fingerprint, "%016llx", (unsigned long long)sdn_model_fingerprint(pm->m));
    in->n_layers = cfg->n_layers;
    in->dim = cfg->dim;
    in->n_heads = cfg->n_heads;
    in->n_kv_heads = cfg->n_kv_heads;
    in->vocab = cfg->vocab;
    in->context_length = cfg->ctx_len;
    in->weight_bytes = sdn_model_weight_bytes(pm->m);
    in->max_token_bytes = tok ? sdn_tokenizer_max_text_bytes(tok) : 0;
    *out = pm;
    return SDNPU_OK;
}

void sdnpu_model_free(sdnpu_model *m) {
    if (!m) return;
    sdn_gvocab_free(m->gvocab);
    sdn_recycle_free(m->recycle);
    sdn_pcache_free(m->pcache);
    pthread_mutex_destroy(&m->mu);
    sdn_model_free(m->m);
    free(m);
}

sdnpu_status sdnpu_prefix_cache_stats_init_sized(sdnpu_prefix_cache_stats *s, size_t size) {
    if (!init_size_ok(s, size, FIRST_PREFIX_STATS, "sdnpu_prefix_cache_stats")) return SDNPU_EINVAL;
    memset(s, 0, size);
    s->struct_size = size;
    return SDNPU_OK;
}

sdnpu_status sdnpu_prefix_cache_get_stats(const sdnpu_model *m, sdnpu_prefix_cache_stats *out, sdnpu_error *err) {
    sdn_err_clear(E(err));
    if (!m || !out) return sdn_fail(E(err), SDN_EINVAL, "sdnpu_prefix_cache_get_stats: model or out is NULL");
    if (out->struct_size < FIRST_PREFIX_STATS) return bad_size("sdnpu_prefix_cache_stats", out->struct_size, FIRST_PREFIX_STATS, E(err));
    sdnpu_prefix_cache_stats o;
    memset(&o, 0, sizeof o);
    if (m->pcache) {
        sdn_pcache_stats s;
        sdn_pcache_get_stats(m->pcache, &s);
        o.enabled = 1;
        o.disk_enabled = s.disk_on;
        o.hits_memory = s.hits_mem;
        o.hits_disk = s.hits_disk;
        o.misses = s.misses;
        o.evictions = s.evictions;
        o.disk_evictions = s.disk_evictions;
        o.disk_writes = s.disk_writes;
        o.disk_damaged = s.disk_damaged;
        o.memory_blocks = s.mem_blocks;
        o.memory_bytes = s.mem_bytes;
        o.memory_budget = s.mem_budget;
        o.disk_bytes = s.disk_bytes;
        o.disk_budget = s.disk_budget;
    }
    put_struct(out, out->struct_size, &o, sizeof o);
    return SDNPU_OK;
}

int sdnpu_model_has_tokenizer(const sdnpu_model *m) { return m && sdn_model_tokenizer(m->m) != NULL; }

sdnpu_status sdnpu_model_info_init_sized(sdnpu_model_info *out, size_t size) {
    if (!init_size_ok(out, size, FIRST_MODEL_INFO, "sdnpu_model_info")) return SDNPU_EINVAL;
    memset(out, 0, size);
    out->struct_size = size;
    return SDNPU_OK;
}

sdnpu_status sdnpu_model_get_info(const sdnpu_model *m, sdnpu_model_info *out, sdnpu_error *err) {
    sdn_err_clear(E(err)); /* a reused error struct starts empty */
    if (!m || !out) return sdn_fail(E(err), SDN_EINVAL, "sdnpu_model_get_info: model or out is NULL");
    if (out->struct_size < FIRST_MODEL_INFO) return bad_size("sdnpu_model_info", out->struct_size, FIRST_MODEL_INFO, E(err));
    put_struct(out, out->struct_size, &m->info, KNOWN_MODEL_INFO);
    return SDNPU_OK;
}

char *sdnpu_model_describe(const sdnpu_model *m, int n_ctx) {
    if (!m) return NULL;
    if (n_ctx <= 0) n_ctx = m->info.context_length < SDNPU_DEFAULT_N_CTX ? m->info.context_length : SDNPU_DEFAULT_N_CTX;
    return sdn_model_describe(m->m, n_ctx);
}

static char g_known_list[512];

static void known_list_make(void) {
    for (int i = 0; i < sdn_known_model_count(); i++) {
        size_t l = strlen(g_known_list);
        snprintf(g_known_list + l, sizeof g_known_list - l, "%s%s", i ? ", " : "", sdn_known_model_at(i)->name);
    }
}

const char *sdnpu_known_models(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT; /* callable from any thread */
    pthread_once(&once, known_list_make);
    return g_known_list;
}

sdnpu_status sdnpu_tokenize(const sdnpu_model *m, const char *text, size_t len, int add_bos, int parse_special, int32_t **ids, int *n_ids,
                            sdnpu_error *err) {
    sdn_err_clear(E(err)); /* a reused error struct starts empty */
    if (ids) *ids = NULL;
    if (n_ids) *n_ids = 0;
    if (!m || !ids || !n_ids) return sdn_fail(E(err), SDN_EINVAL, "sdnpu_tokenize: model, ids or n_ids is NULL");
    if (!text && len) return sdn_fail(E(err), SDN_EINVAL, "sdnpu_tokenize: text is NULL");
    if (!text) text = "";
    const sdn_tokenizer *tok = sdn_model_tokenizer(m->m);
    if (!tok) return sdn_fail(E(err), SDN_EINVAL, "%s: the model has no tokenizer", m->info.path);
    return sdn_tokenize(tok, text, len, add_bos ? sdn_tokenizer_add_bos(tok) : 0, parse_special, ids, n_ids, E(err));
}

sdnpu_status sdnpu_detokenize(const sdnpu_model *m, const int32_t *ids, int n_ids, char **text, sdnpu_error *err) {
    sdn_err_clear(E(err)); /* a reused error struct starts empty */
    if (text) *text = NULL;
    if (!m || !text) return sdn_fail(E(err), SDN_EINVAL, "sdnpu_detokenize: model or text is NULL");
    if (n_ids < 0 || (n_ids > 0 && !ids)) return sdn_fail(E(err), SDN_EINVAL, "sdnpu_detokenize: %d ids at %p", n_ids, (const void *)ids);
    const sdn_tokenizer *tok = sdn_model_tokenizer(m->m);
    if (!tok) return sdn_fail(E(err), SDN_EINVAL, "%s: the model has no tokenizer", m->info.path);
    for (int i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= m->info.vocab) return sdn_fail(E(err), SDN_EINVAL, "token id %d is not in [0, %d)", ids[i], m->info.vocab);
    return sdn_detokenize(tok, ids, n_ids, text, E(err));
}

/* ---- drafting methods ---- */

const char *sdnpu_methods(void) { return sdn_method_list(); }

sdnpu_status sdnpu_check_method(const char *method, sdnpu_error *err) {
    sdn_err_clear(E(err)); /* a reused error struct starts empty */
    sdn_method_config mc;
    sdn_method_defaults(&mc);
    sdn_drafter d = {0};
    int rc = sdn_method_create(method ? method : "(null)", &mc, &d, E(err));
    sdn_drafter_destroy(&d);
    return rc;
}

sdnpu_status sdnpu_check_param(const char *key_value, sdnpu_error *err) {
    sdn_err_clear(E(err)); /* a reused error struct starts empty */
    sdn_method_config mc;
    sdn_method_defaults(&mc);
    return sdn_method_set_param(&mc, key_value ? key_value : "", E(err));
}

sdnpu_status sdnpu_check_graphs(const char *graphs, sdnpu_error *err) {
    sdn_err_clear(E(err)); /* a reused error struct starts empty */
    sdn_gs_mode mode;
    if (!graphs) return sdn_fail(E(err), SDN_EINVAL, "graph mode is NULL");
    return sdn_gs_mode_parse(graphs, &mode, E(err));
}

/* ---- contexts ---- */

/* The default rule of n_threads (0): min(the CPUs this process may run on, SDNPU_DEFAULT_MAX_THREADS). */
static int default_threads(void) {
    int n = 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
    if (n <= 0) n = sdn_cpus_online();
    return n < 1 ? 1 : n > SDNPU_DEFAULT_MAX_THREADS ? SDNPU_DEFAULT_MAX_THREADS : n;
}

static void context_params_defaults(sdnpu_context_params *p) {
    memset(p, 0, sizeof *p);
    p->n_threads = default_threads();
}

sdnpu_status sdnpu_context_params_init_sized(sdnpu_context_params *p, size_t size) {
    if (!init_size_ok(p, size, FIRST_CONTEXT_PARAMS, "sdnpu_context_params")) return SDNPU_EINVAL;
    sdnpu_context_params d;
    context_params_defaults(&d);
    put_struct(p, size, &d, KNOWN_CONTEXT_PARAMS);
    return SDNPU_OK;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* The inference context proper (KV cache, worker threads): at once, or for a graph context
 * at its first request, when the graph runtime has said what batch it needs. */
static int make_ctx(sdnpu_context *c, const sdn_gen_params *gp_probe, sdn_err *err) {
    sdn_ctx_params cp = {.n_ctx = c->p.n_ctx, .n_threads = c->p.n_threads, .type_k = c->type_k, .type_v = c->type_v};
    if (c->graphs) {
        sdn_gs_options go = {.graphs = c->graphs, .n_blocks = c->g.graph_blocks, .s1 = c->g.g1, .s2 = c->g.g2,
                             .profile_db = c->profile_db, .draft_max = gp_probe->caps.max_nodes,
                             .pin = c->g.graph_pin};
        char db[1200];
        const char *cache = sdn_cache_dir();
        if (!go.profile_db && !cache)
            return sdn_fail(err, SDN_EINVAL, "graph parameter graphs: a graph context needs profile_db or a cache directory (sdnpu_set_cache_dir)");
        if (!go.profile_db) snprintf(db, sizeof db, "%s/profiles.sqlite", cache), go.profile_db = db;
        c->graph_gp = *gp_probe;
        sdn_log_stream notes;
        FILE *log = sdn_log_stream_open(&notes, SDN_LOG_INFO);
        int rc = sdn_gs_setup(c->model->m, c->p.n_threads, &go, log, &cp, &c->graph_gp, &c->gs, NULL, err);
        sdn_log_stream_close(&notes);
        c->graph_gp.drafter = NULL; /* only the hook, decode rows and draft size are kept */
        if (rc) return rc;
    }
    return sdn_ctx_new(c->model->m, &cp, &c->ctx, err);
}

static void graph_params_defaults(sdnpu_graph_params *g) { memset(g, 0, sizeof *g); }

sdnpu_status sdnpu_graph_params_init_sized(sdnpu_graph_params *p, size_t size) {
    if (!init_size_ok(p, size, FIRST_GRAPH_PARAMS, "sdnpu_graph_params")) return SDNPU_EINVAL;
    sdnpu_graph_params d;
    graph_params_defaults(&d);
    put_struct(p, size, &d, KNOWN_GRAPH_PARAMS);
    return SDNPU_OK;
}

/* sdnpu_context_new and sdnpu_context_new_graphs (fn: which, for the message): the app's
 * structs (NULL: defaults) over the defaults, checked, then the context. */
static sdnpu_status context_new(const char *fn, sdnpu_model *m, const sdnpu_context_params *pp, const sdnpu_graph_params *gg,
                                sdnpu_context **out, sdnpu_error *err) {
    sdn_err_clear(E(err)); /* a reused error struct starts empty */
    if (out) *out = NULL;
    sdnpu_context_params def, *p = &def;
    context_params_defaults(&def);
    sdnpu_graph_params gdef, *g = &gdef;
    graph_params_defaults(&gdef);
    int rc0;
    if (pp && (rc0 = take_struct(&def, pp, FIRST_CONTEXT_PARAMS, KNOWN_CONTEXT_PARAMS, "sdnpu_context_params", E(err)))) return rc0;
    if (gg && (rc0 = take_struct(&gdef, gg, FIRST_GRAPH_PARAMS, KNOWN_GRAPH_PARAMS, "sdnpu_graph_params", E(err)))) return rc0;
    if (!m || !out) return sdn_fail(E(err), SDN_EINVAL, "%s: model or out is NULL", fn);
    if (p->n_ctx < 0 || p->n_ctx == 1) return sdn_fail(E(err), SDN_EINVAL, "context parameter n_ctx = %d: give 0 (default) or at least 2", p->n_ctx);
    if (p->n_threads < 0 || p->n_threads > 256) return sdn_fail(E(err), SDN_EINVAL, "context parameter n_threads = %d is not in [0, 256]", p->n_threads);
    sdnpu_context *c = calloc(1, sizeof *c);
    if (!c) return sdn_fail(E(err), SDN_ENOMEM, "out of memory");
    c->model = m;
    c->p = *p;
    c->g = *g;
    if (c->p.n_threads == 0) c->p.n_threads = default_threads();
    c->history_path = dup_or_null(p->history_path);
    c->graphs = dup_or_null(g->graphs);
    c->profile_db = dup_or_null(g->profile_db);
    c->p.cache_type_k = c->p.cache_type_v = NULL; /* the caller's strings: parsed here, not kept */
    c->g.graphs = c->g.profile_db = NULL;          /* ... or kept as the copies above */
    int rc = SDN_OK;
    if ((p->cache_type_k && (rc = sdn_kv_type_parse(p->cache_type_k, "context parameter cache_type_k", &c->type_k, E(err)))) ||
        (p->cache_type_v && (rc = sdn_kv_type_parse(p->cache_type_v, "context parameter cache_type_v", &c->type_v, E(err)))))
        goto fail;
    if (c->graphs) {
        sdn_gs_mode mode;
        if ((rc = sdn_gs_mode_parse(c->graphs, &mode, E(err)))) { sdn_fail(E(err), rc, "graph parameter graphs"); goto fail; }
    } else if ((rc = make_ctx(c, NULL, E(err)))) goto fail;
    if (c->history_path && (rc = sdn_history_open(c->history_path, &c->hist, E(err)))) goto fail;
    *out = c;
    return SDNPU_OK;
fail:
    sdnpu_context_free(c);
    return rc;
}

sdnpu_status sdnpu_context_new(sdnpu_model *m, const sdnpu_context_params *p, sdnpu_context **out, sdnpu_error *err) {
    return context_new("sdnpu_context_new", m, p, NULL, out, err);
}

sdnpu_status sdnpu_context_new_graphs(sdnpu_model *m, const sdnpu_context_params *p, const sdnpu_graph_params *g, sdnpu_context **out,
                                      sdnpu_error *err) {
    return context_new("sdnpu_context_new_graphs", m, p, g, out, err);
}

void sdnpu_context_free(sdnpu_context *c) {
    if (!c) return;
    sdn_ctx_free(c->ctx);
    sdn_gs_free(c->gs);
    sdn_history_close(c->hist);
    sdn_preds_free(&c->last_preds);
    free(c->history_path);
    free(c->graphs);
    free(c->profile_db);
    free(c);
}

int sdnpu_context_n_ctx(const sdnpu_context *c) {
    if (!c) return 0;
    if (c->ctx) return sdn_ctx_n_ctx(c->ctx);
    if (c->p.n_ctx > 0) return c->p.n_ctx;
    return c->model->info.context_length < SDNPU_DEFAULT_N_CTX ? c->model->info.context_length : SDNPU_DEFAULT_N_CTX;
}

sdnpu_status sdnpu_graph_report(const sdnpu_context *c, char **text, sdnpu_error *err) {
    sdn_err_clear(E(err)); /* a reused error struct starts empty */
    if (text) *text = NULL;
    if (!c || !text) return sdn_fail(E(err), SDN_EINVAL, "sdnpu_graph_report: context or text is NULL");
    if (!c->gs || !c->requests) return sdn_fail(E(err), SDN_ESTATE, "no graph run on this context yet");
    size_t len = 0;
    FILE *f = open_memstream(text, &len);
    if (!f) { *text = NULL; return sdn_fail(E(err), SDN_ENOMEM, "out of memory"); }
    sdn_gs_stats_print(sdn_gs_last(c->gs), f);
    fclose(f);
    return SDNPU_OK;
}

/* ---- requests ---- */

static void request_defaults(sdnpu_request *r) {
    memset(r, 0, sizeof *r);
    r->store_answer = 1;
    r->method = SDNPU_DEFAULT_METHOD;
    r->max_tokens = SDNPU_DEFAULT_MAX_TOKENS;
    r->draft_max = SDNPU_DEFAULT_DRAFT_MAX;
    r->prefill_topk = SDNPU_DEFAULT_PREFILL_TOPK;
    r->top_p = 1.0f;
    r->reuse_kv = 1;
    r->prefix_cache = 1;
}

sdnpu_status sdnpu_request_init_sized(sdnpu_request *r, size_t size) {
    if (!init_size_ok(r, size, FIRST_REQUEST, "sdnpu_request")) return SDNPU_EINVAL;
    sdnpu_request d;
    request_defaults(&d);
    put_struct(r, size, &d, KNOWN_REQUEST);
    return SDNPU_OK;
}

/* The app's request (its struct_size bytes) over the defaults. */
static int take_request(const sdnpu_request *r, sdnpu_request *out, sdn_err *err) {
    request_defaults(out);
    out->struct_size = sizeof *out;
    return take_struct(out, r, FIRST_REQUEST, KNOWN_REQUEST, "sdnpu_request", err);
}

sdnpu_status sdnpu_result_init_sized(sdnpu_result *r, size_t size) {
    if (!init_size_ok(r, size, FIRST_RESULT, "sdnpu_result")) return SDNPU_EINVAL;
    memset(r, 0, size);
    r->struct_size = size;
    r->stop_index = -1;
    return SDNPU_OK;
}

/* Step 1: the prompt tokens as the model sees them (and, optionally, the rendered text). */
static int request_tokens(const sdnpu_model *m, const sdnpu_request *r, int n_ctx, int32_t **ids, int *n, char **text, sdn_err *err) {
    int kinds = (r->n_messages > 0) + (r->prompt != NULL || r->n_documents > 0) + (r->n_prompt_ids > 0);
    if (kinds == 0) return sdn_fail(err, SDN_EINVAL, "the request has no messages, prompt or prompt_ids");
    if (kinds > 1) return sdn_fail(err, SDN_EINVAL, "the request gives more than one of messages, prompt (with documents) and prompt_ids");
    if (r->n_messages < 0 || r->n_documents < 0 || r->n_prompt_ids < 0) return sdn_fail(err, SDN_EINVAL, "the request has a negative count");
    if (r->n_prompt_ids > 0) {
        for (int i = 0; i < r->n_prompt_ids; i++)
            if (r->prompt_ids[i] < 0 || r->prompt_ids[i] >= m->info.vocab)
                return sdn_fail(err, SDN_EINVAL, "prompt_ids[%d] = %d is not a token id in [0, %d)", i, r->prompt_ids[i], m->info.vocab);
        if (!(*ids = malloc(sizeof(int32_t) * (size_t)r->n_prompt_ids))) return sdn_fail(err, SDN_ENOMEM, "out of memory");
        memcpy(*ids, r->prompt_ids, sizeof(int32_t) * (size_t)r->n_prompt_ids);
        *n = r->n_prompt_ids;
        return SDN_OK;
    }
    for (int i = 0; i < r->n_messages; i++)
        if (!r->messages[i].role || !r->messages[i].content) return sdn_fail(err, SDN_EINVAL, "messages[%d] has no role or content", i);
    for (int i = 0; i < r->n_documents; i++)
        if (!r->documents[i]) return sdn_fail(err, SDN_EINVAL, "documents[%d] is NULL", i);
    sdn_request rq = {.messages = (const sdn_chat_msg *)r->messages, .n_messages = r->n_messages, .documents = r->documents,
                      .n_docs = r->n_documents, .prompt = r->prompt, .system = r->system, .chat_template = r->chat_template,
                      .max_tokens = n_ctx};
    _Static_assert(sizeof(sdn_chat_msg) == sizeof(sdnpu_message), "sdnpu_message mirrors sdn_chat_msg");
    return sdn_request_tokens(m->m, &rq, ids, n, text, err);
}

sdnpu_status sdnpu_render_prompt(const sdnpu_model *m, const sdnpu_request *rr, char **text, sdnpu_error *err) {
    sdn_err_clear(E(err)); /* a reused error struct starts empty */
    int32_t *ids = NULL;
    int n = 0;
    if (text) *text = NULL;
    if (!m || !rr || !text) return sdn_fail(E(err), SDN_EINVAL, "sdnpu_render_prompt: model, request or text is NULL");
    sdnpu_request rq, *r = &rq;
    int rc0 = take_request(rr, &rq, E(err));
    if (rc0) return rc0;
    if (r->n_prompt_ids > 0) return sdn_fail(E(err), SDN_EINVAL, "a prompt_ids request has no text to render");
    int rc = request_tokens(m, r, 0, &ids, &n, text, E(err));
    free(ids);
    return rc;
}

/* The request's history scope (sdnpu_request.history_scope). */
static int history_scope(const sdnpu_request *r, sdn_history_scope *out, sdn_err *err) {
    *out = SDN_HISTORY_GROUP;
    if (!r->history_scope || !strcmp(r->history_scope, "group")) return SDN_OK;
    if (!strcmp(r->history_scope, "global")) {
        *out = SDN_HISTORY_GLOBAL;
        return SDN_OK;
    }
    return sdn_fail(err, SDN_EINVAL, "request history_scope '%.64s': expected \"group\" or \"global\"", r->history_scope);
}

/* Step 2: the task group's earlier answers (global scope: and every other group's), as a
 * serialized automaton the drafter reads. */
static int history_lookup(sdnpu_context *c, const char *group, sdn_history_scope scope, uint8_t **bytes, size_t *len, sdnpu_stats *st,
                          sdn_err *err) {
    *bytes = NULL;
    *len = 0;
    if (!group && scope == SDN_HISTORY_GROUP) return SDN_OK;
    return sdn_history_automaton(c->hist, group, c->model->info.fingerprint, scope, HISTORY_TOKENS, bytes, len, NULL,
                                 &st->history_answers, &st->history_tokens, err);
}

/* The model's candidate table (made at its first use) and, the first time this context uses
 * it, what the context's history store kept of it when the model's table has learned nothing
 * yet. A stored table that does not load (damaged, another shape) is a cache: it is reported
 * and replaced by what this run learns. */
static int model_table(sdnpu_context *c, sdn_recycle **out, sdn_err *err) {
    sdnpu_model *m = c->model;
    int rc = SDN_OK;
    pthread_mutex_lock(&m->mu);
    if (!m->recycle && !(rc = sdn_recycle_new(m->info.vocab, SDN_RECYCLE_DEFAULT_K, &m->recycle, err))) m->recycle_fresh = 1;
    if (!rc && c->hist && !c->candidates_loaded) {
        c->candidates_loaded = 1;
        uint8_t *b = NULL;
        size_t n = 0;
        sdn_err le = {0};
        if (m->recycle_fresh && !(rc = sdn_history_candidates_get(c->hist, m->info.fingerprint, &b, &n, err)) && b) {
            char what[600];
            snprintf(what, sizeof what, "%s: stored candidate table of model %s", c->history_path, m->info.fingerprint);
            if (sdn_recycle_load(m->recycle, b, n, what, &le)) sdn_log(SDN_LOG_WARN, "%s; it will be replaced", le.msg);
            else m->recycle_fresh = 0;
        }
        free(b);
    }
    pthread_mutex_unlock(&m->mu);
    *out = rc ? NULL : m->recycle;
    return rc;
}

/* Step 3: the drafting method with the request's parameters, the history automaton and the
 * model's candidate table (when the method drafts from it; *row_topk: its k, else 0). A
 * sampled request gets a table of its own instead (*own, freed by the caller): its answer
 * depends on what was drafted (only its distribution does not), and the same request with
 * the same seed must give the same answer whatever the model learned before. */
static int make_drafter(sdnpu_context *c, const sdnpu_request *r, const uint8_t *hist, size_t hist_len, sdn_drafter *d, int *forced,
                        int *exits, int *row_topk, int *evidence, sdn_recycle **own, sdn_err *err) {
    sdn_method_config mc;
    sdn_method_defaults(&mc);
    for (int i = 0; i < r->n_params; i++) {
        int rc = sdn_method_set_param(&mc, r->params[i] ? r->params[i] : "", err);
        if (rc) return sdn_fail(err, rc, "request params[%d]", i);
    }
    mc.hist_bytes = hist;
    mc.hist_bytes_len = hist_len;
    *forced = mc.forced;
    *exits = mc.exits;
    *row_topk = 0;
    const char *method = r->method ? r->method : "none";
    *evidence = sdn_method_scores_paths(method, &mc);
    if (sdn_method_uses_model_table(method, &mc)) {
        int rc = r->temperature > 0 ? sdn_recycle_new(c->model->info.vocab, SDN_RECYCLE_DEFAULT_K, own, err) : model_table(c, &mc.recycle, err);
        if (rc) return rc;
        if (*own) mc.recycle = *own;
        *row_topk = sdn_recycle_k(mc.recycle);
    }
    int rc = sdn_method_create(method, &mc, d, err);
    return rc ? sdn_fail(err, rc, "request method") : SDN_OK;
}

/* Step 7b: the model's candidate table into the context's history store (after a request that
 * drafted from it), so it survives a restart. */
static int candidates_store(sdnpu_context *c, sdn_err *err) {
    sdnpu_model *m = c->model;
    if (!c->hist || !m->recycle) return SDN_OK;
    pthread_mutex_lock(&m->mu);
    m->recycle_fresh = 0;
    pthread_mutex_unlock(&m->mu);
    uint8_t *b = NULL;
    size_t n = 0;
    int rc = sdn_recycle_serialize(m->recycle, &b, &n, err);
    if (!rc) rc = sdn_history_candidates_put(c->hist, m->info.fingerprint, sdn_recycle_vocab(m->recycle), sdn_recycle_k(m->recycle), b, n, err);
    free(b);
    return rc;
}

/* Step 3b: the request's constraint: its grammar or JSON schema compiled (NULL when it has
 * none), and the model's vocabulary as bytes (built once per model). */
static int make_grammar(sdnpu_model *m, const sdnpu_request *r, sdn_grammar **g, sdn_err *err) {
    *g = NULL;
    if (!r->grammar && !r->json_schema) return SDN_OK;
    if (r->grammar && r->json_schema) return sdn_fail(err, SDN_EINVAL, "request grammar and json_schema: give at most one");
    const sdn_tokenizer *tok = sdn_model_tokenizer(m->m);
    if (!tok) return sdn_fail(err, SDN_EINVAL, "request %s: the model has no tokenizer to match it against", r->grammar ? "grammar" : "json_schema");
    int rc = r->grammar ? sdn_grammar_parse(r->grammar, strlen(r->grammar), g, err)
                        : sdn_grammar_from_schema(r->json_schema, strlen(r->json_schema), g, err);
    if (rc) return rc;
    pthread_mutex_lock(&m->mu);
    if (!m->gvocab) rc = sdn_gvocab_new(tok, &m->gvocab, err);
    pthread_mutex_unlock(&m->mu);
    if (rc) { sdn_grammar_free(*g); *g = NULL; }
    return rc;
}

/* Streaming state: committed tokens -> text for on_text, the whole answer, and stop strings.
 * Text that could be the start of a stop string is held back until it is known not to be;
 * the answer ends before the first stop string, at the token that completed it. */
typedef struct stream {
    const sdnpu_request *r;
    sdn_detok *dt;
    char *text;
    size_t len, cap;
    size_t sent;        /* bytes of text already given to on_text */
    size_t scanned;     /* stop strings were searched for up to here */
    size_t max_stop;    /* longest stop string */
    int n_tokens;       /* tokens whose text is in `text` */
    int stopped_at;     /* tokens of the answer when a stop string ended it, else -1 */
    int stop_index;     /* which stop string, else -1 */
    int steps;          /* decode steps so far (sdnpu_step.step) */
    int cancelled;      /* on_text asked to stop */
    int failed;         /* out of memory while collecting the text */
} stream;

static int append(stream *s, const char *buf, size_t n) {
    if (s->len + n + 1 > s->cap) {
        size_t cap = (s->len + n + 1) * 2;
        char *t = realloc(s->text, cap);
        if (!t) return s->failed = 1;
        s->text = t;
        s->cap = cap;
    }
    memcpy(s->text + s->len, buf, n);
    s->len += n;
    s->text[s->len] = 0;
    return 0;
}

/* Length of the longest suffix of text[0..len) that is a proper prefix of a stop string. */
static size_t held_back(const stream *s) {
    size_t best = 0;
    for (int k = 0; k < s->r->n_stop; k++) {
        size_t l = strlen(s->r->stop[k]);
        for (size_t m = l > s->len ? s->len : l - 1; m > best; m--)
            if (!memcmp(s->text + s->len - m, s->r->stop[k], m)) { best = m; break; }
    }
    return best;
}

/* Give on_text what is final: everything (at the end) or what cannot start a stop string. */
static void deliver(stream *s, int final) {
    size_t upto = final ? s->len : s->len - held_back(s);
    if (upto <= s->sent) return;
    if (s->r->on_text && !s->cancelled && s->r->on_text(s->r->user_data, s->text + s->sent, upto - s->sent)) s->cancelled = 1;
    s->sent = upto;
}

/* New text of one token: look for a stop string in what it completes. 1: stop generating. */
static int push_text(stream *s, const char *buf, size_t n) {
    s->n_tokens++;
    if (n && append(s, buf, n)) return 1;
    if (s->r->n_stop > 0 && n) {
        size_t from = s->scanned > s->max_stop ? s->scanned - s->max_stop : 0;
        size_t cut = SIZE_MAX;
        for (int k = 0; k < s->r->n_stop; k++) {
            const char *hit = strstr(s->text + from, s->r->stop[k]);
            if (hit && (size_t)(hit - s->text) < cut) cut = (size_t)(hit - s->text), s->stop_index = k;
        }
        s->scanned = s->len;
        if (cut != SIZE_MAX) {
            s->len = cut;
            s->text[cut] = 0;
            s->stopped_at = s->n_tokens;
            deliver(s, 1);
            return 1;
        }
    }
    deliver(s, 0);
    return s->cancelled;
}

_Static_assert((int)SDNPU_SOURCE_MODEL == SDN_SRC_NONE && (int)SDNPU_SOURCE_PROMPT == SDN_SRC_PROMPT && (int)SDNPU_SOURCE_ANSWER == SDN_SRC_ANSWER &&
                   (int)SDNPU_SOURCE_HISTORY == SDN_SRC_HISTORY && (int)SDNPU_SOURCE_GRAMMAR == SDN_SRC_GRAMMAR &&
                   (int)SDNPU_SOURCE_REUSE == SDN_SRC_REUSE && (int)SDNPU_SOURCE_DRAFT == SDN_SRC_DRAFT &&
                   (int)SDNPU_SOURCE_RECYCLED == SDN_SRC_RECYCLED,
               "sdnpu_source and draft/draft_tree.h's SDN_SRC_* differ");

/* Step 6: tokens committed by a decode step, as text (sdn_gen_params.on_tokens), one token at
 * a time so that a stop string ends the answer at the same token whatever the step size; then
 * the step with its tokens' sources and text ends to on_step. */
static int on_tokens(void *ud, const int32_t *t, const uint8_t *src, int n) {
    stream *s = ud;
    char buf[512];
    size_t ends[SDN_INVARIANT_MAX_ROWS + 1];
    int i, stop = 0;
    for (i = 0; i < n && !stop; i++) {
        size_t k = s->dt ? sdn_detok_push(s->dt, t[i], buf, sizeof buf) : 0;
        stop = push_text(s, buf, k);
        if (i < (int)(sizeof ends / sizeof ends[0])) ends[i] = s->len;
    }
    s->steps++;
    if (s->r->on_step && !s->cancelled && i <= (int)(sizeof ends / sizeof ends[0])) {
        sdnpu_step st = {.step = s->steps, .n_tokens = i, .tokens = t, .sources = src, .text_end = ends};
        if (s->r->on_step(s->r->user_data, &st)) s->cancelled = 1, stop = 1;
    }
    return stop;
}

static int is_eog(void *ud, int32_t tok) {
    const sdn_tokenizer *t = ud;
    /* a BOS in the middle of generation starts a new document: stop there too (llama2.c's run.c rule) */
    return t && (sdn_tokenizer_is_eog(t, tok) || tok == sdn_tokenizer_bos(t));
}

/* Step 4: generation parameters: sampling, limits, drafter, the draft budget (fixed caps, the
 * graph runtime's, or this machine's verify cost curve) and the graph hooks. */
static int gen_params(sdnpu_context *c, const sdnpu_request *r, sdn_drafter *d, sdn_gen_params *gp, sdn_err *err) {
    memset(gp, 0, sizeof *gp);
    gp->max_tokens = r->max_tokens;
    gp->sampling.temp = r->temperature;
    gp->sampling.top_p = r->top_p;
    gp->sampling.top_k = r->top_k;
    gp->sampling.seed = r->seed;
    gp->sampling.min_p = r->min_p;
    gp->sampling.repeat_penalty = r->repeat_penalty;
    gp->sampling.repeat_last_n = r->repeat_last_n;
    gp->ignore_eog = r->ignore_eos;
    gp->drafter = d->ops ? d : NULL;
    gp->caps.max_nodes = r->draft_max;
    gp->caps.max_depth = r->draft_depth;
    gp->caps.max_branch = r->draft_branch;
    gp->prefill_topk = d->ops && sdn_method_uses_prefill_preds(r->method) ? (r->prefill_topk > 0 ? r->prefill_topk : SDNPU_DEFAULT_PREFILL_TOPK) : 0;
    gp->reuse_kv = r->reuse_kv;
    if (r->prefix_cache && !c->graphs) gp->pcache = c->model->pcache;
    if (c->last_preds.tok) gp->reuse_preds = &c->last_preds;
    int rc;
    if (c->graphs) {
        if (!c->ctx && (rc = make_ctx(c, gp, err))) return rc;
        if (c->requests && (rc = sdn_gs_prepare(c->gs, err))) return rc; /* back to the initial layouts */
        gp->prefill = c->graph_gp.prefill;
        gp->prefill_ud = c->graph_gp.prefill_ud;
        gp->decode_rows = c->graph_gp.decode_rows;
        if (gp->caps.max_nodes <= 0) gp->caps.max_nodes = c->graph_gp.caps.max_nodes;
    } else if (gp->drafter && gp->caps.max_nodes <= 0) {
        if (!c->have_curve) {
            sdn_log_stream notes;
            FILE *log = sdn_log_stream_open(&notes, SDN_LOG_INFO);
            rc = sdn_verify_curve(c->model->m, c->p.n_threads, &c->curve, log, err);
            sdn_log_stream_close(&notes);
            if (rc) return rc;
        }
        c->have_curve = 1;
        gp->vcurve = &c->curve;
    }
    return SDN_OK;
}

/* Step 7: the answer stored back into the task group (when it ended normally). */
static int history_store(sdnpu_context *c, const sdnpu_request *r, const sdn_gen_result *g, const char *text, int stopped,
                         sdnpu_stats *st, sdn_err *err) {
    if (!r->task_group || !r->store_answer || !c->hist || (g->stop == SDN_GEN_CANCEL && !stopped) || g->n_tokens == 0) return SDN_OK;
    int rc = sdn_history_add(c->hist, r->task_group, c->model->info.fingerprint, g->tokens, g->n_tokens, text, 0, NULL, err);
    if (!rc) st->answer_stored = 1;
    return rc;
}

static void fill_stats(const sdn_gen_stats *s, sdnpu_stats *o) {
    o->prompt_tokens = s->n_prompt;
    o->reused_tokens = s->n_reused;
    o->generated_tokens = s->n_gen;
    o->steps = s->steps;
    o->drafted_tokens = s->drafted;
    o->accepted_tokens = s->accepted;
    o->mean_accepted = sdn_gen_mean_accepted(s);
    memcpy(o->accepted_hist, s->accept_hist, sizeof o->accepted_hist);
    o->prefill_s = s->t_prefill;
    o->decode_s = s->t_decode;
    o->draft_s = s->t_draft;
    o->verify_s = s->t_verify;
    o->first_token_s = s->t_first_token;
    o->peak_rss = s->peak_rss;
    o->forced_tokens = s->forced_drafted;
    o->constrain_s = s->t_constrain;
    o->prefix_memory_tokens = s->n_cached_mem;
    o->prefix_disk_tokens = s->n_cached_disk;
    o->prefix_saved_s = s->t_saved;
}

/* The request proper, on this library's own structs (sdnpu_generate checks and converts). */
static int generate(sdnpu_context *c, const sdnpu_request *r, sdnpu_result *result, sdnpu_error *err) {
    if (r->max_tokens < 0) return sdn_fail(E(err), SDN_EINVAL, "request max_tokens = %d is negative", r->max_tokens);
    if (!(r->temperature >= 0 && r->temperature <= 100)) return sdn_fail(E(err), SDN_EINVAL, "request temperature %g is not in [0, 100]", r->temperature);
    if (!(r->top_p >= 0 && r->top_p <= 1)) return sdn_fail(E(err), SDN_EINVAL, "request top_p %g is not in [0, 1]", r->top_p);
    if (r->top_k < 0) return sdn_fail(E(err), SDN_EINVAL, "request top_k %d is negative", r->top_k);
    if (!(r->min_p >= 0 && r->min_p <= 1)) return sdn_fail(E(err), SDN_EINVAL, "request min_p %g is not in [0, 1]", r->min_p);
    if (!(r->repeat_penalty >= 0 && r->repeat_penalty <= 10))
        return sdn_fail(E(err), SDN_EINVAL, "request repeat_penalty %g is not in [0, 10]", r->repeat_penalty);
    if (r->repeat_last_n < 0 || r->repeat_last_n > 1 << 20)
        return sdn_fail(E(err), SDN_EINVAL, "request repeat_last_n %d is not in [0, 1048576]", r->repeat_last_n);
    if (r->prefix_cache != 0 && r->prefix_cache != 1) return sdn_fail(E(err), SDN_EINVAL, "request prefix_cache = %d: give 0 or 1", r->prefix_cache);
    if (r->reserved0) return sdn_fail(E(err), SDN_EINVAL, "request reserved0 = %d must be 0", r->reserved0);
    if (r->draft_max < 0 || r->draft_max > 63 || r->draft_depth < 0 || r->draft_depth > 63 || r->draft_branch < 0 || r->draft_branch > 63)
        return sdn_fail(E(err), SDN_EINVAL, "request draft_max/draft_depth/draft_branch must be in [0, 63]");
    sdn_err *e = E(err);
    sdnpu_stats st = {0};
    int32_t *prompt = NULL;
    int n_prompt = 0;
    uint8_t *hist = NULL;
    size_t hist_len = 0;
    sdn_drafter d = {0};
    sdn_recycle *own_table = NULL; /* a sampled request's own candidate table */
    sdn_grammar *gram = NULL;
    int forced = 1, exits = 1;
    sdn_gen_result g = {0};
    const sdn_tokenizer *tok = sdn_model_tokenizer(c->model->m);
    stream s = {.r = r, .stopped_at = -1, .stop_index = -1};
    int n_ctx = sdnpu_context_n_ctx(c);
    int rc;
    if (r->n_stop < 0 || (r->n_stop > 0 && !r->stop)) { rc = sdn_fail(e, SDN_EINVAL, "request stop: bad count"); goto done; }
    for (int i = 0; i < r->n_stop; i++) {
        if (!r->stop[i] || !r->stop[i][0]) { rc = sdn_fail(e, SDN_EINVAL, "request stop[%d] is empty", i); goto done; }
        if (strlen(r->stop[i]) > s.max_stop) s.max_stop = strlen(r->stop[i]);
    }
    if ((rc = make_grammar(c->model, r, &gram, e))) goto done;
    if ((rc = request_tokens(c->model, r, n_ctx, &prompt, &n_prompt, NULL, e))) goto done;
    int drafting = r->method && strcmp(r->method, "none") != 0;
    if (r->task_group && !c->hist) {
        rc = sdn_fail(e, SDN_EINVAL, "the request names task group '%s' but its context has no history store (history_path)", r->task_group);
        goto done;
    }
    sdn_history_scope scope;
    if ((rc = history_scope(r, &scope, e))) goto done;
    if (scope == SDN_HISTORY_GLOBAL && !c->hist) {
        rc = sdn_fail(e, SDN_EINVAL, "the request's history_scope is \"global\" but its context has no history store (history_path)");
        goto done;
    }
    if (drafting && (rc = history_lookup(c, r->task_group, scope, &hist, &hist_len, &st, e))) goto done;
    int row_topk = 0, evidence = 0;
    if ((rc = make_drafter(c, r, hist, hist_len, &d, &forced, &exits, &row_topk, &evidence, &own_table, e))) goto done;
    sdn_gen_params gp;
    if ((rc = gen_params(c, r, &d, &gp, e))) goto done;
    gp.row_topk = gp.drafter ? row_topk : 0;
    gp.score_budget = gp.drafter ? evidence : 0;
    gp.cost_fix = &c->cost_fix;
    gp.calib = &c->calib;
    if (gram) {
        gp.grammar = gram;
        gp.gvocab = c->model->gvocab;
        gp.tok = tok;
        gp.forced_draft = forced;
        gp.exit_draft = forced && exits;
        gp.memo = &c->memo;
    }
    if (tok) {
        if (!(s.dt = sdn_detok_new(tok))) { rc = sdn_fail(e, SDN_ENOMEM, "out of memory"); goto done; }
        sdn_detok_prime(s.dt, prompt, n_prompt);
        gp.grammar_skip_space = sdn_detok_drops_next_space(s.dt);
    }
    gp.eog = is_eog;
    gp.eog_ud = (void *)tok;
    gp.on_tokens = on_tokens;
    gp.cb_ud = &s;
    sdn_preds preds = {0};
    gp.preds_out = &preds;
    gp.on_progress = r->on_progress;
    gp.progress_ud = r->user_data;
    rc = sdn_generate(c->ctx, prompt, n_prompt, &gp, &g, e);
    if (rc) sdn_kv_truncate(c->ctx, 0); /* what the KV cache holds after a failed step is not vouched for */
    c->requests++;
    sdn_preds_free(&c->last_preds); /* valid only for the KV entries of the request that made them */
    c->last_preds = preds;
    fill_stats(&g.stats, &st);
    if (rc) goto done;
    if (s.stopped_at >= 0 && g.n_tokens > s.stopped_at) g.n_tokens = s.stopped_at; /* tokens after the stop string's */
    if (s.dt && g.stop != SDN_GEN_CANCEL && s.stopped_at < 0) {
        char buf[512];
        size_t k = sdn_detok_flush(s.dt, buf, sizeof buf);
        if (k) append(&s, buf, k);
    }
    if (!s.cancelled) deliver(&s, 1);
    if (s.failed) { rc = sdn_fail(e, SDN_ENOMEM, "out of memory (answer text)"); goto done; }
    if (s.cancelled) g.stop = SDN_GEN_CANCEL;
    if ((rc = history_store(c, r, &g, s.text, s.stopped_at >= 0, &st, e))) goto done;
    if (row_topk && !own_table && g.stats.steps > 0 && (rc = candidates_store(c, e))) goto done;
    if (result) {
        result->text = s.text ? s.text : calloc(1, 1);
        s.text = NULL;
        result->tokens = g.tokens;
        result->n_tokens = g.n_tokens;
        g.tokens = NULL;
        static const sdnpu_finish fin[] = {[SDN_GEN_LENGTH] = SDNPU_FINISH_LENGTH, [SDN_GEN_EOG] = SDNPU_FINISH_STOP,
                                           [SDN_GEN_CANCEL] = SDNPU_FINISH_CANCELLED, [SDN_GEN_CONTEXT] = SDNPU_FINISH_CONTEXT};
        result->finish = s.stopped_at >= 0 ? SDNPU_FINISH_STOP : s.cancelled ? SDNPU_FINISH_CANCELLED : fin[g.stop];
        result->stop_index = s.stop_index;
        result->stats = st;
    }
done:
    if (rc && result) result->stats = st;
    if (s.dt) sdn_detok_free(s.dt);
    free(s.text);
    sdn_gen_result_free(&g);
    sdn_drafter_destroy(&d);
    sdn_recycle_free(own_table);
    sdn_grammar_free(gram);
    free(hist);
    free(prompt);
    return rc;
}

sdnpu_status sdnpu_generate(sdnpu_context *c, const sdnpu_request *r, sdnpu_result *result, sdnpu_error *err) {
    sdn_err_clear(E(err)); /* a reused error struct starts empty */
    if (result && result->struct_size < FIRST_RESULT) return bad_size("sdnpu_result", result->struct_size, FIRST_RESULT, E(err));
    sdnpu_result res;
    memset(&res, 0, sizeof res);
    res.stop_index = -1;
    sdnpu_request rq;
    int rc;
    if (!c || !r) rc = sdn_fail(E(err), SDN_EINVAL, "sdnpu_generate: context or request is NULL");
    else if (!(rc = take_request(r, &rq, E(err)))) {
        if (__atomic_exchange_n(&c->busy, 1, __ATOMIC_ACQ_REL))
            return sdn_fail(E(err), SDN_ESTATE, "sdnpu_generate: the context is already running a request (from its own callback or another thread)");
        rc = generate(c, &rq, result ? &res : NULL, err);
        __atomic_store_n(&c->busy, 0, __ATOMIC_RELEASE);
    }
    if (result) put_struct(result, result->struct_size, &res, KNOWN_RESULT);
    return rc;
}

void sdnpu_result_free(sdnpu_result *r) {
    if (!r) return;
    free(r->text);
    free(r->tokens);
    r->text = NULL;
    r->tokens = NULL;
    r->n_tokens = 0;
}
