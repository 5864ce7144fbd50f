/*
 * sched/view.c — what operators and tests see: request and tenant
 * snapshots, counters, names, and the invariant check.
 *
 * sched_check recomputes every cached total (tenant device blocks, running
 * sequences) from the requests, checks each request's tables against its
 * state, and hands every live table to kv_pool_check, which verifies that
 * the pool's reference counts are exactly the references the tables hold.
 */
#include "sched/internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int sreq_eff_priority(const struct sched *s, const struct sreq *r, double now)
{
    int p = r->pub.priority;
    if (s->o.aging_s <= 0 || p <= 0 || now <= r->pub.arrival)
        return p;
    double levels = floor((now - r->pub.arrival) / s->o.aging_s);
    return levels >= p ? 0 : p - (int)levels;
}

/* --- snapshots ------------------------------------------------------------------- */

const struct sched_req *sched_first(const struct sched *s)
{
    return s->head ? &s->head->pub : NULL;
}

const struct sched_req *sched_next(const struct sched *s, const struct sched_req *r)
{
    (void)s;
    const struct sreq *x = csreq_of(r)->next;
    return x ? &x->pub : NULL;
}

void sched_req_info(const struct sched *s, const struct sched_req *pr, double now,
                    struct sched_req_info *out)
{
    const struct sreq *r = csreq_of(pr);
    *out = (struct sched_req_info){
        .id = pr->id,
        .tenant = pr->tenant,
        .priority = pr->priority,
        .state = pr->state,
        .age_s = now - pr->arrival,
        .wait_s = r->admitted ? r->wait_s : now - pr->arrival,
        .n_prompt = pr->n_prompt,
        .n_cached = pr->n_cached,
        .n_live_seqs = r->n_live,
        .n_preemptions = pr->n_preemptions,
    };
    int waiting =
        pr->state == SCHED_WAITING || pr->state == SCHED_SWAPPED || pr->state == SCHED_PREEMPTED;
    out->eff_priority = waiting ? sreq_eff_priority(s, r, now) : pr->eff_priority;
    for (int i = 0; i < pr->n; i++) {
        const struct sched_seq *q = &pr->seqs[i];
        int gen = q->n_tokens - pr->n_prompt;
        if (gen > out->n_generated)
            out->n_generated = gen;
        if (q->end == SCHED_END_NONE)
            out->n_computed += q->n_computed;
        if (q->table.on_host)
            out->host_blocks += q->table.n_blocks;
    }
    out->dev_blocks = sreq_dev_blocks(r);
}

int sched_n_tenants(const struct sched *s)
{
    return s->n_tenants;
}

void sched_tenant_info(const struct sched *s, int i, struct sched_tenant_info *out)
{
    *out = (struct sched_tenant_info){0};
    if (i < 0 || i >= s->n_tenants)
        return;
    const struct stenant *t = s->tenants[i];
    out->tenant = t->id;
    out->weight = t->weight;
    out->max_running_seqs = t->max_running_seqs;
    out->max_device_blocks = t->max_device_blocks;
    out->vtc = t->vtc;
    out->running_seqs = t->running_seqs;
    out->dev_blocks = t->dev_blocks;
    out->prefill_tokens = t->prefill_tokens;
    out->decode_tokens = t->decode_tokens;
    out->preemptions = t->preemptions;
    for (const struct sreq *r = s->head; r; r = r->next) {
        if (r->tn != t)
            continue;
        out->n_waiting += r->pub.state == SCHED_WAITING;
        out->n_running += r->pub.state == SCHED_RUNNING;
        out->n_swapped += r->pub.state == SCHED_SWAPPED;
        out->n_preempted += r->pub.state == SCHED_PREEMPTED;
    }
}

void sched_stats(const struct sched *s, struct sched_stats *out)
{
    *out = s->st;
    for (int i = 0; i < SCHED_STATE_COUNT; i++)
        out->n_by_state[i] = 0;
    for (const struct sreq *r = s->head; r; r = r->next)
        out->n_by_state[r->pub.state]++;
    out->running_seqs = s->running_seqs;
}

/* --- names ----------------------------------------------------------------------- */

const char *sched_state_name(enum sched_state st)
{
    static const char *const names[] = {"waiting",   "running",  "swapped",
                                        "preempted", "finished", "aborted"};
    return (unsigned)st < SCHED_STATE_COUNT ? names[st] : "?";
}

const char *sched_why_name(enum sched_why w)
{
    static const char *const names[] = {"priority", "blocks", "tenant-cap", "evict"};
    return (unsigned)w < SCHED_WHY_COUNT ? names[w] : "?";
}

const char *sched_end_name(enum sched_end e)
{
    static const char *const names[] = {"none", "stop", "length", "cancelled", "evicted", "error"};
    return (unsigned)e <= SCHED_END_ERROR ? names[e] : "?";
}

const char *sched_preempt_name(enum sched_preempt m)
{
    static const char *const names[] = {"auto", "swap", "recompute"};
    return (unsigned)m <= SCHED_PREEMPT_RECOMPUTE ? names[m] : "?";
}

