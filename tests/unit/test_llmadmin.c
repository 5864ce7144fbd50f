/*
 * tests/unit/test_llmadmin.c — llmadmin's DB commands, run as the real
 * binary ($LLMD_BIN_DIR/llmadmin) on a throwaway DB: exit statuses 0/1/2
 * and their messages, JSON fields, human tables, global options anywhere
 * on the line, and agreement with what db/db.h reads and writes — a key
 * printed is the key stored, a revoked key shows revoked, ledger rows
 * inserted with db_usage_insert show in `usage`.
 */
#include "db/db.h"

#include "tests/unit/util_run.h"

#include <check.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct fx {
    char dir[64], path[96], bin[512];
};

/* One run: exit status, and stdout and stderr in full (malloc'd). */
static void fx_init(struct fx *f)
{
    const char *bd = getenv("LLMD_BIN_DIR");
    snprintf(f->bin, sizeof(f->bin), "%s/llmadmin", bd && *bd ? bd : "build/bin");
    ck_assert_msg(access(f->bin, X_OK) == 0, "no llmadmin at %s", f->bin);
    snprintf(f->dir, sizeof(f->dir), "/tmp/test_llmadmin.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/llmd.db", f->dir);
}

static void fx_free(struct fx *f)
{
    const char *names[] = {"llmd.db", "llmd.db-wal", "llmd.db-shm", "out", "err"};
    char p[160];
    for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
        snprintf(p, sizeof(p), "%s/%s", f->dir, names[i]);
        unlink(p);
    }
    rmdir(f->dir);
}

/* Runs llmadmin with args (NULL-terminated) and LLMD_DB = env_db (NULL:
 * unset).  No --db is added: the caller passes it where it wants. */
static void run_env(struct fx *f, const char *env_db, struct ur_run *r, const char *const *args)
{
    ur_exec(f->bin, f->dir, "LLMD_DB", env_db, 0, r, args);
}

#define RUN(f, r, ...) run_env((f), NULL, (r), (const char *const[]){__VA_ARGS__, NULL})
/* With --db first, as scripts usually write it. */
#define ADM(f, r, ...) RUN((f), (r), "--db", (f)->path, __VA_ARGS__)

/* Runs, expects exit 0, and returns stdout parsed as JSON (caller owns). */
static json_t *run_json(struct fx *f, const char *const *args)
{
    struct ur_run r;
    run_env(f, NULL, &r, args);
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    ck_assert_msg(j != NULL, "not JSON (%s): %s", je.text, r.out);
    ur_free(&r);
    return j;
}

#define JSON(f, ...)                                                                               \
    run_json((f), (const char *const[]){"--db", (f)->path, "--json", __VA_ARGS__, NULL})

static void assert_fails(const struct ur_run *r, int rc, const char *words)
{
    ck_assert_msg(r->rc == rc, "exit %d, want %d; stderr: %s", r->rc, rc, r->err);
    ck_assert_msg(strncmp(r->err, "llmadmin: ", 10) == 0, "stderr: %s", r->err);
    ck_assert_msg(strstr(r->err, words), "stderr lacks '%s': %s", words, r->err);
    if (rc == 2)
        ck_assert_msg(strstr(r->err, "\nusage: llmadmin "), "no usage line: %s", r->err);
    ck_assert_str_eq(r->out, "");
}

static void init_db(struct fx *f)
{
    struct ur_run r;
    ADM(f, &r, "init");
    ck_assert_msg(r.rc == 0, "init: %s", r.err);
    ur_free(&r);
}

static struct db *open_db(struct fx *f)
{
    struct db *d;
    char err[256];
    ck_assert_msg(db_open(f->path, 0, &d, err, sizeof(err)) == 0, "%s", err);
    return d;
}

static const char *jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    ck_assert_msg(s != NULL, "no string field %s", k);
    return s;
}

static long long jint(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    ck_assert_msg(json_is_integer(v), "no integer field %s", k);
    return json_integer_value(v);
}

/* ------------------------------------------------------------- basics */

