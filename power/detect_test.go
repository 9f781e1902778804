package power

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDetectFakeRoots(t *testing.T) {
	tests := []struct {
		root string
		want Board
	}{
		{"thor-agx", Board{
			Jetson:     true,
			Model:      "NVIDIA Jetson AGX Thor Developer Kit",
			Compatible: []string{"nvidia,p4071-0000+p3834-0008", "nvidia,p3834-0008", "nvidia,tegra264"},
			SoC:        "tegra264", Family: "Thor", L4T: "38.2.0",
		}},
		{"orin-nano-super", Board{
			Jetson:     true,
			Model:      "NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super",
			Compatible: []string{"nvidia,p3768-0000+p3767-0005-super", "nvidia,p3767-0005", "nvidia,tegra234"},
			SoC:        "tegra234", Family: "Orin", L4T: "36.4.3",
		}},
		{"agx-orin", Board{
			Jetson:     true,
			Model:      "NVIDIA Jetson AGX Orin Developer Kit",
			Compatible: []string{"nvidia,p3737-0000+p3701-0005", "nvidia,p3701-0005", "nvidia,tegra234"},
			SoC:        "tegra234", Family: "Orin", L4T: "36.4.3",
		}},
		{"x86", Board{}},
	}
	for _, tt := range tests {
		t.Run(tt.root, func(t *testing.T) {
			got, err := Detect(filepath.Join("testdata/root", tt.root))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Detect = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestDetectEdgeCases(t *testing.T) {
	write := func(t *testing.T, root, name, content string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("device tree of another arm board", func(t *testing.T) {
		root := t.TempDir()
		write(t, root, dtModelFile, "Raspberry Pi 4 Model B Rev 1.4\x00")
		write(t, root, dtCompatibleFile, "raspberrypi,4-model-b\x00brcm,bcm2711\x00")
		b, err := Detect(root)
		if err != nil {
			t.Fatal(err)
		}
		if b.Jetson || b.SoC != "" || b.Model != "Raspberry Pi 4 Model B Rev 1.4" {
			t.Errorf("Detect = %+v, want a non-Jetson with its model", b)
		}
	})

	t.Run("device tree only under /sys/firmware", func(t *testing.T) {
		root := t.TempDir()
		write(t, root, sysDTModelFile, "NVIDIA Jetson AGX Thor Developer Kit\x00")
		write(t, root, sysDTCompatibleFile, "nvidia,p4071-0000+p3834-0008\x00nvidia,p3834-0008\x00nvidia,tegra264\x00")
		b, err := Detect(root)
		if err != nil {
			t.Fatal(err)
		}
		if !b.Jetson || b.Family != "Thor" || b.L4T != "" {
			t.Errorf("Detect = %+v, want a Thor with no L4T release", b)
		}
	})

	t.Run("unknown tegra is still a Jetson", func(t *testing.T) {
		root := t.TempDir()
		write(t, root, dtCompatibleFile, "nvidia,p9999-0000\x00nvidia,tegra999\x00")
		b, err := Detect(root)
		if err != nil {
			t.Fatal(err)
		}
		if !b.Jetson || b.SoC != "tegra999" || b.Family != "" {
			t.Errorf("Detect = %+v", b)
		}
	})

	t.Run("malformed nv_tegra_release names the file", func(t *testing.T) {
		root := t.TempDir()
		write(t, root, dtCompatibleFile, "nvidia,tegra234\x00")
		write(t, root, tegraReleaseFile, "Jetson Linux 36.4\n")
		_, err := Detect(root)
		if err == nil || !strings.Contains(err.Error(), "nv_tegra_release") || !strings.Contains(err.Error(), "REVISION") {
			t.Errorf("Detect error = %v, want one naming the file and the expected format", err)
		}
	})
}

func TestParseTegraRelease(t *testing.T) {
	tests := []struct{ line, want string }{
		{"# R38 (release), REVISION: 2.0, GCID: 41844464, BOARD: generic, EABI: aarch64, DATE: Fri Aug 22 00:55:42 UTC 2025", "38.2.0"},
		{"# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64, DATE: Wed Jan  8 01:49:37 UTC 2025\n# KERNEL_VARIANT: oot\n", "36.4.3"},
		{"# R32 (release), REVISION: 6.1, GCID: 27863751, BOARD: t210ref, EABI: aarch64", "32.6.1"},
		{"# R39 (release), REVISION: 2.0, GCID: 45755727, BOARD: generic, EABI: aarch64, DATE: Mon Jun  1 09:28:48 PM UTC 2026", "39.2.0"},
	}
	for _, tt := range tests {
		got, err := parseTegraRelease([]byte(tt.line))
		if err != nil || got != tt.want {
			t.Errorf("parseTegraRelease(%q) = %q, %v; want %q", tt.line, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "R36.4.3", "# R36 (release)"} {
		if got, err := parseTegraRelease([]byte(bad)); err == nil {
			t.Errorf("parseTegraRelease(%q) = %q, want an error", bad, got)
		}
	}
}
