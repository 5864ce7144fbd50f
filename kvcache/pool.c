/*
 * kvcache/pool.c — the device and host block pools: block states, reference
 * counts, the free stack and the LRU list of cached blocks.
 *
 * Allocation prefers a free block and only then evicts the least recently
 * used cached one, so prefix-cache content survives as long as memory allows.
 * Every operation is O(1) (an eviction also removes one index entry).
 */
#include "kvcache/internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* malloc that treats a zero count as one element, so empty host pools work. */
static void *kv_alloc_array(size_t n, size_t size)
{
    return malloc((n ? n : 1) * size);
}

static int kv_pool_alloc_arrays(struct kv_pool *p)
{
    size_t n = (size_t)p->n_blocks, nh = (size_t)p->n_host_blocks;
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    p->state = calloc(n, 1);
    p->refs = calloc(n, sizeof(int32_t));
    p->hash = calloc(n, sizeof(uint64_t));
    p->lru_prev = kv_alloc_array(n, sizeof(int32_t));
    p->lru_next = kv_alloc_array(n, sizeof(int32_t));
    p->free_ids = kv_alloc_array(n, sizeof(int32_t));
    p->host_free_ids = kv_alloc_array(nh, sizeof(int32_t));
    p->host_used = calloc(nh ? nh : 1, 1);
    p->index = kv_alloc_array(cap, sizeof(int32_t));
    p->index_mask = cap - 1;
    return p->state && p->refs && p->hash && p->lru_prev && p->lru_next && p->free_ids &&
                   p->host_free_ids && p->host_used && p->index
               ? 0
               : -1;
}

struct kv_pool *kv_pool_new(const struct kv_pool_opts *o)
{
    if (!o || o->n_blocks <= 0 || o->n_host_blocks < 0 || o->block_size <= 0)
        return NULL;
    struct kv_pool *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->n_blocks = o->n_blocks;
    p->n_host_blocks = o->n_host_blocks;
    p->block_size = o->block_size;
    if (kv_pool_alloc_arrays(p) != 0) {
        kv_pool_free(p);
        return NULL;
    }
    /* Lowest ids on top, so a fresh pool hands out 0, 1, 2 ... */
    for (int i = 0; i < p->n_blocks; i++) {
        p->free_ids[i] = p->n_blocks - 1 - i;
        p->lru_prev[i] = p->lru_next[i] = -1;
    }
    for (int i = 0; i < p->n_host_blocks; i++)
        p->host_free_ids[i] = p->n_host_blocks - 1 - i;
    memset(p->index, 0xff, sizeof(int32_t) * (p->index_mask + 1));
    p->n_free = p->n_blocks;
    p->n_host_free = p->n_host_blocks;
    p->lru_head = p->lru_tail = -1;
    return p;
}

void kv_pool_free(struct kv_pool *p)
{
    if (!p)
        return;
    free(p->state);
    free(p->refs);
    free(p->hash);
    free(p->lru_prev);
    free(p->lru_next);
    free(p->free_ids);
    free(p->host_free_ids);
    free(p->host_used);
    free(p->index);
    free(p);
}

int kv_pool_blocks(const struct kv_pool *p)
{
    return p->n_blocks;
}
int kv_pool_host_blocks(const struct kv_pool *p)
{
    return p->n_host_blocks;
}
int kv_pool_block_size(const struct kv_pool *p)
{
    return p->block_size;
}
int kv_pool_free_blocks(const struct kv_pool *p)
{
    return p->n_free + p->n_cached;
}
int kv_pool_host_free_blocks(const struct kv_pool *p)
{
    return p->n_host_free;
}

void kv_pool_stats(const struct kv_pool *p, struct kv_stats *st)
{
    st->n_blocks = p->n_blocks;
    st->n_free = p->n_free;
    st->n_cached = p->n_cached;
    st->n_used = p->n_blocks - p->n_free - p->n_cached;
    st->n_host_blocks = p->n_host_blocks;
    st->n_host_free = p->n_host_free;
    st->prefix_lookups = p->lookups;
    st->prefix_hits = p->hits;
    st->cache_evictions = p->evictions;
}

