/*
 * daemon/llmd.h — the daemon's shared state, and the request handlers.
 *
 * One struct llmd holds what the I/O thread works with: the configuration,
 * the event base, the HTTP server, the engine and model, the tenant table,
 * the usage writer and the metrics.  main.c builds it and runs the loop;
 * serve.c answers requests; everything here runs on the I/O thread except
 * where a comment says otherwise.
 */
#ifndef LLMD_DAEMON_LLMD_H
#define LLMD_DAEMON_LLMD_H

#include "daemon/config.h"
#include "daemon/http.h"
#include "daemon/metrics.h"
#include "daemon/tenants.h"
#include "db/db.h"
#include "engine/engine.h"

#include <stdint.h>

struct event_base;
struct sv_req;
struct admsock;

struct llmd {
    struct llmd_config *cfg;
    struct event_base *base;
    struct http_server *http;
    struct be *be;
    struct model *model;
    struct eng *eng;
    struct tn_table *tenants;
    struct db_writer *writer;
    struct metrics *metrics;
    struct admsock *admin; /* the admin socket server, NULL when none */
    char model_id[256];
    long created;   /* unix seconds at start, for /v1/models */
    double t_start; /* monotonic */
    int draining;   /* no new completions (SIGTERM or llmadmin drain) */
    int stopping;   /* SIGTERM: exit once drained */
    uint32_t boot_id;
    uint64_t next_id;
    struct sv_req *live; /* completion requests not yet freed */
    int n_live;
};

/* The HTTP handler: routes every request (http_handler_fn). */
void sv_handle(struct http_req *r, void *arg);
/* The body of an error the HTTP layer sends by itself (http_error_fn). */
char *sv_error_body(int status, const char *message, size_t *len, const char **ctype);
/* Pushes every tenant's policy (weight, KV cap) to the engine. */
void sv_push_tenants(struct llmd *d);
/* Frees every live request without answering it (a forced exit). */
void sv_free_all(struct llmd *d);
/* Aborts every live request (drain deadline passed). */
void sv_abort_all(struct llmd *d, const char *why);
/* The API id ("chatcmpl-...") of the live request that owns engine request
 * eng_id; NULL when none.  Points into the request: use it at once. */
const char *sv_public_id(const struct llmd *d, uint64_t eng_id);
/* The engine ids of the live request whose API id is id: their count (0
 * when there is none) and *ids, pointing into the request: use it at once. */
int sv_engine_ids(const struct llmd *d, const char *id, const uint64_t **ids);
/* Engine requests of tenant's live requests whose handles are still held
 * and unfinished (what an eviction of the tenant reaches). */
int sv_tenant_engine_reqs(const struct llmd *d, const char *tenant);

#endif
