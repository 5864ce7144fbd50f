/*
 * sched/step.c — the policy of one step: what runs, what waits, who is
 * preempted.
 *
 * Running requests are put in "keep order" (most important first: effective
 * priority, then least tenant service, then most computed tokens); waiting
 * ones in admission order (effective priority, resumed before new, arrival).
 * The step then walks the priority levels from the most important: at each
 * level, decodes of its running requests, then their prefill chunks, then
 * admissions at that level (tenants by least virtual token counter).  The
 * decode tokens of every running request are held back from the budget
 * until placed, so prefills and admissions never take a decode's place;
 * blocks, though, go to more important work first.  Whoever needs blocks
 * takes them from the end of the keep order, never from work already
 * placed, so the head of the order always makes progress; a waiting request
 * only preempts work of strictly lower priority.
 */
#include "sched/internal.h"

#include <limits.h>
#include <stdlib.h>

enum { ADMIT_OK, ADMIT_STOP, ADMIT_TENANT };

static int is_running(const struct sreq *r)
{
    return r->pub.state == SCHED_RUNNING;
}

static int untouched(const struct sched *s, const struct sreq *r)
{
    return r->touched != s->plan.step;
}

static int pending(const struct sched_seq *q)
{
    return q->n_tokens - q->n_computed;
}

/* Tokens prefills and admissions may still take. */
static int prefill_budget(const struct sched *s)
{
    int n = s->budget - s->reserve;
    return n > 0 ? n : 0;
}

/* --- orders ----------------------------------------------------------------------- */

static int sreq_sunk(const struct sreq *r)
{
    int n = 0;
    for (int i = 0; i < r->pub.n; i++)
        if (seq_is_active(r, &r->pub.seqs[i]))
            n += r->pub.seqs[i].n_computed;
    return n;
}

static int cmp_keep(const void *a, const void *b)
{
    const struct sreq *x = *(struct sreq *const *)a, *y = *(struct sreq *const *)b;
    if (x->eff != y->eff)
        return x->eff < y->eff ? -1 : 1;
    if (x->tn->vtc != y->tn->vtc)
        return x->tn->vtc < y->tn->vtc ? -1 : 1;
    if (x->sunk != y->sunk)
        return x->sunk > y->sunk ? -1 : 1;
    return x->seqno < y->seqno ? -1 : x->seqno > y->seqno;
}

static int cmp_admit(const void *a, const void *b)
{
    const struct sreq *x = *(struct sreq *const *)a, *y = *(struct sreq *const *)b;
    if (x->eff != y->eff)
        return x->eff < y->eff ? -1 : 1;
    if (x->klass != y->klass)
        return x->klass < y->klass ? -1 : 1;
    return x->seqno < y->seqno ? -1 : x->seqno > y->seqno;
}

/* Running requests in keep order into s->order; returns how many. */
static int order_running(struct sched *s)
{
    int n = 0;
    for (struct sreq *r = s->head; r; r = r->next) {
        if (!is_running(r))
            continue;
        r->eff = r->pub.eff_priority;
        r->sunk = sreq_sunk(r);
        s->order[n++] = r;
    }
    qsort(s->order, (size_t)n, sizeof(*s->order), cmp_keep);
    return n;
}

/* Waiting, swapped and recompute-preempted requests in admission order
 * into s->cands; returns how many. */
static int order_candidates(struct sched *s, double now)
{
    int n = 0;
    for (struct sreq *r = s->head; r; r = r->next) {
        enum sched_state st = r->pub.state;
        if ((st == SCHED_WAITING || st == SCHED_SWAPPED || st == SCHED_PREEMPTED) &&
            untouched(s, r)) {
            r->eff = sreq_eff_priority(s, r, now);
            r->klass = st == SCHED_WAITING;
            s->cands[n++] = r;
        }
    }
    qsort(s->cands, (size_t)n, sizeof(*s->cands), cmp_admit);
    return n;
}

/* --- victims ------------------------------------------------------------------------ */

/* The last request of the keep order after position i that can give up
 * blocks: running, not in this plan, holding device blocks, of tenant t
 * when t is given, of priority worse than prio.  None once a swap-in is
 * planned (see plan.c on copy order). */
