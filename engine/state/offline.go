package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// DirInfo describes a cache directory as its files are (for
// `edgellmd cache stats`, without a model).
type DirInfo struct {
	Dir      string        `json:"dir"`
	InUse    bool          `json:"in_use"` // a process (a running daemon) holds the directory
	Bytes    int64         `json:"bytes"`  // of the segment files
	Segments []SegmentInfo `json:"segments"`
}

// SegmentInfo describes one segment file.
type SegmentInfo struct {
	Name        string `json:"name"`
	Bytes       int64  `json:"bytes"`
	Fingerprint string `json:"fingerprint"`     // "" when the header cannot be read
	Error       string `json:"error,omitempty"` // why the file cannot be read
	Pages       int    `json:"pages"`           // good page records
	Snapshots   int    `json:"snapshots"`       // good snapshot records
	Tokens      int64  `json:"tokens"`          // tokens of those snapshots
	Damaged     int    `json:"damaged"`         // records that fail their checksum, a truncated tail
}

// InspectDir reads every segment of dir and checks every record. It works
// while a daemon writes the directory (it reads what is there).
func InspectDir(dir string) (DirInfo, error) {
	info := DirInfo{Dir: dir}
	ids, err := listSegments(dir)
	if err != nil {
		return info, fmt.Errorf("state: %w", err)
	}
	info.InUse = dirInUse(dir)
	for i, id := range ids {
		path := filepath.Join(dir, segName(id))
		si := SegmentInfo{Name: segName(id)}
		if fi, err := os.Stat(path); err == nil {
			si.Bytes = fi.Size()
		}
		fp, st, err := scanSegment(path, id, func(typ byte, p []byte, _ diskLoc) {
			switch typ {
			case recPage:
				si.Pages++
			case recSnap:
				if m, err := parseSnap(p); err == nil {
					si.Snapshots++
					si.Tokens += int64(m.pos)
				} else {
					si.Damaged++
				}
			}
		})
		si.Fingerprint = fp
		if err != nil {
			si.Error = err.Error()
		}
		si.Damaged += st.damaged
		// The segment a running daemon appends to may end in a record
		// being written.
		if st.truncated > 0 && !(info.InUse && i == len(ids)-1) {
			si.Damaged++
		}
		info.Bytes += si.Bytes
		info.Segments = append(info.Segments, si)
	}
	return info, nil
}

// dirInUse reports whether a process holds dir's lock.
func dirInUse(dir string) bool {
	f, err := os.Open(filepath.Join(dir, lockName))
	if err != nil {
		return false
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	if err == nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return false
	}
	return errors.Is(err, unix.EWOULDBLOCK)
}

// ClearDir deletes the segment files of dir. It fails with ErrLocked while
// a process (a running daemon) holds the directory.
func ClearDir(dir string) (files int, bytes int64, err error) {
	if _, err := os.Stat(dir); err != nil {
		return 0, 0, fmt.Errorf("state: %w", err)
	}
	ids, err := listSegments(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("state: %w", err)
	}
	lockPath := filepath.Join(dir, lockName)
	_, statErr := os.Stat(lockPath)
	hadLock := statErr == nil
	if len(ids) == 0 && !hadLock {
		// not a cache directory (or an empty one): nothing to clear, and
		// nothing to leave behind in it
		return 0, 0, nil
	}
	lock, err := lockDir(dir)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if !hadLock {
			os.Remove(lockPath) // ours: the directory had none
		}
		unlockDir(lock)
	}()
	if ids, err = listSegments(dir); err != nil { // again, under the lock
		return 0, 0, fmt.Errorf("state: %w", err)
	}
	for _, id := range ids {
		path := filepath.Join(dir, segName(id))
		fi, err := os.Stat(path)
		if err != nil {
			continue
		}
		if err := os.Remove(path); err != nil {
			return files, bytes, fmt.Errorf("state: clear: %w", err)
		}
		files++
		bytes += fi.Size()
	}
	syncDir(dir)
	return files, bytes, nil
}
