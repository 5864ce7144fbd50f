/*
 * tests/unit/test_daemon_quota.c — per-tenant quotas of a real llmd:
 * requests per minute, tokens per minute, concurrent requests, the token cap
 * of one request and the priority ceiling.
 *
 * A 429 must carry a Retry-After that is honest: consistent with the token
 * bucket (capacity = the per-minute quota, refilled evenly over the minute),
 * and long enough that a client which waits that long then gets in.  Each
 * test has a tenant of its own, so the buckets of one test never feed
 * another; one daemon serves them all.
 */
#include "tests/unit/util_llmd.h"

#include <check.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct ul_env *E;
static char K_RPM3[128], K_RPM60[128], K_TPM[128], K_CONC[128], K_CAP[128], K_CEIL[128];

#define CHAT  "/v1/chat/completions"
#define COMPL "/v1/completions"

static void tenant(const char *name, const char *flag, const char *value, char *key)
{
    ck_assert_int_eq(ul_tenant_add(E, name, flag, value, UL_END), 0);
    ck_assert_int_eq(ul_key_create(E, name, key, 128, NULL), 0);
}

static void setup(void)
{
    E = ul_env_new();
    ck_assert_msg(E != NULL, "test environment");
    tenant("rpm3", "--rpm", "3", K_RPM3);
    tenant("rpm60", "--rpm", "60", K_RPM60);
    tenant("tpm", "--tpm", "600", K_TPM);
    tenant("conc", "--max-concurrent", "1", K_CONC);
    tenant("cap", "--max-tokens", "50", K_CAP);
    tenant("ceil", "--max-priority", "3", K_CEIL);
    ck_assert_msg(ul_start(E, NULL) == 0, "llmd did not start");
}

static void teardown(void)
{
    if (E && E->pid > 0 && ul_stop(E, 60) != 0)
        ul_dump_log(E);
    ul_env_free(E);
    E = NULL;
}

/* ------------------------------------------------------------- helpers */

/* A chat body; priority < 0 leaves it out. */
static char *chat(int max_tokens, int priority)
{
    json_t *b =
        json_pack("{s:s, s:[{s:s, s:s}], s:i, s:f}", "model", E->model_id, "messages", "role",
                  "user", "content", "Hi", "max_tokens", max_tokens, "temperature", 0.0);
    if (priority >= 0)
        json_object_set_new(b, "priority", json_integer(priority));
    char *s = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return s;
}

/* A completion of n_ids token ids. */
static char *ids_prompt(int n_ids, int max_tokens)
{
    size_t cap = (size_t)n_ids * 8 + 1024, len;
    char *s = malloc(cap);
    len = (size_t)snprintf(s, cap, "{\"model\":\"%s\",\"max_tokens\":%d,\"prompt\":[", E->model_id,
                           max_tokens);
    for (int i = 0; i < n_ids; i++)
        len += (size_t)snprintf(s + len, cap - len, "%s%d", i ? "," : "", 200 + i % 500);
    snprintf(s + len, cap - len, "]}");
    return s;
}

/* POSTs body (freed) with key; returns the status, r filled. */
static int post(const char *path, const char *key, char *body, struct ul_resp *r)
{
    int rc = ul_request(E, "POST", path, key, body, NULL, r);
    free(body);
    ck_assert_msg(rc == 0, "no response");
    return r->status;
}

/* r is a 429 rate_limit_error; returns its Retry-After in seconds. */
static long expect_429(struct ul_resp *r)
{
    ck_assert_msg(r->status == 429, "status %d, want 429: %s", r->status, r->body);
    ck_assert_msg(json_is_string(ul_jget(r->json, "error.message")), "not OpenAI-shaped: %s",
                  r->body);
    ck_assert_str_eq(ul_jstr(r->json, "error.type"), "rate_limit_error");
    char v[64];
    ck_assert_msg(ul_header(r, "Retry-After", v, sizeof(v)) != NULL, "429 without Retry-After");
    char *end;
    long ra = strtol(v, &end, 10);
    ck_assert_msg(*end == '\0' && end != v, "Retry-After is not whole seconds: '%s'", v);
    ck_assert_msg(ra >= 1 && ra <= 60, "Retry-After %ld not in 1..60", ra);
    return ra;
}

