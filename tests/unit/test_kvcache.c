/*
 * tests/unit/test_kvcache.c — the KV block pool: allocation order, reference
 * counts, block tables that grow by whole blocks and give everything back,
 * the prefix cache and its LRU, copy-on-write, swapping, the invariant
 * check, and a long randomized run against a model of the blocks' content.
 */
#include "kvcache/kvcache.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static struct kv_pool *pool_new(int n_blocks, int n_host, int block_size)
{
    struct kv_pool_opts o = {
        .n_blocks = n_blocks, .n_host_blocks = n_host, .block_size = block_size};
    struct kv_pool *p = kv_pool_new(&o);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* tokens base, base+1, ... */
static void fill(int32_t *tok, int n, int32_t base)
{
    for (int i = 0; i < n; i++)
        tok[i] = base + i;
}

static void assert_consistent(const struct kv_pool *p, const struct kv_table *const *tables, int n)
{
    char err[256];
    int rc = kv_pool_check(p, tables, n, err, sizeof(err));
    ck_assert_msg(rc == 0, "kv_pool_check: %s", err);
}

/* A table computed from scratch: reserve, then commit all n tokens. */
static void compute(struct kv_pool *p, struct kv_table *t, const int32_t *tok, int n, uint64_t salt)
{
    ck_assert_int_eq(kv_table_reserve(p, t, n), 0);
    kv_table_commit(p, t, tok, n, salt);
    ck_assert_int_eq(t->n_committed, n);
}

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
    ck_assert_ptr_null(
        kv_pool_new(&(struct kv_pool_opts){.n_blocks = 4, .n_host_blocks = -1, .block_size = 16}));
}
END_TEST

START_TEST(fresh_pool_hands_out_lowest_ids_first_and_reuses_the_last_freed)
{
    struct kv_pool *p = pool_new(4, 2, 4);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(kv_block_alloc(p), i);
    kv_block_unref(p, 2);
    ck_assert_int_eq(kv_block_state(p, 2), KV_FREE);
    ck_assert_int_eq(kv_block_alloc(p), 2);
    ck_assert_int_eq(kv_pool_host_blocks(p), 2);
    ck_assert_int_eq(kv_pool_host_free_blocks(p), 2);
    ck_assert_int_eq(kv_pool_block_size(p), 4);
    struct kv_stats st;
    kv_pool_stats(p, &st);
    ck_assert_int_eq(st.n_used, 4);
    ck_assert_int_eq(st.n_free + st.n_cached, 0);
    kv_pool_free(p);
}
END_TEST

START_TEST(released_prefix_is_found_again_under_the_same_salt_only)
{
    struct kv_pool *p = pool_new(8, 0, 4);
    int32_t tok[13];
    fill(tok, 13, 100);
    uint64_t salt = kv_salt("tenant-a", 8), other = kv_salt("tenant-b", 8);
    struct kv_table a = {0}, b = {0}, c = {0};
    ck_assert_int_eq(kv_table_match(p, &a, tok, 12, salt), 0);
    compute(p, &a, tok, 13, salt);
    int32_t held[4];
    memcpy(held, a.blocks, sizeof(held));
    for (int i = 0; i < 3; i++)
        ck_assert_uint_ne(kv_block_hash(p, held[i]), 0);
    ck_assert_uint_eq(kv_block_hash(p, held[3]), 0); /* 1 token: partial */
    kv_table_release(p, &a);
    struct kv_stats st;
    kv_pool_stats(p, &st);
    ck_assert_int_eq(st.n_cached, 3);
    ck_assert_int_eq(st.n_free, 5);
    ck_assert_int_eq(kv_pool_free_blocks(p), 8);
    ck_assert_int_eq(kv_block_state(p, held[0]), KV_CACHED);

    ck_assert_int_eq(kv_table_match(p, &b, tok, 12, salt), 12);
    ck_assert_int_eq(b.n_blocks, 3);
    ck_assert_int_eq(b.n_committed, 12);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(b.blocks[i], held[i]);
        ck_assert_int_eq(kv_block_state(p, held[i]), KV_USED);
        ck_assert_int_eq(kv_block_refs(p, held[i]), 1);
        ck_assert_uint_eq(b.hashes[i], kv_block_hash(p, held[i]));
    }
    ck_assert_int_eq(kv_table_match(p, &c, tok, 12, other), 0);
    ck_assert_int_eq(c.n_blocks, 0);
    kv_pool_stats(p, &st);
    ck_assert_int_eq(st.prefix_lookups, 1 + 3 + 1);
    ck_assert_int_eq(st.prefix_hits, 3);
    ck_assert_int_eq(st.n_cached, 0);
    const struct kv_table *all[] = {&b, &c};
    assert_consistent(p, all, 2);
    kv_table_release(p, &b);
    kv_table_release(p, &c);
    kv_pool_free(p);
}
END_TEST

