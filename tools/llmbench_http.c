/*
 * tools/llmbench_http.c — llmbench's HTTP/1.1 client: one libevent loop,
 * plain TCP or TLS, keep-alive, Server-Sent Events, and the timing and
 * outcome of every request.
 *
 * The one idea: a request (struct lb_req) borrows one connection (struct
 * lb_conn) for its whole life.  The connection owns every buffer and the
 * response parser (status line, headers, Content-Length or chunked framing,
 * then SSE lines or a JSON body); the request owns its timers and its
 * record.  A request settles exactly once (lb_req_settle): its connection
 * goes back to the idle pool only after a complete response that did not ask
 * to close, and otherwise is freed with it.  Idle connections and requests in
 * flight sit on intrusive doubly linked lists, so nothing scans all of them.
 */
#include "tools/llmbench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#define LB_HEAD_MAX  (64 * 1024)        /* longest response head we accept */
#define LB_BODY_MAX  (16 * 1024 * 1024) /* longest non-stream body we keep */
#define LB_EVENT_MAX (4 * 1024 * 1024)  /* longest SSE event */

/* Where the response parser is. */
enum lb_ps {
    PS_STATUS,
    PS_HEADERS,
    PS_CHUNK_SIZE,
    PS_CHUNK_DATA,
    PS_CHUNK_CRLF,
    PS_TRAILERS,
    PS_LENGTH,
    PS_TO_EOF,
    PS_DONE
};

struct lb_req;

struct lb_conn {
    struct lb_client *c;
    struct bufferevent *bev;
    struct lb_req *req;          /* the request using it; NULL when idle */
    struct lb_conn *prev, *next; /* idle list */
    int connected, served;       /* handshake done; a response completed */
    int idle;                    /* on the client's idle list */
    /* response parser */
    enum lb_ps ps;
    int status, chunked, close, sse, got_bytes;
    long length, left;      /* Content-Length; bytes left in chunk */
    struct evbuffer *body;  /* non-stream body, or SSE bytes not yet
                               split into lines */
    struct evbuffer *event; /* the SSE event's data lines so far */
};

struct lb_req {
    struct lb_client *c;
    struct lb_conn *conn;
    struct lb_record *rec;
    struct lb_req *prev, *next; /* in-flight list */
    char *path, *key, *body;
    size_t len;
    double t0, t_last; /* run start; last content chunk */
    lb_done_fn done;
    void *arg;
    struct event *timeout, *disc, *kick;
    int retried;
    enum lb_outcome pending; /* decided, waiting for the body's end */
    char pending_err[64];
};

struct lb_client {
    struct event_base *base;
    struct lb_target t;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    double timeout_s;
    SSL_CTX *ssl;
    SSL_SESSION *sess; /* newest session, offered on reconnect */
    int host_is_ip;
    struct lb_conn *idle; /* most recently idled first */
    struct lb_req *inflight;
    int n_inflight;
};

static void lb_conn_read_cb(struct bufferevent *bev, void *arg);
static void lb_conn_event_cb(struct bufferevent *bev, short what, void *arg);
static int lb_req_start(struct lb_req *q, struct lb_conn *k);

double lb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void lb_copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

/* ------------------------------------------------------------- target */

