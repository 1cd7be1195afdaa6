/* sdn_db.h - SQLite helpers shared by sdnpu's databases (the history store and the results
 * database in datasets/, the profile cache in graph_sched/): opening a file as "our" database (recognised by PRAGMA application_id and
 * user_version; created with a schema when new; anything else refused with a clear message
 * naming the file), WAL mode, a busy timeout, and error messages that name the file. */
#ifndef SDN_DB_H
#define SDN_DB_H

#include <sqlite3.h>

#include "common/sdn_err.h"

typedef struct sdn_db_kind {
    const char *what;    /* "history store", "results database", "profile database" (for messages) */
    int app_id;          /* PRAGMA application_id */
    int version;         /* PRAGMA user_version written by this code */
    const char *schema;  /* SQL run once on a new file (in the creating transaction) */
    const char *tables[8]; /* tables a valid file must have (NULL-terminated) */
    /* Optional: bring a file of schema version `from` (< version) to `version`. Called
     * after the file passed every check, inside the IMMEDIATE transaction that then sets
     * user_version; must not lose rows. NULL: older versions are used as they are. */
    int (*migrate)(sqlite3 *db, const char *path, long long from, sdn_err *err);
} sdn_db_kind;

/* Open `path` as a database of `kind`, creating it when absent if `create` (otherwise a
 * missing file is an error). ":memory:" gives a private
 * in-memory database. Refuses, with SDN_EDB / SDN_EUNSUP naming the file: a file that is
 * not SQLite, an empty (0-byte) file, a damaged file (PRAGMA quick_check), an SQLite file
 * of another application (other application_id, or tables but no application_id), a newer
 * schema version. A refused file is left byte-for-byte unchanged: it is only read until
 * accepted, then switched to WAL (and migrated, see sdn_db_kind.migrate). An SQLite file
 * without tables or application_id is adopted. */
int sdn_db_open(const char *path, const sdn_db_kind *kind, int create, sqlite3 **out, sdn_err *err);
/* SDN_EDB with "<path>: <context>: <sqlite message>". */
int sdn_db_fail(sqlite3 *db, const char *path, const char *context, sdn_err *err);
/* Run SQL without results. */
int sdn_db_exec(sqlite3 *db, const char *path, const char *sql, sdn_err *err);

#endif
