/*
 * tests/unit/util_http.c — the integration harness's client: a small
 * blocking HTTP/1.1 client over verified TLS, SSE events, raw sockets and
 * /metrics lookup (see util_http.h).
 *
 * The one idea: received bytes sit in one buffer; a body is decoded from it
 * piece by piece (Content-Length, chunked, or to EOF), and SSE events are
 * cut from the decoded bytes, so a test can read a stream one event at a
 * time and drop the connection whenever it likes.
 */
#include "tests/unit/util_http.h"

#include "tests/unit/util_llmd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* ------------------------------------------------------------- sockets */

int ul_tcp_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

static void set_timeouts(int fd, double timeout)
{
    struct timeval tv = {.tv_sec = (time_t)timeout,
                         .tv_usec = (suseconds_t)((timeout - (double)(time_t)timeout) * 1e6)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

struct ul_conn *ul_connect(struct ul_env *e, double timeout)
{
    int fd = ul_tcp_connect(e->port);
    if (fd < 0)
        return NULL;
    set_timeouts(fd, timeout);
    struct ul_conn *c = calloc(1, sizeof(*c));
    SSL *ssl = SSL_new(e->ctx);
    if (!c || !ssl) {
        SSL_free(ssl);
        free(c);
        close(fd);
        return NULL;
    }
    c->fd = fd;
    c->ssl = ssl;
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), "127.0.0.1");
    SSL_set_fd(ssl, fd);
    if (SSL_connect(ssl) != 1 || SSL_get_verify_result(ssl) != X509_V_OK) {
        ERR_clear_error();
        ul_conn_close(c);
        return NULL;
    }
    return c;
}

void ul_conn_close(struct ul_conn *c)
{
    if (!c)
        return;
    SSL_free(c->ssl); /* no close_notify: a vanishing client sends none either */
    close(c->fd);
    free(c->buf);
    free(c->ev);
    free(c);
}

