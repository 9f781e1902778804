package power

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Watch checks the power mode now and then every interval until ctx is done,
// and returns nil then. When the mode has drifted off the configured one it
// logs it, counts it in the status and, if Options.Repin, switches it back
// (a switch that needs a reboot is tried once, then only reported until the
// mode is right again). Failed checks are logged and kept in the status;
// they do not stop the watch. Off a Jetson it logs and returns at once.
//
// Watch blocks: run it in a goroutine its owner waits for (an errgroup).
func (c *Controller) Watch(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		return fmt.Errorf("power.check_interval: %s is not a positive duration", interval)
	}
	if !c.board.Jetson {
		c.log.Info().Msg("not a Jetson: power mode watch skipped")
		return nil
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	return c.watch(ctx, t.C)
}

// watch is Watch with the ticks supplied (tests send their own).
func (c *Controller) watch(ctx context.Context, ticks <-chan time.Time) error {
	for {
		c.checkDrift(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-ticks:
		}
	}
}

// checkDrift is one watch step.
func (c *Controller) checkDrift(ctx context.Context) {
	defer func() {
		if c.afterCheck != nil {
			c.afterCheck(c.Status())
		}
	}()
	c.opMu.Lock()
	defer c.opMu.Unlock()

	target, cur, err := c.currentLocked(ctx)
	if ctx.Err() != nil {
		return // shutting down: a killed command is not news
	}
	if err != nil {
		c.log.Warn().Err(err).Msg("power mode check failed")
		c.finish(err)
		return
	}
	prev := c.lastMode
	c.lastMode = &cur
	if target == nil || cur.ID == target.ID {
		c.setStatus(func(s *Status) { s.Drifted = false })
		c.finish(nil)
		return
	}

	// Off target. Count and log it when it is news: the first check, or a
	// different mode than last time.
	news := prev == nil || prev.ID != cur.ID
	c.setStatus(func(s *Status) {
		s.Drifted = true
		if news {
			s.Drifts++
		}
	})
	if news {
		c.log.Warn().Str("mode", cur.String()).Str("pinned", target.String()).Bool("repin", c.opts.Repin).
			Msg("power mode drifted")
	}
	if !c.opts.Repin {
		c.finish(nil)
		return
	}
	if c.rebootBlocked {
		return // last_error still says what the operator has to do
	}
	res, err := c.pinLocked(ctx)
	if err != nil {
		var rr *RebootRequiredError
		if errors.As(err, &rr) {
			c.log.Error().Err(err).Msg("cannot re-pin the power mode without a reboot")
		} else {
			c.log.Error().Err(err).Msg("re-pin of the power mode failed")
		}
		c.finish(err)
		return
	}
	c.lastMode = target
	c.setStatus(func(s *Status) { s.Repins++ })
	c.log.Info().Str("result", res.String()).Msg("power mode re-pinned")
	c.finish(nil)
}
