/*
 * tests/unit/test_sched.c — the scheduler's behaviour, driven by the fake
 * engine of test_sched_fake.h: joining the batch, chunked prefill, exact
 * outputs through swap and recompute, priorities and aging, tenant fair
 * share and caps, the prefix cache, n > 1 with copy-on-write, and the
 * control calls (cancel, evict, drain).
 */
#include "test_sched_fake.h"

/* --- 1. joining the batch --------------------------------------------------------- */

START_TEST(arrival_mid_generation_joins_the_next_step)
{
    struct fx *f = fx_new(opts(64, 0, 256, 16), 0);
    int32_t pa[20], pb[30];
    make_prompt(pa, 20, 1);
    make_prompt(pb, 30, 2);
    ck_assert_int_eq(fx_submit(f, 1, 0, 0, pa, 20, 40, 1, 7), 0);
    for (int i = 0; i < 5; i++)
        fx_step(f);
    struct sched_req *a = f->reqs[1]->r;
    ck_assert_int_eq(a->seqs[0].n_tokens, 25); /* one prompt step, then a token per step */
    ck_assert_int_eq(fx_submit(f, 2, 0, 0, pb, 30, 10, 1, 7), 0);
    struct sched_req *b = f->reqs[2]->r;
    const struct sched_plan *p = fx_step(f);
    ck_assert_int_eq(p->n_chunks, 2);
    ck_assert(p->chunks[0].req == a && p->chunks[0].decode);
    ck_assert(p->chunks[1].req == b && p->chunks[1].len == 30 && p->chunks[1].n_sample == 1);
    ck_assert_int_eq(a->seqs[0].n_tokens, 26);
    ck_assert_int_eq(b->seqs[0].n_tokens, 31);
    ck_assert_int_ge(fx_run(f, 1000), 0);
    ck_assert_int_eq(f->reqs[1]->state, SCHED_FINISHED);
    ck_assert_int_eq(f->reqs[2]->state, SCHED_FINISHED);
    check_all_free(f);
    fx_free(f);
}
END_TEST

/* --- 2. chunked prefill ------------------------------------------------------------ */

START_TEST(long_prompt_prefills_in_chunks_while_decodes_advance)
{
    struct fx *f = fx_new(opts(256, 0, 128, 16), 0);
    int32_t shortp[10], *longp = malloc(sizeof(int32_t) * 2000);
    make_prompt(longp, 2000, 99);
    for (int i = 0; i < 4; i++) {
        make_prompt(shortp, 10, 10 + i);
        ck_assert_int_eq(fx_submit(f, i, 0, 0, shortp, 10, 300, 1, 1), 0);
    }
    fx_step(f);
    ck_assert_int_eq(fx_submit(f, 9, 0, 0, longp, 2000, 5, 1, 1), 0);
    struct sched_seq *lq = &f->reqs[9]->r->seqs[0];
    int steps = 0;
    while (lq->n_computed < 2000) {
        int before[4];
        for (int i = 0; i < 4; i++)
            before[i] = f->reqs[i]->r->seqs[0].n_tokens;
        const struct sched_plan *p = fx_step(f);
        steps++;
        ck_assert_int_eq(p->n_chunks, 5);
        for (int i = 0; i < 4; i++) {
            ck_assert(p->chunks[i].decode);
            ck_assert_int_eq(f->reqs[i]->r->seqs[0].n_tokens, before[i] + 1);
        }
        ck_assert(!p->chunks[4].decode && p->chunks[4].seq == lq);
        ck_assert_int_le(p->chunks[4].len, 128 - 4);
        ck_assert_int_eq(p->n_tokens, 4 + p->chunks[4].len);
    }
    ck_assert_int_eq(steps, (2000 + 123) / 124);
    ck_assert_int_ge(fx_run(f, 2000), 0);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(f->reqs[i]->state, SCHED_FINISHED);
    ck_assert_int_eq(f->reqs[9]->seqs[0].n_out, 5);
    check_all_free(f);
    free(longp);
    fx_free(f);
}
END_TEST

/* --- 3. preemption keeps outputs exact ----------------------------------------------- */

/* A workload whose decodes outgrow a 24-block pool; every output is
 * checked against the uninterrupted run when its request finishes. */
static void run_pressure(struct sched_opts o, struct sched_stats *st)
{
    struct fx *f = fx_new(o, 0);
    int32_t prompt[80];
    for (int i = 0; i < 12; i++) {
        int np = 20 + (i * 7) % 50;
        make_prompt(prompt, np, 100 + i);
        ck_assert_int_eq(fx_submit(f, i, i % 3, 0, prompt, np, 60, i == 5 ? 2 : 1, 1), 0);
    }
    ck_assert_int_ge(fx_run(f, 20000), 0);
    for (int i = 0; i < 12; i++) {
        ck_assert_int_eq(f->reqs[i]->state, SCHED_FINISHED);
        for (int k = 0; k < f->reqs[i]->n; k++)
            ck_assert_int_eq(f->reqs[i]->seqs[k].n_out, 60);
    }
    sched_stats(f->s, st);
    check_all_free(f);
    fx_free(f);
}

static long sum_why(const struct sched_stats *st, int mode)
{
    long n = 0;
    for (int w = 0; w < SCHED_WHY_COUNT; w++)
        n += st->preemptions[mode][w];
    return n;
}

START_TEST(swap_preemption_gives_the_uninterrupted_tokens)
{
    struct sched_opts o = opts(24, 64, 64, 8);
    o.preempt = SCHED_PREEMPT_SWAP;
    struct sched_stats st;
    run_pressure(o, &st);
    ck_assert_int_gt(sum_why(&st, 0), 0);
    ck_assert_int_eq(sum_why(&st, 1), 0);
    ck_assert_int_gt(st.swap_out_blocks, 0);
    ck_assert_int_gt(st.swap_in_blocks, 0); /* blocks still cached come back without a copy */
    ck_assert_int_le(st.swap_in_blocks, st.swap_out_blocks);
    ck_assert_uint_eq(st.swap_out_bytes, (uint64_t)st.swap_out_blocks << 20);
}
END_TEST

START_TEST(recompute_preemption_gives_the_uninterrupted_tokens)
{
    struct sched_opts o = opts(24, 64, 64, 8);
    o.preempt = SCHED_PREEMPT_RECOMPUTE;
    struct sched_stats st;
    run_pressure(o, &st);
    ck_assert_int_eq(sum_why(&st, 0), 0);
    ck_assert_int_gt(sum_why(&st, 1), 0);
    ck_assert_int_eq(st.swap_out_blocks, 0);
    /* prompts are unique: every hit is a recomputed request finding its own blocks */
    ck_assert_int_gt(st.prefix_hit_tokens, 0);
}
END_TEST