/* ---------------------------------------------------------------- tests */

START_TEST(rpm3_fourth_request_in_a_minute_is_429_with_an_honest_retry_after)
{
    struct ul_resp r;
    double t0 = ul_now();
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(post(CHAT, K_RPM3, chat(1, -1), &r) == 200, "request %d: %d %s", i + 1,
                      r.status, r.body);
        ul_resp_free(&r);
    }
    post(CHAT, K_RPM3, chat(1, -1), &r);
    double elapsed = ul_now() - t0;
    long ra = expect_429(&r);
    ul_resp_free(&r);
    /* one request comes back every 20 s, counted from the first one */
    ck_assert_msg(ra <= 21 && ra >= (long)floor(20 - elapsed) - 1,
                  "Retry-After %ld, but the next slot is %.1f s away", ra, 20 - elapsed);
}
END_TEST

START_TEST(rpm60_retry_after_one_second_then_the_request_succeeds)
{
    struct ul_resp r;
    int n = 0;
    while (n < 300 && post(CHAT, K_RPM60, chat(1, -1), &r) == 200) {
        ul_resp_free(&r);
        n++;
    }
    ck_assert_msg(n >= 59 && n < 300, "%d requests before the first 429", n);
    long ra = expect_429(&r);
    ul_resp_free(&r);
    ck_assert_int_eq(ra, 1); /* a whole request refills within a second */
    ul_sleep((double)ra + 0.1);
    ck_assert_msg(post(CHAT, K_RPM60, chat(1, -1), &r) == 200,
                  "waited the Retry-After of %ld s and still got %d %s", ra, r.status, r.body);
    ul_resp_free(&r);
}
END_TEST

START_TEST(tpm_over_what_is_left_is_429_and_over_the_whole_quota_is_400)
{
    struct ul_resp r;
    double t0 = ul_now();
    ck_assert_msg(post(COMPL, K_TPM, ids_prompt(500, 1), &r) == 200, "%d %s", r.status, r.body);
    ck_assert_int_eq(json_integer_value(ul_jget(r.json, "usage.prompt_tokens")), 500);
    ul_resp_free(&r);
    /* about 99 of 600 are left (plus 10 per second): 300 does not fit */
    post(COMPL, K_TPM, ids_prompt(10, 290), &r);
    double elapsed = ul_now() - t0;
    long ra = expect_429(&r);
    ul_resp_free(&r);
    ck_assert_msg(ra <= 21 && ra >= (long)floor((300.0 - 99.0) / 10.0 - elapsed) - 1,
                  "Retry-After %ld for 300 tokens with ~%.0f left at 10/s", ra, 99 + 10 * elapsed);
    /* more than a whole minute's tokens can never be admitted: not a 429 */
    post(COMPL, K_TPM, ids_prompt(10, 700), &r);
    ck_assert_msg(r.status == 400, "status %d, want 400: %s", r.status, r.body);
    ck_assert_str_eq(ul_jstr(r.json, "error.type"), "invalid_request_error");
    ul_resp_free(&r);
}
END_TEST

