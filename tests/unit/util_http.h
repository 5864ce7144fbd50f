/*
 * tests/unit/util_http.h — the integration harness's client: a blocking
 * TLS connection to the daemon of a struct ul_env (util_llmd.h) that speaks
 * just enough HTTP/1.1 to test it, SSE events, raw sockets, and /metrics.
 *
 * The one idea: a struct ul_conn keeps every byte received in one buffer and
 * decodes the body from it on demand, so a test can read a whole response,
 * or a stream one SSE event at a time, and drop the connection at any point.
 * Everything here is included by util_llmd.h, so a suite includes only that.
 */
#ifndef LLMD_TESTS_UTIL_HTTP_H
#define LLMD_TESTS_UTIL_HTTP_H

#include <jansson.h>
#include <openssl/ssl.h>
#include <stddef.h>

struct ul_env; /* util_llmd.h: the daemon's port and the trusting SSL_CTX */

/* ----------------------------------------------------------- TLS client */

struct ul_conn {
    int fd;
    SSL *ssl;
    char *buf; /* received bytes; buf[pos..len) not consumed yet */
    size_t len, pos, cap;
    /* framing of the response being read */
    int chunked;
    long remaining; /* Content-Length left, or the current chunk's bytes left */
    int to_eof;     /* no length: the body runs to end of connection */
    int body_done;
    char *ev; /* decoded body bytes not yet returned as SSE events */
    size_t ev_len, ev_cap;
    int timed_out;
};

struct ul_resp {
    int status;
    char *head; /* the header lines, NUL-terminated */
    char *body; /* NUL-terminated */
    size_t body_len;
    json_t *json; /* the body parsed, or NULL */
};

/* A verified TLS connection to the daemon (timeout s for each read/write).
 * NULL when refused or the handshake fails. */
struct ul_conn *ul_connect(struct ul_env *e, double timeout);
void ul_conn_close(struct ul_conn *c);
/* Writes all n bytes.  -1 on failure. */
int ul_conn_write(struct ul_conn *c, const void *p, size_t n);
/* 1 when bytes (or EOF) can be read within ms milliseconds. */
int ul_conn_readable(struct ul_conn *c, int ms);
/* SHA-256 of the peer's certificate.  -1 without one. */
int ul_peer_fingerprint(struct ul_conn *c, unsigned char out[32]);

/* Sends one request; body may be NULL; key NULL sends no Authorization;
 * headers (may be NULL) are extra "Name: value\r\n" lines. */
int ul_send(struct ul_conn *c, const char *method, const char *path, const char *key,
            const char *body, const char *headers);
/* Reads the status line and headers and sets up the body's framing. */
int ul_read_head(struct ul_conn *c, struct ul_resp *r);
/* Reads the whole body (after ul_read_head) and parses it as JSON if it is. */
int ul_read_body(struct ul_conn *c, struct ul_resp *r);
/* Head + body. */
int ul_read_response(struct ul_conn *c, struct ul_resp *r);
/* One request on a new connection: 0 with r filled, -1 on I/O failure. */
int ul_request(struct ul_env *e, const char *method, const char *path, const char *key,
               const char *body, const char *headers, struct ul_resp *r);
/* POST body (serialised compactly; borrowed) to path. */
int ul_post(struct ul_env *e, const char *path, const char *key, json_t *body, struct ul_resp *r);
void ul_resp_free(struct ul_resp *r);
/* The value of header name (case-insensitive) copied into buf; NULL when absent. */
const char *ul_header(const struct ul_resp *r, const char *name, char *buf, size_t cap);

/* The next SSE event's data (its "data:" lines joined), malloc'd: 1 with
 * *data set, 0 at the end of the body, -1 on error or timeout. */
int ul_sse_next(struct ul_conn *c, char **data);
/* Reads every remaining event: an array of the JSON events (caller owns);
 * *saw_done is 1 when "[DONE]" came and was the last event.  NULL when an
 * event is not JSON or the stream broke. */
json_t *ul_sse_collect(struct ul_conn *c, int *saw_done);

/* ------------------------------------------------------- other requests */

/* Value of the sample name{labels} (labels in any order, "" for none) in
 * GET /metrics: 1 found, 0 absent, -1 when /metrics failed. */
int ul_metric(struct ul_env *e, const char *name, const char *labels, double *out);
/* A plain TCP socket connected to 127.0.0.1:port, -1 when refused. */
int ul_tcp_connect(int port);

#endif
