/*
 * kernels/backend.c — choosing a backend, and the KV pool geometry shared by
 * all of them.
 *
 * The CPU backend is linked in.  The CUDA backend is a shared object
 * (libllmd_cuda.so) opened with dlopen only when asked for, so that llmd runs
 * on a box without any CUDA library installed.
 */
#include "kernels/backend.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LLMD_GOMP_SPINCOUNT "10000"

size_t be_kv_block_elems(const struct be_kv_geom *g)
{
    return (size_t)g->n_layers * 2 * g->n_kv_heads * g->block_size * g->head_dim;
}

size_t be_kv_offset(const struct be_kv_geom *g, int layer, int kv, int head)
{
    size_t head_elems = (size_t)g->block_size * g->head_dim;
    return (((size_t)layer * 2 + kv) * g->n_kv_heads + head) * head_elems;
}

typedef struct be *(*be_create_fn)(const struct be_opts *, char *, size_t);

static struct be *be_cuda_open(const struct be_opts *opts, char *err, size_t errlen)
{
    const char *path = getenv("LLMD_CUDA_LIB");
    void *so = dlopen(path ? path : "libllmd_cuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!so) {
        snprintf(err, errlen, "cuda backend unavailable: %s", dlerror());
        return NULL;
    }
    be_create_fn fn = (be_create_fn)dlsym(so, "be_cuda_create");
    if (!fn) {
        snprintf(err, errlen, "cuda backend: %s has no be_cuda_create",
                 path ? path : "libllmd_cuda.so");
        dlclose(so);
        return NULL;
    }
    /* The object stays loaded for the life of the process: the backend's
     * code lives in it. */
    return fn(opts, err, errlen);
}

struct be *be_create(const char *name, const struct be_opts *opts, char *err, size_t errlen)
{
    struct be_opts none = {0};
    if (!opts)
        opts = &none;
    if (!name || strcmp(name, "cpu") == 0)
        return be_cpu_create(opts, err, errlen);
    if (strcmp(name, "cuda") == 0)
        return be_cuda_open(opts, err, errlen);
    snprintf(err, errlen, "unknown backend '%s' (expected cpu or cuda)", name);
    return NULL;
}

void be_process_init(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT") || !argv || !argv[0])
        return;
    /* About a tenth of a millisecond of spinning: long enough to bridge the
     * gap between two operations of one forward pass, short enough that a
     * worker left idle gives its core back (see kernels/cpu/cpu_backend.c). */
    setenv("GOMP_SPINCOUNT", LLMD_GOMP_SPINCOUNT, 1);
    /* exec the resolved path, not /proc/self/exe, so that the process keeps
     * its own name (ps, pgrep, top show "llmd", not "exe") */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = 0;
        execv(self, argv);
    }
    execv("/proc/self/exe", argv);
}

void be_destroy(struct be *b)
{
    if (b)
        b->ops->destroy(b);
}

const char *be_error(const struct be *b)
{
    return b->err;
}
