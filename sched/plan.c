/*
 * sched/plan.c — the mechanics under the policy: a step's plan buffers,
 * block needs of a chunk, placing chunks (with their copy-on-write copies),
 * preempting and resuming a request, and sched_commit.
 *
 * Copy order.  kvcache lets a block released while planning (a device block
 * swapped out, a host block swapped in) be handed out again at once, relying
 * on copies running in the order they were reported.  The engine runs every
 * swap-out, then every swap-in, then every copy-on-write copy; that is the
 * reported order as long as no swap-out is planned after a swap-in (a host
 * block freed by the swap-in could be its destination and be overwritten
 * before being read).  step.c therefore makes no preemption once a swap-in
 * is planned, and no request placed, resumed or preempted in a step is
 * preempted again in it, so copy sources are never written earlier.
 */
#include "sched/internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- buffers ------------------------------------------------------------------- */

static void *alloc_array(int n, size_t size)
{
    return malloc((size_t)(n > 0 ? n : 1) * size);
}

int plan_alloc(struct sched *s)
{
    s->cap_chunks = s->o.max_seqs;
    s->cap_out = s->cap_in = s->o.n_host_blocks;
    s->cap_cow = s->o.n_blocks;
    s->cap_preempted = s->o.max_seqs;
    s->chunks = alloc_array(s->cap_chunks, sizeof(*s->chunks));
    s->chunks_tmp = alloc_array(s->cap_chunks, sizeof(*s->chunks_tmp));
    s->swap_out = alloc_array(s->cap_out, sizeof(*s->swap_out));
    s->swap_in = alloc_array(s->cap_in, sizeof(*s->swap_in));
    s->cow = alloc_array(s->cap_cow, sizeof(*s->cow));
    s->preempted = alloc_array(s->cap_preempted, sizeof(*s->preempted));
    int nscratch = s->o.n_blocks + s->o.n_host_blocks;
    s->scratch_a = alloc_array(nscratch, sizeof(int32_t));
    s->scratch_b = alloc_array(nscratch, sizeof(int32_t));
    if (!s->chunks || !s->chunks_tmp || !s->swap_out || !s->swap_in || !s->cow || !s->preempted ||
        !s->scratch_a || !s->scratch_b || plan_reserve_order(s, 64) != 0)
        return -1;
    s->plan.chunks = s->chunks;
    s->plan.swap_out = s->swap_out;
    s->plan.swap_in = s->swap_in;
    s->plan.cow = s->cow;
    s->plan.preempted = s->preempted;
    s->committed = 1;
    return 0;
}

int plan_reserve_order(struct sched *s, int n)
{
    if (n <= s->cap_order)
        return 0;
    int cap = s->cap_order ? s->cap_order : 64;
    while (cap < n)
        cap *= 2;
    struct sreq **o = realloc(s->order, sizeof(*o) * (size_t)cap);
    if (!o)
        return -1;
    s->order = o;
    struct sreq **c = realloc(s->cands, sizeof(*c) * (size_t)cap);
    if (!c)
        return -1;
    s->cands = c;
    s->cap_order = cap;
    return 0;
}

void plan_free(struct sched *s)
{
    free(s->chunks);
    free(s->chunks_tmp);
    free(s->swap_out);
    free(s->swap_in);
    free(s->cow);
    free(s->preempted);
    free(s->scratch_a);
    free(s->scratch_b);
    free(s->order);
    free(s->cands);
}

void plan_reset(struct sched *s, double now)
{
    struct sched_plan *p = &s->plan;
    p->step++;
    p->now = now;
    p->n_chunks = p->n_tokens = p->n_swap_out = p->n_swap_in = p->n_cow = p->n_preempted = 0;
    s->committed = 0;
    s->swapped_in = 0;
    s->budget = s->o.max_batch_tokens;
    s->reserve = 0;
    s->promised = s->admitted_promise = 0;
    s->st.steps = p->step;
}

/* Decodes first, each group in placement order. */
void plan_order_chunks(struct sched *s)
{
    struct sched_plan *p = &s->plan;
    int k = 0;
    for (int pass = 1; pass >= 0; pass--)
        for (int i = 0; i < p->n_chunks; i++)
            if (s->chunks[i].decode == pass)
                s->chunks_tmp[k++] = s->chunks[i];
    memcpy(s->chunks, s->chunks_tmp, sizeof(*s->chunks) * (size_t)p->n_chunks);
}

/* --- chunks -------------------------------------------------------------------- */

