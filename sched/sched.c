/*
 * sched/sched.c — the scheduler's objects: creation, tenants, the life of a
 * request from submission to release, and the control calls (cancel, evict,
 * drain) that arrive between steps.
 *
 * A request lives on one list (submission order) and in an id hash from
 * sched_submit until sched_release; when it ends, whatever ended it, its
 * tables are released at once and it is queued once for sched_pop_done.
 * Tenants are created on first use; the virtual token counter of a tenant
 * that becomes active is lifted to the least counter of the active tenants,
 * so that being idle earns no credit.
 */
#include "sched/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- tenants ----------------------------------------------------------------- */

static struct stenant *tenant_find(const struct sched *s, int64_t id)
{
    for (int i = 0; i < s->n_tenants; i++)
        if (s->tenants[i]->id == id)
            return s->tenants[i];
    return NULL;
}

static struct stenant *tenant_get(struct sched *s, int64_t id)
{
    struct stenant *t = tenant_find(s, id);
    if (t)
        return t;
    if (s->n_tenants == s->cap_tenants) {
        int cap = s->cap_tenants ? 2 * s->cap_tenants : 8;
        struct stenant **nt = realloc(s->tenants, sizeof(*nt) * (size_t)cap);
        if (!nt)
            return NULL;
        s->tenants = nt;
        s->cap_tenants = cap;
    }
    t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->id = id;
    t->weight = 1.0;
    t->vtc = s->vt_last;
    t->blocked_step = -1;
    s->tenants[s->n_tenants++] = t;
    return t;
}

int sched_tenant_set(struct sched *s, int64_t tenant, double weight, int max_running_seqs,
                     int max_device_blocks)
{
    if (!(weight > 0) || max_running_seqs < 0 || max_device_blocks < 0)
        return -1;
    struct stenant *t = tenant_get(s, tenant);
    if (!t)
        return -1;
    t->weight = weight;
    t->max_running_seqs = max_running_seqs;
    t->max_device_blocks = max_device_blocks;
    return 0;
}

/* No banking: an idle tenant rejoins at the least counter of those active. */
static void tenant_activate(struct sched *s, struct stenant *t)
{
    if (t->n_active++ > 0)
        return;
    double lo = s->vt_last;
    int any = 0;
    for (int i = 0; i < s->n_tenants; i++) {
        const struct stenant *o = s->tenants[i];
        if (o != t && o->n_active > 0 && (!any || o->vtc < lo)) {
            lo = o->vtc;
            any = 1;
        }
    }
    if (t->vtc < lo)
        t->vtc = lo;
}

static void tenant_deactivate(struct sched *s, struct stenant *t)
{
    if (--t->n_active == 0)
        s->vt_last = t->vtc;
}

/* --- id hash ------------------------------------------------------------------ */

static size_t hash_slot(const struct sched *s, uint64_t id)
{
    id ^= id >> 33;
    id *= 0xff51afd7ed558ccdULL;
    id ^= id >> 33;
    return (size_t)(id & (uint64_t)(s->hash_cap - 1));
}

static int hash_grow(struct sched *s)
{
    int cap = s->hash_cap ? 2 * s->hash_cap : 64;
    struct sreq **nh = calloc((size_t)cap, sizeof(*nh));
    if (!nh)
        return -1;
    struct sreq **old = s->hash;
    int old_cap = s->hash_cap;
    s->hash = nh;
    s->hash_cap = cap;
    for (int i = 0; i < old_cap; i++) {
        for (struct sreq *r = old[i], *nx; r; r = nx) {
            nx = r->hnext;
            size_t h = hash_slot(s, r->pub.id);
            r->hnext = s->hash[h];
            s->hash[h] = r;
        }
    }
    free(old);
    return 0;
}

static int hash_insert(struct sched *s, struct sreq *r)
{
    if (s->hash_count >= s->hash_cap && hash_grow(s) != 0)
        return -1;
    size_t h = hash_slot(s, r->pub.id);
    r->hnext = s->hash[h];
    s->hash[h] = r;
    s->hash_count++;
    return 0;
}

