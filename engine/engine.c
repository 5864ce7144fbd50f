/*
 * engine/engine.c — the serving engine's thread and its thread-safe API.
 *
 * Other threads never touch the scheduler: eng_submit, eng_cancel,
 * eng_evict*, eng_drain and eng_tenant_set append an operation to one
 * locked queue and signal the engine thread, which applies them in order at
 * the top of its next iteration, runs one step, hands finished requests
 * back, wakes their clients and publishes a snapshot.  With nothing to do
 * it sleeps on the condition variable.  One ordered queue (rather than one
 * per kind) keeps "drain off, then submit" and "submit, then cancel" right.
 */
#include "engine/eng_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

const char *eng_finish_name(enum eng_finish f)
{
    static const char *names[] = {"none", "stop", "length", "aborted", "error"};
    return f >= 0 && f <= ENG_FINISH_ERROR ? names[f] : "?";
}

const char *eng_strerror(int code)
{
    switch (code) {
    case ENG_OK:
        return "ok";
    case ENG_EINVAL:
        return "invalid request";
    case ENG_EDRAIN:
        return "draining: not accepting new requests";
    case ENG_EEXIST:
        return "a live request has this id";
    case ENG_ENOMEM:
        return "out of memory";
    case ENG_ENOENT:
        return "no such live request";
    case ENG_ETOOBIG:
        return "the request can never fit the KV pool";
    case ENG_ESTOPPED:
        return "the engine is shutting down";
    default:
        return "unknown error";
    }
}

/* --------------------------------------------------------------- tenants -- */

int64_t eng_tenant_id(struct eng *e, const char *name, int create)
{
    for (int i = 0; i < e->n_tenants; i++)
        if (strcmp(e->tenants[i].name, name) == 0)
            return e->tenants[i].id;
    if (!create)
        return -1;
    if (e->n_tenants == e->cap_tenants) {
        int cap = e->cap_tenants ? 2 * e->cap_tenants : 8;
        struct eng_tname *t = realloc(e->tenants, sizeof(*t) * (size_t)cap);
        if (!t)
            return -1;
        e->tenants = t;
        e->cap_tenants = cap;
    }
    char *dup = strdup(name);
    if (!dup)
        return -1;
    e->tenants[e->n_tenants] = (struct eng_tname){.name = dup, .id = e->n_tenants, .weight = 1};
    return e->n_tenants++;
}

const char *eng_tenant_name(const struct eng *e, int64_t id)
{
    return id >= 0 && id < e->n_tenants ? e->tenants[id].name : "";
}

/* ------------------------------------------------------- the op queue -- */

/* Appends an operation; the caller holds e->mu.  -1 when memory is short. */
static int eng_push_locked(struct eng *e, const struct eng_op *op)
{
    if (e->n_ops == e->cap_ops) {
        int cap = e->cap_ops ? 2 * e->cap_ops : 16;
        struct eng_op *o = realloc(e->ops, sizeof(*o) * (size_t)cap);
        if (!o)
            return -1;
        e->ops = o;
        e->cap_ops = cap;
    }
    e->ops[e->n_ops++] = *op;
    e->idle = 0;
    pthread_cond_signal(&e->cv);
    return 0;
}

static struct eng_req *eng_live_find_locked(struct eng *e, uint64_t id)
{
    for (struct eng_req *r = e->live; r; r = r->live_next)
        if (r->id == id)
            return r;
    return NULL;
}

static void eng_live_remove(struct eng *e, struct eng_req *r)
{
    pthread_mutex_lock(&e->mu);
    for (struct eng_req **pp = &e->live; *pp; pp = &(*pp)->live_next)
        if (*pp == r) {
            *pp = r->live_next;
            e->n_live--;
            break;
        }
    pthread_mutex_unlock(&e->mu);
}

void eng_cancel_locked_req(struct eng_req *r)
{
    struct eng *e = r->eng;
    pthread_mutex_lock(&e->mu);
    eng_push_locked(e, &(struct eng_op){.kind = OP_CANCEL, .id = r->id});
    pthread_mutex_unlock(&e->mu);
}

