package update

import (
	"archive/tar"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// Errors Apply and Rollback wrap, for callers that answer differently to
// each (HTTP status codes).
var (
	ErrSignature      = errors.New("bundle signature not trusted")
	ErrBadBundle      = errors.New("bundle rejected")
	ErrDowngrade      = errors.New("downgrade refused")
	ErrAlreadyCurrent = errors.New("bundle already current")
	ErrIncompatible   = errors.New("bundle incompatible with this machine")
	ErrNoSpace        = errors.New("not enough disk space")
	ErrHealthCheck    = errors.New("health check failed")
	ErrBusy           = errors.New("another update is in progress")
	ErrNoPrevious     = errors.New("no previous bundle to roll back to")
)

// CheckFunc is the health check of a staged bundle that is now current:
// load modelPath and show that it gives check's tokens (EngineCheck does).
// An error rolls the update back.
type CheckFunc func(ctx context.Context, modelPath string, check HealthCheck) error

// DefaultKeep is how many committed bundles Apply keeps by default.
const DefaultKeep = 3

// DefaultReserveBytes is the free space Apply leaves on the state
// directory's file system beyond the bundle's own bytes.
const DefaultReserveBytes = 64 << 20

// Options configure Apply and Rollback.
type Options struct {
	StateDir    string       // e.g. /var/lib/edgellmd; bundles go to StateDir/bundles/<version>/
	TrustedKeys []TrustedKey // keys that may sign a bundle (Apply)
	Check       CheckFunc    // required by Apply
	Platform    Platform     // checked against the manifest's compatibility
	// AllowDowngrade lets Apply install a version that is not newer than
	// the current one (never the current one itself).
	AllowDowngrade bool
	// DowngradeHint says how the caller's user allows a downgrade, for the
	// refusal's message ("pass --allow-downgrade", "add
	// ?allow_downgrade=true to the URL"); "" says nothing.
	DowngradeHint string
	// TrustedFrom says where TrustedKeys came from, for the refusal's
	// message when there are none ("/etc/edgellmd/trusted.d").
	TrustedFrom  string
	Keep         int   // committed bundles to keep; <= 0 means DefaultKeep. Current and previous are always kept.
	ReserveBytes int64 // < 0 means none, 0 means DefaultReserveBytes
	Log          zerolog.Logger

	// afterStep, when set, is called after each step of the sequence (tests
	// end the process there to simulate a crash).
	afterStep func(step string)
}

// Result is the outcome of Apply or Rollback.
type Result struct {
	Name     string `json:"name,omitempty"`
	Version  string `json:"version"`            // the bundle applied (or rolled back to)
	Previous string `json:"previous,omitempty"` // the committed version before
	// Current is the committed version after the call: Version when it
	// committed, Previous when it rolled back.
	Current    string   `json:"current,omitempty"`
	ModelPath  string   `json:"model_path,omitempty"` // model file of Current
	Committed  bool     `json:"committed"`
	RolledBack bool     `json:"rolled_back"`
	KeyID      string   `json:"key_id,omitempty"` // KeyID of the key that verified the bundle
	KeySource  string   `json:"key_source,omitempty"`
	Bytes      int64    `json:"bytes,omitempty"` // bundle file bytes staged
	Removed    []string `json:"removed,omitempty"`
	Error      string   `json:"error,omitempty"` // why it was refused or rolled back
}

// locked runs one sequence (Apply's, Rollback's) on the state directory:
// under its lock, with an applier and the state as recovered (a sequence a
// crash interrupted is put right first). what names the sequence in errors;
// an error is kept in Result.Error too.
func locked(opt Options, what string, seq func(a *applier, st *state, res *Result) error) (res Result, err error) {
	defer func() {
		if err != nil {
			res.Error = err.Error()
		}
	}()
	unlock, err := lockState(opt.StateDir, false)
	if err != nil {
		return res, err
	}
	defer unlock()
	a := newApplier(opt.StateDir, opt.Log, opt.afterStep)
	st, err := a.recover()
	if err != nil {
		return res, fmt.Errorf("%s: %w", what, err)
	}
	res.Previous, res.Current = st.Current, st.Current
	err = seq(a, st, &res)
	return res, err
}

// applier runs one sequence under the state lock.
type applier struct {
	dir       string
	log       zerolog.Logger
	afterStep func(string)
	trash     string // an installed bundle of the same version, set aside until the commit
	// chown, uid, gid: new files go to the state directory's owner.
	chown    bool
	uid, gid int
}

func newApplier(dir string, log zerolog.Logger, afterStep func(string)) *applier {
	a := &applier{dir: dir, log: log, afterStep: afterStep}
	a.uid, a.gid, a.chown = chownTarget(dir)
	return a
}

// restoreReplaced puts back the bundle Apply set aside for version.
func (a *applier) restoreReplaced(version string) {
	if a.trash == "" {
		return
	}
	target := filepath.Join(a.dir, bundlesName, version)
	if err := os.Rename(a.trash, target); err != nil {
		a.log.Warn().Err(err).Str("path", target).Msg("update: cannot put back the bundle that was set aside")
	}
	a.trash = ""
}

func (a *applier) step(name string) {
	if a.afterStep != nil {
		a.afterStep(name)
	}
}

func (a *applier) modelPath(version string, m *Manifest) string {
	return filepath.Join(a.dir, bundlesName, version, filepath.FromSlash(m.Model))
}

// Apply installs the bundle read from r: verify the manifest's signature,
// check compatibility, version and disk space, stream the files into a
// staging folder checking each size and hash, move it to
// bundles/<version>, record a trial, swap current, run opt.Check, then
// commit and prune — or swap current back. Every refusal before the swap
// leaves the state directory as it was; a health-check failure is undone
// and reported as ErrHealthCheck with Result.RolledBack set.
func Apply(ctx context.Context, r io.Reader, opt Options) (res Result, err error) {
	defer func() {
		if err != nil {
			res.Error = err.Error()
		}
	}()
	if opt.StateDir == "" {
		return res, errors.New("update: Options.StateDir is empty")
	}
	if opt.Check == nil {
		return res, errors.New("update: Options.Check is nil: a bundle is never committed unchecked")
	}
	if len(opt.TrustedKeys) == 0 {
		from := ""
		if opt.TrustedFrom != "" {
			from = " (" + opt.TrustedFrom + " holds no .pub file)"
		}
		return res, fmt.Errorf("%w: no trusted keys%s: nothing can verify the bundle's signature; put the public key it was signed with (KEYBASE.pub of edgellmd update keygen) there", ErrSignature, from)
	}
	keep := opt.Keep
	if keep <= 0 {
		keep = DefaultKeep
	}
	reserve := opt.ReserveBytes
	if reserve == 0 {
		reserve = DefaultReserveBytes
	}
	bundles := filepath.Join(opt.StateDir, bundlesName)
	if err := os.MkdirAll(bundles, 0o755); err != nil {
		return res, fmt.Errorf("update: %w", err)
	}
	return locked(opt, "update", func(a *applier, st *state, res *Result) error {
		return a.apply(ctx, r, opt, st, res, keep, reserve)
	})
}

// apply is Apply's sequence, under the state lock with st recovered.
func (a *applier) apply(ctx context.Context, r io.Reader, opt Options, st *state, res *Result, keep int, reserve int64) error {
	bundles := filepath.Join(opt.StateDir, bundlesName)
	tr := tar.NewReader(r)
	m, raw, sig, key, err := readHead(tr, opt.TrustedKeys)
	if err != nil {
		return err
	}
	res.Name, res.Version, res.KeyID, res.KeySource = m.Name, m.Version, KeyID(key.Key), key.Source
	a.step("verified")

	if err := m.Compatible(opt.Platform); err != nil {
		return err
	}
	if st.Current != "" {
		switch c := compareVersions(m.Version, st.Current); {
		case m.Version == st.Current:
			return fmt.Errorf("%w: version %s is installed and current", ErrAlreadyCurrent, m.Version)
		case c <= 0 && !opt.AllowDowngrade:
			hint := ""
			if opt.DowngradeHint != "" {
				hint = " (" + opt.DowngradeHint + " to install it anyway)"
			}
			return fmt.Errorf("%w: bundle %s is not newer than the current %s%s", ErrDowngrade, m.Version, st.Current, hint)
		}
	}
	if err := checkSpace(bundles, m.totalBytes()+int64(len(raw))+int64(len(sig)), max(reserve, 0)); err != nil {
		return err
	}

	staging, err := os.MkdirTemp(bundles, stagingPrefix+m.Version+"-")
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	staged := false
	defer func() {
		if !staged {
			os.RemoveAll(staging)
		}
	}()
	if err := a.stage(ctx, tr, m, raw, sig, staging); err != nil {
		return err
	}
	a.own(bundles)
	a.ownTree(staging)
	target := filepath.Join(bundles, m.Version)
	if _, err := os.Lstat(target); err == nil {
		// A bundle of this version is installed but not current (a
		// downgrade back to it, or a leftover): the verified one replaces it.
		// It is kept aside until the commit, and put back on a rollback.
		a.trash = filepath.Join(bundles, trashPrefix+m.Version+"-"+randomSuffix())
		if err := os.Rename(target, a.trash); err != nil {
			a.trash = ""
			return fmt.Errorf("update: %w", err)
		}
	}
	if err := os.Rename(staging, target); err != nil {
		a.restoreReplaced(m.Version)
		return fmt.Errorf("update: %w", err)
	}
	staged = true
	if err := syncDir(bundles); err != nil {
		return err
	}
	res.Bytes = m.totalBytes()
	a.step("staged")

	from := st.Current
	st.Trial = &Trial{Version: m.Version, From: from, Started: time.Now().UTC()}
	if err := a.writeState(st); err != nil {
		a.removeBundle(m.Version)
		a.restoreReplaced(m.Version)
		return err
	}
	a.step("trial")
	if err := a.setCurrent(m.Version); err != nil {
		return a.rollBack(st, m.Version, err, res)
	}
	a.step("swapped")

	modelPath := a.modelPath(m.Version, m)
	a.log.Info().Str("version", m.Version).Str("model", modelPath).Msg("update: bundle staged and current; running its health check")
	if err := opt.Check(ctx, modelPath, m.HealthCheck); err != nil {
		return a.rollBack(st, m.Version, fmt.Errorf("%w: %v", ErrHealthCheck, err), res)
	}
	a.step("checked")

	trial := *st
	if from != "" {
		st.Previous = from
	}
	st.Current, st.Trial = m.Version, nil
	st.History = pushHistory(st.History, m.Version)
	drop := prune(opt.StateDir, st, keep)
	if err := a.writeState(st); err != nil {
		// Not committed: undo now (if that fails too, the trial is still
		// recorded and Recover undoes it at the next start).
		*st = trial
		return a.rollBack(st, m.Version, fmt.Errorf("update: commit: %w", err), res)
	}
	a.step("committed")
	res.Committed, res.Current, res.ModelPath = true, m.Version, modelPath
	if a.trash != "" {
		os.RemoveAll(a.trash)
	}
	for _, v := range drop {
		a.removeBundle(v)
	}
	res.Removed = drop
	a.log.Info().Str("version", m.Version).Str("previous", from).Strs("removed", drop).Msg("update: bundle committed")
	return nil
}

// rollBack puts current back on the trial's From after cause, records the
// failure, removes the failed bundle and returns cause with what was done.
func (a *applier) rollBack(st *state, version string, cause error, res *Result) error {
	from := st.Trial.From
	a.log.Error().Err(cause).Str("version", version).Str("back_to", from).Msg("update: rolling back")
	if err := a.setCurrent(from); err != nil {
		return fmt.Errorf("%w; rolling back also failed (the next start will): %v", cause, err)
	}
	a.step("unswapped")
	st.Trial = nil
	st.LastFailure = &Failure{Version: version, At: time.Now().UTC(), Reason: cause.Error()}
	if err := a.writeState(st); err != nil {
		return fmt.Errorf("%w; recording the rollback failed (the next start will): %v", cause, err)
	}
	a.removeBundle(version)
	a.restoreReplaced(version)
	res.RolledBack, res.Current = true, from
	if from != "" {
		if m, err := checkBundle(a.dir, from); err == nil {
			res.ModelPath = a.modelPath(from, m)
		}
		return fmt.Errorf("%w; rolled back to %s", cause, from)
	}
	return fmt.Errorf("%w; rolled back (no bundle installed)", cause)
}

// readHead reads manifest.json and manifest.sig, the first two entries,
// and verifies the signature before the manifest is parsed.
func readHead(tr *tar.Reader, keys []TrustedKey) (*Manifest, []byte, []byte, TrustedKey, error) {
	var none TrustedKey
	read := func(want string, maxSize int64) ([]byte, error) {
		hdr, err := tr.Next()
		if err != nil {
			return nil, fmt.Errorf("%w: reading %s (the bundle must be a tar starting with %s then %s): %w", ErrBadBundle, want, ManifestName, SignatureName, err)
		}
		if hdr.Name != want || hdr.Typeflag != tar.TypeReg {
			return nil, fmt.Errorf("%w: entry %q where %s was expected (a bundle starts with %s then %s)", ErrBadBundle, hdr.Name, want, ManifestName, SignatureName)
		}
		if hdr.Size > maxSize {
			return nil, fmt.Errorf("%w: %s is %d bytes, at most %d allowed", ErrBadBundle, want, hdr.Size, maxSize)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("%w: reading %s: %w", ErrBadBundle, want, err)
		}
		return data, nil
	}
	raw, err := read(ManifestName, maxManifestBytes)
	if err != nil {
		return nil, nil, nil, none, err
	}
	sig, err := read(SignatureName, ed25519.SignatureSize)
	if err != nil {
		return nil, nil, nil, none, err
	}
	if len(sig) != ed25519.SignatureSize {
		return nil, nil, nil, none, fmt.Errorf("%w: %s is %d bytes, an ed25519 signature is %d", ErrSignature, SignatureName, len(sig), ed25519.SignatureSize)
	}
	var tried []string
	for _, k := range keys {
		if len(k.Key) == ed25519.PublicKeySize && ed25519.Verify(k.Key, raw, sig) {
			m, err := ParseManifest(raw)
			if err != nil {
				return nil, nil, nil, none, fmt.Errorf("%w: %v", ErrBadBundle, err)
			}
			return m, raw, sig, k, nil
		}
		t := "key " + KeyID(k.Key)
		if k.Source != "" {
			t += " from " + k.Source
		}
		tried = append(tried, t)
	}
	// An ed25519 signature does not say which key made it: say which keys
	// were tried and the two ways this happens.
	return nil, nil, nil, none, fmt.Errorf("%w: %s does not verify with any of the %d trusted keys (%s): the bundle was signed with a private key whose public key is not trusted here, or %s was changed after signing",
		ErrSignature, SignatureName, len(keys), strings.Join(tried, "; "), ManifestName)
}

// stage streams the remaining entries into dir, checking each against the
// manifest, then writes the manifest and signature beside them and fsyncs.
func (a *applier) stage(ctx context.Context, tr *tar.Reader, m *Manifest, raw, sig []byte, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	defer root.Close()
	folders := map[string]bool{}
	for _, f := range m.Files {
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			folders[d] = true
		}
	}
	byPath := make(map[string]File, len(m.Files))
	for _, f := range m.Files {
		byPath[f.Path] = f
	}
	seen := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: reading the tar after %d of %d files: %w", ErrBadBundle, len(seen), len(m.Files), err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		name := hdr.Name
		switch hdr.Typeflag {
		case tar.TypeReg:
		case tar.TypeDir:
			if d := strings.TrimSuffix(name, "/"); folders[d] && checkPath(d) == nil {
				continue
			}
			return fmt.Errorf("%w: folder entry %q holds no file of the manifest", ErrBadBundle, name)
		case tar.TypeSymlink, tar.TypeLink:
			return fmt.Errorf("%w: entry %q is a link (to %q); bundles hold regular files only", ErrBadBundle, name, hdr.Linkname)
		default:
			return fmt.Errorf("%w: entry %q is of tar type %q; bundles hold regular files only", ErrBadBundle, name, hdr.Typeflag)
		}
		if err := checkPath(name); err != nil {
			return fmt.Errorf("%w: entry %v", ErrBadBundle, err)
		}
		f, ok := byPath[name]
		switch {
		case !ok:
			return fmt.Errorf("%w: entry %q is not in the manifest", ErrBadBundle, name)
		case seen[name]:
			return fmt.Errorf("%w: entry %q appears twice", ErrBadBundle, name)
		case hdr.Size != f.Size:
			return fmt.Errorf("%w: entry %q is %d bytes, the manifest says %d", ErrBadBundle, name, hdr.Size, f.Size)
		}
		if err := writeChecked(root, tr, f); err != nil {
			return err
		}
		seen[name] = true
		a.step("file")
	}
	for _, f := range m.Files {
		if !seen[f.Path] {
			return fmt.Errorf("%w: the bundle ends without %q (truncated?)", ErrBadBundle, f.Path)
		}
	}
	for name, data := range map[string][]byte{ManifestName: raw, SignatureName: sig} {
		if err := writeRootFile(root, name, data); err != nil {
			return err
		}
	}
	// The files were fsynced one by one; now their folders, deepest first
	// does not matter as each is synced after its entries exist.
	for d := range folders {
		if err := syncDir(filepath.Join(dir, filepath.FromSlash(d))); err != nil {
			return err
		}
	}
	return syncDir(dir)
}

