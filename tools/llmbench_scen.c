/*
 * tools/llmbench_scen.c — llmbench's scenario file, its random numbers and
 * the request bodies drawn from it.
 *
 * The one idea: every random choice (arrival gaps, lengths, token ids,
 * disconnects) comes from a per-tenant xoshiro256** stream seeded from the
 * scenario's seed and the tenant's index, so a scenario sends the same
 * requests on every run, and leaving a tenant out (--only) does not change
 * what the others send.  The file is checked strictly: unknown keys and bad
 * values are errors that name the file and the field path.
 */
#include "tools/llmbench.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ========================================================= random numbers */

static uint64_t lb_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void lb_rng_seed(struct lb_rng *r, uint64_t seed)
{
    /* splitmix64 spreads any seed (0 included) over the 256-bit state,
     * which xoshiro needs to be non-zero. */
    for (int i = 0; i < 4; i++)
        r->s[i] = lb_splitmix64(&seed);
}

static uint64_t lb_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t lb_rng_next(struct lb_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = lb_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = lb_rotl(s[3], 45);
    return out;
}

double lb_rng_unit(struct lb_rng *r)
{
    return (double)(lb_rng_next(r) >> 11) * 0x1.0p-53;
}

double lb_rng_exp(struct lb_rng *r, double rate)
{
    /* 1 - u lies in (0, 1], so the log is finite. */
    return -log(1.0 - lb_rng_unit(r)) / rate;
}

double lb_rng_normal(struct lb_rng *r)
{
    /* Box-Muller; the second value is dropped so the state stays the four
     * words of struct lb_rng. */
    double u1 = 1.0 - lb_rng_unit(r), u2 = lb_rng_unit(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* A uniform integer in [lo, hi]. */
static long lb_rng_range(struct lb_rng *r, long lo, long hi)
{
    if (hi <= lo)
        return lo;
    return lo + (long)(lb_rng_unit(r) * (double)(hi - lo + 1));
}

int lb_dist_draw(const struct lb_dist *d, struct lb_rng *r)
{
    double x = d->a;
    switch (d->kind) {
    case LB_DIST_FIXED:
        break;
    case LB_DIST_UNIFORM: {
        /* Every integer of [a, b] equally likely (rounding a real draw
         * would give the two ends half weight). */
        double lo = ceil(d->a), hi = floor(d->b);
        x = hi < lo ? d->a : (double)lb_rng_range(r, (long)lo, (long)hi);
        break;
    }
    case LB_DIST_NORMAL:
        x = d->a + d->b * lb_rng_normal(r);
        break;
    case LB_DIST_LOGNORMAL:
        x = d->a * exp(d->b * lb_rng_normal(r));
        break;
    }
    if (x < d->min)
        x = d->min;
    if (d->max > 0 && x > d->max)
        x = d->max;
    x = nearbyint(x);
    if (!(x >= 1)) /* NaN too */
        return 1;
    return x > (double)(INT_MAX / 2) ? INT_MAX / 2 : (int)x;
}

/* ================================================================= parsing */

/* What every check needs to write a message naming the file and field. */
struct lb_pz {
    const char *file;
    char *err;
    size_t errlen;
};

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int
lb_pz_fail(struct lb_pz *p, const char *field, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (field && *field)
        snprintf(p->err, p->errlen, "%s: %s: %s", p->file, field, msg);
    else
        snprintf(p->err, p->errlen, "%s: %s", p->file, msg);
    return -1;
}

/* "where.key", or "key" at the top. */
static const char *lb_pz_path(char *buf, size_t n, const char *where, const char *key)
{
    /* A path too long for buf is cut short; it only goes into messages. */
    if (snprintf(buf, n, "%s%s%s", where, *where ? "." : "", key) >= (int)n)
        buf[n - 1] = '\0';
    return buf;
}

/* Rejects keys of obj not in the NULL-terminated list, so typos surface. */
static int lb_pz_keys(struct lb_pz *p, json_t *obj, const char *where, const char *const *ok)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        int found = 0;
        for (int i = 0; ok[i] && !found; i++)
            found = strcmp(key, ok[i]) == 0;
        if (!found) {
            char f[160];
            return lb_pz_fail(p, lb_pz_path(f, sizeof(f), where, key), "unknown key");
        }
    }
    return 0;
}

static int lb_pz_object(struct lb_pz *p, json_t *v, const char *field)
{
    return json_is_object(v) ? 0 : lb_pz_fail(p, field, "must be an object");
}

