package power

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ThermalZone is one /sys/class/thermal zone.
type ThermalZone struct {
	Zone    string  `json:"zone"` // "thermal_zone2"
	Type    string  `json:"type"` // "cpu-thermal", "tj-thermal", ...
	OK      bool    `json:"ok"`
	Celsius float64 `json:"celsius"`
}

// GPUReading is the GPU's clock from its devfreq node, and its load where
// the driver exposes one.
type GPUReading struct {
	OK bool `json:"ok"`
	// Device is the devfreq node: "gpu-gpc-0" on Thor, "17000000.gpu" on Orin.
	Device   string `json:"device,omitempty"`
	CurHz    int64  `json:"cur_hz"`
	MinHz    int64  `json:"min_hz"`
	MaxHz    int64  `json:"max_hz"`
	Governor string `json:"governor,omitempty"`
	// LoadPercent is the busy share the nvgpu driver reports (Orin); Thor's
	// driver has no such file, and LoadOK is false there.
	LoadOK      bool    `json:"load_ok"`
	LoadPercent float64 `json:"load_percent"`
}

// PowerRail is one channel of an INA3221/INA238 power monitor.
type PowerRail struct {
	Name   string `json:"name"`   // the channel's label: "VDD_GPU", "VIN_SYS_5V0", ...
	Sensor string `json:"sensor"` // the hwmon chip: "ina3221", "ina238"
	Hwmon  string `json:"hwmon"`  // "hwmon1"
	OK     bool   `json:"ok"`
	// Bus voltage and current as the driver reports them; MilliWatts is the
	// driver's own power reading where it has one, else volts times amps.
	MilliVolts int64   `json:"millivolts"`
	MilliAmps  int64   `json:"milliamps"`
	MilliWatts float64 `json:"milliwatts"`
}

// Tegra thermal zones whose sensor is powered off (the CV cluster, the GPU
// when rail-gated) read -256000 m°C; tegrastats prints them as "CV0@-256C".
const offlineMilliCelsius = -256000

func readThermal(root string, miss func(string)) []ThermalZone {
	dir := filepath.Join(root, "sys/class/thermal")
	names := numbered(dir, "thermal_zone")
	if len(names) == 0 {
		miss("thermal: no thermal_zone* under " + dir)
		return nil
	}
	zones := make([]ThermalZone, 0, len(names))
	for _, name := range names {
		z := ThermalZone{Zone: name}
		z.Type, _ = readString(filepath.Join(dir, name, "type"))
		// A read can fail (EAGAIN from a gated GPU sensor on Thor): the zone
		// is listed, not available.
		if mc, err := readInt(filepath.Join(dir, name, "temp")); err == nil && mc > offlineMilliCelsius {
			z.OK = true
			z.Celsius = float64(mc) / 1000
		}
		zones = append(zones, z)
	}
	return zones
}

// gpuDevfreq ranks /sys/class/devfreq node names: Thor's GPC domain first,
// then the nvgpu node of older Jetsons ("17000000.gpu" on L4T 36,
// "17000000.ga10b" before). 0 means "not a GPU".
func gpuDevfreq(name string) int {
	switch {
	case name == "gpu-gpc-0":
		return 3
	case strings.HasSuffix(name, ".gpu"):
		return 2
	}
	for _, chip := range []string{"ga10b", "gv11b", "gp10b", "gb10b"} {
		if strings.Contains(name, chip) {
			return 1
		}
	}
	return 0
}

func readGPU(root string, miss func(string)) GPUReading {
	dir := filepath.Join(root, "sys/class/devfreq")
	entries, _ := os.ReadDir(dir)
	best, rank := "", 0
	for _, e := range entries {
		if r := gpuDevfreq(e.Name()); r > rank || (r == rank && r > 0 && e.Name() < best) {
			best, rank = e.Name(), r
		}
	}
	if best == "" {
		miss("gpu: no GPU devfreq node under " + dir)
		return GPUReading{}
	}
	node := filepath.Join(dir, best)
	g := GPUReading{Device: best}
	cur, err := readInt(filepath.Join(node, "cur_freq"))
	if err != nil {
		miss("gpu: " + err.Error())
		return g
	}
	g.OK, g.CurHz = true, cur
	g.MinHz, _ = readInt(filepath.Join(node, "min_freq"))
	g.MaxHz, _ = readInt(filepath.Join(node, "max_freq"))
	g.Governor, _ = readString(filepath.Join(node, "governor"))
	// nvgpu's load is in tenths of a percent.
	for _, p := range []string{"device/load", "load"} {
		if permille, err := readInt(filepath.Join(node, p)); err == nil {
			g.LoadOK, g.LoadPercent = true, float64(permille)/10
			break
		}
	}
	return g
}