static void hash_remove(struct sched *s, struct sreq *r)
{
    for (struct sreq **pp = &s->hash[hash_slot(s, r->pub.id)]; *pp; pp = &(*pp)->hnext) {
        if (*pp == r) {
            *pp = r->hnext;
            s->hash_count--;
            return;
        }
    }
}

struct sched_req *sched_find(struct sched *s, uint64_t id)
{
    if (!s->hash_cap)
        return NULL;
    for (struct sreq *r = s->hash[hash_slot(s, id)]; r; r = r->hnext)
        if (r->pub.id == id)
            return &r->pub;
    return NULL;
}

/* --- creation ------------------------------------------------------------------ */

static int opts_fill(struct sched_opts *o)
{
    if (!o->max_batch_tokens)
        o->max_batch_tokens = 512;
    if (!o->max_seqs)
        o->max_seqs = 256;
    if (!o->max_chunk || o->max_chunk > o->max_batch_tokens)
        o->max_chunk = o->max_batch_tokens;
    if (!o->block_size)
        o->block_size = 16;
    return o->max_batch_tokens > 0 && o->max_seqs > 0 && o->max_chunk > 0 && o->block_size > 0 &&
                   o->n_blocks > 0 && o->n_host_blocks >= 0 && o->aging_s >= 0 && o->swap_bw >= 0 &&
                   o->prefill_rate >= 0 && (unsigned)o->preempt <= SCHED_PREEMPT_RECOMPUTE
               ? 0
               : -1;
}

struct sched *sched_new(const struct sched_opts *o)
{
    if (!o)
        return NULL;
    struct sched_opts opts = *o;
    if (opts_fill(&opts) != 0)
        return NULL;
    struct sched *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->o = opts;
    s->cost.block_bytes = opts.block_bytes;
    s->cost.bw_bytes_s = opts.swap_bw;
    s->cost.prefill_tok_s = opts.prefill_rate;
#ifdef NDEBUG
    s->check = opts.check > 0;
#else
    s->check = opts.check >= 0;
#endif
    s->pool = kv_pool_new(&(struct kv_pool_opts){.n_blocks = opts.n_blocks,
                                                 .n_host_blocks = opts.n_host_blocks,
                                                 .block_size = opts.block_size});
    if (!s->pool || plan_alloc(s) != 0 || hash_grow(s) != 0) {
        sched_free(s);
        return NULL;
    }
    return s;
}

static void sreq_free(struct sreq *r)
{
    for (int i = 0; i < r->pub.n; i++)
        free(r->pub.seqs[i].tokens);
    free(r->pub.seqs);
    free(r);
}

void sched_free(struct sched *s)
{
    if (!s)
        return;
    for (struct sreq *r = s->head, *nx; r; r = nx) {
        nx = r->next;
        for (int i = 0; i < r->pub.n; i++)
            kv_table_release(s->pool, &r->pub.seqs[i].table);
        sreq_free(r);
    }
    for (int i = 0; i < s->n_tenants; i++)
        free(s->tenants[i]);
    free(s->tenants);
    free(s->hash);
    plan_free(s);
    kv_pool_free(s->pool);
    free(s);
}

const struct kv_pool *sched_pool(const struct sched *s)
{
    return s->pool;
}

const struct sched_opts *sched_options(const struct sched *s)
{
    return &s->o;
}

void sched_set_rates(struct sched *s, double swap_bw, double prefill_rate)
{
    if (swap_bw > 0)
        s->cost.bw_bytes_s = s->o.swap_bw = swap_bw;
    if (prefill_rate > 0)
        s->cost.prefill_tok_s = s->o.prefill_rate = prefill_rate;
}

void sched_set_step_cost(struct sched *s, double a, double b)
{
    s->step_a = a > 0 ? a : 0;
    s->step_b = b;
}

/* --- accounting ------------------------------------------------------------------ */

/* Whether block i of table k is also held, at the same index, by an earlier
 * table of the request (forked sequences share blocks index for index). */
