/*
 * admin/adm_ledger.c — `llmadmin usage`: what the tenants used, from the
 * usage ledger the daemon writes (one row per completion request).
 *
 * Without --rows it prints totals per tenant; with --rows N the N newest
 * ledger rows themselves.  --since limits both to requests that ended at
 * or after a date, or within the last days or hours.
 */
#include "admin/adm.h"
#include "db/db.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static json_t *adm_sum_json(const struct db_usage_sum *s)
{
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:f, s:f}", "tenant", s->tenant, "requests",
                     (json_int_t)s->requests, "errors", (json_int_t)s->errors, "prompt_tokens",
                     (json_int_t)s->prompt_tokens, "cached_tokens", (json_int_t)s->cached_tokens,
                     "completion_tokens", (json_int_t)s->completion_tokens, "mean_ttft_ms",
                     s->mean_ttft_ms, "mean_total_ms", s->mean_total_ms);
}

static json_t *adm_row_json(const struct db_usage *u)
{
    char t[32];
    return json_pack("{s:s, s:I, s:s, s:I, s:s, s:i, s:i, s:i, s:f, s:f, s:f, s:i, s:s, s:i}",
                     "time", adm_fmt_time(u->ts_ms / 1000, 0, t, sizeof(t)), "ts_ms",
                     (json_int_t)u->ts_ms, "tenant", u->tenant, "key_id", (json_int_t)u->key_id,
                     "request_id", u->request_id, "prompt_tokens", u->prompt_tokens,
                     "cached_tokens", u->cached_tokens, "completion_tokens", u->completion_tokens,
                     "queue_ms", u->queue_ms, "ttft_ms", u->ttft_ms, "total_ms", u->total_ms,
                     "preemptions", u->preemptions, "finish", u->finish, "status", u->status);
}

static int adm_sum_print(const struct db_usage_sum *s, int n)
{
    struct adm_table *tb = adm_table_new("lrrrrrrr", "TENANT", "REQUESTS", "ERRORS", "PROMPT",
                                         "CACHED", "COMPLETION", "MEAN-TTFT-MS", "MEAN-TOTAL-MS");
    for (int i = 0; i < n; i++) {
        char rq[24], er[24], pt[24], ct[24], co[24], tt[32], to[32];
        snprintf(rq, sizeof(rq), "%ld", s[i].requests);
        snprintf(er, sizeof(er), "%ld", s[i].errors);
        snprintf(pt, sizeof(pt), "%ld", s[i].prompt_tokens);
        snprintf(ct, sizeof(ct), "%ld", s[i].cached_tokens);
        snprintf(co, sizeof(co), "%ld", s[i].completion_tokens);
        snprintf(tt, sizeof(tt), "%.1f", s[i].mean_ttft_ms);
        snprintf(to, sizeof(to), "%.1f", s[i].mean_total_ms);
        adm_table_add(tb, s[i].tenant, rq, er, pt, ct, co, tt, to);
    }
    return adm_table_print(tb, stdout);
}

static void adm_row_add(struct adm_table *tb, const struct db_usage *u)
{
    char t[32], key[24], pt[16], ct[16], co[16], q[32], tt[32], to[32], pre[16], st[16];
    snprintf(key, sizeof(key), "%lld", (long long)u->key_id);
    snprintf(pt, sizeof(pt), "%d", u->prompt_tokens);
    snprintf(ct, sizeof(ct), "%d", u->cached_tokens);
    snprintf(co, sizeof(co), "%d", u->completion_tokens);
    snprintf(q, sizeof(q), "%.1f", u->queue_ms);
    snprintf(tt, sizeof(tt), "%.1f", u->ttft_ms);
    snprintf(to, sizeof(to), "%.1f", u->total_ms);
    snprintf(pre, sizeof(pre), "%d", u->preemptions);
    snprintf(st, sizeof(st), "%d", u->status);
    adm_table_add(tb, adm_fmt_time(u->ts_ms / 1000, 0, t, sizeof(t)), u->tenant, key, u->request_id,
                  pt, ct, co, q, tt, to, pre, u->finish, st);
}

