/*
 * tests/unit/test_tok_ref.c — the tokenizer on the real vocabularies: the
 * model's own and the vocabulary files of other families load with their
 * defaults, and every case of the reference fixture encodes to exactly the
 * ids that llama.cpp's own tokenizer produced (and decodes back).
 */
#include <check.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/tok_internal.h"
#include "tests/unit/test_tok_util.h"

/* ------------------------------------------------------ real files */

static const char *model_path(void)
{
    const char *p = getenv("LLMD_MODEL");
    return p && *p ? p : "models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

static struct tok *load_file(const char *path, struct gguf_file **f)
{
    char err[256] = "";
    ck_assert_msg(gguf_open(path, f, err, sizeof(err)) == 0, "%s: %s", path, err);
    struct tok *t = NULL;
    ck_assert_msg(tok_load(*f, &t, err, sizeof(err)) == 0, "%s: %s", path, err);
    return t;
}

START_TEST(real_smollm2_vocabulary)
{
    struct gguf_file *f;
    struct tok *t = load_file(model_path(), &f);
    ck_assert_int_eq(tok_vocab_size(t), 49152);
    ck_assert_int_eq(tok_bos(t), 1);
    ck_assert_int_eq(tok_eos(t), 2);
    ck_assert_int_eq(tok_add_bos(t), 0); /* the file says add_bos_token = false */
    ck_assert_int_eq(tok_find(t, "<|im_end|>"), 2);
    ck_assert(tok_is_eog(t, 2));
    ck_assert(tok_is_eog(t, 0)); /* <|endoftext|> */
    ck_assert(!tok_is_eog(t, 1));
    ck_assert(tok_is_control(t, 1));
    /* Ids from llama.cpp's tokenizer. */
    const char *text = "Hello world, 12345 <|im_start|>!";
    EXPECT_IDS(t, text, TOK_ADD_BOS | TOK_PARSE_SPECIAL, 19556, 905, 28, 216, 33, 34, 35, 36, 37,
               216, 1, 17);
    int32_t *ids = NULL;
    int n = tok_encode(t, text, strlen(text), 0, &ids);
    char *s = tok_decode(t, ids, (size_t)n);
    ck_assert_str_eq(s, text);
    free(s);
    free(ids);
    tok_free(t);
    gguf_close(f);
}
END_TEST

START_TEST(real_vocab_families_load_with_their_defaults)
{
    struct {
        const char *path;
        int n_vocab, add_bos;
        int32_t bos;
    } v[] = {
        {"models/vocab/ggml-vocab-llama-spm.gguf", 32000, 1, 1},
        {"models/vocab/ggml-vocab-llama-bpe.gguf", 128256, 1, 128000},
        {"models/vocab/ggml-vocab-qwen2.gguf", 151936, 0, 151643},
    };
    for (size_t i = 0; i < 3; i++) {
        struct gguf_file *f;
        struct tok *t = load_file(v[i].path, &f);
        ck_assert_int_eq(tok_vocab_size(t), v[i].n_vocab);
        ck_assert_int_eq(tok_add_bos(t), v[i].add_bos);
        ck_assert_int_eq(tok_bos(t), v[i].bos);
        tok_free(t);
        gguf_close(f);
    }
}
END_TEST

START_TEST(real_load_rejects_a_file_without_tokenizer)
{
    /* A GGUF v3 header with no metadata at all. */
    static const uint8_t empty[] = {'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0,
                                    0,   0,   0,   0,   0, 0, 0, 0, 0, 0, 0, 0};
    struct gguf_file *f;
    char err[256] = "";
    ck_assert_msg(gguf_parse(empty, sizeof(empty), &f, err, sizeof(err)) == 0, "%s", err);
    struct tok *t = (struct tok *)1;
    ck_assert_int_eq(tok_load(f, &t, err, sizeof(err)), -1);
    ck_assert_ptr_null(t);
    ck_assert_ptr_nonnull(strstr(err, "tokenizer"));
    gguf_close(f);
}
END_TEST

/* A long input must take milliseconds (not asserted: machines differ), and
 * come back intact. */
START_TEST(real_long_input_round_trips)
{
    struct gguf_file *f;
    struct tok *t = load_file(model_path(), &f);
    size_t n = 10000;
    char *text = malloc(n + 1);
    const char *words[] = {"lorem ",           "ipsum, ", "12345 ", "\xE4\xB8\xAD\xE6\x96\x87 ",
                           "\xF0\x9F\x98\x80", "\n\n",    "    x",  "don't "};
    size_t m = 0;
    for (unsigned i = 0; m < n; i = i * 7 + 3) {
        const char *w = words[i % 8];
        size_t k = strlen(w);
        if (m + k > n)
            break;
        memcpy(text + m, w, k);
        m += k;
    }
    text[m] = '\0';
    int32_t *ids = NULL;
    int k = tok_encode(t, text, m, TOK_PARSE_SPECIAL, &ids);
    ck_assert_int_gt(k, 1000);
    char *s = tok_decode(t, ids, (size_t)k);
    ck_assert_str_eq(s, text);
    free(s);
    free(ids);
    free(text);
    tok_free(t);
    gguf_close(f);
}
END_TEST

struct tok_thread_arg {
    const struct tok *t;
    const char *text;
    int n;
    int32_t *ids;
};

static void *tok_thread(void *p)
{
    struct tok_thread_arg *a = p;
    for (int i = 0; i < 20; i++) {
        free(a->ids);
        a->n = tok_encode(a->t, a->text, strlen(a->text), TOK_PARSE_SPECIAL, &a->ids);
    }
    return NULL;
}

START_TEST(real_encoding_is_thread_safe)
{
    struct gguf_file *f;
    struct tok *t = load_file(model_path(), &f);
    const char *text = "<|im_start|>user\nThe quick brown fox, 1234 \xE2\x9C\x93<|im_end|>\n";
    int32_t *want = NULL;
    int n_want = tok_encode(t, text, strlen(text), TOK_PARSE_SPECIAL, &want);
    pthread_t th[4];
    struct tok_thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (struct tok_thread_arg){t, text, 0, NULL};
        ck_assert_int_eq(pthread_create(&th[i], NULL, tok_thread, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ck_assert(ids_equal(args[i].ids, args[i].n, want, n_want));
        free(args[i].ids);
    }
    free(want);
    tok_free(t);
    gguf_close(f);
}
END_TEST

/* ------------------------------------------------ reference fixture */

/* tests/reference/tokenizer.json: ids from llama.cpp's llama-tokenize for
 * the project's test strings on each vocabulary.  Every case must match. */
static const char *fixture_path(void)
{
    const char *p = getenv("LLMD_TOK_FIXTURE");
    return p && *p ? p : "tests/reference/tokenizer.json";
}

struct vocab_cache {
    char *path[8];
    struct gguf_file *f[8];
    struct tok *t[8];
    int n;
};

static struct tok *vocab_get(struct vocab_cache *c, const char *path)
{
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->path[i], path) == 0)
            return c->t[i];
    ck_assert_int_lt(c->n, 8);
    c->t[c->n] = load_file(path, &c->f[c->n]);
    c->path[c->n] = strdup(path);
    return c->t[c->n++];
}

