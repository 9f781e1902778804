package gpu

import (
	"encoding/binary"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
)

// The GPU tests run on whatever Vulkan device the machine has: lavapipe in
// CI (mesa-vulkan-drivers), a real GPU under `make gpu-check`. Without a
// loader or a device they skip, naming why; EDGELLMD_REQUIRE_GPU=1 (set by
// .ci/run) turns that skip into a failure, so a missing install step
// cannot pass unseen. EDGELLMD_TEST_DEVICE=gpu:N picks a device; by
// default a real GPU when there is one, else device 0.

var (
	testDevOnce sync.Once
	testDev     *Device
	testDevErr  error
)

func testDevice(t testing.TB) *Device {
	t.Helper()
	testDevOnce.Do(func() {
		sel := os.Getenv("EDGELLMD_TEST_DEVICE")
		if sel == "" {
			sel = "gpu:0"
			if HasGPU() {
				sel = "gpu"
			}
		}
		testDev, testDevErr = Open(sel)
	})
	if testDevErr != nil {
		if os.Getenv("EDGELLMD_REQUIRE_GPU") == "1" {
			t.Fatalf("no Vulkan device, and EDGELLMD_REQUIRE_GPU=1: %v", testDevErr)
		}
		t.Skipf("no Vulkan device (install mesa-vulkan-drivers libvulkan1 for lavapipe): %v", testDevErr)
	}
	return testDev
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testDev != nil {
		testDev.Close()
	}
	os.Exit(code)
}

func TestDevicesAndSelectors(t *testing.T) {
	d := testDevice(t)
	info := d.Info()
	t.Logf("device: %s; host import %v, integer dot %v, subgroup %d, max binding %d MiB", info, info.HostImport, info.IntDot, info.SubgroupSize, info.MaxBuffer>>20)
	infos, err := Devices()
	if err != nil || len(infos) == 0 {
		t.Fatalf("Devices() = %v, %v with a device open", infos, err)
	}
	for _, bad := range []string{"", "GPU", "gpu:", "gpu:-1", "gpu:x", "vulkan", "cuda:0"} {
		if err := ParseSelector(bad); err == nil {
			t.Errorf("ParseSelector(%q) accepted", bad)
		}
	}
	if _, err := Open("gpu:99"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Open(gpu:99) = %v, want an error naming the missing device", err)
	}
	if !HasGPU() {
		if _, err := Open("gpu"); err == nil || !strings.Contains(err.Error(), "no GPU") {
			t.Errorf("Open(gpu) without a real GPU = %v, want an error saying so", err)
		}
	}
}

func TestDispatchUploadDownload(t *testing.T) {
	d := testDevice(t)
	const n = 70000 // more than 65535 workgroups of 1 would need; here 1094 groups of 64
	dev, err := d.NewBuffer(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Free()
	src := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(src[4*i:], math.Float32bits(float32(i)))
	}
	if err := d.Upload(dev.All(), src); err != nil {
		t.Fatal(err)
	}
	r := d.Begin()
	// fill the second half with 2.5: the first half must keep the upload
	half := int64(n / 2)
	r.Dispatch("fill_f32", nil, Groups(int((n-half+63)/64)), []uint32{uint32(n - half), math.Float32bits(2.5)}, dev.Slice(4*half, 4*(n-half)))
	r.Barrier()
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 4*n)
	if err := d.Download(dev.All(), out); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:]))
		want := float32(i)
		if int64(i) >= half {
			want = 2.5
		}
		if got != want {
			t.Fatalf("value %d = %g, want %g", i, got, want)
		}
	}
	// errors stick and name what is wrong
	r = d.Begin()
	r.Dispatch("no_such_shader", nil, Groups(1), nil, dev.All())
	if _, err := r.Submit(); err == nil || !strings.Contains(err.Error(), "no_such_shader") {
		t.Errorf("unknown shader: %v", err)
	}
	r = d.Begin()
	r.Dispatch("fill_f32", nil, Groups(1), nil, dev.Slice(4, 4*n))
	if _, err := r.Submit(); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Errorf("range past the end: %v", err)
	}
}

func TestCopyBandwidth(t *testing.T) {
	d := testDevice(t)
	bw, err := d.CopyBandwidth(8<<20, 4)
	if err != nil {
		t.Fatal(err)
	}
	if bw <= 0 {
		t.Fatalf("bandwidth %g", bw)
	}
	t.Logf("%s: copy bandwidth %.1f GB/s", d.Info().Name, bw/1e9)
	if _, err := d.CopyBandwidth(0, 1); err == nil {
		t.Error("a copy of 0 bytes measured")
	}
}

