/*
 * tests/unit/test_tenants.c — API key authentication and per-tenant quotas:
 * every way a key is refused, reloads that pick up changes made through
 * another DB connection, each quota tripping exactly at its limit with a
 * retry_after that is honest (waiting that long is enough, a moment less is
 * not), refunds and priority clamping.  Time is driven through the `now`
 * arguments: nothing sleeps.
 */
#include "daemon/tenants.h"

#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A fresh DB in its own directory, with an admin connection beside the
 * table's, as llmadmin would have. */
struct fx {
    char dir[64], path[96];
    struct db *adm;
    struct tn_table *tt;
};

static void fx_init(struct fx *f)
{
    char err[256];
    snprintf(f->dir, sizeof(f->dir), "/tmp/test_tenants.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/llmd.db", f->dir);
    ck_assert_msg(db_open(f->path, 1, &f->adm, err, sizeof(err)) == 0, "db_open: %s", err);
    f->tt = NULL;
}

static void fx_load(struct fx *f)
{
    char err[256];
    ck_assert_msg(tn_open(f->path, &f->tt, err, sizeof(err)) == 0, "tn_open: %s", err);
}

static void fx_free(struct fx *f)
{
    char p[128];
    tn_close(f->tt);
    db_close(f->adm);
    const char *suffix[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof(suffix) / sizeof(*suffix); i++) {
        snprintf(p, sizeof(p), "%s%s", f->path, suffix[i]);
        unlink(p);
    }
    rmdir(f->dir);
}

/* Adds tenant name with the caps given by the caller's edits of dt. */
static void add_tenant(struct fx *f, struct db_tenant *dt, const char *name)
{
    char err[256];
    snprintf(dt->name, sizeof(dt->name), "%s", name);
    ck_assert_msg(db_tenant_add(f->adm, dt, err, sizeof(err)) == 0, "tenant add: %s", err);
}

static void add_plain_tenant(struct fx *f, const char *name)
{
    struct db_tenant dt;
    db_tenant_defaults(&dt);
    add_tenant(f, &dt, name);
}

/* Creates a key and returns "Bearer KEY" in hdr. */
static int64_t add_key(struct fx *f, const char *tenant, int64_t expires, char *hdr, size_t cap)
{
    char err[256], key[DB_KEY_MAX];
    struct db_key k;
    ck_assert_msg(
        db_key_create(f->adm, tenant, "test", expires, key, sizeof(key), &k, err, sizeof(err)) == 0,
        "key create: %s", err);
    snprintf(hdr, cap, "Bearer %s", key);
    return k.id;
}

static void set_tenant(struct fx *f, const struct db_tenant *dt)
{
    char err[256];
    ck_assert_msg(db_tenant_update(f->adm, dt, err, sizeof(err)) == 0, "update: %s", err);
}

static void refresh(struct fx *f, int expect)
{
    char err[256];
    int rc = tn_refresh(f->tt, err, sizeof(err));
    ck_assert_msg(rc == expect, "tn_refresh = %d (want %d): %s", rc, expect, rc < 0 ? err : "");
}

static void assert_refused(struct tn_table *tt, const char *hdr, int status, const char *code,
                           const char *words)
{
    struct tn_tenant *t = (struct tn_tenant *)1;
    int64_t id = 99;
    struct api_error e;
    ck_assert_int_eq(tn_auth(tt, hdr, 1e9, &t, &id, &e), -1);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(e.status, status);
    ck_assert_str_eq(e.code, code);
    ck_assert_str_eq(e.type, status == 401 ? "authentication_error" : "permission_error");
    ck_assert_msg(strstr(e.message, words), "message '%s' lacks '%s'", e.message, words);
}

/* ------------------------------------------------------------------ auth */

