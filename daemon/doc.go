// Package daemon is `edgellmd serve`: it owns edgellmd's long-lived objects
// and their lifecycle under systemd. Other packages never import it; it
// builds their objects and hands them what they need.
//
// What it does, in start order (Run):
//
//   - config: /etc/edgellmd/edgellmd.yaml (ParseConfig; DefaultConfig when
//     the default file is absent), decoded strictly: unknown keys, wrong
//     types and values out of range are ConfigErrors naming file, line and
//     dotted key; the command line's flags override the file (Options.Override);
//   - the logger (zerolog; JSON on stdout for journald, console on a
//     terminal), whose level a reload can change;
//   - the HTTP listener, or the sockets systemd passes (socket activation);
//   - the model, memory-mapped (engine.Load), while /health answers 503
//     "loading model"; then the engine worker (engine.Scheduler.Run), the API
//     (package web), and READY=1 with a STATUS= line naming the model and the
//     listen address;
//   - the systemd watchdog (WATCHDOG_USEC): WATCHDOG=1 every half interval,
//     only while the engine worker beats, so a stuck worker gets us
//     restarted; and the Jetson power-mode watch (package power).
//
// Reload: SIGHUP, or an edit of the config file (an inotify watch on its
// directory, so that editors' rename-over saves are seen; a file written in
// place counts once its writer has closed it and it then stayed unchanged
// for a quiet period, so a half-written file is never read; a file that
// lacks whole sections the file in force had is refused unless reloaded on
// purpose with SIGHUP; docs/design/config-reload.md), re-reads and validates
// the whole file (RELOADING=1 + MONOTONIC_USEC, then READY=1). draft (handed to the
// engine: it applies from the next request on), power and log.level apply
// live; other changed keys are reported as needing a restart, never half
// applied; a bad or vanished file leaves the running config in force.
// LastReload keeps the outcome for the status page, and /health carries it
// as "last_reload" while it is an error or asks for a restart.
//
// SIGTERM/SIGINT (or the end of Run's context): STOPPING=1, stop accepting,
// let in-flight requests finish up to api.drain_timeout (a second signal
// cuts that short), cancel the rest, stop the worker, run the OnStop hooks
// (the prefix cache persists there), unmap the model, return nil (exit 0).
//
// What it is not for: HTTP handlers (web), inference (engine), talking to
// nvpmodel (power).
//
// Files, by job: daemon.go the Daemon, its config in force and loading a
// model; run.go Run (listen, background watches, load, the serve loop, model
// swaps); reload.go Reload; watch.go and watch_linux.go when a change to the
// config file is complete; config.go the sections and defaults,
// config_decode.go parsing, config_validate.go validation, config_units.go
// sizes and durations, diff.go which keys changed; handler.go the web
// handler and what the status page and /health see of the daemon; fingerprint.go
// system_fingerprint; model.go finding the model file; notify.go and
// logger.go systemd and the log; update.go POST /admin/update.
package daemon
