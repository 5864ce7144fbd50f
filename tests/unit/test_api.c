/*
 * tests/unit/test_api.c — the OpenAI wire format: every validation rule of
 * a chat or completions body (with the exact `param` it names), every form
 * of "prompt", and the renderers read back with jansson: bodies, SSE
 * framing, errors, the model list and log-probabilities, including tokens
 * that hold half a UTF-8 character.  Only the tokenizer of $LLMD_MODEL is
 * loaded (no weights).
 */
#include "daemon/api.h"

#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct api_limits LIM = {.model = "m", .max_n = 4, .max_prompt_ids = 8};

/* ------------------------------------------------------------ helpers */

/* Test bodies write ' for " so that they stay readable; parse turns them back. */
static int parse(enum api_kind kind, const char *body, struct api_request *r, struct api_error *e)
{
    size_t n = strlen(body);
    char *json = malloc(n + 1);
    for (size_t i = 0; i <= n; i++)
        json[i] = body[i] == '\'' ? '"' : body[i];
    memset(e, 0, sizeof(*e));
    int rc = api_parse(kind, json, n, &LIM, r, e);
    free(json);
    return rc;
}

/* Parses a body that must be accepted; the caller frees r. */
static void parse_ok(enum api_kind kind, const char *body, struct api_request *r)
{
    struct api_error e;
    int rc = parse(kind, body, r, &e);
    ck_assert_msg(rc == 0, "refused %s: %d %s (%s)", body, e.status, e.message, e.param);
}

/* A body of kind: whole ({...}), around a messages or prompt array ([...]),
 * or a valid one with fields added. */
static const char *body_of(enum api_kind kind, const char *s)
{
    static char buf[2048];
    const char *key = kind == API_CHAT ? "messages" : "prompt";
    const char *base = kind == API_CHAT ? "[{'role':'user','content':'hi'}]" : "'hi'";
    if (s[0] == '{')
        return s;
    if (s[0] == '[')
        snprintf(buf, sizeof(buf), "{'model':'m','%s':%s}", key, s);
    else
        snprintf(buf, sizeof(buf), "{'model':'m','%s':%s%s%s}", key, base, *s ? "," : "", s);
    return buf;
}

static const char *chat_body(const char *extra)
{
    return body_of(API_CHAT, extra);
}

static const char *cmpl_body(const char *extra)
{
    return body_of(API_COMPLETION, extra);
}

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

/* ----------------------------------------------------- chat parsing */

START_TEST(chat_minimal_body_gets_openai_defaults)
{
    struct api_request r;
    parse_ok(API_CHAT, chat_body(""), &r);
    ck_assert_int_eq(r.kind, API_CHAT);
    ck_assert_str_eq(r.model, "m");
    ck_assert_int_eq(r.n_msgs, 1);
    ck_assert_str_eq(r.msgs[0].role, "user");
    ck_assert_str_eq(r.msgs[0].content, "hi");
    ck_assert_int_eq(r.n, 1);
    ck_assert_int_eq(r.max_tokens, -1);
    ck_assert_int_eq(r.stream, 0);
    ck_assert_int_eq(r.include_usage, 0);
    ck_assert_int_eq(r.priority, -1);
    ck_assert_int_eq(r.seed_set, 0);
    ck_assert_int_eq(r.logprobs, 0);
    ck_assert_int_eq(r.n_stop, 0);
    ck_assert_ptr_null(r.user);
    ck_assert_float_eq(r.smp.temperature, 1.0f);
    ck_assert_float_eq(r.smp.top_p, 1.0f);
    ck_assert_int_eq(r.smp.top_k, 0);
    ck_assert_float_eq(r.smp.repetition_penalty, 1.0f);
    ck_assert_int_eq(r.smp.n_logprobs, 0);
    ck_assert_int_eq(r.n_prompts, 0);
    api_request_free(&r);
}
END_TEST

