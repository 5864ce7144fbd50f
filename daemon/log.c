/*
 * daemon/log.c — llmd's log lines on stderr.
 *
 * Each line is formatted whole into one buffer and handed to a single
 * write(2), so lines from the I/O, engine and DB threads never interleave
 * (for lines under PIPE_BUF even when stderr is a pipe) and no lock is
 * needed.  Control characters in a message are escaped so that text taken
 * from a client can never forge a line of its own.
 */
#include "daemon/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int log_level = LOGL_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

int log_level_parse(const char *s)
{
    for (int i = 0; i <= LOGL_DEBUG; i++)
        if (!strcmp(s, level_names[i]))
            return i;
    if (!strcmp(s, "warning"))
        return LOGL_WARN;
    return -1;
}

const char *log_level_name(enum log_level l)
{
    return l >= LOGL_ERROR && l <= LOGL_DEBUG ? level_names[l] : "?";
}

void log_set_level(enum log_level l)
{
    atomic_store(&log_level, (int)l);
}

int log_enabled(enum log_level l)
{
    return (int)l <= atomic_load(&log_level);
}

/* "2026-11-22T10:15:03.120Z" into out (at least 25 bytes). */
static void log_timestamp(char *out, size_t n)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t k = strftime(out, n, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + k, n - k, ".%03ldZ", ts.tv_nsec / 1000000);
}

/* Copies msg into out, escaping control characters; returns the length.
 * out must hold 4 * strlen(msg) + 1 bytes. */
static size_t log_escape(char *out, const char *msg)
{
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        if (*p == '\n')
            k += (size_t)sprintf(out + k, "\\n");
        else if (*p == '\r')
            k += (size_t)sprintf(out + k, "\\r");
        else if (*p < 0x20 && *p != '\t')
            k += (size_t)sprintf(out + k, "\\x%02x", *p);
        else
            out[k++] = (char)*p;
    }
    out[k] = 0;
    return k;
}

static void log_write_all(const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(STDERR_FILENO, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* nowhere left to report it */
        buf += w;
        len -= (size_t)w;
    }
}

void log_msg(enum log_level l, const char *fmt, ...)
{
    if (!log_enabled(l))
        return;
    int saved = errno; /* callers may log and then look at errno */
    char small[1024], *msg = small;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0, small[0] = 0;
    if ((size_t)n >= sizeof(small) && (msg = malloc((size_t)n + 1))) {
        va_start(ap, fmt);
        vsnprintf(msg, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    if (!msg)
        msg = small; /* truncated rather than lost */
    size_t mlen = strlen(msg);
    while (mlen > 0 && msg[mlen - 1] == '\n')
        msg[--mlen] = 0;
    char head[64];
    log_timestamp(head, sizeof(head));
    size_t cap = strlen(head) + 16 + 4 * mlen + 2;
    char stack[2048], *line = cap <= sizeof(stack) ? stack : malloc(cap);
    if (line) {
        size_t k = (size_t)snprintf(line, cap, "%s %s llmd: ", head, log_level_name(l));
        k += log_escape(line + k, msg);
        line[k++] = '\n';
        log_write_all(line, k);
    }
    if (line != stack)
        free(line);
    if (msg != small)
        free(msg);
    errno = saved;
}