/* --------------------------------------------------------- public API -- */

/* Conservative check that a request could ever fit: its longest sequence
 * alone in the device pool. */
static int eng_fits(const struct eng *e, const struct eng_request *rq)
{
    long bs = e->o.block_size;
    long need = (rq->n_prompt + (long)rq->max_tokens + bs - 1) / bs;
    return need <= e->o.n_blocks;
}

int eng_submit(struct eng *e, const struct eng_request *rq, struct eng_req **out)
{
    *out = NULL;
    int rc = eng_req_validate(rq);
    if (rc)
        return rc;
    if (rq->max_tokens < 1)
        return ENG_EINVAL;
    int n_vocab = model_config(e->m)->n_vocab;
    for (int i = 0; i < rq->n_prompt; i++)
        if (rq->prompt[i] < 0 || rq->prompt[i] >= n_vocab)
            return ENG_EINVAL;
    if (!eng_fits(e, rq))
        return ENG_ETOOBIG;
    struct eng_req *r = eng_req_new(rq);
    if (!r)
        return ENG_ENOMEM;
    r->eng = e;
    pthread_mutex_lock(&e->mu);
    if (e->stop)
        rc = ENG_ESTOPPED;
    else if (e->draining)
        rc = ENG_EDRAIN;
    else if (eng_live_find_locked(e, rq->id))
        rc = ENG_EEXIST;
    else if (eng_push_locked(e, &(struct eng_op){.kind = OP_SUBMIT, .req = r}))
        rc = ENG_ENOMEM;
    if (rc == ENG_OK) {
        if (rq->priority < atomic_load(&e->urgent))
            atomic_store(&e->urgent, rq->priority);
        r->live_next = e->live;
        e->live = r;
        e->n_live++;
    }
    pthread_mutex_unlock(&e->mu);
    if (rc) {
        eng_req_free(r);
        return rc;
    }
    *out = r;
    return ENG_OK;
}

/* Queues an op that names a live request (or tenant); ENG_ENOENT when none. */
static int eng_push_named(struct eng *e, struct eng_op *op)
{
    int rc = ENG_ENOENT;
    pthread_mutex_lock(&e->mu);
    if (op->kind == OP_EVICT_TENANT) {
        for (struct eng_req *r = e->live; r && rc; r = r->live_next)
            if (strcmp(r->tenant, op->tenant) == 0)
                rc = ENG_OK;
    } else if (eng_live_find_locked(e, op->id)) {
        rc = ENG_OK;
    }
    if (rc == ENG_OK && eng_push_locked(e, op))
        rc = ENG_ENOMEM;
    pthread_mutex_unlock(&e->mu);
    return rc;
}

int eng_cancel(struct eng *e, uint64_t id)
{
    return eng_push_named(e, &(struct eng_op){.kind = OP_CANCEL, .id = id});
}

int eng_evict(struct eng *e, uint64_t id, int abort)
{
    return eng_push_named(e, &(struct eng_op){.kind = OP_EVICT, .id = id, .flag = !!abort});
}

int eng_evict_tenant(struct eng *e, const char *tenant, int abort)
{
    struct eng_op op = {.kind = OP_EVICT_TENANT, .flag = !!abort, .tenant = strdup(tenant)};
    if (!op.tenant)
        return ENG_ENOMEM;
    int rc = eng_push_named(e, &op);
    if (rc)
        free(op.tenant);
    return rc;
}

void eng_drain(struct eng *e, int on)
{
    pthread_mutex_lock(&e->mu);
    e->draining = !!on;
    eng_push_locked(e, &(struct eng_op){.kind = OP_DRAIN, .flag = !!on});
    pthread_mutex_unlock(&e->mu);
}

