/*
 * kvcache/kvcache.h — the paged KV cache's bookkeeping: the device and host
 * block pools, per-sequence block tables, copy-on-write and the prefix cache.
 *
 * The memory of the pools belongs to the backend (kernels/, swap/); this
 * module only decides which block ids hold what.  Logical block i of a
 * sequence holds its tokens i*block_size .. (i+1)*block_size-1, in whatever
 * physical block its table names.  No sequence reserves more than the blocks
 * its tokens fill.
 *
 * A device block is in exactly one state:
 *   free    ref 0, no hash: on the free list;
 *   used    ref >= 1: held by that many tables (shared blocks: fork, prefix hits);
 *   cached  ref 0 but its prefix hash still valid: reusable by a later
 *           request with the same prefix until evicted (LRU) to serve an
 *           allocation when no block is free.
 * A host block is free or used (holding a swapped-out sequence's block).
 *
 * Prefix hashes chain: hash(block i) = H(hash(block i-1), its tokens, salt),
 * over full blocks only; the salt is the tenant unless a request names its
 * own, so that no tenant can probe another's prompts through cache timing.
 *
 * Not thread-safe: the engine thread owns the pool.
 */
#ifndef LLMD_KVCACHE_KVCACHE_H
#define LLMD_KVCACHE_KVCACHE_H

#include <stddef.h>
#include <stdint.h>

struct kv_pool; /* both pools, the free lists, the LRU and the prefix-cache index */

enum kv_state { KV_FREE = 0, KV_USED = 1, KV_CACHED = 2 };

struct kv_pool_opts {
    int n_blocks;      /* device blocks (> 0) */
    int n_host_blocks; /* host (swap) blocks (>= 0) */
    int block_size;    /* tokens per block (> 0) */
};

/* A pool; NULL when the sizes are bad or memory is short.  Owned by the caller. */
struct kv_pool *kv_pool_new(const struct kv_pool_opts *o);
void kv_pool_free(struct kv_pool *p);
int kv_pool_blocks(const struct kv_pool *p);
int kv_pool_host_blocks(const struct kv_pool *p);
int kv_pool_block_size(const struct kv_pool *p);
/* Device blocks an allocation can take now: free + cached. */
int kv_pool_free_blocks(const struct kv_pool *p);
int kv_pool_host_free_blocks(const struct kv_pool *p);

struct kv_stats {
    int n_blocks, n_free, n_cached, n_used;
    int n_host_blocks, n_host_free;
    long prefix_lookups;  /* blocks looked up by kv_table_match */
    long prefix_hits;     /* of which found */
    long cache_evictions; /* cached blocks reused for other content */
};
void kv_pool_stats(const struct kv_pool *p, struct kv_stats *st);

/* State and reference count of device block b (for operator views and tests). */
enum kv_state kv_block_state(const struct kv_pool *p, int32_t b);
int kv_block_refs(const struct kv_pool *p, int32_t b);
/* The block's prefix hash, 0 when it has none. */
uint64_t kv_block_hash(const struct kv_pool *p, int32_t b);

/* Takes a device block for new content (ref 1): a free one, else the least
 * recently used cached one (its hash is dropped); -1 when none is left. */
int32_t kv_block_alloc(struct kv_pool *p);
void kv_block_ref(struct kv_pool *p, int32_t b);
/* Drops one reference; at zero a hashed block becomes cached (most recently
 * used), any other block free. */
void kv_block_unref(struct kv_pool *p, int32_t b);

/* One sequence's block table. */
struct kv_table {
    int32_t *blocks;  /* [n_blocks] device ids, or host ids when on_host; owned by the table */
    uint64_t *hashes; /* [n_blocks] prefix hash of each full committed block, 0 for others */
    int n_blocks;
    int cap;
    int on_host;     /* 1 while swapped out: blocks[] are host block ids */
    int n_committed; /* tokens whose K/V the table's owner has declared computed */
};

/* Makes the table hold at least n_tokens tokens, allocating device blocks;
 * -1 (and nothing allocated) when the pool or memory runs short. */
int kv_table_reserve(struct kv_pool *p, struct kv_table *t, int n_tokens);
/* Returns every block of the table to its pool and empties the table. */
void kv_table_release(struct kv_pool *p, struct kv_table *t);
/* The physical slot (block * block_size + offset) of position pos. */
int32_t kv_table_slot(const struct kv_table *t, int block_size, int pos);

/* Prefix cache lookup for an empty table: appends the cached or in-use
 * blocks that hold the longest prefix of tokens[0..max_tokens) in whole
 * blocks under this salt, taking a reference on each, and marks them
 * committed.  Returns the number of tokens found (a multiple of block_size).
 * Pass max_tokens = n_prompt - 1 so that the last prompt token is always
 * computed (its logits are needed). */
int kv_table_match(struct kv_pool *p, struct kv_table *t, const int32_t *tokens, int max_tokens,
                   uint64_t salt);
/* Declares tokens[0..n_tokens) of the table computed: every block that this
 * fills gets its prefix hash and enters the prefix cache (unless an equal
 * block is already there).  tokens are the sequence's tokens from 0. */
void kv_table_commit(struct kv_pool *p, struct kv_table *t, const int32_t *tokens, int n_tokens,
                     uint64_t salt);

/* Copy-on-write.  fork: dst (empty) shares every block of src, ref +1 each,
 * with src's hashes and commit point. */
int kv_table_fork(struct kv_pool *p, const struct kv_table *src, struct kv_table *dst);
/* Makes the block that will hold position pos exclusively t's: when it is
 * shared, allocates a fresh block, puts it in the table and reports the copy
 * *src -> *dst that must run before anything writes it.  Returns 0 when no
 * copy is needed, 1 when one is reported, -1 when no block is free. */
int kv_table_cow(struct kv_pool *p, struct kv_table *t, int pos, int32_t *src, int32_t *dst);

/* The block copies that cow, swap_out and swap_in report must run before
 * the next forward pass, in the order they were reported: the blocks they
 * release may be handed out again at once.  Running a step's swap-outs,
 * then its swap-ins, then its cows is equivalent as long as no swap_out
 * follows a swap_in within the step (swap_in frees host blocks that a
 * swap_out could take before the swap-in copy has read them). */

/* Swap-out: moves the table to the host pool.  Fills dev[i] -> host[i], the
 * t->n_blocks block copies that must run before the device blocks are
 * written again, and drops the device references (hashed blocks stay
 * cached).  0, or -1, changing nothing, when the host pool is short. */
int kv_table_swap_out(struct kv_pool *p, struct kv_table *t, int32_t *dev, int32_t *host);
/* Swap-in: the reverse; frees the host blocks.  A block whose prefix hash
 * is still in the cache is taken from there by reference, with no copy;
 * the others get fresh device blocks.  Fills host[k] -> dev[k] for the n
 * copies needed (both arrays need room for t->n_blocks) and returns n;
 * -1, changing nothing, when the device pool is short. */
int kv_table_swap_in(struct kv_pool *p, struct kv_table *t, int32_t *host, int32_t *dev);

/* The salt of a tenant or of a request's cache_salt string. */
uint64_t kv_salt(const void *data, size_t n);

/* Checks every invariant: each block in exactly one state, free lists and
 * LRU consistent with the states, the hash index pointing at cached or used
 * blocks with that hash; with the tables given (all that exist), that every
 * block's ref count equals the references the tables hold and host blocks
 * are used exactly by swapped tables.  0, or -1 with a message. */
int kv_pool_check(const struct kv_pool *p, const struct kv_table *const *tables, int n_tables,
                  char *err, size_t errlen);

#endif
