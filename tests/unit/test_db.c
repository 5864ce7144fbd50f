/*
 * tests/unit/test_db.c — the SQLite store: opening and migrations, tenant
 * validation, keys that never reach the file, revocation, the usage ledger
 * and its summaries, and the batched writer thread under concurrent pushes.
 *
 * Every test works in its own mkdtemp directory, made by the fixture and
 * removed with everything in it afterwards, failed tests' too.  Some tests write the database
 * behind the store's back with raw SQLite, to build files the store must
 * upgrade, refuse or report.
 */
#include "db/db.h"

#include <check.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tbase[256]; /* one per test case, made in the parent process */
static char tdir[300];  /* one per test, inside tbase */
static char tpath[320];
static char err[512];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* Unchecked fixtures run in the runner itself, so the base directory goes
 * even when a test fails in its forked child before its own teardown. */
static void base_setup(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tbase, sizeof(tbase), "%s/llmd-db-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tbase))
        tbase[0] = '\0';
}

static void base_teardown(void)
{
    if (tbase[0])
        nftw(tbase, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static void tmp_setup(void)
{
    ck_assert_msg(tbase[0] != '\0', "no temporary directory");
    snprintf(tdir, sizeof(tdir), "%s/t-XXXXXX", tbase);
    ck_assert_ptr_nonnull(mkdtemp(tdir));
    snprintf(tpath, sizeof(tpath), "%s/llmd.db", tdir);
    err[0] = '\0';
}

static void tmp_teardown(void)
{
    nftw(tdir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static struct db *open_new(void)
{
    struct db *d = NULL;
    ck_assert_msg(db_open(tpath, 1, &d, err, sizeof(err)) == 0, "db_open: %s", err);
    return d;
}

/* Runs SQL on the file through a connection of its own. */
static void raw_exec(const char *sql)
{
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(tpath, &h), SQLITE_OK);
    char *msg = NULL;
    int rc = sqlite3_exec(h, sql, NULL, NULL, &msg);
    ck_assert_msg(rc == SQLITE_OK, "raw sql: %s", msg ? msg : "?");
    sqlite3_close(h);
}

/* One integer from SQL run on the file through a connection of its own. */
static long long raw_int(const char *sql)
{
    sqlite3 *h;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open(tpath, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
}

static void add_tenant(struct db *d, const char *name)
{
    struct db_tenant t;
    db_tenant_defaults(&t);
    snprintf(t.name, sizeof(t.name), "%s", name);
    ck_assert_msg(db_tenant_add(d, &t, err, sizeof(err)) == 0, "add %s: %s", name, err);
}

/* ------------------------------------------------------- open, migrations */

START_TEST(fresh_db_has_the_latest_version_in_wal_mode)
{
    struct db *d = open_new();
    int v = db_schema_version(d);
    ck_assert_int_ge(v, 2);
    add_tenant(d, "acme");
    db_close(d);
    ck_assert_int_eq(raw_int("PRAGMA user_version"), v);
    /* WAL is a property of the file; a raw connection sees it. */
    sqlite3 *h;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open(tpath, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(h, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_str_eq((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    sqlite3_close(h);
}
END_TEST

START_TEST(reopening_is_idempotent_and_keeps_rows)
{
    struct db *d = open_new();
    int v = db_schema_version(d);
    add_tenant(d, "acme");
    db_close(d);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(db_open(tpath, 0, &d, err, sizeof(err)), 0);
        ck_assert_int_eq(db_schema_version(d), v);
        struct db_tenant t;
        ck_assert_int_eq(db_tenant_get(d, "acme", &t, err, sizeof(err)), 1);
        db_close(d);
    }
    ck_assert_int_eq(raw_int("SELECT count(*) FROM tenants"), 1);
}
END_TEST

/* Version 1 as it was first released, written out by hand. */
static const char v1_sql[] =
    "CREATE TABLE tenants (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
    " weight REAL NOT NULL DEFAULT 1 CHECK (weight > 0),"
    " default_priority INTEGER NOT NULL DEFAULT 4, max_priority INTEGER NOT NULL DEFAULT 0,"
    " max_concurrent INTEGER NOT NULL DEFAULT 0, rpm INTEGER NOT NULL DEFAULT 0,"
    " tpm INTEGER NOT NULL DEFAULT 0, max_kv_blocks INTEGER NOT NULL DEFAULT 0,"
    " max_tokens INTEGER NOT NULL DEFAULT 0, enabled INTEGER NOT NULL DEFAULT 1,"
    " created INTEGER NOT NULL);"
    "CREATE TABLE api_keys (id INTEGER PRIMARY KEY,"
    " tenant_id INTEGER NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,"
    " name TEXT NOT NULL DEFAULT '', prefix TEXT NOT NULL,"
    " hash BLOB NOT NULL UNIQUE CHECK (length(hash) = 32), created INTEGER NOT NULL,"
    " expires INTEGER NOT NULL DEFAULT 0, revoked INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX api_keys_tenant ON api_keys(tenant_id);"
    "CREATE INDEX api_keys_prefix ON api_keys(prefix);"
    "INSERT INTO tenants (name, weight, rpm, created) VALUES ('old', 2.5, 60, 1700000000);"
    "PRAGMA user_version = 1;";

START_TEST(version_1_file_is_upgraded_and_keeps_its_tenants)
{
    raw_exec(v1_sql);
    struct db *d;
    ck_assert_msg(db_open(tpath, 0, &d, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_ge(db_schema_version(d), 2);
    ck_assert_int_eq(raw_int("PRAGMA user_version"), db_schema_version(d));
    struct db_tenant t;
    ck_assert_int_eq(db_tenant_get(d, "old", &t, err, sizeof(err)), 1);
    ck_assert(t.weight == 2.5);
    ck_assert_int_eq(t.rpm, 60);
    ck_assert_int_eq(t.created, 1700000000);
    ck_assert_int_ge(db_config_version(d), 0); /* later scripts ran too */
    /* The ledger came with the upgrade. */
    struct db_usage u = {.ts_ms = 5, .tenant = "old", .finish = "stop", .status = 200};
    ck_assert_msg(db_usage_insert(d, &u, 1, err, sizeof(err)) == 0, "%s", err);
    db_close(d);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM usage"), 1);
}
END_TEST

START_TEST(newer_version_is_refused_with_a_message)
{
    raw_exec("CREATE TABLE future (x); PRAGMA user_version = 999;");
    struct db *d = (struct db *)1;
    ck_assert_int_eq(db_open(tpath, 0, &d, err, sizeof(err)), -1);
    ck_assert_ptr_null(d);
    ck_assert_msg(strstr(err, "newer") && strstr(err, "999") && strstr(err, tpath), "%s", err);
    /* Refusing must not touch it. */
    ck_assert_int_eq(raw_int("PRAGMA user_version"), 999);
}
END_TEST

START_TEST(missing_file_without_create_names_the_path)
{
    struct db *d;
    ck_assert_int_eq(db_open(tpath, 0, &d, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, tpath) != NULL, "%s", err);
    ck_assert_int_eq(access(tpath, F_OK), -1);
    ck_assert_int_eq(db_writer_start(tpath, &(struct db_writer *){NULL}, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, tpath) != NULL, "%s", err);
}
END_TEST

START_TEST(file_that_is_not_sqlite_is_refused)
{
    FILE *f = fopen(tpath, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 100; i++)
        fputs("this is a text file, not a database\n", f);
    fclose(f);
    struct db *d;
    ck_assert_int_eq(db_open(tpath, 1, &d, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "not an SQLite database") && strstr(err, tpath), "%s", err);
}
END_TEST

START_TEST(directory_path_is_refused)
{
    struct db *d;
    ck_assert_int_eq(db_open(tdir, 1, &d, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, tdir) != NULL, "%s", err);
}
END_TEST

START_TEST(data_version_changes_when_another_connection_commits)
{
    struct db *a = open_new(), *b;
    ck_assert_int_eq(db_open(tpath, 0, &b, err, sizeof(err)), 0);
    int64_t v0 = db_data_version(a);
    ck_assert_int_ge(v0, 0);
    ck_assert_int_eq(db_data_version(a), v0);
    add_tenant(b, "acme");
    ck_assert_int_ne(db_data_version(a), v0);
    int64_t v1 = db_data_version(a);
    struct db_usage u = {.ts_ms = 1, .tenant = "acme"};
    ck_assert_int_eq(db_usage_insert(b, &u, 1, err, sizeof(err)), 0);
    ck_assert_int_ne(db_data_version(a), v1);
    db_close(b);
    db_close(a);
}
END_TEST

START_TEST(config_version_moves_with_tenants_and_keys_but_not_usage)
{
    struct db *a = open_new(), *b;
    ck_assert_int_eq(db_open(tpath, 0, &b, err, sizeof(err)), 0);
    int64_t v = db_config_version(a);
    ck_assert_int_ge(v, 0);
    struct db_usage u = {.ts_ms = 1, .tenant = "acme"};
    ck_assert_int_eq(db_usage_insert(b, &u, 1, err, sizeof(err)), 0);
    ck_assert_int_eq(db_config_version(a), v);

    add_tenant(b, "acme");
    ck_assert_int_gt(db_config_version(a), v);
    v = db_config_version(a);
    struct db_tenant t;
    ck_assert_int_eq(db_tenant_get(b, "acme", &t, err, sizeof(err)), 1);
    t.rpm = 5;
    ck_assert_int_eq(db_tenant_update(b, &t, err, sizeof(err)), 0);
    ck_assert_int_gt(db_config_version(a), v);
    v = db_config_version(a);
    char key[DB_KEY_MAX];
    struct db_key k;
    ck_assert_int_eq(db_key_create(b, "acme", "", 0, key, sizeof(key), &k, err, sizeof(err)), 0);
    ck_assert_int_gt(db_config_version(a), v);
    v = db_config_version(a);
    ck_assert_int_eq(db_key_revoke(b, k.prefix, err, sizeof(err)), 1);
    ck_assert_int_gt(db_config_version(a), v);
    v = db_config_version(a);
    ck_assert_int_eq(db_tenant_delete(b, "acme", err, sizeof(err)), 1);
    ck_assert_int_gt(db_config_version(a), v);
    db_close(b);
    db_close(a);
}
END_TEST

/* A commit is on disk once it returns: a process killed right after loses
 * nothing (synchronous=NORMAL in WAL mode). */
START_TEST(commits_survive_sigkill)
{
    db_close(open_new());
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct db *d;
        struct db_writer *w;
        if (db_open(tpath, 0, &d, err, sizeof(err)) < 0 ||
            db_writer_start(tpath, &w, err, sizeof(err)) < 0)
            _exit(1);
        struct db_tenant t;
        db_tenant_defaults(&t);
        strcpy(t.name, "acme");
        if (db_tenant_add(d, &t, err, sizeof(err)) < 0)
            _exit(1);
        for (int i = 0; i < 50; i++) {
            struct db_usage u = {.ts_ms = i, .tenant = "acme", .status = 200};
            if (db_writer_push(w, &u, NULL, NULL) < 0)
                _exit(1);
        }
        db_writer_flush(w);
        raise(SIGKILL);
        _exit(1);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    struct db *d;
    ck_assert_msg(db_open(tpath, 0, &d, err, sizeof(err)) == 0, "%s", err);
    struct db_tenant t;
    ck_assert_int_eq(db_tenant_get(d, "acme", &t, err, sizeof(err)), 1);
    struct db_usage *u;
    int n;
    ck_assert_int_eq(db_usage_list(d, NULL, 0, 0, &u, &n, err, sizeof(err)), 0);
    ck_assert_int_eq(n, 50);
    free(u);
    db_close(d);
}
END_TEST

/* ---------------------------------------------------------------- tenants */

START_TEST(tenant_add_get_list_and_duplicates)
{
    struct db *d = open_new();
    struct db_tenant t;
    db_tenant_defaults(&t);
    ck_assert(t.weight == 1.0);
    ck_assert_int_eq(t.default_priority, 4);
    ck_assert_int_eq(t.max_priority, 0);
    ck_assert_int_eq(t.enabled, 1);
    strcpy(t.name, "zeta");
    t.weight = 3.5;
    t.rpm = 100;
    t.tpm = 5000;
    t.max_concurrent = 4;
    t.max_kv_blocks = 64;
    t.max_tokens = 2048;
    t.default_priority = 6;
    t.max_priority = 2;
    ck_assert_int_eq(db_tenant_add(d, &t, err, sizeof(err)), 0);
    ck_assert_int_gt(t.id, 0);
    ck_assert_int_gt(t.created, 0);
    add_tenant(d, "alpha");
    add_tenant(d, "mid.team_1-x");

    struct db_tenant dup;
    db_tenant_defaults(&dup);
    strcpy(dup.name, "zeta");
    ck_assert_int_eq(db_tenant_add(d, &dup, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "zeta") && strstr(err, "exists"), "%s", err);

    struct db_tenant g;
    ck_assert_int_eq(db_tenant_get(d, "zeta", &g, err, sizeof(err)), 1);
    ck_assert_int_eq(g.id, t.id);
    ck_assert(g.weight == 3.5);
    ck_assert_int_eq(g.rpm, 100);
    ck_assert_int_eq(g.tpm, 5000);
    ck_assert_int_eq(g.max_concurrent, 4);
    ck_assert_int_eq(g.max_kv_blocks, 64);
    ck_assert_int_eq(g.max_tokens, 2048);
    ck_assert_int_eq(g.default_priority, 6);
    ck_assert_int_eq(g.max_priority, 2);
    ck_assert_int_eq(g.enabled, 1);
    ck_assert_int_eq(g.created, t.created);
    ck_assert_int_eq(db_tenant_get(d, "nobody", &g, err, sizeof(err)), 0);

    struct db_tenant *all;
    int n;
    ck_assert_int_eq(db_tenant_list(d, &all, &n, err, sizeof(err)), 0);
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(all[0].name, "alpha");
    ck_assert_str_eq(all[1].name, "mid.team_1-x");
    ck_assert_str_eq(all[2].name, "zeta");
    ck_assert_int_eq(all[2].rpm, 100);
    free(all);
    db_close(d);
}
END_TEST

START_TEST(tenant_names_outside_the_alphabet_are_refused)
{
    struct db *d = open_new();
    const char *bad[] = {"", "a b", "a/b", "tab\t", "caf\xc3\xa9", "semi;colon", "quote'"};
    struct db_tenant t;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        db_tenant_defaults(&t);
        strcpy(t.name, bad[i]);
        ck_assert_msg(db_tenant_add(d, &t, err, sizeof(err)) == -1, "accepted '%s'", bad[i]);
        ck_assert_msg(strstr(err, "name") != NULL, "%s", err);
    }
    /* 63 characters fit; 64 (no NUL in the field) do not. */
    db_tenant_defaults(&t);
    memset(t.name, 'x', 63);
    t.name[63] = '\0';
    ck_assert_msg(db_tenant_add(d, &t, err, sizeof(err)) == 0, "%s", err);
    db_tenant_defaults(&t);
    memset(t.name, 'y', sizeof(t.name));
    ck_assert_int_eq(db_tenant_add(d, &t, err, sizeof(err)), -1);
    struct db_tenant *all;
    int n;
    ck_assert_int_eq(db_tenant_list(d, &all, &n, err, sizeof(err)), 0);
    ck_assert_int_eq(n, 1);
    free(all);
    db_close(d);
}
END_TEST

/* Sets field number which (0..12) of a default tenant "t" to a bad value;
 * returns a word the refusal must contain. */
static const char *bad_field(struct db_tenant *t, int which)
{
    db_tenant_defaults(t);
    strcpy(t->name, "t");
    const double weights[] = {0, -1, NAN, INFINITY};
    int *caps[] = {&t->max_concurrent, &t->rpm, &t->tpm, &t->max_kv_blocks, &t->max_tokens};
    if (which < 4) {
        t->weight = weights[which];
        return "weight";
    }
    if (which < 8) {
        int *prio = which < 6 ? &t->default_priority : &t->max_priority;
        *prio = which % 2 ? DB_PRIO_MAX + 1 : -1;
        return "priority";
    }
    *caps[which - 8] = -1;
    return "caps";
}

START_TEST(tenant_fields_out_of_range_are_refused_by_add_and_update)
{
    struct db *d = open_new();
    add_tenant(d, "t");
    struct db_tenant t;
    for (int which = 0; which <= 12; which++) {
        const char *word = bad_field(&t, which);
        strcpy(t.name, "t2");
        ck_assert_msg(db_tenant_add(d, &t, err, sizeof(err)) == -1, "add accepted field %d", which);
        ck_assert_msg(strstr(err, word) != NULL, "%d: %s", which, err);
        bad_field(&t, which);
        ck_assert_msg(db_tenant_update(d, &t, err, sizeof(err)) == -1, "update accepted %d", which);
        ck_assert_msg(strstr(err, word) != NULL, "%d: %s", which, err);
    }
    /* The edges are fine. */
    db_tenant_defaults(&t);
    strcpy(t.name, "t2");
    t.default_priority = DB_PRIO_MAX;
    t.max_priority = DB_PRIO_MAX;
    t.weight = 1e-6;
    ck_assert_msg(db_tenant_add(d, &t, err, sizeof(err)) == 0, "%s", err);
    struct db_tenant g;
    ck_assert_int_eq(db_tenant_get(d, "t", &g, err, sizeof(err)), 1);
    ck_assert(g.weight == 1.0);
    ck_assert_int_eq(g.rpm, 0);
    db_close(d);
}
END_TEST

START_TEST(tenant_update_stores_every_field_but_keeps_id_and_created)
{
    struct db *d = open_new();
    add_tenant(d, "acme");
    struct db_tenant before, t;
    ck_assert_int_eq(db_tenant_get(d, "acme", &before, err, sizeof(err)), 1);
    t = before;
    t.id = 999;
    t.created = 5;
    t.weight = 0.25;
    t.default_priority = 7;
    t.max_priority = 3;
    t.max_concurrent = 2;
    t.rpm = 10;
    t.tpm = 20;
    t.max_kv_blocks = 30;
    t.max_tokens = 40;
    t.enabled = 0;
    ck_assert_msg(db_tenant_update(d, &t, err, sizeof(err)) == 0, "%s", err);
    struct db_tenant g;
    ck_assert_int_eq(db_tenant_get(d, "acme", &g, err, sizeof(err)), 1);
    ck_assert_int_eq(g.id, before.id);
    ck_assert_int_eq(g.created, before.created);
    ck_assert(g.weight == 0.25);
    ck_assert_int_eq(g.default_priority, 7);
    ck_assert_int_eq(g.max_priority, 3);
    ck_assert_int_eq(g.max_concurrent, 2);
    ck_assert_int_eq(g.rpm, 10);
    ck_assert_int_eq(g.tpm, 20);
    ck_assert_int_eq(g.max_kv_blocks, 30);
    ck_assert_int_eq(g.max_tokens, 40);
    ck_assert_int_eq(g.enabled, 0);

    strcpy(t.name, "ghost");
    ck_assert_int_eq(db_tenant_update(d, &t, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "ghost") != NULL, "%s", err);
    db_close(d);
}
END_TEST

START_TEST(tenant_delete_takes_its_keys_and_leaves_its_usage)
{
    struct db *d = open_new();
    add_tenant(d, "acme");
    add_tenant(d, "other");
    char key[DB_KEY_MAX];
    ck_assert_int_eq(db_key_create(d, "acme", "a", 0, key, sizeof(key), NULL, err, sizeof(err)), 0);
    ck_assert_int_eq(db_key_create(d, "other", "b", 0, key, sizeof(key), NULL, err, sizeof(err)),
                     0);
    struct db_usage u = {.ts_ms = 1, .tenant = "acme"};
    ck_assert_int_eq(db_usage_insert(d, &u, 1, err, sizeof(err)), 0);
    ck_assert_int_eq(db_tenant_delete(d, "acme", err, sizeof(err)), 1);
    ck_assert_int_eq(db_tenant_delete(d, "acme", err, sizeof(err)), 0);
    db_close(d);
    /* Foreign keys are on: the cascade removed the row itself. */
    ck_assert_int_eq(raw_int("SELECT count(*) FROM api_keys"), 1);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM usage WHERE tenant = 'acme'"), 1);
}
END_TEST

/* ------------------------------------------------------------------- keys */

static int is_lower_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

/* 1 when needle occurs in the bytes of file path (absent file: 0). */
static int file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    ck_assert_ptr_nonnull(buf);
    size_t got = fread(buf, 1, (size_t)len, f);
    fclose(f);
    size_t nl = strlen(needle);
    int found = 0;
    for (size_t i = 0; i + nl <= got && !found; i++)
        found = memcmp(buf + i, needle, nl) == 0;
    free(buf);
    return found;
}

static int db_files_contain(const char *needle)
{
    char p[400];
    snprintf(p, sizeof(p), "%s-wal", tpath);
    return file_contains(tpath, needle) || file_contains(p, needle);
}

START_TEST(key_create_format_hash_and_nothing_of_it_stored)
{
    struct db *d = open_new();
    add_tenant(d, "acme");
    char k1[DB_KEY_MAX], k2[DB_KEY_MAX];
    struct db_key r1, r2;
    ck_assert_msg(db_key_create(d, "acme", "laptop", 0, k1, sizeof(k1), &r1, err, sizeof(err)) == 0,
                  "%s", err);
    ck_assert_int_eq(db_key_create(d, "acme", "", 0, k2, sizeof(k2), &r2, err, sizeof(err)), 0);
    ck_assert_uint_eq(strlen(k1), 8 + 48);
    ck_assert_int_eq(strncmp(k1, "sk-llmd-", 8), 0);
    ck_assert(is_lower_hex(k1 + 8, 48));
    ck_assert_str_ne(k1, k2);

    uint8_t h[32];
    db_key_hash(k1, strlen(k1), h);
    ck_assert_mem_eq(h, r1.hash, 32);
    ck_assert_int_eq(strncmp(r1.prefix, k1, DB_PREFIX_LEN), 0);
    ck_assert_uint_eq(strlen(r1.prefix), DB_PREFIX_LEN);
    ck_assert_str_eq(r1.tenant, "acme");
    ck_assert_str_eq(r1.name, "laptop");
    ck_assert_int_gt(r1.id, 0);
    ck_assert_int_gt(r1.created, 0);
    ck_assert_int_eq(r1.revoked, 0);

    /* The listing carries the same hash: that is what the daemon matches. */
    struct db_key *keys;
    int n;
    ck_assert_int_eq(db_key_list(d, "acme", &keys, &n, err, sizeof(err)), 0);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(keys[0].id, r1.id);
    ck_assert_mem_eq(keys[0].hash, h, 32);
    ck_assert_str_eq(keys[1].prefix, r2.prefix);
    free(keys);

    /* Neither key, nor its random part, is anywhere in the file or its WAL. */
    ck_assert(!db_files_contain(k1) && !db_files_contain(k1 + 8));
    ck_assert(!db_files_contain(k2) && !db_files_contain(k2 + 8));
    db_close(d);
    ck_assert(!db_files_contain(k1 + 8) && !db_files_contain(k2 + 8));
    ck_assert(file_contains(tpath, r1.prefix)); /* the checkpoint did run */
}
END_TEST

START_TEST(key_create_refuses_bad_input)
{
    struct db *d = open_new();
    add_tenant(d, "acme");
    char key[DB_KEY_MAX];
    key[0] = '\0';
    ck_assert_int_eq(db_key_create(d, "ghost", "", 0, key, sizeof(key), NULL, err, sizeof(err)),
                     -1);
    ck_assert_msg(strstr(err, "ghost") != NULL, "%s", err);
    ck_assert_int_eq(db_key_create(d, "acme", "", 0, key, 20, NULL, err, sizeof(err)), -1);
    ck_assert_int_eq(db_key_create(d, "acme", "", -1, key, sizeof(key), NULL, err, sizeof(err)),
                     -1);
    ck_assert_int_eq(
        db_key_create(d, "acme", "bad\nlabel", 0, key, sizeof(key), NULL, err, sizeof(err)), -1);
    ck_assert_str_eq(key, "");
    struct db_key *keys;
    int n;
    ck_assert_int_eq(db_key_list(d, NULL, &keys, &n, err, sizeof(err)), 0);
    ck_assert_int_eq(n, 0);
    free(keys);
    ck_assert_int_eq(db_key_list(d, "ghost", &keys, &n, err, sizeof(err)), -1);
    db_close(d);
}
END_TEST

START_TEST(key_list_filters_by_tenant_oldest_first)
{
    struct db *d = open_new();
    add_tenant(d, "a");
    add_tenant(d, "b");
    char key[DB_KEY_MAX];
    const char *owners[] = {"a", "b", "a", "b", "a"};
    int64_t ids[5];
    for (int i = 0; i < 5; i++) {
        struct db_key r;
        ck_assert_int_eq(
            db_key_create(d, owners[i], "", 1234, key, sizeof(key), &r, err, sizeof(err)), 0);
        ids[i] = r.id;
    }
    struct db_key *keys;
    int n;
    ck_assert_int_eq(db_key_list(d, "a", &keys, &n, err, sizeof(err)), 0);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(keys[0].id, ids[0]);
    ck_assert_int_eq(keys[1].id, ids[2]);
    ck_assert_int_eq(keys[2].id, ids[4]);
    ck_assert_int_eq(keys[2].expires, 1234);
    free(keys);
    ck_assert_int_eq(db_key_list(d, NULL, &keys, &n, err, sizeof(err)), 0);
    ck_assert_int_eq(n, 5);
    for (int i = 0; i < 5; i++)
        ck_assert_str_eq(keys[i].tenant, owners[i]);
    free(keys);
    db_close(d);
}
END_TEST

static int64_t revoked_of(struct db *d, int64_t id)
{
    struct db_key *keys;
    int n;
    ck_assert_int_eq(db_key_list(d, NULL, &keys, &n, err, sizeof(err)), 0);
    int64_t r = -1;
    for (int i = 0; i < n; i++)
        if (keys[i].id == id)
            r = keys[i].revoked;
    free(keys);
    return r;
}

START_TEST(revoke_by_prefix_id_and_whole_key)
{
    struct db *d = open_new();
    add_tenant(d, "acme");
    char k1[DB_KEY_MAX], k2[DB_KEY_MAX], k3[DB_KEY_MAX];
    struct db_key r1, r2, r3;
    ck_assert_int_eq(db_key_create(d, "acme", "", 0, k1, sizeof(k1), &r1, err, sizeof(err)), 0);
    ck_assert_int_eq(db_key_create(d, "acme", "", 0, k2, sizeof(k2), &r2, err, sizeof(err)), 0);
    ck_assert_int_eq(db_key_create(d, "acme", "", 0, k3, sizeof(k3), &r3, err, sizeof(err)), 0);
    /* Prefixes carry 16 random bits; the test needs k1's to be unique. */
    if (strcmp(r1.prefix, r2.prefix) != 0 && strcmp(r1.prefix, r3.prefix) != 0) {
        ck_assert_int_eq(db_key_revoke(d, r1.prefix, err, sizeof(err)), 1);
        ck_assert_int_gt(revoked_of(d, r1.id), 0);
        ck_assert_int_eq(db_key_revoke(d, r1.prefix, err, sizeof(err)), 0);
    }
    char id[32];
    snprintf(id, sizeof(id), "%lld", (long long)r2.id);
    ck_assert_int_eq(revoked_of(d, r2.id), 0);
    ck_assert_int_eq(db_key_revoke(d, id, err, sizeof(err)), 1);
    ck_assert_int_gt(revoked_of(d, r2.id), 0);
    ck_assert_int_eq(db_key_revoke(d, id, err, sizeof(err)), 0);
    ck_assert_int_eq(db_key_revoke(d, k3, err, sizeof(err)), 1);
    ck_assert_int_gt(revoked_of(d, r3.id), 0);

    ck_assert_int_eq(db_key_revoke(d, "999999", err, sizeof(err)), 0);
    ck_assert_int_eq(db_key_revoke(d, "sk-llmd-zzzz", err, sizeof(err)), 0);
    ck_assert_int_eq(db_key_revoke(d, "", err, sizeof(err)), -1);
    /* Revoked keys stay listed. */
    struct db_key *keys;
    int n;
    ck_assert_int_eq(db_key_list(d, "acme", &keys, &n, err, sizeof(err)), 0);
    ck_assert_int_eq(n, 3);
    free(keys);
    db_close(d);
}
END_TEST

START_TEST(ambiguous_prefix_is_an_error_until_one_key_is_left)
{
    struct db *d = open_new();
    add_tenant(d, "acme");
    char key[DB_KEY_MAX];
    struct db_key r1;
    ck_assert_int_eq(db_key_create(d, "acme", "", 0, key, sizeof(key), &r1, err, sizeof(err)), 0);
    /* A second key with the same display prefix, as 16 random bits allow. */
    char sql[512];
    snprintf(sql, sizeof(sql),
             "INSERT INTO api_keys (tenant_id, name, prefix, hash, created) "
             "VALUES (1, 'twin', '%s', randomblob(32), 1)",
             r1.prefix);
    raw_exec(sql);
    ck_assert_int_eq(db_key_revoke(d, r1.prefix, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, r1.prefix) && strstr(err, "2"), "%s", err);
    ck_assert_int_eq(revoked_of(d, r1.id), 0);
    /* Once one is revoked by id, the prefix names the other alone. */
    char id[32];
    snprintf(id, sizeof(id), "%lld", (long long)r1.id);
    ck_assert_int_eq(db_key_revoke(d, id, err, sizeof(err)), 1);
    raw_exec("UPDATE api_keys SET revoked = 17 WHERE revoked != 0"); /* a known time */
    ck_assert_int_eq(db_key_revoke(d, r1.prefix, err, sizeof(err)), 1);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM api_keys WHERE revoked = 0"), 0);
    /* The key revoked before keeps its time of revocation. */
    ck_assert_int_eq(revoked_of(d, r1.id), 17);
    db_close(d);
}
END_TEST

/* ------------------------------------------------------------------ usage */

static struct db_usage rec(int64_t ts, const char *tenant, int prompt, int completion, double ttft,
                           const char *finish, int status)
{
    struct db_usage u = {.ts_ms = ts,
                         .key_id = 7,
                         .prompt_tokens = prompt,
                         .cached_tokens = prompt / 2,
                         .completion_tokens = completion,
                         .queue_ms = 1.5,
                         .ttft_ms = ttft,
                         .total_ms = 100,
                         .preemptions = 1,
                         .status = status};
    snprintf(u.tenant, sizeof(u.tenant), "%s", tenant);
    snprintf(u.request_id, sizeof(u.request_id), "req-%lld", (long long)ts);
    snprintf(u.finish, sizeof(u.finish), "%s", finish);
    return u;
}

static void insert_sample(struct db *d)
{
    struct db_usage u[] = {
        rec(1000, "a", 10, 5, 20, "stop", 200),    rec(2000, "b", 100, 50, 40, "length", 200),
        rec(3000, "a", 20, 0, 0, "error", 500),    rec(4000, "a", 30, 7, 40, "stop", 200),
        rec(5000, "b", 8, 0, 0, "cancelled", 429), rec(6000, "a", 40, 9, 60, "aborted", 200),
    };
    ck_assert_msg(db_usage_insert(d, u, 6, err, sizeof(err)) == 0, "%s", err);
}

START_TEST(usage_list_newest_first_with_filters_and_limit)
{
    struct db *d = open_new();
    insert_sample(d);
    struct db_usage *u;
    int n;
    ck_assert_int_eq(db_usage_list(d, NULL, 0, 0, &u, &n, err, sizeof(err)), 0);
    ck_assert_int_eq(n, 6);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(u[i].ts_ms, 6000 - 1000 * i);
    /* Every field comes back. */
    ck_assert_str_eq(u[1].tenant, "b");
    ck_assert_str_eq(u[1].request_id, "req-5000");
    ck_assert_str_eq(u[1].finish, "cancelled");
    ck_assert_int_eq(u[1].status, 429);
    ck_assert_int_eq(u[1].key_id, 7);
    ck_assert_int_eq(u[1].prompt_tokens, 8);
    ck_assert_int_eq(u[1].cached_tokens, 4);
    ck_assert_int_eq(u[1].preemptions, 1);
    ck_assert(u[1].queue_ms == 1.5 && u[1].total_ms == 100);
    free(u);

    ck_assert_int_eq(db_usage_list(d, "a", 3000, 0, &u, &n, err, sizeof(err)), 0);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(u[0].ts_ms, 6000);
    ck_assert_int_eq(u[2].ts_ms, 3000);
    free(u);
    ck_assert_int_eq(db_usage_list(d, NULL, 2500, 2, &u, &n, err, sizeof(err)), 0);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(u[0].ts_ms, 6000);
    ck_assert_int_eq(u[1].ts_ms, 5000);
    free(u);
    ck_assert_int_eq(db_usage_list(d, "nobody", 0, 0, &u, &n, err, sizeof(err)), 0);
    ck_assert_int_eq(n, 0);
    free(u);
    db_close(d);
}
END_TEST

START_TEST(usage_summary_totals_per_tenant)
{
    struct db *d = open_new();
    insert_sample(d);
    struct db_usage_sum *s;
    int n;
    ck_assert_int_eq(db_usage_summary(d, NULL, 0, &s, &n, err, sizeof(err)), 0);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(s[0].tenant, "a");
    ck_assert_int_eq(s[0].requests, 4);
    ck_assert_int_eq(s[0].errors, 1); /* the "error"; "aborted" with 200 is not one */
    ck_assert_int_eq(s[0].prompt_tokens, 100);
    ck_assert_int_eq(s[0].cached_tokens, 5 + 10 + 15 + 20);
    ck_assert_int_eq(s[0].completion_tokens, 21);
    ck_assert_double_eq_tol(s[0].mean_ttft_ms, 40.0, 1e-9); /* 20, 40, 60: the 0 is left out */
    ck_assert_double_eq_tol(s[0].mean_total_ms, 100.0, 1e-9);
    ck_assert_str_eq(s[1].tenant, "b");
    ck_assert_int_eq(s[1].requests, 2);
    ck_assert_int_eq(s[1].errors, 1); /* status 429 */
    ck_assert_int_eq(s[1].prompt_tokens, 108);
    free(s);

    ck_assert_int_eq(db_usage_summary(d, "a", 3500, &s, &n, err, sizeof(err)), 0);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(s[0].requests, 2);
    ck_assert_int_eq(s[0].errors, 0);
    ck_assert_int_eq(s[0].completion_tokens, 16);
    free(s);
    ck_assert_int_eq(db_usage_summary(d, NULL, 7000, &s, &n, err, sizeof(err)), 0);
    ck_assert_int_eq(n, 0);
    free(s);
    db_close(d);
}
END_TEST

/* ----------------------------------------------------------------- writer */

struct done_count {
    pthread_mutex_t mu;
    int ok, failed;
};

static void count_done(void *arg, int ok)
{
    struct done_count *c = arg;
    pthread_mutex_lock(&c->mu);
    if (ok)
        c->ok++;
    else
        c->failed++;
    pthread_mutex_unlock(&c->mu);
}

struct pusher {
    struct db_writer *w;
    struct done_count *c;
    int id, n, rejected;
};

static void *push_many(void *arg)
{
    struct pusher *p = arg;
    for (int i = 0; i < p->n; i++) {
        struct db_usage u = rec(p->id * 100000 + i, "acme", i, 1, 1, "stop", 200);
        snprintf(u.request_id, sizeof(u.request_id), "t%d-%d", p->id, i);
        if (db_writer_push(p->w, &u, count_done, p->c) < 0)
            p->rejected++;
    }
    return NULL;
}

START_TEST(writer_commits_every_record_pushed_by_four_threads)
{
    db_close(open_new());
    struct db_writer *w;
    ck_assert_msg(db_writer_start(tpath, &w, err, sizeof(err)) == 0, "%s", err);
    struct done_count c = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct pusher p[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        p[i] = (struct pusher){.w = w, .c = &c, .id = i, .n = 500};
        ck_assert_int_eq(pthread_create(&th[i], NULL, push_many, &p[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(p[i].rejected, 0);
    }
    db_writer_stop(w);
    ck_assert_int_eq(c.ok, 2000);
    ck_assert_int_eq(c.failed, 0);

    struct db *d;
    ck_assert_int_eq(db_open(tpath, 0, &d, err, sizeof(err)), 0);
    struct db_usage *u;
    int n;
    ck_assert_int_eq(db_usage_list(d, "acme", 0, 0, &u, &n, err, sizeof(err)), 0);
    ck_assert_int_eq(n, 2000);
    /* Each thread's records, each exactly once. */
    static unsigned char seen[4][500];
    memset(seen, 0, sizeof(seen));
    for (int i = 0; i < n; i++) {
        int t, k;
        ck_assert_int_eq(sscanf(u[i].request_id, "t%d-%d", &t, &k), 2);
        ck_assert(t >= 0 && t < 4 && k >= 0 && k < 500);
        ck_assert_int_eq(seen[t][k]++, 0);
        ck_assert_int_eq(u[i].ts_ms, t * 100000 + k);
    }
    free(u);
    db_close(d);
}
END_TEST

START_TEST(writer_flush_waits_for_commit_and_callbacks)
{
    db_close(open_new());
    struct db_writer *w;
    ck_assert_int_eq(db_writer_start(tpath, &w, err, sizeof(err)), 0);
    struct db *reader;
    ck_assert_int_eq(db_open(tpath, 0, &reader, err, sizeof(err)), 0);
    int64_t v0 = db_data_version(reader);
    struct done_count c = {.mu = PTHREAD_MUTEX_INITIALIZER};
    for (int round = 1; round <= 3; round++) {
        for (int i = 0; i < 10; i++) {
            struct db_usage u = rec(round * 100 + i, "acme", 1, 1, 1, "stop", 200);
            ck_assert_int_eq(db_writer_push(w, &u, count_done, &c), 0);
        }
        ck_assert_int_eq(db_writer_push(w, &(struct db_usage){.tenant = "x"}, NULL, NULL), 0);
        db_writer_flush(w);
        pthread_mutex_lock(&c.mu);
        ck_assert_int_eq(c.ok, 10 * round);
        pthread_mutex_unlock(&c.mu);
        struct db_usage *u;
        int n;
        ck_assert_int_eq(db_usage_list(reader, "acme", 0, 0, &u, &n, err, sizeof(err)), 0);
        ck_assert_int_eq(n, 10 * round);
        free(u);
        struct db_writer_stats s;
        db_writer_stats(w, &s);
        ck_assert_int_eq(s.rows, 11 * round);
        ck_assert_int_eq(s.queued, 0);
        ck_assert_int_eq(s.failed, 0);
        ck_assert_int_ge(s.batches, round);
        ck_assert_int_le(s.batches, 11 * round);
    }
    ck_assert_int_ne(db_data_version(reader), v0);
    char last[64] = "junk";
    db_writer_last_error(w, last, sizeof(last));
    ck_assert_str_eq(last, "");
    db_writer_stop(w);
    db_close(reader);
}
END_TEST

/* A writer locked out by another connection keeps its records queued, not
 * lost, and commits them once the lock goes. */
START_TEST(writer_waits_out_a_held_write_lock)
{
    db_close(open_new());
    struct db_writer *w;
    ck_assert_int_eq(db_writer_start(tpath, &w, err, sizeof(err)), 0);
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(tpath, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    struct done_count c = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct db_usage u = rec(1, "acme", 1, 1, 1, "stop", 200);
    ck_assert_int_eq(db_writer_push(w, &u, count_done, &c), 0);
    usleep(300 * 1000);
    pthread_mutex_lock(&c.mu);
    ck_assert_int_eq(c.ok + c.failed, 0);
    pthread_mutex_unlock(&c.mu);
    ck_assert_int_eq(sqlite3_exec(h, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
    db_writer_stop(w);
    ck_assert_int_eq(c.ok, 1);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM usage"), 1);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("db");
    TCase *tc = tcase_create("open");
    tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
    tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, fresh_db_has_the_latest_version_in_wal_mode);
    tcase_add_test(tc, reopening_is_idempotent_and_keeps_rows);
    tcase_add_test(tc, version_1_file_is_upgraded_and_keeps_its_tenants);
    tcase_add_test(tc, newer_version_is_refused_with_a_message);
    tcase_add_test(tc, missing_file_without_create_names_the_path);
    tcase_add_test(tc, file_that_is_not_sqlite_is_refused);
    tcase_add_test(tc, directory_path_is_refused);
    tcase_add_test(tc, data_version_changes_when_another_connection_commits);
    tcase_add_test(tc, config_version_moves_with_tenants_and_keys_but_not_usage);
    tcase_add_test(tc, commits_survive_sigkill);
    suite_add_tcase(s, tc);

    tc = tcase_create("tenants_keys");
    tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
    tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, tenant_add_get_list_and_duplicates);
    tcase_add_test(tc, tenant_names_outside_the_alphabet_are_refused);
    tcase_add_test(tc, tenant_fields_out_of_range_are_refused_by_add_and_update);
    tcase_add_test(tc, tenant_update_stores_every_field_but_keeps_id_and_created);
    tcase_add_test(tc, tenant_delete_takes_its_keys_and_leaves_its_usage);
    tcase_add_test(tc, key_create_format_hash_and_nothing_of_it_stored);
    tcase_add_test(tc, key_create_refuses_bad_input);
    tcase_add_test(tc, key_list_filters_by_tenant_oldest_first);
    tcase_add_test(tc, revoke_by_prefix_id_and_whole_key);
    tcase_add_test(tc, ambiguous_prefix_is_an_error_until_one_key_is_left);
    suite_add_tcase(s, tc);

    tc = tcase_create("usage_writer");
    tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
    tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, usage_list_newest_first_with_filters_and_limit);
    tcase_add_test(tc, usage_summary_totals_per_tenant);
    tcase_add_test(tc, writer_commits_every_record_pushed_by_four_threads);
    tcase_add_test(tc, writer_flush_waits_for_commit_and_callbacks);
    tcase_add_test(tc, writer_waits_out_a_held_write_lock);
    suite_add_tcase(s, tc);
    return s;
}
