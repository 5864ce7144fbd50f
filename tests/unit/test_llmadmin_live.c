/*
 * tests/unit/test_llmadmin_live.c — llmadmin's live commands (status,
 * queues, blocks, drain, undrain, evict, top) run as the real binary
 * ($LLMD_BIN_DIR/llmadmin --socket PATH ...) against a fake admin server.
 *
 * The fake is a thread of the test listening on a temporary Unix socket:
 * it speaks the protocol of daemon/admsock.h with canned replies, records
 * every request line it gets, and can misbehave on demand (refuse the
 * peer, answer garbage, stay busy forever).  So each test pins down both
 * sides of the wire: what llmadmin sent, and what it made of the answer —
 * tables, --json, messages and exit statuses.
 */
#include "tests/unit/util_run.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* How the fake answers. */
enum fake_mode {
    FAKE_NORMAL,
    FAKE_DENY_REPLY, /* reads the request, answers a permission error */
    FAKE_DENY_EARLY, /* answers a permission error on accept, reads nothing */
    FAKE_GARBAGE,    /* answers a line that is not JSON */
    FAKE_SILENT,     /* closes without answering */
};

struct fake {
    char dir[64], sock[128], bin[512];
    int lfd;
    pthread_t th;
    pthread_mutex_t mu;
    json_t *got;     /* every request received, parsed, in order */
    int busy_status; /* status shows a running request while > 0 (one less per status) */
    enum fake_mode mode;
    volatile int stop;
};

/* ------------------------------------------------------- canned replies */

static const char *STATUS_IDLE =
    "{\"ok\":true,\"model\":\"SmolLM2-135M-Instruct\",\"backend\":\"cpu\",\"version\":\"9.9.9\","
    "\"uptime_s\":3725,\"draining\":false,\"step\":4242,"
    "\"device\":{\"total\":1024,\"used\":300,\"cached\":100,\"free\":624,\"block_bytes\":1572864},"
    "\"host\":{\"total\":4096,\"used\":12,\"block_bytes\":1572864},"
    "\"priorities\":[],\"tokens_per_s\":{\"10s\":123.45,\"60s\":98.7},"
    "\"preemptions\":{\"swap\":3,\"recompute\":1},\"swap_bytes\":{\"out\":12582912,\"in\":6291456},"
    "\"prefix_cache\":{\"lookups\":200,\"hits\":50},\"tenants\":[]}";

/* The busy status adds priorities and tenants to the idle one. */
static json_t *status_reply(int busy)
{
    json_t *j = json_loads(STATUS_IDLE, 0, NULL);
    if (!busy)
        return j;
    json_object_set_new(j, "priorities",
                        json_pack("[{s:i,s:i,s:i,s:i,s:i},{s:i,s:i,s:i,s:i,s:i}]", "priority", 0,
                                  "running", 2, "waiting", 1, "swapped", 0, "preempted", 0,
                                  "priority", 3, "running", 1, "waiting", 4, "swapped", 2,
                                  "preempted", 5));
    json_object_set_new(j, "tenants",
                        json_pack("[{s:s,s:f,s:i,s:i,s:i,s:i,s:f,s:f,s:f}]", "name", "alpha",
                                  "weight", 2.0, "running", 3, "waiting", 5, "swapped", 2,
                                  "device_blocks", 77, "tokens_per_s", 55.5, "share", 0.75,
                                  "weight_share", 0.6667));
    return j;
}

static const char *QUEUES =
    "{\"ok\":true,\"requests\":[{\"id\":\"chatcmpl-abc123\",\"engine_id\":17,\"tenant\":\"alpha\","
    "\"priority\":3,\"state\":\"swapped\",\"age_s\":65.2,\"n\":1,\"prompt_tokens\":321,"
    "\"cached_tokens\":16,\"generated_tokens\":45,\"device_blocks\":0,\"host_blocks\":23,"
    "\"preemptions\":2}]}";

static const char *BLOCKS_REQ =
    "{\"ok\":true,\"request\":\"chatcmpl-abc123\",\"engine_id\":17,\"block_size\":16,\"table\":["
    "{\"seq\":0,\"logical\":0,\"block\":912,\"where\":\"device\",\"ref\":2,"
    "\"hash\":\"0123abcd4567ef89\",\"shared\":true},"
    "{\"seq\":0,\"logical\":1,\"block\":5,\"where\":\"host\",\"ref\":1,\"hash\":null,"
    "\"shared\":false}]}";

