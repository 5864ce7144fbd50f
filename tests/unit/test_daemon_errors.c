/*
 * tests/unit/test_daemon_errors.c — a real llmd facing bad clients: broken
 * and oversized requests, bad keys, slow and confused connections, and a
 * crowd of streams a third of which vanish.  Every error must come back with
 * OpenAI's error shape and the right status, type and param, and after each
 * the daemon must still answer a good request.
 *
 * One daemon (with --read-timeout 2) serves the suite; tests that count
 * ledger rows use a tenant of their own, so they do not see each other.
 */
#include "tests/unit/util_llmd.h"

#include <check.h>
#include <signal.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static struct ul_env *E;
static char KEY[128], KEY_REVOKE[128], KEY_OFF[128], KEY_CROWD[128];
static long REVOKE_ID;

#define CHAT  "/v1/chat/completions"
#define COMPL "/v1/completions"

static void setup(void)
{
    E = ul_env_new();
    ck_assert_msg(E != NULL, "test environment");
    ck_assert_int_eq(ul_tenant_add(E, "err", UL_END), 0);
    ck_assert_int_eq(ul_tenant_add(E, "off", UL_END), 0);
    ck_assert_int_eq(ul_tenant_add(E, "crowd", UL_END), 0);
    ck_assert_int_eq(ul_key_create(E, "err", KEY, sizeof(KEY), NULL), 0);
    ck_assert_int_eq(ul_key_create(E, "err", KEY_REVOKE, sizeof(KEY_REVOKE), &REVOKE_ID), 0);
    ck_assert_int_eq(ul_key_create(E, "off", KEY_OFF, sizeof(KEY_OFF), NULL), 0);
    ck_assert_int_eq(ul_key_create(E, "crowd", KEY_CROWD, sizeof(KEY_CROWD), NULL), 0);
    const char *extra[] = {"--read-timeout", "2", "--max-connections", "1024", "--max-queue",
                           "1024",           NULL};
    ck_assert_msg(ul_start(E, extra) == 0, "llmd did not start");
}

static void teardown(void)
{
    if (E && E->pid > 0 && ul_stop(E, 60) != 0)
        ul_dump_log(E);
    ul_env_free(E);
    E = NULL;
}

/* ------------------------------------------------------------- helpers */

static char *good_chat(int max_tokens)
{
    json_t *b =
        json_pack("{s:s, s:[{s:s, s:s}], s:i, s:f}", "model", E->model_id, "messages", "role",
                  "user", "content", "Hi", "max_tokens", max_tokens, "temperature", 0.0);
    char *s = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return s;
}

/* The daemon still serves: a one-token chat answers 200. */
static void assert_alive(void)
{
    char *body = good_chat(1);
    struct ul_resp r;
    int rc = ul_request(E, "POST", CHAT, KEY, body, NULL, &r);
    free(body);
    ck_assert_msg(rc == 0 && r.status == 200, "daemon no longer answers a good request: %d %s",
                  r.status, r.body ? r.body : "(no response)");
    ul_resp_free(&r);
}

/* r is an OpenAI error with this status, type and param (NULL: not checked;
 * "" : must be null), then checks the daemon is alive and frees r. */
static void expect_error(struct ul_resp *r, int status, const char *type, const char *param)
{
    ck_assert_msg(r->status == status, "status %d, want %d: %s", r->status, status, r->body);
    json_t *err = ul_jget(r->json, "error");
    ck_assert_msg(json_is_object(err), "not an OpenAI error body: %s", r->body);
    ck_assert_msg(json_is_string(json_object_get(err, "message")), "no message: %s", r->body);
    ck_assert_msg(json_is_string(json_object_get(err, "type")), "no type: %s", r->body);
    ck_assert_msg(json_object_get(err, "param") && json_object_get(err, "code"),
                  "param and code must be present (maybe null): %s", r->body);
    if (type)
        ck_assert_str_eq(ul_jstr(err, "type"), type);
    if (param && *param)
        ck_assert_msg(ul_jstr(err, "param") && strcmp(ul_jstr(err, "param"), param) == 0,
                      "param should be %s: %s", param, r->body);
    else if (param)
        ck_assert_msg(json_is_null(json_object_get(err, "param")), "param should be null");
    ul_resp_free(r);
    assert_alive();
}

