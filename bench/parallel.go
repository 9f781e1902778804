package bench

import (
	"context"

	"golang.org/x/sync/errgroup"
)

// inParallel calls do(ctx, i) for i = 0 .. n-1, handed out in order of i,
// at most workers at a time (at least one), and returns once every call has
// returned. When ctx ends, the calls not started yet are skipped; those
// running see ctx ended. The agentic replay (a call per conversation) and
// the BFCL run (a call per case) share it.
func inParallel(ctx context.Context, n, workers int, do func(ctx context.Context, i int)) {
	next := make(chan int)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(next)
		for i := range n {
			select {
			case next <- i:
			case <-gctx.Done():
				return nil
			}
		}
		return nil
	})
	for range max(workers, 1) {
		g.Go(func() error {
			for i := range next {
				do(gctx, i)
			}
			return nil
		})
	}
	_ = g.Wait() // the calls never fail the group
}