int lb_target_parse(const char *url, struct lb_target *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof(*t));
    const char *p;
    if (strncmp(url, "https://", 8) == 0) {
        t->tls = 1;
        p = url + 8;
    } else if (strncmp(url, "http://", 7) == 0) {
        p = url + 7;
    } else {
        snprintf(err, errlen, "%s: the URL must start with http:// or https://", url);
        return -1;
    }
    const char *slash = strchr(p, '/');
    size_t hl = slash ? (size_t)(slash - p) : strlen(p);
    const char *hend = p + hl, *colon = NULL;
    if (hl > 0 && *p == '[') { /* [v6]:port */
        const char *rb = memchr(p, ']', hl);
        if (!rb) {
            snprintf(err, errlen, "%s: unterminated [ in the host", url);
            return -1;
        }
        if (rb + 1 < hend && rb[1] == ':')
            colon = rb + 1;
        else if (rb + 1 != hend)
            rb = NULL;
        if (!rb || (size_t)(rb - p - 1) >= sizeof(t->host)) {
            snprintf(err, errlen, "%s: bad host", url);
            return -1;
        }
        memcpy(t->host, p + 1, (size_t)(rb - p - 1));
    } else {
        colon = memchr(p, ':', hl);
        size_t nl = colon ? (size_t)(colon - p) : hl;
        if (nl >= sizeof(t->host)) {
            snprintf(err, errlen, "%s: host name too long", url);
            return -1;
        }
        memcpy(t->host, p, nl);
    }
    if (!t->host[0]) {
        snprintf(err, errlen, "%s: no host", url);
        return -1;
    }
    if (colon) {
        size_t pl = (size_t)(hend - colon - 1);
        char *end;
        long port = strtol(colon + 1, &end, 10);
        if (pl == 0 || pl >= sizeof(t->port) || end != hend || port < 1 || port > 65535) {
            snprintf(err, errlen, "%s: bad port", url);
            return -1;
        }
        memcpy(t->port, colon + 1, pl);
    } else {
        lb_copy(t->port, sizeof(t->port), t->tls ? "443" : "80");
    }
    if (slash) {
        size_t bl = strlen(slash);
        while (bl > 0 && slash[bl - 1] == '/')
            bl--;
        if (bl >= 3 && strncmp(slash + bl - 3, "/v1", 3) == 0)
            bl -= 3;
        if (bl >= sizeof(t->base)) {
            snprintf(err, errlen, "%s: path too long", url);
            return -1;
        }
        memcpy(t->base, slash, bl);
    }
    return 0;
}

/* ---------------------------------------------------------------- TLS */

/* Keeps the newest session so that reconnects resume instead of doing a
 * full handshake (TLS 1.3 tickets arrive after the handshake, hence the
 * callback rather than SSL_get1_session). */
static int lb_new_session_cb(SSL *ssl, SSL_SESSION *sess)
{
    struct lb_client *c = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    if (c->sess)
        SSL_SESSION_free(c->sess);
    c->sess = sess;
    return 1; /* we keep the reference */
}

static int lb_tls_init(struct lb_client *c, char *err, size_t errlen)
{
    c->ssl = SSL_CTX_new(TLS_client_method());
    if (!c->ssl || !SSL_CTX_set_min_proto_version(c->ssl, TLS1_2_VERSION)) {
        snprintf(err, errlen, "cannot make a TLS context");
        return -1;
    }
    SSL_CTX_set_app_data(c->ssl, c);
    SSL_CTX_set_session_cache_mode(c->ssl,
                                   SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(c->ssl, lb_new_session_cb);
    if (c->t.insecure) {
        SSL_CTX_set_verify(c->ssl, SSL_VERIFY_NONE, NULL);
        return 0;
    }
    SSL_CTX_set_verify(c->ssl, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_default_verify_paths(c->ssl);
    if (c->t.ca_file && SSL_CTX_load_verify_locations(c->ssl, c->t.ca_file, NULL) != 1) {
        snprintf(err, errlen, "%s: cannot load the CA certificates", c->t.ca_file);
        return -1;
    }
    return 0;
}

/* A client SSL for one connection: SNI, the name to verify, the session. */
static SSL *lb_tls_new(struct lb_client *c)
{
    SSL *ssl = SSL_new(c->ssl);
    if (!ssl)
        return NULL;
    int ok = 1;
    if (!c->host_is_ip)
        ok = SSL_set_tlsext_host_name(ssl, c->t.host) == 1;
    if (ok && !c->t.insecure) {
        if (c->host_is_ip)
            ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), c->t.host) == 1;
        else
            ok = SSL_set1_host(ssl, c->t.host) == 1;
    }
    if (ok && c->sess)
        SSL_set_session(ssl, c->sess);
    if (!ok) {
        SSL_free(ssl);
        return NULL;
    }
    return ssl;
}

/* ------------------------------------------------------------- client */

