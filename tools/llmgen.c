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

struct gen_args {
    const char *model, *prompt, *batch_file, *backend, *template_name, *workload, *preempt;
    int n_predict, chat, json, bench, threads, ids, block_size, max_batch_tokens;
    int kv_blocks, swap_blocks; /* swap_blocks < 0: not given */
    struct smp_params smp;
};

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
static int prompt_ids(const struct model *m, const struct gen_args *a, const char *text,
                      int32_t **ids)
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

static double now_s(void)
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

/* ================================================================ workload */

/* One request of a workload and what came back.  Strings point into the
 * parsed JSON, which outlives the run. */
struct wl_req {
    uint64_t id;
    const char *tenant, *salt;
    int priority, n_prompt, max_tokens, n, ignore_eos, n_stop;
    double arrival;
    struct smp_params smp;
    int32_t *prompt, *stop;
    /* results of the current run */
    struct eng_req *h;
    int32_t *out; /* [n * max_tokens], sequence s at s * max_tokens */
    int *n_out;   /* [n] */
    double t_first, t_last;
    struct eng_usage u;
    enum eng_finish fin;
};

struct workload {
    json_t *root;
    json_t *tenants;
    struct wl_req *rq;
    int n;
};

/* Wakeup target shared by every handle of a run. */
struct wl_wake {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending;
};

static void wl_wake(void *arg)
{
    struct wl_wake *w = arg;
    pthread_mutex_lock(&w->mu);
    w->pending = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static int32_t *wl_ids(json_t *arr, int *n)
{
    *n = (int)json_array_size(arr);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(*n > 0 ? *n : 1));
    for (int i = 0; ids && i < *n; i++)
        ids[i] = (int32_t)json_integer_value(json_array_get(arr, (size_t)i));
    return ids;
}

/* A deterministic synthetic prompt of n ordinary tokens. */
static int32_t *wl_synth(int n, uint64_t seed, int n_vocab)
{
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; ids && i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ids[i] = (int32_t)(256 + x % (uint64_t)(n_vocab - 512));
    }
    return ids;
}

/* The prompt of one request: "prompt_ids", "prompt_len" (synthetic),
 * "messages" (chat template) or "prompt" (raw text; "chat": true wraps it
 * as one user message). */
static int wl_prompt(const struct model *m, const struct gen_args *a, json_t *j, struct wl_req *r)
{
    json_t *v;
    if ((v = json_object_get(j, "prompt_ids"))) {
        r->prompt = wl_ids(v, &r->n_prompt);
    } else if ((v = json_object_get(j, "prompt_len"))) {
        r->n_prompt = (int)json_integer_value(v);
        r->prompt = wl_synth(r->n_prompt, r->id, model_config(m)->n_vocab);
    } else if ((v = json_object_get(j, "messages"))) {
        struct chat_msg msgs[16];
        size_t n = json_array_size(v) < 16 ? json_array_size(v) : 16;
        for (size_t i = 0; i < n; i++) {
            json_t *mj = json_array_get(v, i);
            msgs[i].role = json_string_value(json_object_get(mj, "role"));
            msgs[i].content = json_string_value(json_object_get(mj, "content"));
            if (!msgs[i].role || !msgs[i].content)
                return -1;
        }
        char err[256];
        char *text = model_tmpl(m) ? tmpl_apply(model_tmpl(m), msgs, n, 1, err, sizeof(err)) : NULL;
        if (!text)
            return -1;
        r->n_prompt = tok_encode(model_tok(m), text, strlen(text), TOK_PARSE_SPECIAL, &r->prompt);
        free(text);
    } else if ((v = json_object_get(j, "prompt")) && json_is_string(v)) {
        struct gen_args ca = *a;
        ca.chat = json_is_true(json_object_get(j, "chat"));
        r->n_prompt = prompt_ids(m, &ca, json_string_value(v), &r->prompt);
    }
    return r->n_prompt > 0 && r->prompt ? 0 : -1;
}

