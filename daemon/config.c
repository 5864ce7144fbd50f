/*
 * daemon/config.c — llmd's options: one table, read from argv and llmd.conf.
 *
 * Every option is one row of cfg_opts[] (name, type, where its value lives
 * in struct llmd_config, default as text, help, metavar, bounds).  Defaults,
 * file lines and flags all go through the same setter, so a default is
 * validated exactly like a value an operator types, and --help, the sample
 * llmd.conf and the parser can never disagree about what exists.
 */
#include "daemon/config.h"

#include "daemon/log.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef LLMD_VERSION
#define LLMD_VERSION "0.0.0"
#endif

enum opt_type { OPT_STR, OPT_INT, OPT_LONG, OPT_DOUBLE, OPT_LIST, OPT_LEVEL };
enum opt_group { G_MODEL, G_NET, G_LIMITS, G_LIFE, G_N };
enum opt_check { CHK_NONE = 0, CHK_HOSTPORT, CHK_LOOPBACK };

#define OPT_CLI_ONLY 1 /* not a config-file key (only --config itself) */
#define OPT_REQUIRED 2 /* no default: must be given */

struct cfg_opt {
    const char *name; /* --name, and the key in llmd.conf */
    enum opt_type type;
    enum opt_group group;
    size_t off;   /* the field in struct llmd_config */
    size_t off_n; /* OPT_LIST: its count field */
    const char *def;
    const char *help;
    const char *metavar;
    double min, max;     /* numbers: inclusive bounds */
    const char *choices; /* OPT_STR: "a|b|c", or NULL for any string */
    int check;           /* enum opt_check, for lists of addresses */
    int flags;
};

#define F(x) offsetof(struct llmd_config, x)
#define BIG  16777216.0 /* 2^24: counts beyond this are typos, not configurations */

