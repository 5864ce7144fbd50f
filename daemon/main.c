/*
 * daemon/main.c — llmd: load the model, start the engine, serve the API.
 *
 * The I/O thread runs one libevent loop: the HTTP server, the admin
 * socket, the signals (SIGTERM/SIGINT drain and exit, SIGHUP reloads the
 * TLS certificate), a timer that picks up tenant and key changes from the
 * DB, and the wakeups from the engine and the DB writer.  Shutdown is a
 * drain: stop accepting, refuse new completions with 503, let running ones
 * finish until the deadline, abort the rest (their clients get an error),
 * flush the ledger, exit 0.  Under systemd it reports READY, STATUS and
 * STOPPING.
 */
#include "daemon/admsock.h"
#include "daemon/config.h"
#include "daemon/llmd.h"
#include "daemon/log.h"
#include "kernels/backend.h"

#include <event2/event.h>
#include <event2/thread.h>
#include <openssl/rand.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>

struct llmd_main {
    struct llmd d;
    struct event *ev_term, *ev_int, *ev_hup, *ev_refresh, *ev_stop;
    double stop_deadline; /* monotonic: abort what still runs */
    double stop_last;     /* monotonic: exit whatever happens */
    double idle_since;    /* monotonic: no request left */
    int aborted;
};

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct timeval tv_of(double s)
{
    return (struct timeval){.tv_sec = (time_t)s,
                            .tv_usec = (suseconds_t)((s - (double)(time_t)s) * 1e6)};
}

static void on_step(void *arg, const struct eng_step_info *info)
{
    int tokens = 0;
    for (int i = 0; i < info->n_items; i++)
        tokens += info->items[i].n;
    metrics_step(arg, info->seconds, tokens);
}

/* ------------------------------------------------------------ signals -- */

static void stop_tick(evutil_socket_t fd, short what, void *arg)
{
    struct llmd_main *m = arg;
    struct llmd *d = &m->d;
    (void)fd;
    (void)what;
    double now = mono();
    if (d->n_live > 0 && now >= m->stop_deadline && !m->aborted) {
        log_warn("drain deadline passed: aborting %d running request(s)", d->n_live);
        sv_abort_all(d, "the server is shutting down");
        m->aborted = 1;
    }
    if (d->n_live == 0) {
        if (m->idle_since == 0) {
            m->idle_since = now;
            http_server_close_idle(d->http);
        }
        /* responses still being written get a moment to leave */
        if (http_server_connections(d->http) == 0 || now - m->idle_since > 2)
            event_base_loopexit(d->base, NULL);
    }
    if (now >= m->stop_last) {
        log_error("shutdown: %d request(s) did not end in time; exiting anyway", d->n_live);
        event_base_loopexit(d->base, NULL);
    }
}

static void on_term(evutil_socket_t sig, short what, void *arg)
{
    struct llmd_main *m = arg;
    struct llmd *d = &m->d;
    (void)what;
    if (d->stopping) {
        log_warn("signal %d again: aborting everything now", (int)sig);
        m->stop_deadline = mono();
        return;
    }
    log_info("signal %d: draining (up to %.0f s), then exiting", (int)sig, d->cfg->drain_timeout);
    sd_notify(0, "STOPPING=1\nSTATUS=draining");
    d->stopping = d->draining = 1;
    eng_drain(d->eng, 1);
    http_server_stop_accepting(d->http);
    m->stop_deadline = mono() + d->cfg->drain_timeout;
    m->stop_last = m->stop_deadline + 15;
    struct timeval tv = tv_of(0.05);
    m->ev_stop = event_new(d->base, -1, EV_PERSIST, stop_tick, m);
    if (m->ev_stop)
        event_add(m->ev_stop, &tv);
    else
        event_base_loopexit(d->base, NULL);
}

static void on_hup(evutil_socket_t sig, short what, void *arg)
{
    struct llmd *d = arg;
    char err[512];
    (void)sig;
    (void)what;
    if (d->cfg->n_listen == 0)
        return;
    if (http_server_tls(d->http, d->cfg->tls_cert, d->cfg->tls_key, err, sizeof(err)))
        log_error("SIGHUP: keeping the old certificate: %s", err);
    else
        log_info("SIGHUP: TLS certificate reloaded from %s", d->cfg->tls_cert);
}

