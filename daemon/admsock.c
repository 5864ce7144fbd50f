/*
 * daemon/admsock.c — the admin socket's transport: the Unix socket, who
 * may connect, and one JSON line in, one line out (admsock_cmd.c answers).
 *
 * The one idea: the admin server never waits on anyone.  A request is
 * answered at once on the I/O thread from a snapshot copy; replies queue
 * in the connection's bufferevent, and a peer that lets them pile up past
 * ADMSOCK_MAX_OUT is dropped, so nothing an admin client does (or fails to
 * do) can hold up the HTTP side.  A once-a-second timer records the
 * engine's token counters for the rates that status shows.
 */
#include "daemon/admsock.h"
#include "daemon/llmd.h"
#include "daemon/log.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define ADMSOCK_MAX_LINE  (64 * 1024)       /* longest request line */
#define ADMSOCK_MAX_OUT   (4 * 1024 * 1024) /* unread replies before a peer is dropped */
#define ADMSOCK_IDLE_S    300               /* an idle connection closes */
#define ADMSOCK_MAX_CONNS 64
/* After an error that ends a connection, input is read and dropped for a
 * while before closing: a peer still sending when we close would get a
 * reset (EPIPE on its write) instead of reading why. */
#define ADMSOCK_LINGER_IDLE_S  2
#define ADMSOCK_LINGER_TOTAL_S 10.0

struct admsock_conn {
    struct admsock *a;
    struct bufferevent *bev;
    struct admsock_conn *prev, *next;
    struct admsock_peer who;
    int closing;       /* close once what is queued has been written */
    int linger;        /* failed: drop input until EOF, idle or the deadline */
    double linger_end; /* monotonic */
};

struct admsock {
    struct llmd *d;
    char *path;
    dev_t dev; /* the socket file we made, so we only ever remove that one */
    ino_t ino;
    struct evconnlistener *l;
    struct event *tick;
    struct admsock_rates *rates;
    struct admsock_conn *conns;
    int n_conns;
};

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --------------------------------------------------------- who may in -- */

/* 1 when /proc says process pid (still of user uid) has group g among its
 * supplementary groups, 0 when not, -1 when /proc cannot tell (the process
 * is gone, or its pid now belongs to someone else). */
static int proc_has_group(int pid, unsigned uid, gid_t g)
{
    char path[64], *line = NULL;
    size_t cap = 0;
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int same_user = 0, found = -1;
    while (getline(&line, &cap, f) > 0) { /* Groups: can be long */
        unsigned ruid, euid;
        if (sscanf(line, "Uid: %u %u", &ruid, &euid) == 2)
            same_user = euid == uid;
        if (strncmp(line, "Groups:", 7) != 0)
            continue;
        found = 0;
        char *p = line + 7, *end;
        for (unsigned long v = strtoul(p, &end, 10); end != p; v = strtoul(p, &end, 10)) {
            if ((gid_t)v == g)
                found = 1;
            p = end;
        }
    }
    free(line);
    fclose(f);
    return same_user ? found : -1;
}

/* 1 when the group database puts user uid (primary group base) in group g. */
static int user_has_group(unsigned uid, gid_t base, gid_t g)
{
    struct passwd pw, *res = NULL;
    char buf[4096];
    if (getpwuid_r((uid_t)uid, &pw, buf, sizeof(buf), &res) != 0 || !res)
        return 0;
    int n = 64, found = 0;
    gid_t *groups = malloc(sizeof(*groups) * (size_t)n);
    if (groups && getgrouplist(pw.pw_name, base, groups, &n) < 0) {
        gid_t *more = realloc(groups, sizeof(*groups) * (size_t)n);
        if (!more || getgrouplist(pw.pw_name, base, more, &n) < 0)
            n = 0;
        groups = more ? more : groups;
    }
    for (int i = 0; groups && i < n; i++)
        found |= groups[i] == g;
    free(groups);
    return found;
}

/* Root, the daemon's own user, or a member of the daemon's group. */
static int peer_allowed(const struct ucred *cr)
{
    gid_t g = getegid();
    if (cr->uid == 0 || cr->uid == geteuid() || cr->gid == g)
        return 1;
    int rc = proc_has_group(cr->pid, cr->uid, g);
    return rc >= 0 ? rc : user_has_group(cr->uid, cr->gid, g);
}

/* -------------------------------------------------------- connections -- */

static void conn_free(struct admsock_conn *c)
{
    struct admsock *a = c->a;
    if (c->prev)
        c->prev->next = c->next;
    else
        a->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    a->n_conns--;
    bufferevent_free(c->bev);
    free(c);
}

