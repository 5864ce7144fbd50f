/*
 * tests/unit/test_gguf.c — the GGUF reader, on files built here in memory and
 * on the real model.
 *
 * A small builder writes GGUF byte by byte, so each test states exactly the
 * file it parses: a valid one with every metadata type, and hostile variants
 * that must each fail with a one-line message naming the problem.  Buffers
 * are copied to exact-size allocations so ASan sees any read past the end.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/model.h"

/* ------------------------------------------------------------------ builder */

struct gb {
    uint8_t *p;
    size_t n, cap;
};

static void gb_put(struct gb *g, const void *src, size_t n)
{
    if (g->n + n > g->cap) {
        g->cap = (g->n + n) * 2 + 64;
        g->p = realloc(g->p, g->cap);
        ck_assert_ptr_nonnull(g->p);
    }
    if (n)
        memcpy(g->p + g->n, src, n);
    g->n += n;
}

static void gb_le(struct gb *g, uint64_t v, int bytes)
{
    uint8_t b[8];
    for (int i = 0; i < bytes; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    gb_put(g, b, (size_t)bytes);
}

static void gb_u8(struct gb *g, uint8_t v)
{
    gb_le(g, v, 1);
}
static void gb_u32(struct gb *g, uint32_t v)
{
    gb_le(g, v, 4);
}
static void gb_u64(struct gb *g, uint64_t v)
{
    gb_le(g, v, 8);
}

static void gb_str(struct gb *g, const char *s)
{
    gb_u64(g, strlen(s));
    gb_put(g, s, strlen(s));
}

static void gb_header(struct gb *g, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    gb_put(g, "GGUF", 4);
    gb_u32(g, version);
    gb_u64(g, n_tensors);
    gb_u64(g, n_kv);
}

static void gb_key(struct gb *g, const char *key, uint32_t type)
{
    gb_str(g, key);
    gb_u32(g, type);
}

static void gb_kv_u32(struct gb *g, const char *key, uint32_t v)
{
    gb_key(g, key, GGUF_TYPE_UINT32);
    gb_u32(g, v);
}

static void gb_tensor(struct gb *g, const char *name, uint32_t n_dims, const uint64_t *ne,
                      uint32_t type, uint64_t offset)
{
    gb_str(g, name);
    gb_u32(g, n_dims);
    for (uint32_t d = 0; d < n_dims; d++)
        gb_u64(g, ne[d]);
    gb_u32(g, type);
    gb_u64(g, offset);
}

static void gb_pad(struct gb *g, size_t align)
{
    while (g->n % align)
        gb_u8(g, 0);
}

static void gb_free(struct gb *g)
{
    free(g->p);
}

/* Parses the first n bytes of g from an exact-size copy.  On success the
 * copy is handed back through *copy (the file points into it). */
static int parse_n(const struct gb *g, size_t n, struct gguf_file **f, char *err, size_t errlen,
                   void **copy)
{
    void *buf = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(buf);
    if (n)
        memcpy(buf, g->p, n);
    err[0] = '\0';
    int rc = gguf_parse(buf, n, f, err, errlen);
    if (rc == 0 && copy) {
        *copy = buf;
    } else {
        if (rc == 0)
            gguf_close(*f);
        free(buf);
    }
    return rc;
}

/* Asserts that g fails to parse with a one-line message containing frag (and
 * frag2 when not NULL). */
static void expect_error(const struct gb *g, const char *frag, const char *frag2)
{
    struct gguf_file *f = (struct gguf_file *)1;
    char err[256];
    int rc = parse_n(g, g->n, &f, err, sizeof err, NULL);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_null(f);
    ck_assert_msg(strncmp(err, "gguf: ", 6) == 0, "message '%s'", err);
    ck_assert_msg(strchr(err, '\n') == NULL, "multi-line message '%s'", err);
    ck_assert_msg(strstr(err, frag) != NULL, "message '%s' lacks '%s'", err, frag);
    if (frag2)
        ck_assert_msg(strstr(err, frag2) != NULL, "message '%s' lacks '%s'", err, frag2);
}

/* ------------------------------------------------------------ a valid file */

#define VALID_N_KV 18

/* A v2/v3 file with every metadata type, nested arrays, the given alignment
 * (0: no general.alignment key, default 32) and two tensors whose data ends
 * exactly at the end of the file. */
static void build_valid(struct gb *g, uint32_t version, uint32_t align)
{
    size_t al = align ? align : 32;
    gb_header(g, version, 2, align ? VALID_N_KV : VALID_N_KV - 1);
    gb_key(g, "t.u8", GGUF_TYPE_UINT8);
    gb_u8(g, 200);
    gb_key(g, "t.i8", GGUF_TYPE_INT8);
    gb_u8(g, 0xfb); /* -5 */
    gb_key(g, "t.u16", GGUF_TYPE_UINT16);
    gb_le(g, 60000, 2);
    gb_key(g, "t.i16", GGUF_TYPE_INT16);
    gb_le(g, (uint16_t)-300, 2);
    gb_kv_u32(g, "t.u32", 4000000000u);
    gb_key(g, "t.i32", GGUF_TYPE_INT32);
    gb_u32(g, (uint32_t)-7);
    gb_key(g, "t.f32", GGUF_TYPE_FLOAT32);
    gb_u32(g, 0x3fc00000u); /* 1.5 */
    gb_key(g, "t.bool", GGUF_TYPE_BOOL);
    gb_u8(g, 1);
    gb_key(g, "t.str", GGUF_TYPE_STRING);
    gb_str(g, "hello");
    gb_key(g, "t.u64", GGUF_TYPE_UINT64);
    gb_u64(g, 1ull << 40);
    gb_key(g, "t.i64", GGUF_TYPE_INT64);
    gb_u64(g, (uint64_t) - (1ll << 40));
    gb_key(g, "t.f64", GGUF_TYPE_FLOAT64);
    gb_u64(g, 0xc004000000000000ull); /* -2.5 */
    gb_key(g, "t.arr_i32", GGUF_TYPE_ARRAY);
    gb_u32(g, GGUF_TYPE_INT32);
    gb_u64(g, 3);
    gb_u32(g, 1);
    gb_u32(g, (uint32_t)-2);
    gb_u32(g, 3);
    gb_key(g, "t.arr_str", GGUF_TYPE_ARRAY);
    gb_u32(g, GGUF_TYPE_STRING);
    gb_u64(g, 2);
    gb_str(g, "a");
    gb_str(g, "");
    gb_key(g, "t.nested", GGUF_TYPE_ARRAY); /* [[7, 8], [], [[9]]] */
    gb_u32(g, GGUF_TYPE_ARRAY);
    gb_u64(g, 3);
    gb_u32(g, GGUF_TYPE_UINT16);
    gb_u64(g, 2);
    gb_le(g, 7, 2);
    gb_le(g, 8, 2);
    gb_u32(g, GGUF_TYPE_UINT8);
    gb_u64(g, 0);
    gb_u32(g, GGUF_TYPE_ARRAY);
    gb_u64(g, 1);
    gb_u32(g, GGUF_TYPE_UINT8);
    gb_u64(g, 1);
    gb_u8(g, 9);
    gb_key(g, "t.empty", GGUF_TYPE_ARRAY);
    gb_u32(g, GGUF_TYPE_FLOAT64);
    gb_u64(g, 0);
    gb_key(g, "general.architecture", GGUF_TYPE_STRING);
    gb_str(g, "llama");
    if (align)
        gb_kv_u32(g, "general.alignment", align);
    uint64_t ne_a[2] = {4, 2}, ne_b[1] = {32};
    gb_tensor(g, "a", 2, ne_a, DQ_F32, 0);
    gb_tensor(g, "b", 1, ne_b, DQ_Q8_0, al * ((32 + al - 1) / al));
    gb_pad(g, al);
    size_t data = g->n;
    for (int i = 0; i < 8; i++)
        gb_u32(g, 0x3f800000u + (uint32_t)i); /* "a": floats near 1 */
    gb_pad(g, al);
    ck_assert_uint_eq(g->n - data, al * ((32 + al - 1) / al));
    gb_le(g, 0x3c00, 2); /* "b": d = 1, q = 0..31 */
    for (int i = 0; i < 32; i++)
        gb_u8(g, (uint8_t)i);
}

static struct gguf_file *parse_ok(const struct gb *g, void **copy)
{
    struct gguf_file *f = NULL;
    char err[256];
    ck_assert_msg(parse_n(g, g->n, &f, err, sizeof err, copy) == 0, "%s", err);
    return f;
}

START_TEST(parses_every_metadata_type)
{
    struct gb g = {0};
    void *buf;
    build_valid(&g, 3, 64);
    struct gguf_file *f = parse_ok(&g, &buf);
    ck_assert_uint_eq(f->version, 3);
    ck_assert_uint_eq(f->n_kv, VALID_N_KV);
    const struct gguf_value *v;
    ck_assert((v = gguf_get(f, "t.u8")) && v->type == GGUF_TYPE_UINT8 && v->u64 == 200);
    ck_assert((v = gguf_get(f, "t.i8")) && v->type == GGUF_TYPE_INT8 && v->i64 == -5);
    ck_assert((v = gguf_get(f, "t.u16")) && v->u64 == 60000);
    ck_assert((v = gguf_get(f, "t.i16")) && v->i64 == -300);
    ck_assert((v = gguf_get(f, "t.u32")) && v->u64 == 4000000000u);
    ck_assert((v = gguf_get(f, "t.i32")) && v->i64 == -7);
    ck_assert((v = gguf_get(f, "t.f32")) && v->type == GGUF_TYPE_FLOAT32 && v->f64 == 1.5);
    ck_assert((v = gguf_get(f, "t.bool")) && v->type == GGUF_TYPE_BOOL && v->u64 == 1);
    ck_assert((v = gguf_get(f, "t.str")) && v->type == GGUF_TYPE_STRING);
    ck_assert(gguf_str_eq(v->str, "hello"));
    ck_assert((v = gguf_get(f, "t.u64")) && v->u64 == 1ull << 40);
    ck_assert((v = gguf_get(f, "t.i64")) && v->i64 == -(1ll << 40));
    ck_assert((v = gguf_get(f, "t.f64")) && v->type == GGUF_TYPE_FLOAT64 && v->f64 == -2.5);
    ck_assert((v = gguf_get(f, "t.arr_i32")) && v->type == GGUF_TYPE_ARRAY);
    ck_assert(v->arr.elem == GGUF_TYPE_INT32 && v->arr.n == 3);
    ck_assert(v->arr.items[0].i64 == 1 && v->arr.items[1].i64 == -2 && v->arr.items[2].i64 == 3);
    ck_assert((v = gguf_get(f, "t.arr_str")) && v->arr.n == 2);
    ck_assert(gguf_str_eq(v->arr.items[0].str, "a") && gguf_str_eq(v->arr.items[1].str, ""));
    ck_assert((v = gguf_get(f, "t.empty")) && v->arr.elem == GGUF_TYPE_FLOAT64 && v->arr.n == 0);
    ck_assert_ptr_null(gguf_get(f, "t.missing"));
    ck_assert_ptr_null(gguf_get(f, "t.u")); /* a prefix of a key is not the key */
    gguf_close(f);
    free(buf);
    gb_free(&g);
}
END_TEST

START_TEST(parses_nested_arrays)
{
    struct gb g = {0};
    void *buf;
    build_valid(&g, 3, 64);
    struct gguf_file *f = parse_ok(&g, &buf);
    const struct gguf_value *v = gguf_get(f, "t.nested");
    ck_assert(v && v->type == GGUF_TYPE_ARRAY && v->arr.elem == GGUF_TYPE_ARRAY);
    ck_assert_uint_eq(v->arr.n, 3);
    const struct gguf_value *a = &v->arr.items[0], *b = &v->arr.items[1], *c = &v->arr.items[2];
    ck_assert(a->type == GGUF_TYPE_ARRAY && a->arr.elem == GGUF_TYPE_UINT16 && a->arr.n == 2);
    ck_assert(a->arr.items[0].u64 == 7 && a->arr.items[1].u64 == 8);
    ck_assert(b->arr.elem == GGUF_TYPE_UINT8 && b->arr.n == 0);
    ck_assert(c->arr.elem == GGUF_TYPE_ARRAY && c->arr.n == 1);
    ck_assert(c->arr.items[0].arr.n == 1 && c->arr.items[0].arr.items[0].u64 == 9);
    gguf_close(f);
    free(buf);
    gb_free(&g);
}
END_TEST

START_TEST(typed_getters_convert_what_fits)
{
    struct gb g = {0};
    void *buf;
    build_valid(&g, 3, 64);
    struct gguf_file *f = parse_ok(&g, &buf);
    uint32_t u = 12345;
    float x = 0;
    ck_assert_int_eq(gguf_get_u32(f, "t.u8", &u), 0);
    ck_assert_uint_eq(u, 200);
    ck_assert_int_eq(gguf_get_u32(f, "t.u32", &u), 0);
    ck_assert_uint_eq(u, 4000000000u);
    u = 12345;
    ck_assert_int_eq(gguf_get_u32(f, "t.i32", &u), -1); /* negative */
    ck_assert_int_eq(gguf_get_u32(f, "t.u64", &u), -1); /* too big */
    ck_assert_int_eq(gguf_get_u32(f, "t.f32", &u), -1); /* not an integer */
    ck_assert_int_eq(gguf_get_u32(f, "t.str", &u), -1);
    ck_assert_int_eq(gguf_get_u32(f, "t.missing", &u), -1);
    ck_assert_uint_eq(u, 12345); /* untouched on failure */
    ck_assert_int_eq(gguf_get_f32(f, "t.f32", &x), 0);
    ck_assert(x == 1.5f);
    ck_assert_int_eq(gguf_get_f32(f, "t.f64", &x), 0);
    ck_assert(x == -2.5f);
    ck_assert_int_eq(gguf_get_f32(f, "t.i32", &x), 0);
    ck_assert(x == -7.0f);
    ck_assert_int_eq(gguf_get_f32(f, "t.u16", &x), 0);
    ck_assert(x == 60000.0f);
    x = 42;
    ck_assert_int_eq(gguf_get_f32(f, "t.arr_i32", &x), -1);
    ck_assert(x == 42);
    char *s = gguf_get_strdup(f, "general.architecture");
    ck_assert_str_eq(s, "llama");
    free(s);
    ck_assert_ptr_null(gguf_get_strdup(f, "t.u8"));
    ck_assert_ptr_null(gguf_get_strdup(f, "t.missing"));
    gguf_close(f);
    free(buf);
    gb_free(&g);
}
END_TEST

START_TEST(tensors_lie_at_aligned_offsets_in_the_data_section)
{
    uint32_t aligns[] = {0, 1, 8, 64, 256};
    for (size_t k = 0; k < sizeof aligns / sizeof *aligns; k++) {
        struct gb g = {0};
        void *buf;
        build_valid(&g, 3, aligns[k]);
        struct gguf_file *f = parse_ok(&g, &buf);
        uint64_t al = aligns[k] ? aligns[k] : 32;
        ck_assert_uint_eq(f->alignment, al);
        ck_assert_uint_eq(f->data_offset % al, 0);
        ck_assert_uint_eq(f->n_tensors, 2);
        const struct gguf_tensor *a = gguf_tensor(f, "a"), *b = gguf_tensor(f, "b");
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        ck_assert_ptr_null(gguf_tensor(f, "c"));
        ck_assert(a->n_dims == 2 && a->ne[0] == 4 && a->ne[1] == 2 && a->ne[2] == 1);
        ck_assert(a->type == DQ_F32 && a->n_elems == 8 && a->n_bytes == 32);
        ck_assert_ptr_eq(a->data, (const uint8_t *)buf + f->data_offset);
        ck_assert(b->type == DQ_Q8_0 && b->n_elems == 32 && b->n_bytes == 34);
        ck_assert_ptr_eq(b->data, (const uint8_t *)buf + f->data_offset + b->offset);
        ck_assert_uint_eq(f->data_offset + b->offset + b->n_bytes, f->size);
        float y[32];
        ck_assert_int_eq(dq_dequant(a->type, a->data, y, 8), 0);
        uint32_t bits;
        memcpy(&bits, &y[7], sizeof bits);
        ck_assert_uint_eq(bits, 0x3f800007u);
        ck_assert_int_eq(dq_dequant(b->type, b->data, y, 32), 0);
        ck_assert(y[0] == 0.0f && y[31] == 31.0f);
        gguf_close(f);
        free(buf);
        gb_free(&g);
    }
}
END_TEST

START_TEST(version_2_is_accepted)
{
    struct gb g = {0};
    void *buf;
    build_valid(&g, 2, 0);
    struct gguf_file *f = parse_ok(&g, &buf);
    ck_assert_uint_eq(f->version, 2);
    ck_assert_ptr_null(f->map);
    gguf_close(f);
    free(buf);
    gb_free(&g);
}
END_TEST

/* ----------------------------------------------------------- hostile files */

START_TEST(every_truncation_fails_cleanly)
{
    struct gb g = {0};
    build_valid(&g, 3, 64);
    for (size_t n = 0; n < g.n; n++) {
        struct gguf_file *f = (struct gguf_file *)1;
        char err[256];
        ck_assert_msg(parse_n(&g, n, &f, err, sizeof err, NULL) == -1, "prefix %zu parsed", n);
        ck_assert_ptr_null(f);
        ck_assert_msg(strncmp(err, "gguf: ", 6) == 0 && strlen(err) > 12, "prefix %zu: '%s'", n,
                      err);
    }
    struct gguf_file *f;
    char err[256];
    void *buf;
    ck_assert_int_eq(parse_n(&g, g.n, &f, err, sizeof err, &buf), 0);
    gguf_close(f);
    free(buf);
    gb_free(&g);
}
END_TEST

START_TEST(truncation_messages_name_the_part)
{
    struct gb v = {0};
    build_valid(&v, 3, 64);
    struct gguf_file *f;
    char err[256];
    ck_assert_int_eq(parse_n(&v, 10, &f, err, sizeof err, NULL), -1);
    ck_assert_str_eq(err, "gguf: truncated file: header ends past end of file");
    gb_free(&v);

    struct gb g = {0}; /* one key of 15 bytes, a u8 value and spare bytes */
    gb_header(&g, 3, 0, 1);
    gb_key(&g, "a.long.key.name", GGUF_TYPE_UINT8);
    gb_u8(&g, 1);
    ck_assert_int_eq(parse_n(&g, 24 + 8 + 10, &f, err, sizeof err, NULL), -1);
    ck_assert_str_eq(err, "gguf: truncated file: metadata key 0 ends past end of file");
    ck_assert_int_eq(parse_n(&g, 24 + 8 + 15 + 2, &f, err, sizeof err, NULL), -1);
    ck_assert_str_eq(err, "gguf: truncated file: type of metadata key 'a.long.key.name' ends "
                          "past end of file");
    ck_assert_int_eq(parse_n(&g, 24 + 8 + 15 + 4, &f, err, sizeof err, NULL), -1);
    ck_assert_str_eq(err, "gguf: truncated file: value of metadata key 'a.long.key.name' ends "
                          "past end of file");
    gb_free(&g);
}
END_TEST

START_TEST(truncated_tensor_info_names_index_and_tensor)
{
    struct gb g = {0};
    gb_header(&g, 3, 2, 0);
    uint64_t ne[2] = {64, 64};
    gb_tensor(&g, "x", 1, ne, DQ_F32, 0);
    gb_str(&g, "blk.0.attn_q.weight");
    gb_u32(&g, 2);
    gb_u64(&g, 64);
    /* the rest of the info is missing; pad so the count check passes */
    gb_u32(&g, 0);
    expect_error(&g, "truncated file: tensor info 1 ('blk.0.attn_q.weight') ends past end of file",
                 NULL);
    gb_free(&g);
}
END_TEST

START_TEST(bad_magic_is_rejected)
{
    struct gb g = {0};
    build_valid(&g, 3, 0);
    memcpy(g.p, "GGML", 4);
    expect_error(&g, "bad magic (not a GGUF file)", NULL);
    gb_free(&g);
}
END_TEST

START_TEST(version_1_and_unknown_versions_are_rejected)
{
    struct gb g = {0};
    gb_header(&g, 1, 0, 0);
    expect_error(&g, "version 1 is not supported", NULL);
    gb_free(&g);
    struct gb h = {0};
    gb_header(&h, 4, 0, 0);
    expect_error(&h, "unsupported GGUF version 4", NULL);
    gb_free(&h);
    struct gb b = {0};
    gb_header(&b, 0x03000000u, 0, 0);
    expect_error(&b, "big-endian", NULL);
    gb_free(&b);
}
END_TEST

START_TEST(giant_counts_are_rejected_before_allocating)
{
    struct gb g = {0};
    gb_header(&g, 3, 0, UINT64_MAX);
    gb_kv_u32(&g, "a", 1);
    expect_error(&g, "metadata keys cannot fit", NULL);
    gb_free(&g);

    struct gb t = {0};
    gb_header(&t, 3, 1ull << 62, 0);
    gb_kv_u32(&t, "a", 1);
    expect_error(&t, "tensor infos cannot fit", NULL);
    gb_free(&t);

    struct gb a = {0}; /* 1000 u32 items cannot fit in 16 bytes */
    gb_header(&a, 3, 0, 1);
    gb_key(&a, "arr", GGUF_TYPE_ARRAY);
    gb_u32(&a, GGUF_TYPE_UINT32);
    gb_u64(&a, 1000);
    gb_u64(&a, 0);
    gb_u64(&a, 0);
    expect_error(&a, "metadata key 'arr': array of 1000 items cannot fit", NULL);
    gb_free(&a);

    struct gb s = {0}; /* strings need 8 bytes each even when empty */
    gb_header(&s, 3, 0, 1);
    gb_key(&s, "arr", GGUF_TYPE_ARRAY);
    gb_u32(&s, GGUF_TYPE_STRING);
    gb_u64(&s, 3);
    gb_u64(&s, 0);
    gb_u64(&s, 0);
    expect_error(&s, "array of 3 items cannot fit", NULL);
    gb_free(&s);
}
END_TEST

START_TEST(giant_string_length_is_rejected)
{
    struct gb g = {0};
    gb_header(&g, 3, 0, 1);
    gb_u64(&g, UINT64_MAX - 3); /* key length that would wrap a pointer */
    gb_put(&g, "abcdefgh", 8);
    expect_error(&g, "truncated file: metadata key 0", NULL);
    gb_free(&g);

    struct gb v = {0};
    gb_header(&v, 3, 0, 1);
    gb_key(&v, "s", GGUF_TYPE_STRING);
    gb_u64(&v, 1ull << 63);
    gb_put(&v, "abcdefgh", 8);
    expect_error(&v, "value of metadata key 's' ends past end of file", NULL);
    gb_free(&v);
}
END_TEST

START_TEST(unknown_value_types_are_rejected)
{
    struct gb g = {0};
    gb_header(&g, 3, 0, 1);
    gb_key(&g, "k", 13);
    gb_u64(&g, 0);
    expect_error(&g, "metadata key 'k': unknown value type 13", NULL);
    gb_free(&g);

    struct gb a = {0};
    gb_header(&a, 3, 0, 1);
    gb_key(&a, "k", GGUF_TYPE_ARRAY);
    gb_u32(&a, 0x80000000u);
    gb_u64(&a, 1);
    gb_u64(&a, 0);
    expect_error(&a, "unknown array element type 2147483648", NULL);
    gb_free(&a);
}
END_TEST

START_TEST(arrays_nested_too_deep_are_rejected)
{
    for (int depth = 8; depth <= 9; depth++) {
        struct gb g = {0};
        gb_header(&g, 3, 0, 1);
        gb_key(&g, "deep", GGUF_TYPE_ARRAY);
        for (int i = 1; i < depth; i++) {
            gb_u32(&g, GGUF_TYPE_ARRAY);
            gb_u64(&g, 1);
        }
        gb_u32(&g, GGUF_TYPE_UINT8);
        gb_u64(&g, 1);
        gb_u8(&g, 42);
        if (depth == 9) {
            expect_error(&g, "metadata key 'deep': arrays nested deeper than 8", NULL);
        } else {
            void *buf;
            struct gguf_file *f = parse_ok(&g, &buf);
            const struct gguf_value *v = gguf_get(f, "deep");
            for (int i = 1; i < depth; i++)
                v = &v->arr.items[0];
            ck_assert(v->arr.elem == GGUF_TYPE_UINT8 && v->arr.items[0].u64 == 42);
            gguf_close(f);
            free(buf);
        }
        gb_free(&g);
    }
}
END_TEST

START_TEST(bad_alignment_is_rejected)
{
    uint32_t bad[] = {0, 3, 48, 0x80000001u};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct gb g = {0};
        gb_header(&g, 3, 0, 1);
        gb_kv_u32(&g, "general.alignment", bad[i]);
        expect_error(&g, "general.alignment", "not a power of two");
        gb_free(&g);
    }
    struct gb s = {0};
    gb_header(&s, 3, 0, 1);
    gb_key(&s, "general.alignment", GGUF_TYPE_STRING);
    gb_str(&s, "32");
    expect_error(&s, "general.alignment is not a 32-bit unsigned integer", NULL);
    gb_free(&s);
}
END_TEST