static int shared_earlier(const struct sched_req *r, int k, int i)
{
    int32_t b = r->seqs[k].table.blocks[i];
    for (int j = 0; j < k; j++) {
        const struct kv_table *t = &r->seqs[j].table;
        if (!t->on_host && i < t->n_blocks && t->blocks[i] == b)
            return 1;
    }
    return 0;
}

int sreq_dev_blocks(const struct sreq *r)
{
    int n = 0;
    for (int k = 0; k < r->pub.n; k++) {
        const struct kv_table *t = &r->pub.seqs[k].table;
        if (t->on_host)
            continue;
        if (k == 0)
            n += t->n_blocks;
        else
            for (int i = 0; i < t->n_blocks; i++)
                n += !shared_earlier(&r->pub, k, i);
    }
    return n;
}

int sreq_table_blocks(const struct sreq *r)
{
    int n = 0;
    for (int i = 0; i < r->pub.n; i++)
        if (!r->pub.seqs[i].table.on_host)
            n += r->pub.seqs[i].table.n_blocks;
    return n;
}

void sreq_account(struct sched *s, struct sreq *r)
{
    int nb = sreq_dev_blocks(r);
    int rs = r->pub.state == SCHED_RUNNING ? r->n_live : 0;
    r->tn->dev_blocks += nb - r->dev_blocks;
    r->dev_blocks = nb;
    r->tn->running_seqs += rs - r->run_seqs;
    s->running_seqs += rs - r->run_seqs;
    r->run_seqs = rs;
}

int seq_is_active(const struct sreq *r, const struct sched_seq *q)
{
    return q->end == SCHED_END_NONE && (r->forked || q->index == 0);
}

/* --- submission ------------------------------------------------------------------ */

/* Blocks the request could hold at its largest, with no sharing at all:
 * sharing is lost when forked sequences are recomputed. */
static long worst_blocks(const struct sched *s, const struct sched_params *p)
{
    long toks = (long)p->n_prompt + p->max_tokens - 1;
    return (long)p->n * ((toks + s->o.block_size - 1) / s->o.block_size);
}

static int submit_check(struct sched *s, const struct sched_params *p, const struct stenant *t)
{
    if (!p || !p->prompt || p->n_prompt < 1 || p->max_tokens < 1 || p->n < 1 ||
        p->max_tokens > (1 << 28) - p->n_prompt)
        return SCHED_E_INVAL;
    if (s->draining)
        return SCHED_E_DRAINING;
    if (sched_find(s, p->id))
        return SCHED_E_DUP;
    long worst = worst_blocks(s, p);
    if (p->n > s->o.max_seqs || worst > s->o.n_blocks)
        return SCHED_E_TOOBIG;
    if (t && ((t->max_running_seqs && p->n > t->max_running_seqs) ||
              (t->max_device_blocks && worst > t->max_device_blocks)))
        return SCHED_E_TOOBIG;
    return 0;
}

static int seq_init(struct sched_seq *q, struct sched_req *r, int index, const int32_t *prompt,
                    int *cap_out)
{
    q->req = r;
    q->index = index;
    int cap = r->n_prompt + (r->max_tokens < 64 ? r->max_tokens : 64);
    q->tokens = malloc(sizeof(int32_t) * (size_t)cap);
    if (!q->tokens)
        return -1;
    memcpy(q->tokens, prompt, sizeof(int32_t) * (size_t)r->n_prompt);
    q->n_tokens = r->n_prompt;
    *cap_out = cap;
    return 0;
}

static struct sreq *sreq_new(const struct sched_params *p)
{
    struct sreq *r = calloc(1, sizeof(*r) + sizeof(int) * (size_t)p->n);
    if (!r)
        return NULL;
    struct sched_req *pr = &r->pub;
    pr->id = p->id;
    pr->tenant = p->tenant;
    pr->priority = pr->eff_priority = p->priority;
    pr->n_prompt = p->n_prompt;
    pr->max_tokens = p->max_tokens;
    pr->n = p->n;
    pr->salt = p->salt;
    pr->arrival = p->arrival;
    pr->first_admitted = -1;
    pr->user = p->user;
    pr->seqs = calloc((size_t)p->n, sizeof(*pr->seqs));
    if (!pr->seqs) {
        free(r);
        return NULL;
    }
    for (int i = 0; i < p->n; i++) {
        if (seq_init(&pr->seqs[i], pr, i, p->prompt, &r->tok_cap[i]) != 0) {
            sreq_free(r);
            return NULL;
        }
    }
    r->n_live = p->n;
    return r;
}