START_TEST(auth_accepts_bearer_in_any_case_with_spaces_around)
{
    struct fx f = {0};
    fx_init(&f);
    add_plain_tenant(&f, "alpha");
    char hdr[128];
    int64_t id = add_key(&f, "alpha", 0, hdr, sizeof(hdr));
    fx_load(&f);
    const char *key = hdr + strlen("Bearer ");
    char forms[4][160];
    snprintf(forms[0], sizeof(forms[0]), "Bearer %s", key);
    snprintf(forms[1], sizeof(forms[1]), "bearer   %s  ", key);
    snprintf(forms[2], sizeof(forms[2]), "  BEARER\t%s", key);
    snprintf(forms[3], sizeof(forms[3]), "bEaReR %s\t", key);
    for (int i = 0; i < 4; i++) {
        struct tn_tenant *t = NULL;
        int64_t kid = 0;
        struct api_error e;
        ck_assert_msg(tn_auth(f.tt, forms[i], 1e9, &t, &kid, &e) == 0, "form %d: %s", i, e.message);
        ck_assert_str_eq(t->cfg.name, "alpha");
        ck_assert_ptr_eq(t, tn_find(f.tt, "alpha"));
        ck_assert_int_eq(kid, id);
    }
    fx_free(&f);
}
END_TEST

START_TEST(auth_refuses_missing_garbled_and_unknown_keys)
{
    struct fx f = {0};
    fx_init(&f);
    add_plain_tenant(&f, "alpha");
    char hdr[128], other[160];
    add_key(&f, "alpha", 0, hdr, sizeof(hdr));
    fx_load(&f);
    assert_refused(f.tt, NULL, 401, "missing_api_key", "API key");
    assert_refused(f.tt, "", 401, "missing_api_key", "API key");
    const char *garbled[] = {"Basic dXNlcjpwdw==", "Bearer", "Bearer   ", "Bearersk-llmd-00",
                             "Bearer sk-llmd-a sk-llmd-b"};
    for (size_t i = 0; i < sizeof(garbled) / sizeof(*garbled); i++)
        assert_refused(f.tt, garbled[i], 401, "invalid_api_key", "Malformed");
    assert_refused(f.tt, "Bearer sk-llmd-000000000000000000000000000000000000000000000000", 401,
                   "invalid_api_key", "Incorrect");
    /* the real key with one character changed, and with one more */
    snprintf(other, sizeof(other), "%s", hdr);
    other[strlen(other) - 1] ^= 1;
    assert_refused(f.tt, other, 401, "invalid_api_key", "Incorrect");
    snprintf(other, sizeof(other), "%sa", hdr);
    assert_refused(f.tt, other, 401, "invalid_api_key", "Incorrect");
    fx_free(&f);
}
END_TEST

START_TEST(auth_refuses_revoked_key_after_reload_and_keeps_the_others)
{
    struct fx f = {0};
    fx_init(&f);
    add_plain_tenant(&f, "alpha");
    char h1[128], h2[128], err[256];
    int64_t id1 = add_key(&f, "alpha", 0, h1, sizeof(h1));
    int64_t id2 = add_key(&f, "alpha", 0, h2, sizeof(h2));
    fx_load(&f);
    refresh(&f, 0);
    char what[32];
    snprintf(what, sizeof(what), "%lld", (long long)id1);
    ck_assert_int_eq(db_key_revoke(f.adm, what, err, sizeof(err)), 1);
    refresh(&f, 1);
    refresh(&f, 0);
    assert_refused(f.tt, h1, 401, "invalid_api_key", "revoked");
    struct tn_tenant *t;
    int64_t kid;
    struct api_error e;
    ck_assert_int_eq(tn_auth(f.tt, h2, 1e9, &t, &kid, &e), 0);
    ck_assert_int_eq(kid, id2);
    fx_free(&f);
}
END_TEST

START_TEST(auth_refuses_expired_key_from_its_expiry_on)
{
    struct fx f = {0};
    fx_init(&f);
    add_plain_tenant(&f, "alpha");
    char hdr[128];
    int64_t expires = 4000000000LL;
    add_key(&f, "alpha", expires, hdr, sizeof(hdr));
    fx_load(&f);
    struct tn_tenant *t;
    int64_t kid;
    struct api_error e;
    ck_assert_int_eq(tn_auth(f.tt, hdr, (double)expires - 1.0, &t, &kid, &e), 0);
    ck_assert_int_eq(tn_auth(f.tt, hdr, (double)expires, &t, &kid, &e), -1);
    ck_assert_int_eq(e.status, 401);
    ck_assert_str_eq(e.code, "invalid_api_key");
    ck_assert_ptr_nonnull(strstr(e.message, "expired"));
    fx_free(&f);
}
END_TEST

