/*
 * tests/unit/test_engine_snapshot.c — the engine snapshot's block map and
 * block tables (eng_opts.snapshot_blocks), with the real model.
 *
 * The one idea: the map and the tables are two views of the same pool at
 * the same moment, so they must agree exactly.  check_snapshot() states
 * that agreement; every test takes snapshots while requests run (shared
 * prefixes, n > 1 forks, a swapped request) and holds each one to it, then
 * checks that nothing is left in use once the requests are gone.
 *
 * The model is loaded once per test case and the suite runs without fork
 * (OpenMP does not survive fork), like tests/unit/test_engine.c.
 */
#include "engine/engine.h"
#include "tests/unit/test_engine_util.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_OUT 256

static struct be *g_be;
static struct model *g_model;
static struct eng *g_eng; /* the running test's engine, for reap() */

static void setup(void)
{
    char err[512];
    g_be = be_create("cpu", NULL, err, sizeof(err));
    ck_assert_msg(g_be != NULL, "backend: %s", err);
    const char *mp = getenv("LLMD_MODEL");
    if (!mp || !*mp)
        mp = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    ck_assert_msg(model_load(mp, NULL, g_be, &g_model, err, sizeof(err)) == 0, "%s: %s", mp, err);
}

static void teardown(void)
{
    model_free(g_model);
    be_destroy(g_be);
    g_model = NULL;
    g_be = NULL;
}

/* A failed assertion leaves its test without cleaning up; the engine it
 * left running must stop before the next test (or the model's teardown),
 * or its thread would run on freed memory and hide the failure's report. */
static void reap(void)
{
    if (g_eng)
        eng_destroy(g_eng);
    g_eng = NULL;
}

/* ------------------------------------------------------------- helpers -- */

static struct eng *eng_start(struct eng_opts o)
{
    struct eng *e = NULL;
    char err[256];
    o.check_invariants = 1;
    ck_assert_msg(eng_create(g_model, &o, &e, err, sizeof(err)) == 0, "%s", err);
    g_eng = e;
    return e;
}

static void eng_stop(struct eng *e)
{
    eng_destroy(e);
    g_eng = NULL;
}

/* Takes whatever tokens are queued; returns how many sequence 0 has now. */
static int take_tokens(struct eng_req *h, int *n0)
{
    struct eng_token tk[32];
    int k;
    while ((k = eng_req_take(h, tk, 32)) > 0)
        for (int i = 0; i < k; i++)
            *n0 += tk[i].seq == 0;
    return *n0;
}

/* Waits until sequence 0 of the request has at least n tokens. */
static void wait_tokens(struct eng_req *h, int *n0, int n)
{
    for (int spins = 0; take_tokens(h, n0) < n; spins++) {
        ck_assert_msg(spins < 600 && !eng_req_done(h), "request %llu: no token %d",
                      (unsigned long long)eng_req_id(h), n);
        eng_req_wait(h, 0.1);
    }
}

/* Collects a request to its end (60 s at most), then releases it; returns
 * how sequence 0 ended. */
static enum eng_finish finish(struct eng_req *h)
{
    int n0 = 0;
    for (int spins = 0; !eng_req_done(h); spins++) {
        ck_assert_msg(spins < 600, "request %llu did not finish",
                      (unsigned long long)eng_req_id(h));
        eng_req_wait(h, 0.1);
        take_tokens(h, &n0);
    }
    take_tokens(h, &n0);
    enum eng_finish f = eng_req_finish(h, 0);
    eng_req_release(h);
    return f;
}

