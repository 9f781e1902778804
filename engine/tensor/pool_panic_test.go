package tensor

import (
	"sync/atomic"
	"testing"
)

// TestPoolHelperPanic: a panic on a helper goroutine comes back to the
// caller of the loop as a HelperPanic (instead of ending the process), and
// the pool still works afterwards.
func TestPoolHelperPanic(t *testing.T) {
	p := NewPool(4)
	defer p.Close()
	var got any
	func() {
		defer func() { got = recover() }()
		p.parallel(64, 1, func(worker, lo, hi int) {
			if worker != 0 {
				panic("boom")
			}
			for {
				if p.fault.Load() != nil || p.next.Load() >= 64 {
					return
				}
			}
		})
	}()
	hp, ok := got.(HelperPanic)
	if !ok || hp.Value != "boom" || len(hp.Stack) == 0 {
		t.Fatalf("recovered %#v, want a HelperPanic with the value and a stack", got)
	}
	var sum atomic.Int64
	p.Run(1000, func(lo, hi int) { sum.Add(int64(hi - lo)) })
	if sum.Load() != 1000 {
		t.Fatalf("after the panic, Run covered %d of 1000", sum.Load())
	}
	// The caller's own panic unwinds after the helpers are done.
	func() {
		defer func() { got = recover() }()
		p.parallel(64, 1, func(worker, lo, hi int) {
			if worker == 0 {
				panic("caller")
			}
		})
	}()
	if got != "caller" {
		t.Fatalf("recovered %#v, want the caller's panic", got)
	}
}
