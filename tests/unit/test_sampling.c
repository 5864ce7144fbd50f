/*
 * tests/unit/test_sampling.c — the sampler: greedy, seeded draws, the
 * filters, the penalties and log-probabilities.
 *
 * Draw statistics are checked against the exact softmax with a chi-square
 * bound; the seeds are fixed, so a pass is reproducible, while a sampler that
 * forgets the temperature or renormalises over the wrong set fails by far.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

#define BIG_VOCAB 49152

static struct smp_seq *seq_with(float temp, int top_k, float top_p, float min_p, uint64_t seed)
{
    struct smp_params p;
    smp_params_default(&p);
    p.temperature = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.seed = seed;
    struct smp_seq *s = smp_seq_new(&p);
    ck_assert_ptr_nonnull(s);
    return s;
}

/* Samples from a fresh copy of logits (the sampler may scribble on it). */
static int32_t draw(struct smp_seq *s, const float *logits, int n)
{
    float tmp[64];
    ck_assert_int_le(n, 64);
    memcpy(tmp, logits, (size_t)n * sizeof(float));
    return smp_sample(s, tmp, n, NULL);
}

/* Deterministic pseudo-random logits in [-8, 8) for the big-vocab tests. */
static void fill_logits(float *l, int n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (int i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        l[i] = (float)(x >> 8) / (float)(1u << 24) * 16.0f - 8.0f;
    }
}

/* Pearson chi-square of observed counts against probabilities p. */
static double chi_square(const int *count, const double *p, int n, int draws)
{
    double chi = 0;
    for (int i = 0; i < n; i++) {
        double e = p[i] * draws;
        if (e > 0)
            chi += (count[i] - e) * (count[i] - e) / e;
        else
            ck_assert_int_eq(count[i], 0);
    }
    return chi;
}

static void softmax(const float *l, int n, float temp, double *p)
{
    double m = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++)
        m = l[i] > m ? l[i] : m;
    for (int i = 0; i < n; i++)
        sum += p[i] = exp((l[i] - m) / temp);
    for (int i = 0; i < n; i++)
        p[i] /= sum;
}

static void count_draws(struct smp_seq *s, const float *l, int n, int draws, int *count)
{
    memset(count, 0, (size_t)n * sizeof(int));
    for (int i = 0; i < draws; i++) {
        int32_t t = draw(s, l, n);
        ck_assert(t >= 0 && t < n);
        count[t]++;
    }
}

/* ---------------------------------------------------------------- greedy */

START_TEST(defaults_turn_every_filter_off)
{
    struct smp_params p;
    memset(&p, 0x55, sizeof(p));
    smp_params_default(&p);
    ck_assert_float_eq(p.temperature, 1.0f);
    ck_assert_int_eq(p.top_k, 0);
    ck_assert_float_eq(p.top_p, 1.0f);
    ck_assert_float_eq(p.min_p, 0.0f);
    ck_assert_float_eq(p.presence_penalty, 0.0f);
    ck_assert_float_eq(p.frequency_penalty, 0.0f);
    ck_assert_float_eq(p.repetition_penalty, 1.0f);
    ck_assert_uint_eq(p.seed, 0);
    ck_assert_int_eq(p.n_logprobs, 0);
}
END_TEST

START_TEST(greedy_picks_argmax)
{
    const float l[6] = {0.1f, -2.0f, 3.5f, 3.49f, -0.5f, 1.0f};
    struct smp_seq *s = seq_with(0.0f, 0, 1.0f, 0.0f, 1);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(draw(s, l, 6), 2);
    smp_seq_free(s);
}
END_TEST

START_TEST(greedy_breaks_ties_by_lowest_id)
{
    const float l[5] = {1.0f, 4.0f, 2.0f, 4.0f, 4.0f};
    struct smp_seq *s = seq_with(0.0f, 0, 1.0f, 0.0f, 1);
    ck_assert_int_eq(draw(s, l, 5), 1);
    smp_seq_free(s);
    /* A temperature below the greedy threshold is greedy too. */
    s = seq_with(1e-7f, 0, 1.0f, 0.0f, 1);
    ck_assert_int_eq(draw(s, l, 5), 1);
    smp_seq_free(s);
}
END_TEST

