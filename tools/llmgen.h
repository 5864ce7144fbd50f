/*
 * tools/llmgen.h — what the parts of llmgen share: its parsed arguments and
 * the helpers that more than one mode uses.
 */
#ifndef LLMD_TOOLS_LLMGEN_H
#define LLMD_TOOLS_LLMGEN_H

#include "engine/engine.h"

struct gen_args {
    const char *model, *prompt, *batch_file, *backend, *template_name, *workload, *preempt;
    int n_predict, chat, json, bench, threads, ids, block_size, max_batch_tokens;
    int kv_blocks, swap_blocks; /* swap_blocks < 0: not given */
    struct smp_params smp;
};

/* Turns one prompt into token ids (through the chat template with --chat);
 * the count, with *ids malloc'd for the caller, or -1. */
int prompt_ids(const struct model *m, const struct gen_args *a, const char *text, int32_t **ids);
/* Monotonic seconds. */
double now_s(void);
/* --workload: replays a workload file through the serving engine. */
int cmd_workload(struct model *m, const struct gen_args *a);

#endif
