/*
 * model/tok_decode.c — token ids back to text, whole or incrementally.
 *
 * Every token's bytes are worked out once at build time (GPT-2 stand-in
 * characters mapped back to bytes, "▁" to space, <0xNN> to its byte, control
 * tokens to nothing).  A stream then only has to keep UTF-8 whole: a token
 * may end in the middle of a character (byte-level BPE splits emoji across
 * tokens), so a trailing incomplete sequence is held back until the next
 * token completes it, and anything that cannot become valid UTF-8 is written
 * as U+FFFD at once, one per maximal invalid subpart, as Unicode recommends.
 */
#include <stdlib.h>
#include <string.h>

#include "model/tok_internal.h"

/* ------------------------------------------------- per-token pieces */

/* "<0xNN>" -> NN, or -1. */
static int tok_byte_of(const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    const char *hi = memchr(hex, s[3], 16), *lo = memchr(hex, s[4], 16);
    if (!s[3] || !s[4] || !hi || !lo)
        return -1;
    return (int)((hi - hex) * 16 + (lo - hex));
}

/* Maps GPT-2 stand-in characters back to their bytes; anything else
 * (text a converter stored verbatim) is kept as it is. */
static size_t tok_unmap_bpe(const struct tok *t, const char *s, size_t n, char *out)
{
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        uint8_t c = (uint8_t)s[i];
        size_t cl = tok_utf8_len(c);
        cl = cl < n - i ? cl : n - i;
        unsigned cp = c;
        if (cl == 2)
            cp = (unsigned)(c & 0x1F) << 6 | ((uint8_t)s[i + 1] & 0x3F);
        if (cl <= 2 && cp < 512 && t->cp_byte[cp] >= 0) {
            out[m++] = (char)t->cp_byte[cp];
        } else {
            memcpy(out + m, s + i, cl);
            m += cl;
        }
        i += cl;
    }
    return m;
}

static size_t tok_unescape_spm(const char *s, size_t n, char *out)
{
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        if (n - i >= 3 && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
            out[m++] = ' ';
            i += 3;
        } else {
            out[m++] = s[i++];
        }
    }
    return m;
}

/* The bytes token id stands for; never longer than its text. */
static size_t tok_piece_of(const struct tok *t, int32_t id, char *out)
{
    const char *s = t->strs + t->off[id];
    size_t n = t->len[id];
    uint8_t a = t->attr[id];
    if (a & (TOKF_CONTROL | TOKF_UNKNOWN))
        return 0;
    if (a & TOKF_USER) {
        memcpy(out, s, n);
        return n;
    }
    if (a & TOKF_BYTE) {
        int b = tok_byte_of(s, n);
        if (b >= 0) {
            out[0] = (char)b;
            return 1;
        }
        return t->kind == TOK_KIND_BPE ? tok_unmap_bpe(t, s, n, out) : 0;
    }
    if (!(a & TOKF_NORMAL))
        return 0; /* unused / undefined types */
    return t->kind == TOK_KIND_BPE ? tok_unmap_bpe(t, s, n, out) : tok_unescape_spm(s, n, out);
}

int tok_pieces_init(struct tok *t, char *err, size_t errlen)
{
    size_t total = 0;
    for (int i = 0; i < t->n_vocab; i++)
        total += t->len[i];
    t->dec = malloc(total ? total : 1);
    t->dec_off = malloc(sizeof(*t->dec_off) * (size_t)t->n_vocab);
    t->dec_len = malloc(sizeof(*t->dec_len) * (size_t)t->n_vocab);
    if (!t->dec || !t->dec_off || !t->dec_len)
        return tok_fail(err, errlen, "tokenizer: out of memory");
    size_t at = 0;
    t->max_dec = 0;
    for (int i = 0; i < t->n_vocab; i++) {
        size_t n = tok_piece_of(t, i, t->dec + at);
        t->dec_off[i] = (uint32_t)at;
        t->dec_len[i] = (uint32_t)n;
        at += n;
        if (n > t->max_dec)
            t->max_dec = n;
    }
    return 0;
}

/* ------------------------------------------------------- streaming */

struct tok_out {
    char *p;
    size_t n, cap;
};

/* Never writes past cap; a caller honouring tok_max_piece() never hits it. */
static void tok_put(struct tok_out *o, const void *s, size_t n)
{
    if (n > o->cap - o->n)
        return;
    memcpy(o->p + o->n, s, n);
    o->n += n;
}

