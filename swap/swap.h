/*
 * swap/swap.h — the host block pool's memory, whole-block swap copies
 * between it and the device pool, and the swap-vs-recompute cost model.
 *
 * kvcache/ decides which host block holds which device block; this module
 * owns the host memory those ids index and runs the copies through the
 * backend (one contiguous copy per block, since the pool is block-major).
 * The cost model compares, for a sequence that must leave the device,
 *   swap      = 2 * bytes / measured copy bandwidth  (out now, in later)
 *   recompute = tokens / measured prefill rate
 * Bandwidth is measured once at start by swapping some blocks out and back;
 * the prefill rate is an average the engine feeds from its steps.
 *
 * Not thread-safe: the engine thread owns it.
 */
#ifndef LLMD_SWAP_SWAP_H
#define LLMD_SWAP_SWAP_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

/* ------------------------------------------------------------ host pool -- */

struct swap_pool; /* host memory of n_host_blocks KV blocks + counters */

struct swap_stats {
    long blocks_out, blocks_in; /* blocks copied device -> host, host -> device */
    uint64_t bytes_out, bytes_in;
    double seconds;    /* wall time spent issuing copies (and waiting, on sync) */
    double bw_bytes_s; /* measured copy bandwidth, 0 when not measured */
};

/* Host memory for n_host_blocks blocks of geometry g on backend be (which
 * must outlive the pool); n_host_blocks may be 0 (no swapping).  NULL with a
 * message when memory is short.  Owned by the caller. */
struct swap_pool *swap_pool_new(struct be *be, const struct be_kv_geom *g, int n_host_blocks,
                                char *err, size_t errlen);
void swap_pool_free(struct swap_pool *sp);
int swap_pool_blocks(const struct swap_pool *sp);
/* Bytes of one KV block. */
size_t swap_block_bytes(const struct swap_pool *sp);

/* Copies dev[i] -> host[i] (swap-out) or host[i] -> dev[i] (swap-in) for n
 * blocks between the device pool dev_kv and the host pool.  Ordered before
 * anything issued later on the backend.  0, or -1 with the backend's
 * message. */
int swap_out(struct swap_pool *sp, struct be_buf *dev_kv, const int32_t *dev, const int32_t *host,
             int n, char *err, size_t errlen);
int swap_in(struct swap_pool *sp, struct be_buf *dev_kv, const int32_t *host, const int32_t *dev,
            int n, char *err, size_t errlen);

/* Measures the copy bandwidth by swapping device blocks 0..n-1 out to host
 * blocks 0..n-1 and back (contents are restored; the host blocks must be
 * unused), a few times, keeping the best.  n is capped by both pools.
 * Returns bytes/s (also kept in the stats), or -1 with a message. */
double swap_measure(struct swap_pool *sp, struct be_buf *dev_kv, int n_dev_blocks, int n, char *err,
                    size_t errlen);
void swap_pool_stats(const struct swap_pool *sp, struct swap_stats *st);

/* ----------------------------------------------------------- cost model -- */

/* What the cost model knows; plain data so that the scheduler can hold one. */
struct swap_cost {
    size_t block_bytes;   /* bytes of one KV block */
    double bw_bytes_s;    /* host <-> device copy bandwidth; 0: unknown (swap never chosen) */
    double prefill_tok_s; /* measured prefill rate; 0: unknown (recompute assumed slow) */
};

/* Seconds to move n_blocks out and back in: 2 * bytes / bandwidth;
 * infinity when the bandwidth is unknown. */
double swap_cost_swap_s(const struct swap_cost *c, int n_blocks);
/* Seconds to recompute n_tokens by prefill: tokens / rate; infinity when
 * the rate is unknown. */
double swap_cost_recompute_s(const struct swap_cost *c, int n_tokens);
/* 1 when swapping n_blocks is cheaper than recomputing n_tokens (ties and
 * two unknowns go to swap: it loses no work). */
int swap_cost_prefers_swap(const struct swap_cost *c, int n_blocks, int n_tokens);
/* Folds one observed prefill (tokens in seconds) into prefill_tok_s, an
 * exponential moving average (the first sample is taken as is). */
void swap_cost_observe_prefill(struct swap_cost *c, long tokens, double seconds);

#endif
