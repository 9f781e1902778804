#!/bin/bash
# Makes (or checks) the llama.cpp goldens of one synthetic qwen35 model.
# Usage, from the repository root:
#   testdata/qwen35/tools/make.sh OUTDIR PROMPTS -size tiny -seed 6 [-mtp] [-tokenizer FILE] ...
# The synthgen flags after PROMPTS choose the model. OUTDIR receives model.gguf (and its sha256 on
# stdout), golden-{f16kv,f32kv,fa-f32kv,nofa-f16kv}.jsonl, margins-{f16kv,f32kv}.jsonl and
# check.json. Needs llamaref installed at /tmp/llamaref (node-llama-cpp 3.22.1; see
# shared/tools/llamaref/README.md). Exit status 1 when the model fails the margin criterion.
set -euo pipefail
out=$1; prompts=$(realpath "$2"); shift 2
tools=$(dirname "$(realpath "$0")")
mkdir -p "$out"; out=$(realpath "$out")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cp "$tools"/*.mjs "$work"/ && ln -s /tmp/llamaref/node_modules "$work"/node_modules
go run ./engine/synth/internal/synthgen "$@" -o "$out/model.gguf"
m="$out/model.gguf"
cd "$work"
# llama.cpp's defaults: F16 KV cache, flash attention on (auto).
IGNORE_EOS=1 node golden.mjs "$m" "$prompts" 32 > "$out/golden-f16kv.jsonl"
# A real F32 KV cache needs flash attention off (with it on, llama.cpp casts K and V to F16).
IGNORE_EOS=1 FA=0 KV=F32 node golden.mjs "$m" "$prompts" 32 > "$out/golden-f32kv.jsonl"
# The two other combinations, kept only to check that all four agree.
IGNORE_EOS=1 KV=F32 node golden.mjs "$m" "$prompts" 32 > "$out/golden-fa-f32kv.jsonl"
IGNORE_EOS=1 FA=0 node golden.mjs "$m" "$prompts" 32 > "$out/golden-nofa-f16kv.jsonl"
node margins.mjs "$m" "$out/golden-f16kv.jsonl" > "$out/margins-f16kv.jsonl"
FA=0 KV=F32 node margins.mjs "$m" "$out/golden-f32kv.jsonl" > "$out/margins-f32kv.jsonl"
node check.mjs "$out" | tee "$out/check.json"