START_TEST(full_host_pool_means_recompute)
{
    struct sched_opts o = opts(24, 0, 64, 8);
    o.preempt = SCHED_PREEMPT_SWAP;
    struct sched_stats st;
    run_pressure(o, &st);
    ck_assert_int_eq(sum_why(&st, 0), 0);
    ck_assert_int_gt(sum_why(&st, 1), 0);
}
END_TEST

START_TEST(auto_mode_follows_the_cost_model)
{
    struct sched_opts o = opts(24, 64, 64, 8);
    struct sched_stats st;
    run_pressure(o, &st); /* 1 MiB blocks at 10 GB/s vs 5000 tokens/s: swap is cheaper */
    ck_assert_int_gt(sum_why(&st, 0), 0);
    ck_assert_int_eq(sum_why(&st, 1), 0);
    o.swap_bw = 1e6; /* 2 s per block: recompute is cheaper */
    run_pressure(o, &st);
    ck_assert_int_eq(sum_why(&st, 0), 0);
    ck_assert_int_gt(sum_why(&st, 1), 0);
}
END_TEST

START_TEST(rates_reach_the_cost_model)
{
    struct sched_opts o = opts(24, 64, 64, 8);
    o.swap_bw = 1e6;
    struct fx *f = fx_new(o, 0);
    sched_set_rates(f->s, 10e9, 0);
    ck_assert(sched_options(f->s)->swap_bw == 10e9);
    ck_assert(sched_options(f->s)->prefill_rate == 5000);
    fx_free(f);
}
END_TEST

/* --- 4. priority ---------------------------------------------------------------------- */

START_TEST(high_priority_arrival_preempts_low_priority_work)
{
    struct sched_opts o = opts(20, 40, 256, 8);
    struct fx *f = fx_new(o, 0);
    int32_t prompt[100];
    for (int i = 0; i < 3; i++) {
        make_prompt(prompt, 60, 200 + i);
        ck_assert_int_eq(fx_submit(f, i, 1, 5, prompt, 60, 100, 1, 1), 0);
    }
    for (int i = 0; i < 20; i++)
        fx_step(f); /* 3 x 5 blocks held, 5 free */
    ck_assert_int_eq(kv_pool_free_blocks(sched_pool(f->s)), 5);
    make_prompt(prompt, 100, 300);
    ck_assert_int_eq(fx_submit(f, 10, 2, 0, prompt, 100, 20, 1, 2), 0);
    struct sched_req *hi = f->reqs[10]->r;
    const struct sched_plan *p = fx_step(f);
    ck_assert_int_ge(p->n_preempted, 1);
    for (int i = 0; i < p->n_preempted; i++) {
        ck_assert_int_eq(p->preempted[i].why, SCHED_WHY_PRIORITY);
        ck_assert_int_eq(p->preempted[i].req->priority, 5);
        ck_assert_int_eq(p->preempted[i].mode, SCHED_PREEMPT_SWAP);
    }
    ck_assert(plan_has_seq(p, hi));
    ck_assert_int_ge(fx_run(f, 5000), 0);
    ck_assert_int_eq(f->reqs[10]->n_preemptions, 0);
    int preempted = 0;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(f->reqs[i]->state, SCHED_FINISHED);
        ck_assert_int_eq(f->reqs[i]->seqs[0].n_out, 100);
        preempted += f->reqs[i]->n_preemptions;
    }
    ck_assert_int_ge(preempted, 1);
    check_all_free(f);
    fx_free(f);
}
END_TEST

START_TEST(waiting_work_never_preempts_equal_priority)
{
    struct fx *f = fx_new(opts(20, 40, 256, 8), 0);
    int32_t prompt[100];
    for (int i = 0; i < 3; i++) {
        make_prompt(prompt, 60, 200 + i);
        ck_assert_int_eq(fx_submit(f, i, 1, 3, prompt, 60, 100, 1, 1), 0);
    }
    for (int i = 0; i < 20; i++)
        fx_step(f);
    make_prompt(prompt, 100, 300);
    ck_assert_int_eq(fx_submit(f, 10, 2, 3, prompt, 100, 20, 1, 2), 0);
    const struct sched_plan *p = fx_step(f);
    ck_assert_int_eq(p->n_preempted, 0);
    ck_assert_int_eq(f->reqs[10]->r->state, SCHED_WAITING);
    ck_assert_int_ge(fx_run(f, 5000), 0);
    check_all_free(f);
    fx_free(f);
}
END_TEST

START_TEST(swapped_work_resumes_before_new_admissions)
{
    struct sched_opts o = opts(64, 64, 64, 1);
    o.preempt = SCHED_PREEMPT_SWAP;
    struct fx *f = fx_new(o, 0);
    int32_t prompt[20];
    make_prompt(prompt, 20, 41);
    ck_assert_int_eq(fx_submit(f, 1, 1, 0, prompt, 20, 30, 1, 1), 0);
    for (int i = 0; i < 3; i++)
        fx_step(f);
    ck_assert_int_eq(sched_evict(f->s, 1, 0), 0);
    fx_step(f);
    ck_assert_int_eq(f->reqs[1]->r->state, SCHED_SWAPPED);
    ck_assert_int_eq(fx_submit(f, 2, 2, 0, prompt, 20, 30, 1, 2), 0);
    const struct sched_plan *p = fx_step(f);
    ck_assert_int_gt(p->n_swap_in, 0);
    ck_assert(plan_has_seq(p, f->reqs[1]->r));
    ck_assert_int_eq(f->reqs[2]->r->state, SCHED_WAITING);
    ck_assert_int_ge(fx_run(f, 1000), 0);
    check_all_free(f);
    fx_free(f);
}
END_TEST

/* --- 5. fair share ----------------------------------------------------------------------- */

struct fair_shape {
    int prompt_a, max_a, prompt_b, max_b;
};

/* Tenant 1 submits 5 requests for each of tenant 2's; both stay backlogged.
 * Returns (service of 1 / weight 1) / (service of 2 / weight 2) over a
 * window, service as VTC counts it: prompt tokens computed + 2 x tokens
 * generated. */