/* 70 blocks: alpha holds 0-1, beta 2, 3 free, 4 cached, 5 unlisted, 6-69 free. */
static json_t *blocks_map(void)
{
    json_t *map = json_pack("[i,i,i,i,i,i]", 0, 0, 1, -1, -2, -3);
    for (int i = 6; i < 70; i++)
        json_array_append_new(map, json_integer(-1));
    return json_pack("{s:b,s:i,s:i,s:[s,s],s:o}", "ok", 1, "total", 70, "block_size", 16, "tenants",
                     "alpha", "beta", "map", map);
}

/* The reply to one request line (caller frees). */
static char *fake_answer(struct fake *f, const char *line)
{
    json_t *req = json_loads(line, 0, NULL);
    pthread_mutex_lock(&f->mu);
    json_array_append_new(f->got, req ? json_incref(req) : json_string(line));
    int busy = 0;
    const char *cmd = json_string_value(json_object_get(req, "cmd"));
    if (cmd && strcmp(cmd, "status") == 0 && f->busy_status > 0)
        busy = f->busy_status--;
    pthread_mutex_unlock(&f->mu);
    json_t *r = NULL;
    const char *reqid = json_string_value(json_object_get(req, "request"));
    if (!cmd)
        r = json_pack("{s:b,s:s}", "ok", 0, "error", "no cmd");
    else if (strcmp(cmd, "status") == 0)
        r = status_reply(busy);
    else if (strcmp(cmd, "queues") == 0)
        r = json_loads(QUEUES, 0, NULL);
    else if (strcmp(cmd, "blocks") == 0 && reqid && strcmp(reqid, "nope") == 0)
        r = json_pack("{s:b,s:s}", "ok", 0, "error", "no request 'nope'");
    else if (strcmp(cmd, "blocks") == 0)
        r = reqid ? json_loads(BLOCKS_REQ, 0, NULL) : blocks_map();
    else if (strcmp(cmd, "drain") == 0)
        r = json_pack("{s:b,s:O}", "ok", 1, "draining", json_object_get(req, "on"));
    else if (strcmp(cmd, "evict") == 0)
        r = json_pack("{s:b,s:i}", "ok", 1, "evicted", 3);
    else
        r = json_pack("{s:b,s:s}", "ok", 0, "error", "unknown cmd");
    json_decref(req);
    char *s = json_dumps(r, JSON_COMPACT);
    json_decref(r);
    return s;
}

/* ----------------------------------------------------------- the server */

static void write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

#define DENIED "{\"ok\":false,\"error\":\"permission denied: uid 1000 is not in group llmd\"}\n"

/* Answers every line of one connection until the peer closes. */
static void fake_serve(struct fake *f, int fd)
{
    if (f->mode == FAKE_DENY_EARLY) {
        write_all(fd, DENIED, strlen(DENIED));
        return;
    }
    char buf[65536];
    size_t len = 0;
    for (;;) {
        char *nl = len ? memchr(buf, '\n', len) : NULL;
        if (!nl) {
            ssize_t n = len < sizeof(buf) - 1 ? recv(fd, buf + len, sizeof(buf) - 1 - len, 0) : 0;
            if (n <= 0)
                return;
            len += (size_t)n;
            continue;
        }
        *nl = '\0';
        char *reply = fake_answer(f, buf);
        if (f->mode == FAKE_SILENT) {
            free(reply);
            return;
        }
        const char *out = f->mode == FAKE_DENY_REPLY ? DENIED
                          : f->mode == FAKE_GARBAGE  ? "this is not json\n"
                                                     : reply;
        write_all(fd, out, strlen(out));
        if (f->mode == FAKE_NORMAL)
            write_all(fd, "\n", 1);
        free(reply);
        len -= (size_t)(nl + 1 - buf);
        memmove(buf, nl + 1, len);
    }
}

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    while (!f->stop) {
        struct pollfd p = {.fd = f->lfd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(f->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        fake_serve(f, fd);
        close(fd);
    }
    return NULL;
}

static void sock_addr(struct sockaddr_un *sa, const char *path)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    ck_assert_uint_lt(strlen(path), sizeof(sa->sun_path));
    memcpy(sa->sun_path, path, strlen(path) + 1);
}

