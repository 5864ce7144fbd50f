/*
 * daemon/sv.h — one completion request on its way through the daemon
 * (serve.c admits it, sv_req.c carries it to the end).
 *
 * A struct sv_req is owned by the I/O thread from admission until its
 * usage record is committed; it outlives its HTTP request when the client
 * vanishes (the record must still be written) and its engine handles once
 * they are done.  Two events bring it back to the I/O thread: ev_wake,
 * activated by the engine when tokens arrive, and ev_commit, activated by
 * the DB writer once its ledger row is committed — only then is the last
 * byte of the response sent, so a response a client has received in full
 * is always in the ledger.
 */
#ifndef LLMD_DAEMON_SV_H
#define LLMD_DAEMON_SV_H

#include "daemon/api.h"
#include "daemon/llmd.h"

struct event;

struct sv_choice {
    struct tok_stream ts;
    char *text; /* decoded so far (cut at a stop string) */
    size_t len, cap;
    size_t sent; /* bytes already streamed */
    int tokens;  /* completion tokens that count */
    int done;
    int finish_sent;    /* its last chunk was streamed */
    const char *finish; /* "stop", "length", or NULL */
    struct api_lp *lp;
};

struct sv_req {
    struct llmd *d;
    struct http_req *http; /* NULL once the client is gone */
    struct sv_req *prev, *next;
    struct api_request rq;
    struct api_meta meta;
    char id[48];
    char headers[256]; /* extra response headers */
    struct tn_tenant *tenant;
    int64_t key_id;
    int tokens_admitted;
    int priority;
    double t_start; /* monotonic */
    /* one engine request per prompt, n choices each */
    int n_eng;
    struct eng_req **eng;
    uint64_t *eng_id;
    int *n_prompt;
    struct eng_usage *usage; /* kept when a handle is released */
    int n_choices;
    struct sv_choice *ch;
    struct event *ev_wake, *ev_commit;
    int *cancelled;        /* [n_eng]: every choice ended at a stop string, engine told */
    char *piece;           /* scratch for one decoded token */
    int finalizing;        /* the ledger row is on its way */
    int gone;              /* the client went away first */
    const char *abort_why; /* set when the server aborts it (drain deadline) */
    struct api_error err;  /* status != 0: the request failed after admission */
    int status;            /* HTTP status recorded */
    const char *finish;    /* for the ledger */
};

/* Starts the admitted request: submits prompt i (ids[i], sv->n_prompt[i]
 * tokens) to the engine for every i and, when it streams, sends the
 * headers.  Takes ids (frees them).  On failure it answers the client
 * itself and frees sv.  sv_req.c. */
void sv_start(struct sv_req *sv, int32_t **ids);
/* Frees an sv_req that never started (before sv_start). */
void sv_free(struct sv_req *sv);
/* Sends an error response and counts it. */
void sv_send_error(struct llmd *d, struct http_req *r, const struct api_error *e,
                   const char *tenant);

#endif
