/*
 * tests/unit/test_api_render.c — the OpenAI wire format, rendering: what
 * the renderers write, read back with jansson: bodies, SSE framing, errors,
 * the model list and log-probabilities, including tokens that hold half a
 * UTF-8 character.  Only the tokenizer of $LLMD_MODEL is loaded (no weights).
 */
#include "tests/unit/test_api_util.h"

#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ helpers */

/* A parsed JSON text that must be valid (jansson rejects bad UTF-8). */
static json_t *load(const char *s, size_t n)
{
    json_error_t je;
    json_t *j = json_loadb(s, n, JSON_ALLOW_NUL, &je);
    ck_assert_msg(j != NULL, "bad JSON (%s at %d): %.200s", je.text, je.position,
                  s + (je.position > 100 ? je.position - 100 : 0));
    return j;
}

/* The JSON inside one SSE event, checking its framing. */
static json_t *load_event(const char *s, size_t n)
{
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(strlen(s), n);
    ck_assert_uint_gt(n, 8);
    ck_assert_msg(!strncmp(s, "data: ", 6), "event does not start with 'data: ': %s", s);
    ck_assert_msg(!strcmp(s + n - 2, "\n\n"), "event does not end with a blank line");
    ck_assert_msg(memchr(s, '\n', n - 2) == NULL, "newline inside the event's data");
    return load(s + 6, n - 8);
}

static const char *jstr(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    ck_assert_msg(json_is_string(v), "'%s' is not a string", key);
    return json_string_value(v);
}

static json_int_t jint(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    ck_assert_msg(json_is_integer(v), "'%s' is not an integer", key);
    return json_integer_value(v);
}

static void assert_null_field(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    ck_assert_msg(v && json_is_null(v), "'%s' is not present as null", key);
}

static struct gguf_file *g_file;
static struct tok *g_tok;

