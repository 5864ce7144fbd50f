/*
 * engine/offline.c — offline generation over flat batches.
 *
 * Each step packs the batch the way the serving scheduler does: every
 * decoding sequence contributes its one new token first, then sequences
 * still reading their prompt contribute chunks until the token budget is
 * spent.  K/V blocks are taken from the pool as positions are reached and
 * returned when a sequence finishes.  There is no preemption here: a pool
 * too small for the work in flight is an error.
 */
#include "engine/eng_internal.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct gseq {
    const struct eng_gen_req *req;
    struct eng_gen_out *out;
    struct kv_table table;
    struct smp_seq *smp;
    int32_t *tokens; /* [n_prompt + max_tokens]: prompt, then generated */
    int n_fed;       /* tokens whose K/V is in the pool */
    int done;
};

/* One step's batch: the shared flat-batch arrays plus, per scheduled
 * sequence, its chunk length and index into seqs. */
struct gbatch {
    struct eng_batch fb;
    int32_t *chunk, *seq_of, *out_seq;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int seq_len(const struct gseq *s)
{
    return s->req->n_prompt + s->out->n;
}

static void gbatch_free(struct gbatch *b)
{
    eng_batch_free(&b->fb);
    free(b->chunk);
    free(b->seq_of);
    free(b->out_seq);
}

static int gbatch_alloc(struct gbatch *b, int max_seqs)
{
    size_t sq = (size_t)max_seqs + 1;
    b->chunk = malloc(4 * sq);
    b->seq_of = malloc(4 * sq);
    b->out_seq = malloc(4 * sq);
    return b->chunk && b->seq_of && b->out_seq ? 0 : -1;
}

/* Chooses this step's work: decodes first, then prefill chunks.  Returns the
 * number of scheduled sequences, filling chunk[] and seq_of[]. */
static int plan_step(struct gseq *seqs, int n, struct kv_pool *pool, const struct eng_gen_opts *o,
                     struct gbatch *b)
{
    int budget = o->max_batch_tokens, k = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n && k < o->max_seqs && budget > 0; i++) {
            struct gseq *s = &seqs[i];
            int decoding = s->n_fed >= s->req->n_prompt;
            if (s->done || decoding != (pass == 0))
                continue;
            int want = seq_len(s) - s->n_fed;
            int c = want < budget ? want : budget;
            if (kv_table_reserve(pool, &s->table, s->n_fed + c) != 0)
                continue; /* not enough blocks now: wait for others to finish */
            b->chunk[k] = c;
            b->seq_of[k++] = i;
            budget -= c;
        }
    }
    return k;
}

/* Lays the planned sequences out as one flat batch; -1 when memory is short. */
static int build_batch(struct gseq *seqs, int k, int bs, int n_vocab, struct gbatch *b,
                       struct be_batch *bt)
{
    eng_batch_begin(&b->fb);
    for (int j = 0; j < k; j++) {
        struct gseq *s = &seqs[b->seq_of[j]];
        int want = s->n_fed + b->chunk[j] == seq_len(s);
        int row = eng_batch_add(&b->fb, &s->table, bs, s->tokens, s->n_fed, b->chunk[j], want);
        if (row == -2)
            return -1;
        if (row >= 0)
            b->out_seq[row] = b->seq_of[j];
    }
    eng_batch_finish(&b->fb, bt);
    return eng_batch_logits(&b->fb, n_vocab);
}

static float top2_gap(const float *l, int n)
{
    float a = -FLT_MAX, c = -FLT_MAX;
    for (int i = 0; i < n; i++) {
        if (l[i] > a) {
            c = a;
            a = l[i];
        } else if (l[i] > c) {
            c = l[i];
        }
    }
    return a - c;
}

/* Samples the next token of sequence s from its logits; 1 when it finished. */
static int seq_next(struct gseq *s, const struct tok *tk, float *logits, int n_vocab)
{
    struct eng_gen_out *out = s->out;
    out->gap[out->n] = top2_gap(logits, n_vocab);
    struct smp_logprob *lp = out->lp ? &out->lp[out->n] : NULL;
    int32_t id = smp_sample(s->smp, logits, n_vocab, lp);
    smp_seq_accept(s->smp, id);
    s->tokens[s->req->n_prompt + out->n] = id;
    out->ids[out->n++] = id;
    if (s->req->stop_at_eog && tok_is_eog(tk, id)) {
        out->eog = 1;
        return 1;
    }
    return out->n >= s->req->max_tokens;
}

static int seqs_init(struct gseq *seqs, const struct eng_gen_req *reqs, int n,
                     struct eng_gen_out *outs, char *err, size_t errlen)
{
    for (int i = 0; i < n; i++) {
        const struct eng_gen_req *r = &reqs[i];
        struct eng_gen_out *out = &outs[i];
        seqs[i].req = r;
        seqs[i].out = out;
        if (r->n_prompt < 1 || r->max_tokens < 0) {
            snprintf(err, errlen, "engine: request %d: empty prompt or negative max_tokens", i);
            return -1;
        }
        size_t cap = (size_t)r->max_tokens + 1;
        out->ids = malloc(sizeof(int32_t) * cap);
        out->gap = malloc(sizeof(float) * cap);
        out->lp = r->smp.n_logprobs > 0 ? calloc(cap, sizeof(struct smp_logprob)) : NULL;
        seqs[i].smp = smp_seq_new(&r->smp);
        seqs[i].tokens = malloc(sizeof(int32_t) * ((size_t)r->n_prompt + cap));
        if (!out->ids || !out->gap || (r->smp.n_logprobs > 0 && !out->lp) || !seqs[i].smp ||
            !seqs[i].tokens) {
            snprintf(err, errlen, "engine: out of memory");
            return -1;
        }
        memcpy(seqs[i].tokens, r->prompt, sizeof(int32_t) * (size_t)r->n_prompt);
        for (int p = 0; p < r->n_prompt; p++)
            smp_seq_prompt(seqs[i].smp, r->prompt[p]);
        seqs[i].done = r->max_tokens == 0;
    }
    return 0;
}

