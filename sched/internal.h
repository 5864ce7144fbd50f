/*
 * sched/internal.h — the scheduler's private structures, shared by its files
 * (requests and control in sched.c, the plan and its execution bookkeeping
 * in plan.c, the step policy in step.c, operator views in view.c).
 *
 * A request's cached per-request counts (device blocks, running sequences)
 * are kept in step with its tenant's and the scheduler's totals by
 * sreq_account(), called after anything that changes a request's tables or
 * state; sched_check() verifies the totals from scratch.
 */
#ifndef LLMD_SCHED_INTERNAL_H
#define LLMD_SCHED_INTERNAL_H

#include "sched/sched.h"
#include "swap/swap.h"

struct stenant {
    int64_t id;
    double weight;
    int max_running_seqs, max_device_blocks;
    double vtc;       /* virtual token counter */
    int n_active;     /* requests submitted and not ended */
    int running_seqs; /* live sequences of its running requests */
    int dev_blocks;   /* device blocks of its requests (a request's shared ones once) */
    long prefill_tokens, decode_tokens, preemptions;
    int chk_blocks, chk_seqs, chk_active; /* sched_check's recount */
    /* scratch of one step's admission */
    long blocked_step; /* step in which its caps stopped its admissions */
    int cursor;        /* position in the candidate group */
};

struct sreq {
    struct sched_req pub;
    struct stenant *tn;
    struct sreq *prev, *next; /* every request not yet released, in submission order */
    struct sreq *hnext;       /* id hash chain */
    struct sreq *done_next;   /* ended, waiting for sched_pop_done */
    long seqno;               /* submission order */
    int n_live;               /* sequences not ended */
    int forked;               /* n > 1: the sequences forked after the prompt */
    int evict_pending;        /* sched_evict(abort = 0): preempt at the next step */
    int admitted;             /* ever admitted (prompt charged to the tenant) */
    long touched;             /* the step that placed, resumed or preempted it */
    int dev_blocks;           /* accounted distinct device blocks (see sreq_dev_blocks) */
    int run_seqs;             /* accounted running sequences */
    double wait_s;            /* arrival to first admission */
    /* scratch of one step */
    int eff;       /* effective priority */
    int klass;     /* admission: 0 resumed (swapped, preempted), 1 new */
    long sunk;     /* computed tokens */
    int tok_cap[]; /* [n] capacity of each sequence's tokens */
};

/* A growable array of plan entries. */
struct sched {
    struct sched_opts o;
    double step_a, step_b; /* step cost model: a + b * tokens seconds; b <= 0 unknown */
    struct kv_pool *pool;
    struct swap_cost cost;
    int check;

    struct stenant **tenants;
    int n_tenants, cap_tenants;
    double vt_last; /* counter of the last tenant that went idle */

    struct sreq *head, *tail; /* requests not yet released */
    struct sreq **hash;
    int hash_cap, hash_count;
    struct sreq *done_head, *done_tail;
    long seqno;
    int draining;
    int n_active; /* requests not ended */
    int running_seqs;

    /* the current plan and its buffers */
    struct sched_plan plan;
    int committed;
    int swapped_in;        /* the step has planned a swap-in: no more preemptions */
    int budget;            /* tokens the step may still place */
    int reserve;           /* of which held for decodes of running requests not yet placed */
    long promised;         /* blocks running prefills still need (admission's reckoning) */
    long admitted_promise; /* of which for requests admitted in this step */
    struct sched_chunk *chunks, *chunks_tmp;
    struct sched_copy *swap_out, *swap_in, *cow;
    struct sched_preemption *preempted;
    int cap_chunks, cap_out, cap_in, cap_cow, cap_preempted;
    int32_t *scratch_a, *scratch_b; /* [n_blocks + n_host_blocks] for kv swap calls */
    struct sreq **order, **cands;   /* [cap_order] */
    int cap_order;

    struct sched_stats st;
};

static inline struct sreq *sreq_of(struct sched_req *r)
{
    return (struct sreq *)r;
}
static inline const struct sreq *csreq_of(const struct sched_req *r)
{
    return (const struct sreq *)r;
}

/* sched.c */
void sreq_account(struct sched *s, struct sreq *r);
void sreq_end(struct sched *s, struct sreq *r, enum sched_state st, enum sched_end end);
int sreq_dev_blocks(const struct sreq *r);   /* distinct device blocks */
int sreq_table_blocks(const struct sreq *r); /* device block references */
int sched_check_now(struct sched *s, const char *where);

/* view.c */
int sreq_eff_priority(const struct sched *s, const struct sreq *r, double now);

/* plan.c */
int plan_alloc(struct sched *s);
int plan_reserve_order(struct sched *s, int n);
void plan_free(struct sched *s);
void plan_reset(struct sched *s, double now);
int blocks_for(const struct sched *s, int n_tokens);
int seq_need(const struct sched *s, const struct sched_seq *q, int end);
int seq_prepare(struct sched *s, struct sched_seq *q, int end);
void plan_chunk(struct sched *s, struct sreq *r, struct sched_seq *q, int len, int n_sample);
void plan_order_chunks(struct sched *s);
enum sched_preempt preempt_mode(const struct sched *s, const struct sreq *r);
void preempt(struct sched *s, struct sreq *r, enum sched_why why);
int resume_swapped(struct sched *s, struct sreq *r);
int seq_is_active(const struct sreq *r, const struct sched_seq *q);
int sreq_decodes(const struct sreq *r);

#endif
