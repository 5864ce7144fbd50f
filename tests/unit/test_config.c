/*
 * tests/unit/test_config.c — llmd's options and its log lines.
 *
 * Config: defaults, both flag forms, the config file and its precedence
 * under flags, list replacement, every kind of bad input with a message
 * that names the option and the value, --help/--version, and the checked-in
 * packaging/llmd.conf being exactly cfg_sample()'s text.  Log: the line
 * format, the level filter, escaping, and whole lines from many threads.
 * Output is captured by pointing stdout or stderr at a pipe or a file.
 */
#include "daemon/config.h"
#include "daemon/log.h"

#include <check.h>
#include <pthread.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SAMPLE_PATH "packaging/llmd.conf"

/* argv from a NULL-terminated list; "llmd" is argv[0]. */
static int parse_v(struct llmd_config *c, char *err, size_t errlen, const char *const *args)
{
    char *argv[64] = {"llmd"};
    int argc = 1;
    while (args[argc - 1]) {
        argv[argc] = (char *)args[argc - 1];
        argc++;
    }
    memset(c, 0, sizeof(*c));
    return cfg_parse(argc, argv, c, err, errlen);
}
#define PARSE(c, err, ...) parse_v(c, err, sizeof(err), (const char *const[]){__VA_ARGS__, NULL})