START_TEST(version_and_help_print_to_stdout_and_exit_0)
{
    struct fx f = {0};
    fx_init(&f);
    struct ur_run r;
    RUN(&f, &r, "--version");
    ck_assert_int_eq(r.rc, 0);
    ck_assert_str_eq(r.out, "llmadmin " LLMD_VERSION "\n");
    ur_free(&r);
    RUN(&f, &r, "--help");
    ck_assert_int_eq(r.rc, 0);
    const char *words[] = {"init",
                           "tenant add NAME",
                           "key create TENANT",
                           "key revoke ID|PREFIX",
                           "usage [--tenant NAME]",
                           "--db PATH",
                           "--json"};
    for (size_t i = 0; i < sizeof(words) / sizeof(*words); i++)
        ck_assert_msg(strstr(r.out, words[i]), "help lacks '%s'", words[i]);
    ur_free(&r);
    RUN(&f, &r, "tenant", "add", "--help");
    ck_assert_int_eq(r.rc, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "tenant add NAME"));
    ur_free(&r);
    fx_free(&f);
}
END_TEST

START_TEST(usage_errors_exit_2_with_a_usage_line)
{
    struct fx f = {0};
    fx_init(&f);
    init_db(&f);
    struct ur_run r;
    RUN(&f, &r, "--db", f.path, "--json");
    assert_fails(&r, 2, "missing command");
    ur_free(&r);
    ADM(&f, &r, "frobnicate");
    assert_fails(&r, 2, "unknown command 'frobnicate'");
    ur_free(&r);
    ADM(&f, &r, "tenant");
    assert_fails(&r, 2, "missing subcommand");
    ur_free(&r);
    ADM(&f, &r, "tenant", "list", "--frob");
    assert_fails(&r, 2, "unknown option '--frob'");
    ur_free(&r);
    ADM(&f, &r, "tenant", "add", "alpha", "--rpm", "sixty");
    assert_fails(&r, 2, "--rpm");
    ur_free(&r);
    ADM(&f, &r, "tenant", "add", "alpha", "--max-priority", "8");
    assert_fails(&r, 2, "--max-priority");
    ur_free(&r);
    ADM(&f, &r, "tenant", "add", "alpha", "--weight", "0");
    assert_fails(&r, 2, "--weight");
    ur_free(&r);
    ADM(&f, &r, "tenant", "add", "alpha", "--tpm");
    assert_fails(&r, 2, "needs a value");
    ur_free(&r);
    ADM(&f, &r, "tenant", "set", "alpha");
    assert_fails(&r, 2, "nothing to change");
    ur_free(&r);
    RUN(&f, &r, "tenant", "list", "--db");
    assert_fails(&r, 2, "'--db' needs a value");
    ur_free(&r);
    ADM(&f, &r, "key", "revoke");
    assert_fails(&r, 2, "missing");
    ur_free(&r);
    ADM(&f, &r, "usage", "--rows", "-3");
    assert_fails(&r, 2, "--rows");
    ur_free(&r);
    /* nothing of the above reached the DB */
    json_t *j = JSON(&f, "tenant", "list");
    ck_assert_int_eq(json_array_size(j), 0);
    json_decref(j);
    fx_free(&f);
}
END_TEST

START_TEST(init_is_idempotent_and_other_commands_need_it)
{
    struct fx f = {0};
    fx_init(&f);
    struct ur_run r;
    ADM(&f, &r, "tenant", "list");
    assert_fails(&r, 1, "init");
    ur_free(&r);
    ck_assert_int_ne(access(f.path, F_OK), 0);
    json_t *j = JSON(&f, "init");
    struct db *d = open_db(&f);
    ck_assert_int_eq(jint(j, "schema_version"), db_schema_version(d));
    ck_assert_str_eq(jstr(j, "db"), f.path);
    json_decref(j);
    db_close(d);
    ADM(&f, &r, "tenant", "add", "alpha");
    ck_assert_int_eq(r.rc, 0);
    ur_free(&r);
    ADM(&f, &r, "init");
    ck_assert_int_eq(r.rc, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "initialised"));
    ur_free(&r);
    /* init again kept what was there */
    j = JSON(&f, "tenant", "list");
    ck_assert_int_eq(json_array_size(j), 1);
    json_decref(j);
    fx_free(&f);
}
END_TEST

