/*
 * tools/llmgen.c — offline generation and engine benchmark.
 *
 *   llmgen -m MODEL -p PROMPT [-n N] [--chat] [--temp T] [--top-p P] [--seed S] [--json]
 *   llmgen -m MODEL --batch FILE    one prompt per line, all run together
 *   llmgen -m MODEL --bench         prefill and decode tokens/s at batch 1, 8, 32, 64 (JSON)
 *   llmgen -m MODEL --workload FILE [--kv-blocks N] [--swap-blocks N]
 *          [--preempt auto|swap|recompute[,...]] [--json]
 *                                   replays a workload through the serving engine in real
 *                                   time: per-request tokens, TTFT/TPOT, preemptions
 *
 * Everything goes through the same flat-batch path as the server: the
 * prompts of --batch share every step, decodes first, then prefill chunks.
 */
#include "engine/engine.h"

#include <cblas.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/llmgen.h"

static void usage(FILE *to)
{
    fprintf(
        to,
        "usage: llmgen -m MODEL (-p PROMPT | --batch FILE | --bench) [options]\n"
        "  -m, --model FILE        GGUF model\n"
        "  -p, --prompt TEXT       prompt\n"
        "  -n, --n-predict N       tokens to generate (default 64)\n"
        "      --chat              wrap the prompt as a user message in the chat template\n"
        "      --template NAME     chat template by name (chatml, llama3, llama2, mistral)\n"
        "      --temp T            temperature (default 0: greedy)\n"
        "      --top-k K, --top-p P, --min-p P\n"
        "      --repeat-penalty R, --presence-penalty P, --frequency-penalty F\n"
        "      --seed S            sampling seed (default 0)\n"
        "      --batch FILE        one prompt per line, run together\n"
        "      --bench             prefill/decode tokens/s at batch 1, 8, 32, 64 as JSON\n"
        "      --json              machine-readable output\n"
        "      --ids               also print token ids\n"
        "  -t, --threads N         CPU threads (default: all cores)\n"
        "      --backend NAME      cpu (default) or cuda\n"
        "      --block-size N      KV block size (default 16)\n"
        "      --max-batch-tokens N  token budget per step (default 512)\n"
        "      --workload FILE     replay a workload (JSON) through the serving engine\n"
        "      --kv-blocks N       device KV blocks for --workload (default 1024)\n"
        "      --swap-blocks N     host swap blocks for --workload (default: as many; 0: none)\n"
        "      --preempt M[,M..]   auto, swap or recompute; several run one after another\n"
        "  -V, --version\n");
}

