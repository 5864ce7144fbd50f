/*
 * tests/unit/test_llmbench_live.c — the llmbench binary against a real llmd:
 * small scenario files written into the test directory, run with --json,
 * and the report checked against what the daemon saw (its ledger, its KV
 * blocks).
 *
 * One daemon serves the suite, over TLS (llmbench trusts it with --ca) and
 * plain HTTP on a second port; each test uses tenants of its own so that
 * ledger counts do not mix.  Nothing here asserts on timing: only counts,
 * outcomes and orderings that hold however slow the machine is.
 */
#include "tests/unit/util_llmd.h"
#include "tests/unit/util_run.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct ul_env *E;
static char BIN[UL_PATH], URL[64], PLAIN_URL[64];
static char KEY_A[128], KEY_B[128], KEY_GONE[128], KEY_LOOP[128], KEY_ACT[128];

static void setup(void)
{
    E = ul_env_new();
    ck_assert_msg(E != NULL, "test environment");
    const char *names[] = {"alpha", "beta", "gone", "loop", "act"};
    char *keys[] = {KEY_A, KEY_B, KEY_GONE, KEY_LOOP, KEY_ACT};
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(ul_tenant_add(E, names[i], UL_END), 0);
        ck_assert_int_eq(ul_key_create(E, names[i], keys[i], sizeof(KEY_A), NULL), 0);
    }
    const char *dir = getenv("LLMD_BIN_DIR");
    snprintf(BIN, sizeof(BIN), "%s/llmbench", dir ? dir : "build/bin");
    ck_assert_msg(access(BIN, X_OK) == 0, "%s is missing", BIN);
    char plain[32];
    int pport = ul_free_port();
    snprintf(plain, sizeof(plain), "127.0.0.1:%d", pport);
    const char *extra[] = {"--listen-plain", plain, "--max-connections", "256", NULL};
    ck_assert_msg(ul_start(E, extra) == 0, "llmd did not start");
    snprintf(URL, sizeof(URL), "https://127.0.0.1:%d", E->port);
    snprintf(PLAIN_URL, sizeof(PLAIN_URL), "http://127.0.0.1:%d/v1", pport);
}

static void teardown(void)
{
    if (E && E->pid > 0 && ul_stop(E, 60) != 0)
        ul_dump_log(E);
    ul_env_free(E);
    E = NULL;
}

/* ------------------------------------------------------------- helpers */

/* A tenant of the scenario: short synthetic prompts, greedy, ignore_eos. */
static json_t *tenant(const char *name, const char *key, json_t *arrival, int max_tokens,
                      int stream, long requests)
{
    return json_pack("{s:s, s:s, s:o, s:i, s:i, s:b, s:b, s:f, s:i}", "name", name, "key", key,
                     "arrival", arrival, "prompt_len", 8, "max_tokens", max_tokens, "stream",
                     stream, "ignore_eos", 1, "temperature", 0.0, "requests", (int)requests);
}

/* Writes a scenario with these tenants (stolen) to DIR/name.json. */
static void write_scenario(const char *name, json_t *tenants, long requests, double duration,
                           json_t *actions, char *path, size_t cap)
{
    json_t *sc = json_pack("{s:s, s:s, s:s, s:i, s:f, s:i, s:f, s:f, s:[i,i], s:o}", "name", name,
                           "api", "completions", "model", E->model_id, "requests", (int)requests,
                           "duration_s", duration, "seed", 7, "grace_s", 120.0, "timeout_s", 120.0,
                           "vocab", 1000, 20000, "tenants", tenants);
    ck_assert_ptr_nonnull(sc);
    if (actions)
        json_object_set_new(sc, "actions", actions);
    snprintf(path, cap, "%s/%s.json", E->dir, name);
    ck_assert_int_eq(json_dump_file(sc, path, JSON_INDENT(2)), 0);
    json_decref(sc);
}

/* Runs llmbench ARGS... with --quiet and --json DIR/report.json; returns the
 * report (caller owns) and requires exit status 0. */
static json_t *run_bench(const char *scen, const char *url, const char *const *more)
{
    char report[UL_PATH];
    snprintf(report, sizeof(report), "%s/report.json", E->dir);
    unlink(report);
    const char *args[24] = {"--quiet", "--url", url, "--ca", E->cert, "--json", report};
    int n = 7;
    for (int i = 0; more && more[i]; i++)
        args[n++] = more[i];
    args[n++] = scen;
    args[n] = NULL;
    struct ur_run r;
    ur_exec(BIN, E->dir, NULL, NULL, 0, &r, args);
    ck_assert_msg(r.rc == 0, "llmbench exited %d: %s", r.rc, r.err);
    ur_free(&r);
    json_error_t je;
    json_t *j = json_load_file(report, 0, &je);
    ck_assert_msg(j != NULL, "report: %s", je.text);
    return j;
}

