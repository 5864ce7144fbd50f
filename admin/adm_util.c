/*
 * admin/adm_util.c — what every llmadmin command shares: messages and exit
 * statuses, a small option parser, numbers and dates from the command line,
 * and output as aligned tables or one JSON value.
 *
 * The option parser is table-driven on purpose: a command lists the options
 * it takes, so an unknown or misspelt one is a usage error (exit 2) instead
 * of being silently ignored.
 */
#include "admin/adm.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------ messages */

int adm_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("llmadmin: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return ADM_FAIL;
}

int adm_usage(const struct adm_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("llmadmin: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fprintf(stderr, "usage: llmadmin %s\n",
            c && c->usage ? c->usage : "[--db PATH] [--json] COMMAND ...");
    return ADM_USAGE;
}

/* ------------------------------------------------------------- options */

struct adm_opt *adm_opt(struct adm_opt *opts, int n_opts, const char *name)
{
    for (int i = 0; i < n_opts; i++)
        if (strcmp(opts[i].name, name) == 0)
            return &opts[i];
    return NULL;
}

/* Matches "--name" or "--name=value" against opts; *eq points past '='. */
static struct adm_opt *adm_match(struct adm_opt *opts, int n_opts, const char *arg, const char **eq)
{
    const char *name = arg + 2;
    size_t len = strcspn(name, "=");
    *eq = name[len] == '=' ? name + len + 1 : NULL;
    for (int i = 0; i < n_opts; i++)
        if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0)
            return &opts[i];
    return NULL;
}

/* Takes the option at argv[*i] (advancing *i past its value). */
static int adm_take(const struct adm_ctx *c, int argc, char **argv, int *i, struct adm_opt *opts,
                    int n_opts)
{
    const char *eq;
    struct adm_opt *o = adm_match(opts, n_opts, argv[*i], &eq);
    if (!o)
        return adm_usage(c, "unknown option '%s'", argv[*i]);
    if (!o->has_arg && eq)
        return adm_usage(c, "option '--%s' takes no value", o->name);
    if (o->has_arg && !eq) {
        if (*i + 1 >= argc)
            return adm_usage(c, "option '--%s' needs a value", o->name);
        eq = argv[++*i];
    }
    o->val = eq;
    o->set = 1;
    return ADM_OK;
}

int adm_parse(const struct adm_ctx *c, int argc, char **argv, struct adm_opt *opts, int n_opts,
              const char **pos, int min_pos, int max_pos, int *n_pos)
{
    int n = 0, opts_done = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!opts_done && strcmp(a, "--") == 0) {
            opts_done = 1;
        } else if (!opts_done && a[0] == '-' && a[1] == '-') {
            if (adm_take(c, argc, argv, &i, opts, n_opts) != ADM_OK)
                return ADM_USAGE;
        } else if (!opts_done && a[0] == '-' && a[1] != '\0') {
            return adm_usage(c, "unknown option '%s'", a);
        } else if (n >= max_pos) {
            return adm_usage(c, "unexpected argument '%s'", a);
        } else {
            pos[n++] = a;
        }
    }
    if (n < min_pos)
        return adm_usage(c, "missing argument");
    *n_pos = n;
    return ADM_OK;
}