static const struct cfg_opt cfg_opts[] = {
    {"model", OPT_STR, G_MODEL, F(model), 0, NULL, "GGUF model file to serve", "PATH", 0, 0, NULL,
     0, OPT_REQUIRED},
    {"model-name", OPT_STR, G_MODEL, F(model_name), 0, "",
     "model id served in /v1/models; \"\": the file name without .gguf", "ID", 0, 0, NULL, 0, 0},
    {"chat-template", OPT_STR, G_MODEL, F(chat_template), 0, "",
     "chat template by name, instead of the GGUF's own; \"\": the GGUF's", "NAME", 0, 0, NULL, 0,
     0},
    {"backend", OPT_STR, G_MODEL, F(backend), 0, "cpu", "compute backend", "NAME", 0, 0, "cpu|cuda",
     0, 0},
    {"kv-blocks", OPT_INT, G_MODEL, F(kv_blocks), 0, "1024", "KV cache blocks on the device", "N",
     1, BIG, NULL, 0, 0},
    {"swap-blocks", OPT_INT, G_MODEL, F(swap_blocks), 0, "1024",
     "KV blocks in host memory for swapped-out sequences; 0: no swapping", "N", 0, BIG, NULL, 0, 0},
    {"block-size", OPT_INT, G_MODEL, F(block_size), 0, "16", "tokens per KV block", "N", 1, 1024,
     NULL, 0, 0},
    {"max-batched-tokens", OPT_INT, G_MODEL, F(max_batched_tokens), 0, "512",
     "token budget of one engine step", "N", 1, 1048576, NULL, 0, 0},
    {"max-seqs", OPT_INT, G_MODEL, F(max_seqs), 0, "256", "sequences in one engine step", "N", 1,
     65536, NULL, 0, 0},
    {"preempt", OPT_STR, G_MODEL, F(preempt), 0, "auto",
     "how a preempted sequence leaves the device; auto: the cheaper of the two", "MODE", 0, 0,
     "auto|swap|recompute", 0, 0},
    {"priority-aging", OPT_DOUBLE, G_MODEL, F(priority_aging), 0, "0",
     "seconds of waiting that raise a request one priority level; 0: strict priority", "S", 0, 1e9,
     NULL, 0, 0},
    {"priority-slack", OPT_DOUBLE, G_MODEL, F(priority_slack), 0, "0.5",
     "less important work may lengthen a step carrying more important work by at most this "
     "fraction, by the measured step cost; 0: no limit",
     "F", 0, 1e6, NULL, 0, 0},
    {"interrupt-tokens", OPT_INT, G_MODEL, F(interrupt_tokens), 0, "32",
     "a step carrying at least N tokens of work less important than a request that just arrived "
     "is given up between layers and planned again with it; 0: never",
     "N", 0, 1048576, NULL, 0, 0},

    {"listen", OPT_LIST, G_NET, F(listen), F(n_listen), "127.0.0.1:8443",
     "HTTPS address; \"\": none", "HOST:PORT", 0, 0, NULL, CHK_HOSTPORT, 0},
    {"listen-plain", OPT_LIST, G_NET, F(listen_plain), F(n_listen_plain), "",
     "plain HTTP address, loopback only", "HOST:PORT", 0, 0, NULL, CHK_LOOPBACK, 0},
    {"tls-cert", OPT_STR, G_NET, F(tls_cert), 0, "/etc/llmd/tls/cert.pem",
     "TLS certificate chain, PEM; reloaded on SIGHUP", "PATH", 0, 0, NULL, 0, 0},
    {"tls-key", OPT_STR, G_NET, F(tls_key), 0, "/etc/llmd/tls/key.pem",
     "TLS private key, PEM; reloaded on SIGHUP", "PATH", 0, 0, NULL, 0, 0},
    {"admin-socket", OPT_STR, G_NET, F(admin_socket), 0, "/run/llmd/admin.sock",
     "Unix socket for llmadmin; \"\": none", "PATH", 0, 0, NULL, 0, 0},

    {"max-tokens-default", OPT_INT, G_LIMITS, F(max_tokens_default), 0, "1024",
     "max_tokens of a request that gives none", "N", 1, 1048576, NULL, 0, 0},
    {"max-n", OPT_INT, G_LIMITS, F(max_n), 0, "16", "most choices (n) in one request", "N", 1, 128,
     NULL, 0, 0},
    {"max-queue", OPT_INT, G_LIMITS, F(max_queue), 0, "1024",
     "requests admitted and not finished; beyond it new ones get 503", "N", 1, BIG, NULL, 0, 0},
    {"max-body-bytes", OPT_LONG, G_LIMITS, F(max_body_bytes), 0, "8388608",
     "largest request body; beyond it 413", "BYTES", 1, 1099511627776.0, NULL, 0, 0},
    {"max-header-bytes", OPT_INT, G_LIMITS, F(max_header_bytes), 0, "16384",
     "largest request header block", "BYTES", 256, BIG, NULL, 0, 0},
    {"max-connections", OPT_INT, G_LIMITS, F(max_connections), 0, "1024",
     "open client connections; beyond it new ones are closed", "N", 1, 1048576, NULL, 0, 0},
    {"read-timeout", OPT_DOUBLE, G_LIMITS, F(read_timeout), 0, "30",
     "seconds to receive a whole request", "S", 0.001, 1e6, NULL, 0, 0},
    {"idle-timeout", OPT_DOUBLE, G_LIMITS, F(idle_timeout), 0, "60",
     "seconds a keep-alive connection may sit idle", "S", 0.001, 1e6, NULL, 0, 0},
    {"write-timeout", OPT_DOUBLE, G_LIMITS, F(write_timeout), 0, "60",
     "seconds a client may stop reading before it is dropped", "S", 0.001, 1e6, NULL, 0, 0},

    {"db", OPT_STR, G_LIFE, F(db), 0, "/var/lib/llmd/llmd.db",
     "SQLite database of tenants, keys and usage, made by `llmadmin init`", "PATH", 0, 0, NULL, 0,
     0},
    {"db-refresh", OPT_DOUBLE, G_LIFE, F(db_refresh), 0, "0.5",
     "seconds between checks for tenant and key changes", "S", 0.01, 3600, NULL, 0, 0},
    {"drain-timeout", OPT_DOUBLE, G_LIFE, F(drain_timeout), 0, "30",
     "on SIGTERM, seconds running requests get to finish", "S", 0, 1e6, NULL, 0, 0},
    {"log-level", OPT_LEVEL, G_LIFE, F(log_level), 0, "info", "least severe level logged", "LEVEL",
     0, 0, "error|warn|info|debug", 0, 0},
    {"config", OPT_STR, G_LIFE, F(config), 0, NULL,
     "read options from FILE first; flags override it", "FILE", 0, 0, NULL, 0, OPT_CLI_ONLY},
};
#define N_OPTS ((int)(sizeof(cfg_opts) / sizeof(cfg_opts[0])))

