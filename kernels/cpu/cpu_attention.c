/*
 * kernels/cpu/cpu_attention.c — causal attention over the paged KV pool for
 * a flat batch of prefill chunks and decode tokens.
 *
 * Work is split into items of (sequence, KV head, tile of up to ATT_ROWS
 * query rows), a row being one (token, query head) pair: the query heads
 * that share a KV head and several tokens of a prefill chunk walk the
 * sequence's blocks together, so each K and V block is fetched from memory
 * once per item and then read from L1 by every row.  Threads take items
 * dynamically.
 *
 * Each row runs an online softmax block by block in key order: scores of the
 * block, new running max, rescale of the sum and the accumulator, then the
 * weighted V rows in key order.  What a row computes depends only on its own
 * query, position and the sequence's keys, never on the tile or the rest of
 * the batch, so the output is batch-invariant.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"

#define ATT_ROWS 32 /* query rows per work item */

struct att_args {
    const float *q, *pool;
    float *out;
    const struct be_kv_geom *g;
    const struct cpu_batch *bt;
    int layer, n_heads, group, head_dim, block_pad;
    float scale;
    size_t block_elems;
};

/* One row's state: scaled query, accumulator, running max and sum. */
struct att_row {
    float *q, *acc;
    float max, sum;
};

/* Scores, softmax update and weighted V of one row over the first nv keys
 * of a block (K and V are [block_size][head_dim]).  sc is scratch of
 * block_pad floats. */
static void att_block_c(const struct att_args *a, struct att_row *r, const float *K, const float *V,
                        int nv, float *sc)
{
    int hd = a->head_dim;
    float mb = -INFINITY;
    for (int j = 0; j < nv; j++) {
        float s = 0.0f;
        for (int d = 0; d < hd; d++)
            s += r->q[d] * K[(size_t)j * hd + d];
        sc[j] = s;
        mb = s > mb ? s : mb;
    }
    float mnew = r->max > mb ? r->max : mb;
    float corr = expf(r->max - mnew), lsum = 0.0f;
    for (int j = 0; j < nv; j++) {
        sc[j] = expf(sc[j] - mnew);
        lsum += sc[j];
    }
    r->sum = r->sum * corr + lsum;
    r->max = mnew;
    for (int d = 0; d < hd; d++) {
        float acc = r->acc[d] * corr;
        for (int j = 0; j < nv; j++)
            acc += sc[j] * V[(size_t)j * hd + d];
        r->acc[d] = acc;
    }
}

#if CPU_HAVE_X86
/* Scores of 8 keys: lane j is q · K[key[j]], summed over head_dim in 8
 * lanes and then pairwise, the same way for every key. */
CPU_AVX2 static __m256 att_scores8(const float *q, const float *const key[8], int hd)
{
    __m256 a[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        a[j] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d += 8) {
        __m256 qv = _mm256_load_ps(q + d);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            a[j] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(key[j] + d), a[j]);
    }
    __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
    __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
    __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                         _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* acc[0..64) = acc * corr + sum over j < nv of p[j] * V[j][0..64), in key
 * order, in eight registers. */
CPU_AVX2 static void att_pv8(float *acc, const float *V, int hd, int nv, const float *p, float corr)
{
    __m256 cv = _mm256_set1_ps(corr), av[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        av[i] = _mm256_mul_ps(_mm256_load_ps(acc + 8 * i), cv);
    for (int j = 0; j < nv; j++) {
        __m256 pj = _mm256_broadcast_ss(p + j);
        const float *v = V + (size_t)j * hd;
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            av[i] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 8 * i), av[i]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        _mm256_store_ps(acc + 8 * i, av[i]);
}

/* The same for 8 elements, where head_dim is not a multiple of 64. */
CPU_AVX2 static void att_pv1(float *acc, const float *V, int hd, int nv, const float *p, float corr)
{
    __m256 av = _mm256_mul_ps(_mm256_load_ps(acc), _mm256_set1_ps(corr));
    for (int j = 0; j < nv; j++)
        av = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), _mm256_loadu_ps(V + (size_t)j * hd), av);
    _mm256_store_ps(acc, av);
}

