/*
 * daemon/admsock_cmd.c — the admin socket's commands (status, queues,
 * blocks, drain, evict; the protocol is in admsock.h) and the token-rate
 * history that status reports.
 *
 * Each request is answered from one engine snapshot taken for it, so every
 * number in a reply belongs to the same moment.  The engine only keeps
 * running totals of tokens, so rates come from history: once a second the
 * server records the totals (all tokens, and each tenant's) in a ring of
 * samples, and a rate over W seconds is what was added since the newest
 * sample at least W seconds old, over the time since then.
 */
#include "daemon/admsock.h"
#include "daemon/llmd.h"
#include "daemon/log.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef LLMD_VERSION
#define LLMD_VERSION "0.0.0"
#endif

#define RATE_SAMPLES 64 /* once a second: a little over the longest window */
#define RATE_SHORT_S 10.0
#define RATE_LONG_S  60.0

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* -------------------------------------------------------------- rates -- */

struct rate_tenant {
    char name[64];
    long tokens;
};

struct rate_sample {
    double t;
    long tokens; /* prefilled + generated */
    int n;
    struct rate_tenant *tn;
};

struct admsock_rates {
    struct rate_sample ring[RATE_SAMPLES];
    int first, n; /* oldest sample, and how many there are */
};

struct admsock_rates *admsock_rates_new(void)
{
    return calloc(1, sizeof(struct admsock_rates));
}

void admsock_rates_free(struct admsock_rates *r)
{
    if (!r)
        return;
    for (int i = 0; i < RATE_SAMPLES; i++)
        free(r->ring[i].tn);
    free(r);
}

void admsock_rates_sample(struct admsock_rates *r, const struct eng_snapshot *s, double now)
{
    struct rate_tenant *tn = malloc(sizeof(*tn) * (size_t)(s->n_tenants > 0 ? s->n_tenants : 1));
    if (!tn)
        return; /* a missing sample only widens a window */
    for (int i = 0; i < s->n_tenants; i++) {
        snprintf(tn[i].name, sizeof(tn[i].name), "%s", s->tenants[i].name);
        tn[i].tokens = s->tenants[i].tokens_served;
    }
    struct rate_sample *x;
    if (r->n < RATE_SAMPLES) {
        x = &r->ring[(r->first + r->n++) % RATE_SAMPLES];
    } else {
        x = &r->ring[r->first];
        r->first = (r->first + 1) % RATE_SAMPLES;
    }
    free(x->tn);
    *x = (struct rate_sample){
        .t = now, .tokens = s->tokens_prefilled + s->tokens_generated, .n = s->n_tenants, .tn = tn};
}

/* A tenant's count in a sample; 0 before the engine knew it. */
static long sample_tenant(const struct rate_sample *x, const char *name)
{
    for (int i = 0; i < x->n; i++)
        if (strcmp(x->tn[i].name, name) == 0)
            return x->tn[i].tokens;
    return 0;
}

/* The newest sample at least w seconds old, else the oldest; NULL if none. */
static const struct rate_sample *rate_base(const struct admsock_rates *r, double now, double w)
{
    for (int k = r->n - 1; k >= 0; k--) {
        const struct rate_sample *x = &r->ring[(r->first + k) % RATE_SAMPLES];
        if (x->t <= now - w || k == 0)
            return x;
    }
    return NULL;
}

/* Tokens added over the last w seconds (all, or tenant's) and the seconds
 * they span; with no history yet, 0 over 0. */
static long rate_delta(const struct admsock_rates *r, const struct eng_snapshot *s, double now,
                       double w, const struct eng_snap_tenant *tenant, double *span)
{
    const struct rate_sample *b = rate_base(r, now, w);
    *span = b ? now - b->t : 0;
    if (!b)
        return 0;
    long d = tenant ? tenant->tokens_served - sample_tenant(b, tenant->name)
                    : s->tokens_prefilled + s->tokens_generated - b->tokens;
    return d > 0 ? d : 0;
}

static double rate_of(long tokens, double span)
{
    return span >= 0.5 ? tokens / span : 0;
}

/* --------------------------------------------------------- json bits -- */

/* Seconds and rates to the millisecond: the reader wants 12.345, not 12.345000000000001. */
static json_t *jnum(double x)
{
    return json_real(round(x * 1e3) / 1e3);
}