static int kv_valid(const struct kv_pool *p, int32_t b)
{
    return b >= 0 && b < p->n_blocks;
}

enum kv_state kv_block_state(const struct kv_pool *p, int32_t b)
{
    return kv_valid(p, b) ? (enum kv_state)p->state[b] : KV_FREE;
}
int kv_block_refs(const struct kv_pool *p, int32_t b)
{
    return kv_valid(p, b) ? p->refs[b] : 0;
}
uint64_t kv_block_hash(const struct kv_pool *p, int32_t b)
{
    return kv_valid(p, b) ? p->hash[b] : 0;
}

/* --- LRU of cached blocks ---------------------------------------------------- */

static void kv_lru_push(struct kv_pool *p, int32_t b)
{
    assert(p->state[b] == KV_CACHED && p->lru_prev[b] < 0 && p->lru_next[b] < 0);
    p->lru_prev[b] = p->lru_tail;
    if (p->lru_tail >= 0)
        p->lru_next[p->lru_tail] = b;
    else
        p->lru_head = b;
    p->lru_tail = b;
    p->n_cached++;
}

static void kv_lru_remove(struct kv_pool *p, int32_t b)
{
    assert(p->state[b] == KV_CACHED && p->n_cached > 0);
    int32_t prev = p->lru_prev[b], next = p->lru_next[b];
    if (prev >= 0)
        p->lru_next[prev] = next;
    else
        p->lru_head = next;
    if (next >= 0)
        p->lru_prev[next] = prev;
    else
        p->lru_tail = prev;
    p->lru_prev[b] = p->lru_next[b] = -1;
    p->n_cached--;
}

/* --- device blocks ------------------------------------------------------------ */

int32_t kv_block_alloc(struct kv_pool *p)
{
    int32_t b;
    if (p->n_free > 0) {
        b = p->free_ids[--p->n_free];
        assert(p->state[b] == KV_FREE && p->refs[b] == 0 && p->hash[b] == 0);
    } else if (p->lru_head >= 0) {
        b = p->lru_head;
        kv_lru_remove(p, b);
        kv_index_drop(p, b);
        p->evictions++;
    } else {
        return -1;
    }
    p->state[b] = KV_USED;
    p->refs[b] = 1;
    return b;
}

void kv_block_take(struct kv_pool *p, int32_t b)
{
    assert(kv_valid(p, b) && p->state[b] != KV_FREE);
    if (p->state[b] == KV_CACHED) {
        kv_lru_remove(p, b);
        p->state[b] = KV_USED;
    }
    p->refs[b]++;
}

void kv_block_ref(struct kv_pool *p, int32_t b)
{
    kv_block_take(p, b);
}

void kv_block_unref(struct kv_pool *p, int32_t b)
{
    assert(kv_valid(p, b) && p->state[b] == KV_USED && p->refs[b] > 0);
    if (--p->refs[b] > 0)
        return;
    if (p->hash[b]) {
        p->state[b] = KV_CACHED;
        kv_lru_push(p, b);
    } else {
        p->state[b] = KV_FREE;
        p->free_ids[p->n_free++] = b;
    }
}

/* --- host blocks -------------------------------------------------------------- */

int32_t kv_host_alloc(struct kv_pool *p)
{
    if (p->n_host_free == 0)
        return -1;
    int32_t h = p->host_free_ids[--p->n_host_free];
    assert(!p->host_used[h]);
    p->host_used[h] = 1;
    return h;
}

void kv_host_release(struct kv_pool *p, int32_t h)
{
    assert(h >= 0 && h < p->n_host_blocks && p->host_used[h]);
    p->host_used[h] = 0;
    p->host_free_ids[p->n_host_free++] = h;
}
