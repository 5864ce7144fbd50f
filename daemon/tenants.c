/*
 * daemon/tenants.c — API key lookup and per-tenant quotas, in memory.
 *
 * The table is a snapshot of the DB's tenants and keys plus live state that
 * belongs to each tenant's name: requests in flight and two token buckets.
 * A reload replaces the key list wholesale but merges tenants by name, so
 * a `tenant set` changes limits without forgetting what is in flight, and a
 * struct tn_tenant never moves or dies before tn_close.
 *
 * Keys are found by their SHA-256: a binary search over keys sorted by hash,
 * confirmed with CRYPTO_memcmp.  The search only reveals how a hash of the
 * caller's own input orders against stored hashes, which says nothing
 * usable about any stored key.
 */
#include "daemon/tenants.h"

#include <math.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A loaded key: enough to authenticate, nothing to display. */
struct tn_key {
    uint8_t hash[32];
    int64_t id, expires, revoked;
    struct tn_tenant *tenant;
};

struct tn_table {
    struct db *db;
    int64_t version;          /* db_data_version at the last load */
    int64_t config_version;   /* db_config_version at the last load */
    struct tn_tenant **items; /* each malloc'd once, kept until tn_close */
    int n, cap;
    struct tn_key *keys; /* sorted by hash */
    int n_keys;
};

/* Slack for floating-point refills: a bucket that is short by less than
 * this counts as full enough, so that waiting exactly retry_after works. */
#define TN_EPS 1e-9

static void tn_err(struct api_error *e, int status, const char *type, const char *code,
                   const char *param, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static void tn_err(struct api_error *e, int status, const char *type, const char *code,
                   const char *param, const char *fmt, ...)
{
    memset(e, 0, sizeof(*e));
    e->status = status;
    snprintf(e->type, sizeof(e->type), "%s", type);
    snprintf(e->code, sizeof(e->code), "%s", code);
    snprintf(e->param, sizeof(e->param), "%s", param);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
}

/* ---------------------------------------------------------------- buckets */

/* per_min 0 means no cap: capacity 0 marks the bucket as unlimited.  A
 * bucket that had no cap starts full; otherwise the level is clamped. */
static void tn_bucket_limit(struct tn_bucket *b, int per_min)
{
    double cap = per_min > 0 ? (double)per_min : 0.0;
    if (cap == b->capacity)
        return;
    if (b->capacity <= 0.0 || b->level > cap)
        b->level = cap;
    b->capacity = cap;
    b->rate = cap / 60.0;
}

/* Adds what accrued since the last refill.  t < 0: never used, starts full.
 * Time that runs backwards (it should not) is ignored, not charged. */
static void tn_bucket_refill(struct tn_bucket *b, double now)
{
    if (b->t < 0.0) {
        b->level = b->capacity;
        b->t = now;
        return;
    }
    if (now <= b->t)
        return;
    b->level += (now - b->t) * b->rate;
    if (b->level > b->capacity)
        b->level = b->capacity;
    b->t = now;
}

/* Whole seconds until the bucket holds need, at least 1. */
static double tn_bucket_wait(const struct tn_bucket *b, double need)
{
    double s = ceil((need - b->level) / b->rate - TN_EPS);
    return s < 1.0 ? 1.0 : s;
}

static int tn_bucket_has(const struct tn_bucket *b, double need)
{
    return b->capacity <= 0.0 || b->level + TN_EPS >= need;
}

/* ---------------------------------------------------------------- loading */

static struct tn_tenant *tn_find_name(struct tn_table *tt, const char *name)
{
    for (int i = 0; i < tt->n; i++)
        if (strcmp(tt->items[i]->cfg.name, name) == 0)
            return tt->items[i];
    return NULL;
}

static void tn_apply_cfg(struct tn_tenant *t, const struct db_tenant *cfg)
{
    t->cfg = *cfg;
    tn_bucket_limit(&t->req_bucket, cfg->rpm);
    tn_bucket_limit(&t->tok_bucket, cfg->tpm);
}

static struct tn_tenant *tn_add(struct tn_table *tt, const struct db_tenant *cfg)
{
    if (tt->n == tt->cap) {
        int cap = tt->cap ? tt->cap * 2 : 16;
        struct tn_tenant **items = realloc(tt->items, (size_t)cap * sizeof(*items));
        if (!items)
            return NULL;
        tt->items = items;
        tt->cap = cap;
    }
    struct tn_tenant *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->req_bucket.t = t->tok_bucket.t = -1.0;
    tn_apply_cfg(t, cfg);
    tt->items[tt->n++] = t;
    return t;
}

/* Merges freshly loaded tenants into the table: known names get the new
 * configuration, new names are added, names gone from the DB are disabled. */
static int tn_merge(struct tn_table *tt, const struct db_tenant *list, int n)
{
    char *seen = calloc((size_t)tt->n + 1, 1);
    if (!seen)
        return -1;
    int n_old = tt->n, rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        struct tn_tenant *t = tn_find_name(tt, list[i].name);
        if (t) {
            tn_apply_cfg(t, &list[i]);
            for (int j = 0; j < n_old; j++)
                if (tt->items[j] == t)
                    seen[j] = 1;
        } else if (!tn_add(tt, &list[i])) {
            rc = -1;
        }
    }
    for (int j = 0; j < n_old; j++)
        if (!seen[j])
            tt->items[j]->cfg.enabled = 0;
    free(seen);
    return rc;
}