static long jint(json_t *j, const char *path)
{
    json_t *v = ul_jget(j, path);
    ck_assert_msg(json_is_number(v), "%s is not a number", path);
    return (long)json_number_value(v);
}

/* Waits up to 30 s for the ledger to hold n rows of tenant (finish: any). */
static int ledger_rows(const char *name, int n)
{
    int rows = -1;
    double deadline = ul_now() + 30;
    while ((rows = ul_ledger_count(E, name, NULL)) < n && ul_now() < deadline)
        ul_sleep(0.2);
    return rows;
}

/* ------------------------------------------------------------ the tests */

START_TEST(two_tenants_stream_and_not_all_ok_with_every_token_counted)
{
    char path[UL_PATH];
    json_t *ts =
        json_pack("[o, o]", tenant("alpha", KEY_A, json_pack("{s:f}", "poisson", 20.0), 8, 1, 6),
                  tenant("beta", KEY_B, json_pack("{s:f}", "poisson", 20.0), 8, 0, 6));
    write_scenario("mix", ts, 12, 0, NULL, path, sizeof(path));
    json_t *rep = run_bench(path, URL, NULL);
    ck_assert_int_eq(jint(rep, "overall.sent"), 12);
    ck_assert_int_eq(jint(rep, "overall.ok"), 12);
    ck_assert_int_eq(jint(rep, "overall.lost"), 0);
    ck_assert_int_eq(jint(rep, "overall.output_tokens"), 96);
    const char *names[] = {"alpha", "beta"};
    for (int i = 0; i < 2; i++) {
        char p[96];
        snprintf(p, sizeof(p), "tenants.%s.sent", names[i]);
        ck_assert_int_eq(jint(rep, p), 6);
        snprintf(p, sizeof(p), "tenants.%s.ok", names[i]);
        ck_assert_int_eq(jint(rep, p), 6);
        snprintf(p, sizeof(p), "tenants.%s.output_tokens", names[i]);
        ck_assert_int_eq(jint(rep, p), 48);
    }
    const char *pcts[] = {"p50", "p90", "p99", "max"};
    for (int i = 0; i < 4; i++) {
        char a[64], b[64];
        snprintf(a, sizeof(a), "overall.ttft_ms.%s", pcts[i]);
        snprintf(b, sizeof(b), "overall.e2e_ms.%s", pcts[i]);
        double ttft = json_number_value(ul_jget(rep, a)), e2e = json_number_value(ul_jget(rep, b));
        ck_assert_msg(ttft > 0 && ttft <= e2e, "%s %g > %s %g", a, ttft, b, e2e);
    }
    /* The streams saw several chunks each, so there are ITL gaps. */
    ck_assert_int_gt(jint(rep, "tenants.alpha.itl_ms.n"), 0);
    json_decref(rep);
    ck_assert_int_eq(ledger_rows("alpha", 6), 6);
    ck_assert_int_eq(ledger_rows("beta", 6), 6);
}
END_TEST

START_TEST(wrong_key_is_refused_not_lost_and_json_goes_to_stdout)
{
    char path[UL_PATH];
    json_t *ts =
        json_pack("[o]", tenant("alpha", KEY_A, json_pack("{s:f}", "poisson", 50.0), 4, 1, 0));
    write_scenario("badkey", ts, 3, 0, NULL, path, sizeof(path));
    const char *args[] = {"--quiet",  "--url",  URL, "--ca", E->cert, "--key",
                          "sk-wrong", "--json", "-", path,   NULL};
    struct ur_run r;
    ur_exec(BIN, E->dir, NULL, NULL, 0, &r, args);
    ck_assert_msg(r.rc == 0, "llmbench exited %d: %s", r.rc, r.err);
    json_t *rep = json_loads(r.out, 0, NULL);
    ck_assert_msg(rep != NULL, "--json - did not print JSON: %s", r.out);
    ur_free(&r);
    ck_assert_int_eq(jint(rep, "overall.sent"), 3);
    ck_assert_int_eq(jint(rep, "overall.refused"), 3);
    ck_assert_int_eq(jint(rep, "overall.lost"), 0);
    ck_assert_int_eq(jint(rep, "overall.ok"), 0);
    const char *k;
    json_t *v;
    int saw401 = 0;
    json_object_foreach(ul_jget(rep, "overall.errors"), k, v)
    {
        if (strncmp(k, "401 ", 4) == 0 && json_integer_value(v) == 3)
            saw401 = 1;
    }
    ck_assert_msg(saw401, "no \"401 ...\": 3 in errors");
    json_decref(rep);
}
END_TEST