static void post_raw(const char *path, const char *key, const char *body, struct ul_resp *r)
{
    ck_assert_msg(ul_request(E, "POST", path, key, body, NULL, r) == 0, "no response");
}

/* A chat body with field set to the raw JSON value. */
static void post_chat_with(const char *field, const char *value, struct ul_resp *r)
{
    char body[1024];
    snprintf(body, sizeof(body),
             "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"%s\":%s}",
             E->model_id, field, value);
    post_raw(CHAT, KEY, body, r);
}

/* ---------------------------------------------------------- bad bodies */

START_TEST(malformed_json_is_400)
{
    struct ul_resp r;
    post_raw(CHAT, KEY, "{\"model\": \"x\", \"messages\": [", &r);
    expect_error(&r, 400, "invalid_request_error", NULL);
    post_raw(COMPL, KEY, "not json at all", &r);
    expect_error(&r, 400, "invalid_request_error", NULL);
}
END_TEST

START_TEST(wrong_types_are_400_naming_the_field)
{
    struct ul_resp r;
    post_chat_with("max_tokens", "\"x\"", &r);
    expect_error(&r, 400, "invalid_request_error", "max_tokens");
    post_chat_with("temperature", "\"hot\"", &r);
    expect_error(&r, 400, "invalid_request_error", "temperature");
    post_chat_with("stream", "3", &r);
    expect_error(&r, 400, "invalid_request_error", "stream");
    char body[1024];
    snprintf(body, sizeof(body), "{\"model\":\"%s\",\"messages\":5}", E->model_id);
    post_raw(CHAT, KEY, body, &r);
    expect_error(&r, 400, "invalid_request_error", "messages");
}
END_TEST

START_TEST(negative_and_huge_max_tokens_are_400)
{
    struct ul_resp r;
    post_chat_with("max_tokens", "-1", &r);
    expect_error(&r, 400, "invalid_request_error", "max_tokens");
    post_chat_with("max_tokens", "1000000000", &r);
    expect_error(&r, 400, "invalid_request_error", "max_tokens");
    post_chat_with("max_tokens", "1e30", &r);
    expect_error(&r, 400, "invalid_request_error", "max_tokens");
}
END_TEST

START_TEST(prompt_longer_than_the_context_is_400)
{
    size_t n = 9000, cap = n * 8 + 256;
    char *body = malloc(cap);
    size_t len =
        (size_t)snprintf(body, cap, "{\"model\":\"%s\",\"max_tokens\":1,\"prompt\":[", E->model_id);
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(body + len, cap - len, "%s%zu", i ? "," : "", 100 + i % 1000);
    snprintf(body + len, cap - len, "]}");
    struct ul_resp r;
    post_raw(COMPL, KEY, body, &r);
    free(body);
    expect_error(&r, 400, "invalid_request_error", NULL);
}
END_TEST

START_TEST(invalid_utf8_in_a_json_string_is_400)
{
    char body[1024];
    snprintf(body, sizeof(body),
             "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"a\xff\xfe"
             "b\"}],\"max_tokens\":1}",
             E->model_id);
    struct ul_resp r;
    post_raw(CHAT, KEY, body, &r);
    expect_error(&r, 400, "invalid_request_error", NULL);
}
END_TEST

START_TEST(unknown_model_is_404_model_not_found)
{
    struct ul_resp r;
    post_raw(CHAT, KEY,
             "{\"model\":\"no-such-model\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}",
             &r);
    ck_assert_msg(r.status == 404 && ul_jstr(r.json, "error.code"), "%d %s", r.status, r.body);
    ck_assert_str_eq(ul_jstr(r.json, "error.code"), "model_not_found");
    expect_error(&r, 404, NULL, NULL);
}
END_TEST

