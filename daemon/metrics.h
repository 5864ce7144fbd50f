/*
 * daemon/metrics.h — Prometheus metrics.
 *
 * Counters and histograms the daemon updates as requests end (I/O thread)
 * and as steps run (engine thread), behind one mutex; gauges (queues, KV
 * blocks, preemptions, swap bytes) come from the engine's snapshot when
 * /metrics is rendered.  Output is the Prometheus text format 0.0.4, which
 * `promtool check metrics` accepts.
 */
#ifndef LLMD_DAEMON_METRICS_H
#define LLMD_DAEMON_METRICS_H

#include "engine/engine.h"
#include <stddef.h>

/* The Content-Type of metrics_render's output. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct metrics;

/* NULL when memory is short.  Owned by the caller. */
struct metrics *metrics_new(void);
void metrics_free(struct metrics *m);

/* A request ended with HTTP status (per tenant; "" for requests that never
 * reached a tenant, e.g. a bad key). */
void metrics_request(struct metrics *m, const char *tenant, int status);
/* Tokens of a finished request: kind "prompt", "cached" or "completion". */
void metrics_tokens(struct metrics *m, const char *tenant, const char *kind, long n);
/* Latencies of a finished request, in seconds; a value < 0 is not observed
 * (e.g. no TTFT for a request that produced no token). */
void metrics_latency(struct metrics *m, double ttft, double tpot, double e2e, double queue);
/* One engine step (called on the engine thread). */
void metrics_step(struct metrics *m, double seconds, int n_tokens);
/* Both absolute, not increments: the connections open now, and the
 * connections refused at the cap since the daemon started. */
void metrics_connections(struct metrics *m, int open, long refused);

/* The whole exposition (malloc'd; *len set), gauges taken from s (may be NULL). */
char *metrics_render(struct metrics *m, const struct eng_snapshot *s, size_t *len);

#endif