START_TEST(chat_roles_and_content_forms)
{
    struct api_request r;
    parse_ok(API_CHAT,
             "{'model':'m','messages':["
             "{'role':'developer','content':'be brief','name':'x'},"
             "{'role':'system','content':[]},"
             "{'role':'user','content':[{'type':'text','text':'ab'},"
             "{'type':'text','text':'c\\u00e9'}]},"
             "{'role':'assistant','content':null},"
             "{'role':'assistant'},"
             "{'role':'user','content':''}]}",
             &r);
    ck_assert_int_eq(r.n_msgs, 6);
    ck_assert_str_eq(r.msgs[0].role, "system");
    ck_assert_str_eq(r.msgs[0].content, "be brief");
    ck_assert_str_eq(r.msgs[1].role, "system");
    ck_assert_str_eq(r.msgs[1].content, "");
    ck_assert_str_eq(r.msgs[2].role, "user");
    ck_assert_str_eq(r.msgs[2].content, "ab"
                                        "c\xC3\xA9");
    ck_assert_str_eq(r.msgs[3].role, "assistant");
    ck_assert_str_eq(r.msgs[3].content, "");
    ck_assert_str_eq(r.msgs[4].content, "");
    ck_assert_str_eq(r.msgs[5].content, "");
    api_request_free(&r);
}
END_TEST

START_TEST(chat_every_field_is_read)
{
    struct api_request r;
    parse_ok(API_CHAT,
             chat_body("'stream':true,'stream_options':{'include_usage':true,'x':1},"
                       "'n':3,'max_tokens':50,'temperature':0.5,'top_p':0.9,"
                       "'top_k':40,'min_p':0.05,'seed':-7,'stop':['a','\\n\\n'],"
                       "'presence_penalty':-1.5,'frequency_penalty':2,"
                       "'repetition_penalty':1.1,'logprobs':true,'top_logprobs':5,"
                       "'user':'u1','priority':7,'unknown':{'a':[1]},"
                       "'tools':[],'logit_bias':{},'response_format':{'type':'text'},"
                       "'tool_choice':'none','metadata':null"),
             &r);
    ck_assert_int_eq(r.stream, 1);
    ck_assert_int_eq(r.include_usage, 1);
    ck_assert_int_eq(r.n, 3);
    ck_assert_int_eq(r.max_tokens, 50);
    ck_assert_float_eq_tol(r.smp.temperature, 0.5f, 1e-6);
    ck_assert_float_eq_tol(r.smp.top_p, 0.9f, 1e-6);
    ck_assert_int_eq(r.smp.top_k, 40);
    ck_assert_float_eq_tol(r.smp.min_p, 0.05f, 1e-6);
    ck_assert_int_eq(r.seed_set, 1);
    ck_assert_uint_eq(r.smp.seed, (uint64_t)-7);
    ck_assert_int_eq(r.n_stop, 2);
    ck_assert_str_eq(r.stop[0], "a");
    ck_assert_str_eq(r.stop[1], "\n\n");
    ck_assert_float_eq_tol(r.smp.presence_penalty, -1.5f, 1e-6);
    ck_assert_float_eq_tol(r.smp.frequency_penalty, 2.0f, 1e-6);
    ck_assert_float_eq_tol(r.smp.repetition_penalty, 1.1f, 1e-6);
    ck_assert_int_eq(r.logprobs, 1);
    ck_assert_int_eq(r.smp.n_logprobs, 5);
    ck_assert_str_eq(r.user, "u1");
    ck_assert_int_eq(r.priority, 7);
    api_request_free(&r);
}
END_TEST

START_TEST(null_means_absent_and_integers_serve_as_numbers)
{
    struct api_request r;
    parse_ok(API_CHAT,
             chat_body("'stream':null,'stream_options':null,'n':null,'temperature':0,"
                       "'top_p':1,'min_p':1,'presence_penalty':-2,'seed':null,"
                       "'stop':null,'user':null,'priority':0,'logprobs':null,"
                       "'top_logprobs':null,'tools':null,'functions':null"),
             &r);
    ck_assert_int_eq(r.n, 1);
    ck_assert_float_eq(r.smp.temperature, 0.0f);
    ck_assert_float_eq(r.smp.top_p, 1.0f);
    ck_assert_float_eq(r.smp.min_p, 1.0f);
    ck_assert_int_eq(r.seed_set, 0);
    ck_assert_int_eq(r.priority, 0);
    api_request_free(&r);
}
END_TEST

