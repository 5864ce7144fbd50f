/*
 * daemon/log.h — one line per event on stderr, with a level.
 *
 *   2026-11-22T10:15:03.120Z info llmd: listening on https://127.0.0.1:8443
 *
 * Lines below the configured level are dropped before formatting.  Prompts
 * and outputs are only ever logged at debug level.  Thread-safe: a line is
 * written with one write(2).
 */
#ifndef LLMD_DAEMON_LOG_H
#define LLMD_DAEMON_LOG_H

enum log_level { LOGL_ERROR = 0, LOGL_WARN, LOGL_INFO, LOGL_DEBUG };

/* Parses "error", "warn", "info", "debug"; -1 when unknown. */
int log_level_parse(const char *s);
const char *log_level_name(enum log_level l);
void log_set_level(enum log_level l);
int log_enabled(enum log_level l);
void log_msg(enum log_level l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOGL_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOGL_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOGL_INFO, __VA_ARGS__)
#define log_debug(...)                                                                             \
    do {                                                                                           \
        if (log_enabled(LOGL_DEBUG))                                                               \
            log_msg(LOGL_DEBUG, __VA_ARGS__);                                                      \
    } while (0)

#endif
