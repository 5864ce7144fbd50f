/*
 * kernels/cpu/cpu_elementwise.c — the row- and element-wise operations:
 * embedding lookup, RMS norm, residual add, SwiGLU, rotary embedding and
 * gathering output rows.
 *
 * Each element's value is a fixed function of its own inputs (and, for RMS
 * norm, of its own row summed in a fixed order), so splitting the work over
 * threads or batches never changes a bit.  Small calls stay on the calling
 * thread: waking the team costs more than they do.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"

int cpu_embed(struct be *b, const struct be_buf *table, struct be_buf *out, int n)
{
    struct be_cpu *c = cpu_of(b);
    if (cpu_need_batch(c))
        return -1;
    if (!table || !table->is_weight || table->cols != (size_t)n)
        return cpu_fail(c, "cpu: embed: table is not a weight of %d columns", n);
    int nt = c->bt.n_tokens;
    if (cpu_need(c, out, (size_t)nt * n, "embed out"))
        return -1;
    for (int t = 0; t < nt; t++)
        if ((size_t)c->bt.tokens[t] >= table->rows)
            return cpu_fail(c, "cpu: embed: token id %d out of range [0, %zu)", c->bt.tokens[t],
                            table->rows);
    float *y = out->data;
#pragma omp parallel for num_threads(cpu_threads_for(c, (double)nt *n)) schedule(static)
    for (int t = 0; t < nt; t++)
        cpu_weight_row(table, (size_t)c->bt.tokens[t], y + (size_t)t * n);
    return 0;
}

/* 1 / rms(x): squares summed exactly in double, four interleaved partial
 * sums added in a fixed order. */
static float rms_inv(const float *x, int n, float eps)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += (double)x[i] * x[i];
        s1 += (double)x[i + 1] * x[i + 1];
        s2 += (double)x[i + 2] * x[i + 2];
        s3 += (double)x[i + 3] * x[i + 3];
    }
    for (; i < n; i++)
        s0 += (double)x[i] * x[i];
    double mean = ((s0 + s1) + (s2 + s3)) / n;
    return (float)(1.0 / sqrt(mean + eps));
}

int cpu_rmsnorm(struct be *b, const struct be_buf *x, const struct be_buf *w, struct be_buf *y,
                int m, int n, float eps)
{
    struct be_cpu *c = cpu_of(b);
    if (m < 0 || n < 1)
        return cpu_fail(c, "cpu: rmsnorm: bad shape %d x %d", m, n);
    if (cpu_need(c, x, (size_t)m * n, "rmsnorm x") || cpu_need(c, y, (size_t)m * n, "rmsnorm y"))
        return -1;
    /* The weight may be a packed [1 × n] weight or a plain buffer. */
    float *wrow = NULL;
    const float *wv;
    if (w && w->is_weight) {
        if (w->cols != (size_t)n)
            return cpu_fail(c, "cpu: rmsnorm: weight has %zu columns, not %d", w->cols, n);
        if (w->plain) {
            wv = w->plain;
        } else {
            if (!(wrow = malloc(sizeof(float) * n)))
                return cpu_fail(c, "cpu: rmsnorm: out of memory");
            cpu_weight_row(w, 0, wrow);
            wv = wrow;
        }
    } else {
        if (cpu_need(c, w, (size_t)n, "rmsnorm w"))
            return -1;
        wv = w->data;
    }
    const float *xs = x->data;
    float *ys = y->data;
#pragma omp parallel for num_threads(cpu_threads_for(c, 2.0 * m * n)) schedule(static)
    for (int r = 0; r < m; r++) {
        const float *xr = xs + (size_t)r * n;
        float *yr = ys + (size_t)r * n;
        float inv = rms_inv(xr, n, eps);
        for (int i = 0; i < n; i++)
            yr[i] = (xr[i] * inv) * wv[i];
    }
    free(wrow);
    return 0;
}

int cpu_add(struct be *b, struct be_buf *x, const struct be_buf *y, size_t n)
{
    struct be_cpu *c = cpu_of(b);
    if (cpu_need(c, x, n, "add x") || cpu_need(c, y, n, "add y"))
        return -1;
    float *xs = x->data;
    const float *ys = y->data;
#pragma omp parallel for num_threads(cpu_threads_for(c, (double)n)) schedule(static)
    for (size_t i = 0; i < n; i++)
        xs[i] += ys[i];
    return 0;
}

