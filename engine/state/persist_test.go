package state

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/synth"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// testModel is a model with its name and the fingerprint its cache files get.
type testModel struct {
	name string
	fp   string
	m    model.Model
}

func loadGGUF(t testing.TB, path string, kv tensor.DType) model.Model {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	pool := tensor.NewPool(2)
	t.Cleanup(pool.Close)
	m, err := model.Load(f, model.Options{KVType: kv, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// synthQwen writes engine/quantize's tiny synthetic qwen35 (8 layers, 6 of
// them Gated DeltaNet) to a file and loads it.
func synthQwen(t testing.TB, kv tensor.DType) model.Model {
	t.Helper()
	w, err := synth.Build(synth.Options{Size: "tiny", Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "qwen35-tiny.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return loadGGUF(t, path, kv)
}

func testModels(t *testing.T) []testModel {
	return []testModel{
		{"stories260K/F16", "stories260K|f16", loadGGUF(t, storiesPath, tensor.F16)},
		{"qwen35-tiny/F16", "qwen35-tiny|f16", synthQwen(t, tensor.F16)},
		{"qwen35-tiny/E4M3", "qwen35-tiny|e4m3", synthQwen(t, tensor.E4M3)},
	}
}

func testLog(t testing.TB) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
}

func open(t testing.TB, opt Options) *Cache {
	t.Helper()
	opt.Log = testLog(t)
	c, err := Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.WaitRestored(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// flush waits until everything published is written and synced.
func flush(c *Cache) { c.disk.flush() }

// conversation makes agent-like prompts: a shared system prefix, then
// per conversation turns that extend the previous prompt.
func conversation(rng *rand.Rand, system []int32, turns, perTurn, vocab int) [][]int32 {
	var out [][]int32
	p := slices.Clone(system)
	for range turns {
		p = append(p, randTokens(rng, perTurn, vocab)...)
		out = append(out, slices.Clone(p))
	}
	return out
}

// continueLogits restores sn into a fresh state and returns the logits of
// rest.
func continueLogits(t *testing.T, m model.Model, sn model.Snapshot, rest []int32) []float32 {
	t.Helper()
	st := m.NewState(1024)
	if err := st.Restore(sn); err != nil {
		t.Fatal(err)
	}
	lg := make([]float32, len(rest)*m.Hyper().Vocab)
	if err := m.Forward(st, model.ChainBatch(rest, sn.Len, true), lg); err != nil {
		t.Fatal(err)
	}
	return lg
}

// TestPersistRestart: after Close and a new Open on the same directory,
// memory holds again what it held, every lookup finds what it found before
// the restart, and a snapshot read back from disk continues with the same logits, bit for bit, as the state
// it was taken from and as a cold run.
func TestPersistRestart(t *testing.T) {
	for _, tm := range testModels(t) {
		t.Run(tm.name, func(t *testing.T) {
			m, V := tm.m, tm.m.Hyper().Vocab
			rng := rand.New(rand.NewPCG(10, 10))
			system := randTokens(rng, PageSize+20, V)
			var prompts [][]int32
			prompts = append(prompts, conversation(rng, system, 3, 50, V)...)
			prompts = append(prompts, conversation(rng, system, 2, 70, V)...)
			prompts = append(prompts, randTokens(rng, 30, V)) // no full page
			dir := t.TempDir()
			opt := Options{MaxBytes: 1 << 30, Dir: dir, MaxDiskBytes: 1 << 30, Fingerprint: tm.fp, Model: m}
			c := open(t, opt)
			for _, p := range prompts {
				if ok, err := c.Publish(p, run(t, m, p)); err != nil || !ok {
					t.Fatalf("Publish: %v %v", ok, err)
				}
			}
			var queries [][]int32
			for _, p := range prompts {
				queries = append(queries, append(slices.Clone(p), randTokens(rng, 9, V)...))
			}
			queries = append(queries, append(slices.Clone(system), 1, 2, 3), randTokens(rng, 200, V))
			before := make([]model.Snapshot, len(queries))
			for i, q := range queries {
				before[i], _ = c.Lookup(q, len(q)-1)
			}
			flush(c)
			st := c.Stats()
			if st.DiskEntries != len(prompts) || st.DiskPages != st.Pages {
				t.Errorf("on disk: %d snapshots, %d pages; in memory %d, %d", st.DiskEntries, st.DiskPages, st.Entries, st.Pages)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}

			c2 := open(t, opt)
			defer c2.Close()
			st2 := c2.Stats()
			if st2.RestoredEntries != len(prompts) || st2.DiskEntries != len(prompts) || st2.SkippedRecords != 0 {
				t.Errorf("after restart: %+v", st2)
			}
			// The budget holds them all: they are read into memory at Open.
			if st2.Entries != len(prompts) || st2.Bytes != st.Bytes {
				t.Errorf("in memory after restart: %d snapshots, %d bytes; before %d, %d", st2.Entries, st2.Bytes, st.Entries, st.Bytes)
			}
			for i, q := range queries {
				sn, ok := c2.Lookup(q, len(q)-1)
				if sn.Len != before[i].Len || ok != (before[i].Len > 0) {
					t.Errorf("query %d: Lookup after restart = %d, before %d", i, sn.Len, before[i].Len)
					continue
				}
				if !ok {
					continue
				}
				rest := q[sn.Len:]
				want := continueLogits(t, m, before[i], rest)
				if got := continueLogits(t, m, sn, rest); !slices.Equal(got, want) {
					t.Errorf("query %d: logits after a restore from disk differ", i)
				}
				if i < len(prompts) {
					cold := run(t, m, q[:sn.Len])
					lc := make([]float32, len(rest)*V)
					if err := m.Forward(cold, model.ChainBatch(rest, sn.Len, true), lc); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(lc, want) {
						t.Errorf("query %d: logits from the cache differ from a cold run's", i)
					}
				}
			}
			if st := c2.Stats(); st.DiskHits != 0 {
				t.Errorf("%d lookups after restart read the disk; all were in memory", st.DiskHits)
			}
		})
	}
}

// TestSessionsSharePages: two sessions whose prompts share a prefix share
// the KV pages of that prefix (the same rows, held once), in memory and
// again after a restart, when their snapshots are read back from disk.
func TestSessionsSharePages(t *testing.T) {
	for _, tm := range testModels(t)[:2] {
		t.Run(tm.name, func(t *testing.T) {
			m, V := tm.m, tm.m.Hyper().Vocab
			rng := rand.New(rand.NewPCG(11, 11))
			common := randTokens(rng, 3*PageSize+5, V)
			a := append(slices.Clone(common), randTokens(rng, 70, V)...)
			b := append(slices.Clone(common), randTokens(rng, 100, V)...)
			opt := Options{MaxBytes: 1 << 30, Dir: t.TempDir(), MaxDiskBytes: 1 << 30, Fingerprint: tm.fp}
			check := func(c *Cache, when string) {
				sa, oka := c.Lookup(a, len(a))
				sb, okb := c.Lookup(b, len(b))
				if !oka || !okb || sa.Len != len(a) || sb.Len != len(b) {
					t.Fatalf("%s: lookups %d, %d", when, sa.Len, sb.Len)
				}
				for i := range 3 {
					if sa.KV[i] != sb.KV[i] {
						t.Errorf("%s: page %d of the common prefix is held twice", when, i)
					}
				}
				if sa.KV[3] == sb.KV[3] {
					t.Errorf("%s: the first differing page is shared", when)
				}
				if st := c.Stats(); st.Pages != 5 {
					t.Errorf("%s: %d pages held, want 5 (3 common + 1 + 1)", when, st.Pages)
				}
			}
			c := open(t, opt)
			for _, p := range [][]int32{a, b} {
				if _, err := c.Publish(p, run(t, m, p)); err != nil {
					t.Fatal(err)
				}
			}
			check(c, "in memory")
			flush(c)
			if st := c.Stats(); st.DiskPages != 5 {
				t.Errorf("%d pages on disk, want 5", st.DiskPages)
			}
			c.Close()
			c2 := open(t, opt)
			defer c2.Close()
			check(c2, "after restart")
		})
	}
}

// segments returns the paths of dir's segment files, oldest first.
func segments(t *testing.T, dir string) []string {
	t.Helper()
	ids, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, id := range ids {
		out = append(out, filepath.Join(dir, segName(id)))
	}
	return out
}

// damageSetup publishes independent prompts (no shared pages) to a new
// directory and closes it; it returns the prompts and where each one's
// records lie.
type recordSpan struct{ pages, snap diskLoc }

func damageSetup(t *testing.T, tm testModel, dir, fp string) ([][]int32, []recordSpan) {
	t.Helper()
	m, V := tm.m, tm.m.Hyper().Vocab
	var seed uint64
	for _, c := range fp {
		seed = seed*31 + uint64(c)
	}
	rng := rand.New(rand.NewPCG(12, seed))
	c := open(t, Options{MaxBytes: 1 << 30, Dir: dir, MaxDiskBytes: 1 << 30, Fingerprint: fp})
	var prompts [][]int32
	var spans []recordSpan
	for i := range 5 {
		p := randTokens(rng, PageSize+10+i, V)
		prompts = append(prompts, p)
		if _, err := c.Publish(p, run(t, m, p)); err != nil {
			t.Fatal(err)
		}
		flush(c)
		ch := Chain(p)
		c.mu.Lock()
		spans = append(spans, recordSpan{pages: c.disk.pages[ch[0]], snap: c.disk.groups[ch[0]][0].loc})
		c.mu.Unlock()
	}
	c.Close()
	return prompts, spans
}

// found reports, per prompt, whether a lookup restores all of it, and
// checks that what is restored runs like a cold prefill.
func found(t *testing.T, c *Cache, m model.Model, prompts [][]int32) []bool {
	t.Helper()
	var out []bool
	for _, p := range prompts {
		sn, ok := c.Lookup(p, len(p))
		out = append(out, ok && sn.Len == len(p))
		if ok {
			rest := []int32{3, 4, 5}
			cold := run(t, m, p[:sn.Len])
			lc := make([]float32, len(rest)*m.Hyper().Vocab)
			if err := m.Forward(cold, model.ChainBatch(rest, sn.Len, true), lc); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(continueLogits(t, m, sn, rest), lc) {
				t.Errorf("a snapshot restored after damage runs differently from a cold prefill")
			}
		}
	}
	return out
}

// TestPersistDamage: a flipped byte, a truncated segment, a segment of
// another fingerprint and a changed fingerprint cost exactly the records
// they touch; the rest is restored, nothing panics.
func TestPersistDamage(t *testing.T) {
	tm := testModels(t)[1] // qwen35: snapshots need their recurrent state
	m := tm.m
	flip := func(path string, off int64) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[off] ^= 0x10
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string, spans []recordSpan)
		fp     string // reopen with this fingerprint ("" = the same)
		want   []bool
	}{
		{"none", func(*testing.T, string, []recordSpan) {}, "", []bool{true, true, true, true, true}},
		{"snapshot payload byte", func(t *testing.T, dir string, s []recordSpan) {
			flip(segments(t, dir)[0], s[1].snap.off+s[1].snap.size-3)
		}, "", []bool{true, false, true, true, true}},
		{"page payload byte", func(t *testing.T, dir string, s []recordSpan) {
			flip(segments(t, dir)[0], s[2].pages.off+100)
		}, "", []bool{true, true, false, true, true}},
		{"record size", func(t *testing.T, dir string, s []recordSpan) {
			flip(segments(t, dir)[0], s[3].snap.off+1)
		}, "", []bool{true, true, true, false, false}},
		{"segment header", func(t *testing.T, dir string, s []recordSpan) {
			flip(segments(t, dir)[0], 10)
		}, "", []bool{false, false, false, false, false}},
		{"truncated in the last record", func(t *testing.T, dir string, s []recordSpan) {
			if err := os.Truncate(segments(t, dir)[0], s[4].snap.off+20); err != nil {
				t.Fatal(err)
			}
		}, "", []bool{true, true, true, true, false}},
		{"truncated in a page record", func(t *testing.T, dir string, s []recordSpan) {
			if err := os.Truncate(segments(t, dir)[0], s[2].pages.off+s[2].pages.size/2); err != nil {
				t.Fatal(err)
			}
		}, "", []bool{true, true, false, false, false}},
		{"fingerprint changed", func(*testing.T, string, []recordSpan) {}, "other model", []bool{false, false, false, false, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			prompts, spans := damageSetup(t, tm, dir, tm.fp)
			tc.damage(t, dir, spans)
			fp := tm.fp
			if tc.fp != "" {
				fp = tc.fp
			}
			c := open(t, Options{MaxBytes: 1 << 30, Dir: dir, MaxDiskBytes: 1 << 30, Fingerprint: fp, Model: m})
			defer c.Close()
			if got := found(t, c, m, prompts); !slices.Equal(got, tc.want) {
				t.Errorf("restored %v, want %v (stats %+v)", got, tc.want, c.Stats())
			}
			st := c.Stats()
			wantSkip := tc.name != "none"
			if skipped := st.SkippedRecords+int64(st.SkippedSegments) > 0; skipped != wantSkip {
				t.Errorf("skipped %d records, %d segments", st.SkippedRecords, st.SkippedSegments)
			}
			// The damaged directory takes new snapshots and restarts cleanly.
			p := randTokens(rand.New(rand.NewPCG(1, 2)), 2*PageSize+3, m.Hyper().Vocab)
			if _, err := c.Publish(p, run(t, m, p)); err != nil {
				t.Fatal(err)
			}
			c.Close()
			c2 := open(t, Options{MaxBytes: 1 << 30, Dir: dir, MaxDiskBytes: 1 << 30, Fingerprint: fp, Model: m})
			defer c2.Close()
			if got := found(t, c2, m, append(prompts, p)); !slices.Equal(got, append(tc.want, true)) {
				t.Errorf("after a second restart: %v, want %v", got, append(tc.want, true))
			}
		})
	}

	t.Run("segments swapped between fingerprints", func(t *testing.T) {
		dirA, dirB := t.TempDir(), t.TempDir()
		pa, _ := damageSetup(t, tm, dirA, "model A")
		pb, _ := damageSetup(t, tm, dirB, "model B")
		sa, sb := segments(t, dirA)[0], segments(t, dirB)[0]
		ba, _ := os.ReadFile(sa)
		bb, _ := os.ReadFile(sb)
		os.WriteFile(sa, bb, 0o644)
		os.WriteFile(sb, ba, 0o644)
		// Each directory also keeps one segment of its own.
		os.WriteFile(filepath.Join(dirA, segName(7)), ba, 0o644)
		c := open(t, Options{MaxBytes: 1 << 30, Dir: dirA, MaxDiskBytes: 1 << 30, Fingerprint: "model A", Model: m})
		defer c.Close()
		if got := found(t, c, m, pa); !slices.Equal(got, []bool{true, true, true, true, true}) {
			t.Errorf("model A's own segment: %v", got)
		}
		if got := found(t, c, m, pb); slices.Contains(got, true) {
			t.Errorf("model B's snapshots served to model A: %v", got)
		}
		if st := c.Stats(); st.SkippedSegments != 1 {
			t.Errorf("skipped %d segments, want 1", st.SkippedSegments)
		}
	})
}

// TestPersistLock: a second Open of a directory in use fails with
// ErrLocked; after Close it succeeds.
func TestPersistLock(t *testing.T) {
	dir := t.TempDir()
	opt := Options{MaxBytes: 1 << 20, Dir: dir, MaxDiskBytes: 1 << 20, Fingerprint: "x"}
	c := open(t, opt)
	if _, err := Open(opt); !errors.Is(err, ErrLocked) {
		t.Errorf("second Open: %v, want ErrLocked", err)
	}
	c.Close()
	c2 := open(t, opt)
	c2.Close()
}

// diskFileBytes sums the sizes of dir's segment files.
func diskFileBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	for _, p := range segments(t, dir) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// TestPersistBudgets: under a long agent-like replay (interleaved
// conversations growing turn by turn over a shared system prompt) the
// memory and disk budgets hold after every publish, the disk figures match
// the files, snapshots evicted from memory are served from disk, and after
// a restart the newest turn of every conversation is restored whole (its
// system-prompt pages were written long before, in segments since deleted,
// and were kept by copying them forward).
func TestPersistBudgets(t *testing.T) {
	tm := testModels(t)[1]
	m, V := tm.m, tm.m.Hyper().Vocab
	rng := rand.New(rand.NewPCG(13, 13))
	system := randTokens(rng, 2*PageSize, V)
	const convs, turns = 4, 7
	var conv [convs][][]int32
	for i := range conv {
		conv[i] = conversation(rng, system, turns, 40, V)
	}
	// The newest turn of every conversation, with all their pages.
	probe := New(1 << 30)
	for i := range convs {
		p := conv[i][turns-1]
		probe.Publish(p, run(t, m, p))
	}
	newest := probe.Stats().Bytes
	dir := t.TempDir()
	// Memory for about two of them; disk for all four and then some, far
	// less than the whole replay.
	opt := Options{MaxBytes: newest / 2, Dir: dir, MaxDiskBytes: newest * 3 / 2, Fingerprint: tm.fp, Model: m}
	c := open(t, opt)
	for turn := range turns {
		for i := range convs {
			p := conv[i][turn]
			if _, err := c.Publish(p, run(t, m, p)); err != nil {
				t.Fatal(err)
			}
			flush(c)
			st := c.Stats()
			if st.Bytes > st.MaxBytes {
				t.Fatalf("turn %d conv %d: %d bytes in memory, budget %d", turn, i, st.Bytes, st.MaxBytes)
			}
			if st.DiskBytes > st.MaxDiskBytes {
				t.Fatalf("turn %d conv %d: %d bytes on disk, budget %d", turn, i, st.DiskBytes, st.MaxDiskBytes)
			}
			if f := diskFileBytes(t, dir); f != st.DiskBytes {
				t.Fatalf("Stats.DiskBytes %d, files %d", st.DiskBytes, f)
			}
		}
	}
	st := c.Stats()
	if st.Evicted == 0 || st.DiskEntries <= st.Entries {
		t.Errorf("the replay did not exercise the budgets: %+v", st)
	}
	if ids, _ := listSegments(dir); ids[0] == 1 {
		t.Errorf("no segment was deleted (segments %v)", ids)
	}
	// Memory holds about two of the newest turns; the disk serves the rest.
	var last [][]int32
	for i := range convs {
		last = append(last, conv[i][turns-1])
	}
	if got := found(t, c, m, last); slices.Contains(got, false) {
		t.Errorf("newest turns found before restart: %v", got)
	}
	if c.Stats().DiskHits == st.DiskHits {
		t.Error("no snapshot evicted from memory was served from disk")
	}
	c.Close()

	c2 := open(t, opt)
	defer c2.Close()
	if got := found(t, c2, m, last); slices.Contains(got, false) {
		t.Errorf("newest turns restored after restart: %v (stats %+v)", got, c2.Stats())
	}
	if st := c2.Stats(); st.Bytes > st.MaxBytes || st.DiskBytes > st.MaxDiskBytes {
		t.Errorf("budgets after restart: %+v", st)
	}
}

// The crash test runs a child process (this test binary) that publishes
// and flushes in a loop until it is killed with SIGKILL.
const crashEnv = "EDGELLMD_STATE_CRASH_DIR"

func crashPrompt(i, V int) []int32 {
	rng := rand.New(rand.NewPCG(uint64(i), 99))
	return randTokens(rng, PageSize+rng.IntN(3*PageSize), V)
}

func crashOptions(dir string) Options {
	return Options{MaxBytes: 1 << 30, Dir: dir, MaxDiskBytes: 1 << 30, Fingerprint: "stories crash"}
}

// TestCrashChild is the child's body; it only runs with crashEnv set.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("the child of TestPersistCrash")
	}
	m := loadGGUF(t, storiesPath, tensor.F16)
	V := m.Hyper().Vocab
	c, err := Open(crashOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	var first int
	if _, err := fmt.Sscan(os.Getenv(crashEnv+"_FIRST"), &first); err != nil {
		t.Fatal(err)
	}
	for i := first; ; i++ {
		p := crashPrompt(i, V)
		if _, err := c.Publish(p, run(t, m, p)); err != nil {
			t.Fatal(err)
		}
		if i%3 == 2 {
			flush(c)
			fmt.Printf("flushed %d\n", i+1)
		}
	}
}

// TestPersistCrash: a process killed with SIGKILL at a random moment while
// it writes leaves a directory that opens cleanly, with every snapshot it
// had flushed; three crashes in a row on the same directory.
func TestPersistCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	m := loadGGUF(t, storiesPath, tensor.F16)
	V := m.Hyper().Vocab
	dir := t.TempDir()
	var want [][]int32
	for round := range 3 {
		first := 1000 * round
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir, fmt.Sprintf("%s_FIRST=%d", crashEnv, first))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		flushed := first
		for flushed < first+9 && sc.Scan() {
			fmt.Sscanf(sc.Text(), "flushed %d", &flushed)
		}
		if flushed < first+9 {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: the child stopped after %d snapshots", round, flushed-first)
		}
		if _, err := Open(crashOptions(dir)); !errors.Is(err, ErrLocked) {
			t.Errorf("round %d: Open while the child runs: %v, want ErrLocked", round, err)
		}
		time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond) // a random moment, not synchronisation
		cmd.Process.Kill()
		cmd.Wait()
		for i := first; i < flushed; i++ {
			want = append(want, crashPrompt(i, V))
		}
		c := open(t, crashOptions(dir))
		st := c.Stats()
		if st.SkippedRecords > 1 || st.SkippedSegments > 0 {
			t.Errorf("round %d: a kill damaged more than the last record: %+v", round, st)
		}
		if got := found(t, c, m, want); slices.Contains(got, false) {
			t.Errorf("round %d: flushed snapshots restored: %v", round, got)
		}
		c.Close()
	}
}