START_TEST(streams_that_disconnect_free_their_blocks_and_are_cancelled)
{
    char path[UL_PATH];
    json_t *t = tenant("gone", KEY_GONE, json_pack("{s:f}", "poisson", 20.0), 32, 1, 0);
    json_object_set_new(t, "disconnect", json_real(1.0));
    write_scenario("gone", json_pack("[o]", t), 4, 0, NULL, path, sizeof(path));
    json_t *rep = run_bench(path, URL, NULL);
    ck_assert_int_eq(jint(rep, "overall.sent"), 4);
    ck_assert_int_eq(jint(rep, "overall.disconnected"), 4);
    ck_assert_int_eq(jint(rep, "overall.lost"), 0);
    json_decref(rep);
    double used = -1, deadline = ul_now() + 30;
    while (ul_now() < deadline) {
        ck_assert_int_eq(ul_metric(E, "llmd_kv_blocks", "pool=\"device\",state=\"used\"", &used),
                         1);
        if (used == 0)
            break;
        ul_sleep(0.2);
    }
    ck_assert_msg(used == 0, "%g device KV blocks still used after the clients left", used);
    ck_assert_int_eq(ledger_rows("gone", 4), 4);
    /* A client that closes after its last chunk was sent may race the end
     * of generation; at least one must have been cut short. */
    int cancelled = ul_ledger_count(E, "gone", "cancelled");
    ck_assert_msg(cancelled >= 1, "no ledger row says cancelled");
}
END_TEST

START_TEST(closed_loop_over_plain_http_keeps_four_in_flight_until_eight)
{
    char path[UL_PATH];
    json_t *ts = json_pack("[o]", tenant("loop", KEY_LOOP,
                                         json_pack("{s:i, s:f}", "concurrency", 4, "think_s", 0.0),
                                         4, 1, 0));
    write_scenario("loop", ts, 8, 0, NULL, path, sizeof(path));
    json_t *rep = run_bench(path, PLAIN_URL, NULL);
    ck_assert_int_eq(jint(rep, "overall.sent"), 8);
    ck_assert_int_eq(jint(rep, "overall.ok"), 8);
    ck_assert_int_eq(jint(rep, "overall.output_tokens"), 32);
    json_decref(rep);
    ck_assert_int_eq(ledger_rows("loop", 8), 8);
}
END_TEST

START_TEST(actions_run_at_their_time_and_the_plot_is_drawn)
{
    char path[UL_PATH], touched[UL_PATH], svg[UL_PATH], run[UL_PATH + 16];
    snprintf(touched, sizeof(touched), "%s/acted", E->dir);
    snprintf(svg, sizeof(svg), "%s/plot.svg", E->dir);
    snprintf(run, sizeof(run), "touch %s", touched);
    json_t *acts = json_pack("[{s:f, s:s}, {s:f, s:s}]", "at_s", 0.2, "run", run, "at_s", 0.3,
                             "run", "exit 3");
    json_t *ts =
        json_pack("[o]", tenant("act", KEY_ACT, json_pack("{s:f}", "poisson", 4.0), 2, 1, 0));
    write_scenario("act", ts, 0, 1.0, acts, path, sizeof(path));
    const char *more[] = {"--plot", svg, NULL};
    json_t *rep = run_bench(path, URL, more);
    ck_assert_msg(access(touched, F_OK) == 0, "the action did not run");
    ck_assert_int_eq(jint(rep, "actions.0.exit"), 0);
    ck_assert_int_eq(jint(rep, "actions.1.exit"), 3);
    ck_assert_int_eq(jint(rep, "overall.lost"), 0);
    json_decref(rep);
    char *s = ur_slurp(svg);
    ck_assert_msg(strstr(s, "<svg") && strstr(s, "</svg>"), "not an SVG: %.200s", s);
    free(s);
}
END_TEST

