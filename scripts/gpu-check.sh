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
#   3. speed: `edgellmd synth --size 27b` writes a model with the 27B
#      model's layer shapes and vocabulary ($LAYERS layers, one in four full
#      attention), and `edgellmd bench decode --device $DEVICE --json` runs
#      twice, with --gpu-matmul scalar and coopmat (tensor cores; a device
#      without them says so): prefill tok/s and the matrix products'
#      TFLOPS with the share of their multiply-adds on tensor cores, the
#      decode step and the GB/s of weights it draws beside the device's copy
#      bandwidth, a 16-token verify pass against a decode step, and whether
#      the weights are used in place. A "summary" line per path, and one
#      with verify16/decode on both;
#   4. the matrix products alone (bin/gpu.test's BenchmarkMatMulPaths):
#      scalar shaders, the skinny tile shaders (off by default: what
#      coopmat would run below 64 vectors) and the 64x64 tiles, with a
#      summary table of microseconds.
#
# Environment:
#   BIN            edgellmd binary (default bin/edgellmd; built first when
#                  Go is there). Without it (and without Go), bin/gpu.test's
#                  BenchmarkModel27B and BenchmarkMatMulPaths measure step 3
#   DEVICE         device selector (default gpu: the first real GPU; gpu:N
#                  names one, lavapipe included, to try this script without
#                  a GPU)
#   LAYERS, TYPE   the synthetic model's layers (default 8) and weight type
#                  (default Q8_0; F16, BF16, F32 also work)
#   MODEL          a GGUF file to bench instead of the synthetic one
#   RUNNER         a command to run the binaries through, e.g.
#                  bin/mesa26-root/run (make mesa26-root: Mesa 26 lavapipe,
#                  which has cooperative matrices, to try the script here)
#   WORK           folder for the synthetic model (default a temporary one,
#                  removed at the end; 6 GB at 8 layers in Q8_0)
#   PROMPT_TOKENS, GEN, RUNS   bench decode's (default 512, 64, 1)
set -eu

cd "$(dirname "$0")/.."
GO=${GO:-go}
BIN=${BIN:-bin/edgellmd}
DEVICE=${DEVICE:-gpu}
LAYERS=${LAYERS:-8}
TYPE=${TYPE:-Q8_0}
PROMPT_TOKENS=${PROMPT_TOKENS:-512}
GEN=${GEN:-64}
RUNS=${RUNS:-1}
t0=$(date +%s)
RUNNER=${RUNNER:-}
if [ -n "$RUNNER" ]; then RUNNER=$(realpath "$RUNNER"); fi

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
# pathsSummary < BenchmarkMatMulPaths output: per product and vector
# count, the microseconds of the scalar shaders, the skinny tile shaders
# and the 64x64 tile shaders side by side (the skinny ones are what coopmat
# would run below 64 vectors, decode steps, verify trees and a few
# sequences, were they on: mmSkinnyMinVectors).
pathsSummary() {
	awk '/^BenchmarkMatMulPaths\//{
		split($1, p, "/"); path=p[5]; sub(/-[0-9]+$/, "", path); key=p[2] " " p[3] " " p[4]
		for (i = 2; i < NF; i++) if ($(i+1) == "µs/product") us[key, path] = $i
		if (!(key in seen)) { seen[key] = 1; order[++n] = key }
	}
	END {
		if (n == 0) exit
		printf "summary products (µs; BenchmarkMatMulPaths):\n%-42s %10s %10s %10s %14s\n", "product, vectors", "scalar", "skinny", "tiles", "scalar/skinny"
		for (i = 1; i <= n; i++) { k = order[i]; a = us[k, "scalar"]; b = us[k, "skinny"]; c = us[k, "tiles"]
			r = (a != "" && b != "" && b > 0) ? sprintf("%.2f", a / b) : "-"
			printf "%-42s %10s %10s %10s %14s\n", k, a == "" ? "-" : a, b == "" ? "-" : b, c == "" ? "-" : c, r }
	}'
}
havego=no
if command -v "$GO" >/dev/null 2>&1; then havego=yes; fi

# A machine without the Vulkan loader: the .debs that scripts/gpu-prep.sh
# leaves in .gl/ (libvulkan1, and the GL dispatch libraries NVIDIA's ICD,
# libGLX_nvidia.so.0, needs: libglvnd0 libegl1 libgl1 libglx0 libopengl0
# libgles2; without them vkCreateInstance fails with
# VK_ERROR_INCOMPATIBLE_DRIVER) are unpacked in place (as root). An
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
# Without edgellmd (the device tool's carry limit leaves room for
# bin/gpu.test alone), the test binary's benchmarks stand in for steps 1
# and 3: TestCoopMatCapabilities lists the tiles, BenchmarkModel27B is
# bench decode on the same synthetic model, BenchmarkMatMulPaths the
# products alone.
haveBin=yes
if [ ! -x "$BIN" ]; then
	if [ ! -x bin/gpu.test ]; then
		echo "gpu-check: no $BIN, no bin/gpu.test and no Go toolchain: run 'make build gpu-test' where Go is and copy bin/ here" >&2
		exit 1
	fi
	haveBin=no
	echo "(no $BIN: the test binary's benchmarks stand in for bench decode)"
