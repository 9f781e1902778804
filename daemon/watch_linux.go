package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirWatch is an inotify watch on one directory. fsnotify does not export
// IN_CLOSE_WRITE, which is what says that a file written in place is done.
type dirWatch struct {
	f      *os.File
	events chan fileEvent
	stop   chan struct{} // closed by close: the reader stops sending
	done   chan struct{} // the reader has returned
}

const dirWatchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_MOVED_TO |
	unix.IN_MOVED_FROM | unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// watchDir starts watching dir; close stops it and waits for its reader.
func watchDir(dir string) (*dirWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, dirWatchMask); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("inotify watch on %s: %w", dir, err)
	}
	// A non-blocking descriptor goes to Go's poller: close unblocks Read.
	w := &dirWatch{f: os.NewFile(uintptr(fd), "inotify"), events: make(chan fileEvent, 64),
		stop: make(chan struct{}), done: make(chan struct{})}
	go w.read(dir) // owned: close waits for it
	return w, nil
}

func (w *dirWatch) close() {
	close(w.stop)
	w.f.Close()
	<-w.done
}

// read turns the kernel's records into fileEvents until the watch closes
// (the channel is closed then).
func (w *dirWatch) read(dir string) {
	defer close(w.done)
	defer close(w.events)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				w.send(fileEvent{Name: dir, Op: opDirGone})
			}
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			raw := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(raw.Len)]
			off += unix.SizeofInotifyEvent + int(raw.Len)
			ev := fileEvent{Name: dir}
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if len(name) > 0 {
				ev.Name = filepath.Join(dir, string(name))
			}
			m := raw.Mask
			if m&unix.IN_CREATE != 0 {
				ev.Op |= opCreate
			}
			if m&unix.IN_MODIFY != 0 {
				ev.Op |= opWrite
			}
			if m&unix.IN_CLOSE_WRITE != 0 {
				ev.Op |= opCloseWrite
			}
			if m&unix.IN_MOVED_TO != 0 {
				ev.Op |= opMovedTo
			}
			if m&(unix.IN_MOVED_FROM|unix.IN_DELETE) != 0 {
				ev.Op |= opGone
			}
			if m&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED|unix.IN_UNMOUNT) != 0 {
				ev.Op |= opDirGone
			}
			if m&unix.IN_Q_OVERFLOW != 0 {
				ev.Op |= opOverflow
			}
			if ev.Op != 0 && !w.send(ev) {
				return
			}
		}
	}
}

// send hands ev to the loop; false once the watch is closing.
func (w *dirWatch) send(ev fileEvent) bool {
	select {
	case w.events <- ev:
		return true
	case <-w.stop:
		return false
	}
}
