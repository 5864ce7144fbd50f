/*
 * daemon/http.c — the HTTP/1.1 server of llmd (see http.h for why it is
 * not evhttp).
 *
 * A connection is a small state machine driven by its bufferevent:
 *
 *   IDLE ──first byte──▶ HEAD ──headers──▶ BODY ──body──▶ HANDLING
 *     ▲                                                      │ respond / stream end
 *     └────────────── keep-alive, output drained ◀── SENDING ◀┘
 *
 * One timer per connection enforces the deadline of the current state: the
 * idle timeout while IDLE, the read timeout over HEAD and BODY together
 * (so bytes trickling in do not extend it), nothing while the handler
 * works.  Writes are bounded by the bufferevent's write timeout: a client
 * that stops reading is dropped.  Whenever a connection goes away with a
 * request unanswered, the handler hears of it through the close callback.
 */
#include "daemon/http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HTTP_MAX_LISTENERS 16
#define HTTP_MAX_HEADERS   100
#define HTTP_PIPELINE_CAP  (64 * 1024) /* input buffered while a request is handled */

enum conn_state { CS_IDLE, CS_HEAD, CS_BODY, CS_HANDLING, CS_SENDING, CS_LINGER, CS_CLOSING };

/* After an error sent before the request was read whole (413 ...), input is
 * read and dropped for a while before closing: closing a socket with
 * unread data makes the kernel send a reset, which can reach the client
 * before it has read our answer. */
#define HTTP_LINGER_IDLE  2.0  /* seconds without input that end the linger */
#define HTTP_LINGER_TOTAL 10.0 /* seconds a linger may last at most */

struct http_hdr {
    char *name, *value; /* point into the request's header block */
};

struct http_req {
    struct http_conn *c;
    char *head; /* the request line and headers, NUL-separated in place */
    const char *method, *path;
    struct http_hdr hdrs[HTTP_MAX_HEADERS];
    int n_hdrs;
    int keep_alive;
    char *body;
    size_t body_len;
    int streaming, responded;
    void (*on_close)(void *arg);
    void *close_arg;
};

struct http_listener {
    struct http_server *s;
    struct evconnlistener *l;
    int plain;
};

struct http_conn {
    struct http_server *s;
    struct bufferevent *bev;
    struct event *timer;
    struct http_conn *prev, *next;
    enum conn_state state;
    char peer[64];
    struct http_req *req;
    /* request body being read */
    int chunked;
    size_t need;       /* Content-Length bytes still to come */
    int linger;        /* drop input after the answer, then close */
    double linger_end; /* monotonic deadline of the linger */
    struct evbuffer *body;
};

struct http_server {
    struct event_base *base;
    struct http_limits lim;
    http_handler_fn handler;
    http_error_fn errbody;
    void *arg;
    SSL_CTX *ssl;
    struct http_listener ls[HTTP_MAX_LISTENERS];
    int n_ls;
    struct http_conn *conns;
    int n_conns;
    long refused;
    int closing; /* no more keep-alive */
};

static void conn_read_cb(struct bufferevent *bev, void *arg);
static void conn_close(struct http_conn *c);

static void fmt_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fmt_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

const char *http_reason(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 413:
        return "Payload Too Large";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    default:
        return "Unknown";
    }
}

/* ------------------------------------------------------------- timers -- */

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void conn_arm(struct http_conn *c, double seconds)
{
    if (seconds <= 0) {
        evtimer_del(c->timer);
        return;
    }
    struct timeval tv = {.tv_sec = (time_t)seconds,
                         .tv_usec = (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6)};
    evtimer_add(c->timer, &tv);
}

/* ---------------------------------------------------------- responses -- */

static void req_free(struct http_req *r)
{
    if (!r)
        return;
    free(r->head);
    free(r->body);
    free(r);
}

