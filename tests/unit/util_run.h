/*
 * tests/unit/util_run.h — running a program from a suite and capturing its
 * exit status, stdout and stderr (the llmadmin suites).  Linked into every
 * suite with the other util_*.c files.
 */
#ifndef LLMD_TESTS_UTIL_RUN_H
#define LLMD_TESTS_UTIL_RUN_H

struct ur_run {
    int rc;          /* exit status */
    char *out, *err; /* everything written, NUL-terminated; ur_free frees them */
};

/* Runs bin with args (NULL-terminated, at most 30) and waits for it; its
 * stdout and stderr go through the files dir/out and dir/err.  env_name,
 * when not NULL, is set to env_value in the child (unset when env_value is
 * NULL); as_nobody drops to uid/gid 65534 first (the caller must be root).
 * A program that does not exit normally fails the test. */
void ur_exec(const char *bin, const char *dir, const char *env_name, const char *env_value,
             int as_nobody, struct ur_run *r, const char *const *args);
void ur_free(struct ur_run *r);
/* A whole file, malloc'd and NUL-terminated; fails the test when unreadable. */
char *ur_slurp(const char *path);

#endif
