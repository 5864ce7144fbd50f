/*
 * db/db.h — the SQLite store: tenants, API keys, the usage ledger.
 *
 * One file (WAL mode) holds everything an operator configures and everything
 * the daemon accounts.  Its schema carries a version and is brought up to
 * date by ordered migrations when opened.  API keys are random, shown once,
 * and stored only as a SHA-256 hash with a short display prefix.
 *
 * A struct db is one connection, used by one thread at a time.  The daemon
 * reads tenants and keys through its own connection and writes usage
 * through a db_writer, which owns another connection and a thread that
 * commits queued records in batches, off the I/O path.
 */
#ifndef LLMD_DB_DB_H
#define LLMD_DB_DB_H

#include <stddef.h>
#include <stdint.h>

struct db;

#define DB_NAME_MAX   64 /* tenant and key names, NUL included */
#define DB_KEY_MAX    80 /* a whole API key, NUL included */
#define DB_PREFIX_LEN 12 /* characters of a key shown as its prefix ("sk-llmd-3f9a") */
#define DB_PRIO_MAX   7  /* priorities are 0 (most important) .. DB_PRIO_MAX */

/* Opens (creating when create != 0) the database at path, sets WAL mode and
 * a busy timeout, and runs every pending migration.  -1 with a message. */
int db_open(const char *path, int create, struct db **out, char *err, size_t errlen);
void db_close(struct db *d);
/* Version of the schema after the migrations (the highest one known). */
int db_schema_version(struct db *d);
/* Changes whenever another connection commits (PRAGMA data_version). */
int64_t db_data_version(struct db *d);
/* Changes whenever tenants or keys change, through any connection; usage
 * records leave it alone, so a reload keyed on it skips the writer's commits.
 * -1 on error. */
int64_t db_config_version(struct db *d);

/* ---------------------------------------------------------------- tenants */

struct db_tenant {
    int64_t id;
    char name[DB_NAME_MAX];
    double weight;        /* fair-share weight, > 0 */
    int default_priority; /* used when a request asks for none */
    int max_priority;     /* ceiling: the most important priority (lowest number) allowed */
    int max_concurrent;   /* requests in flight at once; 0: no cap */
    int rpm;              /* requests per minute; 0: no cap */
    int tpm;              /* tokens (prompt + completion) per minute; 0: no cap */
    int max_kv_blocks;    /* device KV blocks; 0: no cap */
    int max_tokens;       /* prompt + completion tokens of one request; 0: no cap */
    int enabled;
    int64_t created; /* unix seconds */
};

/* Fills the defaults: weight 1, default priority 4, ceiling 0, no caps, enabled. */
void db_tenant_defaults(struct db_tenant *t);
/* Adds a tenant (t->id and t->created are set).  -1 with a message, e.g. a
 * duplicate or invalid name (1..63 of [A-Za-z0-9._-]) or out-of-range field. */
int db_tenant_add(struct db *d, struct db_tenant *t, char *err, size_t errlen);
/* Stores every field of t (found by name).  -1 with a message. */
int db_tenant_update(struct db *d, const struct db_tenant *t, char *err, size_t errlen);
/* 1 found, 0 absent, -1 error. */
int db_tenant_get(struct db *d, const char *name, struct db_tenant *out, char *err, size_t errlen);
/* Every tenant ordered by name; *out is malloc'd, owned by the caller. */
int db_tenant_list(struct db *d, struct db_tenant **out, int *n, char *err, size_t errlen);
/* Deletes a tenant and its keys (its usage records stay): 1 deleted, 0 absent, -1 error. */
int db_tenant_delete(struct db *d, const char *name, char *err, size_t errlen);

/* ------------------------------------------------------------------- keys */