static int tn_key_cmp(const void *a, const void *b)
{
    return memcmp(((const struct tn_key *)a)->hash, ((const struct tn_key *)b)->hash, 32);
}

/* Builds the sorted key array; keys of unknown tenants are left out. */
static int tn_build_keys(struct tn_table *tt, const struct db_key *list, int n, struct tn_key **out,
                         int *n_out)
{
    struct tn_key *keys = calloc((size_t)n + 1, sizeof(*keys));
    if (!keys)
        return -1;
    int k = 0;
    for (int i = 0; i < n; i++) {
        struct tn_tenant *t = tn_find_name(tt, list[i].tenant);
        if (!t)
            continue;
        memcpy(keys[k].hash, list[i].hash, 32);
        keys[k].id = list[i].id;
        keys[k].expires = list[i].expires;
        keys[k].revoked = list[i].revoked;
        keys[k].tenant = t;
        k++;
    }
    qsort(keys, (size_t)k, sizeof(*keys), tn_key_cmp);
    *out = keys;
    *n_out = k;
    return 0;
}

/* Reads tenants and keys and installs them.  Nothing changes on failure. */
static int tn_load(struct tn_table *tt, char *err, size_t errlen)
{
    int64_t version = db_data_version(tt->db);
    int64_t config_version = db_config_version(tt->db);
    struct db_tenant *tl = NULL;
    struct db_key *kl = NULL;
    int nt = 0, nk = 0, rc = -1;
    if (db_tenant_list(tt->db, &tl, &nt, err, errlen) != 0 ||
        db_key_list(tt->db, NULL, &kl, &nk, err, errlen) != 0)
        goto out;
    if (tn_merge(tt, tl, nt) != 0) {
        snprintf(err, errlen, "out of memory loading tenants");
        goto out;
    }
    struct tn_key *keys = NULL;
    int n_keys = 0;
    if (tn_build_keys(tt, kl, nk, &keys, &n_keys) != 0) {
        snprintf(err, errlen, "out of memory loading keys");
        goto out;
    }
    free(tt->keys);
    tt->keys = keys;
    tt->n_keys = n_keys;
    tt->version = version;
    tt->config_version = config_version;
    rc = 0;
out:
    free(tl);
    free(kl);
    return rc;
}

int tn_open(const char *db_path, struct tn_table **out, char *err, size_t errlen)
{
    *out = NULL;
    struct tn_table *tt = calloc(1, sizeof(*tt));
    if (!tt) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (db_open(db_path, 0, &tt->db, err, errlen) != 0 || tn_load(tt, err, errlen) != 0) {
        tn_close(tt);
        return -1;
    }
    *out = tt;
    return 0;
}