static void conn_send(struct admsock_conn *c, char *reply, size_t len)
{
    if (reply)
        bufferevent_write(c->bev, reply, len);
    free(reply);
}

/* Answers msg as an error and ends the connection (after a linger). */
static void conn_fail(struct admsock_conn *c, const char *msg)
{
    size_t len = 0;
    char *line = admsock_error_line(msg, &len); /* before len is read */
    conn_send(c, line, len);
    c->linger = 1;
    c->linger_end = mono() + ADMSOCK_LINGER_TOTAL_S;
    struct evbuffer *in = bufferevent_get_input(c->bev);
    evbuffer_drain(in, evbuffer_get_length(in));
    struct timeval idle = {.tv_sec = ADMSOCK_LINGER_IDLE_S};
    bufferevent_set_timeouts(c->bev, &idle, &idle);
}

static void conn_line(struct admsock_conn *c, char *line, size_t n)
{
    while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
        n--;
    if (n == 0)
        return; /* blank lines are not requests */
    size_t len = 0;
    char *reply = admsock_answer(c->a->d, c->a->rates, &c->who, line, n, &len);
    if (!reply)
        reply = admsock_error_line("out of memory", &len);
    conn_send(c, reply, len);
}

/* Takes one whole line from the input: 1 when one was answered, 0 when
 * none is complete yet, -1 when the connection is failed or gone. */
static int conn_take(struct admsock_conn *c, struct evbuffer *in)
{
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) > ADMSOCK_MAX_OUT) {
        log_warn("admin socket: uid %u pid %d does not read its replies; dropped", c->who.uid,
                 c->who.pid);
        conn_free(c);
        return -1;
    }
    struct evbuffer_ptr eol = evbuffer_search_eol(in, NULL, NULL, EVBUFFER_EOL_LF);
    size_t have = evbuffer_get_length(in);
    if ((eol.pos < 0 && have > ADMSOCK_MAX_LINE) || eol.pos > ADMSOCK_MAX_LINE) {
        conn_fail(c, "request line longer than 65536 bytes");
        return -1;
    }
    if (eol.pos < 0)
        return 0;
    size_t n = (size_t)eol.pos;
    char *line = malloc(n + 1);
    if (!line) {
        conn_fail(c, "out of memory");
        return -1;
    }
    evbuffer_remove(in, line, n);
    evbuffer_drain(in, 1);
    line[n] = 0;
    conn_line(c, line, n);
    free(line);
    return 1;
}

static void conn_read_cb(struct bufferevent *bev, void *arg)
{
    struct admsock_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    if (c->linger) {
        evbuffer_drain(in, evbuffer_get_length(in));
        if (mono() > c->linger_end)
            conn_free(c);
        return;
    }
    while (!c->linger && conn_take(c, in) > 0)
        ;
}

static void conn_write_cb(struct bufferevent *bev, void *arg)
{
    struct admsock_conn *c = arg;
    if (c->closing && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
        conn_free(c);
}

/* The peer closed its side: a last line without its newline still counts,
 * and what is queued is written before closing. */
static void conn_eof(struct admsock_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    size_t n = evbuffer_get_length(in);
    if (!c->linger && n > 0 && n <= ADMSOCK_MAX_LINE) {
        char *line = malloc(n + 1);
        if (line) {
            evbuffer_remove(in, line, n);
            line[n] = 0;
            conn_line(c, line, n);
            free(line);
        }
    }
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) {
        conn_free(c);
        return;
    }
    c->closing = 1;
    bufferevent_disable(c->bev, EV_READ);
}

