/*
 * admin/adm_live.c — llmadmin's live commands: status, queues, blocks,
 * drain, undrain and evict, over the daemon's admin socket.
 *
 * The protocol is daemon/admsock.h: one JSON object per line each way, so
 * a command is one connect, one line out, one line back (10 s at most),
 * and the connection is closed.  Opening a fresh connection per request
 * keeps the client stateless: drain --wait and top simply ask again, and a
 * daemon restarted in between is no special case.  The human views read
 * the reply leniently (a missing field shows as 0 or "-"), so an older or
 * newer daemon still gives a useful screen; --json prints the reply as is.
 */
#include "admin/adm.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define ADM_LIVE_TIMEOUT_S 10.0
#define ADM_LIVE_MAX_REPLY (64u << 20) /* a block map of millions of blocks still fits */
#define ADM_NOT_PERMITTED  "not permitted to use %s (run as root or as a member of the llmd group)"

volatile sig_atomic_t adm_live_stop;

/* ------------------------------------------------------------ the client */

static double adm_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Connects to path; the fd, or -1 with the reason in err. */
static int adm_sock_connect(const char *path, char *err, size_t errlen)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        snprintf(err, errlen, "socket path too long: %s", path);
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
        return fd;
    int e = errno;
    close(fd);
    if (e == ENOENT || e == ECONNREFUSED || e == ENOTDIR)
        snprintf(err, errlen, "no llmd running (socket %s: %s)", path, strerror(e));
    else if (e == EACCES || e == EPERM)
        snprintf(err, errlen, ADM_NOT_PERMITTED, path);
    else
        snprintf(err, errlen, "cannot connect to %s: %s", path, strerror(e));
    return -1;
}

