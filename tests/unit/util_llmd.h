/*
 * tests/unit/util_llmd.h — harness for the integration suites: a real llmd
 * on a free loopback port with a throwaway DB and self-signed certificate.
 * The blocking TLS client that talks to it is util_http.h, included here.
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

#include "tests/unit/util_http.h"

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

/* ----------------------------------------------------------------- other */

double ul_now(void); /* monotonic seconds */
void ul_sleep(double s);
/* The JSON string at path "a.b.0.c" in j (borrowed), or NULL. */
const char *ul_jstr(json_t *j, const char *path);
json_t *ul_jget(json_t *j, const char *path);

#endif
