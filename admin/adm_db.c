/*
 * admin/adm_db.c — llmadmin's DB commands for tenants and keys: init,
 * tenant add|list|set|disable|enable, key create|list|revoke.
 *
 * They open the SQLite file directly (the daemon need not run) and change
 * it through db/db.h only, so the validation is the DB layer's and the
 * daemon sees each change at its next refresh.  A new key is printed once:
 * only its hash is stored.
 */
#include "admin/adm.h"
#include "db/db.h"

#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A subcommand of a command word with subcommands. */
struct adm_sub {
    const char *name;
    const char *usage;
    int (*run)(struct adm_ctx *c, int argc, char **argv);
};

static int adm_open(const struct adm_ctx *c, int create, struct db **d)
{
    char err[512];
    if (db_open(c->db_path, create, d, err, sizeof(err)) != 0) {
        if (!create)
            return adm_fail("%s (create it with 'llmadmin --db %s init')", err, c->db_path);
        return adm_fail("%s", err);
    }
    return ADM_OK;
}

/* Finds argv[1] among subs and runs it with argv[1..]. */
static int adm_dispatch(struct adm_ctx *c, int argc, char **argv, const struct adm_sub *subs, int n,
                        const char *usage)
{
    c->usage = usage;
    if (argc < 2)
        return adm_usage(c, "%s: missing subcommand", argv[0]);
    for (int i = 0; i < n; i++)
        if (strcmp(argv[1], subs[i].name) == 0) {
            c->usage = subs[i].usage;
            return subs[i].run(c, argc - 2, argv + 2);
        }
    return adm_usage(c, "%s: unknown subcommand '%s'", argv[0], argv[1]);
}

/* ------------------------------------------------------------------ init */

int adm_cmd_init(struct adm_ctx *c, int argc, char **argv)
{
    c->usage = "init";
    const char *pos[1];
    int n_pos;
    if (adm_parse(c, argc - 1, argv + 1, NULL, 0, pos, 0, 0, &n_pos) != ADM_OK)
        return ADM_USAGE;
    struct db *d;
    if (adm_open(c, 1, &d) != ADM_OK)
        return ADM_FAIL;
    int version = db_schema_version(d);
    db_close(d);
    if (c->json)
        return adm_print_json(json_pack("{s:s, s:i}", "db", c->db_path, "schema_version", version));
    printf("%s: initialised (schema version %d)\n", c->db_path, version);
    return ADM_OK;
}

/* --------------------------------------------------------------- tenants */

/* The options of tenant add and tenant set, one per configurable field. */
static const char *const adm_tenant_names[] = {"weight",         "priority",  "max-priority",
                                               "max-concurrent", "rpm",       "tpm",
                                               "max-kv-blocks",  "max-tokens"};
#define ADM_N_TENANT_OPTS 8

static void adm_tenant_opts(struct adm_opt *o)
{
    for (int i = 0; i < ADM_N_TENANT_OPTS; i++)
        o[i] = (struct adm_opt){adm_tenant_names[i], 1, NULL, 0};
}

static json_t *adm_tenant_json(const struct db_tenant *t)
{
    return json_pack("{s:I, s:s, s:b, s:f, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:o}", "id",
                     (json_int_t)t->id, "name", t->name, "enabled", t->enabled, "weight", t->weight,
                     "default_priority", t->default_priority, "max_priority", t->max_priority,
                     "max_concurrent", t->max_concurrent, "rpm", t->rpm, "tpm", t->tpm,
                     "max_kv_blocks", t->max_kv_blocks, "max_tokens", t->max_tokens, "created",
                     adm_json_time(t->created));
}

/* Sets an int field from option name when given; -1 after a usage error. */
static int adm_set_int(const struct adm_ctx *c, struct adm_opt *opts, const char *name, long hi,
                       int *field)
{
    struct adm_opt *o = adm_opt(opts, ADM_N_TENANT_OPTS, name);
    long v;
    if (!o->set)
        return 0;
    if (adm_int(o->val, 0, hi, &v) != 0) {
        adm_usage(c, "--%s: expected a whole number 0..%ld, got '%s'", name, hi, o->val);
        return -1;
    }
    *field = (int)v;
    return 0;
}