static void on_refresh(evutil_socket_t fd, short what, void *arg)
{
    struct llmd *d = arg;
    char err[512];
    (void)fd;
    (void)what;
    int rc = tn_refresh(d->tenants, err, sizeof(err));
    if (rc < 0) {
        log_warn("tenants: reload failed, keeping the previous table: %s", err);
    } else if (rc > 0) {
        sv_push_tenants(d);
        log_info("tenants: reloaded (%d tenants)", tn_count(d->tenants));
    }
}

/* ------------------------------------------------------------ startup -- */

static void derive_model_id(struct llmd *d)
{
    if (d->cfg->model_name && d->cfg->model_name[0]) {
        snprintf(d->model_id, sizeof(d->model_id), "%s", d->cfg->model_name);
        return;
    }
    const char *base = strrchr(d->cfg->model, '/');
    base = base ? base + 1 : d->cfg->model;
    snprintf(d->model_id, sizeof(d->model_id), "%s", base);
    size_t n = strlen(d->model_id);
    if (n > 5 && strcmp(d->model_id + n - 5, ".gguf") == 0)
        d->model_id[n - 5] = 0;
}

static enum eng_preempt preempt_mode(const char *s)
{
    if (s && strcmp(s, "swap") == 0)
        return ENG_PREEMPT_SWAP;
    if (s && strcmp(s, "recompute") == 0)
        return ENG_PREEMPT_RECOMPUTE;
    return ENG_PREEMPT_AUTO;
}

static int load_engine(struct llmd *d, char *err, size_t errlen)
{
    const struct llmd_config *c = d->cfg;
    struct be_opts bo = {0};
    d->be = be_create(c->backend, &bo, err, errlen);
    if (!d->be)
        return -1;
    struct model_opts mo = {.template_name =
                                c->chat_template && c->chat_template[0] ? c->chat_template : NULL};
    char merr[400];
    if (model_load(c->model, &mo, d->be, &d->model, merr, sizeof(merr))) {
        snprintf(err, errlen, "%s: %s", c->model, merr);
        return -1;
    }
    struct eng_opts eo = {.block_size = c->block_size,
                          .n_blocks = c->kv_blocks,
                          .n_host_blocks = c->swap_blocks > 0 ? c->swap_blocks : -1,
                          .max_batch_tokens = c->max_batched_tokens,
                          .max_seqs = c->max_seqs,
                          .preempt = preempt_mode(c->preempt),
                          .aging_s = c->priority_aging,
                          .compute_nice = 5,
                          .priority_slack = c->priority_slack > 0 ? c->priority_slack : -1,
                          .interrupt_tokens = c->interrupt_tokens > 0 ? c->interrupt_tokens : -1,
                          .snapshot_blocks = 1, /* llmadmin blocks */
                          .on_step = on_step,
                          .on_step_arg = d->metrics};
    return eng_create(d->model, &eo, &d->eng, err, errlen);
}

static int open_listeners(struct llmd *d, char *err, size_t errlen)
{
    const struct llmd_config *c = d->cfg;
    struct http_limits lim = {.max_header_bytes = (size_t)c->max_header_bytes,
                              .max_body_bytes = (size_t)c->max_body_bytes,
                              .max_connections = c->max_connections,
                              .read_timeout = c->read_timeout,
                              .idle_timeout = c->idle_timeout,
                              .write_timeout = c->write_timeout};
    d->http = http_server_new(d->base, &lim, sv_handle, sv_error_body, d);
    if (!d->http) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (c->n_listen == 0 && c->n_listen_plain == 0) {
        snprintf(err, errlen, "nothing to listen on: give --listen HOST:PORT");
        return -1;
    }
    if (c->n_listen > 0 && http_server_tls(d->http, c->tls_cert, c->tls_key, err, errlen))
        return -1;
    for (int i = 0; i < c->n_listen; i++) {
        if (http_server_listen(d->http, c->listen[i], 0, err, errlen))
            return -1;
        log_info("listening on https://%s", c->listen[i]);
    }
    for (int i = 0; i < c->n_listen_plain; i++) {
        if (http_server_listen(d->http, c->listen_plain[i], 1, err, errlen))
            return -1;
        log_warn("listening on http://%s without TLS (loopback only)", c->listen_plain[i]);
    }
    return 0;
}

static int open_admin(struct llmd *d, char *err, size_t errlen)
{
    const char *path = d->cfg->admin_socket;
    if (!path || !path[0])
        return 0;
    if (admsock_start(d, path, &d->admin, err, errlen))
        return -1;
    log_info("admin socket at %s", path);
    return 0;
}

