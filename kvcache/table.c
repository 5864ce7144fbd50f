/*
 * kvcache/table.c — per-sequence block tables: growth, release, slots,
 * copy-on-write and swapping to and from the host pool.
 *
 * Every operation here checks first whether it can complete and only then
 * changes anything, so a refusal (-1) leaves pool and table as they were.
 *
 * Copies.  cow, swap_out and swap_in only report the block copies that make
 * their new mapping true; the engine runs them in the order they were
 * reported (or grouped as kvcache.h allows), all before the step's forward
 * pass.  That ordering is what lets a block released here (a swapped-out
 * device block, a swapped-in host block) be handed to someone else at once:
 * its old content is read by the earlier copy before any later copy or the
 * forward pass writes it.
 */
#include "kvcache/internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

int kv_table_grow(struct kv_table *t, int need)
{
    if (need <= t->cap)
        return 0;
    int cap = t->cap ? t->cap : 4;
    while (cap < need)
        cap = cap > 0x3fffffff ? need : cap * 2;
    int32_t *nb = realloc(t->blocks, sizeof(int32_t) * (size_t)cap);
    if (!nb)
        return -1;
    t->blocks = nb; /* larger but holding the same entries: no change yet */
    uint64_t *nh = realloc(t->hashes, sizeof(uint64_t) * (size_t)cap);
    if (!nh)
        return -1;
    t->hashes = nh;
    t->cap = cap;
    return 0;
}

int kv_table_reserve(struct kv_pool *p, struct kv_table *t, int n_tokens)
{
    if (t->on_host)
        return -1;
    long need = ((long)n_tokens + p->block_size - 1) / p->block_size;
    if (need <= t->n_blocks)
        return 0;
    if (need - t->n_blocks > kv_pool_free_blocks(p) || kv_table_grow(t, (int)need) != 0)
        return -1;
    while (t->n_blocks < need) {
        int32_t b = kv_block_alloc(p);
        assert(b >= 0);
        t->blocks[t->n_blocks] = b;
        t->hashes[t->n_blocks++] = 0;
    }
    return 0;
}

/* Last block first, so that a prefix's first blocks end up most recently
 * used and a later eviction takes the tail of a prefix before its head. */
void kv_table_release(struct kv_pool *p, struct kv_table *t)
{
    for (int i = t->n_blocks - 1; i >= 0; i--) {
        if (t->on_host)
            kv_host_release(p, t->blocks[i]);
        else
            kv_block_unref(p, t->blocks[i]);
    }
    free(t->blocks);
    free(t->hashes);
    memset(t, 0, sizeof(*t));
}

int32_t kv_table_slot(const struct kv_table *t, int block_size, int pos)
{
    return t->blocks[pos / block_size] * block_size + pos % block_size;
}

int kv_table_fork(struct kv_pool *p, const struct kv_table *src, struct kv_table *dst)
{
    if (src->on_host || dst->n_blocks != 0 || dst->on_host || src == dst ||
        kv_table_grow(dst, src->n_blocks) != 0)
        return -1;
    for (int i = 0; i < src->n_blocks; i++)
        kv_block_take(p, src->blocks[i]);
    if (src->n_blocks > 0) {
        memcpy(dst->blocks, src->blocks, sizeof(int32_t) * (size_t)src->n_blocks);
        memcpy(dst->hashes, src->hashes, sizeof(uint64_t) * (size_t)src->n_blocks);
    }
    dst->n_blocks = src->n_blocks;
    dst->n_committed = src->n_committed;
    return 0;
}

/* Only the block past the commit point is ever written, and full committed
 * blocks are never rewritten, so the copy concerns the last, partial block,
 * which carries no hash.  Were it asked for a full committed block, the copy
 * holds the same tokens and the table keeps that block's hash; the new block
 * stays out of the index, so it is freed, not cached, when released. */
int kv_table_cow(struct kv_pool *p, struct kv_table *t, int pos, int32_t *src, int32_t *dst)
{
    int i = pos >= 0 ? pos / p->block_size : -1;
    if (t->on_host || i < 0 || i >= t->n_blocks)
        return -1;
    int32_t old = t->blocks[i];
    if (p->refs[old] == 1)
        return 0;
    /* old has another holder, so it is used and the allocation cannot evict it */
    int32_t b = kv_block_alloc(p);
    if (b < 0)
        return -1;
    kv_block_unref(p, old);
    t->blocks[i] = b;
    *src = old;
    *dst = b;
    return 1;
}

/* The device blocks are released at once; a hashed one whose last reference
 * this was becomes cached and may be evicted and rewritten, but only after
 * the copy reported here has read it (see the ordering note above). */
int kv_table_swap_out(struct kv_pool *p, struct kv_table *t, int32_t *dev, int32_t *host)
{
    if (t->on_host || t->n_blocks > p->n_host_free)
        return -1;
    for (int i = 0; i < t->n_blocks; i++) {
        dev[i] = t->blocks[i];
        host[i] = kv_host_alloc(p);
        assert(host[i] >= 0);
    }
    for (int i = t->n_blocks - 1; i >= 0; i--) {
        kv_block_unref(p, dev[i]);
        t->blocks[i] = host[i];
    }
    t->on_host = 1;
    return 0;
}

/* Blocks whose hash is still indexed (cached, or in use by another table)
 * are taken by reference and need no copy; the others get fresh blocks,
 * which re-enter the index under their hash unless another block holds it
 * by then.  dev[] doubles as scratch for each block's source before it is
 * filled with the copies' destinations. */
int kv_table_swap_in(struct kv_pool *p, struct kv_table *t, int32_t *host, int32_t *dev)
{
    if (!t->on_host)
        return -1;
    int misses = 0, cached_hits = 0;
    for (int i = 0; i < t->n_blocks; i++) {
        int32_t b = t->hashes[i] ? kv_index_find(p, t->hashes[i]) : -1;
        dev[i] = b;
        misses += b < 0;
        cached_hits += b >= 0 && p->state[b] == KV_CACHED;
    }
    /* Taking a cached hit uses up one allocatable block as well. */
    if (misses > kv_pool_free_blocks(p) - cached_hits)
        return -1;
    /* Hits first, so that the allocations below cannot evict them. */
    for (int i = 0; i < t->n_blocks; i++)
        if (dev[i] >= 0)
            kv_block_take(p, dev[i]);
    int n = 0;
    for (int i = 0; i < t->n_blocks; i++) {
        int32_t h = t->blocks[i], b = dev[i];
        if (b < 0) {
            b = kv_block_alloc(p);
            assert(b >= 0);
            if (t->hashes[i])
                kv_index_register(p, b, t->hashes[i]);
            host[n] = h;
            dev[n++] = b; /* n <= i: overwrites only consumed scratch */
        }
        kv_host_release(p, h);
        t->blocks[i] = b;
    }
    t->on_host = 0;
    return n;
}