static int parse_args(int argc, char **argv, struct gen_args *a)
{
    enum {
        O_CHAT = 256,
        O_TEMP,
        O_TOPK,
        O_TOPP,
        O_MINP,
        O_REP,
        O_PRES,
        O_FREQ,
        O_SEED,
        O_BATCH,
        O_BENCH,
        O_JSON,
        O_IDS,
        O_BACKEND,
        O_BS,
        O_MBT,
        O_TMPL,
        O_WL,
        O_KVB,
        O_SWB,
        O_PRE
    };
    static const struct option opts[] = {{"model", 1, 0, 'm'},
                                         {"prompt", 1, 0, 'p'},
                                         {"n-predict", 1, 0, 'n'},
                                         {"threads", 1, 0, 't'},
                                         {"help", 0, 0, 'h'},
                                         {"version", 0, 0, 'V'},
                                         {"chat", 0, 0, O_CHAT},
                                         {"temp", 1, 0, O_TEMP},
                                         {"top-k", 1, 0, O_TOPK},
                                         {"top-p", 1, 0, O_TOPP},
                                         {"min-p", 1, 0, O_MINP},
                                         {"repeat-penalty", 1, 0, O_REP},
                                         {"presence-penalty", 1, 0, O_PRES},
                                         {"frequency-penalty", 1, 0, O_FREQ},
                                         {"seed", 1, 0, O_SEED},
                                         {"batch", 1, 0, O_BATCH},
                                         {"bench", 0, 0, O_BENCH},
                                         {"json", 0, 0, O_JSON},
                                         {"ids", 0, 0, O_IDS},
                                         {"backend", 1, 0, O_BACKEND},
                                         {"block-size", 1, 0, O_BS},
                                         {"max-batch-tokens", 1, 0, O_MBT},
                                         {"template", 1, 0, O_TMPL},
                                         {"workload", 1, 0, O_WL},
                                         {"kv-blocks", 1, 0, O_KVB},
                                         {"swap-blocks", 1, 0, O_SWB},
                                         {"preempt", 1, 0, O_PRE},
                                         {0, 0, 0, 0}};
    smp_params_default(&a->smp);
    a->smp.temperature = 0;
    a->n_predict = 64;
    a->backend = "cpu";
    a->swap_blocks = -1;
    a->preempt = "auto";
    int c;
    while ((c = getopt_long(argc, argv, "m:p:n:t:hV", opts, NULL)) != -1) {
        switch (c) {
        case 'm':
            a->model = optarg;
            break;
        case 'p':
            a->prompt = optarg;
            break;
        case 'n':
            a->n_predict = atoi(optarg);
            break;
        case 't':
            a->threads = atoi(optarg);
            break;
        case 'h':
            usage(stdout);
            exit(0);
        case 'V':
            printf("llmgen %s\n", LLMD_VERSION);
            exit(0);
        case O_CHAT:
            a->chat = 1;
            break;
        case O_TEMP:
            a->smp.temperature = strtof(optarg, NULL);
            break;
        case O_TOPK:
            a->smp.top_k = atoi(optarg);
            break;
        case O_TOPP:
            a->smp.top_p = strtof(optarg, NULL);
            break;
        case O_MINP:
            a->smp.min_p = strtof(optarg, NULL);
            break;
        case O_REP:
            a->smp.repetition_penalty = strtof(optarg, NULL);
            break;
        case O_PRES:
            a->smp.presence_penalty = strtof(optarg, NULL);
            break;
        case O_FREQ:
            a->smp.frequency_penalty = strtof(optarg, NULL);
            break;
        case O_SEED:
            a->smp.seed = strtoull(optarg, NULL, 10);
            break;
        case O_BATCH:
            a->batch_file = optarg;
            break;
        case O_BENCH:
            a->bench = 1;
            break;
        case O_JSON:
            a->json = 1;
            break;
        case O_IDS:
            a->ids = 1;
            break;
        case O_BACKEND:
            a->backend = optarg;
            break;
        case O_BS:
            a->block_size = atoi(optarg);
            break;
        case O_MBT:
            a->max_batch_tokens = atoi(optarg);
            break;
        case O_TMPL:
            a->template_name = optarg;
            break;
        case O_WL:
            a->workload = optarg;
            break;
        case O_KVB:
            a->kv_blocks = atoi(optarg);
            break;
        case O_SWB:
            a->swap_blocks = atoi(optarg);
            break;
        case O_PRE:
            a->preempt = optarg;
            break;
        default:
            usage(stderr);
            return -1;
        }
    }
    if (!a->model || (!a->prompt && !a->batch_file && !a->bench && !a->workload) ||
        a->n_predict < 0) {
        usage(stderr);
        return -1;
    }
    return 0;
}

/* Turns one prompt into token ids, through the chat template with --chat. */
int prompt_ids(const struct model *m, const struct gen_args *a, const char *text, int32_t **ids)
{
    const struct tok *tk = model_tok(m);
    if (!a->chat)
        return tok_encode(tk, text, strlen(text), TOK_ADD_BOS, ids);
    char err[256];
    struct chat_msg msg = {"user", text};
    if (!model_tmpl(m)) {
        fprintf(stderr, "llmgen: the model has no chat template (use --template)\n");
        return -1;
    }
    char *rendered = tmpl_apply(model_tmpl(m), &msg, 1, 1, err, sizeof(err));
    if (!rendered) {
        fprintf(stderr, "llmgen: %s\n", err);
        return -1;
    }
    /* Templates that write the BOS text themselves (Llama) get no second one. */
    int32_t bos = tok_bos(tk);
    unsigned flags = TOK_PARSE_SPECIAL;
    if (bos < 0 || strncmp(rendered, tok_text(tk, bos), strlen(tok_text(tk, bos))) != 0)
        flags |= TOK_ADD_BOS;
    int n = tok_encode(tk, rendered, strlen(rendered), flags, ids);
    free(rendered);
    return n;
}

/* Reads one prompt per non-empty line. */
static char **read_lines(const char *path, int *n)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "llmgen: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    char **lines = NULL, *line = NULL;
    size_t cap = 0;
    ssize_t len;
    *n = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        if (len == 0)
            continue;
        char **nl = realloc(lines, sizeof(char *) * (size_t)(*n + 1));
        if (!nl)
            break;
        lines = nl;
        lines[(*n)++] = strdup(line);
    }
    free(line);
    fclose(f);
    return lines;
}

static char *ids_text(const struct model *m, const struct eng_gen_out *o)
{
    return tok_decode(model_tok(m), o->ids, (size_t)o->n);
}