int blocks_for(const struct sched *s, int n_tokens)
{
    return (n_tokens + s->o.block_size - 1) / s->o.block_size;
}

/* Existing blocks that positions n_computed .. end-1 will write and that
 * another table shares (each needs a copy into a fresh block). */
static int seq_shared(const struct sched *s, const struct sched_seq *q, int end)
{
    int last = blocks_for(s, end);
    if (last > q->table.n_blocks)
        last = q->table.n_blocks;
    int n = 0;
    for (int i = q->n_computed / s->o.block_size; i < last; i++)
        n += kv_block_refs(s->pool, q->table.blocks[i]) > 1;
    return n;
}

int seq_need(const struct sched *s, const struct sched_seq *q, int end)
{
    int grow = blocks_for(s, end) - q->table.n_blocks;
    return (grow > 0 ? grow : 0) + seq_shared(s, q, end);
}

int seq_prepare(struct sched *s, struct sched_seq *q, int end)
{
    int bs = s->o.block_size, last = blocks_for(s, end);
    if (last > q->table.n_blocks)
        last = q->table.n_blocks;
    for (int i = q->n_computed / bs; i < last; i++) {
        int32_t src, dst;
        int pos = i * bs > q->n_computed ? i * bs : q->n_computed;
        int rc = kv_table_cow(s->pool, &q->table, pos, &src, &dst);
        if (rc < 0)
            return -1;
        if (rc == 1) {
            assert(s->plan.n_cow < s->cap_cow);
            s->cow[s->plan.n_cow++] = (struct sched_copy){src, dst};
            s->st.cow_copies++;
        }
    }
    return kv_table_reserve(s->pool, &q->table, end);
}

void plan_chunk(struct sched *s, struct sreq *r, struct sched_seq *q, int len, int n_sample)
{
    struct sched_plan *p = &s->plan;
    assert(p->n_chunks < s->cap_chunks);
    int start = q->n_computed;
    int decode = len == 1 && start == q->n_tokens - 1 && start >= r->pub.n_prompt;
    s->chunks[p->n_chunks++] = (struct sched_chunk){.req = &r->pub,
                                                    .seq = q,
                                                    .start = start,
                                                    .len = len,
                                                    .n_sample = n_sample,
                                                    .decode = decode};
    p->n_tokens += len;
    r->touched = p->step;
}

/* --- preemption and resumption ------------------------------------------------------ */

static int sreq_computed(const struct sreq *r)
{
    int n = 0;
    for (int i = 0; i < r->pub.n; i++)
        if (seq_is_active(r, &r->pub.seqs[i]))
            n += r->pub.seqs[i].n_computed;
    return n;
}

/* Sequences of r with exactly one token to feed: this step's decodes. */
int sreq_decodes(const struct sreq *r)
{
    int n = 0;
    for (int i = 0; i < r->pub.n; i++) {
        const struct sched_seq *q = &r->pub.seqs[i];
        n += seq_is_active(r, q) && q->n_tokens - q->n_computed == 1;
    }
    return n;
}

enum sched_preempt preempt_mode(const struct sched *s, const struct sreq *r)
{
    int nb = sreq_table_blocks(r); /* each table is copied out on its own */
    if (s->o.preempt == SCHED_PREEMPT_RECOMPUTE || nb == 0 ||
        nb > kv_pool_host_free_blocks(s->pool))
        return SCHED_PREEMPT_RECOMPUTE;
    if (s->o.preempt == SCHED_PREEMPT_SWAP)
        return SCHED_PREEMPT_SWAP;
    return swap_cost_prefers_swap(&s->cost, nb, sreq_computed(r)) ? SCHED_PREEMPT_SWAP
                                                                  : SCHED_PREEMPT_RECOMPUTE;
}

static void swap_out_seq(struct sched *s, struct sched_seq *q)
{
    struct kv_table *t = &q->table;
    int n = t->n_blocks;
    if (n == 0 || t->on_host)
        return;
    int rc = kv_table_swap_out(s->pool, t, s->scratch_a, s->scratch_b);
    assert(rc == 0); /* preempt_mode checked the host pool's room */
    (void)rc;
    for (int i = 0; i < n; i++) {
        assert(s->plan.n_swap_out < s->cap_out);
        s->swap_out[s->plan.n_swap_out++] = (struct sched_copy){s->scratch_a[i], s->scratch_b[i]};
    }
    s->st.swap_out_blocks += n;
    s->st.swap_out_bytes += (uint64_t)n * s->o.block_bytes;
}

