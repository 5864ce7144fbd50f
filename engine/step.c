/*
 * engine/step.c — one step of the loop: plan, copy, forward, sample, stop.
 *
 * The scheduler's plan is executed in the order kvcache requires: swap-outs
 * (their device blocks may be handed out again at once), swap-ins, then
 * copy-on-write copies, all before the forward pass that may write those
 * blocks.  The flat batch is laid out in plan order (decodes first, then
 * prefill chunks).  After the forward pass the plan is committed, then every
 * chunk whose last token is the newest one samples: once per sequence, and
 * for the last prompt chunk of an n > 1 request once for each of its n
 * sequences from the same logits row.  A failed forward pass or copy ends
 * the requests it carried with an error before the plan is committed, so
 * no block computed by it enters the prefix cache; the others go on.
 */
#include "engine/eng_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Splits a copy list into the two id arrays the swap calls take. */
static void step_split(struct eng *e, const struct sched_copy *c, int n)
{
    for (int i = 0; i < n; i++) {
        e->copy_a[i] = c[i].src;
        e->copy_b[i] = c[i].dst;
    }
}

static int step_copies(struct eng *e, const struct sched_plan *p, char *err, size_t errlen)
{
    step_split(e, p->swap_out, p->n_swap_out);
    if (swap_out(e->swap, e->kv, e->copy_a, e->copy_b, p->n_swap_out, err, errlen))
        return -1;
    step_split(e, p->swap_in, p->n_swap_in);
    if (swap_in(e->swap, e->kv, e->copy_a, e->copy_b, p->n_swap_in, err, errlen))
        return -1;
    if (p->n_cow == 0)
        return 0;
    step_split(e, p->cow, p->n_cow);
    if (e->be->ops->copy_blocks(e->be, e->kv, &e->geom, e->copy_a, e->copy_b, p->n_cow)) {
        snprintf(err, errlen, "copy-on-write: %s", be_error(e->be));
        return -1;
    }
    return 0;
}

/* Ends every request the plan touched with an error (copies or forward
 * failed), then commits the plan: the scheduler records nothing for ended
 * requests, so no block of the failed pass enters the prefix cache. */
static void step_fail(struct eng *e, const struct sched_plan *p, const char *why)
{
    snprintf(e->last_error, sizeof(e->last_error), "step %ld: %s", p->step, why);
    for (int i = 0; i < p->n_chunks; i++) {
        struct sched_req *r = p->chunks[i].req;
        if (r->state != SCHED_FINISHED && r->state != SCHED_ABORTED)
            sched_finish(e->s, r, SCHED_END_ERROR);
    }
    /* Requests swapped out by this plan lost their K/V if the copy failed. */
    for (int i = 0; i < p->n_preempted; i++) {
        struct sched_req *r = p->preempted[i].req;
        if (p->preempted[i].mode == SCHED_PREEMPT_SWAP && r->state != SCHED_FINISHED &&
            r->state != SCHED_ABORTED)
            sched_finish(e->s, r, SCHED_END_ERROR);
    }
    sched_commit(e->s, p);
}

static int step_grow(struct eng *e, int n)
{
    if (n <= e->cap_items)
        return 0;
    int cap = e->cap_items ? e->cap_items : 64;
    while (cap < n)
        cap *= 2;
    struct eng_step_item *it = realloc(e->items, sizeof(*it) * (size_t)cap);
    if (!it)
        return -1;
    e->items = it;
    int *rows = realloc(e->rows, sizeof(*rows) * (size_t)cap);
    if (!rows)
        return -1;
    e->rows = rows;
    e->cap_items = cap;
    return 0;
}