static void tok_put_fffd(struct tok_out *o)
{
    tok_put(o, "\xEF\xBF\xBD", 3);
}

/* Length of the sequence lead byte c starts; 0 when c cannot start one. */
static int tok_utf8_need(uint8_t c)
{
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        return 2;
    if (c >= 0xE0 && c <= 0xEF)
        return 3;
    if (c >= 0xF0 && c <= 0xF4)
        return 4;
    return 0;
}

/* Whether c may follow lead as its k-th byte (k >= 1): the second byte's
 * range excludes overlong forms, surrogates and code points past U+10FFFF. */
static int tok_utf8_follows(uint8_t lead, int k, uint8_t c)
{
    uint8_t lo = 0x80, hi = 0xBF;
    if (k == 1) {
        if (lead == 0xE0)
            lo = 0xA0;
        else if (lead == 0xED)
            hi = 0x9F;
        else if (lead == 0xF0)
            lo = 0x90;
        else if (lead == 0xF4)
            hi = 0x8F;
    }
    return c >= lo && c <= hi;
}

/* Adds one byte to what the stream holds; emits what is decided. */
static void tok_feed(struct tok_stream *s, uint8_t c, struct tok_out *o)
{
    for (;;) {
        if (s->n_pending == 0) {
            int need = tok_utf8_need(c);
            if (need == 1)
                tok_put(o, &c, 1);
            else if (need == 0)
                tok_put_fffd(o);
            else
                s->pending[s->n_pending++] = c;
            return;
        }
        if (!tok_utf8_follows(s->pending[0], s->n_pending, c)) {
            tok_put_fffd(o); /* the held prefix can never complete */
            s->n_pending = 0;
            continue; /* c may start a sequence of its own */
        }
        s->pending[s->n_pending++] = c;
        if (s->n_pending == tok_utf8_need(s->pending[0])) {
            tok_put(o, s->pending, (size_t)s->n_pending);
            s->n_pending = 0;
        }
        return;
    }
}

/* A piece can grow by a factor of three (every byte invalid, each one
 * U+FFFD), plus what was held back. */
size_t tok_max_piece(const struct tok *t)
{
    return t ? 3 * (t->max_dec + 4) : 0;
}

/* The first token of a SentencePiece stream loses the space that encoding
 * prefixed.  A stream that continues a prompt (generated text) should start
 * with n_tokens set to the prompt's length so that nothing is dropped. */
size_t tok_stream_push(const struct tok *t, struct tok_stream *s, int32_t id, char *out, size_t cap)
{
    if (!t || !s || !out)
        return 0;
    if (s->n_pending < 0 || s->n_pending > 3)
        s->n_pending = 0;
    struct tok_out o = {out, 0, cap};
    const char *p = "";
    size_t n = 0;
    if (id >= 0 && id < t->n_vocab) {
        p = t->dec + t->dec_off[id];
        n = t->dec_len[id];
    }
    if (t->add_space_prefix && s->n_tokens == 0 && n && p[0] == ' ') {
        p++;
        n--;
    }
    s->n_tokens++;
    for (size_t i = 0; i < n; i++)
        tok_feed(s, (uint8_t)p[i], &o);
    return o.n;
}

size_t tok_stream_flush(const struct tok *t, struct tok_stream *s, char *out, size_t cap)
{
    (void)t;
    if (!s || !out)
        return 0;
    struct tok_out o = {out, 0, cap};
    if (s->n_pending > 0)
        tok_put_fffd(&o);
    s->n_pending = 0;
    return o.n;
}

char *tok_decode(const struct tok *t, const int32_t *ids, size_t n)
{
    if (!t || (!ids && n))
        return NULL;
    struct tok_stream s = {0};
    size_t step = tok_max_piece(t), used = 0, cap = 0;
    char *buf = NULL;
    for (size_t i = 0; i <= n; i++) {
        if (tok_scratch_reserve((void **)&buf, &cap, used + step + 1, 1)) {
            free(buf);
            return NULL;
        }
        if (i < n)
            used += tok_stream_push(t, &s, ids[i], buf + used, cap - used);
        else
            used += tok_stream_flush(t, &s, buf + used, cap - used);
    }
    buf[used] = '\0';
    return buf;
}
