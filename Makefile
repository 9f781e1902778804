# edgellmd: build, test, benchmark, lint. Pure Go; no cgo.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
BIN     := bin/edgellmd
MODEL   ?= testdata/models/stories260K.gguf

.PHONY: build test e2e bench lint fuzz run serve clean deb test-deb test-arm64 shaders-check gpu-test gpu-check mesa26-root gpu-test-mesa26 agents-check fleet-check apt-repo apt-repo-check dashboard-check

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/edgellmd

# Unit tests: what every commit must keep green (engine/gpu alone takes
# ~5 minutes on lavapipe on 2 cores, so the per-package limit is 20m).
test:
	$(GO) test -count=1 -timeout 20m ./...

# Slower end-to-end tests (whole binary, bigger models).
e2e:
	$(GO) test -count=1 -tags e2e -run 'E2E' -timeout 20m ./...

# Go benchmarks (tokens/s and GB/s via b.ReportMetric).
bench:
	$(GO) test -run '^$$' -bench . -benchtime 2x -benchmem ./engine/...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# A fuzzing pass over every Fuzz target (the parsers that take outside
# input), FUZZTIME each (default 30s), with -fuzzminimizetime 20x so that a
# crasher is reported within the pass; FUZZ_ONLY=REGEXP picks targets.
fuzz:
	GO=$(GO) sh scripts/fuzz.sh

run: build
	./$(BIN) run -m $(MODEL) -p "Once upon a time" -n 64

# Build and start the daemon on the bundled model (127.0.0.1:8001, Ctrl-C stops it).
serve: build
	./$(BIN) serve --model $(MODEL)

# Debian packages for arm64 (Jetson) and amd64, cross-built from any machine
# with Go and dpkg-deb: bin/deb/edgellmd_<version>_<arch>.deb, version from
# git (packaging/build-deb.sh says how). DEB_VERSION=... overrides it.
deb:
	GO=$(GO) sh packaging/build-deb.sh amd64 arm64

# Builds both .debs and checks them: dpkg-deb fields and contents, lintian,
# systemd-analyze verify, shellcheck, and (as root, with debootstrap) an
# install/upgrade/purge test in a Debian bookworm chroot. Slow (minutes).
test-deb:
	GO=$(GO) sh packaging/test-deb.sh

# The arm64 (Jetson) kernels under qemu user emulation: engine/tensor's tests
# (NEON kernels against their Go twins) and the model's llama.cpp logits
# goldens, and the GPU engine on an arm64 lavapipe. Needs qemu-user-static
# and libc6-arm64-cross (.ci/run installs them) and apt for the arm64 .debs.
# QEMU_CPU=max shows every feature qemu emulates (SDOT, I8MM, BF16, SVE2),
# so the kernels that need one run rather than skip.
QEMU_LD_PREFIX ?= /usr/aarch64-linux-gnu
QEMU_CPU ?= max
ARM64_VK ?= bin/arm64-root
test-arm64:
	GOARCH=arm64 CGO_ENABLED=0 $(GO) test -c -o bin/tensor-arm64.test ./engine/tensor
	GOARCH=arm64 CGO_ENABLED=0 $(GO) test -c -o bin/model-arm64.test ./engine/model
	cd engine/tensor && QEMU_LD_PREFIX=$(QEMU_LD_PREFIX) qemu-aarch64-static -cpu $(QEMU_CPU) ../../bin/tensor-arm64.test
	cd engine/model && QEMU_LD_PREFIX=$(QEMU_LD_PREFIX) qemu-aarch64-static -cpu $(QEMU_CPU) ../../bin/model-arm64.test -test.run 'TestLogitsMatchLlamaCpp|TestStoriesGolden'
	# The GPU engine on an arm64 lavapipe (Debian's arm64 libvulkan1 and
	# mesa-vulkan-drivers unpacked into $(ARM64_VK), not installed):
	# stories260K on the Vulkan backend against the CPU engine.
	sh engine/gpu/arm64-lavapipe.sh $(ARM64_VK)
	GOARCH=arm64 CGO_ENABLED=0 $(GO) test -c -o bin/gpu-arm64.test ./engine/gpu
	cd engine/gpu && R=$(abspath $(ARM64_VK)) && QEMU_LD_PREFIX=$$R LD_LIBRARY_PATH=$$R/usr/lib/aarch64-linux-gnu:$$R/lib/aarch64-linux-gnu \
		VK_DRIVER_FILES=$$R/lvp_icd.json EDGELLMD_REQUIRE_GPU=1 qemu-aarch64-static -cpu $(QEMU_CPU) ../../bin/gpu-arm64.test -test.v -test.run 'TestDevices|TestDispatch|TestModelStoriesLogits'