/* Lays the plan's chunks out as one flat batch; rows[i] gets chunk i's logits row. */
static int step_batch(struct eng *e, const struct sched_plan *p, struct be_batch *bt)
{
    if (step_grow(e, p->n_chunks))
        return -1;
    eng_batch_begin(&e->batch);
    for (int i = 0; i < p->n_chunks; i++) {
        const struct sched_chunk *c = &p->chunks[i];
        int row = eng_batch_add(&e->batch, &c->seq->table, e->o.block_size, c->seq->tokens,
                                c->start, c->len, c->n_sample > 0);
        if (row == -2)
            return -1;
        e->rows[i] = row;
        struct eng_req *r = c->req->user;
        if (r->eu.step_first == 0) {
            r->eu.step_first = p->step;
            r->eu.t_sched = eng_now();
        }
        e->items[i] = (struct eng_step_item){.req_id = c->req->id,
                                             .seq = c->seq->index,
                                             .start = c->start,
                                             .n = c->len,
                                             .prefill = !c->decode,
                                             .sampled = c->n_sample > 0};
    }
    eng_batch_finish(&e->batch, bt);
    return eng_batch_logits(&e->batch, model_config(e->m)->n_vocab);
}

static int step_is_stop(const struct eng_req *r, int32_t id)
{
    for (int i = 0; i < r->n_stop_ids; i++)
        if (r->stop_ids[i] == id)
            return 1;
    return 0;
}

/* Samples one token for sequence q from logits (scratch), appends and emits
 * it, and ends the sequence when it stops. */
static void step_sample(struct eng *e, struct sched_seq *q, float *logits)
{
    struct eng_req *r = q->req->user;
    const struct model_config *mc = model_config(e->m);
    struct eng_token tk = {.seq = q->index, .has_lp = r->smp.n_logprobs > 0};
    tk.id = smp_sample(r->samplers[q->index], logits, mc->n_vocab, tk.has_lp ? &tk.lp : NULL);
    tk.t = eng_now();
    smp_seq_accept(r->samplers[q->index], tk.id);
    if (sched_append(e->s, q, tk.id)) {
        sched_finish_seq(e->s, q, SCHED_END_ERROR);
        return;
    }
    int gen = q->n_tokens - q->req->n_prompt;
    enum sched_end end = SCHED_END_NONE;
    if ((!r->ignore_eos && tok_is_eog(model_tok(e->m), tk.id)) || step_is_stop(r, tk.id))
        end = SCHED_END_STOP;
    else if (gen >= r->max_tokens || q->n_tokens >= mc->n_ctx_train)
        end = SCHED_END_LENGTH;
    tk.finish = end == SCHED_END_STOP     ? ENG_FINISH_STOP
                : end == SCHED_END_LENGTH ? ENG_FINISH_LENGTH
                                          : ENG_FINISH_NONE;
    e->tokens_generated++;
    if (eng_req_emit(r, &tk))
        end = SCHED_END_ERROR;
    if (end != SCHED_END_NONE)
        sched_finish_seq(e->s, q, end);
}

static void step_sample_all(struct eng *e, const struct sched_plan *p)
{
    int n_vocab = model_config(e->m)->n_vocab;
    for (int i = 0; i < p->n_chunks; i++) {
        const struct sched_chunk *c = &p->chunks[i];
        if (c->n_sample <= 0 || e->rows[i] < 0)
            continue;
        float *row = e->batch.logits + (size_t)e->rows[i] * n_vocab;
        for (int k = 0; k < c->n_sample; k++) {
            /* The sampler scribbles on its logits: each but the last sample reads a copy. */
            float *l = row;
            if (k + 1 < c->n_sample) {
                memcpy(e->row, row, sizeof(float) * (size_t)n_vocab);
                l = e->row;
            }
            step_sample(e, &c->seq[k], l);
        }
    }
}

static void step_count_preemptions(const struct sched_plan *p)
{
    for (int i = 0; i < p->n_preempted; i++) {
        struct eng_req *r = p->preempted[i].req->user;
        if (p->preempted[i].mode == SCHED_PREEMPT_SWAP)
            r->eu.preempt_swap++;
        else
            r->eu.preempt_recompute++;
    }
}

/* Fits seconds = a + b * tokens over recent steps (decayed least squares)
 * and gives it to the scheduler once the steps varied enough in size. */
static void step_fit(struct eng *e, int tokens, double seconds)
{
    double *f = e->fit, x = tokens, y = seconds;
    for (int i = 0; i < 5; i++)
        f[i] *= 0.98;
    f[0] += 1;
    f[1] += x;
    f[2] += y;
    f[3] += x * x;
    f[4] += x * y;
    if (++e->fit_n < 16)
        return;
    double mx = f[1] / f[0], my = f[2] / f[0], var = f[3] / f[0] - mx * mx;
    if (var < 4)
        return;
    double b = (f[4] / f[0] - mx * my) / var;
    if (b > 0)
        sched_set_step_cost(e->s, my - b * mx, b);
}