static void fake_start(struct fake *f, enum fake_mode mode)
{
    memset(f, 0, sizeof(*f));
    const char *bd = getenv("LLMD_BIN_DIR");
    snprintf(f->bin, sizeof(f->bin), "%s/llmadmin", bd && *bd ? bd : "build/bin");
    ck_assert_msg(access(f->bin, X_OK) == 0, "no llmadmin at %s", f->bin);
    snprintf(f->dir, sizeof(f->dir), "/tmp/test_llmadmin_live.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(f->dir));
    snprintf(f->sock, sizeof(f->sock), "%s/admin.sock", f->dir);
    f->mode = mode;
    f->got = json_array();
    pthread_mutex_init(&f->mu, NULL);
    struct sockaddr_un sa;
    sock_addr(&sa, f->sock);
    f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(f->lfd, 0);
    ck_assert_int_eq(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(f->lfd, 16), 0);
    ck_assert_int_eq(pthread_create(&f->th, NULL, fake_main, f), 0);
}

static void fake_stop(struct fake *f)
{
    f->stop = 1;
    pthread_join(f->th, NULL);
    close(f->lfd);
    json_decref(f->got);
    pthread_mutex_destroy(&f->mu);
    const char *names[] = {"admin.sock", "out", "err", "none.sock", "dead.sock"};
    char p[192];
    for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
        snprintf(p, sizeof(p), "%s/%s", f->dir, names[i]);
        unlink(p);
    }
    rmdir(f->dir);
}

/* The requests received so far (a copy: caller owns). */
static json_t *fake_got(struct fake *f)
{
    pthread_mutex_lock(&f->mu);
    json_t *j = json_deep_copy(f->got);
    pthread_mutex_unlock(&f->mu);
    return j;
}