START_TEST(match_finds_whole_blocks_only_and_never_past_max_tokens)
{
    struct kv_pool *p = pool_new(8, 0, 4);
    int32_t tok[10];
    fill(tok, 10, 7);
    struct kv_table a = {0}, b = {0}, c = {0};
    compute(p, &a, tok, 10, 1);
    ck_assert_uint_ne(a.hashes[1], 0);
    ck_assert_uint_eq(a.hashes[2], 0); /* tokens 8..9 of 12: not hashed */
    ck_assert_uint_eq(kv_block_hash(p, a.blocks[2]), 0);
    kv_table_release(p, &a);
    struct kv_stats st;
    kv_pool_stats(p, &st);
    ck_assert_int_eq(st.n_cached, 2);
    /* Asking for all ten tokens finds the two full blocks only. */
    ck_assert_int_eq(kv_table_match(p, &b, tok, 10, 1), 8);
    /* max_tokens 7 allows one whole block. */
    ck_assert_int_eq(kv_table_match(p, &c, tok, 7, 1), 4);
    ck_assert_int_eq(c.n_blocks, 1);
    ck_assert_int_eq(kv_block_refs(p, c.blocks[0]), 2);
    /* Only an empty table can match. */
    ck_assert_int_eq(kv_table_match(p, &c, tok, 10, 1), 0);
    ck_assert_int_eq(c.n_blocks, 1);
    kv_table_release(p, &b);
    kv_table_release(p, &c);
    kv_pool_free(p);
}
END_TEST

START_TEST(prompt_of_exactly_two_blocks_matches_one_so_its_last_token_is_computed)
{
    struct kv_pool *p = pool_new(4, 0, 4);
    int32_t tok[8];
    fill(tok, 8, 40);
    struct kv_table a = {0}, b = {0};
    compute(p, &a, tok, 8, 9);
    kv_table_release(p, &a);
    ck_assert_int_eq(kv_table_match(p, &b, tok, 8 - 1, 9), 4);
    ck_assert_int_eq(kv_table_reserve(p, &b, 8), 0);
    ck_assert_int_eq(b.n_blocks, 2);
    kv_table_release(p, &b);
    kv_pool_free(p);
}
END_TEST

START_TEST(match_shares_blocks_that_are_still_in_use)
{
    struct kv_pool *p = pool_new(6, 0, 2);
    int32_t tok[7];
    fill(tok, 7, 0);
    struct kv_table a = {0}, b = {0};
    compute(p, &a, tok, 7, 3);
    ck_assert_int_eq(kv_table_match(p, &b, tok, 6, 3), 6);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(b.blocks[i], a.blocks[i]);
        ck_assert_int_eq(kv_block_refs(p, a.blocks[i]), 2);
    }
    ck_assert_int_eq(kv_block_refs(p, a.blocks[3]), 1);
    const struct kv_table *all[] = {&a, &b};
    assert_consistent(p, all, 2);
    kv_table_release(p, &a);
    ck_assert_int_eq(kv_block_state(p, b.blocks[0]), KV_USED);
    kv_table_release(p, &b);
    assert_consistent(p, all, 0);
    kv_pool_free(p);
}
END_TEST

/* One committed block of tokens base.. in its own table, then released. */
static int32_t cache_one(struct kv_pool *p, int32_t base)
{
    int32_t tok[2] = {base, base + 1};
    struct kv_table t = {0};
    compute(p, &t, tok, 2, 5);
    int32_t b = t.blocks[0];
    kv_table_release(p, &t);
    ck_assert_int_eq(kv_block_state(p, b), KV_CACHED);
    return b;
}

static int hits(struct kv_pool *p, int32_t base)
{
    int32_t tok[3] = {base, base + 1, base + 2};
    struct kv_table t = {0};
    int n = kv_table_match(p, &t, tok, 2, 5);
    kv_table_release(p, &t);
    return n;
}

START_TEST(allocation_takes_free_blocks_then_the_least_recently_used_cached_one)
{
    struct kv_pool *p = pool_new(4, 0, 2);
    int32_t x = cache_one(p, 10), y = cache_one(p, 20), z = cache_one(p, 30);
    ck_assert_int_ne(x, y);
    ck_assert_int_ne(y, z);
    /* Using x again makes it the most recent: the LRU order is y, z, x. */
    ck_assert_int_eq(hits(p, 10), 2);
    struct kv_stats st;
    kv_pool_stats(p, &st);
    ck_assert_int_eq(st.n_cached, 3);
    ck_assert_int_eq(st.n_free, 1);

    int32_t b0 = kv_block_alloc(p);
    ck_assert(b0 != x && b0 != y && b0 != z);
    ck_assert_int_eq(kv_block_alloc(p), y);
    ck_assert_uint_eq(kv_block_hash(p, y), 0);
    ck_assert_int_eq(hits(p, 20), 0);
    ck_assert_int_eq(kv_block_alloc(p), z);
    kv_pool_stats(p, &st);
    ck_assert_int_eq(st.cache_evictions, 2);
    ck_assert_int_eq(st.n_cached, 1);
    ck_assert_int_eq(hits(p, 10), 2);
    ck_assert_int_eq(kv_block_alloc(p), x);
    ck_assert_int_eq(kv_block_alloc(p), -1);
    kv_pool_stats(p, &st);
    ck_assert_int_eq(st.cache_evictions, 3);
    ck_assert_int_eq(st.n_used, 4);
    assert_consistent(p, NULL, 0);
    kv_pool_free(p);
}
END_TEST