/* A file with this text; the caller unlinks path. */
static void write_file(char *path, const char *text)
{
    strcpy(path, "/tmp/llmd-test-conf-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static char *read_all_fd(int fd)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    ssize_t r;
    while ((r = read(fd, buf + n, cap - n - 1)) > 0) {
        n += (size_t)r;
        if (cap - n < 2) {
            char *more = realloc(buf, cap *= 2);
            ck_assert_ptr_nonnull(more);
            buf = more;
        }
    }
    buf[n] = 0;
    return buf;
}

/* Runs cfg_parse with stdout sent to a file; returns what it printed. */
static char *parse_stdout(int *rc, const char *const *args)
{
    char path[64] = "/tmp/llmd-test-out-XXXXXX", err[256];
    int fd = mkstemp(path), saved = dup(STDOUT_FILENO);
    ck_assert_int_ge(fd, 0);
    fflush(stdout);
    dup2(fd, STDOUT_FILENO);
    struct llmd_config c;
    *rc = parse_v(&c, err, sizeof(err), args);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    char *out = read_all_fd(fd);
    close(fd);
    unlink(path);
    cfg_free(&c);
    return out;
}

static void assert_empty(const struct llmd_config *c)
{
    static const struct llmd_config zero;
    ck_assert_msg(memcmp(c, &zero, sizeof(zero)) == 0, "config not emptied");
}

/* ------------------------------------------------------------- config -- */

START_TEST(defaults_fill_every_option)
{
    struct llmd_config c;
    char err[256];
    ck_assert_int_eq(PARSE(&c, err, "--model", "m.gguf"), 0);
    ck_assert_str_eq(c.model, "m.gguf");
    ck_assert_ptr_null(c.config);
    ck_assert_str_eq(c.model_name, "");
    ck_assert_str_eq(c.chat_template, "");
    ck_assert_str_eq(c.backend, "cpu");
    ck_assert_int_eq(c.n_listen, 1);
    ck_assert_str_eq(c.listen[0], "127.0.0.1:8443");
    ck_assert_int_eq(c.n_listen_plain, 0);
    ck_assert_str_eq(c.tls_cert, "/etc/llmd/tls/cert.pem");
    ck_assert_str_eq(c.tls_key, "/etc/llmd/tls/key.pem");
    ck_assert_str_eq(c.db, "/var/lib/llmd/llmd.db");
    ck_assert_str_eq(c.admin_socket, "/run/llmd/admin.sock");
    ck_assert_int_eq(c.kv_blocks, 1024);
    ck_assert_int_eq(c.swap_blocks, 1024);
    ck_assert_int_eq(c.block_size, 16);
    ck_assert_int_eq(c.max_batched_tokens, 512);
    ck_assert_int_eq(c.max_seqs, 256);
    ck_assert_str_eq(c.preempt, "auto");
    ck_assert_double_eq(c.priority_aging, 0);
    ck_assert_int_eq(c.max_tokens_default, 1024);
    ck_assert_int_eq(c.max_n, 16);
    ck_assert_int_eq(c.max_queue, 1024);
    ck_assert_int_eq(c.max_body_bytes, 8388608L);
    ck_assert_int_eq(c.max_header_bytes, 16384);
    ck_assert_int_eq(c.max_connections, 1024);
    ck_assert_double_eq(c.read_timeout, 30);
    ck_assert_double_eq(c.idle_timeout, 60);
    ck_assert_double_eq(c.write_timeout, 60);
    ck_assert_double_eq(c.drain_timeout, 30);
    ck_assert_double_eq(c.db_refresh, 0.5);
    ck_assert_int_eq(c.log_level, LOGL_INFO);
    cfg_free(&c);
    assert_empty(&c);
}
END_TEST

START_TEST(flags_take_separate_and_equals_values)
{
    struct llmd_config c;
    char err[256];
    int rc = PARSE(&c, err, "--model=a b.gguf", "--kv-blocks", "64", "--max-body-bytes=1000",
                   "--read-timeout", "2.5", "--log-level=debug", "--preempt", "swap",
                   "--backend=cuda", "--admin-socket", "", "--model-name=x=y", "--priority-aging",
                   "1e-1", "--swap-blocks", "0");
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_str_eq(c.model, "a b.gguf");
    ck_assert_int_eq(c.kv_blocks, 64);
    ck_assert_int_eq(c.max_body_bytes, 1000);
    ck_assert_double_eq(c.read_timeout, 2.5);
    ck_assert_int_eq(c.log_level, LOGL_DEBUG);
    ck_assert_str_eq(c.preempt, "swap");
    ck_assert_str_eq(c.backend, "cuda");
    ck_assert_str_eq(c.admin_socket, "");
    ck_assert_str_eq(c.model_name, "x=y");
    ck_assert_double_eq(c.priority_aging, 0.1);
    ck_assert_int_eq(c.swap_blocks, 0);
    cfg_free(&c);
}
END_TEST

START_TEST(later_flag_wins_over_earlier)
{
    struct llmd_config c;
    char err[256];
    ck_assert_int_eq(PARSE(&c, err, "--model", "a", "--max-n", "3", "--model", "b", "--max-n", "4"),
                     0);
    ck_assert_str_eq(c.model, "b");
    ck_assert_int_eq(c.max_n, 4);
    cfg_free(&c);
}
END_TEST

START_TEST(config_file_then_flags_override)
{
    char path[64], err[256];
    write_file(path, "# a comment\n"
                     "\n"
                     "   model   =   \"/models/my model.gguf\"  \n"
                     "kv-blocks = 100\n"
                     "\t# indented comment\n"
                     "max_seqs=8\n"
                     "chat-template = 'chatml#1'\n"
                     "tls-cert = \"/a \\\"quoted\\\" \\\\ path\"\n"
                     "db-refresh = 2\n"
                     "kv-blocks = 101\n");
    struct llmd_config c;
    /* --config comes last on the line but is read before every flag. */
    int rc = PARSE(&c, err, "--db-refresh", "0.25", "--config", path);
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_str_eq(c.config, path);
    ck_assert_str_eq(c.model, "/models/my model.gguf");
    ck_assert_int_eq(c.kv_blocks, 101);
    ck_assert_int_eq(c.max_seqs, 8);
    ck_assert_str_eq(c.chat_template, "chatml#1");
    ck_assert_str_eq(c.tls_cert, "/a \"quoted\" \\ path");
    ck_assert_double_eq(c.db_refresh, 0.25);
    ck_assert_int_eq(c.block_size, 16);
    cfg_free(&c);

    rc = PARSE(&c, err,
               "--config="
               "/dev/null",
               "--model", "m", "--config", path, "--kv-blocks", "7");
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_int_eq(c.kv_blocks, 7);
    ck_assert_int_eq(c.max_seqs, 8); /* the last --config is the file read */
    cfg_free(&c);
    unlink(path);
}
END_TEST

START_TEST(lists_append_within_a_source_and_replace_across)
{
    char path[64], err[256];
    write_file(path, "model = m\n"
                     "listen = 0.0.0.0:8443\n"
                     "listen = [::]:8443\n"
                     "listen-plain = 127.0.0.1:8080\n");
    struct llmd_config c;
    ck_assert_int_eq(PARSE(&c, err, "--config", path), 0);
    ck_assert_int_eq(c.n_listen, 2); /* the file's two replace the default */
    ck_assert_str_eq(c.listen[0], "0.0.0.0:8443");
    ck_assert_str_eq(c.listen[1], "[::]:8443");
    ck_assert_int_eq(c.n_listen_plain, 1);
    cfg_free(&c);

    ck_assert_int_eq(
        PARSE(&c, err, "--config", path, "--listen", "example.com:443", "--listen=10.0.0.1:1"), 0);
    ck_assert_int_eq(c.n_listen, 2); /* flags replace the file's list */
    ck_assert_str_eq(c.listen[0], "example.com:443");
    ck_assert_str_eq(c.listen[1], "10.0.0.1:1");
    ck_assert_int_eq(c.n_listen_plain, 1); /* untouched by flags: the file's */
    ck_assert_str_eq(c.listen_plain[0], "127.0.0.1:8080");
    cfg_free(&c);

    ck_assert_int_eq(PARSE(&c, err, "--config", path, "--listen", ""), 0);
    ck_assert_int_eq(c.n_listen, 0); /* "" empties it; plain HTTP is left */
    cfg_free(&c);
    unlink(path);

    ck_assert_int_eq(PARSE(&c, err, "--model", "m", "--listen", ""), -1);
    ck_assert_ptr_nonnull(strstr(err, "no address"));
    assert_empty(&c);
}
END_TEST

START_TEST(too_many_addresses_is_an_error)
{
    struct llmd_config c;
    char err[256];
    const char *args[2 * CFG_MAX_LISTEN + 8] = {"--model", "m"};
    int n = 2;
    for (int i = 0; i <= CFG_MAX_LISTEN; i++) {
        args[n++] = "--listen";
        args[n++] = "127.0.0.1:1";
    }
    args[n] = NULL;
    ck_assert_int_eq(parse_v(&c, err, sizeof(err), args), -1);
    ck_assert_ptr_nonnull(strstr(err, "--listen"));
    ck_assert_ptr_nonnull(strstr(err, "at most"));
    assert_empty(&c);
}
END_TEST

START_TEST(unknown_flags_and_arguments_are_errors)
{
    struct llmd_config c;
    char err[256];
    ck_assert_int_eq(PARSE(&c, err, "--model", "m", "--bogus", "1"), -1);
    ck_assert_ptr_nonnull(strstr(err, "unknown option --bogus"));
    assert_empty(&c);
    ck_assert_int_eq(PARSE(&c, err, "--model", "m", "stray"), -1);
    ck_assert_ptr_nonnull(strstr(err, "'stray'"));
    ck_assert_int_eq(PARSE(&c, err, "--model", "m", "-x"), -1);
    ck_assert_ptr_nonnull(strstr(err, "'-x'"));
    ck_assert_int_eq(PARSE(&c, err, "--model", "m", "--kv-blocks"), -1);
    ck_assert_ptr_nonnull(strstr(err, "--kv-blocks needs a value"));
    ck_assert_int_eq(PARSE(&c, err, "--model", "m", "--config", "/nonexistent/llmd.conf"), -1);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/llmd.conf"));
    assert_empty(&c);
}
END_TEST

START_TEST(bad_file_lines_name_file_and_line)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"model = m\n\n# c\nbogus = 1\n", ":4: unknown key 'bogus'"},
        {"config = /etc/other.conf\n", ":1: unknown key 'config'"},
        {"model = m\njust words\n", ":2: expected 'key = value'"},
        {"model = \"m\n", ":1: model: unterminated quote"},
        {"model = \"m\"x\n", ":1: model: unterminated quote"},
        {"model = m\n kv-blocks = -3\n", ":2: kv-blocks: bad value '-3'"},
        {"model = m\nlisten = 1.2.3.4\n", ":2: listen: bad value '1.2.3.4'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char path[64], err[256];
        struct llmd_config c;
        write_file(path, cases[i].text);
        ck_assert_int_eq(PARSE(&c, err, "--config", path), -1);
        ck_assert_msg(strstr(err, cases[i].want) && !strncmp(err, path, strlen(path)),
                      "case %zu: '%s' lacks '%s'", i, err, cases[i].want);
        assert_empty(&c);
        unlink(path);
    }
}
END_TEST

