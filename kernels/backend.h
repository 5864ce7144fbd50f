/*
 * kernels/backend.h — the compute backend interface.
 *
 * The forward pass in model/ is written once against this table of
 * operations; kernels/cpu implements it with C + OpenBLAS, kernels/cuda with
 * CUDA + cuBLAS (loaded as a shared object so that a CPU-only box needs no
 * CUDA libraries).  Every operation works on buffers that live in the
 * backend's own memory (struct be_buf) and may run asynchronously; be_sync()
 * waits for all of them and download() implies it.
 *
 * Activations are fp32, row-major [rows × cols].  Weights are handed over as
 * fp32 host matrices and stored in the backend's own weight format.
 *
 * One call of the forward pass runs a flat batch (struct be_batch): tokens
 * from many sequences, some prefilling a chunk and some decoding one token,
 * with no padding.  The tokens of one sequence are contiguous and in
 * increasing position order.  K and V live in a paged pool that is
 * block-major: one block holds K and V of every layer contiguously,
 *   [block][layer][K|V][kv_head][slot][head_dim]
 * so swapping a block is one contiguous copy.
 *
 * Every operation returns 0 on success and -1 on a backend failure; the
 * failure's message is kept in be_error().
 */
#ifndef LLMD_KERNELS_BACKEND_H
#define LLMD_KERNELS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

struct be;     /* one backend instance: its memory, streams and workers */
struct be_buf; /* one buffer in a backend's memory, owned by that backend */

/* Shape of the paged KV pool. */
struct be_kv_geom {
    int n_layers;
    int n_kv_heads;
    int head_dim;
    int block_size; /* tokens per block */
};

/* Elements (floats) in one block: n_layers * 2 * n_kv_heads * block_size * head_dim. */
size_t be_kv_block_elems(const struct be_kv_geom *g);

/* Offset (in elements) of K (kv = 0) or V (kv = 1) of one head of one layer
 * inside a block; the slot's head_dim values follow at + slot * head_dim. */
size_t be_kv_offset(const struct be_kv_geom *g, int layer, int kv, int head);

/* One flat batch.  Arrays are host memory owned by the caller; batch() copies
 * what it needs, so they may be reused as soon as it returns. */
struct be_batch {
    int n_tokens;
    const int32_t *tokens; /* [n_tokens] token ids */
    const int32_t *pos;    /* [n_tokens] position of each token in its sequence */
    const int32_t *slot;   /* [n_tokens] physical KV slot: block * block_size + offset */
    int n_seqs;
    const int32_t *q_off; /* [n_seqs + 1] sequence s owns tokens q_off[s] .. q_off[s+1]-1 */
    const int32_t
        *bt_off; /* [n_seqs + 1] its block table is block_tables[bt_off[s] .. bt_off[s+1]) */
    const int32_t *block_tables; /* physical block ids, logical order */
    int n_out;
    const int32_t *out_rows; /* [n_out] token rows whose logits are wanted */
};

struct be_ops {
    const char *name;
    void (*destroy)(struct be *b);

    /* Memory.  alloc returns zeroed memory owned by the backend; free(NULL) is a no-op. */
    struct be_buf *(*alloc)(struct be *b, size_t bytes);
    void (*free)(struct be *b, struct be_buf *buf);
    int (*upload)(struct be *b, struct be_buf *dst, size_t off, const void *src, size_t n);
    int (*download)(struct be *b, void *dst, const struct be_buf *src, size_t off, size_t n);
    /* A weight matrix [rows × cols] from fp32 host data, in the backend's weight format. */
    struct be_buf *(*weight)(struct be *b, const float *src, size_t rows, size_t cols);

    /* Sets the batch that the following operations work on. */
    int (*batch)(struct be *b, const struct be_batch *bt);