static double fair_ratio(double wa, double wb, struct fair_shape sh)
{
    struct fx *f = fx_new(opts(64, 0, 64, 8), 0);
    sched_tenant_set(f->s, 1, wa, 0, 0);
    sched_tenant_set(f->s, 2, wb, 0, 0);
    int32_t prompt[64];
    uint64_t id = 0;
    double svc0[2] = {0, 0}, svc1[2] = {0, 0};
    for (int step = 0; step < 1600; step++) {
        struct sched_tenant_info ti[2];
        sched_tenant_info(f->s, 0, &ti[0]);
        sched_tenant_info(f->s, 1, &ti[1]);
        for (int k = 0; k < 5 && ti[0].n_waiting < 40; k++, id++) {
            make_prompt(prompt, sh.prompt_a, (uint32_t)id);
            fx_submit(f, id, 1, 0, prompt, sh.prompt_a, sh.max_a, 1, 1);
        }
        if (ti[1].n_waiting < 8) {
            make_prompt(prompt, sh.prompt_b, (uint32_t)id);
            fx_submit(f, id++, 2, 0, prompt, sh.prompt_b, sh.max_b, 1, 2);
        }
        for (int t = 0; t < 2; t++) {
            double svc = ti[t].prefill_tokens + 2.0 * f->generated[t + 1];
            if (step == 300)
                svc0[t] = svc;
            svc1[t] = svc;
        }
        fx_step(f);
    }
    for (uint64_t i = 0; i < id; i++)
        sched_cancel(f->s, i);
    fx_run(f, 10);
    check_all_free(f);
    fx_free(f);
    return ((svc1[0] - svc0[0]) / wa) / ((svc1[1] - svc0[1]) / wb);
}

START_TEST(fair_share_follows_weights_whatever_the_request_rates)
{
    struct fair_shape same = {24, 16, 24, 16}, differ = {12, 8, 40, 30};
    double r;
    r = fair_ratio(1, 1, same);
    ck_assert_msg(r > 0.9 && r < 1.1, "1:1 same shapes: %.3f", r);
    r = fair_ratio(2, 1, same);
    ck_assert_msg(r > 0.9 && r < 1.1, "2:1 same shapes: %.3f", r);
    r = fair_ratio(1, 1, differ);
    ck_assert_msg(r > 0.9 && r < 1.1, "1:1 different shapes: %.3f", r);
    r = fair_ratio(2, 1, differ);
    ck_assert_msg(r > 0.9 && r < 1.1, "2:1 different shapes: %.3f", r);
}
END_TEST

START_TEST(idle_tenant_banks_no_credit)
{
    struct fx *f = fx_new(opts(64, 0, 64, 4), 0);
    int32_t prompt[16];
    make_prompt(prompt, 16, 1);
    for (int i = 0; i < 20; i++)
        fx_submit(f, i, 1, 0, prompt, 16, 8, 1, 1);
    fx_run(f, 10000);
    make_prompt(prompt, 16, 2);
    fx_submit(f, 100, 1, 0, prompt, 16, 8, 1, 1); /* tenant 1 stays active */
    fx_submit(f, 101, 2, 0, prompt, 16, 8, 1, 2); /* tenant 2 arrives */
    struct sched_tenant_info a, b;
    sched_tenant_info(f->s, 0, &a);
    sched_tenant_info(f->s, 1, &b);
    ck_assert_int_eq(b.tenant, 2);
    ck_assert(b.vtc >= a.vtc - 1e-9);
    fx_run(f, 1000);
    fx_free(f);
}
END_TEST

/* --- 6. tenant device-block cap ------------------------------------------------------------ */

START_TEST(tenant_block_cap_holds_and_its_own_work_pays)
{
    struct fx *f = fx_new(opts(64, 64, 128, 16), 0);
    ck_assert_int_eq(sched_tenant_set(f->s, 1, 1, 0, 12), 0);
    int32_t prompt[30];
    for (int i = 0; i < 6; i++) {
        make_prompt(prompt, 30, 400 + i);
        ck_assert_int_eq(fx_submit(f, i, 1, 0, prompt, 30, 80, 1, 1), 0);
    }
    for (int i = 0; i < 3; i++) {
        make_prompt(prompt, 30, 500 + i);
        ck_assert_int_eq(fx_submit(f, 10 + i, 2, 0, prompt, 30, 40, 1, 2), 0);
    }
    ck_assert_int_ge(fx_run(f, 10000), 0); /* the cap is checked after every step */
    struct sched_stats st;
    sched_stats(f->s, &st);
    ck_assert_int_gt(st.preemptions[0][SCHED_WHY_TENANT_CAP], 0);
    ck_assert_int_eq(st.preemptions[0][SCHED_WHY_BLOCKS] + st.preemptions[1][SCHED_WHY_BLOCKS], 0);
    struct sched_tenant_info t1, t2;
    sched_tenant_info(f->s, 0, &t1);
    sched_tenant_info(f->s, 1, &t2);
    ck_assert_int_gt(t1.preemptions, 0);
    ck_assert_int_eq(t2.preemptions, 0);
    ck_assert_int_le(f->max_tenant_blocks_seen[0], 12);
    ck_assert_int_ge(f->max_tenant_blocks_seen[0], 10);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(f->reqs[i]->state, SCHED_FINISHED);
    check_all_free(f);
    fx_free(f);
}
END_TEST

START_TEST(lowered_tenant_cap_preempts_that_tenant_at_the_next_step)
{
    struct fx *f = fx_new(opts(64, 64, 128, 16), 0);
    int32_t prompt[40];
    for (int i = 0; i < 4; i++) {
        make_prompt(prompt, 40, 600 + i);
        ck_assert_int_eq(fx_submit(f, i, 1, 0, prompt, 40, 50, 1, 1), 0);
    }
    make_prompt(prompt, 40, 700);
    ck_assert_int_eq(fx_submit(f, 9, 2, 0, prompt, 40, 50, 1, 2), 0);
    for (int i = 0; i < 5; i++)
        fx_step(f);
    ck_assert_int_eq(sched_tenant_set(f->s, 1, 1, 0, 6), 0);
    const struct sched_plan *p = fx_step(f);
    ck_assert_int_ge(p->n_preempted, 2);
    for (int i = 0; i < p->n_preempted; i++) {
        ck_assert_int_eq(p->preempted[i].why, SCHED_WHY_TENANT_CAP);
        ck_assert_int_eq(p->preempted[i].req->tenant, 1);
    }
    struct sched_tenant_info t1;
    sched_tenant_info(f->s, 0, &t1);
    ck_assert_int_le(t1.dev_blocks, 6);
    ck_assert_int_ge(fx_run(f, 10000), 0);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(f->reqs[i]->state, SCHED_FINISHED);
    check_all_free(f);
    fx_free(f);
}
END_TEST