static void print_result(const struct model *m, const struct gen_args *a, const char *prompt,
                         int n_prompt, const struct eng_gen_out *o, json_t *arr)
{
    char *text = ids_text(m, o);
    if (a->json) {
        json_t *ids = json_array();
        for (int i = 0; i < o->n; i++)
            json_array_append_new(ids, json_integer(o->ids[i]));
        json_array_append_new(arr,
                              json_pack("{s:s, s:s, s:i, s:i, s:s, s:o}", "prompt", prompt, "text",
                                        text ? text : "", "n_prompt", n_prompt, "n_gen", o->n,
                                        "finish_reason", o->eog ? "stop" : "length", "ids", ids));
    } else {
        if (!a->batch_file)
            printf("%s%s", prompt, a->chat ? "\n" : "");
        printf("%s\n", text ? text : "");
        if (a->ids) {
            for (int i = 0; i < o->n; i++)
                printf("%s%d", i ? " " : "ids: ", o->ids[i]);
            printf("\n");
        }
        if (a->batch_file)
            printf("---\n");
    }
    free(text);
}

static int cmd_generate(struct model *m, const struct gen_args *a)
{
    int n = 1, rc = -1;
    char **prompts = NULL;
    char *single[1] = {(char *)a->prompt};
    if (a->batch_file && !(prompts = read_lines(a->batch_file, &n)))
        return -1;
    char **texts = prompts ? prompts : single;
    struct eng_gen_req *reqs = calloc((size_t)n, sizeof(*reqs));
    struct eng_gen_out *outs = calloc((size_t)n, sizeof(*outs));
    int32_t **ids = calloc((size_t)n, sizeof(*ids));
    if (!reqs || !outs || !ids)
        goto done;
    for (int i = 0; i < n; i++) {
        reqs[i].n_prompt = prompt_ids(m, a, texts[i], &ids[i]);
        if (reqs[i].n_prompt < 1) {
            fprintf(stderr, "llmgen: prompt %d: cannot tokenize (or empty)\n", i + 1);
            goto done;
        }
        reqs[i].prompt = ids[i];
        reqs[i].max_tokens = a->n_predict;
        reqs[i].stop_at_eog = 1;
        reqs[i].smp = a->smp;
        reqs[i].smp.seed = a->smp.seed + (uint64_t)i;
    }
    struct eng_gen_opts o = {.block_size = a->block_size, .max_batch_tokens = a->max_batch_tokens};
    struct eng_gen_stats st;
    char err[256];
    if (eng_generate(m, &o, reqs, n, outs, &st, err, sizeof(err))) {
        fprintf(stderr, "llmgen: %s\n", err);
        goto done;
    }
    json_t *arr = json_array();
    for (int i = 0; i < n; i++)
        print_result(m, a, texts[i], reqs[i].n_prompt, &outs[i], arr);
    if (a->json) {
        json_t *top = json_pack("{s:o, s:{s:i, s:I, s:I, s:f, s:f}}", "results", arr, "stats",
                                "steps", st.steps, "prefill_tokens", (json_int_t)st.prefill_tokens,
                                "decode_tokens", (json_int_t)st.decode_tokens, "prefill_s",
                                st.prefill_s, "decode_s", st.decode_s);
        json_dumpf(top, stdout, JSON_INDENT(2));
        printf("\n");
        json_decref(top);
    } else {
        json_decref(arr);
    }
    rc = 0;
done:
    for (int i = 0; i < n; i++) {
        if (outs)
            eng_gen_out_free(&outs[i]);
        if (ids)
            free(ids[i]);
        if (prompts)
            free(prompts[i]);
    }
    free(prompts);
    free(ids);
    free(outs);
    free(reqs);
    return rc;
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The OpenBLAS sgemm rate on the shape of the model's largest projection
 * for a 512-token chunk: the ceiling that prefill is compared against. */
static double sgemm_gflops(int m, int n, int k)
{
    float *x = calloc((size_t)m * k, 4), *w = calloc((size_t)n * k, 4),
          *y = calloc((size_t)m * n, 4);
    double best = 0;
    for (size_t i = 0; x && w && i < (size_t)m * k; i++)
        x[i] = (float)(i % 7) * 0.01f;
    for (size_t i = 0; x && w && i < (size_t)n * k; i++)
        w[i] = (float)(i % 5) * 0.01f;
    for (int rep = 0; x && w && y && rep < 5; rep++) {
        double t0 = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w, k, 0.0f, y, n);
        double g = 2.0 * m * n * k / (now_s() - t0) / 1e9;
        best = g > best ? g : best;
    }
    free(x);
    free(w);
    free(y);
    return best;
}

/* FLOPs of one token through the model: the matrix products of every layer
 * and the output head (attention scores excluded). */
static double flops_per_token(const struct model_config *c)
{
    double q = (double)c->n_heads * c->head_dim, kv = (double)c->n_kv_heads * c->head_dim;
    double layer = 2.0 * c->n_embd * (q + 2 * kv) + 2.0 * q * c->n_embd + 6.0 * c->n_embd * c->n_ff;
    return c->n_layers * layer + 2.0 * c->n_embd * c->n_vocab;
}