var inLabel = regexp.MustCompile(`^in([0-9]+)_label$`)

func readRails(root string, miss func(string)) []PowerRail {
	dir := filepath.Join(root, "sys/class/hwmon")
	var rails []PowerRail
	monitors := 0
	for _, hw := range numbered(dir, "hwmon") {
		chipDir := filepath.Join(dir, hw)
		chip, _ := readString(filepath.Join(chipDir, "name"))
		if !strings.HasPrefix(chip, "ina") {
			continue // fans, CPU temperature sensors, ...
		}
		monitors++
		rails = append(rails, chipRails(chipDir, chip, hw)...)
	}
	if monitors == 0 {
		miss("rails: no ina3221/ina238 power monitor under " + dir)
	}
	return rails
}

// chipRails reads one power monitor. Multi-channel chips (INA3221) label
// their channels in<N>_label; the rails are the labelled channels with a
// current reading, less "sum of shunt voltages" (channel 7, no current of
// its own) and unconnected "NC" channels. A single-channel chip (INA238)
// has no channel labels: bus voltage in1, current curr1, power power1, and
// the rail is named by the chip's label file, else by the chip.
func chipRails(dir, chip, hw string) []PowerRail {
	entries, _ := os.ReadDir(dir)
	var channels []int
	labels := map[int]string{}
	for _, e := range entries {
		m := inLabel.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		label, err := readString(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		labels[n] = label
		channels = append(channels, n)
	}
	sort.Ints(channels)

	if len(channels) == 0 {
		if _, err := os.Stat(filepath.Join(dir, "curr1_input")); err != nil {
			return nil
		}
		name, err := readString(filepath.Join(dir, "label"))
		if err != nil || name == "" {
			name = chip
		}
		return []PowerRail{readRail(dir, chip, hw, name, 1)}
	}
	var rails []PowerRail
	for _, n := range channels {
		label := labels[n]
		if label == "" || strings.EqualFold(label, "NC") || label == "sum of shunt voltages" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "curr"+strconv.Itoa(n)+"_input")); err != nil {
			continue
		}
		rails = append(rails, readRail(dir, chip, hw, label, n))
	}
	return rails
}

func readRail(dir, chip, hw, name string, n int) PowerRail {
	ch := strconv.Itoa(n)
	r := PowerRail{Name: name, Sensor: chip, Hwmon: hw}
	mv, errV := readInt(filepath.Join(dir, "in"+ch+"_input"))
	ma, errA := readInt(filepath.Join(dir, "curr"+ch+"_input"))
	r.MilliVolts, r.MilliAmps = mv, ma
	if uw, err := readInt(filepath.Join(dir, "power"+ch+"_input")); err == nil {
		r.OK, r.MilliWatts = true, float64(uw)/1000
	} else if errV == nil && errA == nil {
		r.OK, r.MilliWatts = true, float64(mv)*float64(ma)/1000
	}
	return r
}

// numbered lists the entries of dir named prefix<N>, in the order of N
// (hwmon10 after hwmon2), skipping names with no number.
func numbered(dir, prefix string) []string {
	entries, _ := os.ReadDir(dir)
	type item struct {
		name string
		n    int
	}
	var items []item
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(rest)
		if err != nil {
			continue
		}
		items = append(items, item{e.Name(), n})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].n < items[j].n })
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = it.name
	}
	return names
}

func readString(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// readInt reads a sysfs integer; some drivers add a unit ("32760 ma").
func readInt(path string) (int64, error) {
	s, err := readString(path)
	if err != nil {
		return 0, err
	}
	field, _, _ := strings.Cut(s, " ")
	n, err := strconv.ParseInt(field, 10, 64)
	if err != nil {
		return 0, &os.PathError{Op: "parse", Path: path, Err: err}
	}
	return n, nil
}
