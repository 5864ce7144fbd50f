#!/bin/sh
# scripts/llama-cpp.sh — builds llama.cpp tools to measure llmd against.
#
# The one idea: the yardstick is pinned.  llama.cpp is built from the source
# that the PyPI package llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION carries
# (its vendor/llama.cpp), so every run of the benchmarks compares against the
# same llama.cpp.  None of its code becomes part of llmd.
#
#   sh scripts/llama-cpp.sh TARGET...     e.g. llama-server llama-bench
#
# Prints the directory holding the built programs on stdout (and nothing
# else there); progress goes to stderr.  Only missing targets are built.
#   LLAMA_CPP_BIN=DIR    use programs already built in DIR (nothing is built;
#                        fails when a target is missing there)
#   LLAMA_CPP_SRC=DIR    where the source goes (default build/llama.cpp-src)
#   LLAMA_CPP_JOBS=N     parallel compile jobs (default: the number of cores)
set -eu
version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
src=${LLAMA_CPP_SRC:-build/llama.cpp-src}
jobs=${LLAMA_CPP_JOBS:-$(nproc)}

die() {
    echo "llama-cpp.sh: $*" >&2
    exit 1
}

[ $# -gt 0 ] || die "usage: llama-cpp.sh TARGET... (e.g. llama-server)"

if [ -n "${LLAMA_CPP_BIN:-}" ]; then
    for t in "$@"; do
        [ -x "$LLAMA_CPP_BIN/$t" ] || die "LLAMA_CPP_BIN=$LLAMA_CPP_BIN has no $t"
    done
    echo "$LLAMA_CPP_BIN"
    exit 0
fi

bin=$src/build/bin
missing=
for t in "$@"; do
    [ -x "$bin/$t" ] || missing="$missing $t"
done
if [ -z "$missing" ]; then
    echo "$bin"
    exit 0
fi

# The source is unpacked beside its final place and renamed into it, so an
# interrupted download or extraction never leaves a half tree that looks done.
if [ ! -f "$src/CMakeLists.txt" ]; then
    command -v pip3 >/dev/null || die "pip3 is needed to fetch llama-cpp-python's source"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    echo "llama-cpp.sh: fetching llama-cpp-python==$version (source)" >&2
    pip3 download --quiet --no-deps --no-binary :all: -d "$tmp" \
        "llama-cpp-python==$version" >&2 || die "pip3 download failed"
    mkdir -p "$tmp/src"
    tar -xzf "$tmp"/llama_cpp_python-*.tar.gz -C "$tmp/src" --strip-components=3 \
        --wildcards '*/vendor/llama.cpp/*' || die "no vendor/llama.cpp in the package"
    [ -f "$tmp/src/CMakeLists.txt" ] || die "vendor/llama.cpp has no CMakeLists.txt"
    mkdir -p "$(dirname "$src")"
    rm -rf "$src"
    mv "$tmp/src" "$src"
fi

command -v cmake >/dev/null || die "cmake is needed to build llama.cpp"
echo "llama-cpp.sh: building$missing in $src/build (-j$jobs)" >&2
# No curl or OpenSSL: the tools only read local model files and serve plain
# HTTP on loopback, and these keep the build free of extra -dev packages.
cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF >&2 || die "cmake configure failed"
# shellcheck disable=SC2086 # one word per target
cmake --build "$src/build" -j"$jobs" --target $missing >&2 || die "build failed"
for t in "$@"; do
    [ -x "$bin/$t" ] || die "built, but $bin/$t is missing"
done
echo "$bin"
