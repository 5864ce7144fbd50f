/*
 * tests/unit/test_llmbench.c — llmbench's parts that need no server: the
 * scenario file (every field, every kind of error named by its path), the
 * random draws, the request bodies, --only and --rate, the report built
 * from hand-made records, the table, and the SVG plot.
 *
 * Records are written by hand with round numbers so that every percentile,
 * count and token total in the report can be predicted exactly.
 */
#include "tools/llmbench.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ============================================================== helpers */

static char g_dir[64];

static void dir_setup(void)
{
    strcpy(g_dir, "/tmp/lbtest.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
}

static const char *dir_path(const char *name)
{
    static char path[160];
    snprintf(path, sizeof(path), "%s/%s", g_dir, name);
    return path;
}

static void dir_teardown(void)
{
    static const char *const names[] = {"s.json", "prompts.txt", "out.svg"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        unlink(dir_path(names[i]));
    rmdir(g_dir);
}

static const char *write_file(const char *name, const char *text)
{
    const char *path = dir_path(name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* Loads text as DIR/s.json; the return code of lb_scen_load. */
static int load(const char *text, struct lb_scenario *sc, char *err, size_t errlen)
{
    err[0] = '\0';
    return lb_scen_load(write_file("s.json", text), sc, err, errlen);
}

static void load_ok(const char *text, struct lb_scenario *sc)
{
    char err[512];
    int rc = load(text, sc, err, sizeof(err));
    ck_assert_msg(rc == 0, "lb_scen_load: %s", err);
}

/* A scenario of one tenant whose fields are given (completions). */
static void load_tenant(const char *top, const char *tenant, struct lb_scenario *sc)
{
    char text[2048];
    snprintf(text, sizeof(text), "{\"duration_s\": 10, %s \"tenants\": [{%s}]}", top, tenant);
    load_ok(text, sc);
}

static char *body_of(const struct lb_scenario *sc, int ti, struct lb_record *rec)
{
    size_t len = 0;
    memset(rec, 0, sizeof(*rec));
    char *b = lb_scen_body(sc, &sc->tenants[ti], rec, &len);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(len, strlen(b));
    return b;
}

static json_t *parse(const char *s)
{
    json_error_t e;
    json_t *j = json_loads(s, 0, &e);
    ck_assert_msg(j != NULL, "bad JSON %s: %s", s, e.text);
    return j;
}

static int count_words(const char *s)
{
    int n = 0;
    for (const char *p = s; *p; p++)
        n += *p != ' ' && (p == s || p[-1] == ' ');
    return n;
}

/* ====================================================== scenario parsing */

#define FULL_SCENARIO                                                                              \
    "{\"name\": \"full\", \"description\": \"every field\", \"api\": \"completions\",\n"           \
    " \"model\": \"m1\", \"duration_s\": 30, \"requests\": 100, \"seed\": 7,\n"                    \
    " \"warmup_s\": 2, \"grace_s\": 10, \"end\": \"cancel\", \"timeout_s\": 60,\n"                 \
    " \"vocab\": [100, 200], \"slo\": {\"ttft_ms\": 500, \"tpot_ms\": 50, \"e2e_ms\": 0},\n"       \
    " \"tenants\": [\n"                                                                            \
    "  {\"name\": \"a\", \"key\": \"$LB_TEST_KEY\", \"priority\": 2,\n"                            \
    "   \"arrival\": {\"poisson\": 2.5}, \"prompt_len\": {\"uniform\": [10, 20]},\n"               \
    "   \"prefix_len\": 8, \"max_tokens\": {\"normal\": [64, 8], \"min\": 16, \"max\": 128},\n"    \
    "   \"stream\": true, \"ignore_eos\": true, \"temperature\": 0.5, \"disconnect\": 0.25,\n"     \
    "   \"start_s\": 1, \"stop_s\": 20, \"requests\": 50, \"slo\": {\"ttft_ms\": 200}},\n"         \
    "  {\"name\": \"b\", \"key\": \"sk-b\", \"arrival\": {\"burst\": 5, \"every_s\": 3},\n"        \
    "   \"prompts_file\": \"prompts.txt\", \"max_tokens\": 32},\n"                                 \
    "  {\"name\": \"c\", \"arrival\": {\"concurrency\": 4, \"think_s\": 0.5},\n"                   \
    "   \"prompt_len\": {\"lognormal\": [100, 0.5]}, \"max_tokens\": 16}],\n"                      \
    " \"actions\": [{\"at_s\": 5, \"run\": \"echo hi\"}]}\n"

START_TEST(full_scenario_reads_every_field)
{
    setenv("LB_TEST_KEY", "sk-from-env", 1);
    write_file("prompts.txt", "first prompt\n\nsecond prompt\r\n   \nthird\n");
    struct lb_scenario sc;
    load_ok(FULL_SCENARIO, &sc);
    ck_assert_str_eq(sc.name, "full");
    ck_assert_str_eq(sc.description, "every field");
    ck_assert_str_eq(sc.model, "m1");
    ck_assert_int_eq(sc.chat, 0);
    ck_assert_double_eq(sc.duration_s, 30);
    ck_assert_int_eq(sc.requests, 100);
    ck_assert_uint_eq(sc.seed, 7);
    ck_assert_double_eq(sc.warmup_s, 2);
    ck_assert_double_eq(sc.grace_s, 10);
    ck_assert_int_eq(sc.end_cancel, 1);
    ck_assert_double_eq(sc.timeout_s, 60);
    ck_assert_int_eq(sc.vocab_lo, 100);
    ck_assert_int_eq(sc.vocab_hi, 200);
    ck_assert_double_eq(sc.slo.ttft_ms, 500);
    ck_assert_double_eq(sc.slo.tpot_ms, 50);
    ck_assert_int_eq(sc.n_tenants, 3);

    const struct lb_tenant *a = &sc.tenants[0], *b = &sc.tenants[1], *c = &sc.tenants[2];
    ck_assert_str_eq(a->name, "a");
    ck_assert_str_eq(a->key, "sk-from-env");
    ck_assert_int_eq(a->priority, 2);
    ck_assert_int_eq(a->arrival, LB_ARR_POISSON);
    ck_assert_double_eq(a->rate, 2.5);
    ck_assert_int_eq(a->prompt_len.kind, LB_DIST_UNIFORM);
    ck_assert_double_eq(a->prompt_len.a, 10);
    ck_assert_double_eq(a->prompt_len.b, 20);
    ck_assert_int_eq(a->prefix_len, 8);
    ck_assert_ptr_nonnull(a->prefix);
    for (int i = 0; i < 8; i++)
        ck_assert(a->prefix[i] >= 100 && a->prefix[i] <= 200);
    ck_assert_int_eq(a->max_tokens.kind, LB_DIST_NORMAL);
    ck_assert_double_eq(a->max_tokens.min, 16);
    ck_assert_double_eq(a->max_tokens.max, 128);
    ck_assert_int_eq(a->stream, 1);
    ck_assert_int_eq(a->ignore_eos, 1);
    ck_assert_double_eq(a->temperature, 0.5);
    ck_assert_double_eq(a->disconnect, 0.25);
    ck_assert_double_eq(a->start_s, 1);
    ck_assert_double_eq(a->stop_s, 20);
    ck_assert_int_eq(a->max_requests, 50);
    /* the tenant's ttft over the scenario's, the rest inherited */
    ck_assert_double_eq(a->slo.ttft_ms, 200);
    ck_assert_double_eq(a->slo.tpot_ms, 50);
    ck_assert_double_eq(a->slo.e2e_ms, 0);

    ck_assert_str_eq(b->key, "sk-b");
    ck_assert_int_eq(b->priority, -1);
    ck_assert_int_eq(b->arrival, LB_ARR_BURST);
    ck_assert_int_eq(b->burst, 5);
    ck_assert_double_eq(b->every_s, 3);
    ck_assert_int_eq(b->n_prompts, 3);
    ck_assert_str_eq(b->prompts[0], "first prompt");
    ck_assert_str_eq(b->prompts[1], "second prompt");
    ck_assert_str_eq(b->prompts[2], "third");
    ck_assert_int_eq(b->max_tokens.kind, LB_DIST_FIXED);
    ck_assert_double_eq(b->max_tokens.a, 32);
    ck_assert_int_eq(b->stream, 0);
    ck_assert_double_eq(b->temperature, -1);
    ck_assert_double_eq(b->slo.ttft_ms, 500);

    ck_assert_ptr_null(c->key);
    ck_assert_int_eq(c->arrival, LB_ARR_CLOSED);
    ck_assert_int_eq(c->concurrency, 4);
    ck_assert_double_eq(c->think_s, 0.5);
    ck_assert_int_eq(c->prompt_len.kind, LB_DIST_LOGNORMAL);

    ck_assert_int_eq(sc.n_actions, 1);
    ck_assert_double_eq(sc.actions[0].at_s, 5);
    ck_assert_str_eq(sc.actions[0].run, "echo hi");
    ck_assert_int_eq(sc.actions[0].exit, -1);
    lb_scen_free(&sc);
    ck_assert_ptr_null(sc.tenants);
}
END_TEST

START_TEST(minimal_scenario_takes_the_defaults)
{
    struct lb_scenario sc;
    load_ok("{\"requests\": 5, \"tenants\": [{\"arrival\": {\"concurrency\": 1},"
            " \"prompt_len\": 4, \"max_tokens\": 4}]}",
            &sc);
    ck_assert_str_eq(sc.name, "s"); /* the file name without .json */
    ck_assert_ptr_null(sc.model);
    ck_assert_ptr_null(sc.description);
    ck_assert_int_eq(sc.chat, 0);
    ck_assert_str_eq(lb_scen_path(&sc), "/v1/completions");
    ck_assert_uint_eq(sc.seed, 1);
    ck_assert_double_eq(sc.grace_s, 120);
    ck_assert_double_eq(sc.timeout_s, 600);
    ck_assert_double_eq(sc.warmup_s, 0);
    ck_assert_int_eq(sc.vocab_lo, 1000);
    ck_assert_int_eq(sc.vocab_hi, 40000);
    ck_assert_int_eq(sc.end_cancel, 0);
    ck_assert_int_eq(sc.n_actions, 0);
    const struct lb_tenant *t = &sc.tenants[0];
    ck_assert_ptr_nonnull(t->name);
    ck_assert_int_eq(t->priority, -1);
    ck_assert_double_eq(t->temperature, -1);
    ck_assert_int_eq(t->stream, 0);
    ck_assert_int_eq(t->ignore_eos, 0);
    ck_assert_double_eq(t->think_s, 0);
    ck_assert_ptr_null(t->prefix);
    ck_assert_ptr_null(t->prompts);
    lb_scen_free(&sc);
}
END_TEST

/* A good tenant first, so errors in the second show they name the index. */
#define GOOD_TENANT                                                                                \
    "{\"name\": \"ok\", \"arrival\": {\"poisson\": 1}, \"prompt_len\": 8, \"max_tokens\": 4}"

static const struct {
    const char *text, *field, *why;
} bad_scenarios[] = {
    {"{\"duration_s\": 5, \"duraton_s\": 3, \"tenants\": [" GOOD_TENANT "]}",
     ": duraton_s:", "unknown key"},
    {"{\"duration_s\": 5, \"tenants\": [" GOOD_TENANT ", {\"name\": \"x\", \"arrival\": "
     "{\"poisson\": 1}, \"promt_len\": 8, \"max_tokens\": 4}]}",
     ": tenants[1].promt_len:", "unknown key"},
    {"{\"duration_s\": 5, \"tenants\": [" GOOD_TENANT ", {\"name\": \"x\", \"arrival\": "
     "{\"poison\": 1}, \"prompt_len\": 8, \"max_tokens\": 4}]}",
     ": tenants[1].arrival.poison:", "unknown key"},
    {"{\"duration_s\": 5, \"tenants\": [" GOOD_TENANT ", {\"name\": \"x\", \"arrival\": "
     "{\"poisson\": 1, \"concurrency\": 2}, \"prompt_len\": 8, \"max_tokens\": 4}]}",
     ": tenants[1].arrival:", "exactly one"},
    {"{\"duration_s\": 5, \"tenants\": [" GOOD_TENANT ", {\"name\": \"x\", \"arrival\": 3,"
     " \"prompt_len\": 8, \"max_tokens\": 4}]}",
     ": tenants[1].arrival:", "object"},
    {"{\"duration_s\": 5, \"tenants\": [" GOOD_TENANT ", {\"name\": \"x\", \"arrival\": "
     "{\"poisson\": -2}, \"prompt_len\": 8, \"max_tokens\": 4}]}",
     ": tenants[1].arrival.poisson:", ">= 0"},
    {"{\"duration_s\": 5, \"tenants\": [" GOOD_TENANT ", {\"name\": \"x\", \"arrival\": "
     "{\"burst\": 4}, \"prompt_len\": 8, \"max_tokens\": 4}]}",
     ": tenants[1].arrival.every_s:", "> 0"},
    {"{\"tenants\": [" GOOD_TENANT "]}", ": duration_s:", "requests"},
    {"{\"duration_s\": 0, \"requests\": 0, \"tenants\": [" GOOD_TENANT "]}",
     ": duration_s:", "requests"},
    {"{\"duration_s\": 5, \"tenants\": [" GOOD_TENANT ", {\"name\": \"x\", \"key\": "
     "\"$LB_TEST_UNSET\", \"arrival\": {\"poisson\": 1}, \"prompt_len\": 8, \"max_tokens\": 4}]}",
     ": tenants[1].key:", "LB_TEST_UNSET"},
    {"{\"duration_s\": 5, \"tenants\": [" GOOD_TENANT ", {\"name\": \"x\", \"arrival\": "
     "{\"poisson\": 1}, \"prompts_file\": \"nope.txt\", \"max_tokens\": 4}]}",
     ": tenants[1].prompts_file:", "nope.txt"},
    {"{\"duration_s\": 5, \"tenants\": [" GOOD_TENANT ", {\"name\": \"x\", \"arrival\": "
     "{\"poisson\": 1}, \"prompt_len\": {\"uniform\": [9, 3]}, \"max_tokens\": 4}]}",
     ": tenants[1].prompt_len.uniform:", "lo <= hi"},
    {"{\"duration_s\": 5, \"tenants\": [" GOOD_TENANT ", {\"name\": \"x\", \"arrival\": "
     "{\"poisson\": 1}, \"prompt_len\": {\"gauss\": [9, 3]}, \"max_tokens\": 4}]}",
     ": tenants[1].prompt_len.gauss:", "unknown key"},
    {"{\"duration_s\": 5, \"tenants\": [" GOOD_TENANT ", {\"name\": \"x\", \"arrival\": "
     "{\"poisson\": 1}, \"prompt_len\": 8}]}",
     ": tenants[1].max_tokens:", "missing"},
    {"{\"duration_s\": 5, \"tenants\": [" GOOD_TENANT ", {\"name\": \"x\", \"arrival\": "
     "{\"poisson\": 1}, \"prompt_len\": 8, \"max_tokens\": 4, \"stream\": 1}]}",
     ": tenants[1].stream:", "true or false"},
    {"{\"duration_s\": 5, \"tenants\": [" GOOD_TENANT ", {\"name\": \"x\", \"arrival\": "
     "{\"poisson\": 1}, \"prompt_len\": 8, \"max_tokens\": 4, \"disconnect\": 1.5}]}",
     ": tenants[1].disconnect:", "<= 1"},
    {"{\"duration_s\": 5, \"tenants\": [" GOOD_TENANT ", {\"name\": \"x\", \"arrival\": "
     "{\"poisson\": 1}, \"prompt_len\": 8, \"max_tokens\": 4, \"slo\": {\"ttft\": 3}}]}",
     ": tenants[1].slo.ttft:", "unknown key"},
    {"{\"duration_s\": 5, \"tenants\": [" GOOD_TENANT ", " GOOD_TENANT "]}",
     ": tenants[1].name:", "twice"},
    {"{\"duration_s\": 5, \"tenants\": [" GOOD_TENANT ", {\"name\": \"x\", \"arrival\": "
     "{\"poisson\": 1}, \"prompt_len\": 8, \"max_tokens\": 4, \"system\": \"hi\"}]}",
     ": tenants[1].system:", "chat"},
    {"{\"duration_s\": 5, \"api\": \"chatty\", \"tenants\": [" GOOD_TENANT "]}",
     ": api:", "completions"},
    {"{\"duration_s\": 5, \"end\": \"stop\", \"tenants\": [" GOOD_TENANT "]}", ": end:", "wait"},
    {"{\"duration_s\": 5, \"vocab\": [10], \"tenants\": [" GOOD_TENANT "]}", ": vocab:", "pair"},
    {"{\"duration_s\": 5, \"seed\": 1.5, \"tenants\": [" GOOD_TENANT "]}", ": seed:", "whole"},
    {"{\"duration_s\": 5, \"tenants\": []}", ": tenants:", "non-empty"},
    {"{\"duration_s\": 5, \"tenants\": [" GOOD_TENANT "], \"actions\": [{\"at_s\": 1}]}",
     ": actions[0].run:", "missing"},
    {"{\"duration_s\": 5, \"tenants\": [" GOOD_TENANT "], \"actions\": [{\"at_s\": 1, \"run\": "
     "\"x\", \"when\": 2}]}",
     ": actions[0].when:", "unknown key"},
    {"{\"duration_s\": 5, \"tenants\": [" GOOD_TENANT ",", "s.json:", ""},
};

START_TEST(bad_scenario_is_rejected_naming_file_and_field)
{
    unsetenv("LB_TEST_UNSET");
    struct lb_scenario sc;
    char err[512];
    int rc = load(bad_scenarios[_i].text, &sc, err, sizeof(err));
    ck_assert_msg(rc == -1, "case %d was accepted", _i);
    ck_assert_msg(strncmp(err, dir_path("s.json"), strlen(dir_path("s.json"))) == 0,
                  "case %d: err does not start with the file: %s", _i, err);
    ck_assert_msg(strstr(err, bad_scenarios[_i].field) != NULL, "case %d: no \"%s\" in: %s", _i,
                  bad_scenarios[_i].field, err);
    ck_assert_msg(strstr(err, bad_scenarios[_i].why) != NULL, "case %d: no \"%s\" in: %s", _i,
                  bad_scenarios[_i].why, err);
    ck_assert_ptr_null(sc.tenants); /* freed on the way out */
}
END_TEST

/* ======================================================== distributions */

START_TEST(fixed_draw_is_its_value_and_never_below_one)
{
    struct lb_rng r;
    lb_rng_seed(&r, 3);
    struct lb_dist d = {.kind = LB_DIST_FIXED, .a = 7};
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(lb_dist_draw(&d, &r), 7);
    d.a = 0.2;
    ck_assert_int_eq(lb_dist_draw(&d, &r), 1);
    d.a = 6.6;
    ck_assert_int_eq(lb_dist_draw(&d, &r), 7);
}
END_TEST

START_TEST(uniform_draws_cover_the_range_and_stay_in_it)
{
    struct lb_rng r;
    lb_rng_seed(&r, 11);
    struct lb_dist d = {.kind = LB_DIST_UNIFORM, .a = 3, .b = 6};
    int seen[8] = {0};
    for (int i = 0; i < 2000; i++) {
        int x = lb_dist_draw(&d, &r);
        ck_assert(x >= 3 && x <= 6);
        seen[x]++;
    }
    /* each of the four values about 500 times; both ends as often as the
     * middle, which rounding a real draw would not give */
    for (int v = 3; v <= 6; v++)
        ck_assert_msg(seen[v] > 400 && seen[v] < 600, "value %d seen %d times", v, seen[v]);
}
END_TEST

START_TEST(clip_bounds_hold_and_are_reached)
{
    struct lb_rng r;
    lb_rng_seed(&r, 5);
    struct lb_dist d = {.kind = LB_DIST_NORMAL, .a = 50, .b = 100, .min = 40, .max = 60};
    int lo = 0, hi = 0;
    for (int i = 0; i < 1000; i++) {
        int x = lb_dist_draw(&d, &r);
        ck_assert(x >= 40 && x <= 60);
        lo += x == 40;
        hi += x == 60;
    }
    ck_assert_int_gt(lo, 100);
    ck_assert_int_gt(hi, 100);
    /* a normal far below zero still gives at least 1 */
    struct lb_dist neg = {.kind = LB_DIST_NORMAL, .a = -100, .b = 1};
    ck_assert_int_eq(lb_dist_draw(&neg, &r), 1);
}
END_TEST

START_TEST(same_seed_same_draws_other_seed_other_draws)
{
    struct lb_rng a, b, c;
    lb_rng_seed(&a, 42);
    lb_rng_seed(&b, 42);
    lb_rng_seed(&c, 43);
    int differ = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = lb_rng_next(&a);
        ck_assert_uint_eq(x, lb_rng_next(&b));
        differ += x != lb_rng_next(&c);
    }
    ck_assert_int_eq(differ, 100);
    /* seed 0 is a valid seed too (the state must not be all zero) */
    lb_rng_seed(&a, 0);
    ck_assert_uint_ne(lb_rng_next(&a) | lb_rng_next(&a), 0);
}
END_TEST

START_TEST(draw_means_match_the_distributions)
{
    struct lb_rng r;
    lb_rng_seed(&r, 2024);
    const int n = 20000;
    double su = 0, se = 0, sn = 0, sn2 = 0;
    for (int i = 0; i < n; i++) {
        double u = lb_rng_unit(&r);
        ck_assert(u >= 0 && u < 1);
        su += u;
        se += lb_rng_exp(&r, 4);
        double z = lb_rng_normal(&r);
        sn += z;
        sn2 += z * z;
    }
    ck_assert_double_eq_tol(su / n, 0.5, 0.02);
    ck_assert_double_eq_tol(se / n, 0.25, 0.02);
    ck_assert_double_eq_tol(sn / n, 0, 0.05);
    ck_assert_double_eq_tol(sn2 / n, 1, 0.05);
    struct lb_dist d = {.kind = LB_DIST_NORMAL, .a = 100, .b = 10};
    double s = 0;
    int below = 0;
    for (int i = 0; i < n; i++)
        s += lb_dist_draw(&d, &r);
    ck_assert_double_eq_tol(s / n, 100, 1);
    struct lb_dist ln = {.kind = LB_DIST_LOGNORMAL, .a = 50, .b = 0.5};
    for (int i = 0; i < n; i++)
        below += lb_dist_draw(&ln, &r) < 50;
    /* the median is 50: about half below (the draw rounded to 50 counts
     * as not below, hence the wide bound) */
    ck_assert_int_gt(below, n * 45 / 100);
    ck_assert_int_lt(below, n * 52 / 100);
}
END_TEST

#define TWO_SAME_TENANTS                                                                           \
    "{\"duration_s\": 10, \"tenants\": [\n"                                                        \
    " {\"name\": \"a\", \"arrival\": {\"poisson\": 1}, \"prompt_len\": {\"uniform\": [5, 50]},\n"  \
    "  \"max_tokens\": {\"uniform\": [1, 100]}},\n"                                                \
    " {\"name\": \"b\", \"arrival\": {\"poisson\": 1}, \"prompt_len\": {\"uniform\": [5, 50]},\n"  \
    "  \"max_tokens\": {\"uniform\": [1, 100]}}]}"

START_TEST(tenants_draw_from_different_streams_that_repeat_across_loads)
{
    struct lb_scenario s1, s2;
    load_ok(TWO_SAME_TENANTS, &s1);
    load_ok(TWO_SAME_TENANTS, &s2);
    struct lb_record r;
    char *a1 = body_of(&s1, 0, &r), *b1 = body_of(&s1, 1, &r);
    char *a2 = body_of(&s2, 0, &r), *b2 = body_of(&s2, 1, &r);
    ck_assert_str_ne(a1, b1);
    ck_assert_str_eq(a1, a2);
    ck_assert_str_eq(b1, b2);
    free(a1);
    free(b1);
    free(a2);
    free(b2);
    ck_assert_uint_ne(lb_rng_next(&s1.tenants[0].rng), lb_rng_next(&s1.tenants[1].rng));
    lb_scen_free(&s1);
    lb_scen_free(&s2);
}
END_TEST

/* Reseeding (--seed) sends what loading with that seed sends, prefix
 * included, and reseeding before --only keeps the other tenant's stream. */
START_TEST(reseed_equals_loading_with_that_seed)
{
    struct lb_scenario s1, s7;
    load_tenant("\"seed\": 7,",
                "\"prompt_len\": 5, \"prefix_len\": 4, \"max_tokens\": 3, "
                "\"arrival\": {\"poisson\": 1}",
                &s7);
    load_tenant("",
                "\"prompt_len\": 5, \"prefix_len\": 4, \"max_tokens\": 3, "
                "\"arrival\": {\"poisson\": 1}",
                &s1);
    struct lb_record r;
    char *before = body_of(&s1, 0, &r);
    ck_assert_int_eq(lb_scen_reseed(&s1, 7), 0);
    char *a = body_of(&s1, 0, &r), *b = body_of(&s7, 0, &r);
    ck_assert_str_ne(before, b);
    ck_assert_str_eq(a, b);
    free(before);
    free(a);
    free(b);
    lb_scen_free(&s1);
    lb_scen_free(&s7);
}
END_TEST

/* ================================================================ bodies */

START_TEST(completion_body_is_prefix_then_drawn_ids)
{
    struct lb_scenario sc;
    load_tenant("\"model\": \"m\", \"vocab\": [100, 200],",
                "\"arrival\": {\"poisson\": 1}, \"prefix_len\": 8,"
                " \"prompt_len\": {\"uniform\": [10, 20]}, \"max_tokens\": 16",
                &sc);
    const struct lb_tenant *t = &sc.tenants[0];
    int lens_seen = 0, last_len = -1;
    for (int k = 0; k < 20; k++) {
        struct lb_record rec;
        char *b = body_of(&sc, 0, &rec);
        json_t *j = parse(b);
        json_t *p = json_object_get(j, "prompt");
        int n = (int)json_array_size(p);
        ck_assert_int_ge(n, 8 + 10);
        ck_assert_int_le(n, 8 + 20);
        ck_assert_int_eq(rec.prompt_tokens, n);
        ck_assert_int_eq(rec.max_tokens, 16);
        ck_assert_int_eq(rec.stream, 0);
        ck_assert_int_eq(rec.disconnect_after, 0);
        ck_assert_double_eq(rec.disconnect_at_s, 0);
        for (int i = 0; i < n; i++) {
            json_int_t id = json_integer_value(json_array_get(p, (size_t)i));
            ck_assert(id >= 100 && id <= 200);
            if (i < 8)
                ck_assert_int_eq(id, t->prefix[i]);
        }
        lens_seen += n != last_len;
        last_len = n;
        ck_assert_str_eq(json_string_value(json_object_get(j, "model")), "m");
        ck_assert_int_eq(json_integer_value(json_object_get(j, "max_tokens")), 16);
        ck_assert(json_is_false(json_object_get(j, "stream")));
        ck_assert_ptr_null(json_object_get(j, "stream_options"));
        ck_assert_ptr_null(json_object_get(j, "priority"));
        ck_assert_ptr_null(json_object_get(j, "temperature"));
        ck_assert_ptr_null(json_object_get(j, "ignore_eos"));
        ck_assert_ptr_null(json_object_get(j, "messages"));
        json_decref(j);
        free(b);
    }
    ck_assert_int_gt(lens_seen, 5); /* the length really is drawn */
    lb_scen_free(&sc);
}
END_TEST

START_TEST(streaming_body_carries_the_options_that_are_set)
{
    struct lb_scenario sc;
    load_tenant("",
                "\"arrival\": {\"poisson\": 1}, \"prompt_len\": 4, \"max_tokens\": 8,"
                " \"stream\": true, \"priority\": 3, \"temperature\": 0, \"ignore_eos\": true",
                &sc);
    struct lb_record rec;
    char *b = body_of(&sc, 0, &rec);
    json_t *j = parse(b);
    ck_assert_ptr_null(json_object_get(j, "model"));
    ck_assert(json_is_true(json_object_get(j, "stream")));
    ck_assert(json_is_true(json_object_get(json_object_get(j, "stream_options"), "include_usage")));
    ck_assert_int_eq(json_integer_value(json_object_get(j, "priority")), 3);
    /* temperature 0 is set, not absent */
    ck_assert(json_is_number(json_object_get(j, "temperature")));
    ck_assert_double_eq(json_number_value(json_object_get(j, "temperature")), 0);
    ck_assert(json_is_true(json_object_get(j, "ignore_eos")));
    ck_assert_int_eq(rec.stream, 1);
    ck_assert_int_eq(rec.prompt_tokens, 4);
    json_decref(j);
    free(b);
    lb_scen_free(&sc);
}
END_TEST

START_TEST(chat_body_has_system_then_user_of_drawn_words)
{
    struct lb_scenario sc;
    load_tenant("\"api\": \"chat\",",
                "\"arrival\": {\"poisson\": 1}, \"prompt_len\": 5,"
                " \"max_tokens\": 8, \"system\": \"be brief\"",
                &sc);
    ck_assert_str_eq(lb_scen_path(&sc), "/v1/chat/completions");
    struct lb_record rec;
    char *b = body_of(&sc, 0, &rec);
    json_t *j = parse(b);
    json_t *m = json_object_get(j, "messages");
    ck_assert_ptr_null(json_object_get(j, "prompt"));
    ck_assert_int_eq(json_array_size(m), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(m, 0), "role")), "system");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(m, 0), "content")),
                     "be brief");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(m, 1), "role")), "user");
    const char *u = json_string_value(json_object_get(json_array_get(m, 1), "content"));
    ck_assert_int_eq(count_words(u), 5);
    ck_assert_int_eq(rec.prompt_tokens, 0); /* text: known from usage only */
    json_decref(j);
    free(b);
    lb_scen_free(&sc);
}
END_TEST

