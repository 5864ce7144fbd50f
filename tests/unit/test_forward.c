/*
 * tests/unit/test_forward.c — the forward pass against an independent
 * implementation, token for token.
 *
 * tests/reference/greedy.json holds, for each reference prompt, the prompt's
 * token ids and 32 greedy tokens that Hugging Face transformers produced from
 * the same GGUF weights in float32, with the gap between the two best logits
 * at every step.  Our greedy continuation must equal it; a divergence is
 * allowed only at a step where the reference's top two logits are closer
 * than 1e-3, and every such case is listed.  Running all prompts together in
 * mixed batches must give exactly the tokens of running each alone.
 */
#include "engine/engine.h"

#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEAR_TIE 1e-3

struct ref_case {
    char name[64];
    int32_t *prompt;
    int n_prompt;
    int32_t ids[64];
    float gap[64];
    int n_ids;
    int top_id[10];
    double top_logit[10];
    int n_top;
};

static struct be *g_be;
static struct model *g_model;
static struct ref_case *g_cases;
static int g_n_cases;

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

static int32_t *json_ids(json_t *arr, int *n)
{
    *n = (int)json_array_size(arr);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(*n > 0 ? *n : 1));
    for (int i = 0; i < *n; i++)
        ids[i] = (int32_t)json_integer_value(json_array_get(arr, (size_t)i));
    return ids;
}

static void case_load(struct ref_case *c, json_t *j)
{
    snprintf(c->name, sizeof(c->name), "%s", json_string_value(json_object_get(j, "name")));
    c->prompt = json_ids(json_object_get(j, "prompt_ids"), &c->n_prompt);
    json_t *ids = json_object_get(j, "ids"), *gap = json_object_get(j, "gap");
    c->n_ids = (int)json_array_size(ids);
    ck_assert_int_le(c->n_ids, 64);
    for (int i = 0; i < c->n_ids; i++) {
        c->ids[i] = (int32_t)json_integer_value(json_array_get(ids, (size_t)i));
        c->gap[i] = (float)json_number_value(json_array_get(gap, (size_t)i));
    }
    json_t *top = json_object_get(j, "logits_first");
    c->n_top = (int)json_array_size(top);
    if (c->n_top > 10)
        c->n_top = 10;
    for (int i = 0; i < c->n_top; i++) {
        json_t *pair = json_array_get(top, (size_t)i);
        c->top_id[i] = (int)json_integer_value(json_array_get(pair, 0));
        c->top_logit[i] = json_number_value(json_array_get(pair, 1));
    }
}

static void setup(void)
{
    char err[512], path[512];
    g_be = be_create("cpu", NULL, err, sizeof(err));
    ck_assert_msg(g_be != NULL, "backend: %s", err);
    const char *mp = env_or("LLMD_MODEL", "models/SmolLM2-135M-Instruct.Q4_1.gguf");
    ck_assert_msg(model_load(mp, NULL, g_be, &g_model, err, sizeof(err)) == 0, "%s: %s", mp, err);
    snprintf(path, sizeof(path), "%s/greedy.json", env_or("LLMD_REFERENCE", "tests/reference"));
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    ck_assert_msg(root != NULL, "%s: %s", path, jerr.text);
    json_t *cases = json_object_get(root, "cases");
    g_n_cases = (int)json_array_size(cases);
    ck_assert_int_ge(g_n_cases, 20);
    g_cases = calloc((size_t)g_n_cases, sizeof(*g_cases));
    for (int i = 0; i < g_n_cases; i++)
        case_load(&g_cases[i], json_array_get(cases, (size_t)i));
    json_decref(root);
}

static void teardown(void)
{
    for (int i = 0; i < g_n_cases; i++)
        free(g_cases[i].prompt);
    free(g_cases);
    model_free(g_model);
    be_destroy(g_be);
}

static struct eng_gen_req greedy_req(const struct ref_case *c)
{
    struct eng_gen_req r = {.prompt = c->prompt, .n_prompt = c->n_prompt, .max_tokens = c->n_ids};
    smp_params_default(&r.smp);
    r.smp.temperature = 0;
    return r;
}

/* Index of the first token where got differs from want, or n when none. */
static int first_diff(const int32_t *got, const int32_t *want, int n)
{
    for (int i = 0; i < n; i++)
        if (got[i] != want[i])
            return i;
    return n;
}

/* Compares one solo run with the reference; returns 1 for a real divergence. */
static int solo_check(const struct ref_case *c, const struct eng_gen_out *out, int *n_tie)
{
    int d = first_diff(out->ids, c->ids, c->n_ids);
    if (d == c->n_ids)
        return 0;
    if (c->gap[d] < NEAR_TIE) {
        (*n_tie)++;
        printf("forward: %s: diverges at token %d (reference gap %.2e < %.0e): allowed\n", c->name,
               d, c->gap[d], NEAR_TIE);
        return 0;
    }
    printf("forward: %s: diverges at token %d: got %d, want %d (reference gap %.4f, ours %.4f)\n",
           c->name, d, out->ids[d], c->ids[d], c->gap[d], out->gap[d]);
    return 1;
}