static struct sreq *victim(struct sched *s, int i, int n, const struct stenant *t, int prio)
{
    if (s->swapped_in)
        return NULL;
    for (int j = n - 1; j > i; j--) {
        struct sreq *v = s->order[j];
        if (is_running(v) && untouched(s, v) && v->dev_blocks > 0 && (!t || v->tn == t) &&
            v->pub.eff_priority > prio)
            return v;
    }
    return NULL;
}

static int over_cap(const struct stenant *t, int need)
{
    return t->max_device_blocks && t->dev_blocks + need > t->max_device_blocks;
}

/* Blocks r may take now: the pool's, within its tenant's cap. */
static int blocks_allowed(const struct sched *s, const struct sreq *r)
{
    int n = kv_pool_free_blocks(s->pool);
    const struct stenant *t = r->tn;
    if (t->max_device_blocks && t->max_device_blocks - t->dev_blocks < n)
        n = t->max_device_blocks - t->dev_blocks;
    return n > 0 ? n : 0;
}

/* Preempts from the end of the keep order (after position i) until need
 * blocks fit the pool and r's tenant cap: its own tenant's requests when
 * the cap is what is short.  1 when they fit. */
static int make_room(struct sched *s, struct sreq *r, int i, int n, int need)
{
    while (blocks_allowed(s, r) < need) {
        int capped = over_cap(r->tn, need);
        struct sreq *v = victim(s, i, n, capped ? r->tn : NULL, INT_MIN);
        if (!v)
            return 0;
        preempt(s, v, capped ? SCHED_WHY_TENANT_CAP : SCHED_WHY_BLOCKS);
    }
    return 1;
}

/* --- evictions and caps ----------------------------------------------------------- */

static void run_evictions(struct sched *s)
{
    for (struct sreq *r = s->head; r; r = r->next)
        if (r->evict_pending && is_running(r))
            preempt(s, r, SCHED_WHY_EVICT);
}

/* A tenant over its device-block cap (it was lowered) gives up its own
 * least important requests. */
static void enforce_caps(struct sched *s, int n)
{
    for (int j = n - 1; j >= 0; j--) {
        struct sreq *r = s->order[j];
        if (is_running(r) && untouched(s, r) && over_cap(r->tn, 0))
            preempt(s, r, SCHED_WHY_TENANT_CAP);
    }
}

/* --- placing chunks -------------------------------------------------------------- */

/* Sequences that sample from a chunk ending at the last fed token: all of
 * an n > 1 request at the end of its shared prompt (they fork), else one. */
static int fan_out(const struct sreq *r)
{
    return !r->forked && r->pub.n > 1 ? r->pub.n : 1;
}

/* Tokens of a prefill chunk from q that fit in `allowed` more blocks. */
static int fit_len(const struct sched *s, const struct sched_seq *q, int len, int allowed)
{
    int bs = s->o.block_size;
    int room = (q->table.n_blocks + allowed) * bs - q->n_computed;
    if (len > room)
        len = room;
    while (len > 0 && seq_need(s, q, q->n_computed + len) > allowed)
        len -= len > bs ? bs : len;
    return len;
}

/* Places one decode token for every decoding sequence of r (all or none).
 * A running request (i >= 0) takes blocks from the end of the keep order
 * and, when none is left to take, preempts itself; a request admitted in
 * this step (i < 0) was admitted with room.  Decodes left unplaced give
 * their reserved tokens back. */
static void place_decodes(struct sched *s, struct sreq *r, int i, int n)
{
    int k = sreq_decodes(r), need = 0;
    if (k == 0)
        return;
    for (int j = 0; j < r->pub.n; j++) {
        struct sched_seq *q = &r->pub.seqs[j];
        if (seq_is_active(r, q) && pending(q) == 1)
            need += seq_need(s, q, q->n_tokens);
    }
    /* an admitted request's decodes come out of what prefills may take */
    int tokens = i >= 0 ? s->budget : prefill_budget(s);
    int fits = k <= tokens && blocks_allowed(s, r) >= need;
    if (!fits && k <= tokens && i >= 0)
        fits = make_room(s, r, i, n, need);
    if (!fits) {
        if (i >= 0 && k <= tokens && untouched(s, r) && !s->swapped_in)
            preempt(s, r, over_cap(r->tn, need) ? SCHED_WHY_TENANT_CAP : SCHED_WHY_BLOCKS);
        else if (i >= 0)
            s->reserve -= k;
        return;
    }
    if (i >= 0)
        s->reserve -= k;
    for (int j = 0; j < r->pub.n; j++) {
        struct sched_seq *q = &r->pub.seqs[j];
        if (!seq_is_active(r, q) || pending(q) != 1)
            continue;
        if (seq_prepare(s, q, q->n_tokens) != 0)
            break; /* only when memory for a table runs out; retried next step */
        plan_chunk(s, r, q, 1, fan_out(r));
        s->budget--;
    }
    sreq_account(s, r);
}