fi

step "1. devices"
if [ "$haveBin" = yes ]; then
	$RUNNER "$BIN" version
	$RUNNER "$BIN" devices || fail "edgellmd devices"
fi
if [ -n "$RUNNER" ]; then
	echo "(vulkaninfo skipped: the host's would not run through $RUNNER)"
elif command -v vulkaninfo >/dev/null 2>&1; then
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
	if (cd engine/gpu && timeout 300 $RUNNER ../../bin/gpu.test -test.count=1 -test.timeout 280s -test.v >"$WORK/gpu-test.txt" 2>&1); then
		grep -E '^(--- |PASS|ok)|device:|bandwidth|near-tie|largest|cooperative|tiles|shapes|  [0-9]+x[0-9]+x[0-9]+' "$WORK/gpu-test.txt"
	else
		cat "$WORK/gpu-test.txt"
		fail "bin/gpu.test"
	fi
	(cd engine/gpu && $RUNNER ../../bin/gpu.test -test.run '^$' -test.bench 'MatVecGPU|RecordDispatch|MultiDecode' -test.benchtime 20x 2>&1 | grep -E 'Benchmark|ok|FAIL') || true
	if [ -x bin/gpu-vk.test ]; then
		# The struct-layout test compiles C against vulkan_core.h: a GPU
		# machine without libvulkan-dev skips it, saying so.
		skip=""
		if [ ! -e /usr/include/vulkan/vulkan_core.h ] || ! command -v cc >/dev/null 2>&1; then
			skip=TestLayoutMatchesC
			echo "(TestLayoutMatchesC skipped: no cc or no Vulkan headers here; CI runs it)"
		fi
		(cd engine/gpu/internal/vk && timeout 120 $RUNNER ../../../../bin/gpu-vk.test -test.count=1 ${skip:+-test.skip "$skip"}) || fail "bin/gpu-vk.test"
	fi
elif [ "$havego" = yes ]; then
	timeout 300 "$GO" test -count=1 -timeout 280s ./engine/gpu/... || fail "go test ./engine/gpu/..."
	"$GO" test -count=1 -run '^$' -bench 'MatVecGPU|RecordDispatch|MultiDecode' -benchtime 20x ./engine/gpu/ || true
	# The engine's device choice, cache fingerprint and copy bandwidth on it.
	timeout 120 "$GO" test -count=1 -run 'Device|AcrossEngines|GenerateOnGPU' ./engine/ || fail "go test ./engine/ -run Device"
else
	fail "no Go toolchain and no bin/gpu.test (make gpu-test builds it)"
fi

if [ "$haveBin" = no ]; then
	step "3. speed on $DEVICE from bin/gpu.test: BenchmarkModel27B ($LAYERS layers, $TYPE), BenchmarkMatMulPaths"
	if (cd engine/gpu && EDGELLMD_BENCH_LAYERS="$LAYERS" EDGELLMD_BENCH_TYPE="$TYPE" timeout 300 $RUNNER ../../bin/gpu.test -test.run '^$' \
		-test.bench Model27B -test.benchtime 1x -test.v >"$WORK/model27b.txt" 2>&1); then
		grep -E 'Benchmark|synth|copy' "$WORK/model27b.txt"
	else
		cat "$WORK/model27b.txt"
		fail "BenchmarkModel27B"
	fi
	if (cd engine/gpu && timeout 200 $RUNNER ../../bin/gpu.test -test.run '^$' -test.bench MatMulPaths -test.benchtime 5x >"$WORK/paths.txt" 2>&1); then
		grep -E 'Benchmark' "$WORK/paths.txt"
		pathsSummary <"$WORK/paths.txt"
		l=$(grep 'BenchmarkModel27B/coopmat-' "$WORK/model27b.txt" | tail -1)
		s=$(grep 'BenchmarkModel27B/scalar-' "$WORK/model27b.txt" | tail -1)
		f=$(grep 'BenchmarkModel27B/coopmat_fa-' "$WORK/model27b.txt" | tail -1)
		k=$(grep 'BenchmarkModel27B/coopmat_skinny-' "$WORK/model27b.txt" | tail -1)
		echo "summary verify16/decode: scalar $(echo "$s" | sed -n 's|.*[[:space:]]\([0-9.e+-]*\) verify16/decode.*|\1|p'), coopmat $(echo "$l" | sed -n 's|.*[[:space:]]\([0-9.e+-]*\) verify16/decode.*|\1|p')," \
			"coopmat with attention on tensor cores $(echo "$f" | sed -n 's|.*[[:space:]]\([0-9.e+-]*\) verify16/decode.*|\1|p'), coopmat with the skinny shaders $(echo "$k" | sed -n 's|.*[[:space:]]\([0-9.e+-]*\) verify16/decode.*|\1|p');" \
			"decode ms/step: scalar $(echo "$s" | sed -n 's|.*[[:space:]]\([0-9.e+-]*\) decode_ms/step.*|\1|p'), coopmat $(echo "$l" | sed -n 's|.*[[:space:]]\([0-9.e+-]*\) decode_ms/step.*|\1|p'), coopmat with the skinny shaders $(echo "$k" | sed -n 's|.*[[:space:]]\([0-9.e+-]*\) decode_ms/step.*|\1|p')"
	else
		cat "$WORK/paths.txt"
		fail "BenchmarkMatMulPaths"
	fi
	echo
	echo "gpu-check took $(($(date +%s) - t0)) s"
	if [ "$fails" -ne 0 ]; then
		echo "gpu-check: $fails step(s) failed"
		exit 1
	fi
	echo "gpu-check: all steps passed"
	exit 0