// BenchmarkRecordDispatch is the host's cost of recording one dispatch
// with its barrier (a forward pass of a 64-layer model records about
// 2,000): what a decode step costs the CPU beside the GPU's own time.
func BenchmarkRecordDispatch(b *testing.B) {
	d := testDevice(b)
	buf, err := d.NewBuffer(4 * 64)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Free()
	const per = 1000
	b.ResetTimer()
	for i := 0; i < b.N; i += per {
		r := d.Begin()
		for j := 0; j < min(per, b.N-i); j++ {
			r.Dispatch("fill_f32", nil, Groups(1), []uint32{64, math.Float32bits(1)}, buf.All())
			r.Barrier()
		}
		b.StopTimer()
		if _, err := r.Submit(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// requireCoopMat is EDGELLMD_REQUIRE_COOPMAT=1, which CI sets for the
// Mesa 26 pass (make gpu-test-mesa26): there a device without cooperative
// matrices fails the tensor-core tests instead of skipping them.
func requireCoopMat() bool { return os.Getenv("EDGELLMD_REQUIRE_COOPMAT") == "1" }

func TestCoopMatCapabilities(t *testing.T) {
	d := testDevice(t)
	info := d.Info()
	t.Logf("cooperative_matrix %v, cooperative_matrix2 %v, %d shapes", info.CoopMat, info.CoopMat2, len(info.MatrixShapes))
	for _, s := range info.MatrixShapes {
		t.Logf("  %s", s)
	}
	if !info.CoopMat {
		if requireCoopMat() {
			t.Fatalf("EDGELLMD_REQUIRE_COOPMAT=1 and %s has no usable cooperative matrices", info.Name)
		}
		if len(info.MatrixShapes) > 0 && !info.CoopMat {
			t.Logf("shapes listed but cooperativeMatrix or vulkanMemoryModel missing: the scalar path runs")
		}
		return
	}
	// Every driver with the extension lists an f16 tile with f32
	// accumulation and an int8 one (both are what the shaders use).
	if _, ok := pickTile(info.MatrixShapes, "f16", "f32", tile{}, false); !ok {
		t.Errorf("no subgroup f16·f16→f32 tile among %v", info.MatrixShapes)
	}
	if _, ok := pickTile(info.MatrixShapes, "s8", "s32", tile{}, false); !ok {
		t.Errorf("no subgroup s8·s8→s32 tile among %v", info.MatrixShapes)
	}
	if requireCoopMat() && !info.CoopMat2 {
		t.Errorf("EDGELLMD_REQUIRE_COOPMAT=1 and no NV2 flexible dimensions: the 16x16x16 tiles cannot be exercised")
	}
}

func TestPickTile(t *testing.T) {
	lavapipe := []MatrixShape{
		{M: 8, N: 8, K: 8, A: "f16", B: "f16", C: "f16", Result: "f16", Scope: "subgroup"},
		{M: 8, N: 8, K: 8, A: "f16", B: "f16", C: "f32", Result: "f32", Scope: "subgroup"},
		{M: 8, N: 8, K: 8, A: "s8", B: "s8", C: "s32", Result: "s32", Scope: "subgroup"},
		{M: 8, N: 8, K: 8, A: "f16", B: "f16", C: "f32", Result: "f32", Scope: "subgroup", Flexible: true, MaxDim: 1024},
	}
	nvidia := []MatrixShape{
		{M: 16, N: 16, K: 16, A: "f16", B: "f16", C: "f32", Result: "f32", Scope: "subgroup"},
		{M: 16, N: 8, K: 16, A: "f16", B: "f16", C: "f32", Result: "f32", Scope: "subgroup"},
		{M: 16, N: 16, K: 32, A: "s8", B: "s8", C: "s32", Result: "s32", Scope: "subgroup"},
		{M: 16, N: 8, K: 32, A: "s8", B: "s8", C: "s32", Result: "s32", Scope: "subgroup"},
		{M: 16, N: 16, K: 16, A: "f16", B: "f16", C: "f32", Result: "f32", Scope: "workgroup"},
	}
	for _, c := range []struct {
		shapes []MatrixShape
		a, c   string
		want   tile
		flex   bool
		got    tile
		ok     bool
	}{
		{lavapipe, "f16", "f32", tile{}, false, tile{8, 8, 8}, true},
		{lavapipe, "s8", "s32", tile{}, false, tile{8, 8, 8}, true},
		{lavapipe, "f16", "f32", tile{16, 16, 16}, true, tile{16, 16, 16}, true},
		{lavapipe, "f16", "f32", tile{12, 16, 16}, true, tile{}, false},
		{lavapipe, "s8", "s32", tile{16, 16, 16}, true, tile{}, false},
		{nvidia, "f16", "f32", tile{}, false, tile{16, 16, 16}, true},
		{nvidia, "s8", "s32", tile{}, false, tile{16, 16, 32}, true},
		{nvidia, "bf16", "f32", tile{}, false, tile{}, false},
	} {
		got, ok := pickTile(c.shapes, c.a, c.c, c.want, c.flex)
		if got != c.got || ok != c.ok {
			t.Errorf("pickTile(%s→%s, %v, flex %v) = %v, %v; want %v, %v", c.a, c.c, c.want, c.flex, got, ok, c.got, c.ok)
		}
	}
}