START_TEST(connection_refused_is_lost_connect_and_the_run_still_reports)
{
    char path[UL_PATH], url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", ul_free_port());
    json_t *ts =
        json_pack("[o]", tenant("alpha", KEY_A, json_pack("{s:f}", "poisson", 50.0), 4, 1, 0));
    write_scenario("refused", ts, 3, 0, NULL, path, sizeof(path));
    json_t *rep = run_bench(path, url, NULL);
    ck_assert_int_eq(jint(rep, "overall.sent"), 3);
    ck_assert_int_eq(jint(rep, "overall.lost"), 3);
    ck_assert_int_eq(jint(rep, "overall.errors.lost connect"), 3);
    json_decref(rep);
}
END_TEST

/* ------------------------------------------------------ a broken server */

/* Canned answers, one per request in arrival order; close: hang up after. */
static const struct {
    const char *text;
    int close;
} FAKE[] = {
    /* A JSON answer to a stream request, then a silent hang-up: the next
     * request finds the kept-alive connection dead and must retry, not
     * be lost. */
    {"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 77\r\n\r\n"
     "{\"choices\":[{\"text\":\"hi\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}",
     1},
    {"HTTP/1.1 500 Oops\r\nContent-Length: 5\r\n\r\nhello", 0},
    {"HTTP/1.1 429 Too Many\r\nContent-Type: application/json\r\nContent-Length: 52\r\n\r\n"
     "{\"error\":{\"type\":\"rate_limit_exceeded\",\"code\":null}}",
     0},
    {"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
     "22\r\ndata: {\"choices\":[{\"text\":\"a\"}]}\n\n\r\n"
     "37\r\ndata: {\"error\":{\"type\":\"server_error\",\"message\":\"x\"}}\n\n\r\n"
     "e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n",
     0},
    {"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
     "data: {\"choices\":[{\"text\":\"a\"}]}\n\n",
     1},
    {"SPDY/9 what\r\n\r\n", 1},
    /* Split oddly across chunks: an event's line spans two chunks, CRLF
     * line ends, a comment, and usage in the last event. */
    {"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
     "12\r\n: hi\r\n\r\ndata: {\"ch\r\n"
     "1a\r\noices\":[{\"text\":\"a\"}]}\r\n\r\n\r\n"
     "22\r\ndata: {\"choices\":[{\"text\":\"b\"}]}\n\n\r\n"
     "56\r\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":7}}"
     "\n\ndata: [DONE]\n\n\r\n0\r\n\r\n",
     0},
};
#define N_FAKE ((int)(sizeof(FAKE) / sizeof(FAKE[0])))

struct fake {
    int lfd, port, next;
};

/* Reads one request (head, then Content-Length bytes).  -1 at EOF. */
static int fake_read_request(int fd)
{
    char buf[8192];
    size_t len = 0;
    char *end = NULL;
    while (!end) {
        ssize_t n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
        if (n <= 0)
            return -1;
        len += (size_t)n;
        buf[len] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    const char *cl = strcasestr(buf, "content-length:");
    long want = cl ? strtol(cl + 15, NULL, 10) : 0;
    long have = (long)(len - (size_t)(end + 4 - buf));
    while (have < want) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n <= 0)
            return -1;
        have += n;
    }
    return 0;
}

static void *fake_run(void *arg)
{
    struct fake *f = arg;
    while (f->next < N_FAKE) {
        int fd = accept(f->lfd, NULL, NULL);
        if (fd < 0)
            break;
        while (f->next < N_FAKE && fake_read_request(fd) == 0) {
            int i = f->next++;
            if (send(fd, FAKE[i].text, strlen(FAKE[i].text), MSG_NOSIGNAL) < 0 || FAKE[i].close)
                break;
        }
        close(fd);
    }
    return NULL;
}