/* Applies the tenant options given to t.  ADM_OK or ADM_USAGE. */
static int adm_tenant_apply(const struct adm_ctx *c, struct adm_opt *opts, struct db_tenant *t)
{
    struct adm_opt *w = adm_opt(opts, ADM_N_TENANT_OPTS, "weight");
    if (w->set && adm_double(w->val, 0.0, 1e6, &t->weight) != 0)
        return adm_usage(c, "--weight: expected a number > 0, got '%s'", w->val);
    if (adm_set_int(c, opts, "priority", DB_PRIO_MAX, &t->default_priority) ||
        adm_set_int(c, opts, "max-priority", DB_PRIO_MAX, &t->max_priority) ||
        adm_set_int(c, opts, "max-concurrent", 1000000000, &t->max_concurrent) ||
        adm_set_int(c, opts, "rpm", 1000000000, &t->rpm) ||
        adm_set_int(c, opts, "tpm", 1000000000, &t->tpm) ||
        adm_set_int(c, opts, "max-kv-blocks", 1000000000, &t->max_kv_blocks) ||
        adm_set_int(c, opts, "max-tokens", 1000000000, &t->max_tokens))
        return ADM_USAGE;
    return ADM_OK;
}

static int adm_tenant_done(const struct adm_ctx *c, const struct db_tenant *t, const char *verb)
{
    if (c->json)
        return adm_print_json(adm_tenant_json(t));
    printf("tenant %s %s\n", t->name, verb);
    return ADM_OK;
}

static int adm_tenant_add(struct adm_ctx *c, int argc, char **argv)
{
    struct adm_opt opts[ADM_N_TENANT_OPTS];
    adm_tenant_opts(opts);
    const char *pos[1];
    int n_pos;
    if (adm_parse(c, argc, argv, opts, ADM_N_TENANT_OPTS, pos, 1, 1, &n_pos) != ADM_OK)
        return ADM_USAGE;
    struct db_tenant t;
    db_tenant_defaults(&t);
    if (strlen(pos[0]) >= sizeof(t.name))
        return adm_fail("tenant name '%s' is too long (at most %d characters)", pos[0],
                        DB_NAME_MAX - 1);
    snprintf(t.name, sizeof(t.name), "%s", pos[0]);
    if (adm_tenant_apply(c, opts, &t) != ADM_OK)
        return ADM_USAGE;
    struct db *d;
    char err[512];
    if (adm_open(c, 0, &d) != ADM_OK)
        return ADM_FAIL;
    int rc = db_tenant_add(d, &t, err, sizeof(err));
    db_close(d);
    if (rc != 0)
        return adm_fail("%s", err);
    return adm_tenant_done(c, &t, "added");
}

/* Loads tenant name into *t; ADM_OK, or ADM_FAIL after saying why. */
static int adm_tenant_load(struct db *d, const char *name, struct db_tenant *t)
{
    char err[512];
    int rc = db_tenant_get(d, name, t, err, sizeof(err));
    if (rc < 0)
        return adm_fail("%s", err);
    if (rc == 0)
        return adm_fail("no tenant '%s'", name);
    return ADM_OK;
}

/* set, disable and enable: load, change, store. */
static int adm_tenant_change(struct adm_ctx *c, const char *name, struct adm_opt *opts, int enabled,
                             const char *verb)
{
    struct db *d;
    struct db_tenant t;
    char err[512];
    if (adm_open(c, 0, &d) != ADM_OK)
        return ADM_FAIL;
    int rc = adm_tenant_load(d, name, &t);
    if (rc == ADM_OK && opts)
        rc = adm_tenant_apply(c, opts, &t);
    if (rc == ADM_OK && enabled >= 0)
        t.enabled = enabled;
    if (rc == ADM_OK && db_tenant_update(d, &t, err, sizeof(err)) != 0)
        rc = adm_fail("%s", err);
    db_close(d);
    return rc == ADM_OK ? adm_tenant_done(c, &t, verb) : rc;
}