START_TEST(prompts_file_lines_are_sent_as_text)
{
    write_file("prompts.txt", "alpha beta\ngamma\n");
    struct lb_scenario sc;
    load_tenant("",
                "\"arrival\": {\"poisson\": 1}, \"prompts_file\": \"prompts.txt\","
                " \"max_tokens\": 8",
                &sc);
    int seen_a = 0, seen_g = 0;
    for (int k = 0; k < 40; k++) {
        struct lb_record rec;
        char *b = body_of(&sc, 0, &rec);
        json_t *j = parse(b);
        const char *p = json_string_value(json_object_get(j, "prompt"));
        ck_assert_ptr_nonnull(p);
        ck_assert(strcmp(p, "alpha beta") == 0 || strcmp(p, "gamma") == 0);
        seen_a += strcmp(p, "alpha beta") == 0;
        seen_g += strcmp(p, "gamma") == 0;
        ck_assert_int_eq(rec.prompt_tokens, 0);
        json_decref(j);
        free(b);
    }
    ck_assert_int_gt(seen_a, 0);
    ck_assert_int_gt(seen_g, 0);
    lb_scen_free(&sc);

    /* chat without a system message: one user message, a line of the file */
    load_tenant("\"api\": \"chat\",",
                "\"arrival\": {\"poisson\": 1}, \"prompts_file\":"
                " \"prompts.txt\", \"max_tokens\": 8",
                &sc);
    struct lb_record rec;
    char *b = body_of(&sc, 0, &rec);
    json_t *j = parse(b);
    json_t *m = json_object_get(j, "messages");
    ck_assert_int_eq(json_array_size(m), 1);
    const char *u = json_string_value(json_object_get(json_array_get(m, 0), "content"));
    ck_assert(strcmp(u, "alpha beta") == 0 || strcmp(u, "gamma") == 0);
    json_decref(j);
    free(b);
    lb_scen_free(&sc);
}
END_TEST

