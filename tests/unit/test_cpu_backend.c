/*
 * tests/unit/test_cpu_backend.c — every operation of the CPU backend against
 * a naive double-precision reference written here, on random inputs with a
 * fixed seed, through both kernel flavours (AVX2 where the machine has it,
 * and portable C); batch invariance of matmul and attention, bit for bit;
 * and the refusals: inconsistent batch metadata, out-of-range copies.
 *
 * Output buffers are filled with NaN before each operation, so an element
 * that an operation forgets to write fails the comparison.
 */
#include "kernels/backend.h"
#include "kernels/cpu/cpu_internal.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- helpers -- */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static void rng_seed(uint64_t s)
{
    g_rng = s * 0x9e3779b97f4a7c15ull + 1;
}

/* splitmix64: uniform in [-1, 1). */
static float frand(void)
{
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)((double)(z >> 40) / (double)(1ull << 23) - 1.0);
}

static float *rand_floats(size_t n)
{
    float *p = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++)
        p[i] = frand();
    return p;
}

static struct be *be_new(int n_threads, int avx2)
{
    char err[256];
    struct be_opts o = {n_threads};
    struct be *b = be_create("cpu", &o, err, sizeof(err));
    ck_assert_msg(b != NULL, "%s", err);
    /* White box: force the portable kernels, or keep AVX2 if the CPU has it. */
    struct be_cpu *c = (struct be_cpu *)b;
    c->avx2 = c->avx2 && avx2;
    return b;
}

static struct be_buf *buf_of(struct be *b, const float *src, size_t n)
{
    struct be_buf *buf = b->ops->alloc(b, sizeof(float) * n);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(b->ops->upload(b, buf, 0, src, sizeof(float) * n), 0);
    return buf;
}

/* A buffer of n floats, all NaN. */
static struct be_buf *buf_nan(struct be *b, size_t n)
{
    float *tmp = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++)
        tmp[i] = NAN;
    struct be_buf *buf = buf_of(b, tmp, n);
    free(tmp);
    return buf;
}

static float *fetch(struct be *b, const struct be_buf *buf, size_t n)
{
    float *p = malloc(sizeof(float) * n);
    ck_assert_int_eq(b->ops->download(b, p, buf, 0, sizeof(float) * n), 0);
    return p;
}

/* |got - want| <= tol * scale[i] (scale: the size of the terms that made
 * want, or NULL for max(1, |want|)), NaN never close.  One assertion for the
 * whole array: Check records every assertion it passes. */
static void ck_close(const float *got, const double *want, const double *scale, size_t n,
                     double tol, const char *what)
{
    size_t i = 0;
    for (; i < n; i++) {
        double s = scale ? scale[i] : fmax(1.0, fabs(want[i]));
        if (!(fabs(got[i] - want[i]) <= tol * s))
            break;
    }
    ck_assert_msg(i == n, "%s[%zu] = %.9g, want %.9g", what, i, i < n ? got[i] : 0.0,
                  i < n ? want[i] : 0.0);
}

/* A flat batch assembled in the test. */
struct tb {
    int n_tokens, n_seqs, n_out;
    int32_t tokens[256], pos[256], slot[256];
    int32_t q_off[64], bt_off[64], tables[512], out_rows[256];
};

static void tb_init(struct tb *t)
{
    memset(t, 0, sizeof(*t));
}

/* Appends a sequence whose table is blocks[0..nb) with tokens at positions
 * p0 .. p0+n-1 (block size bs). */
static void tb_seq(struct tb *t, const int32_t *blocks, int nb, int p0, int n, int bs)
{
    int s = t->n_seqs++;
    t->q_off[s] = t->n_tokens;
    t->bt_off[s + 1] = t->bt_off[s] + nb;
    memcpy(t->tables + t->bt_off[s], blocks, sizeof(int32_t) * nb);
    for (int i = 0; i < n; i++) {
        int k = t->n_tokens++, p = p0 + i;
        t->tokens[k] = (p * 7 + s) % 50;
        t->pos[k] = p;
        t->slot[k] = blocks[p / bs] * bs + p % bs;
    }
    t->q_off[s + 1] = t->n_tokens;
}

static struct be_batch tb_view(const struct tb *t)
{
    struct be_batch v = {t->n_tokens, t->tokens, t->pos,    t->slot,  t->n_seqs,
                         t->q_off,    t->bt_off, t->tables, t->n_out, t->out_rows};
    return v;
}

static int tb_set(struct be *b, const struct tb *t)
{
    struct be_batch v = tb_view(t);
    return b->ops->batch(b, &v);
}

/* ------------------------------------------------------------ creation -- */

START_TEST(create_takes_thread_count_and_names_itself)
{
    struct be *b = be_new(3, 1);
    ck_assert_int_eq(b->n_threads, 3);
    ck_assert_str_eq(b->ops->name, "cpu");
    be_destroy(b);
    b = be_new(0, 1);
    ck_assert_int_ge(b->n_threads, 1);
    be_destroy(b);
}
END_TEST

/* -------------------------------------------------------------- memory -- */

