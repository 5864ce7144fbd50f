/*
 * db/db_int.h — what the files of db/ share and nobody else sees: the
 * connection struct and the error helpers.
 *
 * Every public function reports failure as -1 plus a one-line message in the
 * caller's buffer; these helpers keep that uniform (and tolerate err == NULL).
 */
#ifndef LLMD_DB_DB_INT_H
#define LLMD_DB_DB_INT_H

#include "db/db.h"

#include <sqlite3.h>

struct db {
    sqlite3 *h;
    int version;           /* schema version after the migrations */
    sqlite3_stmt *ins_use; /* the usage insert, prepared once (the writer reuses it) */
    char path[256];        /* for messages */
};

/* printf into err (may be NULL). */
void db_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* "what: <sqlite's message>" into err; returns -1. */
int db_sqlerr(struct db *d, const char *what, char *err, size_t errlen);
/* Runs statements with no result rows; -1 with a message. */
int db_exec(struct db *d, const char *sql, char *err, size_t errlen);
/* BEGIN IMMEDIATE / COMMIT / ROLLBACK; the first two return the SQLite code. */
int db_begin(struct db *d);
int db_commit(struct db *d);
void db_rollback(struct db *d);
/* Length of a fixed-size char field that may lack its NUL. */
size_t db_fieldlen(const char *s, size_t cap);
/* Copies sqlite text into a fixed field, truncating. */
void db_copytext(char *dst, size_t cap, const unsigned char *src);
/* Steps st to its end, converting each row with conv into a malloc'd array of
 * elem-sized items (*out, owned by the caller); -1 with "what: ..." on error. */
int db_collect(struct db *d, sqlite3_stmt *st, size_t elem, void (*conv)(sqlite3_stmt *, void *),
               void **out, int *n, const char *what, char *err, size_t errlen);

/* Inserts n usage records in one transaction; returns the SQLite code of the
 * failure (SQLITE_OK on success) so the writer can tell "busy" from the rest. */
int db_usage_insert_rc(struct db *d, const struct db_usage *u, int n, char *err, size_t errlen);

#endif
