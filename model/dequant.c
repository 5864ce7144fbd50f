/*
 * model/dequant.c — weight types of GGUF files and their conversion to f32.
 *
 * Quantised types store weights in fixed-size blocks: a few f16 scales and
 * packed small integers.  One table gives each type's block geometry; one
 * function per type turns whole blocks into floats, reading bytes (never
 * casting to packed structs) so any alignment and host byte order work.  The
 * arithmetic order matches the GGML reference (e.g. (d * sc) * q - dmin * m),
 * so results are bit-identical to it.
 */
#include <string.h>

#include "model/model.h"

#define QK   32  /* elements per block of the simple types */
#define QK_K 256 /* elements per super-block of the K types */

struct dq_info {
    const char *name;
    size_t elems;
    size_t bytes;
};

static const struct dq_info *dq_info(uint32_t type)
{
    static const struct dq_info f32 = {"F32", 1, 4};
    static const struct dq_info f16 = {"F16", 1, 2};
    static const struct dq_info bf16 = {"BF16", 1, 2};
    static const struct dq_info q4_0 = {"Q4_0", QK, 2 + QK / 2};
    static const struct dq_info q4_1 = {"Q4_1", QK, 2 + 2 + QK / 2};
    static const struct dq_info q8_0 = {"Q8_0", QK, 2 + QK};
    /* d, dmin, 12 bytes of packed 6-bit scales and mins, 4-bit quants */
    static const struct dq_info q4_k = {"Q4_K", QK_K, 2 + 2 + 12 + QK_K / 2};
    /* 4 low bits, 2 high bits, 16 int8 scales, d */
    static const struct dq_info q6_k = {"Q6_K", QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2};

    switch (type) {
    case DQ_F32:
        return &f32;
    case DQ_F16:
        return &f16;
    case DQ_BF16:
        return &bf16;
    case DQ_Q4_0:
        return &q4_0;
    case DQ_Q4_1:
        return &q4_1;
    case DQ_Q8_0:
        return &q8_0;
    case DQ_Q4_K:
        return &q4_k;
    case DQ_Q6_K:
        return &q6_k;
    default:
        return NULL;
    }
}

size_t dq_block_elems(uint32_t type)
{
    const struct dq_info *in = dq_info(type);
    return in ? in->elems : 0;
}

size_t dq_block_bytes(uint32_t type)
{
    const struct dq_info *in = dq_info(type);
    return in ? in->bytes : 0;
}

const char *dq_type_name(uint32_t type)
{
    const struct dq_info *in = dq_info(type);
    return in ? in->name : NULL;
}

size_t dq_row_bytes(uint32_t type, uint64_t n)
{
    const struct dq_info *in = dq_info(type);
    if (!in || n % in->elems != 0)
        return 0;
    uint64_t blocks = n / in->elems;
    if (blocks > SIZE_MAX / in->bytes)
        return 0;
    return (size_t)blocks * in->bytes;
}

/* ------------------------------------------------------------ scalar floats */

