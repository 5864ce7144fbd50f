/*
 * model/model.h — the model runtime: GGUF files, dequantisation, tokenizers,
 * chat templates, the Llama-family forward pass and sampling.
 *
 * Conventions: functions return 0 (or a count) on success and -1 on failure;
 * where a function takes (char *err, size_t errlen) it writes a one-line
 * message there on failure.  Whatever a function returns by pointer is owned
 * by the caller unless its comment says otherwise.
 */
#ifndef LLMD_MODEL_MODEL_H
#define LLMD_MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

/* ===================================================================== GGUF */

enum gguf_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
};

/* A string inside the file: not NUL-terminated, valid while the file is open. */
struct gguf_str {
    const char *ptr;
    uint64_t len;
};

/* A metadata value.  Integers are widened (u64 for unsigned and bool, i64
 * for signed), floats to f64.  Arrays hold their parsed items, which may be
 * arrays again (nesting depth is bounded). */
struct gguf_value {
    enum gguf_type type;
    union {
        uint64_t u64;
        int64_t i64;
        double f64;
        struct gguf_str str;
        struct {
            enum gguf_type elem;
            uint64_t n;
            struct gguf_value *items; /* [n], owned by the file */
        } arr;
    };
};

struct gguf_kv {
    struct gguf_str key;
    struct gguf_value val;
};

struct gguf_tensor {
    struct gguf_str name;
    uint32_t n_dims;
    uint64_t ne[4];  /* ne[0] is the innermost (contiguous) dimension */
    uint32_t type;   /* enum dq_type */
    uint64_t offset; /* from the start of the data section */
    uint64_t n_elems;
    uint64_t n_bytes;
    const void *data; /* into the mapping; validated to lie inside the file */
};

struct gguf_file {
    uint32_t version;
    uint64_t n_kv;
    struct gguf_kv *kv;
    uint64_t n_tensors;
    struct gguf_tensor *tensors;
    uint64_t alignment;
    uint64_t data_offset;
    const uint8_t *base; /* the whole file */
    size_t size;
    void *map; /* non-NULL when gguf_open mapped it */
};

/* Maps and parses a GGUF v2/v3 file.  Every count, offset and size is checked
 * against the file; a bad file gets -1 and a message naming the problem. */
int gguf_open(const char *path, struct gguf_file **out, char *err, size_t errlen);
/* Parses a buffer already in memory, which must outlive the result. */
int gguf_parse(const void *buf, size_t size, struct gguf_file **out, char *err, size_t errlen);
void gguf_close(struct gguf_file *f);

/* Lookups; NULL when absent. */
const struct gguf_value *gguf_get(const struct gguf_file *f, const char *key);
const struct gguf_tensor *gguf_tensor(const struct gguf_file *f, const char *name);
/* Typed lookups: 0 when present and convertible, -1 otherwise (out untouched). */
int gguf_get_u32(const struct gguf_file *f, const char *key, uint32_t *out);
int gguf_get_f32(const struct gguf_file *f, const char *key, float *out);
/* A string value copied into a NUL-terminated malloc'd string; NULL if absent. */
char *gguf_get_strdup(const struct gguf_file *f, const char *key);
/* 1 when the two strings are equal. */
int gguf_str_eq(struct gguf_str s, const char *c);

/* ========================================================= dequantisation */

enum dq_type {
    DQ_F32 = 0,
    DQ_F16 = 1,
    DQ_Q4_0 = 2,
    DQ_Q4_1 = 3,
    DQ_Q8_0 = 8,
    DQ_Q4_K = 12,
    DQ_Q6_K = 14,
    DQ_BF16 = 30,
};

/* Elements per block and bytes per block of a weight type; 0 when unknown. */
size_t dq_block_elems(uint32_t type);
size_t dq_block_bytes(uint32_t type);
/* A short name ("Q4_1"), or NULL when unknown. */
const char *dq_type_name(uint32_t type);
/* Bytes that n elements take; 0 when the type is unknown or n is not a
 * whole number of blocks. */
