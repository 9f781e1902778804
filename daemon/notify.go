package daemon

import (
	"context"
	"strings"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
	"github.com/rs/zerolog"
)

// notifier sends sd_notify(3) messages to $NOTIFY_SOCKET; without it (not
// run by systemd with Type=notify) it does nothing.
type notifier struct{ log zerolog.Logger }

// send sends the lines as one datagram, e.g. "READY=1", "STATUS=...".
func (n notifier) send(lines ...string) {
	if _, err := sd.SdNotify(false, strings.Join(lines, "\n")); err != nil {
		n.log.Warn().Err(err).Str("message", lines[0]).Msg("systemd notify failed")
	}
}

// reloading returns the two lines systemd wants when a reload starts
// (Type=notify-reload): RELOADING=1 and the CLOCK_MONOTONIC time in µs.
func reloading() []string {
	lines := []string{sd.SdNotifyReloading}
	if m := strings.TrimSpace(sd.SdNotifyMonotonicUsec()); m != "" {
		lines = append(lines, m)
	}
	return lines
}

// watchdog sends WATCHDOG=1 every interval/2 for as long as alive says the
// process is doing its work, and stops pinging (so that systemd kills and
// restarts us, WatchdogSec=) when it is not. It returns when ctx ends.
func watchdog(ctx context.Context, interval time.Duration, alive func(now time.Time) bool, ping func(), log zerolog.Logger) {
	t := time.NewTicker(max(interval/2, time.Millisecond))
	defer t.Stop()
	withheld := false
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if alive(now) {
				if withheld {
					log.Warn().Msg("engine worker is alive again: watchdog pings resumed")
					withheld = false
				}
				ping()
				continue
			}
			if !withheld {
				log.Error().Dur("watchdog_ms", interval).Msg("engine worker shows no sign of life: withholding watchdog pings so that systemd restarts edgellmd")
				withheld = true
			}
		}
	}
}
