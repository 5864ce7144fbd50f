/*
 * daemon/sv_req.c — a completion request from engine submission to the
 * last byte: tokens to text, stop strings, SSE chunks or one JSON body,
 * the ledger row, the quota released.
 *
 * The engine wakes the I/O thread through ev_wake; sv_pump takes what
 * arrived, decodes it UTF-8-safely per choice, cuts at stop strings and
 * streams what can no longer turn into a stop string.  When every engine
 * handle is done (or the client vanished), sv_finalize queues the ledger
 * row; its commit (ev_commit) sends the response's end and frees the
 * request.  Text is never sent twice and never lost to a preemption: the
 * engine replays nothing to us, it only pauses.
 */
#include "daemon/log.h"
#include "daemon/sv.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------- lifetime -- */

void sv_free(struct sv_req *sv)
{
    if (!sv)
        return;
    for (int i = 0; i < sv->n_eng; i++)
        if (sv->eng && sv->eng[i])
            eng_req_release(sv->eng[i]);
    if (sv->ev_wake)
        event_free(sv->ev_wake);
    if (sv->ev_commit)
        event_free(sv->ev_commit);
    for (int c = 0; c < sv->n_choices; c++) {
        free(sv->ch[c].text);
        api_lp_free(sv->ch[c].lp);
    }
    free(sv->ch);
    free(sv->eng);
    free(sv->eng_id);
    free(sv->n_prompt);
    free(sv->usage);
    free(sv->cancelled);
    free(sv->piece);
    api_request_free(&sv->rq);
    free(sv);
}

static void sv_link(struct sv_req *sv)
{
    struct llmd *d = sv->d;
    sv->next = d->live;
    if (d->live)
        d->live->prev = sv;
    d->live = sv;
    d->n_live++;
}

static void sv_unlink_free(struct sv_req *sv)
{
    struct llmd *d = sv->d;
    if (sv->prev)
        sv->prev->next = sv->next;
    else
        d->live = sv->next;
    if (sv->next)
        sv->next->prev = sv->prev;
    d->n_live--;
    sv_free(sv);
}

/* ------------------------------------------------------------- text -- */

static int ch_append(struct sv_choice *c, const char *s, size_t n)
{
    if (c->len + n + 1 > c->cap) {
        size_t cap = c->cap ? c->cap : 256;
        while (cap < c->len + n + 1)
            cap *= 2;
        char *t = realloc(c->text, cap);
        if (!t)
            return -1;
        c->text = t;
        c->cap = cap;
    }
    memcpy(c->text + c->len, s, n);
    c->len += n;
    c->text[c->len] = 0;
    return 0;
}

/* Cuts the choice at the first stop string that appears in text added
 * since old_len; 1 when it did. */
static int ch_stop(struct sv_req *sv, struct sv_choice *c, size_t old_len)
{
    size_t best = (size_t)-1;
    for (int i = 0; i < sv->rq.n_stop; i++) {
        size_t sl = strlen(sv->rq.stop[i]);
        size_t from = old_len >= sl - 1 ? old_len - (sl - 1) : 0;
        if (from >= c->len)
            continue;
        const char *hit = memmem(c->text + from, c->len - from, sv->rq.stop[i], sl);
        if (hit && (size_t)(hit - c->text) < best)
            best = (size_t)(hit - c->text);
    }
    if (best == (size_t)-1)
        return 0;
    c->len = best;
    c->text[best] = 0;
    c->done = 1;
    c->finish = "stop";
    return 1;
}

/* Bytes at the end of the text that could still begin a stop string. */
static size_t ch_holdback(const struct sv_req *sv, const struct sv_choice *c)
{
    size_t hold = 0;
    for (int i = 0; i < sv->rq.n_stop; i++) {
        size_t sl = strlen(sv->rq.stop[i]);
        for (size_t k = sl - 1; k > hold; k--)
            if (k <= c->len && memcmp(c->text + c->len - k, sv->rq.stop[i], k) == 0) {
                hold = k;
                break;
            }
    }
    return hold;
}

static void ch_end(struct sv_req *sv, struct sv_choice *c, enum eng_finish f)
{
    if (c->done)
        return;
    c->done = 1;
    switch (f) {
    case ENG_FINISH_STOP:
        c->finish = "stop";
        break;
    case ENG_FINISH_LENGTH:
        c->finish = "length";
        break;
    case ENG_FINISH_ABORTED:
        if (!sv->err.status && !sv->gone) {
            api_error_set(&sv->err, 503, "server_error", "request_aborted", "",
                          "the request was aborted by the server%s%s", sv->abort_why ? ": " : "",
                          sv->abort_why ? sv->abort_why : "");
        }
        break;
    default:
        if (!sv->err.status)
            api_error_set(&sv->err, 500, "server_error", "engine_error", "",
                          "the model failed while generating; see the server log");
        break;
    }
}

