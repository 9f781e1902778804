package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/power"
	"github.com/edgellmd/edgellmd/update"
)

// modelSwap asks Run's loop to serve another model file: it drains and
// closes the engine in use, loads path and answers on done.
type modelSwap struct {
	path string
	done chan error
}

// errNotServing is the answer to an update that arrives while the daemon
// is not serving (loading or stopping).
var errNotServing = errors.New("the daemon is not serving (loading or stopping); try again")

// waitIdle waits until sched has no request running or queued, for at
// most timeout (the requests left then are cancelled with the worker).
func (d *Daemon) waitIdle(sched *engine.Scheduler, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for sched.Running()+sched.Waiting() > 0 {
		if time.Now().After(deadline) {
			d.log.Warn().Dur("drain_timeout_ms", timeout).Msg("model switch: requests still running at the drain deadline: cancelling them")
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// daemonUpdater is POST /admin/update: update.Apply with the daemon's state
// directory, trusted keys and a health check on the new model, then a swap
// to the committed model.
type daemonUpdater struct{ d *Daemon }

func (u daemonUpdater) Apply(ctx context.Context, body io.Reader, allowDowngrade bool) (update.Result, error) {
	d := u.d
	cfg := d.Config()
	keys, err := update.LoadTrustedDir(cfg.Update.TrustedDir)
	if err != nil {
		return update.Result{}, fmt.Errorf("update.trusted_dir: %w", err)
	}
	plat := update.Platform{Arch: runtime.GOARCH, Version: d.opts.Version}
	if b, err := power.Detect("/"); err == nil && b.Jetson {
		plat.DeviceFamily = b.Family
	}
	res, err := update.Apply(ctx, body, update.Options{
		StateDir: cfg.Update.StateDir, TrustedKeys: keys, TrustedFrom: "update.trusted_dir " + cfg.Update.TrustedDir,
		Platform: plat, AllowDowngrade: allowDowngrade, DowngradeHint: "add ?allow_downgrade=true to the URL",
		Keep: cfg.Update.Keep, Log: d.log,
		Check: update.EngineCheck(update.CheckOptions(cfg.Model.Threads)),
	})
	if err != nil || !res.Committed {
		return res, err
	}
	if cfg.Model.Path != "" {
		d.log.Warn().Str("version", res.Version).Str("model.path", cfg.Model.Path).
			Msg("update committed, but model.path is set: it keeps being served (empty it to serve installed bundles)")
		return res, nil
	}
	sw := modelSwap{path: res.ModelPath, done: make(chan error, 1)}
	select {
	case d.swaps <- sw:
	case <-ctx.Done():
		return res, fmt.Errorf("update %s committed; serving it was cancelled: %w (a restart serves it)", res.Version, ctx.Err())
	}
	if err := <-sw.done; err != nil {
		return res, fmt.Errorf("update %s committed, but serving it failed: %w", res.Version, err)
	}
	return res, nil
}