void tn_close(struct tn_table *tt)
{
    if (!tt)
        return;
    for (int i = 0; i < tt->n; i++)
        free(tt->items[i]);
    free(tt->items);
    free(tt->keys);
    if (tt->db)
        db_close(tt->db);
    free(tt);
}

int tn_refresh(struct tn_table *tt, char *err, size_t errlen)
{
    /* data_version moves with every commit by another connection, the
     * usage writer's included; only a change of tenants or keys (counted
     * by triggers in db_config_version) is worth a reload */
    int64_t v = db_data_version(tt->db);
    if (v == tt->version)
        return 0;
    if (db_config_version(tt->db) == tt->config_version) {
        tt->version = v;
        return 0;
    }
    return tn_load(tt, err, errlen) == 0 ? 1 : -1;
}

int tn_count(const struct tn_table *tt)
{
    return tt->n;
}

struct tn_tenant *tn_at(struct tn_table *tt, int i)
{
    return i >= 0 && i < tt->n ? tt->items[i] : NULL;
}

struct tn_tenant *tn_find(struct tn_table *tt, const char *name)
{
    return name ? tn_find_name(tt, name) : NULL;
}

/* ------------------------------------------------------------------- auth */

static int tn_is_space(char c)
{
    return c == ' ' || c == '\t';
}