static void conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct admsock_conn *c = arg;
    (void)bev;
    if (what & BEV_EVENT_TIMEOUT)
        log_debug("admin socket: uid %u pid %d idle or not reading; closed", c->who.uid,
                  c->who.pid);
    if ((what & BEV_EVENT_EOF) && !(what & (BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
        conn_eof(c);
    else
        conn_free(c);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
                      void *arg)
{
    struct admsock *a = arg;
    (void)l;
    (void)sa;
    (void)salen;
    struct ucred cr;
    socklen_t crlen = sizeof(cr);
    struct admsock_conn *c = calloc(1, sizeof(*c));
    if (!c || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) != 0) {
        log_warn("admin socket: %s", c ? "no peer credentials" : "out of memory");
        evutil_closesocket(fd);
        free(c);
        return;
    }
    c->a = a;
    c->who = (struct admsock_peer){.uid = (unsigned)cr.uid, .pid = (int)cr.pid};
    c->bev = bufferevent_socket_new(a->d->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!c->bev) {
        evutil_closesocket(fd);
        free(c);
        return;
    }
    c->next = a->conns;
    if (a->conns)
        a->conns->prev = c;
    a->conns = c;
    a->n_conns++;
    bufferevent_setcb(c->bev, conn_read_cb, conn_write_cb, conn_event_cb, c);
    struct timeval idle = {.tv_sec = ADMSOCK_IDLE_S};
    bufferevent_set_timeouts(c->bev, &idle, &idle);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    if (!peer_allowed(&cr)) {
        log_warn("admin socket: refused uid %u gid %u pid %d: not root, the daemon's user or "
                 "in its group",
                 (unsigned)cr.uid, (unsigned)cr.gid, (int)cr.pid);
        conn_fail(c, "permission denied: only root, the daemon's user and members of its group "
                     "may use the admin socket");
    } else if (a->n_conns > ADMSOCK_MAX_CONNS) {
        log_warn("admin socket: refused uid %u pid %d: %d connections open", c->who.uid, c->who.pid,
                 ADMSOCK_MAX_CONNS);
        conn_fail(c, "too many admin connections");
    }
}

/* ------------------------------------------------------------ sampling -- */

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct admsock *a = arg;
    (void)fd;
    (void)what;
    struct eng_snapshot *s = eng_snapshot(a->d->eng);
    if (s)
        admsock_rates_sample(a->rates, s, mono());
    eng_snapshot_free(s);
}

/* ------------------------------------------------------------- socket -- */

/* Makes room at path: nothing there, or a socket nobody serves any more. */
static int sock_clear(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        snprintf(err, errlen, "admin socket %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISSOCK(st.st_mode)) {
        snprintf(err, errlen, "admin socket %s: the path exists and is not a socket", path);
        return -1;
    }
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int live = fd >= 0 && connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0;
    if (fd >= 0)
        close(fd);
    if (live) {
        snprintf(err, errlen, "admin socket %s: another process is serving it", path);
        return -1;
    }
    if (unlink(path) != 0) {
        snprintf(err, errlen, "admin socket %s: removing the old socket: %s", path,
                 strerror(errno));
        return -1;
    }
    return 0;
}

static int sock_open(struct admsock *a, char *err, size_t errlen)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if (strlen(a->path) >= sizeof(sun.sun_path)) {
        snprintf(err, errlen, "admin socket %s: the path is longer than %zu bytes", a->path,
                 sizeof(sun.sun_path) - 1);
        return -1;
    }
    if (sock_clear(a->path, err, errlen))
        return -1;
    memcpy(sun.sun_path, a->path, strlen(a->path) + 1);
    a->l = evconnlistener_new_bind(a->d->base, on_accept, a,
                                   LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 16,
                                   (struct sockaddr *)&sun, (int)sizeof(sun));
    if (!a->l) {
        snprintf(err, errlen, "admin socket %s: %s", a->path, strerror(errno));
        return -1;
    }
    struct stat st;
    /* the peer check is the real gate; the mode keeps strangers from even connecting */
    if (chmod(a->path, 0660) != 0 || chown(a->path, (uid_t)-1, getegid()) != 0 ||
        stat(a->path, &st) != 0) {
        snprintf(err, errlen, "admin socket %s: %s", a->path, strerror(errno));
        unlink(a->path);
        return -1;
    }
    a->dev = st.st_dev;
    a->ino = st.st_ino;
    return 0;
}

int admsock_start(struct llmd *d, const char *path, struct admsock **out, char *err, size_t errlen)
{
    *out = NULL;
    struct admsock *a = calloc(1, sizeof(*a));
    if (!a || !(a->path = strdup(path)) || !(a->rates = admsock_rates_new()) ||
        !(a->tick = event_new(d->base, -1, EV_PERSIST, on_tick, a))) {
        snprintf(err, errlen, "out of memory");
        admsock_stop(a);
        return -1;
    }
    a->d = d;
    if (sock_open(a, err, errlen)) {
        free(a->path);
        a->path = NULL; /* nothing of ours to remove */
        admsock_stop(a);
        return -1;
    }
    on_tick(-1, 0, a); /* the first sample: rates have a base from the start */
    struct timeval tv = {.tv_sec = 1};
    event_add(a->tick, &tv);
    *out = a;
    return 0;
}

void admsock_stop(struct admsock *a)
{
    if (!a)
        return;
    struct stat st;
    /* only the file we made: a daemon started since may have replaced it */
    if (a->path && a->l && lstat(a->path, &st) == 0 && st.st_dev == a->dev && st.st_ino == a->ino)
        unlink(a->path);
    if (a->l)
        evconnlistener_free(a->l);
    while (a->conns)
        conn_free(a->conns);
    if (a->tick)
        event_free(a->tick);
    admsock_rates_free(a->rates);
    free(a->path);
    free(a);
}
