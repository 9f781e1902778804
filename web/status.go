package web

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/speculative"
	"github.com/edgellmd/edgellmd/power"
)

// StatusSource is what the status page and /metrics learn from outside
// the HTTP server: the power controller, the machine's telemetry and the
// settings in force. The daemon implements it; its methods are called on
// every poll and scrape, from several goroutines, and must be cheap.
type StatusSource interface {
	// Power is the power-mode controller's status; ok is false while no
	// controller runs.
	Power() (st power.Status, ok bool)
	// Telemetry is a recent look at the machine.
	Telemetry(ctx context.Context) power.Readings
	// Settings are the hot-reloadable settings in force and the last reload.
	Settings() Settings
}

// Settings are the configuration figures the status page shows.
type Settings struct {
	Draft      DraftSettings `json:"draft"`
	Cache      CacheSettings `json:"cache"`
	LastReload *Reload       `json:"last_reload,omitempty"`
}

// DraftSettings are the speculative-decoding parameters in force: the
// engine's own type, with its JSON names.
type DraftSettings = speculative.Config

// CacheSettings are the prefix cache's configured bounds.
type CacheSettings struct {
	Dir          string `json:"dir,omitempty"`
	MaxBytes     int64  `json:"max_bytes"`
	MaxDiskBytes int64  `json:"max_disk_bytes"`
	Persist      bool   `json:"persist"`
}

// Reload is the outcome of the last configuration reload.
type Reload struct {
	At              time.Time `json:"at"`
	Err             string    `json:"error,omitempty"` // why the file was refused
	Applied         []string  `json:"applied,omitempty"`
	RestartRequired []string  `json:"restart_required,omitempty"`
}

// ModelInfo describes the served model file for the status page.
type ModelInfo struct {
	Path string `json:"path"`
	Arch string `json:"arch"`
	// Quantization names the weights' type: the file's preset from
	// general.file_type as llama.cpp names it ("Q4_K_M", "Q8_0"), or
	// without one the type holding most of the tensor bytes ("NVFP4").
	Quantization string `json:"quantization"`
	FileBytes    int64  `json:"file_bytes"`
	// MappedBytes is how much of the file is memory-mapped (the whole file:
	// weights are never copied to the heap).
	MappedBytes int64 `json:"mapped_bytes"`
	Parameters  int64 `json:"parameters,omitempty"`
	// Note is a warning about the model for whoever reads its answers
	// (the bundled test model writes story fragments).
	Note string `json:"note,omitempty"`
}

//go:embed static
var staticFiles embed.FS

// statusRoutes mounts the status page, its assets, /status.json and
// /metrics, behind the API key unless Options.Public opens them (auth.go).
func (s *Server) statusRoutes() {
	static, _ := fs.Sub(staticFiles, "static") // the folder is embedded: cannot fail
	files := http.StripPrefix("/static/", http.FileServerFS(static))
	page := s.requirePageKey
	s.router.Handle("/", page(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, static, "index.html")
	}))).Methods(http.MethodGet, http.MethodHead)
	s.router.PathPrefix("/static/").Handler(page(files)).Methods(http.MethodGet, http.MethodHead)
	s.router.Handle("/status.json", page(http.HandlerFunc(s.statusJSON))).Methods(http.MethodGet, http.MethodHead)
	s.router.Handle("/metrics", s.requireMetricsKey(s.metrics.handler())).Methods(http.MethodGet, http.MethodHead)
}

// statusBook keeps the last minutes of finished requests and the last
// errors, for the page's percentiles and charts.
type statusBook struct {
	mu       sync.Mutex
	since    time.Time       // when the book was opened (the server started)
	requests []requestSample // oldest first, within statusWindow
	errors   []errorEntry    // newest last, at most maxErrors
	total    int64
	failed   int64
	draft    int64 // speculative tokens proposed and accepted, and verify steps with a draft
	accepted int64
	drafts   int64
	queried  int64 // prompt tokens of generations, and those restored from the prefix cache
	cached   int64
}