static const char *const group_title[G_N] = {"Model and engine", "Network and TLS", "Limits",
                                             "Lifecycle, storage and logging"};

enum cfg_src { SRC_DEFAULT = 0, SRC_FILE, SRC_ARGV };

/* One parse: where values come from now, and where each option was last set
 * (a list given in a later source replaces the earlier one's). */
struct cfg_ctx {
    struct llmd_config *c;
    enum cfg_src src;
    enum cfg_src origin[N_OPTS];
    char *err;
    size_t errlen;
};

int cfg_option_count(void)
{
    return N_OPTS;
}

const char *cfg_option_name(int i)
{
    return i >= 0 && i < N_OPTS ? cfg_opts[i].name : NULL;
}

static const struct cfg_opt *opt_find(const char *name, size_t len)
{
    for (int i = 0; i < N_OPTS; i++)
        if (strlen(cfg_opts[i].name) == len && memcmp(cfg_opts[i].name, name, len) == 0)
            return &cfg_opts[i];
    return NULL;
}

static void *field(struct llmd_config *c, size_t off)
{
    return (char *)c + off;
}

/* ------------------------------------------------------------ values -- */

static int parse_long(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || isspace((unsigned char)*s))
        return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v) || isspace((unsigned char)*s))
        return -1;
    *out = v;
    return 0;
}

static int in_choices(const char *choices, const char *v)
{
    size_t n = strlen(v);
    for (const char *p = choices; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && memcmp(p, v, n) == 0 && n > 0)
            return 1;
        p += len + (bar != NULL);
    }
    return 0;
}

/* A DNS name: dot-separated labels of letters, digits and '-'. */
static int is_hostname(const char *h)
{
    size_t n = strlen(h), label = 0;
    int all_digits = 1;
    if (n == 0 || n > 253)
        return 0;
    for (size_t i = 0; i <= n; i++) {
        char ch = h[i];
        if (ch == '.' || ch == 0) {
            if (label == 0 || label > 63 || h[i - 1] == '-')
                return 0;
            label = 0;
            continue;
        }
        if (!isalnum((unsigned char)ch) && ch != '-')
            return 0;
        if (label == 0 && ch == '-')
            return 0;
        if (!isdigit((unsigned char)ch) && ch != '.')
            all_digits = 0;
        label++;
    }
    return !all_digits; /* 1.2.3.999 is a bad address, not a name */
}

/* Checks HOST:PORT (IPv4, [IPv6] or a name; port 1..65535); on failure
 * writes why into why. */
