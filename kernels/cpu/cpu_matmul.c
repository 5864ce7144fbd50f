/*
 * kernels/cpu/cpu_matmul.c — y[m × n] = x[m × k] · w[n × k]^T on packed
 * weights, batch-invariant, with our own kernel instead of OpenBLAS.
 *
 * Why not cblas_sgemm: OpenBLAS 0.3.21 (Debian, DYNAMIC_ARCH, Zen kernels)
 * gives a row of y different bits depending on m and on where the row sits
 * in the batch: its sgemm micro-kernels for different column remainders (the
 * batch is OpenBLAS's N dimension: m mod 12 in 4..11 and the first half of
 * every 12 columns) sum in another order than the one for 1-3 columns, and
 * with the batch as its M dimension the first and last 8-row groups differ.
 * No padding of m fixes a row's position in its tile.  It is also slow for
 * decode: every call packs the whole of w, so m = 1 runs at a quarter of
 * memory bandwidth.
 *
 * Here the weight is packed once, at load, in panels of CPU_NR rows laid out
 * [k][CPU_NR] (see cpu_internal.h), and every y[i][j] is one chain of fused
 * multiply-adds over k = 0, 1, ..., k-1 starting from zero, in one lane of
 * one register.  Tile shape, cache blocking (the partial sums go through y
 * as exact floats), the split over threads and m change which elements are
 * computed together, never the operations that make one element, so the
 * result is bit-identical for any batch.  The kernel is the usual broadcast
 * x, multiply a panel row, accumulate: 6 rows × 16 columns in 12 AVX2
 * registers for prefill; for decode 1 row × 4 panels or 3 rows × 2 panels,
 * so that the weights stream once, several panels at a time, with enough
 * independent chains.  On one Zen 3 core it runs at 75-85 GFLOP/s for
 * m >= 32 (sgemm: 60-90 on the same shapes) and 3-5x faster than sgemm for
 * m <= 8.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"

#define MR       6   /* x rows per micro-tile */
#define KC       512 /* k per cache block: a panel slice is 32 KiB */
#define MC       96  /* x rows per cache block: 192 KiB of x at KC, in L2 */
#define MM_AHEAD 32  /* panel rows the kernels prefetch ahead: 2 KiB */

static size_t cpu_panels(size_t rows)
{
    return (rows + CPU_NR - 1) / CPU_NR;
}

struct be_buf *cpu_weight(struct be *b, const float *src, size_t rows, size_t cols)
{
    struct be_cpu *c = cpu_of(b);
    size_t np = cpu_panels(rows);
    if (!src || rows == 0 || cols == 0 || rows > INT32_MAX || cols > INT32_MAX ||
        np * CPU_NR > SIZE_MAX / sizeof(float) / cols) {
        cpu_fail(c, "cpu: weight: bad shape %zu x %zu", rows, cols);
        return NULL;
    }
    struct be_buf *w = b->ops->alloc(b, np * CPU_NR * cols * sizeof(float));
    if (!w)
        return NULL;
    w->is_weight = 1;
    w->rows = rows;
    w->cols = cols;
    if (rows < CPU_NR) {
        /* Norm vectors are read row-wise by element-wise ops on every
         * layer: keep them in order too, a few KiB. */
        if (!(w->plain = malloc(sizeof(float) * rows * cols))) {
            b->ops->free(b, w);
            cpu_fail(c, "cpu: out of memory for a %zu x %zu weight", rows, cols);
            return NULL;
        }
        memcpy(w->plain, src, sizeof(float) * rows * cols);
    }
    float *dst = w->data;
#pragma omp parallel for num_threads(cpu_threads_for(c, (double)rows *cols)) schedule(static)
    for (size_t p = 0; p < np; p++) {
        size_t r1 = p * CPU_NR + CPU_NR < rows ? p * CPU_NR + CPU_NR : rows;
        float *panel = dst + p * cols * CPU_NR;
        for (size_t r = p * CPU_NR; r < r1; r++)
            for (size_t k = 0; k < cols; k++)
                panel[k * CPU_NR + r % CPU_NR] = src[r * cols + k];
    }
    return w;
}

void cpu_weight_row(const struct be_buf *w, size_t row, float *dst)
{
    if (w->plain) {
        memcpy(dst, w->plain + row * w->cols, sizeof(float) * w->cols);
        return;
    }
    const float *panel = (const float *)w->data + (row / CPU_NR) * w->cols * CPU_NR;
    for (size_t k = 0; k < w->cols; k++)
        dst[k] = panel[k * CPU_NR + row % CPU_NR];
}

