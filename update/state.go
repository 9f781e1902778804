package update

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// Files and folders under the state directory.
const (
	stateFileName = "update.json"
	currentName   = "current" // symlink to bundles/<version>
	bundlesName   = "bundles"
	lockName      = ".update.lock"
	stagingPrefix = ".staging-"
	trashPrefix   = ".trash-"
	linkTmpPrefix = ".current.tmp-"
	stateTmpGlob  = ".update.json.tmp-*"
)

// Trial is an installed bundle that is current but not yet committed: its
// health check has not passed. At start, Recover rolls it back.
type Trial struct {
	Version string    `json:"version"`
	From    string    `json:"from,omitempty"` // the committed version before it ("" = none)
	Started time.Time `json:"started"`
}

// Failure records the last bundle that was rolled back, and why.
type Failure struct {
	Version string    `json:"version"`
	At      time.Time `json:"at"`
	Reason  string    `json:"reason"`
}

// state is update.json: the committed versions and the trial in progress.
// The current symlink follows it: when no trial is recorded, current names
// Current (Recover puts it right when a crash left it otherwise).
type state struct {
	Format      int      `json:"format"`
	Current     string   `json:"current,omitempty"`
	Previous    string   `json:"previous,omitempty"`
	Trial       *Trial   `json:"trial,omitempty"`
	History     []string `json:"history,omitempty"` // committed versions, oldest first, no repeats
	LastFailure *Failure `json:"last_failure,omitempty"`
}

func readState(dir string) (st state, exists bool, err error) {
	data, err := os.ReadFile(filepath.Join(dir, stateFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return state{Format: 1}, false, nil
	}
	if err != nil {
		return state{}, false, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return state{}, true, fmt.Errorf("%s: %w", filepath.Join(dir, stateFileName), err)
	}
	for _, v := range append([]string{st.Current, st.Previous}, st.History...) {
		if v != "" {
			if _, err := parseSemver(v); err != nil {
				return state{}, true, fmt.Errorf("%s: %w", filepath.Join(dir, stateFileName), err)
			}
		}
	}
	return st, true, nil
}

// writeState replaces update.json atomically: a temporary file is written
// and fsynced, renamed over the old one, and the folder is fsynced.
func (a *applier) writeState(st *state) error {
	st.Format = 1
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(a.dir, strings.Replace(stateTmpGlob, "*", "", 1)+"*")
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil { // CreateTemp makes it 0600
		tmp.Close()
		return fmt.Errorf("write state: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	a.own(tmp.Name())
	a.step("state-temp")
	if err := os.Rename(tmp.Name(), filepath.Join(a.dir, stateFileName)); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return syncDir(a.dir)
}

// setCurrent points the current symlink at bundles/<version> atomically
// (a symlink under a temporary name renamed over it), or removes it when
// version is "".
func (a *applier) setCurrent(version string) error {
	cur := filepath.Join(a.dir, currentName)
	if version == "" {
		if err := os.Remove(cur); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", cur, err)
		}
		return syncDir(a.dir)
	}
	tmp := filepath.Join(a.dir, linkTmpPrefix+randomSuffix())
	if err := os.Symlink(filepath.Join(bundlesName, version), tmp); err != nil {
		return fmt.Errorf("swap %s: %w", cur, err)
	}
	a.own(tmp)
	a.step("link-temp")
	if err := os.Rename(tmp, cur); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("swap %s: %w", cur, err)
	}
	return syncDir(a.dir)
}

// readCurrent returns the version the current symlink names, "" when there
// is none.
func readCurrent(dir string) (string, error) {
	cur := filepath.Join(dir, currentName)
	target, err := os.Readlink(cur)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w (want a symlink to %s/<version>)", cur, err, bundlesName)
	}
	v, ok := strings.CutPrefix(filepath.ToSlash(target), bundlesName+"/")
	if !ok || strings.Contains(v, "/") {
		return "", fmt.Errorf("%s points to %q, want %s/<version>", cur, target, bundlesName)
	}
	if _, err := parseSemver(v); err != nil {
		return "", fmt.Errorf("%s: %w", cur, err)
	}
	return v, nil
}