START_TEST(greedy_on_big_vocab_matches_argmax)
{
    float *l = malloc(BIG_VOCAB * sizeof(float));
    ck_assert_ptr_nonnull(l);
    fill_logits(l, BIG_VOCAB, 7);
    l[31337] = 9.0f;
    struct smp_seq *s = seq_with(0.0f, 0, 1.0f, 0.0f, 1);
    ck_assert_int_eq(smp_sample(s, l, BIG_VOCAB, NULL), 31337);
    smp_seq_free(s);
    free(l);
}
END_TEST

/* ---------------------------------------------------------------- seeds */

static void draw_seq(uint64_t seed, int32_t *out, int n)
{
    const float l[8] = {0.5f, 0.4f, 0.3f, 0.2f, 0.1f, 0.0f, -0.1f, -0.2f};
    struct smp_seq *s = seq_with(1.0f, 0, 1.0f, 0.0f, seed);
    for (int i = 0; i < n; i++)
        out[i] = draw(s, l, 8);
    smp_seq_free(s);
}

START_TEST(same_seed_gives_same_sequence)
{
    int32_t a[200], b[200];
    draw_seq(42, a, 200);
    draw_seq(42, b, 200);
    ck_assert_mem_eq(a, b, sizeof(a));
}
END_TEST

START_TEST(different_seed_gives_different_sequence)
{
    int32_t a[200], b[200];
    draw_seq(42, a, 200);
    draw_seq(43, b, 200);
    int same = 0;
    for (int i = 0; i < 200; i++)
        same += a[i] == b[i];
    /* Independent streams agree about 1/8 of the time on this row. */
    ck_assert_int_lt(same, 60);
}
END_TEST

START_TEST(sequences_in_a_batch_are_independent)
{
    const float l[8] = {0.5f, 0.4f, 0.3f, 0.2f, 0.1f, 0.0f, -0.1f, -0.2f};
    int32_t alone[200];
    draw_seq(9, alone, 200);
    struct smp_seq *a = seq_with(1.0f, 0, 1.0f, 0.0f, 9);
    struct smp_seq *other = seq_with(1.0f, 3, 0.9f, 0.0f, 9);
    for (int i = 0; i < 200; i++) {
        draw(other, l, 8);
        ck_assert_int_eq(draw(a, l, 8), alone[i]);
        draw(other, l, 8);
    }
    smp_seq_free(a);
    smp_seq_free(other);
}
END_TEST

/* --------------------------------------------------------------- filters */

START_TEST(top_k_one_equals_greedy)
{
    float *l = malloc(BIG_VOCAB * sizeof(float));
    float *tmp = malloc(BIG_VOCAB * sizeof(float));
    ck_assert(l && tmp);
    for (uint32_t r = 0; r < 20; r++) {
        fill_logits(l, BIG_VOCAB, r);
        struct smp_seq *g = seq_with(0.0f, 0, 1.0f, 0.0f, r);
        struct smp_seq *k = seq_with(1.5f, 1, 1.0f, 0.0f, r);
        memcpy(tmp, l, BIG_VOCAB * sizeof(float));
        int32_t want = smp_sample(g, tmp, BIG_VOCAB, NULL);
        memcpy(tmp, l, BIG_VOCAB * sizeof(float));
        ck_assert_int_eq(smp_sample(k, tmp, BIG_VOCAB, NULL), want);
        smp_seq_free(g);
        smp_seq_free(k);
    }
    free(l);
    free(tmp);
}
END_TEST

START_TEST(tiny_top_p_equals_greedy)
{
    const float l[6] = {1.0f, 2.0f, 2.5f, 2.4f, 0.0f, 2.5f};
    struct smp_seq *s = seq_with(2.0f, 0, 1e-6f, 0.0f, 5);
    for (int i = 0; i < 500; i++)
        ck_assert_int_eq(draw(s, l, 6), 2); /* tie with 5: lowest id */
    smp_seq_free(s);
    s = seq_with(2.0f, 0, 0.0f, 0.0f, 5);
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(draw(s, l, 6), 2);
    smp_seq_free(s);
}
END_TEST

