/*
 * sched/sched.h — the iteration-level scheduler: requests, their sequences
 * and states, and each step's plan.
 *
 * The scheduler never runs the model.  Each step, sched_step() returns a
 * plan; the engine executes it — swap-outs, then swap-ins, then
 * copy-on-write copies, then one forward pass over the plan's chunks — and
 * reports back: sched_commit() (the chunks were computed), sched_append()
 * for every sampled token, sched_finish*() when it decides a sequence is
 * done.  A sequence's token array is the truth: preemption by swap keeps its
 * K/V, preemption by recompute re-feeds the same tokens, so no output token
 * is ever lost or duplicated.
 *
 * Policy (each step):
 *   1. deferred evictions, then tenants over their device-block cap give up
 *      their own requests (reason "tenant-cap");
 *   2. running requests are put in keep order, most important first:
 *      priority, then least tenant service (virtual token counter), then
 *      most computed tokens; waiting, swapped and recompute-preempted ones in
 *      admission order: effective priority (lower number first), resumed
 *      work before new work, and within that the tenant with the smallest
 *      counter (FCFS within a tenant);
 *   3. priority levels are then served from the most important: at each,
 *      the decodes of its running requests (one token per decoding
 *      sequence), their prefill chunks, then its admissions.  The decode
 *      tokens of every running request are held back from the budget until
 *      placed, so prefills and admissions never take a decode's place;
 *      blocks go to more important work first.  When blocks run short,
 *      victims come from the end of the keep order, never from work already
 *      in this plan; a running request may preempt itself (reason "blocks",
 *      or "tenant-cap" when its tenant's cap is what is short: then only
 *      that tenant's requests are victims).  A waiting request may preempt
 *      running work of strictly lower priority only (reason "priority").  A
 *      candidate that does not fit stops admission for the step (no
 *      overtaking), except one blocked by its own tenant's caps.  A request
 *      is admitted only when the pool has room for the rest of its prompt
 *      beyond what running prefills still need.  Once a swap-in is planned,
 *      the step preempts nothing more (a freed host block could be reused
 *      before it is read): work that would need it waits a step.
 *   4. a level whose chunks carry the prompt of a request that has not
 *      produced its first token yet is the last level of the step: less
 *      important work waits one step (unless opts.share_first), so the
 *      first token of more important work costs a step of its own size,
 *      not one sized by the background load.  Otherwise, with
 *      opts.bg_slack, once the most important level with work is placed,
 *      the levels after it share a budget of bg_slack * (a + b * T) / b
 *      tokens (T: tokens placed so far; a, b: sched_set_step_cost), so
 *      they lengthen its step by that fraction at most (but get at least
 *      one token, so they slow down and never stop).  Where a step's
 *      cost hardly grows with its size (a GPU) that is most of the
 *      budget; where it grows in proportion (a CPU) more important
 *      streams keep close to their unloaded speed.
 * Virtual token counters (VTC): a tenant's counter grows by (uncached prompt
 * tokens at first admission + 2 per generated token) / weight; a tenant that
 * becomes active after being idle is lifted to the smallest counter of the
 * active tenants, so idle time banks no credit.
 * Preemption mode: auto takes the cheaper of swap (2 * bytes / bandwidth,
 * only with room in the host pool) and recompute (computed tokens / prefill
 * rate); swap and recompute force a mode, except that a full host pool
 * always means recompute.
 * Aging: off by default (aging_s = 0) — strict priority, so under sustained
 * saturation by more important work, less important work waits; that is the
 * operator's choice.  With aging_s > 0 a waiting request's effective priority
 * improves by one level per aging_s seconds since its arrival (never past
 * 0), measured with the `now` given to sched_step; a request keeps the
 * effective priority it was admitted with while it runs.
 * Drain: while draining, sched_submit refuses new requests (SCHED_E_DRAINING);
 * requests already waiting are still admitted and everything runs to its end.
 *
 * Ownership: the scheduler owns every struct sched_req and struct sched_seq
 * from sched_submit until sched_release; the engine owns what its `user`
 * pointers point to.  Every request leaves through sched_pop_done() exactly
 * once, however it ended; the engine then calls sched_release().
 *
 * Not thread-safe: the engine thread owns the scheduler.  Between
 * sched_step() and sched_commit() the engine may only read, cancel or
 * finish: a request cancelled or finished then (e.g. because the forward
 * pass failed) has its chunks skipped by the commit, so nothing it computed
 * enters the prefix cache (the engine should skip them too, and must not
 * release it before committing).
 * Debug builds (or opts.check > 0) check the KV pool's invariants with every
 * live table after each step and commit, and abort on failure.
 */