struct lb_client *lb_client_new(struct event_base *base, const struct lb_target *t,
                                double timeout_s, char *err, size_t errlen)
{
    struct lb_client *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->base = base;
    c->t = *t;
    c->timeout_s = timeout_s;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int rc = getaddrinfo(t->host, t->port, &hints, &ai);
    if (rc != 0 || !ai) {
        snprintf(err, errlen, "%s:%s: %s", t->host, t->port, gai_strerror(rc));
        free(c);
        return NULL;
    }
    memcpy(&c->addr, ai->ai_addr, ai->ai_addrlen);
    c->addrlen = ai->ai_addrlen;
    freeaddrinfo(ai);
    unsigned char tmp[16];
    c->host_is_ip = inet_pton(AF_INET, t->host, tmp) == 1 || inet_pton(AF_INET6, t->host, tmp) == 1;
    if (t->tls && lb_tls_init(c, err, errlen) != 0) {
        lb_client_free(c);
        return NULL;
    }
    return c;
}

int lb_client_inflight(const struct lb_client *c)
{
    return c->n_inflight;
}

/* --------------------------------------------------------- connections */

static void lb_idle_remove(struct lb_conn *k)
{
    struct lb_client *c = k->c;
    if (!k->idle)
        return;
    k->idle = 0;
    if (k->prev)
        k->prev->next = k->next;
    else if (c->idle == k)
        c->idle = k->next;
    if (k->next)
        k->next->prev = k->prev;
    k->prev = k->next = NULL;
}

static void lb_conn_free(struct lb_conn *k)
{
    if (!k)
        return;
    lb_idle_remove(k);
    if (k->bev)
        bufferevent_free(k->bev); /* closes the socket, frees the SSL */
    if (k->body)
        evbuffer_free(k->body);
    if (k->event)
        evbuffer_free(k->event);
    free(k);
}

/* A new connection, connecting (TCP, then the TLS handshake). */
static struct lb_conn *lb_conn_open(struct lb_client *c)
{
    struct lb_conn *k = calloc(1, sizeof(*k));
    if (!k)
        return NULL;
    k->c = c;
    k->body = evbuffer_new();
    k->event = evbuffer_new();
    int opt = BEV_OPT_CLOSE_ON_FREE;
    if (c->t.tls) {
        SSL *ssl = lb_tls_new(c);
        if (ssl) {
            k->bev =
                bufferevent_openssl_socket_new(c->base, -1, ssl, BUFFEREVENT_SSL_CONNECTING, opt);
            if (!k->bev)
                SSL_free(ssl);
            else
                bufferevent_openssl_set_allow_dirty_shutdown(k->bev, 1);
        }
    } else {
        k->bev = bufferevent_socket_new(c->base, -1, opt);
    }
    if (!k->bev || !k->body || !k->event) {
        lb_conn_free(k);
        return NULL;
    }
    bufferevent_setcb(k->bev, lb_conn_read_cb, NULL, lb_conn_event_cb, k);
    if (bufferevent_socket_connect(k->bev, (struct sockaddr *)&c->addr, (int)c->addrlen) != 0) {
        lb_conn_free(k);
        return NULL;
    }
    return k;
}

/* Parks a connection after a complete response; it keeps reading so that
 * a close from the server is noticed and the connection dropped. */
static void lb_conn_park(struct lb_conn *k)
{
    struct lb_client *c = k->c;
    k->req = NULL;
    k->served = 1;
    k->idle = 1;
    k->next = c->idle;
    k->prev = NULL;
    if (c->idle)
        c->idle->prev = k;
    c->idle = k;
    bufferevent_enable(k->bev, EV_READ);
}

/* Resets the parser for the next response on k. */
static void lb_conn_reset(struct lb_conn *k)
{
    k->ps = PS_STATUS;
    k->status = k->chunked = k->close = k->sse = k->got_bytes = 0;
    k->length = -1;
    k->left = 0;
    evbuffer_drain(k->body, evbuffer_get_length(k->body));
    evbuffer_drain(k->event, evbuffer_get_length(k->event));
}

/* ------------------------------------------------------------- requests */

static void lb_req_free(struct lb_req *q)
{
    if (q->timeout)
        event_free(q->timeout);
    if (q->disc)
        event_free(q->disc);
    if (q->kick)
        event_free(q->kick);
    free(q->path);
    free(q->key);
    free(q->body);
    free(q);
}