START_TEST(min_p_never_draws_low_tokens)
{
    /* p relative to the max: 1, e^-1 = 0.37, e^-2 = 0.135, e^-3 = 0.05. */
    const float l[4] = {0.0f, -1.0f, -2.0f, -3.0f};
    struct smp_seq *s = seq_with(1.0f, 0, 1.0f, 0.2f, 11);
    int count[4];
    count_draws(s, l, 4, 5000, count);
    ck_assert_int_eq(count[2], 0);
    ck_assert_int_eq(count[3], 0);
    /* The kept two share the mass as renormalised softmax: e^-1/(1+e^-1). */
    double p1 = exp(-1.0) / (1 + exp(-1.0));
    ck_assert_double_eq_tol(count[1] / 5000.0, p1, 0.03);
    smp_seq_free(s);
}
END_TEST

START_TEST(min_p_scales_with_temperature)
{
    /* At temperature 2 the ratios are e^-0.5 ... so min_p 0.2 keeps three. */
    const float l[4] = {0.0f, -1.0f, -2.0f, -4.0f};
    struct smp_seq *s = seq_with(2.0f, 0, 1.0f, 0.2f, 12);
    int count[4];
    count_draws(s, l, 4, 5000, count);
    ck_assert_int_gt(count[2], 0);
    ck_assert_int_eq(count[3], 0);
    smp_seq_free(s);
}
END_TEST

START_TEST(temperature_draws_follow_softmax)
{
    const float l[4] = {1.0f, 0.5f, -0.3f, 0.0f};
    const float temps[3] = {1.0f, 0.5f, 2.0f};
    for (int k = 0; k < 3; k++) {
        double p[4];
        int count[4];
        softmax(l, 4, temps[k], p);
        struct smp_seq *s = seq_with(temps[k], 0, 1.0f, 0.0f, 100 + k);
        count_draws(s, l, 4, 20000, count);
        /* 3 degrees of freedom: P(chi2 > 16.27) = 0.001. */
        ck_assert_double_lt(chi_square(count, p, 4, 20000), 16.27);
        smp_seq_free(s);
    }
}
END_TEST

START_TEST(top_k_renormalises_over_the_best_k)
{
    const float l[5] = {0.0f, 1.0f, 0.7f, 0.9f, 0.2f};
    double p[5] = {0};
    const float kept[2] = {1.0f, 0.9f};
    double pk[2];
    softmax(kept, 2, 1.0f, pk);
    p[1] = pk[0];
    p[3] = pk[1];
    int count[5];
    struct smp_seq *s = seq_with(1.0f, 2, 1.0f, 0.0f, 21);
    count_draws(s, l, 5, 20000, count);
    ck_assert_double_lt(chi_square(count, p, 5, 20000), 10.83); /* 1 dof */
    smp_seq_free(s);
}
END_TEST

START_TEST(top_p_keeps_the_smallest_nucleus)
{
    /* Probabilities 0.5, 0.25, 0.125, 0.125: top_p 0.7 keeps the first two. */
    const float l[4] = {logf(0.125f), logf(0.5f), logf(0.125f), logf(0.25f)};
    double p[4] = {0, 2.0 / 3, 0, 1.0 / 3};
    int count[4];
    struct smp_seq *s = seq_with(1.0f, 0, 0.7f, 0.0f, 22);
    count_draws(s, l, 4, 20000, count);
    ck_assert_double_lt(chi_square(count, p, 4, 20000), 10.83);
    smp_seq_free(s);
}
END_TEST

START_TEST(top_p_applies_to_the_top_k_renormalised)
{
    /* 0.4, 0.3, 0.2, 0.1; top_k 3 renormalises to 4/9, 3/9, 2/9, so top_p
     * 0.75 stops after two (over the full row it would need three). */
    const float l[4] = {logf(0.2f), logf(0.4f), logf(0.1f), logf(0.3f)};
    double p[4] = {0, 4.0 / 7, 0, 3.0 / 7};
    int count[4];
    struct smp_seq *s = seq_with(1.0f, 3, 0.75f, 0.0f, 23);
    count_draws(s, l, 4, 20000, count);
    ck_assert_double_lt(chi_square(count, p, 4, 20000), 10.83);
    smp_seq_free(s);
}
END_TEST

/* Sorts ids by logit, best first, lowest id on ties: the reference order. */
static const float *g_sort_logits;
static int by_logit(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    float lx = g_sort_logits[x], ly = g_sort_logits[y];
    return lx > ly ? -1 : lx < ly ? 1 : (x > y) - (x < y);
}