static json_t *jbool(int b)
{
    return b ? json_true() : json_false();
}

static char *reply_line(json_t *o, size_t *len_out)
{
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
    json_decref(o);
    if (!s)
        return NULL;
    size_t n = strlen(s);
    char *line = realloc(s, n + 2);
    if (!line) {
        free(s);
        return NULL;
    }
    line[n] = '\n';
    line[n + 1] = 0;
    *len_out = n + 1;
    return line;
}

char *admsock_error_line(const char *msg, size_t *len_out)
{
    return reply_line(json_pack("{s:b,s:s}", "ok", 0, "error", msg), len_out);
}

static json_t *fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *fail(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return json_pack("{s:b,s:s}", "ok", 0, "error", msg);
}

/* A new {"ok": true} reply. */
static json_t *okay(void)
{
    return json_pack("{s:b}", "ok", 1);
}

/* --------------------------------------------------------- request ids -- */

/* The engine ids the request value v names (API id, or a numeric engine id
 * as a string or a number): their count, 0 when none can be, -1 when v is
 * not an id at all.  *ids points into the live request or at *one. */
static int resolve_id(const struct llmd *d, const json_t *v, uint64_t *one, const uint64_t **ids)
{
    *ids = one;
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0)
            return 0;
        *one = (uint64_t)json_integer_value(v);
        return 1;
    }
    if (!json_is_string(v))
        return -1;
    const char *s = json_string_value(v);
    int n = sv_engine_ids(d, s, ids);
    if (n > 0)
        return n;
    *ids = one;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (s[0] < '0' || s[0] > '9' || *end || errno)
        return 0;
    *one = (uint64_t)x;
    return 1;
}

static const struct eng_snap_req *snap_find(const struct eng_snapshot *s, uint64_t id)
{
    for (int i = 0; i < s->n_reqs; i++)
        if (s->reqs[i].id == id && s->reqs[i].state != ENG_RS_FINISHED)
            return &s->reqs[i];
    return NULL;
}

/* ------------------------------------------------------------- status -- */

static json_t *status_pools(struct llmd *d, const struct eng_snapshot *s, json_t *o)
{
    struct be_kv_geom g = model_kv_geom(d->model, d->cfg->block_size > 0 ? d->cfg->block_size : 16);
    json_int_t bb = (json_int_t)(be_kv_block_elems(&g) * sizeof(float)); /* the engine's pools */
    json_object_set_new(o, "device",
                        json_pack("{s:i,s:i,s:i,s:i,s:I}", "total", s->blocks_total, "used",
                                  s->blocks_used, "cached", s->blocks_cached, "free",
                                  s->blocks_free, "block_bytes", bb));
    json_object_set_new(o, "host",
                        json_pack("{s:i,s:i,s:I}", "total", s->host_blocks_total, "used",
                                  s->host_blocks_used, "block_bytes", bb));
    json_object_set_new(o, "preemptions",
                        json_pack("{s:I,s:I}", "swap", (json_int_t)s->preempt_swap, "recompute",
                                  (json_int_t)s->preempt_recompute));
    json_object_set_new(o, "swap_bytes",
                        json_pack("{s:I,s:I}", "out", (json_int_t)s->swap_bytes_out, "in",
                                  (json_int_t)s->swap_bytes_in));
    json_object_set_new(o, "prefix_cache",
                        json_pack("{s:I,s:I}", "lookups", (json_int_t)s->prefix_lookups, "hits",
                                  (json_int_t)s->prefix_hits));
    return o;
}

static json_t *status_prios(const struct eng_snapshot *s)
{
    json_t *a = json_array();
    for (int p = 0; a && p < ENG_SNAP_PRIOS; p++) {
        const int *r = s->by_prio[p];
        if (r[ENG_RS_RUNNING] + r[ENG_RS_WAITING] + r[ENG_RS_SWAPPED] + r[ENG_RS_PREEMPTED] == 0)
            continue;
        json_array_append_new(a,
                              json_pack("{s:i,s:i,s:i,s:i,s:i}", "priority", p, "running",
                                        r[ENG_RS_RUNNING], "waiting", r[ENG_RS_WAITING], "swapped",
                                        r[ENG_RS_SWAPPED], "preempted", r[ENG_RS_PREEMPTED]));
    }
    return a;
}