/* Places one prefill chunk of q, as long as the budget, max_chunk and the
 * blocks allow; a running request (i >= 0) first takes blocks from the end
 * of the keep order.  A chunk that cannot get a block waits (it keeps what
 * it has). */
static void place_prefill(struct sched *s, struct sreq *r, struct sched_seq *q, int i, int n)
{
    int len = pending(q);
    if (len > prefill_budget(s))
        len = prefill_budget(s);
    if (len > s->o.max_chunk)
        len = s->o.max_chunk;
    if (len <= 0)
        return;
    int need = seq_need(s, q, q->n_computed + len);
    if (i >= 0 && blocks_allowed(s, r) < need)
        make_room(s, r, i, n, need);
    int allowed = blocks_allowed(s, r);
    if (need > allowed)
        len = fit_len(s, q, len, allowed);
    if (len <= 0 || seq_prepare(s, q, q->n_computed + len) != 0) {
        sreq_account(s, r);
        return;
    }
    plan_chunk(s, r, q, len, q->n_computed + len == q->n_tokens ? fan_out(r) : 0);
    s->budget -= len;
    sreq_account(s, r);
}

static void place_prefills(struct sched *s, struct sreq *r, int i, int n)
{
    for (int j = 0; j < r->pub.n && prefill_budget(s) > 0 && is_running(r); j++) {
        struct sched_seq *q = &r->pub.seqs[j];
        if (seq_is_active(r, q) && pending(q) > 1)
            place_prefill(s, r, q, i, n);
    }
}

/* --- admission ----------------------------------------------------------------- */

/* Blocks r's prefilling sequences still need to reach their last token. */
static long promise(const struct sched *s, const struct sreq *r)
{
    long n = 0;
    for (int j = 0; j < r->pub.n; j++) {
        const struct sched_seq *q = &r->pub.seqs[j];
        if (seq_is_active(r, q) && !q->table.on_host && pending(q) > 1) {
            int g = blocks_for(s, q->n_tokens) - q->table.n_blocks;
            n += g > 0 ? g : 0;
        }
    }
    return n;
}

/* What running prefills were promised when a level's admissions start:
 * the keep order's (placed or not, nothing else changes them during the
 * admissions) and those admitted earlier in the step (s->admitted_promise). */
static void promised_at_level(struct sched *s, int n)
{
    s->promised = s->admitted_promise;
    for (int j = 0; j < n; j++)
        if (is_running(s->order[j]))
            s->promised += promise(s, s->order[j]);
}

/* Device blocks r needs to run to the end of its prompt (or its next token). */
static int admit_need(const struct sched *s, const struct sreq *r)
{
    int need = 0;
    for (int j = 0; j < r->pub.n; j++) {
        const struct sched_seq *q = &r->pub.seqs[j];
        if (!seq_is_active(r, q))
            continue;
        int full = blocks_for(s, q->n_tokens);
        need += r->pub.state == SCHED_SWAPPED
                    ? (full > q->table.n_blocks ? full : q->table.n_blocks)
                    : full - q->table.n_blocks;
    }
    return need;
}

/* Prefix-cache lookups for the sequences a waiting or recomputed request
 * feeds from scratch; returns the tokens looked up. */
static long match_prefix(struct sched *s, struct sreq *r)
{
    long looked = 0;
    for (int j = 0; j < r->pub.n; j++) {
        struct sched_seq *q = &r->pub.seqs[j];
        if (!seq_is_active(r, q) || q->table.n_blocks > 0)
            continue;
        q->n_computed = kv_table_match(s->pool, &q->table, q->tokens, q->n_tokens - 1, r->pub.salt);
        looked += q->n_tokens - 1;
    }
    sreq_account(s, r);
    return looked;
}

