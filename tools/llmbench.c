/*
 * tools/llmbench.c — llmbench's main: arguments, then one event loop that
 * sends a scenario's requests at their due times and writes the report.
 *
 * The one idea: every arrival is a timer.  Poisson and burst tenants re-arm
 * their timer for the next due time; a closed-loop tenant sends its next
 * request from the done callback of the last (after think_s).  llmbench never
 * queues on its side: a due request goes out at once, so the latencies we
 * record are the server's.  Arrivals end at duration_s, after `requests`, or
 * when every tenant is past its window; then "end" decides whether in-flight
 * requests are cut at once or given grace_s.  Records are allocated in fixed
 * chunks so that the pointers handed to the HTTP client stay valid.
 */
#include "tools/llmbench.h"

#include <errno.h>
#include <event2/event.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define LB_CHUNK 1024 /* records per allocation */

/* One tenant's arrivals. */
struct lb_ts {
    struct lb_run *run;
    int idx;
    struct event *ev, *stop; /* next arrival; stop_s */
    double next;             /* due time of the next arrival */
    long sent;
    int over; /* no more arrivals for this tenant */
};

struct lb_run;

/* An action's timer argument. */
struct lb_act {
    struct lb_run *r;
    int i;
};

struct lb_run {
    struct lb_scenario *sc;
    struct lb_client *cl;
    struct event_base *base;
    double t0;
    struct lb_record **chunks;
    long n, n_chunks;
    struct lb_ts *ts;
    struct event *tick, *end_ev, *grace, *duration, *sig[3];
    struct event **act_ev;
    struct lb_act *act;
    pid_t *act_pid;
    int arrivals_over, cancel, quiet;
    double t_arr_end, t_last;
    long n_ok, n_err, tok_total, tok_prev;
};

struct lb_opts {
    const char *url, *model, *ca, *only, *json, *plot, *scenario;
    const char *keys[64];
    int n_keys, insecure, quiet;
    double rate_scale, duration;
    long requests, seed;
    int has_duration, has_requests, has_seed;
};

static double lb_rel(const struct lb_run *r)
{
    return lb_now() - r->t0;
}

static void lb_timer(struct event *ev, double s)
{
    if (s < 0)
        s = 0;
    struct timeval tv = {.tv_sec = (time_t)s, .tv_usec = (suseconds_t)((s - floor(s)) * 1e6)};
    evtimer_add(ev, &tv);
}

/* ------------------------------------------------------------ records */

/* A new zeroed record; NULL when out of memory. */
static struct lb_record *lb_rec_new(struct lb_run *r)
{
    if (r->n == r->n_chunks * LB_CHUNK) {
        struct lb_record **ch = realloc(r->chunks, (size_t)(r->n_chunks + 1) * sizeof(*ch));
        if (!ch)
            return NULL;
        r->chunks = ch;
        ch[r->n_chunks] = calloc(LB_CHUNK, sizeof(struct lb_record));
        if (!ch[r->n_chunks])
            return NULL;
        r->n_chunks++;
    }
    struct lb_record *rec = &r->chunks[r->n / LB_CHUNK][r->n % LB_CHUNK];
    r->n++;
    rec->t_arrive = rec->t_send = rec->t_first = rec->t_end = -1;
    return rec;
}

/* The records in one array for lb_report; the chunks are freed (the ITL
 * arrays move with the copies). */
static struct lb_record *lb_rec_flatten(struct lb_run *r)
{
    struct lb_record *all = malloc((size_t)(r->n ? r->n : 1) * sizeof(*all));
    for (long i = 0; all && i < r->n; i++)
        all[i] = r->chunks[i / LB_CHUNK][i % LB_CHUNK];
    if (!all) {
        for (long i = 0; i < r->n; i++)
            lb_record_free(&r->chunks[i / LB_CHUNK][i % LB_CHUNK]);
        r->n = 0;
    }
    for (long i = 0; i < r->n_chunks; i++)
        free(r->chunks[i]);
    free(r->chunks);
    r->chunks = NULL;
    r->n_chunks = 0;
    return all;
}

