package state

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// logBuffer keeps what a logger wrote, for tests that check log lines (the
// writer goroutine logs while the test runs).
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// capturingLog logs to the test and to the returned buffer.
func capturingLog(t testing.TB) (zerolog.Logger, *logBuffer) {
	b := &logBuffer{}
	return zerolog.New(io.MultiWriter(zerolog.NewTestWriter(t), b)).Level(zerolog.InfoLevel), b
}

// nsEnv marks the child of a test that re-ran itself in a user and mount
// namespace to mount a tmpfs without being root.
const nsEnv = "EDGELLMD_STATE_MOUNT_NS"

// smallFS mounts a tmpfs of sizeBytes on a temporary directory (unmounted
// at the end of the test) and returns it, so that a test can fill a real
// filesystem. As root it mounts in place. Otherwise it runs the test again
// in a child process in new user and mount namespaces, where mounting a
// tmpfs is allowed, reports the child's result, and returns ok false: the
// caller returns. Without either, the test is skipped.
func smallFS(t *testing.T, sizeBytes int64) (dir string, ok bool) {
	t.Helper()
	dir = t.TempDir()
	err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", sizeBytes))
	if err == nil {
		// Registered after TempDir's removal, so it runs before it.
		t.Cleanup(func() {
			if err := syscall.Unmount(dir, 0); err != nil {
				t.Errorf("umount %s: %v", dir, err)
			}
		})
		return dir, true
	}
	if os.Getenv(nsEnv) != "" {
		t.Skipf("mount tmpfs in a user namespace: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), nsEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	out, cerr := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case cerr != nil && !errors.As(cerr, &exit):
		t.Skipf("mount tmpfs: %v; user namespace: %v", err, cerr)
	case bytes.Contains(out, []byte("--- SKIP")):
		t.Skipf("mount tmpfs: %v; in a user namespace:\n%s", err, out)
	case cerr != nil:
		t.Errorf("in a user namespace (mount tmpfs as this user: %v):\n%s", err, out)
	default:
		t.Logf("ran in a user namespace:\n%s", out)
	}
	return "", false
}

// fill writes a file in dir until the filesystem has no space left.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			return path
		}
	}
}

// checkSegments fails unless every segment file in dir is a good segment
// of fingerprint fp holding records, none damaged, and the files are what
// st counts.
func checkSegments(t *testing.T, dir, fp string, st Stats) {
	t.Helper()
	for _, p := range segments(t, dir) {
		id := 0
		fmt.Sscanf(filepath.Base(p), "%d", &id)
		got, ss, err := scanSegment(p, id, func(byte, []byte, diskLoc) {})
		switch {
		case err != nil:
			t.Errorf("%s: %v", p, err)
		case got != fp:
			t.Errorf("%s: fingerprint %q, want %q", p, got, fp)
		case ss.records == 0 || ss.damaged > 0 || ss.truncated > 0:
			t.Errorf("%s: %d records, %d damaged, %d bytes truncated", p, ss.records, ss.damaged, ss.truncated)
		}
	}
	if n := len(segments(t, dir)); n != st.DiskSegments {
		t.Errorf("%d segment files, Stats.DiskSegments %d", n, st.DiskSegments)
	}
	if b := diskFileBytes(t, dir); b != st.DiskBytes {
		t.Errorf("segment files hold %d bytes, Stats.DiskBytes %d", b, st.DiskBytes)
	}
}