/* Ends q: its outcome, t_end, the connection parked (keep_conn) or freed,
 * and done.  The only place a request leaves the in-flight list. */
static void lb_req_settle(struct lb_req *q, enum lb_outcome o, const char *err, int keep_conn)
{
    struct lb_client *c = q->c;
    struct lb_record *rec = q->rec;
    rec->outcome = o;
    if (rec->t_end < 0)
        rec->t_end = lb_now() - q->t0;
    if (err && !rec->err[0])
        lb_copy(rec->err, sizeof(rec->err), err);
    struct lb_conn *k = q->conn;
    q->conn = NULL;
    if (k && keep_conn)
        lb_conn_park(k);
    else
        lb_conn_free(k);
    if (q->prev)
        q->prev->next = q->next;
    else
        c->inflight = q->next;
    if (q->next)
        q->next->prev = q->prev;
    c->n_inflight--;
    lb_done_fn done = q->done;
    void *arg = q->arg;
    lb_req_free(q);
    done(rec, arg);
}

static void lb_req_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
    lb_req_settle(arg, LB_LOST, "timeout", 0);
}

static void lb_req_disc_cb(evutil_socket_t fd, short what, void *arg)
{
    lb_req_settle(arg, LB_DISCONNECTED, NULL, 0);
}

/* A request that could not start settles from the loop, never from inside
 * lb_client_send. */
static void lb_req_kick_cb(evutil_socket_t fd, short what, void *arg)
{
    struct lb_req *q = arg;
    lb_req_settle(q, q->pending, q->pending_err, 0);
}

static void lb_req_fail_later(struct lb_req *q, const char *err)
{
    q->pending = LB_LOST;
    lb_copy(q->pending_err, sizeof(q->pending_err), err);
    struct timeval zero = {0, 0};
    evtimer_add(q->kick, &zero);
}

static void lb_add_timer(struct event *ev, double s)
{
    struct timeval tv = {.tv_sec = (time_t)s,
                         .tv_usec = (suseconds_t)((s - (double)(time_t)s) * 1e6)};
    evtimer_add(ev, &tv);
}

/* Writes q's request onto k's output. */
static int lb_req_write(struct lb_req *q, struct lb_conn *k)
{
    struct lb_client *c = q->c;
    struct evbuffer *out = bufferevent_get_output(k->bev);
    int hp = strcmp(c->t.port, c->t.tls ? "443" : "80") != 0;
    int v6 = strchr(c->t.host, ':') != NULL;
    int rc = evbuffer_add_printf(out,
                                 "POST %s%s HTTP/1.1\r\nHost: %s%s%s%s%s\r\n"
                                 "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                                 "User-Agent: llmbench\r\n",
                                 c->t.base, q->path, v6 ? "[" : "", c->t.host, v6 ? "]" : "",
                                 hp ? ":" : "", hp ? c->t.port : "", q->len);
    if (rc >= 0 && q->key)
        rc = evbuffer_add_printf(out, "Authorization: Bearer %s\r\n", q->key);
    if (rc >= 0 && q->rec->stream)
        rc = evbuffer_add_printf(out, "Accept: text/event-stream\r\n");
    if (rc >= 0)
        rc = evbuffer_add(out, "\r\n", 2);
    if (rc >= 0)
        rc = evbuffer_add(out, q->body, q->len);
    return rc < 0 ? -1 : 0;
}

/* Puts q on connection k (idle or fresh) and sends it. */
static int lb_req_start(struct lb_req *q, struct lb_conn *k)
{
    q->conn = k;
    k->req = q;
    lb_conn_reset(k);
    if (lb_req_write(q, k) != 0)
        return -1;
    bufferevent_enable(k->bev, EV_READ | EV_WRITE);
    return 0;
}

/* Takes the most recently parked idle connection, or opens one. */
static struct lb_conn *lb_conn_take(struct lb_client *c, int fresh)
{
    struct lb_conn *k = fresh ? NULL : c->idle;
    if (k) {
        lb_idle_remove(k);
        return k;
    }
    return lb_conn_open(c);
}