static int has_work(const struct eng_snap_tenant *t)
{
    return t->running + t->waiting + t->swapped > 0;
}

static json_t *status_tenants(const struct admsock_rates *r, const struct eng_snapshot *s,
                              double now)
{
    double weights = 0, span;
    long all = 0;
    for (int i = 0; i < s->n_tenants; i++) {
        weights += has_work(&s->tenants[i]) ? s->tenants[i].weight : 0;
        all += rate_delta(r, s, now, RATE_LONG_S, &s->tenants[i], &span);
    }
    json_t *a = json_array();
    for (int i = 0; a && i < s->n_tenants; i++) {
        const struct eng_snap_tenant *t = &s->tenants[i];
        long last = rate_delta(r, s, now, RATE_LONG_S, t, &span);
        long recent = rate_delta(r, s, now, RATE_SHORT_S, t, &span);
        double ws = has_work(t) && weights > 0 ? t->weight / weights : 0;
        json_array_append_new(
            a, json_pack("{s:s,s:o,s:i,s:i,s:i,s:i,s:o,s:o,s:o}", "name", t->name, "weight",
                         jnum(t->weight), "running", t->running, "waiting", t->waiting, "swapped",
                         t->swapped, "device_blocks", t->device_blocks, "tokens_per_s",
                         jnum(rate_of(recent, span)), "share",
                         jnum(all > 0 ? (double)last / (double)all : 0), "weight_share", jnum(ws)));
    }
    return a;
}

static json_t *cmd_status(struct llmd *d, const struct admsock_rates *r,
                          const struct eng_snapshot *s)
{
    double now = mono(), span10, span60;
    long t10 = rate_delta(r, s, now, RATE_SHORT_S, NULL, &span10);
    long t60 = rate_delta(r, s, now, RATE_LONG_S, NULL, &span60);
    json_t *o = okay();
    json_object_set_new(o, "model", json_string(d->model_id));
    json_object_set_new(o, "backend", json_string(d->cfg->backend ? d->cfg->backend : ""));
    json_object_set_new(o, "version", json_string(LLMD_VERSION));
    json_object_set_new(o, "uptime_s", jnum(now - d->t_start));
    json_object_set_new(o, "draining", jbool(d->draining));
    json_object_set_new(o, "stopping", jbool(d->stopping));
    json_object_set_new(o, "step", json_integer(s->step));
    status_pools(d, s, o);
    json_object_set_new(o, "priorities", status_prios(s));
    json_object_set_new(o, "tokens_per_s",
                        json_pack("{s:o,s:o}", "10s", jnum(rate_of(t10, span10)), "60s",
                                  jnum(rate_of(t60, span60))));
    json_object_set_new(o, "tenants", status_tenants(r, s, now));
    return o;
}

/* ------------------------------------------------------------- queues -- */

static json_t *queue_row(const struct llmd *d, const struct eng_snap_req *q)
{
    const char *pub = sv_public_id(d, q->id);
    return json_pack("{s:o,s:I,s:s,s:i,s:s,s:o,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "id",
                     pub ? json_string(pub) : json_null(), "engine_id", (json_int_t)q->id, "tenant",
                     q->tenant, "priority", q->priority, "state", eng_rstate_name(q->state),
                     "age_s", jnum(q->age_s), "n", q->n_seqs, "prompt_tokens", q->prompt_tokens,
                     "cached_tokens", q->cached_tokens, "generated_tokens", q->generated_tokens,
                     "device_blocks", q->device_blocks, "host_blocks", q->host_blocks,
                     "preemptions", q->preemptions);
}

static json_t *cmd_queues(struct llmd *d, json_t *req, const struct eng_snapshot *s)
{
    json_t *jt = json_object_get(req, "tenant");
    if (jt && !json_is_null(jt) && !json_is_string(jt))
        return fail("\"tenant\" must be a string");
    const char *tenant = json_string_value(jt);
    json_t *a = json_array();
    for (int i = 0; a && i < s->n_reqs; i++) {
        const struct eng_snap_req *q = &s->reqs[i];
        if (q->state == ENG_RS_FINISHED || (tenant && strcmp(tenant, q->tenant) != 0))
            continue;
        json_array_append_new(a, queue_row(d, q));
    }
    json_t *o = okay();
    json_object_set_new(o, "requests", a);
    return o;
}

