package slots

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A pool whose budget holds two states of one granule: two sequences take
// slots, a third is short of memory until one is released, and then takes
// the released slot's state as it is (no drop, no new bytes); a sequence
// larger than the budget fails at once as ErrMemory and ErrContextFull.
func TestPoolAdmitsByMemory(t *testing.T) {
	size := Size{KVPerToken: 100, Recurrent: 1000}
	budget := 2 * size.Bytes(StateGranule)
	var dropped []int
	p := New(Config{Slots: 4, ContextLen: 4096, Size: size, Budget: budget,
		Drop: func(i int) bool { dropped = append(dropped, i); return true }})
	var held []*Slot
	p.Locked(func(t2 Txn) {
		for range 2 {
			s, short, err := t2.TryAcquire(100, 40)
			if s == nil || short || err != nil {
				t.Fatalf("acquire: %v %v %v", s, short, err)
			}
			held = append(held, s)
		}
		if s, short, err := t2.TryAcquire(100, 40); s != nil || !short || err != nil {
			t.Fatalf("third: slot %v, short %v, err %v; want short of memory", s, short, err)
		}
	})
	if st := p.Stats(); st.Running != 2 || st.InUseBytes != budget || st.RunningBytes != budget {
		t.Fatalf("stats %+v", st)
	}
	if n, _ := p.Prepare(held[0]); n != StateGranule {
		t.Fatalf("state of %d tokens, want a granule (%d)", n, StateGranule)
	}
	_, err := p.Acquire(context.Background(), 3*StateGranule, 10)
	var me *MemoryError
	if !errors.Is(err, ErrMemory) || !errors.Is(err, ErrContextFull) || !errors.As(err, &me) || me.BudgetBytes != budget || me.NeedBytes != size.Bytes(3*StateGranule) {
		t.Fatalf("a sequence over the budget: %v", err)
	}

	dropped = nil // (the first states' slots were "dropped" as they had none)
	got := make(chan *Slot)
	go func() {
		s, err := p.Acquire(context.Background(), 200, 40)
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	deadline := time.Now().Add(10 * time.Second) // fails the test; not synchronisation
	for p.Stats().WaitingForMemory != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the third sequence never waited for memory")
		}
		time.Sleep(time.Millisecond)
	}
	p.Release(held[1], false)
	s := <-got
	if s != held[1] || len(dropped) != 0 {
		t.Fatalf("took slot %d (dropped %v), want the released slot %d with its state", s.Index, dropped, held[1].Index)
	}
	if st := p.Stats(); st.InUseBytes != budget || st.WaitingForMemory != 0 || st.MemoryWaits != 1 ||
		st.PeakRunning != 2 || st.PeakWaitingForMemory != 1 || st.PeakInUseBytes != budget || st.PeakRunningBytes != budget {
		t.Fatalf("after the wait: %+v", st)
	}
}

// A state too small for the next sequence is let go (Drop) and remade a
// granule larger; idle slots' states go first when the budget needs room.
func TestPoolDropsIdleStatesFirst(t *testing.T) {
	size := Size{KVPerToken: 10}
	budget := size.Bytes(3 * StateGranule)
	var dropped []int
	p := New(Config{Slots: 2, ContextLen: 4096, Size: size, Budget: budget,
		Drop: func(i int) bool { dropped = append(dropped, i); return true }})
	a, _ := p.Acquire(context.Background(), 10, 5)
	b, _ := p.Acquire(context.Background(), 10, 5)
	p.Release(a, false)
	p.Release(b, false) // b is the last used: a lone client's next sequence takes it
	dropped = nil       // (their first states' slots were "dropped" as they had none)
	c, err := p.Acquire(context.Background(), 2*StateGranule+1, 5)
	if err != nil {
		t.Fatal(err)
	}
	// c needs three granules: the budget. b's own state goes, and so must a's.
	if c != b || len(dropped) != 2 {
		t.Fatalf("took slot %d, dropped %v; want slot %d and both old states dropped", c.Index, dropped, b.Index)
	}
	if n, collect := p.Prepare(c); n != 3*StateGranule || !collect {
		t.Fatalf("state of %d tokens (collect %v), want %d and a collection first", n, collect, 3*StateGranule)
	}
	if st := p.Stats(); st.InUseBytes != budget {
		t.Fatalf("in use %d, want %d", st.InUseBytes, budget)
	}
}
