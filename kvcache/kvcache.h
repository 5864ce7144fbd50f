/*
 * kvcache/kvcache.h — the paged KV block pool's bookkeeping.
 *
 * The memory of the pool belongs to the backend (kernels/); this module only
 * hands out block ids with reference counts and keeps each sequence's block
 * table: logical block i of a sequence holds its tokens
 * i*block_size .. (i+1)*block_size-1, in whatever physical block the table
 * names.  No sequence reserves more than the blocks its tokens fill.
 */
#ifndef LLMD_KVCACHE_KVCACHE_H
#define LLMD_KVCACHE_KVCACHE_H

#include <stdint.h>

struct kv_pool; /* the allocator: free list and reference counts */

/* A pool of n_blocks blocks of block_size tokens; NULL when out of memory. */
struct kv_pool *kv_pool_new(int n_blocks, int block_size);
void kv_pool_free(struct kv_pool *p);
int kv_pool_blocks(const struct kv_pool *p);
int kv_pool_block_size(const struct kv_pool *p);
int kv_pool_free_blocks(const struct kv_pool *p);

/* Takes a free block (ref count 1); -1 when none is free. */
int32_t kv_block_alloc(struct kv_pool *p);
void kv_block_ref(struct kv_pool *p, int32_t b);
/* Drops one reference; the block is free again at zero. */
void kv_block_unref(struct kv_pool *p, int32_t b);
int kv_block_refs(const struct kv_pool *p, int32_t b);

/* One sequence's block table. */
struct kv_table {
    int32_t *blocks; /* [n_blocks], owned by the table */
    int n_blocks;
    int cap;
};

/* Makes the table hold at least n_tokens tokens, allocating blocks; -1 (and
 * nothing allocated) when the pool or memory runs short. */
int kv_table_reserve(struct kv_pool *p, struct kv_table *t, int n_tokens);
/* Returns every block of the table to the pool and empties it. */
void kv_table_release(struct kv_pool *p, struct kv_table *t);
/* The physical slot (block * block_size + offset) of position pos. */
int32_t kv_table_slot(const struct kv_table *t, int block_size, int pos);

#endif
