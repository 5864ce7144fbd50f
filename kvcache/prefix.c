/*
 * kvcache/prefix.c — the prefix cache: chained block hashes, the index from
 * hash to device block, and matching / committing a table's tokens.
 *
 * A block's hash covers its parent's hash, its own tokens and the salt, so
 * equal hashes mean equal whole prefixes under the same salt (up to 64-bit
 * collisions).  The index is an open-addressing table of block ids keyed by
 * the blocks' hashes, deleted by backward shift so that no tombstones build
 * up; it never holds more entries than the pool has blocks.
 */
#include "kvcache/internal.h"

#include <assert.h>
#include <string.h>

/* --- hashing ------------------------------------------------------------------- */

#define KV_GOLDEN    0x9e3779b97f4a7c15ULL
#define KV_SEED_BLK  0x6b76626c6f636b31ULL /* "kvblock1" */
#define KV_SEED_SALT 0x6b7673616c743031ULL /* "kvsalt01" */

/* A bijective 64-bit finaliser (xor-shift / multiply rounds, as in splitmix). */
static uint64_t kv_mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 29;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 32;
    return x;
}

/* Folds one word into the state: injective in v for a fixed state. */
static uint64_t kv_absorb(uint64_t h, uint64_t v)
{
    return kv_mix(h + v * KV_GOLDEN);
}

uint64_t kv_block_key(uint64_t parent, const int32_t *tokens, int n, uint64_t salt)
{
    uint64_t h = kv_absorb(kv_mix(salt ^ KV_SEED_BLK), parent);
    int i = 0;
    for (; i + 1 < n; i += 2)
        h = kv_absorb(h, (uint64_t)(uint32_t)tokens[i] | (uint64_t)(uint32_t)tokens[i + 1] << 32);
    if (i < n)
        h = kv_absorb(h, (uint64_t)(uint32_t)tokens[i]);
    h = kv_absorb(h, (uint64_t)n);
    return h ? h : 1; /* 0 means "no hash" everywhere */
}

uint64_t kv_salt(const void *data, size_t n)
{
    const unsigned char *s = data;
    uint64_t h = kv_mix(KV_SEED_SALT ^ (uint64_t)n);
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w = 0;
        memcpy(&w, s + i, n - i < 8 ? n - i : 8);
        h = kv_absorb(h, w);
    }
    return h;
}

/* --- index ---------------------------------------------------------------------- */

static size_t kv_index_home(const struct kv_pool *p, uint64_t h)
{
    return (size_t)(h ^ h >> 32) & p->index_mask;
}

int32_t kv_index_find(const struct kv_pool *p, uint64_t h)
{
    for (size_t i = kv_index_home(p, h);; i = (i + 1) & p->index_mask) {
        int32_t b = p->index[i];
        if (b < 0 || p->hash[b] == h)
            return b;
    }
}

void kv_index_register(struct kv_pool *p, int32_t b, uint64_t h)
{
    assert(h != 0 && p->state[b] == KV_USED);
    if (p->hash[b] || kv_index_find(p, h) >= 0)
        return;
    size_t i = kv_index_home(p, h);
    while (p->index[i] >= 0)
        i = (i + 1) & p->index_mask;
    p->hash[b] = h;
    p->index[i] = b;
    p->n_indexed++;
    assert((size_t)p->n_indexed <= p->index_mask / 2 + 1);
}

void kv_index_drop(struct kv_pool *p, int32_t b)
{
    uint64_t h = p->hash[b];
    if (!h)
        return;
    size_t i = kv_index_home(p, h);
    while (p->index[i] != b) {
        assert(p->index[i] >= 0);
        i = (i + 1) & p->index_mask;
    }
    /* Backward shift: pull later entries of the probe run into the hole
     * unless their home lies cyclically after the hole. */
    for (size_t j = (i + 1) & p->index_mask; p->index[j] >= 0; j = (j + 1) & p->index_mask) {
        size_t home = kv_index_home(p, p->hash[p->index[j]]);
        if (((j - home) & p->index_mask) >= ((j - i) & p->index_mask)) {
            p->index[i] = p->index[j];
            i = j;
        }
    }
    p->index[i] = -1;
    p->hash[b] = 0;
    p->n_indexed--;
}

/* --- match and commit ------------------------------------------------------------ */

int kv_table_match(struct kv_pool *p, struct kv_table *t, const int32_t *tokens, int max_tokens,
                   uint64_t salt)
{
    int bs = p->block_size;
    if (t->n_blocks != 0 || t->on_host || !tokens || max_tokens < bs)
        return 0;
    int n_full = max_tokens / bs;
    /* The capacity the prompt needs anyway; failing here changes nothing. */
    if (kv_table_grow(t, n_full) != 0)
        return 0;
    uint64_t parent = 0;
    for (int i = 0; i < n_full; i++) {
        uint64_t h = kv_block_key(parent, tokens + (size_t)i * bs, bs, salt);
        p->lookups++;
        int32_t b = kv_index_find(p, h);
        if (b < 0)
            break;
        p->hits++;
        kv_block_take(p, b);
        t->blocks[i] = b;
        t->hashes[i] = h;
        t->n_blocks++;
        parent = h;
    }
    t->n_committed = t->n_blocks * bs;
    return t->n_committed;
}

void kv_table_commit(struct kv_pool *p, struct kv_table *t, const int32_t *tokens, int n_tokens,
                     uint64_t salt)
{
    int bs = p->block_size;
    if (n_tokens > t->n_blocks * bs)
        n_tokens = t->n_blocks * bs; /* only what the table holds can be computed */
    if (n_tokens <= t->n_committed || !tokens)
        return;
    /* Blocks below n_committed / bs already carry their hashes. */
    int from = t->n_committed / bs, to = n_tokens / bs;
    uint64_t parent = from > 0 ? t->hashes[from - 1] : 0;
    for (int i = from; i < to; i++) {
        uint64_t h = kv_block_key(parent, tokens + (size_t)i * bs, bs, salt);
        t->hashes[i] = h;
        parent = h;
        /* A swapped table's blocks are host ids: nothing to index. */
        if (!t->on_host)
            kv_index_register(p, t->blocks[i], h);
    }
    t->n_committed = n_tokens;
}
