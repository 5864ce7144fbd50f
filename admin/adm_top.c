/*
 * admin/adm_top.c — llmadmin top: the status header and the queues table,
 * asked for again every second (-d SECONDS) and shown full screen.
 *
 * The one idea: a frame is rendered by the same writers as `status` and
 * `queues`, into a memory stream, and then painted line by line cut to the
 * terminal's width, so top can never disagree with the plain commands and
 * works in any size of terminal (80x24 over ssh included).  When stdout is
 * not a terminal (or with --json) one snapshot is printed instead.  The
 * terminal is given back by endwin() on every way out: q, SIGINT, SIGTERM,
 * SIGHUP, or an error.
 */
#include "admin/adm.h"

#include <curses.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ADM_TOP_MIN_DELAY 0.1
#define ADM_TOP_MAX_DELAY 3600.0

static volatile sig_atomic_t adm_top_quit;

static void adm_top_signal(int sig)
{
    (void)sig;
    adm_top_quit = 1;
    adm_live_stop = 1; /* a request waiting on the socket gives up at once */
}

/* Without SA_RESTART, so that a wait in getch() or poll() ends at once. */
static void adm_top_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = adm_top_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* Asks for status and queues: 0 with both (caller owns), or -1 and err. */
static int adm_top_fetch(const struct adm_ctx *c, json_t **st, json_t **q, char *err, size_t errlen)
{
    if (adm_live_request(c, json_pack("{s:s}", "cmd", "status"), st, err, errlen) != 0)
        return -1;
    if (adm_live_request(c, json_pack("{s:s}", "cmd", "queues"), q, err, errlen) != 0) {
        json_decref(*st);
        return -1;
    }
    return 0;
}

/* One frame as text (malloc'd): the status header, a blank line, the
 * queues.  NULL with the reason in err. */
static char *adm_top_render(const struct adm_ctx *c, int compact, char *err, size_t errlen)
{
    json_t *st, *q;
    if (adm_top_fetch(c, &st, &q, err, errlen) != 0)
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    int rc = m ? adm_status_header_write(st, m) : ADM_FAIL;
    if (rc == ADM_OK && fputc('\n', m) == EOF)
        rc = ADM_FAIL;
    if (rc == ADM_OK)
        rc = adm_queues_write(q, compact, m);
    if (m && fclose(m) != 0)
        rc = ADM_FAIL;
    json_decref(st);
    json_decref(q);
    if (rc != ADM_OK) {
        free(buf);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return buf;
}

/* Not a terminal, or --json: one snapshot on stdout. */
static int adm_top_snapshot(const struct adm_ctx *c)
{
    char err[1024];
    if (c->json) {
        json_t *st, *q;
        if (adm_top_fetch(c, &st, &q, err, sizeof(err)) != 0)
            return adm_fail("%s", err);
        json_object_del(st, "ok");
        json_object_del(q, "ok");
        return adm_print_json(json_pack("{s:o, s:o}", "status", st, "queues", q));
    }
    char *text = adm_top_render(c, 0, err, sizeof(err));
    if (!text)
        return adm_fail("%s", err);
    int rc = fputs(text, stdout) == EOF || fflush(stdout) != 0 ? adm_fail("cannot write output")
                                                               : ADM_OK;
    free(text);
    return rc;
}

/* Paints text (or the error) under a title line, each line cut to COLS. */
static void adm_top_paint(const struct adm_ctx *c, double delay, const char *text, const char *err)
{
    char title[256], clock[16];
    time_t now = time(NULL);
    struct tm tm;
    if (!localtime_r(&now, &tm) || !strftime(clock, sizeof(clock), "%H:%M:%S", &tm))
        clock[0] = '\0';
    snprintf(title, sizeof(title), "llmadmin top  %s  every %gs  q quits  %s", clock, delay,
             c->socket_path);
    erase();
    attron(A_REVERSE);
    mvaddnstr(0, 0, title, COLS);
    attroff(A_REVERSE);
    int y = 2;
    if (!text) {
        mvaddstr(y, 0, "llmadmin: ");
        addnstr(err, COLS > 10 ? COLS - 10 : 0);
        text = "";
    }
    while (*text && y < LINES) {
        size_t n = strcspn(text, "\n");
        mvaddnstr(y++, 0, text, (int)n < COLS ? (int)n : COLS);
        text += n + (text[n] == '\n');
    }
    refresh();
}

/* Waits up to delay seconds for a key: 1 when q was pressed or a signal
 * came, 0 when it is time for the next frame, 2 to repaint at once. */
static int adm_top_keys(double delay)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        double left = delay - ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9);
        if (adm_top_quit)
            return 1;
        if (left <= 0)
            return 0;
        timeout((int)(left * 1000) + 1);
        int ch = getch();
        if (ch == 'q' || ch == 'Q')
            return 1;
        if (ch == KEY_RESIZE || ch == 12 /* ^L */)
            return 2;
    }
}

static int adm_top_screen(const struct adm_ctx *c, double delay)
{
    adm_top_signals();
    setlocale(LC_ALL, "");
    /* newterm, unlike initscr, returns instead of exiting on an unknown TERM */
    SCREEN *scr = newterm(NULL, stdout, stdin);
    if (!scr) {
        const char *term = getenv("TERM");
        return adm_fail("cannot drive terminal type '%s' (set TERM, or pipe top's output for "
                        "one snapshot)",
                        term ? term : "");
    }
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
    char err[1024] = "";
    char *text = NULL;
    int k = 0;
    while (!adm_top_quit && k != 1) {
        if (k == 0) { /* time for a new frame; a resize repaints the old one */
            free(text);
            text = adm_top_render(c, 1, err, sizeof(err));
        }
        adm_top_paint(c, delay, text, err);
        k = adm_top_keys(delay);
    }
    free(text);
    endwin();
    delscreen(scr);
    return ADM_OK;
}

/* "-d S" and "-dS" become "--delay S" for the common option parser. */
static int adm_top_args(int argc, char **argv, char **out, char *spare, size_t cap)
{
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-d") == 0) {
            out[n++] = "--delay";
        } else if (strncmp(argv[i], "-d", 2) == 0) {
            snprintf(spare, cap, "--delay=%s", argv[i] + 2);
            out[n++] = spare;
        } else {
            out[n++] = argv[i];
        }
    }
    return n;
}

int adm_cmd_top(struct adm_ctx *c, int argc, char **argv)
{
    struct adm_opt opts[] = {{"delay", 1, NULL, 0}};
    const char *pos[1];
    int n_pos;
    char spare[256];
    char **args = calloc((size_t)argc + 1, sizeof(*args));
    if (!args)
        return adm_fail("out of memory");
    int n = adm_top_args(argc, argv, args, spare, sizeof(spare));
    int rc = adm_parse(c, n, args, opts, 1, pos, 0, 0, &n_pos);
    free(args); /* the values kept in opts point into argv or spare */
    if (rc != ADM_OK)
        return ADM_USAGE;
    double delay = 1.0;
    if (opts[0].set &&
        (adm_double(opts[0].val, 0, ADM_TOP_MAX_DELAY, &delay) != 0 || delay < ADM_TOP_MIN_DELAY))
        return adm_usage(c, "-d: expected seconds between %g and %g, got '%s'", ADM_TOP_MIN_DELAY,
                         ADM_TOP_MAX_DELAY, opts[0].val);
    if (c->json || !isatty(STDOUT_FILENO))
        return adm_top_snapshot(c);
    return adm_top_screen(c, delay);
}