START_TEST(disconnects_are_drawn_within_their_bounds)
{
    struct lb_scenario sc;
    load_tenant("",
                "\"arrival\": {\"poisson\": 1}, \"prompt_len\": 4, \"max_tokens\": 10,"
                " \"stream\": true, \"disconnect\": 1",
                &sc);
    int seen[10] = {0};
    for (int k = 0; k < 200; k++) {
        struct lb_record rec;
        free(body_of(&sc, 0, &rec));
        ck_assert(rec.disconnect_after >= 1 && rec.disconnect_after <= 9);
        ck_assert_double_eq(rec.disconnect_at_s, 0);
        seen[rec.disconnect_after]++;
    }
    ck_assert_int_gt(seen[1], 0);
    ck_assert_int_gt(seen[9], 0);
    lb_scen_free(&sc);

    load_tenant("",
                "\"arrival\": {\"poisson\": 1}, \"prompt_len\": 4, \"max_tokens\": 10,"
                " \"disconnect\": 0.5",
                &sc);
    int cut = 0;
    for (int k = 0; k < 400; k++) {
        struct lb_record rec;
        free(body_of(&sc, 0, &rec));
        ck_assert_int_eq(rec.disconnect_after, 0);
        if (rec.disconnect_at_s > 0) {
            ck_assert(rec.disconnect_at_s >= 0.05 && rec.disconnect_at_s <= 2.0);
            cut++;
        }
    }
    ck_assert(cut > 150 && cut < 250);
    lb_scen_free(&sc);
}
END_TEST

