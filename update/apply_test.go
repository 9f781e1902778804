package update

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine"
)

// TestApplyCommitsAndServes applies a bundle of the real model with the
// real engine health check: the expected tokens are the engine's own greedy
// output, recorded at pack time as `update pack --model-check` does.
func TestApplyCommitsAndServes(t *testing.T) {
	kp := newKeys(t)
	src := bundleDir(t, nil)
	check := EngineCheck(CheckOptions(1))
	hc := HealthCheck{Prompt: "Once upon a time", Tokens: expectedTokens(t, filepath.Join(src, "model.gguf"), "Once upon a time", 8)}
	state := t.TempDir()
	opt := testOptions(state, kp)
	opt.Check = check
	res := mustApply(t, pack(t, kp, src, "1.0.0", &hc), opt)
	if res.Version != "1.0.0" || res.Previous != "" || res.KeyID != KeyID(kp.pub.Key) || res.RolledBack {
		t.Fatalf("result %+v", res)
	}
	wantCurrent(t, state, "1.0.0")
	for _, name := range []string{"model.gguf", "docs/README.txt"} {
		a, _ := os.ReadFile(filepath.Join(src, name))
		b, err := os.ReadFile(filepath.Join(state, "current", name))
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("%s not installed as packed: %v", name, err)
		}
	}
	// The model the daemon would load passes the check again.
	model, err := Recover(state, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := check(context.Background(), model, hc); err != nil {
		t.Fatal(err)
	}
	// An upgrade keeps the first as previous.
	res = mustApply(t, pack(t, kp, src, "1.1.0", &hc), opt)
	if res.Previous != "1.0.0" || res.Current != "1.1.0" {
		t.Fatalf("result %+v", res)
	}
	wantCurrent(t, state, "1.1.0")
	s, err := ReadStatus(state)
	if err != nil {
		t.Fatal(err)
	}
	if s.Current.Version != "1.1.0" || s.Previous.Version != "1.0.0" || len(s.Installed) != 2 || s.Current.Name != "test-model" {
		t.Fatalf("status %+v", s)
	}
}

// expectedTokens is what `update pack --model-check` records: the
// engine's greedy tokens for prompt.
func expectedTokens(t *testing.T, model, prompt string, n int) []int32 {
	t.Helper()
	e, err := engine.Load(model, CheckOptions(1))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	got, err := GreedyTokens(context.Background(), e, prompt, n)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d tokens, want %d", len(got), n)
	}
	return got
}

// TestHealthCheckFailureRollsBack: a bundle whose recorded tokens the model
// does not produce is rolled back, with current on the old bundle.
func TestHealthCheckFailureRollsBack(t *testing.T) {
	kp := newKeys(t)
	src := bundleDir(t, nil)
	good := HealthCheck{Prompt: "Once upon a time", Tokens: expectedTokens(t, filepath.Join(src, "model.gguf"), "Once upon a time", 6)}
	bad := HealthCheck{Prompt: good.Prompt, Tokens: slices.Clone(good.Tokens)}
	bad.Tokens[3] = (bad.Tokens[3] + 1) % 512
	state := t.TempDir()
	opt := testOptions(state, kp)
	opt.Check = EngineCheck(CheckOptions(1))

	// First install failing: no bundle stays current.
	res, err := Apply(context.Background(), bytes.NewReader(pack(t, kp, src, "0.9.0", &bad)), opt)
	if !errors.Is(err, ErrHealthCheck) || !res.RolledBack || res.Committed {
		t.Fatalf("err %v, result %+v", err, res)
	}
	if !strings.Contains(err.Error(), "position 3") {
		t.Fatalf("error does not say where the tokens differ: %v", err)
	}
	wantCurrent(t, state, "")
	if _, err := os.Stat(filepath.Join(state, bundlesName, "0.9.0")); !os.IsNotExist(err) {
		t.Fatalf("failed bundle left on disk: %v", err)
	}

	mustApply(t, pack(t, kp, src, "1.0.0", &good), opt)
	res, err = Apply(context.Background(), bytes.NewReader(pack(t, kp, src, "2.0.0", &bad)), opt)
	if !errors.Is(err, ErrHealthCheck) || !res.RolledBack || res.Current != "1.0.0" {
		t.Fatalf("err %v, result %+v", err, res)
	}
	if !strings.Contains(err.Error(), "rolled back to 1.0.0") {
		t.Fatalf("error %v", err)
	}
	wantCurrent(t, state, "1.0.0")
	s, err := ReadStatus(state)
	if err != nil {
		t.Fatal(err)
	}
	if s.LastFailure == nil || s.LastFailure.Version != "2.0.0" || len(s.Installed) != 1 {
		t.Fatalf("status %+v", s)
	}
}

