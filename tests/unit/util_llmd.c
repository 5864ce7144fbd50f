/*
 * tests/unit/util_llmd.c — the integration harness's environment: temp dir,
 * certificate, DB through llmadmin, and the llmd process (see util_llmd.h;
 * the client that talks to the daemon is util_http.c).
 *
 * The one idea: every daemon started is remembered with the process that
 * started it, and a janitor process learns its pid too, so neither a failing
 * test (a forked Check child) nor a killed test run leaves a daemon behind.
 */
#include "tests/unit/util_llmd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------ small utilities */

double ul_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void ul_sleep(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

json_t *ul_jget(json_t *j, const char *path)
{
    char part[128];
    const char *p = path;
    while (j && *p) {
        size_t n = strcspn(p, ".");
        if (n >= sizeof(part))
            return NULL;
        memcpy(part, p, n);
        part[n] = '\0';
        p += n + (p[n] == '.');
        if (json_is_array(j)) {
            char *end;
            long i = strtol(part, &end, 10);
            j = *end ? NULL : json_array_get(j, (size_t)i);
        } else {
            j = json_object_get(j, part);
        }
    }
    return j;
}

const char *ul_jstr(json_t *j, const char *path)
{
    return json_string_value(ul_jget(j, path));
}

/* ----------------------------------------- daemons to kill on any exit */

#define MAX_LIVE 16
static struct ul_env *live[MAX_LIVE];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* Tells the janitor which daemon to kill should this process die (0: none). */
static void janitor_tell(struct ul_env *e, pid_t pid)
{
    if (e->janitor_fd >= 0 && e->owner == getpid() &&
        write(e->janitor_fd, &pid, sizeof(pid)) != (ssize_t)sizeof(pid))
        fprintf(stderr, "ul: janitor: %s\n", strerror(errno));
}

/* The janitor outlives a test process that dies without cleaning up (Check
 * ends a failed test with _exit, so atexit handlers do not run): when the
 * pipe's write end closes it kills the daemon it was last told of and
 * removes the directory. */
static void janitor_run(int rfd, const char *dir)
{
    pid_t daemon = 0, v;
    ssize_t n;
    while ((n = read(rfd, &v, sizeof(v))) == (ssize_t)sizeof(v) || (n < 0 && errno == EINTR))
        if (n > 0)
            daemon = v;
    if (daemon > 0)
        kill(daemon, SIGKILL);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    _exit(0);
}

static int janitor_start(struct ul_env *e)
{
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) != 0)
        return -1;
    e->janitor = fork();
    if (e->janitor == 0) {
        close(fd[1]);
        janitor_run(fd[0], e->dir);
    }
    close(fd[0]);
    e->janitor_fd = fd[1];
    return e->janitor > 0 ? 0 : -1;
}

static void janitor_stop(struct ul_env *e)
{
    if (e->janitor_fd >= 0)
        close(e->janitor_fd);
    e->janitor_fd = -1;
    if (e->janitor > 0 && e->owner == getpid())
        waitpid(e->janitor, NULL, 0);
    e->janitor = 0;
}

static void kill_daemon(struct ul_env *e)
{
    if (e->pid > 0 && e->owner == getpid()) {
        kill(e->pid, SIGKILL);
        waitpid(e->pid, NULL, 0);
        janitor_tell(e, 0);
    }
    e->pid = 0;
}

/* Runs in every process that exits, forked Check children included: each
 * only touches the daemons it started itself. */