START_TEST(max_completion_tokens_wins_over_max_tokens)
{
    struct api_request r;
    parse_ok(API_CHAT, chat_body("'max_tokens':10,'max_completion_tokens':20"), &r);
    ck_assert_int_eq(r.max_tokens, 20);
    api_request_free(&r);
    parse_ok(API_CHAT, chat_body("'max_completion_tokens':7"), &r);
    ck_assert_int_eq(r.max_tokens, 7);
    api_request_free(&r);
    parse_ok(API_COMPLETION, cmpl_body("'max_tokens':3"), &r);
    ck_assert_int_eq(r.max_tokens, 3);
    api_request_free(&r);
}
END_TEST

START_TEST(chat_logprobs_without_top_logprobs)
{
    struct api_request r;
    parse_ok(API_CHAT, chat_body("'logprobs':true"), &r);
    ck_assert_int_eq(r.logprobs, 1);
    ck_assert_int_eq(r.smp.n_logprobs, 0);
    api_request_free(&r);
    parse_ok(API_CHAT, chat_body("'logprobs':false"), &r);
    ck_assert_int_eq(r.logprobs, 0);
    api_request_free(&r);
}
END_TEST

/* ----------------------------------------------- completions parsing */

START_TEST(prompt_as_string_keeps_nul_bytes)
{
    struct api_request r;
    parse_ok(API_COMPLETION, "{'model':'m','prompt':'a\\u0000b\\u00e9'}", &r);
    ck_assert_int_eq(r.kind, API_COMPLETION);
    ck_assert_int_eq(r.n_prompts, 1);
    ck_assert_uint_eq(r.prompts[0].len, 5);
    ck_assert_int_eq(memcmp(r.prompts[0].text, "a\0b\xC3\xA9", 6), 0);
    ck_assert_ptr_null(r.prompts[0].ids);
    ck_assert_int_eq(r.n_msgs, 0);
    api_request_free(&r);
}
END_TEST

START_TEST(prompt_as_array_of_strings)
{
    struct api_request r;
    parse_ok(API_COMPLETION, "{'model':'m','prompt':['one','','three'],'n':1}", &r);
    ck_assert_int_eq(r.n_prompts, 3);
    ck_assert_str_eq(r.prompts[0].text, "one");
    ck_assert_uint_eq(r.prompts[1].len, 0);
    ck_assert_str_eq(r.prompts[2].text, "three");
    api_request_free(&r);
}
END_TEST

START_TEST(prompt_as_token_ids)
{
    struct api_request r;
    parse_ok(API_COMPLETION, "{'model':'m','prompt':[1,0,49151,7,8,9,10,2147483647]}", &r);
    ck_assert_int_eq(r.n_prompts, 1);
    ck_assert_ptr_null(r.prompts[0].text);
    ck_assert_int_eq(r.prompts[0].n_ids, 8);
    ck_assert_int_eq(r.prompts[0].ids[0], 1);
    ck_assert_int_eq(r.prompts[0].ids[2], 49151);
    ck_assert_int_eq(r.prompts[0].ids[7], 2147483647);
    api_request_free(&r);
}
END_TEST

START_TEST(prompt_as_arrays_of_token_ids)
{
    struct api_request r;
    parse_ok(API_COMPLETION, "{'model':'m','prompt':[[5],[6,7]],'n':2}", &r);
    ck_assert_int_eq(r.n_prompts, 2);
    ck_assert_int_eq(r.n, 2);
    ck_assert_int_eq(r.prompts[0].n_ids, 1);
    ck_assert_int_eq(r.prompts[0].ids[0], 5);
    ck_assert_int_eq(r.prompts[1].n_ids, 2);
    ck_assert_int_eq(r.prompts[1].ids[1], 7);
    api_request_free(&r);
}
END_TEST

