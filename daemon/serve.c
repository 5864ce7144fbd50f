/*
 * daemon/serve.c — routing, and the admission of a completion request.
 *
 * Every request passes the same gates in the order of DESIGN.md: drain
 * state, key, body, tokens (template and tokenizer), context and overload
 * checks, the tenant's quotas.  The first gate that refuses answers with
 * OpenAI's error shape and nothing is held: no quota is taken before the
 * body is known to be valid, and a refused request takes none.  A request
 * that passes becomes an sv_req, which sv_req.c carries to the end.
 */
#include "daemon/log.h"
#include "daemon/sv.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now_unix(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------- errors -- */

static const char *type_for(int status)
{
    switch (status) {
    case 401:
        return "authentication_error";
    case 403:
        return "permission_error";
    case 404:
        return "not_found_error";
    case 429:
        return "rate_limit_error";
    case 500:
    case 503:
        return "server_error";
    default:
        return "invalid_request_error";
    }
}

char *sv_error_body(int status, const char *message, size_t *len, const char **ctype)
{
    struct api_error e;
    const char *code = status == 413   ? "request_too_large"
                       : status == 408 ? "request_timeout"
                       : status == 431 ? "headers_too_large"
                                       : "";
    api_error_set(&e, status, type_for(status), code, "", "%s", message);
    *ctype = "application/json";
    return api_render_error(&e, len);
}

void sv_send_error(struct llmd *d, struct http_req *r, const struct api_error *e,
                   const char *tenant)
{
    size_t len = 0;
    char *body = api_render_error(e, &len);
    char hdr[64] = "";
    if (e->retry_after > 0)
        snprintf(hdr, sizeof(hdr), "Retry-After: %ld\r\n", (long)(e->retry_after + 0.999));
    http_respond(r, e->status, "application/json", hdr[0] ? hdr : NULL, body ? body : "{}",
                 body ? len : 2);
    free(body);
    metrics_request(d->metrics, tenant ? tenant : "", e->status);
    log_info("%s %s %d %s (%s)", http_method(r), http_path(r), e->status,
             e->code[0] ? e->code : e->type, http_peer(r));
}

static void send_json(struct http_req *r, int status, const char *json, const char *headers)
{
    http_respond(r, status, "application/json", headers, json, strlen(json));
}

/* ------------------------------------------------------ small handlers -- */

static void handle_health(struct llmd *d, struct http_req *r)
{
    if (d->draining)
        send_json(r, 503, "{\"status\":\"draining\"}", "Retry-After: 5\r\n");
    else
        send_json(r, 200, "{\"status\":\"ok\"}", NULL);
}

static void handle_metrics(struct llmd *d, struct http_req *r)
{
    struct eng_snapshot *s = eng_snapshot(d->eng);
    metrics_connections(d->metrics, http_server_connections(d->http), http_server_refused(d->http));
    size_t len = 0;
    char *text = metrics_render(d->metrics, s, &len);
    eng_snapshot_free(s);
    if (!text) {
        struct api_error e;
        api_error_set(&e, 500, "server_error", "", "", "out of memory");
        sv_send_error(d, r, &e, NULL);
        return;
    }
    http_respond(r, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, text, len);
    free(text);
}

static int authenticate(struct llmd *d, struct http_req *r, struct tn_tenant **t, int64_t *key_id)
{
    struct api_error e;
    if (tn_auth(d->tenants, http_header(r, "Authorization"), now_unix(), t, key_id, &e) == 0)
        return 0;
    sv_send_error(d, r, &e, *t ? (*t)->cfg.name : NULL);
    return -1;
}

static void handle_models(struct llmd *d, struct http_req *r)
{
    struct tn_tenant *t = NULL;
    int64_t key_id = 0;
    if (authenticate(d, r, &t, &key_id))
        return;
    size_t len = 0;
    char *body = api_render_models(d->model_id, d->created, &len);
    http_respond(r, 200, "application/json", NULL, body ? body : "{}", body ? len : 2);
    free(body);
}

/* ------------------------------------------------------- completions -- */