START_TEST(eviction_takes_the_tail_of_a_released_prefix_before_its_head)
{
    struct kv_pool *p = pool_new(3, 0, 2);
    int32_t tok[5];
    fill(tok, 5, 1);
    struct kv_table a = {0}, b = {0};
    compute(p, &a, tok, 4, 2);
    int32_t head = a.blocks[0], tail = a.blocks[1];
    kv_table_release(p, &a);
    ck_assert_int_ge(kv_block_alloc(p), 0); /* the free block */
    ck_assert_int_eq(kv_block_alloc(p), tail);
    ck_assert_int_eq(kv_table_match(p, &b, tok, 4, 2), 2);
    ck_assert_int_eq(b.blocks[0], head);
    kv_table_release(p, &b);
    kv_pool_free(p);
}
END_TEST

START_TEST(equal_content_computed_twice_is_indexed_once)
{
    struct kv_pool *p = pool_new(8, 0, 4);
    int32_t tok[9];
    fill(tok, 9, 3);
    struct kv_table a = {0}, b = {0};
    compute(p, &a, tok, 9, 4);
    compute(p, &b, tok, 9, 4);
    for (int i = 0; i < 2; i++) {
        ck_assert_uint_eq(b.hashes[i], a.hashes[i]);
        ck_assert_uint_eq(kv_block_hash(p, a.blocks[i]), a.hashes[i]);
        ck_assert_uint_eq(kv_block_hash(p, b.blocks[i]), 0);
    }
    const struct kv_table *all[] = {&a, &b};
    assert_consistent(p, all, 2);
    /* The duplicates are freed, not cached. */
    kv_table_release(p, &b);
    struct kv_stats st;
    kv_pool_stats(p, &st);
    ck_assert_int_eq(st.n_cached, 0);
    ck_assert_int_eq(st.n_free, 5);
    kv_table_release(p, &a);
    kv_pool_stats(p, &st);
    ck_assert_int_eq(st.n_cached, 2);
    kv_pool_free(p);
}
END_TEST

START_TEST(commit_grows_block_by_block_and_never_goes_back)
{
    struct kv_pool *p = pool_new(6, 0, 4);
    int32_t tok[12];
    fill(tok, 12, 50);
    struct kv_table a = {0}, b = {0};
    ck_assert_int_eq(kv_table_reserve(p, &a, 12), 0);
    kv_table_commit(p, &a, tok, 3, 0);
    ck_assert_uint_eq(a.hashes[0], 0);
    kv_table_commit(p, &a, tok, 6, 0);
    ck_assert_uint_ne(a.hashes[0], 0);
    ck_assert_uint_eq(a.hashes[1], 0);
    kv_table_commit(p, &a, tok, 2, 0);
    ck_assert_int_eq(a.n_committed, 6);
    kv_table_commit(p, &a, tok, 12, 0);
    /* The same chain hashed in one go. */
    compute(p, &b, tok, 12, 0);
    for (int i = 0; i < 3; i++)
        ck_assert_uint_eq(a.hashes[i], b.hashes[i]);
    /* Commit past the reserved blocks stops at them. */
    kv_table_commit(p, &a, tok, 40, 0);
    ck_assert_int_eq(a.n_committed, 12);
    kv_table_release(p, &a);
    kv_table_release(p, &b);
    kv_pool_free(p);
}
END_TEST

START_TEST(fork_shares_everything_and_cow_copies_only_the_written_block)
{
    struct kv_pool *p = pool_new(8, 0, 4);
    int32_t tok[10];
    fill(tok, 10, 60);
    struct kv_table a = {0}, b = {0};
    compute(p, &a, tok, 10, 1);
    ck_assert_int_eq(kv_table_fork(p, &a, &b), 0);
    ck_assert_int_eq(b.n_blocks, 3);
    ck_assert_int_eq(b.n_committed, 10);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(b.blocks[i], a.blocks[i]);
        ck_assert_uint_eq(b.hashes[i], a.hashes[i]);
        ck_assert_int_eq(kv_block_refs(p, a.blocks[i]), 2);
    }
    int32_t src = -1, dst = -1, old = a.blocks[2];
    ck_assert_int_eq(kv_table_cow(p, &b, 10, &src, &dst), 1);
    ck_assert_int_eq(src, old);
    ck_assert_int_eq(dst, b.blocks[2]);
    ck_assert_int_ne(dst, old);
    ck_assert_int_eq(kv_block_refs(p, old), 1);
    ck_assert_int_eq(kv_block_refs(p, dst), 1);
    ck_assert_uint_eq(b.hashes[2], 0);
    /* The full blocks stay shared; a now owns its partial block alone. */
    ck_assert_int_eq(kv_block_refs(p, a.blocks[0]), 2);
    ck_assert_int_eq(kv_table_cow(p, &a, 11, &src, &dst), 0);
    ck_assert_int_eq(kv_table_cow(p, &a, 12, &src, &dst), -1); /* past the table */
    const struct kv_table *all[] = {&a, &b};
    assert_consistent(p, all, 2);
    kv_table_release(p, &b);
    struct kv_table c = {0};
    ck_assert_int_eq(kv_table_reserve(p, &c, 4), 0);
    ck_assert_int_eq(kv_table_fork(p, &a, &c), -1); /* dst not empty */
    kv_table_release(p, &c);
    kv_table_release(p, &a);
    struct kv_stats st;
    kv_pool_stats(p, &st);
    ck_assert_int_eq(st.n_used, 0);
    ck_assert_int_eq(st.n_cached, 2);
    kv_pool_free(p);
}
END_TEST

