/*
 * db/tenants.c — tenants: who may use the box, with what weight, priorities
 * and caps.
 *
 * Every field is validated here, before SQL, so that llmadmin and the daemon
 * can trust whatever row they read: a bad value is refused with a message
 * naming the field instead of surfacing later as odd scheduling.
 */
#include "db/db_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The messages below spell the priority range out. */
_Static_assert(DB_PRIO_MAX == 7, "update the priority messages");

#define DB_TENANT_COLS                                                                             \
    "id, name, weight, default_priority, max_priority, max_concurrent, rpm, tpm, "                 \
    "max_kv_blocks, max_tokens, enabled, created"

void db_tenant_defaults(struct db_tenant *t)
{
    memset(t, 0, sizeof(*t));
    t->weight = 1.0;
    t->default_priority = 4;
    t->max_priority = 0;
    t->enabled = 1;
}

/* Names go into URLs, metrics labels and command lines: keep them plain. */
static int db_name_ok(const char *name)
{
    size_t n = strnlen(name, DB_NAME_MAX);
    if (n == 0 || n >= DB_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        if (!ok)
            return 0;
    }
    return 1;
}

static int db_tenant_check(const struct db_tenant *t, char *err, size_t errlen)
{
    const char *bad = NULL;
    if (!db_name_ok(t->name))
        bad = "name must be 1..63 characters of A-Z a-z 0-9 . _ -";
    else if (!(t->weight > 0) || !isfinite(t->weight))
        bad = "weight must be a finite number > 0";
    else if (t->default_priority < 0 || t->default_priority > DB_PRIO_MAX)
        bad = "default priority must be 0..7";
    else if (t->max_priority < 0 || t->max_priority > DB_PRIO_MAX)
        bad = "max priority must be 0..7";
    else if (t->max_concurrent < 0 || t->rpm < 0 || t->tpm < 0 || t->max_kv_blocks < 0 ||
             t->max_tokens < 0)
        bad = "caps (concurrent, rpm, tpm, kv blocks, max tokens) must be >= 0";
    if (!bad)
        return 0;
    if (db_name_ok(t->name))
        db_errf(err, errlen, "tenant %s: %s", t->name, bad);
    else
        db_errf(err, errlen, "tenant: %s", bad);
    return -1;
}

/* Binds the settable fields as ?1 name, ?2 weight ... ?10 enabled. */
static void db_tenant_bind(sqlite3_stmt *st, const struct db_tenant *t)
{
    sqlite3_bind_text(st, 1, t->name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(st, 2, t->weight);
    sqlite3_bind_int(st, 3, t->default_priority);
    sqlite3_bind_int(st, 4, t->max_priority);
    sqlite3_bind_int(st, 5, t->max_concurrent);
    sqlite3_bind_int(st, 6, t->rpm);
    sqlite3_bind_int(st, 7, t->tpm);
    sqlite3_bind_int(st, 8, t->max_kv_blocks);
    sqlite3_bind_int(st, 9, t->max_tokens);
    sqlite3_bind_int(st, 10, t->enabled != 0);
}

static void db_tenant_row(sqlite3_stmt *st, struct db_tenant *t)
{
    memset(t, 0, sizeof(*t));
    t->id = sqlite3_column_int64(st, 0);
    db_copytext(t->name, sizeof(t->name), sqlite3_column_text(st, 1));
    t->weight = sqlite3_column_double(st, 2);
    t->default_priority = sqlite3_column_int(st, 3);
    t->max_priority = sqlite3_column_int(st, 4);
    t->max_concurrent = sqlite3_column_int(st, 5);
    t->rpm = sqlite3_column_int(st, 6);
    t->tpm = sqlite3_column_int(st, 7);
    t->max_kv_blocks = sqlite3_column_int(st, 8);
    t->max_tokens = sqlite3_column_int(st, 9);
    t->enabled = sqlite3_column_int(st, 10);
    t->created = sqlite3_column_int64(st, 11);
}

static void db_tenant_conv(sqlite3_stmt *st, void *p)
{
    db_tenant_row(st, p);
}

int db_tenant_add(struct db *d, struct db_tenant *t, char *err, size_t errlen)
{
    if (db_tenant_check(t, err, errlen) < 0)
        return -1;
    sqlite3_stmt *st;
    const char *sql = "INSERT INTO tenants (name, weight, default_priority, max_priority, "
                      "max_concurrent, rpm, tpm, max_kv_blocks, max_tokens, enabled, created) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";
    if (sqlite3_prepare_v2(d->h, sql, -1, &st, NULL) != SQLITE_OK)
        return db_sqlerr(d, "tenant add", err, errlen);
    int64_t now = (int64_t)time(NULL);
    db_tenant_bind(st, t);
    sqlite3_bind_int64(st, 11, now);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_CONSTRAINT_UNIQUE) {
        db_errf(err, errlen, "tenant %s already exists", t->name);
        return -1;
    }
    if (rc != SQLITE_DONE)
        return db_sqlerr(d, "tenant add", err, errlen);
    t->id = sqlite3_last_insert_rowid(d->h);
    t->created = now;
    return 0;
}

int db_tenant_update(struct db *d, const struct db_tenant *t, char *err, size_t errlen)
{
    if (db_tenant_check(t, err, errlen) < 0)
        return -1;
    sqlite3_stmt *st;
    const char *sql = "UPDATE tenants SET weight = ?2, default_priority = ?3, max_priority = ?4, "
                      "max_concurrent = ?5, rpm = ?6, tpm = ?7, max_kv_blocks = ?8, "
                      "max_tokens = ?9, enabled = ?10 WHERE name = ?1";
    if (sqlite3_prepare_v2(d->h, sql, -1, &st, NULL) != SQLITE_OK)
        return db_sqlerr(d, "tenant update", err, errlen);
    db_tenant_bind(st, t);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return db_sqlerr(d, "tenant update", err, errlen);
    if (sqlite3_changes(d->h) == 0) {
        db_errf(err, errlen, "no tenant %s", t->name);
        return -1;
    }
    return 0;
}

int db_tenant_get(struct db *d, const char *name, struct db_tenant *out, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(d->h, "SELECT " DB_TENANT_COLS " FROM tenants WHERE name = ?1", -1, &st,
                           NULL) != SQLITE_OK)
        return db_sqlerr(d, "tenant get", err, errlen);
    sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        db_tenant_row(st, out);
    sqlite3_finalize(st);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    return db_sqlerr(d, "tenant get", err, errlen);
}

int db_tenant_list(struct db *d, struct db_tenant **out, int *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(d->h, "SELECT " DB_TENANT_COLS " FROM tenants ORDER BY name", -1, &st,
                           NULL) != SQLITE_OK)
        return db_sqlerr(d, "tenant list", err, errlen);
    void *arr = NULL;
    int rc = db_collect(d, st, sizeof(**out), db_tenant_conv, &arr, n, "tenant list", err, errlen);
    sqlite3_finalize(st);
    *out = arr;
    return rc;
}

int db_tenant_delete(struct db *d, const char *name, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(d->h, "DELETE FROM tenants WHERE name = ?1", -1, &st, NULL) != SQLITE_OK)
        return db_sqlerr(d, "tenant delete", err, errlen);
    sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return db_sqlerr(d, "tenant delete", err, errlen);
    return sqlite3_changes(d->h) > 0 ? 1 : 0;
}