START_TEST(alloc_is_zeroed_and_transfers_are_bounds_checked)
{
    struct be *b = be_new(1, 1);
    struct be_buf *buf = b->ops->alloc(b, 100);
    unsigned char got[100], src[100];
    ck_assert_int_eq(b->ops->download(b, got, buf, 0, 100), 0);
    for (int i = 0; i < 100; i++) {
        ck_assert_int_eq(got[i], 0);
        src[i] = (unsigned char)(i + 1);
    }
    ck_assert_int_eq(b->ops->upload(b, buf, 10, src, 90), 0);
    ck_assert_int_eq(b->ops->download(b, got, buf, 10, 90), 0);
    ck_assert_mem_eq(got, src, 90);
    b->err[0] = 0;
    ck_assert_int_eq(b->ops->upload(b, buf, 11, src, 90), -1);
    ck_assert_str_ne(be_error(b), "");
    ck_assert_int_eq(b->ops->upload(b, buf, SIZE_MAX, src, 2), -1);
    ck_assert_int_eq(b->ops->download(b, got, buf, 0, 101), -1);
    ck_assert_int_eq(b->ops->download(b, got, buf, 101, 0), -1);
    float w[4] = {1, 2, 3, 4};
    struct be_buf *wb = b->ops->weight(b, w, 2, 2);
    ck_assert_int_eq(b->ops->upload(b, wb, 0, w, sizeof(w)), -1); /* packed: not the caller's */
    b->ops->free(b, wb);
    b->ops->free(b, buf);
    b->ops->free(b, NULL);
    be_destroy(b);
}
END_TEST

/* -------------------------------------------------------------- matmul -- */

/* y = x · w^T by the op, against a double reference; tolerance relative to
 * the sum of |terms| of each element. */
static void matmul_check(struct be *b, int m, int n, int k)
{
    float *x = rand_floats((size_t)m * k), *w = rand_floats((size_t)n * k);
    struct be_buf *xb = buf_of(b, x, (size_t)m * k), *yb = buf_nan(b, (size_t)m * n);
    struct be_buf *wb = b->ops->weight(b, w, n, k);
    ck_assert_ptr_nonnull(wb);
    ck_assert_int_eq(b->ops->matmul(b, xb, wb, yb, m, n, k), 0);
    float *y = fetch(b, yb, (size_t)m * n);
    double *want = malloc(sizeof(double) * m * n), *scale = malloc(sizeof(double) * m * n);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0, a = 0;
            for (int kk = 0; kk < k; kk++) {
                double t = (double)x[(size_t)i * k + kk] * w[(size_t)j * k + kk];
                s += t;
                a += fabs(t);
            }
            want[(size_t)i * n + j] = s;
            scale[(size_t)i * n + j] = a + 1e-30;
        }
    ck_close(y, want, scale, (size_t)m * n, 1e-5, "matmul");
    free(x), free(w), free(y), free(want), free(scale);
    b->ops->free(b, xb), b->ops->free(b, yb), b->ops->free(b, wb);
}

START_TEST(matmul_matches_reference_for_odd_shapes)
{
    rng_seed(1);
    /* partial panels, one row, k not a multiple of 8, k past one cache block */
    static const int shapes[][3] = {{1, 1, 1},    {5, 37, 19},   {13, 64, 576},
                                    {7, 200, 33}, {9, 48, 1100}, {100, 30, 70}};
    for (int avx2 = 0; avx2 <= 1; avx2++)
        for (int threads = 1; threads <= 3; threads += 2) {
            struct be *b = be_new(threads, avx2);
            for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
                matmul_check(b, shapes[i][0], shapes[i][1], shapes[i][2]);
            be_destroy(b);
        }
}
END_TEST

START_TEST(matmul_rejects_mismatched_weight_and_small_buffers)
{
    struct be *b = be_new(1, 1);
    float w[12] = {0};
    struct be_buf *wb = b->ops->weight(b, w, 3, 4), *x = b->ops->alloc(b, 4 * 8);
    struct be_buf *y = b->ops->alloc(b, 4 * 6);
    ck_assert_int_eq(b->ops->matmul(b, x, wb, y, 2, 3, 4), 0);
    ck_assert_int_eq(b->ops->matmul(b, x, wb, y, 2, 4, 3), -1);
    ck_assert_int_eq(b->ops->matmul(b, x, x, y, 2, 3, 4), -1);  /* not a weight */
    ck_assert_int_eq(b->ops->matmul(b, x, wb, y, 3, 3, 4), -1); /* x too small */
    ck_assert_ptr_null(b->ops->weight(b, w, 0, 4));
    b->ops->free(b, wb), b->ops->free(b, x), b->ops->free(b, y);
    be_destroy(b);
}
END_TEST

/* Rows of x computed in batches of every size in ms, starting at shifting
 * offsets of a 100-row x, must equal the same rows of one 100-row call bit
 * for bit. */
