/*
 * tests/unit/test_sched_random.c — the scheduler under random operations.
 *
 * Each run draws pool sizes, budgets, block size, preemption mode and aging,
 * then applies thousands of random operations — submit (random tenant,
 * priority, n, prompt sharing a prefix with others, salt), cancel (also
 * between a plan and its commit), evict and evict-tenant (resumable or
 * abort), drain and undrain, tenant weights and caps, cost-model rates, and
 * steps executed by the fake engine.  Every step checks the plan, the
 * scheduler's and the pool's invariants with all live tables, every K/V
 * read, and every finished output against an uninterrupted run.  At the
 * end, with limits lifted, everything must finish and every block must be
 * free or cached, every host block free.
 */
#include "test_sched_fake.h"

struct rng {
    uint64_t s;
};

static uint32_t rnd(struct rng *g)
{
    g->s = g->s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(g->s >> 33);
}

/* Uniform in [lo, hi]. */
static int between(struct rng *g, int lo, int hi)
{
    return lo + (int)(rnd(g) % (uint32_t)(hi - lo + 1));
}

static struct sched_opts random_opts(struct rng *g)
{
    static const int block_sizes[] = {1, 2, 4, 8, 16};
    static const double bws[] = {1e6, 1e9, 10e9};
    struct sched_opts o = {
        .block_size = block_sizes[between(g, 0, 4)],
        .max_batch_tokens = between(g, 4, 160),
        .max_seqs = between(g, 1, 16),
        .preempt = (enum sched_preempt)between(g, 0, 2),
        .aging_s = between(g, 0, 1) ? 0.05 * between(g, 1, 4) : 0,
        .block_bytes = 1 << 16,
        .swap_bw = bws[between(g, 0, 2)],
        .prefill_rate = 2000,
        .check = 1,
        .share_first = (int)between(g, 0, 1),
    };
    o.n_blocks = between(g, 130, 600) / o.block_size + between(g, 0, 8);
    o.n_host_blocks = between(g, 0, 2) == 0 ? 0 : between(g, 1, 2 * o.n_blocks);
    o.max_chunk = between(g, 0, 1) ? 0 : between(g, 1, o.max_batch_tokens);
    return o;
}

struct rstate {
    struct rng g;
    int32_t bases[4][96]; /* shared prompt prefixes */
    uint64_t next_id;
    long submitted, refused, cancels, evicts;
};

static void random_submit(struct fx *f, struct rstate *st)
{
    struct rng *g = &st->g;
    int32_t prompt[96];
    int np = between(g, 1, 90);
    int shared = between(g, 0, np);
    const int32_t *base = st->bases[between(g, 0, 3)];
    for (int i = 0; i < np; i++)
        prompt[i] = i < shared ? base[i] : (int32_t)(rnd(g) % VOCAB);
    int64_t tenant = between(g, 0, 3);
    uint64_t salt = between(g, 0, 9) == 0 ? 99 : (uint64_t)tenant;
    int n = between(g, 0, 4) == 0 ? between(g, 2, 3) : 1;
    int rc = fx_submit(f, st->next_id++, tenant, between(g, 0, 3), prompt, np, between(g, 1, 40), n,
                       salt);
    REQUIRE(rc == 0 || rc == SCHED_E_TOOBIG || rc == SCHED_E_DRAINING, "submit: %s",
            sched_strerror(rc));
    st->submitted += rc == 0;
    st->refused += rc != 0;
}

static uint64_t random_id(struct rstate *st)
{
    return st->next_id ? rnd(&st->g) % st->next_id : 0;
}

static void cancel_between(struct fx *f, void *arg)
{
    struct rstate *st = arg;
    if (between(&st->g, 0, 7) == 0)
        st->cancels += sched_cancel(f->s, random_id(st)) == 0;
}

static void random_tenant(struct fx *f, struct rng *g)
{
    static const double weights[] = {0.5, 1, 2, 3};
    int cap_seqs = between(g, 0, 2) ? 0 : between(g, 3, 8);
    int cap_blocks = between(g, 0, 2) ? 0 : between(g, 12, 80);
    REQUIRE(sched_tenant_set(f->s, between(g, 0, 3), weights[between(g, 0, 3)], cap_seqs,
                             cap_blocks) == 0,
            "tenant_set refused");
}