// TestTamperedBundlesRefused: every kind of bad bundle is refused with its
// error, and the state directory is exactly as it was.
func TestTamperedBundlesRefused(t *testing.T) {
	kp, other := newKeys(t), newKeys(t)
	src := bundleDir(t, bytes.Repeat([]byte("GGUF model bytes for the tamper tests. "), 100)) // 3900 bytes
	good := pack(t, kp, src, "2.0.0", nil)
	ents := readTar(t, good) // manifest.json, manifest.sig, docs/README.txt, model.gguf
	if len(ents) != 4 || ents[3].name != "model.gguf" {
		t.Fatalf("unexpected bundle layout: %v", ents)
	}
	raw, sig := ents[0].data, ents[1].data
	m, err := ParseManifest(raw)
	if err != nil {
		t.Fatal(err)
	}
	// resign rebuilds a bundle whose manifest was edited, signed by kp:
	// the signature holds, so what catches the problem is what follows.
	resign := func(edit func(*Manifest), files ...entry) []byte {
		mm := *m
		mm.Files = slices.Clone(m.Files)
		edit(&mm)
		data, s := signed(t, kp, &mm)
		return writeTar(t, append([]entry{{name: ManifestName, data: data}, {name: SignatureName, data: s}}, files...))
	}
	flip := func(b []byte, i int) []byte { c := slices.Clone(b); c[i] ^= 0x01; return c }
	head := []entry{ents[0], ents[1]}
	with := func(extra ...entry) []byte { return writeTar(t, append(slices.Clone(head), extra...)) }
	readme, model := ents[2], ents[3]
	otherSig := readTar(t, pack(t, other, src, "2.0.0", nil))[1]

	cases := []struct {
		name   string
		bundle []byte
		want   error
		msg    string
	}{
		{"flipped byte in a file", with(readme, entry{name: "model.gguf", data: flip(model.data, 40)}), ErrBadBundle, "sha256"},
		{"flipped byte in the manifest", writeTar(t, []entry{{name: ManifestName, data: flip(raw, len(raw)/2)}, ents[1], readme, model}), ErrSignature, "does not verify"},
		{"signed by an untrusted key", writeTar(t, []entry{ents[0], otherSig, readme, model}), ErrSignature,
			"does not verify with any of the 1 trusted keys (key " + KeyID(kp.pub.Key) + " from " + kp.pub.Source + "): the bundle was signed with a private key whose public key is not trusted here, or manifest.json was changed after signing"},
		{"signature truncated", writeTar(t, []entry{ents[0], {name: SignatureName, data: sig[:63]}, readme, model}), ErrSignature, "64"},
		{"truncated tar, inside a file", good[:len(good)-1024-2000], ErrBadBundle, "truncated"},
		{"truncated tar, between files", good[:len(good)-2048], ErrBadBundle, "truncated"},
		{"truncated tar, at the manifest", good[:700], ErrBadBundle, ""},
		{"empty body", nil, ErrBadBundle, "manifest.json"},
		{"not a tar", []byte(strings.Repeat("not a tar at all ", 64)), ErrBadBundle, ""},
		{"path traversal entry", with(readme, model, entry{name: "../evil", data: []byte("x")}), ErrBadBundle, "leaves the bundle"},
		{"absolute path entry", with(readme, model, entry{name: "/etc/evil", data: []byte("x")}), ErrBadBundle, "absolute"},
		{"path traversal in a signed manifest", resign(func(mm *Manifest) { mm.Files[0].Path = "../docs/README.txt" },
			entry{name: "../docs/README.txt", data: readme.data}, model), ErrBadBundle, "leaves the bundle"},
		{"symlink entry", with(entry{name: "docs/README.txt", typeflag: '2', link: "/etc/passwd"}, model), ErrBadBundle, "link"},
		{"symlink entry named in a signed manifest", resign(func(*Manifest) {},
			entry{name: "docs/README.txt", typeflag: '2', link: "../../../etc/passwd"}, model), ErrBadBundle, "link"},
		{"hard link entry", with(entry{name: "docs/README.txt", typeflag: '1', link: "model.gguf"}, model), ErrBadBundle, "link"},
		{"extra file", with(readme, model, entry{name: "extra.bin", data: []byte("x")}), ErrBadBundle, "not in the manifest"},
		{"missing file", with(model), ErrBadBundle, "ends without"},
		{"duplicate entry", with(readme, readme, model), ErrBadBundle, "twice"},
		{"oversized entry", with(entry{name: "docs/README.txt", data: append(slices.Clone(readme.data), 'x')}, model), ErrBadBundle, "the manifest says"},
		{"stray folder entry", with(entry{name: "other/", typeflag: '5'}, readme, model), ErrBadBundle, "folder"},
		{"manifest not first", writeTar(t, []entry{readme, ents[0], ents[1], model}), ErrBadBundle, "where manifest.json was expected"},
		{"re-signed unchanged manifest (control)", resign(func(*Manifest) {}, readme, model), nil, ""},
		{"manifest names a missing model", resign(func(mm *Manifest) { mm.Model = "nope.gguf" }, readme, model), ErrBadBundle, "nope.gguf"},
		{"incompatible arch", resign(func(mm *Manifest) { mm.Compatibility.Arch = []string{"mips"} }, readme, model), ErrIncompatible, "mips"},
		{"incompatible device family", resign(func(mm *Manifest) { mm.Compatibility.DeviceFamily = []string{"Thor"} }, readme, model), ErrIncompatible, "not a Jetson"},
		{"needs a newer edgellmd", resign(func(mm *Manifest) { mm.Compatibility.MinVersion = "9.0.0" }, readme, model), ErrIncompatible, "9.0.0"},
		{"no room on disk", resign(func(mm *Manifest) { mm.Files[1].Size = 1 << 61 }, readme, model), ErrNoSpace, "available"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			opt := testOptions(state, kp)
			mustApply(t, pack(t, kp, src, "1.0.0", nil), opt)
			before := snapshotTree(t, state)
			res, err := Apply(context.Background(), bytes.NewReader(tc.bundle), opt)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("control case refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			t.Logf("refused: %v", err)
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not say %q", err, tc.msg)
			}
			if res.Committed || res.Error == "" {
				t.Fatalf("result %+v", res)
			}
			if after := snapshotTree(t, state); after != before {
				t.Fatalf("state directory changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			wantCurrent(t, state, "1.0.0")
		})
	}
}

func TestDowngradeRefused(t *testing.T) {
	kp := newKeys(t)
	src := bundleDir(t, []byte("model"))
	state := t.TempDir()
	opt := testOptions(state, kp)
	opt.DowngradeHint = "add ?allow_downgrade=true to the URL"
	mustApply(t, pack(t, kp, src, "2.0.0", nil), opt)
	before := snapshotTree(t, state)
	for _, tc := range []struct {
		version string
		want    error
	}{{"1.9.9", ErrDowngrade}, {"2.0.0-rc.1", ErrDowngrade}, {"2.0.0+rebuild", ErrDowngrade}, {"2.0.0", ErrAlreadyCurrent}} {
		_, err := Apply(context.Background(), bytes.NewReader(pack(t, kp, src, tc.version, nil)), opt)
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: err %v, want %v", tc.version, err, tc.want)
		}
		// The caller's way to allow it, not another's (the CLI's flag).
		if tc.want == ErrDowngrade && !strings.HasSuffix(err.Error(), "(add ?allow_downgrade=true to the URL to install it anyway)") {
			t.Fatalf("%s: %v does not say how to allow it", tc.version, err)
		}
		if after := snapshotTree(t, state); after != before {
			t.Fatalf("%s: state changed", tc.version)
		}
	}
	opt.AllowDowngrade = true
	if _, err := Apply(context.Background(), bytes.NewReader(pack(t, kp, src, "2.0.0", nil)), opt); !errors.Is(err, ErrAlreadyCurrent) {
		t.Fatalf("reapplying the current version: %v", err)
	}
	res := mustApply(t, pack(t, kp, src, "1.5.0", nil), opt)
	if res.Previous != "2.0.0" {
		t.Fatalf("result %+v", res)
	}
	wantCurrent(t, state, "1.5.0")
}

