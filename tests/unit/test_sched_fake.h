/*
 * tests/unit/test_sched_fake.h — a fake engine for the scheduler's tests:
 * it executes every plan against a fake KV memory.  Included by
 * test_sched.c and test_sched_random.c (functions are static inline so that
 * each suite may use a part of them).
 *
 * The fake model: the K/V "content" at position p of a sequence is a rolling
 * hash of its tokens 0..p, and the token sampled after p is a hash of that
 * content and the sequence's index.  Each token therefore depends on the
 * whole prefix, so a token lost or duplicated by a preemption, a block
 * copied wrong, or a block read after it was freed changes every later
 * token.  The executor checks the K/V it reads against the sequence's own
 * tokens at every chunk, and every output against an uninterrupted
 * reference run.
 */
#ifndef LLMD_TEST_SCHED_FAKE_H
#define LLMD_TEST_SCHED_FAKE_H

#include "sched/sched.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VOCAB 32000
#define SEED  0x5eed5eed5eedULL

/* Check's ck_assert records a mark on every call; hot loops use this. */
#define REQUIRE(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond))                                                                               \
            ck_abort_msg(__VA_ARGS__);                                                             \
    } while (0)

/* --- the fake model ------------------------------------------------------------------- */

static inline uint64_t kv_mix(uint64_t h, int32_t tok, int pos)
{
    h ^= (uint64_t)(uint32_t)tok * 0x9E3779B97F4A7C15ULL + (uint64_t)pos * 0xD6E8FEB86659FD93ULL;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 31;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 29;
    return h | 1; /* 0 marks poisoned memory */
}

static inline int32_t next_token(uint64_t h, int seq_index)
{
    return (int32_t)((kv_mix(h, seq_index + 7, -1) >> 17) % VOCAB);
}

/* The tokens an uninterrupted run generates for sequence k. */
static inline int reference(const int32_t *prompt, int n_prompt, int k, int max_tokens,
                            int stop_mod, int32_t *out)
{
    uint64_t h = SEED;
    for (int i = 0; i < n_prompt; i++)
        h = kv_mix(h, prompt[i], i);
    int g = 0;
    for (;;) {
        int32_t t = next_token(h, k);
        out[g++] = t;
        if (g == max_tokens || (stop_mod && t % stop_mod == 0))
            return g;
        h = kv_mix(h, t, n_prompt + g - 1);
    }
}

/* --- the fake engine ------------------------------------------------------------------ */

struct fseq {
    uint64_t *h; /* h[i]: content at position i, from the sequence's tokens */
    int n_h;
    int32_t *out; /* generated tokens when done */
    int n_out;
};

struct freq {
    uint64_t id;
    int64_t tenant;
    int32_t *prompt;
    int n_prompt, max_tokens, n;
    struct sched_req *r; /* NULL once released */
    int done;
    enum sched_state state;
    int n_preemptions, n_cached;
    struct fseq *seqs;
};

struct fx {
    struct sched *s;
    const struct sched_opts *o;
    int bs, nb, nh;
    uint64_t *dev, *host;
    double now, dt;
    int stop_mod;
    struct freq **reqs; /* by id */
    int cap_reqs;
    long steps;
    long max_tenant_blocks_seen[8];
    long generated[8]; /* tokens sampled, by tenant (0..7) */
    /* called between planning and executing (cancellations mid-step) */
    void (*between)(struct fx *f, void *arg);
    void *between_arg;
    /* every abandon_mod-th step is given up half way (an interrupted
     * forward pass): its positions get garbage and the plan is abandoned */
    int abandon_mod;
    long abandoned;
};

static inline struct fx *fx_new(struct sched_opts o, int stop_mod)
{
    struct fx *f = calloc(1, sizeof(*f));
    f->s = sched_new(&o);
    ck_assert_ptr_nonnull(f->s);
    f->o = sched_options(f->s);
    f->bs = f->o->block_size;
    f->nb = f->o->n_blocks;
    f->nh = f->o->n_host_blocks;
    f->dev = calloc((size_t)f->nb * f->bs, sizeof(uint64_t));
    f->host = calloc((size_t)(f->nh ? f->nh : 1) * f->bs, sizeof(uint64_t));
    f->dt = 0.01;
    f->stop_mod = stop_mod;
    return f;
}

static inline void freq_free(struct freq *q)
{
    for (int k = 0; k < q->n; k++) {
        free(q->seqs[k].h);
        free(q->seqs[k].out);
    }
    free(q->seqs);
    free(q->prompt);
    free(q);
}

static inline void fx_free(struct fx *f)
{
    sched_free(f->s);
    for (int i = 0; i < f->cap_reqs; i++)
        if (f->reqs[i])
            freq_free(f->reqs[i]);
    free(f->reqs);
    free(f->dev);
    free(f->host);
    free(f);
}

