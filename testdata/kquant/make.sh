#!/bin/bash
# Remakes testdata/kquant: the files llama-quantize writes from stories260K
# and from a synthetic qwen35 (edgellmd synth --size kquant), and llama.cpp's
# greedy goldens on them (its AVX2 build). Run from the repository root after
# installing llamaref (shared/tools/llamaref/README.md) at /tmp/llamaref and
# building llama-quantize from its bundled source into /tmp/llama-build (same
# README; on CPUs listing AMX add -mno-amx-* to the C and C++ flags).
set -euo pipefail
out=testdata/kquant
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# llama.cpp's AVX2 variant only: the AVX-512 ones sum in another order.
cp -r /tmp/llamaref "$work/llamaref"
find "$work/llamaref/node_modules/@node-llama-cpp" -name 'libggml-cpu-*.so' ! -name 'libggml-cpu-haswell.so' -delete
cp testdata/qwen35/tools/golden.mjs "$out/golden-ub1.mjs" "$work/llamaref/"
# golden-ub1-NAME.jsonl: llama.cpp fed one token at a time (golden-ub1.mjs),
# kept only where its tokens differ from the batched golden's.
ub1() {
	(cd "$work/llamaref" && node golden-ub1.mjs "$OLDPWD/$out/$1.gguf" "$OLDPWD/$out/golden-$1.jsonl") > "$out/golden-ub1-$1.jsonl"
	if cmp -s "$out/golden-ub1-$1.jsonl" "$out/golden-$1.jsonl"; then rm "$out/golden-ub1-$1.jsonl"; fi
}
go run ./cmd/edgellmd synth --size kquant --seed 7 -o "$work/synth-kquant-F16.gguf"
for p in Q4_K_M Q5_K_M Q6_K Q4_0 Q3_K_M Q2_K IQ4_XS; do
	/tmp/llama-build/bin/llama-quantize "$work/synth-kquant-F16.gguf" "$out/synth-kquant-$p.gguf" "$p"
	(cd "$work/llamaref" && IGNORE_EOS=1 node golden.mjs "$OLDPWD/$out/synth-kquant-$p.gguf" "$OLDPWD/testdata/qwen35/prompts.txt" 32) > "$out/golden-synth-kquant-$p.jsonl"
	ub1 "synth-kquant-$p"
done
python3 -c 'import json,sys; [print(json.loads(l)["prompt"]) for l in open("testdata/golden/stories260K-greedy64.jsonl")]' > "$work/prompts.txt"
for p in Q4_K_M Q5_K_M Q6_K Q4_0 Q3_K_M IQ4_XS; do
	/tmp/llama-build/bin/llama-quantize testdata/models/stories260K.gguf "$out/stories260K-$p.gguf" "$p"
	(cd "$work/llamaref" && node golden.mjs "$OLDPWD/$out/stories260K-$p.gguf" "$work/prompts.txt" 64) > "$out/golden-stories260K-$p.jsonl"
	ub1 "stories260K-$p"
done
