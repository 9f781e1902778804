#!/bin/sh
# gpu-check.sh: the GPU engine on a machine with a real GPU (make gpu-check),
# in under 8 minutes:
#
#   1. the devices: `edgellmd devices`, and `vulkaninfo --summary` when
#      it is installed;
#   2. the GPU engine's tests on the GPU: go test ./engine/gpu/... with
#      EDGELLMD_TEST_DEVICE=$DEVICE and EDGELLMD_REQUIRE_GPU=1 (a skip for
#      want of a device fails). Without a Go toolchain it runs the test
#      binaries `make gpu-test` leaves in bin/ (build them where Go is, copy
#      bin/ over);
#   3. decode speed: `edgellmd synth --size 27b` writes a model with the
#      27B model's layer shapes and vocabulary ($LAYERS layers, one in four
#      full attention), and `edgellmd bench decode --device $DEVICE` reports
#      prefill and decode tok/s, the time per forward pass, and the GB/s of
#      weights a decode step draws beside the device's copy bandwidth.
#
# Environment:
#   BIN            edgellmd binary (default bin/edgellmd; built first when
#                  Go is there)
#   DEVICE         device selector (default gpu: the first real GPU; gpu:N
#                  names one, lavapipe included, to try this script without
#                  a GPU)
#   LAYERS, TYPE   the synthetic model's layers (default 8) and weight type
#                  (default Q8_0; F16, BF16, F32 also work)
#   MODEL          a GGUF file to bench instead of the synthetic one
#   WORK           folder for the synthetic model (default a temporary one,
#                  removed at the end; 6 GB at 8 layers in Q8_0)
#   PROMPT_TOKENS, GEN, RUNS   bench decode's (default 512, 128, 2)
set -eu

cd "$(dirname "$0")/.."
GO=${GO:-go}
BIN=${BIN:-bin/edgellmd}
DEVICE=${DEVICE:-gpu}
LAYERS=${LAYERS:-8}
TYPE=${TYPE:-Q8_0}
PROMPT_TOKENS=${PROMPT_TOKENS:-512}
GEN=${GEN:-128}
RUNS=${RUNS:-2}
t0=$(date +%s)

tmp=""
cleanup() { if [ -n "$tmp" ]; then rm -rf "$tmp"; fi; }
trap cleanup EXIT INT TERM
if [ -z "${WORK:-}" ]; then
	tmp=$(mktemp -d)
	WORK=$tmp
fi
mkdir -p "$WORK"

fails=0
step() { echo; echo "== $* ($(($(date +%s) - t0)) s)"; }
fail() {
	echo "FAIL  $*"
	fails=$((fails + 1))
}
havego=no
if command -v "$GO" >/dev/null 2>&1; then havego=yes; fi

# A machine without the Vulkan loader: the libvulkan1 .deb that
# scripts/gpu-prep.sh leaves in .gl/ is unpacked in place (as root). An
# NVIDIA driver installed outside the loader's search path (containers:
# /usr/local/nvidia) is named to the loader.
if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1 '; then
	for f in .gl/*.deb; do
		if [ -e "$f" ]; then dpkg -x "$f" / && echo "(unpacked $f)"; fi
	done
	ldconfig 2>/dev/null || true
fi
if [ -z "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ] && ! ls /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json >/dev/null 2>&1; then
	for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/local/nvidia/icd.d/nvidia_icd.json; do
		if [ -e "$icd" ]; then export VK_DRIVER_FILES="$icd"; echo "(VK_DRIVER_FILES=$icd)"; break; fi
	done
fi

if [ "$havego" = yes ] && [ "$BIN" = bin/edgellmd ] && [ ! -x bin/gpu.test ]; then
	CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-X main.version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)" \
		-o "$BIN" ./cmd/edgellmd
fi
[ -x "$BIN" ] || {
	echo "gpu-check: no $BIN and no Go toolchain to build it: run 'make build gpu-test' where Go is and copy bin/ here" >&2
	exit 1
}

step "1. devices"
"$BIN" version
"$BIN" devices || fail "edgellmd devices"
if command -v vulkaninfo >/dev/null 2>&1; then
	timeout 60 vulkaninfo --summary 2>&1 | sed -n '/^Devices:/,$p' || true
else
	echo "(vulkaninfo not installed: apt-get install vulkan-tools)"
fi
if command -v nvidia-smi >/dev/null 2>&1; then
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv || true
fi

step "2. engine/gpu tests on $DEVICE (EDGELLMD_REQUIRE_GPU=1)"
export EDGELLMD_TEST_DEVICE="$DEVICE" EDGELLMD_REQUIRE_GPU=1
if [ -x bin/gpu.test ]; then
	echo "(the prebuilt test binaries from make gpu-test)"
	if (cd engine/gpu && timeout 300 ../../bin/gpu.test -test.count=1 -test.timeout 280s -test.v >"$WORK/gpu-test.txt" 2>&1); then
		grep -E '^(--- |PASS|ok)|device:|bandwidth|near-tie|largest' "$WORK/gpu-test.txt"
	else
		cat "$WORK/gpu-test.txt"
		fail "bin/gpu.test"
	fi
	(cd engine/gpu && ../../bin/gpu.test -test.run '^$' -test.bench 'MatVecGPU|RecordDispatch|MultiDecode' -test.benchtime 20x 2>&1 | grep -E 'Benchmark|ok|FAIL') || true
	if [ -x bin/gpu-vk.test ]; then
		(cd engine/gpu/internal/vk && timeout 120 ../../../../bin/gpu-vk.test -test.count=1) || fail "bin/gpu-vk.test"
	fi
elif [ "$havego" = yes ]; then
	timeout 300 "$GO" test -count=1 -timeout 280s ./engine/gpu/... || fail "go test ./engine/gpu/..."
	"$GO" test -count=1 -run '^$' -bench 'MatVecGPU|RecordDispatch|MultiDecode' -benchtime 20x ./engine/gpu/ || true
	# The engine's device choice, cache fingerprint and copy bandwidth on it.
	timeout 120 "$GO" test -count=1 -run 'Device|AcrossEngines|GenerateOnGPU' ./engine/ || fail "go test ./engine/ -run Device"
else
	fail "no Go toolchain and no bin/gpu.test (make gpu-test builds it)"
fi

step "3. decode speed on $DEVICE"
model=${MODEL:-}
if [ -z "$model" ]; then
	model="$WORK/qwen35-27b-shapes-${LAYERS}l-$TYPE.gguf"
	if [ ! -s "$model" ]; then
		echo "synth --size 27b --layers $LAYERS --type $TYPE (hidden 5120, FFN 17408, vocabulary 248320) -> $model"
		timeout 300 "$BIN" synth --size 27b --layers "$LAYERS" --type "$TYPE" --seed 1 -o "$model" >/dev/null ||
			fail "edgellmd synth --size 27b"
	fi
fi
if [ -s "$model" ]; then
	ls -l "$model"
	if timeout 300 "$BIN" bench decode -m "$model" --device "$DEVICE" --prompt-tokens "$PROMPT_TOKENS" \
		--gen "$GEN" --runs "$RUNS" >"$WORK/bench.txt" 2>&1; then
		cat "$WORK/bench.txt"
	else
		cat "$WORK/bench.txt"
		fail "edgellmd bench decode --device $DEVICE"
	fi
fi

echo
echo "gpu-check took $(($(date +%s) - t0)) s"
if [ "$fails" -ne 0 ]; then
	echo "gpu-check: $fails step(s) failed"
	exit 1
fi
echo "gpu-check: all steps passed"