/* ----------------------------------------------------------- arrivals */

static void lb_check_finish(struct lb_run *r)
{
    if (r->arrivals_over && lb_client_inflight(r->cl) == 0)
        event_base_loopexit(r->base, NULL);
}

/* Arrivals are over: stop every timer and, from the loop, cut or wait. */
static void lb_end_arrivals(struct lb_run *r)
{
    if (r->arrivals_over)
        return;
    r->arrivals_over = 1;
    r->t_arr_end = lb_rel(r);
    for (int i = 0; i < r->sc->n_tenants; i++) {
        event_del(r->ts[i].ev);
        event_del(r->ts[i].stop);
    }
    event_del(r->duration);
    lb_timer(r->end_ev, 0);
}

static void lb_tenant_over(struct lb_ts *ts)
{
    struct lb_run *r = ts->run;
    ts->over = 1;
    event_del(ts->ev);
    event_del(ts->stop);
    for (int i = 0; i < r->sc->n_tenants; i++)
        if (!r->ts[i].over)
            return;
    lb_end_arrivals(r);
}

/* 1 when tenant ts may send a request due at t. */
static int lb_may_send(struct lb_ts *ts, double t)
{
    struct lb_run *r = ts->run;
    const struct lb_tenant *tn = &r->sc->tenants[ts->idx];
    if (r->arrivals_over || ts->over)
        return 0;
    if ((r->sc->duration_s > 0 && t >= r->sc->duration_s) ||
        (r->sc->requests > 0 && r->n >= r->sc->requests)) {
        lb_end_arrivals(r);
        return 0;
    }
    if ((tn->stop_s > 0 && t >= tn->stop_s) ||
        (tn->max_requests > 0 && ts->sent >= tn->max_requests)) {
        lb_tenant_over(ts);
        return 0;
    }
    return 1;
}

static void lb_done(struct lb_record *rec, void *arg);

/* Sends one request of ts that was due at t. */
static void lb_send_one(struct lb_ts *ts, double t)
{
    struct lb_run *r = ts->run;
    struct lb_tenant *tn = &r->sc->tenants[ts->idx];
    struct lb_record *rec = lb_rec_new(r);
    if (!rec) {
        fprintf(stderr, "llmbench: out of memory for records; ending arrivals\n");
        lb_end_arrivals(r);
        return;
    }
    rec->tenant = ts->idx;
    rec->t_arrive = t;
    ts->sent++;
    size_t len = 0;
    char *body = lb_scen_body(r->sc, tn, rec, &len);
    if (!body) {
        rec->outcome = LB_LOST;
        rec->t_send = rec->t_end = lb_rel(r);
        snprintf(rec->err, sizeof(rec->err), "memory");
        r->n_err++;
    } else {
        lb_client_send(r->cl, rec, lb_scen_path(r->sc), tn->key, body, len, r->t0, lb_done, ts);
    }
    /* Past the last request we may send: end now rather than at the next timer. */
    if (r->sc->requests > 0 && r->n >= r->sc->requests)
        lb_end_arrivals(r);
    else if (tn->max_requests > 0 && ts->sent >= tn->max_requests)
        lb_tenant_over(ts);
}

/* Poisson and burst tenants: send what is due, re-arm for the next. */
static void lb_arrival_cb(evutil_socket_t fd, short what, void *arg)
{
    struct lb_ts *ts = arg;
    struct lb_run *r = ts->run;
    struct lb_tenant *tn = &r->sc->tenants[ts->idx];
    double now = lb_rel(r);
    while (ts->next <= now + 1e-4 && lb_may_send(ts, ts->next)) {
        if (tn->arrival == LB_ARR_POISSON) {
            lb_send_one(ts, ts->next);
            ts->next += lb_rng_exp(&tn->rng, tn->rate);
        } else {
            for (int i = 0; i < tn->burst && lb_may_send(ts, ts->next); i++)
                lb_send_one(ts, ts->next);
            if (tn->every_s <= 0) {
                if (!ts->over)
                    lb_tenant_over(ts);
                return;
            }
            ts->next += tn->every_s;
        }
    }
    if (!ts->over && !r->arrivals_over)
        lb_timer(ts->ev, ts->next - lb_rel(r));
}

