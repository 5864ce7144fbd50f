/*
 * kernels/cuda/cuda_backend.cu — the CUDA backend, built into
 * libllmd_cuda.so and opened by be_create("cuda").
 *
 * Not implemented yet: creation reports that clearly, so a daemon asked for
 * the CUDA backend fails at start with a message instead of running on
 * something else.
 */
#include <cstdio>

extern "C" {
#include "kernels/backend.h"
}

extern "C" __attribute__((visibility("default"))) struct be *
be_cuda_create(const struct be_opts *opts, char *err, size_t errlen)
{
    (void)opts;
    std::snprintf(err, errlen, "cuda backend: not implemented in this build");
    return nullptr;
}