// TestPersistKeepsHotSnapshots: a snapshot that lookups keep using (a
// system prompt every conversation starts with) is rewritten before its
// segment is deleted, so it survives any number of disk turnovers and a
// restart; one nobody uses ages out.
func TestPersistKeepsHotSnapshots(t *testing.T) {
	tm := testModels(t)[1]
	m, V := tm.m, tm.m.Hyper().Vocab
	rng := rand.New(rand.NewPCG(14, 14))
	hot := randTokens(rng, 2*PageSize+7, V)
	cold := randTokens(rng, 2*PageSize+7, V)
	probe := New(1 << 30)
	probe.Publish(hot, run(t, m, hot))
	one := probe.Stats().Bytes
	dir := t.TempDir()
	opt := Options{MaxBytes: 3 * one, Dir: dir, MaxDiskBytes: 6 * one, Fingerprint: tm.fp, Model: m}
	c := open(t, opt)
	c.mu.Lock()
	c.disk.refreshEvery = 0
	c.mu.Unlock()
	for _, p := range [][]int32{hot, cold} {
		if _, err := c.Publish(p, run(t, m, p)); err != nil {
			t.Fatal(err)
		}
	}
	q := append(slices.Clone(hot), 5, 6, 7)
	for i := range 16 {
		if sn, ok := c.Lookup(q, len(q)); !ok || sn.Len != len(hot) {
			t.Fatalf("publish %d: the hot snapshot is gone (%d tokens)", i, sn.Len)
		}
		p := randTokens(rng, 2*PageSize+7, V)
		if _, err := c.Publish(p, run(t, m, p)); err != nil {
			t.Fatal(err)
		}
		flush(c)
	}
	if ids, _ := listSegments(dir); ids[0] <= 2 {
		t.Fatalf("the disk did not turn over: segments %v", ids)
	}
	c.Close()
	c2 := open(t, opt)
	defer c2.Close()
	if got := found(t, c2, m, [][]int32{hot, cold}); !slices.Equal(got, []bool{true, false}) {
		t.Errorf("after restart: hot, cold found %v, want [true false]", got)
	}
}

