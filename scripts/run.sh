#!/bin/sh
# `make run`: generates with the default model through the batched engine and
# prints how to call it.  (The HTTPS daemon, llmd, builds on this engine.)
set -eu
model=${1:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
echo "== llmgen -m $model --chat -p 'What is a paged KV cache?' -n 96"
build/bin/llmgen -m "$model" --chat -p "What is a paged KV cache? Answer in two sentences." -n 96
cat <<EOT

How to call it:
  build/bin/llmgen -m $model -p "Once upon a time" -n 64          # raw continuation, greedy
  build/bin/llmgen -m $model --chat -p "Hi!" --temp 0.7 --seed 1  # chat template, sampled
  build/bin/llmgen -m $model --batch prompts.txt --json           # many prompts in one batch
  build/bin/llmgen -m $model --bench                              # tokens/s at batch 1..64
EOT