/* ==================================================== --only and --rate */

#define THREE_TENANTS                                                                              \
    "{\"duration_s\": 10, \"tenants\": [\n"                                                        \
    " {\"name\": \"a\", \"arrival\": {\"poisson\": 2}, \"prompt_len\": 4, \"max_tokens\": 4},\n"   \
    " {\"name\": \"b\", \"arrival\": {\"burst\": 3, \"every_s\": 6}, \"prompt_len\": 4,"           \
    "  \"max_tokens\": 4},\n"                                                                      \
    " {\"name\": \"c\", \"arrival\": {\"concurrency\": 2, \"think_s\": 1}, \"prompt_len\": 4,"     \
    "  \"max_tokens\": 4}]}"

START_TEST(only_keeps_the_named_tenants_and_their_streams)
{
    struct lb_scenario sc;
    char err[256];
    load_ok(THREE_TENANTS, &sc);
    struct lb_rng c_rng = sc.tenants[2].rng;
    ck_assert_int_eq(lb_scen_only(&sc, "a,zz", err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "zz"));
    ck_assert_int_eq(sc.n_tenants, 3); /* nothing dropped on error */
    ck_assert_int_eq(lb_scen_only(&sc, "c,a", err, sizeof(err)), 0);
    ck_assert_int_eq(sc.n_tenants, 2);
    ck_assert_str_eq(sc.tenants[0].name, "a");
    ck_assert_str_eq(sc.tenants[1].name, "c");
    ck_assert_mem_eq(&sc.tenants[1].rng, &c_rng, sizeof(c_rng));
    lb_scen_free(&sc);
}
END_TEST