/* Writes the status line and the headers every response carries. */
static void write_head(struct http_conn *c, int status, const char *ctype, const char *headers,
                       long content_length, int keep_alive)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nServer: llmd\r\n", status, http_reason(status));
    if (ctype)
        evbuffer_add_printf(out, "Content-Type: %s\r\n", ctype);
    if (content_length >= 0)
        evbuffer_add_printf(out, "Content-Length: %ld\r\n", content_length);
    else
        evbuffer_add_printf(out, "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n");
    evbuffer_add_printf(out, "Connection: %s\r\n", keep_alive ? "keep-alive" : "close");
    if (headers)
        evbuffer_add(out, headers, strlen(headers));
    evbuffer_add(out, "\r\n", 2);
}

/* The response is queued: wait for it to drain, then keep alive or close. */
static void conn_sending(struct http_conn *c)
{
    c->req->responded = 1;
    c->state = CS_SENDING;
    conn_arm(c, 0);
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
        bufferevent_trigger(c->bev, EV_WRITE,
                            BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}

/* An error the server answers by itself; the connection closes after it. */
static void conn_error(struct http_conn *c, int status, const char *message)
{
    size_t len = 0;
    const char *ctype = "text/plain";
    char *body = c->s->errbody ? c->s->errbody(status, message, &len, &ctype) : NULL;
    if (!body) {
        body = strdup(message);
        len = body ? strlen(body) : 0;
    }
    if (!c->req) {
        c->req = calloc(1, sizeof(*c->req));
        if (!c->req) {
            free(body);
            conn_close(c);
            return;
        }
        c->req->c = c;
    }
    c->req->keep_alive = 0;
    c->linger = 1;
    write_head(c, status, ctype, NULL, (long)len, 0);
    evbuffer_add(bufferevent_get_output(c->bev), body ? body : "", len);
    free(body);
    conn_sending(c);
}

void http_respond(struct http_req *r, int status, const char *ctype, const char *headers,
                  const char *body, size_t len)
{
    struct http_conn *c = r->c;
    if (c->s->closing)
        r->keep_alive = 0;
    write_head(c, status, ctype, headers, (long)len, r->keep_alive);
    if (!r->method || strcmp(r->method, "HEAD") != 0) /* HEAD: the headers alone */
        evbuffer_add(bufferevent_get_output(c->bev), body, len);
    conn_sending(c);
}

void http_stream_start(struct http_req *r, int status, const char *ctype, const char *headers)
{
    r->streaming = 1;
    write_head(r->c, status, ctype, headers, -1, r->keep_alive && !r->c->s->closing);
}

void http_stream_write(struct http_req *r, const char *data, size_t len)
{
    if (len == 0)
        return;
    struct evbuffer *out = bufferevent_get_output(r->c->bev);
    evbuffer_add_printf(out, "%zx\r\n", len);
    evbuffer_add(out, data, len);
    evbuffer_add(out, "\r\n", 2);
}

void http_stream_end(struct http_req *r)
{
    if (r->c->s->closing)
        r->keep_alive = 0;
    evbuffer_add(bufferevent_get_output(r->c->bev), "0\r\n\r\n", 5);
    conn_sending(r->c);
}

size_t http_pending(const struct http_req *r)
{
    return evbuffer_get_length(bufferevent_get_output(r->c->bev));
}

/* ------------------------------------------------------- request access -- */

const char *http_method(const struct http_req *r)
{
    return r->method;
}
const char *http_path(const struct http_req *r)
{
    return r->path;
}
const char *http_peer(const struct http_req *r)
{
    return r->c->peer;
}

const char *http_header(const struct http_req *r, const char *name)
{
    for (int i = 0; i < r->n_hdrs; i++)
        if (strcasecmp(r->hdrs[i].name, name) == 0)
            return r->hdrs[i].value;
    return NULL;
}

const char *http_body(const struct http_req *r, size_t *len)
{
    *len = r->body_len;
    return r->body ? r->body : "";
}

void http_req_on_close(struct http_req *r, void (*fn)(void *arg), void *arg)
{
    r->on_close = fn;
    r->close_arg = arg;
}

/* ------------------------------------------------------------ parsing -- */

static int is_tchar(int ch)
{
    return isalnum(ch) || (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = 0;
    return s;
}

/* Splits the header block in place into the request line and headers.
 * 0, or an HTTP status to answer with. */
static int parse_head(struct http_req *r, const char **why)
{
    char *save = NULL;
    char *line = strtok_r(r->head, "\n", &save);
    if (!line) {
        *why = "empty request";
        return 400;
    }
    size_t n = strlen(line);
    if (n && line[n - 1] == '\r')
        line[n - 1] = 0;
    char *sp1 = strchr(line, ' ');
    char *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    if (!sp1 || !sp2 || strchr(sp2 + 1, ' ')) {
        *why = "malformed request line";
        return 400;
    }
    *sp1 = *sp2 = 0;
    r->method = line;
    r->path = sp1 + 1;
    const char *version = sp2 + 1;
    for (const char *p = r->method; *p; p++)
        if (!is_tchar((unsigned char)*p)) {
            *why = "malformed method";
            return 400;
        }
    if (r->path[0] != '/') {
        *why = "the request target must be a path";
        return 400;
    }
    char *q = strchr(sp1 + 1, '?');
    if (q)
        *q = 0;
    if (strcmp(version, "HTTP/1.1") == 0)
        r->keep_alive = 1;
    else if (strcmp(version, "HTTP/1.0") == 0)
        r->keep_alive = 0;
    else {
        *why = "unsupported HTTP version";
        return 400;
    }
    while ((line = strtok_r(NULL, "\n", &save))) {
        n = strlen(line);
        if (n && line[n - 1] == '\r')
            line[--n] = 0;
        if (n == 0)
            break;
        if (line[0] == ' ' || line[0] == '\t') {
            *why = "folded header lines are not accepted";
            return 400;
        }
        char *colon = strchr(line, ':');
        if (!colon || colon == line) {
            *why = "malformed header line";
            return 400;
        }
        *colon = 0;
        for (const char *p = line; *p; p++)
            if (!is_tchar((unsigned char)*p)) {
                *why = "malformed header name";
                return 400;
            }
        if (r->n_hdrs == HTTP_MAX_HEADERS) {
            *why = "too many header lines";
            return 431;
        }
        r->hdrs[r->n_hdrs++] = (struct http_hdr){line, trim(colon + 1)};
    }
    const char *conn = http_header(r, "Connection");
    if (conn && strcasestr(conn, "close"))
        r->keep_alive = 0;
    else if (conn && strcasestr(conn, "keep-alive"))
        r->keep_alive = 1;
    return 0;
}

/* Works out how the body comes: 0, or an HTTP status to answer with. */
static int body_plan(struct http_conn *c, const char **why)
{
    struct http_req *r = c->req;
    const char *te = NULL, *cl = NULL;
    for (int i = 0; i < r->n_hdrs; i++) {
        if (strcasecmp(r->hdrs[i].name, "Transfer-Encoding") == 0) {
            if (te) {
                *why = "repeated Transfer-Encoding";
                return 400;
            }
            te = r->hdrs[i].value;
        } else if (strcasecmp(r->hdrs[i].name, "Content-Length") == 0) {
            if (cl && strcmp(cl, r->hdrs[i].value) != 0) {
                *why = "conflicting Content-Length headers";
                return 400;
            }
            cl = r->hdrs[i].value;
        }
    }
    c->chunked = 0;
    c->need = 0;
    if (te) {
        if (cl) {
            *why = "both Transfer-Encoding and Content-Length";
            return 400;
        }
        if (strcasecmp(te, "chunked") != 0) {
            *why = "unsupported Transfer-Encoding";
            return 501;
        }
        c->chunked = 1;
        return 0;
    }
    if (cl) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(cl, &end, 10);
        if (!isdigit((unsigned char)cl[0]) || *end || errno) {
            *why = "malformed Content-Length";
            return 400;
        }
        if (v > c->s->lim.max_body_bytes) {
            *why = "request body too large";
            return 413;
        }
        c->need = (size_t)v;
    }
    return 0;
}

/* Reads the header block when it is complete: 1 done, 0 need more, -1 answered. */
static int read_head(struct http_conn *c, struct evbuffer *in)
{
    size_t avail = evbuffer_get_length(in);
    struct evbuffer_ptr p = evbuffer_search(in, "\r\n\r\n", 4, NULL);
    size_t end = p.pos >= 0 ? (size_t)p.pos + 4 : 0;
    if (p.pos < 0) {
        p = evbuffer_search(in, "\n\n", 2, NULL);
        end = p.pos >= 0 ? (size_t)p.pos + 2 : 0;
    }
    if (p.pos < 0 ? avail > c->s->lim.max_header_bytes : end > c->s->lim.max_header_bytes) {
        conn_error(c, 431, "request headers too large");
        return -1;
    }
    if (p.pos < 0)
        return 0;
    struct http_req *r = calloc(1, sizeof(*r));
    char *head = malloc(end + 1);
    if (!r || !head) {
        free(r);
        free(head);
        conn_error(c, 500, "out of memory");
        return -1;
    }
    evbuffer_remove(in, head, end);
    head[end] = 0;
    r->c = c;
    r->head = head;
    c->req = r;
    if (memchr(head, 0, end)) {
        conn_error(c, 400, "NUL byte in the request headers");
        return -1;
    }
    const char *why = NULL;
    int st = parse_head(r, &why);
    if (!st)
        st = body_plan(c, &why);
    if (st) {
        conn_error(c, st, why);
        return -1;
    }
    const char *expect = http_header(r, "Expect");
    if (expect && strcasecmp(expect, "100-continue") == 0)
        evbuffer_add_printf(bufferevent_get_output(c->bev), "HTTP/1.1 100 Continue\r\n\r\n");
    return 1;
}

/* Reads chunked body data: 1 complete, 0 need more, -1 answered. */
static int read_chunks(struct http_conn *c, struct evbuffer *in)
{
    for (;;) {
        if (c->need > 0) { /* inside a chunk: data then CRLF */
            if (evbuffer_get_length(in) < c->need + 2)
                return 0;
            evbuffer_remove_buffer(in, c->body, c->need);
            char crlf[2];
            evbuffer_remove(in, crlf, 2);
            if (crlf[0] != '\r' || crlf[1] != '\n') {
                conn_error(c, 400, "malformed chunk");
                return -1;
            }
            c->need = 0;
            continue;
        }
        size_t n = 0;
        char *line = evbuffer_readln(in, &n, EVBUFFER_EOL_CRLF);
        if (!line) {
            if (evbuffer_get_length(in) > 1024) {
                conn_error(c, 400, "malformed chunk size");
                return -1;
            }
            return 0;
        }
        char *end = NULL;
        errno = 0;
        unsigned long long sz = strtoull(line, &end, 16);
        int bad = end == line || (*end && *end != ';') || errno;
        free(line);
        if (bad) {
            conn_error(c, 400, "malformed chunk size");
            return -1;
        }
        if (sz > c->s->lim.max_body_bytes ||
            evbuffer_get_length(c->body) + sz > c->s->lim.max_body_bytes) {
            conn_error(c, 413, "request body too large");
            return -1;
        }
        if (sz == 0) { /* last chunk: skip trailers up to the empty line */
            for (;;) {
                char *t = evbuffer_readln(in, &n, EVBUFFER_EOL_CRLF);
                if (!t)
                    return 0; /* trailers incomplete: wait (we re-read the size line) */
                free(t);
                if (n == 0)
                    return 1;
            }
        }
        c->need = (size_t)sz;
    }
}

/* Moves the body into the request and hands it to the handler. */
static void dispatch(struct http_conn *c)
{
    struct http_req *r = c->req;
    size_t n = evbuffer_get_length(c->body);
    r->body = malloc(n + 1);
    if (!r->body) {
        conn_error(c, 500, "out of memory");
        return;
    }
    evbuffer_remove(c->body, r->body, n);
    r->body[n] = 0;
    r->body_len = n;
    c->state = CS_HANDLING;
    conn_arm(c, 0);
    c->s->handler(r, c->s->arg);
}

static void conn_read_cb(struct bufferevent *bev, void *arg)
{
    struct http_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    for (;;) {
        switch (c->state) {
        case CS_IDLE:
            if (evbuffer_get_length(in) == 0)
                return;
            c->state = CS_HEAD;
            conn_arm(c, c->s->lim.read_timeout);
            break;
        case CS_HEAD: {
            int rc = read_head(c, in);
            if (rc <= 0)
                return;
            c->state = CS_BODY;
            break;
        }
        case CS_BODY:
            if (c->chunked) {
                int rc = read_chunks(c, in);
                if (rc <= 0)
                    return;
            } else {
                if (evbuffer_get_length(in) < c->need)
                    return;
                evbuffer_remove_buffer(in, c->body, c->need);
                c->need = 0;
            }
            dispatch(c);
            return; /* the next request is read once this one is answered */
        case CS_LINGER:
            evbuffer_drain(in, evbuffer_get_length(in));
            if (mono_now() > c->linger_end)
                conn_close(c);
            else
                conn_arm(c, HTTP_LINGER_IDLE);
            return;
        case CS_HANDLING:
        case CS_SENDING:
            if (c->linger) {
                evbuffer_drain(in, evbuffer_get_length(in));
                return;
            }
            if (evbuffer_get_length(in) > HTTP_PIPELINE_CAP)
                bufferevent_disable(bev, EV_READ);
            return;
        case CS_CLOSING:
            return;
        }
    }
}

/* Output drained: a response that was sent completes here. */
static void conn_write_cb(struct bufferevent *bev, void *arg)
{
    struct http_conn *c = arg;
    if (c->state != CS_SENDING)
        return;
    int keep = c->req && c->req->keep_alive && !c->s->closing;
    req_free(c->req);
    c->req = NULL;
    if (!keep && c->linger) {
        c->state = CS_LINGER;
        c->linger_end = mono_now() + HTTP_LINGER_TOTAL;
        conn_arm(c, HTTP_LINGER_IDLE);
        bufferevent_enable(bev, EV_READ);
        return;
    }
    if (!keep) {
        conn_close(c);
        return;
    }
    c->state = CS_IDLE;
    conn_arm(c, c->s->lim.idle_timeout);
    bufferevent_enable(bev, EV_READ);
    conn_read_cb(bev, c); /* a pipelined request may be waiting */
}

static void conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct http_conn *c = arg;
    (void)bev;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
        conn_close(c);
}

