/*
 * tests/fuzz/fuzz_gguf.c — libFuzzer target for the GGUF reader.
 *
 * Any byte string goes to gguf_parse; whatever parses is then walked the
 * way a loader would (lookups, typed getters, every tensor's bytes and a
 * dequantised element), so ASan sees any pointer the reader let through
 * that does not lie inside the input.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

static const char *const fuzz_keys[] = {
    "general.architecture", "general.alignment",     "llama.block_count",
    "llama.rope.freq_base", "tokenizer.ggml.tokens", "a",
};

static void fuzz_value(const struct gguf_value *v, unsigned *sink)
{
    if (v->type == GGUF_TYPE_STRING && v->str.len)
        *sink += (unsigned char)v->str.ptr[0] + (unsigned char)v->str.ptr[v->str.len - 1];
    if (v->type == GGUF_TYPE_ARRAY)
        for (uint64_t i = 0; i < v->arr.n; i++)
            fuzz_value(&v->arr.items[i], sink);
}

static void fuzz_walk(const struct gguf_file *f)
{
    unsigned sink = 0;
    for (size_t k = 0; k < sizeof fuzz_keys / sizeof *fuzz_keys; k++) {
        uint32_t u;
        float x;
        gguf_get(f, fuzz_keys[k]);
        gguf_get_u32(f, fuzz_keys[k], &u);
        gguf_get_f32(f, fuzz_keys[k], &x);
        free(gguf_get_strdup(f, fuzz_keys[k]));
    }
    for (uint64_t i = 0; i < f->n_kv; i++) {
        fuzz_value(&f->kv[i].val, &sink);
        if (f->kv[i].key.len == 0)
            __builtin_trap(); /* empty keys are refused */
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor *t = &f->tensors[i];
        const uint8_t *d = t->data;
        sink += d[0] + d[t->n_bytes - 1]; /* both ends must be readable */
        size_t be = dq_block_elems(t->type);
        float y[256];
        if (be && be <= 256 && dq_dequant(t->type, t->data, y, be) < 0)
            __builtin_trap();
    }
    volatile unsigned keep = sink;
    (void)keep;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gguf_file *f;
    char err[256];
    /* an exact-size copy, so reads one byte past the end are caught */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    if (size)
        memcpy(buf, data, size);
    if (gguf_parse(buf, size, &f, err, sizeof err) == 0) {
        fuzz_walk(f);
        gguf_close(f);
    } else if (strncmp(err, "gguf: ", 6) != 0 || strchr(err, '\n')) {
        __builtin_trap(); /* every failure names itself on one line */
    }
    free(buf);
    return 0;
}