CPU_AVX2 static void att_block_avx2(const struct att_args *a, struct att_row *r, const float *K,
                                    const float *V, int nv, float *sc)
{
    int hd = a->head_dim;
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 mv = ninf;
    for (int j0 = 0; j0 < nv; j0 += 8) {
        const float *key[8];
        for (int j = 0; j < 8; j++) /* keys past nv: any valid row, masked below */
            key[j] = K + (size_t)(j0 + j < nv ? j0 + j : 0) * hd;
        __m256 s = att_scores8(r->q, key, hd);
        __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
        __m256 valid = _mm256_cmp_ps(lane, _mm256_set1_ps((float)(nv - j0)), _CMP_LT_OQ);
        s = _mm256_blendv_ps(ninf, s, valid);
        _mm256_store_ps(sc + j0, s);
        mv = _mm256_max_ps(mv, s);
    }
    float m8[8];
    _mm256_storeu_ps(m8, mv);
    float mnew = r->max;
    for (int j = 0; j < 8; j++)
        mnew = m8[j] > mnew ? m8[j] : mnew;
    __m256 mb = _mm256_set1_ps(mnew);
    float corr = _mm256_cvtss_f32(cpu_exp8(_mm256_set1_ps(r->max - mnew)));
    for (int j0 = 0; j0 < nv; j0 += 8)
        _mm256_store_ps(sc + j0, cpu_exp8(_mm256_sub_ps(_mm256_load_ps(sc + j0), mb)));
    float lsum = 0.0f;
    for (int j = 0; j < nv; j++)
        lsum += sc[j];
    r->sum = r->sum * corr + lsum;
    r->max = mnew;
    int d0 = 0;
    for (; d0 + 64 <= hd; d0 += 64)
        att_pv8(r->acc + d0, V + d0, hd, nv, sc, corr);
    for (; d0 < hd; d0 += 8)
        att_pv1(r->acc + d0, V + d0, hd, nv, sc, corr);
}
#endif

/* Floats of one thread's scratch: rows' q and acc, their states, scores. */
static size_t att_scratch_floats(int head_dim, int block_pad)
{
    size_t hd = ((size_t)head_dim + 15) / 16 * 16;
    return 2 * ATT_ROWS * hd + (size_t)block_pad + 16;
}

/* One work item: tokens t0 .. t1-1 of sequence s against KV head h. */
static void att_item(const struct att_args *a, int avx2, int s, int t0, int t1, int h,
                     float *scratch)
{
    const struct cpu_batch *bt = a->bt;
    const struct be_kv_geom *g = a->g;
    int hd = a->head_dim, hd_pad = (hd + 15) / 16 * 16, G = a->group;
    int n_rows = (t1 - t0) * G;
    struct att_row rows[ATT_ROWS];
    float *sc = scratch + 2 * ATT_ROWS * (size_t)hd_pad;
    for (int i = 0; i < n_rows; i++) {
        int t = t0 + i / G, hq = h * G + i % G;
        const float *src = a->q + ((size_t)t * a->n_heads + hq) * hd;
        rows[i].q = scratch + (size_t)i * hd_pad;
        rows[i].acc = scratch + (size_t)(ATT_ROWS + i) * hd_pad;
        for (int d = 0; d < hd; d++)
            rows[i].q[d] = src[d] * a->scale;
        memset(rows[i].acc, 0, sizeof(float) * hd);
        rows[i].max = -INFINITY;
        rows[i].sum = 0.0f;
    }
    const int32_t *table = bt->block_tables + bt->bt_off[s];
    int bs = g->block_size, last = bt->pos[t1 - 1] / bs;
    size_t k_off = be_kv_offset(g, a->layer, 0, h), v_off = be_kv_offset(g, a->layer, 1, h);
    for (int blk = 0; blk <= last; blk++) {
        const float *base = a->pool + (size_t)table[blk] * a->block_elems;
        for (int i = 0; i < n_rows; i++) {
            int nv = bt->pos[t0 + i / G] - blk * bs + 1;
            if (nv <= 0)
                continue; /* this row's keys ended in an earlier block */
            nv = nv < bs ? nv : bs;
#if CPU_HAVE_X86
            if (avx2) {
                att_block_avx2(a, &rows[i], base + k_off, base + v_off, nv, sc);
                continue;
            }
#endif
            att_block_c(a, &rows[i], base + k_off, base + v_off, nv, sc);
        }
    }
    for (int i = 0; i < n_rows; i++) {
        int t = t0 + i / G, hq = h * G + i % G;
        float *dst = a->out + ((size_t)t * a->n_heads + hq) * hd;
        for (int d = 0; d < hd; d++)
            dst[d] = rows[i].acc[d] / rows[i].sum;
    }
}