static void conn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct http_conn *c = arg;
    (void)fd;
    (void)what;
    if (c->state == CS_HEAD || c->state == CS_BODY)
        conn_error(c, 408, "request not received in time");
    else
        conn_close(c);
}

/* Drops a connection; an unanswered request's handler hears of it first. */
static void conn_close(struct http_conn *c)
{
    struct http_req *r = c->req;
    if (r && !r->responded && r->on_close && c->state == CS_HANDLING) {
        c->state = CS_CLOSING;
        r->on_close(r->close_arg);
    }
    req_free(r);
    c->req = NULL;
    if (c->prev)
        c->prev->next = c->next;
    else
        c->s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->s->n_conns--;
    event_free(c->timer);
    evbuffer_free(c->body);
    bufferevent_free(c->bev);
    free(c);
}

/* ---------------------------------------------------------- accepting -- */

static void peer_name(const struct sockaddr *sa, char *out, size_t cap)
{
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        port = ntohs(in->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        port = ntohs(in6->sin6_port);
    }
    snprintf(out, cap, "%s:%d", host, port);
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
                      void *arg)
{
    struct http_listener *hl = arg;
    struct http_server *s = hl->s;
    (void)l;
    (void)salen;
    if (s->n_conns >= s->lim.max_connections || (!hl->plain && !s->ssl)) {
        s->refused++;
        evutil_closesocket(fd);
        return;
    }
    struct http_conn *c = calloc(1, sizeof(*c));
    if (!c) {
        s->refused++;
        evutil_closesocket(fd);
        return;
    }
    c->s = s;
    peer_name(sa, c->peer, sizeof(c->peer));
    if (hl->plain) {
        c->bev = bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
    } else {
        SSL *ssl = SSL_new(s->ssl);
        c->bev = ssl ? bufferevent_openssl_socket_new(s->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                      BEV_OPT_CLOSE_ON_FREE)
                     : NULL;
        if (!c->bev)
            SSL_free(ssl);
        else
            bufferevent_openssl_set_allow_dirty_shutdown(c->bev, 1);
    }
    c->timer = evtimer_new(s->base, conn_timer_cb, c);
    c->body = evbuffer_new();
    if (!c->bev || !c->timer || !c->body) {
        if (c->bev)
            bufferevent_free(c->bev);
        else
            evutil_closesocket(fd);
        if (c->timer)
            event_free(c->timer);
        if (c->body)
            evbuffer_free(c->body);
        free(c);
        s->refused++;
        return;
    }
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->n_conns++;
    bufferevent_setcb(c->bev, conn_read_cb, conn_write_cb, conn_event_cb, c);
    struct timeval wt = {
        .tv_sec = (time_t)s->lim.write_timeout,
        .tv_usec =
            (suseconds_t)((s->lim.write_timeout - (double)(time_t)s->lim.write_timeout) * 1e6)};
    bufferevent_set_timeouts(c->bev, NULL, s->lim.write_timeout > 0 ? &wt : NULL);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    c->state = CS_IDLE;
    /* a new connection (and its TLS handshake) gets the read timeout for its first request */
    conn_arm(c, s->lim.read_timeout);
}

