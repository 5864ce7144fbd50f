/*
 * tests/unit/test_metrics.c — the /metrics exposition.
 *
 * Counters and histograms are filled through the public calls and a fake
 * engine snapshot supplies the gauges; the rendered text is checked line by
 * line (exact samples, label escaping, cumulative buckets whose +Inf equals
 * _count) and then handed to `promtool check metrics`, Prometheus's own
 * parser and linter.  promtool is a build dependency (the Debian package
 * prometheus, in scripts/deps.sh): without it this suite fails.
 */
#include "daemon/metrics.h"

#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* 1 when text has this exact line. */
static int has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)); p++)
        if ((p == text || p[-1] == '\n') && p[n] == '\n')
            return 1;
    return 0;
}
#define ASSERT_LINE(text, line) ck_assert_msg(has_line(text, line), "missing line: %s", line)

static void fake_snapshot(struct eng_snapshot *s, struct eng_snap_tenant *t)
{
    memset(s, 0, sizeof(*s));
    s->step = 42;
    s->draining = 1;
    s->by_state[ENG_RS_WAITING] = 3;
    s->by_state[ENG_RS_RUNNING] = 5;
    s->by_state[ENG_RS_SWAPPED] = 1;
    s->by_state[ENG_RS_PREEMPTED] = 2;
    s->by_state[ENG_RS_FINISHED] = 99;
    s->by_prio[0][ENG_RS_RUNNING] = 4;
    s->by_prio[7][ENG_RS_WAITING] = 3;
    s->blocks_total = 1024;
    s->blocks_free = 900;
    s->blocks_cached = 24;
    s->blocks_used = 100;
    s->host_blocks_total = 512;
    s->host_blocks_used = 17;
    s->preempt_swap = 6;
    s->preempt_recompute = 2;
    s->swap_bytes_out = 5000000000ULL;
    s->swap_bytes_in = 123;
    s->prefix_lookups = 80;
    s->prefix_hits = 30;
    s->steps_interrupted = 9;
    memset(t, 0, 2 * sizeof(*t));
    snprintf(t[0].name, sizeof(t[0].name), "alice");
    t[0].running = 4;
    t[0].waiting = 1;
    t[0].device_blocks = 60;
    snprintf(t[1].name, sizeof(t[1].name), "b\"o\\b\nx");
    t[1].running = 1;
    t[1].swapped = 1;
    t[1].device_blocks = 40;
    s->n_tenants = 2;
    s->tenants = t;
}

/* A metrics object with a little of everything recorded. */
static struct metrics *filled(void)
{
    struct metrics *m = metrics_new();
    ck_assert_ptr_nonnull(m);
    metrics_request(m, "alice", 200);
    metrics_request(m, "alice", 200);
    metrics_request(m, "alice", 429);
    metrics_request(m, "", 401);
    metrics_request(m, "b\"o\\b\nx", 200);
    metrics_tokens(m, "alice", "prompt", 10);
    metrics_tokens(m, "alice", "cached", 4);
    metrics_tokens(m, "alice", "completion", 7);
    metrics_tokens(m, "alice", "completion", 3);
    metrics_tokens(m, "alice", "bogus", 1000); /* ignored */
    metrics_latency(m, 0.3, 0.02, 1.5, 0.001);
    metrics_latency(m, -1, -1, 0.05, 0.5); /* no token: no TTFT nor TPOT */
    metrics_latency(m, 100, 0.01, 700, 0.0);
    metrics_step(m, 0.005, 37); /* on a bucket bound: counted in it */
    metrics_step(m, 0.02, 5);
    metrics_connections(m, 5, 2);
    return m;
}

static char *render(struct metrics *m, const struct eng_snapshot *s)
{
    size_t len = 0;
    char *text = metrics_render(m, s, &len);
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_eq(len, strlen(text));
    ck_assert_int_eq(text[len - 1], '\n');
    return text;
}