static const struct tok *tokenizer(void)
{
    if (g_tok)
        return g_tok;
    const char *path = getenv("LLMD_MODEL");
    char err[256];
    if (!path)
        path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    ck_assert_msg(gguf_open(path, &g_file, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(tok_load(g_file, &g_tok, err, sizeof(err)) == 0, "%s", err);
    return g_tok;
}

static void tokenizer_done(void)
{
    tok_free(g_tok);
    gguf_close(g_file);
    g_tok = NULL;
    g_file = NULL;
}

/* ------------------------------------------------------- rendering */

static struct api_meta meta(enum api_kind kind)
{
    struct api_meta m = {.kind = kind,
                         .id = kind == API_CHAT ? "chatcmpl-abc" : "cmpl-abc",
                         .created = 1700000000,
                         .model = "m"};
    return m;
}

static void assert_head(const json_t *j, const char *id, const char *object)
{
    ck_assert_str_eq(jstr(j, "id"), id);
    ck_assert_str_eq(jstr(j, "object"), object);
    ck_assert_int_eq(jint(j, "created"), 1700000000);
    ck_assert_str_eq(jstr(j, "model"), "m");
}

START_TEST(chat_response_round_trips)
{
    struct api_meta m = meta(API_CHAT);
    const char text[] = "Hello \"world\"\n\t\\ caf\xC3\xA9 \xF0\x9F\x98\x80 \x01 </script>";
    struct api_choice ch[2] = {{text, sizeof(text) - 1, "stop", NULL}, {"", 0, "length", NULL}};
    struct api_usage u = {.prompt_tokens = 12, .completion_tokens = 5, .cached_tokens = 8};
    size_t n;
    char *s = api_render_response(&m, ch, 2, &u, &n);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(strlen(s), n);
    json_t *j = load(s, n);
    assert_head(j, "chatcmpl-abc", "chat.completion");
    json_t *choices = json_object_get(j, "choices");
    ck_assert_uint_eq(json_array_size(choices), 2);
    json_t *c0 = json_array_get(choices, 0), *c1 = json_array_get(choices, 1);
    ck_assert_int_eq(jint(c0, "index"), 0);
    ck_assert_int_eq(jint(c1, "index"), 1);
    json_t *msg = json_object_get(c0, "message");
    ck_assert_str_eq(jstr(msg, "role"), "assistant");
    json_t *content = json_object_get(msg, "content");
    ck_assert_uint_eq(json_string_length(content), sizeof(text) - 1);
    ck_assert_int_eq(memcmp(json_string_value(content), text, sizeof(text) - 1), 0);
    assert_null_field(c0, "logprobs");
    ck_assert_str_eq(jstr(c0, "finish_reason"), "stop");
    ck_assert_str_eq(jstr(c1, "finish_reason"), "length");
    ck_assert_str_eq(jstr(json_object_get(c1, "message"), "content"), "");
    json_t *usage = json_object_get(j, "usage");
    ck_assert_int_eq(jint(usage, "prompt_tokens"), 12);
    ck_assert_int_eq(jint(usage, "completion_tokens"), 5);
    ck_assert_int_eq(jint(usage, "total_tokens"), 17);
    ck_assert_int_eq(jint(json_object_get(usage, "prompt_tokens_details"), "cached_tokens"), 8);
    json_decref(j);
    free(s);
}
END_TEST

START_TEST(text_completion_response_round_trips)
{
    struct api_meta m = meta(API_COMPLETION);
    struct api_choice ch[1] = {{"a\0b", 3, NULL, NULL}};
    struct api_usage u = {3, 4, 0};
    size_t n;
    char *s = api_render_response(&m, ch, 1, &u, &n);
    json_t *j = load(s, n);
    assert_head(j, "cmpl-abc", "text_completion");
    json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
    ck_assert_int_eq(jint(c0, "index"), 0);
    json_t *text = json_object_get(c0, "text");
    ck_assert_uint_eq(json_string_length(text), 3);
    ck_assert_int_eq(memcmp(json_string_value(text), "a\0b", 3), 0);
    ck_assert_ptr_null(json_object_get(c0, "message"));
    assert_null_field(c0, "logprobs");
    assert_null_field(c0, "finish_reason");
    ck_assert_int_eq(jint(json_object_get(j, "usage"), "total_tokens"), 7);
    json_decref(j);
    free(s);
}
END_TEST

START_TEST(invalid_utf8_in_text_becomes_replacement_characters)
{
    /* maximal subparts: F0 9F 98 | C0 | AF | ED | A0 | 80 | E2 82 */
    const char raw[] = "a\xF0\x9F\x98"
                       "b\xC0\xAF"
                       "c\xED\xA0\x80"
                       "d\xE2\x82";
    json_t *j = api_json_text(raw, sizeof(raw) - 1);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(json_string_value(j), "a\xEF\xBF\xBD"
                                           "b\xEF\xBF\xBD\xEF\xBF\xBD"
                                           "c\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
                                           "d\xEF\xBF\xBD");
    json_decref(j);
    j = api_json_text("\xF4\x90\x80\x80", 4); /* past U+10FFFF */
    ck_assert_str_eq(json_string_value(j), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
    json_decref(j);
    j = api_json_text("\xF4\x8F\xBF\xBF", 4); /* U+10FFFF itself is fine */
    ck_assert_str_eq(json_string_value(j), "\xF4\x8F\xBF\xBF");
    json_decref(j);

    struct api_meta m = meta(API_CHAT);
    struct api_choice ch = {"x\xFFy", 3, "stop", NULL};
    size_t n;
    char *s = api_render_response(&m, &ch, 1, NULL, &n);
    json_t *body = load(s, n);
    json_t *msg = json_object_get(json_array_get(json_object_get(body, "choices"), 0), "message");
    ck_assert_str_eq(jstr(msg, "content"), "x\xEF\xBF\xBDy");
    assert_null_field(body, "usage");
    json_decref(body);
    free(s);
}
END_TEST

START_TEST(chat_chunks_are_sse_events_in_openai_shape)
{
    struct api_meta m = meta(API_CHAT);
    size_t n;
    char *s = api_render_chunk(&m, 1, 1, "", 0, NULL, NULL, &n);
    json_t *j = load_event(s, n);
    assert_head(j, "chatcmpl-abc", "chat.completion.chunk");
    ck_assert_ptr_null(json_object_get(j, "usage"));
    json_t *choices = json_object_get(j, "choices");
    ck_assert_uint_eq(json_array_size(choices), 1);
    json_t *c = json_array_get(choices, 0);
    ck_assert_int_eq(jint(c, "index"), 1);
    json_t *delta = json_object_get(c, "delta");
    ck_assert_str_eq(jstr(delta, "role"), "assistant");
    ck_assert_str_eq(jstr(delta, "content"), "");
    assert_null_field(c, "logprobs");
    assert_null_field(c, "finish_reason");
    json_decref(j);
    free(s);

    s = api_render_chunk(&m, 0, 0, "line\n\nbreak", 11, NULL, NULL, &n);
    j = load_event(s, n);
    delta = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "delta");
    ck_assert_ptr_null(json_object_get(delta, "role"));
    ck_assert_str_eq(jstr(delta, "content"), "line\n\nbreak");
    json_decref(j);
    free(s);

    s = api_render_chunk(&m, 0, 0, NULL, 0, "length", NULL, &n);
    j = load_event(s, n);
    c = json_array_get(json_object_get(j, "choices"), 0);
    ck_assert_uint_eq(json_object_size(json_object_get(c, "delta")), 0);
    ck_assert_str_eq(jstr(c, "finish_reason"), "length");
    json_decref(j);
    free(s);
}
END_TEST

START_TEST(include_usage_puts_null_usage_on_every_chunk)
{
    struct api_meta m = meta(API_CHAT);
    m.include_usage = 1;
    size_t n;
    char *s = api_render_chunk(&m, 0, 0, "x", 1, "stop", NULL, &n);
    json_t *j = load_event(s, n);
    assert_null_field(j, "usage");
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    ck_assert_str_eq(jstr(json_object_get(c, "delta"), "content"), "x");
    ck_assert_str_eq(jstr(c, "finish_reason"), "stop");
    json_decref(j);
    free(s);

    struct api_usage u = {10, 2, 4};
    s = api_render_usage_chunk(&m, &u, &n);
    j = load_event(s, n);
    assert_head(j, "chatcmpl-abc", "chat.completion.chunk");
    ck_assert(json_is_array(json_object_get(j, "choices")));
    ck_assert_uint_eq(json_array_size(json_object_get(j, "choices")), 0);
    json_t *usage = json_object_get(j, "usage");
    ck_assert_int_eq(jint(usage, "prompt_tokens"), 10);
    ck_assert_int_eq(jint(usage, "completion_tokens"), 2);
    ck_assert_int_eq(jint(usage, "total_tokens"), 12);
    ck_assert_int_eq(jint(json_object_get(usage, "prompt_tokens_details"), "cached_tokens"), 4);
    json_decref(j);
    free(s);
}
END_TEST

START_TEST(completion_chunks_carry_text)
{
    struct api_meta m = meta(API_COMPLETION);
    m.include_usage = 1;
    size_t n;
    char *s = api_render_chunk(&m, 2, 1, "t\xC3\xA9", 3, NULL, NULL, &n);
    json_t *j = load_event(s, n);
    assert_head(j, "cmpl-abc", "text_completion");
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    ck_assert_int_eq(jint(c, "index"), 2);
    ck_assert_str_eq(jstr(c, "text"), "t\xC3\xA9");
    ck_assert_ptr_null(json_object_get(c, "delta"));
    assert_null_field(c, "finish_reason");
    assert_null_field(j, "usage");
    json_decref(j);
    free(s);
    struct api_usage u = {1, 1, 0};
    s = api_render_usage_chunk(&m, &u, &n);
    j = load_event(s, n);
    ck_assert_str_eq(jstr(j, "object"), "text_completion");
    json_decref(j);
    free(s);
}
END_TEST

static void assert_error_json(const json_t *j, const char *message, const char *type,
                              const char *param, const char *code)
{
    ck_assert_uint_eq(json_object_size(j), 1);
    json_t *err = json_object_get(j, "error");
    ck_assert_uint_eq(json_object_size(err), 4);
    ck_assert_str_eq(jstr(err, "message"), message);
    ck_assert_str_eq(jstr(err, "type"), type);
    if (param)
        ck_assert_str_eq(jstr(err, "param"), param);
    else
        assert_null_field(err, "param");
    if (code)
        ck_assert_str_eq(jstr(err, "code"), code);
    else
        assert_null_field(err, "code");
}

START_TEST(errors_render_in_openai_shape)
{
    struct api_error e;
    api_error_set(&e, 400, "invalid_request_error", NULL, "messages[1].content", "bad \"%s\"",
                  "x\ny");
    size_t n;
    char *s = api_render_error(&e, &n);
    json_t *j = load(s, n);
    assert_error_json(j, "bad \"x\ny\"", "invalid_request_error", "messages[1].content", NULL);
    json_decref(j);
    free(s);

    api_error_set(&e, 401, "authentication_error", "invalid_api_key", NULL, "no");
    s = api_render_error_event(&e, &n);
    j = load_event(s, n);
    assert_error_json(j, "no", "authentication_error", NULL, "invalid_api_key");
    json_decref(j);
    free(s);

    /* a message cut in the middle of a character still renders */
    memset(e.message, 'a', sizeof(e.message));
    memcpy(e.message + sizeof(e.message) - 3, "\xE2\x82", 2);
    e.message[sizeof(e.message) - 1] = '\0';
    s = api_render_error(&e, &n);
    j = load(s, n);
    ck_assert_ptr_nonnull(strstr(jstr(json_object_get(j, "error"), "message"), "\xEF\xBF\xBD"));
    json_decref(j);
    free(s);
}
END_TEST

START_TEST(parse_errors_render_as_they_were_set)
{
    struct api_request r;
    struct api_error e;
    ck_assert_int_eq(parse(API_CHAT, chat_body("\"n\":9"), &r, &e), -1);
    api_request_free(&r);
    size_t n;
    char *s = api_render_error(&e, &n);
    json_t *j = load(s, n);
    assert_error_json(j, e.message, "invalid_request_error", "n", NULL);
    json_decref(j);
    free(s);
}
END_TEST

START_TEST(models_list_round_trips)
{
    size_t n;
    char *s = api_render_models("SmolLM2-135M-Instruct.Q4_1", 1700000001, &n);
    json_t *j = load(s, n);
    ck_assert_str_eq(jstr(j, "object"), "list");
    json_t *data = json_object_get(j, "data");
    ck_assert_uint_eq(json_array_size(data), 1);
    json_t *m = json_array_get(data, 0);
    ck_assert_str_eq(jstr(m, "id"), "SmolLM2-135M-Instruct.Q4_1");
    ck_assert_str_eq(jstr(m, "object"), "model");
    ck_assert_int_eq(jint(m, "created"), 1700000001);
    ck_assert_str_eq(jstr(m, "owned_by"), "llmd");
    json_decref(j);
    free(s);
}
END_TEST

/* ------------------------------------------------- log-probabilities */

/* The ids of text, from the real tokenizer. */
static int encode(const char *text, int32_t **ids)
{
    int n = tok_encode(tokenizer(), text, strlen(text), 0, ids);
    ck_assert_int_gt(n, 0);
    return n;
}

/* A logprob record for id with alternatives alt[0..n_top). */
static struct smp_logprob lp_of(int32_t id, float logprob, const int32_t *alt, int n_top)
{
    struct smp_logprob l = {.token = id, .logprob = logprob, .n_top = n_top};
    for (int i = 0; i < n_top; i++) {
        l.top_token[i] = alt[i];
        l.top_logprob[i] = -1.0f - (float)i;
    }
    return l;
}

/* Appends the values of a "bytes" array to buf. */
static size_t append_bytes(const json_t *bytes, unsigned char *buf, size_t at)
{
    ck_assert(json_is_array(bytes));
    for (size_t i = 0; i < json_array_size(bytes); i++) {
        json_t *b = json_array_get(bytes, i);
        ck_assert(json_is_integer(b));
        ck_assert_int_ge(json_integer_value(b), 0);
        ck_assert_int_le(json_integer_value(b), 255);
        buf[at++] = (unsigned char)json_integer_value(b);
    }
    return at;
}

START_TEST(chat_logprobs_keep_raw_bytes_of_split_characters)
{
    const char text[] = "\xF0\x9F\x98\x80 \xE6\x97\xA5\xE6\x9C\xAC h\xC3\xA9llo \xF0\x9F\xA6\x99";
    int32_t *ids;
    int n_ids = encode(text, &ids);
    ck_assert_int_gt(n_ids, 6); /* the emoji is split across tokens */
    struct api_lp *lp = api_lp_new(API_CHAT);
    int32_t alt[3] = {ids[0], ids[1], tok_eos(tokenizer())};
    for (int i = 0; i < n_ids; i++) {
        struct smp_logprob l = lp_of(ids[i], -0.25f * (float)i, alt, 3);
        ck_assert_int_eq(api_lp_add(lp, tokenizer(), &l, 0), 0);
    }
    ck_assert_int_eq(api_lp_count(lp), n_ids);
    struct api_meta m = meta(API_CHAT);
    m.n_logprobs = 2;
    struct api_choice ch = {text, sizeof(text) - 1, "stop", lp};
    size_t n;
    char *s = api_render_response(&m, &ch, 1, NULL, &n);
    json_t *j = load(s, n); /* jansson refuses invalid UTF-8: every "token" is valid */
    json_t *lpj = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "logprobs");
    json_t *content = json_object_get(lpj, "content");
    ck_assert_uint_eq(json_array_size(content), (size_t)n_ids);
    unsigned char raw[256] = {0};
    size_t at = 0;
    int replaced = 0;
    for (int i = 0; i < n_ids; i++) {
        json_t *e = json_array_get(content, (size_t)i);
        ck_assert_uint_eq(json_object_size(e), 4);
        replaced += strstr(jstr(e, "token"), "\xEF\xBF\xBD") != NULL;
        ck_assert_float_eq_tol(json_real_value(json_object_get(e, "logprob")), -0.25 * i, 1e-6);
        at = append_bytes(json_object_get(e, "bytes"), raw, at);
        json_t *tops = json_object_get(e, "top_logprobs");
        ck_assert_uint_eq(json_array_size(tops), 2); /* capped by n_logprobs */
        json_t *t1 = json_array_get(tops, 1);
        ck_assert_float_eq_tol(json_real_value(json_object_get(t1, "logprob")), -2.0, 1e-6);
        ck_assert(json_is_array(json_object_get(t1, "bytes")));
        ck_assert_ptr_null(json_object_get(t1, "top_logprobs"));
    }
    ck_assert_int_gt(replaced, 0); /* some token held only part of a character */
    ck_assert_uint_eq(at, sizeof(text) - 1);
    ck_assert_int_eq(memcmp(raw, text, at), 0);
    json_decref(j);
    free(s);
    api_lp_free(lp);
    free(ids);
    tokenizer_done();
}
END_TEST

START_TEST(completion_logprobs_in_parallel_lists)
{
    int32_t *ids;
    int n_ids = encode("Hello world, caf\xC3\xA9", &ids);
    struct api_lp *lp = api_lp_new(API_COMPLETION);
    int32_t alt[2] = {ids[1], ids[0]};
    size_t off = 0;
    for (int i = 0; i < n_ids; i++) {
        /* the first token's own text is among the alternatives: no duplicate */
        struct smp_logprob l = lp_of(ids[i], -0.5f, alt, i == 0 ? 2 : 1);
        ck_assert_int_eq(api_lp_add(lp, tokenizer(), &l, off), 0);
        off += 10;
    }
    struct api_meta m = meta(API_COMPLETION);
    struct api_choice ch = {"x", 1, "length", lp};
    size_t n;
    char *s = api_render_response(&m, &ch, 1, NULL, &n);
    json_t *j = load(s, n);
    json_t *lpj = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "logprobs");
    json_t *toks = json_object_get(lpj, "tokens"), *lps = json_object_get(lpj, "token_logprobs");
    json_t *tops = json_object_get(lpj, "top_logprobs"),
           *offs = json_object_get(lpj, "text_offset");
    ck_assert_uint_eq(json_array_size(toks), (size_t)n_ids);
    ck_assert_uint_eq(json_array_size(lps), (size_t)n_ids);
    ck_assert_uint_eq(json_array_size(tops), (size_t)n_ids);
    ck_assert_uint_eq(json_array_size(offs), (size_t)n_ids);
    char joined[128] = "";
    for (int i = 0; i < n_ids; i++) {
        strcat(joined, json_string_value(json_array_get(toks, (size_t)i)));
        ck_assert_float_eq_tol(json_real_value(json_array_get(lps, (size_t)i)), -0.5, 1e-6);
        ck_assert_int_eq(json_integer_value(json_array_get(offs, (size_t)i)), 10 * i);
    }
    ck_assert_str_eq(joined, "Hello world, caf\xC3\xA9");
    /* token 0: alternatives ids[1] (-1) and ids[0] (its own, -2 from the list) */
    json_t *d0 = json_array_get(tops, 0);
    ck_assert_uint_eq(json_object_size(d0), 2);
    ck_assert_float_eq_tol(
        json_real_value(json_object_get(d0, json_string_value(json_array_get(toks, 0)))), -2.0,
        1e-6);
    /* token 1: one alternative (ids[1] is itself) */
    ck_assert_uint_eq(json_object_size(json_array_get(tops, 1)), 1);
    /* token 2: alternative ids[1] plus the sampled token */
    json_t *d2 = json_array_get(tops, 2);
    ck_assert_uint_eq(json_object_size(d2), 2);
    ck_assert_float_eq_tol(
        json_real_value(json_object_get(d2, json_string_value(json_array_get(toks, 2)))), -0.5,
        1e-6);
    json_decref(j);
    free(s);
    api_lp_free(lp);
    free(ids);
    tokenizer_done();
}
END_TEST

