/*
 * db/usage.c — the usage ledger: one row per finished request, listed and
 * summed per tenant.
 *
 * Inserts go in batches inside one transaction through a statement prepared
 * once per connection, because the writer thread commits hundreds of rows
 * at a time and one fsync-free WAL append per batch is what keeps it cheap.
 */
#include "db/db_int.h"

#include <stdlib.h>
#include <string.h>

#define DB_USAGE_COLS                                                                              \
    "ts, tenant, key_id, request_id, prompt_tokens, cached_tokens, completion_tokens, queue_ms, "  \
    "ttft_ms, total_ms, preemptions, finish, status"

#define DB_SUM_COLS                                                                                \
    "tenant, count(*), sum(finish = 'error' OR status >= 400), sum(prompt_tokens), "               \
    "sum(cached_tokens), sum(completion_tokens), "                                                 \
    "coalesce(avg(CASE WHEN ttft_ms > 0 THEN ttft_ms END), 0), avg(total_ms)"

static void db_text(sqlite3_stmt *st, int i, const char *s, size_t cap)
{
    sqlite3_bind_text(st, i, s, (int)db_fieldlen(s, cap), SQLITE_TRANSIENT);
}

static void db_usage_bind(sqlite3_stmt *st, const struct db_usage *u)
{
    sqlite3_bind_int64(st, 1, u->ts_ms);
    db_text(st, 2, u->tenant, sizeof(u->tenant));
    sqlite3_bind_int64(st, 3, u->key_id);
    db_text(st, 4, u->request_id, sizeof(u->request_id));
    sqlite3_bind_int(st, 5, u->prompt_tokens);
    sqlite3_bind_int(st, 6, u->cached_tokens);
    sqlite3_bind_int(st, 7, u->completion_tokens);
    sqlite3_bind_double(st, 8, u->queue_ms);
    sqlite3_bind_double(st, 9, u->ttft_ms);
    sqlite3_bind_double(st, 10, u->total_ms);
    sqlite3_bind_int(st, 11, u->preemptions);
    db_text(st, 12, u->finish, sizeof(u->finish));
    sqlite3_bind_int(st, 13, u->status);
}

static int db_usage_rows(struct db *d, const struct db_usage *u, int n)
{
    if (!d->ins_use) {
        const char *sql = "INSERT INTO usage (" DB_USAGE_COLS ") VALUES "
                          "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)";
        int rc = sqlite3_prepare_v3(d->h, sql, -1, SQLITE_PREPARE_PERSISTENT, &d->ins_use, NULL);
        if (rc != SQLITE_OK)
            return rc;
    }
    for (int i = 0; i < n; i++) {
        db_usage_bind(d->ins_use, &u[i]);
        int rc = sqlite3_step(d->ins_use);
        sqlite3_reset(d->ins_use);
        if (rc != SQLITE_DONE)
            return rc;
    }
    return SQLITE_OK;
}

int db_usage_insert_rc(struct db *d, const struct db_usage *u, int n, char *err, size_t errlen)
{
    if (n <= 0)
        return SQLITE_OK;
    int rc = db_begin(d);
    if (rc == SQLITE_OK)
        rc = db_usage_rows(d, u, n);
    if (rc == SQLITE_OK)
        rc = db_commit(d);
    if (rc != SQLITE_OK) {
        db_sqlerr(d, "usage insert", err, errlen);
        db_rollback(d);
    }
    return rc;
}

int db_usage_insert(struct db *d, const struct db_usage *u, int n, char *err, size_t errlen)
{
    return db_usage_insert_rc(d, u, n, err, errlen) == SQLITE_OK ? 0 : -1;
}