START_TEST(counters_render_exact_lines)
{
    struct metrics *m = filled();
    char *text = render(m, NULL);
    ASSERT_LINE(text, "llmd_up 1");
    ASSERT_LINE(text, "# TYPE llmd_requests_total counter");
    ASSERT_LINE(text, "llmd_requests_total{tenant=\"alice\",status=\"200\"} 2");
    ASSERT_LINE(text, "llmd_requests_total{tenant=\"alice\",status=\"429\"} 1");
    ASSERT_LINE(text, "llmd_requests_total{tenant=\"\",status=\"401\"} 1");
    ASSERT_LINE(text, "llmd_tokens_total{tenant=\"alice\",kind=\"prompt\"} 10");
    ASSERT_LINE(text, "llmd_tokens_total{tenant=\"alice\",kind=\"cached\"} 4");
    ASSERT_LINE(text, "llmd_tokens_total{tenant=\"alice\",kind=\"completion\"} 10");
    ASSERT_LINE(text, "llmd_step_tokens_total 42");
    ASSERT_LINE(text, "llmd_connections_open 5");
    ASSERT_LINE(text, "llmd_connections_refused_total 2");
    ASSERT_LINE(text, "llmd_time_to_first_token_seconds_bucket{le=\"0.25\"} 0");
    ASSERT_LINE(text, "llmd_time_to_first_token_seconds_bucket{le=\"0.5\"} 1");
    ASSERT_LINE(text, "llmd_time_to_first_token_seconds_bucket{le=\"80\"} 1");
    ASSERT_LINE(text, "llmd_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2");
    ASSERT_LINE(text, "llmd_time_to_first_token_seconds_count 2");
    ASSERT_LINE(text, "llmd_time_to_first_token_seconds_sum 100.3");
    ASSERT_LINE(text, "llmd_step_duration_seconds_bucket{le=\"0.005\"} 1");
    ASSERT_LINE(text, "llmd_queue_time_seconds_bucket{le=\"0.001\"} 2");
    ASSERT_LINE(text, "llmd_queue_time_seconds_count 3");
    ASSERT_LINE(text, "llmd_e2e_request_latency_seconds_bucket{le=\"600\"} 2");
    ASSERT_LINE(text, "llmd_e2e_request_latency_seconds_bucket{le=\"+Inf\"} 3");
    ck_assert_ptr_null(strstr(text, "bogus"));
    /* Without a snapshot there are no engine gauges at all. */
    ck_assert_ptr_null(strstr(text, "llmd_kv_blocks"));
    free(text);
    metrics_free(m);
}
END_TEST

START_TEST(snapshot_gauges_render_exact_lines)
{
    struct metrics *m = metrics_new();
    struct eng_snapshot s;
    struct eng_snap_tenant t[2];
    fake_snapshot(&s, t);
    char *text = render(m, &s);
    ASSERT_LINE(text, "llmd_requests{state=\"waiting\"} 3");
    ASSERT_LINE(text, "llmd_requests{state=\"running\"} 5");
    ASSERT_LINE(text, "llmd_requests{state=\"swapped\"} 1");
    ASSERT_LINE(text, "llmd_requests{state=\"preempted\"} 2");
    ck_assert_ptr_null(strstr(text, "state=\"finished\""));
    ASSERT_LINE(text, "llmd_requests_running 5");
    ASSERT_LINE(text, "llmd_requests_by_priority{priority=\"0\",state=\"running\"} 4");
    ASSERT_LINE(text, "llmd_requests_by_priority{priority=\"7\",state=\"waiting\"} 3");
    ASSERT_LINE(text, "llmd_requests_by_priority{priority=\"3\",state=\"swapped\"} 0");
    ASSERT_LINE(text, "# TYPE llmd_kv_blocks gauge");
    ASSERT_LINE(text, "llmd_kv_blocks{pool=\"device\",state=\"free\"} 900");
    ASSERT_LINE(text, "llmd_kv_blocks{pool=\"device\",state=\"cached\"} 24");
    ASSERT_LINE(text, "llmd_kv_blocks{pool=\"device\",state=\"used\"} 100");
    ASSERT_LINE(text, "llmd_kv_blocks{pool=\"host\",state=\"used\"} 17");
    ASSERT_LINE(text, "llmd_kv_blocks_total{pool=\"device\"} 1024");
    ASSERT_LINE(text, "llmd_kv_blocks_total{pool=\"host\"} 512");
    ASSERT_LINE(text, "# TYPE llmd_preemptions_total counter");
    ASSERT_LINE(text, "llmd_preemptions_total{mode=\"swap\"} 6");
    ASSERT_LINE(text, "llmd_preemptions_total{mode=\"recompute\"} 2");
    ASSERT_LINE(text, "llmd_swap_bytes_total{direction=\"out\"} 5000000000");
    ASSERT_LINE(text, "llmd_swap_bytes_total{direction=\"in\"} 123");
    ASSERT_LINE(text, "llmd_prefix_cache_lookups_total 80");
    ASSERT_LINE(text, "llmd_prefix_cache_hits_total 30");
    ASSERT_LINE(text, "llmd_engine_steps_interrupted_total 9");
    ASSERT_LINE(text, "llmd_draining 1");
    ASSERT_LINE(text, "llmd_tenant_running{tenant=\"alice\"} 4");
    ASSERT_LINE(text, "llmd_tenant_waiting{tenant=\"alice\"} 1");
    ASSERT_LINE(text, "llmd_tenant_kv_blocks{tenant=\"alice\"} 60");
    ASSERT_LINE(text, "llmd_tenant_swapped{tenant=\"b\\\"o\\\\b\\nx\"} 1");
    ASSERT_LINE(text, "llmd_up 1");
    free(text);
    metrics_free(m);
}
END_TEST