START_TEST(tenant_running_cap_limits_admission)
{
    struct fx *f = fx_new(opts(128, 0, 256, 16), 0);
    ck_assert_int_eq(sched_tenant_set(f->s, 1, 1, 2, 0), 0);
    int32_t prompt[20];
    make_prompt(prompt, 20, 5);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(fx_submit(f, i, 1, 0, prompt, 20, 30, 1, 1), 0);
    ck_assert_int_eq(fx_submit(f, 10, 1, 0, prompt, 20, 30, 3, 1), SCHED_E_TOOBIG);
    for (int s = 0; s < 40; s++) {
        fx_step(f);
        struct sched_tenant_info t;
        sched_tenant_info(f->s, 0, &t);
        ck_assert_int_le(t.running_seqs, 2);
    }
    ck_assert_int_ge(fx_run(f, 1000), 0);
    fx_free(f);
}
END_TEST

/* --- 7. prefix cache ------------------------------------------------------------------------- */

START_TEST(prefix_cache_hits_within_a_salt_only)
{
    struct fx *f = fx_new(opts(64, 0, 256, 8), 0);
    int32_t prompt[64];
    make_prompt(prompt, 64, 77);
    ck_assert_int_eq(fx_submit(f, 1, 1, 0, prompt, 64, 10, 1, 111), 0);
    ck_assert_int_ge(fx_run(f, 100), 0);
    ck_assert_int_eq(f->reqs[1]->n_cached, 0);
    ck_assert_int_eq(fx_submit(f, 2, 1, 0, prompt, 64, 10, 1, 111), 0);
    ck_assert_int_eq(fx_submit(f, 3, 2, 0, prompt, 64, 10, 1, 222), 0);
    const struct sched_plan *p = fx_step(f);
    ck_assert_int_eq(p->n_chunks, 2);
    ck_assert_int_eq(p->chunks[0].start, 48); /* the last prompt token is always computed */
    ck_assert_int_eq(p->chunks[1].start, 0);
    ck_assert_int_ge(fx_run(f, 100), 0);
    ck_assert_int_eq(f->reqs[2]->n_cached, 48);
    ck_assert_int_eq(f->reqs[3]->n_cached, 0);
    struct sched_stats st;
    sched_stats(f->s, &st);
    ck_assert_int_eq(st.prefix_hit_tokens, 48);
    ck_assert_int_eq(st.prefix_lookup_tokens, 3 * 63);
    check_all_free(f);
    fx_free(f);
}
END_TEST

START_TEST(concurrent_requests_share_a_system_prompt)
{
    struct fx *f = fx_new(opts(64, 0, 256, 8), 0);
    int32_t prompt[50];
    make_prompt(prompt, 50, 78);
    ck_assert_int_eq(fx_submit(f, 1, 1, 0, prompt, 40, 30, 1, 5), 0);
    fx_step(f);
    prompt[45] = 1; /* same first 40 tokens, different tail */
    ck_assert_int_eq(fx_submit(f, 2, 1, 0, prompt, 50, 30, 1, 5), 0);
    fx_step(f);
    ck_assert_int_eq(f->reqs[2]->r->n_cached, 32);
    /* both tables hold the first two blocks */
    ck_assert_int_eq(f->reqs[2]->r->seqs[0].table.blocks[0],
                     f->reqs[1]->r->seqs[0].table.blocks[0]);
    ck_assert_int_eq(kv_block_refs(sched_pool(f->s), f->reqs[1]->r->seqs[0].table.blocks[1]), 2);
    ck_assert_int_ge(fx_run(f, 1000), 0);
    check_all_free(f);
    fx_free(f);
}
END_TEST

/* --- 8. n > 1 ------------------------------------------------------------------------------- */

START_TEST(n3_shares_the_prompt_and_copies_on_write)
{
    struct fx *f = fx_new(opts(64, 0, 256, 8), 0);
    int32_t prompt[40];
    make_prompt(prompt, 40, 88);
    ck_assert_int_eq(fx_submit(f, 1, 1, 0, prompt, 40, 20, 3, 1), 0);
    struct sched_req *r = f->reqs[1]->r;
    const struct sched_plan *p = fx_step(f);
    ck_assert_int_eq(p->n_chunks, 1);
    ck_assert_int_eq(p->chunks[0].len, 40);
    ck_assert_int_eq(p->chunks[0].n_sample, 3);
    const struct kv_pool *pool = sched_pool(f->s);
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(r->seqs[k].n_computed, 40);
        ck_assert_int_eq(r->seqs[k].n_tokens, 41);
        ck_assert_int_eq(r->seqs[k].table.n_blocks, 3);
        for (int b = 0; b < 3; b++) {
            ck_assert_int_eq(r->seqs[k].table.blocks[b], r->seqs[0].table.blocks[b]);
            ck_assert_int_eq(kv_block_refs(pool, r->seqs[0].table.blocks[b]), 3);
        }
    }
    struct sched_req_info ri;
    sched_req_info(f->s, r, f->now, &ri);
    ck_assert_int_eq(ri.dev_blocks, 3);
    int32_t shared = r->seqs[0].table.blocks[2];
    p = fx_step(f);
    ck_assert_int_eq(p->n_chunks, 3);
    ck_assert_int_eq(p->n_cow, 2);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(p->cow[i].src, shared);
    ck_assert_int_ne(r->seqs[0].table.blocks[2], r->seqs[1].table.blocks[2]);
    ck_assert_int_ne(r->seqs[1].table.blocks[2], r->seqs[2].table.blocks[2]);
    ck_assert_int_eq(kv_block_refs(pool, r->seqs[0].table.blocks[0]), 3);
    ck_assert_int_eq(kv_block_refs(pool, r->seqs[0].table.blocks[2]), 1);
    ck_assert_int_ge(fx_run(f, 1000), 0);
    struct freq *q = f->reqs[1];
    ck_assert_int_eq(q->state, SCHED_FINISHED);
    ck_assert(memcmp(q->seqs[0].out, q->seqs[1].out, 20 * sizeof(int32_t)) != 0);
    ck_assert(memcmp(q->seqs[1].out, q->seqs[2].out, 20 * sizeof(int32_t)) != 0);
    check_all_free(f);
    fx_free(f);
}
END_TEST

