/*
 * daemon/metrics.c — counters, histograms and the /metrics exposition.
 *
 * What only the daemon sees (requests, tokens, latencies, steps,
 * connections) is accumulated here behind one mutex; what the engine
 * already counts (queues, KV blocks, preemptions, swap traffic, prefix
 * cache) is read from its snapshot at render time, so nothing is counted
 * twice.  Rendering follows the Prometheus text format 0.0.4: a HELP and a
 * TYPE line per family, label values escaped, histogram buckets cumulative
 * and ending in le="+Inf".
 */
#include "daemon/metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MX_PROMPT, MX_CACHED, MX_COMPLETION, MX_KINDS };
static const char *const kind_names[MX_KINDS] = {"prompt", "cached", "completion"};

/* Requests answered with one HTTP status. */
struct mx_status {
    int status;
    long n;
};

/* One tenant's counters ("" for requests that never reached a tenant). */
struct mx_tenant {
    char *name;
    struct mx_status *st; /* in order of first appearance */
    int n_st, cap_st;
    long tokens[MX_KINDS];
};

#define MX_MAX_LE 16

/* A histogram: per-bucket counts (not cumulative) for bounds le[], plus one
 * for +Inf. */
struct mx_hist {
    const char *name, *help;
    const double *le;
    int n_le;
    long counts[MX_MAX_LE + 1];
    double sum;
    long count;
};

enum { H_TTFT, H_TPOT, H_E2E, H_QUEUE, H_STEP, H_N };

/* Bucket ladders in seconds: from what a fast GPU does to what a
 * backlogged CPU box does, roughly 2-2.5x apart. */
static const double le_ttft[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1,
                                 2.5,  5,     7.5,  10,  20,   40,  80};
static const double le_tpot[] = {0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15,
                                 0.2,   0.3,  0.4,   0.5,  0.75,  1,   2.5};
static const double le_e2e[] = {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 60, 120, 300, 600};
static const double le_queue[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1,
                                  2.5,   5,     10,   30,   60,  120, 300};
static const double le_step[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};

#define LADDER(a) a, (int)(sizeof(a) / sizeof(a[0]))
#define FITS(a)   _Static_assert(sizeof(a) / sizeof(a[0]) <= MX_MAX_LE, #a " has too many buckets")
FITS(le_ttft);
FITS(le_tpot);
FITS(le_e2e);
FITS(le_queue);
FITS(le_step);

struct metrics {
    pthread_mutex_t mu;
    struct mx_tenant *tenants; /* sorted by name */
    int n_tenants, cap_tenants;
    struct mx_hist hist[H_N];
    long step_tokens;
    int conn_open;
    long conn_refused;
};

struct metrics *metrics_new(void)
{
    struct metrics *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    pthread_mutex_init(&m->mu, NULL);
    static const struct {
        const char *name, *help;
        const double *le;
        int n_le;
    } spec[H_N] = {
        {"llmd_time_to_first_token_seconds", "Seconds from arrival to the first generated token.",
         LADDER(le_ttft)},
        {"llmd_time_per_output_token_seconds",
         "Mean seconds between generated tokens of a request.", LADDER(le_tpot)},
        {"llmd_e2e_request_latency_seconds", "Seconds from arrival to the end of the response.",
         LADDER(le_e2e)},
        {"llmd_queue_time_seconds", "Seconds a request waited before its first step.",
         LADDER(le_queue)},
        {"llmd_step_duration_seconds", "Wall time of one engine step.", LADDER(le_step)},
    };
    for (int h = 0; h < H_N; h++) {
        m->hist[h].name = spec[h].name;
        m->hist[h].help = spec[h].help;
        m->hist[h].le = spec[h].le;
        m->hist[h].n_le = spec[h].n_le;
    }
    return m;
}

void metrics_free(struct metrics *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_tenants; i++) {
        free(m->tenants[i].name);
        free(m->tenants[i].st);
    }
    free(m->tenants);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

/* ------------------------------------------------------------ updates -- */

/* The tenant's counters, created in name order; NULL when memory is short
 * (the observation is then dropped: metrics never fail a request). */
