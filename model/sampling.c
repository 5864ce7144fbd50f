/*
 * model/sampling.c — picking the next token from a row of logits.
 *
 * One step is: log-probabilities of the raw logits (when asked), then the
 * penalties, then either greedy argmax or a draw from the tempered,
 * filtered distribution.  The idea to hold on to: everything is done on
 * logits and candidate lists, never on a vocabulary-sized per-sequence
 * array.  A sequence keeps only a small hash map token -> counts (there may
 * be thousands of sequences), and its own RNG, so a seed reproduces the same
 * tokens whatever else shares the batch.  Filters that need an order never
 * sort the whole vocabulary: top-k keeps a k-sized heap in one pass, and
 * top-p first drops the tail that cannot reach the nucleus, then sorts the
 * rest chunk by chunk only as far as the nucleus goes.  Temperature and
 * min-p need no order at all: a plain draw allocates nothing.
 */
#include "model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Below this temperature the draw is replaced by argmax. */
#define SMP_MIN_TEMP 1e-5f
/* First chunk of the nucleus search; later chunks grow fourfold. */
#define SMP_NUCLEUS_CHUNK 64

/* One token's counts; token -1 marks an empty slot.  raw is scratch for one
 * smp_sample call: the logit before the penalty changed it. */
struct smp_count {
    int32_t token;
    int32_t n_prompt;
    int32_t n_gen;
    float raw;
};

struct smp_seq {
    struct smp_params p;
    uint64_t rng[4]; /* xoshiro256** state */
    struct smp_count *tab;
    uint32_t cap; /* power of two */
    uint32_t used;
};

/* A candidate token for the filters. */
struct smp_cand {
    float logit;
    int32_t id;
};

void smp_params_default(struct smp_params *p)
{
    memset(p, 0, sizeof(*p));
    p->temperature = 1.0f;
    p->top_k = 0;
    p->top_p = 1.0f;
    p->min_p = 0.0f;
    p->repetition_penalty = 1.0f;
}

/* ------------------------------------------------------------------ RNG */

static uint64_t smp_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t smp_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t smp_rng_next(struct smp_seq *s)
{
    uint64_t *r = s->rng;
    uint64_t out = smp_rotl(r[1] * 5, 7) * 9;
    uint64_t t = r[1] << 17;
    r[2] ^= r[0];
    r[3] ^= r[1];
    r[1] ^= r[2];
    r[0] ^= r[3];
    r[2] ^= t;
    r[3] = smp_rotl(r[3], 45);
    return out;
}

/* Uniform in [0, 1) with 53 random bits. */
static double smp_rng_unit(struct smp_seq *s)
{
    return (double)(smp_rng_next(s) >> 11) * 0x1.0p-53;
}

/* ------------------------------------------------------------ counts map */

static uint32_t smp_hash(int32_t token, uint32_t cap)
{
    /* Fibonacci hashing: token ids are small and dense, so spread them. */
    return (uint32_t)(((uint64_t)(uint32_t)token * 0x9e3779b97f4a7c15ULL) >> 32) & (cap - 1);
}

static int smp_map_alloc(struct smp_seq *s, uint32_t cap)
{
    struct smp_count *tab = malloc((size_t)cap * sizeof(*tab));
    if (!tab)
        return -1;
    for (uint32_t i = 0; i < cap; i++)
        tab[i] = (struct smp_count){.token = -1};
    s->tab = tab;
    s->cap = cap;
    s->used = 0;
    return 0;
}

static struct smp_count *smp_map_slot(struct smp_count *tab, uint32_t cap, int32_t token)
{
    uint32_t i = smp_hash(token, cap);
    while (tab[i].token != -1 && tab[i].token != token)
        i = (i + 1) & (cap - 1);
    return &tab[i];
}