START_TEST(global_options_work_anywhere_and_db_comes_from_env_then_flag)
{
    struct fx f = {0};
    fx_init(&f);
    init_db(&f);
    struct ur_run r;
    RUN(&f, &r, "tenant", "add", "alpha", "--db", f.path, "--json", "--rpm", "7");
    ck_assert_msg(r.rc == 0, "%s", r.err);
    json_t *j = json_loads(r.out, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(jint(j, "rpm"), 7);
    json_decref(j);
    ur_free(&r);
    run_env(&f, f.path, &r, (const char *const[]){"tenant", "list", NULL});
    ck_assert_msg(r.rc == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "alpha"));
    ur_free(&r);
    /* --db wins over LLMD_DB */
    run_env(&f, "/nonexistent/llmd.db", &r, (const char *const[]){"tenant", "list", "--db=", NULL});
    ck_assert_int_eq(r.rc, 2);
    ur_free(&r);
    char opt[160];
    snprintf(opt, sizeof(opt), "--db=%s", f.path);
    run_env(&f, "/nonexistent/llmd.db", &r, (const char *const[]){"tenant", "list", opt, NULL});
    ck_assert_msg(r.rc == 0, "%s", r.err);
    ur_free(&r);
    run_env(&f, "/nonexistent/llmd.db", &r, (const char *const[]){"tenant", "list", NULL});
    assert_fails(&r, 1, "/nonexistent/llmd.db");
    ur_free(&r);
    fx_free(&f);
}
END_TEST

/* ------------------------------------------------------------- tenants */

START_TEST(tenant_add_and_set_store_every_field)
{
    struct fx f = {0};
    fx_init(&f);
    init_db(&f);
    json_t *j = JSON(&f, "tenant", "add", "alpha", "--weight", "2.5", "--priority", "5",
                     "--max-priority", "1", "--max-concurrent", "3", "--rpm", "60", "--tpm", "9000",
                     "--max-kv-blocks", "128", "--max-tokens", "4096");
    ck_assert_str_eq(jstr(j, "name"), "alpha");
    ck_assert(json_is_true(json_object_get(j, "enabled")));
    json_decref(j);
    struct db *d = open_db(&f);
    struct db_tenant t;
    char err[256];
    ck_assert_int_eq(db_tenant_get(d, "alpha", &t, err, sizeof(err)), 1);
    ck_assert_double_eq(t.weight, 2.5);
    ck_assert_int_eq(t.default_priority, 5);
    ck_assert_int_eq(t.max_priority, 1);
    ck_assert_int_eq(t.max_concurrent, 3);
    ck_assert_int_eq(t.rpm, 60);
    ck_assert_int_eq(t.tpm, 9000);
    ck_assert_int_eq(t.max_kv_blocks, 128);
    ck_assert_int_eq(t.max_tokens, 4096);
    /* set changes what it names and nothing else */
    j = JSON(&f, "tenant", "set", "alpha", "--rpm", "0", "--weight=0.5");
    ck_assert_int_eq(jint(j, "rpm"), 0);
    ck_assert_int_eq(jint(j, "tpm"), 9000);
    json_decref(j);
    ck_assert_int_eq(db_tenant_get(d, "alpha", &t, err, sizeof(err)), 1);
    ck_assert_int_eq(t.rpm, 0);
    ck_assert_double_eq(t.weight, 0.5);
    ck_assert_int_eq(t.tpm, 9000);
    ck_assert_int_eq(t.max_priority, 1);
    db_close(d);
    fx_free(&f);
}
END_TEST

START_TEST(tenant_list_prints_an_aligned_table_and_json)
{
    struct fx f = {0};
    fx_init(&f);
    init_db(&f);
    struct ur_run r;
    ADM(&f, &r, "tenant", "add", "a-rather-long-name", "--rpm", "12345");
    ck_assert_int_eq(r.rc, 0);
    ur_free(&r);
    ADM(&f, &r, "tenant", "add", "b");
    ck_assert_int_eq(r.rc, 0);
    ur_free(&r);
    ADM(&f, &r, "tenant", "list");
    ck_assert_int_eq(r.rc, 0);
    char *l1 = r.out, *l2 = strchr(l1, '\n') + 1, *l3 = strchr(l2, '\n') + 1;
    ck_assert(strncmp(l1, "NAME ", 5) == 0);
    ck_assert(strncmp(l2, "a-rather-long-name  enabled", 27) == 0);
    ck_assert(strncmp(l3, "b ", 2) == 0);
    /* the right-aligned RPM column ends at the same place on every line */
    size_t end = (size_t)(strstr(l1, "RPM") - l1) + 3;
    ck_assert(strncmp(l2 + end - 5, "12345", 5) == 0);
    ck_assert(l3[end - 1] == '-' && l3[end] == ' ');
    ur_free(&r);
    json_t *j = JSON(&f, "tenant", "list");
    ck_assert_int_eq(json_array_size(j), 2);
    json_t *b = json_array_get(j, 1);
    ck_assert_str_eq(jstr(b, "name"), "b");
    const char *keys[] = {"id",  "weight", "default_priority", "max_priority", "max_concurrent",
                          "rpm", "tpm",    "max_kv_blocks",    "max_tokens",   "created"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++)
        ck_assert_msg(json_object_get(b, keys[i]), "no field %s", keys[i]);
    json_decref(j);
    fx_free(&f);
}
END_TEST