// cacheTokens are the prompt tokens of the generations run and those the
// prefix cache served.
func (b *statusBook) cacheTokens() (queried, cached int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.queried, b.cached
}

type requestSample struct {
	at           time.Time // when it finished
	ttft, tpot   time.Duration
	e2e          time.Duration
	promptTokens int
	outputTokens int
}

type errorEntry struct {
	Time      time.Time `json:"time"`
	RequestID string    `json:"request_id"`
	Method    string    `json:"method"`
	Path      string    `json:"path"`
	Status    int       `json:"status"`
	Message   string    `json:"message"`
}

const (
	statusWindow   = 15 * time.Minute // how far back the charts reach
	percentileSpan = 5 * time.Minute  // the p50/p90 figures' window
	rateSpan       = time.Minute      // tokens/s is averaged over this
	seriesStep     = 10 * time.Second
	maxSamples     = 4096
	maxErrors      = 20
	maxErrorText   = 200 // bytes of a client's string (path, message) an error entry keeps
)

// clientText readies a string a client may have written (a path, a model
// name an error repeats) for the status page: what does not print
// (control and format characters such as bidi overrides, invalid UTF-8) is
// written as a Go escape, and the text is cut to at most maxBytes at a
// character boundary, "…" marking the cut. The page sets it as text, never
// as markup.
func clientText(s string, maxBytes int) string {
	cut := "…"
	if maxBytes < len(cut) {
		cut = ""
	}
	var b strings.Builder
	fit := 0 // the length at the last piece boundary that leaves room for cut
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		piece := s[i : i+size]
		switch {
		case r == utf8.RuneError && size == 1:
			piece = fmt.Sprintf(`\x%02x`, s[i])
		case !unicode.IsGraphic(r):
			piece = strings.Trim(strconv.QuoteRuneToASCII(r), "'")
		}
		if b.Len()+len(piece) > maxBytes {
			return b.String()[:fit] + cut
		}
		b.WriteString(piece)
		if b.Len() <= maxBytes-len(cut) {
			fit = b.Len()
		}
		i += size
	}
	return b.String()
}

func (b *statusBook) observe(now time.Time, id, method, path string, rec *record, status int, elapsed time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	// Errors of other routes below 500 (a 404 from a scanner, a 401) are
	// the client's business and would push the real ones out.
	failed := status >= 500 || (rec.generation && status >= 400)
	if failed || (rec.generation && rec.err != "") {
		msg := rec.err
		if msg == "" {
			msg = http.StatusText(status)
		}
		b.errors = append(b.errors, errorEntry{Time: now, RequestID: clientText(id, maxErrorText), Method: clientText(method, maxErrorText),
			Path: clientText(path, maxErrorText), Status: status, Message: clientText(msg, maxErrorText)})
		if len(b.errors) > maxErrors {
			b.errors = slices.Delete(b.errors, 0, len(b.errors)-maxErrors)
		}
	}
	if !rec.generation {
		return
	}
	b.total++
	b.draft += rec.spec.Drafted
	b.accepted += rec.spec.Accepted
	b.drafts += rec.spec.Drafts
	b.queried += int64(rec.promptTokens)
	b.cached += int64(rec.cachedTokens)
	if failed {
		b.failed++
	}
	if !rec.ran() {
		return
	}
	b.requests = append(b.requests, requestSample{at: now, ttft: rec.ttft, tpot: rec.tpot, e2e: elapsed,
		promptTokens: rec.promptTokens, outputTokens: rec.outputTokens})
	b.trim(now)
}

// trim drops samples older than the window, and the oldest beyond the cap.
func (b *statusBook) trim(now time.Time) {
	i := 0
	for i < len(b.requests) && (now.Sub(b.requests[i].at) > statusWindow || len(b.requests)-i > maxSamples) {
		i++
	}
	b.requests = slices.Delete(b.requests, 0, i)
}

