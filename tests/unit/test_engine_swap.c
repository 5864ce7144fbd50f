/*
 * tests/unit/test_engine_swap.c — the host swap pool and the cost model:
 * blocks survive a trip out to host memory and back bit for bit, in any
 * block order, the counters add up, bandwidth is measured without
 * disturbing the pool, and the swap-vs-recompute choice follows the
 * formulas of DESIGN.md.
 */
#include "swap/swap.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct be_kv_geom geom = {
    .n_layers = 3, .n_kv_heads = 2, .head_dim = 8, .block_size = 4};

static struct be *new_backend(void)
{
    char err[256];
    struct be *be = be_create("cpu", &(struct be_opts){.n_threads = 1}, err, sizeof(err));
    ck_assert_msg(be != NULL, "%s", err);
    return be;
}

/* Fills device block b with a pattern unique to (b, element). */
static void fill_blocks(struct be *be, struct be_buf *kv, int n_blocks, float salt)
{
    size_t n = be_kv_block_elems(&geom);
    float *v = malloc(sizeof(float) * n);
    for (int b = 0; b < n_blocks; b++) {
        for (size_t i = 0; i < n; i++)
            v[i] = salt + (float)b * 1000.0f + (float)i;
        ck_assert_int_eq(
            be->ops->upload(be, kv, sizeof(float) * n * (size_t)b, v, sizeof(float) * n), 0);
    }
    free(v);
}

static float elem(struct be *be, struct be_buf *kv, int b, size_t i)
{
    float x;
    size_t n = be_kv_block_elems(&geom);
    ck_assert_int_eq(
        be->ops->download(be, &x, kv, sizeof(float) * (n * (size_t)b + i), sizeof(float)), 0);
    return x;
}

START_TEST(blocks_round_trip_through_host_memory)
{
    struct be *be = new_backend();
    char err[256];
    size_t bytes = be_kv_block_elems(&geom) * sizeof(float);
    struct be_buf *kv = be->ops->alloc(be, bytes * 6);
    struct swap_pool *sp = swap_pool_new(be, &geom, 4, err, sizeof(err));
    ck_assert_msg(sp != NULL, "%s", err);
    ck_assert_int_eq(swap_pool_blocks(sp), 4);
    ck_assert_uint_eq(swap_block_bytes(sp), bytes);
    fill_blocks(be, kv, 6, 0.5f);
    int32_t dev[3] = {5, 1, 3}, host[3] = {2, 0, 3};
    ck_assert_int_eq(swap_out(sp, kv, dev, host, 3, err, sizeof(err)), 0);
    fill_blocks(be, kv, 6, 7.0f); /* the device blocks are reused meanwhile */
    int32_t back[3] = {0, 4, 2};  /* and come back into other blocks */
    ck_assert_int_eq(swap_in(sp, kv, host, back, 3, err, sizeof(err)), 0);
    size_t n = be_kv_block_elems(&geom);
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < n; i += 7)
            ck_assert_float_eq(elem(be, kv, back[k], i), 0.5f + (float)dev[k] * 1000.0f + (float)i);
    ck_assert_float_eq(elem(be, kv, 1, 3), 7.0f + 1000.0f + 3.0f); /* untouched */
    struct swap_stats st;
    swap_pool_stats(sp, &st);
    ck_assert_int_eq(st.blocks_out, 3);
    ck_assert_int_eq(st.blocks_in, 3);
    ck_assert_uint_eq(st.bytes_out, 3 * bytes);
    ck_assert_uint_eq(st.bytes_in, 3 * bytes);
    swap_pool_free(sp);
    be->ops->free(be, kv);
    be_destroy(be);
}
END_TEST

START_TEST(bad_block_ids_fail_with_a_message)
{
    struct be *be = new_backend();
    char err[256] = "";
    struct be_buf *kv = be->ops->alloc(be, be_kv_block_elems(&geom) * sizeof(float) * 2);
    struct swap_pool *sp = swap_pool_new(be, &geom, 2, err, sizeof(err));
    int32_t dev[1] = {0}, host[1] = {2};
    ck_assert_int_eq(swap_out(sp, kv, dev, host, 1, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "swap"));
    struct swap_pool *none = swap_pool_new(be, &geom, 0, err, sizeof(err));
    ck_assert_ptr_nonnull(none);
    ck_assert_int_eq(swap_out(none, kv, dev, dev, 1, err, sizeof(err)), -1);
    ck_assert_int_eq(swap_out(none, kv, dev, dev, 0, err, sizeof(err)), 0);
    ck_assert_ptr_null(swap_pool_new(be, &geom, -1, err, sizeof(err)));
    swap_pool_free(none);
    swap_pool_free(sp);
    be->ops->free(be, kv);
    be_destroy(be);
}
END_TEST

