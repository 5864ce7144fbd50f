/*
 * tests/unit/test_engine_util.h — what the engine suites (test_engine.c,
 * test_engine_snapshot.c) share: synthetic prompts, a greedy request and a
 * checked submit.  Static inline: each suite gets its own copy.
 */
#ifndef LLMD_TESTS_TEST_ENGINE_UTIL_H
#define LLMD_TESTS_TEST_ENGINE_UTIL_H

#include "engine/engine.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>

/* A deterministic prompt of n ordinary tokens (no special ones). */
static inline int32_t *synth_ids(int n, unsigned seed)
{
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    unsigned x = seed * 2654435761u + 1;
    for (int i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        ids[i] = (int32_t)(1000 + (x >> 8) % 30000);
    }
    return ids;
}

static inline struct eng_request greedy(uint64_t id, const char *tenant, int prio, const int32_t *p,
                                        int n_prompt, int max_tokens)
{
    struct eng_request rq = {.id = id,
                             .tenant = tenant,
                             .priority = prio,
                             .prompt = p,
                             .n_prompt = n_prompt,
                             .max_tokens = max_tokens,
                             .n = 1,
                             .ignore_eos = 1};
    smp_params_default(&rq.smp);
    rq.smp.temperature = 0;
    return rq;
}

static inline struct eng_req *submit(struct eng *e, const struct eng_request *rq)
{
    struct eng_req *h = NULL;
    int rc = eng_submit(e, rq, &h);
    ck_assert_msg(rc == ENG_OK, "submit %llu: %s", (unsigned long long)rq->id, eng_strerror(rc));
    return h;
}

#endif