START_TEST(tenant_refusals_exit_1_with_the_reason)
{
    struct fx f = {0};
    fx_init(&f);
    init_db(&f);
    struct ur_run r;
    ADM(&f, &r, "tenant", "add", "alpha");
    ck_assert_int_eq(r.rc, 0);
    ur_free(&r);
    ADM(&f, &r, "tenant", "add", "alpha");
    assert_fails(&r, 1, "already exists");
    ur_free(&r);
    ADM(&f, &r, "tenant", "add", "bad name!");
    assert_fails(&r, 1, "name");
    ur_free(&r);
    ADM(&f, &r, "tenant", "set", "ghost", "--rpm", "1");
    assert_fails(&r, 1, "no tenant 'ghost'");
    ur_free(&r);
    ADM(&f, &r, "tenant", "disable", "ghost");
    assert_fails(&r, 1, "ghost");
    ur_free(&r);
    fx_free(&f);
}
END_TEST

START_TEST(tenant_disable_and_enable_reach_the_db)
{
    struct fx f = {0};
    fx_init(&f);
    init_db(&f);
    struct ur_run r;
    ADM(&f, &r, "tenant", "add", "alpha");
    ur_free(&r);
    json_t *j = JSON(&f, "tenant", "disable", "alpha");
    ck_assert(json_is_false(json_object_get(j, "enabled")));
    json_decref(j);
    struct db *d = open_db(&f);
    struct db_tenant t;
    char err[256];
    ck_assert_int_eq(db_tenant_get(d, "alpha", &t, err, sizeof(err)), 1);
    ck_assert_int_eq(t.enabled, 0);
    ADM(&f, &r, "tenant", "list");
    ck_assert_ptr_nonnull(strstr(r.out, "disabled"));
    ur_free(&r);
    ADM(&f, &r, "tenant", "enable", "alpha");
    ck_assert_int_eq(r.rc, 0);
    ur_free(&r);
    ck_assert_int_eq(db_tenant_get(d, "alpha", &t, err, sizeof(err)), 1);
    ck_assert_int_eq(t.enabled, 1);
    db_close(d);
    fx_free(&f);
}
END_TEST

/* ---------------------------------------------------------------- keys */

static void add_tenant(struct fx *f, const char *name)
{
    struct ur_run r;
    ADM(f, &r, "tenant", "add", name);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    ur_free(&r);
}

