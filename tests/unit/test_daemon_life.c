/*
 * tests/unit/test_daemon_life.c — llmd's life cycle as an operator sees it:
 * --help and bad flags, SIGTERM draining (running streams finish, or are
 * ended with an error event after --drain-timeout; new work is refused; exit
 * status 0; the ledger is flushed), kill -9 right after a response (its
 * ledger row was committed before its last bytes went out), and SIGHUP
 * loading a new TLS certificate for new connections.
 *
 * Each test starts (and ends) a daemon of its own, because each one ends it.
 */
#include "tests/unit/util_llmd.h"

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define COMPL "/v1/completions"

static struct ul_env *E;
static char KEY[128];

/* A fresh environment with tenant "life" and its key; the daemon not started. */
static void env_up(void)
{
    E = ul_env_new();
    ck_assert_msg(E != NULL, "test environment");
    ck_assert_int_eq(ul_tenant_add(E, "life", UL_END), 0);
    ck_assert_int_eq(ul_key_create(E, "life", KEY, sizeof(KEY), NULL), 0);
}

static void start(const char *const *extra)
{
    ck_assert_msg(ul_start(E, extra) == 0, "llmd did not start");
}

static void env_down(void)
{
    ck_assert_msg(ul_log_clean(E), "the daemon's log holds a sanitizer report");
    ul_env_free(E); /* kills a daemon still running */
    E = NULL;
}

/* A completion body that keeps the model counting for up to max_tokens. */
static char *counting(int max_tokens, int stream)
{
    char *s = NULL;
    if (asprintf(&s,
                 "{\"model\":\"%s\",\"prompt\":\"1, 2, 3, 4, 5, 6,\",\"max_tokens\":%d,"
                 "\"temperature\":0,\"stream\":%s}",
                 E->model_id, max_tokens, stream ? "true" : "false") < 0)
        return NULL;
    return s;
}

/* Opens a counting stream and reads its first event; *id gets the request id. */
static struct ul_conn *stream_started(int max_tokens, char *id, size_t cap)
{
    struct ul_conn *c = ul_connect(E, 60);
    ck_assert_ptr_nonnull(c);
    char *body = counting(max_tokens, 1);
    ck_assert_int_eq(ul_send(c, "POST", COMPL, KEY, body, NULL), 0);
    free(body);
    struct ul_resp head;
    ck_assert_int_eq(ul_read_head(c, &head), 0);
    ck_assert_int_eq(head.status, 200);
    ck_assert_ptr_nonnull(ul_header(&head, "llmd-request-id", id, cap));
    ul_resp_free(&head);
    char *ev;
    ck_assert_int_eq(ul_sse_next(c, &ev), 1);
    ck_assert_msg(strcmp(ev, "[DONE]") != 0, "stream over before it started");
    free(ev);
    return c;
}

/* The last JSON event of a finished stream, with a finish_reason or an error. */
static json_t *stream_rest(struct ul_conn *c)
{
    int done = 0;
    json_t *ev = ul_sse_collect(c, &done);
    ck_assert_msg(ev != NULL, "the stream broke off");
    ck_assert_msg(done, "the stream did not end with data: [DONE]");
    ck_assert_uint_ge(json_array_size(ev), 1);
    return ev;
}

/* What a new client gets: 0 when refused or closed unanswered, else the status. */
static int probe(const char *method, const char *path, const char *key, const char *body,
                 struct ul_resp *r)
{
    if (ul_request(E, method, path, key, body, NULL, r) != 0) {
        ul_resp_free(r);
        return 0;
    }
    return r->status;
}

/* Until the daemon notices SIGTERM a probe may still see 200; after it, a
 * new client is refused, or told 503 (with "draining" for /health). */