/* Asserts that request i was exactly want (JSON text). */
static void assert_request(struct fake *f, size_t i, const char *want)
{
    json_t *got = fake_got(f), *w = json_loads(want, 0, NULL);
    ck_assert_ptr_nonnull(w);
    json_t *g = json_array_get(got, i);
    char *gs = g ? json_dumps(g, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    ck_assert_msg(g && json_equal(g, w), "request %zu: got %s, want %s", i, gs ? gs : "nothing",
                  want);
    free(gs);
    json_decref(w);
    json_decref(got);
}

static size_t n_requests(struct fake *f)
{
    json_t *got = fake_got(f);
    size_t n = json_array_size(got);
    json_decref(got);
    return n;
}

/* ------------------------------------------------------------ running it */

/* Runs llmadmin with args (NULL-terminated); LLMD_ADMIN_SOCKET = env_sock
 * (NULL: unset); as_nobody drops root to uid/gid 65534 first. */
static void run_ex(struct fake *f, const char *env_sock, int as_nobody, struct ur_run *r,
                   const char *const *args)
{
    ur_exec(f->bin, f->dir, "LLMD_ADMIN_SOCKET", env_sock, as_nobody, r, args);
}

#define RUN(f, r, ...) run_ex((f), NULL, 0, (r), (const char *const[]){__VA_ARGS__, NULL})
/* With --socket first, as scripts usually write it. */
#define ADM(f, r, ...) RUN((f), (r), "--socket", (f)->sock, __VA_ARGS__)

static void assert_ok(const struct ur_run *r)
{
    ck_assert_msg(r->rc == 0, "exit %d; stderr: %s", r->rc, r->err);
    ck_assert_str_eq(r->err, "");
}

static void assert_has(const char *text, const char *words)
{
    ck_assert_msg(strstr(text, words), "lacks '%s':\n%s", words, text);
}

static void assert_fails(const struct ur_run *r, int rc, const char *words)
{
    ck_assert_msg(r->rc == rc, "exit %d, want %d; stderr: %s", r->rc, rc, r->err);
    ck_assert_msg(strncmp(r->err, "llmadmin: ", 10) == 0, "stderr: %s", r->err);
    assert_has(r->err, words);
    if (rc == 2)
        assert_has(r->err, "\nusage: llmadmin ");
    ck_assert_str_eq(r->out, "");
}

/* Runs with --json, expects exit 0, returns stdout parsed (caller owns). */
static json_t *run_json(struct fake *f, const char *const *args)
{
    struct ur_run r;
    run_ex(f, NULL, 0, &r, args);
    assert_ok(&r);
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    ck_assert_msg(j != NULL, "not one JSON value (%s): %s", je.text, r.out);
    ur_free(&r);
    return j;
}

#define JSON(f, ...)                                                                               \
    run_json((f), (const char *const[]){"--socket", (f)->sock, "--json", __VA_ARGS__, NULL})

/* ---------------------------------------------------------------- views */

START_TEST(status_prints_the_header_priorities_and_tenant_shares)
{
    struct fake f;
    fake_start(&f, FAKE_NORMAL);
    f.busy_status = 1;
    struct ur_run r;
    ADM(&f, &r, "status");
    assert_ok(&r);
    assert_request(&f, 0, "{\"cmd\":\"status\"}");
    const char *want[] = {
        "model:        SmolLM2-135M-Instruct\n",
        "backend:      cpu (llmd 9.9.9)\n",
        "uptime:       1h02m (step 4242)\n",
        "draining:     no\n",
        "device KV:    1024 blocks of 1.5 MiB: 300 used, 100 cached, 624 free\n",
        "(450.0 MiB used, 150.0 MiB cached, 936.0 MiB free)\n",
        "host KV:      4096 blocks of 1.5 MiB: 12 used, 4084 free\n",
        "              (18.0 MiB used, 6.0 GiB free)\n",
        "tokens/s:     123.5 over 10 s, 98.7 over 1 min\n",
        "preemptions:  3 by swap, 1 by recompute; swapped 12.0 MiB out, 6.0 MiB in\n",
        "prefix cache: 50 hits of 200 lookups (25%)\n",
        "PRIORITY  RUNNING  WAITING  SWAPPED  PREEMPTED\n",
        "       3        1        4        2          5\n",
        "TENANT  WEIGHT  RUNNING  WAITING  SWAPPED  BLOCKS  TOKENS/S  SHARE  WEIGHT-SHARE\n",
        "alpha        2        3        5        2      77      55.5    75%           67%\n",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++)
        assert_has(r.out, want[i]);
    ur_free(&r);
    /* idle: no tables, and it says so */
    ADM(&f, &r, "status");
    assert_ok(&r);
    assert_has(r.out, "\nno requests\n");
    ck_assert_ptr_null(strstr(r.out, "PRIORITY"));
    ur_free(&r);
    fake_stop(&f);
}
END_TEST

START_TEST(json_prints_the_reply_without_ok_wherever_the_flag_stands)
{
    struct fake f;
    fake_start(&f, FAKE_NORMAL);
    json_t *j = JSON(&f, "status");
    ck_assert_ptr_null(json_object_get(j, "ok"));
    ck_assert_str_eq(json_string_value(json_object_get(j, "model")), "SmolLM2-135M-Instruct");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "device"), "free")),
                     624);
    json_decref(j);
    j = run_json(&f, (const char *const[]){"queues", "--json", "--socket", f.sock, NULL});
    json_t *reqs = json_object_get(j, "requests");
    ck_assert_int_eq(json_array_size(reqs), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(reqs, 0), "id")),
                     "chatcmpl-abc123");
    json_decref(j);
    j = JSON(&f, "evict", "17");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "evicted")), 3);
    ck_assert_int_eq(json_object_size(j), 1);
    json_decref(j);
    fake_stop(&f);
}
END_TEST

START_TEST(queues_prints_one_row_per_request_and_sends_the_tenant)
{
    struct fake f;
    fake_start(&f, FAKE_NORMAL);
    struct ur_run r;
    ADM(&f, &r, "queues");
    assert_ok(&r);
    assert_request(&f, 0, "{\"cmd\":\"queues\"}");
    assert_has(r.out, "ID               ENG  TENANT  PRIO  STATE      AGE  PROMPT  GENERATED  "
                      "DEV-BLOCKS  HOST-BLOCKS  PREEMPTIONS\n");
    assert_has(r.out, "chatcmpl-abc123   17  alpha      3  swapped  1m05s     321         45  "
                      "         0           23            2\n");
    ur_free(&r);
    ADM(&f, &r, "queues", "--tenant", "alpha");
    assert_ok(&r);
    assert_request(&f, 1, "{\"cmd\":\"queues\",\"tenant\":\"alpha\"}");
    ur_free(&r);
    ADM(&f, &r, "queues", "extra");
    assert_fails(&r, 2, "unexpected argument 'extra'");
    ur_free(&r);
    ck_assert_int_eq(n_requests(&f), 2);
    fake_stop(&f);
}
END_TEST