/* Each bad value is refused with a message naming the option and value. */
START_TEST(bad_values_name_option_and_value)
{
    static const char *const bad[][2] = {
        {"kv-blocks", "0"},
        {"kv-blocks", "abc"},
        {"kv-blocks", "12x"},
        {"kv-blocks", " 5"},
        {"kv-blocks", "99999999999999999999"},
        {"block-size", "2000"},
        {"max-n", "0"},
        {"max-seqs", "-1"},
        {"max-body-bytes", "0"},
        {"max-header-bytes", "10"},
        {"read-timeout", "0"},
        {"read-timeout", "nan"},
        {"idle-timeout", "inf"},
        {"db-refresh", "-1"},
        {"drain-timeout", "1s"},
        {"priority-aging", ""},
        {"backend", "tpu"},
        {"backend", ""},
        {"preempt", "sometimes"},
        {"log-level", "loud"},
        {"listen", "127.0.0.1"},
        {"listen", "127.0.0.1:0"},
        {"listen", "127.0.0.1:65536"},
        {"listen", "127.0.0.1:80x"},
        {"listen", "127.0.0.1:"},
        {"listen", ":80"},
        {"listen", "::1:80"},
        {"listen", "[zz]:80"},
        {"listen", "[::1]80"},
        {"listen", "host_name:80"},
        {"listen", "999.1.1.1:80"},
        {"listen", "-bad.example:80"},
        {"listen-plain", "0.0.0.0:8080"},
        {"listen-plain", "[::]:8080"},
        {"listen-plain", "example.com:80"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct llmd_config c;
        char err[256], flag[64];
        snprintf(flag, sizeof(flag), "--%s", bad[i][0]);
        int rc = PARSE(&c, err, "--model", "m", flag, bad[i][1]);
        ck_assert_msg(rc == -1, "--%s '%s' accepted", bad[i][0], bad[i][1]);
        char want[128];
        snprintf(want, sizeof(want), "%s: bad value '%s'", flag, bad[i][1]);
        ck_assert_msg(strstr(err, want) != NULL, "'%s' lacks '%s'", err, want);
        assert_empty(&c);
    }
}
END_TEST

START_TEST(good_addresses_are_accepted)
{
    static const char *const good[][2] = {
        {"listen", "0.0.0.0:1"},          {"listen", "[::]:65535"},
        {"listen", "[fe80::1]:8443"},     {"listen", "llmd-1.example.com:443"},
        {"listen", "localhost:8443"},     {"listen-plain", "127.0.0.1:8080"},
        {"listen-plain", "127.1.2.3:80"}, {"listen-plain", "[::1]:8080"},
        {"listen-plain", "localhost:80"},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct llmd_config c;
        char err[256], flag[64];
        snprintf(flag, sizeof(flag), "--%s", good[i][0]);
        int rc = PARSE(&c, err, "--model", "m", flag, good[i][1]);
        ck_assert_msg(rc == 0, "%s %s: %s", flag, good[i][1], err);
        cfg_free(&c);
    }
}
END_TEST

START_TEST(missing_model_is_an_error)
{
    struct llmd_config c;
    char err[256], path[64];
    ck_assert_int_eq(PARSE(&c, err, "--kv-blocks", "8"), -1);
    ck_assert_str_eq(err, "no model: give --model PATH or model = PATH in the config");
    assert_empty(&c);
    write_file(path, "model = \"\"\n");
    ck_assert_int_eq(PARSE(&c, err, "--config", path), -1);
    ck_assert_str_eq(err, "no model: give --model PATH or model = PATH in the config");
    unlink(path);
}
END_TEST

START_TEST(help_names_every_option)
{
    int rc;
    char *out = parse_stdout(&rc, (const char *const[]){"--bogus", "--help", NULL});
    ck_assert_int_eq(rc, 1); /* help wins over the bad flag before it */
    ck_assert_int_ge(cfg_option_count(), 30);
    for (int i = 0; i < cfg_option_count(); i++) {
        char flag[64];
        snprintf(flag, sizeof(flag), "--%s ", cfg_option_name(i));
        ck_assert_msg(strstr(out, flag), "--help lacks %s", flag);
    }
    ck_assert_ptr_nonnull(strstr(out, "--version"));
    ck_assert_ptr_nonnull(strstr(out, "(default: 1024)"));
    ck_assert_ptr_nonnull(strstr(out, "Network and TLS:"));
    char *help = cfg_help();
    ck_assert_str_eq(out, help);
    free(help);
    free(out);
    ck_assert_ptr_null(cfg_option_name(cfg_option_count()));
}
END_TEST

START_TEST(version_prints_and_stops)
{
    int rc;
    char *out = parse_stdout(&rc, (const char *const[]){"--version", NULL});
    ck_assert_int_eq(rc, 1);
    ck_assert_str_eq(out, "llmd " LLMD_VERSION "\n");
    free(out);
}
END_TEST

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *text = read_all_fd(fileno(f));
    fclose(f);
    return text;
}