/* One tensor "w" described by the arguments, then `data` bytes of data. */
static void build_one_tensor(struct gb *g, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                             uint64_t offset, size_t data)
{
    gb_header(g, 3, 1, 0);
    gb_tensor(g, "w", n_dims, ne, type, offset);
    gb_pad(g, 32);
    for (size_t i = 0; i < data; i++)
        gb_u8(g, 0);
}

START_TEST(tensor_past_end_of_file_is_rejected)
{
    uint64_t ne[2] = {8, 4};
    struct gb g = {0};
    build_one_tensor(&g, 2, ne, DQ_F32, 0, 127); /* needs 128 */
    expect_error(&g, "tensor 'w'", "past end of file");
    gb_free(&g);

    struct gb o = {0};
    build_one_tensor(&o, 2, ne, DQ_F32, 32, 128); /* offset pushes it out */
    expect_error(&o, "tensor 'w'", "past end of file");
    gb_free(&o);

    struct gb h = {0};
    build_one_tensor(&h, 2, ne, DQ_F32, UINT64_MAX - 31, 128); /* offset + size wraps */
    expect_error(&h, "tensor 'w'", "past end of file");
    gb_free(&h);

    struct gb ok = {0};
    build_one_tensor(&ok, 2, ne, DQ_F32, 0, 128);
    void *buf;
    gguf_close(parse_ok(&ok, &buf));
    free(buf);
    gb_free(&ok);
}
END_TEST

