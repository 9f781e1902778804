package tensor

import (
	"sync/atomic"
	"testing"
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
