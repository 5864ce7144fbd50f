/*
 * db/keys.c — API keys: made from the OpenSSL CSPRNG, shown once, stored as
 * a SHA-256 hash.
 *
 * A key is "sk-llmd-" + 48 hex characters (192 random bits), so an unsalted
 * fast hash is enough: nobody can brute-force the space, and the daemon can
 * look a presented key up by its hash in one step.  The key text itself never
 * reaches the database; only the hash and a short prefix for display do.
 */
#include "db/db_int.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DB_KEY_TAG  "sk-llmd-"
#define DB_KEY_RAND 24 /* random bytes: 48 hex characters */
#define DB_KEY_LEN  (sizeof(DB_KEY_TAG) - 1 + 2 * DB_KEY_RAND)

_Static_assert(DB_KEY_LEN < DB_KEY_MAX, "a key must fit DB_KEY_MAX");
_Static_assert(DB_PREFIX_LEN < DB_KEY_LEN, "the prefix must be part of a key");

void db_key_hash(const char *key, size_t len, uint8_t out[32])
{
    unsigned int n = 32;
    /* EVP_Digest with SHA-256 cannot fail short of a broken OpenSSL; zeroes
     * then match no stored key, which is the safe outcome. */
    if (EVP_Digest(key, len, out, &n, EVP_sha256(), NULL) != 1)
        memset(out, 0, 32);
}

/* The operator's label: short and printable (it is shown in tables). */
static int db_label_ok(const char *name)
{
    size_t n = strnlen(name, DB_NAME_MAX);
    if (n >= DB_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
            return 0;
    return 1;
}

static int64_t db_tenant_id(struct db *d, const char *tenant, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(d->h, "SELECT id FROM tenants WHERE name = ?1", -1, &st, NULL) !=
        SQLITE_OK)
        return db_sqlerr(d, "key", err, errlen);
    sqlite3_bind_text(st, 1, tenant, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    int64_t id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE)
        db_errf(err, errlen, "no tenant %s", tenant);
    else if (rc != SQLITE_ROW)
        db_sqlerr(d, "key", err, errlen);
    return id;
}

/* Fills text (DB_KEY_LEN + 1 bytes) with a fresh key; -1 when the CSPRNG fails. */
static int db_key_make(char *text)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[DB_KEY_RAND];
    if (RAND_bytes(raw, sizeof(raw)) != 1)
        return -1;
    memcpy(text, DB_KEY_TAG, sizeof(DB_KEY_TAG) - 1);
    char *p = text + sizeof(DB_KEY_TAG) - 1;
    for (size_t i = 0; i < sizeof(raw); i++) {
        *p++ = hex[raw[i] >> 4];
        *p++ = hex[raw[i] & 15];
    }
    *p = '\0';
    OPENSSL_cleanse(raw, sizeof(raw));
    return 0;
}

static int db_key_insert(struct db *d, int64_t tenant_id, const char *name, const char *text,
                         int64_t expires, struct db_key *k, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    const char *sql = "INSERT INTO api_keys (tenant_id, name, prefix, hash, created, expires) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
    if (sqlite3_prepare_v2(d->h, sql, -1, &st, NULL) != SQLITE_OK)
        return db_sqlerr(d, "key create", err, errlen);
    sqlite3_bind_int64(st, 1, tenant_id);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 3, text, DB_PREFIX_LEN, SQLITE_TRANSIENT);
    sqlite3_bind_blob(st, 4, k->hash, 32, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 5, k->created);
    sqlite3_bind_int64(st, 6, expires);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return db_sqlerr(d, "key create", err, errlen);
    k->id = sqlite3_last_insert_rowid(d->h);
    return 0;
}

int db_key_create(struct db *d, const char *tenant, const char *name, int64_t expires, char *key,
                  size_t cap, struct db_key *out, char *err, size_t errlen)
{
    if (!name)
        name = "";
    if (!key || cap < DB_KEY_MAX) {
        db_errf(err, errlen, "key create: buffer for the key too small");
        return -1;
    }
    if (!db_label_ok(name) || expires < 0) {
        db_errf(err, errlen, "key create: %s",
                expires < 0 ? "expiry must be >= 0" : "name must be < 64 printable characters");
        return -1;
    }
    int64_t tid = db_tenant_id(d, tenant, err, errlen);
    if (tid < 0)
        return -1;
    char text[DB_KEY_LEN + 1];
    if (db_key_make(text) < 0) {
        db_errf(err, errlen, "key create: the random number generator failed");
        return -1;
    }
    struct db_key k = {.created = (int64_t)time(NULL), .expires = expires};
    snprintf(k.tenant, sizeof(k.tenant), "%s", tenant);
    snprintf(k.name, sizeof(k.name), "%s", name);
    memcpy(k.prefix, text, DB_PREFIX_LEN);
    db_key_hash(text, DB_KEY_LEN, k.hash);
    int rc = db_key_insert(d, tid, name, text, expires, &k, err, errlen);
    if (rc == 0) {
        memcpy(key, text, DB_KEY_LEN + 1);
        if (out)
            *out = k;
    }
    OPENSSL_cleanse(text, sizeof(text));
    return rc;
}

