//go:build !linux

package daemon

import "errors"

// dirWatch needs inotify's IN_CLOSE_WRITE to tell a finished file from one
// still being written; elsewhere the watch is off (SIGHUP reloads).
type dirWatch struct{ events chan fileEvent }

func watchDir(string) (*dirWatch, error) {
	return nil, errors.New("the config watch needs Linux's inotify")
}

func (w *dirWatch) close() {}