/* Submits request id; returns sched_submit's code. */
static inline int fx_submit(struct fx *f, uint64_t id, int64_t tenant, int prio,
                            const int32_t *prompt, int n_prompt, int max_tokens, int n,
                            uint64_t salt)
{
    if ((int)id >= f->cap_reqs) {
        int cap = f->cap_reqs ? f->cap_reqs : 64;
        while (cap <= (int)id)
            cap *= 2;
        f->reqs = realloc(f->reqs, sizeof(*f->reqs) * (size_t)cap);
        memset(f->reqs + f->cap_reqs, 0, sizeof(*f->reqs) * (size_t)(cap - f->cap_reqs));
        f->cap_reqs = cap;
    }
    struct sched_req *r = NULL;
    int rc = sched_submit(f->s,
                          &(struct sched_params){.id = id,
                                                 .tenant = tenant,
                                                 .priority = prio,
                                                 .prompt = prompt,
                                                 .n_prompt = n_prompt,
                                                 .max_tokens = max_tokens,
                                                 .n = n,
                                                 .salt = salt,
                                                 .arrival = f->now},
                          &r);
    if (rc != 0)
        return rc;
    REQUIRE(!f->reqs[id], "id %llu reused in the test", (unsigned long long)id);
    struct freq *q = calloc(1, sizeof(*q));
    q->id = id;
    q->tenant = tenant;
    q->prompt = malloc(sizeof(int32_t) * (size_t)n_prompt);
    memcpy(q->prompt, prompt, sizeof(int32_t) * (size_t)n_prompt);
    q->n_prompt = n_prompt;
    q->max_tokens = max_tokens;
    q->n = n;
    q->r = r;
    q->seqs = calloc((size_t)n, sizeof(*q->seqs));
    for (int k = 0; k < n; k++) {
        q->seqs[k].h = malloc(sizeof(uint64_t) * (size_t)(n_prompt + max_tokens));
        r->seqs[k].user = &q->seqs[k];
    }
    r->user = q;
    f->reqs[id] = q;
    return 0;
}

/* The content position p of q must hold. */
static inline uint64_t seq_h(struct sched_seq *q, int p)
{
    struct fseq *fs = q->user;
    for (; fs->n_h <= p; fs->n_h++) {
        uint64_t prev = fs->n_h ? fs->h[fs->n_h - 1] : SEED;
        fs->h[fs->n_h] = kv_mix(prev, q->tokens[fs->n_h], fs->n_h);
    }
    return fs->h[p];
}

static inline void copy_block(uint64_t *dst, int d, const uint64_t *src, int s_, int bs)
{
    memcpy(dst + (size_t)d * bs, src + (size_t)s_ * bs, sizeof(uint64_t) * (size_t)bs);
}

/* Every pair of a copy list: ids in range, destinations distinct. */
static inline void check_pairs(const struct sched_copy *c, int n, int n_src, int n_dst,
                               const char *what)
{
    for (int i = 0; i < n; i++) {
        REQUIRE(c[i].src >= 0 && c[i].src < n_src && c[i].dst >= 0 && c[i].dst < n_dst,
                "%s pair %d out of range", what, i);
        for (int j = 0; j < i; j++)
            REQUIRE(c[j].dst != c[i].dst, "%s: two copies into block %d", what, c[i].dst);
    }
}

static inline void check_plan(struct fx *f, const struct sched_plan *p)
{
    REQUIRE(p->n_tokens <= f->o->max_batch_tokens, "plan over budget: %d", p->n_tokens);
    REQUIRE(p->n_chunks <= f->o->max_seqs, "plan over max_seqs");
    int tokens = 0, seen_prefill = 0;
    for (int i = 0; i < p->n_chunks; i++) {
        const struct sched_chunk *c = &p->chunks[i];
        struct sched_seq *q = c->seq;
        tokens += c->len;
        REQUIRE(!(c->decode && seen_prefill), "a decode after a prefill chunk");
        seen_prefill |= !c->decode;
        REQUIRE(c->req->state == SCHED_RUNNING && !q->table.on_host, "chunk of a non-running req");
        REQUIRE(c->len >= 1 && c->start == q->n_computed && c->start + c->len <= q->n_tokens,
                "chunk %d..%d of a sequence with %d computed of %d", c->start, c->len,
                q->n_computed, q->n_tokens);
        REQUIRE(c->len <= f->o->max_chunk || c->decode, "chunk longer than max_chunk");
        REQUIRE((c->start + c->len + f->bs - 1) / f->bs <= q->table.n_blocks,
                "chunk past the table");
        int last = c->start + c->len == q->n_tokens;
        REQUIRE(last ? c->n_sample >= 1 : c->n_sample == 0, "n_sample %d", c->n_sample);
        for (int j = 0; j < i; j++)
            REQUIRE(p->chunks[j].seq != q, "sequence twice in one plan");
    }
    REQUIRE(tokens == p->n_tokens, "n_tokens mismatch");
    check_pairs(p->swap_out, p->n_swap_out, f->nb, f->nh, "swap-out");
    check_pairs(p->swap_in, p->n_swap_in, f->nh, f->nb, "swap-in");
    check_pairs(p->cow, p->n_cow, f->nb, f->nb, "cow");
    for (int i = 0; i < p->n_cow; i++)
        REQUIRE(p->cow[i].src != p->cow[i].dst, "cow onto itself");
}

