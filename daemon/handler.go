package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
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
	srv, err := web.New(web.Options{
		Scheduler:               o.Scheduler,
		ModelName:               o.ModelName,
		ModelPath:               o.ModelPath,
		ModelAliases:            o.ModelAliases,
		SystemFingerprint:       o.SystemFingerprint,
		Template:                o.Template,
		APIKey:                  o.APIKey,
		Public:                  o.Public,
		CORSOrigins:             o.CORSOrigins,
		SpecialTokensInMessages: o.SpecialInMessages,
		MaxBodyBytes:            o.MaxBodyBytes,
		BodyTimeout:             o.BodyTimeout,
		RequestTimeout:          o.RequestTimeout,
		ResponsesStoreSize:      o.ResponsesStore,
		ResponsesStoreTTL:       o.ResponsesTTL,
		ConnLimit:               o.ConnLimit,
		Log:                     o.Log,
		Ready:                   o.Ready,
		Status:                  o.Status,
		Model:                   o.Model,
	})
	if err != nil {
		return nil, err
	}
	if o.Updater != nil {
		web.RegisterAdmin(srv.Router(), web.AdminOptions{APIKey: o.APIKey, Updater: o.Updater, UploadTimeout: o.UploadTimeout, Log: o.Log})
	}
	return srv, nil
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
	draft := cfg.Draft
	if eng := s.d.eng.Load(); eng != nil {
		draft = eng.Draft() // what the next request will use
	}
	set := web.Settings{
		Draft: draft.Clone(),
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
// bundledModelNote is said where the user sees answers of the bundled
// model: the log line at start and the status page.
const bundledModelNote = "this is the bundled 260K-parameter test model (stories260K, trained on children's stories): " +
	"it writes story fragments, not answers; set model.path (or serve --model) to a real model, such as a Qwen3 GGUF"

// modelNote is what the status page says about the model file: a warning
// for the bundled test model, "" for any other.
func modelNote(path string) string {
	if filepath.Base(path) == BundledModel {
		return bundledModelNote
	}
	return ""
}

func modelInfo(path, arch string) (web.ModelInfo, error) {
	info := web.ModelInfo{Path: path, Arch: arch, Note: modelNote(path)}
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
	if ft := f.FileType(); ft != "" {
		info.Quantization = ft // the preset, as llama.cpp names it: "Q4_K_M"
	}
	return info, nil
}

// reloadProblem is the last reload while it needs someone's attention: the
// file was refused, or changed keys wait for a restart; nil otherwise.
func (d *Daemon) reloadProblem() *ReloadStatus {
	rl := d.LastReload()
	if rl == nil || (rl.Err == "" && len(rl.RestartRequired) == 0) {
		return nil
	}
	return rl
}

// healthWithReload answers /health through the API's handler and adds
// "last_reload" to its JSON object: a config edit that was refused, or that
// needs a restart, shows there until it is fixed. A handler that already
// writes "last_reload" is left alone.
func healthWithReload(w http.ResponseWriter, r *http.Request, h http.Handler, rl *ReloadStatus) {
	rec := &bufferedResponse{header: http.Header{}, status: http.StatusOK}
	h.ServeHTTP(rec, r)
	body := rec.body.Bytes()
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) == nil && obj != nil {
		if _, ok := obj["last_reload"]; !ok {
			if raw, err := json.Marshal(rl); err == nil {
				obj["last_reload"] = raw
				if b, err := json.Marshal(obj); err == nil {
					body = append(b, '\n')
				}
			}
		}
	}
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(rec.status)
	w.Write(body)
}

// bufferedResponse holds a handler's response so that it can be amended.
type bufferedResponse struct {
	header      http.Header
	status      int
	wroteHeader bool
	body        bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(status int) {
	if !b.wroteHeader {
		b.status, b.wroteHeader = status, true
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	b.wroteHeader = true
	return b.body.Write(p)
}