static int32_t *sorted_ids(const float *l, int n)
{
    int32_t *ids = malloc((size_t)n * sizeof(int32_t));
    ck_assert_ptr_nonnull(ids);
    for (int i = 0; i < n; i++)
        ids[i] = i;
    g_sort_logits = l;
    qsort(ids, (size_t)n, sizeof(int32_t), by_logit);
    return ids;
}

START_TEST(big_vocab_top_k_and_top_p_stay_inside_their_sets)
{
    float *l = malloc(BIG_VOCAB * sizeof(float));
    float *tmp = malloc(BIG_VOCAB * sizeof(float));
    char *in_k = calloc(BIG_VOCAB, 1), *in_p = calloc(BIG_VOCAB, 1);
    ck_assert(l && tmp && in_k && in_p);
    fill_logits(l, BIG_VOCAB, 3);
    int32_t *ids = sorted_ids(l, BIG_VOCAB);
    for (int i = 0; i < 40; i++)
        in_k[ids[i]] = 1;
    /* The reference nucleus for top_p 0.5 at temperature 1 (about a
     * thousand tokens here, so the chunked search needs several rounds). */
    double sum = 0, cum = 0;
    float m = l[ids[0]];
    for (int i = 0; i < BIG_VOCAB; i++)
        sum += exp(l[i] - m);
    int n_p = 0;
    while (cum < 0.5 * sum)
        cum += exp(l[ids[n_p]] - m), in_p[ids[n_p++]] = 1;
    ck_assert_int_gt(n_p, 300);
    struct smp_seq *sk = seq_with(1.0f, 40, 1.0f, 0.0f, 1);
    struct smp_seq *sp = seq_with(1.0f, 0, 0.5f, 0.0f, 2);
    int seen_k = 0;
    char *hit = calloc(BIG_VOCAB, 1);
    ck_assert_ptr_nonnull(hit);
    for (int i = 0; i < 400; i++) {
        memcpy(tmp, l, BIG_VOCAB * sizeof(float));
        int32_t t = smp_sample(sk, tmp, BIG_VOCAB, NULL);
        ck_assert(t >= 0 && in_k[t]);
        seen_k += !hit[t];
        hit[t] = 1;
        memcpy(tmp, l, BIG_VOCAB * sizeof(float));
        t = smp_sample(sp, tmp, BIG_VOCAB, NULL);
        ck_assert(t >= 0 && in_p[t]);
    }
    ck_assert_int_eq(seen_k, 40); /* every one of the k is reachable */
    smp_seq_free(sk);
    smp_seq_free(sp);
    free(hit);
    free(ids);
    free(in_k);
    free(in_p);
    free(tmp);
    free(l);
}
END_TEST

/* ------------------------------------------------------------- penalties */

static struct smp_seq *seq_penalties(float presence, float frequency, float repetition)
{
    struct smp_params p;
    smp_params_default(&p);
    p.temperature = 0;
    p.presence_penalty = presence;
    p.frequency_penalty = frequency;
    p.repetition_penalty = repetition;
    struct smp_seq *s = smp_seq_new(&p);
    ck_assert_ptr_nonnull(s);
    return s;
}

START_TEST(repetition_penalty_divides_positive_and_multiplies_negative)
{
    float l[5] = {2.0f, -1.0f, 3.0f, 0.5f, -0.5f};
    struct smp_seq *s = seq_penalties(0, 0, 2.0f);
    smp_seq_prompt(s, 0); /* prompt tokens count too */
    smp_seq_accept(s, 1);
    smp_seq_accept(s, 2);
    smp_seq_accept(s, 2);
    ck_assert_int_eq(smp_sample(s, l, 5, NULL), 2);
    ck_assert_float_eq_tol(l[0], 1.0f, 1e-6f);
    ck_assert_float_eq_tol(l[1], -2.0f, 1e-6f);
    ck_assert_float_eq_tol(l[2], 1.5f, 1e-6f); /* once, whatever the count */
    ck_assert_float_eq_tol(l[3], 0.5f, 1e-6f);
    ck_assert_float_eq_tol(l[4], -0.5f, 1e-6f);
    smp_seq_free(s);
}
END_TEST