START_TEST(unaligned_tensor_offset_is_rejected)
{
    uint64_t ne[1] = {8};
    struct gb g = {0};
    build_one_tensor(&g, 1, ne, DQ_F32, 4, 64);
    expect_error(&g, "tensor 'w': offset 4 is not a multiple of the alignment 32", NULL);
    gb_free(&g);
}
END_TEST

START_TEST(unknown_tensor_type_names_type_and_tensor)
{
    uint64_t ne[1] = {32};
    struct gb g = {0};
    build_one_tensor(&g, 1, ne, 99, 0, 256);
    expect_error(&g, "tensor 'w'", "type 99");
    gb_free(&g);
    struct gb q = {0};
    build_one_tensor(&q, 1, ne, 6 /* Q5_0: not supported */, 0, 256);
    expect_error(&q, "tensor 'w'", "type 6");
    gb_free(&q);
}
END_TEST

START_TEST(bad_dims_are_rejected)
{
    uint64_t big[2] = {1ull << 32, 1ull << 32}; /* 2^64 elements */
    struct gb g = {0};
    build_one_tensor(&g, 2, big, DQ_F32, 0, 64);
    expect_error(&g, "tensor 'w': element count overflows", NULL);
    gb_free(&g);

    uint64_t bytes[2] = {1ull << 31, 1ull << 31}; /* 2^62 elements: bytes overflow */
    struct gb b = {0};
    build_one_tensor(&b, 2, bytes, DQ_F32, 0, 64);
    expect_error(&b, "tensor 'w'", "overflow");
    gb_free(&b);

    uint64_t zero[2] = {8, 0};
    struct gb z = {0};
    build_one_tensor(&z, 2, zero, DQ_F32, 0, 64);
    expect_error(&z, "tensor 'w': dimension 1 has bad size 0", NULL);
    gb_free(&z);

    uint64_t one[4] = {1, 1, 1, 1};
    struct gb n0 = {0}, n5 = {0};
    build_one_tensor(&n0, 0, one, DQ_F32, 0, 64);
    expect_error(&n0, "tensor 'w': 0 dimensions", NULL);
    gb_header(&n5, 3, 1, 0);
    gb_str(&n5, "w");
    gb_u32(&n5, 5);
    for (int i = 0; i < 5; i++)
        gb_u64(&n5, 1);
    gb_u32(&n5, DQ_F32);
    gb_u64(&n5, 0);
    expect_error(&n5, "tensor 'w': 5 dimensions", NULL);
    gb_free(&n0);
    gb_free(&n5);

    uint64_t odd[1] = {33};
    struct gb q = {0};
    build_one_tensor(&q, 1, odd, DQ_Q4_1, 0, 256);
    expect_error(&q, "tensor 'w': ne[0] = 33 is not a multiple of Q4_1's block of 32", NULL);
    gb_free(&q);
}
END_TEST

