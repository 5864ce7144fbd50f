/*
 * model/tok_internal.h — the tokenizer's private data and the seams between
 * its files.  tok_vocab.c builds a struct tok from plain arrays (so the core is
 * testable without a GGUF file; tok_load.c only reads the arrays out of the
 * file), tok_encode.c cuts special tokens out of the text and hands each plain
 * stretch to tok_bpe.c (byte-level BPE) or tok_spm.c (SentencePiece-style),
 * and tok_decode.c maps ids back to bytes.
 *
 * The one idea: everything a tokenizer needs is computed once at build time
 * and never written again, so one struct tok serves any number of threads;
 * per-call scratch lives on the caller's side of tok_encode.
 */
#ifndef LLMD_MODEL_TOK_INTERNAL_H
#define LLMD_MODEL_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "model/model.h"

enum tok_kind {
    TOK_KIND_BPE, /* GGUF "gpt2": byte-level BPE, merges ranked by order */
    TOK_KIND_SPM, /* GGUF "llama": SentencePiece-style BPE, merges by score */
};

/* tokenizer.ggml.token_type values. */
enum tok_type {
    TOK_TYPE_NORMAL = 1,
    TOK_TYPE_UNKNOWN = 2,
    TOK_TYPE_CONTROL = 3,
    TOK_TYPE_USER = 4,
    TOK_TYPE_UNUSED = 5,
    TOK_TYPE_BYTE = 6,
};

/* Per-token attributes derived from the type (and, for EOG, the text). */
enum {
    TOKF_NORMAL = 1,
    TOKF_UNKNOWN = 2,
    TOKF_CONTROL = 4,
    TOKF_USER = 8,
    TOKF_BYTE = 16,
    TOKF_EOG = 32,
};

/* Everything a tokenizer is built from, as plain arrays (not retained). */
struct tok_spec {
    enum tok_kind kind;
    const char *pre; /* BPE pre-tokenizer name; NULL: "default" */
    int n_vocab;
    const char *const *texts; /* [n_vocab] token texts */
    const size_t *lens;       /* [n_vocab] their lengths; NULL: strlen */
    const float *scores;      /* [n_vocab]; NULL: all 0 */
    const int32_t *types;     /* [n_vocab] enum tok_type; NULL: all normal */
    int n_merges;             /* BPE: "left right" strings, rank = index */
    const char *const *merges;
    const size_t *merge_lens;               /* NULL: strlen */
    int32_t bos, eos, eot, eom, unk, pad;   /* -1: none */
    int add_bos, add_eos, add_space_prefix; /* -1: the kind's default */
};

/* Merge table slot: key 0 is empty; otherwise key-1 = left << 32 | right. */
struct tok_merge {
    uint64_t key;
    int32_t rank;
    int32_t result;
};

#define TOK_MAX_RE 4

struct tok {
    enum tok_kind kind;
    int n_vocab;
    char *strs;      /* every token's text, NUL-terminated, back to back */
    uint32_t *off;   /* [n_vocab] into strs */
    uint32_t *len;   /* [n_vocab] */
    float *scores;   /* [n_vocab] */
    uint8_t *attr;   /* [n_vocab] TOKF_* */
    uint32_t *vhash; /* text -> id + 1 (0: empty slot) */
    uint32_t vmask;
    struct tok_merge *mhash; /* BPE: (left id, right id) -> rank, result */
    uint32_t mmask;
    int32_t byte_tok[256]; /* BPE: id of the byte's mapped char; SPM: of <0xNN> */
    uint16_t byte_cp[256]; /* BPE: byte -> code point (GPT-2 mapping) */
    int16_t cp_byte[512];  /* BPE: code point -> byte, -1 when not a mapped byte */
    char *dec;             /* decoded pieces, back to back */
    uint32_t *dec_off;     /* [n_vocab] */
    uint32_t *dec_len;     /* [n_vocab] */
    size_t max_dec;        /* longest decoded piece */
    int32_t *special;      /* ids matched in raw text, longest text first */
    int n_special;
    int32_t bos, eos, eot, eom, unk, pad;
    int add_bos, add_eos, add_space_prefix;
    int ignore_merges; /* BPE: a pre-split word that is a token is taken whole */
    int n_re;
    pcre2_code *re[TOK_MAX_RE]; /* BPE pre-split, applied in turn */
};

/* A growable array of token ids (the output of encoding). */
struct tok_ids {
    int32_t *v;
    size_t n, cap;
};
int tok_ids_push(struct tok_ids *a, int32_t id);

/* Per-call scratch for the merge loops, reused across words. */
struct tok_scratch {
    void *sym;
    size_t sym_cap;
    void *heap;
    size_t heap_cap;
    char *buf;
    size_t buf_cap;
    pcre2_match_data *md;
};
void tok_scratch_free(struct tok_scratch *s);

/* A binary min-heap of fixed-size elements (candidate merges), ordered by
 * less(); both merge loops use it with their own pair type.  v holds cap
 * elements, reserved by the caller. */
#define TOK_HEAP_MAX_ELEM 32
struct tok_heap {
    void *v;
    size_t n, size;
    int (*less)(const void *a, const void *b);
};
void tok_heap_push(struct tok_heap *h, const void *e);
/* Removes the least element into out; the heap must not be empty. */
void tok_heap_pop(struct tok_heap *h, void *out);
int tok_scratch_reserve(void **p, size_t *cap, size_t need, size_t elem);

/* Builds a tokenizer from plain arrays; the result owns copies of them. */
int tok_build(const struct tok_spec *spec, struct tok **out, char *err, size_t errlen);

/* The id of the token whose text is s[0..n), or -1. */
int32_t tok_lookup(const struct tok *t, const char *s, size_t n);

/* Bytes of the UTF-8 sequence a lead byte announces (1 for stray bytes). */
static inline size_t tok_utf8_len(uint8_t c)
{
    static const uint8_t lens[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lens[c >> 4];
}

/* tok_bpe.c */
int tok_bpe_init(struct tok *t, const struct tok_spec *spec, char *err, size_t errlen);
void tok_bpe_free(struct tok *t);
int tok_bpe_encode(const struct tok *t, struct tok_scratch *s, const char *text, size_t len,
                   struct tok_ids *out);
/* GPT-2's byte <-> code point mapping (a byte's stand-in printable char). */
uint16_t tok_bpe_byte_cp(uint8_t b);

/* tok_spm.c */
int tok_spm_init(struct tok *t, char *err, size_t errlen);
int tok_spm_encode(const struct tok *t, struct tok_scratch *s, const char *text, size_t len,
                   int space_prefix, struct tok_ids *out);

/* tok_decode.c */
int tok_pieces_init(struct tok *t, char *err, size_t errlen);

/* Writes a one-line message into err (when not NULL) and returns -1. */
int tok_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
