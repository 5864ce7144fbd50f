/*
 * engine/eng_internal.h — the engine's private structures, shared by its
 * files: request handles (request.c), the thread and the API (engine.c),
 * one step of the loop (step.c), operator snapshots (snapshot.c) and flat
 * batches (batch.c).
 *
 * Threads: fields marked [mu] are guarded by the engine's lock, [r->mu] by
 * the handle's lock, [engine] are touched by the engine thread only.
 */
#ifndef LLMD_ENGINE_INTERNAL_H
#define LLMD_ENGINE_INTERNAL_H

#include "engine/engine.h"
#include "kvcache/kvcache.h"
#include "sched/sched.h"
#include "swap/swap.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define ENG_MAX_N 128 /* sequences of one request */

struct eng_req {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled with every wakeup (eng_req_wait) */
    int sync_ok;       /* mu and cv were initialised */
    int refs;          /* [r->mu] engine + client */
    int engine_holds;  /* [r->mu] the engine's reference is still held */
    struct eng *eng;   /* set at submission; valid while engine_holds */

    /* what was asked (immutable after submission) */
    uint64_t id;
    char *tenant, *cache_salt;
    int priority;
    int32_t *prompt;
    int n_prompt, max_tokens, n;
    struct smp_params smp;
    int32_t *stop_ids;
    int n_stop_ids;
    int ignore_eos;

    /* the client's side [r->mu] */
    void (*wake)(void *arg);
    void *wake_arg;
    struct eng_token *q; /* untaken tokens: q[q_head .. q_head + q_len) */
    int q_head, q_len, q_cap;
    enum eng_finish *finish; /* [n] */
    int n_finished, done;
    int pending_wake;
    struct eng_usage usage;

    /* the engine's side [engine] */
    struct sched_req *sr;      /* while in the scheduler */
    struct smp_seq **samplers; /* [n] per-sequence samplers */
    int64_t tenant_id;
    struct eng_usage eu;       /* counters published into usage each step */
    struct eng_req *live_next; /* [mu] the live list */
};

/* One cross-thread operation, applied by the engine thread in order. */
enum eng_op_kind { OP_SUBMIT, OP_CANCEL, OP_EVICT, OP_EVICT_TENANT, OP_DRAIN, OP_TENANT };

struct eng_op {
    enum eng_op_kind kind;
    struct eng_req *req;  /* OP_SUBMIT */
    uint64_t id;          /* OP_CANCEL, OP_EVICT */
    int flag;             /* abort (OP_EVICT*), on (OP_DRAIN) */
    char *tenant;         /* OP_EVICT_TENANT, OP_TENANT: owned by the op */
    struct eng_tenant tp; /* OP_TENANT */
};

/* A tenant name and the scheduler's id for it [engine]. */
struct eng_tname {
    char *name;
    int64_t id;
    double weight;
};

/* Host arrays of one flat batch, grown as needed and reused. */
struct eng_batch {
    int32_t *tokens, *pos, *slot, *q_off, *bt_off, *blocks, *out_rows;
    int cap_tokens, cap_pos, cap_slot, cap_q, cap_bt, cap_blocks, cap_out;
    int n_tokens, n_seqs, n_blocks, n_out;
    float *logits;
    size_t cap_logits;
};

struct eng {
    struct model *m;
    struct be *be;
    struct eng_opts o;
    struct be_kv_geom geom;
    struct be_buf *kv;
    struct swap_pool *swap;
    struct sched *s;
    pthread_t thread;
    int thread_started;

    pthread_mutex_t mu;
    pthread_cond_t cv;      /* [mu] work arrived, or stop */
    pthread_cond_t idle_cv; /* [mu] the engine went idle */
    struct eng_op *ops;     /* [mu] pending operations */
    int n_ops, cap_ops;
    struct eng_req *live; /* [mu] every request the engine holds */
    int n_live;
    int draining, stop, idle;
    struct eng_snapshot *snap; /* [mu] the last published snapshot */

    /* [engine] */
    struct eng_op *work; /* operations taken from ops */
    int cap_work;
    struct eng_tname *tenants;
    int n_tenants, cap_tenants;
    struct eng_batch batch;
    struct eng_step_item *items; /* [cap_items] this step's chunks, for on_step */
    int *rows;                   /* [cap_items] each chunk's logits row, -1 for none */
    int cap_items;
    float *row; /* one logits row of scratch for n > 1 */
    struct swap_cost cost;
    int32_t *copy_a, *copy_b; /* [n_blocks + n_host_blocks] */
    long step;
    const struct sched_plan *plan; /* the plan of the step running */
    long steps_interrupted;
    /* step cost fit, seconds = a + b * tokens: decayed sums of weight,
     * tokens, seconds, tokens^2 and tokens*seconds */
    double fit[5];
    long fit_n;
    /* The most important priority submitted since the engine last took its
     * operations (INT_MAX: none); written under mu, read between layers. */
    atomic_int urgent;
    long tokens_generated;
    long requests_finished;
    char last_error[256];
};

static inline double eng_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* request.c */
int eng_req_validate(const struct eng_request *rq);
struct eng_req *eng_req_new(const struct eng_request *rq);
void eng_req_free(struct eng_req *r);
/* Engine side: appends a token (-1 when memory is short), ends a sequence,
 * publishes counters, wakes the client if anything arrived, and finally
 * drops the engine's reference (unfinished sequences end aborted). */
int eng_req_emit(struct eng_req *r, const struct eng_token *tk);
void eng_req_set_finish(struct eng_req *r, int seq, enum eng_finish f);
void eng_req_update_usage(struct eng_req *r, const struct eng_usage *u);
/* The CLOCK_REALTIME instant timeout_s seconds from now, for timed waits. */
struct timespec eng_deadline(double timeout_s);
void eng_req_flush(struct eng_req *r);
void eng_req_engine_drop(struct eng_req *r);

/* engine.c: queues a cancel of r for the engine thread; the caller holds r->mu. */
void eng_cancel_locked_req(struct eng_req *r);
int64_t eng_tenant_id(struct eng *e, const char *name, int create);
const char *eng_tenant_name(const struct eng *e, int64_t id);

/* step.c: runs one step of the scheduler's plan; 1 when it did any work. */
int eng_step(struct eng *e);
/* Takes every ended request out of the scheduler and hands its result over. */
void eng_collect_done(struct eng *e);

/* snapshot.c */
struct eng_snapshot *eng_snapshot_build(struct eng *e);
struct eng_snapshot *eng_snapshot_copy(const struct eng_snapshot *s);

/* batch.c: adds n tokens tokens[start..start+n) of a sequence with block
 * table t; returns its logits row when want_logits, -1 otherwise, -2 when
 * memory is short. */
void eng_batch_begin(struct eng_batch *b);
int eng_batch_add(struct eng_batch *b, const struct kv_table *t, int block_size,
                  const int32_t *tokens, int start, int n, int want_logits);
void eng_batch_finish(struct eng_batch *b, struct be_batch *bt);
int eng_batch_logits(struct eng_batch *b, int n_vocab);
void eng_batch_free(struct eng_batch *b);

#endif