static int adm_tenant_set(struct adm_ctx *c, int argc, char **argv)
{
    struct adm_opt opts[ADM_N_TENANT_OPTS];
    adm_tenant_opts(opts);
    const char *pos[1];
    int n_pos, any = 0;
    if (adm_parse(c, argc, argv, opts, ADM_N_TENANT_OPTS, pos, 1, 1, &n_pos) != ADM_OK)
        return ADM_USAGE;
    for (int i = 0; i < ADM_N_TENANT_OPTS; i++)
        any |= opts[i].set;
    if (!any)
        return adm_usage(c, "tenant set: nothing to change");
    /* check values before touching the DB, so a typo never half-applies */
    struct db_tenant scratch;
    db_tenant_defaults(&scratch);
    if (adm_tenant_apply(c, opts, &scratch) != ADM_OK)
        return ADM_USAGE;
    return adm_tenant_change(c, pos[0], opts, -1, "updated");
}

static int adm_tenant_enable(struct adm_ctx *c, int argc, char **argv, int enabled)
{
    const char *pos[1];
    int n_pos;
    if (adm_parse(c, argc, argv, NULL, 0, pos, 1, 1, &n_pos) != ADM_OK)
        return ADM_USAGE;
    return adm_tenant_change(c, pos[0], NULL, enabled, enabled ? "enabled" : "disabled");
}

static int adm_tenant_disable_cmd(struct adm_ctx *c, int argc, char **argv)
{
    return adm_tenant_enable(c, argc, argv, 0);
}

static int adm_tenant_enable_cmd(struct adm_ctx *c, int argc, char **argv)
{
    return adm_tenant_enable(c, argc, argv, 1);
}

static int adm_tenant_print(const struct db_tenant *ts, int n)
{
    struct adm_table *tb =
        adm_table_new("llrrrrrrrrl", "NAME", "STATE", "WEIGHT", "PRIORITY", "MAX-PRIO",
                      "CONCURRENT", "RPM", "TPM", "KV-BLOCKS", "MAX-TOKENS", "CREATED");
    for (int i = 0; i < n; i++) {
        const struct db_tenant *t = &ts[i];
        char w[32], p[8], mp[8], cc[24], rpm[24], tpm[24], kv[24], mt[24], cr[32];
        snprintf(w, sizeof(w), "%g", t->weight);
        snprintf(p, sizeof(p), "%d", t->default_priority);
        snprintf(mp, sizeof(mp), "%d", t->max_priority);
        adm_table_add(tb, t->name, t->enabled ? "enabled" : "disabled", w, p, mp,
                      adm_fmt_cap(t->max_concurrent, cc, sizeof(cc)),
                      adm_fmt_cap(t->rpm, rpm, sizeof(rpm)), adm_fmt_cap(t->tpm, tpm, sizeof(tpm)),
                      adm_fmt_cap(t->max_kv_blocks, kv, sizeof(kv)),
                      adm_fmt_cap(t->max_tokens, mt, sizeof(mt)),
                      adm_fmt_time(t->created, 1, cr, sizeof(cr)));
    }
    return adm_table_print(tb, stdout);
}

static int adm_tenant_list(struct adm_ctx *c, int argc, char **argv)
{
    const char *pos[1];
    int n_pos, n = 0;
    if (adm_parse(c, argc, argv, NULL, 0, pos, 0, 0, &n_pos) != ADM_OK)
        return ADM_USAGE;
    struct db *d;
    struct db_tenant *ts = NULL;
    char err[512];
    if (adm_open(c, 0, &d) != ADM_OK)
        return ADM_FAIL;
    int rc = db_tenant_list(d, &ts, &n, err, sizeof(err));
    db_close(d);
    if (rc != 0)
        return adm_fail("%s", err);
    if (c->json) {
        json_t *a = json_array();
        for (int i = 0; a && i < n; i++)
            if (json_array_append_new(a, adm_tenant_json(&ts[i])) != 0)
                json_decref(a), a = NULL;
        rc = adm_print_json(a);
    } else {
        rc = adm_tenant_print(ts, n);
    }
    free(ts);
    return rc;
}

static const struct adm_sub adm_tenant_subs[] = {
    {"add",
     "tenant add NAME [--weight W] [--priority P] [--max-priority P] "
     "[--max-concurrent N] [--rpm N] [--tpm N] [--max-kv-blocks N] [--max-tokens N]",
     adm_tenant_add},
    {"list", "tenant list", adm_tenant_list},
    {"set",
     "tenant set NAME [--weight W] [--priority P] [--max-priority P] "
     "[--max-concurrent N] [--rpm N] [--tpm N] [--max-kv-blocks N] [--max-tokens N]",
     adm_tenant_set},
    {"disable", "tenant disable NAME", adm_tenant_disable_cmd},
    {"enable", "tenant enable NAME", adm_tenant_enable_cmd},
};