void lb_client_send(struct lb_client *c, struct lb_record *rec, const char *path, const char *key,
                    char *body, size_t len, double t0, lb_done_fn done, void *arg)
{
    struct lb_req *q = calloc(1, sizeof(*q));
    if (!q) {
        /* Nowhere to remember it: settle at once, the one exception. */
        free(body);
        rec->outcome = LB_LOST;
        rec->t_end = lb_now() - t0;
        lb_copy(rec->err, sizeof(rec->err), "memory");
        done(rec, arg);
        return;
    }
    q->c = c;
    q->rec = rec;
    q->body = body;
    q->len = len;
    q->t0 = t0;
    q->done = done;
    q->arg = arg;
    q->path = strdup(path);
    q->key = key ? strdup(key) : NULL;
    q->timeout = evtimer_new(c->base, lb_req_timeout_cb, q);
    q->disc = evtimer_new(c->base, lb_req_disc_cb, q);
    q->kick = evtimer_new(c->base, lb_req_kick_cb, q);
    q->next = c->inflight;
    if (c->inflight)
        c->inflight->prev = q;
    c->inflight = q;
    c->n_inflight++;
    rec->outcome = LB_PENDING;
    rec->t_send = lb_now() - t0;
    rec->t_first = rec->t_end = -1;
    if (!q->path || (key && !q->key) || !q->timeout || !q->disc || !q->kick) {
        if (q->kick)
            lb_req_fail_later(q, "memory");
        else
            lb_req_settle(q, LB_LOST, "memory", 0);
        return;
    }
    if (c->timeout_s > 0)
        lb_add_timer(q->timeout, c->timeout_s);
    if (!rec->stream && rec->disconnect_at_s > 0)
        lb_add_timer(q->disc, rec->disconnect_at_s);
    struct lb_conn *k = lb_conn_take(c, 0);
    if (!k || lb_req_start(q, k) != 0)
        lb_req_fail_later(q, "connect");
}

/* A reused keep-alive connection died before any byte of the response: the
 * server had closed it while it sat idle.  Try once more on a fresh one. */
static int lb_req_retry(struct lb_req *q)
{
    struct lb_conn *k = q->conn;
    if (q->retried || !k || !k->served || k->got_bytes)
        return -1;
    q->retried = 1;
    q->conn = NULL;
    lb_conn_free(k);
    k = lb_conn_open(q->c);
    if (!k || lb_req_start(q, k) != 0) {
        lb_req_fail_later(q, "connect");
        return 0;
    }
    q->rec->t_send = lb_now() - q->t0;
    return 0;
}

void lb_client_cut_all(struct lb_client *c)
{
    while (c->inflight)
        lb_req_settle(c->inflight, LB_CUT, NULL, 0);
    while (c->idle)
        lb_conn_free(c->idle);
}

void lb_client_free(struct lb_client *c)
{
    if (!c)
        return;
    lb_client_cut_all(c);
    if (c->sess)
        SSL_SESSION_free(c->sess);
    if (c->ssl)
        SSL_CTX_free(c->ssl);
    free(c);
}

/* --------------------------------------------------------- SSE events */

/* The error object's type, or its code, into out. */
static void lb_error_name(json_t *err, char *out, size_t cap)
{
    json_t *v = json_object_get(err, "type");
    if (!json_is_string(v) || !json_string_length(v))
        v = json_object_get(err, "code");
    if (json_is_string(v))
        lb_copy(out, cap, json_string_value(v));
    else if (json_is_integer(v))
        snprintf(out, cap, "%lld", (long long)json_integer_value(v));
    else
        lb_copy(out, cap, "error");
}

static void lb_usage(struct lb_record *rec, json_t *j)
{
    json_t *u = json_object_get(j, "usage");
    if (!json_is_object(u))
        return;
    json_t *ct = json_object_get(u, "completion_tokens");
    json_t *pt = json_object_get(u, "prompt_tokens");
    if (json_is_integer(ct))
        rec->out_tokens = (int)json_integer_value(ct);
    if (json_is_integer(pt))
        rec->prompt_tokens = (int)json_integer_value(pt);
    rec->usage_seen = 1;
}

