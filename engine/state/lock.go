package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrLocked is the error when another process holds a cache directory.
var ErrLocked = errors.New("cache directory is in use by another process")

// lockDir takes dir's LOCK file (flock, exclusive, without waiting) and
// writes this process's id into it. The lock lasts until the file is
// closed or the process ends, however it ends.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("state: lock %s: %w", path, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			pid := ""
			if b, err := os.ReadFile(path); err == nil {
				if p := strings.TrimSpace(string(b)); p != "" {
					pid = " (pid " + p + ")"
				}
			}
			return nil, fmt.Errorf("state: %s: %w%s", dir, ErrLocked, pid)
		}
		return nil, fmt.Errorf("state: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

func unlockDir(f *os.File) {
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	f.Close()
}