int adm_int(const char *s, long lo, long hi, long *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int adm_double(const char *s, double lo, double hi, double *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !isfinite(v) || v <= lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* ---------------------------------------------------------------- time */

/* "YYYY-MM-DD" or "YYYY-MM-DDTHH:MM[:SS]", UTC. */
static int adm_date(const char *s, int64_t *out)
{
    struct tm tm = {0};
    char rest = 0;
    int n = sscanf(s, "%4d-%2d-%2d%c%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &rest,
                   &tm.tm_hour, &tm.tm_min, &tm.tm_sec);
    size_t len = strlen(s);
    int ok = (n == 3 && len == 10) || (n == 6 && rest == 'T' && len == 16) ||
             (n == 7 && rest == 'T' && len == 19);
    if (!ok || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
        tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 59 || tm.tm_year < 1970)
        return -1;
    int mday = tm.tm_mday, mon = tm.tm_mon;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t t = timegm(&tm);
    /* timegm normalises 2026-02-31 into March: refuse such dates instead */
    if (t == (time_t)-1 || tm.tm_mday != mday || tm.tm_mon != mon - 1)
        return -1;
    *out = (int64_t)t;
    return 0;
}

int adm_time(const char *s, int sign, int64_t now, int64_t *out)
{
    if (!s || !*s)
        return -1;
    if (adm_date(s, out) == 0)
        return 0;
    const char *p = s;
    if (*p == '+' || *p == '-') {
        if ((*p == '+' ? 1 : -1) != sign)
            return -1;
        p++;
    } else if (sign > 0) {
        return -1; /* a bare "30d" for an expiry date is too easy to misread */
    }
    size_t len = strlen(p);
    if (len < 2 || (p[len - 1] != 'd' && p[len - 1] != 'h'))
        return -1;
    char num[24];
    if (len - 1 >= sizeof(num))
        return -1;
    memcpy(num, p, len - 1);
    num[len - 1] = '\0';
    long n;
    if (adm_int(num, 0, 1000000, &n) != 0)
        return -1;
    int64_t unit = p[len - 1] == 'd' ? 86400 : 3600;
    *out = now + sign * (int64_t)n * unit;
    return 0;
}

const char *adm_fmt_time(int64_t unix_s, int human, char *buf, size_t cap)
{
    time_t t = (time_t)unix_s;
    struct tm tm;
    if (!gmtime_r(&t, &tm) ||
        !strftime(buf, cap, human ? "%Y-%m-%d %H:%M" : "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(buf, cap, "%lld", (long long)unix_s);
    return buf;
}

json_t *adm_json_time(int64_t unix_s)
{
    char buf[32];
    return unix_s ? json_string(adm_fmt_time(unix_s, 0, buf, sizeof(buf))) : json_null();
}

/* --------------------------------------------------------------- output */

int adm_print_json(json_t *j)
{
    if (!j)
        return adm_fail("out of memory");
    int rc = json_dumpf(j, stdout, JSON_INDENT(2) | JSON_ENCODE_ANY);
    json_decref(j);
    if (rc != 0 || fputc('\n', stdout) == EOF || fflush(stdout) != 0)
        return adm_fail("cannot write output");
    return ADM_OK;
}

const char *adm_fmt_cap(long v, char *buf, size_t cap)
{
    if (v == 0)
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%ld", v);
    return buf;
}

struct adm_table {
    int cols, rows, cap;
    char align[16];
    char **cells; /* (rows + 1) * cols, the header first */
    int failed;
};

/* Appends one row of cols strings (copied) taken from ap. */
static void adm_table_push(struct adm_table *t, va_list ap)
{
    if (t->failed)
        return;
    if (t->rows + 1 >= t->cap) {
        int cap = t->cap ? t->cap * 2 : 16;
        char **cells = realloc(t->cells, (size_t)cap * (size_t)t->cols * sizeof(*cells));
        if (!cells) {
            t->failed = 1;
            return;
        }
        t->cells = cells;
        t->cap = cap;
    }
    char **row = t->cells + (size_t)(t->rows + 1) * (size_t)t->cols;
    for (int i = 0; i < t->cols; i++) {
        const char *s = va_arg(ap, const char *);
        row[i] = strdup(s ? s : "");
        if (!row[i])
            t->failed = 1;
    }
    t->rows++;
}

struct adm_table *adm_table_new(const char *align, ...)
{
    size_t cols = strlen(align);
    if (cols == 0 || cols >= sizeof(((struct adm_table *)0)->align))
        return NULL;
    struct adm_table *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->cols = (int)cols;
    t->rows = -1; /* the header is row -1 */
    memcpy(t->align, align, cols + 1);
    va_list ap;
    va_start(ap, align);
    adm_table_push(t, ap);
    va_end(ap);
    return t;
}

void adm_table_add(struct adm_table *t, ...)
{
    if (!t)
        return;
    va_list ap;
    va_start(ap, t);
    adm_table_push(t, ap);
    va_end(ap);
}

static void adm_table_free(struct adm_table *t)
{
    size_t n = t->cells ? (size_t)(t->rows + 1) * (size_t)t->cols : 0;
    for (size_t i = 0; i < n; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t);
}

/* Two spaces between columns; the last column is not padded. */
static int adm_table_write(const struct adm_table *t, FILE *out)
{
    int width[16] = {0};
    for (int r = 0; r <= t->rows; r++)
        for (int i = 0; i < t->cols; i++) {
            int w = (int)strlen(t->cells[(size_t)r * t->cols + i]);
            width[i] = w > width[i] ? w : width[i];
        }
    for (int r = 0; r <= t->rows; r++) {
        for (int i = 0; i < t->cols; i++) {
            const char *s = t->cells[(size_t)r * t->cols + i];
            int last = i == t->cols - 1, w = last && t->align[i] != 'r' ? 0 : width[i];
            if (fprintf(out, t->align[i] == 'r' ? "%*s%s" : "%-*s%s", w, s, last ? "\n" : "  ") < 0)
                return -1;
        }
    }
    return fflush(out);
}

int adm_table_print(struct adm_table *t, FILE *out)
{
    if (!t)
        return adm_fail("out of memory");
    int rc = ADM_OK;
    if (t->failed)
        rc = adm_fail("out of memory");
    else if (adm_table_write(t, out) != 0)
        rc = adm_fail("cannot write output");
    adm_table_free(t);
    return rc;
}
