/*
 * daemon/api_render.c — response bodies and server-sent events in OpenAI's
 * shapes: chat.completion, text_completion, their streaming chunks, usage,
 * errors and the model list.
 *
 * Everything is built as a jansson tree and dumped compactly, so escaping is
 * jansson's job; the one thing we must do ourselves is hand it valid UTF-8
 * (api_json_text), because a byte-level tokenizer can put half a character
 * into a token's text.  An SSE event is "data: " + JSON + "\n\n".
 */
#include "daemon/api.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ UTF-8 -- */

/* How many bytes at s follow the rules of one UTF-8 sequence (Unicode
 * table 3-7: no overlongs, surrogates or code points past U+10FFFF), with
 * *need the sequence's length; 0 when s[0] cannot start one. */
static size_t utf8_scan(const unsigned char *s, size_t n, size_t *need)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    *need = c < 0x80                 ? 1
            : c >= 0xC2 && c <= 0xDF ? 2
            : c >= 0xE0 && c <= 0xEF ? 3
            : c >= 0xF0 && c <= 0xF4 ? 4
                                     : 0;
    if (*need == 0)
        return 0;
    if (c == 0xE0)
        lo = 0xA0;
    else if (c == 0xED)
        hi = 0x9F;
    else if (c == 0xF0)
        lo = 0x90;
    else if (c == 0xF4)
        hi = 0x8F;
    size_t k = 1;
    for (; k < *need && k < n; k++) {
        if (s[k] < (k == 1 ? lo : 0x80) || s[k] > (k == 1 ? hi : 0xBF))
            break;
    }
    return k;
}

/* Length of the well-formed sequence at s, or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    size_t need, k = utf8_scan(s, n, &need);
    return need && k == need ? k : 0;
}

/* A maximal invalid subpart (what becomes one U+FFFD): the bytes that were
 * still a valid start of a sequence, or the one byte that could not be. */
static size_t utf8_bad_len(const unsigned char *s, size_t n)
{
    size_t need, k = utf8_scan(s, n, &need);
    return k ? k : 1;
}

json_t *api_json_text(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    size_t i = 0;
    while (i < len) {
        size_t k = utf8_seq(u + i, len - i);
        if (!k)
            break;
        i += k;
    }
    if (i == len)
        return json_stringn(s ? s : "", len);
    /* Invalid: rebuild with U+FFFD; each byte grows to at most 3. */
    char *buf = malloc(3 * len + 1);
    if (!buf)
        return NULL;
    size_t m = 0;
    memcpy(buf, s, i);
    m = i;
    while (i < len) {
        size_t k = utf8_seq(u + i, len - i);
        if (k) {
            memcpy(buf + m, s + i, k);
            m += k;
            i += k;
        } else {
            memcpy(buf + m, "\xEF\xBF\xBD", 3);
            m += 3;
            i += utf8_bad_len(u + i, len - i);
        }
    }
    json_t *j = json_stringn(buf, m);
    free(buf);
    return j;
}

/* ------------------------------------------------------------ output -- */

/* The compact text of root (consumed), malloc'd.  Nine significant digits
 * give back every float exactly. */
static char *render_dump(json_t *root, size_t *len)
{
    char *s = root ? json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(root);
    if (len)
        *len = s ? strlen(s) : 0;
    return s;
}

/* One server-sent event: "data: " JSON "\n\n". */
static char *render_event(json_t *root, size_t *len)
{
    size_t n;
    char *js = render_dump(root, &n);
    char *ev = js ? malloc(n + 9) : NULL;
    if (ev) {
        memcpy(ev, "data: ", 6);
        memcpy(ev + 6, js, n);
        memcpy(ev + 6 + n, "\n\n", 3);
    }
    free(js);
    if (len)
        *len = ev ? n + 8 : 0;
    return ev;
}

static json_t *render_str_or_null(const char *s)
{
    return s && *s ? api_json_text(s, strlen(s)) : json_null();
}

/* The fields every body of a completion carries, in OpenAI's order. */
static json_t *render_head(const struct api_meta *m, const char *object)
{
    return json_pack("{s:o, s:s, s:I, s:o}", "id", render_str_or_null(m->id), "object", object,
                     "created", (json_int_t)m->created, "model", render_str_or_null(m->model));
}