static struct mx_tenant *tenant_get(struct metrics *m, const char *name)
{
    if (!name)
        name = "";
    int i = 0;
    for (; i < m->n_tenants; i++) {
        int c = strcmp(m->tenants[i].name, name);
        if (c == 0)
            return &m->tenants[i];
        if (c > 0)
            break;
    }
    if (m->n_tenants == m->cap_tenants) {
        int cap = m->cap_tenants ? 2 * m->cap_tenants : 8;
        struct mx_tenant *t = realloc(m->tenants, (size_t)cap * sizeof(*t));
        if (!t)
            return NULL;
        m->tenants = t;
        m->cap_tenants = cap;
    }
    char *copy = strdup(name);
    if (!copy)
        return NULL;
    memmove(&m->tenants[i + 1], &m->tenants[i], (size_t)(m->n_tenants - i) * sizeof(*m->tenants));
    m->tenants[i] = (struct mx_tenant){.name = copy};
    m->n_tenants++;
    return &m->tenants[i];
}

static void status_add(struct mx_tenant *t, int status)
{
    for (int i = 0; i < t->n_st; i++)
        if (t->st[i].status == status) {
            t->st[i].n++;
            return;
        }
    if (t->n_st == t->cap_st) {
        int cap = t->cap_st ? 2 * t->cap_st : 4;
        struct mx_status *s = realloc(t->st, (size_t)cap * sizeof(*s));
        if (!s)
            return;
        t->st = s;
        t->cap_st = cap;
    }
    t->st[t->n_st++] = (struct mx_status){status, 1};
}

void metrics_request(struct metrics *m, const char *tenant, int status)
{
    pthread_mutex_lock(&m->mu);
    struct mx_tenant *t = tenant_get(m, tenant);
    if (t)
        status_add(t, status);
    pthread_mutex_unlock(&m->mu);
}

void metrics_tokens(struct metrics *m, const char *tenant, const char *kind, long n)
{
    int k = 0;
    while (k < MX_KINDS && strcmp(kind_names[k], kind) != 0)
        k++;
    if (k == MX_KINDS || n < 0)
        return;
    pthread_mutex_lock(&m->mu);
    struct mx_tenant *t = tenant_get(m, tenant);
    if (t)
        t->tokens[k] += n;
    pthread_mutex_unlock(&m->mu);
}

/* Caller holds the lock. */
static void hist_observe(struct mx_hist *h, double v)
{
    if (!(v >= 0) || !isfinite(v))
        return; /* negative: not observed; NaN never */
    int b = 0;
    while (b < h->n_le && v > h->le[b])
        b++;
    h->counts[b]++;
    h->sum += v;
    h->count++;
}

void metrics_latency(struct metrics *m, double ttft, double tpot, double e2e, double queue)
{
    pthread_mutex_lock(&m->mu);
    hist_observe(&m->hist[H_TTFT], ttft);
    hist_observe(&m->hist[H_TPOT], tpot);
    hist_observe(&m->hist[H_E2E], e2e);
    hist_observe(&m->hist[H_QUEUE], queue);
    pthread_mutex_unlock(&m->mu);
}

void metrics_step(struct metrics *m, double seconds, int n_tokens)
{
    pthread_mutex_lock(&m->mu);
    hist_observe(&m->hist[H_STEP], seconds);
    if (n_tokens > 0)
        m->step_tokens += n_tokens;
    pthread_mutex_unlock(&m->mu);
}

void metrics_connections(struct metrics *m, int open, long refused)
{
    pthread_mutex_lock(&m->mu);
    m->conn_open = open;
    m->conn_refused = refused;
    pthread_mutex_unlock(&m->mu);
}

/* ---------------------------------------------------------- rendering -- */

/* A sample value: the shortest of %.15g and %.17g that reads back exactly. */
static void put_double(FILE *f, double v)
{
    char buf[40];
    snprintf(buf, sizeof(buf), "%.15g", v);
    if (strtod(buf, NULL) != v)
        snprintf(buf, sizeof(buf), "%.17g", v);
    fputs(buf, f);
}

