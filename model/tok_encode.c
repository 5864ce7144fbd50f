/*
 * model/tok_encode.c — text to token ids: special tokens first, then the
 * vocabulary's algorithm on the plain text in between.
 *
 * Special tokens are cut out the way llama.cpp does it, so that ids match
 * the reference exactly: for each special token in turn, longest text first,
 * every occurrence in every still-plain fragment becomes that token.
 * User-defined tokens are always cut out (Hugging Face's "added tokens");
 * control and unknown tokens only with TOK_PARSE_SPECIAL, otherwise their
 * text is ordinary text.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "model/tok_internal.h"

int tok_scratch_reserve(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    if (n > SIZE_MAX / elem)
        return -1;
    void *q = realloc(*p, n * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

void tok_scratch_free(struct tok_scratch *s)
{
    free(s->sym);
    free(s->heap);
    free(s->buf);
    pcre2_match_data_free(s->md);
}

int tok_ids_push(struct tok_ids *a, int32_t id)
{
    if (tok_scratch_reserve((void **)&a->v, &a->cap, a->n + 1, sizeof(*a->v)))
        return -1;
    a->v[a->n++] = id;
    return 0;
}

/* A stretch of the input: plain text (id < 0) or one special token. */
struct tok_frag {
    size_t start, len;
    int32_t id;
};

struct tok_frags {
    struct tok_frag *v;
    size_t n, cap;
};

static int tok_frags_push(struct tok_frags *a, size_t start, size_t len, int32_t id)
{
    if (tok_scratch_reserve((void **)&a->v, &a->cap, a->n + 1, sizeof(*a->v)))
        return -1;
    a->v[a->n++] = (struct tok_frag){start, len, id};
    return 0;
}

/* Splits the plain fragments of in around every occurrence of token id. */
static int tok_cut_one(const struct tok *t, const char *text, int32_t id,
                       const struct tok_frags *in, struct tok_frags *out)
{
    const char *pat = t->strs + t->off[id];
    size_t plen = t->len[id];
    out->n = 0;
    for (size_t i = 0; i < in->n; i++) {
        struct tok_frag f = in->v[i];
        if (f.id >= 0 || f.len < plen) {
            if (tok_frags_push(out, f.start, f.len, f.id))
                return -1;
            continue;
        }
        size_t pos = f.start, end = f.start + f.len;
        const char *hit;
        while (end - pos >= plen && (hit = memmem(text + pos, end - pos, pat, plen))) {
            size_t at = (size_t)(hit - text);
            if ((at > pos && tok_frags_push(out, pos, at - pos, -1)) ||
                tok_frags_push(out, at, plen, id))
                return -1;
            pos = at + plen;
        }
        if (pos < end && tok_frags_push(out, pos, end - pos, -1))
            return -1;
    }
    return 0;
}

static int tok_partition(const struct tok *t, const char *text, size_t len, int parse_special,
                         struct tok_frags *frags)
{
    struct tok_frags other = {0};
    frags->n = 0;
    if (len && tok_frags_push(frags, 0, len, -1))
        return -1;
    for (int k = 0; k < t->n_special && frags->n; k++) {
        int32_t id = t->special[k];
        if (!parse_special && (t->attr[id] & (TOKF_CONTROL | TOKF_UNKNOWN)))
            continue;
        if (tok_cut_one(t, text, id, frags, &other)) {
            free(other.v);
            return -1;
        }
        struct tok_frags tmp = *frags;
        *frags = other;
        other = tmp;
    }
    free(other.v);
    return 0;
}

/* SentencePiece prefixes a space to the text at the start and after every
 * special token, as its reference implementation does. */
static int tok_encode_frags(const struct tok *t, const char *text, const struct tok_frags *fr,
                            struct tok_ids *out)
{
    struct tok_scratch s = {0};
    int rc = 0, prev_special = 1;
    for (size_t i = 0; !rc && i < fr->n; i++) {
        const struct tok_frag *f = &fr->v[i];
        if (f->id >= 0) {
            rc = tok_ids_push(out, f->id);
            prev_special = 1;
        } else if (t->kind == TOK_KIND_SPM) {
            rc = tok_spm_encode(t, &s, text + f->start, f->len, t->add_space_prefix && prev_special,
                                out);
            prev_special = 0;
        } else {
            rc = tok_bpe_encode(t, &s, text + f->start, f->len, out);
        }
    }
    tok_scratch_free(&s);
    return rc;
}

/* BOS comes first only when asked for and the vocabulary wants it.  EOS is
 * never appended (add_eos_token is kept for reference only): a prompt is
 * always continued by the model, never a finished sequence. */
int tok_encode(const struct tok *t, const char *text, size_t len, unsigned flags, int32_t **ids)
{
    if (!ids)
        return -1;
    *ids = NULL;
    if (!t || (!text && len) || len > (size_t)INT_MAX / 8)
        return -1;
    struct tok_ids out = {0};
    struct tok_frags frags = {0};
    int rc = tok_partition(t, text, len, (flags & TOK_PARSE_SPECIAL) != 0, &frags);
    if (!rc && (flags & TOK_ADD_BOS) && tok_add_bos(t))
        rc = tok_ids_push(&out, t->bos);
    if (!rc)
        rc = tok_encode_frags(t, text, &frags, &out);
    if (!rc && !out.v) /* always hand back an array, even for no tokens */
        rc = tok_scratch_reserve((void **)&out.v, &out.cap, 1, sizeof(*out.v));
    free(frags.v);
    if (rc) {
        free(out.v);
        return -1;
    }
    *ids = out.v;
    return (int)out.n;
}