static void nap_ms(int ms)
{
    struct timespec ts = {0, (long)ms * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static const struct eng_snap_req *find_req(const struct eng_snapshot *s, uint64_t id)
{
    for (int i = 0; i < s->n_reqs; i++)
        if (s->reqs[i].id == id)
            return &s->reqs[i];
    return NULL;
}

/* 1 when request id is in the snapshot in state st with a block table. */
static int req_has_table(const struct eng_snapshot *s, uint64_t id, enum eng_rstate st)
{
    const struct eng_snap_req *q = find_req(s, id);
    return q && q->state == st && q->n_table > 0;
}

/* Polls snapshots until every request of ids[n] is in state st with a table
 * (20 s at most); returns that snapshot (the caller frees it). */
static struct eng_snapshot *wait_tables(struct eng *e, const uint64_t *ids, int n,
                                        enum eng_rstate st)
{
    for (int spins = 0;; spins++) {
        ck_assert_msg(spins < 4000, "requests never all %s with tables", eng_rstate_name(st));
        struct eng_snapshot *s = eng_snapshot(e);
        ck_assert_ptr_nonnull(s);
        int all = 1;
        for (int i = 0; i < n; i++)
            all &= req_has_table(s, ids[i], st);
        if (all)
            return s;
        eng_snapshot_free(s);
        nap_ms(5);
    }
}

/* ------------------------------------------------- the consistency rule -- */

/* What check_snapshot saw, for the tests' own assertions. */
struct seen {
    int device_entries, host_entries;
    int shared_across; /* device blocks held by more than one request */
    int shared_within; /* requests whose own sequences share a block */
    int max_ref;
};

/* The block map on its own: each block's fields fit its state, and the
 * states add up to the pool's counters. */
static void check_map(const struct eng_snapshot *s)
{
    ck_assert_ptr_nonnull(s->blocks);
    ck_assert_int_eq(s->n_blocks, s->blocks_total);
    int n[3] = {0, 0, 0};
    for (int b = 0; b < s->n_blocks; b++) {
        const struct eng_snap_block *m = &s->blocks[b];
        ck_assert_int_le(m->state, ENG_BLOCK_USED);
        n[m->state]++;
        if (m->state == ENG_BLOCK_USED) {
            ck_assert_msg(m->ref >= 1, "used block %d has ref %d", b, m->ref);
            ck_assert_msg(m->tenant >= 0 && m->tenant < s->n_tenants, "used block %d: tenant %d", b,
                          m->tenant);
            continue;
        }
        ck_assert_msg(m->ref == 0 && m->tenant == -1, "unused block %d: ref %d tenant %d", b,
                      m->ref, m->tenant);
        if (m->state == ENG_BLOCK_CACHED)
            ck_assert_msg(m->hash != 0, "cached block %d has no hash", b);
        else
            ck_assert_msg(m->hash == 0, "free block %d has a hash", b);
    }
    ck_assert_int_eq(n[ENG_BLOCK_FREE], s->blocks_free);
    ck_assert_int_eq(n[ENG_BLOCK_CACHED], s->blocks_cached);
    ck_assert_int_eq(n[ENG_BLOCK_USED], s->blocks_used);
}

/* Per-block tallies over every table of the snapshot. */
struct tally {
    int *refs;      /* [n_blocks] device entries naming the block */
    int *holders;   /* [n_blocks] distinct requests naming it */
    int *last;      /* [n_blocks] 1 + index of the last request counted in holders */
    int *tenant_ok; /* [n_blocks] a request of the map's tenant names it */
    int *host_seen; /* [host_blocks_total] */
};

/* One request's table: seq-major, logical order, entries that match the map;
 * its device_blocks are the distinct device blocks it names, its host_blocks
 * its host entries. */
static void check_req(const struct eng_snapshot *s, int k, struct tally *t, struct seen *sn)
{
    const struct eng_snap_req *q = &s->reqs[k];
    ck_assert_int_ge(q->n_table, 0);
    ck_assert(q->n_table == 0 || q->table != NULL);
    int dev = 0, host = 0, prev_seq = -1, next_logical = 0, within = 0;
    for (int j = 0; j < q->n_table; j++) {
        const struct eng_snap_entry *en = &q->table[j];
        ck_assert_msg(en->seq >= prev_seq && en->seq < 128, "req %llu: seq %d after %d",
                      (unsigned long long)q->id, en->seq, prev_seq);
        if (en->seq != prev_seq)
            next_logical = 0;
        prev_seq = en->seq;
        ck_assert_int_eq(en->logical, next_logical++);
        if (en->on_host) {
            ck_assert_int_eq(q->state, ENG_RS_SWAPPED);
            ck_assert(en->block >= 0 && en->block < s->host_blocks_total);
            ck_assert_int_eq(en->ref, 1);
            ck_assert_msg(!t->host_seen[en->block], "host block %d in two tables", en->block);
            t->host_seen[en->block] = 1;
            host++;
            continue;
        }
        ck_assert_int_eq(q->state, ENG_RS_RUNNING);
        ck_assert(en->block >= 0 && en->block < s->n_blocks);
        const struct eng_snap_block *m = &s->blocks[en->block];
        ck_assert_msg(m->state == ENG_BLOCK_USED, "req %llu names block %d, which is not used",
                      (unsigned long long)q->id, en->block);
        ck_assert_int_eq(en->ref, m->ref);
        ck_assert(en->hash == m->hash);
        sn->max_ref = en->ref > sn->max_ref ? en->ref : sn->max_ref;
        t->refs[en->block]++;
        if (t->last[en->block] != k + 1) {
            t->last[en->block] = k + 1;
            t->holders[en->block]++;
            dev++;
        } else {
            within = 1;
        }
        if (strcmp(s->tenants[m->tenant].name, q->tenant) == 0)
            t->tenant_ok[en->block] = 1;
    }
    ck_assert_msg(q->device_blocks == dev, "req %llu: device_blocks %d, table names %d",
                  (unsigned long long)q->id, q->device_blocks, dev);
    ck_assert_int_eq(q->host_blocks, host);
    if (q->state == ENG_RS_WAITING || q->state == ENG_RS_PREEMPTED)
        ck_assert_int_eq(q->n_table, 0);
    sn->device_entries += q->n_table - host;
    sn->host_entries += host;
    sn->shared_within += within;
}

/* The rule, with the snapshot's own numbers:
 *  - every device entry of every table names a USED block, with the map's
 *    ref and hash;
 *  - a USED block's ref is exactly the number of table entries naming it
 *    (no other holder exists), so each USED block is in some table and a
 *    non-USED block in none;
 *  - a request's device_blocks counts the distinct blocks it names, so
 *    sum(device_blocks) = sum over USED blocks of the requests naming it,
 *    which exceeds blocks_used by exactly the cross-request sharing;
 *  - host entries are the swapped requests' host_blocks, one table per
 *    host block, and add up to host_blocks_used;
 *  - a USED block's tenant is the tenant of a request naming it. */
static void check_snapshot(const struct eng_snapshot *s, struct seen *sn)
{
    memset(sn, 0, sizeof(*sn));
    check_map(s);
    size_t nb = (size_t)s->n_blocks, nh = (size_t)(s->host_blocks_total + 1);
    struct tally t = {calloc(nb, sizeof(int)), calloc(nb, sizeof(int)), calloc(nb, sizeof(int)),
                      calloc(nb, sizeof(int)), calloc(nh, sizeof(int))};
    int sum_dev = 0;
    for (int k = 0; k < s->n_reqs; k++) {
        check_req(s, k, &t, sn);
        sum_dev += s->reqs[k].device_blocks;
    }
    int sum_holders = 0, held = 0;
    for (int b = 0; b < s->n_blocks; b++) {
        const struct eng_snap_block *m = &s->blocks[b];
        ck_assert_msg(t.refs[b] == m->ref, "block %d: ref %d, named %d times", b, m->ref,
                      t.refs[b]);
        if (m->state == ENG_BLOCK_USED)
            ck_assert_msg(t.tenant_ok[b], "block %d: tenant %d holds none of it", b, m->tenant);
        sum_holders += t.holders[b];
        held += t.holders[b] > 0;
        sn->shared_across += t.holders[b] > 1;
    }
    ck_assert_int_eq(held, s->blocks_used);
    ck_assert_int_eq(sum_dev, sum_holders);
    ck_assert_int_eq(sn->host_entries, s->host_blocks_used);
    free(t.refs);
    free(t.holders);
    free(t.last);
    free(t.tenant_ok);
    free(t.host_seen);
}

/* After everything finished: the map holds no USED block and no tenant. */
static void assert_nothing_used(struct eng *e)
{
    ck_assert_int_eq(eng_wait_idle(e, 30), 0);
    struct eng_snapshot *s = eng_snapshot(e);
    ck_assert_ptr_nonnull(s);
    struct seen sn;
    check_snapshot(s, &sn);
    ck_assert_int_eq(s->n_reqs, 0);
    ck_assert_int_eq(s->blocks_used, 0);
    ck_assert_int_eq(s->host_blocks_used, 0);
    for (int b = 0; b < s->n_blocks; b++) {
        ck_assert_int_ne(s->blocks[b].state, ENG_BLOCK_USED);
        ck_assert_int_eq(s->blocks[b].tenant, -1);
    }
    eng_snapshot_free(s);
}

/* --------------------------------------------------------------- tests -- */

START_TEST(without_the_option_no_block_arrays_are_built)
{
    int32_t *p = synth_ids(40, 11);
    struct eng *e = eng_start((struct eng_opts){.n_blocks = 32});
    struct eng_request rq = greedy(1, "a", 1, p, 40, 40);
    struct eng_req *h = submit(e, &rq);
    uint64_t id = 1;
    int n0 = 0;
    wait_tokens(h, &n0, 2);
    /* The request holds blocks, yet neither the map nor a table is made. */
    for (int spins = 0;; spins++) {
        ck_assert_msg(spins < 4000, "request never seen running with blocks");
        struct eng_snapshot *s = eng_snapshot(e);
        const struct eng_snap_req *q = find_req(s, id);
        int running = q && q->state == ENG_RS_RUNNING && q->device_blocks > 0;
        ck_assert_int_eq(s->n_blocks, 0);
        ck_assert_ptr_null(s->blocks);
        for (int i = 0; i < s->n_reqs; i++) {
            ck_assert_int_eq(s->reqs[i].n_table, 0);
            ck_assert_ptr_null(s->reqs[i].table);
        }
        eng_snapshot_free(s);
        if (running)
            break;
        nap_ms(5);
    }
    ck_assert_int_eq(finish(h), ENG_FINISH_LENGTH);
    eng_stop(e);
    free(p);
}
END_TEST

START_TEST(map_and_tables_agree_in_every_snapshot_while_requests_run)
{
    enum { N = 3 };
    int32_t *p[N] = {synth_ids(37, 1), synth_ids(70, 2), synth_ids(40, 3)};
    int np[N] = {37, 70, 40};
    struct eng *e =
        eng_start((struct eng_opts){.n_blocks = 64, .max_batch_tokens = 64, .snapshot_blocks = 1});
    struct eng_request rq[N] = {greedy(1, "a", 1, p[0], np[0], 40),
                                greedy(2, "b", 1, p[1], np[1], 30),
                                greedy(3, "a", 1, p[2], np[2], 30)};
    /* The third has two sequences: after the prompt they fork and share its
     * full blocks. */
    rq[2].n = 2;
    rq[2].smp.temperature = 1.0f;
    rq[2].smp.seed = 7;
    struct eng_req *h[N];
    for (int i = 0; i < N; i++)
        h[i] = submit(e, &rq[i]);
    int checked = 0, forked = 0, n0[N] = {0};
    for (int spins = 0;; spins++) {
        ck_assert_msg(spins < 12000, "requests did not finish");
        int done = 1;
        for (int i = 0; i < N; i++) {
            take_tokens(h[i], &n0[i]);
            done &= eng_req_done(h[i]);
        }
        if (done)
            break;
        struct eng_snapshot *s = eng_snapshot(e);
        ck_assert_ptr_nonnull(s);
        struct seen sn;
        check_snapshot(s, &sn);
        checked += sn.device_entries > 0;
        const struct eng_snap_req *q = find_req(s, 3);
        if (q && q->n_seqs == 2 && q->device_blocks < q->n_table && sn.max_ref >= 2) {
            ck_assert_int_ge(sn.shared_within, 1);
            forked = 1;
        }
        eng_snapshot_free(s);
        nap_ms(5);
    }
    ck_assert_int_gt(checked, 0);
    ck_assert_msg(forked, "never saw the n = 2 request's sequences share blocks");
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(finish(h[i]), ENG_FINISH_LENGTH);
    assert_nothing_used(e);
    eng_stop(e);
    for (int i = 0; i < N; i++)
        free(p[i]);
}
END_TEST

START_TEST(shared_prompt_prefix_shows_shared_blocks_within_a_tenant_only)
{
    enum { PREFIX = 64 };
    int32_t *pa = synth_ids(80, 5), *pb = synth_ids(PREFIX + 20, 6);
    memcpy(pb, pa, sizeof(int32_t) * PREFIX); /* four whole blocks in common */
    struct eng *e = eng_start((struct eng_opts){.n_blocks = 64, .snapshot_blocks = 1});
    struct eng_request ra = greedy(1, "a", 1, pa, 80, 200),
                       rb = greedy(2, "a", 1, pb, PREFIX + 20, 200),
                       rc = greedy(3, "b", 1, pb, PREFIX + 20, 200);
    struct eng_req *ha = submit(e, &ra);
    int n0 = 0;
    wait_tokens(ha, &n0, 2); /* A's prompt is in the prefix cache */
    struct eng_req *hb = submit(e, &rb), *hc = submit(e, &rc);
    static const uint64_t ids[] = {1, 2, 3};
    struct eng_snapshot *s = wait_tables(e, ids, 3, ENG_RS_RUNNING);
    struct seen sn;
    check_snapshot(s, &sn);
    const struct eng_snap_req *a = find_req(s, 1), *b = find_req(s, 2), *c = find_req(s, 3);
    ck_assert_int_ge(b->cached_tokens, PREFIX);
    ck_assert_int_eq(c->cached_tokens, 0);
    for (int j = 0; j < PREFIX / 16; j++) {
        int32_t blk = a->table[j].block;
        ck_assert_int_eq(b->table[j].block, blk);
        ck_assert_int_ge(b->table[j].ref, 2);
        ck_assert(b->table[j].hash != 0 && b->table[j].hash == a->table[j].hash);
        ck_assert_int_ge(s->blocks[blk].ref, 2);
        /* Tenant b computed the same tokens but under its own salt. */
        for (int i = 0; i < c->n_table; i++)
            ck_assert_int_ne(c->table[i].block, blk);
        ck_assert(c->table[j].hash != a->table[j].hash);
    }
    ck_assert_int_ge(sn.shared_across, PREFIX / 16);
    ck_assert_int_gt(a->device_blocks + b->device_blocks + c->device_blocks, s->blocks_used);
    eng_snapshot_free(s);
    for (uint64_t id = 1; id <= 3; id++)
        ck_assert_int_eq(eng_cancel(e, id), ENG_OK);
    ck_assert_int_eq(finish(ha), ENG_FINISH_ABORTED);
    ck_assert_int_eq(finish(hb), ENG_FINISH_ABORTED);
    ck_assert_int_eq(finish(hc), ENG_FINISH_ABORTED);
    assert_nothing_used(e);
    eng_stop(e);
    free(pa);
    free(pb);
}
END_TEST

START_TEST(swapped_request_shows_its_blocks_in_the_host_pool)
{
    int32_t *pl = synth_ids(60, 8), *ph = synth_ids(200, 9);
    /* 14 blocks: the high-priority request grows to all of them, so the
     * evicted one stays in host memory until it is done. */
    struct eng *e = eng_start((struct eng_opts){
        .n_blocks = 14, .n_host_blocks = 32, .preempt = ENG_PREEMPT_SWAP, .snapshot_blocks = 1});
    struct eng_request rl = greedy(1, "lo", 5, pl, 60, 60), rh = greedy(2, "hi", 0, ph, 200, 24);
    struct eng_req *hl = submit(e, &rl);
    int n0 = 0;
    wait_tokens(hl, &n0, 2);
    ck_assert_int_eq(eng_evict(e, 1, 0), ENG_OK);
    struct eng_req *hh = submit(e, &rh);
    static const uint64_t ids[] = {1};
    struct eng_snapshot *s = wait_tables(e, ids, 1, ENG_RS_SWAPPED);
    struct seen sn;
    check_snapshot(s, &sn);
    const struct eng_snap_req *q = find_req(s, 1);
    ck_assert_int_gt(q->host_blocks, 0);
    ck_assert_int_eq(q->host_blocks, q->n_table);
    ck_assert_int_eq(q->device_blocks, 0);
    ck_assert_int_ge(s->host_blocks_used, q->host_blocks);
    /* 60 prompt tokens and a generated one: three full blocks, hashed. */
    for (int j = 0; j < q->n_table; j++) {
        ck_assert_int_eq(q->table[j].on_host, 1);
        if (j < 3)
            ck_assert(q->table[j].hash != 0);
    }
    eng_snapshot_free(s);
    ck_assert_int_eq(finish(hh), ENG_FINISH_LENGTH);
    ck_assert_int_eq(finish(hl), ENG_FINISH_LENGTH);
    assert_nothing_used(e);
    eng_stop(e);
    free(pl);
    free(ph);
}
END_TEST

Suite *test_suite(void)
{
    /* One model load per case, in the runner's own process: no fork. */
    setenv("CK_FORK", "no", 1);
    Suite *s = suite_create("engine_snapshot");
    TCase *tc = tcase_create("engine_snapshot");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_checked_fixture(tc, NULL, reap);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, without_the_option_no_block_arrays_are_built);
    tcase_add_test(tc, map_and_tables_agree_in_every_snapshot_while_requests_run);
    tcase_add_test(tc, shared_prompt_prefix_shows_shared_blocks_within_a_tenant_only);
    tcase_add_test(tc, swapped_request_shows_its_blocks_in_the_host_pool);
    suite_add_tcase(s, tc);
    return s;
}
