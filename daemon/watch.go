package daemon

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"
)

// DefaultConfigDebounce is the quiet period: how long the config file must
// stay unchanged after its writer closed it (or after a file was renamed
// over it) before the watcher reloads. Long enough for a tool that writes
// the file in several opens to start its next one, short enough that a save
// applies within a second.
const DefaultConfigDebounce = 250 * time.Millisecond

// stuckWriterAfter is how long a file that was written and is still open
// for writing waits before the watcher says so in the log. It is never
// applied while open: a writer that pauses mid-file is not done.
const stuckWriterAfter = 30 * time.Second

// configWatch calls changed once a change to the config file is complete:
//
//   - a file written in place (an editor that writes in place, `cat >
//     file`, a script) is complete when its writer closes it (inotify's
//     IN_CLOSE_WRITE), however long it paused between writes;
//   - a file renamed into place (editors' and configuration tools' save) is
//     complete as it arrives;
//   - a removal counts too (the reload reports it);
//
// and the file has then stayed unchanged for the quiet period. It watches
// the file's directory, not the file: a rename over the file replaces its
// inode, which a watch on the old one would not see, and a removed file can
// come back.
type configWatch struct {
	path     string        // the config file
	debounce time.Duration // the quiet period
	log      zerolog.Logger
	changed  func()
	// accepted, when set (tests), sees each event that counts as a change.
	accepted func(fileEvent)
	// stuckAfter is stuckWriterAfter; tests set it shorter.
	stuckAfter time.Duration
}

// fileEvent is one inotify event of the watched directory.
type fileEvent struct {
	Name string // the path: the directory joined with the entry's name
	Op   fileOp
}

// fileOp is what happened, as inotify reports it.
type fileOp uint32

const (
	opCreate     fileOp = 1 << iota // created in the directory (a writer may follow)
	opWrite                         // written (or truncated) by a writer that still has it open
	opCloseWrite                    // a writer closed it
	opMovedTo                       // renamed into place: complete
	opGone                          // removed or renamed away
	opDirGone                       // the directory itself was removed or renamed
	opOverflow                      // the kernel dropped events
)

func (o fileOp) Has(x fileOp) bool { return o&x != 0 }

// start sets the watch up and returns the loop that serves it until ctx
// ends; edits made after start returns are seen. A watch that cannot start
// is logged and start returns nil: SIGHUP still reloads, and the daemon goes
// on serving.
func (cw configWatch) start() func(ctx context.Context) {
	dir := filepath.Dir(cw.path)
	log := cw.log.With().Str("config", cw.path).Logger()
	w, err := watchDir(dir)
	if err != nil {
		// No config directory at all (serve on flags and defaults) is no
		// fault: say it at info; a watch that fails on a real one warns.
		ev := log.Warn()
		if errors.Is(err, fs.ErrNotExist) {
			ev = log.Info()
		}
		ev.Err(err).Msg("config watch off: edits apply on SIGHUP (systemctl reload edgellmd)")
		return nil
	}
	log.Debug().Dur("quiet_period_ms", cw.debounce).Msg("watching the config file")
	return func(ctx context.Context) {
		defer w.close()
		cw.loop(ctx, w.events, dir, log)
	}
}

// loop follows the file's events until ctx ends or the watch breaks (a
// broken watch is logged and given up).
func (cw configWatch) loop(ctx context.Context, events <-chan fileEvent, dir string, log zerolog.Logger) {
	path := filepath.Join(dir, filepath.Base(cw.path))
	quiet := time.NewTimer(cw.debounce)
	quiet.Stop()
	defer quiet.Stop()
	stuckAfter := cw.stuckAfter
	if stuckAfter <= 0 {
		stuckAfter = stuckWriterAfter
	}
	stuck := time.NewTimer(stuckAfter)
	stuck.Stop()
	defer stuck.Stop()
	writing := false // written since its writer last closed it
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				log.Warn().Msg("config watch ended: edits apply on SIGHUP")
				return
			}
			switch {
			case ev.Op.Has(opDirGone):
				log.Warn().Str("dir", dir).Msg("the config directory was removed or renamed: config watch off; edits apply on SIGHUP")
				return
			case ev.Op.Has(opOverflow):
				// Events were lost, maybe ours: read the file again to be
				// sure, once no writer is known to have it open.
				log.Warn().Msg("config watch missed events: reloading to be sure")
				if !writing {
					quiet.Reset(cw.debounce)
				}
				continue
			case ev.Name != path:
				continue
			}
			if cw.accepted != nil {
				cw.accepted(ev)
			}
			switch {
			case ev.Op.Has(opCreate | opWrite):
				// A writer has the file open: wait for it to close it.
				writing = true
				quiet.Stop()
				stuck.Reset(stuckAfter)
			case ev.Op.Has(opCloseWrite):
				if !writing {
					continue // opened for writing and closed unwritten (touch)
				}
				writing = false
				stuck.Stop()
				quiet.Reset(cw.debounce)
			case ev.Op.Has(opMovedTo | opGone):
				writing = false
				stuck.Stop()
				quiet.Reset(cw.debounce)
			}
		case <-stuck.C:
			log.Warn().Dur("open_for_ms", stuckAfter).
				Msg("the config file was written and is still open for writing: not reloaded until its writer closes it (systemctl reload edgellmd applies it now)")
		case <-quiet.C:
			cw.changed()
		}
	}
}