START_TEST(scale_rate_speeds_up_open_arrivals_only)
{
    struct lb_scenario sc;
    load_ok(THREE_TENANTS, &sc);
    lb_scen_scale_rate(&sc, 3);
    ck_assert_double_eq(sc.tenants[0].rate, 6);
    ck_assert_double_eq(sc.tenants[1].every_s, 2);
    ck_assert_int_eq(sc.tenants[1].burst, 3);
    ck_assert_int_eq(sc.tenants[2].concurrency, 2);
    ck_assert_double_eq(sc.tenants[2].think_s, 1);
    lb_scen_free(&sc);
}
END_TEST

/* ================================================================ report */

/* A two-tenant scenario built by hand ("b" may be renamed). */
static void hand_scenario(struct lb_scenario *sc, const char *bname, double warmup)
{
    memset(sc, 0, sizeof(*sc));
    sc->name = strdup("hand");
    sc->seed = 9;
    sc->warmup_s = warmup;
    sc->n_tenants = 2;
    sc->tenants = calloc(2, sizeof(*sc->tenants));
    sc->tenants[0].name = strdup("a");
    sc->tenants[1].name = strdup(bname);
    sc->tenants[0].slo.ttft_ms = 550;
    sc->n_actions = 1;
    sc->actions = calloc(1, sizeof(*sc->actions));
    sc->actions[0] = (struct lb_action){.at_s = 3, .run = strdup("true"), .exit = 0};
}

static struct lb_record rec_ok(int tenant, double t_send, double ttft_s, double e2e_s, int out)
{
    return (struct lb_record){.tenant = tenant,
                              .stream = 1,
                              .t_arrive = t_send,
                              .t_send = t_send,
                              .t_first = t_send + ttft_s,
                              .t_end = t_send + e2e_s,
                              .out_tokens = out,
                              .chunks = out,
                              .usage_seen = 1,
                              .outcome = LB_OK,
                              .http_status = 200};
}

static struct lb_record rec_bad(int tenant, enum lb_outcome o, int status, const char *err)
{
    struct lb_record r = {.tenant = tenant,
                          .t_arrive = 12,
                          .t_send = 12,
                          .t_first = -1,
                          .t_end = 12.5,
                          .outcome = o,
                          .http_status = status};
    snprintf(r.err, sizeof(r.err), "%s", err);
    return r;
}

static void recs_free(struct lb_record *r, int n)
{
    for (int i = 0; i < n; i++)
        lb_record_free(&r[i]);
}

