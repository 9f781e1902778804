//go:build !linux

package daemon

import (
	"fmt"

	"github.com/fsnotify/fsnotify"
)

// dirWatch, where there is no inotify, is fsnotify's portable watch. It
// cannot see a writer close the file (fsnotify keeps its close-after-write
// operation unexported, and kqueue and Windows have none), so each write
// counts as closed at once: only the quiet period guards a file still
// being written, and a writer that pauses longer than it is read half.
// The daemon's own platform, Linux, has the inotify watch instead.
type dirWatch struct {
	w      *fsnotify.Watcher
	events chan fileEvent
	stop   chan struct{}
	done   chan struct{}
}

func watchDir(dir string) (*dirWatch, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("fsnotify: %w", err)
	}
	if err := fw.Add(dir); err != nil {
		fw.Close()
		return nil, fmt.Errorf("fsnotify watch on %s: %w", dir, err)
	}
	w := &dirWatch{w: fw, events: make(chan fileEvent, 64), stop: make(chan struct{}), done: make(chan struct{})}
	go w.read(dir) // owned: close waits for it
	return w, nil
}

func (w *dirWatch) close() {
	close(w.stop)
	w.w.Close()
	<-w.done
}

// read turns fsnotify's events into fileEvents until the watch closes.
func (w *dirWatch) read(dir string) {
	defer close(w.done)
	defer close(w.events)
	for {
		select {
		case <-w.stop:
			return
		case err, ok := <-w.w.Errors:
			if !ok {
				return
			}
			if err == fsnotify.ErrEventOverflow && !w.send(fileEvent{Name: dir, Op: opOverflow}) {
				return
			}
		case e, ok := <-w.w.Events:
			if !ok {
				return
			}
			for _, ev := range portableEvents(e) {
				if !w.send(ev) {
					return
				}
			}
		}
	}
}

// portableEvents maps one fsnotify event to the watch loop's terms: a
// write is a write closed at once; a created file (a rename into place
// shows as one) starts the quiet period.
func portableEvents(e fsnotify.Event) []fileEvent {
	switch {
	case e.Has(fsnotify.Write):
		return []fileEvent{{Name: e.Name, Op: opWrite}, {Name: e.Name, Op: opCloseWrite}}
	case e.Has(fsnotify.Create):
		return []fileEvent{{Name: e.Name, Op: opMovedTo}}
	case e.Has(fsnotify.Remove | fsnotify.Rename):
		return []fileEvent{{Name: e.Name, Op: opGone}}
	}
	return nil
}

func (w *dirWatch) send(ev fileEvent) bool {
	select {
	case w.events <- ev:
		return true
	case <-w.stop:
		return false
	}
}