static int hostport_check(const char *v, int loopback, char *why, size_t whylen)
{
    char host[256];
    const char *colon;
    int v6 = v[0] == '[';
    if (v6) {
        const char *close = strchr(v, ']');
        if (!close || close[1] != ':')
            return snprintf(why, whylen, "expected [IPV6]:PORT"), -1;
        colon = close + 1;
        if ((size_t)(close - v - 1) >= sizeof(host))
            return snprintf(why, whylen, "host too long"), -1;
        memcpy(host, v + 1, (size_t)(close - v - 1));
        host[close - v - 1] = 0;
    } else {
        colon = strrchr(v, ':');
        if (!colon)
            return snprintf(why, whylen, "expected HOST:PORT"), -1;
        if ((size_t)(colon - v) >= sizeof(host))
            return snprintf(why, whylen, "host too long"), -1;
        memcpy(host, v, (size_t)(colon - v));
        host[colon - v] = 0;
        if (strchr(host, ':'))
            return snprintf(why, whylen, "an IPv6 address goes in brackets: [ADDR]:PORT"), -1;
    }
    long port;
    if (!isdigit((unsigned char)colon[1]) || parse_long(colon + 1, &port) || port < 1 ||
        port > 65535)
        return snprintf(why, whylen, "port must be 1..65535"), -1;
    unsigned char addr[16];
    int is4 = !v6 && inet_pton(AF_INET, host, addr) == 1;
    if (v6 && inet_pton(AF_INET6, host, addr) != 1)
        return snprintf(why, whylen, "bad IPv6 address"), -1;
    if (!v6 && !is4 && !is_hostname(host))
        return snprintf(why, whylen, "bad host: an IPv4 address, [IPv6] or a name"), -1;
    if (loopback) {
        static const unsigned char lo6[16] = {[15] = 1};
        int lo = is4  ? addr[0] == 127
                 : v6 ? memcmp(addr, lo6, 16) == 0
                      : !strcmp(host, "localhost");
        if (!lo)
            return snprintf(why, whylen, "plain HTTP listens on loopback only"), -1;
    }
    return 0;
}

static void list_clear(char **list, int *n)
{
    for (int i = 0; i < *n; i++)
        free(list[i]);
    *n = 0;
}

static int set_list(struct cfg_ctx *x, const struct cfg_opt *o, const char *v, char *why,
                    size_t whylen)
{
    char **list = field(x->c, o->off);
    int *n = field(x->c, o->off_n);
    if (x->origin[o - cfg_opts] != x->src)
        list_clear(list, n); /* a later source replaces the list */
    x->origin[o - cfg_opts] = x->src;
    if (!*v)
        return 0; /* "" : the list stays empty */
    if (hostport_check(v, o->check == CHK_LOOPBACK, why, whylen))
        return -1;
    if (*n >= CFG_MAX_LISTEN)
        return snprintf(why, whylen, "at most %d addresses", CFG_MAX_LISTEN), -1;
    if (!(list[*n] = strdup(v)))
        return snprintf(why, whylen, "out of memory"), -1;
    (*n)++;
    return 0;
}

static int set_number(struct llmd_config *c, const struct cfg_opt *o, const char *v, char *why,
                      size_t whylen)
{
    double d = 0;
    long l = 0;
    int bad = o->type == OPT_DOUBLE ? parse_double(v, &d) : parse_long(v, &l);
    if (o->type != OPT_DOUBLE)
        d = (double)l;
    if (bad || d < o->min || d > o->max) {
        snprintf(why, whylen, "%s from %.15g to %.15g",
                 o->type == OPT_DOUBLE ? "a number" : "an integer", o->min, o->max);
        return -1;
    }
    if (o->type == OPT_INT)
        *(int *)field(c, o->off) = (int)l;
    else if (o->type == OPT_LONG)
        *(long *)field(c, o->off) = l;
    else
        *(double *)field(c, o->off) = d;
    return 0;
}

static int set_scalar(struct llmd_config *c, const struct cfg_opt *o, const char *v, char *why,
                      size_t whylen)
{
    if (o->type == OPT_LEVEL) {
        int l = log_level_parse(v);
        if (l < 0)
            return snprintf(why, whylen, "one of %s", o->choices), -1;
        *(int *)field(c, o->off) = l;
        return 0;
    }
    if (o->type != OPT_STR)
        return set_number(c, o, v, why, whylen);
    if (o->choices && !in_choices(o->choices, v))
        return snprintf(why, whylen, "one of %s", o->choices), -1;
    char *s = strdup(v), **slot = field(c, o->off);
    if (!s)
        return snprintf(why, whylen, "out of memory"), -1;
    free(*slot);
    *slot = s;
    return 0;
}

/* Sets option o to text v; where says where v came from ("--kv-blocks",
 * "llmd.conf:12: kv-blocks") and starts the error message. */