/* Waits for events on fd until deadline: 1 ready, 0 timed out, -1 stopped. */
static int adm_sock_wait(int fd, short events, double deadline)
{
    for (;;) {
        if (adm_live_stop)
            return -1;
        double left = deadline - adm_now();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, (int)(left * 1000) + 1);
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

/* Writes the whole line; 0, or -1 (the caller still reads: a daemon that
 * refuses a peer answers first and closes, and that answer says why). */
static int adm_sock_send(int fd, const char *s, size_t len, double deadline)
{
    while (len > 0) {
        if (adm_sock_wait(fd, POLLOUT, deadline) != 1)
            return -1;
        ssize_t n = send(fd, s, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            return -1;
        s += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads up to the first newline; 0 with *line (malloc'd, NUL-terminated,
 * without the newline), or -1 with the reason in err. */
static int adm_sock_readline(int fd, double deadline, const char *path, char **line, char *err,
                             size_t errlen)
{
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    while (buf) {
        int w = adm_sock_wait(fd, POLLIN, deadline);
        if (w <= 0) {
            snprintf(err, errlen,
                     w == 0 ? "no reply from llmd within %.0f s (socket %s)"
                            : "interrupted waiting for llmd (%.0f s, socket %s)",
                     ADM_LIVE_TIMEOUT_S, path);
            break;
        }
        ssize_t n = recv(fd, buf + len, cap - len - 1, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0 && len == 0) {
            /* a refused peer should get a reason first, but a reset can lose it */
            snprintf(err, errlen, "llmd closed the connection without a reply (socket %s%s%s)%s",
                     path, n < 0 ? ": " : "", n < 0 ? strerror(errno) : "",
                     geteuid() != 0 ? "; it refuses users that are not root or in the llmd group"
                                    : "");
            break;
        }
        char *nl = n > 0 ? memchr(buf + len, '\n', (size_t)n) : buf + len;
        len += n > 0 ? (size_t)n : 0;
        if (nl) { /* a line, or what came before the daemon closed */
            *nl = '\0';
            *line = buf;
            return 0;
        }
        if (len + 1 >= cap) {
            char *grown = cap >= ADM_LIVE_MAX_REPLY ? NULL : realloc(buf, cap * 2);
            if (!grown) {
                snprintf(err, errlen, "reply from llmd too long or out of memory");
                break;
            }
            buf = grown;
            cap *= 2;
        }
    }
    if (!buf)
        snprintf(err, errlen, "out of memory");
    free(buf);
    return -1;
}

/* Does the daemon's error say the peer was refused? */
static int adm_is_permission_error(const char *msg)
{
    return strcasestr(msg, "permission") || strcasestr(msg, "not permitted") ||
           strcasestr(msg, "denied");
}

/* Parses the reply line; 0 with *reply when "ok" is true, else -1. */
static int adm_reply_check(const struct adm_ctx *c, const char *line, json_t **reply, char *err,
                           size_t errlen)
{
    json_error_t je;
    json_t *j = json_loads(line, 0, &je);
    if (!j || !json_is_object(j)) {
        snprintf(err, errlen, "llmd sent a reply that is not a JSON object: %.120s", line);
        json_decref(j);
        return -1;
    }
    if (json_is_true(json_object_get(j, "ok"))) {
        *reply = j;
        return 0;
    }
    const char *msg = json_string_value(json_object_get(j, "error"));
    if (!msg)
        snprintf(err, errlen, "llmd refused the request without saying why");
    else if (adm_is_permission_error(msg))
        snprintf(err, errlen, ADM_NOT_PERMITTED, c->socket_path);
    else
        snprintf(err, errlen, "%s", msg);
    json_decref(j);
    return -1;
}

int adm_live_request(const struct adm_ctx *c, json_t *req, json_t **reply, char *err, size_t errlen)
{
    char *out = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (!out) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int fd = adm_sock_connect(c->socket_path, err, errlen);
    if (fd < 0) {
        free(out);
        return -1;
    }
    size_t len = strlen(out);
    out[len] = '\n'; /* json_dumps' NUL becomes the line end; len + 1 bytes go */
    double deadline = adm_now() + ADM_LIVE_TIMEOUT_S;
    (void)adm_sock_send(fd, out, len + 1, deadline);
    free(out);
    char *line = NULL;
    int rc = adm_sock_readline(fd, deadline, c->socket_path, &line, err, errlen);
    close(fd);
    if (rc == 0)
        rc = adm_reply_check(c, line, reply, err, errlen);
    free(line);
    return rc;
}

int adm_live_call(const struct adm_ctx *c, json_t *req, json_t **reply)
{
    char err[1024];
    if (adm_live_request(c, req, reply, err, sizeof(err)) != 0)
        return adm_fail("%s", err);
    return ADM_OK;
}

/* --json: the reply without "ok", as the command's one JSON value. */
static int adm_live_json(json_t *reply)
{
    json_object_del(reply, "ok");
    return adm_print_json(reply);
}

/* ------------------------------------------------------ reading replies */

static double adm_num(const json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

static long long adm_ll(const json_t *o, const char *key)
{
    return (long long)adm_num(o, key);
}

static const char *adm_str(const json_t *o, const char *key, const char *def)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : def;
}

/* An array member, or NULL (which jansson's array calls treat as empty). */
static const json_t *adm_arr(const json_t *o, const char *key)
{
    const json_t *a = json_object_get(o, key);
    return json_is_array(a) ? a : NULL;
}

static const char *adm_fmt_ll(long long v, char *buf, size_t cap)
{
    snprintf(buf, cap, "%lld", v);
    return buf;
}

/* 512 B, 1.5 KiB, 12.0 MiB, 3.2 GiB. */
static const char *adm_fmt_bytes(double b, char *buf, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (b >= 1024 && u < 5)
        b /= 1024, u++;
    if (u == 0)
        snprintf(buf, cap, "%.0f B", b);
    else
        snprintf(buf, cap, "%.1f %s", b, units[u]);
    return buf;
}

/* 45s, 3m04s, 2h05m, 3d04h. */
static const char *adm_fmt_age(double s, char *buf, size_t cap)
{
    long long t = s > 0 ? (long long)s : 0;
    if (t < 60)
        snprintf(buf, cap, "%llds", t);
    else if (t < 3600)
        snprintf(buf, cap, "%lldm%02llds", t / 60, t % 60);
    else if (t < 86400)
        snprintf(buf, cap, "%lldh%02lldm", t / 3600, t / 60 % 60);
    else
        snprintf(buf, cap, "%lldd%02lldh", t / 86400, t / 3600 % 24);
    return buf;
}

static const char *adm_fmt_pct(double frac, char *buf, size_t cap)
{
    snprintf(buf, cap, "%.0f%%", frac * 100);
    return buf;
}

/* ---------------------------------------------------------------- status */

/* "device KV: 1024 blocks: 300 used, 100 cached, 624 free (...)". */
static int adm_kv_line(const json_t *kv, int device, FILE *out)
{
    double bb = adm_num(kv, "block_bytes");
    long long total = adm_ll(kv, "total"), used = adm_ll(kv, "used");
    long long cached = device ? adm_ll(kv, "cached") : 0;
    long long free_ = device ? adm_ll(kv, "free") : total - used;
    char a[32], b[32], f[32], blk[32];
    adm_fmt_bytes(bb, blk, sizeof(blk));
    adm_fmt_bytes(bb * (double)used, a, sizeof(a));
    adm_fmt_bytes(bb * (double)free_, f, sizeof(f));
    if (!device) /* two lines, so that each fits 80 columns (top) */
        return fprintf(out,
                       "host KV:      %lld blocks of %s: %lld used, %lld free\n"
                       "              (%s used, %s free)\n",
                       total, blk, used, free_, a, f);
    adm_fmt_bytes(bb * (double)cached, b, sizeof(b));
    return fprintf(out,
                   "device KV:    %lld blocks of %s: %lld used, %lld cached, %lld free\n"
                   "              (%s used, %s cached, %s free)\n",
                   total, blk, used, cached, free_, a, b, f);
}

int adm_status_header_write(const json_t *st, FILE *out)
{
    char up[32], so[32], si[32];
    const json_t *tps = json_object_get(st, "tokens_per_s");
    const json_t *pre = json_object_get(st, "preemptions");
    const json_t *sw = json_object_get(st, "swap_bytes");
    const json_t *pc = json_object_get(st, "prefix_cache");
    double lookups = adm_num(pc, "lookups"), hits = adm_num(pc, "hits");
    int draining = json_is_true(json_object_get(st, "draining"));
    int rc =
        fprintf(out, "model:        %s\nbackend:      %s (llmd %s)\n", adm_str(st, "model", "-"),
                adm_str(st, "backend", "-"), adm_str(st, "version", "?"));
    rc |= fprintf(out, "uptime:       %s (step %lld)\ndraining:     %s\n",
                  adm_fmt_age(adm_num(st, "uptime_s"), up, sizeof(up)), adm_ll(st, "step"),
                  draining ? "yes (new requests are refused)" : "no");
    rc |= adm_kv_line(json_object_get(st, "device"), 1, out);
    rc |= adm_kv_line(json_object_get(st, "host"), 0, out);
    rc |= fprintf(out, "tokens/s:     %.1f over 10 s, %.1f over 1 min\n",
                  json_number_value(json_object_get(tps, "10s")),
                  json_number_value(json_object_get(tps, "60s")));
    rc |= fprintf(out, "preemptions:  %lld by swap, %lld by recompute; swapped %s out, %s in\n",
                  adm_ll(pre, "swap"), adm_ll(pre, "recompute"),
                  adm_fmt_bytes(adm_num(sw, "out"), so, sizeof(so)),
                  adm_fmt_bytes(adm_num(sw, "in"), si, sizeof(si)));
    rc |= fprintf(out, "prefix cache: %.0f hits of %.0f lookups (%.0f%%)\n", hits, lookups,
                  lookups > 0 ? 100 * hits / lookups : 0.0);
    return rc < 0 ? adm_fail("cannot write output") : ADM_OK;
}

static int adm_priorities_write(const json_t *st, FILE *out)
{
    const json_t *ps = adm_arr(st, "priorities");
    struct adm_table *t =
        adm_table_new("rrrrr", "PRIORITY", "RUNNING", "WAITING", "SWAPPED", "PREEMPTED");
    for (size_t i = 0; i < json_array_size(ps); i++) {
        const json_t *p = json_array_get(ps, i);
        char a[24], b[24], c[24], d[24], e[24];
        adm_table_add(t, adm_fmt_ll(adm_ll(p, "priority"), a, sizeof(a)),
                      adm_fmt_ll(adm_ll(p, "running"), b, sizeof(b)),
                      adm_fmt_ll(adm_ll(p, "waiting"), c, sizeof(c)),
                      adm_fmt_ll(adm_ll(p, "swapped"), d, sizeof(d)),
                      adm_fmt_ll(adm_ll(p, "preempted"), e, sizeof(e)));
    }
    return adm_table_print(t, out);
}

static int adm_tenants_write(const json_t *st, FILE *out)
{
    const json_t *ts = adm_arr(st, "tenants");
    struct adm_table *t = adm_table_new("lrrrrrrrr", "TENANT", "WEIGHT", "RUNNING", "WAITING",
                                        "SWAPPED", "BLOCKS", "TOKENS/S", "SHARE", "WEIGHT-SHARE");
    for (size_t i = 0; i < json_array_size(ts); i++) {
        const json_t *x = json_array_get(ts, i);
        char w[32], r[24], q[24], s[24], b[24], tps[32], sh[16], ws[16];
        snprintf(w, sizeof(w), "%g", adm_num(x, "weight"));
        snprintf(tps, sizeof(tps), "%.1f", adm_num(x, "tokens_per_s"));
        adm_table_add(t, adm_str(x, "name", "?"), w, adm_fmt_ll(adm_ll(x, "running"), r, sizeof(r)),
                      adm_fmt_ll(adm_ll(x, "waiting"), q, sizeof(q)),
                      adm_fmt_ll(adm_ll(x, "swapped"), s, sizeof(s)),
                      adm_fmt_ll(adm_ll(x, "device_blocks"), b, sizeof(b)), tps,
                      adm_fmt_pct(adm_num(x, "share"), sh, sizeof(sh)),
                      adm_fmt_pct(adm_num(x, "weight_share"), ws, sizeof(ws)));
    }
    return adm_table_print(t, out);
}

static int adm_status_write(const json_t *st, FILE *out)
{
    if (adm_status_header_write(st, out) != ADM_OK)
        return ADM_FAIL;
    if (json_array_size(adm_arr(st, "priorities")) == 0)
        fputs("\nno requests\n", out);
    else if (fputc('\n', out) == EOF || adm_priorities_write(st, out) != ADM_OK)
        return ADM_FAIL;
    if (json_array_size(adm_arr(st, "tenants")) == 0)
        return ADM_OK;
    if (fputc('\n', out) == EOF)
        return adm_fail("cannot write output");
    return adm_tenants_write(st, out);
}

/* The command's arguments when it takes no options and no operands. */
static int adm_no_args(struct adm_ctx *c, int argc, char **argv)
{
    const char *pos[1];
    int n_pos;
    return adm_parse(c, argc - 1, argv + 1, NULL, 0, pos, 0, 0, &n_pos);
}

int adm_cmd_status(struct adm_ctx *c, int argc, char **argv)
{
    if (adm_no_args(c, argc, argv) != ADM_OK)
        return ADM_USAGE;
    json_t *st;
    if (adm_live_call(c, json_pack("{s:s}", "cmd", "status"), &st) != ADM_OK)
        return ADM_FAIL;
    if (c->json)
        return adm_live_json(st);
    int rc = adm_status_write(st, stdout);
    json_decref(st);
    return rc;
}

/* ---------------------------------------------------------------- queues */

static void adm_queue_row(struct adm_table *t, const json_t *r, int compact)
{
    char eng[24], prio[24], age[24], pr[24], gen[24], dev[24], host[24], pre[24];
    const json_t *id = json_object_get(r, "id");
    adm_fmt_ll(adm_ll(r, "engine_id"), eng, sizeof(eng));
    adm_fmt_ll(adm_ll(r, "priority"), prio, sizeof(prio));
    adm_fmt_age(adm_num(r, "age_s"), age, sizeof(age));
    adm_fmt_ll(adm_ll(r, "prompt_tokens"), pr, sizeof(pr));
    adm_fmt_ll(adm_ll(r, "generated_tokens"), gen, sizeof(gen));
    adm_fmt_ll(adm_ll(r, "device_blocks"), dev, sizeof(dev));
    adm_fmt_ll(adm_ll(r, "host_blocks"), host, sizeof(host));
    adm_fmt_ll(adm_ll(r, "preemptions"), pre, sizeof(pre));
    const char *tenant = adm_str(r, "tenant", "-"), *state = adm_str(r, "state", "-");
    if (compact)
        adm_table_add(t, eng, tenant, prio, state, age, pr, gen, dev, host, pre);
    else
        adm_table_add(t, json_is_string(id) ? json_string_value(id) : "-", eng, tenant, prio, state,
                      age, pr, gen, dev, host, pre);
}

int adm_queues_write(const json_t *q, int compact, FILE *out)
{
    const json_t *rs = adm_arr(q, "requests");
    if (json_array_size(rs) == 0)
        return fputs("no requests\n", out) == EOF ? adm_fail("cannot write output") : ADM_OK;
    struct adm_table *t =
        compact ? adm_table_new("rlrlrrrrrr", "ENG", "TENANT", "PRIO", "STATE", "AGE", "PROMPT",
                                "GEN", "DEV", "HOST", "PREEMPT")
                : adm_table_new("lrlrlrrrrrr", "ID", "ENG", "TENANT", "PRIO", "STATE", "AGE",
                                "PROMPT", "GENERATED", "DEV-BLOCKS", "HOST-BLOCKS", "PREEMPTIONS");
    for (size_t i = 0; i < json_array_size(rs); i++)
        adm_queue_row(t, json_array_get(rs, i), compact);
    return adm_table_print(t, out);
}

int adm_cmd_queues(struct adm_ctx *c, int argc, char **argv)
{
    struct adm_opt opts[] = {{"tenant", 1, NULL, 0}};
    const char *pos[1];
    int n_pos;
    if (adm_parse(c, argc - 1, argv + 1, opts, 1, pos, 0, 0, &n_pos) != ADM_OK)
        return ADM_USAGE;
    json_t *req = json_pack("{s:s}", "cmd", "queues");
    if (req && opts[0].set && json_object_set_new(req, "tenant", json_string(opts[0].val)) != 0)
        json_decref(req), req = NULL;
    json_t *q;
    if (adm_live_call(c, req, &q) != ADM_OK)
        return ADM_FAIL;
    if (c->json)
        return adm_live_json(q);
    int rc = adm_queues_write(q, 0, stdout);
    json_decref(q);
    return rc;
}

/* ---------------------------------------------------------------- blocks */

/* One request's block table. */
static int adm_req_blocks_write(const json_t *b, FILE *out)
{
    const json_t *rows = adm_arr(b, "table");
    if (fprintf(out, "request %s (engine %lld), block size %lld, %zu blocks\n",
                adm_str(b, "request", "?"), adm_ll(b, "engine_id"), adm_ll(b, "block_size"),
                json_array_size(rows)) < 0)
        return adm_fail("cannot write output");
    struct adm_table *t =
        adm_table_new("rrrlrll", "SEQ", "LOGICAL", "PHYSICAL", "WHERE", "REF", "HASH", "SHARED");
    for (size_t i = 0; i < json_array_size(rows); i++) {
        const json_t *r = json_array_get(rows, i);
        char seq[24], lg[24], ph[24], ref[24], hash[16];
        const char *h = adm_str(r, "hash", NULL);
        snprintf(hash, sizeof(hash), "%.8s", h ? h : "-");
        adm_table_add(t, adm_fmt_ll(adm_ll(r, "seq"), seq, sizeof(seq)),
                      adm_fmt_ll(adm_ll(r, "logical"), lg, sizeof(lg)),
                      adm_fmt_ll(adm_ll(r, "block"), ph, sizeof(ph)), adm_str(r, "where", "-"),
                      adm_fmt_ll(adm_ll(r, "ref"), ref, sizeof(ref)), hash,
                      json_is_true(json_object_get(r, "shared")) ? "yes" : "no");
    }
    return adm_table_print(t, out);
}

/* A's letter in the map: A-Z, then a-z, then '#' for the rest. */
static char adm_tenant_letter(long long k)
{
    if (k < 26)
        return (char)('A' + k);
    if (k < 52)
        return (char)('a' + (k - 26));
    return '#';
}

#define ADM_MAP_WIDTH 64

/* What a negative map entry means, by -k - 1 (free, cached, unlisted). */
static const char adm_map_special[] = ".:*";
#define ADM_N_SPECIAL 3

/* The character of one map entry: a tenant's letter, or adm_map_special. */
static char adm_map_char(long long k)
{
    if (k >= 0)
        return adm_tenant_letter(k);
    return k >= -ADM_N_SPECIAL ? adm_map_special[-k - 1] : '?';
}

/* The map's rows of ADM_MAP_WIDTH blocks, each led by its first block's
 * number; counts what each tenant holds into held[nt]. */
static int adm_map_rows(const json_t *map, size_t nt, long long *held, FILE *out)
{
    size_t n = json_array_size(map);
    for (size_t i = 0; i < n; i++) {
        long long k = (long long)json_number_value(json_array_get(map, i));
        if (k >= 0 && (size_t)k < nt)
            held[k]++;
        else if (k < 0 && k >= -ADM_N_SPECIAL)
            held[nt + (size_t)(-k - 1)]++;
        if (i % ADM_MAP_WIDTH == 0 && fprintf(out, "%6zu ", i) < 0)
            return -1;
        if (fputc(adm_map_char(k), out) == EOF)
            return -1;
        if (((i + 1) % ADM_MAP_WIDTH == 0 || i + 1 == n) && fputc('\n', out) == EOF)
            return -1;
    }
    return 0;
}

/* The device blocks, one character each, and what each character means. */
static int adm_map_write(const json_t *b, FILE *out)
{
    const json_t *names = adm_arr(b, "tenants");
    size_t nt = json_array_size(names);
    long long *held = calloc(nt + ADM_N_SPECIAL, sizeof(*held)); /* tenants', then specials */
    if (!held)
        return adm_fail("out of memory");
    int rc = fprintf(out, "device blocks: %lld, block size %lld\n", adm_ll(b, "total"),
                     adm_ll(b, "block_size"));
    if (rc >= 0)
        rc = adm_map_rows(adm_arr(b, "map"), nt, held, out);
    if (rc >= 0)
        rc = fprintf(out, "\n. free (%lld)  : cached (%lld)\n", held[nt], held[nt + 1]);
    if (rc >= 0 && held[nt + 2])
        rc = fprintf(out, "* in use, by no request listed (%lld)\n", held[nt + 2]);
    for (size_t k = 0; k < nt && rc >= 0; k++) {
        const char *name = json_string_value(json_array_get(names, k));
        rc = fprintf(out, "%c %s (%lld)\n", adm_tenant_letter((long long)k), name ? name : "?",
                     held[k]);
    }
    free(held);
    return rc < 0 ? adm_fail("cannot write output") : ADM_OK;
}

int adm_cmd_blocks(struct adm_ctx *c, int argc, char **argv)
{
    const char *pos[1];
    int n_pos;
    if (adm_parse(c, argc - 1, argv + 1, NULL, 0, pos, 0, 1, &n_pos) != ADM_OK)
        return ADM_USAGE;
    json_t *req = n_pos ? json_pack("{s:s, s:s}", "cmd", "blocks", "request", pos[0])
                        : json_pack("{s:s}", "cmd", "blocks");
    json_t *b;
    if (adm_live_call(c, req, &b) != ADM_OK)
        return ADM_FAIL;
    if (c->json)
        return adm_live_json(b);
    int rc = n_pos ? adm_req_blocks_write(b, stdout) : adm_map_write(b, stdout);
    json_decref(b);
    return rc;
}

/* ------------------------------------------------------ drain and undrain */

/* Requests still in the engine by status's priorities; -1 on error. */
static long long adm_busy(const struct adm_ctx *c)
{
    json_t *st;
    if (adm_live_call(c, json_pack("{s:s}", "cmd", "status"), &st) != ADM_OK)
        return -1;
    const json_t *ps = adm_arr(st, "priorities");
    long long n = 0;
    for (size_t i = 0; i < json_array_size(ps); i++) {
        const json_t *p = json_array_get(ps, i);
        n += adm_ll(p, "running") + adm_ll(p, "waiting") + adm_ll(p, "swapped") +
             adm_ll(p, "preempted");
    }
    json_decref(st);
    return n;
}

/* Polls status every 0.5 s until nothing is left; timeout <= 0: forever. */
static int adm_drain_wait(const struct adm_ctx *c, double timeout)
{
    double end = adm_now() + timeout;
    for (;;) {
        long long n = adm_busy(c);
        if (n < 0)
            return ADM_FAIL;
        if (n == 0)
            return ADM_OK;
        if (timeout > 0 && adm_now() >= end)
            return adm_fail("drain: %lld requests still in the engine after %g s (llmd is still "
                            "draining; 'llmadmin undrain' accepts requests again)",
                            n, timeout);
        struct timespec half = {0, 500000000};
        nanosleep(&half, NULL);
    }
}

int adm_cmd_drain(struct adm_ctx *c, int argc, char **argv)
{
    struct adm_opt opts[] = {{"wait", 0, NULL, 0}, {"timeout", 1, NULL, 0}};
    const char *pos[1];
    int n_pos;
    double timeout = 0;
    if (adm_parse(c, argc - 1, argv + 1, opts, 2, pos, 0, 0, &n_pos) != ADM_OK)
        return ADM_USAGE;
    if (opts[1].set && !opts[0].set)
        return adm_usage(c, "--timeout only goes with --wait");
    if (opts[1].set && adm_double(opts[1].val, 0, 1e9, &timeout) != 0)
        return adm_usage(c, "--timeout: expected a number of seconds > 0, got '%s'", opts[1].val);
    json_t *r;
    if (adm_live_call(c, json_pack("{s:s, s:b}", "cmd", "drain", "on", 1), &r) != ADM_OK)
        return ADM_FAIL;
    if (opts[0].set && adm_drain_wait(c, timeout) != ADM_OK) {
        json_decref(r);
        return ADM_FAIL;
    }
    if (c->json)
        return adm_live_json(r);
    json_decref(r);
    puts(opts[0].set ? "llmd is draining: new requests are refused, and none is left"
                     : "llmd is draining: new requests are refused, running ones finish");
    return fflush(stdout) == 0 ? ADM_OK : adm_fail("cannot write output");
}

int adm_cmd_undrain(struct adm_ctx *c, int argc, char **argv)
{
    if (adm_no_args(c, argc, argv) != ADM_OK)
        return ADM_USAGE;
    json_t *r;
    if (adm_live_call(c, json_pack("{s:s, s:b}", "cmd", "drain", "on", 0), &r) != ADM_OK)
        return ADM_FAIL;
    if (c->json)
        return adm_live_json(r);
    json_decref(r);
    puts("llmd accepts new requests again");
    return fflush(stdout) == 0 ? ADM_OK : adm_fail("cannot write output");
}

/* ----------------------------------------------------------------- evict */

int adm_cmd_evict(struct adm_ctx *c, int argc, char **argv)
{
    struct adm_opt opts[] = {{"tenant", 1, NULL, 0}, {"abort", 0, NULL, 0}};
    const char *pos[1];
    int n_pos;
    if (adm_parse(c, argc - 1, argv + 1, opts, 2, pos, 0, 1, &n_pos) != ADM_OK)
        return ADM_USAGE;
    if ((n_pos == 1) == (opts[0].set != 0))
        return adm_usage(c, "evict: name one REQUEST or one --tenant");
    int abort_ = opts[1].set;
    json_t *req =
        n_pos
            ? json_pack("{s:s, s:s, s:b}", "cmd", "evict", "request", pos[0], "abort", abort_)
            : json_pack("{s:s, s:s, s:b}", "cmd", "evict", "tenant", opts[0].val, "abort", abort_);
    json_t *r;
    if (adm_live_call(c, req, &r) != ADM_OK)
        return ADM_FAIL;
    if (c->json)
        return adm_live_json(r);
    long long n = adm_ll(r, "evicted");
    json_decref(r);
    printf("%s %lld request%s%s\n", abort_ ? "aborted" : "evicted", n, n == 1 ? "" : "s",
           abort_ ? " (ended with an error)" : " (preempted: they resume when there is room)");
    return fflush(stdout) == 0 ? ADM_OK : adm_fail("cannot write output");
}