/* A closed-loop slot: one request now, the next from its done callback. */
static void lb_closed_cb(evutil_socket_t fd, short what, void *arg)
{
    struct lb_ts *ts = arg;
    double now = lb_rel(ts->run);
    if (lb_may_send(ts, now))
        lb_send_one(ts, now);
}

/* At start_s, a closed-loop tenant fills its concurrency. */
static void lb_closed_start_cb(evutil_socket_t fd, short what, void *arg)
{
    struct lb_ts *ts = arg;
    int n = ts->run->sc->tenants[ts->idx].concurrency;
    for (int i = 0; i < n; i++)
        lb_closed_cb(fd, what, arg);
}

static void lb_stop_cb(evutil_socket_t fd, short what, void *arg)
{
    struct lb_ts *ts = arg;
    if (!ts->over)
        lb_tenant_over(ts);
}

static void lb_done(struct lb_record *rec, void *arg)
{
    struct lb_ts *ts = arg;
    struct lb_run *r = ts->run;
    struct lb_tenant *tn = &r->sc->tenants[ts->idx];
    if (rec->outcome == LB_OK)
        r->n_ok++;
    else
        r->n_err++;
    r->tok_total += rec->out_tokens;
    if (rec->t_end > r->t_last)
        r->t_last = rec->t_end;
    if (tn->arrival == LB_ARR_CLOSED && !ts->over && !r->arrivals_over) {
        if (tn->think_s > 0) {
            struct timeval tv = {.tv_sec = (time_t)tn->think_s,
                                 .tv_usec =
                                     (suseconds_t)((tn->think_s - floor(tn->think_s)) * 1e6)};
            event_base_once(r->base, -1, EV_TIMEOUT, lb_closed_cb, ts, &tv);
        } else {
            lb_closed_cb(-1, 0, ts);
        }
    }
    lb_check_finish(r);
}

/* Notes the exit of every action that ended.  The number still running. */
static int lb_reap(struct lb_run *r)
{
    int left = 0;
    for (int i = 0; i < r->sc->n_actions; i++) {
        int st;
        if (r->act_pid[i] <= 0)
            continue;
        if (waitpid(r->act_pid[i], &st, WNOHANG) == r->act_pid[i]) {
            r->sc->actions[i].exit = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            r->act_pid[i] = 0;
        } else {
            left++;
        }
    }
    return left;
}

/* ---------------------------------------------------- end of the run */

static void lb_cut_cb(evutil_socket_t fd, short what, void *arg)
{
    struct lb_run *r = arg;
    lb_client_cut_all(r->cl);
    lb_check_finish(r);
}

static void lb_end_cb(evutil_socket_t fd, short what, void *arg)
{
    struct lb_run *r = arg;
    if (r->cancel || r->sc->end_cancel)
        lb_cut_cb(fd, what, r);
    else if (lb_client_inflight(r->cl) > 0)
        lb_timer(r->grace, r->sc->grace_s);
    lb_check_finish(r);
}

static void lb_duration_cb(evutil_socket_t fd, short what, void *arg)
{
    lb_end_arrivals(arg);
}

static void lb_signal_cb(evutil_socket_t sig, short what, void *arg)
{
    struct lb_run *r = arg;
    if (sig == SIGCHLD) {
        lb_reap(r);
        return;
    }
    fprintf(stderr, "llmbench: interrupted: cutting %d requests in flight\n",
            lb_client_inflight(r->cl));
    r->cancel = 1;
    if (r->arrivals_over) /* already waiting out grace_s: cut now */
        lb_timer(r->grace, 0);
    lb_end_arrivals(r);
}

/* ----------------------------------------------------- actions, progress */