START_TEST(presence_penalty_subtracts_once_for_generated_tokens)
{
    float l[4] = {2.0f, 1.0f, 1.8f, 0.0f};
    struct smp_seq *s = seq_penalties(0.5f, 0, 1.0f);
    smp_seq_prompt(s, 2); /* prompt tokens are not penalised */
    smp_seq_accept(s, 0);
    smp_seq_accept(s, 0);
    smp_seq_accept(s, 0);
    smp_seq_accept(s, 1);
    ck_assert_int_eq(smp_sample(s, l, 4, NULL), 2); /* argmax moved */
    ck_assert_float_eq_tol(l[0], 1.5f, 1e-6f);
    ck_assert_float_eq_tol(l[1], 0.5f, 1e-6f);
    ck_assert_float_eq_tol(l[2], 1.8f, 1e-6f);
    ck_assert_float_eq_tol(l[3], 0.0f, 1e-6f);
    smp_seq_free(s);
}
END_TEST

START_TEST(frequency_penalty_scales_with_count)
{
    float l[4] = {2.0f, 1.0f, 1.8f, 0.0f};
    struct smp_seq *s = seq_penalties(0.1f, 0.25f, 1.0f);
    smp_seq_prompt(s, 2);
    smp_seq_prompt(s, 2);
    for (int i = 0; i < 3; i++)
        smp_seq_accept(s, 0);
    smp_seq_accept(s, 1);
    ck_assert_int_eq(smp_sample(s, l, 4, NULL), 2);
    ck_assert_float_eq_tol(l[0], 2.0f - 0.1f - 0.75f, 1e-6f);
    ck_assert_float_eq_tol(l[1], 1.0f - 0.1f - 0.25f, 1e-6f);
    ck_assert_float_eq_tol(l[2], 1.8f, 1e-6f);
    smp_seq_free(s);
}
END_TEST

START_TEST(penalties_track_many_distinct_tokens)
{
    /* Far more tokens than the initial map holds: it must grow and keep
     * every count. */
    enum { N = 3000 };
    float *l = malloc(N * sizeof(float));
    ck_assert_ptr_nonnull(l);
    for (int i = 0; i < N; i++)
        l[i] = 1.0f;
    struct smp_seq *s = seq_penalties(0, 1.0f, 1.0f);
    for (int i = 0; i < N; i++)
        for (int r = 0; r <= i % 3; r++)
            smp_seq_accept(s, i);
    smp_sample(s, l, N, NULL);
    for (int i = 0; i < N; i++)
        ck_assert_float_eq_tol(l[i], 1.0f - (float)(i % 3 + 1), 1e-6f);
    smp_seq_free(s);
    free(l);
}
END_TEST

START_TEST(penalised_token_out_of_vocab_is_ignored)
{
    float l[3] = {1.0f, 0.0f, -1.0f};
    struct smp_seq *s = seq_penalties(1.0f, 1.0f, 2.0f);
    smp_seq_accept(s, 100000);
    smp_seq_accept(s, -5);
    ck_assert_int_eq(smp_sample(s, l, 3, NULL), 0);
    ck_assert_float_eq(l[0], 1.0f);
    smp_seq_free(s);
}
END_TEST

/* -------------------------------------------------------------- logprobs */

START_TEST(logprobs_equal_log_softmax_of_raw_logits)
{
    float l[6] = {0.3f, 2.0f, -1.0f, 2.0f, 1.5f, 0.0f};
    const float raw[6] = {0.3f, 2.0f, -1.0f, 2.0f, 1.5f, 0.0f};
    double lse = 0;
    for (int i = 0; i < 6; i++)
        lse += exp(raw[i]);
    lse = log(lse);
    struct smp_params p;
    smp_params_default(&p);
    p.temperature = 0;
    p.n_logprobs = 4;
    p.presence_penalty = 5.0f; /* moves the pick, not the reported logprobs */
    struct smp_seq *s = smp_seq_new(&p);
    ck_assert_ptr_nonnull(s);
    smp_seq_accept(s, 1);
    smp_seq_accept(s, 3);
    struct smp_logprob lp;
    ck_assert_int_eq(smp_sample(s, l, 6, &lp), 4);
    ck_assert_int_eq(lp.token, 4);
    ck_assert_float_eq_tol(lp.logprob, 1.5 - lse, 1e-5);
    ck_assert_int_eq(lp.n_top, 4);
    const int32_t want[4] = {1, 3, 4, 0}; /* tie 1/3: lower id first */
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(lp.top_token[i], want[i]);
        ck_assert_float_eq_tol(lp.top_logprob[i], raw[want[i]] - lse, 1e-5);
        if (i > 0)
            ck_assert_float_ge(lp.top_logprob[i - 1], lp.top_logprob[i]);
    }
    smp_seq_free(s);
}
END_TEST

