/*
 * tests/unit/util_run.c — running a program from a suite (see util_run.h).
 * Output goes through files rather than pipes, so a chatty program can never
 * block on a full pipe while the suite waits for it.
 */
#include "tests/unit/util_run.h"

#include <check.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

char *ur_slurp(const char *path)
{
    FILE *fp = fopen(path, "rb");
    ck_assert_ptr_nonnull(fp);
    char *buf = NULL;
    size_t cap = 0, len = 0, got;
    do {
        if (len + 4096 + 1 > cap) {
            cap = (len + 4096 + 1) * 2;
            char *grown = realloc(buf, cap);
            ck_assert_ptr_nonnull(grown);
            buf = grown;
        }
        got = fread(buf + len, 1, cap - len - 1, fp);
        len += got;
    } while (got > 0);
    fclose(fp);
    buf[len] = '\0';
    return buf;
}

void ur_free(struct ur_run *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof(*r));
}

/* The child's side: output files, environment, identity, then exec. */
static void ur_child(const char *bin, const char *out, const char *err, const char *env_name,
                     const char *env_value, int as_nobody, const char *const *argv)
{
    int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
        _exit(127);
    if (env_name && env_value)
        setenv(env_name, env_value, 1);
    else if (env_name)
        unsetenv(env_name);
    if (as_nobody && (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0))
        _exit(126);
    execv(bin, (char *const *)argv);
    _exit(127);
}

void ur_exec(const char *bin, const char *dir, const char *env_name, const char *env_value,
             int as_nobody, struct ur_run *r, const char *const *args)
{
    char out[512], err[512];
    snprintf(out, sizeof(out), "%s/out", dir);
    snprintf(err, sizeof(err), "%s/err", dir);
    const char *argv[32] = {bin};
    int n = 1;
    while (args[n - 1]) {
        ck_assert_int_lt(n, 31);
        argv[n] = args[n - 1];
        n++;
    }
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        ur_child(bin, out, err, env_name, env_value, as_nobody, argv);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st), "%s died", bin);
    r->rc = WEXITSTATUS(st);
    r->out = ur_slurp(out);
    r->err = ur_slurp(err);
}