/* Finds the key inside "Bearer KEY": 0 with *key and *len, -1 malformed. */
static int tn_bearer(const char *h, const char **key, size_t *len)
{
    while (tn_is_space(*h))
        h++;
    if (strncasecmp(h, "Bearer", 6) != 0 || !tn_is_space(h[6]))
        return -1;
    h += 6;
    while (tn_is_space(*h))
        h++;
    size_t n = strlen(h);
    while (n > 0 && tn_is_space(h[n - 1]))
        n--;
    if (n == 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (tn_is_space(h[i]))
            return -1;
    *key = h;
    *len = n;
    return 0;
}

static const struct tn_key *tn_key_find(const struct tn_table *tt, const uint8_t hash[32])
{
    struct tn_key probe = {0};
    memcpy(probe.hash, hash, 32);
    const struct tn_key *k =
        bsearch(&probe, tt->keys, (size_t)tt->n_keys, sizeof(*tt->keys), tn_key_cmp);
    if (k && CRYPTO_memcmp(k->hash, hash, 32) == 0)
        return k;
    return NULL;
}

static void tn_unauthorized(struct api_error *e, const char *why)
{
    tn_err(e, 401, "authentication_error", "invalid_api_key", "", "%s", why);
}

int tn_auth(struct tn_table *tt, const char *authorization, double now_unix, struct tn_tenant **t,
            int64_t *key_id, struct api_error *e)
{
    *t = NULL;
    *key_id = 0;
    const char *key;
    size_t len;
    if (!authorization || !*authorization) {
        tn_err(e, 401, "authentication_error", "missing_api_key", "",
               "You didn't provide an API key: send 'Authorization: Bearer KEY'.");
        return -1;
    }
    if (tn_bearer(authorization, &key, &len) != 0) {
        tn_unauthorized(e, "Malformed Authorization header: expected 'Bearer KEY'.");
        return -1;
    }
    uint8_t hash[32];
    db_key_hash(key, len, hash);
    const struct tn_key *k = len < DB_KEY_MAX ? tn_key_find(tt, hash) : NULL;
    if (!k) {
        tn_unauthorized(e, "Incorrect API key provided.");
        return -1;
    }
    if (k->revoked) {
        tn_unauthorized(e, "This API key has been revoked.");
        return -1;
    }
    if (k->expires && (double)k->expires <= now_unix) {
        tn_unauthorized(e, "This API key has expired.");
        return -1;
    }
    if (!k->tenant->cfg.enabled) {
        tn_err(e, 403, "permission_error", "tenant_disabled", "",
               "The tenant of this API key is disabled.");
        return -1;
    }
    *t = k->tenant;
    *key_id = k->id;
    return 0;
}

/* ----------------------------------------------------------------- quotas */

/* Refusals that waiting cannot cure: 400 before any 429. */
static int tn_check_size(const struct tn_tenant *t, int tokens, struct api_error *e)
{
    if (t->cfg.max_tokens > 0 && tokens > t->cfg.max_tokens) {
        tn_err(e, 400, "invalid_request_error", "max_tokens_exceeded", "max_tokens",
               "This request may use %d tokens (prompt + max_tokens); the limit is %d.", tokens,
               t->cfg.max_tokens);
        return -1;
    }
    if (t->tok_bucket.capacity > 0.0 && tokens > t->tok_bucket.capacity) {
        tn_err(e, 400, "invalid_request_error", "tokens_exceed_quota", "max_tokens",
               "This request may use %d tokens (prompt + max_tokens), more than the %d tokens "
               "per minute allowed: reduce max_tokens or the prompt.",
               tokens, t->cfg.tpm);
        return -1;
    }
    return 0;
}

/* Refusals that pass with time, each with the wait that cures it. */
static int tn_check_rate(struct tn_tenant *t, int tokens, double now, struct api_error *e)
{
    if (t->cfg.max_concurrent > 0 && t->in_flight >= t->cfg.max_concurrent) {
        tn_err(e, 429, "rate_limit_error", "concurrency_limit", "",
               "Too many requests in flight (limit %d).", t->cfg.max_concurrent);
        e->retry_after = 1.0;
        return -1;
    }
    tn_bucket_refill(&t->req_bucket, now);
    tn_bucket_refill(&t->tok_bucket, now);
    if (!tn_bucket_has(&t->req_bucket, 1.0)) {
        tn_err(e, 429, "rate_limit_error", "rate_limit_exceeded", "",
               "Rate limit reached for requests per minute (limit %d).", t->cfg.rpm);
        e->retry_after = tn_bucket_wait(&t->req_bucket, 1.0);
        return -1;
    }
    if (!tn_bucket_has(&t->tok_bucket, tokens)) {
        tn_err(e, 429, "rate_limit_error", "rate_limit_exceeded", "",
               "Rate limit reached for tokens per minute (limit %d, requested %d).", t->cfg.tpm,
               tokens);
        e->retry_after = tn_bucket_wait(&t->tok_bucket, tokens);
        return -1;
    }
    return 0;
}

int tn_admit(struct tn_table *tt, struct tn_tenant *t, int tokens, double now, struct api_error *e)
{
    (void)tt;
    if (tokens < 0)
        tokens = 0;
    if (tn_check_size(t, tokens, e) != 0 || tn_check_rate(t, tokens, now, e) != 0) {
        t->refused++;
        return -1;
    }
    if (t->req_bucket.capacity > 0.0)
        t->req_bucket.level -= 1.0;
    if (t->tok_bucket.capacity > 0.0)
        t->tok_bucket.level -= tokens;
    t->in_flight++;
    t->admitted++;
    return 0;
}

void tn_release(struct tn_table *tt, struct tn_tenant *t, int tokens, int used, double now)
{
    (void)tt;
    struct tn_bucket *b = &t->tok_bucket;
    if (b->capacity > 0.0 && used < tokens) {
        tn_bucket_refill(b, now);
        b->level += tokens - (used > 0 ? used : 0);
        if (b->level > b->capacity)
            b->level = b->capacity;
    }
    if (t->in_flight > 0)
        t->in_flight--;
}

int tn_priority(const struct tn_tenant *t, int asked, int *clamped)
{
    int ceiling = t->cfg.max_priority;
    *clamped = 0;
    if (asked < 0) {
        int p = t->cfg.default_priority;
        return p < ceiling ? ceiling : p > DB_PRIO_MAX ? DB_PRIO_MAX : p;
    }
    if (asked > DB_PRIO_MAX)
        return DB_PRIO_MAX;
    if (asked < ceiling) {
        *clamped = 1;
        return ceiling;
    }
    return asked;
}