/* Tokenizes prompt i of the request into *ids; -1 with e filled. */
static int sv_tokenize(struct llmd *d, struct api_request *rq, int i, int32_t **ids, int *n,
                       struct api_error *e)
{
    const struct tok *tk = model_tok(d->model);
    char err[256];
    *ids = NULL;
    *n = 0;
    if (rq->kind == API_CHAT) {
        char *text =
            tmpl_apply(model_tmpl(d->model), rq->msgs, (size_t)rq->n_msgs, 1, err, sizeof(err));
        if (!text) {
            api_error_set(e, 400, "invalid_request_error", "", "messages", "%s", err);
            return -1;
        }
        *n = tok_encode(tk, text, strlen(text), TOK_ADD_BOS | TOK_PARSE_SPECIAL, ids);
        free(text);
    } else if (rq->prompts[i].text) {
        *n = tok_encode(tk, rq->prompts[i].text, rq->prompts[i].len, TOK_ADD_BOS, ids);
    } else {
        int nv = tok_vocab_size(tk);
        for (int k = 0; k < rq->prompts[i].n_ids; k++)
            if (rq->prompts[i].ids[k] < 0 || rq->prompts[i].ids[k] >= nv) {
                api_error_set(e, 400, "invalid_request_error", "", "prompt",
                              "token id %d is outside the vocabulary (0..%d)",
                              rq->prompts[i].ids[k], nv - 1);
                return -1;
            }
        *n = rq->prompts[i].n_ids;
        *ids = malloc(sizeof(**ids) * (size_t)(*n > 0 ? *n : 1));
        if (*ids)
            memcpy(*ids, rq->prompts[i].ids, sizeof(**ids) * (size_t)*n);
        else
            *n = -1;
    }
    if (*n < 0) {
        api_error_set(e, 500, "server_error", "", "", "tokenization failed");
        return -1;
    }
    if (*n == 0) {
        api_error_set(e, 400, "invalid_request_error", "",
                      rq->kind == API_CHAT ? "messages" : "prompt", "the prompt is empty");
        return -1;
    }
    return 0;
}

/* Checks a prompt of n tokens against the context and settles max_tokens. */
static int sv_context(struct llmd *d, struct api_request *rq, int n, int *max_tokens,
                      struct api_error *e)
{
    int ctx = model_config(d->model)->n_ctx_train;
    const char *param = rq->kind == API_CHAT ? "messages" : "prompt";
    if (n >= ctx) {
        api_error_set(e, 400, "invalid_request_error", "context_length_exceeded", param,
                      "this model's maximum context length is %d tokens, but the prompt is %d "
                      "tokens",
                      ctx, n);
        return -1;
    }
    if (rq->max_tokens < 0) {
        int m = d->cfg->max_tokens_default;
        *max_tokens = m < ctx - n ? m : ctx - n;
        return 0;
    }
    if ((long)n + rq->max_tokens > ctx) {
        api_error_set(e, 400, "invalid_request_error", "context_length_exceeded", "max_tokens",
                      "this model's maximum context length is %d tokens; you asked for %d "
                      "(%d in the prompt, %d to complete)",
                      ctx, n + rq->max_tokens, n, rq->max_tokens);
        return -1;
    }
    *max_tokens = rq->max_tokens;
    return 0;
}

static struct sv_req *sv_new(struct llmd *d, enum api_kind kind)
{
    struct sv_req *sv = calloc(1, sizeof(*sv));
    if (!sv)
        return NULL;
    sv->d = d;
    sv->rq.kind = kind;
    sv->t_start = now_mono();
    snprintf(sv->id, sizeof(sv->id), "%s-%08x%08llx", kind == API_CHAT ? "chatcmpl" : "cmpl",
             d->boot_id, (unsigned long long)++d->next_id);
    return sv;
}

/* Tokenizes every prompt and checks it; fills the engine-side arrays. */
static int sv_prepare(struct sv_req *sv, int32_t ***ids, int *max_tokens, struct api_error *e)
{
    struct api_request *rq = &sv->rq;
    sv->n_eng = rq->kind == API_CHAT ? 1 : rq->n_prompts;
    sv->eng = calloc((size_t)sv->n_eng, sizeof(*sv->eng));
    sv->eng_id = calloc((size_t)sv->n_eng, sizeof(*sv->eng_id));
    sv->n_prompt = calloc((size_t)sv->n_eng, sizeof(*sv->n_prompt));
    sv->usage = calloc((size_t)sv->n_eng, sizeof(*sv->usage));
    *ids = calloc((size_t)sv->n_eng, sizeof(**ids));
    if (!sv->eng || !sv->eng_id || !sv->n_prompt || !sv->usage || !*ids) {
        api_error_set(e, 500, "server_error", "", "", "out of memory");
        return -1;
    }
    *max_tokens = -1;
    for (int i = 0; i < sv->n_eng; i++) {
        int mt = 0;
        if (sv_tokenize(sv->d, rq, i, &(*ids)[i], &sv->n_prompt[i], e) ||
            sv_context(sv->d, rq, sv->n_prompt[i], &mt, e))
            return -1;
        if (*max_tokens < 0 || mt < *max_tokens)
            *max_tokens = mt; /* one limit for every prompt: the tightest */
    }
    return 0;
}