/* silu(g) * u = g / (1 + e^-g) * u, the order llama.cpp uses. */
static void swiglu_c(const float *g, const float *u, float *o, size_t n)
{
    for (size_t i = 0; i < n; i++)
        o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

#if CPU_HAVE_X86
CPU_AVX2 static __m256 swiglu8(__m256 g, __m256 u)
{
    __m256 e = cpu_exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

/* Every element goes through swiglu8, the tail too (through a padded copy),
 * so an element's value does not depend on where the array ends. */
CPU_AVX2 static void swiglu_avx2(const float *g, const float *u, float *o, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, swiglu8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
    if (i < n) {
        float gt[8] = {0}, ut[8] = {0}, ot[8];
        memcpy(gt, g + i, sizeof(float) * (n - i));
        memcpy(ut, u + i, sizeof(float) * (n - i));
        _mm256_storeu_ps(ot, swiglu8(_mm256_loadu_ps(gt), _mm256_loadu_ps(ut)));
        memcpy(o + i, ot, sizeof(float) * (n - i));
    }
}
#endif

int cpu_swiglu(struct be *b, const struct be_buf *gate, const struct be_buf *up, struct be_buf *out,
               size_t n)
{
    struct be_cpu *c = cpu_of(b);
    if (cpu_need(c, gate, n, "swiglu gate") || cpu_need(c, up, n, "swiglu up") ||
        cpu_need(c, out, n, "swiglu out"))
        return -1;
    const float *g = gate->data, *u = up->data;
    float *o = out->data;
    /* Chunks of a multiple of 8 so that the vector lanes stay aligned with
     * the whole array's. */
    size_t chunk = 16384, n_chunks = (n + chunk - 1) / chunk;
#pragma omp parallel for num_threads(cpu_threads_for(c, 8.0 * n)) schedule(static)
    for (size_t ch = 0; ch < n_chunks; ch++) {
        size_t i0 = ch * chunk, len = n - i0 < chunk ? n - i0 : chunk;
#if CPU_HAVE_X86
        if (c->avx2) {
            swiglu_avx2(g + i0, u + i0, o + i0, len);
            continue;
        }
#endif
        swiglu_c(g + i0, u + i0, o + i0, len);
    }
    return 0;
}

/* cos and sin of every (token, frequency) of the batch, [n_tokens][half][2],
 * kept while the batch and the inv_freq buffer stay the same (q and k of
 * every layer share it).  The angle is pos * inv_freq[i] in float, as
 * llama.cpp forms it; its cosine and sine are taken in double and rounded
 * once, so they are the correctly rounded values, which any backend can
 * reproduce. */
static const float *rope_table(struct be_cpu *c, const struct be_buf *inv_freq, int half)
{
    const struct cpu_batch *bt = &c->bt;
    if (c->rope_cs && c->rope_buf_id == inv_freq->id && c->rope_gen == bt->gen &&
        c->rope_half == half)
        return c->rope_cs;
    size_t need = (size_t)bt->n_tokens * half * 2;
    float *cs = cpu_grow(c->rope_cs, &c->rope_cap, need ? need : 1, sizeof(float));
    if (!cs)
        return NULL;
    c->rope_cs = cs;
    const float *inv = inv_freq->data;
    for (int t = 0; t < bt->n_tokens; t++)
        for (int i = 0; i < half; i++) {
            float theta = (float)bt->pos[t] * inv[i];
            cs[((size_t)t * half + i) * 2] = (float)cos((double)theta);
            cs[((size_t)t * half + i) * 2 + 1] = (float)sin((double)theta);
        }
    c->rope_buf_id = inv_freq->id;
    c->rope_gen = bt->gen;
    c->rope_half = half;
    return cs;
}

/* Rotates the pairs (x[i0], x[i1]) of one head by the token's angles. */
static void rope_head(float *x, const float *cs, int half, int neox)
{
    for (int i = 0; i < half; i++) {
        int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        float co = cs[2 * i], si = cs[2 * i + 1];
        float a = x[i0], bb = x[i1];
        x[i0] = a * co - bb * si;
        x[i1] = a * si + bb * co;
    }
}

int cpu_rope(struct be *b, struct be_buf *x, int n_heads, int head_dim,
             const struct be_buf *inv_freq, int neox)
{
    struct be_cpu *c = cpu_of(b);
    if (cpu_need_batch(c))
        return -1;
    if (n_heads < 1 || head_dim < 2 || head_dim % 2)
        return cpu_fail(c, "cpu: rope: bad shape (%d heads of %d)", n_heads, head_dim);
    int half = head_dim / 2, nt = c->bt.n_tokens;
    size_t row = (size_t)n_heads * head_dim;
    if (cpu_need(c, x, nt * row, "rope x") || cpu_need(c, inv_freq, (size_t)half, "rope inv_freq"))
        return -1;
    if (inv_freq->is_weight)
        return cpu_fail(c, "cpu: rope: inv_freq must be a plain buffer, not a weight");
    const float *cs = rope_table(c, inv_freq, half);
    if (!cs)
        return cpu_fail(c, "cpu: rope: out of memory");
    float *xs = x->data;
#pragma omp parallel for num_threads(cpu_threads_for(c, 4.0 * nt * row)) schedule(static)
    for (int t = 0; t < nt; t++)
        for (int h = 0; h < n_heads; h++)
            rope_head(xs + t * row + (size_t)h * head_dim, cs + (size_t)t * half * 2, half, neox);
    return 0;
}

int cpu_gather_rows(struct be *b, const struct be_buf *x, struct be_buf *y, int n)
{
    struct be_cpu *c = cpu_of(b);
    if (cpu_need_batch(c))
        return -1;
    if (n < 1)
        return cpu_fail(c, "cpu: gather_rows: bad row length %d", n);
    const struct cpu_batch *bt = &c->bt;
    if (cpu_need(c, x, (size_t)bt->n_tokens * n, "gather_rows x") ||
        cpu_need(c, y, (size_t)bt->n_out * n, "gather_rows y"))
        return -1;
    const float *xs = x->data;
    float *ys = y->data;
    for (int i = 0; i < bt->n_out; i++)
        memcpy(ys + (size_t)i * n, xs + (size_t)bt->out_rows[i] * n, sizeof(float) * n);
    return 0;
}
