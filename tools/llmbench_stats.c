/*
 * tools/llmbench_stats.c — llmbench's records turned into the JSON report
 * (per tenant and overall: outcomes, errors, latency percentiles,
 * throughput, goodput, and a time series), and the report as a table.
 *
 * The one idea: throughput counts tokens when they arrived, not when their
 * request ended.  Each streamed chunk's arrival is rebuilt from t_first plus
 * the running sum of the inter-token gaps, so tokens/s in the measurement
 * window and in each series bucket are exact, even for long requests that
 * straddle the window's edges.
 */
#include "tools/llmbench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Buckets of the time series: at most about this many, 1 s at least. */
#define LB_MAX_BUCKETS 120

/* ============================================================ percentiles */

/* A growable list of values in ms. */
struct lb_vals {
    double *v;
    long n, cap;
};

static int lb_vals_add(struct lb_vals *s, double x)
{
    if (s->n == s->cap) {
        long nc = s->cap ? s->cap * 2 : 64;
        double *nv = realloc(s->v, sizeof(double) * (size_t)nc);
        if (!nv)
            return -1;
        s->v = nv;
        s->cap = nc;
    }
    s->v[s->n++] = x;
    return 0;
}

static int lb_cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Nearest-rank percentile of sorted values: the smallest value with at
 * least p of them at or below it.  Always one of the observed values, so a
 * test can predict it exactly. */
