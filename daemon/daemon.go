package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/speculative"
	"github.com/edgellmd/edgellmd/engine/tensor"
	"github.com/edgellmd/edgellmd/power"
	"github.com/edgellmd/edgellmd/web"
)

// Options say where the daemon's configuration comes from.
type Options struct {
	// ConfigPath is the config file. "" means DefaultConfigPath if it
	// exists (defaults otherwise); a path given here must exist.
	ConfigPath string
	// Override applies the command line's flags over the file; it runs after
	// every load and reload, so flags keep winning.
	Override func(*Config)
	// LogOutput receives the log (default os.Stdout: journald under systemd).
	LogOutput io.Writer
	// Executable is the running binary's path, for finding the bundled model
	// beside a relocated install ("" asks os.Executable).
	Executable string
	// ConfigDebounce is the config watch's quiet period: how long the file
	// must stay unchanged after its writer closed it (or after a rename into
	// place) before the watcher reloads. 0 means DefaultConfigDebounce, < 0
	// turns the watcher off (SIGHUP still reloads).
	ConfigDebounce time.Duration
	// Version is edgellmd's version, checked against a model bundle's
	// minimum ("" or "dev" skips the check).
	Version string
}

// Daemon is `edgellmd serve`: it owns the config, the logger, the HTTP
// listener, the engine and its worker, and their lifecycle under systemd.
type Daemon struct {
	opts       Options
	configPath string // file read at start and on reload
	explicit   bool   // configPath was given: its absence is an error

	cfg   atomic.Pointer[Config]
	eng   atomic.Pointer[engine.Engine] // once loaded: reloads set its draft parameters
	swaps chan modelSwap                // POST /admin/update: serve a newly committed model
	// connLimit caps the listeners' connections; /metrics counts its refusals.
	connLimit *web.ConnLimit
	log       zerolog.Logger
	level     *LevelSwitch
	sd        notifier

	state      atomic.Int32 // stateLoading, stateReady, stateStopping
	sched      atomic.Pointer[engine.Scheduler]
	handler    atomic.Pointer[handlerBox]
	powerCtl   atomic.Pointer[power.Controller]
	status     atomic.Pointer[string] // the STATUS= line in force
	reloadMu   sync.Mutex             // one reload at a time
	hadFile    bool                   // a config file was read (guarded by reloadMu): its removal is refused, not read as "defaults"
	sections   []string               // the top-level sections of the file in force (guarded by reloadMu)
	lastReload atomic.Pointer[ReloadStatus]
	powerKick  chan struct{} // power settings changed: restart the power watch

	hooksMu sync.Mutex
	hooks   []stopHook

	// Set by this package's tests only.
	newHandler func(handlerOptions) (http.Handler, error)
	beforeLoad func()
	wrap       func(http.Handler) http.Handler
}

const (
	stateLoading int32 = iota
	stateReady
	stateStopping
)

type handlerBox struct{ h http.Handler }

type stopHook struct {
	name string
	fn   func(context.Context) error
}

// ReloadStatus is the outcome of the last configuration reload, for the
// status page and /health details.
type ReloadStatus struct {
	At time.Time `json:"at"`
	// Err is why the file was refused ("" when it was applied); the running
	// configuration stays as it was.
	Err string `json:"error,omitempty"`
	// Applied lists the keys whose new values took effect.
	Applied []string `json:"applied,omitempty"`
	// RestartRequired lists changed keys that only a restart applies.
	RestartRequired []string `json:"restart_required,omitempty"`
}

// New reads the configuration and sets up the logger. Nothing is listened
// on or loaded until Run. A config problem is returned naming the file, line
// and key.
func New(opts Options) (*Daemon, error) { return newDaemon(opts, DefaultConfigPath) }

