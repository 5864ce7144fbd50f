/*
 * engine/engine.h — running the model over many requests at once.
 *
 * The serving engine (struct eng) owns the model's backend, the KV pools,
 * the host swap pool and the scheduler, and runs the step loop on its own
 * thread: take submissions and cancellations, schedule, swap, one forward
 * pass over the flat batch, sample, check stops, emit tokens.  Every other
 * thread talks to it through eng_submit / eng_cancel / eng_evict /
 * eng_drain / eng_snapshot, which only touch small locked queues.
 *
 * A submitted request is a handle (struct eng_req) with two owners: the
 * engine, until the request has left the scheduler, and the client, until
 * it calls eng_req_release() — exactly once, at any moment.  Releasing an
 * unfinished request cancels it.  Tokens are appended to the handle's
 * locked queue; the client takes them with eng_req_take() after a wakeup
 * (its callback, or eng_req_wait()).
 *
 * eng_generate is the older offline path (tests, llmgen's plain modes): a
 * set of requests run together, no preemption, returning when all are done.
 */
#ifndef LLMD_ENGINE_ENGINE_H
#define LLMD_ENGINE_ENGINE_H

#include "model/model.h"

/* ============================================================ the engine */

struct eng;     /* the engine and its thread */
struct eng_req; /* one submitted request: its output queue and result */
struct eng_step_info;

enum eng_preempt {
    ENG_PREEMPT_AUTO = 0,  /* cheaper of swap and recompute (cost model) */
    ENG_PREEMPT_SWAP,      /* swap when the host pool has room, else recompute */
    ENG_PREEMPT_RECOMPUTE, /* always recompute */
};

struct eng_opts {
    int block_size;       /* tokens per KV block (default 16) */
    int n_blocks;         /* device KV blocks (default 1024) */
    int n_host_blocks;    /* host (swap) blocks (default: as many as device blocks; -1: none) */
    int max_batch_tokens; /* token budget of one step (default 512) */
    int max_seqs;         /* sequences in one step (default 256) */
    int max_chunk;        /* longest prefill chunk of one sequence (default: the budget) */
    enum eng_preempt preempt;
    double aging_s;        /* 0: strict priority; > 0: a waiting request gains one priority
                              level per aging_s seconds (see sched/sched.h) */
    int check_invariants;  /* check the KV pool's invariants every step: 1 on, -1 off, 0 default
                              (on unless NDEBUG) */
    int snapshot_blocks;   /* 1: snapshots carry the device block map and every request's block
                              table (llmadmin blocks); costs a copy of both per step */
    long fail_step;        /* testing: the forward pass of this step fails (0: never) */
    double priority_slack; /* less important work may lengthen a step carrying more important
                              work by at most this fraction, by the measured step cost
                              (0: 0.5; < 0: no limit; see sched/sched.h, bg_slack) */
    int compute_nice;      /* the engine thread and its compute threads run this much nicer than
                              the process (the I/O thread stays responsive); 0: as is */
    int interrupt_every;   /* testing: every such step's forward pass is interrupted half way,
                              as if more important work had arrived (0: never) */
    int interrupt_tokens;  /* a forward pass carrying at least this many tokens of work less
                              important than a request submitted meanwhile is given up between
                              layers and planned again with it (0: 32; < 0: never) */
    /* Called on the engine thread after every step with what it ran (tests, tracing). */
    void (*on_step)(void *arg, const struct eng_step_info *info);
    void *on_step_arg;
};

/* One sequence's part of a step, as given to on_step. */
struct eng_step_item {
    uint64_t req_id;
    int seq;     /* index of the sequence in its request, 0..n-1 */
    int start;   /* first position fed */
    int n;       /* tokens fed */
    int prefill; /* 1 for a prompt (or recompute) chunk, 0 for a decode */
    int sampled; /* 1 when a token was sampled for it */
};