static void handle_completion(struct llmd *d, struct http_req *r, enum api_kind kind)
{
    struct api_error e = {0};
    if (d->draining) {
        api_error_set(&e, 503, "server_error", "draining", "",
                      "the server is draining and admits no new requests");
        e.retry_after = 5;
        sv_send_error(d, r, &e, NULL);
        return;
    }
    struct tn_tenant *t = NULL;
    int64_t key_id = 0;
    if (authenticate(d, r, &t, &key_id))
        return;
    struct sv_req *sv = sv_new(d, kind);
    int32_t **ids = NULL;
    int max_tokens = 0;
    if (!sv) {
        api_error_set(&e, 500, "server_error", "", "", "out of memory");
        goto fail;
    }
    size_t blen = 0;
    const char *body = http_body(r, &blen);
    struct api_limits lim = {.model = d->model_id,
                             .max_n = d->cfg->max_n,
                             .max_prompt_ids = model_config(d->model)->n_ctx_train};
    if (api_parse(kind, body, blen, &lim, &sv->rq, &e) || sv_prepare(sv, &ids, &max_tokens, &e))
        goto fail;
    if (d->n_live >= d->cfg->max_queue) {
        api_error_set(&e, 503, "server_error", "overloaded", "",
                      "the server is overloaded (%d requests in flight); retry later", d->n_live);
        e.retry_after = 1;
        goto fail;
    }
    long need = 0;
    for (int i = 0; i < sv->n_eng; i++)
        need += sv->n_prompt[i] + (long)max_tokens * sv->rq.n;
    sv->tokens_admitted = need > 0x7fffffff ? 0x7fffffff : (int)need;
    if (tn_admit(d->tenants, t, sv->tokens_admitted, now_mono(), &e))
        goto fail;
    sv->tenant = t;
    sv->key_id = key_id;
    sv->http = r;
    int clamped = 0;
    sv->priority = tn_priority(t, sv->rq.priority, &clamped);
    int off = snprintf(sv->headers, sizeof(sv->headers), "llmd-request-id: %s\r\n", sv->id);
    if (clamped)
        snprintf(sv->headers + off, sizeof(sv->headers) - (size_t)off,
                 "llmd-priority: %d; clamped-from=%d\r\n", sv->priority, sv->rq.priority);
    sv->rq.max_tokens = max_tokens;
    sv_start(sv, ids); /* takes the prompts */
    return;
fail:
    if (ids)
        for (int i = 0; sv && i < sv->n_eng; i++)
            free(ids[i]);
    free(ids);
    sv_send_error(d, r, &e, t ? t->cfg.name : NULL);
    if (sv)
        sv_free(sv);
}

/* ------------------------------------------------------------- routing -- */

struct sv_route {
    const char *path, *method;
    int kind; /* 0 health, 1 metrics, 2 models, 3 chat, 4 completions */
};

static const struct sv_route routes[] = {
    {"/health", "GET", 0},          {"/metrics", "GET", 1},
    {"/v1/models", "GET", 2},       {"/v1/chat/completions", "POST", 3},
    {"/v1/completions", "POST", 4},
};

void sv_handle(struct http_req *r, void *arg)
{
    struct llmd *d = arg;
    const char *path = http_path(r), *method = http_method(r);
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        if (strcmp(path, routes[i].path) != 0)
            continue;
        int head = strcmp(method, "HEAD") == 0 && strcmp(routes[i].method, "GET") == 0;
        if (strcmp(method, routes[i].method) != 0 && !head) {
            struct api_error e;
            api_error_set(&e, 405, "invalid_request_error", "method_not_allowed", "",
                          "%s is not allowed on %s; use %s", method, path, routes[i].method);
            sv_send_error(d, r, &e, NULL);
            return;
        }
        switch (routes[i].kind) {
        case 0:
            handle_health(d, r);
            return;
        case 1:
            handle_metrics(d, r);
            return;
        case 2:
            handle_models(d, r);
            return;
        case 3:
            handle_completion(d, r, API_CHAT);
            return;
        default:
            handle_completion(d, r, API_COMPLETION);
            return;
        }
    }
    struct api_error e;
    api_error_set(&e, 404, "not_found_error", "unknown_url", "", "no such endpoint: %s %s", method,
                  path);
    sv_send_error(d, r, &e, NULL);
}

void sv_push_tenants(struct llmd *d)
{
    for (int i = 0; i < tn_count(d->tenants); i++) {
        const struct tn_tenant *t = tn_at(d->tenants, i);
        struct eng_tenant et = {.weight = t->cfg.weight, .max_kv_blocks = t->cfg.max_kv_blocks};
        eng_tenant_set(d->eng, t->cfg.name, &et);
    }
}