START_TEST(duplicate_keys_and_tensor_names_are_rejected)
{
    struct gb g = {0};
    gb_header(&g, 3, 0, 3);
    gb_kv_u32(&g, "a.b", 1);
    gb_kv_u32(&g, "c", 2);
    gb_kv_u32(&g, "a.b", 3);
    expect_error(&g, "duplicate metadata key 'a.b'", NULL);
    gb_free(&g);

    struct gb t = {0};
    uint64_t ne[1] = {8};
    gb_header(&t, 3, 2, 0);
    gb_tensor(&t, "w", 1, ne, DQ_F32, 0);
    gb_tensor(&t, "w", 1, ne, DQ_F32, 32);
    gb_pad(&t, 32);
    for (int i = 0; i < 64; i++)
        gb_u8(&t, 0);
    expect_error(&t, "duplicate tensor name 'w'", NULL);
    gb_free(&t);
}
END_TEST

START_TEST(unprintable_names_are_sanitised_in_messages)
{
    struct gb g = {0};
    gb_header(&g, 3, 0, 2);
    gb_kv_u32(&g, "x\n\x01y", 1);
    gb_kv_u32(&g, "x\n\x01y", 1);
    expect_error(&g, "duplicate metadata key 'x??y'", NULL);
    gb_free(&g);
}
END_TEST