START_TEST(cow_without_a_free_block_changes_nothing)
{
    struct kv_pool *p = pool_new(3, 0, 4);
    struct kv_table a = {0}, b = {0};
    ck_assert_int_eq(kv_table_reserve(p, &a, 12), 0);
    ck_assert_int_eq(kv_table_fork(p, &a, &b), 0);
    int32_t src = -7, dst = -7, last = b.blocks[2];
    ck_assert_int_eq(kv_table_cow(p, &b, 11, &src, &dst), -1);
    ck_assert_int_eq(src, -7);
    ck_assert_int_eq(b.blocks[2], last);
    ck_assert_int_eq(kv_block_refs(p, last), 2);
    const struct kv_table *all[] = {&a, &b};
    assert_consistent(p, all, 2);
    kv_table_release(p, &a);
    kv_table_release(p, &b);
    kv_pool_free(p);
}
END_TEST

START_TEST(swap_round_trip_reports_pairs_and_reuses_blocks_still_cached)
{
    struct kv_pool *p = pool_new(8, 4, 4);
    int32_t tok[10];
    fill(tok, 10, 80);
    struct kv_table a = {0};
    compute(p, &a, tok, 10, 6);
    int32_t was[3], dev[3], host[3];
    memcpy(was, a.blocks, sizeof(was));
    ck_assert_int_eq(kv_table_swap_out(p, &a, dev, host), 0);
    ck_assert_int_eq(a.on_host, 1);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(dev[i], was[i]);
        ck_assert_int_eq(a.blocks[i], host[i]);
        ck_assert_int_ge(host[i], 0);
        ck_assert_int_lt(host[i], 4);
    }
    ck_assert_int_ne(host[0], host[1]);
    ck_assert_int_ne(host[1], host[2]);
    ck_assert_int_ne(host[0], host[2]);
    ck_assert_int_eq(kv_pool_host_free_blocks(p), 1);
    ck_assert_int_eq(kv_block_state(p, was[0]), KV_CACHED);
    ck_assert_int_eq(kv_block_state(p, was[2]), KV_FREE);
    const struct kv_table *all[] = {&a};
    assert_consistent(p, all, 1);
    /* Not while on the host: */
    ck_assert_int_eq(kv_table_reserve(p, &a, 16), -1);
    ck_assert_int_eq(kv_table_swap_out(p, &a, dev, host), -1);
    struct kv_table c = {0};
    ck_assert_int_eq(kv_table_fork(p, &a, &c), -1);
    ck_assert_int_eq(kv_table_cow(p, &a, 0, dev, host), -1);

    /* The two full blocks are still cached: only the partial one is copied. */
    int32_t h2 = a.blocks[2];
    ck_assert_int_eq(kv_table_swap_in(p, &a, host, dev), 1);
    ck_assert_int_eq(a.on_host, 0);
    ck_assert_int_eq(host[0], h2);
    ck_assert_int_eq(dev[0], a.blocks[2]);
    ck_assert_int_eq(a.blocks[0], was[0]);
    ck_assert_int_eq(a.blocks[1], was[1]);
    ck_assert_int_eq(kv_pool_host_free_blocks(p), 4);
    assert_consistent(p, all, 1);

    /* Out again, and this time the cache is flushed before coming back. */
    ck_assert_int_eq(kv_table_swap_out(p, &a, dev, host), 0);
    int32_t hosts[3];
    memcpy(hosts, a.blocks, sizeof(hosts));
    struct kv_table filler = {0};
    ck_assert_int_eq(kv_table_reserve(p, &filler, 32), 0);
    kv_table_release(p, &filler);
    struct kv_stats st;
    kv_pool_stats(p, &st);
    ck_assert_int_eq(st.n_free, 8);
    ck_assert_int_eq(kv_table_swap_in(p, &a, host, dev), 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(host[i], hosts[i]);
        ck_assert_int_eq(dev[i], a.blocks[i]);
    }
    /* Back on the device under their hashes, the full blocks are found again. */
    ck_assert_uint_eq(kv_block_hash(p, a.blocks[0]), a.hashes[0]);
    ck_assert_uint_eq(kv_block_hash(p, a.blocks[1]), a.hashes[1]);
    assert_consistent(p, all, 1);
    kv_table_release(p, &a);
    kv_pool_free(p);
}
END_TEST