func newDaemon(opts Options, defaultPath string) (*Daemon, error) {
	d := &Daemon{opts: opts, configPath: opts.ConfigPath, explicit: opts.ConfigPath != "", powerKick: make(chan struct{}, 1), swaps: make(chan modelSwap)}
	if d.configPath == "" {
		d.configPath = defaultPath
	}
	if d.opts.LogOutput == nil {
		d.opts.LogOutput = os.Stdout
	}
	cfg, data, fromFile, err := d.readConfigFile(!d.explicit, false)
	if err != nil {
		return nil, err
	}
	d.hadFile, d.sections = fromFile, fileSections(data)
	log, level, err := NewSwitchableLogger(d.opts.LogOutput, cfg.Log.Format, cfg.Log.Level)
	if err != nil {
		return nil, err
	}
	d.log, d.level = log, level
	d.sd = notifier{log: log}
	d.cfg.Store(&cfg)
	if fromFile {
		log.Info().Str("config", d.configPath).Msg("config loaded")
	} else {
		log.Info().Str("config", d.configPath).Msg("no config file: using defaults and flags")
	}
	return d, nil
}

// readConfigFile reads the file (or the defaults when the file is absent
// and allowMissing), applies the flags and validates; it returns the file's
// text too (nil for the defaults). reload asks for a file that has stopped
// changing and is not empty (settledConfig).
func (d *Daemon) readConfigFile(allowMissing, reload bool) (Config, []byte, bool, error) {
	var cfg Config
	var data []byte
	var err error
	if reload {
		data, err = settledConfig(d.configPath)
	} else if data, err = os.ReadFile(d.configPath); err != nil {
		err = fmt.Errorf("config: %w", err)
	}
	if err == nil {
		cfg, err = ParseConfig(d.configPath, data)
	}
	fromFile := err == nil
	if errors.Is(err, fs.ErrNotExist) && allowMissing {
		cfg, data, err = DefaultConfig(), nil, nil
	}
	if err != nil {
		return Config{}, nil, false, err
	}
	if d.opts.Override != nil {
		d.opts.Override(&cfg)
		if err := cfg.Validate(); err != nil {
			return Config{}, nil, false, fmt.Errorf("after command-line flags: %w", err)
		}
	}
	return cfg, data, fromFile, nil
}

// Config returns a copy of the configuration in force.
func (d *Daemon) Config() Config {
	c := *d.cfg.Load()
	c.Draft = c.Draft.Clone()
	return c
}

// ConfigFile is the config file's path and whether it was read: false when
// it was absent and the configuration is the defaults and flags.
func (d *Daemon) ConfigFile() (path string, read bool) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	return d.configPath, d.hadFile
}

// LastReload is the outcome of the last reload; nil before the first.
func (d *Daemon) LastReload() *ReloadStatus { return d.lastReload.Load() }

// Power is the power-mode controller, nil until the power watch started.
func (d *Daemon) Power() *power.Controller { return d.powerCtl.Load() }

// OnStop registers fn to run once on stop, after in-flight requests have
// finished and the engine worker has stopped, before the model is unmapped
// (the prefix cache persists itself here). Hooks run in the order
// registered; an error is logged and does not stop the others.
func (d *Daemon) OnStop(name string, fn func(context.Context) error) {
	d.hooksMu.Lock()
	defer d.hooksMu.Unlock()
	d.hooks = append(d.hooks, stopHook{name, fn})
}

// Ready says the model is loaded and requests are being served.
func (d *Daemon) Ready() bool { return d.state.Load() == stateReady }