/* A number at obj.key in [lo, hi]; dflt when absent. */
static int lb_pz_num(struct lb_pz *p, json_t *obj, const char *where, const char *key, double dflt,
                     double lo, double hi, double *out)
{
    char f[160];
    json_t *v = json_object_get(obj, key);
    *out = dflt;
    if (!v)
        return 0;
    lb_pz_path(f, sizeof(f), where, key);
    if (!json_is_number(v))
        return lb_pz_fail(p, f, "must be a number");
    double x = json_number_value(v);
    if (!(x >= lo))
        return lb_pz_fail(p, f, "must be >= %g (got %g)", lo, x);
    if (!(x <= hi))
        return lb_pz_fail(p, f, "must be <= %g (got %g)", hi, x);
    *out = x;
    return 0;
}

/* A whole number at obj.key in [lo, hi]; dflt when absent. */
static int lb_pz_int(struct lb_pz *p, json_t *obj, const char *where, const char *key, long dflt,
                     long lo, long hi, long *out)
{
    char f[160];
    double x;
    if (lb_pz_num(p, obj, where, key, (double)dflt, (double)lo, (double)hi, &x))
        return -1;
    if (x != floor(x))
        return lb_pz_fail(p, lb_pz_path(f, sizeof(f), where, key), "must be a whole number");
    *out = (long)x;
    return 0;
}

static int lb_pz_bool(struct lb_pz *p, json_t *obj, const char *where, const char *key, int *out)
{
    char f[160];
    json_t *v = json_object_get(obj, key);
    *out = 0;
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return lb_pz_fail(p, lb_pz_path(f, sizeof(f), where, key), "must be true or false");
    *out = json_is_true(v);
    return 0;
}

/* A copy of the string at obj.key (NULL when absent). */
static int lb_pz_str(struct lb_pz *p, json_t *obj, const char *where, const char *key, char **out)
{
    char f[160];
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v)
        return 0;
    lb_pz_path(f, sizeof(f), where, key);
    if (!json_is_string(v))
        return lb_pz_fail(p, f, "must be a string");
    if (!(*out = strdup(json_string_value(v))))
        return lb_pz_fail(p, f, "out of memory");
    return 0;
}

/* A [x, y] pair of numbers. */
static int lb_pz_pair(struct lb_pz *p, json_t *v, const char *field, double *x, double *y)
{
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_number(json_array_get(v, 0)) ||
        !json_is_number(json_array_get(v, 1)))
        return lb_pz_fail(p, field, "must be a pair of numbers [a, b]");
    *x = json_number_value(json_array_get(v, 0));
    *y = json_number_value(json_array_get(v, 1));
    return 0;
}

/* The parameters of a DIST object's one kind, checked. */
static int lb_pz_dist_kind(struct lb_pz *p, json_t *v, const char *f, struct lb_dist *d)
{
    static const char *const names[] = {"uniform", "normal", "lognormal"};
    static const enum lb_dist_kind kinds[] = {LB_DIST_UNIFORM, LB_DIST_NORMAL, LB_DIST_LOGNORMAL};
    int n = 0, k = 0;
    for (int i = 0; i < 3; i++)
        if (json_object_get(v, names[i])) {
            n++;
            k = i;
        }
    if (n != 1)
        return lb_pz_fail(p, f, "give one of uniform, normal or lognormal");
    char kf[160];
    lb_pz_path(kf, sizeof(kf), f, names[k]);
    if (lb_pz_pair(p, json_object_get(v, names[k]), kf, &d->a, &d->b))
        return -1;
    d->kind = kinds[k];
    if (d->kind == LB_DIST_UNIFORM && !(d->a >= 0 && d->b >= d->a && d->b <= 1e9))
        return lb_pz_fail(p, kf, "needs 0 <= lo <= hi <= 1e9");
    if (d->kind == LB_DIST_NORMAL && !(d->b >= 0))
        return lb_pz_fail(p, kf, "the standard deviation must be >= 0");
    if (d->kind == LB_DIST_LOGNORMAL && !(d->a > 0 && d->b >= 0))
        return lb_pz_fail(p, kf, "needs median > 0 and sigma >= 0");
    return 0;
}

/* DIST: a number, or {"uniform"|"normal"|"lognormal": [a, b], "min", "max"}. */
static int lb_pz_dist(struct lb_pz *p, json_t *v, const char *f, struct lb_dist *d)
{
    static const char *const keys[] = {"uniform", "normal", "lognormal", "min", "max", NULL};
    memset(d, 0, sizeof(*d));
    if (json_is_number(v)) {
        d->kind = LB_DIST_FIXED;
        d->a = json_number_value(v);
        return d->a >= 1 ? 0 : lb_pz_fail(p, f, "must be >= 1 (got %g)", d->a);
    }
    if (!json_is_object(v))
        return lb_pz_fail(p, f, "must be a number or a distribution object");
    if (lb_pz_keys(p, v, f, keys) || lb_pz_dist_kind(p, v, f, d) ||
        lb_pz_num(p, v, f, "min", 0, 0, INFINITY, &d->min) ||
        lb_pz_num(p, v, f, "max", 0, 0, INFINITY, &d->max))
        return -1;
    if (d->max > 0 && d->max < d->min)
        return lb_pz_fail(p, f, "max must be >= min");
    return 0;
}