static double num(const json_t *o, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", path);
    const json_t *v = o;
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save))
        v = json_object_get(v, k);
    ck_assert_msg(json_is_number(v), "%s is not a number", path);
    return json_number_value(v);
}

/* Tenant a: 10 measured ok streams with TTFT 100..1000 ms, e2e 2000 ms,
 * 11 tokens, 10 gaps of 10*(i+1) ms each; one more ok during warmup with
 * an outlier TTFT.  Tenant b: one of each other outcome. */
static int build_mixed(struct lb_record *r)
{
    int n = 0;
    for (int i = 0; i < 10; i++) {
        r[n] = rec_ok(0, 10 + i, 0.1 * (i + 1), 2.0, 11);
        for (int k = 0; k < 10; k++)
            ck_assert_int_eq(lb_record_itl(&r[n], 10.0f * (float)(i + 1)), 0);
        n++;
    }
    r[n++] = rec_ok(0, 5, 9.0, 9.5, 2); /* before warmup_s */
    r[n++] = rec_bad(1, LB_REFUSED, 429, "rate_limit_exceeded");
    r[n++] = rec_bad(1, LB_REFUSED, 429, "rate_limit_exceeded");
    r[n] = rec_bad(1, LB_FAILED, 200, "request_aborted");
    r[n].t_first = 12.3; /* a first token, then the abort */
    r[n].chunks = r[n].out_tokens = 1;
    n++;
    r[n++] = rec_bad(1, LB_LOST, 0, "timeout");
    r[n++] = rec_bad(1, LB_CUT, 0, "");
    r[n++] = rec_bad(1, LB_DISCONNECTED, 200, "");
    return n;
}

START_TEST(report_counts_outcomes_and_keys_errors)
{
    struct lb_scenario sc;
    struct lb_record r[32];
    hand_scenario(&sc, "b", 10);
    int n = build_mixed(r);
    json_t *j = lb_report(&sc, "http://h:1", r, n, 30, 20);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(json_string_value(json_object_get(j, "tool")), "llmbench");
    ck_assert_str_eq(json_string_value(json_object_get(j, "scenario")), "hand");
    ck_assert_str_eq(json_string_value(json_object_get(j, "target")), "http://h:1");
    ck_assert_str_eq(json_string_value(json_object_get(j, "api")), "completions");
    ck_assert_double_eq(num(j, "seed"), 9);
    ck_assert_double_eq(num(j, "wall_s"), 30);
    ck_assert_double_eq(num(j, "window_s"), 20);
    ck_assert_double_eq(num(j, "overall.sent"), 17);
    ck_assert_double_eq(num(j, "overall.ok"), 11);
    ck_assert_double_eq(num(j, "tenants.a.sent"), 11);
    ck_assert_double_eq(num(j, "tenants.b.sent"), 6);
    ck_assert_double_eq(num(j, "tenants.b.ok"), 0);
    ck_assert_double_eq(num(j, "tenants.b.refused"), 2);
    ck_assert_double_eq(num(j, "tenants.b.failed"), 1);
    ck_assert_double_eq(num(j, "tenants.b.lost"), 1);
    ck_assert_double_eq(num(j, "tenants.b.cut"), 1);
    ck_assert_double_eq(num(j, "tenants.b.disconnected"), 1);
    const json_t *e =
        json_object_get(json_object_get(json_object_get(j, "tenants"), "b"), "errors");
    ck_assert_int_eq(json_object_size(e), 4);
    ck_assert_int_eq(json_integer_value(json_object_get(e, "429 rate_limit_exceeded")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(e, "200 request_aborted")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(e, "lost timeout")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(e, "cut")), 1);
    ck_assert_int_eq(json_object_size(json_object_get(json_object_get(j, "overall"), "errors")), 4);
    ck_assert_double_eq(num(j, "overall.output_tokens"), 10 * 11 + 2 + 1);
    const json_t *a = json_array_get(json_object_get(j, "actions"), 0);
    ck_assert_double_eq(num(a, "at_s"), 3);
    ck_assert_str_eq(json_string_value(json_object_get(a, "run")), "true");
    ck_assert_double_eq(num(a, "exit"), 0);
    json_decref(j);
    recs_free(r, n);
    lb_scen_free(&sc);
}
END_TEST

START_TEST(report_percentiles_are_nearest_rank_after_warmup)
{
    struct lb_scenario sc;
    struct lb_record r[32];
    hand_scenario(&sc, "b", 10);
    int n = build_mixed(r);
    json_t *j = lb_report(&sc, "t", r, n, 30, 20);
    ck_assert_ptr_nonnull(j);
    /* the warmup record's 9000 ms is left out */
    ck_assert_double_eq(num(j, "tenants.a.ttft_ms.n"), 10);
    ck_assert_double_eq_tol(num(j, "tenants.a.ttft_ms.p50"), 500, 1e-6);
    ck_assert_double_eq_tol(num(j, "tenants.a.ttft_ms.p90"), 900, 1e-6);
    ck_assert_double_eq_tol(num(j, "tenants.a.ttft_ms.p99"), 1000, 1e-6);
    ck_assert_double_eq_tol(num(j, "tenants.a.ttft_ms.max"), 1000, 1e-6);
    ck_assert_double_eq_tol(num(j, "tenants.a.ttft_ms.mean"), 550, 1e-6);
    ck_assert_double_eq(num(j, "tenants.a.e2e_ms.n"), 10);
    ck_assert_double_eq_tol(num(j, "tenants.a.e2e_ms.p99"), 2000, 1e-6);
    /* TPOT = (2000 - TTFT) / 10: 190 .. 100 */
    ck_assert_double_eq_tol(num(j, "tenants.a.tpot_ms.p50"), 140, 1e-6);
    ck_assert_double_eq_tol(num(j, "tenants.a.tpot_ms.max"), 190, 1e-6);
    /* ITL: ten gaps of 10, 20, ... 100 ms */
    ck_assert_double_eq(num(j, "tenants.a.itl_ms.n"), 100);
    ck_assert_double_eq_tol(num(j, "tenants.a.itl_ms.p50"), 50, 1e-6);
    ck_assert_double_eq_tol(num(j, "tenants.a.itl_ms.p90"), 90, 1e-6);
    ck_assert_double_eq_tol(num(j, "tenants.a.itl_ms.p99"), 100, 1e-6);
    /* tenant b: only the failed request's first token counts for TTFT */
    ck_assert_double_eq(num(j, "tenants.b.ttft_ms.n"), 1);
    ck_assert_double_eq_tol(num(j, "tenants.b.ttft_ms.p50"), 300, 1e-6);
    ck_assert_double_eq(num(j, "tenants.b.e2e_ms.n"), 0);
    ck_assert(json_is_null(json_object_get(
        json_object_get(json_object_get(json_object_get(j, "tenants"), "b"), "e2e_ms"), "p50")));
    ck_assert_double_eq(num(j, "overall.ttft_ms.n"), 11);
    json_decref(j);
    recs_free(r, n);
    lb_scen_free(&sc);
}
END_TEST