size_t dq_row_bytes(uint32_t type, uint64_t n);
/* Dequantises n elements (a whole number of blocks) into dst; -1 when the
 * type is not supported. */
int dq_dequant(uint32_t type, const void *src, float *dst, size_t n);
float dq_f16_to_f32(uint16_t h);
float dq_bf16_to_f32(uint16_t h);

/* ============================================================== tokenizer */

struct tok; /* immutable after load: safe to share between threads */

enum tok_flags {
    TOK_ADD_BOS = 1,       /* prepend BOS when the vocabulary asks for it */
    TOK_PARSE_SPECIAL = 2, /* text like "<|im_start|>" becomes its special token */
};

/* Builds the tokenizer that the file's tokenizer.ggml.* metadata describes
 * (byte-level BPE "gpt2" or SentencePiece-style "llama"). */
int tok_load(const struct gguf_file *f, struct tok **out, char *err, size_t errlen);
void tok_free(struct tok *t);

/* Tokenizes len bytes of text.  Returns the number of tokens and sets *ids to
 * a malloc'd array the caller frees, or -1 on failure. */
int tok_encode(const struct tok *t, const char *text, size_t len, unsigned flags, int32_t **ids);

int tok_vocab_size(const struct tok *t);
int32_t tok_bos(const struct tok *t); /* -1 when the vocabulary has none */
int32_t tok_eos(const struct tok *t);
int tok_add_bos(const struct tok *t); /* 1 when encoding should start with BOS */
/* 1 when the token ends generation (EOS, EOT, <|im_end|> ...). */
int tok_is_eog(const struct tok *t, int32_t id);
/* 1 for control tokens, which detokenization leaves out. */
int tok_is_control(const struct tok *t, int32_t id);
/* The token's text as stored in the vocabulary, NUL-terminated; NULL when out of range. */
const char *tok_text(const struct tok *t, int32_t id);
/* Looks a token up by its exact vocabulary text; -1 when absent. */
int32_t tok_find(const struct tok *t, const char *text);

/* Incremental decoding: push token ids one at a time; only complete UTF-8
 * sequences come out, so no output ever ends in a broken character. */
struct tok_stream {
    uint8_t pending[8]; /* an incomplete UTF-8 sequence held back */
    int n_pending;
    int n_tokens; /* tokens pushed so far */
};
/* Bytes the longest token can decode to, plus what a stream may hold back. */
size_t tok_max_piece(const struct tok *t);
/* Appends the decoded bytes of id to out (capacity cap >= tok_max_piece())
 * and returns how many were written.  Control tokens decode to nothing. */
size_t tok_stream_push(const struct tok *t, struct tok_stream *s, int32_t id, char *out,
                       size_t cap);
/* Emits what is still held back (an incomplete sequence becomes U+FFFD). */
size_t tok_stream_flush(const struct tok *t, struct tok_stream *s, char *out, size_t cap);
/* Whole-sequence decoding into a malloc'd NUL-terminated string. */
char *tok_decode(const struct tok *t, const int32_t *ids, size_t n);

/* ========================================================= chat templates */

struct tmpl; /* a recognised chat template */

struct chat_msg {
    const char *role; /* "system", "user", "assistant" */
    const char *content;
};

/* Recognises the Jinja source of tokenizer.chat_template (ChatML,
 * Llama-3, Llama-2/Mistral ...).  name, when not NULL, picks a template by
 * name instead ("chatml", "llama3", "llama2", "mistral").  An unknown
 * template is an error. */
int tmpl_load(const char *jinja, const char *name, const struct tok *t, struct tmpl **out,
              char *err, size_t errlen);
void tmpl_free(struct tmpl *tp);
const char *tmpl_name(const struct tmpl *tp);
/* Renders messages into prompt text (special tokens as text, to be encoded
 * with TOK_PARSE_SPECIAL); add_gen appends the assistant's opening.  Returns
 * a malloc'd string, or NULL with a message (e.g. a bad role). */
