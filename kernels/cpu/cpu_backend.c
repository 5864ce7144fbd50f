/*
 * kernels/cpu/cpu_backend.c — the CPU backend: host memory, the batch, the
 * KV pool's writes and copies, and the table of operations.
 *
 * Buffers are plain aligned host memory, so upload and download are bounds-
 * checked copies and sync has nothing to wait for.  batch() copies and checks
 * the caller's metadata once; the checks that need the KV geometry (slots
 * against block tables, blocks inside the pool) run at each kv_write and
 * attention, which cost is a pass over the batch's tokens.
 *
 * Threads: all parallel work uses one OpenMP team of b->n_threads (default:
 * the online cores); calls too small to pay for waking it stay on the
 * calling thread.  OpenBLAS is not used (see cpu_matmul.c), so no second
 * pool competes for the cores.  libgomp's idle workers spin for a while by
 * default, which is best on a machine of our own but ruinous on a shared or
 * oversubscribed one: a spinning worker holds the core that a preempted
 * team-mate needs, and every op ends in a barrier.  Measured on a loaded
 * 2-core box, a 32-sequence decode step took 2.7 s with the default and
 * 0.26-0.33 s with OMP_WAIT_POLICY=passive (1 thread: 0.30 s).  libgomp
 * reads the policy when it is loaded, before any of our code runs, so it
 * has to come from the environment: be_process_init() (kernels/backend.c)
 * re-executes a program once with a bounded spin when nothing is set.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels/cpu/cpu_internal.h"

int cpu_fail(struct be_cpu *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->base.err, sizeof(c->base.err), fmt, ap);
    va_end(ap);
    return -1;
}

int cpu_need(struct be_cpu *c, const struct be_buf *buf, size_t n, const char *what)
{
    if (!buf)
        return cpu_fail(c, "cpu: %s: no buffer", what);
    if (n > buf->bytes / sizeof(float))
        return cpu_fail(c, "cpu: %s: buffer of %zu bytes is smaller than %zu floats", what,
                        buf->bytes, n);
    return 0;
}

int cpu_need_batch(struct be_cpu *c)
{
    return c->bt.valid ? 0 : cpu_fail(c, "cpu: no batch set");
}

int cpu_threads_for(const struct be_cpu *c, double work)
{
    /* Waking the team and joining it costs a few microseconds on an idle
     * machine and tens when the workers sleep (OMP_WAIT_POLICY=passive):
     * about what 64k simple element operations take on one core. */
    return work < 65536.0 ? 1 : c->base.n_threads;
}

void *cpu_grow(void *old, size_t *cap, size_t n, size_t sz)
{
    if (old && n <= *cap)
        return old;
    size_t want = n + n / 2;
    if (want < n || want > SIZE_MAX / sz - 64)
        return NULL;
    void *p = aligned_alloc(64, (want * sz + 64) / 64 * 64);
    if (!p)
        return NULL;
    free(old);
    *cap = want;
    return p;
}

/* ------------------------------------------------------------- memory -- */

/* Large buffers (weights, the KV pool) are aligned to 2 MiB and asked to be
 * backed by huge pages: attention reads the pool in 4 KiB pieces scattered
 * over hundreds of MiB, and with 4 KiB pages nearly every piece costs a TLB
 * miss and a restart of the hardware prefetcher. */
#define CPU_HUGE ((size_t)2 << 20)