START_TEST(unknown_path_is_404_and_wrong_method_is_405)
{
    struct ul_resp r;
    ck_assert_int_eq(ul_request(E, "GET", "/v1/nothing-here", KEY, NULL, NULL, &r), 0);
    expect_error(&r, 404, NULL, NULL);
    ck_assert_int_eq(ul_request(E, "GET", CHAT, KEY, NULL, NULL, &r), 0);
    expect_error(&r, 405, NULL, NULL);
    ck_assert_int_eq(ul_request(E, "DELETE", COMPL, KEY, NULL, NULL, &r), 0);
    expect_error(&r, 405, NULL, NULL);
}
END_TEST

/* ---------------------------------------------------------------- auth */

START_TEST(missing_garbled_and_unknown_keys_are_401)
{
    char *body = good_chat(1);
    struct ul_resp r;
    post_raw(CHAT, NULL, body, &r);
    expect_error(&r, 401, NULL, NULL);
    post_raw(CHAT, "sk-llmd-0000000000000000000000000000000000000000000000000", body, &r);
    expect_error(&r, 401, NULL, NULL);
    const char *bad[] = {"Authorization: Basic dXNlcjpwYXNz\r\n", "Authorization: Bearer\r\n",
                         "Authorization: Bearer \x01\x02garbage\r\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_int_eq(ul_request(E, "POST", CHAT, NULL, body, bad[i], &r), 0);
        expect_error(&r, 401, NULL, NULL);
    }
    free(body);
}
END_TEST

/* Polls a one-token chat with key until its status is want (up to secs). */
static int status_within(const char *key, int want, double secs)
{
    char *body = good_chat(1);
    double deadline = ul_now() + secs;
    int st = -1;
    do {
        struct ul_resp r;
        if (ul_request(E, "POST", CHAT, key, body, NULL, &r) == 0)
            st = r.status;
        ul_resp_free(&r);
        if (st == want)
            break;
        ul_sleep(0.1);
    } while (ul_now() < deadline);
    free(body);
    return st;
}

START_TEST(revoked_key_is_refused_within_two_seconds)
{
    ck_assert_int_eq(status_within(KEY_REVOKE, 200, 0), 200);
    char id[32];
    snprintf(id, sizeof(id), "%ld", REVOKE_ID);
    ck_assert_int_eq(ul_admin(E, NULL, "key", "revoke", id, UL_END), 0);
    ck_assert_int_eq(status_within(KEY_REVOKE, 401, 2.0), 401);
    assert_alive();
}
END_TEST

START_TEST(disabled_tenant_is_403)
{
    ck_assert_int_eq(status_within(KEY_OFF, 200, 0), 200);
    ck_assert_int_eq(ul_admin(E, NULL, "tenant", "disable", "off", UL_END), 0);
    ck_assert_int_eq(status_within(KEY_OFF, 403, 2.0), 403);
    char *body = good_chat(1);
    struct ul_resp r;
    post_raw(CHAT, KEY_OFF, body, &r);
    free(body);
    expect_error(&r, 403, NULL, NULL);
}
END_TEST

/* ------------------------------------------------------------ big bodies */

START_TEST(huge_content_length_is_413_without_reading_the_body)
{
    struct ul_conn *c = ul_connect(E, 20);
    ck_assert_ptr_nonnull(c);
    char head[512];
    int n = snprintf(head, sizeof(head),
                     "POST " CHAT " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
                     "Content-Type: application/json\r\nContent-Length: 104857600\r\n\r\n{",
                     KEY);
    ck_assert_int_eq(ul_conn_write(c, head, (size_t)n), 0);
    /* only the first byte of 100 MB is sent: the answer must not wait for the rest */
    struct ul_resp r;
    ck_assert_msg(ul_read_head(c, &r) == 0, "no answer to a 100 MB Content-Length");
    ck_assert_int_eq(r.status, 413);
    ul_resp_free(&r);
    ul_conn_close(c);
    assert_alive();
}
END_TEST