/* Each prompt alone must give the reference's greedy tokens; then all
 * prompts at once, with a small budget so that steps mix decodes and prefill
 * chunks, must give each prompt exactly its solo tokens.  (One test, so the
 * solo runs are not paid for twice.) */
START_TEST(greedy_tokens_equal_reference_alone_and_batched)
{
    int n = g_n_cases, n_tie = 0, n_bad = 0, n_diff = 0;
    struct eng_gen_req *reqs = calloc((size_t)n, sizeof(*reqs));
    struct eng_gen_out *solo = calloc((size_t)n, sizeof(*solo));
    struct eng_gen_out *all = calloc((size_t)n, sizeof(*all));
    char err[256];
    for (int i = 0; i < n; i++) {
        reqs[i] = greedy_req(&g_cases[i]);
        ck_assert_msg(eng_generate(g_model, NULL, &reqs[i], 1, &solo[i], NULL, err, sizeof(err)) ==
                          0,
                      "%s", err);
        ck_assert_int_eq(solo[i].n, g_cases[i].n_ids);
        n_bad += solo_check(&g_cases[i], &solo[i], &n_tie);
    }
    printf("forward: %d of %d prompts equal the reference for all tokens, %d near-tie "
           "divergences, %d wrong\n",
           n - n_tie - n_bad, n, n_tie, n_bad);
    ck_assert_int_eq(n_bad, 0);

    struct eng_gen_opts o = {.max_batch_tokens = 96, .block_size = 16};
    struct eng_gen_stats st;
    ck_assert_msg(eng_generate(g_model, &o, reqs, n, all, &st, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(st.mixed_s > 0, "no step mixed prefill and decode");
    for (int i = 0; i < n; i++) {
        int d = first_diff(all[i].ids, solo[i].ids, solo[i].n);
        if (d < solo[i].n) {
            n_diff++;
            printf("forward: %s: batched run differs from solo at token %d (solo gap %.2e)\n",
                   g_cases[i].name, d, solo[i].gap[d]);
        }
        eng_gen_out_free(&solo[i]);
        eng_gen_out_free(&all[i]);
    }
    printf("forward: batched run of %d prompts in %d steps: %d differ from their solo run\n", n,
           st.steps, n_diff);
    ck_assert_int_eq(n_diff, 0);
    free(all);
    free(solo);
    free(reqs);
}
END_TEST

/* Logits of the first generated position, through one plain prefill. */
START_TEST(first_logits_close_to_reference)
{
    const struct model_config *mc = model_config(g_model);
    for (int i = 0; i < g_n_cases; i++) {
        const struct ref_case *c = &g_cases[i];
        int bs = 16, nb = (c->n_prompt + bs - 1) / bs;
        struct be_kv_geom g = model_kv_geom(g_model, bs);
        struct be_buf *kv = g_be->ops->alloc(g_be, sizeof(float) * be_kv_block_elems(&g) * nb);
        int32_t *pos = malloc(4 * (size_t)c->n_prompt), *blocks = malloc(4 * (size_t)nb);
        /* Blocks in reverse order, so the table really is followed. */
        for (int b = 0; b < nb; b++)
            blocks[b] = nb - 1 - b;
        int32_t *slot = malloc(4 * (size_t)c->n_prompt);
        for (int p = 0; p < c->n_prompt; p++) {
            pos[p] = p;
            slot[p] = blocks[p / bs] * bs + p % bs;
        }
        int32_t q_off[2] = {0, c->n_prompt}, bt_off[2] = {0, nb}, out_row = c->n_prompt - 1;
        struct be_batch bt = {c->n_prompt, c->prompt, pos,    slot, 1,
                              q_off,       bt_off,    blocks, 1,    &out_row};
        float *logits = malloc(sizeof(float) * mc->n_vocab);
        char err[256];
        ck_assert_msg(model_forward(g_model, kv, &g, &bt, logits, err, sizeof(err)) == 0, "%s",
                      err);
        for (int k = 0; k < c->n_top; k++) {
            double want = c->top_logit[k], got = logits[c->top_id[k]];
            ck_assert_msg(fabs(got - want) <= 2e-3 * (1 + fabs(want)),
                          "%s: logit of token %d: got %.6f, want %.6f", c->name, c->top_id[k], got,
                          want);
        }
        free(logits);
        free(slot);
        free(blocks);
        free(pos);
        g_be->ops->free(g_be, kv);
    }
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("forward");
    TCase *tc = tcase_create("reference");
    /* Checked: loaded in each test's own process, since OpenMP does not survive fork. */
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 1800);
    tcase_add_test(tc, greedy_tokens_equal_reference_alone_and_batched);
    tcase_add_test(tc, first_logits_close_to_reference);
    suite_add_tcase(s, tc);
    return s;
}