func TestRollback(t *testing.T) {
	kp := newKeys(t)
	src := bundleDir(t, []byte("model"))
	state := t.TempDir()
	opt := testOptions(state, kp)
	if _, err := Rollback(opt); err == nil {
		t.Fatal("rollback with nothing installed succeeded")
	}
	mustApply(t, pack(t, kp, src, "1.0.0", nil), opt)
	if _, err := Rollback(opt); !errors.Is(err, ErrNoPrevious) {
		t.Fatalf("rollback with one bundle: %v", err)
	}
	mustApply(t, pack(t, kp, src, "1.1.0", nil), opt)
	res, err := Rollback(opt)
	if err != nil || res.Current != "1.0.0" || res.Previous != "1.1.0" {
		t.Fatalf("rollback: %v %+v", err, res)
	}
	wantCurrent(t, state, "1.0.0")
	if _, err := Rollback(opt); err != nil { // and forward again
		t.Fatal(err)
	}
	wantCurrent(t, state, "1.1.0")
}

// TestKeepLastN: older bundles are pruned, never current or previous.
func TestKeepLastN(t *testing.T) {
	kp := newKeys(t)
	src := bundleDir(t, []byte("model"))
	state := t.TempDir()
	opt := testOptions(state, kp)
	installed := func() []string {
		s, err := ReadStatus(state)
		if err != nil {
			t.Fatal(err)
		}
		var v []string
		for _, b := range s.Installed {
			v = append(v, b.Version)
		}
		return v
	}
	for _, v := range []string{"1.0.0", "2.0.0", "3.0.0", "4.0.0", "5.0.0"} {
		mustApply(t, pack(t, kp, src, v, nil), opt)
	}
	if got := installed(); !slices.Equal(got, []string{"3.0.0", "4.0.0", "5.0.0"}) {
		t.Fatalf("installed %v", got)
	}
	// Roll back to 4, then apply 6 keeping 2: current 6 and previous 4
	// stay even though 5 is newer than 4.
	if _, err := Rollback(opt); err != nil {
		t.Fatal(err)
	}
	opt.Keep = 1
	res := mustApply(t, pack(t, kp, src, "6.0.0", nil), opt)
	if got := installed(); !slices.Equal(got, []string{"4.0.0", "6.0.0"}) {
		t.Fatalf("installed %v (removed %v)", got, res.Removed)
	}
	wantCurrent(t, state, "6.0.0")
	if _, err := Rollback(opt); err != nil {
		t.Fatal(err)
	}
	wantCurrent(t, state, "4.0.0")
}