START_TEST(measuring_bandwidth_leaves_the_pool_as_it_was)
{
    struct be *be = new_backend();
    char err[256];
    struct be_buf *kv = be->ops->alloc(be, be_kv_block_elems(&geom) * sizeof(float) * 8);
    struct swap_pool *sp = swap_pool_new(be, &geom, 3, err, sizeof(err));
    fill_blocks(be, kv, 8, 2.0f);
    double bw = swap_measure(sp, kv, 8, 32, err, sizeof(err));
    ck_assert_msg(bw > 0, "%s", err);
    for (int b = 0; b < 8; b++)
        ck_assert_float_eq(elem(be, kv, b, 5), 2.0f + (float)b * 1000.0f + 5.0f);
    struct swap_stats st;
    swap_pool_stats(sp, &st);
    ck_assert(st.bw_bytes_s == bw);
    ck_assert_int_eq(st.blocks_out, 0); /* measurement is not swap traffic */
    struct swap_pool *none = swap_pool_new(be, &geom, 0, err, sizeof(err));
    ck_assert(swap_measure(none, kv, 8, 32, err, sizeof(err)) < 0);
    swap_pool_free(none);
    swap_pool_free(sp);
    be->ops->free(be, kv);
    be_destroy(be);
}
END_TEST

START_TEST(cost_model_follows_the_formulas)
{
    struct swap_cost c = {.block_bytes = 1 << 20, .bw_bytes_s = 1e9, .prefill_tok_s = 1000};
    ck_assert(fabs(swap_cost_swap_s(&c, 10) - 2.0 * 10 * (1 << 20) / 1e9) < 1e-12);
    ck_assert(fabs(swap_cost_recompute_s(&c, 500) - 0.5) < 1e-12);
    /* 10 blocks: 21 ms to swap vs 160 tokens: 160 ms to recompute */
    ck_assert_int_eq(swap_cost_prefers_swap(&c, 10, 160), 1);
    c.bw_bytes_s = 1e7; /* a slow link: 2.1 s to swap */
    ck_assert_int_eq(swap_cost_prefers_swap(&c, 10, 160), 0);
    c.bw_bytes_s = 0; /* unknown bandwidth: never swap */
    ck_assert(isinf(swap_cost_swap_s(&c, 1)));
    ck_assert_int_eq(swap_cost_prefers_swap(&c, 1, 1), 0);
    c = (struct swap_cost){.block_bytes = 1, .bw_bytes_s = 1}; /* unknown rate: swap */
    ck_assert(isinf(swap_cost_recompute_s(&c, 1)));
    ck_assert_int_eq(swap_cost_prefers_swap(&c, 1000, 1), 1);
}
END_TEST

START_TEST(prefill_rate_is_a_moving_average)
{
    struct swap_cost c = {0};
    swap_cost_observe_prefill(&c, 1000, 1.0);
    ck_assert(fabs(c.prefill_tok_s - 1000) < 1e-9); /* first sample taken as is */
    swap_cost_observe_prefill(&c, 2000, 1.0);
    ck_assert(fabs(c.prefill_tok_s - 1200) < 1e-9);
    swap_cost_observe_prefill(&c, 0, 1.0); /* empty samples are ignored */
    swap_cost_observe_prefill(&c, 10, 0);
    ck_assert(fabs(c.prefill_tok_s - 1200) < 1e-9);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("swap");
    TCase *tc = tcase_create("swap");
    tcase_add_test(tc, blocks_round_trip_through_host_memory);
    tcase_add_test(tc, bad_block_ids_fail_with_a_message);
    tcase_add_test(tc, measuring_bandwidth_leaves_the_pool_as_it_was);
    tcase_add_test(tc, cost_model_follows_the_formulas);
    tcase_add_test(tc, prefill_rate_is_a_moving_average);
    suite_add_tcase(s, tc);
    return s;
}
