/*
 * tests/unit/test_daemon_admin.c — the operator's live view and levers, as
 * llmadmin shows them over a real llmd's admin socket: status, queues and
 * blocks agree with each other and with the streams the test runs; evict
 * pauses a stream that then resumes with the same text, evict --abort ends
 * it (or a whole tenant's work) with an error; drain refuses new work while
 * running streams finish, and undrain admits again.
 *
 * The one idea: two llmadmin commands never see the same engine step, so
 * views are compared inside a window that is shown to be quiet (no request
 * started, ended or was preempted between a status before and a status
 * after).  In such a window every request's blocks only grow, so whatever a
 * command in the middle counts lies between the two statuses' counts — a
 * deterministic check with no timing in it.  Streams use ignore_eos and are
 * long enough to outlive the few commands run while they must be live; the
 * test ends them by disconnecting.  The protocol itself, permissions and
 * broken clients are in test_daemon_admin2.c.
 */
#include "tests/unit/util_llmd.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHAT  "/v1/chat/completions"
#define COMPL "/v1/completions"
/* Streams that must stay live while a few llmadmin commands run. */
#define LONG_TOKENS 400

static struct ul_env *E;
static char KA[128], KB[128];

/* ============================================================ llmadmin */

/* One llmadmin run: exit status, stdout (parsed when JSON) and stderr. */
struct live {
    int rc;
    char *out, *err;
    json_t *j;
};

/* The whole content of an unlinked temp file written by a child. */
static char *fd_slurp(int fd)
{
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    ssize_t n;
    lseek(fd, 0, SEEK_SET);
    while (buf && (n = read(fd, buf + len, cap - len - 1)) > 0) {
        len += (size_t)n;
        if (cap - len < 1024) {
            char *grown = realloc(buf, cap * 2);
            if (!grown)
                break;
            buf = grown;
            cap *= 2;
        }
    }
    if (buf)
        buf[len] = '\0';
    close(fd);
    return buf;
}

static int temp_fd(void)
{
    char path[UL_PATH + 16];
    snprintf(path, sizeof(path), "%s/out.XXXXXX", E->dir);
    int fd = mkstemp(path);
    if (fd >= 0)
        unlink(path);
    return fd;
}

