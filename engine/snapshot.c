/*
 * engine/snapshot.c — the read-only state published once per step for
 * operator views (llmadmin status/queues/blocks, /metrics).
 *
 * The engine thread builds a fresh snapshot after each step from the
 * scheduler's views, the KV pool's counters and the swap pool's; readers
 * get a deep copy under the engine's lock, so they never see a half-built
 * one and never touch the scheduler.
 *
 * With snapshot_blocks the snapshot also carries the device block map and
 * every request's block tables.  Both are read from the same pool at the
 * same moment, so they agree exactly (the tests rely on it); the cost is
 * one pass over the blocks plus one over the table entries, never their
 * product.  The snapshot owns every array in it: reqs[k].table each on its
 * own, the block map, the tenants and the requests.
 */
#include "engine/eng_internal.h"

#include <stdint.h>
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
    s->steps_interrupted = e->steps_interrupted;
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

/* ------------------------------------------------- blocks (snapshot_blocks) -- */

static uint8_t snap_block_state(enum kv_state st)
{
    switch (st) {
    case KV_USED:
        return ENG_BLOCK_USED;
    case KV_CACHED:
        return ENG_BLOCK_CACHED;
    default:
        return ENG_BLOCK_FREE;
    }
}

/* The device pool block by block; tenants are filled in by snap_tables. */
static int snap_block_map(const struct kv_pool *p, struct eng_snapshot *s)
{
    int n = kv_pool_blocks(p);
    s->blocks = malloc(sizeof(*s->blocks) * (size_t)(n > 0 ? n : 1));
    if (!s->blocks)
        return -1;
    s->n_blocks = n;
    for (int32_t b = 0; b < n; b++)
        s->blocks[b] = (struct eng_snap_block){.state = snap_block_state(kv_block_state(p, b)),
                                               .tenant = -1,
                                               .ref = kv_block_refs(p, b),
                                               .hash = kv_block_hash(p, b)};
    return 0;
}

/* One entry per block of every sequence, seq-major.  A host block belongs to
 * exactly one swapped table (ref 1) and keeps the hash its table recorded, the
 * one it is looked up under at swap-in; a device block shows the pool's ref
 * and hash, so the entry and the block map never disagree. */
static int snap_table(const struct kv_pool *p, const struct sched_req *sr, struct eng_snap_req *q)
{
    int n = 0;
    for (int i = 0; i < sr->n; i++)
        n += sr->seqs[i].table.n_blocks;
    if (n == 0)
        return 0;
    q->table = malloc(sizeof(*q->table) * (size_t)n);
    if (!q->table)
        return -1;
    int k = 0;
    for (int i = 0; i < sr->n; i++) {
        const struct kv_table *t = &sr->seqs[i].table;
        for (int j = 0; j < t->n_blocks; j++) {
            int32_t b = t->blocks[j];
            q->table[k++] =
                (struct eng_snap_entry){.seq = i,
                                        .logical = j,
                                        .block = b,
                                        .on_host = t->on_host,
                                        .ref = t->on_host ? 1 : kv_block_refs(p, b),
                                        .hash = t->on_host ? t->hashes[j] : kv_block_hash(p, b)};
        }
    }
    q->n_table = n;
    return 0;
}

/* Index of tenant id in the snapshot's tenants (same order as the
 * scheduler's), -1 when absent or past what the map's field holds. */
static int snap_tenant_index(const int64_t *tids, int n_tenants, int64_t id)
{
    for (int i = 0; i < n_tenants && i <= INT16_MAX; i++)
        if (tids[i] == id)
            return i;
    return -1;
}

/* Every request's tables, in the order of snap_reqs; each device block of
 * the map is tagged with the tenant of the first request found holding it. */