/* Runs steps until every sequence is done. */
static int run_steps(struct model *m, struct gseq *seqs, int n, struct kv_pool *pool,
                     struct be_buf *kv, const struct be_kv_geom *g, const struct eng_gen_opts *o,
                     struct gbatch *b, struct eng_gen_stats *st, char *err, size_t errlen)
{
    const struct model_config *c = model_config(m);
    for (;;) {
        int left = 0;
        for (int i = 0; i < n; i++)
            left += !seqs[i].done;
        if (!left)
            return 0;
        int k = plan_step(seqs, n, pool, o, b);
        if (k == 0) {
            snprintf(err, errlen, "engine: KV pool of %d blocks is too small for the work",
                     kv_pool_blocks(pool));
            return -1;
        }
        struct be_batch bt;
        if (build_batch(seqs, k, g->block_size, c->n_vocab, b, &bt)) {
            snprintf(err, errlen, "engine: out of memory");
            return -1;
        }
        double t0 = now_s();
        if (model_forward(m, kv, g, &bt, b->fb.logits, err, errlen))
            return -1;
        double dt = now_s() - t0;
        int n_dec = 0;
        for (int j = 0; j < k; j++) {
            struct gseq *s = &seqs[b->seq_of[j]];
            n_dec += s->n_fed >= s->req->n_prompt;
            s->n_fed += b->chunk[j];
        }
        st->steps++;
        st->decode_tokens += n_dec;
        st->prefill_tokens += bt.n_tokens - n_dec;
        *(n_dec == bt.n_tokens ? &st->decode_s : n_dec == 0 ? &st->prefill_s : &st->mixed_s) += dt;
        for (int j = 0; j < bt.n_out; j++) {
            struct gseq *s = &seqs[b->out_seq[j]];
            if (seq_next(s, model_tok(m), b->fb.logits + (size_t)j * c->n_vocab, c->n_vocab)) {
                s->done = 1;
                kv_table_release(pool, &s->table);
            }
        }
    }
}

static int default_blocks(const struct eng_gen_req *reqs, int n, int bs)
{
    long total = 1;
    for (int i = 0; i < n; i++)
        total += (reqs[i].n_prompt + reqs[i].max_tokens + bs - 1) / bs;
    return total > (1 << 24) ? (1 << 24) : (int)total;
}

int eng_generate(struct model *m, const struct eng_gen_opts *opts, const struct eng_gen_req *reqs,
                 int n, struct eng_gen_out *outs, struct eng_gen_stats *stats, char *err,
                 size_t errlen)
{
    struct eng_gen_opts o = opts ? *opts : (struct eng_gen_opts){0};
    struct eng_gen_stats st_local = {0};
    struct eng_gen_stats *st = stats ? stats : &st_local;
    memset(st, 0, sizeof(*st));
    memset(outs, 0, sizeof(*outs) * (size_t)(n > 0 ? n : 0));
    o.block_size = o.block_size > 0 ? o.block_size : 16;
    o.max_batch_tokens = o.max_batch_tokens > 0 ? o.max_batch_tokens : 512;
    o.max_seqs = o.max_seqs > 0 ? o.max_seqs : 256;
    o.n_blocks = o.n_blocks > 0 ? o.n_blocks : default_blocks(reqs, n, o.block_size);

    struct be *be = model_backend(m);
    struct be_kv_geom g = model_kv_geom(m, o.block_size);
    struct gseq *seqs = calloc((size_t)(n > 0 ? n : 1), sizeof(*seqs));
    struct kv_pool_opts po = {.n_blocks = o.n_blocks, .block_size = o.block_size};
    struct kv_pool *pool = kv_pool_new(&po);
    struct be_buf *kv = be->ops->alloc(be, sizeof(float) * be_kv_block_elems(&g) * o.n_blocks);
    struct gbatch b = {0};
    int rc = -1;
    if (!seqs || !pool || !kv || gbatch_alloc(&b, o.max_seqs))
        snprintf(err, errlen, "engine: cannot allocate a KV pool of %d blocks", o.n_blocks);
    else if (seqs_init(seqs, reqs, n, outs, err, errlen) == 0)
        rc = run_steps(m, seqs, n, pool, kv, &g, &o, &b, st, err, errlen);
    for (int i = 0; seqs && i < n; i++) {
        if (pool)
            kv_table_release(pool, &seqs[i].table);
        smp_seq_free(seqs[i].smp);
        free(seqs[i].tokens);
        if (rc)
            eng_gen_out_free(&outs[i]);
    }
    gbatch_free(&b);
    be->ops->free(be, kv);
    kv_pool_free(pool);
    free(seqs);
    return rc;
}

void eng_gen_out_free(struct eng_gen_out *out)
{
    free(out->ids);
    free(out->gap);
    free(out->lp);
    memset(out, 0, sizeof(*out));
}
