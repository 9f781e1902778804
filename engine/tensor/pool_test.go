package tensor

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestPoolRunCoversEachIndexOnce(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 4} {
		p := NewPool(threads)
		if p.Threads() != threads {
			t.Fatalf("Threads() = %d, want %d", p.Threads(), threads)
		}
		for _, n := range []int{0, 1, 2, 3, 5, 7, 16, 17, 100, 1001} {
			hits := make([]int32, n)
			var calls atomic.Int32
			p.Run(n, func(lo, hi int) {
				calls.Add(1)
				if lo < 0 || hi > n || lo >= hi {
					t.Errorf("bad range [%d,%d) for n=%d", lo, hi, n)
					return
				}
				for i := lo; i < hi; i++ {
					atomic.AddInt32(&hits[i], 1)
				}
			})
			for i, h := range hits {
				if h != 1 {
					t.Fatalf("%d threads, n=%d: index %d visited %d times", threads, n, i, h)
				}
			}
			if n > 0 && calls.Load() == 0 {
				t.Fatalf("%d threads, n=%d: fn never called", threads, n)
			}
		}
		p.Close()
		p.Close() // harmless
	}
}

// With several threads the work really is shared out: every helper takes
// part when there are enough chunks and each chunk blocks until all have
// started.
func TestPoolUsesAllWorkers(t *testing.T) {
	const threads = 3
	p := NewPool(threads)
	defer p.Close()
	var started atomic.Int32
	p.Run(4*threads, func(lo, hi int) {
		if started.Add(1) > threads {
			return
		}
		for started.Load() < threads { // wait for the other workers
		}
	})
	if started.Load() < threads {
		t.Fatalf("only %d workers ran", started.Load())
	}
}

func TestNewPoolDefaultThreads(t *testing.T) {
	p := NewPool(0)
	defer p.Close()
	if p.Threads() < 1 {
		t.Fatalf("Threads() = %d", p.Threads())
	}
}

func TestPoolRunDoesNotAllocate(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	sum := make([]int, 1000)
	fn := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			sum[i]++
		}
	}
	if a := testing.AllocsPerRun(100, func() { p.Run(len(sum), fn) }); a != 0 {
		t.Fatalf("Run allocates %g times per call", a)
	}
}

func TestPoolPanicsAfterClose(t *testing.T) {
	p := NewPool(2)
	p.Close()
	defer func() {
		if recover() == nil {
			t.Fatal("Run after Close did not panic")
		}
	}()
	p.Run(100, func(lo, hi int) {})
}

// Helpers spin for a while after a loop and then park: loops that come
// at once, after a helper parked, and while it is deciding to park, with
// all, some or none of the helpers taking part, each run every index
// once and every participant (each chunk waits until the loop's workers
// have all started, so a helper that missed its wake-up hangs the test).
func TestPoolSpinAndPark(t *testing.T) {
	const threads = 4
	p := NewPool(threads)
	defer p.Close()
	gaps := []time.Duration{0, spinWait / 2, spinWait, 2 * spinWait, 0, 3 * spinWait}
	for i := range 300 {
		time.Sleep(gaps[i%len(gaps)] + time.Duration(i%7)*time.Microsecond*20)
		chunks := 1 + i%(threads+2) // 1..threads+1 chunks: 0..threads-1 helpers
		workers := min(chunks, threads)
		var started atomic.Int32
		seen := make([]atomic.Int32, chunks)
		p.parallel(chunks, 1, func(worker, lo, hi int) {
			seen[lo].Add(1)
			if started.Add(1) > int32(workers) {
				return
			}
			deadline := time.Now().Add(10 * time.Second)
			for started.Load() < int32(workers) && time.Now().Before(deadline) {
			}
		})
		if started.Load() < int32(workers) {
			t.Fatalf("loop %d: %d of %d workers ran", i, started.Load(), workers)
		}
		for j := range seen {
			if seen[j].Load() != 1 {
				t.Fatalf("loop %d: chunk %d ran %d times", i, j, seen[j].Load())
			}
		}
	}
}

// A caller held up between announcing a loop and waking its helpers (a
// descheduled thread on a loaded machine) finds a helper that already ran
// the loop from its spin and parked again: the late token must not make
// it run the loop twice (the WaitGroup would go negative) nor be lost.
func TestPoolLateWakeToken(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	var calls atomic.Int32
	testAfterAnnounce = func() {
		if calls.Add(1)%2 == 0 {
			time.Sleep(3 * spinWait) // the helper runs the loop and parks
		}
	}
	defer func() { testAfterAnnounce = nil }()
	for i := range 40 {
		var covered atomic.Int32
		p.parallel(8, 1, func(worker, lo, hi int) { covered.Add(int32(hi - lo)) })
		if covered.Load() != 8 {
			t.Fatalf("loop %d covered %d of 8", i, covered.Load())
		}
	}
}