/* One generated token for choice of engine request i. */
static void sv_token(struct sv_req *sv, int i, const struct eng_token *tk)
{
    struct sv_choice *c = &sv->ch[i * sv->rq.n + tk->seq];
    if (c->done)
        return;
    const struct tok *t = model_tok(sv->d->model);
    size_t cap = tok_max_piece(t);
    size_t old = c->len;
    if (tk->has_lp && c->lp)
        api_lp_add(c->lp, t, &tk->lp, c->len);
    size_t n = tok_stream_push(t, &c->ts, tk->id, sv->piece, cap);
    if (tk->finish != ENG_FINISH_NONE)
        n += tok_stream_flush(t, &c->ts, sv->piece + n, cap - n);
    c->tokens++;
    if (ch_append(c, sv->piece, n) && !sv->err.status)
        api_error_set(&sv->err, 500, "server_error", "", "", "out of memory");
    if (ch_stop(sv, c, old))
        return;
    if (tk->finish != ENG_FINISH_NONE)
        ch_end(sv, c, tk->finish);
}

/* ---------------------------------------------------------- streaming -- */

/* Writes and frees one rendered event; len is read only after ev was
 * rendered (callers pass &len of the same call). */
static void sv_write_event(struct sv_req *sv, char *ev, const size_t *len)
{
    if (ev && sv->http)
        http_stream_write(sv->http, ev, *len);
    free(ev);
}

/* Streams what each choice can send now. */
static void sv_stream(struct sv_req *sv)
{
    for (int k = 0; k < sv->n_choices; k++) {
        struct sv_choice *c = &sv->ch[k];
        size_t end = c->done ? c->len : c->len - ch_holdback(sv, c);
        int fin = c->done && c->finish && !c->finish_sent && !sv->err.status;
        if (end <= c->sent && !fin)
            continue;
        size_t len = 0;
        char *ev = api_render_chunk(&sv->meta, k, 0, c->text ? c->text + c->sent : "",
                                    end > c->sent ? end - c->sent : 0, fin ? c->finish : NULL,
                                    c->lp, &len);
        sv_write_event(sv, ev, &len);
        if (end > c->sent)
            c->sent = end;
        if (fin)
            c->finish_sent = 1;
    }
}

/* ------------------------------------------------------ the ledger row -- */

static void sv_committed(void *arg, int ok)
{
    struct sv_req *sv = arg;
    (void)ok;
    event_active(sv->ev_commit, EV_READ, 0); /* writer thread: only signal */
}

struct sv_totals {
    int prompt, cached, completion, preemptions;
    double t_first, t_sched, t_done;
};

static void sv_sum(const struct sv_req *sv, struct sv_totals *s)
{
    memset(s, 0, sizeof(*s));
    for (int i = 0; i < sv->n_eng; i++) {
        const struct eng_usage *u = &sv->usage[i];
        s->prompt += sv->n_prompt[i];
        s->cached += u->cached_tokens;
        s->preemptions += u->preempt_swap + u->preempt_recompute;
        if (u->t_first > 0 && (s->t_first == 0 || u->t_first < s->t_first))
            s->t_first = u->t_first;
        if (u->t_sched > 0 && (s->t_sched == 0 || u->t_sched < s->t_sched))
            s->t_sched = u->t_sched;
        if (u->t_done > s->t_done)
            s->t_done = u->t_done;
    }
    for (int k = 0; k < sv->n_choices; k++)
        s->completion += sv->ch[k].tokens;
}