static void matmul_invariance(struct be *b, int n, int k)
{
    static const int ms[] = {1, 2, 3, 7, 8, 16, 31, 32, 64, 100};
    const int M = 100;
    float *x = rand_floats((size_t)M * k), *w = rand_floats((size_t)n * k);
    struct be_buf *xb = buf_of(b, x, (size_t)M * k), *wb = b->ops->weight(b, w, n, k);
    struct be_buf *yb = b->ops->alloc(b, sizeof(float) * M * n);
    struct be_buf *xs = b->ops->alloc(b, sizeof(float) * M * k);
    ck_assert_int_eq(b->ops->matmul(b, xb, wb, yb, M, n, k), 0);
    float *all = fetch(b, yb, (size_t)M * n), *part = malloc(sizeof(float) * M * n);
    for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
        int m = ms[i], off = (m * 37) % (M - m + 1);
        ck_assert_int_eq(b->ops->upload(b, xs, 0, x + (size_t)off * k, sizeof(float) * m * k), 0);
        ck_assert_int_eq(b->ops->matmul(b, xs, wb, yb, m, n, k), 0);
        ck_assert_int_eq(b->ops->download(b, part, yb, 0, sizeof(float) * m * n), 0);
        for (int r = 0; r < m; r++)
            ck_assert_msg(
                memcmp(part + (size_t)r * n, all + (size_t)(off + r) * n, sizeof(float) * n) == 0,
                "n=%d k=%d: row %d differs in a batch of %d", n, k, off + r, m);
    }
    free(x), free(w), free(all), free(part);
    b->ops->free(b, xb), b->ops->free(b, wb), b->ops->free(b, yb), b->ops->free(b, xs);
}

START_TEST(matmul_row_is_bit_identical_in_any_batch)
{
    rng_seed(2);
    static const int shapes[][2] = {{576, 576}, {1536, 576}, {576, 1536}, {49152, 576}};
    struct be *b = be_new(2, 1);
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        matmul_invariance(b, shapes[i][0], shapes[i][1]);
    be_destroy(b);
}
END_TEST

START_TEST(matmul_is_bit_identical_across_threads_and_in_portable_kernel)
{
    rng_seed(3);
    for (int avx2 = 0; avx2 <= 1; avx2++) {
        struct be *b = be_new(3, avx2);
        matmul_invariance(b, 200, 96);
        be_destroy(b);
    }
    /* Same call on 1 and 3 threads. */
    int m = 40, n = 96, k = 70;
    float *x = rand_floats((size_t)m * k), *w = rand_floats((size_t)n * k), *y[2];
    for (int i = 0; i < 2; i++) {
        struct be *b = be_new(i ? 3 : 1, 1);
        struct be_buf *xb = buf_of(b, x, (size_t)m * k), *wb = b->ops->weight(b, w, n, k);
        struct be_buf *yb = buf_nan(b, (size_t)m * n);
        ck_assert_int_eq(b->ops->matmul(b, xb, wb, yb, m, n, k), 0);
        y[i] = fetch(b, yb, (size_t)m * n);
        b->ops->free(b, xb), b->ops->free(b, wb), b->ops->free(b, yb);
        be_destroy(b);
    }
    ck_assert_mem_eq(y[0], y[1], sizeof(float) * m * n);
    free(x), free(w), free(y[0]), free(y[1]);
}
END_TEST

/* ---------------------------------------------------------- element-wise -- */

START_TEST(embed_copies_the_batch_tokens_rows)
{
    rng_seed(4);
    struct be *b = be_new(2, 1);
    int vocab = 50, n = 40;
    float *tab = rand_floats((size_t)vocab * n);
    struct be_buf *tb_w = b->ops->weight(b, tab, vocab, n);
    struct tb t;
    tb_init(&t);
    int32_t blocks[2] = {0, 1};
    tb_seq(&t, blocks, 2, 0, 20, 16);
    tb_seq(&t, blocks, 1, 3, 1, 16);
    ck_assert_int_eq(tb_set(b, &t), 0);
    struct be_buf *out = buf_nan(b, (size_t)t.n_tokens * n);
    ck_assert_int_eq(b->ops->embed(b, tb_w, out, n), 0);
    float *got = fetch(b, out, (size_t)t.n_tokens * n);
    for (int i = 0; i < t.n_tokens; i++)
        ck_assert_mem_eq(got + (size_t)i * n, tab + (size_t)t.tokens[i] * n, sizeof(float) * n);
    t.tokens[3] = vocab; /* out of the table */
    ck_assert_int_eq(tb_set(b, &t), 0);
    ck_assert_int_eq(b->ops->embed(b, tb_w, out, n), -1);
    free(tab), free(got);
    b->ops->free(b, tb_w), b->ops->free(b, out);
    be_destroy(b);
}
END_TEST

