/*
 * engine/request.c — request handles: the copy of what was asked, the
 * locked output queue between the engine thread and the client, and the
 * two-owner lifetime.
 *
 * A handle starts with two references, the engine's and the client's.  The
 * engine drops its own when the request has left the scheduler; the client
 * drops its own with eng_req_release().  Whoever drops the last frees it.
 * Lock order: a handle's lock may be taken before the engine's lock, never
 * after it.
 */
#include "engine/eng_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static char *req_strdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

static int32_t *req_ids_dup(const int32_t *ids, int n)
{
    int32_t *d = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    if (d && n > 0)
        memcpy(d, ids, sizeof(int32_t) * (size_t)n);
    return d;
}

int eng_req_validate(const struct eng_request *rq)
{
    if (!rq || !rq->prompt || rq->n_prompt < 1 || rq->max_tokens < 0 || rq->n < 0 ||
        rq->n > ENG_MAX_N || rq->n_stop_ids < 0 || (rq->n_stop_ids > 0 && !rq->stop_ids) ||
        rq->smp.n_logprobs < 0 || rq->smp.n_logprobs > SMP_MAX_LOGPROBS)
        return ENG_EINVAL;
    return ENG_OK;
}

struct eng_req *eng_req_new(const struct eng_request *rq)
{
    struct eng_req *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    int n = rq->n > 0 ? rq->n : 1;
    r->refs = 2;
    r->engine_holds = 1;
    r->id = rq->id;
    r->tenant = strdup(rq->tenant ? rq->tenant : "");
    r->cache_salt = req_strdup(rq->cache_salt);
    r->priority = rq->priority;
    r->prompt = req_ids_dup(rq->prompt, rq->n_prompt);
    r->n_prompt = rq->n_prompt;
    r->max_tokens = rq->max_tokens;
    r->n = n;
    r->smp = rq->smp;
    r->stop_ids = req_ids_dup(rq->stop_ids, rq->n_stop_ids);
    r->n_stop_ids = rq->n_stop_ids;
    r->ignore_eos = rq->ignore_eos;
    r->wake = rq->wake;
    r->wake_arg = rq->wake_arg;
    r->finish = calloc((size_t)n, sizeof(*r->finish));
    r->usage.prompt_tokens = rq->n_prompt;
    r->usage.t_submit = eng_now();
    if (!r->tenant || !r->prompt || !r->stop_ids || !r->finish ||
        (rq->cache_salt && !r->cache_salt) || pthread_mutex_init(&r->mu, NULL)) {
        eng_req_free(r);
        return NULL;
    }
    if (pthread_cond_init(&r->cv, NULL)) {
        pthread_mutex_destroy(&r->mu);
        eng_req_free(r);
        return NULL;
    }
    r->sync_ok = 1;
    return r;
}

void eng_req_free(struct eng_req *r)
{
    if (!r)
        return;
    if (r->sync_ok) {
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
    }
    free(r->tenant);
    free(r->cache_salt);
    free(r->prompt);
    free(r->stop_ids);
    free(r->finish);
    free(r->q);
    free(r);
}

/* Drops one reference; the caller holds r->mu, which this releases. */
static void req_unref_locked(struct eng_req *r)
{
    int last = --r->refs == 0;
    pthread_mutex_unlock(&r->mu);
    if (last)
        eng_req_free(r);
}

/* Wakes the client when something arrived since the last wakeup. */
static void req_notify_locked(struct eng_req *r)
{
    pthread_cond_broadcast(&r->cv);
    if (r->wake)
        r->wake(r->wake_arg);
}