static int adm_rows_print(const struct db_usage *u, int n)
{
    struct adm_table *tb = adm_table_new("llrlrrrrrrrlr", "TIME", "TENANT", "KEY", "REQUEST",
                                         "PROMPT", "CACHED", "COMPLETION", "QUEUE-MS", "TTFT-MS",
                                         "TOTAL-MS", "PREEMPTIONS", "FINISH", "STATUS");
    for (int i = 0; i < n; i++)
        adm_row_add(tb, &u[i]);
    return adm_table_print(tb, stdout);
}

/* Builds a JSON array of n items of size elem with fn. */
static json_t *adm_json_array(const void *items, int n, size_t elem, json_t *(*fn)(const void *))
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        if (json_array_append_new(a, fn((const char *)items + (size_t)i * elem)) != 0) {
            json_decref(a);
            a = NULL;
        }
    return a;
}

static json_t *adm_sum_json_v(const void *p)
{
    return adm_sum_json(p);
}
static json_t *adm_row_json_v(const void *p)
{
    return adm_row_json(p);
}

static int adm_usage_rows(const struct adm_ctx *c, struct db *d, const char *tenant,
                          int64_t since_ms, long rows)
{
    struct db_usage *u = NULL;
    int n = 0;
    char err[512];
    if (db_usage_list(d, tenant, since_ms, (int)rows, &u, &n, err, sizeof(err)) != 0)
        return adm_fail("%s", err);
    int rc = c->json ? adm_print_json(adm_json_array(u, n, sizeof(*u), adm_row_json_v))
                     : adm_rows_print(u, n);
    free(u);
    return rc;
}

static int adm_usage_sums(const struct adm_ctx *c, struct db *d, const char *tenant,
                          int64_t since_ms)
{
    struct db_usage_sum *s = NULL;
    int n = 0;
    char err[512];
    if (db_usage_summary(d, tenant, since_ms, &s, &n, err, sizeof(err)) != 0)
        return adm_fail("%s", err);
    int rc = c->json ? adm_print_json(adm_json_array(s, n, sizeof(*s), adm_sum_json_v))
                     : adm_sum_print(s, n);
    free(s);
    return rc;
}

int adm_cmd_usage(struct adm_ctx *c, int argc, char **argv)
{
    c->usage = "usage [--tenant NAME] [--since YYYY-MM-DD|-Nd|-Nh] [--rows N]";
    struct adm_opt opts[] = {{"tenant", 1, NULL, 0}, {"since", 1, NULL, 0}, {"rows", 1, NULL, 0}};
    const char *pos[1];
    int n_pos;
    if (adm_parse(c, argc - 1, argv + 1, opts, 3, pos, 0, 0, &n_pos) != ADM_OK)
        return ADM_USAGE;
    int64_t since = 0;
    long rows = 0;
    if (opts[1].set && adm_time(opts[1].val, -1, (int64_t)time(NULL), &since) != 0)
        return adm_usage(c, "--since: expected YYYY-MM-DD, -Nd or -Nh, got '%s'", opts[1].val);
    if (opts[2].set && adm_int(opts[2].val, 0, 100000000, &rows) != 0)
        return adm_usage(c, "--rows: expected a whole number >= 0, got '%s'", opts[2].val);
    struct db *d;
    char err[512];
    if (db_open(c->db_path, 0, &d, err, sizeof(err)) != 0)
        return adm_fail("%s", err);
    const char *tenant = opts[0].set ? opts[0].val : NULL;
    int rc = opts[2].set ? adm_usage_rows(c, d, tenant, since * 1000, rows)
                         : adm_usage_sums(c, d, tenant, since * 1000);
    db_close(d);
    return rc;
}