#ifndef LLMD_SCHED_SCHED_H
#define LLMD_SCHED_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "kvcache/kvcache.h"

struct sched; /* the queues, the tenants, the KV pools and the current plan */

enum sched_preempt {
    SCHED_PREEMPT_AUTO = 0,  /* options only: the cheaper by the cost model */
    SCHED_PREEMPT_SWAP,      /* K/V copied to the host pool and back later */
    SCHED_PREEMPT_RECOMPUTE, /* K/V dropped; the tokens are prefilled again later */
};

/* Why a request was preempted (operator views, counters). */
enum sched_why {
    SCHED_WHY_PRIORITY = 0, /* room for a waiting request of higher priority */
    SCHED_WHY_BLOCKS,       /* a running sequence needed blocks and none were free */
    SCHED_WHY_TENANT_CAP,   /* its tenant was over its device-block cap */
    SCHED_WHY_EVICT,        /* sched_evict / sched_evict_tenant */
    SCHED_WHY_COUNT
};

enum sched_state {
    SCHED_WAITING = 0, /* submitted, never admitted */
    SCHED_RUNNING,     /* admitted, K/V on the device (prefilling or decoding) */
    SCHED_SWAPPED,     /* preempted by swap: K/V in the host pool */
    SCHED_PREEMPTED,   /* preempted by recompute: K/V dropped, waits to prefill again */
    SCHED_FINISHED,    /* every sequence ended normally */
    SCHED_ABORTED,     /* cancelled, evicted with abort, or failed */
    SCHED_STATE_COUNT
};

/* How a sequence (and a request) ended; SCHED_END_NONE while it runs. */
enum sched_end {
    SCHED_END_NONE = 0,
    SCHED_END_STOP,      /* stop token or stop string (engine) */
    SCHED_END_LENGTH,    /* max_tokens or context (engine) */
    SCHED_END_CANCELLED, /* sched_cancel */
    SCHED_END_EVICTED,   /* sched_evict* with abort */
    SCHED_END_ERROR,     /* the engine could not run it, or memory ran out */
};

/* Error codes of sched_submit (negative). */
enum {
    SCHED_E_INVAL = -1,    /* bad parameters (empty prompt, n < 1, max_tokens < 1, ...) */
    SCHED_E_DUP = -2,      /* a live request already has this id */
    SCHED_E_DRAINING = -3, /* draining: no new requests */
    SCHED_E_TOOBIG = -4,   /* could never fit: blocks, max_seqs or its tenant's caps */
    SCHED_E_NOMEM = -5,
};

