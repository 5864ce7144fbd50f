/*
 * tests/unit/test_daemon_api.c — the OpenAI-compatible API of a real llmd
 * over TLS: /health, /v1/models, chat and completions with and without
 * streaming, exact usage, n with seeds, stop strings, logprobs, request ids,
 * keep-alive, priority clamping and the per-tenant request counter.
 *
 * One daemon serves the whole suite (model load takes seconds).  Token
 * counts are checked against the model's own tokenizer and chat template,
 * loaded here from the same GGUF file, and texts against each other: at
 * temperature 0 the model is deterministic, so the same prompt must give the
 * same text however it is sent.
 */
#include "model/model.h"
#include "tests/unit/util_llmd.h"

#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static struct ul_env *E;
static char KEY[128];
static struct gguf_file *GG;
static struct tok *TOK;
static struct tmpl *TMPL;

#define CHAT   "/v1/chat/completions"
#define COMPL  "/v1/completions"
#define PROMPT "The capital of France is"

static void setup(void)
{
    E = ul_env_new();
    ck_assert_msg(E != NULL, "test environment");
    ck_assert_int_eq(ul_tenant_add(E, "api", "--max-priority", "2", UL_END), 0);
    ck_assert_int_eq(ul_key_create(E, "api", KEY, sizeof(KEY), NULL), 0);
    const char *extra[] = {"--max-n", "8", NULL};
    ck_assert_msg(ul_start(E, extra) == 0, "llmd did not start");
    char err[256];
    ck_assert_msg(gguf_open(E->model, &GG, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(tok_load(GG, &TOK, err, sizeof(err)) == 0, "%s", err);
    char *src = gguf_get_strdup(GG, "tokenizer.chat_template");
    ck_assert_msg(tmpl_load(src, NULL, TOK, &TMPL, err, sizeof(err)) == 0, "%s", err);
    free(src);
}

static void teardown(void)
{
    if (E && E->pid > 0) {
        int st = ul_stop(E, 60);
        if (st != 0)
            ul_dump_log(E);
    }
    ul_env_free(E);
    tmpl_free(TMPL);
    tok_free(TOK);
    gguf_close(GG);
    E = NULL;
    TMPL = NULL;
    TOK = NULL;
    GG = NULL;
}

/* ------------------------------------------------------------- helpers */

static int count_tokens(const char *text, unsigned flags)
{
    int32_t *ids = NULL;
    int n = tok_encode(TOK, text, strlen(text), flags, &ids);
    free(ids);
    return n;
}

static int chat_prompt_tokens(const char *user)
{
    struct chat_msg m = {.role = "user", .content = user};
    char err[128];
    char *text = tmpl_apply(TMPL, &m, 1, 1, err, sizeof(err));
    ck_assert_msg(text != NULL, "%s", err);
    int n = count_tokens(text, TOK_ADD_BOS | TOK_PARSE_SPECIAL);
    free(text);
    return n;
}

static json_t *chat_body(const char *content, int max_tokens)
{
    return json_pack("{s:s, s:[{s:s, s:s}], s:i, s:f}", "model", E->model_id, "messages", "role",
                     "user", "content", content, "max_tokens", max_tokens, "temperature", 0.0);
}

static json_t *compl_body(json_t *prompt, int max_tokens)
{
    return json_pack("{s:s, s:o, s:i, s:f}", "model", E->model_id, "prompt", prompt, "max_tokens",
                     max_tokens, "temperature", 0.0);
}

/* POSTs body (consumed) and asserts a 200 with a JSON body. */
static void post_ok(const char *path, json_t *body, struct ul_resp *r)
{
    ck_assert_ptr_nonnull(body);
    int rc = ul_post(E, path, KEY, body, r);
    json_decref(body);
    ck_assert_msg(rc == 0, "no response from %s", path);
    ck_assert_msg(r->status == 200 && r->json, "%s: %d %s", path, r->status, r->body);
}

static long jint(json_t *j, const char *path)
{
    json_t *v = ul_jget(j, path);
    ck_assert_msg(json_is_integer(v), "%s is not an integer", path);
    return (long)json_integer_value(v);
}

/* Opens a stream: POSTs body (consumed) and reads the head (200 expected). */
static struct ul_conn *stream_open(const char *path, json_t *body, struct ul_resp *head)
{
    json_object_set_new(body, "stream", json_true());
    char *s = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    struct ul_conn *c = ul_connect(E, 60);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(ul_send(c, "POST", path, KEY, s, NULL), 0);
    free(s);
    ck_assert_int_eq(ul_read_head(c, head), 0);
    char ct[128];
    ck_assert_msg(head->status == 200, "stream status %d", head->status);
    ck_assert_ptr_nonnull(ul_header(head, "Content-Type", ct, sizeof(ct)));
    ck_assert_msg(strstr(ct, "text/event-stream") != NULL, "content type %s", ct);
    return c;
}

/* The whole stream: its JSON events, [DONE] required as the last event. */
static json_t *stream_all(const char *path, json_t *body, struct ul_resp *head)
{
    struct ul_conn *c = stream_open(path, body, head);
    int done = 0;
    json_t *ev = ul_sse_collect(c, &done);
    ul_conn_close(c);
    ck_assert_msg(ev != NULL, "stream broke");
    ck_assert_msg(done, "stream did not end with data: [DONE]");
    return ev;
}

/* Concatenates choice index's text (chat delta.content or completions text). */
static char *stream_text(json_t *events, int index, int chat, const char **finish)
{
    size_t len = 0;
    char *out = calloc(1, 1);
    *finish = NULL;
    for (size_t i = 0; i < json_array_size(events); i++) {
        json_t *choices = json_object_get(json_array_get(events, i), "choices");
        for (size_t k = 0; k < json_array_size(choices); k++) {
            json_t *ch = json_array_get(choices, k);
            if (json_integer_value(json_object_get(ch, "index")) != index)
                continue;
            const char *t = ul_jstr(ch, chat ? "delta.content" : "text");
            if (t) {
                char *grown = realloc(out, len + strlen(t) + 1);
                ck_assert_ptr_nonnull(grown);
                out = grown;
                strcpy(out + len, t);
                len += strlen(t);
            }
            const char *f = ul_jstr(ch, "finish_reason");
            if (f) {
                ck_assert_msg(*finish == NULL, "two finish_reasons for choice %d", index);
                *finish = f;
            }
        }
    }
    return out;
}

/* ---------------------------------------------------------------- tests */

START_TEST(health_answers_ok_without_a_key)
{
    struct ul_resp r;
    ck_assert_int_eq(ul_request(E, "GET", "/health", NULL, NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(ul_jstr(r.json, "status"), "ok");
    ul_resp_free(&r);
}
END_TEST

START_TEST(models_lists_the_served_model)
{
    struct ul_resp r;
    ck_assert_int_eq(ul_request(E, "GET", "/v1/models", KEY, NULL, NULL, &r), 0);
    ck_assert_msg(r.status == 200, "%d %s", r.status, r.body);
    ck_assert_str_eq(ul_jstr(r.json, "object"), "list");
    ck_assert_int_eq(json_array_size(ul_jget(r.json, "data")), 1);
    ck_assert_str_eq(ul_jstr(r.json, "data.0.id"), E->model_id);
    ck_assert_str_eq(ul_jstr(r.json, "data.0.object"), "model");
    ul_resp_free(&r);
}
END_TEST

START_TEST(chat_has_openai_shape_exact_usage_and_stops_at_max_tokens)
{
    struct ul_resp r;
    post_ok(CHAT, chat_body("Tell me a story about a cat.", 1), &r);
    json_t *j = r.json;
    const char *id = ul_jstr(j, "id");
    ck_assert_ptr_nonnull(id);
    ck_assert_msg(strncmp(id, "chatcmpl-", 9) == 0, "id %s", id);
    ck_assert_str_eq(ul_jstr(j, "object"), "chat.completion");
    ck_assert_str_eq(ul_jstr(j, "model"), E->model_id);
    ck_assert(json_is_integer(ul_jget(j, "created")));
    ck_assert_int_eq(json_array_size(ul_jget(j, "choices")), 1);
    ck_assert_int_eq(jint(j, "choices.0.index"), 0);
    ck_assert_str_eq(ul_jstr(j, "choices.0.message.role"), "assistant");
    ck_assert_ptr_nonnull(ul_jstr(j, "choices.0.message.content"));
    ck_assert_str_eq(ul_jstr(j, "choices.0.finish_reason"), "length");
    ck_assert_int_eq(jint(j, "usage.prompt_tokens"),
                     chat_prompt_tokens("Tell me a story about a cat."));
    ck_assert_int_eq(jint(j, "usage.completion_tokens"), 1);
    ck_assert_int_eq(jint(j, "usage.total_tokens"), jint(j, "usage.prompt_tokens") + 1);
    char rid[128];
    ck_assert_ptr_nonnull(ul_header(&r, "llmd-request-id", rid, sizeof(rid)));
    ck_assert_str_eq(rid, id);
    ul_resp_free(&r);
}
END_TEST

START_TEST(completion_prompt_as_string_and_as_token_ids_agree)
{
    struct ul_resp a, b;
    post_ok(COMPL, compl_body(json_string(PROMPT), 8), &a);
    ck_assert_str_eq(ul_jstr(a.json, "object"), "text_completion");
    ck_assert_msg(strncmp(ul_jstr(a.json, "id"), "cmpl-", 5) == 0, "id");
    int n = count_tokens(PROMPT, TOK_ADD_BOS);
    ck_assert_int_eq(jint(a.json, "usage.prompt_tokens"), n);
    long done = jint(a.json, "usage.completion_tokens");
    ck_assert(done >= 1 && done <= 8);
    const char *fin = ul_jstr(a.json, "choices.0.finish_reason");
    ck_assert_str_eq(fin, done == 8 ? "length" : "stop");

    int32_t *ids = NULL;
    ck_assert_int_eq(tok_encode(TOK, PROMPT, strlen(PROMPT), TOK_ADD_BOS, &ids), n);
    json_t *arr = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(arr, json_integer(ids[i]));
    free(ids);
    post_ok(COMPL, compl_body(arr, 8), &b);
    ck_assert_int_eq(jint(b.json, "usage.prompt_tokens"), n);
    ck_assert_str_eq(ul_jstr(b.json, "choices.0.text"), ul_jstr(a.json, "choices.0.text"));
    ul_resp_free(&a);
    ul_resp_free(&b);
}
END_TEST

START_TEST(completion_prompt_array_gives_one_choice_per_prompt)
{
    const char *p2 = "Once upon a time";
    struct ul_resp one, two, both;
    post_ok(COMPL, compl_body(json_string(PROMPT), 6), &one);
    post_ok(COMPL, compl_body(json_string(p2), 6), &two);
    post_ok(COMPL, compl_body(json_pack("[s,s]", PROMPT, p2), 6), &both);
    json_t *ch = ul_jget(both.json, "choices");
    ck_assert_int_eq(json_array_size(ch), 2);
    for (int i = 0; i < 2; i++) {
        json_t *c = json_array_get(ch, (size_t)i);
        long idx = (long)json_integer_value(json_object_get(c, "index"));
        ck_assert(idx == 0 || idx == 1);
        struct ul_resp *solo = idx == 0 ? &one : &two;
        ck_assert_str_eq(ul_jstr(c, "text"), ul_jstr(solo->json, "choices.0.text"));
    }
    ck_assert_int_eq(jint(both.json, "usage.prompt_tokens"),
                     count_tokens(PROMPT, TOK_ADD_BOS) + count_tokens(p2, TOK_ADD_BOS));
    ck_assert_int_eq(jint(both.json, "usage.completion_tokens"),
                     jint(one.json, "usage.completion_tokens") +
                         jint(two.json, "usage.completion_tokens"));
    ul_resp_free(&one);
    ul_resp_free(&two);
    ul_resp_free(&both);
}
END_TEST

START_TEST(chat_stream_matches_non_stream_and_ends_with_usage_then_done)
{
    const char *q = "What is the tallest mountain?";
    struct ul_resp plain, head;
    post_ok(CHAT, chat_body(q, 12), &plain);
    json_t *body = chat_body(q, 12);
    json_object_set_new(body, "stream_options", json_pack("{s:b}", "include_usage", 1));
    json_t *ev = stream_all(CHAT, body, &head);
    size_t n = json_array_size(ev);
    ck_assert_uint_ge(n, 3);
    json_t *first = json_array_get(ev, 0), *last = json_array_get(ev, n - 1);
    char *fs = json_dumps(first, JSON_COMPACT);
    ck_assert_msg(ul_jstr(first, "choices.0.delta.role") &&
                      strcmp(ul_jstr(first, "choices.0.delta.role"), "assistant") == 0,
                  "first chunk has no delta.role \"assistant\": %s", fs);
    free(fs);
    const char *id = ul_jstr(first, "id");
    char rid[128];
    ck_assert_ptr_nonnull(ul_header(&head, "llmd-request-id", rid, sizeof(rid)));
    ck_assert_str_eq(rid, id);
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(ev, i);
        ck_assert_str_eq(ul_jstr(e, "object"), "chat.completion.chunk");
        ck_assert_str_eq(ul_jstr(e, "id"), id);
        ck_assert_msg(i == n - 1 || !json_is_object(json_object_get(e, "usage")),
                      "usage before the last chunk");
    }
    /* the usage chunk: last, no choices, the same numbers as the plain answer */
    ck_assert(json_is_array(json_object_get(last, "choices")));
    ck_assert_int_eq(json_array_size(json_object_get(last, "choices")), 0);
    ck_assert_int_eq(jint(last, "usage.prompt_tokens"), jint(plain.json, "usage.prompt_tokens"));
    ck_assert_int_eq(jint(last, "usage.completion_tokens"),
                     jint(plain.json, "usage.completion_tokens"));
    const char *fin;
    char *text = stream_text(ev, 0, 1, &fin);
    ck_assert_str_eq(text, ul_jstr(plain.json, "choices.0.message.content"));
    ck_assert_ptr_nonnull(fin);
    ck_assert_str_eq(fin, ul_jstr(plain.json, "choices.0.finish_reason"));
    free(text);
    json_decref(ev);
    ul_resp_free(&plain);
    ul_resp_free(&head);
}
END_TEST

START_TEST(completion_stream_text_equals_non_stream_text)
{
    struct ul_resp plain, head;
    post_ok(COMPL, compl_body(json_string(PROMPT), 10), &plain);
    json_t *ev = stream_all(COMPL, compl_body(json_string(PROMPT), 10), &head);
    ck_assert_uint_ge(json_array_size(ev), 1);
    ck_assert_str_eq(ul_jstr(json_array_get(ev, 0), "object"), "text_completion");
    size_t i;
    json_t *e;
    /* no include_usage: no usage chunk */
    for (i = 0; i < json_array_size(ev) && (e = json_array_get(ev, i)); i++)
        ck_assert(!json_is_object(json_object_get(e, "usage")));
    const char *fin;
    char *text = stream_text(ev, 0, 0, &fin);
    ck_assert_str_eq(text, ul_jstr(plain.json, "choices.0.text"));
    ck_assert_ptr_nonnull(fin);
    ck_assert_str_eq(fin, ul_jstr(plain.json, "choices.0.finish_reason"));
    free(text);
    json_decref(ev);
    ul_resp_free(&plain);
    ul_resp_free(&head);
}
END_TEST

static json_t *sampled_body(int seed)
{
    json_t *b = chat_body("Write a word.", 8);
    json_object_set_new(b, "temperature", json_real(1.0));
    json_object_set_new(b, "n", json_integer(3));
    json_object_set_new(b, "seed", json_integer(seed));
    return b;
}

START_TEST(n3_with_a_seed_gives_three_choices_and_repeats_exactly)
{
    struct ul_resp a, b;
    post_ok(CHAT, sampled_body(1234), &a);
    post_ok(CHAT, sampled_body(1234), &b);
    json_t *ca = ul_jget(a.json, "choices"), *cb = ul_jget(b.json, "choices");
    ck_assert_int_eq(json_array_size(ca), 3);
    ck_assert_int_eq(json_array_size(cb), 3);
    const char *ta[3] = {0}, *tb[3] = {0};
    for (size_t i = 0; i < 3; i++) {
        long ia = (long)json_integer_value(ul_jget(json_array_get(ca, i), "index"));
        long ib = (long)json_integer_value(ul_jget(json_array_get(cb, i), "index"));
        ck_assert(ia >= 0 && ia < 3 && !ta[ia] && ib >= 0 && ib < 3 && !tb[ib]);
        ta[ia] = ul_jstr(json_array_get(ca, i), "message.content");
        tb[ib] = ul_jstr(json_array_get(cb, i), "message.content");
    }
    for (int i = 0; i < 3; i++)
        ck_assert_str_eq(ta[i], tb[i]);
    /* three sequences sharing one random stream would say the same thing */
    ck_assert_msg(strcmp(ta[0], ta[1]) != 0 || strcmp(ta[1], ta[2]) != 0,
                  "all three samples equal: %s", ta[0]);
    ck_assert_int_eq(jint(a.json, "usage.prompt_tokens"), chat_prompt_tokens("Write a word."));
    ul_resp_free(&a);
    ul_resp_free(&b);
}
END_TEST

START_TEST(stop_string_cuts_the_text_and_finishes_with_stop)
{
    struct ul_resp full, cut;
    post_ok(COMPL, compl_body(json_string(PROMPT), 16), &full);
    const char *t = ul_jstr(full.json, "choices.0.text");
    size_t len = strlen(t);
    ck_assert_msg(len >= 8, "text too short to cut: '%s'", t);
    char stop[4];
    memcpy(stop, t + len / 2, 3);
    stop[3] = '\0';
    size_t at = (size_t)(strstr(t, stop) - t);
    json_t *b = compl_body(json_string(PROMPT), 16);
    json_object_set_new(b, "stop", json_pack("[s]", stop));
    post_ok(COMPL, b, &cut);
    ck_assert_str_eq(ul_jstr(cut.json, "choices.0.finish_reason"), "stop");
    const char *ct = ul_jstr(cut.json, "choices.0.text");
    ck_assert_msg(strlen(ct) == at && strncmp(ct, t, at) == 0,
                  "stop '%s' in '%s': got '%s', want the first %zu bytes", stop, t, ct, at);
    ul_resp_free(&full);
    ul_resp_free(&cut);
}
END_TEST

START_TEST(chat_logprobs_have_one_entry_per_token_and_top_k_alternatives)
{
    json_t *b = chat_body("Name a colour.", 4);
    json_object_set_new(b, "logprobs", json_true());
    json_object_set_new(b, "top_logprobs", json_integer(3));
    struct ul_resp r;
    post_ok(CHAT, b, &r);
    json_t *content = ul_jget(r.json, "choices.0.logprobs.content");
    ck_assert_msg(json_is_array(content), "no logprobs.content: %s", r.body);
    ck_assert_int_eq((long)json_array_size(content), jint(r.json, "usage.completion_tokens"));
    size_t i;
    json_t *e;
    for (i = 0; i < json_array_size(content) && (e = json_array_get(content, i)); i++) {
        ck_assert_ptr_nonnull(ul_jstr(e, "token"));
        double lp = json_number_value(json_object_get(e, "logprob"));
        ck_assert(lp <= 0.0);
        json_t *top = json_object_get(e, "top_logprobs");
        ck_assert_int_eq(json_array_size(top), 3);
        /* greedy: the chosen token is the most likely one */
        double best = json_number_value(ul_jget(top, "0.logprob"));
        for (size_t k = 1; k < 3; k++)
            ck_assert(json_number_value(ul_jget(json_array_get(top, k), "logprob")) <= best);
        ck_assert_msg(lp >= best - 1e-4, "sampled %f below best %f at temperature 0", lp, best);
    }
    ul_resp_free(&r);
}
END_TEST

START_TEST(completion_logprobs_have_parallel_arrays)
{
    json_t *b = compl_body(json_string(PROMPT), 4);
    json_object_set_new(b, "logprobs", json_integer(2));
    struct ul_resp r;
    post_ok(COMPL, b, &r);
    long n = jint(r.json, "usage.completion_tokens");
    json_t *lp = ul_jget(r.json, "choices.0.logprobs");
    ck_assert_msg(json_is_object(lp), "no logprobs: %s", r.body);
    ck_assert_int_eq((long)json_array_size(json_object_get(lp, "tokens")), n);
    ck_assert_int_eq((long)json_array_size(json_object_get(lp, "token_logprobs")), n);
    ck_assert_int_eq((long)json_array_size(json_object_get(lp, "text_offset")), n);
    json_t *top = json_object_get(lp, "top_logprobs");
    ck_assert_int_eq((long)json_array_size(top), n);
    for (long i = 0; i < n; i++) {
        size_t k = json_object_size(json_array_get(top, (size_t)i));
        ck_assert_msg(k >= 1 && k <= 2, "top_logprobs[%ld] has %zu entries", i, k);
    }
    ul_resp_free(&r);
}
END_TEST

START_TEST(keep_alive_serves_two_requests_on_one_connection)
{
    struct ul_conn *c = ul_connect(E, 60);
    ck_assert_ptr_nonnull(c);
    json_t *b = chat_body("Hi", 2);
    char *body = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    char ids[2][128];
    for (int i = 0; i < 2; i++) {
        struct ul_resp r;
        ck_assert_int_eq(ul_send(c, "POST", CHAT, KEY, body, NULL), 0);
        ck_assert_msg(ul_read_response(c, &r) == 0, "request %d on the kept connection", i + 1);
        ck_assert_int_eq(r.status, 200);
        snprintf(ids[i], sizeof(ids[i]), "%s", ul_jstr(r.json, "id"));
        ul_resp_free(&r);
    }
    ck_assert_str_ne(ids[0], ids[1]);
    free(body);
    ul_conn_close(c);
}
END_TEST

START_TEST(priority_above_the_ceiling_is_clamped_and_said_in_a_header)
{
    json_t *b = chat_body("Hi", 1);
    json_object_set_new(b, "priority", json_integer(0));
    struct ul_resp r;
    post_ok(CHAT, b, &r);
    char v[128];
    ck_assert_msg(ul_header(&r, "llmd-priority", v, sizeof(v)) != NULL, "no llmd-priority header");
    ck_assert_str_eq(v, "2; clamped-from=0");
    ul_resp_free(&r);
    b = chat_body("Hi", 1);
    json_object_set_new(b, "priority", json_integer(5));
    post_ok(CHAT, b, &r);
    ck_assert_msg(!ul_header(&r, "llmd-priority", v, sizeof(v)) || !strstr(v, "clamped"),
                  "priority 5 is within the ceiling but got: %s", v);
    ul_resp_free(&r);
}
END_TEST

START_TEST(metrics_count_requests_per_tenant)
{
    double before = 0, after = 0, total = 0;
    int had = ul_metric(E, "llmd_requests_total", "tenant=\"api\",status=\"200\"", &before);
    ck_assert_int_ge(had, 0);
    struct ul_resp r;
    post_ok(CHAT, chat_body("Hi", 1), &r);
    ul_resp_free(&r);
    double deadline = ul_now() + 5;
    do {
        ck_assert_int_eq(
            ul_metric(E, "llmd_requests_total", "tenant=\"api\",status=\"200\"", &after), 1);
    } while (after < before + 1 && ul_now() < deadline && (ul_sleep(0.05), 1));
    ck_assert_msg(after >= before + 1, "llmd_requests_total went from %g to %g", before, after);
    ck_assert_int_eq(ul_metric(E, "llmd_kv_blocks_total", "pool=\"device\"", &total), 1);
    ck_assert_int_eq((int)total, 256);
}
END_TEST

START_TEST(sigterm_stops_the_daemon_without_sanitizer_reports)
{
    ul_signal(E, SIGTERM);
    ck_assert_msg(ul_wait_gone(E, 60) == 0, "llmd still running 60 s after SIGTERM");
    ck_assert_msg(ul_log_clean(E), "the daemon's log holds a sanitizer report");
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("daemon_api");
    TCase *tc = tcase_create("api");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, health_answers_ok_without_a_key);
    tcase_add_test(tc, models_lists_the_served_model);
    tcase_add_test(tc, chat_has_openai_shape_exact_usage_and_stops_at_max_tokens);
    tcase_add_test(tc, completion_prompt_as_string_and_as_token_ids_agree);
    tcase_add_test(tc, completion_prompt_array_gives_one_choice_per_prompt);
    tcase_add_test(tc, chat_stream_matches_non_stream_and_ends_with_usage_then_done);
    tcase_add_test(tc, completion_stream_text_equals_non_stream_text);
    tcase_add_test(tc, n3_with_a_seed_gives_three_choices_and_repeats_exactly);
    tcase_add_test(tc, stop_string_cuts_the_text_and_finishes_with_stop);
    tcase_add_test(tc, chat_logprobs_have_one_entry_per_token_and_top_k_alternatives);
    tcase_add_test(tc, completion_logprobs_have_parallel_arrays);
    tcase_add_test(tc, keep_alive_serves_two_requests_on_one_connection);
    tcase_add_test(tc, priority_above_the_ceiling_is_clamped_and_said_in_a_header);
    tcase_add_test(tc, metrics_count_requests_per_tenant);
    tcase_add_test(tc, sigterm_stops_the_daemon_without_sanitizer_reports); /* last */
    suite_add_tcase(s, tc);
    return s;
}