/* Builds the list of (sequence, first token, end token) query tiles and
 * returns how many there are, or -1 when out of memory.  *work gets the
 * number of (row, key) pairs, to decide on threads. */
static int att_tiles(struct be_cpu *c, int tile_tokens, double *work)
{
    const struct cpu_batch *bt = &c->bt;
    size_t n = 0;
    for (int s = 0; s < bt->n_seqs; s++) {
        int len = bt->q_off[s + 1] - bt->q_off[s];
        n += (size_t)(len + tile_tokens - 1) / tile_tokens;
    }
    int32_t *tiles = cpu_grow(c->att_tiles, &c->att_tiles_cap, 3 * (n ? n : 1), sizeof(int32_t));
    if (!tiles)
        return -1;
    c->att_tiles = tiles;
    size_t i = 0;
    *work = 0;
    for (int s = 0; s < bt->n_seqs; s++)
        for (int t = bt->q_off[s]; t < bt->q_off[s + 1]; t += tile_tokens) {
            int t1 = t + tile_tokens < bt->q_off[s + 1] ? t + tile_tokens : bt->q_off[s + 1];
            tiles[3 * i] = s;
            tiles[3 * i + 1] = t;
            tiles[3 * i + 2] = t1;
            *work += (double)(t1 - t) * (bt->pos[t1 - 1] + 1);
            i++;
        }
    return (int)n;
}

int cpu_attention(struct be *b, const struct be_buf *q, const struct be_buf *kv,
                  const struct be_kv_geom *g, int layer, int n_heads, float scale,
                  struct be_buf *out)
{
    struct be_cpu *c = cpu_of(b);
    if (cpu_check_kv(c, kv, g, layer))
        return -1;
    if (n_heads < 1 || n_heads % g->n_kv_heads)
        return cpu_fail(c, "cpu: attention: %d query heads do not group over %d KV heads", n_heads,
                        g->n_kv_heads);
    int group = n_heads / g->n_kv_heads;
    if (group > ATT_ROWS)
        return cpu_fail(c, "cpu: attention: groups of %d query heads are too large", group);
    size_t n = (size_t)c->bt.n_tokens * n_heads * g->head_dim;
    if (cpu_need(c, q, n, "attention q") || cpu_need(c, out, n, "attention out"))
        return -1;
    struct att_args a = {q->data,     kv->data,
                         out->data,   g,
                         &c->bt,      layer,
                         n_heads,     group,
                         g->head_dim, (g->block_size + 7) / 8 * 8,
                         scale,       be_kv_block_elems(g)};
    double work;
    int n_tiles = att_tiles(c, ATT_ROWS / group, &work);
    int nt = n_tiles < 0 ? 1 : cpu_threads_for(c, work * g->head_dim * 2);
    size_t per = (att_scratch_floats(g->head_dim, a.block_pad) + 15) / 16 * 16;
    float *scratch = n_tiles < 0 ? NULL
                                 : cpu_grow(c->att_scratch, &c->att_scratch_floats,
                                            per * (size_t)nt, sizeof(float));
    if (!scratch)
        return cpu_fail(c, "cpu: attention: out of memory");
    c->att_scratch = scratch;
    /* The AVX2 kernel loads head_dim in whole vectors. */
    int avx2 = c->avx2 && g->head_dim % 8 == 0;
    int n_items = n_tiles * g->n_kv_heads;
    const int32_t *tiles = c->att_tiles;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int it = 0; it < n_items; it++) {
        const int32_t *tile = tiles + 3 * (it / g->n_kv_heads);
        att_item(&a, avx2, tile[0], tile[1], tile[2], it % g->n_kv_heads,
                 scratch + per * (size_t)omp_get_thread_num());
    }
    return 0;
}