static void random_op(struct fx *f, struct rstate *st)
{
    struct rng *g = &st->g;
    int op = between(g, 0, 99);
    if (op < 45) {
        fx_step(f);
    } else if (op < 70) {
        random_submit(f, st);
    } else if (op < 77) {
        st->cancels += sched_cancel(f->s, random_id(st)) == 0;
    } else if (op < 84) {
        st->evicts += sched_evict(f->s, random_id(st), between(g, 0, 3) == 0) == 0;
    } else if (op < 86) {
        sched_evict_tenant(f->s, between(g, 0, 3), between(g, 0, 3) == 0);
    } else if (op < 89) {
        sched_drain(f->s, between(g, 0, 3) == 0); /* mostly off */
    } else if (op < 93) {
        random_tenant(f, g);
    } else if (op < 95) {
        sched_set_rates(f->s, between(g, 0, 1) ? 1e6 : 1e10, between(g, 100, 10000));
    } else {
        fx_step(f);
    }
}

static void random_run(uint64_t seed, int n_ops)
{
    struct rstate st = {.g = {seed * 0x9E3779B97F4A7C15ULL + 1}};
    for (int b = 0; b < 4; b++)
        for (int i = 0; i < 96; i++)
            st.bases[b][i] = (int32_t)(rnd(&st.g) % VOCAB);
    struct fx *f = fx_new(random_opts(&st.g), between(&st.g, 0, 1) ? 23 : 0);
    f->dt = 0.01 * between(&st.g, 1, 5);
    f->abandon_mod = between(&st.g, 0, 1) ? between(&st.g, 2, 9) : 0;
    f->between = cancel_between;
    f->between_arg = &st;
    for (int i = 0; i < n_ops; i++)
        random_op(f, &st);
    /* lift every limit: all that is left must finish */
    sched_drain(f->s, 0);
    for (int t = 0; t < 4; t++)
        sched_tenant_set(f->s, t, 1, 0, 0);
    f->between = NULL;
    long steps = fx_run(f, 100000);
    ck_assert_msg(steps >= 0, "seed %llu: no progress, %d requests left", (unsigned long long)seed,
                  sched_n_live(f->s));
    check_all_free(f);
    struct sched_stats ss;
    sched_stats(f->s, &ss);
    if (getenv("SCHED_VERBOSE"))
        fprintf(
            stderr,
            "seed %llu: bs %d blocks %d host %d budget %d seqs %d mode %d aging %.2f | steps %ld "
            "(final %ld) sub %ld ref %ld fin %ld ab %ld | swap %ld/%ld/%ld/%ld rec "
            "%ld/%ld/%ld/%ld | cow %ld hits %ld/%ld\n",
            (unsigned long long)seed, f->o->block_size, f->o->n_blocks, f->o->n_host_blocks,
            f->o->max_batch_tokens, f->o->max_seqs, f->o->preempt, f->o->aging_s, ss.steps, steps,
            ss.submitted, ss.refused, ss.finished, ss.aborted, ss.preemptions[0][0],
            ss.preemptions[0][1], ss.preemptions[0][2], ss.preemptions[0][3], ss.preemptions[1][0],
            ss.preemptions[1][1], ss.preemptions[1][2], ss.preemptions[1][3], ss.cow_copies,
            ss.prefix_hit_tokens, ss.prefix_lookup_tokens);
    ck_assert_int_eq(ss.submitted, st.submitted);
    ck_assert_int_eq(ss.finished + ss.aborted, st.submitted);
    for (uint64_t id = 0; id < st.next_id; id++) {
        struct freq *q = id < (uint64_t)f->cap_reqs ? f->reqs[id] : NULL;
        ck_assert(!q || (q->done && !q->r));
    }
    fx_free(f);
}

START_TEST(random_operations_keep_every_invariant)
{
    /* 20 runs x 1500 operations, plus the steps that finish each run */
    random_run((uint64_t)_i, 1500);
}
END_TEST

START_TEST(random_operations_with_long_runs)
{
    random_run(1000 + (uint64_t)_i, 6000);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("sched_random");
    TCase *tc = tcase_create("random");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, random_operations_keep_every_invariant, 0, 20);
    tcase_add_loop_test(tc, random_operations_with_long_runs, 0, 4);
    suite_add_tcase(s, tc);
    return s;
}