struct sched_opts {
    int max_batch_tokens; /* token budget of one step (default 512) */
    int max_seqs;         /* sequences running at once and in one step (default 256) */
    int max_chunk;        /* longest prefill chunk of one sequence (default: the budget) */
    int block_size;       /* tokens per KV block (default 16) */
    int n_blocks;         /* device KV blocks (> 0) */
    int n_host_blocks;    /* host (swap) blocks (>= 0; 0: recompute only) */
    enum sched_preempt preempt;
    double aging_s;      /* 0: strict priority; > 0: one level gained per aging_s s waited */
    size_t block_bytes;  /* bytes of one KV block (all layers, K and V), for the cost model */
    double swap_bw;      /* host <-> device bytes/s; 0: unknown (auto then never swaps) */
    double prefill_rate; /* prefill tokens/s; 0: unknown (auto then prefers swap) */
    int check;           /* KV invariant checks each step: 1 on, -1 off, 0 on unless NDEBUG */
    int share_first;     /* 1: first-token steps also carry less important work (see Policy) */
    double bg_slack;     /* > 0: less important work may lengthen a step that carries more
                            important work by at most this fraction, by the step cost model
                            (sched_set_step_cost); 0: no limit */
};

/* One sequence of a request: its tokens and its block table.  Read-only for
 * the engine except `user`. */
struct sched_seq {
    struct sched_req *req;
    int index;             /* 0..req->n-1 */
    int32_t *tokens;       /* [n_tokens]: prompt, then generated; owned by the scheduler */
    int n_tokens;          /* prompt + generated */
    int n_computed;        /* tokens whose K/V is in the table */
    struct kv_table table; /* device block ids while running (host ids while swapped) */
    enum sched_end end;    /* SCHED_END_NONE while live */
    void *user;            /* the engine's (sampler state ...), never touched here */
};

/* A request: n sequences sharing one prompt.  Read-only for the engine
 * except `user`. */
struct sched_req {
    uint64_t id;
    int64_t tenant;
    int priority;     /* as submitted; lower = more important */
    int eff_priority; /* while running: the effective priority it was admitted with */
    int n_prompt, max_tokens, n;
    uint64_t salt;  /* prefix-cache salt */
    double arrival; /* seconds, the engine's clock */
    enum sched_state state;
    enum sched_end end;    /* for FINISHED / ABORTED: the end that ended it (its last sequence's) */
    int n_cached;          /* prompt tokens found in the prefix cache at first admission */
    int n_preemptions;     /* times preempted (any mode) */
    double first_admitted; /* `now` of the step that first admitted it; < 0 before */
    struct sched_seq *seqs; /* [n]; owned by the scheduler */
    void *user;             /* the engine's, given at submission */
};

struct sched_params {
    uint64_t id; /* unique among live requests */
    int64_t tenant;
    int priority;
    const int32_t *prompt; /* [n_prompt] copied */
    int n_prompt;
    int max_tokens; /* generated tokens at most, per sequence */
    int n;          /* sequences (samples) >= 1 */
    uint64_t salt;  /* kv_salt() of the tenant or of the request's cache_salt */
    double arrival;
    void *user;
};

/* One sequence's part of the flat batch: tokens seq->tokens[start .. start+len)
 * at positions start.., written through seq->table.  When n_sample > 0 the
 * logits of its last token are needed: one token is sampled from that row
 * for each of seq[0], seq[1] .. seq[n_sample-1] (n_sample > 1 only for the
 * last prompt chunk of a request with n > 1: seq is req->seqs and all its
 * sequences start from that row; they fork in sched_commit). */
struct sched_chunk {
    struct sched_req *req;
    struct sched_seq *seq;
    int start, len;
    int n_sample;
    int decode; /* 1: a decode (len 1 after a computed prefix); 0: a prefill chunk */
};

/* One whole-block copy. */
struct sched_copy {
    int32_t src, dst;
};

struct sched_preemption {
    uint64_t id;
    struct sched_req *req;
    enum sched_preempt mode; /* SCHED_PREEMPT_SWAP or SCHED_PREEMPT_RECOMPUTE */
    enum sched_why why;
    int n_blocks; /* device blocks it held */
};

/* What one step runs.  Owned by the scheduler, valid until the next
 * sched_step.  Chunks list decodes first, then prefill chunks. */
