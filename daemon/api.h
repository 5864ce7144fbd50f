/*
 * daemon/api.h — the OpenAI-compatible wire format: requests in, JSON and
 * server-sent events out, errors in OpenAI's shape.
 *
 * Pure functions over JSON (jansson); no sockets, no engine.  Parsing
 * validates every field a client may send and names the offending one in
 * the error's `param`, as OpenAI does.  Rendering produces whole response
 * bodies, or whole SSE events ("data: {...}\n\n").
 */
#ifndef LLMD_DAEMON_API_H
#define LLMD_DAEMON_API_H

#include "model/model.h"
#include <stddef.h>
#include <stdint.h>

enum api_kind { API_CHAT = 0, API_COMPLETION };

#define API_MAX_STOP 4

/* An error as sent: HTTP status and OpenAI's {"error": {...}} fields. */
struct api_error {
    int status;     /* 400, 401, 403, 404, 405, 413, 429, 500, 503 */
    char type[40];  /* invalid_request_error, authentication_error, permission_error,
                       not_found_error, rate_limit_error, server_error, overloaded_error */
    char code[48];  /* e.g. invalid_api_key, model_not_found, rate_limit_exceeded; "" : null */
    char param[64]; /* the request field at fault; "" : null */
    char message[320];
    double retry_after; /* seconds, > 0 only for 429 and 503: sent as Retry-After */
};
void api_error_set(struct api_error *e, int status, const char *type, const char *code,
                   const char *param, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* What parsing checks against. */
struct api_limits {
    const char *model;   /* the served model's id: another one is 404 model_not_found */
    int max_n;           /* choices per request: n, times the prompts of a completions
                            request (<= 0: 1) */
    long max_prompt_ids; /* token ids in one prompt array (<= 0: no cap) */
};

/* One completion prompt: text, or token ids. */
struct api_prompt {
    char *text; /* NUL-terminated (may hold NULs: len is authoritative) or NULL */
    size_t len;
    int32_t *ids; /* or ids */
    int n_ids;
};

struct api_request {
    enum api_kind kind;
    char *model;
    /* chat */
    struct chat_msg *msgs; /* role is a static "system"/"user"/"assistant"; content
                              (text parts joined, "" for a null one) is owned here */
    int n_msgs;
    /* completions: "prompt" as a string, an array of strings, an array of
     * ids, or an array of arrays of ids; each is one prompt */
    struct api_prompt *prompts;
    int n_prompts;
    int stream;
    int include_usage;     /* stream_options.include_usage */
    int n;                 /* choices per prompt (default 1) */
    int max_tokens;        /* max_tokens or max_completion_tokens; -1 when absent */
    struct smp_params smp; /* temperature (default 1), top_p, top_k, min_p, seed, penalties,
                              n_logprobs (top_logprobs / completions' logprobs) */
    int seed_set;          /* "seed" was given (else the daemon picks one) */
    int logprobs;          /* log-probabilities were asked for */
    char *stop[API_MAX_STOP];
    int n_stop;
    char *user;     /* or NULL */
    int priority;   /* -1 when absent, else 0..DB_PRIO_MAX */
    int echo;       /* always 0: "echo": true is refused as unsupported */
    int ignore_eos; /* extension (as vLLM's): generate max_tokens whatever the model says */
};

/* Parses and validates a request body of the given kind.  0, or -1 with e
 * filled (400 with param, 404 for an unknown model, 500 out of memory).  r
 * must be freed with api_request_free either way (twice is harmless).  JSON
 * null is the same as an absent field; unknown fields are ignored.  Token
 * ids are only checked to be >= 0: the caller checks them against the
 * vocabulary.  A text prompt may be empty. */
int api_parse(enum api_kind kind, const char *body, size_t len, const struct api_limits *lim,
              struct api_request *r, struct api_error *e);
void api_request_free(struct api_request *r);

/* ------------------------------------------------------------ rendering -- */

/* Log-probabilities accumulated for one choice, in the kind's format: chat's
 * {"content": [{token, logprob, bytes, top_logprobs}]} or completions'
 * {tokens, token_logprobs, top_logprobs, text_offset}. */
struct api_lp;
struct api_lp *api_lp_new(enum api_kind kind);
void api_lp_free(struct api_lp *lp);
/* Adds one sampled token (0, or -1 out of memory); token texts come from
 * the vocabulary, decoded to their raw bytes (a control token shows its
 * vocabulary text) and copied; text_offset is where the token's text starts
 * in the choice. */
int api_lp_add(struct api_lp *lp, const struct tok *t, const struct smp_logprob *l,
               size_t text_offset);
int api_lp_count(const struct api_lp *lp);
/* Drops the entries added so far (text offsets are kept as given). */
void api_lp_clear(struct api_lp *lp);

/* Fields every response and chunk carries. */
struct api_meta {
    enum api_kind kind;
    const char *id; /* "chatcmpl-..." or "cmpl-..." */
    long created;   /* unix seconds */
    const char *model;
    int n_logprobs;    /* > 0: at most this many alternatives per token are shown */
    int include_usage; /* streaming: every chunk carries "usage": null, as OpenAI's do */
};

struct api_usage {
    int prompt_tokens, completion_tokens, cached_tokens;
};

struct api_choice {
    const char *text;
    size_t len;
    const char *finish; /* "stop", "length", or NULL while running */
    struct api_lp *lp;  /* or NULL */
};

/* Renderers return a malloc'd NUL-terminated string (the caller frees it)
 * and its length, or NULL when out of memory.  Text may be any bytes: what
 * is not valid UTF-8 is sent as U+FFFD. */

/* A whole non-streaming body (chat.completion or text_completion); u NULL
 * renders "usage": null. */
char *api_render_response(const struct api_meta *m, const struct api_choice *ch, int n,
                          const struct api_usage *u, size_t *len);
/* One SSE event for choice index: text (may be empty), finish (NULL while
 * running), lp (its entries are rendered and then cleared; may be NULL).
 * first: a chat chunk that opens the choice carries role "assistant". */
char *api_render_chunk(const struct api_meta *m, int index, int first, const char *text, size_t len,
                       const char *finish, struct api_lp *lp, size_t *outlen);
/* The final usage event of stream_options.include_usage ("choices": []). */
char *api_render_usage_chunk(const struct api_meta *m, const struct api_usage *u, size_t *len);
/* {"error": {"message", "type", "param", "code"}} */
char *api_render_error(const struct api_error *e, size_t *len);
/* The same as one SSE event, for a stream that fails after it started. */
char *api_render_error_event(const struct api_error *e, size_t *len);
/* GET /v1/models */
char *api_render_models(const char *model, long created, size_t *len);

/* ------------------------------------- shared by the daemon/api_*.c files -- */

struct json_t; /* jansson's */
/* A JSON string of len bytes; invalid UTF-8 becomes U+FFFD (one per maximal
 * invalid subpart), so any bytes make valid JSON.  A new reference. */
struct json_t *api_json_text(const char *s, size_t len);
/* lp's entries as its kind's "logprobs" object, at most max_top alternatives
 * per token (0: as many as were sampled).  A new reference, or NULL. */
struct json_t *api_lp_json(const struct api_lp *lp, int max_top);

#endif
