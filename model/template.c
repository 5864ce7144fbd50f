/*
 * model/template.c — chat templates: messages in, prompt text out.
 *
 * A model's tokenizer.chat_template is a Jinja program.  Rather than carry a
 * Jinja interpreter, we recognise which well-known family the program is
 * (by markers such as "<|im_start|>" or "[INST]") and render that family in
 * C.  The one idea: each family is a small fixed layout, and the few things
 * that vary between models of a family (ChatML's default system prompt,
 * Llama 3.1's knowledge-date header, the spacing of Mistral's [INST]) are
 * read from the template's own string literals or its markers at load.
 * Every layout is checked against transformers' Jinja rendering of the real
 * templates (tests/reference/make_template_fixtures.py).
 *
 * What we reproduce, and where we depart:
 *  - chatml: <|im_start|>role\ncontent<|im_end|>\n, plus the default system
 *    message that SmolLM2's and Qwen's templates add when none is given.
 *  - llama3: <|begin_of_text|> then <|start_header_id|>role<|end_header_id|>
 *    \n\n trimmed content <|eot_id|>.  Templates with "Cutting Knowledge
 *    Date" (3.1 and later) always open with that system header, as they do;
 *    its date is the template's default ("26 Jul 2024" in 3.1), or today's
 *    date (local time, "%d %b %Y") when the template asks strftime_now, as
 *    transformers renders 3.2.  Tool calling is not rendered.
 *  - llama2: Meta's Llama-2-chat layout, system folded into the first user
 *    turn inside <<SYS>>; roles must alternate.
 *  - mistral: v0.1's layout, plus the 'v1', 'v3' and 'v3-tekken' variants
 *    (spacing, trimming, and whether the system text goes into the first or
 *    the last user turn).  v0.1 refuses a system message; we fold it into
 *    the first user turn as "SYSTEM\n\nUSER", as Mistral's 'v1' does.
 *    [SYSTEM_PROMPT] ('v7') templates are not recognised.
 */
#include "model/model.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TMPL_UNKNOWN_MSG "unknown chat template; set one by name: chatml, llama3, llama2, mistral"

enum tmpl_family { TMPL_CHATML, TMPL_LLAMA3, TMPL_LLAMA2, TMPL_MISTRAL };

/* How one Mistral variant lays out a turn. */
struct tmpl_mistral {
    const char *name;
    const char *inst_open;  /* before a user turn */
    const char *inst_close; /* after it */
    const char *asst_pre;   /* before an assistant turn */
    int trim_assistant;
    int system_last; /* system text goes into the last user turn, if it is last */
};

static const struct tmpl_mistral tmpl_mistral_v01 = {"mistral", "[INST] ", " [/INST]", "", 0, 0};
static const struct tmpl_mistral tmpl_mistral_v1 = {"mistral-v1", " [INST] ", " [/INST]",
                                                    " ",          0,          0};
static const struct tmpl_mistral tmpl_mistral_v3 = {"mistral-v3", "[INST] ", "[/INST]", " ", 1, 1};
static const struct tmpl_mistral tmpl_mistral_v3t = {
    "mistral-v3-tekken", "[INST]", "[/INST]", "", 0, 1};

struct tmpl {
    enum tmpl_family family;
    const char *name;
    const struct tmpl_mistral *mistral; /* TMPL_MISTRAL only */
    char *bos, *eos;
    char *default_system; /* chatml: used when the first message is not system */
    char *knowledge;      /* llama3: the "Cutting Knowledge Date" line; NULL: no header */
    char *date;           /* llama3: the header's date; NULL: today's */
};

static void tmpl_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void tmpl_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------ Jinja literals */

/* Reads the string literal whose opening quote is at p (ends before end)
 * and returns a malloc'd copy with Jinja's common escapes undone; *next is
 * set past the closing quote.  NULL when unterminated or out of memory. */