static void db_usage_row(sqlite3_stmt *st, struct db_usage *u)
{
    memset(u, 0, sizeof(*u));
    u->ts_ms = sqlite3_column_int64(st, 0);
    db_copytext(u->tenant, sizeof(u->tenant), sqlite3_column_text(st, 1));
    u->key_id = sqlite3_column_int64(st, 2);
    db_copytext(u->request_id, sizeof(u->request_id), sqlite3_column_text(st, 3));
    u->prompt_tokens = sqlite3_column_int(st, 4);
    u->cached_tokens = sqlite3_column_int(st, 5);
    u->completion_tokens = sqlite3_column_int(st, 6);
    u->queue_ms = sqlite3_column_double(st, 7);
    u->ttft_ms = sqlite3_column_double(st, 8);
    u->total_ms = sqlite3_column_double(st, 9);
    u->preemptions = sqlite3_column_int(st, 10);
    db_copytext(u->finish, sizeof(u->finish), sqlite3_column_text(st, 11));
    u->status = sqlite3_column_int(st, 12);
}

static void db_sum_row(sqlite3_stmt *st, struct db_usage_sum *s)
{
    memset(s, 0, sizeof(*s));
    db_copytext(s->tenant, sizeof(s->tenant), sqlite3_column_text(st, 0));
    s->requests = (long)sqlite3_column_int64(st, 1);
    s->errors = (long)sqlite3_column_int64(st, 2);
    s->prompt_tokens = (long)sqlite3_column_int64(st, 3);
    s->cached_tokens = (long)sqlite3_column_int64(st, 4);
    s->completion_tokens = (long)sqlite3_column_int64(st, 5);
    s->mean_ttft_ms = sqlite3_column_double(st, 6);
    s->mean_total_ms = sqlite3_column_double(st, 7);
}

static void db_usage_conv(sqlite3_stmt *st, void *p)
{
    db_usage_row(st, p);
}
static void db_sum_conv(sqlite3_stmt *st, void *p)
{
    db_sum_row(st, p);
}

int db_usage_list(struct db *d, const char *tenant, int64_t since_ms, int limit,
                  struct db_usage **out, int *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    /* Two texts rather than "?3 IS NULL OR tenant = ?3", which would keep
     * SQLite from using the (tenant, ts) index. */
    const char *sql = tenant ? "SELECT " DB_USAGE_COLS " FROM usage WHERE tenant = ?3 AND "
                               "ts >= ?1 ORDER BY ts DESC, id DESC LIMIT ?2"
                             : "SELECT " DB_USAGE_COLS " FROM usage WHERE ts >= ?1 "
                               "ORDER BY ts DESC, id DESC LIMIT ?2";
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(d->h, sql, -1, &st, NULL) != SQLITE_OK)
        return db_sqlerr(d, "usage list", err, errlen);
    sqlite3_bind_int64(st, 1, since_ms);
    sqlite3_bind_int(st, 2, limit > 0 ? limit : -1);
    if (tenant)
        sqlite3_bind_text(st, 3, tenant, -1, SQLITE_TRANSIENT);
    void *arr = NULL;
    int rc = db_collect(d, st, sizeof(**out), db_usage_conv, &arr, n, "usage list", err, errlen);
    sqlite3_finalize(st);
    *out = arr;
    return rc;
}

/* The mean time to first token counts only requests that produced one: a
 * request refused or failed before its first token has ttft 0, which would
 * otherwise drag the mean down exactly when things go wrong. */
int db_usage_summary(struct db *d, const char *tenant, int64_t since_ms, struct db_usage_sum **out,
                     int *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    const char *sql = tenant ? "SELECT " DB_SUM_COLS " FROM usage WHERE tenant = ?2 AND ts >= ?1 "
                               "GROUP BY tenant ORDER BY tenant"
                             : "SELECT " DB_SUM_COLS " FROM usage WHERE ts >= ?1 "
                               "GROUP BY tenant ORDER BY tenant";
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(d->h, sql, -1, &st, NULL) != SQLITE_OK)
        return db_sqlerr(d, "usage summary", err, errlen);
    sqlite3_bind_int64(st, 1, since_ms);
    if (tenant)
        sqlite3_bind_text(st, 2, tenant, -1, SQLITE_TRANSIENT);
    void *arr = NULL;
    int rc = db_collect(d, st, sizeof(**out), db_sum_conv, &arr, n, "usage summary", err, errlen);
    sqlite3_finalize(st);
    *out = arr;
    return rc;
}
