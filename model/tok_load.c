/*
 * model/tok_load.c — reads a GGUF file's tokenizer.ggml.* metadata into the
 * plain arrays tok_build() takes.
 *
 * Missing optional keys get llama.cpp's defaults, so that a file tokenizes
 * here exactly as it does there: SentencePiece vocabularies default to BOS 1,
 * EOS 2, UNK 0, add BOS and add a space prefix; byte-level BPE takes its BOS
 * default from the pre-tokenizer (Llama 3 adds one, the others do not).
 */
#include <stdlib.h>
#include <string.h>

#include "model/tok_internal.h"

#define TOK_KEY "tokenizer.ggml."

/* An array value of n items or more whose elements pass ok(); else NULL. */
static const struct gguf_value *tok_array(const struct gguf_file *f, const char *key,
                                          uint64_t min_n, int (*ok)(enum gguf_type))
{
    const struct gguf_value *v = gguf_get(f, key);
    if (!v || v->type != GGUF_TYPE_ARRAY || v->arr.n < min_n || !ok(v->arr.elem))
        return NULL;
    return v;
}

static int tok_is_str(enum gguf_type t)
{
    return t == GGUF_TYPE_STRING;
}

static int tok_is_int(enum gguf_type t)
{
    return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 ||
           t == GGUF_TYPE_INT64 || t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_UINT16 ||
           t == GGUF_TYPE_UINT32 || t == GGUF_TYPE_UINT64;
}

static int tok_is_num(enum gguf_type t)
{
    return tok_is_int(t) || t == GGUF_TYPE_FLOAT32 || t == GGUF_TYPE_FLOAT64;
}

static int64_t tok_item_int(const struct gguf_value *v)
{
    switch (v->type) {
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_INT16:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_INT64:
        return v->i64;
    default:
        return v->u64 > INT32_MAX ? -1 : (int64_t)v->u64;
    }
}

static float tok_item_num(const struct gguf_value *v)
{
    if (v->type == GGUF_TYPE_FLOAT32 || v->type == GGUF_TYPE_FLOAT64)
        return (float)v->f64;
    return (float)tok_item_int(v);
}

/* 1 / 0 for a boolean (or integer) key, dflt when it is absent. */
static int tok_get_bool(const struct gguf_file *f, const char *key, int dflt)
{
    const struct gguf_value *v = gguf_get(f, key);
    if (v && v->type == GGUF_TYPE_BOOL)
        return v->u64 != 0;
    uint32_t u;
    return gguf_get_u32(f, key, &u) == 0 ? u != 0 : dflt;
}

static int32_t tok_get_id(const struct gguf_file *f, const char *key, int32_t dflt)
{
    uint32_t u;
    return gguf_get_u32(f, key, &u) == 0 && u <= INT32_MAX ? (int32_t)u : dflt;
}

/* The owned arrays a spec points into while it is built. */
struct tok_arrays {
    const char **texts, **merges;
    size_t *lens, *merge_lens;
    float *scores;
    int32_t *types;
    char *pre;
};

static void tok_arrays_free(struct tok_arrays *a)
{
    free(a->texts);
    free(a->merges);
    free(a->lens);
    free(a->merge_lens);
    free(a->scores);
    free(a->types);
    free(a->pre);
}

static int tok_read_strings(const struct gguf_value *v, uint64_t n, const char ***ptrs,
                            size_t **lens)
{
    *ptrs = malloc(sizeof(**ptrs) * (n ? n : 1));
    *lens = malloc(sizeof(**lens) * (n ? n : 1));
    if (!*ptrs || !*lens)
        return -1;
    for (uint64_t i = 0; i < n; i++) {
        (*ptrs)[i] = v->arr.items[i].str.ptr ? v->arr.items[i].str.ptr : "";
        (*lens)[i] = (size_t)v->arr.items[i].str.len;
    }
    return 0;
}