static json_t *render_usage(const struct api_usage *u)
{
    if (!u)
        return json_null();
    return json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", u->prompt_tokens,
                     "completion_tokens", u->completion_tokens, "total_tokens",
                     u->prompt_tokens + u->completion_tokens, "prompt_tokens_details",
                     "cached_tokens", u->cached_tokens);
}

static json_t *render_logprobs(const struct api_meta *m, const struct api_lp *lp)
{
    json_t *j = lp ? api_lp_json(lp, m->n_logprobs) : NULL;
    return j ? j : json_null();
}

static json_t *render_choice(const struct api_meta *m, int index, const struct api_choice *c)
{
    json_t *text = api_json_text(c->text, c->text ? c->len : 0);
    json_t *ch = json_pack("{s:i}", "index", index);
    if (m->kind == API_CHAT)
        json_object_set_new(ch, "message",
                            json_pack("{s:s, s:o}", "role", "assistant", "content", text));
    else
        json_object_set_new(ch, "text", text);
    json_object_set_new(ch, "logprobs", render_logprobs(m, c->lp));
    json_object_set_new(ch, "finish_reason", render_str_or_null(c->finish));
    return ch;
}

char *api_render_response(const struct api_meta *m, const struct api_choice *ch, int n,
                          const struct api_usage *u, size_t *len)
{
    json_t *root = render_head(m, m->kind == API_CHAT ? "chat.completion" : "text_completion");
    json_t *choices = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(choices, render_choice(m, i, &ch[i]));
    json_object_set_new(root, "choices", choices);
    json_object_set_new(root, "usage", render_usage(u));
    return render_dump(root, len);
}

/* A chat delta: role when the choice opens, content unless this is a bare
 * finish (OpenAI's last chunk of a choice has an empty delta). */
static json_t *render_delta(int first, const char *text, size_t len, const char *finish)
{
    json_t *d = json_object();
    if (first)
        json_object_set_new(d, "role", json_string("assistant"));
    if (first || len > 0 || !finish)
        json_object_set_new(d, "content", api_json_text(text, text ? len : 0));
    return d;
}

char *api_render_chunk(const struct api_meta *m, int index, int first, const char *text, size_t len,
                       const char *finish, struct api_lp *lp, size_t *outlen)
{
    int chat = m->kind == API_CHAT;
    json_t *root = render_head(m, chat ? "chat.completion.chunk" : "text_completion");
    json_t *ch = json_pack("{s:i}", "index", index);
    if (chat)
        json_object_set_new(ch, "delta", render_delta(first, text, len, finish));
    else
        json_object_set_new(ch, "text", api_json_text(text, text ? len : 0));
    json_object_set_new(ch, "logprobs", render_logprobs(m, api_lp_count(lp) ? lp : NULL));
    json_object_set_new(ch, "finish_reason", render_str_or_null(finish));
    json_object_set_new(root, "choices", json_pack("[o]", ch));
    if (m->include_usage)
        json_object_set_new(root, "usage", json_null());
    api_lp_clear(lp);
    return render_event(root, outlen);
}

char *api_render_usage_chunk(const struct api_meta *m, const struct api_usage *u, size_t *len)
{
    json_t *root =
        render_head(m, m->kind == API_CHAT ? "chat.completion.chunk" : "text_completion");
    json_object_set_new(root, "choices", json_array());
    json_object_set_new(root, "usage", render_usage(u));
    return render_event(root, len);
}

static json_t *render_error_json(const struct api_error *e)
{
    return json_pack("{s:{s:o, s:o, s:o, s:o}}", "error", "message",
                     api_json_text(e->message, strnlen(e->message, sizeof(e->message))), "type",
                     render_str_or_null(e->type), "param", render_str_or_null(e->param), "code",
                     render_str_or_null(e->code));
}

char *api_render_error(const struct api_error *e, size_t *len)
{
    return render_dump(render_error_json(e), len);
}

char *api_render_error_event(const struct api_error *e, size_t *len)
{
    return render_event(render_error_json(e), len);
}

char *api_render_models(const char *model, long created, size_t *len)
{
    json_t *m = json_pack("{s:o, s:s, s:I, s:s}", "id", render_str_or_null(model), "object",
                          "model", "created", (json_int_t)created, "owned_by", "llmd");
    return render_dump(json_pack("{s:s, s:[o]}", "object", "list", "data", m), len);
}
