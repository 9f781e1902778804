package power

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The expected figures are read off the fake trees' files by hand: see
// testdata/README.md for what each file holds and where its shape comes from.
func TestTelemetryFakeRoots(t *testing.T) {
	const kB = 1024
	tests := []struct {
		root    string
		cpu     CPUReading
		mem     MemoryReading
		load    LoadReading
		zones   []ThermalZone
		gpu     GPUReading
		rails   []PowerRail
		missing []string // substrings, one per Missing line
	}{
		{
			root: "thor-agx",
			// /proc/stat "cpu  30000 0 10000 115000 5000 ...": (30000+10000) of 160000 busy
			cpu: CPUReading{OK: true, Cores: 14, BusyPercent: 25, SinceBoot: true},
			mem: MemoryReading{OK: true, TotalBytes: 131030148 * kB, AvailableBytes: 124587400 * kB,
				UsedBytes: (131030148 - 124587400) * kB, UsedPercent: 100 * float64(131030148-124587400) / 131030148},
			load: LoadReading{OK: true, Load1: 1.25, Load5: 0.93, Load15: 0.61},
			zones: []ThermalZone{
				{"thermal_zone0", "cpu-thermal", true, 59.218},
				{"thermal_zone1", "gpu-thermal", false, 0}, // gated GPU: no reading
				{"thermal_zone2", "soc012-thermal", true, 58.468},
				{"thermal_zone3", "soc345-thermal", true, 60.406},
				{"thermal_zone4", "tj-thermal", true, 60.406},
			},
			gpu: GPUReading{OK: true, Device: "gpu-gpc-0", CurHz: 1575000000, MinHz: 1575000000, MaxHz: 1575000000, Governor: "nvhost_podgov"},
			rails: []PowerRail{
				{"VDD_GPU", "ina3221", "hwmon1", true, 5040, 1021, 5040 * 1021 / 1000.0},
				{"VDD_CPU_SOC_MSS", "ina3221", "hwmon1", true, 5040, 1178, 5040 * 1178 / 1000.0},
				{"VIN_SYS_5V0", "ina3221", "hwmon1", true, 5032, 981, 5032 * 981 / 1000.0},
				{"ina238", "ina238", "hwmon2", true, 19968, 1180, 23562.24}, // power1_input 23562240 µW
			},
		},
		{
			root: "orin-nano-super",
			// "cpu  9000 1000 5000 63000 1000 500 500 ...": 16000 of 80000 busy
			cpu: CPUReading{OK: true, Cores: 6, BusyPercent: 20, SinceBoot: true},
			mem: MemoryReading{OK: true, TotalBytes: 7802176 * kB, AvailableBytes: 5851632 * kB,
				UsedBytes: (7802176 - 5851632) * kB, UsedPercent: 100 * float64(7802176-5851632) / 7802176, SwapTotalBytes: 3901072 * kB},
			load: LoadReading{OK: true, Load1: 0.32, Load5: 0.41, Load15: 0.38},
			zones: []ThermalZone{
				{"thermal_zone0", "cpu-thermal", true, 47.812},
				{"thermal_zone1", "gpu-thermal", true, 46.593},
				{"thermal_zone2", "cv0-thermal", false, 0}, // -256000: sensor off
				{"thermal_zone3", "cv1-thermal", false, 0},
				{"thermal_zone4", "cv2-thermal", false, 0},
				{"thermal_zone5", "soc0-thermal", true, 45.75},
				{"thermal_zone6", "soc1-thermal", true, 45.406},
				{"thermal_zone7", "soc2-thermal", true, 46.125},
				{"thermal_zone8", "tj-thermal", true, 47.812},
			},
			gpu: GPUReading{OK: true, Device: "17000000.gpu", CurHz: 306000000, MinHz: 306000000, MaxHz: 1020000000,
				Governor: "nvhost_podgov", LoadOK: true, LoadPercent: 13.7},
			rails: []PowerRail{
				{"VDD_IN", "ina3221", "hwmon1", true, 5064, 1011, 5064 * 1011 / 1000.0},
				{"VDD_CPU_GPU_CV", "ina3221", "hwmon1", true, 5056, 281, 5056 * 281 / 1000.0},
				{"VDD_SOC", "ina3221", "hwmon1", true, 5064, 295, 5064 * 295 / 1000.0},
			},
		},
		{
			root: "agx-orin",
			cpu:  CPUReading{OK: true, Cores: 12, BusyPercent: 6, SinceBoot: true}, // 12000 of 200000
			mem: MemoryReading{OK: true, TotalBytes: 64302080 * kB, AvailableBytes: 62489012 * kB,
				UsedBytes: (64302080 - 62489012) * kB, UsedPercent: 100 * float64(64302080-62489012) / 64302080, SwapTotalBytes: 32151040 * kB},
			load: LoadReading{OK: true, Load1: 0.08, Load5: 0.12, Load15: 0.10},
			zones: []ThermalZone{
				{"thermal_zone0", "cpu-thermal", true, 42.593},
				{"thermal_zone1", "gpu-thermal", false, 0},
				{"thermal_zone2", "cv0-thermal", false, 0},
				{"thermal_zone3", "cv1-thermal", false, 0},
				{"thermal_zone4", "cv2-thermal", false, 0},
				{"thermal_zone5", "soc0-thermal", true, 39.375},
				{"thermal_zone6", "soc1-thermal", true, 40.468},
				{"thermal_zone7", "soc2-thermal", true, 39.343},
				{"thermal_zone8", "tj-thermal", true, 42.593},
			},
			gpu: GPUReading{OK: true, Device: "17000000.gpu", CurHz: 306000000, MinHz: 306000000, MaxHz: 1300500000,
				Governor: "nvhost_podgov", LoadOK: true, LoadPercent: 0},
			// the second INA3221's NC channels are not rails
			rails: []PowerRail{
				{"VDD_GPU_SOC", "ina3221", "hwmon1", true, 19112, 125, 19112 * 125 / 1000.0},
				{"VDD_CPU_CV", "ina3221", "hwmon1", true, 19112, 21, 19112 * 21 / 1000.0},
				{"VIN_SYS_5V0", "ina3221", "hwmon1", true, 4976, 810, 4976 * 810 / 1000.0},
				{"VDDQ_VDD2_1V8AO", "ina3221", "hwmon2", true, 4984, 60, 4984 * 60 / 1000.0},
			},
		},
		{
			root: "x86",
			cpu:  CPUReading{OK: true, Cores: 8, BusyPercent: 14.2, SinceBoot: true}, // 71000 of 500000
			mem: MemoryReading{OK: true, TotalBytes: 32768000 * kB, AvailableBytes: 24576000 * kB,
				UsedBytes: (32768000 - 24576000) * kB, UsedPercent: 25, SwapTotalBytes: 2097148 * kB},
			load: LoadReading{OK: true, Load1: 2.10, Load5: 1.75, Load15: 1.40},
			zones: []ThermalZone{
				{"thermal_zone0", "acpitz", true, 27.8},
				{"thermal_zone1", "x86_pkg_temp", true, 45},
			},
			missing: []string{"gpu: no GPU devfreq node", "rails: no ina3221/ina238 power monitor"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.root, func(t *testing.T) {
			r := Telemetry(filepath.Join("testdata/root", tt.root))
			if !approx(r.CPU.BusyPercent, tt.cpu.BusyPercent) {
				t.Errorf("CPU busy %v%%, want %v%%", r.CPU.BusyPercent, tt.cpu.BusyPercent)
			}
			r.CPU.BusyPercent, tt.cpu.BusyPercent = 0, 0
			if r.CPU != tt.cpu {
				t.Errorf("CPU = %+v, want %+v", r.CPU, tt.cpu)
			}
			if !approx(r.Memory.UsedPercent, tt.mem.UsedPercent) {
				t.Errorf("memory used %v%%, want %v%%", r.Memory.UsedPercent, tt.mem.UsedPercent)
			}
			r.Memory.UsedPercent, tt.mem.UsedPercent = 0, 0
			if r.Memory != tt.mem {
				t.Errorf("Memory = %+v, want %+v", r.Memory, tt.mem)
			}
			if r.Load != tt.load {
				t.Errorf("Load = %+v, want %+v", r.Load, tt.load)
			}
			if !reflect.DeepEqual(r.Thermal, tt.zones) {
				t.Errorf("Thermal = %+v\nwant %+v", r.Thermal, tt.zones)
			}
			if !approx(r.GPU.LoadPercent, tt.gpu.LoadPercent) {
				t.Errorf("GPU load %v%%, want %v%%", r.GPU.LoadPercent, tt.gpu.LoadPercent)
			}
			r.GPU.LoadPercent, tt.gpu.LoadPercent = 0, 0
			if r.GPU != tt.gpu {
				t.Errorf("GPU = %+v, want %+v", r.GPU, tt.gpu)
			}
			if len(r.Rails) != len(tt.rails) {
				t.Fatalf("Rails = %+v\nwant %+v", r.Rails, tt.rails)
			}
			for i := range r.Rails {
				got, want := r.Rails[i], tt.rails[i]
				if !approx(got.MilliWatts, want.MilliWatts) {
					t.Errorf("rail %s: %v mW, want %v", got.Name, got.MilliWatts, want.MilliWatts)
				}
				got.MilliWatts, want.MilliWatts = 0, 0
				if got != want {
					t.Errorf("rail %d = %+v, want %+v", i, got, want)
				}
			}
			if len(r.Missing) != len(tt.missing) {
				t.Fatalf("Missing = %q, want %d lines like %q", r.Missing, len(tt.missing), tt.missing)
			}
			for i, want := range tt.missing {
				if !strings.Contains(r.Missing[i], want) {
					t.Errorf("Missing[%d] = %q, want it to say %q", i, r.Missing[i], want)
				}
			}
		})
	}
}

func TestTelemetryEmptyRoot(t *testing.T) {
	r := Telemetry(t.TempDir())
	if r.CPU.OK || r.Memory.OK || r.Load.OK || r.GPU.OK || len(r.Thermal) != 0 || len(r.Rails) != 0 {
		t.Errorf("Telemetry of an empty root = %+v, want nothing available", r)
	}
	for _, src := range []string{"cpu:", "memory:", "load:", "thermal:", "gpu:", "rails:"} {
		found := false
		for _, m := range r.Missing {
			found = found || strings.HasPrefix(m, src)
		}
		if !found {
			t.Errorf("Missing = %q has no %q line", r.Missing, src)
		}
	}
}

func TestSamplerMeasuresBetweenSamples(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("proc/stat", "cpu  1000 0 0 9000 0 0 0 0 0 0\ncpu0 1000 0 0 9000 0 0 0 0 0 0\n")
	s := NewSampler(root)
	first := s.Sample(context.Background())
	if !first.CPU.SinceBoot || !approx(first.CPU.BusyPercent, 10) {
		t.Errorf("first sample: %+v, want 10%% since boot", first.CPU)
	}
	// 600 busy and 400 idle ticks later: 60% busy in between.
	write("proc/stat", "cpu  1500 0 100 9400 0 0 0 0 0 0\ncpu0 1500 0 100 9400 0 0 0 0 0 0\n")
	second := s.Sample(context.Background())
	if second.CPU.SinceBoot || !approx(second.CPU.BusyPercent, 60) {
		t.Errorf("second sample: %+v, want 60%% over the interval", second.CPU)
	}
	// Counters that went back mean a reboot: back to since-boot figures.
	write("proc/stat", "cpu  100 0 0 300 0 0 0 0 0 0\n")
	third := s.Sample(context.Background())
	if !third.CPU.SinceBoot || !approx(third.CPU.BusyPercent, 25) {
		t.Errorf("sample after reboot: %+v, want 25%% since boot", third.CPU)
	}
}

func TestRailsEdgeCases(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(root, "sys/class/hwmon", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// hwmon10 sorts after hwmon2; a labelled single-channel chip is named by
	// its label; a labelled channel without a voltage reading is listed, not OK.
	write("hwmon10/name", "ina238")
	write("hwmon10/label", "VIN")
	write("hwmon10/in1_input", "19968")
	write("hwmon10/curr1_input", "1000")
	write("hwmon2/name", "ina3221")
	write("hwmon2/in1_label", "VDD_IN")
	write("hwmon2/curr1_input", "500")
	write("hwmon2/in2_label", "nc")
	write("hwmon2/in2_input", "5000")
	write("hwmon2/curr2_input", "0")
	write("hwmon2/in3_label", "VDD_SOC")
	write("hwmon2/in3_input", "5000")
	write("hwmon2/curr3_input", "32760 ma")
	write("hwmon3/name", "ina226") // no current channel at all
	write("hwmon3/in1_input", "5000")

	var missing []string
	got := readRails(root, func(s string) { missing = append(missing, s) })
	want := []PowerRail{
		{Name: "VDD_IN", Sensor: "ina3221", Hwmon: "hwmon2", OK: false, MilliAmps: 500},
		{Name: "VDD_SOC", Sensor: "ina3221", Hwmon: "hwmon2", OK: true, MilliVolts: 5000, MilliAmps: 32760, MilliWatts: 163800},
		{Name: "VIN", Sensor: "ina238", Hwmon: "hwmon10", OK: true, MilliVolts: 19968, MilliAmps: 1000, MilliWatts: 19968},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("readRails = %+v\nwant %+v", got, want)
	}
	if len(missing) != 0 {
		t.Errorf("missing = %q", missing)
	}
}

func approx(a, b float64) bool { return math.Abs(a-b) < 1e-6 }
