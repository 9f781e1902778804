package daemon

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sync/errgroup"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/update"
	"github.com/edgellmd/edgellmd/web"
)

// Run serves until ctx ends or signals delivers SIGTERM or SIGINT (SIGHUP
// reloads the configuration), then drains and returns nil; an error is a
// failed start (listener, model) or a listener that died.
//
// Start order: listener (a systemd socket-activated one if passed), then the
// model loads while /health answers 503 "loading model", then READY=1.
func (d *Daemon) Run(ctx context.Context, signals <-chan os.Signal) error {
	cfg := d.Config()
	lns, addrs, err := d.listen(cfg)
	if err != nil {
		return err
	}
	reqCtx, cancelCause := context.WithCancelCause(context.Background())
	// Requests cancelled by the drain say so (web.ErrServerStopping), not
	// that their client left.
	cancelRequests := func() { cancelCause(web.ErrServerStopping) }
	defer cancelRequests()
	srv := d.newServer(reqCtx)

	// Every goroutine below is waited for before Run returns. Stopping is
	// driven by the loop, not by the group's context.
	var g errgroup.Group
	serveErr := make(chan error, len(lns))
	for _, ln := range lns {
		g.Go(func() error {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				serveErr <- fmt.Errorf("serve %s: %w", ln.Addr(), err)
			}
			return nil
		})
	}
	bgCtx, stopBackground := context.WithCancel(context.Background())
	defer stopBackground()
	d.startBackground(bgCtx, &g)

	r := &running{d: d, g: &g, cfg: cfg, addrs: addrs, loaded: make(chan loadResult, 1)}
	r.workerCtx, r.stopWorker = context.WithCancel(context.Background())
	defer func() { r.stopWorker() }()
	r.startLoad()
	runErr := r.loop(ctx, signals, serveErr)

	d.state.Store(stateStopping)
	d.sd.send(sd.SdNotifyStopping, "STATUS=stopping: draining requests")
	d.drain(srv, d.Config().API.DrainTimeout.D(), signals, cancelRequests)
	r.stopWorker()
	stopBackground()
	_ = g.Wait()
	if r.loading { // stopped while the model was loading: the loader has finished now
		if res := <-r.loaded; res.eng != nil {
			r.eng = res.eng
		}
	}
	d.runStopHooks()
	if r.eng != nil {
		if err := r.eng.Close(); err != nil {
			d.log.Warn().Err(err).Msg("closing the model")
		}
	}
	if runErr != nil {
		d.log.Error().Err(runErr).Msg("stopped on error")
		return runErr
	}
	d.log.Info().Msg("stopped")
	return nil
}

// listen opens the listeners (systemd's, or one on cfg.Listen) behind the
// connection caps and returns them with their URLs.
func (d *Daemon) listen(cfg Config) ([]net.Listener, []string, error) {
	lns, err := d.listeners(cfg.Listen)
	if err != nil {
		return nil, nil, err
	}
	// One count over every listener: a client past a cap gets a 503 at once.
	limit := web.NewConnLimit(cfg.API.MaxConnections, cfg.API.MaxConnectionsPerClient)
	limit.SetLog(d.log)
	d.connLimit = limit
	if err := checkOpenFiles(cfg.API.MaxConnections); err != nil {
		d.log.Warn().Err(err).Msg("api.max_connections exceeds the open-files limit")
	}
	for i := range lns {
		lns[i] = limit.Listener(lns[i])
	}
	addrs := make([]string, len(lns))
	for i, ln := range lns {
		addrs[i] = "http://" + ln.Addr().String()
	}
	d.log.Info().Strs("listen", addrs).Msg("listening")
	return lns, addrs, nil
}

// newServer is the HTTP server: requests run under reqCtx, which the drain
// cancels.
func (d *Daemon) newServer(reqCtx context.Context) *http.Server {
	return &http.Server{
		Handler:           http.HandlerFunc(d.serveHTTP),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
		ErrorLog:          stdlog.New(warnWriter{d.log}, "", 0),
	}
}

// startBackground starts, in g and until ctx ends, the systemd watchdog
// (when the unit asks for one), the power-mode watch and the config-file
// watch.
func (d *Daemon) startBackground(ctx context.Context, g *errgroup.Group) {
	if interval, err := sd.SdWatchdogEnabled(false); err != nil {
		d.log.Warn().Err(err).Msg("systemd watchdog settings unreadable: watchdog off")
	} else if interval > 0 {
		d.log.Info().Dur("interval_ms", interval).Msg("systemd watchdog on")
		g.Go(func() error {
			watchdog(ctx, interval, func(now time.Time) bool { return d.alive(now, interval) },
				func() { d.sd.send(sd.SdNotifyWatchdog) }, d.log)
			return nil
		})
	}
	g.Go(func() error { d.watchPower(ctx); return nil })
	if debounce := d.opts.ConfigDebounce; debounce >= 0 {
		if debounce == 0 {
			debounce = DefaultConfigDebounce
		}
		cw := configWatch{path: d.configPath, debounce: debounce, log: d.log,
			changed: func() { _ = d.reload(false) }} // logged and kept for the status page
		if run := cw.start(); run != nil {
			g.Go(func() error { run(ctx); return nil })
		}
	}
}