/* ------------------------------------------------------------- server -- */

struct http_server *http_server_new(struct event_base *base, const struct http_limits *lim,
                                    http_handler_fn handler, http_error_fn errbody, void *arg)
{
    struct http_server *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->base = base;
    s->lim = *lim;
    s->handler = handler;
    s->errbody = errbody;
    s->arg = arg;
    return s;
}

void http_server_stop_accepting(struct http_server *s)
{
    for (int i = 0; i < s->n_ls; i++)
        if (s->ls[i].l) {
            evconnlistener_free(s->ls[i].l);
            s->ls[i].l = NULL;
        }
}

void http_server_close_idle(struct http_server *s)
{
    s->closing = 1;
    struct http_conn *c = s->conns;
    while (c) {
        struct http_conn *next = c->next;
        if (c->state == CS_IDLE)
            conn_close(c);
        c = next;
    }
}

void http_server_free(struct http_server *s)
{
    if (!s)
        return;
    http_server_stop_accepting(s);
    while (s->conns) {
        s->conns->state = CS_CLOSING; /* no callbacks into the handler */
        conn_close(s->conns);
    }
    SSL_CTX_free(s->ssl);
    free(s);
}

int http_server_connections(const struct http_server *s)
{
    return s->n_conns;
}
long http_server_refused(const struct http_server *s)
{
    return s->refused;
}

