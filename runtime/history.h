/* history.h - the history store: earlier final answers per task group, in SQLite, so a new
 * request of the same group can draft from them (the SAM drafter's static automaton).
 *
 * After a request its answer is stored with the task group, the model fingerprint (answers
 * of another model are never mixed in: token ids mean different things), the time and its
 * tokens. A new request loads its group's answers of the same model, most recent first,
 * until a token budget is reached, and gets the history automaton built over them (most
 * recent answer first, so SAM's earliest-occurrence rule prefers recent text). The
 * automaton is cached in the database in serialized form keyed by (group, model, budget)
 * together with a hash of the exact answer set (ids in order); it is rebuilt only when
 * that set changed.
 *
 * Storage: one SQLite file in WAL mode (readers never block the writer, any number of
 * processes may read at once), a busy timeout, synchronous=FULL, every write in its own
 * transaction: a process killed mid-request loses at most its uncommitted answer. The file
 * is recognised by PRAGMA application_id 0x53444e48 ("SDNH") and user_version 3; a file
 * that is not SQLite, empty (0 bytes), damaged, or another application's database is
 * refused with a message naming it, and never modified (a new store is created only where
 * no file exists). A version-1 store is migrated on open without losing rows: each row
 * whose token checksum holds gets the version-2 checksum over its current text (texts
 * written under version 1 are trusted from then on); a version-2 store gets the
 * model_candidates table.
 *
 * Schema (version 3):
 *   answers(id INTEGER PRIMARY KEY, task_group TEXT, model_fp TEXT, created REAL,
 *           n_tokens INTEGER, tokens BLOB (int32 little-endian), text TEXT,
 *           checksum INTEGER (XXH3-64 of the token bytes, then byte 0 when text is NULL
                             or byte 1 and the text bytes; as signed 64-bit))
 *   history_cache(task_group, model_fp, max_tokens, answers_hash, n_answers, n_tokens,
 *                 sam BLOB, created, PRIMARY KEY (task_group, model_fp, max_tokens))
 *   model_candidates(model_fp TEXT PRIMARY KEY, vocab, k, data BLOB, updated): each model's
 *                 candidate table (draft/recycle.h serialized form, which has its own checksum)
 *   meta(key TEXT PRIMARY KEY, value TEXT)    ("schema" = "sdnpu-history 3")
 * A handle is used by one thread at a time; open one handle per thread or process. */
#ifndef SDN_HISTORY_H
#define SDN_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "common/sdn_err.h"

typedef struct sdn_history sdn_history;

/* Open or create the store at `path` (":memory:": private, in memory). */
int sdn_history_open(const char *path, sdn_history **out, sdn_err *err);
void sdn_history_close(sdn_history *h);

/* Store an answer (one committed transaction). created <= 0: now (Unix seconds). text may
 * be NULL. *id (optional) receives the new row id. */
int sdn_history_add(sdn_history *h, const char *group, const char *model_fp, const int32_t *tokens, int n_tokens, const char *text,
                    double created, int64_t *id, sdn_err *err);

/* Which earlier answers a lookup takes: the task group's (SDN_HISTORY_GROUP), or every answer
 * of the model, the group's own first, then the other groups' (SDN_HISTORY_GLOBAL: the global
 * tree beside the request's own of SuffixDecoding, Oliaro et al., arXiv 2411.04975); most
 * recent first within each, under the same token budget. */
typedef enum { SDN_HISTORY_GROUP = 0, SDN_HISTORY_GLOBAL = 1 } sdn_history_scope;

typedef struct sdn_history_answer {
    int64_t id;
    double created;
    int n_tokens;
    int32_t *tokens;
    char *text; /* NULL when stored without text */
} sdn_history_answer;

/* The answers of (group, model_fp), most recent first (ties: higher id first), while their
 * total token count stays within max_tokens (max_tokens <= 0: all); with SDN_HISTORY_GLOBAL
 * the group's answers so, then the model's other answers so (group NULL: all of them). A
 * stored answer whose checksum does not match its tokens and text, or whose length is out of
 * range or does not match its tokens, fails with SDN_EDB naming its id. *out is malloc'd;
 * free with sdn_history_answers_free. */
int sdn_history_recent(sdn_history *h, const char *group, const char *model_fp, sdn_history_scope scope, long max_tokens,
                       sdn_history_answer **out, int *n, sdn_err *err);
void sdn_history_answers_free(sdn_history_answer *a, int n);
/* One answer by id (SDN_EINVAL when there is none). */
int sdn_history_get(sdn_history *h, int64_t id, sdn_history_answer *out, sdn_err *err);
/* Number of answers of (group, model_fp) (group NULL: all groups, model_fp NULL: all). */
int sdn_history_count(sdn_history *h, const char *group, const char *model_fp, long *n, sdn_err *err);

/* The history automaton of the answers sdn_history_recent selects for (group, model_fp,
 * scope, max_tokens), as sdn_sam_serialize bytes (*bytes malloc'd, *len 0 and *bytes NULL
 * when there are none). From the cache when the answer set is unchanged (*cache_hit = 1),
 * otherwise built, stored in the cache and returned (*cache_hit = 0); the cache keys a global
 * selection by max_tokens -1 - max_tokens, apart from the group's own. A cache entry that
 * does not deserialize is rebuilt. *n_answers / *n_tokens (optional) describe the answer set. */
int sdn_history_automaton(sdn_history *h, const char *group, const char *model_fp, sdn_history_scope scope, long max_tokens,
                          uint8_t **bytes, size_t *len, int *cache_hit, int *n_answers, long *n_tokens, sdn_err *err);

/* The stored candidate table of model_fp (draft/recycle.h's serialized form; *bytes malloc'd,
 * NULL when none is stored). The bytes are not checked here: sdn_recycle_load checks them. */
int sdn_history_candidates_get(sdn_history *h, const char *model_fp, uint8_t **bytes, size_t *len, sdn_err *err);
/* Store (replace) the candidate table of model_fp: one committed write. */
int sdn_history_candidates_put(sdn_history *h, const char *model_fp, int vocab, int k, const uint8_t *bytes, size_t len, sdn_err *err);

/* PRAGMA integrity_check: SDN_OK when the file is sound, else SDN_EDB with the findings. */
int sdn_history_check(sdn_history *h, sdn_err *err);

#endif