struct db_key {
    int64_t id;
    char tenant[DB_NAME_MAX];
    char name[DB_NAME_MAX];            /* the operator's label, may be "" */
    char prefix[DB_PREFIX_LEN + 1];    /* the key's first characters, for display */
    uint8_t hash[32];                  /* SHA-256 of the whole key */
    int64_t created, expires, revoked; /* unix seconds; 0: never / not revoked */
};

/* Creates a key for tenant: "sk-llmd-" + 48 hex characters of RAND_bytes.
 * The whole key goes to key (cap >= DB_KEY_MAX) and is never stored;
 * *out (may be NULL) receives the stored row.  -1 with a message. */
int db_key_create(struct db *d, const char *tenant, const char *name, int64_t expires, char *key,
                  size_t cap, struct db_key *out, char *err, size_t errlen);
/* Keys of tenant (NULL: all), revoked ones included, oldest first. */
int db_key_list(struct db *d, const char *tenant, struct db_key **out, int *n, char *err,
                size_t errlen);
/* Revokes the key whose id (decimal) or display prefix is what; 1 revoked,
 * 0 no such key (or already revoked), -1 error (e.g. an ambiguous prefix). */
int db_key_revoke(struct db *d, const char *what, char *err, size_t errlen);
/* SHA-256 of a key as presented. */
void db_key_hash(const char *key, size_t len, uint8_t out[32]);

/* ------------------------------------------------------------------ usage */

struct db_usage {
    int64_t ts_ms; /* unix milliseconds when the request ended */
    char tenant[DB_NAME_MAX];
    int64_t key_id;
    char request_id[48];
    int prompt_tokens, cached_tokens, completion_tokens;
    double queue_ms, ttft_ms, total_ms;
    int preemptions;
    char finish[16]; /* stop, length, aborted, error, cancelled */
    int status;      /* HTTP status sent */
};

/* Inserts n records in one transaction.  -1 with a message. */
int db_usage_insert(struct db *d, const struct db_usage *u, int n, char *err, size_t errlen);
/* Records of tenant (NULL: all) that ended at or after since_ms, newest first,
 * at most limit (<= 0: all).  *out malloc'd, owned by the caller. */
int db_usage_list(struct db *d, const char *tenant, int64_t since_ms, int limit,
                  struct db_usage **out, int *n, char *err, size_t errlen);

struct db_usage_sum {
    char tenant[DB_NAME_MAX];
    long requests, errors; /* errors: finish "error" or status >= 400 */
    long prompt_tokens, cached_tokens, completion_tokens;
    double mean_ttft_ms, mean_total_ms;
};
/* Totals per tenant (one row per tenant with records, ordered by name). */
int db_usage_summary(struct db *d, const char *tenant, int64_t since_ms, struct db_usage_sum **out,
                     int *n, char *err, size_t errlen);

/* ----------------------------------------------------------- the writer */

struct db_writer;

/* Called on the writer thread once the record is committed (ok = 1) or the
 * commit failed (ok = 0): it must only signal (event_active, a condvar). */
typedef void (*db_done_fn)(void *arg, int ok);

/* Opens its own connection to path and starts the writer thread.  -1 with a message. */
int db_writer_start(const char *path, struct db_writer **out, char *err, size_t errlen);
/* Queues a record (copied); done (may be NULL) follows its commit.  Records
 * queued together are committed in one transaction.  -1 when stopped. */
int db_writer_push(struct db_writer *w, const struct db_usage *u, db_done_fn done, void *arg);
/* Blocks until everything queued so far is committed. */
void db_writer_flush(struct db_writer *w);
/* Commits what is queued, stops the thread, closes; done callbacks of the
 * last batch run before it returns. */
void db_writer_stop(struct db_writer *w);
struct db_writer_stats {
    long rows, batches, failed;
    int queued;
};
void db_writer_stats(struct db_writer *w, struct db_writer_stats *s);
/* Why the last failed batch failed ("" if none), copied into buf, for the log. */
void db_writer_last_error(struct db_writer *w, char *buf, size_t len);

#endif