int ul_conn_write(struct ul_conn *c, const void *p, size_t n)
{
    const char *s = p;
    while (n > 0) {
        int w = SSL_write(c->ssl, s, n > 65536 ? 65536 : (int)n);
        if (w <= 0) {
            ERR_clear_error();
            return -1;
        }
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

static int conn_fill(struct ul_conn *c);

int ul_conn_readable(struct ul_conn *c, int ms)
{
    double deadline = ul_now() + ms / 1000.0;
    for (;;) {
        if (c->pos < c->len || SSL_pending(c->ssl) > 0)
            return 1;
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int left = (int)((deadline - ul_now()) * 1000);
        if (poll(&p, 1, left > 0 ? left : 0) <= 0)
            return 0;
        /* The socket may hold only TLS records without data (TLS 1.3
         * session tickets): read without blocking to find out. */
        int fl = fcntl(c->fd, F_GETFL);
        fcntl(c->fd, F_SETFL, fl | O_NONBLOCK);
        int n = conn_fill(c);
        fcntl(c->fd, F_SETFL, fl);
        if (n != -2)
            return 1; /* data, end of stream or an error: a read will not block */
        c->timed_out = 0;
    }
}

int ul_peer_fingerprint(struct ul_conn *c, unsigned char out[32])
{
    X509 *x = SSL_get1_peer_certificate(c->ssl);
    unsigned int n = 0;
    int ok = x && X509_digest(x, EVP_sha256(), out, &n) == 1 && n == 32;
    X509_free(x);
    return ok ? 0 : -1;
}

/* Reads more bytes: > 0 read, 0 at EOF, -1 on error, -2 when nothing came
 * in time (or, non-blocking, nothing is there yet). */
static int conn_fill(struct ul_conn *c)
{
    if (c->pos > 0 && c->pos == c->len)
        c->pos = c->len = 0;
    if (c->cap - c->len < 4096) {
        size_t cap = c->cap ? c->cap * 2 : 16384;
        char *nb = realloc(c->buf, cap + 1);
        if (!nb)
            return -1;
        c->buf = nb;
        c->cap = cap;
    }
    int n = SSL_read(c->ssl, c->buf + c->len, (int)(c->cap - c->len));
    if (n > 0) {
        c->len += (size_t)n;
        return n;
    }
    int err = SSL_get_error(c->ssl, n);
    ERR_clear_error();
    if (err == SSL_ERROR_ZERO_RETURN)
        return 0;
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        c->timed_out = 1;
        return -2;
    }
    if (err == SSL_ERROR_SYSCALL && errno == 0)
        return 0;
    return -1;
}

/* A line ending in CRLF (CR and LF removed), malloc'd; NULL at EOF or error. */
static char *conn_line(struct ul_conn *c)
{
    for (;;) {
        char *s = c->buf ? memchr(c->buf + c->pos, '\n', c->len - c->pos) : NULL;
        if (s) {
            size_t n = (size_t)(s - (c->buf + c->pos));
            char *line = strndup(c->buf + c->pos, n);
            c->pos += n + 1;
            if (line && n > 0 && line[n - 1] == '\r')
                line[n - 1] = '\0';
            return line;
        }
        if (conn_fill(c) <= 0)
            return NULL;
    }
}

int ul_send(struct ul_conn *c, const char *method, const char *path, const char *key,
            const char *body, const char *headers)
{
    char *req = NULL;
    size_t blen = body ? strlen(body) : 0;
    int n = asprintf(&req,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s%s%s"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                     method, path, key ? "Authorization: Bearer " : "", key ? key : "",
                     key ? "\r\n" : "", headers ? headers : "", blen);
    if (n < 0)
        return -1;
    int rc = ul_conn_write(c, req, (size_t)n);
    free(req);
    return rc == 0 && blen ? ul_conn_write(c, body, blen) : rc;
}

static int head_append(struct ul_resp *r, size_t *len, const char *line)
{
    size_t n = strlen(line);
    char *nh = realloc(r->head, *len + n + 2);
    if (!nh)
        return -1;
    r->head = nh;
    memcpy(r->head + *len, line, n);
    r->head[*len + n] = '\n';
    r->head[*len + n + 1] = '\0';
    *len += n + 1;
    return 0;
}

int ul_read_head(struct ul_conn *c, struct ul_resp *r)
{
    memset(r, 0, sizeof(*r));
    char *line = conn_line(c);
    if (!line || sscanf(line, "HTTP/1.%*d %d", &r->status) != 1) {
        free(line);
        return -1;
    }
    free(line);
    size_t len = 0;
    while ((line = conn_line(c)) && line[0]) {
        int rc = head_append(r, &len, line);
        free(line);
        if (rc)
            return -1;
    }
    if (!line)
        return -1;
    free(line);
    char v[64];
    c->chunked = ul_header(r, "Transfer-Encoding", v, sizeof(v)) && strcasestr(v, "chunked");
    c->remaining = 0;
    c->to_eof = 0;
    c->body_done = 0;
    c->ev_len = 0;
    if (!c->chunked && ul_header(r, "Content-Length", v, sizeof(v)))
        c->remaining = atol(v);
    else if (!c->chunked)
        c->to_eof = r->status >= 200 && r->status != 204 && r->status != 304;
    c->body_done = !c->chunked && !c->to_eof && c->remaining == 0;
    return 0;
}

/* The next chunk size line; for the last one, the trailers too.  -1 on error. */
static int chunk_start(struct ul_conn *c)
{
    char *line = conn_line(c);
    if (!line)
        return -1;
    char *end;
    long n = strtol(line, &end, 16);
    int bad = end == line || n < 0;
    free(line);
    if (bad)
        return -1;
    c->remaining = n;
    if (n > 0)
        return 0;
    while ((line = conn_line(c)) && line[0])
        free(line);
    if (!line)
        return -1;
    free(line);
    c->body_done = 1;
    return 0;
}

/* Moves some body bytes into c->ev: 1 moved, 0 body complete, -1 error. */
static int body_step(struct ul_conn *c)
{
    if (c->body_done)
        return 0;
    if (c->chunked && c->remaining == 0 && chunk_start(c) != 0)
        return -1;
    if (c->body_done)
        return 0;
    if (c->pos == c->len) {
        int n = conn_fill(c);
        if (n == 0 && c->to_eof) {
            c->body_done = 1;
            return 0;
        }
        if (n <= 0)
            return -1;
    }
    size_t take = c->len - c->pos;
    if (!c->to_eof && (long)take > c->remaining)
        take = (size_t)c->remaining;
    if (c->ev_cap - c->ev_len < take + 1) {
        size_t cap = (c->ev_len + take + 1) * 2;
        char *nb = realloc(c->ev, cap);
        if (!nb)
            return -1;
        c->ev = nb;
        c->ev_cap = cap;
    }
    memcpy(c->ev + c->ev_len, c->buf + c->pos, take);
    c->ev_len += take;
    c->ev[c->ev_len] = '\0';
    c->pos += take;
    if (!c->to_eof)
        c->remaining -= (long)take;
    if (c->chunked && c->remaining == 0) {
        char *crlf = conn_line(c);
        if (!crlf || crlf[0]) {
            free(crlf);
            return -1;
        }
        free(crlf);
    } else if (!c->chunked && !c->to_eof && c->remaining == 0) {
        c->body_done = 1;
    }
    return 1;
}

int ul_read_body(struct ul_conn *c, struct ul_resp *r)
{
    int rc;
    while ((rc = body_step(c)) > 0)
        ;
    if (rc < 0)
        return -1;
    r->body = c->ev ? c->ev : strdup("");
    r->body_len = c->ev_len;
    c->ev = NULL;
    c->ev_len = c->ev_cap = 0;
    if (!r->body)
        return -1;
    r->json = json_loadb(r->body, r->body_len, 0, NULL);
    return 0;
}

int ul_read_response(struct ul_conn *c, struct ul_resp *r)
{
    return ul_read_head(c, r) == 0 && ul_read_body(c, r) == 0 ? 0 : -1;
}

int ul_request(struct ul_env *e, const char *method, const char *path, const char *key,
               const char *body, const char *headers, struct ul_resp *r)
{
    memset(r, 0, sizeof(*r));
    struct ul_conn *c = ul_connect(e, 60);
    if (!c)
        return -1;
    int rc = ul_send(c, method, path, key, body, headers) == 0 ? ul_read_response(c, r) : -1;
    ul_conn_close(c);
    return rc;
}

int ul_post(struct ul_env *e, const char *path, const char *key, json_t *body, struct ul_resp *r)
{
    char *s = json_dumps(body, JSON_COMPACT);
    int rc = s ? ul_request(e, "POST", path, key, s, NULL, r) : -1;
    free(s);
    return rc;
}

void ul_resp_free(struct ul_resp *r)
{
    free(r->head);
    free(r->body);
    json_decref(r->json);
    memset(r, 0, sizeof(*r));
}

const char *ul_header(const struct ul_resp *r, const char *name, char *buf, size_t cap)
{
    size_t n = strlen(name);
    for (const char *l = r->head; l && *l;) {
        const char *eol = strchr(l, '\n');
        if (strncasecmp(l, name, n) == 0 && l[n] == ':') {
            const char *v = l + n + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            size_t vn = (size_t)((eol ? eol : v + strlen(v)) - v);
            while (vn > 0 && (v[vn - 1] == ' ' || v[vn - 1] == '\r'))
                vn--;
            snprintf(buf, cap, "%.*s", (int)vn, v);
            return buf;
        }
        l = eol ? eol + 1 : NULL;
    }
    return NULL;
}

/* Cuts one event (up to a blank line) from c->ev: its data lines joined. */
static char *sse_cut(struct ul_conn *c, int *got)
{
    char *end = c->ev ? strstr(c->ev, "\n\n") : NULL;
    char *crlf = c->ev ? strstr(c->ev, "\r\n\r\n") : NULL;
    size_t sep = 2;
    if (crlf && (!end || crlf < end))
        end = crlf, sep = 4;
    *got = end != NULL;
    if (!end)
        return NULL;
    size_t evlen = (size_t)(end - c->ev);
    char *data = calloc(1, evlen + 1);
    size_t dn = 0;
    int lines = 0;
    for (char *l = c->ev; data && l < end;) {
        char *nl = memchr(l, '\n', (size_t)(end - l));
        size_t ln = (size_t)((nl ? nl : end) - l);
        if (ln > 0 && l[ln - 1] == '\r')
            ln--;
        if (ln >= 5 && strncmp(l, "data:", 5) == 0) {
            size_t skip = 5 + (ln > 5 && l[5] == ' ');
            if (lines++)
                data[dn++] = '\n';
            memcpy(data + dn, l + skip, ln - skip);
            dn += ln - skip;
        }
        l = nl ? nl + 1 : end;
    }
    memmove(c->ev, end + sep, c->ev_len - (evlen + sep) + 1);
    c->ev_len -= evlen + sep;
    if (lines == 0) { /* a comment or keep-alive: not an event */
        free(data);
        return NULL;
    }
    return data;
}

int ul_sse_next(struct ul_conn *c, char **data)
{
    *data = NULL;
    for (;;) {
        int got = 0;
        char *d = sse_cut(c, &got);
        if (d) {
            *data = d;
            return 1;
        }
        if (got)
            continue;
        int rc = body_step(c);
        if (rc <= 0)
            return rc;
    }
}

json_t *ul_sse_collect(struct ul_conn *c, int *saw_done)
{
    json_t *arr = json_array();
    char *d;
    int rc;
    *saw_done = 0;
    while ((rc = ul_sse_next(c, &d)) == 1) {
        if (*saw_done) { /* anything after [DONE] is wrong */
            *saw_done = 0;
            free(d);
            continue;
        }
        if (strcmp(d, "[DONE]") == 0) {
            *saw_done = 1;
            free(d);
            continue;
        }
        json_t *j = json_loads(d, 0, NULL);
        if (!j)
            fprintf(stderr, "ul_sse_collect: event is not JSON: %.200s\n", d);
        free(d);
        if (!j) {
            json_decref(arr);
            return NULL;
        }
        json_array_append_new(arr, j);
    }
    if (rc < 0) {
        json_decref(arr);
        return NULL;
    }
    return arr;
}

/* --------------------------------------------------------------- metrics */

/* 1 when the label lists a and b ("k=\"v\",...") hold the same pairs. */
static int labels_equal(const char *a, size_t an, const char *b)
{
    size_t bn = strlen(b), na = 0, nb = 0;
    for (size_t i = 0; i < an; i++)
        na += a[i] == '=';
    for (size_t i = 0; i < bn; i++)
        nb += b[i] == '=';
    if (na != nb)
        return 0;
    /* every pair of b occurs in a (names and values hold no commas here) */
    for (const char *p = b; *p;) {
        size_t n = strcspn(p, ",");
        int found = 0;
        for (size_t i = 0; i + n <= an && !found; i++)
            found = (i == 0 || a[i - 1] == ',') && strncmp(a + i, p, n) == 0 &&
                    (i + n == an || a[i + n] == ',');
        if (!found)
            return 0;
        p += n + (p[n] == ',');
    }
    return 1;
}

int ul_metric(struct ul_env *e, const char *name, const char *labels, double *out)
{
    struct ul_resp r;
    if (ul_request(e, "GET", "/metrics", NULL, NULL, NULL, &r) != 0 || r.status != 200) {
        ul_resp_free(&r);
        return -1;
    }
    size_t nn = strlen(name);
    int found = 0;
    for (char *l = r.body; l && *l && !found;) {
        char *eol = strchr(l, '\n');
        if (strncmp(l, name, nn) == 0 && (l[nn] == '{' || l[nn] == ' ')) {
            const char *lb = l + nn, *le = lb;
            size_t ln = 0;
            if (*lb == '{') {
                le = strchr(lb, '}');
                ln = le ? (size_t)(le - lb - 1) : 0;
                lb++;
                le = le ? le + 1 : lb;
            }
            if (le && labels_equal(lb, ln, labels)) {
                *out = strtod(le, NULL);
                found = 1;
            }
        }
        l = eol ? eol + 1 : NULL;
    }
    ul_resp_free(&r);
    return found;
}