static void rmsnorm_check(struct be *b, int m, int n, int alias, int weight)
{
    float *x = rand_floats((size_t)m * n), *w = rand_floats((size_t)n), eps = 1e-5f;
    struct be_buf *xb = buf_of(b, x, (size_t)m * n);
    struct be_buf *wb = weight ? b->ops->weight(b, w, 1, n) : buf_of(b, w, n);
    struct be_buf *yb = alias ? xb : buf_nan(b, (size_t)m * n);
    ck_assert_int_eq(b->ops->rmsnorm(b, xb, wb, yb, m, n, eps), 0);
    float *y = fetch(b, yb, (size_t)m * n);
    double *want = malloc(sizeof(double) * m * n);
    for (int r = 0; r < m; r++) {
        double ss = 0;
        for (int i = 0; i < n; i++)
            ss += (double)x[(size_t)r * n + i] * x[(size_t)r * n + i];
        double inv = 1.0 / sqrt(ss / n + eps);
        for (int i = 0; i < n; i++)
            want[(size_t)r * n + i] = x[(size_t)r * n + i] * inv * w[i];
    }
    ck_close(y, want, NULL, (size_t)m * n, 1e-5, "rmsnorm");
    free(x), free(w), free(y), free(want);
    b->ops->free(b, xb), b->ops->free(b, wb);
    if (!alias)
        b->ops->free(b, yb);
}

START_TEST(rmsnorm_matches_reference_in_place_or_not)
{
    rng_seed(5);
    struct be *b = be_new(2, 1);
    rmsnorm_check(b, 7, 576, 0, 1);
    rmsnorm_check(b, 70, 576, 1, 1);
    rmsnorm_check(b, 3, 33, 0, 0);
    be_destroy(b);
}
END_TEST

START_TEST(add_and_swiglu_match_reference)
{
    rng_seed(6);
    for (int avx2 = 0; avx2 <= 1; avx2++) {
        struct be *b = be_new(2, avx2);
        size_t sizes[] = {1, 13, 100003};
        for (size_t si = 0; si < 3; si++) {
            size_t n = sizes[si];
            float *x = rand_floats(n), *y = rand_floats(n);
            for (size_t i = 0; i < n; i++)
                x[i] *= 12.0f; /* silu over a wide range, both tails */
            struct be_buf *xb = buf_of(b, x, n), *yb = buf_of(b, y, n), *ob = buf_nan(b, n);
            double *want = malloc(sizeof(double) * n);
            ck_assert_int_eq(b->ops->swiglu(b, xb, yb, ob, n), 0);
            float *got = fetch(b, ob, n);
            for (size_t i = 0; i < n; i++)
                want[i] = x[i] / (1.0 + exp(-(double)x[i])) * y[i];
            ck_close(got, want, NULL, n, 1e-5, "swiglu");
            free(got);
            /* in place: out is gate */
            ck_assert_int_eq(b->ops->swiglu(b, xb, yb, xb, n), 0);
            got = fetch(b, xb, n);
            ck_close(got, want, NULL, n, 1e-5, "swiglu in place");
            free(got);
            ck_assert_int_eq(b->ops->upload(b, xb, 0, x, sizeof(float) * n), 0);
            ck_assert_int_eq(b->ops->add(b, xb, yb, n), 0);
            got = fetch(b, xb, n);
            for (size_t i = 0; i < n; i++)
                want[i] = x[i] + y[i];
            ck_close(got, want, NULL, n, 0.0, "add");
            ck_assert_int_eq(b->ops->add(b, xb, yb, n + 1), -1);
            free(x), free(y), free(got), free(want);
            b->ops->free(b, xb), b->ops->free(b, yb), b->ops->free(b, ob);
        }
        be_destroy(b);
    }
}
END_TEST

START_TEST(rope_rotates_pairs_by_position_times_frequency)
{
    rng_seed(7);
    struct be *b = be_new(2, 1);
    int n_heads = 3, hd = 64, half = hd / 2;
    float inv[32];
    for (int i = 0; i < half; i++)
        inv[i] = (float)pow(10000.0, -2.0 * i / hd);
    struct be_buf *ib = buf_of(b, inv, half);
    struct tb t;
    tb_init(&t);
    int32_t blocks[300];
    for (int i = 0; i < 300; i++)
        blocks[i] = i;
    tb_seq(&t, blocks, 2, 5, 20, 16);
    tb_seq(&t, blocks, 300, 4000, 2, 16);
    ck_assert_int_eq(tb_set(b, &t), 0);
    size_t n = (size_t)t.n_tokens * n_heads * hd;
    float *x = rand_floats(n);
    for (int neox = 0; neox <= 1; neox++) {
        struct be_buf *xb = buf_of(b, x, n);
        ck_assert_int_eq(b->ops->rope(b, xb, n_heads, hd, ib, neox), 0);
        float *got = fetch(b, xb, n);
        double *want = malloc(sizeof(double) * n);
        for (int tk = 0; tk < t.n_tokens; tk++)
            for (int h = 0; h < n_heads; h++)
                for (int i = 0; i < half; i++) {
                    size_t base = ((size_t)tk * n_heads + h) * hd;
                    size_t i0 = base + (neox ? i : 2 * i),
                           i1 = base + (neox ? i + half : 2 * i + 1);
                    double th = (float)t.pos[tk] * inv[i];
                    want[i0] = x[i0] * cos(th) - x[i1] * sin(th);
                    want[i1] = x[i0] * sin(th) + x[i1] * cos(th);
                }
        ck_close(got, want, NULL, n, 1e-5, neox ? "rope neox" : "rope");
        free(got), free(want);
        b->ops->free(b, xb);
    }
    /* A new inv_freq in the same buffer is seen. */
    for (int i = 0; i < half; i++)
        inv[i] = 0;
    ck_assert_int_eq(b->ops->upload(b, ib, 0, inv, sizeof(inv)), 0);
    struct be_buf *xb = buf_of(b, x, n);
    ck_assert_int_eq(b->ops->rope(b, xb, n_heads, hd, ib, 0), 0);
    float *got = fetch(b, xb, n);
    ck_assert_mem_eq(got, x, sizeof(float) * n);
    ck_assert_int_eq(b->ops->rope(b, xb, n_heads, 63, ib, 0), -1);
    free(got), free(x);
    b->ops->free(b, xb), b->ops->free(b, ib);
    be_destroy(b);
}
END_TEST