struct sched_plan {
    long step; /* 1, 2, ... */
    double now;
    const struct sched_chunk *chunks;
    int n_chunks;
    int n_tokens;                      /* sum of the chunks' len, <= max_batch_tokens */
    const struct sched_copy *swap_out; /* device -> host, run first */
    int n_swap_out;
    const struct sched_copy *swap_in; /* host -> device, run second */
    int n_swap_in;
    const struct sched_copy *cow; /* device -> device, run third */
    int n_cow;
    const struct sched_preemption *preempted;
    int n_preempted;
};

/* --------------------------------------------------------------- set-up -- */

/* A scheduler with its own KV pool; NULL when the options are bad or memory
 * is short.  Owned by the caller. */
struct sched *sched_new(const struct sched_opts *o);
/* Frees the scheduler, its pool and every request still in it (not the
 * engine's `user` data). */
void sched_free(struct sched *s);
/* The KV pool (read-only: block tables for the forward pass, operator views). */
const struct kv_pool *sched_pool(const struct sched *s);
/* The options in effect (defaults filled in). */
const struct sched_opts *sched_options(const struct sched *s);
/* Updates the cost model's measured inputs; a value <= 0 leaves that one as is. */
void sched_set_rates(struct sched *s, double swap_bw, double prefill_rate);
/* The step cost model: a step of n tokens takes about a + b * n seconds
 * (b <= 0: unknown, and opts.bg_slack has no effect). */
void sched_set_step_cost(struct sched *s, double a, double b);
/* Creates or updates a tenant: weight > 0 (fair share), caps on running
 * sequences and device blocks (0 = none; blocks a request's own sequences
 * share count once).  A request that could never fit the caps is refused
 * at submission; one waiting when a cap is lowered below it waits until the
 * cap rises.  Unknown tenants get weight 1 and no caps on first submission.
 * 0, or -1 on bad values or memory. */
int sched_tenant_set(struct sched *s, int64_t tenant, double weight, int max_running_seqs,
                     int max_device_blocks);

/* ------------------------------------------------------------- requests -- */

/* Queues a request (state WAITING); *out receives it (owned by the
 * scheduler until sched_release).  0, or a SCHED_E_* code. */
int sched_submit(struct sched *s, const struct sched_params *p, struct sched_req **out);
/* The live (not yet released) request with this id, or NULL. */
struct sched_req *sched_find(struct sched *s, uint64_t id);
/* Ends a request in any state now (ABORTED, SCHED_END_CANCELLED): its blocks,
 * device and host, are freed at once.  0, or -1 when no live request has id. */
int sched_cancel(struct sched *s, uint64_t id);
/* Evicts a request from the device: abort = 0 preempts a running request
 * at the next step (swap or recompute by the cost model; it resumes later
 * like any preempted request, not in that step; one not running is left as
 * it is), abort = 1 ends it now (ABORTED, SCHED_END_EVICTED).  0, or -1
 * when no live request has id. */
int sched_evict(struct sched *s, uint64_t id, int abort);
/* sched_evict for every live request of a tenant; returns how many. */
int sched_evict_tenant(struct sched *s, int64_t tenant, int abort);
/* Drain on (1) or off (0): see the header comment. */
void sched_drain(struct sched *s, int on);
int sched_draining(const struct sched *s);
/* Live requests not yet finished or aborted. */
int sched_n_live(const struct sched *s);

/* ----------------------------------------------------------------- steps -- */

/* Plans one step at time now (seconds, the engine's monotonic clock).
 * Never NULL; an empty plan when there is nothing to run. */
const struct sched_plan *sched_step(struct sched *s, double now);
/* Declares the plan's chunks computed: n_computed advances, full blocks
 * enter the prefix cache, n > 1 requests fork after their prompt.  Call once
 * per plan, before the appends.  0, or -1 when p is not the current plan. */
int sched_commit(struct sched *s, const struct sched_plan *p);
/* Gives up the current plan without computing it (the engine interrupted
 * its forward pass): no chunk is recorded, so the next step plans the same
 * tokens again; what the plan did to blocks (admissions, preemptions,
 * swaps, copies) stands.  In place of sched_commit; 0, or -1 when p is not
 * the current plan or was already committed. */
