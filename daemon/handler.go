package daemon

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/tensor"
	"github.com/edgellmd/edgellmd/power"
	"github.com/edgellmd/edgellmd/web"
)

// newWebHandler builds the HTTP API (package web) over the scheduler.
func newWebHandler(o handlerOptions) (http.Handler, error) {
	return web.New(web.Options{
		Scheduler:      o.Scheduler,
		ModelName:      o.ModelName,
		ModelPath:      o.ModelPath,
		Template:       o.Template,
		APIKey:         o.APIKey,
		MaxBodyBytes:   o.MaxBodyBytes,
		RequestTimeout: o.RequestTimeout,
		Log:            o.Log,
		Ready:          o.Ready,
		Status:         o.Status,
		Model:          o.Model,
	})
}

// statusSource gives the status page and /metrics the daemon's view: the
// power controller, the machine's telemetry and the settings in force.
type statusSource struct {
	d *Daemon

	mu      sync.Mutex
	sampler *power.Sampler
	last    power.Readings
}

// telemetryMaxAge is how long a telemetry sample is reused: the page polls
// every 2 s and Prometheus scrapes too, and each sample reads sysfs.
const telemetryMaxAge = time.Second

func newStatusSource(d *Daemon) *statusSource {
	return &statusSource{d: d, sampler: power.NewSampler("/")}
}

func (s *statusSource) Power() (power.Status, bool) {
	ctl := s.d.Power()
	if ctl == nil {
		return power.Status{}, false
	}
	return ctl.Status(), true
}

func (s *statusSource) Telemetry(ctx context.Context) power.Readings {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.last.Time) >= telemetryMaxAge {
		s.last = s.sampler.Sample(ctx)
	}
	return s.last
}

func (s *statusSource) Settings() web.Settings {
	cfg := s.d.Config()
	set := web.Settings{
		Draft: web.DraftSettings{Mode: cfg.Draft.Mode, Steps: cfg.Draft.Steps, TopK: cfg.Draft.TopK,
			VerifyNodes: cfg.Draft.VerifyNodes, Drafters: cfg.Draft.Drafters},
		Cache: web.CacheSettings{Dir: cfg.Cache.Dir, MaxBytes: int64(cfg.Cache.MaxBytes),
			MaxDiskBytes: int64(cfg.Cache.MaxDiskBytes), Persist: cfg.Cache.Persist},
	}
	if rl := s.d.LastReload(); rl != nil {
		set.LastReload = &web.Reload{At: rl.At, Err: rl.Err, Applied: slices.Clone(rl.Applied),
			RestartRequired: slices.Clone(rl.RestartRequired)}
	}
	return set
}

// modelInfo describes the model file for the status page: its size, and
// its quantization as the tensor type that holds most of its bytes.
func modelInfo(path, arch string) (web.ModelInfo, error) {
	info := web.ModelInfo{Path: path, Arch: arch}
	st, err := os.Stat(path)
	if err != nil {
		return info, fmt.Errorf("model info: %w", err)
	}
	info.FileBytes, info.MappedBytes = st.Size(), st.Size() // the engine maps the whole file
	f, err := gguf.Open(path)
	if err != nil {
		return info, fmt.Errorf("model info: %w", err)
	}
	defer f.Close()
	bytesByType := map[tensor.DType]int64{}
	for _, t := range f.Tensors {
		bytesByType[t.Type] += t.Size
		info.Parameters += t.Elems()
	}
	var most int64
	for dt, n := range bytesByType {
		if n > most || (n == most && dt.String() < info.Quantization) {
			most, info.Quantization = n, dt.String()
		}
	}
	return info, nil
}
