/*
 * tests/unit/test_dequant.c — weight types and their conversion to f32.
 *
 * Each quantised block here is packed by hand from chosen logical values
 * (per the GGML block layouts), so the expected floats come from the format's
 * formula, never from the code under test.  Scales are powers of two so that
 * every expected value is exact.  A last test compares a tensor of the real
 * model with values computed independently by the Python gguf package.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

/* f16 bit patterns used as block scales */
#define H_0_125 0x3000
#define H_0_25  0x3400
#define H_0_5   0x3800
#define H_1     0x3C00
#define H_M1    0xBC00

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xff);
    p[1] = (uint8_t)(v >> 8);
}

/* ------------------------------------------------------------ f16 and bf16 */

START_TEST(f16_special_values_convert_exactly)
{
    ck_assert_uint_eq(bits_of(dq_f16_to_f32(0x0000)), 0x00000000u);
    ck_assert_uint_eq(bits_of(dq_f16_to_f32(0x8000)), 0x80000000u);  /* -0 keeps its sign */
    ck_assert(dq_f16_to_f32(0x0001) == ldexpf(1.0f, -24));           /* smallest subnormal */
    ck_assert(dq_f16_to_f32(0x03ff) == 1023.0f * ldexpf(1.0f, -24)); /* largest subnormal */
    ck_assert(dq_f16_to_f32(0x8001) == -ldexpf(1.0f, -24));
    ck_assert(dq_f16_to_f32(0x0400) == ldexpf(1.0f, -14)); /* smallest normal */
    ck_assert(dq_f16_to_f32(0x3c00) == 1.0f);
    ck_assert(dq_f16_to_f32(0xc000) == -2.0f);
    ck_assert(dq_f16_to_f32(0x3555) == 0.333251953125f);
    ck_assert(dq_f16_to_f32(0x7bff) == 65504.0f); /* max */
    ck_assert(dq_f16_to_f32(0xfbff) == -65504.0f);
    ck_assert(isinf(dq_f16_to_f32(0x7c00)) && dq_f16_to_f32(0x7c00) > 0);
    ck_assert(isinf(dq_f16_to_f32(0xfc00)) && dq_f16_to_f32(0xfc00) < 0);
    ck_assert(isnan(dq_f16_to_f32(0x7e00)));
    ck_assert(isnan(dq_f16_to_f32(0x7c01))); /* signalling NaN stays a NaN */
    ck_assert(isnan(dq_f16_to_f32(0xfe00)));
    ck_assert_uint_eq(bits_of(dq_f16_to_f32(0x7e00)), 0x7fc00000u); /* payload kept */
}
END_TEST

/* Every one of the 65536 halves against the textbook definition. */
START_TEST(f16_every_value_matches_definition)
{
    for (uint32_t h = 0; h < 0x10000; h++) {
        int sign = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023;
        float got = dq_f16_to_f32((uint16_t)h);
        if (e == 31) {
            ck_assert_msg(m ? isnan(got) : isinf(got), "h=%04x", h);
            ck_assert_int_eq(!!signbit(got), sign);
            continue;
        }
        double mag = e ? ldexp(1.0 + m / 1024.0, e - 15) : ldexp((double)m, -24);
        double want = sign ? -mag : mag;
        ck_assert_msg((double)got == want && !!signbit(got) == sign, "h=%04x", h);
    }
}
END_TEST

START_TEST(bf16_is_the_top_half_of_f32)
{
    ck_assert(dq_bf16_to_f32(0x3f80) == 1.0f);
    ck_assert(dq_bf16_to_f32(0xc040) == -3.0f);
    ck_assert(dq_bf16_to_f32(0x4049) == 3.140625f);
    ck_assert_uint_eq(bits_of(dq_bf16_to_f32(0x8000)), 0x80000000u);
    ck_assert(dq_bf16_to_f32(0x0001) == ldexpf(1.0f, -133)); /* subnormal */
    ck_assert(isinf(dq_bf16_to_f32(0x7f80)));
    ck_assert(isnan(dq_bf16_to_f32(0x7fc0)));
}
END_TEST

/* ----------------------------------------------------------------- geometry */