static void sv_finalize(struct sv_req *sv)
{
    sv->finalizing = 1;
    if (sv->gone) {
        sv->status = 499; /* the client closed the connection first */
        sv->finish = "cancelled";
    } else if (sv->err.status) {
        sv->status = sv->rq.stream ? 200 : sv->err.status;
        sv->finish = sv->err.status == 503 ? "aborted" : "error";
    } else {
        sv->status = 200;
        sv->finish = "stop";
        for (int k = 0; k < sv->n_choices; k++)
            if (sv->ch[k].finish && strcmp(sv->ch[k].finish, "length") == 0)
                sv->finish = "length";
    }
    struct sv_totals s;
    sv_sum(sv, &s);
    struct db_usage u = {0};
    struct timeval tv;
    gettimeofday(&tv, NULL);
    u.ts_ms = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
    snprintf(u.tenant, sizeof(u.tenant), "%s", sv->tenant->cfg.name);
    u.key_id = sv->key_id;
    snprintf(u.request_id, sizeof(u.request_id), "%s", sv->id);
    u.prompt_tokens = s.prompt;
    u.cached_tokens = s.cached;
    u.completion_tokens = s.completion;
    u.queue_ms = s.t_sched > 0 ? (s.t_sched - sv->t_start) * 1e3 : 0;
    u.ttft_ms = s.t_first > 0 ? (s.t_first - sv->t_start) * 1e3 : 0;
    u.total_ms = (mono() - sv->t_start) * 1e3;
    u.preemptions = s.preemptions;
    snprintf(u.finish, sizeof(u.finish), "%s", sv->finish);
    u.status = sv->status;
    if (db_writer_push(sv->d->writer, &u, sv_committed, sv)) {
        log_error("usage ledger: the writer is stopped; request %s is not recorded", sv->id);
        event_active(sv->ev_commit, EV_READ, 0);
    }
}

/* Sends the end of the response (after the ledger commit). */
static void sv_respond(struct sv_req *sv, const struct sv_totals *s)
{
    struct api_usage au = {
        .prompt_tokens = s->prompt, .completion_tokens = s->completion, .cached_tokens = s->cached};
    size_t len = 0;
    if (sv->rq.stream) {
        if (sv->err.status) {
            sv_write_event(sv, api_render_error_event(&sv->err, &len), &len);
        } else {
            sv_stream(sv);
            if (sv->rq.include_usage)
                sv_write_event(sv, api_render_usage_chunk(&sv->meta, &au, &len), &len);
        }
        http_stream_write(sv->http, "data: [DONE]\n\n", 14);
        http_stream_end(sv->http);
        return;
    }
    if (sv->err.status) {
        sv_send_error(sv->d, sv->http, &sv->err, sv->tenant->cfg.name);
        return;
    }
    struct api_choice *chs = calloc((size_t)sv->n_choices, sizeof(*chs));
    char *body = NULL;
    if (chs) {
        for (int k = 0; k < sv->n_choices; k++)
            chs[k] = (struct api_choice){.text = sv->ch[k].text ? sv->ch[k].text : "",
                                         .len = sv->ch[k].len,
                                         .finish = sv->ch[k].finish,
                                         .lp = sv->ch[k].lp};
        body = api_render_response(&sv->meta, chs, sv->n_choices, &au, &len);
        free(chs);
    }
    if (!body) {
        api_error_set(&sv->err, 500, "server_error", "", "", "out of memory");
        sv_send_error(sv->d, sv->http, &sv->err, sv->tenant->cfg.name);
        return;
    }
    http_respond(sv->http, 200, "application/json", sv->headers, body, len);
    free(body);
}

static void on_commit(evutil_socket_t fd, short what, void *arg)
{
    struct sv_req *sv = arg;
    struct llmd *d = sv->d;
    (void)fd;
    (void)what;
    struct sv_totals s;
    sv_sum(sv, &s);
    if (sv->http)
        sv_respond(sv, &s);
    const char *tn = sv->tenant->cfg.name;
    if (!(sv->http && sv->err.status && !sv->rq.stream)) /* sv_send_error counted that one */
        metrics_request(d->metrics, tn, sv->status);
    metrics_tokens(d->metrics, tn, "prompt", s.prompt);
    metrics_tokens(d->metrics, tn, "cached", s.cached);
    metrics_tokens(d->metrics, tn, "completion", s.completion);
    double end = mono();
    double ttft = s.t_first > 0 ? s.t_first - sv->t_start : -1;
    double tpot = s.completion > 1 && s.t_done > s.t_first && s.t_first > 0
                      ? (s.t_done - s.t_first) / (s.completion - 1)
                      : -1;
    metrics_latency(d->metrics, ttft, tpot, end - sv->t_start,
                    s.t_sched > 0 ? s.t_sched - sv->t_start : -1);
    log_info("request %s tenant=%s status=%d finish=%s prompt=%d cached=%d completion=%d "
             "ttft_ms=%.0f total_ms=%.0f preemptions=%d",
             sv->id, tn, sv->status, sv->finish, s.prompt, s.cached, s.completion,
             ttft > 0 ? ttft * 1e3 : 0, (end - sv->t_start) * 1e3, s.preemptions);
    tn_release(d->tenants, sv->tenant, sv->tokens_admitted, s.prompt + s.completion, end);
    sv_unlink_free(sv);
}