START_TEST(chunk_renders_logprobs_then_clears_them)
{
    int32_t *ids;
    int n_ids = encode("\xF0\x9F\x98\x80", &ids);
    ck_assert_int_ge(n_ids, 2);
    struct api_lp *lp = api_lp_new(API_CHAT);
    struct smp_logprob l = lp_of(ids[0], -0.1f, NULL, 0);
    ck_assert_int_eq(api_lp_add(lp, tokenizer(), &l, 0), 0);
    struct api_meta m = meta(API_CHAT);
    size_t n;
    char *s = api_render_chunk(&m, 0, 1, "", 0, NULL, lp, &n);
    ck_assert_int_eq(api_lp_count(lp), 0);
    json_t *j = load_event(s, n);
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    json_t *content = json_object_get(json_object_get(c, "logprobs"), "content");
    ck_assert_uint_eq(json_array_size(content), 1);
    json_t *e = json_array_get(content, 0);
    ck_assert_ptr_nonnull(strstr(jstr(e, "token"), "\xEF\xBF\xBD"));
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(e, "bytes"), 0)), 0xF0);
    ck_assert_uint_eq(json_array_size(json_object_get(e, "top_logprobs")), 0);
    json_decref(j);
    free(s);
    /* nothing added since: the next chunk has no logprobs */
    s = api_render_chunk(&m, 0, 0, "x", 1, NULL, lp, &n);
    j = load_event(s, n);
    assert_null_field(json_array_get(json_object_get(j, "choices"), 0), "logprobs");
    json_decref(j);
    free(s);
    api_lp_free(lp);
    free(ids);
    tokenizer_done();
}
END_TEST