static float dq_bits_f32(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint32_t dq_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Branch-free so that row loops vectorise: move exponent and mantissa into
 * place and rebias the exponent (15 -> 127); inf/NaN get the top exponent
 * (payload kept).  Zeros and subnormals are m * 2^-24, exact in f32; both
 * results are computed and one is selected by mask. */
static inline float dq_half(uint16_t h)
{
    uint32_t em = h & 0x7fffu;
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t is_special = 0u - (uint32_t)(em >= 0x7c00u);
    uint32_t is_small = 0u - (uint32_t)(em < 0x0400u);
    uint32_t normal = (em << 13) + ((127u - 15u) << 23) + (is_special & ((128u - 16u) << 23));
    uint32_t small = dq_f32_bits((float)(int32_t)em * 0x1p-24f);
    return dq_bits_f32(((small & is_small) | (normal & ~is_small)) | sign);
}

float dq_f16_to_f32(uint16_t h)
{
    return dq_half(h);
}

/* bf16 is the top half of an f32, so widening is a shift. */
float dq_bf16_to_f32(uint16_t h)
{
    return dq_bits_f32((uint32_t)h << 16);
}

static uint16_t dq_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static float dq_le_f16(const uint8_t *p)
{
    return dq_half(dq_le16(p));
}

/* --------------------------------------------------------- unquantised */

static void dq_f32_row(const uint8_t *restrict s, float *restrict y, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (n)
        memcpy(y, s, n * sizeof *y);
#else
    for (size_t i = 0; i < n; i++, s += 4)
        y[i] = dq_bits_f32((uint32_t)s[0] | (uint32_t)s[1] << 8 | (uint32_t)s[2] << 16 |
                           (uint32_t)s[3] << 24);
#endif
}

/* Rows of 2-byte floats go in chunks of a fixed 16, a trip count that -O2's
 * cautious vectoriser accepts, then a scalar tail. */
#define DQ_CHUNK 16

static void dq_f16_row(const uint8_t *restrict s, float *restrict y, size_t n)
{
    size_t i = 0;
    for (; i + DQ_CHUNK <= n; i += DQ_CHUNK)
        for (int j = 0; j < DQ_CHUNK; j++)
            y[i + j] = dq_le_f16(s + 2 * (i + j));
    for (; i < n; i++)
        y[i] = dq_le_f16(s + 2 * i);
}

static void dq_bf16_row(const uint8_t *restrict s, float *restrict y, size_t n)
{
    size_t i = 0;
    for (; i + DQ_CHUNK <= n; i += DQ_CHUNK)
        for (int j = 0; j < DQ_CHUNK; j++)
            y[i + j] = dq_bf16_to_f32(dq_le16(s + 2 * (i + j)));
    for (; i < n; i++)
        y[i] = dq_bf16_to_f32(dq_le16(s + 2 * i));
}

/* ------------------------------------------------------- 32-element blocks */

/* Q4_0: f16 d, then 16 bytes: low nibbles are elements 0..15, high nibbles
 * 16..31, each nibble an offset-8 signed value. */
static void dq_q4_0_block(const uint8_t *restrict b, float *restrict y)
{
    float d = dq_le_f16(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < QK / 2; j++) {
        y[j] = (float)((qs[j] & 0x0f) - 8) * d;
        y[j + QK / 2] = (float)((qs[j] >> 4) - 8) * d;
    }
}

/* Q4_1: f16 d, f16 m, then nibbles as in Q4_0 but unsigned: d * q + m. */
static void dq_q4_1_block(const uint8_t *restrict b, float *restrict y)
{
    float d = dq_le_f16(b);
    float m = dq_le_f16(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < QK / 2; j++) {
        y[j] = (float)(qs[j] & 0x0f) * d + m;
        y[j + QK / 2] = (float)(qs[j] >> 4) * d + m;
    }
}

/* Q8_0: f16 d, then 32 int8 values: d * q. */
static void dq_q8_0_block(const uint8_t *restrict b, float *restrict y)
{
    float d = dq_le_f16(b);
    const int8_t *qs = (const int8_t *)(b + 2);
    for (int j = 0; j < QK; j++)
        y[j] = (float)qs[j] * d;
}

/* ------------------------------------------------------ 256-element blocks */

/* The 8 six-bit scales and mins of a Q4_K block share 12 bytes: sub-blocks
 * 0..3 use the low 6 bits of bytes 0..7; sub-blocks 4..7 take their low 4
 * bits from bytes 8..11 and their top 2 bits from the spare bits of 0..7. */
static void dq_q4_k_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Q4_K: f16 d, f16 dmin, 12 scale bytes, 128 bytes of nibbles.  Each 64
 * elements take 32 bytes: low nibbles first (one sub-block), then high
 * nibbles (the next); element = d*sc * q - dmin*m. */
static void dq_q4_k_block(const uint8_t *restrict b, float *restrict y)
{
    float d = dq_le_f16(b);
    float dmin = dq_le_f16(b + 2);
    const uint8_t *scales = b + 4;
    const uint8_t *q = b + 16;
    for (int is = 0; is < 8; is += 2, q += 32, y += 64) {
        uint8_t sc, m;
        dq_q4_k_scale_min(is, scales, &sc, &m);
        float d1 = d * sc, m1 = dmin * m;
        dq_q4_k_scale_min(is + 1, scales, &sc, &m);
        float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; l++) {
            y[l] = d1 * (float)(q[l] & 0x0f) - m1;
            y[l + 32] = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

/* Q6_K: 128 bytes of low nibbles, 64 bytes of 2-bit high parts, 16 int8
 * scales, f16 d.  Each half of 128 elements uses 64 ql bytes, 32 qh bytes and
 * 8 scales (one per 16 elements); element = d*sc * (q - 32). */
static void dq_q6_k_block(const uint8_t *restrict b, float *restrict y)
{
    const uint8_t *ql = b;
    const uint8_t *qh = b + QK_K / 2;
    const int8_t *sc = (const int8_t *)(b + QK_K / 2 + QK_K / 4);
    float d = dq_le_f16(b + QK_K / 2 + QK_K / 4 + QK_K / 16);
    for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8, y += 128) {
        for (int l0 = 0; l0 < 32; l0 += 16) { /* one scale per 16 elements */
            int is = l0 / 16;
            float s1 = d * (float)sc[is], s2 = d * (float)sc[is + 2];
            float s3 = d * (float)sc[is + 4], s4 = d * (float)sc[is + 6];
            for (int l = l0; l < l0 + 16; l++) {
                int q1 = ((ql[l] & 0x0f) | ((qh[l] >> 0 & 3) << 4)) - 32;
                int q2 = ((ql[l + 32] & 0x0f) | ((qh[l] >> 2 & 3) << 4)) - 32;
                int q3 = ((ql[l] >> 4) | ((qh[l] >> 4 & 3) << 4)) - 32;
                int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4)) - 32;
                y[l] = s1 * (float)q1;
                y[l + 32] = s2 * (float)q2;
                y[l + 64] = s3 * (float)q3;
                y[l + 96] = s4 * (float)q4;
            }
        }
    }
}