START_TEST(checked_in_sample_equals_generated)
{
    char *want = cfg_sample();
    ck_assert_ptr_nonnull(want);
    char *have = read_file(SAMPLE_PATH);
    ck_assert_msg(have, "cannot read " SAMPLE_PATH " (run the suite from the repository root)");
    ck_assert_msg(strcmp(have, want) == 0, SAMPLE_PATH
                  " is stale: regenerate it with `llmd --print-config > " SAMPLE_PATH "`");
    int rc;
    char *printed = parse_stdout(&rc, (const char *const[]){"--print-config", NULL});
    ck_assert_int_eq(rc, 1);
    ck_assert_str_eq(printed, want);
    free(printed);
    free(have);
    free(want);
}
END_TEST

/* "# NAME = ..." where NAME is an option. */
static int is_key_line(const char *line)
{
    for (int i = 0; i < cfg_option_count(); i++) {
        size_t n = strlen(cfg_option_name(i));
        if (!strncmp(line, "# ", 2) && !strncmp(line + 2, cfg_option_name(i), n) &&
            !strncmp(line + 2 + n, " = ", 3))
            return 1;
    }
    return 0;
}

/* Every "# key = default" of the sample, uncommented, reads back as the
 * defaults: the sample shows defaults the parser accepts. */