static void unmatch(struct sched *s, struct sreq *r)
{
    for (int j = 0; j < r->pub.n; j++) {
        kv_table_release(s->pool, &r->pub.seqs[j].table);
        r->pub.seqs[j].n_computed = 0;
    }
    sreq_account(s, r);
}

/* Preempts running work of priority worse than r's until need blocks fit
 * above what running prefills were promised; 1 when they do.  Nothing is
 * preempted unless all the candidates together would make enough room. */
static int room_by_priority(struct sched *s, struct sreq *r, int n, int need)
{
    if (need <= kv_pool_free_blocks(s->pool) - s->promised)
        return 1;
    if (s->swapped_in)
        return 0;
    long could = kv_pool_free_blocks(s->pool) - s->promised;
    for (int j = 0; j < n; j++) {
        struct sreq *v = s->order[j];
        if (is_running(v) && untouched(s, v) && v->pub.eff_priority > r->eff)
            could += v->dev_blocks + promise(s, v);
    }
    if (could < need)
        return 0;
    while (need > kv_pool_free_blocks(s->pool) - s->promised) {
        struct sreq *v = victim(s, -1, n, NULL, r->eff);
        if (!v)
            return 0;
        s->promised -= promise(s, v);
        preempt(s, v, SCHED_WHY_PRIORITY);
    }
    return 1;
}

static void admitted(struct sched *s, struct sreq *r, double now, long looked)
{
    r->pub.state = SCHED_RUNNING;
    r->pub.eff_priority = r->eff;
    r->touched = s->plan.step;
    s->st.prefix_lookup_tokens += looked;
    for (int j = 0; j < r->pub.n; j++)
        if (seq_is_active(r, &r->pub.seqs[j]))
            s->st.prefix_hit_tokens += r->pub.seqs[j].n_computed;
    if (!r->admitted) {
        r->admitted = 1;
        r->pub.n_cached = r->pub.seqs[0].n_computed;
        r->pub.first_admitted = now;
        r->wait_s = now - r->pub.arrival;
        r->tn->vtc += (double)(r->pub.n_prompt - r->pub.n_cached) / r->tn->weight;
    }
    sreq_account(s, r);
}

static int try_admit(struct sched *s, struct sreq *r, double now, int n)
{
    struct stenant *t = r->tn;
    if (prefill_budget(s) < (r->pub.state == SCHED_SWAPPED ? sreq_decodes(r) : 1) ||
        prefill_budget(s) <= 0 || s->running_seqs + r->n_live > s->o.max_seqs)
        return ADMIT_STOP;
    if (t->max_running_seqs && t->running_seqs + r->n_live > t->max_running_seqs)
        return ADMIT_TENANT;
    int swapped = r->pub.state == SCHED_SWAPPED;
    long looked = swapped ? 0 : match_prefix(s, r);
    int need = admit_need(s, r);
    if (over_cap(t, need)) { /* matched blocks are already in dev_blocks */
        if (!swapped)
            unmatch(s, r);
        return ADMIT_TENANT;
    }
    if (!room_by_priority(s, r, n, need)) {
        if (!swapped)
            unmatch(s, r);
        return ADMIT_STOP;
    }
    if (swapped && resume_swapped(s, r) != 0) {
        sched_finish(s, &r->pub, SCHED_END_ERROR); /* cannot happen: room was checked */
        return ADMIT_OK;
    }
    admitted(s, r, now, looked);
    place_decodes(s, r, -1, 0);
    place_prefills(s, r, -1, 0);
    long p = promise(s, r);
    s->promised += p;
    s->admitted_promise += p;
    return ADMIT_OK;
}

/* The group's candidate of tenant t at or after its cursor, or -1. */
static int tenant_next(struct sched *s, struct stenant *t, int g1)
{
    while (t->cursor < g1 && s->cands[t->cursor]->tn != t)
        t->cursor++;
    return t->cursor < g1 ? t->cursor : -1;
}

/* One (priority, class) group: tenants by least counter, FCFS within one.
 * Returns 0 to go on, -1 to stop admitting for this step. */
