/*
 * daemon/api_parse.c — request bodies of /v1/chat/completions and
 * /v1/completions into a struct api_request.
 *
 * Every field a client may send is checked for type and range, and an error
 * names the field at fault in `param` ("messages[1].content"), as OpenAI
 * does.  JSON null counts as absent for optional fields.  Fields we do not
 * know are ignored; fields we know but do not implement (tools, suffix,
 * logit_bias ...) are refused rather than silently dropped, so a client never
 * gets an answer to a question it did not ask.  Everything the request keeps
 * is copied out of the JSON tree, which is freed before returning.
 */
#include "daemon/api.h"

#include <jansson.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API_MAX_PRIORITY 7 /* DB_PRIO_MAX: priorities are 0 .. 7 */

void api_error_set(struct api_error *e, int status, const char *type, const char *code,
                   const char *param, const char *fmt, ...)
{
    if (!e)
        return;
    memset(e, 0, sizeof(*e));
    e->status = status;
    snprintf(e->type, sizeof(e->type), "%s", type ? type : "");
    snprintf(e->code, sizeof(e->code), "%s", code ? code : "");
    snprintf(e->param, sizeof(e->param), "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
}

/* ---------------------------------------------------------- helpers -- */

/* Returns -1 so that a check can end with `return bad(...)`. */
#define bad(e, param, ...)                                                                         \
    (api_error_set((e), 400, "invalid_request_error", NULL, (param), __VA_ARGS__), -1)

static int unsupported(struct api_error *e, const char *param)
{
    return bad(e, param, "'%s' is not supported by this server.", param);
}

static const char *api_json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a decimal number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

static int wrong_type(struct api_error *e, const char *param, const char *want, const json_t *v)
{
    return bad(e, param, "Invalid type for '%s': expected %s, but got %s.", param, want,
               api_json_kind(v));
}

/* An optional field: NULL when absent or null. */
static json_t *opt(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_null(v) ? NULL : v;
}

/* 1 and *out when present, 0 when absent, -1 when not a boolean. */
static int get_bool(struct api_error *e, const json_t *o, const char *key, const char *param,
                    int *out)
{
    json_t *v = opt(o, key);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return wrong_type(e, param, "a boolean", v);
    *out = json_is_true(v);
    return 1;
}

/* An integer in [lo, hi]: 1 when present, 0 when absent, -1 when wrong. */
static int get_int(struct api_error *e, const json_t *o, const char *key, long long lo,
                   long long hi, long long *out)
{
    json_t *v = opt(o, key);
    if (!v)
        return 0;
    if (!json_is_integer(v))
        return wrong_type(e, key, "an integer", v);
    long long x = json_integer_value(v);
    if (x < lo)
        return bad(e, key, "Invalid '%s': %lld is less than the minimum of %lld.", key, x, lo);
    if (x > hi)
        return bad(e, key, "Invalid '%s': %lld is greater than the maximum of %lld.", key, x, hi);
    *out = x;
    return 1;
}

static int get_int32(struct api_error *e, const json_t *o, const char *key, int lo, int hi,
                     int *out)
{
    long long x = 0;
    int rc = get_int(e, o, key, lo, hi, &x);
    if (rc == 1)
        *out = (int)x;
    return rc;
}

/* A number in [lo, hi] (open at lo when lo_open): integers are fine too. */
static int get_num(struct api_error *e, const json_t *o, const char *key, double lo, int lo_open,
                   double hi, float *out)
{
    json_t *v = opt(o, key);
    if (!v)
        return 0;
    if (!json_is_number(v))
        return wrong_type(e, key, "a number", v);
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || (lo_open && x <= lo))
        return bad(e, key, "Invalid '%s': %g is %s %g.", key, x,
                   lo_open ? "not greater than" : "less than the minimum of", lo);
    if (x > hi)
        return bad(e, key, "Invalid '%s': %g is greater than the maximum of %g.", key, x, hi);
    *out = (float)x;
    return 1;
}