func TestBusy(t *testing.T) {
	kp := newKeys(t)
	state := t.TempDir()
	unlock, err := lockState(state, false)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	opt := testOptions(state, kp)
	if _, err := Apply(context.Background(), bytes.NewReader(pack(t, kp, bundleDir(t, []byte("m")), "1.0.0", nil)), opt); !errors.Is(err, ErrBusy) {
		t.Fatalf("apply under a held lock: %v", err)
	}
	if _, err := Rollback(opt); !errors.Is(err, ErrBusy) {
		t.Fatalf("rollback under a held lock: %v", err)
	}
}

func TestApplyNeedsKeysAndCheck(t *testing.T) {
	kp := newKeys(t)
	opt := testOptions(t.TempDir(), kp)
	opt.TrustedKeys = nil
	if _, err := Apply(context.Background(), bytes.NewReader(nil), opt); !errors.Is(err, ErrSignature) {
		t.Fatalf("no keys: %v", err)
	}
	opt = testOptions(t.TempDir(), kp)
	opt.Check = nil
	if _, err := Apply(context.Background(), bytes.NewReader(nil), opt); err == nil {
		t.Fatal("nil check accepted")
	}
}

func TestRecoverEmpty(t *testing.T) {
	for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "absent")} {
		model, err := Recover(dir, zerolog.Nop())
		if err != nil || model != "" {
			t.Fatalf("%s: %q, %v", dir, model, err)
		}
	}
}