START_TEST(blocks_of_a_request_prints_its_table_with_short_hashes)
{
    struct fake f;
    fake_start(&f, FAKE_NORMAL);
    struct ur_run r;
    ADM(&f, &r, "blocks", "chatcmpl-abc123");
    assert_ok(&r);
    assert_request(&f, 0, "{\"cmd\":\"blocks\",\"request\":\"chatcmpl-abc123\"}");
    assert_has(r.out, "request chatcmpl-abc123 (engine 17), block size 16, 2 blocks\n");
    assert_has(r.out, "SEQ  LOGICAL  PHYSICAL  WHERE   REF  HASH      SHARED\n");
    assert_has(r.out, "  0        0       912  device    2  0123abcd  yes\n");
    assert_has(r.out, "  0        1         5  host      1  -         no\n");
    ur_free(&r);
    ADM(&f, &r, "blocks", "a", "b");
    assert_fails(&r, 2, "unexpected argument 'b'");
    ur_free(&r);
    fake_stop(&f);
}
END_TEST

START_TEST(blocks_map_has_one_character_per_block_and_a_legend)
{
    struct fake f;
    fake_start(&f, FAKE_NORMAL);
    struct ur_run r;
    ADM(&f, &r, "blocks");
    assert_ok(&r);
    assert_request(&f, 0, "{\"cmd\":\"blocks\"}");
    char line0[128], line1[128];
    snprintf(line0, sizeof(line0), "\n     0 AAB.:*%.*s\n", 58,
             "..........................................................................");
    snprintf(line1, sizeof(line1), "\n    64 ......\n");
    assert_has(r.out, "device blocks: 70, block size 16\n");
    assert_has(r.out, line0);
    assert_has(r.out, line1);
    assert_has(r.out, ". free (65)  : cached (1)\n");
    assert_has(r.out, "* in use, by no request listed (1)\n");
    assert_has(r.out, "A alpha (2)\n");
    assert_has(r.out, "B beta (1)\n");
    ur_free(&r);
    fake_stop(&f);
}
END_TEST

/* --------------------------------------------------------------- levers */

START_TEST(evict_sends_the_request_or_tenant_and_abort)
{
    struct fake f;
    fake_start(&f, FAKE_NORMAL);
    struct ur_run r;
    ADM(&f, &r, "evict", "--tenant", "T", "--abort");
    assert_ok(&r);
    assert_request(&f, 0, "{\"cmd\":\"evict\",\"tenant\":\"T\",\"abort\":true}");
    ck_assert_str_eq(r.out, "aborted 3 requests (ended with an error)\n");
    ur_free(&r);
    ADM(&f, &r, "evict", "chatcmpl-abc123");
    assert_ok(&r);
    assert_request(&f, 1, "{\"cmd\":\"evict\",\"request\":\"chatcmpl-abc123\",\"abort\":false}");
    assert_has(r.out, "evicted 3 requests");
    ur_free(&r);
    ADM(&f, &r, "evict");
    assert_fails(&r, 2, "name one REQUEST or one --tenant");
    ur_free(&r);
    ADM(&f, &r, "evict", "17", "--tenant", "T");
    assert_fails(&r, 2, "name one REQUEST or one --tenant");
    ur_free(&r);
    ADM(&f, &r, "evict", "--tenant");
    assert_fails(&r, 2, "needs a value");
    ur_free(&r);
    ck_assert_int_eq(n_requests(&f), 2);
    fake_stop(&f);
}
END_TEST

START_TEST(drain_and_undrain_send_the_on_flag)
{
    struct fake f;
    fake_start(&f, FAKE_NORMAL);
    struct ur_run r;
    ADM(&f, &r, "drain");
    assert_ok(&r);
    assert_request(&f, 0, "{\"cmd\":\"drain\",\"on\":true}");
    assert_has(r.out, "draining");
    ur_free(&r);
    ADM(&f, &r, "undrain");
    assert_ok(&r);
    assert_request(&f, 1, "{\"cmd\":\"drain\",\"on\":false}");
    assert_has(r.out, "accepts new requests again");
    ur_free(&r);
    json_t *j = JSON(&f, "undrain");
    ck_assert(json_is_false(json_object_get(j, "draining")));
    json_decref(j);
    ADM(&f, &r, "drain", "--timeout", "5");
    assert_fails(&r, 2, "--timeout only goes with --wait");
    ur_free(&r);
    ADM(&f, &r, "drain", "--wait", "--timeout", "soon");
    assert_fails(&r, 2, "--timeout");
    ur_free(&r);
    ck_assert_int_eq(n_requests(&f), 3);
    fake_stop(&f);
}
END_TEST