/* A copy of a JSON string that may not hold NUL (it becomes a C string). */
static int copy_cstr(struct api_error *e, const json_t *v, const char *param, char **out)
{
    size_t n = json_string_length(v);
    const char *s = json_string_value(v);
    if (memchr(s, '\0', n))
        return bad(e, param, "Invalid '%s': the string may not contain NUL characters.", param);
    *out = strdup(s);
    if (!*out) {
        api_error_set(e, 500, "server_error", NULL, NULL, "Out of memory.");
        return -1;
    }
    return 0;
}

static int oom(struct api_error *e)
{
    api_error_set(e, 500, "server_error", NULL, NULL, "Out of memory.");
    return -1;
}

/* ---------------------------------------------------------- messages -- */

/* The text of a content part {"type": "text", "text": "..."}. */
static int part_text(struct api_error *e, const json_t *p, int i, int j, const char **s, size_t *n)
{
    char param[64];
    snprintf(param, sizeof(param), "messages[%d].content[%d]", i, j);
    if (!json_is_object(p))
        return wrong_type(e, param, "an object", p);
    json_t *type = json_object_get(p, "type"), *text = json_object_get(p, "text");
    snprintf(param, sizeof(param), "messages[%d].content[%d].type", i, j);
    if (!json_is_string(type))
        return type ? wrong_type(e, param, "a string", type)
                    : bad(e, param, "Missing required parameter: '%s'.", param);
    if (strcmp(json_string_value(type), "text") != 0)
        return bad(e, param, "Invalid '%s': only content parts of type 'text' are supported.",
                   param);
    snprintf(param, sizeof(param), "messages[%d].content[%d].text", i, j);
    if (!json_is_string(text))
        return text ? wrong_type(e, param, "a string", text)
                    : bad(e, param, "Missing required parameter: '%s'.", param);
    *s = json_string_value(text);
    *n = json_string_length(text);
    return 0;
}

/* Content as one string: a string, or text parts concatenated. */
static int msg_content(struct api_error *e, const json_t *c, int i, int assistant, char **out)
{
    char param[48];
    snprintf(param, sizeof(param), "messages[%d].content", i);
    if (!c || json_is_null(c)) {
        if (!assistant)
            return bad(e, param, "Missing required parameter: '%s'.", param);
        *out = strdup("");
        return *out ? 0 : oom(e);
    }
    if (json_is_string(c))
        return copy_cstr(e, c, param, out);
    if (!json_is_array(c))
        return wrong_type(e, param, "a string or an array of content parts", c);
    size_t total = 0, np = json_array_size(c);
    for (size_t j = 0; j < np; j++) {
        const char *s;
        size_t n;
        if (part_text(e, json_array_get(c, j), i, (int)j, &s, &n))
            return -1;
        if (memchr(s, '\0', n))
            return bad(e, param, "Invalid '%s': the string may not contain NUL characters.", param);
        total += n;
    }
    char *buf = malloc(total + 1);
    if (!buf)
        return oom(e);
    size_t at = 0;
    for (size_t j = 0; j < np; j++) {
        const char *s;
        size_t n;
        part_text(e, json_array_get(c, j), i, (int)j, &s, &n);
        memcpy(buf + at, s, n);
        at += n;
    }
    buf[at] = '\0';
    *out = buf;
    return 0;
}

/* Our roles; developer is OpenAI's newer name for system. */
static const char *msg_role(const char *role)
{
    if (!strcmp(role, "system") || !strcmp(role, "developer"))
        return "system";
    if (!strcmp(role, "user"))
        return "user";
    if (!strcmp(role, "assistant"))
        return "assistant";
    return NULL;
}