START_TEST(sequences_of_one_request_finish_on_their_own)
{
    struct fx *f = fx_new(opts(64, 0, 256, 8), 0);
    int32_t prompt[20];
    make_prompt(prompt, 20, 89);
    ck_assert_int_eq(fx_submit(f, 1, 1, 0, prompt, 20, 30, 2, 1), 0);
    struct sched_req *r = f->reqs[1]->r;
    fx_step(f);
    fx_step(f);
    sched_finish_seq(f->s, &r->seqs[1], SCHED_END_STOP);
    ck_assert_int_eq(r->state, SCHED_RUNNING);
    ck_assert_int_eq(r->seqs[1].table.n_blocks, 0);
    const struct sched_plan *p = fx_step(f);
    ck_assert_int_eq(p->n_chunks, 1);
    ck_assert(p->chunks[0].seq == &r->seqs[0]);
    ck_assert_int_ge(fx_run(f, 1000), 0);
    ck_assert_int_eq(f->reqs[1]->seqs[1].n_out, 2);
    ck_assert_int_eq(f->reqs[1]->seqs[0].n_out, 30);
    fx_free(f);
}
END_TEST

/* --- aging ---------------------------------------------------------------------------------- */

/* A priority-3 request against a stream of priority-0 work that keeps the
 * batch full; returns the step at which it was first admitted, -1 if not
 * within `steps`. */
static long low_priority_admitted_at(double aging_s, long steps, struct fx **out)
{
    struct sched_opts o = opts(64, 0, 64, 4);
    o.aging_s = aging_s;
    struct fx *f = fx_new(o, 0);
    int32_t prompt[16];
    make_prompt(prompt, 16, 1);
    ck_assert_int_eq(fx_submit(f, 0, 1, 3, prompt, 16, 8, 1, 1), 0);
    uint64_t id = 1;
    long at = -1;
    for (long s = 0; s < steps && at < 0; s++) {
        struct sched_tenant_info t;
        sched_tenant_info(f->s, 0, &t);
        for (; t.n_waiting < 8; t.n_waiting++, id++) {
            make_prompt(prompt, 16, (uint32_t)id);
            ck_assert_int_eq(fx_submit(f, id, 1, 0, prompt, 16, 8, 1, 1), 0);
        }
        fx_step(f);
        if (f->reqs[0]->r && f->reqs[0]->r->first_admitted >= 0)
            at = s;
    }
    *out = f;
    return at;
}

START_TEST(without_aging_low_priority_waits_under_saturation)
{
    struct fx *f;
    ck_assert_int_eq(low_priority_admitted_at(0, 600, &f), -1);
    struct sched_req_info ri;
    sched_req_info(f->s, f->reqs[0]->r, f->now, &ri);
    ck_assert_int_eq(ri.state, SCHED_WAITING);
    ck_assert_int_eq(ri.eff_priority, 3);
    ck_assert(ri.wait_s > 5.9);
    /* once the stream stops, it runs */
    ck_assert_int_ge(fx_run(f, 1000), 0);
    ck_assert_int_eq(f->reqs[0]->state, SCHED_FINISHED);
    fx_free(f);
}
END_TEST

START_TEST(with_aging_low_priority_rises_one_level_per_period)
{
    struct fx *f;
    /* 0.5 s per level at 0.01 s per step: priority 0 after 150 steps */
    long at = low_priority_admitted_at(0.5, 600, &f);
    ck_assert_int_ge(at, 149);
    ck_assert_int_le(at, 200);
    ck_assert_int_eq(f->reqs[0]->r->eff_priority, 0);
    ck_assert_int_ge(fx_run(f, 1000), 0);
    ck_assert_int_eq(f->reqs[0]->state, SCHED_FINISHED);
    fx_free(f);
}
END_TEST

/* --- control -----------------------------------------------------------------------------------
 */

START_TEST(submit_refuses_bad_duplicate_and_impossible_requests)
{
    struct fx *f = fx_new(opts(8, 0, 64, 4), 0);
    int32_t prompt[200];
    make_prompt(prompt, 200, 3);
    ck_assert_int_eq(fx_submit(f, 1, 1, 0, prompt, 0, 10, 1, 1), SCHED_E_INVAL);
    ck_assert_int_eq(fx_submit(f, 1, 1, 0, prompt, 10, 0, 1, 1), SCHED_E_INVAL);
    ck_assert_int_eq(fx_submit(f, 1, 1, 0, prompt, 10, 10, 0, 1), SCHED_E_INVAL);
    ck_assert_int_eq(fx_submit(f, 1, 1, 0, prompt, 10, 10, 1, 1), 0);
    ck_assert_int_eq(
        sched_submit(f->s,
                     &(struct sched_params){
                         .id = 1, .prompt = prompt, .n_prompt = 5, .max_tokens = 5, .n = 1},
                     NULL),
        SCHED_E_DUP);
    ck_assert_int_eq(fx_submit(f, 2, 1, 0, prompt, 120, 10, 1, 1), SCHED_E_TOOBIG);
    ck_assert_int_eq(fx_submit(f, 3, 1, 0, prompt, 10, 10, 5, 1), SCHED_E_TOOBIG);
    ck_assert_int_eq(fx_submit(f, 4, 1, 0, prompt, 60, 69, 1, 1), 0); /* 128 tokens: 8 blocks */
    ck_assert_int_eq(fx_submit(f, 5, 1, 0, prompt, 60, 70, 1, 1), SCHED_E_TOOBIG);
    struct sched_stats st;
    sched_stats(f->s, &st);
    ck_assert_int_eq(st.refused, 7);
    ck_assert_int_eq(st.submitted, 2);
    ck_assert_str_eq(sched_strerror(SCHED_E_TOOBIG),
                     "request can never fit the KV pool or its limits");
    ck_assert_int_ge(fx_run(f, 1000), 0);
    fx_free(f);
}
END_TEST

START_TEST(bad_options_are_refused)
{
    ck_assert_ptr_null(sched_new(&(struct sched_opts){.n_blocks = 0}));
    ck_assert_ptr_null(sched_new(&(struct sched_opts){.n_blocks = 4, .n_host_blocks = -1}));
    ck_assert_ptr_null(sched_new(&(struct sched_opts){.n_blocks = 4, .aging_s = -1}));
    ck_assert_ptr_null(sched_new(NULL));
    struct sched *s = sched_new(&(struct sched_opts){.n_blocks = 4});
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(sched_options(s)->max_batch_tokens, 512);
    ck_assert_int_eq(sched_options(s)->block_size, 16);
    ck_assert_int_eq(sched_tenant_set(s, 1, 0, 0, 0), -1);
    sched_free(s);
}
END_TEST

