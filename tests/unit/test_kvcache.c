/*
 * tests/unit/test_kvcache.c — the KV block pool: allocation order, reference
 * counts, block tables that grow by whole blocks and give everything back.
 */
#include "kvcache/kvcache.h"

#include <check.h>

START_TEST(fresh_pool_hands_out_every_block_once)
{
    struct kv_pool *p = kv_pool_new(&(struct kv_pool_opts){.n_blocks = 8, .block_size = 16});
    ck_assert_ptr_nonnull(p);
    int seen[8] = {0};
    for (int i = 0; i < 8; i++) {
        int32_t b = kv_block_alloc(p);
        ck_assert_int_ge(b, 0);
        ck_assert_int_lt(b, 8);
        ck_assert_int_eq(seen[b]++, 0);
        ck_assert_int_eq(kv_block_refs(p, b), 1);
    }
    ck_assert_int_eq(kv_block_alloc(p), -1);
    ck_assert_int_eq(kv_pool_free_blocks(p), 0);
    kv_pool_free(p);
}
END_TEST

START_TEST(block_is_free_only_when_last_reference_drops)
{
    struct kv_pool *p = kv_pool_new(&(struct kv_pool_opts){.n_blocks = 2, .block_size = 16});
    int32_t b = kv_block_alloc(p);
    kv_block_ref(p, b);
    ck_assert_int_eq(kv_block_refs(p, b), 2);
    kv_block_unref(p, b);
    ck_assert_int_eq(kv_pool_free_blocks(p), 1);
    kv_block_unref(p, b);
    ck_assert_int_eq(kv_pool_free_blocks(p), 2);
    ck_assert_int_eq(kv_block_refs(p, b), 0);
    kv_pool_free(p);
}
END_TEST

START_TEST(table_grows_by_whole_blocks_and_maps_slots)
{
    struct kv_pool *p = kv_pool_new(&(struct kv_pool_opts){.n_blocks = 10, .block_size = 4});
    struct kv_table t = {0};
    ck_assert_int_eq(kv_table_reserve(p, &t, 1), 0);
    ck_assert_int_eq(t.n_blocks, 1);
    ck_assert_int_eq(kv_table_reserve(p, &t, 4), 0);
    ck_assert_int_eq(t.n_blocks, 1);
    ck_assert_int_eq(kv_table_reserve(p, &t, 21), 0);
    ck_assert_int_eq(t.n_blocks, 6);
    ck_assert_int_eq(kv_pool_free_blocks(p), 4);
    for (int pos = 0; pos < 21; pos++)
        ck_assert_int_eq(kv_table_slot(&t, 4, pos), t.blocks[pos / 4] * 4 + pos % 4);
    kv_table_release(p, &t);
    ck_assert_int_eq(kv_pool_free_blocks(p), 10);
    ck_assert_int_eq(t.n_blocks, 0);
    kv_pool_free(p);
}
END_TEST

START_TEST(reserve_that_does_not_fit_takes_nothing)
{
    struct kv_pool *p = kv_pool_new(&(struct kv_pool_opts){.n_blocks = 3, .block_size = 4});
    struct kv_table a = {0}, b = {0};
    ck_assert_int_eq(kv_table_reserve(p, &a, 8), 0);
    ck_assert_int_eq(kv_table_reserve(p, &b, 9), -1);
    ck_assert_int_eq(b.n_blocks, 0);
    ck_assert_int_eq(kv_pool_free_blocks(p), 1);
    ck_assert_int_eq(kv_table_reserve(p, &b, 4), 0);
    kv_table_release(p, &a);
    kv_table_release(p, &b);
    ck_assert_int_eq(kv_pool_free_blocks(p), 3);
    kv_pool_free(p);
}
END_TEST

START_TEST(bad_sizes_are_refused)
{
    ck_assert_ptr_null(kv_pool_new(&(struct kv_pool_opts){.n_blocks = 0, .block_size = 16}));
    ck_assert_ptr_null(kv_pool_new(&(struct kv_pool_opts){.n_blocks = 4, .block_size = 0}));
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("kvcache");
    TCase *tc = tcase_create("pool");
    tcase_add_test(tc, fresh_pool_hands_out_every_block_once);
    tcase_add_test(tc, block_is_free_only_when_last_reference_drops);
    tcase_add_test(tc, table_grows_by_whole_blocks_and_maps_slots);
    tcase_add_test(tc, reserve_that_does_not_fit_takes_nothing);
    tcase_add_test(tc, bad_sizes_are_refused);
    suite_add_tcase(s, tc);
    return s;
}
