#!/bin/sh
# Fetches vocabulary-only GGUF files of other tokenizer families (Llama-2
# SentencePiece, Llama-3 BPE, Qwen2 BPE) for the tokenizer tests.  They come
# from llama.cpp's source as the PyPI package llama-cpp-python carries it,
# pinned by version and checked against models.sha256.
set -eu
dir=${1:-models/vocab}
pin=$(cd "$(dirname "$0")/.." && pwd)/models.sha256
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
PIP=pip3
command -v pip3 >/dev/null 2>&1 || PIP="python3 -m pip"
$PIP download --quiet --no-deps --no-binary :all: --disable-pip-version-check -d "$tmp" \
    "llama-cpp-python==0.3.36"
mkdir -p "$dir"
for v in llama-spm llama-bpe qwen2; do
    tar -xzf "$tmp"/llama_cpp_python-*.tar.gz -C "$tmp" --wildcards \
        "*/vendor/llama.cpp/models/ggml-vocab-$v.gguf"
    f=$(find "$tmp" -name "ggml-vocab-$v.gguf" | head -n 1)
    want=$(awk -v n="vocab/ggml-vocab-$v.gguf" '$2 == n {print $1}' "$pin")
    got=$(sha256sum "$f" | cut -d' ' -f1)
    if [ "$got" != "$want" ]; then
        echo "vocab: SHA-256 mismatch for $v: got $got, want $want" >&2
        exit 1
    fi
    mv "$f" "$dir/"
done
echo "vocab: $dir (sha256 ok)"