    /* out[t] = table row tokens[t], for every token of the batch; table is a weight [vocab × n]. */
    int (*embed)(struct be *b, const struct be_buf *table, struct be_buf *out, int n);
    /* y[i] = x[i] / rms(x[i]) * w, for m rows of n; y may be x. */
    int (*rmsnorm)(struct be *b, const struct be_buf *x, const struct be_buf *w, struct be_buf *y,
                   int m, int n, float eps);
    /* y[m × n] = x[m × k] · w[n × k]^T; w is a weight. */
    int (*matmul)(struct be *b, const struct be_buf *x, const struct be_buf *w, struct be_buf *y,
                  int m, int n, int k);
    /* x[i] += y[i], for n elements. */
    int (*add)(struct be *b, struct be_buf *x, const struct be_buf *y, size_t n);
    /* Rotary embedding in place on x [n_tokens × n_heads × head_dim] at the
     * batch's positions.  inv_freq holds head_dim/2 floats (the model's base
     * and scaling already applied).  neox = 0 rotates adjacent pairs
     * (x[2i], x[2i+1]); neox = 1 rotates (x[i], x[i + head_dim/2]). */
    int (*rope)(struct be *b, struct be_buf *x, int n_heads, int head_dim,
                const struct be_buf *inv_freq, int neox);
    /* out[i] = silu(gate[i]) * up[i], for n elements; out may be gate. */
    int (*swiglu)(struct be *b, const struct be_buf *gate, const struct be_buf *up,
                  struct be_buf *out, size_t n);
    /* Writes k and v [n_tokens × n_kv_heads × head_dim] of one layer into
     * the pool at the batch's slots. */
    int (*kv_write)(struct be *b, struct be_buf *kv, const struct be_kv_geom *g, int layer,
                    const struct be_buf *k, const struct be_buf *v);
    /* Causal attention of q [n_tokens × n_heads × head_dim] over the paged
     * pool: the token at position p of sequence s sees the keys at positions
     * 0..p of s, read through s's block table.  Heads are grouped: query
     * head h reads kv head h / (n_heads / n_kv_heads).  out has q's shape. */
    int (*attention)(struct be *b, const struct be_buf *q, const struct be_buf *kv,
                     const struct be_kv_geom *g, int layer, int n_heads, float scale,
                     struct be_buf *out);
    /* y[i] = x[out_rows[i]] for the batch's n_out rows of n floats. */
    int (*gather_rows)(struct be *b, const struct be_buf *x, struct be_buf *y, int n);
    /* Copies whole blocks src[i] -> dst[i] inside the pool (copy-on-write). */
    int (*copy_blocks)(struct be *b, struct be_buf *kv, const struct be_kv_geom *g,
                       const int32_t *src, const int32_t *dst, int n);
    /* Host memory for the swap pool (pinned on CUDA), zeroed, owned by the backend;
     * released with free(). */
    struct be_buf *(*alloc_host)(struct be *b, size_t bytes);
    /* Copies n whole KV blocks between the device pool dev_kv and the host
     * pool host_kv (both of geometry g): to_host = 1 copies dev[i] ->
     * host[i], 0 copies host[i] -> dev[i].  One contiguous copy per block; on
     * CUDA asynchronous on a copy stream, with later operations that touch
     * those blocks ordered after it. */
    int (*swap)(struct be *b, struct be_buf *dev_kv, struct be_buf *host_kv,
                const struct be_kv_geom *g, const int32_t *dev, const int32_t *host, int n,
                int to_host);
    /* Waits for every operation issued so far. */
    int (*sync)(struct be *b);
};

/* Every implementation embeds this as its first member. */
struct be {
    const struct be_ops *ops;
    int n_threads; /* CPU worker threads (CPU backend) */
    char err[256]; /* message of the last failure */
};

struct be_opts {
    int n_threads; /* 0: one per core */
};

/* Creates a backend by name ("cpu" or "cuda"); NULL with a message in err on
 * failure.  The caller owns the result and frees it with be_destroy(). */
struct be *be_create(const char *name, const struct be_opts *opts, char *err, size_t errlen);
void be_destroy(struct be *b);
const char *be_error(const struct be *b);

/* Call first in main(): when the environment does not already say how the
 * CPU backend's OpenMP workers wait, re-executes the program once with
 * GOMP_SPINCOUNT bounded, so that idle workers yield their core soon instead
 * of spinning (the runtime reads this only when it loads).  Returns only if
 * nothing needed doing or the re-exec failed. */
void be_process_init(char **argv);

/* The CPU backend, always built. */
struct be *be_cpu_create(const struct be_opts *opts, char *err, size_t errlen);

#endif