/* Runs the chunk through the fake model: checks what it reads, writes
 * what it computes; returns the content at its last position. */
static inline uint64_t forward_chunk(struct fx *f, const struct sched_chunk *c)
{
    struct sched_seq *q = c->seq;
    uint64_t prev = c->start ? f->dev[kv_table_slot(&q->table, f->bs, c->start - 1)] : SEED;
    for (int pos = c->start; pos < c->start + c->len; pos++) {
        REQUIRE(pos == 0 || prev == seq_h(q, pos - 1), "req %llu seq %d: K/V at %d is wrong",
                (unsigned long long)q->req->id, q->index, pos - 1);
        prev = kv_mix(prev, q->tokens[pos], pos);
        f->dev[kv_table_slot(&q->table, f->bs, pos)] = prev;
    }
    /* attention reads every earlier position */
    for (int pos = 0; pos < c->start; pos++)
        REQUIRE(f->dev[kv_table_slot(&q->table, f->bs, pos)] == seq_h(q, pos),
                "req %llu seq %d: K/V at %d corrupted", (unsigned long long)q->req->id, q->index,
                pos);
    return prev;
}

static inline void record_done(struct fx *f, struct sched_req *r)
{
    struct freq *q = r->user;
    q->done = 1;
    q->state = r->state;
    q->n_preemptions = r->n_preemptions;
    q->n_cached = r->n_cached;
    int32_t *ref = malloc(sizeof(int32_t) * (size_t)q->max_tokens);
    for (int k = 0; k < q->n; k++) {
        struct sched_seq *sq = &r->seqs[k];
        struct fseq *fs = &q->seqs[k];
        fs->n_out = sq->n_tokens - q->n_prompt;
        fs->out = malloc(sizeof(int32_t) * (size_t)(fs->n_out + 1));
        memcpy(fs->out, sq->tokens + q->n_prompt, sizeof(int32_t) * (size_t)fs->n_out);
        int n_ref = reference(q->prompt, q->n_prompt, k, q->max_tokens, f->stop_mod, ref);
        int exact = sq->end == SCHED_END_LENGTH || (sq->end == SCHED_END_STOP && f->stop_mod);
        if (exact)
            REQUIRE(fs->n_out == n_ref, "req %llu seq %d: %d tokens, reference %d",
                    (unsigned long long)q->id, k, fs->n_out, n_ref);
        REQUIRE(fs->n_out <= n_ref &&
                    memcmp(fs->out, ref, sizeof(int32_t) * (size_t)fs->n_out) == 0,
                "req %llu seq %d: output differs from the uninterrupted run",
                (unsigned long long)q->id, k);
    }
    free(ref);
    sched_release(f->s, r);
    q->r = NULL;
}

static inline void sample(struct fx *f, const struct sched_chunk *c, uint64_t row)
{
    for (int k = 0; k < c->n_sample; k++) {
        struct sched_seq *q = c->seq + k;
        if (q->end != SCHED_END_NONE || q->req->state != SCHED_RUNNING)
            continue;
        int32_t t = next_token(row, q->index);
        REQUIRE(sched_append(f->s, q, t) == 0, "append refused");
        if (q->req->tenant >= 0 && q->req->tenant < 8)
            f->generated[q->req->tenant]++;
        REQUIRE(sched_append(f->s, q, t) != 0, "a second append without a step was taken");
        int gen = q->n_tokens - q->req->n_prompt;
        if (gen == q->req->max_tokens)
            sched_finish_seq(f->s, q, SCHED_END_LENGTH);
        else if (f->stop_mod && t % f->stop_mod == 0)
            sched_finish_seq(f->s, q, SCHED_END_STOP);
    }
}

static inline void poison_free_blocks(struct fx *f)
{
    const struct kv_pool *pool = sched_pool(f->s);
    for (int b = 0; b < f->nb; b++)
        if (kv_block_state(pool, b) == KV_FREE)
            memset(f->dev + (size_t)b * f->bs, 0, sizeof(uint64_t) * (size_t)f->bs);
}