static int add_events(struct llmd_main *m)
{
    struct llmd *d = &m->d;
    m->ev_term = evsignal_new(d->base, SIGTERM, on_term, m);
    m->ev_int = evsignal_new(d->base, SIGINT, on_term, m);
    m->ev_hup = evsignal_new(d->base, SIGHUP, on_hup, d);
    m->ev_refresh = event_new(d->base, -1, EV_PERSIST, on_refresh, d);
    if (!m->ev_term || !m->ev_int || !m->ev_hup || !m->ev_refresh)
        return -1;
    struct timeval tv = tv_of(d->cfg->db_refresh > 0 ? d->cfg->db_refresh : 0.5);
    event_add(m->ev_term, NULL);
    event_add(m->ev_int, NULL);
    event_add(m->ev_hup, NULL);
    event_add(m->ev_refresh, &tv);
    return 0;
}

static void shutdown_all(struct llmd_main *m)
{
    struct llmd *d = &m->d;
    admsock_stop(d->admin); /* before the engine it reads from */
    d->admin = NULL;
    if (d->eng)
        eng_destroy(d->eng); /* whatever still runs ends aborted */
    if (d->writer)
        db_writer_stop(d->writer); /* commits every queued row */
    d->writer = NULL;
    sv_free_all(d); /* only after a forced exit are any left */
    struct event *evs[] = {m->ev_term, m->ev_int, m->ev_hup, m->ev_refresh, m->ev_stop};
    for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
        if (evs[i])
            event_free(evs[i]);
    http_server_free(d->http);
    if (d->base)
        event_base_free(d->base);
    if (d->model)
        model_free(d->model);
    if (d->be)
        be_destroy(d->be);
    tn_close(d->tenants);
    metrics_free(d->metrics);
}

int main(int argc, char **argv)
{
    be_process_init(argv);
    static struct llmd_config cfg;
    static struct llmd_main m;
    struct llmd *d = &m.d;
    char err[1024];
    int rc = cfg_parse(argc, argv, &cfg, err, sizeof(err));
    if (rc != 0) {
        if (rc < 0)
            fprintf(stderr, "llmd: %s\n(see llmd --help)\n", err);
        cfg_free(&cfg);
        return rc < 0 ? 2 : 0;
    }
    log_set_level((enum log_level)cfg.log_level);
    signal(SIGPIPE, SIG_IGN);
    evthread_use_pthreads();
    d->cfg = &cfg;
    d->created = (long)time(NULL);
    d->t_start = mono();
    if (RAND_bytes((unsigned char *)&d->boot_id, sizeof(d->boot_id)) != 1)
        d->boot_id = (uint32_t)time(NULL);
    derive_model_id(d);
    int ok = 0;
    d->metrics = metrics_new();
    if (!d->metrics)
        snprintf(err, sizeof(err), "out of memory");
    else if (tn_open(cfg.db, &d->tenants, err, sizeof(err)) == 0 &&
             db_writer_start(cfg.db, &d->writer, err, sizeof(err)) == 0 &&
             load_engine(d, err, sizeof(err)) == 0 && (d->base = event_base_new()) &&
             open_listeners(d, err, sizeof(err)) == 0 && open_admin(d, err, sizeof(err)) == 0 &&
             add_events(&m) == 0)
        ok = 1;
    if (!ok) {
        if (!err[0])
            snprintf(err, sizeof(err), "start-up failed");
        log_error("%s", err);
        sd_notifyf(0, "STATUS=failed: %s", err);
        shutdown_all(&m);
        cfg_free(&cfg);
        return 1;
    }
    sv_push_tenants(d);
    const struct model_config *mc = model_config(d->model);
    log_info("model %s (%s, %d layers, context %d) on %s; %d KV blocks of %d tokens; %d tenants",
             d->model_id, mc->arch, mc->n_layers, mc->n_ctx_train, cfg.backend, cfg.kv_blocks,
             cfg.block_size, tn_count(d->tenants));
    sd_notifyf(0, "READY=1\nSTATUS=serving %s", d->model_id);
    log_info("ready");
    event_base_dispatch(d->base);
    int left = d->n_live;
    shutdown_all(&m);
    log_info("stopped%s", left ? " (some requests were cut off)" : "");
    cfg_free(&cfg);
    return 0;
}