static int opt_set(struct cfg_ctx *x, const struct cfg_opt *o, const char *v, const char *where)
{
    char why[128];
    int rc = o->type == OPT_LIST ? set_list(x, o, v, why, sizeof(why))
                                 : set_scalar(x->c, o, v, why, sizeof(why));
    if (rc)
        snprintf(x->err, x->errlen, "%s: bad value '%s' (%s)", where, v, why);
    return rc;
}

/* -------------------------------------------------------- config file -- */

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = 0;
    return s;
}

/* Strips matching quotes in place: "..." knows \" and \\, '...' is
 * literal.  -1 when the closing quote is missing or not last. */
static int unquote(char *v)
{
    char q = v[0], *w = v;
    if (q != '"' && q != '\'')
        return 0;
    size_t i = 1;
    for (; v[i] && v[i] != q; i++) {
        if (q == '"' && v[i] == '\\' && (v[i + 1] == '"' || v[i + 1] == '\\'))
            i++;
        *w++ = v[i];
    }
    if (v[i] != q || v[i + 1])
        return -1;
    *w = 0;
    return 0;
}

static int file_line(struct cfg_ctx *x, const char *path, int lineno, char *line)
{
    char *s = trim(line);
    if (!*s || *s == '#')
        return 0;
    char *eq = strchr(s, '=');
    if (!eq) {
        snprintf(x->err, x->errlen, "%s:%d: expected 'key = value'", path, lineno);
        return -1;
    }
    *eq = 0;
    char *key = trim(s), *val = trim(eq + 1);
    for (char *p = key; *p; p++)
        if (*p == '_')
            *p = '-'; /* kv_blocks reads as kv-blocks */
    const struct cfg_opt *o = opt_find(key, strlen(key));
    if (!o || (o->flags & OPT_CLI_ONLY)) {
        snprintf(x->err, x->errlen, "%s:%d: unknown key '%s'", path, lineno, key);
        return -1;
    }
    if (unquote(val)) {
        snprintf(x->err, x->errlen, "%s:%d: %s: unterminated quote", path, lineno, key);
        return -1;
    }
    char where[512];
    snprintf(where, sizeof(where), "%s:%d: %s", path, lineno, key);
    return opt_set(x, o, val, where);
}

static int file_read(struct cfg_ctx *x, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(x->err, x->errlen, "--config %s: %s", path, strerror(errno));
        return -1;
    }
    x->src = SRC_FILE;
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, rc = 0;
    while (rc == 0 && getline(&line, &cap, f) >= 0)
        rc = file_line(x, path, ++lineno, line);
    if (rc == 0 && ferror(f)) {
        snprintf(x->err, x->errlen, "--config %s: read error", path);
        rc = -1;
    }
    free(line);
    fclose(f);
    return rc;
}

/* ---------------------------------------------------------------- argv -- */

/* Splits "--name[=value]"; NULL when a is not a long option. */
static const char *flag_name(const char *a, size_t *len, const char **value)
{
    if (strncmp(a, "--", 2) != 0 || !a[2])
        return NULL;
    const char *eq = strchr(a + 2, '=');
    *len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
    *value = eq ? eq + 1 : NULL;
    return a + 2;
}

static int print_and_free(char *text)
{
    if (!text)
        return -1;
    fputs(text, stdout);
    fflush(stdout);
    free(text);
    return 1;
}

/* First pass: --help, --version and --print-config act at once; --config
 * is noted.  Everything else waits for the second pass. */
static int argv_first(int argc, char **argv, const char **config)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *a = argv[i], *value;
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return print_and_free(cfg_help());
        if (!strcmp(a, "--version")) {
            printf("llmd %s\n", LLMD_VERSION);
            return 1;
        }
        if (!strcmp(a, "--print-config"))
            return print_and_free(cfg_sample());
        size_t len;
        const char *name = flag_name(a, &len, &value);
        const struct cfg_opt *o = name ? opt_find(name, len) : NULL;
        if (o && !value && i + 1 < argc)
            value = argv[++i];
        if (o && value && !strcmp(o->name, "config"))
            *config = value;
    }
    return 0;
}

