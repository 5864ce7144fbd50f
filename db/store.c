/*
 * db/store.c — opening the store: the file, the connection's pragmas and the
 * schema migrations; plus the small helpers every db/ file uses.
 *
 * The schema's version lives in PRAGMA user_version.  Migrations are an
 * ordered array of SQL scripts: script i takes version i to i + 1 and runs in
 * its own transaction together with the version bump, so a crash mid-upgrade
 * leaves the file at the old version, never half-way.  A file newer than the
 * scripts we know is refused rather than guessed at.
 */
#include "db/db_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Writers of the daemon, llmadmin and the writer thread queue behind each
 * other for at most this long before a statement fails as busy. */
#define DB_BUSY_MS 5000

static const char *const db_migrations[] = {
    /* 1: what the operator configures: tenants and their API keys. */
    "CREATE TABLE tenants ("
    "  id INTEGER PRIMARY KEY,"
    "  name TEXT NOT NULL UNIQUE,"
    "  weight REAL NOT NULL DEFAULT 1 CHECK (weight > 0),"
    "  default_priority INTEGER NOT NULL DEFAULT 4,"
    "  max_priority INTEGER NOT NULL DEFAULT 0,"
    "  max_concurrent INTEGER NOT NULL DEFAULT 0,"
    "  rpm INTEGER NOT NULL DEFAULT 0,"
    "  tpm INTEGER NOT NULL DEFAULT 0,"
    "  max_kv_blocks INTEGER NOT NULL DEFAULT 0,"
    "  max_tokens INTEGER NOT NULL DEFAULT 0,"
    "  enabled INTEGER NOT NULL DEFAULT 1,"
    "  created INTEGER NOT NULL);"
    "CREATE TABLE api_keys ("
    "  id INTEGER PRIMARY KEY,"
    "  tenant_id INTEGER NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,"
    "  name TEXT NOT NULL DEFAULT '',"
    "  prefix TEXT NOT NULL,"
    "  hash BLOB NOT NULL UNIQUE CHECK (length(hash) = 32),"
    "  created INTEGER NOT NULL,"
    "  expires INTEGER NOT NULL DEFAULT 0,"
    "  revoked INTEGER NOT NULL DEFAULT 0);"
    /* Deleting a tenant checks its keys; revoking by prefix looks them up. */
    "CREATE INDEX api_keys_tenant ON api_keys(tenant_id);"
    "CREATE INDEX api_keys_prefix ON api_keys(prefix);",

    /* 2: what the daemon accounts.  Rows name their tenant rather than point
     * at it, so the ledger outlives a deleted tenant. */
    "CREATE TABLE usage ("
    "  id INTEGER PRIMARY KEY,"
    "  ts INTEGER NOT NULL,"
    "  tenant TEXT NOT NULL,"
    "  key_id INTEGER NOT NULL DEFAULT 0,"
    "  request_id TEXT NOT NULL DEFAULT '',"
    "  prompt_tokens INTEGER NOT NULL DEFAULT 0,"
    "  cached_tokens INTEGER NOT NULL DEFAULT 0,"
    "  completion_tokens INTEGER NOT NULL DEFAULT 0,"
    "  queue_ms REAL NOT NULL DEFAULT 0,"
    "  ttft_ms REAL NOT NULL DEFAULT 0,"
    "  total_ms REAL NOT NULL DEFAULT 0,"
    "  preemptions INTEGER NOT NULL DEFAULT 0,"
    "  finish TEXT NOT NULL DEFAULT '',"
    "  status INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX usage_ts ON usage(ts);"
    "CREATE INDEX usage_tenant_ts ON usage(tenant, ts);",

    /* 3: a counter of configuration changes, bumped by triggers, so that the
     * daemon reloads tenants and keys when they change and not on each of the
     * writer's usage commits (which move PRAGMA data_version too). */
    "CREATE TABLE config_version (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL);"
    "INSERT INTO config_version VALUES (1, 0);"
    "CREATE TRIGGER tenants_ins AFTER INSERT ON tenants "
    "  BEGIN UPDATE config_version SET n = n + 1; END;"
    "CREATE TRIGGER tenants_upd AFTER UPDATE ON tenants "
    "  BEGIN UPDATE config_version SET n = n + 1; END;"
    "CREATE TRIGGER tenants_del AFTER DELETE ON tenants "
    "  BEGIN UPDATE config_version SET n = n + 1; END;"
    "CREATE TRIGGER api_keys_ins AFTER INSERT ON api_keys "
    "  BEGIN UPDATE config_version SET n = n + 1; END;"
    "CREATE TRIGGER api_keys_upd AFTER UPDATE ON api_keys "
    "  BEGIN UPDATE config_version SET n = n + 1; END;"
    "CREATE TRIGGER api_keys_del AFTER DELETE ON api_keys "
    "  BEGIN UPDATE config_version SET n = n + 1; END;",
};
#define DB_VERSION ((int)(sizeof(db_migrations) / sizeof(db_migrations[0])))