/* What one call works on.  Panels are wstride floats apart. */
struct mm_args {
    const float *x, *w;
    float *y;
    int m, n, k;
    size_t wstride;
    int avx2;
};

/* The portable kernel: the same chains as the AVX2 one, in plain C. */
static void mm_kern_c(int mr, int np, const float *x, size_t ldx, const float *w, size_t wstride,
                      int kc, float *y, size_t ldy, int first)
{
    for (int p = 0; p < np; p++) {
        float acc[MR][CPU_NR];
        const float *pw = w + p * wstride;
        for (int i = 0; i < mr; i++)
            for (int j = 0; j < CPU_NR; j++)
                acc[i][j] = first ? 0.0f : y[i * ldy + p * CPU_NR + j];
        for (int kk = 0; kk < kc; kk++)
            for (int i = 0; i < mr; i++) {
                float xv = x[i * ldx + kk];
                for (int j = 0; j < CPU_NR; j++)
                    acc[i][j] += xv * pw[kk * CPU_NR + j];
            }
        for (int i = 0; i < mr; i++)
            memcpy(y + i * ldy + p * CPU_NR, acc[i], sizeof(acc[i]));
    }
}

#if CPU_HAVE_X86
/* Six rows of x (xr) times one panel: 12 accumulators, written out so that
 * they stay in registers at any optimisation level.  Rows past the real ones
 * point at a real row and a scratch output (see mm_kern_avx2).  pf: where to
 * prefetch from, relative to w (a later panel, for more loads in flight). */
#define MM_LOAD(i)                                                                                 \
    __m256 c##i##0 = first ? _mm256_setzero_ps() : _mm256_loadu_ps(yr[i]);                         \
    __m256 c##i##1 = first ? _mm256_setzero_ps() : _mm256_loadu_ps(yr[i] + 8)
