/*
 * daemon/http.h — a small HTTP/1.1 server over libevent bufferevents, with
 * TLS (OpenSSL 3) or, on loopback only, plain text.
 *
 * It exists instead of evhttp because a serving daemon must control what
 * evhttp decides alone: an error body in OpenAI's JSON shape for a request
 * too large (413) or with headers too long (431), one deadline for a whole
 * request (a client dripping headers a byte at a time is cut off, not kept
 * alive forever), streamed responses with backpressure, and a callback the
 * moment a client vanishes.  One request per connection at a time; keep-
 * alive; request bodies by Content-Length or chunked; responses with
 * Content-Length or chunked (streams).
 *
 * Everything runs on the I/O thread of the event base.
 */
#ifndef LLMD_DAEMON_HTTP_H
#define LLMD_DAEMON_HTTP_H

#include <stddef.h>

struct event_base;
struct http_server;
struct http_req;

struct http_limits {
    size_t max_header_bytes; /* request line + headers */
    size_t max_body_bytes;
    int max_connections;
    double read_timeout;  /* seconds from a request's first byte to its last */
    double idle_timeout;  /* seconds a keep-alive connection may wait for a request */
    double write_timeout; /* seconds without write progress before a client is dropped */
};

/* Called for each complete request; the handler must answer it, now or
 * later, with http_respond or a stream — unless http_req_on_close fires
 * first, after which r is gone. */
typedef void (*http_handler_fn)(struct http_req *r, void *arg);
/* Builds the body of an error the server sends by itself (400, 408, 413,
 * 431, 503): a malloc'd body and its content type. */
typedef char *(*http_error_fn)(int status, const char *message, size_t *len, const char **ctype);

struct http_server *http_server_new(struct event_base *base, const struct http_limits *lim,
                                    http_handler_fn handler, http_error_fn errbody, void *arg);
/* Frees the server and every connection (without calling handlers). */
void http_server_free(struct http_server *s);

/* Sets (or replaces, e.g. on SIGHUP) the certificate and key of the TLS
 * listeners; connections already open keep the old ones.  -1 with a message. */
int http_server_tls(struct http_server *s, const char *cert, const char *key, char *err,
                    size_t errlen);
/* Listens on host:port (IPv4, [IPv6] or a name), with TLS or, when plain,
 * only on a loopback address.  -1 with a message. */
int http_server_listen(struct http_server *s, const char *hostport, int plain, char *err,
                       size_t errlen);
/* Stops accepting new connections (listeners closed); open ones go on. */
void http_server_stop_accepting(struct http_server *s);
/* Closes connections with no request in progress; the others close once
 * their response is sent (no keep-alive from now on). */
void http_server_close_idle(struct http_server *s);
int http_server_connections(const struct http_server *s);
long http_server_refused(const struct http_server *s);

/* ------------------------------------------------------------ requests -- */

const char *http_method(const struct http_req *r);
const char *http_path(const struct http_req *r); /* without the query */
/* A request header's value (case-insensitive name), NULL when absent. */
const char *http_header(const struct http_req *r, const char *name);
const char *http_body(const struct http_req *r, size_t *len); /* NUL-terminated */
/* The peer, "ip:port", for logs. */
const char *http_peer(const struct http_req *r);

/* Called once when the client goes away (or the server drops it) before
 * the response was sent completely; r is freed when it returns. */
void http_req_on_close(struct http_req *r, void (*fn)(void *arg), void *arg);

/* A whole response.  headers: extra "Name: value\r\n" lines, or NULL.  Frees
 * r once sent (the handler must not touch it afterwards). */
void http_respond(struct http_req *r, int status, const char *ctype, const char *headers,
                  const char *body, size_t len);

/* A streamed (chunked) response: start, any number of writes, end.  r stays
 * valid until http_stream_end or the close callback. */
void http_stream_start(struct http_req *r, int status, const char *ctype, const char *headers);
void http_stream_write(struct http_req *r, const char *data, size_t len);
void http_stream_end(struct http_req *r);
/* Bytes queued for the client and not yet written. */
size_t http_pending(const struct http_req *r);

const char *http_reason(int status);

#endif