START_TEST(completions_logprobs_is_a_count)
{
    struct api_request r;
    parse_ok(API_COMPLETION, cmpl_body("'logprobs':3"), &r);
    ck_assert_int_eq(r.logprobs, 1);
    ck_assert_int_eq(r.smp.n_logprobs, 3);
    api_request_free(&r);
    parse_ok(API_COMPLETION, cmpl_body("'logprobs':0"), &r);
    ck_assert_int_eq(r.logprobs, 1);
    ck_assert_int_eq(r.smp.n_logprobs, 0);
    api_request_free(&r);
    parse_ok(API_COMPLETION, cmpl_body("'logprobs':null,'top_logprobs':99"), &r);
    ck_assert_int_eq(r.logprobs, 0);
    api_request_free(&r);
}
END_TEST

START_TEST(completions_harmless_unsupported_values_pass)
{
    struct api_request r;
    parse_ok(API_COMPLETION,
             cmpl_body("'echo':false,'suffix':'','best_of':2,'n':2,'logit_bias':null"), &r);
    ck_assert_int_eq(r.echo, 0);
    ck_assert_int_eq(r.n, 2);
    api_request_free(&r);
    parse_ok(API_COMPLETION, cmpl_body("'suffix':null"), &r);
    api_request_free(&r);
}
END_TEST

/* ------------------------------------------------------- refusals */

/* Bodies in these tables write ' for " (see parse). */
struct bad_case {
    enum api_kind kind;
    const char *body; /* a whole body ({...}), the messages or prompt array ([...]), or
                         fields added to a valid body */
    const char *param;
};