START_TEST(key_create_prints_the_stored_key_once)
{
    struct fx f = {0};
    fx_init(&f);
    init_db(&f);
    add_tenant(&f, "alpha");
    json_t *j = JSON(&f, "key", "create", "alpha", "--name", "ci");
    const char *key = jstr(j, "key");
    ck_assert(strncmp(key, "sk-llmd-", 8) == 0);
    ck_assert_int_eq(strncmp(jstr(j, "prefix"), key, DB_PREFIX_LEN), 0);
    ck_assert_int_eq(strlen(jstr(j, "prefix")), DB_PREFIX_LEN);
    ck_assert_str_eq(jstr(j, "tenant"), "alpha");
    ck_assert_str_eq(jstr(j, "name"), "ci");
    ck_assert(json_is_null(json_object_get(j, "expires")));
    /* what was printed is what authenticates: its hash is the stored one */
    struct db *d = open_db(&f);
    struct db_key *ks;
    int n;
    char err[256];
    ck_assert_int_eq(db_key_list(d, "alpha", &ks, &n, err, sizeof(err)), 0);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(ks[0].id, jint(j, "id"));
    uint8_t h[32];
    db_key_hash(key, strlen(key), h);
    ck_assert_int_eq(memcmp(h, ks[0].hash, 32), 0);
    free(ks);
    json_decref(j);
    /* human mode: the key alone on stdout, the warning on stderr */
    struct ur_run r;
    ADM(&f, &r, "key", "create", "alpha");
    ck_assert_int_eq(r.rc, 0);
    ck_assert(strncmp(r.out, "sk-llmd-", 8) == 0);
    ck_assert_ptr_eq(strchr(r.out, '\n'), r.out + strlen(r.out) - 1);
    ck_assert_ptr_nonnull(strstr(r.err, "cannot be shown again"));
    char printed[DB_KEY_MAX];
    snprintf(printed, sizeof(printed), "%.*s", (int)strcspn(r.out, "\n"), r.out);
    ck_assert_ptr_null(strstr(r.err, printed));
    ur_free(&r);
    ck_assert_int_eq(db_key_list(d, "alpha", &ks, &n, err, sizeof(err)), 0);
    ck_assert_int_eq(n, 2);
    free(ks);
    db_close(d);
    ADM(&f, &r, "key", "create", "ghost");
    assert_fails(&r, 1, "ghost");
    ur_free(&r);
    fx_free(&f);
}
END_TEST

START_TEST(key_expiry_is_a_date_or_days_from_now)
{
    struct fx f = {0};
    fx_init(&f);
    init_db(&f);
    add_tenant(&f, "alpha");
    json_t *j = JSON(&f, "key", "create", "alpha", "--expires", "2031-01-02");
    ck_assert_str_eq(jstr(j, "expires"), "2031-01-02T00:00:00Z");
    json_decref(j);
    time_t before = time(NULL);
    j = JSON(&f, "key", "create", "alpha", "--expires", "+30d");
    time_t after = time(NULL);
    json_decref(j);
    struct db *d = open_db(&f);
    struct db_key *ks;
    int n;
    char err[256];
    ck_assert_int_eq(db_key_list(d, NULL, &ks, &n, err, sizeof(err)), 0);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(ks[0].expires, 1925078400); /* 2031-01-02T00:00:00Z */
    ck_assert_int_ge(ks[1].expires, before + 30 * 86400);
    ck_assert_int_le(ks[1].expires, after + 30 * 86400);
    free(ks);
    db_close(d);
    struct ur_run r;
    const char *bad[] = {"2020-01-01", "30d", "2031-02-30", "+d", "tomorrow"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        ADM(&f, &r, "key", "create", "alpha", "--expires", bad[i]);
        assert_fails(&r, 2, "--expires");
        ur_free(&r);
    }
    fx_free(&f);
}
END_TEST

static json_t *key_with_id(json_t *list, long long id)
{
    for (size_t i = 0; i < json_array_size(list); i++)
        if (jint(json_array_get(list, i), "id") == id)
            return json_array_get(list, i);
    ck_abort_msg("no key %lld", id);
    return NULL;
}