// chownTarget says whom new files under the state directory should
// belong to: its owner, when this process runs as root and the directory
// is not root's (the CLI run with sudo on a device whose daemon runs as
// _edgellmd, which must be able to read, replace and delete them).
func chownTarget(dir string) (uid, gid int, ok bool) {
	if os.Geteuid() != 0 {
		return 0, 0, false
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, 0, false
	}
	st, isUnix := fi.Sys().(*syscall.Stat_t)
	if !isUnix || st.Uid == 0 {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}

// own gives paths to the state directory's owner (see chownTarget).
func (a *applier) own(paths ...string) {
	if !a.chown {
		return
	}
	for _, p := range paths {
		if err := os.Lchown(p, a.uid, a.gid); err != nil {
			a.log.Warn().Err(err).Str("path", p).Msg("update: cannot hand the file to the state directory's owner")
		}
	}
}

// ownTree gives everything under root to the state directory's owner.
func (a *applier) ownTree(root string) {
	if !a.chown {
		return
	}
	filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err == nil {
			a.own(p)
		}
		return nil
	})
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// lockState takes the state directory's lock (flock on .update.lock): one
// apply, rollback or recover at a time, across processes (the daemon and
// the CLI). wait=false fails with ErrBusy instead of waiting.
func lockState(dir string, wait bool) (unlock func(), err error) {
	// Read-only is enough for flock, and lets the daemon's user open a
	// lock file that root's CLI created.
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if uid, gid, ok := chownTarget(dir); ok {
		os.Lchown(f.Name(), uid, gid)
	}
	how := unix.LOCK_EX
	if !wait {
		how |= unix.LOCK_NB
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (lock %s is held)", ErrBusy, filepath.Join(dir, lockName))
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}

// Recover is called by the daemon before it loads a model: an uncommitted
// trial (a crash or power loss during an update) is rolled back, leftovers
// of an interrupted staging are removed, and the current symlink is put
// back on the committed bundle. It returns the model file of the committed
// current bundle ("" when no bundle is installed). A missing state
// directory holds no bundle.
func Recover(stateDir string, log zerolog.Logger) (modelPath string, err error) {
	if _, err := os.Stat(stateDir); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	unlock, err := lockState(stateDir, true)
	if err != nil {
		return "", fmt.Errorf("recover: %w", err)
	}
	defer unlock()
	a := newApplier(stateDir, log, nil)
	st, err := a.recover()
	if err != nil {
		return "", fmt.Errorf("recover %s: %w", stateDir, err)
	}
	if st.Current == "" {
		return "", nil
	}
	m, err := checkBundle(stateDir, st.Current)
	if err != nil {
		return "", err
	}
	return a.modelPath(st.Current, m), nil
}

// recover brings the state directory to a committed state; see Recover.
// The lock is held.
func (a *applier) recover() (*state, error) {
	st, exists, err := readState(a.dir)
	if err != nil {
		return nil, err
	}
	a.removeLeftovers()
	if st.Trial != nil {
		tr := *st.Trial
		a.log.Warn().Str("version", tr.Version).Str("back_to", tr.From).Msg("update: rolling back a trial that was not committed (interrupted by a crash or power loss)")
		if err := a.setCurrent(tr.From); err != nil {
			return nil, err
		}
		st.Trial = nil
		st.LastFailure = &Failure{Version: tr.Version, At: time.Now().UTC(), Reason: "interrupted before its health check passed (crash or power loss); rolled back"}
		if err := a.writeState(&st); err != nil {
			return nil, err
		}
		if tr.Version != st.Current && tr.Version != st.Previous {
			a.removeBundle(tr.Version)
		}
	}
	link, err := readCurrent(a.dir)
	if err != nil {
		return nil, err
	}
	if !exists && link != "" {
		// Installed without a state file (by hand, or the file was lost):
		// the symlink is all there is to go by.
		st.Current = link
		st.History = []string{link}
		if err := a.writeState(&st); err != nil {
			return nil, err
		}
	}
	if link != st.Current {
		a.log.Warn().Str("link", link).Str("committed", st.Current).Msg("update: current symlink does not name the committed bundle; putting it back")
		if err := a.setCurrent(st.Current); err != nil {
			return nil, err
		}
	}
	if st.Current == "" {
		return &st, nil
	}
	if _, err := checkBundle(a.dir, st.Current); err != nil {
		if st.Previous == "" {
			return nil, err
		}
		if _, perr := checkBundle(a.dir, st.Previous); perr != nil {
			return nil, fmt.Errorf("%w; the previous bundle is broken too: %v", err, perr)
		}
		a.log.Error().Err(err).Str("back_to", st.Previous).Msg("update: the current bundle is broken; switching to the previous one")
		broken := st.Current
		st.Current, st.Previous = st.Previous, ""
		st.LastFailure = &Failure{Version: broken, At: time.Now().UTC(), Reason: err.Error()}
		if err := a.writeState(&st); err != nil {
			return nil, err
		}
		if err := a.setCurrent(st.Current); err != nil {
			return nil, err
		}
	}
	return &st, nil
}

// removeLeftovers deletes what an interrupted apply may leave: staging
// and trash folders, temporary symlinks and state files.
func (a *applier) removeLeftovers() {
	bundles := filepath.Join(a.dir, bundlesName)
	for _, pat := range []string{
		filepath.Join(bundles, stagingPrefix+"*"), filepath.Join(bundles, trashPrefix+"*"),
		filepath.Join(a.dir, linkTmpPrefix+"*"), filepath.Join(a.dir, stateTmpGlob),
	} {
		matches, _ := filepath.Glob(pat)
		for _, m := range matches {
			if err := os.RemoveAll(m); err != nil {
				a.log.Warn().Err(err).Str("path", m).Msg("update: cannot remove a leftover")
			}
		}
	}
}

func (a *applier) removeBundle(version string) {
	if version == "" {
		return
	}
	p := filepath.Join(a.dir, bundlesName, version)
	if err := os.RemoveAll(p); err != nil {
		a.log.Warn().Err(err).Str("path", p).Msg("update: cannot remove a bundle")
	}
}

// checkBundle reads an installed bundle's manifest and checks that its
// files are there with their sizes (hashes were checked when it was
// staged; reading a large model again at every start would be slow).
func checkBundle(dir, version string) (*Manifest, error) {
	bdir := filepath.Join(dir, bundlesName, version)
	data, err := os.ReadFile(filepath.Join(bdir, ManifestName))
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", version, err)
	}
	m, err := ParseManifest(data)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", version, err)
	}
	if m.Version != version {
		return nil, fmt.Errorf("bundle %s: its manifest says version %s", bdir, m.Version)
	}
	for _, f := range m.Files {
		p := filepath.Join(bdir, filepath.FromSlash(f.Path))
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
			return nil, fmt.Errorf("bundle %s: %w", version, err)
		case !fi.Mode().IsRegular():
			return nil, fmt.Errorf("bundle %s: %s is not a regular file", version, p)
		case fi.Size() != f.Size:
			return nil, fmt.Errorf("bundle %s: %s is %d bytes, its manifest says %d", version, p, fi.Size(), f.Size)
		}
	}
	return m, nil
}