// requestStatus is the "requests" part of /status.json.
type requestStatus struct {
	Running         int     `json:"running"`
	Waiting         int     `json:"waiting"`
	Total           int64   `json:"total"`
	Failed          int64   `json:"failed"`
	WindowSeconds   float64 `json:"window_seconds"` // of the percentiles
	Finished        int     `json:"finished"`       // in that window
	TTFTP50ms       float64 `json:"ttft_p50_ms"`
	TTFTP90ms       float64 `json:"ttft_p90_ms"`
	TPOTP50ms       float64 `json:"tpot_p50_ms"`
	TPOTP90ms       float64 `json:"tpot_p90_ms"`
	TokensPerSecond float64 `json:"tokens_per_second"` // output tokens over the last minute
	// Series are per-step figures over the last minutes, oldest first, for
	// the page's charts.
	SeriesStepSeconds float64       `json:"series_step_seconds"`
	Series            []seriesPoint `json:"series"`
}

type seriesPoint struct {
	Time            time.Time `json:"t"`
	Requests        int       `json:"requests"`
	TokensPerSecond float64   `json:"tokens_per_second"`
	TTFTP50ms       float64   `json:"ttft_p50_ms"`
	TPOTP50ms       float64   `json:"tpot_p50_ms"`
}

func (b *statusBook) snapshot(now time.Time) (requestStatus, []errorEntry, [3]int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.trim(now)
	rs := requestStatus{Total: b.total, Failed: b.failed, WindowSeconds: percentileSpan.Seconds(), SeriesStepSeconds: seriesStep.Seconds()}
	var ttft, tpot []time.Duration
	var recentTokens int
	for _, r := range b.requests {
		age := now.Sub(r.at)
		if age <= percentileSpan {
			rs.Finished++
			if r.ttft > 0 {
				ttft = append(ttft, r.ttft)
			}
			if r.tpot > 0 {
				tpot = append(tpot, r.tpot)
			}
		}
		if age <= rateSpan {
			recentTokens += r.outputTokens
		}
	}
	rs.TTFTP50ms, rs.TTFTP90ms = msec(percentile(ttft, 50)), msec(percentile(ttft, 90))
	rs.TPOTP50ms, rs.TPOTP90ms = msec(percentile(tpot, 50)), msec(percentile(tpot, 90))
	rs.TokensPerSecond = float64(recentTokens) / min(rateSpan, max(now.Sub(b.since), time.Second)).Seconds()

	// Steps end at now; a request counts in the step it finished in.
	steps := int(statusWindow / seriesStep)
	start := now.Add(-time.Duration(steps) * seriesStep)
	rs.Series = make([]seriesPoint, steps)
	ttfts := make([][]time.Duration, steps)
	tpots := make([][]time.Duration, steps)
	for i := range rs.Series {
		rs.Series[i].Time = start.Add(time.Duration(i+1) * seriesStep)
	}
	for _, r := range b.requests {
		i := int(r.at.Sub(start) / seriesStep)
		if i < 0 || i >= steps {
			continue
		}
		p := &rs.Series[i]
		p.Requests++
		p.TokensPerSecond += float64(r.outputTokens) / seriesStep.Seconds()
		if r.ttft > 0 {
			ttfts[i] = append(ttfts[i], r.ttft)
		}
		if r.tpot > 0 {
			tpots[i] = append(tpots[i], r.tpot)
		}
	}
	for i := range rs.Series {
		rs.Series[i].TTFTP50ms = msec(percentile(ttfts[i], 50))
		rs.Series[i].TPOTP50ms = msec(percentile(tpots[i], 50))
	}
	errs := slices.Clone(b.errors)
	slices.Reverse(errs) // newest first
	return rs, errs, [3]int64{b.draft, b.accepted, b.drafts}
}

// percentile is the nearest-rank p-th percentile of ds (0 for none).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := (p*len(s) + 99) / 100 // ceil(p/100 * n), 1-based
	return s[max(rank, 1)-1]
}