struct eng_step_info {
    long step; /* 1, 2, ... */
    int n_items;
    const struct eng_step_item *items;
    int n_swap_out, n_swap_in, n_cow; /* block copies issued before the forward pass */
    int n_preempted;
    double seconds; /* wall time of the step */
};

/* Per-tenant policy, passed through to the scheduler. */
struct eng_tenant {
    double weight;     /* fair-share weight (> 0; default 1) */
    int max_running;   /* sequences on the device at once (0: no cap) */
    int max_kv_blocks; /* device blocks (0: no cap) */
};

enum eng_finish {
    ENG_FINISH_NONE = 0, /* still running */
    ENG_FINISH_STOP,     /* end-of-generation or stop token */
    ENG_FINISH_LENGTH,   /* max_tokens reached (or the context) */
    ENG_FINISH_ABORTED,  /* cancelled, evicted with abort, or the engine shut down */
    ENG_FINISH_ERROR,    /* the forward pass or an allocation failed */
};
const char *eng_finish_name(enum eng_finish f);

/* What the client asks for; eng_submit copies everything it points to. */
struct eng_request {
    uint64_t id;        /* unique among live requests */
    const char *tenant; /* tenant name (prefix-cache salt by default) */
    int priority;       /* lower = more important */
    const int32_t *prompt;
    int n_prompt;
    int max_tokens;        /* per sequence */
    int n;                 /* sequences sharing the prompt (default 1) */
    struct smp_params smp; /* sequence i samples with seed smp.seed + i */
    const int32_t *stop_ids;
    int n_stop_ids;
    const char *cache_salt; /* NULL: the tenant */
    int ignore_eos;
    /* Called on the engine thread, with the handle's lock held, whenever
     * tokens or the final result arrive: it must only signal (event_active,
     * a condvar), never call back into the engine. */
    void (*wake)(void *arg);
    void *wake_arg;
};

/* Error codes of the API (negative). */
enum eng_err {
    ENG_OK = 0,
    ENG_EINVAL = -1,   /* a bad request (empty prompt, a token outside the vocabulary, ...) */
    ENG_EDRAIN = -2,   /* draining: nothing new is admitted */
    ENG_EEXIST = -3,   /* a live request has this id */
    ENG_ENOMEM = -4,   /* out of memory */
    ENG_ENOENT = -5,   /* no live request with this id (or tenant) */
    ENG_ETOOBIG = -6,  /* prompt + max_tokens can never fit the device pool */
    ENG_ESTOPPED = -7, /* the engine is shutting down */
};
const char *eng_strerror(int code);

/* Starts an engine over model m (which must outlive it) and its thread.
 * -1 with a message on failure.  Owned by the caller. */
int eng_create(struct model *m, const struct eng_opts *o, struct eng **out, char *err,
               size_t errlen);
/* Stops the thread; unfinished requests end aborted.  Handles the client
 * still holds stay valid until it releases them. */
void eng_destroy(struct eng *e);

/* Sets a tenant's policy (creating it); takes effect at the next step. */
int eng_tenant_set(struct eng *e, const char *name, const struct eng_tenant *t);

/* Submits a request; *out receives the handle (owned by the client until
 * eng_req_release).  ENG_OK or an enum eng_err code. */
int eng_submit(struct eng *e, const struct eng_request *rq, struct eng_req **out);
/* Cancels a live request at any stage; its blocks are freed by the next
 * step and it ends ENG_FINISH_ABORTED.  ENG_OK or ENG_ENOENT. */
int eng_cancel(struct eng *e, uint64_t id);
/* on = 1: admit nothing new (eng_submit returns ENG_EDRAIN), finish what
 * was admitted; on = 0: admit again. */
void eng_drain(struct eng *e, int on);
/* Takes a request (or every request of a tenant) off the device: with abort
 * it ends ENG_FINISH_ABORTED; without, it is preempted (swap or recompute)
 * and resumes later with the same output.  ENG_OK or ENG_ENOENT. */
