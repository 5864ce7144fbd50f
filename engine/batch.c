/*
 * engine/batch.c — laying sequences out as one flat batch.
 *
 * Each scheduled sequence contributes a run of consecutive positions
 * (a prefill chunk, or the one token of a decode), its whole block table,
 * and, when its last fed position is the newest token, one logits row.
 * Arrays grow as needed and are reused from step to step.
 */
#include "engine/eng_internal.h"

#include <stdlib.h>
#include <string.h>

static int batch_grow(int32_t **a, int *cap, int need)
{
    if (need <= *cap)
        return 0;
    int c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    int32_t *n = realloc(*a, sizeof(int32_t) * (size_t)c);
    if (!n)
        return -1;
    *a = n;
    *cap = c;
    return 0;
}

void eng_batch_begin(struct eng_batch *b)
{
    b->n_tokens = b->n_seqs = b->n_blocks = b->n_out = 0;
}

/* Capacity for one more sequence of n tokens and nb blocks. */
static int batch_reserve(struct eng_batch *b, int n, int nb)
{
    int t = b->n_tokens + n, s = b->n_seqs + 2;
    return batch_grow(&b->tokens, &b->cap_tokens, t) || batch_grow(&b->pos, &b->cap_pos, t) ||
           batch_grow(&b->slot, &b->cap_slot, t) || batch_grow(&b->q_off, &b->cap_q, s) ||
           batch_grow(&b->bt_off, &b->cap_bt, s) || batch_grow(&b->out_rows, &b->cap_out, s) ||
           batch_grow(&b->blocks, &b->cap_blocks, b->n_blocks + nb);
}

int eng_batch_add(struct eng_batch *b, const struct kv_table *t, int block_size,
                  const int32_t *tokens, int start, int n, int want_logits)
{
    if (batch_reserve(b, n, t->n_blocks))
        return -2;
    b->q_off[b->n_seqs] = b->n_tokens;
    b->bt_off[b->n_seqs] = b->n_blocks;
    for (int p = start; p < start + n; p++, b->n_tokens++) {
        b->tokens[b->n_tokens] = tokens[p];
        b->pos[b->n_tokens] = p;
        b->slot[b->n_tokens] = kv_table_slot(t, block_size, p);
    }
    memcpy(b->blocks + b->n_blocks, t->blocks, sizeof(int32_t) * (size_t)t->n_blocks);
    b->n_blocks += t->n_blocks;
    b->n_seqs++;
    if (!want_logits)
        return -1;
    b->out_rows[b->n_out] = b->n_tokens - 1;
    return b->n_out++;
}

void eng_batch_finish(struct eng_batch *b, struct be_batch *bt)
{
    b->q_off[b->n_seqs] = b->n_tokens;
    b->bt_off[b->n_seqs] = b->n_blocks;
    *bt = (struct be_batch){.n_tokens = b->n_tokens,
                            .tokens = b->tokens,
                            .pos = b->pos,
                            .slot = b->slot,
                            .n_seqs = b->n_seqs,
                            .q_off = b->q_off,
                            .bt_off = b->bt_off,
                            .block_tables = b->blocks,
                            .n_out = b->n_out,
                            .out_rows = b->out_rows};
}

int eng_batch_logits(struct eng_batch *b, int n_vocab)
{
    size_t need = (size_t)(b->n_out > 0 ? b->n_out : 1) * (size_t)n_vocab;
    if (need <= b->cap_logits)
        return 0;
    float *l = realloc(b->logits, sizeof(float) * need);
    if (!l)
        return -1;
    b->logits = l;
    b->cap_logits = need;
    return 0;
}

void eng_batch_free(struct eng_batch *b)
{
    free(b->tokens);
    free(b->pos);
    free(b->slot);
    free(b->q_off);
    free(b->bt_off);
    free(b->blocks);
    free(b->out_rows);
    free(b->logits);
    memset(b, 0, sizeof(*b));
}