START_TEST(logprobs_are_stable_for_large_logits)
{
    float l[3] = {1000.0f, 999.0f, 990.0f};
    struct smp_params p;
    smp_params_default(&p);
    p.temperature = 0;
    p.n_logprobs = 3;
    struct smp_seq *s = smp_seq_new(&p);
    ck_assert_ptr_nonnull(s);
    struct smp_logprob lp;
    ck_assert_int_eq(smp_sample(s, l, 3, &lp), 0);
    double lse = 1000.0 + log(1 + exp(-1.0) + exp(-10.0));
    ck_assert(isfinite(lp.logprob));
    ck_assert_float_eq_tol(lp.logprob, 1000.0 - lse, 1e-4);
    ck_assert_float_eq_tol(lp.top_logprob[2], 990.0 - lse, 1e-4);
    smp_seq_free(s);
}
END_TEST

START_TEST(zero_logprobs_leaves_no_alternatives)
{
    float l[3] = {0.0f, 1.0f, 2.0f};
    struct smp_seq *s = seq_with(0.0f, 0, 1.0f, 0.0f, 1);
    struct smp_logprob lp;
    memset(&lp, 0x7f, sizeof(lp));
    ck_assert_int_eq(smp_sample(s, l, 3, &lp), 2);
    ck_assert_int_eq(lp.n_top, 0);
    ck_assert_int_eq(lp.token, 2);
    ck_assert_float_eq_tol(lp.logprob, 2.0 - log(1 + exp(1.0) + exp(2.0)), 1e-5);
    smp_seq_free(s);
}
END_TEST

START_TEST(logprobs_request_is_clamped)
{
    float l[3] = {0.0f, 1.0f, 2.0f};
    struct smp_params p;
    smp_params_default(&p);
    p.n_logprobs = 500;
    struct smp_seq *s = smp_seq_new(&p);
    ck_assert_ptr_nonnull(s);
    struct smp_logprob lp;
    ck_assert_int_ge(smp_sample(s, l, 3, &lp), 0);
    ck_assert_int_eq(lp.n_top, 3); /* no more than the vocabulary */
    smp_seq_free(s);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("sampling");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, defaults_turn_every_filter_off);
    tcase_add_test(tc, greedy_picks_argmax);
    tcase_add_test(tc, greedy_breaks_ties_by_lowest_id);
    tcase_add_test(tc, greedy_on_big_vocab_matches_argmax);
    tcase_add_test(tc, same_seed_gives_same_sequence);
    tcase_add_test(tc, different_seed_gives_different_sequence);
    tcase_add_test(tc, sequences_in_a_batch_are_independent);
    tcase_add_test(tc, top_k_one_equals_greedy);
    tcase_add_test(tc, tiny_top_p_equals_greedy);
    tcase_add_test(tc, min_p_never_draws_low_tokens);
    tcase_add_test(tc, min_p_scales_with_temperature);
    tcase_add_test(tc, temperature_draws_follow_softmax);
    tcase_add_test(tc, top_k_renormalises_over_the_best_k);
    tcase_add_test(tc, top_p_keeps_the_smallest_nucleus);
    tcase_add_test(tc, top_p_applies_to_the_top_k_renormalised);
    tcase_add_test(tc, big_vocab_top_k_and_top_p_stay_inside_their_sets);
    tcase_add_test(tc, repetition_penalty_divides_positive_and_multiplies_negative);
    tcase_add_test(tc, presence_penalty_subtracts_once_for_generated_tokens);
    tcase_add_test(tc, frequency_penalty_scales_with_count);
    tcase_add_test(tc, penalties_track_many_distinct_tokens);
    tcase_add_test(tc, penalised_token_out_of_vocab_is_ignored);
    tcase_add_test(tc, logprobs_equal_log_softmax_of_raw_logits);
    tcase_add_test(tc, logprobs_are_stable_for_large_logits);
    tcase_add_test(tc, zero_logprobs_leaves_no_alternatives);
    tcase_add_test(tc, logprobs_request_is_clamped);
    suite_add_tcase(s, tc);
    return s;
}
