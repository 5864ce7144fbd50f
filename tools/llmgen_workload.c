/*
 * tools/llmgen_workload.c — llmgen --workload: replays a JSON workload
 * (tenants, priorities, arrivals, prompts, sampling, n) through the serving
 * engine in real time, and reports per-request tokens, TTFT/TPOT,
 * preemptions and cache hits, with run-level percentiles and counters.
 */
#include "tools/llmgen.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

int cmd_workload(struct model *m, const struct gen_args *args)
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