static int parse_message(struct api_error *e, const json_t *m, int i, struct chat_msg *out)
{
    char param[48];
    snprintf(param, sizeof(param), "messages[%d]", i);
    if (!json_is_object(m))
        return wrong_type(e, param, "an object", m);
    json_t *role = json_object_get(m, "role");
    snprintf(param, sizeof(param), "messages[%d].role", i);
    if (!role)
        return bad(e, param, "Missing required parameter: '%s'.", param);
    if (!json_is_string(role))
        return wrong_type(e, param, "a string", role);
    const char *r = msg_role(json_string_value(role));
    if (!r)
        return bad(e, param,
                   "Invalid value for '%s': supported roles are 'system', 'developer', 'user' "
                   "and 'assistant'.",
                   param);
    char *content = NULL;
    int assistant = r[0] == 'a'; /* only null content is the assistant's to send */
    if (msg_content(e, json_object_get(m, "content"), i, assistant, &content))
        return -1;
    out->role = r;
    out->content = content;
    return 0;
}

static int parse_messages(struct api_error *e, const json_t *root, struct api_request *r)
{
    json_t *ms = json_object_get(root, "messages");
    if (!ms || json_is_null(ms))
        return bad(e, "messages", "Missing required parameter: 'messages'.");
    if (!json_is_array(ms))
        return wrong_type(e, "messages", "an array", ms);
    size_t n = json_array_size(ms);
    if (n == 0)
        return bad(e, "messages",
                   "Invalid 'messages': empty array. Expected at least one message.");
    if (n > INT_MAX / 2)
        return bad(e, "messages", "Invalid 'messages': too many messages.");
    r->msgs = calloc(n, sizeof(*r->msgs));
    if (!r->msgs)
        return oom(e);
    for (size_t i = 0; i < n; i++) {
        if (parse_message(e, json_array_get(ms, i), (int)i, &r->msgs[i]))
            return -1;
        r->n_msgs = (int)i + 1;
    }
    return 0;
}

/* ------------------------------------------------------------ prompt -- */

/* An array of token ids (integers >= 0) into p. */
static int prompt_ids(struct api_error *e, const json_t *a, const struct api_limits *lim,
                      struct api_prompt *p)
{
    size_t n = json_array_size(a);
    if (n == 0)
        return bad(e, "prompt", "Invalid 'prompt': a token array may not be empty.");
    long cap = lim && lim->max_prompt_ids > 0 ? lim->max_prompt_ids : INT_MAX;
    if (n > (size_t)cap)
        return bad(e, "prompt", "Invalid 'prompt': %zu token ids is more than the maximum of %ld.",
                   n, cap);
    p->ids = malloc(n * sizeof(*p->ids));
    if (!p->ids)
        return oom(e);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v))
            return bad(e, "prompt", "Invalid 'prompt': token ids must be integers, found %s.",
                       api_json_kind(v));
        long long id = json_integer_value(v);
        if (id < 0 || id > INT32_MAX)
            return bad(e, "prompt", "Invalid 'prompt': %lld is not a valid token id.", id);
        p->ids[i] = (int32_t)id;
    }
    p->n_ids = (int)n;
    return 0;
}

static int prompt_text(struct api_error *e, const json_t *s, struct api_prompt *p)
{
    p->len = json_string_length(s);
    p->text = malloc(p->len + 1);
    if (!p->text)
        return oom(e);
    memcpy(p->text, json_string_value(s), p->len + 1);
    return 0;
}

/* What kind of array "prompt" is, from its elements (all must agree). */
static int prompt_array_kind(struct api_error *e, const json_t *a, json_type *kind)
{
    json_t *first = json_array_get(a, 0);
    *kind = json_typeof(first);
    if (*kind != JSON_STRING && *kind != JSON_INTEGER && *kind != JSON_ARRAY)
        return bad(e, "prompt",
                   "Invalid 'prompt': expected a string, an array of strings, an array of "
                   "token ids or an array of token id arrays, but an element is %s.",
                   api_json_kind(first));
    for (size_t i = 1; i < json_array_size(a); i++)
        if (json_typeof(json_array_get(a, i)) != *kind)
            return bad(e, "prompt", "Invalid 'prompt': array elements must all be of one kind.");
    return 0;
}