START_TEST(empty_buffer_and_small_error_buffers_are_safe)
{
    struct gguf_file *f = (struct gguf_file *)1;
    char err[8] = "xxxxxxx";
    ck_assert_int_eq(gguf_parse(NULL, 0, &f, err, sizeof err), -1);
    ck_assert_ptr_null(f);
    ck_assert_str_eq(err, "gguf: t"); /* truncated, still terminated */
    ck_assert_int_eq(gguf_parse("GG", 2, &f, NULL, 0), -1);
}
END_TEST

START_TEST(open_reports_missing_and_unmappable_files)
{
    struct gguf_file *f;
    char err[256];
    ck_assert_int_eq(gguf_open("/nonexistent/x.gguf", &f, err, sizeof err), -1);
    ck_assert_ptr_null(f);
    ck_assert_ptr_nonnull(strstr(err, "cannot open '/nonexistent/x.gguf'"));
    ck_assert_int_eq(gguf_open("/tmp", &f, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "not a regular file"));

    char path[] = "/tmp/test_gguf_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(gguf_open(path, &f, err, sizeof err), -1); /* empty */
    ck_assert_str_eq(err, "gguf: truncated file: header ends past end of file");
    struct gb g = {0};
    build_valid(&g, 3, 64);
    ck_assert_int_eq(write(fd, g.p, g.n), (ssize_t)g.n);
    close(fd);
    ck_assert_msg(gguf_open(path, &f, err, sizeof err) == 0, "%s", err);
    ck_assert_ptr_nonnull(f->map);
    ck_assert_uint_eq(f->size, g.n);
    ck_assert_ptr_nonnull(gguf_tensor(f, "b"));
    gguf_close(f);
    unlink(path);
    gb_free(&g);
    gguf_close(NULL);
}
END_TEST