// writeChecked copies one entry into root, hashing it on the way, and
// keeps it only when size and SHA-256 match.
func writeChecked(root *os.Root, r io.Reader, f File) (err error) {
	if d := path.Dir(f.Path); d != "." {
		if err := root.MkdirAll(filepath.FromSlash(d), 0o755); err != nil {
			return fmt.Errorf("update: %w", err)
		}
	}
	name := filepath.FromSlash(f.Path)
	out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("update: %w", cerr)
		}
		if err != nil {
			root.Remove(name)
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(r, f.Size+1))
	if err != nil {
		var pe *fs.PathError
		switch {
		case errors.Is(err, syscall.ENOSPC):
			return fmt.Errorf("%w: writing %q: %w", ErrNoSpace, f.Path, err)
		case errors.As(err, &pe) && pe.Op == "write":
			return fmt.Errorf("update: writing %q: %w", f.Path, err) // the disk's fault, not the bundle's
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: %q is truncated after %d of %d bytes", ErrBadBundle, f.Path, n, f.Size)
		}
		return fmt.Errorf("%w: reading %q: %w", ErrBadBundle, f.Path, err)
	}
	if n != f.Size {
		return fmt.Errorf("%w: %q is %d bytes, the manifest says %d", ErrBadBundle, f.Path, n, f.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		return fmt.Errorf("%w: %q has sha256 %s, the manifest says %s", ErrBadBundle, f.Path, got, f.SHA256)
	}
	return out.Sync()
}