static void kill_all_at_exit(void)
{
    for (int i = 0; i < MAX_LIVE; i++) {
        if (live[i] && live[i]->owner == getpid()) {
            kill_daemon(live[i]);
            if (live[i]->dir[0])
                nftw(live[i]->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        }
    }
}

static void remember(struct ul_env *e, int on)
{
    static int registered;
    if (!registered) {
        atexit(kill_all_at_exit);
        registered = 1;
    }
    for (int i = 0; i < MAX_LIVE; i++) {
        if (on && !live[i]) {
            live[i] = e;
            return;
        }
        if (!on && live[i] == e)
            live[i] = NULL;
    }
}

/* ------------------------------------------------------------ the cert */

static X509 *cert_make(EVP_PKEY *pk)
{
    X509 *x = X509_new();
    unsigned char serial[8];
    if (!x || RAND_bytes(serial, sizeof(serial)) != 1)
        goto fail;
    serial[0] &= 0x7f;
    BIGNUM *bn = BN_bin2bn(serial, sizeof(serial), NULL);
    int ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
    BN_free(bn);
    X509_NAME *nm = X509_get_subject_name(x);
    ok = ok && X509_set_version(x, 2) && X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
         X509_gmtime_adj(X509_getm_notAfter(x), 30L * 86400) && X509_set_pubkey(x, pk) &&
         X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1,
                                    -1, 0) &&
         X509_set_issuer_name(x, nm);
    const char *exts[][2] = {{"subjectAltName", "DNS:localhost,IP:127.0.0.1"},
                             {"basicConstraints", "critical,CA:TRUE"},
                             {"keyUsage", "digitalSignature,keyCertSign"},
                             /* key ids tell a renewed certificate from the old
                              * one of the same name in the client's store */
                             {"subjectKeyIdentifier", "hash"},
                             {"authorityKeyIdentifier", "keyid:always"}};
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
    for (size_t i = 0; ok && i < sizeof(exts) / sizeof(exts[0]); i++) {
        X509_EXTENSION *ext = X509V3_EXT_conf(NULL, &v3, exts[i][0], exts[i][1]);
        ok = ext && X509_add_ext(x, ext, -1);
        X509_EXTENSION_free(ext);
    }
    if (ok && X509_sign(x, pk, EVP_sha256()) > 0)
        return x;
fail:
    X509_free(x);
    return NULL;
}

/* Writes through a temp file and rename, so a reloading daemon never sees half a file. */
static int pem_write(const char *path, X509 *x, EVP_PKEY *pk)
{
    char tmp[UL_PATH + 8];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int ok = x ? PEM_write_X509(f, x) : PEM_write_PrivateKey(f, pk, NULL, NULL, 0, NULL, NULL);
    ok = fclose(f) == 0 && ok;
    return ok && rename(tmp, path) == 0 ? 0 : -1;
}

int ul_cert_write(const char *cert_path, const char *key_path)
{
    EVP_PKEY *pk = EVP_EC_gen("P-256");
    X509 *x = pk ? cert_make(pk) : NULL;
    int rc = x && pem_write(key_path, NULL, pk) == 0 && pem_write(cert_path, x, NULL) == 0 ? 0 : -1;
    X509_free(x);
    EVP_PKEY_free(pk);
    return rc;
}

static X509 *cert_read(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    return x;
}

int ul_trust_file(struct ul_env *e, const char *path)
{
    X509 *x = cert_read(path);
    int ok = x && X509_STORE_add_cert(SSL_CTX_get_cert_store(e->ctx), x) == 1;
    X509_free(x);
    return ok ? 0 : -1;
}

int ul_file_fingerprint(const char *path, unsigned char out[32])
{
    X509 *x = cert_read(path);
    unsigned int n = 0;
    int ok = x && X509_digest(x, EVP_sha256(), out, &n) == 1 && n == 32;
    X509_free(x);
    return ok ? 0 : -1;
}

/* ---------------------------------------------------------- the env */