/* Runs `llmadmin --socket SOCK --json ARGS...` (args NULL-terminated). */
static void live_runa(struct live *o, const char *const *args)
{
    char *argv[32];
    int n = 0;
    const char *pre[] = {E->admin, "--socket", E->sock, "--json"};
    for (size_t i = 0; i < sizeof(pre) / sizeof(pre[0]); i++)
        argv[n++] = (char *)pre[i];
    for (int i = 0; args[i] && n < 31; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    int ofd = temp_fd(), efd = temp_fd();
    ck_assert_msg(ofd >= 0 && efd >= 0, "temp files in %s", E->dir);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(ofd, 1);
        dup2(efd, 2);
        alarm(240); /* survives exec: a hung llmadmin dies instead of hanging the suite */
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    o->rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    o->out = fd_slurp(ofd);
    o->err = fd_slurp(efd);
    ck_assert_msg(o->out && o->err, "out of memory");
    o->j = json_loads(o->out, JSON_DECODE_ANY, NULL);
}
#define LIVE(o, ...) live_runa((o), (const char *const[]){__VA_ARGS__, NULL})

static void live_free(struct live *o)
{
    free(o->out);
    free(o->err);
    json_decref(o->j);
    memset(o, 0, sizeof(*o));
}

/* A command that must succeed: its JSON object (caller owns). */
static json_t *live_oka(const char *const *args)
{
    struct live o;
    live_runa(&o, args);
    ck_assert_msg(o.rc == 0 && json_is_object(o.j),
                  "llmadmin %s %s: exit %d, stdout: %.400s, stderr: %.400s", args[0],
                  args[1] ? args[1] : "", o.rc, o.out, o.err);
    json_t *j = json_incref(o.j);
    live_free(&o);
    return j;
}
#define LIVE_OK(...) live_oka((const char *const[]){__VA_ARGS__, NULL})

/* ================================================================ JSON */

static long jint(json_t *j, const char *path)
{
    json_t *v = ul_jget(j, path);
    if (!json_is_integer(v)) {
        char *s = json_dumps(j, JSON_COMPACT);
        ck_abort_msg("%s is not an integer in %.600s", path, s ? s : "?");
    }
    return (long)json_integer_value(v);
}

/* Sum of field over the objects of array path in j. */
static long jsum(json_t *j, const char *path, const char *field)
{
    json_t *a = ul_jget(j, path);
    ck_assert_msg(json_is_array(a), "%s is not an array", path);
    long sum = 0;
    for (size_t i = 0; i < json_array_size(a); i++)
        sum += jint(json_array_get(a, i), field);
    return sum;
}

/* The entry of `queues` for API id (borrowed), or NULL. */
static json_t *q_find(json_t *q, const char *id)
{
    json_t *reqs = ul_jget(q, "requests");
    ck_assert_msg(json_is_array(reqs), "queues without a requests array");
    for (size_t i = 0; i < json_array_size(reqs); i++) {
        const char *rid = ul_jstr(json_array_get(reqs, i), "id");
        if (rid && strcmp(rid, id) == 0)
            return json_array_get(reqs, i);
    }
    return NULL;
}

static int str_is(const char *s, const char *want)
{
    return s && strcmp(s, want) == 0;
}

/* ============================================================= streams */

struct stream {
    struct ul_conn *c;
    char id[128];
    char *text; /* every text piece so far */
    size_t len;
    int text_events; /* events that carried text: each took at least one token */
    char finish[32]; /* the finish_reason, "" until one came */
    char *error;     /* the error event, as JSON text, or NULL */
    int done;        /* [DONE] came */
};

/* A greedy completion (chat when messages) body; prompt is the user text. */
static json_t *body(const char *prompt, int chat, int max_tokens, int ignore_eos, int stream)
{
    json_t *b = chat ? json_pack("{s:s, s:[{s:s, s:s}]}", "model", E->model_id, "messages", "role",
                                 "user", "content", prompt)
                     : json_pack("{s:s, s:s}", "model", E->model_id, "prompt", prompt);
    ck_assert_ptr_nonnull(b);
    json_object_set_new(b, "max_tokens", json_integer(max_tokens));
    json_object_set_new(b, "temperature", json_real(0));
    json_object_set_new(b, "stream", json_boolean(stream));
    if (ignore_eos)
        json_object_set_new(b, "ignore_eos", json_true());
    return b;
}

static void text_add(struct stream *s, const char *t)
{
    if (!t || !*t)
        return;
    char *grown = realloc(s->text, s->len + strlen(t) + 1);
    ck_assert_ptr_nonnull(grown);
    s->text = grown;
    memcpy(s->text + s->len, t, strlen(t) + 1);
    s->len += strlen(t);
    s->text_events++;
}

/* Reads one event: 1 read, 0 at the end of the body.  Fails on a broken stream. */
static int stream_step(struct stream *s)
{
    char *data = NULL;
    int rc = ul_sse_next(s->c, &data);
    ck_assert_msg(rc >= 0, "stream %s broke off or timed out", s->id);
    if (rc == 0)
        return 0;
    ck_assert_msg(!s->done, "stream %s: an event after [DONE]: %s", s->id, data);
    if (strcmp(data, "[DONE]") == 0) {
        s->done = 1;
        free(data);
        return 1;
    }
    json_t *ev = json_loads(data, 0, NULL);
    ck_assert_msg(ev != NULL, "stream %s: an event that is not JSON: %s", s->id, data);
    if (json_object_get(ev, "error") && !s->error)
        s->error = strdup(data);
    json_t *ch = ul_jget(ev, "choices.0");
    text_add(s, ul_jstr(ch, "text"));
    text_add(s, ul_jstr(ch, "delta.content"));
    if (ul_jstr(ch, "finish_reason"))
        snprintf(s->finish, sizeof(s->finish), "%s", ul_jstr(ch, "finish_reason"));
    json_decref(ev);
    free(data);
    return 1;
}

/* POSTs b (consumed) as a stream with key, checks the head and reads the first event. */
static void stream_open(struct stream *s, const char *key, const char *path, json_t *b)
{
    memset(s, 0, sizeof(*s));
    char *txt = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    s->c = ul_connect(E, 120);
    ck_assert_ptr_nonnull(s->c);
    ck_assert_int_eq(ul_send(s->c, "POST", path, key, txt, NULL), 0);
    free(txt);
    struct ul_resp head;
    ck_assert_int_eq(ul_read_head(s->c, &head), 0);
    ck_assert_msg(head.status == 200, "stream status %d", head.status);
    ck_assert_ptr_nonnull(ul_header(&head, "llmd-request-id", s->id, sizeof(s->id)));
    ul_resp_free(&head);
    ck_assert_int_eq(stream_step(s), 1);
    ck_assert_msg(!s->done && !s->error, "stream %s over before it started", s->id);
}

/* Reads the rest; the stream must end with [DONE] as its last event. */
static void stream_end(struct stream *s)
{
    while (stream_step(s))
        ;
    ck_assert_msg(s->done, "stream %s did not end with data: [DONE]", s->id);
}

/* Reads until the stream carried more than n text events. */
static void stream_past(struct stream *s, int n)
{
    while (s->text_events <= n) {
        ck_assert_msg(stream_step(s) == 1 && !s->done, "stream %s ended after %d text events",
                      s->id, s->text_events);
        ck_assert_msg(!s->error, "stream %s: %s", s->id, s->error);
    }
}

/* Disconnects (which cancels an unfinished request) and frees. */
static void stream_close(struct stream *s)
{
    ul_conn_close(s->c);
    free(s->text);
    free(s->error);
    memset(s, 0, sizeof(*s));
}

/* ============================================================ checks */

/* Every test ends with the device pool empty of requests' blocks. */
static void assert_device_free(void)
{
    double used = -1;
    for (double deadline = ul_now() + 30; ul_now() < deadline; ul_sleep(0.05)) {
        ck_assert_int_eq(ul_metric(E, "llmd_kv_blocks", "pool=\"device\",state=\"used\"", &used),
                         1);
        if (used == 0)
            return;
    }
    ck_abort_msg("device blocks still used 30 s after the test's requests ended: %g", used);
}

/* A new completion's status (and the response in r, caller frees). */
static int try_completion(const char *key, struct ul_resp *r)
{
    json_t *b = body("Hello", 0, 2, 0, 0);
    int rc = ul_post(E, COMPL, key, b, r);
    json_decref(b);
    ck_assert_msg(rc == 0, "no response to a completion");
    return r->status;
}

/* ============================================================ fixture */

static void setup(void)
{
    E = ul_env_new();
    ck_assert_msg(E != NULL, "test environment");
    ck_assert_int_eq(ul_tenant_add(E, "ta", UL_END), 0);
    ck_assert_int_eq(ul_tenant_add(E, "tb", UL_END), 0);
    ck_assert_int_eq(ul_key_create(E, "ta", KA, sizeof(KA), NULL), 0);
    ck_assert_int_eq(ul_key_create(E, "tb", KB, sizeof(KB), NULL), 0);
    const char *extra[] = {"--swap-blocks", "256", "--drain-timeout", "60", NULL};
    ck_assert_msg(ul_start(E, extra) == 0, "llmd did not start");
}

static void teardown(void)
{
    if (E && E->pid > 0 && ul_stop(E, 60) != 0)
        ul_dump_log(E);
    ul_env_free(E);
    E = NULL;
}

/* Each test starts admitting work, whatever a failed test before it left. */
static void each_setup(void)
{
    struct live o;
    LIVE(&o, "undrain");
    live_free(&o);
}

/* ============================================================== tests */

START_TEST(status_names_the_model_and_its_block_counts_add_up)
{
    json_t *s = LIVE_OK("status");
    ck_assert_str_eq(ul_jstr(s, "model"), E->model_id);
    const char *backend = ul_jstr(s, "backend");
    ck_assert_msg(backend && *backend, "status without a backend");
    ck_assert_msg(ul_jstr(s, "version") != NULL, "status without a version");
    ck_assert_msg(json_is_false(ul_jget(s, "draining")), "draining is not false");
    ck_assert_int_eq(jint(s, "device.total"), 256);
    ck_assert_int_eq(jint(s, "device.used") + jint(s, "device.cached") + jint(s, "device.free"),
                     jint(s, "device.total"));
    ck_assert_int_eq(jint(s, "device.used"), 0);
    ck_assert_int_gt(jint(s, "device.block_bytes"), 0);
    ck_assert_int_eq(jint(s, "host.total"), 256);
    ck_assert_msg(json_is_array(ul_jget(s, "priorities")), "status without priorities");
    ck_assert_msg(json_is_array(ul_jget(s, "tenants")), "status without tenants");
    json_decref(s);
    json_t *q = LIVE_OK("queues");
    ck_assert_int_eq(json_array_size(ul_jget(q, "requests")), 0);
    json_decref(q);
    assert_device_free();
}
END_TEST

/* 1 when S1 .. S2 is a quiet window over n running requests: nothing started,
 * ended, or was preempted, so every request's blocks only grew in it. */
static int quiet(json_t *s1, json_t *q, json_t *s2, long n)
{
    if (jsum(s1, "priorities", "running") != n || jsum(s2, "priorities", "running") != n)
        return 0;
    if (jint(s1, "preemptions.swap") != jint(s2, "preemptions.swap") ||
        jint(s1, "preemptions.recompute") != jint(s2, "preemptions.recompute"))
        return 0;
    json_t *reqs = ul_jget(q, "requests");
    if ((long)json_array_size(reqs) != n)
        return 0;
    for (size_t i = 0; i < json_array_size(reqs); i++)
        if (!str_is(ul_jstr(json_array_get(reqs, i), "state"), "running"))
            return 0;
    return 1;
}

/* Device blocks held by requests in a `blocks` map (checked for shape). */
static long map_held(json_t *m, long total)
{
    json_t *map = ul_jget(m, "map");
    ck_assert_int_eq(jint(m, "total"), total);
    ck_assert_int_eq((long)json_array_size(map), total);
    long held = 0, legend = (long)json_array_size(ul_jget(m, "tenants"));
    for (size_t i = 0; i < json_array_size(map); i++) {
        long k = (long)json_integer_value(json_array_get(map, i));
        ck_assert_msg(json_is_integer(json_array_get(map, i)) && k >= -2 && k < legend,
                      "map[%zu] = %ld with %ld tenants in the legend", i, k, legend);
        held += k >= 0;
    }
    return held;
}

START_TEST(status_used_blocks_match_queues_and_the_block_map_while_streams_run)
{
    struct stream st[3];
    stream_open(&st[0], KA, COMPL, body("1, 2, 3, 4, 5,", 0, LONG_TOKENS, 1, 1));
    stream_open(&st[1], KA, COMPL, body("The sky is", 0, LONG_TOKENS, 1, 1));
    stream_open(&st[2], KB, COMPL, body("Once upon a time", 0, LONG_TOKENS, 1, 1));
    int checked = 0;
    for (int attempt = 0; attempt < 20 && !checked; attempt++) {
        json_t *s1 = LIVE_OK("status"), *q = LIVE_OK("queues"), *m = LIVE_OK("blocks");
        json_t *s2 = LIVE_OK("status");
        /* inside one reply: the tenants' blocks are the pool's used blocks
         * (the prompts differ, so no block is shared) */
        ck_assert_int_eq(jsum(s1, "tenants", "device_blocks"), jint(s1, "device.used"));
        ck_assert_int_eq(jint(s1, "device.used") + jint(s1, "device.cached") +
                             jint(s1, "device.free"),
                         jint(s1, "device.total"));
        long held = map_held(m, jint(s1, "device.total"));
        if (quiet(s1, q, s2, 3)) {
            long u1 = jint(s1, "device.used"), u2 = jint(s2, "device.used");
            long sum = jsum(q, "requests", "device_blocks");
            ck_assert_msg(u1 > 0 && u1 <= sum && sum <= u2,
                          "status used %ld then %ld, but queues' device_blocks add to %ld", u1, u2,
                          sum);
            ck_assert_msg(u1 <= held && held <= u2,
                          "status used %ld then %ld, but the block map holds %ld", u1, u2, held);
            checked = 1;
        }
        json_decref(s1);
        json_decref(q);
        json_decref(m);
        json_decref(s2);
    }
    ck_assert_msg(checked, "no quiet window in 20 tries with 3 streams of %d tokens", LONG_TOKENS);
    for (int i = 0; i < 3; i++)
        stream_close(&st[i]);
    assert_device_free();
}
END_TEST

START_TEST(queues_show_a_running_stream_with_its_id_tenant_priority_and_growing_output)
{
    struct stream a, b;
    json_t *ba = body("Tell me about the sea.", 1, LONG_TOKENS, 1, 1);
    json_object_set_new(ba, "priority", json_integer(5));
    stream_open(&a, KA, CHAT, ba);
    /* a produces a token before b (more important) arrives: it is admitted,
     * and stays running beside b, however slowly */
    stream_past(&a, 1);
    stream_open(&b, KB, COMPL, body("Once upon a time", 0, LONG_TOKENS, 1, 1));
    ck_assert_msg(strncmp(a.id, "chatcmpl-", 9) == 0, "chat request id %s", a.id);

    json_t *q1 = LIVE_OK("queues");
    json_t *r = q_find(q1, a.id);
    ck_assert_msg(r != NULL, "queues does not list the running stream %s", a.id);
    ck_assert_str_eq(ul_jstr(r, "tenant"), "ta");
    ck_assert_int_eq(jint(r, "priority"), 5);
    ck_assert_str_eq(ul_jstr(r, "state"), "running");
    ck_assert_int_eq(jint(r, "n"), 1);
    ck_assert_int_gt(jint(r, "prompt_tokens"), 0);
    ck_assert_int_gt(jint(r, "device_blocks"), 0);
    ck_assert_int_ge(jint(r, "engine_id"), 0);
    long g1 = jint(r, "generated_tokens");
    ck_assert_msg(q_find(q1, b.id) != NULL, "queues does not list tb's stream %s", b.id);
    json_decref(q1);

    /* the client now holds more than g1 tokens, so the engine made more */
    stream_past(&a, (int)g1);
    json_t *q2 = LIVE_OK("queues");
    r = q_find(q2, a.id);
    ck_assert_msg(r != NULL, "stream %s left queues while running", a.id);
    ck_assert_msg(jint(r, "generated_tokens") > g1, "generated_tokens %ld, then %ld", g1,
                  jint(r, "generated_tokens"));
    json_decref(q2);

    json_t *qa = LIVE_OK("queues", "--tenant", "ta");
    ck_assert_msg(q_find(qa, a.id) && !q_find(qa, b.id), "queues --tenant ta: a %d, b %d",
                  q_find(qa, a.id) != NULL, q_find(qa, b.id) != NULL);
    for (size_t i = 0; i < json_array_size(ul_jget(qa, "requests")); i++)
        ck_assert_str_eq(ul_jstr(json_array_get(ul_jget(qa, "requests"), i), "tenant"), "ta");
    json_decref(qa);
    json_t *qb = LIVE_OK("queues", "--tenant", "tb");
    ck_assert_msg(q_find(qb, b.id) && !q_find(qb, a.id), "queues --tenant tb: a %d, b %d",
                  q_find(qb, a.id) != NULL, q_find(qb, b.id) != NULL);
    json_decref(qb);
    stream_close(&a);
    stream_close(&b);
    assert_device_free();
}
END_TEST

/* Checks a request's table: device blocks, sequence 0, logical 0..k-1. */
static void check_table(json_t *bt, const char *id, long k, long total)
{
    ck_assert_str_eq(ul_jstr(bt, "request"), id);
    ck_assert_int_gt(jint(bt, "block_size"), 0);
    json_t *t = ul_jget(bt, "table");
    ck_assert_msg(json_is_array(t), "blocks %s without a table", id);
    ck_assert_int_eq((long)json_array_size(t), k);
    for (size_t i = 0; i < json_array_size(t); i++) {
        json_t *en = json_array_get(t, i);
        ck_assert_str_eq(ul_jstr(en, "where"), "device");
        ck_assert_int_eq(jint(en, "seq"), 0);
        ck_assert_int_eq(jint(en, "logical"), (long)i);
        long b = jint(en, "block");
        ck_assert_msg(b >= 0 && b < total, "block %ld of a %ld-block pool", b, total);
        ck_assert_int_ge(jint(en, "ref"), 1);
        json_t *h = ul_jget(en, "hash");
        ck_assert_msg(json_is_null(h) || (json_is_string(h) && strlen(json_string_value(h)) == 16),
                      "hash of entry %zu is neither null nor 16 hex digits", i);
        for (size_t p = 0; p < i; p++)
            ck_assert_msg(jint(json_array_get(t, p), "block") != b, "block %ld listed twice", b);
    }
}

/* The legend index of tenant in a `blocks` map, -1 when absent. */
static long legend_of(json_t *m, const char *tenant)
{
    json_t *names = ul_jget(m, "tenants");
    for (size_t i = 0; i < json_array_size(names); i++)
        if (str_is(json_string_value(json_array_get(names, i)), tenant))
            return (long)i;
    return -1;
}

START_TEST(blocks_of_a_request_list_its_device_table_and_the_map_marks_them_its_tenants)
{
    struct stream a;
    stream_open(&a, KA, COMPL, body("1, 2, 3, 4, 5,", 0, LONG_TOKENS, 1, 1));
    long total = 256;
    int checked = 0;
    for (int attempt = 0; attempt < 20 && !checked; attempt++) {
        json_t *q1 = LIVE_OK("queues"), *bt = LIVE_OK("blocks", a.id);
        json_t *m = LIVE_OK("blocks"), *q2 = LIVE_OK("queues");
        json_t *r1 = q_find(q1, a.id), *r2 = q_find(q2, a.id);
        ck_assert_msg(r1 && r2, "stream %s left queues while running", a.id);
        /* the same device_blocks before and after, with no preemption: the
         * table in between had exactly that many */
        long k = jint(r1, "device_blocks");
        if (k == jint(r2, "device_blocks") && jint(r2, "preemptions") == 0) {
            check_table(bt, a.id, k, total);
            ck_assert_int_eq(map_held(m, total) >= k, 1);
            long ta = legend_of(m, "ta");
            ck_assert_msg(ta >= 0, "the map's tenants legend lacks ta");
            json_t *t = ul_jget(bt, "table");
            for (size_t i = 0; i < json_array_size(t); i++) {
                long b = jint(json_array_get(t, i), "block");
                long who = (long)json_integer_value(json_array_get(ul_jget(m, "map"), (size_t)b));
                ck_assert_msg(who == ta, "block %ld of %s is %ld in the map, ta is %ld", b, a.id,
                              who, ta);
            }
            checked = 1;
        }
        json_decref(q1);
        json_decref(bt);
        json_decref(m);
        json_decref(q2);
    }
    ck_assert_msg(checked, "no quiet window in 20 tries");
    stream_close(&a);
    assert_device_free();
}
END_TEST

/* The undisturbed text of the greedy stream used by the evict test. */
#define EVICT_PROMPT "1, 2, 3, 4, 5, 6,"
#define EVICT_TOKENS 48

START_TEST(evict_pauses_a_greedy_stream_which_resumes_with_the_same_text)
{
    struct stream ref, s;
    stream_open(&ref, KA, COMPL, body(EVICT_PROMPT, 0, EVICT_TOKENS, 0, 1));
    stream_end(&ref);
    ck_assert_msg(!ref.error, "reference stream: %s", ref.error);

    /* the evict must reach the stream while it runs: a stream that ended
     * first makes evict fail with "no such request", and is tried again */
    int evicted = 0, seen_off = 0;
    for (int attempt = 0; attempt < 3 && !evicted; attempt++) {
        stream_open(&s, KA, COMPL, body(EVICT_PROMPT, 0, EVICT_TOKENS, 0, 1));
        struct live o;
        LIVE(&o, "evict", s.id);
        if (o.rc == 0) {
            ck_assert_msg(json_is_object(o.j), "evict --json printed %s", o.out);
            ck_assert_int_eq(jint(o.j, "evicted"), 1);
            evicted = 1;
            json_t *q = LIVE_OK("queues");
            json_t *r = q_find(q, s.id);
            const char *state = r ? ul_jstr(r, "state") : NULL;
            seen_off = str_is(state, "swapped") || str_is(state, "preempted") ||
                       (r && jint(r, "preemptions") >= 1);
            json_decref(q);
        }
        stream_end(&s);
        if (!evicted) {
            ck_assert_msg(s.finish[0] && !s.error,
                          "evict %s failed (exit %d, stdout %s, stderr %s) while it ran", s.id,
                          o.rc, o.out, o.err);
            stream_close(&s);
        }
        live_free(&o);
    }
    ck_assert_msg(evicted, "three streams of %d tokens all ended before evict reached them",
                  EVICT_TOKENS);
    ck_assert_msg(!s.error, "the evicted stream ended with an error: %s", s.error);
    ck_assert_str_eq(s.finish, ref.finish);
    ck_assert_msg(strcmp(s.text, ref.text) == 0, "evicted stream's text:\n%s\nundisturbed:\n%s",
                  s.text, ref.text);
    json_t *rows = ul_ledger(E);
    ck_assert_ptr_nonnull(rows);
    json_t *row = ul_ledger_find(rows, s.id);
    ck_assert_msg(row != NULL, "no ledger row for %s", s.id);
    ck_assert_msg(seen_off || jint(row, "preemptions") >= 1,
                  "after evict, %s was never swapped or preempted (ledger preemptions %ld)", s.id,
                  jint(row, "preemptions"));
    json_decref(rows);
    stream_close(&ref);
    stream_close(&s);
    assert_device_free();
}
END_TEST

/* Finish of id in the ledger (copied into buf). */
static const char *ledger_finish(const char *id, char *buf, size_t cap)
{
    json_t *rows = ul_ledger(E);
    ck_assert_ptr_nonnull(rows);
    json_t *row = ul_ledger_find(rows, id);
    ck_assert_msg(row != NULL, "no ledger row for %s", id);
    snprintf(buf, cap, "%s", ul_jstr(row, "finish") ? ul_jstr(row, "finish") : "");
    json_decref(rows);
    return buf;
}

static void assert_aborted_in_ledger(const char *id)
{
    char f[32];
    ledger_finish(id, f, sizeof(f));
    ck_assert_msg(str_is(f, "aborted") || str_is(f, "error"), "ledger finish of %s: %s", id, f);
}

START_TEST(evict_abort_ends_a_stream_with_an_error_event_then_done)
{
    struct stream s;
    stream_open(&s, KA, COMPL, body("The sky is", 0, LONG_TOKENS, 1, 1));
    json_t *o = LIVE_OK("evict", s.id, "--abort");
    ck_assert_int_eq(jint(o, "evicted"), 1);
    json_decref(o);
    stream_end(&s);
    ck_assert_msg(s.error != NULL, "stream %s ended without an error event (finish %s)", s.id,
                  s.finish);
    json_t *ev = json_loads(s.error, 0, NULL);
    ck_assert_msg(json_is_string(ul_jget(ev, "error.message")), "error event %s", s.error);
    json_decref(ev);
    assert_aborted_in_ledger(s.id);
    stream_close(&s);
    assert_device_free();
}
END_TEST

START_TEST(evict_abort_answers_a_non_streaming_request_with_503)
{
    struct ul_conn *c = ul_connect(E, 120);
    ck_assert_ptr_nonnull(c);
    json_t *b = body("Once upon a time", 0, LONG_TOKENS, 1, 0);
    char *txt = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    ck_assert_int_eq(ul_send(c, "POST", COMPL, KB, txt, NULL), 0);
    free(txt);
    /* its id is only in the response: find it as tb's one request */
    const char *id = NULL;
    json_t *q = NULL;
    for (double deadline = ul_now() + 60; !id && ul_now() < deadline;) {
        json_decref(q);
        q = LIVE_OK("queues", "--tenant", "tb");
        json_t *reqs = ul_jget(q, "requests");
        if (json_array_size(reqs) == 1)
            id = ul_jstr(json_array_get(reqs, 0), "id");
        else
            ul_sleep(0.05);
    }
    ck_assert_msg(id != NULL, "the non-streaming request never showed in queues --tenant tb");
    ck_assert_msg(strncmp(id, "cmpl-", 5) == 0, "completion id %s", id);
    json_t *o = LIVE_OK("evict", id, "--abort");
    ck_assert_int_eq(jint(o, "evicted"), 1);
    json_decref(o);
    struct ul_resp r;
    ck_assert_int_eq(ul_read_response(c, &r), 0);
    ck_assert_msg(r.status == 503, "evicted with --abort: %d %.300s", r.status, r.body);
    ck_assert_msg(json_is_string(ul_jget(r.json, "error.message")), "503 body: %s", r.body);
    ul_resp_free(&r);
    ul_conn_close(c);
    assert_aborted_in_ledger(id);
    json_decref(q);
    assert_device_free();
}
END_TEST

START_TEST(evict_tenant_abort_ends_all_of_its_requests_and_no_other_tenants)
{
    struct stream a1, a2, b;
    stream_open(&a1, KA, COMPL, body("1, 2, 3, 4, 5,", 0, LONG_TOKENS, 1, 1));
    stream_open(&a2, KA, CHAT, body("Tell me about the sea.", 1, LONG_TOKENS, 1, 1));
    stream_open(&b, KB, COMPL, body("Once upon a time", 0, LONG_TOKENS, 1, 1));
    json_t *o = LIVE_OK("evict", "--tenant", "ta", "--abort");
    ck_assert_int_eq(jint(o, "evicted"), 2);
    json_decref(o);
    stream_end(&a1);
    stream_end(&a2);
    ck_assert_msg(a1.error && a2.error, "ta's streams after evict --tenant ta --abort: %s / %s",
                  a1.error ? a1.error : a1.finish, a2.error ? a2.error : a2.finish);
    /* tb's stream is untouched: still listed, still producing */
    json_t *q = LIVE_OK("queues");
    ck_assert_msg(q_find(q, b.id) != NULL, "tb's stream %s left queues", b.id);
    ck_assert_msg(!q_find(q, a1.id) && !q_find(q, a2.id), "ta's requests still in queues");
    ck_assert_str_eq(ul_jstr(q_find(q, b.id), "state"), "running");
    json_decref(q);
    stream_past(&b, b.text_events + 4);
    ck_assert_msg(!b.error, "tb's stream: %s", b.error);
    assert_aborted_in_ledger(a1.id);
    assert_aborted_in_ledger(a2.id);
    stream_close(&a1);
    stream_close(&a2);
    stream_close(&b);
    assert_device_free();
}
END_TEST

/* /health's status code and "status" field. */
static int health(char *status, size_t cap)
{
    struct ul_resp r;
    ck_assert_int_eq(ul_request(E, "GET", "/health", NULL, NULL, NULL, &r), 0);
    int st = r.status;
    snprintf(status, cap, "%s", ul_jstr(r.json, "status") ? ul_jstr(r.json, "status") : "");
    ul_resp_free(&r);
    return st;
}

START_TEST(drain_refuses_new_work_lets_running_streams_finish_and_undrain_admits_again)
{
    struct stream s;
    stream_open(&s, KA, COMPL, body("The sky is", 0, 256, 1, 1));
    json_t *o = LIVE_OK("drain");
    ck_assert_msg(json_is_true(ul_jget(o, "draining")), "drain did not say draining");
    json_decref(o);
    json_t *q = LIVE_OK("queues");
    ck_assert_msg(q_find(q, s.id) != NULL, "stream %s ended before the drain began", s.id);
    json_decref(q);
    json_t *st = LIVE_OK("status");
    ck_assert_msg(json_is_true(ul_jget(st, "draining")), "status during a drain: not draining");
    json_decref(st);

    struct ul_resp r;
    char v[64];
    ck_assert_msg(try_completion(KB, &r) == 503, "a completion during the drain: %d %.300s",
                  r.status, r.body);
    ck_assert_msg(ul_header(&r, "Retry-After", v, sizeof(v)) != NULL, "503 without Retry-After");
    ck_assert_msg(json_is_object(ul_jget(r.json, "error")), "503 body: %s", r.body);
    ul_resp_free(&r);
    ck_assert_int_eq(health(v, sizeof(v)), 503);
    ck_assert_str_eq(v, "draining");

    /* returns once the running stream is done, which is not refused */
    json_t *w = LIVE_OK("drain", "--wait", "--timeout", "200");
    json_decref(w);
    q = LIVE_OK("queues");
    ck_assert_int_eq(json_array_size(ul_jget(q, "requests")), 0);
    json_decref(q);
    stream_end(&s);
    ck_assert_msg(!s.error, "the drain cut a running stream: %s", s.error);
    ck_assert_str_eq(s.finish, "length");
    stream_close(&s);

    json_t *u = LIVE_OK("undrain");
    ck_assert_msg(json_is_false(ul_jget(u, "draining")), "undrain did not say draining false");
    json_decref(u);
    ck_assert_int_eq(health(v, sizeof(v)), 200);
    ck_assert_msg(try_completion(KB, &r) == 200, "a completion after undrain: %d %.300s", r.status,
                  r.body);
    ul_resp_free(&r);
    assert_device_free();
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
    Suite *s = suite_create("daemon_admin");
    TCase *tc = tcase_create("admin");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_checked_fixture(tc, each_setup, NULL);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, status_names_the_model_and_its_block_counts_add_up);
    tcase_add_test(tc, status_used_blocks_match_queues_and_the_block_map_while_streams_run);
    tcase_add_test(tc, queues_show_a_running_stream_with_its_id_tenant_priority_and_growing_output);
    tcase_add_test(tc,
                   blocks_of_a_request_list_its_device_table_and_the_map_marks_them_its_tenants);
    tcase_add_test(tc, evict_pauses_a_greedy_stream_which_resumes_with_the_same_text);
    tcase_add_test(tc, evict_abort_ends_a_stream_with_an_error_event_then_done);
    tcase_add_test(tc, evict_abort_answers_a_non_streaming_request_with_503);
    tcase_add_test(tc, evict_tenant_abort_ends_all_of_its_requests_and_no_other_tenants);
    tcase_add_test(tc, drain_refuses_new_work_lets_running_streams_finish_and_undrain_admits_again);
    tcase_add_test(tc, sigterm_stops_the_daemon_without_sanitizer_reports); /* last */
    suite_add_tcase(s, tc);
    return s;
}