START_TEST(goodput_counts_ok_requests_meeting_the_slo)
{
    struct lb_scenario sc;
    struct lb_record r[32];
    hand_scenario(&sc, "b", 10);
    int n = build_mixed(r);
    /* tenant a's SLO: TTFT <= 550 ms, met by 100..500, missed by 600..1000 */
    json_t *j = lb_report(&sc, "t", r, n, 30, 20);
    ck_assert_double_eq_tol(num(j, "tenants.a.slo_met_fraction"), 0.5, 1e-9);
    ck_assert_double_eq_tol(num(j, "tenants.a.goodput_req_per_s"), 5.0 / 20, 1e-9);
    ck_assert_double_eq_tol(num(j, "tenants.a.req_per_s"), 10.0 / 20, 1e-9);
    ck_assert_double_eq_tol(num(j, "overall.goodput_req_per_s"), 5.0 / 20, 1e-9);
    json_decref(j);
    /* an e2e SLO every request misses */
    sc.tenants[0].slo = (struct lb_slo){.e2e_ms = 1500};
    j = lb_report(&sc, "t", r, n, 30, 20);
    ck_assert_double_eq(num(j, "tenants.a.goodput_req_per_s"), 0);
    json_decref(j);
    /* a TPOT SLO of 150 ms: TPOT (2000 - TTFT) / 10 <= 150 for TTFT >= 500 */
    sc.tenants[0].slo = (struct lb_slo){.tpot_ms = 150.5};
    j = lb_report(&sc, "t", r, n, 30, 20);
    ck_assert_double_eq_tol(num(j, "tenants.a.slo_met_fraction"), 0.6, 1e-9);
    json_decref(j);
    recs_free(r, n);
    lb_scen_free(&sc);
}
END_TEST

START_TEST(window_tokens_count_arrivals_inside_the_window)
{
    struct lb_scenario sc;
    struct lb_record r[3];
    hand_scenario(&sc, "b", 10);
    /* chunks at 8, 9, 10, 11, 12 s; usage says 10 tokens: 2 per chunk, 3
     * chunks inside [10, 20] */
    r[0] = rec_ok(0, 7, 1, 5, 10);
    r[0].chunks = 5;
    for (int k = 0; k < 4; k++)
        lb_record_itl(&r[0], 1000);
    /* not streamed: all 7 at t_end = 19 (in), 4 at t_end = 25 (out) */
    r[1] = rec_ok(1, 15, 0, 4, 7);
    r[1].stream = 0;
    r[1].chunks = 0;
    r[2] = r[1];
    r[1].t_first = -1; /* a client may leave it unset (1), or set it to t_end (2) */
    r[2].t_send = r[2].t_arrive = 21;
    r[2].t_end = r[2].t_first = 25;
    r[2].chunks = 1;
    r[2].out_tokens = 4;
    json_t *j = lb_report(&sc, "t", r, 3, 30, 10);
    ck_assert_double_eq(num(j, "tenants.a.window_output_tokens"), 6);
    ck_assert_double_eq(num(j, "tenants.b.window_output_tokens"), 7);
    ck_assert_double_eq(num(j, "overall.window_output_tokens"), 13);
    ck_assert_double_eq(num(j, "overall.output_tokens"), 21);
    ck_assert_double_eq_tol(num(j, "overall.out_tok_per_s"), 1.3, 1e-9);
    /* the non-streamed answer's TTFT is its e2e */
    ck_assert_double_eq_tol(num(j, "tenants.b.ttft_ms.p50"), 4000, 1e-6);
    ck_assert_double_eq(num(j, "tenants.b.tpot_ms.n"), 0); /* no per-token times */
    json_decref(j);
    recs_free(r, 3);
    lb_scen_free(&sc);
}
END_TEST

static double arr_sum(const json_t *arr, int from, int to)
{
    double s = 0;
    for (int k = from; k < to; k++)
        s += json_number_value(json_array_get(arr, (size_t)k));
    return s;
}

START_TEST(series_buckets_add_up_to_the_totals)
{
    struct lb_scenario sc;
    struct lb_record r[32];
    hand_scenario(&sc, "b", 2);
    int n = 0;
    for (int i = 0; i < 20; i++) {
        r[n] = rec_ok(i % 2, 1.25 * i + 0.1, 0.3, 3.0, 6);
        for (int k = 0; k < 5; k++)
            lb_record_itl(&r[n], 500);
        n++;
    }
    json_t *j = lb_report(&sc, "t", r, n, 30, 20);
    const json_t *s = json_object_get(j, "series");
    ck_assert_double_eq(num(s, "bucket_s"), 1);
    ck_assert_int_eq(json_array_size(json_object_get(s, "t")), 30);
    double all = 0, win = 0, ok = 0;
    for (int ti = 0; ti < 2; ti++) {
        const json_t *ts = json_object_get(json_object_get(s, "tenants"), ti ? "b" : "a");
        const json_t *tok = json_object_get(ts, "tok_s");
        ck_assert_int_eq(json_array_size(tok), 30);
        all += arr_sum(tok, 0, 30);
        win += arr_sum(tok, 2, 22); /* buckets of [2, 22) */
        ok += arr_sum(json_object_get(ts, "req_s"), 0, 30);
        ck_assert_int_eq(json_array_size(json_object_get(ts, "inflight")), 30);
    }
    ck_assert_double_eq_tol(all, num(j, "overall.output_tokens"), 1e-9);
    ck_assert_double_eq_tol(win, num(j, "overall.window_output_tokens"), 1e-9);
    ck_assert_double_eq(ok, 20);
    /* tenant a sent at 0.1, 2.6, 5.1 ..., each taking 3 s: none in flight
     * at t = 0, one at t = 1, two at t = 3 (the first ends at 3.1) */
    const json_t *a = json_object_get(json_object_get(s, "tenants"), "a");
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(a, "inflight"), 0)), 0);
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(a, "inflight"), 1)), 1);
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(a, "inflight"), 3)), 2);
    /* first token of a's 0.1 request at 0.4: bucket 0; none in bucket 1 */
    const json_t *p50 = json_object_get(a, "ttft_p50_ms");
    ck_assert_double_eq_tol(json_number_value(json_array_get(p50, 0)), 300, 1e-6);
    ck_assert(json_is_null(json_array_get(p50, 1)));
    json_decref(j);

    /* a long run: whole-second buckets, at most about 120 */
    j = lb_report(&sc, "t", r, n, 1000, 20);
    s = json_object_get(j, "series");
    ck_assert_double_eq(num(s, "bucket_s"), 9);
    ck_assert_int_le(json_array_size(json_object_get(s, "t")), 120);
    ck_assert_double_eq(json_number_value(json_array_get(json_object_get(s, "t"), 1)), 9);
    json_decref(j);
    recs_free(r, n);
    lb_scen_free(&sc);
}
END_TEST

START_TEST(table_shows_tenants_overall_and_errors)
{
    struct lb_scenario sc;
    struct lb_record r[32];
    hand_scenario(&sc, "batch", 10);
    int n = build_mixed(r);
    json_t *j = lb_report(&sc, "http://h:1", r, n, 30, 20);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    lb_report_print(f, j);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "hand"));
    ck_assert_ptr_nonnull(strstr(buf, "http://h:1"));
    ck_assert_ptr_nonnull(strstr(buf, "\nbatch "));
    ck_assert_ptr_nonnull(strstr(buf, "\noverall "));
    /* a's row: counts, then TTFT p50/p90/p99/max */
    char *row = strstr(buf, "\na ");
    ck_assert_ptr_nonnull(row);
    *strchr(row + 1, '\n') = '\0';
    ck_assert_ptr_nonnull(strstr(row, " 11 "));
    ck_assert_ptr_nonnull(strstr(row, " 500/900/1000/1000 "));
    ck_assert_ptr_nonnull(strstr(row, " 2000/2000/2000/2000"));
    row[strlen(row)] = '\n';
    ck_assert_ptr_nonnull(strstr(buf, "429 rate_limit_exceeded"));
    ck_assert_ptr_nonnull(strstr(buf, "lost timeout"));
    free(buf);
    json_decref(j);
    recs_free(r, n);
    lb_scen_free(&sc);
}
END_TEST