START_TEST(control_token_shows_its_vocabulary_text)
{
    const struct tok *t = tokenizer();
    int32_t eos = tok_eos(t);
    ck_assert(tok_is_control(t, eos));
    struct api_lp *lp = api_lp_new(API_CHAT);
    struct smp_logprob l = lp_of(eos, -INFINITY, NULL, 0);
    ck_assert_int_eq(api_lp_add(lp, t, &l, 0), 0);
    json_t *j = api_lp_json(lp, 0);
    json_t *e = json_array_get(json_object_get(j, "content"), 0);
    ck_assert_str_eq(jstr(e, "token"), tok_text(t, eos));
    ck_assert_uint_eq(json_array_size(json_object_get(e, "bytes")), strlen(tok_text(t, eos)));
    ck_assert(json_is_number(json_object_get(e, "logprob"))); /* JSON has no -inf */
    ck_assert_float_eq_tol(json_number_value(json_object_get(e, "logprob")), -9999.0, 1e-6);
    json_decref(j);
    api_lp_free(lp);
    tokenizer_done();
}
END_TEST

START_TEST(every_token_of_the_vocabulary_renders_as_valid_json)
{
    const struct tok *t = tokenizer();
    int nv = tok_vocab_size(t);
    struct api_lp *lp = api_lp_new(API_CHAT);
    for (int32_t id = 0; id < nv; id++) {
        struct smp_logprob l = lp_of(id, -1.0f, NULL, 0);
        ck_assert_int_eq(api_lp_add(lp, t, &l, 0), 0);
    }
    struct api_meta m = meta(API_CHAT);
    size_t n;
    char *s = api_render_chunk(&m, 0, 0, "", 0, NULL, lp, &n);
    json_t *j = load_event(s, n);
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    ck_assert_uint_eq(json_array_size(json_object_get(json_object_get(c, "logprobs"), "content")),
                      (size_t)nv);
    json_decref(j);
    free(s);
    api_lp_free(lp);
    tokenizer_done();
}
END_TEST