START_TEST(swap_out_without_host_room_changes_nothing)
{
    struct kv_pool *p = pool_new(8, 2, 4);
    struct kv_table a = {0};
    ck_assert_int_eq(kv_table_reserve(p, &a, 12), 0);
    int32_t was[3], dev[3], host[3];
    memcpy(was, a.blocks, sizeof(was));
    ck_assert_int_eq(kv_table_swap_out(p, &a, dev, host), -1);
    ck_assert_int_eq(a.on_host, 0);
    ck_assert_int_eq(memcmp(was, a.blocks, sizeof(was)), 0);
    ck_assert_int_eq(kv_pool_host_free_blocks(p), 2);
    ck_assert_int_eq(kv_block_refs(p, was[0]), 1);
    const struct kv_table *all[] = {&a};
    assert_consistent(p, all, 1);
    kv_table_release(p, &a);
    kv_pool_free(p);
}
END_TEST

START_TEST(swap_in_without_device_room_changes_nothing)
{
    struct kv_pool *p = pool_new(4, 4, 4);
    int32_t tok[12];
    fill(tok, 12, 90);
    struct kv_table a = {0}, b = {0};
    compute(p, &a, tok, 12, 0);
    int32_t dev[3], host[3];
    ck_assert_int_eq(kv_table_swap_out(p, &a, dev, host), 0);
    struct kv_stats st;
    kv_pool_stats(p, &st);
    ck_assert_int_eq(st.n_cached, 3);
    ck_assert_int_eq(st.n_free, 1);
    /* b takes the free block and evicts the least recent cached one, a's
     * last block: two cached hits remain, and taking them leaves no block
     * for the third. */
    ck_assert_int_eq(kv_table_reserve(p, &b, 8), 0);
    int32_t was[3];
    memcpy(was, a.blocks, sizeof(was));
    ck_assert_int_eq(kv_table_swap_in(p, &a, host, dev), -1);
    ck_assert_int_eq(a.on_host, 1);
    ck_assert_int_eq(memcmp(was, a.blocks, sizeof(was)), 0);
    ck_assert_int_eq(kv_pool_host_free_blocks(p), 1);
    kv_pool_stats(p, &st);
    ck_assert_int_eq(st.n_cached, 2);
    ck_assert_int_eq(st.n_used, 2);
    const struct kv_table *all[] = {&a, &b};
    assert_consistent(p, all, 2);
    kv_table_release(p, &b);
    ck_assert_int_eq(kv_table_swap_in(p, &a, host, dev), 1);
    ck_assert_int_eq(kv_pool_host_free_blocks(p), 4);
    assert_consistent(p, all, 1);
    kv_table_release(p, &a);
    kv_pool_free(p);
}
END_TEST

START_TEST(check_catches_a_table_holding_a_block_without_its_reference)
{
    struct kv_pool *p = pool_new(4, 2, 4);
    char err[128];
    struct kv_table a = {0};
    ck_assert_int_eq(kv_table_reserve(p, &a, 8), 0);
    const struct kv_table *all[] = {&a, &a};
    assert_consistent(p, all, 1);
    ck_assert_int_eq(kv_pool_check(p, all, 2, err, sizeof(err)), -1); /* counted twice */
    ck_assert_int_eq(kv_pool_check(p, all, 0, err, sizeof(err)), -1); /* held by nobody */
    ck_assert_int_eq(kv_pool_check(p, NULL, 0, err, sizeof(err)), 0);

    /* A table that claims committed tokens without their hashes. */
    a.n_committed = 4;
    ck_assert_int_eq(kv_pool_check(p, all, 1, err, sizeof(err)), -1);
    a.n_committed = 0;

    /* A reference dropped behind the table's back. */
    kv_block_unref(p, a.blocks[1]);
    ck_assert_int_eq(kv_pool_check(p, all, 1, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "ref"));
    a.n_blocks = 1;
    assert_consistent(p, all, 1);

    /* A swapped table naming a host block twice. */
    int32_t dev[1], host[1];
    ck_assert_int_eq(kv_table_swap_out(p, &a, dev, host), 0);
    assert_consistent(p, all, 1);
    struct kv_table fake = a;
    ck_assert_int_eq(
        kv_pool_check(p, (const struct kv_table *const[]){&a, &fake}, 2, err, sizeof(err)), -1);
    kv_table_release(p, &a);
    assert_consistent(p, all, 0);
    kv_pool_free(p);
}
END_TEST

