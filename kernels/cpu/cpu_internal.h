/*
 * kernels/cpu/cpu_internal.h — what the files of the CPU backend share: the
 * backend and buffer structs, the copied batch, and the SIMD helpers.
 *
 * The one idea: every result is batch-invariant.  Each output element is
 * computed by the same sequence of floating-point operations whatever else
 * shares the batch (how many rows, which thread, which tile), so a token's
 * logits do not depend on its neighbours.  Kernels come in two flavours, an
 * AVX2+FMA one chosen at run time and a portable C one; a process uses one
 * of them for everything, so results are invariant within a machine.
 */
#ifndef LLMD_KERNELS_CPU_INTERNAL_H
#define LLMD_KERNELS_CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

#if defined(__x86_64__) || defined(__i386__)
#define CPU_HAVE_X86 1
#include <immintrin.h>
#define CPU_AVX2 __attribute__((target("avx2,fma")))
#else
#define CPU_HAVE_X86 0
#endif

/* Weights are packed in panels of CPU_NR rows: panel p holds rows
 * p*CPU_NR .. p*CPU_NR + CPU_NR-1 as [cols][CPU_NR], so the matmul kernel
 * reads 16 output features for one input element with one contiguous load.
 * Rows past the end of the matrix are zero. */
#define CPU_NR 16

struct be_buf {
    void *data; /* 64-byte aligned, zeroed at allocation */
    size_t bytes;
    uint64_t id;       /* unique per content version: changes on every upload */
    int is_weight;     /* data is in the packed panel format */
    size_t rows, cols; /* a weight's logical shape */
    float *plain;      /* weights of fewer than CPU_NR rows (norms): also row-major */
};

/* The current batch, copied out of the caller's arrays. */
struct cpu_batch {
    int n_tokens, n_seqs, n_out;
    int32_t *tokens, *pos, *slot; /* [n_tokens] */
    int32_t *q_off, *bt_off;      /* [n_seqs + 1] */
    int32_t *block_tables;        /* [bt_off[n_seqs]] */
    int32_t *out_rows;            /* [n_out] */
    int32_t *mem;                 /* one allocation behind all the arrays */
    size_t cap;                   /* int32s in mem */
    int valid;                    /* a batch has been set */
    uint64_t gen;                 /* changes with every batch() */
};

struct be_cpu {
    struct be base;
    int avx2;         /* use the AVX2+FMA kernels */
    uint64_t next_id; /* source of be_buf ids */
    struct cpu_batch bt;
    /* cos/sin of the batch's positions for one inv_freq buffer */
    float *rope_cs;
    size_t rope_cap;
    uint64_t rope_buf_id, rope_gen;
    int rope_half;
    /* per-thread scratch of attention */
    float *att_scratch;
    size_t att_scratch_floats;
    /* attention work list: one entry per (sequence, query tile) */
    int32_t *att_tiles;
    size_t att_tiles_cap;
};

static inline struct be_cpu *cpu_of(struct be *b)
{
    return (struct be_cpu *)b;
}

/* Sets b->err from a printf format and returns -1. */
int cpu_fail(struct be_cpu *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* -1 with a message unless buf holds at least n floats. */
int cpu_need(struct be_cpu *c, const struct be_buf *buf, size_t n, const char *what);
/* -1 with a message unless a batch is set. */
int cpu_need_batch(struct be_cpu *c);
/* Checks the batch against a KV geometry and pool: the slot of every token is
 * its position's place in its block table, and every block that a token reads
 * lies inside the pool.  Also checks layer. */
int cpu_check_kv(struct be_cpu *c, const struct be_buf *kv, const struct be_kv_geom *g, int layer);
/* Threads to use for work of about `work` element-operations: 1 below the
 * size where waking a team costs more than it saves. */
int cpu_threads_for(const struct be_cpu *c, double work);
/* Scratch that holds at least n elements of size sz: old when it is big
 * enough, else a new 64-byte aligned block (old freed, contents not kept);
 * NULL when out of memory, with old and *cap left as they were. */
void *cpu_grow(void *old, size_t *cap, size_t n, size_t sz);

/* Weights and matmul (cpu_matmul.c). */
struct be_buf *cpu_weight(struct be *b, const float *src, size_t rows, size_t cols);
/* Copies row `row` of a packed weight to dst (cols floats). */
void cpu_weight_row(const struct be_buf *w, size_t row, float *dst);
int cpu_matmul(struct be *b, const struct be_buf *x, const struct be_buf *w, struct be_buf *y,
               int m, int n, int k);

/* Element-wise operations (cpu_elementwise.c). */
int cpu_embed(struct be *b, const struct be_buf *table, struct be_buf *out, int n);
int cpu_rmsnorm(struct be *b, const struct be_buf *x, const struct be_buf *w, struct be_buf *y,
                int m, int n, float eps);
int cpu_add(struct be *b, struct be_buf *x, const struct be_buf *y, size_t n);
int cpu_rope(struct be *b, struct be_buf *x, int n_heads, int head_dim,
             const struct be_buf *inv_freq, int neox);
int cpu_swiglu(struct be *b, const struct be_buf *gate, const struct be_buf *up, struct be_buf *out,
               size_t n);
int cpu_gather_rows(struct be *b, const struct be_buf *x, struct be_buf *y, int n);

/* Paged attention (cpu_attention.c). */
int cpu_attention(struct be *b, const struct be_buf *q, const struct be_buf *kv,
                  const struct be_kv_geom *g, int layer, int n_heads, float scale,
                  struct be_buf *out);

#if CPU_HAVE_X86
/* e^x for 8 floats: Cody-Waite reduction to r in [-ln2/2, ln2/2] and a
 * degree-6 polynomial (Cephes' coefficients), ~1 ulp; 0 below -87.3 and
 * +inf above 88.7, so a masked -inf score gives exactly 0. */
CPU_AVX2 static inline __m256 cpu_exp8(__m256 x)
{
    const __m256 hi = _mm256_set1_ps(88.7228f), lo = _mm256_set1_ps(-87.3365f);
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    __m256 over = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
    /* operands in this order so that a NaN passes through */
    x = _mm256_min_ps(hi, _mm256_max_ps(lo, x));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* 2^n by building the exponent; n is in [-126, 128]: split it in two
     * halves so that neither overflows the exponent field. */
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i h1 = _mm256_srai_epi32(ni, 1), h2 = _mm256_sub_epi32(ni, h1);
    __m256i bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h2, bias), 23));
    p = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    p = _mm256_andnot_ps(under, p);
    return _mm256_blendv_ps(p, _mm256_set1_ps(__builtin_inff()), over);
}

/* Sum of 8 lanes in a fixed order: ((0+1)+(2+3)) + ((4+5)+(6+7)). */
CPU_AVX2 static inline float cpu_hsum8(__m256 v)
{
    __m256 t = _mm256_hadd_ps(v, v); /* 0+1, 2+3, ., . | 4+5, 6+7, ., . */
    t = _mm256_hadd_ps(t, t);        /* (0+1)+(2+3) | (4+5)+(6+7) */
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
}
#endif

#endif
