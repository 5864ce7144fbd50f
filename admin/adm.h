/*
 * admin/adm.h — llmadmin's commands and the helpers they share.
 *
 * llmadmin is a table of commands (admin/main.c); each command is a
 * function that takes its own arguments after the command word and returns
 * the process exit status.  DB commands (init, tenant, key, usage) work on
 * the SQLite file directly, so they work while the daemon is down; live
 * commands (status, queues, blocks, drain, undrain, evict, top) send one
 * JSON line to the daemon's admin socket (daemon/admsock.h) and render its
 * one-line reply.  Every command prints a human table by default and
 * exactly one JSON value with --json.
 */
#ifndef LLMD_ADMIN_ADM_H
#define LLMD_ADMIN_ADM_H

#include <jansson.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>

/* Exit statuses. */
#define ADM_OK    0
#define ADM_FAIL  1 /* the command could not be done: "llmadmin: why" on stderr */
#define ADM_USAGE 2 /* the command line is wrong: message and a usage line on stderr */

#define ADM_DEFAULT_DB     "/var/lib/llmd/llmd.db"
#define ADM_DEFAULT_SOCKET "/run/llmd/admin.sock"

/* What every command gets: the global options, already parsed. */
struct adm_ctx {
    const char *db_path;     /* --db, else $LLMD_DB, else ADM_DEFAULT_DB */
    int json;                /* --json */
    const char *usage;       /* the running (sub)command's usage line, for adm_usage */
    const char *socket_path; /* --socket, else $LLMD_ADMIN_SOCKET, else ADM_DEFAULT_SOCKET */
};

/* One command: argv[0] is the command word. */
struct adm_cmd {
    const char *name;
    const char *synopsis; /* lines for --help, each "llmadmin " + this */
    const char *help;     /* one line */
    int (*run)(struct adm_ctx *c, int argc, char **argv);
};

/* --------------------------------------------------------- the commands */

int adm_cmd_init(struct adm_ctx *c, int argc, char **argv);
int adm_cmd_tenant(struct adm_ctx *c, int argc, char **argv);
int adm_cmd_key(struct adm_ctx *c, int argc, char **argv);
int adm_cmd_usage(struct adm_ctx *c, int argc, char **argv);
/* live: admin/adm_live.c and admin/adm_top.c */
int adm_cmd_status(struct adm_ctx *c, int argc, char **argv);
int adm_cmd_queues(struct adm_ctx *c, int argc, char **argv);
int adm_cmd_blocks(struct adm_ctx *c, int argc, char **argv);
int adm_cmd_drain(struct adm_ctx *c, int argc, char **argv);
int adm_cmd_undrain(struct adm_ctx *c, int argc, char **argv);
int adm_cmd_evict(struct adm_ctx *c, int argc, char **argv);
int adm_cmd_top(struct adm_ctx *c, int argc, char **argv);

/* ---------------------------------------------------------- admin socket */

/* Set from a signal handler: a request waiting on the socket gives up. */
extern volatile sig_atomic_t adm_live_stop;

/* Sends req (taken: released here, NULL means out of memory) to the admin
 * socket and waits up to 10 s for the one-line reply.  0 with *reply (the
 * caller owns it; "ok" was true), or -1 with the reason in err: no daemon,
 * not permitted, the daemon's own "error", or a broken reply. */
int adm_live_request(const struct adm_ctx *c, json_t *req, json_t **reply, char *err,
                     size_t errlen);
/* adm_live_request that says why on stderr: ADM_OK or ADM_FAIL. */
int adm_live_call(const struct adm_ctx *c, json_t *req, json_t **reply);

/* The human views that top shares: status's header lines (model, backend,
 * uptime, draining, KV blocks, tokens/s, preemptions) and the queues table
 * (compact: engine ids only, so that it fits 80 columns).  ADM_OK or
 * ADM_FAIL. */
int adm_status_header_write(const json_t *status, FILE *out);
int adm_queues_write(const json_t *queues, int compact, FILE *out);

/* ------------------------------------------------------------ messages */

/* "llmadmin: MSG" on stderr; returns ADM_FAIL. */
int adm_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "llmadmin: MSG" and "usage: llmadmin <c->usage>" on stderr; returns ADM_USAGE. */
int adm_usage(const struct adm_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------- options */

/* One option a command accepts: "--name VALUE" or "--name=VALUE" when
 * has_arg, else a bare "--name".  The parser fills val (borrowed from argv)
 * and set. */
struct adm_opt {
    const char *name; /* without the dashes */
    int has_arg;
    const char *val;
    int set;
};

/* Splits argv[0..argc) into options (matched against opts) and up to
 * max_pos positional arguments; "--" ends the options.  ADM_OK, or
 * ADM_USAGE after saying what was wrong (unknown option, missing value,
 * too many or too few (< min_pos) positional arguments). */
int adm_parse(const struct adm_ctx *c, int argc, char **argv, struct adm_opt *opts, int n_opts,
              const char **pos, int min_pos, int max_pos, int *n_pos);
/* The option called name in opts (it must be there). */
struct adm_opt *adm_opt(struct adm_opt *opts, int n_opts, const char *name);

/* A whole decimal integer in [lo, hi]: 0, or -1 (nothing written). */
int adm_int(const char *s, long lo, long hi, long *out);
/* A finite number in (lo, hi]: 0, or -1. */
int adm_double(const char *s, double lo, double hi, double *out);

/* ---------------------------------------------------------------- time */

/* A point in time, for --expires and --since: "YYYY-MM-DD" (00:00 UTC) or
 * "YYYY-MM-DDTHH:MM[:SS]" (UTC), or a span from now: "+Nd" / "+Nh" later
 * when sign is +1, "-Nd" / "-Nh" (or "Nd", "Nh") earlier when sign is -1.
 * 0 with unix seconds, or -1. */
int adm_time(const char *s, int sign, int64_t now, int64_t *out);
/* "2026-11-22T10:15:03Z" (or "2026-11-22 10:15" when human), into buf. */
const char *adm_fmt_time(int64_t unix_s, int human, char *buf, size_t cap);
/* JSON string of adm_fmt_time, or null when unix_s is 0 (never). */
json_t *adm_json_time(int64_t unix_s);

/* --------------------------------------------------------------- output */

/* Prints j as the command's one JSON value on stdout and releases it.
 * ADM_OK, or ADM_FAIL when j is NULL (out of memory) or stdout fails. */
int adm_print_json(json_t *j);

/* A table of strings printed with aligned columns. */
struct adm_table;
/* align: one character per column, 'l' or 'r'; the header names follow. */
struct adm_table *adm_table_new(const char *align, ...);
/* Adds one row of as many strings as there are columns (copied). */
void adm_table_add(struct adm_table *t, ...);
/* Prints the header and rows on out; ADM_OK, or ADM_FAIL after an
 * allocation or write failed at any point; frees t either way. */
int adm_table_print(struct adm_table *t, FILE *out);

/* "-" for 0 (no cap), else the number, into buf. */
const char *adm_fmt_cap(long v, char *buf, size_t cap);

#endif