START_TEST(salts_differ_by_content)
{
    ck_assert_uint_eq(kv_salt("acme", 4), kv_salt("acme", 4));
    ck_assert_uint_ne(kv_salt("acme", 4), kv_salt("acmf", 4));
    ck_assert_uint_ne(kv_salt("acme", 4), kv_salt("acme\0", 5));
    ck_assert_uint_ne(kv_salt("", 0), kv_salt("\0", 1));
    ck_assert_uint_ne(kv_salt("0123456789abcdef", 16), kv_salt("0123456789abcdeF", 16));
}
END_TEST

/* --- randomized run ----------------------------------------------------------
 *
 * A world of sequences driving the pool the way the engine does, with the
 * KV memory simulated: each device and host slot holds a fingerprint of the
 * whole prefix up to its token, as real K/V depends on all of it.  Writes go through cow first,
 * reported copies are carried out at once, and after every operation every committed token of every
 * table must be found in the slot its table maps it to.  A wrong prefix hit, a missed copy-on-write
 * or a bad swap pair shows up as a wrong token. */

#define RW_SEQS 16
#define RW_TOK  96

struct rw_seq {
    struct kv_table t;
    int live;
    int32_t tok[RW_TOK];
    int32_t fp[RW_TOK]; /* fp[i]: fingerprint of tok[0..i] */
    int n_tok;          /* tokens known so far (prompt, then generated) */
    uint64_t salt;
};

struct rw {
    struct kv_pool *p;
    int bs, nb, nh, max_tok;
    int32_t *dev, *host; /* [nb * bs], [nh * bs]: the fingerprint each slot holds */
    struct rw_seq s[RW_SEQS];
    uint64_t rng;
    long ops, hits, swaps_in, copies_skipped;
};

static uint32_t rw_rand(struct rw *w, uint32_t n)
{
    w->rng ^= w->rng << 13;
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    return (uint32_t)(w->rng >> 11) % n;
}

static void rw_push(struct rw_seq *q, int32_t tok)
{
    uint32_t x = (q->n_tok ? (uint32_t)q->fp[q->n_tok - 1] : 0u) * 2654435761u ^ (uint32_t)tok;
    x ^= x >> 15;
    x *= 0x2c1b3c6du;
    x ^= x >> 12;
    q->tok[q->n_tok] = tok;
    q->fp[q->n_tok++] = (int32_t)x;
}

static void rw_copy(int32_t *to, int32_t tb, const int32_t *from, int32_t fb, int bs)
{
    memcpy(to + (size_t)tb * bs, from + (size_t)fb * bs, sizeof(int32_t) * (size_t)bs);
}

/* A live sequence satisfying want(on_host), or -1. */
static int rw_pick(struct rw *w, int on_host)
{
    int start = (int)rw_rand(w, RW_SEQS);
    for (int k = 0; k < RW_SEQS; k++) {
        struct rw_seq *q = &w->s[(start + k) % RW_SEQS];
        if (q->live && (on_host < 0 || q->t.on_host == on_host))
            return (start + k) % RW_SEQS;
    }
    return -1;
}

static int rw_empty_slot(struct rw *w)
{
    for (int i = 0; i < RW_SEQS; i++)
        if (!w->s[i].live)
            return i;
    return -1;
}

static void rw_verify(struct rw *w)
{
    const struct kv_table *tabs[RW_SEQS];
    int n = 0, host_held = 0;
    for (int i = 0; i < RW_SEQS; i++) {
        struct rw_seq *q = &w->s[i];
        if (!q->live)
            continue;
        tabs[n++] = &q->t;
        const int32_t *mem = q->t.on_host ? w->host : w->dev;
        /* Check's assertions cost a message to the runner each: test first. */
        for (int pos = 0; pos < q->t.n_committed; pos++)
            if (mem[kv_table_slot(&q->t, w->bs, pos)] != q->fp[pos])
                ck_abort_msg("seq %d pos %d holds %d, not %d", i, pos,
                             mem[kv_table_slot(&q->t, w->bs, pos)], q->fp[pos]);
        host_held += q->t.on_host ? q->t.n_blocks : 0;
    }
    assert_consistent(w->p, tabs, n);
    struct kv_stats st;
    kv_pool_stats(w->p, &st);
    ck_assert_int_eq(st.n_free + st.n_cached + st.n_used, w->nb);
    ck_assert_int_eq(st.n_host_free + host_held, w->nh);
}

/* A new sequence: prompt drawn from a few families so that prefixes repeat,
 * then its cached prefix looked up. */