START_TEST(gather_rows_takes_the_output_rows)
{
    rng_seed(8);
    struct be *b = be_new(1, 1);
    struct tb t;
    tb_init(&t);
    int32_t blocks[1] = {0};
    tb_seq(&t, blocks, 1, 0, 10, 16);
    t.n_out = 3;
    t.out_rows[0] = 9, t.out_rows[1] = 0, t.out_rows[2] = 4;
    ck_assert_int_eq(tb_set(b, &t), 0);
    int n = 17;
    float *x = rand_floats((size_t)10 * n);
    struct be_buf *xb = buf_of(b, x, (size_t)10 * n), *yb = buf_nan(b, (size_t)3 * n);
    ck_assert_int_eq(b->ops->gather_rows(b, xb, yb, n), 0);
    float *got = fetch(b, yb, (size_t)3 * n);
    for (int i = 0; i < 3; i++)
        ck_assert_mem_eq(got + (size_t)i * n, x + (size_t)t.out_rows[i] * n, sizeof(float) * n);
    free(x), free(got);
    b->ops->free(b, xb), b->ops->free(b, yb);
    be_destroy(b);
}
END_TEST

/* ------------------------------------------------- KV pool and attention -- */

#define A_LAYERS 2
#define A_BLOCKS 24
#define A_LAYER  1

/* Heads and sizes of an attention test. */
struct att_shape {
    int n_heads, n_kv, hd, bs;
};

/* The model's shape: GQA 9/3, head_dim 64, blocks of 16. */
static const struct att_shape SMOL = {9, 3, 64, 16};

/* A pool of random contents, its host mirror and a shuffled block order. */
struct att_env {
    struct att_shape sh;
    struct be *b;
    struct be_kv_geom g;
    struct be_buf *pool;
    float *host;
    size_t elems;
    int32_t perm[A_BLOCKS];
};

static void env_init(struct att_env *e, struct att_shape sh, int threads, int avx2)
{
    e->sh = sh;
    e->b = be_new(threads, avx2);
    struct be_kv_geom g = {A_LAYERS, sh.n_kv, sh.hd, sh.bs};
    e->g = g;
    e->elems = be_kv_block_elems(&g) * A_BLOCKS;
    e->host = rand_floats(e->elems);
    e->pool = buf_of(e->b, e->host, e->elems);
    for (int i = 0; i < A_BLOCKS; i++)
        e->perm[i] = i;
    for (int i = A_BLOCKS - 1; i > 0; i--) {
        int j = (int)((frand() + 1.0f) * 0.5f * (i + 1)) % (i + 1);
        int32_t tmp = e->perm[i];
        e->perm[i] = e->perm[j];
        e->perm[j] = tmp;
    }
}

static void env_free(struct att_env *e)
{
    e->b->ops->free(e->b, e->pool);
    be_destroy(e->b);
    free(e->host);
}

/* Where head h's K (kv 0) or V (kv 1) of `slot` lives, by the layout
 * [block][layer][K|V][kv_head][slot][head_dim], computed here from scratch. */
static size_t kv_at(const struct att_env *e, int slot, int layer, int kv, int h)
{
    size_t bs = e->sh.bs, hd = e->sh.hd, nkv = e->sh.n_kv;
    size_t block = (size_t)A_LAYERS * 2 * nkv * bs * hd;
    return (size_t)slot / bs * block + (((size_t)layer * 2 + kv) * nkv + h) * bs * hd +
           (size_t)slot % bs * hd;
}

/* The mixed batch: a 37-token chunk at positions 20..56 (earlier positions
 * already in the pool), decodes at 0 and 70; tables from the shuffled
 * order. */
static void mixed_batch(const struct att_env *e, struct tb *t)
{
    static const int first[3] = {20, 0, 70}, count[3] = {37, 1, 1};
    int used = 0;
    tb_init(t);
    for (int s = 0; s < 3; s++) {
        int nb = (first[s] + count[s] - 1) / e->sh.bs + 1;
        tb_seq(t, e->perm + used, nb, first[s], count[s], e->sh.bs);
        used += nb;
    }
}