int sched_submit(struct sched *s, const struct sched_params *p, struct sched_req **out)
{
    if (out)
        *out = NULL;
    int rc = submit_check(s, p, p ? tenant_find(s, p->tenant) : NULL);
    struct stenant *t = rc == 0 ? tenant_get(s, p->tenant) : NULL;
    struct sreq *r = t && plan_reserve_order(s, s->n_active + 1) == 0 ? sreq_new(p) : NULL;
    if (rc == 0 && (!r || hash_insert(s, r) != 0)) {
        if (r)
            sreq_free(r);
        rc = SCHED_E_NOMEM;
    }
    if (rc != 0) {
        s->st.refused++;
        return rc;
    }
    r->tn = t;
    r->seqno = s->seqno++;
    r->touched = -1;
    r->prev = s->tail;
    if (s->tail)
        s->tail->next = r;
    else
        s->head = r;
    s->tail = r;
    tenant_activate(s, t);
    s->n_active++;
    s->st.submitted++;
    if (out)
        *out = &r->pub;
    return 0;
}

/* --- ending -------------------------------------------------------------------- */

void sreq_end(struct sched *s, struct sreq *r, enum sched_state st, enum sched_end end)
{
    for (int i = 0; i < r->pub.n; i++) {
        struct sched_seq *q = &r->pub.seqs[i];
        if (q->end == SCHED_END_NONE)
            q->end = end;
        kv_table_release(s->pool, &q->table);
    }
    r->n_live = 0;
    r->evict_pending = 0;
    r->pub.state = st;
    r->pub.end = end;
    sreq_account(s, r);
    tenant_deactivate(s, r->tn);
    s->n_active--;
    if (st == SCHED_FINISHED)
        s->st.finished++;
    else
        s->st.aborted++;
    r->done_next = NULL;
    if (s->done_tail)
        s->done_tail->done_next = r;
    else
        s->done_head = r;
    s->done_tail = r;
}

static int ended(const struct sreq *r)
{
    return r->pub.state == SCHED_FINISHED || r->pub.state == SCHED_ABORTED;
}

static int end_is_abort(enum sched_end e)
{
    return e == SCHED_END_CANCELLED || e == SCHED_END_EVICTED || e == SCHED_END_ERROR;
}

/* The request's final state: aborted when any sequence was. */
static enum sched_state final_state(const struct sreq *r)
{
    for (int i = 0; i < r->pub.n; i++)
        if (end_is_abort(r->pub.seqs[i].end))
            return SCHED_ABORTED;
    return SCHED_FINISHED;
}

void sched_finish(struct sched *s, struct sched_req *pr, enum sched_end end)
{
    struct sreq *r = sreq_of(pr);
    if (ended(r))
        return;
    if (end == SCHED_END_NONE)
        end = SCHED_END_ERROR;
    for (int i = 0; i < pr->n; i++)
        if (pr->seqs[i].end == SCHED_END_NONE)
            pr->seqs[i].end = end;
    sreq_end(s, r, final_state(r), end);
}

void sched_finish_seq(struct sched *s, struct sched_seq *q, enum sched_end end)
{
    struct sreq *r = sreq_of(q->req);
    if (ended(r) || q->end != SCHED_END_NONE)
        return;
    if (end == SCHED_END_NONE)
        end = SCHED_END_ERROR;
    if (!r->forked && r->pub.n > 1) {
        sched_finish(s, &r->pub, end);
        return;
    }
    q->end = end;
    kv_table_release(s->pool, &q->table);
    if (--r->n_live == 0)
        sreq_end(s, r, final_state(r), end);
    else
        sreq_account(s, r);
}

