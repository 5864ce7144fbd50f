/*
 * engine/engine.h — running the model over many sequences at once.
 *
 * eng_generate is the offline path (llmgen, tests): it takes a set of
 * requests, runs them together through flat batches — decodes first, then
 * prefill chunks filling the token budget — and returns when all are done.
 */
#ifndef LLMD_ENGINE_ENGINE_H
#define LLMD_ENGINE_ENGINE_H

#include "model/model.h"

struct eng_gen_opts {
    int block_size;       /* tokens per KV block (default 16) */
    int n_blocks;         /* KV blocks in the pool (default: enough for every request) */
    int max_batch_tokens; /* token budget of one step (default 512) */
    int max_seqs;         /* sequences in one step (default 256) */
};

struct eng_gen_req {
    const int32_t *prompt;
    int n_prompt;
    int max_tokens;  /* tokens to generate */
    int stop_at_eog; /* stop at an end-of-generation token */
    struct smp_params smp;
};

struct eng_gen_out {
    int32_t *ids;           /* [n] generated ids, malloc'd, owned by the caller */
    float *gap;             /* [n] top-1 minus top-2 logit at each step, owned by the caller */
    struct smp_logprob *lp; /* [n] when smp.n_logprobs > 0, else NULL; owned by the caller */
    int n;
    int eog; /* stopped at an end-of-generation token */
};

/* Step counters of one eng_generate call. */
struct eng_gen_stats {
    int steps;
    long prefill_tokens, decode_tokens;
    double prefill_s, decode_s, mixed_s; /* wall time of steps by kind */
};

/* Runs n requests together; outs[i] receives request i's tokens.  stats may
 * be NULL.  -1 with a message on failure (outs are then empty). */
int eng_generate(struct model *m, const struct eng_gen_opts *o, const struct eng_gen_req *reqs,
                 int n, struct eng_gen_out *outs, struct eng_gen_stats *stats, char *err,
                 size_t errlen);
void eng_gen_out_free(struct eng_gen_out *out);

#endif