/* 1 when one of choices[] carries text (delta.content or text). */
static int lb_has_content(json_t *j)
{
    size_t i;
    json_t *ch;
    json_array_foreach(json_object_get(j, "choices"), i, ch)
    {
        json_t *s = json_object_get(json_object_get(ch, "delta"), "content");
        if (!json_is_string(s))
            s = json_object_get(ch, "text");
        if (json_is_string(s) && json_string_length(s) > 0)
            return 1;
    }
    return 0;
}

/* One content chunk: TTFT at the first, an ITL gap for each later one.
 * 1 when the request was disconnected on purpose (q is gone). */
static int lb_chunk(struct lb_req *q)
{
    struct lb_record *rec = q->rec;
    double now = lb_now() - q->t0;
    if (rec->chunks == 0)
        rec->t_first = now;
    else
        lb_record_itl(rec, (float)((now - q->t_last) * 1000.0));
    q->t_last = now;
    rec->chunks++;
    if (!rec->usage_seen) /* what we got so far, whatever the end */
        rec->out_tokens = rec->chunks;
    if (rec->disconnect_after > 0 && rec->chunks >= rec->disconnect_after) {
        lb_req_settle(q, LB_DISCONNECTED, NULL, 0);
        return 1;
    }
    return 0;
}

/* Handles one SSE event's data.  1 when q settled (and is gone). */
static int lb_sse_event(struct lb_req *q, const char *data, size_t n)
{
    struct lb_record *rec = q->rec;
    if (q->pending != LB_PENDING)
        return 0; /* decided already: the rest only drains the body */
    if (n == 6 && memcmp(data, "[DONE]", 6) == 0) {
        if (!rec->usage_seen)
            rec->out_tokens = rec->chunks;
        rec->t_end = lb_now() - q->t0;
        q->pending = LB_OK;
        return 0;
    }
    json_t *j = json_loadb(data, n, 0, NULL);
    if (!j) {
        lb_req_settle(q, LB_LOST, "protocol", 0);
        return 1;
    }
    json_t *err = json_object_get(j, "error");
    if (err) {
        lb_error_name(err, q->pending_err, sizeof(q->pending_err));
        rec->t_end = lb_now() - q->t0;
        q->pending = LB_FAILED;
        json_decref(j);
        return 0;
    }
    lb_usage(rec, j);
    int content = lb_has_content(j);
    json_decref(j);
    return content ? lb_chunk(q) : 0;
}

/* Splits the SSE bytes buffered in k->body into lines and events.  1 when q
 * settled. */