// TestPersistDiskFull: on a full filesystem (a 2 MiB tmpfs) every publish
// fails to reach the disk and leaves no file or torn record behind, both
// when it appends to a segment and when it starts one (after a restart on
// the full disk); each is counted as a dropped write and the failure shows
// in Stats. Once space comes back the next publishes are written, and a
// restart reads every segment cleanly.
func TestPersistDiskFull(t *testing.T) {
	root, ok := smallFS(t, 2<<20)
	if !ok {
		return
	}
	m := loadGGUF(t, storiesPath, tensor.F16)
	V := m.Hyper().Vocab
	rng := rand.New(rand.NewPCG(16, 16))
	prompt := func() []int32 { return randTokens(rng, PageSize+10+rng.IntN(PageSize), V) }
	const fp = "stories full disk"
	dir := filepath.Join(root, "cache")
	opt := Options{MaxBytes: 1 << 30, Dir: dir, MaxDiskBytes: 1 << 30, Fingerprint: fp, Model: m}
	// start opens the cache with a log the test reads.
	start := func() (*Cache, *logBuffer) {
		t.Helper()
		o := opt
		var logged *logBuffer
		o.Log, logged = capturingLog(t)
		c, err := Open(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := c.WaitRestored(t.Context()); err != nil {
			t.Fatal(err)
		}
		flush(c) // the writer has seen the scan end
		return c, logged
	}
	// noBadLines fails if the log says a segment could not be read.
	noBadLines := func(when string, logged *logBuffer) {
		t.Helper()
		for _, bad := range []string{"unreadable segment", "damaged records", "another model"} {
			if strings.Contains(logged.String(), bad) {
				t.Errorf("%s: logged %q:\n%s", when, bad, logged)
			}
		}
	}
	var written [][]int32
	publish := func(c *Cache, n int, keep bool) {
		t.Helper()
		for range n {
			p := prompt()
			if ok, err := c.Publish(p, run(t, m, p)); err != nil || !ok {
				t.Fatalf("Publish: %v %v", ok, err)
			}
			if keep {
				written = append(written, p)
			}
		}
		flush(c)
	}
	// full checks the state after n publishes on the full disk.
	full := func(when string, c *Cache, n int, since time.Time) {
		t.Helper()
		st := c.Stats()
		if st.DroppedWrites != int64(n) || st.WriteErrors < int64(n) {
			t.Errorf("%s: %d publishes on a full disk: %d dropped writes, %d write errors", when, n, st.DroppedWrites, st.WriteErrors)
		}
		if !st.PersistFailing || !strings.Contains(st.PersistError, "no space left on device") || st.PersistErrorAt.Before(since) {
			t.Errorf("%s: PersistFailing %v, PersistError %q at %v", when, st.PersistFailing, st.PersistError, st.PersistErrorAt)
		}
		if st.DiskEntries != len(written) {
			t.Errorf("%s: %d snapshots on disk, want the %d written before", when, st.DiskEntries, len(written))
		}
		checkSegments(t, dir, fp, st)
	}

	c, _ := start()
	publish(c, 3, true)
	if st := c.Stats(); st.DiskEntries != 3 || st.PersistFailing || st.DroppedWrites != 0 {
		t.Fatalf("before the disk is full: %+v", st)
	}
	filler := fill(t, root)
	since := time.Now()
	const n = 30
	// Appends to the open segment fail (the first in part).
	publish(c, n, false)
	full("appending", c, n, since)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// After a restart the first write starts a segment: its header fails.
	c, logged := start()
	noBadLines("restart on the full disk", logged)
	publish(c, n, false)
	full("starting a segment", c, n, since)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	publish(c, 3, true)
	st := c.Stats()
	if st.DroppedWrites != n || st.PersistFailing || st.DiskEntries != len(written) {
		t.Errorf("space back: %d dropped writes (want %d), failing %v, %d snapshots on disk (want %d)",
			st.DroppedWrites, n, st.PersistFailing, st.DiskEntries, len(written))
	}
	if st.PersistError == "" {
		t.Error("space back: the last error is forgotten")
	}
	checkSegments(t, dir, fp, st)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	checkSegments(t, dir, fp, st)
	noBadLines("before the last restart", logged)

	c, logged = start()
	noBadLines("last restart", logged)
	st = c.Stats()
	if st.SkippedRecords != 0 || st.SkippedSegments != 0 || st.RestoredEntries != len(written) {
		t.Errorf("after restart: %d records and %d segments skipped, %d snapshots restored (want %d)",
			st.SkippedRecords, st.SkippedSegments, st.RestoredEntries, len(written))
	}
	for i, p := range written {
		if sn, ok := c.Lookup(p, len(p)); !ok || sn.Len != len(p) {
			t.Errorf("after restart: prompt %d restored %d of %d tokens", i, sn.Len, len(p))
		}
	}
}

// TestPersistRemovesEmptySegments: segment files that hold no record (an
// empty file, a header cut short, a header alone), as an older build left
// them on a full disk, are deleted after the scan without a warning; a
// file that is not a segment is still skipped with one, and kept.
func TestPersistRemovesEmptySegments(t *testing.T) {
	dir := t.TempDir()
	const fp = "stories"
	hdr := appendSegHeader(nil, fp)
	files := map[int][]byte{
		1: nil,
		2: hdr[:5],
		3: hdr[:len(hdr)-2],
		4: hdr,
		5: []byte("not a segment at all, but long enough"),
	}
	for id, b := range files {
		if err := os.WriteFile(filepath.Join(dir, segName(id)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	log, logged := capturingLog(t)
	c, err := Open(Options{MaxBytes: 1 << 20, Dir: dir, MaxDiskBytes: 1 << 20, Fingerprint: fp, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WaitRestored(t.Context()); err != nil {
		t.Fatal(err)
	}
	flush(c)
	if got, want := segments(t, dir), []string{filepath.Join(dir, segName(5))}; !slices.Equal(got, want) {
		t.Errorf("segments left %v, want %v", got, want)
	}
	st := c.Stats()
	if st.SkippedSegments != 1 || st.DiskSegments != 1 || st.DiskBytes != int64(len(files[5])) {
		t.Errorf("stats: %d skipped, %d segments of %d bytes; want 1, 1, %d", st.SkippedSegments, st.DiskSegments, st.DiskBytes, len(files[5]))
	}
	if n := strings.Count(logged.String(), "unreadable segment"); n != 1 {
		t.Errorf("%d unreadable-segment lines, want 1 (the file that is no segment):\n%s", n, logged)
	}
}