static struct be_buf *cpu_alloc(struct be *b, size_t bytes)
{
    struct be_cpu *c = cpu_of(b);
    struct be_buf *buf = calloc(1, sizeof(*buf));
    size_t align = bytes >= CPU_HUGE ? CPU_HUGE : 64;
    size_t rounded = bytes ? (bytes + align - 1) / align * align : 64;
    if (!buf || rounded < bytes || !(buf->data = aligned_alloc(align, rounded))) {
        free(buf);
        cpu_fail(c, "cpu: out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    if (align == CPU_HUGE)
        madvise(buf->data, rounded, MADV_HUGEPAGE); /* a hint: failure is harmless */
    memset(buf->data, 0, rounded);
    buf->bytes = bytes;
    buf->id = ++c->next_id;
    return buf;
}

static void cpu_free(struct be *b, struct be_buf *buf)
{
    (void)b;
    if (!buf)
        return;
    free(buf->data);
    free(buf->plain);
    free(buf);
}

static int cpu_range_ok(struct be_cpu *c, const struct be_buf *buf, size_t off, size_t n,
                        const char *what)
{
    if (!buf)
        return cpu_fail(c, "cpu: %s: no buffer", what);
    if (off > buf->bytes || n > buf->bytes - off)
        return cpu_fail(c, "cpu: %s of %zu bytes at offset %zu is outside the buffer of %zu bytes",
                        what, n, off, buf->bytes);
    return 0;
}

static int cpu_upload(struct be *b, struct be_buf *dst, size_t off, const void *src, size_t n)
{
    struct be_cpu *c = cpu_of(b);
    if (cpu_range_ok(c, dst, off, n, "upload"))
        return -1;
    if (dst->is_weight) /* its bytes are in our packed format, not the caller's */
        return cpu_fail(c, "cpu: upload: the buffer is a weight; make a new one with weight()");
    if (n)
        memcpy((char *)dst->data + off, src, n);
    dst->id = ++c->next_id;
    return 0;
}

static int cpu_download(struct be *b, void *dst, const struct be_buf *src, size_t off, size_t n)
{
    if (cpu_range_ok(cpu_of(b), src, off, n, "download"))
        return -1;
    if (n)
        memcpy(dst, (const char *)src->data + off, n);
    return 0;
}

/* -------------------------------------------------------------- batch -- */

/* Checks what needs no KV geometry: offsets, positions, output rows. */
static int cpu_batch_check(struct be_cpu *c, const struct be_batch *bt)
{
    if (bt->n_tokens < 0 || bt->n_seqs < 0 || bt->n_out < 0)
        return cpu_fail(c, "cpu: batch: negative count (%d tokens, %d seqs, %d outputs)",
                        bt->n_tokens, bt->n_seqs, bt->n_out);
    if ((bt->n_tokens && (!bt->tokens || !bt->pos || !bt->slot)) || !bt->q_off || !bt->bt_off ||
        (bt->n_out && !bt->out_rows))
        return cpu_fail(c, "cpu: batch: missing array");
    if (bt->q_off[0] != 0 || bt->q_off[bt->n_seqs] != bt->n_tokens || bt->bt_off[0] != 0)
        return cpu_fail(c, "cpu: batch: q_off must run from 0 to n_tokens and bt_off from 0");
    for (int s = 0; s < bt->n_seqs; s++) {
        int q0 = bt->q_off[s], q1 = bt->q_off[s + 1];
        if (q1 < q0 || bt->bt_off[s + 1] < bt->bt_off[s])
            return cpu_fail(c, "cpu: batch: offsets of sequence %d are not monotonic", s);
        for (int t = q0; t < q1; t++) {
            if (bt->pos[t] < 0 || bt->slot[t] < 0)
                return cpu_fail(c, "cpu: batch: token %d has position %d, slot %d", t, bt->pos[t],
                                bt->slot[t]);
            if (t > q0 && bt->pos[t] <= bt->pos[t - 1])
                return cpu_fail(c, "cpu: batch: positions of sequence %d do not increase", s);
        }
    }
    int n_bt = bt->bt_off[bt->n_seqs];
    if (n_bt && !bt->block_tables)
        return cpu_fail(c, "cpu: batch: missing block tables");
    for (int i = 0; i < n_bt; i++)
        if (bt->block_tables[i] < 0)
            return cpu_fail(c, "cpu: batch: negative block id %d", bt->block_tables[i]);
    for (int i = 0; i < bt->n_out; i++)
        if (bt->out_rows[i] < 0 || bt->out_rows[i] >= bt->n_tokens)
            return cpu_fail(c, "cpu: batch: output row %d out of range [0, %d)", bt->out_rows[i],
                            bt->n_tokens);
    return 0;
}

static int32_t *cpu_take(int32_t **at, const int32_t *src, size_t n)
{
    int32_t *p = *at;
    if (n)
        memcpy(p, src, n * sizeof(*p));
    *at += n;
    return p;
}

static int cpu_batch(struct be *b, const struct be_batch *bt)
{
    struct be_cpu *c = cpu_of(b);
    struct cpu_batch *cb = &c->bt;
    cb->valid = 0;
    if (!bt)
        return cpu_fail(c, "cpu: batch: none given");
    if (cpu_batch_check(c, bt))
        return -1;
    size_t nt = (size_t)bt->n_tokens, ns = (size_t)bt->n_seqs;
    size_t nb = (size_t)bt->bt_off[bt->n_seqs], no = (size_t)bt->n_out;
    size_t need = 3 * nt + 2 * (ns + 1) + nb + no;
    int32_t *at = cpu_grow(cb->mem, &cb->cap, need, sizeof(int32_t));
    if (!at)
        return cpu_fail(c, "cpu: batch: out of memory");
    cb->mem = at;
    cb->tokens = cpu_take(&at, bt->tokens, nt);
    cb->pos = cpu_take(&at, bt->pos, nt);
    cb->slot = cpu_take(&at, bt->slot, nt);
    cb->q_off = cpu_take(&at, bt->q_off, ns + 1);
    cb->bt_off = cpu_take(&at, bt->bt_off, ns + 1);
    cb->block_tables = cpu_take(&at, bt->block_tables, nb);
    cb->out_rows = cpu_take(&at, bt->out_rows, no);
    cb->n_tokens = bt->n_tokens;
    cb->n_seqs = bt->n_seqs;
    cb->n_out = bt->n_out;
    cb->gen++;
    cb->valid = 1;
    return 0;
}

static int cpu_geom_check(struct be_cpu *c, const struct be_kv_geom *g, int layer)
{
    if (!g || g->n_layers < 1 || g->n_kv_heads < 1 || g->head_dim < 1 || g->block_size < 1)
        return cpu_fail(c, "cpu: bad KV geometry");
    if (layer < 0 || layer >= g->n_layers)
        return cpu_fail(c, "cpu: layer %d out of range [0, %d)", layer, g->n_layers);
    return 0;
}

int cpu_check_kv(struct be_cpu *c, const struct be_buf *kv, const struct be_kv_geom *g, int layer)
{
    if (cpu_need_batch(c) || cpu_geom_check(c, g, layer))
        return -1;
    if (!kv)
        return cpu_fail(c, "cpu: no KV pool");
    const struct cpu_batch *bt = &c->bt;
    int64_t n_blocks = (int64_t)(kv->bytes / (be_kv_block_elems(g) * sizeof(float)));
    int64_t bs = g->block_size;
    for (int s = 0; s < bt->n_seqs; s++) {
        int q0 = bt->q_off[s], q1 = bt->q_off[s + 1];
        const int32_t *table = bt->block_tables + bt->bt_off[s];
        int64_t n_table = bt->bt_off[s + 1] - bt->bt_off[s];
        if (q1 == q0)
            continue;
        /* Positions increase, so the last token reads the most blocks. */
        int64_t used = bt->pos[q1 - 1] / bs + 1;
        if (used > n_table)
            return cpu_fail(c, "cpu: sequence %d reads position %d but its table has %lld blocks",
                            s, bt->pos[q1 - 1], (long long)n_table);
        for (int64_t i = 0; i < used; i++)
            if (table[i] >= n_blocks)
                return cpu_fail(c, "cpu: block %d of sequence %d outside the pool of %lld blocks",
                                table[i], s, (long long)n_blocks);
        for (int t = q0; t < q1; t++) {
            int64_t want = table[bt->pos[t] / bs] * bs + bt->pos[t] % bs;
            if (bt->slot[t] != want)
                return cpu_fail(c,
                                "cpu: token %d (sequence %d, position %d) has slot %d but its "
                                "block table places it at %lld",
                                t, s, bt->pos[t], bt->slot[t], (long long)want);
        }
    }
    return 0;
}

/* ------------------------------------------------------------ KV pool -- */

static int cpu_kv_write(struct be *b, struct be_buf *kv, const struct be_kv_geom *g, int layer,
                        const struct be_buf *k, const struct be_buf *v)
{
    struct be_cpu *c = cpu_of(b);
    if (cpu_check_kv(c, kv, g, layer))
        return -1;
    int n = c->bt.n_tokens, hd = g->head_dim, nh = g->n_kv_heads;
    size_t row = (size_t)nh * hd;
    if (cpu_need(c, k, n * row, "kv_write k") || cpu_need(c, v, n * row, "kv_write v"))
        return -1;
    size_t block = be_kv_block_elems(g);
    float *pool = kv->data;
    const float *src[2] = {k->data, v->data};
    for (int t = 0; t < n; t++) {
        int32_t slot = c->bt.slot[t];
        float *base =
            pool + (size_t)(slot / g->block_size) * block + (size_t)(slot % g->block_size) * hd;
        for (int kvi = 0; kvi < 2; kvi++)
            for (int h = 0; h < nh; h++)
                memcpy(base + be_kv_offset(g, layer, kvi, h), src[kvi] + t * row + (size_t)h * hd,
                       sizeof(float) * hd);
    }
    return 0;
}

static int cpu_copy_blocks(struct be *b, struct be_buf *kv, const struct be_kv_geom *g,
                           const int32_t *src, const int32_t *dst, int n)
{
    struct be_cpu *c = cpu_of(b);
    if (cpu_geom_check(c, g, 0))
        return -1;
    if (!kv || n < 0 || (n && (!src || !dst)))
        return cpu_fail(c, "cpu: copy_blocks: bad arguments");
    size_t block = be_kv_block_elems(g) * sizeof(float);
    int64_t n_blocks = (int64_t)(kv->bytes / block);
    for (int i = 0; i < n; i++)
        if (src[i] < 0 || src[i] >= n_blocks || dst[i] < 0 || dst[i] >= n_blocks)
            return cpu_fail(c, "cpu: copy_blocks: block %d -> %d outside the pool of %lld blocks",
                            src[i], dst[i], (long long)n_blocks);
    char *pool = kv->data;
    for (int i = 0; i < n; i++)
        if (src[i] != dst[i])
            memcpy(pool + (size_t)dst[i] * block, pool + (size_t)src[i] * block, block);
    return 0;
}

/* Device and host memory are both host memory here: a swap is one memcpy
 * per block, like copy_blocks but between two pools. */
static int cpu_swap(struct be *b, struct be_buf *dev_kv, struct be_buf *host_kv,
                    const struct be_kv_geom *g, const int32_t *dev, const int32_t *host, int n,
                    int to_host)
{
    struct be_cpu *c = cpu_of(b);
    if (cpu_geom_check(c, g, 0))
        return -1;
    if (!dev_kv || !host_kv || n < 0 || (n && (!dev || !host)))
        return cpu_fail(c, "cpu: swap: bad arguments");
    size_t block = be_kv_block_elems(g) * sizeof(float);
    int64_t n_dev = (int64_t)(dev_kv->bytes / block), n_host = (int64_t)(host_kv->bytes / block);
    for (int i = 0; i < n; i++)
        if (dev[i] < 0 || dev[i] >= n_dev || host[i] < 0 || host[i] >= n_host)
            return cpu_fail(c, "cpu: swap: block %d <-> host block %d outside the pools", dev[i],
                            host[i]);
    char *d = dev_kv->data, *h = host_kv->data;
    for (int i = 0; i < n; i++) {
        char *dp = d + (size_t)dev[i] * block, *hp = h + (size_t)host[i] * block;
        memcpy(to_host ? hp : dp, to_host ? dp : hp, block);
    }
    return 0;
}

static int cpu_sync(struct be *b)
{
    (void)b;
    return 0;
}

/* ------------------------------------------------------------ lifetime -- */

static void cpu_destroy(struct be *b)
{
    struct be_cpu *c = cpu_of(b);
    free(c->bt.mem);
    free(c->rope_cs);
    free(c->att_scratch);
    free(c->att_tiles);
    free(c);
}

static const struct be_ops cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_upload,
    .download = cpu_download,
    .weight = cpu_weight,
    .batch = cpu_batch,
    .embed = cpu_embed,
    .rmsnorm = cpu_rmsnorm,
    .matmul = cpu_matmul,
    .add = cpu_add,
    .rope = cpu_rope,
    .swiglu = cpu_swiglu,
    .kv_write = cpu_kv_write,
    .attention = cpu_attention,
    .gather_rows = cpu_gather_rows,
    .copy_blocks = cpu_copy_blocks,
    .alloc_host = cpu_alloc,
    .swap = cpu_swap,
    .sync = cpu_sync,
};

static int cpu_default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

struct be *be_cpu_create(const struct be_opts *opts, char *err, size_t errlen)
{
    int n_threads = opts && opts->n_threads > 0 ? opts->n_threads : cpu_default_threads();
    if (n_threads > 1024) {
        snprintf(err, errlen, "cpu: %d threads is too many", n_threads);
        return NULL;
    }
    struct be_cpu *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(err, errlen, "cpu: out of memory");
        return NULL;
    }
    c->base.ops = &cpu_ops;
    c->base.n_threads = n_threads;
#if CPU_HAVE_X86
    __builtin_cpu_init();
    c->avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return &c->base;
}