/* Builds, in one pool, a request in each state: waiting, mid-prefill,
 * swapped and preempted for recompute; cancels each. */
START_TEST(cancel_frees_everything_in_every_state)
{
    struct sched_opts o = opts(64, 64, 32, 8);
    o.preempt = SCHED_PREEMPT_SWAP;
    struct fx *f = fx_new(o, 0);
    int32_t prompt[200];
    make_prompt(prompt, 200, 9);
    ck_assert_int_eq(fx_submit(f, 1, 1, 0, prompt, 40, 50, 1, 1), 0);  /* will be swapped */
    ck_assert_int_eq(fx_submit(f, 2, 1, 0, prompt, 200, 50, 1, 1), 0); /* mid-prefill */
    fx_step(f);
    fx_step(f);
    ck_assert_int_eq(sched_evict(f->s, 1, 0), 0);
    const struct sched_plan *p = fx_step(f);
    ck_assert_int_eq(p->n_preempted, 1);
    ck_assert_int_eq(p->preempted[0].why, SCHED_WHY_EVICT);
    ck_assert_int_eq(f->reqs[1]->r->state, SCHED_SWAPPED);
    ck_assert_int_gt(kv_pool_host_free_blocks(sched_pool(f->s)), 0);
    ck_assert_int_lt(kv_pool_host_free_blocks(sched_pool(f->s)), 64);
    struct sched_seq *q2 = &f->reqs[2]->r->seqs[0];
    ck_assert(q2->n_computed > 0 && q2->n_computed < 200);
    ck_assert_int_eq(fx_submit(f, 3, 1, 5, prompt, 30, 50, 1, 1), 0); /* stays waiting */
    ck_assert_int_eq(sched_cancel(f->s, 1), 0);
    ck_assert_int_eq(kv_pool_host_free_blocks(sched_pool(f->s)), 64);
    ck_assert_int_eq(sched_cancel(f->s, 2), 0);
    ck_assert_int_eq(sched_cancel(f->s, 3), 0);
    ck_assert_int_eq(sched_cancel(f->s, 3), -1);
    ck_assert_int_eq(sched_cancel(f->s, 99), -1);
    ck_assert_int_eq(sched_n_live(f->s), 0);
    check_all_free(f);
    for (int i = 1; i <= 3; i++) {
        struct sched_req *r = sched_pop_done(f->s);
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(r->id, (uint64_t)i);
        ck_assert_int_eq(r->state, SCHED_ABORTED);
        ck_assert_int_eq(r->end, SCHED_END_CANCELLED);
        record_done(f, r);
    }
    ck_assert_ptr_null(sched_pop_done(f->s));
    fx_free(f);
}
END_TEST

START_TEST(recompute_preempted_request_cancels_clean)
{
    struct sched_opts o = opts(64, 0, 256, 8);
    struct fx *f = fx_new(o, 0);
    int32_t prompt[40];
    make_prompt(prompt, 40, 19);
    ck_assert_int_eq(fx_submit(f, 1, 1, 0, prompt, 40, 50, 2, 1), 0);
    for (int i = 0; i < 4; i++)
        fx_step(f);
    ck_assert_int_eq(sched_evict(f->s, 1, 0), 0);
    fx_step(f);
    ck_assert_int_eq(f->reqs[1]->r->state, SCHED_PREEMPTED);
    ck_assert_int_eq(sched_cancel(f->s, 1), 0);
    check_all_free(f);
    ck_assert_int_ge(fx_run(f, 10), 0);
    fx_free(f);
}
END_TEST

static void cancel_all_running(struct fx *f, void *arg)
{
    (void)arg;
    for (int i = 0; i < f->cap_reqs; i++)
        if (f->reqs[i] && f->reqs[i]->r && f->reqs[i]->r->state == SCHED_RUNNING)
            sched_cancel(f->s, f->reqs[i]->id);
}

START_TEST(cancel_between_plan_and_commit_is_safe)
{
    struct fx *f = fx_new(opts(64, 0, 64, 8), 0);
    int32_t prompt[100];
    make_prompt(prompt, 100, 29);
    ck_assert_int_eq(fx_submit(f, 1, 1, 0, prompt, 100, 50, 3, 1), 0);
    ck_assert_int_eq(fx_submit(f, 2, 1, 0, prompt, 30, 50, 1, 1), 0);
    fx_step(f);
    f->between = cancel_all_running;
    fx_step(f);
    ck_assert_int_eq(sched_n_live(f->s), 0);
    check_all_free(f);
    ck_assert_int_eq(f->reqs[1]->state, SCHED_ABORTED);
    fx_free(f);
}
END_TEST

START_TEST(evicted_request_resumes_and_completes_exactly)
{
    for (int mode = SCHED_PREEMPT_SWAP; mode <= SCHED_PREEMPT_RECOMPUTE; mode++) {
        struct sched_opts o = opts(64, 64, 64, 8);
        o.preempt = mode;
        struct fx *f = fx_new(o, 0);
        int32_t prompt[50];
        make_prompt(prompt, 50, 31);
        ck_assert_int_eq(fx_submit(f, 1, 7, 0, prompt, 50, 40, 2, 1), 0);
        ck_assert_int_eq(fx_submit(f, 2, 7, 0, prompt, 30, 40, 1, 1), 0);
        ck_assert_int_eq(fx_submit(f, 3, 8, 0, prompt, 20, 40, 1, 1), 0);
        for (int i = 0; i < 10; i++)
            fx_step(f);
        ck_assert_int_eq(sched_evict_tenant(f->s, 7, 0), 2);
        const struct sched_plan *p = fx_step(f);
        ck_assert_int_eq(p->n_preempted, 2);
        ck_assert_int_eq(p->preempted[0].mode, mode);
        ck_assert_int_eq(p->preempted[1].why, SCHED_WHY_EVICT);
        ck_assert(!plan_has_seq(p, f->reqs[1]->r) && !plan_has_seq(p, f->reqs[2]->r));
        ck_assert(plan_has_seq(p, f->reqs[3]->r));
        p = fx_step(f); /* room: they come back */
        ck_assert(plan_has_seq(p, f->reqs[1]->r) && plan_has_seq(p, f->reqs[2]->r));
        ck_assert_int_eq(p->n_swap_in > 0, mode == SCHED_PREEMPT_SWAP);
        ck_assert_int_ge(fx_run(f, 1000), 0);
        for (int i = 1; i <= 3; i++)
            ck_assert_int_eq(f->reqs[i]->state, SCHED_FINISHED);
        ck_assert_int_eq(f->reqs[1]->n_preemptions, 1);
        check_all_free(f);
        fx_free(f);
    }
}
END_TEST

