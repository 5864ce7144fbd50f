/*
 * daemon/config.h — llmd's options, as data.
 *
 * One table (config.c) names every option once: its --flag, its key in
 * llmd.conf (the same name without the dashes), its type, default and help.
 * The table drives argument parsing, the config file and `llmd --help`.
 * Precedence: defaults, then the config file (--config FILE), then flags.
 * A list option (listen, listen-plain) repeated in one place adds to the
 * list; given in a later place it replaces the earlier list.  After a
 * successful cfg_parse every string is set (never NULL, except config);
 * "" means "not given" where a comment says so.
 */
#ifndef LLMD_DAEMON_CONFIG_H
#define LLMD_DAEMON_CONFIG_H

#include <stddef.h>

#define CFG_MAX_LISTEN 8

struct llmd_config {
    char *config;                 /* the file read, or NULL */
    char *model;                  /* GGUF path (required) */
    char *model_name;             /* id served in /v1/models ("": the file name without .gguf) */
    char *chat_template;          /* override the GGUF's template by name ("": the GGUF's own) */
    char *backend;                /* "cpu" or "cuda" */
    char *listen[CFG_MAX_LISTEN]; /* HOST:PORT, TLS */
    int n_listen;
    char *listen_plain[CFG_MAX_LISTEN]; /* HOST:PORT, plain HTTP, loopback only */
    int n_listen_plain;
    char *tls_cert, *tls_key; /* PEM files */
    char *db;                 /* SQLite file */
    char *admin_socket;       /* Unix socket path ("" : none) */
    /* engine */
    int kv_blocks, swap_blocks, block_size; /* swap_blocks 0: no host pool */
    int max_batched_tokens, max_seqs;
    char *preempt; /* auto, swap, recompute */
    double priority_aging;
    int interrupt_tokens;  /* 0: steps are never interrupted */
    double priority_slack; /* 0: no limit */
    /* requests */
    int max_tokens_default; /* max_tokens when a request gives none */
    int max_n;              /* most choices (n) in one request */
    int max_queue;          /* requests admitted but not finished; over it: 503 */
    /* HTTP limits */
    long max_body_bytes;
    int max_header_bytes;
    int max_connections;
    double read_timeout;  /* seconds to receive a whole request */
    double idle_timeout;  /* seconds a keep-alive connection may sit idle */
    double write_timeout; /* seconds a client may stop reading before it is dropped */
    /* lifecycle */
    double drain_timeout; /* SIGTERM: seconds running requests get to finish */
    double db_refresh;    /* seconds between checks for tenant/key changes */
    int log_level;        /* enum log_level */
};

/* Parses defaults, then --config FILE (when given), then argv.  Returns 0
 * to run, 1 when --help, --version or --print-config was printed to stdout
 * (exit 0), -1 with a message for a bad option or value (exit 2).  c must
 * be zeroed; free it with cfg_free (after 1 or -1 it is already empty). */
int cfg_parse(int argc, char **argv, struct llmd_config *c, char *err, size_t errlen);
void cfg_free(struct llmd_config *c);
/* The --help text (malloc'd). */
char *cfg_help(void);
/* The default config file, every key commented out with its default and
 * help (malloc'd); `llmd --print-config` prints it and packaging/llmd.conf
 * is exactly this text. */
char *cfg_sample(void);
/* The options of the table, in order: how many, and the name of the i-th
 * (its --flag without the dashes), for tests and tooling. */
int cfg_option_count(void);
const char *cfg_option_name(int i);

#endif