void preempt(struct sched *s, struct sreq *r, enum sched_why why)
{
    struct sched_plan *p = &s->plan;
    assert(r->pub.state == SCHED_RUNNING && r->touched != p->step && !s->swapped_in);
    enum sched_preempt mode = preempt_mode(s, r);
    int nb = r->dev_blocks;
    s->reserve -= sreq_decodes(r); /* a victim is never already placed */
    for (int i = 0; i < r->pub.n; i++) {
        struct sched_seq *q = &r->pub.seqs[i];
        if (!seq_is_active(r, q))
            continue;
        if (mode == SCHED_PREEMPT_SWAP) {
            swap_out_seq(s, q);
        } else {
            kv_table_release(s->pool, &q->table);
            q->n_computed = 0; /* the tokens stay: they are fed again */
        }
    }
    r->pub.state = mode == SCHED_PREEMPT_SWAP ? SCHED_SWAPPED : SCHED_PREEMPTED;
    r->pub.n_preemptions++;
    r->touched = p->step;
    r->evict_pending = 0;
    r->tn->preemptions++;
    s->st.preemptions[mode == SCHED_PREEMPT_SWAP ? 0 : 1][why]++;
    assert(p->n_preempted < s->cap_preempted);
    s->preempted[p->n_preempted++] = (struct sched_preemption){
        .id = r->pub.id, .req = &r->pub, .mode = mode, .why = why, .n_blocks = nb};
    sreq_account(s, r);
}

int resume_swapped(struct sched *s, struct sreq *r)
{
    for (int i = 0; i < r->pub.n; i++) {
        struct kv_table *t = &r->pub.seqs[i].table;
        if (!seq_is_active(r, &r->pub.seqs[i]) || !t->on_host)
            continue;
        int n = kv_table_swap_in(s->pool, t, s->scratch_a, s->scratch_b);
        if (n < 0)
            return -1;
        for (int k = 0; k < n; k++) {
            assert(s->plan.n_swap_in < s->cap_in);
            s->swap_in[s->plan.n_swap_in++] = (struct sched_copy){s->scratch_a[k], s->scratch_b[k]};
        }
        s->st.swap_in_blocks += n;
        s->st.swap_in_bytes += (uint64_t)n * s->o.block_bytes;
        s->swapped_in = 1;
    }
    r->pub.state = SCHED_RUNNING;
    r->touched = s->plan.step;
    sreq_account(s, r);
    return 0;
}

/* --- commit -------------------------------------------------------------------- */

/* After the prompt: every sequence shares the prompt's blocks. */
static void fork_seqs(struct sched *s, struct sreq *r)
{
    struct sched_seq *q0 = &r->pub.seqs[0];
    for (int i = 1; i < r->pub.n; i++) {
        struct sched_seq *q = &r->pub.seqs[i];
        if (kv_table_fork(s->pool, &q0->table, &q->table) != 0) {
            sched_finish(s, &r->pub, SCHED_END_ERROR);
            return;
        }
        q->n_computed = q0->n_computed;
    }
    r->forked = 1;
    sreq_account(s, r);
}

int sched_commit(struct sched *s, const struct sched_plan *p)
{
    if (p != &s->plan || s->committed)
        return -1;
    s->committed = 1;
    for (int i = 0; i < p->n_chunks; i++) {
        const struct sched_chunk *c = &p->chunks[i];
        struct sreq *r = sreq_of(c->req);
        struct sched_seq *q = c->seq;
        /* ended (cancelled) since the step: nothing to record */
        if (r->pub.state != SCHED_RUNNING || q->end != SCHED_END_NONE || q->n_computed != c->start)
            continue;
        q->n_computed += c->len;
        kv_table_commit(s->pool, &q->table, q->tokens, q->n_computed, r->pub.salt);
        if (c->decode) {
            r->tn->decode_tokens += c->len;
            s->st.decode_tokens += c->len;
        } else {
            r->tn->prefill_tokens += c->len;
            s->st.prefill_tokens += c->len;
        }
        if (c->n_sample > 1 && !r->forked)
            fork_seqs(s, r);
    }
    sched_check_now(s, "commit");
    return 0;
}

int sched_abandon(struct sched *s, const struct sched_plan *p)
{
    if (p != &s->plan || s->committed)
        return -1;
    s->committed = 1;
    sched_check_now(s, "abandon");
    return 0;
}
