/*
 * kvcache/check.c — full verification of the pool's invariants, for tests
 * and debugging.
 *
 * It recomputes everything the pool keeps incrementally (state counts, the
 * free stack, the LRU, the index, reference counts from the tables) and
 * compares.  O(blocks + index + table entries); it allocates one scratch
 * array and never changes the pool.
 */
#include "kvcache/internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int kv_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Each block's state agrees with its ref count and hash; counts add up. */
static int kv_check_states(const struct kv_pool *p, char *err, size_t errlen)
{
    int n_free = 0, n_cached = 0;
    for (int b = 0; b < p->n_blocks; b++) {
        int s = p->state[b], r = p->refs[b];
        uint64_t h = p->hash[b];
        if (s == KV_FREE && (r != 0 || h != 0))
            return kv_fail(err, errlen, "free block %d has ref %d hash %llx", b, r,
                           (unsigned long long)h);
        if (s == KV_CACHED && (r != 0 || h == 0))
            return kv_fail(err, errlen, "cached block %d has ref %d hash %llx", b, r,
                           (unsigned long long)h);
        if (s == KV_USED && r < 1)
            return kv_fail(err, errlen, "used block %d has ref %d", b, r);
        if (s != KV_FREE && s != KV_USED && s != KV_CACHED)
            return kv_fail(err, errlen, "block %d has state %d", b, s);
        if (s != KV_CACHED && (p->lru_prev[b] >= 0 || p->lru_next[b] >= 0))
            return kv_fail(err, errlen, "block %d in state %d has LRU links", b, s);
        n_free += s == KV_FREE;
        n_cached += s == KV_CACHED;
    }
    if (n_free != p->n_free || n_cached != p->n_cached)
        return kv_fail(err, errlen, "%d free / %d cached blocks, counters say %d / %d", n_free,
                       n_cached, p->n_free, p->n_cached);
    return 0;
}

/* The free stack holds every free block once (mark[] is scratch). */
static int kv_check_free_stack(const struct kv_pool *p, int32_t *mark, char *err, size_t errlen)
{
    for (int i = 0; i < p->n_free; i++) {
        int32_t b = p->free_ids[i];
        if (b < 0 || b >= p->n_blocks || p->state[b] != KV_FREE || mark[b] == 1)
            return kv_fail(err, errlen, "free stack entry %d (block %d) is bad", i, b);
        mark[b] = 1;
    }
    return 0;
}

/* The LRU, walked both ways, holds every cached block once. */
static int kv_check_lru(const struct kv_pool *p, int32_t *mark, char *err, size_t errlen)
{
    int n = 0;
    int32_t prev = -1;
    for (int32_t b = p->lru_head; b >= 0; prev = b, b = p->lru_next[b]) {
        if (b >= p->n_blocks || p->state[b] != KV_CACHED || mark[b] == 2 || n >= p->n_cached)
            return kv_fail(err, errlen, "LRU entry %d (block %d) is bad", n, b);
        if (p->lru_prev[b] != prev)
            return kv_fail(err, errlen, "LRU block %d links back to %d, not %d", b, p->lru_prev[b],
                           prev);
        mark[b] = 2;
        n++;
    }
    if (n != p->n_cached || p->lru_tail != prev)
        return kv_fail(err, errlen, "LRU holds %d blocks ending at %d; expected %d ending at %d", n,
                       prev, p->n_cached, p->lru_tail);
    return 0;
}

/* Every index entry names a live hashed block reachable from its home slot;
 * every hashed block is in the index once. */
static int kv_check_index(const struct kv_pool *p, int32_t *mark, char *err, size_t errlen)
{
    int n = 0, n_hashed = 0;
    for (size_t i = 0; i <= p->index_mask; i++) {
        int32_t b = p->index[i];
        if (b < 0)
            continue;
        if (b >= p->n_blocks || p->state[b] == KV_FREE || p->hash[b] == 0 || mark[b] == 3)
            return kv_fail(err, errlen, "index slot %zu (block %d) is bad", i, b);
        if (kv_index_find(p, p->hash[b]) != b)
            return kv_fail(err, errlen, "block %d is not found under its hash", b);
        mark[b] = 3;
        n++;
    }
    for (int b = 0; b < p->n_blocks; b++)
        n_hashed += p->hash[b] != 0;
    if (n != p->n_indexed || n != n_hashed)
        return kv_fail(err, errlen, "index holds %d blocks, counter %d, hashed blocks %d", n,
                       p->n_indexed, n_hashed);
    return 0;
}