static int argv_apply(struct cfg_ctx *x, int argc, char **argv)
{
    x->src = SRC_ARGV;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *value;
        size_t len;
        const char *name = flag_name(a, &len, &value);
        if (!name) {
            snprintf(x->err, x->errlen, "unexpected argument '%s'", a);
            return -1;
        }
        const struct cfg_opt *o = opt_find(name, len);
        if (!o) {
            snprintf(x->err, x->errlen, "unknown option --%.*s", (int)len, name);
            return -1;
        }
        if (!value && i + 1 >= argc) {
            snprintf(x->err, x->errlen, "--%s needs a value (%s)", o->name, o->metavar);
            return -1;
        }
        if (!value)
            value = argv[++i];
        char where[80];
        snprintf(where, sizeof(where), "--%s", o->name);
        if (opt_set(x, o, value, where))
            return -1;
    }
    return 0;
}

/* --------------------------------------------------------------- parse -- */

static int apply_defaults(struct cfg_ctx *x)
{
    x->src = SRC_DEFAULT;
    for (int i = 0; i < N_OPTS; i++) {
        char where[80];
        snprintf(where, sizeof(where), "default of --%s", cfg_opts[i].name);
        if (cfg_opts[i].def && opt_set(x, &cfg_opts[i], cfg_opts[i].def, where))
            return -1;
    }
    return 0;
}

static int check_whole(const struct llmd_config *c, char *err, size_t errlen)
{
    if (!c->model || !*c->model) {
        snprintf(err, errlen, "no model: give --model PATH or model = PATH in the config");
        return -1;
    }
    if (c->n_listen + c->n_listen_plain == 0) {
        snprintf(err, errlen,
                 "no address to serve on: give --listen HOST:PORT or --listen-plain HOST:PORT");
        return -1;
    }
    return 0;
}

static int cfg_parse_into(int argc, char **argv, struct cfg_ctx *x)
{
    const char *config = NULL;
    int rc = argv_first(argc, argv, &config);
    if (rc)
        return rc;
    if (apply_defaults(x))
        return -1;
    if (config) {
        if (!(x->c->config = strdup(config)))
            return snprintf(x->err, x->errlen, "out of memory"), -1;
        if (file_read(x, config))
            return -1;
    }
    if (argv_apply(x, argc, argv))
        return -1;
    return check_whole(x->c, x->err, x->errlen);
}

int cfg_parse(int argc, char **argv, struct llmd_config *c, char *err, size_t errlen)
{
    struct cfg_ctx x = {.c = c, .err = err, .errlen = errlen};
    if (errlen)
        err[0] = 0;
    int rc = cfg_parse_into(argc, argv, &x);
    if (rc == -1 && errlen && !err[0])
        snprintf(err, errlen, "out of memory");
    if (rc != 0)
        cfg_free(c);
    return rc;
}

void cfg_free(struct llmd_config *c)
{
    for (int i = 0; i < N_OPTS; i++) {
        const struct cfg_opt *o = &cfg_opts[i];
        if (o->type == OPT_STR) {
            char **s = field(c, o->off);
            free(*s);
        } else if (o->type == OPT_LIST) {
            list_clear(field(c, o->off), field(c, o->off_n));
        }
    }
    memset(c, 0, sizeof(*c));
}

/* ---------------------------------------------------- help and sample -- */

/* o's help with its note: "compute backend (cpu|cuda; default: cpu)". */
static void opt_text(const struct cfg_opt *o, char *out, size_t n)
{
    const char *def = !o->def ? "" : *o->def ? o->def : o->type == OPT_LIST ? "none" : "\"\"";
    if (o->flags & OPT_REQUIRED)
        snprintf(out, n, "%s (required)", o->help);
    else if (!o->def)
        snprintf(out, n, "%s", o->help);
    else
        snprintf(out, n, "%s (%s%s%sdefault: %s)", o->help, o->choices ? o->choices : "",
                 o->choices ? "; " : "", o->type == OPT_LIST ? "repeatable; " : "", def);
}

