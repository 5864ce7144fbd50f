/*
 * tests/unit/test_api.c — the OpenAI wire format, parsing: every validation
 * rule of a chat or completions body (with the exact `param` it names) and
 * every form of "prompt".  The renderers are tested in test_api_render.c.
 */
#include "tests/unit/test_api_util.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ helpers */

/* Parses a body that must be accepted; the caller frees r. */
static void parse_ok(enum api_kind kind, const char *body, struct api_request *r)
{
    struct api_error e;
    int rc = parse(kind, body, r, &e);
    ck_assert_msg(rc == 0, "refused %s: %d %s (%s)", body, e.status, e.message, e.param);
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
    return s;
}