static double wl_num(json_t *j, const char *key, double dflt)
{
    json_t *v = json_object_get(j, key);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

static int wl_req_parse(const struct model *m, const struct gen_args *a, json_t *j, uint64_t id,
                        struct wl_req *r)
{
    r->id = json_is_integer(json_object_get(j, "id"))
                ? (uint64_t)json_integer_value(json_object_get(j, "id"))
                : id;
    r->tenant = json_string_value(json_object_get(j, "tenant"));
    r->tenant = r->tenant ? r->tenant : "default";
    r->salt = json_string_value(json_object_get(j, "cache_salt"));
    r->priority = (int)wl_num(j, "priority", 1);
    r->arrival = wl_num(j, "arrival", 0);
    r->max_tokens = (int)wl_num(j, "max_tokens", a->n_predict);
    r->n = (int)wl_num(j, "n", 1);
    r->ignore_eos = json_is_true(json_object_get(j, "ignore_eos"));
    smp_params_default(&r->smp);
    r->smp.temperature = (float)wl_num(j, "temperature", 0);
    r->smp.top_p = (float)wl_num(j, "top_p", 1);
    r->smp.top_k = (int)wl_num(j, "top_k", 0);
    r->smp.min_p = (float)wl_num(j, "min_p", 0);
    r->smp.seed = (uint64_t)wl_num(j, "seed", (double)r->id);
    r->smp.n_logprobs = (int)wl_num(j, "logprobs", 0);
    json_t *stop = json_object_get(j, "stop_ids");
    r->stop = stop ? wl_ids(stop, &r->n_stop) : NULL;
    if (r->n < 1 || r->max_tokens < 1 || wl_prompt(m, a, j, r)) {
        fprintf(stderr, "llmgen: workload: request %llu: bad prompt, n or max_tokens\n",
                (unsigned long long)r->id);
        return -1;
    }
    r->out = malloc(sizeof(int32_t) * (size_t)r->n * (size_t)r->max_tokens);
    r->n_out = calloc((size_t)r->n, sizeof(int));
    return r->out && r->n_out ? 0 : -1;
}

static uint64_t wl_next(uint64_t *x)
{
    return (*x = *x * 6364136223846793005ull + 1442695040888963407ull) >> 11;
}

/* A uniform integer in [lo, hi] from a [lo, hi] JSON pair (or one number). */
static int wl_range(json_t *j, const char *key, int dflt, uint64_t *x)
{
    json_t *v = json_object_get(j, key);
    int lo = (int)json_number_value(json_array_get(v, 0));
    int hi = (int)json_number_value(json_array_get(v, 1)), r = (int)wl_next(x);
    return json_is_number(v)         ? (int)json_number_value(v)
           : json_array_size(v) != 2 ? dflt
           : hi > lo                 ? lo + (int)((unsigned)r % (unsigned)(hi - lo + 1))
                                     : lo;
}

/* Expands "generate": count requests with random tenants, priorities,
 * synthetic prompt lengths and max_tokens, Poisson arrivals at `rate`/s. */
static json_t *wl_generate(json_t *g, int first_id)
{
    json_t *out = json_array(), *tns = json_object_get(g, "tenants"),
           *prs = json_object_get(g, "priorities");
    uint64_t x = (uint64_t)wl_num(g, "seed", 1) * 2654435761ull + 7;
    double rate = wl_num(g, "rate", 0), t = wl_num(g, "start", 0);
    size_t nt = json_array_size(tns), np = json_array_size(prs);
    for (int i = 0; i < (int)wl_num(g, "count", 16); i++) {
        json_t *tn = nt ? json_array_get(tns, wl_next(&x) % nt) : json_string("default");
        json_t *pr = np ? json_array_get(prs, wl_next(&x) % np) : json_integer(1);
        json_array_append_new(
            out, json_pack("{s:i, s:O, s:O, s:i, s:i, s:f, s:b, s:f}", "id", first_id + i, "tenant",
                           tn, "priority", pr, "prompt_len", wl_range(g, "prompt_len", 64, &x),
                           "max_tokens", wl_range(g, "max_tokens", 32, &x), "arrival", t,
                           "ignore_eos", !json_is_false(json_object_get(g, "ignore_eos")),
                           "temperature", wl_num(g, "temperature", 0)));
        if (!nt)
            json_decref(tn);
        if (!np)
            json_decref(pr);
        double u = ((double)wl_next(&x) + 0.5) / 9007199254740992.0;
        t += rate > 0 ? -log(u) / rate : 0;
    }
    return out;
}

static void wl_free(struct workload *w)
{
    for (int i = 0; w->rq && i < w->n; i++) {
        free(w->rq[i].prompt);
        free(w->rq[i].stop);
        free(w->rq[i].out);
        free(w->rq[i].n_out);
    }
    free(w->rq);
    json_decref(w->root);
}

static int wl_load(const struct model *m, const struct gen_args *a, struct workload *w)
{
    json_error_t jerr;
    if (!(w->root = json_load_file(a->workload, 0, &jerr))) {
        fprintf(stderr, "llmgen: %s:%d: %s\n", a->workload, jerr.line, jerr.text);
        return -1;
    }
    json_t *reqs = json_object_get(w->root, "requests"),
           *gen = json_object_get(w->root, "generate");
    json_t *all = json_array();
    json_array_extend(all, reqs);
    if (gen) {
        json_t *g = wl_generate(gen, (int)json_array_size(all) + 1);
        json_array_extend(all, g);
        json_decref(g);
    }
    json_object_set_new(w->root, "_all", all);
    w->tenants = json_object_get(w->root, "tenants");
    w->n = (int)json_array_size(all);
    w->rq = calloc((size_t)(w->n > 0 ? w->n : 1), sizeof(*w->rq));
    if (!w->rq || w->n == 0) {
        fprintf(stderr, "llmgen: %s: no requests\n", a->workload);
        return -1;
    }
    for (int i = 0; i < w->n; i++)
        if (wl_req_parse(m, a, json_array_get(all, (size_t)i), (uint64_t)i + 1, &w->rq[i]))
            return -1;
    return 0;
}

static int wl_cmp_arrival(const void *x, const void *y)
{
    const struct wl_req *a = *(struct wl_req *const *)x, *b = *(struct wl_req *const *)y;
    return a->arrival < b->arrival ? -1 : a->arrival > b->arrival;
}

/* Takes what a handle has; 1 when the request is over (and released). */
static int wl_poll(struct wl_req *r)
{
    struct eng_token tk[64];
    int k;
    while ((k = eng_req_take(r->h, tk, 64)) > 0)
        for (int i = 0; i < k; i++) {
            int s = tk[i].seq;
            if (r->n_out[s] < r->max_tokens)
                r->out[(size_t)s * r->max_tokens + r->n_out[s]++] = tk[i].id;
            if (s == 0) {
                r->t_first = r->t_first > 0 ? r->t_first : tk[i].t;
                r->t_last = tk[i].t;
            }
        }
    if (!eng_req_done(r->h))
        return 0;
    r->fin = eng_req_finish(r->h, 0);
    eng_req_usage(r->h, &r->u);
    eng_req_release(r->h);
    r->h = NULL;
    return 1;
}

static int wl_submit(struct eng *e, struct wl_req *r, struct wl_wake *wk)
{
    struct eng_request rq = {.id = r->id,
                             .tenant = r->tenant,
                             .priority = r->priority,
                             .prompt = r->prompt,
                             .n_prompt = r->n_prompt,
                             .max_tokens = r->max_tokens,
                             .n = r->n,
                             .smp = r->smp,
                             .stop_ids = r->stop,
                             .n_stop_ids = r->n_stop,
                             .cache_salt = r->salt,
                             .ignore_eos = r->ignore_eos,
                             .wake = wl_wake,
                             .wake_arg = wk};
    memset(r->n_out, 0, sizeof(int) * (size_t)r->n);
    r->t_first = r->t_last = 0;
    int rc = eng_submit(e, &rq, &r->h);
    if (rc)
        fprintf(stderr, "llmgen: request %llu: %s\n", (unsigned long long)r->id, eng_strerror(rc));
    return rc;
}

/* Replays every request at its arrival time and collects them all. */
static int wl_replay(struct eng *e, struct workload *w, struct wl_req **order, double *dur)
{
    struct wl_wake wk = {.pending = 0};
    pthread_mutex_init(&wk.mu, NULL);
    pthread_cond_init(&wk.cv, NULL);
    double t0 = now_s();
    int next = 0, done = 0, rc = 0;
    while (done < w->n && rc == 0) {
        double t = now_s() - t0;
        for (; next < w->n && order[next]->arrival <= t; next++)
            if (wl_submit(e, order[next], &wk)) {
                order[next]->fin = ENG_FINISH_ERROR;
                done++;
            }
        for (int i = 0; i < next; i++)
            if (order[i]->h && wl_poll(order[i]))
                done++;
        double until = next < w->n ? order[next]->arrival - (now_s() - t0) : 0.2;
        pthread_mutex_lock(&wk.mu);
        if (!wk.pending && until > 0) {
            struct timespec dl;
            clock_gettime(CLOCK_REALTIME, &dl);
            double d = dl.tv_sec + dl.tv_nsec * 1e-9 + (until < 0.2 ? until : 0.2);
            dl.tv_sec = (time_t)d;
            dl.tv_nsec = (long)((d - (double)dl.tv_sec) * 1e9);
            pthread_cond_timedwait(&wk.cv, &wk.mu, &dl);
        }
        wk.pending = 0;
        pthread_mutex_unlock(&wk.mu);
    }
    *dur = now_s() - t0;
    eng_wait_idle(e, 10);
    pthread_cond_destroy(&wk.cv);
    pthread_mutex_destroy(&wk.mu);
    return rc;
}

static int wl_cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Nearest-rank percentile of n sorted values. */
static double wl_pct(const double *v, int n, double p)
{
    if (n == 0)
        return 0;
    int k = (int)ceil(p * n) - 1;
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

static json_t *wl_req_json(const struct wl_req *r, double ttft, double tpot)
{
    json_t *outs = json_array();
    for (int s = 0; s < r->n; s++) {
        json_t *ids = json_array();
        for (int i = 0; i < r->n_out[s]; i++)
            json_array_append_new(ids, json_integer(r->out[(size_t)s * r->max_tokens + i]));
        json_array_append_new(outs, ids);
    }
    json_t *j = json_pack(
        "{s:I, s:s, s:i, s:f, s:i, s:O, s:s, s:f, s:f, s:f, s:i, s:i, s:i, s:i}", "id",
        (json_int_t)r->id, "tenant", r->tenant, "priority", r->priority, "arrival_s", r->arrival,
        "prompt_tokens", r->n_prompt, "output_tokens", json_array_get(outs, 0), "finish_reason",
        eng_finish_name(r->fin), "ttft_s", ttft, "tpot_s", tpot, "e2e_s",
        r->u.t_done > 0 ? r->u.t_done - r->u.t_submit : 0.0, "cached_tokens", r->u.cached_tokens,
        "preemptions", r->u.preempt_swap + r->u.preempt_recompute, "preempt_swap",
        r->u.preempt_swap, "preempt_recompute", r->u.preempt_recompute);
    if (r->n > 1)
        json_object_set(j, "outputs", outs);
    json_decref(outs);
    return j;
}

/* The report of one run: per-request rows, latency percentiles, counters. */
static json_t *wl_report(struct workload *w, const struct eng_snapshot *s, const char *mode,
                         double dur)
{
    double *ttft = calloc((size_t)w->n, sizeof(double)),
           *tpot = calloc((size_t)w->n, sizeof(double));
    int nt = 0, np = 0;
    long gen = 0;
    json_t *rows = json_array();
    for (int i = 0; i < w->n; i++) {
        struct wl_req *r = &w->rq[i];
        double ft = r->t_first > 0 ? r->t_first - r->u.t_submit : 0;
        double pt = r->n_out[0] > 1 ? (r->t_last - r->t_first) / (r->n_out[0] - 1) : 0;
        if (r->t_first > 0)
            ttft[nt++] = ft;
        if (r->n_out[0] > 1)
            tpot[np++] = pt;
        for (int q = 0; q < r->n; q++)
            gen += r->n_out[q];
        json_array_append_new(rows, wl_req_json(r, ft, pt));
    }
    qsort(ttft, (size_t)nt, sizeof(double), wl_cmp_double);
    qsort(tpot, (size_t)np, sizeof(double), wl_cmp_double);
    json_t *j = json_pack(
        "{s:s, s:o, s:{s:I, s:I}, s:{s:I, s:I}, s:f, s:{s:I, s:I}, s:f, s:f, s:f, s:f, s:f, s:f, "
        "s:I, s:I}",
        "preempt", mode, "requests", rows, "preemptions", "swap", (json_int_t)s->preempt_swap,
        "recompute", (json_int_t)s->preempt_recompute, "swap_bytes", "out",
        (json_int_t)s->swap_bytes_out, "in", (json_int_t)s->swap_bytes_in, "swap_bw_bytes_s",
        s->swap_bw_bytes_s, "prefix_cache", "hits", (json_int_t)s->prefix_hits, "lookups",
        (json_int_t)s->prefix_lookups, "throughput_tok_s", dur > 0 ? gen / dur : 0.0, "ttft_p50",
        wl_pct(ttft, nt, 0.5), "ttft_p99", wl_pct(ttft, nt, 0.99), "tpot_p50",
        wl_pct(tpot, np, 0.5), "tpot_p99", wl_pct(tpot, np, 0.99), "duration_s", dur,
        "completion_tokens", (json_int_t)gen, "steps", (json_int_t)s->step);
    free(ttft);
    free(tpot);
    return j;
}

static int wl_tenants(struct eng *e, json_t *tenants)
{
    for (size_t i = 0; i < json_array_size(tenants); i++) {
        json_t *t = json_array_get(tenants, i);
        const char *name = json_string_value(json_object_get(t, "name"));
        struct eng_tenant tp = {.weight = wl_num(t, "weight", 1),
                                .max_running = (int)wl_num(t, "max_running", 0),
                                .max_kv_blocks = (int)wl_num(t, "max_kv_blocks", 0)};
        if (!name || eng_tenant_set(e, name, &tp) != ENG_OK) {
            fprintf(stderr, "llmgen: workload: bad tenant %zu\n", i);
            return -1;
        }
    }
    return 0;
}

/* One run of the whole workload under one preemption mode. */
static json_t *wl_run(struct model *m, const struct gen_args *a, struct workload *w,
                      struct wl_req **order, const char *mode)
{
    static const char *modes[] = {"auto", "swap", "recompute"};
    struct eng_opts o = {.block_size = a->block_size,
                         .n_blocks = a->kv_blocks,
                         .n_host_blocks = a->swap_blocks == 0  ? -1
                                          : a->swap_blocks < 0 ? 0
                                                               : a->swap_blocks,
                         .max_batch_tokens = a->max_batch_tokens,
                         .preempt = (enum eng_preempt) - 1};
    for (int i = 0; i < 3; i++)
        if (strcmp(mode, modes[i]) == 0)
            o.preempt = (enum eng_preempt)i;
    struct eng *e = NULL;
    char err[256];
    if ((int)o.preempt < 0) {
        fprintf(stderr, "llmgen: --preempt: unknown mode '%s'\n", mode);
        return NULL;
    }
    if (eng_create(m, &o, &e, err, sizeof(err))) {
        fprintf(stderr, "llmgen: %s\n", err);
        return NULL;
    }
    json_t *rep = NULL;
    double dur = 0;
    if (wl_tenants(e, w->tenants) == 0 && wl_replay(e, w, order, &dur) == 0) {
        struct eng_snapshot *s = eng_snapshot(e);
        if (s)
            rep = wl_report(w, s, mode, dur);
        eng_snapshot_free(s);
    }
    eng_destroy(e);
    return rep;
}

#define WL_NUM(o, k)      json_number_value(json_object_get(o, k))
#define WL_INT(o, k1, k2) json_integer_value(json_object_get(json_object_get(o, k1), k2))

/* Text output: one line per request, then the run's summary. */
static void wl_print(const json_t *rep)
{
    json_t *rows = json_object_get(rep, "requests"), *r;
    size_t i;
    json_array_foreach(rows, i, r)
    {
        printf("  req %-4lld %-10s prio %lld  %-7s %3zu tokens  ttft %6.3f s  tpot %6.3f s  "
               "cached %4lld  preempted %lld\n",
               json_integer_value(json_object_get(r, "id")),
               json_string_value(json_object_get(r, "tenant")),
               json_integer_value(json_object_get(r, "priority")),
               json_string_value(json_object_get(r, "finish_reason")),
               json_array_size(json_object_get(r, "output_tokens")), WL_NUM(r, "ttft_s"),
               WL_NUM(r, "tpot_s"), json_integer_value(json_object_get(r, "cached_tokens")),
               json_integer_value(json_object_get(r, "preemptions")));
    }
    printf("preempt %-9s  %6.1f tok/s  ttft p50 %.3f s p99 %.3f s  tpot p50 %.3f s p99 %.3f s  "
           "preemptions swap %lld recompute %lld  swap bytes %lld  prefix hits %lld\n",
           json_string_value(json_object_get(rep, "preempt")), WL_NUM(rep, "throughput_tok_s"),
           WL_NUM(rep, "ttft_p50"), WL_NUM(rep, "ttft_p99"), WL_NUM(rep, "tpot_p50"),
           WL_NUM(rep, "tpot_p99"), WL_INT(rep, "preemptions", "swap"),
           WL_INT(rep, "preemptions", "recompute"), WL_INT(rep, "swap_bytes", "out"),
           WL_INT(rep, "prefix_cache", "hits"));
}

/* A workload's "engine" object gives pool sizes that the flags override. */
static void wl_engine_defaults(const struct workload *w, struct gen_args *a)
{
    json_t *e = json_object_get(w->root, "engine");
    a->kv_blocks = a->kv_blocks > 0 ? a->kv_blocks : (int)wl_num(e, "kv_blocks", 0);
    a->swap_blocks = a->swap_blocks >= 0 ? a->swap_blocks : (int)wl_num(e, "swap_blocks", -1);
    a->max_batch_tokens =
        a->max_batch_tokens > 0 ? a->max_batch_tokens : (int)wl_num(e, "max_batch_tokens", 0);
}

static int cmd_workload(struct model *m, const struct gen_args *args)
{
    struct gen_args ea = *args, *a = &ea;
    struct workload w = {0};
    struct wl_req **order = NULL;
    json_t *runs = json_array();
    int rc = -1;
    if (wl_load(m, a, &w) || !(order = calloc((size_t)(w.n > 0 ? w.n : 1), sizeof(*order))))
        goto done;
    wl_engine_defaults(&w, a);
    for (int i = 0; i < w.n; i++)
        order[i] = &w.rq[i];
    qsort(order, (size_t)w.n, sizeof(*order), wl_cmp_arrival);
    char *modes = strdup(a->preempt), *save = NULL;
    rc = 0;
    for (char *mode = strtok_r(modes, ",", &save); mode && rc == 0;
         mode = strtok_r(NULL, ",", &save)) {
        json_t *rep = wl_run(m, a, &w, order, mode);
        if (!rep) {
            rc = -1;
            break;
        }
        if (!a->json)
            wl_print(rep);
        json_array_append_new(runs, rep);
    }
    free(modes);
    if (rc == 0 && a->json) {
        json_t *top = json_array_size(runs) == 1 ? json_incref(json_array_get(runs, 0))
                                                 : json_pack("{s:O}", "runs", runs);
        json_dumpf(top, stdout, JSON_INDENT(2));
        printf("\n");
        json_decref(top);
    }
done:
    json_decref(runs);
    free(order);
    wl_free(&w);
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