const char *sched_strerror(int code)
{
    switch (code) {
    case 0:
        return "ok";
    case SCHED_E_INVAL:
        return "invalid request parameters";
    case SCHED_E_DUP:
        return "a request with this id is already live";
    case SCHED_E_DRAINING:
        return "draining: not accepting new requests";
    case SCHED_E_TOOBIG:
        return "request can never fit the KV pool or its limits";
    case SCHED_E_NOMEM:
        return "out of memory";
    default:
        return "unknown error";
    }
}

/* --- invariants ------------------------------------------------------------------ */

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* The tables of one request agree with its state. */
static int check_req(const struct sched *s, const struct sreq *r, char *err, size_t errlen)
{
    const struct sched_req *pr = &r->pub;
    int live = 0;
    for (int i = 0; i < pr->n; i++) {
        const struct sched_seq *q = &pr->seqs[i];
        const struct kv_table *t = &q->table;
        live += q->end == SCHED_END_NONE;
        int active = seq_is_active(r, q);
        if (q->n_computed > q->n_tokens || q->n_tokens > pr->n_prompt + pr->max_tokens)
            return fail(err, errlen, "req %llu seq %d: %d computed of %d tokens",
                        (unsigned long long)pr->id, i, q->n_computed, q->n_tokens);
        if (!active && t->n_blocks)
            return fail(err, errlen, "req %llu seq %d: inactive but holds %d blocks",
                        (unsigned long long)pr->id, i, t->n_blocks);
        if (!active)
            continue;
        if (t->n_committed != q->n_computed || q->n_computed > t->n_blocks * s->o.block_size)
            return fail(err, errlen, "req %llu seq %d: committed %d, computed %d, %d blocks",
                        (unsigned long long)pr->id, i, t->n_committed, q->n_computed, t->n_blocks);
        int on_host_ok = pr->state == SCHED_SWAPPED ? t->on_host || t->n_blocks == 0 : !t->on_host;
        int empty_ok = (pr->state != SCHED_WAITING && pr->state != SCHED_PREEMPTED) ||
                       (t->n_blocks == 0 && q->n_computed == 0);
        if (!on_host_ok || !empty_ok)
            return fail(err, errlen, "req %llu seq %d: tables do not match state %s",
                        (unsigned long long)pr->id, i, sched_state_name(pr->state));
    }
    int ended = pr->state == SCHED_FINISHED || pr->state == SCHED_ABORTED;
    if (live != r->n_live || (ended && live) || (!ended && !live))
        return fail(err, errlen, "req %llu: %d live sequences, counted %d, state %s",
                    (unsigned long long)pr->id, live, r->n_live, sched_state_name(pr->state));
    if (r->dev_blocks != sreq_dev_blocks(r))
        return fail(err, errlen, "req %llu: device blocks %d, counted %d",
                    (unsigned long long)pr->id, sreq_dev_blocks(r), r->dev_blocks);
    return 0;
}

static int check_totals(const struct sched *s, char *err, size_t errlen)
{
    for (int i = 0; i < s->n_tenants; i++)
        s->tenants[i]->chk_blocks = s->tenants[i]->chk_seqs = s->tenants[i]->chk_active = 0;
    for (const struct sreq *r = s->head; r; r = r->next) {
        r->tn->chk_blocks += r->dev_blocks;
        r->tn->chk_seqs += r->pub.state == SCHED_RUNNING ? r->n_live : 0;
        r->tn->chk_active += r->pub.state != SCHED_FINISHED && r->pub.state != SCHED_ABORTED;
    }
    int running = 0, active = 0;
    for (int i = 0; i < s->n_tenants; i++) {
        const struct stenant *t = s->tenants[i];
        if (t->chk_blocks != t->dev_blocks || t->chk_seqs != t->running_seqs ||
            t->chk_active != t->n_active)
            return fail(err, errlen, "tenant %lld: blocks %d/%d seqs %d/%d active %d/%d",
                        (long long)t->id, t->chk_blocks, t->dev_blocks, t->chk_seqs,
                        t->running_seqs, t->chk_active, t->n_active);
        running += t->chk_seqs;
        active += t->chk_active;
    }
    if (running != s->running_seqs || active != s->n_active || running > s->o.max_seqs)
        return fail(err, errlen, "running seqs %d/%d (max %d), active %d/%d", running,
                    s->running_seqs, s->o.max_seqs, active, s->n_active);
    return 0;
}

int sched_check(const struct sched *s, char *err, size_t errlen)
{
    int n = 0;
    for (const struct sreq *r = s->head; r; r = r->next) {
        if (check_req(s, r, err, errlen) != 0)
            return -1;
        n += r->pub.n;
    }
    if (check_totals(s, err, errlen) != 0)
        return -1;
    const struct kv_table **tables = malloc(sizeof(*tables) * (size_t)(n ? n : 1));
    if (!tables)
        return fail(err, errlen, "out of memory");
    int k = 0;
    for (const struct sreq *r = s->head; r; r = r->next)
        for (int i = 0; i < r->pub.n; i++)
            tables[k++] = &r->pub.seqs[i].table;
    int rc = kv_pool_check(s->pool, tables, k, err, errlen);
    free(tables);
    return rc;
}

int sched_check_now(struct sched *s, const char *where)
{
    if (!s->check)
        return 0;
    char err[256];
    if (sched_check(s, err, sizeof(err)) != 0) {
        fprintf(stderr, "sched: invariant broken after %s (step %ld): %s\n", where, s->plan.step,
                err);
        abort();
    }
    return 0;
}