static double lb_pct(const double *v, long n, double p)
{
    long k = (long)ceil(p * (double)n - 1e-9) - 1;
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

/* {"n", "mean", "p50", "p90", "p99", "max"}; null figures when empty. */
static json_t *lb_summary(struct lb_vals *s)
{
    if (s->n == 0)
        return json_pack("{s:i, s:n, s:n, s:n, s:n, s:n}", "n", 0, "mean", "p50", "p90", "p99",
                         "max");
    qsort(s->v, (size_t)s->n, sizeof(double), lb_cmp_double);
    double sum = 0;
    for (long i = 0; i < s->n; i++)
        sum += s->v[i];
    return json_pack("{s:I, s:f, s:f, s:f, s:f, s:f}", "n", (json_int_t)s->n, "mean",
                     sum / (double)s->n, "p50", lb_pct(s->v, s->n, 0.50), "p90",
                     lb_pct(s->v, s->n, 0.90), "p99", lb_pct(s->v, s->n, 0.99), "max",
                     s->v[s->n - 1]);
}

/* ========================================================== token times */

/* Calls fn(t, tokens, arg) for each arrival of output tokens of rec:
 * streamed chunks at t_first + the running sum of the gaps (each carrying
 * out_tokens / chunks tokens, as usage may count more tokens than chunks),
 * or everything at t_end when nothing was streamed. */
static void lb_token_times(const struct lb_record *rec, void (*fn)(double, double, void *),
                           void *arg)
{
    if (rec->out_tokens <= 0)
        return;
    if (rec->chunks <= 0 || rec->t_first < 0) {
        if (rec->t_end >= 0)
            fn(rec->t_end, rec->out_tokens, arg);
        return;
    }
    double per = (double)rec->out_tokens / rec->chunks, t = rec->t_first;
    for (int k = 0; k < rec->chunks; k++) {
        if (k > 0 && k - 1 < rec->n_itl)
            t += rec->itl_ms[k - 1] / 1000.0;
        else if (k > 0 && rec->t_end >= 0)
            t = rec->t_end; /* gaps missing: the rest came by the end */
        fn(t, per, arg);
    }
}

struct lb_span {
    double lo, hi, sum;
};

static void lb_span_add(double t, double tokens, void *arg)
{
    struct lb_span *s = arg;
    if (t >= s->lo && t <= s->hi)
        s->sum += tokens;
}

/* ================================================================= stats */

/* Everything one STATS object is made of, gathered in one pass. */
struct lb_acc {
    long sent, counts[LB_N_OUTCOMES], prompt_tokens, output_tokens, measured_ok, met;
    double window_tokens;
    struct lb_vals ttft, tpot, itl, e2e;
    json_t *errors;
};

static double lb_ms(double a, double b)
{
    return (b - a) * 1000.0;
}

/* When the request went out (the arrival if it never did). */
static double lb_t_send(const struct lb_record *r)
{
    return r->t_send >= 0 ? r->t_send : r->t_arrive;
}

/* TTFT of r in ms, or < 0 when it has none.  A non-streamed answer's first
 * token came with the whole body. */
static double lb_ttft(const struct lb_record *r)
{
    if (r->t_first >= 0)
        return lb_ms(lb_t_send(r), r->t_first);
    if (r->outcome == LB_OK && !r->stream && r->t_end >= 0)
        return lb_ms(lb_t_send(r), r->t_end);
    return -1;
}

/* 1 when an ok request meets every SLO of its tenant. */
static int lb_slo_met(const struct lb_slo *slo, const struct lb_record *r)
{
    double ttft = lb_ttft(r), e2e = lb_ms(lb_t_send(r), r->t_end);
    if (slo->ttft_ms > 0 && ttft > slo->ttft_ms)
        return 0;
    if (slo->e2e_ms > 0 && e2e > slo->e2e_ms)
        return 0;
    if (slo->tpot_ms > 0 && r->stream && r->out_tokens > 1 && r->t_first >= 0 &&
        (e2e - ttft) / (r->out_tokens - 1) > slo->tpot_ms)
        return 0;
    return 1;
}

/* The "errors" key of r, or NULL when it is not an error. */
static const char *lb_error_key(const struct lb_record *r, char *buf, size_t n)
{
    const char *why = r->err[0] ? r->err : "unknown";
    switch (r->outcome) {
    case LB_REFUSED:
    case LB_FAILED:
        snprintf(buf, n, "%d %.60s", r->http_status, why);
        return buf;
    case LB_LOST:
        snprintf(buf, n, "lost %.60s", why);
        return buf;
    case LB_CUT:
        return "cut";
    default:
        return NULL;
    }
}

static void lb_count_error(json_t *errors, const char *key)
{
    json_t *v = json_object_get(errors, key);
    json_object_set_new(errors, key, json_integer(v ? json_integer_value(v) + 1 : 1));
}

/* The latencies of r (arrived after warmup) into a. */
static int lb_acc_latency(struct lb_acc *a, const struct lb_slo *slo, const struct lb_record *r)
{
    int rc = 0;
    double ttft = lb_ttft(r);
    if (ttft >= 0 &&
        (r->outcome == LB_OK || r->outcome == LB_FAILED || r->outcome == LB_DISCONNECTED))
        rc |= lb_vals_add(&a->ttft, ttft);
    if (r->outcome != LB_OK)
        return rc;
    double e2e = lb_ms(lb_t_send(r), r->t_end);
    rc |= lb_vals_add(&a->e2e, e2e);
    /* TPOT needs the first token's own time: a body that came whole has
     * none (its TTFT is its e2e). */
    if (r->stream && r->out_tokens > 1 && r->t_first >= 0)
        rc |= lb_vals_add(&a->tpot, (e2e - ttft) / (r->out_tokens - 1));
    for (int k = 0; k < r->n_itl; k++)
        rc |= lb_vals_add(&a->itl, r->itl_ms[k]);
    a->measured_ok++;
    a->met += lb_slo_met(slo, r);
    return rc;
}

static int lb_acc_add(struct lb_acc *a, const struct lb_scenario *sc, const struct lb_record *r,
                      struct lb_span *win)
{
    char buf[96];
    const char *ek = lb_error_key(r, buf, sizeof(buf));
    a->sent++;
    if ((int)r->outcome >= 0 && r->outcome < LB_N_OUTCOMES)
        a->counts[r->outcome]++;
    if (ek)
        lb_count_error(a->errors, ek);
    a->prompt_tokens += r->prompt_tokens;
    a->output_tokens += r->out_tokens;
    win->sum = 0;
    lb_token_times(r, lb_span_add, win);
    a->window_tokens += win->sum;
    if (r->t_arrive < sc->warmup_s)
        return 0;
    return lb_acc_latency(a, &sc->tenants[r->tenant].slo, r);
}

static void lb_acc_free(struct lb_acc *a)
{
    free(a->ttft.v);
    free(a->tpot.v);
    free(a->itl.v);
    free(a->e2e.v);
    json_decref(a->errors);
}

static json_t *lb_acc_json(struct lb_acc *a, double window_s)
{
    double w = window_s > 0 ? window_s : 0;
    json_t *j = json_pack(
        "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:O, s:I, s:I, s:I, s:f, s:f, s:f, s:f}", "sent",
        (json_int_t)a->sent, "ok", (json_int_t)a->counts[LB_OK], "disconnected",
        (json_int_t)a->counts[LB_DISCONNECTED], "refused", (json_int_t)a->counts[LB_REFUSED],
        "failed", (json_int_t)a->counts[LB_FAILED], "lost", (json_int_t)a->counts[LB_LOST], "cut",
        (json_int_t)a->counts[LB_CUT], "errors", a->errors, "prompt_tokens",
        (json_int_t)a->prompt_tokens, "output_tokens", (json_int_t)a->output_tokens,
        "window_output_tokens", (json_int_t)llround(a->window_tokens), "req_per_s",
        w > 0 ? (double)a->measured_ok / w : 0.0, "out_tok_per_s",
        w > 0 ? a->window_tokens / w : 0.0, "goodput_req_per_s", w > 0 ? (double)a->met / w : 0.0,
        "slo_met_fraction", a->measured_ok ? (double)a->met / (double)a->measured_ok : 0.0);
    if (!j)
        return NULL;
    json_object_set_new(j, "ttft_ms", lb_summary(&a->ttft));
    json_object_set_new(j, "tpot_ms", lb_summary(&a->tpot));
    json_object_set_new(j, "itl_ms", lb_summary(&a->itl));
    json_object_set_new(j, "e2e_ms", lb_summary(&a->e2e));
    return j;
}

/* STATS of the records of tenant ti (-1: every tenant). */
static json_t *lb_stats(const struct lb_scenario *sc, const struct lb_record *recs, long n, int ti,
                        double window_s)
{
    struct lb_acc a = {.errors = json_object()};
    struct lb_span win = {.lo = sc->warmup_s, .hi = sc->warmup_s + window_s};
    int rc = a.errors ? 0 : -1;
    for (long i = 0; rc == 0 && i < n; i++)
        if ((ti < 0 || recs[i].tenant == ti) && recs[i].tenant >= 0 &&
            recs[i].tenant < sc->n_tenants)
            rc = lb_acc_add(&a, sc, &recs[i], &win);
    json_t *j = rc == 0 ? lb_acc_json(&a, window_s) : NULL;
    lb_acc_free(&a);
    return j;
}

/* ================================================================ series */

/* One tenant's buckets while they are being filled. */
struct lb_buckets {
    int n;
    double width;
    double *tokens;
    long *ok;
    struct lb_vals *ttft; /* [n] */
};

static int lb_bucket_of(const struct lb_buckets *b, double t)
{
    if (t < 0)
        return -1;
    int k = (int)(t / b->width);
    if (k < b->n)
        return k;
    /* the run's last instant belongs to the last bucket; anything later
     * is past the run and left out */
    return t <= b->n * b->width + 1e-9 ? b->n - 1 : -1;
}

static void lb_bucket_tokens(double t, double tokens, void *arg)
{
    struct lb_buckets *b = arg;
    int k = lb_bucket_of(b, t);
    if (k >= 0)
        b->tokens[k] += tokens;
}

static void lb_buckets_free(struct lb_buckets *b)
{
    for (int k = 0; b->ttft && k < b->n; k++)
        free(b->ttft[k].v);
    free(b->ttft);
    free(b->tokens);
    free(b->ok);
}

static int lb_buckets_fill(struct lb_buckets *b, const struct lb_record *recs, long n, int ti)
{
    b->tokens = calloc((size_t)b->n, sizeof(double));
    b->ok = calloc((size_t)b->n, sizeof(long));
    b->ttft = calloc((size_t)b->n, sizeof(struct lb_vals));
    if (!b->tokens || !b->ok || !b->ttft)
        return -1;
    for (long i = 0; i < n; i++) {
        const struct lb_record *r = &recs[i];
        if (r->tenant != ti)
            continue;
        lb_token_times(r, lb_bucket_tokens, b);
        int k = lb_bucket_of(b, r->t_end);
        if (r->outcome == LB_OK && k >= 0)
            b->ok[k]++;
        double ttft = lb_ttft(r);
        k = lb_bucket_of(b, r->t_first >= 0 ? r->t_first : r->t_end);
        if (ttft >= 0 && k >= 0 &&
            (r->outcome == LB_OK || r->outcome == LB_FAILED || r->outcome == LB_DISCONNECTED) &&
            lb_vals_add(&b->ttft[k], ttft))
            return -1;
    }
    return 0;
}

/* Requests sent and not yet ended at time t. */
static long lb_inflight(const struct lb_record *recs, long n, int ti, double t)
{
    long c = 0;
    for (long i = 0; i < n; i++)
        if (recs[i].tenant == ti && recs[i].t_send >= 0 && recs[i].t_send <= t &&
            (recs[i].t_end < 0 || recs[i].t_end > t))
            c++;
    return c;
}

static json_t *lb_pct_or_null(struct lb_vals *v, double p)
{
    if (v->n == 0)
        return json_null();
    qsort(v->v, (size_t)v->n, sizeof(double), lb_cmp_double);
    return json_real(lb_pct(v->v, v->n, p));
}

static json_t *lb_tenant_series(const struct lb_record *recs, long n, int ti, int nb, double width)
{
    struct lb_buckets b = {.n = nb, .width = width};
    json_t *j = NULL;
    if (lb_buckets_fill(&b, recs, n, ti) == 0)
        j = json_pack("{s:[], s:[], s:[], s:[], s:[]}", "tok_s", "req_s", "ttft_p50_ms",
                      "ttft_p99_ms", "inflight");
    for (int k = 0; j && k < nb; k++) {
        json_array_append_new(json_object_get(j, "tok_s"), json_real(b.tokens[k] / width));
        json_array_append_new(json_object_get(j, "req_s"), json_real((double)b.ok[k] / width));
        json_array_append_new(json_object_get(j, "ttft_p50_ms"), lb_pct_or_null(&b.ttft[k], 0.5));
        json_array_append_new(json_object_get(j, "ttft_p99_ms"), lb_pct_or_null(&b.ttft[k], 0.99));
        json_array_append_new(json_object_get(j, "inflight"),
                              json_integer(lb_inflight(recs, n, ti, k * width)));
    }
    lb_buckets_free(&b);
    return j;
}

static json_t *lb_series(const struct lb_scenario *sc, const struct lb_record *recs, long n,
                         double wall_s)
{
    double span = wall_s > 0 ? wall_s : 1;
    /* Whole seconds, wide enough for at most LB_MAX_BUCKETS buckets. */
    double width = ceil(span / LB_MAX_BUCKETS);
    width = width < 1 ? 1 : width;
    int nb = (int)ceil(span / width);
    nb = nb < 1 ? 1 : nb;
    json_t *t = json_array(), *tenants = json_object();
    json_t *j = json_pack("{s:f, s:o, s:o}", "bucket_s", width, "t", t, "tenants", tenants);
    for (int k = 0; j && k < nb; k++)
        json_array_append_new(t, json_real(k * width));
    for (int i = 0; j && i < sc->n_tenants; i++) {
        json_t *ts = lb_tenant_series(recs, n, i, nb, width);
        if (!ts) {
            json_decref(j);
            return NULL;
        }
        json_object_set_new(tenants, sc->tenants[i].name, ts);
    }
    return j;
}

/* ================================================================ report */

static json_t *lb_actions(const struct lb_scenario *sc)
{
    json_t *a = json_array();
    for (int i = 0; a && i < sc->n_actions; i++)
        json_array_append_new(a, json_pack("{s:f, s:s, s:i}", "at_s", sc->actions[i].at_s, "run",
                                           sc->actions[i].run, "exit", sc->actions[i].exit));
    return a;
}

json_t *lb_report(const struct lb_scenario *sc, const char *target, const struct lb_record *recs,
                  long n, double wall_s, double window_s)
{
    json_t *tenants = json_object();
    json_t *j =
        json_pack("{s:s, s:s, s:s, s:s, s:I, s:f, s:f, s:o, s:o, s:o, s:o}", "tool", "llmbench",
                  "scenario", sc->name ? sc->name : "", "target", target ? target : "", "api",
                  sc->chat ? "chat" : "completions", "seed", (json_int_t)sc->seed, "wall_s", wall_s,
                  "window_s", window_s, "overall", lb_stats(sc, recs, n, -1, window_s), "tenants",
                  tenants, "series", lb_series(sc, recs, n, wall_s), "actions", lb_actions(sc));
    for (int i = 0; j && i < sc->n_tenants; i++) {
        json_t *s = lb_stats(sc, recs, n, i, window_s);
        if (!s) {
            json_decref(j);
            return NULL;
        }
        json_object_set_new(tenants, sc->tenants[i].name, s);
    }
    return j;
}

/* ================================================================= table */

static double lb_get(const json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

/* A latency for the table: whole ms, one decimal below 10 ms. */
static void lb_fmt_ms(char *buf, size_t n, const json_t *s, const char *key)
{
    double ms = lb_get(s, key);
    snprintf(buf, n, ms < 10 ? "%.1f" : "%.0f", ms);
}

/* "p50/p90/p99/max" of a latency summary, "-" when empty. */
static void lb_fmt_lat(char *buf, size_t n, const json_t *s)
{
    char v[4][32];
    if (json_integer_value(json_object_get(s, "n")) == 0) {
        snprintf(buf, n, "-");
        return;
    }
    lb_fmt_ms(v[0], sizeof(v[0]), s, "p50");
    lb_fmt_ms(v[1], sizeof(v[1]), s, "p90");
    lb_fmt_ms(v[2], sizeof(v[2]), s, "p99");
    lb_fmt_ms(v[3], sizeof(v[3]), s, "max");
    snprintf(buf, n, "%s/%s/%s/%s", v[0], v[1], v[2], v[3]);
}

static void lb_print_row(FILE *f, const char *name, const json_t *s)
{
    static const char *const lat[] = {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"};
    fprintf(f, "%-14.14s %6lld %6lld %5lld %7lld %6lld %5lld %5lld %7.2f %8.1f %7.2f", name,
            (long long)lb_get(s, "sent"), (long long)lb_get(s, "ok"),
            (long long)lb_get(s, "disconnected"), (long long)lb_get(s, "refused"),
            (long long)lb_get(s, "failed"), (long long)lb_get(s, "lost"),
            (long long)lb_get(s, "cut"), lb_get(s, "req_per_s"), lb_get(s, "out_tok_per_s"),
            lb_get(s, "goodput_req_per_s"));
    for (int i = 0; i < 4; i++) {
        char buf[160];
        lb_fmt_lat(buf, sizeof(buf), json_object_get(s, lat[i]));
        fprintf(f, " %22s", buf);
    }
    fputc('\n', f);
}

static void lb_print_errors(FILE *f, const char *name, const json_t *s)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)json_object_get(s, "errors"), key, v)
    {
        fprintf(f, "  %-14.14s %-40s %8lld\n", name, key, (long long)json_integer_value(v));
    }
}