static int lb_pz_slo(struct lb_pz *p, json_t *v, const char *f, struct lb_slo *slo)
{
    static const char *const keys[] = {"ttft_ms", "tpot_ms", "e2e_ms", NULL};
    if (!v)
        return 0;
    /* Fields present override what slo already holds (the scenario's). */
    return lb_pz_object(p, v, f) || lb_pz_keys(p, v, f, keys) ||
                   lb_pz_num(p, v, f, "ttft_ms", slo->ttft_ms, 0, INFINITY, &slo->ttft_ms) ||
                   lb_pz_num(p, v, f, "tpot_ms", slo->tpot_ms, 0, INFINITY, &slo->tpot_ms) ||
                   lb_pz_num(p, v, f, "e2e_ms", slo->e2e_ms, 0, INFINITY, &slo->e2e_ms)
               ? -1
               : 0;
}

/* {"poisson": R} | {"burst": N, "every_s": S} | {"concurrency": N, "think_s": S} */
static int lb_pz_arrival(struct lb_pz *p, json_t *tj, const char *where, struct lb_tenant *t)
{
    static const char *const keys[] = {"poisson",     "burst",   "every_s",
                                       "concurrency", "think_s", NULL};
    char f[160], g[160];
    json_t *v = json_object_get(tj, "arrival");
    lb_pz_path(f, sizeof(f), where, "arrival");
    if (!v)
        return lb_pz_fail(p, f, "missing (poisson, burst or concurrency)");
    if (lb_pz_object(p, v, f) || lb_pz_keys(p, v, f, keys))
        return -1;
    int np = !!json_object_get(v, "poisson"), nb = !!json_object_get(v, "burst"),
        nc = !!json_object_get(v, "concurrency");
    if (np + nb + nc != 1)
        return lb_pz_fail(p, f, "give exactly one of poisson, burst or concurrency");
    long n = 0;
    if (np) {
        t->arrival = LB_ARR_POISSON;
        if (lb_pz_num(p, v, f, "poisson", 0, 0, INFINITY, &t->rate))
            return -1;
        if (!(t->rate > 0))
            return lb_pz_fail(p, lb_pz_path(g, sizeof(g), f, "poisson"), "must be > 0");
        if (json_object_get(v, "every_s") || json_object_get(v, "think_s"))
            return lb_pz_fail(p, f, "every_s and think_s do not go with poisson");
    } else if (nb) {
        t->arrival = LB_ARR_BURST;
        if (lb_pz_int(p, v, f, "burst", 1, 1, 1000000, &n) ||
            lb_pz_num(p, v, f, "every_s", 0, 0, INFINITY, &t->every_s))
            return -1;
        t->burst = (int)n;
        if (!(t->every_s > 0))
            return lb_pz_fail(p, lb_pz_path(g, sizeof(g), f, "every_s"), "must be given and > 0");
        if (json_object_get(v, "think_s"))
            return lb_pz_fail(p, f, "think_s does not go with burst");
    } else {
        t->arrival = LB_ARR_CLOSED;
        if (lb_pz_int(p, v, f, "concurrency", 1, 1, 100000, &n) ||
            lb_pz_num(p, v, f, "think_s", 0, 0, INFINITY, &t->think_s))
            return -1;
        t->concurrency = (int)n;
        if (json_object_get(v, "every_s"))
            return lb_pz_fail(p, f, "every_s does not go with concurrency");
    }
    return 0;
}

/* "key": a literal, or "$VAR" read from the environment. */
static int lb_pz_key(struct lb_pz *p, json_t *tj, const char *where, struct lb_tenant *t)
{
    char f[160];
    if (lb_pz_str(p, tj, where, "key", &t->key))
        return -1;
    if (!t->key || t->key[0] != '$')
        return 0;
    const char *val = getenv(t->key + 1);
    lb_pz_path(f, sizeof(f), where, "key");
    if (!t->key[1] || !val)
        return lb_pz_fail(p, f, "environment variable %s is not set", t->key + 1);
    free(t->key);
    t->key = strdup(val);
    return t->key ? 0 : lb_pz_fail(p, f, "out of memory");
}

