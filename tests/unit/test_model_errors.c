/*
 * tests/unit/test_model_errors.c — what model_load says about bad files.
 *
 * Each case takes the real model, damages one thing in a copy (truncates it,
 * renames the architecture, gives a tensor a weight type we cannot read,
 * removes the chat template's meaning), and checks that loading fails with
 * one line that names the problem, and that nothing leaks (ASan build).
 */
#include "model/model.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned char *g_file;
static size_t g_size;
static struct be *g_be;

static void setup(void)
{
    const char *path = getenv("LLMD_MODEL");
    if (!path || !*path)
        path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open the model %s", path);
    fseek(f, 0, SEEK_END);
    g_size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    g_file = malloc(g_size);
    ck_assert_uint_eq(fread(g_file, 1, g_size, f), g_size);
    fclose(f);
    char err[256];
    g_be = be_create("cpu", NULL, err, sizeof(err));
    ck_assert_msg(g_be != NULL, "%s", err);
}

static void teardown(void)
{
    be_destroy(g_be);
    free(g_file);
}

/* Writes the first n bytes of buf to a temporary file; returns its path. */
static char *write_tmp(const unsigned char *buf, size_t n)
{
    char *path = strdup("/tmp/llmd-model-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, buf, n), (ssize_t)n);
    close(fd);
    return path;
}

/* Loads buf[0..n) as a model; returns the error message (static). */
static const char *load_error(const unsigned char *buf, size_t n, const char *template_name)
{
    static char err[512];
    char *path = write_tmp(buf, n);
    struct model *m = NULL;
    struct model_opts o = {.template_name = template_name};
    err[0] = 0;
    int rc = model_load(path, &o, g_be, &m, err, sizeof(err));
    unlink(path);
    free(path);
    ck_assert_msg(rc == -1 && m == NULL, "a damaged model loaded");
    ck_assert_msg(err[0] != 0, "no message");
    ck_assert_msg(strchr(err, '\n') == NULL, "message is not one line: %s", err);
    return err;
}

/* Offset of the first occurrence of needle in the file (fails if absent). */
static size_t find(const unsigned char *hay, size_t n, const void *needle, size_t len)
{
    for (size_t i = 0; i + len <= n; i++)
        if (memcmp(hay + i, needle, len) == 0)
            return i;
    ck_abort_msg("pattern not found in the model file");
    return 0;
}

/* Offset of a string value: the key, its type (u32) and length (u64) skipped. */
static size_t string_value_at(const unsigned char *buf, size_t n, const char *key)
{
    return find(buf, n, key, strlen(key)) + strlen(key) + 4 + 8;
}

START_TEST(truncated_file_is_named_as_truncated)
{
    const char *err = load_error(g_file, g_size / 2, NULL);
    ck_assert_msg(strstr(err, "truncated") || strstr(err, "past end") || strstr(err, "end of file"),
                  "message does not say truncated: %s", err);
}
END_TEST

START_TEST(not_a_gguf_file_is_named)
{
    unsigned char junk[4096];
    memset(junk, 'x', sizeof(junk));
    const char *err = load_error(junk, sizeof(junk), NULL);
    ck_assert_msg(strstr(err, "magic") || strstr(err, "GGUF"), "message: %s", err);
}
END_TEST

START_TEST(unknown_architecture_is_named)
{
    unsigned char *copy = malloc(g_size);
    memcpy(copy, g_file, g_size);
    size_t at = string_value_at(copy, g_size, "general.architecture");
    ck_assert_int_eq(memcmp(copy + at, "llama", 5), 0);
    memcpy(copy + at, "gemma", 5);
    const char *err = load_error(copy, g_size, NULL);
    ck_assert_msg(strstr(err, "architecture") && strstr(err, "gemma"), "message: %s", err);
    free(copy);
}
END_TEST

/* Tensor info: name (u64 length + bytes), n_dims (u32), dims (u64 each), type (u32). */
START_TEST(unknown_weight_type_is_named)
{
    unsigned char *copy = malloc(g_size);
    memcpy(copy, g_file, g_size);
    const char *name = "blk.0.attn_q.weight";
    size_t at = find(copy, g_size, name, strlen(name)) + strlen(name);
    uint32_t n_dims;
    memcpy(&n_dims, copy + at, 4);
    ck_assert_uint_eq(n_dims, 2);
    size_t type_at = at + 4 + 8 * n_dims;
    uint32_t bogus = 77;
    memcpy(copy + type_at, &bogus, 4);
    const char *err = load_error(copy, g_size, NULL);
    ck_assert_msg(strstr(err, "type") && strstr(err, "77"), "message: %s", err);
    free(copy);
}
END_TEST

START_TEST(unknown_chat_template_fails_unless_named)
{
    unsigned char *copy = malloc(g_size);
    memcpy(copy, g_file, g_size);
    size_t at = string_value_at(copy, g_size, "tokenizer.chat_template");
    /* Blot out the markers that identify ChatML. */
    for (size_t i = at; i + 12 < g_size && i < at + 2000; i++)
        if (memcmp(copy + i, "<|im_start|>", 12) == 0)
            memcpy(copy + i, "<|xx_xxxxx|>", 12);
    const char *err = load_error(copy, g_size, NULL);
    ck_assert_msg(strstr(err, "template"), "message: %s", err);

    char *path = write_tmp(copy, g_size);
    struct model *m = NULL;
    char msg[256];
    struct model_opts o = {.template_name = "chatml"};
    ck_assert_msg(model_load(path, &o, g_be, &m, msg, sizeof(msg)) == 0, "%s", msg);
    ck_assert_str_eq(tmpl_name(model_tmpl(m)), "chatml");
    model_free(m);
    unlink(path);
    free(path);
    free(copy);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("model_errors");
    TCase *tc = tcase_create("load");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, truncated_file_is_named_as_truncated);
    tcase_add_test(tc, not_a_gguf_file_is_named);
    tcase_add_test(tc, unknown_architecture_is_named);
    tcase_add_test(tc, unknown_weight_type_is_named);
    tcase_add_test(tc, unknown_chat_template_fails_unless_named);
    suite_add_tcase(s, tc);
    return s;
}