# The committed SPIR-V is what engine/gpu/shaders/build.sh makes of the GLSL
# (glslc; Debian: apt-get install glslc; the cooperative-matrix shaders with
# the Mesa 26 root's glslc): every shader is compiled again into a temporary
# folder and compared byte for byte.
shaders-check: mesa26-root
	@out=$$(mktemp -d); trap 'rm -rf "$$out"' EXIT; \
	OUT=$$out sh engine/gpu/shaders/build.sh || exit 1; \
	bad=0; \
	for f in "$$out"/*.spv; do \
		n=$$(basename "$$f"); \
		if [ ! -f engine/gpu/shaders/$$n ]; then echo "shaders-check: engine/gpu/shaders/$$n is missing: run go generate ./engine/gpu and commit it"; bad=1; \
		elif ! cmp -s "$$f" engine/gpu/shaders/$$n; then echo "shaders-check: engine/gpu/shaders/$$n differs from what $${n%.spv}.comp compiles to: run go generate ./engine/gpu and commit it"; bad=1; fi; \
	done; \
	for f in engine/gpu/shaders/*.spv; do \
		[ -f "$$out/$$(basename "$$f")" ] || { echo "shaders-check: $$f has no .comp"; bad=1; }; \
	done; \
	[ $$bad = 0 ] && echo "shaders-check: $$(ls "$$out" | wc -l) shaders match their GLSL"; exit $$bad

# The GPU engine's tests as binaries (and edgellmd itself), for a GPU
# machine without a Go toolchain: copy bin/ there and run make gpu-check
# (or sh scripts/gpu-check.sh).
gpu-test: build
	CGO_ENABLED=0 $(GO) test -c -trimpath -ldflags "-s -w" -o bin/gpu.test ./engine/gpu
	CGO_ENABLED=0 $(GO) test -c -trimpath -ldflags "-s -w" -o bin/gpu-vk.test ./engine/gpu/internal/vk

# The second Vulkan stack: Debian sid's Mesa 26 lavapipe, which has
# cooperative matrices (tensor-core shaders), and sid's glslc, which
# compiles them; unpacked into $(MESA26_ROOT) without installing anything
# or mounting anything (scripts/mesa26-root.sh says how), once: a later run
# finds it. gpu-test-mesa26 runs the GPU engine's tests there, a device
# without cooperative matrices failing them (EDGELLMD_REQUIRE_COOPMAT=1), and
# checks the binding's cooperative-matrix structs against sid's headers.
MESA26_ROOT ?= bin/mesa26-root
mesa26-root:
	sh scripts/mesa26-root.sh $(MESA26_ROOT)

gpu-test-mesa26: mesa26-root gpu-test
	$(MESA26_ROOT)/run bin/edgellmd devices
	cd engine/gpu && EDGELLMD_REQUIRE_GPU=1 EDGELLMD_REQUIRE_COOPMAT=1 $(abspath $(MESA26_ROOT))/run ../../bin/gpu.test -test.count=1 -test.timeout 15m
	cd engine/gpu/internal/vk && EDGELLMD_REQUIRE_GPU=1 EDGELLMD_VULKAN_INCLUDE=$(abspath $(MESA26_ROOT))/usr/include $(abspath $(MESA26_ROOT))/run ../../../../bin/gpu-vk.test -test.count=1

# On a machine with a real GPU, in under 8 minutes: the device list, the
# GPU engine's tests on the GPU (EDGELLMD_REQUIRE_GPU=1), and bench decode on
# a synthetic model with the 27B model's layer shapes (scripts/gpu-check.sh
# says more; DEVICE=gpu:0 tries it on lavapipe).
gpu-check:
	GO=$(GO) sh scripts/gpu-check.sh

# The coding agents (Claude Code, Codex, Qwen Code, OpenCode), installed
# with Node 22 from npm under bin/agents, each for one non-interactive turn
# against the daemon on a synthetic qwen35 model (scripts/agents-check.sh).
agents-check:
	GO=$(GO) bash scripts/agents-check.sh

# Three daemons behind nginx with packaging/fleet/nginx.conf, the agentic
# trace replayed through it with and without affinity and with a box killed
# (scripts/fleet-check.sh; about 1.5 minutes on 2 cores; needs nginx and python3).
fleet-check:
	GO=$(GO) bash scripts/fleet-check.sh

# A signed apt repository of the amd64 and arm64 .debs for a fleet, under
# bin/apt-repo (public/ is what a web server serves; scripts/apt-repo.sh says
# more; APT_REPO_URL, APT_REPO_KEY). Needs aptly and gpg.
apt-repo:
	GO=$(GO) bash scripts/apt-repo.sh

# The repository from a box's side, as root: a debootstrapped bookworm booted
# with systemd installs from it, upgrades with its config and prefix cache
# kept, pins back, and refuses unsigned and wrongly signed repositories
# (scripts/apt-repo-check.sh).
apt-repo-check:
	GO=$(GO) bash scripts/apt-repo-check.sh

# The Grafana fleet dashboard (packaging/fleet/grafana) against two live
# daemons: every metric its PromQL selects is in their /metrics, promtool
# check metrics passes, and Debian's Prometheus scraping them returns data for
# every panel (scripts/dashboard-check.sh; needs python3, and root or thermal
# zones).
dashboard-check:
	GO=$(GO) bash scripts/dashboard-check.sh

clean:
	rm -rf bin