/* ---------------------------------------------------------------- helpers */

void db_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int db_sqlerr(struct db *d, const char *what, char *err, size_t errlen)
{
    db_errf(err, errlen, "%s: %s", what, sqlite3_errmsg(d->h));
    return -1;
}

int db_exec(struct db *d, const char *sql, char *err, size_t errlen)
{
    char *msg = NULL;
    if (sqlite3_exec(d->h, sql, NULL, NULL, &msg) == SQLITE_OK)
        return 0;
    db_errf(err, errlen, "%s: %s", d->path, msg ? msg : sqlite3_errmsg(d->h));
    sqlite3_free(msg);
    return -1;
}

/* IMMEDIATE takes the write lock up front, so the busy timeout applies at
 * BEGIN instead of a deadlock-shaped SQLITE_BUSY half-way through. */
int db_begin(struct db *d)
{
    return sqlite3_exec(d->h, "BEGIN IMMEDIATE", NULL, NULL, NULL);
}

int db_commit(struct db *d)
{
    return sqlite3_exec(d->h, "COMMIT", NULL, NULL, NULL);
}

void db_rollback(struct db *d)
{
    if (!sqlite3_get_autocommit(d->h))
        sqlite3_exec(d->h, "ROLLBACK", NULL, NULL, NULL);
}

size_t db_fieldlen(const char *s, size_t cap)
{
    return strnlen(s, cap);
}

void db_copytext(char *dst, size_t cap, const unsigned char *src)
{
    snprintf(dst, cap, "%s", src ? (const char *)src : "");
}

/* Steps st to the end, converting each row into a grown array of elem-sized
 * items; *out is malloc'd, owned by the caller. */
int db_collect(struct db *d, sqlite3_stmt *st, size_t elem, void (*conv)(sqlite3_stmt *, void *),
               void **out, int *n, const char *what, char *err, size_t errlen)
{
    char *arr = NULL;
    int cap = 0, cnt = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (cnt == cap) {
            int ncap = cap ? cap * 2 : 16;
            char *p = realloc(arr, (size_t)ncap * elem);
            if (!p) {
                rc = SQLITE_NOMEM;
                break;
            }
            arr = p;
            cap = ncap;
        }
        conv(st, arr + (size_t)cnt++ * elem);
    }
    if (rc != SQLITE_DONE) {
        free(arr);
        if (rc == SQLITE_NOMEM)
            db_errf(err, errlen, "%s: out of memory", what);
        else
            db_sqlerr(d, what, err, errlen);
        return -1;
    }
    *out = arr;
    *n = cnt;
    return 0;
}

/* One integer from a statement with one row (a pragma); -1 on error. */
static int64_t db_int_query(struct db *d, const char *sql)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(d->h, sql, -1, &st, NULL) != SQLITE_OK)
        return -1;
    int64_t v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    return v;
}

/* ------------------------------------------------------------- opening */

/* The file must exist unless we may create it; we create it ourselves, 0640,
 * because it holds key hashes and the usage ledger (SQLite gives its -wal and
 * -shm files the same mode). */
static int db_prepare_file(const char *path, int create, char *err, size_t errlen)
{
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (!S_ISREG(sb.st_mode)) {
            db_errf(err, errlen, "%s: not a regular file", path);
            return -1;
        }
        return 0;
    }
    if (errno != ENOENT || !create) {
        db_errf(err, errlen, "%s: %s", path,
                errno == ENOENT ? "no such database file" : strerror(errno));
        return -1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd < 0 && errno != EEXIST) {
        db_errf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
        return -1;
    }
    if (fd >= 0)
        close(fd);
    return 0;
}

