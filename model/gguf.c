/*
 * model/gguf.c — reader for GGUF v2/v3 model files.
 *
 * A GGUF file is a header, typed key/value metadata, tensor descriptions and
 * then an aligned data section.  The file comes from outside, so the one idea
 * here is a bounds-checked cursor: every read goes through rd_take(), which
 * refuses to move past the end, and every count is checked against the bytes
 * left before anything is allocated from it (each item needs at least its
 * smallest encoding).  Strings and tensor data point into the buffer; the
 * parsed tables are the only allocations, owned by the gguf_file.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/model.h"

#define GGUF_MAX_DEPTH     8 /* arrays nested deeper than this are refused */
#define GGUF_MAX_DIMS      4
#define GGUF_DEFAULT_ALIGN 32

/* Smallest encodings, used to bound counts before allocating from them. */
#define GGUF_MIN_STR    8u                             /* u64 length, no bytes */
#define GGUF_MIN_KV     (GGUF_MIN_STR + 5)             /* key, u32 type, 1-byte value */
#define GGUF_MIN_ARR    12u                            /* u32 element type, u64 count */
#define GGUF_MIN_TENSOR (GGUF_MIN_STR + 4 + 8 + 4 + 8) /* one dimension */

/* A sorted view of names, for duplicate checks and binary-search lookups. */
struct gguf_name {
    struct gguf_str s;
    uint64_t idx;
};

/* The public struct plus private indexes; gguf_close casts back. */
struct gguf_impl {
    struct gguf_file f; /* first member: a gguf_file * is a gguf_impl * */
    struct gguf_name *kv_names;
    struct gguf_name *tensor_names;
};

struct rd {
    const uint8_t *p;
    size_t size;
    size_t pos;
    char *err;
    size_t errlen;
    int failed;
};

/* ------------------------------------------------------------------ errors */