START_TEST(sample_uncommented_gives_the_defaults)
{
    char *sample = cfg_sample(), path[64];
    size_t n = strlen(sample), keys = 0;
    char *text = malloc(n + 1), *w = text;
    for (char *line = sample; *line;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line + 1) : strlen(line);
        const char *body = line;
        if (is_key_line(line)) {
            body = line + 2;
            keys++;
        }
        memcpy(w, body, len - (size_t)(body - line));
        w += len - (size_t)(body - line);
        line += len;
    }
    *w = 0;
    ck_assert_int_eq(keys, cfg_option_count() - 1); /* all but --config */
    write_file(path, text);
    struct llmd_config a, b;
    char err[256];
    ck_assert_int_eq(PARSE(&a, err, "--model", "x"), 0);
    int rc = PARSE(&b, err, "--config", path, "--model", "x");
    ck_assert_msg(rc == 0, "%s", err);
    free(b.config);
    b.config = NULL;
    ck_assert_int_eq(b.n_listen, a.n_listen);
    ck_assert_str_eq(b.listen[0], a.listen[0]);
    ck_assert_int_eq(b.n_listen_plain, 0);
    ck_assert_str_eq(b.model_name, "");
    ck_assert_str_eq(b.db, a.db);
    ck_assert_int_eq(b.kv_blocks, a.kv_blocks);
    ck_assert_int_eq(b.max_body_bytes, a.max_body_bytes);
    ck_assert_double_eq(b.db_refresh, a.db_refresh);
    ck_assert_int_eq(b.log_level, a.log_level);
    ck_assert_str_eq(b.preempt, a.preempt);
    cfg_free(&a);
    cfg_free(&b);
    unlink(path);
    free(text);
    free(sample);
}
END_TEST