int eng_tenant_set(struct eng *e, const char *name, const struct eng_tenant *t)
{
    if (!name || !t || !(t->weight > 0) || t->max_running < 0 || t->max_kv_blocks < 0)
        return ENG_EINVAL;
    struct eng_op op = {.kind = OP_TENANT, .tenant = strdup(name), .tp = *t};
    if (!op.tenant)
        return ENG_ENOMEM;
    pthread_mutex_lock(&e->mu);
    int rc = eng_push_locked(e, &op) ? ENG_ENOMEM : ENG_OK;
    pthread_mutex_unlock(&e->mu);
    if (rc)
        free(op.tenant);
    return rc;
}

int eng_wait_idle(struct eng *e, double timeout_s)
{
    struct timespec dl = eng_deadline(timeout_s);
    pthread_mutex_lock(&e->mu);
    int rc = 0;
    while (!(e->idle && e->n_ops == 0 && e->n_live == 0) && rc == 0)
        rc = timeout_s < 0 ? pthread_cond_wait(&e->idle_cv, &e->mu)
                           : pthread_cond_timedwait(&e->idle_cv, &e->mu, &dl);
    int idle = e->idle && e->n_ops == 0 && e->n_live == 0;
    pthread_mutex_unlock(&e->mu);
    return idle ? 0 : -1;
}

struct eng_snapshot *eng_snapshot(struct eng *e)
{
    pthread_mutex_lock(&e->mu);
    struct eng_snapshot *s = e->snap ? eng_snapshot_copy(e->snap) : NULL;
    pthread_mutex_unlock(&e->mu);
    return s;
}

/* ------------------------------------------------- the engine thread -- */

/* Hands a request that the scheduler never took (or no longer holds) back
 * to its client with every unfinished sequence ended f. */
static void eng_req_finish_all(struct eng *e, struct eng_req *r, enum eng_finish f)
{
    for (int i = 0; i < r->n; i++)
        eng_req_set_finish(r, i, f);
    for (int i = 0; r->samplers && i < r->n; i++)
        smp_seq_free(r->samplers[i]);
    free(r->samplers);
    r->samplers = NULL;
    eng_live_remove(e, r);
    eng_req_engine_drop(r);
}

/* Samplers of every sequence: seed + i, prompt recorded for the penalties. */
static int eng_req_samplers(struct eng_req *r)
{
    r->samplers = calloc((size_t)r->n, sizeof(*r->samplers));
    if (!r->samplers)
        return -1;
    for (int i = 0; i < r->n; i++) {
        struct smp_params sp = r->smp;
        sp.seed += (uint64_t)i;
        if (!(r->samplers[i] = smp_seq_new(&sp)))
            return -1;
        for (int p = 0; p < r->n_prompt; p++)
            smp_seq_prompt(r->samplers[i], r->prompt[p]);
    }
    return 0;
}

/* Takes a submission into the scheduler, or hands it back failed. */
static void eng_intake(struct eng *e, struct eng_req *r)
{
    const char *salt = r->cache_salt ? r->cache_salt : r->tenant;
    r->tenant_id = eng_tenant_id(e, r->tenant, 1);
    r->eu.step_admitted = e->step + 1;
    struct sched_params sp = {.id = r->id,
                              .tenant = r->tenant_id,
                              .priority = r->priority,
                              .prompt = r->prompt,
                              .n_prompt = r->n_prompt,
                              .max_tokens = r->max_tokens,
                              .n = r->n,
                              .salt = kv_salt(salt, strlen(salt)),
                              .arrival = r->usage.t_submit,
                              .user = r};
    int rc = -1;
    if (r->tenant_id >= 0 && eng_req_samplers(r) == 0)
        rc = sched_submit(e->s, &sp, &r->sr);
    if (rc) {
        snprintf(e->last_error, sizeof(e->last_error), "request %llu refused: %s",
                 (unsigned long long)r->id, rc < 0 ? sched_strerror(rc) : "out of memory");
        r->sr = NULL;
        eng_req_finish_all(e, r, ENG_FINISH_ERROR);
    }
}