/* Writes text word-wrapped to width columns, the cursor being at column
 * col; each new line starts with prefix. */
static void put_wrapped(FILE *f, const char *text, int col, const char *prefix, int width)
{
    int first = 1;
    for (const char *p = text; *p;) {
        while (*p == ' ')
            p++;
        int w = (int)strcspn(p, " ");
        if (!first && col + 1 + w > width) {
            fprintf(f, "\n%s", prefix);
            col = (int)strlen(prefix);
            first = 1;
        }
        if (!first) {
            fputc(' ', f);
            col++;
        }
        fwrite(p, 1, (size_t)w, f);
        col += w;
        p += w;
        first = 0;
    }
}

#define HELP_COL   29
#define HELP_WIDTH 100

static void help_line(FILE *f, const char *flag, const char *metavar, const char *text)
{
    int w = fprintf(f, "  --%s%s%s", flag, metavar ? " " : "", metavar ? metavar : "");
    if (w >= HELP_COL - 1)
        fprintf(f, "\n%*s", HELP_COL, "");
    else
        fprintf(f, "%*s", HELP_COL - w, "");
    char pad[HELP_COL + 1];
    memset(pad, ' ', HELP_COL);
    pad[HELP_COL] = 0;
    put_wrapped(f, text, HELP_COL, pad, HELP_WIDTH);
    fputc('\n', f);
}

char *cfg_help(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    fputs("Usage: llmd --model PATH [OPTION]...\n"
          "Serves a GGUF model to many tenants over an OpenAI-compatible HTTPS API.\n"
          "Every option is also a key of the config file: \"name = value\".\n",
          f);
    for (int g = 0; g < G_N; g++) {
        fprintf(f, "\n%s:\n", group_title[g]);
        for (int i = 0; i < N_OPTS; i++)
            if (cfg_opts[i].group == (enum opt_group)g) {
                char text[512];
                opt_text(&cfg_opts[i], text, sizeof(text));
                help_line(f, cfg_opts[i].name, cfg_opts[i].metavar, text);
            }
    }
    fputs("\nGeneral:\n", f);
    help_line(f, "print-config", NULL, "print a config file of every default, and exit");
    help_line(f, "help", NULL, "print this help, and exit");
    help_line(f, "version", NULL, "print the version, and exit");
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* A value as the config file reads it back: quoted when empty or when it
 * has characters trim() or '#'-readers would mangle. */
static void sample_value(FILE *f, const char *v)
{
    int plain = *v && !strpbrk(v, " \t\"'#\\");
    if (plain) {
        fputs(v, f);
        return;
    }
    fputc('"', f);
    for (; *v; v++) {
        if (*v == '"' || *v == '\\')
            fputc('\\', f);
        fputc(*v, f);
    }
    fputc('"', f);
}

char *cfg_sample(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    fputs("# llmd.conf: configuration of the llmd daemon (/etc/llmd/llmd.conf).\n"
          "#\n"
          "# Generated by `llmd --print-config`.  Every key is shown commented out,\n"
          "# with its default.  Each key is also a command-line flag (--key value),\n"
          "# and flags override this file.  One \"key = value\" per line; lines that\n"
          "# start with # are comments; a value may be quoted (\"\" is empty).  A list\n"
          "# key (listen, listen-plain) repeated here adds to the list.\n",
          f);
    for (int g = 0; g < G_N; g++) {
        fprintf(f, "\n# ==== %s ====\n", group_title[g]);
        for (int i = 0; i < N_OPTS; i++) {
            const struct cfg_opt *o = &cfg_opts[i];
            if (o->group != (enum opt_group)g || (o->flags & OPT_CLI_ONLY))
                continue;
            char text[512];
            opt_text(o, text, sizeof(text) - 1);
            strcat(text, "."); /* room kept above */
            fputs("\n# ", f);
            put_wrapped(f, text, 2, "# ", 78);
            fprintf(f, "\n# %s = ", o->name);
            sample_value(f, o->def ? o->def : o->metavar);
            fputc('\n', f);
        }
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