int eng_req_emit(struct eng_req *r, const struct eng_token *tk)
{
    pthread_mutex_lock(&r->mu);
    if (r->q_head + r->q_len == r->q_cap) {
        if (r->q_head > 0) { /* slide the untaken tokens down before growing */
            memmove(r->q, r->q + r->q_head, sizeof(*r->q) * (size_t)r->q_len);
            r->q_head = 0;
        }
        if (r->q_len == r->q_cap) {
            int cap = r->q_cap ? 2 * r->q_cap : 16;
            struct eng_token *nq = realloc(r->q, sizeof(*nq) * (size_t)cap);
            if (!nq) {
                pthread_mutex_unlock(&r->mu);
                return -1;
            }
            r->q = nq;
            r->q_cap = cap;
        }
    }
    r->q[r->q_head + r->q_len++] = *tk;
    r->usage.completion_tokens++;
    if (r->usage.t_first == 0)
        r->usage.t_first = tk->t;
    r->pending_wake = 1;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

void eng_req_set_finish(struct eng_req *r, int seq, enum eng_finish f)
{
    pthread_mutex_lock(&r->mu);
    if (r->finish[seq] == ENG_FINISH_NONE) {
        r->finish[seq] = f;
        if (++r->n_finished == r->n) {
            r->done = 1;
            r->usage.t_done = eng_now();
        }
        r->pending_wake = 1;
    }
    pthread_mutex_unlock(&r->mu);
}

void eng_req_update_usage(struct eng_req *r, const struct eng_usage *u)
{
    pthread_mutex_lock(&r->mu);
    r->usage.cached_tokens = u->cached_tokens;
    r->usage.preempt_swap = u->preempt_swap;
    r->usage.preempt_recompute = u->preempt_recompute;
    r->usage.step_admitted = u->step_admitted;
    r->usage.step_first = u->step_first;
    r->usage.t_sched = u->t_sched;
    pthread_mutex_unlock(&r->mu);
}

void eng_req_flush(struct eng_req *r)
{
    pthread_mutex_lock(&r->mu);
    if (r->pending_wake) {
        r->pending_wake = 0;
        req_notify_locked(r);
    }
    pthread_mutex_unlock(&r->mu);
}

void eng_req_engine_drop(struct eng_req *r)
{
    pthread_mutex_lock(&r->mu);
    if (!r->done) { /* shut down under it: whatever still runs is aborted */
        for (int s = 0; s < r->n; s++)
            if (r->finish[s] == ENG_FINISH_NONE)
                r->finish[s] = ENG_FINISH_ABORTED;
        r->n_finished = r->n;
        r->done = 1;
        r->usage.t_done = eng_now();
    }
    r->engine_holds = 0;
    req_notify_locked(r);
    req_unref_locked(r);
}

uint64_t eng_req_id(const struct eng_req *r)
{
    return r->id;
}

int eng_req_take(struct eng_req *r, struct eng_token *out, int max)
{
    pthread_mutex_lock(&r->mu);
    int n = r->q_len < max ? r->q_len : max;
    if (n > 0)
        memcpy(out, r->q + r->q_head, sizeof(*out) * (size_t)n);
    r->q_head += n;
    r->q_len -= n;
    if (r->q_len == 0)
        r->q_head = 0;
    pthread_mutex_unlock(&r->mu);
    return n;
}

int eng_req_done(struct eng_req *r)
{
    pthread_mutex_lock(&r->mu);
    int d = r->done && r->q_len == 0;
    pthread_mutex_unlock(&r->mu);
    return d;
}

enum eng_finish eng_req_finish(struct eng_req *r, int seq)
{
    if (seq < 0 || seq >= r->n)
        return ENG_FINISH_NONE;
    pthread_mutex_lock(&r->mu);
    enum eng_finish f = r->finish[seq];
    pthread_mutex_unlock(&r->mu);
    return f;
}

void eng_req_usage(struct eng_req *r, struct eng_usage *u)
{
    pthread_mutex_lock(&r->mu);
    *u = r->usage;
    pthread_mutex_unlock(&r->mu);
}

struct timespec eng_deadline(double timeout_s)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    double t = dl.tv_sec + dl.tv_nsec * 1e-9 + (timeout_s > 0 ? timeout_s : 0);
    dl.tv_sec = (time_t)t;
    dl.tv_nsec = (long)((t - (double)dl.tv_sec) * 1e9);
    return dl;
}

int eng_req_wait(struct eng_req *r, double timeout_s)
{
    struct timespec dl = eng_deadline(timeout_s);
    pthread_mutex_lock(&r->mu);
    int rc = 0;
    while (r->q_len == 0 && !r->done && rc == 0)
        rc = timeout_s < 0 ? pthread_cond_wait(&r->cv, &r->mu)
                           : pthread_cond_timedwait(&r->cv, &r->mu, &dl);
    int ready = r->q_len > 0 || r->done;
    pthread_mutex_unlock(&r->mu);
    return ready;
}

void eng_req_release(struct eng_req *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->wake = NULL; /* the client's wakeup target may be gone from now on */
    if (r->engine_holds && !r->done)
        eng_cancel_locked_req(r); /* takes the engine's lock: allowed after the handle's */
    req_unref_locked(r);
}