/* A label value with \, " and newline escaped as the text format asks. */
static void put_label(FILE *f, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\')
            fputs("\\\\", f);
        else if (*v == '"')
            fputs("\\\"", f);
        else if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void hist_render(FILE *f, const struct mx_hist *h)
{
    family(f, h->name, "histogram", h->help);
    long cum = 0;
    for (int b = 0; b < h->n_le; b++) {
        cum += h->counts[b];
        fprintf(f, "%s_bucket{le=\"", h->name);
        put_double(f, h->le[b]);
        fprintf(f, "\"} %ld\n", cum);
    }
    cum += h->counts[h->n_le];
    fprintf(f, "%s_bucket{le=\"+Inf\"} %ld\n%s_sum ", h->name, cum, h->name);
    put_double(f, h->sum);
    fprintf(f, "\n%s_count %ld\n", h->name, h->count);
}

/* Everything counted here; caller holds the lock. */
static void render_counters(FILE *f, const struct metrics *m)
{
    family(f, "llmd_requests_total", "counter", "Requests answered, by tenant and HTTP status.");
    for (int i = 0; i < m->n_tenants; i++)
        for (int j = 0; j < m->tenants[i].n_st; j++) {
            fputs("llmd_requests_total{tenant=\"", f);
            put_label(f, m->tenants[i].name);
            fprintf(f, "\",status=\"%d\"} %ld\n", m->tenants[i].st[j].status,
                    m->tenants[i].st[j].n);
        }
    family(f, "llmd_tokens_total", "counter",
           "Tokens of finished requests, by tenant and kind (prompt, cached, completion).");
    for (int i = 0; i < m->n_tenants; i++)
        for (int k = 0; k < MX_KINDS; k++) {
            fputs("llmd_tokens_total{tenant=\"", f);
            put_label(f, m->tenants[i].name);
            fprintf(f, "\",kind=\"%s\"} %ld\n", kind_names[k], m->tenants[i].tokens[k]);
        }
    for (int h = 0; h < H_N; h++)
        hist_render(f, &m->hist[h]);
    family(f, "llmd_step_tokens_total", "counter", "Tokens fed to the model by engine steps.");
    fprintf(f, "llmd_step_tokens_total %ld\n", m->step_tokens);
    family(f, "llmd_connections_open", "gauge", "Client connections open now.");
    fprintf(f, "llmd_connections_open %d\n", m->conn_open);
    family(f, "llmd_connections_refused_total", "counter",
           "Client connections closed at once because max-connections were open.");
    fprintf(f, "llmd_connections_refused_total %ld\n", m->conn_refused);
}

static const char *const rstate_names[] = {"waiting", "running", "swapped", "preempted"};
#define N_LIVE_STATES 4 /* the states above; finished requests are not in a queue */

static void render_queues(FILE *f, const struct eng_snapshot *s)
{
    family(f, "llmd_requests", "gauge", "Requests in the engine, by state.");
    for (int st = 0; st < N_LIVE_STATES; st++)
        fprintf(f, "llmd_requests{state=\"%s\"} %d\n", rstate_names[st], s->by_state[st]);
    family(f, "llmd_requests_running", "gauge", "Requests on the device now.");
    fprintf(f, "llmd_requests_running %d\n", s->by_state[ENG_RS_RUNNING]);
    family(f, "llmd_requests_by_priority", "gauge",
           "Requests in the engine, by priority and state (the last priority counts all above).");
    for (int p = 0; p < ENG_SNAP_PRIOS; p++)
        for (int st = 0; st < N_LIVE_STATES; st++)
            fprintf(f, "llmd_requests_by_priority{priority=\"%d\",state=\"%s\"} %d\n", p,
                    rstate_names[st], s->by_prio[p][st]);
    family(f, "llmd_draining", "gauge", "1 while the daemon admits no new requests.");
    fprintf(f, "llmd_draining %d\n", s->draining ? 1 : 0);
}

static void render_blocks(FILE *f, const struct eng_snapshot *s)
{
    family(f, "llmd_kv_blocks", "gauge", "KV cache blocks by pool and state.");
    fprintf(f,
            "llmd_kv_blocks{pool=\"device\",state=\"free\"} %d\n"
            "llmd_kv_blocks{pool=\"device\",state=\"cached\"} %d\n"
            "llmd_kv_blocks{pool=\"device\",state=\"used\"} %d\n"
            "llmd_kv_blocks{pool=\"host\",state=\"used\"} %d\n",
            s->blocks_free, s->blocks_cached, s->blocks_used, s->host_blocks_used);
    /* A size, so a gauge by nature; "untyped" because its name (fixed by the
     * API contract) ends in _total, which promtool reserves for counters. */
    family(f, "llmd_kv_blocks_total", "untyped", "KV cache blocks in each pool.");
    fprintf(f, "llmd_kv_blocks_total{pool=\"device\"} %d\nllmd_kv_blocks_total{pool=\"host\"} %d\n",
            s->blocks_total, s->host_blocks_total);
    family(f, "llmd_preemptions_total", "counter", "Sequences preempted, by mode.");
    fprintf(f,
            "llmd_preemptions_total{mode=\"swap\"} %ld\n"
            "llmd_preemptions_total{mode=\"recompute\"} %ld\n",
            s->preempt_swap, s->preempt_recompute);
    family(f, "llmd_swap_bytes_total", "counter",
           "KV bytes copied between device and host, by direction.");
    fprintf(f,
            "llmd_swap_bytes_total{direction=\"out\"} %llu\n"
            "llmd_swap_bytes_total{direction=\"in\"} %llu\n",
            (unsigned long long)s->swap_bytes_out, (unsigned long long)s->swap_bytes_in);
    family(f, "llmd_prefix_cache_lookups_total", "counter", "Prefix-cache block lookups.");
    fprintf(f, "llmd_prefix_cache_lookups_total %ld\n", s->prefix_lookups);
    family(f, "llmd_prefix_cache_hits_total", "counter", "Prefix-cache block lookups that hit.");
    fprintf(f, "llmd_prefix_cache_hits_total %ld\n", s->prefix_hits);
    family(f, "llmd_engine_steps_total", "counter", "Engine steps run.");
    fprintf(f, "llmd_engine_steps_total %ld\n", s->step);
    family(f, "llmd_engine_steps_interrupted_total", "counter",
           "Forward passes given up between layers for a more important arrival.");
    fprintf(f, "llmd_engine_steps_interrupted_total %ld\n", s->steps_interrupted);
}

static void tenant_gauge(FILE *f, const struct eng_snapshot *s, const char *name, const char *help,
                         size_t off)
{
    family(f, name, "gauge", help);
    for (int i = 0; i < s->n_tenants; i++) {
        const struct eng_snap_tenant *t = &s->tenants[i];
        fprintf(f, "%s{tenant=\"", name);
        put_label(f, t->name);
        fprintf(f, "\"} %d\n", *(const int *)((const char *)t + off));
    }
}

static void render_tenants(FILE *f, const struct eng_snapshot *s)
{
    tenant_gauge(f, s, "llmd_tenant_running", "Requests of a tenant on the device.",
                 offsetof(struct eng_snap_tenant, running));
    tenant_gauge(f, s, "llmd_tenant_waiting", "Requests of a tenant waiting for the device.",
                 offsetof(struct eng_snap_tenant, waiting));
    tenant_gauge(f, s, "llmd_tenant_swapped", "Requests of a tenant swapped out to host memory.",
                 offsetof(struct eng_snap_tenant, swapped));
    tenant_gauge(f, s, "llmd_tenant_kv_blocks", "Device KV blocks held by a tenant.",
                 offsetof(struct eng_snap_tenant, device_blocks));
}

char *metrics_render(struct metrics *m, const struct eng_snapshot *s, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f)
        return NULL;
    family(f, "llmd_up", "gauge", "1 while the daemon answers.");
    fputs("llmd_up 1\n", f);
    pthread_mutex_lock(&m->mu);
    render_counters(f, m);
    pthread_mutex_unlock(&m->mu);
    if (s) {
        render_queues(f, s);
        render_blocks(f, s);
        render_tenants(f, s);
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    if (len)
        *len = n;
    return buf;
}