/* ------------------------------------------------------------- blocks -- */

static json_t *table_entry(const struct eng_snap_entry *e)
{
    char hex[17];
    snprintf(hex, sizeof(hex), "%016" PRIx64, e->hash);
    return json_pack("{s:i,s:i,s:i,s:s,s:i,s:o,s:b}", "seq", e->seq, "logical", e->logical, "block",
                     (int)e->block, "where", e->on_host ? "host" : "device", "ref", e->ref, "hash",
                     e->hash ? json_string(hex) : json_null(), "shared", e->ref > 1);
}

static json_t *blocks_of(struct llmd *d, json_t *id, const struct eng_snapshot *s)
{
    uint64_t one;
    const uint64_t *ids;
    int n = resolve_id(d, id, &one, &ids);
    if (n < 0)
        return fail("\"request\" must be a request id");
    const struct eng_snap_req *q = NULL;
    for (int i = 0; i < n && !q; i++)
        q = snap_find(s, ids[i]); /* a request of several prompts: its first live part */
    if (!q)
        return fail("no such request");
    const char *pub = sv_public_id(d, q->id);
    json_t *t = json_array();
    for (int i = 0; t && i < q->n_table && q->table; i++)
        json_array_append_new(t, table_entry(&q->table[i]));
    json_t *o = okay();
    json_object_set_new(o, "request", pub ? json_string(pub) : json_sprintf("%" PRIu64, q->id));
    json_object_set_new(o, "engine_id", json_integer((json_int_t)q->id));
    json_object_set_new(o, "block_size", json_integer(d->cfg->block_size));
    json_object_set_new(o, "table", t);
    return o;
}

static int map_value(const struct eng_snap_block *b, int n_tenants)
{
    if (b->state == ENG_BLOCK_FREE)
        return -1;
    if (b->state == ENG_BLOCK_CACHED)
        return -2;
    return b->tenant >= 0 && b->tenant < n_tenants ? b->tenant : -3;
}

static json_t *block_map(struct llmd *d, const struct eng_snapshot *s)
{
    if (!s->blocks && s->blocks_total > 0)
        return fail("the engine publishes no block map");
    json_t *names = json_array(), *map = json_array();
    for (int i = 0; names && i < s->n_tenants; i++)
        json_array_append_new(names, json_string(s->tenants[i].name));
    for (int b = 0; map && b < s->n_blocks; b++)
        json_array_append_new(map, json_integer(map_value(&s->blocks[b], s->n_tenants)));
    json_t *o = okay();
    json_object_set_new(o, "total", json_integer(s->n_blocks));
    json_object_set_new(o, "block_size", json_integer(d->cfg->block_size));
    json_object_set_new(o, "tenants", names);
    json_object_set_new(o, "map", map);
    return o;
}

static json_t *cmd_blocks(struct llmd *d, json_t *req, const struct eng_snapshot *s)
{
    json_t *id = json_object_get(req, "request");
    return id && !json_is_null(id) ? blocks_of(d, id, s) : block_map(d, s);
}

/* ------------------------------------------------------------- levers -- */

static json_t *cmd_drain(struct llmd *d, json_t *req, const struct admsock_peer *who)
{
    json_t *on = json_object_get(req, "on");
    if (!json_is_boolean(on))
        return fail("drain needs \"on\": true or false");
    if (json_is_false(on) && d->stopping)
        return fail("the daemon is shutting down; it cannot stop draining");
    d->draining = json_is_true(on);
    eng_drain(d->eng, d->draining);
    log_info("admin: uid %u pid %d: drain %s", who->uid, who->pid, d->draining ? "on" : "off");
    json_t *o = okay();
    json_object_set_new(o, "draining", jbool(d->draining));
    return o;
}

