package power

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/shirou/gopsutil/v3/common"
	"github.com/shirou/gopsutil/v3/cpu"
	"github.com/shirou/gopsutil/v3/load"
	"github.com/shirou/gopsutil/v3/mem"
)

// Readings is one look at the machine. A source that cannot be read has
// OK false (and zero values) and a line in Missing; it is never an error.
type Readings struct {
	Time    time.Time     `json:"time"`
	CPU     CPUReading    `json:"cpu"`
	Memory  MemoryReading `json:"memory"`
	Load    LoadReading   `json:"load"`
	Thermal []ThermalZone `json:"thermal"`
	GPU     GPUReading    `json:"gpu"`
	Rails   []PowerRail   `json:"rails"`
	// Missing says which sources were not available, and why.
	Missing []string `json:"missing,omitempty"`
}

// CPUReading is how busy the CPUs were.
type CPUReading struct {
	OK bool `json:"ok"`
	// Cores counts the online logical CPUs (power modes take some offline).
	Cores int `json:"cores,omitempty"`
	// BusyPercent is the share of CPU time spent neither idle nor waiting for
	// I/O, since the previous sample of the same Sampler, or since boot
	// (SinceBoot) for a first sample.
	BusyPercent float64 `json:"busy_percent"`
	SinceBoot   bool    `json:"since_boot,omitempty"`
}

// MemoryReading is RAM and swap use. On a Jetson the RAM is shared by CPU
// and GPU, so this is also the GPU's memory.
type MemoryReading struct {
	OK         bool   `json:"ok"`
	TotalBytes uint64 `json:"total_bytes"`
	// AvailableBytes is the kernel's estimate of what can be allocated
	// without swapping (MemAvailable); UsedBytes is Total - Available.
	AvailableBytes uint64  `json:"available_bytes"`
	UsedBytes      uint64  `json:"used_bytes"`
	UsedPercent    float64 `json:"used_percent"`
	SwapTotalBytes uint64  `json:"swap_total_bytes"`
	SwapUsedBytes  uint64  `json:"swap_used_bytes"`
}

// LoadReading is the run-queue load average over 1, 5 and 15 minutes.
type LoadReading struct {
	OK     bool    `json:"ok"`
	Load1  float64 `json:"load1"`
	Load5  float64 `json:"load5"`
	Load15 float64 `json:"load15"`
}

// Sampler reads Readings and remembers the CPU counters of its previous
// sample, so that CPU use is measured over the time between two samples.
type Sampler struct {
	root string

	mu      sync.Mutex
	prevCPU *cpu.TimesStat
}

// NewSampler returns a sampler of the machine under root ("/" on a device).
func NewSampler(root string) *Sampler {
	if root == "" {
		root = "/"
	}
	return &Sampler{root: root}
}

// Telemetry takes one sample of the machine under root; its CPU use is the
// average since boot. Use a Sampler to measure CPU use between samples.
func Telemetry(root string) Readings {
	return NewSampler(root).Sample(context.Background())
}

// Sample reads everything once.
func (s *Sampler) Sample(ctx context.Context) Readings {
	r := Readings{Time: time.Now()}
	// gopsutil reads /proc and /sys under the directories this map names.
	ctx = context.WithValue(ctx, common.EnvKey, common.EnvMap{
		common.HostProcEnvKey: filepath.Join(s.root, "proc"),
		common.HostSysEnvKey:  filepath.Join(s.root, "sys"),
		common.HostEtcEnvKey:  filepath.Join(s.root, "etc"),
	})
	miss := func(why string) { r.Missing = append(r.Missing, why) }

	r.CPU = s.readCPU(ctx, miss)
	r.Memory = s.readMemory(ctx, miss)
	r.Load = s.readLoad(ctx, miss)
	r.Thermal = readThermal(s.root, miss)
	r.GPU = readGPU(s.root, miss)
	r.Rails = readRails(s.root, miss)
	return r
}

func (s *Sampler) readCPU(ctx context.Context, miss func(string)) CPUReading {
	stat := filepath.Join(s.root, "proc/stat")
	// gopsutil reports a missing /proc/stat as "no CPUs", not as an error.
	if _, err := os.Stat(stat); err != nil {
		miss("cpu: " + err.Error())
		return CPUReading{}
	}
	times, err := cpu.TimesWithContext(ctx, false)
	if err != nil || len(times) == 0 {
		miss("cpu: no aggregate \"cpu\" line in " + stat)
		return CPUReading{}
	}
	now := times[0]
	r := CPUReading{OK: true}
	if n, err := cpu.CountsWithContext(ctx, true); err == nil {
		r.Cores = n
	}

	s.mu.Lock()
	prev := s.prevCPU
	s.prevCPU = &now
	s.mu.Unlock()

	busy, total := cpuBusy(now)
	if prev != nil {
		b0, t0 := cpuBusy(*prev)
		if total > t0 {
			busy, total = busy-b0, total-t0
		} else {
			prev = nil // counters went back (a new boot): fall back to since boot
		}
	}
	r.SinceBoot = prev == nil
	if total > 0 {
		r.BusyPercent = 100 * busy / total
	}
	return r
}

// cpuBusy splits CPU time into busy and total the way the kernel's own
// tools do: guest time is already counted in user and nice, and iowait is
// idle time.
func cpuBusy(t cpu.TimesStat) (busy, total float64) {
	total = t.User + t.Nice + t.System + t.Idle + t.Iowait + t.Irq + t.Softirq + t.Steal
	return total - t.Idle - t.Iowait, total
}

func (s *Sampler) readMemory(ctx context.Context, miss func(string)) MemoryReading {
	info := filepath.Join(s.root, "proc/meminfo")
	// gopsutil reports a missing /proc/meminfo as zero memory, not as an error.
	if _, err := os.Stat(info); err != nil {
		miss("memory: " + err.Error())
		return MemoryReading{}
	}
	vm, err := mem.VirtualMemoryWithContext(ctx)
	if err != nil || vm.Total == 0 {
		miss("memory: no MemTotal in " + info)
		return MemoryReading{}
	}
	r := MemoryReading{
		OK:             true,
		TotalBytes:     vm.Total,
		AvailableBytes: vm.Available,
		SwapTotalBytes: vm.SwapTotal,
	}
	if vm.Available <= vm.Total {
		r.UsedBytes = vm.Total - vm.Available
	}
	r.UsedPercent = 100 * float64(r.UsedBytes) / float64(vm.Total)
	if vm.SwapFree <= vm.SwapTotal {
		r.SwapUsedBytes = vm.SwapTotal - vm.SwapFree
	}
	return r
}

func (s *Sampler) readLoad(ctx context.Context, miss func(string)) LoadReading {
	avg := filepath.Join(s.root, "proc/loadavg")
	// Without the file gopsutil would ask this process's kernel (sysinfo),
	// which is not the machine under root.
	if _, err := os.Stat(avg); err != nil {
		miss("load: " + err.Error())
		return LoadReading{}
	}
	a, err := load.AvgWithContext(ctx)
	if err != nil {
		miss("load: " + avg + ": " + err.Error())
		return LoadReading{}
	}
	return LoadReading{OK: true, Load1: a.Load1, Load5: a.Load5, Load15: a.Load15}
}