START_TEST(block_geometry_matches_ggml)
{
    ck_assert_uint_eq(dq_block_elems(DQ_F32), 1);
    ck_assert_uint_eq(dq_block_bytes(DQ_F32), 4);
    ck_assert_uint_eq(dq_block_bytes(DQ_F16), 2);
    ck_assert_uint_eq(dq_block_bytes(DQ_BF16), 2);
    ck_assert_uint_eq(dq_block_elems(DQ_Q4_0), 32);
    ck_assert_uint_eq(dq_block_bytes(DQ_Q4_0), 18);
    ck_assert_uint_eq(dq_block_bytes(DQ_Q4_1), 20);
    ck_assert_uint_eq(dq_block_bytes(DQ_Q8_0), 34);
    ck_assert_uint_eq(dq_block_elems(DQ_Q4_K), 256);
    ck_assert_uint_eq(dq_block_bytes(DQ_Q4_K), 144);
    ck_assert_uint_eq(dq_block_elems(DQ_Q6_K), 256);
    ck_assert_uint_eq(dq_block_bytes(DQ_Q6_K), 210);
    ck_assert_str_eq(dq_type_name(DQ_Q4_1), "Q4_1");
    ck_assert_str_eq(dq_type_name(DQ_BF16), "BF16");
    ck_assert_str_eq(dq_type_name(DQ_Q6_K), "Q6_K");
}
END_TEST

START_TEST(unknown_types_have_no_geometry)
{
    uint32_t unknown[] = {4, 5, 6, 7, 9, 10, 11, 13, 15, 29, 31, 99, 0xffffffffu};
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
        ck_assert_uint_eq(dq_block_elems(unknown[i]), 0);
        ck_assert_uint_eq(dq_block_bytes(unknown[i]), 0);
        ck_assert_ptr_null(dq_type_name(unknown[i]));
        ck_assert_uint_eq(dq_row_bytes(unknown[i], 256), 0);
    }
}
END_TEST

START_TEST(row_bytes_needs_whole_blocks)
{
    ck_assert_uint_eq(dq_row_bytes(DQ_F32, 3), 12);
    ck_assert_uint_eq(dq_row_bytes(DQ_F16, 5), 10);
    ck_assert_uint_eq(dq_row_bytes(DQ_Q4_1, 64), 40);
    ck_assert_uint_eq(dq_row_bytes(DQ_Q4_1, 576), 18 * 20);
    ck_assert_uint_eq(dq_row_bytes(DQ_Q4_0, 33), 0);
    ck_assert_uint_eq(dq_row_bytes(DQ_Q8_0, 16), 0);
    ck_assert_uint_eq(dq_row_bytes(DQ_Q4_K, 512), 288);
    ck_assert_uint_eq(dq_row_bytes(DQ_Q6_K, 256), 210);
    ck_assert_uint_eq(dq_row_bytes(DQ_Q6_K, 128), 0);
    ck_assert_uint_eq(dq_row_bytes(DQ_F32, UINT64_MAX / 2), 0); /* bytes overflow */
}
END_TEST

START_TEST(dequant_refuses_unknown_type_and_partial_blocks)
{
    uint8_t src[64] = {0};
    float dst[64];
    ck_assert_int_eq(dq_dequant(99, src, dst, 32), -1);
    ck_assert_int_eq(dq_dequant(DQ_Q8_0, src, dst, 31), -1);
    ck_assert_int_eq(dq_dequant(DQ_Q8_0, src, dst, 0), 0);
}
END_TEST

/* ---------------------------------------------------------- plain formats */

START_TEST(f32_f16_bf16_rows_are_little_endian)
{
    uint8_t f32[8] = {0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x10, 0xc0}; /* 1.5, -2.25 */
    uint8_t f16[6] = {0x00, 0x3c, 0x00, 0xb8, 0x01, 0x00};             /* 1, -0.5, 2^-24 */
    uint8_t bf16[4] = {0x80, 0x3f, 0x40, 0xc0};                        /* 1, -3 */
    float y[3];
    ck_assert_int_eq(dq_dequant(DQ_F32, f32, y, 2), 0);
    ck_assert(y[0] == 1.5f && y[1] == -2.25f);
    ck_assert_int_eq(dq_dequant(DQ_F16, f16, y, 3), 0);
    ck_assert(y[0] == 1.0f && y[1] == -0.5f && y[2] == ldexpf(1.0f, -24));
    ck_assert_int_eq(dq_dequant(DQ_BF16, bf16, y, 2), 0);
    ck_assert(y[0] == 1.0f && y[1] == -3.0f);
}
END_TEST

/* ------------------------------------------------------- 32-element blocks */

/* Packs 32 nibbles as Q4_0/Q4_1 store them: byte j holds element j in its
 * low nibble and element j+16 in its high nibble. */
static void pack_nibbles(uint8_t *qs, const int *q)
{
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)(q[j] | (q[j + 16] << 4));
}

START_TEST(q4_0_is_d_times_q_minus_8)
{
    uint8_t b[2 * 18];
    int q[32];
    float y[64];
    for (int i = 0; i < 32; i++)
        q[i] = (i * 5 + 3 + i / 16 * 7) % 16; /* q[j] != q[j + 16] */
    put16(b, H_0_5);
    pack_nibbles(b + 2, q);
    put16(b + 18, H_M1); /* second block: d = -1, all nibbles 15 */
    memset(b + 20, 0xff, 16);
    ck_assert_int_eq(dq_dequant(DQ_Q4_0, b, y, 64), 0);
    for (int i = 0; i < 32; i++)
        ck_assert_msg(y[i] == 0.5f * (float)(q[i] - 8), "i=%d", i);
    for (int i = 32; i < 64; i++)
        ck_assert(y[i] == -7.0f);
}
END_TEST

