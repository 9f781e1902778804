package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gpu"
)

// TestDevicesCommand lists what this machine's Vulkan loader sees: in CI
// lavapipe (mesa-vulkan-drivers), which auto never picks; with no loader
// or driver, the reason and what to install.
func TestDevicesCommand(t *testing.T) {
	infos, lerr := gpu.Devices()
	out, errOut, code := run(t, "devices")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	jsonOut, errOut, code := run(t, "devices", "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errOut)
	}
	var doc devicesDoc
	if err := json.Unmarshal([]byte(jsonOut), &doc); err != nil {
		t.Fatalf("--json output %q: %v", jsonOut, err)
	}
	if lerr != nil {
		if !strings.Contains(out, "No Vulkan device") || !strings.Contains(out, "install") || doc.Auto != "cpu" || doc.Error == "" {
			t.Errorf("no Vulkan (%v):\n%s\n%s", lerr, out, jsonOut)
		}
		return
	}
	if len(doc.Devices) != len(infos) {
		t.Fatalf("--json lists %d devices, the loader %d", len(doc.Devices), len(infos))
	}
	anyGPU := false
	for i, in := range infos {
		anyGPU = anyGPU || in.Real()
		sel := fmt.Sprintf("gpu:%d", i)
		if !strings.Contains(out, sel+"  "+in.Name) || doc.Devices[i].Selector != sel || doc.Devices[i].Name != in.Name {
			t.Errorf("%s %s missing:\n%s", sel, in.Name, out)
		}
		if d := doc.Devices[i]; d.OpenError == "" && (d.Driver == "" || d.MaxBuffer == 0) {
			t.Errorf("%s: no driver or binding limit: %+v", sel, d)
		}
	}
	if !anyGPU && (doc.Auto != "cpu" || doc.GPU != "" || !strings.Contains(out, "auto runs on the CPU: no GPU here")) {
		t.Errorf("only Vulkan on the CPU here, yet auto is %q:\n%s", doc.Auto, out)
	}
	if anyGPU && !strings.HasPrefix(doc.Auto, "gpu:") {
		t.Errorf("a GPU here, yet auto is %q", doc.Auto)
	}
}

// TestDevicesNoDriver: a loader that finds no driver (none named by
// VK_ICD_FILENAMES) says so and names the packages.
func TestDevicesNoDriver(t *testing.T) {
	t.Setenv("VK_ICD_FILENAMES", "/nonexistent/icd.json")
	t.Setenv("VK_DRIVER_FILES", "/nonexistent/icd.json")
	out, errOut, code := run(t, "devices")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"No Vulkan device", "nvidia-l4t-3d-core", "mesa-vulkan-drivers", "auto runs on the CPU"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestDevicesListing(t *testing.T) {
	lavapipe := gpu.Info{Index: 0, Name: "llvmpipe (LLVM 15.0.6, 256 bits)", Kind: gpu.KindCPU, API: "1.3.230", MemoryBytes: 2 << 30}
	thor := gpu.Info{Index: 1, Name: "NVIDIA Thor", Kind: gpu.KindIntegrated, API: "1.4.303", MemoryBytes: 122 << 30}
	opened := func(in gpu.Info) gpu.Info {
		in.Driver, in.MaxBuffer, in.SubgroupSize, in.IntDot = "NVIDIA 580.00", 4<<30, 32, true
		return in
	}
	for _, c := range []struct {
		name string
		vk   vulkan
		auto string
		want []string
	}{
		{"no loader", vulkan{devices: func() ([]gpu.Info, error) {
			return nil, errors.New("vulkan loader: libvulkan.so.1: cannot open shared object file: No such file or directory")
		}}, "cpu", []string{"No Vulkan device: no Vulkan loader (libvulkan.so.1)", "apt-get install libvulkan1", "nvidia-l4t-3d-core", "auto runs on the CPU"}},
		{"no device", vulkan{devices: func() ([]gpu.Info, error) { return nil, nil }},
			"cpu", []string{"the Vulkan loader sees no device", "mesa-vulkan-drivers"}},
		{"lavapipe and a GPU", vulkan{
			devices: func() ([]gpu.Info, error) { return []gpu.Info{lavapipe, thor}, nil },
			open: func(sel string) (gpu.Info, error) {
				switch sel {
				case "gpu:0":
					return gpu.Info{}, errors.New("GPU llvmpipe: the driver lacks shaderInt8, which the shaders need")
				case "gpu:1", "gpu":
					return opened(thor), nil
				}
				return gpu.Info{}, fmt.Errorf("no %s", sel)
			}}, "gpu:1", []string{"gpu:0  llvmpipe", "cannot be used: GPU llvmpipe: the driver lacks shaderInt8", "gpu:1  NVIDIA Thor",
			"integrated GPU, Vulkan 1.4.303, 122 GiB of device memory", "driver NVIDIA 580.00; largest tensor per binding 4096 MiB",
			"auto runs on gpu:1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := listDevices(c.vk)
			var b strings.Builder
			writeDevices(&b, doc)
			if doc.Auto != c.auto {
				t.Errorf("auto = %q, want %q", doc.Auto, c.auto)
			}
			for _, w := range c.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}