// statusDoc is /status.json.
type statusDoc struct {
	Time          time.Time       `json:"time"`
	Started       time.Time       `json:"started"`
	UptimeSeconds float64         `json:"uptime_seconds"`
	Ready         bool            `json:"ready"`
	Power         *power.Status   `json:"power"` // null while no controller runs
	Machine       *power.Readings `json:"machine"`
	Model         modelStatus     `json:"model"`
	Device        *deviceStatus   `json:"device"` // null without an engine
	Cache         cacheStatus     `json:"cache"`
	Speculative   specStatus      `json:"speculative"`
	Requests      requestStatus   `json:"requests"`
	// Sequences are the generations in flight, longest-running first.
	Sequences []sequenceStatus `json:"sequences"`
	// Memory is the sequence states' memory against engine.memory_budget;
	// null without an engine.
	Memory *memoryStatus `json:"memory"`
	Errors []errorEntry  `json:"errors"`
	// Broken is why the engine runs nothing more (a forward pass
	// panicked: engine.ErrBroken), "" while it works.
	Broken string `json:"broken,omitempty"`
}

type modelStatus struct {
	Name          string `json:"name"`
	ContextLength int    `json:"context_length"`
	ModelInfo
}

// deviceStatus is what the engine runs on: the CPU, or a GPU through
// Vulkan with its driver and the device memory edgellmd holds.
type deviceStatus struct {
	Engine   string `json:"engine"`   // cpu or vulkan
	Selector string `json:"selector"` // model.device: auto, cpu, gpu, gpu:N
	Name     string `json:"name"`
	Kind     string `json:"kind,omitempty"`
	API      string `json:"api,omitempty"`
	Driver   string `json:"driver,omitempty"`
	// Device memory (GPU only; 0 on the CPU, whose memory is the machine's).
	MemoryTotalBytes int64  `json:"memory_total_bytes"`
	MemoryUsedBytes  int64  `json:"memory_used_bytes"`
	MaxBufferBytes   int64  `json:"max_buffer_bytes,omitempty"`
	Note             string `json:"note,omitempty"` // why auto runs on the CPU
	// The GPU's matrix path: scalar or coopmat (tensor cores) with its
	// tiles; whether the weights are the mapped file's pages.
	MatMul         string `json:"gpu_matmul,omitempty"`
	MatMulTiles    string `json:"gpu_matmul_tiles,omitempty"`
	WeightsInPlace bool   `json:"weights_in_place,omitempty"`
}

func newDeviceStatus(d engine.DeviceInfo) *deviceStatus {
	return &deviceStatus{Engine: d.Engine, Selector: d.Selector, Name: d.Name, Kind: d.Kind, API: d.API, Driver: d.Driver,
		MemoryTotalBytes: d.MemoryTotalBytes, MemoryUsedBytes: d.MemoryUsedBytes, MaxBufferBytes: d.MaxBufferBytes, Note: d.Note,
		MatMul: d.MatMul, MatMulTiles: d.MatMulTiles, WeightsInPlace: d.WeightsInPlace}
}

// cacheStatus is the prefix cache's state: the engine's figures (RAM and
// disk, what was restored at start) and the prompt tokens requests asked
// for and got from it since the server started.
type cacheStatus struct {
	Enabled         bool    `json:"enabled"`
	Entries         int64   `json:"entries"`
	RAMBytes        int64   `json:"ram_bytes"`
	DiskEntries     int64   `json:"disk_entries"`
	DiskBytes       int64   `json:"disk_bytes"`
	Restoring       bool    `json:"restoring"`
	RestoredEntries int64   `json:"restored_entries"`
	RestoreSeconds  float64 `json:"restore_seconds"`
	SkippedRecords  int64   `json:"skipped_records"`
	// Persistence: snapshots not written (a full disk among the reasons),
	// whether the last write failed, and the last failure.
	DroppedWrites  int64   `json:"dropped_writes"`
	PersistFailing bool    `json:"persist_failing"`
	PersistError   string  `json:"persist_error,omitempty"`
	PersistErrorAt string  `json:"persist_error_at,omitempty"`
	QueriedTokens  int64   `json:"queried_tokens"`
	HitTokens      int64   `json:"hit_tokens"`
	HitRatio       float64 `json:"hit_ratio"`
	CacheSettings
}