int sched_abandon(struct sched *s, const struct sched_plan *p);
/* Appends a sampled token to a live sequence.  0, or -1 when the sequence is
 * not live or already holds max_tokens generated tokens. */
int sched_append(struct sched *s, struct sched_seq *seq, int32_t token);
/* Ends one sequence (end: STOP, LENGTH or ERROR): its blocks are released
 * now (hashed ones stay cached).  The request ends with its last sequence;
 * before an n > 1 request's prompt is done this ends the whole request. */
void sched_finish_seq(struct sched *s, struct sched_seq *seq, enum sched_end end);
/* Ends every live sequence of a request (see sched_finish_seq). */
void sched_finish(struct sched *s, struct sched_req *r, enum sched_end end);
/* The next request that ended (FINISHED or ABORTED), oldest first, or NULL.
 * Each request comes out exactly once; the engine then releases it. */
struct sched_req *sched_pop_done(struct sched *s);
/* Frees an ended request popped from sched_pop_done. */
void sched_release(struct sched *s, struct sched_req *r);

/* ------------------------------------------------------ operator views -- */

struct sched_req_info {
    uint64_t id;
    int64_t tenant;
    int priority, eff_priority; /* eff_priority: now, with aging */
    enum sched_state state;
    double age_s;  /* now - arrival */
    double wait_s; /* now - arrival until first admitted, then that wait */
    int n_prompt, n_cached;
    int n_generated; /* most generated tokens over its sequences */
    int n_computed;  /* sum over live sequences */
    int n_live_seqs;
    int dev_blocks;  /* device blocks held (blocks its own sequences share, once) */
    int host_blocks; /* host blocks held while swapped */
    int n_preemptions;
};

struct sched_tenant_info {
    int64_t tenant;
    double weight;
    int max_running_seqs, max_device_blocks;
    double vtc;                                       /* virtual token counter */
    int n_waiting, n_running, n_swapped, n_preempted; /* requests by state */
    int running_seqs, dev_blocks;
    long prefill_tokens, decode_tokens; /* computed for it (commits) */
    long preemptions;
};

struct sched_stats {
    long steps;
    int n_by_state[SCHED_STATE_COUNT]; /* live requests (and ended, not yet released) */
    int running_seqs;
    long submitted, refused, finished, aborted;
    long preemptions[2][SCHED_WHY_COUNT]; /* [0] swap, [1] recompute, by reason */
    long swap_out_blocks, swap_in_blocks;
    uint64_t swap_out_bytes, swap_in_bytes;
    long cow_copies;
    long prefix_lookup_tokens, prefix_hit_tokens; /* at admissions and resumes */
    long prefill_tokens, decode_tokens;           /* committed */
};

/* Live requests in submission order: first, then next after r; NULL at the end. */
const struct sched_req *sched_first(const struct sched *s);
const struct sched_req *sched_next(const struct sched *s, const struct sched_req *r);
/* A snapshot of one request at time now. */
void sched_req_info(const struct sched *s, const struct sched_req *r, double now,
                    struct sched_req_info *out);
/* Tenant i (0 .. sched_n_tenants-1) into *out. */
int sched_n_tenants(const struct sched *s);
void sched_tenant_info(const struct sched *s, int i, struct sched_tenant_info *out);
void sched_stats(const struct sched *s, struct sched_stats *out);
/* Checks the scheduler's and the pool's invariants with every live table:
 * 0, or -1 with a message. */
int sched_check(const struct sched *s, char *err, size_t errlen);

const char *sched_state_name(enum sched_state st);
const char *sched_why_name(enum sched_why w);
const char *sched_end_name(enum sched_end e);
const char *sched_preempt_name(enum sched_preempt m);
const char *sched_strerror(int code);

#endif
