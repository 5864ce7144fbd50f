/*
 * tests/unit/test_tok_util.h — what test_tok.c (hand-built vocabularies)
 * and test_tok_ref.c (the real ones) share: comparing the ids a text encodes
 * to with the expected ones, printing both when they differ.  Static inline:
 * each suite gets its own copy.
 */
#ifndef LLMD_TESTS_TEST_TOK_UTIL_H
#define LLMD_TESTS_TEST_TOK_UTIL_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

static inline void print_ids(const char *what, const int32_t *ids, int n)
{
    fprintf(stderr, "  %s [", what);
    for (int i = 0; i < n; i++)
        fprintf(stderr, "%s%d", i ? ", " : "", ids[i]);
    fprintf(stderr, "]\n");
}

static inline int ids_equal(const int32_t *a, int na, const int32_t *b, int nb)
{
    return na == nb && (na == 0 || memcmp(a, b, sizeof(*a) * (size_t)na) == 0);
}

#define EXPECT_IDS(t, text, flags, ...)                                                            \
    do {                                                                                           \
        const int32_t want_[] = {__VA_ARGS__};                                                     \
        expect_ids(t, text, flags, want_, (int)(sizeof(want_) / sizeof(want_[0])));                \
    } while (0)

static inline void expect_ids(const struct tok *t, const char *text, unsigned flags,
                              const int32_t *want, int n_want)
{
    int32_t *got = NULL;
    int n = tok_encode(t, text, strlen(text), flags, &got);
    if (!ids_equal(got, n, want, n_want)) {
        fprintf(stderr, "tokenizing \"%s\":\n", text);
        print_ids("expected", want, n_want);
        print_ids("got", got, n);
    }
    ck_assert(ids_equal(got, n, want, n_want));
    free(got);
}

#endif