type specStatus struct {
	DraftSettings
	DraftTokens    int64   `json:"draft_tokens"`
	AcceptedTokens int64   `json:"accepted_tokens"`
	Acceptance     float64 `json:"acceptance"` // accepted / drafted
	// MeanAcceptedLength is the tokens a verify step emits on average:
	// 1 + accepted / verify steps with a draft (vLLM's mean acceptance length).
	MeanAcceptedLength float64 `json:"mean_accepted_length"`
	LastReload         *Reload `json:"last_reload"`
}

func (s *Server) statusJSON(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	reqs, errs, spec := s.book.snapshot(now)
	if sched := s.opt.Scheduler; sched != nil {
		reqs.Running, reqs.Waiting = sched.Running(), sched.Waiting()
	}
	doc := statusDoc{
		Time: now, Started: s.started, UptimeSeconds: now.Sub(s.started).Seconds(), Ready: s.isReady(),
		Model:    modelStatus{Name: s.opt.ModelName, ContextLength: s.ctxLen, ModelInfo: s.opt.Model},
		Requests: reqs, Errors: errs, Sequences: s.live.snapshot(now),
		Speculative: specStatus{DraftTokens: spec[0], AcceptedTokens: spec[1], DraftSettings: DraftSettings{Mode: "off", Drafters: []string{}}},
	}
	if s.opt.Scheduler != nil {
		if doc.Model.Arch == "" {
			doc.Model.Arch = s.opt.Scheduler.Engine().Arch()
		}
		doc.Device = newDeviceStatus(s.opt.Scheduler.Engine().Device())
		doc.Memory = memoryStatusOf(s.opt.Scheduler)
		if err := s.engineBroken(); err != nil {
			doc.Broken = clientText(err.Error(), 300)
			doc.Ready = false
		}
	}
	if doc.Model.Path == "" {
		doc.Model.Path = s.opt.ModelPath
	}
	if spec[0] > 0 {
		doc.Speculative.Acceptance = float64(spec[1]) / float64(spec[0])
	}
	if spec[2] > 0 {
		doc.Speculative.MeanAcceptedLength = 1 + float64(spec[1])/float64(spec[2])
	}
	doc.Cache.QueriedTokens, doc.Cache.HitTokens = s.book.cacheTokens()
	if doc.Cache.QueriedTokens > 0 {
		doc.Cache.HitRatio = float64(doc.Cache.HitTokens) / float64(doc.Cache.QueriedTokens)
	}
	if sched := s.opt.Scheduler; sched != nil {
		if st, ok := sched.Engine().CacheStats(); ok {
			c := &doc.Cache
			c.Enabled, c.Entries, c.RAMBytes = true, int64(st.Entries), st.Bytes
			c.DiskEntries, c.DiskBytes, c.Restoring = int64(st.DiskEntries), st.DiskBytes, st.Restoring
			c.RestoredEntries, c.RestoreSeconds, c.SkippedRecords = int64(st.RestoredEntries), st.RestoreSeconds, st.SkippedRecords
			c.DroppedWrites, c.PersistFailing = st.DroppedWrites, st.PersistFailing
			if st.PersistError != "" {
				c.PersistError, c.PersistErrorAt = clientText(st.PersistError, 200), st.PersistErrorAt.UTC().Format(time.RFC3339)
			}
		}
	}
	if src := s.opt.Status; src != nil {
		if st, ok := src.Power(); ok {
			doc.Power = &st
		}
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		rd := src.Telemetry(ctx)
		cancel()
		doc.Machine = &rd
		set := src.Settings()
		doc.Speculative.DraftSettings = set.Draft
		if doc.Speculative.Drafters == nil {
			doc.Speculative.Drafters = []string{}
		}
		doc.Speculative.LastReload = set.LastReload
		doc.Cache.CacheSettings = set.Cache
	}
	if doc.Errors == nil {
		doc.Errors = []errorEntry{}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, doc)
}