static int lb_sse_feed(struct lb_req *q, struct lb_conn *k)
{
    size_t n;
    char *line;
    while ((line = evbuffer_readln(k->body, &n, EVBUFFER_EOL_CRLF))) {
        int gone = 0;
        if (n == 0) {
            size_t len = evbuffer_get_length(k->event);
            if (len > 0) {
                unsigned char *data = evbuffer_pullup(k->event, (ev_ssize_t)len);
                gone = lb_sse_event(q, (const char *)data, len - 1); /* trailing \n */
                if (!gone)
                    evbuffer_drain(k->event, len);
            }
        } else if (n >= 5 && strncmp(line, "data:", 5) == 0) {
            const char *v = line + 5 + (n > 5 && line[5] == ' ');
            evbuffer_add(k->event, v, n - (size_t)(v - line));
            evbuffer_add(k->event, "\n", 1);
            if (evbuffer_get_length(k->event) > LB_EVENT_MAX) {
                lb_req_settle(q, LB_LOST, "protocol", 0);
                gone = 1;
            }
        } /* comments, "event:", "id:", "retry:" carry nothing we count */
        free(line);
        if (gone)
            return 1;
    }
    if (evbuffer_get_length(k->body) > LB_EVENT_MAX) {
        lb_req_settle(q, LB_LOST, "protocol", 0);
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------ response ends */

/* The whole non-stream body is in k->body: decide the outcome. */
static void lb_finish_body(struct lb_req *q, struct lb_conn *k, int keep)
{
    struct lb_record *rec = q->rec;
    size_t len = evbuffer_get_length(k->body);
    unsigned char *p = evbuffer_pullup(k->body, (ev_ssize_t)len);
    json_t *j = len ? json_loadb((const char *)p, len, 0, NULL) : NULL;
    json_t *err = json_object_get(j, "error");
    char name[64] = "unparsed";
    if (k->status != 200) {
        if (json_is_object(err))
            lb_error_name(err, name, sizeof(name));
        json_decref(j);
        lb_req_settle(q, LB_REFUSED, name, keep);
        return;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        lb_req_settle(q, LB_LOST, "protocol", 0);
        return;
    }
    if (err) {
        lb_error_name(err, name, sizeof(name));
        json_decref(j);
        lb_req_settle(q, LB_FAILED, name, keep);
        return;
    }
    lb_usage(rec, j);
    json_decref(j);
    rec->chunks = 1;
    rec->t_end = lb_now() - q->t0;
    rec->t_first = rec->t_end;
    if (!rec->usage_seen)
        rec->out_tokens = 1;
    lb_req_settle(q, LB_OK, NULL, keep);
}

/* The response's body ended (framing complete, or EOF for a body that runs
 * to the close). */
static void lb_body_end(struct lb_req *q, struct lb_conn *k, int keep)
{
    k->ps = PS_DONE;
    keep = keep && !k->close;
    if (!k->sse) {
        lb_finish_body(q, k, keep);
        return;
    }
    if (lb_sse_feed(q, k))
        return;
    if (evbuffer_get_length(k->event) > 0) { /* a last event without its blank line */
        evbuffer_add(k->body, "\n\n", 2);
        if (lb_sse_feed(q, k))
            return;
    }
    if (q->pending == LB_PENDING)
        lb_req_settle(q, LB_LOST, "incomplete", 0);
    else
        lb_req_settle(q, q->pending, q->pending_err, keep);
}

/* --------------------------------------------------------- the parser */

static int lb_parse_status(struct lb_conn *k, const char *line)
{
    int major, minor, status;
    if (sscanf(line, "HTTP/%d.%d %d", &major, &minor, &status) != 3 || status < 100 || status > 999)
        return -1;
    k->status = status;
    k->close = major == 1 && minor == 0; /* HTTP/1.0 closes unless told */
    k->ps = PS_HEADERS;
    return 0;
}

static int lb_parse_header(struct lb_conn *k, char *line)
{
    char *colon = strchr(line, ':');
    if (!colon)
        return -1;
    *colon = '\0';
    char *v = colon + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    if (strcasecmp(line, "content-length") == 0) {
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (errno || end == v || n < 0)
            return -1;
        k->length = n;
    } else if (strcasecmp(line, "transfer-encoding") == 0) {
        k->chunked = strcasestr(v, "chunked") != NULL;
    } else if (strcasecmp(line, "connection") == 0) {
        if (strcasestr(v, "close"))
            k->close = 1;
        else if (strcasestr(v, "keep-alive"))
            k->close = 0;
    } else if (strcasecmp(line, "content-type") == 0) {
        k->sse = strcasestr(v, "text/event-stream") != NULL;
    }
    return 0;
}

/* The blank line after the headers: pick the body's framing. */
static void lb_headers_end(struct lb_req *q, struct lb_conn *k)
{
    if (k->status >= 100 && k->status < 200) { /* 100 Continue and friends */
        k->ps = PS_STATUS;
        k->sse = k->chunked = 0;
        k->length = -1;
        return;
    }
    q->rec->http_status = k->status;
    k->sse = k->sse && k->status == 200 && q->rec->stream;
    if (k->chunked)
        k->ps = PS_CHUNK_SIZE;
    else if (k->length >= 0)
        k->ps = PS_LENGTH, k->left = k->length;
    else
        k->ps = PS_TO_EOF, k->close = 1;
}

/* Moves n body bytes from in to the body buffer (and on to the SSE parser).
 * 1 when q settled. */
static int lb_body_bytes(struct lb_req *q, struct lb_conn *k, struct evbuffer *in, size_t n)
{
    evbuffer_remove_buffer(in, k->body, n);
    if (k->sse)
        return lb_sse_feed(q, k);
    if (evbuffer_get_length(k->body) > LB_BODY_MAX) {
        lb_req_settle(q, LB_LOST, "protocol", 0);
        return 1;
    }
    return 0;
}

/* One line-oriented step (status, header, chunk size, chunk CRLF,
 * trailer).  0 when a line was used, 1 when more bytes are needed, -1 on a
 * protocol error. */
static int lb_parse_line(struct lb_req *q, struct lb_conn *k, struct evbuffer *in)
{
    size_t n;
    char *line = evbuffer_readln(in, &n, EVBUFFER_EOL_CRLF);
    if (!line)
        return evbuffer_get_length(in) > LB_HEAD_MAX ? -1 : 1;
    int rc = 0;
    char *end;
    switch (k->ps) {
    case PS_STATUS:
        rc = lb_parse_status(k, line);
        break;
    case PS_HEADERS:
        if (n == 0)
            lb_headers_end(q, k);
        else
            rc = lb_parse_header(k, line);
        break;
    case PS_CHUNK_SIZE:
        errno = 0;
        k->left = strtol(line, &end, 16);
        if (errno || end == line || k->left < 0)
            rc = -1;
        else
            k->ps = k->left ? PS_CHUNK_DATA : PS_TRAILERS;
        break;
    case PS_CHUNK_CRLF:
        rc = n == 0 ? 0 : -1;
        k->ps = PS_CHUNK_SIZE;
        break;
    default: /* PS_TRAILERS: until the blank line */
        if (n == 0)
            k->ps = PS_DONE;
        break;
    }
    free(line);
    return rc;
}

/* Runs the parser over what arrived.  1 when q settled. */
static int lb_parse(struct lb_req *q, struct lb_conn *k, struct evbuffer *in)
{
    for (;;) {
        size_t avail = evbuffer_get_length(in);
        if (k->ps == PS_CHUNK_DATA || k->ps == PS_LENGTH) {
            size_t n = avail < (size_t)k->left ? avail : (size_t)k->left;
            if (n == 0 && k->left > 0)
                return 0;
            k->left -= (long)n;
            if (n && lb_body_bytes(q, k, in, n))
                return 1;
            if (k->left == 0)
                k->ps = k->ps == PS_LENGTH ? PS_DONE : PS_CHUNK_CRLF;
        } else if (k->ps == PS_TO_EOF) {
            return avail ? lb_body_bytes(q, k, in, avail) : 0;
        } else if (k->ps == PS_DONE) {
            lb_body_end(q, k, evbuffer_get_length(in) == 0);
            return 1;
        } else {
            int rc = lb_parse_line(q, k, in);
            if (rc > 0)
                return 0;
            if (rc < 0) {
                lb_req_settle(q, LB_LOST, "protocol", 0);
                return 1;
            }
        }
    }
}

static void lb_conn_read_cb(struct bufferevent *bev, void *arg)
{
    struct lb_conn *k = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    struct lb_req *q = k->req;
    if (!q) { /* an idle connection has nothing to say: drop it */
        lb_conn_free(k);
        return;
    }
    if (evbuffer_get_length(in) > 0)
        k->got_bytes = 1;
    lb_parse(q, k, in);
}

/* EOF or an error: the end of a body that runs to the close, or a loss. */
static void lb_conn_lost(struct lb_req *q, struct lb_conn *k, short what)
{
    if (k->ps == PS_TO_EOF && (what & BEV_EVENT_EOF)) {
        lb_body_end(q, k, 0);
        return;
    }
    if (!k->connected) {
        unsigned long e = q->c->t.tls ? bufferevent_get_openssl_error(k->bev) : 0;
        if (lb_req_retry(q) != 0)
            lb_req_settle(q, LB_LOST, e ? "tls" : "connect", 0);
        return;
    }
    if (!k->got_bytes && lb_req_retry(q) == 0)
        return;
    if (q->pending != LB_PENDING) /* [DONE] or an error event came already */
        lb_req_settle(q, q->pending, q->pending_err, 0);
    else
        lb_req_settle(q, LB_LOST, k->sse ? "incomplete" : "reset", 0);
}

static void lb_conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct lb_conn *k = arg;
    if (what & BEV_EVENT_CONNECTED) {
        k->connected = 1;
        return;
    }
    struct lb_req *q = k->req;
    if (!q) {
        lb_conn_free(k);
        return;
    }
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        lb_conn_lost(q, k, what);
}
