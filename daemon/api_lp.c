/*
 * daemon/api_lp.c — log-probabilities of one choice, kept until rendered in
 * OpenAI's two formats (chat's "content" list, completions' parallel lists).
 *
 * The one idea: a token's text is its raw bytes, and a byte-level tokenizer
 * splits multi-byte characters across tokens, so those bytes need not be
 * valid UTF-8.  We recover them exactly with the tokenizer's public stream
 * decoder (see lp_token_bytes), keep them as they are for chat's "bytes",
 * and only make them valid UTF-8 (U+FFFD) where they become a JSON string.
 */
#include "daemon/api.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A token's bytes: a range of the arena. */
struct lp_bytes {
    size_t at, len;
};

struct lp_entry {
    struct lp_bytes tok;
    float logprob;
    size_t text_offset;
    int n_top;
    struct lp_bytes top[SMP_MAX_LOGPROBS];
    float top_logprob[SMP_MAX_LOGPROBS];
};

struct api_lp {
    enum api_kind kind;
    struct lp_entry *ents;
    int n, cap;
    char *arena; /* every token's bytes, back to back */
    size_t used, size;
    char *scratch; /* one decoded piece */
    size_t scratch_cap;
};

struct api_lp *api_lp_new(enum api_kind kind)
{
    struct api_lp *lp = calloc(1, sizeof(*lp));
    if (lp)
        lp->kind = kind;
    return lp;
}

void api_lp_free(struct api_lp *lp)
{
    if (!lp)
        return;
    free(lp->ents);
    free(lp->arena);
    free(lp->scratch);
    free(lp);
}

int api_lp_count(const struct api_lp *lp)
{
    return lp ? lp->n : 0;
}

void api_lp_clear(struct api_lp *lp)
{
    if (!lp)
        return;
    lp->n = 0;
    lp->used = 0;
}

/* ------------------------------------------------------ token bytes -- */

/* One push of id through a stream primed with `prime` (an unfinished
 * character); returns the bytes after the prime, or -1 when the stream had
 * to replace anything (the token did not continue the prime validly). */
static long lp_decode_primed(const struct tok *t, int32_t id, const char *prime, int n_prime,
                             char *out, size_t cap)
{
    /* n_tokens = 1: a SentencePiece stream drops the leading space of its
     * first token, but the token's own text keeps it. */
    struct tok_stream s = {.n_pending = n_prime, .n_tokens = 1};
    memcpy(s.pending, prime, (size_t)n_prime);
    size_t n = tok_stream_push(t, &s, id, out, cap);
    if (n < (size_t)n_prime || memcmp(out, prime, (size_t)n_prime) != 0)
        return -1;
    if (memmem(out + n_prime, n - (size_t)n_prime, "\xEF\xBF\xBD", 3))
        return -1;
    memmove(out, out + n_prime, n - (size_t)n_prime);
    n -= (size_t)n_prime;
    /* What the stream holds back is the start of a character the next
     * token finishes: raw bytes of this token too. */
    memcpy(out + n, s.pending, (size_t)s.n_pending);
    return (long)(n + (size_t)s.n_pending);
}

/* The raw bytes of token id.  A token cut out of UTF-8 text may start with
 * up to three continuation bytes (the tail of a character) and end with the
 * head of one; the stream decoder holds the head back, and a lead byte
 * placed in front of the tail lets the decoder accept it.  A token that is
 * none of these (invalid bytes of its own) keeps the decoder's U+FFFD. */
static long lp_token_bytes(const struct tok *t, int32_t id, char *out, size_t cap)
{
    static const char *const primes[] = {"", "\xC2", "\xE1", "\xF1"};
    for (int i = 0; i < 4; i++) {
        long n = lp_decode_primed(t, id, primes[i], i ? 1 : 0, out, cap);
        if (n >= 0)
            return n;
    }
    struct tok_stream s = {.n_tokens = 1};
    size_t n = tok_stream_push(t, &s, id, out, cap);
    return (long)(n + tok_stream_flush(t, &s, out + n, cap - n));
}

/* Control tokens decode to nothing; their vocabulary text ("<|im_end|>")
 * says more, as other servers show it. */
static int lp_piece(struct api_lp *lp, const struct tok *t, int32_t id, struct lp_bytes *b)
{
    size_t need = tok_max_piece(t) + 16;
    if (need > lp->scratch_cap) {
        char *s = realloc(lp->scratch, need);
        if (!s)
            return -1;
        lp->scratch = s;
        lp->scratch_cap = need;
    }
    long n = lp_token_bytes(t, id, lp->scratch, lp->scratch_cap);
    const char *src = lp->scratch;
    const char *vt = tok_text(t, id);
    if (n == 0 && vt && tok_is_control(t, id)) {
        src = vt;
        n = (long)strlen(vt);
    }
    if (lp->used + (size_t)n > lp->size) {
        size_t sz = 2 * lp->size + (size_t)n + 256;
        char *a = realloc(lp->arena, sz);
        if (!a)
            return -1;
        lp->arena = a;
        lp->size = sz;
    }
    memcpy(lp->arena + lp->used, src, (size_t)n);
    b->at = lp->used;
    b->len = (size_t)n;
    lp->used += (size_t)n;
    return 0;
}

