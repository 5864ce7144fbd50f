/*
 * kvcache/internal.h — the pool's private layout, shared by the kvcache
 * sources only (the public interface is kvcache.h).
 *
 * Every device block's state lives in parallel arrays indexed by block id.
 * A free block sits on the free stack; a cached block sits on the LRU list
 * (an intrusive doubly linked list through lru_prev/lru_next, least recently
 * used at the head); a used block is on neither.  A block has a hash exactly
 * when the prefix-cache index maps that hash to it.
 */
#ifndef LLMD_KVCACHE_INTERNAL_H
#define LLMD_KVCACHE_INTERNAL_H

#include "kvcache/kvcache.h"

struct kv_pool {
    int n_blocks, n_host_blocks, block_size;

    /* device blocks */
    uint8_t *state;    /* [n_blocks] enum kv_state */
    int32_t *refs;     /* [n_blocks] */
    uint64_t *hash;    /* [n_blocks] prefix hash, 0 for none */
    int32_t *lru_prev; /* [n_blocks] links of cached blocks, -1 at the ends */
    int32_t *lru_next; /* [n_blocks] */
    int32_t lru_head;  /* least recently used cached block, -1 when none */
    int32_t lru_tail;  /* most recently used */
    int32_t *free_ids; /* [n_blocks] stack; the top n_free entries are free */
    int n_free, n_cached;

    /* host blocks */
    int32_t *host_free_ids; /* [n_host_blocks] stack of free host blocks */
    uint8_t *host_used;     /* [n_host_blocks] */
    int n_host_free;

    /* prefix-cache index: open addressing with linear probing over block
     * ids (-1 empty); a slot's key is hash[block].  At most half full. */
    int32_t *index;
    size_t index_mask;
    int n_indexed;

    long lookups, hits, evictions;
};

/* pool.c */
void kv_block_take(struct kv_pool *p, int32_t b); /* +1 ref on a used or cached block */
int32_t kv_host_alloc(struct kv_pool *p);
void kv_host_release(struct kv_pool *p, int32_t h);

/* prefix.c */
uint64_t kv_block_key(uint64_t parent, const int32_t *tokens, int n, uint64_t salt);
int32_t kv_index_find(const struct kv_pool *p, uint64_t h);
/* Gives block b the hash h and indexes it, unless b has a hash already or
 * another block holds h. */
void kv_index_register(struct kv_pool *p, int32_t b, uint64_t h);
/* Removes b from the index and clears its hash. */
void kv_index_drop(struct kv_pool *p, int32_t b);

/* table.c */
int kv_table_grow(struct kv_table *t, int need);

#endif
