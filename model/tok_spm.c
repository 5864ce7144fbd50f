/*
 * model/tok_spm.c — SentencePiece-style BPE (GGUF model "llama": Llama 2,
 * Mistral and the like).
 *
 * Spaces become U+2581 ("▁"), the text is cut into UTF-8 characters, and the
 * adjacent pair whose concatenation is the highest-scoring token is merged
 * until no concatenation is a token.  What is left that is not a token (a
 * character outside the vocabulary) is spelled with the byte tokens <0xNN>.
 * Symbols are byte ranges of one buffer, so a candidate pair is always a
 * contiguous slice and is looked up without copying.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/tok_internal.h"

#define TOK_SPM_SPACE "\xE2\x96\x81" /* U+2581 LOWER ONE EIGHTH BLOCK */

int tok_spm_init(struct tok *t, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof(name), "<0x%02X>", b);
        t->byte_tok[b] = tok_lookup(t, name, 6);
    }
    return 0;
}

struct tok_spm_sym {
    uint32_t start, len; /* len 0: merged into its left neighbour */
    int32_t prev, next;
};

struct tok_spm_pair {
    float score;
    int32_t left, right;
    uint32_t len; /* both sides together; stale once either side grew */
};

/* Best first: higher score, then the leftmost pair. */
static int tok_spm_before(const void *pa, const void *pb)
{
    const struct tok_spm_pair *a = pa, *b = pb;
    return a->score != b->score ? a->score > b->score : a->left < b->left;
}

static void tok_spm_try(const struct tok *t, const char *buf, const struct tok_spm_sym *sym,
                        struct tok_heap *h, int32_t left)
{
    if (left < 0 || sym[left].next < 0)
        return;
    int32_t right = sym[left].next;
    uint32_t len = sym[left].len + sym[right].len;
    int32_t id = tok_lookup(t, buf + sym[left].start, len);
    if (id >= 0)
        tok_heap_push(h, &(struct tok_spm_pair){t->scores[id], left, right, len});
}

static void tok_spm_merge(const struct tok *t, const char *buf, struct tok_spm_sym *sym, int32_t n,
                          struct tok_heap *h)
{
    for (int32_t i = 0; i + 1 < n; i++)
        tok_spm_try(t, buf, sym, h, i);
    while (h->n) {
        struct tok_spm_pair p;
        tok_heap_pop(h, &p);
        struct tok_spm_sym *l = &sym[p.left], *r = &sym[p.right];
        if (!l->len || !r->len || l->len + r->len != p.len)
            continue;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0)
            sym[r->next].prev = p.left;
        tok_spm_try(t, buf, sym, h, l->prev);
        tok_spm_try(t, buf, sym, h, p.left);
    }
}

/* A symbol that is not a token is spelled in byte tokens. */
static int tok_spm_emit(const struct tok *t, const char *s, size_t n, struct tok_ids *out)
{
    int32_t id = tok_lookup(t, s, n);
    if (id >= 0)
        return tok_ids_push(out, id);
    for (size_t i = 0; i < n; i++) {
        id = t->byte_tok[(uint8_t)s[i]] >= 0 ? t->byte_tok[(uint8_t)s[i]] : t->unk;
        if (id >= 0 && tok_ids_push(out, id))
            return -1;
    }
    return 0;
}

/* The text with spaces escaped, and the leading space when asked for. */
static size_t tok_spm_escape(char *buf, const char *text, size_t len, int space_prefix)
{
    size_t m = 0;
    if (space_prefix) {
        memcpy(buf, TOK_SPM_SPACE, 3);
        m = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(buf + m, TOK_SPM_SPACE, 3);
            m += 3;
        } else {
            buf[m++] = text[i];
        }
    }
    return m;
}

int tok_spm_encode(const struct tok *t, struct tok_scratch *s, const char *text, size_t len,
                   int space_prefix, struct tok_ids *out)
{
    size_t cap = 3 * len + 3;
    if (len > INT32_MAX / 8 || tok_scratch_reserve((void **)&s->buf, &s->buf_cap, cap, 1))
        return -1;
    size_t n = tok_spm_escape(s->buf, text, len, space_prefix);
    if (!n)
        return 0;
    if (tok_scratch_reserve(&s->sym, &s->sym_cap, n, sizeof(struct tok_spm_sym)) ||
        tok_scratch_reserve(&s->heap, &s->heap_cap, 3 * n, sizeof(struct tok_spm_pair)))
        return -1;
    struct tok_spm_sym *sym = s->sym;
    int32_t k = 0;
    for (size_t i = 0; i < n; k++) {
        size_t cl = tok_utf8_len((uint8_t)s->buf[i]);
        cl = cl < n - i ? cl : n - i;
        sym[k] = (struct tok_spm_sym){(uint32_t)i, (uint32_t)cl, k - 1, -1};
        if (k > 0)
            sym[k - 1].next = k;
        i += cl;
    }
    struct tok_heap h = {s->heap, 0, sizeof(struct tok_spm_pair), tok_spm_before};
    tok_spm_merge(t, s->buf, sym, k, &h);
    for (int32_t i = 0; i >= 0; i = sym[i].next)
        if (tok_spm_emit(t, s->buf + sym[i].start, sym[i].len, out))
            return -1;
    return 0;
}
