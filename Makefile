# edgellmd: build, test, benchmark, lint. Pure Go; no cgo.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
BIN     := bin/edgellmd
MODEL   ?= testdata/models/stories260K.gguf

.PHONY: build test e2e bench lint fuzz run serve clean deb test-deb test-arm64

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/edgellmd

# Fast unit tests: what every commit must keep green.
test:
	$(GO) test -count=1 ./...

# Slower end-to-end tests (whole binary, bigger models).
e2e:
	$(GO) test -count=1 -tags e2e -run 'E2E' -timeout 20m ./...

# Go benchmarks (tokens/s and GB/s via b.ReportMetric).
bench:
	$(GO) test -run '^$$' -bench . -benchtime 2x -benchmem ./engine/...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# A short fuzzing pass over the parsers that take outside input.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 30s ./engine/gguf/

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
# goldens. Needs qemu-user-static and libc6-arm64-cross (.ci/run installs them).
QEMU_LD_PREFIX ?= /usr/aarch64-linux-gnu
test-arm64:
	GOARCH=arm64 CGO_ENABLED=0 $(GO) test -c -o bin/tensor-arm64.test ./engine/tensor
	GOARCH=arm64 CGO_ENABLED=0 $(GO) test -c -o bin/model-arm64.test ./engine/model
	cd engine/tensor && QEMU_LD_PREFIX=$(QEMU_LD_PREFIX) qemu-aarch64-static ../../bin/tensor-arm64.test
	cd engine/model && QEMU_LD_PREFIX=$(QEMU_LD_PREFIX) qemu-aarch64-static ../../bin/model-arm64.test -test.run 'TestLogitsMatchLlamaCpp|TestStoriesGolden'

clean:
	rm -rf bin