static int tok_read_vocab(const struct gguf_file *f, struct tok_spec *sp, struct tok_arrays *a,
                          char *err, size_t errlen)
{
    const struct gguf_value *tv = tok_array(f, TOK_KEY "tokens", 1, tok_is_str);
    if (!tv || tv->arr.n >= INT32_MAX / 2)
        return tok_fail(err, errlen, "tokenizer: missing or bad " TOK_KEY "tokens");
    uint64_t n = tv->arr.n;
    sp->n_vocab = (int)n;
    if (tok_read_strings(tv, n, &a->texts, &a->lens))
        return tok_fail(err, errlen, "tokenizer: out of memory");
    sp->texts = a->texts;
    sp->lens = a->lens;
    const struct gguf_value *sv = tok_array(f, TOK_KEY "scores", n, tok_is_num);
    const struct gguf_value *yv = tok_array(f, TOK_KEY "token_type", n, tok_is_int);
    if ((gguf_get(f, TOK_KEY "scores") && !sv) || (gguf_get(f, TOK_KEY "token_type") && !yv))
        return tok_fail(err, errlen, "tokenizer: bad scores or token_type array");
    if (sv && !(a->scores = malloc(sizeof(*a->scores) * n)))
        return tok_fail(err, errlen, "tokenizer: out of memory");
    if (yv && !(a->types = malloc(sizeof(*a->types) * n)))
        return tok_fail(err, errlen, "tokenizer: out of memory");
    for (uint64_t i = 0; i < n; i++) {
        if (sv)
            a->scores[i] = tok_item_num(&sv->arr.items[i]);
        if (yv)
            a->types[i] = (int32_t)tok_item_int(&yv->arr.items[i]);
    }
    sp->scores = a->scores;
    sp->types = a->types;
    return 0;
}

static int tok_read_merges(const struct gguf_file *f, struct tok_spec *sp, struct tok_arrays *a,
                           char *err, size_t errlen)
{
    const struct gguf_value *mv = tok_array(f, TOK_KEY "merges", 0, tok_is_str);
    if (!mv || mv->arr.n >= INT32_MAX)
        return tok_fail(err, errlen, "tokenizer: missing or bad " TOK_KEY "merges");
    if (tok_read_strings(mv, mv->arr.n, &a->merges, &a->merge_lens))
        return tok_fail(err, errlen, "tokenizer: out of memory");
    sp->n_merges = (int)mv->arr.n;
    sp->merges = a->merges;
    sp->merge_lens = a->merge_lens;
    return 0;
}

static int tok_read_kind(const struct gguf_file *f, struct tok_spec *sp, char *err, size_t errlen)
{
    char *model = gguf_get_strdup(f, TOK_KEY "model");
    if (!model)
        return tok_fail(err, errlen, "tokenizer: no " TOK_KEY "model in the file");
    int rc = 0;
    if (strcmp(model, "gpt2") == 0)
        sp->kind = TOK_KIND_BPE;
    else if (strcmp(model, "llama") == 0)
        sp->kind = TOK_KIND_SPM;
    else
        rc = tok_fail(err, errlen, "tokenizer: unsupported tokenizer model '%s'", model);
    free(model);
    return rc;
}

static void tok_read_specials(const struct gguf_file *f, struct tok_spec *sp)
{
    int spm = sp->kind == TOK_KIND_SPM;
    sp->bos = tok_get_id(f, TOK_KEY "bos_token_id", spm ? 1 : -1);
    sp->eos = tok_get_id(f, TOK_KEY "eos_token_id", spm ? 2 : -1);
    sp->eot = tok_get_id(f, TOK_KEY "eot_token_id", -1);
    sp->eom = tok_get_id(f, TOK_KEY "eom_token_id", -1);
    sp->unk = tok_get_id(f, TOK_KEY "unknown_token_id", spm ? 0 : -1);
    sp->pad = tok_get_id(f, TOK_KEY "padding_token_id", -1);
    sp->add_bos = tok_get_bool(f, TOK_KEY "add_bos_token", -1);
    sp->add_eos = tok_get_bool(f, TOK_KEY "add_eos_token", -1);
    sp->add_space_prefix = tok_get_bool(f, TOK_KEY "add_space_prefix", -1);
}

int tok_load(const struct gguf_file *f, struct tok **out, char *err, size_t errlen)
{
    if (!out)
        return tok_fail(err, errlen, "tokenizer: no output");
    *out = NULL;
    if (!f)
        return tok_fail(err, errlen, "tokenizer: no file");
    struct tok_spec sp = {0};
    struct tok_arrays a = {0};
    int rc = tok_read_kind(f, &sp, err, errlen);
    if (!rc)
        rc = tok_read_vocab(f, &sp, &a, err, errlen);
    if (!rc && sp.kind == TOK_KIND_BPE)
        rc = tok_read_merges(f, &sp, &a, err, errlen);
    if (!rc) {
        tok_read_specials(f, &sp);
        sp.pre = a.pre = gguf_get_strdup(f, TOK_KEY "pre");
        rc = tok_build(&sp, out, err, errlen);
    }
    tok_arrays_free(&a);
    return rc;
}
