/*
 * kernels/cpu/cpu_attention.c — causal attention over the paged KV pool for
 * a flat batch of prefill chunks and decode tokens.
 *
 * Work is split into items of (sequence, KV head, tile of up to ATT_ROWS
 * query rows), a row being one (token, query head) pair: the query heads
 * that share a KV head and several tokens of a prefill chunk walk the
 * sequence's blocks together, so each K and V block comes from memory once
 * per item (prefetched while the previous block is computed) and then from
 * L1 for every row.  Within a token, the AVX2 kernel takes three query heads
 * at a time so that each K and V vector is loaded once for the three.
 * Threads take items dynamically.
 *
 * Each row runs an online softmax block by block in key order: scores of the
 * block, new running max, rescale of the sum and the accumulator, then the
 * weighted V rows in key order.  What a row computes depends only on its own
 * query, position and the sequence's keys, never on the tile, the heads it
 * shares a kernel call with or the rest of the batch, so the output is
 * batch-invariant.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"

#define ATT_ROWS 32 /* query rows (token, head) per work item */

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
/* The AVX2 kernel takes up to ATT_R rows of one token at a time: the query
 * heads that share a KV head see the same keys, so each K and V vector is
 * loaded once for all of them.  Every row's arithmetic is the same as if it
 * were alone: its own accumulators, in the same order. */
#define ATT_R 3

/* Sum of each of four 8-lane accumulators, ((0+1)+(2+3)) + ((4+5)+(6+7)). */
CPU_AVX2 static __m128 att_reduce4(__m256 a0, __m256 a1, __m256 a2, __m256 a3)
{
    __m256 u = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
}

/* Scores of R rows against keys j0 .. j0+3 (past nv: key 0, masked later)
 * into sc[r * bp + j]. */
CPU_AVX2 static inline __attribute__((always_inline)) void att_qk(const int R,
                                                                  float *const q[ATT_R],
                                                                  const float *K, int j0, int nv,
                                                                  int hd, float *sc, int bp)
{
    const float *k[4];
    __m256 acc[ATT_R][4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        k[i] = K + (size_t)(j0 + i < nv ? j0 + i : 0) * hd;
#pragma GCC unroll 3
        for (int r = 0; r < R; r++)
            acc[r][i] = _mm256_setzero_ps();
    }
    for (int d = 0; d < hd; d += 8) {
        __m256 kv[4];
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
            kv[i] = _mm256_loadu_ps(k[i] + d);
#pragma GCC unroll 3
        for (int r = 0; r < R; r++) {
            __m256 qv = _mm256_load_ps(q[r] + d);
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++)
                acc[r][i] = _mm256_fmadd_ps(qv, kv[i], acc[r][i]);
        }
    }
#pragma GCC unroll 3
    for (int r = 0; r < R; r++)
        _mm_store_ps(sc + r * bp + j0, att_reduce4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]));
}

/* acc[r][d0 .. d0+8·NV) = acc · corr[r] + sum over j < nv of p[r][j] · V[j],
 * in key order. */
CPU_AVX2 static inline __attribute__((always_inline)) void
att_pv(const int R, const int NV, float *const acc[ATT_R], const float *V, int d0, int hd, int nv,
       const float *p, int bp, const float *corr)
{
    __m256 av[ATT_R][4];
#pragma GCC unroll 3
    for (int r = 0; r < R; r++) {
        __m256 cv = _mm256_set1_ps(corr[r]);
#pragma GCC unroll 4
        for (int i = 0; i < NV; i++)
            av[r][i] = _mm256_mul_ps(_mm256_load_ps(acc[r] + d0 + 8 * i), cv);
    }
    for (int j = 0; j < nv; j++) {
        __m256 vv[4];
#pragma GCC unroll 4
        for (int i = 0; i < NV; i++)
            vv[i] = _mm256_loadu_ps(V + (size_t)j * hd + d0 + 8 * i);
#pragma GCC unroll 3
        for (int r = 0; r < R; r++) {
            __m256 pj = _mm256_broadcast_ss(p + r * bp + j);
#pragma GCC unroll 4
            for (int i = 0; i < NV; i++)
                av[r][i] = _mm256_fmadd_ps(pj, vv[i], av[r][i]);
        }
    }
#pragma GCC unroll 3
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int i = 0; i < NV; i++)
            _mm256_store_ps(acc[r] + d0 + 8 * i, av[r][i]);
}