/* Runs action i under /bin/sh, its output on our stderr; SIGCHLD reaps it. */
static void lb_action_cb(evutil_socket_t fd, short what, void *arg)
{
    struct lb_act *aa = arg;
    struct lb_action *a = &aa->r->sc->actions[aa->i];
    fprintf(stderr, "llmbench: action at %gs: %s\n", a->at_s, a->run);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(2, 1);
        execl("/bin/sh", "sh", "-c", a->run, (char *)NULL);
        _exit(127);
    }
    if (pid < 0) {
        fprintf(stderr, "llmbench: cannot run the action: %s\n", strerror(errno));
        a->exit = 127;
        return;
    }
    aa->r->act_pid[aa->i] = pid;
}

static void lb_tick_cb(evutil_socket_t fd, short what, void *arg)
{
    struct lb_run *r = arg;
    if (r->quiet)
        return;
    fprintf(stderr, "llmbench: %6.1fs  sent %ld  ok %ld  errors %ld  in flight %d  %ld tok/s\n",
            lb_rel(r), r->n, r->n_ok, r->n_err, lb_client_inflight(r->cl),
            r->tok_total - r->tok_prev);
    r->tok_prev = r->tok_total;
}

/* Waits (a bounded while) for actions still running after the loop. */
static void lb_reap_actions(struct lb_run *r)
{
    double until = lb_now() + 10;
    while (lb_reap(r) > 0 && lb_now() < until)
        usleep(20000);
}

/* ------------------------------------------------------------ options */

static void lb_usage(FILE *f)
{
    fprintf(f, "usage: llmbench [OPTIONS] SCENARIO.json\n"
               "Sends a scenario's requests to an OpenAI-compatible server and reports\n"
               "latency, throughput, goodput and errors per tenant.\n\n"
               "  --url URL          target (default https://127.0.0.1:8443)\n"
               "  --key KEY          API key for every tenant\n"
               "  --key NAME=KEY     API key for one tenant (repeatable; overrides the file)\n"
               "  --model ID         the \"model\" sent (overrides the file)\n"
               "  --insecure         do not verify the server's certificate\n"
               "  --ca FILE          trust the certificates in FILE too\n"
               "  --only NAMES       only these tenants (comma-separated)\n"
               "  --rate-scale F     multiply Poisson rates and burst frequencies by F\n"
               "  --duration S       arrivals stop after S seconds\n"
               "  --requests N       arrivals stop after N requests\n"
               "  --seed N           random seed\n"
               "  --json FILE        write the report as JSON (\"-\": stdout, no table)\n"
               "  --plot FILE.svg    draw throughput and TTFT over time\n"
               "  --quiet            no progress line on stderr\n"
               "  --help             this text\n\n"
               "Exit status: 0 when the run completed, 2 for bad arguments or scenario,\n"
               "1 when it could not run.\n");
}