/* Writes random k, v of the batch through kv_write and into the mirror. */
static void env_write(struct att_env *e, const struct tb *t)
{
    int nkv = e->sh.n_kv, hd = e->sh.hd;
    size_t n = (size_t)t->n_tokens * nkv * hd;
    float *k = rand_floats(n), *v = rand_floats(n);
    struct be_buf *kb = buf_of(e->b, k, n), *vb = buf_of(e->b, v, n);
    ck_assert_int_eq(e->b->ops->kv_write(e->b, e->pool, &e->g, A_LAYER, kb, vb), 0);
    for (int i = 0; i < t->n_tokens; i++)
        for (int h = 0; h < nkv; h++) {
            size_t src = ((size_t)i * nkv + h) * hd;
            memcpy(e->host + kv_at(e, t->slot[i], A_LAYER, 0, h), k + src, sizeof(float) * hd);
            memcpy(e->host + kv_at(e, t->slot[i], A_LAYER, 1, h), v + src, sizeof(float) * hd);
        }
    free(k), free(v);
    e->b->ops->free(e->b, kb), e->b->ops->free(e->b, vb);
}

/* Naive causal attention in double over the mirror. */
static double *att_ref(const struct att_env *e, const struct tb *t, const float *q, float scale)
{
    int nh = e->sh.n_heads, hd = e->sh.hd, bs = e->sh.bs;
    double *out = calloc((size_t)t->n_tokens * nh * hd, sizeof(double));
    double sc[1024];
    for (int s = 0; s < t->n_seqs; s++)
        for (int i = t->q_off[s]; i < t->q_off[s + 1]; i++)
            for (int hq = 0; hq < nh; hq++) {
                const float *qr = q + ((size_t)i * nh + hq) * hd;
                int p = t->pos[i], hk = hq / (nh / e->sh.n_kv);
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j <= p; j++) {
                    int slot = t->tables[t->bt_off[s] + j / bs] * bs + j % bs;
                    const float *kr = e->host + kv_at(e, slot, A_LAYER, 0, hk);
                    double d = 0;
                    for (int x = 0; x < hd; x++)
                        d += (double)qr[x] * kr[x];
                    sc[j] = d * scale;
                    mx = fmax(mx, sc[j]);
                }
                double *o = out + ((size_t)i * nh + hq) * hd;
                for (int j = 0; j <= p; j++) {
                    int slot = t->tables[t->bt_off[s] + j / bs] * bs + j % bs;
                    const float *vr = e->host + kv_at(e, slot, A_LAYER, 1, hk);
                    double w = exp(sc[j] - mx);
                    sum += w;
                    for (int x = 0; x < hd; x++)
                        o[x] += w * vr[x];
                }
                for (int x = 0; x < hd; x++)
                    o[x] /= sum;
            }
    return out;
}

/* Runs attention of q (host) over the pool for batch t; returns the output. */
static float *att_run(struct att_env *e, const struct tb *t, const float *q, float scale)
{
    size_t n = (size_t)t->n_tokens * e->sh.n_heads * e->sh.hd;
    struct be *b = e->b;
    ck_assert_int_eq(tb_set(b, t), 0);
    struct be_buf *qb = buf_of(b, q, n), *ob = buf_nan(b, n);
    ck_assert_msg(b->ops->attention(b, qb, e->pool, &e->g, A_LAYER, e->sh.n_heads, scale, ob) == 0,
                  "%s", be_error(b));
    float *out = fetch(b, ob, n);
    b->ops->free(b, qb), b->ops->free(b, ob);
    return out;
}

START_TEST(kv_write_places_rows_block_major_at_slots)
{
    rng_seed(9);
    struct att_env e;
    env_init(&e, SMOL, 2, 1);
    struct tb t;
    mixed_batch(&e, &t);
    ck_assert_int_eq(tb_set(e.b, &t), 0);
    env_write(&e, &t);
    float *pool = fetch(e.b, e.pool, e.elems);
    ck_assert_mem_eq(pool, e.host, sizeof(float) * e.elems);
    free(pool);
    env_free(&e);
}
END_TEST

/* The mixed batch against the reference, in both kernels, on 1 and 2
 * threads, for the model's shape and for shapes that reach the kernels'
 * remainders: groups of 4 and 1, head_dim 40 (not whole 32-lane chunks) and
 * 20 (not whole vectors), blocks of 12 (not whole vectors). */
START_TEST(attention_over_mixed_paged_batch_matches_reference)
{
    static const struct att_shape shapes[] = {{9, 3, 64, 16}, {8, 2, 40, 12}, {4, 4, 20, 16}};
    float scale = 0.125f;
    for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++)
        for (int avx2 = 0; avx2 <= 1; avx2++)
            for (int threads = 1; threads <= 2; threads++) {
                rng_seed(10);
                struct att_env e;
                env_init(&e, shapes[si], threads, avx2);
                struct tb t;
                mixed_batch(&e, &t);
                ck_assert_int_eq(tb_set(e.b, &t), 0);
                env_write(&e, &t);
                size_t n = (size_t)t.n_tokens * e.sh.n_heads * e.sh.hd;
                float *q = rand_floats(n);
                for (size_t i = 0; i < n; i++)
                    q[i] *= 3.0f; /* peaky softmax: the max subtraction matters */
                float *got = att_run(&e, &t, q, scale);
                double *want = att_ref(&e, &t, q, scale);
                char what[64];
                snprintf(what, sizeof(what), "attention shape %zu avx2 %d threads %d", si, avx2,
                         threads);
                ck_close(got, want, NULL, n, 1e-5, what);
                free(q), free(got), free(want);
                env_free(&e);
            }
}
END_TEST