START_TEST(auth_refuses_disabled_tenant_with_403_until_enabled)
{
    struct fx f = {0};
    fx_init(&f);
    add_plain_tenant(&f, "alpha");
    char hdr[128];
    add_key(&f, "alpha", 0, hdr, sizeof(hdr));
    fx_load(&f);
    struct db_tenant dt = tn_find(f.tt, "alpha")->cfg;
    dt.enabled = 0;
    set_tenant(&f, &dt);
    refresh(&f, 1);
    assert_refused(f.tt, hdr, 403, "tenant_disabled", "disabled");
    dt.enabled = 1;
    set_tenant(&f, &dt);
    refresh(&f, 1);
    struct tn_tenant *t;
    int64_t kid;
    struct api_error e;
    ck_assert_int_eq(tn_auth(f.tt, hdr, 1e9, &t, &kid, &e), 0);
    fx_free(&f);
}
END_TEST

START_TEST(reload_adds_tenants_and_keeps_live_state_by_name)
{
    struct fx f = {0};
    fx_init(&f);
    add_plain_tenant(&f, "alpha");
    char ha[128], hb[128];
    add_key(&f, "alpha", 0, ha, sizeof(ha));
    fx_load(&f);
    ck_assert_int_eq(tn_count(f.tt), 1);
    struct tn_tenant *a = tn_find(f.tt, "alpha");
    struct api_error e;
    ck_assert_int_eq(tn_admit(f.tt, a, 10, 0.0, &e), 0);
    assert_refused(f.tt, "Bearer sk-llmd-0123456789", 401, "invalid_api_key", "Incorrect");

    add_plain_tenant(&f, "beta");
    add_key(&f, "beta", 0, hb, sizeof(hb));
    refresh(&f, 1);
    ck_assert_int_eq(tn_count(f.tt), 2);
    ck_assert_ptr_eq(tn_find(f.tt, "alpha"), a);
    ck_assert_int_eq(a->in_flight, 1);
    ck_assert_int_eq(a->admitted, 1);
    struct tn_tenant *t;
    int64_t kid;
    ck_assert_int_eq(tn_auth(f.tt, hb, 1e9, &t, &kid, &e), 0);
    ck_assert_str_eq(t->cfg.name, "beta");
    ck_assert_ptr_eq(t, tn_find(f.tt, "beta"));
    ck_assert(tn_at(f.tt, 0) == t || tn_at(f.tt, 1) == t);
    ck_assert_ptr_null(tn_at(f.tt, 2));
    ck_assert_ptr_null(tn_find(f.tt, "gamma"));
    fx_free(&f);
}
END_TEST

