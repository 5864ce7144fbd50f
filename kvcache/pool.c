/*
 * kvcache/pool.c — block allocator with reference counts, and per-sequence
 * block tables.
 *
 * Free blocks sit on a LIFO stack so that allocation and release are O(1);
 * a block's reference count says how many tables hold it.
 */
#include "kvcache/kvcache.h"

#include <assert.h>
#include <stdlib.h>

struct kv_pool {
    int n_blocks;
    int block_size;
    int n_free;
    int32_t *free_stack; /* [n_blocks]; the top n_free entries are free */
    int32_t *refs;       /* [n_blocks] */
};

struct kv_pool *kv_pool_new(const struct kv_pool_opts *o)
{
    int n_blocks = o->n_blocks, block_size = o->block_size;
    if (n_blocks <= 0 || block_size <= 0)
        return NULL;
    struct kv_pool *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->free_stack = malloc(sizeof(int32_t) * (size_t)n_blocks);
    p->refs = calloc((size_t)n_blocks, sizeof(int32_t));
    if (!p->free_stack || !p->refs) {
        kv_pool_free(p);
        return NULL;
    }
    p->n_blocks = n_blocks;
    p->block_size = block_size;
    /* Lowest ids on top, so a fresh pool hands out 0, 1, 2 ... */
    for (int i = 0; i < n_blocks; i++)
        p->free_stack[i] = n_blocks - 1 - i;
    p->n_free = n_blocks;
    return p;
}

void kv_pool_free(struct kv_pool *p)
{
    if (!p)
        return;
    free(p->free_stack);
    free(p->refs);
    free(p);
}

int kv_pool_blocks(const struct kv_pool *p)
{
    return p->n_blocks;
}
int kv_pool_block_size(const struct kv_pool *p)
{
    return p->block_size;
}
int kv_pool_free_blocks(const struct kv_pool *p)
{
    return p->n_free;
}

int32_t kv_block_alloc(struct kv_pool *p)
{
    if (p->n_free == 0)
        return -1;
    int32_t b = p->free_stack[--p->n_free];
    assert(p->refs[b] == 0);
    p->refs[b] = 1;
    return b;
}

void kv_block_ref(struct kv_pool *p, int32_t b)
{
    assert(b >= 0 && b < p->n_blocks && p->refs[b] > 0);
    p->refs[b]++;
}

void kv_block_unref(struct kv_pool *p, int32_t b)
{
    assert(b >= 0 && b < p->n_blocks && p->refs[b] > 0);
    if (--p->refs[b] == 0)
        p->free_stack[p->n_free++] = b;
}

int kv_block_refs(const struct kv_pool *p, int32_t b)
{
    return (b >= 0 && b < p->n_blocks) ? p->refs[b] : 0;
}

int kv_table_reserve(struct kv_pool *p, struct kv_table *t, int n_tokens)
{
    int need = (n_tokens + p->block_size - 1) / p->block_size;
    if (need <= t->n_blocks)
        return 0;
    if (need - t->n_blocks > p->n_free)
        return -1;
    if (need > t->cap) {
        int cap = t->cap ? t->cap : 4;
        while (cap < need)
            cap *= 2;
        int32_t *nb = realloc(t->blocks, sizeof(int32_t) * (size_t)cap);
        if (!nb)
            return -1;
        t->blocks = nb;
        t->cap = cap;
    }
    while (t->n_blocks < need)
        t->blocks[t->n_blocks++] = kv_block_alloc(p);
    return 0;
}

void kv_table_release(struct kv_pool *p, struct kv_table *t)
{
    for (int i = t->n_blocks - 1; i >= 0; i--)
        kv_block_unref(p, t->blocks[i]);
    free(t->blocks);
    t->blocks = NULL;
    t->n_blocks = t->cap = 0;
}

int32_t kv_table_slot(const struct kv_table *t, int block_size, int pos)
{
    return t->blocks[pos / block_size] * block_size + pos % block_size;
}