/* Runs B sequences of n_pp prompt tokens then n_tg generated tokens; the
 * prompt of all B goes in one step so prefill and decode are timed apart. */
static int bench_one(struct model *m, int B, int n_pp, int n_tg, json_t *rows)
{
    struct eng_gen_req *reqs = calloc((size_t)B, sizeof(*reqs));
    struct eng_gen_out *outs = calloc((size_t)B, sizeof(*outs));
    int32_t *prompt = malloc(sizeof(int32_t) * (size_t)n_pp * B);
    int rc = -1, n_vocab = model_config(m)->n_vocab;
    if (!reqs || !outs || !prompt)
        goto done;
    for (int b = 0; b < B; b++) {
        for (int i = 0; i < n_pp; i++) /* distinct prompts, so no two rows are alike */
            prompt[b * n_pp + i] = (int32_t)((1000 + 7919u * (unsigned)(b * n_pp + i)) % n_vocab);
        reqs[b] = (struct eng_gen_req){
            .prompt = prompt + (size_t)b * n_pp, .n_prompt = n_pp, .max_tokens = n_tg};
        smp_params_default(&reqs[b].smp);
        reqs[b].smp.temperature = 0;
    }
    struct eng_gen_opts o = {.max_batch_tokens = B * n_pp, .max_seqs = B};
    struct eng_gen_stats st;
    char err[256];
    if (eng_generate(m, &o, reqs, B, outs, &st, err, sizeof(err))) {
        fprintf(stderr, "llmgen: bench: %s\n", err);
        goto done;
    }
    /* A run with no decode step (n_tg = 1) has no decode rate: 0, not NaN. */
    double pp = st.prefill_s > 0 ? st.prefill_tokens / st.prefill_s : 0;
    double tg = st.decode_s > 0 ? st.decode_tokens / st.decode_s : 0;
    json_array_append_new(rows,
                          json_pack("{s:i, s:i, s:i, s:f, s:f, s:f}", "batch", B, "n_prompt", n_pp,
                                    "n_gen", n_tg, "prefill_tok_s", pp, "decode_tok_s", tg,
                                    "prefill_gflops", pp * flops_per_token(model_config(m)) / 1e9));
    fprintf(stderr, "batch %2d: prefill %8.1f tok/s  decode %8.1f tok/s\n", B, pp, tg);
    rc = 0;
done:
    for (int b = 0; outs && b < B; b++)
        eng_gen_out_free(&outs[b]);
    free(prompt);
    free(outs);
    free(reqs);
    return rc;
}

static int cmd_bench(struct model *m, const struct gen_args *a)
{
    const struct model_config *c = model_config(m);
    static const int batches[] = {1, 8, 32, 64};
    json_t *rows = json_array();
    int n_tg = a->n_predict > 0 ? a->n_predict : 64;
    /* Warm-up: first touches of the weights and the pool. */
    json_t *warm = json_array();
    int warm_rc = bench_one(m, 1, 16, 4, warm);
    json_decref(warm);
    if (warm_rc != 0)
        return -1;
    double gemm = sgemm_gflops(512, c->n_ff, c->n_embd);
    int rc = 0;
    for (size_t i = 0; i < sizeof(batches) / sizeof(batches[0]) && rc == 0; i++)
        rc = bench_one(m, batches[i], 128, n_tg, rows);
    json_t *pp512 = json_array();
    if (rc == 0)
        rc = bench_one(m, 1, 512, 1, pp512);
    json_t *top =
        json_pack("{s:s, s:s, s:i, s:f, s:f, s:o, s:o}", "model", a->model, "backend", a->backend,
                  "threads", model_backend(m)->n_threads, "sgemm_gflops", gemm, "flops_per_token",
                  flops_per_token(c), "batched", rows, "prefill_512", pp512);
    json_dumpf(top, stdout, JSON_INDENT(2));
    printf("\n");
    json_decref(top);
    return rc;
}

int main(int argc, char **argv)
{
    be_process_init(argv);
    struct gen_args a = {0};
    if (parse_args(argc, argv, &a))
        return 2;
    char err[512];
    struct be_opts bo = {.n_threads = a.threads};
    struct be *be = be_create(a.backend, &bo, err, sizeof(err));
    if (!be) {
        fprintf(stderr, "llmgen: %s\n", err);
        return 1;
    }
    struct model *m = NULL;
    struct model_opts mo = {.template_name = a.template_name};
    if (model_load(a.model, &mo, be, &m, err, sizeof(err))) {
        fprintf(stderr, "llmgen: %s: %s\n", a.model, err);
        be_destroy(be);
        return 1;
    }
    int rc = a.workload ? cmd_workload(m, &a) : a.bench ? cmd_bench(m, &a) : cmd_generate(m, &a);
    model_free(m);
    be_destroy(be);
    return rc ? 1 : 0;
}