START_TEST(q4_1_is_d_times_q_plus_m)
{
    uint8_t b[20];
    int q[32];
    float y[32];
    for (int i = 0; i < 32; i++)
        q[i] = (i * 7 + i / 16 * 5) % 16; /* q[j] != q[j + 16] */
    put16(b, H_0_25);
    put16(b + 2, H_M1);
    pack_nibbles(b + 4, q);
    ck_assert_int_eq(dq_dequant(DQ_Q4_1, b, y, 32), 0);
    for (int i = 0; i < 32; i++)
        ck_assert_msg(y[i] == 0.25f * (float)q[i] - 1.0f, "i=%d", i);
    ck_assert(y[0] == -1.0f);  /* q[0] = 0 */
    ck_assert(y[16] == 0.25f); /* q[16] = 117 % 16 = 5 */
}
END_TEST

START_TEST(q8_0_is_d_times_signed_byte)
{
    uint8_t b[34];
    float y[32];
    put16(b, H_0_125);
    for (int i = 0; i < 32; i++)
        b[2 + i] = (uint8_t)(int8_t)(i * 8 - 128); /* -128, -120, ... 120 */
    ck_assert_int_eq(dq_dequant(DQ_Q8_0, b, y, 32), 0);
    for (int i = 0; i < 32; i++)
        ck_assert_msg(y[i] == 0.125f * (float)(i * 8 - 128), "i=%d", i);
    ck_assert(y[0] == -16.0f);
}
END_TEST

/* ----------------------------------------------------- 256-element blocks */

/* Q4_K: d, dmin, 12 bytes of scales/mins, 128 bytes of nibbles.  Sub-block s
 * (elements 32s..32s+31) has 6-bit scale sc[s] and min m[s]; s < 4 sit in the
 * low 6 bits of bytes s and s+4, s >= 4 in byte s+4 (low nibble: scale, high:
 * min) plus the top 2 bits of bytes s-4 (scale) and s (min).  Nibbles: each
 * 32-byte chunk c holds sub-block 2c in its low and 2c+1 in its high nibbles. */
static void pack_q4_k(uint8_t *b, uint16_t d, uint16_t dmin, const int *sc, const int *m,
                      const int *q)
{
    put16(b, d);
    put16(b + 2, dmin);
    uint8_t *s = b + 4;
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
    uint8_t *qs = b + 16;
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++)
            qs[c * 32 + l] = (uint8_t)(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
}

START_TEST(q4_k_uses_six_bit_scales_and_mins)
{
    static const int sc[8] = {1, 2, 3, 4, 33, 50, 63, 17};
    static const int m[8] = {5, 0, 7, 9, 40, 20, 63, 31};
    uint8_t b[144];
    int q[256];
    float y[256];
    for (int i = 0; i < 256; i++)
        q[i] = (i * 11 + i / 32) % 16; /* differs from q[i + 32] */
    pack_q4_k(b, H_0_5, H_0_25, sc, m, q);
    ck_assert_int_eq(dq_dequant(DQ_Q4_K, b, y, 256), 0);
    for (int i = 0; i < 256; i++) {
        int s = i / 32;
        float want = 0.5f * (float)sc[s] * (float)q[i] - 0.25f * (float)m[s];
        ck_assert_msg(y[i] == want, "i=%d got %g want %g", i, y[i], want);
    }
}
END_TEST

/* Q6_K: ql[128], qh[64], int8 scales[16], d.  Element i has a 6-bit value and
 * scale i/16.  In each 128-element half h, element 32g+l (g = 0..3) takes
 * its low 4 bits from ql[64h + l + 32(g&1)] (low nibble for g < 2, high for
 * g >= 2) and its high 2 bits from bits 2g..2g+1 of qh[32h + l]. */
static void pack_q6_k(uint8_t *b, uint16_t d, const int *sc, const int *q)
{
    uint8_t *ql = b, *qh = b + 128;
    memset(b, 0, 210);
    for (int i = 0; i < 256; i++) {
        int h = i / 128, g = (i % 128) / 32, l = i % 32;
        int lo = q[i] & 15, hi = q[i] >> 4;
        ql[64 * h + l + 32 * (g & 1)] |= (uint8_t)(g < 2 ? lo : lo << 4);
        qh[32 * h + l] |= (uint8_t)(hi << (2 * g));
    }
    for (int k = 0; k < 16; k++)
        b[192 + k] = (uint8_t)(int8_t)sc[k];
    put16(b + 208, d);
}

