/*
 * swap/swap.c — the host block pool and its copies, and the cost model.
 *
 * The host pool is one backend host buffer (pinned on CUDA) of
 * n_host_blocks blocks laid out exactly like the device pool, so a block
 * moves with one contiguous copy either way.  Copies go through the
 * backend's swap(); the counters feed the operator views and the cost model.
 */
#include "swap/swap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct swap_pool {
    struct be *be;
    struct be_kv_geom geom;
    struct be_buf *host; /* NULL when n_host_blocks is 0 */
    int n_host_blocks;
    size_t block_bytes;
    struct swap_stats st;
};

static double swap_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct swap_pool *swap_pool_new(struct be *be, const struct be_kv_geom *g, int n_host_blocks,
                                char *err, size_t errlen)
{
    if (n_host_blocks < 0) {
        snprintf(err, errlen, "swap: negative host pool size");
        return NULL;
    }
    struct swap_pool *sp = calloc(1, sizeof(*sp));
    if (!sp) {
        snprintf(err, errlen, "swap: out of memory");
        return NULL;
    }
    sp->be = be;
    sp->geom = *g;
    sp->n_host_blocks = n_host_blocks;
    sp->block_bytes = be_kv_block_elems(g) * sizeof(float);
    if (n_host_blocks > 0) {
        sp->host = be->ops->alloc_host(be, sp->block_bytes * (size_t)n_host_blocks);
        if (!sp->host) {
            snprintf(err, errlen, "swap: cannot allocate %d host blocks (%zu bytes): %s",
                     n_host_blocks, sp->block_bytes * (size_t)n_host_blocks, be_error(be));
            free(sp);
            return NULL;
        }
    }
    return sp;
}

void swap_pool_free(struct swap_pool *sp)
{
    if (!sp)
        return;
    sp->be->ops->free(sp->be, sp->host);
    free(sp);
}

int swap_pool_blocks(const struct swap_pool *sp)
{
    return sp->n_host_blocks;
}

size_t swap_block_bytes(const struct swap_pool *sp)
{
    return sp->block_bytes;
}

/* One batch of copies in either direction, counted. */
static int swap_copy(struct swap_pool *sp, struct be_buf *dev_kv, const int32_t *dev,
                     const int32_t *host, int n, int to_host, char *err, size_t errlen)
{
    if (n == 0)
        return 0;
    if (!sp->host) {
        snprintf(err, errlen, "swap: no host pool");
        return -1;
    }
    double t0 = swap_now();
    if (sp->be->ops->swap(sp->be, dev_kv, sp->host, &sp->geom, dev, host, n, to_host)) {
        snprintf(err, errlen, "swap: %s", be_error(sp->be));
        return -1;
    }
    sp->st.seconds += swap_now() - t0;
    uint64_t bytes = (uint64_t)sp->block_bytes * (uint64_t)n;
    if (to_host) {
        sp->st.blocks_out += n;
        sp->st.bytes_out += bytes;
    } else {
        sp->st.blocks_in += n;
        sp->st.bytes_in += bytes;
    }
    return 0;
}

int swap_out(struct swap_pool *sp, struct be_buf *dev_kv, const int32_t *dev, const int32_t *host,
             int n, char *err, size_t errlen)
{
    return swap_copy(sp, dev_kv, dev, host, n, 1, err, errlen);
}

int swap_in(struct swap_pool *sp, struct be_buf *dev_kv, const int32_t *host, const int32_t *dev,
            int n, char *err, size_t errlen)
{
    return swap_copy(sp, dev_kv, dev, host, n, 0, err, errlen);
}

double swap_measure(struct swap_pool *sp, struct be_buf *dev_kv, int n_dev_blocks, int n, char *err,
                    size_t errlen)
{
    if (n > n_dev_blocks)
        n = n_dev_blocks;
    if (n > sp->n_host_blocks)
        n = sp->n_host_blocks;
    if (n <= 0) {
        snprintf(err, errlen, "swap: no blocks to measure with");
        return -1;
    }
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    if (!ids) {
        snprintf(err, errlen, "swap: out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++)
        ids[i] = i;
    struct be *be = sp->be;
    double best = 0;
    int rc = 0;
    /* A few rounds, keeping the best: the first touches pages for the first time. */
    for (int round = 0; round < 3 && rc == 0; round++) {
        double t0 = swap_now();
        rc = be->ops->swap(be, dev_kv, sp->host, &sp->geom, ids, ids, n, 1) ||
             be->ops->swap(be, dev_kv, sp->host, &sp->geom, ids, ids, n, 0) || be->ops->sync(be);
        double dt = swap_now() - t0;
        double bw = dt > 0 ? 2.0 * (double)sp->block_bytes * n / dt : 0;
        best = bw > best ? bw : best;
    }
    free(ids);
    if (rc) {
        snprintf(err, errlen, "swap: measuring bandwidth: %s", be_error(be));
        return -1;
    }
    sp->st.bw_bytes_s = best;
    return best;
}

void swap_pool_stats(const struct swap_pool *sp, struct swap_stats *st)
{
    *st = sp->st;
}

/* ----------------------------------------------------------- cost model -- */

double swap_cost_swap_s(const struct swap_cost *c, int n_blocks)
{
    if (c->bw_bytes_s <= 0)
        return INFINITY;
    return 2.0 * (double)c->block_bytes * n_blocks / c->bw_bytes_s;
}

double swap_cost_recompute_s(const struct swap_cost *c, int n_tokens)
{
    if (c->prefill_tok_s <= 0)
        return INFINITY;
    return n_tokens / c->prefill_tok_s;
}

int swap_cost_prefers_swap(const struct swap_cost *c, int n_blocks, int n_tokens)
{
    return swap_cost_swap_s(c, n_blocks) <= swap_cost_recompute_s(c, n_tokens);
}

void swap_cost_observe_prefill(struct swap_cost *c, long tokens, double seconds)
{
    if (tokens <= 0 || seconds <= 0)
        return;
    double rate = tokens / seconds;
    /* Weight 0.2: steady over a few steps, yet follows a change of load. */
    c->prefill_tok_s = c->prefill_tok_s > 0 ? 0.8 * c->prefill_tok_s + 0.2 * rate : rate;
}