/* Offers only HTTP/1.1 when the client uses ALPN. */
static int alpn_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)ssl;
    (void)arg;
    for (unsigned int i = 0; i < inlen;) {
        unsigned int n = in[i];
        if (i + 1 + n > inlen)
            break;
        if (n == 8 && memcmp(in + i + 1, "http/1.1", 8) == 0) {
            *out = in + i + 1;
            *outlen = (unsigned char)n;
            return SSL_TLSEXT_ERR_OK;
        }
        i += 1 + n;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

static void ssl_err(char *err, size_t errlen, const char *what, const char *path)
{
    char buf[256] = "";
    unsigned long e = ERR_peek_last_error();
    if (e)
        ERR_error_string_n(e, buf, sizeof(buf));
    ERR_clear_error();
    fmt_err(err, errlen, "%s %s: %s", what, path, buf[0] ? buf : strerror(errno));
}

int http_server_tls(struct http_server *s, const char *cert, const char *key, char *err,
                    size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        ssl_err(err, errlen, "TLS", "context");
        return -1;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_alpn_select_cb(ctx, alpn_cb, NULL);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        ssl_err(err, errlen, "TLS certificate", cert);
        SSL_CTX_free(ctx);
        return -1;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        ssl_err(err, errlen, "TLS key", key);
        SSL_CTX_free(ctx);
        return -1;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ssl_err(err, errlen, "TLS key does not match the certificate", cert);
        SSL_CTX_free(ctx);
        return -1;
    }
    SSL_CTX_free(s->ssl); /* open connections hold their own reference */
    s->ssl = ctx;
    return 0;
}