/* A token's attention output is bit-identical alone, in the mixed batch and
 * in a batch of 20 more sequences. */
START_TEST(attention_row_is_bit_identical_in_any_batch)
{
    float scale = 0.125f;
    for (int avx2 = 0; avx2 <= 1; avx2++) {
        rng_seed(11);
        struct att_env e;
        env_init(&e, SMOL, 2, avx2);
        struct tb t;
        mixed_batch(&e, &t);
        ck_assert_int_eq(tb_set(e.b, &t), 0);
        env_write(&e, &t);
        size_t row = (size_t)SMOL.n_heads * SMOL.hd, n = t.n_tokens * row;
        float *q = rand_floats(n), *mixed = att_run(&e, &t, q, scale);

        /* Alone: the chunk's token at position 40 (row 20), the decodes at 0
         * (row 37) and 70 (row 38), each with its sequence's table. */
        const struct {
            int seq, row;
        } alone[] = {{0, 20}, {1, 37}, {2, 38}};
        for (int i = 0; i < 3; i++) {
            int s = alone[i].seq;
            struct tb one;
            tb_init(&one);
            tb_seq(&one, t.tables + t.bt_off[s], t.bt_off[s + 1] - t.bt_off[s], t.pos[alone[i].row],
                   1, SMOL.bs);
            float *got = att_run(&e, &one, q + alone[i].row * row, scale);
            ck_assert_mem_eq(got, mixed + alone[i].row * row, sizeof(float) * row);
            free(got);
        }

        /* Big: the mixed batch then 20 decodes sharing the last table. */
        struct tb big = t;
        float *qbig = rand_floats((size_t)(t.n_tokens + 20) * row);
        memcpy(qbig, q, sizeof(float) * n);
        for (int i = 0; i < 20; i++)
            tb_seq(&big, t.tables + t.bt_off[2], t.bt_off[3] - t.bt_off[2], 3 * i + 10, 1, SMOL.bs);
        float *got = att_run(&e, &big, qbig, scale);
        ck_assert_mem_eq(got, mixed, sizeof(float) * n);
        free(q), free(qbig), free(mixed), free(got);
        env_free(&e);
    }
}
END_TEST

/* ---------------------------------------------------------- validation -- */

START_TEST(batch_rejects_inconsistent_metadata)
{
    struct att_env e;
    rng_seed(12);
    env_init(&e, SMOL, 1, 1);
    struct be *b = e.b;
    struct tb good, t;
    mixed_batch(&e, &good);
    ck_assert_int_eq(tb_set(b, &good), 0);

    t = good, t.q_off[0] = 1;
    ck_assert_int_eq(tb_set(b, &t), -1);
    ck_assert_str_ne(be_error(b), "");
    t = good, t.q_off[3] = t.n_tokens - 1;
    ck_assert_int_eq(tb_set(b, &t), -1);
    t = good, t.q_off[1] = 40; /* past q_off[2] */
    ck_assert_int_eq(tb_set(b, &t), -1);
    t = good, t.pos[5] = t.pos[4];
    ck_assert_int_eq(tb_set(b, &t), -1);
    t = good, t.pos[0] = -1;
    ck_assert_int_eq(tb_set(b, &t), -1);
    t = good, t.bt_off[2] = t.bt_off[1] - 1;
    ck_assert_int_eq(tb_set(b, &t), -1);
    t = good, t.tables[2] = -3;
    ck_assert_int_eq(tb_set(b, &t), -1);
    t = good, t.n_out = 1, t.out_rows[0] = t.n_tokens;
    ck_assert_int_eq(tb_set(b, &t), -1);
    t = good, t.n_tokens = -1;
    ck_assert_int_eq(tb_set(b, &t), -1);

    /* After a refused batch nothing runs on the old one. */
    size_t n = (size_t)good.n_tokens * SMOL.n_kv * SMOL.hd;
    struct be_buf *k = buf_nan(b, n), *v = buf_nan(b, n);
    ck_assert_int_eq(b->ops->kv_write(b, e.pool, &e.g, 0, k, v), -1);

    /* What needs the geometry is refused by kv_write and attention. */
    struct be_buf *q = buf_nan(b, (size_t)good.n_tokens * SMOL.n_heads * SMOL.hd);
    struct be_buf *o = buf_nan(b, (size_t)good.n_tokens * SMOL.n_heads * SMOL.hd);
    struct tb bad[4];
    bad[0] = good, bad[0].slot[3]++;                                  /* slot off its table */
    bad[1] = good, bad[1].bt_off[3]--;                                /* position 70 has no block */
    bad[2] = good, bad[2].tables[good.bt_off[2]] = A_BLOCKS;          /* outside the pool */
    bad[3] = good, bad[3].tables[good.bt_off[2] + 70 / SMOL.bs] ^= 1; /* decode's block moved */
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(tb_set(b, &bad[i]), 0);
        ck_assert_msg(b->ops->kv_write(b, e.pool, &e.g, 0, k, v) == -1, "case %d", i);
        ck_assert_msg(b->ops->attention(b, q, e.pool, &e.g, 0, SMOL.n_heads, 1.0f, o) == -1,
                      "case %d", i);
    }
    ck_assert_int_eq(tb_set(b, &good), 0);
    ck_assert_int_eq(b->ops->kv_write(b, e.pool, &e.g, A_LAYERS, k, v), -1);
    ck_assert_int_eq(b->ops->attention(b, q, e.pool, &e.g, 0, 8, 1.0f, o), -1);
    ck_assert_int_eq(b->ops->kv_write(b, e.pool, &e.g, 0, k, v), 0);
    ck_assert_int_eq(b->ops->attention(b, q, e.pool, &e.g, 0, SMOL.n_heads, 1.0f, o), 0);
    b->ops->free(b, k), b->ops->free(b, v), b->ops->free(b, q), b->ops->free(b, o);
    env_free(&e);
}
END_TEST