int adm_cmd_tenant(struct adm_ctx *c, int argc, char **argv)
{
    return adm_dispatch(c, argc, argv, adm_tenant_subs,
                        (int)(sizeof(adm_tenant_subs) / sizeof(*adm_tenant_subs)),
                        "tenant add|list|set|disable|enable ...");
}

/* ------------------------------------------------------------------ keys */

static const char *adm_key_status(const struct db_key *k, int64_t now)
{
    if (k->revoked)
        return "revoked";
    if (k->expires && k->expires <= now)
        return "expired";
    return "active";
}

static json_t *adm_key_json(const struct db_key *k, int64_t now)
{
    return json_pack("{s:I, s:s, s:s, s:s, s:o, s:o, s:o, s:s}", "id", (json_int_t)k->id, "tenant",
                     k->tenant, "name", k->name, "prefix", k->prefix, "created",
                     adm_json_time(k->created), "expires", adm_json_time(k->expires), "revoked",
                     adm_json_time(k->revoked), "status", adm_key_status(k, now));
}

static int adm_key_create_out(const struct adm_ctx *c, const char *key, const struct db_key *k)
{
    if (c->json)
        return adm_print_json(json_pack("{s:s, s:I, s:s, s:s, s:s, s:o}", "key", key, "id",
                                        (json_int_t)k->id, "prefix", k->prefix, "tenant", k->tenant,
                                        "name", k->name, "expires", adm_json_time(k->expires)));
    /* stdout gets the key alone, so that KEY=$(llmadmin key create T) works */
    printf("%s\n", key);
    fflush(stdout);
    fprintf(stderr,
            "llmadmin: key %lld (prefix %s) created for tenant %s; store it now: it cannot be "
            "shown again\n",
            (long long)k->id, k->prefix, k->tenant);
    return ADM_OK;
}

static int adm_key_create(struct adm_ctx *c, int argc, char **argv)
{
    struct adm_opt opts[] = {{"name", 1, NULL, 0}, {"expires", 1, NULL, 0}};
    const char *pos[1];
    int n_pos;
    if (adm_parse(c, argc, argv, opts, 2, pos, 1, 1, &n_pos) != ADM_OK)
        return ADM_USAGE;
    int64_t now = (int64_t)time(NULL), expires = 0;
    if (opts[1].set && adm_time(opts[1].val, 1, now, &expires) != 0)
        return adm_usage(c, "--expires: expected YYYY-MM-DD or +Nd, got '%s'", opts[1].val);
    if (opts[1].set && expires <= now)
        return adm_usage(c, "--expires: %s is not in the future", opts[1].val);
    const char *label = opts[0].set ? opts[0].val : "";
    if (strlen(label) >= DB_NAME_MAX)
        return adm_usage(c, "--name: at most %d characters", DB_NAME_MAX - 1);
    struct db *d;
    struct db_key k;
    char key[DB_KEY_MAX], err[512];
    if (adm_open(c, 0, &d) != ADM_OK)
        return ADM_FAIL;
    int rc = db_key_create(d, pos[0], label, expires, key, sizeof(key), &k, err, sizeof(err));
    db_close(d);
    if (rc != 0)
        return adm_fail("%s", err);
    rc = adm_key_create_out(c, key, &k);
    OPENSSL_cleanse(key, sizeof(key));
    return rc;
}

static int adm_key_print(const struct db_key *ks, int n, int64_t now)
{
    struct adm_table *tb =
        adm_table_new("rllllll", "ID", "TENANT", "NAME", "PREFIX", "CREATED", "EXPIRES", "STATUS");
    for (int i = 0; i < n; i++) {
        const struct db_key *k = &ks[i];
        char id[24], cr[32], ex[32];
        snprintf(id, sizeof(id), "%lld", (long long)k->id);
        adm_table_add(tb, id, k->tenant, k->name[0] ? k->name : "-", k->prefix,
                      adm_fmt_time(k->created, 1, cr, sizeof(cr)),
                      k->expires ? adm_fmt_time(k->expires, 1, ex, sizeof(ex)) : "never",
                      adm_key_status(k, now));
    }
    return adm_table_print(tb, stdout);
}