static void eng_apply(struct eng *e, struct eng_op *op)
{
    int64_t tid;
    switch (op->kind) {
    case OP_SUBMIT:
        eng_intake(e, op->req);
        break;
    case OP_CANCEL:
        sched_cancel(e->s, op->id); /* -1: it ended meanwhile, nothing to do */
        break;
    case OP_EVICT:
        sched_evict(e->s, op->id, op->flag);
        break;
    case OP_EVICT_TENANT:
        if ((tid = eng_tenant_id(e, op->tenant, 0)) >= 0)
            sched_evict_tenant(e->s, tid, op->flag);
        break;
    case OP_DRAIN:
        sched_drain(e->s, op->flag);
        break;
    case OP_TENANT:
        if ((tid = eng_tenant_id(e, op->tenant, 1)) >= 0 &&
            sched_tenant_set(e->s, tid, op->tp.weight, op->tp.max_running, op->tp.max_kv_blocks) ==
                0)
            e->tenants[tid].weight = op->tp.weight;
        break;
    }
    free(op->tenant);
}

/* Wakes every client that got something this step and publishes the
 * counters its handle shows. */
static void eng_flush_all(struct eng *e)
{
    for (const struct sched_req *sr = sched_first(e->s); sr; sr = sched_next(e->s, sr)) {
        struct eng_req *r = sr->user;
        r->eu.cached_tokens = sr->n_cached;
        eng_req_update_usage(r, &r->eu);
        eng_req_flush(r);
    }
}

void eng_collect_done(struct eng *e)
{
    static const enum eng_finish map[] = {
        [SCHED_END_NONE] = ENG_FINISH_ABORTED,    [SCHED_END_STOP] = ENG_FINISH_STOP,
        [SCHED_END_LENGTH] = ENG_FINISH_LENGTH,   [SCHED_END_CANCELLED] = ENG_FINISH_ABORTED,
        [SCHED_END_EVICTED] = ENG_FINISH_ABORTED, [SCHED_END_ERROR] = ENG_FINISH_ERROR};
    struct sched_req *sr;
    while ((sr = sched_pop_done(e->s))) {
        struct eng_req *r = sr->user;
        for (int i = 0; i < r->n; i++) {
            enum sched_end end = sr->seqs[i].end != SCHED_END_NONE ? sr->seqs[i].end : sr->end;
            eng_req_set_finish(r, i, map[end]);
        }
        r->eu.cached_tokens = sr->n_cached;
        eng_req_update_usage(r, &r->eu);
        r->sr = NULL;
        sched_release(e->s, sr);
        e->requests_finished++;
        eng_req_finish_all(e, r, ENG_FINISH_ABORTED);
    }
}

/* Publishes the state after a step; the old snapshot goes. */
static void eng_publish(struct eng *e)
{
    struct eng_snapshot *s = eng_snapshot_build(e);
    pthread_mutex_lock(&e->mu);
    if (s) {
        eng_snapshot_free(e->snap);
        e->snap = s;
    }
    pthread_mutex_unlock(&e->mu);
}

/* Waits for work; returns the number of operations taken, -1 on stop. */
static int eng_wait_work(struct eng *e, int stalled)
{
    pthread_mutex_lock(&e->mu);
    while (!e->stop && e->n_ops == 0 && sched_n_live(e->s) == 0) {
        if (!e->idle && e->n_live == 0) {
            e->idle = 1;
            pthread_cond_broadcast(&e->idle_cv);
        }
        pthread_cond_wait(&e->cv, &e->mu);
    }
    if (!e->stop && e->n_ops == 0 && stalled) {
        /* Work exists but nothing could run (everything waits on time,
         * e.g. aging): look again shortly rather than spin. */
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += 5 * 1000 * 1000;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&e->cv, &e->mu, &dl);
    }
    int n = -1;
    if (!e->stop) {
        atomic_store(&e->urgent, INT_MAX);
        struct eng_op *t = e->work;
        int cap = e->cap_work;
        e->work = e->ops;
        e->cap_work = e->cap_ops;
        e->ops = t;
        e->cap_ops = cap;
        n = e->n_ops;
        e->n_ops = 0;
    }
    pthread_mutex_unlock(&e->mu);
    return n;
}