/* Splits "host:port", "[v6]:port" or ":port" (all addresses). */
static int split_hostport(const char *hp, char *host, size_t hcap, char *port, size_t pcap)
{
    const char *colon;
    if (hp[0] == '[') {
        const char *rb = strchr(hp, ']');
        if (!rb || rb[1] != ':' || (size_t)(rb - hp - 1) >= hcap)
            return -1;
        memcpy(host, hp + 1, (size_t)(rb - hp - 1));
        host[rb - hp - 1] = 0;
        colon = rb + 1;
    } else {
        colon = strrchr(hp, ':');
        if (!colon || (size_t)(colon - hp) >= hcap)
            return -1;
        memcpy(host, hp, (size_t)(colon - hp));
        host[colon - hp] = 0;
    }
    if (strlen(colon + 1) == 0 || strlen(colon + 1) >= pcap)
        return -1;
    snprintf(port, pcap, "%s", colon + 1);
    return 0;
}

static int is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
    return 0;
}

int http_server_listen(struct http_server *s, const char *hostport, int plain, char *err,
                       size_t errlen)
{
    char host[256], port[16];
    if (split_hostport(hostport, host, sizeof(host), port, sizeof(port))) {
        fmt_err(err, errlen, "listen address %s: expected HOST:PORT", hostport);
        return -1;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    if (gai) {
        fmt_err(err, errlen, "listen address %s: %s", hostport, gai_strerror(gai));
        return -1;
    }
    int rc = -1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        if (plain && !is_loopback(ai->ai_addr)) {
            fmt_err(err, errlen,
                    "plain HTTP on %s refused: only a loopback address may serve "
                    "without TLS",
                    hostport);
            rc = -1;
            break;
        }
        if (s->n_ls == HTTP_MAX_LISTENERS) {
            fmt_err(err, errlen, "too many listen addresses");
            break;
        }
        struct http_listener *hl = &s->ls[s->n_ls];
        hl->s = s;
        hl->plain = plain;
        hl->l = evconnlistener_new_bind(s->base, accept_cb, hl,
                                        LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 511, ai->ai_addr,
                                        (int)ai->ai_addrlen);
        if (!hl->l) {
            fmt_err(err, errlen, "listen on %s: %s", hostport, strerror(errno));
            rc = -1;
            break;
        }
        s->n_ls++;
        rc = 0;
        break; /* the first address that works */
    }
    freeaddrinfo(res);
    return rc;
}