static void vocab_free(struct vocab_cache *c)
{
    for (int i = 0; i < c->n; i++) {
        tok_free(c->t[i]);
        gguf_close(c->f[i]);
        free(c->path[i]);
    }
}

/* Reads a case's "ids" into a malloc'd array; -1 when malformed. */
static int fixture_ids(const json_t *arr, int32_t **out)
{
    size_t n = json_array_size(arr);
    *out = malloc(sizeof(**out) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v))
            return -1;
        (*out)[i] = (int32_t)json_integer_value(v);
    }
    return json_is_array(arr) ? (int)n : -1;
}

static void print_text(const char *text, size_t len)
{
    fputs("  text \"", stderr);
    for (size_t i = 0; i < len && i < 400; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c < 0x20 || c == 0x7F)
            fprintf(stderr, "\\x%02X", c);
        else
            fputc(c, stderr);
    }
    fputs(len > 400 ? "\" ...\n" : "\"\n", stderr);
}

/* Byte-level vocabularies give the text back exactly, unless a control
 * token (which decodes to nothing) stands for part of it. */
static int fixture_round_trips(const struct tok *t, const int32_t *ids, int n, const char *text,
                               size_t len)
{
    int start = n > 0 && ids[0] == tok_bos(t) && tok_add_bos(t);
    for (int i = start; i < n; i++)
        if (tok_is_control(t, ids[i]))
            return 1;
    char *s = tok_decode(t, ids, (size_t)n);
    int ok = s && strlen(s) == len && memcmp(s, text, len) == 0;
    if (!ok) {
        fprintf(stderr, "decoding does not give the text back:\n");
        print_text(text, len);
        if (s)
            print_text(s, strlen(s));
    }
    free(s);
    return ok;
}