int sched_append(struct sched *s, struct sched_seq *q, int32_t token)
{
    struct sreq *r = sreq_of(q->req);
    if (r->pub.state != SCHED_RUNNING || q->end != SCHED_END_NONE || q->n_computed != q->n_tokens ||
        q->n_tokens - r->pub.n_prompt >= r->pub.max_tokens)
        return -1;
    if (q->n_tokens == r->tok_cap[q->index]) {
        int cap = q->n_tokens * 2;
        if (cap > r->pub.n_prompt + r->pub.max_tokens)
            cap = r->pub.n_prompt + r->pub.max_tokens;
        int32_t *nt = realloc(q->tokens, sizeof(int32_t) * (size_t)cap);
        if (!nt)
            return -1;
        q->tokens = nt;
        r->tok_cap[q->index] = cap;
    }
    q->tokens[q->n_tokens++] = token;
    r->tn->vtc += 2.0 / r->tn->weight;
    return 0;
}

/* --- control -------------------------------------------------------------------- */

int sched_cancel(struct sched *s, uint64_t id)
{
    struct sched_req *pr = sched_find(s, id);
    if (!pr || ended(sreq_of(pr)))
        return -1;
    for (int i = 0; i < pr->n; i++)
        if (pr->seqs[i].end == SCHED_END_NONE)
            pr->seqs[i].end = SCHED_END_CANCELLED;
    sreq_end(s, sreq_of(pr), SCHED_ABORTED, SCHED_END_CANCELLED);
    return 0;
}

static void evict_one(struct sched *s, struct sreq *r, int abort)
{
    if (abort) {
        for (int i = 0; i < r->pub.n; i++)
            if (r->pub.seqs[i].end == SCHED_END_NONE)
                r->pub.seqs[i].end = SCHED_END_EVICTED;
        sreq_end(s, r, SCHED_ABORTED, SCHED_END_EVICTED);
    } else if (r->pub.state == SCHED_RUNNING) {
        r->evict_pending = 1; /* its swap copies belong in a plan */
    }
}

int sched_evict(struct sched *s, uint64_t id, int abort)
{
    struct sched_req *pr = sched_find(s, id);
    if (!pr || ended(sreq_of(pr)))
        return -1;
    evict_one(s, sreq_of(pr), abort);
    return 0;
}

int sched_evict_tenant(struct sched *s, int64_t tenant, int abort)
{
    int n = 0;
    for (struct sreq *r = s->head; r; r = r->next) {
        if (r->pub.tenant == tenant && !ended(r)) {
            evict_one(s, r, abort);
            n++;
        }
    }
    return n;
}

void sched_drain(struct sched *s, int on)
{
    s->draining = on != 0;
}

int sched_draining(const struct sched *s)
{
    return s->draining;
}

int sched_n_live(const struct sched *s)
{
    return s->n_active;
}

/* --- leaving ------------------------------------------------------------------- */

struct sched_req *sched_pop_done(struct sched *s)
{
    struct sreq *r = s->done_head;
    if (!r)
        return NULL;
    s->done_head = r->done_next;
    if (!s->done_head)
        s->done_tail = NULL;
    r->done_next = NULL;
    return &r->pub;
}

static void done_unlink(struct sched *s, struct sreq *r)
{
    struct sreq *prev = NULL;
    for (struct sreq *x = s->done_head; x; prev = x, x = x->done_next) {
        if (x == r) {
            if (prev)
                prev->done_next = r->done_next;
            else
                s->done_head = r->done_next;
            if (s->done_tail == r)
                s->done_tail = prev;
            return;
        }
    }
}

void sched_release(struct sched *s, struct sched_req *pr)
{
    if (!pr)
        return;
    struct sreq *r = sreq_of(pr);
    if (!ended(r))
        sched_cancel(s, pr->id);
    done_unlink(s, r); /* released without being popped */
    if (r->prev)
        r->prev->next = r->next;
    else
        s->head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        s->tail = r->prev;
    hash_remove(s, r);
    sreq_free(r);
}