/* The host free stack holds exactly the unused host blocks, once each. */
static int kv_check_host(const struct kv_pool *p, int32_t *mark, char *err, size_t errlen)
{
    int n_unused = 0;
    for (int i = 0; i < p->n_host_free; i++) {
        int32_t h = p->host_free_ids[i];
        if (h < 0 || h >= p->n_host_blocks || p->host_used[h] || mark[h] == 4)
            return kv_fail(err, errlen, "host free stack entry %d (block %d) is bad", i, h);
        mark[h] = 4;
    }
    for (int h = 0; h < p->n_host_blocks; h++)
        n_unused += !p->host_used[h];
    if (n_unused != p->n_host_free)
        return kv_fail(err, errlen, "%d host blocks unused, %d on the free stack", n_unused,
                       p->n_host_free);
    return 0;
}

/* One table's own shape: sizes, ids in range, hashes exactly on the full
 * committed blocks and agreeing with the blocks' own hashes. */
static int kv_check_table(const struct kv_pool *p, const struct kv_table *t, int k, char *err,
                          size_t errlen)
{
    int bs = p->block_size;
    if (t->n_blocks < 0 || t->n_blocks > t->cap ||
        (t->n_blocks > 0 && (!t->blocks || !t->hashes)) || t->n_committed < 0 ||
        t->n_committed > t->n_blocks * bs)
        return kv_fail(err, errlen, "table %d: %d blocks, cap %d, %d committed", k, t->n_blocks,
                       t->cap, t->n_committed);
    int limit = t->on_host ? p->n_host_blocks : p->n_blocks;
    for (int i = 0; i < t->n_blocks; i++) {
        int32_t b = t->blocks[i];
        if (b < 0 || b >= limit)
            return kv_fail(err, errlen, "table %d: block %d is id %d", k, i, b);
        if ((t->hashes[i] != 0) != (i < t->n_committed / bs))
            return kv_fail(err, errlen, "table %d: block %d hash %llx with %d committed", k, i,
                           (unsigned long long)t->hashes[i], t->n_committed);
        if (!t->on_host && p->hash[b] && t->hashes[i] && p->hash[b] != t->hashes[i])
            return kv_fail(err, errlen, "table %d: block %d (id %d) hash differs from the table's",
                           k, i, b);
    }
    return 0;
}

/* Ref counts equal the tables' references; host blocks are used exactly by
 * swapped tables.  counts[] is scratch of max(n_blocks, n_host_blocks). */
static int kv_check_tables(const struct kv_pool *p, const struct kv_table *const *tables,
                           int n_tables, int32_t *counts, char *err, size_t errlen)
{
    for (int b = 0; b < p->n_blocks; b++)
        counts[b] = 0;
    for (int k = 0; k < n_tables; k++) {
        const struct kv_table *t = tables[k];
        if (kv_check_table(p, t, k, err, errlen))
            return -1;
        for (int i = 0; !t->on_host && i < t->n_blocks; i++)
            counts[t->blocks[i]]++;
    }
    for (int b = 0; b < p->n_blocks; b++)
        if (counts[b] != p->refs[b])
            return kv_fail(err, errlen, "block %d has ref %d but the tables hold %d", b, p->refs[b],
                           counts[b]);
    for (int h = 0; h < p->n_host_blocks; h++)
        counts[h] = 0;
    for (int k = 0; k < n_tables; k++)
        for (int i = 0; tables[k]->on_host && i < tables[k]->n_blocks; i++)
            counts[tables[k]->blocks[i]]++;
    for (int h = 0; h < p->n_host_blocks; h++)
        if (counts[h] != p->host_used[h])
            return kv_fail(err, errlen, "host block %d: used %d, held by %d tables", h,
                           p->host_used[h], counts[h]);
    return 0;
}

/* tables == NULL skips the table checks; a non-NULL array (even of zero
 * tables) is taken as every table in existence. */
int kv_pool_check(const struct kv_pool *p, const struct kv_table *const *tables, int n_tables,
                  char *err, size_t errlen)
{
    int n = p->n_blocks > p->n_host_blocks ? p->n_blocks : p->n_host_blocks;
    int32_t *scratch = calloc((size_t)n, sizeof(int32_t));
    if (!scratch)
        return kv_fail(err, errlen, "out of memory");
    int rc = kv_check_states(p, err, errlen);
    if (!rc)
        rc = kv_check_free_stack(p, scratch, err, errlen);
    if (!rc)
        rc = kv_check_lru(p, scratch, err, errlen);
    if (!rc)
        rc = kv_check_index(p, scratch, err, errlen);
    if (!rc)
        rc = kv_check_host(p, scratch, err, errlen);
    if (!rc && tables)
        rc = kv_check_tables(p, tables, n_tables, scratch, err, errlen);
    if (!rc && err && errlen)
        err[0] = 0;
    free(scratch);
    return rc;
}