START_TEST(drain_wait_polls_status_until_nothing_is_left)
{
    struct fake f;
    fake_start(&f, FAKE_NORMAL);
    f.busy_status = 3;
    struct ur_run r;
    ADM(&f, &r, "drain", "--wait", "--timeout", "60");
    assert_ok(&r);
    assert_has(r.out, "none is left");
    /* drain, three busy answers, then the idle one ends the wait */
    ck_assert_int_eq(n_requests(&f), 5);
    assert_request(&f, 0, "{\"cmd\":\"drain\",\"on\":true}");
    for (size_t i = 1; i < 5; i++)
        assert_request(&f, i, "{\"cmd\":\"status\"}");
    ur_free(&r);
    fake_stop(&f);
}
END_TEST

START_TEST(drain_wait_gives_up_after_its_timeout)
{
    struct fake f;
    fake_start(&f, FAKE_NORMAL);
    f.busy_status = 1000000;
    struct ur_run r;
    ADM(&f, &r, "drain", "--wait", "--timeout", "1");
    assert_fails(&r, 1, "15 requests still in the engine after 1 s");
    assert_has(r.err, "still draining");
    ck_assert_uint_ge(n_requests(&f), 3); /* drain, then status polled more than once */
    ur_free(&r);
    fake_stop(&f);
}
END_TEST

/* --------------------------------------------------------------- errors */

START_TEST(a_daemon_error_exits_1_with_its_message)
{
    struct fake f;
    fake_start(&f, FAKE_NORMAL);
    struct ur_run r;
    ADM(&f, &r, "blocks", "nope");
    assert_fails(&r, 1, "llmadmin: no request 'nope'\n");
    ur_free(&r);
    fake_stop(&f);
    fake_start(&f, FAKE_GARBAGE);
    ADM(&f, &r, "status");
    assert_fails(&r, 1, "not a JSON object");
    ur_free(&r);
    fake_stop(&f);
    fake_start(&f, FAKE_SILENT);
    ADM(&f, &r, "status");
    assert_fails(&r, 1, "closed the connection without a reply");
    ur_free(&r);
    fake_stop(&f);
}
END_TEST

START_TEST(no_socket_or_no_listener_says_no_llmd_running)
{
    struct fake f;
    fake_start(&f, FAKE_NORMAL);
    char none[192], dead[192], want[256];
    snprintf(none, sizeof(none), "%s/none.sock", f.dir);
    struct ur_run r;
    RUN(&f, &r, "--socket", none, "status");
    snprintf(want, sizeof(want), "llmadmin: no llmd running (socket %s: ", none);
    assert_fails(&r, 1, want);
    ur_free(&r);
    /* a socket file nobody listens on any more: connection refused */
    snprintf(dead, sizeof(dead), "%s/dead.sock", f.dir);
    struct sockaddr_un sa;
    sock_addr(&sa, dead);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    close(fd);
    RUN(&f, &r, "--socket", dead, "drain");
    snprintf(want, sizeof(want), "llmadmin: no llmd running (socket %s: ", dead);
    assert_fails(&r, 1, want);
    ur_free(&r);
    ck_assert_int_eq(n_requests(&f), 0);
    fake_stop(&f);
}
END_TEST

START_TEST(a_refused_peer_is_told_to_run_as_root_or_llmd_group)
{
    const enum fake_mode modes[] = {FAKE_DENY_REPLY, FAKE_DENY_EARLY};
    for (size_t i = 0; i < 2; i++) {
        struct fake f;
        fake_start(&f, modes[i]);
        char want[256];
        snprintf(want, sizeof(want),
                 "llmadmin: not permitted to use %s (run as root or as a member of the llmd "
                 "group)\n",
                 f.sock);
        struct ur_run r;
        ADM(&f, &r, "status");
        assert_fails(&r, 1, want);
        ur_free(&r);
        fake_stop(&f);
    }
}
END_TEST