START_TEST(batch_copies_the_callers_arrays)
{
    rng_seed(13);
    struct att_env e;
    env_init(&e, SMOL, 1, 1);
    struct tb t, saved;
    mixed_batch(&e, &t);
    saved = t;
    ck_assert_int_eq(tb_set(e.b, &t), 0);
    memset(&t, 0xff, sizeof(t)); /* the caller reuses its arrays */
    env_write(&e, &saved);
    float *pool = fetch(e.b, e.pool, e.elems);
    ck_assert_mem_eq(pool, e.host, sizeof(float) * e.elems);
    free(pool);
    env_free(&e);
}
END_TEST

START_TEST(copy_blocks_copies_whole_blocks_and_checks_ids)
{
    rng_seed(14);
    struct att_env e;
    env_init(&e, SMOL, 1, 1);
    struct be *b = e.b;
    size_t be = be_kv_block_elems(&e.g);
    int32_t src[3] = {3, 5, 2}, dst[3] = {7, 1, 2};
    ck_assert_int_eq(b->ops->copy_blocks(b, e.pool, &e.g, src, dst, 3), 0);
    for (int i = 0; i < 3; i++)
        memcpy(e.host + dst[i] * be, e.host + src[i] * be, sizeof(float) * be);
    float *pool = fetch(b, e.pool, e.elems);
    ck_assert_mem_eq(pool, e.host, sizeof(float) * e.elems);
    int32_t bad_src[2] = {0, A_BLOCKS}, bad_dst[2] = {1, -1};
    ck_assert_int_eq(b->ops->copy_blocks(b, e.pool, &e.g, bad_src, dst, 2), -1);
    ck_assert_int_eq(b->ops->copy_blocks(b, e.pool, &e.g, src, bad_dst, 2), -1);
    free(pool);
    pool = fetch(b, e.pool, e.elems);
    ck_assert_mem_eq(pool, e.host, sizeof(float) * e.elems); /* nothing half-done */
    free(pool);
    ck_assert_int_eq(b->ops->sync(b), 0);
    env_free(&e);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("cpu_backend");
    TCase *tc = tcase_create("memory");
    tcase_add_test(tc, create_takes_thread_count_and_names_itself);
    tcase_add_test(tc, alloc_is_zeroed_and_transfers_are_bounds_checked);
    suite_add_tcase(s, tc);

    tc = tcase_create("matmul");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, matmul_matches_reference_for_odd_shapes);
    tcase_add_test(tc, matmul_rejects_mismatched_weight_and_small_buffers);
    tcase_add_test(tc, matmul_row_is_bit_identical_in_any_batch);
    tcase_add_test(tc, matmul_is_bit_identical_across_threads_and_in_portable_kernel);
    suite_add_tcase(s, tc);

    tc = tcase_create("elementwise");
    tcase_add_test(tc, embed_copies_the_batch_tokens_rows);
    tcase_add_test(tc, rmsnorm_matches_reference_in_place_or_not);
    tcase_add_test(tc, add_and_swiglu_match_reference);
    tcase_add_test(tc, rope_rotates_pairs_by_position_times_frequency);
    tcase_add_test(tc, gather_rows_takes_the_output_rows);
    suite_add_tcase(s, tc);

    tc = tcase_create("kv");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, kv_write_places_rows_block_major_at_slots);
    tcase_add_test(tc, attention_over_mixed_paged_batch_matches_reference);
    tcase_add_test(tc, attention_row_is_bit_identical_in_any_batch);
    tcase_add_test(tc, batch_rejects_inconsistent_metadata);
    tcase_add_test(tc, batch_copies_the_callers_arrays);
    tcase_add_test(tc, copy_blocks_copies_whole_blocks_and_checks_ids);
    suite_add_tcase(s, tc);
    return s;
}