func writeRootFile(root *os.Root, name string, data []byte) error {
	out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	if _, err := out.Write(data); err != nil {
		out.Close()
		return fmt.Errorf("update: %w", err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return fmt.Errorf("update: %w", err)
	}
	return out.Close()
}

// checkSpace refuses when the file system holding dir has less than
// need+reserve bytes available to unprivileged users.
func checkSpace(dir string, need, reserve int64) error {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return fmt.Errorf("update: free space of %s: %w", dir, err)
	}
	avail := uint64(fs.Bavail) * uint64(fs.Bsize)
	if uint64(need)+uint64(reserve) > avail {
		return fmt.Errorf("%w: the bundle needs %d bytes plus %d in reserve, %s has %d available", ErrNoSpace, need, reserve, dir, avail)
	}
	return nil
}

// Rollback makes the previous committed bundle current again (and the
// current one previous, so a second Rollback undoes the first). The state
// is written first, then the symlink swapped: a crash in between is put
// right by Recover.
func Rollback(opt Options) (res Result, err error) {
	defer func() {
		if err != nil {
			res.Error = err.Error()
		}
	}()
	if _, err := os.Stat(opt.StateDir); err != nil {
		return res, fmt.Errorf("rollback: %w", err)
	}
	return locked(opt, "rollback", func(a *applier, st *state, res *Result) error {
		if st.Previous == "" {
			return fmt.Errorf("%w (current is %q)", ErrNoPrevious, st.Current)
		}
		m, err := checkBundle(opt.StateDir, st.Previous)
		if err != nil {
			return fmt.Errorf("rollback: %w", err)
		}
		st.Current, st.Previous = st.Previous, st.Current
		st.History = pushHistory(st.History, st.Current)
		if err := a.writeState(st); err != nil {
			return fmt.Errorf("rollback: %w", err)
		}
		a.step("rollback-state")
		if err := a.setCurrent(st.Current); err != nil {
			return fmt.Errorf("rollback: %w (the next start puts current right)", err)
		}
		res.Name, res.Version, res.Current, res.ModelPath, res.RolledBack, res.Committed = m.Name, st.Current, st.Current, a.modelPath(st.Current, m), true, true
		a.log.Info().Str("version", st.Current).Str("from", st.Previous).Msg("update: rolled back to the previous bundle")
		return nil
	})
}

func randomSuffix() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