/* Appends one prompt line to t->prompts. */
static int lb_prompt_add(struct lb_tenant *t, const char *line, size_t n)
{
    char **np = realloc(t->prompts, sizeof(char *) * (size_t)(t->n_prompts + 1));
    if (!np)
        return -1;
    t->prompts = np;
    if (!(np[t->n_prompts] = strndup(line, n)))
        return -1;
    t->n_prompts++;
    return 0;
}

/* Reads prompts_file (relative to the scenario's folder): one prompt per
 * line, blank lines skipped. */
static int lb_pz_prompts(struct lb_pz *p, const char *rel, const char *f, struct lb_tenant *t)
{
    char path[4096];
    const char *slash = strrchr(p->file, '/');
    if (rel[0] == '/' || !slash)
        snprintf(path, sizeof(path), "%s", rel);
    else
        snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - p->file), p->file, rel);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return lb_pz_fail(p, f, "cannot read %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = 0;
    while (rc == 0 && (n = getline(&line, &cap, fp)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            n--;
        if (strspn(line, " \t\r\n") < (size_t)n && lb_prompt_add(t, line, (size_t)n))
            rc = lb_pz_fail(p, f, "out of memory");
    }
    free(line);
    fclose(fp);
    if (rc == 0 && t->n_prompts == 0)
        rc = lb_pz_fail(p, f, "%s has no prompts", path);
    return rc;
}

/* prompt_len / prefix_len / prompts_file / system / max_tokens. */
static int lb_pz_prompt(struct lb_pz *p, const struct lb_scenario *sc, json_t *tj,
                        const char *where, struct lb_tenant *t)
{
    char f[160];
    json_t *pl = json_object_get(tj, "prompt_len"), *pf = json_object_get(tj, "prompts_file");
    long prefix;
    if (pl && pf)
        return lb_pz_fail(p, where, "give prompt_len or prompts_file, not both");
    if (!pl && !pf)
        return lb_pz_fail(p, lb_pz_path(f, sizeof(f), where, "prompt_len"),
                          "missing (or give prompts_file)");
    if (pl && lb_pz_dist(p, pl, lb_pz_path(f, sizeof(f), where, "prompt_len"), &t->prompt_len))
        return -1;
    if (pf) {
        lb_pz_path(f, sizeof(f), where, "prompts_file");
        if (!json_is_string(pf))
            return lb_pz_fail(p, f, "must be a string");
        if (lb_pz_prompts(p, json_string_value(pf), f, t))
            return -1;
    }
    if (lb_pz_int(p, tj, where, "prefix_len", 0, 0, 1000000, &prefix) ||
        lb_pz_str(p, tj, where, "system", &t->system))
        return -1;
    t->prefix_len = (int)prefix;
    if (t->system && !sc->chat)
        return lb_pz_fail(p, lb_pz_path(f, sizeof(f), where, "system"), "needs \"api\": \"chat\"");
    json_t *mt = json_object_get(tj, "max_tokens");
    lb_pz_path(f, sizeof(f), where, "max_tokens");
    if (!mt)
        return lb_pz_fail(p, f, "missing");
    return lb_pz_dist(p, mt, f, &t->max_tokens);
}

/* The shared prefix, drawn once from the tenant's stream. */
static int lb_tenant_prefix(const struct lb_scenario *sc, struct lb_tenant *t)
{
    if (t->prefix_len == 0)
        return 0;
    t->prefix = malloc(sizeof(int32_t) * (size_t)t->prefix_len);
    if (!t->prefix)
        return -1;
    for (int i = 0; i < t->prefix_len; i++)
        t->prefix[i] = (int32_t)lb_rng_range(&t->rng, sc->vocab_lo, sc->vocab_hi);
    return 0;
}

/* Each tenant's stream, from the seed and the tenant's index in the file,
 * so that --only keeps the other tenants' requests the same. */
static void lb_tenant_seed(const struct lb_scenario *sc, struct lb_tenant *t, int i)
{
    lb_rng_seed(&t->rng, sc->seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(i + 1)));
}

int lb_scen_reseed(struct lb_scenario *sc, uint64_t seed)
{
    sc->seed = seed;
    for (int i = 0; i < sc->n_tenants; i++) {
        struct lb_tenant *t = &sc->tenants[i];
        lb_tenant_seed(sc, t, i);
        free(t->prefix);
        t->prefix = NULL;
        if (lb_tenant_prefix(sc, t))
            return -1;
    }
    return 0;
}