/* WAL lets the daemon read tenants while the writer thread appends usage.
 * synchronous=NORMAL in WAL mode fsyncs only at checkpoints: a committed
 * transaction is in the WAL (in the OS page cache) when COMMIT returns, so it
 * survives the process dying, SIGKILL included; only an OS crash or power loss
 * may drop the last few commits, and never corrupts the file.  That is the
 * durability a usage ledger needs, at a fraction of FULL's fsyncs. */
static int db_pragmas(struct db *d, char *err, size_t errlen)
{
    sqlite3_busy_timeout(d->h, DB_BUSY_MS);
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(d->h, "PRAGMA journal_mode=WAL", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            const char *mode = (const char *)sqlite3_column_text(st, 0);
            rc = mode && strcmp(mode, "wal") == 0 ? SQLITE_OK : SQLITE_ERROR;
        }
        sqlite3_finalize(st);
    }
    if ((rc & 0xff) == SQLITE_NOTADB) {
        db_errf(err, errlen, "%s: not an SQLite database (or encrypted)", d->path);
        return -1;
    }
    if (rc != SQLITE_OK) {
        db_errf(err, errlen, "%s: cannot enable WAL mode: %s", d->path,
                rc == SQLITE_ERROR ? "journal mode unchanged" : sqlite3_errstr(rc));
        return -1;
    }
    return db_exec(d, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON", err, errlen);
}

/* Applies the next migration, if any, in one transaction; 1 applied, 0 up to
 * date, -1 error.  The version is re-read under the write lock, so two
 * processes opening an old file at once apply each script exactly once. */
static int db_migrate_step(struct db *d, char *err, size_t errlen)
{
    if (db_begin(d) != SQLITE_OK)
        return db_sqlerr(d, d->path, err, errlen);
    int64_t v = db_int_query(d, "PRAGMA user_version");
    if (v < 0 || v > DB_VERSION) {
        db_rollback(d);
        if (v < 0)
            return db_sqlerr(d, d->path, err, errlen);
        db_errf(err, errlen,
                "%s: schema version %lld is newer than this build knows (%d); "
                "use a newer llmd/llmadmin",
                d->path, (long long)v, DB_VERSION);
        return -1;
    }
    if (v == DB_VERSION) {
        db_rollback(d);
        return 0;
    }
    char bump[64];
    snprintf(bump, sizeof(bump), "PRAGMA user_version = %d", (int)v + 1);
    if (db_exec(d, db_migrations[v], err, errlen) < 0 || db_exec(d, bump, err, errlen) < 0) {
        db_rollback(d);
        return -1;
    }
    if (db_commit(d) != SQLITE_OK) {
        db_sqlerr(d, d->path, err, errlen);
        db_rollback(d);
        return -1;
    }
    return 1;
}

static int db_migrate(struct db *d, char *err, size_t errlen)
{
    int rc;
    while ((rc = db_migrate_step(d, err, errlen)) == 1)
        ;
    if (rc < 0)
        return -1;
    d->version = DB_VERSION;
    return 0;
}

int db_open(const char *path, int create, struct db **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!path || !*path) {
        db_errf(err, errlen, "no database path");
        return -1;
    }
    if (db_prepare_file(path, create, err, errlen) < 0)
        return -1;
    struct db *d = calloc(1, sizeof(*d));
    if (!d) {
        db_errf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    snprintf(d->path, sizeof(d->path), "%s", path);
    int rc = sqlite3_open_v2(path, &d->h, SQLITE_OPEN_READWRITE, NULL);
    if (rc != SQLITE_OK) {
        db_errf(err, errlen, "%s: %s", path, d->h ? sqlite3_errmsg(d->h) : sqlite3_errstr(rc));
        db_close(d);
        return -1;
    }
    sqlite3_extended_result_codes(d->h, 1);
    if (db_pragmas(d, err, errlen) < 0 || db_migrate(d, err, errlen) < 0) {
        db_close(d);
        return -1;
    }
    *out = d;
    return 0;
}

void db_close(struct db *d)
{
    if (!d)
        return;
    sqlite3_finalize(d->ins_use);
    sqlite3_close(d->h);
    free(d);
}

int db_schema_version(struct db *d)
{
    return d->version;
}

int64_t db_data_version(struct db *d)
{
    return db_int_query(d, "PRAGMA data_version");
}

int64_t db_config_version(struct db *d)
{
    return db_int_query(d, "SELECT n FROM config_version WHERE id = 1");
}