/* Ends everything at shutdown: queued submissions and live requests. */
static void eng_shutdown(struct eng *e)
{
    pthread_mutex_lock(&e->mu);
    int n = e->n_ops;
    e->n_ops = 0;
    pthread_mutex_unlock(&e->mu);
    for (int i = 0; i < n; i++) {
        if (e->ops[i].kind == OP_SUBMIT)
            eng_req_finish_all(e, e->ops[i].req, ENG_FINISH_ABORTED);
        free(e->ops[i].tenant);
    }
    for (const struct sched_req *sr = sched_first(e->s); sr; sr = sched_next(e->s, sr))
        if (sr->state != SCHED_FINISHED && sr->state != SCHED_ABORTED)
            sched_cancel(e->s, sr->id);
    eng_collect_done(e);
}

/* The engine thread (and the compute threads it starts, which inherit its
 * nice value) runs a few levels below the rest of the process: on a box
 * whose cores the forward pass fills, the I/O thread must still read a
 * request, submit it and write a token the moment it can, rather than
 * queue behind compute.  Failure (a limit) changes nothing. */
static void eng_lower_priority(int by)
{
    pid_t tid = (pid_t)syscall(SYS_gettid);
    errno = 0;
    int now = getpriority(PRIO_PROCESS, (id_t)tid);
    if (errno == 0)
        (void)setpriority(PRIO_PROCESS, (id_t)tid, now + by);
}

static void *eng_main(void *arg)
{
    struct eng *e = arg;
    int stalled = 0, n;
    if (e->o.compute_nice > 0)
        eng_lower_priority(e->o.compute_nice);
    while ((n = eng_wait_work(e, stalled)) >= 0) {
        for (int i = 0; i < n; i++)
            eng_apply(e, &e->work[i]);
        stalled = sched_n_live(e->s) > 0 && !eng_step(e);
        eng_collect_done(e);
        eng_flush_all(e);
        eng_publish(e);
    }
    eng_shutdown(e);
    eng_publish(e);
    return NULL;
}

/* ------------------------------------------------------------ lifetime -- */

static void eng_defaults(struct eng_opts *o)
{
    o->block_size = o->block_size > 0 ? o->block_size : 16;
    o->n_blocks = o->n_blocks > 0 ? o->n_blocks : 1024;
    o->n_host_blocks = o->n_host_blocks > 0   ? o->n_host_blocks
                       : o->n_host_blocks < 0 ? 0
                                              : o->n_blocks;
    o->max_batch_tokens = o->max_batch_tokens > 0 ? o->max_batch_tokens : 512;
    o->max_seqs = o->max_seqs > 0 ? o->max_seqs : 256;
    o->max_chunk = o->max_chunk > 0 ? o->max_chunk : o->max_batch_tokens;
    o->interrupt_tokens = o->interrupt_tokens ? o->interrupt_tokens : 32;
    o->priority_slack = o->priority_slack != 0 ? o->priority_slack : 0.5;
}