/* ---------------------------------------------------------------- log -- */

/* Runs fn with stderr on a pipe; returns everything written. */
static char *capture_stderr(void (*fn)(void))
{
    int p[2], saved = dup(STDERR_FILENO);
    ck_assert_int_eq(pipe(p), 0);
    dup2(p[1], STDERR_FILENO);
    close(p[1]);
    fn();
    dup2(saved, STDERR_FILENO); /* closes the pipe's last write end */
    close(saved);
    char *out = read_all_fd(p[0]);
    close(p[0]);
    return out;
}

static void log_one(void)
{
    log_set_level(LOGL_INFO);
    log_info("listening on %s:%d", "127.0.0.1", 8443);
}

START_TEST(log_line_has_timestamp_level_and_prefix)
{
    char *out = capture_stderr(log_one);
    regex_t re;
    ck_assert_int_eq(regcomp(&re,
                             "^[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]"
                             "\\.[0-9]{3}Z info llmd: listening on 127\\.0\\.0\\.1:8443\n$",
                             REG_EXTENDED),
                     0);
    ck_assert_msg(regexec(&re, out, 0, NULL, 0) == 0, "bad line: '%s'", out);
    regfree(&re);
    free(out);
}
END_TEST

static void log_levels(void)
{
    log_set_level(LOGL_WARN);
    log_info("hidden info");
    log_debug("hidden debug");
    log_warn("shown warn");
    log_error("shown error");
    log_set_level(LOGL_DEBUG);
    log_debug("shown debug");
    log_set_level(LOGL_ERROR);
    log_warn("hidden warn");
}

START_TEST(log_drops_lines_below_the_level)
{
    char *out = capture_stderr(log_levels);
    ck_assert_ptr_null(strstr(out, "hidden"));
    ck_assert_ptr_nonnull(strstr(out, " warn llmd: shown warn\n"));
    ck_assert_ptr_nonnull(strstr(out, " error llmd: shown error\n"));
    ck_assert_ptr_nonnull(strstr(out, " debug llmd: shown debug\n"));
    log_set_level(LOGL_INFO);
    ck_assert(log_enabled(LOGL_WARN) && log_enabled(LOGL_INFO) && !log_enabled(LOGL_DEBUG));
    free(out);
}
END_TEST