START_TEST(max_concurrent_one_refuses_a_second_request_while_a_stream_is_open)
{
    struct ul_conn *c = ul_connect(E, 60);
    ck_assert_ptr_nonnull(c);
    char body[1024];
    snprintf(body, sizeof(body),
             "{\"model\":\"%s\",\"prompt\":\"1, 2, 3, 4, 5, 6,\",\"max_tokens\":48,"
             "\"temperature\":0,\"stream\":true}",
             E->model_id);
    ck_assert_int_eq(ul_send(c, "POST", COMPL, K_CONC, body, NULL), 0);
    struct ul_resp head, r;
    ck_assert_int_eq(ul_read_head(c, &head), 0);
    ck_assert_int_eq(head.status, 200);
    ul_resp_free(&head);
    char *ev;
    ck_assert_int_eq(ul_sse_next(c, &ev), 1);
    free(ev);
    post(CHAT, K_CONC, chat(1, -1), &r);
    expect_429(&r);
    ul_resp_free(&r);
    int done = 0;
    json_t *rest = ul_sse_collect(c, &done);
    ck_assert_msg(rest && done, "the open stream did not finish");
    json_decref(rest);
    ul_conn_close(c);
    /* the slot comes back once the stream is over */
    int st = 0;
    for (double deadline = ul_now() + 5; ul_now() < deadline; ul_sleep(0.1)) {
        st = post(CHAT, K_CONC, chat(1, -1), &r);
        ul_resp_free(&r);
        if (st == 200)
            break;
    }
    ck_assert_int_eq(st, 200);
}
END_TEST

START_TEST(max_tokens_cap_of_the_tenant_is_400_naming_max_tokens)
{
    struct ul_resp r;
    post(CHAT, K_CAP, chat(100, -1), &r);
    ck_assert_msg(r.status == 400, "status %d: %s", r.status, r.body);
    ck_assert_str_eq(ul_jstr(r.json, "error.type"), "invalid_request_error");
    ck_assert_msg(ul_jstr(r.json, "error.param") &&
                      strcmp(ul_jstr(r.json, "error.param"), "max_tokens") == 0,
                  "param: %s", r.body);
    ul_resp_free(&r);
    ck_assert_msg(post(CHAT, K_CAP, chat(4, -1), &r) == 200, "within the cap: %d %s", r.status,
                  r.body);
    ul_resp_free(&r);
}
END_TEST

START_TEST(priority_above_the_ceiling_is_clamped_others_are_not)
{
    struct ul_resp r;
    char v[128];
    ck_assert_int_eq(post(CHAT, K_CEIL, chat(1, 1), &r), 200);
    ck_assert_msg(ul_header(&r, "llmd-priority", v, sizeof(v)) != NULL, "no llmd-priority");
    ck_assert_str_eq(v, "3; clamped-from=1");
    ul_resp_free(&r);
    const int fine[] = {3, 6, -1};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(post(CHAT, K_CEIL, chat(1, fine[i]), &r), 200);
        ck_assert_msg(!ul_header(&r, "llmd-priority", v, sizeof(v)) || !strstr(v, "clamped"),
                      "priority %d was not above the ceiling: %s", fine[i], v);
        ul_resp_free(&r);
    }
}
END_TEST

START_TEST(sigterm_stops_the_daemon_without_sanitizer_reports)
{
    ul_signal(E, SIGTERM);
    ck_assert_msg(ul_wait_gone(E, 60) == 0, "llmd still running 60 s after SIGTERM");
    ck_assert_msg(ul_log_clean(E), "the daemon's log holds a sanitizer report");
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("daemon_quota");
    TCase *tc = tcase_create("quota");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, rpm3_fourth_request_in_a_minute_is_429_with_an_honest_retry_after);
    tcase_add_test(tc, rpm60_retry_after_one_second_then_the_request_succeeds);
    tcase_add_test(tc, tpm_over_what_is_left_is_429_and_over_the_whole_quota_is_400);
    tcase_add_test(tc, max_concurrent_one_refuses_a_second_request_while_a_stream_is_open);
    tcase_add_test(tc, max_tokens_cap_of_the_tenant_is_400_naming_max_tokens);
    tcase_add_test(tc, priority_above_the_ceiling_is_clamped_others_are_not);
    tcase_add_test(tc, sigterm_stops_the_daemon_without_sanitizer_reports); /* last */
    suite_add_tcase(s, tc);
    return s;
}