START_TEST(evict_with_abort_ends_the_request)
{
    struct fx *f = fx_new(opts(64, 64, 64, 8), 0);
    int32_t prompt[50];
    make_prompt(prompt, 50, 32);
    ck_assert_int_eq(fx_submit(f, 1, 7, 0, prompt, 50, 40, 1, 1), 0);
    ck_assert_int_eq(fx_submit(f, 2, 7, 0, prompt, 30, 40, 1, 1), 0);
    for (int i = 0; i < 5; i++)
        fx_step(f);
    ck_assert_int_eq(sched_evict(f->s, 1, 1), 0);
    ck_assert_int_eq(f->reqs[1]->r->state, SCHED_ABORTED);
    ck_assert_int_eq(f->reqs[1]->r->end, SCHED_END_EVICTED);
    ck_assert_int_eq(sched_evict(f->s, 1, 1), -1);
    ck_assert_int_eq(sched_evict_tenant(f->s, 7, 1), 1);
    ck_assert_int_eq(sched_n_live(f->s), 0);
    check_all_free(f);
    ck_assert_int_ge(fx_run(f, 10), 0);
    ck_assert_int_eq(f->reqs[2]->state, SCHED_ABORTED);
    ck_assert_int_gt(f->reqs[2]->seqs[0].n_out, 0); /* what was generated stays */
    fx_free(f);
}
END_TEST

START_TEST(draining_refuses_new_work_and_finishes_the_queue)
{
    struct fx *f = fx_new(opts(64, 0, 64, 2), 0);
    int32_t prompt[20];
    make_prompt(prompt, 20, 33);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(fx_submit(f, i, 1, 0, prompt, 20, 10, 1, 1), 0);
    fx_step(f);
    sched_drain(f->s, 1);
    ck_assert(sched_draining(f->s));
    ck_assert_int_eq(fx_submit(f, 10, 1, 0, prompt, 20, 10, 1, 1), SCHED_E_DRAINING);
    ck_assert_int_ge(fx_run(f, 1000), 0);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(f->reqs[i]->state, SCHED_FINISHED);
    sched_drain(f->s, 0);
    ck_assert_int_eq(fx_submit(f, 10, 1, 0, prompt, 20, 10, 1, 1), 0);
    ck_assert_int_ge(fx_run(f, 1000), 0);
    fx_free(f);
}
END_TEST

/* A step carrying a request's first prompt chunk leaves less important
 * work out; the step after carries both again.  With share_first the
 * first step carries both. */
static void first_token_case(int share)
{
    struct sched_opts o = opts(64, 0, 64, 8);
    o.share_first = share;
    struct fx *f = fx_new(o, 0);
    int32_t pa[20], pb[12];
    make_prompt(pa, 20, 41);
    make_prompt(pb, 12, 42);
    ck_assert_int_eq(fx_submit(f, 1, 1, 3, pa, 20, 40, 1, 1), 0);
    fx_step(f);
    fx_step(f); /* request 1 decodes now */
    ck_assert_int_eq(fx_submit(f, 2, 2, 0, pb, 12, 5, 1, 1), 0);
    const struct sched_plan *p = fx_step(f);
    int has1 = 0, has2 = 0;
    for (int i = 0; i < p->n_chunks; i++) {
        has1 |= p->chunks[i].req->id == 1;
        has2 |= p->chunks[i].req->id == 2 && !p->chunks[i].decode;
    }
    ck_assert(has2);
    ck_assert_int_eq(has1, share);
    p = fx_step(f);
    ck_assert_int_eq(p->n_chunks, 2); /* both decode */
    ck_assert_int_ge(fx_run(f, 1000), 0);
    ck_assert_int_eq(f->reqs[1]->state, SCHED_FINISHED);
    ck_assert_int_eq(f->reqs[2]->state, SCHED_FINISHED);
    check_all_free(f);
    fx_free(f);
}

START_TEST(first_token_step_leaves_less_important_work_out)
{
    first_token_case(0);
    first_token_case(1);
}
END_TEST

/* With bg_slack, less important work fills a step that carries more
 * important work only up to slack * (a + b * T) / b tokens: here T = 1
 * decode, a = 0.01 s, b = 0.001 s/token, slack 0.5 -> 5 tokens.  Without
 * a cost model (or slack) it takes the whole budget. */
static int background_tokens(double slack, double b)
{
    struct sched_opts o = opts(256, 0, 128, 16);
    o.bg_slack = slack;
    struct fx *f = fx_new(o, 0);
    sched_set_step_cost(f->s, 0.01, b);
    int32_t pa[8], pb[200];
    make_prompt(pa, 8, 51);
    make_prompt(pb, 200, 52);
    ck_assert_int_eq(fx_submit(f, 1, 1, 0, pa, 8, 40, 1, 1), 0);
    fx_step(f); /* request 1 decodes from now on */
    ck_assert_int_eq(fx_submit(f, 2, 2, 3, pb, 200, 4, 1, 1), 0);
    const struct sched_plan *p = fx_step(f);
    int bg = 0, fg = 0;
    for (int i = 0; i < p->n_chunks; i++)
        *(p->chunks[i].req->id == 2 ? &bg : &fg) += p->chunks[i].len;
    ck_assert_int_eq(fg, 1);
    ck_assert_int_eq(fx_run(f, 2000) >= 0, 1);
    check_all_free(f);
    fx_free(f);
    return bg;
}

START_TEST(background_work_is_capped_by_the_step_cost_model)
{
    ck_assert_int_eq(background_tokens(0.5, 0.001), 5);
    ck_assert_int_eq(background_tokens(0, 0.001), 127);
    ck_assert_int_eq(background_tokens(0.5, 0), 127);
    /* a GPU-like cost (b tiny next to a) leaves the budget as it was */
    ck_assert_int_eq(background_tokens(0.5, 1e-6), 127);
}
END_TEST