#define MM_ROW(i)                                                                                  \
    do {                                                                                           \
        __m256 b = _mm256_broadcast_ss(xr##i + kk);                                                \
        c##i##0 = _mm256_fmadd_ps(b, w0, c##i##0);                                                 \
        c##i##1 = _mm256_fmadd_ps(b, w1, c##i##1);                                                 \
    } while (0)
#define MM_STORE(i)                                                                                \
    do {                                                                                           \
        _mm256_storeu_ps(yr[i], c##i##0);                                                          \
        _mm256_storeu_ps(yr[i] + 8, c##i##1);                                                      \
    } while (0)

CPU_AVX2 static void mm_6x16(const float *const xr[MR], const float *w, size_t pf, int kc,
                             float *const yr[MR], int first)
{
    MM_LOAD(0);
    MM_LOAD(1);
    MM_LOAD(2);
    MM_LOAD(3);
    MM_LOAD(4);
    MM_LOAD(5);
    const float *xr0 = xr[0], *xr1 = xr[1], *xr2 = xr[2], *xr3 = xr[3], *xr4 = xr[4];
    const float *xr5 = xr[5];
    for (int kk = 0; kk < kc; kk++) {
        __m256 w0 = _mm256_load_ps(w + kk * CPU_NR), w1 = _mm256_load_ps(w + kk * CPU_NR + 8);
        _mm_prefetch((const char *)(w + pf + kk * CPU_NR), _MM_HINT_T0);
        MM_ROW(0);
        MM_ROW(1);
        MM_ROW(2);
        MM_ROW(3);
        MM_ROW(4);
        MM_ROW(5);
    }
    MM_STORE(0);
    MM_STORE(1);
    MM_STORE(2);
    MM_STORE(3);
    MM_STORE(4);
    MM_STORE(5);
}

/* Three rows times two panels (small decode batches): 12 chains over two
 * weight streams. */
#define MM_ROW2(i)                                                                                 \
    do {                                                                                           \
        __m256 b = _mm256_broadcast_ss(xr##i + kk);                                                \
        c##i##0 = _mm256_fmadd_ps(b, w0, c##i##0);                                                 \
        c##i##1 = _mm256_fmadd_ps(b, w1, c##i##1);                                                 \
        c##i##2 = _mm256_fmadd_ps(b, w2, c##i##2);                                                 \
        c##i##3 = _mm256_fmadd_ps(b, w3, c##i##3);                                                 \
    } while (0)
#define MM_LOAD2(i)                                                                                \
    MM_LOAD(i);                                                                                    \
    __m256 c##i##2 = first ? _mm256_setzero_ps() : _mm256_loadu_ps(yr[i] + CPU_NR);                \
    __m256 c##i##3 = first ? _mm256_setzero_ps() : _mm256_loadu_ps(yr[i] + CPU_NR + 8)
#define MM_STORE2(i)                                                                               \
    do {                                                                                           \
        MM_STORE(i);                                                                               \
        _mm256_storeu_ps(yr[i] + CPU_NR, c##i##2);                                                 \
        _mm256_storeu_ps(yr[i] + CPU_NR + 8, c##i##3);                                             \
    } while (0)

CPU_AVX2 static void mm_3x32(const float *const xr[3], const float *w, size_t ws, int kc,
                             float *const yr[3], int first)
{
    MM_LOAD2(0);
    MM_LOAD2(1);
    MM_LOAD2(2);
    const float *xr0 = xr[0], *xr1 = xr[1], *xr2 = xr[2];
    for (int kk = 0; kk < kc; kk++) {
        const float *wa = w + kk * CPU_NR, *wb = wa + ws;
        __m256 w0 = _mm256_load_ps(wa), w1 = _mm256_load_ps(wa + 8);
        __m256 w2 = _mm256_load_ps(wb), w3 = _mm256_load_ps(wb + 8);
        _mm_prefetch((const char *)(wa + MM_AHEAD * CPU_NR), _MM_HINT_T0);
        _mm_prefetch((const char *)(wb + MM_AHEAD * CPU_NR), _MM_HINT_T0);
        MM_ROW2(0);
        MM_ROW2(1);
        MM_ROW2(2);
    }
    MM_STORE2(0);
    MM_STORE2(1);
    MM_STORE2(2);
}

/* One row of x times four panels (decode): 8 independent chains, enough to
 * cover the latency of FMA while the weights stream past. */
#define MM_PLOAD(p)                                                                                \
    __m256 a##p##0 = first ? _mm256_setzero_ps() : _mm256_loadu_ps(y + p * CPU_NR);                \
    __m256 a##p##1 = first ? _mm256_setzero_ps() : _mm256_loadu_ps(y + p * CPU_NR + 8)
#define MM_PANEL(p)                                                                                \
    do {                                                                                           \
        const float *wp = w + p * ws + kk * CPU_NR;                                                \
        a##p##0 = _mm256_fmadd_ps(b, _mm256_load_ps(wp), a##p##0);                                 \
        a##p##1 = _mm256_fmadd_ps(b, _mm256_load_ps(wp + 8), a##p##1);                             \
        _mm_prefetch((const char *)(wp + MM_AHEAD * CPU_NR), _MM_HINT_T0);                         \
    } while (0)
#define MM_PSTORE(p)                                                                               \
    do {                                                                                           \
        _mm256_storeu_ps(y + p * CPU_NR, a##p##0);                                                 \
        _mm256_storeu_ps(y + p * CPU_NR + 8, a##p##1);                                             \
    } while (0)

CPU_AVX2 static void mm_1x64(const float *x, const float *w, size_t ws, int kc, float *y, int first)
{
    MM_PLOAD(0);
    MM_PLOAD(1);
    MM_PLOAD(2);
    MM_PLOAD(3);
    for (int kk = 0; kk < kc; kk++) {
        __m256 b = _mm256_broadcast_ss(x + kk);
        MM_PANEL(0);
        MM_PANEL(1);
        MM_PANEL(2);
        MM_PANEL(3);
    }
    MM_PSTORE(0);
    MM_PSTORE(1);
    MM_PSTORE(2);
    MM_PSTORE(3);
}

/* Panels that the widest kernel for mr rows takes at once. */
static int mm_width(int mr)
{
    return mr == 1 ? 4 : mr <= 3 ? 2 : 1;
}

/* mr rows (ldx apart) times np panels (np is mm_width(mr) or 1).  Rows that
 * a kernel has but the call has not repeat the first row, and their results
 * go to scratch: the work wasted is compute, which small batches have to
 * spare while they wait for the weights. */
static void mm_kern_avx2(int mr, int np, const float *x, size_t ldx, const float *w, size_t wstride,
                         int kc, float *y, size_t ldy, int first)
{
    if (mr == 1 && np == 4) {
        mm_1x64(x, w, wstride, kc, y, first);
        return;
    }
    float spill[2 * CPU_NR * 2] __attribute__((aligned(32))) = {0};
    const float *xr[MR];
    float *yr[MR];
    if (mr <= 3 && np == 2) {
        for (int i = 0; i < 3; i++) {
            xr[i] = x + (i < mr ? i : 0) * ldx;
            yr[i] = i < mr ? y + i * ldy : spill + 2 * CPU_NR * (i & 1);
        }
        mm_3x32(xr, w, wstride, kc, yr, first);
        return;
    }
    for (int p = 0; p < np; p++) {
        for (int i = 0; i < MR; i++) {
            xr[i] = x + (i < mr ? i : 0) * ldx;
            yr[i] = i < mr ? y + i * ldy + p * CPU_NR : spill + CPU_NR * (i & 1);
        }
        mm_6x16(xr, w + p * wstride, 2 * wstride, kc, yr, first);
    }
}
#endif

static void mm_kern(const struct mm_args *a, int mr, int np, const float *x, const float *w, int kc,
                    float *y, size_t ldy, int first)
{
#if CPU_HAVE_X86
    if (a->avx2) {
        mm_kern_avx2(mr, np, x, a->k, w, a->wstride, kc, y, ldy, first);
        return;
    }
#endif
    mm_kern_c(mr, np, x, a->k, w, a->wstride, kc, y, ldy, first);
}

/* Rows i .. i+mr-1 (mr <= MR) against panels p0 .. p1-1, k0 .. k0+kc-1. */
static void mm_rows(const struct mm_args *a, int i, int mr, int p0, int p1, int k0, int kc)
{
    int width = 1;
#if CPU_HAVE_X86
    if (a->avx2)
        width = mm_width(mr);
#endif
    const float *x = a->x + (size_t)i * a->k + k0;
    float *y = a->y + (size_t)i * a->n;
    int first = k0 == 0, full = a->n / CPU_NR;
    int p = p0;
    while (p < p1 && p < full) {
        int np = p + width <= p1 && p + width <= full ? width : 1;
        mm_kern(a, mr, np, x, a->w + p * a->wstride + (size_t)k0 * CPU_NR, kc, y + p * CPU_NR, a->n,
                first);
        p += np;
    }
    if (p < p1) {
        /* The last panel is partial: its tile goes through a buffer so that
         * nothing is written past the row. */
        float tile[MR * CPU_NR];
        int cols = a->n - p * CPU_NR;
        for (int r = 0; r < mr; r++)
            memcpy(tile + r * CPU_NR, y + (size_t)r * a->n + p * CPU_NR, sizeof(float) * cols);
        mm_kern(a, mr, 1, x, a->w + p * a->wstride + (size_t)k0 * CPU_NR, kc, tile, CPU_NR, first);
        for (int r = 0; r < mr; r++)
            memcpy(y + (size_t)r * a->n + p * CPU_NR, tile + r * CPU_NR, sizeof(float) * cols);
    }
}

/* One thread's share: rows i0 .. i1-1, panels p0 .. p1-1. */
static void mm_block(const struct mm_args *a, int i0, int i1, int p0, int p1)
{
    for (int k0 = 0; k0 < a->k; k0 += KC) {
        int kc = a->k - k0 < KC ? a->k - k0 : KC;
        for (int ib = i0; ib < i1; ib += MC) {
            int ie = ib + MC < i1 ? ib + MC : i1;
            if (ie - ib <= MR) {
                /* Few rows (decode): stream the panels once, several at a time. */
                mm_rows(a, ib, ie - ib, p0, p1, k0, kc);
                continue;
            }
            /* Many rows: one panel slice stays in L1 while the rows pass. */
            for (int p = p0; p < p1; p++)
                for (int i = ib; i < ie; i += MR)
                    mm_rows(a, i, ie - i < MR ? ie - i : MR, p, p + 1, k0, kc);
        }
    }
}

int cpu_matmul(struct be *b, const struct be_buf *x, const struct be_buf *w, struct be_buf *y,
               int m, int n, int k)
{
    struct be_cpu *c = cpu_of(b);
    if (m < 0 || n < 1 || k < 1)
        return cpu_fail(c, "cpu: matmul: bad shape m=%d n=%d k=%d", m, n, k);
    if (!w || !w->is_weight || w->rows != (size_t)n || w->cols != (size_t)k)
        return cpu_fail(c, "cpu: matmul: w is not a %d x %d weight", n, k);
    if (cpu_need(c, x, (size_t)m * k, "matmul x") || cpu_need(c, y, (size_t)m * n, "matmul y"))
        return -1;
    if (m == 0)
        return 0;
    struct mm_args a = {x->data, w->data, y->data, m, n, k, (size_t)k * CPU_NR, c->avx2};
    int np = (int)cpu_panels((size_t)n);
    int nt = cpu_threads_for(c, (double)m * n * k / 16);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        /* Threads split the panels (each weight byte is read by one thread);
         * when there are fewer panels than threads, the rows too. */
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        int tp = T < np ? T : np, tm = T / tp;
        if (t < tp * tm) {
            int pi = t % tp, mi = t / tp;
            mm_block(&a, (int)((int64_t)m * mi / tm), (int)((int64_t)m * (mi + 1) / tm),
                     (int)((int64_t)np * pi / tp), (int)((int64_t)np * (pi + 1) / tp));
        }
    }
    return 0;
}