/* ================================================================== plot */

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* Every '&' starts one of the five XML entities; one <svg> ... </svg>. */
static void assert_wellformed(const char *s)
{
    static const char *const ents[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
    ck_assert_int_eq(strncmp(s, "<svg", 4), 0);
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
        n--;
    ck_assert(n >= 6 && strncmp(s + n - 6, "</svg>", 6) == 0);
    for (const char *p = strchr(s, '&'); p; p = strchr(p + 1, '&')) {
        int ok = 0;
        for (int i = 0; i < 5; i++)
            ok |= strncmp(p, ents[i], strlen(ents[i])) == 0;
        ck_assert_msg(ok, "bare & at: %.20s", p);
    }
    ck_assert_ptr_null(strstr(s + 4, "<svg"));
}

START_TEST(plot_writes_an_svg_with_escaped_tenant_names)
{
    struct lb_scenario sc;
    struct lb_record r[32];
    hand_scenario(&sc, "x<&>y", 10);
    int n = build_mixed(r);
    json_t *j = lb_report(&sc, "http://h:1/?a=1&b=2", r, n, 30, 20);
    char err[256];
    ck_assert_int_eq(lb_plot_svg(dir_path("out.svg"), j, err, sizeof(err)), 0);
    char *s = slurp(dir_path("out.svg"));
    assert_wellformed(s);
    ck_assert_ptr_nonnull(strstr(s, "x&lt;&amp;&gt;y"));
    ck_assert_ptr_null(strstr(s, "x<&>y"));
    ck_assert_ptr_nonnull(strstr(s, ">a</text>"));
    ck_assert_ptr_nonnull(strstr(s, "hand"));
    ck_assert_ptr_nonnull(strstr(s, "a=1&amp;b=2"));
    ck_assert_ptr_nonnull(strstr(s, "log"));
    free(s);
    json_decref(j);
    recs_free(r, n);
    lb_scen_free(&sc);
}
END_TEST

/* Path commands "M" (pen down after a gap) in the d attributes. */
static int count_moves(const char *s)
{
    int n = 0;
    for (const char *p = strstr(s, " d=\""); p; p = strstr(p + 1, " d=\""))
        for (const char *q = p + 4; *q && *q != '"'; q++)
            n += *q == 'M';
    return n;
}

START_TEST(plot_breaks_lines_at_null_points)
{
    json_t *j = parse("{\"scenario\": \"s\", \"target\": \"t\", \"series\": {\"bucket_s\": 1,"
                      " \"t\": [0, 1, 2, 3, 4], \"tenants\": {\"only\": {"
                      " \"tok_s\": [1, 2, 3, 4, 5],"
                      " \"ttft_p50_ms\": [10, null, 20, 30, null],"
                      " \"ttft_p99_ms\": [null, null, null, null, null]}}}}");
    char err[256];
    ck_assert_int_eq(lb_plot_svg(dir_path("out.svg"), j, err, sizeof(err)), 0);
    char *s = slurp(dir_path("out.svg"));
    assert_wellformed(s);
    /* tok_s: one stroke; p50: two (10 | 20 30); p99: none */
    ck_assert_int_eq(count_moves(s), 3);
    /* the lone point 10 gets a dot */
    ck_assert_ptr_nonnull(strstr(s, "<circle"));
    free(s);
    json_decref(j);
}
END_TEST

START_TEST(plot_errors_are_reported)
{
    char err[256] = "";
    json_t *j = parse("{\"scenario\": \"s\"}");
    ck_assert_int_eq(lb_plot_svg(dir_path("out.svg"), j, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "series"));
    json_decref(j);
    j = parse("{\"series\": {\"bucket_s\": 1, \"t\": [], \"tenants\": {}}}");
    ck_assert_int_eq(lb_plot_svg("/nonexistent/dir/x.svg", j, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/dir/x.svg"));
    json_decref(j);
}
END_TEST

/* =============================================================== records */

START_TEST(record_itl_grows_and_free_resets)
{
    struct lb_record r = {0};
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(lb_record_itl(&r, (float)i), 0);
    ck_assert_int_eq(r.n_itl, 1000);
    ck_assert(r.cap_itl >= 1000);
    for (int i = 0; i < 1000; i++)
        ck_assert(r.itl_ms[i] == (float)i);
    lb_record_free(&r);
    ck_assert_ptr_null(r.itl_ms);
    ck_assert_int_eq(r.n_itl, 0);
    ck_assert_str_eq(lb_outcome_name(LB_OK), "ok");
    ck_assert_str_eq(lb_outcome_name(LB_DISCONNECTED), "disconnected");
    ck_assert_str_eq(lb_outcome_name(LB_CUT), "cut");
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("llmbench");
    TCase *tc = tcase_create("scenario");
    tcase_add_checked_fixture(tc, dir_setup, dir_teardown);
    tcase_add_test(tc, full_scenario_reads_every_field);
    tcase_add_test(tc, minimal_scenario_takes_the_defaults);
    tcase_add_loop_test(tc, bad_scenario_is_rejected_naming_file_and_field, 0,
                        (int)(sizeof(bad_scenarios) / sizeof(bad_scenarios[0])));
    tcase_add_test(tc, tenants_draw_from_different_streams_that_repeat_across_loads);
    tcase_add_test(tc, reseed_equals_loading_with_that_seed);
    tcase_add_test(tc, only_keeps_the_named_tenants_and_their_streams);
    tcase_add_test(tc, scale_rate_speeds_up_open_arrivals_only);
    suite_add_tcase(s, tc);

    tc = tcase_create("random");
    tcase_add_test(tc, fixed_draw_is_its_value_and_never_below_one);
    tcase_add_test(tc, uniform_draws_cover_the_range_and_stay_in_it);
    tcase_add_test(tc, clip_bounds_hold_and_are_reached);
    tcase_add_test(tc, same_seed_same_draws_other_seed_other_draws);
    tcase_add_test(tc, draw_means_match_the_distributions);
    suite_add_tcase(s, tc);

    tc = tcase_create("body");
    tcase_add_checked_fixture(tc, dir_setup, dir_teardown);
    tcase_add_test(tc, completion_body_is_prefix_then_drawn_ids);
    tcase_add_test(tc, streaming_body_carries_the_options_that_are_set);
    tcase_add_test(tc, chat_body_has_system_then_user_of_drawn_words);
    tcase_add_test(tc, prompts_file_lines_are_sent_as_text);
    tcase_add_test(tc, disconnects_are_drawn_within_their_bounds);
    suite_add_tcase(s, tc);

    tc = tcase_create("report");
    tcase_add_checked_fixture(tc, dir_setup, dir_teardown);
    tcase_add_test(tc, report_counts_outcomes_and_keys_errors);
    tcase_add_test(tc, report_percentiles_are_nearest_rank_after_warmup);
    tcase_add_test(tc, goodput_counts_ok_requests_meeting_the_slo);
    tcase_add_test(tc, window_tokens_count_arrivals_inside_the_window);
    tcase_add_test(tc, series_buckets_add_up_to_the_totals);
    tcase_add_test(tc, table_shows_tenants_overall_and_errors);
    tcase_add_test(tc, plot_writes_an_svg_with_escaped_tenant_names);
    tcase_add_test(tc, plot_breaks_lines_at_null_points);
    tcase_add_test(tc, plot_errors_are_reported);
    tcase_add_test(tc, record_itl_grows_and_free_resets);
    suite_add_tcase(s, tc);
    return s;
}