int eng_evict(struct eng *e, uint64_t id, int abort);
int eng_evict_tenant(struct eng *e, const char *tenant, int abort);
/* Blocks until no request is left in the engine (used with drain), or
 * timeout_s passes (< 0: no limit).  0 when idle, -1 on timeout. */
int eng_wait_idle(struct eng *e, double timeout_s);

/* ---------------------------------------------------- request handles -- */

/* One generated token. */
struct eng_token {
    int seq;                /* sequence index, 0..n-1 */
    int32_t id;             /* token id */
    double t;               /* CLOCK_MONOTONIC seconds when it was sampled */
    enum eng_finish finish; /* on a sequence's last token: why it ended there (the token
                               that stopped it is emitted too); else ENG_FINISH_NONE */
    int has_lp;             /* lp is filled (smp.n_logprobs > 0) */
    struct smp_logprob lp;
};

/* Usage and history of a request. */
struct eng_usage {
    int prompt_tokens;
    int cached_tokens; /* prompt tokens found in the prefix cache */
    int completion_tokens;
    int preempt_swap, preempt_recompute; /* times a sequence of it was preempted */
    double t_submit;                     /* CLOCK_MONOTONIC seconds */
    double t_sched;                      /* first scheduled on the device, 0 when not yet */
    double t_first;                      /* first token, 0 when none */
    double t_done;                       /* finish, 0 while running */
    long step_admitted, step_first;      /* engine steps: taken in, first scheduled */
};

uint64_t eng_req_id(const struct eng_req *r);
/* Moves up to max queued tokens into out, oldest first; returns how many. */
int eng_req_take(struct eng_req *r, struct eng_token *out, int max);
/* 1 when the request has finished and every token has been taken. */
int eng_req_done(struct eng_req *r);
/* Finish reason of sequence seq (ENG_FINISH_NONE while it runs). */
enum eng_finish eng_req_finish(struct eng_req *r, int seq);
void eng_req_usage(struct eng_req *r, struct eng_usage *u);
/* Blocks until there are tokens to take or the request is done, or
 * timeout_s passes (< 0: no limit).  1 when there is something, 0 on timeout. */
int eng_req_wait(struct eng_req *r, double timeout_s);
/* The client's last call on the handle: cancels the request when unfinished. */
void eng_req_release(struct eng_req *r);

/* ------------------------------------------------------------ snapshot -- */

enum eng_rstate {
    ENG_RS_WAITING = 0, /* not yet on the device */
    ENG_RS_RUNNING,     /* prefilling or decoding */
    ENG_RS_SWAPPED,     /* preempted to host memory */
    ENG_RS_PREEMPTED,   /* preempted for recompute */
    ENG_RS_FINISHED,
    ENG_RS_N
};
const char *eng_rstate_name(enum eng_rstate s);

#define ENG_SNAP_PRIOS 8 /* priorities counted apart; higher ones share the last row */

/* One entry of a request's block table (snapshot_blocks). */
struct eng_snap_entry {
    int seq;       /* sequence index in the request */
    int logical;   /* block index in the sequence: tokens logical*block_size .. */
    int32_t block; /* physical block: in the device pool, or in the host pool when on_host */
    int on_host;
    int ref;       /* the block's reference count (> 1: shared with another sequence's
                      table, e.g. a common prompt prefix; the prefix cache holds none) */
    uint64_t hash; /* prefix-cache hash, 0 while the block is not full / not hashed */
    /* A device entry's ref and hash are the block map's for that block (a full
     * block whose equal was cached first has none); a host block belongs to
     * one table (ref 1) and shows the hash it is looked up under at swap-in. */
};

enum eng_block_state { ENG_BLOCK_FREE = 0, ENG_BLOCK_CACHED, ENG_BLOCK_USED };

