/* db.h - internal SQLite helpers of datasets/ shared by the history store and the results
 * database: opening a file as "our" database (recognised by PRAGMA application_id and
 * user_version; created with a schema when new; anything else refused with a clear message
 * naming the file), WAL mode, a busy timeout, and error messages that name the file. */
#ifndef SDN_DATASETS_DB_H
#define SDN_DATASETS_DB_H

#include <sqlite3.h>

#include "common/sdn_err.h"

typedef struct db_kind {
    const char *what;    /* "history store", "results database" (for messages) */
    int app_id;          /* PRAGMA application_id */
    int version;         /* PRAGMA user_version written by this code */
    const char *schema;  /* SQL run once on a new file (in the creating transaction) */
    const char *tables[8]; /* tables a valid file must have (NULL-terminated) */
} db_kind;

/* Open (creating when absent) `path` as a database of `kind`. ":memory:" gives a private
 * in-memory database. Refuses, with SDN_EDB / SDN_EUNSUP naming the file: a file that is
 * not SQLite, a damaged file (PRAGMA quick_check), an SQLite file of another application
 * (other application_id, or tables but no application_id), a newer schema version. */
int db_open(const char *path, const db_kind *kind, sqlite3 **out, sdn_err *err);
/* SDN_EDB with "<path>: <context>: <sqlite message>". */
int db_fail(sqlite3 *db, const char *path, const char *context, sdn_err *err);
/* Run SQL without results. */
int db_exec(sqlite3 *db, const char *path, const char *sql, sdn_err *err);

#endif