// TestRecoverAdoptsLinkWithoutState: a bundle folder and a current symlink
// with no state file (installed by hand) are taken as committed.
func TestRecoverAdoptsLinkWithoutState(t *testing.T) {
	kp := newKeys(t)
	state := t.TempDir()
	mustApply(t, pack(t, kp, bundleDir(t, []byte("m")), "1.0.0", nil), testOptions(state, kp))
	if err := os.Remove(filepath.Join(state, stateFileName)); err != nil {
		t.Fatal(err)
	}
	wantCurrent(t, state, "1.0.0")
}

// TestRecoverBrokenCurrent: a current bundle whose model file went missing
// falls back to the previous one.
func TestRecoverBrokenCurrent(t *testing.T) {
	kp := newKeys(t)
	state := t.TempDir()
	opt := testOptions(state, kp)
	src := bundleDir(t, []byte("m"))
	mustApply(t, pack(t, kp, src, "1.0.0", nil), opt)
	mustApply(t, pack(t, kp, src, "1.1.0", nil), opt)
	if err := os.Remove(filepath.Join(state, bundlesName, "1.1.0", "model.gguf")); err != nil {
		t.Fatal(err)
	}
	wantCurrent(t, state, "1.0.0")
}

func TestStatusJSON(t *testing.T) {
	kp := newKeys(t)
	state := t.TempDir()
	mustApply(t, pack(t, kp, bundleDir(t, []byte("m")), "1.0.0", nil), testOptions(state, kp))
	s, err := ReadStatus(state)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"current":{"version":"1.0.0"`, `"link":"1.0.0"`, `"installed":[`} {
		if !strings.Contains(string(data), want) {
			t.Fatalf("status JSON %s lacks %s", data, want)
		}
	}
}

// TestRootHandsFilesToStateOwner: run as root (sudo edgellmd update apply)
// on a state directory owned by the daemon's user, everything Apply creates
// belongs to that user, and the state file is readable by it.
func TestRootHandsFilesToStateOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	const uid, gid = 4321, 4322
	kp := newKeys(t)
	state := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(state, uid, gid); err != nil {
		t.Fatal(err)
	}
	mustApply(t, pack(t, kp, bundleDir(t, []byte("m")), "1.0.0", nil), testOptions(state, kp))
	err := filepath.WalkDir(state, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != uid || st.Gid != gid {
			t.Errorf("%s belongs to %d:%d", p, st.Uid, st.Gid)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(state, stateFileName)); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("state file mode: %v %v", fi.Mode(), err)
	}
}

// TestHealthCheckIndependentOfThreads: pack may record the tokens with one
// thread count and the device check with another; greedy output must agree.
func TestHealthCheckIndependentOfThreads(t *testing.T) {
	var runs [][]int32
	for _, threads := range []int{1, 2, 3} {
		e, err := engine.Load(testModel, CheckOptions(threads))
		if err != nil {
			t.Fatal(err)
		}
		got, err := GreedyTokens(context.Background(), e, "Once upon a time", 24)
		e.Close()
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, got)
	}
	for i := 1; i < len(runs); i++ {
		if !slices.Equal(runs[0], runs[i]) {
			t.Fatalf("tokens differ between thread counts: %v vs %v", runs[0], runs[i])
		}
	}
}

// TestPackIsDeterministic: the same folder, options and key give the same
// bytes (fixed tar headers, sorted files, deterministic ed25519), so a
// bundle can be rebuilt and compared.
func TestPackIsDeterministic(t *testing.T) {
	kp := newKeys(t)
	src := bundleDir(t, []byte("model"))
	a, b := pack(t, kp, src, "1.0.0", nil), pack(t, kp, src, "1.0.0", nil)
	if !bytes.Equal(a, b) {
		t.Fatal("two packs of the same folder differ")
	}
	names := []string{}
	for _, e := range readTar(t, a) {
		names = append(names, e.name)
	}
	if want := []string{ManifestName, SignatureName, "docs/README.txt", "model.gguf"}; !slices.Equal(names, want) {
		t.Fatalf("entries %v, want %v", names, want)
	}
	// A symlink in the folder is an error, not silently packed or skipped.
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := Pack(io.Discard, src, PackOptions{Name: "m", Version: "1.0.0", HealthCheck: stubHealth}, kp.priv); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("symlink packed: %v", err)
	}
}