START_TEST(a_socket_without_access_rights_is_not_permitted)
{
    /* root passes file modes by, so as root the client runs as nobody */
    struct fake f;
    fake_start(&f, FAKE_NORMAL);
    ck_assert_int_eq(chmod(f.sock, 0), 0);
    ck_assert_int_eq(chmod(f.dir, 0755), 0);
    struct ur_run r;
    run_ex(&f, NULL, geteuid() == 0, &r, (const char *const[]){"--socket", f.sock, "status", NULL});
    char want[256];
    snprintf(want, sizeof(want), "llmadmin: not permitted to use %s (run as root", f.sock);
    assert_fails(&r, 1, want);
    ur_free(&r);
    ck_assert_int_eq(n_requests(&f), 0);
    fake_stop(&f);
}
END_TEST

START_TEST(the_socket_comes_from_the_flag_then_the_environment)
{
    struct fake f;
    fake_start(&f, FAKE_NORMAL);
    struct ur_run r;
    run_ex(&f, f.sock, 0, &r, (const char *const[]){"status", NULL});
    assert_ok(&r);
    ur_free(&r);
    ck_assert_int_eq(n_requests(&f), 1);
    char none[192];
    snprintf(none, sizeof(none), "%s/none.sock", f.dir);
    run_ex(&f, f.sock, 0, &r, (const char *const[]){"status", "--socket", none, NULL});
    assert_fails(&r, 1, none);
    ur_free(&r);
    run_ex(&f, NULL, 0, &r, (const char *const[]){"status", "--socket=", NULL});
    assert_fails(&r, 2, "--socket: empty path");
    ur_free(&r);
    ck_assert_int_eq(n_requests(&f), 1);
    RUN(&f, &r, "--help");
    assert_ok(&r);
    const char *words[] = {"--socket PATH",    "/run/llmd/admin.sock", "status",
                           "queues [--tenant", "blocks [REQUEST]",     "drain [--wait",
                           "undrain",          "evict REQUEST",        "top [-d SECONDS]"};
    for (size_t i = 0; i < sizeof(words) / sizeof(*words); i++)
        assert_has(r.out, words[i]);
    ur_free(&r);
    fake_stop(&f);
}
END_TEST

/* ------------------------------------------------------------------ top */

START_TEST(top_without_a_terminal_prints_one_snapshot)
{
    struct fake f;
    fake_start(&f, FAKE_NORMAL);
    struct ur_run r;
    ADM(&f, &r, "top");
    assert_ok(&r);
    ck_assert_int_eq(n_requests(&f), 2);
    assert_request(&f, 0, "{\"cmd\":\"status\"}");
    assert_request(&f, 1, "{\"cmd\":\"queues\"}");
    assert_has(r.out, "model:        SmolLM2-135M-Instruct\n");
    assert_has(r.out, "chatcmpl-abc123   17  alpha");
    ur_free(&r);
    json_t *j = JSON(&f, "top", "-d", "2");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "status"), "model")),
                     "SmolLM2-135M-Instruct");
    ck_assert_int_eq(json_array_size(json_object_get(json_object_get(j, "queues"), "requests")), 1);
    json_decref(j);
    ADM(&f, &r, "top", "-d", "0");
    assert_fails(&r, 2, "-d");
    ur_free(&r);
    ADM(&f, &r, "top", "-d0.5x");
    assert_fails(&r, 2, "-d");
    ur_free(&r);
    /* with no daemon, the snapshot fails like status does */
    char none[192];
    snprintf(none, sizeof(none), "%s/none.sock", f.dir);
    RUN(&f, &r, "--socket", none, "top");
    assert_fails(&r, 1, "no llmd running");
    ur_free(&r);
    fake_stop(&f);
}
END_TEST

/* Runs top -d 0.2 on an 80x24 pseudo-terminal until its screen shows the
 * queue, then stops it with key (or SIGINT when key is 0); the exit status,
 * and everything it wrote into *screen (caller frees). */