/* One device block in the snapshot's block map (snapshot_blocks). */
struct eng_snap_block {
    uint8_t state;  /* enum eng_block_state */
    int16_t tenant; /* index in eng_snapshot.tenants of a request holding it, -1 when none */
    int32_t ref;
    uint64_t hash;
};

struct eng_snap_req {
    uint64_t id;
    char tenant[64];
    int priority;
    enum eng_rstate state;
    int n_seqs;
    int prompt_tokens, cached_tokens, computed_tokens, generated_tokens;
    int device_blocks, host_blocks;
    int preemptions;
    double age_s;
    int n_table; /* snapshot_blocks: the block tables of all its sequences, seq-major */
    struct eng_snap_entry *table;
};

struct eng_snap_tenant {
    char name[64];
    double weight;
    int running, waiting, swapped;
    int device_blocks;
    long tokens_served; /* prompt + generated tokens computed for it */
};

struct eng_snapshot {
    long step;
    double t; /* CLOCK_MONOTONIC seconds when published */
    int draining;
    int by_state[ENG_RS_N];
    int by_prio[ENG_SNAP_PRIOS][ENG_RS_N];
    /* device pool */
    int blocks_total, blocks_free, blocks_cached, blocks_used;
    int host_blocks_total, host_blocks_used;
    long preempt_swap, preempt_recompute;
    uint64_t swap_bytes_out, swap_bytes_in;
    double swap_bw_bytes_s, prefill_tok_s;
    long prefix_lookups, prefix_hits;
    long tokens_prefilled, tokens_generated;
    long steps_interrupted; /* forward passes given up for more important work */
    long requests_finished;
    char last_error[256]; /* the last forward or copy failure, "" when none */
    int n_tenants;
    struct eng_snap_tenant *tenants; /* [n_tenants] */
    int n_reqs;
    struct eng_snap_req *reqs;     /* [n_reqs] */
    int n_blocks;                  /* snapshot_blocks: blocks_total, else 0 */
    struct eng_snap_block *blocks; /* [n_blocks] the device pool, block by block */
};

/* A copy of the state published after the last step; the caller frees it
 * with eng_snapshot_free.  NULL when memory is short. */
struct eng_snapshot *eng_snapshot(struct eng *e);
void eng_snapshot_free(struct eng_snapshot *s);

/* ======================================================= offline batches */

struct eng_gen_opts {
    int block_size;       /* tokens per KV block (default 16) */
    int n_blocks;         /* KV blocks in the pool (default: enough for every request) */
    int max_batch_tokens; /* token budget of one step (default 512) */
    int max_seqs;         /* sequences in one step (default 256) */
};

struct eng_gen_req {
    const int32_t *prompt;
    int n_prompt;
    int max_tokens;  /* tokens to generate */
    int stop_at_eog; /* stop at an end-of-generation token */
    struct smp_params smp;
};

struct eng_gen_out {
    int32_t *ids;           /* [n] generated ids, malloc'd, owned by the caller */
    float *gap;             /* [n] top-1 minus top-2 logit at each step, owned by the caller */
    struct smp_logprob *lp; /* [n] when smp.n_logprobs > 0, else NULL; owned by the caller */
    int n;
    int eog; /* stopped at an end-of-generation token */
};

/* Step counters of one eng_generate call. */
struct eng_gen_stats {
    int steps;
    long prefill_tokens, decode_tokens;
    double prefill_s, decode_s, mixed_s; /* wall time of steps by kind */
};

/* Runs n requests together; outs[i] receives request i's tokens.  stats may
 * be NULL.  -1 with a message on failure (outs are then empty). */
int eng_generate(struct model *m, const struct eng_gen_opts *o, const struct eng_gen_req *reqs,
                 int n, struct eng_gen_out *outs, struct eng_gen_stats *stats, char *err,
                 size_t errlen);
void eng_gen_out_free(struct eng_gen_out *out);

#endif