static int smp_map_grow(struct smp_seq *s)
{
    struct smp_count *old = s->tab;
    uint32_t old_cap = s->cap, used = s->used;
    if (smp_map_alloc(s, old_cap * 2) != 0) {
        s->tab = old;
        s->cap = old_cap;
        return -1;
    }
    for (uint32_t i = 0; i < old_cap; i++)
        if (old[i].token != -1)
            *smp_map_slot(s->tab, s->cap, old[i].token) = old[i];
    s->used = used;
    free(old);
    return 0;
}

/* The entry for token, created when absent; NULL only when memory ran out. */
static struct smp_count *smp_map_get(struct smp_seq *s, int32_t token)
{
    struct smp_count *c = smp_map_slot(s->tab, s->cap, token);
    if (c->token == token)
        return c;
    /* Keep the load under 3/4 so probes stay short. */
    if ((s->used + 1) * 4 > s->cap * 3) {
        if (smp_map_grow(s) != 0)
            return NULL;
        c = smp_map_slot(s->tab, s->cap, token);
    }
    c->token = token;
    s->used++;
    return c;
}

/* ------------------------------------------------------------- sequences */

struct smp_seq *smp_seq_new(const struct smp_params *p)
{
    struct smp_seq *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    if (p)
        s->p = *p;
    else
        smp_params_default(&s->p);
    if (s->p.n_logprobs < 0)
        s->p.n_logprobs = 0;
    if (s->p.n_logprobs > SMP_MAX_LOGPROBS)
        s->p.n_logprobs = SMP_MAX_LOGPROBS;
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = smp_splitmix64(&x);
    if (smp_map_alloc(s, 64) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

void smp_seq_free(struct smp_seq *s)
{
    if (!s)
        return;
    free(s->tab);
    free(s);
}

/* Counting cannot report failure (the interface returns void): when memory
 * runs out the token simply goes uncounted, and only the penalties weaken. */
void smp_seq_prompt(struct smp_seq *s, int32_t token)
{
    struct smp_count *c = token >= 0 ? smp_map_get(s, token) : NULL;
    if (c)
        c->n_prompt++;
}

void smp_seq_accept(struct smp_seq *s, int32_t token)
{
    struct smp_count *c = token >= 0 ? smp_map_get(s, token) : NULL;
    if (c)
        c->n_gen++;
}

/* ------------------------------------------------------------ penalties */

/* Applies the penalties in place; returns 1 when any may have changed. */
static int smp_penalise(struct smp_seq *s, float *logits, int n_vocab)
{
    const struct smp_params *p = &s->p;
    int rep = p->repetition_penalty != 1.0f && p->repetition_penalty > 0;
    int open_ai = p->presence_penalty != 0 || p->frequency_penalty != 0;
    if (!rep && !open_ai)
        return 0;
    for (uint32_t i = 0; i < s->cap; i++) {
        struct smp_count *c = &s->tab[i];
        if (c->token < 0 || c->token >= n_vocab)
            continue;
        float l = logits[c->token];
        c->raw = l;
        /* CTRL: shrink towards "less likely" whatever the sign. */
        if (rep)
            l = l > 0 ? l / p->repetition_penalty : l * p->repetition_penalty;
        if (open_ai && c->n_gen > 0)
            l -= p->presence_penalty + p->frequency_penalty * (float)c->n_gen;
        logits[c->token] = l;
    }
    return 1;
}

/* The logit token had before smp_penalise changed it. */
static float smp_raw_logit(const struct smp_seq *s, const float *logits, int32_t token)
{
    const struct smp_count *c = smp_map_slot(s->tab, s->cap, token);
    return c->token == token ? c->raw : logits[token];
}

/* ------------------------------------------------------------- selection */

/* Total order used by every filter: larger logit first, then lower id, so
 * the result never depends on the selection algorithm. */
static int smp_before(const struct smp_cand *a, const struct smp_cand *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int smp_cmp_cand(const void *a, const void *b)
{
    return smp_before(a, b) ? -1 : smp_before(b, a) ? 1 : 0;
}

static void smp_swap(struct smp_cand *a, struct smp_cand *b)
{
    struct smp_cand t = *a;
    *a = *b;
    *b = t;
}

/* Min-heap on the order above: the root is the worst candidate kept. */
static void smp_heap_up(struct smp_cand *h, size_t i)
{
    while (i > 0 && smp_before(&h[(i - 1) / 2], &h[i])) {
        smp_swap(&h[(i - 1) / 2], &h[i]);
        i = (i - 1) / 2;
    }
}

static void smp_heap_down(struct smp_cand *h, size_t n, size_t i)
{
    for (;;) {
        size_t worst = i, l = 2 * i + 1, r = l + 1;
        if (l < n && smp_before(&h[worst], &h[l]))
            worst = l;
        if (r < n && smp_before(&h[worst], &h[r]))
            worst = r;
        if (worst == i)
            return;
        smp_swap(&h[i], &h[worst]);
        i = worst;
    }
}

/* The k best tokens of the row into h[0..k), sorted best first; returns how
 * many there are (fewer when the row is short).  One pass: once the heap is
 * full, most tokens cost a single comparison with its root.  NaNs never
 * enter. */
static size_t smp_top_k(const float *logits, int n_vocab, size_t k, struct smp_cand *h)
{
    size_t n = 0;
    for (int i = 0; i < n_vocab && k > 0; i++) {
        struct smp_cand c = {logits[i], i};
        if (isnan(c.logit))
            continue;
        if (n < k) {
            h[n] = c;
            smp_heap_up(h, n++);
        } else if (smp_before(&c, &h[0])) {
            h[0] = c;
            smp_heap_down(h, n, 0);
        }
    }
    if (n > 1)
        qsort(h, n, sizeof(*h), smp_cmp_cand);
    return n;
}

/* Partitions c[0..n) so that its k best come first (in no order):
 * quickselect with a median-of-three pivot, O(n) on average. */
static void smp_select(struct smp_cand *c, size_t n, size_t k)
{
    size_t lo = 0, hi = n; /* the k-th best lies in [lo, hi) */
    while (hi - lo > 1 && k > lo && k < hi) {
        size_t mid = lo + (hi - lo) / 2, last = hi - 1;
        if (smp_before(&c[mid], &c[lo]))
            smp_swap(&c[mid], &c[lo]);
        if (smp_before(&c[last], &c[lo]))
            smp_swap(&c[last], &c[lo]);
        if (smp_before(&c[mid], &c[last]))
            smp_swap(&c[mid], &c[last]);
        /* c[last] is now the median of the three: the pivot. */
        size_t store = lo;
        for (size_t i = lo; i < last; i++)
            if (smp_before(&c[i], &c[last]))
                smp_swap(&c[i], &c[store++]);
        smp_swap(&c[store], &c[last]);
        if (store < k)
            lo = store + 1;
        else
            hi = store;
    }
}

/* ------------------------------------------------------------ logprobs */

/* log(sum(exp(l))) over the row, around its maximum, summed in double. */
static double smp_logsumexp(const float *logits, int n)
{
    float m = -INFINITY;
    for (int i = 0; i < n; i++)
        if (logits[i] > m)
            m = logits[i];
    if (!isfinite(m))
        return m;
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += expf(logits[i] - m);
    /* sum >= 1 (the maximum adds exp(0)), which cppcheck cannot see. */
    // cppcheck-suppress invalidFunctionArg
    return m + log(sum);
}

static void smp_logprobs_top(const struct smp_seq *s, const float *logits, int n_vocab, double lse,
                             struct smp_logprob *lp)
{
    struct smp_cand top[SMP_MAX_LOGPROBS];
    int n = s->p.n_logprobs < n_vocab ? s->p.n_logprobs : n_vocab;
    lp->n_top = (int)smp_top_k(logits, n_vocab, (size_t)n, top);
    for (int i = 0; i < lp->n_top; i++) {
        lp->top_token[i] = top[i].id;
        lp->top_logprob[i] = (float)((double)top[i].logit - lse);
    }
}

/* ------------------------------------------------------------------ draw */

static int32_t smp_argmax(const float *logits, int n_vocab)
{
    int32_t best = 0;
    float top = logits[0];
    for (int i = 1; i < n_vocab; i++) {
        /* The second test lets a real number displace a NaN in slot 0. */
        if (logits[i] > top || isnan(top)) {
            best = i;
            top = logits[i];
        }
    }
    return best;
}

/* The unnormalised probability of a logit: 1 for the best token m. */
static float smp_weight(float logit, float m, float inv_t)
{
    return expf((logit - m) * inv_t);
}

static double smp_mass(const struct smp_cand *c, size_t n, float m, float inv_t)
{
    double total = 0;
    for (size_t i = 0; i < n; i++)
        total += smp_weight(c[i].logit, m, inv_t);
    return total;
}

/* The nucleus: the length of the shortest best-first prefix of c[0..n)
 * whose weight reaches goal.  Unless c is already sorted, it is sorted one
 * growing chunk at a time, only as far as the prefix needs. */
static size_t smp_nucleus(struct smp_cand *c, size_t n, int sorted, float m, float inv_t,
                          double goal)
{
    double cum = 0;
    size_t start = 0, chunk = sorted ? n : SMP_NUCLEUS_CHUNK;
    while (start < n) {
        size_t k = chunk < n - start ? chunk : n - start;
        if (!sorted) {
            smp_select(c + start, n - start, k);
            qsort(c + start, k, sizeof(*c), smp_cmp_cand);
        }
        for (size_t i = start; i < start + k; i++) {
            cum += smp_weight(c[i].logit, m, inv_t);
            if (cum >= goal)
                return i + 1;
        }
        start += k;
        chunk *= 4;
    }
    return n;
}

/* Draws one of c[0..n) in proportion to its weight. */
static int32_t smp_draw_cands(struct smp_seq *s, const struct smp_cand *c, size_t n, float m,
                              float inv_t)
{
    double u = smp_rng_unit(s) * smp_mass(c, n, m, inv_t), cum = 0;
    for (size_t i = 0; i < n; i++) {
        cum += smp_weight(c[i].logit, m, inv_t);
        if (u < cum)
            return c[i].id;
    }
    return c[n - 1].id; /* rounding left u at the very top */
}

/* Weight of the row's tokens at or above floor. */
static double smp_row_mass(const float *logits, int n_vocab, float m, float inv_t, float floor)
{
    double total = 0;
    for (int i = 0; i < n_vocab; i++)
        if (logits[i] >= floor)
            total += smp_weight(logits[i], m, inv_t);
    return total;
}

/* No top-k or top-p: a draw over the row itself, with no allocation.
 * Tokens under the min-p floor weigh nothing; best is the argmax. */
static int32_t smp_draw_row(struct smp_seq *s, const float *logits, int n_vocab, int32_t best,
                            float inv_t, float floor)
{
    float m = logits[best];
    double u = smp_rng_unit(s) * smp_row_mass(logits, n_vocab, m, inv_t, floor), cum = 0;
    for (int i = 0; i < n_vocab; i++) {
        if (!(logits[i] >= floor))
            continue;
        cum += smp_weight(logits[i], m, inv_t);
        if (u < cum)
            return i;
    }
    return best; /* rounding left u at the very top */
}

/* top-p without top-k.  Tokens lighter than theta = (1 - top_p) * total /
 * (2 n_vocab) weigh less than total - goal all together, so the nucleus is
 * complete before reaching any of them: they never become candidates, and
 * the sort only sees the head of the distribution. */
static int32_t smp_draw_nucleus(struct smp_seq *s, const float *logits, int n_vocab, float m,
                                float inv_t, float floor)
{
    float top_p = s->p.top_p > 0 ? s->p.top_p : 0;
    double total = smp_row_mass(logits, n_vocab, m, inv_t, floor);
    double theta = (1.0 - top_p) * total / (2.0 * n_vocab);
    float cut = m + (float)log(theta) / inv_t;
    if (cut > floor)
        floor = cut;
    if (floor > m)
        floor = m;
    struct smp_cand *c = malloc((size_t)n_vocab * sizeof(*c));
    if (!c)
        return -1;
    size_t n = 0;
    for (int i = 0; i < n_vocab; i++)
        if (logits[i] >= floor)
            c[n++] = (struct smp_cand){logits[i], i};
    n = smp_nucleus(c, n, 0, m, inv_t, top_p * total);
    int32_t tok = smp_draw_cands(s, c, n, m, inv_t);
    free(c);
    return tok;
}

/* top-k first, then min-p and top-p over the k kept. */
static int32_t smp_draw_top_k(struct smp_seq *s, const float *logits, int n_vocab, float inv_t)
{
    const struct smp_params *p = &s->p;
    struct smp_cand *c = malloc((size_t)p->top_k * sizeof(*c));
    if (!c)
        return -1;
    size_t n = smp_top_k(logits, n_vocab, (size_t)p->top_k, c);
    if (n == 0) {
        free(c);
        return smp_argmax(logits, n_vocab); /* all NaN */
    }
    float m = c[0].logit;
    if (!isfinite(m)) {
        int32_t tok = c[0].id; /* weights relative to an infinity are NaN */
        free(c);
        return tok;
    }
    if (p->min_p > 0) {
        float floor = p->min_p >= 1 ? m : m + logf(p->min_p) / inv_t;
        while (n > 1 && !(c[n - 1].logit >= floor))
            n--;
    }
    if (p->top_p < 1.0f)
        n = smp_nucleus(c, n, 1, m, inv_t, p->top_p * smp_mass(c, n, m, inv_t));
    int32_t tok = smp_draw_cands(s, c, n, m, inv_t);
    free(c);
    return tok;
}

/* Temperature, top-k, top-p and min-p, then one draw.  Returns -1 only when
 * memory for the candidate list ran out. */
static int32_t smp_draw(struct smp_seq *s, const float *logits, int n_vocab)
{
    const struct smp_params *p = &s->p;
    float inv_t = 1.0f / p->temperature;
    if (p->top_k > 0 && p->top_k < n_vocab)
        return smp_draw_top_k(s, logits, n_vocab, inv_t);
    int32_t best = smp_argmax(logits, n_vocab);
    float m = logits[best];
    if (!isfinite(m))
        return best;
    /* min_p keeps p >= min_p * p_max, i.e. logit >= m + t * log(min_p); it
     * is a ratio to the best token, so it commutes with the other filters. */
    float floor = -INFINITY;
    if (p->min_p > 0)
        floor = p->min_p >= 1 ? m : m + logf(p->min_p) / inv_t;
    if (p->top_p < 1.0f)
        return smp_draw_nucleus(s, logits, n_vocab, m, inv_t, floor);
    return smp_draw_row(s, logits, n_vocab, best, inv_t, floor);
}

int32_t smp_sample(struct smp_seq *s, float *logits, int n_vocab, struct smp_logprob *lp)
{
    if (!s || !logits || n_vocab <= 0)
        return -1;
    double lse = 0;
    if (lp) {
        lse = smp_logsumexp(logits, n_vocab);
        smp_logprobs_top(s, logits, n_vocab, lse, lp);
    }
    int penalised = smp_penalise(s, logits, n_vocab);
    int32_t tok;
    if (!(s->p.temperature >= SMP_MIN_TEMP) || s->p.top_k == 1)
        tok = smp_argmax(logits, n_vocab);
    else
        tok = smp_draw(s, logits, n_vocab);
    if (lp && tok >= 0) {
        lp->token = tok;
        float raw = penalised ? smp_raw_logit(s, logits, tok) : logits[tok];
        lp->logprob = (float)((double)raw - lse);
    }
    return tok;
}