static int top_on_a_terminal(struct fake *f, char key, char **screen)
{
    struct winsize ws = {.ws_row = 24, .ws_col = 80};
    int fd;
    fflush(NULL);
    pid_t pid = forkpty(&fd, NULL, NULL, &ws);
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setenv("TERM", "xterm", 1);
        execl(f->bin, f->bin, "--socket", f->sock, "top", "-d", "0.2", (char *)NULL);
        _exit(127);
    }
    size_t cap = 1 << 20, len = 0;
    char *out = calloc(1, cap);
    ck_assert_ptr_nonnull(out);
    int sent = 0, st = 0;
    /* generous bounds against a hang, never a timing assertion */
    for (int i = 0; i < 400; i++) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) > 0) {
            ssize_t n = read(fd, out + len, cap - len - 1);
            if (n <= 0) { /* the terminal's far side closed: top is exiting */
                ck_assert_int_eq(waitpid(pid, &st, 0), pid);
                pid = 0;
                break;
            }
            len += n > 0 ? (size_t)n : 0;
        }
        if (!sent && strstr(out, "swapped") && strstr(out, "PREEMPT")) {
            sent = key ? (int)write(fd, &key, 1) : kill(pid, SIGINT) == 0;
            ck_assert_int_eq(sent, 1);
        }
        if (sent && waitpid(pid, &st, WNOHANG) == pid) {
            while (poll(&p, 1, 50) > 0 && (size_t)(cap - len - 1) > 0) {
                ssize_t n = read(fd, out + len, cap - len - 1);
                if (n <= 0)
                    break;
                len += (size_t)n;
            }
            pid = 0;
            break;
        }
    }
    close(fd);
    if (pid) { /* still running: a failure, but leave nothing behind */
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        ck_abort_msg("top did not stop; it wrote: %s", out);
    }
    *screen = out;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

START_TEST(top_on_a_terminal_refreshes_and_gives_the_terminal_back)
{
    const char keys[] = {'q', 0};
    for (size_t i = 0; i < 2; i++) {
        struct fake f;
        fake_start(&f, FAKE_NORMAL);
        char *screen;
        int rc = top_on_a_terminal(&f, keys[i], &screen);
        ck_assert_msg(rc == 0, "top exit %d (%s)", rc, keys[i] ? "q" : "SIGINT");
        assert_has(screen, "SmolLM2-135M-Instruct");
        assert_has(screen, "\x1b[?1049l");                     /* left the alternate screen */
        ck_assert_ptr_null(strstr(screen, "chatcmpl-abc123")); /* compact: engine ids only */
        ck_assert_msg(!strstr(screen, "Sanitizer"), "%s", screen);
        free(screen);
        size_t n = n_requests(&f);
        ck_assert_uint_ge(n, 2);
        assert_request(&f, 0, "{\"cmd\":\"status\"}");
        assert_request(&f, 1, "{\"cmd\":\"queues\"}");
        fake_stop(&f);
    }
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("llmadmin_live");
    TCase *v = tcase_create("views");
    tcase_add_test(v, status_prints_the_header_priorities_and_tenant_shares);
    tcase_add_test(v, json_prints_the_reply_without_ok_wherever_the_flag_stands);
    tcase_add_test(v, queues_prints_one_row_per_request_and_sends_the_tenant);
    tcase_add_test(v, blocks_of_a_request_prints_its_table_with_short_hashes);
    tcase_add_test(v, blocks_map_has_one_character_per_block_and_a_legend);
    suite_add_tcase(s, v);
    TCase *l = tcase_create("levers");
    tcase_set_timeout(l, 60);
    tcase_add_test(l, evict_sends_the_request_or_tenant_and_abort);
    tcase_add_test(l, drain_and_undrain_send_the_on_flag);
    tcase_add_test(l, drain_wait_polls_status_until_nothing_is_left);
    tcase_add_test(l, drain_wait_gives_up_after_its_timeout);
    suite_add_tcase(s, l);
    TCase *e = tcase_create("errors");
    tcase_set_timeout(e, 60);
    tcase_add_test(e, a_daemon_error_exits_1_with_its_message);
    tcase_add_test(e, no_socket_or_no_listener_says_no_llmd_running);
    tcase_add_test(e, a_refused_peer_is_told_to_run_as_root_or_llmd_group);
    tcase_add_test(e, a_socket_without_access_rights_is_not_permitted);
    tcase_add_test(e, the_socket_comes_from_the_flag_then_the_environment);
    suite_add_tcase(s, e);
    TCase *t = tcase_create("top");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, top_without_a_terminal_prints_one_snapshot);
    tcase_add_test(t, top_on_a_terminal_refreshes_and_gives_the_terminal_back);
    suite_add_tcase(s, t);
    return s;
}