/* An abandoned plan (an interrupted forward pass that scribbled on its
 * positions) records nothing: the next step plans the same chunk again,
 * and every output still equals the reference (checked by record_done). */
START_TEST(abandoned_plans_are_planned_again)
{
    struct fx *f = fx_new(opts(64, 16, 48, 8), 0);
    int32_t prompt[100];
    make_prompt(prompt, 100, 43);
    ck_assert_int_eq(fx_submit(f, 1, 1, 0, prompt, 100, 20, 2, 1), 0);
    f->abandon_mod = 1; /* this step is given up */
    const struct sched_plan *p = fx_step(f);
    ck_assert_int_eq(p->n_chunks, 1);
    int start = p->chunks[0].start, len = p->chunks[0].len;
    ck_assert_int_eq(f->abandoned, 1);
    ck_assert_int_eq(f->reqs[1]->r->seqs[0].n_computed, 0);
    f->abandon_mod = 0;
    p = fx_step(f);
    ck_assert_int_eq(p->chunks[0].start, start);
    ck_assert_int_eq(p->chunks[0].len, len);
    for (int i = 2; i < 6; i++)
        ck_assert_int_eq(fx_submit(f, i, i % 2, i % 3, prompt + i, 60, 12, 1 + i % 2, 1), 0);
    f->abandon_mod = 3;
    ck_assert_int_ge(fx_run(f, 2000), 0);
    ck_assert_int_gt(f->abandoned, 3);
    for (int i = 1; i < 6; i++)
        ck_assert_int_eq(f->reqs[i]->state, SCHED_FINISHED);
    check_all_free(f);
    fx_free(f);
}
END_TEST

START_TEST(operator_views_report_each_request)
{
    struct sched_opts o = opts(64, 0, 64, 8);
    o.share_first = 1; /* both requests start in the first step */
    struct fx *f = fx_new(o, 0);
    int32_t prompt[40];
    make_prompt(prompt, 40, 34);
    ck_assert_int_eq(fx_submit(f, 1, 1, 2, prompt, 40, 10, 1, 1), 0);
    ck_assert_int_eq(fx_submit(f, 2, 3, 1, prompt, 20, 10, 1, 1), 0);
    fx_step(f);
    const struct sched_req *r = sched_first(f->s);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->id, 1);
    struct sched_req_info ri;
    sched_req_info(f->s, r, f->now, &ri);
    ck_assert_int_eq(ri.state, SCHED_RUNNING);
    ck_assert_int_eq(ri.priority, 2);
    ck_assert_int_eq(ri.n_prompt, 40);
    ck_assert_int_eq(ri.n_generated, 1);
    ck_assert_int_eq(ri.n_computed, 40);
    ck_assert_int_eq(ri.dev_blocks, 3);
    ck_assert(ri.age_s > 0);
    r = sched_next(f->s, r);
    ck_assert_int_eq(r->id, 2);
    ck_assert_ptr_null(sched_next(f->s, r));
    struct sched_stats st;
    sched_stats(f->s, &st);
    ck_assert_int_eq(st.n_by_state[SCHED_RUNNING], 2);
    ck_assert_int_eq(st.running_seqs, 2);
    ck_assert_int_eq(st.prefill_tokens, 60);
    ck_assert_str_eq(sched_state_name(SCHED_SWAPPED), "swapped");
    ck_assert_str_eq(sched_why_name(SCHED_WHY_TENANT_CAP), "tenant-cap");
    ck_assert_str_eq(sched_preempt_name(SCHED_PREEMPT_RECOMPUTE), "recompute");
    ck_assert_str_eq(sched_end_name(SCHED_END_LENGTH), "length");
    ck_assert_int_eq(sched_n_tenants(f->s), 2);
    ck_assert_int_ge(fx_run(f, 100), 0);
    fx_free(f);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("sched");
    TCase *tc = tcase_create("sched");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, arrival_mid_generation_joins_the_next_step);
    tcase_add_test(tc, long_prompt_prefills_in_chunks_while_decodes_advance);
    tcase_add_test(tc, swap_preemption_gives_the_uninterrupted_tokens);
    tcase_add_test(tc, recompute_preemption_gives_the_uninterrupted_tokens);
    tcase_add_test(tc, full_host_pool_means_recompute);
    tcase_add_test(tc, auto_mode_follows_the_cost_model);
    tcase_add_test(tc, rates_reach_the_cost_model);
    tcase_add_test(tc, high_priority_arrival_preempts_low_priority_work);
    tcase_add_test(tc, waiting_work_never_preempts_equal_priority);
    tcase_add_test(tc, swapped_work_resumes_before_new_admissions);
    tcase_add_test(tc, fair_share_follows_weights_whatever_the_request_rates);
    tcase_add_test(tc, idle_tenant_banks_no_credit);
    tcase_add_test(tc, tenant_block_cap_holds_and_its_own_work_pays);
    tcase_add_test(tc, lowered_tenant_cap_preempts_that_tenant_at_the_next_step);
    tcase_add_test(tc, tenant_running_cap_limits_admission);
    tcase_add_test(tc, prefix_cache_hits_within_a_salt_only);
    tcase_add_test(tc, concurrent_requests_share_a_system_prompt);
    tcase_add_test(tc, n3_shares_the_prompt_and_copies_on_write);
    tcase_add_test(tc, sequences_of_one_request_finish_on_their_own);
    tcase_add_test(tc, without_aging_low_priority_waits_under_saturation);
    tcase_add_test(tc, with_aging_low_priority_rises_one_level_per_period);
    tcase_add_test(tc, submit_refuses_bad_duplicate_and_impossible_requests);
    tcase_add_test(tc, bad_options_are_refused);
    tcase_add_test(tc, cancel_frees_everything_in_every_state);
    tcase_add_test(tc, recompute_preempted_request_cancels_clean);
    tcase_add_test(tc, cancel_between_plan_and_commit_is_safe);
    tcase_add_test(tc, evicted_request_resumes_and_completes_exactly);
    tcase_add_test(tc, evict_with_abort_ends_the_request);
    tcase_add_test(tc, draining_refuses_new_work_and_finishes_the_queue);
    tcase_add_test(tc, operator_views_report_each_request);
    tcase_add_test(tc, first_token_step_leaves_less_important_work_out);
    tcase_add_test(tc, abandoned_plans_are_planned_again);
    tcase_add_test(tc, background_work_is_capped_by_the_step_cost_model);
    suite_add_tcase(s, tc);
    return s;
}