static void assert_new_work_refused(void)
{
    struct ul_resp r = {0};
    int st = 200;
    for (double deadline = ul_now() + 5; st == 200 && ul_now() < deadline;) {
        ul_resp_free(&r);
        st = probe("GET", "/health", NULL, NULL, &r);
        if (st == 200)
            ul_sleep(0.02);
    }
    ck_assert_msg(st == 0 || st == 503, "/health during the drain: %d %s", st, r.body);
    if (st == 503)
        ck_assert_str_eq(ul_jstr(r.json, "status"), "draining");
    ul_resp_free(&r);
    char *body = counting(2, 0);
    st = probe("POST", COMPL, KEY, body, &r);
    free(body);
    ck_assert_msg(st == 0 || st == 503, "a new completion during the drain: %d %s", st, r.body);
    if (st == 503) {
        char v[32];
        ck_assert_msg(ul_header(&r, "Retry-After", v, sizeof(v)) != NULL,
                      "503 without Retry-After");
        ck_assert_msg(json_is_object(ul_jget(r.json, "error")), "503 body: %s", r.body);
    }
    ul_resp_free(&r);
}

/* The ledger row of request id, after the daemon is gone: its finish (copied). */
static void ledger_finish(const char *id, char *finish, size_t cap)
{
    json_t *rows = ul_ledger(E);
    ck_assert_ptr_nonnull(rows);
    json_t *row = ul_ledger_find(rows, id);
    ck_assert_msg(row != NULL, "no ledger row for %s (%zu rows)", id, json_array_size(rows));
    snprintf(finish, cap, "%s", ul_jstr(row, "finish") ? ul_jstr(row, "finish") : "");
    json_decref(rows);
}

/* ---------------------------------------------------------------- tests */