START_TEST(lp_rejects_missing_arguments)
{
    struct api_lp *lp = api_lp_new(API_COMPLETION);
    struct smp_logprob l = {0};
    ck_assert_int_eq(api_lp_add(lp, NULL, &l, 0), -1);
    ck_assert_int_eq(api_lp_add(NULL, tokenizer(), &l, 0), -1);
    ck_assert_int_eq(api_lp_count(lp), 0);
    ck_assert_int_eq(api_lp_count(NULL), 0);
    api_lp_free(lp);
    api_lp_free(NULL);
    tokenizer_done();
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("api_render");
    TCase *r = tcase_create("render");
    tcase_add_test(r, chat_response_round_trips);
    tcase_add_test(r, text_completion_response_round_trips);
    tcase_add_test(r, invalid_utf8_in_text_becomes_replacement_characters);
    tcase_add_test(r, chat_chunks_are_sse_events_in_openai_shape);
    tcase_add_test(r, include_usage_puts_null_usage_on_every_chunk);
    tcase_add_test(r, completion_chunks_carry_text);
    tcase_add_test(r, errors_render_in_openai_shape);
    tcase_add_test(r, parse_errors_render_as_they_were_set);
    tcase_add_test(r, models_list_round_trips);
    suite_add_tcase(s, r);
    TCase *l = tcase_create("logprobs");
    tcase_set_timeout(l, 120);
    tcase_add_test(l, chat_logprobs_keep_raw_bytes_of_split_characters);
    tcase_add_test(l, completion_logprobs_in_parallel_lists);
    tcase_add_test(l, chunk_renders_logprobs_then_clears_them);
    tcase_add_test(l, control_token_shows_its_vocabulary_text);
    tcase_add_test(l, every_token_of_the_vocabulary_renders_as_valid_json);
    tcase_add_test(l, lp_rejects_missing_arguments);
    suite_add_tcase(s, l);
    return s;
}