static void rw_new(struct rw *w)
{
    int i = rw_empty_slot(w);
    if (i < 0)
        return;
    struct rw_seq *q = &w->s[i];
    memset(q, 0, sizeof(*q));
    int family = (int)rw_rand(w, 3), shared = (int)rw_rand(w, (uint32_t)w->max_tok + 1);
    int n = 1 + (int)rw_rand(w, (uint32_t)w->max_tok);
    for (int k = 0; k < n; k++)
        rw_push(q, k < shared ? family * 1000 + k : 5000 + (int32_t)rw_rand(w, 4));
    q->salt = rw_rand(w, 4) == 0 ? 2 : 1;
    q->live = 1;
    int found = kv_table_match(w->p, &q->t, q->tok, q->n_tok - 1, q->salt);
    ck_assert_int_eq(found % w->bs, 0);
    ck_assert_int_le(found, q->n_tok - 1);
    ck_assert_int_eq(q->t.n_committed, found);
    w->hits += found > 0;
}

/* Computes the next tokens of a sequence: reserve, cow every block to be
 * written, write, commit.  A decoding sequence first samples a token. */
static void rw_step(struct rw *w)
{
    int i = rw_pick(w, 0);
    if (i < 0)
        return;
    struct rw_seq *q = &w->s[i];
    int from = q->t.n_committed;
    if (from == q->n_tok) {
        if (q->n_tok == w->max_tok)
            return;
        rw_push(q, 7000 + (int32_t)rw_rand(w, 3));
    }
    int to = from + 1 + (int)rw_rand(w, (uint32_t)(2 * w->bs));
    to = to < q->n_tok ? to : q->n_tok;
    struct kv_stats before, after;
    kv_pool_stats(w->p, &before);
    int had = q->t.n_blocks;
    if (kv_table_reserve(w->p, &q->t, to) != 0) {
        kv_pool_stats(w->p, &after);
        ck_assert_int_eq(q->t.n_blocks, had);
        ck_assert_int_eq(after.n_free, before.n_free);
        ck_assert_int_eq(after.n_cached, before.n_cached);
        ck_assert_int_lt(before.n_free + before.n_cached, (to + w->bs - 1) / w->bs - had);
        return;
    }
    for (int b = from / w->bs; b <= (to - 1) / w->bs; b++) {
        int32_t src, dst;
        int pos = b * w->bs > from ? b * w->bs : from;
        int rc = kv_table_cow(w->p, &q->t, pos, &src, &dst);
        if (rc < 0)
            return; /* pool short: this step waits */
        if (rc == 1)
            rw_copy(w->dev, dst, w->dev, src, w->bs);
    }
    for (int pos = from; pos < to; pos++)
        w->dev[kv_table_slot(&q->t, w->bs, pos)] = q->fp[pos];
    kv_table_commit(w->p, &q->t, q->tok, to, q->salt);
    ck_assert_int_eq(q->t.n_committed, to);
}

/* A child sharing everything so far, continuing with its own tokens. */
static void rw_fork(struct rw *w)
{
    int i = rw_pick(w, 0), j = rw_empty_slot(w);
    if (i < 0 || j < 0)
        return;
    struct rw_seq *a = &w->s[i], *c = &w->s[j];
    memset(c, 0, sizeof(*c));
    ck_assert_int_eq(kv_table_fork(w->p, &a->t, &c->t), 0);
    c->live = 1;
    c->salt = a->salt;
    c->n_tok = a->t.n_committed;
    memcpy(c->tok, a->tok, sizeof(int32_t) * (size_t)c->n_tok);
    memcpy(c->fp, a->fp, sizeof(int32_t) * (size_t)c->n_tok);
}

static void rw_swap_out(struct rw *w)
{
    int i = rw_pick(w, 0);
    if (i < 0)
        return;
    struct kv_table *t = &w->s[i].t;
    int32_t dev[RW_TOK], host[RW_TOK], was[RW_TOK];
    for (int k = 0; k < t->n_blocks; k++)
        was[k] = t->blocks[k];
    int free_host = kv_pool_host_free_blocks(w->p);
    if (kv_table_swap_out(w->p, t, dev, host) != 0) {
        ck_assert_int_gt(t->n_blocks, free_host);
        ck_assert_int_eq(t->on_host, 0);
        for (int k = 0; k < t->n_blocks; k++)
            ck_assert_int_eq(was[k], t->blocks[k]);
        ck_assert_int_eq(kv_pool_host_free_blocks(w->p), free_host);
        return;
    }
    for (int k = 0; k < t->n_blocks; k++) {
        ck_assert_int_eq(dev[k], was[k]);
        ck_assert_int_eq(host[k], t->blocks[k]);
        rw_copy(w->host, host[k], w->dev, dev[k], w->bs);
    }
}

static void rw_swap_in(struct rw *w)
{
    int i = rw_pick(w, 1);
    if (i < 0)
        return;
    struct kv_table *t = &w->s[i].t;
    int32_t dev[RW_TOK], host[RW_TOK], was[RW_TOK];
    for (int k = 0; k < t->n_blocks; k++)
        was[k] = t->blocks[k];
    struct kv_stats before, after;
    kv_pool_stats(w->p, &before);
    int n = kv_table_swap_in(w->p, t, host, dev);
    if (n < 0) {
        kv_pool_stats(w->p, &after);
        ck_assert_int_eq(t->on_host, 1);
        for (int k = 0; k < t->n_blocks; k++)
            ck_assert_int_eq(was[k], t->blocks[k]);
        ck_assert_int_eq(memcmp(&before, &after, sizeof(before)), 0);
        ck_assert_int_lt(before.n_free + before.n_cached, t->n_blocks);
        return;
    }
    ck_assert_int_le(n, t->n_blocks);
    for (int k = 0; k < n; k++)
        rw_copy(w->dev, dev[k], w->host, host[k], w->bs);
    w->swaps_in++;
    w->copies_skipped += t->n_blocks - n;
}