static inline void check_invariants(struct fx *f)
{
    char err[256];
    REQUIRE(sched_check(f->s, err, sizeof(err)) == 0, "%s", err);
    for (int i = 0; i < sched_n_tenants(f->s) && i < 8; i++) {
        struct sched_tenant_info ti;
        sched_tenant_info(f->s, i, &ti);
        REQUIRE(!ti.max_device_blocks || ti.dev_blocks <= ti.max_device_blocks,
                "tenant %lld holds %d blocks over its cap %d", (long long)ti.tenant, ti.dev_blocks,
                ti.max_device_blocks);
        if (ti.dev_blocks > f->max_tenant_blocks_seen[i])
            f->max_tenant_blocks_seen[i] = ti.dev_blocks;
    }
}

/* One step: plan, copies, forward, commit, sampling, stops, done requests. */
static inline const struct sched_plan *fx_step(struct fx *f)
{
    const struct sched_plan *p = sched_step(f->s, f->now);
    f->now += f->dt;
    f->steps++;
    check_plan(f, p);
    check_invariants(f);
    if (f->between)
        f->between(f, f->between_arg);
    for (int i = 0; i < p->n_swap_out; i++)
        copy_block(f->host, p->swap_out[i].dst, f->dev, p->swap_out[i].src, f->bs);
    for (int i = 0; i < p->n_swap_in; i++)
        copy_block(f->dev, p->swap_in[i].dst, f->host, p->swap_in[i].src, f->bs);
    for (int i = 0; i < p->n_cow; i++)
        copy_block(f->dev, p->cow[i].dst, f->dev, p->cow[i].src, f->bs);
    poison_free_blocks(f);
    if (f->abandon_mod && f->steps % f->abandon_mod == 0 && p->n_chunks > 0) {
        for (int i = 0; i < p->n_chunks; i++) {
            const struct sched_chunk *c = &p->chunks[i];
            if (c->req->state != SCHED_RUNNING || c->seq->end != SCHED_END_NONE)
                continue;
            for (int pos = c->start; pos < c->start + c->len; pos++)
                f->dev[kv_table_slot(&c->seq->table, f->bs, pos)] = 0xdeadbeefULL + (uint64_t)pos;
        }
        REQUIRE(sched_abandon(f->s, p) == 0, "abandon refused");
        REQUIRE(sched_commit(f->s, p) != 0, "commit after abandon accepted");
        f->abandoned++;
        check_invariants(f);
        return p;
    }
    uint64_t *rows = malloc(sizeof(uint64_t) * (p->n_chunks > 0 ? (size_t)p->n_chunks : 1));
    for (int i = 0; i < p->n_chunks; i++) {
        const struct sched_chunk *c = &p->chunks[i];
        int live = c->req->state == SCHED_RUNNING && c->seq->end == SCHED_END_NONE;
        rows[i] = live ? forward_chunk(f, c) : 0; /* cancelled since the plan */
    }
    REQUIRE(sched_commit(f->s, p) == 0, "commit refused");
    REQUIRE(sched_commit(f->s, p) != 0, "second commit accepted");
    for (int i = 0; i < p->n_chunks; i++)
        if (p->chunks[i].n_sample && rows[i])
            sample(f, &p->chunks[i], rows[i]);
    free(rows);
    check_invariants(f);
    for (struct sched_req *r; (r = sched_pop_done(f->s));)
        record_done(f, r);
    return p;
}

/* Steps until nothing is live; the step count, or -1 past max_steps. */
static inline long fx_run(struct fx *f, long max_steps)
{
    long n = 0;
    while (sched_n_live(f->s) > 0) {
        if (n++ >= max_steps)
            return -1;
        fx_step(f);
    }
    for (struct sched_req *r; (r = sched_pop_done(f->s));)
        record_done(f, r);
    return n;
}

/* Nothing held: every device block free or cached, every host block free. */
static inline void check_all_free(struct fx *f)
{
    struct kv_stats st;
    kv_pool_stats(sched_pool(f->s), &st);
    ck_assert_int_eq(st.n_used, 0);
    ck_assert_int_eq(st.n_free + st.n_cached, st.n_blocks);
    ck_assert_int_eq(st.n_host_free, st.n_host_blocks);
}

static inline void make_prompt(int32_t *p, int n, uint32_t seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (int32_t)((seed >> 8) % VOCAB);
    }
}

static inline struct sched_opts opts(int n_blocks, int n_host, int budget, int max_seqs)
{
    return (struct sched_opts){.max_batch_tokens = budget,
                               .max_seqs = max_seqs,
                               .block_size = 16,
                               .n_blocks = n_blocks,
                               .n_host_blocks = n_host,
                               .block_bytes = 1 << 20,
                               .swap_bw = 10e9,
                               .prefill_rate = 5000,
                               .check = 1};
}

static inline int plan_has_seq(const struct sched_plan *p, const struct sched_req *r)
{
    for (int i = 0; i < p->n_chunks; i++)
        if (p->chunks[i].req == r)
            return 1;
    return 0;
}

#endif
