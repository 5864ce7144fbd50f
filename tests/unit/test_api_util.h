/*
 * tests/unit/test_api_util.h — what test_api.c (parsing) and
 * test_api_render.c (rendering) share: the limits a body is checked against
 * and a parse that lets test bodies write ' for ", so that they stay
 * readable.  Static inline: each suite gets its own copy.
 */
#ifndef LLMD_TESTS_TEST_API_UTIL_H
#define LLMD_TESTS_TEST_API_UTIL_H

#include "daemon/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct api_limits LIM = {.model = "m", .max_n = 4, .max_prompt_ids = 8};

/* Test bodies write ' for " so that they stay readable; parse turns them back. */
static inline int parse(enum api_kind kind, const char *body, struct api_request *r,
                        struct api_error *e)
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

/* A body of kind: whole ({...}), around a messages or prompt array ([...]),
 * or a valid one with fields added. */
static inline const char *body_of(enum api_kind kind, const char *s)
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

static inline const char *chat_body(const char *extra)
{
    return body_of(API_CHAT, extra);
}

static inline const char *cmpl_body(const char *extra)
{
    return body_of(API_COMPLETION, extra);
}

#endif
