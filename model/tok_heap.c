/*
 * model/tok_heap.c — the priority queue of candidate merges.
 *
 * Both merge loops (byte-level BPE by rank, SentencePiece by score) pop the
 * best pair of neighbouring symbols, merge it and push the two new pairs it
 * creates; stale entries are skipped when popped.  One heap over
 * fixed-size elements serves both.
 */
#include <assert.h>
#include <string.h>

#include "model/tok_internal.h"

static void *tok_heap_at(const struct tok_heap *h, size_t i)
{
    return (char *)h->v + i * h->size;
}

void tok_heap_push(struct tok_heap *h, const void *e)
{
    assert(h->size <= TOK_HEAP_MAX_ELEM);
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!h->less(e, tok_heap_at(h, parent)))
            break;
        memcpy(tok_heap_at(h, i), tok_heap_at(h, parent), h->size);
        i = parent;
    }
    memcpy(tok_heap_at(h, i), e, h->size);
}

void tok_heap_pop(struct tok_heap *h, void *out)
{
    unsigned char last[TOK_HEAP_MAX_ELEM];
    memcpy(out, h->v, h->size);
    memcpy(last, tok_heap_at(h, --h->n), h->size);
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->less(tok_heap_at(h, c + 1), tok_heap_at(h, c)))
            c++;
        if (!h->less(tok_heap_at(h, c), last))
            break;
        memcpy(tok_heap_at(h, i), tok_heap_at(h, c), h->size);
        i = c;
    }
    if (h->n)
        memcpy(tok_heap_at(h, i), last, h->size);
}