/* The device pool, the host pool and its measured bandwidth, the scheduler. */
static int eng_pools(struct eng *e, char *err, size_t errlen)
{
    struct eng_opts *o = &e->o;
    size_t block = be_kv_block_elems(&e->geom) * sizeof(float);
    e->kv = e->be->ops->alloc(e->be, block * (size_t)o->n_blocks);
    if (!e->kv) {
        snprintf(err, errlen, "engine: cannot allocate %d KV blocks: %s", o->n_blocks,
                 be_error(e->be));
        return -1;
    }
    if (!(e->swap = swap_pool_new(e->be, &e->geom, o->n_host_blocks, err, errlen)))
        return -1;
    double bw = 0;
    if (o->n_host_blocks > 0 &&
        (bw = swap_measure(e->swap, e->kv, o->n_blocks, 32, err, errlen)) < 0)
        return -1;
    e->cost = (struct swap_cost){.block_bytes = block, .bw_bytes_s = bw};
    static const enum sched_preempt modes[] = {SCHED_PREEMPT_AUTO, SCHED_PREEMPT_SWAP,
                                               SCHED_PREEMPT_RECOMPUTE};
    struct sched_opts so = {.max_batch_tokens = o->max_batch_tokens,
                            .max_seqs = o->max_seqs,
                            .max_chunk = o->max_chunk,
                            .block_size = o->block_size,
                            .n_blocks = o->n_blocks,
                            .n_host_blocks = o->n_host_blocks,
                            .preempt = modes[o->preempt],
                            .aging_s = o->aging_s,
                            .bg_slack = o->priority_slack > 0 ? o->priority_slack : 0,
                            .block_bytes = block,
                            .swap_bw = bw,
                            .check = o->check_invariants};
    if (!(e->s = sched_new(&so))) {
        snprintf(err, errlen, "engine: bad scheduler options or out of memory");
        return -1;
    }
    e->copy_a = malloc(sizeof(int32_t) * (size_t)(o->n_blocks + o->n_host_blocks));
    e->copy_b = malloc(sizeof(int32_t) * (size_t)(o->n_blocks + o->n_host_blocks));
    e->row = malloc(sizeof(float) * (size_t)model_config(e->m)->n_vocab);
    if (!e->copy_a || !e->copy_b || !e->row) {
        snprintf(err, errlen, "engine: out of memory");
        return -1;
    }
    return 0;
}

static void eng_free_parts(struct eng *e)
{
    if (e->s)
        sched_free(e->s);
    swap_pool_free(e->swap);
    if (e->kv)
        e->be->ops->free(e->be, e->kv);
    for (int i = 0; i < e->n_tenants; i++)
        free(e->tenants[i].name);
    free(e->tenants);
    eng_batch_free(&e->batch);
    eng_snapshot_free(e->snap);
    for (int i = 0; i < e->n_ops; i++) /* pushed after the thread's last look */
        free(e->ops[i].tenant);
    free(e->ops);
    free(e->work);
    free(e->items);
    free(e->rows);
    free(e->row);
    free(e->copy_a);
    free(e->copy_b);
    free(e);
}

int eng_create(struct model *m, const struct eng_opts *opts, struct eng **out, char *err,
               size_t errlen)
{
    *out = NULL;
    struct eng *e = calloc(1, sizeof(*e));
    if (!e) {
        snprintf(err, errlen, "engine: out of memory");
        return -1;
    }
    e->m = m;
    e->be = model_backend(m);
    e->o = opts ? *opts : (struct eng_opts){0};
    if (e->o.preempt < ENG_PREEMPT_AUTO || e->o.preempt > ENG_PREEMPT_RECOMPUTE) {
        snprintf(err, errlen, "engine: unknown preemption mode");
        free(e);
        return -1;
    }
    eng_defaults(&e->o);
    e->geom = model_kv_geom(m, e->o.block_size);
    e->idle = 1;
    if (eng_pools(e, err, errlen)) {
        eng_free_parts(e);
        return -1;
    }
    pthread_mutex_init(&e->mu, NULL);
    atomic_init(&e->urgent, INT_MAX);
    pthread_cond_init(&e->cv, NULL);
    pthread_cond_init(&e->idle_cv, NULL);
    eng_publish(e);
    if (pthread_create(&e->thread, NULL, eng_main, e)) {
        snprintf(err, errlen, "engine: cannot start its thread");
        eng_destroy(e);
        return -1;
    }
    e->thread_started = 1;
    *out = e;
    return 0;
}

void eng_destroy(struct eng *e)
{
    if (!e)
        return;
    if (e->thread_started) {
        pthread_mutex_lock(&e->mu);
        e->stop = 1;
        pthread_cond_signal(&e->cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
    }
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    pthread_cond_destroy(&e->idle_cv);
    eng_free_parts(e);
}