// drain stops accepting connections and lets in-flight requests finish for
// up to timeout, or until a second SIGTERM/SIGINT; then it cancels them
// (their generations stop within one decode step) and closes what is left.
func (d *Daemon) drain(srv *http.Server, timeout time.Duration, signals <-chan os.Signal, cancelRequests func()) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	watched := make(chan struct{})
	go func() { // owned: drain waits for it below
		defer close(watched)
		for {
			select {
			case sig := <-signals:
				if sig != syscall.SIGHUP {
					d.log.Warn().Str("signal", sig.String()).Msg("second stop signal: not waiting for requests")
					cancel()
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	err := srv.Shutdown(ctx)
	cancel()
	<-watched
	if err == nil {
		return
	}
	d.log.Warn().Dur("drain_timeout_ms", timeout).Msg("requests still running at the drain deadline: cancelling them")
	cancelRequests()
	grace, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if err := srv.Shutdown(grace); err != nil {
		srv.Close()
	}
}

func (d *Daemon) runStopHooks() {
	d.hooksMu.Lock()
	hooks := slices.Clone(d.hooks)
	d.hooksMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), stopHookTimeout)
	defer cancel()
	for _, h := range hooks {
		t0 := time.Now()
		if err := h.fn(ctx); err != nil {
			d.log.Error().Err(err).Str("hook", h.name).Msg("stop hook failed")
			continue
		}
		d.log.Info().Str("hook", h.name).Dur("took_ms", time.Since(t0)).Msg("stop hook done")
	}
}

// stopHookTimeout bounds all stop hooks together (systemd's TimeoutStopSec
// must leave room for the drain plus this).
const stopHookTimeout = 30 * time.Second

type loadResult struct {
	eng     *engine.Engine
	sched   *engine.Scheduler
	handler http.Handler
	draft   speculative.Config // the draft parameters the engine was given
	err     error
}

// load maps the model and builds the scheduler and the HTTP handler. The
// worker is started by Run.
func (d *Daemon) load(cfg Config, path, name string) loadResult {
	kv, act := tensor.KVTypeNames[cfg.Model.KVType], tensor.ActivationNames[cfg.Model.Activations] // validated
	opt := engine.Options{Threads: cfg.Model.Threads, KVType: kv, Activations: act, ContextLen: cfg.Model.ContextLength,
		CacheMaxBytes: int64(cfg.Cache.MaxBytes), Draft: cfg.Draft.Clone(), Device: cfg.Model.Device, GPUMatMul: cfg.Model.GPUMatMul,
		MaxSequences: cfg.Engine.MaxSequences, PrefillChunk: cfg.Engine.PrefillChunk, DecodeSlowdown: cfg.Engine.DecodeSlowdown,
		MemoryBudget: int64(cfg.Engine.MemoryBudget), Log: d.log}
	if cfg.Cache.Persist {
		opt.CacheDir, opt.CacheMaxDiskBytes = cfg.Cache.Dir, int64(cfg.Cache.MaxDiskBytes)
	}
	t0 := time.Now()
	eng, err := engine.Load(path, opt)
	if engine.IsDeviceError(err) {
		return loadResult{err: fmt.Errorf("model.device: %w", err)}
	}
	if err != nil {
		return loadResult{err: fmt.Errorf("model.path: %w", err)}
	}
	v := eng.Tokenizer().Vocab()
	tpl, err := chat.NewTemplate(v.ChatTemplate, tokenText(v.Tokens, v.BOS), tokenText(v.Tokens, v.EOS))
	if err != nil {
		eng.Close()
		return loadResult{err: fmt.Errorf("%s: %w", path, err)}
	}
	sched := engine.NewScheduler(eng, cfg.API.QueueDepth)
	info, err := modelInfo(path, eng.Arch())
	if err != nil { // the page shows less; serving goes on
		d.log.Warn().Err(err).Msg("model details for the status page")
	}
	fp, fpDesc := systemFingerprint(eng.Fingerprint(), d.opts.Version)
	d.log.Info().Str("system_fingerprint", fp).Str("from", fpDesc).Msg("system fingerprint")
	newHandler := d.newHandler
	if newHandler == nil {
		newHandler = newWebHandler
	}
	h, err := newHandler(handlerOptions{
		Scheduler:         sched,
		ModelName:         name,
		ModelPath:         path,
		ModelAliases:      cfg.Model.Aliases,
		SystemFingerprint: fp,
		Template:          tpl,
		APIKey:            cfg.API.Key,
		Public:            cfg.API.Public,
		CORSOrigins:       cfg.API.CORSOrigins,
		SpecialInMessages: cfg.API.SpecialTokensInMessages,
		MaxBodyBytes:      int64(cfg.API.MaxBodyBytes),
		BodyTimeout:       cfg.API.BodyTimeout.D(),
		UploadTimeout:     cfg.API.UploadTimeout.D(),
		RequestTimeout:    cfg.API.RequestTimeout.D(),
		ResponsesStore:    cfg.API.ResponsesStoreSize,
		ResponsesTTL:      cfg.API.ResponsesStoreTTL.D(),
		ConnLimit:         d.connLimit,
		Log:               d.log,
		// Requests that passed serveHTTP's gate before a stop began are
		// served to the end: the API handler only exists once loaded.
		Ready:   func() bool { return d.state.Load() != stateLoading },
		Status:  newStatusSource(d),
		Model:   info,
		Updater: daemonUpdater{d},
	})
	if err != nil {
		eng.Close()
		return loadResult{err: fmt.Errorf("http handler: %w", err)}
	}
	if d.wrap != nil {
		h = d.wrap(h)
	}
	d.log.Info().Str("model", name).Dur("took_ms", time.Since(t0)).Msg("model mapped")
	return loadResult{eng: eng, sched: sched, handler: h, draft: cfg.Draft}
}

// installEngine makes the loaded engine the one reloads give draft
// parameters to, first handing it those of a reload that happened while
// the model was loading. If the engine refuses them, it keeps the ones it
// was loaded with, and the running config and LastReload say so.
func (d *Daemon) installEngine(res loadResult) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	cfg := d.Config()
	if !reflect.DeepEqual(cfg.Draft, res.draft) {
		if err := res.eng.SetDraft(cfg.Draft); err != nil {
			err = fmt.Errorf("%s: %w", d.configPath, err)
			d.log.Warn().Err(err).Msg("draft parameters of a reload during loading refused: keeping those of the start")
			cfg.Draft = res.draft
			d.cfg.Store(&cfg)
			d.lastReload.Store(&ReloadStatus{At: time.Now(), Err: err.Error()})
		}
	}
	d.eng.Store(res.eng)
}