#define C API_CHAT
#define P API_COMPLETION
static const struct bad_case BAD[] = {
    /* model and messages */
    {C, "{'messages':[{'role':'user','content':'x'}]}", "model"},
    {C, "{'model':null,'messages':[{'role':'user','content':'x'}]}", "model"},
    {C, "{'model':5,'messages':[{'role':'user','content':'x'}]}", "model"},
    {C, "{'model':'m'}", "messages"},
    {C, "{'model':'m','messages':{}}", "messages"},
    {C, "{'model':'m','messages':'hi'}", "messages"},
    {C, "[]", "messages"},
    {C, "[5]", "messages[0]"},
    {C, "[{'content':'x'}]", "messages[0].role"},
    {C, "[{'role':5,'content':'x'}]", "messages[0].role"},
    {C, "[{'role':'tool','content':'x'}]", "messages[0].role"},
    {C, "[{'role':'function','content':'x'}]", "messages[0].role"},
    {C, "[{'role':'User','content':'x'}]", "messages[0].role"},
    {C, "[{'role':'user','content':'x'},{'role':'user'}]", "messages[1].content"},
    {C, "[{'role':'user','content':'x'},{'role':'system','content':null}]", "messages[1].content"},
    {C, "[{'role':'user','content':5}]", "messages[0].content"},
    {C, "[{'role':'user','content':{}}]", "messages[0].content"},
    {C, "[{'role':'user','content':'a\\u0000b'}]", "messages[0].content"},
    {C, "[{'role':'user','content':[5]}]", "messages[0].content[0]"},
    {C, "[{'role':'user','content':[{'type':'text','text':'a'},{'type':'image_url'}]}]",
     "messages[0].content[1].type"},
    {C, "[{'role':'user','content':[{'text':'a'}]}]", "messages[0].content[0].type"},
    {C, "[{'role':'user','content':[{'type':'text'}]}]", "messages[0].content[0].text"},
    {C, "[{'role':'user','content':[{'type':'text','text':1}]}]", "messages[0].content[0].text"},
    /* streaming */
    {C, "'stream':'yes'", "stream"},
    {C, "'stream':1", "stream"},
    {C, "'stream_options':{'include_usage':true}", "stream_options"},
    {C, "'stream':false,'stream_options':{}", "stream_options"},
    {C, "'stream':true,'stream_options':5", "stream_options"},
    {C, "'stream':true,'stream_options':{'include_usage':1}", "stream_options.include_usage"},
    {P, "'stream':true,'stream_options':{'include_usage':'y'}", "stream_options.include_usage"},
    /* lengths */
    {C, "'n':0", "n"},
    {C, "'n':5", "n"},
    {C, "'n':1.5", "n"},
    {C, "'n':2.0", "n"},
    {C, "'n':'2'", "n"},
    {C, "'max_tokens':0", "max_tokens"},
    {C, "'max_tokens':-1", "max_tokens"},
    {C, "'max_tokens':10.0", "max_tokens"},
    {C, "'max_tokens':'10'", "max_tokens"},
    {C, "'max_tokens':2147483648", "max_tokens"},
    {C, "'max_completion_tokens':0", "max_completion_tokens"},
    {C, "'max_tokens':5,'max_completion_tokens':true", "max_completion_tokens"},
    /* sampling */
    {C, "'temperature':-0.1", "temperature"},
    {C, "'temperature':2.01", "temperature"},
    {C, "'temperature':'1'", "temperature"},
    {C, "'top_p':0", "top_p"},
    {C, "'top_p':1.01", "top_p"},
    {C, "'top_p':-1", "top_p"},
    {C, "'top_k':-1", "top_k"},
    {C, "'top_k':1.5", "top_k"},
    {C, "'min_p':-0.1", "min_p"},
    {C, "'min_p':1.1", "min_p"},
    {C, "'seed':1.5", "seed"},
    {C, "'seed':'1'", "seed"},
    {C, "'presence_penalty':2.5", "presence_penalty"},
    {C, "'presence_penalty':-2.5", "presence_penalty"},
    {C, "'frequency_penalty':3", "frequency_penalty"},
    {C, "'frequency_penalty':'x'", "frequency_penalty"},
    {C, "'repetition_penalty':0", "repetition_penalty"},
    {C, "'repetition_penalty':-1", "repetition_penalty"},
    {C, "'repetition_penalty':1e300", "repetition_penalty"},
    /* stop */
    {C, "'stop':''", "stop"},
    {C, "'stop':['']", "stop"},
    {C, "'stop':['a','b','c','d','e']", "stop"},
    {C, "'stop':[1]", "stop"},
    {C, "'stop':['a',null]", "stop"},
    {C, "'stop':['a','b','']", "stop"},
    {C, "'stop':5", "stop"},
    {C, "'stop':{}", "stop"},
    {C, "'stop':'a\\u0000'", "stop"},
    /* logprobs */
    {C, "'logprobs':1", "logprobs"},
    {C, "'logprobs':true,'top_logprobs':21", "top_logprobs"},
    {C, "'logprobs':true,'top_logprobs':-1", "top_logprobs"},
    {C, "'logprobs':true,'top_logprobs':2.5", "top_logprobs"},
    {C, "'top_logprobs':2", "top_logprobs"},
    {C, "'logprobs':false,'top_logprobs':2", "top_logprobs"},
    {P, "'logprobs':true", "logprobs"},
    {P, "'logprobs':21", "logprobs"},
    {P, "'logprobs':-1", "logprobs"},
    /* extensions and the rest */
    {C, "'user':5", "user"},
    {C, "'priority':8", "priority"},
    {C, "'priority':-1", "priority"},
    {C, "'priority':1.5", "priority"},
    {C, "'logit_bias':{'50256':-100}", "logit_bias"},
    {C, "'logit_bias':5", "logit_bias"},
    {C, "'tools':[{'type':'function'}]", "tools"},
    {C, "'tools':{}", "tools"},
    {C, "'functions':[{}]", "functions"},
    {C, "'response_format':{'type':'json_object'}", "response_format"},
    {C, "'response_format':'text'", "response_format"},
    {C, "'response_format':{}", "response_format"},
    /* prompt */
    {P, "{'model':'m'}", "prompt"},
    {P, "{'model':'m','prompt':null}", "prompt"},
    {P, "{'model':'m','prompt':5}", "prompt"},
    {P, "{'model':'m','prompt':{}}", "prompt"},
    {P, "[]", "prompt"},
    {P, "[[]]", "prompt"},
    {P, "[[1],[]]", "prompt"},
    {P, "[1,'a']", "prompt"},
    {P, "['a',1]", "prompt"},
    {P, "['a',[1]]", "prompt"},
    {P, "[-1]", "prompt"},
    {P, "[1.5]", "prompt"},
    {P, "[true]", "prompt"},
    {P, "[null]", "prompt"},
    {P, "[2147483648]", "prompt"},
    {P, "[1,2,3,4,5,6,7,8,9]", "prompt"},
    {P, "[[1],[1,2,3,4,5,6,7,8,9]]", "prompt"},
    {P, "[[1],[1,'a']]", "prompt"},
    {P, "[[1],[[2]]]", "prompt"},
    {P, "['a','b','c','d','e']", "prompt"},
    {P, "{'model':'m','prompt':['a','b','c'],'n':2}", "prompt"},
    {P, "'echo':true", "echo"},
    {P, "'echo':'no'", "echo"},
    {P, "'suffix':'x'", "suffix"},
    {P, "'suffix':5", "suffix"},
    {P, "'best_of':2", "best_of"},
    {P, "'best_of':0", "best_of"},
    {P, "'n':2,'best_of':3", "best_of"},
    {P, "'logit_bias':{'1':1}", "logit_bias"},
};
#undef C
#undef P