// prune picks the bundles to delete: all but current, previous and the
// last keep committed ones. It trims st.History to match; the caller
// writes the state, then deletes.
func prune(dir string, st *state, keep int) []string {
	kept := map[string]bool{st.Current: true, st.Previous: true}
	if len(st.History) > keep {
		st.History = slices.Clone(st.History[len(st.History)-keep:])
	}
	for _, v := range st.History {
		kept[v] = true
	}
	ents, _ := os.ReadDir(filepath.Join(dir, bundlesName))
	var drop []string
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, ".") || kept[n] {
			continue
		}
		if _, err := parseSemver(n); err == nil {
			drop = append(drop, n)
		}
	}
	return drop
}

// pushHistory appends v as the latest committed version.
func pushHistory(h []string, v string) []string {
	h = slices.DeleteFunc(slices.Clone(h), func(x string) bool { return x == v })
	return append(h, v)
}

// BundleInfo describes an installed bundle.
type BundleInfo struct {
	Version   string `json:"version"`
	Name      string `json:"name,omitempty"`
	ModelPath string `json:"model_path,omitempty"`
	Bytes     int64  `json:"bytes,omitempty"`
	Error     string `json:"error,omitempty"` // why the bundle is not usable
}

// Status is what `update status` shows.
type Status struct {
	StateDir    string       `json:"state_dir"`
	Current     *BundleInfo  `json:"current,omitempty"`
	Previous    *BundleInfo  `json:"previous,omitempty"`
	Link        string       `json:"link,omitempty"` // the version the current symlink names
	Trial       *Trial       `json:"trial,omitempty"`
	LastFailure *Failure     `json:"last_failure,omitempty"`
	Installed   []BundleInfo `json:"installed"`
}

// ReadStatus reads the state directory without changing it.
func ReadStatus(stateDir string) (Status, error) {
	s := Status{StateDir: stateDir, Installed: []BundleInfo{}}
	st, _, err := readState(stateDir)
	if err != nil {
		return s, err
	}
	s.Trial, s.LastFailure = st.Trial, st.LastFailure
	if s.Link, err = readCurrent(stateDir); err != nil {
		return s, err
	}
	a := &applier{dir: stateDir}
	info := func(v string) BundleInfo {
		b := BundleInfo{Version: v}
		m, err := checkBundle(stateDir, v)
		if err != nil {
			b.Error = err.Error()
			return b
		}
		b.Name, b.ModelPath, b.Bytes = m.Name, a.modelPath(v, m), m.totalBytes()
		return b
	}
	if st.Current != "" {
		b := info(st.Current)
		s.Current = &b
	}
	if st.Previous != "" {
		b := info(st.Previous)
		s.Previous = &b
	}
	ents, err := os.ReadDir(filepath.Join(stateDir, bundlesName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return s, err
	}
	for _, e := range ents {
		if _, err := parseSemver(e.Name()); err == nil && e.IsDir() {
			s.Installed = append(s.Installed, info(e.Name()))
		}
	}
	slices.SortFunc(s.Installed, func(x, y BundleInfo) int { return compareVersions(x.Version, y.Version) })
	return s, nil
}