START_TEST(reload_disables_a_deleted_tenant_but_keeps_its_struct)
{
    struct fx f = {0};
    fx_init(&f);
    add_plain_tenant(&f, "alpha");
    add_plain_tenant(&f, "gone");
    char hdr[128];
    add_key(&f, "gone", 0, hdr, sizeof(hdr));
    fx_load(&f);
    struct tn_tenant *g = tn_find(f.tt, "gone");
    struct api_error e;
    ck_assert_int_eq(tn_admit(f.tt, g, 1, 0.0, &e), 0);
    /* db.h has no delete: do what an operator's sqlite3 shell would */
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(f.path, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h,
                                  "PRAGMA foreign_keys=ON; DELETE FROM tenants WHERE name='gone'",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(h);
    refresh(&f, 1);
    ck_assert_ptr_eq(tn_find(f.tt, "gone"), g);
    ck_assert_int_eq(g->cfg.enabled, 0);
    ck_assert_int_eq(g->in_flight, 1);
    ck_assert_int_eq(tn_find(f.tt, "alpha")->cfg.enabled, 1);
    assert_refused(f.tt, hdr, 401, "invalid_api_key", "Incorrect");
    tn_release(f.tt, g, 1, 1, 1.0);
    ck_assert_int_eq(g->in_flight, 0);
    fx_free(&f);
}
END_TEST

/* ---------------------------------------------------------------- quotas */

/* A table with one tenant "q" whose caps the caller set in dt. */
static struct tn_tenant *quota_fixture(struct fx *f, struct db_tenant *dt)
{
    fx_init(f);
    add_tenant(f, dt, "q");
    fx_load(f);
    struct tn_tenant *t = tn_find(f->tt, "q");
    ck_assert_ptr_nonnull(t);
    return t;
}

static void admit_ok(struct fx *f, struct tn_tenant *t, int tokens, double now)
{
    struct api_error e;
    ck_assert_msg(tn_admit(f->tt, t, tokens, now, &e) == 0, "admit %d at %g: %d %s", tokens, now,
                  e.status, e.message);
}

static void admit_refused(struct fx *f, struct tn_tenant *t, int tokens, double now, int status,
                          const char *code, double retry_after)
{
    struct api_error e;
    int in_flight = t->in_flight;
    struct tn_bucket rb = t->req_bucket, tb = t->tok_bucket;
    ck_assert_int_eq(tn_admit(f->tt, t, tokens, now, &e), -1);
    ck_assert_int_eq(e.status, status);
    ck_assert_str_eq(e.code, code);
    ck_assert_double_eq(e.retry_after, retry_after);
    ck_assert_str_eq(e.type, status == 429 ? "rate_limit_error" : "invalid_request_error");
    if (status == 400)
        ck_assert_str_eq(e.param, "max_tokens");
    /* nothing taken: levels only grow with time */
    ck_assert_int_eq(t->in_flight, in_flight);
    ck_assert(t->req_bucket.level >= rb.level);
    ck_assert(t->tok_bucket.level >= tb.level);
}

START_TEST(max_tokens_refuses_one_over_the_cap_with_400)
{
    struct fx f = {0};
    struct db_tenant dt;
    db_tenant_defaults(&dt);
    dt.max_tokens = 100;
    struct tn_tenant *t = quota_fixture(&f, &dt);
    admit_ok(&f, t, 100, 0.0);
    admit_refused(&f, t, 101, 0.0, 400, "max_tokens_exceeded", 0.0);
    ck_assert_int_eq(t->admitted, 1);
    ck_assert_int_eq(t->refused, 1);
    fx_free(&f);
}
END_TEST

START_TEST(concurrency_cap_refuses_the_next_until_one_is_released)
{
    struct fx f = {0};
    struct db_tenant dt;
    db_tenant_defaults(&dt);
    dt.max_concurrent = 2;
    struct tn_tenant *t = quota_fixture(&f, &dt);
    admit_ok(&f, t, 5, 0.0);
    admit_ok(&f, t, 5, 0.0);
    ck_assert_int_eq(t->in_flight, 2);
    admit_refused(&f, t, 5, 100.0, 429, "concurrency_limit", 1.0);
    tn_release(f.tt, t, 5, 5, 100.0);
    ck_assert_int_eq(t->in_flight, 1);
    admit_ok(&f, t, 5, 100.0);
    fx_free(&f);
}
END_TEST

START_TEST(rpm_refuses_the_request_past_the_limit_for_an_honest_wait)
{
    struct fx f = {0};
    struct db_tenant dt;
    db_tenant_defaults(&dt);
    dt.rpm = 3; /* one request back every 20 s */
    struct tn_tenant *t = quota_fixture(&f, &dt);
    for (int i = 0; i < 3; i++) {
        admit_ok(&f, t, 1, 50.0);
        tn_release(f.tt, t, 1, 1, 50.0);
    }
    admit_refused(&f, t, 1, 50.0, 429, "rate_limit_exceeded", 20.0);
    admit_refused(&f, t, 1, 69.9, 429, "rate_limit_exceeded", 1.0);
    admit_ok(&f, t, 1, 70.0);
    admit_refused(&f, t, 1, 70.0, 429, "rate_limit_exceeded", 20.0);
    fx_free(&f);
}
END_TEST

START_TEST(tpm_refuses_tokens_past_the_limit_for_an_honest_wait)
{
    struct fx f = {0};
    struct db_tenant dt;
    db_tenant_defaults(&dt);
    dt.tpm = 600; /* 10 tokens a second */
    struct tn_tenant *t = quota_fixture(&f, &dt);
    admit_ok(&f, t, 500, 0.0);
    admit_ok(&f, t, 100, 0.0); /* exactly the limit */
    admit_refused(&f, t, 1, 0.0, 429, "rate_limit_exceeded", 1.0);
    admit_refused(&f, t, 200, 0.0, 429, "rate_limit_exceeded", 20.0);
    admit_refused(&f, t, 200, 19.99, 429, "rate_limit_exceeded", 1.0);
    admit_ok(&f, t, 200, 20.0);
    /* more than the bucket can ever hold: no wait helps */
    admit_refused(&f, t, 601, 1000.0, 400, "tokens_exceed_quota", 0.0);
    admit_ok(&f, t, 600, 1000.0);
    fx_free(&f);
}
END_TEST

START_TEST(retry_after_is_enough_at_rates_that_are_not_whole)
{
    struct fx f = {0};
    struct db_tenant dt;
    db_tenant_defaults(&dt);
    dt.tpm = 100; /* 5/3 tokens a second */
    dt.rpm = 7;   /* one request every 60/7 s */
    struct tn_tenant *t = quota_fixture(&f, &dt);
    admit_ok(&f, t, 100, 0.0);
    admit_refused(&f, t, 50, 0.0, 429, "rate_limit_exceeded", 30.0);
    admit_refused(&f, t, 50, 29.9, 429, "rate_limit_exceeded", 1.0);
    admit_ok(&f, t, 50, 30.0);
    for (int i = 0; i < 6; i++) {
        admit_ok(&f, t, 0, 30.0);
        tn_release(f.tt, t, 0, 0, 30.0);
    }
    /* the request bucket refilled by 30 s; now empty, it needs 60/7 = 8.57 s */
    admit_refused(&f, t, 0, 30.0, 429, "rate_limit_exceeded", 9.0);
    admit_ok(&f, t, 0, 39.0);
    fx_free(&f);
}
END_TEST

START_TEST(checks_run_in_order_max_tokens_concurrency_requests_tokens)
{
    struct fx f = {0};
    struct db_tenant dt;
    db_tenant_defaults(&dt);
    dt.max_tokens = 50;
    dt.max_concurrent = 1;
    dt.rpm = 1;
    dt.tpm = 60;
    struct tn_tenant *t = quota_fixture(&f, &dt);
    admit_ok(&f, t, 50, 0.0); /* everything now exhausted but tokens (10 left) */
    admit_refused(&f, t, 51, 0.0, 400, "max_tokens_exceeded", 0.0);
    admit_refused(&f, t, 20, 0.0, 429, "concurrency_limit", 1.0);
    tn_release(f.tt, t, 50, 50, 0.0);
    admit_refused(&f, t, 20, 0.0, 429, "rate_limit_exceeded", 60.0);
    admit_refused(&f, t, 70, 60.0, 400, "max_tokens_exceeded", 0.0);
    admit_ok(&f, t, 50, 60.0);
    fx_free(&f);
}
END_TEST

START_TEST(release_refunds_unused_tokens_up_to_the_capacity)
{
    struct fx f = {0};
    struct db_tenant dt;
    db_tenant_defaults(&dt);
    dt.tpm = 600;
    struct tn_tenant *t = quota_fixture(&f, &dt);
    admit_ok(&f, t, 500, 0.0);
    tn_release(f.tt, t, 500, 100, 0.0); /* 400 back: 500 available */
    ck_assert_int_eq(t->in_flight, 0);
    admit_ok(&f, t, 500, 0.0);
    admit_refused(&f, t, 1, 0.0, 429, "rate_limit_exceeded", 1.0);
    /* a full minute later the bucket is full; a refund does not overfill it */
    tn_release(f.tt, t, 500, 0, 60.0);
    ck_assert_double_eq(t->tok_bucket.level, 600.0);
    admit_ok(&f, t, 600, 60.0);
    admit_refused(&f, t, 10, 60.0, 429, "rate_limit_exceeded", 1.0);
    ck_assert_int_eq(t->in_flight, 1);
    fx_free(&f);
}
END_TEST

START_TEST(reload_changes_limits_without_forgetting_what_is_used)
{
    struct fx f = {0};
    struct db_tenant dt;
    db_tenant_defaults(&dt);
    dt.rpm = 10;
    struct tn_tenant *t = quota_fixture(&f, &dt);
    admit_ok(&f, t, 1, 0.0);
    dt = t->cfg;
    dt.rpm = 2;
    dt.tpm = 60;
    set_tenant(&f, &dt);
    refresh(&f, 1);
    ck_assert_ptr_eq(tn_find(f.tt, "q"), t);
    ck_assert_int_eq(t->in_flight, 1);
    ck_assert_double_eq(t->req_bucket.capacity, 2.0);
    /* the request bucket was clamped from 9 to 2; the new tpm bucket starts full */
    admit_ok(&f, t, 60, 0.0);
    admit_ok(&f, t, 0, 0.0);
    admit_refused(&f, t, 0, 0.0, 429, "rate_limit_exceeded", 30.0);
    /* lifting a cap lets everything through */
    dt.rpm = 0;
    dt.tpm = 0;
    set_tenant(&f, &dt);
    refresh(&f, 1);
    for (int i = 0; i < 100; i++)
        admit_ok(&f, t, 1000, 0.0);
    ck_assert_int_eq(t->in_flight, 103);
    fx_free(&f);
}
END_TEST

START_TEST(priority_defaults_and_is_clamped_to_the_ceiling)
{
    struct fx f = {0};
    struct db_tenant dt;
    db_tenant_defaults(&dt);
    dt.default_priority = 5;
    dt.max_priority = 2;
    struct tn_tenant *t = quota_fixture(&f, &dt);
    int clamped = -1;
    ck_assert_int_eq(tn_priority(t, -1, &clamped), 5);
    ck_assert_int_eq(clamped, 0);
    ck_assert_int_eq(tn_priority(t, 0, &clamped), 2);
    ck_assert_int_eq(clamped, 1);
    ck_assert_int_eq(tn_priority(t, 1, &clamped), 2);
    ck_assert_int_eq(clamped, 1);
    ck_assert_int_eq(tn_priority(t, 2, &clamped), 2);
    ck_assert_int_eq(clamped, 0);
    ck_assert_int_eq(tn_priority(t, 7, &clamped), 7);
    ck_assert_int_eq(clamped, 0);
    fx_free(&f);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("tenants");
    TCase *a = tcase_create("auth");
    tcase_add_test(a, auth_accepts_bearer_in_any_case_with_spaces_around);
    tcase_add_test(a, auth_refuses_missing_garbled_and_unknown_keys);
    tcase_add_test(a, auth_refuses_revoked_key_after_reload_and_keeps_the_others);
    tcase_add_test(a, auth_refuses_expired_key_from_its_expiry_on);
    tcase_add_test(a, auth_refuses_disabled_tenant_with_403_until_enabled);
    tcase_add_test(a, reload_adds_tenants_and_keeps_live_state_by_name);
    tcase_add_test(a, reload_disables_a_deleted_tenant_but_keeps_its_struct);
    suite_add_tcase(s, a);
    TCase *q = tcase_create("quotas");
    tcase_add_test(q, max_tokens_refuses_one_over_the_cap_with_400);
    tcase_add_test(q, concurrency_cap_refuses_the_next_until_one_is_released);
    tcase_add_test(q, rpm_refuses_the_request_past_the_limit_for_an_honest_wait);
    tcase_add_test(q, tpm_refuses_tokens_past_the_limit_for_an_honest_wait);
    tcase_add_test(q, retry_after_is_enough_at_rates_that_are_not_whole);
    tcase_add_test(q, checks_run_in_order_max_tokens_concurrency_requests_tokens);
    tcase_add_test(q, release_refunds_unused_tokens_up_to_the_capacity);
    tcase_add_test(q, reload_changes_limits_without_forgetting_what_is_used);
    tcase_add_test(q, priority_defaults_and_is_clamped_to_the_ceiling);
    suite_add_tcase(s, q);
    return s;
}