// TestPublishWhileRestoring: the cache takes publishes and lookups at once
// after Open, while the scan runs; nothing is lost on either side.
func TestPublishWhileRestoring(t *testing.T) {
	m := loadGGUF(t, storiesPath, tensor.F16)
	V := m.Hyper().Vocab
	rng := rand.New(rand.NewPCG(15, 15))
	var old [][]int32
	for range 20 {
		old = append(old, randTokens(rng, PageSize+rng.IntN(2*PageSize), V))
	}
	dir := t.TempDir()
	opt := Options{MaxBytes: 1 << 30, Dir: dir, MaxDiskBytes: 1 << 30, Fingerprint: "stories", Log: testLog(t)}
	c := open(t, opt)
	for _, p := range old {
		c.Publish(p, run(t, m, p))
	}
	c.Close()
	c2, err := Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	fresh := randTokens(rng, 3*PageSize, V)
	if _, err := c2.Publish(fresh, run(t, m, fresh)); err != nil {
		t.Fatal(err)
	}
	c2.Lookup(old[0], len(old[0]))
	if err := c2.WaitRestored(context.Background()); err != nil {
		t.Fatal(err)
	}
	flush(c2)
	all := append(slices.Clone(old), fresh)
	if got := found(t, c2, m, all); slices.Contains(got, false) {
		t.Errorf("during restore: %v", got)
	}
	c2.Close()
	c3 := open(t, opt)
	defer c3.Close()
	if got := found(t, c3, m, all); slices.Contains(got, false) {
		t.Errorf("after restart: %v", got)
	}
}