/* ------------------------------------------------------------- pumping -- */

/* Takes everything the engine produced for this request. */
static void sv_pump(struct sv_req *sv)
{
    if (sv->finalizing)
        return;
    struct eng_token tk[64];
    int n_live = 0;
    for (int i = 0; i < sv->n_eng; i++) {
        struct eng_req *r = sv->eng[i];
        if (!r)
            continue;
        int n;
        while ((n = eng_req_take(r, tk, 64)) > 0)
            for (int j = 0; j < n; j++)
                sv_token(sv, i, &tk[j]);
        if (eng_req_done(r)) {
            for (int s = 0; s < sv->rq.n; s++)
                ch_end(sv, &sv->ch[i * sv->rq.n + s], eng_req_finish(r, s));
            eng_req_usage(r, &sv->usage[i]);
            eng_req_release(r);
            sv->eng[i] = NULL;
            continue;
        }
        n_live++;
        int all_done = 1;
        for (int s = 0; s < sv->rq.n; s++)
            all_done &= sv->ch[i * sv->rq.n + s].done;
        if (all_done && !sv->cancelled[i]) { /* stop strings ended it: free its blocks now */
            sv->cancelled[i] = 1;
            eng_cancel(sv->d->eng, sv->eng_id[i]);
        }
    }
    if (sv->rq.stream && sv->http && !sv->err.status)
        sv_stream(sv);
    if (n_live == 0)
        sv_finalize(sv);
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sv_pump(arg);
}

/* Engine thread, under the handle's lock: only signal. */
static void sv_wake(void *arg)
{
    struct sv_req *sv = arg;
    event_active(sv->ev_wake, EV_READ, 0);
}

/* The client went away: cancel what runs, record the request, free it
 * once the record is committed. */
static void sv_gone(void *arg)
{
    struct sv_req *sv = arg;
    sv->http = NULL;
    if (sv->finalizing)
        return;
    sv->gone = 1;
    for (int i = 0; i < sv->n_eng; i++) {
        if (!sv->eng[i])
            continue;
        struct eng_token tk[64];
        int n;
        while ((n = eng_req_take(sv->eng[i], tk, 64)) > 0)
            for (int j = 0; j < n; j++)
                sv_token(sv, i, &tk[j]); /* tokens computed count as used */
        eng_req_usage(sv->eng[i], &sv->usage[i]);
        eng_req_release(sv->eng[i]); /* cancels: its blocks are free by the next step */
        sv->eng[i] = NULL;
    }
    sv_finalize(sv);
}

/* ------------------------------------------------------------- start -- */

static int sv_alloc(struct sv_req *sv)
{
    struct llmd *d = sv->d;
    sv->n_choices = sv->n_eng * sv->rq.n;
    sv->ch = calloc((size_t)sv->n_choices, sizeof(*sv->ch));
    sv->cancelled = calloc((size_t)sv->n_eng, sizeof(*sv->cancelled));
    sv->piece = malloc(tok_max_piece(model_tok(d->model)) + 16);
    sv->ev_wake = event_new(d->base, -1, 0, on_wake, sv);
    sv->ev_commit = event_new(d->base, -1, 0, on_commit, sv);
    if (!sv->ch || !sv->cancelled || !sv->piece || !sv->ev_wake || !sv->ev_commit)
        return -1;
    for (int k = 0; k < sv->n_choices; k++)
        if (sv->rq.logprobs && !(sv->ch[k].lp = api_lp_new(sv->rq.kind)))
            return -1;
    return 0;
}