START_TEST(bad_field_is_400_naming_it)
{
    const struct bad_case *c = &BAD[_i];
    const char *body = body_of(c->kind, c->body);
    struct api_request r;
    struct api_error e;
    int rc = parse(c->kind, body, &r, &e);
    ck_assert_msg(rc == -1, "accepted %s", body);
    ck_assert_int_eq(e.status, 400);
    ck_assert_str_eq(e.type, "invalid_request_error");
    ck_assert_msg(!strcmp(e.param, c->param), "%s: param '%s', want '%s' (%s)", body, e.param,
                  c->param, e.message);
    ck_assert_uint_gt(strlen(e.message), 10);
    ck_assert_str_eq(e.code, "");
    api_request_free(&r);
}
END_TEST

START_TEST(unsupported_fields_say_so)
{
    struct api_request r;
    struct api_error e;
    ck_assert_int_eq(parse(API_COMPLETION, cmpl_body("'echo':true"), &r, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.message, "not supported"));
    api_request_free(&r);
    ck_assert_int_eq(parse(API_CHAT, chat_body("'tools':[{}]"), &r, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.message, "not supported"));
    api_request_free(&r);
}
END_TEST

START_TEST(unknown_model_is_404_model_not_found)
{
    struct api_request r;
    struct api_error e;
    const char *body = "{'model':'gpt-4o','messages':[{'role':'user','content':'x'}]}";
    ck_assert_int_eq(parse(API_CHAT, body, &r, &e), -1);
    ck_assert_int_eq(e.status, 404);
    ck_assert_str_eq(e.type, "not_found_error");
    ck_assert_str_eq(e.code, "model_not_found");
    ck_assert_ptr_nonnull(strstr(e.message, "gpt-4o"));
    api_request_free(&r);
    ck_assert_int_eq(parse(API_COMPLETION, "{'model':'','prompt':'x'}", &r, &e), -1);
    ck_assert_int_eq(e.status, 404);
    api_request_free(&r);
}
END_TEST

START_TEST(body_that_is_not_a_json_object_is_400)
{
    static const char *const bodies[] = {"",   "{",    "{'model':'m',}",         "[1,2]", "'x'",
                                         "42", "null", "{'model':'m'} trailing", "\xff"};
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        struct api_request r;
        struct api_error e;
        ck_assert_int_eq(parse(API_CHAT, bodies[i], &r, &e), -1);
        ck_assert_int_eq(e.status, 400);
        ck_assert_str_eq(e.type, "invalid_request_error");
        ck_assert_str_eq(e.param, "");
        ck_assert_uint_gt(strlen(e.message), 10);
        api_request_free(&r);
    }
}
END_TEST

START_TEST(json_syntax_error_names_its_position)
{
    struct api_request r;
    struct api_error e;
    ck_assert_int_eq(parse(API_CHAT, "{'model':\n  'm' x}", &r, &e), -1);
    ck_assert_msg(strstr(e.message, "line 2") && strstr(e.message, "column"), "%s", e.message);
    api_request_free(&r);
}
END_TEST