// running is what Run keeps while it serves: the model served, and its
// engine and worker once loaded.
type running struct {
	d      *Daemon
	g      *errgroup.Group
	cfg    Config // at start
	addrs  []string
	loaded chan loadResult // the loader's outcome

	modelPath, name string
	loading         bool // a load is under way: its outcome comes on loaded
	eng             *engine.Engine
	sched           *engine.Scheduler
	workerCtx       context.Context
	stopWorker      context.CancelFunc
}

// startLoad finds the model (after rolling back an update a crash
// interrupted) and starts loading it; the outcome comes on r.loaded.
func (r *running) startLoad() {
	d, cfg := r.d, r.cfg
	r.loading = true
	// An update interrupted by a crash or power loss is rolled back before
	// anything is served; with model.path empty the committed bundle's
	// model comes before the bundled one.
	configured := cfg.Model.Path
	if installed, err := update.Recover(cfg.Update.StateDir, d.log); err != nil {
		d.log.Error().Err(err).Str("update.state_dir", cfg.Update.StateDir).Msg("update: recovery failed; serving model.path or the bundled model")
	} else if configured == "" && installed != "" {
		configured = installed
		d.log.Info().Str("model", installed).Msg("serving the installed model bundle")
	}
	modelPath, err := findModel(configured, BundledModelPaths(d.executable()))
	r.modelPath, r.name = modelPath, servedName(cfg.Model.Name, modelPath)
	if err != nil {
		r.loaded <- loadResult{err: err}
		return
	}
	d.setStatus(fmt.Sprintf("loading model %s (%s); listening at %s", r.name, modelPath, strings.Join(r.addrs, ", ")))
	name := r.name
	r.g.Go(func() error {
		if d.beforeLoad != nil {
			d.beforeLoad()
		}
		r.loaded <- d.load(cfg, modelPath, name)
		return nil
	})
}

// loop serves until a stop: the loaded model, model swaps, SIGHUP reloads.
// It returns why it stopped when that is an error.
func (r *running) loop(ctx context.Context, signals <-chan os.Signal, serveErr <-chan error) error {
	d := r.d
	for {
		select {
		case res := <-r.loaded:
			r.loading = false
			if res.err != nil {
				return res.err
			}
			r.serve(res)
		case sw := <-d.swaps:
			r.swap(sw)
		case sig := <-signals:
			if sig == syscall.SIGHUP {
				_ = d.Reload() // logged and kept for the status page
				continue
			}
			d.log.Info().Str("signal", sig.String()).Msg("stopping")
			return nil
		case <-ctx.Done():
			d.log.Info().Msg("stopping")
			return nil
		case err := <-serveErr:
			return err
		}
	}
}

// serve makes a loaded model the one served: its worker starts, requests
// reach its handler, systemd hears READY=1.
func (r *running) serve(res loadResult) {
	d := r.d
	r.eng, r.sched = res.eng, res.sched
	d.installEngine(res)
	ctx := r.workerCtx
	r.g.Go(func() error { res.sched.Run(ctx); return nil })
	d.sched.Store(res.sched)
	d.handler.Store(&handlerBox{res.handler})
	d.state.Store(stateReady)
	dev := res.eng.Device()
	d.log.Info().Str("model", r.name).Str("path", r.modelPath).Str("engine", dev.Engine).Str("device", dev.Name).Str("gpu_matmul", dev.MatMul).
		Strs("listen", r.addrs).Msg("ready")
	if note := modelNote(r.modelPath); note != "" {
		d.log.Warn().Str("model", r.modelPath).Msg(note)
	}
	d.setStatus(fmt.Sprintf("serving %s (%s) on %s at %s", r.name, r.modelPath, deviceWords(dev), strings.Join(r.addrs, ", ")), sd.SdNotifyReady)
}

// swap serves the model of a committed update (POST /admin/update): drain
// the engine in use, stop its worker, close it, then load the new model;
// requests meanwhile get 503 "loading model". A load that fails leaves the
// daemon without a model, as a failed start does.
func (r *running) swap(sw modelSwap) {
	d := r.d
	if d.state.Load() != stateReady {
		sw.done <- errNotServing
		return
	}
	d.state.Store(stateLoading)
	d.setStatus(fmt.Sprintf("switching to model %s", sw.path))
	d.waitIdle(r.sched, d.Config().API.DrainTimeout.D())
	r.stopWorker()
	<-r.sched.Done()
	d.eng.Store(nil)
	if err := r.eng.Close(); err != nil {
		d.log.Warn().Err(err).Msg("closing the model")
	}
	r.eng, r.sched = nil, nil
	r.workerCtx, r.stopWorker = context.WithCancel(context.Background())
	r.modelPath, r.name = sw.path, servedName(r.cfg.Model.Name, sw.path)
	res := d.load(d.Config(), r.modelPath, r.name)
	if res.err != nil {
		sw.done <- res.err
		r.loading = true
		r.loaded <- res
		return
	}
	// Serving before answering: whoever asked for the swap sees the new
	// model on its next request.
	r.serve(res)
	sw.done <- nil
}