static int parse_prompt(struct api_error *e, const json_t *root, const struct api_limits *lim,
                        struct api_request *r)
{
    json_t *p = json_object_get(root, "prompt");
    if (!p || json_is_null(p))
        return bad(e, "prompt", "Missing required parameter: 'prompt'.");
    if (json_is_string(p)) {
        r->prompts = calloc(1, sizeof(*r->prompts));
        if (!r->prompts)
            return oom(e);
        r->n_prompts = 1;
        return prompt_text(e, p, &r->prompts[0]);
    }
    if (!json_is_array(p))
        return wrong_type(e, "prompt", "a string or an array", p);
    size_t n = json_array_size(p);
    json_type kind;
    if (n == 0)
        return bad(e, "prompt", "Invalid 'prompt': empty array.");
    if (prompt_array_kind(e, p, &kind))
        return -1;
    size_t np = kind == JSON_INTEGER ? 1 : n;
    if (np > INT_MAX / 2)
        return bad(e, "prompt", "Invalid 'prompt': too many prompts.");
    r->prompts = calloc(np, sizeof(*r->prompts));
    if (!r->prompts)
        return oom(e);
    r->n_prompts = (int)np;
    if (kind == JSON_INTEGER)
        return prompt_ids(e, p, lim, &r->prompts[0]);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(p, i);
        if (kind == JSON_STRING ? prompt_text(e, v, &r->prompts[i])
                                : prompt_ids(e, v, lim, &r->prompts[i]))
            return -1;
    }
    return 0;
}

/* -------------------------------------------------- generation fields -- */

/* stream and stream_options, which is only allowed with stream true. */
static int parse_stream(struct api_error *e, const json_t *root, struct api_request *r)
{
    if (get_bool(e, root, "stream", "stream", &r->stream) < 0)
        return -1;
    json_t *so = opt(root, "stream_options");
    if (!so)
        return 0;
    if (!r->stream)
        return bad(e, "stream_options",
                   "Invalid 'stream_options': only allowed when 'stream' is true.");
    if (!json_is_object(so))
        return wrong_type(e, "stream_options", "an object", so);
    return get_bool(e, so, "include_usage", "stream_options.include_usage", &r->include_usage) < 0
               ? -1
               : 0;
}

/* stop: a string, or an array of up to API_MAX_STOP non-empty strings. */
static int parse_stop(struct api_error *e, const json_t *root, struct api_request *r)
{
    json_t *s = opt(root, "stop");
    if (!s)
        return 0;
    if (json_is_string(s)) {
        if (json_string_length(s) == 0)
            return bad(e, "stop", "Invalid 'stop': a stop string may not be empty.");
        if (copy_cstr(e, s, "stop", &r->stop[0]))
            return -1;
        r->n_stop = 1;
        return 0;
    }
    if (!json_is_array(s))
        return wrong_type(e, "stop", "a string or an array of strings", s);
    if (json_array_size(s) > API_MAX_STOP)
        return bad(e, "stop", "Invalid 'stop': at most %d stop strings are allowed.", API_MAX_STOP);
    for (size_t i = 0; i < json_array_size(s); i++) {
        json_t *v = json_array_get(s, i);
        if (!json_is_string(v))
            return wrong_type(e, "stop", "an array of strings", v);
        if (json_string_length(v) == 0)
            return bad(e, "stop", "Invalid 'stop': a stop string may not be empty.");
        if (copy_cstr(e, v, "stop", &r->stop[r->n_stop]))
            return -1;
        r->n_stop++;
    }
    return 0;
}