static int lb_pz_tenant(struct lb_pz *p, struct lb_scenario *sc, json_t *tj, int i)
{
    static const char *const keys[] = {
        "name",         "key",     "priority",   "arrival",  "prompt_len", "prefix_len",
        "prompts_file", "system",  "max_tokens", "stream",   "ignore_eos", "temperature",
        "disconnect",   "start_s", "stop_s",     "requests", "slo",        NULL};
    struct lb_tenant *t = &sc->tenants[i];
    char where[32], f[160];
    long prio, maxr;
    snprintf(where, sizeof(where), "tenants[%d]", i);
    t->priority = -1;
    t->temperature = -1;
    t->slo = sc->slo;
    lb_tenant_seed(sc, t, i); /* before anything is drawn */
    if (lb_pz_object(p, tj, where) || lb_pz_keys(p, tj, where, keys) ||
        lb_pz_str(p, tj, where, "name", &t->name) || lb_pz_key(p, tj, where, t) ||
        lb_pz_int(p, tj, where, "priority", -1, 0, INT_MAX, &prio) ||
        lb_pz_arrival(p, tj, where, t) || lb_pz_prompt(p, sc, tj, where, t) ||
        lb_pz_bool(p, tj, where, "stream", &t->stream) ||
        lb_pz_bool(p, tj, where, "ignore_eos", &t->ignore_eos) ||
        lb_pz_num(p, tj, where, "temperature", -1, 0, 100, &t->temperature) ||
        lb_pz_num(p, tj, where, "disconnect", 0, 0, 1, &t->disconnect) ||
        lb_pz_num(p, tj, where, "start_s", 0, 0, INFINITY, &t->start_s) ||
        lb_pz_num(p, tj, where, "stop_s", 0, 0, INFINITY, &t->stop_s) ||
        lb_pz_int(p, tj, where, "requests", 0, 0, LONG_MAX / 2, &maxr) ||
        lb_pz_slo(p, json_object_get(tj, "slo"), lb_pz_path(f, sizeof(f), where, "slo"), &t->slo))
        return -1;
    t->priority = (int)prio;
    t->max_requests = maxr;
    if (t->stop_s > 0 && t->stop_s <= t->start_s)
        return lb_pz_fail(p, lb_pz_path(f, sizeof(f), where, "stop_s"), "must be after start_s");
    if (!t->name && asprintf(&t->name, "tenant%d", i) < 0) {
        t->name = NULL;
        return lb_pz_fail(p, where, "out of memory");
    }
    for (int k = 0; k < i; k++)
        if (strcmp(sc->tenants[k].name, t->name) == 0)
            return lb_pz_fail(p, lb_pz_path(f, sizeof(f), where, "name"), "\"%s\" is used twice",
                              t->name);
    return lb_tenant_prefix(sc, t) ? lb_pz_fail(p, where, "out of memory") : 0;
}

static int lb_pz_tenants(struct lb_pz *p, struct lb_scenario *sc, json_t *root)
{
    json_t *v = json_object_get(root, "tenants");
    if (!json_is_array(v) || json_array_size(v) == 0)
        return lb_pz_fail(p, "tenants", "must be a non-empty array");
    sc->tenants = calloc(json_array_size(v), sizeof(*sc->tenants));
    if (!sc->tenants)
        return lb_pz_fail(p, "tenants", "out of memory");
    sc->n_tenants = (int)json_array_size(v);
    for (int i = 0; i < sc->n_tenants; i++)
        if (lb_pz_tenant(p, sc, json_array_get(v, (size_t)i), i))
            return -1;
    return 0;
}

static int lb_pz_actions(struct lb_pz *p, struct lb_scenario *sc, json_t *root)
{
    static const char *const keys[] = {"at_s", "run", NULL};
    json_t *v = json_object_get(root, "actions");
    if (!v)
        return 0;
    if (!json_is_array(v))
        return lb_pz_fail(p, "actions", "must be an array");
    sc->actions = calloc(json_array_size(v) + 1, sizeof(*sc->actions));
    if (!sc->actions)
        return lb_pz_fail(p, "actions", "out of memory");
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *a = json_array_get(v, i);
        struct lb_action *ac = &sc->actions[i];
        char where[32], f[160];
        snprintf(where, sizeof(where), "actions[%zu]", i);
        ac->exit = -1;
        sc->n_actions++;
        if (lb_pz_object(p, a, where) || lb_pz_keys(p, a, where, keys) ||
            lb_pz_num(p, a, where, "at_s", -1, 0, INFINITY, &ac->at_s) ||
            lb_pz_str(p, a, where, "run", &ac->run))
            return -1;
        if (ac->at_s < 0)
            return lb_pz_fail(p, lb_pz_path(f, sizeof(f), where, "at_s"), "missing");
        if (!ac->run || !ac->run[0])
            return lb_pz_fail(p, lb_pz_path(f, sizeof(f), where, "run"), "missing or empty");
    }
    return 0;
}

/* "name" defaults to the file name without its folder and ".json". */
static char *lb_default_name(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    if (n > 5 && strcmp(b + n - 5, ".json") == 0)
        n -= 5;
    return strndup(b, n);
}