static void rw_release(struct rw *w)
{
    int i = rw_pick(w, -1);
    if (i < 0)
        return;
    kv_table_release(w->p, &w->s[i].t);
    w->s[i].live = 0;
}

static void rw_round(struct rw *w, int n_ops)
{
    static const int bss[] = {1, 2, 3, 4, 8};
    w->bs = bss[rw_rand(w, 5)];
    w->nb = 2 + (int)rw_rand(w, 40);
    w->nh = (int)rw_rand(w, 24);
    w->max_tok = w->bs * 10 < RW_TOK ? w->bs * 10 : RW_TOK;
    w->p = pool_new(w->nb, w->nh, w->bs);
    w->dev = malloc(sizeof(int32_t) * (size_t)(w->nb * w->bs));
    w->host = malloc(sizeof(int32_t) * (size_t)((w->nh ? w->nh : 1) * w->bs));
    ck_assert(w->dev && w->host);
    memset(w->s, 0, sizeof(w->s));
    for (int op = 0; op < n_ops; op++, w->ops++) {
        uint32_t r = rw_rand(w, 100);
        if (r < 16)
            rw_new(w);
        else if (r < 56)
            rw_step(w);
        else if (r < 63)
            rw_fork(w);
        else if (r < 72)
            rw_swap_out(w);
        else if (r < 84)
            rw_swap_in(w);
        else
            rw_release(w);
        rw_verify(w);
    }
    for (int i = 0; i < RW_SEQS; i++)
        if (w->s[i].live)
            kv_table_release(w->p, &w->s[i].t);
    struct kv_stats st;
    kv_pool_stats(w->p, &st);
    ck_assert_int_eq(st.n_used, 0);
    ck_assert_int_eq(st.n_free + st.n_cached, w->nb);
    ck_assert_int_eq(st.n_host_free, w->nh);
    const struct kv_table *none[1] = {NULL};
    assert_consistent(w->p, none, 0);
    kv_pool_free(w->p);
    free(w->dev);
    free(w->host);
}

START_TEST(random_operations_keep_every_invariant_and_every_token_in_place)
{
    static struct rw w;
    memset(&w, 0, sizeof(w));
    w.rng = 0x9e3779b97f4a7c15ULL;
    for (int round = 0; round < 80; round++)
        rw_round(&w, 500);
    ck_assert_int_ge(w.ops, 40000);
    /* The run must have exercised what it claims to. */
    ck_assert_int_gt(w.hits, 100);
    ck_assert_int_gt(w.swaps_in, 100);
    ck_assert_int_gt(w.copies_skipped, 0);
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
    tcase_add_test(tc, fresh_pool_hands_out_lowest_ids_first_and_reuses_the_last_freed);
    suite_add_tcase(s, tc);

    tc = tcase_create("prefix");
    tcase_add_test(tc, released_prefix_is_found_again_under_the_same_salt_only);
    tcase_add_test(tc, match_finds_whole_blocks_only_and_never_past_max_tokens);
    tcase_add_test(tc, prompt_of_exactly_two_blocks_matches_one_so_its_last_token_is_computed);
    tcase_add_test(tc, match_shares_blocks_that_are_still_in_use);
    tcase_add_test(tc, allocation_takes_free_blocks_then_the_least_recently_used_cached_one);
    tcase_add_test(tc, eviction_takes_the_tail_of_a_released_prefix_before_its_head);
    tcase_add_test(tc, equal_content_computed_twice_is_indexed_once);
    tcase_add_test(tc, commit_grows_block_by_block_and_never_goes_back);
    tcase_add_test(tc, salts_differ_by_content);
    suite_add_tcase(s, tc);

    tc = tcase_create("cow_swap");
    tcase_add_test(tc, fork_shares_everything_and_cow_copies_only_the_written_block);
    tcase_add_test(tc, cow_without_a_free_block_changes_nothing);
    tcase_add_test(tc, swap_round_trip_reports_pairs_and_reuses_blocks_still_cached);
    tcase_add_test(tc, swap_out_without_host_room_changes_nothing);
    tcase_add_test(tc, swap_in_without_device_room_changes_nothing);
    tcase_add_test(tc, check_catches_a_table_holding_a_block_without_its_reference);
    suite_add_tcase(s, tc);

    tc = tcase_create("random");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, random_operations_keep_every_invariant_and_every_token_in_place);
    suite_add_tcase(s, tc);
    return s;
}
