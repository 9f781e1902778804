#!/bin/sh
# Aggregate decode at 1, 2, 4 and 8 concurrent requests: edgellmd serve
# (engine.max_sequences 8) beside llama-server --parallel N, on the same GGUF
# file with the same threads, two rounds, each server fresh and warmed up with
# another prompt (so neither serves the measured prompts from a cache).
#   sh scripts/compare-parallel.sh MODEL.gguf [THREADS] [LLAMA_SERVER]
# LLAMA_SERVER defaults to /tmp/llama-build/bin/llama-server (built as
# shared/tools/llamaref/README.md says). Needs bin/edgellmd (make build).
set -e
M=${1:?model file}
T=${2:-2}
LS=${3:-/tmp/llama-build/bin/llama-server}
cd "$(dirname "$0")/.."
go build -o bin/loadgen scripts/loadgen/main.go
CFG=$(mktemp)
trap 'rm -f "$CFG"' EXIT
cat > "$CFG" <<EOC
listen: 127.0.0.1:18002
model:
  path: $M
  threads: $T
  context_length: 2048
engine:
  max_sequences: 8
api:
  queue_depth: 64
EOC
wait_up() { for i in $(seq 60); do curl -sf "$1/health" >/dev/null && return 0; sleep 0.5; done; return 1; }
for round in 1 2; do
  for n in 1 2 4 8; do
    bin/edgellmd serve -c "$CFG" >/dev/null 2>&1 &
    P=$!; wait_up http://127.0.0.1:18002
    bin/loadgen -url http://127.0.0.1:18002 -n 1 -gen 8 -offset 500 >/dev/null
    echo "edgellmd n=$n $(bin/loadgen -url http://127.0.0.1:18002 -n $n -gen 64)"
    kill $P; wait $P 2>/dev/null || true
    "$LS" -m "$M" --host 127.0.0.1 --port 18080 -t "$T" -tb "$T" -c $((2048*n)) --parallel $n >/dev/null 2>&1 &
    P=$!; wait_up http://127.0.0.1:18080
    bin/loadgen -url http://127.0.0.1:18080 -n 1 -gen 8 -offset 500 >/dev/null
    echo "llama-server n=$n $(bin/loadgen -url http://127.0.0.1:18080 -n $n -gen 64)"
    kill $P; wait $P 2>/dev/null || true
  done
done