static int adm_key_list(struct adm_ctx *c, int argc, char **argv)
{
    struct adm_opt opts[] = {{"tenant", 1, NULL, 0}};
    const char *pos[1];
    int n_pos, n = 0;
    if (adm_parse(c, argc, argv, opts, 1, pos, 0, 0, &n_pos) != ADM_OK)
        return ADM_USAGE;
    struct db *d;
    struct db_key *ks = NULL;
    char err[512];
    if (adm_open(c, 0, &d) != ADM_OK)
        return ADM_FAIL;
    int rc = db_key_list(d, opts[0].set ? opts[0].val : NULL, &ks, &n, err, sizeof(err));
    db_close(d);
    if (rc != 0)
        return adm_fail("%s", err);
    int64_t now = (int64_t)time(NULL);
    if (c->json) {
        json_t *a = json_array();
        for (int i = 0; a && i < n; i++)
            if (json_array_append_new(a, adm_key_json(&ks[i], now)) != 0)
                json_decref(a), a = NULL;
        rc = adm_print_json(a);
    } else {
        rc = adm_key_print(ks, n, now);
    }
    free(ks);
    return rc;
}

/* Whether k is the key that "key revoke what" named: its id, its whole key
 * (by hash) or its display prefix. */
static int adm_key_named(const struct db_key *k, const char *what)
{
    char id[24];
    snprintf(id, sizeof(id), "%lld", (long long)k->id);
    if (strcmp(id, what) == 0 || strcmp(k->prefix, what) == 0)
        return 1;
    uint8_t h[32];
    db_key_hash(what, strlen(what), h);
    return memcmp(h, k->hash, sizeof(h)) == 0;
}

/* After a revoke: the revoked key that what names (the latest revoked). */
static int adm_key_revoked(struct db *d, const char *what, struct db_key *out)
{
    struct db_key *ks = NULL;
    int n = 0, found = 0;
    char err[512];
    if (db_key_list(d, NULL, &ks, &n, err, sizeof(err)) != 0)
        return 0;
    for (int i = 0; i < n; i++)
        if (ks[i].revoked && adm_key_named(&ks[i], what) &&
            (!found || ks[i].revoked >= out->revoked)) {
            *out = ks[i];
            found = 1;
        }
    free(ks);
    return found;
}

static int adm_key_revoke(struct adm_ctx *c, int argc, char **argv)
{
    const char *pos[1];
    int n_pos;
    if (adm_parse(c, argc, argv, NULL, 0, pos, 1, 1, &n_pos) != ADM_OK)
        return ADM_USAGE;
    struct db *d;
    struct db_key k;
    char err[512];
    if (adm_open(c, 0, &d) != ADM_OK)
        return ADM_FAIL;
    int rc = db_key_revoke(d, pos[0], err, sizeof(err));
    int found = rc == 1 && adm_key_revoked(d, pos[0], &k);
    db_close(d);
    if (rc < 0)
        return adm_fail("%s", err);
    if (rc == 0)
        return adm_fail("no active key with id or prefix '%s'", pos[0]);
    if (c->json)
        return adm_print_json(found ? adm_key_json(&k, (int64_t)time(NULL))
                                    : json_pack("{s:s, s:s}", "key", pos[0], "status", "revoked"));
    if (found)
        printf("key %lld (prefix %s, tenant %s) revoked\n", (long long)k.id, k.prefix, k.tenant);
    else
        printf("key %s revoked\n", pos[0]);
    return ADM_OK;
}

static const struct adm_sub adm_key_subs[] = {
    {"create", "key create TENANT [--name LABEL] [--expires YYYY-MM-DD|+Nd]", adm_key_create},
    {"list", "key list [--tenant NAME]", adm_key_list},
    {"revoke", "key revoke ID|PREFIX", adm_key_revoke},
};

int adm_cmd_key(struct adm_ctx *c, int argc, char **argv)
{
    return adm_dispatch(c, argc, argv, adm_key_subs,
                        (int)(sizeof(adm_key_subs) / sizeof(*adm_key_subs)),
                        "key create|list|revoke ...");
}
