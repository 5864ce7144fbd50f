/*
 * tools/llmbench.h — what the parts of llmbench share.
 *
 * llmbench is a load generator for any OpenAI-compatible server (llmd,
 * llama.cpp's llama-server, vLLM).  A scenario file says who sends what and
 * when; llmbench sends it over HTTPS or HTTP from one libevent loop, one
 * connection per in-flight request (idle ones kept alive and reused), records
 * one struct lb_record per request, and reports latency percentiles,
 * throughput, goodput and errors per tenant and overall.
 *
 * Parts:
 *   llmbench.c        arguments, the run loop (arrivals, closed loops,
 *                     actions, progress on stderr, the end of the run)
 *   llmbench_scen.c   the scenario file, random numbers, request bodies
 *   llmbench_http.c   the HTTP/1.1 client: TLS, keep-alive, SSE, timing
 *   llmbench_stats.c  records -> report (JSON), and the human table
 *   llmbench_plot.c   the report's time series -> SVG
 *
 * ------------------------------------------------------------ scenario file
 *
 * {
 *   "name": "fairness",                 file name without .json when absent
 *   "description": "...",
 *   "api": "completions",               or "chat" (POST /v1/chat/completions)
 *   "model": "SmolLM2-135M-Instruct",   sent as "model"; --model overrides
 *   "duration_s": 60,                   arrivals stop after this (0: none)
 *   "requests": 0,                      arrivals stop after this many (0: none)
 *                                       (at least one of the two is required)
 *   "seed": 1,
 *   "warmup_s": 0,                      requests that arrive earlier are sent
 *                                       but left out of the latency figures
 *   "grace_s": 120,                     after arrivals stop, how long in-flight
 *                                       requests may take to finish
 *   "end": "wait",                      "wait": up to grace_s; "cancel": close
 *                                       every in-flight request at once
 *                                       (outcome "cut")
 *   "timeout_s": 600,                   per request, from send to last byte
 *   "vocab": [1000, 40000],             synthetic prompts draw token ids here
 *   "slo": {"ttft_ms": 1000, "tpot_ms": 200, "e2e_ms": 0},   0/absent: none
 *   "tenants": [ {
 *       "name": "interactive",
 *       "key": "sk-...",                or "$ENV_VAR"; --key overrides
 *       "priority": 0,                  sent as "priority"; absent: not sent
 *       "arrival": {"poisson": 2.0}                     requests per second
 *                | {"burst": 20, "every_s": 10}         20 at once every 10 s
 *                | {"concurrency": 8, "think_s": 0},    closed loop
 *       "prompt_len": DIST,             synthetic prompt of token ids
 *       "prefix_len": 0,                a prefix of this many ids, the same for
 *                                       every request of this tenant
 *                                       (a shared system prompt)
 *       "prompts_file": "path",         instead: one text prompt per line,
 *                                       drawn at random (relative paths are
 *                                       relative to the scenario file)
 *       "system": "text",               chat only: a system message first
 *       "max_tokens": DIST,
 *       "stream": true, "ignore_eos": true, "temperature": 0,
 *       "disconnect": 0.1,              fraction of requests whose client
 *                                       vanishes before the end
 *       "start_s": 0, "stop_s": 0,      the window in which it sends (0: all)
 *       "requests": 0,                  at most this many (0: no limit)
 *       "slo": {...}                    overrides the scenario's, per field
 *   } ],
 *   "actions": [ {"at_s": 20, "run": "llmadmin drain"} ]
 *                                       shell commands run at those offsets
 * }
 *
 * DIST is a number (fixed), or one of {"uniform": [lo, hi]},
 * {"normal": [mean, sd]}, {"lognormal": [median, sigma]}, with optional
 * "min" and "max" (clip) in the same object.  Draws are rounded to integers
 * and never below 1.
 *
 * Synthetic prompts are arrays of token ids sent as "prompt" to
 * /v1/completions (exact lengths, no tokenizer needed); with "api": "chat"
 * a synthetic prompt becomes text of prompt_len words.  Every random draw
 * comes from the scenario's seed, per tenant, so two runs of one scenario
 * send the same requests at the same offsets.
 *
 * ----------------------------------------------------------- request outcome
 *
 * ok            a full response (non-streaming: 200 with a body; streaming:
 *               200 and "data: [DONE]")
 * disconnected  our client closed it on purpose ("disconnect")
 * refused       a non-200 status with an error body (a clear refusal:
 *               401, 429, 503 ...)
 * failed        200, then an error event inside the stream (a clear error
 *               after the start: an aborted request)
 * lost          anything else: connection refused or reset, timeout, a
 *               malformed response, a stream that ends without [DONE]
 * cut           still in flight when the run ended (end: cancel, or grace_s
 *               ran out)
 *
 * ------------------------------------------------------------- report (JSON)
 *
 * {
 *   "tool": "llmbench", "scenario": NAME, "target": URL, "api": ...,
 *   "seed": N, "wall_s": X, "window_s": X,      window: from warmup_s to the
 *                                                end of arrivals (the end of
 *                                                the run when the scenario
 *                                                has no duration)
 *   "overall": STATS, "tenants": {"NAME": STATS, ...},
 *   "series": {"bucket_s": B, "t": [...bucket starts...],
 *              "tenants": {"NAME": {"tok_s": [...], "req_s": [...],
 *                                   "ttft_p50_ms": [...], "ttft_p99_ms": [...],
 *                                   "inflight": [...]}}},
 *   "actions": [{"at_s": X, "run": "...", "exit": N}]
 * }
 * STATS = {
 *   "sent", "ok", "disconnected", "refused", "failed", "lost", "cut",
 *   "errors": {"429 rate_limit_exceeded": N, "lost timeout": N, ...},
 *   "prompt_tokens", "output_tokens",         over every record
 *   "window_output_tokens",                   tokens received in the window
 *   "req_per_s", "out_tok_per_s",             ok requests / window tokens
 *                                              over window_s
 *   "goodput_req_per_s", "slo_met_fraction",  ok requests meeting every SLO
 *   "ttft_ms", "tpot_ms", "itl_ms", "e2e_ms": {"n", "mean", "p50", "p90",
 *                                              "p99", "max"}
 * }
 * Latencies count ok requests (and, for TTFT, failed and disconnected ones
 * that got a first token) that arrived after warmup_s.  TPOT = (e2e − TTFT)
 * / (output tokens − 1); ITL = the gaps between content chunks of a stream.
 */