/* Strings: name, description, api, model, end. */
static int lb_pz_strings(struct lb_pz *p, struct lb_scenario *sc, json_t *root)
{
    char *api = NULL, *end = NULL;
    int rc = -1;
    if (lb_pz_str(p, root, "", "name", &sc->name) ||
        lb_pz_str(p, root, "", "description", &sc->description) ||
        lb_pz_str(p, root, "", "model", &sc->model) || lb_pz_str(p, root, "", "api", &api) ||
        lb_pz_str(p, root, "", "end", &end))
        goto out;
    if (api && strcmp(api, "chat") != 0 && strcmp(api, "completions") != 0) {
        lb_pz_fail(p, "api", "must be \"completions\" or \"chat\"");
        goto out;
    }
    if (end && strcmp(end, "wait") != 0 && strcmp(end, "cancel") != 0) {
        lb_pz_fail(p, "end", "must be \"wait\" or \"cancel\"");
        goto out;
    }
    sc->chat = api && strcmp(api, "chat") == 0;
    sc->end_cancel = end && strcmp(end, "cancel") == 0;
    if (!sc->name && !(sc->name = lb_default_name(p->file))) {
        lb_pz_fail(p, "name", "out of memory");
        goto out;
    }
    rc = 0;
out:
    free(api);
    free(end);
    return rc;
}

/* Numbers: duration_s, requests, seed, warmup_s, grace_s, timeout_s, vocab. */
static int lb_pz_numbers(struct lb_pz *p, struct lb_scenario *sc, json_t *root)
{
    long seed, lo, hi;
    if (lb_pz_num(p, root, "", "duration_s", 0, 0, INFINITY, &sc->duration_s) ||
        lb_pz_int(p, root, "", "requests", 0, 0, LONG_MAX / 2, &sc->requests) ||
        lb_pz_int(p, root, "", "seed", 1, 0, LONG_MAX / 2, &seed) ||
        lb_pz_num(p, root, "", "warmup_s", 0, 0, INFINITY, &sc->warmup_s) ||
        lb_pz_num(p, root, "", "grace_s", 120, 0, INFINITY, &sc->grace_s) ||
        lb_pz_num(p, root, "", "timeout_s", 600, 0, INFINITY, &sc->timeout_s))
        return -1;
    sc->seed = (uint64_t)seed;
    if (sc->duration_s <= 0 && sc->requests <= 0)
        return lb_pz_fail(p, "duration_s", "give duration_s or requests (one of them > 0)");
    if (!(sc->timeout_s > 0))
        return lb_pz_fail(p, "timeout_s", "must be > 0");
    json_t *v = json_object_get(root, "vocab");
    double a = 1000, b = 40000;
    if (v && lb_pz_pair(p, v, "vocab", &a, &b))
        return -1;
    lo = (long)a;
    hi = (long)b;
    if (a != floor(a) || b != floor(b) || lo < 0 || hi < lo || hi > INT32_MAX)
        return lb_pz_fail(p, "vocab", "needs whole numbers 0 <= lo <= hi");
    sc->vocab_lo = (int)lo;
    sc->vocab_hi = (int)hi;
    return 0;
}

int lb_scen_load(const char *path, struct lb_scenario *sc, char *err, size_t errlen)
{
    static const char *const keys[] = {"name",       "description", "api",       "model",
                                       "duration_s", "requests",    "seed",      "warmup_s",
                                       "grace_s",    "end",         "timeout_s", "vocab",
                                       "slo",        "tenants",     "actions",   NULL};
    struct lb_pz p = {.file = path, .err = err, .errlen = errlen};
    json_error_t jerr;
    memset(sc, 0, sizeof(*sc));
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        snprintf(err, errlen, "%s:%d: %s", path, jerr.line, jerr.text);
        return -1;
    }
    int rc = lb_pz_object(&p, root, "") || lb_pz_keys(&p, root, "", keys) ||
                     lb_pz_strings(&p, sc, root) || lb_pz_numbers(&p, sc, root) ||
                     lb_pz_slo(&p, json_object_get(root, "slo"), "slo", &sc->slo) ||
                     lb_pz_tenants(&p, sc, root) || lb_pz_actions(&p, sc, root)
                 ? -1
                 : 0;
    json_decref(root);
    if (rc)
        lb_scen_free(sc);
    return rc;
}

static void lb_tenant_free(struct lb_tenant *t)
{
    free(t->name);
    free(t->key);
    free(t->prefix);
    for (int i = 0; i < t->n_prompts; i++)
        free(t->prompts[i]);
    free(t->prompts);
    free(t->system);
}