static void log_odd(void)
{
    log_set_level(LOGL_INFO);
    log_info("a\nb\rc\001d\te\n");
    char big[5000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    log_info("%s!", big);
}

START_TEST(log_escapes_control_characters_and_keeps_long_lines)
{
    char *out = capture_stderr(log_odd);
    char *second = strchr(out, '\n') + 1;
    ck_assert_ptr_nonnull(strstr(out, " info llmd: a\\nb\\rc\\x01d\te\n"));
    ck_assert_int_eq(strlen(second), 24 + strlen(" info llmd: ") + 4999 + 2);
    ck_assert_int_eq(second[strlen(second) - 2], '!');
    free(out);
}
END_TEST

#define LOG_THREADS 4
#define LOG_LINES   200

static void *log_thread(void *arg)
{
    for (int i = 0; i < LOG_LINES; i++)
        log_info("thread %d line %d", (int)(intptr_t)arg, i);
    return NULL;
}

static void log_many(void)
{
    log_set_level(LOGL_INFO);
    pthread_t t[LOG_THREADS];
    for (int i = 0; i < LOG_THREADS; i++)
        pthread_create(&t[i], NULL, log_thread, (void *)(intptr_t)i);
    for (int i = 0; i < LOG_THREADS; i++)
        pthread_join(t[i], NULL);
}

START_TEST(log_lines_from_threads_stay_whole)
{
    char *out = capture_stderr(log_many); /* ~60 KB at most: fits a pipe */
    int next[LOG_THREADS] = {0}, lines = 0;
    for (char *save, *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        int th, n;
        const char *msg = strstr(line, " info llmd: thread ");
        ck_assert_msg(msg && sscanf(msg, " info llmd: thread %d line %d", &th, &n) == 2,
                      "mangled line '%s'", line);
        ck_assert(th >= 0 && th < LOG_THREADS);
        ck_assert_int_eq(n, next[th]++);
        lines++;
    }
    ck_assert_int_eq(lines, LOG_THREADS * LOG_LINES);
    free(out);
}
END_TEST

START_TEST(log_level_names_round_trip)
{
    for (int l = LOGL_ERROR; l <= LOGL_DEBUG; l++)
        ck_assert_int_eq(log_level_parse(log_level_name(l)), l);
    ck_assert_int_eq(log_level_parse("warning"), LOGL_WARN);
    ck_assert_int_eq(log_level_parse("INFO"), -1);
    ck_assert_int_eq(log_level_parse(""), -1);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, defaults_fill_every_option);
    tcase_add_test(tc, flags_take_separate_and_equals_values);
    tcase_add_test(tc, later_flag_wins_over_earlier);
    tcase_add_test(tc, config_file_then_flags_override);
    tcase_add_test(tc, lists_append_within_a_source_and_replace_across);
    tcase_add_test(tc, too_many_addresses_is_an_error);
    tcase_add_test(tc, unknown_flags_and_arguments_are_errors);
    tcase_add_test(tc, bad_file_lines_name_file_and_line);
    tcase_add_test(tc, bad_values_name_option_and_value);
    tcase_add_test(tc, good_addresses_are_accepted);
    tcase_add_test(tc, missing_model_is_an_error);
    tcase_add_test(tc, help_names_every_option);
    tcase_add_test(tc, version_prints_and_stops);
    tcase_add_test(tc, checked_in_sample_equals_generated);
    tcase_add_test(tc, sample_uncommented_gives_the_defaults);
    suite_add_tcase(s, tc);
    TCase *tl = tcase_create("log");
    tcase_add_test(tl, log_line_has_timestamp_level_and_prefix);
    tcase_add_test(tl, log_drops_lines_below_the_level);
    tcase_add_test(tl, log_escapes_control_characters_and_keeps_long_lines);
    tcase_add_test(tl, log_lines_from_threads_stay_whole);
    tcase_add_test(tl, log_level_names_round_trip);
    suite_add_tcase(s, tl);
    return s;
}