#ifndef LLMD_TOOLS_LLMBENCH_H
#define LLMD_TOOLS_LLMBENCH_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct event_base;

/* -------------------------------------------------------- random numbers */

/* xoshiro256** seeded through splitmix64. */
struct lb_rng {
    uint64_t s[4];
};

void lb_rng_seed(struct lb_rng *r, uint64_t seed);
uint64_t lb_rng_next(struct lb_rng *r);
/* Uniform in [0, 1). */
double lb_rng_unit(struct lb_rng *r);
/* Exponential with the given rate (mean 1/rate). */
double lb_rng_exp(struct lb_rng *r, double rate);
/* Standard normal. */
double lb_rng_normal(struct lb_rng *r);

/* ------------------------------------------------------------- scenario */

enum lb_dist_kind { LB_DIST_FIXED, LB_DIST_UNIFORM, LB_DIST_NORMAL, LB_DIST_LOGNORMAL };

struct lb_dist {
    enum lb_dist_kind kind;
    double a, b;     /* fixed: a; uniform: [a, b]; normal: mean a, sd b;
                        lognormal: median a, sigma b */
    double min, max; /* clip; max 0: none */
};

/* A draw, rounded, clipped, at least 1. */
int lb_dist_draw(const struct lb_dist *d, struct lb_rng *r);

enum lb_arrival { LB_ARR_POISSON, LB_ARR_BURST, LB_ARR_CLOSED };

/* Service-level objectives in milliseconds; 0: none. */
struct lb_slo {
    double ttft_ms, tpot_ms, e2e_ms;
};

struct lb_tenant {
    char *name, *key; /* key may be NULL: no Authorization header */
    int priority;     /* -1: not sent */
    enum lb_arrival arrival;
    double rate;     /* poisson: requests/s */
    int burst;       /* burst: requests per burst */
    double every_s;  /* burst: seconds between bursts */
    int concurrency; /* closed: requests in flight */
    double think_s;  /* closed: pause after each response */
    struct lb_dist prompt_len, max_tokens;
    int prefix_len;
    int32_t *prefix; /* prefix_len ids, drawn once from the seed */
    char **prompts;  /* prompts_file lines, or NULL */
    int n_prompts;
    char *system; /* chat system message, or NULL */
    int stream, ignore_eos;
    double temperature; /* < 0: not sent */
    double disconnect;
    double start_s, stop_s;
    long max_requests;
    struct lb_slo slo; /* merged: tenant's fields over the scenario's */
    struct lb_rng rng; /* this tenant's draws */
};

struct lb_action {
    double at_s;
    char *run;
    int exit; /* -1 until it ran and was reaped */
};

struct lb_scenario {
    char *name, *description, *model;
    int chat; /* api: "chat" */
    double duration_s;
    long requests;
    uint64_t seed;
    double warmup_s, grace_s, timeout_s;
    int end_cancel;
    int vocab_lo, vocab_hi;
    struct lb_slo slo;
    struct lb_tenant *tenants;
    int n_tenants;
    struct lb_action *actions;
    int n_actions;
};

/* Reads and checks a scenario file.  0, or -1 with a message in err that
 * names the file and the field ("tenants[1].arrival: ..."). */
int lb_scen_load(const char *path, struct lb_scenario *sc, char *err, size_t errlen);
void lb_scen_free(struct lb_scenario *sc);
/* Keeps only the tenants named in a comma-separated list.  -1 with err
 * when a name is unknown. */
int lb_scen_only(struct lb_scenario *sc, const char *names, char *err, size_t errlen);
/* Restarts every tenant's random stream from seed, as loading with that
 * seed would (call before lb_scen_only), and draws the prefixes again.
 * 0, or -1 when out of memory. */
