/*
 * daemon/tenants.h — who may call, and how much: API key lookup and the
 * per-tenant quotas, in memory.
 *
 * The table is loaded from the DB and reloaded when the DB changes (checked
 * with PRAGMA data_version by tn_refresh, a cheap call made from a timer),
 * so `llmadmin key revoke` or `tenant set` take effect within a second.
 * Live state — requests in flight, token buckets — belongs to the tenant's
 * name and survives reloads; a struct tn_tenant stays valid until
 * tn_close, even when the tenant is deleted from the DB (it is then
 * disabled).  Used on the I/O thread only.
 */
#ifndef LLMD_DAEMON_TENANTS_H
#define LLMD_DAEMON_TENANTS_H

#include "daemon/api.h"
#include "db/db.h"

struct tn_table;

/* A token bucket: capacity tokens, refilled at rate per second. */
struct tn_bucket {
    double level, capacity, rate, t; /* t: last refill (monotonic seconds) */
};

struct tn_tenant {
    struct db_tenant cfg; /* as last loaded */
    int in_flight;        /* admitted, not yet released */
    struct tn_bucket req_bucket, tok_bucket;
    long admitted, refused;
};

/* Opens the DB read connection and loads the table.  -1 with a message. */
int tn_open(const char *db_path, struct tn_table **out, char *err, size_t errlen);
void tn_close(struct tn_table *tt);
/* Reloads when the DB changed since the last load: 1 reloaded, 0 unchanged, -1 error
 * (the previous table stays in force). */
int tn_refresh(struct tn_table *tt, char *err, size_t errlen);
/* Tenants, for pushing policies to the engine after a reload. */
int tn_count(const struct tn_table *tt);
struct tn_tenant *tn_at(struct tn_table *tt, int i);
struct tn_tenant *tn_find(struct tn_table *tt, const char *name);

/* Authenticates the value of an Authorization header ("Bearer KEY"; the
 * scheme in any case, spaces around the key ignored; NULL: no header).
 * 0 with *t and *key_id set; -1 with e filled: 401 authentication_error,
 * code missing_api_key (no header) or invalid_api_key (malformed, unknown,
 * revoked or expired key: the message says which), or 403 permission_error
 * code tenant_disabled.  Keys are compared by hash, in constant time. */
int tn_auth(struct tn_table *tt, const char *authorization, double now_unix, struct tn_tenant **t,
            int64_t *key_id, struct api_error *e);

/* Admits one request of tenant t that may use up to tokens tokens (prompt +
 * max completion): checks max_tokens, the concurrency cap and both token
 * buckets, then takes them.  0 admitted; -1 with e filled (400 with param
 * max_tokens when tokens exceed max_tokens or the tpm, which no wait could
 * cure; else 429 code concurrency_limit or rate_limit_exceeded, with
 * retry_after the whole seconds after which it would pass).  Nothing is
 * taken from a refused request.  now: monotonic s. */
int tn_admit(struct tn_table *tt, struct tn_tenant *t, int tokens, double now, struct api_error *e);
/* The request ended having used used tokens of the tokens it was admitted
 * with: the difference goes back to the bucket; the slot is freed. */
void tn_release(struct tn_table *tt, struct tn_tenant *t, int tokens, int used, double now);
/* The priority a request runs at: asked (< 0: the tenant's default) raised
 * to the tenant's ceiling.  *clamped = 1 when the request asked for more. */
int tn_priority(const struct tn_tenant *t, int asked, int *clamped);

#endif