static int lb_num(const char *opt, const char *s, double lo, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo) {
        fprintf(stderr, "llmbench: %s: bad number \"%s\"\n", opt, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* Reads the command line into o.  0, 1 for --help, -1 on a bad argument. */
static int lb_parse_args(int argc, char **argv, struct lb_opts *o)
{
    static const struct option longs[] = {{"url", required_argument, 0, 'u'},
                                          {"key", required_argument, 0, 'k'},
                                          {"model", required_argument, 0, 'm'},
                                          {"insecure", no_argument, 0, 'I'},
                                          {"ca", required_argument, 0, 'c'},
                                          {"only", required_argument, 0, 'o'},
                                          {"rate-scale", required_argument, 0, 'r'},
                                          {"duration", required_argument, 0, 'd'},
                                          {"requests", required_argument, 0, 'n'},
                                          {"seed", required_argument, 0, 's'},
                                          {"json", required_argument, 0, 'j'},
                                          {"plot", required_argument, 0, 'p'},
                                          {"quiet", no_argument, 0, 'q'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    o->url = "https://127.0.0.1:8443";
    o->rate_scale = 1;
    double v;
    int ch;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (ch) {
        case 'u':
            o->url = optarg;
            break;
        case 'k':
            if (o->n_keys == (int)(sizeof(o->keys) / sizeof(o->keys[0]))) {
                fprintf(stderr, "llmbench: too many --key options\n");
                return -1;
            }
            o->keys[o->n_keys++] = optarg;
            break;
        case 'm':
            o->model = optarg;
            break;
        case 'I':
            o->insecure = 1;
            break;
        case 'c':
            o->ca = optarg;
            break;
        case 'o':
            o->only = optarg;
            break;
        case 'j':
            o->json = optarg;
            break;
        case 'p':
            o->plot = optarg;
            break;
        case 'q':
            o->quiet = 1;
            break;
        case 'h':
            return 1;
        case 'r':
            if (lb_num("--rate-scale", optarg, 0, &o->rate_scale) || o->rate_scale <= 0)
                return -1;
            break;
        case 'd':
            if (lb_num("--duration", optarg, 0, &o->duration))
                return -1;
            o->has_duration = 1;
            break;
        case 'n':
            if (lb_num("--requests", optarg, 0, &v) || v != floor(v))
                return -1;
            o->requests = (long)v, o->has_requests = 1;
            break;
        case 's':
            if (lb_num("--seed", optarg, 0, &v) || v != floor(v))
                return -1;
            o->seed = (long)v, o->has_seed = 1;
            break;
        default:
            fprintf(stderr, "llmbench: unknown or incomplete option %s\n", argv[optind - 1]);
            return -1;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "llmbench: expected one scenario file (see --help)\n");
        return -1;
    }
    o->scenario = argv[optind];
    return 0;
}

static int lb_set_str(char **dst, const char *v)
{
    char *s = strdup(v);
    if (!s)
        return -1;
    free(*dst);
    *dst = s;
    return 0;
}

/* --key: "NAME=KEY" for a tenant of that name, else a key for all.  Keys for
 * all go first so that a tenant's own key wins whatever the order. */
static int lb_apply_keys(struct lb_scenario *sc, const struct lb_opts *o)
{
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k < o->n_keys; k++) {
            const char *eq = strchr(o->keys[k], '=');
            int hit = -1;
            for (int i = 0; eq && i < sc->n_tenants; i++)
                if (strlen(sc->tenants[i].name) == (size_t)(eq - o->keys[k]) &&
                    strncmp(sc->tenants[i].name, o->keys[k], (size_t)(eq - o->keys[k])) == 0)
                    hit = i;
            if (pass == 0 && hit < 0)
                for (int i = 0; i < sc->n_tenants; i++)
                    if (lb_set_str(&sc->tenants[i].key, o->keys[k]))
                        return -1;
            if (pass == 1 && hit >= 0 && lb_set_str(&sc->tenants[hit].key, eq + 1))
                return -1;
        }
    }
    return 0;
}

/* The command line's overrides on the loaded scenario.  -1 with a message. */
static int lb_apply_opts(struct lb_scenario *sc, const struct lb_opts *o)
{
    char err[512];
    if (lb_apply_keys(sc, o) || (o->model && lb_set_str(&sc->model, o->model))) {
        fprintf(stderr, "llmbench: out of memory\n");
        return -1;
    }
    if (o->has_seed && lb_scen_reseed(sc, (uint64_t)o->seed)) {
        fprintf(stderr, "llmbench: out of memory\n");
        return -1;
    }
    if (o->only && lb_scen_only(sc, o->only, err, sizeof(err)) != 0) {
        fprintf(stderr, "llmbench: --only: %s\n", err);
        return -1;
    }
    if (o->rate_scale != 1)
        lb_scen_scale_rate(sc, o->rate_scale);
    if (o->has_duration)
        sc->duration_s = o->duration;
    if (o->has_requests)
        sc->requests = o->requests;
    if (sc->duration_s <= 0 && sc->requests <= 0) {
        fprintf(stderr,
                "llmbench: %s: needs duration_s or requests (or --duration, "
                "--requests)\n",
                o->scenario);
        return -1;
    }
    return 0;
}

/* --------------------------------------------------------------- run */

/* Lets thousands of connections be open at once. */
static void lb_raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* Arms a tenant's first arrival.  -1 when out of memory. */
static int lb_tenant_arm(struct lb_run *r, int i)
{
    struct lb_ts *ts = &r->ts[i];
    struct lb_tenant *tn = &r->sc->tenants[i];
    ts->run = r;
    ts->idx = i;
    event_callback_fn fn = tn->arrival == LB_ARR_CLOSED ? lb_closed_start_cb : lb_arrival_cb;
    ts->ev = evtimer_new(r->base, fn, ts);
    ts->stop = evtimer_new(r->base, lb_stop_cb, ts);
    if (!ts->ev || !ts->stop)
        return -1;
    ts->next = tn->start_s;
    if (tn->arrival == LB_ARR_POISSON) {
        if (tn->rate <= 0) {
            ts->over = 1;
            return 0;
        }
        ts->next += lb_rng_exp(&tn->rng, tn->rate);
    }
    lb_timer(ts->ev, ts->next);
    if (tn->stop_s > 0)
        lb_timer(ts->stop, tn->stop_s);
    return 0;
}

/* Makes the run's events.  -1 when out of memory. */
static int lb_run_setup(struct lb_run *r)
{
    struct lb_scenario *sc = r->sc;
    r->ts = calloc((size_t)sc->n_tenants + 1, sizeof(*r->ts));
    r->act_ev = calloc((size_t)sc->n_actions + 1, sizeof(*r->act_ev));
    r->act = calloc((size_t)sc->n_actions + 1, sizeof(*r->act));
    r->act_pid = calloc((size_t)sc->n_actions + 1, sizeof(*r->act_pid));
    r->tick = event_new(r->base, -1, EV_PERSIST, lb_tick_cb, r);
    r->end_ev = evtimer_new(r->base, lb_end_cb, r);
    r->grace = evtimer_new(r->base, lb_cut_cb, r);
    r->duration = evtimer_new(r->base, lb_duration_cb, r);
    int sigs[3] = {SIGINT, SIGTERM, SIGCHLD};
    for (int i = 0; i < 3; i++)
        if (!(r->sig[i] = evsignal_new(r->base, sigs[i], lb_signal_cb, r)) ||
            evsignal_add(r->sig[i], NULL) != 0)
            return -1;
    if (!r->ts || !r->act_ev || !r->act || !r->act_pid || !r->tick || !r->end_ev || !r->grace ||
        !r->duration)
        return -1;
    r->t0 = lb_now();
    for (int i = 0; i < sc->n_tenants; i++)
        if (lb_tenant_arm(r, i) != 0)
            return -1;
    for (int i = 0; i < sc->n_actions; i++) {
        sc->actions[i].exit = -1;
        r->act[i] = (struct lb_act){r, i};
        if (!(r->act_ev[i] = evtimer_new(r->base, lb_action_cb, &r->act[i])))
            return -1;
        lb_timer(r->act_ev[i], sc->actions[i].at_s);
    }
    struct timeval sec = {1, 0};
    event_add(r->tick, &sec);
    if (sc->duration_s > 0)
        lb_timer(r->duration, sc->duration_s);
    int any = 0;
    for (int i = 0; i < sc->n_tenants; i++)
        any |= !r->ts[i].over;
    if (!any)
        lb_end_arrivals(r);
    return 0;
}

static void lb_run_free(struct lb_run *r)
{
    for (int i = 0; r->ts && i < r->sc->n_tenants; i++) {
        if (r->ts[i].ev)
            event_free(r->ts[i].ev);
        if (r->ts[i].stop)
            event_free(r->ts[i].stop);
    }
    for (int i = 0; r->act_ev && i < r->sc->n_actions; i++)
        if (r->act_ev[i])
            event_free(r->act_ev[i]);
    struct event *evs[] = {r->tick,   r->end_ev, r->grace, r->duration,
                           r->sig[0], r->sig[1], r->sig[2]};
    for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
        if (evs[i])
            event_free(evs[i]);
    free(r->ts);
    free(r->act_ev);
    free(r->act);
    free(r->act_pid);
    for (long i = 0; i < r->n_chunks; i++) {
        for (long j = 0; j < LB_CHUNK && i * LB_CHUNK + j < r->n; j++)
            lb_record_free(&r->chunks[i][j]);
        free(r->chunks[i]);
    }
    free(r->chunks);
}

/* The report: the table on stdout, JSON and SVG where asked.  0, or 1 when
 * an output could not be written. */
static int lb_output(struct lb_run *r, const struct lb_opts *o, const char *url)
{
    double wall = r->t_last > 0 ? r->t_last : lb_rel(r);
    /* Steady state is the time arrivals ran; a run of a fixed number of
     * requests is measured to its end. */
    double window = (r->sc->duration_s > 0 ? r->t_arr_end : wall) - r->sc->warmup_s;
    long n = r->n;
    struct lb_record *recs = lb_rec_flatten(r);
    if (!recs && n > 0) {
        fprintf(stderr, "llmbench: out of memory for the report\n");
        return 1;
    }
    json_t *rep = lb_report(r->sc, url, recs, r->n, wall, window > 0 ? window : 0);
    for (long i = 0; i < r->n; i++)
        lb_record_free(&recs[i]);
    free(recs);
    r->n = 0;
    if (!rep) {
        fprintf(stderr, "llmbench: could not build the report\n");
        return 1;
    }
    int rc = 0;
    int to_stdout = o->json && strcmp(o->json, "-") == 0;
    if (to_stdout) {
        json_dumpf(rep, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
    } else {
        lb_report_print(stdout, rep);
        if (o->json && json_dump_file(rep, o->json, JSON_INDENT(2)) != 0) {
            fprintf(stderr, "llmbench: cannot write %s\n", o->json);
            rc = 1;
        }
    }
    char err[512];
    if (o->plot && lb_plot_svg(o->plot, rep, err, sizeof(err)) != 0) {
        fprintf(stderr, "llmbench: --plot: %s\n", err);
        rc = 1;
    }
    json_decref(rep);
    fflush(stdout);
    return rc;
}

/* Runs the loaded scenario against the target.  The exit status. */
static int lb_run(struct lb_scenario *sc, const struct lb_opts *o)
{
    char err[512];
    struct lb_target t;
    if (lb_target_parse(o->url, &t, err, sizeof(err)) != 0) {
        fprintf(stderr, "llmbench: --url: %s\n", err);
        return 2;
    }
    t.insecure = o->insecure;
    t.ca_file = o->ca;
    struct event_base *base = event_base_new();
    if (!base) {
        fprintf(stderr, "llmbench: cannot make the event loop\n");
        return 1;
    }
    struct lb_run r = {.sc = sc, .base = base, .quiet = o->quiet};
    int rc = 1;
    r.cl = lb_client_new(base, &t, sc->timeout_s, err, sizeof(err));
    if (!r.cl) {
        fprintf(stderr, "llmbench: %s\n", err);
    } else if (lb_run_setup(&r) != 0) {
        fprintf(stderr, "llmbench: out of memory\n");
    } else {
        event_base_dispatch(base);
        lb_client_cut_all(r.cl); /* nothing is left, unless the loop broke */
        lb_reap_actions(&r);
        rc = lb_output(&r, o, o->url);
    }
    lb_client_free(r.cl);
    lb_run_free(&r);
    event_base_free(base);
    return rc;
}

int main(int argc, char **argv)
{
    struct lb_opts o = {0};
    int a = lb_parse_args(argc, argv, &o);
    if (a != 0) {
        lb_usage(a > 0 ? stdout : stderr);
        return a > 0 ? 0 : 2;
    }
    signal(SIGPIPE, SIG_IGN);
    lb_raise_nofile();
    struct lb_scenario sc;
    char err[1024];
    memset(&sc, 0, sizeof(sc));
    if (lb_scen_load(o.scenario, &sc, err, sizeof(err)) != 0) {
        fprintf(stderr, "llmbench: %s\n", err);
        return 2;
    }
    int rc = lb_apply_opts(&sc, &o) != 0 ? 2 : lb_run(&sc, &o);
    lb_scen_free(&sc);
    return rc;
}