void lb_scen_free(struct lb_scenario *sc)
{
    for (int i = 0; sc->tenants && i < sc->n_tenants; i++)
        lb_tenant_free(&sc->tenants[i]);
    for (int i = 0; sc->actions && i < sc->n_actions; i++)
        free(sc->actions[i].run);
    free(sc->tenants);
    free(sc->actions);
    free(sc->name);
    free(sc->description);
    free(sc->model);
    memset(sc, 0, sizeof(*sc));
}

/* 1 when name is one of the comma-separated names. */
static int lb_listed(const char *names, const char *name)
{
    size_t n = strlen(name);
    for (const char *s = names; *s;) {
        size_t k = strcspn(s, ",");
        if (k == n && strncmp(s, name, n) == 0)
            return 1;
        s += k + (s[k] == ',');
    }
    return 0;
}

int lb_scen_only(struct lb_scenario *sc, const char *names, char *err, size_t errlen)
{
    /* Every listed name must exist before anything is dropped. */
    for (const char *s = names; *s;) {
        size_t k = strcspn(s, ",");
        int found = 0;
        for (int i = 0; i < sc->n_tenants && !found; i++)
            found = strlen(sc->tenants[i].name) == k && strncmp(sc->tenants[i].name, s, k) == 0;
        if (!found && k > 0) {
            snprintf(err, errlen, "--only: no tenant \"%.*s\" in scenario %s", (int)k, s, sc->name);
            return -1;
        }
        s += k + (s[k] == ',');
    }
    int kept = 0;
    for (int i = 0; i < sc->n_tenants; i++) {
        if (lb_listed(names, sc->tenants[i].name))
            sc->tenants[kept++] = sc->tenants[i];
        else
            lb_tenant_free(&sc->tenants[i]);
    }
    sc->n_tenants = kept;
    if (kept == 0) {
        snprintf(err, errlen, "--only: no tenants left");
        return -1;
    }
    return 0;
}

void lb_scen_scale_rate(struct lb_scenario *sc, double f)
{
    if (!(f > 0))
        return;
    for (int i = 0; i < sc->n_tenants; i++) {
        sc->tenants[i].rate *= f;
        sc->tenants[i].every_s /= f;
    }
}

const char *lb_scen_path(const struct lb_scenario *sc)
{
    return sc->chat ? "/v1/chat/completions" : "/v1/completions";
}

/* ================================================================== bodies */

/* Synthetic text: short common words, one per token of the asked length
 * (roughly: a tokenizer may split or merge some). */
static const char *const lb_words[] = {
    "the",   "of",    "and",  "to",    "in",    "is",    "that",  "for",   "it",    "as",
    "was",   "with",  "be",   "by",    "on",    "not",   "he",    "this",  "are",   "or",
    "his",   "from",  "at",   "which", "but",   "have",  "an",    "had",   "they",  "you",
    "were",  "their", "one",  "all",   "we",    "can",   "her",   "has",   "there", "been",
    "if",    "more",  "when", "will",  "would", "who",   "so",    "no",    "time",  "water",
    "river", "city",  "book", "light", "house", "world", "green", "small", "north", "story"};
#define LB_N_WORDS ((int)(sizeof(lb_words) / sizeof(lb_words[0])))

/* Appends str to the growing buffer *buf (length *n, capacity *cap). */
static int lb_buf_add(char **buf, size_t *n, size_t *cap, const char *str)
{
    size_t k = strlen(str);
    if (*n + k + 1 > *cap) {
        size_t nc = (*cap ? *cap * 2 : 256) + k;
        char *nb = realloc(*buf, nc);
        if (!nb)
            return -1;
        *buf = nb;
        *cap = nc;
    }
    memcpy(*buf + *n, str, k + 1);
    *n += k;
    return 0;
}

/* The text of a text prompt: the prefix as words, then the prompts_file
 * line or prompt_len words. */
