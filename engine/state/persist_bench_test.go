package state

import (
	"math/rand/v2"
	"testing"

	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// benchState prefills n random tokens of the tiny synthetic qwen35.
func benchState(b *testing.B, n int) (model.Model, model.State, []int32) {
	m := synthQwen(b, tensor.F16)
	toks := randTokens(rand.New(rand.NewPCG(20, 20)), n, m.Hyper().Vocab)
	st := m.NewState(n)
	lg := make([]float32, m.Hyper().Vocab)
	if err := m.Forward(st, model.ChainBatch(toks, 0, false), lg); err != nil {
		b.Fatal(err)
	}
	return m, st, toks
}

// BenchmarkPublish: the cost of Publish for a 512-token snapshot whose
// pages are all new (the first token differs each time), in memory only
// and with a Dir (the write itself is the writer goroutine's).
func BenchmarkPublish(b *testing.B) {
	_, st, toks := benchState(b, 512)
	for _, dir := range []bool{false, true} {
		name := "memory"
		if dir {
			name = "dir"
		}
		b.Run(name, func(b *testing.B) {
			opt := Options{MaxBytes: 64 << 20, Fingerprint: "bench", Log: testLog(b)}
			if dir {
				opt.Dir, opt.MaxDiskBytes = b.TempDir(), 1<<30
			}
			c := open(b, opt)
			defer c.Close()
			var bytes int64
			for i := 0; b.Loop(); i++ {
				toks[0] = int32(i)
				if _, err := c.Publish(toks, st); err != nil {
					b.Fatal(err)
				}
				if i == 0 {
					bytes = c.Stats().Bytes
				}
			}
			b.ReportMetric(float64(bytes)/(1<<20), "MiB/snapshot")
			if dir {
				b.ReportMetric(float64(c.Stats().DroppedWrites)/float64(b.N), "dropped/op")
			}
		})
	}
}

// BenchmarkWriteRestore: how fast the writer writes (publish then wait
// for the write and its fsync), how fast a new Open scans the files, and
// how fast a snapshot is read back from disk.
func BenchmarkWriteRestore(b *testing.B) {
	m, st, toks := benchState(b, 512)
	dir := b.TempDir()
	opt := Options{MaxBytes: 1 << 30, Dir: dir, MaxDiskBytes: 1 << 30, Fingerprint: "bench", Log: testLog(b), Model: m}
	const n = 48
	b.Run("write", func(b *testing.B) {
		var bytes int64
		for b.Loop() {
			c := open(b, opt)
			c.Clear()
			for i := range n {
				toks[0] = int32(i)
				if _, err := c.Publish(toks, st); err != nil {
					b.Fatal(err)
				}
			}
			flush(c)
			bytes = c.Stats().DiskBytes
			c.Close()
		}
		b.ReportMetric(float64(bytes)/(1<<20)/(b.Elapsed().Seconds()/float64(b.N)), "MiB/s")
	})
	for _, preload := range []bool{false, true} {
		name, o := "restore-scan", opt
		if preload {
			name = "restore-scan-preload"
		} else {
			o.MaxBytes = 1 << 10 // nothing fits in memory: the scan alone
		}
		b.Run(name, func(b *testing.B) {
			var mib float64
			for b.Loop() {
				c := open(b, o)
				s := c.Stats()
				if s.RestoredEntries != n || preload && s.Entries != n {
					b.Fatalf("restored %d of %d, %d in memory", s.RestoredEntries, n, s.Entries)
				}
				mib = float64(s.RestoredBytes) / (1 << 20)
				c.Close()
			}
			b.ReportMetric(mib, "MiB")
			b.ReportMetric(mib/(b.Elapsed().Seconds()/float64(b.N)), "MiB/s")
		})
	}
	b.Run("lookup-from-disk", func(b *testing.B) {
		small := opt
		small.MaxBytes = 1 << 10 // nothing stays in memory: every lookup reads the disk
		c := open(b, small)
		defer c.Close()
		for i := 0; b.Loop(); i++ {
			toks[0] = int32(i % n)
			if sn, ok := c.Lookup(toks, len(toks)); !ok || sn.Len != len(toks) {
				b.Fatalf("lookup %d: %d", i, sn.Len)
			}
		}
		b.ReportMetric(float64(c.Stats().DiskHits)/float64(b.N), "diskhits/op")
	})
}
