#!/bin/sh
# Side-by-side CPU benchmark: llmgen --bench and llama.cpp's llama-bench and
# llama-batched-bench on the same model, machine and thread count, in one run.
# llama.cpp is built by scripts/llama-cpp.sh from the source that the PyPI
# package llama-cpp-python carries (a yardstick only: none of its code is
# part of llmd).
#
#   sh scripts/bench-cpu.sh [MODEL]      results in build/bench/
#   LLAMA_CPP_BIN=DIR uses llama.cpp tools already built there.
set -eu
model=${1:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
out=build/bench
threads=$(nproc)
mkdir -p "$out"
bin=$(sh scripts/llama-cpp.sh llama-bench llama-batched-bench)
make --no-print-directory all >/dev/null
echo "== llmgen --bench (threads $threads)"
build/bin/llmgen -m "$model" --bench -n 128 -t "$threads" > "$out/llmgen.json"
cat "$out/llmgen.json"
echo "== llama-bench (pp512, tg128)"
"$bin/llama-bench" -m "$model" -t "$threads" -p 512 -n 128 -o json > "$out/llama-bench.json"
cat "$out/llama-bench.json"
echo "== llama-batched-bench (npp 128, ntg 128, npl 1,8,32,64)"
"$bin/llama-batched-bench" -m "$model" -t "$threads" -c 20000 -b 2048 -ub 512 \
    -npp 128 -ntg 128 -npl 1,8,32,64 --output-format jsonl 2>/dev/null | tee "$out/llama-batched.jsonl"