START_TEST(huge_chunked_body_is_413_before_it_ends)
{
    struct ul_conn *c = ul_connect(E, 20);
    ck_assert_ptr_nonnull(c);
    char head[512];
    int n = snprintf(head, sizeof(head),
                     "POST " CHAT " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
                     "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
                     KEY);
    ck_assert_int_eq(ul_conn_write(c, head, (size_t)n), 0);
    size_t chunk = 1 << 20, sent = 0;
    char *buf = malloc(chunk + 32);
    int len = snprintf(buf, 32, "%zx\r\n", chunk);
    memset(buf + len, ' ', chunk);
    memcpy(buf + len + chunk, "\r\n", 2);
    while (sent < 100 * chunk && !ul_conn_readable(c, 0)) {
        if (ul_conn_write(c, buf, (size_t)len + chunk + 2) != 0)
            break;
        sent += chunk;
    }
    free(buf);
    ck_assert_msg(sent < 100 * chunk, "the daemon read all 100 MB");
    struct ul_resp r;
    double t0 = ul_now();
    ck_assert_msg(ul_read_head(c, &r) == 0, "no answer after %zu bytes of a chunked body", sent);
    ck_assert_msg(r.status == 413,
                  "status %d after %zu bytes of a chunked body (answered %.1f s later): %s",
                  r.status, sent, ul_now() - t0, ul_read_body(c, &r) == 0 ? r.body : "");
    ul_resp_free(&r);
    ul_conn_close(c);
    assert_alive();
}
END_TEST

/* ------------------------------------------------------ slow and confused */

START_TEST(header_dripper_does_not_stall_others_and_is_cut_off)
{
    struct ul_conn *c = ul_connect(E, 5);
    ck_assert_ptr_nonnull(c);
    const char *req =
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "X-Slow-1: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n"
        "X-Slow-2: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
    size_t len = strlen(req), i = 0;
    int cut = 0;
    double deadline = ul_now() + 30;
    while (i < len && ul_now() < deadline) {
        if (ul_conn_write(c, req + i, 1) != 0 || ul_conn_readable(c, 0)) {
            cut = 1;
            break;
        }
        i++;
        if (i == 3)
            assert_alive(); /* others are served while the dripper drips */
        ul_sleep(0.25);
    }
    ck_assert_msg(cut, "a client dripping one byte per 0.25 s was still connected after %zu bytes",
                  i);
    /* whatever came back (nothing, or a 408), the connection is over */
    struct ul_resp r;
    if (ul_read_head(c, &r) == 0)
        ck_assert_msg(r.status == 408 || r.status == 400, "dripper got %d", r.status);
    ul_resp_free(&r);
    ul_conn_close(c);
    assert_alive();
}
END_TEST

START_TEST(plain_http_on_the_tls_port_is_closed_quickly)
{
    int fd = ul_tcp_connect(E->port);
    ck_assert_int_ge(fd, 0);
    const char *req = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    ck_assert_int_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[4096];
    ssize_t n;
    size_t total = 0;
    while ((n = read(fd, buf, sizeof(buf))) > 0 && total < 65536)
        total += (size_t)n;
    /* n == 0: closed; n < 0 with ECONNRESET: reset; a timeout is the failure */
    ck_assert_msg(n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK),
                  "plain HTTP on the TLS port was left hanging (%zu bytes back)", total);
    close(fd);
    assert_alive();
}
END_TEST

/* ------------------------------------------------------------ the crowd */

#define CROWD 200

struct crowd_client {
    int vanish; /* drop the connection after the first event */
    int status, events, done;
};