START_TEST(revoked_keys_show_revoked_and_cannot_be_revoked_twice)
{
    struct fx f = {0};
    fx_init(&f);
    init_db(&f);
    add_tenant(&f, "alpha");
    add_tenant(&f, "beta");
    json_t *k1 = JSON(&f, "key", "create", "alpha");
    json_t *k2 = JSON(&f, "key", "create", "alpha");
    json_t *k3 = JSON(&f, "key", "create", "beta");
    char id1[24];
    snprintf(id1, sizeof(id1), "%lld", jint(k1, "id"));
    struct ur_run r;
    ADM(&f, &r, "key", "revoke", id1);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "revoked"));
    ur_free(&r);
    json_t *j = JSON(&f, "key", "revoke", jstr(k2, "prefix"));
    ck_assert_str_eq(jstr(j, "status"), "revoked");
    ck_assert_int_eq(jint(j, "id"), jint(k2, "id"));
    json_decref(j);
    json_t *list = JSON(&f, "key", "list");
    ck_assert_int_eq(json_array_size(list), 3);
    ck_assert_str_eq(jstr(key_with_id(list, jint(k1, "id")), "status"), "revoked");
    ck_assert(json_is_string(json_object_get(key_with_id(list, jint(k1, "id")), "revoked")));
    ck_assert_str_eq(jstr(key_with_id(list, jint(k2, "id")), "status"), "revoked");
    ck_assert_str_eq(jstr(key_with_id(list, jint(k3, "id")), "status"), "active");
    ck_assert(json_is_null(json_object_get(key_with_id(list, jint(k3, "id")), "revoked")));
    json_decref(list);
    list = JSON(&f, "key", "list", "--tenant", "beta");
    ck_assert_int_eq(json_array_size(list), 1);
    ck_assert_str_eq(jstr(json_array_get(list, 0), "tenant"), "beta");
    json_decref(list);
    ADM(&f, &r, "key", "list");
    ck_assert_ptr_nonnull(strstr(r.out, "revoked"));
    ck_assert_ptr_nonnull(strstr(r.out, "active"));
    ck_assert_ptr_null(strstr(r.out, jstr(k3, "key"))); /* never the key itself */
    ur_free(&r);
    ADM(&f, &r, "key", "revoke", id1);
    assert_fails(&r, 1, id1);
    ur_free(&r);
    ADM(&f, &r, "key", "revoke", "sk-llmd-zzzz");
    assert_fails(&r, 1, "sk-llmd-zzzz");
    ur_free(&r);
    json_decref(k1);
    json_decref(k2);
    json_decref(k3);
    fx_free(&f);
}
END_TEST

/* --------------------------------------------------------------- usage */

static void insert_usage(struct fx *f)
{
    struct db *d = open_db(f);
    int64_t now_ms = (int64_t)time(NULL) * 1000;
    struct db_usage u[4] = {
        {.ts_ms = 1577836800000LL,
         .tenant = "alpha",
         .key_id = 1,
         .request_id = "chatcmpl-old",
         .prompt_tokens = 1000,
         .completion_tokens = 1,
         .total_ms = 5,
         .finish = "stop",
         .status = 200},
        {.ts_ms = now_ms - 3000,
         .tenant = "alpha",
         .key_id = 1,
         .request_id = "chatcmpl-a1",
         .prompt_tokens = 10,
         .cached_tokens = 4,
         .completion_tokens = 20,
         .queue_ms = 1.5,
         .ttft_ms = 30,
         .total_ms = 100,
         .preemptions = 1,
         .finish = "length",
         .status = 200},
        {.ts_ms = now_ms - 2000,
         .tenant = "alpha",
         .key_id = 2,
         .request_id = "chatcmpl-a2",
         .prompt_tokens = 7,
         .completion_tokens = 0,
         .ttft_ms = 0,
         .total_ms = 50,
         .finish = "error",
         .status = 500},
        {.ts_ms = now_ms - 1000,
         .tenant = "beta",
         .key_id = 3,
         .request_id = "cmpl-b1",
         .prompt_tokens = 3,
         .completion_tokens = 5,
         .ttft_ms = 10,
         .total_ms = 20,
         .finish = "stop",
         .status = 200},
    };
    char err[256];
    ck_assert_msg(db_usage_insert(d, u, 4, err, sizeof(err)) == 0, "%s", err);
    db_close(d);
}

START_TEST(usage_sums_per_tenant_since_a_date)
{
    struct fx f = {0};
    fx_init(&f);
    init_db(&f);
    add_tenant(&f, "alpha");
    add_tenant(&f, "beta");
    insert_usage(&f);
    json_t *j = JSON(&f, "usage");
    ck_assert_int_eq(json_array_size(j), 2);
    json_t *a = json_array_get(j, 0);
    ck_assert_str_eq(jstr(a, "tenant"), "alpha");
    ck_assert_int_eq(jint(a, "requests"), 3);
    ck_assert_int_eq(jint(a, "errors"), 1);
    ck_assert_int_eq(jint(a, "prompt_tokens"), 1017);
    json_decref(j);
    j = JSON(&f, "usage", "--since", "2021-06-01");
    a = json_array_get(j, 0);
    ck_assert_int_eq(jint(a, "requests"), 2);
    ck_assert_int_eq(jint(a, "prompt_tokens"), 17);
    ck_assert_int_eq(jint(a, "cached_tokens"), 4);
    ck_assert_int_eq(jint(a, "completion_tokens"), 20);
    json_decref(j);
    j = JSON(&f, "usage", "--tenant", "beta", "--since", "-1d");
    ck_assert_int_eq(json_array_size(j), 1);
    ck_assert_str_eq(jstr(json_array_get(j, 0), "tenant"), "beta");
    json_decref(j);
    struct ur_run r;
    ADM(&f, &r, "usage");
    ck_assert_int_eq(r.rc, 0);
    ck_assert(strncmp(r.out, "TENANT", 6) == 0);
    ck_assert_ptr_nonnull(strstr(r.out, "\nalpha "));
    ck_assert_ptr_nonnull(strstr(r.out, "\nbeta "));
    ur_free(&r);
    fx_free(&f);
}
END_TEST