static int client_ctx(struct ul_env *e)
{
    e->ctx = SSL_CTX_new(TLS_client_method());
    if (!e->ctx)
        return -1;
    SSL_CTX_set_verify(e->ctx, SSL_VERIFY_PEER, NULL);
    /* A daemon that drops a connection without close_notify reads as EOF. */
    SSL_CTX_set_options(e->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    return ul_trust_file(e, e->cert);
}

static void env_paths(struct ul_env *e)
{
    snprintf(e->db, sizeof(e->db), "%s/llmd.db", e->dir);
    snprintf(e->cert, sizeof(e->cert), "%s/cert.pem", e->dir);
    snprintf(e->key, sizeof(e->key), "%s/key.pem", e->dir);
    snprintf(e->log, sizeof(e->log), "%s/llmd.log", e->dir);
    snprintf(e->sock, sizeof(e->sock), "%s/admin.sock", e->dir);
    const char *bin = env_or("LLMD_BIN_DIR", "build/bin");
    snprintf(e->llmd, sizeof(e->llmd), "%s/llmd", bin);
    snprintf(e->admin, sizeof(e->admin), "%s/llmadmin", bin);
    snprintf(e->model, sizeof(e->model), "%s",
             env_or("LLMD_MODEL", "models/SmolLM2-135M-Instruct.Q4_1.gguf"));
    const char *base = strrchr(e->model, '/');
    snprintf(e->model_id, sizeof(e->model_id), "%s", base ? base + 1 : e->model);
    size_t n = strlen(e->model_id);
    if (n > 5 && strcmp(e->model_id + n - 5, ".gguf") == 0)
        e->model_id[n - 5] = '\0';
}

struct ul_env *ul_env_new(void)
{
    signal(SIGPIPE, SIG_IGN); /* a write to a dropped connection is an error, not a death */
    struct ul_env *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    snprintf(e->dir, sizeof(e->dir), "%s/llmd-test-XXXXXX", env_or("TMPDIR", "/tmp"));
    if (!mkdtemp(e->dir)) {
        fprintf(stderr, "ul_env_new: mkdtemp %s: %s\n", e->dir, strerror(errno));
        free(e);
        return NULL;
    }
    e->owner = getpid();
    e->janitor_fd = -1;
    remember(e, 1);
    env_paths(e);
    const char *why = NULL;
    if (janitor_start(e) != 0)
        why = "janitor";
    else if (access(e->llmd, X_OK) != 0 || access(e->admin, X_OK) != 0)
        why = "llmd or llmadmin not found (set LLMD_BIN_DIR)";
    else if (ul_cert_write(e->cert, e->key) != 0 || client_ctx(e) != 0)
        why = "certificate";
    else if (ul_admin(e, NULL, "init", UL_END) != 0)
        why = "llmadmin init";
    if (why) {
        fprintf(stderr, "ul_env_new: %s (%s, %s)\n", why, e->llmd, e->admin);
        ul_dump_log(e);
        ul_env_free(e);
        return NULL;
    }
    return e;
}

void ul_env_free(struct ul_env *e)
{
    if (!e)
        return;
    if (e->owner == getpid()) {
        kill_daemon(e);
        nftw(e->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        janitor_stop(e);
    }
    remember(e, 0);
    SSL_CTX_free(e->ctx);
    free(e);
}

void ul_dump_log(struct ul_env *e)
{
    FILE *f = fopen(e->log, "r");
    if (!f)
        return;
    char buf[8192];
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size > (long)sizeof(buf) - 1 ? size - (long)sizeof(buf) + 1 : 0, SEEK_SET);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    fprintf(stderr, "---- %s (tail) ----\n%s---- end of log ----\n", e->log, buf);
}

/* ------------------------------------------------------------ llmadmin */

/* fork + exec argv with stdout into a pipe (when out) and stderr appended to the log. */
static int run_capture(struct ul_env *e, char *const *argv, char **out)
{
    int pfd[2];
    if (pipe(pfd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int lf = open(e->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(pfd[1], 1);
        if (lf >= 0)
            dup2(lf, 2);
        close(pfd[0]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(pfd[1]);
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    ssize_t n;
    while (buf && (n = read(pfd[0], buf + len, cap - len - 1)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        len += (size_t)n;
        if (cap - len < 1024) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb)
                break;
            buf = nb;
        }
    }
    close(pfd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (buf)
        buf[len] = '\0';
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int admin_v(struct ul_env *e, char **out, const char *first, va_list ap)
{
    char *argv[48];
    int n = 0;
    argv[n++] = e->admin;
    argv[n++] = "--db";
    argv[n++] = e->db;
    for (const char *a = first; a && n < 47; a = va_arg(ap, const char *))
        argv[n++] = (char *)a;
    argv[n] = NULL;
    return run_capture(e, argv, out);
}

int ul_admin(struct ul_env *e, char **out, ...)
{
    va_list ap;
    va_start(ap, out);
    const char *first = va_arg(ap, const char *);
    int rc = admin_v(e, out, first, ap);
    va_end(ap);
    return rc;
}

int ul_tenant_add(struct ul_env *e, const char *name, ...)
{
    char *argv[48];
    int n = 0;
    const char *pre[] = {e->admin, "--db", e->db, "tenant", "add", name};
    for (size_t i = 0; i < sizeof(pre) / sizeof(pre[0]); i++)
        argv[n++] = (char *)pre[i];
    va_list ap;
    va_start(ap, name);
    for (const char *a = va_arg(ap, const char *); a && n < 47; a = va_arg(ap, const char *))
        argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    return run_capture(e, argv, NULL) == 0 ? 0 : -1;
}

int ul_key_create(struct ul_env *e, const char *tenant, char *key, size_t cap, long *id)
{
    char *out = NULL;
    int rc = ul_admin(e, &out, "--json", "key", "create", tenant, UL_END);
    json_t *j = rc == 0 && out ? json_loads(out, 0, NULL) : NULL;
    const char *k = ul_jstr(j, "key");
    int ok = k && strlen(k) < cap;
    if (ok) {
        snprintf(key, cap, "%s", k);
        if (id)
            *id = (long)json_integer_value(json_object_get(j, "id"));
    } else {
        fprintf(stderr, "ul_key_create %s: status %d, output: %s\n", tenant, rc, out ? out : "");
    }
    json_decref(j);
    free(out);
    return ok ? 0 : -1;
}

json_t *ul_ledger(struct ul_env *e)
{
    char *out = NULL;
    int rc = ul_admin(e, &out, "--json", "usage", "--rows", "100000", UL_END);
    json_error_t err;
    json_t *j = rc == 0 && out ? json_loads(out, 0, &err) : NULL;
    if (!json_is_array(j)) {
        fprintf(stderr, "ul_ledger: status %d, output: %.300s\n", rc, out ? out : "");
        json_decref(j);
        j = NULL;
    }
    free(out);
    return j;
}

int ul_ledger_count(struct ul_env *e, const char *tenant, const char *finish)
{
    json_t *rows = ul_ledger(e);
    if (!rows)
        return -1;
    int n = 0;
    size_t i;
    json_t *row;
    for (i = 0; i < json_array_size(rows) && (row = json_array_get(rows, i)); i++) {
        const char *t = ul_jstr(row, "tenant"), *f = ul_jstr(row, "finish");
        if ((!tenant || (t && strcmp(t, tenant) == 0)) &&
            (!finish || (f && strcmp(f, finish) == 0)))
            n++;
    }
    json_decref(rows);
    return n;
}

json_t *ul_ledger_find(json_t *rows, const char *request_id)
{
    size_t i;
    json_t *row;
    for (i = 0; i < json_array_size(rows) && (row = json_array_get(rows, i)); i++) {
        const char *id = ul_jstr(row, "request_id");
        if (id && request_id && strcmp(id, request_id) == 0)
            return row;
    }
    return NULL;
}

/* -------------------------------------------------------------- daemon */

int ul_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static void exec_daemon(struct ul_env *e, char **argv, pid_t parent)
{
    /* Dies with the test process even when that is killed outright. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    int lf = open(e->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    int nul = open("/dev/null", O_RDWR);
    if (lf < 0 || nul < 0)
        _exit(127);
    dup2(nul, 0);
    dup2(lf, 1);
    dup2(lf, 2);
    execv(argv[0], argv);
    _exit(127);
}

static int health_ok(struct ul_env *e)
{
    struct ul_resp r;
    int ok = ul_request(e, "GET", "/health", NULL, NULL, NULL, &r) == 0 && r.status == 200;
    ul_resp_free(&r);
    return ok;
}

int ul_start(struct ul_env *e, const char *const *extra)
{
    char listen[64], *argv[64];
    e->port = ul_free_port();
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", e->port);
    const char *base[] = {e->llmd, "--model",     e->model, "--listen",    listen, "--tls-cert",
                          e->cert, "--tls-key",   e->key,   "--db",        e->db,  "--admin-socket",
                          e->sock, "--kv-blocks", "256",    "--log-level", "info"};
    int n = 0;
    for (size_t i = 0; i < sizeof(base) / sizeof(base[0]); i++)
        argv[n++] = (char *)base[i];
    for (int i = 0; extra && extra[i] && n < 63; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0)
        exec_daemon(e, argv, parent);
    e->pid = pid;
    e->owner = parent;
    e->exit_status = -1;
    janitor_tell(e, pid);
    double deadline = ul_now() + 120;
    while (ul_now() < deadline) {
        if (!ul_alive(e)) {
            fprintf(stderr, "ul_start: llmd exited before it was ready\n");
            ul_dump_log(e);
            return -1;
        }
        if (health_ok(e))
            return 0;
        ul_sleep(0.1);
    }
    fprintf(stderr, "ul_start: llmd not ready after 120 s\n");
    ul_dump_log(e);
    kill_daemon(e);
    return -1;
}

void ul_signal(struct ul_env *e, int sig)
{
    if (e->pid > 0)
        kill(e->pid, sig);
}

static int reap(struct ul_env *e, int flags)
{
    int st;
    pid_t r = waitpid(e->pid, &st, flags);
    if (r != e->pid)
        return -2;
    e->pid = 0;
    janitor_tell(e, 0);
    e->exit_status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
    return e->exit_status;
}

int ul_alive(struct ul_env *e)
{
    if (e->pid > 0 && e->owner != getpid()) { /* a forked test cannot reap its parent's child */
        char path[64], st[256] = "";
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)e->pid);
        FILE *f = fopen(path, "r");
        if (!f)
            return 0;
        size_t n = fread(st, 1, sizeof(st) - 1, f);
        fclose(f);
        st[n] = '\0';
        const char *rp = strrchr(st, ')'); /* "PID (comm) STATE ..." */
        return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
    }
    return e->pid > 0 && reap(e, WNOHANG) == -2;
}

int ul_wait_exit(struct ul_env *e, double timeout)
{
    if (e->pid <= 0)
        return e->exit_status; /* already reaped by ul_alive */
    double deadline = ul_now() + timeout;
    while (ul_now() < deadline) {
        int rc = reap(e, WNOHANG);
        if (rc != -2)
            return rc;
        ul_sleep(0.02);
    }
    fprintf(stderr, "ul_wait_exit: llmd still running after %.0f s; killing it\n", timeout);
    ul_dump_log(e);
    kill_daemon(e);
    return -1;
}

int ul_stop(struct ul_env *e, double timeout)
{
    ul_signal(e, SIGTERM);
    return ul_wait_exit(e, timeout);
}

int ul_wait_gone(struct ul_env *e, double timeout)
{
    for (double deadline = ul_now() + timeout; ul_now() < deadline; ul_sleep(0.05))
        if (!ul_alive(e))
            return 0;
    return -1;
}

int ul_log_clean(struct ul_env *e)
{
    static const char *marks[] = {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                                  "runtime error:", "ERROR: ThreadSanitizer"};
    FILE *f = fopen(e->log, "r");
    if (!f)
        return 1;
    char line[4096];
    int clean = 1;
    while (clean && fgets(line, sizeof(line), f))
        for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++)
            clean = clean && !strstr(line, marks[i]);
    fclose(f);
    if (!clean) {
        fprintf(stderr, "sanitizer report in %s:\n", e->log);
        ul_dump_log(e);
    }
    return clean;
}