static void rd_fail(struct rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records the first error only: the innermost failure is the precise one. */
static void rd_fail(struct rd *r, const char *fmt, ...)
{
    if (r->failed)
        return;
    r->failed = 1;
    if (!r->err || r->errlen == 0)
        return;
    int n = snprintf(r->err, r->errlen, "gguf: ");
    if (n < 0 || (size_t)n >= r->errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

/* A name from the file made safe to print: at most 64 printable bytes. */
struct gguf_shown {
    char s[72];
};

static struct gguf_shown gguf_show(struct gguf_str str)
{
    struct gguf_shown out;
    size_t n = str.len < 64 ? (size_t)str.len : 64, i;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)str.ptr[i];
        out.s[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (str.len > 64)
        memcpy(out.s + i, "...", 4);
    else
        out.s[i] = '\0';
    return out;
}

/* ------------------------------------------------------------------ cursor */

static size_t rd_left(const struct rd *r)
{
    return r->size - r->pos;
}

/* Returns n bytes at the cursor and advances, or NULL when fewer are left. */
static const uint8_t *rd_take(struct rd *r, uint64_t n)
{
    if (n > rd_left(r))
        return NULL;
    const uint8_t *p = r->p + r->pos;
    r->pos += (size_t)n;
    return p;
}

static uint64_t rd_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static int rd_u32(struct rd *r, uint32_t *v)
{
    const uint8_t *p = rd_take(r, 4);
    if (!p)
        return -1;
    *v = (uint32_t)rd_le(p, 4);
    return 0;
}

static int rd_u64(struct rd *r, uint64_t *v)
{
    const uint8_t *p = rd_take(r, 8);
    if (!p)
        return -1;
    *v = rd_le(p, 8);
    return 0;
}

static int rd_str(struct rd *r, struct gguf_str *s)
{
    size_t start = r->pos;
    uint64_t len;
    const uint8_t *p;
    if (rd_u64(r, &len) < 0 || !(p = rd_take(r, len))) {
        r->pos = start;
        return -1;
    }
    s->ptr = (const char *)p;
    s->len = len;
    return 0;
}

/* --------------------------------------------------------------- metadata */

/* Bytes a scalar of this type takes; 0 for strings, arrays and unknowns. */
static size_t gguf_scalar_size(uint32_t t)
{
    switch (t) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_BOOL:
        return 1;
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_INT16:
        return 2;
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_FLOAT32:
        return 4;
    case GGUF_TYPE_UINT64:
    case GGUF_TYPE_INT64:
    case GGUF_TYPE_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

/* Smallest encoding of one value of type t; 0 when t is unknown. */
static size_t gguf_min_size(uint32_t t)
{
    if (t == GGUF_TYPE_STRING)
        return GGUF_MIN_STR;
    if (t == GGUF_TYPE_ARRAY)
        return GGUF_MIN_ARR;
    return gguf_scalar_size(t);
}

/* Sign-extends the low `bytes` bytes of v. */
static int64_t gguf_sext(uint64_t v, size_t bytes)
{
    unsigned shift = 64 - 8 * (unsigned)bytes;
    return (int64_t)(v << shift) >> shift;
}

static void gguf_scalar(uint32_t t, const uint8_t *p, struct gguf_value *v)
{
    size_t n = gguf_scalar_size(t);
    uint64_t raw = rd_le(p, (int)n);
    switch (t) {
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_INT16:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_INT64:
        v->i64 = gguf_sext(raw, n);
        break;
    case GGUF_TYPE_FLOAT32: {
        uint32_t bits = (uint32_t)raw;
        float f;
        memcpy(&f, &bits, sizeof f);
        v->f64 = f;
        break;
    }
    case GGUF_TYPE_FLOAT64:
        memcpy(&v->f64, &raw, sizeof v->f64);
        break;
    case GGUF_TYPE_BOOL:
        v->u64 = raw != 0;
        break;
    default:
        v->u64 = raw;
    }
}

static void gguf_value_free(struct gguf_value *v)
{
    if (v->type != GGUF_TYPE_ARRAY || !v->arr.items)
        return;
    for (uint64_t i = 0; i < v->arr.n; i++)
        gguf_value_free(&v->arr.items[i]);
    free(v->arr.items);
    v->arr.items = NULL;
}

static int gguf_read_value(struct rd *r, uint32_t type, struct gguf_value *v, int depth,
                           const char *key);

/* Reads an array's element type, count and items.  Items are calloc'd
 * before they are filled, so a failure part-way leaves a freeable tree. */
static int gguf_read_array(struct rd *r, struct gguf_value *v, int depth, const char *key)
{
    uint32_t elem;
    uint64_t n;
    if (depth >= GGUF_MAX_DEPTH) {
        rd_fail(r, "metadata key '%s': arrays nested deeper than %d", key, GGUF_MAX_DEPTH);
        return -1;
    }
    if (rd_u32(r, &elem) < 0 || rd_u64(r, &n) < 0) {
        rd_fail(r, "truncated file: array header of metadata key '%s' ends past end of file", key);
        return -1;
    }
    size_t min = gguf_min_size(elem);
    if (min == 0) {
        rd_fail(r, "metadata key '%s': unknown array element type %" PRIu32, key, elem);
        return -1;
    }
    if (n > rd_left(r) / min) {
        rd_fail(r, "metadata key '%s': array of %" PRIu64 " items cannot fit in the %zu bytes left",
                key, n, rd_left(r));
        return -1;
    }
    v->arr.elem = (enum gguf_type)elem;
    v->arr.n = 0;
    v->arr.items = n ? calloc((size_t)n, sizeof *v->arr.items) : NULL;
    if (n && !v->arr.items) {
        rd_fail(r, "out of memory for array of metadata key '%s'", key);
        return -1;
    }
    v->arr.n = n;
    for (uint64_t i = 0; i < n; i++)
        if (gguf_read_value(r, elem, &v->arr.items[i], depth + 1, key) < 0)
            return -1;
    return 0;
}

/* Reads one value of a known type into v (v->type is set first, so a
 * partly read array can still be freed). */
static int gguf_read_value(struct rd *r, uint32_t type, struct gguf_value *v, int depth,
                           const char *key)
{
    if (gguf_min_size(type) == 0) {
        rd_fail(r, "metadata key '%s': unknown value type %" PRIu32, key, type);
        return -1;
    }
    v->type = (enum gguf_type)type;
    if (type == GGUF_TYPE_ARRAY) {
        v->arr.items = NULL;
        v->arr.n = 0;
        return gguf_read_array(r, v, depth, key);
    }
    if (type == GGUF_TYPE_STRING) {
        if (rd_str(r, &v->str) == 0)
            return 0;
    } else {
        const uint8_t *p = rd_take(r, gguf_scalar_size(type));
        if (p) {
            gguf_scalar(type, p, v);
            return 0;
        }
    }
    rd_fail(r, "truncated file: value of metadata key '%s' ends past end of file", key);
    return -1;
}

static int gguf_read_kv(struct rd *r, uint64_t i, struct gguf_kv *kv)
{
    uint32_t type;
    if (rd_str(r, &kv->key) < 0) {
        rd_fail(r, "truncated file: metadata key %" PRIu64 " ends past end of file", i);
        return -1;
    }
    struct gguf_shown key = gguf_show(kv->key);
    if (kv->key.len == 0) {
        rd_fail(r, "metadata key %" PRIu64 " is empty", i);
        return -1;
    }
    if (rd_u32(r, &type) < 0) {
        rd_fail(r, "truncated file: type of metadata key '%s' ends past end of file", key.s);
        return -1;
    }
    return gguf_read_value(r, type, &kv->val, 0, key.s);
}

/* ----------------------------------------------------------------- names */

static int gguf_str_cmp(struct gguf_str a, struct gguf_str b)
{
    size_t n = a.len < b.len ? (size_t)a.len : (size_t)b.len;
    int c = n ? memcmp(a.ptr, b.ptr, n) : 0;
    if (c)
        return c;
    return a.len < b.len ? -1 : a.len > b.len;
}

static int gguf_name_cmp(const void *a, const void *b)
{
    return gguf_str_cmp(((const struct gguf_name *)a)->s, ((const struct gguf_name *)b)->s);
}

/* Sorts the names into a new index; a duplicate is reported as `what`. */
static struct gguf_name *gguf_index(struct rd *r, const struct gguf_name *names, uint64_t n,
                                    const char *what)
{
    struct gguf_name *ix = malloc((n ? (size_t)n : 1) * sizeof *ix);
    if (!ix) {
        rd_fail(r, "out of memory for the %s index", what);
        return NULL;
    }
    if (n)
        memcpy(ix, names, (size_t)n * sizeof *ix);
    qsort(ix, (size_t)n, sizeof *ix, gguf_name_cmp);
    for (uint64_t i = 1; i < n; i++)
        if (gguf_str_cmp(ix[i - 1].s, ix[i].s) == 0) {
            rd_fail(r, "duplicate %s '%s'", what, gguf_show(ix[i].s).s);
            free(ix);
            return NULL;
        }
    return ix;
}

static const struct gguf_name *gguf_lookup(const struct gguf_name *ix, uint64_t n, const char *c)
{
    struct gguf_str key = {c, strlen(c)};
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        int cmp = gguf_str_cmp(key, ix[mid].s);
        if (cmp == 0)
            return &ix[mid];
        if (cmp < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

static int gguf_index_kv(struct rd *r, struct gguf_impl *im)
{
    struct gguf_file *f = &im->f;
    struct gguf_name *names = malloc((f->n_kv ? (size_t)f->n_kv : 1) * sizeof *names);
    if (!names) {
        rd_fail(r, "out of memory for the metadata key index");
        return -1;
    }
    for (uint64_t i = 0; i < f->n_kv; i++)
        names[i] = (struct gguf_name){f->kv[i].key, i};
    im->kv_names = gguf_index(r, names, f->n_kv, "metadata key");
    free(names);
    return im->kv_names ? 0 : -1;
}

static int gguf_index_tensors(struct rd *r, struct gguf_impl *im)
{
    struct gguf_file *f = &im->f;
    struct gguf_name *names = malloc((f->n_tensors ? (size_t)f->n_tensors : 1) * sizeof *names);
    if (!names) {
        rd_fail(r, "out of memory for the tensor index");
        return -1;
    }
    for (uint64_t i = 0; i < f->n_tensors; i++)
        names[i] = (struct gguf_name){f->tensors[i].name, i};
    im->tensor_names = gguf_index(r, names, f->n_tensors, "tensor name");
    free(names);
    return im->tensor_names ? 0 : -1;
}

/* ----------------------------------------------------------------- tensors */

/* Reads name, dims, type and offset of tensor i; sizes are checked later. */
static int gguf_read_tensor_info(struct rd *r, uint64_t i, struct gguf_tensor *t)
{
    if (rd_str(r, &t->name) < 0) {
        rd_fail(r, "truncated file: name of tensor info %" PRIu64 " ends past end of file", i);
        return -1;
    }
    struct gguf_shown name = gguf_show(t->name);
    if (t->name.len == 0) {
        rd_fail(r, "tensor info %" PRIu64 " has an empty name", i);
        return -1;
    }
    if (rd_u32(r, &t->n_dims) < 0)
        goto truncated;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS) {
        rd_fail(r, "tensor '%s': %" PRIu32 " dimensions (must be 1..%d)", name.s, t->n_dims,
                GGUF_MAX_DIMS);
        return -1;
    }
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++)
        if (rd_u64(r, &t->ne[d]) < 0)
            goto truncated;
    if (rd_u32(r, &t->type) < 0 || rd_u64(r, &t->offset) < 0)
        goto truncated;
    return 0;
truncated:
    rd_fail(r, "truncated file: tensor info %" PRIu64 " ('%s') ends past end of file", i, name.s);
    return -1;
}

/* Element count and byte size of t, with every product checked. */
static int gguf_tensor_size(struct rd *r, struct gguf_tensor *t)
{
    struct gguf_shown shown = gguf_show(t->name);
    const char *name = shown.s;
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if (t->ne[d] == 0 || t->ne[d] > INT64_MAX) {
            rd_fail(r, "tensor '%s': dimension %" PRIu32 " has bad size %" PRIu64, name, d,
                    t->ne[d]);
            return -1;
        }
        if (n > INT64_MAX / t->ne[d]) {
            rd_fail(r, "tensor '%s': element count overflows", name);
            return -1;
        }
        n *= t->ne[d];
    }
    t->n_elems = n;
    const char *tn = dq_type_name(t->type);
    if (!tn) {
        rd_fail(r, "tensor '%s': unknown or unsupported type %" PRIu32, name, t->type);
        return -1;
    }
    size_t row = dq_row_bytes(t->type, t->ne[0]);
    if (row == 0) {
        rd_fail(r, "tensor '%s': ne[0] = %" PRIu64 " is not a multiple of %s's block of %zu", name,
                t->ne[0], tn, dq_block_elems(t->type));
        return -1;
    }
    uint64_t rows = n / t->ne[0];
    if (rows > UINT64_MAX / row) {
        rd_fail(r, "tensor '%s': byte size overflows", name);
        return -1;
    }
    t->n_bytes = rows * row;
    return 0;
}

/* Places t inside the data section: aligned offset, all bytes in the file. */
static int gguf_place_tensor(struct rd *r, const struct gguf_file *f, struct gguf_tensor *t)
{
    struct gguf_shown shown = gguf_show(t->name);
    const char *name = shown.s;
    if (t->offset % f->alignment != 0) {
        rd_fail(r, "tensor '%s': offset %" PRIu64 " is not a multiple of the alignment %" PRIu64,
                name, t->offset, f->alignment);
        return -1;
    }
    uint64_t avail = f->size - f->data_offset;
    if (t->offset > avail || t->n_bytes > avail - t->offset) {
        rd_fail(r,
                "tensor '%s': data [%" PRIu64 ", +%" PRIu64 ") lies past end of file "
                "(data section has %" PRIu64 " bytes)",
                name, t->offset, t->n_bytes, avail);
        return -1;
    }
    t->data = f->base + f->data_offset + t->offset;
    return 0;
}

/* ------------------------------------------------------------------ layout */

static int gguf_read_header(struct rd *r, struct gguf_file *f)
{
    const uint8_t *magic = rd_take(r, 4);
    if (!magic) {
        rd_fail(r, "truncated file: header ends past end of file");
        return -1;
    }
    if (memcmp(magic, "GGUF", 4) != 0) {
        rd_fail(r, "bad magic (not a GGUF file)");
        return -1;
    }
    if (rd_u32(r, &f->version) < 0) {
        rd_fail(r, "truncated file: header ends past end of file");
        return -1;
    }
    if (f->version == 1) {
        rd_fail(r, "GGUF version 1 is not supported (only versions 2 and 3)");
        return -1;
    }
    if (f->version != 2 && f->version != 3) {
        rd_fail(r, "unsupported GGUF version %" PRIu32 "%s", f->version,
                (f->version & 0xffff) == 0 ? " (big-endian file?)" : "");
        return -1;
    }
    if (rd_u64(r, &f->n_tensors) < 0 || rd_u64(r, &f->n_kv) < 0) {
        rd_fail(r, "truncated file: header ends past end of file");
        return -1;
    }
    if (f->n_kv > rd_left(r) / GGUF_MIN_KV) {
        rd_fail(r, "%" PRIu64 " metadata keys cannot fit in the %zu bytes left", f->n_kv,
                rd_left(r));
        return -1;
    }
    if (f->n_tensors > rd_left(r) / GGUF_MIN_TENSOR) {
        rd_fail(r, "%" PRIu64 " tensor infos cannot fit in the %zu bytes left", f->n_tensors,
                rd_left(r));
        return -1;
    }
    return 0;
}

static int gguf_read_all_kv(struct rd *r, struct gguf_file *f)
{
    if (f->n_kv == 0)
        return 0;
    f->kv = calloc((size_t)f->n_kv, sizeof *f->kv);
    if (!f->kv) {
        rd_fail(r, "out of memory for %" PRIu64 " metadata keys", f->n_kv);
        return -1;
    }
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (gguf_read_kv(r, i, &f->kv[i]) < 0)
            return -1;
    return 0;
}

static int gguf_read_alignment(struct rd *r, struct gguf_file *f)
{
    f->alignment = GGUF_DEFAULT_ALIGN;
    const struct gguf_value *v = gguf_get(f, "general.alignment");
    if (!v)
        return 0;
    uint32_t a;
    if (gguf_get_u32(f, "general.alignment", &a) < 0) {
        rd_fail(r, "general.alignment is not a 32-bit unsigned integer");
        return -1;
    }
    if (a == 0 || (a & (a - 1)) != 0) {
        rd_fail(r, "general.alignment %" PRIu32 " is not a power of two", a);
        return -1;
    }
    f->alignment = a;
    return 0;
}

static int gguf_read_tensors(struct rd *r, struct gguf_file *f)
{
    if (f->n_tensors == 0)
        return 0;
    /* re-check: the metadata used up part of the bytes counted in the header */
    if (f->n_tensors > rd_left(r) / GGUF_MIN_TENSOR) {
        rd_fail(r, "%" PRIu64 " tensor infos cannot fit in the %zu bytes left", f->n_tensors,
                rd_left(r));
        return -1;
    }
    f->tensors = calloc((size_t)f->n_tensors, sizeof *f->tensors);
    if (!f->tensors) {
        rd_fail(r, "out of memory for %" PRIu64 " tensor infos", f->n_tensors);
        return -1;
    }
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (gguf_read_tensor_info(r, i, &f->tensors[i]) < 0 ||
            gguf_tensor_size(r, &f->tensors[i]) < 0)
            return -1;
    return 0;
}

/* The data section starts at the first aligned offset after the infos.  A
 * file without tensors may stop before that padding: its (empty) data
 * section is then placed at the end of the file. */
static int gguf_locate_data(struct rd *r, struct gguf_file *f)
{
    uint64_t pos = r->pos, a = f->alignment;
    uint64_t start = pos + (a - pos % a) % a;
    if (start < pos || start > f->size) {
        if (f->n_tensors == 0) {
            f->data_offset = f->size;
            return 0;
        }
        rd_fail(r, "truncated file: data section starts past end of file");
        return -1;
    }
    f->data_offset = start;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (gguf_place_tensor(r, f, &f->tensors[i]) < 0)
            return -1;
    return 0;
}

static void gguf_free_tables(struct gguf_impl *im)
{
    struct gguf_file *f = &im->f;
    if (f->kv)
        for (uint64_t i = 0; i < f->n_kv; i++)
            gguf_value_free(&f->kv[i].val);
    free(f->kv);
    free(f->tensors);
    free(im->kv_names);
    free(im->tensor_names);
}

/* ------------------------------------------------------------------ public */

int gguf_parse(const void *buf, size_t size, struct gguf_file **out, char *err, size_t errlen)
{
    struct rd r = {.p = buf, .size = buf ? size : 0, .err = err, .errlen = errlen};
    *out = NULL;
    struct gguf_impl *im = calloc(1, sizeof *im);
    if (!im) {
        rd_fail(&r, "out of memory");
        return -1;
    }
    struct gguf_file *f = &im->f;
    f->base = buf;
    f->size = r.size;
    if (gguf_read_header(&r, f) < 0 || gguf_read_all_kv(&r, f) < 0 || gguf_index_kv(&r, im) < 0 ||
        gguf_read_alignment(&r, f) < 0 || gguf_read_tensors(&r, f) < 0 ||
        gguf_index_tensors(&r, im) < 0 || gguf_locate_data(&r, f) < 0) {
        gguf_free_tables(im);
        free(im);
        return -1;
    }
    *out = f;
    return 0;
}

static int gguf_errno(char *err, size_t errlen, const char *what, const char *path)
{
    if (err && errlen)
        snprintf(err, errlen, "gguf: cannot %s '%s': %s", what, path, strerror(errno));
    return -1;
}

int gguf_open(const char *path, struct gguf_file **out, char *err, size_t errlen)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return gguf_errno(err, errlen, "open", path);
    struct stat st;
    if (fstat(fd, &st) < 0) {
        gguf_errno(err, errlen, "stat", path);
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > SIZE_MAX) {
        if (err && errlen)
            snprintf(err, errlen, "gguf: '%s' is not a regular file of a mappable size", path);
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    void *map = NULL;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            gguf_errno(err, errlen, "map", path);
            close(fd);
            return -1;
        }
    }
    close(fd); /* the mapping keeps the file */
    if (gguf_parse(map ? map : "", size, out, err, errlen) < 0) {
        if (map)
            munmap(map, size);
        return -1;
    }
    (*out)->map = map;
    return 0;
}

void gguf_close(struct gguf_file *f)
{
    if (!f)
        return;
    struct gguf_impl *im = (struct gguf_impl *)f;
    if (f->map)
        munmap(f->map, f->size);
    gguf_free_tables(im);
    free(im);
}

const struct gguf_value *gguf_get(const struct gguf_file *f, const char *key)
{
    const struct gguf_impl *im = (const struct gguf_impl *)f;
    if (!f || !key || !im->kv_names)
        return NULL;
    const struct gguf_name *n = gguf_lookup(im->kv_names, f->n_kv, key);
    return n ? &f->kv[n->idx].val : NULL;
}

const struct gguf_tensor *gguf_tensor(const struct gguf_file *f, const char *name)
{
    const struct gguf_impl *im = (const struct gguf_impl *)f;
    if (!f || !name || !im->tensor_names)
        return NULL;
    const struct gguf_name *n = gguf_lookup(im->tensor_names, f->n_tensors, name);
    return n ? &f->tensors[n->idx] : NULL;
}

int gguf_get_u32(const struct gguf_file *f, const char *key, uint32_t *out)
{
    const struct gguf_value *v = gguf_get(f, key);
    if (!v)
        return -1;
    switch (v->type) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_UINT64:
        if (v->u64 > UINT32_MAX)
            return -1;
        *out = (uint32_t)v->u64;
        return 0;
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_INT16:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_INT64:
        if (v->i64 < 0 || v->i64 > (int64_t)UINT32_MAX)
            return -1;
        *out = (uint32_t)v->i64;
        return 0;
    default:
        return -1;
    }
}

int gguf_get_f32(const struct gguf_file *f, const char *key, float *out)
{
    const struct gguf_value *v = gguf_get(f, key);
    if (!v)
        return -1;
    switch (v->type) {
    case GGUF_TYPE_FLOAT32:
    case GGUF_TYPE_FLOAT64:
        *out = (float)v->f64;
        return 0;
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_UINT64:
        *out = (float)v->u64;
        return 0;
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_INT16:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_INT64:
        *out = (float)v->i64;
        return 0;
    default:
        return -1;
    }
}

char *gguf_get_strdup(const struct gguf_file *f, const char *key)
{
    const struct gguf_value *v = gguf_get(f, key);
    if (!v || v->type != GGUF_TYPE_STRING)
        return NULL;
    char *s = malloc((size_t)v->str.len + 1);
    if (!s)
        return NULL;
    if (v->str.len)
        memcpy(s, v->str.ptr, (size_t)v->str.len);
    s[v->str.len] = '\0';
    return s;
}

int gguf_str_eq(struct gguf_str s, const char *c)
{
    size_t n = strlen(c);
    return s.len == n && (n == 0 || memcmp(s.ptr, c, n) == 0);
}