fi

step "3. speed on $DEVICE: gpu_matmul scalar, then coopmat (tensor cores)"
model=${MODEL:-}
if [ -z "$model" ]; then
	model="$WORK/qwen35-27b-shapes-${LAYERS}l-$TYPE.gguf"
	if [ ! -s "$model" ]; then
		echo "synth --size 27b --layers $LAYERS --type $TYPE (hidden 5120, FFN 17408, vocabulary 248320) -> $model"
		timeout 300 $RUNNER "$BIN" synth --size 27b --layers "$LAYERS" --type "$TYPE" --seed 1 -o "$model" >/dev/null ||
			fail "edgellmd synth --size 27b"
	fi
fi
# field NAME < JSON line: a value of bench decode --json (no jq there).
field() { sed -n -e "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p" -e "t" -e "s/.*\"$1\":\([^,}]*\).*/\1/p"; }
if [ -s "$model" ]; then
	ls -l "$model"
	for mm in scalar coopmat; do
		echo "-- gpu_matmul $mm"
		if timeout 300 $RUNNER "$BIN" bench decode -m "$model" --device "$DEVICE" --gpu-matmul "$mm" --prompt-tokens "$PROMPT_TOKENS" \
			--gen "$GEN" --runs "$RUNS" --json >"$WORK/bench-$mm.txt" 2>&1; then
			cat "$WORK/bench-$mm.txt"
			l=$(grep '^{' "$WORK/bench-$mm.txt" | tail -1)
			vd=$(echo "$l" | field verify16_of_decode) dms=$(echo "$l" | field decode_step_ms) vms=$(echo "$l" | field verify16_step_ms)
			if [ "$mm" = scalar ]; then vd_scalar=$vd dms_scalar=$dms vms_scalar=$vms; else vd_coopmat=$vd dms_coopmat=$dms vms_coopmat=$vms; fi
			echo "summary $mm: prefill $(echo "$l" | field prefill_tok_s) tok/s, $(echo "$l" | field prefill_matmul_tflops) TFLOPS in matrix products," \
				"$(echo "$l" | field prefill_tensor_core_share) of them on tensor cores ($(echo "$l" | field gpu_matmul_tiles));" \
				"decode $(echo "$l" | field decode_step_ms) ms/step, $(echo "$l" | field decode_weight_gb_s) GB/s of weights against a copy rate of $(echo "$l" | field copy_gb_s) GB/s;" \
				"verify16 $(echo "$l" | field verify16_step_ms) ms = $(echo "$l" | field verify16_of_decode)x decode; weights in place $(echo "$l" | field weights_in_place)"
		elif [ "$mm" = coopmat ] && grep -q 'cannot run the tensor-core shaders' "$WORK/bench-$mm.txt"; then
			cat "$WORK/bench-$mm.txt"
			echo "(no cooperative matrices on $DEVICE: the scalar figures are all there is)"
		else
			cat "$WORK/bench-$mm.txt"
			fail "edgellmd bench decode --device $DEVICE --gpu-matmul $mm"
		fi
	done
	echo "summary verify16/decode: scalar ${vd_scalar:--}, coopmat ${vd_coopmat:--} (verify16 ms ${vms_scalar:--} and ${vms_coopmat:--};" \
		"decode ms/step ${dms_scalar:--} and ${dms_coopmat:--})"
fi
# The products alone, from the test binary where there is one: the skinny
# path's figures beside the scalar shaders'.
if [ -x bin/gpu.test ]; then
	step "4. the matrix products alone on $DEVICE: BenchmarkMatMulPaths (scalar, skinny and 64x64 tiles)"
	if (cd engine/gpu && timeout 200 $RUNNER ../../bin/gpu.test -test.run '^$' -test.bench MatMulPaths -test.benchtime 5x >"$WORK/paths.txt" 2>&1); then
		grep -E 'Benchmark' "$WORK/paths.txt"
		pathsSummary <"$WORK/paths.txt"
	else
		cat "$WORK/paths.txt"
		fail "BenchmarkMatMulPaths"
	fi
fi

echo
echo "gpu-check took $(($(date +%s) - t0)) s"
if [ "$fails" -ne 0 ]; then
	echo "gpu-check: $fails step(s) failed"
	exit 1
fi
echo "gpu-check: all steps passed"