static int admit_group(struct sched *s, double now, int g0, int g1, int n)
{
    for (int i = 0; i < s->n_tenants; i++)
        s->tenants[i]->cursor = g0;
    for (;;) {
        struct stenant *best = NULL;
        int bi = -1;
        for (int i = 0; i < s->n_tenants; i++) {
            struct stenant *t = s->tenants[i];
            int c = t->blocked_step == s->plan.step ? -1 : tenant_next(s, t, g1);
            if (c >= 0 && (!best || t->vtc < best->vtc || (t->vtc == best->vtc && c < bi))) {
                best = t;
                bi = c;
            }
        }
        if (!best)
            return 0;
        int rc = try_admit(s, s->cands[bi], now, n);
        if (rc == ADMIT_STOP)
            return -1;
        if (rc == ADMIT_TENANT)
            best->blocked_step = s->plan.step;
        best->cursor = bi + 1;
    }
}

/* Candidates [c0, c1) of one priority level, group by group. */
static int admit_level(struct sched *s, double now, int c0, int c1, int n)
{
    promised_at_level(s, n);
    for (int g0 = c0, g1; g0 < c1; g0 = g1) {
        for (g1 = g0 + 1; g1 < c1 && s->cands[g1]->klass == s->cands[g0]->klass; g1++)
            ;
        if (admit_group(s, now, g0, g1, n) != 0)
            return -1;
    }
    return 0;
}

/* --- the step ------------------------------------------------------------------- */

/* After the most important level with work: what is left of the budget
 * for less important levels, so that they lengthen the step by bg_slack
 * of its cost at most (see Policy 4). */
static void cap_background(struct sched *s)
{
    if (s->o.bg_slack <= 0 || s->step_b <= 0)
        return;
    int placed = s->o.max_batch_tokens - s->budget;
    double extra = s->o.bg_slack * (s->step_a + s->step_b * placed) / s->step_b;
    /* At least one token: less important work slows down, never stops
     * (admissions included), whatever the cost model says. */
    if (extra < s->budget)
        s->budget = extra > 1 ? (int)extra : 1;
}

/* Whether the chunks placed from index `from` on carry the prompt of a
 * request that has not produced its first token yet: such a step leaves
 * less important levels out, so that the first token of more important
 * work costs one small step, not a step sized by the background load. */
static int first_token_work(const struct sched *s, int from)
{
    for (int k = from; k < s->plan.n_chunks; k++) {
        const struct sched_chunk *c = &s->plan.chunks[k];
        if (!c->decode && c->seq->n_tokens == c->req->n_prompt)
            return 1;
    }
    return 0;
}

const struct sched_plan *sched_step(struct sched *s, double now)
{
    plan_reset(s, now);
    run_evictions(s);
    int n = order_running(s);
    enforce_caps(s, n);
    int nc = order_candidates(s, now);
    s->reserve = 0;
    for (int i = 0; i < n; i++)
        if (is_running(s->order[i]))
            s->reserve += sreq_decodes(s->order[i]);
    int admitting = 1, capped = 0;
    for (int i = 0, c = 0; i < n || c < nc;) {
        int level_first = s->plan.n_chunks;
        int p = i < n ? s->order[i]->eff : INT_MAX;
        if (c < nc && s->cands[c]->eff < p)
            p = s->cands[c]->eff;
        int i1 = i, c1 = c;
        while (i1 < n && s->order[i1]->eff == p)
            i1++;
        while (c1 < nc && s->cands[c1]->eff == p)
            c1++;
        for (int k = i; k < i1; k++)
            if (is_running(s->order[k]))
                place_decodes(s, s->order[k], k, n);
        for (int k = i; k < i1; k++)
            if (is_running(s->order[k]) && prefill_budget(s) > 0)
                place_prefills(s, s->order[k], k, n);
        if (admitting && admit_level(s, now, c, c1, n) != 0)
            admitting = 0;
        i = i1;
        c = c1;
        if (!s->o.share_first && first_token_work(s, level_first))
            break;
        if (!capped && s->plan.n_chunks > 0) {
            capped = 1;
            cap_background(s);
        }
    }
    plan_order_chunks(s);
    sched_check_now(s, "step");
    return &s->plan;
}