void lb_report_print(FILE *f, const json_t *report)
{
    const json_t *tenants = json_object_get(report, "tenants");
    const char *name;
    json_t *s;
    fprintf(f, "scenario %s  target %s  wall %.1f s  window %.1f s\n",
            json_string_value(json_object_get(report, "scenario")),
            json_string_value(json_object_get(report, "target")), lb_get(report, "wall_s"),
            lb_get(report, "window_s"));
    fprintf(f, "%-14s %6s %6s %5s %7s %6s %5s %5s %7s %8s %7s %22s %22s %22s %22s\n", "tenant",
            "sent", "ok", "disc", "refused", "failed", "lost", "cut", "req/s", "tok/s", "goodput",
            "TTFT p50/p90/p99/max", "TPOT p50/p90/p99/max", "ITL p50/p90/p99/max",
            "e2e p50/p90/p99/max");
    json_object_foreach((json_t *)tenants, name, s)
    {
        lb_print_row(f, name, s);
    }
    lb_print_row(f, "overall", json_object_get(report, "overall"));
    fprintf(f, "latencies in ms; req/s, tok/s and goodput over the window\n");
    int any = 0;
    json_object_foreach((json_t *)tenants, name, s)
    {
        any |= json_object_size(json_object_get(s, "errors")) > 0;
    }
    if (!any)
        return;
    fprintf(f, "errors:\n");
    json_object_foreach((json_t *)tenants, name, s)
    {
        lb_print_errors(f, name, s);
    }
}
