/*
 * daemon/admsock.h — the admin socket: the operator's live view of the box
 * and the levers on it (llmadmin status / queues / blocks / drain / evict).
 *
 * A Unix stream socket (--admin-socket, default /run/llmd/admin.sock),
 * mode 0660, served by the I/O thread.  A connecting peer is checked with
 * SO_PEERCRED: root, the daemon's own user, or a member of the daemon's
 * group; anyone else is answered with an error line and closed.  Views come
 * from the engine's per-step snapshot (never from the engine thread
 * itself); levers go to the engine through its command queue (eng_drain,
 * eng_evict...).  A slow or broken admin client can only hurt its own
 * connection: replies are queued in its bufferevent, requests are capped in
 * size, idle connections time out.
 *
 * Protocol: one JSON object per line each way.  Every reply has "ok": true
 * plus the fields below, or "ok": false and "error": "message".
 *
 *   {"cmd": "status"}
 *     -> model, backend, version, uptime_s, draining (bool), step,
 *        device: {total, used, cached, free, block_bytes},
 *        host: {total, used, block_bytes},
 *        priorities: [{priority, running, waiting, swapped, preempted}]
 *          (one per priority with anything in it),
 *        tokens_per_s: {"10s": x, "60s": y} (generated + prefilled tokens),
 *        preemptions: {swap, recompute}, swap_bytes: {out, in},
 *        prefix_cache: {lookups, hits},
 *        tenants: [{name, weight, running, waiting, swapped, device_blocks,
 *                   tokens_per_s, share, weight_share}]
 *          (tokens_per_s: over the last 10 s; share: its part of the
 *           tokens of the last 60 s; weight_share: its weight over the
 *           weights of tenants with work, 0 when it has none)
 *   {"cmd": "queues", "tenant": T (optional)}
 *     -> requests: [{id (the API's id, e.g. "chatcmpl-..."), engine_id, tenant,
 *        priority, state, age_s, n, prompt_tokens, cached_tokens,
 *        generated_tokens, device_blocks, host_blocks, preemptions}]
 *   {"cmd": "blocks", "request": ID}
 *     -> request, engine_id, block_size, table: [{seq, logical, block,
 *        where: "device"|"host", ref, hash: "16 hex digits"|null, shared}]
 *   {"cmd": "blocks"}
 *     -> total, block_size, tenants: [names], map: [one int per device
 *        block: k >= 0 held by tenants[k], -1 free, -2 cached (reusable),
 *        -3 in use but held by no request the snapshot lists]
 *   {"cmd": "drain", "on": true|false}  -> draining (bool)
 *   {"cmd": "evict", "request": ID | "tenant": T, "abort": bool}
 *     -> evicted: number of engine requests acted on
 *
 * ID is the API's request id ("chatcmpl-...", "cmpl-...") or the engine's
 * numeric id, as a string or a number.
 */
#ifndef LLMD_DAEMON_ADMSOCK_H
#define LLMD_DAEMON_ADMSOCK_H

#include <stddef.h>

struct llmd;
struct admsock;

/* Creates the socket at path (an old socket file there is replaced, any
 * other file is an error) and starts serving on d's event base.  -1 with a
 * message. */
int admsock_start(struct llmd *d, const char *path, struct admsock **out, char *err, size_t errlen);
/* Closes the socket and every admin connection, and removes the file. */
void admsock_stop(struct admsock *a);

/* ---- inside the server: admsock.c carries lines, admsock_cmd.c answers -- */

struct eng_snapshot;
struct admsock_rates; /* recent token counters, for rates */

/* Who is asking, from SO_PEERCRED. */
struct admsock_peer {
    unsigned uid;
    int pid;
};

struct admsock_rates *admsock_rates_new(void);
void admsock_rates_free(struct admsock_rates *r);
/* Records the snapshot's token counters as of now (monotonic seconds). */
void admsock_rates_sample(struct admsock_rates *r, const struct eng_snapshot *s, double now);
/* Answers one request line (len bytes, no newline): a reply line ending in
 * a newline, *len_out bytes, owned by the caller; NULL when memory is short. */
char *admsock_answer(struct llmd *d, struct admsock_rates *r, const struct admsock_peer *who,
                     const char *line, size_t len, size_t *len_out);
/* The line {"ok":false,"error":msg} with its newline, owned by the caller. */
char *admsock_error_line(const char *msg, size_t *len_out);

#endif
