package daemon

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/rs/zerolog"
)

// DefaultConfigDebounce is how long the config watcher waits after the last
// change to the config file before it reloads: long enough for an editor's
// save (truncate, write in pieces, or write a temporary file and rename it
// over) to finish, short enough to feel immediate.
const DefaultConfigDebounce = 250 * time.Millisecond

// configWatch calls changed once the config file has been created, written,
// renamed or removed and then left alone for debounce. It watches the file's
// directory, not the file: editors and configuration tools replace a file by
// renaming a new one over it, which a watch on the old file's inode would
// not see, and a removed file can come back.
type configWatch struct {
	path     string // the config file
	debounce time.Duration
	log      zerolog.Logger
	changed  func()
	// accepted, when set (tests), sees each event that counts as a change.
	accepted func(fsnotify.Event)
}

// start sets the watch up and returns the loop that serves it until ctx
// ends; edits made after start returns are seen. A watch that cannot start
// is logged and start returns nil: SIGHUP still reloads, and the daemon goes
// on serving.
func (cw configWatch) start() func(ctx context.Context) {
	dir := filepath.Dir(cw.path)
	log := cw.log.With().Str("config", cw.path).Logger()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		log.Warn().Err(err).Msg("config watch off: edits apply on SIGHUP (systemctl reload edgellmd)")
		return nil
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		log.Warn().Err(err).Msg("config watch off: edits apply on SIGHUP (systemctl reload edgellmd)")
		return nil
	}
	log.Debug().Dur("debounce", cw.debounce).Msg("watching the config file")
	return func(ctx context.Context) {
		defer w.Close()
		cw.loop(ctx, w, dir, log)
	}
}

// loop debounces the watch's events until ctx ends or the watch breaks (a
// broken watch is logged and given up).
func (cw configWatch) loop(ctx context.Context, w *fsnotify.Watcher, dir string, log zerolog.Logger) {
	path := filepath.Join(dir, filepath.Base(cw.path))
	timer := time.NewTimer(cw.debounce)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			ev.Name = filepath.Clean(ev.Name) // fsnotify joins with "/": "./edgellmd.yaml" for a watch on "."
			if ev.Name == dir && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				log.Warn().Str("dir", dir).Msg("the config directory was removed or renamed: config watch off; edits apply on SIGHUP")
				return
			}
			// Chmod alone (touch, chown, backup tools) changes nothing we read.
			if ev.Name != path || !ev.Has(fsnotify.Create|fsnotify.Write|fsnotify.Remove|fsnotify.Rename) {
				continue
			}
			if cw.accepted != nil {
				cw.accepted(ev)
			}
			timer.Reset(cw.debounce) // Go 1.23+: no stale tick after Reset
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				// Events were lost, maybe ours: read the file again to be sure.
				log.Warn().Err(err).Msg("config watch missed events: reloading to be sure")
				timer.Reset(cw.debounce)
				continue
			}
			log.Warn().Err(err).Msg("config watch error")
		case <-timer.C:
			cw.changed()
		}
	}
}