/* Feeds the prefill rate of the cost model from steps that are mostly
 * prefill, and the step cost fit from every step. */
static void step_observe(struct eng *e, const struct sched_plan *p, double seconds)
{
    step_fit(e, p->n_tokens, seconds);
    int prefill = 0;
    for (int i = 0; i < p->n_chunks; i++)
        prefill += p->chunks[i].decode ? 0 : p->chunks[i].len;
    if (prefill * 2 < p->n_tokens || prefill < 16)
        return;
    swap_cost_observe_prefill(&e->cost, p->n_tokens, seconds);
    sched_set_rates(e->s, 0, e->cost.prefill_tok_s);
}

static void step_report(struct eng *e, const struct sched_plan *p, double t0)
{
    if (!e->o.on_step)
        return;
    struct eng_step_info info = {.step = p->step,
                                 .n_items = p->n_chunks,
                                 .items = e->items,
                                 .n_swap_out = p->n_swap_out,
                                 .n_swap_in = p->n_swap_in,
                                 .n_cow = p->n_cow,
                                 .n_preempted = p->n_preempted,
                                 .seconds = eng_now() - t0};
    e->o.on_step(e->o.on_step_arg, &info);
}

/* Asked between layers of the forward pass: gives the pass up when a
 * request more important than at least interrupt_tokens of the plan's
 * tokens was submitted since the plan was made.  The step is planned again
 * at once with it (and, by the scheduler's first-token rule, without the
 * less important work), so its first token waits a layer of the big step
 * rather than all of it. */
static int step_stop(void *arg)
{
    const struct eng *e = arg;
    if (e->o.interrupt_every > 0 && e->step % e->o.interrupt_every == 0)
        return 1;
    int u = atomic_load_explicit(&e->urgent, memory_order_relaxed);
    if (u == INT_MAX)
        return 0;
    int n = 0;
    if (e->o.interrupt_tokens <= 0)
        return 0;
    for (int i = 0; i < e->plan->n_chunks; i++)
        if (e->plan->chunks[i].req->eff_priority > u)
            n += e->plan->chunks[i].len;
    return n >= e->o.interrupt_tokens;
}

int eng_step(struct eng *e)
{
    double t0 = eng_now();
    const struct sched_plan *p = sched_step(e->s, t0);
    e->step = p->step;
    step_count_preemptions(p);
    int work = p->n_chunks > 0 || p->n_swap_out > 0 || p->n_swap_in > 0 || p->n_cow > 0 ||
               p->n_preempted > 0;
    char err[256];
    if (step_copies(e, p, err, sizeof(err))) {
        step_fail(e, p, err);
        return 1;
    }
    struct be_batch bt;
    if (p->n_chunks > 0 && step_batch(e, p, &bt)) {
        step_fail(e, p, "out of memory for the batch");
        return 1;
    }
    double tf = eng_now();
    if (p->n_chunks > 0 && e->o.fail_step == p->step) {
        step_fail(e, p, "injected failure (fail_step)");
        return 1;
    }
    e->plan = p;
    int rc = p->n_chunks == 0
                 ? 0
                 : model_forward_until(
                       e->m, e->kv, &e->geom, &bt, e->batch.logits,
                       e->o.interrupt_tokens > 0 || e->o.interrupt_every > 0 ? step_stop : NULL, e,
                       err, sizeof(err));
    if (rc < 0) {
        step_fail(e, p, err);
        return 1;
    }
    if (rc > 0) {
        /* Nothing of the pass is used: the tokens are planned again. */
        sched_abandon(e->s, p);
        e->steps_interrupted++;
        return 1;
    }
    if (p->n_chunks > 0)
        step_observe(e, p, eng_now() - tf);
    sched_commit(e->s, p);
    if (p->n_chunks > 0)
        step_sample_all(e, p);
    step_report(e, p, t0);
    return work;
}
