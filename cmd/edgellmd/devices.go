package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/gpu"
)

// vulkan is what `devices` asks of engine/gpu (a fake in tests: no loader).
type vulkan struct {
	devices func() ([]gpu.Info, error)
	open    func(sel string) (gpu.Info, error) // opens, describes, closes
}

var realVulkan = vulkan{
	devices: gpu.Devices,
	open: func(sel string) (gpu.Info, error) {
		d, err := gpu.Open(sel)
		if err != nil {
			return gpu.Info{}, err
		}
		defer d.Close()
		return d.Info(), nil
	},
}

// deviceLine is one device of `devices --json`.
type deviceLine struct {
	Selector    string `json:"selector"` // gpu:N
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	Real        bool   `json:"gpu"` // a GPU, not Vulkan on the CPU: auto may pick it
	API         string `json:"api"`
	Driver      string `json:"driver,omitempty"`
	MemoryBytes uint64 `json:"memory_bytes"`
	MaxBuffer   uint64 `json:"max_buffer_bytes,omitempty"` // maxStorageBufferRange
	IntDot      bool   `json:"integer_dot_product"`
	HostImport  bool   `json:"host_import"`
	Subgroup    int    `json:"subgroup_size,omitempty"`
	// Cooperative matrices (tensor cores): VK_KHR_cooperative_matrix
	// usable, VK_NV_cooperative_matrix2's flexible dimensions, and the
	// tiles both list.
	CoopMat      bool              `json:"cooperative_matrix"`
	CoopMat2     bool              `json:"cooperative_matrix2"`
	MatrixShapes []gpu.MatrixShape `json:"cooperative_matrix_shapes,omitempty"`
	OpenError    string            `json:"open_error,omitempty"` // why edgellmd cannot use it
}

type devicesDoc struct {
	Devices []deviceLine `json:"devices"`
	Error   string       `json:"error,omitempty"` // no loader, or no driver
	Hint    string       `json:"hint,omitempty"`  // what to install
	Auto    string       `json:"auto"`            // what model.device: auto runs on: "cpu" or "gpu:N"
	GPU     string       `json:"gpu,omitempty"`   // what model.device: gpu opens ("" = none)
}

func cmdDevices(args []string, stdout io.Writer, _ zerolog.Logger) error {
	fs := newFlagSet("devices")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	doc := listDevices(realVulkan)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(doc)
	}
	writeDevices(stdout, doc)
	return nil
}

// Hints for a machine where Vulkan is missing.
const (
	hintLoader = "install the Vulkan loader: apt-get install libvulkan1"
	hintDriver = "install a Vulkan driver: on a Jetson nvidia-l4t-3d-core (L4T), on a desktop NVIDIA GPU the driver's Vulkan ICD " +
		"(e.g. nvidia-vulkan-icd or libnvidia-gl-<version>), for tests mesa-vulkan-drivers (lavapipe, Vulkan on the CPU)"
)

func listDevices(vk vulkan) devicesDoc {
	doc := devicesDoc{Devices: []deviceLine{}, Auto: "cpu"}
	infos, err := vk.devices()
	if err != nil {
		doc.Error = err.Error()
		doc.Hint = hintDriver
		switch msg := doc.Error; {
		case strings.Contains(msg, "vulkan loader"):
			doc.Error = "no Vulkan loader (libvulkan.so.1): " + msg
			doc.Hint = hintLoader + "; then " + hintDriver
		case strings.Contains(msg, "INCOMPATIBLE_DRIVER"):
			doc.Error = "the Vulkan loader found no driver (" + msg + ")"
		}
		return doc
	}
	if len(infos) == 0 {
		doc.Error = "the Vulkan loader sees no device"
		doc.Hint = hintDriver
		return doc
	}
	for _, in := range infos {
		l := deviceLine{Selector: fmt.Sprintf("gpu:%d", in.Index), Name: in.Name, Kind: string(in.Kind), Real: in.Real(),
			API: in.API, MemoryBytes: in.MemoryBytes}
		if o, err := vk.open(l.Selector); err != nil {
			l.OpenError = err.Error()
		} else {
			l.Driver, l.MaxBuffer, l.IntDot, l.HostImport, l.Subgroup = o.Driver, o.MaxBuffer, o.IntDot, o.HostImport, o.SubgroupSize
			l.CoopMat, l.CoopMat2, l.MatrixShapes = o.CoopMat, o.CoopMat2, o.MatrixShapes
		}
		doc.Devices = append(doc.Devices, l)
	}
	// "gpu" is the device Open picks; auto takes it when it is usable.
	if o, err := vk.open("gpu"); err == nil {
		doc.GPU = fmt.Sprintf("gpu:%d", o.Index)
		doc.Auto = doc.GPU
	}
	return doc
}

func writeDevices(w io.Writer, doc devicesDoc) {
	if doc.Error != "" {
		fmt.Fprintf(w, "No Vulkan device: %s\n  %s\n", doc.Error, doc.Hint)
	} else {
		fmt.Fprintln(w, "Vulkan devices:")
	}
	for _, d := range doc.Devices {
		kind := d.Kind
		if d.Kind == string(gpu.KindCPU) {
			kind = "Vulkan on the CPU (lavapipe or another software driver), not a GPU"
		}
		fmt.Fprintf(w, "  %-6s %s\n", d.Selector, d.Name)
		fmt.Fprintf(w, "         %s, Vulkan %s, %s of device memory\n", kind, d.API, mib(d.MemoryBytes))
		if d.OpenError != "" {
			fmt.Fprintf(w, "         cannot be used: %s\n", d.OpenError)
			continue
		}
		fmt.Fprintf(w, "         driver %s; largest tensor per binding %s; integer dot product %s; host memory import %s; subgroup %d\n",
			d.Driver, mib(d.MaxBuffer), yesNo(d.IntDot), yesNo(d.HostImport), d.Subgroup)
		fmt.Fprintf(w, "         cooperative matrices (tensor cores) %s; NV cooperative matrix 2 flexible dimensions %s\n", yesNo(d.CoopMat), yesNo(d.CoopMat2))
		for _, s := range d.MatrixShapes {
			fmt.Fprintf(w, "           %s\n", s)
		}
	}
	switch {
	case doc.GPU != "":
		fmt.Fprintf(w, "auto runs on %s (when the model fits it; else on the CPU, with the reason in the log); gpu opens %s\n", doc.Auto, doc.GPU)
	case len(doc.Devices) > 0:
		fmt.Fprintln(w, "auto runs on the CPU: no GPU here (auto never picks Vulkan on the CPU; --device gpu:N asks for a device by index)")
	default:
		fmt.Fprintln(w, "auto runs on the CPU")
	}
}

func mib(b uint64) string {
	if b >= 10<<30 {
		return fmt.Sprintf("%.0f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%d MiB", b>>20)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