int lb_scen_reseed(struct lb_scenario *sc, uint64_t seed);
/* Multiplies every Poisson rate and divides every burst interval by f. */
void lb_scen_scale_rate(struct lb_scenario *sc, double f);

struct lb_record;

/* Draws one request of tenant t: fills rec's prompt_tokens, max_tokens,
 * stream, disconnect_after / disconnect_at_s, and returns the JSON body
 * (malloc'd, NUL-terminated, *len its length). */
char *lb_scen_body(const struct lb_scenario *sc, struct lb_tenant *t, struct lb_record *rec,
                   size_t *len);
/* The request path: "/v1/completions" or "/v1/chat/completions". */
const char *lb_scen_path(const struct lb_scenario *sc);

/* -------------------------------------------------------------- records */

enum lb_outcome {
    LB_PENDING,
    LB_OK,
    LB_DISCONNECTED,
    LB_REFUSED,
    LB_FAILED,
    LB_LOST,
    LB_CUT,
    LB_N_OUTCOMES
};

/* Lower-case outcome name as in the report ("ok", "lost", ...). */
const char *lb_outcome_name(enum lb_outcome o);

/* One request.  Times are seconds since the start of the run; < 0: never. */
struct lb_record {
    int tenant; /* index into the scenario's tenants */
    int stream;
    double t_arrive;   /* when it was due */
    double t_send;     /* when the request went out (connection
                          taken or opened) */
    double t_first;    /* first content token received */
    double t_end;      /* last byte, error, or close */
    int prompt_tokens; /* as sent (synthetic), or from usage */
    int max_tokens;
    int out_tokens; /* usage.completion_tokens when the server
                       sent usage, else content chunks */
    int chunks;     /* content chunks received */
    int usage_seen;
    int disconnect_after;   /* stream: close after this many chunks;
                               0: never */
    double disconnect_at_s; /* non-stream: close this long after send;
                               0: never */
    enum lb_outcome outcome;
    int http_status; /* 0: none received */
    char err[64];    /* error.type (or error.code) of a refusal
                        or failure; the transport reason of a
                        loss: "connect", "reset", "timeout",
                        "protocol", "incomplete" */
    float *itl_ms;   /* gaps between content chunks, owned */
    int n_itl, cap_itl;
};

/* Appends one inter-token gap.  0, or -1 when out of memory. */
int lb_record_itl(struct lb_record *rec, float ms);
void lb_record_free(struct lb_record *rec);

/* ------------------------------------------------------------------ HTTP */

struct lb_target {
    int tls;
    char host[256], port[16];
    char base[256];      /* path prefix before /v1/..., usually "" */
    int insecure;        /* do not verify the certificate */
    const char *ca_file; /* extra trust anchor, or NULL */
};

/* Parses http[s]://HOST[:PORT][/PREFIX].  A trailing "/v1" is dropped (the
 * paths already start with it). */
int lb_target_parse(const char *url, struct lb_target *t, char *err, size_t errlen);

struct lb_client;

/* Called once per request when its outcome is settled (rec->outcome is no
 * longer LB_PENDING, rec->t_end set). */
typedef void (*lb_done_fn)(struct lb_record *rec, void *arg);

/* A client on base for target: resolves the address and, for TLS, makes
 * the SSL_CTX.  NULL with err. */
struct lb_client *lb_client_new(struct event_base *base, const struct lb_target *t,
                                double timeout_s, char *err, size_t errlen);
/* Sends one request: POST path with body (taken over, freed by the client),
 * "Authorization: Bearer KEY" when key is non-NULL.  Timing, chunk counting,
 * ITL, disconnects and the outcome are written to rec; done runs exactly
 * once, from the event loop (never from inside this call).  t0 is the run's
 * start on the CLOCK_MONOTONIC seconds scale (lb_now). */
void lb_client_send(struct lb_client *c, struct lb_record *rec, const char *path, const char *key,
                    char *body, size_t len, double t0, lb_done_fn done, void *arg);
/* Requests in flight. */
int lb_client_inflight(const struct lb_client *c);
/* Ends every request in flight as LB_CUT (their done callbacks run before
 * this returns) and closes idle connections. */
void lb_client_cut_all(struct lb_client *c);
void lb_client_free(struct lb_client *c);

/* CLOCK_MONOTONIC in seconds. */
double lb_now(void);

/* ---------------------------------------------------------------- report */

/* The report described at the top of this file.  wall_s: run start to the
 * last record settled; window_s: warmup_s to the end of arrivals. */
json_t *lb_report(const struct lb_scenario *sc, const char *target, const struct lb_record *recs,
                  long n, double wall_s, double window_s);
/* The human table of a report. */
void lb_report_print(FILE *f, const json_t *report);
/* Draws the report's series as an SVG: output tokens/s per tenant, and p50
 * and p99 TTFT per tenant, over time.  0, or -1 with err. */
int lb_plot_svg(const char *path, const json_t *report, char *err, size_t errlen);

#endif