typedef void (*dq_block_fn)(const uint8_t *b, float *y);

static void dq_blocks(dq_block_fn fn, const uint8_t *s, float *y, size_t n_blocks, size_t bytes,
                      size_t elems)
{
    for (size_t i = 0; i < n_blocks; i++)
        fn(s + i * bytes, y + i * elems);
}

/* src and dst never overlap: saying so (restrict) is what lets the compiler
 * vectorise the loops above once they are inlined here. */
int dq_dequant(uint32_t type, const void *restrict src, float *restrict dst, size_t n)
{
    const struct dq_info *in = dq_info(type);
    if (!in || n % in->elems != 0)
        return -1;
    const uint8_t *s = src;
    size_t nb = n / in->elems;
    switch (type) {
    case DQ_F32:
        dq_f32_row(s, dst, n);
        return 0;
    case DQ_F16:
        dq_f16_row(s, dst, n);
        return 0;
    case DQ_BF16:
        dq_bf16_row(s, dst, n);
        return 0;
    case DQ_Q4_0:
        dq_blocks(dq_q4_0_block, s, dst, nb, in->bytes, in->elems);
        return 0;
    case DQ_Q4_1:
        dq_blocks(dq_q4_1_block, s, dst, nb, in->bytes, in->elems);
        return 0;
    case DQ_Q8_0:
        dq_blocks(dq_q8_0_block, s, dst, nb, in->bytes, in->elems);
        return 0;
    case DQ_Q4_K:
        dq_blocks(dq_q4_k_block, s, dst, nb, in->bytes, in->elems);
        return 0;
    case DQ_Q6_K:
        dq_blocks(dq_q6_k_block, s, dst, nb, in->bytes, in->elems);
        return 0;
    default:
        return -1;
    }
}