// deviceWords says in the STATUS= line what the model runs on.
func deviceWords(d engine.DeviceInfo) string {
	if d.Engine == engine.EngineCPU {
		return "the CPU"
	}
	mm := "scalar matrix products"
	if d.MatMul == "coopmat" {
		mm = "tensor cores for prefill: " + d.MatMulTiles
	} else if d.CoopMat {
		mm += " (gpu_matmul scalar; the device has tensor cores)"
	}
	return "GPU " + d.Name + " (" + d.Engine + ", " + mm + ")"
}

func tokenText(tokens []string, id int32) string {
	if id < 0 || int(id) >= len(tokens) {
		return ""
	}
	return tokens[id]
}

// handlerOptions is what the HTTP API is built from.
type handlerOptions struct {
	Scheduler         *engine.Scheduler
	ModelName         string
	ModelPath         string
	ModelAliases      []string // model.aliases
	SystemFingerprint string
	Template          *chat.Template
	APIKey            string
	Public            []string // api.public
	CORSOrigins       []string // api.cors_origins
	SpecialInMessages bool     // api.special_tokens_in_messages
	MaxBodyBytes      int64
	BodyTimeout       time.Duration
	UploadTimeout     time.Duration
	RequestTimeout    time.Duration
	ResponsesStore    int           // api.responses_store_size
	ResponsesTTL      time.Duration // api.responses_store_ttl
	ConnLimit         *web.ConnLimit
	Log               zerolog.Logger
	Ready             func() bool
	Status            web.StatusSource // the status page's and /metrics' view of the daemon
	Model             web.ModelInfo
	Updater           web.Updater // POST /admin/update
}