/* Fails after allocating: the ASan build reports any leak of api_parse. */
START_TEST(failed_parse_frees_everything_it_built)
{
    static const char *const chats[] = {
        "{'model':'m','messages':[{'role':'user','content':'a'},"
        "{'role':'user','content':[{'type':'text','text':'b'}]},{'role':'tool'}]"
        "}",
        "{'model':'m','messages':[{'role':'user','content':'a'}],'stop':['x',"
        "'y',5],'user':'u'}",
        "{'model':'m','messages':[{'role':'user','content':'a'}],'user':'u',"
        "'priority':9}",
        "{'model':'other','messages':[{'role':'user','content':'a'}],'stop':'s'}",
    };
    static const char *const prompts[] = {
        "{'model':'m','prompt':['a','b',7]}",
        "{'model':'m','prompt':[[1,2],[3,-4]]}",
        "{'model':'m','prompt':['a','b'],'temperature':9}",
    };
    struct api_request r;
    struct api_error e;
    for (size_t i = 0; i < sizeof(chats) / sizeof(chats[0]); i++) {
        ck_assert_int_eq(parse(API_CHAT, chats[i], &r, &e), -1);
        api_request_free(&r);
        ck_assert_ptr_null(r.model); /* freed and cleared: a second free is harmless */
        api_request_free(&r);
    }
    for (size_t i = 0; i < sizeof(prompts) / sizeof(prompts[0]); i++) {
        ck_assert_int_eq(parse(API_COMPLETION, prompts[i], &r, &e), -1);
        api_request_free(&r);
    }
}
END_TEST

START_TEST(error_set_fills_and_truncates)
{
    struct api_error e;
    char long_param[200];
    memset(long_param, 'p', sizeof(long_param) - 1);
    long_param[sizeof(long_param) - 1] = '\0';
    api_error_set(&e, 429, "rate_limit_error", "rate_limit_exceeded", long_param, "wait %d s", 3);
    ck_assert_int_eq(e.status, 429);
    ck_assert_str_eq(e.type, "rate_limit_error");
    ck_assert_str_eq(e.code, "rate_limit_exceeded");
    ck_assert_uint_eq(strlen(e.param), sizeof(e.param) - 1);
    ck_assert_str_eq(e.message, "wait 3 s");
    api_error_set(&e, 500, "server_error", NULL, NULL, "x");
    ck_assert_str_eq(e.code, "");
    ck_assert_str_eq(e.param, "");
}
END_TEST

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
    Suite *s = suite_create("api");
    TCase *p = tcase_create("parse");
    tcase_add_test(p, chat_minimal_body_gets_openai_defaults);
    tcase_add_test(p, chat_roles_and_content_forms);
    tcase_add_test(p, chat_every_field_is_read);
    tcase_add_test(p, null_means_absent_and_integers_serve_as_numbers);
    tcase_add_test(p, max_completion_tokens_wins_over_max_tokens);
    tcase_add_test(p, chat_logprobs_without_top_logprobs);
    tcase_add_test(p, prompt_as_string_keeps_nul_bytes);
    tcase_add_test(p, prompt_as_array_of_strings);
    tcase_add_test(p, prompt_as_token_ids);
    tcase_add_test(p, prompt_as_arrays_of_token_ids);
    tcase_add_test(p, completions_logprobs_is_a_count);
    tcase_add_test(p, completions_harmless_unsupported_values_pass);
    tcase_add_loop_test(p, bad_field_is_400_naming_it, 0, (int)(sizeof(BAD) / sizeof(BAD[0])));
    tcase_add_test(p, unsupported_fields_say_so);
    tcase_add_test(p, unknown_model_is_404_model_not_found);
    tcase_add_test(p, body_that_is_not_a_json_object_is_400);
    tcase_add_test(p, json_syntax_error_names_its_position);
    tcase_add_test(p, failed_parse_frees_everything_it_built);
    tcase_add_test(p, error_set_fills_and_truncates);
    suite_add_tcase(s, p);
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
