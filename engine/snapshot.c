/*
 * engine/snapshot.c — the read-only state published once per step for
 * operator views (llmadmin status/queues/blocks, /metrics).
 *
 * The engine thread builds a fresh snapshot after each step from the
 * scheduler's views, the KV pool's counters and the swap pool's; readers
 * get a deep copy under the engine's lock, so they never see a half-built
 * one and never touch the scheduler.
 */
#include "engine/eng_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *eng_rstate_name(enum eng_rstate s)
{
    static const char *names[] = {"waiting", "running", "swapped", "preempted", "finished"};
    return s >= 0 && s < ENG_RS_N ? names[s] : "?";
}

static enum eng_rstate snap_state(enum sched_state s)
{
    switch (s) {
    case SCHED_WAITING:
        return ENG_RS_WAITING;
    case SCHED_RUNNING:
        return ENG_RS_RUNNING;
    case SCHED_SWAPPED:
        return ENG_RS_SWAPPED;
    case SCHED_PREEMPTED:
        return ENG_RS_PREEMPTED;
    default:
        return ENG_RS_FINISHED;
    }
}

static void snap_counters(struct eng *e, struct eng_snapshot *s)
{
    struct sched_stats st;
    sched_stats(e->s, &st);
    struct kv_stats kv;
    kv_pool_stats(sched_pool(e->s), &kv);
    struct swap_stats sw;
    swap_pool_stats(e->swap, &sw);
    s->step = e->step;
    s->t = eng_now();
    s->draining = sched_draining(e->s);
    s->blocks_total = kv.n_blocks;
    s->blocks_free = kv.n_free;
    s->blocks_cached = kv.n_cached;
    s->blocks_used = kv.n_used;
    s->host_blocks_total = kv.n_host_blocks;
    s->host_blocks_used = kv.n_host_blocks - kv.n_host_free;
    for (int w = 0; w < SCHED_WHY_COUNT; w++) {
        s->preempt_swap += st.preemptions[0][w];
        s->preempt_recompute += st.preemptions[1][w];
    }
    s->swap_bytes_out = sw.bytes_out;
    s->swap_bytes_in = sw.bytes_in;
    s->swap_bw_bytes_s = sw.bw_bytes_s;
    s->prefill_tok_s = e->cost.prefill_tok_s;
    s->prefix_lookups = st.prefix_lookup_tokens;
    s->prefix_hits = st.prefix_hit_tokens;
    s->tokens_prefilled = st.prefill_tokens;
    s->tokens_generated = e->tokens_generated;
    s->requests_finished = e->requests_finished;
    snprintf(s->last_error, sizeof(s->last_error), "%s", e->last_error);
}

static void snap_tenants(struct eng *e, struct eng_snapshot *s)
{
    for (int i = 0; i < s->n_tenants; i++) {
        struct sched_tenant_info ti;
        sched_tenant_info(e->s, i, &ti);
        struct eng_snap_tenant *t = &s->tenants[i];
        snprintf(t->name, sizeof(t->name), "%s", eng_tenant_name(e, ti.tenant));
        t->weight = ti.weight;
        t->running = ti.n_running;
        t->waiting = ti.n_waiting + ti.n_preempted;
        t->swapped = ti.n_swapped;
        t->device_blocks = ti.dev_blocks;
        t->tokens_served = ti.prefill_tokens + ti.decode_tokens;
    }
}

static void snap_reqs(struct eng *e, struct eng_snapshot *s)
{
    int k = 0;
    for (const struct sched_req *sr = sched_first(e->s); sr && k < s->n_reqs;
         sr = sched_next(e->s, sr), k++) {
        struct sched_req_info ri;
        sched_req_info(e->s, sr, s->t, &ri);
        const struct eng_req *r = sr->user;
        struct eng_snap_req *q = &s->reqs[k];
        q->id = ri.id;
        snprintf(q->tenant, sizeof(q->tenant), "%s", r->tenant);
        q->priority = ri.priority;
        q->state = snap_state(ri.state);
        q->n_seqs = ri.n_live_seqs;
        q->prompt_tokens = ri.n_prompt;
        q->cached_tokens = ri.n_cached;
        q->computed_tokens = ri.n_computed;
        q->generated_tokens = ri.n_generated;
        q->device_blocks = ri.dev_blocks;
        q->host_blocks = ri.host_blocks;
        q->preemptions = ri.n_preemptions;
        q->age_s = ri.age_s;
        s->by_state[q->state]++;
        int pr = q->priority < 0                 ? 0
                 : q->priority >= ENG_SNAP_PRIOS ? ENG_SNAP_PRIOS - 1
                                                 : q->priority;
        s->by_prio[pr][q->state]++;
    }
    s->n_reqs = k;
}

struct eng_snapshot *eng_snapshot_build(struct eng *e)
{
    int n_reqs = 0;
    for (const struct sched_req *sr = sched_first(e->s); sr; sr = sched_next(e->s, sr))
        n_reqs++;
    int n_tenants = sched_n_tenants(e->s);
    struct eng_snapshot *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->tenants = calloc((size_t)(n_tenants > 0 ? n_tenants : 1), sizeof(*s->tenants));
    s->reqs = calloc((size_t)(n_reqs > 0 ? n_reqs : 1), sizeof(*s->reqs));
    if (!s->tenants || !s->reqs) {
        eng_snapshot_free(s);
        return NULL;
    }
    s->n_tenants = n_tenants;
    s->n_reqs = n_reqs;
    snap_counters(e, s);
    snap_tenants(e, s);
    snap_reqs(e, s);
    return s;
}

struct eng_snapshot *eng_snapshot_copy(const struct eng_snapshot *src)
{
    struct eng_snapshot *s = malloc(sizeof(*s));
    if (!s)
        return NULL;
    *s = *src;
    size_t nt = (size_t)(src->n_tenants > 0 ? src->n_tenants : 1);
    size_t nr = (size_t)(src->n_reqs > 0 ? src->n_reqs : 1);
    s->tenants = malloc(sizeof(*s->tenants) * nt);
    s->reqs = malloc(sizeof(*s->reqs) * nr);
    if (!s->tenants || !s->reqs) {
        eng_snapshot_free(s);
        return NULL;
    }
    memcpy(s->tenants, src->tenants, sizeof(*s->tenants) * (size_t)src->n_tenants);
    memcpy(s->reqs, src->reqs, sizeof(*s->reqs) * (size_t)src->n_reqs);
    return s;
}

void eng_snapshot_free(struct eng_snapshot *s)
{
    if (!s)
        return;
    free(s->tenants);
    free(s->reqs);
    free(s);
}