/* -------------------------------------------------------------- real files */

static const char *model_path(void)
{
    const char *p = getenv("LLMD_MODEL");
    return p && *p ? p : "models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

/* Facts below were read from the file with the Python gguf package. */
START_TEST(real_model_has_expected_layout)
{
    struct gguf_file *f;
    char err[256];
    ck_assert_msg(gguf_open(model_path(), &f, err, sizeof err) == 0, "%s: %s", model_path(), err);
    ck_assert_uint_eq(f->version, 3);
    ck_assert_uint_eq(f->n_kv, 33);
    ck_assert_uint_eq(f->n_tensors, 272);
    ck_assert_uint_eq(f->alignment, 32);
    ck_assert_uint_eq(f->data_offset, 1785664);
    char *arch = gguf_get_strdup(f, "general.architecture");
    ck_assert_str_eq(arch, "llama");
    free(arch);
    uint32_t u;
    ck_assert_int_eq(gguf_get_u32(f, "llama.block_count", &u), 0);
    ck_assert_uint_eq(u, 30);
    ck_assert_int_eq(gguf_get_u32(f, "llama.embedding_length", &u), 0);
    ck_assert_uint_eq(u, 576);
    ck_assert_int_eq(gguf_get_u32(f, "llama.attention.head_count_kv", &u), 0);
    ck_assert_uint_eq(u, 3);
    float x;
    ck_assert_int_eq(gguf_get_f32(f, "llama.rope.freq_base", &x), 0);
    ck_assert(x == 100000.0f);
    const struct gguf_value *tok = gguf_get(f, "tokenizer.ggml.tokens");
    ck_assert(tok && tok->type == GGUF_TYPE_ARRAY && tok->arr.elem == GGUF_TYPE_STRING);
    ck_assert_uint_eq(tok->arr.n, 49152);
    const struct gguf_tensor *t = gguf_tensor(f, "token_embd.weight");
    ck_assert_ptr_nonnull(t);
    ck_assert(t->n_dims == 2 && t->ne[0] == 576 && t->ne[1] == 49152);
    ck_assert_uint_eq(t->type, DQ_Q8_0); /* the embedding is Q8_0 even in this Q4_1 file */
    ck_assert_uint_eq(t->offset, 0);
    t = gguf_tensor(f, "blk.0.ffn_down.weight");
    ck_assert(t && t->type == DQ_Q4_1 && t->ne[0] == 1536 && t->ne[1] == 576);
    ck_assert_uint_eq(t->offset, 31868992 - 1785664);
    ck_assert_uint_eq(t->n_bytes, 552960);
    ck_assert_ptr_nonnull(gguf_tensor(f, "blk.29.ffn_norm.weight"));
    ck_assert_ptr_null(gguf_tensor(f, "blk.30.ffn_norm.weight"));
    int n_q4_1 = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        n_q4_1 += f->tensors[i].type == DQ_Q4_1;
    ck_assert_int_eq(n_q4_1, 210);
    gguf_close(f);
}
END_TEST

/* Vocabulary-only files have no tensors and stop before the data padding. */
START_TEST(vocab_only_files_parse)
{
    static const char *names[] = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-bpe.gguf",
                                  "ggml-vocab-qwen2.gguf"};
    const char *model = model_path();
    const char *slash = strrchr(model, '/');
    int dir = slash ? (int)(slash - model) : 1;
    for (size_t i = 0; i < 3; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%.*s/vocab/%s", dir, slash ? model : ".", names[i]);
        struct gguf_file *f;
        char err[256];
        ck_assert_msg(gguf_open(path, &f, err, sizeof err) == 0, "%s: %s", path, err);
        ck_assert_uint_eq(f->n_tensors, 0);
        ck_assert_uint_le(f->data_offset, f->size);
        ck_assert_ptr_nonnull(gguf_get(f, "tokenizer.ggml.tokens"));
        gguf_close(f);
    }
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("gguf");
    TCase *tc = tcase_create("synthetic");
    tcase_add_test(tc, parses_every_metadata_type);
    tcase_add_test(tc, parses_nested_arrays);
    tcase_add_test(tc, typed_getters_convert_what_fits);
    tcase_add_test(tc, tensors_lie_at_aligned_offsets_in_the_data_section);
    tcase_add_test(tc, version_2_is_accepted);
    tcase_add_test(tc, every_truncation_fails_cleanly);
    tcase_add_test(tc, truncation_messages_name_the_part);
    tcase_add_test(tc, truncated_tensor_info_names_index_and_tensor);
    tcase_add_test(tc, bad_magic_is_rejected);
    tcase_add_test(tc, version_1_and_unknown_versions_are_rejected);
    tcase_add_test(tc, giant_counts_are_rejected_before_allocating);
    tcase_add_test(tc, giant_string_length_is_rejected);
    tcase_add_test(tc, unknown_value_types_are_rejected);
    tcase_add_test(tc, arrays_nested_too_deep_are_rejected);
    tcase_add_test(tc, bad_alignment_is_rejected);
    tcase_add_test(tc, tensor_past_end_of_file_is_rejected);
    tcase_add_test(tc, unaligned_tensor_offset_is_rejected);
    tcase_add_test(tc, unknown_tensor_type_names_type_and_tensor);
    tcase_add_test(tc, bad_dims_are_rejected);
    tcase_add_test(tc, duplicate_keys_and_tensor_names_are_rejected);
    tcase_add_test(tc, unprintable_names_are_sanitised_in_messages);
    tcase_add_test(tc, empty_buffer_and_small_error_buffers_are_safe);
    tcase_add_test(tc, open_reports_missing_and_unmappable_files);
    suite_add_tcase(s, tc);
    TCase *real = tcase_create("real files");
    tcase_set_timeout(real, 30);
    tcase_add_test(real, real_model_has_expected_layout);
    tcase_add_test(real, vocab_only_files_parse);
    suite_add_tcase(s, real);
    return s;
}