static int run_llmd(const char *llmd, const char *arg)
{
    pid_t pid = fork();
    if (pid == 0) {
        int nul = open("/dev/null", O_WRONLY);
        dup2(nul, 1);
        dup2(nul, 2);
        execl(llmd, llmd, arg, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(help_and_version_exit_0_and_a_bad_flag_exits_2)
{
    env_up();
    ck_assert_int_eq(run_llmd(E->llmd, "--help"), 0);
    ck_assert_int_eq(run_llmd(E->llmd, "--version"), 0);
    ck_assert_int_eq(run_llmd(E->llmd, "--no-such-flag"), 2);
    env_down();
}
END_TEST

START_TEST(sigterm_lets_a_running_stream_finish_refuses_new_work_and_exits_0)
{
    env_up();
    const char *extra[] = {"--drain-timeout", "60", NULL};
    start(extra);
    struct ul_resp r;
    char *body = counting(4, 0);
    ck_assert_int_eq(ul_request(E, "POST", COMPL, KEY, body, NULL, &r), 0);
    free(body);
    ck_assert_int_eq(r.status, 200);
    char before[128];
    snprintf(before, sizeof(before), "%s", ul_jstr(r.json, "id"));
    ul_resp_free(&r);

    char id[128];
    struct ul_conn *c = stream_started(40, id, sizeof(id));
    ul_signal(E, SIGTERM);
    assert_new_work_refused();
    json_t *ev = stream_rest(c);
    ul_conn_close(c);
    json_t *last = json_array_get(ev, json_array_size(ev) - 1);
    char *s = json_dumps(last, JSON_COMPACT);
    ck_assert_msg(!json_object_get(last, "error"), "the drain cut a short stream: %s", s);
    const char *fin = ul_jstr(last, "choices.0.finish_reason");
    ck_assert_msg(fin && (strcmp(fin, "length") == 0 || strcmp(fin, "stop") == 0), "last event: %s",
                  s);
    free(s);
    json_decref(ev);
    ck_assert_int_eq(ul_wait_exit(E, 60), 0);

    char f[32];
    ledger_finish(before, f, sizeof(f));
    ck_assert_str_eq(f, "length");
    ledger_finish(id, f, sizeof(f));
    ck_assert_msg(strcmp(f, "length") == 0 || strcmp(f, "stop") == 0, "finish %s", f);
    env_down();
}
END_TEST

START_TEST(sigterm_ends_a_long_stream_with_an_error_event_after_the_drain_timeout)
{
    env_up();
    const char *extra[] = {"--drain-timeout", "1", "--kv-blocks", "512", NULL};
    start(extra);
    char id[128];
    struct ul_conn *c = stream_started(4000, id, sizeof(id));
    ul_signal(E, SIGTERM);
    assert_new_work_refused();
    json_t *ev = stream_rest(c);
    ul_conn_close(c);
    json_t *last = json_array_get(ev, json_array_size(ev) - 1);
    char *s = json_dumps(last, JSON_COMPACT);
    ck_assert_msg(json_is_object(json_object_get(last, "error")),
                  "a 4000-token stream cut by the drain must end with an error event: %s", s);
    ck_assert_msg(json_is_string(ul_jget(last, "error.message")), "error event: %s", s);
    free(s);
    json_decref(ev);
    ck_assert_int_eq(ul_wait_exit(E, 60), 0);
    char f[32];
    ledger_finish(id, f, sizeof(f));
    ck_assert_msg(strcmp(f, "aborted") == 0 || strcmp(f, "error") == 0,
                  "ledger finish of the aborted stream: %s", f);
    env_down();
}
END_TEST

START_TEST(kill9_right_after_a_response_keeps_its_ledger_row)
{
    env_up();
    start(NULL);
    char sid[128];
    struct ul_conn *c = stream_started(6, sid, sizeof(sid));
    json_t *ev = stream_rest(c);
    json_decref(ev);
    ul_conn_close(c);

    struct ul_resp r;
    char *body = counting(3, 0);
    ck_assert_int_eq(ul_request(E, "POST", COMPL, KEY, body, NULL, &r), 0);
    free(body);
    ck_assert_int_eq(r.status, 200);
    char id[128];
    snprintf(id, sizeof(id), "%s", ul_jstr(r.json, "id"));
    ul_resp_free(&r);
    ul_signal(E, SIGKILL); /* no drain, no flush */
    ck_assert_int_eq(ul_wait_exit(E, 30), 128 + SIGKILL);
    char f[32];
    ledger_finish(sid, f, sizeof(f));
    ck_assert_str_eq(f, "length");
    ledger_finish(id, f, sizeof(f));
    ck_assert_str_eq(f, "length");
    env_down();
}
END_TEST

/* SHA-256 of the certificate a new connection is shown; -1 when none. */
static int served_fingerprint(unsigned char fp[32])
{
    struct ul_conn *c = ul_connect(E, 10);
    int rc = c ? ul_peer_fingerprint(c, fp) : -1;
    ul_conn_close(c);
    return rc;
}

START_TEST(sighup_serves_the_new_certificate_to_new_connections)
{
    env_up();
    start(NULL);
    unsigned char want[32], got[32];
    ck_assert_int_eq(ul_file_fingerprint(E->cert, want), 0);
    ck_assert_int_eq(served_fingerprint(got), 0);
    ck_assert(memcmp(want, got, 32) == 0);

    ck_assert_int_eq(ul_cert_write(E->cert, E->key), 0);
    ck_assert_int_eq(ul_trust_file(E, E->cert), 0);
    ck_assert_int_eq(ul_file_fingerprint(E->cert, want), 0);
    ul_signal(E, SIGHUP);
    int same = 0;
    for (double deadline = ul_now() + 5; ul_now() < deadline; ul_sleep(0.1)) {
        ck_assert_int_eq(served_fingerprint(got), 0);
        if ((same = memcmp(want, got, 32) == 0))
            break;
    }
    ck_assert_msg(same, "after SIGHUP new connections still see the old certificate");
    struct ul_resp r;
    char *body = counting(2, 0);
    ck_assert_int_eq(ul_request(E, "POST", COMPL, KEY, body, NULL, &r), 0);
    free(body);
    ck_assert_int_eq(r.status, 200);
    ul_resp_free(&r);
    ck_assert_int_eq(ul_alive(E), 1);
    ck_assert_int_eq(ul_stop(E, 60), 0);
    env_down();
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("daemon_life");
    TCase *tc = tcase_create("life");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, help_and_version_exit_0_and_a_bad_flag_exits_2);
    tcase_add_test(tc, sigterm_lets_a_running_stream_finish_refuses_new_work_and_exits_0);
    tcase_add_test(tc, sigterm_ends_a_long_stream_with_an_error_event_after_the_drain_timeout);
    tcase_add_test(tc, kill9_right_after_a_response_keeps_its_ledger_row);
    tcase_add_test(tc, sighup_serves_the_new_certificate_to_new_connections);
    suite_add_tcase(s, tc);
    return s;
}