static char *lb_text_prompt(struct lb_tenant *t, int len)
{
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int rc = lb_buf_add(&buf, &n, &cap, "");
    for (int i = 0; rc == 0 && i < t->prefix_len; i++)
        rc = lb_buf_add(&buf, &n, &cap, i ? " " : "") ||
             lb_buf_add(&buf, &n, &cap, lb_words[t->prefix[i] % LB_N_WORDS]);
    if (rc == 0 && t->n_prompts > 0) {
        const char *line = t->prompts[lb_rng_range(&t->rng, 0, t->n_prompts - 1)];
        rc = lb_buf_add(&buf, &n, &cap, n ? " " : "") || lb_buf_add(&buf, &n, &cap, line);
    }
    for (int i = 0; rc == 0 && t->n_prompts == 0 && i < len; i++)
        rc = lb_buf_add(&buf, &n, &cap, n ? " " : "") ||
             lb_buf_add(&buf, &n, &cap, lb_words[lb_rng_range(&t->rng, 0, LB_N_WORDS - 1)]);
    if (rc) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* The prompt of a completions request: token ids (prefix + len drawn), or
 * a prompts_file line as a string. */
static json_t *lb_completion_prompt(const struct lb_scenario *sc, struct lb_tenant *t, int len)
{
    if (t->n_prompts > 0) {
        char *text = lb_text_prompt(t, len);
        json_t *s = text ? json_string(text) : NULL;
        free(text);
        return s;
    }
    json_t *ids = json_array();
    for (int i = 0; ids && i < t->prefix_len; i++)
        json_array_append_new(ids, json_integer(t->prefix[i]));
    for (int i = 0; ids && i < len; i++)
        json_array_append_new(ids, json_integer(lb_rng_range(&t->rng, sc->vocab_lo, sc->vocab_hi)));
    return ids;
}

static json_t *lb_chat_messages(struct lb_tenant *t, int len)
{
    char *text = lb_text_prompt(t, len);
    json_t *msgs = json_array();
    if (!text || !msgs) {
        free(text);
        json_decref(msgs);
        return NULL;
    }
    if (t->system)
        json_array_append_new(msgs,
                              json_pack("{s:s, s:s}", "role", "system", "content", t->system));
    json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", text));
    free(text);
    return msgs;
}

/* Whether and when this request's client vanishes. */
static void lb_draw_disconnect(struct lb_tenant *t, struct lb_record *rec)
{
    rec->disconnect_after = 0;
    rec->disconnect_at_s = 0;
    if (!(t->disconnect > 0) || lb_rng_unit(&t->rng) >= t->disconnect)
        return;
    if (rec->stream)
        rec->disconnect_after =
            (int)lb_rng_range(&t->rng, 1, rec->max_tokens > 2 ? rec->max_tokens - 1 : 1);
    else
        rec->disconnect_at_s = 0.05 + 1.95 * lb_rng_unit(&t->rng);
}

char *lb_scen_body(const struct lb_scenario *sc, struct lb_tenant *t, struct lb_record *rec,
                   size_t *len)
{
    /* Draw order is fixed (length, content, max_tokens, disconnect) so a
     * seed always gives the same requests. */
    int plen = t->n_prompts > 0 ? 0 : lb_dist_draw(&t->prompt_len, &t->rng);
    json_t *body = json_object();
    json_t *prompt = sc->chat ? lb_chat_messages(t, plen) : lb_completion_prompt(sc, t, plen);
    if (!body || !prompt) {
        json_decref(body);
        json_decref(prompt);
        return NULL;
    }
    rec->max_tokens = lb_dist_draw(&t->max_tokens, &t->rng);
    rec->stream = t->stream;
    rec->prompt_tokens = t->n_prompts > 0 || sc->chat ? 0 : t->prefix_len + plen;
    lb_draw_disconnect(t, rec);
    if (sc->model)
        json_object_set_new(body, "model", json_string(sc->model));
    json_object_set_new(body, sc->chat ? "messages" : "prompt", prompt);
    json_object_set_new(body, "max_tokens", json_integer(rec->max_tokens));
    json_object_set_new(body, "stream", json_boolean(t->stream));
    if (t->stream)
        json_object_set_new(body, "stream_options", json_pack("{s:b}", "include_usage", 1));
    if (t->ignore_eos)
        json_object_set_new(body, "ignore_eos", json_true());
    if (t->temperature >= 0)
        json_object_set_new(body, "temperature", json_real(t->temperature));
    if (t->priority >= 0)
        json_object_set_new(body, "priority", json_integer(t->priority));
    char *s = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (s && len)
        *len = strlen(s);
    return s;
}

/* ================================================================= records */

const char *lb_outcome_name(enum lb_outcome o)
{
    static const char *const names[LB_N_OUTCOMES] = {"pending", "ok",   "disconnected", "refused",
                                                     "failed",  "lost", "cut"};
    return (int)o >= 0 && o < LB_N_OUTCOMES ? names[o] : "unknown";
}

int lb_record_itl(struct lb_record *rec, float ms)
{
    if (rec->n_itl == rec->cap_itl) {
        int nc = rec->cap_itl ? rec->cap_itl * 2 : 64;
        float *nv = realloc(rec->itl_ms, sizeof(float) * (size_t)nc);
        if (!nv)
            return -1;
        rec->itl_ms = nv;
        rec->cap_itl = nc;
    }
    rec->itl_ms[rec->n_itl++] = ms;
    return 0;
}

void lb_record_free(struct lb_record *rec)
{
    free(rec->itl_ms);
    rec->itl_ms = NULL;
    rec->n_itl = rec->cap_itl = 0;
}