static void db_key_row(sqlite3_stmt *st, struct db_key *k)
{
    memset(k, 0, sizeof(*k));
    k->id = sqlite3_column_int64(st, 0);
    db_copytext(k->tenant, sizeof(k->tenant), sqlite3_column_text(st, 1));
    db_copytext(k->name, sizeof(k->name), sqlite3_column_text(st, 2));
    db_copytext(k->prefix, sizeof(k->prefix), sqlite3_column_text(st, 3));
    const void *h = sqlite3_column_blob(st, 4);
    if (h && sqlite3_column_bytes(st, 4) == 32)
        memcpy(k->hash, h, 32);
    k->created = sqlite3_column_int64(st, 5);
    k->expires = sqlite3_column_int64(st, 6);
    k->revoked = sqlite3_column_int64(st, 7);
}

static void db_key_conv(sqlite3_stmt *st, void *p)
{
    db_key_row(st, p);
}

int db_key_list(struct db *d, const char *tenant, struct db_key **out, int *n, char *err,
                size_t errlen)
{
    *out = NULL;
    *n = 0;
    if (tenant && db_tenant_id(d, tenant, err, errlen) < 0)
        return -1;
    const char *sql = "SELECT k.id, t.name, k.name, k.prefix, k.hash, k.created, k.expires, "
                      "k.revoked FROM api_keys k JOIN tenants t ON t.id = k.tenant_id "
                      "WHERE ?1 IS NULL OR t.name = ?1 ORDER BY k.id";
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(d->h, sql, -1, &st, NULL) != SQLITE_OK)
        return db_sqlerr(d, "key list", err, errlen);
    if (tenant)
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_TRANSIENT);
    void *arr = NULL;
    int rc = db_collect(d, st, sizeof(**out), db_key_conv, &arr, n, "key list", err, errlen);
    sqlite3_finalize(st);
    *out = arr;
    return rc;
}

/* Runs an UPDATE that revokes at most one key; its changes, or -1. */
static int db_key_update(struct db *d, const char *sql, const char *what, int64_t id, char *err,
                         size_t errlen)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(d->h, sql, -1, &st, NULL) != SQLITE_OK)
        return db_sqlerr(d, "key revoke", err, errlen);
    int64_t now = (int64_t)time(NULL);
    sqlite3_bind_int64(st, 1, now > 0 ? now : 1);
    if (what)
        sqlite3_bind_text(st, 2, what, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_int64(st, 2, id);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return db_sqlerr(d, "key revoke", err, errlen);
    return sqlite3_changes(d->h);
}

static int db_key_revoke_hash(struct db *d, const char *key, char *err, size_t errlen)
{
    uint8_t h[32];
    db_key_hash(key, strlen(key), h);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(d->h, "UPDATE api_keys SET revoked = ?1 WHERE hash = ?2 AND revoked = 0",
                           -1, &st, NULL) != SQLITE_OK)
        return db_sqlerr(d, "key revoke", err, errlen);
    int64_t now = (int64_t)time(NULL);
    sqlite3_bind_int64(st, 1, now > 0 ? now : 1);
    sqlite3_bind_blob(st, 2, h, 32, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return db_sqlerr(d, "key revoke", err, errlen);
    return sqlite3_changes(d->h) > 0;
}

/* A prefix names a key only when exactly one live key has it; the count sits
 * inside the UPDATE so that no key created in between can be hit by mistake. */
static int db_key_revoke_prefix(struct db *d, const char *prefix, char *err, size_t errlen)
{
    const char *sql = "UPDATE api_keys SET revoked = ?1 WHERE prefix = ?2 AND revoked = 0 AND "
                      "(SELECT count(*) FROM api_keys WHERE prefix = ?2 AND revoked = 0) = 1";
    int rc = db_key_update(d, sql, prefix, 0, err, errlen);
    if (rc != 0)
        return rc < 0 ? -1 : 1;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(d->h, "SELECT count(*) FROM api_keys WHERE prefix = ?1 AND revoked = 0",
                           -1, &st, NULL) != SQLITE_OK)
        return db_sqlerr(d, "key revoke", err, errlen);
    sqlite3_bind_text(st, 1, prefix, -1, SQLITE_TRANSIENT);
    int step = sqlite3_step(st);
    int live = step == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    sqlite3_finalize(st);
    if (step != SQLITE_ROW)
        return db_sqlerr(d, "key revoke", err, errlen);
    if (live > 1) {
        db_errf(err, errlen, "prefix %s matches %d keys; revoke by id", prefix, live);
        return -1;
    }
    return 0;
}

static int db_is_decimal(const char *s)
{
    if (!*s || strlen(s) > 18)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

int db_key_revoke(struct db *d, const char *what, char *err, size_t errlen)
{
    if (!what || !*what) {
        db_errf(err, errlen, "key revoke: give a key id or prefix");
        return -1;
    }
    if (db_is_decimal(what)) {
        int rc = db_key_update(d, "UPDATE api_keys SET revoked = ?1 WHERE id = ?2 AND revoked = 0",
                               NULL, strtoll(what, NULL, 10), err, errlen);
        return rc < 0 ? -1 : rc > 0;
    }
    /* The whole key, e.g. pasted from a leak report, names exactly one row. */
    if (strlen(what) == DB_KEY_LEN && strncmp(what, DB_KEY_TAG, sizeof(DB_KEY_TAG) - 1) == 0)
        return db_key_revoke_hash(d, what, err, errlen);
    return db_key_revoke_prefix(d, what, err, errlen);
}