static void *crowd_run(void *arg)
{
    struct crowd_client *cl = arg;
    char body[1024];
    snprintf(body, sizeof(body),
             "{\"model\":\"%s\",\"prompt\":\"1, 2, 3, 4, 5, 6,\",\"max_tokens\":%d,"
             "\"temperature\":0,\"stream\":true}",
             E->model_id, cl->vanish ? 256 : 8);
    struct ul_conn *c = ul_connect(E, 300);
    struct ul_resp r = {0};
    if (!c || ul_send(c, "POST", COMPL, KEY_CROWD, body, NULL) != 0 || ul_read_head(c, &r) != 0) {
        ul_conn_close(c);
        return NULL;
    }
    cl->status = r.status;
    ul_resp_free(&r);
    char *d;
    while (cl->status == 200 && ul_sse_next(c, &d) == 1) {
        cl->done = strcmp(d, "[DONE]") == 0;
        free(d);
        cl->events++;
        if (cl->vanish)
            break;
    }
    ul_conn_close(c);
    return NULL;
}

START_TEST(crowd_of_streams_with_a_third_vanishing_frees_every_block_and_logs_every_request)
{
    static struct crowd_client cl[CROWD];
    pthread_t th[CROWD];
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 256 * 1024);
    int n_vanish = 0;
    for (int i = 0; i < CROWD; i++) {
        cl[i] = (struct crowd_client){.vanish = i % 3 == 0};
        n_vanish += cl[i].vanish;
        ck_assert_int_eq(pthread_create(&th[i], &at, crowd_run, &cl[i]), 0);
    }
    for (int i = 0; i < CROWD; i++)
        pthread_join(th[i], NULL);
    pthread_attr_destroy(&at);
    for (int i = 0; i < CROWD; i++) {
        ck_assert_msg(cl[i].status == 200, "client %d: status %d", i, cl[i].status);
        if (cl[i].vanish)
            ck_assert_msg(cl[i].events == 1, "client %d saw no event before vanishing", i);
        else
            ck_assert_msg(cl[i].done, "client %d: stream ended without [DONE]", i);
    }
    double used = -1, deadline = ul_now() + 15;
    while (ul_now() < deadline) {
        ck_assert_int_eq(ul_metric(E, "llmd_kv_blocks", "pool=\"device\",state=\"used\"", &used),
                         1);
        if (used == 0)
            break;
        ul_sleep(0.2);
    }
    ck_assert_msg(used == 0, "%g device KV blocks still used after every client left", used);
    int rows = -1;
    deadline = ul_now() + 15;
    while (ul_now() < deadline && (rows = ul_ledger_count(E, "crowd", NULL)) < CROWD)
        ul_sleep(0.2);
    ck_assert_msg(rows == CROWD, "ledger has %d rows for %d requests", rows, CROWD);
    int cancelled = ul_ledger_count(E, "crowd", "cancelled");
    ck_assert_msg(cancelled >= 1 && cancelled <= n_vanish,
                  "%d rows cancelled for %d vanished clients", cancelled, n_vanish);
    assert_alive();
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
    Suite *s = suite_create("daemon_errors");
    TCase *tc = tcase_create("errors");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, malformed_json_is_400);
    tcase_add_test(tc, wrong_types_are_400_naming_the_field);
    tcase_add_test(tc, negative_and_huge_max_tokens_are_400);
    tcase_add_test(tc, prompt_longer_than_the_context_is_400);
    tcase_add_test(tc, invalid_utf8_in_a_json_string_is_400);
    tcase_add_test(tc, unknown_model_is_404_model_not_found);
    tcase_add_test(tc, unknown_path_is_404_and_wrong_method_is_405);
    tcase_add_test(tc, missing_garbled_and_unknown_keys_are_401);
    tcase_add_test(tc, revoked_key_is_refused_within_two_seconds);
    tcase_add_test(tc, disabled_tenant_is_403);
    tcase_add_test(tc, huge_content_length_is_413_without_reading_the_body);
    tcase_add_test(tc, huge_chunked_body_is_413_before_it_ends);
    tcase_add_test(tc, header_dripper_does_not_stall_others_and_is_cut_off);
    tcase_add_test(tc, plain_http_on_the_tls_port_is_closed_quickly);
    tcase_add_test(
        tc, crowd_of_streams_with_a_third_vanishing_frees_every_block_and_logs_every_request);
    tcase_add_test(tc, sigterm_stops_the_daemon_without_sanitizer_reports); /* last */
    suite_add_tcase(s, tc);
    return s;
}