static char *tmpl_lex_string(const char *p, const char *end, const char **next)
{
    char quote = *p++;
    const char *close = p;
    while (close < end && *close != quote)
        close += *close == '\\' && close + 1 < end ? 2 : 1;
    if (close >= end)
        return NULL;
    char *out = malloc((size_t)(close - p) + 1), *o = out;
    if (!out)
        return NULL;
    while (p < close) {
        if (*p == '\\' && p + 1 < close) {
            char c = p[1];
            p += 2;
            *o++ = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    *next = close + 1;
    return out;
}

/* Walks the string literals inside {{ }} and {% %} blocks (text outside
 * blocks and {# #} comments is not code).  Calls fn on each until it
 * returns nonzero, and returns that. */
static int tmpl_each_literal(const char *src, int (*fn)(const char *lit, void *ctx), void *ctx)
{
    const char *p = src, *end = src + strlen(src);
    int in_block = 0;
    while (p < end) {
        if (!in_block) {
            const char *b = strchr(p, '{');
            if (!b || b + 1 >= end)
                return 0;
            if (b[1] == '{' || b[1] == '%') {
                in_block = 1;
                p = b + 2;
            } else if (b[1] == '#') {
                if ((b = strstr(b + 2, "#}")) == NULL)
                    return 0;
                p = b + 2;
            } else {
                p = b + 1;
            }
        } else if (*p == '\'' || *p == '"') {
            char *lit = tmpl_lex_string(p, end, &p);
            if (!lit)
                return 0;
            int r = fn(lit, ctx);
            free(lit);
            if (r)
                return r;
        } else if ((*p == '}' || *p == '%') && p + 1 < end && p[1] == '}') {
            in_block = 0;
            p += 2;
        } else {
            p++;
        }
    }
    return 0;
}

struct tmpl_find {
    const char *prefix; /* the literal must start with this */
    const char *stop;   /* and the value ends here (NULL: the whole literal) */
    char *found;
};

/* Keeps the first literal that starts with prefix and has text before
 * stop: the part between, or the whole literal when stop is NULL. */
static int tmpl_find_cb(const char *lit, void *ctx)
{
    struct tmpl_find *f = ctx;
    size_t np = strlen(f->prefix);
    if (strncmp(lit, f->prefix, np) != 0)
        return 0;
    if (!f->stop) {
        f->found = strdup(lit);
        return 1;
    }
    const char *s = strstr(lit + np, f->stop);
    if (!s || s == lit + np)
        return 0;
    f->found = strndup(lit + np, (size_t)(s - lit - np));
    return 1;
}

static char *tmpl_find_literal(const char *src, const char *prefix, const char *stop)
{
    struct tmpl_find f = {prefix, stop, NULL};
    tmpl_each_literal(src, tmpl_find_cb, &f);
    return f.found;
}

/* The literal assigned by "set date_string = '...'", or NULL. */
static char *tmpl_find_date(const char *src)
{
    const char *p = src;
    while ((p = strstr(p, "date_string")) != NULL) {
        p += strlen("date_string");
        const char *q = p;
        while (*q == ' ')
            q++;
        if (*q++ != '=')
            continue;
        while (*q == ' ')
            q++;
        if (*q == '\'' || *q == '"') {
            const char *next;
            return tmpl_lex_string(q, q + strlen(q), &next);
        }
    }
    return NULL;
}

/* ------------------------------------------------------------ loading */

/* The family and variant a template source is; -1 when none fits. */
static int tmpl_detect(const char *src, struct tmpl *tp)
{
    if (strstr(src, "<|im_start|>")) {
        /* Phi-4 and SmolVLM use the markers with other layouts. */
        if (strstr(src, "<|im_sep|>") || strstr(src, "<end_of_utterance>"))
            return -1;
        tp->family = TMPL_CHATML;
        tp->name = "chatml";
        return 0;
    }
    if (strstr(src, "<|start_header_id|>")) {
        tp->family = TMPL_LLAMA3;
        tp->name = "llama3";
        return 0;
    }
    if (!strstr(src, "[INST]") || strstr(src, "[SYSTEM_PROMPT]"))
        return -1;
    if (strstr(src, "<<SYS>>")) {
        tp->family = TMPL_LLAMA2;
        tp->name = "llama2";
        return 0;
    }
    tp->family = TMPL_MISTRAL;
    if (strstr(src, "[AVAILABLE_TOOLS]"))
        tp->mistral = strstr(src, "\"[INST]\"") ? &tmpl_mistral_v3t : &tmpl_mistral_v3;
    else if (strstr(src, "' [INST] '"))
        tp->mistral = &tmpl_mistral_v1;
    else
        tp->mistral = &tmpl_mistral_v01;
    tp->name = tp->mistral->name;
    return 0;
}

static int tmpl_by_name(const char *name, struct tmpl *tp)
{
    static const struct {
        const char *name;
        enum tmpl_family family;
        const struct tmpl_mistral *mistral;
    } names[] = {
        {"chatml", TMPL_CHATML, NULL},
        {"llama3", TMPL_LLAMA3, NULL},
        {"llama2", TMPL_LLAMA2, NULL},
        {"mistral", TMPL_MISTRAL, &tmpl_mistral_v01},
        {"mistral-v1", TMPL_MISTRAL, &tmpl_mistral_v1},
        {"mistral-v3", TMPL_MISTRAL, &tmpl_mistral_v3},
        {"mistral-v3-tekken", TMPL_MISTRAL, &tmpl_mistral_v3t},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(name, names[i].name) == 0) {
            tp->family = names[i].family;
            tp->mistral = names[i].mistral;
            tp->name = names[i].name;
            return 0;
        }
    }
    return -1;
}

/* What varies inside a family, read from the source's literals. */
static int tmpl_read_details(const char *src, struct tmpl *tp)
{
    if (tp->family == TMPL_CHATML) {
        /* Both "\n" escapes and raw newlines reach us as '\n' here. */
        tp->default_system = tmpl_find_literal(src, "<|im_start|>system\n", "<|im_end|>");
    } else if (tp->family == TMPL_LLAMA3) {
        tp->knowledge = tmpl_find_literal(src, "Cutting Knowledge Date:", NULL);
        if (tp->knowledge && !strstr(src, "strftime_now")) {
            tp->date = tmpl_find_date(src);
            if (!tp->date && !(tp->date = strdup("26 Jul 2024")))
                return -1;
        }
    }
    return 0;
}

/* BOS/EOS text from the vocabulary, or the family's usual spelling. */
static int tmpl_special_texts(const struct tok *t, struct tmpl *tp)
{
    const char *bos = tp->family == TMPL_LLAMA3 ? "<|begin_of_text|>" : "<s>";
    const char *eos = tp->family == TMPL_LLAMA3 ? "<|eot_id|>" : "</s>";
    if (t) {
        const char *b = tok_bos(t) >= 0 ? tok_text(t, tok_bos(t)) : NULL;
        const char *e = tok_eos(t) >= 0 ? tok_text(t, tok_eos(t)) : NULL;
        bos = b ? b : bos;
        eos = e ? e : eos;
    }
    tp->bos = strdup(bos);
    tp->eos = strdup(eos);
    return tp->bos && tp->eos ? 0 : -1;
}

int tmpl_load(const char *jinja, const char *name, const struct tok *t, struct tmpl **out,
              char *err, size_t errlen)
{
    *out = NULL;
    struct tmpl *tp = calloc(1, sizeof(*tp));
    if (!tp) {
        tmpl_err(err, errlen, "out of memory");
        return -1;
    }
    if (name) {
        if (tmpl_by_name(name, tp) != 0) {
            tmpl_err(err, errlen,
                     "unknown chat template name \"%s\" (known: chatml, llama3, llama2, mistral, "
                     "mistral-v1, mistral-v3, mistral-v3-tekken)",
                     name);
            free(tp);
            return -1;
        }
    } else if (!jinja || tmpl_detect(jinja, tp) != 0) {
        tmpl_err(err, errlen, "%s", TMPL_UNKNOWN_MSG);
        free(tp);
        return -1;
    }
    if ((!name && tmpl_read_details(jinja, tp) != 0) || tmpl_special_texts(t, tp) != 0) {
        tmpl_err(err, errlen, "out of memory");
        tmpl_free(tp);
        return -1;
    }
    *out = tp;
    return 0;
}

void tmpl_free(struct tmpl *tp)
{
    if (!tp)
        return;
    free(tp->bos);
    free(tp->eos);
    free(tp->default_system);
    free(tp->knowledge);
    free(tp->date);
    free(tp);
}

const char *tmpl_name(const struct tmpl *tp)
{
    return tp->name;
}

/* --------------------------------------------------------- rendering */

/* A growing output string; oom sticks once an allocation fails. */
struct tmpl_buf {
    char *p;
    size_t len, cap;
    int oom;
};

static void tmpl_put(struct tmpl_buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void tmpl_puts(struct tmpl_buf *b, const char *s)
{
    tmpl_put(b, s, strlen(s));
}

/* Bytes of the whitespace character at s (0 if none), by Python's
 * str.isspace, which Jinja's trim and str.strip() use. */
static size_t tmpl_space_len(const unsigned char *s, size_t n)
{
    if (n >= 1 && ((s[0] >= 0x09 && s[0] <= 0x0d) || (s[0] >= 0x1c && s[0] <= 0x20)))
        return 1;
    if (n >= 2 && s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0))
        return 2;
    if (n < 3)
        return 0;
    unsigned cp = ((s[0] & 0x0fu) << 12) | ((s[1] & 0x3fu) << 6) | (s[2] & 0x3fu);
    if ((s[0] & 0xf0) != 0xe0 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
        return 0;
    int space = cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
                cp == 0x202f || cp == 0x205f || cp == 0x3000;
    return space ? 3 : 0;
}

/* Appends s with leading and trailing whitespace removed. */
static void tmpl_put_trimmed(struct tmpl_buf *b, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s), k;
    while (n > 0 && (k = tmpl_space_len(p, n)) > 0)
        p += k, n -= k;
    for (int trimmed = 1; trimmed && n > 0;) {
        trimmed = 0;
        /* A whitespace character is at most 3 bytes: try each start. */
        for (k = 1; k <= 3 && k <= n; k++) {
            if (tmpl_space_len(p + n - k, k) == k) {
                n -= k;
                trimmed = 1;
                break;
            }
        }
    }
    tmpl_put(b, (const char *)p, n);
}

static void tmpl_put_today(struct tmpl_buf *b)
{
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t now = time(NULL);
    struct tm tm;
    char s[32];
    if (!localtime_r(&now, &tm))
        return;
    snprintf(s, sizeof(s), "%02d %s %d", tm.tm_mday, months[tm.tm_mon % 12], tm.tm_year + 1900);
    tmpl_puts(b, s);
}

static void tmpl_render_chatml(const struct tmpl *tp, const struct chat_msg *m, size_t n,
                               int add_gen, struct tmpl_buf *b)
{
    if (tp->default_system && strcmp(m[0].role, "system") != 0) {
        tmpl_puts(b, "<|im_start|>system\n");
        tmpl_puts(b, tp->default_system);
        tmpl_puts(b, "<|im_end|>\n");
    }
    for (size_t i = 0; i < n; i++) {
        tmpl_puts(b, "<|im_start|>");
        tmpl_puts(b, m[i].role);
        tmpl_puts(b, "\n");
        tmpl_puts(b, m[i].content);
        tmpl_puts(b, "<|im_end|>\n");
    }
    if (add_gen)
        tmpl_puts(b, "<|im_start|>assistant\n");
}

static void tmpl_llama3_header(struct tmpl_buf *b, const char *role)
{
    tmpl_puts(b, "<|start_header_id|>");
    tmpl_puts(b, role);
    tmpl_puts(b, "<|end_header_id|>\n\n");
}

static void tmpl_render_llama3(const struct tmpl *tp, const struct chat_msg *m, size_t n,
                               int add_gen, struct tmpl_buf *b)
{
    size_t i = 0;
    tmpl_puts(b, tp->bos);
    if (tp->knowledge) {
        /* 3.1+: the system turn always comes, carrying the dates. */
        tmpl_llama3_header(b, "system");
        tmpl_puts(b, tp->knowledge);
        tmpl_puts(b, "Today Date: ");
        if (tp->date)
            tmpl_puts(b, tp->date);
        else
            tmpl_put_today(b);
        tmpl_puts(b, "\n\n");
        if (strcmp(m[0].role, "system") == 0)
            tmpl_put_trimmed(b, m[i++].content);
        tmpl_puts(b, "<|eot_id|>");
    }
    for (; i < n; i++) {
        tmpl_llama3_header(b, m[i].role);
        tmpl_put_trimmed(b, m[i].content);
        tmpl_puts(b, "<|eot_id|>");
    }
    if (add_gen)
        tmpl_llama3_header(b, "assistant");
}

/* Llama 2: every user turn is <s>[INST] ... [/INST], the first one carrying
 * the system text; the whole turn text is stripped, as str.strip(). */
static void tmpl_render_llama2(const struct tmpl *tp, const struct chat_msg *m, size_t n,
                               struct tmpl_buf *b)
{
    const char *system = strcmp(m[0].role, "system") == 0 ? m[0].content : NULL;
    for (size_t i = system ? 1 : 0; i < n; i++) {
        if (strcmp(m[i].role, "assistant") == 0) {
            tmpl_puts(b, " ");
            tmpl_put_trimmed(b, m[i].content);
            tmpl_puts(b, " ");
            tmpl_puts(b, tp->eos);
            continue;
        }
        struct tmpl_buf turn = {0};
        if (system && i == 1) {
            tmpl_puts(&turn, "<<SYS>>\n");
            tmpl_puts(&turn, system);
            tmpl_puts(&turn, "\n<</SYS>>\n\n");
        }
        tmpl_puts(&turn, m[i].content);
        tmpl_puts(b, tp->bos);
        tmpl_puts(b, "[INST] ");
        if (turn.oom)
            b->oom = 1;
        else
            tmpl_put_trimmed(b, turn.p);
        tmpl_puts(b, " [/INST]");
        free(turn.p);
    }
}

static void tmpl_render_mistral(const struct tmpl *tp, const struct chat_msg *m, size_t n,
                                struct tmpl_buf *b)
{
    const struct tmpl_mistral *v = tp->mistral;
    const char *system = strcmp(m[0].role, "system") == 0 ? m[0].content : NULL;
    size_t first = system ? 1 : 0;
    tmpl_puts(b, tp->bos);
    for (size_t i = first; i < n; i++) {
        if (strcmp(m[i].role, "assistant") == 0) {
            tmpl_puts(b, v->asst_pre);
            if (v->trim_assistant)
                tmpl_put_trimmed(b, m[i].content);
            else
                tmpl_puts(b, m[i].content);
            tmpl_puts(b, tp->eos);
            continue;
        }
        tmpl_puts(b, v->inst_open);
        if (system && i == (v->system_last ? n - 1 : first)) {
            tmpl_puts(b, system);
            tmpl_puts(b, "\n\n");
        }
        tmpl_puts(b, m[i].content);
        tmpl_puts(b, v->inst_close);
    }
}

/* Roles, contents and, for the [INST] families, the alternation. */
static int tmpl_validate(const struct tmpl *tp, const struct chat_msg *m, size_t n, char *err,
                         size_t errlen)
{
    if (n == 0 || !m) {
        tmpl_err(err, errlen, "no messages");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const char *r = m[i].role;
        if (!r || (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant"))) {
            tmpl_err(err, errlen, "message %zu: unsupported role \"%s\" (system, user, assistant)",
                     i, r ? r : "(none)");
            return -1;
        }
        if (!m[i].content) {
            tmpl_err(err, errlen, "message %zu (%s) has no content", i, r);
            return -1;
        }
    }
    if (tp->family != TMPL_LLAMA2 && tp->family != TMPL_MISTRAL)
        return 0;
    size_t first = strcmp(m[0].role, "system") == 0 ? 1 : 0;
    if (first == n) {
        tmpl_err(err, errlen, "%s needs a user message after the system message", tp->name);
        return -1;
    }
    for (size_t i = first; i < n; i++) {
        const char *want = (i - first) % 2 == 0 ? "user" : "assistant";
        if (strcmp(m[i].role, want) != 0) {
            tmpl_err(err, errlen,
                     "message %zu is %s: %s needs user/assistant turns alternating after an "
                     "optional first system message",
                     i, m[i].role, tp->name);
            return -1;
        }
    }
    return 0;
}

char *tmpl_apply(const struct tmpl *tp, const struct chat_msg *msgs, size_t n, int add_gen,
                 char *err, size_t errlen)
{
    if (tmpl_validate(tp, msgs, n, err, errlen) != 0)
        return NULL;
    struct tmpl_buf b = {0};
    tmpl_put(&b, "", 0); /* an empty result is still a string */
    switch (tp->family) {
    case TMPL_CHATML:
        tmpl_render_chatml(tp, msgs, n, add_gen, &b);
        break;
    case TMPL_LLAMA3:
        tmpl_render_llama3(tp, msgs, n, add_gen, &b);
        break;
    case TMPL_LLAMA2: /* the prompt already ends where the answer starts */
        tmpl_render_llama2(tp, msgs, n, &b);
        break;
    case TMPL_MISTRAL:
        tmpl_render_mistral(tp, msgs, n, &b);
        break;
    }
    if (b.oom) {
        free(b.p);
        tmpl_err(err, errlen, "out of memory");
        return NULL;
    }
    return b.p;
}