/* Sampling knobs into r->smp. */
static int parse_sampling(struct api_error *e, const json_t *root, struct api_request *r)
{
    struct smp_params *p = &r->smp;
    long long seed = 0;
    if (get_num(e, root, "temperature", 0, 0, 2, &p->temperature) < 0 ||
        get_num(e, root, "top_p", 0, 1, 1, &p->top_p) < 0 ||
        get_int32(e, root, "top_k", 0, INT_MAX, &p->top_k) < 0 ||
        get_num(e, root, "min_p", 0, 0, 1, &p->min_p) < 0 ||
        get_num(e, root, "presence_penalty", -2, 0, 2, &p->presence_penalty) < 0 ||
        get_num(e, root, "frequency_penalty", -2, 0, 2, &p->frequency_penalty) < 0 ||
        get_num(e, root, "repetition_penalty", 0, 1, FLT_MAX, &p->repetition_penalty) < 0)
        return -1;
    int rc = get_int(e, root, "seed", LLONG_MIN, LLONG_MAX, &seed);
    if (rc < 0)
        return -1;
    if (rc == 1) {
        p->seed = (uint64_t)seed;
        r->seed_set = 1;
    }
    return 0;
}

/* logprobs: chat's boolean with top_logprobs, or completions' count. */
static int parse_logprobs(struct api_error *e, const json_t *root, struct api_request *r)
{
    if (r->kind == API_COMPLETION) {
        int rc = get_int32(e, root, "logprobs", 0, SMP_MAX_LOGPROBS, &r->smp.n_logprobs);
        if (rc == 1)
            r->logprobs = 1;
        return rc < 0 ? -1 : 0;
    }
    if (get_bool(e, root, "logprobs", "logprobs", &r->logprobs) < 0)
        return -1;
    int top = 0;
    int rc = get_int32(e, root, "top_logprobs", 0, SMP_MAX_LOGPROBS, &top);
    if (rc < 0)
        return -1;
    if (rc == 1 && !r->logprobs)
        return bad(e, "top_logprobs",
                   "Invalid 'top_logprobs': 'logprobs' must be set to true when it is used.");
    r->smp.n_logprobs = r->logprobs ? top : 0;
    return 0;
}

static int parse_lengths(struct api_error *e, const json_t *root, const struct api_limits *lim,
                         struct api_request *r)
{
    int max_n = lim && lim->max_n > 0 ? lim->max_n : 1;
    int mt = -1, mct = -1;
    if (get_int32(e, root, "n", 1, max_n, &r->n) < 0 ||
        get_int32(e, root, "max_tokens", 1, INT_MAX, &mt) < 0 ||
        get_int32(e, root, "max_completion_tokens", 1, INT_MAX, &mct) < 0)
        return -1;
    r->max_tokens = mct > 0 ? mct : mt;
    /* Each prompt gets n choices; max_n bounds the choices of one request. */
    if (r->n_prompts > 1 && (long)r->n_prompts * r->n > max_n)
        return bad(e, "prompt",
                   "Invalid 'prompt': %d prompts with n = %d make more than the maximum of %d "
                   "choices.",
                   r->n_prompts, r->n, max_n);
    return 0;
}

static int parse_misc(struct api_error *e, const json_t *root, struct api_request *r)
{
    json_t *user = opt(root, "user");
    if (user && !json_is_string(user))
        return wrong_type(e, "user", "a string", user);
    if (user && copy_cstr(e, user, "user", &r->user))
        return -1;
    if (get_bool(e, root, "ignore_eos", "ignore_eos", &r->ignore_eos) < 0)
        return -1;
    return get_int32(e, root, "priority", 0, API_MAX_PRIORITY, &r->priority) < 0 ? -1 : 0;
}