START_TEST(q6_k_is_d_times_signed_scale_times_q_minus_32)
{
    int sc[16], q[256];
    uint8_t b[2 * 210];
    float y[512];
    for (int k = 0; k < 16; k++)
        sc[k] = k * 9 - 70; /* negative and positive scales */
    for (int i = 0; i < 256; i++)
        q[i] = (i * 37 + 5 + i / 64) % 64; /* differs from q[i + 32], q[i + 64] */
    pack_q6_k(b, H_0_5, sc, q);
    for (int i = 0; i < 256; i++)
        q[i] = 63 - q[i];
    pack_q6_k(b + 210, H_1, sc, q); /* a second block, to check the stride */
    ck_assert_int_eq(dq_dequant(DQ_Q6_K, b, y, 512), 0);
    for (int i = 0; i < 256; i++) {
        float want0 = 0.5f * (float)sc[i / 16] * (float)(63 - q[i] - 32);
        float want1 = 1.0f * (float)sc[i / 16] * (float)(q[i] - 32);
        ck_assert_msg(y[i] == want0, "i=%d got %g want %g", i, y[i], want0);
        ck_assert_msg(y[256 + i] == want1, "i=%d got %g want %g", 256 + i, y[256 + i], want1);
    }
}
END_TEST

/* ------------------------------------------------------------ real model */

static const char *model_path(void)
{
    const char *p = getenv("LLMD_MODEL");
    return p && *p ? p : "models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

struct ref_value {
    size_t index;
    double value;
};

/* Dequantises a whole tensor of the real model and compares elements with
 * values from gguf.quants.dequantize (Python gguf package), flat row-major
 * indices into the tensor. */
static void check_tensor(const char *name, uint32_t type, const struct ref_value *ref, size_t n_ref)
{
    struct gguf_file *f;
    char err[256];
    ck_assert_msg(gguf_open(model_path(), &f, err, sizeof err) == 0, "%s: %s", model_path(), err);
    const struct gguf_tensor *t = gguf_tensor(f, name);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(t->type, type);
    float *y = malloc(t->n_elems * sizeof *y);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(dq_dequant(t->type, t->data, y, t->n_elems), 0);
    for (size_t i = 0; i < n_ref; i++) {
        ck_assert_uint_lt(ref[i].index, t->n_elems);
        ck_assert_msg(fabs(y[ref[i].index] - ref[i].value) <= 1e-6, "%s[%zu] = %.9g, want %.9g",
                      name, ref[i].index, y[ref[i].index], ref[i].value);
    }
    free(y);
    gguf_close(f);
}

START_TEST(model_q4_1_tensor_matches_python_gguf)
{
    /* blk.0.ffn_down.weight: Q4_1, ne = [1536, 576] */
    static const struct ref_value ref[] = {
        {0, -0.330810546875},    {1, 0.3460693359375},        {15, 0.4814453125},
        {16, -0.6015625},        {31, -0.06005859375},        {32, 0.0416259765625},
        {1000, 0.2454833984375}, {442375, 0.208892822265625}, {884735, -0.181365966796875},
    };
    check_tensor("blk.0.ffn_down.weight", DQ_Q4_1, ref, sizeof ref / sizeof *ref);
}
END_TEST

START_TEST(model_q8_0_tensor_matches_python_gguf)
{
    /* token_embd.weight: Q8_0, ne = [576, 49152] */
    static const struct ref_value ref[] = {
        {0, -0.10654449462890625},
        {31, -0.20040512084960938},
        {576003, -0.0179901123046875},
        {28311551, -0.0417022705078125},
    };
    check_tensor("token_embd.weight", DQ_Q8_0, ref, sizeof ref / sizeof *ref);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("dequant");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, f16_special_values_convert_exactly);
    tcase_add_test(tc, f16_every_value_matches_definition);
    tcase_add_test(tc, bf16_is_the_top_half_of_f32);
    tcase_add_test(tc, block_geometry_matches_ggml);
    tcase_add_test(tc, unknown_types_have_no_geometry);
    tcase_add_test(tc, row_bytes_needs_whole_blocks);
    tcase_add_test(tc, dequant_refuses_unknown_type_and_partial_blocks);
    tcase_add_test(tc, f32_f16_bf16_rows_are_little_endian);
    tcase_add_test(tc, q4_0_is_d_times_q_minus_8);
    tcase_add_test(tc, q4_1_is_d_times_q_plus_m);
    tcase_add_test(tc, q8_0_is_d_times_signed_byte);
    tcase_add_test(tc, q4_k_uses_six_bit_scales_and_mins);
    tcase_add_test(tc, q6_k_is_d_times_signed_scale_times_q_minus_32);
    tcase_add_test(tc, model_q4_1_tensor_matches_python_gguf);
    tcase_add_test(tc, model_q8_0_tensor_matches_python_gguf);
    suite_add_tcase(s, tc);
    return s;
}