START_TEST(label_values_are_escaped)
{
    struct metrics *m = filled();
    char *text = render(m, NULL);
    /* b"o\b<newline>x as the text format spells it */
    ASSERT_LINE(text, "llmd_requests_total{tenant=\"b\\\"o\\\\b\\nx\",status=\"200\"} 1");
    ck_assert_ptr_null(strstr(text, "b\"o"));
    ck_assert_ptr_null(strstr(text, "\nx\""));
    free(text);
    metrics_free(m);
}
END_TEST

/* Every histogram's buckets never decrease, le rises, and +Inf == _count. */
START_TEST(histogram_buckets_are_cumulative)
{
    static const char *const names[] = {"llmd_time_to_first_token_seconds",
                                        "llmd_time_per_output_token_seconds",
                                        "llmd_e2e_request_latency_seconds",
                                        "llmd_queue_time_seconds", "llmd_step_duration_seconds"};
    struct metrics *m = filled();
    char *text = render(m, NULL);
    for (size_t h = 0; h < sizeof(names) / sizeof(names[0]); h++) {
        char prefix[128], tline[160];
        snprintf(tline, sizeof(tline), "# TYPE %s histogram", names[h]);
        ASSERT_LINE(text, tline);
        snprintf(prefix, sizeof(prefix), "\n%s_bucket{le=\"", names[h]);
        long prev = -1, inf = -1, count = -2;
        double prev_le = -1;
        int buckets = 0;
        for (const char *p = strstr(text, prefix); p; p = strstr(p + 1, prefix)) {
            const char *le = p + strlen(prefix);
            long v;
            if (!strncmp(le, "+Inf\"} ", 7)) {
                ck_assert_int_eq(sscanf(le + 7, "%ld", &inf), 1);
                continue;
            }
            double bound;
            ck_assert_int_eq(sscanf(le, "%lf\"} %ld", &bound, &v), 2);
            ck_assert_msg(bound > prev_le, "%s: le not rising", names[h]);
            ck_assert_msg(v >= prev, "%s: bucket %g decreases", names[h], bound);
            ck_assert_int_eq(inf, -1); /* +Inf comes last */
            prev = v;
            prev_le = bound;
            buckets++;
        }
        snprintf(prefix, sizeof(prefix), "\n%s_count ", names[h]);
        const char *c = strstr(text, prefix);
        ck_assert_ptr_nonnull(c);
        ck_assert_int_eq(sscanf(c + strlen(prefix), "%ld", &count), 1);
        ck_assert_int_ge(buckets, 8);
        ck_assert_int_ge(inf, prev);
        ck_assert_int_eq(inf, count);
    }
    free(text);
    metrics_free(m);
}
END_TEST

#define STEP_THREADS 4
#define STEPS        2000

static void *stepper(void *arg)
{
    for (int i = 0; i < STEPS; i++)
        metrics_step(arg, 0.001 * (i % 50), 3);
    return NULL;
}

/* Steps from other threads while /metrics renders: nothing is lost. */
START_TEST(steps_from_other_threads_all_count)
{
    struct metrics *m = metrics_new();
    pthread_t t[STEP_THREADS];
    for (int i = 0; i < STEP_THREADS; i++)
        pthread_create(&t[i], NULL, stepper, m);
    for (int i = 0; i < 20; i++)
        free(render(m, NULL));
    for (int i = 0; i < STEP_THREADS; i++)
        pthread_join(t[i], NULL);
    char *text = render(m, NULL), line[96];
    snprintf(line, sizeof(line), "llmd_step_tokens_total %d", 3 * STEP_THREADS * STEPS);
    ASSERT_LINE(text, line);
    snprintf(line, sizeof(line), "llmd_step_duration_seconds_count %d", STEP_THREADS * STEPS);
    ASSERT_LINE(text, line);
    free(text);
    metrics_free(m);
}
END_TEST

/* Prometheus's own parser and linter accept the whole exposition. */
START_TEST(promtool_accepts_the_output)
{
    struct metrics *m = filled();
    struct eng_snapshot s;
    struct eng_snap_tenant t[2];
    fake_snapshot(&s, t);
    char *text = render(m, &s);
    signal(SIGPIPE, SIG_IGN); /* a missing promtool must fail the test, not kill it */
    FILE *p = popen("promtool check metrics", "w");
    ck_assert_msg(p, "popen failed");
    fputs(text, p);
    int st = pclose(p);
    ck_assert_msg(!(WIFEXITED(st) && WEXITSTATUS(st) == 127),
                  "promtool not found: install the Debian package prometheus (scripts/deps.sh)");
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "promtool check metrics rejected:\n%s",
                  text);
    free(text);
    metrics_free(m);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("metrics");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, counters_render_exact_lines);
    tcase_add_test(tc, snapshot_gauges_render_exact_lines);
    tcase_add_test(tc, label_values_are_escaped);
    tcase_add_test(tc, histogram_buckets_are_cumulative);
    tcase_add_test(tc, steps_from_other_threads_all_count);
    tcase_add_test(tc, promtool_accepts_the_output);
    suite_add_tcase(s, tc);
    return s;
}