static int snap_tables(struct eng *e, struct eng_snapshot *s, const int64_t *tids)
{
    const struct kv_pool *p = sched_pool(e->s);
    int k = 0;
    for (const struct sched_req *sr = sched_first(e->s); sr && k < s->n_reqs;
         sr = sched_next(e->s, sr), k++) {
        struct eng_snap_req *q = &s->reqs[k];
        if (snap_table(p, sr, q) != 0)
            return -1;
        int ti = snap_tenant_index(tids, s->n_tenants, sr->tenant);
        for (int j = 0; j < q->n_table; j++) {
            const struct eng_snap_entry *en = &q->table[j];
            if (!en->on_host && en->block >= 0 && en->block < s->n_blocks &&
                s->blocks[en->block].tenant < 0)
                s->blocks[en->block].tenant = (int16_t)ti;
        }
    }
    return 0;
}

static int snap_blocks(struct eng *e, struct eng_snapshot *s)
{
    int64_t *tids = malloc(sizeof(*tids) * (size_t)(s->n_tenants > 0 ? s->n_tenants : 1));
    if (!tids)
        return -1;
    for (int i = 0; i < s->n_tenants; i++) {
        struct sched_tenant_info ti;
        sched_tenant_info(e->s, i, &ti);
        tids[i] = ti.tenant;
    }
    int rc = snap_block_map(sched_pool(e->s), s) == 0 && snap_tables(e, s, tids) == 0 ? 0 : -1;
    free(tids);
    return rc;
}

/* ----------------------------------------------------------- life cycle -- */

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
    if (e->o.snapshot_blocks > 0 && snap_blocks(e, s) != 0) {
        eng_snapshot_free(s);
        return NULL;
    }
    return s;
}

/* Deep-copies the block map and the tables into s, whose pointers to them
 * are still src's: they are cleared first, so that a failure leaves s owning
 * only what it allocated. */
static int snap_copy_blocks(struct eng_snapshot *s, const struct eng_snapshot *src)
{
    s->blocks = NULL;
    for (int k = 0; k < s->n_reqs; k++)
        s->reqs[k].table = NULL;
    if (src->blocks) {
        s->blocks = malloc(sizeof(*s->blocks) * (size_t)(src->n_blocks > 0 ? src->n_blocks : 1));
        if (!s->blocks)
            return -1;
        memcpy(s->blocks, src->blocks, sizeof(*s->blocks) * (size_t)src->n_blocks);
    }
    for (int k = 0; k < s->n_reqs; k++) {
        const struct eng_snap_req *q = &src->reqs[k];
        if (!q->table || q->n_table <= 0)
            continue;
        s->reqs[k].table = malloc(sizeof(*q->table) * (size_t)q->n_table);
        if (!s->reqs[k].table)
            return -1;
        memcpy(s->reqs[k].table, q->table, sizeof(*q->table) * (size_t)q->n_table);
    }
    return 0;
}

struct eng_snapshot *eng_snapshot_copy(const struct eng_snapshot *src)
{
    struct eng_snapshot *s = malloc(sizeof(*s));
    if (!s)
        return NULL;
    *s = *src;
    s->blocks = NULL;
    size_t nt = (size_t)(src->n_tenants > 0 ? src->n_tenants : 1);
    size_t nr = (size_t)(src->n_reqs > 0 ? src->n_reqs : 1);
    s->tenants = malloc(sizeof(*s->tenants) * nt);
    s->reqs = malloc(sizeof(*s->reqs) * nr);
    if (!s->tenants || !s->reqs) {
        free(s->tenants);
        free(s->reqs);
        free(s);
        return NULL;
    }
    memcpy(s->tenants, src->tenants, sizeof(*s->tenants) * (size_t)src->n_tenants);
    memcpy(s->reqs, src->reqs, sizeof(*s->reqs) * (size_t)src->n_reqs);
    if (snap_copy_blocks(s, src) != 0) {
        eng_snapshot_free(s);
        return NULL;
    }
    return s;
}

void eng_snapshot_free(struct eng_snapshot *s)
{
    if (!s)
        return;
    if (s->reqs)
        for (int k = 0; k < s->n_reqs; k++)
            free(s->reqs[k].table);
    free(s->blocks);
    free(s->tenants);
    free(s->reqs);
    free(s);
}
