/*
 * tests/unit/util_llmd.h — harness for the integration suites: a real llmd
 * on a free loopback port with a throwaway DB and self-signed certificate,
 * and a blocking TLS client that speaks just enough HTTP/1.1 to test it.
 *
 * The one idea: everything a suite touches lives in one mkdtemp directory
 * owned by a struct ul_env, and every daemon started is remembered with the
 * process that started it, so a failing test (which exits its forked Check
 * child) still kills its daemon and removes the directory from an atexit
 * handler.  The harness never loads the model itself: it only runs the
 * llmd and llmadmin binaries found in $LLMD_BIN_DIR (default build/bin).
 */
#ifndef LLMD_TESTS_UTIL_LLMD_H
#define LLMD_TESTS_UTIL_LLMD_H

#include <jansson.h>
#include <openssl/ssl.h>
#include <stddef.h>
#include <sys/types.h>

#define UL_PATH 512
/* Ends the argument lists of ul_admin and ul_tenant_add (a typed NULL). */
#define UL_END ((const char *)NULL)

/* One test environment: directory, DB, certificate, and at most one llmd. */
struct ul_env {
    char dir[256]; /* mkdtemp'd; removed by ul_env_free */
    char db[UL_PATH], cert[UL_PATH], key[UL_PATH], log[UL_PATH], sock[UL_PATH];
    char llmd[UL_PATH], admin[UL_PATH], model[UL_PATH];
    char model_id[UL_PATH]; /* the model file's name without ".gguf" */
    int port;               /* TLS port of the running daemon */
    pid_t pid;              /* the daemon, 0 when none */
    pid_t owner;            /* the process that started it (Check forks tests) */
    int exit_status;        /* once the daemon was reaped: as ul_wait_exit returns it */
    SSL_CTX *ctx;           /* client context that trusts the certificates written */
    pid_t janitor;          /* cleans up if the owner dies without doing so */
    int janitor_fd;         /* its pipe: daemon pids in, closing it ends it */
};

/* Makes the directory, a certificate, and an initialised DB.  NULL with a
 * message on stderr.  Free with ul_env_free (which also kills the daemon). */
struct ul_env *ul_env_new(void);
void ul_env_free(struct ul_env *e);

/* Writes a fresh self-signed EC P-256 certificate (CN localhost, SAN
 * 127.0.0.1) and its key as PEM, each atomically (temp file + rename).
 * -1 on failure. */
int ul_cert_write(const char *cert_path, const char *key_path);
/* Adds the certificate in path to the client context's trust store. */
int ul_trust_file(struct ul_env *e, const char *path);
/* SHA-256 of the certificate in a PEM file.  -1 on failure. */
int ul_file_fingerprint(const char *path, unsigned char out[32]);

/* --------------------------------------------------------------- llmadmin */

/* Runs `llmadmin --db DB ARGS... UL_END`.  Returns its exit
 * status (-1 when it could not run); *out (may be NULL) gets its stdout,
 * malloc'd.  stderr goes to the env's log. */
int ul_admin(struct ul_env *e, char **out, ...) __attribute__((sentinel));
/* `tenant add NAME ARGS... UL_END`.  0 on success. */
int ul_tenant_add(struct ul_env *e, const char *name, ...) __attribute__((sentinel));
/* `--json key create TENANT`: the key into key (cap >= 96) and its id. */
int ul_key_create(struct ul_env *e, const char *tenant, char *key, size_t cap, long *id);
/* `--json usage --rows 100000`: the ledger as a JSON array (caller owns), or NULL. */
json_t *ul_ledger(struct ul_env *e);
/* Rows of tenant (NULL: any) with finish (NULL: any); -1 when unreadable. */
int ul_ledger_count(struct ul_env *e, const char *tenant, const char *finish);
/* The row of request_id in rows (borrowed), or NULL. */
json_t *ul_ledger_find(json_t *rows, const char *request_id);

/* ----------------------------------------------------------------- daemon */

/* Starts llmd on a free port with --kv-blocks 256 and the extra arguments
 * (NULL-terminated array, may be NULL; later flags override), and waits up
 * to 120 s for /health 200.  0 when ready; -1 with the log printed. */
int ul_start(struct ul_env *e, const char *const *extra);
void ul_signal(struct ul_env *e, int sig);
/* Waits up to timeout seconds for the daemon to exit: its exit status,
 * 128 + signal when killed, -1 on timeout (the daemon is then killed). */
int ul_wait_exit(struct ul_env *e, double timeout);
/* SIGTERM, then ul_wait_exit(timeout). */
int ul_stop(struct ul_env *e, double timeout);
/* 1 while the daemon process has not exited. */
int ul_alive(struct ul_env *e);
/* Waits up to timeout s until the daemon is gone (from any process, forked
 * tests included; no exit status).  0 when gone, -1 on timeout. */
int ul_wait_gone(struct ul_env *e, double timeout);
/* 1 when the daemon's log holds no sanitizer report; else 0, log printed. */
int ul_log_clean(struct ul_env *e);
/* Prints the tail of the daemon's log to stderr. */
void ul_dump_log(struct ul_env *e);
/* A TCP port on 127.0.0.1 that was free a moment ago. */
int ul_free_port(void);

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

/* ----------------------------------------------------------------- other */

/* Value of the sample name{labels} (labels in any order, "" for none) in
 * GET /metrics: 1 found, 0 absent, -1 when /metrics failed. */
int ul_metric(struct ul_env *e, const char *name, const char *labels, double *out);
/* A plain TCP socket connected to 127.0.0.1:port, -1 when refused. */
int ul_tcp_connect(int port);
double ul_now(void); /* monotonic seconds */
void ul_sleep(double s);
/* The JSON string at path "a.b.0.c" in j (borrowed), or NULL. */
const char *ul_jstr(json_t *j, const char *path);
json_t *ul_jget(json_t *j, const char *path);

#endif