/* Online softmax step of R rows over their scores sc[r·bp + j], j < nv:
 * the scores become weights, each row's max and sum move on, and corr[r]
 * gets the factor for the row's old sum and accumulator.  Lanes never mix,
 * so a row's result does not depend on the others; the weights of a block
 * are summed lane-wise and then pairwise (padding adds exact zeros). */
CPU_AVX2 static void att_softmax(int R, struct att_row *rows, float *sc, int nv, int bp,
                                 float *corr)
{
    const __m256 ninf = _mm256_set1_ps(-INFINITY), lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
    float old[8] = {0}, mnew[8] = {0};
    for (int r = 0; r < R; r++) {
        float *s = sc + r * bp;
        __m256 mv = ninf;
        for (int j0 = 0; j0 < bp; j0 += 8) {
            __m256 ok = _mm256_cmp_ps(lane, _mm256_set1_ps((float)(nv - j0)), _CMP_LT_OQ);
            __m256 v = _mm256_blendv_ps(ninf, _mm256_load_ps(s + j0), ok);
            _mm256_store_ps(s + j0, v);
            mv = _mm256_max_ps(mv, v);
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
        float mb = _mm_cvtss_f32(m4);
        old[r] = rows[r].max;
        mnew[r] = old[r] > mb ? old[r] : mb;
    }
    __m256 cv = cpu_exp8(_mm256_sub_ps(_mm256_loadu_ps(old), _mm256_loadu_ps(mnew)));
    _mm256_storeu_ps(old, cv);
    for (int r = 0; r < R; r++) {
        float *s = sc + r * bp;
        __m256 mv = _mm256_set1_ps(mnew[r]), sum = _mm256_setzero_ps();
        for (int j0 = 0; j0 < bp; j0 += 8) {
            __m256 p = cpu_exp8(_mm256_sub_ps(_mm256_load_ps(s + j0), mv));
            _mm256_store_ps(s + j0, p);
            sum = _mm256_add_ps(sum, p);
        }
        corr[r] = old[r];
        rows[r].sum = rows[r].sum * old[r] + cpu_hsum8(sum);
        rows[r].max = mnew[r];
    }
}

/* R rows of one token over the first nv keys of a block.  sc: ATT_R × bp. */
CPU_AVX2 static inline __attribute__((always_inline)) void
att_rows(const int R, struct att_row *rows, const float *K, const float *V, int nv, int hd,
         float *sc, int bp)
{
    float *q[ATT_R], *acc[ATT_R], corr[ATT_R];
#pragma GCC unroll 3
    for (int r = 0; r < R; r++)
        q[r] = rows[r].q, acc[r] = rows[r].acc;
    for (int j0 = 0; j0 < nv; j0 += 4)
        att_qk(R, q, K, j0, nv, hd, sc, bp);
    att_softmax(R, rows, sc, nv, bp, corr);
    int d0 = 0;
    for (; d0 + 32 <= hd; d0 += 32)
        att_pv(R, 4, acc, V, d0, hd, nv, sc, bp, corr);
    for (; d0 < hd; d0 += 8)
        att_pv(R, 1, acc, V, d0, hd, nv, sc, bp, corr);
}

CPU_AVX2 static void att_rows1(struct att_row *rows, const float *K, const float *V, int nv, int hd,
                               float *sc, int bp)
{
    att_rows(1, rows, K, V, nv, hd, sc, bp);
}
CPU_AVX2 static void att_rows2(struct att_row *rows, const float *K, const float *V, int nv, int hd,
                               float *sc, int bp)
{
    att_rows(2, rows, K, V, nv, hd, sc, bp);
}
CPU_AVX2 static void att_rows3(struct att_row *rows, const float *K, const float *V, int nv, int hd,
                               float *sc, int bp)
{
    att_rows(3, rows, K, V, nv, hd, sc, bp);
}

/* The G rows of one token, ATT_R at a time. */
static void att_token_avx2(struct att_row *rows, int G, const float *K, const float *V, int nv,
                           int hd, float *sc, int bp)
{
    for (int r = 0; r < G; r += ATT_R) {
        int n = G - r < ATT_R ? G - r : ATT_R;
        if (n == 3)
            att_rows3(rows + r, K, V, nv, hd, sc, bp);
        else if (n == 2)
            att_rows2(rows + r, K, V, nv, hd, sc, bp);
        else
            att_rows1(rows + r, K, V, nv, hd, sc, bp);
    }
}
#endif

/* Floats of one thread's scratch: rows' q and acc, their states, scores. */
static size_t att_scratch_floats(int head_dim, int block_pad)
{
    size_t hd = ((size_t)head_dim + 15) / 16 * 16;
    return 2 * ATT_ROWS * hd + 4 * (size_t)block_pad + 16;
}

/* Asks for head h's K and V rows of a block, so that they arrive while the
 * current block is computed: they are two 4 KiB pieces at places that the
 * hardware prefetcher cannot guess (the pool is in huge pages, so this
 * costs no TLB misses either). */
static void att_prefetch(const float *block, const struct be_kv_geom *g, int layer, int h)
{
    size_t bytes = (size_t)g->block_size * g->head_dim * sizeof(float);
    const char *k = (const char *)(block + be_kv_offset(g, layer, 0, h));
    const char *v = (const char *)(block + be_kv_offset(g, layer, 1, h));
    for (size_t off = 0; off < bytes; off += 64) {
        __builtin_prefetch(k + off);
        __builtin_prefetch(v + off);
    }
}

/* One work item: tokens t0 .. t1-1 of sequence s against KV head h, row
 * (t, i) being query head h·G + i of token t. */
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
        if (blk < last)
            att_prefetch(a->pool + (size_t)table[blk + 1] * a->block_elems, g, a->layer, h);
        for (int t = t0; t < t1; t++) {
            int nv = bt->pos[t] - blk * bs + 1;
            if (nv <= 0)
                continue; /* this token's keys ended in an earlier block */
            nv = nv < bs ? nv : bs;
            struct att_row *tr = rows + (t - t0) * G;
#if CPU_HAVE_X86
            if (avx2) {
                att_token_avx2(tr, G, base + k_off, base + v_off, nv, hd, sc, a->block_pad);
                continue;
            }
#endif
            for (int i = 0; i < G; i++)
                att_block_c(a, &tr[i], base + k_off, base + v_off, nv, sc);
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
    int nt = n_tiles < 0 ? 1 : cpu_threads_for(c, work * n_heads * g->head_dim * 2);
    size_t per = (att_scratch_floats(g->head_dim, a.block_pad) + 15) / 16 * 16;
    float *scratch = n_tiles < 0 ? NULL
                                 : cpu_grow(c->att_scratch, &c->att_scratch_floats,
                                            per * (size_t)nt, sizeof(float));
    if (!scratch)
        return cpu_fail(c, "cpu: attention: out of memory");
    c->att_scratch = scratch;
    /* The AVX2 kernel loads head_dim in whole vectors. */
    int avx2 = c->avx2 && g->head_dim % 8 == 0;
    int n_kv = g->n_kv_heads, n_items = n_tiles * n_kv;
    const int32_t *tiles = c->att_tiles;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int it = 0; it < n_items; it++) {
        const int32_t *tile = tiles + 3 * (it / n_kv);
        att_item(&a, avx2, tile[0], tile[1], tile[2], it % n_kv,
                 scratch + per * (size_t)omp_get_thread_num());
    }
    return 0;
}