int api_lp_add(struct api_lp *lp, const struct tok *t, const struct smp_logprob *l,
               size_t text_offset)
{
    if (!lp || !t || !l)
        return -1;
    if (lp->n == lp->cap) {
        int cap = lp->cap ? 2 * lp->cap : 16;
        struct lp_entry *e = realloc(lp->ents, (size_t)cap * sizeof(*e));
        if (!e)
            return -1;
        lp->ents = e;
        lp->cap = cap;
    }
    struct lp_entry *e = &lp->ents[lp->n];
    e->logprob = l->logprob;
    e->text_offset = text_offset;
    e->n_top = l->n_top < 0 ? 0 : l->n_top > SMP_MAX_LOGPROBS ? SMP_MAX_LOGPROBS : l->n_top;
    if (lp_piece(lp, t, l->token, &e->tok))
        return -1;
    for (int i = 0; i < e->n_top; i++) {
        e->top_logprob[i] = l->top_logprob[i];
        if (lp_piece(lp, t, l->top_token[i], &e->top[i]))
            return -1;
    }
    lp->n++;
    return 0;
}

/* ------------------------------------------------------------ JSON -- */

/* JSON cannot hold -inf or NaN; -9999 is what other servers send. */
static json_t *lp_real(float x)
{
    return json_real(isfinite(x) ? (double)x : -9999.0);
}

static json_t *lp_text(const struct api_lp *lp, struct lp_bytes b)
{
    return api_json_text(lp->arena + b.at, b.len);
}

/* Chat: {token, logprob, bytes} (+ top_logprobs at the outer level). */
static json_t *lp_chat_tok(const struct api_lp *lp, struct lp_bytes b, float logprob)
{
    json_t *bytes = json_array();
    for (size_t i = 0; i < b.len; i++)
        json_array_append_new(bytes, json_integer((uint8_t)lp->arena[b.at + i]));
    return json_pack("{s:o, s:o, s:o}", "token", lp_text(lp, b), "logprob", lp_real(logprob),
                     "bytes", bytes);
}

static json_t *lp_chat_json(const struct api_lp *lp, int max_top)
{
    json_t *content = json_array();
    for (int i = 0; i < lp->n; i++) {
        const struct lp_entry *e = &lp->ents[i];
        json_t *tok = lp_chat_tok(lp, e->tok, e->logprob), *tops = json_array();
        int n_top = max_top > 0 && max_top < e->n_top ? max_top : e->n_top;
        for (int j = 0; j < n_top; j++)
            json_array_append_new(tops, lp_chat_tok(lp, e->top[j], e->top_logprob[j]));
        json_object_set_new(tok, "top_logprobs", tops);
        json_array_append_new(content, tok);
    }
    return json_pack("{s:o}", "content", content);
}

/* Completions: one dict per token of its alternatives, and the sampled
 * token's own logprob always among them (as OpenAI documents). */
static json_t *lp_completion_top(const struct api_lp *lp, const struct lp_entry *e, int max_top)
{
    json_t *d = json_object();
    int n_top = max_top > 0 && max_top < e->n_top ? max_top : e->n_top;
    for (int j = n_top - 1; j >= 0; j--) {
        json_t *k = lp_text(lp, e->top[j]);
        json_object_set_new(d, json_string_value(k), lp_real(e->top_logprob[j]));
        json_decref(k);
    }
    json_t *k = lp_text(lp, e->tok);
    if (!json_object_get(d, json_string_value(k)))
        json_object_set_new(d, json_string_value(k), lp_real(e->logprob));
    json_decref(k);
    return d;
}

static json_t *lp_completion_json(const struct api_lp *lp, int max_top)
{
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (int i = 0; i < lp->n; i++) {
        const struct lp_entry *e = &lp->ents[i];
        json_array_append_new(toks, lp_text(lp, e->tok));
        json_array_append_new(lps, lp_real(e->logprob));
        json_array_append_new(tops, lp_completion_top(lp, e, max_top));
        json_array_append_new(offs, json_integer((json_int_t)e->text_offset));
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", toks, "token_logprobs", lps, "top_logprobs",
                     tops, "text_offset", offs);
}

json_t *api_lp_json(const struct api_lp *lp, int max_top)
{
    if (!lp)
        return NULL;
    return lp->kind == API_CHAT ? lp_chat_json(lp, max_top) : lp_completion_json(lp, max_top);
}