// serveHTTP answers for the daemon while it is not serving (loading,
// stopping) and hands everything else to the API handler.
func (d *Daemon) serveHTTP(w http.ResponseWriter, r *http.Request) {
	st := d.state.Load()
	if h := d.handler.Load(); st == stateReady && h != nil {
		if r.URL.Path == "/health" && r.Method == http.MethodGet {
			if rl := d.reloadProblem(); rl != nil {
				healthWithReload(w, r, h.h, rl)
				return
			}
		}
		h.h.ServeHTTP(w, r)
		return
	}
	status, retry := "loading model", "5"
	if st == stateStopping {
		status, retry = "stopping", ""
	}
	// Answered without reading the body: close the connection, so that a
	// client that stalls its body cannot hold it (the body deadline is the
	// API handler's).
	w.Header().Set("Connection", "close")
	w.Header().Set("Content-Type", "application/json")
	if retry != "" {
		w.Header().Set("Retry-After", retry)
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	if r.URL.Path == "/health" {
		fmt.Fprintf(w, "{\"status\":%q}\n", status)
		return
	}
	fmt.Fprintf(w, "{\"error\":{\"message\":\"edgellmd is %s\",\"type\":\"server_error\",\"param\":null,\"code\":\"unavailable\"}}\n", status)
}

// alive says whether the watchdog may ping: while loading (systemd's start
// timeout covers a stuck load) and stopping, always; while serving, only
// if the engine worker showed a sign of life within the watchdog interval
// (at least minBeatAge: an idle worker beats once a second).
func (d *Daemon) alive(now time.Time, interval time.Duration) bool {
	s := d.sched.Load()
	if d.state.Load() != stateReady || s == nil {
		return true
	}
	return now.Sub(s.LastBeat()) < max(interval, minBeatAge)
}

// minBeatAge is the least time without a worker beat that counts as stuck.
const minBeatAge = 3 * time.Second

// listeners returns the sockets systemd passed (socket activation), or a
// new one on addr.
func (d *Daemon) listeners(addr string) ([]net.Listener, error) {
	passed, err := activation.Listeners()
	if err != nil {
		return nil, fmt.Errorf("systemd socket activation: %w", err)
	}
	var lns []net.Listener
	for _, ln := range passed {
		if ln != nil {
			lns = append(lns, ln)
		}
	}
	if len(lns) > 0 {
		d.log.Info().Int("sockets", len(lns)).Str("listen", addr).Msg("using systemd's sockets; the listen setting is not used")
		return lns, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	return []net.Listener{ln}, nil
}

func (d *Daemon) executable() string {
	if d.opts.Executable != "" {
		return d.opts.Executable
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return exe
}

// setStatus sets the STATUS= line systemctl status shows, sending it with
// the other lines given (READY=1) in one message.
func (d *Daemon) setStatus(s string, with ...string) {
	d.status.Store(&s)
	d.sd.send(append(with, "STATUS="+s)...)
}

// watchPower runs the power-mode watch with the power settings in force,
// restarting it when a reload changes them, until ctx ends.
func (d *Daemon) watchPower(ctx context.Context) {
	for {
		pc := d.Config().Power
		ctl, err := power.New(power.Options{Mode: pc.Pin, JetsonClocks: pc.JetsonClocks, Repin: pc.Repin, Logger: d.log})
		done := make(chan struct{})
		wctx, cancel := context.WithCancel(ctx)
		if err != nil {
			d.log.Warn().Err(err).Msg("power mode watch off")
			close(done)
		} else {
			d.powerCtl.Store(ctl)
			go func() {
				defer close(done)
				if err := ctl.Watch(wctx, pc.CheckInterval.D()); err != nil {
					d.log.Warn().Err(err).Msg("power mode watch stopped")
				}
			}()
		}
		select {
		case <-ctx.Done():
			cancel()
			<-done
			return
		case <-d.powerKick:
			cancel()
			<-done
		}
	}
}

// warnWriter turns net/http's log lines into zerolog warnings.
type warnWriter struct{ log zerolog.Logger }

func (w warnWriter) Write(p []byte) (int, error) {
	w.log.Warn().Str("component", "http").Msg(strings.TrimSpace(string(p)))
	return len(p), nil
}

// fdHeadroom is the descriptors the daemon holds besides connections: the
// model file, the prefix cache's segments, the config watch, listeners,
// the journal and the GPU driver's.
const fdHeadroom = 64

// checkOpenFiles says when maxConnections (and fdHeadroom) do not fit in the
// process's open-files limit (RLIMIT_NOFILE; Go raises the soft limit to
// the hard one at start): connections past it would fail on accept with
// "too many open files" instead of being answered 503 by the cap.
func checkOpenFiles(maxConnections int) error {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return fmt.Errorf("reading RLIMIT_NOFILE: %w", err)
	}
	return fitsOpenFiles(maxConnections, rl.Cur)
}

func fitsOpenFiles(maxConnections int, limit uint64) error {
	if limit == unix.RLIM_INFINITY || uint64(maxConnections)+fdHeadroom <= limit {
		return nil
	}
	return fmt.Errorf("api.max_connections is %d, but the open-files limit (RLIMIT_NOFILE) is %d and about %d descriptors go to the model, the cache and the logs: "+
		"connections past %d fail with \"too many open files\" instead of a 503; raise the limit (LimitNOFILE= in the systemd unit, ulimit -n) or lower api.max_connections",
		maxConnections, limit, fdHeadroom, int64(limit)-fdHeadroom)
}