/* 1 when the case matches llama.cpp (and round-trips where it should). */
static int fixture_case(struct vocab_cache *vc, const json_t *c)
{
    const char *vocab = json_string_value(json_object_get(c, "vocab"));
    const json_t *jt = json_object_get(c, "text");
    ck_assert_msg(vocab && json_is_string(jt), "a case without vocab or text");
    const char *text = json_string_value(jt), *name = json_string_value(json_object_get(c, "name"));
    size_t len = json_string_length(jt);
    unsigned flags = (json_is_true(json_object_get(c, "add_bos")) ? TOK_ADD_BOS : 0) |
                     (json_is_true(json_object_get(c, "parse_special")) ? TOK_PARSE_SPECIAL : 0);
    struct tok *t = vocab_get(vc, vocab);
    int32_t *want = NULL, *got = NULL;
    int n_want = fixture_ids(json_object_get(c, "ids"), &want);
    ck_assert_msg(n_want >= 0, "case %s: bad ids", name ? name : "?");
    int n = tok_encode(t, text, len, flags, &got);
    int ok = ids_equal(got, n, want, n_want);
    if (!ok) {
        fprintf(stderr, "case %s (%s, flags %u) differs from llama.cpp:\n", name ? name : "?",
                vocab, flags);
        print_text(text, len);
        print_ids("expected", want, n_want);
        print_ids("got     ", got, n);
    } else if (t->kind == TOK_KIND_BPE) {
        ok = fixture_round_trips(t, got, n, text, len);
    }
    free(want);
    free(got);
    return ok;
}

START_TEST(fixture_matches_llama_cpp_exactly)
{
    json_error_t jerr;
    json_t *root = json_load_file(fixture_path(), 0, &jerr);
    ck_assert_msg(root, "%s: %s (line %d)", fixture_path(), jerr.text, jerr.line);
    const json_t *cases = json_object_get(root, "cases");
    ck_assert_msg(json_array_size(cases) > 0, "%s: no cases", fixture_path());
    struct vocab_cache vc = {0};
    size_t i, bad = 0;
    const json_t *c;
    json_array_foreach(cases, i, c) bad += !fixture_case(&vc, c);
    vocab_free(&vc);
    size_t total = json_array_size(cases);
    json_decref(root);
    ck_assert_msg(bad == 0, "%zu of %zu reference cases differ", bad, total);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("tok_ref");
    TCase *real = tcase_create("real");
    tcase_set_timeout(real, 120);
    tcase_add_test(real, real_smollm2_vocabulary);
    tcase_add_test(real, real_vocab_families_load_with_their_defaults);
    tcase_add_test(real, real_load_rejects_a_file_without_tokenizer);
    tcase_add_test(real, real_long_input_round_trips);
    tcase_add_test(real, real_encoding_is_thread_safe);
    tcase_add_test(real, fixture_matches_llama_cpp_exactly);
    suite_add_tcase(s, real);
    return s;
}