static json_t *evict_request(struct llmd *d, json_t *id, int abort, const struct admsock_peer *who)
{
    uint64_t one;
    const uint64_t *ids;
    int n = resolve_id(d, id, &one, &ids);
    if (n < 0)
        return fail("\"request\" must be a request id");
    int done = 0;
    uint64_t first = 0;
    for (int i = 0; i < n; i++)
        if (eng_evict(d->eng, ids[i], abort) == ENG_OK && done++ == 0)
            first = ids[i];
    if (done == 0)
        return fail("no such request");
    const char *pub = sv_public_id(d, first);
    log_info("admin: uid %u pid %d: evict%s request %s (engine id %" PRIu64
             ", %d engine request%s)",
             who->uid, who->pid, abort ? " --abort" : "", pub ? pub : "-", first, done,
             done == 1 ? "" : "s");
    json_t *o = okay();
    json_object_set_new(o, "evicted", json_integer(done));
    return o;
}

static json_t *evict_tenant(struct llmd *d, const char *tenant, int abort,
                            const struct admsock_peer *who, const struct eng_snapshot *s)
{
    int known = 0;
    for (int i = 0; i < s->n_tenants; i++)
        known |= strcmp(s->tenants[i].name, tenant) == 0;
    /* Counted from the daemon's own requests: the snapshot may lag the
     * engine by a step, and miss a request submitted since. */
    int n = sv_tenant_engine_reqs(d, tenant);
    int rc = eng_evict_tenant(d->eng, tenant, abort);
    if (rc == ENG_ENOENT && !known)
        return fail("no such tenant");
    if (rc != ENG_OK && rc != ENG_ENOENT)
        return fail("%s", eng_strerror(rc));
    n = rc == ENG_OK ? n : 0;
    log_info("admin: uid %u pid %d: evict%s tenant %s (%d engine request%s)", who->uid, who->pid,
             abort ? " --abort" : "", tenant, n, n == 1 ? "" : "s");
    json_t *o = okay();
    json_object_set_new(o, "evicted", json_integer(n));
    return o;
}

static json_t *cmd_evict(struct llmd *d, json_t *req, const struct admsock_peer *who,
                         const struct eng_snapshot *s)
{
    json_t *id = json_object_get(req, "request"), *tn = json_object_get(req, "tenant");
    json_t *ab = json_object_get(req, "abort");
    if (ab && !json_is_boolean(ab) && !json_is_null(ab))
        return fail("\"abort\" must be true or false");
    int abort = json_is_true(ab);
    if ((id && !json_is_null(id)) == (tn && !json_is_null(tn)))
        return fail("evict needs \"request\" or \"tenant\" (one of them)");
    if (id && !json_is_null(id))
        return evict_request(d, id, abort, who);
    if (!json_is_string(tn))
        return fail("\"tenant\" must be a string");
    return evict_tenant(d, json_string_value(tn), abort, who, s);
}

/* ----------------------------------------------------------- dispatch -- */

static json_t *dispatch(struct llmd *d, const struct admsock_rates *r,
                        const struct admsock_peer *who, const char *cmd, json_t *req)
{
    static const char *const known[] = {"status", "queues", "blocks", "drain", "evict"};
    int k = -1;
    for (int i = 0; i < (int)(sizeof(known) / sizeof(known[0])); i++)
        if (strcmp(cmd, known[i]) == 0)
            k = i;
    if (k < 0)
        return fail("unknown command \"%.64s\" (status, queues, blocks, drain, evict)", cmd);
    if (k == 3)
        return cmd_drain(d, req, who);
    struct eng_snapshot *s = eng_snapshot(d->eng);
    if (!s)
        return fail("out of memory");
    json_t *o = k == 0   ? cmd_status(d, r, s)
                : k == 1 ? cmd_queues(d, req, s)
                : k == 2 ? cmd_blocks(d, req, s)
                         : cmd_evict(d, req, who, s);
    eng_snapshot_free(s);
    return o;
}

char *admsock_answer(struct llmd *d, struct admsock_rates *r, const struct admsock_peer *who,
                     const char *line, size_t len, size_t *len_out)
{
    json_error_t jerr;
    json_t *req = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    json_t *o;
    if (!req)
        o = fail("bad JSON: %s", jerr.text);
    else if (!json_is_object(req) || !json_is_string(json_object_get(req, "cmd")))
        o = fail("a request is a JSON object with a string \"cmd\"");
    else
        o = dispatch(d, r, who, json_string_value(json_object_get(req, "cmd")), req);
    json_decref(req);
    return reply_line(o, len_out);
}