START_TEST(a_broken_server_gives_each_failure_its_outcome)
{
    struct fake f = {.lfd = socket(AF_INET, SOCK_STREAM, 0)};
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    ck_assert_int_ge(f.lfd, 0);
    ck_assert_int_eq(bind(f.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(f.lfd, 8), 0);
    ck_assert_int_eq(getsockname(f.lfd, (struct sockaddr *)&a, &al), 0);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, fake_run, &f), 0);
    char path[UL_PATH], url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(a.sin_port));
    json_t *ts = json_pack(
        "[o]", tenant("alpha", KEY_A, json_pack("{s:i}", "concurrency", 1), 4, 1, N_FAKE));
    write_scenario("broken", ts, N_FAKE, 0, NULL, path, sizeof(path));
    json_t *rep = run_bench(path, url, NULL);
    shutdown(f.lfd, SHUT_RDWR);
    pthread_join(th, NULL);
    close(f.lfd);
    ck_assert_int_eq(jint(rep, "overall.sent"), N_FAKE);
    ck_assert_int_eq(jint(rep, "overall.ok"), 2);
    ck_assert_int_eq(jint(rep, "overall.refused"), 2);
    ck_assert_int_eq(jint(rep, "overall.failed"), 1);
    ck_assert_int_eq(jint(rep, "overall.lost"), 2);
    ck_assert_int_eq(jint(rep, "overall.errors.500 unparsed"), 1);
    ck_assert_int_eq(jint(rep, "overall.errors.429 rate_limit_exceeded"), 1);
    ck_assert_int_eq(jint(rep, "overall.errors.200 server_error"), 1);
    ck_assert_int_eq(jint(rep, "overall.errors.lost incomplete"), 1);
    ck_assert_int_eq(jint(rep, "overall.errors.lost protocol"), 1);
    /* usage's 2 and 7 for the good answers, one chunk each for two broken ones */
    ck_assert_int_eq(jint(rep, "overall.output_tokens"), 11);
    json_decref(rep);
}
END_TEST

/* Runs llmbench with args and expects exit 2 and a message with want. */
static void expect_usage_error(const char *const *args, const char *want)
{
    struct ur_run r;
    ur_exec(BIN, E->dir, NULL, NULL, 0, &r, args);
    ck_assert_msg(r.rc == 2, "exit %d, want 2 (stderr: %s)", r.rc, r.err);
    ck_assert_msg(strstr(r.err, want), "stderr does not say \"%s\": %s", want, r.err);
    ur_free(&r);
}

START_TEST(bad_arguments_and_bad_scenarios_exit_2_with_a_message)
{
    char good[UL_PATH], bad[UL_PATH];
    json_t *ts =
        json_pack("[o]", tenant("alpha", KEY_A, json_pack("{s:f}", "poisson", 1.0), 4, 1, 0));
    write_scenario("good", ts, 1, 0, NULL, good, sizeof(good));
    const char *none[] = {NULL};
    expect_usage_error(none, "scenario");
    const char *unknown[] = {"--frobnicate", good, NULL};
    expect_usage_error(unknown, "--frobnicate");
    const char *scale[] = {"--rate-scale", "fast", good, NULL};
    expect_usage_error(scale, "--rate-scale");
    const char *url[] = {"--url", "ftp://127.0.0.1", good, NULL};
    expect_usage_error(url, "ftp://");
    const char *only[] = {"--only", "nobody", good, NULL};
    expect_usage_error(only, "nobody");
    const char *missing[] = {"/nonexistent/scenario.json", NULL};
    expect_usage_error(missing, "/nonexistent/scenario.json");
    snprintf(bad, sizeof(bad), "%s/bad.json", E->dir);
    FILE *f = fopen(bad, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"requests\": 1, \"tenants\": [{\"name\": \"x\", \"arrival\": {\"poisson\": \"a\"}}]}",
          f);
    fclose(f);
    const char *badsc[] = {bad, NULL};
    expect_usage_error(badsc, "arrival");
    const char *help[] = {"--help", NULL};
    struct ur_run r;
    ur_exec(BIN, E->dir, NULL, NULL, 0, &r, help);
    ck_assert_int_eq(r.rc, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "--rate-scale"));
    ur_free(&r);
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
    Suite *s = suite_create("llmbench_live");
    TCase *tc = tcase_create("live");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, two_tenants_stream_and_not_all_ok_with_every_token_counted);
    tcase_add_test(tc, wrong_key_is_refused_not_lost_and_json_goes_to_stdout);
    tcase_add_test(tc, streams_that_disconnect_free_their_blocks_and_are_cancelled);
    tcase_add_test(tc, closed_loop_over_plain_http_keeps_four_in_flight_until_eight);
    tcase_add_test(tc, actions_run_at_their_time_and_the_plot_is_drawn);
    tcase_add_test(tc, connection_refused_is_lost_connect_and_the_run_still_reports);
    tcase_add_test(tc, a_broken_server_gives_each_failure_its_outcome);
    tcase_add_test(tc, bad_arguments_and_bad_scenarios_exit_2_with_a_message);
    tcase_add_test(tc, sigterm_stops_the_daemon_without_sanitizer_reports); /* last */
    suite_add_tcase(s, tc);
    return s;
}