static uint64_t sv_seed(struct llmd *d)
{
    uint64_t x = (uint64_t)d->boot_id << 32 ^ d->next_id ^ (uint64_t)(mono() * 1e9);
    x += 0x9e3779b97f4a7c15ull; /* splitmix64 */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static void sv_submit_error(int rc, struct api_error *e)
{
    switch (rc) {
    case ENG_EDRAIN:
    case ENG_ESTOPPED:
        api_error_set(e, 503, "server_error", "draining", "",
                      "the server is draining and admits no new requests");
        e->retry_after = 5;
        break;
    case ENG_ETOOBIG:
        api_error_set(e, 400, "invalid_request_error", "context_length_exceeded", "max_tokens",
                      "the prompt and max_tokens need more KV cache than this server has");
        break;
    case ENG_EINVAL:
        api_error_set(e, 400, "invalid_request_error", "", "", "the engine refused the request");
        break;
    default:
        api_error_set(e, 500, "server_error", "", "", "%s", eng_strerror(rc));
        break;
    }
}

void sv_start(struct sv_req *sv, int32_t **ids)
{
    struct llmd *d = sv->d;
    struct api_error e = {0};
    sv->meta = (struct api_meta){.kind = sv->rq.kind,
                                 .id = sv->id,
                                 .created = (long)time(NULL),
                                 .model = d->model_id,
                                 .n_logprobs = sv->rq.logprobs ? sv->rq.smp.n_logprobs : 0,
                                 .include_usage = sv->rq.include_usage};
    if (!sv->rq.seed_set)
        sv->rq.smp.seed = sv_seed(d);
    int rc = sv_alloc(sv) ? ENG_ENOMEM : ENG_OK;
    for (int i = 0; rc == ENG_OK && i < sv->n_eng; i++) {
        sv->eng_id[i] = ++d->next_id;
        struct eng_request er = {.id = sv->eng_id[i],
                                 .tenant = sv->tenant->cfg.name,
                                 .priority = sv->priority,
                                 .prompt = ids[i],
                                 .n_prompt = sv->n_prompt[i],
                                 .max_tokens = sv->rq.max_tokens,
                                 .n = sv->rq.n,
                                 .smp = sv->rq.smp,
                                 .ignore_eos = sv->rq.ignore_eos,
                                 .wake = sv_wake,
                                 .wake_arg = sv};
        rc = eng_submit(d->eng, &er, &sv->eng[i]);
    }
    for (int i = 0; i < sv->n_eng; i++)
        free(ids[i]);
    free(ids);
    if (rc != ENG_OK) {
        sv_submit_error(rc, &e);
        tn_release(d->tenants, sv->tenant, sv->tokens_admitted, 0, mono());
        sv_send_error(d, sv->http, &e, sv->tenant->cfg.name);
        sv_free(sv); /* releases (cancels) what was submitted */
        return;
    }
    sv_link(sv);
    http_req_on_close(sv->http, sv_gone, sv);
    log_debug("request %s tenant=%s priority=%d prompts=%d n=%d max_tokens=%d", sv->id,
              sv->tenant->cfg.name, sv->priority, sv->n_eng, sv->rq.n, sv->rq.max_tokens);
    if (!sv->rq.stream)
        return;
    char hdr[320];
    snprintf(hdr, sizeof(hdr), "%sX-Accel-Buffering: no\r\n", sv->headers);
    http_stream_start(sv->http, 200, "text/event-stream", hdr);
    if (sv->rq.kind == API_CHAT)
        for (int k = 0; k < sv->n_choices; k++) {
            size_t len = 0;
            sv_write_event(sv, api_render_chunk(&sv->meta, k, 1, "", 0, NULL, NULL, &len), &len);
        }
}

void sv_abort_all(struct llmd *d, const char *why)
{
    for (struct sv_req *sv = d->live; sv; sv = sv->next) {
        if (sv->finalizing)
            continue;
        sv->abort_why = why;
        for (int i = 0; i < sv->n_eng; i++)
            if (sv->eng[i])
                eng_evict(d->eng, sv->eng_id[i], 1);
    }
}

const char *sv_public_id(const struct llmd *d, uint64_t eng_id)
{
    for (const struct sv_req *sv = d->live; sv; sv = sv->next)
        for (int i = 0; i < sv->n_eng; i++)
            if (sv->eng_id[i] == eng_id)
                return sv->id;
    return NULL;
}

int sv_engine_ids(const struct llmd *d, const char *id, const uint64_t **ids)
{
    for (const struct sv_req *sv = d->live; sv; sv = sv->next)
        if (strcmp(sv->id, id) == 0) {
            *ids = sv->eng_id;
            return sv->n_eng;
        }
    *ids = NULL;
    return 0;
}

int sv_tenant_engine_reqs(const struct llmd *d, const char *tenant)
{
    int n = 0;
    for (const struct sv_req *sv = d->live; sv; sv = sv->next) {
        if (sv->finalizing || !sv->tenant || strcmp(sv->tenant->cfg.name, tenant) != 0)
            continue;
        for (int i = 0; i < sv->n_eng; i++)
            n += sv->eng[i] != NULL && !eng_req_done(sv->eng[i]);
    }
    return n;
}

void sv_free_all(struct llmd *d)
{
    while (d->live)
        sv_unlink_free(d->live);
}