char *tmpl_apply(const struct tmpl *tp, const struct chat_msg *msgs, size_t n, int add_gen,
                 char *err, size_t errlen);

/* ================================================================= model */

enum model_rope_scaling { ROPE_SCALING_NONE, ROPE_SCALING_LINEAR, ROPE_SCALING_LLAMA3 };

struct model_config {
    char arch[32];
    int n_layers;
    int n_embd;
    int n_heads;
    int n_kv_heads;
    int head_dim;
    int n_ff;
    int n_vocab;
    int n_ctx_train;
    float rms_eps;
    float rope_base;
    int rope_neox; /* qwen2-style rotation of halves */
    enum model_rope_scaling rope_scaling;
    float rope_factor;
    int tied_output; /* output head shares the token embedding */
};

struct model_opts {
    const char *template_name; /* overrides tokenizer.chat_template; NULL: detect */
};

struct model; /* weights on a backend + tokenizer + template */

/* Loads a GGUF model onto backend be (which must outlive the model).  A bad
 * file, an unknown architecture or weight type is a one-line error. */
int model_load(const char *path, const struct model_opts *opts, struct be *be, struct model **out,
               char *err, size_t errlen);
void model_free(struct model *m);
const struct model_config *model_config(const struct model *m);
const struct tok *model_tok(const struct model *m);
const struct tmpl *model_tmpl(const struct model *m);
struct be *model_backend(const struct model *m);
/* Geometry of a KV pool for this model with blocks of block_size tokens. */
struct be_kv_geom model_kv_geom(const struct model *m, int block_size);

/* One forward pass over a flat batch (see kernels/backend.h) with the K/V
 * pool kv; writes n_out × n_vocab logits to host memory. */
int model_forward(struct model *m, struct be_buf *kv, const struct be_kv_geom *g,
                  const struct be_batch *bt, float *logits, char *err, size_t errlen);
/* model_forward that asks stop(arg) between layers and gives the pass up
 * when it says so: 1 then (no logits; K/V of the batch's positions may be
 * partly written), 0 when done, -1 on error. */
int model_forward_until(struct model *m, struct be_buf *kv, const struct be_kv_geom *g,
                        const struct be_batch *bt, float *logits, int (*stop)(void *), void *arg,
                        char *err, size_t errlen);

/* ============================================================== sampling */

#define SMP_MAX_LOGPROBS 20

struct smp_params {
    float temperature;        /* 0: greedy */
    int top_k;                /* 0: off */
    float top_p;              /* 1: off */
    float min_p;              /* 0: off */
    float presence_penalty;   /* OpenAI: subtract once per generated token seen */
    float frequency_penalty;  /* OpenAI: subtract per occurrence in generated text */
    float repetition_penalty; /* 1: off; CTRL-style over prompt and output */
    uint64_t seed;
    int n_logprobs; /* top alternatives to report, 0..SMP_MAX_LOGPROBS */
};

/* Default parameters: greedy off (temperature 1), every filter off. */
void smp_params_default(struct smp_params *p);

/* Log-probabilities of one sampled token, under the model's distribution
 * (the raw logits' log-softmax). */
struct smp_logprob {
    int32_t token;
    float logprob;
    int n_top;
    int32_t top_token[SMP_MAX_LOGPROBS];
    float top_logprob[SMP_MAX_LOGPROBS];
};

struct smp_seq; /* per-sequence sampler: RNG and token counts */

struct smp_seq *smp_seq_new(const struct smp_params *p);
void smp_seq_free(struct smp_seq *s);
/* Records a prompt token (for the repetition penalty only). */
void smp_seq_prompt(struct smp_seq *s, int32_t token);
/* Records a generated token (all penalties). */
void smp_seq_accept(struct smp_seq *s, int32_t token);
/* Picks the next token from n_vocab logits (scratch: modified in place).
 * When lp is not NULL it receives the log-probabilities. */
int32_t smp_sample(struct smp_seq *s, float *logits, int n_vocab, struct smp_logprob *lp);

#endif