START_TEST(usage_rows_lists_the_ledger_newest_first)
{
    struct fx f = {0};
    fx_init(&f);
    init_db(&f);
    add_tenant(&f, "alpha");
    add_tenant(&f, "beta");
    insert_usage(&f);
    json_t *j = JSON(&f, "usage", "--rows", "0");
    ck_assert_int_eq(json_array_size(j), 4);
    json_decref(j);
    j = JSON(&f, "usage", "--rows", "2");
    ck_assert_int_eq(json_array_size(j), 2);
    ck_assert_str_eq(jstr(json_array_get(j, 0), "request_id"), "cmpl-b1");
    json_t *a = json_array_get(j, 1);
    ck_assert_str_eq(jstr(a, "request_id"), "chatcmpl-a2");
    ck_assert_str_eq(jstr(a, "tenant"), "alpha");
    ck_assert_int_eq(jint(a, "key_id"), 2);
    ck_assert_int_eq(jint(a, "prompt_tokens"), 7);
    ck_assert_int_eq(jint(a, "status"), 500);
    ck_assert_str_eq(jstr(a, "finish"), "error");
    json_decref(j);
    j = JSON(&f, "usage", "--rows", "10", "--tenant", "alpha", "--since", "-1h");
    ck_assert_int_eq(json_array_size(j), 2);
    a = json_array_get(j, 1);
    ck_assert_str_eq(jstr(a, "request_id"), "chatcmpl-a1");
    ck_assert_int_eq(jint(a, "cached_tokens"), 4);
    ck_assert_int_eq(jint(a, "completion_tokens"), 20);
    ck_assert_int_eq(jint(a, "preemptions"), 1);
    ck_assert_double_eq(json_real_value(json_object_get(a, "queue_ms")), 1.5);
    ck_assert_double_eq(json_real_value(json_object_get(a, "ttft_ms")), 30.0);
    ck_assert_double_eq(json_real_value(json_object_get(a, "total_ms")), 100.0);
    json_decref(j);
    struct ur_run r;
    ADM(&f, &r, "usage", "--rows", "10");
    ck_assert_int_eq(r.rc, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "chatcmpl-old"));
    ck_assert_ptr_nonnull(strstr(r.out, "2020-01-01T00:00:00Z"));
    ur_free(&r);
    fx_free(&f);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("llmadmin");
    TCase *b = tcase_create("basics");
    tcase_add_test(b, version_and_help_print_to_stdout_and_exit_0);
    tcase_add_test(b, usage_errors_exit_2_with_a_usage_line);
    tcase_add_test(b, init_is_idempotent_and_other_commands_need_it);
    tcase_add_test(b, global_options_work_anywhere_and_db_comes_from_env_then_flag);
    suite_add_tcase(s, b);
    TCase *t = tcase_create("tenants");
    tcase_add_test(t, tenant_add_and_set_store_every_field);
    tcase_add_test(t, tenant_list_prints_an_aligned_table_and_json);
    tcase_add_test(t, tenant_refusals_exit_1_with_the_reason);
    tcase_add_test(t, tenant_disable_and_enable_reach_the_db);
    suite_add_tcase(s, t);
    TCase *k = tcase_create("keys");
    tcase_add_test(k, key_create_prints_the_stored_key_once);
    tcase_add_test(k, key_expiry_is_a_date_or_days_from_now);
    tcase_add_test(k, revoked_keys_show_revoked_and_cannot_be_revoked_twice);
    suite_add_tcase(s, k);
    TCase *u = tcase_create("usage");
    tcase_add_test(u, usage_sums_per_tenant_since_a_date);
    tcase_add_test(u, usage_rows_lists_the_ledger_newest_first);
    suite_add_tcase(s, u);
    return s;
}