/* Fields we know but do not implement: refused when they would matter. */
static int parse_unsupported(struct api_error *e, const json_t *root, struct api_request *r)
{
    json_t *v;
    if (r->kind == API_COMPLETION) {
        int echo = 0;
        long long best_of = 0;
        if (get_bool(e, root, "echo", "echo", &echo) < 0)
            return -1;
        if (echo)
            return unsupported(e, "echo");
        if ((v = opt(root, "suffix")) && !json_is_string(v))
            return wrong_type(e, "suffix", "a string", v);
        if (v && json_string_length(v) > 0)
            return unsupported(e, "suffix");
        int rc = get_int(e, root, "best_of", 1, INT_MAX, &best_of);
        if (rc < 0)
            return -1;
        if (rc == 1 && best_of != r->n)
            return bad(e, "best_of", "'best_of' other than 'n' is not supported by this server.");
    }
    if ((v = opt(root, "logit_bias")) && !json_is_object(v))
        return wrong_type(e, "logit_bias", "an object", v);
    if (v && json_object_size(v) > 0)
        return unsupported(e, "logit_bias");
    static const char *const lists[] = {"tools", "functions"};
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        v = opt(root, lists[i]);
        if (v && !(json_is_array(v) && json_array_size(v) == 0))
            return unsupported(e, lists[i]);
    }
    if ((v = opt(root, "response_format"))) {
        json_t *t = json_is_object(v) ? json_object_get(v, "type") : NULL;
        if (!json_is_string(t) || strcmp(json_string_value(t), "text") != 0)
            return bad(e, "response_format",
                       "Invalid 'response_format': only {\"type\": \"text\"} is supported by this "
                       "server.");
    }
    return 0;
}

/* ------------------------------------------------------------- entry -- */

static int parse_model(struct api_error *e, const json_t *root, struct api_request *r)
{
    json_t *m = json_object_get(root, "model");
    if (!m || json_is_null(m))
        return bad(e, "model", "Missing required parameter: 'model'.");
    if (!json_is_string(m))
        return wrong_type(e, "model", "a string", m);
    return copy_cstr(e, m, "model", &r->model);
}

static int parse_root(enum api_kind kind, const json_t *root, const struct api_limits *lim,
                      struct api_request *r, struct api_error *e)
{
    if (parse_model(e, root, r))
        return -1;
    if (kind == API_CHAT ? parse_messages(e, root, r) : parse_prompt(e, root, lim, r))
        return -1;
    if (parse_stream(e, root, r) || parse_lengths(e, root, lim, r) || parse_sampling(e, root, r) ||
        parse_logprobs(e, root, r) || parse_stop(e, root, r) || parse_misc(e, root, r) ||
        parse_unsupported(e, root, r))
        return -1;
    if (lim && lim->model && strcmp(r->model, lim->model) != 0) {
        api_error_set(e, 404, "not_found_error", "model_not_found", "model",
                      "The model '%s' does not exist.", r->model);
        return -1;
    }
    return 0;
}

static void request_init(enum api_kind kind, struct api_request *r)
{
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->n = 1;
    r->max_tokens = -1;
    r->priority = -1;
    smp_params_default(&r->smp);
}

int api_parse(enum api_kind kind, const char *body, size_t len, const struct api_limits *lim,
              struct api_request *r, struct api_error *e)
{
    request_init(kind, r);
    json_error_t je;
    /* JSON_ALLOW_NUL: a completion prompt may hold "\u0000"; other strings
     * are checked where they become C strings. */
    json_t *root = json_loadb(body ? body : "", body ? len : 0, JSON_ALLOW_NUL, &je);
    if (!root) {
        api_error_set(e, 400, "invalid_request_error", NULL, NULL,
                      "We could not parse the JSON body of your request: %s (line %d, column "
                      "%d, byte %d).",
                      je.text, je.line, je.column, je.position);
        return -1;
    }
    int rc = -1;
    if (!json_is_object(root))
        api_error_set(e, 400, "invalid_request_error", NULL, NULL,
                      "The request body must be a JSON object, not %s.", api_json_kind(root));
    else
        rc = parse_root(kind, root, lim, r, e);
    json_decref(root);
    return rc;
}

void api_request_free(struct api_request *r)
{
    if (!r)
        return;
    free(r->model);
    for (int i = 0; i < r->n_msgs; i++)
        free((char *)r->msgs[i].content);
    free(r->msgs);
    for (int i = 0; i < r->n_prompts; i++) {
        free(r->prompts[i].text);
        free(r->prompts[i].ids);
    }
    free(r->prompts);
    for (int i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    free(r->user);
    memset(r, 0, sizeof(*r));
}
